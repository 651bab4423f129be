/*-------------------------------------------------------------------------
 *
 * apply_heap.c
 *		The direct heap apply strategy for plain targets: per winning row,
 *		probe the key's unique index, compare the order column as the
 *		MERGE's guard does, then update, insert or delete the tuple with
 *		the executor's helpers that logical replication's apply uses
 *		(execReplication.c: they maintain the indexes and check the
 *		constraints).  No SQL is planned or run per batch.
 *
 * It applies a merge-mode target only when it does exactly what the
 * MERGE of statements.c does (heap_eligible() lists what it refuses);
 * append and function mode, and every other target, go to the SQL
 * strategy.  A row's fault (a constraint, a bad value) is not narrowed
 * down here: the call's subtransaction is rolled back and the same rows
 * go to the SQL strategy, which bisects and quarantines with its reasons.
 *
 * Owns: kafka_sink.apply_strategy's heap side and KsApplyStrategy
 * ks_apply_heap.  Must not: choose which rows apply (apply.c, reduce.c).
 *
 *-------------------------------------------------------------------------
 */
#include "kafka_sink.h"
#include "apply.h"
#include "apply_heap.h"
#include "apply_sql.h"
#include "catalog.h"
#include "decode.h"

#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/pg_index.h"
#include "catalog/pg_operator.h"
#include "catalog/pg_type.h"
#include "executor/executor.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "optimizer/optimizer.h"
#include "parser/parse_oper.h"
#include "rewrite/rewriteHandler.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"

int			ks_apply_strategy = KS_APPLY_STRATEGY_SQL;

typedef struct HeapApplyState
{
	KsBatchTarget *bt;
	Relation	rel;
	Oid			key_index;
	FmgrInfo	ge;				/* the order column's >= (the MERGE's guard) */
	FmgrInfo	lt;				/* ... and < (a change event's delete) */
	Oid			order_coll;
	ExprState **defaults;		/* per attribute: the default an insert takes */
	int		   *col_of;			/* per attribute: its index in columns, or -1 */
	void	   *sql;			/* the SQL strategy's state, once needed */
} HeapApplyState;

/* the type a lineage column must have to take the source's datum as is */
static Oid
lineage_type(const char *lineage)
{
	if (strcmp(lineage, "s._ks_topic") == 0)
		return TEXTOID;
	if (strcmp(lineage, "s._ks_partition") == 0)
		return INT4OID;
	if (strcmp(lineage, "s._ks_offset") == 0 || strcmp(lineage, "$1") == 0)
		return INT8OID;
	if (strcmp(lineage, "s._ks_ts") == 0)
		return TIMESTAMPTZOID;
	return InvalidOid;
}

/* the strict boolean operator name(type, type) as the MERGE's text resolves it */
static bool
order_operator(const char *name, Oid typid, FmgrInfo *fi)
{
	Operator	tup = oper(NULL, list_make1(makeString(pstrdup(name))), typid, typid, true, -1);
	Form_pg_operator op;
	bool		ok;

	if (tup == NULL)
		return false;
	op = (Form_pg_operator) GETSTRUCT(tup);
	ok = op->oprresult == BOOLOID && func_strict(op->oprcode);
	if (ok)
		fmgr_info(op->oprcode, fi);
	ReleaseSysCache(tup);
	return ok;
}

/*
 * Whether the heap strategy writes the target exactly as the MERGE (and
 * the tombstones' DELETE) would.  It refuses what execReplication.c's
 * helpers do not do as the MERGE does: triggers of any kind (foreign keys
 * in either direction are triggers), rules, row level security,
 * partitioned tables and partitions, views and other relkinds, generated
 * columns, deferrable and exclusion constraints, domain-typed columns (an
 * absent optional value is NULL coerced to the domain, whose constraints
 * the MERGE checks), lineage columns of another type than their source
 * (the MERGE casts), a key index that is not the primary key or replica
 * identity index (RelationFindReplTupleByIndex compares whole tuples for
 * other indexes on 16+), an order column without a strict >= and <, and
 * missing table privileges (the MERGE checks them; the helpers do not).
 */
