/*-------------------------------------------------------------------------
 *
 * launcher.c
 *		The launcher: one static background worker that reconciles the
 *		pipelines table with the running pipeline workers.
 *
 * It starts workers for pipelines in state 'running', stops workers of
 * pipelines that were stopped, dropped or resized, and restarts crashed
 * workers with an exponential backoff.  It starts only after recovery has
 * finished (BgWorkerStart_RecoveryFinished), so nothing runs on a standby,
 * and it comes up by itself after promotion.
 *
 *-------------------------------------------------------------------------
 */
#include "kafka_sink.h"

#include <signal.h>

#include "access/xact.h"
#include "commands/extension.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "tcop/tcopprot.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

typedef struct Wanted
{
	int64		pipeline_id;
	Oid			owner;
	int			workers;
	int			generation;
	bool		paused;
} Wanted;

/* Launcher-local memory of each (pipeline, worker): for backoff. */
typedef struct Backoff
{
	int64		pipeline_id;
	int			worker_index;
	int			failures;
	TimestampTz last_start;
	TimestampTz not_before;
	TimestampTz last_reported;
} Backoff;

static BackgroundWorkerHandle **handles;
static Backoff *backoffs;
static int	nbackoffs = 0;

void
ks_launcher_register(void)
{
	BackgroundWorker bgw;

	memset(&bgw, 0, sizeof(bgw));
	bgw.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	bgw.bgw_start_time = BgWorkerStart_RecoveryFinished;
	bgw.bgw_restart_time = 5;
	snprintf(bgw.bgw_library_name, BGW_MAXLEN, "kafka_sink");
	snprintf(bgw.bgw_function_name, BGW_MAXLEN, "ks_launcher_main");
	snprintf(bgw.bgw_name, BGW_MAXLEN, "kafka_sink launcher");
	snprintf(bgw.bgw_type, BGW_MAXLEN, "kafka_sink launcher");
	RegisterBackgroundWorker(&bgw);
}

static void
launcher_exit(int code, Datum arg)
{
	(void) code;
	(void) arg;
	LWLockAcquire(ks_shared->lock, LW_EXCLUSIVE);
	ks_shared->launcher_procno = -1;
	ks_shared->launcher_pid = 0;
	LWLockRelease(ks_shared->lock);
}

static Backoff *
get_backoff(int64 pipeline_id, int worker_index)
{
	for (int i = 0; i < nbackoffs; i++)
		if (backoffs[i].pipeline_id == pipeline_id && backoffs[i].worker_index == worker_index)
			return &backoffs[i];
	if (nbackoffs == ks_max_workers * 4)
		nbackoffs = 0;			/* forget old entries; backoff is best effort */
	memset(&backoffs[nbackoffs], 0, sizeof(Backoff));
	backoffs[nbackoffs].pipeline_id = pipeline_id;
	backoffs[nbackoffs].worker_index = worker_index;
	return &backoffs[nbackoffs++];
}

static List *
read_wanted(void)
{
	List	   *wanted = NIL;
	MemoryContext cxt = CurrentMemoryContext;

	ks_xact_begin("kafka_sink launcher: reading pipelines");
	if (OidIsValid(get_extension_oid(KS_EXTENSION_NAME, true)) &&
		SPI_execute("SELECT id, owner::oid, workers, state = 'paused', generation FROM kafka_sink.pipeline_definitions"
					" WHERE state IN ('running', 'paused') ORDER BY id", true, 0) == SPI_OK_SELECT)
	{
		for (uint64 i = 0; i < SPI_processed; i++)
		{
			bool		isnull;
			Wanted	   *w = MemoryContextAlloc(cxt, sizeof(Wanted));

			w->pipeline_id = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1, &isnull));
			w->owner = DatumGetObjectId(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 2, &isnull));
			w->workers = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 3, &isnull));
			w->paused = DatumGetBool(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 4, &isnull));
			w->generation = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 5, &isnull));
			{
				MemoryContext old = MemoryContextSwitchTo(cxt);

				wanted = lappend(wanted, w);
				MemoryContextSwitchTo(old);
			}
		}
	}
	/* the outbox relay, when it has somewhere to publish */
	if (ks_outbox_servers && ks_outbox_servers[0] != '\0' &&
		OidIsValid(get_extension_oid(KS_EXTENSION_NAME, true)))
	{
		Wanted	   *w = MemoryContextAllocZero(cxt, sizeof(Wanted));
		MemoryContext old = MemoryContextSwitchTo(cxt);

		w->pipeline_id = KS_RELAY_ID;
		w->owner = InvalidOid;
		w->workers = 1;
		wanted = lappend(wanted, w);
		MemoryContextSwitchTo(old);
	}
	ks_xact_commit();
	return wanted;
}

