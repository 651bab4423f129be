/*-------------------------------------------------------------------------
 *
 * fuzz_jsonwalk.c
 *		libFuzzer target for src/infra/jsonwalk.c (ks_json_walk, ks_path_parse).
 *
 * Input: byte 0 selects the paths to capture (bit i = paths_text[i]), the
 * rest is the message.  The rest is also read as choices that make a
 * second, JSON-shaped message (see Gen), checked the same way.  Built and
 * run by test/fuzz/run.sh.
 *
 * Memory: in the backend ks_json_walk runs in a memory context that is
 * reset after the batch, and pg_parse_json itself drops a token or field
 * name now and then on a syntax error.  This file therefore supplies its own
 * palloc family (the linker then leaves out libpgcommon's fe_memutils.o):
 * every chunk is a separate malloc, so ASan still sees overflows, use after
 * free and double pfree, and all chunks made while one input runs are
 * freed after it, like a context reset, so LeakSanitizer stays quiet
 * without hiding leaks of plain malloc.  The bookkeeping also checks that a
 * successful walk leaves nothing behind but the values it returns.
 *
 * Checks (abort() on a violation, which libFuzzer reports as a crash):
 *	- the result is a KsWalkResult; detail is NULL exactly when it is OK
 *	- on OK every slot's kind is valid; ABSENT/NULL have no text, the others
 *	  have; a STRING is valid UTF-8; a SCALAR is a number/true/false token
 *	  of the input; a COMPOSITE is a '{...}' or '[...]' span of the input
 *	  that is itself valid JSON
 *	- the result agrees with pg_parse_json(nullSemAction) on the whole
 *	  input: valid JSON gives OK (an object) or NOT_AN_OBJECT, anything else
 *	  INVALID_JSON
 *	- the result and detail do not depend on the paths asked for, and the
 *	  value of a path is the same when it is asked for alone (for a path
 *	  that is a prefix or an extension of another selected path too, unless
 *	  KS_FUZZ_STRICT=0)
 *	- after OK or NOT_AN_OBJECT only the returned texts and detail are
 *	  still allocated; peak memory stays within 16 x the input + 256 KiB
 *	- ks_path_parse accepts 1..64 non-empty segments, refuses the rest
 *	- differentially, for the paths asked for and for each path alone:
 *	  ks_json_walk gives exactly what ks_json_walk_slow (pg_parse_json
 *	  alone) gives: the result, the detail, every slot's kind and text (on
 *	  errors too); ks_json_walk_fast on its own either gives that with OK,
 *	  or gives up leaving every slot ABSENT and nothing allocated
 *	- ks_json_value_end (the Debezium envelope's use of the scanner): what
 *	  it delimits at the start of the input is valid JSON to the parser
 *	  alone; when the fast path took an object, it delimits exactly that
 *	  object (the input up to its trailing whitespace)
 *	- ks_json_tree_scan (the one-pass tree, jsonwalk.c) takes exactly what
 *	  ks_json_value_end delimits and builds there the tree pg_parse_json
 *	  builds (ks_json_tree_parser, jsontree.c): kinds, strings, number
 *	  tokens, keys (duplicates kept, in order), spans; giving up it leaves
 *	  nothing allocated; ks_json_tree (the scan, else the parser) gives
 *	  the parser's tree, or refuses what the parser refuses
 *
 * At exit it prints how many walks the fast path took, so that a run
 * shows the differential check was exercised.
 *
 *-------------------------------------------------------------------------
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE				/* memmem */
#endif
#include "postgres_fe.h"

#include <stdint.h>

#include "common/jsonapi.h"
#include "mb/pg_wchar.h"

#include "jsonwalk.h"
#include "jsontree.h"

#define MAX_INPUT (64 * 1024)
#define MAX_MADE (8 * 1024)		/* the message made from an input (Gen) */
#define NPATHS 8
#define NESTING_DETAIL "the value nests arrays and objects"

int			LLVMFuzzerInitialize(int *argc, char ***argv);
int			LLVMFuzzerTestOneInput(const uint8_t *buf, size_t size);

static bool strict;
static bool verbose;
static unsigned long n_walks;	/* compared with the slow path */
static unsigned long n_fast;	/* of which the fast path took */
static unsigned long n_trees;	/* one-pass trees compared with the parser's */

static void check_tree_scan(const char *data, size_t len, const char *v0, const char *v1);

static void
die(const char *what, const char *data, size_t len)
{
	fprintf(stderr, "fuzz_jsonwalk: invariant violated: %s\n", what);
	if (data)
		fprintf(stderr, "fuzz_jsonwalk: message (%zu bytes): %.*s\n",
				len, (int) Min(len, 300), data);
	abort();
}

