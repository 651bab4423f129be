/*-------------------------------------------------------------------------
 *
 * statements.c
 *		The text of every statement a batch runs against the user's tables:
 *		the MERGE (write_mode insert_only and update_only: their own
 *		MERGE; or the on_conflict strategy's INSERT ... ON CONFLICT and
 *		UPDATE, or a Citus target's UPDATE and INSERT from its staged
 *		batch), the tombstones' DELETE (delete_mode soft: the UPDATEs that
 *		mark a deleted row), the append INSERT, the batch function call,
 *		the bronze INSERT, and kafka_sink.pipeline_statements()
 *		which shows them, built by these same functions (mode history's
 *		statement is history.c's).
 *
 * Owns: statement text, quoted (quote_identifier, qualified operators and
 * collations), for the worker and by hand.  Must not: run anything, or
 * hold SQL text against kafka_sink's own tables (catalog.c does).
 *
 *-------------------------------------------------------------------------
 */
#include "kafka_sink.h"
#include "pipeline.h"
#include "target.h"
#include "statements.h"
#include "catalog.h"
#include "apply.h"
#include "decode.h"
#include "guc.h"
#include "history.h"

#include "catalog/pg_operator.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "lib/stringinfo.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/regproc.h"
#include "utils/ruleutils.h"
#include "utils/syscache.h"
#include "utils/typcache.h"

/* ---- statement text ---- */

/*
 * The columns of a staged batch, "(name type, ..., _ks_p0 boolean, ...)":
 * the record kafka_sink._batch_rows() returns, and the staging table that
 * kafka_sink.pipeline_statements() tells a user to fill to run a statement
 * by hand.
 */
char *
ks_batch_columns_sql(KsTarget *t)
{
	StringInfoData b;

	initStringInfo(&b);
	appendStringInfoChar(&b, '(');
	for (int i = 0; i < t->ncolumns; i++)
		appendStringInfo(&b, "%s %s, ", quote_identifier(t->columns[i].name), t->columns[i].type_sql);
	for (int i = 0; i < t->ncolumns; i++)
		appendStringInfo(&b, "_ks_p%d boolean, ", i);
	appendStringInfoString(&b, "_ks_topic text, _ks_partition integer, _ks_offset bigint, _ks_seq integer,"
						   " _ks_ts timestamptz");
	/* the order value of the message that supplied each optional column */
	for (int i = 0; i < t->ncolumns; i++)
		if (t->columns[i].prov >= 0)
			appendStringInfo(&b, ", _ks_o%d %s", i, t->columns[t->order_index].type_sql);
	if (t->history)
		appendStringInfoString(&b, ", _ks_del boolean");
	appendStringInfoChar(&b, ')');
	return b.data;
}

/*
 * The batch source of the statements: the worker's staged rows, or (by
 * hand) a staging table with the same columns.
 */
char *
ks_source_sql(KsTarget *t, bool by_hand)
{
	if (by_hand)
		return pstrdup("SELECT * FROM " KS_BY_HAND_STAGING " AS s");
	if (t->citus != KS_CITUS_NONE)
		return psprintf("SELECT * FROM %s AS s", ks_citus_stage_name(t));
	return psprintf("SELECT * FROM kafka_sink._batch_rows() AS s%s", ks_batch_columns_sql(t));
}

/*
 * A Citus target's batch source: a temporary table on the coordinator,
 * filled from kafka_sink._batch_rows() before each statement (Citus
 * refuses a set-returning function in a MERGE, and plans a local table
 * joined to a distributed one by sending its rows to the worker nodes).
 * One per target and batch, dropped at commit.
 */
char *
ks_citus_stage_name(KsTarget *t)
{
	return psprintf("pg_temp._ks_stage_%u", t->relid);
}

char *
ks_citus_stage_create_sql(KsTarget *t)
{
	return psprintf("CREATE TEMPORARY TABLE %s %s ON COMMIT DROP",
					ks_citus_stage_name(t), ks_batch_columns_sql(t));
}

char *
ks_citus_stage_fill_sql(KsTarget *t)
{
	return psprintf("INSERT INTO %s SELECT * FROM kafka_sink._batch_rows() AS s%s",
					ks_citus_stage_name(t), ks_batch_columns_sql(t));
}

/* The value to insert for column i: the message's, else the default. */
static void
append_insert_value(StringInfo b, KsColumn *c, int i)
{
	if (c->lineage)
		appendStringInfoString(b, c->lineage);
	else if (c->is_key || c->required)
		appendStringInfo(b, "s.%s", quote_identifier(c->name));
	else
		appendStringInfo(b, "CASE WHEN s._ks_p%d THEN s.%s ELSE %s END",
						 i, quote_identifier(c->name),
						 c->default_sql ? c->default_sql : "NULL");
}

/* OPERATOR(schema.op) of an operator */
static char *
qualified_operator(Oid opno)
{
	HeapTuple	tup = SearchSysCache1(OPEROID, ObjectIdGetDatum(opno));
	Form_pg_operator op;
	char	   *res;

	if (!HeapTupleIsValid(tup))
		elog(ERROR, "cache lookup failed for operator %u", opno);
	op = (Form_pg_operator) GETSTRUCT(tup);
	res = psprintf("OPERATOR(%s.%s)", quote_identifier(get_namespace_name(op->oprnamespace)),
				   NameStr(op->oprname));
	ReleaseSysCache(tup);
	return res;
}

