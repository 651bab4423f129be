/*-------------------------------------------------------------------------
 *
 * decode.c
 *		Message -> typed row of the target, or a quarantine reason: the
 *		batch loop, the conversion of field values into column values that
 *		every format and envelope shares, and the quarantine reasons.
 *
 * The stages of one message: its envelope (envelope.h: plain, debezium)
 * says what the message means and asks its format (format.h: json, avro,
 * json_schema) for the field values, which ks_decode_fields converts into
 * the columns.  ks_load_pipeline loads a pipeline's definition with its
 * formats and envelope resolved.
 *
 * The contract of the plain envelope and the json format: a message value
 * is a JSON object whose fields are named after the target's columns.  Each value goes through the column type's
 * input function, so numeric(18,2), timestamptz, uuid and domains check
 * their input exactly as an INSERT would.  Unknown fields are ignored;
 * a missing NOT NULL column without a default is missing_required_field.
 *
 * Input functions report bad input with ERROR on PostgreSQL 15.  To stay
 * cheap when errors are rare, a whole batch is converted inside a single
 * subtransaction; only when a value fails is that subtransaction rolled
 * back, the message quarantined, and conversion resumed after it.
 *
 * Slots that name a header or Kafka's metadata (meta.c) are filled from the
 * message after the format ran, whatever the value holds there.
 *
 * Owns: converting values and classifying their faults.  Must not: open
 * the target (target.c), know a format's bytes or an envelope's meaning.
 *
 *-------------------------------------------------------------------------
 */
#include "kafka_sink.h"
#include "pipeline.h"
#include "guc.h"
#include "catalog_guard.h"
#include "catalog.h"
#include "decode.h"
#include "errclass.h"
#include "envelope.h"
#include "format.h"
#include "hops.h"
#include "jsonwalk.h"

#include "access/htup_details.h"
#include "access/table.h"
#include "access/xact.h"
#include "catalog/dependency.h"
#include "access/stratnum.h"
#include "catalog/pg_attribute.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "lib/stringinfo.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/datetime.h"
#include "utils/timestamp.h"
#include "utils/json.h"
#include "utils/jsonb.h"
#include "utils/numeric.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/resowner.h"



/*
 * A pipeline's definition as the stages read it: the catalog's row
 * (ks_catalog_load_pipeline) with its formats and envelope, found by name
 * here, where they live (the catalog layer knows no decoding).  Checked here
 * too: the catalog is what a worker trusts, not the API that wrote it.
 * NULL when the pipeline no longer exists.
 */
KsPipeline *
ks_load_pipeline(int64 pipeline_id, MemoryContext mcxt)
{
	KsPipeline *p = ks_catalog_load_pipeline(pipeline_id, mcxt);

	if (p == NULL)
		return NULL;
	p->contract.value_fmt = ks_format_find(p->contract.value_format_name);
	if (p->contract.value_fmt == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("unknown value_format \"%s\" of pipeline \"%s\"", p->contract.value_format_name, p->name)));
	p->contract.key_fmt = ks_format_find(p->contract.key_format == KS_KEY_AVRO ? "avro" :
										 p->contract.key_format == KS_KEY_PROTOBUF ? "protobuf" : "json");
	p->contract.envelope = ks_envelope_find(p->contract.envelope_name);
	if (p->contract.envelope == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("unknown envelope \"%s\" of pipeline \"%s\"", p->contract.envelope_name, p->name)));
	return p;
}

