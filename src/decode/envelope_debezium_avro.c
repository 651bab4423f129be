/*-------------------------------------------------------------------------
 *
 * envelope_debezium_avro.c
 *		Avro-encoded Debezium change events (Confluent's AvroConverter):
 *		the value (and the key) in Confluent's wire format, or plain Avro
 *		with the pipeline's value_schema, turned into exactly the change
 *		event JsonConverter with schemas.enable=true would have written,
 *		{"schema": <Connect schema>, "payload": <event>}, which
 *		envelope_debezium.c then reads like any JSON change event.
 *
 * Why a translation and not a second reader: what a change event means
 * (ops, positions, keys, Debezium's value encodings) lives once, in
 * envelope_debezium.c; an Avro event lands exactly like its JSON twin
 * because after this file it IS its JSON twin.  The cost (the event as
 * JSON text, then jsonb) is the JSON path's cost.
 *
 * The Connect schema comes from the Avro writer schema as AvroConverter
 * wrote it: connect.name is the field's semantic name
 * (io.debezium.time.*, org.apache.kafka.connect.data.Decimal, ...),
 * connect.parameters its parameters (a Decimal's scale), ["null", T]
 * unions optional fields; a record without connect.name is named by its
 * Avro full name (io.debezium.data.VariableScaleDecimal is one).
 *
 * Values: avro_binary.c renders Avro's logical types as the text of their
 * PostgreSQL type (decimal -> a number, date, time-*, timestamp-*), which
 * envelope_debezium.c passes to the column's input function as it is;
 * bytes and fixed (without a decimal logical type), which it renders as
 * bytea's "\x..." text, are re-encoded as base64 here, as JsonConverter
 * writes them, so that every bytes encoding of Debezium (bytea columns,
 * precise decimals without a logical type, VariableScaleDecimal's value)
 * takes the JSON path's one conversion.
 *
 * Bounds: a named type is translated once; a reference to it copies its
 * translation, and a reference inside its own translation (a recursive
 * type, which Connect cannot express) is a struct with its name and no
 * fields; names are looked up in a hash table; the Connect schema is at
 * most CDC_CONNECT_BASE + CDC_CONNECT_PER_BYTE times the writer schema's
 * text, else the schema is refused (invalid_avro, cached like any refused
 * schema).  The values follow the message, never the schema: their work
 * is avro_binary.c's budget, their JSON at most 2 values a byte of the
 * datum plus 65536 (values of no bytes would otherwise cost a tree node
 * each, up to 8 a byte).
 *
 * Owns: Avro change events -> their JSON form.  Must not: interpret the
 * event (envelope_debezium.c).  Just over 1,000 lines: the translation and
 * the bounds on it (named types once, the Connect schema's and the
 * rendering's caps) are one piece.
 *
 *-------------------------------------------------------------------------
 */
#include "kafka_sink.h"
#include "pipeline.h"
#include "schema_registry.h"
#include "envelope_debezium_avro.h"
#include "envelope.h"
#include "format.h"
#include "avro_binary.h"

#include "common/base64.h"
#include "mb/pg_wchar.h"
#include "utils/builtins.h"
#include "utils/json.h"
#include "utils/memutils.h"

/* A named type of a writer schema. */
typedef struct CdcNamed
{
	const KsJson *def;			/* its definition */
	const char *ns;				/* the namespace its full name gives its members */
	char	   *connect;		/* its Connect schema's middle, once translated */
	bool		busy;			/* being translated (a reference now is recursion) */
} CdcNamed;

/* A writer schema, compiled for translation (cached per worker). */
typedef struct CdcAvroSchema
{
	char	   *text;			/* the schema's text: the cache key */
	char	   *invalid;		/* not a change event's schema: why */
	KsReason	invalid_reason; /* ... and the quarantine reason */
	KsJson	   *root;
	KsAvroNames named;			/* full name -> CdcNamed */
	char	   *connect;		/* the Connect schema as JSON text */
	size_t		connect_max;	/* its bound */
	bool		connect_too_large;
	const char *top_ns;			/* the top-level record's namespace */
	KsWalkPaths paths;			/* one per top-level field */
	const KsJson **ftypes;		/* the top-level fields' types */
	struct CdcAvroSchema *next;
} CdcAvroSchema;

static MemoryContext cache_cxt = NULL;
static CdcAvroSchema *cache = NULL;
static int	ncached = 0;

/* at most this many schemas are kept; then the cache starts over */
#define CDC_AVRO_CACHE_MAX 256

/* the Connect schema's bound: this plus this many times the Avro schema's text */
#define CDC_CONNECT_BASE (256 * 1024)
#define CDC_CONNECT_PER_BYTE 4

