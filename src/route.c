/*-------------------------------------------------------------------------
 *
 * route.c
 *		Routing: one pipeline writing many tables.  Each message of a batch
 *		is sent to one target table, named by the pipeline's targets map or
 *		by its target template expanded for the message; each table is
 *		opened and checked once per batch, where it is first used.
 *
 * Which table a message goes to, in this order:
 *   1. targets map, by the message's topic;
 *   2. targets map, by "<source.schema>.<source.table>" of the value;
 *   3. the target template, expanded (or the pipeline's plain target).
 * A message none of them names, or whose table does not exist, is
 * quarantined as no_target; a table that exists but that the pipeline may
 * not write (the checks of create_pipeline: kafka_sink._check_target) as
 * target_refused.  Both replay once the table is fixed.
 *
 * A template is literal text and placeholders: {topic}, or a JSON path of
 * the value ({source.table}; in a value wrapped as {"schema":...,
 * "payload":...} the path is looked up under payload when it is absent at
 * the top).  A dot outside braces separates the schema from the table
 * ('replica.{source.table}'; at most one such dot).  Without one, the
 * expansion itself is split: the part after its last dot is the table, the
 * part between the two last dots the schema, and a name without dots is in
 * schema public (a Debezium topic dbserver1.inventory.orders into '{topic}'
 * is inventory.orders).  Literal text and expanded values are taken as
 * they are (no case folding, no quotes); they are looked up as names,
 * never spliced into SQL.  A name longer than NAMEDATALEN - 1 bytes is
 * not cut: no_target.  Map values are SQL names (schema.table, quoted as
 * in SQL).
 *
 * Owns: parsing templates (also for create_pipeline), naming and opening
 * each message's target.  Must not: decode or apply rows (apply.c).
 *
 *-------------------------------------------------------------------------
 */
#include "kafka_sink.h"
#include "apply.h"
#include "catalog.h"
#include "decode.h"
#include "envelope.h"
#include "jsonwalk.h"

#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_namespace.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "lib/stringinfo.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/hsearch.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/varlena.h"

typedef enum KsPieceKind
{
	KS_PIECE_TEXT,
	KS_PIECE_TOPIC,
	KS_PIECE_FIELD
} KsPieceKind;

typedef struct KsPiece
{
	KsPieceKind kind;
	char	   *text;			/* literal text, or the field's path */
	int			slot;			/* field: its slot in the walk */
	int			payload_slot;	/* field: the same under payload */
} KsPiece;

typedef struct KsTplPart
{
	int			npieces;
	KsPiece    *pieces;
} KsTplPart;

typedef struct KsRouting
{
	int			nparts;			/* 0: no template; 1: split the expansion; 2: schema.table */
	KsTplPart	parts[2];
	KsWalkPaths walk;			/* the value fields routing reads */
	bool		reads_value;
	int			src_schema[2];	/* source.schema, payload.source.schema */
	int			src_table[2];
} KsRouting;

/* per batch: a target name and what became of it */
typedef struct KsRouteEntry
{
	char		name[2 * NAMEDATALEN + 8];	/* hash key: the quoted, qualified name */
	int			target;			/* index into batch->targets, or -1 */
	KsReason	reason;
	char	   *detail;
	int			count;
} KsRouteEntry;

bool
ks_routing_enabled(KsPipeline *p)
{
	return p->target_template != NULL || p->target_map != NIL;
}

static void
add_piece(List **pieces, KsPieceKind kind, const char *text, int len)
{
	KsPiece    *pc = palloc0(sizeof(KsPiece));

	pc->kind = kind;
	pc->text = pnstrdup(text, len);
	*pieces = lappend(*pieces, pc);
}

static void
template_error(const char *tpl, const char *detail)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("invalid target template \"%s\"", tpl),
			 errdetail("%s", detail),
			 errhint("A template is literal text and placeholders such as {topic} or {source.table}, with at most one dot outside braces between schema and table, e.g. 'replica.{source.table}'.")));
}

/*
 * Parses a template into its parts (schema and table, or one part split
 * at its expansion's last dots) and pieces.  Raises on a bad template.
 */
