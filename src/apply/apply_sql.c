/*-------------------------------------------------------------------------
 *
 * apply_sql.c
 *		The SQL apply strategy: the statements of statements.c run through
 *		SPI, prepared once per text, over kafka_sink._batch_rows() (the
 *		staged rows in this process's memory; no temporary table but for a
 *		Citus target, which reads them from one), with the
 *		faults of rows narrowed down by bisection and classified by SQLSTATE.
 *
 * Owns: _batch_rows(), the plan cache, the key-probe plan settings, the
 * row-fault table (which errors are a row's, which the system's), and
 * KsApplyStrategy ks_apply_sql, ks_apply_onconflict (the same machinery
 * with INSERT ... ON CONFLICT and an UPDATE in place of the MERGE) and
 * ks_apply_citus (the same again, over a staged batch, for Citus tables).  Must not: choose which rows apply (the
 * reduce in apply.c/reduce.c does), write the catalog, or build statement
 * text (statements.c).
 *
 *-------------------------------------------------------------------------
 */
#include "kafka_sink.h"
#include "spi.h"
#include "pipeline.h"
#include "catalog_guard.h"
#include "apply_sql.h"
#include "catalog.h"
#include "sqlcall.h"
#include "statements.h"
#include "decode.h"
#include "errclass.h"
#include "apply.h"
#include "history.h"

#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "catalog/pg_inherits.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/fmgrprotos.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"

static KsBatch *srf_batch = NULL;
static int *srf_rows = NULL;
static int	srf_nrows = 0;


/*
 * The columns of the tuples kafka_sink._batch_rows() builds: the target's
 * columns with their types and typmods, a "present" flag per column, then
 * the message's topic, partition, offset, sequence and timestamp.
 * ks_source_sql() declares exactly these.
 */
static KsSrfColumn *
batch_rows_columns(KsTarget *t, int *ncols)
{
	int			n = t->ncolumns;
	KsSrfColumn *cols = palloc(sizeof(KsSrfColumn) * (2 * n + 6 + t->nprov));
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
	/* mode history: whether the row is a delete (history.c) */
	if (t->history)
	{
		cols[next].name = "_ks_del";
		cols[next].typid = BOOLOID;
		cols[next].typmod = -1;
		next++;
	}
	*ncols = next;
	return cols;
}

/*
 * kafka_sink._batch_rows(): the staged rows of the batch this process is
 * applying, for the statements of statements.c (ks_source_sql).
 * Checks: a batch is being applied by this process (the worker's, or
 * _replay's in this session): srf_batch is only set while one of our
 * statements runs, so a call from elsewhere, a later trigger or another
 * session finds none; the caller's column definition list is exactly the
 * batch's columns (count, types, typmods), since the tuples are built with
 * it.  A user's batch function or trigger that calls it during the batch
 * with the right list gets the same rows, which it could read anyway.
 */
