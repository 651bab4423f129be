/*-------------------------------------------------------------------------
 *
 * assignment.h
 *		Which partitions a worker reads (assignment.c), from the catalog's
 *		checkpoint, and their progress published to shared memory.
 *
 *		Owns: the declarations of assignment.c.  Must not: be included
 *		outside the pipeline worker's modules.
 *
 *-------------------------------------------------------------------------
 */
#ifndef KS_ASSIGNMENT_H
#define KS_ASSIGNMENT_H

#include "worker.h"

extern bool ks_assignment_refresh(KsWorkerState *ws, bool force);
extern void ks_assignment_rewind(KsWorkerState *ws);
extern void ks_assignment_out_of_range(KsWorkerState *ws, int idx);
extern int	ks_find_part(KsWorkerState *ws, const char *topic, int32 partition);
extern void ks_publish_watermarks(KsWorkerState *ws, bool ask_broker);
extern void ks_publish_partition_progress(KsWorkerState *ws, double seconds);

#endif							/* KS_ASSIGNMENT_H */
