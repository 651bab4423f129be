/*-------------------------------------------------------------------------
 *
 * worker.c
 *		The per-pipeline background worker: owns a set of partitions, fills
 *		micro-batches from Kafka and applies each in one transaction.
 *
 * The worker connects as the pipeline's owner, so every write runs with
 * the owner's privileges.  On start, and after every rollback, it reads
 * its position from the catalog and assigns its partitions there: Kafka's
 * consumer-group offsets are never read.  No transaction is open while it
 * waits on Kafka.
 *
 *-------------------------------------------------------------------------
 */
#include "kafka_sink.h"

#include "access/xact.h"
#include "common/hashfn.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "tcop/tcopprot.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

StaticAssertDecl(sizeof(KsWorkerArgs) <= BGW_EXTRALEN, "worker arguments must fit in bgw_extra");

static KsWorkerArgs args;
static KsPipeline *pipeline;
static KsConsumer *consumer;
static KsPartition *parts = NULL;
static int	nparts = 0;
static TimestampTz next_metadata_refresh = 0;
static bool broker_error_shown = false;

static pg_noreturn void worker_fail(const char *kind, int sqlerrcode, const char *message,
									const char *detail, const char *hint);

/* ---- failures ---- */

/*
 * Records a failure where it happens and ends the worker: a row in
 * kafka_sink.errors and, unless it is transient, state 'failed' (so that
 * status, errors and wait() show it and the launcher starts no worker for
 * it again).  Must be called outside any transaction.  A transient failure
 * exits with state 'running': the launcher starts a worker again, with
 * backoff.
 *
 * If even that cannot be written, the slot is marked not ready before
 * exiting: the launcher counts such exits and, after a few in a row,
 * records the failure itself (it is a superuser).
 */
static void
worker_fail(const char *kind, int sqlerrcode, const char *message,
			const char *detail, const char *hint)
{
	bool		permanent = strcmp(kind, "transient") != 0;
	const char *name = pipeline ? quote_identifier(pipeline->name) : psprintf("%lld", (long long) args.pipeline_id);
	char	   *full_detail = (char *) detail;

	if (hint)
		full_detail = detail ? psprintf("%s Hint: %s", detail, hint) : psprintf("Hint: %s", hint);
	ereport(LOG,
			(errmsg("kafka_sink: pipeline %s %s: %s", name,
					permanent ? "failed" : "hit a transient error, a worker starts again", message),
			 detail ? errdetail("%s", detail) : 0,
			 hint ? errhint("%s", hint) : 0));
	PG_TRY();
	{
		ks_record_error(args.pipeline_id, kind, sqlerrcode, message, full_detail);
		if (permanent)
			ks_set_state(args.pipeline_id, "failed");
		else
			ks_slot_set_detail(args.slot, "retrying after: %s", message);
	}
	PG_CATCH();
	{
		EmitErrorReport();
		FlushErrorState();
		AbortOutOfAnyTransaction();
		LWLockAcquire(ks_shared->lock, LW_EXCLUSIVE);
		ks_shared->slots[args.slot].ready = false;
		LWLockRelease(ks_shared->lock);
		proc_exit(1);
	}
	PG_END_TRY();
	proc_exit(permanent ? 0 : 1);
}

/* ---- slot ---- */

/*
 * Publishes the partition set in shared memory for kafka_sink.progress:
 * releases this worker's entries and claims one per partition.
 */
static void
publish_partitions(void)
{
	KsPartStat *st = KS_PARTSTATS();
	int			next = 0;

	LWLockAcquire(ks_shared->lock, LW_EXCLUSIVE);
	for (int i = 0; i < ks_shared->npartstats; i++)
		if (st[i].in_use && st[i].pid == MyProcPid)
			st[i].in_use = false;
	for (int p = 0; p < nparts; p++)
	{
		parts[p].stat = -1;
		while (next < ks_shared->npartstats && st[next].in_use)
			next++;
		if (next >= ks_shared->npartstats)
			continue;			/* no room: kafka_sink.max_partitions */
		memset(&st[next], 0, sizeof(KsPartStat));
		st[next].in_use = true;
		st[next].database = MyDatabaseId;
		st[next].pipeline_id = args.pipeline_id;
		st[next].owner = args.owner;	/* who may see it (_partition_stats) */
		st[next].worker_index = args.worker_index;
		st[next].pid = MyProcPid;
		strlcpy(st[next].topic, parts[p].topic, KS_TOPIC_LEN);
		st[next].partition = parts[p].partition;
		st[next].low = st[next].high = -1;
		parts[p].stat = next;
	}
	LWLockRelease(ks_shared->lock);
}

/*
 * Refreshes the watermarks shown in kafka_sink.progress: from what the
 * consumer saw in fetch responses, or, with ask_broker (a paused worker
 * fetches nothing), from a watermark query.
 */
static void
refresh_watermarks(bool ask_broker)
{
	KsPartStat *st = KS_PARTSTATS();
	TimestampTz now = GetCurrentTimestamp();

	for (int p = 0; p < nparts; p++)
	{
		int64		low,
					high;
		char	   *err = NULL;
		bool		ok;

		if (parts[p].stat < 0)
			continue;
		if (ask_broker)
			ok = ks_consumer_watermarks(consumer, parts[p].topic, parts[p].partition,
										&low, &high, 2000, &err);
		else
			ok = ks_consumer_cached_watermarks(consumer, parts[p].topic, parts[p].partition,
											   &low, &high);
		if (!ok)
			continue;
		LWLockAcquire(ks_shared->lock, LW_EXCLUSIVE);
		if (low >= 0)
			st[parts[p].stat].low = low;
		st[parts[p].stat].high = high;
		st[parts[p].stat].watermarks_at = now;
		LWLockRelease(ks_shared->lock);
	}
}

