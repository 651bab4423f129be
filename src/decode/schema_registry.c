/*-------------------------------------------------------------------------
 *
 * schema_registry.c
 *		Schemas by id from a Confluent-compatible schema registry: a cache
 *		per process, the catalog table kafka_sink.schemas, and the HTTP
 *		client (libcurl; the only file that includes curl.h).
 *
 * A schema is looked up in this order: the process's cache, the catalog
 * (so that a restarted worker, a promoted replica, replay_quarantine and
 * the lineage functions decode without the registry), the registry
 * (GET /schemas/ids/{id}; the answer is stored in the catalog).  A schema
 * id never changes its schema in a registry, so entries never expire.
 * The worker asks for the ids of a filled batch before the batch's
 * transaction opens (ks_schema_prefetch), so that decoding in it finds them
 * cached and waits on no network; decoding still fetches what it misses.
 *
 * Failures: an id the registry answers 404/40403 for is unknown (the
 * message is quarantined as unknown_schema_id; the answer is remembered
 * only for the current transaction, so a later registration is seen).
 * Anything else (no connection, a timeout, 5xx, 401, an answer that is not
 * a schema) raises ERRCODE_CONNECTION_FAILURE: the worker retries the
 * batch after a pause, and nothing is quarantined or lost.
 *
 * References (a schema's "references": name, subject, version) are
 * followed when the schema is fetched (walk_refs), bounded, and kept with
 * it as one bundle (type "<type>+refs"); a cycle or a missing reference is
 * the schema's error, compiled into an entry that is invalid.
 *
 * The registry password (basic.auth.user.info) is handed to libcurl
 * apart from the URL and appears in no message: URLs carrying user
 * information are refused where the options are checked; given by
 * reference (secret_ref.c), it is read at each fetch.
 *
 * Owns: schemas by id and their cache, the rows of kafka_sink.schemas
 * (through catalog.c), references, and every HTTP request.  Must not:
 * decode a message (format_avro.c, avro_binary.c, protobuf.c) or log a
 * secret.
 *
 *-------------------------------------------------------------------------
 */
#include "kafka_sink.h"
#include "pipeline.h"
#include "schema_registry.h"
#include "catalog.h"
#include "format.h"
#include "avro_binary.h"
#include "protobuf.h"
#include "kafka_options.h"
#include "hosts.h"
#include "secret_ref.h"

#include <curl/curl.h>

#include "access/xact.h"
#include "common/hashfn.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "utils/hsearch.h"
#include "utils/json.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#define KS_REGISTRY_MAX_ANSWER (8 * 1024 * 1024)

/*
 * The type kept (in the cache and kafka_sink.schemas, with an empty text)
 * for an id whose answer is larger than KS_REGISTRY_MAX_ANSWER: a schema id
 * never changes, so its messages are invalid_avro, not a registry outage
 * that would stop the pipeline for good.
 */
#define KS_SCHEMA_TOO_LARGE "TOO_LARGE"

/*
 * The suffix of the type kept for a schema with references: its text is
 * then the bundle of fetch_one (the schema and its references' texts).
 */
#define KS_SCHEMA_REFS "+refs"

typedef struct CacheKey
{
	uint64		registry;		/* hash of the registry's url option */
	int32		id;
} CacheKey;

typedef struct CacheEntry
{
	CacheKey	key;
	bool		unknown;		/* the registry said 404 ... */
	TimestampTz unknown_in_xact;	/* ... in this transaction */
	bool		unknown_next;	/* ... to the prefetch of the batch */
	char	   *failed_next;	/* the prefetch found the registry down: why */
	KsSchemaEntry *schema;
} CacheEntry;

static HTAB *schema_cache = NULL;
static MemoryContext schema_cxt = NULL;
static List *inline_schemas = NIL;	/* of KsSchemaEntry, id -1 */
static bool curl_ready = false;

