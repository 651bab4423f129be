/*-------------------------------------------------------------------------
 *
 * apply.c
 *		The one transaction of a micro-batch: decode, reduce, MERGE (or
 *		append, or the user's batch function), quarantine rows, the batch
 *		marker and the new offsets.
 *
 * The caller (worker.c) has opened the transaction; everything here
 * commits or rolls back with it.  The staged batch is handed to SQL
 * through kafka_sink._batch_rows(), a set-returning function over the rows
 * in this process's memory, so no temporary table is created per batch.
 *
 * The reduce rule, which makes the MERGE deterministic: per key, the row
 * with the greatest order_column wins (NULL is lowest); among equal order
 * values the later message wins, which within a partition is the higher
 * offset.  Across batches the MERGE applies the same rule with
 * "source.order >= target.order", so the result does not depend on where
 * batch boundaries fall.
 *
 *-------------------------------------------------------------------------
 */
#include "kafka_sink.h"

#include "access/xact.h"
#include "catalog/pg_inherits.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/fmgrprotos.h"
#include "utils/json.h"
#include "utils/regproc.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/resowner.h"
#include "utils/typcache.h"

/* The rows kafka_sink._batch_rows() returns, set around each statement. */
static KsBatch *srf_batch = NULL;
static int *srf_rows = NULL;
static int	srf_nrows = 0;

Datum
kafka_sink_batch_rows(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	KsTarget   *t;
	int			natts;
	Datum	   *values;
	bool	   *nulls;

	if (srf_batch == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("there is no kafka_sink batch in this session"),
				 errhint("Only a kafka_sink pipeline worker stages batches.")));
	t = srf_batch->target;
	natts = 2 * t->ncolumns + 4;
	InitMaterializedSRF(fcinfo, MAT_SRF_USE_EXPECTED_DESC);
	if (rsinfo->setDesc->natts != natts)
		elog(ERROR, "kafka_sink: batch row descriptor mismatch");

	values = palloc(sizeof(Datum) * natts);
	nulls = palloc(sizeof(bool) * natts);
	for (int i = 0; i < srf_nrows; i++)
	{
		KsRow	   *row = &srf_batch->rows[srf_rows[i]];
		int			n = t->ncolumns;

		for (int c = 0; c < n; c++)
		{
			values[c] = row->values[c];
			nulls[c] = row->nulls[c];
			values[n + c] = BoolGetDatum(row->present[c]);
			nulls[n + c] = false;
		}
		values[2 * n] = CStringGetTextDatum(row->msg->topic);
		values[2 * n + 1] = Int32GetDatum(row->msg->partition);
		values[2 * n + 2] = Int64GetDatum(row->msg->offset);
		values[2 * n + 3] = Int32GetDatum(i);
		memset(&nulls[2 * n], 0, 4 * sizeof(bool));
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}

/* ---- statement text ---- */

static char *
source_sql(KsTarget *t)
{
	StringInfoData b;

	initStringInfo(&b);
	appendStringInfoString(&b, "SELECT * FROM kafka_sink._batch_rows() AS s(");
	for (int i = 0; i < t->ncolumns; i++)
		appendStringInfo(&b, "%s %s, ", quote_identifier(t->columns[i].name), t->columns[i].type_sql);
	for (int i = 0; i < t->ncolumns; i++)
		appendStringInfo(&b, "_ks_p%d boolean, ", i);
	appendStringInfoString(&b, "_ks_topic text, _ks_partition integer, _ks_offset bigint, _ks_seq integer)");
	return b.data;
}

/* The value to insert for column i: the message's, else the default. */
static void
append_insert_value(StringInfo b, KsColumn *c, int i)
{
	if (c->is_key || c->required)
		appendStringInfo(b, "s.%s", quote_identifier(c->name));
	else
		appendStringInfo(b, "CASE WHEN s._ks_p%d THEN s.%s ELSE %s END",
						 i, quote_identifier(c->name),
						 c->default_sql ? c->default_sql : "NULL");
}