/* ---- palloc: one malloc per chunk, freed at the end of each input ---- */

#define CHUNK_MAGIC UINT64_C(0x6b735f66757a7a21)

typedef struct Chunk
{
	struct Chunk *prev;			/* NULL: outside any input (kept) */
	struct Chunk *next;
	size_t		size;
	uint64_t	magic;
} Chunk;

static Chunk live = {&live, &live, 0, 0};	/* chunks of the current input */
static bool tracking;
static size_t live_chunks;
static size_t live_bytes;		/* as the backend's AllocSet would count */
static size_t peak_bytes;

/* An AllocSet chunk: 16 bytes of header, small ones rounded up to 2^n. */
static size_t
backend_size(size_t size)
{
	size_t		r = 8;

	if (size > 8192)
		return size + 16;
	while (r < size)
		r <<= 1;
	return r + 16;
}

static void *
chunk_alloc(size_t size, int flags)
{
	Chunk	   *c;

	if (size > MaxAllocSize && !(flags & MCXT_ALLOC_HUGE))
		die("palloc request larger than MaxAllocSize (the backend would ERROR)", NULL, 0);
	c = malloc(sizeof(Chunk) + size);
	if (c == NULL)
		die("out of memory", NULL, 0);
	c->size = size;
	c->magic = CHUNK_MAGIC;
	if (tracking)
	{
		c->next = &live;
		c->prev = live.prev;
		live.prev->next = c;
		live.prev = c;
		live_chunks++;
		live_bytes += backend_size(size);
		if (live_bytes > peak_bytes)
			peak_bytes = live_bytes;
	}
	else
		c->prev = c->next = NULL;
	if (flags & MCXT_ALLOC_ZERO)
		memset(c + 1, 0, size);
	return c + 1;
}

static Chunk *
chunk_of(void *p)
{
	Chunk	   *c;

	if (p == NULL)
		die("pfree/repalloc of NULL (crashes in the backend)", NULL, 0);
	c = (Chunk *) p - 1;
	if (c->magic != CHUNK_MAGIC)
		die("pfree/repalloc of a pointer that palloc did not return", NULL, 0);
	return c;
}

void
pfree(void *p)
{
	Chunk	   *c = chunk_of(p);

	if (c->prev)
	{
		c->prev->next = c->next;
		c->next->prev = c->prev;
		live_chunks--;
		live_bytes -= backend_size(c->size);
	}
	c->magic = 0;
	free(c);
}

void *
palloc(Size size)
{
	return chunk_alloc(size, 0);
}

void *
palloc0(Size size)
{
	return chunk_alloc(size, MCXT_ALLOC_ZERO);
}

void *
palloc_extended(Size size, int flags)
{
	return chunk_alloc(size, flags);
}

void *
repalloc(void *p, Size size)
{
	Chunk	   *old = chunk_of(p);
	void	   *n = chunk_alloc(size, 0);

	memcpy(n, p, Min(old->size, size));
	pfree(p);
	return n;
}

char *
pnstrdup(const char *in, Size size)
{
	size_t		n = strnlen(in, size);
	char	   *s = chunk_alloc(n + 1, 0);

	memcpy(s, in, n);
	s[n] = '\0';
	return s;
}

char *
pstrdup(const char *in)
{
	return pnstrdup(in, strlen(in));
}

void *
pg_malloc(size_t size)
{
	return chunk_alloc(size, 0);
}

void *
pg_malloc0(size_t size)
{
	return chunk_alloc(size, MCXT_ALLOC_ZERO);
}

void *
pg_malloc_extended(size_t size, int flags)
{
	return chunk_alloc(size, flags);
}

void *
pg_realloc(void *p, size_t size)
{
	return p ? repalloc(p, size) : chunk_alloc(size, 0);
}

char *
pg_strdup(const char *in)
{
	return pstrdup(in);
}

void
pg_free(void *p)
{
	if (p)
		pfree(p);
}

/* The "memory context reset" after one input. */
static void
reset_input_memory(void)
{
	while (live.next != &live)
		pfree(live.next + 1);
	tracking = false;
	if (live_chunks != 0 || live_bytes != 0)
		die("chunk bookkeeping out of step", NULL, 0);
}

#ifdef KS_FUZZ_NEED_JSON_ERRDETAIL
/*
 * Before PostgreSQL 16, the frontend build of src/common/jsonapi.c has no
 * json_errdetail(); jsonwalk.c calls it, so supply one.  Like the backend's
 * it returns a palloc'd string the caller does not free.
 */
