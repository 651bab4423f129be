/*-------------------------------------------------------------------------
 *
 * pipeline.h
 *		A pipeline's definition as the worker holds it, loaded from
 *		kafka_sink.pipeline_definitions by ks_catalog_load_pipeline
 *		(catalog.c), grouped into the parts that use it: where messages come
 *		from (source), how they are read (contract), where rows go
 *		(targets), when a batch closes (batching) and whose rights and
 *		secrets the pipeline carries (security).
 *
 *		Owns: the types of the definition.  Must not: hold state of a
 *		running batch (worker.h, apply.h) or code.  The decoders' and the
 *		router's compiled forms are opaque pointers here; their types are in
 *		format.h, envelope.h and route.h.
 *
 *-------------------------------------------------------------------------
 */
#ifndef KS_PIPELINE_H
#define KS_PIPELINE_H

#include "kafka_sink.h"
#include "secret_ref.h"

#include "nodes/pg_list.h"

typedef enum KsMode
{
	KS_MODE_MERGE,
	KS_MODE_APPEND,
	KS_MODE_FUNCTION,
	KS_MODE_HISTORY				/* one row per version of a key (history.c) */
} KsMode;

/* mode merge: what an event does to its key (docs/write-modes.md) */
typedef enum KsWriteMode
{
	KS_WRITE_UPSERT,			/* insert or update under the ordering guard */
	KS_WRITE_INSERT_ONLY,		/* the first event of a key wins */
	KS_WRITE_UPDATE_ONLY		/* keys not in the target are skipped */
} KsWriteMode;

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
	KsSecretRef userinfo_ref;	/* userinfo is a variable or a path */
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

/* KsOption (a name and a value: librdkafka options, the targets map) is in secret_ref.h */
struct KsFormat;
struct KsEnvelope;
struct KsRouting;

/*
 * Where messages come from and where reading starts and ends: the
 * consumer (consumer.c) and the assignment (assignment.c) read it.
 */
typedef struct KsSource
{
	char	   *bootstrap_servers;
	/* exactly one of the three is set */
	List	   *subscribe;		/* of char * */
	char	   *subscribe_pattern;
	List	   *assign;			/* of KsTopicPartition */
	char	   *starting_offsets;	/* the spec as written (offsets.c) */
	List	   *start_offsets;	/* of KsPartition: per-partition starting_offsets */
	int64		start_ts_ms;	/* starting_offsets as a timestamp, in Unix ms */
	char	   *ending_offsets; /* NULL: unbounded; else a bounded (backfill) pipeline */
	List	   *end_offsets;	/* of KsPartition: per-partition ending_offsets */
	int64		end_ts_ms;
	bool		fail_on_data_loss;
} KsSource;

/*
 * How a message is read (format.h, envelope.h, decode.h, target.c): the
 * formats, the envelope, the mappings of fields to columns, the event id.
 * The catalog's names are resolved by ks_load_pipeline (decode.c) into
 * value_fmt, key_fmt and envelope.
 */
typedef struct KsContract
{
	const char *value_format_name;
	const char *envelope_name;
	const struct KsFormat *value_fmt;
	const struct KsFormat *key_fmt; /* KS_KEY_JSON and KS_KEY_AVRO */
	const struct KsEnvelope *envelope;
	KsKeyFormat key_format;
	char	   *value_schema;	/* inline Avro writer schema, or NULL */
	KsRegistryConf *registry;	/* NULL: none */
	List	   *mappings;		/* of KsMapping */
	List	   *versions;		/* of char *: the known schema versions */
	char	   *schema_version_field;
	char	   *event_id;		/* JSON path of the producer's event id */
	int			event_id_retention_s;
	bool		delete_on_tombstone;
	KsOnTruncate on_truncate;	/* envelope debezium */
	char	   *unavailable_placeholder;	/* envelope debezium: the
											 * connector's own
											 * unavailable.value.placeholder,
											 * or NULL (its default) */
} KsContract;

/*
 * Where rows go and how they are written (apply/, route.c): one target or
 * a routing rule, the key and ordering, the mode, the bronze table and the
 * dead-letter topic.
 */
typedef struct KsTargets
{
	Oid			target;			/* InvalidOid when routed */
	List	   *key_columns;	/* of char * */
	char	   *order_column;
	KsMode		mode;
	Oid			batch_function;
	Oid			bronze;
	char	   *dead_letter_topic;	/* NULL: none; else quarantined messages
									 * also go there through the outbox */
	/* routing (route.c): one pipeline writing many tables */
	char	   *target_template;	/* a target with {placeholders}, or NULL */
	List	   *target_map;		/* of KsOption: topic or source schema.table
								 * -> table name; NIL: none */
	bool		create_targets;
	bool		evolve_add_columns;
	bool		soft_delete;	/* delete_mode soft: a delete marks the row
								 * (docs/soft-deletes.md) */
	KsWriteMode write_mode;		/* mode merge: upsert, insert_only or
								 * update_only (docs/write-modes.md) */
	List	   *track_history;	/* mode history: of char *, the columns whose
								 * change starts a version; NIL: every column
								 * (docs/history.md) */
	struct KsRouting *routing;	/* compiled on first use (route.c) */
	/* the declarative transform (transform.c): NULL and NIL when none */
	char	   *filter;			/* a boolean SQL expression over the row */
	List	   *computed;		/* of KsOption: column -> SQL expression,
								 * in the order of the column names */
} KsTargets;

/* When a batch closes (fill.c, consumer.c) and how many workers read. */
typedef struct KsBatching
{
	int64		max_offsets_per_batch;
	int64		max_batch_bytes;
	int			trigger_interval_ms;
	int64		min_offsets_per_batch;	/* 0: none */
	int64		max_trigger_delay_ms;
	int			workers;
} KsBatching;

/*
 * Whose rights the pipeline runs with and its librdkafka options, secrets
 * (kafka_sink.secrets) included: checked by ks_options_check
 * (kafka_options.c) against the owner, never logged.
 */
typedef struct KsSecurity
{
	Oid			owner;
	List	   *options;		/* of KsOption, secrets included */
} KsSecurity;

typedef struct KsPipeline
{
	int64		id;
	char	   *name;
	char	   *state;
	KsSource	source;
	KsContract	contract;
	KsTargets	targets;
	KsBatching	batching;
	KsSecurity	security;
	int32		generation;		/* of the definition loaded: a batch of the
								 * worker commits only while it is current
								 * (ks_catalog_batch_id_floor) */
} KsPipeline;

#endif							/* KS_PIPELINE_H */
