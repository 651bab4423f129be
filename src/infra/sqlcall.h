/*-------------------------------------------------------------------------
 *
 * sqlcall.h
 *		Checks shared by the SQL-callable C functions (sqlcall.c): calling
 *		context, caller-declared record types, batch-only functions, who
 *		may see a pipeline.
 *
 *		Owns: those checks and KS_ERRCODE_WRONG_CONTEXT.  Must not: decide
 *		what a function does, or read kafka_sink's tables.
 *
 *-------------------------------------------------------------------------
 */
#ifndef KS_SQLCALL_H
#define KS_SQLCALL_H

#include "kafka_sink.h"

#include "fmgr.h"

typedef struct KsSrfColumn
{
	const char *name;
	Oid			typid;
	int32		typmod;
} KsSrfColumn;

/* a C function called where it cannot work (see ks_require_batch) */
#define KS_ERRCODE_WRONG_CONTEXT ERRCODE_FEATURE_NOT_SUPPORTED

extern void ks_srf_check_context(FunctionCallInfo fcinfo, const char *fname);
extern void ks_srf_check_record(FunctionCallInfo fcinfo, const char *fname,
								const KsSrfColumn *cols, int ncols);
extern void ks_require_batch(bool in_progress, const char *fname, const char *what);
extern bool ks_in_own_worker(void);
extern bool ks_may_see_owner(Oid owner);

#endif							/* KS_SQLCALL_H */
