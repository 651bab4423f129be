/*-------------------------------------------------------------------------
 *
 * checkpoint.c
 *		What a batch commits besides its data: the batch id, the batch
 *		marker with its progress record (shaped like Spark's
 *		StreamingQueryProgress), data loss records, the new offsets, and
 *		the retention of old markers.
 *
 * Owns: the checkpoint's content and its checks (the offsets moved under
 * us: a serialization failure; the pipeline no longer running: no batch
 * id), batch ids and the stop/drop fence.  Must not: decide what the batch applies.
 *
 *-------------------------------------------------------------------------
 */
#include "kafka_sink.h"
#include "pipeline.h"
#include "guc.h"
#include "shmem.h"
#include "catalog_guard.h"
#include "checkpoint.h"
#include "catalog.h"
#include "apply.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "storage/lmgr.h"
#include "storage/lock.h"
#include "storage/shmem.h"
#include "lib/stringinfo.h"
#include "utils/builtins.h"
#include "utils/json.h"
#include "utils/timestamp.h"

static void record_batch_id(KsBatch *batch);

static void
append_offsets(StringInfo b, KsBatch *batch, int which)
{
	const char *topic = NULL;

	appendStringInfoChar(b, '{');
	for (int i = 0; i < batch->nparts; i++)
	{
		KsPartition *p = &batch->parts[i];
		int64		v = which == 0 ? p->committed : which == 1 ? p->end : p->latest;

		if (topic == NULL || strcmp(topic, p->topic) != 0)
		{
			if (topic != NULL)
				appendStringInfoString(b, "},");
			escape_json(b, p->topic);
			appendStringInfoString(b, ":{");
			topic = p->topic;
		}
		else
			appendStringInfoChar(b, ',');
		appendStringInfo(b, "\"%d\":", p->partition);
		if (v < 0)
			appendStringInfoString(b, "null");
		else
			appendStringInfo(b, INT64_FORMAT, v);
	}
	if (topic != NULL)
		appendStringInfoChar(b, '}');
	appendStringInfoChar(b, '}');
}

static void
append_target_counts(StringInfo b, const KsBatchStats *s)
{
	appendStringInfo(b, "{\"inserted\":" INT64_FORMAT ",\"updated\":" INT64_FORMAT
					 ",\"deleted\":" INT64_FORMAT ",\"stale\":" INT64_FORMAT
					 ",\"superseded\":" INT64_FORMAT ",\"quarantined\":" INT64_FORMAT
					 ",\"duplicates\":" INT64_FORMAT ",\"softDeleted\":" INT64_FORMAT
					 ",\"skipped\":" INT64_FORMAT ",\"revived\":" INT64_FORMAT "}",
					 s->inserted, s->updated, s->deleted, s->stale, s->superseded,
					 s->quarantined, s->duplicates, s->soft_deleted, s->skipped, s->revived);
}

/*
 * Per target table: its counts, as an object keyed by the table's name.
 * Messages routed nowhere count as quarantined under the name they were
 * routed to (or "" when none could be named).
 */
static void
append_targets(StringInfo b, KsBatch *batch)
{
	List	   *names = NIL;
	List	   *counts = NIL;
	ListCell   *lc,
			   *lc2;

	for (int i = 0; i < batch->ntargets; i++)
	{
		names = lappend(names, batch->targets[i].target->qualified_name);
		counts = lappend(counts, &batch->targets[i].stats);
	}
	for (int i = 0; i < batch->nunrouted; i++)
	{
		const char *name = batch->unrouted[i].target_name ? batch->unrouted[i].target_name : "";
		KsBatchStats *s = NULL;

		if (batch->unrouted[i].skipped)
			continue;			/* a debezium tombstone: nothing, nowhere */

		forboth(lc, names, lc2, counts)
			if (strcmp(lfirst(lc), name) == 0)
				s = lfirst(lc2);
		if (s == NULL)
		{
			s = palloc0(sizeof(KsBatchStats));
			names = lappend(names, (char *) name);
			counts = lappend(counts, s);
		}
		s->quarantined++;
	}
	appendStringInfoChar(b, '{');
	forboth(lc, names, lc2, counts)
	{
		if (lc != list_head(names))
			appendStringInfoChar(b, ',');
		escape_json(b, lfirst(lc));
		appendStringInfoChar(b, ':');
		append_target_counts(b, lfirst(lc2));
	}
	appendStringInfoChar(b, '}');
}

