/*-------------------------------------------------------------------------
 *
 * catalog.c
 *		Reads and writes of the extension's own tables by the workers.
 *
 * Every statement is schema-qualified; the workers also pin search_path to
 * pg_catalog, pg_temp so that no object of a user can be picked up by name.
 * All functions here run inside a transaction with SPI connected (see
 * ks_xact_begin), except those that say they open their own.
 *
 *-------------------------------------------------------------------------
 */
#include "kafka_sink.h"
#include "format.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "pgstat.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/resowner.h"
#include "utils/snapmgr.h"

void
ks_xact_begin(const char *activity)
{
	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
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

/* Runs a statement with one bigint parameter; errors unless it succeeds. */
static void
exec_id(const char *sql, int64 id, int expected)
{
	Oid			argtypes[1] = {INT8OID};
	Datum		values[1];
	int			rc;

	values[0] = Int64GetDatum(id);
	rc = SPI_execute_with_args(sql, 1, argtypes, values, NULL, false, 0);
	if (rc != expected)
		elog(ERROR, "kafka_sink: catalog statement failed (%d): %s", rc, sql);
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
 * The formats of a pipeline (format.h): value_format, key_format avro,
 * value_schema and the schema registry, its secret included.
 */
static void
load_formats(KsPipeline *p, MemoryContext mcxt)
{
	char	   *value_format;
	char	   *url;
	MemoryContext old;

	exec_id("SELECT d.value_format, d.value_schema, d.schema_registry->>'url',"
			" coalesce((d.schema_registry->>'timeout.ms')::int8, 30000),"
			" d.schema_registry->>'ssl.ca.location',"
			" (SELECT s.value FROM kafka_sink.secrets s WHERE s.pipeline_id = d.id"
			"   AND s.name = 'schema_registry.basic.auth.user.info')"
			" FROM kafka_sink.pipeline_definitions d WHERE d.id = $1",
			p->id, SPI_OK_SELECT);
	if (SPI_processed == 0)
		return;
	value_format = getstr(0, 1, mcxt);
	p->value_fmt = ks_format_find(value_format ? value_format : "json");
	if (p->value_fmt == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("unknown value_format \"%s\" of pipeline \"%s\"", value_format, p->name)));
	p->key_fmt = ks_format_find(p->key_format == KS_KEY_AVRO ? "avro" : "json");
	p->value_schema = getstr(0, 2, mcxt);
	url = getstr(0, 3, mcxt);
	if (url != NULL)
	{
		KsRegistryConf *r = MemoryContextAllocZero(mcxt, sizeof(KsRegistryConf));
		char	   *list = MemoryContextStrdup(mcxt, url);
		char	   *tok;
		char	   *save = NULL;

		r->key = url;
		r->timeout_ms = (int) Min(Max(getint8(0, 4), 1), 3600000);
		r->ca_location = getstr(0, 5, mcxt);
		r->userinfo = getstr(0, 6, mcxt);
		r->owner = p->owner;
		old = MemoryContextSwitchTo(mcxt);
		for (tok = strtok_r(list, ", ", &save); tok; tok = strtok_r(NULL, ", ", &save))
			r->urls = lappend(r->urls, tok);
		MemoryContextSwitchTo(old);
		p->registry = r;
	}
}

/*
 * Loads the definition of a pipeline, secrets included, into mcxt.
 * Returns NULL when the pipeline no longer exists.
 */
KsPipeline *
ks_load_pipeline(int64 pipeline_id, MemoryContext mcxt)
{
	KsPipeline *p;
	char	   *mode;
	MemoryContext old;

	exec_id("SELECT id, name, owner::oid::int8, state, bootstrap_servers, subscribe_pattern,"
			" coalesce(target::oid, 0)::int8, order_column, mode, coalesce(batch_function::oid, 0)::int8,"
			" starting_offsets, fail_on_data_loss::int::int8, max_offsets_per_batch, max_batch_bytes,"
			" (extract(epoch FROM trigger_interval) * 1000)::int8, workers::int8,"
			" key_format, delete_on_tombstone::int::int8, schema_version_field, event_id,"
			" extract(epoch FROM event_id_retention)::int8, coalesce(bronze::oid, 0)::int8,"
			" ending_offsets,"
			" coalesce(min_offsets_per_batch, 0),"
			" (extract(epoch FROM max_trigger_delay) * 1000)::int8,"
			" dead_letter_topic"
			" FROM kafka_sink.pipeline_definitions WHERE id = $1",
			pipeline_id, SPI_OK_SELECT);
	if (SPI_processed == 0)
		return NULL;

	p = MemoryContextAllocZero(mcxt, sizeof(KsPipeline));
	p->id = getint8(0, 1);
	p->name = getstr(0, 2, mcxt);
	p->owner = (Oid) getint8(0, 3);
	p->state = getstr(0, 4, mcxt);
	p->bootstrap_servers = getstr(0, 5, mcxt);
	p->subscribe_pattern = getstr(0, 6, mcxt);
	p->target = (Oid) getint8(0, 7);	/* 0 for a bronze-only pipeline */
	p->order_column = getstr(0, 8, mcxt);
	mode = getstr(0, 9, mcxt);
	p->mode = strcmp(mode, "append") == 0 ? KS_MODE_APPEND :
		strcmp(mode, "function") == 0 ? KS_MODE_FUNCTION : KS_MODE_MERGE;
	p->batch_function = (Oid) getint8(0, 10);
	p->starting_offsets = getstr(0, 11, mcxt);
	p->fail_on_data_loss = getint8(0, 12) != 0;
	p->max_offsets_per_batch = getint8(0, 13);
	p->max_batch_bytes = getint8(0, 14);
	p->trigger_interval_ms = (int) getint8(0, 15);
	p->workers = (int) getint8(0, 16);
	{
		char	   *kf = getstr(0, 17, mcxt);

		p->key_format = strcmp(kf, "string") == 0 ? KS_KEY_STRING :
			strcmp(kf, "json") == 0 ? KS_KEY_JSON :
			strcmp(kf, "avro") == 0 ? KS_KEY_AVRO : KS_KEY_NONE;
	}
	p->delete_on_tombstone = getint8(0, 18) != 0;
	p->schema_version_field = getstr(0, 19, mcxt);
	p->event_id = getstr(0, 20, mcxt);
	p->event_id_retention_s = (int) Min(getint8(0, 21), INT_MAX);
	p->bronze = (Oid) getint8(0, 22);
	p->ending_offsets = getstr(0, 23, mcxt);
	p->min_offsets_per_batch = getint8(0, 24);
	p->max_trigger_delay_ms = getint8(0, 25);
	p->dead_letter_topic = getstr(0, 26, mcxt);

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
		p->mappings = lappend(p->mappings, m);
		MemoryContextSwitchTo(old);
	}
	p->versions = load_text_list("SELECT v.key FROM kafka_sink.pipeline_definitions d,"
								 " jsonb_each(d.schema_versions) v WHERE d.id = $1 ORDER BY 1",
								 pipeline_id, mcxt);

	p->subscribe = load_text_list("SELECT unnest(subscribe) FROM kafka_sink.pipeline_definitions"
								  " WHERE id = $1", pipeline_id, mcxt);
	p->key_columns = load_text_list("SELECT k FROM kafka_sink.pipeline_definitions,"
									" unnest(key_columns) WITH ORDINALITY AS u(k, n)"
									" WHERE id = $1 ORDER BY n", pipeline_id, mcxt);

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
		p->assign = lappend(p->assign, tp);
		MemoryContextSwitchTo(old);
	}

	exec_id("SELECT key, value FROM kafka_sink.pipeline_definitions d, jsonb_each_text(d.kafka_options)"
			" WHERE d.id = $1"
			" UNION ALL SELECT name, value FROM kafka_sink.secrets WHERE pipeline_id = $1"
			" AND name NOT LIKE 'schema\\_registry.%'",
			pipeline_id, SPI_OK_SELECT);
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		KsOption   *o = MemoryContextAlloc(mcxt, sizeof(KsOption));

		o->name = getstr(i, 1, mcxt);
		o->value = getstr(i, 2, mcxt);
		old = MemoryContextSwitchTo(mcxt);
		p->options = lappend(p->options, o);
		MemoryContextSwitchTo(old);
	}
	load_offset_spec("starting_offsets", p->starting_offsets,
					 &p->start_offsets, &p->start_ts_ms, mcxt);
	if (p->ending_offsets)
		load_offset_spec("ending_offsets", p->ending_offsets,
						 &p->end_offsets, &p->end_ts_ms, mcxt);
	load_formats(p, mcxt);
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
		int			rc;

		values[0] = Int64GetDatum(pipeline_id);
		values[1] = CStringGetTextDatum(parts[i].topic);
		values[2] = Int32GetDatum(parts[i].partition);
		values[3] = Int64GetDatum(parts[i].committed);
		values[4] = Int64GetDatum(parts[i].end_offset);
		if (parts[i].end_offset < 0)
			nulls[4] = 'n';
		rc = SPI_execute_with_args("INSERT INTO kafka_sink.offsets (pipeline_id, topic, partition, next_offset,"
								   " start_offset, end_offset)"
								   " VALUES ($1, $2, $3, $4, $4, CASE WHEN $5 IS NOT NULL THEN greatest($5, $4) END)"
								   " ON CONFLICT DO NOTHING",
								   5, argtypes, values, nulls, false, 0);
		if (rc != SPI_OK_INSERT)
			elog(ERROR, "kafka_sink: could not write the initial checkpoint");
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
	SPI_execute_with_args("INSERT INTO kafka_sink.errors (pipeline_id, kind, sqlstate, message, detail)"
						  " SELECT $1, $2, $3, $4, $5"
						  " WHERE EXISTS (SELECT 1 FROM kafka_sink.pipeline_definitions WHERE id = $1)",
						  5, argtypes, values, nulls, false, 0);
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
	SPI_execute_with_args("UPDATE kafka_sink.pipeline_definitions SET state = $2, updated_at = now()"
						  " WHERE id = $1",
						  2, argtypes, values, NULL, false, 0);
	ks_xact_commit();
}

