/*-------------------------------------------------------------------------
 *
 * shmem.c
 *		Shared memory: the worker slots, the launcher's address and the
 *		served databases.
 *
 * A slot is the truth about a running pipeline worker: its database's
 * scheduler claims it before registering the worker, and the worker
 * releases it when it exits.  A crash of any backend reinitializes shared
 * memory, so no slot can outlive its worker.  The slots are one pool for
 * every database: ks_database_share() is each database's fair part of it.
 * ks_database_clear() empties a database of our workers for DROP DATABASE
 * and the statements that need a database nobody is connected to.
 *
 * Owns: the shared memory and its lock.  Must not: block while it holds
 * the lock.
 *
 *-------------------------------------------------------------------------
 */
#include "kafka_sink.h"
#include "guc.h"
#include "shmem.h"

#include <signal.h>

#include "access/xact.h"
#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "storage/shmem.h"
#include "utils/timestamp.h"

KsShared   *ks_shared = NULL;

static shmem_request_hook_type prev_shmem_request_hook = NULL;
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;

KsBatchIdEntry *ks_batch_ids = NULL;

static Size
batch_ids_size(void)
{
	return mul_size(Max(ks_max_workers, 1), sizeof(KsBatchIdEntry));
}

/* how many databases can be served at once */
#define KS_NDBS() Max(ks_max_workers, 16)

static Size
ks_shmem_size(void)
{
	return add_size(add_size(add_size(offsetof(KsShared, slots),
									  mul_size(ks_max_workers, sizeof(KsWorkerSlot))),
							 mul_size(ks_max_partitions, sizeof(KsPartStat))),
					mul_size(KS_NDBS(), sizeof(KsDbSlot)));
}

static void
ks_shmem_request(void)
{
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();
	RequestAddinShmemSpace(ks_shmem_size());
	RequestAddinShmemSpace(batch_ids_size());
	RequestNamedLWLockTranche("kafka_sink", 1);
}

static void
ks_shmem_startup(void)
{
	bool		found;

	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	ks_shared = ShmemInitStruct("kafka_sink", ks_shmem_size(), &found);
	if (!found)
	{
		memset(ks_shared, 0, ks_shmem_size());
		ks_shared->lock = &(GetNamedLWLockTranche("kafka_sink"))->lock;
		ks_shared->nslots = ks_max_workers;
		ks_shared->launcher_procno = -1;
		ks_shared->npartstats = ks_max_partitions;
		ks_shared->ndbs = KS_NDBS();
	}
	ks_batch_ids = ShmemInitStruct("kafka_sink batch ids", batch_ids_size(), &found);
	if (!found)
		memset(ks_batch_ids, 0, batch_ids_size());
	LWLockRelease(AddinShmemInitLock);
}

void
ks_shmem_init(void)
{
	prev_shmem_request_hook = shmem_request_hook;
	shmem_request_hook = ks_shmem_request;
	prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = ks_shmem_startup;
}

/*
 * Wakes the launcher and this database's scheduler, so that they reconcile
 * now rather than at their next nap.
 */
void
ks_wake_launcher(void)
{
	if (ks_shared == NULL)
		return;
	LWLockAcquire(ks_shared->lock, LW_SHARED);
	if (ks_shared->launcher_procno >= 0)
		SetLatch(&ProcGlobal->allProcs[ks_shared->launcher_procno].procLatch);
	for (int i = 0; i < ks_shared->ndbs; i++)
	{
		KsDbSlot   *d = &KS_DBSLOTS()[i];

		if (d->state != KS_DB_FREE && d->database == MyDatabaseId && d->pid > 0)
			SetLatch(&ProcGlobal->allProcs[d->procno].procLatch);
	}
	LWLockRelease(ks_shared->lock);
}

/*
 * Asks the launcher to probe again the databases where it found no
 * extension (CREATE EXTENSION, CREATE DATABASE from a template that has
 * it), and wakes it.
 */
void
ks_request_rescan(void)
{
	if (ks_shared == NULL)
		return;
	LWLockAcquire(ks_shared->lock, LW_EXCLUSIVE);
	ks_shared->rescan = true;
	LWLockRelease(ks_shared->lock);
	ks_wake_launcher();
}

