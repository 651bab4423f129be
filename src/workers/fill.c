/*-------------------------------------------------------------------------
 *
 * fill.c
 *		Fills a pipeline worker's next batch from Kafka, and is where the
 *		worker waits.
 *
 * A batch closes when it is full (max_offsets_per_batch,
 * max_batch_bytes), when every partition is at its end, or when the
 * trigger is due (trigger_interval after the previous batch closed, as
 * Spark's processing-time trigger: a batch that took longer than the
 * interval to apply makes the next one due at once) and it holds what the
 * broker had at that moment.  min_offsets_per_batch and max_trigger_delay
 * (Spark's minOffsetsPerTrigger and maxTriggerDelay): a batch holds at
 * least min_offsets_per_batch messages unless max_trigger_delay has passed
 * since the previous batch closed (or since the worker started); then it
 * takes what there is.
 *
 * Owns: KsFill, the end of each partition's range in the batch
 * (KsPartition.end, messages, bytes), the trigger's timers
 * (KsWorkerState.last_trigger, batch_delay_from), Kafka client errors in
 * the slot's detail and kafka_sink.errors, the worker's waits
 * (ks_wait_for_kafka; ks_backoff_wait before a retry).  Must not: hold a transaction while it waits on
 * Kafka (recording a client error is a short transaction of its own,
 * between waits), move the checkpoint or the assignment (assignment.c).
 *
 *-------------------------------------------------------------------------
 */
#include "kafka_sink.h"
#include "shmem.h"
#include "assignment.h"
#include "fill.h"
#include "mirror.h"
#include "bgworker.h"
#include "worker.h"
#include "catalog.h"
#include "consumer.h"
#include "hosts.h"
#include "kafka_options.h"

#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/interrupt.h"
#include "storage/latch.h"
#include "utils/guc.h"
#include "utils/timestamp.h"

/* Something to commit: messages, or an offset that moved (markers, gaps, data loss). */
bool
ks_fill_has_work(KsWorkerState *ws, KsFill *f)
{
	if (f->nmsgs > 0)
		return true;
	for (int i = 0; i < ws->nparts; i++)
		if (ws->parts[i].end != ws->parts[i].committed || ws->parts[i].loss)
			return true;
	return false;
}

/*
 * Sleeps until Kafka has something, the latch is set or timeout_ms passes;
 * meanwhile the consumer-group mirror is served, interrupts and a reload
 * are handled.  Every wait of the worker goes through here.  True when the
 * latch ended the wait.
 */
bool
ks_wait_for_kafka(KsWorkerState *ws, long timeout_ms)
{
	int			rc;

	pgstat_report_activity(STATE_IDLE, NULL);
	rc = WaitLatchOrSocket(MyLatch,
						   WL_LATCH_SET | WL_SOCKET_READABLE | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						   ks_consumer_fd(ws->consumer), timeout_ms,
						   ks_wait_event(KS_WAIT_MESSAGES));
	if (rc & WL_LATCH_SET)
		ResetLatch(MyLatch);
	if (rc & WL_SOCKET_READABLE)
		ks_consumer_drain_fd(ws->consumer);
	ks_mirror_checkpoint(ws);
	/* a cancel means "stop this statement"; between batches there is none */
	QueryCancelPending = false;
	CHECK_FOR_INTERRUPTS();
	if (ConfigReloadPending)
	{
		ConfigReloadPending = false;
		ProcessConfigFile(PGC_SIGHUP);

		/*
		 * A narrowed kafka_sink.allowed_hosts stops a running client too,
		 * not only the next one: the consumer keeps its connections open.
		 */
		if (ws->pipeline)
		{
			ks_hosts_check_brokers("bootstrap_servers", ws->pipeline->source.bootstrap_servers);
			ks_options_check(ws->pipeline->security.options, ws->pipeline->security.owner, KS_USE_CONSUMER);
		}
	}
	return (rc & WL_LATCH_SET) != 0;
}

/*
 * The wait before a failed batch is retried: all of delay_ms, whatever
 * Kafka has meanwhile (a rewound consumer has messages at once, and a
 * backoff that ended on them would retry an outage twice a second), unless
 * the latch is set: a signal, a stop or a change to the pipeline.
 */
void
ks_backoff_wait(KsWorkerState *ws, long delay_ms)
{
	TimestampTz until = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), delay_ms);

	for (;;)
	{
		long		left = TimestampDifferenceMilliseconds(GetCurrentTimestamp(), until);

		if (left <= 0 || ks_wait_for_kafka(ws, left))
			return;
	}
}

/*
 * The evidence that Kafka answers again (a fetch, an end of partition, a
 * metadata refresh): a Kafka error the slot's detail shows is over.
 */
void
ks_kafka_healthy(KsWorkerState *ws)
{
	if (!ws->broker_error_shown)
		return;
	ks_slot_set_detail(ws->args.slot, "%s", "");
	ws->broker_error_shown = false;
}

