/*-------------------------------------------------------------------------
 *
 * format_protobuf.c
 *		The protobuf format: Confluent's wire format (magic byte 0, the
 *		writer schema's id, big-endian, the message-index list, then the
 *		message), the schema fetched by id as .proto text (schemaType
 *		PROTOBUF, schema_registry.c) and decoded by protobuf.c.
 *
 * Reasons: a frame without the magic byte or shorter than 5 bytes is
 * not_wire_format; an id the registry does not know is unknown_schema_id;
 * a schema that is not Protobuf, or does not compile, or a payload that
 * does not decode with it (a bad message index included) is
 * invalid_protobuf; a registry that cannot be reached is no reason at all
 * but an error the worker retries.
 *
 * Owns: which slots take an enum's number (an integer column) rather than
 * its name.  Must not: read the payload's bytes itself (protobuf.c does).
 *
 *-------------------------------------------------------------------------
 */
#include "kafka_sink.h"
#include "format.h"
#include "protobuf.h"

#include "catalog/pg_type.h"
#include "utils/lsyscache.h"

static const char *
what(const KsFormatCall *call)
{
	return call->is_key ? "the key" : "the value";
}

static bool
is_number_type(Oid typid)
{
	switch (getBaseType(typid))
	{
		case INT2OID:
		case INT4OID:
		case INT8OID:
		case NUMERICOID:
		case FLOAT4OID:
		case FLOAT8OID:
			return true;
		default:
			return false;
	}
}

static void
mark(bool *number, int nslots, int s, Oid typid)
{
	if (s >= 0 && s < nslots && is_number_type(typid))
		number[s] = true;
}

/*
 * Per slot: a column of a number type reads it, so an enum there is
 * wanted as its number.  A few columns a message: cheaper than keeping it.
 */
static bool *
enum_number_slots(const KsFormatCall *call)
{
	KsTarget   *t = call->t;
	int			nslots = call->walk->nslots;
	bool	   *number = palloc0(sizeof(bool) * Max(nslots, 1));

	if (call->is_key)
	{
		for (int k = 0; k < t->nkeys && k < nslots; k++)
			mark(number, nslots, k, t->columns[t->key_index[k]].typid);
		return number;
	}
	for (int i = 0; i < t->ncolumns; i++)
	{
		Oid			typid = t->columns[i].typid;

		mark(number, nslots, t->map[i], typid);
		mark(number, nslots, t->alt[i], typid);
		for (int v = 0; v < t->nversions; v++)
			mark(number, nslots, t->vmap[v][i], typid);
	}
	return number;
}

KsReason
ks_format_protobuf_decode(const KsFormatCall *call, const char *data, size_t len,
						  KsSlotValue *out, char **detail)
{
	int32		id;
	KsSchemaEntry *e;
	char	   *why;
	bool	   *number;
	bool		ok;

	if (call->p->registry == NULL)
	{
		*detail = psprintf("the pipeline has no schema_registry to read %s's schema id from", what(call));
		return KS_NOT_WIRE_FORMAT;
	}
	if (!ks_wire_frame(data, len, &id, detail))
		return KS_NOT_WIRE_FORMAT;
	e = ks_schema_by_id(call->p->registry, id);
	if (e == NULL)
	{
		*detail = psprintf("schema id %d of %s is not in the schema registry", id, what(call));
		return KS_UNKNOWN_SCHEMA_ID;
	}
	if (e->proto == NULL)
	{
		*detail = e->invalid ? psprintf("schema id %d is not a Protobuf schema this decoder reads: %s", e->id, e->invalid) :
			psprintf("schema id %d is a %s schema, not Protobuf", e->id, e->type);
		return KS_INVALID_PROTOBUF;
	}
	number = enum_number_slots(call);
	ok = ks_pb_decode(e->proto, call->walk, call->pg_array, number, data + 5, len - 5, out, &why);
	pfree(number);
	if (ok)
		return KS_OK;
	*detail = psprintf("%s does not decode with schema id %d: %s", what(call), e->id, why);
	return KS_INVALID_PROTOBUF;
}
