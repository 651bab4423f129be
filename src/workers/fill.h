/*-------------------------------------------------------------------------
 *
 * fill.h
 *		Filling a batch (fill.c): when it closes, the worker's one wait on
 *		its latch and the consumer, Kafka's health in the worker's slot.
 *
 *		Owns: a batch being filled (KsFill) and fill.c's declarations.
 *		Must not: be included outside the pipeline worker's modules.
 *
 *-------------------------------------------------------------------------
 */
#ifndef KS_FILL_H
#define KS_FILL_H

#include "worker.h"

/* A batch being filled. */
typedef struct KsFill
{
	KsMessage **msgs;
	int			nmsgs;
	int			cap;
	int64		bytes;
	bool	   *eof;			/* per partition: at its end */
	TimestampTz first_at;
	int64	   *goal;			/* per partition: the high watermark when due */
	bool		due;			/* goal is set */
} KsFill;

extern void ks_fill_start(KsWorkerState *ws, KsFill *f);
extern void ks_fill_batch(KsWorkerState *ws, KsFill *f);
extern bool ks_fill_has_work(KsWorkerState *ws, KsFill *f);
extern void ks_fill_closed(KsWorkerState *ws);
extern void ks_fill_release(KsFill *f);
extern bool ks_wait_for_kafka(KsWorkerState *ws, long timeout_ms);
extern void ks_backoff_wait(KsWorkerState *ws, long delay_ms);
extern void ks_note_client_error(KsWorkerState *ws);
extern void ks_kafka_healthy(KsWorkerState *ws);

#endif							/* KS_FILL_H */