static void
cache_init(void)
{
	HASHCTL		ctl;

	if (schema_cache)
		return;
	schema_cxt = AllocSetContextCreate(TopMemoryContext, "kafka_sink schemas",
									   ALLOCSET_SMALL_SIZES);
	memset(&ctl, 0, sizeof(ctl));
	ctl.keysize = sizeof(CacheKey);
	ctl.entrysize = sizeof(CacheEntry);
	ctl.hcxt = schema_cxt;
	schema_cache = hash_create("kafka_sink schemas", 64, &ctl, HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
}

/*
 * A schema with references (fetch_one's bundle): Avro with the named types
 * of its references, Protobuf with its imports (a reference's name is the
 * import's file name); JSON Schema is not compiled (json_schema reads the
 * payload as JSON).  A bundle with an error is invalid.
 */
static void
compile_bundle(KsSchemaEntry *e, const char *base_type, const char *text)
{
	char	   *err = NULL;
	KsJson	   *j = ks_json_parse(text, strlen(text), &err);
	KsJson	   *main,
			   *refs,
			   *error;

	if (j == NULL || (main = ks_json_get(j, "schema")) == NULL || main->kind != KS_J_STRING ||
		(refs = ks_json_get(j, "references")) == NULL || refs->kind != KS_J_ARRAY)
	{
		e->invalid = pstrdup("the stored schema with references is not readable");
		return;
	}
	if ((error = ks_json_get(j, "error")) != NULL && error->kind == KS_J_STRING)
	{
		e->invalid = psprintf("its references cannot be resolved: %s", error->str);
		return;
	}
	/* the catalog is data: every reference has a name and a schema text */
	for (int i = 0; i < refs->n; i++)
	{
		KsJson	   *name = ks_json_get(refs->items[i], "name");
		KsJson	   *schema = ks_json_get(refs->items[i], "schema");

		if (name == NULL || name->kind != KS_J_STRING || schema == NULL || schema->kind != KS_J_STRING)
		{
			e->invalid = pstrdup("the stored schema with references is not readable");
			return;
		}
	}
	if (strcmp(base_type, "PROTOBUF") == 0)
	{
		KsPbFile   *files = palloc(sizeof(KsPbFile) * (refs->n + 1));

		files[0].name = "schema.proto";
		files[0].text = main->str;
		files[0].len = strlen(main->str);
		for (int i = 0; i < refs->n; i++)
		{
			files[i + 1].name = ks_json_get(refs->items[i], "name")->str;
			files[i + 1].text = ks_json_get(refs->items[i], "schema")->str;
			files[i + 1].len = strlen(files[i + 1].text);
		}
		e->proto = ks_pb_schema_parse(files, refs->n + 1, &err);
		if (e->proto == NULL)
			e->invalid = err;
	}
	else if (strcmp(base_type, "AVRO") == 0)
	{
		const char **texts = palloc(sizeof(char *) * Max(refs->n, 1));

		for (int i = 0; i < refs->n; i++)
			texts[i] = ks_json_get(refs->items[i], "schema")->str;
		e->avro = ks_avro_schema_parse_refs(texts, refs->n, main->str, &err);
		if (e->avro == NULL)
			e->invalid = err;
	}
}

/* A schema entry for a schema's text in cxt, compiled when it is Avro or Protobuf. */
static KsSchemaEntry *
compile_entry(MemoryContext cxt, int32 id, const char *type, const char *text)
{
	MemoryContext old = MemoryContextSwitchTo(cxt);
	KsSchemaEntry *e = palloc0(sizeof(KsSchemaEntry));

	e->id = id;
	e->type = pstrdup(type);
	e->text = pstrdup(text);
	if (strcmp(type, KS_SCHEMA_TOO_LARGE) == 0)
		e->invalid = psprintf("the registry's answer for it is larger than %d bytes",
							  KS_REGISTRY_MAX_ANSWER);
	else if (strcmp(type, "AVRO") == 0)
	{
		char	   *err = NULL;

		e->avro = ks_avro_schema_parse(text, strlen(text), &err);
		if (e->avro == NULL)
			e->invalid = err;
	}
	else if (strcmp(type, "PROTOBUF") == 0)
	{
		char	   *err = NULL;
		KsPbFile	f = {"schema.proto", text, strlen(text)};

		e->proto = ks_pb_schema_parse(&f, 1, &err);
		if (e->proto == NULL)
			e->invalid = err;
	}
	else if (strlen(type) > strlen(KS_SCHEMA_REFS) &&
			 strcmp(type + strlen(type) - strlen(KS_SCHEMA_REFS), KS_SCHEMA_REFS) == 0)
		compile_bundle(e, pnstrdup(type, strlen(type) - strlen(KS_SCHEMA_REFS)), text);
	MemoryContextSwitchTo(old);
	return e;
}

/* A cache entry: compiled once into the worker's schema cache. */
static KsSchemaEntry *
make_entry(int32 id, const char *type, const char *text)
{
	return compile_entry(schema_cxt, id, type, text);
}

/*
 * A schema as kafka_sink.schemas stores it (its type, references bundled:
 * "<type>+refs"), compiled in the current memory context, outside the
 * cache: for lineage, which reads stored schemas and never a registry.
 */
KsSchemaEntry *
ks_schema_compile(int32 id, const char *type, const char *text)
{
	return compile_entry(CurrentMemoryContext, id, type, text);
}

KsSchemaEntry *
ks_schema_inline(const char *text)
{
	ListCell   *lc;
	MemoryContext old;
	KsSchemaEntry *e;

	cache_init();
	foreach(lc, inline_schemas)
	{
		e = lfirst(lc);
		if (strcmp(e->text, text) == 0)
			return e;
	}
	e = make_entry(-1, "AVRO", text);
	old = MemoryContextSwitchTo(schema_cxt);
	inline_schemas = lappend(inline_schemas, e);
	MemoryContextSwitchTo(old);
	return e;
}

/* ---- HTTP ---- */

typedef struct Answer
{
	StringInfoData body;
	bool		too_large;
} Answer;

static size_t
on_data(char *ptr, size_t size, size_t nmemb, void *userdata)
{
	Answer	   *a = userdata;
	size_t		n = size * nmemb;

	if (a->body.len + n > KS_REGISTRY_MAX_ANSWER)
	{
		a->too_large = true;
		return 0;				/* makes curl stop with CURLE_WRITE_ERROR */
	}
	appendBinaryStringInfo(&a->body, ptr, (int) n);
	return n;
}

typedef enum FetchResult
{
	FETCH_OK,
	FETCH_NOT_FOUND,
	FETCH_UNAVAILABLE
} FetchResult;

/*
 * One GET of url: the status (0 without an answer) and the body in *a, or
 * false with *err when there is no HTTP answer to judge (a.too_large: one
 * larger than KS_REGISTRY_MAX_ANSWER).
 */
static bool
http_get(KsRegistryConf *reg, const char *userinfo, const char *url, Answer *a, long *status,
		 char **err)
{
	CURL	   *h;
	CURLcode	rc;
	char		errbuf[CURL_ERROR_SIZE];

	*status = 0;
	initStringInfo(&a->body);
	a->too_large = false;
	h = curl_easy_init();
	if (h == NULL)
	{
		*err = pstrdup("libcurl could not make a handle");
		return false;
	}
	errbuf[0] = '\0';
	curl_easy_setopt(h, CURLOPT_URL, url);
#if LIBCURL_VERSION_NUM >= 0x075500
	curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(h, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
#else
	curl_easy_setopt(h, CURLOPT_PROTOCOLS, (long) (CURLPROTO_HTTP | CURLPROTO_HTTPS));
	curl_easy_setopt(h, CURLOPT_REDIR_PROTOCOLS, (long) (CURLPROTO_HTTP | CURLPROTO_HTTPS));
#endif
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);	/* never a signal in a backend */

	/*
	 * Never follow a redirect: its target is a host nobody checked against
	 * kafka_sink.allowed_hosts.  A 3xx is an outage (HTTP 302 in the error).
	 */
	curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);
	curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long) reg->timeout_ms);
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, (long) reg->timeout_ms);
	curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_data);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, a);
	curl_easy_setopt(h, CURLOPT_USERAGENT, "kafka_sink/" KS_VERSION);
	if (userinfo)
	{
		curl_easy_setopt(h, CURLOPT_HTTPAUTH, (long) CURLAUTH_BASIC);
		curl_easy_setopt(h, CURLOPT_USERPWD, userinfo);
	}
	if (reg->ca_location)
		curl_easy_setopt(h, CURLOPT_CAINFO, reg->ca_location);

	rc = curl_easy_perform(h);
	if (rc == CURLE_OK || a->too_large)
		curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, status);
	curl_easy_cleanup(h);
	if (rc != CURLE_OK && !(a->too_large && *status == 200))
	{
		*err = a->too_large ? psprintf("%s: HTTP %ld, an answer larger than %d bytes", url, *status, KS_REGISTRY_MAX_ANSWER) :
			psprintf("%s: %s", url, errbuf[0] ? errbuf : curl_easy_strerror(rc));
		return false;
	}
	return true;
}

