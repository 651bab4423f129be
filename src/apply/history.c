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

		/* a truncate not skipped (on_truncate apply) is an event too */
		if (r->reason != KS_OK || r->duplicate || r->skipped)
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
 * The select list of the statement's events e over s (the batch's rows):
 * the key from key_prefix's columns, then v, the order in the batch, the
 * flags and the data and lineage columns; truncate: the deletes a
 * truncate row makes (_ks_trunc), which carry nothing.
 */
static void
append_events(StringInfo b, KsTarget *t, const char *key_prefix, bool truncate, const char *v, const char *ord)
{
	appendStringInfo(b, "SELECT %s, %s AS _ks_v, %s AS _ks_ord,"
					 " %s AS _ks_del, false AS _ks_base, NULL::text[] AS _ks_f, %s AS _ks_trunc",
					 keys_list(t, key_prefix), v, ord,
					 truncate ? "true" : "s._ks_del", truncate ? "true" : "false");
	for (int i = 0; i < t->ncolumns; i++)
	{
		KsColumn   *c = &t->columns[i];

		if (is_data(c))
			appendStringInfo(b, ", s.%s, %s AS _ks_q%d", quote_identifier(c->name),
							 truncate ? "false" : psprintf("(s._ks_p%d AND NOT s._ks_del)", i), i);
		else if (c->lineage && !c->history)
			appendStringInfo(b, ", (%s)::%s AS %s", c->lineage, c->type_sql, quote_identifier(c->name));
	}
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
 * then the stored versions that differ are updated and the new ones
 * inserted.  A version's lineage columns name the last message at its v
 * (a re-sent copy that changes nothing leaves them).
 */
char *
ks_history_sql(KsTarget *t, bool by_hand, List *truncates)
{
	StringInfoData b;
	const char *o = quote_identifier(t->columns[t->order_index].name);
	char	   *keys = keys_list(t, "");
	char	   *pk = psprintf("PARTITION BY %s", keys);
	int			fields = history_column_index(t, 'p');
	int			current = history_column_index(t, 'c');
	int			i;
	StringInfoData tv;

	initStringInfo(&b);

	/* the truncates' positions, "(VALUES ('T1'::numeric), ...)" (NULL: none) */
	if (truncates != NIL)
	{
		ListCell   *lc;

		initStringInfo(&tv);
		appendStringInfoString(&tv, "(VALUES ");
		foreach(lc, truncates)
			appendStringInfo(&tv, "%s(%s::numeric)", lc == list_head(truncates) ? "" : ", ",
							 quote_literal_cstr(lfirst(lc)));
		appendStringInfoChar(&tv, ')');
	}

	/* e: the batch's events; for change events, the truncates' deletes */
	if (t->cdc)
		appendStringInfo(&b, "WITH s AS (SELECT * FROM (%s) AS s), e AS (", ks_source_sql(t, by_hand));
	else
		appendStringInfoString(&b, "WITH e AS (");
	append_events(&b, t, "s.", false, psprintf("s.%s", o), "s._ks_seq::bigint + 1");
	if (t->cdc)
	{
		/*
		 * a truncate of the batch (_ks_del NULL) at T: a delete at T for
		 * every key with a version in effect just before T or starting at
		 * T, and every key of the batch
		 */
		appendStringInfoString(&b, " FROM s WHERE s._ks_del IS NOT NULL UNION ALL ");
		append_events(&b, t, "k.", true, psprintf("s.%s", o), "s._ks_seq::bigint + 1");
		appendStringInfo(&b, " FROM s CROSS JOIN LATERAL (SELECT %s FROM %s AS t WHERE t._valid_from <= s.%s"
						 " AND (t._valid_to IS NULL OR t._valid_to >= s.%s)"
						 " UNION SELECT %s FROM s AS s2 WHERE s2._ks_del IS NOT NULL) AS k"
						 " WHERE s._ks_del IS NULL",
						 keys, t->qualified_name, o, o, keys_list(t, "s2."));

		/*
		 * a truncate of an earlier batch at T: a delete at T for each key
		 * of the batch with an event before T (it may not have been in
		 * the table then); no message: its lineage columns are NULL
		 */
		if (truncates != NIL)
		{
			appendStringInfoString(&b, " UNION ALL ");
			append_events(&b, t, "k.", true, "r.v", "(-1)::bigint");
			appendStringInfo(&b, " FROM %s AS r(v) LEFT JOIN s ON false CROSS JOIN"
							 " (SELECT %s, min(s2.%s) AS _ks_min FROM s AS s2 WHERE s2._ks_del IS NOT NULL"
							 " GROUP BY %s) AS k WHERE r.v > k._ks_min",
							 tv.data, keys_list(t, "s2."), o, keys_list(t, "s2."));
		}
		appendStringInfoChar(&b, ')');
	}
	else
		appendStringInfo(&b, " FROM (%s) AS s)", ks_source_sql(t, by_hand));

	/* m: each key's earliest event; o: the stored versions from the base on */
	appendStringInfo(&b, ", m AS (SELECT %s, min(_ks_v) AS _ks_min FROM e GROUP BY %s)", keys, keys);
	/*
	 * a stored delete at a truncate's position, past the base, is that
	 * truncate's: as conditional as the truncate's new deletes
	 */
	appendStringInfo(&b, ", o AS (SELECT %s, t._valid_from, 0::bigint, coalesce(t._deleted, false),"
					 " t._valid_from < m._ks_min, %s, ",
					 keys_list(t, "t."), fields >= 0 ? "t._fields" : "NULL::text[]");
	if (truncates != NIL)
		appendStringInfo(&b, "(coalesce(t._deleted, false) AND t._valid_from >= m._ks_min"
						 " AND t._valid_from IN (SELECT v FROM %s AS r(v)))", tv.data);
	else
		appendStringInfoString(&b, "false");
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

	/*
	 * b: ties at one v (a truncate's delete only where nothing else is at
	 * its v, the last of its copies); z: a truncate's delete only after a
	 * version that is not a delete; c: segments between deletes
	 */
	appendStringInfo(&b, ", a AS (SELECT * FROM e UNION ALL SELECT * FROM o)"
					 ", b AS (SELECT a.*, max(_ks_ord) FILTER (WHERE _ks_del AND NOT _ks_trunc) OVER w AS _ks_lastdel,"
					 " max(_ks_ord) FILTER (WHERE NOT _ks_trunc) OVER w AS _ks_maxord,"
					 " max(_ks_ord) OVER w AS _ks_maxall, bool_and(_ks_trunc) OVER w AS _ks_alltrunc,"
					 " bool_or(_ks_ord = 0) OVER w AS _ks_stored"
					 " FROM a WINDOW w AS (%s, _ks_v))"
					 ", z AS (SELECT b.*, lag(_ks_del) OVER (%s ORDER BY _ks_v, _ks_ord) AS _ks_prevdel FROM b"
					 " WHERE CASE WHEN _ks_trunc THEN _ks_alltrunc AND _ks_ord = _ks_maxall"
					 " ELSE _ks_ord >= coalesce(_ks_lastdel, _ks_ord) AND NOT (_ks_del AND _ks_ord < _ks_maxord) END)"
					 ", c0 AS (SELECT z.*, lead(_ks_del) OVER (%s ORDER BY _ks_v, _ks_ord) AS _ks_nextdel FROM z"
					 " WHERE NOT _ks_trunc OR NOT coalesce(_ks_prevdel, true))"
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
	appendStringInfo(&b, ", f AS (SELECT %s, _ks_v, _ks_del, _ks_base, _ks_f, _ks_stored,"
					 " row_number() OVER (%s, _ks_v ORDER BY _ks_ord DESC) AS _ks_last",
					 keys, pk);
	for (i = 0; i < t->ncolumns; i++)
	{
		KsColumn   *c = &t->columns[i];
		const char *name = quote_identifier(c->name);

		if (i == t->order_index)
			appendStringInfo(&b, ", _ks_v AS %s", name);
		else if (is_data(c))
			appendStringInfo(&b, ", CASE WHEN _ks_g%d > 0 THEN first_value(%s) OVER (%s, _ks_seg, _ks_g%d"
							 " ORDER BY _ks_v, _ks_ord) END AS %s", i, name, pk, i, name);
		else if (c->lineage && !c->history)
			appendStringInfo(&b, ", %s", name);
		if (is_data(c) && fields >= 0)
			appendStringInfo(&b, ", bool_or(_ks_q%d) OVER (%s, _ks_v) AS _ks_q%d", i, pk, i);
	}
	appendStringInfoString(&b, " FROM d)");
	appendStringInfo(&b, ", g AS (SELECT f.*, lead(_ks_v) OVER (%s ORDER BY _ks_v) AS _ks_to FROM f"
					 " WHERE _ks_last = 1)", pk);

	/* x: the stored deletes of truncates that no longer end a version */
	if (truncates != NIL)
		appendStringInfo(&b, ", x AS (DELETE FROM %s AS t USING z WHERE z._ks_trunc AND z._ks_stored"
						 " AND coalesce(z._ks_prevdel, true) AND %s AND t._valid_from = z._ks_v RETURNING 1)",
						 t->qualified_name, keys_match(t, "t", "z"));

	/* u: the stored versions that change */
	appendStringInfo(&b, ", u AS (UPDATE %s AS t SET _valid_to = g._ks_to, _deleted = g._ks_del", t->qualified_name);
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
	for (i = 0; i < t->ncolumns; i++)
	{
		KsColumn   *c = &t->columns[i];

		if (is_data(c) || (c->lineage && !c->history))
			appendStringInfo(&b, ", %s", quote_identifier(c->name));
	}
	appendStringInfo(&b, ") SELECT %s, g._ks_v, g._ks_to, g._ks_del%s", keys_list(t, "g."),
					 current >= 0 ? ", g._ks_to IS NULL AND NOT g._ks_del" : "");
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
