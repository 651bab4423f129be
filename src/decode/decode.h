/*-------------------------------------------------------------------------
 *
 * decode.h
 *		Decoding (decode.c): the target's columns as the decoder sees them,
 *		the decoded row, the quarantine reasons, and the conversion of
 *		field values into column values that every format and envelope
 *		shares.
 *
 *		Owns: KsColumn, KsTarget, KsRow, KsReason and decode.c's
 *		declarations.  Must not: declare a format's or an envelope's calls
 *		(format.h, envelope.h) or open the target (target.h).
 *
 *-------------------------------------------------------------------------
 */
#ifndef KS_DECODE_H
#define KS_DECODE_H

#include "kafka_sink.h"
#include "pipeline.h"
#include "jsonwalk.h"
#include "meta.h"
#include "citus.h"

#include "access/attnum.h"

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
	bool		default_immutable;	/* ... an immutable one (a constant) */
	char	   *type_sql;		/* format_type_with_typemod */
	bool		is_json;		/* json/jsonb: take the raw JSON text */
	bool		is_numeric;
	bool		is_array;		/* an array type (or a domain over one) */
	bool		elem_is_json;	/* ... of json or jsonb */
	const char *lineage;		/* for _kafka_* columns: the source expression */
	char		history;		/* mode history's version columns: 'f'
								 * _valid_from, 't' _valid_to, 'd' _deleted,
								 * 'c' _is_current, 'p' _fields, 's'
								 * _states, 'F' _valid_from_at, 'T'
								 * _valid_to_at; else 0 */
	bool		tracked;		/* mode history with track_history_columns:
								 * one of them */
	char		soft;			/* delete_mode soft: 'd' _deleted, 'a'
								 * _deleted_at, the mark (statements.c);
								 * else 0 */
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
	KsCitusKind citus;			/* a Citus table: the Citus apply path
								 * (apply_sql.c), never the heap strategy */
	bool		soft_only;		/* 16+: every column's input reports bad
								 * input softly: decoding needs no
								 * subtransaction (target.c) */
	char	   *qualified_name;
	int			ncolumns;
	KsColumn   *columns;
	int			nkeys;
	int		   *key_index;		/* into columns */
	int			order_index;	/* -1 when none */
	bool		cdc;			/* envelope debezium: the order column is the
								 * source position, deletes and truncates are
								 * guarded by it (cdc_guard.c) */
	char	   *key_index_name;	/* the unique index over the key columns */
	bool		history;		/* mode history: the batch rows carry _ks_del */
	bool		track;			/* ... with track_history_columns: the
								 * versions keep their states in _states */
	int			at_index;		/* ... of change events: _valid_from_at (the
								 * event's commit time, decoded into it), or
								 * -1 */
	bool		soft;			/* delete_mode soft: deletes mark the row */
	int			soft_deleted;	/* its _deleted column, or -1 */
	int			soft_deleted_at;	/* its _deleted_at column, or -1 */
	KsWriteMode write_mode;		/* mode merge: docs/write-modes.md */
	int			lineage_partition;	/* its _kafka_partition column, or -1 */
	int			lineage_offset;	/* its _kafka_offset column, or -1 */
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
	KsMeta	   *meta;			/* per slot of walk: the header or Kafka
								 * metadata it names (meta.c), filled from
								 * the message after the format; NULL when
								 * no slot names any */
	KsWalkPaths key_walk;		/* key_format json or avro: one slot per key column */
	bool	   *pg_array;		/* per slot of walk: an array column takes it */
	bool	   *key_pg_array;	/* per slot of key_walk */
	Oid		   *direct;			/* per slot of walk: the column type Avro
								 * values are built as directly, or 0 */
	Oid		   *key_direct;		/* per slot of key_walk */
	/*
	 * key_format json: a key wrapped by JsonConverter (schemas.enable) as
	 * {"schema":..., "payload":...}: key column k's slot under payload,
	 * and the slots of the top-level "schema" and "payload" (all -1 when
	 * not key_format json)
	 */
	int		   *key_alt;
	int			key_schema_slot;
	int			key_payload_slot;
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
	KS_INVALID_AVRO,			/* the payload does not decode with its schema */
	KS_INVALID_ENVELOPE,		/* a change event without a known op or its row */
	KS_NO_TARGET,				/* routing: no target named, or it does not exist */
	KS_TARGET_REFUSED,			/* routing: the target may not be written */
	KS_SCHEMA_CHANGE_REFUSED,	/* evolve: a change kafka_sink will not make */
	KS_DEAD_LETTER_LOOP,		/* came through the outbox too often (hops.c) */
	KS_NO_PARTITION				/* a partitioned target has no partition for the row */,
	KS_INVALID_PROTOBUF,		/* the payload does not decode with its schema */
	KS_EXPRESSION_ERROR			/* the filter or a computed column raised (transform.c) */
} KsReason;

/* A decoded message: one value per target column. */
typedef struct KsRow
{
	KsMessage  *msg;
	const char *target_name;	/* routing: the target it went (or would go) to */
	bool		is_delete;		/* a tombstone with delete_on_tombstone, or a
								 * change event's delete (the key, and the
								 * position in the order column) */
	bool		is_truncate;	/* a change event's truncate of the target:
								 * no key; the position in the order column */
	bool		skipped;		/* nothing to apply (the tombstone after a
								 * delete, an ignored truncate) */
	bool		duplicate;		/* its event id was applied before */
	bool		filtered;		/* the pipeline's filter left it out (transform.c) */
	char	   *revived;		/* delete_mode soft: it brought its key's marked
								 * row back (apply_sql.c): what that row held to
								 * order by ("" when unknown), else NULL */
	char	   *event_id;
	Datum	   *values;
	bool	   *nulls;
	bool	   *present;
	KsReason	reason;
	char	   *detail;
	uint32		hash;
	int			next_candidate; /* reduce bookkeeping */
	bool		soft_seen;		/* delete_mode soft: in this segment round */
	bool		soft_done;		/* ... applied in an earlier one (apply.c) */
	bool		winner;
	int		   *fold_src;		/* a winner folding several messages: per
								 * column, the row supplying it (-1 absent);
								 * NULL: the row alone */
} KsRow;

/* decode.c */
extern KsPipeline *ks_load_pipeline(int64 pipeline_id, MemoryContext mcxt);
extern const char *ks_reason_name(KsReason r);
extern void ks_row_init(KsTarget *t, KsRow *row);
extern bool ks_row_too_large(KsRow *row);
extern void ks_decode_key(KsTarget *t, KsPipeline *p, KsRow *row);
extern void ks_convert_field(KsTarget *t, KsRow *row, int c, KsSlotValue *f);
extern bool ks_convert_meta_column(KsTarget *t, KsRow *row, int c);
extern void ks_decode_fields(KsTarget *t, KsPipeline *p, KsRow *row, KsSlotValue *slots);
extern void ks_decode_batch(KsTarget *t, KsPipeline *p, KsRow *rows, int nrows);
extern PGDLLEXPORT Datum kafka_sink_json_path_valid(PG_FUNCTION_ARGS);

#endif							/* KS_DECODE_H */