char *
json_errdetail(JsonParseErrorType error, JsonLexContext *lex)
{
	return psprintf("JSON parse error %d at line %d", (int) error, lex->line_number);
}
#endif

/* ---- paths ---- */

static const char *paths_text[NPATHS] = {
	"a",
	"a.b",
	"payload",
	"payload.amount",
	"k",
	"x.y.z",
	"\xc3\xa9",					/* "é": a key written "\u00e9" must match */
	NULL,						/* "d.d. ... .d", 64 segments (KS_MAX_DEPTH) */
};
static KsPath paths[NPATHS];

static char *
repeat_path(int nsegs)
{
	char	   *s = malloc(2 * nsegs);

	for (int i = 0; i < nsegs; i++)
	{
		s[2 * i] = 'd';
		s[2 * i + 1] = (i + 1 < nsegs) ? '.' : '\0';
	}
	return s;
}

/* p is a proper prefix of q (or the other way round) */
static bool
nested_paths(const KsPath *p, const KsPath *q)
{
	int			n = Min(p->nsegs, q->nsegs);

	if (p->nsegs == q->nsegs)
		return false;
	for (int i = 0; i < n; i++)
		if (strcmp(p->segs[i], q->segs[i]) != 0)
			return false;
	return true;
}

static void
report_fast_path(void)
{
	fprintf(stderr, "fuzz_jsonwalk: the fast path took %lu of %lu walks; %lu one-pass trees compared\n",
			n_fast, n_walks, n_trees);
}

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
	static const char *bad[] = {"", ".", "a.", ".a", "a..b", "a.b."};
	char	   *deep64 = repeat_path(64);
	char	   *deep65 = repeat_path(65);
	KsPath		p;

	(void) argc;
	(void) argv;
	strict = !getenv("KS_FUZZ_STRICT") || strcmp(getenv("KS_FUZZ_STRICT"), "0") != 0;
	verbose = getenv("KS_FUZZ_VERBOSE") != NULL;

	/* the table lives for the whole run: not tracked */
	paths_text[NPATHS - 1] = deep64;
	for (int i = 0; i < NPATHS; i++)
		if (!ks_path_parse(paths_text[i], &paths[i]))
			die("ks_path_parse refused a valid path", paths_text[i], strlen(paths_text[i]));
	if (paths[NPATHS - 1].nsegs != 64 || paths[1].nsegs != 2 || paths[5].nsegs != 3 ||
		strcmp(paths[5].segs[2], "z") != 0)
		die("ks_path_parse split a path wrongly", NULL, 0);

	atexit(report_fast_path);

	tracking = true;
	for (size_t i = 0; i < lengthof(bad); i++)
		if (ks_path_parse(bad[i], &p))
			die("ks_path_parse accepted an empty segment", bad[i], strlen(bad[i]));
	if (ks_path_parse(deep65, &p))
		die("ks_path_parse accepted 65 segments", NULL, 0);
	reset_input_memory();
	free(deep65);

	/*
	 * The fuzzer takes a while to grow inputs this long: replay the deepest
	 * nestings a 64 KiB message can have on every run (this used to
	 * overflow the stack inside pg_parse_json).
	 */
	{
		static const char *const open[] = {"[", "{\"d\":", "[{\"\\u00e9\":"};
		char	   *deep = malloc(MAX_INPUT + 1);

		for (size_t i = 0; i < lengthof(open); i++)
		{
			size_t		n = strlen(open[i]);
			size_t		len = 0;

			deep[len++] = '\xff';	/* all the paths */
			while (len + n <= MAX_INPUT)
			{
				memcpy(deep + len, open[i], n);
				len += n;
			}
			LLVMFuzzerTestOneInput((const uint8_t *) deep, len);
		}
		free(deep);
	}
	return 0;
}

/* ---- checks ---- */

static bool
parses(const char *text, size_t len)
{
	char	   *copy = pnstrdup(text, len);
	JsonLexContext *lex;
	bool		ok;

#if PG_VERSION_NUM >= 170000
	lex = makeJsonLexContextCstringLen(NULL, copy, len, PG_UTF8, true);
#else
	lex = makeJsonLexContextCstringLen(copy, (int) len, PG_UTF8, true);
#endif
	ok = pg_parse_json(lex, &nullSemAction) == JSON_SUCCESS;
#if PG_VERSION_NUM >= 170000
	freeJsonLexContext(lex);
#else
	pfree(lex->strval->data);
	pfree(lex->strval);
	pfree(lex);
#endif
	pfree(copy);
	return ok;
}