/* After a commit: per-partition rate and message size, as moving averages. */
static void
publish_partition_progress(double seconds)
{
	KsPartStat *st = KS_PARTSTATS();
	TimestampTz now = GetCurrentTimestamp();

	LWLockAcquire(ks_shared->lock, LW_EXCLUSIVE);
	for (int p = 0; p < nparts; p++)
	{
		KsPartStat *s;
		double		rate;

		if (parts[p].stat < 0)
			continue;
		s = &st[parts[p].stat];
		rate = seconds > 0 ? parts[p].messages / seconds : 0;
		s->rate = s->last_commit_at == 0 ? rate : 0.7 * s->rate + 0.3 * rate;
		if (parts[p].messages > 0)
		{
			double		avg = (double) parts[p].bytes / parts[p].messages;

			s->avg_bytes = s->avg_bytes == 0 ? avg : 0.7 * s->avg_bytes + 0.3 * avg;
			s->last_commit_at = now;
		}
	}
	LWLockRelease(ks_shared->lock);
}

/* ---- partitions ---- */

/* Which worker of n owns a partition: stable, so reassignments are clean. */
static int
partition_owner(const char *topic, int32 partition, int n)
{
	uint32		h = hash_bytes((const unsigned char *) topic, strlen(topic));

	return (int) ((h + (uint32) partition) % (uint32) n);
}

static int
find_part(const char *topic, int32 partition)
{
	static int	last = 0;

	if (last < nparts && parts[last].partition == partition &&
		strcmp(parts[last].topic, topic) == 0)
		return last;
	for (int i = 0; i < nparts; i++)
		if (parts[i].partition == partition && strcmp(parts[i].topic, topic) == 0)
			return last = i;
	return -1;
}

/* The partitions this worker should own now; NIL with *err set on failure. */
static List *
wanted_partitions(char **err, List **all_out)
{
	List	   *all;
	List	   *mine = NIL;
	ListCell   *lc;

	*err = NULL;
	*all_out = NIL;
	if (pipeline->assign != NIL)
		all = pipeline->assign;
	else
	{
		all = ks_consumer_list_partitions(consumer, pipeline->subscribe,
										  pipeline->subscribe_pattern, 5000, err);
		if (*err)
			return NIL;
	}
	foreach(lc, all)
	{
		KsTopicPartition *tp = lfirst(lc);

		if (partition_owner(tp->topic, tp->partition, args.nworkers) == args.worker_index)
			mine = lappend(mine, tp);
	}
	*all_out = all;
	return mine;
}

/*
 * Resolves an offsets spec (starting_offsets or ending_offsets) for one
 * partition: earliest, latest, per-partition JSON (-2 earliest, -1 latest;
 * partitions not named take latest), or a timestamp (the first offset at or
 * after it, else latest).
 */
static int64
resolve_spec(const char *topic, int32 partition, const char *spec, List *per_partition,
			 int64 ts_ms, char **err)
{
	int64		low,
				high,
				off;

	if (!ks_consumer_watermarks(consumer, topic, partition, &low, &high, 5000, err))
		return -1;
	if (strcmp(spec, "earliest") == 0)
		return low;
	if (strcmp(spec, "latest") == 0)
		return high;
	if (spec[0] == '{')
	{
		ListCell   *lc;

		foreach(lc, per_partition)
		{
			KsPartition *sp = lfirst(lc);

			if (sp->partition == partition && strcmp(sp->topic, topic) == 0)
			{
				if (sp->committed == -2)
					return low;
				if (sp->committed == -1)
					return high;
				return sp->committed;
			}
		}
		return high;			/* partitions not named start at latest */
	}
	/* a timestamp: the first offset at or after it */
	if (!ks_consumer_offset_for_time(consumer, topic, partition, ts_ms, &off, 5000, err))
		return -1;
	return off < 0 ? high : off;
}

/*
 * Brings the partition set up to date with metadata and assigns each
 * partition at its checkpoint.  Partitions seen for the first time get a
 * checkpoint first: from starting_offsets when the pipeline has never
 * checkpointed anything, else from the earliest offset (a topic or
 * partition that appears later is read from its beginning).
 */
