/*-------------------------------------------------------------------------
 *
 * kafka_options.c
 *		The allow-list of librdkafka properties a pipeline owner may set.
 *
 * One table (as postgres_fdw's option.c): every property kafka_sink lets
 * through, the ones it manages itself and the ones it refuses with a
 * reason.  A name that is not in the table is refused: librdkafka grows
 * properties every release, and some of them run programs (the Kerberos
 * kinit command), load libraries (plugins, OpenSSL engines and providers),
 * install signal handlers or write files; a deny-list misses the next one.
 * Names are matched exactly, as librdkafka matches them, so case variants,
 * whitespace and the "topic." prefix librdkafka strips are refused too.
 *
 * The same check runs where the options are defined (the SQL validator)
 * and where they are used (right before every rd_kafka_conf_t is built),
 * because the catalog is data that other paths can write.  Values are
 * checked by librdkafka (rd_kafka_conf_set), except the few whose values
 * decide what the server does on the owner's behalf: file paths, SASL
 * mechanisms, Kerberos names and token endpoint URLs.  No error here ever
 * shows a value: it may be a secret.
 *
 * Owns: the table of librdkafka options and who may set each.  Must
 * not: build a client (consumer.c, producer.c do, after asking here).
 *
 *-------------------------------------------------------------------------
 */
#include "kafka_sink.h"
#include "pipeline.h"
#include "kafka_options.h"
#include "hosts.h"
#include "secret_ref.h"

#include "access/xact.h"
#include "catalog/pg_authid.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/formatting.h"
#include "utils/memutils.h"

typedef enum KsOptKind
{
	OPT_PLAIN,					/* the value is checked by librdkafka */
	OPT_SECRET,					/* as plain, and stored in kafka_sink.secrets */
	OPT_PATH,					/* names a file the server reads */
	OPT_MANAGED,				/* kafka_sink sets it itself */
	OPT_REFUSED					/* nobody may set it, superusers included */
} KsOptKind;

/* which clients the property applies to (librdkafka's C/P column) */
#define OPT_C		KS_USE_CONSUMER
#define OPT_P		KS_USE_PRODUCER
#define OPT_CP		(KS_USE_CONSUMER | KS_USE_PRODUCER)
/* further checks of the value */
#define OPT_SUPERUSER	(1 << 4)	/* only for a superuser owner */
#define OPT_KRB_NAME	(1 << 5)	/* a Kerberos name: a conservative charset */
#define OPT_HTTP_URL	(1 << 6)	/* an http(s) URL, never file:// */
#define OPT_MECHANISM	(1 << 7)	/* a SASL mechanism */
#define OPT_GROUP_NAME	(1 << 8)	/* a consumer group the checkpoints are mirrored to */

typedef struct KsOptDef
{
	const char *name;
	KsOptKind	kind;
	int			flags;
	const char *why;			/* managed and refused: the errdetail */
} KsOptDef;

#define WHY_GROUP "kafka_sink assigns the partitions itself and never joins a consumer group."
#define WHY_OFFSETS "Offsets are committed in the same transaction as the rows they produced."
#define WHY_PREFETCH "kafka_sink sizes the pre-fetch queue from max_offsets_per_batch and max_batch_bytes."
#define WHY_PRODUCER "kafka_sink's producers are idempotent and wait for every delivery report."
#define WHY_C_API "It is set through librdkafka's C API, never from a string."
#define WHY_OFFSET_FILE "It makes librdkafka write offset files on the database server; kafka_sink keeps offsets in its own tables."

/*
 * From librdkafka's CONFIGURATION.md (2.0.2 as linked on Debian 12, and
 * 2.12, whose newer properties a newer librdkafka accepts; an older one
 * rejects them through rd_kafka_conf_set as it rejects any unknown name).
 * Keep the families together and each in the order of CONFIGURATION.md.
 */
