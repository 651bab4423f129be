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
 * MERGE of statements.c does (heap_eligible(): an allow-list of shapes);
 * append and function mode, and every other target, go to the SQL
 * strategy.  A row's fault (a constraint, a bad value) is not narrowed
 * down here: the call's subtransaction is rolled back and the same rows
 * go to the SQL strategy, which bisects and quarantines with its reasons.
 *
 * Owns: kafka_sink.apply_strategy's heap side and KsApplyStrategy
 * ks_apply_heap.  Must not: choose which rows apply (apply.c, reduce.c).
 *
 * Over 1,000 lines on purpose: the allow-list of shapes, the checks made
 * before anything is written and the per-row probe and write share one
 * executor state and one notion of "exactly what the MERGE does"; split,
 * a shape allowed in one file could be written differently in another.
 *
 *-------------------------------------------------------------------------
 */
#include "kafka_sink.h"
#include "pipeline.h"
#include "guc.h"
#include "catalog_guard.h"
#include "apply.h"
#include "apply_heap.h"
#include "apply_sql.h"
#include "bronze.h"
#include "catalog.h"
#include "decode.h"

#include "access/genam.h"
#include "access/nbtree.h"
#include "access/relscan.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/pg_am.h"
#include "catalog/pg_index.h"
#include "catalog/pg_inherits.h"
#include "catalog/pg_language.h"
#include "catalog/pg_operator.h"
#include "catalog/pg_proc.h"
#include "catalog/pg_publication.h"
#include "catalog/pg_type.h"
#include "executor/executor.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/optimizer.h"
#include "parser/parse_oper.h"
#include "rewrite/rewriteHandler.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"


