/*-------------------------------------------------------------------------
 *
 * kafka_sink.h
 *		Types and entry points shared by the modules of kafka_sink.
 *
 * Only consumer.c includes rdkafka.h; everything else sees Kafka through
 * the plain structs declared here.
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

#include "jsonwalk.h"

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
extern char *ks_outbox_servers;
extern int	ks_outbox_retention_s;
extern int	ks_keep_batches_for_s;

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
	KS_KEY_AVRO					/* the message key is Avro (Confluent wire format) */
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

struct KsFormat;
struct KsAvroSchema;

/* A column mapping: column <- JSON path, for one schema version or all. */
typedef struct KsMapping
{
	char	   *version;		/* NULL: the default mapping */
	char	   *column;
	char	   *path;
	int			scale;			/* divide numbers by 10^scale */
} KsMapping;

typedef struct KsOption
{
	char	   *name;
	char	   *value;
} KsOption;

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
	/* formats (format.h): value_format, key_format avro, their schemas */
	const struct KsFormat *value_fmt;
	const struct KsFormat *key_fmt; /* KS_KEY_JSON and KS_KEY_AVRO */
	char	   *value_schema;	/* inline Avro writer schema, or NULL */
	KsRegistryConf *registry;	/* NULL: none */
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

/* ---- catalog.c ---- */
extern void ks_xact_begin(const char *activity);
extern void ks_xact_commit(void);
extern KsPipeline *ks_load_pipeline(int64 pipeline_id, MemoryContext mcxt);
extern char *ks_pipeline_state(int64 pipeline_id);
extern bool ks_load_offsets(int64 pipeline_id, KsPartition *parts, int nparts);
extern void ks_insert_initial_offsets(int64 pipeline_id, KsPartition *parts, int nparts);
extern bool ks_pipeline_has_offsets(int64 pipeline_id);
extern void ks_record_error(int64 pipeline_id, const char *kind, int sqlerrcode,
							const char *message, const char *detail);
extern void ks_set_state(int64 pipeline_id, const char *state);
extern ErrorData *ks_try_subxact(void (*fn) (void *arg), void *arg);

/* ---- catalog_guard.c ---- */
extern int	ks_catalog_writes_raise(void);
extern int	ks_catalog_writes_suspend(void);
extern void ks_catalog_writes_restore(int saved);
extern void ks_catalog_writes_for_worker(void);
extern void ks_catalog_guard_init(void);

/* ---- offsets.c: the one parser of offsets specs ---- */
typedef enum KsSpecKind
{
	KS_SPEC_EARLIEST,
	KS_SPEC_LATEST,
	KS_SPEC_TIMESTAMP,
	KS_SPEC_PARTITIONS
} KsSpecKind;

extern KsSpecKind ks_parse_offsets_spec(const char *spec, const char *what,
										List **per_partition, int64 *ts_ms);
extern PGDLLEXPORT Datum kafka_sink_check_offsets(PG_FUNCTION_ARGS);

/* ---- consumer.c ---- */
typedef struct KsConsumer KsConsumer;

typedef enum KsEventKind
{
	KS_EV_NONE,
	KS_EV_MESSAGE,
	KS_EV_EOF,
	KS_EV_OUT_OF_RANGE,
	KS_EV_ERROR
} KsEventKind;

typedef struct KsEvent
{
	KsEventKind kind;
	KsMessage	msg;			/* for KS_EV_MESSAGE; topic/partition/offset for others */
	bool		fatal;
	char		errstr[512];
} KsEvent;

extern KsConsumer *ks_consumer_create(KsPipeline *pipeline, const char *group_suffix);
extern void ks_consumer_destroy(KsConsumer *c);
extern int	ks_consumer_fd(KsConsumer *c);
extern void ks_consumer_drain_fd(KsConsumer *c);
extern bool ks_consumer_poll(KsConsumer *c, KsEvent *ev);
extern void ks_message_release(KsMessage *msg);
extern void ks_consumer_serve(KsConsumer *c);
extern List *ks_consumer_list_partitions(KsConsumer *c, List *topics, const char *pattern,
										 int timeout_ms, char **errmsg);
extern bool ks_consumer_watermarks(KsConsumer *c, const char *topic, int32 partition,
								   int64 *low, int64 *high, int timeout_ms, char **errmsg);
extern bool ks_consumer_offset_for_time(KsConsumer *c, const char *topic, int32 partition,
										int64 ts_ms, int64 *offset, int timeout_ms, char **errmsg);
