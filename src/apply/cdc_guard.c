/*-------------------------------------------------------------------------
 *
 * cdc_guard.c
 *		The guards of change events (envelope debezium) across batches:
 *		truncates, and the positions of deleted keys, so that replayed
 *		older events neither survive a truncate nor bring a deleted row
 *		back.
 *
 * Within a batch the reduce orders a key's events by their source
 * position (reduce.c); across batches the MERGE's order guard keeps a
 * newer row, and these rules do the rest, in the batch's transaction:
 *
 * - a truncate at position T deletes the target's rows whose position is
 *   < T (or null) and records T (kafka_sink.cdc_deletions, key null);
 *   with delete_mode soft it marks them deleted and sets their position
 *   to T instead;
 * - a delete at position P deletes the row only if its position is < P
 *   (or null) (ks_delete_sql) and records P for its key;
 * - an upsert at position Q applies only if Q is greater than the key's
 *   recorded delete and the target's recorded truncate: else it is stale;
 * - mode history records every truncate instead (key {"truncate": P},
 *   never pruned), which history.c folds in as a delete of every key.
 *
 * Deleted keys are pruned after the pipeline's event_id_retention (the
 * truncate row, one per target, is kept).  See docs/design/cdc.md,
 * "The guards".
 *
 * Owns: those rules.  Must not: decode (envelope_debezium.c) or choose
 * winners (reduce.c).
 *
 *-------------------------------------------------------------------------
 */
#include "kafka_sink.h"
#include "spi.h"
#include "pipeline.h"
#include "catalog_guard.h"
#include "cdc_guard.h"
#include "catalog.h"
#include "statements.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "lib/stringinfo.h"
#include "utils/builtins.h"
#include "utils/json.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/numeric.h"
#include "utils/timestamp.h"

/* A row's key as the JSON array of its key columns' texts: how cdc_deletions names it. */
static char *
key_text(KsTarget *t, KsRow *r)
{
	StringInfoData b;

	initStringInfo(&b);
	appendStringInfoChar(&b, '[');
	for (int k = 0; k < t->nkeys; k++)
	{
		KsColumn   *c = &t->columns[t->key_index[k]];
		Oid			out;
		bool		varlena;

		getTypeOutputInfo(c->typid, &out, &varlena);
		if (k > 0)
			appendStringInfoString(&b, ", ");
		escape_json(&b, OidOutputFunctionCall(out, r->values[t->key_index[k]]));
	}
	appendStringInfoChar(&b, ']');

	/*
	 * jsonb's canonical text of the array (escape_json, ", "): the column is
	 * text compared bytewise, and the 0.3.0 update converted the keys
	 * recorded as jsonb with key::text, so both must agree byte for byte
	 */
	return b.data;
}

static char *
position_text(KsTarget *t, KsRow *r)
{
	return DatumGetCString(DirectFunctionCall1(numeric_out, r->values[t->order_index]));
}

static int
cmp_positions(const char *a, const char *b)
{
	Datum		x = DirectFunctionCall3(numeric_in, CStringGetDatum(a), ObjectIdGetDatum(InvalidOid), Int32GetDatum(-1));
	Datum		y = DirectFunctionCall3(numeric_in, CStringGetDatum(b), ObjectIdGetDatum(InvalidOid), Int32GetDatum(-1));

	return DatumGetInt32(DirectFunctionCall2(numeric_cmp, x, y));
}

/*
 * Runs the truncate at position pos (its Kafka timestamp ts_ms, -1 for
 * none) on the batch's target and records it.
 */
static void
run_truncate(KsBatch *batch, char *pos, int64 ts_ms)
{
	KsPipeline *p = batch->pipeline;
	KsTarget   *t = batch->target;
	Oid			argtypes[2] = {NUMERICOID, TIMESTAMPTZOID};
	Datum		values[2];
	char		nulls[2] = {' ', ts_ms >= 0 ? ' ' : 'n'};
	int			catalog_writes;
	int			rc;

	values[0] = DirectFunctionCall3(numeric_in, CStringGetDatum(pos),
									ObjectIdGetDatum(InvalidOid), Int32GetDatum(-1));
	values[1] = TimestampTzGetDatum(ts_ms >= 0 ? ks_epoch_ms_to_timestamptz(ts_ms) : 0);
	/* the target's triggers are the user's code: no catalog writes there */
	catalog_writes = ks_catalog_writes_suspend();
	PG_TRY();
	{
		/* delete_mode soft: an UPDATE marking the rows, $2 its timestamp */
		rc = ks_spi_execute(ks_truncate_sql(t), t->soft ? 2 : 1, argtypes, values, nulls, false, 0);
		if (rc != (t->soft ? SPI_OK_UPDATE : SPI_OK_DELETE))
			elog(ERROR, "kafka_sink: SPI_execute failed (%d) for a truncate", rc);
		if (t->soft)
			batch->stats.soft_deleted += SPI_processed;
		else
			batch->stats.deleted += SPI_processed;
	}
	PG_FINALLY();
	{
		ks_catalog_writes_restore(catalog_writes);
	}
	PG_END_TRY();
	ks_catalog_cdc_record(p->id, t->relid, list_make1(pstrdup("null")), list_make1(pos), NIL);
}