static bool
utf8(const char *s, size_t len)
{
	return pg_encoding_verifymbstr(PG_UTF8, s, (int) len) == (int) len;
}

typedef struct Walk
{
	KsWalkResult r;
	char	   *detail;
	KsSlotValue out[NPATHS + 1];	/* a selection may repeat a path */
	int			nslots;
} Walk;

/* Runs ks_json_walk and checks what needs no comparison. */
static void
walk(Walk *w, KsPath *sel, int nsel, const char *data, size_t len)
{
	KsWalkPaths wp = {nsel, sel};
	size_t		chunks_before = live_chunks;
	size_t		bytes_before = live_bytes;
	size_t		kept = 0;

	w->nslots = nsel;
	for (int s = 0; s <= NPATHS; s++)
	{
		/* garbage: ks_json_walk must set every slot itself */
		w->out[s].kind = (KsSlotKind) 77;
		w->out[s].text = (char *) data;
	}
	w->detail = (char *) data;
	peak_bytes = live_bytes;

	w->r = ks_json_walk(&wp, data, len, w->out, &w->detail);

	if (w->r != KS_WALK_OK && w->r != KS_WALK_INVALID_JSON && w->r != KS_WALK_NOT_AN_OBJECT)
		die("result is not a KsWalkResult", data, len);
	if ((w->r == KS_WALK_OK) != (w->detail == NULL))
		die("detail must be NULL exactly when the result is OK", data, len);
	if (w->detail && !utf8(w->detail, strlen(w->detail)))
		die("detail is not valid UTF-8", data, len);
	if (peak_bytes - bytes_before > 16 * len + 256 * 1024)
		die("memory use is out of proportion to the message", data, len);
	if (verbose)
		fprintf(stderr, "len %zu result %d peak %zu bytes\n", len, (int) w->r,
				peak_bytes - bytes_before);

	if (w->r != KS_WALK_OK)
	{
		/*
		 * After a syntax error, pg_parse_json may have dropped a token or a
		 * field name (the backend's context takes them); count only the
		 * other results.
		 */
		if (w->r == KS_WALK_NOT_AN_OBJECT && live_chunks - chunks_before != 1)
			die("NOT_AN_OBJECT left memory behind besides detail", data, len);
		return;
	}

	/* a successful walk keeps nothing but the values it returns */
	for (int s = 0; s < nsel; s++)
		if (w->out[s].kind >= KS_SLOT_STRING && w->out[s].kind <= KS_SLOT_COMPOSITE)
			kept++;
	if (live_chunks - chunks_before != kept)
		die("OK walk left memory behind besides the captured values", data, len);

	for (int s = 0; s < nsel; s++)
	{
		KsSlotValue *v = &w->out[s];
		size_t		tl;

		switch (v->kind)
		{
			case KS_SLOT_ABSENT:
			case KS_SLOT_NULL:
				if (v->text != NULL)
					die("ABSENT/NULL slot has a text", data, len);
				continue;
			case KS_SLOT_STRING:
			case KS_SLOT_SCALAR:
			case KS_SLOT_COMPOSITE:
				break;
			default:
				die("slot kind is not a KsSlotKind", data, len);
		}
		if (v->text == NULL)
			die("STRING/SCALAR/COMPOSITE slot without text", data, len);
		if (v->text >= data && v->text < data + len)
			die("slot text points into the caller's buffer", data, len);
		tl = strlen(v->text);
		if (v->kind == KS_SLOT_STRING)
		{
			if (!utf8(v->text, tl))
				die("STRING is not valid UTF-8", data, len);
			continue;
		}
		if (tl == 0 || memmem(data, len, v->text, tl) == NULL)
			die("SCALAR/COMPOSITE text is not a span of the message", data, len);
		if (v->kind == KS_SLOT_SCALAR)
		{
			if (strchr("-0123456789tf", v->text[0]) == NULL || !parses(v->text, tl))
				die("SCALAR is not a number, true or false", data, len);
			continue;
		}
		if (!((v->text[0] == '{' && v->text[tl - 1] == '}') ||
			  (v->text[0] == '[' && v->text[tl - 1] == ']')))
			die("COMPOSITE is not {...} or [...]", data, len);
		if (!parses(v->text, tl))
			die("COMPOSITE is not valid JSON", data, len);
	}
}

static void
free_walk(Walk *w)
{
	for (int s = 0; s < w->nslots; s++)
		if (w->out[s].kind >= KS_SLOT_STRING && w->out[s].kind <= KS_SLOT_COMPOSITE && w->out[s].text)
			pfree(w->out[s].text);
	if (w->detail)
		pfree(w->detail);
}