static const char *const av_primitives[] = {
	"null", "boolean", "int", "long", "float", "double", "bytes", "string", NULL
};

static bool
is_primitive(const char *s)
{
	for (int i = 0; av_primitives[i]; i++)
		if (strcmp(s, av_primitives[i]) == 0)
			return true;
	return false;
}

static const char *
jstr(const KsJson *obj, const char *key)
{
	KsJson	   *v = obj && obj->kind == KS_J_OBJECT ? ks_json_get(obj, key) : NULL;

	return v && v->kind == KS_J_STRING ? v->str : NULL;
}

/* ---- the schema's tree, reduced to what the translation reads ---- */

/* the members of a schema's objects this file reads (jstr, ks_json_get) */
static const char *const schema_keys[] = {
	"type", "name", "namespace", "fields", "items", "values", "logicalType",
	"precision", "scale", "connect.name", "connect.parameters", NULL
};

/*
 * Keeps of every object of the schema only the last of each member in
 * schema_keys (the one ks_json_get finds), so that each look-up costs a few
 * steps however many other members a hostile schema gives an object: the
 * translation of every value looks its type up again.  connect.parameters
 * is kept whole (emitted as it is).
 */
static void
prune(KsJson *j, int depth)
{
	if (j == NULL || depth > 64)
		return;
	if (j->kind == KS_J_ARRAY)
	{
		for (int i = 0; i < j->n; i++)
			prune(j->items[i], depth + 1);
		return;
	}
	if (j->kind != KS_J_OBJECT)
		return;
	{
		bool		seen[lengthof(schema_keys)] = {0};
		int			w = j->n;	/* kept members: [w, n), in order */
		int			kept;

		/* from the last member back, as ks_json_get reads (w never passes i) */
		for (int i = j->n - 1; i >= 0; i--)
			for (int k = 0; schema_keys[k]; k++)
				if (!seen[k] && strcmp(j->keys[i], schema_keys[k]) == 0)
				{
					seen[k] = true;
					w--;
					j->keys[w] = j->keys[i];
					j->items[w] = j->items[i];
					break;
				}
		kept = j->n - w;
		if (kept > 0 && w > 0)
		{
			memmove(j->keys, j->keys + w, sizeof(char *) * kept);
			memmove(j->items, j->items + w, sizeof(KsJson *) * kept);
		}
		j->n = kept;
		for (int i = 0; i < j->n; i++)
			if (strcmp(j->keys[i], "connect.parameters") != 0)
				prune(j->items[i], depth + 1);
	}
}

/* A copy of tree j in the current memory context (without text spans). */
static KsJson *
copy_tree(const KsJson *j)
{
	KsJson	   *c = palloc0(sizeof(KsJson));

	c->kind = j->kind;
	c->str = j->str ? pstrdup(j->str) : NULL;
	c->n = c->cap = j->n;
	if (j->kind == KS_J_ARRAY || j->kind == KS_J_OBJECT)
	{
		c->items = palloc(sizeof(KsJson *) * Max(j->n, 1));
		if (j->kind == KS_J_OBJECT)
			c->keys = palloc(sizeof(char *) * Max(j->n, 1));
		for (int i = 0; i < j->n; i++)
		{
			c->items[i] = copy_tree(j->items[i]);
			if (j->kind == KS_J_OBJECT)
				c->keys[i] = pstrdup(j->keys[i]);
		}
	}
	return c;
}

/* ---- named types ---- */

static char *namespace_of(const char *full);

/* the first definition of a name counts, as a reference finds it */
static void
add_named(CdcAvroSchema *s, const char *full, const KsJson *def)
{
	CdcNamed   *nd;

	if (ks_avro_names_get(&s->named, full) != NULL)
		return;
	nd = palloc0(sizeof(CdcNamed));
	nd->def = def;
	nd->ns = namespace_of(full);
	(void) ks_avro_names_add(&s->named, pstrdup(full), nd);
}

/* the full name of a named type's definition, from its enclosing namespace */
static char *
full_name(const KsJson *def, const char *ns)
{
	const char *name = jstr(def, "name");
	const char *space = jstr(def, "namespace");

	if (name == NULL)
		return NULL;
	if (strchr(name, '.'))
		return pstrdup(name);
	if (space == NULL)
		space = ns;
	return space && *space ? psprintf("%s.%s", space, name) : pstrdup(name);
}

/* the namespace a full name gives its members */
static char *
namespace_of(const char *full)
{
	const char *dot = full ? strrchr(full, '.') : NULL;

	return dot ? pnstrdup(full, dot - full) : pstrdup("");
}