/*
 * The batch's progress record, shaped like Spark's StreamingQueryProgress:
 * batchId, numInputRows, rates, durationMs by phase, sources[] with start,
 * end and latest offsets and the lag metrics, and the sink's counts.
 * "commit" is the time spent writing quarantine rows, the marker and the
 * checkpoint, up to (not including) the COMMIT itself.
 */
static char *
progress_json(KsBatch *batch)
{
	StringInfoData b;
	KsBatchStats *s = &batch->stats;
	KsPipeline *p = batch->pipeline;
	TimestampTz now = GetCurrentTimestamp();
	double		fetch_ms = ks_ms_between(batch->fetch_started_at, batch->fetch_ended_at);
	double		commit_ms = ks_ms_between(batch->commit_started_at, now);
	double		process_ms = batch->decode_ms + batch->apply_ms + commit_ms;
	double		since_prev = ks_ms_between(batch->previous_commit_at ? batch->previous_commit_at : batch->fetch_started_at, now);
	int64		behind_sum = 0,
				behind_max = 0;
	int			nknown = 0;
	double		avg_bytes = s->messages > 0 ? (double) s->bytes / s->messages : 0;
	bool		routed = p->targets.target_template != NULL || p->targets.target_map != NIL;
	char	   *target = routed ? (p->targets.target_template ? p->targets.target_template : "the targets map") :
		OidIsValid(p->targets.target) && batch->ntargets > 0 ? batch->targets[0].target->qualified_name : NULL;

	for (int i = 0; i < batch->nparts; i++)
	{
		KsPartition *pt = &batch->parts[i];
		int64		behind;

		if (pt->latest < 0)
			continue;
		behind = Max(0, pt->latest - pt->end);
		behind_sum += behind;
		behind_max = Max(behind_max, behind);
		nknown++;
	}

	initStringInfo(&b);
	appendStringInfo(&b, "{\"id\":" INT64_FORMAT ",\"name\":", p->id);
	escape_json(&b, p->name);
	appendStringInfo(&b, ",\"batchId\":" INT64_FORMAT ",\"worker\":%d,\"timestamp\":",
					 batch->batch_id, batch->worker_index);
	escape_json(&b, timestamptz_to_str(batch->started_at));
	appendStringInfo(&b, ",\"numInputRows\":" INT64_FORMAT
					 ",\"inputRowsPerSecond\":%.1f,\"processedRowsPerSecond\":%.1f",
					 s->messages,
					 since_prev > 0 ? s->messages * 1000.0 / since_prev : 0.0,
					 process_ms > 0 ? s->messages * 1000.0 / process_ms : 0.0);
	appendStringInfo(&b, ",\"durationMs\":{\"fetch\":%.1f,\"decode\":%.1f,\"apply\":%.1f,"
					 "\"commit\":%.1f,\"triggerExecution\":%.1f}",
					 fetch_ms, batch->decode_ms, batch->apply_ms, commit_ms, fetch_ms + process_ms);
	appendStringInfoString(&b, ",\"sources\":[{\"description\":");
	if (p->source.subscribe_pattern)
		escape_json(&b, psprintf("Kafka[SubscribePattern[%s]]", p->source.subscribe_pattern));
	else if (p->source.assign != NIL)
		escape_json(&b, "Kafka[Assign]");
	else
	{
		StringInfoData d;
		ListCell   *lc;

		initStringInfo(&d);
		appendStringInfoString(&d, "Kafka[Subscribe[");
		foreach(lc, p->source.subscribe)
			appendStringInfo(&d, "%s%s", lc == list_head(p->source.subscribe) ? "" : ",", (char *) lfirst(lc));
		appendStringInfoString(&d, "]]");
		escape_json(&b, d.data);
	}
	appendStringInfoString(&b, ",\"startOffset\":");
	append_offsets(&b, batch, 0);
	appendStringInfoString(&b, ",\"endOffset\":");
	append_offsets(&b, batch, 1);
	appendStringInfoString(&b, ",\"latestOffset\":");
	append_offsets(&b, batch, 2);
	appendStringInfo(&b, ",\"numInputRows\":" INT64_FORMAT ",\"metrics\":{"
					 "\"avgOffsetsBehindLatest\":%.1f,\"maxOffsetsBehindLatest\":" INT64_FORMAT
					 ",\"estimatedTotalBytesBehindLatest\":%.0f}}]",
					 s->messages, nknown > 0 ? (double) behind_sum / nknown : 0.0, behind_max,
					 behind_sum * avg_bytes);
	appendStringInfoString(&b, ",\"sink\":{\"description\":");
	if (target)
		escape_json(&b, psprintf("kafka_sink %s into %s",
								 p->targets.mode == KS_MODE_MERGE ? "MERGE" :
								 p->targets.mode == KS_MODE_APPEND ? "INSERT" :
								 p->targets.mode == KS_MODE_HISTORY ? "history" : "batch function", target));
	else
		escape_json(&b, "kafka_sink bronze only");
	appendStringInfo(&b, ",\"numOutputRows\":" INT64_FORMAT ",\"inserted\":" INT64_FORMAT
					 ",\"updated\":" INT64_FORMAT ",\"deleted\":" INT64_FORMAT
					 ",\"stale\":" INT64_FORMAT ",\"superseded\":" INT64_FORMAT
					 ",\"quarantined\":" INT64_FORMAT ",\"duplicates\":" INT64_FORMAT
					 ",\"filtered\":" INT64_FORMAT ",\"softDeleted\":" INT64_FORMAT
					 ",\"skipped\":" INT64_FORMAT ",\"revived\":" INT64_FORMAT,
					 s->inserted + s->updated + s->deleted + s->soft_deleted, s->inserted, s->updated,
					 s->deleted, s->stale, s->superseded, s->quarantined, s->duplicates, s->filtered,
					 s->soft_deleted, s->skipped, s->revived);
	/* merge mode: which strategy wrote the winners (apply_heap.c) */
	if (p->targets.mode == KS_MODE_MERGE && target)
		appendStringInfo(&b, ",\"applyRows\":{\"heap\":" INT64_FORMAT ",\"sql\":" INT64_FORMAT
						 ",\"onConflict\":" INT64_FORMAT "}",
						 s->heap_rows, s->apply_rows - s->heap_rows, s->onconflict_rows);
	if (target)
	{
		appendStringInfoString(&b, ",\"targets\":");
		append_targets(&b, batch);
	}
	appendStringInfoString(&b, "}}");
	return b.data;
}

