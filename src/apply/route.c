/*-------------------------------------------------------------------------
 *
 * route.c
 *		Routing: one pipeline writing many tables.  Each message of a batch
 *		is sent to one target table, named by the pipeline's targets map or
 *		by its target template expanded for the message; each table is
 *		opened once per batch, where it is first used, and checked once per
 *		table and catalog state (open_checked).
 *
 * Which table a message goes to, in this order:
 *   1. targets map, by the message's topic;
 *   2. targets map, by "<source.schema>.<source.table>" of the value;
 *   3. the target template, expanded (or the pipeline's plain target).
 * A message none of them names, or whose table does not exist, is
 * quarantined as no_target; a table that exists but that the pipeline may
 * not write (the checks of create_pipeline: kafka_sink._check_target) as
 * target_refused, as is a table of a delete_mode soft pipeline without
 * its mark column (_deleted boolean or _deleted_at timestamptz: each routed
 * table is checked as one target is) and one the pipeline's filter or
 * computed columns do not analyze against (transform.c, per table).  Both
 * replay once the table is fixed.  What one message
 * asks of DDL (create_targets: a table from its schema; evolve: columns for
 * it) and cannot get is that message's alone (schema_change_refused, or
 * no_target when it has no schema or key): a refused change, any error of
 * that DDL but a transient one, a lock held past
 * kafka_sink.ddl_lock_timeout; the table goes on for the other messages.
 *
 * A template is literal text and placeholders: {topic}, a header
 * ({headers.tenant}: its last value as UTF-8 text; a message without it
 * has no target), kafka.partition, kafka.offset or kafka.key (meta.c), or
 * a JSON path of the value ({source.table}; in a value wrapped as
 * {"schema":..., "payload":...} the path is looked up under payload when
 * it is absent at the top).  A dot outside braces separates the schema
 * from the table ('replica.{source.table}'; at most one such dot).  Without one, the
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
 * Over 1,000 lines on purpose: a routed batch's targets are named, created,
 * evolved and checked in one pass over its messages, and the DDL one
 * message asks for is that message's fault only here; split, the rule of
 * whose fault an error of that DDL is would live in two files.
 *
 *-------------------------------------------------------------------------
 */
#include "kafka_sink.h"
#include "pipeline.h"
#include "guc.h"
#include "catalog_guard.h"
#include "route.h"
#include "target.h"
#include "envelope_debezium.h"
#include "envelope_debezium_avro.h"
#include "apply.h"
#include "catalog.h"
#include "decode.h"
#include "envelope.h"
#include "errclass.h"
#include "hops.h"
#include "jsonwalk.h"
#include "transform.h"

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
#include "utils/guc.h"
#include "utils/hsearch.h"
#include "storage/lmgr.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"
#include "utils/varlena.h"

typedef enum KsPieceKind
{
	KS_PIECE_TEXT,
	KS_PIECE_TOPIC,
	KS_PIECE_FIELD,
	KS_PIECE_META				/* a header, kafka.topic/partition/offset/key */
} KsPieceKind;

typedef struct KsPiece
{
	KsPieceKind kind;
	char	   *text;			/* literal text, or the field's path */
	int			slot;			/* field: its slot in the walk */
	int			payload_slot;	/* field: the same under payload */
	KsMeta		meta;			/* meta: which (meta.c) */
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
	int			schema_slot;	/* create_targets, evolve: the embedded schema */
	/* Avro change events (route_value): */
	KsWalkPaths payload_walk;	/* the paths under payload, relative to it */
	int		   *payload_of;		/* ... each one's slot in walk */
	bool		avro_direct;	/* only source.schema and source.table: read from Avro */
	KsSlotValue *payload_slots; /* scratch: payload_walk's, or json_walk's, slots */
	/* JSON change events whose schema the envelope has cached (route_value): */
	KsWalkPaths json_walk;		/* every path under payload, relative to it */
	int		   *json_of;		/* ... each one's slot in walk */
	bool		json_direct;	/* no path into the schema or the whole payload */
} KsRouting;

/* per batch: a target name and what became of it */
typedef struct KsRouteEntry
{
	char		name[4 * NAMEDATALEN + 8];	/* hash key: the quoted, qualified name */
	char	   *schema;
	char	   *table;
	int			first;			/* its first message */
	int			target;			/* index into batch->targets, or -1 */
	KsReason	reason;
	char	   *detail;
	int			count;
} KsRouteEntry;

/*
 * How many messages of one table create_targets tries to create it from
 * in one batch, one after the other, when the first ones cannot (their
 * schema is refused, they have no key): the DDL one batch runs for a
 * missing table stays bounded.
 */
#define KS_CREATE_ATTEMPTS 8