static const KsOptDef ks_options[] = {
	/* ---- managed: kafka_sink sets these itself ---- */
	{"bootstrap.servers", OPT_MANAGED, OPT_CP, "Bootstrap servers are a parameter of their own (bootstrap_servers)."},
	{"metadata.broker.list", OPT_MANAGED, OPT_CP, "Bootstrap servers are a parameter of their own (bootstrap_servers)."},
	{"log.queue", OPT_MANAGED, OPT_CP, "librdkafka's logs are routed to the worker's thread."},
	{"sasl.kerberos.min.time.before.relogin", OPT_MANAGED, OPT_CP,
	"kafka_sink sets it to 0, so that librdkafka never runs sasl.kerberos.kinit.cmd."},
	{"group.instance.id", OPT_MANAGED, OPT_C, WHY_GROUP},
	{"partition.assignment.strategy", OPT_MANAGED, OPT_C, WHY_GROUP},
	{"group.protocol.type", OPT_MANAGED, OPT_C, WHY_GROUP},
	{"group.protocol", OPT_MANAGED, OPT_C, WHY_GROUP},
	{"group.remote.assignor", OPT_MANAGED, OPT_C, WHY_GROUP},
	{"enable.auto.commit", OPT_MANAGED, OPT_C, WHY_OFFSETS},
	{"auto.commit.enable", OPT_MANAGED, OPT_C, WHY_OFFSETS},
	{"auto.commit.interval.ms", OPT_MANAGED, OPT_C, WHY_OFFSETS},
	{"enable.auto.offset.store", OPT_MANAGED, OPT_C, WHY_OFFSETS},
	{"auto.offset.reset", OPT_MANAGED, OPT_C,
	"starting_offsets and fail_on_data_loss decide where a partition starts."},
	{"isolation.level", OPT_MANAGED, OPT_C,
	"kafka_sink always reads with read_committed: messages of aborted transactions must never reach a target."},
	{"enable.partition.eof", OPT_MANAGED, OPT_C, "The worker needs end-of-partition events to close batches."},
	{"consume.callback.max.messages", OPT_MANAGED, OPT_C, "The worker polls messages one at a time."},
	{"queued.min.messages", OPT_MANAGED, OPT_C, WHY_PREFETCH},
	{"queued.max.messages.kbytes", OPT_MANAGED, OPT_C, WHY_PREFETCH},
	{"enable.idempotence", OPT_MANAGED, OPT_P, WHY_PRODUCER},
	{"enable.gapless.guarantee", OPT_MANAGED, OPT_P, WHY_PRODUCER},
	{"transactional.id", OPT_MANAGED, OPT_P, WHY_PRODUCER},
	{"transaction.timeout.ms", OPT_MANAGED, OPT_P, WHY_PRODUCER},
	{"delivery.report.only.error", OPT_MANAGED, OPT_P, WHY_PRODUCER},
	{"produce.offset.report", OPT_MANAGED, OPT_P, WHY_PRODUCER},

	/* ---- refused: programs, libraries, signal handlers, files, C API ---- */
	{"plugin.library.paths", OPT_REFUSED, OPT_CP, "It loads shared libraries into the server process."},
	{"interceptors", OPT_REFUSED, OPT_CP, "It is set by librdkafka plugins, which load shared libraries into the server process."},
	{"sasl.kerberos.kinit.cmd", OPT_REFUSED, OPT_CP, "It is a shell command line that librdkafka runs on the database server."},
	{"sasl.kerberos.keytab", OPT_REFUSED, OPT_CP,
	"librdkafka only uses it inside sasl.kerberos.kinit.cmd, which kafka_sink never runs."},
	{"ssl.engine.location", OPT_REFUSED, OPT_CP, "It loads an OpenSSL engine, a shared library, into the server process."},
	{"ssl.engine.id", OPT_REFUSED, OPT_CP, "It selects an OpenSSL engine, code loaded into the server process."},
	{"ssl.providers", OPT_REFUSED, OPT_CP, "It loads OpenSSL providers, shared libraries, into the server process."},
	{"ssl_engine_callback_data", OPT_REFUSED, OPT_CP, WHY_C_API},
	{"enable.sasl.oauthbearer.unsecure.jwt", OPT_REFUSED, OPT_CP,
	"It signs tokens with no key, for librdkafka's own tests; with a malformed sasl.oauthbearer.config librdkafka 2.0.2 crashes the process, here a PostgreSQL backend."},
	{"internal.termination.signal", OPT_REFUSED, OPT_CP, "It installs a signal handler in the server process."},
	{"offset.store.method", OPT_REFUSED, OPT_C, WHY_OFFSET_FILE},
	{"offset.store.path", OPT_REFUSED, OPT_C, WHY_OFFSET_FILE},
	{"offset.store.sync.interval.ms", OPT_REFUSED, OPT_C, WHY_OFFSET_FILE},
	{"ssl_key", OPT_REFUSED, OPT_CP, WHY_C_API},
	{"ssl_certificate", OPT_REFUSED, OPT_CP, WHY_C_API},
	{"ssl_ca", OPT_REFUSED, OPT_CP, WHY_C_API},
	{"default_topic_conf", OPT_REFUSED, OPT_CP, WHY_C_API},
	{"enabled_events", OPT_REFUSED, OPT_CP, WHY_C_API},

	/* ---- the client in general ---- */
	{"client.id", OPT_PLAIN, OPT_CP, NULL},
	{"client.rack", OPT_PLAIN, OPT_CP, NULL},
	{"client.dns.lookup", OPT_PLAIN, OPT_CP, NULL},
	{"message.max.bytes", OPT_PLAIN, OPT_CP, NULL},
	{"message.copy.max.bytes", OPT_PLAIN, OPT_P, NULL},
	{"receive.message.max.bytes", OPT_PLAIN, OPT_CP, NULL},
	{"max.in.flight.requests.per.connection", OPT_PLAIN, OPT_CP, NULL},
	{"max.in.flight", OPT_PLAIN, OPT_CP, NULL},
	{"metadata.recovery.strategy", OPT_PLAIN, OPT_CP, NULL},
	{"metadata.recovery.rebootstrap.trigger.ms", OPT_PLAIN, OPT_CP, NULL},
	{"topic.metadata.refresh.interval.ms", OPT_PLAIN, OPT_CP, NULL},
	{"metadata.max.age.ms", OPT_PLAIN, OPT_CP, NULL},
	{"topic.metadata.refresh.fast.interval.ms", OPT_PLAIN, OPT_CP, NULL},
	{"topic.metadata.refresh.fast.cnt", OPT_PLAIN, OPT_CP, NULL},
	{"topic.metadata.refresh.sparse", OPT_PLAIN, OPT_CP, NULL},
	{"topic.metadata.propagation.max.ms", OPT_PLAIN, OPT_CP, NULL},
	{"topic.blacklist", OPT_PLAIN, OPT_CP, NULL},
	{"debug", OPT_PLAIN, OPT_CP, NULL},
	{"log_level", OPT_PLAIN, OPT_CP, NULL},
	{"log.thread.name", OPT_PLAIN, OPT_CP, NULL},
	{"log.connection.close", OPT_PLAIN, OPT_CP, NULL},
	{"allow.auto.create.topics", OPT_PLAIN, OPT_CP, NULL},
	{"enable.metrics.push", OPT_PLAIN, OPT_CP, NULL},
	{"api.version.request", OPT_PLAIN, OPT_CP, NULL},
	{"api.version.request.timeout.ms", OPT_PLAIN, OPT_CP, NULL},
	{"api.version.fallback.ms", OPT_PLAIN, OPT_CP, NULL},
	{"broker.version.fallback", OPT_PLAIN, OPT_CP, NULL},

	/* ---- sockets, timeouts, retries ---- */
	{"socket.timeout.ms", OPT_PLAIN, OPT_CP, NULL},
	{"socket.blocking.max.ms", OPT_PLAIN, OPT_CP, NULL},
	{"socket.send.buffer.bytes", OPT_PLAIN, OPT_CP, NULL},
	{"socket.receive.buffer.bytes", OPT_PLAIN, OPT_CP, NULL},
	{"socket.keepalive.enable", OPT_PLAIN, OPT_CP, NULL},
	{"socket.nagle.disable", OPT_PLAIN, OPT_CP, NULL},
	{"socket.max.fails", OPT_PLAIN, OPT_CP, NULL},
	{"broker.address.ttl", OPT_PLAIN, OPT_CP, NULL},
	{"broker.address.family", OPT_PLAIN, OPT_CP, NULL},
	{"socket.connection.setup.timeout.ms", OPT_PLAIN, OPT_CP, NULL},
	{"connections.max.idle.ms", OPT_PLAIN, OPT_CP, NULL},
	{"reconnect.backoff.jitter.ms", OPT_PLAIN, OPT_CP, NULL},
	{"reconnect.backoff.ms", OPT_PLAIN, OPT_CP, NULL},
	{"reconnect.backoff.max.ms", OPT_PLAIN, OPT_CP, NULL},
	{"retry.backoff.ms", OPT_PLAIN, OPT_CP, NULL},
	{"retry.backoff.max.ms", OPT_PLAIN, OPT_CP, NULL},

	/* ---- security: protocol, SSL material (inline or by path) ---- */
	{"security.protocol", OPT_PLAIN, OPT_CP, NULL},
	{"ssl.cipher.suites", OPT_PLAIN, OPT_CP, NULL},
	{"ssl.curves.list", OPT_PLAIN, OPT_CP, NULL},
	{"ssl.sigalgs.list", OPT_PLAIN, OPT_CP, NULL},
	{"ssl.key.location", OPT_PATH, OPT_CP, NULL},
	{"ssl.key.password", OPT_SECRET, OPT_CP, NULL},
	{"ssl.key.pem", OPT_SECRET, OPT_CP, NULL},
	{"ssl.certificate.location", OPT_PATH, OPT_CP, NULL},
	{"ssl.certificate.pem", OPT_PLAIN, OPT_CP, NULL},
	{"ssl.ca.location", OPT_PATH, OPT_CP, NULL},
	{"ssl.ca.pem", OPT_PLAIN, OPT_CP, NULL},
	{"ssl.ca.certificate.stores", OPT_PLAIN, OPT_CP, NULL},
	{"ssl.crl.location", OPT_PATH, OPT_CP, NULL},
	{"ssl.keystore.location", OPT_PATH, OPT_CP, NULL},
	{"ssl.keystore.password", OPT_SECRET, OPT_CP, NULL},
	{"enable.ssl.certificate.verification", OPT_PLAIN, OPT_CP, NULL},
	{"ssl.endpoint.identification.algorithm", OPT_PLAIN, OPT_CP, NULL},
	{"https.ca.location", OPT_PATH, OPT_CP, NULL},
	{"https.ca.pem", OPT_PLAIN, OPT_CP, NULL},

	/* ---- SASL: mechanisms and credentials ---- */
	{"sasl.mechanisms", OPT_PLAIN, OPT_CP | OPT_MECHANISM, NULL},
	{"sasl.mechanism", OPT_PLAIN, OPT_CP | OPT_MECHANISM, NULL},
	{"sasl.kerberos.service.name", OPT_PLAIN, OPT_CP | OPT_KRB_NAME, NULL},
	{"sasl.kerberos.principal", OPT_PLAIN, OPT_CP | OPT_KRB_NAME, NULL},
	{"sasl.username", OPT_PLAIN, OPT_CP, NULL},
	{"sasl.password", OPT_SECRET, OPT_CP, NULL},
	{"sasl.oauthbearer.config", OPT_SECRET, OPT_CP, NULL},
	{"sasl.oauthbearer.method", OPT_PLAIN, OPT_CP, NULL},
	{"sasl.oauthbearer.client.id", OPT_PLAIN, OPT_CP, NULL},
	{"sasl.oauthbearer.client.credentials.client.id", OPT_PLAIN, OPT_CP, NULL},
	{"sasl.oauthbearer.client.credentials.client.secret", OPT_SECRET, OPT_CP, NULL},
	{"sasl.oauthbearer.client.secret", OPT_SECRET, OPT_CP, NULL},
	{"sasl.oauthbearer.scope", OPT_PLAIN, OPT_CP, NULL},
	{"sasl.oauthbearer.extensions", OPT_PLAIN, OPT_CP, NULL},
	{"sasl.oauthbearer.token.endpoint.url", OPT_PLAIN, OPT_CP | OPT_HTTP_URL, NULL},
	{"sasl.oauthbearer.grant.type", OPT_PLAIN, OPT_CP, NULL},
	{"sasl.oauthbearer.assertion.algorithm", OPT_PLAIN, OPT_CP, NULL},
	{"sasl.oauthbearer.assertion.private.key.file", OPT_PATH, OPT_CP, NULL},
	{"sasl.oauthbearer.assertion.private.key.passphrase", OPT_SECRET, OPT_CP, NULL},
	{"sasl.oauthbearer.assertion.private.key.pem", OPT_SECRET, OPT_CP, NULL},
	{"sasl.oauthbearer.assertion.file", OPT_PATH, OPT_CP, NULL},
	{"sasl.oauthbearer.assertion.claim.aud", OPT_PLAIN, OPT_CP, NULL},
	{"sasl.oauthbearer.assertion.claim.exp.seconds", OPT_PLAIN, OPT_CP, NULL},
	{"sasl.oauthbearer.assertion.claim.iss", OPT_PLAIN, OPT_CP, NULL},
	{"sasl.oauthbearer.assertion.claim.jti.include", OPT_PLAIN, OPT_CP, NULL},
	{"sasl.oauthbearer.assertion.claim.nbf.seconds", OPT_PLAIN, OPT_CP, NULL},
	{"sasl.oauthbearer.assertion.claim.sub", OPT_PLAIN, OPT_CP, NULL},
	{"sasl.oauthbearer.assertion.jwt.template.file", OPT_PATH, OPT_CP, NULL},
	/* azure_imds fetches a token with the database host's cloud identity */
	{"sasl.oauthbearer.metadata.authentication.type", OPT_PLAIN, OPT_CP | OPT_SUPERUSER, NULL},

	/*
	 * ---- consumer: the group the checkpoints are mirrored to ----
	 * Not the consumer's own group: the worker commits the offsets it has
	 * checkpointed to it, after each batch, for Kafka's lag tools
	 * (mirror.c, "Kafka's own lag tools" in docs/design/kafka.md).
	 */
	{"group.id", OPT_PLAIN, OPT_C | OPT_GROUP_NAME, NULL},

	/* ---- consumer: fetch sizing and timing ---- */
	{"session.timeout.ms", OPT_PLAIN, OPT_C, NULL},
	{"heartbeat.interval.ms", OPT_PLAIN, OPT_C, NULL},
	{"coordinator.query.interval.ms", OPT_PLAIN, OPT_C, NULL},
	{"max.poll.interval.ms", OPT_PLAIN, OPT_C, NULL},
	{"fetch.wait.max.ms", OPT_PLAIN, OPT_C, NULL},
	{"fetch.queue.backoff.ms", OPT_PLAIN, OPT_C, NULL},
	{"fetch.message.max.bytes", OPT_PLAIN, OPT_C, NULL},
	{"max.partition.fetch.bytes", OPT_PLAIN, OPT_C, NULL},
	{"fetch.max.bytes", OPT_PLAIN, OPT_C, NULL},
	{"fetch.min.bytes", OPT_PLAIN, OPT_C, NULL},
	{"fetch.error.backoff.ms", OPT_PLAIN, OPT_C, NULL},
	{"check.crcs", OPT_PLAIN, OPT_C, NULL},

	/* ---- producer: batching, acknowledgements, compression ---- */
	{"queue.buffering.max.messages", OPT_PLAIN, OPT_P, NULL},
	{"queue.buffering.max.kbytes", OPT_PLAIN, OPT_P, NULL},
	{"queue.buffering.max.ms", OPT_PLAIN, OPT_P, NULL},
	{"linger.ms", OPT_PLAIN, OPT_P, NULL},
	{"message.send.max.retries", OPT_PLAIN, OPT_P, NULL},
	{"retries", OPT_PLAIN, OPT_P, NULL},
	{"queue.buffering.backpressure.threshold", OPT_PLAIN, OPT_P, NULL},
	{"compression.codec", OPT_PLAIN, OPT_P, NULL},
	{"compression.type", OPT_PLAIN, OPT_P, NULL},
	{"compression.level", OPT_PLAIN, OPT_P, NULL},
	{"batch.num.messages", OPT_PLAIN, OPT_P, NULL},
	{"batch.size", OPT_PLAIN, OPT_P, NULL},
	{"sticky.partitioning.linger.ms", OPT_PLAIN, OPT_P, NULL},
	{"request.required.acks", OPT_PLAIN, OPT_P, NULL},
	{"acks", OPT_PLAIN, OPT_P, NULL},
	{"request.timeout.ms", OPT_PLAIN, OPT_P, NULL},
	{"message.timeout.ms", OPT_PLAIN, OPT_P, NULL},
	{"delivery.timeout.ms", OPT_PLAIN, OPT_P, NULL},
	{"partitioner", OPT_PLAIN, OPT_P, NULL},
	{NULL, OPT_REFUSED, 0, NULL}
};

