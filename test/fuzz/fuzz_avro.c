/*-------------------------------------------------------------------------
 *
 * fuzz_avro.c
 *		libFuzzer target for src/decode/avro_binary.c (ks_avro_schema_parse,
 *		ks_avro_decode), differential against Apache Avro's C library.
 *
 * Input: byte 0 picks a schema of the table below (or, with its top bit,
 * makes the rest a schema text for the schema parser: it must not crash,
 * and what it accepts must decode without crashing); byte 1 picks paths;
 * the rest is an Avro datum.  The rest is also read as choices that build
 * a value with libavro's generic values, written by libavro's writer.
 *
 * Checks (abort() on a violation, a crash for libFuzzer):
 *	- the result is OK, INVALID (with a detail) or NOT_A_RECORD; on an
 *	  error every slot is ABSENT; on OK every captured slot has a valid kind
 *	  and text, and COMPOSITE texts are JSON (pg_parse_json)
 *	- differentially, on every datum our decoder accepts: libavro reads it
 *	  too, with no byte left over, and each top-level field rendered from
 *	  libavro's value (the same rendering: numbers, strings, "\x" hex
 *	  bytes, enum symbols, JSON records and maps) equals our slot's text
 *	- every datum libavro writes from a generated value, ours accepts with
 *	  the same texts (strings are made valid UTF-8 without NUL: ours
 *	  refuses the others by design, libavro does not look)
 *	- all memory of one input is freed with the input (an arena, as the
 *	  batch memory context in the backend)
 *
 * The schemas of the differential carry no logical types (libavro 1.11
 * drops them); those with logical types are fuzzed for the other checks.
 * Built and run by test/fuzz/run.sh (NAME=fuzz_avro).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres_fe.h"

#include <stdint.h>

#include <avro.h>

#include "common/jsonapi.h"
#include "common/shortest_dec.h"
#include "lib/stringinfo.h"
#include "mb/pg_wchar.h"

#include "avro_binary.h"

int			LLVMFuzzerTestOneInput(const uint8_t *buf, size_t size);

static unsigned long n_accepted;	/* raw datums ours accepted: compared */
static unsigned long n_generated;	/* datums libavro wrote: compared */

static void
die(const char *what)
{
	fprintf(stderr, "fuzz_avro: invariant violated: %s\n", what);
	abort();
}

#include "fuzz_arena.h"

#ifdef KS_FUZZ_NEED_JSON_ERRDETAIL
char *
json_errdetail(JsonParseErrorType error, JsonLexContext *lex)
{
	return psprintf("JSON parse error %d at line %d", (int) error, lex->line_number);
}
#endif

/* ---- the schemas ---- */

typedef struct FuzzSchema
{
	const char *json;
	bool		differential;
	bool		has_map;		/* raw datums may repeat a map key (libavro keeps one) */
	const char *paths[8];		/* top-level fields first, then nested */
	int			ntop;			/* how many of paths are top-level fields */
} FuzzSchema;

