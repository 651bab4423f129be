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

#include "access/heapam.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/pg_inherits.h"
#include "catalog/pg_type.h"
#include "executor/executor.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "lib/stringinfo.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "optimizer/optimizer.h"
#include "rewrite/rewriteHandler.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/guc.h"
#include "utils/array.h"
#include "utils/hsearch.h"
#include "utils/jsonb.h"
#include "utils/timestamp.h"
#include "utils/fmgrprotos.h"
#include "utils/json.h"
#include "utils/regproc.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/resowner.h"
#include "utils/rls.h"
#include "utils/ruleutils.h"
#include "utils/syscache.h"
#include "catalog/pg_operator.h"
#include "access/htup_details.h"
#include "utils/sortsupport.h"
#include "utils/typcache.h"

/* The rows kafka_sink._batch_rows() returns, set around each statement. */
static KsBatch *srf_batch = NULL;
static int *srf_rows = NULL;
static int	srf_nrows = 0;

PG_FUNCTION_INFO_V1(kafka_sink_batch_rows);
PG_FUNCTION_INFO_V1(kafka_sink_batch_messages);
PG_FUNCTION_INFO_V1(kafka_sink_replay);

/*
 * The columns of the tuples kafka_sink._batch_rows() builds: the target's
 * columns with their types and typmods, a "present" flag per column, then
 * the message's topic, partition, offset, sequence and timestamp.
 * source_sql() declares exactly these.
 */
static KsSrfColumn *
batch_rows_columns(KsTarget *t, int *ncols)
{
	int			n = t->ncolumns;
	KsSrfColumn *cols = palloc(sizeof(KsSrfColumn) * (2 * n + 5 + t->nprov));
	int			next = 2 * n + 5;
	static const KsSrfColumn tail[5] = {
		{"_ks_topic", TEXTOID, -1}, {"_ks_partition", INT4OID, -1}, {"_ks_offset", INT8OID, -1},
		{"_ks_seq", INT4OID, -1}, {"_ks_ts", TIMESTAMPTZOID, -1}};

	for (int c = 0; c < n; c++)
	{
		cols[c].name = t->columns[c].name;
		cols[c].typid = t->columns[c].typid;
		cols[c].typmod = t->columns[c].typmod;
		cols[n + c].name = psprintf("_ks_p%d", c);
		cols[n + c].typid = BOOLOID;
		cols[n + c].typmod = -1;
	}
	memcpy(&cols[2 * n], tail, sizeof(tail));
	/* the order value of the message that supplied each optional column */
	for (int c = 0; c < n; c++)
		if (t->columns[c].prov >= 0)
		{
			cols[next].name = psprintf("_ks_o%d", c);
			cols[next].typid = t->columns[t->order_index].typid;
			cols[next].typmod = t->columns[t->order_index].typmod;
			next++;
		}
	Assert(next == 2 * n + 5 + t->nprov);
	*ncols = next;
	return cols;
}

/*
 * kafka_sink._batch_rows(): the staged rows of the batch this process is
 * applying, for the statements of apply.c (source_sql).
 * Checks: a batch is being applied by this process (the worker's, or
 * _replay's in this session): srf_batch is only set while one of our
 * statements runs, so a call from elsewhere, a later trigger or another
 * session finds none; the caller's column definition list is exactly the
 * batch's columns (count, types, typmods), since the tuples are built with
 * it.  A user's batch function or trigger that calls it during the batch
 * with the right list gets the same rows, which it could read anyway.
 */
Datum
kafka_sink_batch_rows(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	KsTarget   *t;
	int			natts;
	Datum	   *values;
	bool	   *nulls;
	Datum	   *topics;
	KsSrfColumn *cols;

	ks_srf_check_context(fcinfo, "kafka_sink._batch_rows()");
	ks_require_batch(srf_batch != NULL && srf_batch->target != NULL,
					 "kafka_sink._batch_rows()", "the decoded rows");
	t = srf_batch->target;
	cols = batch_rows_columns(t, &natts);
	ks_srf_check_record(fcinfo, "kafka_sink._batch_rows()", cols, natts);
	InitMaterializedSRF(fcinfo, MAT_SRF_USE_EXPECTED_DESC);
	Assert(rsinfo->setDesc->natts == natts);

	values = palloc(sizeof(Datum) * natts);
	nulls = palloc(sizeof(bool) * natts);
	/* one text datum per partition's topic, not one per row */
	topics = palloc0(sizeof(Datum) * Max(srf_batch->nparts, 1));
	for (int i = 0; i < srf_nrows; i++)
	{
		KsRow	   *row = &srf_batch->rows[srf_rows[i]];
		int			n = t->ncolumns;
		int			part = row->msg->part_index;

		for (int c = 0; c < n; c++)
		{
			/* a folded winner: each column from the message supplying it */
			KsRow	   *src = row;

			if (row->fold_src != NULL)
				src = row->fold_src[c] >= 0 ? &srf_batch->rows[row->fold_src[c]] : NULL;
			values[c] = src ? src->values[c] : (Datum) 0;
			nulls[c] = src ? src->nulls[c] : true;
			values[n + c] = BoolGetDatum(src ? src->present[c] : false);
			nulls[n + c] = false;
			if (t->columns[c].prov >= 0)
			{
				int			o = t->order_index;
				int			pc = 2 * n + 5 + t->columns[c].prov;

				values[pc] = src ? src->values[o] : (Datum) 0;
				nulls[pc] = src ? src->nulls[o] : true;
			}
		}
		if (part >= 0 && part < srf_batch->nparts)
		{
			if (topics[part] == (Datum) 0)
				topics[part] = CStringGetTextDatum(row->msg->topic);
			values[2 * n] = topics[part];
		}
		else
			values[2 * n] = CStringGetTextDatum(row->msg->topic);
		values[2 * n + 1] = Int32GetDatum(row->msg->partition);
		values[2 * n + 2] = Int64GetDatum(row->msg->offset);
		values[2 * n + 3] = Int32GetDatum(i);
		memset(&nulls[2 * n], 0, 5 * sizeof(bool));
		if (row->msg->timestamp_ms >= 0)
			values[2 * n + 4] = TimestampTzGetDatum(time_t_to_timestamptz(row->msg->timestamp_ms / 1000) +
													(row->msg->timestamp_ms % 1000) * 1000);
		else
			nulls[2 * n + 4] = true;
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}

/* ---- statement text ---- */

/*
 * The columns of a staged batch, "(name type, ..., _ks_p0 boolean, ...)":
 * the record kafka_sink._batch_rows() returns, and the staging table that
 * kafka_sink.pipeline_statements() tells a user to fill to run a statement
 * by hand.
 */
static char *
batch_columns_sql(KsTarget *t)
{
	StringInfoData b;

	initStringInfo(&b);
	appendStringInfoChar(&b, '(');
	for (int i = 0; i < t->ncolumns; i++)
		appendStringInfo(&b, "%s %s, ", quote_identifier(t->columns[i].name), t->columns[i].type_sql);
	for (int i = 0; i < t->ncolumns; i++)
		appendStringInfo(&b, "_ks_p%d boolean, ", i);
	appendStringInfoString(&b, "_ks_topic text, _ks_partition integer, _ks_offset bigint, _ks_seq integer,"
						   " _ks_ts timestamptz");
	/* the order value of the message that supplied each optional column */
	for (int i = 0; i < t->ncolumns; i++)
		if (t->columns[i].prov >= 0)
			appendStringInfo(&b, ", _ks_o%d %s", i, t->columns[t->order_index].type_sql);
	appendStringInfoChar(&b, ')');
	return b.data;
}

/* The staging table of a statement run by hand (pipeline_statements()). */
#define KS_BY_HAND_STAGING "pg_temp.kafka_sink_batch"

/*
 * The batch source of the statements: the worker's staged rows, or (by
 * hand) a staging table with the same columns.
 */
static char *
source_sql(KsTarget *t, bool by_hand)
{
	if (by_hand)
		return pstrdup("SELECT * FROM " KS_BY_HAND_STAGING " AS s");
	return psprintf("SELECT * FROM kafka_sink._batch_rows() AS s%s", batch_columns_sql(t));
}

/* The value to insert for column i: the message's, else the default. */
static void
append_insert_value(StringInfo b, KsColumn *c, int i)
{
	if (c->lineage)
		appendStringInfoString(b, c->lineage);
	else if (c->is_key || c->required)
		appendStringInfo(b, "s.%s", quote_identifier(c->name));
	else
		appendStringInfo(b, "CASE WHEN s._ks_p%d THEN s.%s ELSE %s END",
						 i, quote_identifier(c->name),
						 c->default_sql ? c->default_sql : "NULL");
}

/* OPERATOR(schema.op) of an operator */
static char *
qualified_operator(Oid opno)
{
	HeapTuple	tup = SearchSysCache1(OPEROID, ObjectIdGetDatum(opno));
	Form_pg_operator op;
	char	   *res;

	if (!HeapTupleIsValid(tup))
		elog(ERROR, "cache lookup failed for operator %u", opno);
	op = (Form_pg_operator) GETSTRUCT(tup);
	res = psprintf("OPERATOR(%s.%s)", quote_identifier(get_namespace_name(op->oprnamespace)),
				   NameStr(op->oprname));
	ReleaseSysCache(tup);
	return res;
}

/*
 * "t.k1 = s.k1 AND ...": a target row and a batch row of the same key, as
 * the key index compares them.  When the index's collation or operator
 * class is not the column's own, the batch side says so (COLLATE, and
 * OPERATOR(...) for a non-default equality): the comparison is then the
 * index's, and the index still serves it.
 */
static void
append_key_match(StringInfo b, KsTarget *t)
{
	for (int k = 0; k < t->nkeys; k++)
	{
		KsColumn   *c = &t->columns[t->key_index[k]];
		const char *name = quote_identifier(c->name);
		TypeCacheEntry *tc = lookup_type_cache(c->typid, TYPECACHE_EQ_OPR);

		appendStringInfo(b, "%st.%s ", k > 0 ? " AND " : "", name);
		if (OidIsValid(c->key_eq_opr) && c->key_eq_opr != tc->eq_opr)
			appendStringInfoString(b, qualified_operator(c->key_eq_opr));
		else
			appendStringInfoChar(b, '=');
		appendStringInfo(b, " s.%s", name);
		if (OidIsValid(c->key_collation) && c->key_collation != c->collation)
			appendStringInfo(b, " COLLATE %s", generate_collation_name(c->key_collation));
	}
}

static char *
merge_sql(KsTarget *t, bool by_hand)
{
	StringInfoData b;
	bool		first;

	initStringInfo(&b);
	appendStringInfo(&b, "MERGE INTO %s AS t USING (%s) AS s ON ", t->qualified_name, source_sql(t, by_hand));
	append_key_match(&b, t);
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
		if (c->lineage)
			appendStringInfo(&b, "%s%s = %s", first ? " THEN UPDATE SET " : ", ", name, c->lineage);
		else if (c->prov >= 0)
		{
			const char *o = quote_identifier(t->columns[t->order_index].name);

			/* the message that supplied the column applies, by the guard */
			appendStringInfo(&b, "%s%s = CASE WHEN s._ks_p%d AND (t.%s IS NULL OR s._ks_o%d >= t.%s)"
							 " THEN s.%s ELSE t.%s END",
							 first ? " THEN UPDATE SET " : ", ", name, i, o, i, o, name, name);
		}
		else
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
delete_sql(KsTarget *t, bool by_hand)
{
	StringInfoData b;

	initStringInfo(&b);
	appendStringInfo(&b, "DELETE FROM %s AS t USING (%s) AS s WHERE ", t->qualified_name, source_sql(t, by_hand));
	append_key_match(&b, t);
	return b.data;
}

static char *
append_sql(KsTarget *t, bool by_hand)
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
	appendStringInfo(&b, " FROM (%s) AS s ORDER BY s._ks_seq", source_sql(t, by_hand));
	return b.data;
}

static char *
function_sql(KsBatch *batch, bool by_hand)
{
	KsTarget   *t = batch->target;
	StringInfoData b;
	Oid			fn = batch->pipeline->batch_function;
	char	   *nspname = get_namespace_name(get_func_namespace(fn));
	char	   *proname = get_func_name(fn);
	char	   *fname;

	/*
	 * From the pg_proc row, each part quoted: cutting the text of
	 * format_procedure at "(" breaks on a schema or function name holding
	 * one.  The argument types come from the call ($1 bigint, the row array).
	 */
	if (nspname == NULL || proname == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_FUNCTION),
				 errmsg("batch function of pipeline \"%s\" no longer exists", batch->pipeline->name),
				 errhint("Drop the pipeline and create it again for the new function.")));
	fname = quote_qualified_identifier(nspname, proname);
	initStringInfo(&b);
	appendStringInfo(&b, "SELECT %s($1::bigint, ARRAY(SELECT ROW(%s)::%s FROM (%s) AS s ORDER BY s._ks_seq))",
					 fname, t->row_sql, format_type_be_qualified(t->rowtype), source_sql(t, by_hand));
	return b.data;
}