#define ALLOWED_HINT \
	"A pipeline may set security.protocol, SASL and SSL settings, timeouts, fetch sizing, " \
	"client.id, client.rack and debug; \"Kafka options\" in the README lists them all."

/* the mechanisms a non-superuser owner may use: they carry their own credentials */
static const char *const user_mechanisms[] = {
	"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER", NULL
};

static const KsOptDef *
find_option(const char *name)
{
	for (const KsOptDef *d = ks_options; d->name; d++)
		if (strcmp(d->name, name) == 0)
			return d;
	return NULL;
}

bool
ks_option_is_secret(const char *name)
{
	const KsOptDef *d = find_option(name);
	char	   *lower;

	if (d)
		return d->kind == OPT_SECRET;

	/*
	 * A name not in the table is refused before it is stored or used; if
	 * one is shown anyway (an old catalog row), mask what looks secret.
	 */
	lower = asc_tolower(name, strlen(name));
	return strstr(lower, "password") != NULL ||
		strstr(lower, "secret") != NULL ||
		strstr(lower, "key") != NULL ||
		strstr(lower, "token") != NULL;
}

/* librdkafka callbacks and opaques, present and future: C API only */
static bool
is_callback_name(const char *name)
{
	size_t		len = strlen(name);

	return (len > 3 && strcmp(name + len - 3, "_cb") == 0) ||
		(len > 3 && strcmp(name + len - 3, ".cb") == 0) ||
		strstr(name, "callback") != NULL ||
		strstr(name, "opaque") != NULL;
}

