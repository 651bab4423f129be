/*-------------------------------------------------------------------------
 *
 * catalog.c
 *		Every read and write of the extension's own tables (pipeline
 *		definitions, offsets, batches, data loss, quarantine, outbox, event
 *		ids, errors), the workers' transaction block, and ks_spi_exec, the
 *		one SPI helper, which checks every return code.
 *
 * Owns: all SQL text against kafka_sink.* (a reader finds any statement on
 * our catalog here), with the definition's columns named (Anum_pipeline_*).
 * Must not: decide anything; callers decide what to write, this file only
 * how.  Over 1,000 lines on purpose: splitting it would break the one rule
 * that makes it useful, one place for every statement on our tables.
 *
 * Every statement is schema-qualified; the workers also pin search_path to
 * pg_catalog, pg_temp so that no object of a user can be picked up by name.
 * All functions here run inside a transaction with SPI connected (see
 * ks_xact_begin), except those that say they open their own.
 *
 *-------------------------------------------------------------------------
 */
#include "kafka_sink.h"
#include "spi.h"
#include "pipeline.h"
#include "catalog_guard.h"
#include "catalog.h"
#include "hops.h"
#include "offsets.h"
#include "secret_ref.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "pgstat.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/resowner.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"
#include "utils/array.h"

/* SPI_connect, or an error */
void
ks_spi_connect(void)
{
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "kafka_sink: SPI_connect failed");
}

void
ks_xact_begin(const char *activity)
{
	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	ks_spi_connect();
	PushActiveSnapshot(GetTransactionSnapshot());
	pgstat_report_activity(STATE_RUNNING, activity);
}

void
ks_xact_commit(void)
{
	int			saved;

	SPI_finish();
	PopActiveSnapshot();
	/* deferred triggers on a target run here: not with catalog writes allowed */
	saved = ks_catalog_writes_suspend();
	PG_TRY();
	{
		CommitTransactionCommand();
	}
	PG_FINALLY();
	{
		ks_catalog_writes_restore(saved);
	}
	PG_END_TRY();
	pgstat_report_stat(false);
	pgstat_report_activity(STATE_IDLE, NULL);
}

/*
 * Runs fn(arg) in a subtransaction of the current transaction.  Returns
 * NULL when it succeeded; otherwise the subtransaction is rolled back and
 * its error is returned (in the caller's memory context) for the caller
 * to handle or rethrow with ReThrowError().
 */
ErrorData *
ks_try_subxact(void (*fn) (void *arg), void *arg)
{
	MemoryContext cxt = CurrentMemoryContext;
	ResourceOwner owner = CurrentResourceOwner;
	ErrorData  *volatile edata = NULL;

	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(cxt);
	PG_TRY();
	{
		fn(arg);
		ReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(cxt);
		CurrentResourceOwner = owner;
	}
	PG_CATCH();
	{
		MemoryContextSwitchTo(cxt);
		edata = CopyErrorData();
		FlushErrorState();
		RollbackAndReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(cxt);
		CurrentResourceOwner = owner;
	}
	PG_END_TRY();
	return edata;
}

/*
 * The one way this extension runs SQL against its catalog: the statement,
 * its parameters, and the SPI result it must give (SPI_OK_SELECT,
 * SPI_OK_INSERT, ...); anything else is an error naming what failed.
 */
void
ks_spi_exec(const char *what, const char *sql, int nargs, Oid *argtypes, Datum *values,
			const char *nulls, bool read_only, int expected)
{
	int			rc = ks_spi_execute(sql, nargs, argtypes, values, nulls, read_only, 0);

	if (rc != expected)
		elog(ERROR, "kafka_sink: could not %s (%s)", what, SPI_result_code_string(rc));
}

/* Runs a statement with one bigint parameter; errors unless it succeeds. */
static void
exec_id(const char *sql, int64 id, int expected)
{
	Oid			argtypes[1] = {INT8OID};
	Datum		values[1];

	values[0] = Int64GetDatum(id);
	ks_spi_exec("run a catalog statement", sql, 1, argtypes, values, NULL, false, expected);
}

static char *
getstr(int row, int col, MemoryContext mcxt)
{
	char	   *v = SPI_getvalue(SPI_tuptable->vals[row], SPI_tuptable->tupdesc, col);

	return v ? MemoryContextStrdup(mcxt, v) : NULL;
}

static int64
getint8(int row, int col)
{
	bool		isnull;
	Datum		d = SPI_getbinval(SPI_tuptable->vals[row], SPI_tuptable->tupdesc, col, &isnull);

	return isnull ? 0 : DatumGetInt64(d);
}

static int32
getint4(int row, int col)
{
	bool		isnull;
	Datum		d = SPI_getbinval(SPI_tuptable->vals[row], SPI_tuptable->tupdesc, col, &isnull);

	return isnull ? 0 : DatumGetInt32(d);
}

/* The first column of a query's rows, as a list of strings in mcxt. */
static List *
load_text_list(const char *sql, int64 pipeline_id, MemoryContext mcxt)
{
	List	   *result = NIL;
	MemoryContext old;

	exec_id(sql, pipeline_id, SPI_OK_SELECT);
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		char	   *v = getstr(i, 1, mcxt);

		old = MemoryContextSwitchTo(mcxt);
		result = lappend(result, v);
		MemoryContextSwitchTo(old);
	}
	return result;
}

/*
 * A query's (name, value) rows, as a list of KsOption in mcxt.  A third
 * column, when the query has one, is the text of a secret's reference
 * (secret_ref.c) or NULL; a reference that does not parse is an ERROR
 * naming the option.
 */
static List *
load_option_list(const char *sql, int64 pipeline_id, MemoryContext mcxt)
{
	List	   *result = NIL;
	MemoryContext old;

	exec_id(sql, pipeline_id, SPI_OK_SELECT);
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		KsOption   *o = MemoryContextAllocZero(mcxt, sizeof(KsOption));
		char	   *ref = SPI_tuptable->tupdesc->natts >= 3 ? getstr(i, 3, CurrentMemoryContext) : NULL;

		o->name = getstr(i, 1, mcxt);
		o->value = getstr(i, 2, mcxt);
		old = MemoryContextSwitchTo(mcxt);
		if (ref != NULL)
			ks_secret_ref_parse_text(ref, "Kafka option", o->name, &o->ref, &o->value);
		result = lappend(result, o);
		MemoryContextSwitchTo(old);
	}
	return result;
}

/*
 * Parses an offsets spec column (starting_offsets or ending_offsets) with
 * the parser the validator uses (offsets.c): per-partition JSON into a
 * list, a timestamp into Unix milliseconds.  A value the validator would
 * refuse (written into the catalog by hand) is an error naming it.
 */
static void
load_offset_spec(const char *column, const char *spec,
				 List **list, int64 *ts_ms, MemoryContext mcxt)
{
	MemoryContext old = MemoryContextSwitchTo(mcxt);

	(void) ks_parse_offsets_spec(spec, column, list, ts_ms);
	MemoryContextSwitchTo(old);
}

/*
 * The columns ks_load_pipeline reads from kafka_sink.pipeline_definitions,
 * named by their position in PIPELINE_SQL (pg_cron's Anum_ style): a new
 * column is a line here and a line there, and no number is written twice.
 */
#define Anum_pipeline_id					1
#define Anum_pipeline_name					2
#define Anum_pipeline_owner					3
#define Anum_pipeline_state					4
#define Anum_pipeline_bootstrap_servers		5
#define Anum_pipeline_subscribe_pattern		6
#define Anum_pipeline_target				7
#define Anum_pipeline_order_column			8
#define Anum_pipeline_mode					9
#define Anum_pipeline_batch_function		10
#define Anum_pipeline_starting_offsets		11
#define Anum_pipeline_fail_on_data_loss		12
#define Anum_pipeline_max_offsets_per_batch	13
#define Anum_pipeline_max_batch_bytes		14
#define Anum_pipeline_trigger_interval_ms	15
#define Anum_pipeline_workers				16
#define Anum_pipeline_key_format			17
#define Anum_pipeline_delete_on_tombstone	18
#define Anum_pipeline_schema_version_field	19
#define Anum_pipeline_event_id				20
#define Anum_pipeline_event_id_retention_s	21
#define Anum_pipeline_bronze				22
#define Anum_pipeline_ending_offsets		23
#define Anum_pipeline_min_offsets_per_batch	24
#define Anum_pipeline_max_trigger_delay_ms	25
#define Anum_pipeline_dead_letter_topic		26
#define Anum_pipeline_value_format			27
#define Anum_pipeline_value_schema			28
#define Anum_pipeline_registry_url			29
#define Anum_pipeline_registry_timeout_ms	30
#define Anum_pipeline_registry_ca_location	31
#define Anum_pipeline_registry_userinfo		32
#define Anum_pipeline_envelope				33
#define Anum_pipeline_on_truncate			34
#define Anum_pipeline_target_template		35
#define Anum_pipeline_create_targets		36
#define Anum_pipeline_evolve				37
#define Anum_pipeline_unavailable_placeholder	38
#define Anum_pipeline_registry_userinfo_ref	39
#define Anum_pipeline_filter				40
#define Anum_pipeline_delete_mode			41
#define Anum_pipeline_write_mode			42
#define Anum_pipeline_generation			43
#define Natts_pipeline						43	/* track_history_columns: its own query */

