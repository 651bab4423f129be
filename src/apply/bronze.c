/*-------------------------------------------------------------------------
 *
 * bronze.c
 *		The bronze table: every raw message of a batch, landed in the
 *		batch's transaction, through table_multi_insert() when the table
 *		allows (bronze_fast_path), else with the INSERT of statements.c
 *		over kafka_sink._batch_messages().
 *
 * Owns: _batch_messages(), the fast path and its conditions, idempotent
 * landing (bronze_landed(): the offsets the table holds, one query per
 * partition of the batch under a lock per table and partition; ON
 * CONFLICT on the offsets' unique index only after a unique violation).
 * Must not: write any other table.
 *
 *-------------------------------------------------------------------------
 */
#include "kafka_sink.h"
#include "spi.h"
#include "catalog_guard.h"
#include "bronze.h"
#include "catalog.h"
#include "consumer.h"
#include "sqlcall.h"
#include "statements.h"
#include "apply.h"

#include "access/heapam.h"
#include "access/genam.h"
#include "access/relation.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/index.h"
#include "catalog/pg_am.h"
#include "catalog/pg_index.h"
#include "catalog/pg_type.h"
#include "common/hashfn.h"
#include "executor/executor.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "optimizer/optimizer.h"
#include "storage/lmgr.h"
#include "storage/lock.h"
#include "rewrite/rewriteHandler.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/datum.h"
#include "utils/fmgrprotos.h"
#include "utils/jsonb.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/rls.h"
#include "utils/timestamp.h"

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
		v[3] = TimestampTzGetDatum(ks_epoch_ms_to_timestamptz(m->timestamp_ms));
	else
		n[3] = true;
	if (m->key)
		v[4] = ks_bytea_datum(m->key, m->key_len);
	else
		n[4] = true;
	if (m->value)
		v[5] = ks_bytea_datum(m->value, m->value_len);
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
 * The messages of the batch to land (indexes into batch->msgs, in order),
 * or NULL for all of them: bronze_landed() leaves out those bronze holds
 * already.  Set around the bronze write only, like srf_raw_batch.
 */
static int *bronze_todo = NULL;
static int	bronze_ntodo = 0;

#define TODO_COUNT(batch) (bronze_todo ? bronze_ntodo : (batch)->nmsgs)
#define TODO_MSG(batch, i) ((batch)->msgs[bronze_todo ? bronze_todo[i] : (i)])

/*
 * kafka_sink._batch_messages(): the raw messages of the batch this process
 * is writing to its bronze table (ks_write_bronze).
 * Checks: the bronze write of a batch is in progress in this process
 * (srf_raw_batch is only set around it); the caller's column definition
 * list is exactly the seven bronze columns below (types and typmods), since
 * the tuples are built with it.
 */