static bool
same_text(const char *a, const char *b)
{
	return (a == NULL && b == NULL) || (a && b && strcmp(a, b) == 0);
}

/*
 * w is ks_json_walk's walk of sel over the message: the parser alone must
 * give exactly the same, and the fast path alone the same or nothing.
 */
static void
differential(const Walk *w, KsPath *sel, int nsel, const char *data, size_t len)
{
	KsWalkPaths wp = {nsel, sel};
	Walk		slow;
	KsSlotValue fast[NPATHS + 1];
	size_t		chunks_before;
	bool		took;

	slow.nslots = nsel;
	slow.r = ks_json_walk_slow(&wp, data, len, slow.out, &slow.detail);
	if (slow.r != w->r || !same_text(slow.detail, w->detail))
	{
		fprintf(stderr, "fuzz_jsonwalk: ks_json_walk %d \"%s\", the parser alone %d \"%s\"\n",
				(int) w->r, w->detail ? w->detail : "(null)",
				(int) slow.r, slow.detail ? slow.detail : "(null)");
		die("the result or detail differs from the parser's alone", data, len);
	}
	for (int s = 0; s < nsel; s++)
		if (slow.out[s].kind != w->out[s].kind || !same_text(slow.out[s].text, w->out[s].text))
		{
			fprintf(stderr, "fuzz_jsonwalk: slot %d: ks_json_walk kind %d \"%s\", the parser alone kind %d \"%s\"\n",
					s, (int) w->out[s].kind, w->out[s].text ? w->out[s].text : "(null)",
					(int) slow.out[s].kind, slow.out[s].text ? slow.out[s].text : "(null)");
			die("a slot differs from the parser's alone", data, len);
		}

	for (int s = 0; s <= NPATHS; s++)
	{
		fast[s].kind = (KsSlotKind) 77;
		fast[s].text = (char *) data;
	}
	chunks_before = live_chunks;
	took = ks_json_walk_fast(&wp, data, len, fast);
	n_walks++;
	if (took)
	{
		n_fast++;
		if (slow.r != KS_WALK_OK)
			die("the fast path accepted a message the parser does not", data, len);
		for (int s = 0; s < nsel; s++)
			if (fast[s].kind != slow.out[s].kind || !same_text(fast[s].text, slow.out[s].text))
				die("the fast path captured a slot differently", data, len);
	}
	else
	{
		for (int s = 0; s < nsel; s++)
			if (fast[s].kind != KS_SLOT_ABSENT || fast[s].text != NULL)
				die("the fast path gave up but left a slot set", data, len);
		if (live_chunks != chunks_before)
			die("the fast path gave up but left memory allocated", data, len);
	}
	if (took)
		for (int s = 0; s < nsel; s++)
			if (fast[s].text)
				pfree(fast[s].text);
	free_walk(&slow);

	{
		const char *end = data + len;
		const char *v0 = ks_json_skip_ws(data, end);
		const char *v1 = ks_json_value_end(v0, end);

		if (v1 != NULL)
		{
			Walk		part;
			KsWalkPaths none = {0, sel};

			if (v1 <= v0 || v1 > end)
				die("ks_json_value_end returned a position outside the text", data, len);
			part.nslots = 0;
			part.r = ks_json_walk_slow(&none, v0, v1 - v0, part.out, &part.detail);
			if (part.r == KS_WALK_INVALID_JSON)
				die("ks_json_value_end delimited text the parser refuses", data, len);
			free_walk(&part);
		}
		if (took && (v1 == NULL || ks_json_skip_ws(v1, end) != end))
			die("ks_json_value_end did not delimit the object the fast path took", data, len);
		check_tree_scan(data, len, v0, v1);
	}
}

/* ---- the one-pass tree (ks_json_tree_scan) against the parser's ---- */

/* whether trees a (over text at abase) and b (at bbase) are the same */
static bool
same_tree(const KsJson *a, const char *abase, const KsJson *b, const char *bbase)
{
	if (a->kind != b->kind || !same_text(a->str, b->str) || a->n != b->n)
		return false;
	if (a->kind == KS_J_OBJECT || a->kind == KS_J_ARRAY)
	{
		if (a->start == NULL || b->start == NULL ||
			a->start - abase != b->start - bbase || a->len != b->len)
			return false;
	}
	else if (a->start != NULL || b->start != NULL || a->len != 0 || b->len != 0)
		return false;
	if ((a->keys != NULL) != (b->keys != NULL) && a->n > 0)
		return false;
	for (int i = 0; i < a->n; i++)
	{
		if (a->kind == KS_J_OBJECT && !same_text(a->keys[i], b->keys[i]))
			return false;
		if (!same_tree(a->items[i], abase, b->items[i], bbase))
			return false;
	}
	return true;
}

