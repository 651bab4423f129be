/*-------------------------------------------------------------------------
 *
 * catalog_guard.c
 *		The catalog is written only by kafka_sink: the guard trigger on
 *		every catalog table, the backend-local "catalog writes allowed"
 *		level it consults, and the trampoline through which the public API
 *		functions raise that level around their SQL bodies.
 *
 * Members of kafka_sink_admin keep DML privileges on the catalog (the API
 * runs as the caller, so that row level security and the caller's own
 * privileges decide), but a statement-level BEFORE trigger refuses every
 * write unless the caller is a superuser or this backend's level is above
 * zero.  Only C code of the extension changes the level:
 *  - kafka_sink_api_call(), the C body of each public API function that
 *    writes the catalog, raises it while it runs kafka_sink._api_<name>;
 *  - a pipeline worker keeps it raised for its life (ks_catalog_writes_
 *    for_worker) and suspends it around everything of the user's it runs:
 *    decoding into the target's types, the bronze write, the statements
 *    against the target (triggers, defaults, the batch function) and its
 *    commit (deferred triggers).
 * Every change is undone in a PG_FINALLY block, so an error leaves the
 * level as it was before the change; there is no SQL-callable setter.
 *
 * Owns: the catalog-write level and its guard trigger.  Must not: be
 * settable from SQL, or leave the level changed after an error.
 *
 *-------------------------------------------------------------------------
 */
#include "kafka_sink.h"
#include "catalog_guard.h"
#include "role_guard.h"
#include "citus.h"
#include "database_ddl.h"

#include "access/htup_details.h"
#include "access/relation.h"
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "catalog/pg_proc.h"
#include "commands/trigger.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "nodes/nodeFuncs.h"
#include "rewrite/rewriteHandler.h"
#include "tcop/utility.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/regproc.h"
#include "utils/syscache.h"

PG_FUNCTION_INFO_V1(kafka_sink_catalog_guard);
PG_FUNCTION_INFO_V1(kafka_sink_api_call);

/* > 0: this backend is inside kafka_sink code that may write the catalog */
static int	catalog_writes = 0;

#define KS_API_PREFIX "_api_"

/* Raises the level; returns the previous one for ks_catalog_writes_restore. */
int
ks_catalog_writes_raise(void)
{
	int			saved = catalog_writes;

	catalog_writes = Max(saved, 0) + 1;
	return saved;
}

/*
 * Suspends catalog writes while code of the user's runs; returns the
 * previous level for ks_catalog_writes_restore.
 */
int
ks_catalog_writes_suspend(void)
{
	int			saved = catalog_writes;

	catalog_writes = 0;
	return saved;
}

void
ks_catalog_writes_restore(int saved)
{
	catalog_writes = saved;
}

/* Whether this backend runs kafka_sink code that may write the catalog. */
bool
ks_catalog_writes_allowed(void)
{
	return catalog_writes > 0;
}

/*
 * A pipeline worker writes the catalog as the pipeline's owner: the level
 * stays raised for the process's life, suspended around the user's code.
 */
void
ks_catalog_writes_for_worker(void)
{
	catalog_writes = 1;
}

/*
 * kafka_sink._catalog_guard(): BEFORE INSERT OR UPDATE OR DELETE OR
 * TRUNCATE ... FOR EACH STATEMENT on every catalog table.
 */
Datum
kafka_sink_catalog_guard(PG_FUNCTION_ARGS)
{
	TriggerData *trigdata = (TriggerData *) fcinfo->context;
	const char *what;

	if (!CALLED_AS_TRIGGER(fcinfo) ||
		!TRIGGER_FIRED_BEFORE(trigdata->tg_event) ||
		!TRIGGER_FIRED_FOR_STATEMENT(trigdata->tg_event))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("kafka_sink._catalog_guard() must be called as a BEFORE ... FOR EACH STATEMENT trigger")));

	if (catalog_writes > 0 || superuser())
		return PointerGetDatum(NULL);

	if (TRIGGER_FIRED_BY_INSERT(trigdata->tg_event))
		what = "INSERT into";
	else if (TRIGGER_FIRED_BY_UPDATE(trigdata->tg_event))
		what = "UPDATE";
	else if (TRIGGER_FIRED_BY_DELETE(trigdata->tg_event))
		what = "DELETE from";
	else
		what = "TRUNCATE";
	ereport(ERROR,
			(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
			 errmsg("kafka_sink's catalog tables are written only by kafka_sink"),
			 errdetail("The statement would %s %s.", what,
					   quote_qualified_identifier(get_namespace_name(RelationGetNamespace(trigdata->tg_relation)),
												  RelationGetRelationName(trigdata->tg_relation))),
			 errhint("Use the kafka_sink API: create_pipeline, alter_pipeline, drop_pipeline, start, stop, pause, resume, reset_offsets, replay_quarantine or outbox_send.")));
	return PointerGetDatum(NULL);	/* not reached */
}

/* What the trampoline caches in fn_extra: the _api_ function to call. */
typedef struct ApiTarget
{
	FmgrInfo	flinfo;
	bool		strict;
} ApiTarget;

