/*-------------------------------------------------------------------------
 *
 * errclass.h
 *		What an error raised while a batch is decoded or applied means
 *		(errclass.c): a row's fault, the batch's (retried), the pipeline
 *		stopped under the worker, or permanent (the pipeline fails).
 *
 *		Owns: KsErrClass and the one SQLSTATE -> category call.  Must not:
 *		look at anything but the code, or say what a caller does with a
 *		category (quarantine, retry or fail is the caller's).
 *
 *-------------------------------------------------------------------------
 */
#ifndef KS_ERRCLASS_H
#define KS_ERRCLASS_H

/*
 * The categories of SQLSTATEs, disjoint.  The first four can be the fault
 * of the rows that were being decoded or applied: the caller quarantines
 * the row (decode.c, apply_sql.c) or hands the rows to the strategy that
 * narrows the fault down to them (apply_heap.c).  An error that reaches the
 * worker is never a row's fault any more; there it is STOPPED, TRANSIENT or
 * anything else, PERMANENT (worker.c).
 */
typedef enum KsErrClass
{
	KS_ERR_BAD_VALUE,			/* class 22 data exception, 23 integrity
								 * constraint violation */
	KS_ERR_TOO_LARGE,			/* 54000 program limit exceeded */
	KS_ERR_REJECTED,			/* the target's own code refused the row:
								 * other 54xxx, P0 (RAISE), 44 WITH CHECK
								 * OPTION, 27 triggered data change */
	KS_ERR_PRIVILEGE,			/* 42501: the row's fault only when the owner
								 * holds the privileges (row level security's
								 * WITH CHECK); otherwise permanent */
	KS_ERR_STOPPED,				/* 55000: the pipeline was stopped or dropped
								 * while the worker worked */
	KS_ERR_TRANSIENT,			/* the batch is retried: 40 transaction
								 * rollback, 53 insufficient resources, 08
								 * connection, 55P03 lock not available,
								 * 57014 cancel, 57P01 admin shutdown */
	KS_ERR_PERMANENT			/* anything else: the pipeline fails */
} KsErrClass;

extern KsErrClass ks_errclass(int sqlerrcode);

/* a value that cannot be converted (decoding): quarantined as invalid_value */
static inline bool
ks_err_is_bad_value(int sqlerrcode)
{
	return ks_errclass(sqlerrcode) == KS_ERR_BAD_VALUE;
}

/* may be the fault of the rows a statement was given (applying) */
static inline bool
ks_err_may_be_row_fault(int sqlerrcode)
{
	return ks_errclass(sqlerrcode) <= KS_ERR_PRIVILEGE;
}

#endif							/* KS_ERRCLASS_H */