static void
collect(CdcAvroSchema *s, const KsJson *j, const char *ns, int depth)
{
	const KsJson *type;

	if (j == NULL || depth > 64)
		return;
	if (j->kind == KS_J_ARRAY)
	{
		for (int i = 0; i < j->n; i++)
			collect(s, j->items[i], ns, depth + 1);
		return;
	}
	if (j->kind != KS_J_OBJECT)
		return;
	type = ks_json_get(j, "type");
	if (type == NULL)
		return;
	if (type->kind != KS_J_STRING)
	{
		collect(s, type, ns, depth + 1);
		return;
	}
	if (strcmp(type->str, "record") == 0 || strcmp(type->str, "error") == 0 ||
		strcmp(type->str, "enum") == 0 || strcmp(type->str, "fixed") == 0)
	{
		char	   *full = full_name(j, ns);
		KsJson	   *fields = ks_json_get(j, "fields");

		if (full == NULL)
			return;
		add_named(s, full, j);
		if (fields && fields->kind == KS_J_ARRAY)
		{
			char	   *inner = namespace_of(full);

			for (int i = 0; i < fields->n; i++)
				collect(s, ks_json_get(fields->items[i], "type"), inner, depth + 1);
		}
	}
	else if (strcmp(type->str, "array") == 0)
		collect(s, ks_json_get(j, "items"), ns, depth + 1);
	else if (strcmp(type->str, "map") == 0)
		collect(s, ks_json_get(j, "values"), ns, depth + 1);
}

static const KsJson *
lookup(const CdcAvroSchema *s, const char *name, const char *ns, const char **def_ns)
{
	CdcNamed   *nd = NULL;

	if (ns && *ns && !strchr(name, '.'))
	{
		char	   *q = psprintf("%s.%s", ns, name);

		nd = ks_avro_names_get(&s->named, q);
		pfree(q);
	}
	if (nd == NULL)
		nd = ks_avro_names_get(&s->named, name);
	if (nd == NULL)
		return NULL;
	*def_ns = nd->ns;
	return nd->def;
}

/*
 * A type as a node whose kind tells it: a string (a primitive's name), an
 * array (a union) or an object whose "type" is a string; *ns follows the
 * named types it goes through.  NULL when it names no known type.
 */
static const KsJson *
resolve(const CdcAvroSchema *s, const KsJson *j, const char **ns)
{
	for (int depth = 0; j != NULL && depth < 64; depth++)
	{
		if (j->kind == KS_J_STRING)
		{
			if (is_primitive(j->str))
				return j;
			j = lookup(s, j->str, *ns, ns);
			continue;
		}
		if (j->kind == KS_J_ARRAY)
			return j;
		if (j->kind != KS_J_OBJECT)
			return NULL;
		{
			const KsJson *type = ks_json_get(j, "type");

			if (type == NULL)
				return NULL;
			if (type->kind == KS_J_STRING)
			{
				const char *t = type->str;

				if (strcmp(t, "record") == 0 || strcmp(t, "error") == 0 ||
					strcmp(t, "enum") == 0 || strcmp(t, "fixed") == 0)
				{
					char	   *full = full_name(j, *ns);

					*ns = full ? namespace_of(full) : *ns;
				}
				else if (!is_primitive(t) && strcmp(t, "array") != 0 && strcmp(t, "map") != 0)
				{
					/* {"type": "SomeName"}: a reference */
					j = type;
					continue;
				}
				return j;
			}
			j = type;
		}
	}
	return NULL;
}

static const char *
type_name(const KsJson *j)
{
	if (j == NULL)
		return "null";
	if (j->kind == KS_J_STRING)
		return j->str;
	if (j->kind == KS_J_ARRAY)
		return "union";
	return jstr(j, "type");
}

/* the branch of a union that is not null (Debezium's optional fields), else NULL */
static const KsJson *
non_null_branch(const CdcAvroSchema *s, const KsJson *u, const char **ns)
{
	for (int i = 0; i < u->n; i++)
	{
		const char *bns = *ns;
		const KsJson *b = resolve(s, u->items[i], &bns);

		if (b && strcmp(type_name(b), "null") != 0)
		{
			*ns = bns;
			return b;
		}
	}
	return NULL;
}

/* ---- JSON text ---- */