/*
 * "t.k1 = s.k1 AND ...": a target row and a batch row of the same key, as
 * the key index compares them.  When the index's collation or operator
 * class is not the column's own, the batch side says so (COLLATE, and
 * OPERATOR(...) for a non-default equality): the comparison is then the
 * index's, and the index still serves it.
 */
static void
append_key_match(StringInfo b, KsTarget *t)
{
	for (int k = 0; k < t->nkeys; k++)
	{
		KsColumn   *c = &t->columns[t->key_index[k]];
		const char *name = quote_identifier(c->name);
		TypeCacheEntry *tc = lookup_type_cache(c->typid, TYPECACHE_EQ_OPR);

		appendStringInfo(b, "%st.%s ", k > 0 ? " AND " : "", name);
		if (OidIsValid(c->key_eq_opr) && c->key_eq_opr != tc->eq_opr)
			appendStringInfoString(b, qualified_operator(c->key_eq_opr));
		else
			appendStringInfoChar(b, '=');
		appendStringInfo(b, " s.%s", name);
		if (OidIsValid(c->key_collation) && c->key_collation != c->collation)
			appendStringInfo(b, " COLLATE %s", generate_collation_name(c->key_collation));
	}
}

/* "k1, k2": the key columns, each after prefix (an alias and a dot, or "") */
static void
append_key_columns(StringInfo b, KsTarget *t, const char *prefix)
{
	for (int k = 0; k < t->nkeys; k++)
		appendStringInfo(b, "%s%s%s", k > 0 ? ", " : "", prefix,
						 quote_identifier(t->columns[t->key_index[k]].name));
}

/*
 * delete_mode soft: "whether target row t is marked deleted", by _deleted
 * when the target has it, else by _deleted_at
 */
static char *
soft_mark(KsTarget *t)
{
	if (t->soft_deleted >= 0)
		return psprintf("t.%s IS TRUE", quote_identifier(t->columns[t->soft_deleted].name));
	return psprintf("t.%s IS NOT NULL", quote_identifier(t->columns[t->soft_deleted_at].name));
}

/*
 * the ordering guard: a target row newer than the message stays.  With
 * delete_mode soft a marked row is a row a hard delete would have removed:
 * any upsert passes (as it would insert), but a change event's (whose
 * delete left its position in the row, which the guard then compares as
 * the hard delete's recorded position, cdc_guard.c).
 */
static void
append_guard(StringInfo b, KsTarget *t, const char *prefix)
{
	if (t->order_index >= 0)
	{
		const char *o = quote_identifier(t->columns[t->order_index].name);

		if (t->soft && !t->cdc)
			appendStringInfo(b, "%s(%s OR t.%s IS NULL OR s.%s >= t.%s)", prefix, soft_mark(t), o, o, o);
		else
			appendStringInfo(b, "%s(t.%s IS NULL OR s.%s >= t.%s)", prefix, o, o, o);
	}
}

/*
 * The SET list of a matched row, after prefix: a column the message did
 * not set keeps the target's value; a folded column applies only when the
 * message that supplied it passes the guard.  False when there is no
 * column to set (only the key).
 */
static bool
append_update_set(StringInfo b, KsTarget *t, const char *prefix)
{
	bool		first = true;
	char	   *mark = t->soft ? soft_mark(t) : NULL;

	for (int i = 0; i < t->ncolumns; i++)
	{
		KsColumn   *c = &t->columns[i];
		const char *name = quote_identifier(c->name);

		if (c->is_key)
			continue;
		appendStringInfo(b, "%s%s = ", first ? prefix : ", ", name);
		first = false;
		if (c->lineage)
		{
			appendStringInfoString(b, c->lineage);
			continue;
		}
		/*
		 * delete_mode soft: a marked row takes what an insert would write
		 * (the row a hard delete removed comes back whole), so that the
		 * target is the same wherever a batch boundary falls around the
		 * delete (reduce.c drops what came before a key's tombstone)
		 */
		if (mark)
		{
			appendStringInfo(b, "CASE WHEN %s THEN ", mark);
			append_insert_value(b, c, i);
			appendStringInfoString(b, " ELSE ");
		}
		if (c->prov >= 0)
		{
			const char *o = quote_identifier(t->columns[t->order_index].name);

			/* the message that supplied the column applies, by the guard */
			appendStringInfo(b, "CASE WHEN s._ks_p%d AND (t.%s IS NULL OR s._ks_o%d >= t.%s)"
							 " THEN s.%s ELSE t.%s END", i, o, i, o, name, name);
		}
		else
			appendStringInfo(b, "CASE WHEN s._ks_p%d THEN s.%s ELSE t.%s END", i, name, name);
		if (mark)
			appendStringInfoString(b, " END");
	}
	return !first;
}

static void
append_column_list(StringInfo b, KsTarget *t)
{
	for (int i = 0; i < t->ncolumns; i++)
		appendStringInfo(b, "%s%s", i > 0 ? ", " : "", quote_identifier(t->columns[i].name));
}

