/*-------------------------------------------------------------------------
 *
 * lineage.c
 *		What message_fate and message_fates (src/sql/60_observability.sql,
 *		70_lineage.sql) need from the worker's own code: the table a
 *		message is routed to, a message key in Avro or Protobuf decoded
 *		through the schemas kept in kafka_sink.schemas, and a change
 *		event's source position.
 *
 * Both read the catalog with the caller's rights (row level security) and
 * never call a schema registry: a schema id the catalog does not hold is
 * an answer ("not stored"), not a fetch.  Nothing here writes.
 *
 * Owns: those four look-ups (the fourth: whether the pipeline's filter
 * leaves a message out).  Must not: decide a fate (the SQL does).
 *
 * Exports only SQL entry points (PG_FUNCTION_INFO_V1, declared in
 * src/sql/30_c_functions.sql), so it has no header of its own.
 *
 *-------------------------------------------------------------------------
 */
#include "kafka_sink.h"
#include "pipeline.h"
#include "route.h"
#include "target.h"
#include "envelope_debezium.h"
#include "apply.h"
#include "avro_binary.h"
#include "catalog.h"
#include "decode.h"
#include "envelope.h"
#include "format.h"
#include "protobuf.h"
#include "schema_registry.h"
#include "transform.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "lib/stringinfo.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/json.h"
#include "utils/jsonb.h"

/*
 * The message of a look-up's arguments: pipeline_id (argument 0) and topic
 * (1) not null, the key at argument key_arg (-1: none) and the value at
 * value_arg, both bytea or NULL; no coordinates (kafka.partition and
 * kafka.offset are absent, meta.c).  Returns the pipeline's id.
 */
static int64
message_args(FunctionCallInfo fcinfo, int key_arg, int value_arg, KsMessage *m)
{
	if (PG_ARGISNULL(0) || PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("pipeline_id and topic cannot be null"),
				 errhint("Pass the pipeline's id and the message's topic.")));
	m->topic = text_to_cstring(PG_GETARG_TEXT_PP(1));
	if (key_arg >= 0 && !PG_ARGISNULL(key_arg))
	{
		bytea	   *k = PG_GETARG_BYTEA_PP(key_arg);

		m->key = VARDATA_ANY(k);
		m->key_len = VARSIZE_ANY_EXHDR(k);
	}
	if (!PG_ARGISNULL(value_arg))
	{
		bytea	   *v = PG_GETARG_BYTEA_PP(value_arg);

		m->value = VARDATA_ANY(v);
		m->value_len = VARSIZE_ANY_EXHDR(v);
	}
	m->partition = -1;
	m->offset = -1;
	m->timestamp_ms = -1;
	return PG_GETARG_INT64(0);
}

/* The pipeline, after ks_spi_connect: an error when the caller sees none of that id. */
static KsPipeline *
load_pipeline(int64 pipeline_id)
{
	KsPipeline *p = pipeline_id > 0 ? ks_load_pipeline(pipeline_id, CurrentMemoryContext) : NULL;

	if (p == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("pipeline %lld does not exist", (long long) pipeline_id),
				 errhint("SELECT id, name FROM kafka_sink.pipelines lists the pipelines you can see.")));
	return p;
}

/*
 * kafka_sink._message_filtered(pipeline_id, topic, key, value): whether the
 * pipeline's filter leaves this message out (docs/transform.md), decoded as
 * the worker decodes it, in the table its routing names for a routed
 * pipeline; NULL when the pipeline has no filter or no target (bronze
 * only, a routed table that does not exist or does not fit), or when the
 * message is no upsert that decodes (a delete, a quarantined message).
 * The filter runs as the caller, a member of the owner (message_fate sees
 * only such pipelines).
 */
PG_FUNCTION_INFO_V1(kafka_sink_message_filtered);
Datum
kafka_sink_message_filtered(PG_FUNCTION_ARGS)
{
	KsMessage	m = {0};
	KsRow		row = {0};
	int64		pipeline_id = message_args(fcinfo, 2, 3, &m);
	KsPipeline *p;
	int			answer = -1;

	ks_spi_connect();
	p = load_pipeline(pipeline_id);
	if (p->targets.filter != NULL && (OidIsValid(p->targets.target) || ks_routing_enabled(p)))
	{
		/* routed: the table its routing names, checked as the worker opens it */
		KsTarget   *t = ks_routing_enabled(p) ? ks_route_open(p, &m) : ks_target_open(p);

		if (t == NULL)
		{
			SPI_finish();
			PG_RETURN_NULL();
		}
		row.msg = &m;
		ks_decode_batch(t, p, &row, 1);
		if (row.reason == KS_OK && !row.is_delete && !row.is_truncate && !row.skipped)
			answer = ks_transform_filters_out(p, t, &row) ? 1 : 0;
	}
	SPI_finish();
	if (answer < 0)
		PG_RETURN_NULL();
	PG_RETURN_BOOL(answer == 1);
}

