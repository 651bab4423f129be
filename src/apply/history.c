/*-------------------------------------------------------------------------
 *
 * history.c
 *		Mode history: the target keeps one row per version of a key, from
 *		_valid_from (the event's order value) to _valid_to (where the next
 *		version starts, NULL for the latest), a delete being a version of
 *		its own marked _deleted (docs/history.md).
 *
 * Every decoded event of the batch goes to one statement (not a winner
 * per key): it takes the versions of the batch's keys from the one in
 * effect before the key's earliest event on, folds the events into them
 * along time, and updates the stored versions that change and inserts the
 * new ones.  Its result depends only on the set of events, not on how they
 * are cut into batches, so a batch whose statement fails through a row's
 * fault is narrowed down by bisection as merge mode's is (apply_sql.c).
 *
 * Owns: the rule (which events a batch applies, a tombstone's order
 * value) and the text of the history statement.  Must not: run the
 * statement (the SQL strategy does) or write the catalog.
 *
 *-------------------------------------------------------------------------
 */
#include "kafka_sink.h"
#include "history.h"
#include "statements.h"

#include "catalog/pg_type.h"
#include "lib/stringinfo.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/timestamp.h"

/*
 * The rows of the batch the history statement takes, into sel (returns
 * their number): every decoded row that is not a duplicate.  A tombstone
 * has no order value: with a timestamptz order column it takes the
 * message's Kafka timestamp; otherwise it cannot be placed in time and is
 * quarantined (missing_required_field), as is a tombstone without a
 * timestamp.
 */
int
ks_history_rows(KsBatch *batch, int *sel)
{
	KsTarget   *t = batch->target;
	int			o = t->order_index;
	int			n = 0;

	for (int i = 0; i < batch->nmsgs; i++)
	{
		KsRow	   *r = &batch->rows[i];

		if (r->reason != KS_OK || r->duplicate || r->skipped || r->is_truncate)
			continue;
		if (r->is_delete && r->nulls[o])
		{
			if (t->columns[o].typid == TIMESTAMPTZOID && r->msg->timestamp_ms >= 0)
			{
				r->values[o] = TimestampTzGetDatum(ks_epoch_ms_to_timestamptz(r->msg->timestamp_ms));
				r->nulls[o] = false;
			}
			else
			{
				r->reason = KS_MISSING_REQUIRED_FIELD;
				r->detail = psprintf("a tombstone in mode history takes the message's timestamp as its order value,"
									 " which needs a timestamptz order column and a message timestamp (%s is %s)",
									 quote_identifier(t->columns[o].name),
									 format_type_be(t->columns[o].typid));
				continue;
			}
		}
		sel[n++] = i;
	}
	return n;
}

/* ---- the statement ---- */

static int
history_column_index(KsTarget *t, char kind)
{
	for (int i = 0; i < t->ncolumns; i++)
		if (t->columns[i].history == kind)
			return i;
	return -1;
}

/* A data column: what an event carries and a version keeps (the order column too). */
static bool
is_data(KsColumn *c)
{
	return !c->is_key && !c->history && c->lineage == NULL;
}

/* "k1, k2": the key columns, each prefixed */
static char *
keys_list(KsTarget *t, const char *prefix)
{
	StringInfoData b;

	initStringInfo(&b);
	for (int k = 0; k < t->nkeys; k++)
		appendStringInfo(&b, "%s%s%s", k > 0 ? ", " : "", prefix,
						 quote_identifier(t->columns[t->key_index[k]].name));
	return b.data;
}

/* "a.k1 = b.k1 AND ..." */
static char *
keys_match(KsTarget *t, const char *a, const char *b)
{
	StringInfoData s;

	initStringInfo(&s);
	for (int k = 0; k < t->nkeys; k++)
	{
		const char *name = quote_identifier(t->columns[t->key_index[k]].name);

		appendStringInfo(&s, "%s%s.%s = %s.%s", k > 0 ? " AND " : "", a, name, b, name);
	}
	return s.data;
}

/* _fields of a version of g: the names of the data columns its events carried */
static void
append_fields_array(StringInfo b, KsTarget *t)
{
	appendStringInfoString(b, "pg_catalog.array_remove(ARRAY[NULL::text");
	for (int i = 0; i < t->ncolumns; i++)
		if (is_data(&t->columns[i]))
			appendStringInfo(b, ", CASE WHEN g._ks_q%d THEN %s END", i, quote_literal_cstr(t->columns[i].name));
	appendStringInfoString(b, "], NULL)");
}