static bool
refresh_assignment(bool force)
{
	char	   *err = NULL;
	List	   *every = NIL;
	List	   *want = wanted_partitions(&err, &every);
	KsPartition *np;
	int			n = list_length(want);
	bool		same = (n == nparts);
	bool		all;
	bool		first_start;
	ListCell   *lc;
	int			i;

	next_metadata_refresh = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), ks_metadata_refresh_ms);
	if (err)
	{
		ks_slot_set_detail(args.slot, "%s", err);
		return false;
	}
	i = 0;
	foreach(lc, want)
	{
		KsTopicPartition *tp = lfirst(lc);

		if (same && (parts[i].partition != tp->partition || strcmp(parts[i].topic, tp->topic) != 0))
			same = false;
		i++;
	}
	if (same && !force)
		return true;

	np = MemoryContextAllocZero(TopMemoryContext, sizeof(KsPartition) * Max(n, 1));
	i = 0;
	foreach(lc, want)
	{
		KsTopicPartition *tp = lfirst(lc);

		np[i].topic = MemoryContextStrdup(TopMemoryContext, tp->topic);
		np[i].partition = tp->partition;
		i++;
	}

	ks_xact_begin("kafka_sink: reading the checkpoint");
	all = ks_load_offsets(pipeline->id, np, n);
	first_start = !ks_pipeline_has_offsets(pipeline->id);
	ks_xact_commit();

	/* a bounded pipeline reads the partitions it started with, no others */
	if (pipeline->ending_offsets && !first_start && !all)
	{
		int			kept = 0;

		for (i = 0; i < n; i++)
			if (np[i].committed >= 0)
				np[kept++] = np[i];
		n = kept;
		all = true;
	}

	/*
	 * The pipeline's very first start: checkpoint every partition from
	 * starting_offsets, not only this worker's, so that workers that start a
	 * moment later find theirs already there and do not take them for
	 * partitions discovered later (which start at earliest).
	 */
	if (first_start && args.nworkers > 1 && list_length(every) > n)
	{
		KsPartition *ep = palloc0(sizeof(KsPartition) * list_length(every));
		int			ne = 0;

		foreach(lc, every)
		{
			KsTopicPartition *tp = lfirst(lc);

			ep[ne].topic = tp->topic;
			ep[ne].partition = tp->partition;
			ep[ne].end_offset = -1;
			ep[ne].committed = resolve_spec(tp->topic, tp->partition, pipeline->starting_offsets,
											pipeline->start_offsets, pipeline->start_ts_ms, &err);
			if (!err && pipeline->ending_offsets)
				ep[ne].end_offset = resolve_spec(tp->topic, tp->partition, pipeline->ending_offsets,
												 pipeline->end_offsets, pipeline->end_ts_ms, &err);
			if (err)
			{
				ks_slot_set_detail(args.slot, "%s", err);
				return false;
			}
			ne++;
		}
		ks_xact_begin("kafka_sink: writing the first checkpoint");
		ks_insert_initial_offsets(pipeline->id, ep, ne);
		all = ks_load_offsets(pipeline->id, np, n);
		ks_xact_commit();
	}

	if (!all)
	{
		for (i = 0; i < n; i++)
		{
			if (np[i].committed >= 0)
				continue;
			np[i].committed = resolve_spec(np[i].topic, np[i].partition,
										   first_start ? pipeline->starting_offsets : "earliest",
										   pipeline->start_offsets, pipeline->start_ts_ms, &err);
			if (!err && pipeline->ending_offsets)
				np[i].end_offset = resolve_spec(np[i].topic, np[i].partition, pipeline->ending_offsets,
												pipeline->end_offsets, pipeline->end_ts_ms, &err);
			if (err)
			{
				ks_slot_set_detail(args.slot, "%s", err);
				return false;
			}
		}
		ks_xact_begin("kafka_sink: writing the first checkpoint");
		ks_insert_initial_offsets(pipeline->id, np, n);
		ks_load_offsets(pipeline->id, np, n);
		ks_xact_commit();
	}

	for (i = 0; i < nparts; i++)
		pfree(parts[i].topic);
	if (parts)
		pfree(parts);
	parts = np;
	nparts = n;
	ks_consumer_assign(consumer, parts, nparts);
	publish_partitions();
	elog(DEBUG1, "kafka_sink: pipeline \"%s\" worker %d assigned %d partitions",
		 pipeline->name, args.worker_index, nparts);
	return true;
}

/* After a rollback: back to the catalog's offsets. */
static void
rewind_to_checkpoint(void)
{
	ks_xact_begin("kafka_sink: reading the checkpoint");
	ks_load_offsets(pipeline->id, parts, nparts);
	ks_xact_commit();
	for (int i = 0; i < nparts; i++)
	{
		parts[i].messages = 0;
		parts[i].bytes = 0;
		parts[i].loss = false;
		if (parts[i].committed < 0)
			parts[i].committed = 0;
		parts[i].end = parts[i].committed;
	}
	ks_consumer_assign(consumer, parts, nparts);
}

/* ---- filling a batch ---- */

typedef struct Fill
{
	KsMessage **msgs;
	int			nmsgs;
	int			cap;
	int64		bytes;
	bool	   *eof;
	TimestampTz first_at;
	int64	   *goal;			/* per partition: the high watermark when due */
	bool		due;			/* goal is set */
} Fill;

static bool
batch_has_work(Fill *f)
{
	if (f->nmsgs > 0)
		return true;
	for (int i = 0; i < nparts; i++)
		if (parts[i].end != parts[i].committed || parts[i].loss)
			return true;
	return false;
}

