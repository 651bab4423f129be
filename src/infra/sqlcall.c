/*-------------------------------------------------------------------------
 *
 * sqlcall.c
 *		Checks shared by the C functions exposed in SQL (api.c and the modules with a kafka_sink_* function).
 *
 * Every role that may EXECUTE one of them (kafka_sink_admin) can call it
 * with any arguments, from any statement, at any time: the internal
 * functions are an attack surface like the public ones.  The helpers here
 * are the answers to the three questions each such function asks:
 *
 *	- is it called where it can work (a set-returning function in FROM, a
 *	  batch-only function during this process's batch)?
 *	- for SETOF record: does the caller's column definition list describe
 *	  exactly the tuples the function builds?  Building a tuple with a
 *	  caller-supplied descriptor that does not match the datums reads the
 *	  wrong memory (a bigint read as a text pointer crashes the server);
 *	- may the caller see what it asks about (the owners' rule of the
 *	  catalog's row level security, for what lives in shared memory)?
 *
 * Owns: the checks every SQL-callable C function shares.  Must not:
 * decide what a function does.
 *
 *-------------------------------------------------------------------------
 */
#include "kafka_sink.h"
#include "sqlcall.h"

#include "funcapi.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "postmaster/bgworker.h"
#include "utils/acl.h"
#include "utils/builtins.h"

/*
 * A set-returning function of ours only knows the materialize protocol:
 * refuse other callers (a scalar context, a value-per-call-only one) with
 * a clear error rather than let InitMaterializedSRF() or a NULL resultinfo
 * decide.
 */
void
ks_srf_check_context(FunctionCallInfo fcinfo, const char *fname)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;

	if (rsinfo == NULL || !IsA(rsinfo, ReturnSetInfo) ||
		(rsinfo->allowedModes & SFRM_Materialize) == 0)
		ereport(ERROR,
				(errcode(KS_ERRCODE_WRONG_CONTEXT),
				 errmsg("%s was called in a context that cannot accept a set", fname),
				 errhint("Call it in FROM: SELECT * FROM %s.", fname)));
}

static char *
column_type(Oid typid, int32 typmod)
{
	return OidIsValid(typid) ? format_type_with_typemod(typid, typmod) : pstrdup("(none)");
}

/* "name type, name type, ...": the real columns, for a hint */
static char *
column_list(const KsSrfColumn *cols, int ncols)
{
	StringInfoData b;

	initStringInfo(&b);
	for (int i = 0; i < ncols; i++)
		appendStringInfo(&b, "%s%s %s", i > 0 ? ", " : "",
						 quote_identifier(cols[i].name), column_type(cols[i].typid, cols[i].typmod));
	return b.data;
}

/*
 * For a SETOF record function: checks that the caller's column definition
 * list (rsinfo->expectedDesc) is exactly cols: as many columns, the same
 * type OIDs and typmods, none dropped.  Names may differ (they are the
 * caller's aliases).  On success the caller may build its tuples with
 * expectedDesc (InitMaterializedSRF with MAT_SRF_USE_EXPECTED_DESC); on
 * a mismatch it raises ERRCODE_DATATYPE_MISMATCH naming the first column
 * that differs.  Also checks the call context (ks_srf_check_context).
 */
void
ks_srf_check_record(FunctionCallInfo fcinfo, const char *fname,
					const KsSrfColumn *cols, int ncols)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	TupleDesc	desc;
	int			n;

	ks_srf_check_context(fcinfo, fname);
	desc = rsinfo->expectedDesc;
	if (desc == NULL)
		ereport(ERROR,
				(errcode(KS_ERRCODE_WRONG_CONTEXT),
				 errmsg("%s must be called in FROM with a column definition list", fname),
				 errhint("The batch's columns are: %s.", column_list(cols, ncols))));
	n = Min(desc->natts, ncols);
	for (int i = 0; i < n; i++)
	{
		Form_pg_attribute a = TupleDescAttr(desc, i);

		if (!a->attisdropped && a->atttypid == cols[i].typid && a->atttypmod == cols[i].typmod)
			continue;
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("column %d \"%s\" of the column definition list of %s does not match the batch",
						i + 1, NameStr(a->attname), fname),
				 a->attisdropped ?
				 errdetail("The list's column is dropped; the batch's column \"%s\" is %s.",
						   cols[i].name, column_type(cols[i].typid, cols[i].typmod)) :
				 errdetail("The list declares %s; the batch's column \"%s\" is %s.",
						   column_type(a->atttypid, a->atttypmod), cols[i].name,
						   column_type(cols[i].typid, cols[i].typmod)),
				 errhint("The batch's columns are: %s.", column_list(cols, ncols))));
	}
	if (desc->natts > ncols)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("column %d \"%s\" of the column definition list of %s does not match the batch",
						ncols + 1, NameStr(TupleDescAttr(desc, ncols)->attname), fname),
				 errdetail("The list has %d columns; the batch has %d.", desc->natts, ncols),
				 errhint("The batch's columns are: %s.", column_list(cols, ncols))));
	if (desc->natts < ncols)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("the column definition list of %s lacks the batch's column %d \"%s\"",
						fname, desc->natts + 1, cols[desc->natts].name),
				 errdetail("The list has %d columns; the batch has %d.", desc->natts, ncols),
				 errhint("The batch's columns are: %s.", column_list(cols, ncols))));
}

/*
 * For functions that return this process's batch: raises unless one is
 * being applied right now (in_progress: the function's own pointer to it
 * is set, which only the statement that reads it sets, see run_statement
 * and write_bronze).
 *
 * The errcode is KS_ERRCODE_WRONG_CONTEXT (feature_not_supported, as
 * PostgreSQL's own "called in a context that cannot accept a set"), not
 * object_not_in_prerequisite_state: a worker takes that one, raised during
 * its batch, for "my pipeline was stopped" and exits without a word, so a
 * batch function calling the wrong function would restart forever instead
 * of failing the pipeline with this message.
 */
void
ks_require_batch(bool in_progress, const char *fname, const char *what)
{
	if (!in_progress)
		ereport(ERROR,
				(errcode(KS_ERRCODE_WRONG_CONTEXT),
				 errmsg("%s can only be called while this session applies a kafka_sink batch", fname),
				 errdetail("It returns %s of the batch being applied, and none is being applied now.", what),
				 errhint("It is internal to kafka_sink.  A batch function gets the batch's rows as its second argument.")));
}

/* True in a background worker of this library (a pipeline worker, the relay). */
bool
ks_in_own_worker(void)
{
	return MyBgworkerEntry != NULL &&
		strcmp(MyBgworkerEntry->bgw_library_name, KS_EXTENSION_NAME) == 0;
}

/*
 * May the current user see what a worker of this owner shows in shared
 * memory?  The rule of the catalog's row level security
 * (pg_has_role(current_user, owner, 'MEMBER'); superusers see all).  A
 * pipeline slot without an owner (none is, but shared memory is not a
 * catalog) is for superusers only.
 */
bool
ks_may_see_owner(Oid owner)
{
	if (!OidIsValid(owner))
		return superuser();
	return is_member_of_role(GetUserId(), owner);
}