#define PIPELINE_SQL \
	"SELECT id, name, owner::oid::int8, state, bootstrap_servers, subscribe_pattern," \
	" coalesce(target::oid, 0)::int8, order_column, mode, coalesce(batch_function::oid, 0)::int8," \
	" starting_offsets, fail_on_data_loss::int::int8, max_offsets_per_batch, max_batch_bytes," \
	" (extract(epoch FROM trigger_interval) * 1000)::int8, workers::int8," \
	" key_format, delete_on_tombstone::int::int8, schema_version_field, event_id," \
	" extract(epoch FROM event_id_retention)::int8, coalesce(bronze::oid, 0)::int8," \
	" ending_offsets," \
	" coalesce(min_offsets_per_batch, 0)," \
	" (extract(epoch FROM max_trigger_delay) * 1000)::int8," \
	" dead_letter_topic," \
	" value_format, value_schema, schema_registry->>'url'," \
	" coalesce((schema_registry->>'timeout.ms')::int8, 30000)," \
	" schema_registry->>'ssl.ca.location'," \
	" (SELECT s.value FROM kafka_sink.secrets s WHERE s.pipeline_id = $1" \
	"   AND s.name = 'schema_registry.basic.auth.user.info')," \
	" envelope, on_truncate," \
	" target_template, create_targets::int::int8, evolve," \
	" unavailable_value_placeholder," \
	" CASE WHEN jsonb_typeof(schema_registry->'basic.auth.user.info') = 'object'" \
	"   THEN (schema_registry->'basic.auth.user.info')::text END," \
	" filter," \
	" delete_mode, write_mode, generation::int8" \
	" FROM kafka_sink.pipeline_definitions WHERE id = $1"

/*
 * The formats of a pipeline (format.h), from its row of PIPELINE_SQL:
 * value_format, key_format avro, value_schema and the schema registry, its
 * secret included.
 */
static void
load_formats(KsPipeline *p, MemoryContext mcxt)
{
	char	   *value_format = getstr(0, Anum_pipeline_value_format, mcxt);
	char	   *url;
	char	   *ref;

	p->contract.value_format_name = value_format ? value_format : "json";
	p->contract.value_schema = getstr(0, Anum_pipeline_value_schema, mcxt);
	url = getstr(0, Anum_pipeline_registry_url, mcxt);
	if (url != NULL)
	{
		KsRegistryConf *r = MemoryContextAllocZero(mcxt, sizeof(KsRegistryConf));
		char	   *list = MemoryContextStrdup(mcxt, url);
		char	   *tok;
		char	   *save = NULL;
		MemoryContext old;

		r->key = url;
		r->timeout_ms = (int) Min(Max(getint8(0, Anum_pipeline_registry_timeout_ms), 1), 3600000);
		r->ca_location = getstr(0, Anum_pipeline_registry_ca_location, mcxt);
		r->userinfo = getstr(0, Anum_pipeline_registry_userinfo, mcxt);
		ref = getstr(0, Anum_pipeline_registry_userinfo_ref, mcxt);
		if (ref != NULL)
		{
			old = MemoryContextSwitchTo(mcxt);
			ks_secret_ref_parse_text(ref, "schema registry option", "basic.auth.user.info",
									 &r->userinfo_ref, &r->userinfo);
			MemoryContextSwitchTo(old);
		}
		r->owner = p->security.owner;
		old = MemoryContextSwitchTo(mcxt);
		for (tok = strtok_r(list, ", ", &save); tok; tok = strtok_r(NULL, ", ", &save))
			r->urls = lappend(r->urls, tok);
		MemoryContextSwitchTo(old);
		p->contract.registry = r;
	}
}

/*
 * Loads the definition of a pipeline, secrets included, into mcxt, with its
 * formats and envelope by name (ks_load_pipeline, decode.c, resolves them).
 * Returns NULL when the pipeline no longer exists.
 */
