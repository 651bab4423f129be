/*-------------------------------------------------------------------------
 *
 * format.h
 *		Message formats: how the bytes of a message value or key become the
 *		named field values (the slots of a KsWalkPaths) that decode.c
 *		converts into columns.
 *
 * A format is one entry of the table in format.c: a name (what the
 * pipeline's value_format or key_format says) and a decode function.
 * Decoding calls ks_format_decode (the Debezium envelope, which reads its
 * JSON itself, only ks_json_schema_payload for a json_schema frame);
 * everything after the slots (schema versions, scales, the column types'
 * input functions, required columns) is shared by every format.  A new
 * format is a new file, format_<name>.c (as format_protobuf.c), with its
 * decode function declared below, and one line in the table of format.c.
 *
 * Owns: KsFormat, KsFormatCall, the look-up, Confluent's frame
 * (ks_wire_frame) and each format's decode function, its file's only
 * export.  Must not: declare the payload decoders (avro_binary.h,
 * protobuf.h) or the conversion into columns (decode.h).
 *
 *-------------------------------------------------------------------------
 */
#ifndef KS_FORMAT_H
#define KS_FORMAT_H

#include "kafka_sink.h"
#include "pipeline.h"
#include "decode.h"
#include "jsonwalk.h"

/* What a format's decode function is asked to do. */
typedef struct KsFormatCall
{
	KsTarget   *t;
	KsPipeline *p;
	bool		is_key;			/* the message key, else the value */
	const KsWalkPaths *walk;	/* the paths to capture, one slot each */
	const bool *pg_array;		/* per slot: an array column takes it, or NULL */
	const Oid  *direct;			/* per slot: a Datum of this type is wanted
								 * (ks_avro_decode), or NULL */
	int			whole_slot;		/* keys: a non-record key goes here, else -1 */
} KsFormatCall;

typedef struct KsFormat
{
	const char *name;
	/* KS_OK with out[] filled (one per slot of call->walk), or a reason and *detail */
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

/* format_json.c */
extern KsReason ks_format_json_decode(const KsFormatCall *call, const char *data, size_t len,
									  KsSlotValue *out, char **detail);

/* format_avro.c */
extern KsReason ks_format_avro_decode(const KsFormatCall *call, const char *data, size_t len,
									  KsSlotValue *out, char **detail);
extern KsReason ks_format_json_schema_decode(const KsFormatCall *call, const char *data, size_t len,
											 KsSlotValue *out, char **detail);
extern KsReason ks_json_schema_payload(KsPipeline *p, bool is_key, const char **data, size_t *len,
									   char **detail);

/* format_protobuf.c */
extern KsReason ks_format_protobuf_decode(const KsFormatCall *call, const char *data, size_t len,
										  KsSlotValue *out, char **detail);

/* format_registry.c */
extern KsReason ks_format_registry_decode(const KsFormatCall *call, const char *data, size_t len,
										  KsSlotValue *out, char **detail);

#endif							/* KS_FORMAT_H */