static char *
merge_sql(KsTarget *t)
{
	StringInfoData b;
	bool		first;

	initStringInfo(&b);
	appendStringInfo(&b, "MERGE INTO %s AS t USING (%s) AS s ON ", t->qualified_name, source_sql(t));
	for (int k = 0; k < t->nkeys; k++)
	{
		const char *name = quote_identifier(t->columns[t->key_index[k]].name);

		appendStringInfo(&b, "%st.%s = s.%s", k > 0 ? " AND " : "", name, name);
	}
	appendStringInfoString(&b, " WHEN MATCHED");
	if (t->order_index >= 0)
	{
		const char *o = quote_identifier(t->columns[t->order_index].name);

		appendStringInfo(&b, " AND (t.%s IS NULL OR s.%s >= t.%s)", o, o, o);
	}
	first = true;
	for (int i = 0; i < t->ncolumns; i++)
	{
		KsColumn   *c = &t->columns[i];
		const char *name = quote_identifier(c->name);

		if (c->is_key)
			continue;
		appendStringInfo(&b, "%s%s = CASE WHEN s._ks_p%d THEN s.%s ELSE t.%s END",
						 first ? " THEN UPDATE SET " : ", ", name, i, name, name);
		first = false;
	}
	if (first)
		appendStringInfoString(&b, " THEN DO NOTHING");
	appendStringInfoString(&b, " WHEN NOT MATCHED THEN INSERT (");
	for (int i = 0; i < t->ncolumns; i++)
		appendStringInfo(&b, "%s%s", i > 0 ? ", " : "", quote_identifier(t->columns[i].name));
	appendStringInfoString(&b, ") VALUES (");
	for (int i = 0; i < t->ncolumns; i++)
	{
		if (i > 0)
			appendStringInfoString(&b, ", ");
		append_insert_value(&b, &t->columns[i], i);
	}
	appendStringInfoChar(&b, ')');
	return b.data;
}

static char *
append_sql(KsTarget *t)
{
	StringInfoData b;

	initStringInfo(&b);
	appendStringInfo(&b, "INSERT INTO %s (", t->qualified_name);
	for (int i = 0; i < t->ncolumns; i++)
		appendStringInfo(&b, "%s%s", i > 0 ? ", " : "", quote_identifier(t->columns[i].name));
	appendStringInfoString(&b, ") SELECT ");
	for (int i = 0; i < t->ncolumns; i++)
	{
		if (i > 0)
			appendStringInfoString(&b, ", ");
		append_insert_value(&b, &t->columns[i], i);
	}
	appendStringInfo(&b, " FROM (%s) AS s ORDER BY s._ks_seq", source_sql(t));
	return b.data;
}

static char *
function_sql(KsBatch *batch)
{
	KsTarget   *t = batch->target;
	StringInfoData b;
	char	   *fn = format_procedure_qualified(batch->pipeline->batch_function);
	char	   *fname = pstrdup(fn);
	char	   *paren = strchr(fname, '(');

	if (paren)
		*paren = '\0';
	initStringInfo(&b);
	appendStringInfo(&b, "SELECT %s($1::bigint, ARRAY(SELECT ROW(%s)::%s FROM (%s) AS s ORDER BY s._ks_seq))",
					 fname, t->row_sql, format_type_be_qualified(t->rowtype), source_sql(t));
	return b.data;
}

/* ---- reduce ---- */

typedef struct KeyHash
{
	FmgrInfo   *hash;			/* per key column */
	FmgrInfo   *eq;
	Oid		   *coll;
	FmgrInfo	order_cmp;
	Oid			order_coll;
	bool		has_order;
} KeyHash;

