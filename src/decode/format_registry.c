/*-------------------------------------------------------------------------
 *
 * format_registry.c
 *		The registry format: Confluent's wire format whatever the payload,
 *		each message decoded as its schema id's type in the registry says
 *		(schemaType AVRO, the registry's default, PROTOBUF or JSON).  One
 *		topic may then mix Avro, Protobuf and JSON Schema messages, as
 *		Confluent's serializers write them, into one target.
 *
 * The frame and the schema are read once here (the worker's cache, filled
 * by the prefetch before the batch's transaction); the payload is the
 * chosen format's: format_avro.c for AVRO, format_protobuf.c for PROTOBUF,
 * the json_schema path for JSON, with their reasons (not_wire_format,
 * unknown_schema_id, invalid_avro, invalid_protobuf, invalid_json).  A
 * schema of another type, or one too large to store, is read as Avro and
 * so quarantined as invalid_avro with the type in the detail.
 *
 * Owns: the choice of decoder by schemaType, an entry of format.c's table
 * (declared in format.h, its only export).  Must not: decode any payload
 * itself, or fetch schemas (schema_registry.c).
 *
 *-------------------------------------------------------------------------
 */
#include "kafka_sink.h"
#include "pipeline.h"
#include "schema_registry.h"
#include "format.h"

/* Does the registry's type (a bundle with references: "<type>+refs") start with base? */
static bool
type_is(const char *type, const char *base)
{
	size_t		n = strlen(base);

	return strncmp(type, base, n) == 0 && (type[n] == '\0' || type[n] == '+');
}

KsReason
ks_format_registry_decode(const KsFormatCall *call, const char *data, size_t len,
						  KsSlotValue *out, char **detail)
{
	int32		id;
	KsSchemaEntry *e;

	if (call->p->contract.registry == NULL)
	{
		*detail = psprintf("the pipeline has no schema_registry to read %s's schema id from",
						   call->is_key ? "the key" : "the value");
		return KS_NOT_WIRE_FORMAT;
	}
	if (!ks_wire_frame(data, len, &id, detail))
		return KS_NOT_WIRE_FORMAT;
	e = ks_schema_by_id(call->p->contract.registry, id);
	if (e == NULL)
	{
		*detail = psprintf("schema id %d of %s is not in the schema registry", id,
						   call->is_key ? "the key" : "the value");
		return KS_UNKNOWN_SCHEMA_ID;
	}
	/* each decoder reads the frame again: the id is then a cache hit */
	if (type_is(e->type, "PROTOBUF"))
		return ks_format_protobuf_decode(call, data, len, out, detail);
	if (type_is(e->type, "JSON"))
		return ks_format_json_schema_decode(call, data, len, out, detail);
	return ks_format_avro_decode(call, data, len, out, detail);
}