KsPipeline *
ks_catalog_load_pipeline(int64 pipeline_id, MemoryContext mcxt)
{
	KsPipeline *p;
	char	   *mode;
	MemoryContext old;

	exec_id(PIPELINE_SQL, pipeline_id, SPI_OK_SELECT);
	if (SPI_processed == 0)
		return NULL;
	Assert(SPI_tuptable->tupdesc->natts == Natts_pipeline);

	p = MemoryContextAllocZero(mcxt, sizeof(KsPipeline));
	p->id = getint8(0, Anum_pipeline_id);
	p->name = getstr(0, Anum_pipeline_name, mcxt);
	p->security.owner = (Oid) getint8(0, Anum_pipeline_owner);
	p->state = getstr(0, Anum_pipeline_state, mcxt);
	p->source.bootstrap_servers = getstr(0, Anum_pipeline_bootstrap_servers, mcxt);
	p->source.subscribe_pattern = getstr(0, Anum_pipeline_subscribe_pattern, mcxt);
	p->targets.target = (Oid) getint8(0, Anum_pipeline_target);	/* 0 for a bronze-only pipeline */
	p->targets.order_column = getstr(0, Anum_pipeline_order_column, mcxt);
	mode = getstr(0, Anum_pipeline_mode, mcxt);
	p->targets.mode = strcmp(mode, "append") == 0 ? KS_MODE_APPEND :
		strcmp(mode, "function") == 0 ? KS_MODE_FUNCTION :
		strcmp(mode, "history") == 0 ? KS_MODE_HISTORY : KS_MODE_MERGE;
	p->targets.batch_function = (Oid) getint8(0, Anum_pipeline_batch_function);
	p->source.starting_offsets = getstr(0, Anum_pipeline_starting_offsets, mcxt);
	p->source.fail_on_data_loss = getint8(0, Anum_pipeline_fail_on_data_loss) != 0;
	p->batching.max_offsets_per_batch = getint8(0, Anum_pipeline_max_offsets_per_batch);
	p->batching.max_batch_bytes = getint8(0, Anum_pipeline_max_batch_bytes);
	p->batching.trigger_interval_ms = (int) getint8(0, Anum_pipeline_trigger_interval_ms);
	p->batching.workers = (int) getint8(0, Anum_pipeline_workers);
	{
		char	   *kf = getstr(0, Anum_pipeline_key_format, mcxt);

		p->contract.key_format = strcmp(kf, "string") == 0 ? KS_KEY_STRING :
			strcmp(kf, "json") == 0 ? KS_KEY_JSON :
			strcmp(kf, "avro") == 0 ? KS_KEY_AVRO :
			strcmp(kf, "protobuf") == 0 ? KS_KEY_PROTOBUF : KS_KEY_NONE;
	}
	p->contract.delete_on_tombstone = getint8(0, Anum_pipeline_delete_on_tombstone) != 0;
	p->contract.schema_version_field = getstr(0, Anum_pipeline_schema_version_field, mcxt);
	p->contract.event_id = getstr(0, Anum_pipeline_event_id, mcxt);
	p->contract.event_id_retention_s = (int) Min(getint8(0, Anum_pipeline_event_id_retention_s), INT_MAX);
	p->targets.bronze = (Oid) getint8(0, Anum_pipeline_bronze);
	p->source.ending_offsets = getstr(0, Anum_pipeline_ending_offsets, mcxt);
	p->batching.min_offsets_per_batch = getint8(0, Anum_pipeline_min_offsets_per_batch);
	p->batching.max_trigger_delay_ms = getint8(0, Anum_pipeline_max_trigger_delay_ms);
	p->targets.dead_letter_topic = getstr(0, Anum_pipeline_dead_letter_topic, mcxt);
	p->generation = (int32) getint8(0, Anum_pipeline_generation);
	{
		char	   *dm = getstr(0, Anum_pipeline_delete_mode, mcxt);

		p->targets.soft_delete = dm != NULL && strcmp(dm, "soft") == 0;
	}
	{
		char	   *wm = getstr(0, Anum_pipeline_write_mode, mcxt);

		p->targets.write_mode = wm == NULL ? KS_WRITE_UPSERT :
			strcmp(wm, "insert_only") == 0 ? KS_WRITE_INSERT_ONLY :
			strcmp(wm, "update_only") == 0 ? KS_WRITE_UPDATE_ONLY : KS_WRITE_UPSERT;
	}
	/* the formats (value_format, key_format) and the envelope */
	load_formats(p, mcxt);
	{
		char	   *env = getstr(0, Anum_pipeline_envelope, mcxt);
		char	   *trunc = getstr(0, Anum_pipeline_on_truncate, mcxt);

		p->contract.envelope_name = env ? env : "plain";
		p->contract.unavailable_placeholder = getstr(0, Anum_pipeline_unavailable_placeholder, mcxt);
		if (trunc == NULL || strcmp(trunc, "apply") == 0)
			p->contract.on_truncate = KS_TRUNCATE_APPLY;
		else if (strcmp(trunc, "ignore") == 0)
			p->contract.on_truncate = KS_TRUNCATE_IGNORE;
		else if (strcmp(trunc, "fail") == 0)
			p->contract.on_truncate = KS_TRUNCATE_FAIL;
		else
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("unknown on_truncate \"%s\" of pipeline \"%s\"", trunc, p->name)));
	}

	/* the declarative transform's filter (transform.c) */
	p->targets.filter = getstr(0, Anum_pipeline_filter, mcxt);
	/* routing: the template, create_targets, evolve, and the targets map */
	p->targets.target_template = getstr(0, Anum_pipeline_target_template, mcxt);
	p->targets.create_targets = getint8(0, Anum_pipeline_create_targets) != 0;
	{
		char	   *evolve = getstr(0, Anum_pipeline_evolve, mcxt);

		p->targets.evolve_add_columns = evolve && strcmp(evolve, "add_columns") == 0;
	}
	p->targets.target_map = load_option_list("SELECT t.key, t.value #>> '{}' FROM kafka_sink.pipeline_definitions d,"
									 " jsonb_each(d.targets) t WHERE d.id = $1 AND jsonb_typeof(t.value) = 'string'"
									 " ORDER BY t.key COLLATE \"C\"",
									 pipeline_id, mcxt);

	/* the declarative transform's computed columns (transform.c) */
	p->targets.computed = load_option_list("SELECT c.key, c.value #>> '{}' FROM kafka_sink.pipeline_definitions d,"
										   " jsonb_each(d.computed) c WHERE d.id = $1"
										   " ORDER BY c.key COLLATE \"C\"",
										   pipeline_id, mcxt);

	/* column mappings: the default one, then one per schema version */
	exec_id("SELECT NULL::text, m.key, coalesce(m.value->>'path', m.value #>> '{}'),"
			" coalesce((m.value->>'scale')::int8, 0)"
			" FROM kafka_sink.pipeline_definitions d, jsonb_each(d.columns) m WHERE d.id = $1"
			" UNION ALL"
			" SELECT v.key, m.key, coalesce(m.value->>'path', m.value #>> '{}'),"
			" coalesce((m.value->>'scale')::int8, 0)"
			" FROM kafka_sink.pipeline_definitions d, jsonb_each(d.schema_versions) v,"
			" jsonb_each(v.value) m WHERE d.id = $1",
			pipeline_id, SPI_OK_SELECT);
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		KsMapping  *m = MemoryContextAlloc(mcxt, sizeof(KsMapping));

		m->version = getstr(i, 1, mcxt);
		m->column = getstr(i, 2, mcxt);
		m->path = getstr(i, 3, mcxt);
		m->scale = (int) getint8(i, 4);
		old = MemoryContextSwitchTo(mcxt);
		p->contract.mappings = lappend(p->contract.mappings, m);
		MemoryContextSwitchTo(old);
	}
	p->contract.versions = load_text_list("SELECT v.key FROM kafka_sink.pipeline_definitions d,"
								 " jsonb_each(d.schema_versions) v WHERE d.id = $1 ORDER BY 1",
								 pipeline_id, mcxt);

	p->source.subscribe = load_text_list("SELECT unnest(subscribe) FROM kafka_sink.pipeline_definitions"
								  " WHERE id = $1", pipeline_id, mcxt);
	p->targets.key_columns = load_text_list("SELECT k FROM kafka_sink.pipeline_definitions,"
									" unnest(key_columns) WITH ORDINALITY AS u(k, n)"
									" WHERE id = $1 ORDER BY n", pipeline_id, mcxt);
	p->targets.track_history = load_text_list("SELECT unnest(track_history_columns)"
									   " FROM kafka_sink.pipeline_definitions WHERE id = $1",
									   pipeline_id, mcxt);

	exec_id("SELECT t.key, (e.value #>> '{}')::int8"
			" FROM kafka_sink.pipeline_definitions d, jsonb_each(d.assign) t, jsonb_array_elements(t.value) e"
			" WHERE d.id = $1 ORDER BY 1, 2",
			pipeline_id, SPI_OK_SELECT);
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		KsTopicPartition *tp = MemoryContextAlloc(mcxt, sizeof(KsTopicPartition));

		tp->topic = getstr(i, 1, mcxt);
		tp->partition = (int32) getint8(i, 2);
		old = MemoryContextSwitchTo(mcxt);
		p->source.assign = lappend(p->source.assign, tp);
		MemoryContextSwitchTo(old);
	}

	/* a secret given by reference is in the definition, as its reference */
	p->security.options = load_option_list("SELECT o.key, CASE WHEN jsonb_typeof(o.value) <> 'object' THEN o.value #>> '{}' END,"
								  " CASE WHEN jsonb_typeof(o.value) = 'object' THEN o.value::text END"
								  " FROM kafka_sink.pipeline_definitions d, jsonb_each(d.kafka_options) o"
								  " WHERE d.id = $1"
								  " UNION ALL SELECT name, value, NULL FROM kafka_sink.secrets WHERE pipeline_id = $1"
								  " AND name NOT LIKE 'schema\\_registry.%'",
								  pipeline_id, mcxt);
	load_offset_spec("starting_offsets", p->source.starting_offsets,
					 &p->source.start_offsets, &p->source.start_ts_ms, mcxt);
	if (p->source.ending_offsets)
		load_offset_spec("ending_offsets", p->source.ending_offsets,
						 &p->source.end_offsets, &p->source.end_ts_ms, mcxt);
	return p;
}

/* The pipeline's state, or NULL when it was dropped. */
char *
ks_pipeline_state(int64 pipeline_id)
{
	exec_id("SELECT state FROM kafka_sink.pipeline_definitions WHERE id = $1",
			pipeline_id, SPI_OK_SELECT);
	if (SPI_processed == 0)
		return NULL;
	return getstr(0, 1, CurrentMemoryContext);
}

bool
ks_pipeline_has_offsets(int64 pipeline_id)
{
	exec_id("SELECT 1 FROM kafka_sink.offsets WHERE pipeline_id = $1 LIMIT 1",
			pipeline_id, SPI_OK_SELECT);
	return SPI_processed > 0;
}

/*
 * Fills parts[i].committed from the checkpoint.  Partitions with no row get
 * -1.  Returns true when every partition has a checkpoint.
 */
bool
ks_load_offsets(int64 pipeline_id, KsPartition *parts, int nparts)
{
	bool		all = true;

	exec_id("SELECT topic, partition, next_offset, coalesce(end_offset, -1)"
			" FROM kafka_sink.offsets WHERE pipeline_id = $1",
			pipeline_id, SPI_OK_SELECT);
	for (int i = 0; i < nparts; i++)
	{
		parts[i].committed = -1;
		parts[i].end_offset = -1;
		for (uint64 r = 0; r < SPI_processed; r++)
		{
			char	   *topic = SPI_getvalue(SPI_tuptable->vals[r], SPI_tuptable->tupdesc, 1);

			if (strcmp(topic, parts[i].topic) == 0 &&
				getint4(r, 2) == parts[i].partition)
			{
				parts[i].committed = getint8(r, 3);
				parts[i].end_offset = getint8(r, 4);
				break;
			}
		}
		if (parts[i].committed < 0)
			all = false;
		parts[i].end = parts[i].committed;
	}
	return all;
}

/*
 * Writes the first checkpoint of partitions that have none (committed was
 * resolved from starting_offsets by the caller).  ON CONFLICT DO NOTHING:
 * another worker of the same pipeline may have written it first, and then
 * its value wins; the caller reloads.
 */
void
ks_insert_initial_offsets(int64 pipeline_id, KsPartition *parts, int nparts)
{
	Oid			argtypes[5] = {INT8OID, TEXTOID, INT4OID, INT8OID, INT8OID};

	for (int i = 0; i < nparts; i++)
	{
		Datum		values[5];
		char		nulls[5] = {' ', ' ', ' ', ' ', ' '};
		values[0] = Int64GetDatum(pipeline_id);
		values[1] = CStringGetTextDatum(parts[i].topic);
		values[2] = Int32GetDatum(parts[i].partition);
		values[3] = Int64GetDatum(parts[i].committed);
		values[4] = Int64GetDatum(parts[i].end_offset);
		if (parts[i].end_offset < 0)
			nulls[4] = 'n';
		ks_spi_exec("write the initial checkpoint",
					"INSERT INTO kafka_sink.offsets (pipeline_id, topic, partition, next_offset,"
					" start_offset, end_offset)"
					" VALUES ($1, $2, $3, $4, $4, CASE WHEN $5 IS NOT NULL THEN greatest($5, $4) END)"
					" ON CONFLICT DO NOTHING",
					5, argtypes, values, nulls, false, SPI_OK_INSERT);
	}
}