extern void ks_consumer_assign(KsConsumer *c, KsPartition *parts, int nparts);
extern void ks_consumer_emit_logs(void);
extern bool ks_consumer_cached_watermarks(KsConsumer *c, const char *topic, int32 partition,
										  int64 *low, int64 *high);
extern bool ks_consumer_take_error(char *buf, size_t len);
extern char *ks_message_headers_json(KsMessage *msg);
extern void ks_check_options(List *options);
extern const char *ks_librdkafka_version(void);
extern char *ks_librdkafka_features(void);

extern const char *ks_consumer_mirror_group(KsConsumer *c);
extern bool ks_consumer_mirror_send(KsConsumer *c, KsPartition *parts, int nparts);
extern int	ks_consumer_mirror_result(KsConsumer *c, char *err, size_t errlen);
extern bool ks_consumer_mirror_pending(KsConsumer *c);
typedef struct KsProducer KsProducer;

/* A Kafka header with bytes for a value (NULL: a header without value). */
typedef struct KsHeader
{
	char	   *name;
	char	   *value;
	size_t		value_len;
} KsHeader;

typedef struct KsOutMsg
{
	const char *topic;
	const char *key;
	size_t		key_len;
	const char *value;
	size_t		value_len;
	List	   *raw_headers;	/* of KsHeader, sent first */
	List	   *headers;		/* of KsOption, sent after raw_headers */
	/* set by ks_producer_send_all */
	bool		done;
	int			err;
	char		errstr[256];
	int32		partition_out;
	int64		offset_out;
} KsOutMsg;

extern KsProducer *ks_producer_create(const char *servers, List *options);
extern List *ks_message_headers(KsMessage *msg);
extern void ks_producer_send_all(KsProducer *p, KsOutMsg *msgs, int n, int timeout_ms);
extern void ks_produce(const char *servers, const char *topic,
					   const char *key, size_t key_len, const char *value, size_t value_len,
					   List *headers, int32 partition, int32 *out_partition, int64 *out_offset);

/* ---- decode.c ---- */
typedef struct KsColumn
{
	char	   *name;
	AttrNumber	attnum;
	Oid			typid;
	int32		typmod;
	Oid			collation;
	FmgrInfo	infunc;
	Oid			ioparam;
	bool		required;		/* NOT NULL without default */
	bool		is_key;
	bool		is_order;
	char	   *default_sql;	/* deparsed default, or NULL */
	char	   *type_sql;		/* format_type_with_typemod */
	bool		is_json;		/* json/jsonb: take the raw JSON text */
	bool		is_numeric;
	bool		is_array;		/* an array type (or a domain over one) */
	bool		elem_is_json;	/* ... of json or jsonb */
	const char *lineage;		/* for _kafka_* columns: the source expression */
	int			prov;			/* merge with an order column, optional column:
								 * index of its supplier-order column, else -1 */
	/* key columns: how the key index compares them (its opclass, collation) */
	Oid			key_collation;
	Oid			key_eq_opr;
	Oid			key_lt_opr;
} KsColumn;

typedef struct KsTarget
{
	Oid			relid;
	char	   *qualified_name;
	int			ncolumns;
	KsColumn   *columns;
	int			nkeys;
	int		   *key_index;		/* into columns */
	int			order_index;	/* -1 when none */
	char	   *key_index_name;	/* the unique index over the key columns */
	int			nprov;			/* supplier-order columns of the batch rows */
	Oid			rowtype;
	int			natts_all;
	char	   *row_sql;		/* ROW(...) of the row type, for function mode */
	/* decoding: JSON paths captured in one pass, and which column takes which */
	KsWalkPaths walk;
	int		   *map;			/* default mapping: column -> slot, or -1 */
	int		   *alt;			/* default-mapped name with dots: its nested
								 * path's slot when the field is absent, or -1 */
	int		   *scale;
	int			nversions;
	char	  **version_names;
	int		  **vmap;
	int		  **vscale;
	int			version_slot;
	int			event_id_slot;
	KsWalkPaths key_walk;		/* key_format json: one slot per key column */
	bool	   *pg_array;		/* per slot of walk: an array column takes it */
	bool	   *key_pg_array;	/* per slot of key_walk */
} KsTarget;

