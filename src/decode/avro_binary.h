/*-------------------------------------------------------------------------
 *
 * avro_binary.h
 *		Avro writer schemas and the binary decoder into field-path slots
 *		(src/decode/avro_binary.c), and ks_json_parse over jsontree.h.  No
 *		backend dependency: test/fuzz builds it with -DFRONTEND against
 *		libpgcommon.
 *
 *		Owns: KsAvroSchema (opaque), the named-type table and the
 *		decoder's calls.  Must not: need the backend beyond palloc and
 *		src/common, or know columns, the catalog or the registry
 *		(schema_registry.h).
 *
 *-------------------------------------------------------------------------
 */
#ifndef KS_AVRO_BINARY_H
#define KS_AVRO_BINARY_H

#include "jsonwalk.h"
#include "jsontree.h"

typedef struct KsAvroSchema KsAvroSchema;

/*
 * A table of Avro full names (named types, a record's field names): one
 * probe a look-up, so that a schema of many names is read in time linear
 * in its size.  Zero-initialized it is empty; allocated in the current
 * memory context.
 */
typedef struct KsAvroNames
{
	int			n;
	int			cap;			/* a power of two, or 0 */
	const char **keys;
	void	  **vals;
} KsAvroNames;

/* The value of name, or NULL. */
extern void *ks_avro_names_get(const KsAvroNames *t, const char *name);

/* Adds name (kept, not copied) with val; false if it is there already. */
extern bool ks_avro_names_add(KsAvroNames *t, const char *name, void *val);

typedef enum KsAvroResult
{
	KS_AVRO_OK = 0,
	KS_AVRO_INVALID,			/* the bytes do not decode with the schema */
	KS_AVRO_NOT_A_RECORD		/* the schema's top level is not a record */
} KsAvroResult;

/*
 * Compiles an Avro schema (its JSON text).  NULL with *errmsg set when it
 * is not a valid schema.  The result is allocated in the current memory
 * context and never changes: it may be shared.
 */
extern KsAvroSchema *ks_avro_schema_parse(const char *json, size_t len, char **errmsg);

/*
 * As ks_avro_schema_parse, for a schema with references: the named types
 * of refs (their JSON texts, each after those it uses) are defined first.
 */
extern KsAvroSchema *ks_avro_schema_parse_refs(const char *const *refs, int nrefs,
											   const char *main, char **errmsg);

/* Whether the top-level type is a record (else a primitive, e.g. a key). */
extern bool ks_avro_schema_is_record(const KsAvroSchema *s);

/*
 * Decodes one datum written with schema s, capturing the value of each
 * path of paths in out[] as jsonwalk does for JSON (ABSENT, NULL, STRING,
 * SCALAR or COMPOSITE: its JSON text).  pg_array, when not NULL, says per
 * slot that an Avro array there is wanted as a PostgreSQL array literal
 * (kind SCALAR) rather than JSON.  direct, when not NULL, gives per slot
 * the type of the column that takes it when that is one the decoder can
 * build directly (ks_avro_direct_type: bool, int4, int8, float4, float8,
 * text, timestamptz, timestamp; InvalidOid else): a value of the matching
 * Avro type is then a KS_SLOT_DATUM of that type, exactly what the type's
 * input function makes of the text (backend builds only; a value the
 * type cannot hold still comes as text, for the input function to
 * refuse).  whole_slot >= 0: a schema that is not
 * a record decodes into that slot (a primitive key); otherwise it is
 * KS_AVRO_NOT_A_RECORD.  Every byte must be used.  On an error *detail
 * says why, and the slots are all ABSENT.
 */
extern KsAvroResult ks_avro_decode(const KsAvroSchema *s, const KsWalkPaths *paths,
								   const bool *pg_array, const Oid *direct, int whole_slot,
								   const char *data, size_t len,
								   KsSlotValue *out, char **detail);

/* typid itself when ks_avro_decode can build its values directly, else InvalidOid */
extern Oid	ks_avro_direct_type(Oid typid, int32 typmod);

/* ---- the JSON tree (jsontree.h) of schemas and registry answers ---- */

/*
 * Parses JSON text (valid UTF-8, no NUL byte, at most 64 levels deep)
 * into a tree; NULL with *errmsg if it is not.
 */
extern KsJson *ks_json_parse(const char *text, size_t len, char **errmsg);

#endif
