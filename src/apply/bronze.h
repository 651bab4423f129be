/*-------------------------------------------------------------------------
 *
 * bronze.h
 *		The bronze table (bronze.c): every raw message of a batch, landed
 *		in the batch's transaction.
 *
 *		Owns: bronze.c's declarations, and ks_insert_slots, the multi-insert
 *		with index entries that the heap strategy shares.  Must not: write a
 *		target's rows of its own accord (ks_insert_slots writes what its
 *		caller gives it) or the catalog.
 *
 *-------------------------------------------------------------------------
 */
#ifndef KS_BRONZE_H
#define KS_BRONZE_H

#include "apply.h"

#include "access/heapam.h"
#include "nodes/execnodes.h"

extern void ks_write_bronze(KsBatch *batch);

/* filled slots into a table as COPY FROM writes them, index entries too */
extern void ks_insert_slots(ResultRelInfo *rri, EState *estate, TupleTableSlot **slots, int n,
							CommandId cid, BulkInsertState bistate);

/* whether the bronze write of a batch is running in this process */
extern bool ks_batch_messages_active(void);

#endif							/* KS_BRONZE_H */
