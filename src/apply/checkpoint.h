/*-------------------------------------------------------------------------
 *
 * checkpoint.h
 *		What a batch commits besides the data (checkpoint.c): its batch id,
 *		the batch marker with its progress record, the new offsets, data
 *		loss records, and the retention of old markers.
 *
 *		Owns: checkpoint.c's declarations: the batch id, the checkpoint's
 *		write and the retention of markers.  Must not: decide what a batch
 *		applies, or hold SQL text (catalog.c writes the rows).
 *
 *-------------------------------------------------------------------------
 */
#ifndef KS_CHECKPOINT_H
#define KS_CHECKPOINT_H

#include "apply.h"

extern int64 ks_next_batch_id(KsBatch *batch);
extern void ks_write_checkpoint(KsBatch *batch);
extern void ks_prune_batches(KsBatch *batch);

#endif							/* KS_CHECKPOINT_H */
