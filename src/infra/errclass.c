/*-------------------------------------------------------------------------
 *
 * errclass.c
 *		The one classification of SQLSTATEs: which errors are a row's fault
 *		(the row is quarantined), which are the batch's (it is rolled back
 *		and retried), which fail the pipeline.
 *
 * Decoding (decode.c), the SQL apply strategy (apply_sql.c), the heap
 * strategy's fall-back to it (apply_heap.c) and the worker's error handler
 * (worker.c) all ask here, so that an error is never a row's fault in one
 * place and the batch's in another.  What each caller does with a category
 * is its own: decoding quarantines only KS_ERR_BAD_VALUE (as invalid_value);
 * applying maps the first four categories to quarantine reasons and checks
 * KS_ERR_PRIVILEGE against the owner's privileges.
 *
 * Owns: the SQLSTATE -> category table.  Must not: look at anything but
 * the code (where an error was raised is the caller's question).
 *
 *-------------------------------------------------------------------------
 */
#include "kafka_sink.h"
#include "errclass.h"

KsErrClass
ks_errclass(int sqlerrcode)
{
	switch (ERRCODE_TO_CATEGORY(sqlerrcode))
	{
		case ERRCODE_DATA_EXCEPTION:
		case ERRCODE_INTEGRITY_CONSTRAINT_VIOLATION:
			return KS_ERR_BAD_VALUE;
		case ERRCODE_PROGRAM_LIMIT_EXCEEDED:
			return sqlerrcode == ERRCODE_PROGRAM_LIMIT_EXCEEDED ? KS_ERR_TOO_LARGE : KS_ERR_REJECTED;
		case ERRCODE_PLPGSQL_ERROR:
		case ERRCODE_WITH_CHECK_OPTION_VIOLATION:
		case ERRCODE_TRIGGERED_DATA_CHANGE_VIOLATION:
			return KS_ERR_REJECTED;
		case ERRCODE_TRANSACTION_ROLLBACK:
		case ERRCODE_INSUFFICIENT_RESOURCES:
		case ERRCODE_CONNECTION_EXCEPTION:
			return KS_ERR_TRANSIENT;
	}
	switch (sqlerrcode)
	{
		case ERRCODE_INSUFFICIENT_PRIVILEGE:
			return KS_ERR_PRIVILEGE;
		case ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE:
			return KS_ERR_STOPPED;
		case ERRCODE_LOCK_NOT_AVAILABLE:
		case ERRCODE_QUERY_CANCELED:
		case ERRCODE_ADMIN_SHUTDOWN:
			return KS_ERR_TRANSIENT;
	}
	return KS_ERR_PERMANENT;
}