static KeyHash *
keyhash_create(KsTarget *t)
{
	KeyHash    *kh = palloc0(sizeof(KeyHash));

	kh->hash = palloc0(sizeof(FmgrInfo) * t->nkeys);
	kh->eq = palloc0(sizeof(FmgrInfo) * t->nkeys);
	kh->coll = palloc0(sizeof(Oid) * t->nkeys);
	for (int k = 0; k < t->nkeys; k++)
	{
		KsColumn   *c = &t->columns[t->key_index[k]];
		TypeCacheEntry *tc = lookup_type_cache(c->typid,
											   TYPECACHE_HASH_PROC_FINFO | TYPECACHE_EQ_OPR_FINFO);

		if (!OidIsValid(tc->hash_proc) || !OidIsValid(tc->eq_opr))
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_FUNCTION),
					 errmsg("key column \"%s\" has a type without hashing and equality", c->name),
					 errhint("Use key columns of types such as bigint, text or uuid.")));
		fmgr_info_copy(&kh->hash[k], &tc->hash_proc_finfo, CurrentMemoryContext);
		fmgr_info_copy(&kh->eq[k], &tc->eq_opr_finfo, CurrentMemoryContext);
		kh->coll[k] = c->collation;
	}
	if (t->order_index >= 0)
	{
		KsColumn   *c = &t->columns[t->order_index];
		TypeCacheEntry *tc = lookup_type_cache(c->typid, TYPECACHE_CMP_PROC_FINFO);

		if (!OidIsValid(tc->cmp_proc))
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_FUNCTION),
					 errmsg("order column \"%s\" has a type with no ordering", c->name)));
		fmgr_info_copy(&kh->order_cmp, &tc->cmp_proc_finfo, CurrentMemoryContext);
		kh->order_coll = c->collation;
		kh->has_order = true;
	}
	return kh;
}

static uint32
row_hash(KsTarget *t, KeyHash *kh, KsRow *r)
{
	uint32		h = 0;

	for (int k = 0; k < t->nkeys; k++)
	{
		int			i = t->key_index[k];
		uint32		v = DatumGetUInt32(FunctionCall1Coll(&kh->hash[k], kh->coll[k], r->values[i]));

		h = (h << 1 | h >> 31) ^ v;
	}
	return h;
}

static bool
row_key_equal(KsTarget *t, KeyHash *kh, KsRow *a, KsRow *b)
{
	if (a->hash != b->hash)
		return false;
	for (int k = 0; k < t->nkeys; k++)
	{
		int			i = t->key_index[k];

		if (!DatumGetBool(FunctionCall2Coll(&kh->eq[k], kh->coll[k], a->values[i], b->values[i])))
			return false;
	}
	return true;
}

/* True when later row b beats the current winner a. */
static bool
row_beats(KsTarget *t, KeyHash *kh, KsRow *a, KsRow *b)
{
	int			o = t->order_index;

	if (!kh->has_order)
		return true;
	if (b->nulls[o])
		return a->nulls[o];
	if (a->nulls[o])
		return true;
	return DatumGetInt32(FunctionCall2Coll(&kh->order_cmp, kh->order_coll,
										   b->values[o], a->values[o])) >= 0;
}

/*
 * Picks one winner per key among the rows that are OK, in batch order.
 * Fills winners (indexes into rows) and returns their number.
 */
static int
reduce(KsBatch *batch, KeyHash *kh, int *winners)
{
	KsTarget   *t = batch->target;
	int			size = 16;
	int		   *table;
	int			nwin = 0;

	while (size < batch->nmsgs * 2)
		size <<= 1;
	table = palloc(sizeof(int) * size);
	memset(table, -1, sizeof(int) * size);

	for (int i = 0; i < batch->nmsgs; i++)
	{
		KsRow	   *r = &batch->rows[i];
		uint32		pos;

		r->winner = false;
		if (r->reason != KS_OK)
			continue;
		r->hash = row_hash(t, kh, r);
		for (pos = r->hash & (size - 1);; pos = (pos + 1) & (size - 1))
		{
			int			w = table[pos];

			if (w < 0)
			{
				table[pos] = nwin;
				winners[nwin++] = i;
				r->winner = true;
				break;
			}
			if (row_key_equal(t, kh, &batch->rows[winners[w]], r))
			{
				if (row_beats(t, kh, &batch->rows[winners[w]], r))
				{
					batch->rows[winners[w]].winner = false;
					winners[w] = i;
					r->winner = true;
				}
				break;
			}
		}
	}
	pfree(table);
	return nwin;
}

