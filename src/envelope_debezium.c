/*-------------------------------------------------------------------------
 *
 * envelope_debezium.c
 *		The Debezium envelope: a message value is a change event
 *		{"before", "after", "source", "op", ...}, bare or wrapped by
 *		JsonConverter's schemas.enable=true as {"schema", "payload"}.
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
 * (docs/design-notes.md, "CDC: the Debezium envelope and its guards").
 *
 * Fields are read through KsCdcField (a kind, a text, the schema's
 * semantic name and scale), which is what an Avro-encoded change event
 * would fill from its writer schema; only JSON fills it today.
 *
 * Owns: what a change event means.  Must not: apply rows or write the
 * catalog (apply.c), know a target's statements.
 *
 *-------------------------------------------------------------------------
 */
#include "kafka_sink.h"
#include "envelope.h"
#include "decode.h"
#include "format.h"

#include "catalog/pg_type.h"
#include "common/base64.h"
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

/* One field of a change event, as a format reads it. */
typedef struct KsCdcField
{
	KsSlotKind	kind;
	char	   *text;			/* string unescaped, scalar token, composite JSON */
	JsonbValue *composite;		/* KS_SLOT_COMPOSITE: the value itself (JSON) */
	const char *semantic;		/* the schema's name, e.g. io.debezium.time.Date */
	int			scale;			/* org.apache.kafka.connect.data.Decimal: scale, else -1 */
	bool		bytes;			/* the schema says bytes (base64 in JSON) */
} KsCdcField;

/* A struct of the event (after, before, the key) and its schema, if any. */
typedef struct CdcStruct
{
	JsonbContainer *value;		/* NULL: absent or null */
	JsonbContainer *schema;		/* its struct schema, or NULL */
	/* the schema's fields, listed once (index_fields) */
	bool		indexed;
	int			nfields;
	int			last;			/* where the previous lookup matched */
	char	  **names;
	JsonbContainer **schemas;
} CdcStruct;

static JsonbValue *
get_key(JsonbContainer *c, const char *key)
{
	JsonbValue	k;

	if (c == NULL || !JsonContainerIsObject(c))
		return NULL;
	k.type = jbvString;
	k.val.string.val = (char *) key;
	k.val.string.len = strlen(key);
	return findJsonbValueFromContainer(c, JB_FOBJECT, &k);
}

static JsonbContainer *
get_object(JsonbContainer *c, const char *key)
{
	JsonbValue *v = get_key(c, key);

	if (v == NULL || v->type != jbvBinary || !JsonContainerIsObject(v->val.binary.data))
		return NULL;
	return v->val.binary.data;
}

static char *
get_string(JsonbContainer *c, const char *key)
{
	JsonbValue *v = get_key(c, key);

	if (v == NULL || v->type != jbvString)
		return NULL;
	return pnstrdup(v->val.string.val, v->val.string.len);
}

/*
 * The schemas of struct st's fields, listed once per event: looking each
 * column up by walking the schema's "fields" array was quadratic in the
 * columns, with a string copy per comparison.  The envelope's own schema
 * (its after and before fields) is looked up the same way.
 */
