/*-------------------------------------------------------------------------
 *
 * mirror.c
 *		Mirrors a pipeline worker's checkpoint to Kafka's consumer group.
 *
 * With group.id in kafka_options, the offsets this worker has checkpointed
 * are committed to that consumer group after each batch, so that Kafka's
 * own lag tools (kafka-consumer-groups, Burrow, kafka-lag-exporter, cloud
 * consoles) show the pipeline's lag.  Advisory only: never read back (the
 * catalog is the truth), never waited for, and a failure neither fails nor
 * delays a batch; it is logged at most once a minute and retried after the
 * next batch or, while idle, with a backoff.
 *
 * Owns: when the group is sent the checkpoint (KsWorkerState.mirror: due,
 * the backoff, the hourly refresh, the log throttle).  Must not: read the
 * group's offsets back, block a batch, or fail the worker; the request
 * itself is consumer.c's (ks_consumer_mirror_send).
 *
 *-------------------------------------------------------------------------
 */
#include "kafka_sink.h"
#include "mirror.h"
#include "worker.h"
#include "bgworker.h"
#include "consumer.h"

#include "miscadmin.h"
#include "utils/timestamp.h"

/*
 * Kafka expires the offsets of a group without members
 * offsets.retention.minutes (7 days by default) after their last commit:
 * an idle pipeline commits its checkpoint again every hour so that the
 * group does not vanish from the lag tools.
 */
#define MIRROR_REFRESH_MS (3600 * 1000L)

/*
 * Takes the result of the commit in flight, logs a failure (at most once a
 * minute), and sends the checkpoint when the group is behind it and no
 * backoff holds it back.  Called after each batch and whenever the worker
 * wakes up while it waits.
 */
void
ks_mirror_checkpoint(KsWorkerState *ws)
{
	char		err[512];
	int			r;
	TimestampTz now;

	if (ws->consumer == NULL || ks_consumer_mirror_group(ws->consumer) == NULL)
		return;
	r = ks_consumer_mirror_result(ws->consumer, err, sizeof(err));
	now = GetCurrentTimestamp();
	if (r < 0)
	{
		ws->mirror.due = true;
		ws->mirror.failures++;
		ws->mirror.not_before = TimestampTzPlusMilliseconds(now,
														 ks_backoff_ms(ws->mirror.failures, 500, 60000));
		if (ws->mirror.logged_at == 0 || TimestampDifferenceExceeds(ws->mirror.logged_at, now, 60000))
		{
			ereport(LOG,
					(errmsg("kafka_sink: pipeline \"%s\": could not commit offsets to consumer group \"%s\": %s",
							ws->pipeline->name, ks_consumer_mirror_group(ws->consumer), err),
					 ws->mirror.failures_unlogged > 0 ?
					 errdetail("%lld earlier attempts failed too.", (long long) ws->mirror.failures_unlogged) : 0,
					 errhint("The group only mirrors the checkpoint for Kafka's lag tools; the pipeline is not affected. "
							 "The broker refuses the commit while the group has active members, or without READ on the group.")));
			ws->mirror.logged_at = now;
			ws->mirror.failures_unlogged = 0;
		}
		else
			ws->mirror.failures_unlogged++;
	}
	else if (r > 0)
		ws->mirror.failures = 0;
	if (ws->mirror.sent_at != 0 && TimestampDifferenceExceeds(ws->mirror.sent_at, now, MIRROR_REFRESH_MS))
		ws->mirror.due = true;
	if (ws->mirror.due && now >= ws->mirror.not_before &&
		ks_consumer_mirror_send(ws->consumer, ws->parts, ws->nparts))
	{
		ws->mirror.due = false;
		ws->mirror.sent_at = now;
	}
}

/* Before the worker exits on its own: give the last commit a moment. */
void
ks_mirror_flush(KsWorkerState *ws, long timeout_ms)
{
	TimestampTz deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), timeout_ms);

	ws->mirror.not_before = 0;
	while (ws->consumer && ks_consumer_mirror_group(ws->consumer) &&
		   (ws->mirror.due || ks_consumer_mirror_pending(ws->consumer)) &&
		   GetCurrentTimestamp() < deadline)
	{
		ks_mirror_checkpoint(ws);
		pg_usleep(20000);
	}
}

/*
 * A new checkpoint was committed: it is sent now, whatever the backoff of a
 * failed one.
 */
void
ks_mirror_committed(KsWorkerState *ws)
{
	ws->mirror.due = true;
	ws->mirror.not_before = 0;
	ks_mirror_checkpoint(ws);
}

/*
 * The worker starts: the group shows the catalog's checkpoint, whatever was
 * done to it meanwhile.
 */
void
ks_mirror_resync(KsWorkerState *ws)
{
	ws->mirror.due = true;
}
