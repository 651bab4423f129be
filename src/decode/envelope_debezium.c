/*-------------------------------------------------------------------------
 *
 * envelope_debezium.c
 *		The Debezium envelope: a message value is a change event
 *		{"before", "after", "source", "op", ...}, bare or wrapped by
 *		JsonConverter's schemas.enable=true as {"schema", "payload"}, or
 *		bare in Confluent's wire format (JsonSchemaConverter,
 *		value_format json_schema).
 *
 * op c, r, u: an upsert of "after"; d: a delete of the key (from the
 * message key, else the key columns of "before"; never a non-key value of
 * "before", which with REPLICA IDENTITY DEFAULT are zeros); t: a truncate
 * of the target (KsRow.is_truncate; the pipeline's on_truncate decides);
 * the tombstone that follows a d: nothing (KsRow.skipped).  Every event
 * carries its source position (ks_cdc_position) in the target's order
 * column, so that reduce.c's ordering rule, the MERGE's guard and the
 * delete and truncate guards (apply.c, cdc_deletions) order events by
 * their place in the source's log, not by their Kafka offset.
 *
 * Values: Debezium's encodings (decimal.handling.mode precise, string,
 * double; time.precision.mode adaptive and connect; io.debezium.data.Json,
 * Uuid; bytes as base64) become the text the column type's input function
 * takes, through decode.c's conversion.  With an embedded schema the
 * field's semantic name decides; without one, the target column's type
 * (docs/design/cdc.md, "The envelope").
 *
 * Fields are read through KsCdcField (a kind, a text, the schema's
 * semantic name and scale).  JSON fills it: an Avro change event is first
 * translated to the JSON JsonConverter would have written, with its
 * Connect schema (envelope_debezium_avro.c).  A column mapped to a header
 * or Kafka's metadata (meta.c) is taken from the message instead of
 * "after".
 *
 * Owns: what a change event means.  Must not: apply rows or write the
 * catalog (apply.c), know a target's statements.  Over 1,000 lines on
 * purpose: Debezium's value encodings (decimal modes, time precisions,
 * semantic types) are one table of rules over one parse of the event.
 *
 *-------------------------------------------------------------------------
 */
#include "kafka_sink.h"
#include "pipeline.h"
#include "envelope_debezium.h"
#include "envelope_debezium_avro.h"
#include "envelope.h"
#include "decode.h"
#include "format.h"
#include "guc.h"

#include "catalog/pg_type.h"
#include "jsontree.h"
#include "jsonwalk.h"
#include "common/base64.h"
#include "common/hashfn.h"
#include "common/jsonapi.h"
#include "lib/stringinfo.h"
#include "mb/pg_wchar.h"
#include "utils/builtins.h"
#include "utils/date.h"
#include "utils/datetime.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/numeric.h"
#include "utils/timestamp.h"

/* ---- one parse per change event ----
 *
 * A change event is parsed once into the extension's JSON tree (KsJson,
 * jsontree.c, at most KS_JSON_MAX_NESTING levels deep: jsonwalk.c's
 * scanner in one pass, else PostgreSQL's JSON parser with semantic
 * actions): no validation parse before it, no jsonb (whose keys are sorted and numbers converted to
 * numeric and back).  What the old jsonb gave is kept exactly: the last
 * of duplicate keys wins, a number reads as numeric_out(numeric_in(its
 * token)) (ev_number_text), a composite as jsonb's text of it
 * (ev_composite_text).  A text the tree parse refuses goes through the
 * old parse (parse_json) for the very same reason and detail as before.
 *
 * The embedded "schema" of {"schema", "payload"} is the same text for
 * every event of a table until the table changes (~80% of the event's
 * bytes): its interpretation (the fields of the envelope's after and
 * before and of a key: their semantic name, scale, bytes) is cached by
 * its text (SchemaEntry), and an event whose schema is a cached text is
 * not parsed again: only its payload is (parse_fast).
 */

static KsJson *
ev_object(const KsJson *o, const char *key)
{
	KsJson	   *v = ks_json_get(o, key);

	return v != NULL && v->kind == KS_J_OBJECT ? v : NULL;
}

static char *
ev_string(const KsJson *o, const char *key)
{
	KsJson	   *v = ks_json_get(o, key);

	return v != NULL && v->kind == KS_J_STRING ? v->str : NULL;
}

/*
 * A number's text as jsonb printed it: numeric_out(numeric_in(token)).
 * A plain integer token is that text already.
 */
static char *
ev_number_text(const KsJson *v)
{
	const char *s = v->str;
	const char *d = s[0] == '-' ? s + 1 : s;
	bool		plain = d[0] != '\0' && (d[0] != '0' || (d[1] == '\0' && d == s));

	for (const char *c = d; plain && *c; c++)
		plain = isdigit((unsigned char) *c);
	if (plain)
		return v->str;
	return DatumGetCString(DirectFunctionCall1(numeric_out,
											   DirectFunctionCall3(numeric_in, CStringGetDatum(s),
																   ObjectIdGetDatum(InvalidOid),
																   Int32GetDatum(-1))));
}

/* a composite's text as jsonb prints it (keys sorted, numbers normalized) */
static char *
ev_composite_text(const KsJson *v)
{
	Jsonb	   *j = DatumGetJsonbP(DirectFunctionCall1(jsonb_in,
													   CStringGetDatum(pnstrdup(v->start, v->len))));

	return JsonbToCString(NULL, &j->root, VARSIZE(j));
}

/* ---- the embedded schemas, interpreted once per distinct text ---- */

/* One field of a struct schema: what read_field needs of it. */
typedef struct SchemaField
{
	char	   *name;
	char	   *semantic;		/* its "name" */
	char	   *scale;			/* parameters.scale, as text */
	bool		bytes;			/* type bytes */
} SchemaField;

typedef struct SchemaStruct
{
	int			nfields;
	SchemaField *fields;
} SchemaStruct;

/* An embedded schema with a "type": the event (or key) is {"schema", "payload"}. */
typedef struct SchemaEntry
{
	uint32		hash;
	int			len;
	char	   *text;			/* the schema's text: compared in full */
	SchemaStruct self;			/* its own fields (a key's columns) */
	SchemaStruct after;			/* the fields of its "after" field's struct */
	SchemaStruct before;
	struct SchemaEntry *next;
} SchemaEntry;

/* bounded: past either limit the cache starts over */
#define KS_CDC_SCHEMAS_MAX 256
#define KS_CDC_SCHEMA_BYTES_MAX (8 * 1024 * 1024)

static MemoryContext schema_cxt = NULL;
static SchemaEntry *schemas = NULL;
static int	nschemas = 0;
static Size schema_bytes = 0;

static SchemaEntry *
schema_lookup(const char *text, int len, uint32 hash)
{
	for (SchemaEntry *s = schemas; s; s = s->next)
		if (s->hash == hash && s->len == len && memcmp(s->text, text, len) == 0)
			return s;
	return NULL;
}