/*
 * The offsets the filter left out (transform.c), one catalog row per
 * partition that has any, with the filter that ran, so that message_fate
 * tells them without bronze and names that filter after an alter; with
 * revived, the offsets whose upsert brought a marked row back (apply_sql.c)
 * and what each marked row held to order by, so that message_fate tells
 * them revived and names the delete's position they overrode.
 */
static void
record_offsets(KsBatch *batch, bool revived)
{
	int		   *count;
	int64	  **offs;
	List	  **held;

	if ((revived ? batch->stats.revived : batch->stats.filtered) == 0 || batch->row_of == NULL ||
		batch->nparts == 0)
		return;
	count = palloc0(sizeof(int) * batch->nparts);
	offs = palloc0(sizeof(int64 *) * batch->nparts);
	held = palloc0(sizeof(List *) * batch->nparts);
	for (int i = 0; i < batch->all_nmsgs; i++)
	{
		KsRow	   *r = batch->row_of[i];
		int			p;

		if (r == NULL || !(revived ? r->revived != NULL : r->filtered))
			continue;
		/* the message's partition: its part_index, checked */
		p = r->msg->part_index;
		if (p < 0 || p >= batch->nparts || batch->parts[p].partition != r->msg->partition
			|| strcmp(batch->parts[p].topic, r->msg->topic) != 0)
			for (p = 0; p < batch->nparts; p++)
				if (batch->parts[p].partition == r->msg->partition
					&& strcmp(batch->parts[p].topic, r->msg->topic) == 0)
					break;
		if (p == batch->nparts)
			elog(ERROR, "a %s message of topic \"%s\" partition %d is in no partition of the batch",
				 revived ? "revived" : "filtered", r->msg->topic, r->msg->partition);
		if (offs[p] == NULL)
			offs[p] = palloc(sizeof(int64) * batch->all_nmsgs);
		offs[p][count[p]++] = r->msg->offset;
		if (revived)
			held[p] = lappend(held[p], r->revived);
	}
	for (int p = 0; p < batch->nparts; p++)
		if (count[p] > 0 && revived)
			ks_catalog_insert_revived(batch->pipeline->id, batch->batch_id, batch->parts[p].topic,
									  batch->parts[p].partition, offs[p], held[p], count[p]);
		else if (count[p] > 0)
			ks_catalog_insert_filtered(batch->pipeline->id, batch->batch_id, batch->parts[p].topic,
									   batch->parts[p].partition, offs[p], count[p],
									   batch->pipeline->targets.filter);
}