/*
 * Finds kafka_sink._api_<name>(same argument types) for the API function
 * fn_oid, which must live in the extension's schema and return the same.
 */
static ApiTarget *
api_target(FmgrInfo *outer)
{
	HeapTuple	tup;
	Form_pg_proc proc;
	Oid			nsp = get_namespace_oid(KS_SCHEMA, false);
	char		name[NAMEDATALEN];
	Oid			target_oid;
	HeapTuple	ttup;
	Form_pg_proc tproc;
	ApiTarget  *t;

	tup = SearchSysCache1(PROCOID, ObjectIdGetDatum(outer->fn_oid));
	if (!HeapTupleIsValid(tup))
		elog(ERROR, "cache lookup failed for function %u", outer->fn_oid);
	proc = (Form_pg_proc) GETSTRUCT(tup);
	if (proc->pronamespace != nsp ||
		strncmp(NameStr(proc->proname), KS_API_PREFIX, strlen(KS_API_PREFIX)) == 0 ||
		strlen(KS_API_PREFIX) + strlen(NameStr(proc->proname)) >= NAMEDATALEN)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_FUNCTION_DEFINITION),
				 errmsg("function %s is not a kafka_sink API function", format_procedure(outer->fn_oid)),
				 errhint("Only functions of schema kafka_sink created by the extension use kafka_sink_api_call.")));
	snprintf(name, sizeof(name), "%s%s", KS_API_PREFIX, NameStr(proc->proname));
	target_oid = GetSysCacheOid3(PROCNAMEARGSNSP, Anum_pg_proc_oid,
								 CStringGetDatum(name),
								 PointerGetDatum(&proc->proargtypes),
								 ObjectIdGetDatum(nsp));
	if (!OidIsValid(target_oid))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_FUNCTION),
				 errmsg("the body of kafka_sink API function %s is missing", format_procedure(outer->fn_oid)),
				 errdetail("Function %s.%s with the same argument types does not exist.", KS_SCHEMA, name),
				 errhint("Reinstall the extension: ALTER EXTENSION kafka_sink UPDATE.")));
	ttup = SearchSysCache1(PROCOID, ObjectIdGetDatum(target_oid));
	if (!HeapTupleIsValid(ttup))
		elog(ERROR, "cache lookup failed for function %u", target_oid);
	tproc = (Form_pg_proc) GETSTRUCT(ttup);
	if (tproc->prorettype != proc->prorettype || tproc->proretset != proc->proretset ||
		tproc->prokind != PROKIND_FUNCTION)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_FUNCTION_DEFINITION),
				 errmsg("the body of kafka_sink API function %s does not match it", format_procedure(outer->fn_oid)),
				 errhint("Reinstall the extension: ALTER EXTENSION kafka_sink UPDATE.")));

	t = MemoryContextAllocZero(outer->fn_mcxt, sizeof(ApiTarget));
	t->strict = tproc->proisstrict;
	ReleaseSysCache(ttup);
	ReleaseSysCache(tup);
	fmgr_info_cxt(target_oid, &t->flinfo, outer->fn_mcxt);
	return t;
}

/*
 * The C body of every public API function that writes the catalog: calls
 * kafka_sink._api_<its name> with the same arguments, the same result
 * info (so that a set-returning body materializes into the caller's
 * tuplestore) and the catalog writes allowed.  The body runs as the caller
 * (SECURITY INVOKER, row level security applies); fmgr does not check
 * EXECUTE on it, which is revoked from everyone but the extension owner.
 */
Datum
kafka_sink_api_call(PG_FUNCTION_ARGS)
{
	ApiTarget  *t;
	FunctionCallInfo inner;
	volatile Datum result = (Datum) 0;
	int			saved;

	if (fcinfo->flinfo == NULL || !OidIsValid(fcinfo->flinfo->fn_oid))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("kafka_sink_api_call must be called as a SQL function")));
	t = (ApiTarget *) fcinfo->flinfo->fn_extra;
	if (t == NULL)
	{
		t = api_target(fcinfo->flinfo);
		fcinfo->flinfo->fn_extra = t;
	}
	if (t->strict)
	{
		for (int i = 0; i < fcinfo->nargs; i++)
			if (fcinfo->args[i].isnull)
				PG_RETURN_NULL();
	}
	/* the body resolves its call expression (polymorphism, result type) */
	t->flinfo.fn_expr = fcinfo->flinfo->fn_expr;

	inner = palloc0(SizeForFunctionCallInfo(fcinfo->nargs));
	InitFunctionCallInfoData(*inner, &t->flinfo, fcinfo->nargs, fcinfo->fncollation,
							 fcinfo->context, fcinfo->resultinfo);
	for (int i = 0; i < fcinfo->nargs; i++)
		inner->args[i] = fcinfo->args[i];

	saved = ks_catalog_writes_raise();
	PG_TRY();
	{
		result = FunctionCallInvoke(inner);
	}
	PG_FINALLY();
	{
		ks_catalog_writes_restore(saved);
	}
	PG_END_TRY();

	fcinfo->isnull = inner->isnull;
	pfree(inner);
	return result;
}