/* The fields of struct schema st (NULL: none), in their order. */
static void
index_fields(const KsJson *st, SchemaStruct *out)
{
	KsJson	   *fields = ks_json_get(st, "fields");

	out->nfields = 0;
	out->fields = NULL;
	if (fields == NULL || fields->kind != KS_J_ARRAY)
		return;
	out->fields = palloc(sizeof(SchemaField) * Max(fields->n, 1));
	for (int i = 0; i < fields->n; i++)
	{
		KsJson	   *fs = fields->items[i];
		SchemaField *f = &out->fields[out->nfields];
		KsJson	   *params;
		char	   *type;
		char	   *s;

		if (fs->kind != KS_J_OBJECT || (s = ev_string(fs, "field")) == NULL)
			continue;
		f->name = pstrdup(s);
		s = ev_string(fs, "name");
		f->semantic = s ? pstrdup(s) : NULL;
		type = ev_string(fs, "type");
		f->bytes = type && strcmp(type, "bytes") == 0;
		params = ev_object(fs, "parameters");
		s = params ? ev_string(params, "scale") : NULL;
		f->scale = s ? pstrdup(s) : NULL;
		out->nfields++;
	}
}

/* the schema of field name of struct st (first match), or NULL */
static KsJson *
field_schema(const KsJson *st, const char *name)
{
	KsJson	   *fields = ks_json_get(st, "fields");

	if (fields == NULL || fields->kind != KS_J_ARRAY)
		return NULL;
	for (int i = 0; i < fields->n; i++)
	{
		char	   *f = ev_string(fields->items[i], "field");

		if (f != NULL && strcmp(f, name) == 0)
			return fields->items[i];
	}
	return NULL;
}

/* The entry of schema s (its text in the parsed buffer), interpreted if new. */
static SchemaEntry *
schema_entry(const KsJson *s)
{
	uint32		hash = hash_bytes((const unsigned char *) s->start, s->len);
	SchemaEntry *e = schema_lookup(s->start, s->len, hash);
	MemoryContext old;

	if (e != NULL)
		return e;
	if (schema_cxt == NULL)
		schema_cxt = AllocSetContextCreate(TopMemoryContext, "kafka_sink debezium schemas",
										   ALLOCSET_DEFAULT_SIZES);
	if (nschemas >= KS_CDC_SCHEMAS_MAX || schema_bytes >= KS_CDC_SCHEMA_BYTES_MAX)
	{
		MemoryContextReset(schema_cxt);
		schemas = NULL;
		nschemas = 0;
		schema_bytes = 0;
	}
	old = MemoryContextSwitchTo(schema_cxt);
	e = palloc0(sizeof(SchemaEntry));
	e->hash = hash;
	e->len = s->len;
	e->text = pnstrdup(s->start, s->len);
	index_fields(s, &e->self);
	/* the envelope's after and before: the first field of the name, as Connect has one */
	index_fields(field_schema(s, "after"), &e->after);
	index_fields(field_schema(s, "before"), &e->before);
	e->next = schemas;
	schemas = e;
	nschemas++;
	schema_bytes += s->len;
	MemoryContextSwitchTo(old);
	return e;
}

/* One field of a change event, as a format reads it. */
typedef struct KsCdcField
{
	KsSlotKind	kind;
	char	   *text;			/* string unescaped, scalar token, composite JSON */
	KsJson	   *composite;		/* KS_SLOT_COMPOSITE: the value itself (JSON) */
	const char *semantic;		/* the schema's name, e.g. io.debezium.time.Date */
	int			scale;			/* org.apache.kafka.connect.data.Decimal: scale, else -1 */
	bool		bytes;			/* the schema says bytes (base64 in JSON) */
} KsCdcField;

/* A struct of the event (after, before, the key) and its schema's fields, if any. */
typedef struct CdcStruct
{
	KsJson	   *value;			/* NULL: absent or null */
	SchemaStruct *schema;		/* its struct schema's fields, or NULL */
	int			last;			/* where the previous lookup matched */
} CdcStruct;

/* The schema of field name of struct st, or NULL */
static SchemaField *
struct_field_schema(CdcStruct *st, const char *name)
{
	int			n = st->schema ? st->schema->nfields : 0;

	/* columns mostly come in the order of the fields: start after the last match */
	for (int k = 0; k < n; k++)
	{
		int			i = (st->last + k) % n;

		/* Connect's schemas have unique field names (SchemaBuilder refuses duplicates) */
		if (strcmp(st->schema->fields[i].name, name) == 0)
		{
			st->last = i + 1;
			return &st->schema->fields[i];
		}
	}
	return NULL;
}

/* Field name of struct st as a KsCdcField. */
static void
read_field(CdcStruct *st, const char *name, KsCdcField *f)
{
	KsJson	   *v = ks_json_get(st->value, name);
	SchemaField *fs = struct_field_schema(st, name);

	memset(f, 0, sizeof(*f));
	f->scale = -1;
	if (fs)
	{
		f->semantic = fs->semantic;
		f->bytes = fs->bytes;
		if (fs->scale)
			f->scale = pg_strtoint32(fs->scale);
	}
	if (v == NULL)
	{
		f->kind = KS_SLOT_ABSENT;
		return;
	}
	switch (v->kind)
	{
		case KS_J_NULL:
			f->kind = KS_SLOT_NULL;
			break;
		case KS_J_STRING:
			f->kind = KS_SLOT_STRING;
			f->text = v->str;
			break;
		case KS_J_NUMBER:
			f->kind = KS_SLOT_SCALAR;
			f->text = ev_number_text(v);
			break;
		case KS_J_BOOL:
			f->kind = KS_SLOT_SCALAR;
			f->text = v->str;
			break;
		case KS_J_ARRAY:
		case KS_J_OBJECT:
			/* its text (a jsonb round trip) only when used: convert_cdc */
			f->kind = KS_SLOT_COMPOSITE;
			f->composite = v;
			break;
	}
}

/* ---- Debezium's encodings -> input function text ---- */

static bool
is_semantic(const KsCdcField *f, const char *name)
{
	return f->semantic != NULL && strcmp(f->semantic, name) == 0;
}

/* base64 -> bytes; false when it is not base64 */
static bool
b64(const char *s, char **out, int *len)
{
	int			n = strlen(s);
	int			cap = pg_b64_dec_len(n);

	*out = palloc(cap + 1);
	/* void *: the destination is char * before 18, uint8 * from 18 */
	*len = pg_b64_decode(s, n, (void *) *out, cap);
	return *len >= 0 && n % 4 == 0;
}

/* the same for any number of bytes, in numeric arithmetic */
static char *
unscaled_numeric_text(const char *bytes, int len)
{
	Datum		n = DirectFunctionCall1(int4_numeric, Int32GetDatum(0));
	Datum		b256 = DirectFunctionCall1(int4_numeric, Int32GetDatum(256));

	for (int i = 0; i < len; i++)
		n = DirectFunctionCall2(numeric_add, DirectFunctionCall2(numeric_mul, n, b256),
								DirectFunctionCall1(int4_numeric, Int32GetDatum((unsigned char) bytes[i])));
	if (len > 0 && (bytes[0] & 0x80))
	{
		/* 256^len by multiplication: numeric_power's result carries a scale */
		Datum		mod = DirectFunctionCall1(int4_numeric, Int32GetDatum(1));

		for (int i = 0; i < len; i++)
			mod = DirectFunctionCall2(numeric_mul, mod, b256);
		n = DirectFunctionCall2(numeric_sub, n, mod);
	}
	return DatumGetCString(DirectFunctionCall1(numeric_out, n));
}