/*
 * Records an error of a pipeline, in its own transaction.  Must be called
 * outside any transaction.
 */
void
ks_record_error(int64 pipeline_id, const char *kind, int sqlerrcode,
				const char *message, const char *detail)
{
	Oid			argtypes[5] = {INT8OID, TEXTOID, TEXTOID, TEXTOID, TEXTOID};
	Datum		values[5];
	char		nulls[5] = {' ', ' ', ' ', ' ', ' '};

	ks_xact_begin("kafka_sink: recording an error");
	values[0] = Int64GetDatum(pipeline_id);
	values[1] = CStringGetTextDatum(kind);
	if (sqlerrcode != 0)
		values[2] = CStringGetTextDatum(unpack_sql_state(sqlerrcode));
	else
		nulls[2] = 'n';
	values[3] = CStringGetTextDatum(message ? message : "");
	if (detail)
		values[4] = CStringGetTextDatum(detail);
	else
		nulls[4] = 'n';
	ks_spi_exec("record an error",
				"INSERT INTO kafka_sink.errors (pipeline_id, kind, sqlstate, message, detail)"
				" SELECT $1, $2, $3, $4, $5"
				" WHERE EXISTS (SELECT 1 FROM kafka_sink.pipeline_definitions WHERE id = $1)",
				5, argtypes, values, nulls, false, SPI_OK_INSERT);
	/* keep the table short: the last 100 errors of each pipeline */
	exec_id("DELETE FROM kafka_sink.errors WHERE pipeline_id = $1 AND id <= ("
			" SELECT id FROM kafka_sink.errors WHERE pipeline_id = $1"
			" ORDER BY id DESC OFFSET 100 LIMIT 1)",
			pipeline_id, SPI_OK_DELETE);
	ks_xact_commit();
}

/* Sets the state of a pipeline, in its own transaction. */
void
ks_set_state(int64 pipeline_id, const char *state)
{
	Oid			argtypes[2] = {INT8OID, TEXTOID};
	Datum		values[2];

	ks_xact_begin("kafka_sink: setting the pipeline state");
	values[0] = Int64GetDatum(pipeline_id);
	values[1] = CStringGetTextDatum(state);
	ks_spi_exec("set the pipeline state",
				"UPDATE kafka_sink.pipeline_definitions SET state = $2, updated_at = now()"
				" WHERE id = $1",
				2, argtypes, values, NULL, false, SPI_OK_UPDATE);
	ks_xact_commit();
}

/* ---- the batch's writes: batch ids, markers, offsets, data loss ---- */

/*
 * The pipeline's committed batch id counter (last_batch_id), read without a
 * lock: false when the pipeline is no longer running or no longer has the
 * definition of generation generation (alter_pipeline).  Batch ids are
 * handed out in shared memory (checkpoint.c); this is their floor.
 */
bool
ks_catalog_batch_id_floor(int64 pipeline_id, int32 generation, int64 *floor)
{
	Oid			argtypes[2] = {INT8OID, INT4OID};
	Datum		v[2] = {Int64GetDatum(pipeline_id), Int32GetDatum(generation)};

	ks_spi_exec("read the batch id counter",
				"SELECT last_batch_id FROM kafka_sink.pipeline_definitions"
				" WHERE id = $1 AND state = 'running' AND generation = $2",
				2, argtypes, v, NULL, false, SPI_OK_SELECT);
	if (SPI_processed != 1)
		return false;
	*floor = getint8(0, 1);
	return true;
}

/*
 * Records a committed batch id in the pipeline's row, as the batch's last
 * catalog write: false when the pipeline is no longer running.  The row
 * stays locked until commit, so batches of several workers take turns here
 * only for their commit, not for the whole batch.
 */
bool
ks_catalog_record_batch_id(int64 pipeline_id, int64 batch_id)
{
	Oid			argtypes[2] = {INT8OID, INT8OID};
	Datum		v[2] = {Int64GetDatum(pipeline_id), Int64GetDatum(batch_id)};

	ks_spi_exec("record the batch id",
				"UPDATE kafka_sink.pipeline_definitions"
				" SET last_batch_id = greatest(last_batch_id, $2)"
				" WHERE id = $1 AND state = 'running'",
				2, argtypes, v, NULL, false, SPI_OK_UPDATE);
	return SPI_processed == 1;
}

void
ks_catalog_insert_marker(int64 pipeline_id, int64 batch_id, int worker, const char *ranges,
						 const KsBatchStats *s, TimestampTz started_at, const char *progress)
{
	Oid			argtypes[19] = {INT8OID, INT8OID, INT4OID, TEXTOID, INT8OID, INT8OID, INT8OID,
	INT8OID, INT8OID, INT8OID, INT8OID, INT8OID, TIMESTAMPTZOID, INT8OID, TEXTOID, INT8OID, INT8OID, INT8OID,
	INT8OID};
	Datum		v[19];

	v[0] = Int64GetDatum(pipeline_id);
	v[1] = Int64GetDatum(batch_id);
	v[2] = Int32GetDatum(worker);
	v[3] = CStringGetTextDatum(ranges);
	v[4] = Int64GetDatum(s->messages);
	v[5] = Int64GetDatum(s->inserted);
	v[6] = Int64GetDatum(s->updated);
	v[7] = Int64GetDatum(s->deleted);
	v[8] = Int64GetDatum(s->stale);
	v[9] = Int64GetDatum(s->superseded);
	v[10] = Int64GetDatum(s->quarantined);
	v[11] = Int64GetDatum(s->bytes);
	v[12] = TimestampTzGetDatum(started_at);
	v[13] = Int64GetDatum(s->duplicates);
	v[14] = CStringGetTextDatum(progress);
	v[15] = Int64GetDatum(s->filtered);
	v[16] = Int64GetDatum(s->soft_deleted);
	v[17] = Int64GetDatum(s->skipped);
	v[18] = Int64GetDatum(s->revived);
	ks_spi_exec("write the batch marker",
				"INSERT INTO kafka_sink.batches (pipeline_id, batch_id, worker, ranges,"
				" messages, inserted, updated, deleted, stale, superseded, quarantined,"
				" bytes, started_at, duplicates, progress, filtered, soft_deleted, skipped, revived)"
				" VALUES ($1, $2, $3, $4::jsonb, $5, $6, $7,"
				" $8, $9, $10, $11, $12, $13, $14, $15::jsonb, $16, $17, $18, $19)",
				19, argtypes, v, NULL, false, SPI_OK_INSERT);
}

void
ks_catalog_insert_data_loss(int64 pipeline_id, int64 batch_id, const char *topic, int32 partition,
							int64 expected, int64 available)
{
	Oid			argtypes[6] = {INT8OID, INT8OID, TEXTOID, INT4OID, INT8OID, INT8OID};
	Datum		v[6];

	v[0] = Int64GetDatum(pipeline_id);
	v[1] = Int64GetDatum(batch_id);
	v[2] = CStringGetTextDatum(topic);
	v[3] = Int32GetDatum(partition);
	v[4] = Int64GetDatum(expected);
	v[5] = Int64GetDatum(available);
	ks_spi_exec("record data loss",
				"INSERT INTO kafka_sink.data_loss (pipeline_id, batch_id, topic,"
				" partition, expected_offset, available_offset, kind)"
				" VALUES ($1, $2, $3, $4, $5, $6,"
				" CASE WHEN $6 >= $5 THEN 'deleted' ELSE 'reset' END)",
				6, argtypes, v, NULL, false, SPI_OK_INSERT);
}

/*
 * Moves a partition's checkpoint from "from" to "to": false when it was
 * not at "from" (another process moved it).
 */
bool
ks_catalog_advance_offset(int64 pipeline_id, const char *topic, int32 partition,
						  int64 from, int64 to, int64 batch_id)
{
	Oid			argtypes[6] = {INT8OID, TEXTOID, INT4OID, INT8OID, INT8OID, INT8OID};
	Datum		v[6];

	v[0] = Int64GetDatum(pipeline_id);
	v[1] = CStringGetTextDatum(topic);
	v[2] = Int32GetDatum(partition);
	v[3] = Int64GetDatum(to);
	v[4] = Int64GetDatum(batch_id);
	v[5] = Int64GetDatum(from);
	ks_spi_exec("write the checkpoint",
				"UPDATE kafka_sink.offsets SET next_offset = $4, batch_id = $5,"
				" updated_at = now()"
				" WHERE pipeline_id = $1 AND topic = $2 AND partition = $3"
				" AND next_offset = $6",
				6, argtypes, v, NULL, false, SPI_OK_UPDATE);
	return SPI_processed == 1;
}

