/*-------------------------------------------------------------------------
 *
 * launcher.c
 *		The launcher: one static background worker per cluster that starts
 *		a scheduler (scheduler.c) in each database it serves.
 *
 * It is connected to no database (it reads the shared catalog pg_database
 * only).  A database is served when it accepts connections, is not a
 * template, is valid (not half dropped) and, when kafka_sink.database is
 * set, is the one it names.  Each round (every kafka_sink.launcher_naptime,
 * or when woken) it starts the scheduler of a served database that has
 * none, stops the schedulers of databases no longer served, and frees the
 * entries of dropped databases.  A scheduler that found no extension in its
 * database exits and is started again only on a rescan: requested by
 * CREATE EXTENSION kafka_sink and CREATE DATABASE (catalog_guard.c's
 * utility hook), and every minute in case a request was missed.  It starts
 * only after recovery has finished (BgWorkerStart_RecoveryFinished), so
 * nothing runs on a standby, and it comes up by itself after promotion.
 *
 * Owns: which databases are served, starting and stopping their
 * schedulers.  Must not: connect to a database or start pipeline workers
 * (the schedulers do).
 *
 *-------------------------------------------------------------------------
 */
#include "kafka_sink.h"
#include "guc.h"
#include "shmem.h"
#include "launcher.h"
#include "bgworker.h"

#include <signal.h>

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/xact.h"
#include "catalog/pg_database.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

/* a scheduler that exits is started again at most this often */
#define KS_SCHEDULER_RESTART_MS 5000
/* the databases without the extension are probed again this often */
#define KS_RESCAN_MS 60000

/* launcher-local, per KsDbSlot entry */
static BackgroundWorkerHandle **handles;
static TimestampTz *last_start;
static bool *rescan_pending;	/* a rescan came while its scheduler ran */

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

/* The served databases, from pg_database. */
static List *
served_databases(void)
{
	List	   *dbs = NIL;
	MemoryContext cxt = CurrentMemoryContext;	/* the list outlives the transaction */
	Relation	rel;
	SysScanDesc scan;
	HeapTuple	tup;

	StartTransactionCommand();
	PushActiveSnapshot(GetTransactionSnapshot());
	rel = table_open(DatabaseRelationId, AccessShareLock);
	scan = systable_beginscan(rel, InvalidOid, false, NULL, 0, NULL);
	while (HeapTupleIsValid(tup = systable_getnext(scan)))
	{
		Form_pg_database db = (Form_pg_database) GETSTRUCT(tup);
		MemoryContext old;

		if (!db->datallowconn || db->datistemplate || db->datconnlimit == -2)
			continue;			/* -2: DATCONNLIMIT_INVALID_DB, a failed DROP */
		if (ks_database != NULL && ks_database[0] != '\0' &&
			strcmp(NameStr(db->datname), ks_database) != 0)
			continue;
		if (ks_database_blocked(db->oid))
			continue;
		old = MemoryContextSwitchTo(cxt);
		dbs = lappend_oid(dbs, db->oid);
		MemoryContextSwitchTo(old);
	}
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
	PopActiveSnapshot();
	CommitTransactionCommand();
	return dbs;
}

/* its handle, or (after a restart of the launcher) its pid in the entry */
static bool
scheduler_running(int i)
{
	pid_t		pid;
	bool		running;

	if (handles[i] != NULL && GetBackgroundWorkerPid(handles[i], &pid) != BGWH_STOPPED)
		return true;
	LWLockAcquire(ks_shared->lock, LW_SHARED);
	running = KS_DBSLOTS()[i].pid > 0;
	LWLockRelease(ks_shared->lock);
	return running;
}

static void
start_scheduler(int i, Oid database)
{
	BackgroundWorker bgw;
	MemoryContext old;
	bool		registered;

	memset(&bgw, 0, sizeof(bgw));
	bgw.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	bgw.bgw_start_time = BgWorkerStart_RecoveryFinished;
	bgw.bgw_restart_time = BGW_NEVER_RESTART;
	snprintf(bgw.bgw_library_name, BGW_MAXLEN, "kafka_sink");
	snprintf(bgw.bgw_function_name, BGW_MAXLEN, "ks_scheduler_main");
	snprintf(bgw.bgw_name, BGW_MAXLEN, "kafka_sink scheduler %u", database);
	snprintf(bgw.bgw_type, BGW_MAXLEN, "kafka_sink scheduler");
	bgw.bgw_main_arg = ObjectIdGetDatum(database);
	memcpy(bgw.bgw_extra, &i, sizeof(int));
	bgw.bgw_notify_pid = MyProcPid;

	LWLockAcquire(ks_shared->lock, LW_EXCLUSIVE);
	KS_DBSLOTS()[i].database = database;
	KS_DBSLOTS()[i].state = KS_DB_STARTING;
	KS_DBSLOTS()[i].pid = 0;
	KS_DBSLOTS()[i].demand = 0;
	LWLockRelease(ks_shared->lock);

	if (handles[i])
		pfree(handles[i]);
	handles[i] = NULL;
	last_start[i] = GetCurrentTimestamp();
	old = MemoryContextSwitchTo(TopMemoryContext);
	registered = RegisterDynamicBackgroundWorker(&bgw, &handles[i]);
	MemoryContextSwitchTo(old);
	if (!registered)
		ereport(WARNING,
				(errmsg("kafka_sink launcher: could not start the scheduler of database %u: no background worker slot is free",
						database),
				 errhint("Raise max_worker_processes: each served database takes one for its scheduler.")));
}

