/*-------------------------------------------------------------------------
 *
 * hops.c
 *		The outbox hop count: the loop guard of everything kafka_sink
 *		sends to Kafka.
 *
 * Every message the outbox relay sends, and every message produce() sends
 * while a batch is applied, carries the header kafka_sink.hops: how many
 * times it came through kafka_sink, this time included.  A dead letter has
 * one more than the message it copies; a message sent while a worker
 * applies a batch (outbox_send or produce() from a batch function or a
 * trigger) one more than the batch's messages; any other outbox message 1
 * (produce() outside a batch sends no hop count: nothing it sends derives
 * from a consumed message).  A pipeline quarantines a message with
 * more than kafka_sink.max_outbox_hops hops as dead_letter_loop, before it
 * is decoded or routed, and sends it to no dead-letter topic: a loop
 * through dead-letter topics or the outbox (A -> B -> A, longer chains,
 * pipelines of other owners or databases, a pattern matching a dead-letter
 * topic) ends after that many rounds, whatever the catalog shows.
 *
 * The count is read from the message as the largest kafka_sink.hops header
 * it has (a producer can only make its own message quarantined sooner);
 * a value that is not a number is not kafka_sink's and counts nothing.
 *
 * Owns: the hop count's rule and the batch's count.  Must not: write
 * headers (quarantine.c, catalog.c and api.c do, with what this says).
 *
 *-------------------------------------------------------------------------
 */
#include "kafka_sink.h"
#include "guc.h"
#include "consumer.h"
#include "hops.h"

#include <limits.h>

#include "access/xact.h"
#include "fmgr.h"

/* the largest hop count of the batch being applied (-1: none) */
static int	batch_hops = -1;
static bool callback_registered = false;

/* The hop count a message arrived with: 0 without kafka_sink.hops. */
int
ks_message_hops(KsMessage *msg)
{
	const void *value;
	size_t		size;
	int			hops = 0;

	for (int i = 0; ks_message_header_get(msg, KS_HOPS_HEADER, i, &value, &size); i++)
	{
		char		buf[12];
		char	   *end;
		long		v;

		if (value == NULL || size == 0 || size >= sizeof(buf))
			continue;
		memcpy(buf, value, size);
		buf[size] = '\0';
		if (buf[0] < '0' || buf[0] > '9')
			continue;
		v = strtol(buf, &end, 10);
		if (*end != '\0' || v < 0)
			continue;
		hops = Max(hops, (int) Min(v, INT_MAX / 2));
	}
	return hops;
}

/*
 * Whether a message came through the outbox more often than
 * kafka_sink.max_outbox_hops allows; then *detail says so.
 */
bool
ks_message_looped(KsMessage *msg, char **detail)
{
	int			hops = ks_message_hops(msg);

	if (hops <= ks_max_outbox_hops)
		return false;
	*detail = psprintf("the message came through kafka_sink's outbox %d times (header %s); kafka_sink.max_outbox_hops is %d",
					   hops, KS_HOPS_HEADER, ks_max_outbox_hops);
	return true;
}

static void
forget_batch(XactEvent event, void *arg)
{
	(void) arg;
	if (event == XACT_EVENT_COMMIT || event == XACT_EVENT_ABORT ||
		event == XACT_EVENT_PARALLEL_COMMIT || event == XACT_EVENT_PARALLEL_ABORT ||
		event == XACT_EVENT_PREPARE)
		batch_hops = -1;
}

/*
 * The batch about to be applied in this transaction: what it sends until
 * the transaction ends derives from its messages (those not quarantined
 * as a loop).
 */
void
ks_hops_begin_batch(KsMessage **msgs, int nmsgs)
{
	int			hops = 0;

	if (!callback_registered)
	{
		RegisterXactCallback(forget_batch, NULL);
		callback_registered = true;
	}
	for (int i = 0; i < nmsgs; i++)
	{
		int			h = ks_message_hops(msgs[i]);

		if (h <= ks_max_outbox_hops)
			hops = Max(hops, h);
	}
	batch_hops = hops;
}

/* The hop count of a message sent now. */
int
ks_hops_next(void)
{
	return batch_hops < 0 ? 1 : batch_hops + 1;
}

/* Whether a batch is being applied: what is sent now derives from it. */
bool
ks_hops_in_batch(void)
{
	return batch_hops >= 0;
}

/* Header names kafka_sink writes itself, which a caller may not set. */
bool
ks_header_name_reserved(const char *name)
{
	return strncmp(name, "kafka_sink.", strlen("kafka_sink.")) == 0;
}

/* kafka_sink._outbox_hops(): the hop count outbox_send gives its message. */
PG_FUNCTION_INFO_V1(kafka_sink_outbox_hops);
Datum
kafka_sink_outbox_hops(PG_FUNCTION_ARGS)
{
	(void) fcinfo;
	PG_RETURN_INT32(ks_hops_next());
}