static bool
krb_name_ok(const char *v)
{
	size_t		len = strlen(v);

	if (len == 0 || len > 255)
		return false;
	for (const char *c = v; *c; c++)
		if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
			  (*c >= '0' && *c <= '9') || strchr("._-/@", *c) != NULL))
			return false;
	return true;
}

static bool
http_url_ok(const char *v)
{
	if (pg_strncasecmp(v, "https://", 8) != 0 && pg_strncasecmp(v, "http://", 7) != 0)
		return false;
	for (const unsigned char *c = (const unsigned char *) v; *c; c++)
		if (*c <= ' ' || *c == 0x7f)
			return false;
	return true;
}

/*
 * A consumer group name as Kafka's tools and ACLs handle it without
 * quoting: 1 to 249 letters, digits, ".", "_" or "-" (the rule for topic
 * names).  Kafka itself takes any string; a pipeline takes a sane one.
 */
static void
check_group_name(const char *name, const char *v)
{
	size_t		len = strlen(v);

	for (const char *c = v; *c; c++)
		if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
			  (*c >= '0' && *c <= '9') || *c == '.' || *c == '_' || *c == '-'))
			len = 0;
	if (len == 0 || len > 249)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid value for Kafka option \"%s\"", name),
				 errhint("A consumer group name has 1 to 249 letters, digits, \".\", \"_\" or \"-\".")));
	if (strncmp(v, "kafka_sink.", 11) == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("Kafka option \"%s\" cannot name a group starting with \"kafka_sink.\"", name),
				 errdetail("Those are the names of kafka_sink's own consumers."),
				 errhint("Choose a group name of your own, for example the pipeline's name.")));
}

