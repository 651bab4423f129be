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
 *
 * Failures: an id the registry answers 404/40403 for is unknown (the
 * message is quarantined as unknown_schema_id; the answer is remembered
 * only for the current transaction, so a later registration is seen).
 * Anything else (no connection, a timeout, 5xx, 401, an answer that is not
 * a schema) raises ERRCODE_CONNECTION_FAILURE: the worker retries the
 * batch after a pause, and nothing is quarantined or lost.
 *
 * The registry password (basic.auth.user.info) is handed to libcurl
 * apart from the URL and appears in no message: URLs carrying user
 * information are refused where the options are checked.
 *
 *-------------------------------------------------------------------------
 */
#include "kafka_sink.h"
#include "catalog.h"
#include "format.h"
#include "avro_binary.h"
#include "kafka_options.h"

#include <curl/curl.h>

#include "access/xact.h"
#include "common/hashfn.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#define KS_REGISTRY_MAX_ANSWER (8 * 1024 * 1024)

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

/* A cache entry for a schema's text, compiled when it is Avro. */
static KsSchemaEntry *
make_entry(int32 id, const char *type, const char *text)
{
	MemoryContext old = MemoryContextSwitchTo(schema_cxt);
	KsSchemaEntry *e = palloc0(sizeof(KsSchemaEntry));

	e->id = id;
	e->type = pstrdup(type);
	e->text = pstrdup(text);
	if (strcmp(type, "AVRO") == 0)
	{
		char	   *err = NULL;

		e->avro = ks_avro_schema_parse(text, strlen(text), &err);
		if (e->avro == NULL)
			e->invalid = err;
	}
	MemoryContextSwitchTo(old);
	return e;
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

/* One GET of base/schemas/ids/{id}; *err says why when it is not OK. */
static FetchResult
fetch_one(KsRegistryConf *reg, const char *base, int32 id, char **type, char **text, char **err)
{
	CURL	   *h;
	CURLcode	rc;
	long		status = 0;
	Answer		a;
	char		errbuf[CURL_ERROR_SIZE];
	char	   *url;
	size_t		blen = strlen(base);
	FetchResult result = FETCH_UNAVAILABLE;
	KsJson	   *j;
	char	   *jerr;

	while (blen > 0 && base[blen - 1] == '/')
		blen--;
	url = psprintf("%.*s/schemas/ids/%d", (int) blen, base, id);
	h = curl_easy_init();
	if (h == NULL)
	{
		*err = pstrdup("libcurl could not make a handle");
		return FETCH_UNAVAILABLE;
	}
	initStringInfo(&a.body);
	a.too_large = false;
	errbuf[0] = '\0';
	curl_easy_setopt(h, CURLOPT_URL, url);
#if LIBCURL_VERSION_NUM >= 0x075500
	curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
#endif
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);	/* never a signal in a backend */
	curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);
	curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long) reg->timeout_ms);
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, (long) reg->timeout_ms);
	curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_data);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, &a);
	curl_easy_setopt(h, CURLOPT_USERAGENT, "kafka_sink/" KS_VERSION);
	if (reg->userinfo)
	{
		curl_easy_setopt(h, CURLOPT_HTTPAUTH, (long) CURLAUTH_BASIC);
		curl_easy_setopt(h, CURLOPT_USERPWD, reg->userinfo);
	}
	if (reg->ca_location)
		curl_easy_setopt(h, CURLOPT_CAINFO, reg->ca_location);

	rc = curl_easy_perform(h);
	if (rc == CURLE_OK)
		curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
	curl_easy_cleanup(h);

	if (rc != CURLE_OK)
	{
		*err = a.too_large ? psprintf("%s: the answer is larger than %d bytes", url, KS_REGISTRY_MAX_ANSWER) :
			psprintf("%s: %s", url, errbuf[0] ? errbuf : curl_easy_strerror(rc));
		return FETCH_UNAVAILABLE;
	}
	j = ks_json_parse(a.body.data, a.body.len, &jerr);
	if (status == 404 && j && ks_json_get(j, "error_code") &&
		strcmp(ks_json_get(j, "error_code")->str, "40403") == 0)
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
	if (ks_json_get(j, "references") && ks_json_get(j, "references")->kind == KS_J_ARRAY &&
		ks_json_get(j, "references")->n > 0)
		*type = psprintf("%s with references", *type);
	result = FETCH_OK;
	return result;
}

/* Tries each url in turn; the first answer that is not an outage decides. */
static FetchResult
fetch(KsRegistryConf *reg, int32 id, char **type, char **text)
{
	ListCell   *lc;
	StringInfoData errs;
	List	   *check = NIL;

	/* the catalog is data: the rules again, where the options are used */
	if (reg->ca_location)
	{
		KsOption   *o = palloc(sizeof(KsOption));

		o->name = "ssl.ca.location";
		o->value = reg->ca_location;
		check = list_make1(o);
	}
	ks_registry_options_check(check, reg->owner);
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
		FetchResult r = fetch_one(reg, lfirst(lc), id, type, text, &err);

		if (r != FETCH_UNAVAILABLE)
			return r;
		if (errs.len > 0)
			appendStringInfoString(&errs, "; ");
		appendStringInfoString(&errs, err);
		CHECK_FOR_INTERRUPTS();
	}
	ereport(ERROR,
			(errcode(ERRCODE_CONNECTION_FAILURE),
			 errmsg("schema registry unavailable while fetching schema id %d", id),
			 errdetail("%s.", errs.data),
			 errhint("The pipeline retries; no message is quarantined or skipped meanwhile.")));
	return FETCH_UNAVAILABLE;	/* not reached */
}

/*
 * The schema of id in the registry, or NULL when the registry does not
 * know it.  Runs in a transaction with SPI connected.
 */
KsSchemaEntry *
ks_schema_by_id(KsRegistryConf *reg, int32 id)
{
	CacheKey	key;
	CacheEntry *ce;
	bool		found;
	TimestampTz xact = GetCurrentTransactionStartTimestamp();
	char	   *type;
	char	   *text;

	cache_init();
	memset(&key, 0, sizeof(key));
	key.registry = hash_bytes_extended((const unsigned char *) reg->key, strlen(reg->key), 0);
	key.id = id;
	ce = hash_search(schema_cache, &key, HASH_ENTER, &found);
	if (!found)
	{
		ce->unknown = false;
		ce->schema = NULL;
	}
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
		ce->schema = make_entry(id, type, text);
		ce->schema->in_catalog = true;
		return ce->schema;
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