/* Deletes the markers up to batch upto that are older than older_than_s. */
void
ks_catalog_prune_batches(int64 pipeline_id, int64 upto, int64 older_than_s)
{
	Oid			argtypes[3] = {INT8OID, INT8OID, INT8OID};
	Datum		v[3];

	v[0] = Int64GetDatum(pipeline_id);
	v[1] = Int64GetDatum(upto);
	v[2] = Int64GetDatum(older_than_s);
	ks_spi_exec("prune batch markers",
				"DELETE FROM kafka_sink.batches WHERE pipeline_id = $1 AND batch_id <= $2"
				" AND committed_at < now() - $3 * interval '1 second'",
				3, argtypes, v, NULL, false, SPI_OK_DELETE);
}

/* A bounded pipeline whose partitions all reached their end: 'finished'. */
bool
ks_catalog_finish_bounded(int64 pipeline_id)
{
	Oid			argtypes[1] = {INT8OID};
	Datum		v[1] = {Int64GetDatum(pipeline_id)};

	ks_spi_exec("finish a bounded pipeline",
				"UPDATE kafka_sink.pipeline_definitions SET state = 'finished', updated_at = now()"
				" WHERE id = $1 AND state = 'running' AND NOT EXISTS ("
				"  SELECT 1 FROM kafka_sink.offsets o WHERE o.pipeline_id = $1"
				"  AND (o.end_offset IS NULL OR o.next_offset < o.end_offset))",
				1, argtypes, v, NULL, false, SPI_OK_UPDATE);
	return SPI_processed == 1;
}

/* ---- quarantine and its dead-letter outbox row ---- */

/* A quarantine row for message m (or the row it replaces); returns its id. */
int64
ks_catalog_insert_quarantine(int64 pipeline_id, int64 batch_id, KsMessage *m,
							 const char *headers_json, const char *reason, const char *detail,
							 const char *target)
{
	Oid			argtypes[12] = {INT8OID, INT8OID, TEXTOID, INT4OID, INT8OID, INT8OID,
	BYTEAOID, BYTEAOID, TEXTOID, TEXTOID, TEXTOID, TEXTOID};
	Datum		v[12];
	char		n[12];

	memset(n, ' ', sizeof(n));
	v[0] = Int64GetDatum(pipeline_id);
	v[1] = Int64GetDatum(batch_id);
	v[2] = CStringGetTextDatum(m->topic);
	v[3] = Int32GetDatum(m->partition);
	v[4] = Int64GetDatum(m->offset);
	v[5] = Int64GetDatum(m->timestamp_ms);
	if (m->timestamp_ms < 0)
		n[5] = 'n';
	if (m->key)
		v[6] = ks_bytea_datum(m->key, m->key_len);
	else
		n[6] = 'n';
	if (m->value)
		v[7] = ks_bytea_datum(m->value, m->value_len);
	else
		n[7] = 'n';
	if (headers_json)
		v[8] = CStringGetTextDatum(headers_json);
	else
		n[8] = 'n';
	v[9] = CStringGetTextDatum(reason);
	v[10] = CStringGetTextDatum(detail);
	if (target)
		v[11] = CStringGetTextDatum(target);
	else
		n[11] = 'n';
	ks_spi_exec("write a quarantine row",
				"INSERT INTO kafka_sink.quarantine AS q"
				" (pipeline_id, batch_id, topic, partition, message_offset, message_ts,"
				"  key, value, headers, reason, detail, target)"
				" VALUES ($1, $2, $3, $4, $5, pg_catalog.to_timestamp($6 / 1000.0), $7, $8, $9::jsonb, $10, $11, $12)"
				" ON CONFLICT (pipeline_id, topic, partition, message_offset) DO UPDATE"
				" SET batch_id = excluded.batch_id, reason = excluded.reason,"
				"     detail = excluded.detail, target = excluded.target, created_at = now(), replayed_at = NULL"
				" RETURNING q.id",
				12, argtypes, v, n, false, SPI_OK_INSERT_RETURNING);
	if (SPI_processed != 1)
		elog(ERROR, "kafka_sink: could not write a quarantine row");
	return getint8(0, 1);
}

/* The extension's owner (whose rights write the dead-letter rows). */
Oid
ks_catalog_extension_owner(void)
{
	ks_spi_exec("find the extension's owner",
				"SELECT extowner::int8 FROM pg_catalog.pg_extension WHERE extname = 'kafka_sink'",
				0, NULL, NULL, NULL, true, SPI_OK_SELECT);
	if (SPI_processed != 1)
		elog(ERROR, "kafka_sink: could not find the extension's owner");
	return (Oid) getint8(0, 1);
}

/*
 * The outbox row of a dead-letter message: the message's key and value
 * bytes, its headers as parallel arrays (text[] names, bytea[] values),
 * its hop count (hops.c).  The caller runs it as the extension's owner.
 */
void
ks_catalog_insert_dead_letter(const char *topic, KsMessage *m, Datum header_names,
							  Datum header_values, const char *created_by, int64 quarantine_id,
							  int hops)
{
	Oid			argtypes[8] = {TEXTOID, BYTEAOID, BYTEAOID, TEXTARRAYOID, BYTEAARRAYOID, TEXTOID, INT8OID, INT4OID};
	Datum		v[8];
	char		n[8];

	memset(n, ' ', sizeof(n));
	v[0] = CStringGetTextDatum(topic);
	if (m->key)
		v[1] = ks_bytea_datum(m->key, m->key_len);
	else
		n[1] = 'n';
	if (m->value)
		v[2] = ks_bytea_datum(m->value, m->value_len);
	else
		n[2] = 'n';
	v[3] = header_names;
	v[4] = header_values;
	v[5] = CStringGetTextDatum(created_by);
	v[6] = Int64GetDatum(quarantine_id);
	v[7] = Int32GetDatum(hops);
	ks_spi_exec("queue a dead-letter message",
				"INSERT INTO kafka_sink.outbox"
				" (topic, key_bytes, value_bytes, header_names, header_values, created_by,"
				"  quarantine_id, hops)"
				" VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
				8, argtypes, v, n, false, SPI_OK_INSERT);
}

/*
 * The quarantined messages of a pipeline among ids, in offset order and
 * locked, read with the caller's rights; returns how many.
 */
int
ks_catalog_read_quarantine(int64 pipeline_id, Datum ids, int64 **qids, KsMessage ***msgs)
{
	Oid			argtypes[2] = {INT8OID, INT8ARRAYOID};
	Datum		values[2] = {Int64GetDatum(pipeline_id), ids};
	SPITupleTable *tt;
	uint64		n;

	ks_spi_exec("read the quarantine",
				"SELECT id, topic, partition, message_offset,"
				" (extract(epoch FROM message_ts) * 1000)::int8, key, value, headers::text"
				" FROM kafka_sink.quarantine WHERE pipeline_id = $1 AND id = ANY ($2)"
				" ORDER BY topic, partition, message_offset FOR UPDATE",
				2, argtypes, values, NULL, false, SPI_OK_SELECT);
	tt = SPI_tuptable;
	n = SPI_processed;
	*msgs = palloc(sizeof(KsMessage *) * Max(n, 1));
	*qids = palloc(sizeof(int64) * Max(n, 1));
	for (uint64 i = 0; i < n; i++)
	{
		KsMessage  *m = palloc0(sizeof(KsMessage));
		bool		isnull;
		Datum		d;

		(*qids)[i] = DatumGetInt64(SPI_getbinval(tt->vals[i], tt->tupdesc, 1, &isnull));
		m->topic = SPI_getvalue(tt->vals[i], tt->tupdesc, 2);
		m->partition = DatumGetInt32(SPI_getbinval(tt->vals[i], tt->tupdesc, 3, &isnull));
		m->offset = DatumGetInt64(SPI_getbinval(tt->vals[i], tt->tupdesc, 4, &isnull));
		d = SPI_getbinval(tt->vals[i], tt->tupdesc, 5, &isnull);
		m->timestamp_ms = isnull ? -1 : DatumGetInt64(d);
		d = SPI_getbinval(tt->vals[i], tt->tupdesc, 6, &isnull);
		if (!isnull)
		{
			bytea	   *b = DatumGetByteaPP(d);

			m->key = VARDATA_ANY(b);
			m->key_len = VARSIZE_ANY_EXHDR(b);
		}
		d = SPI_getbinval(tt->vals[i], tt->tupdesc, 7, &isnull);
		if (!isnull)
		{
			bytea	   *b = DatumGetByteaPP(d);

			m->value = VARDATA_ANY(b);
			m->value_len = VARSIZE_ANY_EXHDR(b);
		}
		m->headers_json = SPI_getvalue(tt->vals[i], tt->tupdesc, 8);
		(*msgs)[i] = m;
	}
	return (int) n;
}

/*
 * A replayed quarantine row: applied now (reason NULL; filter: the
 * pipeline's filter that left it out, NULL when it applied), or failing again.
 */