/*
 * The decimal digits of big-endian two's-complement bytes (at most 8),
 * with a '-' before them when negative: numeric_out's text of the same
 * integer, computed in int64 (its magnitude in uint64, for INT64_MIN).
 */
static char *
unscaled_int64_text(const char *bytes, int len)
{
	uint64		u = (len > 0 && (bytes[0] & 0x80)) ? PG_UINT64_MAX : 0;
	char		buf[24];
	char	   *d = buf + sizeof(buf);
	bool		neg;

	for (int i = 0; i < len; i++)
		u = (u << 8) | (unsigned char) bytes[i];
	neg = (int64) u < 0;
	if (neg)
		u = -u;					/* the magnitude, INT64_MIN's too */
	*--d = '\0';
	do
	{
		*--d = '0' + (char) (u % 10);
		u /= 10;
	} while (u > 0);
	if (neg)
		*--d = '-';
	return pstrdup(d);
}

/* big-endian two's-complement bytes at scale as a numeric's text */
static char *
unscaled_to_text(const char *bytes, int len, int scale)
{
	char	   *digits;
	bool		neg;
	StringInfoData out;
	int			nd;

	if (len <= 8)
		digits = unscaled_int64_text(bytes, len);
	else
		digits = unscaled_numeric_text(bytes, len);
	neg = digits[0] == '-';
	if (neg)
		digits++;
	if (scale <= 0)
		return psprintf("%s%s", neg ? "-" : "", digits);
	nd = strlen(digits);
	initStringInfo(&out);
	if (neg)
		appendStringInfoChar(&out, '-');
	if (nd <= scale)
	{
		appendStringInfoString(&out, "0.");
		for (int i = nd; i < scale; i++)
			appendStringInfoChar(&out, '0');
		appendStringInfoString(&out, digits);
	}
	else
	{
		appendBinaryStringInfo(&out, digits, nd - scale);
		appendStringInfoChar(&out, '.');
		appendStringInfoString(&out, digits + nd - scale);
	}
	return out.data;
}

static bool
parse_int8(const char *s, int64 *v)
{
	char	   *end;

	if (s == NULL || *s == '\0')
		return false;
	errno = 0;
	*v = strtoll(s, &end, 10);
	return errno == 0 && *end == '\0';
}

/* a text numeric_in accepts */
static bool
looks_numeric(const char *s)
{
	const char *p = s;
	bool		digit = false;

	if (*p == '+' || *p == '-')
		p++;
	for (; *p; p++)
	{
		if (isdigit((unsigned char) *p))
			digit = true;
		else if (*p != '.' && *p != 'e' && *p != 'E' && *p != '+' && *p != '-')
			return false;
	}
	return digit || strcmp(s, "NaN") == 0;
}

static char *
date_text(int64 days)
{
	return DatumGetCString(DirectFunctionCall1(date_out,
											   DateADTGetDatum((DateADT) (days + UNIX_EPOCH_JDATE - POSTGRES_EPOCH_JDATE))));
}

static char *
time_text(int64 usecs)
{
	return DatumGetCString(DirectFunctionCall1(time_out, TimeADTGetDatum((TimeADT) usecs)));
}

/* µs since 1970 as a timestamp's text; with +00 for a timestamptz column */
static char *
timestamp_text(int64 usecs, bool tz)
{
	Timestamp	ts = usecs - (int64) (POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) * USECS_PER_DAY;
	char	   *s = DatumGetCString(DirectFunctionCall1(timestamp_out, TimestampGetDatum(ts)));

	return tz ? psprintf("%s+00", s) : s;
}

/*
 * Direct values (kafka_sink.direct_values, as decode.c's): a column of
 * type date, timestamp or timestamptz itself (no domain; for timestamps
 * without a typmod below 6, which would round) gets the datum its input
 * function makes of date_text's or timestamp_text's text, without the
 * text.  Only for years 1 to 9999, where that text reads back as the very
 * value (test/e2e/cdc_values.sh compares with direct_values off); other
 * values keep the text, and its errors.
 */
static bool
direct_in_years(int64 days)
{
	return days >= date2j(1, 1, 1) - POSTGRES_EPOCH_JDATE &&
		days < date2j(10000, 1, 1) - POSTGRES_EPOCH_JDATE;
}

static bool
direct_date(KsColumn *col, int64 days_since_1970, KsSlotValue *sv)
{
	int64		d;

	if (!ks_direct_values || col->typid != DATEOID ||
		days_since_1970 < -INT64CONST(1000000000) || days_since_1970 > INT64CONST(1000000000))
		return false;
	d = days_since_1970 + UNIX_EPOCH_JDATE - POSTGRES_EPOCH_JDATE;
	if (!direct_in_years(d))
		return false;
	sv->kind = KS_SLOT_DATUM;
	sv->typid = DATEOID;
	sv->datum = (uintptr_t) DateADTGetDatum((DateADT) d);
	sv->text = NULL;
	return true;
}

static bool
direct_timestamp(KsColumn *col, int64 usecs_since_1970, KsSlotValue *sv)
{
	/* as timestamp_text computes it */
	Timestamp	ts = usecs_since_1970 - (int64) (POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) * USECS_PER_DAY;

	if (!ks_direct_values || (col->typid != TIMESTAMPOID && col->typid != TIMESTAMPTZOID) ||
		(col->typmod >= 0 && col->typmod < MAX_TIMESTAMP_PRECISION))
		return false;
	/* floor division: the day the instant is in */
	if (!direct_in_years(ts >= 0 ? ts / USECS_PER_DAY : -((-(ts + 1)) / USECS_PER_DAY) - 1))
		return false;
	sv->kind = KS_SLOT_DATUM;
	sv->typid = col->typid;
	sv->datum = (uintptr_t) TimestampGetDatum(ts);
	sv->text = NULL;
	return true;
}

/*
 * A JSON text into a jsonb column itself (direct values, a UTF-8
 * database): the jsonb jsonb_in makes of it, built from the scanner's
 * one-pass tree (ks_json_tree_scan) with the same pushJsonbValue calls as
 * jsonb_in's callbacks (keys sorted, the last of duplicates kept, numbers
 * through numeric_in, a scalar as a raw scalar array), in the row's
 * memory context (row_cxt).  False, nothing built, when the scanner is
 * not sure of the text (bad JSON, \u0000, more than 64 levels: jsonb_in
 * then decides, errors included), a string is too long for jsonb or a
 * number has an exponent or 1000 characters (numeric_in could refuse it).
 */