/* ---- reduce ---- */

typedef struct KeyHash
{
	FmgrInfo   *hash;			/* per key column */
	FmgrInfo   *eq;
	SortSupportData *ssup;		/* btree order, to apply in key order */
	bool		sortable;
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
	kh->ssup = palloc0(sizeof(SortSupportData) * t->nkeys);
	kh->sortable = true;
	kh->coll = palloc0(sizeof(Oid) * t->nkeys);
	for (int k = 0; k < t->nkeys; k++)
	{
		KsColumn   *c = &t->columns[t->key_index[k]];
		TypeCacheEntry *tc = lookup_type_cache(c->typid,
											   TYPECACHE_HASH_PROC_FINFO | TYPECACHE_EQ_OPR_FINFO);
		Oid			lt_opr;

		if (OidIsValid(c->key_eq_opr))
		{
			/* the key index's equality (decode.c checked that it hashes) */
			RegProcedure lhs,
						rhs;

			if (!get_op_hash_functions(c->key_eq_opr, &lhs, &rhs))
				elog(ERROR, "kafka_sink: the key index's equality cannot be hashed");
			fmgr_info(lhs, &kh->hash[k]);
			fmgr_info(get_opcode(c->key_eq_opr), &kh->eq[k]);
			lt_opr = c->key_lt_opr;
		}
		else
		{
			if (!OidIsValid(tc->hash_proc) || !OidIsValid(tc->eq_opr))
				ereport(ERROR,
						(errcode(ERRCODE_UNDEFINED_FUNCTION),
						 errmsg("key column \"%s\" has a type without hashing and equality", c->name),
						 errhint("Use key columns of types such as bigint, text or uuid.")));
			fmgr_info_copy(&kh->hash[k], &tc->hash_proc_finfo, CurrentMemoryContext);
			fmgr_info_copy(&kh->eq[k], &tc->eq_opr_finfo, CurrentMemoryContext);
			lt_opr = lookup_type_cache(c->typid, TYPECACHE_LT_OPR)->lt_opr;
		}
		/* keys are one when the key index says so: its collation */
		kh->coll[k] = c->key_collation;
		if (OidIsValid(lt_opr))
		{
			/* sort support: int8 keys compare without a function call */
			kh->ssup[k].ssup_cxt = CurrentMemoryContext;
			kh->ssup[k].ssup_collation = c->key_collation;
			kh->ssup[k].ssup_nulls_first = false;
			PrepareSortSupportFromOrderingOp(lt_opr, &kh->ssup[k]);
		}
		else
			kh->sortable = false;
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
 * Folds the rows that are OK into one row per key, in batch order, so
 * that the MERGE of a batch gives what applying its messages one at a time
 * gives, wherever the batch boundaries fall (docs/design-notes.md,
 * "Partial messages fold in order").  Applying one at a time, a message
 * applies iff its order value is >= the row's (NULL lowest); so within a
 * batch it can only apply if it is >= every earlier message of its key: a
 * candidate.  The candidates' order values only grow, so the ones that
 * apply are those >= the target row's order T, a suffix of them.  Each
 * column ends with the value of the last applying message in which the
 * field is present: the last candidate presenting it if that candidate
 * is >= T, else none.  The winner is the last candidate (it carries the
 * greatest order, ties to the later offset, and the lineage); fold_src
 * names, per column, the last candidate presenting it, whose order value
 * the MERGE compares with T (merge_sql()).  Key columns keep the first
 * candidate's value: the message that inserts the row writes the key.
 * A tombstone (is_delete) ends the fold of its key: it is recorded in
 * deletes (the last one per key), and only messages after it fold.
 * Fills winners and deletes (indexes into rows) and returns the number of
 * winners; *ndeletes gets the number of deletes.
 */
static int
reduce(KsBatch *batch, KeyHash *kh, int *winners, int *deletes, int *ndeletes)
{
	KsTarget   *t = batch->target;
	int			size = 16;
	int		   *table;			/* key -> index into keys */
	int		   *win;			/* per key: winning row or -1 */
	int		   *del;			/* per key: last tombstone row or -1 */
	int		   *first;			/* per key: a row carrying the key */
	int		  **src;			/* per key: its fold, NULL while one candidate */
	int			nkeys = 0;
	int			nwin = 0;

	while (size < batch->nmsgs * 2)
		size <<= 1;
	table = palloc(sizeof(int) * size);
	memset(table, -1, sizeof(int) * size);
	win = palloc(sizeof(int) * Max(batch->nmsgs, 1));
	del = palloc(sizeof(int) * Max(batch->nmsgs, 1));
	first = palloc(sizeof(int) * Max(batch->nmsgs, 1));
	src = palloc(sizeof(int *) * Max(batch->nmsgs, 1));

	for (int i = 0; i < batch->nmsgs; i++)
	{
		KsRow	   *r = &batch->rows[i];
		uint32		pos;
		int			k = -1;

		r->winner = false;
		r->fold_src = NULL;
		if (r->reason != KS_OK || r->duplicate)
			continue;
		r->hash = row_hash(t, kh, r);
		for (pos = r->hash & (size - 1);; pos = (pos + 1) & (size - 1))
		{
			if (table[pos] < 0)
			{
				k = nkeys++;
				table[pos] = k;
				win[k] = -1;
				del[k] = -1;
				first[k] = i;
				src[k] = NULL;
				break;
			}
			if (row_key_equal(t, kh, &batch->rows[first[table[pos]]], r))
			{
				k = table[pos];
				break;
			}
		}
		if (r->is_delete)
		{
			del[k] = i;
			win[k] = -1;		/* whatever came before is deleted */
			src[k] = NULL;
		}
		else if (win[k] < 0)
			win[k] = i;
		else if (row_beats(t, kh, &batch->rows[win[k]], r))
		{
			/* a second candidate: from now on the key's columns are a fold */
			if (src[k] == NULL)
			{
				KsRow	   *w = &batch->rows[win[k]];

				src[k] = palloc(sizeof(int) * Max(t->ncolumns, 1));
				for (int c = 0; c < t->ncolumns; c++)
					src[k][c] = w->present[c] ? win[k] : -1;
			}
			for (int c = 0; c < t->ncolumns; c++)
				if (r->present[c] && !(t->columns[c].is_key && src[k][c] >= 0))
					src[k][c] = i;
			win[k] = i;
		}
	}
	*ndeletes = 0;
	for (int k = 0; k < nkeys; k++)
	{
		if (win[k] >= 0)
		{
			batch->rows[win[k]].winner = true;
			batch->rows[win[k]].fold_src = src[k];
			winners[nwin++] = win[k];
		}
		if (del[k] >= 0)
			deletes[(*ndeletes)++] = del[k];
	}
	pfree(table);
	pfree(win);
	pfree(del);
	pfree(first);
	pfree(src);
	return nwin;
}

/*
 * Orders rows by key.  The MERGE then probes the target's unique index in
 * index order, which touches each index page once instead of at random
 * (measured: 36-50% less time for the same MERGE), and two pipelines whose
 * batches share keys lock them in the same order, so they cannot deadlock.
 */
typedef struct SortArg
{
	KsBatch    *batch;
	KeyHash    *kh;
} SortArg;

static int
cmp_rows_by_key(const void *a, const void *b, void *arg)
{
	SortArg    *sa = arg;
	KsTarget   *t = sa->batch->target;
	KsRow	   *x = &sa->batch->rows[*(const int *) a];
	KsRow	   *y = &sa->batch->rows[*(const int *) b];

	for (int k = 0; k < t->nkeys; k++)
	{
		int			i = t->key_index[k];
		int			r = ApplySortComparator(x->values[i], x->nulls[i], y->values[i], y->nulls[i],
											&sa->kh->ssup[k]);

		if (r != 0)
			return r;
	}
	return 0;
}

/* a single key column: its value next to the row, so sorting reads no row */
typedef struct KeyedRow
{
	Datum		key;
	int			row;
} KeyedRow;

static int
cmp_keyed_rows(const void *a, const void *b, void *arg)
{
	const KeyedRow *x = a;
	const KeyedRow *y = b;

	return ApplySortComparator(x->key, false, y->key, false, (SortSupport) arg);
}

static void
sort_by_key(KsBatch *batch, KeyHash *kh, int *rows, int nrows)
{
	SortArg		sa = {batch, kh};
	KsTarget   *t = batch->target;

	if (!kh->sortable || nrows < 2)
		return;
	if (t->nkeys == 1)
	{
		int			k = t->key_index[0];
		KeyedRow   *keyed = palloc(sizeof(KeyedRow) * nrows);

		/* key columns are never NULL in a row that applies */
		for (int i = 0; i < nrows; i++)
		{
			keyed[i].key = batch->rows[rows[i]].values[k];
			keyed[i].row = rows[i];
		}
		qsort_arg(keyed, nrows, sizeof(KeyedRow), cmp_keyed_rows, &kh->ssup[0]);
		for (int i = 0; i < nrows; i++)
			rows[i] = keyed[i].row;
		pfree(keyed);
	}
	else
		qsort_arg(rows, nrows, sizeof(int), cmp_rows_by_key, &sa);
}

/*
 * The MERGE (and the tombstones' DELETE) join the batch to the target on
 * the key.  With the key's unique index the plan to have is a nested loop
 * of index probes, fed in key order: its cost grows with the batch, not
 * with the table.  The planner, which guesses the batch's size, picks a
 * hash join over a sequential scan of the whole target while the table is
 * small next to that guess, so a few 100,000 rows in, each batch of a
 * thousand messages cost tens of milliseconds more per 100,000 target rows
 * (docs/performance.md).  Hash and merge joins are therefore switched off
 * for these statements, as a SET clause on a function would: returns the
 * GUC nest level to restore with AtEOXact_GUC(), or 0 when nothing was
 * set (no such index: then the planner's choice stands).  An error on the
 * way rolls the settings back with the (sub)transaction.
 */
static int
pin_key_probe_plan(KsTarget *t)
{
	int			level;

	if (t->key_index_name == NULL)
		return 0;
	level = NewGUCNestLevel();
	(void) set_config_option("enable_hashjoin", "off", PGC_USERSET, PGC_S_SESSION,
							 GUC_ACTION_SAVE, true, 0, false);
	(void) set_config_option("enable_mergejoin", "off", PGC_USERSET, PGC_S_SESSION,
							 GUC_ACTION_SAVE, true, 0, false);
	return level;
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

/*
 * The worker's prepared statements, by their text: the MERGE (and DELETE,
 * INSERT or batch function call) of a target is prepared once and runs
 * every batch from PostgreSQL's plan cache, which re-plans it by itself
 * after a change to the table.  The text names the target and its
 * columns as they are when the batch starts, so a renamed table or a
 * changed column list is a new text, and a new statement.
 */
#define KS_PLAN_CACHE 16
static struct
{
	char	   *sql;
	SPIPlanPtr	plan;
}			plan_cache[KS_PLAN_CACHE];
static int	plan_cache_next = 0;

static SPIPlanPtr
prepared(const char *sql, int nargs, Oid *argtypes)
{
	SPIPlanPtr	plan;
	int			slot;

	for (int i = 0; i < KS_PLAN_CACHE; i++)
		if (plan_cache[i].sql != NULL && strcmp(plan_cache[i].sql, sql) == 0)
			return plan_cache[i].plan;
	plan = SPI_prepare(sql, nargs, argtypes);
	if (plan == NULL)
		elog(ERROR, "kafka_sink: SPI_prepare failed (%s) for: %s",
			 SPI_result_code_string(SPI_result), sql);
	if (SPI_keepplan(plan) != 0)
		elog(ERROR, "kafka_sink: SPI_keepplan failed");
	slot = plan_cache_next;
	plan_cache_next = (plan_cache_next + 1) % KS_PLAN_CACHE;
	if (plan_cache[slot].sql != NULL)
	{
		SPI_freeplan(plan_cache[slot].plan);
		pfree(plan_cache[slot].sql);
	}
	plan_cache[slot].sql = MemoryContextStrdup(TopMemoryContext, sql);
	plan_cache[slot].plan = plan;
	return plan;
}

static void
run_statement(KsBatch *batch, const char *sql, int *rows, int nrows)
{
	Oid			argtypes[1] = {INT8OID};
	Datum		values[1] = {Int64GetDatum(batch->batch_id)};
	int			rc;
	int			catalog_writes;

	srf_batch = batch;
	srf_rows = rows;
	srf_nrows = nrows;
	/* the user's triggers, defaults and batch function may not write the catalog */
	catalog_writes = ks_catalog_writes_suspend();
	PG_TRY();
	{
		rc = SPI_execute_plan(prepared(sql, 1, argtypes), values, NULL, false, 0);
		if (rc < 0)
			elog(ERROR, "kafka_sink: SPI_execute failed (%d) for: %s", rc, sql);
	}
	PG_FINALLY();
	{
		ks_catalog_writes_restore(catalog_writes);
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

/*
 * Whose fault is an error: the SQLSTATE table
 *
 * An error of a statement applying rows is the fault of the rows it was
 * given (the statement is narrowed down to single rows, which are
 * quarantined with a reason, and the batch goes on) or of the system (the
 * error goes up to the worker, which retries a transient one and fails the
 * pipeline on a permanent one, see is_transient() in worker.c).  Decided by
 * class, so that every code of a class is treated alike; the few
 * exceptions are by code and by evidence, never by message text:
 *
 *   22 data exception, 23 integrity constraint  row: constraint_violation
 *      (but 23505 on the key index from a concurrent writer: transient)
 *   54 program limit (54000: an index row too big) row: value_too_large,
 *      54xxx others (a trigger recursing too deep) row: rejected_by_target
 *   P0 PL/pgSQL RAISE/ASSERT (a trigger said no)  row: rejected_by_target
 *   44 WITH CHECK OPTION of a view                row: rejected_by_target
 *   27 triggered data change violation            row: rejected_by_target
 *   42501 raised by the statement itself while the owner holds every
 *      privilege it needs on the target: a row level security WITH CHECK
 *      policy rejecting the row                   row: rejected_by_target
 *   42501 otherwise (a privilege is missing, or a function the statement
 *      ran lacks one)                             system, permanent
 *   everything else (42, 0A, 25, 2F, 38, 39, XX, ...)   system: transient
 *      or permanent as worker.c decides
 *
 * "Raised by the statement itself" versus "inside a function it ran" (a
 * trigger, a default, a policy expression) is read off the error's context:
 * statement_call() pushes a context line of its own, so lines before it,
 * other than SPI's line quoting the statement, are frames of functions the
 * statement called (raised_in_function()).
 */
#define KS_STATEMENT_CONTEXT "kafka_sink statement applying rows"

/*
 * Whether the error was raised inside a function the statement sql called.
 * The context lines before ours are, innermost first, the frames of the
 * functions the statement ran, then SPI's line quoting sql itself: so the
 * error is the statement's own when nothing but (the line holding) sql comes
 * before ours.
 */
static bool
raised_in_function(ErrorData *edata, const char *sql)
{
	const char *ours;
	const char *stmt;

	if (edata->context == NULL)
		return false;
	ours = strstr(edata->context, KS_STATEMENT_CONTEXT);
	if (ours == NULL)
		return true;
	stmt = strstr(edata->context, sql);
	if (stmt == NULL || stmt > ours)
		return ours > edata->context;
	return memchr(edata->context, '\n', stmt - edata->context) != NULL;
}

/* Whether the owner holds every privilege in needs on the whole relation. */
static bool
owner_holds(Oid relid, AclMode needs)
{
	AclMode		modes[] = {ACL_SELECT, ACL_INSERT, ACL_UPDATE, ACL_DELETE};

	for (int i = 0; i < (int) lengthof(modes); i++)
		if ((needs & modes[i]) &&
			pg_class_aclcheck(relid, GetUserId(), modes[i]) != ACLCHECK_OK &&
			pg_attribute_aclcheck_all(relid, GetUserId(), modes[i], ACLMASK_ALL) != ACLCHECK_OK)
			return false;
	return true;
}

/*
 * The quarantine reason when the error is the fault of the rows the
 * statement was given, KS_OK when it is the system's (see the table above).
 * needs: the privileges the statement needs on the target.
 */
static KsReason
row_fault(KsBatch *batch, ErrorData *edata, const char *sql, AclMode needs)
{
	int			code = edata->sqlerrcode;

	switch (ERRCODE_TO_CATEGORY(code))
	{
		case ERRCODE_DATA_EXCEPTION:
		case ERRCODE_INTEGRITY_CONSTRAINT_VIOLATION:
			return KS_CONSTRAINT_VIOLATION;
		case ERRCODE_PROGRAM_LIMIT_EXCEEDED:
			return code == ERRCODE_PROGRAM_LIMIT_EXCEEDED ? KS_VALUE_TOO_LARGE : KS_REJECTED_BY_TARGET;
		case ERRCODE_PLPGSQL_ERROR:
		case ERRCODE_WITH_CHECK_OPTION_VIOLATION:
		case ERRCODE_TRIGGERED_DATA_CHANGE_VIOLATION:
			return KS_REJECTED_BY_TARGET;
	}
	if (code == ERRCODE_INSUFFICIENT_PRIVILEGE && !raised_in_function(edata, sql) &&
		owner_holds(batch->target->relid, needs))
		return KS_REJECTED_BY_TARGET;
	return KS_OK;
}

/*
 * Rethrows an error that is not a row's fault.  A name that does not
 * resolve inside a function the statement ran (a trigger function saying
 * INSERT INTO audit) is most likely resolved through search_path, which the
 * worker pins: that gets a hint.
 */
static void
rethrow_system_error(ErrorData *edata, const char *sql)
{
	int			code = edata->sqlerrcode;

	if ((code == ERRCODE_UNDEFINED_TABLE || code == ERRCODE_UNDEFINED_FUNCTION ||
		 code == ERRCODE_UNDEFINED_OBJECT) && raised_in_function(edata, sql) && edata->hint == NULL)
		edata->hint = pstrdup("Functions run for the target (trigger functions, defaults, checks, policies)"
							  " run with kafka_sink's search_path, pg_catalog, pg_temp:"
							  " schema-qualify the names they use, or give the function its own"
							  " SET search_path.");
	ReThrowError(edata);
}

/*
 * Runs sql over rows inside a subtransaction.  Returns true on success; on
 * an error that is the rows' fault (row_fault()) returns false with the
 * reason in *reason and the message in *err; any other error is rethrown.
 */
typedef struct StatementCall
{
	KsBatch    *batch;
	const char *sql;
	int		   *rows;
	int			nrows;
	bool		deletes;		/* count what it deletes, not inserts/updates */
} StatementCall;

static void
statement_context(void *arg)
{
	(void) arg;
	errcontext(KS_STATEMENT_CONTEXT);
}

static void
statement_call(void *arg)
{
	StatementCall *c = arg;
	ErrorContextCallback cb;

	cb.callback = statement_context;
	cb.arg = NULL;
	cb.previous = error_context_stack;
	error_context_stack = &cb;
	if (c->deletes)
	{
		run_statement(c->batch, c->sql, c->rows, c->nrows);
		c->batch->stats.deleted += SPI_processed;
	}
	else
		counted_run(c->batch, c->sql, c->rows, c->nrows);
	error_context_stack = cb.previous;
}

static bool
try_statement(KsBatch *batch, const char *sql, int *rows, int nrows, AclMode needs,
			  KsReason *reason, char **err)
{
	StatementCall call = {batch, sql, rows, nrows, (needs & ACL_DELETE) != 0};
	ErrorData  *edata = ks_try_subxact(statement_call, &call);

	if (edata == NULL)
		return true;
	if (edata->sqlerrcode == ERRCODE_UNIQUE_VIOLATION && edata->constraint_name &&
		batch->target->key_index_name &&
		strcmp(edata->constraint_name, batch->target->key_index_name) == 0)
		ereport(ERROR,
				(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
				 errmsg("a concurrent transaction inserted a key of this batch into %s",
						batch->target->qualified_name),
				 errdetail("%s", edata->message)));
	*reason = row_fault(batch, edata, sql, needs);
	if (*reason == KS_OK)
		rethrow_system_error(edata, sql);
	*err = edata->detail ? psprintf("%s: %s", edata->message, edata->detail) : pstrdup(edata->message);
	return false;
}

/*
 * Applies rows with one statement; when it fails through the fault of its
 * rows, narrows down by bisection, quarantining the rows that fail alone.
 * A row is quarantined only on its own failure, so a trigger that rejects
 * every row quarantines every row (each was rejected), while an error that
 * is not a row's fault fails the batch at the first statement.  needs: the
 * privileges the statement needs on the target (ACL_DELETE: it deletes).
 * Returns the number of rows quarantined here (their reason is set).
 */
static int
apply_rows(KsBatch *batch, const char *sql, int *rows, int nrows, AclMode needs)
{
	char	   *err = NULL;
	KsReason	reason = KS_OK;
	int			failed = 0;

	if (nrows == 0)
		return 0;
	if (try_statement(batch, sql, rows, nrows, needs, &reason, &err))
		return 0;
	if (nrows == 1)
	{
		batch->rows[rows[0]].reason = reason;
		batch->rows[rows[0]].detail = err;
		return 1;
	}
	/* bisect: halves that succeed are applied, failing halves split again */
	failed += apply_rows(batch, sql, rows, nrows / 2, needs);
	failed += apply_rows(batch, sql, rows + nrows / 2, nrows - nrows / 2, needs);
	return failed;
}

/*
 * Runs the batch function: not narrowed, since the function decides for
 * the whole batch (it may aggregate, or act once per call).  Its errors are
 * the system's whatever their class; only the search_path hint is added.
 */
static void
run_batch_function(KsBatch *batch, const char *sql, int *rows, int nrows)
{
	StatementCall call = {batch, sql, rows, nrows, false};
	ErrorData  *edata = ks_try_subxact(statement_call, &call);

	if (edata != NULL)
		rethrow_system_error(edata, sql);
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

/*
 * Dead-letter messages carry the quarantine's detail in a header, cut to
 * this many bytes (a detail can quote a long value; the full text stays in
 * kafka_sink.quarantine).
 */
#define KS_DLQ_DETAIL_MAX 1024

typedef struct HeaderArrays
{
	int			n;
	int			cap;
	Datum	   *names;
	Datum	   *values;
	bool	   *nulls;
} HeaderArrays;

static void
add_header(HeaderArrays *h, const char *name, const char *value, size_t len)
{
	int			nlen = strlen(name);

	if (h->n == h->cap)
	{
		h->cap = h->cap ? h->cap * 2 : 16;
		h->names = h->names ? repalloc(h->names, sizeof(Datum) * h->cap) : palloc(sizeof(Datum) * h->cap);
		h->values = h->values ? repalloc(h->values, sizeof(Datum) * h->cap) : palloc(sizeof(Datum) * h->cap);
		h->nulls = h->nulls ? repalloc(h->nulls, sizeof(bool) * h->cap) : palloc(sizeof(bool) * h->cap);
	}
	/*
	 * A header name is text; one that is not valid in the database encoding
	 * (Kafka's clients send UTF-8, but librdkafka takes any bytes) is kept
	 * as \x and its bytes in hex, as kafka_sink.quarantine.headers does.
	 */
	if (pg_verify_mbstr(GetDatabaseEncoding(), name, nlen, true))
		h->names[h->n] = CStringGetTextDatum(name);
	else
	{
		StringInfoData b;

		initStringInfo(&b);
		appendStringInfoString(&b, "\\x");
		for (int i = 0; i < nlen; i++)
			appendStringInfo(&b, "%02x", (unsigned char) name[i]);
		h->names[h->n] = CStringGetTextDatum(b.data);
	}
	h->nulls[h->n] = value == NULL;
	h->values[h->n] = value ? bytea_datum(value, len) : (Datum) 0;
	h->n++;
}

static void
add_header_str(HeaderArrays *h, const char *name, const char *value)
{
	add_header(h, name, value, strlen(value));
}

/*
 * The extension's owner: the dead-letter row is written with its rights,
 * as kafka_sink.outbox_send (SECURITY DEFINER) writes the rows of others,
 * since members of kafka_sink_admin may not write the outbox themselves.
 */
static Oid
extension_owner(void)
{
	bool		isnull;
	Datum		d;

	if (SPI_execute("SELECT extowner FROM pg_catalog.pg_extension WHERE extname = 'kafka_sink'",
					true, 1) != SPI_OK_SELECT || SPI_processed != 1)
		elog(ERROR, "kafka_sink: could not find the extension's owner");
	d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
	return DatumGetObjectId(d);
}

/*
 * Queues the dead-letter message of a quarantined message in the outbox,
 * in the batch's transaction: the relay publishes it only if the batch
 * commits, once per quarantine write (at least once, with a stable event
 * id).  Key and value are the message's bytes, unchanged; its headers
 * come first, in their order, then kafka_sink.*, then (added by the
 * relay) event_id, so that a consumer that reads the last header of a
 * name gets kafka_sink's.
 */
static void
write_dead_letter(KsBatch *batch, KsRow *r, int64 quarantine_id)
{
	KsPipeline *p = batch->pipeline;
	KsMessage  *m = r->msg;
	HeaderArrays h = {0};
	ListCell   *lc;
	const char *detail = r->detail ? r->detail : "";
	size_t		dlen = strlen(detail);
	Oid			argtypes[7] = {TEXTOID, BYTEAOID, BYTEAOID, TEXTARRAYOID, BYTEAARRAYOID, TEXTOID, INT8OID};
	Datum		v[7];
	char		n[7];
	int			dims[1];
	int			lbs[1] = {1};
	Oid			owner = extension_owner();
	Oid			save_userid;
	int			save_sec;

	/*
	 * Cut a long detail, on a UTF-8 character boundary (the detail can quote
	 * bytes of the message, so it is not trusted to be valid: no
	 * pg_mbcliplen, which could step over the end of a bad sequence).
	 */
	if (dlen > KS_DLQ_DETAIL_MAX)
	{
		dlen = KS_DLQ_DETAIL_MAX;
		while (dlen > 0 && ((unsigned char) detail[dlen] & 0xC0) == 0x80)
			dlen--;
	}

	foreach(lc, ks_message_headers(m))
	{
		KsHeader   *x = lfirst(lc);

		add_header(&h, x->name, x->value, x->value_len);
	}
	add_header_str(&h, "kafka_sink.pipeline", p->name);
	add_header_str(&h, "kafka_sink.topic", m->topic);
	add_header_str(&h, "kafka_sink.partition", psprintf("%d", m->partition));
	add_header_str(&h, "kafka_sink.offset", psprintf(INT64_FORMAT, m->offset));
	if (m->timestamp_ms >= 0)
		add_header_str(&h, "kafka_sink.timestamp", psprintf(INT64_FORMAT, m->timestamp_ms));
	add_header_str(&h, "kafka_sink.reason", ks_reason_name(r->reason));
	add_header(&h, "kafka_sink.detail", detail, dlen);
	add_header_str(&h, "kafka_sink.batch_id", psprintf(INT64_FORMAT, batch->batch_id));
	add_header_str(&h, "kafka_sink.quarantine_id", psprintf(INT64_FORMAT, quarantine_id));

	memset(n, ' ', sizeof(n));
	dims[0] = h.n;
	v[0] = CStringGetTextDatum(p->dead_letter_topic);
	if (m->key)
		v[1] = bytea_datum(m->key, m->key_len);
	else
		n[1] = 'n';
	if (m->value)
		v[2] = bytea_datum(m->value, m->value_len);
	else
		n[2] = 'n';
	v[3] = PointerGetDatum(construct_md_array(h.names, NULL, 1, dims, lbs, TEXTOID, -1, false, TYPALIGN_INT));
	v[4] = PointerGetDatum(construct_md_array(h.values, h.nulls, 1, dims, lbs, BYTEAOID, -1, false, TYPALIGN_INT));
	v[5] = CStringGetTextDatum(GetUserNameFromId(GetUserId(), false));
	v[6] = Int64GetDatum(quarantine_id);

	GetUserIdAndSecContext(&save_userid, &save_sec);
	SetUserIdAndSecContext(owner, save_sec | SECURITY_LOCAL_USERID_CHANGE | SECURITY_RESTRICTED_OPERATION);
	PG_TRY();
	{
		if (SPI_execute_with_args("INSERT INTO kafka_sink.outbox"
								  " (topic, key_bytes, value_bytes, header_names, header_values, created_by,"
								  "  quarantine_id)"
								  " VALUES ($1, $2, $3, $4, $5, $6, $7)",
								  7, argtypes, v, n, false, 0) != SPI_OK_INSERT)
			elog(ERROR, "kafka_sink: could not queue a dead-letter message");
	}
	PG_FINALLY();
	{
		SetUserIdAndSecContext(save_userid, save_sec);
	}
	PG_END_TRY();
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
							  "     detail = excluded.detail, created_at = now(), replayed_at = NULL"
							  " RETURNING q.id",
							  11, argtypes, v, n, false, 0) != SPI_OK_INSERT_RETURNING ||
		SPI_processed != 1)
		elog(ERROR, "kafka_sink: could not write a quarantine row");
	if (batch->pipeline->dead_letter_topic)
	{
		bool		isnull;
		int64		qid = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));

		write_dead_letter(batch, r, qid);
	}
}

/* {"topic": {"0": n, ...}, ...} of one offset field of the partitions. */
static void
append_offsets(StringInfo b, KsBatch *batch, int which)
{
	const char *topic = NULL;

	appendStringInfoChar(b, '{');
	for (int i = 0; i < batch->nparts; i++)
	{
		KsPartition *p = &batch->parts[i];
		int64		v = which == 0 ? p->committed : which == 1 ? p->end : p->latest;

		if (topic == NULL || strcmp(topic, p->topic) != 0)
		{
			if (topic != NULL)
				appendStringInfoString(b, "},");
			escape_json(b, p->topic);
			appendStringInfoString(b, ":{");
			topic = p->topic;
		}
		else
			appendStringInfoChar(b, ',');
		appendStringInfo(b, "\"%d\":", p->partition);
		if (v < 0)
			appendStringInfoString(b, "null");
		else
			appendStringInfo(b, INT64_FORMAT, v);
	}
	if (topic != NULL)
		appendStringInfoChar(b, '}');
	appendStringInfoChar(b, '}');
}

static double
ms_between(TimestampTz a, TimestampTz b)
{
	return a == 0 || b == 0 ? 0 : (double) (b - a) / 1000.0;
}

/*
 * The batch's progress record, shaped like Spark's StreamingQueryProgress:
 * batchId, numInputRows, rates, durationMs by phase, sources[] with start,
 * end and latest offsets and the lag metrics, and the sink's counts.
 * "commit" is the time spent writing quarantine rows, the marker and the
 * checkpoint, up to (not including) the COMMIT itself.
 */
static char *
progress_json(KsBatch *batch)
{
	StringInfoData b;
	KsBatchStats *s = &batch->stats;
	KsPipeline *p = batch->pipeline;
	TimestampTz now = GetCurrentTimestamp();
	double		fetch_ms = ms_between(batch->fetch_started_at, batch->fetch_ended_at);
	double		commit_ms = ms_between(batch->commit_started_at, now);
	double		process_ms = batch->decode_ms + batch->apply_ms + commit_ms;
	double		since_prev = ms_between(batch->previous_commit_at ? batch->previous_commit_at : batch->fetch_started_at, now);
	int64		behind_sum = 0,
				behind_max = 0;
	int			nknown = 0;
	double		avg_bytes = s->messages > 0 ? (double) s->bytes / s->messages : 0;
	char	   *target = OidIsValid(p->target) ? batch->target->qualified_name : NULL;

	for (int i = 0; i < batch->nparts; i++)
	{
		KsPartition *pt = &batch->parts[i];
		int64		behind;

		if (pt->latest < 0)
			continue;
		behind = Max(0, pt->latest - pt->end);
		behind_sum += behind;
		behind_max = Max(behind_max, behind);
		nknown++;
	}

	initStringInfo(&b);
	appendStringInfo(&b, "{\"id\":" INT64_FORMAT ",\"name\":", p->id);
	escape_json(&b, p->name);
	appendStringInfo(&b, ",\"batchId\":" INT64_FORMAT ",\"worker\":%d,\"timestamp\":",
					 batch->batch_id, batch->worker_index);
	escape_json(&b, timestamptz_to_str(batch->started_at));
	appendStringInfo(&b, ",\"numInputRows\":" INT64_FORMAT
					 ",\"inputRowsPerSecond\":%.1f,\"processedRowsPerSecond\":%.1f",
					 s->messages,
					 since_prev > 0 ? s->messages * 1000.0 / since_prev : 0.0,
					 process_ms > 0 ? s->messages * 1000.0 / process_ms : 0.0);
	appendStringInfo(&b, ",\"durationMs\":{\"fetch\":%.1f,\"decode\":%.1f,\"apply\":%.1f,"
					 "\"commit\":%.1f,\"triggerExecution\":%.1f}",
					 fetch_ms, batch->decode_ms, batch->apply_ms, commit_ms, fetch_ms + process_ms);
	appendStringInfoString(&b, ",\"sources\":[{\"description\":");
	if (p->subscribe_pattern)
		escape_json(&b, psprintf("Kafka[SubscribePattern[%s]]", p->subscribe_pattern));
	else if (p->assign != NIL)
		escape_json(&b, "Kafka[Assign]");
	else
	{
		StringInfoData d;
		ListCell   *lc;

		initStringInfo(&d);
		appendStringInfoString(&d, "Kafka[Subscribe[");
		foreach(lc, p->subscribe)
			appendStringInfo(&d, "%s%s", lc == list_head(p->subscribe) ? "" : ",", (char *) lfirst(lc));
		appendStringInfoString(&d, "]]");
		escape_json(&b, d.data);
	}
	appendStringInfoString(&b, ",\"startOffset\":");
	append_offsets(&b, batch, 0);
	appendStringInfoString(&b, ",\"endOffset\":");
	append_offsets(&b, batch, 1);
	appendStringInfoString(&b, ",\"latestOffset\":");
	append_offsets(&b, batch, 2);
	appendStringInfo(&b, ",\"numInputRows\":" INT64_FORMAT ",\"metrics\":{"
					 "\"avgOffsetsBehindLatest\":%.1f,\"maxOffsetsBehindLatest\":" INT64_FORMAT
					 ",\"estimatedTotalBytesBehindLatest\":%.0f}}]",
					 s->messages, nknown > 0 ? (double) behind_sum / nknown : 0.0, behind_max,
					 behind_sum * avg_bytes);
	appendStringInfoString(&b, ",\"sink\":{\"description\":");
	if (target)
		escape_json(&b, psprintf("kafka_sink %s into %s",
								 p->mode == KS_MODE_MERGE ? "MERGE" :
								 p->mode == KS_MODE_APPEND ? "INSERT" : "batch function", target));
	else
		escape_json(&b, "kafka_sink bronze only");
	appendStringInfo(&b, ",\"numOutputRows\":" INT64_FORMAT ",\"inserted\":" INT64_FORMAT
					 ",\"updated\":" INT64_FORMAT ",\"deleted\":" INT64_FORMAT
					 ",\"stale\":" INT64_FORMAT ",\"superseded\":" INT64_FORMAT
					 ",\"quarantined\":" INT64_FORMAT ",\"duplicates\":" INT64_FORMAT "}}",
					 s->inserted + s->updated + s->deleted, s->inserted, s->updated, s->deleted,
					 s->stale, s->superseded, s->quarantined, s->duplicates);
	return b.data;
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
		/* after a reset (the topic created again) the range starts over */
		appendStringInfo(&ranges, ",\"partition\":%d,\"start\":%lld,\"end\":%lld,\"messages\":%lld}",
						 p->partition,
						 (long long) (p->loss && p->loss_available < p->committed ? p->loss_available : p->committed),
						 (long long) p->end, (long long) p->messages);
	}
	appendStringInfoChar(&ranges, ']');

	{
		Oid			argtypes[15] = {INT8OID, INT8OID, INT4OID, TEXTOID, INT8OID, INT8OID, INT8OID,
		INT8OID, INT8OID, INT8OID, INT8OID, INT8OID, TIMESTAMPTZOID, INT8OID, TEXTOID};
		Datum		v[15];

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
		v[13] = Int64GetDatum(s->duplicates);
		v[14] = CStringGetTextDatum(progress_json(batch));
		if (SPI_execute_with_args("INSERT INTO kafka_sink.batches (pipeline_id, batch_id, worker, ranges,"
								  " messages, inserted, updated, deleted, stale, superseded, quarantined,"
								  " bytes, started_at, duplicates, progress) VALUES ($1, $2, $3, $4::jsonb, $5, $6, $7,"
								  " $8, $9, $10, $11, $12, $13, $14, $15::jsonb)",
								  15, argtypes, v, NULL, false, 0) != SPI_OK_INSERT)
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
									  " partition, expected_offset, available_offset, kind)"
									  " VALUES ($1, $2, $3, $4, $5, $6,"
									  " CASE WHEN $6 >= $5 THEN 'deleted' ELSE 'reset' END)",
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

/* ---- bronze: every raw message, in the batch's transaction ---- */

/* the standard bronze columns, in the order bronze_row() fills them */
#define KS_BRONZE_NCOLS 8
static const char *const bronze_names[KS_BRONZE_NCOLS] =
{"topic", "partition", "offset", "ts", "key", "value", "headers", "batch_id"};
static const Oid bronze_types[KS_BRONZE_NCOLS] =
{TEXTOID, INT4OID, INT8OID, TIMESTAMPTZOID, BYTEAOID, BYTEAOID, JSONBOID, INT8OID};

/* rows per table_multi_insert() call */
#define KS_BRONZE_CHUNK 1000

/* One message as the standard bronze columns. */
static void
bronze_row(KsBatch *batch, KsMessage *m, Datum *v, bool *n)
{
	char	   *headers = ks_message_headers_json(m);

	memset(n, 0, sizeof(bool) * KS_BRONZE_NCOLS);
	v[0] = CStringGetTextDatum(m->topic);
	v[1] = Int32GetDatum(m->partition);
	v[2] = Int64GetDatum(m->offset);
	if (m->timestamp_ms >= 0)
		v[3] = TimestampTzGetDatum(time_t_to_timestamptz(m->timestamp_ms / 1000) +
								   (m->timestamp_ms % 1000) * 1000);
	else
		n[3] = true;
	if (m->key)
		v[4] = bytea_datum(m->key, m->key_len);
	else
		n[4] = true;
	if (m->value)
		v[5] = bytea_datum(m->value, m->value_len);
	else
		n[5] = true;
	if (headers)
		v[6] = DirectFunctionCall1(jsonb_in, CStringGetDatum(headers));
	else
		n[6] = true;
	v[7] = Int64GetDatum(batch->batch_id);
}

static KsBatch *srf_raw_batch = NULL;

/*
 * kafka_sink._batch_messages(): the raw messages of the batch this process
 * is writing to its bronze table (write_bronze).
 * Checks: the bronze write of a batch is in progress in this process
 * (srf_raw_batch is only set around it); the caller's column definition
 * list is exactly the seven bronze columns below (types and typmods), since
 * the tuples are built with it.
 */
Datum
kafka_sink_batch_messages(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	KsSrfColumn cols[KS_BRONZE_NCOLS - 1];

	ks_srf_check_context(fcinfo, "kafka_sink._batch_messages()");
	ks_require_batch(srf_raw_batch != NULL, "kafka_sink._batch_messages()", "the raw messages");
	/* the SRF's 7 columns are the first 7; batch_id is a parameter */
	for (int c = 0; c < KS_BRONZE_NCOLS - 1; c++)
	{
		cols[c].name = bronze_names[c];
		cols[c].typid = bronze_types[c];
		cols[c].typmod = -1;
	}
	ks_srf_check_record(fcinfo, "kafka_sink._batch_messages()", cols, KS_BRONZE_NCOLS - 1);
	InitMaterializedSRF(fcinfo, MAT_SRF_USE_EXPECTED_DESC);
	for (int i = 0; i < srf_raw_batch->nmsgs; i++)
	{
		Datum		v[KS_BRONZE_NCOLS];
		bool		n[KS_BRONZE_NCOLS];

		/* the SRF's 7 columns are the first 7; batch_id is a parameter */
		bronze_row(srf_raw_batch, srf_raw_batch->msgs[i], v, n);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, v, n);
	}
	return (Datum) 0;
}

static void
not_null_error(Relation rel, int attindex)
{
	ereport(ERROR,
			(errcode(ERRCODE_NOT_NULL_VIOLATION),
			 errmsg("null value in column \"%s\" of relation \"%s\" violates not-null constraint",
					NameStr(TupleDescAttr(RelationGetDescr(rel), attindex)->attname),
					RelationGetRelationName(rel)),
			 errtablecol(rel, attindex + 1)));
}

/*
 * Lands the batch in bronze the way COPY FROM does: table_multi_insert()
 * per chunk of rows (one WAL record per page rather than per row), then
 * the index entries, with no SQL statement, no plan and no set-returning
 * function in between.  It only takes a plain table it can write exactly
 * as an INSERT would: the owner has INSERT on the whole table, no row
 * level security applies, no triggers (so no foreign keys), no CHECK
 * constraints, no generated columns, no deferrable or exclusion indexes,
 * and the standard columns with the standard types.  Other columns get
 * their defaults, evaluated per row as INSERT does.  Otherwise it returns
 * false before writing anything, and the caller runs the INSERT statement,
 * which handles every case.  A unique or not-null violation is an error,
 * as from the INSERT.
 */
static bool
bronze_fast_path(KsBatch *batch)
{
	Oid			relid = batch->pipeline->bronze;
	Relation	rel;
	TupleDesc	desc;
	int			natts;
	int			attno[KS_BRONZE_NCOLS];
	bool	   *ours;
	EState	   *estate;
	ResultRelInfo *rri;
	ExprState **defexpr;
	int		   *defcol;
	int			ndef = 0;
	TupleTableSlot **slots;
	BulkInsertState bistate;
	CommandId	cid;
	MemoryContext chunk_cxt;
	bool		ok = true;

	if (pg_class_aclcheck(relid, GetUserId(), ACL_INSERT) != ACLCHECK_OK ||
		check_enable_rls(relid, InvalidOid, true) == RLS_ENABLED)
		return false;
	rel = table_open(relid, RowExclusiveLock);
	desc = RelationGetDescr(rel);
	natts = desc->natts;
	ours = palloc0(sizeof(bool) * Max(natts, 1));
	if (rel->rd_rel->relkind != RELKIND_RELATION || rel->trigdesc != NULL ||
		(desc->constr && (desc->constr->num_check > 0 || desc->constr->has_generated_stored)))
		ok = false;
	for (int c = 0; ok && c < KS_BRONZE_NCOLS; c++)
	{
		attno[c] = -1;
		for (int a = 0; a < natts; a++)
		{
			Form_pg_attribute att = TupleDescAttr(desc, a);

			if (!att->attisdropped && strcmp(NameStr(att->attname), bronze_names[c]) == 0)
				attno[c] = a;
		}
		if (attno[c] < 0 || TupleDescAttr(desc, attno[c])->atttypid != bronze_types[c])
			ok = false;
		else
			ours[attno[c]] = true;
	}
	if (!ok)
	{
		table_close(rel, NoLock);
		return false;
	}

	estate = CreateExecutorState();
	rri = makeNode(ResultRelInfo);
	InitResultRelInfo(rri, rel, 1, NULL, 0);
	ExecOpenIndices(rri, false);
	for (int i = 0; i < rri->ri_NumIndices; i++)
		if (rri->ri_IndexRelationInfo[i]->ii_ExclusionOps != NULL ||
			!rri->ri_IndexRelationDescs[i]->rd_index->indimmediate)
			ok = false;
	if (!ok)
	{
		ExecCloseIndices(rri);
		FreeExecutorState(estate);
		table_close(rel, NoLock);
		return false;
	}

	/* the defaults of the other columns */
	defexpr = palloc0(sizeof(ExprState *) * Max(natts, 1));
	defcol = palloc0(sizeof(int) * Max(natts, 1));
	for (int a = 0; a < natts; a++)
	{
		Node	   *def;

		if (TupleDescAttr(desc, a)->attisdropped || ours[a])
			continue;
		def = build_column_default(rel, a + 1);
		if (def == NULL)
			continue;
		defexpr[ndef] = ExecPrepareExpr((Expr *) expression_planner((Expr *) def), estate);
		defcol[ndef++] = a;
	}

	cid = GetCurrentCommandId(true);
	bistate = GetBulkInsertState();
	slots = palloc(sizeof(TupleTableSlot *) * KS_BRONZE_CHUNK);
	for (int i = 0; i < KS_BRONZE_CHUNK; i++)
		slots[i] = table_slot_create(rel, NULL);
	chunk_cxt = AllocSetContextCreate(CurrentMemoryContext, "kafka_sink bronze chunk", ALLOCSET_DEFAULT_SIZES);

	for (int first = 0; first < batch->nmsgs; first += KS_BRONZE_CHUNK)
	{
		int			n = Min(KS_BRONZE_CHUNK, batch->nmsgs - first);
		ExprContext *econtext = GetPerTupleExprContext(estate);
		MemoryContext oldcxt = MemoryContextSwitchTo(chunk_cxt);

		for (int i = 0; i < n; i++)
		{
			TupleTableSlot *slot = slots[i];
			Datum		v[KS_BRONZE_NCOLS];
			bool		nl[KS_BRONZE_NCOLS];

			ExecClearTuple(slot);
			for (int a = 0; a < natts; a++)
			{
				slot->tts_values[a] = (Datum) 0;
				slot->tts_isnull[a] = true;
			}
			bronze_row(batch, batch->msgs[first + i], v, nl);
			for (int c = 0; c < KS_BRONZE_NCOLS; c++)
			{
				slot->tts_values[attno[c]] = v[c];
				slot->tts_isnull[attno[c]] = nl[c];
			}
			for (int d = 0; d < ndef; d++)
			{
				Form_pg_attribute att = TupleDescAttr(desc, defcol[d]);
				bool		isnull;
				Datum		val = ExecEvalExprSwitchContext(defexpr[d], econtext, &isnull);

				slot->tts_values[defcol[d]] = isnull ? (Datum) 0 : datumCopy(val, att->attbyval, att->attlen);
				slot->tts_isnull[defcol[d]] = isnull;
			}
			ResetPerTupleExprContext(estate);
			for (int a = 0; a < natts; a++)
				if (slot->tts_isnull[a] && TupleDescAttr(desc, a)->attnotnull)
					not_null_error(rel, a);
			ExecStoreVirtualTuple(slot);
		}
		table_multi_insert(rel, slots, n, cid, 0, bistate);
		for (int i = 0; i < n; i++)
		{
			List	   *recheck;

			econtext->ecxt_scantuple = slots[i];
			recheck = KS_EXEC_INSERT_INDEX_TUPLES(rri, slots[i], estate);
			/* no deferrable or exclusion index, so nothing to recheck */
			Assert(recheck == NIL);
			list_free(recheck);
			ResetPerTupleExprContext(estate);
		}
		MemoryContextSwitchTo(oldcxt);
		for (int i = 0; i < n; i++)
			ExecClearTuple(slots[i]);
		MemoryContextReset(chunk_cxt);
		CHECK_FOR_INTERRUPTS();
	}

	for (int i = 0; i < KS_BRONZE_CHUNK; i++)
		ExecDropSingleTupleTableSlot(slots[i]);
	FreeBulkInsertState(bistate);
	table_finish_bulk_insert(rel, 0);
	ExecCloseIndices(rri);
	FreeExecutorState(estate);
	MemoryContextDelete(chunk_cxt);
	table_close(rel, NoLock);
	return true;
}

/*
 * Lands the batch in bronze in a subtransaction, through bronze_fast_path()
 * when it can, else with sql; false when it hit a unique violation (a
 * message landed before), any other error is rethrown.
 */
typedef struct BronzeCall
{
	KsBatch    *batch;
	const char *sql;
	Oid		   *argtypes;
	Datum	   *values;
} BronzeCall;

static void
bronze_call(void *arg)
{
	BronzeCall *c = arg;

	if (!bronze_fast_path(c->batch) &&
		SPI_execute_with_args(c->sql, 1, c->argtypes, c->values, NULL, false, 0) != SPI_OK_INSERT)
		elog(ERROR, "kafka_sink: could not write to the bronze table");
}

static bool
try_bronze(KsBatch *batch, const char *sql, Oid *argtypes, Datum *values)
{
	BronzeCall	call = {batch, sql, argtypes, values};
	ErrorData  *edata = ks_try_subxact(bronze_call, &call);

	if (edata != NULL && edata->sqlerrcode != ERRCODE_UNIQUE_VIOLATION)
		ReThrowError(edata);
	return edata == NULL;
}

/* The INSERT that lands a batch in bronze when the fast path cannot. */
static char *
bronze_sql(Oid bronze)
{
	return psprintf("INSERT INTO %s (topic, partition, \"offset\", ts, key, value, headers, batch_id)"
					" SELECT m.topic, m.partition, m.\"offset\", m.ts, m.key, m.value, m.headers, $1"
					" FROM kafka_sink._batch_messages() AS m(topic text, partition integer,"
					" \"offset\" bigint, ts timestamptz, key bytea, value bytea, headers jsonb)",
					quote_qualified_identifier(get_namespace_name(get_rel_namespace(bronze)),
											   get_rel_name(bronze)));
}

/*
 * Lands the batch's raw messages.  Idempotent: a message already in bronze
 * (offsets reset backwards, a second pipeline on the same table) is kept
 * as it is.  The common case, no such message, is a plain insert: INSERT
 * ... ON CONFLICT DO NOTHING costs a speculative insertion per row, so it
 * only runs when the plain one hit a unique violation.  Only a message
 * already landed may be skipped: the arbiter is the unique index on
 * (topic, partition, "offset"), so a conflict on any other unique index
 * of the table fails the batch (nothing is checkpointed) instead of
 * dropping the message.  A bronze table without such an index has no way
 * to tell a message landed before: its unique violations all fail the
 * batch ("there is no unique or exclusion constraint matching").
 */
static void
write_bronze(KsBatch *batch)
{
	Oid			argtypes[1] = {INT8OID};
	Datum		values[1] = {Int64GetDatum(batch->batch_id)};
	char	   *sql;
	int			catalog_writes;

	sql = bronze_sql(batch->pipeline->bronze);
	srf_raw_batch = batch;
	/* bronze's triggers and defaults are the user's too */
	catalog_writes = ks_catalog_writes_suspend();
	PG_TRY();
	{
		if (!try_bronze(batch, sql, argtypes, values) &&
			SPI_execute_with_args(psprintf("%s ON CONFLICT (topic, partition, \"offset\") DO NOTHING", sql),
								  1, argtypes, values, NULL, false, 0) != SPI_OK_INSERT)
			elog(ERROR, "kafka_sink: could not write to the bronze table");
	}
	PG_FINALLY();
	{
		ks_catalog_writes_restore(catalog_writes);
		srf_raw_batch = NULL;
	}
	PG_END_TRY();
}

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
static void
mark_duplicates(KsBatch *batch)
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
static void
record_event_ids(KsBatch *batch)
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

/*
 * Decodes and applies the batch's messages to the target: bronze (when
 * asked), decode, producer duplicates, then tombstones and MERGE, append,
 * or the batch function.  Row reasons are left on batch->rows; counts in
 * batch->stats.  Runs in the caller's transaction.
 */
static void
stage_and_apply(KsBatch *batch, bool bronze)
{
	KsPipeline *p = batch->pipeline;
	KsBatchStats *s = &batch->stats;
	int		   *sel;
	int			nsel = 0;
	TimestampTz t0;

	batch->rows = palloc0(sizeof(KsRow) * Max(batch->nmsgs, 1));
	for (int i = 0; i < batch->nmsgs; i++)
	{
		batch->rows[i].msg = batch->msgs[i];
		s->bytes += batch->msgs[i]->value_len + batch->msgs[i]->key_len;
	}
	s->messages = batch->nmsgs;

	/*
	 * Decoding needs no batch id, so it runs before the batch id is taken:
	 * taking it locks the pipeline's row until commit, and with several
	 * workers that is where their transactions line up.
	 */
	t0 = GetCurrentTimestamp();
	if (OidIsValid(p->target))
	{
		batch->target = ks_target_open(p);
		ks_decode_batch(batch->target, p, batch->rows, batch->nmsgs);
	}
	batch->decode_ms = ms_between(t0, GetCurrentTimestamp());
	ks_fault(KS_FAULT_AFTER_DECODE);
	if (bronze)
		batch->batch_id = next_batch_id(batch);
	t0 = GetCurrentTimestamp();
	if (bronze && OidIsValid(p->bronze) && batch->nmsgs > 0)
		write_bronze(batch);
	if (!OidIsValid(p->target))
		return;					/* a bronze-only pipeline */
	if (p->event_id && batch->nmsgs > 0)
		mark_duplicates(batch);

	sel = palloc(sizeof(int) * Max(batch->nmsgs, 1));
	if (batch->nmsgs > 0)
	{
		if (p->mode == KS_MODE_MERGE)
		{
			int			guc_level = pin_key_probe_plan(batch->target);
			KeyHash    *kh = keyhash_create(batch->target);
			char	   *sql = merge_sql(batch->target, false);
			int		   *dels = palloc(sizeof(int) * Max(batch->nmsgs, 1));
			int			ndels;

			/*
			 * A winner (or tombstone) that fails through its own fault is
			 * quarantined, and the next best message of its key (if any)
			 * competes again.
			 */
			for (;;)
			{
				int			failed;
				int			n = 0;

				nsel = reduce(batch, kh, sel, dels, &ndels);
				/* tombstones not run in an earlier round */
				for (int i = 0; i < ndels; i++)
					if (batch->rows[dels[i]].next_candidate == 0)
						dels[n++] = dels[i];
				ndels = n;
				n = 0;
				if (ndels > 0)
				{
					/* tombstones first, so that a re-insert after one lands */
					failed = apply_rows(batch, delete_sql(batch->target, false), dels, ndels,
										ACL_DELETE | ACL_SELECT);
					for (int i = 0; i < ndels; i++)
						batch->rows[dels[i]].next_candidate = 1;
					/* a key whose tombstone failed has new winners: reduce again */
					if (failed > 0)
						continue;
				}
				/* apply only winners not applied in an earlier round */
				for (int i = 0; i < nsel; i++)
					if (batch->rows[sel[i]].next_candidate == 0)
						sel[n++] = sel[i];
				nsel = n;
				sort_by_key(batch, kh, sel, nsel);
				failed = apply_rows(batch, sql, sel, nsel, ACL_INSERT | ACL_UPDATE | ACL_SELECT);
				for (int i = 0; i < nsel; i++)
					batch->rows[sel[i]].next_candidate = 1;
				if (failed == 0)
					break;
			}
			if (guc_level > 0)
				AtEOXact_GUC(true, guc_level);
		}
		else
		{
			char	   *sql = p->mode == KS_MODE_APPEND ? append_sql(batch->target, false) : function_sql(batch, false);

			for (int i = 0; i < batch->nmsgs; i++)
				if (batch->rows[i].reason == KS_OK && !batch->rows[i].duplicate)
					sel[nsel++] = i;
			if (p->mode == KS_MODE_APPEND)
				apply_rows(batch, sql, sel, nsel, ACL_INSERT);
			else
				run_batch_function(batch, sql, sel, nsel);
		}
		if (p->event_id)
			record_event_ids(batch);
	}
	batch->apply_ms = ms_between(t0, GetCurrentTimestamp());

	for (int i = 0; i < batch->nmsgs; i++)
	{
		KsRow	   *r = &batch->rows[i];

		if (r->reason == KS_OK && p->mode == KS_MODE_MERGE && !r->winner &&
			!r->is_delete && !r->duplicate)
			s->superseded++;
	}
	if (p->mode == KS_MODE_MERGE)
	{
		int64		winners = 0;

		for (int i = 0; i < batch->nmsgs; i++)
			if (batch->rows[i].winner && batch->rows[i].reason == KS_OK)
				winners++;
		s->stale = Max(0, winners - s->inserted - s->updated);
	}
}

/*
 * Retention of batch markers (and their progress records): a marker goes
 * once it is both outside the last kafka_sink.keep_batches batches and
 * older than kafka_sink.keep_batches_for.  Only old rows are deleted, so
 * this never waits on the rows ingestion writes.
 */
static void
prune_batches(KsBatch *batch)
{
	Oid			argtypes[3] = {INT8OID, INT8OID, INT8OID};
	Datum		values[3];

	values[0] = Int64GetDatum(batch->pipeline->id);
	values[1] = Int64GetDatum(batch->batch_id - ks_keep_batches);
	values[2] = Int64GetDatum(ks_keep_batches_for_s);
	if (SPI_execute_with_args("DELETE FROM kafka_sink.batches WHERE pipeline_id = $1 AND batch_id <= $2"
							  " AND committed_at < now() - $3 * interval '1 second'",
							  3, argtypes, values, NULL, false, 0) != SPI_OK_DELETE)
		elog(ERROR, "kafka_sink: could not prune batch markers");
}

/*
 * Applies a filled batch inside the caller's transaction: batch id, the
 * data, quarantine rows, the batch marker and the checkpoint.
 */
void
ks_apply_batch(KsBatch *batch)
{
	stage_and_apply(batch, true);
	ks_fault(KS_FAULT_AFTER_MERGE);
	batch->commit_started_at = GetCurrentTimestamp();

	for (int i = 0; i < batch->nmsgs; i++)
	{
		KsRow	   *r = &batch->rows[i];

		if (OidIsValid(batch->pipeline->target) && r->reason != KS_OK)
		{
			write_quarantine(batch, r);
			batch->stats.quarantined++;
		}
	}
	write_marker_and_offsets(batch);
	if (batch->batch_id % 64 == 0)
		prune_batches(batch);
	ks_fault(KS_FAULT_BEFORE_COMMIT);
}

/*
 * kafka_sink._replay(pipeline_id, ids): applies quarantined messages again,
 * in offset order and with the pipeline's rules (the ordering guard
 * included), in the caller's transaction and with the caller's rights.
 * Messages that now apply are marked replayed; the others get their new
 * reason.  Returns (replayed, still_failing).
 * Checks: STRICT (no NULL arguments); ids may be empty, hold NULLs (they
 * match nothing) or have several dimensions (= ANY flattens them); the
 * pipeline is read through SPI with the caller's rights, so another
 * owner's pipeline, like a missing one or a negative id, "does not
 * exist" (row level security), and so are its quarantine rows; not inside
 * a batch (a batch function or trigger calling it would nest a second
 * batch into the statement that reads the first) nor in a kafka_sink
 * background worker.
 */
Datum
kafka_sink_replay(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	int64		pipeline_id = PG_GETARG_INT64(0);
	Datum		ids = PG_GETARG_DATUM(1);
	KsPipeline *p;
	KsBatch		batch = {0};
	int64	   *qids;
	int64		replayed = 0,
				failing = 0;
	Oid			argtypes[2] = {INT8OID, INT8ARRAYOID};
	Datum		values[2] = {Int64GetDatum(pipeline_id), ids};
	Datum		out[2];
	bool		nulls[2] = {false, false};

	ks_srf_check_context(fcinfo, "kafka_sink._replay()");
	if (srf_batch != NULL || srf_raw_batch != NULL || ks_in_own_worker())
		ereport(ERROR,
				(errcode(KS_ERRCODE_WRONG_CONTEXT),
				 errmsg("kafka_sink._replay() cannot run inside a kafka_sink batch"),
				 errdetail("It was called from a batch function, a trigger or another statement run while a batch is applied."),
				 errhint("Call kafka_sink.replay_quarantine() from a session of its own.")));
	InitMaterializedSRF(fcinfo, 0);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "kafka_sink: SPI_connect failed");
	p = pipeline_id > 0 ? ks_load_pipeline(pipeline_id, CurrentMemoryContext) : NULL;
	if (p == NULL || !OidIsValid(p->target))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("pipeline %lld does not exist or has no target", (long long) pipeline_id),
				 errhint("SELECT id, name, target FROM kafka_sink.pipelines lists the pipelines you can see.")));
	if (SPI_execute_with_args("SELECT id, topic, partition, message_offset,"
							  " (extract(epoch FROM message_ts) * 1000)::int8, key, value"
							  " FROM kafka_sink.quarantine WHERE pipeline_id = $1 AND id = ANY ($2)"
							  " ORDER BY topic, partition, message_offset FOR UPDATE",
							  2, argtypes, values, NULL, false, 0) != SPI_OK_SELECT)
		elog(ERROR, "kafka_sink: could not read the quarantine");
	{
		SPITupleTable *tt = SPI_tuptable;
		uint64		n = SPI_processed;

		batch.nmsgs = (int) n;
		batch.msgs = palloc(sizeof(KsMessage *) * Max(n, 1));
		qids = palloc(sizeof(int64) * Max(n, 1));
		for (uint64 i = 0; i < n; i++)
		{
			KsMessage  *m = palloc0(sizeof(KsMessage));
			bool		isnull;
			Datum		d;

			qids[i] = DatumGetInt64(SPI_getbinval(tt->vals[i], tt->tupdesc, 1, &isnull));
			m->topic = SPI_getvalue(tt->vals[i], tt->tupdesc, 2);
			m->partition = DatumGetInt32(SPI_getbinval(tt->vals[i], tt->tupdesc, 3, &isnull));
			m->offset = DatumGetInt64(SPI_getbinval(tt->vals[i], tt->tupdesc, 4, &isnull));
			d = SPI_getbinval(tt->vals[i], tt->tupdesc, 5, &isnull);
			m->timestamp_ms = isnull ? -1 : DatumGetInt64(d);
			d = SPI_getbinval(tt->vals[i], tt->tupdesc, 6, &isnull);
			if (!isnull)
			{
				bytea	   *b = DatumGetByteaPP(d);

				m->key = VARDATA_ANY(b);
				m->key_len = VARSIZE_ANY_EXHDR(b);
			}
			d = SPI_getbinval(tt->vals[i], tt->tupdesc, 7, &isnull);
			if (!isnull)
			{
				bytea	   *b = DatumGetByteaPP(d);

				m->value = VARDATA_ANY(b);
				m->value_len = VARSIZE_ANY_EXHDR(b);
			}
			batch.msgs[i] = m;
		}
	}
	batch.pipeline = p;
	batch.batch_id = 0;
	stage_and_apply(&batch, false);

	for (int i = 0; i < batch.nmsgs; i++)
	{
		KsRow	   *r = &batch.rows[i];
		Oid			uargtypes[3] = {INT8OID, TEXTOID, TEXTOID};
		Datum		uvalues[3];

		uvalues[0] = Int64GetDatum(qids[i]);
		if (r->reason == KS_OK)
		{
			replayed++;
			SPI_execute_with_args("UPDATE kafka_sink.quarantine SET replayed_at = now() WHERE id = $1",
								  1, uargtypes, uvalues, NULL, false, 0);
		}
		else
		{
			failing++;
			uvalues[1] = CStringGetTextDatum(ks_reason_name(r->reason));
			uvalues[2] = CStringGetTextDatum(r->detail ? r->detail : "");
			SPI_execute_with_args("UPDATE kafka_sink.quarantine SET reason = $2, detail = $3,"
								  " replayed_at = NULL WHERE id = $1",
								  3, uargtypes, uvalues, NULL, false, 0);
		}
	}
	SPI_finish();
	out[0] = Int64GetDatum(replayed);
	out[1] = Int64GetDatum(failing);
	tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, out, nulls);
	return (Datum) 0;
}

