/*-------------------------------------------------------------------------
 *
 * jsontree.h
 *		The extension's one JSON tree (jsontree.c): a text parsed by
 *		PostgreSQL's pg_parse_json into KsJson nodes.  Used for Avro schemas
 *		and registry answers (avro_binary.c: ks_json_parse), for Debezium
 *		change events (envelope_debezium.c) and for a replayed message's
 *		headers (consumer.c).  No backend dependency: test/fuzz builds it
 *		with -DFRONTEND against libpgcommon.
 *
 *		Owns: KsJson, building the tree and looking a member up.
 *		Must not: need the backend beyond palloc, or know what the JSON
 *		means (that is its callers': Avro, the registry, Debezium).
 *
 *-------------------------------------------------------------------------
 */
#ifndef KS_JSONTREE_H
#define KS_JSONTREE_H

#include "common/jsonapi.h"
#include "compat.h"				/* KS_JSON_RETURN, KS_JSON_OK, KS_JSON_LEXER */

typedef enum KsJsonKind
{
	KS_J_NULL,
	KS_J_BOOL,
	KS_J_NUMBER,
	KS_J_STRING,
	KS_J_ARRAY,
	KS_J_OBJECT
} KsJsonKind;

typedef struct KsJson
{
	KsJsonKind	kind;
	char	   *str;			/* string (unescaped), number token, "true"/"false" */
	int			n;				/* array elements, object members */
	int			cap;			/* allocated items (and keys) */
	char	  **keys;			/* object member names */
	struct KsJson **items;
	const char *start;			/* containers: the value's text in the parsed
								 * text ... */
	int			len;			/* ... and its length */
} KsJson;

/*
 * Deepest nesting of arrays and objects a JSON text may have.
 * pg_parse_json recurses once per level: in the backend a deeper text
 * raises "stack depth limit exceeded", which is no data error and so would
 * fail a whole batch; in the frontend nothing checks and the stack
 * overflows.  Such a text is refused as invalid JSON instead.
 */
#define KS_JSON_MAX_NESTING 1000

/*
 * Whether text nests arrays and objects deeper than limit.  Brackets
 * inside strings do not count; a string ends at the first '"' not escaped
 * by a backslash, as in the lexer, so on every prefix pg_parse_json
 * accepts the depth counted here is exactly the parser's.  (After the
 * first syntax error the count may be off, but the parser stops there.)
 * Inline: fuzz_jsonwalk builds jsonwalk.c without jsontree.c.
 */
static inline bool
ks_json_nests_deeper(const char *text, size_t len, int limit)
{
	int			depth = 0;
	bool		in_string = false;

	for (size_t i = 0; i < len; i++)
	{
		char		c = text[i];

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

/*
 * Builds the tree of text (len bytes, NUL-terminated, in encoding enc),
 * nested at most KS_JSON_MAX_NESTING levels: in one pass of jsonwalk.c's
 * scanner (ks_json_tree_scan) when enc is UTF-8 and the scanner is sure of
 * the text, else through pg_parse_json; the tree is the same.  Strings and containers' spans point into text,
 * which must outlive the tree.  NULL when the parser refuses the text;
 * then, when errmsg is not NULL, *errmsg is "invalid JSON: <detail>".
 * No other check: ks_json_parse (avro_binary.h) adds the Avro schema's.
 */
extern KsJson *ks_json_tree(char *text, size_t len, int enc, char **errmsg);

#ifdef FRONTEND
/* For test/fuzz: ks_json_tree through pg_parse_json alone. */
extern KsJson *ks_json_tree_parser(char *text, size_t len, int enc, char **errmsg);
#endif

/* The member key of object obj (the last of duplicates, as jsonb), or NULL. */
extern KsJson *ks_json_get(const KsJson *obj, const char *key);

#endif
