/*-------------------------------------------------------------------------
 *
 * shmem.h
 *		Shared memory (shmem.c): the worker slots, each worker's partition
 *		progress for kafka_sink.progress, the batch-id counters, the
 *		launcher's latch and the served databases (their schedulers, their
 *		demand for workers, the databases blocked by DROP DATABASE and the
 *		like).
 *
 *		Owns: the layout of kafka_sink's shared memory.  Must not: grow
 *		after start (its size is fixed when the postmaster starts).
 *
 *-------------------------------------------------------------------------
 */
#ifndef KS_SHMEM_H
#define KS_SHMEM_H

#include "kafka_sink.h"

#include "storage/lwlock.h"

#define KS_DETAIL_LEN 256

typedef struct KsWorkerSlot
{
	bool		in_use;
	Oid			database;
	int64		pipeline_id;
	Oid			owner;			/* the role the worker runs as; Invalid: the relay */
	int			worker_index;
	int			nworkers;
	int			generation;		/* of the definition the worker runs */
	pid_t		pid;			/* 0 while starting */
	TimestampTz started_at;
	TimestampTz last_batch_at;
	int64		last_batch_id;
	bool		paused;			/* set by the launcher for paused pipelines */
	int			procno;			/* the worker's PGPROC, to set its latch */
	bool		ready;			/* connected: records its own errors from now on */
	char		detail[KS_DETAIL_LEN];	/* e.g. "broker unreachable" */
} KsWorkerSlot;

/* What a worker knows about one of its partitions, for kafka_sink.progress. */
#define KS_TOPIC_LEN 256
typedef struct KsPartStat
{
	bool		in_use;
	Oid			database;
	int64		pipeline_id;
	Oid			owner;			/* the role the worker runs as */
	int			worker_index;
	pid_t		pid;
	char		topic[KS_TOPIC_LEN];
	int32		partition;
	int64		low;			/* log start offset, -1 when unknown */
	int64		high;			/* high watermark, -1 when unknown */
	TimestampTz watermarks_at;
	double		avg_bytes;		/* per message, moving average */
	double		rate;			/* messages per second, moving average */
	TimestampTz last_commit_at;
} KsPartStat;

/*
 * One database the launcher serves: its scheduler (scheduler.c) and how many
 * workers its pipelines want.  Written by the launcher (claiming, freeing)
 * and by the scheduler (pid, state, demand), under the lock.
 */
typedef enum KsDbState
{
	KS_DB_FREE = 0,				/* the entry is unused */
	KS_DB_STARTING,				/* the launcher registered its scheduler */
	KS_DB_RUNNING,				/* the scheduler reconciles its pipelines */
	KS_DB_NO_EXTENSION			/* the scheduler found no kafka_sink there */
} KsDbState;

typedef struct KsDbSlot
{
	Oid			database;
	KsDbState	state;
	pid_t		pid;			/* the scheduler, 0 when none runs */
	int			procno;
	int			demand;			/* workers wanted, capped per database */
} KsDbSlot;

/* databases that DROP DATABASE and the like are clearing of our workers */
#define KS_MAX_BLOCKED 16

typedef struct KsShared
{
	LWLock	   *lock;
	pid_t		launcher_pid;
	int			launcher_procno;
	bool		rescan;			/* probe the databases without the extension */
	int			ndbs;			/* KsDbSlot entries follow the partition stats */
	Oid			blocked[KS_MAX_BLOCKED];
	int			nslots;
	int			npartstats;		/* KsPartStat entries follow the slots */
	KsWorkerSlot slots[FLEXIBLE_ARRAY_MEMBER];
} KsShared;

#define KS_PARTSTATS() ((KsPartStat *) &ks_shared->slots[ks_shared->nslots])
#define KS_DBSLOTS() ((KsDbSlot *) &KS_PARTSTATS()[ks_shared->npartstats])

extern KsShared *ks_shared;

/*
 * The batch-id counters, one per pipeline with a running worker
 * (checkpoint.c hands the ids out; max(max_workers, 1) entries).
 */
typedef struct KsBatchIdEntry
{
	Oid			database;		/* pipeline ids are per database */
	int64		pipeline_id;	/* 0: free */
	int64		last;			/* the last id handed out */
} KsBatchIdEntry;

extern KsBatchIdEntry *ks_batch_ids;
extern void ks_shmem_init(void);
extern void ks_wake_launcher(void);
extern void ks_wake_launcher_at_commit(bool rescan);
extern void ks_request_rescan(void);
extern int	ks_database_share(Oid database, int *ndatabases);
extern bool ks_database_blocked(Oid database);
extern int	ks_database_signal(Oid database);
extern void ks_database_clear(Oid database);
extern void ks_database_unblock(Oid database);
extern bool ks_slot_attach(int slot_no, Oid database, int64 pipeline_id, int worker_index);
extern void ks_slot_set_detail(int slot, const char *fmt,...) pg_attribute_printf(2, 3);

#endif							/* KS_SHMEM_H */
