/*-------------------------------------------------------------------------
 *
 * jsonwalk.c
 *		One pass over a JSON message that captures the values at a set of
 *		field paths ("payload.amount"), with PostgreSQL's own JSON parser.
 *
 * This file uses only src/common (the JSON lexer, palloc, encoding
 * checks), so it builds outside the server too: the fuzz target in
 * test/fuzz links it against libpgcommon.
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

#include "jsonwalk.h"

#if PG_VERSION_NUM >= 160000
#define KS_JSON_RETURN JsonParseErrorType
#define KS_JSON_OK return JSON_SUCCESS
#else
#define KS_JSON_RETURN void
#define KS_JSON_OK return
#endif

#define KS_MAX_DEPTH 64

/*
 * Deepest nesting of arrays and objects a message may have.  pg_parse_json
 * recurses once per level: in the backend a deep message raises "stack
 * depth limit exceeded", which is not a data error and so fails the whole
 * batch (and the pipeline); in the frontend there is no check at all and the
 * stack overflows.  Such a message is reported as invalid JSON instead.
 */
#define KS_MAX_NESTING 1000

/* A composite value being captured: its slot, level and first character. */
typedef struct Capture
{
	int			slot;
	int			level;
	char	   *start;
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
 * Whether data nests arrays and objects deeper than limit.  Brackets inside
 * strings do not count; a string ends at the first '"' not escaped by a
 * backslash, as in the lexer, so on every prefix pg_parse_json accepts the
 * depth counted here is exactly the parser's.  (After the first syntax
 * error the count may be off, but the parser stops there.)
 */
static bool
nesting_exceeds(const char *data, size_t len, int limit)
{
	int			depth = 0;
	bool		in_string = false;

	for (size_t i = 0; i < len; i++)
	{
		char		c = data[i];

		if (in_string)
		{
			if (c == '\\')
				i++;			/* the escaped character */
			else if (c == '"')
				in_string = false;
		}
		else if (c == '"')
			in_string = true;
		else if (c == '[' || c == '{')
		{
			if (++depth > limit)
				return true;
		}
		else if (c == ']' || c == '}')
			depth--;
	}
	return false;
}

KsWalkResult
ks_json_walk(const KsWalkPaths *paths, const char *data, size_t len,
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
	if (nesting_exceeds(data, len, KS_MAX_NESTING))
	{
		*detail = psprintf("the value nests arrays and objects more than %d levels deep",
						   KS_MAX_NESTING);
		return KS_WALK_INVALID_JSON;
	}
	copy = pnstrdup(data, len);
	if (strlen(copy) != len)
	{
		pfree(copy);
		*detail = pstrdup("the value contains a NUL byte");
		return KS_WALK_INVALID_JSON;
	}
#if PG_VERSION_NUM >= 170000
	lex = makeJsonLexContextCstringLen(NULL, copy, len, PG_UTF8, true);
#else
	lex = makeJsonLexContextCstringLen(copy, len, PG_UTF8, true);
#endif
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
#if PG_VERSION_NUM >= 170000
	freeJsonLexContext(lex);
#else
	if (lex->strval)
	{
		pfree(lex->strval->data);
		pfree(lex->strval);
	}
	pfree(lex);
#endif
	pfree(copy);
	return result;
}

/* Splits "a.b.c" into a path; returns false for an empty segment. */
bool
ks_path_parse(const char *text, KsPath *path)
{
	char	   *copy = pstrdup(text);
	int			n = 1;
	char	   *p;

	for (p = copy; *p; p++)
		if (*p == '.')
			n++;
	path->segs = palloc(sizeof(char *) * n);
	path->nsegs = 0;
	p = copy;
	for (;;)
	{
		char	   *dot = strchr(p, '.');

		if (dot)
			*dot = '\0';
		if (*p == '\0')
			return false;
		path->segs[path->nsegs++] = p;
		if (!dot)
			break;
		p = dot + 1;
	}
	return path->nsegs <= KS_MAX_DEPTH;
}