/*
 * ks_json_tree_scan on the value at v0 takes exactly what
 * ks_json_value_end delimits (v1), and builds there the tree
 * pg_parse_json builds of that text (ks_json_tree_parser): every kind,
 * string, number token, key, member order and span.  When it gives up it
 * leaves nothing allocated.  ks_json_tree on the whole input (which tries
 * the scan first) gives the parser's tree, or refuses what it refuses.
 */
static void
check_tree_scan(const char *data, size_t len, const char *v0, const char *v1)
{
	const char *end = data + len;
	const char *after = NULL;
	size_t		chunks_before = live_chunks;
	KsJson	   *scan = v0 < end ? ks_json_tree_scan(v0, end, &after) : NULL;

	if (scan == NULL)
	{
		if (live_chunks != chunks_before)
			die("ks_json_tree_scan gave up but left memory allocated", data, len);
		if (v1 != NULL)
			die("ks_json_tree_scan gave up on a value ks_json_value_end delimits", data, len);
	}
	else
	{
		char	   *copy;
		KsJson	   *parsed;

		if (v1 == NULL || after != v1)
			die("ks_json_tree_scan took other text than ks_json_value_end delimits", data, len);
		copy = pnstrdup(v0, v1 - v0);
		parsed = ks_json_tree_parser(copy, v1 - v0, PG_UTF8, NULL);
		if (parsed == NULL)
			die("ks_json_tree_scan built a tree of text the parser refuses", data, len);
		if (!same_tree(scan, v0, parsed, copy))
			die("ks_json_tree_scan's tree differs from the parser's", data, len);
		n_trees++;
	}
	if (utf8(data, len) && strlen(pnstrdup(data, len)) == len)
	{
		char	   *a = pnstrdup(data, len);
		char	   *b = pnstrdup(data, len);
		KsJson	   *ta = ks_json_tree(a, len, PG_UTF8, NULL);
		KsJson	   *tb = ks_json_tree_parser(b, len, PG_UTF8, NULL);

		if ((ta == NULL) != (tb == NULL))
			die("ks_json_tree and the parser alone disagree on whether the text is JSON", data, len);
		if (ta != NULL && !same_tree(ta, a, tb, b))
			die("ks_json_tree's tree differs from the parser's alone", data, len);
	}
}

/* ---- a JSON-shaped message made from the input ---- */

/*
 * Random bytes seldom make a valid object, and only valid objects take the
 * fast path.  So each input is also read as a list of choices that build a
 * message: mostly valid JSON, with the keys of the path table (plain and
 * escaped), escapes, numbers, words, whitespace and deep nesting, and now
 * and then something the fast path must leave to the parser (the bad_*
 * tables: flaws, and keys with escapes).
 */
typedef struct Gen
{
	const uint8_t *in;
	size_t		inlen;
	size_t		pos;
	char	   *out;
	size_t		len;			/* at most MAX_MADE; cut off there */
} Gen;

static const char *const good_keys[] = {
	"a", "b", "k", "x", "y", "z", "d", "payload", "amount", "\xc3\xa9", "", "a.b", "A",
};
static const char *const bad_keys[] = {"\\u00e9", "\\u0061", "\\\"", "\\n", "\x01"};
static const char *const good_pieces[] = {
	"\\n", "\\\"", "\\\\", "\\/", "\\b\\f\\r\\t", "\\u00e9", "\\u00E9", "\\ud83d\\ude00",
	"\\uDBFF\\uDFFF", "\\uffff", "\\u0041", "\\u0800", "\\u07ff", "\\u007f", "\\u0001",
	"\xc3\xa9", "\xf0\x9f\x98\x80", "\xe2\x82\xac", "\xf4\x8f\xbf\xbf", "{}[],:", "\x7f",
};
static const char *const bad_pieces[] = {
	"\\ud83d", "\\ude00", "\\u0000", "\\ud83d\\u0041", "\\ud83d\\ud83d", "\\ud83dx", "\\ud83d\\n",
	"\\x", "\\u12", "\\u12g4", "\\U0041", "\x01", "\x1f", "\t", "\xc3", "\xed\xa0\x80",
	"\xf4\x90\x80\x80", "\xc0\x80", "\xe0\x80\x80", "\x80", "\xff", "\\",
};
static const char *const good_numbers[] = {
	"0", "-0", "1", "123", "-17", "1.5", "1e5", "1E+5", "1.5E-3", "-0.0e0", "0e0", "1e400",
	"123456789012345678901234567890", "0.000", "9.99e-9",
};
static const char *const bad_numbers[] = {
	"01", "-01", "1.", ".5", "+1", "-", "1e", "1e+", "0x10", "1.5.3", "- 1", "Infinity",
	"NaN", "1_0", "1e5e5", "-a", "00",
};
static const char *const good_words[] = {"true", "false", "null"};
static const char *const bad_words[] = {"tru", "nul", "True", "truex", "nulll", "t", "fals", "null_"};
static const char *const good_ws[] = {"", "", "", " ", "\n", "\t", "\r\n  "};
static const char *const bad_ws[] = {"\f", "\v", "\xc2\xa0", "\x01"};