void
ks_write_checkpoint(KsBatch *batch)
{
	StringInfoData ranges;
	bool		first = true;
	KsBatchStats *s = &batch->stats;

	initStringInfo(&ranges);
	appendStringInfoChar(&ranges, '[');
	for (int i = 0; i < batch->nparts; i++)
	{
		KsPartition *p = &batch->parts[i];

		if (p->end == p->committed && !p->loss)
			continue;
		if (!first)
			appendStringInfoChar(&ranges, ',');
		first = false;
		appendStringInfoString(&ranges, "{\"topic\":");
		escape_json(&ranges, p->topic);
		/* after a reset (the topic created again) the range starts over */
		appendStringInfo(&ranges, ",\"partition\":%d,\"start\":%lld,\"end\":%lld,\"messages\":%lld}",
						 p->partition,
						 (long long) (p->loss && p->loss_available < p->committed ? p->loss_available : p->committed),
						 (long long) p->end, (long long) p->messages);
	}
	appendStringInfoChar(&ranges, ']');

	ks_catalog_insert_marker(batch->pipeline->id, batch->batch_id, batch->worker_index, ranges.data,
							 s, batch->started_at, progress_json(batch));
	record_offsets(batch, false);
	record_offsets(batch, true);

	for (int i = 0; i < batch->nparts; i++)
	{
		KsPartition *p = &batch->parts[i];

		if (p->loss)
			ks_catalog_insert_data_loss(batch->pipeline->id, batch->batch_id, p->topic, p->partition,
										p->loss_expected, p->loss_available);
		if (p->end == p->committed)
			continue;
		if (!ks_catalog_advance_offset(batch->pipeline->id, p->topic, p->partition,
									   p->committed, p->end, batch->batch_id))
			ereport(ERROR,
					(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
					 errmsg("the checkpoint of topic \"%s\" partition %d moved during the batch",
							p->topic, p->partition),
					 errdetail("Expected next offset %lld.", (long long) p->committed)));
	}
	record_batch_id(batch);
}

/* ---- batch ids and the stop/drop fence ---- */

