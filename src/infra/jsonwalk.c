/*-------------------------------------------------------------------------
 *
 * jsonwalk.c
 *		One pass over a JSON message that captures the values at a set of
 *		field paths ("payload.amount"), with PostgreSQL's own JSON parser.
 *
 * Most messages take a fast path: a hand-written scanner (fast_*) that
 * accepts a subset of what pg_parse_json accepts and captures the same
 * values, in one pass, with one palloc per captured value.  Whatever it
 * is not sure about it leaves to the parser (ks_json_walk_slow), which
 * also writes every error detail.
 *
 * This file uses only src/common (the JSON lexer, palloc, encoding
 * checks), so it builds outside the server too: the fuzz target in
 * test/fuzz links it against libpgcommon and checks the two paths against
 * each other.
 *
 * Owns: scanning JSON text into the slots of KsWalkPaths.  Must not:
 * allocate through the backend beyond palloc or know columns and types (it
 * is also built without the backend for test/fuzz).  Over 800 lines on
 * purpose: the scanner is one state machine, fuzzed as one unit.
 *
 *-------------------------------------------------------------------------
 */
#ifdef FRONTEND
#include "postgres_fe.h"
#else
#include "postgres.h"
#endif

#include "common/jsonapi.h"
#include "mb/pg_wchar.h"
#ifndef FRONTEND
#include "utils/memutils.h"		/* MaxAllocSize */
#endif

#include "jsonwalk.h"
#include "jsontree.h"		/* KS_JSON_RETURN, KS_JSON_OK */

/* The two paths on their own are exported for test/fuzz (jsonwalk.h). */
#ifdef FRONTEND
#define KS_TESTABLE
#else
#define KS_TESTABLE static
#endif

#define KS_MAX_DEPTH 64

/* A composite value being captured: its slot, level and first character. */
typedef struct Capture
{
	int			slot;
	int			level;
	const char *start;
} Capture;

typedef struct WalkState
{
	const KsWalkPaths *paths;
	JsonLexContext *lex;
	KsSlotValue *out;
	bool		root_object;
	char		container[KS_MAX_DEPTH + 2];	/* 'o' or 'a' per depth */
	char	   *segs[KS_MAX_DEPTH + 1]; /* field name per depth */
	Capture		captures[KS_MAX_DEPTH];	/* nested, outermost first */
	int			ncaptures;
} WalkState;

/* Slot whose path is the current field path of length level, or -1. */
static int
match(WalkState *w, int level)
{
	if (level < 1 || level > KS_MAX_DEPTH)
		return -1;
	for (int d = 1; d <= level; d++)
		if (w->container[d] != 'o')
			return -1;
	for (int s = 0; s < w->paths->nslots; s++)
	{
		const KsPath *p = &w->paths->paths[s];
		bool		eq = (p->nsegs == level);

		for (int i = 0; eq && i < level; i++)
			eq = strcmp(p->segs[i], w->segs[i + 1]) == 0;
		if (eq)
			return s;
	}
	return -1;
}

static void
container_start(WalkState *w, char kind)
{
	int			level = w->lex->lex_level;	/* before the parser increments it */
	int			s;

	if (level + 1 <= KS_MAX_DEPTH)
		w->container[level + 1] = kind;
	if (level == 0)
	{
		w->root_object = (kind == 'o');
		return;
	}
	/* match() finds nothing deeper than KS_MAX_DEPTH: one capture per level */
	s = match(w, level);
	if (s >= 0)
	{
		Capture    *c = &w->captures[w->ncaptures++];

		c->slot = s;
		c->level = level;
		c->start = w->lex->token_start;
	}
}

static KS_JSON_RETURN
walk_object_start(void *state)
{
	container_start((WalkState *) state, 'o');
	KS_JSON_OK;
}

static KS_JSON_RETURN
walk_array_start(void *state)
{
	container_start((WalkState *) state, 'a');
	KS_JSON_OK;
}

static KS_JSON_RETURN
walk_container_end(void *state)
{
	WalkState  *w = state;

	/* the parser has already decremented lex_level here */
	if (w->ncaptures > 0 && w->captures[w->ncaptures - 1].level == w->lex->lex_level)
	{
		Capture    *c = &w->captures[--w->ncaptures];
		KsSlotValue *v = &w->out[c->slot];

		if (v->text)
			pfree(v->text);		/* a duplicate key: the last one wins */
		v->kind = KS_SLOT_COMPOSITE;
		v->text = pnstrdup(c->start, w->lex->prev_token_terminator - c->start);
	}
	KS_JSON_OK;
}