static bool
jsonb_push(JsonbParseState **st, const KsJson *j, JsonbIteratorToken as, JsonbValue **res)
{
	JsonbValue	v;

	switch (j->kind)
	{
		case KS_J_OBJECT:
		case KS_J_ARRAY:
			*res = pushJsonbValue(st, j->kind == KS_J_OBJECT ? WJB_BEGIN_OBJECT : WJB_BEGIN_ARRAY, NULL);
			for (int i = 0; i < j->n; i++)
			{
				if (j->kind == KS_J_OBJECT)
				{
					size_t		kl = strlen(j->keys[i]);

					if (kl > JENTRY_OFFLENMASK)
						return false;
					v.type = jbvString;
					v.val.string.len = (int) kl;
					v.val.string.val = j->keys[i];
					*res = pushJsonbValue(st, WJB_KEY, &v);
				}
				if (!jsonb_push(st, j->items[i], j->kind == KS_J_OBJECT ? WJB_VALUE : WJB_ELEM, res))
					return false;
			}
			*res = pushJsonbValue(st, j->kind == KS_J_OBJECT ? WJB_END_OBJECT : WJB_END_ARRAY, NULL);
			return true;
		case KS_J_STRING:
			{
				size_t		l = strlen(j->str);

				if (l > JENTRY_OFFLENMASK)
					return false;
				v.type = jbvString;
				v.val.string.len = (int) l;
				v.val.string.val = j->str;
			}
			break;
		case KS_J_NUMBER:
			/* one numeric_in could refuse (an exponent, 1000+ digits): jsonb_in's words then */
			if (strpbrk(j->str, "eE") != NULL || strlen(j->str) > 1000)
				return false;
			v.type = jbvNumeric;
			v.val.numeric = DatumGetNumeric(DirectFunctionCall3(numeric_in, CStringGetDatum(j->str),
																ObjectIdGetDatum(InvalidOid),
																Int32GetDatum(-1)));
			break;
		case KS_J_BOOL:
			v.type = jbvBool;
			v.val.boolean = j->str[0] == 't';
			break;
		case KS_J_NULL:
			v.type = jbvNull;
			break;
	}
	if (*st == NULL)
	{
		/* a scalar alone: jsonb_in's raw scalar array */
		JsonbValue	va;

		va.type = jbvArray;
		va.val.array.rawScalar = true;
		va.val.array.nElems = 1;
		*res = pushJsonbValue(st, WJB_BEGIN_ARRAY, &va);
		*res = pushJsonbValue(st, WJB_ELEM, &v);
		*res = pushJsonbValue(st, WJB_END_ARRAY, NULL);
	}
	else
		*res = pushJsonbValue(st, as, &v);
	return true;
}

static bool
direct_jsonb(KsColumn *col, const char *text, MemoryContext row_cxt, KsSlotValue *sv)
{
	const char *end;
	const char *after;
	KsJson	   *tree;
	JsonbParseState *st = NULL;
	JsonbValue *res = NULL;
	MemoryContext old;

	if (!ks_direct_values || col->typid != JSONBOID || GetDatabaseEncoding() != PG_UTF8)
		return false;
	end = text + strlen(text);
	tree = ks_json_tree_scan(ks_json_skip_ws(text, end), end, &after);
	if (tree == NULL || ks_json_skip_ws(after, end) != end)
		return false;
	if (!jsonb_push(&st, tree, WJB_VALUE, &res) || res == NULL)
		return false;
	old = MemoryContextSwitchTo(row_cxt);
	sv->datum = (uintptr_t) JsonbPGetDatum(JsonbValueToJsonb(res));
	MemoryContextSwitchTo(old);
	sv->kind = KS_SLOT_DATUM;
	sv->typid = JSONBOID;
	sv->text = NULL;
	return true;
}

/* a column's precision for time and timestamp (6 when not given) */
static int
time_precision(KsColumn *col)
{
	return col->typmod >= 0 ? col->typmod : 6;
}

/*
 * The decoded value of column c into the row, in the row's memory context:
 * the envelope itself runs in a scratch context reset after each message
 * (debezium_decode), so only the row's values outlive the message.
 */
static void
convert_out(KsTarget *t, KsRow *row, int c, KsSlotValue *sv)
{
	MemoryContext old = MemoryContextSwitchTo(GetMemoryChunkContext(row->values));

	ks_convert_field(t, row, c, sv);
	MemoryContextSwitchTo(old);
}

/*
 * Column c from a header or Kafka's metadata when it is mapped to one
 * (meta.c), converted in the row's memory context as convert_out does:
 * not in the scratch context reset after the message.
 */
static bool
meta_column(KsTarget *t, KsRow *row, int c)
{
	MemoryContext old = MemoryContextSwitchTo(GetMemoryChunkContext(row->values));
	bool		mapped = ks_convert_meta_column(t, row, c);

	MemoryContextSwitchTo(old);
	return mapped;
}

/*
 * Field f into column c: f's text rewritten by its encoding, then the
 * column type's input function (decode.c).
 */