PG_FUNCTION_INFO_V1(kafka_sink_batch_messages);
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
	for (int i = 0; i < TODO_COUNT(srf_raw_batch); i++)
	{
		Datum		v[KS_BRONZE_NCOLS];
		bool		n[KS_BRONZE_NCOLS];

		/* the SRF's 7 columns are the first 7; batch_id is a parameter */
		bronze_row(srf_raw_batch, TODO_MSG(srf_raw_batch, i), v, n);
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
 * n filled slots into rri's table as COPY FROM writes them: one
 * table_multi_insert (one WAL record per page rather than per row), then
 * each row's index entries.  The table has no deferrable or exclusion
 * index (both callers refuse those), so nothing is left to recheck.  Also
 * the heap apply strategy's inserts (apply_heap.c).
 */
void
ks_insert_slots(ResultRelInfo *rri, EState *estate, TupleTableSlot **slots, int n,
				CommandId cid, BulkInsertState bistate)
{
	ExprContext *econtext = GetPerTupleExprContext(estate);

	table_multi_insert(rri->ri_RelationDesc, slots, n, cid, 0, bistate);
	if (rri->ri_NumIndices == 0)
		return;
	for (int i = 0; i < n; i++)
	{
		List	   *recheck;

		econtext->ecxt_scantuple = slots[i];
		recheck = KS_EXEC_INSERT_INDEX_TUPLES(rri, slots[i], estate);
		Assert(recheck == NIL);
		list_free(recheck);
		ResetPerTupleExprContext(estate);
	}
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
	Oid			relid = batch->pipeline->targets.bronze;
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
	TupleDesc	slotdesc;
	int			nslots;
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
	/*
	 * As many slots as the largest chunk, over a copy of the descriptor:
	 * the relation's own is reference-counted, and each slot on it would
	 * be remembered and forgotten by the resource owner (a linear search
	 * per slot), which cost a third of landing a batch of 1,000 messages.
	 */
	slotdesc = CreateTupleDescCopy(desc);
	nslots = Min(KS_BRONZE_CHUNK, TODO_COUNT(batch));
	slots = palloc(sizeof(TupleTableSlot *) * nslots);
	for (int i = 0; i < nslots; i++)
		slots[i] = MakeSingleTupleTableSlot(slotdesc, table_slot_callbacks(rel));
	chunk_cxt = AllocSetContextCreate(CurrentMemoryContext, "kafka_sink bronze chunk", ALLOCSET_DEFAULT_SIZES);

	for (int first = 0; first < TODO_COUNT(batch); first += KS_BRONZE_CHUNK)
	{
		int			n = Min(KS_BRONZE_CHUNK, TODO_COUNT(batch) - first);
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
			bronze_row(batch, TODO_MSG(batch, first + i), v, nl);
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
		ks_insert_slots(rri, estate, slots, n, cid, bistate);
		MemoryContextSwitchTo(oldcxt);
		for (int i = 0; i < n; i++)
			ExecClearTuple(slots[i]);
		MemoryContextReset(chunk_cxt);
		CHECK_FOR_INTERRUPTS();
	}

	for (int i = 0; i < nslots; i++)
		ExecDropSingleTupleTableSlot(slots[i]);
	FreeTupleDesc(slotdesc);
	FreeBulkInsertState(bistate);
	table_finish_bulk_insert(rel, 0);
	ExecCloseIndices(rri);
	FreeExecutorState(estate);
	MemoryContextDelete(chunk_cxt);
	table_close(rel, NoLock);
	return true;
}

/* ---- what bronze holds already: one check per partition of the batch ---- */

/*
 * The fourth field of the advisory lock tag of a bronze table's
 * per-partition locks: pg_advisory_* use 1 and 2, the fence 0x4B53
 * (checkpoint.c), so no session takes it but through kafka_sink.
 */
#define KS_BRONZE_FIELD4 0x4B42	/* "KB" */

/* the offsets of one partition in the batch, and those bronze holds */
typedef struct BronzeRange
{
	const char *topic;
	int32		partition;
	int64		lo;
	int64		hi;
	uint32		lock_key;		/* of topic and partition, in the lock's tag */
	int64	   *landed;			/* offsets in [lo, hi] bronze holds, sorted */
	int			nlanded;
} BronzeRange;

static int
bronze_range_cmp(const void *a, const void *b)
{
	const BronzeRange *x = a;
	const BronzeRange *y = b;
	int			c;

	/* by the lock's tag first: every batch takes the locks in one order */
	if (x->lock_key != y->lock_key)
		return x->lock_key < y->lock_key ? -1 : 1;
	c = strcmp(x->topic, y->topic);
	return c != 0 ? c : (x->partition > y->partition) - (x->partition < y->partition);
}

static int
offset_cmp(const void *a, const void *b)
{
	int64		x = *(const int64 *) a;
	int64		y = *(const int64 *) b;

	return (x > y) - (x < y);
}

/* m's range: the last one found (messages come in runs), else a search */
static BronzeRange *
range_of(BronzeRange *r, int nr, int *last, KsMessage *m)
{
	if (*last >= 0 && r[*last].partition == m->partition && strcmp(r[*last].topic, m->topic) == 0)
		return &r[*last];
	for (int i = 0; i < nr; i++)
		if (r[i].partition == m->partition && strcmp(r[i].topic, m->topic) == 0)
		{
			*last = i;
			return &r[i];
		}
	return NULL;
}

/*
 * Whether bronze can tell which offsets of the batch it holds with an
 * index range scan: the owner may read topic, partition and "offset", no
 * row level security hides rows from it, and a valid btree index of the
 * table has "offset" among its key columns (the standard table's
 * (partition, "offset"), the primary key of older ones).  Without one the
 * check would read the whole table per batch: such a table only has its
 * unique indexes to keep a message from landing twice, as before.
 */
static bool
bronze_checkable(Oid relid)
{
	static const char *const cols[] = {"topic", "partition", "offset"};
	AttrNumber	off = InvalidAttrNumber;
	bool		select_all;
	Relation	rel;
	List	   *indexes;
	ListCell   *lc;
	bool		found = false;

	if (check_enable_rls(relid, InvalidOid, true) == RLS_ENABLED)
		return false;
	/* pg_attribute_aclcheck() looks at the column's own grants only */
	select_all = pg_class_aclcheck(relid, GetUserId(), ACL_SELECT) == ACLCHECK_OK;
	for (int c = 0; c < (int) lengthof(cols); c++)
	{
		AttrNumber	a = get_attnum(relid, cols[c]);

		if (a == InvalidAttrNumber ||
			(!select_all && pg_attribute_aclcheck(relid, a, GetUserId(), ACL_SELECT) != ACLCHECK_OK))
			return false;
		off = a;
	}
	rel = table_open(relid, RowExclusiveLock);
	indexes = RelationGetIndexList(rel);
	foreach(lc, indexes)
	{
		Relation	ind = index_open(lfirst_oid(lc), AccessShareLock);

		if (ind->rd_rel->relam == BTREE_AM_OID && ind->rd_index->indisvalid)
			for (int k = 0; k < ind->rd_index->indnkeyatts; k++)
				if (ind->rd_index->indkey.values[k] == off)
					found = true;
		index_close(ind, AccessShareLock);
	}
	list_free(indexes);
	table_close(rel, NoLock);
	return found;
}

/*
 * Leaves out of the landing (bronze_todo) the messages of the batch that
 * bronze holds already: offsets reset backwards, a backfill, a second
 * pipeline into the same table.  Per topic and partition of the batch:
 * an exclusive lock on (the table, topic and partition), held to
 * the end of the transaction, then one query for the offsets of the
 * batch's range that the table holds, with a snapshot taken after the
 * lock (read committed), so that a batch of another pipeline landing the
 * same offsets has committed or not started.  The locks are taken in the
 * order of their tags (a hash of topic and partition: two partitions may
 * share one, which only makes their batches wait for each other), so that
 * two batches never wait for each other's.  In normal running (the
 * checkpoint hands each offset out once) every query finds nothing and
 * the batch lands as it is, without a unique check per row.
 */
static void
bronze_landed(KsBatch *batch, Oid relid)
{
	int			cap = 8;
	int			nr = 0;
	int			last = -1;
	int			nlanded = 0;
	BronzeRange *r = palloc(sizeof(BronzeRange) * cap);
	Oid			argtypes[4] = {TEXTOID, INT4OID, INT8OID, INT8OID};
	char	   *sql;

	for (int i = 0; i < batch->nmsgs; i++)
	{
		KsMessage  *m = batch->msgs[i];
		BronzeRange *x = range_of(r, nr, &last, m);

		if (x == NULL)
		{
			if (nr == cap)
				r = repalloc(r, sizeof(BronzeRange) * (cap *= 2));
			x = &r[nr];
			x->topic = m->topic;
			x->partition = m->partition;
			x->lo = x->hi = m->offset;
			x->lock_key = hash_combine(hash_bytes((const unsigned char *) m->topic, strlen(m->topic)),
									   (uint32) m->partition);
			x->landed = NULL;
			x->nlanded = 0;
			last = nr++;
		}
		x->lo = Min(x->lo, m->offset);
		x->hi = Max(x->hi, m->offset);
	}
	qsort(r, nr, sizeof(BronzeRange), bronze_range_cmp);
	sql = psprintf("SELECT \"offset\" FROM %s WHERE topic = $1 AND partition = $2 AND \"offset\" BETWEEN $3 AND $4",
				   quote_qualified_identifier(get_namespace_name(get_rel_namespace(relid)), get_rel_name(relid)));
	for (int i = 0; i < nr; i++)
	{
		LOCKTAG		tag;
		Datum		values[4];

		SET_LOCKTAG_ADVISORY(tag, MyDatabaseId, relid, r[i].lock_key, KS_BRONZE_FIELD4);
		(void) LockAcquire(&tag, ExclusiveLock, false, false);
		values[0] = CStringGetTextDatum(r[i].topic);
		values[1] = Int32GetDatum(r[i].partition);
		values[2] = Int64GetDatum(r[i].lo);
		values[3] = Int64GetDatum(r[i].hi);
		if (ks_spi_execute(sql, 4, argtypes, values, NULL, false, 0) != SPI_OK_SELECT)
			elog(ERROR, "kafka_sink: could not read the bronze table");
		if (SPI_processed == 0)
			continue;
		r[i].landed = palloc(sizeof(int64) * SPI_processed);
		for (uint64 t = 0; t < SPI_processed; t++)
		{
			bool		isnull;

			r[i].landed[r[i].nlanded++] =
				DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[t], SPI_tuptable->tupdesc, 1, &isnull));
		}
		qsort(r[i].landed, r[i].nlanded, sizeof(int64), offset_cmp);
		nlanded += r[i].nlanded;
	}
	if (nlanded == 0)
		return;
	bronze_todo = palloc(sizeof(int) * batch->nmsgs);
	bronze_ntodo = 0;
	last = -1;
	for (int i = 0; i < batch->nmsgs; i++)
	{
		KsMessage  *m = batch->msgs[i];
		BronzeRange *x = range_of(r, nr, &last, m);

		if (x->nlanded == 0 ||
			bsearch(&m->offset, x->landed, x->nlanded, sizeof(int64), offset_cmp) == NULL)
			bronze_todo[bronze_ntodo++] = i;
	}
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
		ks_spi_execute(c->sql, 1, c->argtypes, c->values, NULL, false, 0) != SPI_OK_INSERT)
		elog(ERROR, "kafka_sink: could not write to the bronze table");
}

