/*-------------------------------------------------------------------------
 *
 * bgworker.c
 *		What the three background workers (launcher.c, worker.c, outbox.c)
 *		share: the start-up preamble, the session settings of a superuser
 *		worker, the one backoff formula, and the one way to fail a pipeline.
 *
 * Owns: these four helpers.  Must not: hold a loop or a policy of its own
 * (when to back off, when to fail is the caller's).
 *
 *-------------------------------------------------------------------------
 */
#include "kafka_sink.h"
#include "shmem.h"
#include "bgworker.h"
#include "catalog.h"

#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "tcop/tcopprot.h"
#include "utils/guc.h"
#include "utils/wait_event.h"

StaticAssertDecl(sizeof(KsWorkerArgs) <= BGW_EXTRALEN, "worker arguments must fit in bgw_extra");

/*
 * The start of every main: die on SIGTERM and reload on SIGHUP (no
 * hand-rolled flags, which hang fast shutdown), signals unblocked.  With
 * args (a worker or the relay, started by the launcher): the arguments
 * from bgw_extra, and the slot attached, or the process exits quietly (the
 * launcher gave the slot to another in the meantime).
 */
void
ks_bgworker_start(KsWorkerArgs *args)
{
	pqsignal(SIGTERM, die);
	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	BackgroundWorkerUnblockSignals();
	if (args == NULL)
		return;
	memcpy(args, MyBgworkerEntry->bgw_extra, sizeof(KsWorkerArgs));
	if (!ks_slot_attach(args->slot, args->database, args->pipeline_id, args->worker_index))
		proc_exit(0);
}

/*
 * The session of a worker that runs as a superuser (the launcher, the
 * relay): names are never resolved through a user's search_path; the
 * application name shows what it is.
 */
void
ks_bgworker_session(const char *appname)
{
	SetConfigOption("search_path", "pg_catalog, pg_temp", PGC_USERSET, PGC_S_SESSION);
	SetConfigOption("application_name", appname, PGC_USERSET, PGC_S_SESSION);
	pgstat_report_appname(appname);
}

/*
 * The wait after the failures-th failure in a row: base_ms doubled per
 * failure, at most max_ms.  The launcher (restarts), the worker (transient
 * errors), the relay (deliveries) and the consumer-group mirror use it
 * with their own base and ceiling.
 */
long
ks_backoff_ms(int failures, long base_ms, long max_ms)
{
	return Min(max_ms, base_ms << Min(Max(failures, 0), 20));
}

/*
 * Records a failure of a pipeline: a row of kind (permanent, transient) in
 * kafka_sink.errors and, unless it is transient, state 'failed', so that
 * status, errors and wait() show it and the launcher starts no worker for
 * it again until kafka_sink.start.  Each in its own transaction: call it
 * outside any.  The caller logs in its own words first.
 */
void
ks_fail_pipeline(int64 pipeline_id, const char *kind, int sqlerrcode,
				 const char *message, const char *detail)
{
	ks_record_error(pipeline_id, kind, sqlerrcode, message, detail);
	if (strcmp(kind, "transient") != 0)
		ks_set_state(pipeline_id, "failed");
}

/*
 * The wait event a worker's wait reports (bgworker.h).  On 17+ a named custom
 * wait event, so pg_stat_activity tells a worker waiting for Kafka from one
 * that is idle between launcher rounds; registered on first use in each
 * process (the name's id is shared, in shared memory); before 17 "Extension".
 */
uint32
ks_wait_event(KsWaitEvent which)
{
	static uint32 ids[KS_WAIT_NUM];
	static const char *const names[KS_WAIT_NUM] = {
		[KS_WAIT_LAUNCHER_NAP] = "KafkaSinkLauncherNap",
		[KS_WAIT_MESSAGES] = "KafkaSinkWaitForMessages",
		[KS_WAIT_RELAY_NAP] = "KafkaSinkRelayNap",
	};

	Assert(which >= 0 && which < KS_WAIT_NUM);
	if (ids[which] == 0)
		ids[which] = KS_WAIT_EVENT_EXTENSION_NEW(names[which]);
	return ids[which];
}