bool
ks_routing_enabled(KsPipeline *p)
{
	return p->targets.target_template != NULL || p->targets.target_map != NIL;
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
			KsMeta		meta;

			if (end == NULL || (open != NULL && open < end))
				template_error(tpl, "A \"{\" is not closed by \"}\".");
			if (end == s + 1)
				template_error(tpl, "A placeholder is empty.");
			name = pnstrdup(s + 1, end - s - 1);
			if (strcmp(name, "topic") == 0)
				add_piece(&pieces, KS_PIECE_TOPIC, name, strlen(name));
			else if (ks_meta_parse(name, &meta) != KS_META_NONE)
			{
				if (meta.kind == KS_META_INVALID)
					template_error(tpl, psprintf("\"%s\" is no header (headers.<name>) nor one of kafka.topic, kafka.partition, kafka.offset and kafka.key.", name));
				if (meta.kind == KS_META_TIMESTAMP)
					template_error(tpl, "kafka.timestamp cannot name a table.");
				add_piece(&pieces, KS_PIECE_META, name, strlen(name));
			}
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

/*
 * kafka_sink._template_target(template text, topic text): the quoted,
 * qualified table a message of topic goes to by the template, by the
 * worker's rules, when the template reads nothing but the topic and
 * literal text; else (a field of the value, a header, Kafka's metadata)
 * NULL.  For create_pipeline and alter_pipeline: the routed tables that
 * exist already are checked then (filter, computed, delete_mode soft).
 */
PG_FUNCTION_INFO_V1(kafka_sink_template_target);
Datum
kafka_sink_template_target(PG_FUNCTION_ARGS)
{
	KsPipeline *p = palloc0(sizeof(KsPipeline));
	KsMessage	m = {0};
	char	   *why = NULL;
	char	   *name;

	p->targets.target_template = text_to_cstring(PG_GETARG_TEXT_PP(0));
	m.topic = text_to_cstring(PG_GETARG_TEXT_PP(1));
	m.partition = -1;
	m.offset = -1;
	m.timestamp_ms = -1;
	name = ks_route_name(p, &m, &why);
	if (name == NULL)
		PG_RETURN_NULL();
	PG_RETURN_TEXT_P(cstring_to_text(name));
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

	if (p->targets.routing)
		return p->targets.routing;
	old = MemoryContextSwitchTo(GetMemoryChunkContext(p));
	r = palloc0(sizeof(KsRouting));
	if (p->targets.target_template)
	{
		List	   *parts[2];

		r->nparts = parse_template(p->targets.target_template, parts);
		for (int k = 0; k < r->nparts; k++)
		{
			r->parts[k].npieces = list_length(parts[k]);
			r->parts[k].pieces = palloc(sizeof(KsPiece) * r->parts[k].npieces);
			i = 0;
			foreach(lc, parts[k])
			{
				KsPiece    *pc = &r->parts[k].pieces[i++];

				*pc = *(KsPiece *) lfirst(lc);
				if (pc->kind == KS_PIECE_META)
					(void) ks_meta_parse(pc->text, &pc->meta);
				if (pc->kind == KS_PIECE_FIELD)
				{
					pc->slot = slot_of(&paths, pc->text);
					pc->payload_slot = slot_of(&paths, psprintf("payload.%s", pc->text));
				}
			}
		}
	}
	r->src_schema[0] = r->src_schema[1] = r->src_table[0] = r->src_table[1] = -1;
	if (p->targets.target_map != NIL)
	{
		r->src_schema[0] = slot_of(&paths, "source.schema");
		r->src_schema[1] = slot_of(&paths, "payload.source.schema");
		r->src_table[0] = slot_of(&paths, "source.table");
		r->src_table[1] = slot_of(&paths, "payload.source.table");
	}
	r->schema_slot = -1;
	if (p->targets.create_targets || p->targets.evolve_add_columns)
		r->schema_slot = slot_of(&paths, "schema");
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
	/*
	 * The same paths for an Avro change event, whose JSON twin is
	 * {"schema": S, "payload": P}: those under payload are relative to the
	 * event itself.  Only source.schema and source.table, strings in Avro
	 * as in JSON, are read from the datum (route_value); any other path
	 * (into S, other fields of P, whose Avro renderings can differ from the
	 * twin's) needs the twin.
	 */
	r->payload_walk.paths = palloc0(sizeof(KsPath) * Max(r->walk.nslots, 1));
	r->payload_of = palloc(sizeof(int) * Max(r->walk.nslots, 1));
	r->avro_direct = true;
	for (i = 0; i < r->walk.nslots; i++)
	{
		KsPath	   *w = &r->walk.paths[i];

		if (strcmp(w->segs[0], "payload") == 0 && w->nsegs == 3 &&
			strcmp(w->segs[1], "source") == 0 &&
			(strcmp(w->segs[2], "schema") == 0 || strcmp(w->segs[2], "table") == 0))
		{
			KsPath	   *pp = &r->payload_walk.paths[r->payload_walk.nslots];

			pp->nsegs = 2;
			pp->segs = w->segs + 1;
			r->payload_of[r->payload_walk.nslots++] = i;
		}
		else if (strcmp(w->segs[0], "payload") == 0 || strcmp(w->segs[0], "schema") == 0)
			r->avro_direct = false;
	}
	/*
	 * For a JSON {"schema": S, "payload": P} whose S is a cached schema:
	 * every path under payload relative to P; the others (but the schema
	 * and the whole payload, which need the walk of the whole value) name
	 * nothing of such an event, whose only fields are schema and payload.
	 */
	r->json_walk.paths = palloc0(sizeof(KsPath) * Max(r->walk.nslots, 1));
	r->json_of = palloc(sizeof(int) * Max(r->walk.nslots, 1));
	r->json_direct = true;
	for (i = 0; i < r->walk.nslots; i++)
	{
		KsPath	   *w = &r->walk.paths[i];

		if (strcmp(w->segs[0], "schema") == 0 || (strcmp(w->segs[0], "payload") == 0 && w->nsegs == 1))
			r->json_direct = false;
		else if (strcmp(w->segs[0], "payload") == 0)
		{
			KsPath	   *pp = &r->json_walk.paths[r->json_walk.nslots];

			pp->nsegs = w->nsegs - 1;
			pp->segs = w->segs + 1;
			r->json_of[r->json_walk.nslots++] = i;
		}
	}
	r->payload_slots = palloc0(sizeof(KsSlotValue) * Max(r->walk.nslots, 1));
	MemoryContextSwitchTo(old);
	p->targets.routing = r;
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
			case KS_PIECE_META:
				{
					KsSlotValue sv;

					ks_meta_value(m, &pc->meta, &sv);
					v = ks_meta_text(&sv);
					if (v == NULL)
					{
						*why = sv.kind == KS_SLOT_ABSENT && pc->meta.header != NULL ?
							psprintf("The message has no header \"%s\", which the target template names.", pc->meta.header) :
							psprintf("The %s of the target template is absent, null or not UTF-8 text.", pc->text);
						return NULL;
					}
					appendStringInfoString(&b, v);
				}
				break;
			case KS_PIECE_FIELD:
				v = value_ok ? slot_text(slots, pc->slot, pc->payload_slot) : NULL;
				if (v == NULL)
				{
					*why = value_ok ?
						psprintf("The field \"%s\" of the target template is missing, null or not a string or number.", pc->text) :
						m->value == NULL ?
						psprintf("The message has no value (a tombstone), so the field \"%s\" of the target template cannot be read.", pc->text) :
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
 * An Avro value's fields for routing: the value as its JsonConverter twin
 * ({"schema", "payload"}, envelope_debezium_avro.c), walked as JSON, so
 * that {source.table}, the targets map by source table and create_targets
 * and evolve (the embedded schema) read Avro values as they read JSON
 * ones.  False when the value is not Avro or does not translate (its
 * decoding then says why).
 */
static bool
avro_value_walk(KsPipeline *p, KsRouting *r, KsMessage *m, KsSlotValue *slots, char **detail)
{
	KsReason	reason;
	Jsonb	   *j;
	char	   *text;

	if (!ks_cdc_avro(p, false))
		return false;
	j = ks_cdc_avro_event(p, false, m->value, m->value_len, &reason, detail);
	if (j == NULL)
		return false;
	text = JsonbToCString(NULL, &j->root, VARSIZE(j));
	return ks_json_walk(&r->walk, text, strlen(text), slots, detail) == KS_WALK_OK;
}

/*
 * The fields routing reads of message m's value into slots: true when the
 * value is an object they could be read from (else *detail may say why).
 * The result is that of walking the whole value or, for Avro, its JSON
 * twin; an Avro change event routed by source.schema and source.table
 * alone has those read from the Avro datum instead, so that it is
 * translated into its twin once, by the envelope, not twice.  (Paths
 * outside payload other than schema are absent from a twin: they stay
 * ABSENT, as the walk of the twin leaves them.)
 */
static bool
route_value(KsPipeline *p, KsRouting *r, KsMessage *m, KsSlotValue *slots, char **detail)
{
	KsSlotValue *ps = r->payload_slots;

	if (!ks_cdc_avro(p, false))
	{
		const char *p0,
				   *p1;
		char	   *d;

		/*
		 * A Debezium event {"schema": S, "payload": P} whose S the envelope
		 * has cached: P walked alone (S, ~80 % of the event, is not walked
		 * again), when it is an object; else the whole value, which
		 * decides as before.
		 */
		if (r->json_direct && p->contract.envelope == &ks_envelope_debezium &&
			ks_cdc_cached_payload(m->value, m->value_len, &p0, &p1) &&
			ks_json_walk(&r->json_walk, p0, p1 - p0, ps, &d) == KS_WALK_OK)
		{
			for (int j = 0; j < r->json_walk.nslots; j++)
				slots[r->json_of[j]] = ps[j];
			return true;
		}
		return ks_json_walk(&r->walk, m->value, m->value_len, slots, detail) == KS_WALK_OK;
	}
	if (!r->avro_direct)
		return avro_value_walk(p, r, m, slots, detail);
	memset(ps, 0, sizeof(KsSlotValue) * Max(r->payload_walk.nslots, 1));
	if (!ks_cdc_avro_fields(p, m->value, m->value_len, &r->payload_walk, ps))
		return avro_value_walk(p, r, m, slots, detail);
	for (int j = 0; j < r->payload_walk.nslots; j++)
		slots[r->payload_of[j]] = ps[j];
	return true;
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
	if (p->targets.target_map != NIL)
	{
		const char *ss = value_ok ? slot_text(slots, r->src_schema[0], r->src_schema[1]) : NULL;
		const char *st = value_ok ? slot_text(slots, r->src_table[0], r->src_table[1]) : NULL;
		const char *match = NULL;

		if (ss && st)
			src = psprintf("%s.%s", ss, st);
		foreach(lc, p->targets.target_map)
		{
			KsOption   *o = lfirst(lc);

			if (strcmp(o->name, m->topic) == 0)
			{
				match = o->value;
				break;
			}
		}
		if (match == NULL && src)
			foreach(lc, p->targets.target_map)
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
	if (OidIsValid(p->targets.target))
	{
		*schema = get_namespace_name(get_rel_namespace(p->targets.target));
		*table = get_rel_name(p->targets.target);
		if (*schema && *table)
			return true;
	}
	*why = src ?
		psprintf("Neither the topic \"%s\" nor the source table \"%s\" is in the targets map.", m->topic, src) :
		psprintf("The topic \"%s\" is not in the targets map, and the value names no source schema and table.", m->topic);
	return false;
}

/*
 * The quoted, qualified name of the table message m goes to by p's
 * routing (a plain target's own name when p does not route), or NULL with
 * *why.  The worker's own rules (name_target, bad_name_part), for
 * message_fate and message_fates (lineage.c): the table is only named,
 * not looked up.
 */
char *
ks_route_name(KsPipeline *p, KsMessage *m, char **why)
{
	KsRouting  *r = routing_of(p);
	KsSlotValue *slots = palloc0(sizeof(KsSlotValue) * Max(r->walk.nslots, 1));
	bool		value_ok = false;
	char	   *schema,
			   *table,
			   *detail = NULL,
			   *bad;

	if (r->reads_value && m->value != NULL)
		value_ok = ks_json_walk(&r->walk, m->value, m->value_len, slots, &detail) == KS_WALK_OK;
	if (!name_target(p, r, m, slots, value_ok, &schema, &table, why))
		return NULL;
	if ((bad = bad_name_part("schema", schema)) != NULL ||
		(bad = bad_name_part("table", table)) != NULL)
	{
		*why = bad;
		return NULL;
	}
	return quote_qualified_identifier(schema, table);
}

/* what ks_try_subxact runs: the checks of create_pipeline, then the open */
typedef struct OpenArgs
{
	KsPipeline *p;
	Oid			relid;
	KsTarget   *t;
} OpenArgs;


/* The pipeline's key_columns as a text[] argument of an SPI call, or NULL. */
static void
key_columns_arg(KsPipeline *p, Datum *value, char *null)
{
	int			n = list_length(p->targets.key_columns);
	Datum	   *e;
	int			i = 0;
	ListCell   *lc;

	if (n == 0)
	{
		*null = 'n';
		return;
	}
	e = palloc(sizeof(Datum) * n);
	foreach(lc, p->targets.key_columns)
		e[i++] = CStringGetTextDatum(lfirst(lc));
	*value = PointerGetDatum(construct_array(e, n, TEXTOID, -1, false, TYPALIGN_INT));
}

/* The mode as create_pipeline names it, for the checks and create_targets (a routed pipeline's: no function) */
static const char *
mode_name(KsMode mode)
{
	return mode == KS_MODE_MERGE ? "merge" : mode == KS_MODE_HISTORY ? "history" : "append";
}

/*
 * The checks' outcome, per routed table: a table that passed them passes
 * them again until something they read changes, so a worker checks it
 * once, not once per batch.  Kept per (pipeline, generation of its
 * definition, table, user): only a pass (a refusal is checked again in
 * every batch, as it is replayed).  Forgotten on an invalidation of that
 * table's relcache entry (ALTER TABLE, GRANT/REVOKE on it or its columns,
 * an index, a policy, a trigger, its drop), of any role or membership
 * (pg_authid, pg_auth_members: privileges through a role), of any schema
 * or function (the EXECUTE the filter and computed columns need), and
 * after
 * KS_CHECKED_TTL_MS in any case (what sends no invalidation: a type or a
 * domain a column uses).  A change committed before the batch's lock of
 * the table is seen by it (the lock processes the invalidations).
 */
#define KS_CHECKED_TTL_MS 10000

typedef struct CheckedKey
{
	int64		pipeline_id;
	Oid			relid;
	Oid			userid;
	int32		generation;
	int32		pad;			/* zeroed: the key is hashed as bytes */
} CheckedKey;

typedef struct CheckedEntry
{
	CheckedKey	key;
	TimestampTz checked_at;
	int			nkeys;
	char	  **keys;			/* _check_target's key columns, in checked_cxt */
} CheckedEntry;

static HTAB *checked = NULL;
static MemoryContext checked_cxt = NULL;

static void
checked_forget(Oid relid)
{
	HASH_SEQ_STATUS hs;
	CheckedEntry *c;

	if (checked == NULL)
		return;
	hash_seq_init(&hs, checked);
	while ((c = hash_seq_search(&hs)) != NULL)
		if (!OidIsValid(relid) || c->key.relid == relid)
		{
			for (int i = 0; i < c->nkeys; i++)
				pfree(c->keys[i]);
			if (c->keys)
				pfree(c->keys);
			(void) hash_search(checked, &c->key, HASH_REMOVE, NULL);
		}
}

static void
checked_relcache_cb(Datum arg, Oid relid)
{
	(void) arg;
	checked_forget(relid);
}

static void
checked_syscache_cb(Datum arg, int cacheid, uint32 hashvalue)
{
	(void) arg;
	(void) cacheid;
	(void) hashvalue;
	checked_forget(InvalidOid);
}

static void
checked_key(KsPipeline *p, Oid relid, CheckedKey *k)
{
	memset(k, 0, sizeof(*k));
	k->pipeline_id = p->id;
	k->relid = relid;
	k->userid = GetUserId();
	k->generation = p->generation;
}

/* the key columns of a table that passed its checks, as a List; false: check it */
static bool
checked_lookup(KsPipeline *p, Oid relid, List **keys)
{
	CheckedKey	k;
	CheckedEntry *c;

	if (checked == NULL)
		return false;
	checked_key(p, relid, &k);
	c = hash_search(checked, &k, HASH_FIND, NULL);
	if (c == NULL)
		return false;
	if (TimestampDifferenceExceeds(c->checked_at, GetCurrentTimestamp(), KS_CHECKED_TTL_MS))
	{
		checked_forget(relid);
		return false;
	}
	*keys = NIL;
	for (int i = 0; i < c->nkeys; i++)
		*keys = lappend(*keys, pstrdup(c->keys[i]));
	return true;
}

static void
checked_remember(KsPipeline *p, Oid relid, List *keys)
{
	CheckedKey	k;
	CheckedEntry *c;
	bool		found;
	ListCell   *lc;
	int			i = 0;

	if (checked == NULL)
	{
		HASHCTL		ctl;

		checked_cxt = AllocSetContextCreate(TopMemoryContext, "kafka_sink checked targets",
											ALLOCSET_SMALL_SIZES);
		memset(&ctl, 0, sizeof(ctl));
		ctl.keysize = sizeof(CheckedKey);
		ctl.entrysize = sizeof(CheckedEntry);
		ctl.hcxt = checked_cxt;
		checked = hash_create("kafka_sink checked targets", 16, &ctl,
							  HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
		CacheRegisterRelcacheCallback(checked_relcache_cb, (Datum) 0);
		CacheRegisterSyscacheCallback(AUTHOID, checked_syscache_cb, (Datum) 0);
		CacheRegisterSyscacheCallback(AUTHMEMROLEMEM, checked_syscache_cb, (Datum) 0);
		/* a schema, a function's EXECUTE (filter, computed) */
		CacheRegisterSyscacheCallback(NAMESPACEOID, checked_syscache_cb, (Datum) 0);
		CacheRegisterSyscacheCallback(PROCOID, checked_syscache_cb, (Datum) 0);
	}
	checked_key(p, relid, &k);
	c = hash_search(checked, &k, HASH_ENTER, &found);
	if (found)
	{
		for (int j = 0; j < c->nkeys; j++)
			pfree(c->keys[j]);
		if (c->keys)
			pfree(c->keys);
	}
	c->checked_at = GetCurrentTimestamp();
	c->nkeys = list_length(keys);
	c->keys = c->nkeys > 0 ? MemoryContextAlloc(checked_cxt, sizeof(char *) * c->nkeys) : NULL;
	foreach(lc, keys)
		c->keys[i++] = MemoryContextStrdup(checked_cxt, lfirst(lc));
}

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

	/* the lock first: a change committed before it is invalidated by then */
	LockRelationOid(a->relid, AccessShareLock);
	if (checked_lookup(a->p, a->relid, &keys))
	{
		a->t = ks_target_open_rel(a->p, a->relid, keys);
		return;
	}

	values[0] = ObjectIdGetDatum(a->relid);
	key_columns_arg(a->p, &values[1], &nulls[1]);
	if (a->p->targets.order_column)
		values[2] = CStringGetTextDatum(a->p->targets.order_column);
	else
		nulls[2] = 'n';
	values[3] = CStringGetTextDatum(mode_name(a->p->targets.mode));

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

		d = PointerGetDatum(PG_DETOAST_DATUM_COPY(d));
		deconstruct_array(DatumGetArrayTypeP(d), TEXTOID, -1, false, TYPALIGN_INT, &e, &en, &n);
		for (int i = 0; i < n; i++)
			if (!en[i])
				keys = lappend(keys, TextDatumGetCString(e[i]));
	}

	/* ... and its data contract (mappings, key format, tombstones, versions) */
	{
		Oid			ctypes[3] = {OIDOID, TEXTARRAYOID, INT8OID};
		Datum		cvalues[3] = {ObjectIdGetDatum(a->relid), d, Int64GetDatum(a->p->id)};
		char		cnulls[3] = {' ', isnull ? 'n' : ' ', ' '};

		/*
		 * delete_mode soft: this table's mark columns, as create_pipeline
		 * checks one target's (none, or a generated or mistyped one: the
		 * table does not fit, its messages are quarantined)
		 */
		ks_spi_exec("check a routed target's contract",
					"SELECT kafka_sink._check_contract($1::pg_catalog.regclass, $2, d.columns,"
					" CASE d.key_format WHEN 'avro' THEN 'json' ELSE d.key_format END,"
					" d.delete_on_tombstone, d.schema_version_field, d.schema_versions, d.event_id, d.mode),"
					" CASE WHEN d.delete_mode = 'soft' THEN kafka_sink._check_delete_mode(d.delete_mode, d.mode,"
					" $1::pg_catalog.regclass, false, d.envelope, d.delete_on_tombstone) END"
					" FROM kafka_sink.pipeline_definitions d WHERE d.id = $3",
					3, ctypes, cvalues, cnulls, true, SPI_OK_SELECT);
	}
	a->t = ks_target_open_rel(a->p, a->relid, keys);

	/*
	 * ... and the filter and computed columns, analyzed against this table
	 * (a column they read or compute missing, a type that does not fit:
	 * the table does not fit, its messages are quarantined)
	 */
	ks_transform_check_target(a->p, a->t);
	checked_remember(a->p, a->relid, keys);
}

/* create_targets: kafka_sink._create_target from one message */
/* An Avro value or key as its JsonConverter twin's text; NULL, with *why if asked, when it does not translate */
static char *
avro_twin(KsPipeline *p, bool is_key, const char *data, size_t len, char **why)
{
	KsReason	reason;
	char	   *detail = NULL;
	Jsonb	   *j = ks_cdc_avro_event(p, is_key, data, len, &reason, &detail);

	if (j != NULL)
		return JsonbToCString(NULL, &j->root, VARSIZE(j));
	if (why)
		*why = psprintf("The value does not decode: %s", detail ? detail : "?");
	return NULL;
}

typedef struct CreateArgs
{
	KsPipeline *p;
	const char *schema;
	const char *table;
	KsMessage  *m;
	char	   *why;			/* out: why it cannot, or NULL */
	char	   *avro_value;		/* Avro: the value's and key's JsonConverter */
	char	   *avro_key;		/* twins (NULL: none), made before run_users */
} CreateArgs;

static void
create_target(void *arg)
{
	CreateArgs *a = arg;
	Oid			argtypes[7] = {TEXTOID, TEXTOID, TEXTOID, TEXTOID, TEXTARRAYOID, TEXTOID, TEXTOID};
	Datum		values[7];
	char		nulls[7] = {' ', ' ', ' ', ' ', ' ', ' ', ' '};
	bool		isnull;
	Datum		d;

	values[0] = CStringGetTextDatum(a->schema);
	values[1] = CStringGetTextDatum(a->table);
	if (ks_cdc_avro(a->p, false))
	{
		/* Avro value and key: their JsonConverter twins, schemas embedded */
		values[2] = CStringGetTextDatum(a->avro_value);
		if (a->avro_key)
			values[3] = CStringGetTextDatum(a->avro_key);
		else
			nulls[3] = 'n';
	}
	else
	{
		values[2] = CStringGetTextDatum(pnstrdup(a->m->value, a->m->value_len));
		if (a->m->key && pg_verify_mbstr(GetDatabaseEncoding(), a->m->key, a->m->key_len, true))
			values[3] = CStringGetTextDatum(pnstrdup(a->m->key, a->m->key_len));
		else
			nulls[3] = 'n';
	}
	key_columns_arg(a->p, &values[4], &nulls[4]);
	values[5] = CStringGetTextDatum(mode_name(a->p->targets.mode));
	/* delete_mode soft: the table gets its mark column, _deleted_at */
	values[6] = CStringGetTextDatum(a->p->targets.mode == KS_MODE_MERGE && a->p->targets.soft_delete ?
									"soft" : "hard");
	ks_spi_exec("create a routed target",
				"SELECT kafka_sink._create_target($1, $2, $3, $4, $5, $6, $7)",
				7, argtypes, values, nulls, false, SPI_OK_SELECT);
	d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
	a->why = isnull ? NULL : TextDatumGetCString(d);
}

/* evolve: kafka_sink._evolve_target for one embedded schema */
typedef struct EvolveArgs
{
	KsPipeline *p;
	Oid			relid;
	const char *schema_json;
	char	   *why;			/* out: why the change is refused, or NULL */
} EvolveArgs;

static void
evolve_target(void *arg)
{
	EvolveArgs *a = arg;
	Oid			argtypes[6] = {OIDOID, TEXTOID, BOOLOID, TEXTARRAYOID, TEXTOID, INT4OID};
	Datum		values[6];
	char		nulls[6] = {' ', ' ', ' ', ' ', ' ', ' '};
	bool		isnull;
	Datum		d;

	values[0] = ObjectIdGetDatum(a->relid);
	values[1] = CStringGetTextDatum(a->schema_json);
	values[2] = BoolGetDatum(true);
	key_columns_arg(a->p, &values[3], &nulls[3]);
	if (a->p->targets.order_column)
		values[4] = CStringGetTextDatum(a->p->targets.order_column);
	else
		nulls[4] = 'n';
	values[5] = Int32GetDatum(ks_max_new_columns);
	ks_spi_exec("evolve a routed target",
				"SELECT kafka_sink._evolve_target($1::pg_catalog.regclass, $2, $3, $4, $5, $6)",
				6, argtypes, values, nulls, false, SPI_OK_SELECT);
	d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
	a->why = isnull ? NULL : TextDatumGetCString(d);
}

/*
 * Runs fn in a subtransaction with the catalog writes suspended: creating,
 * altering and checking a target can run the user's code (event triggers,
 * a type's functions), which must not write kafka_sink's catalog.
 */
static ErrorData *
run_users(void (*fn) (void *arg), void *arg)
{
	int			saved = ks_catalog_writes_suspend();
	ErrorData  *edata = NULL;

	PG_TRY();
	{
		edata = ks_try_subxact(fn, arg);
	}
	PG_FINALLY();
	{
		ks_catalog_writes_restore(saved);
	}
	PG_END_TRY();
	return edata;
}

/*
 * run_users for DDL a message asks for (create_targets, evolve): its lock
 * waits bounded by timeout_ms (kafka_sink.ddl_lock_timeout; 0: the
 * session's lock_timeout), so that a table another session holds costs
 * that message (quarantined, replayable), not the pipeline.
 */
static ErrorData *
run_ddl(void (*fn) (void *arg), void *arg, int timeout_ms)
{
	int			level = NewGUCNestLevel();
	ErrorData  *edata;

	if (timeout_ms > 0)
	{
		char		ms[32];

		snprintf(ms, sizeof(ms), "%d", timeout_ms);
		(void) set_config_option("lock_timeout", ms, PGC_USERSET, PGC_S_SESSION,
								 GUC_ACTION_SAVE, true, 0, false);
	}
	edata = run_users(fn, arg);
	AtEOXact_GUC(true, level);
	return edata;
}

/*
 * An error of DDL that one message asked for: whose fault it is.  Every
 * error is the message's (its schema asks for more columns than a table
 * takes, a name or type PostgreSQL refuses, a table someone else holds
 * locked past kafka_sink.ddl_lock_timeout, the owner's missing privilege
 * on a table that exists: the message is quarantined and can be replayed
 * once the cause is fixed), except a transient one other than the lock
 * timeout (deadlock, serialization failure, cancel, out of memory), which
 * is rethrown: the batch is rolled back and read again.
 */
static char *
ddl_error_detail(ErrorData *edata)
{
	char	   *detail;

	if (ks_errclass(edata->sqlerrcode) == KS_ERR_TRANSIENT &&
		edata->sqlerrcode != ERRCODE_LOCK_NOT_AVAILABLE)
		ReThrowError(edata);
	detail = edata->detail ?
		psprintf("%s (%s)", edata->message, edata->detail) : pstrdup(edata->message);
	FreeErrorData(edata);
	return detail;
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
		cls == ERRCODE_INTEGRITY_CONSTRAINT_VIOLATION ||
		sqlerrcode == ERRCODE_UNDEFINED_TABLE ||
		sqlerrcode == ERRCODE_RAISE_EXCEPTION;
}

/* the error of a check as a quarantine detail, or rethrown when not the target's fault */
static char *
target_error_detail(ErrorData *edata)
{
	char	   *detail;

	if (!is_target_error(edata->sqlerrcode))
		ReThrowError(edata);
	detail = edata->detail ?
		psprintf("%s (%s)", edata->message, edata->detail) : pstrdup(edata->message);
	FreeErrorData(edata);
	return detail;
}

/* whether the current role (the owner, or replay's caller) may use a schema */
static AclResult
namespace_usage(Oid nsp)
{
	return KS_NAMESPACE_ACLCHECK(nsp, GetUserId(), ACL_USAGE);
}

static Oid
lookup(const char *schema, const char *table, Oid *nsp)
{
	*nsp = get_namespace_oid(schema, true);
	return OidIsValid(*nsp) ? get_relname_relid(table, *nsp) : InvalidOid;
}

/*
 * create_targets: creates e's missing table from message i.  Returns the
 * table, or InvalidOid with message i's reason and detail set (its schema
 * or key cannot make the table) or with e's own (the owner may not create
 * there: no message of e can).  *timeout_ms: the lock wait of its DDL,
 * 1 ms after one timed out.
 */
static Oid
create_from(KsBatch *batch, KsRouteEntry *e, int i, KsReason *mreason, char **mdetail,
			int *timeout_ms)
{
	KsPipeline *p = batch->pipeline;
	CreateArgs	c = {p, e->schema, e->table, batch->msgs[i], NULL, NULL, NULL};
	ErrorData  *edata;
	Oid			nsp;
	Oid			relid;

	if (ks_cdc_avro(p, false))
	{
		/* out of run_users: the registry's schemas may be stored in the catalog */
		c.avro_value = avro_twin(p, false, c.m->value, c.m->value_len, &c.why);
		if (c.m->key != NULL && ks_cdc_avro(p, true))
			c.avro_key = avro_twin(p, true, c.m->key, c.m->key_len, NULL);
		else if (c.m->key != NULL &&
				 pg_verify_mbstr(GetDatabaseEncoding(), c.m->key, c.m->key_len, true))
			c.avro_key = pnstrdup(c.m->key, c.m->key_len);
	}
	else if (!pg_verify_mbstr(GetDatabaseEncoding(), c.m->value, c.m->value_len, true))
		c.why = pstrdup("The value is not text in the database encoding: there is no embedded schema to create the target from.");
	if (c.why == NULL && (edata = run_ddl(create_target, &c, *timeout_ms)) != NULL)
	{
		/*
		 * Another worker of the pipeline created it meanwhile: our CREATE
		 * waited for its commit, then failed on the catalog's unique index.
		 * Its table is visible once the invalidations of that commit are
		 * read; if it still is not (dropped again already), the batch is
		 * retried.
		 */
		if (edata->sqlerrcode == ERRCODE_DUPLICATE_TABLE ||
			edata->sqlerrcode == ERRCODE_UNIQUE_VIOLATION)
		{
			AcceptInvalidationMessages();
			relid = lookup(e->schema, e->table, &nsp);
			if (!OidIsValid(relid))
				ereport(ERROR,
						(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
						 errmsg("target %s was created and dropped while this batch created it", e->name),
						 errdetail("%s", edata->message)));
			FreeErrorData(edata);
			return relid;
		}
		/* the owner may not create there: the table's fault, not the message's */
		if (edata->sqlerrcode == ERRCODE_INSUFFICIENT_PRIVILEGE)
		{
			e->reason = KS_TARGET_REFUSED;
			e->detail = target_error_detail(edata);
			return InvalidOid;
		}
		if (edata->sqlerrcode == ERRCODE_LOCK_NOT_AVAILABLE)
			*timeout_ms = 1;	/* the next attempts do not wait again */
		mreason[i] = KS_SCHEMA_CHANGE_REFUSED;
		mdetail[i] = psprintf("The target table %s does not exist and cannot be created from this message: %s",
							  e->name, ddl_error_detail(edata));
		return InvalidOid;
	}
	if (c.why != NULL)
	{
		mreason[i] = KS_NO_TARGET;
		mdetail[i] = psprintf("The target table %s does not exist and cannot be created: %s", e->name, c.why);
		return InvalidOid;
	}
	return lookup(e->schema, e->table, &nsp);
}

/*
 * Resolves one target of the batch: the table, created (create_targets)
 * or evolved (evolve) when the pipeline says so, checked as
 * create_pipeline checks a target, and opened; or the reason its messages
 * are quarantined.  schemas[i]: the embedded schema of message i (NULL:
 * none), dest[i]: its entry.  What one message asked for and could not
 * get (a table made from its schema, columns for its schema) is that
 * message's own reason, mreason[i] and mdetail[i]: its table goes on for
 * the other messages.
 */
static void
resolve(KsBatch *batch, KsRouteEntry *e, KsRouteEntry **dest, char **schemas,
		KsReason *mreason, char **mdetail)
{
	KsPipeline *p = batch->pipeline;
	Oid			nsp;
	Oid			relid = lookup(e->schema, e->table, &nsp);
	ErrorData  *edata;
	OpenArgs	a;

	/* create_targets: from its messages in turn, until one can make it */
	if (!OidIsValid(relid) && OidIsValid(nsp) && p->targets.create_targets)
	{
		int			attempts = 0;
		int			timeout = ks_ddl_lock_timeout_ms;

		for (int i = e->first; i < batch->nmsgs && !OidIsValid(relid); i++)
		{
			if (dest[i] != e || batch->msgs[i]->value == NULL)
				continue;
			if (attempts++ == KS_CREATE_ATTEMPTS)
			{
				e->reason = KS_NO_TARGET;
				e->detail = psprintf("The target table %s does not exist: it could not be created from the batch's first %d messages for it (see their quarantine rows).",
									 e->name, KS_CREATE_ATTEMPTS);
				return;
			}
			relid = create_from(batch, e, i, mreason, mdetail, &timeout);
			if (e->reason != KS_OK)
				return;
		}
		if (!OidIsValid(relid) && attempts > 0)
		{
			/* every message of it has its own reason */
			e->reason = KS_NO_TARGET;
			e->detail = psprintf("The target table %s does not exist.", e->name);
			return;
		}
	}
	if (!OidIsValid(relid))
	{
		e->reason = KS_NO_TARGET;
		e->detail = OidIsValid(nsp) ?
			psprintf("The target table %s does not exist.", e->name) :
			psprintf("The schema of the target table %s does not exist.", e->name);
		return;
	}
	if (namespace_usage(nsp) != ACLCHECK_OK)
	{
		e->reason = KS_TARGET_REFUSED;
		e->detail = psprintf("permission denied for schema %s (target %s)", quote_identifier(e->schema), e->name);
		return;
	}

	/*
	 * evolve: each distinct embedded schema of its messages, once; a schema
	 * refused, or whose DDL fails, is refused for the messages carrying it
	 */
	if (p->targets.evolve_add_columns)
	{
		bool	   *done = palloc0(sizeof(bool) * batch->nmsgs);

		/*
		 * once one ALTER of this table timed out, the batch's next ones do
		 * not wait again: many schemas must not add up to a long stall
		 */
		int			timeout = ks_ddl_lock_timeout_ms;

		for (int i = e->first; i < batch->nmsgs; i++)
		{
			EvolveArgs	ev;
			char	   *why;

			if (dest[i] != e || schemas[i] == NULL || mreason[i] != KS_OK || done[i])
				continue;
			ev.p = p;
			ev.relid = relid;
			ev.schema_json = schemas[i];
			ev.why = NULL;
			if ((edata = run_ddl(evolve_target, &ev, timeout)) != NULL)
			{
				if (edata->sqlerrcode == ERRCODE_LOCK_NOT_AVAILABLE)
					timeout = 1;
				why = psprintf("Adding the columns of this message's schema to %s failed: %s",
							   e->name, ddl_error_detail(edata));
			}
			else
				why = ev.why;
			for (int j = i; j < batch->nmsgs; j++)
				if (dest[j] == e && schemas[j] != NULL && !done[j] && mreason[j] == KS_OK &&
					strcmp(schemas[j], schemas[i]) == 0)
				{
					done[j] = true;
					if (why != NULL)
					{
						mreason[j] = KS_SCHEMA_CHANGE_REFUSED;
						mdetail[j] = why;
					}
				}
		}
		pfree(done);
	}

	a.p = p;
	a.relid = relid;
	a.t = NULL;
	if ((edata = run_users(open_checked, &a)) != NULL)
	{
		e->reason = KS_TARGET_REFUSED;
		e->detail = target_error_detail(edata);
		return;
	}
	e->target = batch->ntargets;
	batch->targets[batch->ntargets++].target = a.t;
}

static int
cmp_entry_names(const void *a, const void *b)
{
	const KsRouteEntry *x = *(KsRouteEntry * const *) a;
	const KsRouteEntry *y = *(KsRouteEntry * const *) b;

	return strcmp(x->name, y->name);
}

/*
 * Sends each message of the batch to its target: batch->targets (opened,
 * checked, in the order of their names: targets are created, altered and
 * locked in that order, the same in every worker) with their messages in
 * batch order, batch->unrouted with the others, batch->row_of for all.
 */
void
ks_route_batch(KsBatch *batch)
{
	KsPipeline *p = batch->pipeline;
	KsRouting  *r = routing_of(p);
	HASHCTL		ctl;
	HTAB	   *seen;
	HASH_SEQ_STATUS hs;
	KsRouteEntry *e;
	KsRouteEntry **dest = palloc0(sizeof(KsRouteEntry *) * Max(batch->nmsgs, 1));
	char	  **why = palloc0(sizeof(char *) * Max(batch->nmsgs, 1));
	char	  **wanted = palloc0(sizeof(char *) * Max(batch->nmsgs, 1));
	bool	   *skip = palloc0(sizeof(bool) * Max(batch->nmsgs, 1));
	bool	   *looped = palloc0(sizeof(bool) * Max(batch->nmsgs, 1));
	char	  **schemas = palloc0(sizeof(char *) * Max(batch->nmsgs, 1));
	KsReason   *mreason = palloc0(sizeof(KsReason) * Max(batch->nmsgs, 1));
	char	  **mdetail = palloc0(sizeof(char *) * Max(batch->nmsgs, 1));
	KsSlotValue *slots = palloc0(sizeof(KsSlotValue) * Max(r->walk.nslots, 1));
	KsRouteEntry **entries;
	int			nentries = 0;
	int		   *count;

	memset(&ctl, 0, sizeof(ctl));
	ctl.keysize = 4 * NAMEDATALEN + 8;
	ctl.entrysize = sizeof(KsRouteEntry);
	ctl.hcxt = CurrentMemoryContext;
	seen = hash_create("kafka_sink routed targets", 16, &ctl, HASH_ELEM | HASH_STRINGS | HASH_CONTEXT);

	/* each message's target name (and embedded schema, for create and evolve) */
	for (int i = 0; i < batch->nmsgs; i++)
	{
		KsMessage  *m = batch->msgs[i];
		bool		value_ok = false;
		bool		found;
		char	   *schema,
				   *table,
				   *detail = NULL;
		char	   *bad;

		/* a loop through the outbox: not routed, nor read (hops.c) */
		if (ks_message_looped(m, &why[i]))
		{
			looped[i] = true;
			continue;
		}
		if (r->reads_value && m->value != NULL)
		{
			memset(slots, 0, sizeof(KsSlotValue) * Max(r->walk.nslots, 1));
			value_ok = route_value(p, r, m, slots, &detail);
		}
		if (!name_target(p, r, m, slots, value_ok, &schema, &table, &why[i]))
		{
			/*
			 * The tombstone Debezium sends after each delete has no value to
			 * name a table from; the delete itself did the work, so it is
			 * nothing to apply (as the envelope says of a tombstone it gets),
			 * not a message without a target.
			 */
			if (m->value == NULL && p->contract.envelope == &ks_envelope_debezium)
				skip[i] = true;
			continue;
		}
		if ((bad = bad_name_part("schema", schema)) != NULL ||
			(bad = bad_name_part("table", table)) != NULL)
		{
			why[i] = bad;
			continue;
		}
		if (value_ok && r->schema_slot >= 0 && slots[r->schema_slot].kind == KS_SLOT_COMPOSITE)
			schemas[i] = slots[r->schema_slot].text;
		wanted[i] = quote_qualified_identifier(schema, table);
		e = hash_search(seen, wanted[i], HASH_ENTER, &found);
		if (!found)
		{
			e->schema = pstrdup(schema);
			e->table = pstrdup(table);
			e->first = i;
			e->target = -1;
			e->reason = KS_OK;
			e->detail = NULL;
			e->count = 0;
			nentries++;
		}
		e->count++;
		dest[i] = e;
	}

	/* resolved in the order of their names */
	entries = palloc(sizeof(KsRouteEntry *) * Max(nentries, 1));
	nentries = 0;
	hash_seq_init(&hs, seen);
	while ((e = hash_seq_search(&hs)) != NULL)
		entries[nentries++] = e;
	qsort(entries, nentries, sizeof(KsRouteEntry *), cmp_entry_names);
	for (int k = 0; k < nentries; k++)
		resolve(batch, entries[k], dest, schemas, mreason, mdetail);

	/* the targets opened are in name order already: room for their messages */
	count = palloc0(sizeof(int) * Max(batch->ntargets, 1));
	for (int k = 0; k < nentries; k++)
		if (entries[k]->target >= 0)
			count[entries[k]->target] = entries[k]->count;
	{
		int			n = batch->ntargets;
		KsTarget  **opened = palloc(sizeof(KsTarget *) * Max(n, 1));

		for (int k = 0; k < n; k++)
			opened[k] = batch->targets[k].target;
		batch->ntargets = 0;
		for (int k = 0; k < n; k++)
			(void) ks_batch_add_target(batch, opened[k], count[k]);
	}

	batch->unrouted = palloc0(sizeof(KsRow) * Max(batch->nmsgs, 1));
	batch->nunrouted = 0;
	for (int i = 0; i < batch->nmsgs; i++)
	{
		KsMessage  *m = batch->msgs[i];
		bool		own = mreason[i] != KS_OK;	/* its own reason, not its table's */

		if (dest[i] != NULL && dest[i]->target >= 0 && !own)
		{
			KsBatchTarget *bt = &batch->targets[dest[i]->target];
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
			row->reason = skip[i] ? KS_OK : looped[i] ? KS_DEAD_LETTER_LOOP : own ? mreason[i] :
				dest[i] ? dest[i]->reason : KS_NO_TARGET;
			row->detail = skip[i] ? NULL : looped[i] ? why[i] : own ? mdetail[i] : dest[i] ? dest[i]->detail : why[i];
			row->skipped = skip[i];
			batch->row_of[i] = row;
		}
	}
}

/*
 * The routed table message m goes to, opened and checked as the worker
 * does (open_checked), for message_fate's questions (lineage.c); NULL when
 * routing names none, it does not exist or its checks refuse it.
 */
KsTarget *
ks_route_open(KsPipeline *p, KsMessage *m)
{
	char	   *why = NULL;
	char	   *name = ks_route_name(p, m, &why);
	List	   *names = NIL;
	Oid			nsp;
	OpenArgs	a;
	ErrorData  *edata;

	if (name == NULL)
		return NULL;
	if (!SplitIdentifierString(pstrdup(name), '.', &names) || list_length(names) != 2)
		return NULL;
	a.p = p;
	a.relid = lookup(linitial(names), lsecond(names), &nsp);
	a.t = NULL;
	if (!OidIsValid(a.relid) || namespace_usage(nsp) != ACLCHECK_OK)
		return NULL;
	if ((edata = run_users(open_checked, &a)) != NULL)
	{
		(void) target_error_detail(edata);
		return NULL;
	}
	return a.t;
}
