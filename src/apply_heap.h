/*-------------------------------------------------------------------------
 *
 * apply_heap.h
 *		The direct heap apply strategy (apply_heap.c) and the GUC
 *		kafka_sink.apply_strategy that chooses it.
 *
 *-------------------------------------------------------------------------
 */
#ifndef KS_APPLY_HEAP_H
#define KS_APPLY_HEAP_H

#include "apply.h"

typedef enum KsApplyStrategyChoice
{
	KS_APPLY_STRATEGY_SQL = 0,	/* always the MERGE through SPI */
	KS_APPLY_STRATEGY_AUTO		/* the heap strategy where it is exact (the
								 * default) */
} KsApplyStrategyChoice;

extern int	ks_apply_strategy;
extern const KsApplyStrategy ks_apply_heap;

#endif							/* KS_APPLY_HEAP_H */
