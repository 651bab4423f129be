/*-------------------------------------------------------------------------
 *
 * guc.c
 *		Every configuration parameter of kafka_sink, and fault injection.
 *
 * Owns: every GUC and the fault points.  Must not: read the catalog or
 * act on a setting itself (each module reads its own).
 *
 *-------------------------------------------------------------------------
 */
#include "kafka_sink.h"
#include "guc.h"
#include "hosts.h"
#include "secret_ref.h"

#include <limits.h>
#include <signal.h>
#include <unistd.h>

#include "miscadmin.h"
#include "utils/guc.h"

char	   *ks_database = NULL;
int			ks_max_workers = 32;
int			ks_max_workers_per_database = 32;
int			ks_launcher_naptime_ms = 1000;
int			ks_metadata_refresh_ms = 10000;
int			ks_fault_point = KS_FAULT_NONE;
int			ks_fault_action = KS_FAULT_ACTION_FATAL;
bool		ks_allow_superuser_pipelines = false;
int			ks_max_message_bytes = 16 * 1024 * 1024;
int			ks_max_partitions = 4096;
int			ks_keep_batches = 10000;
bool		ks_direct_values = true;
char	   *ks_outbox_servers = NULL;
int			ks_outbox_retention_s = 24 * 3600;
int			ks_max_outbox_hops = 10;
int			ks_keep_batches_for_s = 7 * 24 * 3600;
int			ks_max_new_columns = 100;
int			ks_ddl_lock_timeout_ms = 5000;
int			ks_apply_strategy = KS_APPLY_STRATEGY_AUTO;

static const struct config_enum_entry fault_point_options[] = {
	{"none", KS_FAULT_NONE, false},
	{"after_fetch", KS_FAULT_AFTER_FETCH, false},
	{"after_decode", KS_FAULT_AFTER_DECODE, false},
	{"after_merge", KS_FAULT_AFTER_MERGE, false},
	{"before_commit", KS_FAULT_BEFORE_COMMIT, false},
	{"after_commit", KS_FAULT_AFTER_COMMIT, false},
	{"before_connect", KS_FAULT_BEFORE_CONNECT, false},
	{NULL, 0, false}
};

static const struct config_enum_entry apply_strategy_options[] = {
	{"sql", KS_APPLY_STRATEGY_SQL, false},
	{"auto", KS_APPLY_STRATEGY_AUTO, false},
	{"on_conflict", KS_APPLY_STRATEGY_ON_CONFLICT, false},
	{NULL, 0, false}
};

static const struct config_enum_entry fault_action_options[] = {
	{"fatal", KS_FAULT_ACTION_FATAL, false},
	{"sigkill", KS_FAULT_ACTION_SIGKILL, false},
	{NULL, 0, false}
};