void
ks_catalog_mark_replay(int64 qid, const char *reason, const char *detail, const char *revived,
					   const char *filter)
{
	Oid			argtypes[3] = {INT8OID, TEXTOID, TEXTOID};
	Datum		v[3];
	char		nulls[3] = "   ";

	v[0] = Int64GetDatum(qid);
	if (reason == NULL)
	{
		/*
		 * filter: the one that left the message out (it is filtered);
		 * revived: its upsert brought a marked row back (delete_mode soft),
		 * what that row held to order by
		 */
		v[1] = filter ? CStringGetTextDatum(filter) : (Datum) 0;
		nulls[1] = filter ? ' ' : 'n';
		v[2] = revived ? CStringGetTextDatum(revived) : (Datum) 0;
		nulls[2] = revived ? ' ' : 'n';
		ks_spi_exec("mark a quarantine row replayed",
					"UPDATE kafka_sink.quarantine SET replayed_at = now(), replay_filter = $2, replay_revived = $3"
					" WHERE id = $1",
					3, argtypes, v, nulls, false, SPI_OK_UPDATE);
	}
	else
	{
		v[1] = CStringGetTextDatum(reason);
		v[2] = CStringGetTextDatum(detail);
		ks_spi_exec("record a replay's new reason",
					"UPDATE kafka_sink.quarantine SET reason = $2, detail = $3,"
					" replayed_at = NULL, replay_filter = NULL, replay_revived = NULL WHERE id = $1",
					3, argtypes, v, NULL, false, SPI_OK_UPDATE);
	}
}

static Datum text_array(List *texts);

/* ---- change events: the positions of deleted keys and truncates ---- */

/*
 * The recorded positions of keys (their canonical JSON texts, compared
 * bytewise; "null" is the truncate) of
 * a pipeline's target: fills *found_keys and *found_positions (texts).
 * Not read-only: it must see the truncate this batch recorded just before.
 */
void
ks_catalog_cdc_positions(int64 pipeline_id, Oid target, List *keys,
						 List **found_keys, List **found_positions)
{
	Oid			argtypes[3] = {INT8OID, OIDOID, TEXTARRAYOID};
	Datum		values[3] = {Int64GetDatum(pipeline_id), ObjectIdGetDatum(target), text_array(keys)};

	*found_keys = NIL;
	*found_positions = NIL;
	ks_spi_exec("read deleted keys",
				"SELECT key, position::text FROM kafka_sink.cdc_deletions"
				" WHERE pipeline_id = $1 AND target = $2 AND key = ANY ($3::text[])",
				3, argtypes, values, NULL, false, SPI_OK_SELECT);
	for (uint64 r = 0; r < SPI_processed; r++)
	{
		*found_keys = lappend(*found_keys, getstr(r, 1, CurrentMemoryContext));
		*found_positions = lappend(*found_positions, getstr(r, 2, CurrentMemoryContext));
	}
}

/*
 * Records positions of keys (each key once), keeping the greatest; times
 * (mode history's truncates, or NIL): each one's source commit time as
 * timestamptz text ("": none), keeping the earliest.
 */
void
ks_catalog_cdc_record(int64 pipeline_id, Oid target, List *keys, List *positions, List *times)
{
	Oid			argtypes[5] = {INT8OID, OIDOID, TEXTARRAYOID, TEXTARRAYOID, TEXTARRAYOID};
	Datum		values[5] = {Int64GetDatum(pipeline_id), ObjectIdGetDatum(target),
	text_array(keys), text_array(positions), times != NIL ? text_array(times) : (Datum) 0};
	char		nulls[5] = {' ', ' ', ' ', ' ', times != NIL ? ' ' : 'n'};

	ks_spi_exec("record deleted keys",
				"INSERT INTO kafka_sink.cdc_deletions AS d (pipeline_id, target, key, position, source_time)"
				" SELECT $1, $2, u.k, u.p::numeric, NULLIF(u.s, '')::timestamptz"
				" FROM unnest($3::text[], $4::text[], $5::text[]) AS u(k, p, s)"
				" ON CONFLICT (pipeline_id, target, key) DO UPDATE"
				" SET position = greatest(d.position, excluded.position), recorded_at = now(),"
				" source_time = least(d.source_time, excluded.source_time)",
				5, argtypes, values, nulls, false, SPI_OK_INSERT);
}

/* Prunes deleted keys older than the retention; the truncate row stays. */
void
ks_catalog_cdc_prune(int64 pipeline_id, Oid target, int64 older_than_s)
{
	Oid			argtypes[3] = {INT8OID, OIDOID, INT8OID};
	Datum		values[3] = {Int64GetDatum(pipeline_id), ObjectIdGetDatum(target), Int64GetDatum(older_than_s)};

	ks_spi_exec("prune deleted keys",
				"DELETE FROM kafka_sink.cdc_deletions WHERE pipeline_id = $1 AND target = $2"
				" AND key LIKE '[%' AND recorded_at < now() - make_interval(secs => $3)",
				3, argtypes, values, NULL, false, SPI_OK_DELETE);
}

/* ---- event ids (producer duplicates) ---- */

static Datum
text_array(List *texts)
{
	Datum	   *elems = palloc(sizeof(Datum) * Max(list_length(texts), 1));
	ListCell   *lc;
	int			i = 0;

	foreach(lc, texts)
		elems[i++] = CStringGetTextDatum((char *) lfirst(lc));
	return PointerGetDatum(construct_array(elems, i, TEXTOID, -1, false, TYPALIGN_INT));
}

/* Which of ids (char *) were applied to target before: a list of char *. */
List *
ks_catalog_seen_event_ids(Oid target, List *ids)
{
	Oid			argtypes[2] = {OIDOID, TEXTARRAYOID};
	Datum		values[2] = {ObjectIdGetDatum(target), text_array(ids)};
	List	   *seen = NIL;

	ks_spi_exec("read event ids",
				"SELECT event_id FROM kafka_sink.event_ids"
				" WHERE target = $1 AND event_id = ANY ($2)",
				2, argtypes, values, NULL, true, SPI_OK_SELECT);
	for (uint64 r = 0; r < SPI_processed; r++)
		seen = lappend(seen, getstr(r, 1, CurrentMemoryContext));
	return seen;
}

/*
 * Records applied event ids, in one order for every process (workers of
 * one pipeline apply in parallel: two inserting the same ids in different
 * orders would wait for each other).
 */
void
ks_catalog_record_event_ids(Oid target, List *ids, int64 batch_id)
{
	Oid			argtypes[3] = {OIDOID, TEXTARRAYOID, INT8OID};
	Datum		values[3] = {ObjectIdGetDatum(target), text_array(ids), Int64GetDatum(batch_id)};

	ks_spi_exec("record event ids",
				"INSERT INTO kafka_sink.event_ids (target, event_id, batch_id)"
				" SELECT $1, e, $3 FROM unnest($2) e ORDER BY e COLLATE \"C\""
				" ON CONFLICT DO NOTHING",
				3, argtypes, values, NULL, false, SPI_OK_INSERT);
}

void
ks_catalog_prune_event_ids(Oid target, int64 older_than_s)
{
	Oid			argtypes[2] = {OIDOID, INT8OID};
	Datum		values[2] = {ObjectIdGetDatum(target), Int64GetDatum(older_than_s)};

	ks_spi_exec("prune event ids",
				"DELETE FROM kafka_sink.event_ids WHERE target = $1"
				" AND seen_at < now() - $2 * interval '1 second'",
				2, argtypes, values, NULL, false, SPI_OK_DELETE);
}

/* The id of the pipeline called name that the caller can see, or -1. */
int64
ks_catalog_pipeline_id(const char *name)
{
	Oid			argtypes[1] = {TEXTOID};
	Datum		values[1] = {CStringGetTextDatum(name)};

	ks_spi_exec("look up a pipeline",
				"SELECT id FROM kafka_sink.pipeline_definitions WHERE name = $1",
				1, argtypes, values, NULL, true, SPI_OK_SELECT);
	return SPI_processed == 0 ? -1 : getint8(0, 1);
}

/* ---- the launcher: pipelines that should have workers ---- */

/*
 * The pipelines that should have workers, and for each what would stop a
 * worker from doing its job, checked here by the launcher (a superuser)
 * because a worker cannot report some of it itself: it connects as the
 * owner, so a dropped or NOLOGIN owner kills it before it can write
 * anything.  The target, bronze table, batch function and key columns are
 * regclass/regprocedure/name references that PostgreSQL does not track,
 * so dropping them leaves the definition dangling.
 */