static void
emit_json(StringInfo b, const KsJson *v)
{
	switch (v->kind)
	{
		case KS_J_NULL:
			appendStringInfoString(b, "null");
			break;
		case KS_J_BOOL:
		case KS_J_NUMBER:
			appendStringInfoString(b, v->str);
			break;
		case KS_J_STRING:
			escape_json(b, v->str);
			break;
		case KS_J_ARRAY:
			appendStringInfoChar(b, '[');
			for (int i = 0; i < v->n; i++)
			{
				if (i > 0)
					appendStringInfoChar(b, ',');
				emit_json(b, v->items[i]);
			}
			appendStringInfoChar(b, ']');
			break;
		case KS_J_OBJECT:
			appendStringInfoChar(b, '{');
			for (int i = 0; i < v->n; i++)
			{
				if (i > 0)
					appendStringInfoChar(b, ',');
				escape_json(b, v->keys[i]);
				appendStringInfoChar(b, ':');
				emit_json(b, v->items[i]);
			}
			appendStringInfoChar(b, '}');
			break;
	}
}

/* ---- the Connect schema (JsonConverter's "schema") ---- */

/* false, the schema marked too large, when b has grown past the bound */
static bool
connect_fits(CdcAvroSchema *s, StringInfo b, size_t more)
{
	if (s->connect_too_large || (size_t) b->len + more > s->connect_max)
	{
		s->connect_too_large = true;
		return false;
	}
	return true;
}

/*
 * The Connect schema of type j (a field's when field is not NULL).  A
 * named record's middle (its name, parameters and fields) is written once
 * and copied at every other reference (the header comment).
 */
static void
emit_connect(StringInfo b, CdcAvroSchema *s, const KsJson *j, const char *ns,
			 const char *field, int depth)
{
	const KsJson *n;
	bool		optional = false;
	const char *t;
	const char *ctype;
	const char *cname;
	const KsJson *params;
	CdcNamed   *nd = NULL;
	int			middle;

	if (!connect_fits(s, b, 0))
		return;
	n = resolve(s, j, &ns);

	if (n && n->kind == KS_J_ARRAY)
	{
		optional = true;
		n = non_null_branch(s, n, &ns);
	}
	t = type_name(n);
	if (t == NULL)
		t = "null";
	if (strcmp(t, "record") == 0 || strcmp(t, "error") == 0)
		ctype = "struct";
	else if (strcmp(t, "int") == 0)
		ctype = "int32";
	else if (strcmp(t, "long") == 0)
		ctype = "int64";
	else if (strcmp(t, "enum") == 0)
		ctype = "string";
	else if (strcmp(t, "fixed") == 0)
		ctype = "bytes";
	else
		ctype = t;
	appendStringInfoString(b, "{\"type\":");
	escape_json(b, ctype);
	appendStringInfo(b, ",\"optional\":%s", optional ? "true" : "false");
	middle = b->len;
	if (strcmp(ctype, "struct") == 0)
	{
		char	   *full = full_name(n, ns);

		nd = full ? ks_avro_names_get(&s->named, full) : NULL;
		if (nd && nd->def != n)
			nd = NULL;			/* a second definition of the name: inline, once */
	}
	if (nd && nd->connect)
	{
		if (!connect_fits(s, b, strlen(nd->connect)))
			return;
		appendStringInfoString(b, nd->connect);
		goto close;
	}
	cname = n && n->kind == KS_J_OBJECT ? jstr(n, "connect.name") : NULL;
	params = n && n->kind == KS_J_OBJECT ? ks_json_get(n, "connect.parameters") : NULL;
	if (cname == NULL && strcmp(ctype, "struct") == 0)
		cname = full_name(n, ns);
	if (cname == NULL && n && n->kind == KS_J_OBJECT && jstr(n, "logicalType"))
	{
		/*
		 * An Avro logical type without Connect's annotations (a producer
		 * other than AvroConverter): the Connect or Debezium name of the
		 * same type, for create_targets' column types.  The values are
		 * already their PostgreSQL text (avro_binary.c).
		 */
		const char *lt = jstr(n, "logicalType");
		KsJson	   *sc = ks_json_get(n, "scale");
		KsJson	   *pr = ks_json_get(n, "precision");

		if (strcmp(lt, "decimal") == 0)
		{
			cname = "org.apache.kafka.connect.data.Decimal";
			appendStringInfo(b, ",\"parameters\":{\"scale\":\"%s\"",
							 sc && sc->kind == KS_J_NUMBER ? sc->str : "0");
			if (pr && pr->kind == KS_J_NUMBER)
				appendStringInfo(b, ",\"connect.decimal.precision\":\"%s\"", pr->str);
			appendStringInfoChar(b, '}');
			params = NULL;
		}
		else if (strcmp(lt, "date") == 0)
			cname = "org.apache.kafka.connect.data.Date";
		else if (strcmp(lt, "time-millis") == 0)
			cname = "org.apache.kafka.connect.data.Time";
		else if (strcmp(lt, "time-micros") == 0)
			cname = "io.debezium.time.MicroTime";
		else if (strcmp(lt, "timestamp-millis") == 0 || strcmp(lt, "timestamp-micros") == 0)
			cname = "io.debezium.time.ZonedTimestamp";	/* an instant: timestamptz */
		else if (strcmp(lt, "local-timestamp-millis") == 0)
			cname = "org.apache.kafka.connect.data.Timestamp";
		else if (strcmp(lt, "local-timestamp-micros") == 0)
			cname = "io.debezium.time.MicroTimestamp";
		else if (strcmp(lt, "uuid") == 0)
			cname = "io.debezium.data.Uuid";
	}
	if (cname)
	{
		appendStringInfoString(b, ",\"name\":");
		escape_json(b, cname);
	}
	if (params && params->kind == KS_J_OBJECT)
	{
		appendStringInfoString(b, ",\"parameters\":");
		emit_json(b, params);
	}
	/* a record inside its own translation: its name only (Connect has no recursion) */
	if (strcmp(ctype, "struct") == 0 && depth < 64 && !(nd && nd->busy))
	{
		const KsJson *fields = ks_json_get(n, "fields");

		if (nd)
			nd->busy = true;
		appendStringInfoString(b, ",\"fields\":[");
		for (int i = 0; fields && fields->kind == KS_J_ARRAY && i < fields->n; i++)
		{
			const char *fname = jstr(fields->items[i], "name");

			if (fname == NULL)
				continue;
			if (i > 0)
				appendStringInfoChar(b, ',');
			emit_connect(b, s, ks_json_get(fields->items[i], "type"), ns, fname, depth + 1);
		}
		appendStringInfoChar(b, ']');
		if (nd)
		{
			nd->busy = false;
			nd->connect = pnstrdup(b->data + middle, b->len - middle);
		}
	}
close:
	if (field)
	{
		appendStringInfoString(b, ",\"field\":");
		escape_json(b, field);
	}
	appendStringInfoChar(b, '}');
}