static bool
try_bronze(KsBatch *batch, const char *sql, Oid *argtypes, Datum *values)
{
	BronzeCall	call = {batch, sql, argtypes, values};
	ErrorData  *edata = ks_try_subxact(bronze_call, &call);

	if (edata != NULL && edata->sqlerrcode != ERRCODE_UNIQUE_VIOLATION)
	{
		/* a partitioned bronze table without a partition for a message */
		if (edata->sqlerrcode == ERRCODE_CHECK_VIOLATION && edata->constraint_name == NULL &&
			edata->hint == NULL)
			edata->hint = pstrdup("Bronze takes every message of the batch: create the bronze table's "
								  "partition for it, then kafka_sink.start() the pipeline.");
		ReThrowError(edata);
	}
	return edata == NULL;
}


/*
 * Lands the batch's raw messages.  Idempotent: a message already in bronze
 * (offsets reset backwards, a second pipeline on the same table) is kept
 * as it is and left out (bronze_landed(), where bronze_checkable()).  The
 * common case, no such message, is a plain insert: INSERT ... ON CONFLICT
 * DO NOTHING costs a speculative insertion per row, so it only runs when
 * the plain one hit a unique violation (a writer outside kafka_sink, or a
 * table the check cannot read).  Only a message
 * already landed may be skipped: the arbiter is the unique index on
 * (topic, partition, "offset"), so a conflict on any other unique index
 * of the table fails the batch (nothing is checkpointed) instead of
 * dropping the message.  A bronze table without such an index has no way
 * to tell a message landed before: its unique violations all fail the
 * batch ("there is no unique or exclusion constraint matching").
 */