static void
report_start_failure(int64 pipeline_id, const char *why)
{
	Backoff    *b = get_backoff(pipeline_id, -1);
	TimestampTz now = GetCurrentTimestamp();

	if (b->last_reported != 0 && !TimestampDifferenceExceeds(b->last_reported, now, 60000))
		return;
	b->last_reported = now;
	ereport(WARNING,
			(errmsg("kafka_sink: could not start a worker for pipeline %lld: %s",
					(long long) pipeline_id, why)));
	ks_record_error(pipeline_id, "transient", 0,
					psprintf("could not start a pipeline worker: %s", why),
					"Raise max_worker_processes or kafka_sink.max_workers, or stop other pipelines.");
}

static void
start_worker(Wanted *w, int index)
{
	BackgroundWorker bgw;
	KsWorkerArgs a;
	int			slot = -1;
	Backoff    *b = get_backoff(w->pipeline_id, index);
	TimestampTz now = GetCurrentTimestamp();

	if (b->not_before != 0 && now < b->not_before)
		return;

	LWLockAcquire(ks_shared->lock, LW_EXCLUSIVE);
	for (int i = 0; i < ks_shared->nslots; i++)
		if (!ks_shared->slots[i].in_use)
		{
			slot = i;
			break;
		}
	if (slot >= 0)
	{
		KsWorkerSlot *s = &ks_shared->slots[slot];

		memset(s, 0, sizeof(KsWorkerSlot));
		s->in_use = true;
		s->database = MyDatabaseId;
		s->pipeline_id = w->pipeline_id;
		s->owner = w->owner;	/* who may see the slot (_worker_pids) */
		s->worker_index = index;
		s->nworkers = w->workers;
		s->generation = w->generation;
		s->paused = w->paused;
	}
	LWLockRelease(ks_shared->lock);
	if (slot < 0)
	{
		report_start_failure(w->pipeline_id, "all kafka_sink.max_workers slots are in use");
		return;
	}

	memset(&a, 0, sizeof(a));
	a.database = MyDatabaseId;
	a.owner = w->owner;
	a.pipeline_id = w->pipeline_id;
	a.slot = slot;
	a.worker_index = index;
	a.nworkers = w->workers;

	memset(&bgw, 0, sizeof(bgw));
	bgw.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	bgw.bgw_start_time = BgWorkerStart_RecoveryFinished;
	bgw.bgw_restart_time = BGW_NEVER_RESTART;
	snprintf(bgw.bgw_library_name, BGW_MAXLEN, "kafka_sink");
	if (w->pipeline_id == KS_RELAY_ID)
	{
		snprintf(bgw.bgw_function_name, BGW_MAXLEN, "ks_relay_main");
		snprintf(bgw.bgw_name, BGW_MAXLEN, "kafka_sink outbox relay");
		snprintf(bgw.bgw_type, BGW_MAXLEN, "kafka_sink outbox relay");
	}
	else
	{
		snprintf(bgw.bgw_function_name, BGW_MAXLEN, "ks_worker_main");
		snprintf(bgw.bgw_name, BGW_MAXLEN, "kafka_sink worker %lld/%d", (long long) w->pipeline_id, index);
		snprintf(bgw.bgw_type, BGW_MAXLEN, "kafka_sink worker");
	}
	bgw.bgw_notify_pid = MyProcPid;
	memcpy(bgw.bgw_extra, &a, sizeof(a));

	if (handles[slot])
		pfree(handles[slot]);
	handles[slot] = NULL;
	if (!RegisterDynamicBackgroundWorker(&bgw, &handles[slot]))
	{
		LWLockAcquire(ks_shared->lock, LW_EXCLUSIVE);
		ks_shared->slots[slot].in_use = false;
		LWLockRelease(ks_shared->lock);
		report_start_failure(w->pipeline_id, "no background worker slot is free (max_worker_processes)");
		return;
	}

	/* a worker that dies within a minute of its start backs off */
	if (b->last_start != 0 && !TimestampDifferenceExceeds(b->last_start, now, 60000))
		b->failures++;
	else
		b->failures = 0;
	b->last_start = now;
	b->not_before = b->failures == 0 ? 0 :
		TimestampTzPlusMilliseconds(now, Min(60000, 1000 << Min(b->failures, 6)));
}

