/*-------------------------------------------------------------------------
 *
 * outbox.c
 *		The transactional outbox relay: publishes committed rows of
 *		kafka_sink.outbox to Kafka.
 *
 * kafka_sink.outbox_send() inserts a row in the caller's transaction, so a
 * row exists only if that transaction commits.  This worker reads
 * undelivered rows in id order (never holding a transaction while it talks
 * to Kafka), produces them with an idempotent producer, which keeps their
 * order per partition and adds no duplicates of its own, with the row's
 * event id as the header "event_id" and its hop count (hops.c) as
 * "kafka_sink.hops", and marks delivered the longest prefix
 * of rows that were acknowledged.  A row after a failed one is sent again
 * after the retry, so per key the order holds and delivery is at least
 * once: consumers deduplicate on the event id, which never changes.
 *
 * A row carries text (key, value, headers: what outbox_send writes) or
 * bytes (key_bytes, value_bytes, and the ordered header_names and
 * header_values: what a pipeline writes for its dead-letter topic, the
 * original message unchanged).  Headers go out as header_names/values,
 * then kafka_sink.hops and event_id, then the JSON headers.
 *
 * Owns: the relay loop: read, produce, mark, prune.  Must not: hold a
 * transaction while it talks to Kafka, or SQL text (catalog.c).
 *
 *-------------------------------------------------------------------------
 */
#include "kafka_sink.h"
#include "guc.h"
#include "shmem.h"
#include "outbox.h"
#include "catalog.h"
#include "consumer.h"
#include "producer.h"
#include "bgworker.h"
#include "hosts.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "commands/extension.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "tcop/tcopprot.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#define RELAY_BATCH 1000

static KsWorkerArgs rargs;

/* Reads up to RELAY_BATCH undelivered rows, in id order, into msgs. */
static int
read_pending(KsOutMsg **msgs, int64 **ids)
{
	int			n;
	MemoryContext cxt = CurrentMemoryContext;

	ks_xact_begin("kafka_sink outbox relay: reading the outbox");
	if (!OidIsValid(get_extension_oid(KS_EXTENSION_NAME, true)))
	{
		ks_xact_commit();
		return 0;
	}
	n = ks_catalog_outbox_pending(RELAY_BATCH, msgs, ids, cxt);
	ks_xact_commit();
	return n;
}

/* Marks the delivered prefix, and records the failure of the next row. */
static void
mark(KsOutMsg *msgs, int64 *ids, int n, int delivered)
{
	int64	   *offs = palloc(sizeof(int64) * Max(delivered, 1));
	int32	   *parts = palloc(sizeof(int32) * Max(delivered, 1));

	for (int i = 0; i < delivered; i++)
	{
		offs[i] = msgs[i].offset_out;
		parts[i] = msgs[i].partition_out;
	}
	ks_xact_begin("kafka_sink outbox relay: marking delivered rows");
	if (delivered > 0)
		ks_catalog_outbox_delivered(ids, parts, offs, delivered);
	if (delivered < n)
		ks_catalog_outbox_failed(ids[delivered], msgs[delivered].done ? msgs[delivered].errstr :
								 "no acknowledgement in time");
	ks_xact_commit();
}

static void
prune(void)
{
	ks_xact_begin("kafka_sink outbox relay: pruning delivered rows");
	if (OidIsValid(get_extension_oid(KS_EXTENSION_NAME, true)))
		ks_catalog_outbox_prune(ks_outbox_retention_s);
	ks_xact_commit();
}

static void
relay_wait(long ms)
{
	(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, ms, ks_wait_event(KS_WAIT_RELAY_NAP));
	ResetLatch(MyLatch);
	QueryCancelPending = false; /* nothing to cancel between deliveries */
	CHECK_FOR_INTERRUPTS();
	if (ConfigReloadPending)
	{
		char	   *servers = pstrdup(ks_outbox_servers);
		char	   *allowed = pstrdup(ks_allowed_hosts);

		ConfigReloadPending = false;
		ProcessConfigFile(PGC_SIGHUP);
		/* the launcher starts a relay with the new servers, checked anew */
		if (strcmp(servers, ks_outbox_servers) != 0 || strcmp(allowed, ks_allowed_hosts) != 0)
			proc_exit(0);
	}
}

void
ks_relay_main(Datum arg)
{
	KsProducer *producer;
	MemoryContext cxt;
	int			failures = 0;
	TimestampTz last_prune = 0;

	(void) arg;
	ks_bgworker_start(&rargs);
	BackgroundWorkerInitializeConnectionByOid(rargs.database, InvalidOid, 0);
	ks_bgworker_session("kafka_sink outbox relay");

	producer = ks_producer_create(ks_outbox_servers, NIL);
	cxt = AllocSetContextCreate(TopMemoryContext, "kafka_sink relay", ALLOCSET_DEFAULT_SIZES);
	for (;;)
	{
		KsOutMsg   *msgs;
		int64	   *ids;
		int			n;
		int			delivered = 0;
		MemoryContext old;

		CHECK_FOR_INTERRUPTS();
		MemoryContextReset(cxt);
		old = MemoryContextSwitchTo(cxt);
		n = read_pending(&msgs, &ids);
		if (n == 0)
		{
			if (GetCurrentTimestamp() - last_prune > 60 * USECS_PER_SEC)
			{
				prune();
				last_prune = GetCurrentTimestamp();
			}
			MemoryContextSwitchTo(old);
			ks_consumer_emit_logs();
			relay_wait(100);
			continue;
		}
		ks_producer_send_all(producer, msgs, n, 30000);
		while (delivered < n && msgs[delivered].done && msgs[delivered].err == 0)
			delivered++;
		mark(msgs, ids, n, delivered);
		ks_consumer_emit_logs();
		MemoryContextSwitchTo(old);
		if (delivered < n)
		{
			long		delay = ks_backoff_ms(failures, 200, 30000);

			failures++;
			ks_slot_set_detail(rargs.slot, "retrying after: %s",
							   msgs[delivered].done ? msgs[delivered].errstr : "no acknowledgement in time");
			relay_wait(delay);
		}
		else if (failures > 0)
		{
			failures = 0;
			ks_slot_set_detail(rargs.slot, "%s", "");
		}
	}
}