static void
convert_cdc(KsTarget *t, KsRow *row, int c, KsCdcField *f)
{
	KsColumn   *col = &t->columns[c];
	Oid			base = getBaseType(col->typid);
	KsSlotValue sv;
	int64		iv;
	bool		is_int = f->kind == KS_SLOT_SCALAR && parse_int8(f->text, &iv);

	/* a composite's text, but for a variable scale decimal's {scale, value} */
	if (f->kind == KS_SLOT_COMPOSITE && f->text == NULL &&
		!(f->semantic ? is_semantic(f, "io.debezium.data.VariableScaleDecimal") : base == NUMERICOID))
		f->text = ev_composite_text(f->composite);
	sv.kind = f->kind;
	sv.text = f->text;

	if (f->kind == KS_SLOT_ABSENT || f->kind == KS_SLOT_NULL)
	{
		convert_out(t, row, c, &sv);
		return;
	}
	if (f->semantic)
	{
		/* the embedded schema names the encoding */
		if (is_semantic(f, "org.apache.kafka.connect.data.Decimal") && f->kind == KS_SLOT_STRING)
		{
			char	   *b;
			int			n;

			if (!b64(f->text, &b, &n))
				goto bad;
			sv.kind = KS_SLOT_SCALAR;
			sv.text = unscaled_to_text(b, n, Max(f->scale, 0));
		}
		else if (is_semantic(f, "io.debezium.data.VariableScaleDecimal") && f->kind == KS_SLOT_COMPOSITE)
			goto variable_scale;
		else if ((is_semantic(f, "io.debezium.time.Date") || is_semantic(f, "org.apache.kafka.connect.data.Date")) && is_int)
		{
			if (!direct_date(col, iv, &sv))
				sv.text = date_text(iv);
		}
		else if ((is_semantic(f, "io.debezium.time.Time") || is_semantic(f, "org.apache.kafka.connect.data.Time")) && is_int)
			sv.text = time_text(iv * 1000);
		else if (is_semantic(f, "io.debezium.time.MicroTime") && is_int)
			sv.text = time_text(iv);
		else if (is_semantic(f, "io.debezium.time.NanoTime") && is_int)
			sv.text = time_text(iv / 1000);
		else if ((is_semantic(f, "io.debezium.time.Timestamp") || is_semantic(f, "org.apache.kafka.connect.data.Timestamp")) && is_int)
		{
			if (!direct_timestamp(col, iv * 1000, &sv))
				sv.text = timestamp_text(iv * 1000, base == TIMESTAMPTZOID);
		}
		else if (is_semantic(f, "io.debezium.time.MicroTimestamp") && is_int)
		{
			if (!direct_timestamp(col, iv, &sv))
				sv.text = timestamp_text(iv, base == TIMESTAMPTZOID);
		}
		else if (is_semantic(f, "io.debezium.time.NanoTimestamp") && is_int)
		{
			if (!direct_timestamp(col, iv / 1000, &sv))
				sv.text = timestamp_text(iv / 1000, base == TIMESTAMPTZOID);
		}
		else if (is_semantic(f, "io.debezium.data.Json") && f->kind == KS_SLOT_STRING)
		{
			/* the JSON text itself, not a JSON string */
			if (!direct_jsonb(col, f->text, GetMemoryChunkContext(row->values), &sv))
				sv.kind = KS_SLOT_SCALAR;
		}
		else if (f->bytes && f->kind == KS_SLOT_STRING && base == BYTEAOID)
			goto bytes;
		convert_out(t, row, c, &sv);
		return;
	}

	/* no schema: the column's type decides (docs/design/cdc.md) */
	if (base == NUMERICOID && f->kind == KS_SLOT_STRING && !looks_numeric(f->text))
	{
		/* precise: base64 of the unscaled integer at the column's scale */
		char	   *b;
		int			n;

		if (!b64(f->text, &b, &n))
			goto bad;
		sv.kind = KS_SLOT_SCALAR;
		sv.text = unscaled_to_text(b, n, col->typmod >= VARHDRSZ ? ((col->typmod - VARHDRSZ) & 0x7ff) : 0);
	}
	else if (base == NUMERICOID && f->kind == KS_SLOT_COMPOSITE)
		goto variable_scale;
	else if (base == DATEOID && is_int)
	{
		if (!direct_date(col, iv, &sv))
			sv.text = date_text(iv);
	}
	else if ((base == TIMEOID || base == TIMETZOID) && is_int)
		sv.text = time_text(time_precision(col) <= 3 ? iv * 1000 : iv);
	else if ((base == TIMESTAMPOID || base == TIMESTAMPTZOID) && is_int)
	{
		int64		us = time_precision(col) <= 3 ? iv * 1000 : iv;

		if (!direct_timestamp(col, us, &sv))
			sv.text = timestamp_text(us, base == TIMESTAMPTZOID);
	}
	else if ((base == JSONBOID || base == JSONOID) && f->kind == KS_SLOT_STRING)
	{
		/* io.debezium.data.Json: the JSON text in a string */
		if (!direct_jsonb(col, f->text, GetMemoryChunkContext(row->values), &sv))
			sv.kind = KS_SLOT_SCALAR;
	}
	else if (base == BYTEAOID && f->kind == KS_SLOT_STRING)
		goto bytes;
	convert_out(t, row, c, &sv);
	return;

variable_scale:
	{
		/* {"scale": s, "value": base64 of the unscaled integer} */
		KsJson	   *o = f->composite;
		KsJson	   *s = ks_json_get(o, "scale");
		char	   *v = ev_string(o, "value");
		char	   *b;
		int			n;
		int			scale;

		if (s == NULL || s->kind != KS_J_NUMBER || v == NULL || !b64(v, &b, &n))
			goto bad;
		scale = DatumGetInt32(DirectFunctionCall1(numeric_int4,
												  DirectFunctionCall3(numeric_in, CStringGetDatum(s->str),
																	  ObjectIdGetDatum(InvalidOid),
																	  Int32GetDatum(-1))));
		sv.kind = KS_SLOT_SCALAR;
		sv.text = unscaled_to_text(b, n, scale);
		convert_out(t, row, c, &sv);
		return;
	}

bytes:
	{
		char	   *b;
		int			n;
		StringInfoData hex;

		if (!b64(f->text, &b, &n))
			goto bad;
		initStringInfo(&hex);
		appendStringInfoString(&hex, "\\x");
		for (int i = 0; i < n; i++)
			appendStringInfo(&hex, "%02x", (unsigned char) b[i]);
		sv.kind = KS_SLOT_SCALAR;
		sv.text = hex.data;
		convert_out(t, row, c, &sv);
		return;
	}

bad:
	if (f->text == NULL && f->kind == KS_SLOT_COMPOSITE)
		f->text = ev_composite_text(f->composite);
	row->reason = KS_INVALID_VALUE;
	row->detail = psprintf("field \"%s\" is not a valid %s: \"%s\" is not base64%s",
						   col->name, col->type_sql, f->text,
						   f->semantic ? "" : " (without an embedded schema, a string into a numeric column is a number or base64)");
}

/* ---- the event ---- */

/*
 * The source position of an event (common-cdc.md #2), as a numeric's text:
 * PostgreSQL source.lsn; MySQL (binlog file number, pos, row) as
 * file * 10^26 + pos * 10^6 + row; else source.ts_ms * 10^19 + the Kafka
 * offset (>= 0).  NULL when the event has none of them (source NULL or not
 * an object included).  The one rule: message_fate's
 * kafka_sink._cdc_position calls it too (lineage.c).
 */
static char *
cdc_position(KsJson *source, int64 offset)
{
	KsJson	   *lsn = ks_json_get(source, "lsn");
	KsJson	   *file = ks_json_get(source, "file");
	KsJson	   *pos = ks_json_get(source, "pos");
	KsJson	   *ts = ks_json_get(source, "ts_ms");

	if (lsn && lsn->kind == KS_J_NUMBER)
		return ev_number_text(lsn);
	if (file && file->kind == KS_J_STRING && pos && pos->kind == KS_J_NUMBER)
	{
		char	   *f = pstrdup(file->str);
		char	   *dot = strrchr(f, '.');
		KsJson	   *row = ks_json_get(source, "row");
		char	   *p = ev_number_text(pos);
		char	   *r = row && row->kind == KS_J_NUMBER ? ev_number_text(row) : "0";
		int64		fileno,
					pv,
					rv;

		if (dot && parse_int8(dot + 1, &fileno) && parse_int8(p, &pv) && parse_int8(r, &rv) &&
			fileno >= 0 && pv >= 0 && rv >= 0 && rv < 1000000)
			return psprintf("%lld%020lld%06lld", (long long) fileno, (long long) pv, (long long) rv);
	}
	if (ts && ts->kind == KS_J_NUMBER)
	{
		char	   *t = ev_number_text(ts);
		int64		tv;

		if (parse_int8(t, &tv) && tv >= 0)
			return psprintf("%lld%019lld", (long long) tv, (long long) offset);
	}
	return NULL;
}

/*
 * The same rule for a source block given as JSON text in the server's
 * encoding (message_fate's kafka_sink._cdc_position, lineage.c): NULL when
 * it is not a JSON object.
 */
char *
ks_cdc_position(const char *source_json, int64 offset)
{
	KsJson	   *source = ks_json_tree(pstrdup(source_json), (int) strlen(source_json),
								  GetDatabaseEncoding(), NULL);

	if (source == NULL || source->kind != KS_J_OBJECT)
		return NULL;
	return cdc_position(source, offset);
}

/*
 * {"schema", "payload"} (JsonConverter schemas.enable=true): the payload
 * (NULL when not an object) and the schema's entry; else the value itself
 * and no schema.
 */
static void
unwrap(KsJson *root, KsJson **payload, SchemaEntry **schema)
{
	KsJson	   *s = ev_object(root, "schema");
	KsJson	   *p = ks_json_get(root, "payload");

	if (s && p && ev_string(s, "type"))
	{
		*schema = schema_entry(s);
		*payload = p->kind == KS_J_OBJECT ? p : NULL;
	}
	else
	{
		*schema = NULL;
		*payload = root;
	}
}