/* ---- values (JsonConverter's "payload") ---- */

/* "\x..." (avro_binary.c's bytes) as base64 (JsonConverter's bytes); false if it is not hex */
static bool
emit_base64(StringInfo b, const char *hex)
{
	int			n;
	char	   *raw;
	char	   *enc;
	int			elen;

	if (strncmp(hex, "\\x", 2) != 0 || strlen(hex + 2) % 2 != 0)
		return false;
	n = strlen(hex + 2) / 2;
	raw = palloc(n + 1);
	if (hex_decode(hex + 2, n * 2, raw) != (uint64) n)
		return false;
	enc = palloc(pg_b64_enc_len(n) + 1);
	/* void *: the source is char * before 18, uint8 * from 18 */
	elen = pg_b64_encode((void *) raw, n, enc, pg_b64_enc_len(n));
	if (elen < 0)
		return false;
	enc[elen] = '\0';
	escape_json(b, enc);
	return true;
}

static void
emit_value(StringInfo b, const CdcAvroSchema *s, const KsJson *j, const char *ns,
		   const KsJson *v, int depth)
{
	const KsJson *n = resolve(s, j, &ns);
	const char *t;

	if (v->kind == KS_J_NULL)
	{
		appendStringInfoString(b, "null");
		return;
	}
	if (n && n->kind == KS_J_ARRAY)
		n = non_null_branch(s, n, &ns);
	t = type_name(n);
	if (t == NULL || depth > 64)
	{
		emit_json(b, v);
		return;
	}
	if ((strcmp(t, "record") == 0 || strcmp(t, "error") == 0) && v->kind == KS_J_OBJECT)
	{
		const KsJson *fields = ks_json_get(n, "fields");
		bool		first = true;

		appendStringInfoChar(b, '{');
		for (int i = 0; i < v->n; i++)
		{
			const KsJson *ft = NULL;
			const char *fname;

			/*
			 * avro_binary.c writes a record's fields in the schema's order:
			 * field i first, a search only if it is not (a record's work
			 * stays linear in its width).
			 */
			if (fields && fields->kind == KS_J_ARRAY && i < fields->n &&
				(fname = jstr(fields->items[i], "name")) != NULL && strcmp(fname, v->keys[i]) == 0)
				ft = ks_json_get(fields->items[i], "type");
			for (int f = 0; ft == NULL && fields && fields->kind == KS_J_ARRAY && f < fields->n; f++)
			{
				fname = jstr(fields->items[f], "name");
				if (fname && strcmp(fname, v->keys[i]) == 0)
					ft = ks_json_get(fields->items[f], "type");
			}
			if (!first)
				appendStringInfoChar(b, ',');
			first = false;
			escape_json(b, v->keys[i]);
			appendStringInfoChar(b, ':');
			if (ft)
				emit_value(b, s, ft, ns, v->items[i], depth + 1);
			else
				emit_json(b, v->items[i]);
		}
		appendStringInfoChar(b, '}');
		return;
	}
	if ((strcmp(t, "array") == 0 && v->kind == KS_J_ARRAY) ||
		(strcmp(t, "map") == 0 && v->kind == KS_J_OBJECT))
	{
		const KsJson *it = ks_json_get(n, strcmp(t, "array") == 0 ? "items" : "values");
		bool		arr = v->kind == KS_J_ARRAY;

		appendStringInfoChar(b, arr ? '[' : '{');
		for (int i = 0; i < v->n; i++)
		{
			if (i > 0)
				appendStringInfoChar(b, ',');
			if (!arr)
			{
				escape_json(b, v->keys[i]);
				appendStringInfoChar(b, ':');
			}
			emit_value(b, s, it, ns, v->items[i], depth + 1);
		}
		appendStringInfoChar(b, arr ? ']' : '}');
		return;
	}
	if ((strcmp(t, "bytes") == 0 || strcmp(t, "fixed") == 0) && v->kind == KS_J_STRING &&
		!(n->kind == KS_J_OBJECT && jstr(n, "logicalType") && strcmp(jstr(n, "logicalType"), "decimal") == 0) &&
		emit_base64(b, v->str))
		return;
	emit_json(b, v);
}

