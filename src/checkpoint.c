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
 * id).  Must not: decide what the batch applies.
 *
 *-------------------------------------------------------------------------
 */
#include "kafka_sink.h"
#include "checkpoint.h"
#include "catalog.h"
#include "apply.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "lib/stringinfo.h"
#include "utils/builtins.h"
#include "utils/json.h"
#include "utils/timestamp.h"

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
					 ",\"duplicates\":" INT64_FORMAT "}",
					 s->inserted, s->updated, s->deleted, s->stale, s->superseded,
					 s->quarantined, s->duplicates);
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
	bool		routed = p->target_template != NULL || p->target_map != NIL;
	char	   *target = routed ? (p->target_template ? p->target_template : "the targets map") :
		OidIsValid(p->target) && batch->ntargets > 0 ? batch->targets[0].target->qualified_name : NULL;

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
	if (p->subscribe_pattern)
		escape_json(&b, psprintf("Kafka[SubscribePattern[%s]]", p->subscribe_pattern));
	else if (p->assign != NIL)
		escape_json(&b, "Kafka[Assign]");
	else
	{
		StringInfoData d;
		ListCell   *lc;

		initStringInfo(&d);
		appendStringInfoString(&d, "Kafka[Subscribe[");
		foreach(lc, p->subscribe)
			appendStringInfo(&d, "%s%s", lc == list_head(p->subscribe) ? "" : ",", (char *) lfirst(lc));
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
								 p->mode == KS_MODE_MERGE ? "MERGE" :
								 p->mode == KS_MODE_APPEND ? "INSERT" : "batch function", target));
	else
		escape_json(&b, "kafka_sink bronze only");
	appendStringInfo(&b, ",\"numOutputRows\":" INT64_FORMAT ",\"inserted\":" INT64_FORMAT
					 ",\"updated\":" INT64_FORMAT ",\"deleted\":" INT64_FORMAT
					 ",\"stale\":" INT64_FORMAT ",\"superseded\":" INT64_FORMAT
					 ",\"quarantined\":" INT64_FORMAT ",\"duplicates\":" INT64_FORMAT,
					 s->inserted + s->updated + s->deleted, s->inserted, s->updated, s->deleted,
					 s->stale, s->superseded, s->quarantined, s->duplicates);
	if (target)
	{
		appendStringInfoString(&b, ",\"targets\":");
		append_targets(&b, batch);
	}
	appendStringInfoString(&b, "}}");
	return b.data;
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
}

/*
 * Takes the next batch id.  This locks the pipeline's row until commit, and
 * fails when the pipeline is no longer running, so that no batch commits
 * after stop() or drop_pipeline() returned.
 */
int64
ks_next_batch_id(KsBatch *batch)
{
	int64		batch_id;

	if (!ks_catalog_take_batch_id(batch->pipeline->id, &batch_id))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("pipeline \"%s\" is no longer running", batch->pipeline->name)));
	return batch_id;
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

