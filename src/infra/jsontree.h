/*-------------------------------------------------------------------------
 *
 * jsontree.h
 *		The extension's one JSON tree (jsontree.c): a text parsed by
 *		PostgreSQL's pg_parse_json into KsJson nodes.  Used for Avro schemas
 *		and registry answers (avro_binary.c: ks_json_parse) and for Debezium
 *		change events (envelope_debezium.c).  No backend dependency: test/fuzz
 *		builds it with -DFRONTEND against libpgcommon.
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
 * Builds the tree of text (len bytes, NUL-terminated, in encoding enc),
 * nested to any depth.  Strings and containers' spans point into text,
 * which must outlive the tree.  NULL when the parser refuses the text;
 * then, when errmsg is not NULL, *errmsg is "invalid JSON: <detail>".
 * No other check: ks_json_parse (avro_binary.h) adds the Avro schema's.
 */
extern KsJson *ks_json_tree(char *text, size_t len, int enc, char **errmsg);

/* The member key of object obj (the last of duplicates, as jsonb), or NULL. */
extern KsJson *ks_json_get(const KsJson *obj, const char *key);

#endif