/*
 * The wake-up at the commit of the calling transaction, so that the
 * launcher and the scheduler see the change (a start, stop, alter or
 * drop; with rescan, a created extension or database) at once rather than
 * at their next nap, and never before it is visible.
 */
static bool wake_at_commit = false;
static bool rescan_at_commit = false;

static void
wake_xact_callback(XactEvent event, void *arg)
{
	(void) arg;
	if (event == XACT_EVENT_COMMIT && rescan_at_commit)
		ks_request_rescan();
	else if (event == XACT_EVENT_COMMIT && wake_at_commit)
		ks_wake_launcher();
	if (event == XACT_EVENT_COMMIT || event == XACT_EVENT_ABORT)
		wake_at_commit = rescan_at_commit = false;
}

void
ks_wake_launcher_at_commit(bool rescan)
{
	static bool registered = false;

	if (!registered)
	{
		RegisterXactCallback(wake_xact_callback, NULL);
		registered = true;
	}
	wake_at_commit = true;
	rescan_at_commit |= rescan;
}

/*
 * The fair part of kafka_sink.max_workers of database: max-min fairness
 * over the demands of the served databases (each already capped by
 * kafka_sink.max_workers_per_database), one slot at a time in turn, so a
 * database gets what it asks for when it asks for no more than an equal
 * part, and the slots others leave unused go to those that want more.
 * *ndatabases: how many databases share the slots.
 */
int
ks_database_share(Oid database, int *ndatabases)
{
	int			n = 0;
	int			total = 0;
	int			mine = -1;
	int			demand[1024];
	int			share[1024];
	bool		progress = true;

	LWLockAcquire(ks_shared->lock, LW_SHARED);
	for (int i = 0; i < ks_shared->ndbs && n < (int) lengthof(demand); i++)
	{
		KsDbSlot   *d = &KS_DBSLOTS()[i];

		if (d->state != KS_DB_STARTING && d->state != KS_DB_RUNNING)
			continue;
		if (d->database == database)
			mine = n;
		demand[n] = d->demand;
		share[n++] = 0;
	}
	LWLockRelease(ks_shared->lock);
	*ndatabases = n;
	if (mine < 0)
		return 0;
	while (progress && total < ks_shared->nslots)
	{
		progress = false;
		for (int i = 0; i < n && total < ks_shared->nslots; i++)
			if (share[i] < demand[i])
			{
				share[i]++;
				total++;
				progress = true;
			}
	}
	return share[mine];
}

/* True while a statement that needs database without connections runs. */
bool
ks_database_blocked(Oid database)
{
	bool		blocked = false;

	LWLockAcquire(ks_shared->lock, LW_SHARED);
	for (int i = 0; i < KS_MAX_BLOCKED; i++)
		if (ks_shared->blocked[i] == database)
			blocked = true;
	LWLockRelease(ks_shared->lock);
	return blocked;
}

/*
 * Sends SIGTERM to the scheduler and the workers of database; how many of
 * them hold an entry or a slot still (0: none is left).
 */
int
ks_database_signal(Oid database)
{
	pid_t		pids[1024 + 1];
	int			npids = 0;
	int			busy = 0;

	LWLockAcquire(ks_shared->lock, LW_SHARED);
	for (int i = 0; i < ks_shared->nslots; i++)
		if (ks_shared->slots[i].in_use && ks_shared->slots[i].database == database)
		{
			busy++;
			if (ks_shared->slots[i].pid > 0 && npids < (int) lengthof(pids))
				pids[npids++] = ks_shared->slots[i].pid;
		}
	for (int i = 0; i < ks_shared->ndbs; i++)
	{
		KsDbSlot   *d = &KS_DBSLOTS()[i];

		if (d->state == KS_DB_FREE || d->database != database || d->pid == 0)
			continue;
		busy++;
		if (npids < (int) lengthof(pids))
			pids[npids++] = d->pid;
	}
	LWLockRelease(ks_shared->lock);
	for (int i = 0; i < npids; i++)
		(void) kill(pids[i], SIGTERM);
	return busy;
}