/*
 * kafka_sink._pipeline_statements(pipeline_id): the statements a batch of
 * the pipeline runs, built by the same functions the worker builds them
 * with (so the text shown is the text run), per target and in the order
 * they run.  statement is the text as run ($1 is the batch id; the batch
 * comes from kafka_sink._batch_rows(), which only a worker has); by_hand
 * is the same statement reading the staging table that the 'staging' row
 * creates, for a user to run it (PREPARE ... (bigint) AS ..., EXECUTE).
 * The pipeline is read with the caller's rights: one they cannot see does
 * not exist.
 */
Datum
kafka_sink_pipeline_statements(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	int64		pipeline_id;
	KsPipeline *p;
	KsBatch		batch = {0};
	KsTarget   *t = NULL;
	int			step = 0;

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("pipeline id cannot be null")));
	pipeline_id = PG_GETARG_INT64(0);
	InitMaterializedSRF(fcinfo, 0);
	if (rsinfo->setDesc->natts != 7)
		elog(ERROR, "kafka_sink: pipeline_statements descriptor mismatch");
	SPI_connect();
	p = ks_load_pipeline(pipeline_id, CurrentMemoryContext);
	if (p == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("pipeline %lld does not exist", (long long) pipeline_id),
				 errhint("SELECT name FROM kafka_sink.pipelines lists the pipelines you can see.")));
	if (OidIsValid(p->target))
	{
		if (get_rel_name(p->target) == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_TABLE),
					 errmsg("the target of pipeline \"%s\" no longer exists", p->name)));
		t = ks_target_open(p);
	}
	if (OidIsValid(p->bronze) && get_rel_name(p->bronze) == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("the bronze table of pipeline \"%s\" no longer exists", p->name)));
	batch.pipeline = p;
	batch.target = t;

