/*-------------------------------------------------------------------------
 *
 * avro_binary.c
 *		Avro writer schemas (compiled from their JSON text) and a decoder of
 *		Avro binary data into the field-path slots that decode.c converts
 *		into columns, exactly as it converts the slots of a JSON message.
 *
 * Why a decoder of our own: Apache Avro's C library (libavro 1.11 on
 * Debian 12) drops logical types when it parses a schema, so it cannot
 * tell a decimal from bytes or a timestamp from a long; and its generic
 * values allocate per field.  This decoder reads the binary encoding with
 * the writer's schema in one pass, renders only the values a path asks
 * for, and skips the rest.  test/fuzz/fuzz_avro.c checks it differentially
 * against libavro (the same bytes accepted, the same values).
 *
 * Fields map to columns by name: a message written with any writer schema
 * lands by its own field names, so a field added (old messages lack it:
 * the column's default) or removed, or an int widened to long, needs no
 * reader schema and no resolution.
 *
 * Value texts: numbers and booleans as JSON tokens (SCALAR); strings,
 * enums, bytes and fixed ("\x" + hex, bytea's input) as STRING; logical
 * types as the text of their PostgreSQL type (decimal -> numeric; date;
 * time; timestamp-* -> "... +00"; local-timestamp-* without a zone; uuid
 * as its string); records and maps as JSON objects, arrays as JSON arrays
 * (COMPOSITE) or, for an array column, as a PostgreSQL array literal.
 *
 * Limits, so that a hostile schema or frame costs time and memory
 * bounded by their sizes: a schema is compiled in one pass, each named
 * type once (a reference is a pointer to it, so a recursive type is
 * walked as deep as the data goes, never expanded), its names looked up
 * in a hash table (KsAvroNames); a datum's decoding has 64 levels of
 * nesting, a budget of array and map items proportional to the input
 * (8 a byte, plus 1024), and a budget of work (a node visited is 1, a
 * field name written is its length) of 32 a byte of the datum plus 2 a
 * byte of the schema's text plus 65536, which bounds what values that
 * take no bytes (null, empty records, chains of records of them) can
 * cost; every length is checked against the bytes left.  An overrun is
 * an error of the datum (invalid_avro), never of the process.
 *
 * Over 1,000 lines on purpose: the schema compiler and the decoder share
 * one representation and one set of limits, and are fuzzed as one unit
 * without the backend (test/fuzz/fuzz_avro.c); split, the bounds above
 * would be kept in two places.
 *
 * Owns: Avro schemas and the binary encoding.  Must not: use the backend
 * beyond palloc and src/common (it is built without it for test/fuzz),
 * know columns, the catalog or the registry (schema_registry.c).
 *
 *-------------------------------------------------------------------------
 */
#ifdef FRONTEND
#include "postgres_fe.h"
#else
#include "postgres.h"
#endif

#include <math.h>

#include "common/hashfn.h"
#include "common/jsonapi.h"
#include "common/shortest_dec.h"
#include "lib/stringinfo.h"
#include "mb/pg_wchar.h"

#include "avro_binary.h"
#include "slot_text.h"

#ifndef FRONTEND
#include "catalog/pg_type.h"
#include "common/int.h"
#include "datatype/timestamp.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"
#endif

#define AV_MAX_DEPTH 64

/* the work budget of one datum (see the header comment) */
#define AV_WORK_PER_BYTE 32
#define AV_WORK_PER_SCHEMA_BYTE 2
#define AV_WORK_BASE 65536

/* ================================================================
 * Tables of names
 * ================================================================ */

static uint32
name_hash(const char *name)
{
	return hash_bytes((const unsigned char *) name, (int) strlen(name));
}

void *
ks_avro_names_get(const KsAvroNames *t, const char *name)
{
	uint32		mask;

	if (t->cap == 0)
		return NULL;
	mask = (uint32) t->cap - 1;
	for (uint32 i = name_hash(name) & mask;; i = (i + 1) & mask)
	{
		if (t->keys[i] == NULL)
			return NULL;
		if (strcmp(t->keys[i], name) == 0)
			return t->vals[i];
	}
}

bool
ks_avro_names_add(KsAvroNames *t, const char *name, void *val)
{
	uint32		mask;
	uint32		i;

	if (ks_avro_names_get(t, name) != NULL)
		return false;
	if ((t->n + 1) * 2 > t->cap)
	{
		/* at most half full: probes stay short */
		KsAvroNames old = *t;

		t->cap = old.cap ? old.cap * 2 : 16;
		t->n = 0;
		t->keys = palloc0(sizeof(char *) * t->cap);
		t->vals = palloc0(sizeof(void *) * t->cap);
		for (int k = 0; k < old.cap; k++)
			if (old.keys[k] != NULL)
				(void) ks_avro_names_add(t, old.keys[k], old.vals[k]);
		if (old.cap)
		{
			pfree(old.keys);
			pfree(old.vals);
		}
	}
	mask = (uint32) t->cap - 1;
	for (i = name_hash(name) & mask; t->keys[i] != NULL; i = (i + 1) & mask)
		;
	t->keys[i] = name;
	t->vals[i] = val;
	t->n++;
	return true;
}

/* ================================================================
 * The schema's JSON tree (jsontree.c) with the Avro parse's checks
 * ================================================================ */

KsJson *
ks_json_parse(const char *text, size_t len, char **errmsg)
{
	char	   *copy;

	*errmsg = NULL;
	if (pg_encoding_verifymbstr(PG_UTF8, text, (int) len) != (int) len)
	{
		*errmsg = pstrdup("not valid UTF-8");
		return NULL;
	}
	if (ks_json_nests_deeper(text, len, AV_MAX_DEPTH))
	{
		*errmsg = psprintf("nested more than %d levels deep", AV_MAX_DEPTH);
		return NULL;
	}
	copy = pnstrdup(text, len);
	if (strlen(copy) != len)
	{
		*errmsg = pstrdup("contains a NUL byte");
		return NULL;
	}
	return ks_json_tree(copy, len, PG_UTF8, errmsg);
}

/* ================================================================
 * Schemas
 * ================================================================ */

typedef enum AvType
{
	AV_NULL,
	AV_BOOLEAN,
	AV_INT,
	AV_LONG,
	AV_FLOAT,
	AV_DOUBLE,
	AV_BYTES,
	AV_STRING,
	AV_RECORD,
	AV_ENUM,
	AV_ARRAY,
	AV_MAP,
	AV_UNION,
	AV_FIXED
} AvType;

typedef enum AvLogical
{
	LT_NONE,
	LT_DECIMAL,
	LT_DATE,
	LT_TIME_MILLIS,
	LT_TIME_MICROS,
	LT_TS_MILLIS,
	LT_TS_MICROS,
	LT_LTS_MILLIS,
	LT_LTS_MICROS,
	LT_UUID
} AvLogical;

