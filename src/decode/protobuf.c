/*-------------------------------------------------------------------------
 *
 * protobuf.c
 *		The decoder of Confluent's Protobuf payloads (the message-index list,
 *		then the message's wire bytes) into the field-path slots that
 *		decode.c converts into columns, as it converts those of JSON and
 *		Avro messages.
 *
 * Why a decoder of our own (docs/design/decoding.md): the registry hands
 * out .proto text, which libprotobuf-c cannot load at run time, and C++
 * libprotobuf would put a C++ runtime into every backend; the wire format
 * is small.  test/fuzz/fuzz_protobuf.c fuzzes this file and
 * protobuf_parse.c under ASan, and test/fuzz/protobuf_diff.py checks them
 * against the official Python library on random schemas and messages.
 *
 * A message is read in one pass into a tree of its fields' values
 * (pointers into the bytes), sorted by field: a singular field seen twice
 * keeps the last value (a message merges them), a oneof keeps its last
 * member, packed and unpacked repeated values are one list, unknown fields
 * are skipped (an unknown value of a proto2 enum too, and a map entry that
 * holds either, as the official library, upb, does).
 * Every field is checked, asked for or not: a varint of more than 10
 * bytes, a length past the end, a wire type the field's type cannot have,
 * a string that is not UTF-8 (or holds a NUL: no PostgreSQL text can), a
 * message index the schema does not have, all make the payload invalid.
 *
 * Presence: a field with presence (proto2 singular, proto3 optional,
 * oneof members, messages and the wrappers) that is not on the wire is
 * ABSENT; a plain proto3 scalar is its default; a repeated field is an
 * empty array, a map an empty object.
 *
 * Value texts: integers, floats and bools as JSON tokens (SCALAR; NaN
 * and the infinities as STRING); strings; bytes as "\x" + hex (bytea's
 * input); enums by name (STRING) or, for an integer column, by number;
 * Timestamp as RFC 3339 (timestamptz's input reads it); Duration as
 * seconds ("1.5 s" for interval); wrappers as their value; messages,
 * maps, Struct, Value, ListValue as JSON (COMPOSITE) in protobuf's JSON
 * mapping with the .proto field names (64-bit integers as numbers, bytes
 * as base64); repeated fields as JSON arrays or, for an array column, a
 * PostgreSQL array literal.
 *
 * Bounds: a value's tree costs memory linear in the bytes (each value
 * takes at least one); messages nest at most KS_PB_MAX_DEPTH deep; the
 * text written (defaults of absent fields included) is bounded by a work
 * budget of 32 a byte of the payload plus 2 a byte of the schema plus
 * 65536, as for Avro.
 *
 * Over 1,000 lines on purpose, as avro_binary.c: the tree, its rendering
 * into slots and JSON, and the path walk share one representation and one
 * set of bounds, fuzzed as one unit without the backend; split, the
 * bounds would be kept in several places.
 *
 * Owns: the Protobuf wire format and the values it yields.  Must not:
 * depend on the backend beyond palloc and StringInfo (fuzzed standalone),
 * fetch schemas (schema_registry.c) or convert to column types (decode.c).
 *
 *-------------------------------------------------------------------------
 */
#ifdef FRONTEND
#include "postgres_fe.h"
#else
#include "postgres.h"
#endif

#include <math.h>

#include "common/base64.h"
#include "common/shortest_dec.h"
#include "lib/stringinfo.h"
#include "mb/pg_wchar.h"

#include "protobuf.h"
#include "slot_text.h"

#define PB_WORK_PER_BYTE 32
#define PB_WORK_PER_SCHEMA_BYTE 2
#define PB_WORK_BASE 65536

typedef struct Node Node;

typedef struct Item
{
	int			field;			/* index into the message's fields */
	uint32		seq;			/* order on the wire */
	uint64		v;				/* varint or fixed bits */
	const unsigned char *p;		/* length-delimited: the bytes */
	uint32		len;
	Node	   *sub;			/* a message, once finished */
} Item;

#define PB_NODE_INLINE 6			/* values kept in the node itself */

struct Node
{
	const PbMsg *m;
	Item	   *items;			/* inline, or palloc'd past PB_NODE_INLINE */
	int			n;
	int			cap;
	bool		unknown;		/* it had an unknown field (or enum value) */
	/* a small message's values: one allocation a node (the hot path) */
	Item		inline_items[PB_NODE_INLINE];
};

typedef struct Dec
{
	char	   *err;
	uint32		seq;
	int64		work;
	const KsWalkPaths *paths;
	const bool *pg_array;
	const bool *enum_number;
	KsSlotValue *out;
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
	va_list		ap;
	StringInfoData b;

	if (d->err)
		return false;
	initStringInfo(&b);
	va_start(ap, fmt);
	appendStringInfoVA(&b, fmt, ap);
	va_end(ap);
	d->err = b.data;
	return false;
}

static inline bool
spend(Dec *d, int64 n)
{
	d->work -= n;
	if (d->work < 0)
		return fail(d, "the message's values are larger than the work budget of its size allows");
	return true;
}