/*
 * Empties database of kafka_sink's processes for DROP DATABASE, ALTER
 * DATABASE ... RENAME or SET TABLESPACE, and CREATE DATABASE ... TEMPLATE:
 * PostgreSQL refuses them while other sessions are connected to it (after
 * five seconds), and does not end background workers by itself.  The
 * database is blocked (no scheduler or worker starts in it) until
 * ks_database_unblock(); its scheduler and workers are sent SIGTERM until
 * they are gone (a worker that starts meanwhile does not attach, see
 * ks_slot_attach), for at most 10 s, after which the statement goes on and
 * reports whoever is still connected.
 */
void
ks_database_clear(Oid database)
{
	bool		added = false;

	if (ks_shared == NULL || !OidIsValid(database))
		return;
	LWLockAcquire(ks_shared->lock, LW_EXCLUSIVE);
	for (int i = 0; i < KS_MAX_BLOCKED && !added; i++)
		if (ks_shared->blocked[i] == InvalidOid)
		{
			ks_shared->blocked[i] = database;
			added = true;
		}
	LWLockRelease(ks_shared->lock);

	for (int round = 0; round < 100 && ks_database_signal(database) > 0; round++)
	{
		CHECK_FOR_INTERRUPTS();
		pg_usleep(100 * 1000L);
	}
}

/* The end of ks_database_clear(), whether the statement failed or not. */
void
ks_database_unblock(Oid database)
{
	if (ks_shared == NULL || !OidIsValid(database))
		return;
	LWLockAcquire(ks_shared->lock, LW_EXCLUSIVE);
	for (int i = 0; i < KS_MAX_BLOCKED; i++)
		if (ks_shared->blocked[i] == database)
		{
			ks_shared->blocked[i] = InvalidOid;
			break;
		}
	LWLockRelease(ks_shared->lock);
	ks_wake_launcher();
}

void
ks_slot_set_detail(int slot, const char *fmt,...)
{
	va_list		ap;
	char		buf[KS_DETAIL_LEN];

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);

	LWLockAcquire(ks_shared->lock, LW_EXCLUSIVE);
	strlcpy(ks_shared->slots[slot].detail, buf, KS_DETAIL_LEN);
	LWLockRelease(ks_shared->lock);
}

/*
 * Releases the slot of the exiting worker, and the partitions it showed in
 * kafka_sink.progress.
 */
static void
slot_release(int code, Datum arg)
{
	KsWorkerSlot *slot = &ks_shared->slots[DatumGetInt32(arg)];

	(void) code;
	LWLockAcquire(ks_shared->lock, LW_EXCLUSIVE);
	if (slot->in_use && slot->pid == MyProcPid)
	{
		slot->in_use = false;
		slot->pid = 0;
	}
	for (int i = 0; i < ks_shared->npartstats; i++)
		if (KS_PARTSTATS()[i].in_use && KS_PARTSTATS()[i].pid == MyProcPid)
			KS_PARTSTATS()[i].in_use = false;
	LWLockRelease(ks_shared->lock);
	ks_wake_launcher();
}

/*
 * Takes the slot the scheduler claimed for this worker.  False when it is
 * not ours (the scheduler gave up on it) or its database is blocked
 * (ks_database_clear): the worker then exits.
 */
bool
ks_slot_attach(int slot_no, Oid database, int64 pipeline_id, int worker_index)
{
	KsWorkerSlot *slot = &ks_shared->slots[slot_no];
	bool		ok = false;
	bool		blocked = false;

	LWLockAcquire(ks_shared->lock, LW_EXCLUSIVE);
	for (int i = 0; i < KS_MAX_BLOCKED; i++)
		if (ks_shared->blocked[i] == database)
			blocked = true;
	if (blocked && slot->in_use && slot->database == database && slot->pid == 0)
		slot->in_use = false;	/* its database is being dropped: give it back */
	else if (slot->in_use && slot->database == database && slot->pipeline_id == pipeline_id &&
		slot->worker_index == worker_index && slot->pid == 0)
	{
		slot->pid = MyProcPid;
		slot->procno = KS_MY_PROCNO();
		slot->started_at = GetCurrentTimestamp();
		slot->detail[0] = '\0';
		ok = true;
	}
	LWLockRelease(ks_shared->lock);
	if (ok)
		on_shmem_exit(slot_release, Int32GetDatum(slot_no));
	return ok;
}