/*
 * The fence: a heavyweight lock per pipeline (an advisory lock tag whose
 * fourth field SQL's pg_advisory_* functions never use, so that no session
 * can take it but through kafka_sink).  A batch holds it in SHARE mode from
 * its batch id to its commit, so the batches of several workers overlap;
 * the writer API (kafka_sink._get_pipeline(name, true), under stop, drop,
 * pause, alter, reset_offsets, ...) takes it in EXCLUSIVE mode before it
 * locks the pipeline's row, so that it waits for the batches in flight,
 * and a batch that asks after it waits in the lock's queue (a new SHARE
 * request queues behind a waiting EXCLUSIVE one: no starvation), then sees
 * the committed state.
 */
#define KS_FENCE_FIELD4 0x4B53	/* "KS"; pg_advisory_* use 1 and 2 */

static void
fence_tag(LOCKTAG *tag, int64 pipeline_id)
{
	SET_LOCKTAG_ADVISORY(*tag, MyDatabaseId, (uint32) ((uint64) pipeline_id >> 32),
						 (uint32) pipeline_id, KS_FENCE_FIELD4);
}

/*
 * Batch ids are handed out in shared memory, one counter per pipeline with
 * a running worker: unique without a row lock held for the batch.  The
 * floor is the pipeline's last_batch_id, which every batch raises to its
 * own id as its last catalog write (greatest(): batches of several
 * workers commit in any order).  An entry is only reused once no worker
 * of its pipeline holds a slot, so the next worker's floor, read after
 * they all exited, covers every id they committed.  An id taken by a batch
 * that rolled back may be taken again, or not: ids are unique among
 * committed batches and increase per worker; a rolled-back id is given
 * back when it is still the last (give_back_batch_id), so a one-worker
 * pipeline's ids stay contiguous, while with several workers an id given
 * up under another worker's later one stays a gap.
 */

/* true when a worker slot of the pipeline is claimed; under ks_shared->lock */
static bool
pipeline_has_slot(Oid database, int64 pipeline_id)
{
	for (int i = 0; i < ks_shared->nslots; i++)
		if (ks_shared->slots[i].in_use && ks_shared->slots[i].database == database &&
			ks_shared->slots[i].pipeline_id == pipeline_id)
			return true;
	return false;
}

/*
 * The id this process handed out in the open transaction: given back when
 * the transaction aborts and no other worker took a later one meanwhile,
 * so that the ids of a one-worker pipeline stay contiguous through
 * rollbacks (a crash resets shared memory, and the floor does the same).
 */
static int64 open_pipeline_id = 0;
static int64 open_batch_id = 0;

static void
give_back_batch_id(XactEvent event, void *arg)
{
	(void) arg;
	if (open_batch_id == 0)
		return;
	if ((event == XACT_EVENT_ABORT || event == XACT_EVENT_PARALLEL_ABORT) && ks_shared != NULL)
	{
		int			n = Max(ks_max_workers, 1);

		LWLockAcquire(ks_shared->lock, LW_EXCLUSIVE);
		for (int i = 0; i < n; i++)
			if (ks_batch_ids[i].database == MyDatabaseId &&
				ks_batch_ids[i].pipeline_id == open_pipeline_id && ks_batch_ids[i].last == open_batch_id)
				ks_batch_ids[i].last--;
		LWLockRelease(ks_shared->lock);
	}
	if (event == XACT_EVENT_ABORT || event == XACT_EVENT_PARALLEL_ABORT ||
		event == XACT_EVENT_COMMIT || event == XACT_EVENT_PARALLEL_COMMIT ||
		event == XACT_EVENT_PREPARE)
		open_batch_id = 0;
}

