/*-------------------------------------------------------------------------
 *
 * apply_sql.h
 *		The SQL apply strategies (apply_sql.c): the statements of
 *		statements.c and history.c run through SPI over
 *		kafka_sink._batch_rows(); on_conflict's with INSERT ... ON
 *		CONFLICT and an UPDATE in place of the MERGE.
 *
 *		Owns: KsApplyStrategy ks_apply_sql, ks_apply_onconflict and
 *		ks_apply_citus, and
 *		ks_batch_rows_active (replay.c asks it).  Must not: expose the plan
 *		cache or the row-fault table, or build statement text (statements.h,
 *		history.h).
 *
 *-------------------------------------------------------------------------
 */
#ifndef KS_APPLY_SQL_H
#define KS_APPLY_SQL_H

#include "apply.h"

extern const KsApplyStrategy ks_apply_sql;
extern const KsApplyStrategy ks_apply_onconflict;
extern const KsApplyStrategy ks_apply_citus;

/* whether a statement of a batch is running in this process */
extern bool ks_batch_rows_active(void);

#endif							/* KS_APPLY_SQL_H */