static unsigned
gen_byte(Gen *g)
{
	return g->pos < g->inlen ? g->in[g->pos++] : 0;
}

static void
gen_put(Gen *g, const char *s)
{
	size_t		n = Min(strlen(s), MAX_MADE - g->len);

	memcpy(g->out + g->len, s, n);
	g->len += n;
}

/* puts one of good, or one time in 16 one of bad */
#define gen_pick(g, good, bad) gen_pick_(g, good, lengthof(good), bad, lengthof(bad))
static void
gen_pick_(Gen *g, const char *const *good, size_t ngood,
		  const char *const *bad, size_t nbad)
{
	unsigned	b = gen_byte(g);

	gen_put(g, (b >> 4) == 15 ? bad[b % nbad] : good[b % ngood]);
}

static void
gen_string(Gen *g, int n)
{
	gen_put(g, "\"");
	while (n-- > 0)
	{
		unsigned	b = gen_byte(g);
		char		c[2] = {(char) (' ' + b % 95), '\0'};

		if (b < 0x80 && c[0] != '"' && c[0] != '\\')
			gen_put(g, c);
		else
			gen_pick(g, good_pieces, bad_pieces);
	}
	gen_put(g, "\"");
}

static void
gen_value(Gen *g, int depth)
{
	unsigned	b = gen_byte(g);
	int			n;

	gen_pick(g, good_ws, bad_ws);
	if (depth > 80 || g->len > MAX_MADE / 2)
		b = 7;					/* a string: bounded recursion and size */
	switch (b % 16)
	{
		case 0:
		case 1:
		case 2:
		case 3:
		case 4:
			n = (int) (gen_byte(g) % 5);
			gen_put(g, "{");
			for (int i = 0; i < n; i++)
			{
				if (i > 0)
					gen_put(g, (gen_byte(g) == 0xff) ? "" : ",");
				gen_pick(g, good_ws, bad_ws);
				gen_put(g, "\"");
				gen_pick(g, good_keys, bad_keys);
				gen_put(g, "\"");
				gen_pick(g, good_ws, bad_ws);
				gen_put(g, ":");
				gen_value(g, depth + 1);
			}
			gen_put(g, (gen_byte(g) == 0xfe) ? ",}" : "}");
			break;
		case 5:
		case 6:
			n = (int) (gen_byte(g) % 4);
			gen_put(g, "[");
			for (int i = 0; i < n; i++)
			{
				if (i > 0)
					gen_put(g, ",");
				gen_value(g, depth + 1);
			}
			gen_put(g, "]");
			break;
		case 7:
		case 8:
		case 9:
			gen_string(g, (int) (gen_byte(g) % 8));
			break;
		case 10:
		case 11:
			gen_pick(g, good_numbers, bad_numbers);
			break;
		case 12:
		case 13:
			gen_pick(g, good_words, bad_words);
			break;
		case 14:
			/* around KS_MAX_DEPTH (the fast path's bound), cheaply */
			n = 56 + (int) (gen_byte(g) % 16);
			for (int i = 0; i < n; i++)
				gen_put(g, (b & 0x10) ? "[" : "{\"d\":");
			gen_value(g, depth + 1);
			for (int i = 0; i < n; i++)
				gen_put(g, (b & 0x10) ? "]" : "}");
			break;
		default:
			/* a duplicate-prone flat field list at this level */
			gen_put(g, "{\"a\":1,\"a\":");
			gen_value(g, depth + 1);
			gen_put(g, ",\"k\":\"first\",\"k\":");
			gen_value(g, depth + 1);
			gen_put(g, "}");
			break;
	}
	gen_pick(g, good_ws, bad_ws);
}

