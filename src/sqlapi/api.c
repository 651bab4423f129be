/*-------------------------------------------------------------------------
 *
 * api.c
 *		SQL-callable C functions.  The pipeline-defining functions are
 *		written in SQL (kafka_sink--*.sql); these are the parts that need
 *		librdkafka or shared memory.
 *
 * The rule for every C function exposed in SQL (here and in apply_sql.c, bronze.c, replay.c, statements.c, decode.c, offsets.c, catalog_guard.c):
 * whoever may EXECUTE it (kafka_sink_admin) can call it directly, with any
 * arguments, from any statement, so it is checked like a public function.
 * Each validates its arguments (NULLs where not STRICT, ranges, empty
 * strings), its calling context (set-returning functions only where a set
 * is accepted; batch-only functions only during this process's batch), a
 * caller-declared record type against the tuples it builds (never build a
 * tuple with an unchecked column definition list: ks_srf_check_record),
 * and shows or acts on pipelines only under the catalog's rule: the
 * caller is a member of the owner (ks_may_see_owner, or the catalog's row
 * level security when it reads the catalog).  The helpers are in
 * sqlcall.c; each function's header comment says what it checks, and
 * docs/design/catalog.md ("Internal SQL-callable functions") lists them.
 *
 * Owns: the C bodies of the SQL-callable functions that need librdkafka
 * or shared memory.  Must not: hold SQL text against the catalog
 * (catalog.c) or trust any argument it is given.
 *
 * Exports only SQL entry points (PG_FUNCTION_INFO_V1, declared in
 * src/sql/30_c_functions.sql), so it has no header of its own.
 *
 *-------------------------------------------------------------------------
 */
#include "kafka_sink.h"
#include "pipeline.h"
#include "shmem.h"
#include "kafka_options.h"
#include "hosts.h"
#include "secret_ref.h"
#include "catalog.h"
#include "decode.h"
#include "consumer.h"
#include "producer.h"
#include "hops.h"
#include "sqlcall.h"
#include "bgworker.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

PG_FUNCTION_INFO_V1(kafka_sink_check_kafka_options);
PG_FUNCTION_INFO_V1(kafka_sink_is_secret_option);
PG_FUNCTION_INFO_V1(kafka_sink_check_bootstrap_servers);
PG_FUNCTION_INFO_V1(kafka_sink_produce);
PG_FUNCTION_INFO_V1(kafka_sink_watermarks);
PG_FUNCTION_INFO_V1(kafka_sink_wake_launcher);
PG_FUNCTION_INFO_V1(kafka_sink_worker_pids);
PG_FUNCTION_INFO_V1(kafka_sink_partition_stats);
PG_FUNCTION_INFO_V1(kafka_sink_librdkafka_version);
PG_FUNCTION_INFO_V1(kafka_sink_librdkafka_features);

/*
 * A jsonb object of scalars -> list of KsOption.  JSON nulls are skipped
 * (alter_pipeline uses them to remove an option).  For kafka_options and
 * schema_registry, an object given for a secret option is a reference
 * (secret_ref.c); any other object is refused here.
 */
