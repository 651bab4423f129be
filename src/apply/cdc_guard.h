/*-------------------------------------------------------------------------
 *
 * cdc_guard.h
 *		The guards of change events across batches (cdc_guard.c).
 *
 *		Owns: cdc_guard.c's declarations: the truncates, the deletes'
 *		positions recorded, stale winners dropped.  Must not: decode change
 *		events (envelope_debezium.c) or choose a key's winner (reduce.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef KS_CDC_GUARD_H
#define KS_CDC_GUARD_H

#include "apply.h"

/* the batch's truncates: fail, ignore, or delete the older rows and record */
extern void ks_cdc_truncates(KsBatch *batch);
/* records the positions of the deletes run */
extern void ks_cdc_record_deletes(KsBatch *batch, int *dels, int ndels);
/* drops winners at or before their key's recorded delete or the truncate */
extern int	ks_cdc_drop_stale(KsBatch *batch, int *sel, int nsel);
extern void ks_cdc_truncate_row(KsBatch *batch, int i);
/* mode history: the truncates recorded for the target, and recording them */
extern List *ks_cdc_history_truncates(KsBatch *batch, KsTarget *t);
extern void ks_cdc_record_history_truncates(KsBatch *batch, int *sel, int nsel);

#endif							/* KS_CDC_GUARD_H */