static void
handle_out_of_range(int idx)
{
	KsPartition *p = &parts[idx];
	int64		low,
				high;
	char	   *err = NULL;

	if (!ks_consumer_watermarks(consumer, p->topic, p->partition, &low, &high, 5000, &err))
	{
		ks_slot_set_detail(args.slot, "%s", err);
		return;
	}
	if (pipeline->fail_on_data_loss)
	{
		char	   *msg;

		if (p->end > high)
			msg = psprintf("data loss on topic \"%s\" partition %d: expected offset %lld is past the end of the log (offsets %lld to %lld): the topic was deleted and created again, or its log was truncated",
						   p->topic, p->partition, (long long) p->end, (long long) low, (long long) high);
		else
			msg = psprintf("data loss on topic \"%s\" partition %d: expected offset %lld, earliest available offset %lld",
						   p->topic, p->partition, (long long) p->end, (long long) low);

		worker_fail("data_loss", ERRCODE_DATA_CORRUPTED, msg,
					"fail_on_data_loss is true, so the pipeline stopped. Set it to false with kafka_sink.alter_pipeline to skip the gap, or reset the offsets.",
					NULL);
	}
	p->loss = true;
	p->loss_expected = p->end;
	/*
	 * Below the log start (records deleted or expired): skip to low.  Above
	 * the log end (the topic was deleted and created again): its offsets
	 * start over, so read the new log from its start; data_loss records it
	 * as kind 'reset' (available_offset < expected_offset).
	 */
	p->loss_available = low;
	p->end = p->loss_available;
	/* resume fetching there; buffered messages of other partitions stay */
	{
		KsPartition *tmp = palloc(sizeof(KsPartition) * nparts);

		memcpy(tmp, parts, sizeof(KsPartition) * nparts);
		for (int i = 0; i < nparts; i++)
			tmp[i].committed = parts[i].end;
		ks_consumer_assign(consumer, tmp, nparts);
	}
}

/* ---- mirroring the checkpoint to Kafka's consumer group ---- */

/*
 * With group.id in kafka_options, the offsets this worker has checkpointed
 * are committed to that consumer group after each batch, so that Kafka's
 * own lag tools (kafka-consumer-groups, Burrow, kafka-lag-exporter, cloud
 * consoles) show the pipeline's lag.  Advisory only: never read back (the
 * catalog is the truth), never waited for, and a failure neither fails nor
 * delays a batch; it is logged at most once a minute and retried after the
 * next batch or, while idle, with a backoff.
 */
static bool mirror_due = false;		/* the group is behind the checkpoint */
static TimestampTz mirror_not_before = 0;
static int	mirror_failures = 0;
static int64 mirror_failures_unlogged = 0;
static TimestampTz mirror_logged_at = 0;
static TimestampTz mirror_sent_at = 0;

/*
 * Kafka expires the offsets of a group without members
 * offsets.retention.minutes (7 days by default) after their last commit:
 * an idle pipeline commits its checkpoint again every hour so that the
 * group does not vanish from the lag tools.
 */
#define MIRROR_REFRESH_MS (3600 * 1000L)

static void
mirror_checkpoint(void)
{
	char		err[512];
	int			r;
	TimestampTz now;

	if (consumer == NULL || ks_consumer_mirror_group(consumer) == NULL)
		return;
	r = ks_consumer_mirror_result(consumer, err, sizeof(err));
	now = GetCurrentTimestamp();
	if (r < 0)
	{
		mirror_due = true;
		mirror_failures++;
		mirror_not_before = TimestampTzPlusMilliseconds(now, Min(60000L, 500L << Min(mirror_failures, 7)));
		if (mirror_logged_at == 0 || TimestampDifferenceExceeds(mirror_logged_at, now, 60000))
		{
			ereport(LOG,
					(errmsg("kafka_sink: pipeline \"%s\": could not commit offsets to consumer group \"%s\": %s",
							pipeline->name, ks_consumer_mirror_group(consumer), err),
					 mirror_failures_unlogged > 0 ?
					 errdetail("%lld earlier attempts failed too.", (long long) mirror_failures_unlogged) : 0,
					 errhint("The group only mirrors the checkpoint for Kafka's lag tools; the pipeline is not affected. "
							 "The broker refuses the commit while the group has active members, or without READ on the group.")));
			mirror_logged_at = now;
			mirror_failures_unlogged = 0;
		}
		else
			mirror_failures_unlogged++;
	}
	else if (r > 0)
		mirror_failures = 0;
	if (mirror_sent_at != 0 && TimestampDifferenceExceeds(mirror_sent_at, now, MIRROR_REFRESH_MS))
		mirror_due = true;
	if (mirror_due && now >= mirror_not_before && ks_consumer_mirror_send(consumer, parts, nparts))
	{
		mirror_due = false;
		mirror_sent_at = now;
	}
}

/* Before the worker exits on its own: give the last commit a moment. */
static void
mirror_flush(long timeout_ms)
{
	TimestampTz deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), timeout_ms);

	mirror_not_before = 0;
	while (consumer && ks_consumer_mirror_group(consumer) &&
		   (mirror_due || ks_consumer_mirror_pending(consumer)) &&
		   GetCurrentTimestamp() < deadline)
	{
		mirror_checkpoint();
		pg_usleep(20000);
	}
}

static void
wait_for_kafka(long timeout_ms)
{
	int			rc;

	pgstat_report_activity(STATE_IDLE, NULL);
	rc = WaitLatchOrSocket(MyLatch,
						   WL_LATCH_SET | WL_SOCKET_READABLE | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						   ks_consumer_fd(consumer), timeout_ms,
						   ks_wait_event(KS_WAIT_MESSAGES));
	if (rc & WL_LATCH_SET)
		ResetLatch(MyLatch);
	if (rc & WL_SOCKET_READABLE)
		ks_consumer_drain_fd(consumer);
	mirror_checkpoint();
	/* a cancel means "stop this statement"; between batches there is none */
	QueryCancelPending = false;
	CHECK_FOR_INTERRUPTS();
	if (ConfigReloadPending)
	{
		ConfigReloadPending = false;
		ProcessConfigFile(PGC_SIGHUP);
	}
}