static bool
read_varint(Dec *d, const unsigned char **pp, const unsigned char *end, uint64 *v)
{
	const unsigned char *p = *pp;
	uint64		x = 0;

	for (int shift = 0; shift < 70; shift += 7)
	{
		if (p >= end)
			return fail(d, "a varint is cut off by the end of the data");
		if (shift == 63 && (*p & 0x7e))
			return fail(d, "a varint does not fit in 64 bits");
		x |= (uint64) (*p & 0x7f) << shift;
		if (!(*p++ & 0x80))
		{
			*pp = p;
			*v = x;
			return true;
		}
	}
	return fail(d, "a varint is longer than 10 bytes");
}

/* The wire type of a value of type t (not packed) */
static int
wire_of(PbType t)
{
	switch (t)
	{
		case PB_DOUBLE:
		case PB_FIXED64:
		case PB_SFIXED64:
			return 1;
		case PB_FLOAT:
		case PB_FIXED32:
		case PB_SFIXED32:
			return 5;
		case PB_STRING:
		case PB_BYTES:
		case PB_MESSAGE:
		case PB_GROUP:
			return 2;
		default:
			return 0;
	}
}

static const PbField *
field_by_number(const PbMsg *m, uint32 number, int *idx)
{
	int			lo = 0,
				hi = m->nfields - 1;

	while (lo <= hi)
	{
		int			mid = (lo + hi) / 2;
		const PbField *f = &m->fields[m->by_number[mid]];

		if ((uint32) f->number == number)
		{
			*idx = m->by_number[mid];
			return f;
		}
		if ((uint32) f->number < number)
			lo = mid + 1;
		else
			hi = mid - 1;
	}
	return NULL;
}

static bool
enum_known(const PbEnum *e, int32 v)
{
	for (int i = 0; i < e->n; i++)
		if (e->numbers[i] == v)
			return true;
	return false;
}

static void
add_item(Dec *d, Node *node, int field, uint64 v, const unsigned char *p, uint32 len)
{
	Item	   *it;

	if (node->n == node->cap)
	{
		if (node->items == node->inline_items)
		{
			node->cap = PB_NODE_INLINE * 2;
			node->items = palloc(sizeof(Item) * node->cap);
			memcpy(node->items, node->inline_items, sizeof(Item) * node->n);
		}
		else
		{
			node->cap *= 2;
			node->items = repalloc(node->items, sizeof(Item) * node->cap);
		}
	}
	it = &node->items[node->n++];
	it->field = field;
	it->seq = d->seq++;
	it->v = v;
	it->p = p;
	it->len = len;
	it->sub = NULL;
}

/* One value of wire type wt at *pp: v for numbers, p/len for the rest. */
static bool
read_value(Dec *d, int wt, const unsigned char **pp, const unsigned char *end,
		   uint64 *v, const unsigned char **p, uint32 *len)
{
	switch (wt)
	{
		case 0:
			return read_varint(d, pp, end, v);
		case 1:
		case 5:
			{
				int			n = wt == 1 ? 8 : 4;

				if (end - *pp < n)
					return fail(d, "a fixed-size value is cut off by the end of the data");
				*v = 0;
				for (int i = n - 1; i >= 0; i--)
					*v = (*v << 8) | (*pp)[i];
				*pp += n;
				return true;
			}
		case 2:
			{
				uint64		n;

				if (!read_varint(d, pp, end, &n))
					return false;
				if (n > (uint64) (end - *pp))
					return fail(d, "a length of %llu runs past the end of the data", (unsigned long long) n);
				*p = *pp;
				*len = (uint32) n;
				*pp += n;
				return true;
			}
		default:
			return fail(d, "wire type %d is not a value", wt);
	}
}

/* Skips an unknown group whose start tag was read (number: its field). */
static bool
skip_group(Dec *d, const unsigned char **pp, const unsigned char *end, uint64 number)
{
	int			depth = 1;

	while (depth > 0)
	{
		uint64		key,
					v;
		const unsigned char *p;
		uint32		len;
		int			wt;

		if (*pp >= end)
			return fail(d, "a group is not closed");
		if (!read_varint(d, pp, end, &key))
			return false;
		wt = (int) (key & 7);
		if (wt == 3)
		{
			if (++depth > KS_PB_MAX_DEPTH)
				return fail(d, "groups nest more than %d deep", KS_PB_MAX_DEPTH);
		}
		else if (wt == 4)
		{
			if (--depth == 0 && (key >> 3) != number)
				return fail(d, "a group of field %llu ends with the tag of field %llu",
							(unsigned long long) number, (unsigned long long) (key >> 3));
		}
		else if (!read_value(d, wt, pp, end, &v, &p, &len))
			return false;
	}
	return true;
}

static bool
check_string(Dec *d, const PbField *f, const unsigned char *p, uint32 len)
{
	if (memchr(p, '\0', len) != NULL)
		return fail(d, "string field \"%s\" contains a NUL byte", f->name);
	if (pg_encoding_verifymbstr(PG_UTF8, (const char *) p, (int) len) != (int) len)
		return fail(d, "string field \"%s\" is not valid UTF-8", f->name);
	return true;
}