static const FuzzSchema schemas[] = {
	{"{\"type\":\"record\",\"name\":\"All\",\"fields\":["
		"{\"name\":\"n\",\"type\":\"null\"},{\"name\":\"b\",\"type\":\"boolean\"},"
		"{\"name\":\"i\",\"type\":\"int\"},{\"name\":\"l\",\"type\":\"long\"},"
		"{\"name\":\"f\",\"type\":\"float\"},{\"name\":\"d\",\"type\":\"double\"},"
		"{\"name\":\"s\",\"type\":\"string\"},{\"name\":\"y\",\"type\":\"bytes\"}]}",
		true, false, {"n", "b", "i", "l", "f", "d", "s", "y"}, 8},
	{"{\"type\":\"record\",\"name\":\"C\",\"fields\":["
		"{\"name\":\"e\",\"type\":{\"type\":\"enum\",\"name\":\"E\",\"symbols\":[\"A\",\"B\",\"C\"]}},"
		"{\"name\":\"x\",\"type\":{\"type\":\"fixed\",\"name\":\"F\",\"size\":3}},"
		"{\"name\":\"a\",\"type\":{\"type\":\"array\",\"items\":[\"null\",\"string\"]}},"
		"{\"name\":\"m\",\"type\":{\"type\":\"map\",\"values\":{\"type\":\"record\",\"name\":\"In\","
		"\"fields\":[{\"name\":\"p\",\"type\":\"int\"},{\"name\":\"q\",\"type\":\"bytes\"}]}}},"
		"{\"name\":\"u\",\"type\":[\"null\",\"long\",\"string\",\"E\"]}]}",
		true, true, {"e", "x", "a", "m", "u", "m.k.p", "m.k"}, 5},
	{"{\"type\":\"record\",\"name\":\"Node\",\"fields\":[{\"name\":\"v\",\"type\":\"int\"},"
		"{\"name\":\"next\",\"type\":[\"null\",\"Node\"]}]}",
		true, false, {"v", "next", "next.v", "next.next.next.v"}, 2},
	{"{\"type\":\"record\",\"name\":\"Deep\",\"fields\":["
		"{\"name\":\"aa\",\"type\":{\"type\":\"array\",\"items\":{\"type\":\"array\",\"items\":\"int\"}}},"
		"{\"name\":\"mm\",\"type\":{\"type\":\"map\",\"values\":{\"type\":\"map\",\"values\":\"string\"}}},"
		"{\"name\":\"r\",\"type\":{\"type\":\"record\",\"name\":\"R\",\"fields\":[{\"name\":\"z\",\"type\":\"double\"}]}}]}",
		true, true, {"aa", "mm", "r", "r.z", "mm.a.b"}, 3},
	{"{\"type\":\"record\",\"name\":\"Lt\",\"fields\":["
		"{\"name\":\"dec\",\"type\":{\"type\":\"bytes\",\"logicalType\":\"decimal\",\"precision\":30,\"scale\":4}},"
		"{\"name\":\"decf\",\"type\":{\"type\":\"fixed\",\"name\":\"D\",\"size\":9,\"logicalType\":\"decimal\",\"precision\":20,\"scale\":0}},"
		"{\"name\":\"dt\",\"type\":{\"type\":\"int\",\"logicalType\":\"date\"}},"
		"{\"name\":\"tm\",\"type\":{\"type\":\"int\",\"logicalType\":\"time-millis\"}},"
		"{\"name\":\"tmu\",\"type\":{\"type\":\"long\",\"logicalType\":\"time-micros\"}},"
		"{\"name\":\"ts\",\"type\":{\"type\":\"long\",\"logicalType\":\"timestamp-millis\"}},"
		"{\"name\":\"tsu\",\"type\":{\"type\":\"long\",\"logicalType\":\"timestamp-micros\"}},"
		"{\"name\":\"lts\",\"type\":{\"type\":\"long\",\"logicalType\":\"local-timestamp-micros\"}}]}",
		false, false, {"dec", "decf", "dt", "tm", "tmu", "ts", "tsu", "lts"}, 8},
	{"\"long\"", true, false, {"whole"}, 0},
};
#define NSCHEMAS ((int) lengthof(schemas))

static KsAvroSchema *ours[NSCHEMAS];
static avro_schema_t theirs[NSCHEMAS];
static avro_value_iface_t *ifaces[NSCHEMAS];

/* ---- libavro's values rendered as our decoder renders them ---- */

static void
json_string(StringInfo b, const char *s, size_t n)
{
	appendStringInfoChar(b, '"');
	for (size_t i = 0; i < n; i++)
	{
		unsigned char c = (unsigned char) s[i];

		if (c == '"')
			appendStringInfoString(b, "\\\"");
		else if (c == '\\')
			appendStringInfoString(b, "\\\\");
		else if (c == '\n')
			appendStringInfoString(b, "\\n");
		else if (c == '\r')
			appendStringInfoString(b, "\\r");
		else if (c == '\t')
			appendStringInfoString(b, "\\t");
		else if (c == '\b')
			appendStringInfoString(b, "\\b");
		else if (c == '\f')
			appendStringInfoString(b, "\\f");
		else if (c < 0x20)
			appendStringInfo(b, "\\u%04x", c);
		else
			appendStringInfoChar(b, (char) c);
	}
	appendStringInfoChar(b, '"');
}