static int
parse_template(const char *tpl, List **parts)
{
	List	   *pieces = NIL;
	const char *s = tpl;
	const char *lit = s;
	int			nparts = 0;
	bool		any_placeholder = false;

	for (;;)
	{
		if (*s == '{' || *s == '}' || *s == '.' || *s == '\0')
		{
			if (s > lit)
				add_piece(&pieces, KS_PIECE_TEXT, lit, s - lit);
		}
		if (*s == '\0' || *s == '.')
		{
			if (pieces == NIL)
				template_error(tpl, "The schema or the table part of the template is empty.");
			parts[nparts++] = pieces;
			pieces = NIL;
			if (*s == '\0')
				break;
			if (nparts == 2)
				template_error(tpl, "More than one dot outside braces: a template names a schema and a table.");
			lit = ++s;
			continue;
		}
		if (*s == '}')
			template_error(tpl, "A \"}\" closes no placeholder.");
		if (*s == '{')
		{
			const char *end = strchr(s + 1, '}');
			const char *open = strchr(s + 1, '{');
			char	   *name;

			if (end == NULL || (open != NULL && open < end))
				template_error(tpl, "A \"{\" is not closed by \"}\".");
			if (end == s + 1)
				template_error(tpl, "A placeholder is empty.");
			name = pnstrdup(s + 1, end - s - 1);
			if (strcmp(name, "topic") == 0)
				add_piece(&pieces, KS_PIECE_TOPIC, name, strlen(name));
			else
			{
				KsPath		path;

				if (!ks_path_parse(name, &path))
					template_error(tpl, psprintf("\"%s\" is neither topic nor a JSON path.", name));
				add_piece(&pieces, KS_PIECE_FIELD, name, strlen(name));
			}
			any_placeholder = true;
			s = end + 1;
			lit = s;
			continue;
		}
		s++;
	}
	if (!any_placeholder)
		template_error(tpl, "It has no placeholder.");
	return nparts;
}

/* kafka_sink._check_target_template(text): the worker's parser, for create_pipeline */
PG_FUNCTION_INFO_V1(kafka_sink_check_target_template);
Datum
kafka_sink_check_target_template(PG_FUNCTION_ARGS)
{
	char	   *tpl = text_to_cstring(PG_GETARG_TEXT_PP(0));
	List	   *parts[2];

	(void) parse_template(tpl, parts);
	PG_RETURN_VOID();
}

static int
slot_of(List **paths, const char *path)
{
	ListCell   *lc;
	int			i = 0;

	foreach(lc, *paths)
	{
		if (strcmp(lfirst(lc), path) == 0)
			return i;
		i++;
	}
	*paths = lappend(*paths, pstrdup(path));
	return i;
}

/* The routing of p, compiled once into p's memory context. */
static KsRouting *
routing_of(KsPipeline *p)
{
	MemoryContext old;
	KsRouting  *r;
	List	   *paths = NIL;
	ListCell   *lc;
	int			i;

	if (p->routing)
		return p->routing;
	old = MemoryContextSwitchTo(GetMemoryChunkContext(p));
	r = palloc0(sizeof(KsRouting));
	if (p->target_template)
	{
		List	   *parts[2];

		r->nparts = parse_template(p->target_template, parts);
		for (int k = 0; k < r->nparts; k++)
		{
			r->parts[k].npieces = list_length(parts[k]);
			r->parts[k].pieces = palloc(sizeof(KsPiece) * r->parts[k].npieces);
			i = 0;
			foreach(lc, parts[k])
			{
				KsPiece    *pc = &r->parts[k].pieces[i++];

				*pc = *(KsPiece *) lfirst(lc);
				if (pc->kind == KS_PIECE_FIELD)
				{
					pc->slot = slot_of(&paths, pc->text);
					pc->payload_slot = slot_of(&paths, psprintf("payload.%s", pc->text));
				}
			}
		}
	}
	r->src_schema[0] = r->src_schema[1] = r->src_table[0] = r->src_table[1] = -1;
	if (p->target_map != NIL)
	{
		r->src_schema[0] = slot_of(&paths, "source.schema");
		r->src_schema[1] = slot_of(&paths, "payload.source.schema");
		r->src_table[0] = slot_of(&paths, "source.table");
		r->src_table[1] = slot_of(&paths, "payload.source.table");
	}
	r->reads_value = paths != NIL;
	r->walk.nslots = list_length(paths);
	r->walk.paths = palloc0(sizeof(KsPath) * Max(r->walk.nslots, 1));
	i = 0;
	foreach(lc, paths)
	{
		if (!ks_path_parse(lfirst(lc), &r->walk.paths[i]))
			elog(ERROR, "kafka_sink: routing path \"%s\" does not parse", (char *) lfirst(lc));
		i++;
	}
	MemoryContextSwitchTo(old);
	p->routing = r;
	return r;
}