static List *
options_from_jsonb(Jsonb *jb, const char *what)
{
	JsonbIterator *it;
	JsonbValue	v;
	JsonbIteratorToken tok;
	List	   *result = NIL;
	char	   *key = NULL;
	bool		kafka = strcmp(what, "kafka_options") == 0;
	bool		registry = strcmp(what, "schema_registry") == 0;

	if (!JB_ROOT_IS_OBJECT(jb))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s must be a JSON object", what),
				 strcmp(what, "headers") == 0 ?
				 errhint("Pass a JSON object such as '{\"source\": \"billing\"}'.") :
				 errhint("Pass a JSON object such as '{\"security.protocol\": \"SASL_SSL\"}'.")));
	it = JsonbIteratorInit(&jb->root);
	while ((tok = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
	{
		if (tok == WJB_KEY)
			key = pnstrdup(v.val.string.val, v.val.string.len);
		else if (tok == WJB_VALUE)
		{
			KsOption   *o;

			if (v.type == jbvNull)
				continue;
			o = palloc0(sizeof(KsOption));
			o->name = key;
			if (v.type == jbvBinary &&
				(registry ? ks_registry_option_is_secret(key) : kafka && ks_option_is_secret(key)))
			{
				ks_secret_ref_parse(v.val.binary.data,
									registry ? "schema registry option" : "Kafka option",
									key, &o->ref, &o->value);
				result = lappend(result, o);
				continue;
			}
			switch (v.type)
			{
				case jbvString:
					o->value = pnstrdup(v.val.string.val, v.val.string.len);
					break;
				case jbvNumeric:
					o->value = DatumGetCString(DirectFunctionCall1(numeric_out, NumericGetDatum(v.val.numeric)));
					break;
				case jbvBool:
					o->value = v.val.boolean ? "true" : "false";
					break;
				default:
					ereport(ERROR,
							(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
							 errmsg("%s value for \"%s\" must be a string, number or boolean", what, key),
							 kafka || registry ?
							 errhint("Use a JSON string, number or boolean; only a secret option takes {\"env\": \"NAME\"} or {\"file\": \"/path\"}.") :
							 errhint("Use a JSON string, number or boolean.")));
			}
			result = lappend(result, o);
		}
	}
	return result;
}

/*
 * _check_kafka_options(options): STRICT; options must be a JSON object of
 * scalars (options_from_jsonb), then the option rules of consumer.c.
 * Touches nothing else.
 */
Datum
kafka_sink_check_kafka_options(PG_FUNCTION_ARGS)
{
	List	   *options = options_from_jsonb(PG_GETARG_JSONB_P(0), "kafka_options");

	/* the pipeline's owner is the calling role (create_pipeline) */
	ks_options_check(options, GetUserId(), KS_USE_CONSUMER);
	ks_check_options(options);
	PG_RETURN_VOID();
}

/*
 * _check_bootstrap_servers(servers): STRICT; raises unless every broker
 * parses as a host and kafka_sink.allowed_hosts allows it (the worker
 * checks again before it connects).  Touches nothing else.
 */
Datum
kafka_sink_check_bootstrap_servers(PG_FUNCTION_ARGS)
{
	ks_hosts_check_brokers("bootstrap_servers", text_to_cstring(PG_GETARG_TEXT_PP(0)));
	PG_RETURN_VOID();
}

/* _is_secret_option(name): STRICT and IMMUTABLE; any string is a valid question. */
Datum
kafka_sink_is_secret_option(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(ks_option_is_secret(text_to_cstring(PG_GETARG_TEXT_PP(0))));
}

/*
 * The caller's headers, refused if one has a name kafka_sink writes
 * itself, then, during a batch, kafka_sink.hops (hops.c).
 */
static List *
with_hops_header(List *headers)
{
	ListCell   *lc;
	KsOption   *h;

	foreach(lc, headers)
	{
		h = lfirst(lc);
		if (ks_header_name_reserved(h->name))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("header \"%s\" is reserved", h->name),
					 errdetail("Header names beginning with \"kafka_sink.\" are written by kafka_sink."),
					 errhint("Choose another header name.")));
	}
	if (!ks_hops_in_batch())
		return headers;
	h = palloc0(sizeof(KsOption));
	h->name = pstrdup(KS_HOPS_HEADER);
	h->value = psprintf("%d", ks_hops_next());
	return lappend(headers, h);
}

/*
 * produce(bootstrap_servers, topic, key, value, headers, partition)
 * Waits for the acknowledgement; not transactional.
 * Checks: the call context before anything is sent (a message once sent
 * stays); bootstrap_servers and topic not NULL nor empty, a topic name
 * Kafka accepts; headers a JSON object of scalars, none named kafka_sink.*
 * (during a batch the message gets kafka_sink.hops); partition not negative.
 */
