/*-------------------------------------------------------------------------
 *
 * scheduler.c
 *		The scheduler of one database: a background worker, started by the
 *		launcher (launcher.c) in each served database, that reconciles the
 *		database's pipelines table with its running pipeline workers.
 *
 * It starts workers for pipelines in state 'running', stops workers of
 * pipelines that were stopped, dropped or resized, and restarts crashed
 * workers with an exponential backoff.  It runs at most the database's
 * fair part of kafka_sink.max_workers (ks_database_share: the pipelines
 * that do not fit, in id order, wait with an error that says so).  When
 * the extension is not (or no longer) installed in its database, it stops
 * the database's workers, says so in shared memory and exits: the launcher
 * starts it again at the next CREATE EXTENSION.
 *
 * Owns: which workers of its database should run, starting and stopping
 * them, restart backoff and early-exit counting.  Must not: apply batches,
 * touch another database's slots or hold SQL text against the catalog
 * (catalog.c: ks_catalog_wanted).
 *
 *-------------------------------------------------------------------------
 */
#include "kafka_sink.h"
#include "spi.h"
#include "guc.h"
#include "shmem.h"
#include "scheduler.h"
#include "catalog.h"
#include "bgworker.h"

#include <signal.h>

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "commands/dbcommands.h"
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


/*
 * A worker that exits this many times in a row before it could record its
 * own errors (see KsWorkerSlot.ready) fails its pipeline.
 */
#define KS_MAX_EARLY_EXITS 3

/* Launcher-local memory of each (pipeline, worker): for backoff. */
typedef struct Backoff
{
	int64		pipeline_id;
	int			worker_index;
	int			failures;
	TimestampTz last_start;
	TimestampTz not_before;
	TimestampTz last_reported;
	int			early_exits;	/* in a row, before the worker was ready */
} Backoff;

static void fail_pipeline(int64 pipeline_id, int sqlerrcode, const char *message, const char *detail);

static BackgroundWorkerHandle **handles;
static Backoff *backoffs;
static int	nbackoffs = 0;
static int	my_entry = -1;		/* this database's KsDbSlot */
static char *my_dbname = NULL;

/*
 * The scheduler's exit: its entry says no scheduler runs (the launcher
 * starts another, unless the entry says there is no extension).
 */
static void
scheduler_exit(int code, Datum arg)
{
	KsDbSlot   *d = &KS_DBSLOTS()[my_entry];

	(void) code;
	(void) arg;
	LWLockAcquire(ks_shared->lock, LW_EXCLUSIVE);
	if (d->pid == MyProcPid)
	{
		d->pid = 0;
		d->demand = 0;
	}
	LWLockRelease(ks_shared->lock);
	ks_wake_launcher();
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

/*
 * True when the extension's catalog in this database is at the version this
 * library was built for.  After `make install` of a new release and a
 * restart, the catalog stays at the old version until ALTER EXTENSION
 * kafka_sink UPDATE: no worker is started against a catalog it was not
 * written for, and the log says what to do (once per version seen).
 */
static bool
catalog_version_matches(void)
{
	static char reported[64] = "";
	char	   *version = NULL;

	if (ks_spi_execute("SELECT extversion FROM pg_catalog.pg_extension WHERE extname = '" KS_EXTENSION_NAME "'",
					   0, NULL, NULL, NULL, true, 1) == SPI_OK_SELECT && SPI_processed == 1)
		version = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1);
	if (version == NULL || strcmp(version, KS_VERSION) == 0)
	{
		reported[0] = '\0';
		return true;
	}
	if (strcmp(reported, version) != 0)
	{
		ereport(WARNING,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("kafka_sink library %s is loaded, but the extension in database \"%s\" is at version %s",
						KS_VERSION, my_dbname, version),
				 errdetail("No pipeline worker is started until the catalog is at the library's version."),
				 errhint("Run ALTER EXTENSION kafka_sink UPDATE in database \"%s\".", my_dbname)));
		strlcpy(reported, version, sizeof(reported));
	}
	return false;
}