static void
append_insert_values(StringInfo b, KsTarget *t)
{
	for (int i = 0; i < t->ncolumns; i++)
	{
		if (i > 0)
			appendStringInfoString(b, ", ");
		append_insert_value(b, &t->columns[i], i);
	}
}

/* "INSERT INTO target (columns) SELECT <values> FROM (<batch>) AS s" */
static void
append_insert_select(StringInfo b, KsTarget *t, bool by_hand)
{
	appendStringInfo(b, "INSERT INTO %s (", t->qualified_name);
	append_column_list(b, t);
	appendStringInfoString(b, ") SELECT ");
	append_insert_values(b, t);
	appendStringInfo(b, " FROM (%s) AS s", ks_source_sql(t, by_hand));
}

/*
 * write_mode insert_only: "the message s is strictly earlier than the
 * event stored in target row t", the ordering guard reversed: the smaller
 * order value (NULL lowest), then the smaller (partition, offset), which
 * only the lineage columns _kafka_partition and _kafka_offset tell (a row
 * whose lineage is NULL stays).  False
 * (nothing appended) when the target has neither an order column nor both
 * lineage columns: the row, once there, is never updated.
 */
static bool
append_earlier(StringInfo b, KsTarget *t, const char *prefix)
{
	bool		pos = t->lineage_partition >= 0 && t->lineage_offset >= 0;
	char	   *position = NULL;

	if (pos)
	{
		const char *lp = quote_identifier(t->columns[t->lineage_partition].name);
		const char *lo = quote_identifier(t->columns[t->lineage_offset].name);

		/* a row without lineage (not written by the pipeline) stays */
		position = psprintf("(s._ks_partition < t.%s OR (s._ks_partition = t.%s AND s._ks_offset < t.%s))",
							lp, lp, lo);
	}
	if (t->order_index >= 0)
	{
		const char *o = quote_identifier(t->columns[t->order_index].name);

		appendStringInfo(b, "%s((s.%s IS NULL AND t.%s IS NOT NULL) OR s.%s < t.%s", prefix, o, o, o, o);
		if (position)
			appendStringInfo(b, " OR (s.%s IS NOT DISTINCT FROM t.%s AND %s)", o, o, position);
		appendStringInfoChar(b, ')');
		return true;
	}
	if (position)
	{
		appendStringInfo(b, "%s%s", prefix, position);
		return true;
	}
	return false;
}

/*
 * write_mode insert_only: the SET list that replaces a row by an earlier
 * event, as an insert of it would write the row (a field it leaves out
 * takes the column's default).  False when there is nothing to set.
 */
static bool
append_insert_set(StringInfo b, KsTarget *t, const char *prefix)
{
	bool		first = true;

	for (int i = 0; i < t->ncolumns; i++)
	{
		if (t->columns[i].is_key)
			continue;
		appendStringInfo(b, "%s%s = ", first ? prefix : ", ", quote_identifier(t->columns[i].name));
		append_insert_value(b, &t->columns[i], i);
		first = false;
	}
	return !first;
}

char *
ks_merge_sql(KsTarget *t, bool by_hand)
{
	StringInfoData b;

	initStringInfo(&b);
	appendStringInfo(&b, "MERGE INTO %s AS t USING (%s) AS s ON ", t->qualified_name, ks_source_sql(t, by_hand));
	append_key_match(&b, t);
	appendStringInfoString(&b, " WHEN MATCHED");
	if (t->write_mode == KS_WRITE_INSERT_ONLY)
	{
		/* the first event wins: a row is replaced only by an earlier one */
		if (!append_earlier(&b, t, " AND ") || !append_insert_set(&b, t, " THEN UPDATE SET "))
			appendStringInfoString(&b, " THEN DO NOTHING");
	}
	else
	{
		append_guard(&b, t, " AND ");
		if (!append_update_set(&b, t, " THEN UPDATE SET "))
			appendStringInfoString(&b, " THEN DO NOTHING");
	}
	/* update_only: a key not in the target is skipped */
	if (t->write_mode == KS_WRITE_UPDATE_ONLY)
		return b.data;
	appendStringInfoString(&b, " WHEN NOT MATCHED THEN INSERT (");
	append_column_list(&b, t);
	appendStringInfoString(&b, ") VALUES (");
	append_insert_values(&b, t);
	appendStringInfoChar(&b, ')');
	return b.data;
}

/*
 * write_mode update_only: the number of the batch's rows whose key the
 * target does not hold (the MERGE skips them), by the MERGE's key match.
 */
char *
ks_absent_keys_sql(KsTarget *t)
{
	StringInfoData b;

	initStringInfo(&b);
	appendStringInfo(&b, "SELECT count(*) FROM (%s) AS s WHERE NOT EXISTS (SELECT FROM %s AS t WHERE ",
					 ks_source_sql(t, false), t->qualified_name);
	append_key_match(&b, t);
	appendStringInfoChar(&b, ')');
	return b.data;
}