/*
 * kafka_sink._message_target(pipeline_id, topic, value): the quoted,
 * qualified name of the table the pipeline's routing names for a message
 * of topic with this value (route.c's rules), or NULL when it names none.
 * The table need not exist.
 */
PG_FUNCTION_INFO_V1(kafka_sink_message_target);
Datum
kafka_sink_message_target(PG_FUNCTION_ARGS)
{
	int64		pipeline_id;
	KsPipeline *p;
	KsMessage	m = {0};
	char	   *why = NULL;
	char	   *name;
	text	   *result = NULL;
	MemoryContext caller;

	pipeline_id = message_args(fcinfo, -1, 2, &m);
	caller = CurrentMemoryContext;
	ks_spi_connect();
	p = load_pipeline(pipeline_id);
	name = ks_route_name(p, &m, &why);
	if (name)
	{
		MemoryContext old = MemoryContextSwitchTo(caller);

		result = cstring_to_text(name);
		MemoryContextSwitchTo(old);
	}
	SPI_finish();
	if (result == NULL)
		PG_RETURN_NULL();
	PG_RETURN_TEXT_P(result);
}

/* A slot as JSON: strings quoted, numbers and booleans as they are. */
static void
append_slot(StringInfo b, KsSlotValue *v)
{
	switch (v->kind)
	{
		case KS_SLOT_NULL:
			appendStringInfoString(b, "null");
			break;
		case KS_SLOT_COMPOSITE:
			appendStringInfoString(b, v->text);
			break;
		case KS_SLOT_SCALAR:
			{
				char	   *end;

				/* Avro's logical types come as text that is not JSON */
				if (strcmp(v->text, "true") == 0 || strcmp(v->text, "false") == 0)
				{
					appendStringInfoString(b, v->text);
					break;
				}
				(void) strtod(v->text, &end);
				if (end != v->text && *end == '\0' && strspn(v->text, "-0123456789.eE+") == strlen(v->text))
				{
					appendStringInfoString(b, v->text);
					break;
				}
			}
			/* FALLTHROUGH */
		default:
			escape_json(b, v->text ? v->text : "");
			break;
	}
}

/*
 * kafka_sink._avro_key(registry, key, fields, OUT key jsonb, OUT problem
 * text): a message key in Confluent's wire format, decoded with the Avro
 * or Protobuf schema kafka_sink.schemas holds for (registry, its id), as
 * the object of the fields named (an Avro key whose schema is not a
 * record, with one field: that field).  problem says why when it cannot be
 * decoded: no key, not the wire format, an id not stored, neither Avro nor
 * Protobuf, bytes that do not decode.  (The name is 0.2.0's, when keys
 * were Avro only.)
 */