/* A registry's error answer with this error_code */
static bool
is_error(KsJson *j, const char *code)
{
	KsJson	   *c = j ? ks_json_get(j, "error_code") : NULL;

	return c && c->str && strcmp(c->str, code) == 0;
}

/*
 * Schema references (name, subject, version), resolved through
 * /subjects/{subject}/versions/{version}, recursively, into a bundle that
 * make_entry reads: {"schema": ..., "references": [{"name", "subject",
 * "version", "schema"}, ...], "error": ...}, each reference after those
 * it uses, each name once.  A cycle, more than KS_REGISTRY_MAX_REF_DEPTH
 * levels, more than KS_REGISTRY_MAX_REFS references or more than
 * KS_REGISTRY_MAX_ANSWER bytes in all, or a reference the registry does
 * not have, is the schema's property (its "error": its messages are
 * quarantined); an outage is an outage.
 */
#define KS_REGISTRY_MAX_REF_DEPTH 16
#define KS_REGISTRY_MAX_REFS 256

typedef struct RefWalk
{
	KsRegistryConf *reg;
	const char *userinfo;		/* basic.auth.user.info, resolved */
	const char *base;
	StringInfoData refs;		/* the references array's members so far */
	List	   *names;			/* of char *, in refs */
	List	   *path;			/* "subject/version" being resolved */
	size_t		total;
	char	   *error;			/* the schema's problem */
	char	   *err;			/* an outage */
} RefWalk;