static KS_JSON_RETURN
walk_field_start(void *state, char *fname, bool isnull)
{
	WalkState  *w = state;
	int			level = w->lex->lex_level;

	(void) isnull;
	if (level >= 1 && level <= KS_MAX_DEPTH)
		w->segs[level] = fname;
	KS_JSON_OK;
}

/* The field's value is done: its name is no longer needed (see match). */
static KS_JSON_RETURN
walk_field_end(void *state, char *fname, bool isnull)
{
	(void) state;
	(void) isnull;
	if (fname)
		pfree(fname);
	KS_JSON_OK;
}

static KS_JSON_RETURN
walk_scalar(void *state, char *token, JsonTokenType type)
{
	WalkState  *w = state;
	int			s;

	s = (w->lex->lex_level == 0) ? -1 : match(w, w->lex->lex_level);
	if (s >= 0)
	{
		KsSlotValue *v = &w->out[s];

		if (v->text)
			pfree(v->text);		/* a duplicate key: the last one wins */
		if (type == JSON_TOKEN_NULL)
		{
			v->kind = KS_SLOT_NULL;
			v->text = NULL;
		}
		else
		{
			v->kind = (type == JSON_TOKEN_STRING) ? KS_SLOT_STRING : KS_SLOT_SCALAR;
			v->text = token;
			token = NULL;
		}
	}
	/* the parser hands each token to us; free the ones not kept */
	if (token)
		pfree(token);
	KS_JSON_OK;
}

/*
 * The slow path: pg_parse_json with the callbacks above.  It decides every
 * message the fast path gives up on, and so writes every error detail.
 */
KS_TESTABLE KsWalkResult
ks_json_walk_slow(const KsWalkPaths *paths, const char *data, size_t len,
				  KsSlotValue *out, char **detail)
{
	WalkState	w;
	JsonSemAction sem;
	JsonParseErrorType err;
	JsonLexContext *lex;
	char	   *copy;
	KsWalkResult result = KS_WALK_OK;

	*detail = NULL;
	for (int s = 0; s < paths->nslots; s++)
	{
		out[s].kind = KS_SLOT_ABSENT;
		out[s].text = NULL;
	}
	if (pg_encoding_verifymbstr(PG_UTF8, data, (int) len) != (int) len)
	{
		*detail = pstrdup("the value is not valid UTF-8");
		return KS_WALK_INVALID_JSON;
	}
	if (ks_json_nests_deeper(data, len, KS_JSON_MAX_NESTING))
	{
		*detail = psprintf("the value nests arrays and objects more than %d levels deep",
						   KS_JSON_MAX_NESTING);
		return KS_WALK_INVALID_JSON;
	}
	copy = pnstrdup(data, len);
	if (strlen(copy) != len)
	{
		pfree(copy);
		*detail = pstrdup("the value contains a NUL byte");
		return KS_WALK_INVALID_JSON;
	}
	lex = KS_JSON_LEXER(copy, len, PG_UTF8);
	memset(&w, 0, sizeof(w));
	memset(&sem, 0, sizeof(sem));
	w.paths = paths;
	w.lex = lex;
	w.out = out;
	sem.semstate = &w;
	sem.object_start = walk_object_start;
	sem.object_end = walk_container_end;
	sem.array_start = walk_array_start;
	sem.array_end = walk_container_end;
	sem.object_field_start = walk_field_start;
	sem.object_field_end = walk_field_end;
	sem.scalar = walk_scalar;

	err = pg_parse_json(lex, &sem);
	if (err != JSON_SUCCESS)
	{
		*detail = psprintf("invalid JSON: %s", json_errdetail(err, lex));
		result = KS_WALK_INVALID_JSON;
	}
	else if (!w.root_object)
	{
		*detail = pstrdup("the value is valid JSON but not an object");
		result = KS_WALK_NOT_AN_OBJECT;
	}

	/* the captured values are copies: the lexer and the input can go */
	KS_JSON_LEXER_FREE(lex);
	pfree(copy);
	return result;
}