static void
hex(StringInfo b, const void *p, size_t n)
{
	appendStringInfoString(b, "\\x");
	for (size_t i = 0; i < n; i++)
		appendStringInfo(b, "%02x", ((const unsigned char *) p)[i]);
}

/* kind: 'n' null, 's' string, 'v' scalar, 'c' composite */
static void
render(avro_value_t *v, StringInfo b, char *kind, bool in_json)
{
	char		buf[32];
	StringInfoData t;

	switch (avro_value_get_type(v))
	{
		case AVRO_NULL:
			*kind = 'n';
			if (in_json)
				appendStringInfoString(b, "null");
			return;
		case AVRO_BOOLEAN:
			{
				int			x = 0;

				avro_value_get_boolean(v, &x);
				appendStringInfoString(b, x ? "true" : "false");
				*kind = 'v';
				return;
			}
		case AVRO_INT32:
			{
				int32_t		x = 0;

				avro_value_get_int(v, &x);
				appendStringInfo(b, "%d", x);
				*kind = 'v';
				return;
			}
		case AVRO_INT64:
			{
				int64_t		x = 0;

				avro_value_get_long(v, &x);
				appendStringInfo(b, "%lld", (long long) x);
				*kind = 'v';
				return;
			}
		case AVRO_FLOAT:
		case AVRO_DOUBLE:
			{
				double		x = 0;
				bool		special;

				if (avro_value_get_type(v) == AVRO_FLOAT)
				{
					float		f = 0;

					avro_value_get_float(v, &f);
					x = f;
					float_to_shortest_decimal_buf(f, buf);
				}
				else
				{
					avro_value_get_double(v, &x);
					double_to_shortest_decimal_buf(x, buf);
				}
				special = isnan(x) || isinf(x);
				*kind = special ? 's' : 'v';
				if (special && in_json)
					json_string(b, buf, strlen(buf));
				else
					appendStringInfoString(b, buf);
				return;
			}
		case AVRO_STRING:
			{
				const char *s;
				size_t		n = 0;

				avro_value_get_string(v, &s, &n);
				*kind = 's';
				if (in_json)
					json_string(b, s, n - 1);
				else
					appendBinaryStringInfo(b, s, (int) n - 1);
				return;
			}
		case AVRO_BYTES:
		case AVRO_FIXED:
			{
				const void *p;
				size_t		n = 0;

				if (avro_value_get_type(v) == AVRO_BYTES)
					avro_value_get_bytes(v, &p, &n);
				else
					avro_value_get_fixed(v, &p, &n);
				initStringInfo(&t);
				hex(&t, p, n);
				*kind = 's';
				if (in_json)
					json_string(b, t.data, t.len);
				else
					appendStringInfoString(b, t.data);
				return;
			}
		case AVRO_ENUM:
			{
				int			x = 0;
				const char *sym;

				avro_value_get_enum(v, &x);
				sym = avro_schema_enum_get(avro_value_get_schema(v), x);
				*kind = 's';
				if (in_json)
					json_string(b, sym, strlen(sym));
				else
					appendStringInfoString(b, sym);
				return;
			}
		case AVRO_UNION:
			{
				avro_value_t br;

				avro_value_get_current_branch(v, &br);
				render(&br, b, kind, in_json);
				return;
			}
		case AVRO_RECORD:
		case AVRO_MAP:
		case AVRO_ARRAY:
			{
				size_t		n = 0;
				bool		arr = avro_value_get_type(v) == AVRO_ARRAY;

				avro_value_get_size(v, &n);
				appendStringInfoChar(b, arr ? '[' : '{');
				for (size_t i = 0; i < n; i++)
				{
					avro_value_t c;
					const char *name = NULL;
					char		k;

					avro_value_get_by_index(v, i, &c, &name);
					if (i > 0)
						appendStringInfoChar(b, ',');
					if (!arr)
					{
						json_string(b, name, strlen(name));
						appendStringInfoChar(b, ':');
					}
					render(&c, b, &k, true);
				}
				appendStringInfoChar(b, arr ? ']' : '}');
				*kind = 'c';
				return;
			}
		default:
			die("libavro gave a value of an unknown type");
	}
}

