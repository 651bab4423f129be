/*-------------------------------------------------------------------------
 *
 * bgworker.h
 *		The background workers (launcher.c, scheduler.c, worker.c, outbox.c) and what
 *		they share (bgworker.c): the start-up preamble, the one backoff
 *		formula, the one way to fail a pipeline, their wait events and
 *		the arguments a worker is started with.
 *
 *		Owns: KsWorkerArgs, the wait events and bgworker.c's helpers.
 *		Must not: declare a worker's loop (worker.h, launcher.h, scheduler.h, outbox.h)
 *		or a policy (when to back off or fail is the caller's).
 *
 *-------------------------------------------------------------------------
 */
#ifndef KS_BGWORKER_H
#define KS_BGWORKER_H

#include "kafka_sink.h"

/*
 * What the workers' waits report in pg_stat_activity.wait_event: 17 has
 * named custom wait events (WaitEventExtensionNew), before that they all
 * are "Extension".  ks_wait_event() (bgworker.c) registers each name once
 * per process.
 */
typedef enum KsWaitEvent
{
	KS_WAIT_LAUNCHER_NAP,		/* KafkaSinkLauncherNap */
	KS_WAIT_MESSAGES,			/* KafkaSinkWaitForMessages */
	KS_WAIT_RELAY_NAP,			/* KafkaSinkRelayNap */
	KS_WAIT_NUM
} KsWaitEvent;

extern uint32 ks_wait_event(KsWaitEvent which);

/* The slot of the outbox relay carries this in place of a pipeline id. */
#define KS_RELAY_ID (-1)

/* What the launcher passes a worker or the relay, in bgw_extra. */
typedef struct KsWorkerArgs
{
	Oid			database;
	Oid			owner;
	int64		pipeline_id;
	int			slot;
	int			worker_index;
	int			nworkers;
} KsWorkerArgs;

/* bgworker.c */
extern void ks_bgworker_start(KsWorkerArgs *args);
extern void ks_bgworker_session(const char *appname);
extern long ks_backoff_ms(int failures, long base_ms, long max_ms);
extern void ks_fail_pipeline(int64 pipeline_id, const char *kind, int sqlerrcode,
							 const char *message, const char *detail);

#endif							/* KS_BGWORKER_H */