static void
reconcile(void)
{
	List	   *wanted = read_wanted();
	ListCell   *lc;

	/* free slots of workers that died before they could attach */
	for (int i = 0; i < ks_shared->nslots; i++)
	{
		pid_t		pid;

		if (handles[i] == NULL)
			continue;
		if (GetBackgroundWorkerPid(handles[i], &pid) == BGWH_STOPPED)
		{
			LWLockAcquire(ks_shared->lock, LW_EXCLUSIVE);
			if (ks_shared->slots[i].in_use && ks_shared->slots[i].pid == 0)
				ks_shared->slots[i].in_use = false;
			LWLockRelease(ks_shared->lock);
			pfree(handles[i]);
			handles[i] = NULL;
		}
	}

	/* stop what is no longer wanted; tell the others whether they are paused */
	LWLockAcquire(ks_shared->lock, LW_EXCLUSIVE);
	for (int i = 0; i < ks_shared->nslots; i++)
	{
		KsWorkerSlot *s = &ks_shared->slots[i];
		bool		keep = false;

		if (!s->in_use)
			continue;
		foreach(lc, wanted)
		{
			Wanted	   *w = lfirst(lc);

			if (w->pipeline_id == s->pipeline_id && w->workers == s->nworkers &&
				w->generation == s->generation && s->worker_index < w->workers)
			{
				keep = true;
				if (s->paused != w->paused)
				{
					s->paused = w->paused;
					if (s->pid > 0)
						SetLatch(&ProcGlobal->allProcs[s->procno].procLatch);
				}
			}
		}
		if (!keep && s->pid > 0)
			kill(s->pid, SIGTERM);
	}
	LWLockRelease(ks_shared->lock);

	/* start what is missing */
	foreach(lc, wanted)
	{
		Wanted	   *w = lfirst(lc);

		for (int index = 0; index < w->workers; index++)
		{
			bool		running = false;
			bool		old_generation = false;

			LWLockAcquire(ks_shared->lock, LW_SHARED);
			for (int i = 0; i < ks_shared->nslots; i++)
			{
				KsWorkerSlot *s = &ks_shared->slots[i];

				if (!s->in_use || s->pipeline_id != w->pipeline_id)
					continue;
				if (s->nworkers != w->workers || s->generation != w->generation)
					old_generation = true;
				else if (s->worker_index == index)
					running = true;
			}
			LWLockRelease(ks_shared->lock);

			/* a resize waits until every worker of the old size is gone */
			if (old_generation)
				break;
			if (!running)
				start_worker(w, index);
		}
	}
	list_free_deep(wanted);
}

void
ks_launcher_main(Datum arg)
{
	MemoryContext loop_cxt;

	(void) arg;
	pqsignal(SIGTERM, die);
	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	BackgroundWorkerUnblockSignals();
	BackgroundWorkerInitializeConnection(ks_database, NULL, 0);
	/* the launcher is a superuser: never resolve names through a user's path */
	SetConfigOption("search_path", "pg_catalog, pg_temp", PGC_USERSET, PGC_S_SESSION);
	pgstat_report_appname("kafka_sink launcher");

	LWLockAcquire(ks_shared->lock, LW_EXCLUSIVE);
	ks_shared->launcher_procno = KS_MY_PROCNO();
	ks_shared->launcher_pid = MyProcPid;
	LWLockRelease(ks_shared->lock);
	before_shmem_exit(launcher_exit, 0);

	handles = MemoryContextAllocZero(TopMemoryContext, sizeof(BackgroundWorkerHandle *) * ks_shared->nslots);
	backoffs = MemoryContextAllocZero(TopMemoryContext, sizeof(Backoff) * ks_max_workers * 4);
	loop_cxt = AllocSetContextCreate(TopMemoryContext, "kafka_sink launcher", ALLOCSET_DEFAULT_SIZES);

	for (;;)
	{
		MemoryContext old;

		CHECK_FOR_INTERRUPTS();
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
		}
		MemoryContextReset(loop_cxt);
		old = MemoryContextSwitchTo(loop_cxt);
		reconcile();
		MemoryContextSwitchTo(old);

		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 ks_launcher_naptime_ms, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
	}
}