static bool
heap_eligible(KsBatchTarget *bt, Relation rel, HeapApplyState *st)
{
	KsTarget   *t = bt->target;
	TupleDesc	desc = RelationGetDescr(rel);
	Oid			identity;
	List	   *indexes;
	ListCell   *lc;
	bool		ok = true;

	if (bt->mode != KS_MODE_MERGE || t->key_index_name == NULL || t->nkeys == 0)
		return false;
	if (rel->rd_rel->relkind != RELKIND_RELATION || rel->rd_rel->relispartition ||
		rel->trigdesc != NULL || rel->rd_rules != NULL || rel->rd_rel->relhasrules ||
		rel->rd_rel->relhastriggers || rel->rd_rel->relrowsecurity)
		return false;
	for (int a = 0; a < desc->natts; a++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, a);

		if (!att->attisdropped && (att->attgenerated != '\0' ||
								   get_typtype(att->atttypid) == TYPTYPE_DOMAIN))
			return false;
	}
	for (int c = 0; c < t->ncolumns; c++)
		if (t->columns[c].lineage &&
			(t->columns[c].typid != lineage_type(t->columns[c].lineage)))
			return false;
	{
		AclMode		modes[] = {ACL_SELECT, ACL_INSERT, ACL_UPDATE, ACL_DELETE};

		for (int i = 0; i < (int) lengthof(modes); i++)
			if (pg_class_aclcheck(RelationGetRelid(rel), GetUserId(), modes[i]) != ACLCHECK_OK)
				return false;
	}
	st->key_index = get_relname_relid(t->key_index_name, RelationGetNamespace(rel));
	identity = RelationGetReplicaIndex(rel);
	if (!OidIsValid(identity))
		identity = KS_PRIMARY_KEY_INDEX(rel);
	if (!OidIsValid(st->key_index) || st->key_index != identity)
		return false;
	indexes = RelationGetIndexList(rel);
	foreach(lc, indexes)
	{
		HeapTuple	tup = SearchSysCache1(INDEXRELID, ObjectIdGetDatum(lfirst_oid(lc)));
		Form_pg_index ix;

		if (!HeapTupleIsValid(tup))
			elog(ERROR, "cache lookup failed for index %u", lfirst_oid(lc));
		ix = (Form_pg_index) GETSTRUCT(tup);
		if (ix->indisexclusion || !ix->indimmediate ||
			(ix->indexrelid == st->key_index && !ix->indisvalid))
			ok = false;
		ReleaseSysCache(tup);
	}
	list_free(indexes);
	if (!ok)
		return false;
	if (t->order_index >= 0)
	{
		KsColumn   *o = &t->columns[t->order_index];

		if (!order_operator(">=", o->typid, &st->ge) || !order_operator("<", o->typid, &st->lt))
			return false;
		st->order_coll = o->collation;
	}
	return true;
}

/* the sql strategy's state, begun when first needed */
static void *
sql_state(KsBatch *batch, HeapApplyState *st)
{
	if (st->sql == NULL)
		st->sql = ks_apply_sql.begin(batch, st->bt);
	return st->sql;
}

static void *
heap_begin(KsBatch *batch, KsBatchTarget *bt)
{
	HeapApplyState *st = palloc0(sizeof(HeapApplyState));
	Relation	rel;
	TupleDesc	desc;

	st->bt = bt;
	rel = table_open(bt->target->relid, RowExclusiveLock);
	if (ks_apply_strategy != KS_APPLY_STRATEGY_AUTO || !heap_eligible(bt, rel, st))
	{
		table_close(rel, NoLock);
		(void) sql_state(batch, st);
		return st;
	}
	st->rel = rel;
	desc = RelationGetDescr(rel);
	st->col_of = palloc(sizeof(int) * desc->natts);
	st->defaults = palloc0(sizeof(ExprState *) * desc->natts);
	for (int a = 0; a < desc->natts; a++)
		st->col_of[a] = -1;
	for (int c = 0; c < bt->target->ncolumns; c++)
		st->col_of[bt->target->columns[c].attnum - 1] = c;
	for (int a = 0; a < desc->natts; a++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, a);
		int			c = st->col_of[a];
		Node	   *expr;

		/*
		 * The MERGE's INSERT: a column it does not name (an identity
		 * ALWAYS) takes its default, a named optional column absent from
		 * the message its default_sql, which is the column's own default.
		 */
		if (att->attisdropped || (c >= 0 && bt->target->columns[c].default_sql == NULL))
			continue;
		if (c >= 0 && (bt->target->columns[c].is_key || bt->target->columns[c].required ||
					   bt->target->columns[c].lineage))
			continue;
		expr = build_column_default(rel, a + 1);
		if (expr != NULL)
			st->defaults[a] = ExecInitExpr((Expr *) expression_planner((Expr *) expr), NULL);
	}
	return st;
}