/* ---- counting what the MERGE did ---- */

static void
xact_counts(Oid relid, int64 *inserted, int64 *updated)
{
	List	   *rels = find_all_inheritors(relid, NoLock, NULL);
	ListCell   *lc;

	*inserted = *updated = 0;
	foreach(lc, rels)
	{
		Oid			r = lfirst_oid(lc);

		*inserted += DatumGetInt64(DirectFunctionCall1(pg_stat_get_xact_tuples_inserted, ObjectIdGetDatum(r)));
		*updated += DatumGetInt64(DirectFunctionCall1(pg_stat_get_xact_tuples_updated, ObjectIdGetDatum(r)));
	}
}

/* ---- statement execution ---- */

static void
run_statement(KsBatch *batch, const char *sql, int *rows, int nrows)
{
	Oid			argtypes[1] = {INT8OID};
	Datum		values[1] = {Int64GetDatum(batch->batch_id)};
	int			rc;

	srf_batch = batch;
	srf_rows = rows;
	srf_nrows = nrows;
	PG_TRY();
	{
		rc = SPI_execute_with_args(sql, 1, argtypes, values, NULL, false, 0);
		if (rc < 0)
			elog(ERROR, "kafka_sink: SPI_execute failed (%d) for: %s", rc, sql);
	}
	PG_FINALLY();
	{
		srf_batch = NULL;
		srf_rows = NULL;
		srf_nrows = 0;
	}
	PG_END_TRY();
}

/* Runs a statement and adds what it inserted and updated to the stats. */
static void
counted_run(KsBatch *batch, const char *sql, int *rows, int nrows)
{
	int64		ins0,
				upd0,
				ins1,
				upd1;

	xact_counts(batch->target->relid, &ins0, &upd0);
	run_statement(batch, sql, rows, nrows);
	xact_counts(batch->target->relid, &ins1, &upd1);
	batch->stats.inserted += ins1 - ins0;
	batch->stats.updated += upd1 - upd0;
}

static bool
is_row_error(int sqlerrcode)
{
	int			cls = ERRCODE_TO_CATEGORY(sqlerrcode);

	return cls == ERRCODE_DATA_EXCEPTION || cls == ERRCODE_INTEGRITY_CONSTRAINT_VIOLATION;
}

/*
 * Runs sql over rows inside a subtransaction.  Returns true on success;
 * on a row-data error (class 22 or 23) returns false with the message in
 * *err; any other error is rethrown.
 */
static bool
try_statement(KsBatch *batch, const char *sql, int *rows, int nrows, char **err)
{
	MemoryContext cxt = CurrentMemoryContext;
	ResourceOwner owner = CurrentResourceOwner;
	volatile bool ok = true;

	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(cxt);
	PG_TRY();
	{
		counted_run(batch, sql, rows, nrows);
		ReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(cxt);
		CurrentResourceOwner = owner;
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		MemoryContextSwitchTo(cxt);
		edata = CopyErrorData();
		FlushErrorState();
		RollbackAndReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(cxt);
		CurrentResourceOwner = owner;
		if (!is_row_error(edata->sqlerrcode))
			ReThrowError(edata);
		*err = edata->detail ? psprintf("%s: %s", edata->message, edata->detail) : pstrdup(edata->message);
		ok = false;
	}
	PG_END_TRY();
	return ok;
}

/*
 * Applies rows with one statement; when it fails on row data, narrows down
 * row by row, quarantining the rows that fail.  Returns the number of rows
 * quarantined here (their reason is set).
 */
