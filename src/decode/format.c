/*-------------------------------------------------------------------------
 *
 * format.c
 *		The table of message formats, and the one call decoding makes.
 *
 * json is the path kafka_sink always had (format_json.c); avro and
 * json_schema read Confluent's wire format (format_avro.c), avro also
 * plain Avro binary with one inline writer schema (value_schema);
 * protobuf reads it with a Protobuf payload (format_protobuf.c); registry
 * reads it with any of the three, as each schema id's type says
 * (format_registry.c).
 *
 * Owns: the registration of formats (one line each), the choice of the
 * pipeline's value or key format, Confluent's wire-format frame, and which
 * slots array columns take.  Must not: know any format's payload bytes
 * (format_<name>.c does) or what happens to the slots afterwards.
 *
 *-------------------------------------------------------------------------
 */
#include "kafka_sink.h"
#include "pipeline.h"
#include "guc.h"
#include "format.h"
#include "avro_binary.h"

#include "utils/builtins.h"
#include "utils/lsyscache.h"

/* Registration: one line per format; the first is the default. */
static const KsFormat ks_formats[] = {
	{"json", ks_format_json_decode},
	{"avro", ks_format_avro_decode},
	{"json_schema", ks_format_json_schema_decode},
	{"protobuf", ks_format_protobuf_decode},
	{"registry", ks_format_registry_decode},
	{NULL, NULL}
};

const KsFormat *
ks_format_find(const char *name)
{
	for (const KsFormat *f = ks_formats; f->name; f++)
		if (strcmp(f->name, name) == 0)
			return f;
	return NULL;
}

bool
ks_wire_frame(const char *data, size_t len, int32 *id, char **detail)
{
	const unsigned char *b = (const unsigned char *) data;

	if (len < 5)
	{
		*detail = psprintf("the value has %zu bytes; Confluent's wire format has at least 5 (magic byte 0 and a schema id)", len);
		return false;
	}
	if (b[0] != 0)
	{
		*detail = psprintf("the first byte is %u, not the magic byte 0 of Confluent's wire format", b[0]);
		return false;
	}
	*id = (int32) (((uint32) b[1] << 24) | ((uint32) b[2] << 16) | ((uint32) b[3] << 8) | b[4]);
	return true;
}

static bool
is_array_column(KsColumn *c)
{
	return OidIsValid(get_element_type(getBaseType(c->typid)));
}

/*
 * Slot s is read by column c: the slot keeps c's type when the decoder can
 * build it directly and every column reading the slot has that type; a
 * slot read by columns of two types gets none (KS_DIRECT_MIXED, then
 * InvalidOid).
 */
#define KS_DIRECT_MIXED ((Oid) 1)	/* no type has oid 1 */

static void
direct_read(Oid *direct, int s, KsColumn *c, int scale)
{
	Oid			want = scale == 0 ? ks_avro_direct_type(c->typid, c->typmod) : InvalidOid;

	if (s < 0)
		return;
	if (!OidIsValid(want))
		direct[s] = KS_DIRECT_MIXED;
	else if (direct[s] == InvalidOid)
		direct[s] = want;
	else if (direct[s] != want)
		direct[s] = KS_DIRECT_MIXED;
}

/*
 * Which slots the Avro decoder may hand over as Datums of the column's own
 * type (ks_avro_decode's direct): those read only by columns of one such
 * type, and not the schema version or the event id, which are read as
 * text.
 */
static void
mark_direct_slots(KsTarget *t)
{
	t->direct = palloc0(sizeof(Oid) * Max(t->walk.nslots, 1));
	t->key_direct = palloc0(sizeof(Oid) * Max(t->key_walk.nslots, 1));
	for (int i = 0; i < t->ncolumns; i++)
	{
		KsColumn   *c = &t->columns[i];

		direct_read(t->direct, t->map[i], c, t->scale[i]);
		direct_read(t->direct, t->alt[i], c, t->scale[i]);
		for (int v = 0; v < t->nversions; v++)
			direct_read(t->direct, t->vmap[v][i], c, t->vscale[v][i]);
	}
	if (t->version_slot >= 0)
		t->direct[t->version_slot] = KS_DIRECT_MIXED;
	if (t->event_id_slot >= 0)
		t->direct[t->event_id_slot] = KS_DIRECT_MIXED;
	for (int s = 0; s < t->walk.nslots; s++)
		if (t->direct[s] == KS_DIRECT_MIXED)
			t->direct[s] = InvalidOid;
	for (int k = 0; k < t->nkeys && k < t->key_walk.nslots; k++)
	{
		KsColumn   *c = &t->columns[t->key_index[k]];

		t->key_direct[k] = ks_avro_direct_type(c->typid, c->typmod);
	}
}