static bool
walk_refs(RefWalk *w, KsJson *refs, int depth)
{
	for (int i = 0; i < refs->n; i++)
	{
		KsJson	   *r = refs->items[i];
		KsJson	   *name = ks_json_get(r, "name");
		KsJson	   *subject = ks_json_get(r, "subject");
		KsJson	   *version = ks_json_get(r, "version");
		char	   *key,
				   *url,
				   *esc,
				   *jerr;
		Answer		a;
		long		status;
		KsJson	   *j,
				   *text,
				   *sub;
		ListCell   *lc;
		bool		seen = false;

		if (r->kind != KS_J_OBJECT || !name || name->kind != KS_J_STRING || !subject ||
			subject->kind != KS_J_STRING || !version || version->kind != KS_J_NUMBER)
		{
			w->error = pstrdup("a reference is not an object of name, subject and version");
			return false;
		}
		foreach(lc, w->names)
			if (strcmp(lfirst(lc), name->str) == 0)
				seen = true;
		if (seen)
			continue;
		key = psprintf("%s/%s", subject->str, version->str);
		foreach(lc, w->path)
			if (strcmp(lfirst(lc), key) == 0)
			{
				w->error = psprintf("the references form a cycle through subject \"%s\" version %s",
									subject->str, version->str);
				return false;
			}
		if (depth >= KS_REGISTRY_MAX_REF_DEPTH)
		{
			w->error = psprintf("references nest more than %d deep", KS_REGISTRY_MAX_REF_DEPTH);
			return false;
		}
		if (list_length(w->names) >= KS_REGISTRY_MAX_REFS)
		{
			w->error = psprintf("the schema has more than %d references", KS_REGISTRY_MAX_REFS);
			return false;
		}
		esc = curl_easy_escape(NULL, subject->str, 0);
		url = psprintf("%s/subjects/%s/versions/%s", w->base, esc ? esc : "", version->str);
		if (esc)
			curl_free(esc);
		if (!http_get(w->reg, w->userinfo, url, &a, &status, &w->err))
			return false;
		if (a.too_large)
		{
			w->error = psprintf("reference \"%s\" is larger than %d bytes", name->str, KS_REGISTRY_MAX_ANSWER);
			return false;
		}
		j = ks_json_parse(a.body.data, a.body.len, &jerr);
		if (status == 404 && (is_error(j, "40401") || is_error(j, "40402")))
		{
			w->error = psprintf("reference \"%s\" (subject \"%s\" version %s) is not in the registry",
								name->str, subject->str, version->str);
			return false;
		}
		if (status != 200 || j == NULL || (text = ks_json_get(j, "schema")) == NULL || text->kind != KS_J_STRING)
		{
			w->err = psprintf("%s: %s", url, status != 200 ? psprintf("HTTP %ld", status) : "the answer is not a schema");
			return false;
		}
		w->total += strlen(text->str);
		if (w->total > KS_REGISTRY_MAX_ANSWER)
		{
			w->error = psprintf("the schema's references have more than %d bytes", KS_REGISTRY_MAX_ANSWER);
			return false;
		}
		/* what it uses first */
		sub = ks_json_get(j, "references");
		w->path = lappend(w->path, key);
		if (sub && sub->kind == KS_J_ARRAY && !walk_refs(w, sub, depth + 1))
			return false;
		w->path = list_delete_last(w->path);
		w->names = lappend(w->names, pstrdup(name->str));
		if (w->refs.len > 0)
			appendStringInfoChar(&w->refs, ',');
		appendStringInfoString(&w->refs, "{\"name\": ");
		escape_json(&w->refs, name->str);
		appendStringInfoString(&w->refs, ", \"subject\": ");
		escape_json(&w->refs, subject->str);
		appendStringInfo(&w->refs, ", \"version\": %s, \"schema\": ", version->str);
		escape_json(&w->refs, text->str);
		appendStringInfoChar(&w->refs, '}');
	}
	return true;
}