static int
apply_rows(KsBatch *batch, const char *sql, int *rows, int nrows)
{
	char	   *err = NULL;
	int			failed = 0;

	if (nrows == 0)
		return 0;
	if (try_statement(batch, sql, rows, nrows, &err))
		return 0;
	if (nrows == 1)
	{
		batch->rows[rows[0]].reason = KS_CONSTRAINT_VIOLATION;
		batch->rows[rows[0]].detail = err;
		return 1;
	}
	/* bisect: halves that succeed are applied, failing halves split again */
	failed += apply_rows(batch, sql, rows, nrows / 2);
	failed += apply_rows(batch, sql, rows + nrows / 2, nrows - nrows / 2);
	return failed;
}

/* ---- catalog writes of the batch ---- */

static Datum
bytea_datum(const char *data, size_t len)
{
	bytea	   *b = palloc(VARHDRSZ + len);

	SET_VARSIZE(b, VARHDRSZ + len);
	memcpy(VARDATA(b), data, len);
	return PointerGetDatum(b);
}

static void
write_quarantine(KsBatch *batch, KsRow *r)
{
	Oid			argtypes[11] = {INT8OID, INT8OID, TEXTOID, INT4OID, INT8OID, INT8OID,
	BYTEAOID, BYTEAOID, TEXTOID, TEXTOID, TEXTOID};
	Datum		v[11];
	char		n[11];
	KsMessage  *m = r->msg;
	char	   *headers = ks_message_headers_json(m);

	memset(n, ' ', sizeof(n));
	v[0] = Int64GetDatum(batch->pipeline->id);
	v[1] = Int64GetDatum(batch->batch_id);
	v[2] = CStringGetTextDatum(m->topic);
	v[3] = Int32GetDatum(m->partition);
	v[4] = Int64GetDatum(m->offset);
	v[5] = Int64GetDatum(m->timestamp_ms);
	if (m->timestamp_ms < 0)
		n[5] = 'n';
	if (m->key)
		v[6] = bytea_datum(m->key, m->key_len);
	else
		n[6] = 'n';
	if (m->value)
		v[7] = bytea_datum(m->value, m->value_len);
	else
		n[7] = 'n';
	if (headers)
		v[8] = CStringGetTextDatum(headers);
	else
		n[8] = 'n';
	v[9] = CStringGetTextDatum(ks_reason_name(r->reason));
	v[10] = CStringGetTextDatum(r->detail ? r->detail : "");
	if (SPI_execute_with_args("INSERT INTO kafka_sink.quarantine AS q"
							  " (pipeline_id, batch_id, topic, partition, message_offset, message_ts,"
							  "  key, value, headers, reason, detail)"
							  " VALUES ($1, $2, $3, $4, $5, pg_catalog.to_timestamp($6 / 1000.0), $7, $8, $9::jsonb, $10, $11)"
							  " ON CONFLICT (pipeline_id, topic, partition, message_offset) DO UPDATE"
							  " SET batch_id = excluded.batch_id, reason = excluded.reason,"
							  "     detail = excluded.detail, created_at = now(), replayed_at = NULL",
							  11, argtypes, v, n, false, 0) != SPI_OK_INSERT)
		elog(ERROR, "kafka_sink: could not write a quarantine row");
}

