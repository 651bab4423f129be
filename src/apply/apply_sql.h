/*-------------------------------------------------------------------------
 *
 * apply_sql.h
 *		The SQL apply strategy (apply_sql.c): the statements of
 *		statements.c run through SPI over kafka_sink._batch_rows().
 *
 *-------------------------------------------------------------------------
 */
#ifndef KS_APPLY_SQL_H
#define KS_APPLY_SQL_H

#include "apply.h"

extern const KsApplyStrategy ks_apply_sql;
extern const KsApplyStrategy ks_apply_onconflict;

/* whether a statement of a batch is running in this process */
extern bool ks_batch_rows_active(void);

#endif							/* KS_APPLY_SQL_H */