/* One GET of base/schemas/ids/{id}; *err says why when it is not OK. */
static FetchResult
fetch_one(KsRegistryConf *reg, const char *base, const char *userinfo, int32 id,
		  char **type, char **text, char **err)
{
	Answer		a;
	long		status;
	char	   *url;
	size_t		blen = strlen(base);
	KsJson	   *j,
			   *refs;
	char	   *jerr;

	while (blen > 0 && base[blen - 1] == '/')
		blen--;
	url = psprintf("%.*s/schemas/ids/%d", (int) blen, base, id);
	if (!http_get(reg, userinfo, url, &a, &status, err))
		return FETCH_UNAVAILABLE;

	/* a schema too large to take (not an error page too large) */
	if (a.too_large)
	{
		*type = KS_SCHEMA_TOO_LARGE;
		*text = "";
		return FETCH_OK;
	}
	j = ks_json_parse(a.body.data, a.body.len, &jerr);
	if (status == 404 && is_error(j, "40403"))
		return FETCH_NOT_FOUND;
	if (status != 200)
	{
		*err = psprintf("%s: HTTP %ld%s", url, status,
						status == 401 || status == 403 ? " (the registry refused the credentials)" : "");
		return FETCH_UNAVAILABLE;
	}
	if (j == NULL || ks_json_get(j, "schema") == NULL || ks_json_get(j, "schema")->kind != KS_J_STRING)
	{
		*err = psprintf("%s: the answer is not a schema", url);
		return FETCH_UNAVAILABLE;
	}
	*text = ks_json_get(j, "schema")->str;
	*type = ks_json_get(j, "schemaType") && ks_json_get(j, "schemaType")->kind == KS_J_STRING ?
		ks_json_get(j, "schemaType")->str : "AVRO";
	refs = ks_json_get(j, "references");
	if (refs && refs->kind == KS_J_ARRAY && refs->n > 0)
	{
		RefWalk		w;
		StringInfoData b;

		memset(&w, 0, sizeof(w));
		w.reg = reg;
		w.userinfo = userinfo;
		w.base = pnstrdup(base, blen);
		initStringInfo(&w.refs);
		if (!walk_refs(&w, refs, 0) && w.error == NULL)
		{
			*err = w.err;
			return FETCH_UNAVAILABLE;
		}
		initStringInfo(&b);
		appendStringInfoString(&b, "{\"schema\": ");
		escape_json(&b, *text);
		appendStringInfo(&b, ", \"references\": [%s]", w.refs.data);
		if (w.error)
		{
			appendStringInfoString(&b, ", \"error\": ");
			escape_json(&b, w.error);
		}
		appendStringInfoChar(&b, '}');
		*type = psprintf("%s" KS_SCHEMA_REFS, *type);
		*text = b.data;
	}
	return FETCH_OK;
}