/*
 * ---- The fast path ----
 *
 * A recursive descent that accepts only an object at the root and only
 * what PostgreSQL 15's JSON lexer and parser accept, tracking the field
 * path as the callbacks above do.  On every message it accepts, its result
 * is exactly the slow path's, because:
 *
 * - every token is one json_lex reads the same way: whitespace is space,
 *	 \t, \n and \r; numbers are -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?;
 *	 the only words are true, false and null; strings are as in
 *	 fast_string.  After a value only whitespace and then ',' or the
 *	 closing bracket may follow (after the root object, only whitespace),
 *	 so a token json_lex would read on ("01", "1.5.", "truex" are single
 *	 invalid tokens there) never gets through; and the grammar is the
 *	 parser's: no trailing comma, nothing after the root object.
 * - so every byte is ASCII but a valid UTF-8 sequence in a string, and none
 *	 is NUL: the message passes the checks ks_json_walk_slow makes first.
 *	 It nests at most KS_MAX_DEPTH + 1 containers, far below
 *	 KS_JSON_MAX_NESTING, so the recursion is bounded too.
 * - a value at level L (the root object's fields are at level 1) is
 *	 captured for the first slot whose path is the L keys above it, only
 *	 when all the containers above it are objects (match()); a later value
 *	 for the same slot replaces it (a duplicate key: the last one wins).
 * - the texts are the same: a string's de-escaped value (json_lex_string
 *	 with need_escapes), a number's or true's or false's token, and an
 *	 object's or array's span from its '{' or '[' to its closing bracket
 *	 (the parser's prev_token_terminator once that bracket is read).
 *
 * It gives up (NULL) on anything else, and on keys with escapes, which are
 * rare and would need a de-escaped copy to compare.
 */
typedef struct FastWalk
{
	const KsWalkPaths *paths;
	KsSlotValue *out;
	const char *end;			/* of the message */
	const char *key[KS_MAX_DEPTH + 1];	/* field name per level, as is */
	int			keylen[KS_MAX_DEPTH + 1];
} FastWalk;

static const char *fast_value(FastWalk *fw, const char *p, int level, int slot,
							  bool objpath);