#define WANTED_SQL \
	"SELECT p.id, p.owner::oid, p.workers, p.state = 'paused', p.generation, x.problem, h.hint" \
	" FROM kafka_sink.pipeline_definitions p" \
	" LEFT JOIN pg_catalog.pg_authid r ON r.oid = p.owner::oid" \
	" LEFT JOIN LATERAL (SELECT k FROM pg_catalog.unnest(p.key_columns || p.order_column) k" \
	"   WHERE p.target IS NOT NULL AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_attribute a" \
	"   WHERE a.attrelid = p.target AND a.attname = k AND a.attnum > 0 AND NOT a.attisdropped) LIMIT 1) mk ON true" \
	" CROSS JOIN LATERAL (SELECT" \
	"  CASE WHEN r.oid IS NULL THEN pg_catalog.format('the owner of pipeline \"%s\" (role OID %s) no longer exists', p.name, p.owner::oid)" \
	"   WHEN NOT r.rolcanlogin THEN pg_catalog.format('the owner of pipeline \"%s\", role \"%s\", cannot log in', p.name, r.rolname)" \
	"   WHEN r.rolsuper AND NOT $1 THEN pg_catalog.format('the owner of pipeline \"%s\", role \"%s\", is a superuser', p.name, r.rolname)" \
	"   WHEN NOT r.rolsuper AND NOT pg_catalog.pg_has_role(r.oid, 'kafka_sink_admin', 'MEMBER')" \
	"    THEN pg_catalog.format('the owner of pipeline \"%s\", role \"%s\", is no longer a member of kafka_sink_admin', p.name, r.rolname)" \
	"   WHEN p.target IS NOT NULL AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_class c WHERE c.oid = p.target)" \
	"    THEN pg_catalog.format('the target table of pipeline \"%s\" (OID %s) no longer exists', p.name, p.target::oid)" \
	"   WHEN p.bronze IS NOT NULL AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_class c WHERE c.oid = p.bronze)" \
	"    THEN pg_catalog.format('the bronze table of pipeline \"%s\" (OID %s) no longer exists', p.name, p.bronze::oid)" \
	"   WHEN p.batch_function IS NOT NULL AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_proc f WHERE f.oid = p.batch_function)" \
	"    THEN pg_catalog.format('the batch function of pipeline \"%s\" (OID %s) no longer exists', p.name, p.batch_function::oid)" \
	"   WHEN mk.k IS NOT NULL THEN pg_catalog.format('%s column \"%s\" of pipeline \"%s\" no longer exists in %s'," \
	"    CASE WHEN mk.k = p.order_column THEN 'order' ELSE 'key' END, mk.k, p.name, p.target)" \
	"  END AS problem) x" \
	" CROSS JOIN LATERAL (SELECT" \
	"  CASE WHEN x.problem LIKE 'the owner%'" \
	"    THEN 'A pipeline runs as its owner, who must exist, be able to log in, be a member of kafka_sink_admin and not be a superuser" \
	" (unless kafka_sink.allow_superuser_pipelines is on). Fix the role and SELECT kafka_sink.start(...), or drop the pipeline and create it again as another owner.'" \
	"   ELSE 'The pipeline was created for an object that was dropped or renamed since. Drop the pipeline and create it again for the current objects.'" \
	"  END AS hint) h" \
	" WHERE p.state IN ('running', 'paused') ORDER BY p.id"

/*
 * The pipelines in state running or paused, each with what would stop its
 * worker (problem, hint) or NULL; a list of KsWanted in cxt.
 */
List *
ks_catalog_wanted(bool allow_superuser, MemoryContext cxt)
{
	List	   *wanted = NIL;

	ks_spi_exec("read the pipelines", WANTED_SQL, 1, (Oid[]) {BOOLOID},
				(Datum[]) {BoolGetDatum(allow_superuser)}, NULL, true, SPI_OK_SELECT);
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		bool		isnull;
		KsWanted   *w = MemoryContextAlloc(cxt, sizeof(KsWanted));

		w->pipeline_id = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1, &isnull));
		w->owner = DatumGetObjectId(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 2, &isnull));
		w->workers = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 3, &isnull));
		w->paused = DatumGetBool(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 4, &isnull));
		w->generation = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 5, &isnull));
		w->problem = getstr(i, 6, cxt);
		w->hint = w->problem ? getstr(i, 7, cxt) : NULL;
		{
			MemoryContext old = MemoryContextSwitchTo(cxt);

			wanted = lappend(wanted, w);
			MemoryContextSwitchTo(old);
		}
	}
	return wanted;
}

/* ---- the outbox relay ---- */