static void
write_marker_and_offsets(KsBatch *batch)
{
	StringInfoData ranges;
	bool		first = true;
	KsBatchStats *s = &batch->stats;

	initStringInfo(&ranges);
	appendStringInfoChar(&ranges, '[');
	for (int i = 0; i < batch->nparts; i++)
	{
		KsPartition *p = &batch->parts[i];

		if (p->end == p->committed && !p->loss)
			continue;
		if (!first)
			appendStringInfoChar(&ranges, ',');
		first = false;
		appendStringInfoString(&ranges, "{\"topic\":");
		escape_json(&ranges, p->topic);
		appendStringInfo(&ranges, ",\"partition\":%d,\"start\":%lld,\"end\":%lld,\"messages\":%lld}",
						 p->partition, (long long) p->committed, (long long) p->end,
						 (long long) p->messages);
	}
	appendStringInfoChar(&ranges, ']');

	{
		Oid			argtypes[13] = {INT8OID, INT8OID, INT4OID, TEXTOID, INT8OID, INT8OID, INT8OID,
		INT8OID, INT8OID, INT8OID, INT8OID, INT8OID, TIMESTAMPTZOID};
		Datum		v[13];

		v[0] = Int64GetDatum(batch->pipeline->id);
		v[1] = Int64GetDatum(batch->batch_id);
		v[2] = Int32GetDatum(batch->worker_index);
		v[3] = CStringGetTextDatum(ranges.data);
		v[4] = Int64GetDatum(s->messages);
		v[5] = Int64GetDatum(s->inserted);
		v[6] = Int64GetDatum(s->updated);
		v[7] = Int64GetDatum(s->deleted);
		v[8] = Int64GetDatum(s->stale);
		v[9] = Int64GetDatum(s->superseded);
		v[10] = Int64GetDatum(s->quarantined);
		v[11] = Int64GetDatum(s->bytes);
		v[12] = TimestampTzGetDatum(batch->started_at);
		if (SPI_execute_with_args("INSERT INTO kafka_sink.batches (pipeline_id, batch_id, worker, ranges,"
								  " messages, inserted, updated, deleted, stale, superseded, quarantined,"
								  " bytes, started_at) VALUES ($1, $2, $3, $4::jsonb, $5, $6, $7, $8, $9,"
								  " $10, $11, $12, $13)",
								  13, argtypes, v, NULL, false, 0) != SPI_OK_INSERT)
			elog(ERROR, "kafka_sink: could not write the batch marker");
	}

	for (int i = 0; i < batch->nparts; i++)
	{
		KsPartition *p = &batch->parts[i];
		Oid			argtypes[6] = {INT8OID, TEXTOID, INT4OID, INT8OID, INT8OID, INT8OID};
		Datum		v[6];

		if (p->loss)
		{
			Oid			largtypes[6] = {INT8OID, INT8OID, TEXTOID, INT4OID, INT8OID, INT8OID};
			Datum		lv[6];

			lv[0] = Int64GetDatum(batch->pipeline->id);
			lv[1] = Int64GetDatum(batch->batch_id);
			lv[2] = CStringGetTextDatum(p->topic);
			lv[3] = Int32GetDatum(p->partition);
			lv[4] = Int64GetDatum(p->loss_expected);
			lv[5] = Int64GetDatum(p->loss_available);
			if (SPI_execute_with_args("INSERT INTO kafka_sink.data_loss (pipeline_id, batch_id, topic,"
									  " partition, expected_offset, available_offset)"
									  " VALUES ($1, $2, $3, $4, $5, $6)",
									  6, largtypes, lv, NULL, false, 0) != SPI_OK_INSERT)
				elog(ERROR, "kafka_sink: could not record data loss");
		}
		if (p->end == p->committed)
			continue;
		v[0] = Int64GetDatum(batch->pipeline->id);
		v[1] = CStringGetTextDatum(p->topic);
		v[2] = Int32GetDatum(p->partition);
		v[3] = Int64GetDatum(p->end);
		v[4] = Int64GetDatum(batch->batch_id);
		v[5] = Int64GetDatum(p->committed);
		if (SPI_execute_with_args("UPDATE kafka_sink.offsets SET next_offset = $4, batch_id = $5,"
								  " updated_at = now()"
								  " WHERE pipeline_id = $1 AND topic = $2 AND partition = $3"
								  " AND next_offset = $6",
								  6, argtypes, v, NULL, false, 0) != SPI_OK_UPDATE)
			elog(ERROR, "kafka_sink: could not write the checkpoint");
		if (SPI_processed != 1)
			ereport(ERROR,
					(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
					 errmsg("the checkpoint of topic \"%s\" partition %d moved during the batch",
							p->topic, p->partition),
					 errdetail("Expected next offset %lld.", (long long) p->committed)));
	}
}