/* a slot's value as a name part: strings and numbers; else NULL */
static const char *
slot_text(KsSlotValue *slots, int slot, int payload_slot)
{
	KsSlotValue *v = &slots[slot];

	if (v->kind == KS_SLOT_ABSENT && payload_slot >= 0)
		v = &slots[payload_slot];
	if (v->kind == KS_SLOT_STRING || v->kind == KS_SLOT_SCALAR)
		return v->text;
	return NULL;
}

/*
 * Expands one part of the template for message m.  NULL, with *why set,
 * when a field it needs is missing, null or not a scalar.
 */
static char *
expand_part(KsTplPart *part, KsMessage *m, KsSlotValue *slots, bool value_ok, char **why)
{
	StringInfoData b;

	initStringInfo(&b);
	for (int i = 0; i < part->npieces; i++)
	{
		KsPiece    *pc = &part->pieces[i];
		const char *v;

		switch (pc->kind)
		{
			case KS_PIECE_TEXT:
				appendStringInfoString(&b, pc->text);
				break;
			case KS_PIECE_TOPIC:
				appendStringInfoString(&b, m->topic);
				break;
			case KS_PIECE_FIELD:
				v = value_ok ? slot_text(slots, pc->slot, pc->payload_slot) : NULL;
				if (v == NULL)
				{
					*why = value_ok ?
						psprintf("The field \"%s\" of the target template is missing, null or not a string or number.", pc->text) :
						psprintf("The value is not a JSON object, so the field \"%s\" of the target template cannot be read.", pc->text);
					return NULL;
				}
				appendStringInfoString(&b, v);
				break;
		}
	}
	return b.data;
}

/* checks one part of a name; NULL when fine, else why not */
static char *
bad_name_part(const char *what, const char *s)
{
	size_t		len = strlen(s);

	if (len == 0)
		return psprintf("The %s name of the target is empty.", what);
	if (len >= NAMEDATALEN)
		return psprintf("The %s name \"%s\" is longer than %d bytes.", what, s, NAMEDATALEN - 1);
	if (!pg_verify_mbstr(GetDatabaseEncoding(), s, len, true))
		return psprintf("The %s name of the target is not valid in the database encoding.", what);
	return NULL;
}

/*
 * The schema and table message m goes to.  False, with *why, when none
 * can be named.
 */
