/*-------------------------------------------------------------------------
 *
 * assignment.c
 *		Which partitions a pipeline worker owns, and where it reads each:
 *		at the catalog's checkpoint, never at Kafka's consumer-group offsets.
 *
 * Partitions are spread over a pipeline's workers by a stable hash, so a
 * new partition or topic (subscribe_pattern) moves no other.  A partition
 * seen for the first time gets a checkpoint first (starting_offsets on the
 * pipeline's first start, else earliest; ending_offsets for a bounded
 * pipeline); after every rollback the worker rewinds to the checkpoint.
 * The partition set and its watermarks, rate and message size are
 * published in shared memory for kafka_sink.progress.
 *
 * Owns: KsWorkerState's parts/nparts and the next metadata refresh, the
 * consumer's assignment, resolving offsets specs against the broker, data
 * loss found while reading (KS_EV_OUT_OF_RANGE), the partitions' entries in
 * shared memory.  Must not: fill or apply a batch, hold SQL text
 * (catalog.c), or hold a transaction while it asks the broker.
 *
 *-------------------------------------------------------------------------
 */
#include "kafka_sink.h"
#include "guc.h"
#include "shmem.h"
#include "assignment.h"
#include "fill.h"
#include "worker.h"
#include "catalog.h"
#include "consumer.h"

#include "common/hashfn.h"
#include "miscadmin.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

/* ---- the partitions in shared memory (kafka_sink.progress) ---- */

/*
 * Publishes the partition set in shared memory for kafka_sink.progress:
 * releases this worker's entries and claims one per partition.
 */
static void
publish_partitions(KsWorkerState *ws)
{
	KsPartStat *st = KS_PARTSTATS();
	int			next = 0;

	LWLockAcquire(ks_shared->lock, LW_EXCLUSIVE);
	for (int i = 0; i < ks_shared->npartstats; i++)
		if (st[i].in_use && st[i].pid == MyProcPid)
			st[i].in_use = false;
	for (int p = 0; p < ws->nparts; p++)
	{
		ws->parts[p].stat = -1;
		while (next < ks_shared->npartstats && st[next].in_use)
			next++;
		if (next >= ks_shared->npartstats)
			continue;			/* no room: kafka_sink.max_partitions */
		memset(&st[next], 0, sizeof(KsPartStat));
		st[next].in_use = true;
		st[next].database = MyDatabaseId;
		st[next].pipeline_id = ws->args.pipeline_id;
		st[next].owner = ws->args.owner;	/* who may see it (_partition_stats) */
		st[next].worker_index = ws->args.worker_index;
		st[next].pid = MyProcPid;
		strlcpy(st[next].topic, ws->parts[p].topic, KS_TOPIC_LEN);
		st[next].partition = ws->parts[p].partition;
		st[next].low = st[next].high = -1;
		ws->parts[p].stat = next;
	}
	LWLockRelease(ks_shared->lock);
}

/*
 * Refreshes the watermarks shown in kafka_sink.progress: from what the
 * consumer saw in fetch responses, or, with ask_broker (a paused worker
 * fetches nothing), from a watermark query.
 */
void
ks_publish_watermarks(KsWorkerState *ws, bool ask_broker)
{
	KsPartStat *st = KS_PARTSTATS();
	TimestampTz now = GetCurrentTimestamp();

	for (int p = 0; p < ws->nparts; p++)
	{
		int64		low,
					high;
		char	   *err = NULL;
		bool		ok;

		if (ws->parts[p].stat < 0)
			continue;
		if (ask_broker)
			ok = ks_consumer_watermarks(ws->consumer, ws->parts[p].topic, ws->parts[p].partition,
										&low, &high, 2000, &err);
		else
			ok = ks_consumer_cached_watermarks(ws->consumer, ws->parts[p].topic, ws->parts[p].partition,
											   &low, &high);
		if (!ok)
			continue;
		LWLockAcquire(ks_shared->lock, LW_EXCLUSIVE);
		if (low >= 0)
			st[ws->parts[p].stat].low = low;
		st[ws->parts[p].stat].high = high;
		st[ws->parts[p].stat].watermarks_at = now;
		LWLockRelease(ks_shared->lock);
	}
}