/* Checks a SASL mechanism value; GSSAPI uses the server's own credentials. */
static void
check_mechanism(const char *name, const char *value, Oid owner)
{
	for (int i = 0; user_mechanisms[i]; i++)
		if (strcmp(value, user_mechanisms[i]) == 0)
			return;
	if (strcmp(value, "GSSAPI") == 0)
	{
		if (ks_owner_is_superuser(owner))
			return;
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("Kafka option \"%s\" = GSSAPI needs a superuser pipeline owner", name),
				 errdetail("GSSAPI authenticates with the Kerberos tickets of the database server's process, not with credentials of the pipeline's own."),
				 errhint("Use SCRAM-SHA-256, SCRAM-SHA-512, PLAIN or OAUTHBEARER, or have a superuser own the pipeline.")));
	}
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("invalid value for Kafka option \"%s\"", name),
			 errhint("Use one of PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER (or GSSAPI, for a superuser owner).")));
}

/*
 * A reference stands for secrets only: it keeps a value out of the
 * statement, the log and the catalog, which matters for a secret alone,
 * and on any other option it would read the server's environment or files
 * into a setting the owner sees (an error, a view).
 */
static void
check_reference(const char *what, const KsOption *o, bool secret, Oid owner)
{
	if (!secret)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s \"%s\" cannot be given by reference", what, o->name),
				 errdetail("Only secret options (passwords, keys, client secrets) may be read from the server's environment or a file."),
				 errhint("Give its value as a JSON string.")));
	ks_secret_ref_check(what, o->name, o->ref, o->value, owner);
}