/* ---- one call: the rows, in a subtransaction ---- */

typedef struct HeapCall
{
	KsBatch    *batch;
	HeapApplyState *st;
	int		   *rows;
	int			nrows;
	bool		deletes;
} HeapCall;

/* column c of a (folded) winner: from the message that supplies it */
static inline KsRow *
supplier(KsBatch *batch, KsRow *row, int c)
{
	if (row->fold_src == NULL)
		return row;
	return row->fold_src[c] >= 0 ? &batch->rows[row->fold_src[c]] : NULL;
}

/* a lineage column's value for row */
static void
lineage_value(KsBatch *batch, KsRow *row, const char *lineage, Datum *v, bool *isnull)
{
	*isnull = false;
	if (strcmp(lineage, "s._ks_topic") == 0)
		*v = CStringGetTextDatum(row->msg->topic);
	else if (strcmp(lineage, "s._ks_partition") == 0)
		*v = Int32GetDatum(row->msg->partition);
	else if (strcmp(lineage, "s._ks_offset") == 0)
		*v = Int64GetDatum(row->msg->offset);
	else if (strcmp(lineage, "s._ks_ts") == 0)
	{
		*isnull = row->msg->timestamp_ms < 0;
		*v = *isnull ? (Datum) 0 : TimestampTzGetDatum(ks_epoch_ms_to_timestamptz(row->msg->timestamp_ms));
	}
	else
		*v = Int64GetDatum(batch->batch_id);
}

/* "a IS NULL OR b op a" with op strict: SQL's truth, NULL as false */
static bool
guard(HeapApplyState *st, FmgrInfo *op, Datum b, bool bnull, Datum a, bool anull)
{
	if (anull)
		return true;
	if (bnull)
		return false;
	return DatumGetBool(FunctionCall2Coll(op, st->order_coll, b, a));
}