/*
 * Takes the next batch id.  This locks the pipeline's row until commit, and
 * fails when the pipeline is no longer running, so that no batch commits
 * after stop() or drop_pipeline() returned.
 */
static int64
next_batch_id(KsBatch *batch)
{
	Oid			argtypes[1] = {INT8OID};
	Datum		v[1] = {Int64GetDatum(batch->pipeline->id)};
	bool		isnull;

	if (SPI_execute_with_args("UPDATE kafka_sink.pipeline_definitions SET last_batch_id = last_batch_id + 1"
							  " WHERE id = $1 AND state = 'running' RETURNING last_batch_id",
							  1, argtypes, v, NULL, false, 0) != SPI_OK_UPDATE_RETURNING)
		elog(ERROR, "kafka_sink: could not take a batch id");
	if (SPI_processed != 1)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("pipeline \"%s\" is no longer running", batch->pipeline->name)));
	return DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
}

/*
 * Applies a filled batch inside the caller's transaction.
 */
void
ks_apply_batch(KsBatch *batch)
{
	KsPipeline *p = batch->pipeline;
	KsBatchStats *s = &batch->stats;
	int		   *sel;
	int			nsel = 0;

	batch->batch_id = next_batch_id(batch);
	batch->target = ks_target_open(p);
	batch->rows = palloc0(sizeof(KsRow) * Max(batch->nmsgs, 1));
	for (int i = 0; i < batch->nmsgs; i++)
	{
		batch->rows[i].msg = batch->msgs[i];
		s->bytes += batch->msgs[i]->value_len + batch->msgs[i]->key_len;
	}
	s->messages = batch->nmsgs;

	ks_decode_batch(batch->target, batch->rows, batch->nmsgs);
	ks_fault(KS_FAULT_AFTER_DECODE);

	sel = palloc(sizeof(int) * Max(batch->nmsgs, 1));
	if (batch->nmsgs > 0)
	{
		if (p->mode == KS_MODE_MERGE)
		{
			KeyHash    *kh = keyhash_create(batch->target);
			char	   *sql = merge_sql(batch->target);

			/*
			 * A winner that fails on its data is quarantined, and the next
			 * best message of its key (if any) competes again.
			 */
			for (;;)
			{
				int			failed;

				nsel = reduce(batch, kh, sel);
				/* apply only winners not applied in an earlier round */
				{
					int			n = 0;

					for (int i = 0; i < nsel; i++)
						if (batch->rows[sel[i]].next_candidate == 0)
							sel[n++] = sel[i];
					nsel = n;
				}
				failed = apply_rows(batch, sql, sel, nsel);
				for (int i = 0; i < nsel; i++)
					batch->rows[sel[i]].next_candidate = 1;
				if (failed == 0)
					break;
			}
		}
		else
		{
			char	   *sql = p->mode == KS_MODE_APPEND ? append_sql(batch->target) : function_sql(batch);

			for (int i = 0; i < batch->nmsgs; i++)
				if (batch->rows[i].reason == KS_OK)
					sel[nsel++] = i;
			if (p->mode == KS_MODE_APPEND)
				apply_rows(batch, sql, sel, nsel);
			else
				counted_run(batch, sql, sel, nsel);
		}
	}
	ks_fault(KS_FAULT_AFTER_MERGE);

	for (int i = 0; i < batch->nmsgs; i++)
	{
		KsRow	   *r = &batch->rows[i];

		if (r->reason != KS_OK)
		{
			write_quarantine(batch, r);
			s->quarantined++;
		}
		else if (p->mode == KS_MODE_MERGE && !r->winner)
			s->superseded++;
	}
	if (p->mode == KS_MODE_MERGE)
	{
		int64		winners = s->messages - s->quarantined - s->superseded;

		s->stale = Max(0, winners - s->inserted - s->updated);
	}

	write_marker_and_offsets(batch);
	ks_fault(KS_FAULT_BEFORE_COMMIT);
}