/*
 * Pass one: the names.  Every option is looked up before any value is
 * looked at, so that a refused name is the one reported, whatever the
 * order of the options.
 */
static void
check_name(KsOption *o, const KsOptDef *d, Oid owner, KsOptionUse use)
{
	if (d == NULL && is_callback_name(o->name))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("Kafka option \"%s\" is not supported", o->name),
				 errdetail(WHY_C_API),
				 errhint("Nothing stored in a pipeline may run a program or load code, not even for a superuser.")));
	if (d == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("Kafka option \"%s\" is not allowed", o->name),
				 errhint(ALLOWED_HINT)));
	switch (d->kind)
	{
		case OPT_REFUSED:
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("Kafka option \"%s\" is not supported", o->name),
					 errdetail("%s", d->why),
					 strcmp(o->name, "enable.sasl.oauthbearer.unsecure.jwt") == 0 ?
					 errhint("Use sasl.oauthbearer.method = oidc, or SASL/SCRAM.") :
					 strcmp(o->name, "sasl.kerberos.keytab") == 0 ?
					 errhint("Obtain the Kerberos ticket outside PostgreSQL (for example with k5start and KRB5CCNAME in the server's environment).") :
					 errhint("Nothing stored in a pipeline may run a program or load code, not even for a superuser.")));
			break;
		case OPT_MANAGED:
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("Kafka option \"%s\" is managed by kafka_sink", o->name),
					 errdetail("%s", d->why),
					 errhint("Remove it from kafka_options.")));
			break;
		case OPT_PATH:
			/* librdkafka's own search of the system's CA stores */
			if (strcmp(o->name, "ssl.ca.location") == 0 && strcmp(o->value, "probe") == 0)
				break;
			if (!ks_owner_reads_server_files(owner))
				ereport(ERROR,
						(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
						 errmsg("Kafka option \"%s\" names a file on the database server", o->name),
						 errdetail("Only superusers and members of pg_read_server_files may have the server read its files for a pipeline."),
						 errhint("Use the inline PEM option (ssl.ca.pem, ssl.certificate.pem, ssl.key.pem) or ask a superuser to grant pg_read_server_files.")));
			break;
		case OPT_PLAIN:
		case OPT_SECRET:
			break;
	}
	if (o->ref != KS_REF_NONE)
		check_reference("Kafka option", o, d->kind == OPT_SECRET, owner);
	if ((d->flags & use) == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("Kafka option \"%s\" does not apply to a %s", o->name,
						use == KS_USE_CONSUMER ? "consumer" : "producer"),
				 errhint(ALLOWED_HINT)));
	if ((d->flags & OPT_SUPERUSER) && !ks_owner_is_superuser(owner))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("Kafka option \"%s\" needs a superuser pipeline owner", o->name),
				 errdetail("It makes the client authenticate with the database host's own identity.")));
}