/*
 * delete_mode soft: the batch's rows (their _ks_seq) whose key's row is
 * marked deleted and which pass the MERGE's guard, so that the MERGE (or
 * on_conflict's UPDATE) brings the row back: the same key match, mark and
 * guard as its WHEN MATCHED clause, run with its snapshot (apply_sql.c).
 * Second column: what the marked row held to order by, which the upsert
 * overrides (a change event's delete or truncate left its source position
 * there, a tombstone kept the order value), as text ('' without an order
 * column), as message_fate words it (_row_fate_columns).
 */
char *
ks_revived_sql(KsTarget *t)
{
	StringInfoData b;
	char	   *held = "''";

	if (t->order_index >= 0)
	{
		const char *o = quote_identifier(t->columns[t->order_index].name);

		held = psprintf("%s || coalesce(t.%s::text, 'NULL')",
						quote_literal_cstr(t->cdc ? "source position " : psprintf("%s = ", o)), o);
	}
	initStringInfo(&b);
	appendStringInfo(&b, "SELECT s._ks_seq, %s FROM (%s) AS s JOIN %s AS t ON ",
					 held, ks_source_sql(t, false), t->qualified_name);
	append_key_match(&b, t);
	appendStringInfo(&b, " WHERE %s", soft_mark(t));
	append_guard(&b, t, " AND ");
	return b.data;
}

/*
 * The on_conflict strategy's two statements, run one after the other (each
 * with its own snapshot) over the same rows: the INSERT of the keys the
 * target lacks, then the UPDATE of the others, under the MERGE's guard and
 * SET list.  $2 is the transaction id that the INSERT writes with, so that
 * the UPDATE skips the rows it just inserted (the MERGE, too, either
 * inserts or updates a key).  The INSERT proposes only keys it does not
 * find (NOT EXISTS): INSERT ... ON CONFLICT checks a proposed row's NOT
 * NULL and CHECK constraints, fires its BEFORE INSERT triggers and takes
 * its defaults' sequence values before it looks for a conflict, which for
 * a key the MERGE updates (or leaves, stale) the MERGE never does.  A key
 * a concurrent transaction inserted meanwhile is skipped by the ON
 * CONFLICT and then found by the UPDATE, which the guard decides as for
 * any row.  Why not a DO UPDATE: its SET sees only the
 * proposed row (EXCLUDED), which cannot tell a field the message left out
 * from one it set to the default, nor carry the order value of the
 * message that supplied a folded column (docs/design/apply.md).
 */
char *
ks_onconflict_insert_sql(KsTarget *t, bool by_hand)
{
	StringInfoData b;

	initStringInfo(&b);
	append_insert_select(&b, t, by_hand);
	appendStringInfo(&b, " WHERE NOT EXISTS (SELECT FROM %s AS t WHERE ", t->qualified_name);
	append_key_match(&b, t);
	appendStringInfoString(&b, ") ORDER BY s._ks_seq ON CONFLICT (");
	append_key_columns(&b, t, "");
	appendStringInfoString(&b, ") DO NOTHING");
	return b.data;
}

/*
 * NULL when the target has no column but the key (nothing to update).
 * skip_inserted: the on_conflict strategy's UPDATE, which runs after its
 * INSERT and skips the rows that wrote ($2); a Citus target's runs first.
 */
static char *
update_sql(KsTarget *t, bool by_hand, bool skip_inserted)
{
	StringInfoData b;

	initStringInfo(&b);
	appendStringInfo(&b, "UPDATE %s AS t", t->qualified_name);
	if (!append_update_set(&b, t, " SET "))
		return NULL;
	appendStringInfo(&b, " FROM (%s) AS s WHERE ", ks_source_sql(t, by_hand));
	append_key_match(&b, t);
	if (skip_inserted)
		appendStringInfoString(&b, " AND t.xmin OPERATOR(pg_catalog.<>) $2");
	append_guard(&b, t, " AND ");
	return b.data;
}

/*
 * delete_mode soft: the SET list that marks target row t deleted by a
 * delete at the staged row s (ks_delete_sql) or by a truncate at position
 * $1 and timestamp $2 (ks_truncate_sql, s NULL): _deleted true,
 * _deleted_at the delete's Kafka timestamp (-infinity without one: still
 * a mark), the lineage columns the delete's message, and for a change
 * event the order column its position (the guard then keeps an older
 * replayed event stale, as cdc_deletions does for a hard delete).
 */
static void
append_soft_mark_set(StringInfo b, KsTarget *t, const char *s)
{
	const char *ts = s ? "s._ks_ts" : "$2";
	bool		first = true;

	appendStringInfoString(b, " SET ");
	for (int i = 0; i < t->ncolumns; i++)
	{
		KsColumn   *c = &t->columns[i];
		const char *name = quote_identifier(c->name);

		if (i == t->soft_deleted)
			appendStringInfo(b, "%s%s = true", first ? "" : ", ", name);
		else if (i == t->soft_deleted_at)
			appendStringInfo(b, "%s%s = CASE WHEN %s THEN t.%s"
							 " ELSE COALESCE(%s, '-infinity'::pg_catalog.timestamptz) END",
							 first ? "" : ", ", name, soft_mark(t), name, ts);
		else if (i == t->order_index && t->cdc)
			appendStringInfo(b, "%s%s = %s", first ? "" : ", ", name, s ? psprintf("s.%s", name) : "$1");
		else if (c->lineage && !c->soft && s)
			appendStringInfo(b, "%s%s = %s", first ? "" : ", ", name, c->lineage);
		else
			continue;
		first = false;
	}
}

