/*-------------------------------------------------------------------------
 *
 * shmem.c
 *		Shared memory: the worker slots and the launcher's address.
 *
 * A slot is the truth about a running pipeline worker: the launcher claims
 * it before registering the worker, and the worker releases it when it
 * exits.  A crash of any backend reinitializes shared memory, so no slot
 * can outlive its worker.
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

static Size
ks_shmem_size(void)
{
	return add_size(add_size(offsetof(KsShared, slots),
							 mul_size(ks_max_workers, sizeof(KsWorkerSlot))),
					mul_size(ks_max_partitions, sizeof(KsPartStat)));
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

/* Wakes the launcher so that it reconciles now rather than at its next nap. */
void
ks_wake_launcher(void)
{
	int			procno;

	if (ks_shared == NULL)
		return;
	LWLockAcquire(ks_shared->lock, LW_SHARED);
	procno = ks_shared->launcher_procno;
	if (procno >= 0)
		SetLatch(&ProcGlobal->allProcs[procno].procLatch);
	LWLockRelease(ks_shared->lock);
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
 * Takes the slot the launcher claimed for this worker.  False when it is
 * not ours (the launcher gave up on it): the worker then exits.
 */
bool
ks_slot_attach(int slot_no, int64 pipeline_id, int worker_index)
{
	KsWorkerSlot *slot = &ks_shared->slots[slot_no];
	bool		ok = false;

	LWLockAcquire(ks_shared->lock, LW_EXCLUSIVE);
	if (slot->in_use && slot->pipeline_id == pipeline_id &&
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