void
ks_options_check(List *options, Oid owner, KsOptionUse use)
{
	ListCell   *lc;
	bool		sasl_protocol = false;
	bool		mechanism_set = false;

	foreach(lc, options)
	{
		KsOption   *o = lfirst(lc);

		if (o->value == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("Kafka option \"%s\" has no value", o->name)));
		check_name(o, find_option(o->name), owner, use);
	}

	/* pass two: the values that decide what the server does */
	foreach(lc, options)
	{
		KsOption   *o = lfirst(lc);
		const KsOptDef *d = find_option(o->name);

		if (o->ref != KS_REF_NONE)
			continue;			/* a secret: no value rules */
		if ((d->flags & OPT_KRB_NAME) && !krb_name_ok(o->value))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("invalid value for Kafka option \"%s\"", o->name),
					 errhint("A Kerberos name has 1 to 255 letters, digits, \".\", \"_\", \"-\", \"/\" or \"@\".")));
		if ((d->flags & OPT_HTTP_URL) && !http_url_ok(o->value))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("invalid value for Kafka option \"%s\"", o->name),
					 errhint("Use an https:// (or http://) URL.")));
		/* librdkafka connects there: the server's network, the owner's choice */
		if (d->flags & OPT_HTTP_URL)
			ks_hosts_check_url(psprintf("Kafka option \"%s\"", o->name), o->value);
		if (d->flags & OPT_GROUP_NAME)
			check_group_name(o->name, o->value);
		if (d->flags & OPT_MECHANISM)
		{
			check_mechanism(o->name, o->value, owner);
			mechanism_set = true;
		}
		if (strcmp(o->name, "security.protocol") == 0 &&
			pg_strncasecmp(o->value, "sasl_", 5) == 0)
			sasl_protocol = true;
	}

	/* librdkafka's default mechanism is GSSAPI */
	if (sasl_protocol && !mechanism_set)
		check_mechanism("sasl.mechanism", "GSSAPI", owner);
}