/* JSON text -> jsonb, or NULL with *detail when it is not JSON */
static Jsonb *
parse_json(const char *data, size_t len, char **detail)
{
	JsonLexContext *lex;
	JsonParseErrorType err;
	char	   *text = pnstrdup(data, len);

	if (pg_encoding_verifymbstr(PG_UTF8, text, (int) len) != (int) len || strlen(text) != len)
	{
		*detail = pstrdup("the text is not valid UTF-8");
		return NULL;
	}
	if (GetDatabaseEncoding() != PG_UTF8)
		text = pg_any_to_server(text, len, PG_UTF8);
	lex = KS_JSON_LEXER(text, strlen(text), GetDatabaseEncoding());
	err = pg_parse_json(lex, &nullSemAction);
	if (err != JSON_SUCCESS)
	{
		*detail = json_errdetail(err, lex);
		return NULL;
	}
	return DatumGetJsonbP(DirectFunctionCall1(jsonb_in, CStringGetDatum(text)));
}

/* the literal lit (with its quotes) at p, then a colon: what follows, or NULL */
static const char *
expect_key(const char *p, const char *end, const char *lit)
{
	size_t		n = strlen(lit);

	p = ks_json_skip_ws(p, end);
	if ((size_t) (end - p) < n || memcmp(p, lit, n) != 0)
		return NULL;
	p = ks_json_skip_ws(p + n, end);
	if (p == end || *p != ':')
		return NULL;
	return ks_json_skip_ws(p + 1, end);
}

/*
 * The fast path (a UTF-8 database): data is exactly {"schema": S,
 * "payload": P} with S the text of a cached schema (so valid JSON, and
 * UTF-8, when it was parsed first) and P an object, which alone is
 * checked and parsed, in one pass (jsonwalk.c's scanner,
 * ks_json_tree_scan).  False when anything differs: the full parse then
 * decides.
 */
/*
 * The glue of parse_fast: where P starts when data starts {"schema": S,
 * "payload": with S a cached schema's text (*schema its entry), else NULL.
 * What follows is not looked at.
 */
static const char *
cached_payload_start(const char *data, size_t len, SchemaEntry **schema)
{
	const char *end = data + len;
	const char *p = ks_json_skip_ws(data, end);
	const char *s0,
			   *s1,
			   *p0;
	SchemaEntry *e;

	if (schemas == NULL || p == end || *p != '{')
		return NULL;
	if ((s0 = expect_key(p + 1, end, "\"schema\"")) == NULL || s0 == end || *s0 != '{')
		return NULL;

	/*
	 * The cached schema the text goes on with (memcmp: no scan of the
	 * schema's 3-4 kB byte by byte); a text that starts with a whole valid
	 * JSON object has that object there.  The one found moves to the front.
	 */
	for (SchemaEntry **prev = &schemas; (e = *prev) != NULL; prev = &e->next)
		if ((size_t) e->len < (size_t) (end - s0) && memcmp(s0, e->text, e->len) == 0)
		{
			*prev = e->next;
			e->next = schemas;
			schemas = e;
			break;
		}
	if (e == NULL)
		return NULL;
	s1 = s0 + e->len;
	p = ks_json_skip_ws(s1, end);
	if (p == end || *p != ',')
		return NULL;
	if ((p0 = expect_key(p + 1, end, "\"payload\"")) == NULL || p0 == end || *p0 != '{')
		return NULL;
	*schema = e;
	return p0;
}

static bool
parse_fast(const char *data, size_t len, KsJson **payload, SchemaEntry **schema)
{
	const char *end = data + len;
	const char *p,
			   *p0,
			   *p1;
	SchemaEntry *e;
	KsJson	   *root;

	/*
	 * jsonwalk's scanner builds P's tree in the same pass that checks it
	 * (valid JSON, UTF-8, without NUL), or gives up (NULL).  Its spans
	 * point into the message, which outlives the event's decoding.
	 */
	if ((p0 = cached_payload_start(data, len, &e)) == NULL ||
		(root = ks_json_tree_scan(p0, end, &p1)) == NULL)
		return false;
	p = ks_json_skip_ws(p1, end);
	if (p == end || *p != '}' || ks_json_skip_ws(p + 1, end) != end)
		return false;
	*payload = root;
	*schema = e;
	return true;
}

/*
 * For routing (route.c): when data is {"schema": S, "payload": P}, S the
 * text of a schema this process has cached (a UTF-8 database: S was
 * valid JSON in that very text; a schema not cached yet is interpreted
 * and cached first), the span of P: [*p0, *p1), between the
 * glue and the whitespace before the closing '}'; P itself unchecked.
 * False otherwise.  Walking P alone then captures what walking data
 * captures under payload, when P is an object (and data valid JSON).
 */