/*
 * The batch's truncates: on_truncate fail fails the batch, ignore skips
 * them, apply runs the newest (older rows go whatever the order of the
 * truncates).  delete_mode soft leaves those to apply unskipped: each
 * runs in its segment round (ks_cdc_truncate_row), as its marks depend on
 * what the upserts before it wrote.
 */
void
ks_cdc_truncates(KsBatch *batch)
{
	KsPipeline *p = batch->pipeline;
	KsTarget   *t = batch->target;
	char	   *newest = NULL;
	int64		newest_ts = -1;

	for (int i = 0; i < batch->nmsgs; i++)
	{
		KsRow	   *r = &batch->rows[i];
		char	   *pos;

		if (r->reason != KS_OK || !r->is_truncate)
			continue;
		if (p->contract.on_truncate == KS_TRUNCATE_FAIL)
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("pipeline \"%s\" received a truncate of its source table and on_truncate is fail",
							p->name),
					 errdetail("The truncate is at offset %lld of partition %d of topic \"%s\".",
							   (long long) r->msg->offset, r->msg->partition, r->msg->topic),
					 errhint("To go on, alter the pipeline with on_truncate => 'apply' or 'ignore' and resume it, "
							 "or move its offsets past the event with kafka_sink.reset_offsets.")));
		if (t->soft && p->contract.on_truncate == KS_TRUNCATE_APPLY)
			continue;
		r->skipped = true;		/* counted as superseded, whatever it does */
		if (p->contract.on_truncate == KS_TRUNCATE_IGNORE)
			continue;
		pos = position_text(t, r);
		if (newest == NULL || cmp_positions(pos, newest) > 0)
		{
			newest = pos;
			newest_ts = r->msg->timestamp_ms;
		}
	}
	if (newest != NULL)
		run_truncate(batch, newest, newest_ts);
}

/*
 * Mode history, on_truncate apply (docs/history.md): records every
 * truncate of the batch's target in cdc_deletions, each under its own key
 * {"truncate": position} (never pruned: a key whose events come later
 * still meets them), for history.c to fold in as a delete of every key.
 * Returns the earliest position, or NULL when the batch has none.
 */
char *
ks_cdc_history_truncates(KsBatch *batch)
{
	KsTarget   *t = batch->target;
	List	   *keys = NIL;
	List	   *positions = NIL;
	List	   *times = NIL;
	char	   *earliest = NULL;

	for (int i = 0; i < batch->nmsgs; i++)
	{
		KsRow	   *r = &batch->rows[i];
		char	   *pos;
		StringInfoData k;

		if (r->reason != KS_OK || !r->is_truncate)
			continue;
		r->skipped = true;		/* counted as superseded, as in mode merge */
		pos = position_text(t, r);
		{
			bool		seen = false;
			ListCell   *lc;

			/* a re-sent copy: one key once per statement (ON CONFLICT) */
			foreach(lc, positions)
				seen |= strcmp((char *) lfirst(lc), pos) == 0;
			if (seen)
				continue;
		}
		initStringInfo(&k);
		appendStringInfoString(&k, "{\"truncate\": ");
		escape_json(&k, pos);
		appendStringInfoChar(&k, '}');
		keys = lappend(keys, k.data);
		positions = lappend(positions, pos);
		/* its commit time, for _valid_from_at ("" for none) */
		times = lappend(times, t->at_index < 0 || r->nulls[t->at_index] ? "" :
						DatumGetCString(DirectFunctionCall1(timestamptz_out, r->values[t->at_index])));
		if (earliest == NULL || cmp_positions(pos, earliest) < 0)
			earliest = pos;
	}
	if (keys != NIL)
		ks_catalog_cdc_record(batch->pipeline->id, t->relid, keys, positions, t->at_index >= 0 ? times : NIL);
	return earliest;
}