static void
heap_call(void *arg)
{
	HeapCall   *call = arg;
	KsBatch    *batch = call->batch;
	HeapApplyState *st = call->st;
	KsTarget   *t = batch->target;
	Relation	rel = st->rel;
	TupleDesc	desc = RelationGetDescr(rel);
	int			natts = desc->natts;
	int			o = t->order_index;
	EState	   *estate = CreateExecutorState();
	ResultRelInfo *rri = makeNode(ResultRelInfo);
	TupleTableSlot *search = MakeSingleTupleTableSlot(desc, &TTSOpsVirtual);
	TupleTableSlot *found = table_slot_create(rel, NULL);
	TupleTableSlot *next = MakeSingleTupleTableSlot(desc, &TTSOpsVirtual);
	ExprContext *econtext;
	int			catalog_writes;

	PushActiveSnapshot(GetTransactionSnapshot());
	/*
	 * Not in a range table (index 0): the executor's helpers then find no
	 * updated columns (ExecGetUpdatedCols is NULL, the index AM only loses
	 * its "unchanged" hint) instead of reading a range table there is none
	 * of, which crashed updates of tables with a second index.
	 */
	InitResultRelInfo(rri, rel, 0, NULL, 0);
	ExecOpenIndices(rri, false);
	estate->es_output_cid = GetCurrentCommandId(true);
	econtext = GetPerTupleExprContext(estate);
	/* defaults may run the user's functions, which may not write the catalog */
	catalog_writes = ks_catalog_writes_suspend();
	for (int i = 0; i < call->nrows; i++)
	{
		KsRow	   *row = &batch->rows[call->rows[i]];
		MemoryContext oldcxt;
		bool		exists;

		CHECK_FOR_INTERRUPTS();
		ExecClearTuple(search);
		memset(search->tts_isnull, true, sizeof(bool) * natts);
		for (int k = 0; k < t->nkeys; k++)
		{
			int			c = t->key_index[k];
			KsRow	   *src = supplier(batch, row, c);
			int			a = t->columns[c].attnum - 1;

			search->tts_values[a] = src ? src->values[c] : (Datum) 0;
			search->tts_isnull[a] = src ? src->nulls[c] : true;
		}
		ExecStoreVirtualTuple(search);
		exists = RelationFindReplTupleByIndex(rel, st->key_index,
											  call->deletes ? LockTupleExclusive : LockTupleNoKeyExclusive,
											  search, found);
		oldcxt = MemoryContextSwitchTo(GetPerTupleMemoryContext(estate));
		if (call->deletes)
		{
			/* the DELETE: the key; a change event's only an older row */
			if (exists && o >= 0 && t->cdc)
			{
				bool		tnull;
				Datum		tv = slot_getattr(found, t->columns[o].attnum, &tnull);

				exists = tnull || (!row->nulls[o] &&
								   DatumGetBool(FunctionCall2Coll(&st->lt, st->order_coll, tv, row->values[o])));
			}
			if (exists)
			{
				ExecSimpleRelationDelete(rri, estate, NULL, found);
				batch->stats.deleted++;
			}
		}
		else if (exists)
		{
			Datum		tov = (Datum) 0;
			bool		tonull = true;
			bool		any = false;

			if (o >= 0)
			{
				KsRow	   *src = supplier(batch, row, o);

				tov = slot_getattr(found, t->columns[o].attnum, &tonull);
				/* WHEN MATCHED AND (t.o IS NULL OR s.o >= t.o) */
				if (!guard(st, &st->ge, src ? src->values[o] : (Datum) 0, src ? src->nulls[o] : true,
						   tov, tonull))
				{
					MemoryContextSwitchTo(oldcxt);
					ResetPerTupleExprContext(estate);
					continue;
				}
			}
			slot_getallattrs(found);
			ExecClearTuple(next);
			memcpy(next->tts_values, found->tts_values, sizeof(Datum) * natts);
			memcpy(next->tts_isnull, found->tts_isnull, sizeof(bool) * natts);
			for (int c = 0; c < t->ncolumns; c++)
			{
				KsColumn   *col = &t->columns[c];
				KsRow	   *src = supplier(batch, row, c);
				int			a = col->attnum - 1;

				if (col->is_key)
					continue;
				any = true;
				if (col->lineage)
					lineage_value(batch, row, col->lineage, &next->tts_values[a], &next->tts_isnull[a]);
				else if (src == NULL || !src->present[c])
					continue;
				else if (col->prov >= 0 &&
						 !guard(st, &st->ge, src->values[o], src->nulls[o], tov, tonull))
					continue;
				else
				{
					next->tts_values[a] = src->values[c];
					next->tts_isnull[a] = src->nulls[c];
				}
			}
			/* THEN DO NOTHING: no column but the key */
			if (any)
			{
				ExecStoreVirtualTuple(next);
				ExecSimpleRelationUpdate(rri, estate, NULL, found, next);
				batch->stats.updated++;
			}
		}
		else
		{
			ExecClearTuple(next);
			for (int a = 0; a < natts; a++)
			{
				int			c = st->col_of[a];
				KsColumn   *col = c >= 0 ? &t->columns[c] : NULL;
				KsRow	   *src = c >= 0 ? supplier(batch, row, c) : NULL;

				next->tts_values[a] = (Datum) 0;
				next->tts_isnull[a] = true;
				if (col && col->lineage)
					lineage_value(batch, row, col->lineage, &next->tts_values[a], &next->tts_isnull[a]);
				else if (col && (col->is_key || col->required || (src && src->present[c])))
				{
					if (src)
					{
						next->tts_values[a] = src->values[c];
						next->tts_isnull[a] = src->nulls[c];
					}
				}
				else if (st->defaults[a] != NULL)
					next->tts_values[a] = ExecEvalExpr(st->defaults[a], econtext, &next->tts_isnull[a]);
			}
			ExecStoreVirtualTuple(next);
			ExecSimpleRelationInsert(rri, estate, next);
			batch->stats.inserted++;
		}
		MemoryContextSwitchTo(oldcxt);
		ResetPerTupleExprContext(estate);
	}
	ks_catalog_writes_restore(catalog_writes);
	ExecDropSingleTupleTableSlot(search);
	ExecDropSingleTupleTableSlot(found);
	ExecDropSingleTupleTableSlot(next);
	ExecCloseIndices(rri);
	FreeExecutorState(estate);
	PopActiveSnapshot();
	/* the next call (and the SQL after the batch) sees these rows */
	CommandCounterIncrement();
}