char *
ks_onconflict_update_sql(KsTarget *t, bool by_hand)
{
	return update_sql(t, by_hand, true);
}

/*
 * A Citus target's merge, as two statements Citus executes (the MERGE it
 * refuses: its source is a function, or a local table, and a reference
 * table is no MERGE target): the on_conflict strategy's UPDATE first,
 * without the xmin test (the shards' rows carry the worker nodes'
 * transaction ids), then the INSERT of the keys the target lacks.  Citus
 * cannot plan the on_conflict INSERT's NOT EXISTS (a correlated subquery
 * over a local table), so the keys the target has are read by a join of
 * the target and the staged batch, which Citus pushes down to the shards,
 * and the INSERT takes the batch rows that join does not find.
 */
char *
ks_citus_update_sql(KsTarget *t, bool by_hand)
{
	return update_sql(t, by_hand, false);
}

char *
ks_citus_insert_sql(KsTarget *t, bool by_hand)
{
	StringInfoData b;

	initStringInfo(&b);
	append_insert_select(&b, t, by_hand);
	appendStringInfoString(&b, " LEFT JOIN (SELECT ");
	append_key_columns(&b, t, "t.");
	appendStringInfo(&b, ", true AS _ks_found FROM %s AS t JOIN (%s) AS s ON ",
					 t->qualified_name, ks_source_sql(t, by_hand));
	append_key_match(&b, t);
	appendStringInfoString(&b, ") AS t ON ");
	append_key_match(&b, t);
	appendStringInfoString(&b, " WHERE t._ks_found IS NULL ORDER BY s._ks_seq ON CONFLICT (");
	append_key_columns(&b, t, "");
	appendStringInfoString(&b, ") DO NOTHING");
	return b.data;
}

char *
ks_delete_sql(KsTarget *t, bool by_hand)
{
	StringInfoData b;

	initStringInfo(&b);
	if (t->soft)
	{
		appendStringInfo(&b, "UPDATE %s AS t", t->qualified_name);
		append_soft_mark_set(&b, t, "s");
		appendStringInfo(&b, " FROM (%s) AS s WHERE ", ks_source_sql(t, by_hand));
	}
	else
		appendStringInfo(&b, "DELETE FROM %s AS t USING (%s) AS s WHERE ", t->qualified_name, ks_source_sql(t, by_hand));
	append_key_match(&b, t);
	if (t->soft && !t->cdc)
	{
		/* a tombstone marks a row once (a hard delete removes it once) */
		appendStringInfo(&b, " AND NOT (%s)", soft_mark(t));
	}
	else if (t->cdc)
	{
		const char *o = quote_identifier(t->columns[t->order_index].name);

		/* a change event's delete removes only an older row */
		appendStringInfo(&b, " AND (t.%s IS NULL OR t.%s < s.%s)", o, o, o);
	}
	return b.data;
}

/* envelope debezium: a truncate at position $1 removes the rows older than it */
char *
ks_truncate_sql(KsTarget *t)
{
	const char *o = quote_identifier(t->columns[t->order_index].name);

	if (t->soft)
	{
		StringInfoData b;

		/* delete_mode soft: $2 is the truncate's Kafka timestamp */
		initStringInfo(&b);
		appendStringInfo(&b, "UPDATE %s AS t", t->qualified_name);
		append_soft_mark_set(&b, t, NULL);
		appendStringInfo(&b, " WHERE t.%s IS NULL OR t.%s < $1", o, o);
		return b.data;
	}
	return psprintf("DELETE FROM %s AS t WHERE t.%s IS NULL OR t.%s < $1", t->qualified_name, o, o);
}

char *
ks_append_sql(KsTarget *t, bool by_hand)
{
	StringInfoData b;

	initStringInfo(&b);
	append_insert_select(&b, t, by_hand);
	appendStringInfoString(&b, " ORDER BY s._ks_seq");
	return b.data;
}

char *
ks_function_sql(KsPipeline *p, KsTarget *t, bool by_hand)
{
	StringInfoData b;
	Oid			fn = p->targets.batch_function;
	char	   *nspname = get_namespace_name(get_func_namespace(fn));
	char	   *proname = get_func_name(fn);
	char	   *fname;

	/*
	 * From the pg_proc row, each part quoted: cutting the text of
	 * format_procedure at "(" breaks on a schema or function name holding
	 * one.  The argument types come from the call ($1 bigint, the row array).
	 */
	if (nspname == NULL || proname == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_FUNCTION),
				 errmsg("batch function of pipeline \"%s\" no longer exists", p->name),
				 errhint("Drop the pipeline and create it again for the new function.")));
	fname = quote_qualified_identifier(nspname, proname);
	initStringInfo(&b);
	appendStringInfo(&b, "SELECT %s($1::bigint, ARRAY(SELECT ROW(%s)::%s FROM (%s) AS s ORDER BY s._ks_seq))",
					 fname, t->row_sql, format_type_be_qualified(t->rowtype), ks_source_sql(t, by_hand));
	return b.data;
}