/* delete_mode soft: the truncate of row i, in its round */
void
ks_cdc_truncate_row(KsBatch *batch, int i)
{
	KsRow	   *r = &batch->rows[i];

	r->skipped = true;			/* counted as superseded, whatever it does */
	run_truncate(batch, position_text(batch->target, r), r->msg->timestamp_ms);
}

void
ks_cdc_record_deletes(KsBatch *batch, int *dels, int ndels)
{
	KsTarget   *t = batch->target;
	List	   *keys = NIL;
	List	   *positions = NIL;

	for (int i = 0; i < ndels; i++)
	{
		KsRow	   *r = &batch->rows[dels[i]];

		if (r->reason != KS_OK || r->nulls[t->order_index])
			continue;
		keys = lappend(keys, key_text(t, r));
		positions = lappend(positions, position_text(t, r));
	}
	if (keys != NIL)
		ks_catalog_cdc_record(batch->pipeline->id, t->relid, keys, positions, NIL);
	/* bounded retention, as for event ids */
	if (batch->batch_id % 64 == 0)
		ks_catalog_cdc_prune(batch->pipeline->id, t->relid, batch->pipeline->contract.event_id_retention_s);
}

/* A recorded delete (cdc_deletions): its key's text and its position. */
typedef struct FoundKey
{
	const char *key;
	Datum		position;		/* numeric */
} FoundKey;

static int
cmp_found(const void *a, const void *b)
{
	return strcmp(((const FoundKey *) a)->key, ((const FoundKey *) b)->key);
}

static Datum
numeric_of(const char *text)
{
	return DirectFunctionCall3(numeric_in, CStringGetDatum(text),
							   ObjectIdGetDatum(InvalidOid), Int32GetDatum(-1));
}

/*
 * Drops from sel the upserts that a recorded delete of their key, or the
 * target's recorded truncate, makes stale; returns how many are left.
 * One read of cdc_deletions per call; the keys found are sorted and
 * searched (a batch of n keys with m recorded deletes costs n log m, not
 * n * m), and each position is compared as the numeric it is.
 */
int
ks_cdc_drop_stale(KsBatch *batch, int *sel, int nsel)
{
	KsTarget   *t = batch->target;
	List	   *keys = list_make1(pstrdup("null"));
	List	   *found_keys;
	List	   *found_positions;
	char	  **texts = palloc(sizeof(char *) * Max(nsel, 1));
	FoundKey   *found;
	int			nfound = 0;
	bool		truncated = false;
	Datum		truncate_pos = (Datum) 0;
	int			n = 0;

	if (nsel == 0)
		return 0;
	for (int i = 0; i < nsel; i++)
	{
		KsRow	   *r = &batch->rows[sel[i]];

		/* the key as cdc_deletions holds it (key_text's canonical text) */
		texts[i] = r->nulls[t->order_index] ? NULL : key_text(t, r);
		if (texts[i])
			keys = lappend(keys, texts[i]);
	}
	ks_catalog_cdc_positions(batch->pipeline->id, t->relid, keys, &found_keys, &found_positions);
	found = palloc(sizeof(FoundKey) * Max(list_length(found_keys), 1));
	for (int j = 0; j < list_length(found_keys); j++)
	{
		const char *k = list_nth(found_keys, j);
		Datum		pos = numeric_of(list_nth(found_positions, j));

		if (strcmp(k, "null") == 0)
		{
			truncated = true;
			truncate_pos = pos;
			continue;
		}
		found[nfound].key = k;
		found[nfound++].position = pos;
	}
	if (nfound > 1)
		qsort(found, nfound, sizeof(FoundKey), cmp_found);
	for (int i = 0; i < nsel; i++)
	{
		KsRow	   *r = &batch->rows[sel[i]];
		Datum		pos;
		FoundKey	probe;
		FoundKey   *hit;
		bool		stale = false;

		if (texts[i] == NULL || (!truncated && nfound == 0))
		{
			sel[n++] = sel[i];
			continue;
		}
		pos = r->values[t->order_index];
		if (truncated &&
			DatumGetInt32(DirectFunctionCall2(numeric_cmp, pos, truncate_pos)) <= 0)
			stale = true;
		probe.key = texts[i];
		if (!stale && nfound > 0 &&
			(hit = bsearch(&probe, found, nfound, sizeof(FoundKey), cmp_found)) != NULL &&
			DatumGetInt32(DirectFunctionCall2(numeric_cmp, pos, hit->position)) <= 0)
			stale = true;
		if (stale)
		{
			r->next_candidate = 1;	/* a winner that applies nothing: stale */
			continue;
		}
		sel[n++] = sel[i];
	}
	return n;
}