/*
 * Tries each url in turn; the first answer that is not an outage decides.
 * An outage of them all is FETCH_UNAVAILABLE with *why.
 */
static FetchResult
fetch_quiet(KsRegistryConf *reg, int32 id, char **type, char **text, char **why)
{
	ListCell   *lc;
	StringInfoData errs;
	List	   *check = NIL;
	KsOption   *auth = NULL;
	char	   *userinfo = NULL;

	/* the catalog is data: the rules again, where the options are used */
	if (reg->ca_location)
	{
		KsOption   *o = palloc0(sizeof(KsOption));

		o->name = "ssl.ca.location";
		o->value = reg->ca_location;
		check = lappend(check, o);
	}
	if (reg->userinfo)
	{
		auth = palloc0(sizeof(KsOption));
		auth->name = "basic.auth.user.info";
		auth->value = reg->userinfo;
		auth->ref = reg->userinfo_ref;
		check = lappend(check, auth);
	}
	ks_registry_options_check(check, reg->owner);

	/* a reference is read at each fetch: a rotated file is used from the next one */
	if (auth)
	{
		userinfo = ks_option_value(auth, "schema registry option", reg->owner);
		if (auth->ref != KS_REF_NONE && strchr(userinfo, ':') == NULL)
		{
			ks_secret_free(auth, userinfo);
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 auth->ref == KS_REF_ENV ?
					 errmsg("environment variable \"%s\" of schema registry option \"%s\" is not user:password", auth->value, auth->name) :
					 errmsg("file \"%s\" of schema registry option \"%s\" is not user:password", auth->value, auth->name),
					 errhint("It holds user:password, on one line.")));
		}
	}
	foreach(lc, reg->urls)
		ks_hosts_check_url("schema registry option \"url\"", lfirst(lc));
	if (!curl_ready)
	{
		if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
			ereport(ERROR,
					(errcode(ERRCODE_CONNECTION_FAILURE),
					 errmsg("schema registry unavailable"),
					 errdetail("libcurl could not be initialised.")));
		curl_ready = true;
	}
	initStringInfo(&errs);
	foreach(lc, reg->urls)
	{
		char	   *err = NULL;
		FetchResult r = fetch_one(reg, lfirst(lc), userinfo, id, type, text, &err);

		if (r != FETCH_UNAVAILABLE)
		{
			ks_secret_free(auth, userinfo);
			return r;
		}
		if (errs.len > 0)
			appendStringInfoString(&errs, "; ");
		appendStringInfoString(&errs, err);
		CHECK_FOR_INTERRUPTS();
	}
	ks_secret_free(auth, userinfo);
	*why = errs.data;
	return FETCH_UNAVAILABLE;
}

static void
raise_unavailable(int32 id, const char *why)
{
	ereport(ERROR,
			(errcode(ERRCODE_CONNECTION_FAILURE),
			 errmsg("schema registry unavailable while fetching schema id %d", id),
			 errdetail("%s.", why),
			 errhint("The pipeline retries; no message is quarantined or skipped meanwhile.")));
}