/*
 * _valid_from_at and _valid_to_at, those the target has (docs/history.md,
 * "Reading by time"), from the expressions from and to: how: 's' ", col =
 * expr" (an UPDATE's SET), 'w' " OR t.col IS DISTINCT FROM expr" (its
 * WHERE), 'n' ", col" (an INSERT's list), 'v' ", expr" (its values)
 */
static void
append_time_columns(StringInfo b, KsTarget *t, const char *from, const char *to, char how)
{
	for (int i = 0; i < t->ncolumns; i++)
	{
		KsColumn   *c = &t->columns[i];
		const char *e = c->history == 'F' ? from : to;
		const char *name = quote_identifier(c->name);

		if (c->history != 'F' && c->history != 'T')
			continue;
		if (how == 's')
			appendStringInfo(b, ", %s = %s", name, e);
		else if (how == 'w')
			appendStringInfo(b, " OR t.%s IS DISTINCT FROM %s", name, e);
		else if (how == 'n')
			appendStringInfo(b, ", %s", name);
		else
			appendStringInfo(b, ", %s", e);
	}
}

/*
 * track_history_columns (docs/history.md, "Tracked columns"): a version
 * of the target is a run of states, each state what a version of the
 * untracked statement would be, kept in the version's _states jsonb (an
 * array of objects in _valid_from order: _valid_from, _deleted, _fields,
 * and every data and lineage column).  The fold runs over the states, so
 * a late event inside a version finds the state just before it; the
 * versions are then made again from the states, which depend only on the
 * set of events.
 *
 * r: the batch keys' versions from the one in effect before the key's
 * earliest event on (a version before it cannot change: its states all
 * come before the event, and so does the boundary at its start);
 * o: their states, those before the earliest event counting as carrying
 * every column (their values are the state there), the others what their
 * _fields say.
 */
static void
append_stored_states(StringInfo b, KsTarget *t)
{
	appendStringInfo(b, ", r AS (SELECT m._ks_min, t.* FROM m CROSS JOIN LATERAL (SELECT * FROM %s AS t WHERE %s"
					 " AND t._valid_from >= coalesce((SELECT max(t2._valid_from) FROM %s AS t2 WHERE %s"
					 " AND t2._valid_from < m._ks_min), m._ks_min) OFFSET 0) AS t)",
					 t->qualified_name, keys_match(t, "t", "m"), t->qualified_name, keys_match(t, "t2", "m"));
	appendStringInfo(b, ", o AS (SELECT %s, x._valid_from, 0::bigint, coalesce(x._deleted, false),"
					 " x._valid_from < r._ks_min,"
					 " ARRAY(SELECT pg_catalog.jsonb_array_elements_text(s.j -> '_fields'))%s",
					 keys_list(t, "r."), t->at_index >= 0 ? ", x._valid_from_at" : "");
	for (int i = 0; i < t->ncolumns; i++)
	{
		KsColumn   *c = &t->columns[i];

		if (is_data(c))
			appendStringInfo(b, ", x.%s, (x._valid_from < r._ks_min OR NOT coalesce(x._deleted, false)"
							 " AND (s.j -> '_fields') ? %s)",
							 quote_identifier(c->name), quote_literal_cstr(c->name));
		else if (c->lineage && !c->history)
			appendStringInfo(b, ", x.%s", quote_identifier(c->name));
	}
	appendStringInfo(b, " FROM r CROSS JOIN LATERAL pg_catalog.jsonb_array_elements(r._states) AS s(j)"
					 " CROSS JOIN LATERAL pg_catalog.jsonb_populate_record(NULL::%s, s.j) AS x)",
					 t->qualified_name);
}

