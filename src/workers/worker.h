/*-------------------------------------------------------------------------
 *
 * worker.h
 *		One pipeline worker's state (KsWorkerState) and the stages of its
 *		loop: the partition assignment (assignment.c), filling a batch
 *		(fill.c), the consumer-group mirror (mirror.c) and the loop itself
 *		(worker.c).  Only these four files include it.
 *
 *-------------------------------------------------------------------------
 */
#ifndef KS_WORKER_H
#define KS_WORKER_H

#include "kafka_sink.h"
#include "bgworker.h"
#include "consumer.h"

#include "utils/timestamp.h"

/* mirror.c: where the consumer group stands against the checkpoint */
typedef struct KsMirrorState
{
	bool		due;			/* the group is behind the checkpoint */
	TimestampTz not_before;		/* backoff after a failed commit */
	int			failures;
	int64		failures_unlogged;
	TimestampTz logged_at;
	TimestampTz sent_at;
} KsMirrorState;

/*
 * Everything one worker keeps between batches.  There is one per process
 * (worker.c keeps it in static storage, so that its error handler, after a
 * longjmp, still sees it); every stage takes it as its first argument.
 */
typedef struct KsWorkerState
{
	KsWorkerArgs args;			/* from the launcher */
	KsPipeline *pipeline;		/* NULL until loaded */
	KsConsumer *consumer;		/* NULL until created */

	/* assignment.c: the partitions owned, each with its checkpoint */
	KsPartition *parts;
	int			nparts;
	int			last_part;		/* ks_find_part's guess */
	TimestampTz next_metadata_refresh;

	/* fill.c */
	TimestampTz last_trigger;	/* when the previous batch closed */
	TimestampTz batch_delay_from;	/* max_trigger_delay counts from here */
	bool		broker_error_shown; /* the slot's detail shows a Kafka error, until
									 * ks_kafka_healthy sees it is over */
	TimestampTz client_error_recorded_at;

	KsMirrorState mirror;

	/* worker.c: the loop */
	MemoryContext batch_cxt;	/* reset before each batch */
	int			failures;		/* transient failures in a row */
	TimestampTz last_commit;
	bool		paused;
} KsWorkerState;

/* A batch being filled (fill.c). */
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

/* worker.c */
extern KS_NORETURN void ks_worker_fail(KsWorkerState *ws, const char *kind, int sqlerrcode,
									   const char *message, const char *detail,
									   const char *hint);

/* assignment.c */
extern bool ks_assignment_refresh(KsWorkerState *ws, bool force);
extern void ks_assignment_rewind(KsWorkerState *ws);
extern void ks_assignment_out_of_range(KsWorkerState *ws, int idx);
extern int	ks_find_part(KsWorkerState *ws, const char *topic, int32 partition);
extern void ks_publish_watermarks(KsWorkerState *ws, bool ask_broker);
extern void ks_publish_partition_progress(KsWorkerState *ws, double seconds);

/* fill.c */
extern void ks_fill_start(KsWorkerState *ws, KsFill *f);
extern void ks_fill_batch(KsWorkerState *ws, KsFill *f);
extern bool ks_fill_has_work(KsWorkerState *ws, KsFill *f);
extern void ks_fill_closed(KsWorkerState *ws);
extern void ks_fill_release(KsFill *f);
extern void ks_wait_for_kafka(KsWorkerState *ws, long timeout_ms);
extern void ks_note_client_error(KsWorkerState *ws);
extern void ks_kafka_healthy(KsWorkerState *ws);

/* mirror.c */
extern void ks_mirror_checkpoint(KsWorkerState *ws);
extern void ks_mirror_committed(KsWorkerState *ws);
extern void ks_mirror_resync(KsWorkerState *ws);
extern void ks_mirror_flush(KsWorkerState *ws, long timeout_ms);

#endif							/* KS_WORKER_H */