void
ks_guc_init(void)
{
	DefineCustomStringVariable("kafka_sink.database",
							   "The only database whose pipelines get workers; empty: every database with the extension.",
							   "Kept from the releases that served one database. Set, it serves that database alone, as they did.",
							   &ks_database,
							   "",
							   PGC_SIGHUP,
							   GUC_SUPERUSER_ONLY,
							   NULL, NULL, NULL);

	DefineCustomIntVariable("kafka_sink.max_workers",
							"Maximum number of pipeline workers that can run at once.",
							"Over all databases, shared fairly among them. Each worker also takes one of max_worker_processes, as does each served database's scheduler.",
							&ks_max_workers,
							32, 1, 1024,
							PGC_POSTMASTER,
							0,
							NULL, NULL, NULL);

	DefineCustomIntVariable("kafka_sink.max_workers_per_database",
							"Maximum number of pipeline workers that one database can run at once.",
							"Also bounded by its fair part of kafka_sink.max_workers when several databases want workers.",
							&ks_max_workers_per_database,
							32, 1, 1024,
							PGC_SIGHUP,
							0,
							NULL, NULL, NULL);

	DefineCustomIntVariable("kafka_sink.max_partitions",
							"Number of partitions whose progress can be shown at once, over all workers.",
							"Partitions beyond it are still consumed, but kafka_sink.progress lacks their watermarks.",
							&ks_max_partitions,
							4096, 16, 1000000,
							PGC_POSTMASTER,
							0,
							NULL, NULL, NULL);

	DefineCustomIntVariable("kafka_sink.launcher_naptime",
							"Time between two checks of the pipelines by the launcher.",
							NULL,
							&ks_launcher_naptime_ms,
							1000, 10, 60000,
							PGC_SIGHUP,
							GUC_UNIT_MS,
							NULL, NULL, NULL);

	DefineCustomIntVariable("kafka_sink.metadata_refresh_interval",
							"Time between two refreshes of topic metadata by a worker, to find new topics and partitions.",
							NULL,
							&ks_metadata_refresh_ms,
							10000, 100, 3600000,
							PGC_SIGHUP,
							GUC_UNIT_MS,
							NULL, NULL, NULL);

	DefineCustomIntVariable("kafka_sink.max_message_bytes",
							"Messages with a larger value are quarantined as value_too_large.",
							NULL,
							&ks_max_message_bytes,
							16 * 1024 * 1024, 1024, INT_MAX / 2,
							PGC_SIGHUP,
							GUC_UNIT_BYTE,
							NULL, NULL, NULL);

	DefineCustomBoolVariable("kafka_sink.direct_values",
							 "Builds values of the common types directly as the column's datums.",
							 "Avro's int, long, float, double, boolean, string and timestamps, JSON's ISO 8601 timestamps into timestamptz, and Debezium's dates, timestamps and JSON into date, timestamp, timestamptz and jsonb. Off: every value goes through its text and the column type's input function, as before (the same values, slower; for measurements and tests).",
							 &ks_direct_values,
							 true,
							 PGC_SIGHUP,
							 0,
							 NULL, NULL, NULL);

	DefineCustomEnumVariable("kafka_sink.apply_strategy",
							 "How merge-mode batches are written to their target.",
							 "sql: the MERGE through SPI. auto: directly through the heap and its indexes (probe the key index, compare the order column, update or insert) for plain targets where that is exactly what the MERGE does; other targets keep the MERGE. on_conflict: INSERT ... ON CONFLICT (key) DO NOTHING, then an UPDATE under the ordering guard, for targets where the MERGE is refused or slow.",
							 &ks_apply_strategy,
							 KS_APPLY_STRATEGY_AUTO,
							 apply_strategy_options,
							 PGC_SIGHUP,
							 0,
							 NULL, NULL, NULL);

	DefineCustomIntVariable("kafka_sink.keep_batches",
							"Number of most recent batch markers each pipeline keeps.",
							"Older markers go once they are also older than kafka_sink.keep_batches_for.",
							&ks_keep_batches,
							10000, 1, INT_MAX,
							PGC_SIGHUP,
							0,
							NULL, NULL, NULL);

	DefineCustomIntVariable("kafka_sink.keep_batches_for",
							"Minimum age of a batch marker before it can be pruned.",
							NULL,
							&ks_keep_batches_for_s,
							7 * 24 * 3600, 0, INT_MAX,
							PGC_SIGHUP,
							GUC_UNIT_S,
							NULL, NULL, NULL);

	DefineCustomIntVariable("kafka_sink.max_new_columns",
							"Maximum number of columns evolve adds to a table for one message's schema.",
							"A schema with more new fields is refused for its messages (schema_change_refused).",
							&ks_max_new_columns,
							100, 1, 1600,
							PGC_SIGHUP,
							0,
							NULL, NULL, NULL);

	DefineCustomIntVariable("kafka_sink.ddl_lock_timeout",
							"Longest wait of create_targets' and evolve's DDL for a lock on a table.",
							"A message whose DDL waits longer is quarantined (schema_change_refused) and can be replayed; 0 waits as lock_timeout says.",
							&ks_ddl_lock_timeout_ms,
							5000, 0, INT_MAX,
							PGC_SIGHUP,
							GUC_UNIT_MS,
							NULL, NULL, NULL);

	DefineCustomStringVariable("kafka_sink.outbox_bootstrap_servers",
							   "Kafka brokers the outbox relay publishes kafka_sink.outbox to; empty disables the relay.",
							   NULL,
							   &ks_outbox_servers,
							   "",
							   PGC_SIGHUP,
							   GUC_SUPERUSER_ONLY,
							   NULL, NULL, NULL);

	/*
	 * PGC_SUSET: only a superuser (or a role a superuser granted SET on it)
	 * widens it, for a session, a role or a database, or the server.  "*"
	 * by default: 0.1.0 pipelines keep connecting where they did
	 * ("kafka_sink.allowed_hosts" in docs/design/trust-boundary.md).
	 */
	DefineCustomStringVariable("kafka_sink.allowed_hosts",
							   "Hosts a pipeline may make the server connect to: brokers, OAuth token endpoints, schema registries.",
							   "A comma-separated list of host names, *.domain suffixes, IP addresses and CIDR ranges, each with an optional :port; * allows any host.",
							   &ks_allowed_hosts,
							   "*",
							   PGC_SUSET,
							   GUC_LIST_INPUT,
							   ks_allowed_hosts_check, NULL, NULL);

	/*
	 * PGC_SIGHUP: the server's own setting, the one the worker resolving a
	 * reference sees; a session cannot widen it (secret_ref.c).
	 */
	DefineCustomStringVariable("kafka_sink.secret_env_allowed",
							   "Environment variables of the server that a pipeline's secret options may name ({\"env\": \"NAME\"}).",
							   "A comma-separated list of variable names; empty allows none.",
							   &ks_secret_env_allowed,
							   "",
							   PGC_SIGHUP,
							   GUC_LIST_INPUT | GUC_SUPERUSER_ONLY,
							   ks_secret_env_allowed_check, NULL, NULL);

	DefineCustomIntVariable("kafka_sink.outbox_retention",
							"How long delivered outbox rows are kept.",
							NULL,
							&ks_outbox_retention_s,
							24 * 3600, 0, INT_MAX,
							PGC_SIGHUP,
							GUC_UNIT_S,
							NULL, NULL, NULL);

	DefineCustomIntVariable("kafka_sink.max_outbox_hops",
							"Messages that came through kafka_sink's outbox more often are quarantined as dead_letter_loop.",
							"Every message the outbox relay sends (and produce() during a batch) carries its hop count in the header kafka_sink.hops: a dead letter one more than the message it copies, a message sent during a batch one more than the batch's messages. A pipeline quarantines a message with more hops, and sends it to no dead-letter topic, which ends a loop through dead-letter topics or the outbox.",
							&ks_max_outbox_hops,
							10, 0, 1000,
							PGC_SIGHUP,
							0,
							NULL, NULL, NULL);

	DefineCustomBoolVariable("kafka_sink.allow_superuser_pipelines",
							 "Allows superusers to own pipelines.",
							 "A pipeline runs with its owner's privileges; a superuser-owned pipeline can write anywhere.",
							 &ks_allow_superuser_pipelines,
							 false,
							 PGC_SUSET,
							 0,
							 NULL, NULL, NULL);

	DefineCustomEnumVariable("kafka_sink.fault_point",
							 "Test only: makes pipeline workers fail at the given phase of every batch (or of their start).",
							 NULL,
							 &ks_fault_point,
							 KS_FAULT_NONE,
							 fault_point_options,
							 PGC_SUSET,
							 GUC_NOT_IN_SAMPLE,
							 NULL, NULL, NULL);

	DefineCustomEnumVariable("kafka_sink.fault_action",
							 "Test only: how a worker fails at kafka_sink.fault_point.",
							 NULL,
							 &ks_fault_action,
							 KS_FAULT_ACTION_FATAL,
							 fault_action_options,
							 PGC_SUSET,
							 GUC_NOT_IN_SAMPLE,
							 NULL, NULL, NULL);

	MarkGUCPrefixReserved("kafka_sink");
}

/*
 * Fails the current worker if fault injection asks for it at this phase.
 * "fatal" exits the worker (its transaction rolls back); "sigkill" kills it
 * the hard way, which makes the postmaster restart the whole cluster.
 */
void
ks_fault(KsFaultPoint point)
{
	if (ks_fault_point != (int) point || point == KS_FAULT_NONE)
		return;
	if (ks_fault_action == KS_FAULT_ACTION_SIGKILL)
		kill(MyProcPid, SIGKILL);
	ereport(FATAL,
			(errcode(ERRCODE_ADMIN_SHUTDOWN),
			 errmsg("kafka_sink fault injected at phase %d", (int) point)));
}
