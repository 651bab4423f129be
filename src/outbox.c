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
 * event id as the header "event_id", and marks delivered the longest prefix
 * of rows that were acknowledged.  A row after a failed one is sent again
 * after the retry, so per key the order holds and delivery is at least
 * once: consumers deduplicate on the event id, which never changes.
 *
 * A row carries text (key, value, headers: what outbox_send writes) or
 * bytes (key_bytes, value_bytes, and the ordered header_names and
 * header_values: what a pipeline writes for its dead-letter topic, the
 * original message unchanged).  Headers go out as header_names/values,
 * then event_id, then the JSON headers.
 *
 *-------------------------------------------------------------------------
 */
#include "kafka_sink.h"
#include "catalog.h"
#include "consumer.h"
#include "producer.h"
#include "bgworker.h"

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

static Datum
int8_array(int64 *v, int n)
{
	Datum	   *d = palloc(sizeof(Datum) * Max(n, 1));

	for (int i = 0; i < n; i++)
		d[i] = Int64GetDatum(v[i]);
	return PointerGetDatum(construct_array(d, n, INT8OID, 8, FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
}

static Datum
int4_array(int32 *v, int n)
{
	Datum	   *d = palloc(sizeof(Datum) * Max(n, 1));

	for (int i = 0; i < n; i++)
		d[i] = Int32GetDatum(v[i]);
	return PointerGetDatum(construct_array(d, n, INT4OID, 4, true, TYPALIGN_INT));
}

/* A bytea column's bytes copied into cxt, or NULL (and *len 0) for NULL. */
static char *
get_bytes(HeapTuple t, TupleDesc d, int col, size_t *len, MemoryContext cxt)
{
	bool		isnull;
	Datum		v = SPI_getbinval(t, d, col, &isnull);
	bytea	   *b;
	char	   *out;

	*len = 0;
	if (isnull)
		return NULL;
	b = DatumGetByteaPP(v);
	*len = VARSIZE_ANY_EXHDR(b);
	out = MemoryContextAlloc(cxt, Max(*len, 1));
	memcpy(out, VARDATA_ANY(b), *len);
	return out;
}

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
	if (SPI_execute("SELECT id, event_id::text, topic, key, value, key_bytes, value_bytes"
					" FROM kafka_sink.outbox"
					" WHERE delivered_at IS NULL ORDER BY id LIMIT " CppAsString2(RELAY_BATCH),
					true, 0) != SPI_OK_SELECT)
		elog(ERROR, "kafka_sink: could not read the outbox");
	n = (int) SPI_processed;
	*msgs = MemoryContextAllocZero(cxt, sizeof(KsOutMsg) * Max(n, 1));
	*ids = MemoryContextAlloc(cxt, sizeof(int64) * Max(n, 1));
	for (int i = 0; i < n; i++)
	{
		HeapTuple	t = SPI_tuptable->vals[i];
		TupleDesc	d = SPI_tuptable->tupdesc;
		bool		isnull;
		char	   *s;
		KsOption   *h = MemoryContextAlloc(cxt, sizeof(KsOption));
		MemoryContext old;

		(*ids)[i] = DatumGetInt64(SPI_getbinval(t, d, 1, &isnull));
		h->name = MemoryContextStrdup(cxt, "event_id");
		h->value = MemoryContextStrdup(cxt, SPI_getvalue(t, d, 2));
		old = MemoryContextSwitchTo(cxt);
		(*msgs)[i].headers = list_make1(h);
		MemoryContextSwitchTo(old);
		(*msgs)[i].topic = MemoryContextStrdup(cxt, SPI_getvalue(t, d, 3));
		s = SPI_getvalue(t, d, 4);
		if (s)
		{
			(*msgs)[i].key = MemoryContextStrdup(cxt, s);
			(*msgs)[i].key_len = strlen(s);
		}
		else
			(*msgs)[i].key = get_bytes(t, d, 6, &(*msgs)[i].key_len, cxt);
		s = SPI_getvalue(t, d, 5);
		if (s)
		{
			(*msgs)[i].value = MemoryContextStrdup(cxt, s);
			(*msgs)[i].value_len = strlen(s);
		}
		else
			(*msgs)[i].value = get_bytes(t, d, 7, &(*msgs)[i].value_len, cxt);
	}
	/*
	 * headers with bytes for values (the dead-letter messages: the original
	 * message's headers, then kafka_sink's), before the event id
	 */
	if (n > 0)
	{
		Oid			argtypes[1] = {INT8ARRAYOID};
		Datum		values[1] = {int8_array(*ids, n)};
		int			i = 0;

		if (SPI_execute_with_args("SELECT o.id, h.name, h.value FROM kafka_sink.outbox o,"
								  " unnest(o.header_names, o.header_values) WITH ORDINALITY AS h(name, value, n)"
								  " WHERE o.id = ANY ($1) AND o.header_names IS NOT NULL ORDER BY o.id, h.n",
								  1, argtypes, values, NULL, true, 0) != SPI_OK_SELECT)
			elog(ERROR, "kafka_sink: could not read outbox headers");
		for (uint64 r = 0; r < SPI_processed; r++)
		{
			HeapTuple	t = SPI_tuptable->vals[r];
			TupleDesc	d = SPI_tuptable->tupdesc;
			bool		isnull;
			int64		id = DatumGetInt64(SPI_getbinval(t, d, 1, &isnull));
			KsHeader   *h;
			char	   *name = SPI_getvalue(t, d, 2);
			MemoryContext old;

			/* both in id order */
			while (i < n && (*ids)[i] < id)
				i++;
			if (i >= n || (*ids)[i] != id || name == NULL)
				continue;
			h = MemoryContextAlloc(cxt, sizeof(KsHeader));
			h->name = MemoryContextStrdup(cxt, name);
			h->value = get_bytes(t, d, 3, &h->value_len, cxt);
			old = MemoryContextSwitchTo(cxt);
			(*msgs)[i].raw_headers = lappend((*msgs)[i].raw_headers, h);
			MemoryContextSwitchTo(old);
		}
	}
	/* user headers, after the event id */
	if (n > 0)
	{
		Oid			argtypes[1] = {INT8ARRAYOID};
		Datum		values[1] = {int8_array(*ids, n)};

		if (SPI_execute_with_args("SELECT o.id, h.key, h.value FROM kafka_sink.outbox o,"
								  " jsonb_each_text(o.headers) h WHERE o.id = ANY ($1) ORDER BY o.id",
								  1, argtypes, values, NULL, true, 0) != SPI_OK_SELECT)
			elog(ERROR, "kafka_sink: could not read outbox headers");
		for (uint64 r = 0; r < SPI_processed; r++)
		{
			HeapTuple	t = SPI_tuptable->vals[r];
			bool		isnull;
			int64		id = DatumGetInt64(SPI_getbinval(t, SPI_tuptable->tupdesc, 1, &isnull));

			for (int i = 0; i < n; i++)
				if ((*ids)[i] == id)
				{
					KsOption   *h = MemoryContextAlloc(cxt, sizeof(KsOption));
					MemoryContext old;
					char	   *v = SPI_getvalue(t, SPI_tuptable->tupdesc, 3);

					h->name = MemoryContextStrdup(cxt, SPI_getvalue(t, SPI_tuptable->tupdesc, 2));
					h->value = v ? MemoryContextStrdup(cxt, v) : NULL;
					old = MemoryContextSwitchTo(cxt);
					(*msgs)[i].headers = lappend((*msgs)[i].headers, h);
					MemoryContextSwitchTo(old);
				}
		}
	}
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
	{
		Oid			argtypes[3] = {INT8ARRAYOID, INT4ARRAYOID, INT8ARRAYOID};
		Datum		values[3] = {int8_array(ids, delivered), int4_array(parts, delivered),
		int8_array(offs, delivered)};

		if (SPI_execute_with_args("UPDATE kafka_sink.outbox o SET delivered_at = clock_timestamp(),"
								  " attempts = o.attempts + 1, partition = d.p, \"offset\" = d.off,"
								  " last_error = NULL"
								  " FROM unnest($1, $2, $3) AS d(id, p, off) WHERE o.id = d.id",
								  3, argtypes, values, NULL, false, 0) != SPI_OK_UPDATE)
			elog(ERROR, "kafka_sink: could not mark outbox rows delivered");
	}
	if (delivered < n)
	{
		Oid			argtypes[2] = {INT8OID, TEXTOID};
		Datum		values[2] = {Int64GetDatum(ids[delivered]),
		CStringGetTextDatum(msgs[delivered].done ? msgs[delivered].errstr : "no acknowledgement in time")};

		SPI_execute_with_args("UPDATE kafka_sink.outbox SET attempts = attempts + 1, last_error = $2,"
							  " last_attempt_at = clock_timestamp() WHERE id = $1",
							  2, argtypes, values, NULL, false, 0);
	}
	ks_xact_commit();
}

static void
prune(void)
{
	Oid			argtypes[1] = {INT8OID};
	Datum		values[1] = {Int64GetDatum(ks_outbox_retention_s)};

	ks_xact_begin("kafka_sink outbox relay: pruning delivered rows");
	if (OidIsValid(get_extension_oid(KS_EXTENSION_NAME, true)))
		SPI_execute_with_args("DELETE FROM kafka_sink.outbox WHERE delivered_at < now() - $1 * interval '1 second'",
							  1, argtypes, values, NULL, false, 0);
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

		ConfigReloadPending = false;
		ProcessConfigFile(PGC_SIGHUP);
		if (strcmp(servers, ks_outbox_servers) != 0)
			proc_exit(0);		/* the launcher starts a relay with the new servers */
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