/*
 * LOCK TABLE on the catalog.  The admins' DML privileges (the API runs as
 * the caller) also let them LOCK a catalog table in any mode, and the
 * guard trigger never sees a LOCK: one admin holding ACCESS EXCLUSIVE on
 * kafka_sink.offsets in an idle transaction stalled every owner's workers,
 * the launcher and the views.  So a LOCK stronger than ACCESS SHARE of a
 * relation of the extension's schema, or of a view that reads one (LOCK
 * on a view locks what it reads, with the view owner's privileges), is
 * refused to non-superusers outside kafka_sink's own code.
 */
static ProcessUtility_hook_type prev_process_utility = NULL;

typedef struct LockWalk
{
	Oid			nsp;
	int			depth;
} LockWalk;

static bool lock_walker(Node *node, void *context);

static bool
lock_reaches_catalog(Oid relid, LockWalk *w)
{
	Relation	view;
	bool		found;

	if (!OidIsValid(relid))
		return false;
	if (get_rel_namespace(relid) == w->nsp)
		return true;
	if (get_rel_relkind(relid) != RELKIND_VIEW || w->depth > 64)
		return false;
	/* as LockViewRecurse: every relation the view's query reads */
	view = relation_open(relid, AccessShareLock);
	w->depth++;
	found = lock_walker((Node *) get_view_query(view), w);
	w->depth--;
	relation_close(view, AccessShareLock);
	return found;
}

static bool
lock_walker(Node *node, void *context)
{
	LockWalk   *w = (LockWalk *) context;

	if (node == NULL)
		return false;
	if (IsA(node, RangeTblEntry))
	{
		RangeTblEntry *rte = (RangeTblEntry *) node;

		return rte->rtekind == RTE_RELATION && lock_reaches_catalog(rte->relid, w);
	}
	if (IsA(node, Query))
		return query_tree_walker((Query *) node, lock_walker, context, QTW_EXAMINE_RTES_BEFORE);
	return expression_tree_walker(node, lock_walker, context);
}

static void
check_lock(LockStmt *stmt)
{
	LockWalk	w;
	ListCell   *lc;

	if (stmt->mode <= AccessShareLock || catalog_writes > 0 || superuser())
		return;
	w.nsp = get_namespace_oid("kafka_sink", true);
	w.depth = 0;
	if (!OidIsValid(w.nsp))
		return;
	foreach(lc, stmt->relations)
	{
		RangeVar   *rv = lfirst_node(RangeVar, lc);
		Oid			relid = RangeVarGetRelid(rv, NoLock, true);

		if (lock_reaches_catalog(relid, &w))
			ereport(ERROR,
					(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
					 errmsg("kafka_sink's catalog tables are locked only by kafka_sink"),
					 errdetail("\"%s\" is or reads a catalog table of kafka_sink; a lock on it would stop the pipelines of every owner.",
							   rv->relname),
					 errhint("Only ACCESS SHARE MODE is allowed; the kafka_sink API serializes its own writes.")));
	}
}

/*
 * kafka_sink's one ProcessUtility hook, chained after whatever hook was
 * there: a LOCK of the catalog (above), DROP ROLE of a pipeline's owner
 * (role_guard.c), statements on databases and on the extension that the
 * launcher and the schedulers must hear of (database_ddl.c), and on a Citus
 * coordinator kafka_sink's own extension statements kept from the worker
 * nodes (citus.c).
 */
static void
ks_process_utility(PlannedStmt *pstmt, const char *queryString, bool readOnlyTree,
				   ProcessUtilityContext context, ParamListInfo params,
				   QueryEnvironment *queryEnv, DestReceiver *dest, QueryCompletion *qc)
{
	int			citus_level;
	Oid			blocked;

	if (IsA(pstmt->utilityStmt, LockStmt))
		check_lock((LockStmt *) pstmt->utilityStmt);
	else if (IsA(pstmt->utilityStmt, DropRoleStmt))
		ks_role_guard_check_drop((DropRoleStmt *) pstmt->utilityStmt);
	/* kafka_sink's own CREATE/ALTER/DROP EXTENSION stays on a Citus coordinator */
	citus_level = ks_citus_keep_local_begin(pstmt->utilityStmt);
	blocked = ks_database_ddl_before(pstmt->utilityStmt);
	PG_TRY();
	{
		if (prev_process_utility)
			prev_process_utility(pstmt, queryString, readOnlyTree, context, params,
								 queryEnv, dest, qc);
		else
			standard_ProcessUtility(pstmt, queryString, readOnlyTree, context, params,
									queryEnv, dest, qc);
	}
	PG_FINALLY();
	{
		ks_database_ddl_after(blocked);
	}
	PG_END_TRY();
	if (citus_level > 0)
		AtEOXact_GUC(true, citus_level);
}

void
ks_catalog_guard_init(void)
{
	prev_process_utility = ProcessUtility_hook;
	ProcessUtility_hook = ks_process_utility;
}