static inline const char *
fast_ws(const char *p, const char *end)
{
	while (p < end && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r'))
		p++;
	return p;
}

/* The 4 hex digits at p (either case, as json_lex_string), or -1. */
static inline int
fast_hex4(const unsigned char *p)
{
	int			v = 0;

	for (int i = 0; i < 4; i++)
	{
		unsigned char c = p[i];

		if (c >= '0' && c <= '9')
			v = (v << 4) | (c - '0');
		else if (c >= 'a' && c <= 'f')
			v = (v << 4) | (c - 'a' + 10);
		else if (c >= 'A' && c <= 'F')
			v = (v << 4) | (c - 'A' + 10);
		else
			return -1;
	}
	return v;
}

/*
 * Whether the 8 bytes at s all stand for themselves in a string: none is
 * below 0x20, '"', '\\' or non-ASCII.  The classic bit tricks ("has a byte
 * below n", "has a zero byte" after an XOR) answer exactly for the word as
 * a whole; the byte loop in fast_string then finds which byte it is.
 */
static inline bool
fast_plain8(const unsigned char *s)
{
	const uint64 ones = UINT64CONST(0x0101010101010101);
	uint64		x;
	uint64		q;
	uint64		b;

	memcpy(&x, s, 8);
	q = x ^ (ones * '"');
	b = x ^ (ones * '\\');
	return ((((x - ones * 0x20) & ~x) | ((q - ones) & ~q) | ((b - ones) & ~b) | x) &
			(ones * 0x80)) == 0;
}

/*
 * The string whose opening '"' is at p: returns the position after its
 * closing '"', or NULL.  Sets *escaped when it has a backslash.  With dst,
 * also writes its de-escaped value there, NUL-terminated; that is never
 * longer than the string's source, since no escape is shorter than the
 * UTF-8 it stands for.
 *
 * It accepts what json_lex_string accepts with need_escapes: no control
 * character below 0x20 unescaped; the escapes \" \\ \/ \b \f \n \r \t and
 * \uXXXX but for \u0000, a lone low surrogate, and a high surrogate that
 * is not followed at once by a \u low surrogate; the other bytes valid
 * UTF-8 (pg_utf8_verifystr's check, character by character).  The lexer
 * (input encoding UTF-8) copies those bytes as they are and writes an
 * escape as UTF-8, as here.
 */
static pg_attribute_always_inline const char *
fast_string(const char *p, const char *end, char *dst, bool *escaped)
{
	const unsigned char *s = (const unsigned char *) p + 1;
	const unsigned char *e = (const unsigned char *) end;

	*escaped = false;
	for (;;)
	{
		const unsigned char *run = s;
		unsigned char c;

		/* the common case: a run of ASCII that stands for itself */
		while (e - s >= 8 && fast_plain8(s))
			s += 8;
		while (s < e && *s >= 0x20 && *s < 0x80 && *s != '"' && *s != '\\')
			s++;
		if (dst)
		{
			memcpy(dst, run, s - run);
			dst += s - run;
		}
		if (s == e)
			return NULL;
		c = *s;
		if (c == '"')
			break;
		if (c >= 0x80)
		{
			int			l = pg_utf_mblen(s);

			if (e - s < l || !pg_utf8_islegal(s, l))
				return NULL;
			if (dst)
			{
				memcpy(dst, s, l);
				dst += l;
			}
			s += l;
		}
		else if (c < 0x20 || e - s < 2)
			return NULL;
		else if (s[1] == 'u')
		{
			int			hi;
			int			lo;
			pg_wchar	ch;

			if (e - s < 6 || (hi = fast_hex4(s + 2)) < 0)
				return NULL;
			s += 6;
			if (is_utf16_surrogate_first(hi))
			{
				if (e - s < 6 || s[0] != '\\' || s[1] != 'u' ||
					(lo = fast_hex4(s + 2)) < 0 || !is_utf16_surrogate_second(lo))
					return NULL;
				ch = surrogate_pair_to_codepoint(hi, lo);
				s += 6;
			}
			else if (hi == 0 || is_utf16_surrogate_second(hi))
				return NULL;
			else
				ch = hi;
#ifndef FRONTEND

			/*
			 * The backend's lexer turns a non-ASCII escape into the database
			 * encoding (pg_unicode_to_server), which may also fail: the same
			 * UTF-8 only in a UTF-8 database.
			 */
			if (ch > 0x7F && GetDatabaseEncoding() != PG_UTF8)
				return NULL;
#endif
			if (dst)
			{
				unicode_to_utf8(ch, (unsigned char *) dst);
				dst += pg_utf_mblen((unsigned char *) dst);
			}
			*escaped = true;
		}
		else
		{
			char		r;

			switch (s[1])
			{
				case '"':
				case '\\':
				case '/':
					r = (char) s[1];
					break;
				case 'b':
					r = '\b';
					break;
				case 'f':
					r = '\f';
					break;
				case 'n':
					r = '\n';
					break;
				case 'r':
					r = '\r';
					break;
				case 't':
					r = '\t';
					break;
				default:
					return NULL;
			}
			if (dst)
				*dst++ = r;
			s += 2;
			*escaped = true;
		}
	}
	if (dst)
		*dst = '\0';
	return (const char *) s + 1;
}

/* One or more digits at p: returns the position after them, or NULL. */
static inline const char *
fast_digits(const char *p, const char *end)
{
	const char *start = p;

	while (p < end && *p >= '0' && *p <= '9')
		p++;
	return p > start ? p : NULL;
}

/* The number at p, by json_lex_number's grammar (see above), or NULL. */
static const char *
fast_number(const char *p, const char *end)
{
	if (*p == '-')
		p++;
	if (p < end && *p == '0')
		p++;
	else if (p < end && *p >= '1' && *p <= '9')
		p = fast_digits(p, end);
	else
		return NULL;
	if (p < end && *p == '.' && (p = fast_digits(p + 1, end)) == NULL)
		return NULL;
	if (p < end && (*p == 'e' || *p == 'E'))
	{
		p++;
		if (p < end && (*p == '+' || *p == '-'))
			p++;
		p = fast_digits(p, end);
	}
	return p;
}

static inline const char *
fast_word(const char *p, const char *end, const char *word, int n)
{
	return (end - p >= n && memcmp(p, word, n) == 0) ? p + n : NULL;
}

/*
 * Whether the key of n bytes at key is seg.  A key here has no escape and
 * no NUL, so this is strcmp(seg, its de-escaped copy) == 0; seg's NUL
 * differs from any byte of the key, so seg is not read past its end.
 */
static inline bool
fast_key_is(const char *seg, const char *key, int n)
{
	for (int i = 0; i < n; i++)
		if (seg[i] != key[i])
			return false;
	return seg[n] == '\0';
}

/* match() on the keys as they are: the first slot whose path is key[1..level] */
static int
fast_match(const FastWalk *fw, int level)
{
	for (int s = 0; s < fw->paths->nslots; s++)
	{
		const KsPath *p = &fw->paths->paths[s];
		int			i;

		if (p->nsegs != level)
			continue;
		for (i = 0; i < level; i++)
			if (!fast_key_is(p->segs[i], fw->key[i + 1], fw->keylen[i + 1]))
				break;
		if (i == level)
			return s;
	}
	return -1;
}

/* A copy of the n bytes at p, which have no NUL (pnstrdup without strnlen). */
static char *
fast_copy(const char *p, size_t n)
{
	char	   *text = palloc(n + 1);

	memcpy(text, p, n);
	text[n] = '\0';
	return text;
}

/*
 * The object whose '{' is at p, at level.  objpath: all the containers
 * above are objects too; only then are key[1..level] the keys above this
 * object's fields, which fast_match reads.
 */
static const char *
fast_object(FastWalk *fw, const char *p, int level, bool objpath)
{
	const char *end = fw->end;
	int			child = level + 1;

	p = fast_ws(p + 1, end);
	if (p < end && *p == '}')
		return p + 1;
	for (;;)
	{
		const char *key;
		bool		escaped;
		int			slot = -1;

		if (p == end || *p != '"')
			return NULL;
		key = p + 1;
		p = fast_string(p, end, NULL, &escaped);
		if (p == NULL || escaped)
			return NULL;
		/* deeper fields are never captured (match); they hold scalars */
		if (child <= KS_MAX_DEPTH)
		{
			fw->key[child] = key;
			fw->keylen[child] = (int) (p - 1 - key);
			if (objpath)
				slot = fast_match(fw, child);
		}
		p = fast_ws(p, end);
		if (p == end || *p != ':')
			return NULL;
		p = fast_value(fw, fast_ws(p + 1, end), child, slot, objpath);
		if (p == NULL)
			return NULL;
		p = fast_ws(p, end);
		if (p < end && *p == '}')
			return p + 1;
		if (p == end || *p != ',')
			return NULL;
		p = fast_ws(p + 1, end);
	}
}

/* The array whose '[' is at p, at level.  No path goes through an array. */
static const char *
fast_array(FastWalk *fw, const char *p, int level)
{
	const char *end = fw->end;

	p = fast_ws(p + 1, end);
	if (p < end && *p == ']')
		return p + 1;
	for (;;)
	{
		p = fast_value(fw, p, level + 1, -1, false);
		if (p == NULL)
			return NULL;
		p = fast_ws(p, end);
		if (p < end && *p == ']')
			return p + 1;
		if (p == end || *p != ',')
			return NULL;
		p = fast_ws(p + 1, end);
	}
}

/*
 * The value at p, at level: returns the position after it, or NULL.  It
 * goes into slot unless that is -1; objpath: all containers above it are
 * objects.
 */
static const char *
fast_value(FastWalk *fw, const char *p, int level, int slot, bool objpath)
{
	const char *end = fw->end;
	const char *q;
	KsSlotKind	kind = KS_SLOT_SCALAR;
	bool		escaped = false;
	KsSlotValue *v;

	if (p == end)
		return NULL;
	switch (*p)
	{
		case '{':
		case '[':
			/* bounds the recursion: its fields could not be captured */
			if (level > KS_MAX_DEPTH)
				return NULL;
			q = (*p == '{') ? fast_object(fw, p, level, objpath) : fast_array(fw, p, level);
			kind = KS_SLOT_COMPOSITE;
			break;
		case '"':
			q = fast_string(p, end, NULL, &escaped);
			kind = KS_SLOT_STRING;
			break;
		case 't':
			q = fast_word(p, end, "true", 4);
			break;
		case 'f':
			q = fast_word(p, end, "false", 5);
			break;
		case 'n':
			q = fast_word(p, end, "null", 4);
			kind = KS_SLOT_NULL;
			break;
		default:
			q = fast_number(p, end);
			break;
	}
	if (q == NULL || slot < 0)
		return q;

	v = &fw->out[slot];
	if (v->text)
		pfree(v->text);			/* a duplicate key: the last one wins */
	v->kind = kind;
	if (kind == KS_SLOT_NULL)
		v->text = NULL;
	else if (kind != KS_SLOT_STRING)
		v->text = fast_copy(p, q - p);
	else if (!escaped)
		v->text = fast_copy(p + 1, q - p - 2);
	else
	{
		/* rare: scan it again, de-escaping */
		v->text = palloc(q - p - 1);
		(void) fast_string(p, end, v->text, &escaped);
	}
	return q;
}

/*
 * The fast path: true with out filled in when the message is an object it
 * is sure about (the result is then KS_WALK_OK); else false, with every
 * slot ABSENT and nothing left allocated.
 */
KS_TESTABLE bool
ks_json_walk_fast(const KsWalkPaths *paths, const char *data, size_t len,
				  KsSlotValue *out)
{
	FastWalk	fw;
	const char *p = NULL;

	for (int s = 0; s < paths->nslots; s++)
	{
		out[s].kind = KS_SLOT_ABSENT;
		out[s].text = NULL;
	}
	/* the slow path's pnstrdup of the whole message fails beyond that */
	if (len == 0 || len > MaxAllocSize)
		return false;
	fw.paths = paths;
	fw.out = out;
	fw.end = data + len;
	p = fast_ws(data, fw.end);
	if (p < fw.end && *p == '{')
		p = fast_object(&fw, p, 0, true);
	else
		p = NULL;
	if (p != NULL && fast_ws(p, fw.end) == fw.end)
		return true;

	for (int s = 0; s < paths->nslots; s++)
	{
		if (out[s].text)
			pfree(out[s].text);
		out[s].kind = KS_SLOT_ABSENT;
		out[s].text = NULL;
	}
	return false;
}

/*
 * The scanner for callers that delimit JSON themselves (the Debezium
 * envelope's cached-schema path): the position after the whitespace at p,
 * and the end of the one value at p, or NULL when the fast path is not
 * sure of it.  What ks_json_value_end delimits is valid JSON to
 * pg_parse_json, with every string valid UTF-8 and no NUL byte (the
 * fast path's promise above); test/fuzz checks it against the parser.
 */
const char *
ks_json_skip_ws(const char *p, const char *end)
{
	return fast_ws(p, end);
}

const char *
ks_json_value_end(const char *p, const char *end)
{
	static const KsWalkPaths none = {0, NULL};
	FastWalk	fw;

	if (p >= end || (size_t) (end - p) > MaxAllocSize)
		return NULL;
	fw.paths = &none;
	fw.out = NULL;
	fw.end = end;
	return fast_value(&fw, p, 0, -1, false);
}

/*
 * ---- The tree in one pass ----
 *
 * The same scanner building the extension's JSON tree (KsJson,
 * jsontree.h) as it goes: ks_json_tree's pg_parse_json with callbacks
 * took a scan first (ks_json_value_end, to know the text is valid) and
 * then the parse, with one palloc per node, per string and per growing
 * member array.  Here every token is read once, and the nodes, strings
 * and member arrays come from a few blocks (TreeArena).  The tree is the
 * parser's exactly, for the texts the scanner accepts (above): a string's
 * and a key's de-escaped value, a number's token, "true", "false" and
 * "null" for those words (parse_scalar's copies), every member of an
 * object in order with duplicate keys kept (ks_json_get takes the last,
 * as jsonb), a container's span from its bracket to its closing one.
 * Anything else, and keys with escapes, it gives up on (NULL): the caller
 * then parses with pg_parse_json, which decides the text as before.
 * test/fuzz/fuzz_jsonwalk.c compares the two trees on every input.
 */
typedef struct TreeBlock
{
	struct TreeBlock *next;
	size_t		used;
	size_t		size;
	/* the bytes follow, MAXALIGNed */
} TreeBlock;

#define TREE_BLOCK_SIZE 8192

typedef struct TreeScan
{
	const char *end;
	TreeBlock  *blocks;			/* the newest first */
	KsJson	  **items;			/* the members being collected, of every
								 * open container (a stack) */
	char	  **keys;
	int			nitems;
	int			capitems;
} TreeScan;

/* n bytes, MAXALIGNed, from the scan's blocks */
static void *
tree_alloc(TreeScan *ts, size_t n)
{
	TreeBlock  *b = ts->blocks;
	void	   *r;

	n = MAXALIGN(n);
	if (b == NULL || b->size - b->used < n)
	{
		size_t		size = Max(TREE_BLOCK_SIZE, n + MAXALIGN(sizeof(TreeBlock)));

		b = palloc(size);
		b->size = size - MAXALIGN(sizeof(TreeBlock));
		b->used = 0;
		b->next = ts->blocks;
		ts->blocks = b;
	}
	r = (char *) b + MAXALIGN(sizeof(TreeBlock)) + b->used;
	b->used += n;
	return r;
}

static KsJson *
tree_node(TreeScan *ts, KsJsonKind kind)
{
	KsJson	   *j = tree_alloc(ts, sizeof(KsJson));

	memset(j, 0, sizeof(KsJson));
	j->kind = kind;
	return j;
}

static void
tree_push(TreeScan *ts, KsJson *item, char *key)
{
	if (ts->nitems == ts->capitems)
	{
		ts->capitems = ts->capitems == 0 ? 64 : ts->capitems * 2;
		ts->items = ts->items ? repalloc(ts->items, sizeof(KsJson *) * ts->capitems) :
			palloc(sizeof(KsJson *) * ts->capitems);
		ts->keys = ts->keys ? repalloc(ts->keys, sizeof(char *) * ts->capitems) :
			palloc(sizeof(char *) * ts->capitems);
	}
	ts->items[ts->nitems] = item;
	ts->keys[ts->nitems] = key;
	ts->nitems++;
}

/* the members pushed since base become container j's */
static void
tree_close(TreeScan *ts, KsJson *j, int base)
{
	int			n = ts->nitems - base;

	j->n = j->cap = n;
	if (n > 0)
	{
		j->items = tree_alloc(ts, sizeof(KsJson *) * n);
		memcpy(j->items, ts->items + base, sizeof(KsJson *) * n);
		if (j->kind == KS_J_OBJECT)
		{
			j->keys = tree_alloc(ts, sizeof(char *) * n);
			memcpy(j->keys, ts->keys + base, sizeof(char *) * n);
		}
	}
	ts->nitems = base;
}

/* the string whose '"' is at p, de-escaped into *out; the position after it, or NULL */
static const char *
tree_string(TreeScan *ts, const char *p, char **out, bool *escaped)
{
	const char *q = fast_string(p, ts->end, NULL, escaped);
	char	   *s;

	if (q == NULL)
		return NULL;
	/* the de-escaped value is never longer than the source (fast_string) */
	s = tree_alloc(ts, q - p - 1);
	if (*escaped)
		(void) fast_string(p, ts->end, s, escaped);
	else
	{
		memcpy(s, p + 1, q - p - 2);
		s[q - p - 2] = '\0';
	}
	*out = s;
	return q;
}

/* true, false, null: a node with its own copy of the word, as parse_scalar's */
static KsJson *
tree_word(TreeScan *ts, KsJsonKind kind, const char *word, int n)
{
	KsJson	   *j = tree_node(ts, kind);

	j->str = tree_alloc(ts, n + 1);
	memcpy(j->str, word, n + 1);
	return j;
}

static const char *tree_value(TreeScan *ts, const char *p, int level, KsJson **out);

/*
 * The members of object or array j, whose bracket is at p, at level: the
 * position after its closing bracket, or NULL.
 */
static const char *
tree_container(TreeScan *ts, KsJson *j, const char *p, int level)
{
	const char *end = ts->end;
	bool		object = j->kind == KS_J_OBJECT;
	char		close = object ? '}' : ']';
	int			base = ts->nitems;

	p = fast_ws(p + 1, end);
	if (p < end && *p == close)
	{
		tree_close(ts, j, base);
		return p + 1;
	}
	for (;;)
	{
		char	   *key = NULL;
		KsJson	   *v;
		bool		escaped;

		if (object)
		{
			if (p == end || *p != '"')
				return NULL;
			p = tree_string(ts, p, &key, &escaped);
			if (p == NULL || escaped)
				return NULL;
			p = fast_ws(p, end);
			if (p == end || *p != ':')
				return NULL;
			p = fast_ws(p + 1, end);
		}
		p = tree_value(ts, p, level + 1, &v);
		if (p == NULL)
			return NULL;
		tree_push(ts, v, key);
		p = fast_ws(p, end);
		if (p < end && *p == close)
		{
			tree_close(ts, j, base);
			return p + 1;
		}
		if (p == end || *p != ',')
			return NULL;
		p = fast_ws(p + 1, end);
	}
}

/* The value at p, at level, into *out: the position after it, or NULL. */
static const char *
tree_value(TreeScan *ts, const char *p, int level, KsJson **out)
{
	const char *end = ts->end;
	const char *q;
	KsJson	   *j;
	bool		escaped;

	if (p == end)
		return NULL;
	switch (*p)
	{
		case '{':
		case '[':
			/* the same bound as the scanner's */
			if (level > KS_MAX_DEPTH)
				return NULL;
			j = tree_node(ts, *p == '{' ? KS_J_OBJECT : KS_J_ARRAY);
			j->start = p;
			q = tree_container(ts, j, p, level);
			if (q == NULL)
				return NULL;
			j->len = (int) (q - p);
			break;
		case '"':
			j = tree_node(ts, KS_J_STRING);
			q = tree_string(ts, p, &j->str, &escaped);
			break;
		case 't':
			q = fast_word(p, end, "true", 4);
			j = tree_word(ts, KS_J_BOOL, "true", 4);
			break;
		case 'f':
			q = fast_word(p, end, "false", 5);
			j = tree_word(ts, KS_J_BOOL, "false", 5);
			break;
		case 'n':
			q = fast_word(p, end, "null", 4);
			j = tree_word(ts, KS_J_NULL, "null", 4);
			break;
		default:
			q = fast_number(p, end);
			if (q == NULL)
				return NULL;
			j = tree_node(ts, KS_J_NUMBER);
			j->str = tree_alloc(ts, q - p + 1);
			memcpy(j->str, p, q - p);
			j->str[q - p] = '\0';
			break;
	}
	*out = j;
	return q;
}

/*
 * The tree of the one JSON value at p (text up to end, UTF-8), and in
 * *after the position after it; or NULL when the scanner is not sure of
 * it (nothing then stays allocated).  Its strings are its own; its
 * containers' spans (start, len) point into the text, which must outlive
 * the tree.  What it accepts is exactly what ks_json_value_end delimits.
 */
KsJson *
ks_json_tree_scan(const char *p, const char *end, const char **after)
{
	TreeScan	ts;
	KsJson	   *root = NULL;
	const char *q;

	if (p >= end || (size_t) (end - p) > MaxAllocSize)
		return NULL;
	memset(&ts, 0, sizeof(ts));
	ts.end = end;
	q = tree_value(&ts, p, 0, &root);
	if (ts.items)
	{
		pfree(ts.items);
		pfree(ts.keys);
	}
	if (q == NULL)
	{
		while (ts.blocks)
		{
			TreeBlock  *next = ts.blocks->next;

			pfree(ts.blocks);
			ts.blocks = next;
		}
		return NULL;
	}
	*after = q;
	return root;
}

KsWalkResult
ks_json_walk(const KsWalkPaths *paths, const char *data, size_t len,
			 KsSlotValue *out, char **detail)
{
	if (ks_json_walk_fast(paths, data, len, out))
	{
		*detail = NULL;
		return KS_WALK_OK;
	}
	return ks_json_walk_slow(paths, data, len, out, detail);
}

/*
 * Splits "a.b.c" into a path; returns false for an empty segment.  A
 * backslash takes the next character literally, so a\.b is the one
 * top-level field "a.b" and a\\b the field "a\b"; a trailing lone
 * backslash is invalid.  The SQL validator calls this same parser
 * (kafka_sink._json_path_valid()).
 */
bool
ks_path_parse(const char *text, KsPath *path)
{
	size_t		len = strlen(text);
	char	   *buf = palloc(len + 1);
	char	   *out = buf;
	int			n = 1;

	for (const char *p = text; *p; p++)
	{
		if (*p == '\\' && p[1] != '\0')
			p++;
		else if (*p == '.')
			n++;
	}
	path->segs = palloc(sizeof(char *) * n);
	path->nsegs = 0;
	path->segs[path->nsegs] = out;
	for (const char *p = text;; p++)
	{
		if (*p == '\\')
		{
			if (p[1] == '\0')
				return false;
			*out++ = *++p;
			continue;
		}
		if (*p == '.' || *p == '\0')
		{
			if (out == path->segs[path->nsegs])
				return false;	/* an empty segment */
			*out++ = '\0';
			path->nsegs++;
			if (*p == '\0')
				break;
			path->segs[path->nsegs] = out;
			continue;
		}
		*out++ = *p;
	}
	return path->nsegs <= KS_MAX_DEPTH;
}