/* The INSERT that lands a batch in bronze when the fast path cannot. */
char *
ks_bronze_sql(Oid bronze)
{
	return psprintf("INSERT INTO %s (topic, partition, \"offset\", ts, key, value, headers, batch_id)"
					" SELECT m.topic, m.partition, m.\"offset\", m.ts, m.key, m.value, m.headers, $1"
					" FROM kafka_sink._batch_messages() AS m(topic text, partition integer,"
					" \"offset\" bigint, ts timestamptz, key bytea, value bytea, headers jsonb)",
					quote_qualified_identifier(get_namespace_name(get_rel_namespace(bronze)),
											   get_rel_name(bronze)));
}


/*
 * kafka_sink._pipeline_statements(pipeline_id): the statements a batch of
 * the pipeline runs, built by the same functions the worker builds them
 * with (so the text shown is the text run), per target and in the order
 * they run.  statement is the text as run ($1 is the batch id; the batch
 * comes from kafka_sink._batch_rows(), which only a worker has); by_hand
 * is the same statement reading the staging table that the 'staging' row
 * creates, for a user to run it (PREPARE ... (bigint) AS ..., EXECUTE).
 * The pipeline is read with the caller's rights: one they cannot see does
 * not exist.
 */
/*
 * The targets a routed pipeline writes, as far as they can be known
 * without a message: the tables of its targets map and those its retained
 * batches wrote (their progress), that exist now, in name order (the
 * order batches lock them in).  Each is opened with the pipeline's
 * key_columns, else its primary key; a table with neither is left out
 * (a merge cannot run on it: its messages are quarantined).
 */
static List *
routed_targets(KsPipeline *p)
{
	List	   *out = NIL;
	ListCell   *lc;
	StringInfoData names;
	uint64		n;
	Oid		   *relids;

	initStringInfo(&names);
	appendStringInfoString(&names, "{");
	foreach(lc, p->targets.target_map)
	{
		KsOption   *o = lfirst(lc);
		const char *c;

		appendStringInfoString(&names, lc == list_head(p->targets.target_map) ? "\"" : ",\"");
		for (c = o->value; *c; c++)
		{
			if (*c == '"' || *c == '\\')
				appendStringInfoChar(&names, '\\');
			appendStringInfoChar(&names, *c);
		}
		appendStringInfoChar(&names, '"');
	}
	appendStringInfoString(&names, "}");
	{
		Oid			types2[2] = {INT8OID, TEXTOID};
		Datum		values2[2] = {Int64GetDatum(p->id), CStringGetTextDatum(names.data)};

		ks_spi_exec("list a routed pipeline's targets",
					"SELECT DISTINCT r.oid::pg_catalog.regclass::text COLLATE \"C\" AS name, r.oid"
					"  FROM (SELECT k.name FROM kafka_sink.batches b,"
					"               jsonb_object_keys(CASE WHEN jsonb_typeof(b.progress->'sink'->'targets') = 'object'"
					"                                 THEN b.progress->'sink'->'targets' END) AS k(name)"
					"         WHERE b.pipeline_id = $1"
					"        UNION SELECT x FROM unnest($2::text[]) x) n"
					"  JOIN pg_catalog.pg_class r ON r.oid = pg_catalog.to_regclass(n.name)"
					" WHERE r.relkind IN ('r', 'p')"
					" ORDER BY 1",
					2, types2, values2, NULL, true, SPI_OK_SELECT);
	}
	n = SPI_processed;
	relids = palloc(sizeof(Oid) * Max(n, 1));
	for (uint64 i = 0; i < n; i++)
	{
		bool		isnull;

		relids[i] = DatumGetObjectId(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 2, &isnull));
	}
	for (uint64 i = 0; i < n; i++)
	{
		List	   *keys = p->targets.key_columns;

		if (keys == NIL)
		{
			Oid			kt[1] = {OIDOID};
			Datum		kv[1] = {ObjectIdGetDatum(relids[i])};

			ks_spi_exec("read a routed target's primary key",
						"SELECT a.attname::text FROM pg_catalog.pg_index x"
						"  CROSS JOIN LATERAL unnest(x.indkey::int2[]) WITH ORDINALITY AS k(attnum, i)"
						"  JOIN pg_catalog.pg_attribute a ON a.attrelid = x.indrelid AND a.attnum = k.attnum"
						" WHERE x.indrelid = $1 AND x.indisprimary ORDER BY k.i",
						1, kt, kv, NULL, true, SPI_OK_SELECT);
			for (uint64 j = 0; j < SPI_processed; j++)
				keys = lappend(keys, SPI_getvalue(SPI_tuptable->vals[j], SPI_tuptable->tupdesc, 1));
		}
		if (keys == NIL && p->targets.mode == KS_MODE_MERGE)
			continue;
		out = lappend(out, ks_target_open_rel(p, relids[i], keys));
	}
	return out;
}