PG_FUNCTION_INFO_V1(kafka_sink_batch_rows);
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
			values[2 * n + 4] = TimestampTzGetDatum(ks_epoch_ms_to_timestamptz(row->msg->timestamp_ms));
		else
			nulls[2 * n + 4] = true;
		if (t->history)
		{
			values[natts - 1] = BoolGetDatum(row->is_delete);
			nulls[natts - 1] = false;
		}
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
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

	if (t->key_index_name == NULL && !t->history)
		return 0;
	level = NewGUCNestLevel();
	(void) set_config_option("enable_hashjoin", "off", PGC_USERSET, PGC_S_SESSION,
							 GUC_ACTION_SAVE, true, 0, false);
	(void) set_config_option("enable_mergejoin", "off", PGC_USERSET, PGC_S_SESSION,
							 GUC_ACTION_SAVE, true, 0, false);

	/*
	 * The history statement reads the target only by key and _valid_from
	 * (history.c); planned while the table is small, or generically, it
	 * would scan the whole table per batch (measured: seven times slower
	 * at 90,000 versions), so its one table is read through the index.
	 */
	if (t->history)
		(void) set_config_option("enable_seqscan", "off", PGC_USERSET, PGC_S_SESSION,
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

/*
 * The snapshot the statements of one update_only call share (its count of
 * absent keys and its MERGE, statement_call), else InvalidSnapshot: each
 * statement takes its own.
 */
static Snapshot shared_snapshot = InvalidSnapshot;

/*
 * Runs sql over rows: $1 is the batch id; with with_xid, $2 the id of the
 * (sub)transaction it writes with (the on_conflict strategy's UPDATE).
 */
static void
run_statement(KsBatch *batch, const char *sql, int *rows, int nrows, bool with_xid)
{
	KsTarget   *t = batch->target;
	Oid			argtypes[2] = {INT8OID, XIDOID};
	Datum		values[2] = {Int64GetDatum(batch->batch_id), (Datum) 0};
	int			rc;
	int			catalog_writes;

	srf_batch = batch;
	srf_rows = rows;
	srf_nrows = nrows;
	/* the user's triggers, defaults and batch function may not write the catalog */
	catalog_writes = ks_catalog_writes_suspend();
	PG_TRY();
	{
		if (with_xid)
			values[1] = TransactionIdGetDatum(GetCurrentTransactionId());
		/* a Citus target reads the rows from its staged batch (statements.c) */
		if (t != NULL && t->citus != KS_CITUS_NONE)
		{
			char	   *stage = ks_citus_stage_name(t);

			if (ks_spi_execute(psprintf("DELETE FROM %s", stage), 0, NULL, NULL, NULL, false, 0) != SPI_OK_DELETE ||
				ks_spi_execute_plan(prepared(ks_citus_stage_fill_sql(t), 0, NULL), NULL, NULL, false, 0) != SPI_OK_INSERT)
				elog(ERROR, "kafka_sink: staging the batch in %s failed", stage);
		}
		if (shared_snapshot != InvalidSnapshot)
			rc = ks_spi_execute_plan_snapshot(prepared(sql, with_xid ? 2 : 1, argtypes), values, NULL,
											  shared_snapshot, 0);
		else
			rc = ks_spi_execute_plan(prepared(sql, with_xid ? 2 : 1, argtypes), values, NULL, false, 0);
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

static List *revived_rows(KsBatch *batch, int *rows, int nrows, List **held);
static void mark_revived(KsBatch *batch, List *revived, List *held);

/*
 * The same for a Citus target, whose rows are written on the worker nodes,
 * so this transaction's pg_stat counters see none of them: the statements'
 * own counts (an UPDATE's are the rows it updated, an INSERT's those it
 * inserted; a batch function's are not rows).  delete_mode soft: the rows
 * its UPDATE brings back, looked up just before it in the same distributed
 * transaction (the worker nodes give each statement its own snapshot, so
 * not the UPDATE's own as in matched_run; the pipeline's worker is the
 * target's one writer of its keys), marked once both succeeded.
 */
static void
citus_counted_run(KsBatch *batch, const char *sql, const char *sql2, int *rows, int nrows,
				  const char **running)
{
	const char *sqls[2] = {sql, sql2};
	int64		counts[2] = {0, 0};
	List	   *revived = NIL,
			   *held = NIL;

	for (int i = 0; i < 2 && sqls[i] != NULL; i++)
	{
		*running = sqls[i];
		if (batch->target->soft && strncmp(sqls[i], "UPDATE", 6) == 0)
			revived = revived_rows(batch, rows, nrows, &held);
		run_statement(batch, sqls[i], rows, nrows, false);
		counts[i] = (int64) SPI_processed;
	}
	mark_revived(batch, revived, held);
	for (int i = 0; i < 2 && sqls[i] != NULL; i++)
	{
		if (strncmp(sqls[i], "INSERT", 6) == 0)
			batch->stats.inserted += counts[i];
		else if (strncmp(sqls[i], "UPDATE", 6) == 0)
			batch->stats.updated += counts[i];
	}
}

/*
 * write_mode update_only: how many of rows have a key the target does not
 * hold (ks_absent_keys_sql), which the MERGE then skips.
 */
static int64
count_absent(KsBatch *batch, int *rows, int nrows)
{
	bool		isnull;
	Datum		d;

	run_statement(batch, ks_absent_keys_sql(batch->target), rows, nrows, false);
	if (SPI_processed != 1)
		elog(ERROR, "kafka_sink: counting the keys not in %s returned " UINT64_FORMAT " rows",
			 batch->target->qualified_name, (uint64) SPI_processed);
	d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
	return isnull ? 0 : DatumGetInt64(d);
}

/*
 * delete_mode soft: the rows (indexes into batch->rows) whose key's row is
 * marked and which the statement's guard lets through (ks_revived_sql):
 * the ones it brings back; *held: for each, what the marked row held to
 * order by (in the rows' memory context, for the checkpoint).
 */
static List *
revived_rows(KsBatch *batch, int *rows, int nrows, List **held)
{
	List	   *out = NIL;
	MemoryContext rows_cxt = GetMemoryChunkContext(batch->rows);

	*held = NIL;
	run_statement(batch, ks_revived_sql(batch->target), rows, nrows, false);
	for (uint64 k = 0; k < SPI_processed; k++)
	{
		bool		isnull;
		int			seq = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[k], SPI_tuptable->tupdesc, 1, &isnull));
		char	   *h;

		if (isnull || seq < 0 || seq >= nrows)
			elog(ERROR, "kafka_sink: the rows brought back in %s name row %d of %d",
				 batch->target->qualified_name, isnull ? -1 : seq, nrows);
		h = SPI_getvalue(SPI_tuptable->vals[k], SPI_tuptable->tupdesc, 2);
		out = lappend_int(out, rows[seq]);
		*held = lappend(*held, MemoryContextStrdup(rows_cxt, h ? h : ""));
	}
	return out;
}

/*
 * Runs the statement that writes the matched rows (the MERGE, or
 * on_conflict's UPDATE after its INSERT) with what is counted of them in
 * its own snapshot: update_only's winners whose key the target lacks
 * (skipped, counted apart from stale) and delete_mode soft's winners that
 * bring a marked row back (revived, recorded per message).  One registered
 * snapshot for the look-ups and the statement, so that a key another
 * session inserts or changes meanwhile is the same to both and the counts
 * are exactly what the statement did; counted after it succeeds, in the
 * same subtransaction, so that a failed try counts nothing.
 */
static void
matched_run(KsBatch *batch, const char *sql, bool with_xid, int *rows, int nrows)
{
	KsTarget   *t = batch->target;
	bool		absent_keys = t->write_mode == KS_WRITE_UPDATE_ONLY;
	bool		revive = t->soft;
	Snapshot	snap;
	volatile int64 absent = 0;
	List	   *volatile revived = NIL;
	List	   *held = NIL;

	if (!absent_keys && !revive)
	{
		run_statement(batch, sql, rows, nrows, with_xid);
		return;
	}
	snap = RegisterSnapshot(GetTransactionSnapshot());
	shared_snapshot = snap;
	PG_TRY();
	{
		if (absent_keys)
			absent = count_absent(batch, rows, nrows);
		if (revive)
			revived = revived_rows(batch, rows, nrows, &held);
		run_statement(batch, sql, rows, nrows, with_xid);
	}
	PG_FINALLY();
	{
		shared_snapshot = InvalidSnapshot;
	}
	PG_END_TRY();
	UnregisterSnapshot(snap);
	batch->stats.skipped += absent;
	mark_revived(batch, revived, held);
}

/*
 * Marks the rows (indexes into batch->rows) that brought a marked row back
 * with what it held, and counts each once, after the statement succeeded.
 */
static void
mark_revived(KsBatch *batch, List *revived, List *held)
{
	ListCell   *lc,
			   *lh;

	forboth(lc, revived, lh, held)
	{
		KsRow	   *r = &batch->rows[lfirst_int(lc)];

		if (r->revived == NULL)
			batch->stats.revived++;
		r->revived = (char *) lfirst(lh);
	}
}

/*
 * Runs a statement (and sql2 after it, with $2: the on_conflict strategy's
 * UPDATE) and adds what they inserted and updated to the stats, once both
 * succeeded (an error rolls back the rows of both).  *running: the
 * statement running, for the error's classification.
 */
static void
counted_run(KsBatch *batch, const char *sql, const char *sql2, int *rows, int nrows,
			const char **running)
{
	int64		ins0,
				upd0,
				ins1,
				upd1;

	if (batch->target->citus != KS_CITUS_NONE)
	{
		citus_counted_run(batch, sql, sql2, rows, nrows, running);
		return;
	}
	xact_counts(batch->target->relid, &ins0, &upd0);
	*running = sql;
	if (sql2 != NULL)
	{
		run_statement(batch, sql, rows, nrows, false);
		*running = sql2;
	}
	matched_run(batch, sql2 != NULL ? sql2 : sql, sql2 != NULL, rows, nrows);
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
 * pipeline on a permanent one).  The categories are errclass.c's, shared
 * with decoding, the heap strategy and the worker; decided by class, so
 * that every code of a class is treated alike; the few exceptions are by
 * code and by evidence, never by message text.  What this file makes of
 * them:
 *
 *   22 data exception, 23 integrity constraint  row: constraint_violation
 *      (but 23514 reported on a partitioned table of the target's tree,
 *      with no constraint named: no partition for the row, no_partition)
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
 *      or permanent as errclass.c says
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
 * Whether a check violation is tuple routing's "no partition of relation
 * ... found for row": PostgreSQL reports it (ExecFindPartition) with the
 * partitioned table and no constraint; a CHECK constraint's violation
 * names its constraint and a leaf table, and a leaf target's "violates
 * partition constraint" names a table that is not partitioned.
 */
static bool
no_partition_error(KsBatch *batch, ErrorData *edata)
{
	Oid			nsp;
	Oid			rel;

	if (edata->sqlerrcode != ERRCODE_CHECK_VIOLATION || edata->constraint_name != NULL ||
		edata->table_name == NULL || edata->schema_name == NULL)
		return false;
	nsp = get_namespace_oid(edata->schema_name, true);
	rel = OidIsValid(nsp) ? get_relname_relid(edata->table_name, nsp) : InvalidOid;
	if (!OidIsValid(rel) || get_rel_relkind(rel) != RELKIND_PARTITIONED_TABLE)
		return false;
	return rel == batch->target->relid ||
		list_member_oid(find_all_inheritors(batch->target->relid, NoLock, NULL), rel);
}

/*
 * The quarantine reason when the error is the fault of the rows the
 * statement was given, KS_OK when it is the system's (see the table above).
 * needs: the privileges the statement needs on the target.
 */
static KsReason
row_fault(KsBatch *batch, ErrorData *edata, const char *sql, AclMode needs)
{
	switch (ks_errclass(edata->sqlerrcode))
	{
		case KS_ERR_BAD_VALUE:
			return no_partition_error(batch, edata) ? KS_NO_PARTITION : KS_CONSTRAINT_VIOLATION;
		case KS_ERR_TOO_LARGE:
			return KS_VALUE_TOO_LARGE;
		case KS_ERR_REJECTED:
			return KS_REJECTED_BY_TARGET;
		case KS_ERR_PRIVILEGE:
			/* denied by the statement itself although granted: a policy */
			if (!raised_in_function(edata, sql) && owner_holds(batch->target->relid, needs))
				return KS_REJECTED_BY_TARGET;
			return KS_OK;
		default:
			return KS_OK;
	}
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
	const char *sql2;			/* on_conflict: the UPDATE after the INSERT */
	int		   *rows;
	int			nrows;
	bool		deletes;		/* count what it deletes, not inserts/updates */
	const char *running;		/* the statement that raised the error */
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
	c->running = c->sql;
	if (c->deletes)
	{
		run_statement(c->batch, c->sql, c->rows, c->nrows, false);
		/* delete_mode soft: the rows the UPDATE marked */
		if (c->batch->target->soft)
			c->batch->stats.soft_deleted += SPI_processed;
		else
			c->batch->stats.deleted += SPI_processed;
	}
	else
	{
		counted_run(c->batch, c->sql, c->sql2, c->rows, c->nrows, &c->running);
	}
	error_context_stack = cb.previous;
}

static bool
try_statement(KsBatch *batch, const char *sql, const char *sql2, int *rows, int nrows, AclMode needs,
			  bool deletes, KsReason *reason, char **err)
{
	StatementCall call = {batch, sql, sql2, rows, nrows, deletes, sql};
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
	sql = call.running;
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
 * privileges the statement needs on the target; deletes: it deletes (or,
 * delete_mode soft, marks) rows, counted as deleted.
 * Returns the number of rows quarantined here (their reason is set).
 */
static int
apply_rows(KsBatch *batch, const char *sql, const char *sql2, int *rows, int nrows, AclMode needs,
		   bool deletes)
{
	char	   *err = NULL;
	KsReason	reason = KS_OK;
	int			failed = 0;

	if (nrows == 0)
		return 0;
	if (try_statement(batch, sql, sql2, rows, nrows, needs, deletes, &reason, &err))
		return 0;
	if (nrows == 1)
	{
		batch->rows[rows[0]].reason = reason;
		batch->rows[rows[0]].detail = err;
		return 1;
	}
	/* bisect: halves that succeed are applied, failing halves split again */
	failed += apply_rows(batch, sql, sql2, rows, nrows / 2, needs, deletes);
	failed += apply_rows(batch, sql, sql2, rows + nrows / 2, nrows - nrows / 2, needs, deletes);
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
	StatementCall call = {batch, sql, NULL, rows, nrows, false, sql};
	ErrorData  *edata = ks_try_subxact(statement_call, &call);

	if (edata != NULL)
		rethrow_system_error(edata, sql);
}


/* ---- the strategy ---- */

typedef struct SqlApplyState
{
	char	   *upsert;			/* merge mode: the MERGE, or on_conflict's INSERT;
								 * history: its statement */
	char	   *upsert2;		/* on_conflict: its UPDATE (NULL: none) */
	char	   *delete;			/* merge mode: the tombstones' DELETE */
	char	   *insert;			/* append mode */
	char	   *function;		/* function mode */
	bool		onconflict;		/* the on_conflict strategy's state */
	int			guc_level;		/* pin_key_probe_plan's, 0: none */
} SqlApplyState;

static void *
sql_begin(KsBatch *batch, KsBatchTarget *bt)
{
	SqlApplyState *st = palloc0(sizeof(SqlApplyState));

	if (bt->mode == KS_MODE_HISTORY)
	{
		st->guc_level = pin_key_probe_plan(bt->target);
		st->upsert = ks_history_sql(bt->target, false, batch->pipeline->id, NULL);
	}
	else if (bt->mode == KS_MODE_MERGE)
	{
		st->guc_level = pin_key_probe_plan(bt->target);
		st->upsert = ks_merge_sql(bt->target, false);
		st->delete = ks_delete_sql(bt->target, false);
	}
	else if (bt->mode == KS_MODE_APPEND)
		st->insert = ks_append_sql(bt->target, false);
	else
		st->function = ks_function_sql(batch->pipeline, bt->target, false);
	return st;
}

static int
sql_delete_rows(KsBatch *batch, void *state, int *rows, int nrows)
{
	/* delete_mode soft: the delete is an UPDATE marking the row */
	return apply_rows(batch, ((SqlApplyState *) state)->delete, NULL, rows, nrows,
					  (batch->target->soft ? ACL_UPDATE : ACL_DELETE) | ACL_SELECT, true);
}

static int
sql_upsert_rows(KsBatch *batch, void *state, int *rows, int nrows)
{
	SqlApplyState *st = state;

	if (st->onconflict)
		batch->stats.onconflict_rows += nrows;
	if (batch->history_truncate)
	{
		/* a truncate ends every key's version in effect: run even without events */
		char	   *sql = ks_history_sql(batch->target, false, batch->pipeline->id,
										quote_literal_cstr(batch->history_truncate));
		KsReason	reason;
		char	   *err;

		if (nrows > 0)
			return apply_rows(batch, sql, NULL, rows, nrows, ACL_INSERT | ACL_UPDATE | ACL_DELETE | ACL_SELECT, false);
		if (!try_statement(batch, sql, NULL, rows, 0, ACL_INSERT | ACL_UPDATE | ACL_DELETE | ACL_SELECT, false,
						   &reason, &err))
			ereport(ERROR,
					(errcode(ERRCODE_INTEGRITY_CONSTRAINT_VIOLATION),
					 errmsg("the truncate of history target %s failed", batch->target->qualified_name),
					 errdetail("%s", err)));
		return 0;
	}
	return apply_rows(batch, st->upsert, st->upsert2, rows, nrows, ACL_INSERT | ACL_UPDATE | ACL_SELECT, false);
}

static int
sql_insert_rows(KsBatch *batch, void *state, int *rows, int nrows)
{
	return apply_rows(batch, ((SqlApplyState *) state)->insert, NULL, rows, nrows, ACL_INSERT, false);
}

static void
sql_call_function(KsBatch *batch, void *state, int *rows, int nrows)
{
	run_batch_function(batch, ((SqlApplyState *) state)->function, rows, nrows);
}

static void
sql_end(KsBatch *batch, void *state)
{
	SqlApplyState *st = state;

	(void) batch;
	if (st->guc_level > 0)
		AtEOXact_GUC(true, st->guc_level);
}

/*
 * The on_conflict strategy: merge mode's winners through INSERT ... ON
 * CONFLICT (key) DO NOTHING and an UPDATE under the ordering guard
 * (statements.c, ks_onconflict_insert_sql), for targets where the MERGE is
 * refused or slow; tombstones, append and function modes as the SQL
 * strategy does them.  Faults of rows are narrowed down over the two
 * statements together, as over the MERGE.
 */
static void *
onconflict_begin(KsBatch *batch, KsBatchTarget *bt)
{
	SqlApplyState *st = sql_begin(batch, bt);

	if (bt->mode == KS_MODE_MERGE)
	{
		st->onconflict = true;
		st->upsert = ks_onconflict_insert_sql(bt->target, false);
		st->upsert2 = ks_onconflict_update_sql(bt->target, false);
	}
	return st;
}

/*
 * A Citus distributed or reference table (citus.c): every mode through the
 * SQL strategy's statements reading the batch from a temporary table on
 * the coordinator, staged before each statement (ks_citus_stage_*), merge
 * mode's winners through the UPDATE and then the INSERT of the keys the
 * target lacks (ks_citus_update_sql, ks_citus_insert_sql).  Citus runs them
 * on the worker nodes in the batch's transaction, committed with the
 * checkpoint through its two-phase commit.
 */
static void *
citus_begin(KsBatch *batch, KsBatchTarget *bt)
{
	SqlApplyState *st = sql_begin(batch, bt);
	char	   *stage = ks_citus_stage_name(bt->target);
	RangeVar   *rv = makeRangeVar("pg_temp", psprintf("_ks_stage_%u", bt->target->relid), -1);

	/* left by an earlier batch of this transaction (a replay's) */
	if (OidIsValid(RangeVarGetRelid(rv, NoLock, true)) &&
		ks_spi_execute(psprintf("DROP TABLE %s", stage), 0, NULL, NULL, NULL, false, 0) != SPI_OK_UTILITY)
		elog(ERROR, "kafka_sink: dropping %s failed", stage);
	if (ks_spi_execute(ks_citus_stage_create_sql(bt->target), 0, NULL, NULL, NULL, false, 0) != SPI_OK_UTILITY)
		elog(ERROR, "kafka_sink: creating %s failed", stage);
	if (bt->mode == KS_MODE_MERGE)
	{
		st->upsert = ks_citus_update_sql(bt->target, false);
		st->upsert2 = ks_citus_insert_sql(bt->target, false);
		if (st->upsert == NULL)
		{
			st->upsert = st->upsert2;
			st->upsert2 = NULL;
		}
	}
	return st;
}

const KsApplyStrategy ks_apply_citus = {
	.name = "citus",
	.begin = citus_begin,
	.delete_rows = sql_delete_rows,
	.upsert_rows = sql_upsert_rows,
	.insert_rows = sql_insert_rows,
	.call_function = sql_call_function,
	.end = sql_end,
};

const KsApplyStrategy ks_apply_onconflict = {
	.name = "on_conflict",
	.begin = onconflict_begin,
	.delete_rows = sql_delete_rows,
	.upsert_rows = sql_upsert_rows,
	.insert_rows = sql_insert_rows,
	.call_function = sql_call_function,
	.end = sql_end,
};

const KsApplyStrategy ks_apply_sql = {
	.name = "sql",
	.begin = sql_begin,
	.delete_rows = sql_delete_rows,
	.upsert_rows = sql_upsert_rows,
	.insert_rows = sql_insert_rows,
	.call_function = sql_call_function,
	.end = sql_end,
};

bool
ks_batch_rows_active(void)
{
	return srf_batch != NULL;
}