static void
index_fields(CdcStruct *st)
{
	JsonbValue *fields = get_key(st->schema, "fields");
	JsonbIterator *it;
	JsonbValue	v;
	JsonbIteratorToken tok;
	int			cap;

	st->indexed = true;
	st->nfields = 0;
	st->last = 0;
	if (fields == NULL || fields->type != jbvBinary || !JsonContainerIsArray(fields->val.binary.data))
		return;
	cap = Max(JsonContainerSize(fields->val.binary.data), 1);
	st->names = palloc(sizeof(char *) * cap);
	st->schemas = palloc(sizeof(JsonbContainer *) * cap);
	it = JsonbIteratorInit(fields->val.binary.data);
	while ((tok = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
	{
		char	   *f;

		if (tok != WJB_ELEM || v.type != jbvBinary || !JsonContainerIsObject(v.val.binary.data))
			continue;
		f = get_string(v.val.binary.data, "field");
		if (f == NULL || st->nfields >= cap)
			continue;
		st->names[st->nfields] = f;
		st->schemas[st->nfields++] = v.val.binary.data;
	}
}

/* The schema of field name of struct st, or NULL */
static JsonbContainer *
struct_field_schema(CdcStruct *st, const char *name)
{
	if (st->schema == NULL)
		return NULL;
	if (!st->indexed)
		index_fields(st);
	/* columns mostly come in the order of the fields: start after the last match */
	for (int k = 0; k < st->nfields; k++)
	{
		int			i = (st->last + k) % st->nfields;

		/* Connect's schemas have unique field names (SchemaBuilder refuses duplicates) */
		if (strcmp(st->names[i], name) == 0)
		{
			st->last = i + 1;
			return st->schemas[i];
		}
	}
	return NULL;
}

/* Field name of struct st as a KsCdcField. */
static void
read_field(CdcStruct *st, const char *name, KsCdcField *f)
{
	JsonbValue *v = get_key(st->value, name);
	JsonbContainer *fs = struct_field_schema(st, name);

	memset(f, 0, sizeof(*f));
	f->scale = -1;
	if (fs)
	{
		JsonbContainer *params = get_object(fs, "parameters");
		char	   *type = get_string(fs, "type");
		char	   *sc = params ? get_string(params, "scale") : NULL;

		f->semantic = get_string(fs, "name");
		f->bytes = type && strcmp(type, "bytes") == 0;
		if (sc)
			f->scale = pg_strtoint32(sc);
	}
	if (v == NULL)
	{
		f->kind = KS_SLOT_ABSENT;
		return;
	}
	switch (v->type)
	{
		case jbvNull:
			f->kind = KS_SLOT_NULL;
			break;
		case jbvString:
			f->kind = KS_SLOT_STRING;
			f->text = pnstrdup(v->val.string.val, v->val.string.len);
			break;
		case jbvNumeric:
			f->kind = KS_SLOT_SCALAR;
			f->text = DatumGetCString(DirectFunctionCall1(numeric_out, NumericGetDatum(v->val.numeric)));
			break;
		case jbvBool:
			f->kind = KS_SLOT_SCALAR;
			f->text = pstrdup(v->val.boolean ? "true" : "false");
			break;
		case jbvBinary:
			f->kind = KS_SLOT_COMPOSITE;
			f->composite = v;
			f->text = JsonbToCString(NULL, v->val.binary.data, v->val.binary.len);
			break;
		default:
			f->kind = KS_SLOT_NULL;
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

/* big-endian two's-complement bytes at scale as a numeric's text */
static char *
unscaled_to_text(const char *bytes, int len, int scale)
{
	Datum		n = DirectFunctionCall1(int4_numeric, Int32GetDatum(0));
	Datum		b256 = DirectFunctionCall1(int4_numeric, Int32GetDatum(256));
	char	   *digits;
	bool		neg;
	StringInfoData out;
	int			nd;

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
	digits = DatumGetCString(DirectFunctionCall1(numeric_out, n));
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
 * Field f into column c: f's text rewritten by its encoding, then the
 * column type's input function (decode.c).
 */
static void
convert_cdc(KsTarget *t, KsRow *row, int c, KsCdcField *f)
{
	KsColumn   *col = &t->columns[c];
	Oid			base = getBaseType(col->typid);
	KsSlotValue sv = {.kind = f->kind, .text = f->text};
	int64		iv;
	bool		is_int = f->kind == KS_SLOT_SCALAR && parse_int8(f->text, &iv);

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
			sv.text = date_text(iv);
		else if ((is_semantic(f, "io.debezium.time.Time") || is_semantic(f, "org.apache.kafka.connect.data.Time")) && is_int)
			sv.text = time_text(iv * 1000);
		else if (is_semantic(f, "io.debezium.time.MicroTime") && is_int)
			sv.text = time_text(iv);
		else if (is_semantic(f, "io.debezium.time.NanoTime") && is_int)
			sv.text = time_text(iv / 1000);
		else if ((is_semantic(f, "io.debezium.time.Timestamp") || is_semantic(f, "org.apache.kafka.connect.data.Timestamp")) && is_int)
			sv.text = timestamp_text(iv * 1000, base == TIMESTAMPTZOID);
		else if (is_semantic(f, "io.debezium.time.MicroTimestamp") && is_int)
			sv.text = timestamp_text(iv, base == TIMESTAMPTZOID);
		else if (is_semantic(f, "io.debezium.time.NanoTimestamp") && is_int)
			sv.text = timestamp_text(iv / 1000, base == TIMESTAMPTZOID);
		else if (is_semantic(f, "io.debezium.data.Json") && f->kind == KS_SLOT_STRING)
			sv.kind = KS_SLOT_SCALAR;	/* the JSON text itself, not a JSON string */
		else if (f->bytes && f->kind == KS_SLOT_STRING && base == BYTEAOID)
			goto bytes;
		convert_out(t, row, c, &sv);
		return;
	}

	/* no schema: the column's type decides (docs/design-notes.md) */
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
		sv.text = date_text(iv);
	else if ((base == TIMEOID || base == TIMETZOID) && is_int)
		sv.text = time_text(time_precision(col) <= 3 ? iv * 1000 : iv);
	else if ((base == TIMESTAMPOID || base == TIMESTAMPTZOID) && is_int)
		sv.text = timestamp_text(time_precision(col) <= 3 ? iv * 1000 : iv, base == TIMESTAMPTZOID);
	else if ((base == JSONBOID || base == JSONOID) && f->kind == KS_SLOT_STRING)
		sv.kind = KS_SLOT_SCALAR;	/* io.debezium.data.Json: the JSON text in a string */
	else if (base == BYTEAOID && f->kind == KS_SLOT_STRING)
		goto bytes;
	convert_out(t, row, c, &sv);
	return;

variable_scale:
	{
		/* {"scale": s, "value": base64 of the unscaled integer} */
		JsonbContainer *o = f->composite->val.binary.data;
		JsonbValue *s = get_key(o, "scale");
		char	   *v = get_string(o, "value");
		char	   *b;
		int			n;
		int			scale;

		if (s == NULL || s->type != jbvNumeric || v == NULL || !b64(v, &b, &n))
			goto bad;
		scale = DatumGetInt32(DirectFunctionCall1(numeric_int4, NumericGetDatum(s->val.numeric)));
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
char *
ks_cdc_position(JsonbContainer *source, int64 offset)
{
	JsonbValue *lsn = get_key(source, "lsn");
	JsonbValue *file = get_key(source, "file");
	JsonbValue *pos = get_key(source, "pos");
	JsonbValue *ts = get_key(source, "ts_ms");

	if (lsn && lsn->type == jbvNumeric)
		return DatumGetCString(DirectFunctionCall1(numeric_out, NumericGetDatum(lsn->val.numeric)));
	if (file && file->type == jbvString && pos && pos->type == jbvNumeric)
	{
		char	   *f = pnstrdup(file->val.string.val, file->val.string.len);
		char	   *dot = strrchr(f, '.');
		JsonbValue *row = get_key(source, "row");
		char	   *p = DatumGetCString(DirectFunctionCall1(numeric_out, NumericGetDatum(pos->val.numeric)));
		char	   *r = row && row->type == jbvNumeric ?
			DatumGetCString(DirectFunctionCall1(numeric_out, NumericGetDatum(row->val.numeric))) : "0";
		int64		fileno,
					pv,
					rv;

		if (dot && parse_int8(dot + 1, &fileno) && parse_int8(p, &pv) && parse_int8(r, &rv) &&
			fileno >= 0 && pv >= 0 && rv >= 0 && rv < 1000000)
			return psprintf("%lld%020lld%06lld", (long long) fileno, (long long) pv, (long long) rv);
	}
	if (ts && ts->type == jbvNumeric)
	{
		char	   *t = DatumGetCString(DirectFunctionCall1(numeric_out, NumericGetDatum(ts->val.numeric)));
		int64		tv;

		if (parse_int8(t, &tv) && tv >= 0)
			return psprintf("%lld%019lld", (long long) tv, (long long) offset);
	}
	return NULL;
}

/* {"schema", "payload"} (JsonConverter schemas.enable=true): both parts; else the value itself */
static void
unwrap(JsonbContainer *root, JsonbContainer **payload, JsonbContainer **schema)
{
	JsonbContainer *s = get_object(root, "schema");
	JsonbValue *p = get_key(root, "payload");

	if (s && p && get_string(s, "type"))
	{
		*schema = s;
		*payload = (p->type == jbvBinary && JsonContainerIsObject(p->val.binary.data)) ?
			p->val.binary.data : NULL;
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
#if PG_VERSION_NUM >= 170000
	lex = makeJsonLexContextCstringLen(NULL, text, strlen(text), GetDatabaseEncoding(), true);
#else
	lex = makeJsonLexContextCstringLen(text, strlen(text), GetDatabaseEncoding(), true);
#endif
	err = pg_parse_json(lex, &nullSemAction);
	if (err != JSON_SUCCESS)
	{
		*detail = json_errdetail(err, lex);
		return NULL;
	}
	return DatumGetJsonbP(DirectFunctionCall1(jsonb_in, CStringGetDatum(text)));
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
		Jsonb	   *kj = ks_cdc_avro(p, true) ?
			ks_cdc_avro_event(p, true, m->key, m->key_len, &reason, &detail) :
			parse_json(m->key, m->key_len, &detail);

		if (kj == NULL)
		{
			row->reason = reason;
			row->detail = psprintf("message key: %s", detail);
			return;
		}
		if (JB_ROOT_IS_OBJECT(kj))
		{
			unwrap(&kj->root, &key.value, &key.schema);
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
 * Debezium's placeholder for a value the source did not send: an unchanged
 * TOASTed column of an update under REPLICA IDENTITY DEFAULT (PostgreSQL),
 * or a column left out by the source.  Its default is this text; a bytes
 * column carries the same octets in base64, an array column a list of it.
 * Such a column is absent from the row (the MERGE keeps the replica's
 * value), never written as the placeholder.
 */
#define KS_DBZ_UNAVAILABLE "__debezium_unavailable_value"
#define KS_DBZ_UNAVAILABLE_B64 "X19kZWJleml1bV91bmF2YWlsYWJsZV92YWx1ZQ=="

static bool
is_unavailable(const KsCdcField *f)
{
	if (f->text == NULL)
		return false;
	if (f->kind == KS_SLOT_STRING)
		return strcmp(f->text, KS_DBZ_UNAVAILABLE) == 0 ||
			strcmp(f->text, KS_DBZ_UNAVAILABLE_B64) == 0;
	if (f->kind == KS_SLOT_COMPOSITE)
		return strcmp(f->text, "[\"" KS_DBZ_UNAVAILABLE "\"]") == 0 ||
			strcmp(f->text, "[\"" KS_DBZ_UNAVAILABLE_B64 "\"]") == 0;
	return false;
}

static void
decode_event(KsTarget *t, KsPipeline *p, KsRow *row)
{
	KsMessage  *m = row->msg;
	Jsonb	   *root;
	JsonbContainer *payload;
	JsonbContainer *schema;
	JsonbContainer *source;
	char	   *detail = NULL;
	char	   *op;
	char	   *pos;
	CdcStruct	after;
	CdcStruct	before;
	bool	   *unavailable = NULL;

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
		KsReason	reason;

		root = ks_cdc_avro_event(p, false, m->value, m->value_len, &reason, &detail);
		if (root == NULL)
		{
			row->reason = reason;
			row->detail = detail;
			return;
		}
	}
	else if (strcmp(p->value_fmt ? p->value_fmt->name : "json", "json") != 0)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("envelope debezium does not read value_format %s", p->value_fmt->name),
				 errhint("Use value_format json (JsonConverter) or avro (AvroConverter).")));
	else
	{
		root = parse_json(m->value, m->value_len, &detail);
		if (root == NULL)
		{
			row->reason = KS_INVALID_JSON;
			row->detail = detail;
			return;
		}
	}
	if (!JB_ROOT_IS_OBJECT(root))
	{
		row->reason = KS_NOT_AN_OBJECT;
		row->detail = pstrdup("the change event is not a JSON object");
		return;
	}
	unwrap(&root->root, &payload, &schema);
	op = get_string(payload, "op");
	if (op == NULL)
	{
		row->reason = KS_INVALID_ENVELOPE;
		row->detail = pstrdup("the change event has no \"op\" string");
		return;
	}
	source = get_object(payload, "source");
	pos = ks_cdc_position(source, m->offset);
	if (pos == NULL)
	{
		row->reason = KS_INVALID_ENVELOPE;
		row->detail = pstrdup("the change event's \"source\" has no position (lsn; file and pos; or ts_ms)");
		return;
	}
	memset(&after, 0, sizeof(after));
	memset(&before, 0, sizeof(before));
	after.value = get_object(payload, "after");
	if (schema != NULL)
	{
		/* the envelope's own struct: its fields listed once for both */
		CdcStruct	env;

		memset(&env, 0, sizeof(env));
		env.schema = schema;
		after.schema = struct_field_schema(&env, "after");
		before.schema = struct_field_schema(&env, "before");
	}
	before.value = get_object(payload, "before");

	if (strcmp(op, "c") == 0 || strcmp(op, "r") == 0 || strcmp(op, "u") == 0)
	{
		if (after.value == NULL)
		{
			row->reason = KS_INVALID_ENVELOPE;
			row->detail = psprintf("the change event of op \"%s\" has no \"after\" object", op);
			return;
		}
		for (int i = 0; i < t->ncolumns && row->reason == KS_OK; i++)
		{
			KsCdcField	f;

			if (t->columns[i].lineage || i == t->order_index)
				continue;
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
		row->is_delete = true;
	}
	else if (strcmp(op, "t") == 0)
	{
		set_position(t, row, pos);
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