/* The fields of a message's bytes [p, end), added to node. */
static bool
parse_into(Dec *d, Node *node, const unsigned char *p, const unsigned char *end)
{
	const PbMsg *m = node->m;

	while (p < end)
	{
		uint64		key,
					v = 0,
					number;
		int			wt,
					idx;
		const PbField *f;
		const unsigned char *vp = NULL;
		uint32		vlen = 0;

		if (!read_varint(d, &p, end, &key))
			return false;
		number = key >> 3;
		wt = (int) (key & 7);
		if (number == 0 || number > 536870911)
			return fail(d, "field number %llu is not valid", (unsigned long long) number);
		if (wt == 6 || wt == 7)
			return fail(d, "wire type %d of field %llu does not exist", wt, (unsigned long long) number);
		if (wt == 4)
			return fail(d, "an end-group tag of field %llu has no group", (unsigned long long) number);
		f = field_by_number(m, (uint32) number, &idx);
		if (f == NULL)
		{
			/* unknown: skipped */
			node->unknown = true;
			if (wt == 3)
			{
				if (!skip_group(d, &p, end, number))
					return false;
			}
			else if (!read_value(d, wt, &p, end, &v, &vp, &vlen))
				return false;
			continue;
		}
		if (wt == wire_of(f->type))
		{
			if (!read_value(d, wt, &p, end, &v, &vp, &vlen))
				return false;
			if (f->type == PB_STRING && !check_string(d, f, vp, vlen))
				return false;
			if (f->type == PB_ENUM && f->en->closed && !enum_known(f->en, (int32) v))
			{
				node->unknown = true;
				continue;
			}
			add_item(d, node, idx, v, vp, vlen);
		}
		else if (wt == 2 && f->repeated && wire_of(f->type) != 2)
		{
			/* packed */
			const unsigned char *q,
					   *qend;

			if (!read_value(d, 2, &p, end, &v, &vp, &vlen))
				return false;
			q = vp;
			qend = vp + vlen;
			while (q < qend)
			{
				if (!read_value(d, wire_of(f->type), &q, qend, &v, &vp, &vlen))
					return false;
				if (f->type == PB_ENUM && f->en->closed && !enum_known(f->en, (int32) v))
				{
					node->unknown = true;
					continue;
				}
				add_item(d, node, idx, v, NULL, 0);
			}
		}
		else
			return fail(d, "field \"%s\" (number %d) has wire type %d, which its type cannot have",
						f->name, f->number, wt);
	}
	return true;
}