PG_FUNCTION_INFO_V1(kafka_sink_avro_key);
Datum
kafka_sink_avro_key(PG_FUNCTION_ARGS)
{
	TupleDesc	tupdesc;
	Datum		out[2] = {0, 0};
	bool		nulls[2] = {true, true};
	char	   *problem = NULL;
	char	   *json = NULL;

	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "kafka_sink._avro_key: a record type is expected");
	tupdesc = BlessTupleDesc(tupdesc);
	if (PG_ARGISNULL(2))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("fields cannot be null"),
				 errhint("Pass the key columns' names.")));

	if (PG_ARGISNULL(0))
		problem = pstrdup("the pipeline has no schema_registry to read the key's schema id from");
	else if (PG_ARGISNULL(1))
		problem = pstrdup("the message has no key");
	else
	{
		char	   *registry = text_to_cstring(PG_GETARG_TEXT_PP(0));
		bytea	   *key = PG_GETARG_BYTEA_PP(1);
		const char *data = VARDATA_ANY(key);
		size_t		len = VARSIZE_ANY_EXHDR(key);
		ArrayType  *arr = PG_GETARG_ARRAYTYPE_P(2);
		Datum	   *names;
		bool	   *namenulls;
		int			nfields;
		int32		id;
		char	   *detail = NULL;

		if (ARR_NDIM(arr) > 1 || ARR_ELEMTYPE(arr) != TEXTOID)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("fields must be a one-dimensional text array")));
		deconstruct_array(arr, TEXTOID, -1, false, TYPALIGN_INT, &names, &namenulls, &nfields);
		if (nfields == 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("fields cannot be empty"),
					 errhint("Pass the key columns' names.")));
		for (int i = 0; i < nfields; i++)
			if (namenulls[i])
				ereport(ERROR,
						(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
						 errmsg("fields cannot hold a null")));

		if (!ks_wire_frame(data, len, &id, &detail))
			problem = psprintf("the message key is not in the wire format: %s", detail);
		else
		{
			char	   *type = NULL;
			char	   *schema_text = NULL;
			bool		stored;
			MemoryContext caller;

			caller = CurrentMemoryContext;
			ks_spi_connect();
			stored = ks_catalog_schema_get(registry, id, &type, &schema_text);
			if (!stored)
				problem = psprintf("schema id %d of the message key is not stored in kafka_sink.schemas (it is not fetched from the registry here)", id);
			else
			{
				/* as the worker compiles it (references bundled included) */
				KsSchemaEntry *s = ks_schema_compile(id, type, schema_text);

				if (s->avro == NULL && s->proto == NULL)
					problem = s->invalid ?
						psprintf("schema id %d of the message key does not compile: %s", id, s->invalid) :
						psprintf("schema id %d of the message key is a %s schema, not Avro or Protobuf", id, type);
				else
				{
					KsWalkPaths paths;
					KsSlotValue *slots = palloc0(sizeof(KsSlotValue) * nfields);
					KsAvroResult r = KS_AVRO_OK;

					paths.nslots = nfields;
					paths.paths = palloc0(sizeof(KsPath) * nfields);
					for (int i = 0; i < nfields; i++)
						if (!ks_path_parse(ks_path_escape_field(TextDatumGetCString(names[i])), &paths.paths[i]))
							ereport(ERROR,
									(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
									 errmsg("field \"%s\" is not a valid name", TextDatumGetCString(names[i]))));
					if (s->avro)
						r = ks_avro_decode(s->avro, &paths, NULL, NULL, nfields == 1 ? 0 : -1,
										   data + 5, len - 5, slots, &detail);
					else if (!ks_pb_decode(s->proto, &paths, NULL, NULL, data + 5, len - 5, slots, &detail))
						r = KS_AVRO_INVALID;
					if (r == KS_AVRO_NOT_A_RECORD)
						problem = psprintf("schema id %d of the message key is not a record, and the key has %d columns", id, nfields);
					else if (r != KS_AVRO_OK)
						problem = psprintf("the message key does not decode with schema id %d: %s", id, detail ? detail : "invalid");
					else
					{
						StringInfoData b;
						bool		first = true;

						initStringInfo(&b);
						appendStringInfoChar(&b, '{');
						for (int i = 0; i < nfields; i++)
						{
							if (slots[i].kind == KS_SLOT_ABSENT || slots[i].kind == KS_SLOT_DATUM)
								continue;
							if (!first)
								appendStringInfoString(&b, ", ");
							first = false;
							escape_json(&b, TextDatumGetCString(names[i]));
							appendStringInfoString(&b, ": ");
							append_slot(&b, &slots[i]);
						}
						appendStringInfoChar(&b, '}');
						json = b.data;
					}
				}
			}
			/* what SPI's context holds is gone after SPI_finish */
			if (problem)
				problem = MemoryContextStrdup(caller, problem);
			if (json)
				json = MemoryContextStrdup(caller, json);
			SPI_finish();
		}
	}
	if (json)
	{
		out[0] = DirectFunctionCall1(jsonb_in, CStringGetDatum(json));
		nulls[0] = false;
	}
	if (problem)
	{
		out[1] = CStringGetTextDatum(problem);
		nulls[1] = false;
	}
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(tupdesc, out, nulls)));
}

/*
 * kafka_sink._cdc_position(source, offset): the source position of a
 * Debezium change event whose source block is source, read at offset, by
 * the worker's own rule (ks_cdc_position); NULL when it has none, as for
 * the worker, which quarantines such an event.  A source that is NULL or
 * not an object has no position; offset must be a Kafka offset.
 */
PG_FUNCTION_INFO_V1(kafka_sink_cdc_position);
Datum
kafka_sink_cdc_position(PG_FUNCTION_ARGS)
{
	Jsonb	   *source;
	int64		offset;
	char	   *pos;

	if (PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("offset cannot be null"),
				 errhint("Pass the Kafka offset of the change event.")));
	offset = PG_GETARG_INT64(1);
	if (offset < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("offset %lld is not a Kafka offset", (long long) offset),
				 errdetail("Kafka offsets are zero or more.")));
	if (PG_ARGISNULL(0))
		PG_RETURN_NULL();
	source = PG_GETARG_JSONB_P(0);
	if (!JB_ROOT_IS_OBJECT(source))
		PG_RETURN_NULL();
	pos = ks_cdc_position(JsonbToCString(NULL, &source->root, VARSIZE(source)), offset);
	if (pos == NULL)
		PG_RETURN_NULL();
	PG_RETURN_DATUM(DirectFunctionCall3(numeric_in, CStringGetDatum(pos),
										ObjectIdGetDatum(InvalidOid), Int32GetDatum(-1)));
}