/*
 * Shows a client-level error (broker unreachable, authentication failed)
 * in status at once, and records it in kafka_sink.errors at most once a
 * minute, so that a wrong password is visible rather than a silent stall.
 */
void
ks_note_client_error(KsWorkerState *ws)
{
	char		buf[512];
	TimestampTz now;

	if (!ks_consumer_take_error(buf, sizeof(buf)))
		return;
	ks_slot_set_detail(ws->args.slot, "kafka: %s", buf);
	ws->broker_error_shown = true;
	now = GetCurrentTimestamp();
	if (ws->client_error_recorded_at == 0 ||
		TimestampDifferenceExceeds(ws->client_error_recorded_at, now, 60000))
	{
		ws->client_error_recorded_at = now;
		ks_record_error(ws->pipeline->id, "broker", 0, psprintf("kafka: %s", buf), NULL);
	}
}

/*
 * May the batch close as far as min_offsets_per_batch is concerned?  Yes
 * when it holds enough, when the delay is over, or when every partition of
 * a bounded pipeline is at its end (the tail is taken, however small).
 * Else *wake is when the delay ends.
 */
static bool
min_reached(KsWorkerState *ws, KsFill *f, TimestampTz now, TimestampTz *wake)
{
	bool		all_at_end = ws->nparts > 0;

	if (ws->pipeline->batching.min_offsets_per_batch <= 0 || f->nmsgs >= ws->pipeline->batching.min_offsets_per_batch)
		return true;
	*wake = TimestampTzPlusMilliseconds(ws->batch_delay_from, ws->pipeline->batching.max_trigger_delay_ms);
	if (now >= *wake)
		return true;
	for (int i = 0; i < ws->nparts; i++)
		if (ws->parts[i].end_offset < 0 || ws->parts[i].end < ws->parts[i].end_offset)
			all_at_end = false;
	return all_at_end;
}

/*
 * Paused while a batch waits for min_offsets_per_batch: drop what it holds
 * (nothing of it was applied); resuming reads again from the checkpoint.
 */
static void
abandon_batch(KsWorkerState *ws, KsFill *f)
{
	for (int i = 0; i < f->nmsgs; i++)
		ks_message_release(f->msgs[i]);
	f->nmsgs = 0;
	f->bytes = 0;
	f->first_at = 0;
	for (int i = 0; i < ws->nparts; i++)
	{
		ws->parts[i].end = ws->parts[i].committed;
		ws->parts[i].messages = 0;
		ws->parts[i].bytes = 0;
		ws->parts[i].loss = false;
	}
}

/*
 * Once the trigger is due, the batch takes what the broker had then: it
 * closes when every partition has reached the high watermark librdkafka
 * last saw for it (fetch responses carry it), or is at its end.  A
 * partition whose watermark is not known yet counts as reached.
 */
static bool
reached_goal(KsWorkerState *ws, KsFill *f)
{
	if (!f->due)
	{
		f->due = true;
		for (int i = 0; i < ws->nparts; i++)
		{
			int64		low;

			if (!ks_consumer_cached_watermarks(ws->consumer, ws->parts[i].topic, ws->parts[i].partition,
											   &low, &f->goal[i]))
				f->goal[i] = -1;
			if (ws->parts[i].end_offset >= 0)
				f->goal[i] = Min(f->goal[i], ws->parts[i].end_offset);
		}
	}
	for (int i = 0; i < ws->nparts; i++)
		if (!f->eof[i] && f->goal[i] > ws->parts[i].end)
			return false;
	return true;
}

/*
 * Reads from Kafka until the batch is full, every partition is at its end,
 * or the trigger is due (trigger_interval after the previous batch closed)
 * and the batch holds what the broker had at that moment (reached_goal).
 * Waiting for that is bounded: trigger_interval after the batch's first
 * message, the batch closes with what it has (e.g. a transaction kept open
 * holds the watermark above what read_committed can read).
 */