Datum
kafka_sink_produce(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	char	   *servers;
	char	   *topic;
	text	   *key = PG_ARGISNULL(2) ? NULL : PG_GETARG_TEXT_PP(2);
	text	   *value = PG_ARGISNULL(3) ? NULL : PG_GETARG_TEXT_PP(3);
	List	   *headers = PG_ARGISNULL(4) ? NIL : options_from_jsonb(PG_GETARG_JSONB_P(4), "headers");
	int32		partition = PG_ARGISNULL(5) ? -1 : PG_GETARG_INT32(5);
	int32		out_partition;
	int64		out_offset;
	Datum		values[2];
	bool		nulls[2] = {false, false};

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("bootstrap_servers and topic cannot be null"),
				 errhint("Pass bootstrap_servers => 'localhost:9092', topic => 'orders.v1'.")));
	ks_srf_check_context(fcinfo, "kafka_sink.produce()");
	servers = text_to_cstring(PG_GETARG_TEXT_PP(0));
	topic = text_to_cstring(PG_GETARG_TEXT_PP(1));
	if (servers[0] == '\0')
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("bootstrap_servers cannot be empty"),
				 errhint("Pass bootstrap_servers => 'localhost:9092'.")));
	if (topic[0] == '\0' || strlen(topic) > 249 || strcmp(topic, ".") == 0 || strcmp(topic, "..") == 0 ||
		strspn(topic, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-") != strlen(topic))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid topic name \"%s\"", topic),
				 errhint("Kafka topic names use letters, digits, \".\", \"_\" and \"-\", 1 to 249 characters.")));
	if (PG_NARGS() > 5 && !PG_ARGISNULL(5) && partition < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("partition must not be negative"),
				 errhint("Pass NULL to let the partitioner choose by key.")));

	headers = with_hops_header(headers);
	ks_produce(servers, topic,
			   key ? VARDATA_ANY(key) : NULL, key ? VARSIZE_ANY_EXHDR(key) : 0,
			   value ? VARDATA_ANY(value) : NULL, value ? VARSIZE_ANY_EXHDR(value) : 0,
			   headers, partition, &out_partition, &out_offset);

	InitMaterializedSRF(fcinfo, 0);
	values[0] = Int32GetDatum(out_partition);
	values[1] = Int64GetDatum(out_offset);
	tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	return (Datum) 0;
}

/*
 * _watermarks(pipeline): low and high watermarks of every partition the
 * pipeline reads, asked of the broker now.  Used by kafka_sink.wait().
 * Checks: pipeline not NULL, at finite; the call context before the broker
 * is contacted.  It contacts the broker with the pipeline's options,
 * secrets included, so it must only work on pipelines the caller may see:
 * it runs with the caller's rights (SECURITY INVOKER, no SET ROLE) and
 * reads pipeline_definitions and secrets through SPI, under their row
 * level security, so another owner's pipeline "does not exist" here
 * (test: sql/internal_functions.sql).
 */
Datum
kafka_sink_watermarks(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	char	   *name;
	bool		with_at = !PG_ARGISNULL(1);
	volatile int64 at_ms = 0;
	KsPipeline *p;
	KsConsumer *c;
	List	   *tps;
	char	   *err = NULL;
	ListCell   *lc;
	int64		id;

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("pipeline name cannot be null"),
				 errhint("Pass the pipeline's name.")));
	ks_srf_check_context(fcinfo, "kafka_sink._watermarks()");
	name = text_to_cstring(PG_GETARG_TEXT_PP(0));
	if (with_at && TIMESTAMP_NOT_FINITE(PG_GETARG_TIMESTAMPTZ(1)))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("the time to look up offsets for must be finite"),
				 errhint("Pass a timestamp, or NULL for the watermarks only.")));
	if (with_at)
		at_ms = ks_timestamptz_to_epoch_ms(PG_GETARG_TIMESTAMPTZ(1));
	InitMaterializedSRF(fcinfo, 0);
	ks_spi_connect();
	id = ks_catalog_pipeline_id(name);
	if (id < 0)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("pipeline \"%s\" does not exist", name),
				 errhint("SELECT name FROM kafka_sink.pipelines lists the pipelines you can see.")));
	p = ks_load_pipeline(id, CurrentMemoryContext);
	if (p == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("pipeline \"%s\" does not exist", name),
				 errhint("SELECT name FROM kafka_sink.pipelines lists the pipelines you can see.")));
	/* secrets of other roles are invisible here (row level security) */
	{
		MemoryContext old = MemoryContextSwitchTo(rsinfo->econtext->ecxt_per_query_memory);
		KsPipeline *copy = palloc(sizeof(KsPipeline));

		*copy = *p;
		p = copy;
		MemoryContextSwitchTo(old);
	}

	c = ks_consumer_create(p, ".wait");
	PG_TRY();
	{
		if (p->source.assign != NIL)
			tps = p->source.assign;
		else
			tps = ks_consumer_list_partitions(c, p->source.subscribe, p->source.subscribe_pattern, 10000, &err);
		if (err)
			ereport(ERROR,
					(errcode(ERRCODE_CONNECTION_FAILURE),
					 errmsg("could not read the topics of pipeline \"%s\"", name),
					 errdetail("%s.", err)));
		foreach(lc, tps)
		{
			KsTopicPartition *tp = lfirst(lc);
			int64		low,
						high;
			Datum		values[5];
			bool		nulls[5] = {false, false, false, false, true};
			int64		at_offset;

			if (!ks_consumer_watermarks(c, tp->topic, tp->partition, &low, &high, 10000, &err))
				ereport(ERROR,
						(errcode(ERRCODE_CONNECTION_FAILURE),
						 errmsg("could not read the watermarks of pipeline \"%s\"", name),
						 errdetail("%s.", err)));
			values[0] = CStringGetTextDatum(tp->topic);
			values[1] = Int32GetDatum(tp->partition);
			values[2] = Int64GetDatum(low);
			values[3] = Int64GetDatum(high);
			if (with_at)
			{
				if (!ks_consumer_offset_for_time(c, tp->topic, tp->partition, at_ms, &at_offset, 10000, &err))
					ereport(ERROR,
							(errcode(ERRCODE_CONNECTION_FAILURE),
							 errmsg("could not look up offsets by time for pipeline \"%s\"", name),
							 errdetail("%s.", err)));
				values[4] = Int64GetDatum(at_offset);
				nulls[4] = false;
			}
			tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
		}
	}
	PG_FINALLY();
	{
		ks_consumer_destroy(c);
	}
	PG_END_TRY();
	ks_consumer_emit_logs();
	SPI_finish();
	return (Datum) 0;
}