static List *
read_wanted(bool *installed)
{
	List	   *wanted = NIL;
	MemoryContext cxt = CurrentMemoryContext;
	ListCell   *lc;

	ks_xact_begin("kafka_sink scheduler: reading pipelines");
	*installed = OidIsValid(get_extension_oid(KS_EXTENSION_NAME, true));
	if (*installed && catalog_version_matches())
		wanted = ks_catalog_wanted(ks_allow_superuser_pipelines, cxt);
	/* the outbox relay, when it has somewhere to publish */
	if (ks_outbox_servers && ks_outbox_servers[0] != '\0' && *installed)
	{
		KsWanted	   *w = MemoryContextAllocZero(cxt, sizeof(KsWanted));
		MemoryContext old = MemoryContextSwitchTo(cxt);

		w->pipeline_id = KS_RELAY_ID;
		w->owner = InvalidOid;
		w->workers = 1;
		wanted = lappend(wanted, w);
		MemoryContextSwitchTo(old);
	}
	ks_xact_commit();

	/* a pipeline that cannot work fails, visibly, instead of starting workers */
	foreach(lc, wanted)
	{
		KsWanted	   *w = lfirst(lc);

		if (w->problem == NULL)
			continue;
		fail_pipeline(w->pipeline_id,
					  strncmp(w->problem, "the owner", strlen("the owner")) == 0 ?
					  ERRCODE_INVALID_AUTHORIZATION_SPECIFICATION : ERRCODE_UNDEFINED_OBJECT,
					  w->problem, w->hint);
		wanted = foreach_delete_current(wanted, lc);
	}
	return wanted;
}

/*
 * Fails a pipeline from the scheduler: an errors row of kind 'permanent'
 * and state 'failed', so that status, errors and wait() show why, and no
 * worker is started for it again until kafka_sink.start.
 */