void
ks_fill_batch(KsWorkerState *ws, KsFill *f)
{
	KsEvent		ev;

	for (;;)
	{
		TimestampTz now;

		while (f->nmsgs < ws->pipeline->batching.max_offsets_per_batch &&
			   f->bytes < ws->pipeline->batching.max_batch_bytes &&
			   ks_consumer_poll(ws->consumer, &ev))
		{
			int			idx = ev.msg.topic ? ks_find_part(ws, ev.msg.topic, ev.msg.partition) : -1;

			switch (ev.kind)
			{
				case KS_EV_MESSAGE:
					if (idx >= 0 && ws->parts[idx].end_offset >= 0 && ev.msg.offset >= ws->parts[idx].end_offset)
					{
						/* past the end of a bounded pipeline: not ours to read */
						ks_message_release(&ev.msg);
						ws->parts[idx].end = Max(ws->parts[idx].end, ws->parts[idx].end_offset);
						f->eof[idx] = true;
						break;
					}
					if (idx < 0 || ev.msg.offset < ws->parts[idx].end)
					{
						/* not ours, or fetched before a seek: drop it */
						ks_message_release(&ev.msg);
						break;
					}
					if (f->nmsgs == f->cap)
					{
						f->cap *= 2;
						f->msgs = repalloc(f->msgs, sizeof(KsMessage *) * f->cap);
					}
					ev.msg.part_index = idx;
					f->msgs[f->nmsgs] = palloc(sizeof(KsMessage));
					*f->msgs[f->nmsgs] = ev.msg;
					f->nmsgs++;
					f->bytes += ev.msg.value_len + ev.msg.key_len;
					ws->parts[idx].end = ev.msg.offset + 1;
					ws->parts[idx].messages++;
					ws->parts[idx].bytes += ev.msg.value_len + ev.msg.key_len;
					f->eof[idx] = false;
					if (f->first_at == 0)
						f->first_at = GetCurrentTimestamp();
					ks_kafka_healthy(ws);
					break;
				case KS_EV_EOF:
					ks_kafka_healthy(ws);
					if (idx >= 0)
					{
						/* skips transaction markers and compacted gaps at the tail */
						if (ev.msg.offset > ws->parts[idx].end)
							ws->parts[idx].end = ws->parts[idx].end_offset >= 0 ?
								Min(ev.msg.offset, Max(ws->parts[idx].end_offset, ws->parts[idx].end)) :
								ev.msg.offset;
						f->eof[idx] = true;
					}
					break;
				case KS_EV_OUT_OF_RANGE:
					if (idx >= 0)
						ks_assignment_out_of_range(ws, idx);
					break;
				case KS_EV_ERROR:
					ks_slot_set_detail(ws->args.slot, "kafka: %s", ev.errstr);
					ws->broker_error_shown = true;
					if (ev.fatal)
						ereport(ERROR,
								(errcode(ERRCODE_CONNECTION_FAILURE),
								 errmsg("fatal Kafka consumer error"),
								 errdetail("librdkafka: %s.", ev.errstr)));
					break;
				case KS_EV_NONE:
					break;
			}
		}
		ks_consumer_emit_logs();
		ks_note_client_error(ws);

		if (f->nmsgs >= ws->pipeline->batching.max_offsets_per_batch || f->bytes >= ws->pipeline->batching.max_batch_bytes)
			return;
		now = GetCurrentTimestamp();
		if (ks_fill_has_work(ws, f))
		{
			bool		all_eof = true;
			TimestampTz wake = 0;
			TimestampTz due = TimestampTzPlusMilliseconds(ws->last_trigger, ws->pipeline->batching.trigger_interval_ms);
			TimestampTz limit = TimestampTzPlusMilliseconds(f->first_at, ws->pipeline->batching.trigger_interval_ms);

			for (int i = 0; i < ws->nparts; i++)
				if (!f->eof[i])
					all_eof = false;

			if (!min_reached(ws, f, now, &wake))
			{
				if (ks_shared->slots[ws->args.slot].paused)
				{
					abandon_batch(ws, f);
					return;
				}
				/* new messages wake the worker; a pause is seen within a second */
				ks_wait_for_kafka(ws, Min(1000, Max(1, TimestampDifferenceMilliseconds(now, wake))));
				continue;
			}
			if (all_eof || f->first_at == 0)
				return;
			if (now < due)
				ks_wait_for_kafka(ws, Max(1, TimestampDifferenceMilliseconds(now, due)));
			else if (reached_goal(ws, f) || now >= limit)
				return;
			else
				ks_wait_for_kafka(ws, Max(1, TimestampDifferenceMilliseconds(now, limit)));
		}
		else
		{
			if (now >= ws->next_metadata_refresh)
				return;			/* let the loop refresh metadata */
			ks_wait_for_kafka(ws, Min(1000, Max(1, TimestampDifferenceMilliseconds(now, ws->next_metadata_refresh))));
		}
	}
}

/* A new batch: room for messages, every partition not yet at its end. */
void
ks_fill_start(KsWorkerState *ws, KsFill *f)
{
	memset(f, 0, sizeof(KsFill));
	f->cap = 1024;
	f->msgs = palloc(sizeof(KsMessage *) * f->cap);
	f->eof = palloc0(sizeof(bool) * Max(ws->nparts, 1));
	f->goal = palloc0(sizeof(int64) * Max(ws->nparts, 1));
	for (int i = 0; i < ws->nparts; i++)
		f->eof[i] = ws->parts[i].end_offset >= 0 && ws->parts[i].committed >= ws->parts[i].end_offset;
}

/* The batch closed: the next trigger and max_trigger_delay count from now. */
void
ks_fill_closed(KsWorkerState *ws)
{
	ws->last_trigger = GetCurrentTimestamp();
	ws->batch_delay_from = ws->last_trigger;
}

/* Committed or rolled back: the buffered messages are no longer needed. */
void
ks_fill_release(KsFill *f)
{
	for (int i = 0; i < f->nmsgs; i++)
		ks_message_release(f->msgs[i]);
}