/* A state of g as a jsonb object (in pieces: jsonb_build_object takes at most 100 arguments). */
static void
append_state_object(StringInfo b, KsTarget *t)
{
	int			pairs = 3;

	appendStringInfoString(b, "pg_catalog.jsonb_build_object('_valid_from', g._ks_v, '_deleted', g._ks_del,"
						   " '_fields', pg_catalog.to_jsonb(CASE WHEN g._ks_base THEN g._ks_f ELSE ");
	append_fields_array(b, t);
	appendStringInfoString(b, " END)");
	if (t->at_index >= 0)
	{
		appendStringInfoString(b, ", '_valid_from_at', g._ks_at");
		pairs++;
	}
	for (int i = 0; i < t->ncolumns; i++)
	{
		KsColumn   *c = &t->columns[i];

		if (!is_data(c) && !(c->lineage && !c->history))
			continue;
		if (pairs++ == 40)
		{
			appendStringInfoString(b, ") || pg_catalog.jsonb_build_object(");
			pairs = 1;
		}
		else
			appendStringInfoString(b, ", ");
		appendStringInfo(b, "%s, g.%s", quote_literal_cstr(c->name), quote_identifier(c->name));
	}
	appendStringInfoChar(b, ')');
}

/*
 * After g (the states, with _valid_to the next state's start): h, a state
 * starts a version when its _deleted or a tracked column differs from the
 * state before it (compared as text, as the untracked statement does); i,
 * the version each state belongs to; j, each version: from its first
 * state's start to the next version's, with the values and lineage of its
 * last state and its states; then the versions of r that are no longer
 * are deleted, those that differ updated and the new ones inserted.
 */
static void
append_tracked_writes(StringInfo b, KsTarget *t)
{
	char	   *keys = keys_list(t, "");
	char	   *pk = psprintf("PARTITION BY %s", keys);
	int			current = history_column_index(t, 'c');
	int			i;

	appendStringInfo(b, ", h AS (SELECT g.*, (lag(_ks_del) OVER w IS DISTINCT FROM _ks_del");
	for (i = 0; i < t->ncolumns; i++)
		if (t->columns[i].tracked)
		{
			const char *name = quote_identifier(t->columns[i].name);

			appendStringInfo(b, " OR lag(%s::text) OVER w IS DISTINCT FROM %s::text", name, name);
		}
	appendStringInfo(b, ") AS _ks_new FROM g WINDOW w AS (%s ORDER BY _ks_v))", pk);
	appendStringInfo(b, ", i AS (SELECT h.*, sum(_ks_new::integer) OVER (%s ORDER BY _ks_v ROWS UNBOUNDED PRECEDING)"
					 " AS _ks_run FROM h)", pk);
	appendStringInfo(b, ", j AS (SELECT g.*, min(_ks_v) OVER wr AS _ks_from,%s pg_catalog.jsonb_agg(",
					 t->at_index >= 0 ? " first_value(_ks_at) OVER wr AS _ks_from_at," : "");
	append_state_object(b, t);
	appendStringInfo(b, ") OVER wr AS _ks_states, row_number() OVER (%s, _ks_run ORDER BY _ks_v DESC) AS _ks_lastst"
					 " FROM i AS g WINDOW wr AS (%s, _ks_run ORDER BY _ks_v"
					 " ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING))", pk, pk);
	appendStringInfo(b, ", k AS (SELECT j.*, EXISTS (SELECT 1 FROM r WHERE %s AND r._valid_from = j._ks_from) AS _ks_had"
					 " FROM j WHERE _ks_lastst = 1)", keys_match(t, "r", "j"));
	appendStringInfo(b, ", x AS (DELETE FROM %s AS t USING r WHERE %s AND t._valid_from = r._valid_from"
					 " AND NOT EXISTS (SELECT 1 FROM k WHERE %s AND k._ks_from = r._valid_from) RETURNING 1)",
					 t->qualified_name, keys_match(t, "t", "r"), keys_match(t, "k", "r"));
	appendStringInfo(b, ", u AS (UPDATE %s AS t SET _valid_to = k._ks_to, _deleted = k._ks_del,"
					 " _states = k._ks_states", t->qualified_name);
	append_time_columns(b, t, "k._ks_from_at", "k._ks_to_at", 's');
	if (current >= 0)
		appendStringInfoString(b, ", _is_current = (k._ks_to IS NULL AND NOT k._ks_del)");
	for (i = 0; i < t->ncolumns; i++)
	{
		KsColumn   *c = &t->columns[i];

		if (is_data(c) || (c->lineage && !c->history))
			appendStringInfo(b, ", %s = k.%s", quote_identifier(c->name), quote_identifier(c->name));
	}
	appendStringInfo(b, " FROM k WHERE k._ks_had AND %s AND t._valid_from = k._ks_from"
					 " AND (t._valid_to IS DISTINCT FROM k._ks_to OR t._states IS DISTINCT FROM k._ks_states",
					 keys_match(t, "t", "k"));
	append_time_columns(b, t, "k._ks_from_at", "k._ks_to_at", 'w');
	appendStringInfoString(b, ") RETURNING 1)");
	appendStringInfo(b, " INSERT INTO %s (%s, _valid_from, _valid_to, _deleted, _states%s",
					 t->qualified_name, keys, current >= 0 ? ", _is_current" : "");
	append_time_columns(b, t, NULL, NULL, 'n');
	for (i = 0; i < t->ncolumns; i++)
	{
		KsColumn   *c = &t->columns[i];

		if (is_data(c) || (c->lineage && !c->history))
			appendStringInfo(b, ", %s", quote_identifier(c->name));
	}
	appendStringInfo(b, ") SELECT %s, k._ks_from, k._ks_to, k._ks_del, k._ks_states%s", keys_list(t, "k."),
					 current >= 0 ? ", k._ks_to IS NULL AND NOT k._ks_del" : "");
	append_time_columns(b, t, "k._ks_from_at", "k._ks_to_at", 'v');
	for (i = 0; i < t->ncolumns; i++)
	{
		KsColumn   *c = &t->columns[i];

		if (is_data(c) || (c->lineage && !c->history))
			appendStringInfo(b, ", k.%s", quote_identifier(c->name));
	}
	appendStringInfoString(b, " FROM k WHERE NOT k._ks_had");
}

