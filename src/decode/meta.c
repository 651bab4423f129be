/*-------------------------------------------------------------------------
 *
 * meta.c
 *		Kafka headers and metadata as fields: a field path written
 *		headers.<name> reads the message's header <name>, kafka.key its raw
 *		key, kafka.timestamp, kafka.topic, kafka.partition and kafka.offset
 *		its coordinates; wherever a path is taken (a column's mapping, the
 *		key columns through theirs, event_id, schema_version_field, the
 *		routing template).
 *
 * The rule of the namespace: only a path whose text begins with exactly
 * "headers." or "kafka." names metadata.  The rest of a header path is the
 * header's name, byte for byte and case-sensitive as Kafka's (dots and
 * backslashes included: headers have no nesting).  A value field called
 * headers or kafka is still reached with a backslash before the first
 * segment ("\headers.tenant" is the value's headers -> tenant: the
 * backslash takes the next character literally, as in every path), and a
 * column without a mapping always reads the value's field of its name.
 *
 * Values: a header (the last one of its name when sent more than once;
 * one that is absent is an absent field, one without value a JSON null)
 * and kafka.key are their bytes (KS_SLOT_BYTES): into bytea as they are,
 * into any other type as UTF-8 text through its input function
 * (decode.c); kafka.timestamp is a timestamptz (NULL when the broker gives
 * none), kafka.partition and kafka.offset numbers, kafka.topic text.
 *
 * Owns: naming metadata fields and reading them from a message.  Must not:
 * convert into columns (decode.c) or look at the value.
 *
 *-------------------------------------------------------------------------
 */
#include "kafka_sink.h"
#include "meta.h"
#include "consumer.h"

#include "catalog/pg_type.h"
#include "mb/pg_wchar.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

static const struct
{
	const char *name;
	KsMetaKind	kind;
}			kafka_fields[] =
{
	{"key", KS_META_KEY},
	{"timestamp", KS_META_TIMESTAMP},
	{"topic", KS_META_TOPIC},
	{"partition", KS_META_PARTITION},
	{"offset", KS_META_OFFSET},
};

/*
 * Whether path names metadata, and which (meta->header points into path).
 * KS_META_INVALID for kafka.<a name not in the list> or headers. alone.
 */
KsMetaKind
ks_meta_parse(const char *path, KsMeta *meta)
{
	meta->kind = KS_META_NONE;
	meta->header = NULL;
	if (strncmp(path, "headers.", 8) == 0)
	{
		meta->kind = path[8] == '\0' ? KS_META_INVALID : KS_META_HEADER;
		meta->header = path + 8;
	}
	else if (strncmp(path, "kafka.", 6) == 0)
	{
		meta->kind = KS_META_INVALID;
		for (size_t i = 0; i < lengthof(kafka_fields); i++)
			if (strcmp(path + 6, kafka_fields[i].name) == 0)
				meta->kind = kafka_fields[i].kind;
	}
	return meta->kind;
}

static void
set_bytes(KsSlotValue *out, const void *data, size_t len)
{
	char	   *b = palloc(len + 1);

	memcpy(b, data, len);
	b[len] = '\0';
	out->kind = KS_SLOT_BYTES;
	out->text = b;
	out->len = len;
}

/* The value of metadata field meta of message m. */
void
ks_meta_value(KsMessage *m, const KsMeta *meta, KsSlotValue *out)
{
	const void *v;
	size_t		size;

	memset(out, 0, sizeof(KsSlotValue));
	switch (meta->kind)
	{
		case KS_META_NONE:
		case KS_META_INVALID:
			break;
		case KS_META_HEADER:
			if (!ks_message_header_last(m, meta->header, &v, &size))
				break;			/* absent */
			if (v == NULL)
				out->kind = KS_SLOT_NULL;
			else
				set_bytes(out, v, size);
			break;
		case KS_META_KEY:
			if (m->key == NULL)
				out->kind = KS_SLOT_NULL;
			else
				set_bytes(out, m->key, m->key_len);
			break;
		case KS_META_TIMESTAMP:
			if (m->timestamp_ms < 0)
				out->kind = KS_SLOT_NULL;
			else
			{
				out->kind = KS_SLOT_DATUM;
				out->typid = TIMESTAMPTZOID;
				out->datum = (uintptr_t) TimestampTzGetDatum(ks_epoch_ms_to_timestamptz(m->timestamp_ms));
			}
			break;
		case KS_META_TOPIC:
			out->kind = KS_SLOT_STRING;
			out->text = pstrdup(m->topic);
			break;
		case KS_META_PARTITION:
			if (m->partition < 0)
				break;			/* a message without coordinates (lineage.c) */
			out->kind = KS_SLOT_SCALAR;
			out->text = psprintf("%d", m->partition);
			break;
		case KS_META_OFFSET:
			if (m->offset < 0)
				break;
			out->kind = KS_SLOT_SCALAR;
			out->text = psprintf(INT64_FORMAT, m->offset);
			break;
	}
}

/*
 * A slot's value as a name, an event id or a schema version: strings and
 * numbers, and bytes that are UTF-8 text without a NUL; else NULL.
 */
const char *
ks_meta_text(KsSlotValue *v)
{
	if (v->kind == KS_SLOT_STRING || v->kind == KS_SLOT_SCALAR)
		return v->text;
	if (v->kind == KS_SLOT_BYTES && strlen(v->text) == v->len &&
		pg_verify_mbstr(PG_UTF8, v->text, (int) v->len, true))
		return v->text;
	return NULL;
}

/*
 * kafka_sink._check_field_path(path, what): true when path names a header
 * or Kafka's metadata, false when it names a field of the value (which
 * _json_path_valid then checks); raises when it names metadata that does
 * not exist (kafka.<unknown>, headers. without a name).  what says where
 * the path was given, for the message.  NULL for a NULL path.
 */
PG_FUNCTION_INFO_V1(kafka_sink_check_field_path);
Datum
kafka_sink_check_field_path(PG_FUNCTION_ARGS)
{
	char	   *path;
	const char *what;
	KsMeta		meta;

	if (PG_ARGISNULL(0))
		PG_RETURN_NULL();
	path = text_to_cstring(PG_GETARG_TEXT_PP(0));
	what = PG_ARGISNULL(1) ? "a field" : text_to_cstring(PG_GETARG_TEXT_PP(1));
	if (ks_meta_parse(path, &meta) != KS_META_INVALID)
		PG_RETURN_BOOL(meta.kind != KS_META_NONE);
	if (meta.header != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("\"%s\" for %s names no header", path, what),
				 errhint("Write headers.<name> with the header's name, case-sensitive: headers.tenant.")));
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("unknown Kafka metadata field \"%s\" for %s", path, what),
			 errhint("The Kafka metadata fields are kafka.key, kafka.timestamp, kafka.topic, kafka.partition and kafka.offset; write \\kafka.%s for a field of the value called kafka.", path + 6)));
	PG_RETURN_NULL();
}