static bool
name_target(KsPipeline *p, KsRouting *r, KsMessage *m, KsSlotValue *slots, bool value_ok,
			char **schema, char **table, char **why)
{
	ListCell   *lc;
	const char *src = NULL;

	*schema = *table = NULL;
	*why = NULL;
	if (p->target_map != NIL)
	{
		const char *ss = value_ok ? slot_text(slots, r->src_schema[0], r->src_schema[1]) : NULL;
		const char *st = value_ok ? slot_text(slots, r->src_table[0], r->src_table[1]) : NULL;
		const char *match = NULL;

		if (ss && st)
			src = psprintf("%s.%s", ss, st);
		foreach(lc, p->target_map)
		{
			KsOption   *o = lfirst(lc);

			if (strcmp(o->name, m->topic) == 0)
			{
				match = o->value;
				break;
			}
		}
		if (match == NULL && src)
			foreach(lc, p->target_map)
			{
				KsOption   *o = lfirst(lc);

				if (strcmp(o->name, src) == 0)
				{
					match = o->value;
					break;
				}
			}
		if (match)
		{
			char	   *copy = pstrdup(match);
			List	   *names = NIL;

			/* SQL names, as create_pipeline checked them with parse_ident */
			if (!SplitIdentifierString(copy, '.', &names) || list_length(names) != 2)
			{
				*why = psprintf("The targets entry \"%s\" is not a schema-qualified table name.", match);
				return false;
			}
			*schema = linitial(names);
			*table = lsecond(names);
			return true;
		}
	}
	if (r->nparts == 2)
	{
		*schema = expand_part(&r->parts[0], m, slots, value_ok, why);
		if (*schema == NULL)
			return false;
		*table = expand_part(&r->parts[1], m, slots, value_ok, why);
		return *table != NULL;
	}
	if (r->nparts == 1)
	{
		char	   *full = expand_part(&r->parts[0], m, slots, value_ok, why);
		char	   *dot;

		if (full == NULL)
			return false;
		dot = strrchr(full, '.');
		if (dot == NULL)
		{
			*schema = "public";
			*table = full;
		}
		else
		{
			char	   *prev;

			*dot = '\0';
			*table = dot + 1;
			prev = strrchr(full, '.');
			*schema = prev ? prev + 1 : full;
		}
		return true;
	}
	if (OidIsValid(p->target))
	{
		*schema = get_namespace_name(get_rel_namespace(p->target));
		*table = get_rel_name(p->target);
		if (*schema && *table)
			return true;
	}
	*why = src ?
		psprintf("Neither the topic \"%s\" nor the source table \"%s\" is in the targets map.", m->topic, src) :
		psprintf("The topic \"%s\" is not in the targets map, and the value names no source schema and table.", m->topic);
	return false;
}

/* what ks_try_subxact runs: the checks of create_pipeline, then the open */
typedef struct OpenArgs
{
	KsPipeline *p;
	Oid			relid;
	KsTarget   *t;
} OpenArgs;

static void
open_checked(void *arg)
{
	OpenArgs   *a = arg;
	Oid			argtypes[4] = {OIDOID, TEXTARRAYOID, TEXTOID, TEXTOID};
	Datum		values[4];
	char		nulls[4] = {' ', ' ', ' ', ' '};
	List	   *keys = NIL;
	bool		isnull;
	Datum		d;

	values[0] = ObjectIdGetDatum(a->relid);
	if (a->p->key_columns != NIL)
	{
		int			n = list_length(a->p->key_columns);
		Datum	   *e = palloc(sizeof(Datum) * n);
		int			i = 0;
		ListCell   *lc;

		foreach(lc, a->p->key_columns)
			e[i++] = CStringGetTextDatum(lfirst(lc));
		values[1] = PointerGetDatum(construct_array(e, n, TEXTOID, -1, false, TYPALIGN_INT));
	}
	else
		nulls[1] = 'n';
	if (a->p->order_column)
		values[2] = CStringGetTextDatum(a->p->order_column);
	else
		nulls[2] = 'n';
	values[3] = CStringGetTextDatum(a->p->mode == KS_MODE_MERGE ? "merge" : "append");

	/* create_pipeline's checks of a target, as the owner: kind, privileges, key */
	ks_spi_exec("check a routed target",
				"SELECT kafka_sink._check_target($1::pg_catalog.regclass, $2, $3, $4)",
				4, argtypes, values, nulls, true, SPI_OK_SELECT);
	d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
	if (!isnull)
	{
		Datum	   *e;
		bool	   *en;
		int			n;

		deconstruct_array(DatumGetArrayTypeP(d), TEXTOID, -1, false, TYPALIGN_INT, &e, &en, &n);
		for (int i = 0; i < n; i++)
			if (!en[i])
				keys = lappend(keys, TextDatumGetCString(e[i]));
	}
	a->t = ks_target_open_rel(a->p, a->relid, keys);
}