static bool
is_json(const char *s)
{
	JsonLexContext *lex;
	JsonSemAction sem;
	char	   *copy = pstrdup(s);

	memset(&sem, 0, sizeof(sem));
#if PG_VERSION_NUM >= 170000
	lex = makeJsonLexContextCstringLen(NULL, copy, strlen(copy), PG_UTF8, true);
#else
	lex = makeJsonLexContextCstringLen(copy, strlen(copy), PG_UTF8, true);
#endif
	return pg_parse_json(lex, &sem) == JSON_SUCCESS;
}

/* ---- one decode, checked ---- */

static KsWalkPaths
make_paths(const FuzzSchema *fs, uint8_t pick, bool all_top)
{
	KsWalkPaths w;
	int			n = 0;

	w.paths = palloc0(sizeof(KsPath) * 8);
	for (int i = 0; i < 8 && fs->paths[i]; i++)
	{
		if (!(all_top && (i < fs->ntop || fs->ntop == 0)) && !(pick & (1 << i)))
			continue;
		if (!ks_path_parse(fs->paths[i], &w.paths[n]))
			die("a path of the table does not parse");
		n++;
	}
	w.nslots = n;
	return w;
}

/* Decodes with ours and checks the invariants; returns the result. */
static KsAvroResult
decode_checked(int si, const KsWalkPaths *w, const uint8_t *data, size_t len, KsSlotValue *out)
{
	char	   *detail = NULL;
	KsAvroResult r = ks_avro_decode(ours[si], w, NULL, NULL, schemas[si].ntop == 0 ? 0 : -1,
									(const char *) data, len, out, &detail);

	if (r != KS_AVRO_OK && r != KS_AVRO_INVALID && r != KS_AVRO_NOT_A_RECORD)
		die("an unknown result");
	if ((r == KS_AVRO_OK) != (detail == NULL))
		die("a detail exactly when not OK");
	for (int i = 0; i < w->nslots; i++)
	{
		KsSlotValue *v = &out[i];

		if (r != KS_AVRO_OK && (v->kind != KS_SLOT_ABSENT || v->text))
			die("a slot set after an error");
		if (v->kind == KS_SLOT_ABSENT || v->kind == KS_SLOT_NULL)
		{
			if (v->text)
				die("an ABSENT or NULL slot with a text");
			continue;
		}
		if (v->text == NULL)
			die("a slot without its text");
		if (pg_encoding_verifymbstr(PG_UTF8, v->text, (int) strlen(v->text)) != (int) strlen(v->text))
			die("a slot text that is not UTF-8");
		if (v->kind == KS_SLOT_COMPOSITE && !is_json(v->text))
			die("a COMPOSITE slot that is not JSON");
	}
	return r;
}

/* Ours accepted data: libavro must read it all, to the same texts. */
static void
compare_with_libavro(int si, const KsWalkPaths *w, const uint8_t *data, size_t len, KsSlotValue *out,
					 bool raw)
{
	avro_reader_t rd = avro_reader_memory((const char *) data, (int64_t) len);
	avro_value_t v;
	char		extra;

	avro_generic_value_new(ifaces[si], &v);
	if (avro_value_read(rd, &v) != 0)
		die("ours accepted a datum libavro cannot read");
	if (avro_read(rd, &extra, 1) == 0)
		die("libavro leaves bytes over where ours used them all");
	for (int i = 0; i < w->nslots && i < Max(schemas[si].ntop, 1); i++)
	{
		StringInfoData b;
		char		kind = '?';
		avro_value_t field;

		if (schemas[si].ntop == 0)
			field = v;
		else if (avro_value_get_by_name(&v, schemas[si].paths[i], &field, NULL) != 0)
			die("libavro lacks a field");
		initStringInfo(&b);
		render(&field, &b, &kind, false);
		if ((kind == 'n') != (out[i].kind == KS_SLOT_NULL) ||
			(kind == 's' && out[i].kind != KS_SLOT_STRING) ||
			(kind == 'v' && out[i].kind != KS_SLOT_SCALAR) ||
			(kind == 'c' && out[i].kind != KS_SLOT_COMPOSITE) ||
			(kind != 'n' && strcmp(b.data, out[i].text) != 0 &&
			 !(raw && kind == 'c' && schemas[si].has_map)))
		{
			fprintf(stderr, "field %s: libavro %c %s, ours %d %s\n", schemas[si].paths[i], kind, b.data,
					out[i].kind, out[i].text ? out[i].text : "(null)");
			die("ours and libavro disagree on a value");
		}
	}
	avro_value_decref(&v);
	avro_reader_free(rd);
	n_accepted++;
}