static int64
hand_out_batch_id(int64 pipeline_id, int64 floor)
{
	static bool registered = false;
	KsBatchIdEntry *e = NULL;
	int			n = Max(ks_max_workers, 1);
	int64		id;

	LWLockAcquire(ks_shared->lock, LW_EXCLUSIVE);
	for (int i = 0; i < n && e == NULL; i++)
		if (ks_batch_ids[i].database == MyDatabaseId && ks_batch_ids[i].pipeline_id == pipeline_id)
			e = &ks_batch_ids[i];
	for (int i = 0; i < n && e == NULL; i++)
		if (ks_batch_ids[i].pipeline_id == 0 ||
			!pipeline_has_slot(ks_batch_ids[i].database, ks_batch_ids[i].pipeline_id))
		{
			e = &ks_batch_ids[i];
			e->database = MyDatabaseId;
			e->pipeline_id = pipeline_id;
			e->last = 0;
		}
	if (e == NULL)
	{
		LWLockRelease(ks_shared->lock);
		/* cannot happen: a pipeline with a worker has a slot */
		ereport(ERROR,
				(errcode(ERRCODE_INTERNAL_ERROR),
				 errmsg("no free batch id counter for pipeline %lld", (long long) pipeline_id)));
	}
	id = Max(e->last, floor) + 1;
	e->last = id;
	LWLockRelease(ks_shared->lock);
	if (!registered)
	{
		RegisterXactCallback(give_back_batch_id, NULL);
		registered = true;
	}
	open_pipeline_id = pipeline_id;
	open_batch_id = id;
	return id;
}

/*
 * Takes the fence in SHARE mode and the next batch id; fails when the
 * pipeline is no longer running, so that no batch commits after stop() or
 * drop_pipeline() returned, and when alter_pipeline() gave it a new
 * generation since the worker loaded its definition, so that a new
 * delete_mode, write_mode or filter applies from the first batch after
 * the alter commits (the worker exits quietly; the scheduler starts it on
 * the new definition).  The pipeline's row is not locked here.
 */
int64
ks_next_batch_id(KsBatch *batch)
{
	LOCKTAG		tag;
	int64		floor;

	fence_tag(&tag, batch->pipeline->id);
	(void) LockAcquire(&tag, ShareLock, false, false);
	/* read committed: a fresh snapshot, after the lock */
	if (!ks_catalog_batch_id_floor(batch->pipeline->id, batch->pipeline->generation, &floor))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("pipeline \"%s\" is no longer running", batch->pipeline->name),
				 errdetail("It was stopped, dropped or altered since the worker loaded its definition.")));
	return hand_out_batch_id(batch->pipeline->id, floor);
}

/*
 * The batch's last catalog write: raises last_batch_id to the batch's id,
 * checking once more that the pipeline runs.
 */
static void
record_batch_id(KsBatch *batch)
{
	if (!ks_catalog_record_batch_id(batch->pipeline->id, batch->batch_id))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("pipeline \"%s\" is no longer running", batch->pipeline->name)));
}

/*
 * kafka_sink._fence_batches(pipeline_id bigint): the writer's side of the
 * fence, EXCLUSIVE until the end of the transaction.  Only the API's
 * bodies call it (the catalog-write level is raised there) or a superuser,
 * so that an admin cannot hold up every pipeline from an idle transaction
 * but through the API (as a FOR UPDATE of the pipeline's row could before).
 */
PG_FUNCTION_INFO_V1(kafka_sink_fence_batches);

Datum
kafka_sink_fence_batches(PG_FUNCTION_ARGS)
{
	LOCKTAG		tag;
	int64		id;

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("pipeline id cannot be null")));
	id = PG_GETARG_INT64(0);
	if (id <= 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("pipeline id must be positive")));
	if (!ks_catalog_writes_allowed() && !superuser())
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("kafka_sink._fence_batches can only be called by the kafka_sink API"),
				 errhint("Call kafka_sink.stop, kafka_sink.alter_pipeline or another API function.")));
	fence_tag(&tag, id);
	(void) LockAcquire(&tag, ExclusiveLock, false, false);
	PG_RETURN_VOID();
}

/*
 * Retention of batch markers (and their progress records): a marker goes
 * once it is both outside the last kafka_sink.keep_batches batches and
 * older than kafka_sink.keep_batches_for.  Only old rows are deleted, so
 * this never waits on the rows ingestion writes.
 */
void
ks_prune_batches(KsBatch *batch)
{
	ks_catalog_prune_batches(batch->pipeline->id, batch->batch_id - ks_keep_batches, ks_keep_batches_for_s);
}

