/*-------------------------------------------------------------------------
 *
 * mirror.h
 *		The checkpoint mirrored to Kafka's consumer group (mirror.c); its
 *		state is KsWorkerState.mirror (worker.h).
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