static void
fail_pipeline(int64 pipeline_id, int sqlerrcode, const char *message, const char *detail)
{
	ereport(WARNING,
			(errmsg("kafka_sink: pipeline %lld failed: %s", (long long) pipeline_id, message),
			 detail ? errdetail("%s", detail) : 0));
	ks_fail_pipeline(pipeline_id, "permanent", sqlerrcode, message, detail);
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

/*
 * Forgets the handle of a worker that has exited, and counts the exits of
 * workers that never became ready (they died before they could record an
 * error themselves: e.g. at connection, as an owner that cannot log in).
 * Such exits, KS_MAX_EARLY_EXITS times in a row, fail the pipeline with an
 * error that points to the server log, instead of a silent restart loop.
 */
static int64
reap_slot(int i)
{
	pid_t		pid;
	int64		pipeline_id;
	int			worker_index;
	bool		ready;
	Backoff    *b;

	if (handles[i] == NULL || GetBackgroundWorkerPid(handles[i], &pid) != BGWH_STOPPED)
		return 0;
	LWLockAcquire(ks_shared->lock, LW_EXCLUSIVE);
	if (ks_shared->slots[i].in_use && ks_shared->slots[i].pid == 0)
		ks_shared->slots[i].in_use = false;
	pipeline_id = ks_shared->slots[i].pipeline_id;
	worker_index = ks_shared->slots[i].worker_index;
	ready = ks_shared->slots[i].ready;
	LWLockRelease(ks_shared->lock);
	pfree(handles[i]);
	handles[i] = NULL;
	if (pipeline_id == KS_RELAY_ID)
		return 0;

	b = get_backoff(pipeline_id, worker_index);
	if (ready)
	{
		b->early_exits = 0;
		return 0;
	}
	if (++b->early_exits < KS_MAX_EARLY_EXITS)
		return 0;
	b->early_exits = 0;
	fail_pipeline(pipeline_id, ERRCODE_INTERNAL_ERROR,
				  psprintf("the worker of pipeline %lld exited %d times in a row before it could start", (long long) pipeline_id,
						   KS_MAX_EARLY_EXITS),
				  "It failed before it could record its own error, for example while connecting as the pipeline's owner. "
				  "The server log has the error of each attempt. Fix the cause, then SELECT kafka_sink.start(...).");
	return pipeline_id;
}

static void
start_worker(KsWanted *w, int index)
{
	BackgroundWorker bgw;
	KsWorkerArgs a;
	int			slot = -1;
	bool		registered;
	MemoryContext old_cxt;
	Backoff    *b = get_backoff(w->pipeline_id, index);
	TimestampTz now = GetCurrentTimestamp();

	if (b->not_before != 0 && now < b->not_before)
		return;

	/* count the exits of workers not seen yet, before their slots are reused */
	for (int i = 0; i < ks_shared->nslots; i++)
		if (reap_slot(i) == w->pipeline_id)
			return;				/* it has just failed */

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

	/*
	 * The handle outlives this round: allocate it in TopMemoryContext, not
	 * in the loop's context, which is reset before the next round reads
	 * (and frees) it.  PostgreSQL 18 crashed on the dangling handle.
	 */
	old_cxt = MemoryContextSwitchTo(TopMemoryContext);
	registered = RegisterDynamicBackgroundWorker(&bgw, &handles[slot]);
	MemoryContextSwitchTo(old_cxt);
	if (!registered)
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
		TimestampTzPlusMilliseconds(now, ks_backoff_ms(b->failures, 1000, 60000));
}

/*
 * Keeps of wanted (in the catalog's order: pipeline ids) the pipelines that
 * fit in this database's part of kafka_sink.max_workers; the others wait,
 * with an error that says why, and their workers are stopped (the part
 * shrinks when another database wants more).
 */
static List *
fair_share(List *wanted)
{
	KsDbSlot   *d = &KS_DBSLOTS()[my_entry];
	ListCell   *lc;
	int			demand = 0;
	int			share;
	int			ndbs;
	int			used = 0;

	foreach(lc, wanted)
		demand += ((KsWanted *) lfirst(lc))->workers;
	LWLockAcquire(ks_shared->lock, LW_EXCLUSIVE);
	d->demand = Min(demand, ks_max_workers_per_database);
	LWLockRelease(ks_shared->lock);
	share = Min(ks_database_share(MyDatabaseId, &ndbs), ks_max_workers_per_database);

	foreach(lc, wanted)
	{
		KsWanted   *w = lfirst(lc);

		if (used + w->workers <= share)
		{
			used += w->workers;
			continue;
		}
		if (w->pipeline_id != KS_RELAY_ID)
			report_start_failure(w->pipeline_id,
								 psprintf("database \"%s\" runs its part of the workers already (%d of kafka_sink.max_workers = %d, shared by %d databases; kafka_sink.max_workers_per_database = %d)",
										  my_dbname, share, ks_max_workers, ndbs, ks_max_workers_per_database));
		wanted = foreach_delete_current(wanted, lc);
	}
	return wanted;
}

/* True when no worker of this database holds a slot. */
static bool
database_idle(void)
{
	bool		idle = true;

	for (int i = 0; i < ks_shared->nslots; i++)
		reap_slot(i);
	LWLockAcquire(ks_shared->lock, LW_SHARED);
	for (int i = 0; i < ks_shared->nslots; i++)
		if (ks_shared->slots[i].in_use && ks_shared->slots[i].database == MyDatabaseId)
			idle = false;
	LWLockRelease(ks_shared->lock);
	return idle;
}

/* One round; false when the extension is gone and its workers are too. */
static bool
reconcile(void)
{
	List	   *wanted;
	ListCell   *lc;
	bool		installed;

	/* free slots of workers that died before they could attach */
	for (int i = 0; i < ks_shared->nslots; i++)
		reap_slot(i);
	wanted = fair_share(read_wanted(&installed));

	/* stop what is no longer wanted; tell the others whether they are paused */
	LWLockAcquire(ks_shared->lock, LW_EXCLUSIVE);
	for (int i = 0; i < ks_shared->nslots; i++)
	{
		KsWorkerSlot *s = &ks_shared->slots[i];
		bool		keep = false;

		if (!s->in_use || s->database != MyDatabaseId)
			continue;
		foreach(lc, wanted)
		{
			KsWanted   *w = lfirst(lc);

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
	if (!installed)
		return !database_idle();

	/* start what is missing */
	foreach(lc, wanted)
	{
		KsWanted   *w = lfirst(lc);

		for (int index = 0; index < w->workers; index++)
		{
			bool		running = false;
			bool		old_generation = false;

			LWLockAcquire(ks_shared->lock, LW_SHARED);
			for (int i = 0; i < ks_shared->nslots; i++)
			{
				KsWorkerSlot *s = &ks_shared->slots[i];

				if (!s->in_use || s->database != MyDatabaseId || s->pipeline_id != w->pipeline_id)
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
	return true;
}

/*
 * The scheduler's main: bgw_main_arg is its database, bgw_extra the index
 * of its KsDbSlot (launcher.c).
 */
void
ks_scheduler_main(Datum arg)
{
	Oid			database = DatumGetObjectId(arg);
	MemoryContext loop_cxt;
	KsDbSlot   *d;
	bool		ours;

	ks_bgworker_start(NULL);
	memcpy(&my_entry, MyBgworkerEntry->bgw_extra, sizeof(int));
	if (my_entry < 0 || my_entry >= ks_shared->ndbs)
		proc_exit(0);
	d = &KS_DBSLOTS()[my_entry];
	LWLockAcquire(ks_shared->lock, LW_EXCLUSIVE);
	ours = d->state != KS_DB_FREE && d->database == database && d->pid == 0;
	if (ours)
	{
		d->pid = MyProcPid;
		d->procno = KS_MY_PROCNO();
		d->state = KS_DB_RUNNING;
	}
	LWLockRelease(ks_shared->lock);
	if (!ours || ks_database_blocked(database))
		proc_exit(0);			/* the launcher gave the entry up, or DROP DATABASE runs */
	before_shmem_exit(scheduler_exit, 0);

	BackgroundWorkerInitializeConnectionByOid(database, InvalidOid, 0);
	/* the scheduler is a superuser: never resolve names through a user's path */
	ks_bgworker_session("kafka_sink scheduler");
	ks_xact_begin("kafka_sink scheduler: its database's name");
	my_dbname = MemoryContextStrdup(TopMemoryContext, get_database_name(MyDatabaseId));
	ks_xact_commit();

	handles = MemoryContextAllocZero(TopMemoryContext, sizeof(BackgroundWorkerHandle *) * ks_shared->nslots);
	backoffs = MemoryContextAllocZero(TopMemoryContext, sizeof(Backoff) * ks_max_workers * 4);
	loop_cxt = AllocSetContextCreate(TopMemoryContext, "kafka_sink scheduler", ALLOCSET_DEFAULT_SIZES);

	for (;;)
	{
		MemoryContext old;
		bool		go_on;

		CHECK_FOR_INTERRUPTS();
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
		}
		MemoryContextReset(loop_cxt);
		old = MemoryContextSwitchTo(loop_cxt);
		go_on = reconcile();
		MemoryContextSwitchTo(old);
		if (!go_on)
			break;

		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 ks_launcher_naptime_ms, ks_wait_event(KS_WAIT_LAUNCHER_NAP));
		ResetLatch(MyLatch);
	}

	/* no extension here (any more), and none of its workers runs */
	LWLockAcquire(ks_shared->lock, LW_EXCLUSIVE);
	if (d->pid == MyProcPid)
		d->state = KS_DB_NO_EXTENSION;
	LWLockRelease(ks_shared->lock);
	ereport(LOG,
			(errmsg("kafka_sink scheduler of database \"%s\": the extension is not installed, exiting",
					my_dbname)));
	proc_exit(0);
}