/* ---- kafka_sink.schemas: schemas fetched from registries (format.h) ---- */

/* The schema of id in registry, from the catalog; false when absent. */
bool
ks_catalog_schema_get(const char *registry, int32 id, char **type, char **text)
{
	Oid			argtypes[2] = {TEXTOID, INT4OID};
	Datum		values[2] = {CStringGetTextDatum(registry), Int32GetDatum(id)};

	if (SPI_execute_with_args("SELECT schema_type, schema FROM kafka_sink.schemas"
							  " WHERE registry = $1 AND id = $2",
							  2, argtypes, values, NULL, true, 1) != SPI_OK_SELECT)
		elog(ERROR, "kafka_sink: could not read kafka_sink.schemas");
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
	volatile int rc = 0;

	PG_TRY();
	{
		rc = SPI_execute_with_args("INSERT INTO kafka_sink.schemas AS s (registry, id, schema_type, schema)"
								   " VALUES ($1, $2, $3, $4) ON CONFLICT (registry, id) DO NOTHING",
								   4, argtypes, values, NULL, false, 0);
	}
	PG_FINALLY();
	{
		ks_catalog_writes_restore(saved);
	}
	PG_END_TRY();
	if (rc != SPI_OK_INSERT)
		elog(ERROR, "kafka_sink: could not write kafka_sink.schemas");
	return SPI_processed > 0;
}
