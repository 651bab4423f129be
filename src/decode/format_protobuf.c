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
#include "pipeline.h"
#include "schema_registry.h"
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

/* per slot: 1 read by a column of a number type, 2 by another, 3 both */
static void
mark(char *readers, int nslots, int s, Oid typid)
{
	if (s >= 0 && s < nslots)
		readers[s] |= is_number_type(typid) ? 1 : 2;
}

/*
 * Per slot: only columns of number types read it, so an enum there is
 * wanted as its number (a slot that a text column reads too takes the
 * name).  A few columns a message: cheaper than keeping it.
 */
static bool *
enum_number_slots(const KsFormatCall *call)
{
	KsTarget   *t = call->t;
	int			nslots = call->walk->nslots;
	char	   *readers = palloc0(Max(nslots, 1));
	bool	   *number = palloc0(sizeof(bool) * Max(nslots, 1));

	if (call->is_key)
	{
		for (int k = 0; k < t->nkeys && k < nslots; k++)
			mark(readers, nslots, k, t->columns[t->key_index[k]].typid);
	}
	else
	{
		for (int i = 0; i < t->ncolumns; i++)
		{
			Oid			typid = t->columns[i].typid;

			mark(readers, nslots, t->map[i], typid);
			mark(readers, nslots, t->alt[i], typid);
			for (int v = 0; v < t->nversions; v++)
				mark(readers, nslots, t->vmap[v][i], typid);
		}
	}
	for (int s = 0; s < nslots; s++)
		number[s] = readers[s] == 1;
	pfree(readers);
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

	if (call->p->contract.registry == NULL)
	{
		*detail = psprintf("the pipeline has no schema_registry to read %s's schema id from", what(call));
		return KS_NOT_WIRE_FORMAT;
	}
	if (!ks_wire_frame(data, len, &id, detail))
		return KS_NOT_WIRE_FORMAT;
	e = ks_schema_by_id(call->p->contract.registry, id);
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