/*
 * Which slots an array column takes (an Avro array is then rendered as a
 * PostgreSQL array literal rather than JSON): once per target.
 */
static void
mark_array_slots(KsTarget *t)
{
	t->pg_array = palloc0(sizeof(bool) * Max(t->walk.nslots, 1));
	t->key_pg_array = palloc0(sizeof(bool) * Max(t->key_walk.nslots, 1));
	for (int i = 0; i < t->ncolumns; i++)
	{
		if (!is_array_column(&t->columns[i]))
			continue;
		if (t->map[i] >= 0)
			t->pg_array[t->map[i]] = true;
		if (t->alt[i] >= 0)
			t->pg_array[t->alt[i]] = true;
		for (int v = 0; v < t->nversions; v++)
			if (t->vmap[v][i] >= 0)
				t->pg_array[t->vmap[v][i]] = true;
	}
	for (int k = 0; k < t->nkeys && k < t->key_walk.nslots; k++)
		t->key_pg_array[k] = is_array_column(&t->columns[t->key_index[k]]);
	mark_direct_slots(t);
}

/*
 * Decodes a message value (is_key false) or key into the target's slots
 * with the pipeline's format.  KS_OK, or a quarantine reason and *detail.
 * A format that cannot work at all (a registry out of reach) raises an
 * ERROR of class 08 the worker retries instead of quarantining.
 */
KsReason
ks_format_decode(KsTarget *t, KsPipeline *p, bool is_key, const char *data, size_t len,
				 KsSlotValue *out, char **detail)
{
	KsFormatCall call;
	const KsFormat *f = is_key ? p->contract.key_fmt : p->contract.value_fmt;

	if (f == NULL)
		f = ks_formats;			/* json */
	call.t = t;
	call.p = p;
	call.is_key = is_key;
	call.walk = is_key ? &t->key_walk : &t->walk;
	if (f->decode == ks_format_json_decode)
	{
		/* JSON arrays are JSON text whatever the column */
		call.pg_array = NULL;
		call.direct = NULL;
		call.whole_slot = -1;
	}
	else
	{
		if (t->pg_array == NULL)
			mark_array_slots(t);
		call.pg_array = is_key ? t->key_pg_array : t->pg_array;
		call.direct = ks_direct_values ? (is_key ? t->key_direct : t->direct) : NULL;
		call.whole_slot = (is_key && t->nkeys == 1) ? 0 : -1;
	}
	return f->decode(&call, data, len, out, detail);
}

/*
 * kafka_sink._check_avro_schema(schema text): an error unless it is a
 * valid Avro schema of a record (value_schema), by the parser decoding
 * uses.
 */
PG_FUNCTION_INFO_V1(kafka_sink_check_avro_schema);
Datum
kafka_sink_check_avro_schema(PG_FUNCTION_ARGS)
{
	char	   *json;
	char	   *err = NULL;
	KsAvroSchema *s;

	if (PG_ARGISNULL(0))
		PG_RETURN_VOID();
	json = text_to_cstring(PG_GETARG_TEXT_PP(0));
	s = ks_avro_schema_parse(json, strlen(json), &err);
	if (s == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("value_schema is not a valid Avro schema"),
				 errdetail("%s.", err),
				 errhint("Pass the writer schema's JSON, such as '{\"type\": \"record\", \"name\": \"Order\", \"fields\": [...]}'.")));
	if (!ks_avro_schema_is_record(s))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("value_schema must be an Avro record"),
				 errhint("Columns are filled from the record's fields by name.")));
	PG_RETURN_VOID();
}