/*
 * The history statement, over the batch's events (kafka_sink._batch_rows()
 * or, by hand, the staging table), $1 the batch id.  Its steps, as CTEs:
 *
 *   e   the events: the key, v (the order value), a delete flag, each data
 *       column with _ks_qN (the event carries it), the lineage values;
 *   o   the stored versions of the batch's keys from the one in effect
 *       before the key's earliest event v on (a version before that one
 *       cannot change): that first one, the base, counts as carrying
 *       every column (its values are the state there); the others carry
 *       what _fields says (every column without _fields), nothing if
 *       deleted;
 *   b   per (key, v), in order (a stored version before the batch's
 *       events, these in batch order): a delete discards what came before
 *       it at v and is discarded by what comes after it (the later message
 *       wins a tie);
 *   c   _ks_seg: how many runs of deletes come before, per key (a
 *       delete ends the fold: after it, a column takes only what later
 *       events carry; a delete right after a delete keeps the values of
 *       the deleted version it ends, as the first did);
 *   d,f each column's value: that of the last row up to this one, in its
 *       segment, carrying the column (NULL if none), as the merge rule's
 *       fold, along time;
 *   g   one row per (key, v), the last, with _valid_to the next v.
 *
 * With _valid_from_at (a change event's commit time, decoded into the
 * batch rows), _ks_at travels beside v: a stored version's, an event's, a
 * truncate's (cdc_deletions.source_time); g keeps the last row's at v and
 * _ks_to_at, the next version's (with track_history_columns, a version's
 * first state's and the next version's first state's).  Versions stay
 * ordered by v alone.
 *
 * Change events' truncates (tr, cdc_guard.c records them): each is a
 * delete at its position P of every key with P from its earliest event on
 * (a batch with a new truncate takes every key of the table into m), kept
 * only where a live version precedes it (c0), so that the result does not
 * depend on whether a key's older events came before the truncate.
 *
 * then the stored versions that differ are updated, those no longer there
 * (a truncate's delete that now ends no live version) deleted, and the new
 * ones inserted.  A version's lineage columns name the last message at its v
 * (a re-sent copy that changes nothing leaves them).
 *
 * truncate: NULL, or an SQL expression for the earliest new truncate's
 * position P (the worker's quoted literal; $2 in pipeline_statements()).
 */