bool
ks_cdc_cached_payload(const char *data, size_t len, const char **p0, const char **p1)
{
	const char *e = data + len;
	SchemaEntry *schema;

	if (GetDatabaseEncoding() != PG_UTF8)
		return false;
	if ((*p0 = cached_payload_start(data, len, &schema)) == NULL)
	{
		/*
		 * A {"schema": ... event whose schema is not cached yet (the first
		 * of its table, routed before any is decoded): its schema is
		 * interpreted now, as the envelope would (unwrap), when the
		 * scanner builds the event's tree; the envelope then finds it
		 * cached.  Other values (bare events, the payload first) are left
		 * to the walk of the whole value.
		 */
		const char *v = ks_json_skip_ws(data, e);
		const char *after;
		KsJson	   *root;

		if (v == e || *v != '{' || expect_key(v + 1, e, "\"schema\"") == NULL ||
			(root = ks_json_tree_scan(v, e, &after)) == NULL || ks_json_skip_ws(after, e) != e ||
			root->kind != KS_J_OBJECT)
			return false;
		{
			KsJson	   *payload;

			unwrap(root, &payload, &schema);
		}
		if (schema == NULL || (*p0 = cached_payload_start(data, len, &schema)) == NULL)
			return false;
	}
	while (e > *p0 && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\n' || e[-1] == '\r'))
		e--;
	if (e == *p0 || e[-1] != '}')
		return false;
	e--;
	while (e > *p0 && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\n' || e[-1] == '\r'))
		e--;
	*p1 = e;
	return e > *p0;
}

/*
 * A change event (or key) as its payload and schema (unwrap): KS_OK,
 * KS_INVALID_JSON with *detail, or KS_NOT_AN_OBJECT.  data is the
 * message's UTF-8, or with server_text an Avro event's JSON twin in the
 * database's encoding.  What the tree parse refuses is refused in the
 * words (or with the ERROR) of the parse before it: parse_json, jsonb_in.
 */
static KsReason
read_event(const char *data, size_t len, bool server_text, KsJson **payload,
		   SchemaEntry **schema, char **detail)
{
	char	   *text;
	KsJson	   *root;

	if (GetDatabaseEncoding() == PG_UTF8 && parse_fast(data, len, payload, schema))
		return KS_OK;
	/* the parses below recurse once per level (jsontree.h) */
	if (ks_json_nests_deeper(data, len, KS_JSON_MAX_NESTING))
	{
		*detail = psprintf("the text nests arrays and objects more than %d levels deep",
						   KS_JSON_MAX_NESTING);
		return KS_INVALID_JSON;
	}
	if (server_text)
	{
		text = pnstrdup(data, len);
		root = ks_json_tree(text, len, GetDatabaseEncoding(), NULL);
		if (root == NULL)
		{
			(void) DirectFunctionCall1(jsonb_in, CStringGetDatum(text));
			*detail = pstrdup("the text is not valid JSON");
			return KS_INVALID_JSON;
		}
	}
	else
	{
		text = pnstrdup(data, len);
		if (pg_encoding_verifymbstr(PG_UTF8, text, (int) len) != (int) len || strlen(text) != len)
		{
			*detail = pstrdup("the text is not valid UTF-8");
			return KS_INVALID_JSON;
		}
		if (GetDatabaseEncoding() != PG_UTF8)
			text = pg_any_to_server(text, len, PG_UTF8);
		root = ks_json_tree(text, strlen(text), GetDatabaseEncoding(), NULL);
		if (root == NULL)
		{
			if (parse_json(data, len, detail) != NULL)
				*detail = pstrdup("the text is not valid JSON");
			return KS_INVALID_JSON;
		}
	}
	if (root->kind != KS_J_OBJECT)
		return KS_NOT_AN_OBJECT;
	unwrap(root, payload, schema);
	return KS_OK;
}

/* whether the pipeline reads JsonSchemaConverter's values (value_format json_schema) */
static bool
json_schema_value(KsPipeline *p)
{
	return p->contract.value_fmt != NULL && strcmp(p->contract.value_fmt->name, "json_schema") == 0;
}

/* The key columns of a delete: the message key's fields, else before's. */
static void
delete_key(KsTarget *t, KsPipeline *p, KsRow *row, CdcStruct *before)
{
	KsMessage  *m = row->msg;
	CdcStruct	key = {0};
	const char *from = "before";

	if (m->key != NULL)
	{
		char	   *detail = NULL;
		KsReason	reason = KS_INVALID_JSON;
		char	   *avro = NULL;
		KsJson	   *payload;
		SchemaEntry *schema;

		if (ks_cdc_avro(p, true))
		{
			avro = ks_cdc_avro_event_text(p, true, m->key, m->key_len, &reason, &detail);
			if (avro != NULL)
				reason = read_event(avro, strlen(avro), true, &payload, &schema, &detail);
		}
		else if (json_schema_value(p) && m->key_len >= 5 && m->key[0] == 0)
		{
			/* a key in the wire frame too (JsonSchemaConverter); JSON text never starts with NUL */
			const char *data = m->key;
			size_t		len = m->key_len;

			reason = ks_json_schema_payload(p, true, &data, &len, &detail);
			if (reason == KS_OK)
				reason = read_event(data, len, false, &payload, &schema, &detail);
		}
		else
			reason = read_event(m->key, m->key_len, false, &payload, &schema, &detail);
		if (reason != KS_OK && reason != KS_NOT_AN_OBJECT)
		{
			row->reason = reason;
			row->detail = psprintf("message key: %s", detail);
			return;
		}
		if (reason == KS_OK)
		{
			key.value = payload;
			key.schema = schema ? &schema->self : NULL;
			from = "the message key";
		}
	}
	if (key.value == NULL)
		key = *before;
	for (int k = 0; k < t->nkeys && row->reason == KS_OK; k++)
	{
		int			c = t->key_index[k];
		KsCdcField	f;

		read_field(&key, t->columns[c].name, &f);
		convert_cdc(t, row, c, &f);
		if (row->reason == KS_OK && (!row->present[c] || row->nulls[c]))
		{
			row->reason = KS_NULL_KEY;
			row->detail = psprintf("key field \"%s\" of the delete is missing or null in %s",
								   t->columns[c].name, from);
		}
	}
}

static void
set_position(KsTarget *t, KsRow *row, const char *pos)
{
	KsSlotValue sv = {.kind = KS_SLOT_SCALAR, .text = (char *) pos};

	convert_out(t, row, t->order_index, &sv);
}

/*
 * Mode history's _valid_from_at (docs/history.md, "Reading by time"): the
 * event's source commit time, the first of source.ts_ns, source.ts_us,
 * source.ts_ms (the time of the change in the source database), then the
 * envelope's own ts_ns, ts_us, ts_ms (when the connector processed it), in
 * microseconds; NULL when none is an integer in timestamptz's range.
 */
static void
set_commit_time(KsTarget *t, KsRow *row, KsJson *payload, KsJson *source)
{
	static const char *const names[3] = {"ts_ns", "ts_us", "ts_ms"};
	int			at = t->at_index;

	if (at < 0)
		return;
	row->present[at] = true;
	row->nulls[at] = true;
	for (int w = 0; w < 2; w++)
	{
		KsJson	   *o = w == 0 ? source : payload;

		for (int u = 0; o != NULL && u < 3; u++)
		{
			KsJson	   *v = ks_json_get(o, names[u]);
			int64		n;
			int64		us;
			TimestampTz ts;

			if (v == NULL || v->kind != KS_J_NUMBER || !parse_int8(v->str, &n))
				continue;
			us = u == 0 ? n / 1000 : u == 1 ? n : n * 1000;
			if (u == 2 && (n > PG_INT64_MAX / 1000 || n < PG_INT64_MIN / 1000))
				continue;
			ts = us - (int64) (POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) * USECS_PER_DAY;
			if (!IS_VALID_TIMESTAMP(ts))
				continue;
			row->values[at] = TimestampTzGetDatum(ts);
			row->nulls[at] = false;
			return;
		}
	}
}

/*
 * Debezium's placeholder for a value the source did not send: an unchanged
 * TOASTed column of an update under REPLICA IDENTITY DEFAULT (PostgreSQL),
 * or a column left out by the source.  Its default is this text, and a
 * connector's unavailable.value.placeholder another one (the pipeline's
 * unavailable_value_placeholder); a bytes column carries the same octets
 * in base64, an array column a list of it.  Such a column is absent from
 * the row (the MERGE keeps the replica's value), never written as the
 * placeholder.
 */
#define KS_DBZ_UNAVAILABLE "__debezium_unavailable_value"

/* the placeholder and its base64, for the pipeline being decoded */
static char *placeholder_text = NULL;
static char *placeholder_b64 = NULL;

static void
set_placeholder(KsPipeline *p)
{
	const char *want = p->contract.unavailable_placeholder ? p->contract.unavailable_placeholder : KS_DBZ_UNAVAILABLE;
	int			len = strlen(want);
	int			cap = pg_b64_enc_len(len) + 1;
	int			n;

	if (placeholder_text != NULL && strcmp(placeholder_text, want) == 0)
		return;
	if (placeholder_text != NULL)
	{
		pfree(placeholder_text);
		pfree(placeholder_b64);
	}
	placeholder_text = MemoryContextStrdup(TopMemoryContext, want);
	placeholder_b64 = MemoryContextAlloc(TopMemoryContext, cap);
	/* const void *: the source is const char * before 18, const uint8 * from 18 */
	n = pg_b64_encode((const void *) want, len, placeholder_b64, cap);
	placeholder_b64[n < 0 ? 0 : n] = '\0';
}

static bool
is_placeholder(const char *s)
{
	return strcmp(s, placeholder_text) == 0 || strcmp(s, placeholder_b64) == 0;
}

static bool
is_unavailable(const KsCdcField *f)
{
	/* an array of it: what jsonb printed as ["<placeholder>"] */
	if (f->kind == KS_SLOT_COMPOSITE)
		return f->composite->kind == KS_J_ARRAY && f->composite->n == 1 &&
			f->composite->items[0]->kind == KS_J_STRING &&
			is_placeholder(f->composite->items[0]->str);
	if (f->text == NULL)
		return false;
	if (f->kind == KS_SLOT_STRING)
		return is_placeholder(f->text);
	return false;
}

static void
decode_event(KsTarget *t, KsPipeline *p, KsRow *row)
{
	KsMessage  *m = row->msg;
	KsJson	   *payload;
	SchemaEntry *schema;
	KsJson	   *source;
	char	   *detail = NULL;
	char	   *op;
	char	   *pos;
	CdcStruct	after;
	CdcStruct	before;
	bool	   *unavailable = NULL;
	KsReason	reason;

	if (m->value == NULL)
	{
		/* the tombstone after a delete: the delete did the work */
		row->skipped = true;
		return;
	}
	if (ks_row_too_large(row))
		return;
	if (ks_cdc_avro(p, false))
	{
		/* Avro (AvroConverter): read as the JSON twin it translates into */
		char	   *text = ks_cdc_avro_event_text(p, false, m->value, m->value_len, &reason, &detail);

		if (text == NULL)
		{
			row->reason = reason;
			row->detail = detail;
			return;
		}
		reason = read_event(text, strlen(text), true, &payload, &schema, &detail);
	}
	else if (json_schema_value(p))
	{
		/* JsonSchemaConverter: the bare event (no embedded schema) in the wire frame */
		const char *data = m->value;
		size_t		len = m->value_len;

		reason = ks_json_schema_payload(p, false, &data, &len, &detail);
		if (reason == KS_OK)
			reason = read_event(data, len, false, &payload, &schema, &detail);
	}
	else if (strcmp(p->contract.value_fmt ? p->contract.value_fmt->name : "json", "json") != 0)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("envelope debezium does not read value_format %s", p->contract.value_fmt->name),
				 errhint("Use value_format json (JsonConverter), avro (AvroConverter) or json_schema (JsonSchemaConverter).")));
	else
		reason = read_event(m->value, m->value_len, false, &payload, &schema, &detail);
	if (reason == KS_NOT_AN_OBJECT)
	{
		row->reason = KS_NOT_AN_OBJECT;
		row->detail = pstrdup("the change event is not a JSON object");
		return;
	}
	if (reason != KS_OK)
	{
		row->reason = reason;
		row->detail = detail;
		return;
	}
	op = ev_string(payload, "op");
	if (op == NULL)
	{
		row->reason = KS_INVALID_ENVELOPE;
		row->detail = pstrdup("the change event has no \"op\" string");
		return;
	}
	source = ev_object(payload, "source");
	pos = cdc_position(source, m->offset);
	if (pos == NULL)
	{
		row->reason = KS_INVALID_ENVELOPE;
		row->detail = pstrdup("the change event's \"source\" has no position (lsn; file and pos; or ts_ms)");
		return;
	}
	memset(&after, 0, sizeof(after));
	memset(&before, 0, sizeof(before));
	after.value = ev_object(payload, "after");
	if (schema != NULL)
	{
		/* the envelope's own struct: its after and before fields, interpreted once per schema text */
		after.schema = &schema->after;
		before.schema = &schema->before;
	}
	before.value = ev_object(payload, "before");

	if (strcmp(op, "c") == 0 || strcmp(op, "r") == 0 || strcmp(op, "u") == 0)
	{
		if (after.value == NULL)
		{
			row->reason = KS_INVALID_ENVELOPE;
			row->detail = psprintf("the change event of op \"%s\" has no \"after\" object", op);
			return;
		}
		set_placeholder(p);
		for (int i = 0; i < t->ncolumns && row->reason == KS_OK; i++)
		{
			KsCdcField	f;

			if (t->columns[i].lineage || i == t->order_index)
				continue;
			if (meta_column(t, row, i))
				continue;		/* mapped to a header or Kafka's metadata */
			read_field(&after, t->columns[i].name, &f);
			if (!t->columns[i].is_key && is_unavailable(&f))
			{
				/* not sent: the replica keeps its value (row->present false) */
				if (unavailable == NULL)
					unavailable = palloc0(sizeof(bool) * t->ncolumns);
				unavailable[i] = true;
				continue;
			}
			convert_cdc(t, row, i, &f);
		}
		if (row->reason != KS_OK)
			return;
		set_position(t, row, pos);
		set_commit_time(t, row, payload, source);
		for (int i = 0; i < t->ncolumns; i++)
		{
			KsColumn   *c = &t->columns[i];

			if (unavailable != NULL && unavailable[i])
				continue;		/* an insert without it fails on the NOT NULL */
			if (c->is_key && (!row->present[i] || row->nulls[i]))
			{
				row->reason = KS_NULL_KEY;
				row->detail = psprintf("key field \"%s\" is missing or null in \"after\"", c->name);
				return;
			}
			if (c->required && (!row->present[i] || row->nulls[i]))
			{
				row->reason = row->present[i] ? KS_CONSTRAINT_VIOLATION : KS_MISSING_REQUIRED_FIELD;
				row->detail = psprintf(row->present[i] ? "field \"%s\" is null but the column is NOT NULL" :
									   "required field \"%s\" is missing in \"after\"", c->name);
				return;
			}
		}
	}
	else if (strcmp(op, "d") == 0)
	{
		delete_key(t, p, row, &before);
		if (row->reason != KS_OK)
			return;
		set_position(t, row, pos);
		set_commit_time(t, row, payload, source);
		row->is_delete = true;
	}
	else if (strcmp(op, "t") == 0)
	{
		set_position(t, row, pos);
		set_commit_time(t, row, payload, source);
		row->is_truncate = true;
	}
	else
	{
		row->reason = KS_INVALID_ENVELOPE;
		row->detail = psprintf("unknown op \"%s\" (known: c, r, u, d, t)", op);
	}
}