/*
 * Applies rows directly; when that fails, rolls back and gives the rows
 * to the SQL strategy, which narrows a row's fault down to its rows and
 * quarantines them with the reason it gives (the same reasons, since the
 * same statement runs).  An error that no row can cause is rethrown: a
 * cancel, a deadlock, a serialization failure.
 */
static int
heap_rows(KsBatch *batch, HeapApplyState *st, int *rows, int nrows, bool deletes)
{
	HeapCall	call = {batch, st, rows, nrows, deletes};
	KsBatchStats before = batch->stats;
	ErrorData  *edata;
	int			catalog_writes;

	if (nrows == 0)
		return 0;
	/* heap_call suspends catalog writes; an error leaves them suspended */
	catalog_writes = ks_catalog_writes_suspend();
	ks_catalog_writes_restore(catalog_writes);
	edata = ks_try_subxact(heap_call, &call);
	ks_catalog_writes_restore(catalog_writes);
	if (edata == NULL)
	{
		batch->stats.heap_rows += nrows;
		return 0;
	}
	if (!ks_err_may_be_row_fault(edata->sqlerrcode))
		ReThrowError(edata);
	FreeErrorData(edata);
	batch->stats = before;
	if (deletes)
		return ks_apply_sql.delete_rows(batch, sql_state(batch, st), rows, nrows);
	return ks_apply_sql.upsert_rows(batch, sql_state(batch, st), rows, nrows);
}

static int
heap_delete_rows(KsBatch *batch, void *state, int *rows, int nrows)
{
	HeapApplyState *st = state;

	if (st->rel == NULL)
		return ks_apply_sql.delete_rows(batch, st->sql, rows, nrows);
	return heap_rows(batch, st, rows, nrows, true);
}

static int
heap_upsert_rows(KsBatch *batch, void *state, int *rows, int nrows)
{
	HeapApplyState *st = state;

	if (st->rel == NULL)
		return ks_apply_sql.upsert_rows(batch, st->sql, rows, nrows);
	return heap_rows(batch, st, rows, nrows, false);
}

/* append and function mode: always the SQL strategy's (heap_begin chose it) */
static int
heap_insert_rows(KsBatch *batch, void *state, int *rows, int nrows)
{
	return ks_apply_sql.insert_rows(batch, ((HeapApplyState *) state)->sql, rows, nrows);
}

static void
heap_call_function(KsBatch *batch, void *state, int *rows, int nrows)
{
	ks_apply_sql.call_function(batch, ((HeapApplyState *) state)->sql, rows, nrows);
}

static void
heap_end(KsBatch *batch, void *state)
{
	HeapApplyState *st = state;

	if (st->sql != NULL)
		ks_apply_sql.end(batch, st->sql);
	if (st->rel != NULL)
		table_close(st->rel, NoLock);
}

const KsApplyStrategy ks_apply_heap = {
	.name = "heap",
	.begin = heap_begin,
	.delete_rows = heap_delete_rows,
	.upsert_rows = heap_upsert_rows,
	.insert_rows = heap_insert_rows,
	.call_function = heap_call_function,
	.end = heap_end,
};