/*
 * Shows a client-level error (broker unreachable, authentication failed)
 * in status at once, and records it in kafka_sink.errors at most once a
 * minute, so that a wrong password is visible rather than a silent stall.
 */
static void
note_client_error(void)
{
	char		buf[512];
	static TimestampTz last_recorded = 0;
	TimestampTz now;

	if (!ks_consumer_take_error(buf, sizeof(buf)))
		return;
	ks_slot_set_detail(args.slot, "kafka: %s", buf);
	broker_error_shown = true;
	now = GetCurrentTimestamp();
	if (last_recorded == 0 || TimestampDifferenceExceeds(last_recorded, now, 60000))
	{
		last_recorded = now;
		ks_record_error(pipeline->id, "broker", 0, psprintf("kafka: %s", buf), NULL);
	}
}

/*
 * When the previous batch closed: the next one closes trigger_interval
 * later (Spark's processing-time trigger).  A batch that took longer than
 * the interval to apply makes the next one due at once, so messages that
 * waited during a slow batch do not wait a whole interval more.
 */
static TimestampTz last_trigger = 0;

/*
 * min_offsets_per_batch and max_trigger_delay (Spark's minOffsetsPerTrigger
 * and maxTriggerDelay): a batch holds at least min_offsets_per_batch
 * messages unless max_trigger_delay has passed since the previous batch
 * closed (or since the worker started); then it takes what there is.
 */
static TimestampTz batch_delay_from = 0;

/*
 * May the batch close as far as min_offsets_per_batch is concerned?  Yes
 * when it holds enough, when the delay is over, or when every partition of
 * a bounded pipeline is at its end (the tail is taken, however small).
 * Else *wake is when the delay ends.
 */
static bool
min_reached(Fill *f, TimestampTz now, TimestampTz *wake)
{
	bool		all_at_end = nparts > 0;

	if (pipeline->min_offsets_per_batch <= 0 || f->nmsgs >= pipeline->min_offsets_per_batch)
		return true;
	*wake = TimestampTzPlusMilliseconds(batch_delay_from, pipeline->max_trigger_delay_ms);
	if (now >= *wake)
		return true;
	for (int i = 0; i < nparts; i++)
		if (parts[i].end_offset < 0 || parts[i].end < parts[i].end_offset)
			all_at_end = false;
	return all_at_end;
}

/*
 * Paused while a batch waits for min_offsets_per_batch: drop what it holds
 * (nothing of it was applied); resuming reads again from the checkpoint.
 */
static void
abandon_batch(Fill *f)
{
	for (int i = 0; i < f->nmsgs; i++)
		ks_message_release(f->msgs[i]);
	f->nmsgs = 0;
	f->bytes = 0;
	f->first_at = 0;
	for (int i = 0; i < nparts; i++)
	{
		parts[i].end = parts[i].committed;
		parts[i].messages = 0;
		parts[i].bytes = 0;
		parts[i].loss = false;
	}
}

/*
 * Once the trigger is due, the batch takes what the broker had then: it
 * closes when every partition has reached the high watermark librdkafka
 * last saw for it (fetch responses carry it), or is at its end.  A
 * partition whose watermark is not known yet counts as reached.
 */