#define KS_EMIT(rel, kind, stmt, hand, note) \
	do { \
		Datum		v_[7]; \
		bool		n_[7] = {false, false, false, false, false, false, false}; \
		v_[0] = Int32GetDatum(++step); \
		v_[1] = ObjectIdGetDatum(rel); \
		v_[2] = CStringGetTextDatum(kind); \
		v_[3] = CStringGetTextDatum("sql"); \
		if ((stmt) != NULL) v_[4] = CStringGetTextDatum(stmt); else n_[4] = true; \
		if ((hand) != NULL) v_[5] = CStringGetTextDatum(hand); else n_[5] = true; \
		v_[6] = CStringGetTextDatum(note); \
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, v_, n_); \
	} while (0)

	if (OidIsValid(p->bronze))
		KS_EMIT(p->bronze, "bronze", bronze_sql(p->bronze), NULL,
				"Lands every message of the batch raw, first. When the bronze table is a plain table the worker "
				"can write as INSERT would (no triggers, row level security, CHECK constraints or generated "
				"columns), it inserts the same rows through table_multi_insert instead of this statement. "
				"A message already landed (offsets moved back) is kept: the statement is then run again with "
				"ON CONFLICT (topic, partition, \"offset\") DO NOTHING.");
	if (t != NULL)
	{
		KS_EMIT(p->target, "staging", NULL,
				psprintf("CREATE TEMP TABLE kafka_sink_batch %s", batch_columns_sql(t)),
				"Not run by the worker: the table the by_hand statements read in place of "
				"kafka_sink._batch_rows(). Per column: its value, and _ks_pN (N: the column's position "
				"among these columns, from 0) true when the message set it; a column the message did not "
				"set keeps the target's value on update and takes its default on insert. "
				"_ks_topic, _ks_partition, _ks_offset, _ks_ts: the message's coordinates and timestamp; "
				"_ks_seq: its position in the batch; _ks_oN (with an order column and optional "
				"columns): the order value of the message that supplied column N, for the ordering guard.");
		if (p->mode == KS_MODE_MERGE && p->delete_on_tombstone)
			KS_EMIT(p->target, "delete", delete_sql(t, false), delete_sql(t, true),
					"Runs first, over the batch's tombstones that win their key (delete_on_tombstone). "
					"To run by hand: PREPARE d(bigint) AS <by_hand>; EXECUTE d(<batch id>).");
		if (p->mode == KS_MODE_MERGE)
			KS_EMIT(p->target, "merge", merge_sql(t, false), merge_sql(t, true),
					psprintf("Runs over one row per key, the winner of the reduce: %s, then the latest "
							 "offset. The WHEN MATCHED condition is the ordering guard: a target row "
							 "that is newer stays (the message is stale). Rows go in key order; a row "
							 "that fails through its own fault is quarantined and its key's next best "
							 "message competes again. $1 is the batch id, written to _kafka_batch_id. "
							 "To run by hand: PREPARE m(bigint) AS <by_hand>; EXECUTE m(<batch id>) "
							 "(the staging table must hold at most one row per key).",
							 p->order_column ? psprintf("the greatest %s (NULL lowest)",
														quote_identifier(p->order_column))
							 : "no order column, so"));
		else if (p->mode == KS_MODE_APPEND)
			KS_EMIT(p->target, "append", append_sql(t, false), append_sql(t, true),
					"Runs over every message that decoded (not quarantined, not a duplicate event id), in "
					"offset order. $1 is the batch id. To run by hand: PREPARE a(bigint) AS <by_hand>; "
					"EXECUTE a(<batch id>).");
		else
			KS_EMIT(p->target, "function", function_sql(&batch, false), function_sql(&batch, true),
					"Calls the batch function once per batch with the batch id ($1) and the decoded rows in "
					"offset order. To run by hand: PREPARE f(bigint) AS <by_hand>; EXECUTE f(<batch id>).");
	}
#undef KS_EMIT
	SPI_finish();
	return (Datum) 0;
}