char *
ks_history_sql(KsTarget *t, bool by_hand, int64 pipeline_id, const char *truncate)
{
	StringInfoData b;
	const char *o = quote_identifier(t->columns[t->order_index].name);
	char	   *keys = keys_list(t, "");
	char	   *pk = psprintf("PARTITION BY %s", keys);
	int			fields = history_column_index(t, 'p');
	int			current = history_column_index(t, 'c');
	int			i;

	initStringInfo(&b);

	/* e: the batch's events */
	appendStringInfo(&b, "WITH e AS (SELECT %s, s.%s AS _ks_v, s._ks_seq::bigint + 1 AS _ks_ord,"
					 " s._ks_del AS _ks_del, false AS _ks_base, NULL::text[] AS _ks_f",
					 keys_list(t, "s."), o);
	if (t->at_index >= 0)
		appendStringInfoString(&b, ", s._valid_from_at AS _ks_at");
	for (i = 0; i < t->ncolumns; i++)
	{
		KsColumn   *c = &t->columns[i];

		if (is_data(c))
			appendStringInfo(&b, ", s.%s, (s._ks_p%d AND NOT s._ks_del) AS _ks_q%d",
							 quote_identifier(c->name), i, i);
		else if (c->lineage && !c->history)
			appendStringInfo(&b, ", (%s)::%s AS %s", c->lineage, c->type_sql, quote_identifier(c->name));
	}
	appendStringInfo(&b, " FROM (%s) AS s)", ks_source_sql(t, by_hand));

	/*
	 * m: each key's earliest event (a batch with a truncate at P: every key
	 * of the table, from P at the latest); tr: the truncates' positions
	 */
	if (truncate)
		appendStringInfo(&b, ", m AS (SELECT %s, min(_ks_v) AS _ks_min FROM (SELECT %s, _ks_v FROM e"
						 " UNION ALL SELECT %s, %s::numeric FROM %s) AS z GROUP BY %s)",
						 keys, keys, keys, truncate, t->qualified_name, keys);
	else
		appendStringInfo(&b, ", m AS (SELECT %s, min(_ks_v) AS _ks_min FROM e GROUP BY %s)", keys, keys);
	if (t->cdc)
		appendStringInfo(&b, ", tr AS (SELECT (d.key::jsonb ->> 'truncate')::numeric AS _ks_p, d.source_time AS _ks_at"
						 " FROM kafka_sink.cdc_deletions d"
						 " WHERE d.pipeline_id = " INT64_FORMAT " AND d.target = %u"
						 " AND d.key LIKE '{%%')", pipeline_id, t->relid);
	/* o: the stored versions from the base on */
	if (t->track)
		append_stored_states(&b, t);
	else
	{
	appendStringInfo(&b, ", o AS (SELECT %s, t._valid_from, 0::bigint, coalesce(t._deleted, false),"
					 " t._valid_from < m._ks_min, %s%s",
					 keys_list(t, "t."), fields >= 0 ? "t._fields" : "NULL::text[]",
					 t->at_index >= 0 ? ", t._valid_from_at" : "");
	for (i = 0; i < t->ncolumns; i++)
	{
		KsColumn   *c = &t->columns[i];

		if (is_data(c))
		{
			appendStringInfo(&b, ", t.%s, (t._valid_from < m._ks_min OR NOT coalesce(t._deleted, false)",
							 quote_identifier(c->name));
			if (fields >= 0)
				appendStringInfo(&b, " AND %s = ANY (t._fields)", quote_literal_cstr(c->name));
			appendStringInfoChar(&b, ')');
		}
		else if (c->lineage && !c->history)
			appendStringInfo(&b, ", t.%s", quote_identifier(c->name));
	}
	/*
	 * per key, two probes of the (key, _valid_from) index, whatever the
	 * table's size: OFFSET 0 keeps the planner from flattening the LATERAL
	 * into a hash join over the whole table (measured: 1.6 s instead of
	 * 0.2 s for 10,000 keys against 90,000 versions)
	 */
	appendStringInfo(&b, " FROM m CROSS JOIN LATERAL (SELECT * FROM %s AS t WHERE %s AND t._valid_from >= coalesce("
					 "(SELECT max(t2._valid_from) FROM %s AS t2 WHERE %s AND t2._valid_from < m._ks_min),"
					 " m._ks_min) OFFSET 0) AS t)",
					 t->qualified_name, keys_match(t, "t", "m"), t->qualified_name, keys_match(t, "t2", "m"));
	}

	/* b: ties at one v; c: segments between deletes */
	if (t->cdc)
	{
		/*
		 * a truncate at P is a delete at P of every key (_ks_syn: kept
		 * below only where it ends a live version): one for each key with
		 * P from its earliest event on, before a stored one at P (_ks_ord
		 * -1)
		 */
		appendStringInfo(&b, ", a AS (SELECT y.*, (y._ks_del AND y._ks_v IN (SELECT _ks_p FROM tr)) AS _ks_syn"
						 " FROM (SELECT * FROM e UNION ALL SELECT * FROM o UNION ALL SELECT %s, tr._ks_p, -1::bigint,"
						 " true, false, NULL::text[]%s", keys_list(t, "m."), t->at_index >= 0 ? ", tr._ks_at" : "");
		for (i = 0; i < t->ncolumns; i++)
		{
			KsColumn   *c = &t->columns[i];

			if (is_data(c))
				appendStringInfo(&b, ", NULL::%s, false", c->type_sql);
			else if (c->lineage && !c->history)
				appendStringInfo(&b, ", NULL::%s", c->type_sql);
		}
		appendStringInfoString(&b, " FROM m JOIN tr ON tr._ks_p >= m._ks_min) AS y)");
	}
	else
		appendStringInfoString(&b, ", a AS (SELECT *, false AS _ks_syn FROM e UNION ALL SELECT *, false FROM o)");
	appendStringInfo(&b, ", b AS (SELECT a.*, max(_ks_ord) FILTER (WHERE _ks_del) OVER w AS _ks_lastdel,"
					 " max(_ks_ord) OVER w AS _ks_maxord, bool_or(_ks_ord = 0) OVER w AS _ks_stored"
					 " FROM a WINDOW w AS (%s, _ks_v))"
					 /* b1: the tie's survivors; c0: a truncate's delete only after a live version */
					 ", b1 AS (SELECT b.*, lag(_ks_del) OVER (%s ORDER BY _ks_v, _ks_ord) AS _ks_prevdel FROM b"
					 " WHERE _ks_ord >= coalesce(_ks_lastdel, _ks_ord) AND NOT (_ks_del AND _ks_ord < _ks_maxord))"
					 ", c0 AS (SELECT b1.*, lead(_ks_del) OVER (%s ORDER BY _ks_v, _ks_ord) AS _ks_nextdel FROM b1"
					 " WHERE NOT _ks_syn OR _ks_base OR NOT _ks_prevdel)"
					 ", c AS (SELECT c0.*, coalesce(sum((_ks_del AND NOT coalesce(_ks_nextdel, true))::integer)"
					 " OVER (%s ORDER BY _ks_v, _ks_ord ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0)"
					 " AS _ks_seg FROM c0)",
					 pk, pk, pk, pk);

	/* d: per column, which carrying row it takes (0: none) */
	appendStringInfoString(&b, ", d AS (SELECT c.*");
	for (i = 0; i < t->ncolumns; i++)
		if (is_data(&t->columns[i]))
			appendStringInfo(&b, ", count(*) FILTER (WHERE _ks_q%d) OVER (%s, _ks_seg ORDER BY _ks_v, _ks_ord"
							 " ROWS UNBOUNDED PRECEDING) AS _ks_g%d", i, pk, i);
	appendStringInfoString(&b, " FROM c)");

	/* f: the folded values */
	appendStringInfo(&b, ", f AS (SELECT %s, _ks_v, _ks_del, _ks_base, _ks_f, _ks_stored,%s"
					 " row_number() OVER (%s, _ks_v ORDER BY _ks_ord DESC) AS _ks_last",
					 keys, t->at_index >= 0 ? " _ks_at," : "", pk);
	for (i = 0; i < t->ncolumns; i++)
	{
		KsColumn   *c = &t->columns[i];
		const char *name = quote_identifier(c->name);

		if (i == t->order_index)
			appendStringInfo(&b, ", _ks_v AS %s", name);
		else if (is_data(c))
		{
			/* no event before it in its segment carries it: the column's default if a constant */
			appendStringInfo(&b, ", CASE WHEN _ks_g%d > 0 THEN first_value(%s) OVER (%s, _ks_seg, _ks_g%d"
							 " ORDER BY _ks_v, _ks_ord)", i, name, pk, i);
			if (c->default_immutable)
				appendStringInfo(&b, " ELSE (%s)::%s", c->default_sql, c->type_sql);
			appendStringInfo(&b, " END AS %s", name);
		}
		else if (c->lineage && !c->history)
			appendStringInfo(&b, ", %s", name);
		if (is_data(c) && (fields >= 0 || t->track))
			appendStringInfo(&b, ", bool_or(_ks_q%d) OVER (%s, _ks_v) AS _ks_q%d", i, pk, i);
	}
	appendStringInfoString(&b, " FROM d)");
	appendStringInfo(&b, ", g AS (SELECT f.*, lead(_ks_v) OVER (%s ORDER BY _ks_v) AS _ks_to", pk);
	if (t->at_index >= 0)
		appendStringInfo(&b, ", lead(_ks_at) OVER (%s ORDER BY _ks_v) AS _ks_to_at", pk);
	appendStringInfoString(&b, " FROM f WHERE _ks_last = 1)");

	if (t->track)
	{
		append_tracked_writes(&b, t);
		return b.data;
	}

	/* y: the stored versions no longer there (a truncate's delete that ends no live version) */
	if (t->cdc)
		appendStringInfo(&b, ", y AS (DELETE FROM %s AS t USING b WHERE b._ks_ord = 0 AND %s AND t._valid_from = b._ks_v"
						 " AND NOT EXISTS (SELECT 1 FROM g WHERE %s AND g._ks_v = b._ks_v) RETURNING 1)",
						 t->qualified_name, keys_match(t, "t", "b"), keys_match(t, "g", "b"));

	/* u: the stored versions that change */
	appendStringInfo(&b, ", u AS (UPDATE %s AS t SET _valid_to = g._ks_to, _deleted = g._ks_del", t->qualified_name);
	append_time_columns(&b, t, "g._ks_at", "g._ks_to_at", 's');
	if (current >= 0)
		appendStringInfoString(&b, ", _is_current = (g._ks_to IS NULL AND NOT g._ks_del)");
	if (fields >= 0)
	{
		appendStringInfoString(&b, ", _fields = CASE WHEN g._ks_base THEN g._ks_f ELSE ");
		append_fields_array(&b, t);
		appendStringInfoString(&b, " END");
	}
	for (i = 0; i < t->ncolumns; i++)
	{
		KsColumn   *c = &t->columns[i];

		if (is_data(c) || (c->lineage && !c->history))
			appendStringInfo(&b, ", %s = g.%s", quote_identifier(c->name), quote_identifier(c->name));
	}
	appendStringInfo(&b, " FROM g WHERE g._ks_stored AND %s AND t._valid_from = g._ks_v"
					 " AND (t._valid_to IS DISTINCT FROM g._ks_to OR t._deleted IS DISTINCT FROM g._ks_del",
					 keys_match(t, "t", "g"));
	if (current >= 0)
		appendStringInfoString(&b, " OR t._is_current IS DISTINCT FROM (g._ks_to IS NULL AND NOT g._ks_del)");
	append_time_columns(&b, t, "g._ks_at", "g._ks_to_at", 'w');
	for (i = 0; i < t->ncolumns; i++)
		if (is_data(&t->columns[i]))
		{
			const char *name = quote_identifier(t->columns[i].name);

			/* as text: json, xml and others have no equality */
			appendStringInfo(&b, " OR t.%s::text IS DISTINCT FROM g.%s::text", name, name);
		}
	if (fields >= 0)
	{
		appendStringInfoString(&b, " OR NOT g._ks_base AND t._fields IS DISTINCT FROM ");
		append_fields_array(&b, t);
	}
	appendStringInfoString(&b, ") RETURNING 1)");

	/* the new versions */
	appendStringInfo(&b, " INSERT INTO %s (%s, _valid_from, _valid_to, _deleted%s%s",
					 t->qualified_name, keys, current >= 0 ? ", _is_current" : "", fields >= 0 ? ", _fields" : "");
	append_time_columns(&b, t, NULL, NULL, 'n');
	for (i = 0; i < t->ncolumns; i++)
	{
		KsColumn   *c = &t->columns[i];

		if (is_data(c) || (c->lineage && !c->history))
			appendStringInfo(&b, ", %s", quote_identifier(c->name));
	}
	appendStringInfo(&b, ") SELECT %s, g._ks_v, g._ks_to, g._ks_del%s", keys_list(t, "g."),
					 current >= 0 ? ", g._ks_to IS NULL AND NOT g._ks_del" : "");
	append_time_columns(&b, t, "g._ks_at", "g._ks_to_at", 'v');
	if (fields >= 0)
	{
		appendStringInfoString(&b, ", ");
		append_fields_array(&b, t);
	}
	for (i = 0; i < t->ncolumns; i++)
	{
		KsColumn   *c = &t->columns[i];

		if (is_data(c) || (c->lineage && !c->history))
			appendStringInfo(&b, ", g.%s", quote_identifier(c->name));
	}
	appendStringInfoString(&b, " FROM g WHERE NOT g._ks_stored");
	return b.data;
}