/*
 * Errors of a target's checks that are the target's fault (its kind, a
 * privilege, a key, a column): the messages are quarantined.  Anything
 * else (a cancel, a lock timeout, a serialization failure, running out of
 * memory) fails the batch as before.
 */
static bool
is_target_error(int sqlerrcode)
{
	int			cls = ERRCODE_TO_CATEGORY(sqlerrcode);

	return cls == ERRCODE_SYNTAX_ERROR_OR_ACCESS_RULE_VIOLATION ||
		cls == ERRCODE_FEATURE_NOT_SUPPORTED ||
		cls == ERRCODE_DATA_EXCEPTION ||
		cls == ERRCODE_INVALID_SCHEMA_NAME ||
		sqlerrcode == ERRCODE_UNDEFINED_TABLE ||
		sqlerrcode == ERRCODE_RAISE_EXCEPTION;
}

/* whether the current role (the owner, or replay's caller) may use a schema */
static AclResult
namespace_usage(Oid nsp)
{
#if PG_VERSION_NUM >= 160000
	return object_aclcheck(NamespaceRelationId, nsp, GetUserId(), ACL_USAGE);
#else
	return pg_namespace_aclcheck(nsp, GetUserId(), ACL_USAGE);
#endif
}

/* Finds or opens the target called schema.table for this batch. */
static KsRouteEntry *
resolve(KsBatch *batch, HTAB *seen, const char *schema, const char *table)
{
	char	   *name = quote_qualified_identifier(schema, table);
	KsRouteEntry *e;
	bool		found;
	Oid			nsp;
	Oid			relid;
	OpenArgs	a;
	ErrorData  *edata;

	e = hash_search(seen, name, HASH_ENTER, &found);
	if (found)
		return e;
	e->target = -1;
	e->reason = KS_OK;
	e->detail = NULL;
	e->count = 0;

	nsp = get_namespace_oid(schema, true);
	relid = OidIsValid(nsp) ? get_relname_relid(table, nsp) : InvalidOid;
	if (!OidIsValid(relid))
	{
		e->reason = KS_NO_TARGET;
		e->detail = OidIsValid(nsp) ?
			psprintf("The target table %s does not exist.", name) :
			psprintf("The schema of the target table %s does not exist.", name);
		return e;
	}
	if (namespace_usage(nsp) != ACLCHECK_OK)
	{
		e->reason = KS_TARGET_REFUSED;
		e->detail = psprintf("permission denied for schema %s (target %s)", quote_identifier(schema), name);
		return e;
	}
	a.p = batch->pipeline;
	a.relid = relid;
	a.t = NULL;
	edata = ks_try_subxact(open_checked, &a);
	if (edata != NULL)
	{
		if (!is_target_error(edata->sqlerrcode))
			ReThrowError(edata);
		e->reason = KS_TARGET_REFUSED;
		e->detail = edata->detail ?
			psprintf("%s (%s)", edata->message, edata->detail) : pstrdup(edata->message);
		FreeErrorData(edata);
		return e;
	}
	e->target = batch->ntargets;
	/* room for the messages comes later (route_batch counts them first) */
	batch->ntargets++;
	batch->targets[e->target].target = a.t;
	return e;
}

static int
cmp_target_names(const void *a, const void *b)
{
	const KsBatchTarget *x = *(KsBatchTarget * const *) a;
	const KsBatchTarget *y = *(KsBatchTarget * const *) b;

	return strcmp(x->target->qualified_name, y->target->qualified_name);
}

/*
 * Sends each message of the batch to its target: batch->targets (opened,
 * checked, in the order of their names) with their messages in batch
 * order, batch->unrouted with the others, batch->row_of for all.
 */