const char *
ks_reason_name(KsReason r)
{
	switch (r)
	{
		case KS_OK:
			return "ok";
		case KS_INVALID_JSON:
			return "invalid_json";
		case KS_NOT_AN_OBJECT:
			return "not_an_object";
		case KS_MISSING_REQUIRED_FIELD:
			return "missing_required_field";
		case KS_INVALID_VALUE:
			return "invalid_value";
		case KS_UNKNOWN_SCHEMA_VERSION:
			return "unknown_schema_version";
		case KS_NULL_KEY:
			return "null_key";
		case KS_CONSTRAINT_VIOLATION:
			return "constraint_violation";
		case KS_VALUE_TOO_LARGE:
			return "value_too_large";
		case KS_REJECTED_BY_TARGET:
			return "rejected_by_target";
		case KS_UNKNOWN_SCHEMA_ID:
			return "unknown_schema_id";
		case KS_NO_TARGET:
			return "no_target";
		case KS_TARGET_REFUSED:
			return "target_refused";
		case KS_SCHEMA_CHANGE_REFUSED:
			return "schema_change_refused";
		case KS_NOT_WIRE_FORMAT:
			return "not_wire_format";
		case KS_INVALID_AVRO:
			return "invalid_avro";
		case KS_INVALID_ENVELOPE:
			return "invalid_envelope";
		case KS_DEAD_LETTER_LOOP:
			return "dead_letter_loop";
		case KS_NO_PARTITION:
			return "no_partition";
		case KS_INVALID_PROTOBUF:
			return "invalid_protobuf";
		case KS_EXPRESSION_ERROR:
			return "expression_error";
	}
	return "unknown";
}


/* Which column is being converted, for the error detail; see ks_decode_batch. */
static volatile int converting_column = -1;


/* the detail of a value its type's input function rejects (both paths) */
static char *
invalid_value_detail(KsColumn *col, const char *message)
{
	return psprintf("field \"%s\" is not a valid %s: %s", col->name, col->type_sql, message);
}

static bool
is_text_like(Oid typid)
{
	Oid			base = getBaseType(typid);

	return base == TEXTOID || base == VARCHAROID || base == BPCHAROID;
}

/* Appends s as a double-quoted element of an array literal. */
static void
append_array_element(StringInfo out, const char *s, int len)
{
	appendStringInfoChar(out, '"');
	for (int i = 0; i < len; i++)
	{
		if (s[i] == '"' || s[i] == '\\')
			appendStringInfoChar(out, '\\');
		appendStringInfoChar(out, s[i]);
	}
	appendStringInfoChar(out, '"');
}

/*
 * A JSON array as the text of a PostgreSQL array literal, for the column
 * type's own input function (array_in checks the elements as their type's
 * input does, and nested arrays as dimensions).  JSON null is a NULL
 * element; strings keep commas, quotes and braces (every element is
 * quoted).  For json[]/jsonb[], each element is one JSON value, objects
 * and arrays included.  Returns false, with *what set, for an object where
 * the element type is not JSON.
 */
