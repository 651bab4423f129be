/*-------------------------------------------------------------------------
 *
 * kafka_sink.h
 *		What every module of kafka_sink needs: the GUCs and fault points,
 *		shared memory, the pipeline definition, a partition and a message
 *		as the extension sees them, the catalog-write guard, and a few
 *		conversions.  Everything else has its module's header (src/<module>.h,
 *		one per stage); Kafka is seen through consumer.h and producer.h,
 *		rdkafka.h only by consumer.c and producer.c (kafka_client.h).
 *
 *-------------------------------------------------------------------------
 */
#ifndef KAFKA_SINK_H
#define KAFKA_SINK_H

#include "postgres.h"

#include "access/attnum.h"
#include "datatype/timestamp.h"
#include "fmgr.h"
#include "nodes/pg_list.h"
#include "storage/lwlock.h"

#define KS_EXTENSION_NAME "kafka_sink"

/* API differences across the supported PostgreSQL versions (15 to 18) */
#include "compat.h"
#define KS_SCHEMA "kafka_sink"

/* ---- guc.c ---- */
extern char *ks_database;
extern int	ks_max_workers;
extern int	ks_launcher_naptime_ms;
extern int	ks_metadata_refresh_ms;
extern int	ks_fault_point;
extern int	ks_fault_action;
extern bool ks_allow_superuser_pipelines;
extern int	ks_max_message_bytes;
extern int	ks_max_partitions;
extern int	ks_keep_batches;
extern bool ks_direct_values;
extern char *ks_outbox_servers;
extern int	ks_outbox_retention_s;
extern int	ks_max_outbox_hops;
extern int	ks_keep_batches_for_s;
extern int	ks_max_new_columns;
extern int	ks_ddl_lock_timeout_ms;
extern int	ks_apply_strategy;	/* KsApplyStrategyChoice */

/* kafka_sink.apply_strategy: how merge-mode batches are written (apply.c) */
typedef enum KsApplyStrategyChoice
{
	KS_APPLY_STRATEGY_SQL = 0,	/* always the MERGE through SPI */
	KS_APPLY_STRATEGY_AUTO		/* the heap strategy where it is exact (the
								 * default) */
} KsApplyStrategyChoice;

typedef enum KsFaultPoint
{
	KS_FAULT_NONE = 0,
	KS_FAULT_AFTER_FETCH,
	KS_FAULT_AFTER_DECODE,
	KS_FAULT_AFTER_MERGE,
	KS_FAULT_BEFORE_COMMIT,
	KS_FAULT_AFTER_COMMIT,
	KS_FAULT_BEFORE_CONNECT		/* at start, before the worker can record errors */
} KsFaultPoint;

typedef enum KsFaultAction
{
	KS_FAULT_ACTION_FATAL = 0,
	KS_FAULT_ACTION_SIGKILL
} KsFaultAction;

extern void ks_guc_init(void);
extern void ks_fault(KsFaultPoint point);

/* ---- shmem.c ---- */
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

typedef struct KsTopicPartition
{
	char	   *topic;
	int32		partition;
} KsTopicPartition;

/* One partition owned by a worker, with its checkpoint and batch range. */
typedef struct KsPartition
{
	char	   *topic;
	int32		partition;
	int64		committed;		/* next offset according to the catalog */
	int64		end;			/* next offset after the current batch */
	int64		messages;		/* messages in the current batch */
	int64		bytes;			/* their key and value bytes */
	int			stat;			/* index into KS_PARTSTATS(), or -1 */
	int64		latest;			/* cached high watermark when the batch closed */
	int64		end_offset;		/* bounded pipelines: stop before this offset; -1 none */
	bool		loss;			/* data loss found in this batch */
	int64		loss_expected;
	int64		loss_available;
	bool		seen;			/* still present in the latest metadata */
} KsPartition;

/* A message as the rest of the extension sees it. */
typedef struct KsMessage
{
	const char *topic;
	int32		partition;
	int64		offset;
	const char *key;			/* NULL when the message has no key */
	size_t		key_len;
	const char *value;			/* NULL for a tombstone */
	size_t		value_len;
	int64		timestamp_ms;	/* -1 when unknown */
	int			part_index;		/* index into the worker's partitions */
	void	   *handle;			/* rd_kafka_message_t, owned by consumer.c */
} KsMessage;

/* ---- catalog_guard.c ---- */
extern int	ks_catalog_writes_raise(void);
extern int	ks_catalog_writes_suspend(void);
extern void ks_catalog_writes_restore(int saved);
extern void ks_catalog_writes_for_worker(void);
extern bool ks_catalog_writes_allowed(void);
extern void ks_catalog_guard_init(void);

/* ---- role_guard.c ---- */
struct DropRoleStmt;
extern void ks_role_guard_check_drop(struct DropRoleStmt *stmt);

/* ---- small conversions everyone needs ---- */

/* Unix epoch milliseconds (Kafka's timestamps) <-> TimestampTz */
static inline TimestampTz
ks_epoch_ms_to_timestamptz(int64 ms)
{
	return (TimestampTz) (ms / 1000 - (int64) (POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) * SECS_PER_DAY) *
		USECS_PER_SEC + (ms % 1000) * 1000;
}

static inline int64
ks_timestamptz_to_epoch_ms(TimestampTz ts)
{
	return ts / 1000 + (int64) (POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) * SECS_PER_DAY * 1000;
}

/* bytes as a bytea datum */
static inline Datum
ks_bytea_datum(const char *data, size_t len)
{
	bytea	   *b = palloc(VARHDRSZ + len);

	SET_VARSIZE(b, VARHDRSZ + len);
	memcpy(VARDATA(b), data, len);
	return PointerGetDatum(b);
}

/* the pipeline definition, for now included by everyone (catalog/pipeline.h) */
#include "pipeline.h"

#endif							/* KAFKA_SINK_H */