/* ---- values built by libavro from the input's bytes ---- */

typedef struct Gen
{
	const uint8_t *p;
	const uint8_t *end;
	int			budget;
} Gen;

static unsigned
choose(Gen *g, unsigned n)
{
	return (g->p < g->end) ? (unsigned) (*g->p++ % n) : 0;
}

static int64_t
number(Gen *g)
{
	uint64_t	x = 0;
	unsigned	nbytes = choose(g, 9);

	for (unsigned i = 0; i < nbytes; i++)
		x = (x << 8) | (g->p < g->end ? *g->p++ : 0);
	return (int64_t) (choose(g, 2) ? 0 - x : x);
}

static void
gen_value(Gen *g, avro_value_t *v, int depth)
{
	char		s[16];
	unsigned	n;

	switch (avro_value_get_type(v))
	{
		case AVRO_NULL:
			avro_value_set_null(v);
			break;
		case AVRO_BOOLEAN:
			avro_value_set_boolean(v, choose(g, 2));
			break;
		case AVRO_INT32:
			avro_value_set_int(v, (int32_t) number(g));
			break;
		case AVRO_INT64:
			avro_value_set_long(v, number(g));
			break;
		case AVRO_FLOAT:
			{
				uint32_t	u = (uint32_t) number(g);
				float		f;

				memcpy(&f, &u, 4);
				avro_value_set_float(v, f);
				break;
			}
		case AVRO_DOUBLE:
			{
				uint64_t	u = (uint64_t) number(g);
				double		d;

				memcpy(&d, &u, 8);
				avro_value_set_double(v, d);
				break;
			}
		case AVRO_STRING:
			n = choose(g, 8);
			for (unsigned i = 0; i < n; i++)
				s[i] = "a\"\\\n\x01xyz"[choose(g, 8)];
			s[n] = '\0';
			avro_value_set_string_len(v, s, n + 1);
			break;
		case AVRO_BYTES:
			n = choose(g, 8);
			for (unsigned i = 0; i < n; i++)
				s[i] = (char) choose(g, 256);
			avro_value_set_bytes(v, s, n);
			break;
		case AVRO_FIXED:
			n = (unsigned) avro_schema_fixed_size(avro_value_get_schema(v));
			for (unsigned i = 0; i < n && i < sizeof(s); i++)
				s[i] = (char) choose(g, 256);
			avro_value_set_fixed(v, s, n);
			break;
		case AVRO_ENUM:
			avro_value_set_enum(v, (int) choose(g, (unsigned) avro_schema_enum_number_of_symbols(avro_value_get_schema(v))));
			break;
		case AVRO_UNION:
			{
				avro_value_t br;
				size_t		nb = avro_schema_union_size(avro_value_get_schema(v));
				unsigned	pick = choose(g, (unsigned) nb);

				/* the recursive branch only while the budget lasts */
				if (depth > 20 || g->budget <= 0)
					pick = 0;
				avro_value_set_branch(v, (int) pick, &br);
				gen_value(g, &br, depth + 1);
				break;
			}
		case AVRO_RECORD:
			{
				size_t		nf = 0;

				avro_value_get_size(v, &nf);
				for (size_t i = 0; i < nf; i++)
				{
					avro_value_t f;

					avro_value_get_by_index(v, i, &f, NULL);
					gen_value(g, &f, depth + 1);
				}
				break;
			}
		case AVRO_ARRAY:
		case AVRO_MAP:
			n = (depth > 20 || g->budget <= 0) ? 0 : choose(g, 4);
			g->budget -= (int) n;
			for (unsigned i = 0; i < n; i++)
			{
				avro_value_t c;

				if (avro_value_get_type(v) == AVRO_ARRAY)
					avro_value_append(v, &c, NULL);
				else
				{
					char		key[3] = {"abk"[choose(g, 3)], "abk"[choose(g, 3)], '\0'};

					key[choose(g, 2) + 1] = '\0';
					avro_value_add(v, key, &c, NULL, NULL);
				}
				gen_value(g, &c, depth + 1);
			}
			break;
		default:
			break;
	}
}