void
ks_route_batch(KsBatch *batch)
{
	KsPipeline *p = batch->pipeline;
	KsRouting  *r = routing_of(p);
	HASHCTL		ctl;
	HTAB	   *seen;
	KsRouteEntry **dest = palloc0(sizeof(KsRouteEntry *) * Max(batch->nmsgs, 1));
	char	  **why = palloc0(sizeof(char *) * Max(batch->nmsgs, 1));
	char	  **wanted = palloc0(sizeof(char *) * Max(batch->nmsgs, 1));
	bool	   *skip = palloc0(sizeof(bool) * Max(batch->nmsgs, 1));
	KsSlotValue *slots = palloc0(sizeof(KsSlotValue) * Max(r->walk.nslots, 1));
	KsBatchTarget **order;
	int		   *newindex;
	KsBatchTarget *opened;
	int			nopened;

	memset(&ctl, 0, sizeof(ctl));
	ctl.keysize = 2 * NAMEDATALEN + 8;
	ctl.entrysize = sizeof(KsRouteEntry);
	ctl.hcxt = CurrentMemoryContext;
	seen = hash_create("kafka_sink routed targets", 16, &ctl, HASH_ELEM | HASH_STRINGS | HASH_CONTEXT);

	for (int i = 0; i < batch->nmsgs; i++)
	{
		KsMessage  *m = batch->msgs[i];
		bool		value_ok = false;
		char	   *schema,
				   *table,
				   *detail = NULL;
		char	   *bad;

		if (r->reads_value && m->value != NULL)
		{
			memset(slots, 0, sizeof(KsSlotValue) * Max(r->walk.nslots, 1));
			value_ok = ks_json_walk(&r->walk, m->value, m->value_len, slots, &detail) == KS_WALK_OK;
		}
		if (!name_target(p, r, m, slots, value_ok, &schema, &table, &why[i]))
		{
			/*
			 * The tombstone Debezium sends after each delete has no value to
			 * name a table from; the delete itself did the work, so it is
			 * nothing to apply (as the envelope says of a tombstone it gets),
			 * not a message without a target.
			 */
			if (m->value == NULL && p->envelope == &ks_envelope_debezium)
				skip[i] = true;
			continue;
		}
		if ((bad = bad_name_part("schema", schema)) != NULL ||
			(bad = bad_name_part("table", table)) != NULL)
		{
			why[i] = bad;
			continue;
		}
		wanted[i] = quote_qualified_identifier(schema, table);
		dest[i] = resolve(batch, seen, schema, table);
		dest[i]->count++;
	}

	/* the targets in the order of their names */
	nopened = batch->ntargets;
	opened = batch->targets;
	order = palloc(sizeof(KsBatchTarget *) * Max(nopened, 1));
	for (int k = 0; k < nopened; k++)
		order[k] = &opened[k];
	qsort(order, nopened, sizeof(KsBatchTarget *), cmp_target_names);
	newindex = palloc(sizeof(int) * Max(nopened, 1));
	batch->targets = palloc0(sizeof(KsBatchTarget) * (nopened + 1));
	batch->ntargets = 0;
	for (int k = 0; k < nopened; k++)
	{
		int			old = order[k] - opened;
		int			n = 0;
		HASH_SEQ_STATUS hs;
		KsRouteEntry *e;

		hash_seq_init(&hs, seen);
		while ((e = hash_seq_search(&hs)) != NULL)
			if (e->target == old)
				n = e->count;
		newindex[old] = k;
		(void) ks_batch_add_target(batch, opened[old].target, n);
	}

	batch->unrouted = palloc0(sizeof(KsRow) * Max(batch->nmsgs, 1));
	batch->nunrouted = 0;
	for (int i = 0; i < batch->nmsgs; i++)
	{
		KsMessage  *m = batch->msgs[i];

		if (dest[i] != NULL && dest[i]->target >= 0)
		{
			KsBatchTarget *bt = &batch->targets[newindex[dest[i]->target]];
			KsRow	   *row = &bt->rows[bt->nmsgs];

			bt->msgs[bt->nmsgs++] = m;
			row->msg = m;
			batch->row_of[i] = row;
		}
		else
		{
			KsRow	   *row = &batch->unrouted[batch->nunrouted++];

			row->msg = m;
			row->target_name = wanted[i];
			row->reason = skip[i] ? KS_OK : dest[i] ? dest[i]->reason : KS_NO_TARGET;
			row->detail = skip[i] ? NULL : dest[i] ? dest[i]->detail : why[i];
			row->skipped = skip[i];
			batch->row_of[i] = row;
		}
	}
}
