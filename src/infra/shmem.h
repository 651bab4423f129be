/*-------------------------------------------------------------------------
 *
 * shmem.h
 *		Shared memory (shmem.c): the worker slots, each worker's partition
 *		progress for kafka_sink.progress, the batch-id counters and the
 *		launcher's latch.
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

typedef struct KsShared
{
	LWLock	   *lock;
	pid_t		launcher_pid;
	int			launcher_procno;
	int			nslots;
	int			npartstats;		/* KsPartStat entries follow the slots */
	KsWorkerSlot slots[FLEXIBLE_ARRAY_MEMBER];
} KsShared;

#define KS_PARTSTATS() ((KsPartStat *) &ks_shared->slots[ks_shared->nslots])

extern KsShared *ks_shared;

/*
 * The batch-id counters, one per pipeline with a running worker
 * (checkpoint.c hands the ids out; max(max_workers, 1) entries).
 */
typedef struct KsBatchIdEntry
{
	int64		pipeline_id;	/* 0: free */
	int64		last;			/* the last id handed out */
} KsBatchIdEntry;

extern KsBatchIdEntry *ks_batch_ids;
extern void ks_shmem_init(void);
extern void ks_wake_launcher(void);
extern bool ks_slot_attach(int slot_no, int64 pipeline_id, int worker_index);
extern void ks_slot_set_detail(int slot, const char *fmt,...) pg_attribute_printf(2, 3);

#endif							/* KS_SHMEM_H */
