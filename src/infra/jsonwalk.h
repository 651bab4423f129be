/*-------------------------------------------------------------------------
 *
 * jsonwalk.h
 *		Capturing values at field paths of a JSON message (jsonwalk.c).
 *
 *		Owns: KsPath, KsWalkPaths, the slots (KsSlotValue), the scanner
 *		and the path parser.  Must not: need the backend beyond palloc (it
 *		is also built without it for test/fuzz) or know columns and types.
 *
 *-------------------------------------------------------------------------
 */
#ifndef KS_JSONWALK_H
#define KS_JSONWALK_H

typedef struct KsPath
{
	int			nsegs;
	char	  **segs;
} KsPath;

typedef struct KsWalkPaths
{
	int			nslots;
	KsPath	   *paths;
} KsWalkPaths;

typedef enum KsSlotKind
{
	KS_SLOT_ABSENT = 0,
	KS_SLOT_NULL,
	KS_SLOT_STRING,				/* text is the unescaped string */
	KS_SLOT_SCALAR,				/* number, true, false: the token as is */
	KS_SLOT_COMPOSITE,			/* object or array: its JSON text */
	KS_SLOT_DATUM,				/* a value already of type typid (datum),
								 * text NULL: Avro's common types for a
								 * column of exactly that type */
	KS_SLOT_BYTES				/* text: len raw bytes (and a NUL after
								 * them): a Kafka header or key (meta.c) */
} KsSlotKind;

typedef struct KsSlotValue
{
	KsSlotKind	kind;
	char	   *text;
	Oid			typid;			/* KS_SLOT_DATUM: the datum's type */
	uintptr_t	datum;			/* KS_SLOT_DATUM: a Datum (uintptr_t: the
								 * fuzzers build this header as frontend
								 * code, without Datum) */
	size_t		len;			/* KS_SLOT_BYTES: the bytes' length */
} KsSlotValue;

typedef enum KsWalkResult
{
	KS_WALK_OK = 0,
	KS_WALK_INVALID_JSON,
	KS_WALK_NOT_AN_OBJECT
} KsWalkResult;

extern KsWalkResult ks_json_walk(const KsWalkPaths *paths, const char *data, size_t len,
								 KsSlotValue *out, char **detail);
extern bool ks_path_parse(const char *text, KsPath *path);
extern const char *ks_json_skip_ws(const char *p, const char *end);
extern const char *ks_json_value_end(const char *p, const char *end);

/*
 * The tree (jsontree.h) of the one value at p in one pass of the scanner,
 * *after set past it; NULL when the scanner is not sure of the text (then
 * pg_parse_json decides: ks_json_tree).  Strings are the tree's own,
 * containers' spans point into the text.
 */
struct KsJson;
extern struct KsJson *ks_json_tree_scan(const char *p, const char *end, const char **after);

#ifdef FRONTEND
/*
 * For test/fuzz: the parser-only path, and the fast path (false when it
 * gives up, every slot then ABSENT); ks_json_walk is the fast path, else
 * the parser.
 */
extern KsWalkResult ks_json_walk_slow(const KsWalkPaths *paths, const char *data, size_t len,
									  KsSlotValue *out, char **detail);
extern bool ks_json_walk_fast(const KsWalkPaths *paths, const char *data, size_t len,
							  KsSlotValue *out);
#endif

#endif