/* reset after each message; lives as long as the process */
static MemoryContext scratch_cxt = NULL;

/*
 * One change event.  Everything the event's parse and its fields allocate
 * (the value's text and jsonb, the schema lookups, the rewritten texts) is
 * in scratch_cxt, reset when the message is done: a batch of big
 * schema-embedded events (4 kB of JSON each, ~100 kB of such allocations)
 * used to keep all of it until the batch ended.  The row (ks_row_init's
 * arrays, the converted values, its detail) is in the caller's context.
 * An input function's ERROR leaves the scratch as it is: the next message
 * resets it before it starts.
 */
static void
debezium_decode(KsTarget *t, KsPipeline *p, KsRow *row)
{
	MemoryContext old;

	ks_row_init(t, row);
	if (t->order_index < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_TABLE_DEFINITION),
				 errmsg("pipeline \"%s\" with envelope debezium has no source position column", p->name)));
	if (scratch_cxt == NULL)
		scratch_cxt = AllocSetContextCreate(TopMemoryContext, "kafka_sink debezium event",
											ALLOCSET_DEFAULT_SIZES);
	else
		MemoryContextReset(scratch_cxt);
	old = MemoryContextSwitchTo(scratch_cxt);
	decode_event(t, p, row);
	MemoryContextSwitchTo(old);
	if (row->detail != NULL)
		row->detail = pstrdup(row->detail);
	MemoryContextReset(scratch_cxt);
}

const KsEnvelope ks_envelope_debezium = {"debezium", debezium_decode};