typedef enum KsReason
{
	KS_OK = 0,
	KS_INVALID_JSON,
	KS_NOT_AN_OBJECT,
	KS_MISSING_REQUIRED_FIELD,
	KS_INVALID_VALUE,
	KS_UNKNOWN_SCHEMA_VERSION,
	KS_NULL_KEY,
	KS_CONSTRAINT_VIOLATION,
	KS_VALUE_TOO_LARGE,
	KS_REJECTED_BY_TARGET,		/* a trigger, RLS policy or check option said no */
	KS_UNKNOWN_SCHEMA_ID,		/* the registry does not know the frame's schema id */
	KS_NOT_WIRE_FORMAT,			/* no magic byte 0 and schema id */
	KS_INVALID_AVRO				/* the payload does not decode with its schema */
} KsReason;

/* A decoded message: one value per target column. */
typedef struct KsRow
{
	KsMessage  *msg;
	bool		is_delete;		/* a tombstone with delete_on_tombstone */
	bool		duplicate;		/* its event id was applied before */
	char	   *event_id;
	Datum	   *values;
	bool	   *nulls;
	bool	   *present;
	KsReason	reason;
	char	   *detail;
	uint32		hash;
	int			next_candidate; /* reduce bookkeeping */
	bool		winner;
	int		   *fold_src;		/* a winner folding several messages: per
								 * column, the row supplying it (-1 absent);
								 * NULL: the row alone */
} KsRow;

extern KsTarget *ks_target_open(KsPipeline *p);
extern const char *ks_reason_name(KsReason r);
extern void ks_decode_batch(KsTarget *t, KsPipeline *p, KsRow *rows, int nrows);
extern PGDLLEXPORT Datum kafka_sink_json_path_valid(PG_FUNCTION_ARGS);

/* ---- apply.c ---- */
typedef struct KsBatchStats
{
	int64		messages;
	int64		inserted;
	int64		updated;
	int64		deleted;
	int64		stale;
	int64		superseded;
	int64		quarantined;
	int64		duplicates;
	int64		bytes;
} KsBatchStats;

typedef struct KsBatch
{
	KsPipeline *pipeline;
	KsTarget   *target;
	int			worker_index;
	KsPartition *parts;
	int			nparts;
	KsMessage **msgs;
	int			nmsgs;
	KsRow	   *rows;
	TimestampTz started_at;
	int64		batch_id;
	KsBatchStats stats;
	/* timing, for the progress record */
	TimestampTz previous_commit_at;
	TimestampTz fetch_started_at;
	TimestampTz fetch_ended_at;
	double		decode_ms;
	double		apply_ms;
	TimestampTz commit_started_at;
} KsBatch;

extern void ks_apply_batch(KsBatch *batch);
extern PGDLLEXPORT Datum kafka_sink_batch_rows(PG_FUNCTION_ARGS);
extern PGDLLEXPORT Datum kafka_sink_batch_messages(PG_FUNCTION_ARGS);
extern PGDLLEXPORT Datum kafka_sink_replay(PG_FUNCTION_ARGS);
extern PGDLLEXPORT Datum kafka_sink_pipeline_statements(PG_FUNCTION_ARGS);

/* ---- sqlcall.c: checks of the SQL-callable functions ---- */
typedef struct KsSrfColumn
{
	const char *name;
	Oid			typid;
	int32		typmod;
} KsSrfColumn;

/* a C function called where it cannot work (see ks_require_batch) */
#define KS_ERRCODE_WRONG_CONTEXT ERRCODE_FEATURE_NOT_SUPPORTED

extern void ks_srf_check_context(FunctionCallInfo fcinfo, const char *fname);
extern void ks_srf_check_record(FunctionCallInfo fcinfo, const char *fname,
								const KsSrfColumn *cols, int ncols);
extern void ks_require_batch(bool in_progress, const char *fname, const char *what);
extern bool ks_in_own_worker(void);
extern bool ks_may_see_owner(Oid owner);

/* ---- workers ---- */
extern void ks_launcher_register(void);
PGDLLEXPORT void ks_launcher_main(Datum arg);
PGDLLEXPORT void ks_worker_main(Datum arg);
PGDLLEXPORT void ks_relay_main(Datum arg);

/* The slot of the outbox relay carries this in place of a pipeline id. */
#define KS_RELAY_ID (-1)

typedef struct KsWorkerArgs
{
	Oid			database;
	Oid			owner;
	int64		pipeline_id;
	int			slot;
	int			worker_index;
	int			nworkers;
} KsWorkerArgs;

#endif							/* KAFKA_SINK_H */
