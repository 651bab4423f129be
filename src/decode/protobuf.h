/*-------------------------------------------------------------------------
 *
 * protobuf.h
 *		Protobuf schemas (.proto text, src/decode/protobuf_parse.c) and the
 *		decoder of Confluent's Protobuf payloads into field-path slots
 *		(src/decode/protobuf.c).  No backend dependency: test/fuzz builds
 *		both with -DFRONTEND against libpgcommon.
 *
 * The types below the public functions are the compiled schema, shared by
 * the two files only.
 *
 * Owns: the parse and decode calls and the compiled schema's types.
 * Must not: need the backend beyond palloc and StringInfo, fetch schemas
 * (schema_registry.c) or convert to column types (decode.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef KS_PROTOBUF_H
#define KS_PROTOBUF_H

#include "jsonwalk.h"

typedef struct KsPbSchema KsPbSchema;

/* One .proto file: the schema itself, or a reference (name: the import). */
typedef struct KsPbFile
{
	const char *name;
	const char *text;
	size_t		len;
} KsPbFile;

/* Largest .proto text (all files together) and deepest nesting of messages */
#define KS_PB_MAX_TEXT (8 * 1024 * 1024)
#define KS_PB_MAX_DEPTH 64

/*
 * Compiles a .proto text (files[0]) with the files it imports (files[1..],
 * by the name an import statement gives; the well-known types
 * google/protobuf/{timestamp,duration,wrappers,struct,any,empty,field_mask}.proto
 * are built in).  NULL with *errmsg set when it is not a schema this
 * decoder reads.  Allocated in the current memory context; never changes
 * afterwards, so it may be shared.
 */
extern KsPbSchema *ks_pb_schema_parse(const KsPbFile *files, int nfiles, char **errmsg);

/*
 * Decodes a Confluent Protobuf payload (what follows the magic byte and
 * the schema id: the message-index list, then the message) into out[],
 * one slot per path of paths, as ks_avro_decode does.  pg_array[s]: an
 * array column takes slot s (a repeated field then comes as a PostgreSQL
 * array literal); enum_number[s]: an integer column takes it (an enum then
 * comes as its number, else its name).  Either may be NULL.  Every byte
 * must be used.  false with *detail on an invalid payload; the slots are
 * then all ABSENT.
 */
extern bool ks_pb_decode(const KsPbSchema *s, const KsWalkPaths *paths,
						 const bool *pg_array, const bool *enum_number,
						 const char *data, size_t len, KsSlotValue *out, char **detail);

/*
 * The whole message of a payload (as ks_pb_decode reads it) as JSON, in
 * the rendering the slots use for nested messages; NULL with *detail when
 * it is invalid.  For test/fuzz and lineage.
 */
extern char *ks_pb_to_json(const KsPbSchema *s, const char *data, size_t len, char **detail);

/* ---- the compiled schema (protobuf_parse.c builds it, protobuf.c reads it) ---- */

typedef enum PbType
{
	PB_DOUBLE = 1,				/* the numbers of descriptor.proto's types */
	PB_FLOAT = 2,
	PB_INT64 = 3,
	PB_UINT64 = 4,
	PB_INT32 = 5,
	PB_FIXED64 = 6,
	PB_FIXED32 = 7,
	PB_BOOL = 8,
	PB_STRING = 9,
	PB_GROUP = 10,
	PB_MESSAGE = 11,
	PB_BYTES = 12,
	PB_UINT32 = 13,
	PB_ENUM = 14,
	PB_SFIXED32 = 15,
	PB_SFIXED64 = 16,
	PB_SINT32 = 17,
	PB_SINT64 = 18
} PbType;

/* The well-known types that render as values of their own */
typedef enum PbWkt
{
	PB_WKT_NONE = 0,
	PB_WKT_TIMESTAMP,
	PB_WKT_DURATION,
	PB_WKT_WRAPPER,				/* DoubleValue ... BytesValue: field 1 */
	PB_WKT_STRUCT,
	PB_WKT_VALUE,
	PB_WKT_LIST
} PbWkt;

typedef struct PbEnum
{
	char	   *full;			/* fully-qualified name, no leading dot */
	int			n;
	char	  **names;
	int32	   *numbers;
	bool		closed;			/* proto2: an unknown number is an unknown field */
} PbEnum;

struct PbMsg;

typedef struct PbField
{
	char	   *name;
	int32		number;
	PbType		type;
	char	   *type_name;		/* as written, resolved into msg or en */
	struct PbMsg *msg;
	PbEnum	   *en;
	bool		repeated;
	bool		map;			/* repeated of a map entry: rendered as an object */
	bool		presence;		/* absent means absent (else the default) */
	int			oneof;			/* index of its oneof in the message, or -1 */
} PbField;

typedef struct PbMsg
{
	char	   *full;
	const char *scope;			/* full name of the scope of its type names */
	int			nfields;
	PbField    *fields;			/* in declaration order */
	int		   *by_number;		/* field indexes sorted by number */
	int			nnested;
	struct PbMsg **nested;		/* in declaration order, map entries too */
	int			noneofs;
	PbWkt		wkt;
	bool		map_entry;
} PbMsg;

struct KsPbSchema
{
	int			nmessages;		/* the top-level messages of files[0] */
	PbMsg	  **messages;
	size_t		text_len;		/* of all files: bounds the work of a decode */
};

#endif							/* KS_PROTOBUF_H */
