/*-------------------------------------------------------------------------
 *
 * jsontree.c
 *		A JSON text as a tree (KsJson), through PostgreSQL's pg_parse_json
 *		with semantic actions.
 *
 * A text the scanner of jsonwalk.c is sure of (UTF-8, at most 65 levels
 * deep, no escaped key: nearly every one) is built by it in one pass
 * (ks_json_tree_scan), the same tree; pg_parse_json decides the others.
 *
 * One builder for the whole extension: the Avro schema parse
 * (avro_binary.c, ks_json_parse, which adds its UTF-8, NUL and depth
 * checks before it) and the one-parse Debezium change event
 * (envelope_debezium.c, which needs a container's text span and an
 * encoding).  Every text is refused deeper than KS_JSON_MAX_NESTING, as
 * the parser recurses per level (jsontree.h).
 *
 * Owns: building the tree and looking a member up.  Must not: use the
 * backend beyond palloc (test/fuzz builds it with -DFRONTEND).
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

#include "jsontree.h"
#include "jsonwalk.h"			/* ks_json_tree_scan */

#ifdef FRONTEND
#define KS_TREE_TESTABLE
#else
#define KS_TREE_TESTABLE static
#endif

typedef struct TreeState
{
	JsonLexContext *lex;
	KsJson	  **stack;			/* the open containers, grown as needed */
	int			depth;
	int			cap;
	KsJson	   *root;
	char	   *pending_key;
} TreeState;

static void
tree_attach(TreeState *t, KsJson *node)
{
	KsJson	   *parent;

	if (t->depth == 0)
	{
		t->root = node;
		return;
	}
	parent = t->stack[t->depth - 1];
	if (parent->n == parent->cap)
	{
		parent->cap = parent->cap == 0 ? 8 : parent->cap * 2;
		parent->items = parent->items ? repalloc(parent->items, sizeof(KsJson *) * parent->cap) :
			palloc(sizeof(KsJson *) * parent->cap);
		if (parent->kind == KS_J_OBJECT)
			parent->keys = parent->keys ? repalloc(parent->keys, sizeof(char *) * parent->cap) :
				palloc(sizeof(char *) * parent->cap);
	}
	if (parent->kind == KS_J_OBJECT)
	{
		parent->keys[parent->n] = t->pending_key;
		t->pending_key = NULL;
	}
	parent->items[parent->n++] = node;
}

static KS_JSON_RETURN
tree_container_start(TreeState *t, KsJsonKind kind)
{
	KsJson	   *j = palloc0(sizeof(KsJson));

	j->kind = kind;
	j->start = t->lex->token_start;
	tree_attach(t, j);
	if (t->depth == t->cap)
	{
		t->cap = t->cap == 0 ? 16 : t->cap * 2;
		t->stack = t->stack ? repalloc(t->stack, sizeof(KsJson *) * t->cap) :
			palloc(sizeof(KsJson *) * t->cap);
	}
	t->stack[t->depth++] = j;
	KS_JSON_OK;
}

static KS_JSON_RETURN
tree_object_start(void *state)
{
	return tree_container_start(state, KS_J_OBJECT);
}

static KS_JSON_RETURN
tree_array_start(void *state)
{
	return tree_container_start(state, KS_J_ARRAY);
}

static KS_JSON_RETURN
tree_end(void *state)
{
	TreeState  *t = state;
	KsJson	   *j = t->stack[--t->depth];

	/* the closing bracket was the token before the current one */
	j->len = t->lex->prev_token_terminator - j->start;
	KS_JSON_OK;
}

static KS_JSON_RETURN
tree_field_start(void *state, char *fname, bool isnull)
{
	(void) isnull;
	((TreeState *) state)->pending_key = fname;
	KS_JSON_OK;
}

static KS_JSON_RETURN
tree_scalar(void *state, char *token, JsonTokenType type)
{
	KsJson	   *j = palloc0(sizeof(KsJson));

	j->kind = type == JSON_TOKEN_STRING ? KS_J_STRING :
		type == JSON_TOKEN_NUMBER ? KS_J_NUMBER :
		(type == JSON_TOKEN_TRUE || type == JSON_TOKEN_FALSE) ? KS_J_BOOL : KS_J_NULL;
	j->str = token;
	tree_attach(state, j);
	KS_JSON_OK;
}

/* The parser's tree alone (exported for test/fuzz, which compares the two). */
KS_TREE_TESTABLE KsJson *
ks_json_tree_parser(char *text, size_t len, int enc, char **errmsg)
{
	TreeState	t;
	JsonSemAction sem;
	JsonParseErrorType err;

	if (ks_json_nests_deeper(text, len, KS_JSON_MAX_NESTING))
	{
		if (errmsg)
			*errmsg = psprintf("invalid JSON: arrays and objects nest more than %d levels deep",
							   KS_JSON_MAX_NESTING);
		return NULL;
	}
	memset(&t, 0, sizeof(t));
	t.lex = KS_JSON_LEXER(text, len, enc);
	memset(&sem, 0, sizeof(sem));
	sem.semstate = &t;
	sem.object_start = tree_object_start;
	sem.object_end = tree_end;
	sem.array_start = tree_array_start;
	sem.array_end = tree_end;
	sem.object_field_start = tree_field_start;
	sem.scalar = tree_scalar;
	err = pg_parse_json(t.lex, &sem);
	if (err != JSON_SUCCESS)
	{
		if (errmsg)
			*errmsg = psprintf("invalid JSON: %s", json_errdetail(err, t.lex));
		return NULL;
	}
	return t.root;
}

KsJson *
ks_json_tree(char *text, size_t len, int enc, char **errmsg)
{
	/* one pass of jsonwalk.c's scanner when it is sure of the text (UTF-8) */
	if (enc == PG_UTF8)
	{
		const char *after;
		const char *end = text + len;
		KsJson	   *root = ks_json_tree_scan(ks_json_skip_ws(text, end), end, &after);

		if (root != NULL && ks_json_skip_ws(after, end) == end)
			return root;
	}
	return ks_json_tree_parser(text, len, enc, errmsg);
}

KsJson *
ks_json_get(const KsJson *obj, const char *key)
{
	if (obj == NULL || obj->kind != KS_J_OBJECT)
		return NULL;
	for (int i = obj->n - 1; i >= 0; i--)
		if (strcmp(obj->keys[i], key) == 0)
			return obj->items[i];
	return NULL;
}
