/*-------------------------------------------------------------------------
 *
 * apply_heap.h
 *		The direct heap apply strategy (apply_heap.c); the GUC that
 *		chooses it, kafka_sink.apply_strategy, is guc.c's.
 *
 *		Owns: its one export, KsApplyStrategy ks_apply_heap.  Must not:
 *		expose the allow-list of shapes (heap_eligible() stays in
 *		apply_heap.c), its executor state, or choose the strategy
 *		(ks_apply_strategy_for, apply.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef KS_APPLY_HEAP_H
#define KS_APPLY_HEAP_H

#include "apply.h"

extern const KsApplyStrategy ks_apply_heap;

#endif							/* KS_APPLY_HEAP_H */