typedef struct HeapApplyState
{
	KsBatchTarget *bt;
	Relation	rel;
	Oid			key_index;
	FmgrInfo	ge;				/* the order column's >= (the MERGE's guard) */
	FmgrInfo	lt;				/* ... and < (a change event's delete) */
	Oid			order_coll;
	ExprState **defaults;		/* per attribute: the default an insert takes */
	int			nixkeys;		/* the key index's columns ... */
	int		   *ixcol;			/* ... as columns of the target */
	RegProcedure *eq_proc;		/* ... and their btree equality */
	bool		buffer_inserts; /* no unique index but the key's, and every
								 * expression of an insert movable_expr */
	Bitmapset  *pending;		/* columns (as pull_varattnos) whose default
								 * the precheck leaves out (not movable_expr
								 * without nextval) */
	bool		precheck;		/* NOT NULL or CHECK constraints to check
								 * before writing (precheck_rows) */
	int			nchecks;
	ExprState **checks;			/* the CHECKs precheck_rows evaluates ... */
	Bitmapset **check_cols;		/* ... and the columns each reads */
	int			nindexes;
	Oid		   *index_oids;		/* the indexes ... */
	bool	   *unchanged;		/* ... and the MERGE's "unchanged" hint */
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
 * The key index's columns as the target's columns, with their btree
 * equality procedures (as RelationFindReplTupleByIndex's scan keys): the
 * unlocked probe of heap_call.  False when a column of the index is not a
 * key column of the target.
 */
static bool
key_probe(KsBatchTarget *bt, HeapApplyState *st)
{
	KsTarget   *t = bt->target;
	Relation	index = index_open(st->key_index, AccessShareLock);
	int			n = IndexRelationGetNumberOfKeyAttributes(index);
	bool		ok = n == t->nkeys;

	st->nixkeys = n;
	st->ixcol = palloc(sizeof(int) * n);
	st->eq_proc = palloc(sizeof(RegProcedure) * n);
	for (int i = 0; ok && i < n; i++)
	{
		AttrNumber	attnum = index->rd_index->indkey.values[i];
		Oid			optype = index->rd_opcintype[i];
		Oid			op = get_opfamily_member(index->rd_opfamily[i], optype, optype,
											 BTEqualStrategyNumber);

		st->ixcol[i] = -1;
		for (int k = 0; k < t->nkeys; k++)
			if (t->columns[t->key_index[k]].attnum == attnum)
				st->ixcol[i] = t->key_index[k];
		ok = st->ixcol[i] >= 0 && OidIsValid(op) && index->rd_rel->relam == BTREE_AM_OID;
		if (ok)
			st->eq_proc[i] = get_opcode(op);
	}
	index_close(index, NoLock);
	return ok;
}

/*
 * Whether expr may be evaluated by the heap strategy at another moment
 * than the MERGE evaluates it, or twice: every function in it is
 * immutable, or stable and built in (internal language: now(), a cast;
 * it cannot call the user's code, which a stable SQL or PL function may,
 * and that code may be volatile and read the target), and, with nextval,
 * nextval (and an identity column's NextValueExpr) is allowed too, as
 * COPY's contain_volatile_functions_not_nextval() allows it: its values
 * come in the rows' order either way.  Subqueries are never allowed.
 */
static bool
unsafe_function(Oid func, void *context)
{
	bool		nextval = *(bool *) context;
	HeapTuple	tup;
	Form_pg_proc proc;
	bool		unsafe;

	if (nextval && func == F_NEXTVAL)
		return false;
	tup = SearchSysCache1(PROCOID, ObjectIdGetDatum(func));
	if (!HeapTupleIsValid(tup))
		elog(ERROR, "cache lookup failed for function %u", func);
	proc = (Form_pg_proc) GETSTRUCT(tup);
	unsafe = !(proc->provolatile == PROVOLATILE_IMMUTABLE ||
			   (proc->provolatile == PROVOLATILE_STABLE && proc->prolang == INTERNALlanguageId));
	ReleaseSysCache(tup);
	return unsafe;
}

static bool
unsafe_walker(Node *node, void *context)
{
	if (node == NULL)
		return false;
	if (IsA(node, NextValueExpr))
		return !*(bool *) context;
	if (IsA(node, SubLink) || IsA(node, Query) || IsA(node, Param))
		return true;
	if (check_functions_in_node(node, unsafe_function, context))
		return true;
	return expression_tree_walker(node, unsafe_walker, context);
}

static bool
movable_expr(Node *expr, bool nextval)
{
	return !unsafe_walker(expr, &nextval);
}

/*
 * The relation itself: only a plain heap table of the heap access method,
 * in no inheritance tree (the MERGE INTO a parent also updates and
 * matches its children's rows; a child may have its parent's constraints
 * added later), no partition, with no triggers (foreign keys in either
 * direction are triggers), rules, row level security, or a publication of
 * its updates or deletes (whether its replica identity allows them is
 * checked by the executor where the MERGE checks it).
 */
static bool
relation_allowed(Relation rel)
{
	PublicationDesc pubdesc;

	if (rel->rd_rel->relkind != RELKIND_RELATION || rel->rd_rel->relam != HEAP_TABLE_AM_OID ||
		rel->rd_rel->relispartition || rel->rd_rel->relhassubclass ||
		has_superclass(RelationGetRelid(rel)) ||
		rel->trigdesc != NULL || rel->rd_rel->relhastriggers ||
		rel->rd_rules != NULL || rel->rd_rel->relhasrules ||
		rel->rd_rel->relrowsecurity || rel->rd_rel->relforcerowsecurity)
		return false;
	RelationBuildPublicationDesc(rel, &pubdesc);
	return !(pubdesc.pubactions.pubupdate || pubdesc.pubactions.pubdelete);
}

/*
 * The indexes: btree only (the access method whose insertion the tests
 * prove, and whose "unchanged" hint heap_call gives as the MERGE's
 * executor does), no exclusion or deferrable constraint, a valid key
 * index; partial and expression indexes are maintained by
 * ExecInsertIndexTuples as in the executor.  Sets *others_unique when a
 * unique index besides the key's exists, and *movable to false when an
 * index expression or predicate is not movable_expr (the user's
 * functions, called at a flush instead of at the row).
 */
static bool
indexes_allowed(Relation rel, Oid key_index, bool *others_unique, bool *movable)
{
	List	   *indexes = RelationGetIndexList(rel);
	ListCell   *lc;
	bool		ok = true;

	foreach(lc, indexes)
	{
		Oid			ixoid = lfirst_oid(lc);
		Relation	ix = index_open(ixoid, AccessShareLock);
		Form_pg_index form = ix->rd_index;
		List	   *exprs;
		List	   *pred;

		if (ix->rd_rel->relam != BTREE_AM_OID || form->indisexclusion || !form->indimmediate ||
			(ixoid == key_index && !form->indisvalid))
			ok = false;
		if (form->indisunique && ixoid != key_index)
			*others_unique = true;
		exprs = RelationGetIndexExpressions(ix);
		pred = RelationGetIndexPredicate(ix);
		if (!movable_expr((Node *) exprs, false) || !movable_expr((Node *) pred, false))
			*movable = false;
		index_close(ix, NoLock);
	}
	list_free(indexes);
	return ok;
}

/*
 * Whether the heap strategy writes the target exactly as the MERGE (and
 * the tombstones' DELETE) would.  An allow-list: what it accepts is what
 * it is proven to do as the executor does (test/e2e/heap_matrix.sh),
 * everything else keeps the MERGE.  Accepted: relation_allowed()'s
 * tables; columns not of a domain type and not generated (a domain's constraints run on the MERGE's coerced NULL of an
 * absent value, the heap would store a bare NULL); lineage columns of
 * their source's type (the MERGE casts); table level SELECT, INSERT,
 * UPDATE and DELETE (the MERGE checks them, the helpers do not; column
 * privileges alone keep the MERGE); a key index that is the replica
 * identity index or primary key (RelationFindReplTupleByIndex compares
 * whole tuples for other indexes on 16+); indexes_allowed()'s indexes;
 * an order column with a strict >= and <.  NOT NULL and CHECK
 * constraints and defaults of any kind are accepted: ExecConstraints
 * checks the former, and the latter are evaluated per row as the MERGE
 * does (see heap_begin for when inserts are buffered).  Called per batch
 * with the table locked, so a trigger, policy, constraint, child or
 * publication added between two batches moves the next one to the MERGE.
 */
static bool
heap_eligible(KsBatchTarget *bt, Relation rel, HeapApplyState *st)
{
	KsTarget   *t = bt->target;
	TupleDesc	desc = RelationGetDescr(rel);
	Oid			identity;
	bool		others_unique = false;
	bool		movable = true;
	AclMode		modes[] = {ACL_SELECT, ACL_INSERT, ACL_UPDATE, ACL_DELETE};

	if (bt->mode != KS_MODE_MERGE || t->key_index_name == NULL || t->nkeys == 0)
		return false;
	if (!relation_allowed(rel))
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
	for (int i = 0; i < (int) lengthof(modes); i++)
		if (pg_class_aclcheck(RelationGetRelid(rel), GetUserId(), modes[i]) != ACLCHECK_OK)
			return false;
	st->key_index = get_relname_relid(t->key_index_name, RelationGetNamespace(rel));
	identity = RelationGetReplicaIndex(rel);
	if (!OidIsValid(identity))
		identity = KS_PRIMARY_KEY_INDEX(rel);
	if (!OidIsValid(st->key_index) || st->key_index != identity)
		return false;
	if (!indexes_allowed(rel, st->key_index, &others_unique, &movable) || !key_probe(bt, st))
		return false;
	/*
	 * Another unique index: inserts are not held back for a multi-insert,
	 * since the order of index entries decides which row of a batch
	 * breaks it (the MERGE's order: the rows' key order).
	 */
	st->buffer_inserts = !others_unique && movable;
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

/*
 * The CHECK constraints the precheck evaluates (movable_expr without
 * nextval: evaluating them once more before the writes changes nothing),
 * each with the columns it reads; a CHECK that is not movable with
 * nextval keeps the inserts unbuffered (ExecConstraints would run it
 * before the rows buffered ahead of it are in the table).
 */
static void
prepare_checks(Relation rel, HeapApplyState *st)
{
	TupleConstr *constr = RelationGetDescr(rel)->constr;

	if (constr == NULL)
		return;
	st->checks = palloc0(sizeof(ExprState *) * Max(constr->num_check, 1));
	st->check_cols = palloc0(sizeof(Bitmapset *) * Max(constr->num_check, 1));
	for (int i = 0; i < constr->num_check; i++)
	{
		Expr	   *expr = expression_planner((Expr *) stringToNode(constr->check[i].ccbin));

		if (!movable_expr((Node *) expr, true))
			st->buffer_inserts = false;
		if (!movable_expr((Node *) expr, false))
			continue;
		pull_varattnos((Node *) expr, 1, &st->check_cols[st->nchecks]);
		st->checks[st->nchecks++] = ExecInitExpr(expr, NULL);
	}
	st->precheck = st->nchecks > 0 || constr->has_not_null;
}

/*
 * The MERGE's UPDATE SET columns (every non-key column it names), as
 * ExecGetUpdatedCols gives them to index_unchanged_by_update: an index
 * none of whose key columns or expressions reads one of them gets the
 * index AM's "unchanged" hint (heap_call).
 */
static void
prepare_unchanged_hints(Relation rel, HeapApplyState *st)
{
	KsTarget   *t = st->bt->target;
	Bitmapset  *set = NULL;
	List	   *indexes = RelationGetIndexList(rel);
	ListCell   *lc;
	int			i = 0;

	for (int c = 0; c < t->ncolumns; c++)
		if (!t->columns[c].is_key)
			set = bms_add_member(set, t->columns[c].attnum - FirstLowInvalidHeapAttributeNumber);
	st->nindexes = list_length(indexes);
	st->index_oids = palloc(sizeof(Oid) * Max(st->nindexes, 1));
	st->unchanged = palloc(sizeof(bool) * Max(st->nindexes, 1));
	foreach(lc, indexes)
	{
		Relation	ix = index_open(lfirst_oid(lc), AccessShareLock);
		Bitmapset  *read = NULL;

		for (int k = 0; k < IndexRelationGetNumberOfKeyAttributes(ix); k++)
			if (ix->rd_index->indkey.values[k] != 0)
				read = bms_add_member(read, ix->rd_index->indkey.values[k] - FirstLowInvalidHeapAttributeNumber);
		pull_varattnos((Node *) RelationGetIndexExpressions(ix), 1, &read);
		st->index_oids[i] = lfirst_oid(lc);
		st->unchanged[i++] = !bms_overlap(read, set);
		index_close(ix, NoLock);
	}
	list_free(indexes);
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
	st->pending = NULL;
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
		if (expr == NULL)
			continue;
		expr = (Node *) expression_planner((Expr *) expr);
		/*
		 * COPY's rule (copyfrom.c): a default with volatile functions
		 * other than nextval (one that reads the table, say) must see the
		 * rows before it in the table, so the inserts are not buffered;
		 * here also a stable function of the user's, which may call one.
		 */
		if (!movable_expr(expr, true))
			st->buffer_inserts = false;
		/* the precheck does not evaluate it (nextval, side effects) */
		if (!movable_expr(expr, false))
			st->pending = bms_add_member(st->pending, a + 1 - FirstLowInvalidHeapAttributeNumber);
		st->defaults[a] = ExecInitExpr((Expr *) expr, NULL);
	}
	prepare_checks(rel, st);
	prepare_unchanged_hints(rel, st);
	return st;
}

/* ---- one call: the rows, in a subtransaction ---- */

#define HEAP_INSERT_BUFFER 1000	/* rows per table_multi_insert */

typedef struct HeapCall
{
	KsBatch    *batch;
	HeapApplyState *st;
	int		   *rows;
	int			nrows;
	bool		deletes;
	/* set up by heap_call */
	EState	   *estate;
	ResultRelInfo *rri;
	IndexScanDesc scan;			/* the key index, probed with the snapshot */
	ScanKey		skey;
	TupleTableSlot *search;		/* the key, for the locking probe */
	TupleTableSlot *found;
	TupleTableSlot *next;
	TupleTableSlot **ins;		/* inserts waiting for table_multi_insert */
	int			nins;
	int			insmax;			/* ... at most (the buffer's slots) */
	bool		prechecked;		/* precheck_rows probed every row: */
	bool	   *exists;			/* ... whether the snapshot has its key */
	ItemPointerData *tids;		/* ... and where */
	bool		faulty;			/* precheck_rows found a row's fault */
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

/*
 * The row with row's key as the call's snapshot sees it, without locking
 * it (the MERGE's join does not lock either: its update waits for and
 * follows a concurrent writer, which update_unlocked's caller does).  A
 * NULL key matches nothing, as in the MERGE's join.
 */
static bool
probe(HeapCall *call, KsRow *row)
{
	HeapApplyState *st = call->st;
	MemoryContext oldcxt;
	bool		found;

	for (int i = 0; i < st->nixkeys; i++)
	{
		int			c = st->ixcol[i];
		KsRow	   *src = supplier(call->batch, row, c);

		if (src == NULL || src->nulls[c])
			return false;
		call->skey[i].sk_argument = src->values[c];
	}
	/*
	 * In the query's context, as the executor's index scans run: the
	 * index AM keeps what it allocates during the scan (btree's array of
	 * killed items) until index_endscan.
	 */
	oldcxt = MemoryContextSwitchTo(call->estate->es_query_cxt);
	index_rescan(call->scan, call->skey, st->nixkeys, NULL, 0);
	found = index_getnext_slot(call->scan, ForwardScanDirection, call->found);
	MemoryContextSwitchTo(oldcxt);
	return found;
}

/* the key into call->search, for RelationFindReplTupleByIndex */
static void
search_key(HeapCall *call, KsRow *row)
{
	KsTarget   *t = call->batch->target;
	TupleTableSlot *search = call->search;

	ExecClearTuple(search);
	memset(search->tts_isnull, true, sizeof(bool) * search->tts_tupleDescriptor->natts);
	for (int k = 0; k < t->nkeys; k++)
	{
		int			c = t->key_index[k];
		KsRow	   *src = supplier(call->batch, row, c);
		int			a = t->columns[c].attnum - 1;

		search->tts_values[a] = src ? src->values[c] : (Datum) 0;
		search->tts_isnull[a] = src ? src->nulls[c] : true;
	}
	ExecStoreVirtualTuple(search);
}

/*
 * The new version of the found row into call->next: the MERGE's WHEN
 * MATCHED AND (t.o IS NULL OR s.o >= t.o) THEN UPDATE.  False when the
 * guard keeps the old row, or when no column but the key is written (THEN
 * DO NOTHING).
 */
static bool
updated_row(HeapCall *call, KsRow *row)
{
	KsBatch    *batch = call->batch;
	HeapApplyState *st = call->st;
	KsTarget   *t = batch->target;
	TupleTableSlot *found = call->found;
	TupleTableSlot *next = call->next;
	int			natts = next->tts_tupleDescriptor->natts;
	int			o = t->order_index;
	Datum		tov = (Datum) 0;
	bool		tonull = true;
	bool		any = false;

	if (o >= 0)
	{
		KsRow	   *src = supplier(batch, row, o);

		tov = slot_getattr(found, t->columns[o].attnum, &tonull);
		if (!guard(st, &st->ge, src ? src->values[o] : (Datum) 0, src ? src->nulls[o] : true,
				   tov, tonull))
			return false;
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
	if (any)
		ExecStoreVirtualTuple(next);
	return any;
}

/*
 * ExecSimpleRelationUpdate's work on a tuple that is not locked: the
 * constraints, the update, its index entries.  False (nothing written)
 * when a concurrent transaction updated or deleted the row since the
 * snapshot: the caller then locks the newest version and decides again,
 * as the MERGE's EvalPlanQual does.
 */
static bool
update_unlocked(HeapCall *call)
{
	ResultRelInfo *rri = call->rri;
	Relation	rel = rri->ri_RelationDesc;
	TM_FailureData tmfd;
	LockTupleMode lockmode;
	TM_Result	res;
	KsUpdateIndexes update_indexes;

	if (rel->rd_att->constr)
		ExecConstraints(rri, call->next, call->estate);
	res = table_tuple_update(rel, &call->found->tts_tid, call->next,
							 call->estate->es_output_cid, call->estate->es_snapshot,
							 InvalidSnapshot, true, &tmfd, &lockmode, &update_indexes);
	if (res == TM_Updated || res == TM_Deleted)
		return false;
	if (res != TM_Ok)
		elog(ERROR, "unexpected table_tuple_update status: %u", res);
	if (rri->ri_NumIndices > 0)
		KS_UPDATE_INDEX_TUPLES(rri, call->next, call->estate, update_indexes);
	return true;
}

/* the waiting inserts, as COPY writes them (bronze.c) */
static void
flush_inserts(HeapCall *call)
{
	if (call->nins == 0)
		return;
	ks_insert_slots(call->rri, call->estate, call->ins, call->nins, call->estate->es_output_cid, NULL);
	for (int i = 0; i < call->nins; i++)
		ExecClearTuple(call->ins[i]);
	call->nins = 0;
}

/*
 * The MERGE's INSERT's values for row into slot.  For the precheck, the
 * defaults in st->pending are left NULL (not evaluated).
 */
static void
insert_values(HeapCall *call, KsRow *row, TupleTableSlot *slot, bool precheck)
{
	KsBatch    *batch = call->batch;
	HeapApplyState *st = call->st;
	KsTarget   *t = batch->target;
	int			natts = slot->tts_tupleDescriptor->natts;
	ExprContext *econtext = GetPerTupleExprContext(call->estate);

	ExecClearTuple(slot);
	for (int a = 0; a < natts; a++)
	{
		int			c = st->col_of[a];
		KsColumn   *col = c >= 0 ? &t->columns[c] : NULL;
		KsRow	   *src = c >= 0 ? supplier(batch, row, c) : NULL;

		slot->tts_values[a] = (Datum) 0;
		slot->tts_isnull[a] = true;
		if (col && col->lineage)
			lineage_value(batch, row, col->lineage, &slot->tts_values[a], &slot->tts_isnull[a]);
		else if (col && (col->is_key || col->required || (src && src->present[c])))
		{
			if (src)
			{
				slot->tts_values[a] = src->values[c];
				slot->tts_isnull[a] = src->nulls[c];
			}
		}
		else if (st->defaults[a] != NULL &&
				 !(precheck && bms_is_member(a + 1 - FirstLowInvalidHeapAttributeNumber, st->pending)))
			slot->tts_values[a] = ExecEvalExpr(st->defaults[a], econtext, &slot->tts_isnull[a]);
	}
	ExecStoreVirtualTuple(slot);
}

/* the MERGE's WHEN NOT MATCHED THEN INSERT */
static void
insert_row(HeapCall *call, KsRow *row, bool buffer)
{
	TupleTableSlot *slot;

	buffer = buffer && call->st->buffer_inserts;
	slot = buffer ? call->ins[call->nins] : call->next;
	insert_values(call, row, slot, false);
	call->batch->stats.inserted++;
	if (!buffer)
	{
		ExecSimpleRelationInsert(call->rri, call->estate, slot);
		return;
	}
	/* as COPY: the constraints now, the tuple and its index entries in the flush */
	if (call->rri->ri_RelationDesc->rd_att->constr)
		ExecConstraints(call->rri, slot, call->estate);
	/* its own copy: the defaults' memory is reset after each row */
	ExecMaterializeSlot(slot);
	if (++call->nins == call->insmax)
		flush_inserts(call);
}

/*
 * Whether the row in slot passes the NOT NULL and the precheck's CHECK
 * constraints, leaving out those that read a column in pending (a
 * default the precheck did not evaluate).  A CHECK's NULL passes, as in
 * ExecConstraints.
 */
static bool
row_passes(HeapCall *call, TupleTableSlot *slot, Bitmapset *pending)
{
	HeapApplyState *st = call->st;
	TupleDesc	desc = slot->tts_tupleDescriptor;
	ExprContext *econtext = GetPerTupleExprContext(call->estate);

	for (int a = 0; a < desc->natts; a++)
		if (TupleDescAttr(desc, a)->attnotnull && slot->tts_isnull[a] &&
			!bms_is_member(a + 1 - FirstLowInvalidHeapAttributeNumber, pending))
			return false;
	econtext->ecxt_scantuple = slot;
	for (int i = 0; i < st->nchecks; i++)
		if (!bms_overlap(st->check_cols[i], pending) && !ExecCheck(st->checks[i], econtext))
			return false;
	return true;
}

/*
 * Before anything is written: each row's probe (kept for the writes, whose
 * snapshot is the same), and its new row against the NOT NULL and CHECK
 * constraints.  A row that breaks one sends the whole call to the SQL
 * strategy with nothing written, so that a fault costs what it costs the
 * MERGE alone: no sequence value taken, no tuple inserted, updated and
 * rolled back (pg_stat_user_tables' n_tup_ins and n_tup_upd, which
 * autovacuum reads, and dead tuples).  Faults it cannot see before the
 * write (another unique index, an error raised by a default or an index
 * expression, a concurrent insert of a key) still roll the call back.
 */
static bool
precheck_rows(HeapCall *call)
{
	MemoryContext oldcxt;
	bool		ok = true;

	call->exists = palloc(sizeof(bool) * call->nrows);
	call->tids = palloc(sizeof(ItemPointerData) * call->nrows);
	for (int i = 0; ok && i < call->nrows; i++)
	{
		KsRow	   *row = &call->batch->rows[call->rows[i]];

		CHECK_FOR_INTERRUPTS();
		oldcxt = MemoryContextSwitchTo(GetPerTupleMemoryContext(call->estate));
		call->exists[i] = probe(call, row);
		if (call->exists[i])
		{
			call->tids[i] = call->found->tts_tid;
			ok = !updated_row(call, row) || row_passes(call, call->next, NULL);
		}
		else
		{
			insert_values(call, row, call->next, true);
			ok = row_passes(call, call->next, call->st->pending);
		}
		MemoryContextSwitchTo(oldcxt);
		ResetPerTupleExprContext(call->estate);
	}
	call->prechecked = ok;
	return ok;
}

/* row i's probe again: the version precheck_rows found, by its TID */
static bool
probe_again(HeapCall *call, int i, KsRow *row)
{
	if (!call->prechecked)
		return probe(call, row);
	if (!call->exists[i])
		return false;
	if (table_tuple_fetch_row_version(call->st->rel, &call->tids[i], call->estate->es_snapshot,
									  call->found))
		return true;
	return probe(call, row);	/* cannot happen: the snapshot is the same */
}

/* the DELETE's condition on the found row: the key; a change event's only an older row */
static bool
delete_guard(HeapCall *call, KsRow *row)
{
	HeapApplyState *st = call->st;
	KsTarget   *t = call->batch->target;
	int			o = t->order_index;
	bool		tnull;
	Datum		tv;

	if (o < 0 || !t->cdc)
		return true;
	tv = slot_getattr(call->found, t->columns[o].attnum, &tnull);
	return tnull || (!row->nulls[o] &&
					 DatumGetBool(FunctionCall2Coll(&st->lt, st->order_coll, tv, row->values[o])));
}

/*
 * ExecSimpleRelationDelete's work on a tuple that is not locked.  The
 * result of table_tuple_delete: TM_Updated when a concurrent transaction
 * updated the row since the snapshot (the caller locks the newest version
 * and decides again, as the DELETE's EvalPlanQual does), TM_Deleted when
 * one deleted it (the DELETE then skips it too).
 */
static TM_Result
delete_unlocked(HeapCall *call)
{
	Relation	rel = call->rri->ri_RelationDesc;
	TM_FailureData tmfd;
	TM_Result	res;

	CheckCmdReplicaIdentity(rel, CMD_DELETE);
	res = table_tuple_delete(rel, &call->found->tts_tid, call->estate->es_output_cid,
							 call->estate->es_snapshot, InvalidSnapshot, true, &tmfd, false);
	if (res != TM_Ok && res != TM_Updated && res != TM_Deleted)
		elog(ERROR, "unexpected table_tuple_delete status: %u", res);
	return res;
}

/* one row, with the row locked first (after a concurrent update) */
static void
apply_locked(HeapCall *call, KsRow *row)
{
	KsBatch    *batch = call->batch;
	HeapApplyState *st = call->st;
	bool		exists;

	search_key(call, row);
	exists = RelationFindReplTupleByIndex(st->rel, st->key_index,
										  call->deletes ? LockTupleExclusive : LockTupleNoKeyExclusive,
										  call->search, call->found);
	if (call->deletes)
	{
		if (exists && delete_guard(call, row))
		{
			ExecSimpleRelationDelete(call->rri, call->estate, NULL, call->found);
			batch->stats.deleted++;
		}
	}
	else if (exists)
	{
		if (updated_row(call, row))
		{
			ExecSimpleRelationUpdate(call->rri, call->estate, NULL, call->found, call->next);
			batch->stats.updated++;
		}
	}
	else
		insert_row(call, row, false);	/* not behind later rows */
}

/*
 * The rows come in key order, so each is somewhere else in the batch's
 * arrays: loading a row and then its values and nulls were cache misses,
 * 10 % of the apply's CPU in a profile.  A row's work (an index probe, a
 * heap update) is long, so one row ahead is enough, and more was evicted
 * again by the index pages before it was used: the struct (both of its
 * cache lines) two rows ahead, the arrays of the next one.  Always
 * inlined: GCC 12 took a function of prefetches alone for one without
 * effects and dropped its call.
 */
static pg_attribute_always_inline void
prefetch_rows(HeapCall *call, int i)
{
	if (i + 2 < call->nrows)
	{
		KsRow	   *r = &call->batch->rows[call->rows[i + 2]];

		__builtin_prefetch(r);
		__builtin_prefetch((char *) r + sizeof(KsRow) - 1);
	}
	if (i + 1 < call->nrows)
	{
		KsRow	   *r = &call->batch->rows[call->rows[i + 1]];

		__builtin_prefetch(r->values);
		__builtin_prefetch(r->nulls);
		__builtin_prefetch(r->present);
		if (r->fold_src != NULL)
			__builtin_prefetch(r->fold_src);
	}
}

/*
 * The tombstones' DELETE: the row its snapshot sees, as the DELETE's join
 * (a row a concurrent transaction inserted is not there, even once it
 * commits: the locking probe alone would wait for it and delete it), then
 * deleted unless a concurrent update makes the newest version the one to
 * decide on.
 */
static void
delete_row(HeapCall *call, KsRow *row)
{
	if (!probe(call, row) || !delete_guard(call, row))
		return;
	switch (delete_unlocked(call))
	{
		case TM_Ok:
			call->batch->stats.deleted++;
			break;
		case TM_Updated:
			apply_locked(call, row);
			break;
		default:
			break;				/* deleted meanwhile: nothing to delete */
	}
}

static void
heap_call(void *arg)
{
	HeapCall   *call = arg;
	KsBatch    *batch = call->batch;
	HeapApplyState *st = call->st;
	Relation	rel = st->rel;
	TupleDesc	desc = RelationGetDescr(rel);
	EState	   *estate = CreateExecutorState();
	MemoryContext oldcxt;
	Relation	index = NULL;
	int			catalog_writes;

	PushActiveSnapshot(GetTransactionSnapshot());
	call->estate = estate;
	estate->es_snapshot = GetActiveSnapshot();
	estate->es_output_cid = GetCurrentCommandId(true);
	oldcxt = MemoryContextSwitchTo(estate->es_query_cxt);
	call->rri = makeNode(ResultRelInfo);

	/*
	 * Not in a range table (index 0): the executor's helpers then find no
	 * updated columns (ExecGetUpdatedCols is NULL) instead of reading a
	 * range table there is none of, which crashed updates of tables with
	 * a second index.  With no updated columns, index_unchanged_by_update
	 * (15-18) finds no index column changed and gives every index the
	 * index AM's "unchanged" hint (btree: try a bottom-up deletion before
	 * splitting a page), also an index of a column the update changed;
	 * its cache is filled here with the hint the MERGE's updated columns
	 * give (prepare_unchanged_hints).
	 */
	InitResultRelInfo(call->rri, rel, 0, NULL, 0);
	ExecOpenIndices(call->rri, false);
	for (int i = 0; i < call->rri->ri_NumIndices; i++)
	{
		IndexInfo  *ii = call->rri->ri_IndexRelationInfo[i];
		Oid			ixoid = RelationGetRelid(call->rri->ri_IndexRelationDescs[i]);

		ii->ii_CheckedUnchanged = true;
		ii->ii_IndexUnchanged = false;
		for (int k = 0; k < st->nindexes; k++)
			if (st->index_oids[k] == ixoid)
				ii->ii_IndexUnchanged = st->unchanged[k];
	}
	call->search = MakeSingleTupleTableSlot(desc, &TTSOpsVirtual);
	call->found = table_slot_create(rel, NULL);
	call->next = MakeSingleTupleTableSlot(desc, &TTSOpsVirtual);
	for (int i = 0; i < call->rri->ri_NumIndices; i++)
		if (RelationGetRelid(call->rri->ri_IndexRelationDescs[i]) == st->key_index)
			index = call->rri->ri_IndexRelationDescs[i];
	if (index == NULL)
		elog(ERROR, "key index %u of \"%s\" is not open", st->key_index, RelationGetRelationName(rel));
	call->skey = palloc0(sizeof(ScanKeyData) * st->nixkeys);
	for (int i = 0; i < st->nixkeys; i++)
	{
		ScanKeyInit(&call->skey[i], i + 1, BTEqualStrategyNumber, st->eq_proc[i], (Datum) 0);
		call->skey[i].sk_collation = index->rd_indcollation[i];
	}
	call->scan = KS_INDEX_BEGINSCAN(rel, index, estate->es_snapshot, st->nixkeys);
	if (st->buffer_inserts && !call->deletes)
	{
		/*
		 * Over a copy of the descriptor, which is not reference counted: a
		 * thousand slots over the relation's own descriptor pinned it a
		 * thousand times in the resource owner, whose array of one value
		 * made every later pin and release (btree's unique check makes a
		 * slot per checked entry) walk a long probe chain.
		 */
		TupleDesc	copy = CreateTupleDescCopy(desc);

		/* no more slots than the call has rows: small batches are the common case */
		call->insmax = Min(call->nrows, HEAP_INSERT_BUFFER);
		call->ins = palloc(sizeof(TupleTableSlot *) * call->insmax);
		for (int i = 0; i < call->insmax; i++)
			call->ins[i] = MakeSingleTupleTableSlot(copy, &TTSOpsHeapTuple);
	}
	MemoryContextSwitchTo(oldcxt);

	/* defaults may run the user's functions, which may not write the catalog */
	catalog_writes = ks_catalog_writes_suspend();
	if (st->precheck && !call->deletes && !precheck_rows(call))
		call->faulty = true;
	for (int i = 0; !call->faulty && i < call->nrows; i++)
	{
		KsRow	   *row = &batch->rows[call->rows[i]];

		CHECK_FOR_INTERRUPTS();
		prefetch_rows(call, i);
		oldcxt = MemoryContextSwitchTo(GetPerTupleMemoryContext(estate));
		if (call->deletes)
			delete_row(call, row);
		else if (!probe_again(call, i, row))
			insert_row(call, row, true);
		else if (updated_row(call, row))
		{
			if (update_unlocked(call))
				batch->stats.updated++;
			else
				apply_locked(call, row);
		}
		MemoryContextSwitchTo(oldcxt);
		ResetPerTupleExprContext(estate);
	}
	oldcxt = MemoryContextSwitchTo(GetPerTupleMemoryContext(estate));
	flush_inserts(call);
	MemoryContextSwitchTo(oldcxt);
	ks_catalog_writes_restore(catalog_writes);
	if (call->scan != NULL)
		index_endscan(call->scan);
	ExecDropSingleTupleTableSlot(call->search);
	ExecDropSingleTupleTableSlot(call->found);
	ExecDropSingleTupleTableSlot(call->next);
	for (int i = 0; i < call->insmax; i++)
		ExecDropSingleTupleTableSlot(call->ins[i]);
	ExecCloseIndices(call->rri);
	FreeExecutorState(estate);
	PopActiveSnapshot();
	/* the next call (and the SQL after the batch) sees these rows */
	CommandCounterIncrement();
}

/*
 * Applies rows directly; when that fails (or precheck_rows finds a row's
 * fault before writing), rolls back and gives the rows to the SQL
 * strategy, which narrows a row's fault down to its rows and
 * quarantines them with the reason it gives (the same reasons, since the
 * same statement runs).  An error that no row can cause is rethrown: a
 * cancel, a deadlock, a serialization failure.
 */
static int
heap_rows(KsBatch *batch, HeapApplyState *st, int *rows, int nrows, bool deletes)
{
	HeapCall	call = {.batch = batch,.st = st,.rows = rows,.nrows = nrows,.deletes = deletes};
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
	if (edata == NULL && !call.faulty)
	{
		batch->stats.heap_rows += nrows;
		return 0;
	}
	if (edata != NULL)
	{
		if (!ks_err_may_be_row_fault(edata->sqlerrcode))
			ReThrowError(edata);
		FreeErrorData(edata);
	}
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