typedef struct AvNode
{
	AvType		type;
	AvLogical	logical;
	int			scale;			/* decimal */
	char	   *name;			/* full name of a named type */
	int			n;				/* fields, symbols, branches */
	char	  **names;			/* field names, enum symbols */
	struct AvNode **children;	/* field types, branches; [0] items/values */
	int64		size;			/* fixed */
	int			width;			/* records: n; unions: the most of their records' */
} AvNode;

struct KsAvroSchema
{
	AvNode	   *root;
	size_t		text_len;		/* the schema's text: its part of the work budget */
};

typedef struct SchemaParse
{
	KsAvroNames named;			/* the named types defined so far, by full name */
	char	   *err;
} SchemaParse;

static const char *const primitive_names[] = {
	"null", "boolean", "int", "long", "float", "double", "bytes", "string", NULL
};

static AvNode *parse_schema(SchemaParse *sp, const KsJson *j, const char *ns, int depth);

static char *
full_name(const char *name, const char *ns)
{
	if (strchr(name, '.') != NULL || ns == NULL || ns[0] == '\0')
		return pstrdup(name);
	return psprintf("%s.%s", ns, name);
}

static AvNode *
find_named(SchemaParse *sp, const char *name, const char *ns)
{
	char	   *full = full_name(name, ns);
	AvNode	   *n = ks_avro_names_get(&sp->named, full);

	pfree(full);
	if (n == NULL && strchr(name, '.') == NULL)
		n = ks_avro_names_get(&sp->named, name);
	return n;
}