void
ks_write_bronze(KsBatch *batch)
{
	Oid			argtypes[1] = {INT8OID};
	Datum		values[1] = {Int64GetDatum(batch->batch_id)};
	char	   *sql;
	int			catalog_writes;

	sql = ks_bronze_sql(batch->pipeline->targets.bronze);
	srf_raw_batch = batch;
	/* bronze's triggers and defaults are the user's too */
	catalog_writes = ks_catalog_writes_suspend();
	PG_TRY();
	{
		if (bronze_checkable(batch->pipeline->targets.bronze))
			bronze_landed(batch, batch->pipeline->targets.bronze);
		if (TODO_COUNT(batch) > 0 && !try_bronze(batch, sql, argtypes, values) &&
			ks_spi_execute(psprintf("%s ON CONFLICT (topic, partition, \"offset\") DO NOTHING", sql),
								  1, argtypes, values, NULL, false, 0) != SPI_OK_INSERT)
			elog(ERROR, "kafka_sink: could not write to the bronze table");
	}
	PG_FINALLY();
	{
		ks_catalog_writes_restore(catalog_writes);
		srf_raw_batch = NULL;
		bronze_todo = NULL;
		bronze_ntodo = 0;
	}
	PG_END_TRY();
}


bool
ks_batch_messages_active(void)
{
	return srf_raw_batch != NULL;
}