/*
 * _wake_launcher(): no arguments; wakes this database's scheduler and the
 * launcher when the calling transaction commits (shmem.c), so that they
 * see the change (a start, stop, alter or drop) at once rather than at
 * their next nap, and never before it is visible.
 */
Datum
kafka_sink_wake_launcher(PG_FUNCTION_ARGS)
{
	ks_wake_launcher_at_commit(false);
	PG_RETURN_VOID();
}

/*
 * The live worker slots: pipeline, worker index, pid, state, detail.
 * Shows only the slots of this database whose owner the caller is a
 * member of (ks_may_see_owner: the catalog's rule), and the outbox relay's,
 * which belongs to no pipeline (kafka_sink.outbox_status shows it to every
 * admin).
 */
Datum
kafka_sink_worker_pids(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	KsWorkerSlot *copy;
	int			n = 0;

	ks_srf_check_context(fcinfo, "kafka_sink._worker_pids()");
	InitMaterializedSRF(fcinfo, 0);
	if (ks_shared == NULL)
		return (Datum) 0;
	/* copied under the lock; the role checks may read the catalog */
	copy = palloc(sizeof(KsWorkerSlot) * Max(ks_shared->nslots, 1));
	LWLockAcquire(ks_shared->lock, LW_SHARED);
	for (int i = 0; i < ks_shared->nslots; i++)
		if (ks_shared->slots[i].in_use && ks_shared->slots[i].database == MyDatabaseId)
			copy[n++] = ks_shared->slots[i];
	LWLockRelease(ks_shared->lock);
	for (int i = 0; i < n; i++)
	{
		KsWorkerSlot *s = &copy[i];
		Datum		values[5];
		bool		nulls[5] = {false, false, false, false, false};

		if (s->pipeline_id != KS_RELAY_ID && !ks_may_see_owner(s->owner))
			continue;
		values[0] = Int64GetDatum(s->pipeline_id);
		values[1] = Int32GetDatum(s->worker_index);
		values[2] = Int32GetDatum(s->pid);
		values[3] = CStringGetTextDatum(s->pid > 0 ? "running" : "starting");
		values[4] = CStringGetTextDatum(s->detail);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}

/*
 * The partitions the workers of this database own, with cached watermarks.
 * Shows only the partitions of workers whose owner the caller is a member
 * of (ks_may_see_owner: the catalog's rule).
 */
Datum
kafka_sink_partition_stats(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	KsPartStat *copy;
	int			ncopy = 0;

	ks_srf_check_context(fcinfo, "kafka_sink._partition_stats()");
	InitMaterializedSRF(fcinfo, 0);
	if (ks_shared == NULL)
		return (Datum) 0;
	/* copied under the lock; the role checks may read the catalog */
	copy = palloc(sizeof(KsPartStat) * Max(ks_shared->npartstats, 1));
	LWLockAcquire(ks_shared->lock, LW_SHARED);
	for (int i = 0; i < ks_shared->npartstats; i++)
		if (KS_PARTSTATS()[i].in_use && KS_PARTSTATS()[i].database == MyDatabaseId)
			copy[ncopy++] = KS_PARTSTATS()[i];
	LWLockRelease(ks_shared->lock);
	for (int i = 0; i < ncopy; i++)
	{
		KsPartStat *s = &copy[i];
		Datum		v[10];
		bool		n[10] = {false, false, false, false, false, false, false, false, false, false};

		if (!ks_may_see_owner(s->owner))
			continue;
		v[0] = Int64GetDatum(s->pipeline_id);
		v[1] = CStringGetTextDatum(s->topic);
		v[2] = Int32GetDatum(s->partition);
		v[3] = Int32GetDatum(s->worker_index);
		v[4] = Int32GetDatum(s->pid);
		v[5] = Int64GetDatum(s->low);
		n[5] = s->low < 0;
		v[6] = Int64GetDatum(s->high);
		n[6] = s->high < 0;
		v[7] = TimestampTzGetDatum(s->watermarks_at);
		n[7] = s->watermarks_at == 0;
		v[8] = Float8GetDatum(s->avg_bytes);
		v[9] = Float8GetDatum(s->rate);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, v, n);
	}
	return (Datum) 0;
}