/* The JSON values of text (containers, members, elements), by its separators. */
static int64
json_values(const char *text)
{
	int64		n = 1;
	bool		in_string = false;

	for (const char *p = text; *p; p++)
	{
		if (in_string)
		{
			if (*p == '\\' && p[1] != '\0')
				p++;
			else if (*p == '"')
				in_string = false;
		}
		else if (*p == '"')
			in_string = true;
		else if (*p == ',' || *p == '[' || *p == '{')
			n++;
	}
	return n;
}

/* ---- the cache ---- */

/* The translation of writer schema text, or NULL with *reason and *detail. */
static CdcAvroSchema *
compile(const char *text, KsReason *reason, char **detail)
{
	CdcAvroSchema *s;
	MemoryContext old;
	char	   *err = NULL;
	const KsJson *fields;
	const char *ns = "";
	const KsJson *top = NULL;

	for (s = cache; s; s = s->next)
		if (strcmp(s->text, text) == 0)
			break;
	if (s != NULL)
	{
		if (s->invalid == NULL)
			return s;
		*reason = s->invalid_reason;
		*detail = pstrdup(s->invalid);
		return NULL;
	}
	if (cache_cxt == NULL)
		cache_cxt = AllocSetContextCreate(TopMemoryContext, "kafka_sink cdc avro schemas",
										  ALLOCSET_DEFAULT_SIZES);
	if (ncached >= CDC_AVRO_CACHE_MAX)
	{
		MemoryContextReset(cache_cxt);
		cache = NULL;
		ncached = 0;
	}
	old = MemoryContextSwitchTo(cache_cxt);
	s = palloc0(sizeof(*s));
	s->text = pstrdup(text);
	{
		/*
		 * Parsed aside and pruned, then only what is left kept: the
		 * members pruned away may be most of a hostile schema.
		 */
		MemoryContext parse_cxt = AllocSetContextCreate(CurrentMemoryContext,
														"kafka_sink cdc avro schema parse",
														ALLOCSET_DEFAULT_SIZES);
		KsJson	   *parsed;

		MemoryContextSwitchTo(parse_cxt);
		parsed = ks_json_parse(text, strlen(text), &err);
		if (parsed != NULL)
			prune(parsed, 0);
		MemoryContextSwitchTo(cache_cxt);
		s->root = parsed ? copy_tree(parsed) : NULL;
		err = err ? pstrdup(err) : NULL;
		MemoryContextDelete(parse_cxt);
	}
	s->invalid_reason = KS_NOT_AN_OBJECT;
	if (s->root == NULL)
		s->invalid = psprintf("the writer schema is not JSON: %s", err ? err : "?");
	else
	{
		collect(s, s->root, "", 0);
		top = resolve(s, s->root, &ns);
		if (top == NULL || strcmp(type_name(top), "record") != 0)
			s->invalid = pstrdup("the writer schema is not a record");
	}
	if (s->invalid == NULL)
	{
		StringInfoData b;

		s->connect_max = CDC_CONNECT_BASE + CDC_CONNECT_PER_BYTE * strlen(text);
		initStringInfo(&b);
		emit_connect(&b, s, s->root, "", NULL, 0);
		s->connect = b.data;
		if (s->connect_too_large)
		{
			s->invalid = psprintf("its Connect schema would be larger than %zu bytes (%d kB plus %d times the writer schema's %zu bytes): named types referenced too often",
								  s->connect_max, CDC_CONNECT_BASE / 1024, CDC_CONNECT_PER_BYTE, strlen(text));
			s->invalid_reason = KS_INVALID_AVRO;
			pfree(b.data);
			s->connect = NULL;
		}
	}
	if (s->invalid)
	{
		/* kept too: the next message of this schema is refused without work */
		s->next = cache;
		cache = s;
		ncached++;
		MemoryContextSwitchTo(old);
		*reason = s->invalid_reason;
		*detail = pstrdup(s->invalid);
		return NULL;
	}
	s->top_ns = pstrdup(ns);
	fields = ks_json_get(top, "fields");
	s->paths.nslots = fields && fields->kind == KS_J_ARRAY ? fields->n : 0;
	s->paths.paths = palloc0(sizeof(KsPath) * Max(s->paths.nslots, 1));
	s->ftypes = palloc0(sizeof(KsJson *) * Max(s->paths.nslots, 1));
	for (int i = 0; i < s->paths.nslots; i++)
	{
		const char *fname = jstr(fields->items[i], "name");

		s->paths.paths[i].nsegs = 1;
		s->paths.paths[i].segs = palloc(sizeof(char *));
		s->paths.paths[i].segs[0] = pstrdup(fname ? fname : "");
		s->ftypes[i] = ks_json_get(fields->items[i], "type");
	}
	s->next = cache;
	cache = s;
	ncached++;
	MemoryContextSwitchTo(old);
	return s;
}

