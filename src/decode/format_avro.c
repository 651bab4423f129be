/*-------------------------------------------------------------------------
 *
 * format_avro.c
 *		The avro and json_schema formats.
 *
 * avro with a schema registry: Confluent's wire format (magic byte 0, the
 * writer schema's id, big-endian, then the Avro binary datum), the schema
 * fetched by id (schema_registry.c).  avro with value_schema: plain Avro
 * binary written with that one schema.  json_schema: the wire format with
 * a JSON payload, decoded by the JSON path once the id is known.
 *
 * Reasons: a frame without the magic byte or shorter than 5 bytes is
 * not_wire_format; an id the registry does not know is unknown_schema_id;
 * a payload that does not decode with its schema is invalid_avro (or
 * invalid_json); a registry that cannot be reached is no reason at all but
 * an error the worker retries.
 *
 * Owns: the two formats' decode functions, entries of format.c's table
 * (declared in format.h, its only exports).  Must not: fetch or cache
 * schemas (schema_registry.c) or decode Avro binary (avro_binary.c).
 *
 *-------------------------------------------------------------------------
 */
#include "kafka_sink.h"
#include "schema_registry.h"
#include "format.h"
#include "avro_binary.h"

static const char *
what(const KsFormatCall *call)
{
	return call->is_key ? "the key" : "the value";
}

/* The schema of a frame: KS_OK, or a reason; data/len move to the payload. */
static KsReason
frame_schema(const KsFormatCall *call, const char **data, size_t *len,
			 KsSchemaEntry **entry, char **detail)
{
	int32		id;

	if (call->p->contract.registry == NULL)
	{
		*detail = psprintf("the pipeline has no schema_registry to read %s's schema id from", what(call));
		return KS_NOT_WIRE_FORMAT;
	}
	if (!ks_wire_frame(*data, *len, &id, detail))
		return KS_NOT_WIRE_FORMAT;
	*entry = ks_schema_by_id(call->p->contract.registry, id);
	if (*entry == NULL)
	{
		*detail = psprintf("schema id %d of %s is not in the schema registry", id, what(call));
		return KS_UNKNOWN_SCHEMA_ID;
	}
	*data += 5;
	*len -= 5;
	return KS_OK;
}

KsReason
ks_format_avro_decode(const KsFormatCall *call, const char *data, size_t len,
					  KsSlotValue *out, char **detail)
{
	KsSchemaEntry *e;
	KsAvroResult r;
	char	   *why;

	if (!call->is_key && call->p->contract.value_schema != NULL)
		e = ks_schema_inline(call->p->contract.value_schema);
	else
	{
		KsReason	reason = frame_schema(call, &data, &len, &e, detail);

		if (reason != KS_OK)
			return reason;
	}
	if (e->avro == NULL)
	{
		*detail = e->invalid ? psprintf("schema id %d is not a valid Avro schema: %s", e->id, e->invalid) :
			psprintf("schema id %d is a %s schema, not Avro", e->id, e->type);
		return KS_INVALID_AVRO;
	}
	r = ks_avro_decode(e->avro, call->walk, call->pg_array, call->direct, call->whole_slot, data, len, out, &why);
	if (r == KS_AVRO_OK)
		return KS_OK;
	if (e->id >= 0)
		*detail = psprintf("%s does not decode with schema id %d: %s", what(call), e->id, why);
	else
		*detail = psprintf("%s does not decode with value_schema: %s", what(call), why);
	return r == KS_AVRO_NOT_A_RECORD ? KS_NOT_AN_OBJECT : KS_INVALID_AVRO;
}

/*
 * A json_schema frame's JSON, for an envelope that parses it itself
 * (Debezium with Confluent's JsonSchemaConverter): KS_OK with data and len
 * moved past the frame once the registry knows its schema id, else a
 * reason (not_wire_format, unknown_schema_id) and *detail.
 */
KsReason
ks_json_schema_payload(KsPipeline *p, bool is_key, const char **data, size_t *len, char **detail)
{
	KsFormatCall call = {0};
	KsSchemaEntry *e;

	call.p = p;
	call.is_key = is_key;
	call.whole_slot = -1;
	return frame_schema(&call, data, len, &e, detail);
}

KsReason
ks_format_json_schema_decode(const KsFormatCall *call, const char *data, size_t len,
							 KsSlotValue *out, char **detail)
{
	KsSchemaEntry *e;
	KsReason	reason = frame_schema(call, &data, &len, &e, detail);
	KsWalkResult r;

	if (reason != KS_OK)
		return reason;
	r = ks_json_walk(call->walk, data, len, out, detail);
	if (r == KS_WALK_OK)
		return KS_OK;
	return r == KS_WALK_INVALID_JSON ? KS_INVALID_JSON : KS_NOT_AN_OBJECT;
}