static bool
reached_goal(Fill *f)
{
	if (!f->due)
	{
		f->due = true;
		for (int i = 0; i < nparts; i++)
		{
			int64		low;

			if (!ks_consumer_cached_watermarks(consumer, parts[i].topic, parts[i].partition,
											   &low, &f->goal[i]))
				f->goal[i] = -1;
			if (parts[i].end_offset >= 0)
				f->goal[i] = Min(f->goal[i], parts[i].end_offset);
		}
	}
	for (int i = 0; i < nparts; i++)
		if (!f->eof[i] && f->goal[i] > parts[i].end)
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
static void
fill_batch(Fill *f)
{
	KsEvent		ev;

	for (;;)
	{
		TimestampTz now;

		while (f->nmsgs < pipeline->max_offsets_per_batch &&
			   f->bytes < pipeline->max_batch_bytes &&
			   ks_consumer_poll(consumer, &ev))
		{
			int			idx = ev.msg.topic ? find_part(ev.msg.topic, ev.msg.partition) : -1;

			switch (ev.kind)
			{
				case KS_EV_MESSAGE:
					if (idx >= 0 && parts[idx].end_offset >= 0 && ev.msg.offset >= parts[idx].end_offset)
					{
						/* past the end of a bounded pipeline: not ours to read */
						ks_message_release(&ev.msg);
						parts[idx].end = Max(parts[idx].end, parts[idx].end_offset);
						f->eof[idx] = true;
						break;
					}
					if (idx < 0 || ev.msg.offset < parts[idx].end)
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
					parts[idx].end = ev.msg.offset + 1;
					parts[idx].messages++;
					parts[idx].bytes += ev.msg.value_len + ev.msg.key_len;
					f->eof[idx] = false;
					if (f->first_at == 0)
						f->first_at = GetCurrentTimestamp();
					broker_error_shown = false;
					break;
				case KS_EV_EOF:
					if (idx >= 0)
					{
						/* skips transaction markers and compacted gaps at the tail */
						if (ev.msg.offset > parts[idx].end)
							parts[idx].end = parts[idx].end_offset >= 0 ?
								Min(ev.msg.offset, Max(parts[idx].end_offset, parts[idx].end)) :
								ev.msg.offset;
						f->eof[idx] = true;
					}
					break;
				case KS_EV_OUT_OF_RANGE:
					if (idx >= 0)
						handle_out_of_range(idx);
					break;
				case KS_EV_ERROR:
					ks_slot_set_detail(args.slot, "kafka: %s", ev.errstr);
					broker_error_shown = true;
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
		note_client_error();

		if (f->nmsgs >= pipeline->max_offsets_per_batch || f->bytes >= pipeline->max_batch_bytes)
			return;
		now = GetCurrentTimestamp();
		if (batch_has_work(f))
		{
			bool		all_eof = true;
			TimestampTz wake = 0;
			TimestampTz due = TimestampTzPlusMilliseconds(last_trigger, pipeline->trigger_interval_ms);
			TimestampTz limit = TimestampTzPlusMilliseconds(f->first_at, pipeline->trigger_interval_ms);

			for (int i = 0; i < nparts; i++)
				if (!f->eof[i])
					all_eof = false;

			if (!min_reached(f, now, &wake))
			{
				if (ks_shared->slots[args.slot].paused)
				{
					abandon_batch(f);
					return;
				}
				/* new messages wake the worker; a pause is seen within a second */
				wait_for_kafka(Min(1000, Max(1, TimestampDifferenceMilliseconds(now, wake))));
				continue;
			}
			if (all_eof || f->first_at == 0)
				return;
			if (now < due)
				wait_for_kafka(Max(1, TimestampDifferenceMilliseconds(now, due)));
			else if (reached_goal(f) || now >= limit)
				return;
			else
				wait_for_kafka(Max(1, TimestampDifferenceMilliseconds(now, limit)));
		}
		else
		{
			if (now >= next_metadata_refresh)
				return;			/* let the loop refresh metadata */
			wait_for_kafka(Min(1000, Max(1, TimestampDifferenceMilliseconds(now, next_metadata_refresh))));
		}
	}
}

/*
 * A bounded (backfill) pipeline: true when this worker's partitions have all
 * reached their end.  The worker whose commit completes the last partition
 * of the pipeline sets it to 'finished' and exits; the launcher then stops
 * the others.
 */
static bool
bounded_done(void)
{
	Oid			argtypes[1] = {INT8OID};
	Datum		values[1] = {Int64GetDatum(pipeline->id)};
	bool		finished;

	for (int i = 0; i < nparts; i++)
		if (parts[i].end_offset < 0 || parts[i].committed < parts[i].end_offset)
			return false;
	ks_xact_begin("kafka_sink: finishing a bounded pipeline");
	SPI_execute_with_args("UPDATE kafka_sink.pipeline_definitions SET state = 'finished', updated_at = now()"
						  " WHERE id = $1 AND state = 'running' AND NOT EXISTS ("
						  "  SELECT 1 FROM kafka_sink.offsets o WHERE o.pipeline_id = $1"
						  "  AND (o.end_offset IS NULL OR o.next_offset < o.end_offset))",
						  1, argtypes, values, NULL, false, 0);
	finished = SPI_processed == 1;
	ks_xact_commit();
	if (finished)
	{
		mirror_flush(5000);
		ereport(LOG, (errmsg("kafka_sink: bounded pipeline \"%s\" reached its ending offsets and finished",
							 pipeline->name)));
		proc_exit(0);
	}
	return true;
}

/* ---- the loop ---- */

static bool
is_transient(int sqlerrcode)
{
	int			cls = ERRCODE_TO_CATEGORY(sqlerrcode);

	return cls == ERRCODE_TRANSACTION_ROLLBACK ||
		cls == ERRCODE_INSUFFICIENT_RESOURCES ||
		cls == ERRCODE_CONNECTION_EXCEPTION ||
		sqlerrcode == ERRCODE_LOCK_NOT_AVAILABLE ||
		sqlerrcode == ERRCODE_QUERY_CANCELED ||
		sqlerrcode == ERRCODE_ADMIN_SHUTDOWN;
}

/*
 * What kafka_sink.errors records as the detail of an error: its detail and
 * its hint (the hint says what to do, e.g. about the pinned search_path).
 */
static const char *
detail_and_hint(ErrorData *edata)
{
	if (edata->hint == NULL)
		return edata->detail;
	if (edata->detail == NULL)
		return psprintf("Hint: %s", edata->hint);
	return psprintf("%s\nHint: %s", edata->detail, edata->hint);
}

static void
publish_progress(KsBatch *b)
{
	KsWorkerSlot *slot = &ks_shared->slots[args.slot];

	LWLockAcquire(ks_shared->lock, LW_EXCLUSIVE);
	slot->last_batch_id = b->batch_id;
	slot->last_batch_at = GetCurrentTimestamp();
	if (!broker_error_shown)
		slot->detail[0] = '\0';
	LWLockRelease(ks_shared->lock);
}

/*
 * Settings the worker depends on, whatever the owner's role-level settings
 * (ALTER ROLE ... SET, ALTER ROLE ... IN DATABASE ... SET) say: a read-only
 * default, a stricter isolation level, timeouts, replica mode (triggers off)
 * or a SET ROLE to another role would make every batch fail, or silently
 * change what a batch does.  Session-level values override the role's; a
 * batch function's own SET clause still applies within it.
 */
static void
pin_settings(void)
{
	static const char *const pinned[][2] = {
		{"search_path", "pg_catalog, pg_temp"},
		{"role", "none"},
		{"default_transaction_read_only", "off"},
		{"default_transaction_isolation", "read committed"},
		{"default_transaction_deferrable", "off"},
		{"statement_timeout", "0"},
		{"lock_timeout", "0"},
		{"idle_in_transaction_session_timeout", "0"},
		{"session_replication_role", "origin"},
	};

	for (int i = 0; i < (int) lengthof(pinned); i++)
		SetConfigOption(pinned[i][0], pinned[i][1], PGC_SUSET, PGC_S_SESSION);
}

/*
 * application_name and the process title are cut at NAMEDATALEN - 1 bytes:
 * a long pipeline name is shortened with a hash of the whole name, so that
 * two long names with the same beginning, and the workers of one pipeline,
 * stay apart.
 */
static char *
worker_appname(const char *name)
{
	char		suffix[16] = "";
	char	   *full;

	if (args.nworkers > 1)
		snprintf(suffix, sizeof(suffix), "/%d", args.worker_index);
	full = psprintf("kafka_sink: %s%s", name, suffix);
	if (strlen(full) > NAMEDATALEN - 1)
	{
		uint32		h = hash_bytes((const unsigned char *) name, strlen(name));
		int			keep = NAMEDATALEN - 1 - (int) strlen("kafka_sink: ") - 9 - (int) strlen(suffix);

		full = psprintf("kafka_sink: %.*s~%08x%s", keep, name, h, suffix);
	}
	return full;
}

/*
 * Every phase from the connection on runs here, under ks_worker_main's
 * error handler: loading the definition, checking the target, creating the
 * consumer, resolving starting offsets and the batch loop.
 */
static void
worker_run(void)
{
	MemoryContext batch_cxt;
	volatile int failures = 0;
	volatile TimestampTz last_commit = 0;
	volatile bool paused = false;

	ks_xact_begin("kafka_sink: loading the pipeline");
	pipeline = ks_load_pipeline(args.pipeline_id, TopMemoryContext);
	ks_xact_commit();
	if (pipeline == NULL || strcmp(pipeline->state, "running") != 0)
		proc_exit(0);

	{
		char	   *appname = worker_appname(pipeline->name);

		SetConfigOption("application_name", appname, PGC_USERSET, PGC_S_SESSION);
		pgstat_report_appname(appname);
	}

	/* the target as it is now: a dropped table or column fails at once */
	if (OidIsValid(pipeline->target))
	{
		ks_xact_begin("kafka_sink: checking the target");
		(void) ks_target_open(pipeline);
		ks_xact_commit();
	}

	/* a consumer librdkafka refuses to create is a configuration error */
	consumer = ks_consumer_create(pipeline, NULL);
	batch_cxt = AllocSetContextCreate(TopMemoryContext, "kafka_sink batch", ALLOCSET_DEFAULT_SIZES);

	while (!refresh_assignment(true))
	{
		wait_for_kafka(2000);
		ks_consumer_serve(consumer);
		ks_consumer_emit_logs();
		note_client_error();
	}
	/* the group shows the catalog's checkpoint, whatever was done to it meanwhile */
	mirror_due = true;
	batch_delay_from = GetCurrentTimestamp();

	for (;;)
	{
		Fill		f = {0};
		KsBatch		batch = {0};
		MemoryContext old;

		QueryCancelPending = false;
		CHECK_FOR_INTERRUPTS();
		MemoryContextReset(batch_cxt);
		old = MemoryContextSwitchTo(batch_cxt);

		/* paused: hold no assignment, apply nothing, keep the lag visible */
		if (ks_shared->slots[args.slot].paused)
		{
			if (!paused)
			{
				ks_consumer_assign(consumer, parts, 0);
				ks_slot_set_detail(args.slot, "paused");
				paused = true;
			}
			refresh_watermarks(true);
			ks_consumer_emit_logs();
			MemoryContextSwitchTo(old);
			wait_for_kafka(1000);
			continue;
		}
		if (paused)
		{
			paused = false;
			ks_slot_set_detail(args.slot, "%s", "");
			rewind_to_checkpoint();
		}

		if (GetCurrentTimestamp() >= next_metadata_refresh && pipeline->assign == NIL)
			refresh_assignment(false);

		if (pipeline->ending_offsets && bounded_done())
		{
			MemoryContextSwitchTo(old);
			wait_for_kafka(1000);
			continue;
		}

		f.cap = 1024;
		f.msgs = palloc(sizeof(KsMessage *) * f.cap);
		f.eof = palloc0(sizeof(bool) * Max(nparts, 1));
		f.goal = palloc0(sizeof(int64) * Max(nparts, 1));
		for (int i = 0; i < nparts; i++)
			f.eof[i] = parts[i].end_offset >= 0 && parts[i].committed >= parts[i].end_offset;
		batch.fetch_started_at = GetCurrentTimestamp();
		fill_batch(&f);
		refresh_watermarks(false);
		if (!batch_has_work(&f))
		{
			MemoryContextSwitchTo(old);
			continue;
		}
		last_trigger = GetCurrentTimestamp();
		batch_delay_from = last_trigger;
		ks_fault(KS_FAULT_AFTER_FETCH);

		batch.fetch_ended_at = GetCurrentTimestamp();
		batch.previous_commit_at = last_commit;
		for (int i = 0; i < nparts; i++)
		{
			int64		low;

			if (!ks_consumer_cached_watermarks(consumer, parts[i].topic, parts[i].partition,
											   &low, &parts[i].latest))
				parts[i].latest = -1;
		}
		batch.pipeline = pipeline;
		batch.worker_index = args.worker_index;
		batch.parts = parts;
		batch.nparts = nparts;
		batch.msgs = f.msgs;
		batch.nmsgs = f.nmsgs;

		PG_TRY();
		{
			ks_xact_begin("kafka_sink: applying a batch");
			MemoryContextSwitchTo(batch_cxt);
			batch.started_at = GetCurrentTransactionStartTimestamp();
			ks_apply_batch(&batch);
			ks_xact_commit();
			MemoryContextSwitchTo(batch_cxt);
			failures = 0;
		}
		PG_CATCH();
		{
			ErrorData  *edata;

			MemoryContextSwitchTo(batch_cxt);
			edata = CopyErrorData();
			FlushErrorState();
			AbortCurrentTransaction();
			MemoryContextSwitchTo(batch_cxt);
			pgstat_report_activity(STATE_IDLE, NULL);

			for (int i = 0; i < f.nmsgs; i++)
				ks_message_release(f.msgs[i]);

			if (edata->sqlerrcode == ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE)
			{
				/* stopped or dropped while we worked: nothing was written */
				ereport(LOG, (errmsg("kafka_sink: pipeline \"%s\" is no longer running, worker exits",
									 pipeline->name)));
				proc_exit(0);
			}
			if (is_transient(edata->sqlerrcode))
			{
				long		delay = Min(30000L, 100L << Min(failures, 9));

				failures++;
				ereport(LOG,
						(errmsg("kafka_sink: pipeline \"%s\": transient error, retrying in %ld ms: %s",
								pipeline->name, delay, edata->message)));
				ks_record_error(pipeline->id, "transient", edata->sqlerrcode, edata->message,
								detail_and_hint(edata));
				ks_slot_set_detail(args.slot, "retrying after: %s", edata->message);
				rewind_to_checkpoint();
				wait_for_kafka(delay);
			}
			else
				worker_fail("permanent", edata->sqlerrcode, edata->message, edata->detail, edata->hint);
			MemoryContextSwitchTo(old);
			continue;
		}
		PG_END_TRY();

		/* committed: the buffered messages are no longer needed */
		for (int i = 0; i < f.nmsgs; i++)
			ks_message_release(f.msgs[i]);
		{
			TimestampTz now = GetCurrentTimestamp();

			publish_partition_progress(last_commit == 0 ? 0 :
									   (double) (now - last_commit) / USECS_PER_SEC);
			last_commit = now;
		}
		for (int i = 0; i < nparts; i++)
		{
			parts[i].committed = parts[i].end;
			parts[i].messages = 0;
			parts[i].bytes = 0;
			parts[i].loss = false;
		}
		ks_fault(KS_FAULT_AFTER_COMMIT);
		/* a new checkpoint: sent now, whatever the backoff of a failed one */
		mirror_due = true;
		mirror_not_before = 0;
		mirror_checkpoint();
		publish_progress(&batch);
		MemoryContextSwitchTo(old);
	}
}

void
ks_worker_main(Datum arg)
{
	(void) arg;
	memcpy(&args, MyBgworkerEntry->bgw_extra, sizeof(KsWorkerArgs));
	pqsignal(SIGTERM, die);
	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	BackgroundWorkerUnblockSignals();

	if (!ks_slot_attach(args.slot, args.pipeline_id, args.worker_index))
		proc_exit(0);

	/* an owner that cannot connect is reported by the launcher (reap_slot) */
	ks_fault(KS_FAULT_BEFORE_CONNECT);
	BackgroundWorkerInitializeConnectionByOid(args.database, args.owner, 0);
	pin_settings();
	/* suspended around the user's code: apply.c, decode.c, ks_xact_commit */
	ks_catalog_writes_for_worker();
	LWLockAcquire(ks_shared->lock, LW_EXCLUSIVE);
	ks_shared->slots[args.slot].ready = true;
	LWLockRelease(ks_shared->lock);

	PG_TRY();
	{
		worker_run();
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		HOLD_INTERRUPTS();
		MemoryContextSwitchTo(TopMemoryContext);
		edata = CopyErrorData();
		FlushErrorState();
		AbortOutOfAnyTransaction();
		RESUME_INTERRUPTS();
		pgstat_report_activity(STATE_IDLE, NULL);
		if (edata->sqlerrcode == ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE)
		{
			ereport(LOG, (errmsg("kafka_sink: pipeline %lld is no longer running, worker exits",
								 (long long) args.pipeline_id)));
			proc_exit(0);
		}
		worker_fail(is_transient(edata->sqlerrcode) ? "transient" : "permanent",
					edata->sqlerrcode, edata->message, edata->detail, edata->hint);
	}
	PG_END_TRY();
}
