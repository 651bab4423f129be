/*-------------------------------------------------------------------------
 *
 * worker.h
 *		One pipeline worker's state (KsWorkerState), which every stage of
 *		its loop takes: the partition assignment (assignment.h), filling a
 *		batch (fill.h), the consumer-group mirror (mirror.h) and the loop
 *		itself (worker.c, declared here).  Only these four modules include
 *		it.
 *
 *		Owns: KsWorkerState, KsMirrorState and worker.c's declarations.
 *		Must not: be included outside those four modules, or declare
 *		the other modules' calls (assignment.h, fill.h, mirror.h).
 *
 *-------------------------------------------------------------------------
 */
#ifndef KS_WORKER_H
#define KS_WORKER_H

#include "kafka_sink.h"
#include "pipeline.h"
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

/* worker.c */
extern PGDLLEXPORT void ks_worker_main(Datum arg);
extern KS_NORETURN void ks_worker_fail(KsWorkerState *ws, const char *kind, int sqlerrcode,
									   const char *message, const char *detail,
									   const char *hint);

#endif							/* KS_WORKER_H */