/* As fetch_quiet, but an outage is an ERROR of class 08. */
static FetchResult
fetch(KsRegistryConf *reg, int32 id, char **type, char **text)
{
	char	   *why = NULL;
	FetchResult r = fetch_quiet(reg, id, type, text, &why);

	if (r == FETCH_UNAVAILABLE)
		raise_unavailable(id, why);
	return r;
}

/* The cache entry of (reg, id), made empty when new. */
static CacheEntry *
entry_for(KsRegistryConf *reg, int32 id)
{
	CacheKey	key;
	CacheEntry *ce;
	bool		found;

	memset(&key, 0, sizeof(key));
	key.registry = hash_bytes_extended((const unsigned char *) reg->key, strlen(reg->key), 0);
	key.id = id;
	ce = hash_search(schema_cache, &key, HASH_ENTER, &found);
	if (!found)
	{
		ce->unknown = false;
		ce->unknown_next = false;
		ce->failed_next = NULL;
		ce->schema = NULL;
	}
	return ce;
}

static void
clear_next(CacheEntry *ce)
{
	ce->unknown_next = false;
	if (ce->failed_next)
		pfree(ce->failed_next);
	ce->failed_next = NULL;
}

/*
 * The schema of id in the registry, or NULL when the registry does not
 * know it.  Runs in a transaction with SPI connected.
 */
KsSchemaEntry *
ks_schema_by_id(KsRegistryConf *reg, int32 id)
{
	CacheEntry *ce;
	TimestampTz xact = GetCurrentTransactionStartTimestamp();
	char	   *type;
	char	   *text;

	cache_init();
	ce = entry_for(reg, id);
	if (ce->schema)
	{
		KsSchemaEntry *e = ce->schema;

		/*
		 * Fetched by this process: stored in the catalog in a transaction
		 * that may have rolled back.  Stored again (ON CONFLICT DO NOTHING)
		 * once per transaction until the catalog is seen to have it.
		 */
		if (!e->in_catalog && e->stored_in_xact != xact)
		{
			e->in_catalog = !ks_catalog_schema_put(reg->key, id, e->type, e->text);
			e->stored_in_xact = xact;
		}
		return e;
	}
	if (ce->unknown && ce->unknown_in_xact == xact)
		return NULL;

	if (ks_catalog_schema_get(reg->key, id, &type, &text))
	{
		clear_next(ce);
		ce->schema = make_entry(id, type, text);
		ce->schema->in_catalog = true;
		return ce->schema;
	}

	/* the prefetch's answer, for this batch only (ks_schema_prefetch) */
	if (ce->unknown_next)
	{
		clear_next(ce);
		ce->unknown = true;
		ce->unknown_in_xact = xact;
		return NULL;
	}
	if (ce->failed_next)
	{
		char	   *why = pstrdup(ce->failed_next);

		clear_next(ce);
		raise_unavailable(id, why);
	}

	if (fetch(reg, id, &type, &text) == FETCH_NOT_FOUND)
	{
		ce->unknown = true;
		ce->unknown_in_xact = xact;
		return NULL;
	}
	ce->schema = make_entry(id, type, text);
	ce->schema->in_catalog = !ks_catalog_schema_put(reg->key, id, type, text);
	ce->schema->stored_in_xact = xact;
	return ce->schema;
}

/*
 * Does this side of a pipeline's messages carry Confluent's wire frame,
 * i.e. a schema id to look up?
 */
static bool
side_is_framed(KsPipeline *p, bool is_key)
{
	const KsFormat *f = is_key ? p->contract.key_fmt : p->contract.value_fmt;

	if (f == NULL)
		return false;
	if (strcmp(f->name, "json_schema") == 0 || strcmp(f->name, "protobuf") == 0 ||
		strcmp(f->name, "registry") == 0)
		return true;
	return strcmp(f->name, "avro") == 0 && (is_key || p->contract.value_schema == NULL);
}

