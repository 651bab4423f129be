/*-------------------------------------------------------------------------
 *
 * dedupe.c
 *		Producer duplicates: messages whose event id (the pipeline's
 *		event_id path) was applied to the target before are marked
 *		duplicates and skipped; the ids applied are recorded, and old ones
 *		pruned, in the batch's transaction.
 *
 * Owns: the event-id rule (one id per target, across pipelines and
 * batches; an id too long is an invalid value).  Must not: apply rows.
 *
 *-------------------------------------------------------------------------
 */
#include "kafka_sink.h"
#include "dedupe.h"
#include "catalog.h"
#include "decode.h"
#include "apply.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/hsearch.h"

/* ---- producer duplicates: event ids ---- */

/*
 * Marks rows whose event id was applied before (in an earlier batch, by
 * any pipeline writing this target, or earlier in this batch).
 */
void
ks_mark_duplicates(KsBatch *batch)
{
	List	   *ids = NIL;
	HTAB	   *seen;
	HASHCTL		ctl;
	ListCell   *lc;

	memset(&ctl, 0, sizeof(ctl));
	ctl.keysize = NAMEDATALEN * 4;
	ctl.entrysize = NAMEDATALEN * 4;
	ctl.hcxt = CurrentMemoryContext;
	seen = hash_create("kafka_sink event ids", Max(batch->nmsgs, 16), &ctl,
					   HASH_ELEM | HASH_STRINGS | HASH_CONTEXT);
	for (int i = 0; i < batch->nmsgs; i++)
		if (batch->rows[i].reason == KS_OK && batch->rows[i].event_id)
			ids = lappend(ids, batch->rows[i].event_id);
	if (ids == NIL)
		return;

	foreach(lc, ks_catalog_seen_event_ids(batch->target->relid, ids))
	{
		char	   *id = lfirst(lc);

		if (strlen(id) < NAMEDATALEN * 4)
			hash_search(seen, id, HASH_ENTER, NULL);
	}
	for (int i = 0; i < batch->nmsgs; i++)
	{
		KsRow	   *r = &batch->rows[i];
		bool		found;

		if (r->reason != KS_OK || r->event_id == NULL)
			continue;
		if (strlen(r->event_id) >= NAMEDATALEN * 4)
		{
			r->reason = KS_INVALID_VALUE;
			r->detail = psprintf("the event id is longer than %d bytes", NAMEDATALEN * 4 - 1);
			continue;
		}
		hash_search(seen, r->event_id, HASH_ENTER, &found);
		if (found)
		{
			r->duplicate = true;
			batch->stats.duplicates++;
		}
	}
}

/* Records the event ids of the rows applied, and prunes old ones now and then. */
void
ks_record_event_ids(KsBatch *batch)
{
	List	   *ids = NIL;

	for (int i = 0; i < batch->nmsgs; i++)
	{
		KsRow	   *r = &batch->rows[i];

		if (r->reason == KS_OK && !r->duplicate && r->event_id)
			ids = lappend(ids, r->event_id);
	}
	if (ids != NIL)
		ks_catalog_record_event_ids(batch->target->relid, ids, batch->batch_id);
	/* bounded retention; deleting only old rows never blocks new inserts */
	if (batch->batch_id % 64 == 0)
		ks_catalog_prune_event_ids(batch->target->relid, batch->pipeline->contract.event_id_retention_s);
}

