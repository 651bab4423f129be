/*-------------------------------------------------------------------------
 *
 * guc.h
 *		The GUCs (guc.c): their variables, kafka_sink.apply_strategy's
 *		choices, and the fault points the tests inject.
 *
 *		Owns: the declarations of guc.c.  Must not: hold a module's own
 *		settings logic (each module reads its GUCs itself).
 *
 *-------------------------------------------------------------------------
 */
#ifndef KS_GUC_H
#define KS_GUC_H

#include "kafka_sink.h"

extern char *ks_database;
extern int	ks_max_workers;
extern int	ks_max_workers_per_database;
extern int	ks_launcher_naptime_ms;
extern int	ks_metadata_refresh_ms;
extern int	ks_fault_point;
extern int	ks_fault_action;
extern bool ks_allow_superuser_pipelines;
extern int	ks_max_message_bytes;
extern int	ks_max_partitions;
extern int	ks_keep_batches;
extern bool ks_direct_values;
extern char *ks_outbox_servers;
extern int	ks_outbox_retention_s;
extern int	ks_max_outbox_hops;
extern int	ks_keep_batches_for_s;
extern int	ks_max_new_columns;
extern int	ks_ddl_lock_timeout_ms;
extern int	ks_apply_strategy;	/* KsApplyStrategyChoice */

/* kafka_sink.apply_strategy: how merge-mode batches are written (apply.c) */
typedef enum KsApplyStrategyChoice
{
	KS_APPLY_STRATEGY_SQL = 0,	/* always the MERGE through SPI */
	KS_APPLY_STRATEGY_AUTO,		/* the heap strategy where it is exact (the
								 * default) */
	KS_APPLY_STRATEGY_ON_CONFLICT	/* INSERT ... ON CONFLICT DO NOTHING, then
									 * the guarded UPDATE, through SPI */
} KsApplyStrategyChoice;

typedef enum KsFaultPoint
{
	KS_FAULT_NONE = 0,
	KS_FAULT_AFTER_FETCH,
	KS_FAULT_AFTER_DECODE,
	KS_FAULT_AFTER_MERGE,
	KS_FAULT_BEFORE_COMMIT,
	KS_FAULT_AFTER_COMMIT,
	KS_FAULT_BEFORE_CONNECT		/* at start, before the worker can record errors */
} KsFaultPoint;

typedef enum KsFaultAction
{
	KS_FAULT_ACTION_FATAL = 0,
	KS_FAULT_ACTION_SIGKILL
} KsFaultAction;

extern void ks_guc_init(void);
extern void ks_fault(KsFaultPoint point);

#endif							/* KS_GUC_H */
