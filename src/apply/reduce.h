/*-------------------------------------------------------------------------
 *
 * reduce.h
 *		The per-key reduce of a batch (reduce.c): one row per key by the
 *		ordering rule, the fold of partial messages, and key order.
 *
 *		Owns: KsKeyHash (opaque, reduce.c's) and the reduce's calls.
 *		Must not: run statements or touch the catalog; it reads rows and
 *		marks winners.
 *
 *-------------------------------------------------------------------------
 */
#ifndef KS_REDUCE_H
#define KS_REDUCE_H

#include "apply.h"

typedef struct KsKeyHash KsKeyHash;

extern KsKeyHash *ks_keyhash_create(KsTarget *t);
extern int	ks_reduce(KsBatch *batch, KsKeyHash *kh, int *winners, int *deletes, int *ndeletes,
					  bool *more, int *truncate);
extern void ks_sort_by_key(KsBatch *batch, KsKeyHash *kh, int *rows, int nrows);

#endif							/* KS_REDUCE_H */