/* ---- the entry points ---- */

bool
ks_cdc_avro(KsPipeline *p, bool is_key)
{
	if (is_key)
		return p->contract.key_format == KS_KEY_AVRO;
	return p->contract.value_fmt != NULL && strcmp(p->contract.value_fmt->name, "avro") == 0;
}

/*
 * The writer schema of the Avro event (or key) in *data, with *data and
 * *len past the wire frame; NULL with *reason and *detail when there is
 * none or it is no Avro schema.
 */
static KsSchemaEntry *
writer_schema(KsPipeline *p, bool is_key, const char **data, size_t *len,
			  KsReason *reason, char **detail)
{
	const char *what = is_key ? "the key" : "the value";
	KsSchemaEntry *e;

	if (!is_key && p->contract.value_schema != NULL)
		e = ks_schema_inline(p->contract.value_schema);
	else
	{
		int32		id;

		if (p->contract.registry == NULL)
		{
			*reason = KS_NOT_WIRE_FORMAT;
			*detail = psprintf("the pipeline has no schema_registry to read %s's schema id from", what);
			return NULL;
		}
		if (!ks_wire_frame(*data, *len, &id, detail))
		{
			*reason = KS_NOT_WIRE_FORMAT;
			return NULL;
		}
		e = ks_schema_by_id(p->contract.registry, id);
		if (e == NULL)
		{
			*reason = KS_UNKNOWN_SCHEMA_ID;
			*detail = psprintf("schema id %d of %s is not in the schema registry", id, what);
			return NULL;
		}
		*data += 5;
		*len -= 5;
	}
	if (e->avro == NULL)
	{
		*reason = KS_INVALID_AVRO;
		*detail = e->invalid ? psprintf("schema id %d is not a valid Avro schema: %s", e->id, e->invalid) :
			psprintf("schema id %d is a %s schema, not Avro", e->id, e->type);
		return NULL;
	}
	return e;
}

/*
 * Routing's read of an Avro change event (route.c): the values at paths,
 * fields of the event itself (source.table), decoded straight from the
 * datum without translating the event into its JSON twin.  False when
 * the value does not decode: the translation then says why.
 */
bool
ks_cdc_avro_fields(KsPipeline *p, const char *data, size_t len, const KsWalkPaths *paths,
				   KsSlotValue *out)
{
	KsReason	reason;
	char	   *why = NULL;
	KsSchemaEntry *e = writer_schema(p, false, &data, &len, &reason, &why);

	if (e == NULL || compile(e->text, &reason, &why) == NULL)
		return false;
	return ks_avro_decode(e->avro, paths, NULL, NULL, -1, data, len, out, &why) == KS_AVRO_OK;
}