/* ks_schema_prefetch's lookups of ids; errors are the caller's. */
static void
prefetch_ids(KsPipeline *p, List *ids, MemoryContext cxt)
{
	List	   *missing = NIL;
	char	   *outage = NULL;
	ListCell   *lc;

	ks_xact_begin("kafka_sink: reading schemas");
	MemoryContextSwitchTo(cxt);
	foreach(lc, ids)
	{
		char	   *type;
		char	   *text;

		if (ks_catalog_schema_get(p->contract.registry->key, lfirst_int(lc), &type, &text))
		{
			CacheEntry *ce = entry_for(p->contract.registry, lfirst_int(lc));

			ce->schema = make_entry(lfirst_int(lc), type, text);
			ce->schema->in_catalog = true;
		}
		else
			missing = lappend_int(missing, lfirst_int(lc));
	}
	ks_xact_commit();
	MemoryContextSwitchTo(cxt);

	/* no transaction is open from here on */
	foreach(lc, missing)
	{
		int32		id = lfirst_int(lc);
		CacheEntry *ce = entry_for(p->contract.registry, id);
		char	   *type;
		char	   *text;
		FetchResult r = FETCH_UNAVAILABLE;

		if (outage == NULL)
			r = fetch_quiet(p->contract.registry, id, &type, &text, &outage);
		if (r == FETCH_OK)
		{
			ce->schema = make_entry(id, type, text);
			ce->schema->in_catalog = false;
			ce->schema->stored_in_xact = 0;
		}
		else if (r == FETCH_NOT_FOUND)
			ce->unknown_next = true;
		else
			ce->failed_next = MemoryContextStrdup(schema_cxt, outage);
	}
}

/*
 * Called by the worker after a batch is filled and before its transaction
 * opens (STYLE: no transaction across a network wait).  The schema ids in
 * the batch's frames that this process has no schema for are read from the
 * catalog, in a short transaction of its own with no network wait, and the
 * rest fetched from the registry with no transaction open; decoding in the
 * batch's transaction then finds them in the cache (and stores the fetched
 * ones in the catalog there, as that write needs the batch's transaction).
 *
 * A 404 and an outage are kept for the next lookup of the id only, i.e.
 * the batch's decoding: the message is quarantined as unknown_schema_id,
 * or the outage raised there as the error the worker records and retries,
 * as if decoding had fetched itself.  After an outage the ids not asked yet
 * carry the same outage: decoding waits on no registry.  Any other error
 * here is logged and dropped; decoding then looks the ids up as it always
 * could (replay_quarantine and the lineage functions have no prefetch).
 */
void
ks_schema_prefetch(KsPipeline *p, KsMessage **msgs, int nmsgs)
{
	MemoryContext cxt = CurrentMemoryContext;
	List	   *volatile ids = NIL;
	bool		framed[2];

	if (p->contract.registry == NULL)
		return;
	framed[0] = side_is_framed(p, false);
	framed[1] = side_is_framed(p, true);
	if (!framed[0] && !framed[1])
		return;
	cache_init();

	for (int i = 0; i < nmsgs; i++)
	{
		for (int side = 0; side < 2; side++)
		{
			const char *data = side ? msgs[i]->key : msgs[i]->value;
			size_t		len = side ? msgs[i]->key_len : msgs[i]->value_len;
			char	   *detail;
			int32		id;
			CacheEntry *ce;

			if (!framed[side] || data == NULL || !ks_wire_frame(data, len, &id, &detail))
				continue;
			if (list_member_int(ids, id))
				continue;
			ce = entry_for(p->contract.registry, id);
			if (ce->schema)
				continue;
			clear_next(ce);		/* an answer of an earlier batch is not this one's */
			ids = lappend_int(ids, id);
		}
	}
	if (ids == NIL)
		return;

	PG_TRY();
	{
		prefetch_ids(p, ids, cxt);
	}
	PG_CATCH();
	{
		MemoryContextSwitchTo(cxt);
		EmitErrorReport();
		FlushErrorState();
		AbortOutOfAnyTransaction();
		MemoryContextSwitchTo(cxt);
	}
	PG_END_TRY();
}
