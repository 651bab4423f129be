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

/* ---- the pipeline definition (catalog.c) ---- */
typedef enum KsMode
{
	KS_MODE_MERGE,
	KS_MODE_APPEND,
	KS_MODE_FUNCTION
} KsMode;

typedef enum KsKeyFormat
{
	KS_KEY_NONE,				/* key columns come from the value */
	KS_KEY_STRING,				/* the message key is the (single) key column */
	KS_KEY_JSON,				/* the message key is a JSON object of key columns */
	KS_KEY_AVRO,				/* the message key is Avro (Confluent wire format) */
	KS_KEY_PROTOBUF				/* the message key is Protobuf (Confluent wire format) */
} KsKeyFormat;

/* A Confluent-compatible schema registry (schema_registry.c) */
typedef struct KsRegistryConf
{
	char	   *key;			/* the url option as written: the catalog's registry */
	List	   *urls;			/* of char *, tried in turn */
	char	   *userinfo;		/* basic.auth.user.info, a secret; NULL: none */
	char	   *ca_location;	/* ssl.ca.location, or NULL */
	int			timeout_ms;
	Oid			owner;			/* whose rights decide ssl.ca.location */
} KsRegistryConf;

/* A column mapping: column <- JSON path, for one schema version or all. */
typedef struct KsMapping
{
	char	   *version;		/* NULL: the default mapping */
	char	   *column;
	char	   *path;
	int			scale;			/* divide numbers by 10^scale */
} KsMapping;

/* envelope debezium: what a truncate event does */
typedef enum KsOnTruncate
{
	KS_TRUNCATE_APPLY,			/* delete the rows older than the truncate */
	KS_TRUNCATE_IGNORE,
	KS_TRUNCATE_FAIL			/* the pipeline fails */
} KsOnTruncate;

typedef struct KsOption
{
	char	   *name;
	char	   *value;
} KsOption;

struct KsFormat;
struct KsEnvelope;
struct KsRouting;

typedef struct KsPipeline
{
	int64		id;
	char	   *name;
	Oid			owner;
	char	   *state;
	char	   *bootstrap_servers;
	List	   *subscribe;		/* of char * */
	char	   *subscribe_pattern;
	List	   *assign;			/* of KsTopicPartition */
	Oid			target;
	List	   *key_columns;	/* of char * */
	char	   *order_column;
	KsMode		mode;
	Oid			batch_function;
	char	   *starting_offsets;
	bool		fail_on_data_loss;
	int64		max_offsets_per_batch;
	int64		max_batch_bytes;
	int			trigger_interval_ms;
	int64		min_offsets_per_batch;	/* 0: none */
	int64		max_trigger_delay_ms;
	int			workers;
	List	   *options;		/* of KsOption, secrets included */
	List	   *start_offsets;	/* of KsPartition: per-partition starting_offsets */
	List	   *mappings;		/* of KsMapping */
	List	   *versions;		/* of char *: the known schema versions */
	KsKeyFormat key_format;
	bool		delete_on_tombstone;
	char	   *schema_version_field;
	char	   *event_id;		/* JSON path of the producer's event id */
	int			event_id_retention_s;
	Oid			bronze;
	int64		start_ts_ms;	/* starting_offsets as a timestamp, in Unix ms */
	char	   *ending_offsets; /* NULL: unbounded; else a bounded (backfill) pipeline */
	List	   *end_offsets;	/* of KsPartition: per-partition ending_offsets */
	int64		end_ts_ms;
	char	   *dead_letter_topic;	/* NULL: none; else quarantined messages
									 * also go there through the outbox */
	/*
	 * how messages are read (format.h, envelope.h): the catalog's names,
	 * resolved by ks_load_pipeline (decode.c) into the formats and the
	 * envelope
	 */
	const char *value_format_name;
	const char *envelope_name;
	const struct KsFormat *value_fmt;
	const struct KsFormat *key_fmt; /* KS_KEY_JSON and KS_KEY_AVRO */
	const struct KsEnvelope *envelope;
	KsOnTruncate on_truncate;	/* envelope debezium */
	char	   *value_schema;	/* inline Avro writer schema, or NULL */
	KsRegistryConf *registry;	/* NULL: none */
	/* routing (route.c): one pipeline writing many tables */
	char	   *target_template;	/* a target with {placeholders}, or NULL */
	List	   *target_map;		/* of KsOption: topic or source schema.table
								 * -> table name; NIL: none */
	bool		create_targets;
	bool		evolve_add_columns;
	struct KsRouting *routing;	/* compiled on first use (route.c) */
} KsPipeline;

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

#endif							/* KAFKA_SINK_H */