static bool
valid_name(const char *s)
{
	if (!((*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') || *s == '_'))
		return false;
	for (s++; *s; s++)
		if (!((*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') || *s == '_' ||
			  (*s >= '0' && *s <= '9') || *s == '.'))
			return false;
	return true;
}

/* The name and namespace of a named type; registers it before its body. */
static AvNode *
named_node(SchemaParse *sp, const KsJson *j, AvType type, const char **ns)
{
	KsJson	   *name = ks_json_get(j, "name");
	KsJson	   *nsj = ks_json_get(j, "namespace");
	AvNode	   *node;

	if (name == NULL || name->kind != KS_J_STRING || !valid_name(name->str))
	{
		sp->err = pstrdup("a named type needs a valid \"name\"");
		return NULL;
	}
	if (nsj && nsj->kind == KS_J_STRING && strchr(name->str, '.') == NULL)
		*ns = nsj->str;
	node = palloc0(sizeof(AvNode));
	node->type = type;
	node->name = full_name(name->str, *ns);
	if (strchr(node->name, '.'))
		*ns = pnstrdup(node->name, strrchr(node->name, '.') - node->name);
	if (!ks_avro_names_add(&sp->named, node->name, node))
	{
		sp->err = psprintf("the type \"%s\" is defined twice", node->name);
		return NULL;
	}
	return node;
}

static int64
json_int(const KsJson *j, int64 dflt)
{
	char	   *end;
	long long	v;

	if (j == NULL || j->kind != KS_J_NUMBER)
		return dflt;
	errno = 0;
	v = strtoll(j->str, &end, 10);
	if (*end != '\0' || errno != 0)
		return dflt;
	return v;
}

/* Logical types on their underlying type; an invalid one is ignored (spec). */
static void
set_logical(AvNode *n, const KsJson *j)
{
	KsJson	   *lt = ks_json_get(j, "logicalType");
	const char *l;

	if (lt == NULL || lt->kind != KS_J_STRING)
		return;
	l = lt->str;
	if (strcmp(l, "decimal") == 0 && (n->type == AV_BYTES || n->type == AV_FIXED))
	{
		int64		precision = json_int(ks_json_get(j, "precision"), -1);
		int64		scale = json_int(ks_json_get(j, "scale"), 0);

		if (precision >= 1 && scale >= 0 && scale <= precision && scale <= 1000)
		{
			n->logical = LT_DECIMAL;
			n->scale = (int) scale;
		}
	}
	else if (strcmp(l, "date") == 0 && n->type == AV_INT)
		n->logical = LT_DATE;
	else if (strcmp(l, "time-millis") == 0 && n->type == AV_INT)
		n->logical = LT_TIME_MILLIS;
	else if (strcmp(l, "time-micros") == 0 && n->type == AV_LONG)
		n->logical = LT_TIME_MICROS;
	else if (strcmp(l, "timestamp-millis") == 0 && n->type == AV_LONG)
		n->logical = LT_TS_MILLIS;
	else if (strcmp(l, "timestamp-micros") == 0 && n->type == AV_LONG)
		n->logical = LT_TS_MICROS;
	else if (strcmp(l, "local-timestamp-millis") == 0 && n->type == AV_LONG)
		n->logical = LT_LTS_MILLIS;
	else if (strcmp(l, "local-timestamp-micros") == 0 && n->type == AV_LONG)
		n->logical = LT_LTS_MICROS;
	else if (strcmp(l, "uuid") == 0 && n->type == AV_STRING)
		n->logical = LT_UUID;
}

static AvNode *
parse_object(SchemaParse *sp, const KsJson *j, const char *ns, int depth)
{
	KsJson	   *type = ks_json_get(j, "type");
	const char *t;
	AvNode	   *n;

	if (type == NULL)
	{
		sp->err = pstrdup("a schema object needs a \"type\"");
		return NULL;
	}
	if (type->kind != KS_J_STRING)
	{
		/* {"type": {...}} or {"type": [...]}: the inner schema */
		return parse_schema(sp, type, ns, depth + 1);
	}
	t = type->str;
	for (int i = 0; primitive_names[i]; i++)
		if (strcmp(t, primitive_names[i]) == 0)
		{
			n = palloc0(sizeof(AvNode));
			n->type = (AvType) i;
			set_logical(n, j);
			return n;
		}
	if (strcmp(t, "record") == 0 || strcmp(t, "error") == 0)
	{
		KsJson	   *fields = ks_json_get(j, "fields");
		KsAvroNames fnames = {0};

		n = named_node(sp, j, AV_RECORD, &ns);
		if (n == NULL)
			return NULL;
		if (fields == NULL || fields->kind != KS_J_ARRAY)
		{
			sp->err = psprintf("record \"%s\" needs an array of \"fields\"", n->name);
			return NULL;
		}
		n->n = fields->n;
		n->width = n->n;		/* before the fields: a union in them may refer to n */
		n->names = palloc0(sizeof(char *) * Max(n->n, 1));
		n->children = palloc0(sizeof(AvNode *) * Max(n->n, 1));
		for (int i = 0; i < fields->n; i++)
		{
			KsJson	   *f = fields->items[i];
			KsJson	   *fname = ks_json_get(f, "name");

			if (fname == NULL || fname->kind != KS_J_STRING || !valid_name(fname->str) ||
				strchr(fname->str, '.') != NULL)
			{
				sp->err = psprintf("a field of record \"%s\" has no valid \"name\"", n->name);
				return NULL;
			}
			if (!ks_avro_names_add(&fnames, fname->str, n))
			{
				sp->err = psprintf("record \"%s\" has two fields \"%s\"", n->name, fname->str);
				return NULL;
			}
			n->names[i] = pstrdup(fname->str);	/* the tree may go */
			if (ks_json_get(f, "type") == NULL)
			{
				sp->err = psprintf("field \"%s\" of record \"%s\" has no \"type\"", fname->str, n->name);
				return NULL;
			}
			n->children[i] = parse_schema(sp, ks_json_get(f, "type"), ns, depth + 1);
			if (n->children[i] == NULL)
				return NULL;
		}
		if (fnames.cap)
		{
			pfree(fnames.keys);
			pfree(fnames.vals);
		}
		return n;
	}
	if (strcmp(t, "enum") == 0)
	{
		KsJson	   *symbols = ks_json_get(j, "symbols");

		n = named_node(sp, j, AV_ENUM, &ns);
		if (n == NULL)
			return NULL;
		if (symbols == NULL || symbols->kind != KS_J_ARRAY || symbols->n == 0)
		{
			sp->err = psprintf("enum \"%s\" needs an array of \"symbols\"", n->name);
			return NULL;
		}
		n->n = symbols->n;
		n->names = palloc(sizeof(char *) * n->n);
		for (int i = 0; i < n->n; i++)
		{
			if (symbols->items[i]->kind != KS_J_STRING || !valid_name(symbols->items[i]->str))
			{
				sp->err = psprintf("enum \"%s\" has an invalid symbol", n->name);
				return NULL;
			}
			n->names[i] = pstrdup(symbols->items[i]->str);
		}
		return n;
	}
	if (strcmp(t, "fixed") == 0)
	{
		n = named_node(sp, j, AV_FIXED, &ns);
		if (n == NULL)
			return NULL;
		n->size = json_int(ks_json_get(j, "size"), -1);
		if (n->size < 0 || n->size > 1024 * 1024)
		{
			sp->err = psprintf("fixed \"%s\" needs a \"size\" between 0 and 1048576", n->name);
			return NULL;
		}
		set_logical(n, j);
		return n;
	}
	if (strcmp(t, "array") == 0 || strcmp(t, "map") == 0)
	{
		KsJson	   *inner = ks_json_get(j, t[0] == 'a' ? "items" : "values");

		n = palloc0(sizeof(AvNode));
		n->type = t[0] == 'a' ? AV_ARRAY : AV_MAP;
		if (inner == NULL)
		{
			sp->err = psprintf("an %s needs \"%s\"", t, t[0] == 'a' ? "items" : "values");
			return NULL;
		}
		n->n = 1;
		n->children = palloc(sizeof(AvNode *));
		n->children[0] = parse_schema(sp, inner, ns, depth + 1);
		return n->children[0] ? n : NULL;
	}
	/* a reference to a named type, in the object form */
	n = find_named(sp, t, ns);
	if (n == NULL)
		sp->err = psprintf("unknown type \"%s\"", t);
	return n;
}

static AvNode *
parse_schema(SchemaParse *sp, const KsJson *j, const char *ns, int depth)
{
	AvNode	   *n;

	if (depth > AV_MAX_DEPTH)
	{
		sp->err = psprintf("the schema nests more than %d levels deep", AV_MAX_DEPTH);
		return NULL;
	}
	switch (j->kind)
	{
		case KS_J_STRING:
			for (int i = 0; primitive_names[i]; i++)
				if (strcmp(j->str, primitive_names[i]) == 0)
				{
					n = palloc0(sizeof(AvNode));
					n->type = (AvType) i;
					return n;
				}
			n = find_named(sp, j->str, ns);
			if (n == NULL)
				sp->err = psprintf("unknown type \"%s\"", j->str);
			return n;
		case KS_J_ARRAY:
			n = palloc0(sizeof(AvNode));
			n->type = AV_UNION;
			n->n = j->n;
			if (n->n == 0)
			{
				sp->err = pstrdup("a union needs at least one branch");
				return NULL;
			}
			n->children = palloc(sizeof(AvNode *) * n->n);
			{
				/*
				 * The spec's rule: one branch of each unnamed type, so a
				 * union is as wide as the named types it lists (and a
				 * reader looking for its non-null branch finds it at once).
				 */
				bool		seen[AV_FIXED + 1] = {0};

				for (int i = 0; i < j->n; i++)
				{
					AvType		bt;

					n->children[i] = parse_schema(sp, j->items[i], ns, depth + 1);
					if (n->children[i] == NULL)
						return NULL;
					bt = n->children[i]->type;
					n->width = Max(n->width, n->children[i]->width);
					if (bt == AV_UNION)
					{
						sp->err = pstrdup("a union cannot directly contain a union");
						return NULL;
					}
					if (bt != AV_RECORD && bt != AV_ENUM && bt != AV_FIXED)
					{
						if (seen[bt])
						{
							sp->err = pstrdup("a union has two branches of the same unnamed type");
							return NULL;
						}
						seen[bt] = true;
					}
				}
			}
			return n;
		case KS_J_OBJECT:
			return parse_object(sp, j, ns, depth);
		default:
			sp->err = pstrdup("a schema is a type name, an object or an array (a union)");
			return NULL;
	}
}

KsAvroSchema *
ks_avro_schema_parse(const char *json, size_t len, char **errmsg)
{
	KsJson	   *j;
	SchemaParse sp = {{0}, NULL};
	KsAvroSchema *s;

#ifndef FRONTEND
	/*
	 * The JSON tree aside, freed once the schema is compiled: the compiled
	 * schema copies what it keeps, and the tree of a large schema is many
	 * times its text (most of it, in a hostile one, members Avro ignores).
	 */
	MemoryContext keep = CurrentMemoryContext;
	MemoryContext tree_cxt = AllocSetContextCreate(keep, "kafka_sink avro schema tree",
												   ALLOCSET_DEFAULT_SIZES);

	MemoryContextSwitchTo(tree_cxt);
	j = ks_json_parse(json, len, errmsg);
	MemoryContextSwitchTo(keep);
	if (j == NULL)
	{
		*errmsg = pstrdup(*errmsg ? *errmsg : "invalid JSON");
		MemoryContextDelete(tree_cxt);
		return NULL;
	}
#else
	j = ks_json_parse(json, len, errmsg);
	if (j == NULL)
		return NULL;
#endif
	s = palloc0(sizeof(KsAvroSchema));
	s->text_len = len;
	s->root = parse_schema(&sp, j, NULL, 0);
#ifndef FRONTEND
	MemoryContextDelete(tree_cxt);
#endif
	if (s->root == NULL)
	{
		*errmsg = sp.err ? sp.err : pstrdup("invalid schema");
		return NULL;
	}
	return s;
}

KsAvroSchema *
ks_avro_schema_parse_refs(const char *const *refs, int nrefs, const char *main, char **errmsg)
{
	StringInfoData b;
	KsAvroSchema *s;

	/*
	 * A union of the references (named types, dependencies first) and the
	 * schema: one parse defines every name before the schema uses it.
	 */
	initStringInfo(&b);
	appendStringInfoChar(&b, '[');
	for (int i = 0; i < nrefs; i++)
	{
		appendStringInfoString(&b, refs[i]);
		appendStringInfoChar(&b, ',');
	}
	appendStringInfoString(&b, main);
	appendStringInfoChar(&b, ']');
	s = ks_avro_schema_parse(b.data, b.len, errmsg);
	pfree(b.data);
	if (s == NULL)
		return NULL;
	if (s->root->type != AV_UNION || s->root->n != nrefs + 1)
	{
		*errmsg = psprintf("a schema with references must not itself be a union");
		return NULL;
	}
	s->root = s->root->children[nrefs];
	return s;
}

bool
ks_avro_schema_is_record(const KsAvroSchema *s)
{
	return s->root->type == AV_RECORD;
}

/* ================================================================
 * Decoding
 * ================================================================ */

typedef struct Dec
{
	const unsigned char *p;
	const unsigned char *end;
	const KsWalkPaths *paths;
	const bool *pg_array;
	const Oid  *direct;
	KsSlotValue *out;
	char	   *err;
	int64		budget;			/* array and map items left */
	int64		work;			/* work left (the header comment) */
} Dec;

/* clang does not know gnu_printf, which PostgreSQL's gcc build configured */
#ifdef __clang__
static bool fail(Dec *d, const char *fmt,...) __attribute__((format(printf, 2, 3)));
#else
static bool fail(Dec *d, const char *fmt,...) pg_attribute_printf(2, 3);
#endif

static bool
fail(Dec *d, const char *fmt,...)
{
	if (d->err == NULL)
	{
		StringInfoData b;
		va_list		ap;

		initStringInfo(&b);
		for (;;)
		{
			int			needed;

			va_start(ap, fmt);
			needed = appendStringInfoVA(&b, fmt, ap);
			va_end(ap);
			if (needed == 0)
				break;
			enlargeStringInfo(&b, needed);
		}
		d->err = b.data;
	}
	return false;
}

static bool
read_long(Dec *d, int64 *v)
{
	uint64		u = 0;
	int			shift = 0;

	for (;;)
	{
		unsigned char b;

		if (d->p >= d->end)
			return fail(d, "the data ends in the middle of a value");
		b = *d->p++;
		if (shift == 63 && (b & 0x7e) != 0)
			return fail(d, "a variable-length integer overflows 64 bits");
		u |= (uint64) (b & 0x7f) << shift;
		if ((b & 0x80) == 0)
			break;
		shift += 7;
		if (shift > 63)
			return fail(d, "a variable-length integer overflows 64 bits");
	}
	*v = (int64) ((u >> 1) ^ (~(u & 1) + 1));
	return true;
}

static bool
read_int(Dec *d, int64 *v)
{
	if (!read_long(d, v))
		return false;
	if (*v < PG_INT32_MIN || *v > PG_INT32_MAX)
		return fail(d, "an int is out of range");
	return true;
}

/* A length prefix: bytes and strings */
static bool
read_len(Dec *d, int64 *n)
{
	if (!read_long(d, n))
		return false;
	if (*n < 0)
		return fail(d, "a negative length");
	if (*n > d->end - d->p)
		return fail(d, "a length of %lld bytes goes past the end of the data", (long long) *n);
	return true;
}

static bool
need(Dec *d, int64 n)
{
	if (n > d->end - d->p)
		return fail(d, "the data ends in the middle of a value");
	return true;
}

/* The item count of the next block of an array or map; 0 at the end. */
static bool
read_block(Dec *d, int64 *count)
{
	if (!read_long(d, count))
		return false;
	if (*count < 0)
	{
		int64		bytes;

		if (*count == PG_INT64_MIN)
			return fail(d, "an invalid block count");
		*count = -*count;
		if (!read_long(d, &bytes))	/* the block's size: not needed */
			return false;
		if (bytes < 0)
			return fail(d, "a negative block size");
	}
	if (*count > d->budget)
		return fail(d, "more array or map items than the data can hold");
	d->budget -= *count;
	return true;
}

static bool
read_branch(Dec *d, const AvNode *n, const AvNode **branch)
{
	int64		i;

	if (!read_long(d, &i))
		return false;
	if (i < 0 || i >= n->n)
		return fail(d, "union branch %lld does not exist", (long long) i);
	*branch = n->children[i];
	return true;
}

static bool skip(Dec *d, const AvNode *n, int depth);

/* Spends n of the work budget; false (an error of the datum) when it runs out. */
static inline bool
spend(Dec *d, int64 n)
{
	d->work -= n;
	if (d->work < 0)
		return fail(d, "decoding takes more work than the data and its schema allow (values that take no bytes, repeated too often)");
	return true;
}

/* The entry of a value at depth: its nesting checked, its visit paid for. */
static inline bool
enter(Dec *d, int depth)
{
	if (depth > AV_MAX_DEPTH)
		return fail(d, "the value nests more than %d levels deep", AV_MAX_DEPTH);
	return spend(d, 1);
}

static bool
skip(Dec *d, const AvNode *n, int depth)
{
	int64		v;

	if (!enter(d, depth))
		return false;
	switch (n->type)
	{
		case AV_NULL:
			return true;
		case AV_BOOLEAN:
			if (!need(d, 1))
				return false;
			if (*d->p > 1)
				return fail(d, "a boolean byte is neither 0 nor 1");
			d->p++;
			return true;
		case AV_INT:
			return read_int(d, &v);
		case AV_LONG:
			return read_long(d, &v);
		case AV_FLOAT:
			if (!need(d, 4))
				return false;
			d->p += 4;
			return true;
		case AV_DOUBLE:
			if (!need(d, 8))
				return false;
			d->p += 8;
			return true;
		case AV_STRING:
			if (!read_len(d, &v))
				return false;
			if (pg_encoding_verifymbstr(PG_UTF8, (const char *) d->p, (int) v) != (int) v)
				return fail(d, "a string is not valid UTF-8");
			d->p += v;
			return true;
		case AV_BYTES:
			if (!read_len(d, &v))
				return false;
			d->p += v;
			return true;
		case AV_FIXED:
			if (!need(d, n->size))
				return false;
			d->p += n->size;
			return true;
		case AV_ENUM:
			if (!read_int(d, &v))
				return false;
			if (v < 0 || v >= n->n)
				return fail(d, "enum index %lld does not exist", (long long) v);
			return true;
		case AV_UNION:
			{
				const AvNode *b;

				return read_branch(d, n, &b) && skip(d, b, depth + 1);
			}
		case AV_RECORD:
			for (int i = 0; i < n->n; i++)
				if (!skip(d, n->children[i], depth + 1))
					return false;
			return true;
		case AV_ARRAY:
		case AV_MAP:
			for (;;)
			{
				int64		count;

				if (!read_block(d, &count))
					return false;
				if (count == 0)
					return true;
				for (int64 i = 0; i < count; i++)
				{
					if (n->type == AV_MAP && !skip(d, &(AvNode) {.type = AV_STRING}, depth + 1))
						return false;
					if (!skip(d, n->children[0], depth + 1))
						return false;
				}
			}
	}
	return fail(d, "an unknown type");
}

/* ---- texts ---- */

/* Appends v in decimal, zero-padded to width digits. */
static void
append_int(StringInfo b, int64 v, int width)
{
	char		buf[24];
	int			n = 0;
	uint64		u = v < 0 ? (uint64) 0 - (uint64) v : (uint64) v;

	do
	{
		buf[n++] = (char) ('0' + u % 10);
		u /= 10;
	} while (u > 0);
	while (n < width)
		buf[n++] = '0';
	enlargeStringInfo(b, n + 1);
	if (v < 0)
		b->data[b->len++] = '-';
	while (n > 0)
		b->data[b->len++] = buf[--n];
	b->data[b->len] = '\0';
}

static void
append_hex(StringInfo b, const unsigned char *p, int64 n)
{
	static const char hex[] = "0123456789abcdef";

	appendStringInfoString(b, "\\x");
	enlargeStringInfo(b, (int) (n * 2));
	for (int64 i = 0; i < n; i++)
	{
		b->data[b->len++] = hex[p[i] >> 4];
		b->data[b->len++] = hex[p[i] & 15];
	}
	b->data[b->len] = '\0';
}

/* A decimal: big-endian two's complement unscaled value, and the scale. */
static bool
append_decimal(Dec *d, StringInfo b, const unsigned char *p, int64 n, int scale)
{
	unsigned char *mag;
	unsigned char mag_local[32];
	char		digits_local[100];
	bool		negative;
	char	   *digits;
	int			nd = 0;
	int64		start = 0;

	if (n == 0)
		return fail(d, "a decimal has no bytes");
	if (n <= 8 && scale <= 18)
	{
		/* the common case: the unscaled value fits 64 bits */
		int64		v = (p[0] & 0x80) ? -1 : 0;
		uint64		u;
		char		buf[24];
		int			len = 0;

		for (int64 i = 0; i < n; i++)
			v = (int64) (((uint64) v << 8) | p[i]);
		u = v < 0 ? (uint64) 0 - (uint64) v : (uint64) v;
		do
		{
			buf[len++] = (char) ('0' + u % 10);
			u /= 10;
		} while (u > 0);
		while (len <= scale)
			buf[len++] = '0';
		enlargeStringInfo(b, len + 3);
		if (v < 0)
			b->data[b->len++] = '-';
		while (len > 0)
		{
			if (len == scale)
				b->data[b->len++] = '.';
			b->data[b->len++] = buf[--len];
		}
		b->data[b->len] = '\0';
		return true;
	}
	if (n > 4096)
		return fail(d, "a decimal of %lld bytes is too large", (long long) n);
	mag = n <= 32 ? mag_local : palloc(n);
	memcpy(mag, p, n);
	negative = (mag[0] & 0x80) != 0;
	if (negative)
	{
		/* two's complement: invert and add one */
		int			carry = 1;

		for (int64 i = n - 1; i >= 0; i--)
		{
			int			v = (unsigned char) ~mag[i] + carry;

			mag[i] = (unsigned char) v;
			carry = v >> 8;
		}
	}
	/* base 256 -> base 10, by repeated division: at most 2.41 digits a byte */
	digits = n <= 32 ? digits_local : palloc(n * 3 + 2);
	while (start < n)
	{
		int			rem = 0;

		for (int64 i = start; i < n; i++)
		{
			int			cur = rem * 256 + mag[i];

			mag[i] = (unsigned char) (cur / 10);
			rem = cur % 10;
		}
		digits[nd++] = (char) ('0' + rem);
		while (start < n && mag[start] == 0)
			start++;
	}
	if (nd == 0)
		digits[nd++] = '0';
	if (negative)
		appendStringInfoChar(b, '-');
	if (nd <= scale)
	{
		appendStringInfoString(b, "0.");
		for (int i = 0; i < scale - nd; i++)
			appendStringInfoChar(b, '0');
		for (int i = nd - 1; i >= 0; i--)
			appendStringInfoChar(b, digits[i]);
	}
	else
	{
		for (int i = nd - 1; i >= 0; i--)
		{
			appendStringInfoChar(b, digits[i]);
			if (i == scale && scale > 0)
				appendStringInfoChar(b, '.');
		}
	}
	if (mag != mag_local)
		pfree(mag);
	if (digits != digits_local)
		pfree(digits);
	return true;
}

/* floor division and modulo */
static int64
floor_div(int64 a, int64 b)
{
	int64		q = a / b;

	return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

static void append_date_text(StringInfo b, int64 z);

/*
 * Dates, with the last one remembered: the timestamps of a stream mostly
 * fall on the same day, and the civil date costs a few divisions.
 */
static void
append_date(StringInfo b, int64 z)
{
	static int64 last_day = PG_INT64_MIN;
	static char last_text[32];
	static int	last_len;

	if (z != last_day)
	{
		StringInfoData t;

		t.data = last_text;
		t.maxlen = sizeof(last_text);
		t.len = 0;
		t.cursor = 0;
		append_date_text(&t, z);
		last_len = t.len;
		last_day = z;
	}
	appendBinaryStringInfo(b, last_text, last_len);
}

static void
append_date_text(StringInfo b, int64 z)
{
	/* days since 1970-01-01 -> civil date (H. Hinnant's algorithm) */
	int64		era,
				doe,
				yoe,
				y,
				doy,
				mp,
				day,
				m;

	z += 719468;
	era = floor_div(z, 146097);
	doe = z - era * 146097;
	yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
	y = yoe + era * 400;
	doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
	mp = (5 * doy + 2) / 153;
	day = doy - (153 * mp + 2) / 5 + 1;
	m = mp < 10 ? mp + 3 : mp - 9;
	if (m <= 2)
		y++;
	append_int(b, y <= 0 ? 1 - y : y, 4);
	appendStringInfoChar(b, '-');
	append_int(b, m, 2);
	appendStringInfoChar(b, '-');
	append_int(b, day, 2);
}

/* microseconds of a day -> HH:MM:SS[.ffffff] */
static void
append_time(StringInfo b, int64 us)
{
	int64		s = floor_div(us, 1000000);
	int64		f = us - s * 1000000;
	int			m = (int) (s / 60 % 60);
	int			sec = (int) (s % 60);
	char		frac[6];
	int			nfrac = 6;
	char	   *o;

	append_int(b, s / 3600, 2);
	enlargeStringInfo(b, 16);
	o = b->data + b->len;
	*o++ = ':';
	*o++ = (char) ('0' + m / 10);
	*o++ = (char) ('0' + m % 10);
	*o++ = ':';
	*o++ = (char) ('0' + sec / 10);
	*o++ = (char) ('0' + sec % 10);
	for (int i = 5; i >= 0; i--)
	{
		frac[i] = (char) ('0' + f % 10);
		f /= 10;
	}
	while (nfrac > 0 && frac[nfrac - 1] == '0')
		nfrac--;
	if (nfrac > 0)
	{
		*o++ = '.';
		memcpy(o, frac, nfrac);
		o += nfrac;
	}
	*o = '\0';
	b->len = (int) (o - b->data);
}

static void
append_timestamp(StringInfo b, int64 units, int64 per_second, bool zone)
{
	int64		secs = floor_div(units, per_second);
	int64		rem = units % per_second;	/* never secs * per_second: it overflows */
	int64		days = floor_div(secs, 86400);
	int64		y_check = days;
	int64		us;

	if (rem < 0)
		rem += per_second;
	us = rem * (1000000 / per_second);
	append_date(b, days);
	appendStringInfoChar(b, ' ');
	append_time(b, (secs - days * 86400) * 1000000 + us);
	if (zone)
		appendStringInfoString(b, "+00");
	/* before year 1: the era, as PostgreSQL writes it */
	if (y_check < -719162)
		appendStringInfoString(b, " BC");
}

static void
append_double(StringInfo b, double v, bool single)
{
	char		buf[32];

	if (single)
		float_to_shortest_decimal_buf((float) v, buf);
	else
		double_to_shortest_decimal_buf(v, buf);
	appendStringInfoString(b, buf);
}

/*
 * The text of a value that is neither a union, a record, a map nor an
 * array.  *is_string: a STRING (quoted in JSON), else a SCALAR token;
 * *is_null for null.
 */
static bool
scalar_text(Dec *d, const AvNode *n, StringInfo b, bool *is_string, bool *is_null)
{
	int64		v;

	*is_string = false;
	*is_null = false;
	switch (n->type)
	{
		case AV_NULL:
			*is_null = true;
			return true;
		case AV_BOOLEAN:
			if (!need(d, 1))
				return false;
			if (*d->p > 1)
				return fail(d, "a boolean byte is neither 0 nor 1");
			appendStringInfoString(b, *d->p++ ? "true" : "false");
			return true;
		case AV_INT:
		case AV_LONG:
			if (!(n->type == AV_INT ? read_int(d, &v) : read_long(d, &v)))
				return false;
			switch (n->logical)
			{
				case LT_DATE:
					append_date(b, v);
					if (v < -719162)
						appendStringInfoString(b, " BC");
					*is_string = true;
					return true;
				case LT_TIME_MILLIS:
				case LT_TIME_MICROS:
					if (v < 0 || v > (n->logical == LT_TIME_MILLIS ? 86400000LL : 86400000000LL))
						return fail(d, "a time of day is out of range");
					append_time(b, n->logical == LT_TIME_MILLIS ? v * 1000 : v);
					*is_string = true;
					return true;
				case LT_TS_MILLIS:
				case LT_LTS_MILLIS:
					append_timestamp(b, v, 1000, n->logical == LT_TS_MILLIS);
					*is_string = true;
					return true;
				case LT_TS_MICROS:
				case LT_LTS_MICROS:
					append_timestamp(b, v, 1000000, n->logical == LT_TS_MICROS);
					*is_string = true;
					return true;
				default:
					append_int(b, v, 1);
					return true;
			}
		case AV_FLOAT:
		case AV_DOUBLE:
			{
				double		x;

				if (n->type == AV_FLOAT)
				{
					float		f;
					uint32		u;

					if (!need(d, 4))
						return false;
					u = (uint32) d->p[0] | ((uint32) d->p[1] << 8) | ((uint32) d->p[2] << 16) |
						((uint32) d->p[3] << 24);
					memcpy(&f, &u, 4);
					d->p += 4;
					x = f;
				}
				else
				{
					uint64		u = 0;

					if (!need(d, 8))
						return false;
					for (int i = 7; i >= 0; i--)
						u = (u << 8) | d->p[i];
					memcpy(&x, &u, 8);
					d->p += 8;
				}
				/* NaN and the infinities are no JSON numbers: strings */
				*is_string = isnan(x) || isinf(x);
				append_double(b, x, n->type == AV_FLOAT);
				return true;
			}
		case AV_STRING:
			if (!read_len(d, &v))
				return false;
			if (pg_encoding_verifymbstr(PG_UTF8, (const char *) d->p, (int) v) != (int) v)
				return fail(d, "a string is not valid UTF-8");
			if (memchr(d->p, '\0', v) != NULL)
				return fail(d, "a string contains a NUL character");
			appendBinaryStringInfo(b, (const char *) d->p, (int) v);
			d->p += v;
			*is_string = true;
			return true;
		case AV_BYTES:
		case AV_FIXED:
			if (n->type == AV_BYTES)
			{
				if (!read_len(d, &v))
					return false;
			}
			else
			{
				v = n->size;
				if (!need(d, v))
					return false;
			}
			if (n->logical == LT_DECIMAL)
			{
				if (!append_decimal(d, b, d->p, v, n->scale))
					return false;
			}
			else
			{
				append_hex(b, d->p, v);
				*is_string = true;
			}
			d->p += v;
			return true;
		case AV_ENUM:
			if (!read_int(d, &v))
				return false;
			if (v < 0 || v >= n->n)
				return fail(d, "enum index %lld does not exist", (long long) v);
			appendStringInfoString(b, n->names[v]);
			*is_string = true;
			return true;
		default:
			break;
	}
	return fail(d, "not a scalar");
}

/* Any value as JSON text. */
static bool
json_text(Dec *d, const AvNode *n, StringInfo b, int depth)
{
	if (!enter(d, depth))
		return false;
	switch (n->type)
	{
		case AV_UNION:
			{
				const AvNode *br;

				return read_branch(d, n, &br) && json_text(d, br, b, depth + 1);
			}
		case AV_RECORD:
			appendStringInfoChar(b, '{');
			for (int i = 0; i < n->n; i++)
			{
				size_t		nlen = strlen(n->names[i]);

				if (!spend(d, (int64) nlen))
					return false;
				if (i > 0)
					appendStringInfoChar(b, ',');
				append_json_string(b, n->names[i], nlen);
				appendStringInfoChar(b, ':');
				if (!json_text(d, n->children[i], b, depth + 1))
					return false;
			}
			appendStringInfoChar(b, '}');
			return true;
		case AV_ARRAY:
		case AV_MAP:
			{
				bool		first = true;

				appendStringInfoChar(b, n->type == AV_ARRAY ? '[' : '{');
				for (;;)
				{
					int64		count;

					if (!read_block(d, &count))
						return false;
					if (count == 0)
						break;
					for (int64 i = 0; i < count; i++)
					{
						if (!first)
							appendStringInfoChar(b, ',');
						first = false;
						if (n->type == AV_MAP)
						{
							int64		klen;

							if (!read_len(d, &klen))
								return false;
							if (pg_encoding_verifymbstr(PG_UTF8, (const char *) d->p, (int) klen) != (int) klen ||
								memchr(d->p, '\0', klen) != NULL)
								return fail(d, "a map key is not valid UTF-8 text");
							append_json_string(b, (const char *) d->p, klen);
							d->p += klen;
							appendStringInfoChar(b, ':');
						}
						if (!json_text(d, n->children[0], b, depth + 1))
							return false;
					}
				}
				appendStringInfoChar(b, n->type == AV_ARRAY ? ']' : '}');
				return true;
			}
		default:
			{
				StringInfoData s;
				bool		is_string,
							is_null;

				init_small(&s);
				if (!scalar_text(d, n, &s, &is_string, &is_null))
					return false;
				if (is_null)
					appendStringInfoString(b, "null");
				else if (is_string)
					append_json_string(b, s.data, s.len);
				else
					appendBinaryStringInfo(b, s.data, s.len);
				pfree(s.data);
				return true;
			}
	}
}

/* An Avro array as a PostgreSQL array literal; nested arrays as dimensions. */
static bool
pg_array_text(Dec *d, const AvNode *n, StringInfo b, int depth)
{
	bool		first = true;
	const AvNode *item = n->children[0];

	if (!enter(d, depth))
		return false;
	appendStringInfoChar(b, '{');
	for (;;)
	{
		int64		count;

		if (!read_block(d, &count))
			return false;
		if (count == 0)
			break;
		for (int64 i = 0; i < count; i++)
		{
			const AvNode *it = item;

			if (!first)
				appendStringInfoChar(b, ',');
			first = false;
			if (it->type == AV_UNION && !read_branch(d, it, &it))
				return false;
			if (it->type == AV_ARRAY)
			{
				if (!pg_array_text(d, it, b, depth + 1))
					return false;
			}
			else if (it->type == AV_RECORD || it->type == AV_MAP)
			{
				StringInfoData s;

				init_small(&s);
				if (!json_text(d, it, &s, depth + 1))
					return false;
				append_array_element(b, s.data, s.len);
				pfree(s.data);
			}
			else
			{
				StringInfoData s;
				bool		is_string,
							is_null;

				init_small(&s);
				if (!scalar_text(d, it, &s, &is_string, &is_null))
					return false;
				if (is_null)
					appendStringInfoString(b, "NULL");
				else
					append_array_element(b, s.data, s.len);
				pfree(s.data);
			}
		}
	}
	appendStringInfoChar(b, '}');
	return true;
}

#ifndef FRONTEND
/*
 * The column types whose values direct_value builds: exactly these, with
 * no typmod (a timestamptz(3) rounds in its input function) and no domain
 * (its checks run in the input function).
 */
Oid
ks_avro_direct_type(Oid typid, int32 typmod)
{
	switch (typid)
	{
		case BOOLOID:
		case INT4OID:
		case INT8OID:
		case FLOAT4OID:
		case FLOAT8OID:
		case TEXTOID:
		case TIMESTAMPTZOID:
		case TIMESTAMPOID:
			return typmod < 0 ? typid : InvalidOid;
		default:
			return InvalidOid;
	}
}

/*
 * The value at the current position as a Datum of typid, the column's own
 * type, without text and input function: 1 done (slot v is a
 * KS_SLOT_DATUM), 0 not this way (nothing read: the text path decodes it
 * and the input function decides, e.g. a timestamp out of PostgreSQL's
 * range), -1 a decoding error (d->err).  Each case gives exactly the value
 * the input function makes of scalar_text()'s text: int and long are
 * integers either way; a double's text is its shortest round-trip form
 * (float8in gives the same double back), a float's likewise for float4 (a
 * float into float8 is NOT the same: "0.1" is not (double) 0.1f, so that
 * goes the text way); a string is UTF-8 without NUL (checked as there) in
 * a UTF-8 database; a timestamp's text names the same microsecond.
 */
static int
direct_value(Dec *d, const AvNode *n, Oid typid, KsSlotValue *v)
{
	const unsigned char *start = d->p;
	int64		x;
	Datum		datum;

	switch (n->type)
	{
		case AV_BOOLEAN:
			if (typid != BOOLOID)
				return 0;
			if (!need(d, 1))
				return -1;
			if (*d->p > 1)
			{
				(void) fail(d, "a boolean byte is neither 0 nor 1");
				return -1;
			}
			datum = BoolGetDatum(*d->p++ != 0);
			break;
		case AV_INT:
		case AV_LONG:
			if (n->logical == LT_NONE)
			{
				if (!(typid == INT8OID || (typid == INT4OID && n->type == AV_INT)))
					return 0;
				if (!(n->type == AV_INT ? read_int(d, &x) : read_long(d, &x)))
					return -1;
				datum = typid == INT8OID ? Int64GetDatum(x) : Int32GetDatum((int32) x);
				break;
			}
			if (n->type != AV_LONG ||
				!(((n->logical == LT_TS_MILLIS || n->logical == LT_TS_MICROS) && typid == TIMESTAMPTZOID) ||
				  ((n->logical == LT_LTS_MILLIS || n->logical == LT_LTS_MICROS) && typid == TIMESTAMPOID)))
				return 0;
			if (!read_long(d, &x))
				return -1;
			{
				int64		us = x;
				Timestamp	ts;

				if ((n->logical == LT_TS_MILLIS || n->logical == LT_LTS_MILLIS) &&
					pg_mul_s64_overflow(x, 1000, &us))
				{
					d->p = start;
					return 0;
				}
				if (pg_sub_s64_overflow(us, (int64) (POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) * USECS_PER_DAY, &ts) ||
					!IS_VALID_TIMESTAMP(ts))
				{
					d->p = start;
					return 0;
				}
				datum = TimestampGetDatum(ts);
			}
			break;
		case AV_FLOAT:
			{
				float		f;
				uint32		u;

				if (typid != FLOAT4OID)
					return 0;
				if (!need(d, 4))
					return -1;
				u = (uint32) d->p[0] | ((uint32) d->p[1] << 8) | ((uint32) d->p[2] << 16) |
					((uint32) d->p[3] << 24);
				memcpy(&f, &u, 4);
				d->p += 4;
				datum = Float4GetDatum(f);
				break;
			}
		case AV_DOUBLE:
			{
				double		f;
				uint64		u = 0;

				if (typid != FLOAT8OID)
					return 0;
				if (!need(d, 8))
					return -1;
				for (int i = 7; i >= 0; i--)
					u = (u << 8) | d->p[i];
				memcpy(&f, &u, 8);
				d->p += 8;
				datum = Float8GetDatum(f);
				break;
			}
		case AV_STRING:
			if (typid != TEXTOID || GetDatabaseEncoding() != PG_UTF8)
				return 0;
			if (!read_len(d, &x))
				return -1;
			if (pg_encoding_verifymbstr(PG_UTF8, (const char *) d->p, (int) x) != (int) x)
			{
				(void) fail(d, "a string is not valid UTF-8");
				return -1;
			}
			if (memchr(d->p, '\0', x) != NULL)
			{
				(void) fail(d, "a string contains a NUL character");
				return -1;
			}
			datum = PointerGetDatum(cstring_to_text_with_len((const char *) d->p, (int) x));
			d->p += x;
			break;
		default:
			return 0;
	}
	if (v->text)
		pfree(v->text);			/* a duplicate map key: the last one wins */
	v->kind = KS_SLOT_DATUM;
	v->text = NULL;
	v->typid = typid;
	v->datum = (uintptr_t) datum;
	return 1;
}
#endif

/* The value at the current position, into slot s. */
static bool
capture(Dec *d, const AvNode *n, int s, int depth)
{
	KsSlotValue *v = &d->out[s];
	StringInfoData b;

	while (n->type == AV_UNION)
		if (!read_branch(d, n, &n))
			return false;
	init_small(&b);
	if (n->type == AV_ARRAY && d->pg_array && d->pg_array[s])
	{
		if (!pg_array_text(d, n, &b, depth))
			return false;
		v->kind = KS_SLOT_SCALAR;
	}
	else if (n->type == AV_RECORD || n->type == AV_MAP || n->type == AV_ARRAY)
	{
		if (!json_text(d, n, &b, depth))
			return false;
		v->kind = KS_SLOT_COMPOSITE;
	}
	else
	{
		bool		is_string,
					is_null;

#ifndef FRONTEND
		if (d->direct && OidIsValid(d->direct[s]))
		{
			int			r = direct_value(d, n, d->direct[s], v);

			if (r < 0)
				return false;
			if (r > 0)
			{
				pfree(b.data);
				return true;
			}
		}
#endif
		if (!scalar_text(d, n, &b, &is_string, &is_null))
			return false;
		if (is_null)
		{
			pfree(b.data);
			if (v->text)
				pfree(v->text);
			v->kind = KS_SLOT_NULL;
			v->text = NULL;
			return true;
		}
		v->kind = is_string ? KS_SLOT_STRING : KS_SLOT_SCALAR;
	}
	if (v->text)
		pfree(v->text);			/* a duplicate map key: the last one wins */
	v->text = b.data;
	return true;
}

/*
 * Walks the value at the current position with the slots in active[]
 * (whose first level segments matched): those whose path ends here take
 * the value; the longer ones go on into records and maps.
 */
static bool
walk(Dec *d, const AvNode *n, int level, const int *active, int nactive, int depth)
{
	const unsigned char *start = d->p;
	const unsigned char *after = NULL;
	int		   *sub;
	int			sub_local[16];
	int			ndeeper = 0;

	if (!enter(d, depth))
		return false;
	for (int i = 0; i < nactive; i++)
	{
		if (d->paths->paths[active[i]].nsegs == level)
		{
			d->p = start;
			if (!capture(d, n, active[i], depth))
				return false;
			after = d->p;
		}
		else
			ndeeper++;
	}
	if (ndeeper == 0)
		return after ? true : skip(d, n, depth);
	d->p = start;
	while (n->type == AV_UNION)
		if (!read_branch(d, n, &n))
			return false;
	if (n->type != AV_RECORD && n->type != AV_MAP)
		return skip(d, n, depth);

	sub = nactive <= (int) lengthof(sub_local) ? sub_local : palloc(sizeof(int) * nactive);
	if (n->type == AV_RECORD)
	{
		/* this level's segment of each deeper path, side by side */
		const char *seg_local[16];
		const char **seg = nactive <= (int) lengthof(seg_local) ? seg_local :
			palloc(sizeof(char *) * nactive);

		for (int i = 0; i < nactive; i++)
		{
			const KsPath *p = &d->paths->paths[active[i]];

			seg[i] = p->nsegs > level ? p->segs[level] : "";
		}
		for (int f = 0; f < n->n; f++)
		{
			int			nsub = 0;
			const char *name = n->names[f];

			for (int i = 0; i < nactive; i++)
			{
				/* the first byte first: most fields differ there */
				if (seg[i][0] == name[0] && strcmp(seg[i], name) == 0)
					sub[nsub++] = active[i];
			}
			if (!(nsub > 0 ? walk(d, n->children[f], level + 1, sub, nsub, depth + 1) :
				  skip(d, n->children[f], depth + 1)))
				return false;
		}
		if (seg != seg_local)
			pfree(seg);
	}
	else
	{
		for (;;)
		{
			int64		count;

			if (!read_block(d, &count))
				return false;
			if (count == 0)
				break;
			for (int64 i = 0; i < count; i++)
			{
				int64		klen;
				const char *key;
				int			nsub = 0;

				/* each entry is compared with every path that goes on here */
				if (!spend(d, nactive) || !read_len(d, &klen))
					return false;
				key = (const char *) d->p;
				if (pg_encoding_verifymbstr(PG_UTF8, key, (int) klen) != (int) klen)
					return fail(d, "a map key is not valid UTF-8");
				d->p += klen;
				for (int a = 0; a < nactive; a++)
				{
					const KsPath *p = &d->paths->paths[active[a]];

					if (p->nsegs > level && strlen(p->segs[level]) == (size_t) klen &&
						memcmp(p->segs[level], key, klen) == 0)
						sub[nsub++] = active[a];
				}
				/* a record walked per entry compares each field with each path */
				if (nsub > 0 && !spend(d, (int64) n->children[0]->width * nsub))
					return false;
				if (!(nsub > 0 ? walk(d, n->children[0], level + 1, sub, nsub, depth + 1) :
					  skip(d, n->children[0], depth + 1)))
					return false;
			}
		}
	}
	if (sub != sub_local)
		pfree(sub);
	if (after != NULL && after != d->p)
		return fail(d, "internal error: two walks of one value disagree");
	return true;
}

KsAvroResult
ks_avro_decode(const KsAvroSchema *s, const KsWalkPaths *paths, const bool *pg_array,
			   const Oid *direct, int whole_slot, const char *data, size_t len, KsSlotValue *out, char **detail)
{
	Dec			d;
	bool		ok;
	int		   *active;
	int			active_local[16] = {0};
	int			nactive = 0;

	*detail = NULL;
	slots_absent(out, paths->nslots, false);
	memset(&d, 0, sizeof(d));
	d.p = (const unsigned char *) data;
	d.end = d.p + len;
	d.paths = paths;
	d.pg_array = pg_array;
#ifndef FRONTEND
	d.direct = direct;
#else
	(void) direct;
#endif
	d.out = out;
	d.budget = (int64) len * 8 + 1024;
	d.work = (int64) len * AV_WORK_PER_BYTE + (int64) s->text_len * AV_WORK_PER_SCHEMA_BYTE +
		AV_WORK_BASE;

	if (s->root->type != AV_RECORD && whole_slot < 0)
	{
		*detail = psprintf("the writer schema's top-level type is not a record");
		return KS_AVRO_NOT_A_RECORD;
	}
	if (s->root->type != AV_RECORD)
		ok = capture(&d, s->root, whole_slot, 0);
	else
	{
		active = paths->nslots <= (int) lengthof(active_local) ? active_local :
			palloc(sizeof(int) * Max(paths->nslots, 1));
		for (int i = 0; i < paths->nslots; i++)
			if (paths->paths[i].nsegs >= 1)
				active[nactive++] = i;
		ok = walk(&d, s->root, 0, active, nactive, 0);
		if (active != active_local)
			pfree(active);
	}
	if (ok && d.p != d.end)
		ok = fail(&d, "%lld bytes are left over after the value", (long long) (d.end - d.p));
	if (!ok)
	{
		slots_absent(out, paths->nslots, true);
		*detail = d.err;
		return KS_AVRO_INVALID;
	}
	return KS_AVRO_OK;
}