static Datum
int8_array(int64 *v, int n)
{
	Datum	   *d = palloc(sizeof(Datum) * Max(n, 1));

	for (int i = 0; i < n; i++)
		d[i] = Int64GetDatum(v[i]);
	return PointerGetDatum(construct_array(d, n, INT8OID, 8, FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
}

/*
 * One catalog row of a batch's offsets of one partition (filtered_offsets,
 * revived_offsets): sql inserts $1..$5 (pipeline, batch, topic, partition,
 * offsets) and $6, extra of type extra_type.
 */
static void
insert_partition_offsets(const char *what, const char *sql, int64 pipeline_id, int64 batch_id,
						 const char *topic, int32 partition, int64 *offsets, int n, Oid extra_type,
						 Datum extra)
{
	Oid			argtypes[6] = {INT8OID, INT8OID, TEXTOID, INT4OID, INT8ARRAYOID, extra_type};
	Datum		v[6];

	v[0] = Int64GetDatum(pipeline_id);
	v[1] = Int64GetDatum(batch_id);
	v[2] = CStringGetTextDatum(topic);
	v[3] = Int32GetDatum(partition);
	v[4] = int8_array(offsets, n);
	v[5] = extra;
	ks_spi_exec(what, sql, 6, argtypes, v, NULL, false, SPI_OK_INSERT);
}

/*
 * Records the offsets of one partition the pipeline's filter left out of a
 * batch (kafka_sink.filtered_offsets, docs/transform.md): in the batch's
 * transaction, after its marker (the row goes with the marker when batches
 * are pruned), so a batch that is retried records them once.
 */
void
ks_catalog_insert_filtered(int64 pipeline_id, int64 batch_id, const char *topic, int32 partition,
						   int64 *offsets, int n, const char *filter)
{
	if (filter == NULL)
		elog(ERROR, "kafka_sink: filtered offsets recorded without a filter");
	insert_partition_offsets("record the filtered offsets",
							 "INSERT INTO kafka_sink.filtered_offsets (pipeline_id, batch_id, topic, partition, offsets, filter)"
							 " VALUES ($1, $2, $3, $4, $5, $6)",
							 pipeline_id, batch_id, topic, partition, offsets, n, TEXTOID,
							 CStringGetTextDatum(filter));
}

/*
 * Records the offsets of one partition whose upsert brought a marked row
 * back (kafka_sink.revived_offsets, docs/soft-deletes.md), with what each
 * marked row held to order by (held: char *, one per offset), as the
 * filtered ones: in the batch's transaction, after its marker.
 */
void
ks_catalog_insert_revived(int64 pipeline_id, int64 batch_id, const char *topic, int32 partition,
						  int64 *offsets, List *held, int n)
{
	insert_partition_offsets("record the revived offsets",
							 "INSERT INTO kafka_sink.revived_offsets (pipeline_id, batch_id, topic, partition, offsets, held)"
							 " VALUES ($1, $2, $3, $4, $5, $6)",
							 pipeline_id, batch_id, topic, partition, offsets, n, TEXTARRAYOID,
							 text_array(held));
}

static Datum
int4_array(int32 *v, int n)
{
	Datum	   *d = palloc(sizeof(Datum) * Max(n, 1));

	for (int i = 0; i < n; i++)
		d[i] = Int32GetDatum(v[i]);
	return PointerGetDatum(construct_array(d, n, INT4OID, 4, true, TYPALIGN_INT));
}

/* A bytea column's bytes copied into cxt, or NULL (and *len 0) for NULL. */
static char *
get_bytes(HeapTuple t, TupleDesc d, int col, size_t *len, MemoryContext cxt)
{
	bool		isnull;
	Datum		v = SPI_getbinval(t, d, col, &isnull);
	bytea	   *b;
	char	   *out;

	*len = 0;
	if (isnull)
		return NULL;
	b = DatumGetByteaPP(v);
	*len = VARSIZE_ANY_EXHDR(b);
	out = MemoryContextAlloc(cxt, Max(*len, 1));
	memcpy(out, VARDATA_ANY(b), *len);
	return out;
}

/*
 * Up to limit undelivered outbox rows, in id order: their messages with
 * every header (bytes headers first, then kafka_sink.hops and the event
 * id, then the JSON headers) in cxt, which must outlive the transaction (not SPI's
 * context); returns how many.
 */
int
ks_catalog_outbox_pending(int limit, KsOutMsg **msgs, int64 **ids, MemoryContext cxt)
{
	int			n;
	Oid			largtypes[1] = {INT4OID};
	Datum		lvalues[1] = {Int32GetDatum(limit)};

	ks_spi_exec("read the outbox",
				"SELECT id, event_id::text, topic, key, value, key_bytes, value_bytes, hops::text"
				" FROM kafka_sink.outbox"
				" WHERE delivered_at IS NULL ORDER BY id LIMIT $1",
				1, largtypes, lvalues, NULL, true, SPI_OK_SELECT);
	n = (int) SPI_processed;
	*msgs = MemoryContextAllocZero(cxt, sizeof(KsOutMsg) * Max(n, 1));
	*ids = MemoryContextAlloc(cxt, sizeof(int64) * Max(n, 1));
	for (int i = 0; i < n; i++)
	{
		HeapTuple	t = SPI_tuptable->vals[i];
		TupleDesc	d = SPI_tuptable->tupdesc;
		bool		isnull;
		char	   *s;
		KsOption   *hops = MemoryContextAllocZero(cxt, sizeof(KsOption));
		KsOption   *h = MemoryContextAllocZero(cxt, sizeof(KsOption));
		MemoryContext old;

		(*ids)[i] = DatumGetInt64(SPI_getbinval(t, d, 1, &isnull));
		hops->name = MemoryContextStrdup(cxt, KS_HOPS_HEADER);
		hops->value = MemoryContextStrdup(cxt, SPI_getvalue(t, d, 8));
		h->name = MemoryContextStrdup(cxt, "event_id");
		h->value = MemoryContextStrdup(cxt, SPI_getvalue(t, d, 2));
		old = MemoryContextSwitchTo(cxt);
		(*msgs)[i].headers = list_make2(hops, h);
		MemoryContextSwitchTo(old);
		(*msgs)[i].topic = MemoryContextStrdup(cxt, SPI_getvalue(t, d, 3));
		s = SPI_getvalue(t, d, 4);
		if (s)
		{
			(*msgs)[i].key = MemoryContextStrdup(cxt, s);
			(*msgs)[i].key_len = strlen(s);
		}
		else
			(*msgs)[i].key = get_bytes(t, d, 6, &(*msgs)[i].key_len, cxt);
		s = SPI_getvalue(t, d, 5);
		if (s)
		{
			(*msgs)[i].value = MemoryContextStrdup(cxt, s);
			(*msgs)[i].value_len = strlen(s);
		}
		else
			(*msgs)[i].value = get_bytes(t, d, 7, &(*msgs)[i].value_len, cxt);
	}
	/*
	 * headers with bytes for values (the dead-letter messages: the original
	 * message's headers, then kafka_sink's), before the event id
	 */
	if (n > 0)
	{
		Oid			argtypes[1] = {INT8ARRAYOID};
		Datum		values[1] = {int8_array(*ids, n)};
		int			i = 0;

		if (ks_spi_execute("SELECT o.id, h.name, h.value FROM kafka_sink.outbox o,"
								  " unnest(o.header_names, o.header_values) WITH ORDINALITY AS h(name, value, n)"
								  " WHERE o.id = ANY ($1) AND o.header_names IS NOT NULL ORDER BY o.id, h.n",
								  1, argtypes, values, NULL, true, 0) != SPI_OK_SELECT)
			elog(ERROR, "kafka_sink: could not read outbox headers");
		for (uint64 r = 0; r < SPI_processed; r++)
		{
			HeapTuple	t = SPI_tuptable->vals[r];
			TupleDesc	d = SPI_tuptable->tupdesc;
			bool		isnull;
			int64		id = DatumGetInt64(SPI_getbinval(t, d, 1, &isnull));
			KsHeader   *h;
			char	   *name = SPI_getvalue(t, d, 2);
			MemoryContext old;

			/* both in id order */
			while (i < n && (*ids)[i] < id)
				i++;
			if (i >= n || (*ids)[i] != id || name == NULL)
				continue;
			h = MemoryContextAlloc(cxt, sizeof(KsHeader));
			h->name = MemoryContextStrdup(cxt, name);
			h->value = get_bytes(t, d, 3, &h->value_len, cxt);
			old = MemoryContextSwitchTo(cxt);
			(*msgs)[i].raw_headers = lappend((*msgs)[i].raw_headers, h);
			MemoryContextSwitchTo(old);
		}
	}
	/* user headers, after the event id */
	if (n > 0)
	{
		Oid			argtypes[1] = {INT8ARRAYOID};
		Datum		values[1] = {int8_array(*ids, n)};

		if (ks_spi_execute("SELECT o.id, h.key, h.value FROM kafka_sink.outbox o,"
								  " jsonb_each_text(o.headers) h WHERE o.id = ANY ($1) ORDER BY o.id",
								  1, argtypes, values, NULL, true, 0) != SPI_OK_SELECT)
			elog(ERROR, "kafka_sink: could not read outbox headers");
		for (uint64 r = 0; r < SPI_processed; r++)
		{
			HeapTuple	t = SPI_tuptable->vals[r];
			bool		isnull;
			int64		id = DatumGetInt64(SPI_getbinval(t, SPI_tuptable->tupdesc, 1, &isnull));

			for (int i = 0; i < n; i++)
				if ((*ids)[i] == id)
				{
					KsOption   *h = MemoryContextAllocZero(cxt, sizeof(KsOption));
					MemoryContext old;
					char	   *v = SPI_getvalue(t, SPI_tuptable->tupdesc, 3);

					h->name = MemoryContextStrdup(cxt, SPI_getvalue(t, SPI_tuptable->tupdesc, 2));
					h->value = v ? MemoryContextStrdup(cxt, v) : NULL;
					old = MemoryContextSwitchTo(cxt);
					(*msgs)[i].headers = lappend((*msgs)[i].headers, h);
					MemoryContextSwitchTo(old);
				}
		}
	}
	return n;
}

/* The delivered prefix: partition and offset of each row, delivered now. */
void
ks_catalog_outbox_delivered(int64 *ids, int32 *parts, int64 *offs, int n)
{
	Oid			argtypes[3] = {INT8ARRAYOID, INT4ARRAYOID, INT8ARRAYOID};
	Datum		values[3] = {int8_array(ids, n), int4_array(parts, n), int8_array(offs, n)};

	ks_spi_exec("mark outbox rows delivered",
				"UPDATE kafka_sink.outbox o SET delivered_at = clock_timestamp(),"
				" attempts = o.attempts + 1, partition = d.p, \"offset\" = d.off,"
				" last_error = NULL"
				" FROM unnest($1, $2, $3) AS d(id, p, off) WHERE o.id = d.id",
				3, argtypes, values, NULL, false, SPI_OK_UPDATE);
}

/* A failed attempt at row id. */
void
ks_catalog_outbox_failed(int64 id, const char *error)
{
	Oid			argtypes[2] = {INT8OID, TEXTOID};
	Datum		values[2] = {Int64GetDatum(id), CStringGetTextDatum(error)};

	ks_spi_exec("record a failed delivery",
				"UPDATE kafka_sink.outbox SET attempts = attempts + 1, last_error = $2,"
				" last_attempt_at = clock_timestamp() WHERE id = $1",
				2, argtypes, values, NULL, false, SPI_OK_UPDATE);
}

/* Delivered rows older than older_than_s go. */
void
ks_catalog_outbox_prune(int64 older_than_s)
{
	Oid			argtypes[1] = {INT8OID};
	Datum		values[1] = {Int64GetDatum(older_than_s)};

	ks_spi_exec("prune the outbox",
				"DELETE FROM kafka_sink.outbox WHERE delivered_at < now() - $1 * interval '1 second'",
				1, argtypes, values, NULL, false, SPI_OK_DELETE);
}

/* ---- kafka_sink.schemas: schemas fetched from registries (format.h) ---- */

/* The schema of id in registry, from the catalog; false when absent. */
bool
ks_catalog_schema_get(const char *registry, int32 id, char **type, char **text)
{
	Oid			argtypes[2] = {TEXTOID, INT4OID};
	Datum		values[2] = {CStringGetTextDatum(registry), Int32GetDatum(id)};

	ks_spi_exec("read kafka_sink.schemas",
				"SELECT schema_type, schema FROM kafka_sink.schemas"
				" WHERE registry = $1 AND id = $2",
				2, argtypes, values, NULL, true, SPI_OK_SELECT);
	if (SPI_processed == 0)
		return false;
	*type = getstr(0, 1, CurrentMemoryContext);
	*text = getstr(0, 2, CurrentMemoryContext);
	return true;
}

/*
 * Stores a schema fetched from a registry.  True when this call inserted
 * it, false when the catalog had it already.  It is kafka_sink's own
 * write, so catalog writes are allowed around it even while decoding
 * (which otherwise runs with them suspended).
 */
bool
ks_catalog_schema_put(const char *registry, int32 id, const char *type, const char *text)
{
	Oid			argtypes[4] = {TEXTOID, INT4OID, TEXTOID, TEXTOID};
	Datum		values[4] = {CStringGetTextDatum(registry), Int32GetDatum(id),
	CStringGetTextDatum(type), CStringGetTextDatum(text)};
	int			saved = ks_catalog_writes_raise();

	PG_TRY();
	{
		ks_spi_exec("write kafka_sink.schemas",
					"INSERT INTO kafka_sink.schemas AS s (registry, id, schema_type, schema)"
					" VALUES ($1, $2, $3, $4) ON CONFLICT (registry, id) DO NOTHING",
					4, argtypes, values, NULL, false, SPI_OK_INSERT);
	}
	PG_FINALLY();
	{
		ks_catalog_writes_restore(saved);
	}
	PG_END_TRY();
	return SPI_processed > 0;
}