/* After a commit: per-partition rate and message size, as moving averages. */
void
ks_publish_partition_progress(KsWorkerState *ws, double seconds)
{
	KsPartStat *st = KS_PARTSTATS();
	TimestampTz now = GetCurrentTimestamp();

	LWLockAcquire(ks_shared->lock, LW_EXCLUSIVE);
	for (int p = 0; p < ws->nparts; p++)
	{
		KsPartStat *s;
		double		rate;

		if (ws->parts[p].stat < 0)
			continue;
		s = &st[ws->parts[p].stat];
		rate = seconds > 0 ? ws->parts[p].messages / seconds : 0;
		s->rate = s->last_commit_at == 0 ? rate : 0.7 * s->rate + 0.3 * rate;
		if (ws->parts[p].messages > 0)
		{
			double		avg = (double) ws->parts[p].bytes / ws->parts[p].messages;

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

int
ks_find_part(KsWorkerState *ws, const char *topic, int32 partition)
{
	int			last = ws->last_part;

	if (last < ws->nparts && ws->parts[last].partition == partition &&
		strcmp(ws->parts[last].topic, topic) == 0)
		return last;
	for (int i = 0; i < ws->nparts; i++)
		if (ws->parts[i].partition == partition && strcmp(ws->parts[i].topic, topic) == 0)
			return ws->last_part = i;
	return -1;
}

/* The partitions this worker should own now; NIL with *err set on failure. */
static List *
wanted_partitions(KsWorkerState *ws, char **err, List **all_out)
{
	List	   *all;
	List	   *mine = NIL;
	ListCell   *lc;

	*err = NULL;
	*all_out = NIL;
	if (ws->pipeline->source.assign != NIL)
		all = ws->pipeline->source.assign;
	else
	{
		all = ks_consumer_list_partitions(ws->consumer, ws->pipeline->source.subscribe,
										  ws->pipeline->source.subscribe_pattern, 5000, err);
		if (*err)
			return NIL;
	}
	foreach(lc, all)
	{
		KsTopicPartition *tp = lfirst(lc);

		if (partition_owner(tp->topic, tp->partition, ws->args.nworkers) == ws->args.worker_index)
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
resolve_spec(KsWorkerState *ws, const char *topic, int32 partition, const char *spec,
			 List *per_partition, int64 ts_ms, char **err)
{
	int64		low,
				high,
				off;

	if (!ks_consumer_watermarks(ws->consumer, topic, partition, &low, &high, 5000, err))
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
	if (!ks_consumer_offset_for_time(ws->consumer, topic, partition, ts_ms, &off, 5000, err))
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
bool
ks_assignment_refresh(KsWorkerState *ws, bool force)
{
	char	   *err = NULL;
	List	   *every = NIL;
	List	   *want = wanted_partitions(ws, &err, &every);
	KsPartition *np;
	int			n = list_length(want);
	bool		same = (n == ws->nparts);
	bool		all;
	bool		first_start;
	ListCell   *lc;
	int			i;

	ws->next_metadata_refresh = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), ks_metadata_refresh_ms);
	if (err)
	{
		ks_slot_set_detail(ws->args.slot, "%s", err);
		ws->broker_error_shown = true;
		return false;
	}
	/* the broker answered: an earlier metadata or broker error is over */
	ks_kafka_healthy(ws);
	i = 0;
	foreach(lc, want)
	{
		KsTopicPartition *tp = lfirst(lc);

		if (same && (ws->parts[i].partition != tp->partition || strcmp(ws->parts[i].topic, tp->topic) != 0))
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
	all = ks_load_offsets(ws->pipeline->id, np, n);
	first_start = !ks_pipeline_has_offsets(ws->pipeline->id);
	ks_xact_commit();

	/* a bounded pipeline reads the partitions it started with, no others */
	if (ws->pipeline->source.ending_offsets && !first_start && !all)
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
	if (first_start && ws->args.nworkers > 1 && list_length(every) > n)
	{
		KsPartition *ep = palloc0(sizeof(KsPartition) * list_length(every));
		int			ne = 0;

		foreach(lc, every)
		{
			KsTopicPartition *tp = lfirst(lc);

			ep[ne].topic = tp->topic;
			ep[ne].partition = tp->partition;
			ep[ne].end_offset = -1;
			ep[ne].committed = resolve_spec(ws, tp->topic, tp->partition, ws->pipeline->source.starting_offsets,
											ws->pipeline->source.start_offsets, ws->pipeline->source.start_ts_ms, &err);
			if (!err && ws->pipeline->source.ending_offsets)
				ep[ne].end_offset = resolve_spec(ws, tp->topic, tp->partition, ws->pipeline->source.ending_offsets,
												 ws->pipeline->source.end_offsets, ws->pipeline->source.end_ts_ms, &err);
			if (err)
			{
				ks_slot_set_detail(ws->args.slot, "%s", err);
				ws->broker_error_shown = true;
				return false;
			}
			ne++;
		}
		ks_xact_begin("kafka_sink: writing the first checkpoint");
		ks_insert_initial_offsets(ws->pipeline->id, ep, ne);
		all = ks_load_offsets(ws->pipeline->id, np, n);
		ks_xact_commit();
	}

	if (!all)
	{
		for (i = 0; i < n; i++)
		{
			if (np[i].committed >= 0)
				continue;
			np[i].committed = resolve_spec(ws, np[i].topic, np[i].partition,
										   first_start ? ws->pipeline->source.starting_offsets : "earliest",
										   ws->pipeline->source.start_offsets, ws->pipeline->source.start_ts_ms, &err);
			if (!err && ws->pipeline->source.ending_offsets)
				np[i].end_offset = resolve_spec(ws, np[i].topic, np[i].partition, ws->pipeline->source.ending_offsets,
												ws->pipeline->source.end_offsets, ws->pipeline->source.end_ts_ms, &err);
			if (err)
			{
				ks_slot_set_detail(ws->args.slot, "%s", err);
				ws->broker_error_shown = true;
				return false;
			}
		}
		ks_xact_begin("kafka_sink: writing the first checkpoint");
		ks_insert_initial_offsets(ws->pipeline->id, np, n);
		ks_load_offsets(ws->pipeline->id, np, n);
		ks_xact_commit();
	}

	for (i = 0; i < ws->nparts; i++)
		pfree(ws->parts[i].topic);
	if (ws->parts)
		pfree(ws->parts);
	ws->parts = np;
	ws->nparts = n;
	ks_consumer_assign(ws->consumer, ws->parts, ws->nparts);
	publish_partitions(ws);
	elog(DEBUG1, "kafka_sink: pipeline \"%s\" worker %d assigned %d partitions",
		 ws->pipeline->name, ws->args.worker_index, ws->nparts);
	return true;
}

/* After a rollback: back to the catalog's offsets. */
void
ks_assignment_rewind(KsWorkerState *ws)
{
	ks_xact_begin("kafka_sink: reading the checkpoint");
	ks_load_offsets(ws->pipeline->id, ws->parts, ws->nparts);
	ks_xact_commit();
	for (int i = 0; i < ws->nparts; i++)
	{
		ws->parts[i].messages = 0;
		ws->parts[i].bytes = 0;
		ws->parts[i].loss = false;
		if (ws->parts[i].committed < 0)
			ws->parts[i].committed = 0;
		ws->parts[i].end = ws->parts[i].committed;
	}
	ks_consumer_assign(ws->consumer, ws->parts, ws->nparts);
}

/* ---- data loss ---- */

/*
 * The next offset of a partition is no longer in the log (deleted, expired,
 * or the topic was created again): fail the pipeline with
 * fail_on_data_loss, else record the gap in the batch (checkpoint.c writes
 * it to kafka_sink.data_loss) and read on from where the log is now.
 */
void
ks_assignment_out_of_range(KsWorkerState *ws, int idx)
{
	KsPartition *p = &ws->parts[idx];
	int64		low,
				high;
	char	   *err = NULL;

	if (!ks_consumer_watermarks(ws->consumer, p->topic, p->partition, &low, &high, 5000, &err))
	{
		ks_slot_set_detail(ws->args.slot, "%s", err);
		ws->broker_error_shown = true;
		return;
	}
	if (ws->pipeline->source.fail_on_data_loss)
	{
		char	   *msg;

		if (p->end > high)
			msg = psprintf("data loss on topic \"%s\" partition %d: expected offset %lld is past the end of the log (offsets %lld to %lld): the topic was deleted and created again, or its log was truncated",
						   p->topic, p->partition, (long long) p->end, (long long) low, (long long) high);
		else
			msg = psprintf("data loss on topic \"%s\" partition %d: expected offset %lld, earliest available offset %lld",
						   p->topic, p->partition, (long long) p->end, (long long) low);

		ks_worker_fail(ws, "data_loss", ERRCODE_DATA_CORRUPTED, msg,
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
		KsPartition *tmp = palloc(sizeof(KsPartition) * ws->nparts);

		memcpy(tmp, ws->parts, sizeof(KsPartition) * ws->nparts);
		for (int i = 0; i < ws->nparts; i++)
			tmp[i].committed = ws->parts[i].end;
		ks_consumer_assign(ws->consumer, tmp, ws->nparts);
	}
}