/*
 * kafka_sink.librdkafka_version() -> text: the librdkafka this backend
 * loaded (rd_kafka_version_str()), e.g. "2.12.1"; the workers are forked
 * from the same postmaster and run the same library.
 */
Datum
kafka_sink_librdkafka_version(PG_FUNCTION_ARGS)
{
	PG_RETURN_TEXT_P(cstring_to_text(ks_librdkafka_version()));
}

/*
 * kafka_sink.librdkafka_features() -> text[]: the loaded librdkafka's
 * builtin.features, e.g. {gzip,snappy,ssl,sasl,...,sasl_oauthbearer,http,oidc}.
 */
Datum
kafka_sink_librdkafka_features(PG_FUNCTION_ARGS)
{
	char	   *features = ks_librdkafka_features();
	ArrayBuildState *astate = NULL;
	char	   *tok;
	char	   *save = NULL;

	for (tok = strtok_r(features, ",", &save); tok != NULL; tok = strtok_r(NULL, ",", &save))
		if (*tok != '\0')
			astate = accumArrayResult(astate, CStringGetTextDatum(tok), false,
									  TEXTOID, CurrentMemoryContext);
	if (astate == NULL)
		PG_RETURN_ARRAYTYPE_P(construct_empty_array(TEXTOID));
	PG_RETURN_DATUM(makeArrayResult(astate, CurrentMemoryContext));
}

/* ---- schema_registry options (the same rules as kafka_options) ---- */

PG_FUNCTION_INFO_V1(kafka_sink_check_registry_options);
PG_FUNCTION_INFO_V1(kafka_sink_is_secret_registry_option);

Datum
kafka_sink_check_registry_options(PG_FUNCTION_ARGS)
{
	List	   *options;
	ListCell   *lc;
	bool		url = false;

	if (PG_ARGISNULL(0))
		PG_RETURN_VOID();
	options = options_from_jsonb(PG_GETARG_JSONB_P(0), "schema_registry");
	/* the pipeline's owner is the calling role */
	ks_registry_options_check(options, GetUserId());
	foreach(lc, options)
		if (strcmp(((KsOption *) lfirst(lc))->name, "url") == 0)
			url = true;
	if (!url)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("schema_registry needs a url"),
				 errhint("Pass schema_registry => '{\"url\": \"https://registry:8081\"}'.")));
	PG_RETURN_VOID();
}

Datum
kafka_sink_is_secret_registry_option(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(ks_registry_option_is_secret(text_to_cstring(PG_GETARG_TEXT_PP(0))));
}