static void
generated(int si, uint8_t pick, const uint8_t *p, size_t len)
{
	Gen			g = {p, p + len, 64};
	avro_value_t v;
	char		buf[16384];
	avro_writer_t wr = avro_writer_memory(buf, sizeof(buf));
	KsWalkPaths w = make_paths(&schemas[si], pick, true);
	KsSlotValue *out = palloc0(sizeof(KsSlotValue) * Max(w.nslots, 1));

	avro_generic_value_new(ifaces[si], &v);
	gen_value(&g, &v, 0);
	if (avro_value_write(wr, &v) == 0)
	{
		size_t		n = (size_t) avro_writer_tell(wr);

		if (decode_checked(si, &w, (const uint8_t *) buf, n, out) != KS_AVRO_OK)
			die("ours refuses a datum libavro wrote");
		compare_with_libavro(si, &w, (const uint8_t *) buf, n, out, false);
		n_generated++;
	}
	avro_value_decref(&v);
	avro_writer_free(wr);
}

static void
report(void)
{
	fprintf(stderr, "fuzz_avro: %lu datums compared with libavro, %lu of them written by libavro\n",
			n_accepted, n_generated);
}

int
LLVMFuzzerTestOneInput(const uint8_t *buf, size_t size)
{
	static bool ready = false;
	int			si;

	if (!ready)
	{
		for (int i = 0; i < NSCHEMAS; i++)
		{
			char	   *err = NULL;

			ours[i] = ks_avro_schema_parse(schemas[i].json, strlen(schemas[i].json), &err);
			if (ours[i] == NULL)
				die(err);
			if (avro_schema_from_json_length(schemas[i].json, strlen(schemas[i].json), &theirs[i]) != 0)
				die("libavro refuses a schema of the table");
			ifaces[i] = avro_generic_class_from_schema(theirs[i]);
		}
		arena = NULL;			/* the schemas stay */
		atexit(report);
		ready = true;
	}
	if (size < 2 || size > 65536)
		return 0;
	if (buf[0] & 0x80)
	{
		/* a schema text, then after a NUL a datum for it */
		const uint8_t *nul = memchr(buf + 1, 0, size - 1);
		size_t		slen = nul ? (size_t) (nul - buf - 1) : size - 1;
		char	   *err = NULL;
		KsAvroSchema *s = ks_avro_schema_parse((const char *) buf + 1, slen, &err);

		if (s == NULL && err == NULL)
			die("a refused schema without a reason");
		if (s != NULL && nul)
		{
			KsWalkPaths w = make_paths(&schemas[1], 0xff, true);
			KsSlotValue *out = palloc0(sizeof(KsSlotValue) * 8);
			char	   *detail;

			(void) ks_avro_decode(s, &w, NULL, NULL, 0, (const char *) nul + 1, size - slen - 2, out, &detail);
		}
		arena_reset();
		return 0;
	}
	si = buf[0] % NSCHEMAS;
	{
		KsWalkPaths w = make_paths(&schemas[si], buf[1], schemas[si].differential);
		KsSlotValue *out = palloc0(sizeof(KsSlotValue) * Max(w.nslots, 1));

		if (decode_checked(si, &w, buf + 2, size - 2, out) == KS_AVRO_OK && schemas[si].differential)
			compare_with_libavro(si, &w, buf + 2, size - 2, out, true);
	}
	if (schemas[si].differential)
		generated(si, buf[1], buf + 2, size - 2);
	arena_reset();
	return 0;
}