static bool
json_array_literal(StringInfo out, JsonbContainer *c, bool elem_json, const char **what)
{
	JsonbIterator *it = JsonbIteratorInit(c);
	JsonbValue	v;
	JsonbIteratorToken tok;
	bool		first = true;

	appendStringInfoChar(out, '{');
	while ((tok = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
	{
		char	   *s;

		if (tok != WJB_ELEM)
			continue;
		if (!first)
			appendStringInfoChar(out, ',');
		first = false;
		switch (v.type)
		{
			case jbvNull:
				appendStringInfoString(out, "NULL");
				break;
			case jbvString:
				if (elem_json)
				{
					StringInfoData j;

					initStringInfo(&j);
					escape_json(&j, pnstrdup(v.val.string.val, v.val.string.len));
					append_array_element(out, j.data, j.len);
				}
				else
					append_array_element(out, v.val.string.val, v.val.string.len);
				break;
			case jbvNumeric:
				s = DatumGetCString(DirectFunctionCall1(numeric_out, NumericGetDatum(v.val.numeric)));
				append_array_element(out, s, strlen(s));
				break;
			case jbvBool:
				appendStringInfoString(out, v.val.boolean ? "true" : "false");
				break;
			case jbvBinary:
				if (elem_json)
				{
					s = JsonbToCString(NULL, v.val.binary.data, v.val.binary.len);
					append_array_element(out, s, strlen(s));
				}
				else if (JsonContainerIsArray(v.val.binary.data))
				{
					if (!json_array_literal(out, v.val.binary.data, elem_json, what))
						return false;
				}
				else
				{
					*what = "a JSON object inside an array";
					return false;
				}
				break;
			default:
				*what = "an unexpected JSON value";
				return false;
		}
	}
	appendStringInfoChar(out, '}');
	return true;
}

/*
 * A JSON string in the strict ISO 8601 form "YYYY-MM-DD HH:MM:SS[.f{1,6}]"
 * ("T" for the space allowed) with a zone "Z", "+HH", "+HH:MM" or "+HHMM"
 * (or "-"), as a timestamptz without timestamptz_in: true with *ts set, or
 * false for anything else (a date that does not exist, hour 24, a leap
 * second, more than six fractional digits, no zone, a zone beyond 14 hours,
 * spaces, ...), which then goes through timestamptz_in as before.  For what
 * it takes, the result is timestamptz_in's: the fields are exact and the
 * zone explicit, so neither DateStyle nor TimeZone matter.
 */
static bool
iso_timestamptz(const char *s, TimestampTz *ts)
{
	int			f[6];
	static const int widths[6] = {4, 2, 2, 2, 2, 2};
	static const char seps[6] = {'-', '-', ' ', ':', ':', '\0'};
	static const int mdays[2][13] = {
		{0, 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31},
		{0, 31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31}};
	const char *p = s;
	int64		usec = 0;
	int			zone = 0;
	bool		leap;

	for (int i = 0; i < 6; i++)
	{
		f[i] = 0;
		for (int k = 0; k < widths[i]; k++, p++)
		{
			if (*p < '0' || *p > '9')
				return false;
			f[i] = f[i] * 10 + (*p - '0');
		}
		if (i < 5)
		{
			if (!(*p == seps[i] || (i == 2 && *p == 'T')))
				return false;
			p++;
		}
	}
	if (*p == '.')
	{
		int			n = 0;
		int64		scale = 100000;

		for (p++; *p >= '0' && *p <= '9'; p++, n++)
		{
			if (n == 6)
				return false;
			usec += (*p - '0') * scale;
			scale /= 10;
		}
		if (n == 0)
			return false;
	}
	if (*p == 'Z' && p[1] == '\0')
		zone = 0;
	else if ((*p == '+' || *p == '-') && p[1] >= '0' && p[1] <= '9' && p[2] >= '0' && p[2] <= '9')
	{
		int			hh = (p[1] - '0') * 10 + (p[2] - '0');
		int			mm = 0;
		const char *q = p + 3;

		if (*q == ':')
			q++;
		if (*q != '\0')
		{
			if (!(q[0] >= '0' && q[0] <= '9' && q[1] >= '0' && q[1] <= '9' && q[2] == '\0'))
				return false;
			mm = (q[0] - '0') * 10 + (q[1] - '0');
		}
		else if (q != p + 3)
			return false;		/* "+05:" */
		if (hh > 14 || mm > 59)
			return false;
		zone = (hh * 60 + mm) * 60 * (*p == '-' ? -1 : 1);
	}
	else
		return false;
	if (f[0] < 1 || f[1] < 1 || f[1] > 12 || f[2] < 1 || f[3] > 23 || f[4] > 59 || f[5] > 59)
		return false;
	leap = (f[0] % 4 == 0 && f[0] % 100 != 0) || f[0] % 400 == 0;
	if (f[2] > mdays[leap][f[1]])
		return false;
	*ts = ((int64) (date2j(f[0], f[1], f[2]) - POSTGRES_EPOCH_JDATE) * USECS_PER_DAY) +
		((int64) ((f[3] * 60 + f[4]) * 60 + f[5] - zone)) * USECS_PER_SEC + usec;
	return true;
}

/* Converts one captured value into column c of the row. */
static void
convert_value(KsTarget *t, KsRow *row, int c, KsSlotValue *f, int scale)
{
	KsColumn   *col = &t->columns[c];
	char	   *text = f->text;
	bool		in_server_encoding = false;

	switch (f->kind)
	{
		case KS_SLOT_ABSENT:
			return;
		case KS_SLOT_NULL:
			row->present[c] = true;
			row->nulls[c] = true;
			return;
		case KS_SLOT_STRING:
			if (col->typid == TIMESTAMPTZOID && col->typmod < 0 && scale == 0 && ks_direct_values)
			{
				TimestampTz ts;

				if (iso_timestamptz(text, &ts))
				{
					row->values[c] = TimestampTzGetDatum(ts);
					row->nulls[c] = false;
					row->present[c] = true;
					return;
				}
			}
			if (col->is_json)
			{
				StringInfoData buf;

				initStringInfo(&buf);
				escape_json(&buf, text);
				text = buf.data;
			}
			break;
		case KS_SLOT_SCALAR:
			break;
		case KS_SLOT_BYTES:
			/* a header or the raw key (meta.c): bytes into bytea, else UTF-8 text */
			if (getBaseType(col->typid) == BYTEAOID)
			{
				bytea	   *b = palloc(VARHDRSZ + f->len);

				SET_VARSIZE(b, VARHDRSZ + f->len);
				memcpy(VARDATA(b), f->text, f->len);
				text = NULL;
				if (col->typid != BYTEAOID)
				{
					/* a domain over bytea: its checks, through its input */
					text = DatumGetCString(DirectFunctionCall1(byteaout, PointerGetDatum(b)));
					in_server_encoding = true;
					break;
				}
				row->values[c] = PointerGetDatum(b);
				row->nulls[c] = false;
				row->present[c] = true;
				return;
			}
			if (strlen(f->text) != f->len ||
				!pg_verify_mbstr(PG_UTF8, f->text, (int) f->len, true))
			{
				row->reason = KS_INVALID_VALUE;
				row->detail = psprintf("field \"%s\" is not a valid %s: the header or key is not UTF-8 text",
									   col->name, col->type_sql);
				return;
			}
			break;
		case KS_SLOT_DATUM:
			if (f->typid == col->typid)
			{
				/* built by the decoder as the input function would (avro_binary.c) */
				row->values[c] = (Datum) f->datum;
				row->nulls[c] = false;
				row->present[c] = true;
				return;
			}
			else
			{
				/* a column of another type reads the slot: its text, then as usual */
				Oid			out;
				bool		varlena;

				getTypeOutputInfo(f->typid, &out, &varlena);
				text = OidOutputFunctionCall(out, (Datum) f->datum);
				in_server_encoding = true;
			}
			break;
		case KS_SLOT_COMPOSITE:
			if (col->is_array && text[0] == '[')
			{
				Jsonb	   *jb;
				StringInfoData lit;
				const char *what = NULL;

				/* jsonb_in may raise on odd input: a data error of this field */
				converting_column = c;
				if (GetDatabaseEncoding() != PG_UTF8)
					text = pg_any_to_server(text, strlen(text), PG_UTF8);
				in_server_encoding = true;
				jb = DatumGetJsonbP(DirectFunctionCall1(jsonb_in, CStringGetDatum(text)));
				initStringInfo(&lit);
				if (!json_array_literal(&lit, &jb->root, col->elem_is_json, &what))
				{
					converting_column = -1;
					row->reason = KS_INVALID_VALUE;
					row->detail = psprintf("field \"%s\": %s is not a valid %s",
										   col->name, what, col->type_sql);
					return;
				}
				text = lit.data;
				break;
			}
			if (!col->is_json && !is_text_like(col->typid))
			{
				row->reason = KS_INVALID_VALUE;
				row->detail = psprintf("field \"%s\": a JSON %s is not a valid %s",
									   col->name, text[0] == '{' ? "object" : "array",
									   col->type_sql);
				return;
			}
			break;
	}
	if (GetDatabaseEncoding() != PG_UTF8 && !in_server_encoding)
		text = pg_any_to_server(text, strlen(text), PG_UTF8);
	converting_column = c;
	if (scale != 0 && col->is_numeric)
	{
		Datum		n = DirectFunctionCall3(numeric_in, CStringGetDatum(text),
										   ObjectIdGetDatum(InvalidOid), Int32GetDatum(-1));
		Datum		div = DirectFunctionCall2(numeric_power,
											 DirectFunctionCall1(int4_numeric, Int32GetDatum(10)),
											 DirectFunctionCall1(int4_numeric, Int32GetDatum(scale)));

		n = DirectFunctionCall2(numeric_div, n, div);
		text = DatumGetCString(DirectFunctionCall1(numeric_out, n));
	}
#ifdef KS_HAVE_SOFT_INPUT_ERRORS
	{
		/*
		 * 16+: the input functions that support it report bad input here,
		 * and the row is quarantined without rolling back the batch's
		 * subtransaction; those that do not (a user-defined type, a domain
		 * whose check throws) still throw, and ks_decode_batch() catches
		 * that as before.
		 */
		ErrorSaveContext escontext = {.type = T_ErrorSaveContext, .details_wanted = true};

		if (!InputFunctionCallSafe(&col->infunc, text, col->ioparam, col->typmod,
								   (Node *) &escontext, &row->values[c]))
		{
			ErrorData  *edata = escontext.error_data;

			converting_column = -1;
			if (!ks_err_is_bad_value(edata->sqlerrcode))
				ThrowErrorData(edata);
			row->reason = KS_INVALID_VALUE;
			row->detail = invalid_value_detail(col, edata->message);
			FreeErrorData(edata);
			return;
		}
	}
#else
	row->values[c] = InputFunctionCall(&col->infunc, text, col->ioparam, col->typmod);
#endif
	row->nulls[c] = false;
	row->present[c] = true;
	converting_column = -1;
}

/*
 * Converts one field value (text as a format captures it) into column c,
 * as every format's values are converted: for envelopes that compute a
 * column's text themselves (envelope_debezium.c).
 */
void
ks_convert_field(KsTarget *t, KsRow *row, int c, KsSlotValue *f)
{
	convert_value(t, row, c, f, 0);
}

/*
 * Whether column c is mapped to a header or Kafka's metadata (meta.c),
 * for envelopes that read their columns themselves (envelope_debezium.c);
 * when it is, the column is converted from the message.
 */
bool
ks_convert_meta_column(KsTarget *t, KsRow *row, int c)
{
	KsSlotValue f;

	if (t->meta == NULL || t->map[c] < 0 || t->meta[t->map[c]].kind == KS_META_NONE)
		return false;
	ks_meta_value(row->msg, &t->meta[t->map[c]], &f);
	convert_value(t, row, c, &f, 0);
	return true;
}

/* key_format string, json, avro or protobuf: the key columns come from the message key. */
void
ks_decode_key(KsTarget *t, KsPipeline *p, KsRow *row)
{
	KsMessage  *m = row->msg;

	if (m->key == NULL)
	{
		row->reason = KS_NULL_KEY;
		row->detail = pstrdup("the message has no key");
		return;
	}
	if (p->contract.key_format == KS_KEY_STRING)
	{
		KsSlotValue f;

		if (pg_encoding_verifymbstr(PG_UTF8, m->key, (int) m->key_len) != (int) m->key_len ||
			memchr(m->key, '\0', m->key_len) != NULL)
		{
			row->reason = KS_INVALID_VALUE;
			row->detail = pstrdup("the message key is not valid UTF-8 text");
			return;
		}
		f.kind = KS_SLOT_STRING;
		f.text = pnstrdup(m->key, m->key_len);
		convert_value(t, row, t->key_index[0], &f, 0);
	}
	else
	{
		KsSlotValue *kv = palloc0(sizeof(KsSlotValue) * Max(t->key_walk.nslots, 1));
		char	   *detail;
		KsReason	r = ks_format_decode(t, p, true, m->key, m->key_len, kv, &detail);
		bool		wrapped;

		if (r != KS_OK)
		{
			row->reason = r;
			row->detail = psprintf("message key: %s", detail);
			return;
		}
		/*
		 * A key JsonConverter wrapped with its schema ({"schema": {...},
		 * "payload": {...}}, schemas.enable=true) is read under payload,
		 * field by field when absent at the top, as the Debezium envelope
		 * reads its keys.
		 */
		wrapped = t->key_payload_slot >= 0 &&
			kv[t->key_schema_slot].kind == KS_SLOT_COMPOSITE &&
			kv[t->key_payload_slot].kind == KS_SLOT_COMPOSITE;
		for (int k = 0; k < t->nkeys && row->reason == KS_OK; k++)
		{
			KsSlotValue *f = &kv[k];

			if (wrapped && f->kind == KS_SLOT_ABSENT && t->key_alt[k] >= 0)
				f = &kv[t->key_alt[k]];
			convert_value(t, row, t->key_index[k], f, 0);
		}
	}
	for (int k = 0; k < t->nkeys && row->reason == KS_OK; k++)
		if (!row->present[t->key_index[k]] || row->nulls[t->key_index[k]])
		{
			row->reason = KS_NULL_KEY;
			row->detail = psprintf("key field \"%s\" is missing or null in the message key",
								   t->columns[t->key_index[k]].name);
		}
}

/*
 * Decodes one message.  Reasons found without running an input function
 * are set on the row; an input function's ERROR propagates to the caller.
 */

/* A row with every column absent (NULL), reason ok: what an envelope starts from. */
void
ks_row_init(KsTarget *t, KsRow *row)
{
	int			n = Max(t->ncolumns, 1);

	row->values = palloc0(sizeof(Datum) * n);
	row->nulls = palloc(sizeof(bool) * n);
	row->present = palloc0(sizeof(bool) * n);
	for (int i = 0; i < t->ncolumns; i++)
		row->nulls[i] = true;
	row->reason = KS_OK;
}

/*
 * A value over kafka_sink.max_message_bytes: the row is quarantined
 * (value_too_large) before any envelope reads it.  True when it is.
 */
bool
ks_row_too_large(KsRow *row)
{
	KsMessage  *m = row->msg;

	if (m->value == NULL || m->value_len <= (size_t) ks_max_message_bytes)
		return false;
	row->reason = KS_VALUE_TOO_LARGE;
	row->detail = psprintf("the value has %zu bytes; kafka_sink.max_message_bytes is %d",
						   m->value_len, ks_max_message_bytes);
	return true;
}

/*
 * The row's columns from the slots of a decoded value: the schema version
 * picks the mapping, the event id is taken, each column converted (its
 * type's input function), the key read from the message key when the
 * pipeline says so, and key and required columns checked.  Reasons found
 * without an input function are set on the row; an input function's ERROR
 * propagates to ks_decode_batch, which quarantines the message.
 */
void
ks_decode_fields(KsTarget *t, KsPipeline *p, KsRow *row, KsSlotValue *slots)
{
	int		   *map = t->map;
	int		   *scale = t->scale;

	/* headers and Kafka's metadata: the message's, whatever the value holds */
	if (t->meta != NULL)
		for (int s = 0; s < t->walk.nslots; s++)
			if (t->meta[s].kind != KS_META_NONE)
				ks_meta_value(row->msg, &t->meta[s], &slots[s]);
	if (t->version_slot >= 0)
	{
		KsSlotValue *vs = &slots[t->version_slot];
		int			v = -1;

		const char *vt = ks_meta_text(vs);

		if (vt != NULL)
			for (int i = 0; i < t->nversions; i++)
				if (strcmp(t->version_names[i], vt) == 0)
					v = i;
		if (v < 0)
		{
			row->reason = KS_UNKNOWN_SCHEMA_VERSION;
			row->detail = vt != NULL ?
				psprintf("schema version \"%s\" is not one of the pipeline's schema_versions", vt) :
				psprintf("the schema version field \"%s\" is missing or not a scalar", p->contract.schema_version_field);
			return;
		}
		map = t->vmap[v];
		scale = t->vscale[v];
	}
	if (t->event_id_slot >= 0)
	{
		row->event_id = (char *) ks_meta_text(&slots[t->event_id_slot]);
	}

	for (int i = 0; i < t->ncolumns && row->reason == KS_OK; i++)
	{
		if ((p->contract.key_format != KS_KEY_NONE && t->columns[i].is_key) || t->columns[i].lineage)
			continue;
		if (t->alt[i] >= 0 && map[i] == t->map[i] && slots[map[i]].kind == KS_SLOT_ABSENT)
			convert_value(t, row, i, &slots[t->alt[i]], scale[i]);
		else
			convert_value(t, row, i, &slots[map[i]], scale[i]);
	}
	if (row->reason != KS_OK)
		return;
	if (p->contract.key_format != KS_KEY_NONE)
	{
		ks_decode_key(t, p, row);
		if (row->reason != KS_OK)
			return;
	}

	for (int i = 0; i < t->ncolumns; i++)
	{
		KsColumn   *c = &t->columns[i];

		if (c->is_key && (!row->present[i] || row->nulls[i]))
		{
			row->reason = KS_NULL_KEY;
			row->detail = psprintf(row->present[i] ? "key field \"%s\" is null" :
								   "required field \"%s\" is missing", c->name);
			return;
		}
		if (c->required && !row->present[i])
		{
			row->reason = KS_MISSING_REQUIRED_FIELD;
			row->detail = psprintf("required field \"%s\" is missing", c->name);
			return;
		}
		/* explicit nulls in NOT NULL columns would fail the MERGE: catch them now */
		if (c->required && row->nulls[i])
		{
			row->reason = KS_CONSTRAINT_VIOLATION;
			row->detail = psprintf("field \"%s\" is null but the column is NOT NULL", c->name);
			return;
		}
	}
}

/* set once a supposedly soft input threw in this process (decode_batch) */
static bool soft_path_failed = false;

typedef struct DecodeCall
{
	KsTarget   *t;
	KsPipeline *p;
	KsRow	   *rows;
	int			nrows;
	int			cur;			/* the row being decoded */
} DecodeCall;

static void
decode_from(void *arg)
{
	DecodeCall *c = arg;
	const KsEnvelope *envelope = c->p->contract.envelope ? c->p->contract.envelope : &ks_envelope_plain;

	for (; c->cur < c->nrows; c->cur++)
	{
		KsRow	   *row = &c->rows[c->cur];
		char	   *detail;

		if (ks_message_looped(row->msg, &detail))
		{
			ks_row_init(c->t, row);
			row->reason = KS_DEAD_LETTER_LOOP;
			row->detail = detail;
			continue;
		}
		envelope->decode(c->t, c->p, row);
	}
}

static void
decode_batch(KsTarget *t, KsPipeline *p, KsRow *rows, int nrows)
{
	DecodeCall	call = {t, p, rows, nrows, 0};

	/*
	 * 16+: when every column's input reports bad input softly, a bad value
	 * is a quarantine row without any subtransaction; anything that still
	 * throws is not the row's fault and fails the batch as it would anyway.
	 */
	if (t->soft_only && !soft_path_failed)
	{
		MemoryContext cxt = CurrentMemoryContext;

		PG_TRY();
		{
			decode_from(&call);
		}
		PG_CATCH();
		{
			ErrorData  *edata;

			MemoryContextSwitchTo(cxt);
			converting_column = -1;
			edata = CopyErrorData();
			if (!ks_err_is_bad_value(edata->sqlerrcode))
				PG_RE_THROW();
			FlushErrorState();

			/*
			 * A value threw after all: from now on this process decodes in
			 * a subtransaction, and the batch is read again (a transient
			 * error: rolled back, retried), so the value is quarantined.
			 */
			soft_path_failed = true;
			ereport(ERROR,
					(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
					 errmsg("a value could not be checked without a subtransaction; the batch is decoded again with one"),
					 errdetail("%s", edata->message)));
		}
		PG_END_TRY();
		return;
	}
	while (call.cur < nrows)
	{
		ErrorData  *edata = ks_try_subxact(decode_from, &call);
		int			col = converting_column;

		if (edata == NULL)
			break;
		converting_column = -1;
		if (!ks_err_is_bad_value(edata->sqlerrcode))
			ReThrowError(edata);
		rows[call.cur].reason = KS_INVALID_VALUE;
		if (col >= 0)
			rows[call.cur].detail = invalid_value_detail(&t->columns[col], edata->message);
		else
			rows[call.cur].detail = pstrdup(edata->message);
		FreeErrorData(edata);
		call.cur++;
	}
}

/*
 * Decodes rows into the target's types.  A domain's CHECK constraint can
 * call a function of the user's: it runs with catalog writes suspended.
 */
void
ks_decode_batch(KsTarget *t, KsPipeline *p, KsRow *rows, int nrows)
{
	int			catalog_writes = ks_catalog_writes_suspend();

	PG_TRY();
	{
		decode_batch(t, p, rows, nrows);
	}
	PG_FINALLY();
	{
		ks_catalog_writes_restore(catalog_writes);
	}
	PG_END_TRY();
}

/*
 * kafka_sink._json_path_valid(path): whether path is a valid mapping path,
 * by the parser decoding uses, so that the validator and the decoder
 * agree.  NULL for NULL.
 */
PG_FUNCTION_INFO_V1(kafka_sink_json_path_valid);
Datum
kafka_sink_json_path_valid(PG_FUNCTION_ARGS)
{
	KsPath		path;

	if (PG_ARGISNULL(0))
		PG_RETURN_NULL();
	PG_RETURN_BOOL(ks_path_parse(text_to_cstring(PG_GETARG_TEXT_PP(0)), &path));
}