/* Checks one message against sel (the paths asked for, idx their numbers). */
static void
check_message(KsPath *sel, const int *idx, int nsel, const char *data, size_t len)
{
	Walk		all;

	walk(&all, sel, nsel, data, len);
	differential(&all, sel, nsel, data, len);

	/* against the parser on its own */
	if (!utf8(data, len))
	{
		if (all.r != KS_WALK_INVALID_JSON)
			die("accepted a message that is not UTF-8 (or has a NUL)", data, len);
	}
	else if (all.r == KS_WALK_INVALID_JSON && strncmp(all.detail, NESTING_DETAIL, strlen(NESTING_DETAIL)) == 0)
	{
		size_t		brackets = 0;

		for (size_t i = 0; i < len; i++)
			brackets += (data[i] == '[' || data[i] == '{');
		if (brackets <= 1000)
			die("nesting limit reported for a shallow message", data, len);
	}
	else
	{
		bool		valid = parses(data, len);
		size_t		i = 0;

		while (i < len && strchr(" \t\n\r", data[i]))
			i++;
		if (!valid && all.r != KS_WALK_INVALID_JSON)
			die("accepted JSON that pg_parse_json refuses", data, len);
		if (valid && all.r == KS_WALK_INVALID_JSON)
			die("refused JSON that pg_parse_json accepts", data, len);
		if (valid && (all.r == KS_WALK_OK) != (data[i] == '{'))
			die("OK must mean the message is an object", data, len);
	}

	/* each path alone: same result, same value */
	for (int s = 0; s < nsel; s++)
	{
		Walk		one;
		bool		nested = false;

		for (int t = 0; t < nsel; t++)
			if (nested_paths(&sel[s], &sel[t]))
				nested = true;
		walk(&one, &sel[s], 1, data, len);
		differential(&one, &sel[s], 1, data, len);
		if (one.r != all.r || !same_text(one.detail, all.detail))
			die("the result depends on the paths asked for", data, len);
		if (all.r == KS_WALK_OK && (strict || !nested) &&
			(one.out[0].kind != all.out[s].kind || !same_text(one.out[0].text, all.out[s].text)))
		{
			fprintf(stderr, "fuzz_jsonwalk: path \"%s\": alone kind %d \"%s\", with others kind %d \"%s\"\n",
					paths_text[idx[s]], (int) one.out[0].kind,
					one.out[0].text ? one.out[0].text : "(null)",
					(int) all.out[s].kind, all.out[s].text ? all.out[s].text : "(null)");
			die("a path's value depends on the other paths asked for", data, len);
		}
		free_walk(&one);
	}
	free_walk(&all);

	/* a path asked for twice: the first of its slots gets the value */
	if (nsel > 0)
	{
		KsPath		twice[NPATHS + 1];
		Walk		dup;

		memcpy(twice, sel, sizeof(KsPath) * nsel);
		twice[nsel] = sel[0];
		walk(&dup, twice, nsel + 1, data, len);
		differential(&dup, twice, nsel + 1, data, len);
		if (dup.r == KS_WALK_OK && dup.out[nsel].kind != KS_SLOT_ABSENT)
			die("the second slot of a path asked for twice got a value", data, len);
		free_walk(&dup);
	}
}

int
LLVMFuzzerTestOneInput(const uint8_t *buf, size_t size)
{
	static char *made;
	KsPath		sel[NPATHS];
	int			idx[NPATHS];
	int			nsel = 0;
	Gen			g;

	if (size < 1 || size - 1 > MAX_INPUT)
		return 0;
	for (int i = 0; i < NPATHS; i++)
		if (buf[0] & (1 << i))
		{
			idx[nsel] = i;
			sel[nsel++] = paths[i];
		}

	tracking = true;
	check_message(sel, idx, nsel, (const char *) buf + 1, size - 1);

	/* the message the rest of the input describes; the root mostly an object */
	if (made == NULL)
		made = malloc(MAX_MADE);
	memset(&g, 0, sizeof(g));
	g.in = buf + 1;
	g.inlen = size - 1;
	g.out = made;
	g.pos = 1;
	if (size > 1 && buf[1] == 0xff)
		gen_value(&g, 0);
	else
	{
		gen_put(&g, "{");
		for (int i = 0; g.pos < g.inlen && g.len < MAX_MADE / 2; i++)
		{
			if (i > 0)
				gen_put(&g, ",");
			gen_put(&g, "\"");
			gen_pick(&g, good_keys, bad_keys);
			gen_put(&g, "\":");
			gen_value(&g, 1);
		}
		gen_put(&g, "}");
	}
	check_message(sel, idx, nsel, made, g.len);

	reset_input_memory();
	return 0;
}
