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

static Datum
text_array(List *texts)
{
	Datum	   *elems = palloc(sizeof(Datum) * Max(list_length(texts), 1));
	ListCell   *lc;
	int			i = 0;

	foreach(lc, texts)
		elems[i++] = CStringGetTextDatum((char *) lfirst(lc));
	return PointerGetDatum(construct_array(elems, i, TEXTOID, -1, false, TYPALIGN_INT));
}

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
	Oid			argtypes[2] = {OIDOID, TEXTARRAYOID};
	Datum		values[2];

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

	values[0] = ObjectIdGetDatum(batch->target->relid);
	values[1] = text_array(ids);
	if (SPI_execute_with_args("SELECT event_id FROM kafka_sink.event_ids"
							  " WHERE target = $1 AND event_id = ANY ($2)",
							  2, argtypes, values, NULL, true, 0) != SPI_OK_SELECT)
		elog(ERROR, "kafka_sink: could not read event ids");
	for (uint64 r = 0; r < SPI_processed; r++)
	{
		char	   *id = SPI_getvalue(SPI_tuptable->vals[r], SPI_tuptable->tupdesc, 1);

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
	Oid			argtypes[3] = {OIDOID, TEXTARRAYOID, INT8OID};
	Datum		values[3];

	for (int i = 0; i < batch->nmsgs; i++)
	{
		KsRow	   *r = &batch->rows[i];

		if (r->reason == KS_OK && !r->duplicate && r->event_id)
			ids = lappend(ids, r->event_id);
	}
	values[0] = ObjectIdGetDatum(batch->target->relid);
	values[1] = text_array(ids);
	values[2] = Int64GetDatum(batch->batch_id);
	if (ids != NIL &&
		SPI_execute_with_args("INSERT INTO kafka_sink.event_ids (target, event_id, batch_id)"
							  " SELECT $1, unnest($2), $3 ON CONFLICT DO NOTHING",
							  3, argtypes, values, NULL, false, 0) != SPI_OK_INSERT)
		elog(ERROR, "kafka_sink: could not record event ids");
	/* bounded retention; deleting only old rows never blocks new inserts */
	if (batch->batch_id % 64 == 0)
	{
		Oid			pargtypes[2] = {OIDOID, INT8OID};
		Datum		pvalues[2];

		pvalues[0] = ObjectIdGetDatum(batch->target->relid);
		pvalues[1] = Int64GetDatum(batch->pipeline->event_id_retention_s);
		SPI_execute_with_args("DELETE FROM kafka_sink.event_ids WHERE target = $1"
							  " AND seen_at < now() - $2 * interval '1 second'",
							  2, pargtypes, pvalues, NULL, false, 0);
	}
}