static void
launch(bool rescan)
{
	List	   *dbs = served_databases();
	ListCell   *lc;
	TimestampTz now = GetCurrentTimestamp();
	static TimestampTz full_warned = 0;

	/*
	 * Stop the schedulers and workers of databases no longer served (a
	 * scheduler that is killed leaves its workers), free their entries.
	 */
	for (int i = 0; i < ks_shared->ndbs; i++)
	{
		KsDbSlot   *d = &KS_DBSLOTS()[i];
		Oid			database;

		LWLockAcquire(ks_shared->lock, LW_SHARED);
		database = d->state == KS_DB_FREE ? InvalidOid : d->database;
		LWLockRelease(ks_shared->lock);
		if (!OidIsValid(database) || list_member_oid(dbs, database))
			continue;
		if (ks_database_signal(database) > 0 || scheduler_running(i))
			continue;
		LWLockAcquire(ks_shared->lock, LW_EXCLUSIVE);
		memset(d, 0, sizeof(KsDbSlot));
		LWLockRelease(ks_shared->lock);
	}

	/* start the scheduler of each served database that has none */
	foreach(lc, dbs)
	{
		Oid			database = lfirst_oid(lc);
		int			entry = -1;
		int			free_entry = -1;
		KsDbState	state = KS_DB_FREE;

		LWLockAcquire(ks_shared->lock, LW_SHARED);
		for (int i = 0; i < ks_shared->ndbs; i++)
		{
			KsDbSlot   *d = &KS_DBSLOTS()[i];

			if (d->state != KS_DB_FREE && d->database == database)
			{
				entry = i;
				state = d->state;
			}
			else if (d->state == KS_DB_FREE && free_entry < 0)
				free_entry = i;
		}
		LWLockRelease(ks_shared->lock);

		if (entry < 0)
		{
			if (free_entry >= 0)
				start_scheduler(free_entry, database);
			else if (full_warned == 0 || TimestampDifferenceExceeds(full_warned, now, 60000))
			{
				full_warned = now;
				ereport(WARNING,
						(errmsg("kafka_sink launcher: database %u is not served: %d databases are served already",
								database, ks_shared->ndbs),
						 errhint("Raise kafka_sink.max_workers (it takes a restart), or set kafka_sink.database.")));
			}
			continue;
		}
		if (scheduler_running(entry))
		{
			/* it may be about to exit for want of an extension just created */
			rescan_pending[entry] |= rescan;
			continue;
		}
		if (state == KS_DB_NO_EXTENSION && !rescan && !rescan_pending[entry])
			continue;
		rescan_pending[entry] = false;
		if (last_start[entry] != 0 && state != KS_DB_NO_EXTENSION &&
			!TimestampDifferenceExceeds(last_start[entry], now, KS_SCHEDULER_RESTART_MS))
			continue;			/* it has just exited: not in a tight loop */
		start_scheduler(entry, database);
	}
	list_free(dbs);
}

void
ks_launcher_main(Datum arg)
{
	MemoryContext loop_cxt;
	TimestampTz last_rescan;

	(void) arg;
	ks_bgworker_start(NULL);
	/* no database: pg_database is a shared catalog */
	BackgroundWorkerInitializeConnection(NULL, NULL, 0);
	pgstat_report_appname("kafka_sink launcher");

	LWLockAcquire(ks_shared->lock, LW_EXCLUSIVE);
	ks_shared->launcher_procno = KS_MY_PROCNO();
	ks_shared->launcher_pid = MyProcPid;
	/* a launcher that restarts forgets its schedulers: they end by themselves */
	for (int i = 0; i < ks_shared->ndbs; i++)
		if (KS_DBSLOTS()[i].pid == 0)
			memset(&KS_DBSLOTS()[i], 0, sizeof(KsDbSlot));
	LWLockRelease(ks_shared->lock);
	before_shmem_exit(launcher_exit, 0);

	handles = MemoryContextAllocZero(TopMemoryContext, sizeof(BackgroundWorkerHandle *) * ks_shared->ndbs);
	last_start = MemoryContextAllocZero(TopMemoryContext, sizeof(TimestampTz) * ks_shared->ndbs);
	rescan_pending = MemoryContextAllocZero(TopMemoryContext, sizeof(bool) * ks_shared->ndbs);
	loop_cxt = AllocSetContextCreate(TopMemoryContext, "kafka_sink launcher", ALLOCSET_DEFAULT_SIZES);
	last_rescan = GetCurrentTimestamp();

	for (;;)
	{
		MemoryContext old;
		bool		rescan;
		TimestampTz now = GetCurrentTimestamp();

		CHECK_FOR_INTERRUPTS();
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
		}
		LWLockAcquire(ks_shared->lock, LW_EXCLUSIVE);
		rescan = ks_shared->rescan;
		ks_shared->rescan = false;
		LWLockRelease(ks_shared->lock);
		if (TimestampDifferenceExceeds(last_rescan, now, KS_RESCAN_MS))
			rescan = true;
		if (rescan)
			last_rescan = now;

		MemoryContextReset(loop_cxt);
		old = MemoryContextSwitchTo(loop_cxt);
		launch(rescan);
		MemoryContextSwitchTo(old);

		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 ks_launcher_naptime_ms, ks_wait_event(KS_WAIT_LAUNCHER_NAP));
		ResetLatch(MyLatch);
	}
}
