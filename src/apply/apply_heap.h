/*-------------------------------------------------------------------------
 *
 * apply_heap.h
 *		The direct heap apply strategy (apply_heap.c); the GUC that
 *		chooses it, kafka_sink.apply_strategy, is guc.c's.
 *
 *-------------------------------------------------------------------------
 */
#ifndef KS_APPLY_HEAP_H
#define KS_APPLY_HEAP_H

#include "apply.h"

extern const KsApplyStrategy ks_apply_heap;

#endif							/* KS_APPLY_HEAP_H */