/*
 * The change event (or key) in data as the text (in the database's
 * encoding) of JsonConverter's {"schema", "payload"}; NULL with *reason and *detail when it is no Avro
 * record of a known schema.  A registry out of reach raises the ERROR the
 * worker retries (schema_registry.c).
 */
char *
ks_cdc_avro_event_text(KsPipeline *p, bool is_key, const char *data, size_t len,
					   KsReason *reason, char **detail)
{
	const char *what = is_key ? "the key" : "the value";
	KsSchemaEntry *e;
	CdcAvroSchema *s;
	KsSlotValue *out;
	char	   *why = NULL;
	KsAvroResult r;
	StringInfoData b;
	bool		first = true;
	char	   *text;

	e = writer_schema(p, is_key, &data, &len, reason, detail);
	if (e == NULL)
		return NULL;
	s = compile(e->text, reason, &why);
	if (s == NULL)
	{
		*detail = psprintf(*reason == KS_NOT_AN_OBJECT ? "%s's schema (id %d) is no change event: %s" :
						   "%s's schema (id %d) cannot be read: %s", what, e->id, why);
		return NULL;
	}
	out = palloc0(sizeof(KsSlotValue) * Max(s->paths.nslots, 1));
	r = ks_avro_decode(e->avro, &s->paths, NULL, NULL, -1, data, len, out, &why);
	if (r != KS_AVRO_OK)
	{
		*reason = r == KS_AVRO_NOT_A_RECORD ? KS_NOT_AN_OBJECT : KS_INVALID_AVRO;
		*detail = e->id >= 0 ? psprintf("%s does not decode with schema id %d: %s", what, e->id, why) :
			psprintf("%s does not decode with value_schema: %s", what, why);
		return NULL;
	}

	/*
	 * Each JSON value becomes a node of the trees below (some hundred bytes,
	 * twice).  Values that take no byte (nulls, empty records: up to 8
	 * array items a byte) are bounded here: at most 2 values a byte of the
	 * datum plus 65536, which an event whose values take a byte each keeps.
	 */
	{
		int64		values = 0;
		int64		max_values = 2 * (int64) len + 65536;

		for (int i = 0; i < s->paths.nslots; i++)
			if (out[i].kind == KS_SLOT_COMPOSITE)
				values += json_values(out[i].text);
		if (values > max_values)
		{
			*reason = KS_INVALID_AVRO;
			*detail = psprintf("%s renders to more JSON values (%lld) than 2 a byte of its %zu bytes plus 65536 allow (values that take no bytes)",
							   what, (long long) values, len);
			return NULL;
		}
	}

	initStringInfo(&b);
	appendStringInfo(&b, "{\"schema\":%s,\"payload\":{", s->connect);
	for (int i = 0; i < s->paths.nslots; i++)
	{
		KsJson		v = {0};
		KsJson	   *vp = &v;

		switch (out[i].kind)
		{
			case KS_SLOT_ABSENT:
				continue;
			case KS_SLOT_NULL:
				v.kind = KS_J_NULL;
				break;
			case KS_SLOT_STRING:
				v.kind = KS_J_STRING;
				v.str = out[i].text;
				break;
			case KS_SLOT_SCALAR:
				v.kind = KS_J_NUMBER;	/* a token, written as it is */
				v.str = out[i].text;
				break;
			case KS_SLOT_COMPOSITE:
				vp = ks_json_parse(out[i].text, strlen(out[i].text), &why);
				if (vp == NULL)
				{
					*reason = KS_INVALID_AVRO;
					*detail = psprintf("%s: field \"%s\" does not render as JSON: %s", what,
									   s->paths.paths[i].segs[0], why);
					return NULL;
				}
				break;
			default:
				continue;		/* no direct values were asked for */
		}
		if (!first)
			appendStringInfoChar(&b, ',');
		first = false;
		escape_json(&b, s->paths.paths[i].segs[0]);
		appendStringInfoChar(&b, ':');
		emit_value(&b, s, s->ftypes[i], s->top_ns, vp, 0);
	}
	appendStringInfoString(&b, "}}");
	text = b.data;
	if (GetDatabaseEncoding() != PG_UTF8)
		text = pg_any_to_server(text, b.len, PG_UTF8);
	*reason = KS_OK;
	return text;
}

/* the same as jsonb (routing, create_targets) */
Jsonb *
ks_cdc_avro_event(KsPipeline *p, bool is_key, const char *data, size_t len,
				  KsReason *reason, char **detail)
{
	char	   *text = ks_cdc_avro_event_text(p, is_key, data, len, reason, detail);

	if (text == NULL)
		return NULL;
	return DatumGetJsonbP(DirectFunctionCall1(jsonb_in, CStringGetDatum(text)));
}