PG_FUNCTION_INFO_V1(kafka_sink_pipeline_statements);
Datum
kafka_sink_pipeline_statements(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	int64		pipeline_id;
	KsPipeline *p;
	KsTarget   *t = NULL;
	int			step = 0;
	List	   *targets;
	ListCell   *tc;

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("pipeline id cannot be null")));
	pipeline_id = PG_GETARG_INT64(0);
	InitMaterializedSRF(fcinfo, 0);
	if (rsinfo->setDesc->natts != 7)
		elog(ERROR, "kafka_sink: pipeline_statements descriptor mismatch");
	ks_spi_connect();
	p = ks_load_pipeline(pipeline_id, CurrentMemoryContext);
	if (p == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("pipeline %lld does not exist", (long long) pipeline_id),
				 errhint("SELECT name FROM kafka_sink.pipelines lists the pipelines you can see.")));
	if (OidIsValid(p->targets.target))
	{
		if (get_rel_name(p->targets.target) == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_TABLE),
					 errmsg("the target of pipeline \"%s\" no longer exists", p->name)));
		t = ks_target_open(p);
	}
	if (OidIsValid(p->targets.bronze) && get_rel_name(p->targets.bronze) == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("the bronze table of pipeline \"%s\" no longer exists", p->name)));