static int
item_cmp(const void *a, const void *b)
{
	const Item *x = a;
	const Item *y = b;

	if (x->field != y->field)
		return x->field < y->field ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static bool finish(Dec *d, Node *node, int depth);

/* the oneof of value i of node, or -1 (none, or dropped) */
static inline int
oneof_of(const Node *node, int i)
{
	int			f = node->items[i].field;

	return f < 0 ? -1 : node->m->fields[f].oneof;
}

/* A message of type m from one or more chunks (a merge), finished. */
static Node *
sub_node(Dec *d, const PbMsg *m, Item *chunks, int nchunks, int depth)
{
	Node	   *n = palloc(sizeof(Node));

	/* the inline values are written before they are read: not zeroed */
	n->m = m;
	n->items = n->inline_items;
	n->n = 0;
	n->cap = PB_NODE_INLINE;
	n->unknown = false;
	if (depth >= KS_PB_MAX_DEPTH)
	{
		fail(d, "messages nest more than %d deep", KS_PB_MAX_DEPTH);
		return NULL;
	}
	for (int i = 0; i < nchunks; i++)
		if (!parse_into(d, n, chunks[i].p, chunks[i].p + chunks[i].len))
			return NULL;
	if (!finish(d, n, depth))
		return NULL;
	return n;
}

/*
 * Sorts a node's values by field and applies protobuf's rules: the last
 * value of a singular field, a singular message's values merged, a
 * oneof's last member.  Messages below are parsed here, so every byte is
 * checked.
 */
static bool
finish(Dec *d, Node *node, int depth)
{
	const PbMsg *m = node->m;
	int			w = 0;

	if (node->n == 0)
		return true;
	/* on the wire in field order, as writers do: no sort needed */
	for (int i = 1; i < node->n; i++)
		if (node->items[i].field < node->items[i - 1].field)
		{
			qsort(node->items, node->n, sizeof(Item), item_cmp);
			break;
		}

	if (m->noneofs > 0)
	{
		for (int o = 0; o < m->noneofs; o++)
		{
			int			winner = -1;
			uint32		last = 0,
						cutoff = 0;
			bool		any = false;

			for (int i = 0; i < node->n; i++)
				if (oneof_of(node, i) == o && (!any || node->items[i].seq > last))
				{
					any = true;
					last = node->items[i].seq;
					winner = node->items[i].field;
				}
			if (!any)
				continue;
			for (int i = 0; i < node->n; i++)
				if (oneof_of(node, i) == o && node->items[i].field != winner &&
					node->items[i].seq >= cutoff)
					cutoff = node->items[i].seq + 1;
			for (int i = 0; i < node->n; i++)
				if (oneof_of(node, i) == o &&
					(node->items[i].field != winner || node->items[i].seq < cutoff))
					node->items[i].field = -1;
		}
	}

	for (int i = 0; i < node->n;)
	{
		int			j = i;
		const PbField *f;

		while (j < node->n && node->items[j].field == node->items[i].field)
			j++;
		if (node->items[i].field < 0)
		{
			i = j;
			continue;
		}
		f = &m->fields[node->items[i].field];
		if (f->repeated)
		{
			for (int k = i; k < j; k++)
			{
				node->items[w] = node->items[k];
				if (f->type == PB_MESSAGE &&
					(node->items[w].sub = sub_node(d, f->msg, &node->items[k], 1, depth + 1)) == NULL)
					return false;
				/* a map entry with an unknown field is dropped, as upb does */
				if (f->map && node->items[w].sub->unknown)
					continue;
				w++;
			}
		}
		else
		{
			Node	   *sub = NULL;

			if (f->type == PB_MESSAGE && (sub = sub_node(d, f->msg, &node->items[i], j - i, depth + 1)) == NULL)
				return false;
			node->items[w] = node->items[j - 1];
			node->items[w].sub = sub;
			w++;
		}
		i = j;
	}
	node->n = w;
	return true;
}

/* The values of field index fi in node: *n of them from the returned one */
static Item *
values_of(const Node *node, int fi, int *n)
{
	int			lo = 0,
				hi = node->n;

	while (lo < hi)
	{
		int			mid = (lo + hi) / 2;

		if (node->items[mid].field < fi)
			lo = mid + 1;
		else
			hi = mid;
	}
	*n = 0;
	while (lo + *n < node->n && node->items[lo + *n].field == fi)
		(*n)++;
	return *n ? &node->items[lo] : NULL;
}

/* ---- values as text ---- */

static int64
int_value(PbType t, uint64 v)
{
	switch (t)
	{
		case PB_INT32:
		case PB_SFIXED32:
		case PB_ENUM:
			return (int32) (uint32) v;
		case PB_UINT32:
		case PB_FIXED32:
			return (uint32) v;
		case PB_SINT32:
			return (int32) (((uint32) v >> 1) ^ (0u - ((uint32) v & 1)));
		case PB_SINT64:
			return (int64) ((v >> 1) ^ (0 - (v & 1)));
		default:
			return (int64) v;
	}
}

/* v >= 0 in decimal, zero-padded to width digits */
static void
append_digits(StringInfo b, int64 v, int width)
{
	char		buf[24];
	int			n = 0;

	do
	{
		buf[n++] = (char) ('0' + v % 10);
		v /= 10;
	} while (v > 0 || n < width);
	enlargeStringInfo(b, n);
	while (n > 0)
		b->data[b->len++] = buf[--n];
	b->data[b->len] = '\0';
}

static void
append_double(StringInfo b, double x, bool single, bool quoted)
{
	char		buf[32];

	if (isnan(x) || isinf(x))
	{
		const char *s = isnan(x) ? "NaN" : x > 0 ? "Infinity" : "-Infinity";

		appendStringInfo(b, quoted ? "\"%s\"" : "%s", s);
		return;
	}
	if (single)
		float_to_shortest_decimal_buf((float) x, buf);
	else
		double_to_shortest_decimal_buf(x, buf);
	appendStringInfoString(b, buf);
}

static double
float_value(PbType t, uint64 v)
{
	if (t == PB_FLOAT)
	{
		uint32		bits = (uint32) v;
		float		f;

		memcpy(&f, &bits, sizeof(f));
		return f;
	}
	else
	{
		double		x;

		memcpy(&x, &v, sizeof(x));
		return x;
	}
}

static const char *
enum_name(const PbEnum *e, int32 v)
{
	for (int i = 0; i < e->n; i++)
		if (e->numbers[i] == v)
			return e->names[i];
	return NULL;
}

static void
append_hex(StringInfo b, const unsigned char *p, uint32 n)
{
	static const char hex[] = "0123456789abcdef";

	appendStringInfoString(b, "\\x");
	for (uint32 i = 0; i < n; i++)
	{
		appendStringInfoChar(b, hex[p[i] >> 4]);
		appendStringInfoChar(b, hex[p[i] & 15]);
	}
}

static void
append_base64(StringInfo b, const unsigned char *p, uint32 n)
{
	int			need = pg_b64_enc_len((int) n);

	enlargeStringInfo(b, need + 2);
	appendStringInfoChar(b, '"');
	b->len += pg_b64_encode((const void *) p, (int) n, b->data + b->len, need);
	appendStringInfoChar(b, '"');
}

static bool json_message(Dec *d, const PbMsg *m, const Node *node, StringInfo b, int depth);
static bool json_field(Dec *d, const PbField *f, const Item *it, int n, StringInfo b, int depth);

/*
 * A scalar (not a message) as JSON (json) or as a slot's text; it (NULL:
 * the default).  *kind: the slot kind.
 */
static void
scalar_text(Dec *d, const PbField *f, const Item *it, StringInfo b, bool json,
			bool enum_number, KsSlotKind *kind)
{
	uint64		v = it ? it->v : 0;

	*kind = KS_SLOT_SCALAR;
	switch (f->type)
	{
		case PB_DOUBLE:
		case PB_FLOAT:
			{
				double		x = float_value(f->type, v);

				if (isnan(x) || isinf(x))
					*kind = KS_SLOT_STRING;
				append_double(b, x, f->type == PB_FLOAT, json);
				break;
			}
		case PB_BOOL:
			appendStringInfoString(b, v ? "true" : "false");
			break;
		case PB_UINT64:
		case PB_FIXED64:
			appendStringInfo(b, UINT64_FORMAT, v);
			break;
		case PB_STRING:
			*kind = KS_SLOT_STRING;
			if (json)
				append_json_string(b, it ? (const char *) it->p : "", it ? it->len : 0);
			else if (it)
				appendBinaryStringInfo(b, (const char *) it->p, (int) it->len);
			break;
		case PB_BYTES:
			*kind = KS_SLOT_STRING;
			if (json)
				append_base64(b, it ? it->p : NULL, it ? it->len : 0);
			else
				append_hex(b, it ? it->p : NULL, it ? it->len : 0);
			break;
		case PB_ENUM:
			{
				int32		e = (int32) int_value(PB_ENUM, it ? v : (uint64) (int64) f->en->numbers[0]);
				const char *name = enum_number ? NULL : enum_name(f->en, e);

				if (name)
				{
					*kind = KS_SLOT_STRING;
					if (json)
						append_json_string(b, name, strlen(name));
					else
						appendStringInfoString(b, name);
				}
				else
					appendStringInfo(b, "%d", e);
				break;
			}
		default:
			{
				int64		x = int_value(f->type, v);

				if (x < 0)
				{
					appendStringInfoChar(b, '-');
					/* INT64_MIN has no positive twin */
					if (x == PG_INT64_MIN)
					{
						appendStringInfoString(b, "9223372036854775808");
						break;
					}
					x = -x;
				}
				append_digits(b, x, 1);
			}
	}
	(void) d;
}

/* days since 1970-01-01 -> y, m, d (the proleptic Gregorian calendar) */
static void
civil(int64 z, int64 *y, int *mo, int *dd)
{
	int64		era,
				doe,
				yoe,
				doy,
				mp;

	z += 719468;
	era = (z >= 0 ? z : z - 146096) / 146097;
	doe = z - era * 146097;
	yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
	doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
	mp = (5 * doy + 2) / 153;
	*dd = (int) (doy - (153 * mp + 2) / 5 + 1);
	*mo = (int) (mp < 10 ? mp + 3 : mp - 9);
	*y = yoe + era * 400 + (*mo <= 2);
}

/* .nnn, .nnnnnn or .nnnnnnnnn as protobuf's JSON writes them; nothing for 0 */
static void
append_nanos(StringInfo b, int32 nanos)
{
	if (nanos == 0)
		return;
	appendStringInfoChar(b, '.');
	if (nanos % 1000000 == 0)
		append_digits(b, nanos / 1000000, 3);
	else if (nanos % 1000 == 0)
		append_digits(b, nanos / 1000, 6);
	else
		append_digits(b, nanos, 9);
}

/* seconds and nanos of a Timestamp or Duration node */
static void
seconds_nanos(const Node *node, int64 *secs, int32 *nanos)
{
	int			n;
	Item	   *it;

	*secs = 0;
	*nanos = 0;
	for (int fi = 0; fi < node->m->nfields; fi++)
	{
		const PbField *f = &node->m->fields[fi];

		it = values_of(node, fi, &n);
		if (it == NULL)
			continue;
		if (f->number == 1 && f->type == PB_INT64)
			*secs = int_value(f->type, it[n - 1].v);
		else if (f->number == 2 && f->type == PB_INT32)
			*nanos = (int32) int_value(f->type, it[n - 1].v);
	}
}

/* 0 <= v < 100 as two digits at t */
static inline void
two_digits(char *t, int v)
{
	t[0] = (char) ('0' + v / 10);
	t[1] = (char) ('0' + v % 10);
}

static bool
timestamp_text(Dec *d, const Node *node, StringInfo b, bool json)
{
	int64		secs,
				days,
				rem,
				y;
	int32		nanos;
	int			mo,
				dd;

	seconds_nanos(node, &secs, &nanos);
	if (secs < INT64CONST(-62135596800) || secs > INT64CONST(253402300799))
		return fail(d, "a Timestamp of %lld seconds is outside years 1 to 9999", (long long) secs);
	if (nanos < 0 || nanos > 999999999)
		return fail(d, "a Timestamp has %d nanoseconds", nanos);
	days = secs >= 0 ? secs / 86400 : -((-secs + 86399) / 86400);
	rem = secs - days * 86400;
	civil(days, &y, &mo, &dd);
	{
		/* "YYYY-MM-DDTHH:MM:SS" in one append (years 1 to 9999: 4 digits) */
		char		t[20];
		int			hh = (int) (rem / 3600),
					mi = (int) (rem / 60 % 60),
					ss = (int) (rem % 60);

		t[0] = '0' + (char) (y / 1000);
		t[1] = '0' + (char) (y / 100 % 10);
		t[2] = '0' + (char) (y / 10 % 10);
		t[3] = '0' + (char) (y % 10);
		t[4] = '-';
		two_digits(t + 5, mo);
		t[7] = '-';
		two_digits(t + 8, dd);
		t[10] = 'T';
		two_digits(t + 11, hh);
		t[13] = ':';
		two_digits(t + 14, mi);
		t[16] = ':';
		two_digits(t + 17, ss);
		if (json)
			appendStringInfoChar(b, '"');
		appendBinaryStringInfo(b, t, 19);
	}
	append_nanos(b, nanos);
	appendStringInfoChar(b, 'Z');
	if (json)
		appendStringInfoChar(b, '"');
	return true;
}

static bool
duration_text(Dec *d, const Node *node, StringInfo b, bool json)
{
	int64		secs;
	int32		nanos;

	seconds_nanos(node, &secs, &nanos);
	if (secs < INT64CONST(-315576000000) || secs > INT64CONST(315576000000) ||
		nanos < -999999999 || nanos > 999999999 || (secs > 0 && nanos < 0) || (secs < 0 && nanos > 0))
		return fail(d, "a Duration of %lld seconds and %d nanoseconds is not valid", (long long) secs, nanos);
	if (json)
		appendStringInfoChar(b, '"');
	if (secs < 0 || nanos < 0)
		appendStringInfoChar(b, '-');
	appendStringInfo(b, INT64_FORMAT, secs < 0 ? -secs : secs);
	append_nanos(b, nanos < 0 ? -nanos : nanos);
	appendStringInfoString(b, json ? "s\"" : " s");
	return true;
}

/* The one value field (number 1) of a wrapper, and its item or NULL */
static const PbField *
wrapped(const Node *node, const Item **it)
{
	int			n;
	Item	   *v = values_of(node, 0, &n);

	*it = v ? &v[n - 1] : NULL;
	return &node->m->fields[0];
}

static const Node empty_node_of_nothing = {0};

/* The values it[0..n) of field f as JSON (none: its default or empty) */
static bool
json_field(Dec *d, const PbField *f, const Item *it, int n, StringInfo b, int depth)
{
	if (f->map)
	{
		appendStringInfoChar(b, '{');
		for (int k = 0; k < n; k++)
		{
			const PbMsg *em = f->msg;
			int			nk,
						nv;
			const Item *key = values_of(it[k].sub, 0, &nk);
			const Item *val = values_of(it[k].sub, 1, &nv);
			KsSlotKind kind;
			StringInfoData kb;

			if (k > 0)
				appendStringInfoChar(b, ',');
			initStringInfo(&kb);
			scalar_text(d, &em->fields[0], key ? &key[nk - 1] : NULL, &kb, false, false, &kind);
			append_json_string(b, kb.data, kb.len);
			pfree(kb.data);
			appendStringInfoChar(b, ':');
			if (em->fields[1].type == PB_MESSAGE)
			{
				if (!json_message(d, em->fields[1].msg, val ? val[nv - 1].sub : NULL, b, depth + 1))
					return false;
			}
			else
				scalar_text(d, &em->fields[1], val ? &val[nv - 1] : NULL, b, true, false, &kind);
		}
		appendStringInfoChar(b, '}');
	}
	else if (f->repeated)
	{
		appendStringInfoChar(b, '[');
		for (int k = 0; k < n; k++)
		{
			KsSlotKind kind;

			if (k > 0)
				appendStringInfoChar(b, ',');
			if (!spend(d, 1))
				return false;
			if (f->type == PB_MESSAGE)
			{
				if (!json_message(d, f->msg, it[k].sub, b, depth + 1))
					return false;
			}
			else
				scalar_text(d, f, &it[k], b, true, false, &kind);
		}
		appendStringInfoChar(b, ']');
	}
	else if (f->type == PB_MESSAGE)
	{
		if (!json_message(d, f->msg, it[n - 1].sub, b, depth + 1))
			return false;
	}
	else
	{
		KsSlotKind kind;

		scalar_text(d, f, it ? &it[n - 1] : NULL, b, true, false, &kind);
	}
	return true;
}

/*
 * A message value as JSON; node NULL is the default instance (protobuf's
 * rule for a map's absent value).
 */
static bool
json_message(Dec *d, const PbMsg *m, const Node *node, StringInfo b, int depth)
{
	Node		empty = empty_node_of_nothing;
	bool		first = true;

	if (depth >= KS_PB_MAX_DEPTH)
		return fail(d, "messages nest more than %d deep", KS_PB_MAX_DEPTH);
	if (node == NULL)
	{
		empty.m = m;
		node = &empty;
	}
	if (!spend(d, 1 + m->nfields))
		return false;
	switch (m->wkt)
	{
		case PB_WKT_TIMESTAMP:
			return timestamp_text(d, node, b, true);
		case PB_WKT_DURATION:
			return duration_text(d, node, b, true);
		case PB_WKT_WRAPPER:
			{
				const Item *it;
				const PbField *f = wrapped(node, &it);
				KsSlotKind kind;

				scalar_text(d, f, it, b, true, false, &kind);
				return true;
			}
		case PB_WKT_VALUE:
			{
				for (int i = 0; i < node->n; i++)
				{
					const Item *it = &node->items[i];
					const PbField *f = &m->fields[it->field];
					KsSlotKind kind;

					if (f->oneof < 0)
						continue;
					if (f->number == 1)
						appendStringInfoString(b, "null");
					else if (f->type == PB_MESSAGE)
						return json_message(d, f->msg, it->sub, b, depth + 1);
					else
					{
						if (f->type == PB_DOUBLE && (isnan(float_value(PB_DOUBLE, it->v)) ||
													 isinf(float_value(PB_DOUBLE, it->v))))
							return fail(d, "a google.protobuf.Value holds %s, which JSON cannot",
										isnan(float_value(PB_DOUBLE, it->v)) ? "NaN" : "an infinity");
						scalar_text(d, f, it, b, true, false, &kind);
					}
					return true;
				}
				appendStringInfoString(b, "null");
				return true;
			}
		case PB_WKT_STRUCT:
		case PB_WKT_LIST:
			{
				int			n;
				Item	   *it = values_of(node, 0, &n);

				return json_field(d, &m->fields[0], it, n, b, depth);
			}
		default:
			break;
	}

	appendStringInfoChar(b, '{');
	for (int fi = 0; fi < m->nfields; fi++)
	{
		const PbField *f = &m->fields[fi];
		int			n;
		Item	   *it = values_of(node, fi, &n);

		if (it == NULL && f->presence)
			continue;
		if (!spend(d, strlen(f->name)))
			return false;
		if (!first)
			appendStringInfoChar(b, ',');
		first = false;
		append_json_string(b, f->name, strlen(f->name));
		appendStringInfoChar(b, ':');
		if (!json_field(d, f, it, n, b, depth))
			return false;
	}
	appendStringInfoChar(b, '}');
	return true;
}

/* A message value (not repeated) as a slot: WKTs as their values */
static bool
message_slot(Dec *d, const PbMsg *m, const Node *node, StringInfo b, KsSlotKind *kind, int depth)
{
	switch (m->wkt)
	{
		case PB_WKT_TIMESTAMP:
			*kind = KS_SLOT_STRING;
			return timestamp_text(d, node, b, false);
		case PB_WKT_DURATION:
			*kind = KS_SLOT_STRING;
			return duration_text(d, node, b, false);
		case PB_WKT_WRAPPER:
			{
				const Item *it;
				const PbField *f = wrapped(node, &it);

				scalar_text(d, f, it, b, false, false, kind);
				return true;
			}
		case PB_WKT_VALUE:
			{
				for (int i = 0; i < node->n; i++)
				{
					const PbField *f = &m->fields[node->items[i].field];

					if (f->oneof < 0)
						continue;
					if (f->number == 1)
					{
						*kind = KS_SLOT_NULL;
						return true;
					}
					if (f->type != PB_MESSAGE)
					{
						scalar_text(d, f, &node->items[i], b, false, false, kind);
						return true;
					}
					break;
				}
				break;
			}
		default:
			break;
	}
	*kind = KS_SLOT_COMPOSITE;
	return json_message(d, m, node, b, depth);
}

/* Field f of node (its values it[0..n)) into slot s */
static bool
capture(Dec *d, const PbField *f, const Item *it, int n, int s, int depth)
{
	KsSlotValue *v = &d->out[s];
	StringInfoData b;
	KsSlotKind	kind = KS_SLOT_COMPOSITE;
	bool		as_number = d->enum_number && d->enum_number[s];

	if (it == NULL && f->presence)
		return true;			/* ABSENT */
	init_small(&b);
	if (f->repeated && !f->map && d->pg_array && d->pg_array[s])
	{
		appendStringInfoChar(&b, '{');
		for (int k = 0; k < n; k++)
		{
			StringInfoData e;
			KsSlotKind	ek;

			if (k > 0)
				appendStringInfoChar(&b, ',');
			if (!spend(d, 1))
				return false;
			init_small(&e);
			if (f->type == PB_MESSAGE)
			{
				if (!message_slot(d, f->msg, it[k].sub, &e, &ek, depth + 1))
					return false;
			}
			else
				scalar_text(d, f, &it[k], &e, false, as_number, &ek);
			if (ek == KS_SLOT_NULL)
				appendStringInfoString(&b, "NULL");
			else
				append_array_element(&b, e.data, e.len);
			pfree(e.data);
		}
		appendStringInfoChar(&b, '}');
		kind = KS_SLOT_SCALAR;
	}
	else if (f->repeated)
	{
		if (!json_field(d, f, it, n, &b, depth))
			return false;
	}
	else if (f->type == PB_MESSAGE)
	{
		if (!message_slot(d, f->msg, it[n - 1].sub, &b, &kind, depth))
			return false;
	}
	else
		scalar_text(d, f, it ? &it[n - 1] : NULL, &b, false, as_number, &kind);
	if (v->text)
		pfree(v->text);
	v->kind = kind;
	v->text = kind == KS_SLOT_NULL ? NULL : b.data;
	return true;
}

/* The map entry of field f (values it[0..n)) whose key reads seg: the last one */
static const Node *
map_entry(Dec *d, const PbField *f, const Item *it, int n, const char *seg)
{
	const Node *found = NULL;
	StringInfoData kb;

	init_small(&kb);
	for (int k = 0; k < n; k++)
	{
		int			nk;
		const Item *key = values_of(it[k].sub, 0, &nk);
		KsSlotKind	kind;

		resetStringInfo(&kb);
		scalar_text(d, &f->msg->fields[0], key ? &key[nk - 1] : NULL, &kb, false, false, &kind);
		if (strcmp(kb.data, seg) == 0)
			found = it[k].sub;
	}
	pfree(kb.data);
	return found;
}

/* Slot s's path from the root message */
static bool
walk_path(Dec *d, const Node *node, int s)
{
	const KsPath *path = &d->paths->paths[s];

	for (int level = 0; level < path->nsegs; level++)
	{
		const PbMsg *m = node->m;
		const PbField *f = NULL;
		int			fi,
					n;
		const Item *it;

		if (!spend(d, m->nfields))
			return false;
		for (fi = 0; fi < m->nfields; fi++)
			if (strcmp(m->fields[fi].name, path->segs[level]) == 0)
			{
				f = &m->fields[fi];
				break;
			}
		if (f == NULL)
			return true;		/* not in the writer's schema: ABSENT */
		it = values_of(node, fi, &n);
		if (level == path->nsegs - 1)
			return capture(d, f, it, n, s, level);
		if (f->map)
		{
			const Node *entry = map_entry(d, f, it, n, path->segs[++level]);
			const PbField *vf = &f->msg->fields[1];
			int			nv;
			const Item *val;

			if (entry == NULL)
				return true;
			val = values_of(entry, 1, &nv);
			if (level == path->nsegs - 1)
			{
				/* a map's value is never absent: its default */
				if (vf->type == PB_MESSAGE && val == NULL)
				{
					KsSlotValue *v = &d->out[s];
					StringInfoData b;

					initStringInfo(&b);
					if (!json_message(d, vf->msg, NULL, &b, level))
						return false;
					v->kind = KS_SLOT_COMPOSITE;
					v->text = b.data;
					return true;
				}
				if (vf->type != PB_MESSAGE)
				{
					PbField		plain = *vf;

					plain.presence = false;
					return capture(d, &plain, val, nv, s, level);
				}
				return capture(d, vf, val, nv, s, level);
			}
			if (vf->type != PB_MESSAGE || val == NULL || vf->msg->wkt != PB_WKT_NONE)
				return true;
			node = val[nv - 1].sub;
			continue;
		}
		if (f->repeated || f->type != PB_MESSAGE || it == NULL || f->msg->wkt != PB_WKT_NONE)
			return true;
		node = it[n - 1].sub;
	}
	return true;
}

/* Frees a decoded tree (its values point into the message: not those) */
static void
free_node(Node *node)
{
	if (node == NULL)
		return;
	for (int i = 0; i < node->n; i++)
		free_node(node->items[i].sub);
	if (node->items != node->inline_items)
		pfree(node->items);
	pfree(node);
}

/* The message-index list: the message type the payload is written with */
static const PbMsg *
read_indexes(Dec *d, const KsPbSchema *s, const unsigned char **p, const unsigned char *end)
{
	uint64		raw;
	int64		count;
	const PbMsg *m = NULL;

	if (!read_varint(d, p, end, &raw))
	{
		d->err = psprintf("the message-index list is cut off (%s)", d->err);
		return NULL;
	}
	count = (int64) ((raw >> 1) ^ (0 - (raw & 1)));
	if (count == 0)
		return s->messages[0];
	if (count < 0 || count > KS_PB_MAX_DEPTH)
	{
		fail(d, "the message-index list has %lld entries", (long long) count);
		return NULL;
	}
	for (int64 i = 0; i < count; i++)
	{
		int64		idx;
		int			have = m ? m->nnested : s->nmessages;

		if (!read_varint(d, p, end, &raw))
		{
			d->err = psprintf("the message-index list is cut off (%s)", d->err);
			return NULL;
		}
		idx = (int64) ((raw >> 1) ^ (0 - (raw & 1)));
		if (idx < 0 || idx >= have)
		{
			if (m)
				fail(d, "message index %lld does not exist: %s has %d nested message types",
					 (long long) idx, m->full, have);
			else
				fail(d, "message index %lld does not exist: the schema has %d top-level message types",
					 (long long) idx, have);
			return NULL;
		}
		m = m ? m->nested[idx] : s->messages[idx];
	}
	return m;
}

/* The root of a payload, parsed and checked; NULL with d->err */
static Node *
read_root(Dec *d, const KsPbSchema *s, const char *data, size_t len)
{
	const unsigned char *p = (const unsigned char *) data;
	const unsigned char *end = p + len;
	const PbMsg *m;
	Item		chunk;

	d->work = (int64) len * PB_WORK_PER_BYTE + (int64) s->text_len * PB_WORK_PER_SCHEMA_BYTE + PB_WORK_BASE;
	if ((m = read_indexes(d, s, &p, end)) == NULL)
		return NULL;
	if (m->map_entry)
	{
		fail(d, "the message index names a map entry, not a message");
		return NULL;
	}
	memset(&chunk, 0, sizeof(chunk));
	chunk.p = p;
	chunk.len = (uint32) (end - p);
	return sub_node(d, m, &chunk, 1, 0);
}

bool
ks_pb_decode(const KsPbSchema *s, const KsWalkPaths *paths, const bool *pg_array,
			 const bool *enum_number, const char *data, size_t len, KsSlotValue *out, char **detail)
{
	Dec			d;
	Node	   *root;
	bool		ok = true;

	*detail = NULL;
	slots_absent(out, paths->nslots, false);
	memset(&d, 0, sizeof(d));
	d.paths = paths;
	d.pg_array = pg_array;
	d.enum_number = enum_number;
	d.out = out;
	if (len > PG_UINT32_MAX)
		ok = fail(&d, "the message has more than 4 GB");
	else if ((root = read_root(&d, s, data, len)) == NULL)
		ok = false;
	else
	{
		for (int i = 0; i < paths->nslots && ok; i++)
			if (paths->paths[i].nsegs >= 1)
				ok = walk_path(&d, root, i);
		free_node(root);
	}
	if (!ok)
	{
		slots_absent(out, paths->nslots, true);
		*detail = d.err;
		return false;
	}
	return true;
}

char *
ks_pb_to_json(const KsPbSchema *s, const char *data, size_t len, char **detail)
{
	Dec			d;
	Node	   *root;
	StringInfoData b;

	memset(&d, 0, sizeof(d));
	*detail = NULL;
	if (len > PG_UINT32_MAX || (root = read_root(&d, s, data, len)) == NULL)
	{
		*detail = d.err ? d.err : pstrdup("the message has more than 4 GB");
		return NULL;
	}
	initStringInfo(&b);
	if (!json_message(&d, root->m, root, &b, 0))
	{
		*detail = d.err;
		pfree(b.data);
		free_node(root);
		return NULL;
	}
	free_node(root);
	return b.data;
}