/* ---- schema_registry: the same rules for the registry client's options ---- */

typedef struct KsRegistryOptDef
{
	const char *name;
	KsOptKind	kind;
} KsRegistryOptDef;

static const KsRegistryOptDef ks_registry_options[] = {
	{"url", OPT_PLAIN},			/* one or several http(s) URLs, comma-separated */
	{"basic.auth.user.info", OPT_SECRET},	/* user:password */
	{"basic.auth.credentials.source", OPT_PLAIN},	/* USER_INFO only */
	{"ssl.ca.location", OPT_PATH},
	{"timeout.ms", OPT_PLAIN},
	{NULL, OPT_PLAIN}
};

#define REGISTRY_HINT "schema_registry takes url, basic.auth.user.info, basic.auth.credentials.source, ssl.ca.location and timeout.ms."

bool
ks_registry_option_is_secret(const char *name)
{
	for (const KsRegistryOptDef *d = ks_registry_options; d->name; d++)
		if (strcmp(d->name, name) == 0)
			return d->kind == OPT_SECRET;
	return true;				/* unknown: refused, and masked if ever shown */
}

/* One URL: http(s), a host, no user information (it would be shown). */
static bool
registry_url_ok(const char *v)
{
	const char *host;
	const char *end;

	if (!http_url_ok(v))
		return false;
	host = strstr(v, "://") + 3;
	end = host + strcspn(host, "/?#");
	if (end == host)
		return false;
	return memchr(host, '@', end - host) == NULL;
}

void
ks_registry_options_check(List *options, Oid owner)
{
	ListCell   *lc;

	foreach(lc, options)
	{
		KsOption   *o = lfirst(lc);
		const KsRegistryOptDef *d = NULL;

		for (const KsRegistryOptDef *r = ks_registry_options; r->name; r++)
			if (strcmp(r->name, o->name) == 0)
				d = r;
		if (d == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("schema registry option \"%s\" is not allowed", o->name),
					 errhint(REGISTRY_HINT)));
		if (o->value == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("schema registry option \"%s\" has no value", o->name)));
		if (o->ref != KS_REF_NONE)
		{
			check_reference("schema registry option", o, d->kind == OPT_SECRET, owner);
			continue;			/* user:password is checked when it is read */
		}
		if (d->kind == OPT_PATH && !ks_owner_reads_server_files(owner))
			ereport(ERROR,
					(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
					 errmsg("schema registry option \"%s\" names a file on the database server", o->name),
					 errdetail("Only superusers and members of pg_read_server_files may have the server read its files for a pipeline."),
					 errhint("Ask a superuser to grant pg_read_server_files, or use a registry whose certificate the system trusts.")));
		if (strcmp(o->name, "url") == 0)
		{
			char	   *list = pstrdup(o->value);
			char	   *save = NULL;
			int			n = 0;

			for (char *tok = strtok_r(list, ", ", &save); tok; tok = strtok_r(NULL, ", ", &save))
			{
				n++;
				if (!registry_url_ok(tok))
					ereport(ERROR,
							(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
							 errmsg("invalid value for schema registry option \"url\""),
							 errhint("Use http:// or https:// URLs, separated by commas, without a user name or password in them (those go in basic.auth.user.info).")));
				ks_hosts_check_url("schema registry option \"url\"", tok);
			}
			if (n == 0)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("schema registry option \"url\" is empty")));
		}
		if (strcmp(o->name, "basic.auth.credentials.source") == 0 &&
			strcmp(o->value, "USER_INFO") != 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("invalid value for schema registry option \"%s\"", o->name),
					 errhint("Only USER_INFO is supported: the credentials are basic.auth.user.info.")));
		if (strcmp(o->name, "basic.auth.user.info") == 0 && strchr(o->value, ':') == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("invalid value for schema registry option \"%s\"", o->name),
					 errhint("It is user:password.")));
		if (strcmp(o->name, "timeout.ms") == 0)
		{
			char	   *end;
			long		v = strtol(o->value, &end, 10);

			if (*end != '\0' || end == o->value || v < 1 || v > 3600000)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("invalid value for schema registry option \"%s\"", o->name),
						 errhint("timeout.ms is a whole number of milliseconds between 1 and 3600000.")));
		}
	}
}