#define KS_EMIT(rel, kind, stmt, hand, note) KS_EMIT_BY("sql", rel, kind, stmt, hand, note)
#define KS_EMIT_BY(strategy, rel, kind, stmt, hand, note) \
	do { \
		Datum		v_[7]; \
		bool		n_[7] = {false, false, false, false, false, false, false}; \
		v_[0] = Int32GetDatum(++step); \
		v_[1] = ObjectIdGetDatum(rel); \
		v_[2] = CStringGetTextDatum(kind); \
		v_[3] = CStringGetTextDatum(strategy); \
		if ((stmt) != NULL) v_[4] = CStringGetTextDatum(stmt); else n_[4] = true; \
		if ((hand) != NULL) v_[5] = CStringGetTextDatum(hand); else n_[5] = true; \
		v_[6] = CStringGetTextDatum(note); \
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, v_, n_); \
	} while (0)

	if (OidIsValid(p->targets.bronze))
		KS_EMIT(p->targets.bronze, "bronze", ks_bronze_sql(p->targets.bronze), NULL,
				"Lands every message of the batch raw, first. When the bronze table is a plain table the worker "
				"can write as INSERT would (no triggers, row level security, CHECK constraints or generated "
				"columns), it inserts the same rows through table_multi_insert instead of this statement. "
				"A message already landed (offsets moved back) is kept: the statement is then run again with "
				"ON CONFLICT (topic, partition, \"offset\") DO NOTHING.");
	targets = OidIsValid(p->targets.target) ? list_make1(t) :
		(p->targets.target_template != NULL || p->targets.target_map != NIL) ? routed_targets(p) : NIL;
	foreach(tc, targets)
	{
		t = lfirst(tc);
		KS_EMIT(t->relid, "staging", NULL,
				psprintf("CREATE TEMP TABLE kafka_sink_batch %s", ks_batch_columns_sql(t)),
				"Not run by the worker: the table the by_hand statements read in place of "
				"kafka_sink._batch_rows(). Per column: its value, and _ks_pN (N: the column's position "
				"among these columns, from 0) true when the message set it; a column the message did not "
				"set keeps the target's value on update and takes its default on insert. "
				"_ks_topic, _ks_partition, _ks_offset, _ks_ts: the message's coordinates and timestamp; "
				"_ks_seq: its position in the batch; _ks_oN (with an order column and optional "
				"columns): the order value of the message that supplied column N, for the ordering guard.");
		if (t->cdc && p->targets.mode == KS_MODE_MERGE && p->contract.on_truncate == KS_TRUNCATE_APPLY)
			KS_EMIT(t->relid, "truncate", ks_truncate_sql(t), NULL,
					"Runs first, once per truncate event of the batch (on_truncate => 'apply'), "
					"with $1 the truncate's source position: removes only the rows older than it (a replayed "
					"truncate leaves newer rows), and records the position in kafka_sink.cdc_deletions.");
		if (p->targets.mode == KS_MODE_MERGE && (p->contract.delete_on_tombstone || t->cdc))
			KS_EMIT(t->relid, "delete", ks_delete_sql(t, false), ks_delete_sql(t, true),
					"Runs first, over the batch's tombstones that win their key (delete_on_tombstone). "
					"To run by hand: PREPARE d(bigint) AS <by_hand>; EXECUTE d(<batch id>).");
		if (p->targets.mode == KS_MODE_MERGE && t->citus != KS_CITUS_NONE)
		{
			char	   *update = ks_citus_update_sql(t, false);

			if (update != NULL)
				KS_EMIT_BY("citus", t->relid, "update", update, ks_citus_update_sql(t, true),
						   psprintf("A Citus %s table, in place of the MERGE (which Citus refuses here): over "
									"one row per key, the winner of the reduce, staged by the worker in %s "
									"before each statement; updates the keys the target has, under the ordering "
									"guard, with the MERGE's SET list. $1 is the batch id. To run by hand: "
									"PREPARE u(bigint) AS <by_hand>; EXECUTE u(<batch id>).",
									ks_citus_kind_name(t->citus), ks_citus_stage_name(t)));
			KS_EMIT_BY("citus", t->relid, "insert", ks_citus_insert_sql(t, false), ks_citus_insert_sql(t, true),
					   "Runs right after the update, over the same rows: inserts the keys the target lacks "
					   "(the join of the target and the staged rows finds the others; ON CONFLICT DO NOTHING "
					   "skips a key another session inserted meanwhile). $1 is the batch id. To run by hand: "
					   "PREPARE i(bigint) AS <by_hand>; EXECUTE i(<batch id>).");
		}
		else if (p->targets.mode == KS_MODE_MERGE && ks_apply_strategy == KS_APPLY_STRATEGY_ON_CONFLICT)
		{
			char	   *update = ks_onconflict_update_sql(t, false);

			KS_EMIT_BY("on_conflict", t->relid, "insert", ks_onconflict_insert_sql(t, false),
					   ks_onconflict_insert_sql(t, true),
					   "kafka_sink.apply_strategy = on_conflict, in place of the MERGE: over one row per key, "
					   "the winner of the reduce, inserts the keys the target lacks (ON CONFLICT DO NOTHING: a "
					   "key a concurrent transaction inserts is left to the update). $1 is the batch id. "
					   "To run by hand: PREPARE i(bigint) AS <by_hand>; EXECUTE i(<batch id>).");
			if (update != NULL)
				KS_EMIT_BY("on_conflict", t->relid, "update", update, ks_onconflict_update_sql(t, true),
						   "Runs right after the insert, over the same rows: updates the keys the target had, "
						   "under the ordering guard, with the MERGE's SET list (a field the message left out "
						   "keeps the row's value). $2 is the id of the transaction the insert wrote with, so "
						   "that the rows it inserted are not updated again. To run by hand: PREPARE u(bigint, "
						   "xid) AS <by_hand>; EXECUTE u(<batch id>, '0') (0: no row is skipped; a row the "
						   "insert just wrote is then rewritten with the same values).");
		}
		else if (p->targets.mode == KS_MODE_MERGE)
			KS_EMIT(t->relid, "merge", ks_merge_sql(t, false), ks_merge_sql(t, true),
					psprintf("Runs over one row per key, the winner of the reduce: %s, then the latest "
							 "offset. The WHEN MATCHED condition is the ordering guard: a target row "
							 "that is newer stays (the message is stale). Rows go in key order; a row "
							 "that fails through its own fault is quarantined and its key's next best "
							 "message competes again. $1 is the batch id, written to _kafka_batch_id. "
							 "To run by hand: PREPARE m(bigint) AS <by_hand>; EXECUTE m(<batch id>) "
							 "(the staging table must hold at most one row per key).",
							 p->targets.order_column ? psprintf("the greatest %s (NULL lowest)",
														quote_identifier(p->targets.order_column))
							 : "no order column, so"));
		else if (p->targets.mode == KS_MODE_HISTORY)
		{
			KS_EMIT(t->relid, "history", ks_history_sql(t, false, p->id, NULL), ks_history_sql(t, true, p->id, NULL),
					"Runs over every message that decoded (not a winner per key): folds the events into the "
					"versions of their keys from the version in effect before each key's earliest event on, "
					"updates the stored versions that change (_valid_to, values, _deleted, _is_current, "
					"_fields) and inserts the new ones; _ks_del is true for a delete. $1 is the batch id. "
					"To run by hand: PREPARE h(bigint) AS <by_hand>; EXECUTE h(<batch id>) (docs/history.md).");
			if (t->cdc && p->contract.on_truncate == KS_TRUNCATE_APPLY)
				KS_EMIT(t->relid, "history truncate", ks_history_sql(t, false, p->id, "$2"),
						ks_history_sql(t, true, p->id, "$2"),
						"Runs in place of the history statement in a batch with a truncate event not seen "
						"before (on_truncate => 'apply'), with $2 the earliest such truncate's source "
						"position, also when the batch has no other event: every key of the table takes part "
						"from that position on, and each truncate recorded in kafka_sink.cdc_deletions ends "
						"the versions in effect at it. To run by hand: PREPARE t(bigint, numeric) AS "
						"<by_hand>; EXECUTE t(<batch id>, <position>).");
		}
		else if (p->targets.mode == KS_MODE_APPEND)
			KS_EMIT(t->relid, "append", ks_append_sql(t, false), ks_append_sql(t, true),
					"Runs over every message that decoded (not quarantined, not a duplicate event id), in "
					"offset order. $1 is the batch id. To run by hand: PREPARE a(bigint) AS <by_hand>; "
					"EXECUTE a(<batch id>).");
		else
			KS_EMIT(t->relid, "function", ks_function_sql(p, t, false), ks_function_sql(p, t, true),
					"Calls the batch function once per batch with the batch id ($1) and the decoded rows in "
					"offset order. To run by hand: PREPARE f(bigint) AS <by_hand>; EXECUTE f(<batch id>).");
	}
#undef KS_EMIT
#undef KS_EMIT_BY
	SPI_finish();
	return (Datum) 0;
}

