/*-------------------------------------------------------------------------
 *
 * mirror.h
 *		The checkpoint mirrored to Kafka's consumer group (mirror.c); its
 *		state is KsWorkerState.mirror (worker.h).
 *
 *		Owns: the declarations of mirror.c.  Must not: be included
 *		outside the pipeline worker's modules.
 *
 *-------------------------------------------------------------------------
 */
#ifndef KS_MIRROR_H
#define KS_MIRROR_H

#include "worker.h"

extern void ks_mirror_checkpoint(KsWorkerState *ws);
extern void ks_mirror_committed(KsWorkerState *ws);
extern void ks_mirror_resync(KsWorkerState *ws);
extern void ks_mirror_flush(KsWorkerState *ws, long timeout_ms);

#endif							/* KS_MIRROR_H */
