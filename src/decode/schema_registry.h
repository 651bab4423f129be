/*-------------------------------------------------------------------------
 *
 * schema_registry.h
 *		Schemas by id (schema_registry.c): the per-worker cache, the
 *		catalog's copy (kafka_sink.schemas) and the registry itself, and an
 *		inline writer schema compiled once.
 *
 *		Owns: the schema entry and the look-ups by id.  Must not: expose
 *		libcurl (only schema_registry.c includes curl.h).
 *
 *-------------------------------------------------------------------------
 */
#ifndef KS_SCHEMA_REGISTRY_H
#define KS_SCHEMA_REGISTRY_H

#include "kafka_sink.h"
#include "pipeline.h"

#include "datatype/timestamp.h"

typedef struct KsSchemaEntry
{
	int32		id;
	char	   *type;			/* AVRO, JSON, PROTOBUF */
	char	   *text;
	struct KsAvroSchema *avro;	/* AVRO: compiled, else NULL */
	struct KsPbSchema *proto;	/* PROTOBUF: compiled, else NULL */
	char	   *invalid;		/* AVRO or PROTOBUF that does not compile: why */
	bool		in_catalog;		/* known to be in kafka_sink.schemas */
	TimestampTz stored_in_xact; /* fetched here: inserted in this transaction */
} KsSchemaEntry;

extern KsSchemaEntry *ks_schema_by_id(KsRegistryConf *reg, int32 id);
extern KsSchemaEntry *ks_schema_inline(const char *text);
extern KsSchemaEntry *ks_schema_compile(int32 id, const char *type, const char *text);
extern void ks_schema_prefetch(KsPipeline *p, KsMessage **msgs, int nmsgs);

#endif							/* KS_SCHEMA_REGISTRY_H */
