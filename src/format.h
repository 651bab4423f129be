/*-------------------------------------------------------------------------
 *
 * format.h
 *		Message formats: how the bytes of a message value or key become the
 *		field-path slots that decode.c converts into columns.
 *
 * A format is one entry of the table in format.c: a name (what
 * create_pipeline's value_format and key_format say) and a decode
 * function.  decode.c calls only ks_format_decode; everything after the
 * slots (schema versions, scales, the column types' input functions,
 * required columns) is shared by every format.  A new format (Protobuf,
 * see docs/design-notes.md) is a new file and one line in that table.
 *
 *-------------------------------------------------------------------------
 */
#ifndef KS_FORMAT_H
#define KS_FORMAT_H

#include "kafka_sink.h"

typedef struct KsFormatCall
{
	KsTarget   *t;
	KsPipeline *p;
	bool		is_key;
	const KsWalkPaths *walk;	/* the paths to capture */
	const bool *pg_array;		/* per slot: an array column takes it, or NULL */
	int			whole_slot;		/* keys: a non-record key goes here, else -1 */
} KsFormatCall;

typedef struct KsFormat
{
	const char *name;
	/* KS_OK with out[] filled, or a quarantine reason with *detail */
	KsReason	(*decode) (const KsFormatCall *call, const char *data, size_t len,
						   KsSlotValue *out, char **detail);
} KsFormat;

/* format.c */
extern const KsFormat *ks_format_find(const char *name);
extern KsReason ks_format_decode(KsTarget *t, KsPipeline *p, bool is_key,
								 const char *data, size_t len, KsSlotValue *out,
								 char **detail);
/* Confluent's wire format: magic byte 0, the schema id (big-endian), the payload */
extern bool ks_wire_frame(const char *data, size_t len, int32 *id, char **detail);

/* format_avro.c */
extern KsReason ks_format_avro_decode(const KsFormatCall *call, const char *data, size_t len,
									  KsSlotValue *out, char **detail);
extern KsReason ks_format_json_schema_decode(const KsFormatCall *call, const char *data, size_t len,
											 KsSlotValue *out, char **detail);

/* schema_registry.c */
typedef struct KsSchemaEntry
{
	int32		id;
	char	   *type;			/* AVRO, JSON, PROTOBUF */
	char	   *text;
	struct KsAvroSchema *avro;	/* AVRO: compiled, else NULL */
	char	   *invalid;		/* AVRO that does not compile: why */
	bool		in_catalog;		/* known to be in kafka_sink.schemas */
	TimestampTz stored_in_xact; /* fetched here: inserted in this transaction */
} KsSchemaEntry;

extern KsSchemaEntry *ks_schema_by_id(KsRegistryConf *reg, int32 id);
extern KsSchemaEntry *ks_schema_inline(const char *text);

/* catalog.c: kafka_sink.schemas */
extern bool ks_catalog_schema_get(const char *registry, int32 id, char **type, char **text);
extern bool ks_catalog_schema_put(const char *registry, int32 id, const char *type, const char *text);

#endif
