/*-------------------------------------------------------------------------
 *
 * apply.c
 *		The one transaction of a micro-batch: decode, the filter and
 *		computed columns (transform.c), bronze, dedupe, reduce and apply
 *		to each target through its strategy, then quarantine rows, the
 *		batch marker and the new offsets.
 *
 * The caller (worker.c) has opened the transaction; everything here
 * commits or rolls back with it.
 *
 * The reduce rule, which makes the MERGE deterministic: per key, the row
 * with the greatest order_column wins (NULL is lowest); among equal order
 * values the later message wins, which within a partition is the higher
 * offset.  Across batches the MERGE applies the same rule with
 * "source.order >= target.order", so the result does not depend on where
 * batch boundaries fall (reduce.c, statements.c).
 *
 * Owns: the order of the stages and the loop over a batch's targets;
 * which strategy applies a target (ks_apply_strategy_for).  Must not: hold
 * SQL text (statements.c, catalog.c) or know how a strategy writes.
 *
 *-------------------------------------------------------------------------
 */
#include "kafka_sink.h"
#include "pipeline.h"
#include "guc.h"
#include "route.h"
#include "target.h"
#include "apply.h"
#include "apply_heap.h"
#include "apply_sql.h"
#include "bronze.h"
#include "cdc_guard.h"
#include "checkpoint.h"
#include "dedupe.h"
#include "history.h"
#include "hops.h"
#include "quarantine.h"
#include "reduce.h"
#include "transform.h"
#include "decode.h"

#include "utils/acl.h"
#include "utils/timestamp.h"

/*
 * The strategy that applies a target: with kafka_sink.apply_strategy =
 * auto, a merge-mode target goes to the heap strategy, which checks in its
 * begin() (with the table locked) whether it can write the target exactly
 * as the MERGE would, and hands everything else to the SQL strategy; with
 * on_conflict, to the SQL strategy's INSERT ... ON CONFLICT and UPDATE.  A
 * Citus table (whatever the setting and mode) goes to ks_apply_citus: the
 * heap strategy would write the coordinator's empty shell table.
 * A soft-delete pipeline, and one whose write_mode is not upsert, never goes
 * to the heap or on_conflict strategy but to the MERGE (docs/design/apply.md,
 * "Soft deletes", "Write modes").
 */
const KsApplyStrategy *
ks_apply_strategy_for(KsPipeline *p, KsTarget *t)
{
	if (t != NULL && t->citus != KS_CITUS_NONE)
		return &ks_apply_citus;
	if (ks_apply_strategy == KS_APPLY_STRATEGY_AUTO && p->targets.mode == KS_MODE_MERGE &&
		!(t != NULL && t->soft) && !p->targets.soft_delete &&
		p->targets.write_mode == KS_WRITE_UPSERT)
		return &ks_apply_heap;
	if (ks_apply_strategy == KS_APPLY_STRATEGY_ON_CONFLICT && p->targets.mode == KS_MODE_MERGE &&
		p->targets.write_mode == KS_WRITE_UPSERT)
		return &ks_apply_onconflict;
	return &ks_apply_sql;
}

/*
 * Appends a target to the batch, with room for nmsgs messages (the caller
 * fills msgs and rows[].msg).  batch->targets has room for every message
 * (a target takes at least one), plus one.
 */
KsBatchTarget *
ks_batch_add_target(KsBatch *batch, KsTarget *t, int nmsgs)
{
	KsBatchTarget *bt = &batch->targets[batch->ntargets++];

	bt->target = t;
	bt->mode = batch->pipeline->targets.mode;
	bt->strategy = ks_apply_strategy_for(batch->pipeline, t);
	bt->msgs = palloc(sizeof(KsMessage *) * Max(nmsgs, 1));
	bt->nmsgs = 0;
	bt->rows = palloc0(sizeof(KsRow) * Max(nmsgs, 1));
	return bt;
}

/*
 * The targets of the batch, each opened as it is now.  Without routing,
 * the pipeline's target takes every message (none for a bronze-only
 * pipeline); with routing, route.c sends each message to its table.
 */
static void
open_targets(KsBatch *batch)
{
	KsPipeline *p = batch->pipeline;

	batch->ntargets = 0;
	batch->targets = palloc0(sizeof(KsBatchTarget) * (batch->nmsgs + 1));
	batch->row_of = palloc0(sizeof(KsRow *) * Max(batch->nmsgs, 1));
	batch->all_msgs = batch->msgs;
	batch->all_nmsgs = batch->nmsgs;
	if (ks_routing_enabled(p))
		ks_route_batch(batch);
	else if (OidIsValid(p->targets.target))
	{
		KsBatchTarget *bt = ks_batch_add_target(batch, ks_target_open(p), batch->nmsgs);

		for (int i = 0; i < batch->nmsgs; i++)
		{
			bt->msgs[bt->nmsgs] = batch->msgs[i];
			bt->rows[bt->nmsgs].msg = batch->msgs[i];
			batch->row_of[i] = &bt->rows[bt->nmsgs++];
		}
	}
}

/*
 * Makes target i the one the modules below apply.c work on: its target,
 * rows and messages.
 */
static void
use_target(KsBatch *batch, int i)
{
	batch->target = batch->targets[i].target;
	batch->rows = batch->targets[i].rows;
	batch->msgs = batch->targets[i].msgs;
	batch->nmsgs = batch->targets[i].nmsgs;
}

/* Back to the whole batch after use_target. */
static void
use_all(KsBatch *batch)
{
	batch->target = NULL;
	batch->rows = NULL;
	batch->msgs = batch->all_msgs;
	batch->nmsgs = batch->all_nmsgs;
}

/* counts after minus counts before: a target's share */
static void
stats_add_diff(KsBatchStats *to, const KsBatchStats *after, const KsBatchStats *before)
{
	to->inserted += after->inserted - before->inserted;
	to->updated += after->updated - before->updated;
	to->deleted += after->deleted - before->deleted;
	to->stale += after->stale - before->stale;
	to->superseded += after->superseded - before->superseded;
	to->soft_deleted += after->soft_deleted - before->soft_deleted;
	to->skipped += after->skipped - before->skipped;
	to->revived += after->revived - before->revived;
	to->quarantined += after->quarantined - before->quarantined;
	to->duplicates += after->duplicates - before->duplicates;
	to->apply_rows += after->apply_rows - before->apply_rows;
	to->heap_rows += after->heap_rows - before->heap_rows;
	to->onconflict_rows += after->onconflict_rows - before->onconflict_rows;
}

/* The rows of sel not applied in an earlier try (next_candidate 0), into sel. */
static int
not_tried(KsBatch *batch, int *sel, int nsel)
{
	int			n = 0;

	for (int i = 0; i < nsel; i++)
		if (batch->rows[sel[i]].next_candidate == 0)
			sel[n++] = sel[i];
	return n;
}

/*
 * Applies the winners of sel not applied yet (the CDC guards first), in
 * key order; returns how many failed through their own fault.
 */
static int
upsert_winners(KsBatch *batch, KsBatchTarget *bt, void *state, KsKeyHash *kh, int *sel, int nsel)
{
	int			failed;

	nsel = not_tried(batch, sel, nsel);
	if (bt->target->cdc)
		nsel = ks_cdc_drop_stale(batch, sel, nsel);
	ks_sort_by_key(batch, kh, sel, nsel);
	batch->stats.apply_rows += nsel;
	failed = bt->strategy->upsert_rows(batch, state, sel, nsel);
	for (int i = 0; i < nsel; i++)
		batch->rows[sel[i]].next_candidate = 1;
	return failed;
}

/*
 * Runs the tombstones of dels not run yet and records the change events'
 * positions; returns how many failed through their own fault.
 */
static int
apply_deletes(KsBatch *batch, KsBatchTarget *bt, void *state, int *dels, int ndels)
{
	int			failed;

	ndels = not_tried(batch, dels, ndels);
	if (ndels == 0)
		return 0;
	batch->stats.apply_rows += ndels;
	failed = bt->strategy->delete_rows(batch, state, dels, ndels);
	for (int i = 0; i < ndels; i++)
		batch->rows[dels[i]].next_candidate = 1;
	if (bt->target->cdc)
		ks_cdc_record_deletes(batch, dels, ndels);
	return failed;
}

/*
 * Merge mode: per key the winner of the reduce, tombstones first.  A
 * winner (or tombstone) that fails through its own fault is quarantined,
 * and the next best message of its key (if any) competes again.
 */
static void
apply_merge(KsBatch *batch, KsBatchTarget *bt, void *state)
{
	KsKeyHash  *kh = ks_keyhash_create(bt->target);
	int		   *sel = palloc(sizeof(int) * Max(batch->nmsgs, 1));
	int		   *dels = palloc(sizeof(int) * Max(batch->nmsgs, 1));
	int			nsel;
	int			ndels;
	bool		more;
	int			truncate;

	if (bt->target->cdc)
		ks_cdc_truncates(batch);
	for (;;)
	{
		nsel = ks_reduce(batch, kh, sel, dels, &ndels, &more, &truncate);

		/*
		 * tombstones first, so that a re-insert after one lands; a key
		 * whose tombstone failed has new winners: reduce again
		 */
		if (apply_deletes(batch, bt, state, dels, ndels) > 0)
			continue;
		/* apply only winners not applied in an earlier round */
		if (upsert_winners(batch, bt, state, kh, sel, nsel) == 0)
			break;
	}
}

/*
 * Merge mode with delete_mode soft: the batch in segment rounds (reduce.c:
 * per key up to its first delete, up to the first truncate), each with its
 * winners first, then its deletes (an UPDATE marking the row the winner
 * wrote), then its truncate.  A winner or delete that fails through its
 * own fault is quarantined and the round reduced again, as apply_merge
 * does.
 */
static void
apply_merge_soft(KsBatch *batch, KsBatchTarget *bt, void *state)
{
	KsKeyHash  *kh = ks_keyhash_create(bt->target);
	int		   *sel = palloc(sizeof(int) * Max(batch->nmsgs, 1));
	int		   *dels = palloc(sizeof(int) * Max(batch->nmsgs, 1));
	bool		more = true;

	if (bt->target->cdc)
		ks_cdc_truncates(batch);	/* on_truncate fail and ignore */
	while (more)
	{
		int			truncate;

		for (;;)
		{
			int			ndels;
			int			nsel = ks_reduce(batch, kh, sel, dels, &ndels, &more, &truncate);

			if (upsert_winners(batch, bt, state, kh, sel, nsel) > 0)
				continue;		/* the failed keys' next best compete */
			if (apply_deletes(batch, bt, state, dels, ndels) == 0)
				break;
		}
		if (truncate >= 0)
		{
			ks_cdc_truncate_row(batch, truncate);
			batch->rows[truncate].soft_done = true;
			more = true;		/* what came after it, if anything */
		}
		for (int i = 0; i < batch->nmsgs; i++)
			if (batch->rows[i].soft_seen)
				batch->rows[i].soft_done = true;
	}
}

/* Applies the decoded rows of one target through its strategy. */
static void
apply_target(KsBatch *batch, KsBatchTarget *bt)
{
	KsPipeline *p = batch->pipeline;
	KsBatchStats *s = &batch->stats;
	int64		ins0 = s->inserted,
				upd0 = s->updated,
				skip0 = s->skipped;

	if (p->contract.event_id && batch->nmsgs > 0)
		ks_mark_duplicates(batch);
	if (batch->nmsgs > 0)
	{
		void	   *state = bt->strategy->begin(batch, bt);

		if (bt->mode == KS_MODE_MERGE && bt->target->soft)
			apply_merge_soft(batch, bt, state);
		else if (bt->mode == KS_MODE_MERGE)
			apply_merge(batch, bt, state);
		else if (bt->mode == KS_MODE_HISTORY)
		{
			/* every event, folded into the versions of its key (history.c) */
			int		   *sel = palloc(sizeof(int) * Max(batch->nmsgs, 1));
			int			nsel;

			/* truncates: fail, ignore, or apply (recorded, then folded in as a delete of every key) */
			batch->history_truncate = NULL;
			if (bt->target->cdc && batch->pipeline->contract.on_truncate == KS_TRUNCATE_APPLY)
				batch->history_truncate = ks_cdc_history_truncates(batch);
			else if (bt->target->cdc)
				ks_cdc_truncates(batch);
			nsel = ks_history_rows(batch, sel);

			batch->stats.apply_rows += nsel;
			if (nsel > 0 || batch->history_truncate)
				bt->strategy->upsert_rows(batch, state, sel, nsel);
			batch->history_truncate = NULL;
		}
		else
		{
			int		   *sel = palloc(sizeof(int) * Max(batch->nmsgs, 1));
			int			nsel = 0;

			for (int i = 0; i < batch->nmsgs; i++)
				if (batch->rows[i].reason == KS_OK && !batch->rows[i].duplicate &&
					!batch->rows[i].filtered)
					sel[nsel++] = i;
			if (bt->mode == KS_MODE_APPEND)
				bt->strategy->insert_rows(batch, state, sel, nsel);
			else
				bt->strategy->call_function(batch, state, sel, nsel);
		}
		bt->strategy->end(batch, state);
		if (p->contract.event_id)
			ks_record_event_ids(batch);
	}

	for (int i = 0; i < batch->nmsgs; i++)
	{
		KsRow	   *r = &batch->rows[i];

		if (r->reason == KS_OK && bt->mode == KS_MODE_MERGE && !r->winner &&
			!r->is_delete && !r->duplicate && !r->filtered)
			s->superseded++;
	}
	if (bt->mode == KS_MODE_MERGE)
	{
		int64		winners = 0;

		for (int i = 0; i < batch->nmsgs; i++)
			if (batch->rows[i].winner && batch->rows[i].reason == KS_OK)
				winners++;
		/*
		 * insert_only: a first event that finds an earlier one stored is
		 * superseded by it, not stale
		 */
		if (bt->target != NULL && bt->target->write_mode == KS_WRITE_INSERT_ONLY)
			s->superseded += Max(0, winners - (s->inserted - ins0) - (s->updated - upd0));
		else
			s->stale += Max(0, winners - (s->inserted - ins0) - (s->updated - upd0) - (s->skipped - skip0));
	}
}

/*
 * Decodes and applies the batch's messages to its targets: decode, the
 * batch id (take_batch_id: a batch of the worker, not a replay) and
 * bronze, then per target producer duplicates and the strategy's apply.
 * Row reasons are left on each target's rows; counts in batch->stats.
 * Runs in the caller's transaction.
 */
void
ks_stage_and_apply(KsBatch *batch, bool take_batch_id)
{
	KsPipeline *p = batch->pipeline;
	KsBatchStats *s = &batch->stats;
	TimestampTz t0;

	for (int i = 0; i < batch->nmsgs; i++)
		s->bytes += batch->msgs[i]->value_len + batch->msgs[i]->key_len;
	s->messages = batch->nmsgs;

	/*
	 * Decoding needs no batch id, so it runs before the batch id is taken:
	 * taking it waits while a stop, drop or alter holds the pipeline's
	 * fence (checkpoint.c); several workers' batches hold it together.
	 */
	t0 = GetCurrentTimestamp();
	ks_hops_begin_batch(batch->msgs, batch->nmsgs);
	open_targets(batch);
	for (int i = 0; i < batch->ntargets; i++)
	{
		ks_decode_batch(batch->targets[i].target, p, batch->targets[i].rows, batch->targets[i].nmsgs);
		/* filter and computed columns, before any strategy sees the rows */
		ks_transform_batch(batch, &batch->targets[i]);
	}
	batch->decode_ms = ks_ms_between(t0, GetCurrentTimestamp());
	ks_fault(KS_FAULT_AFTER_DECODE);
	if (take_batch_id)
		batch->batch_id = ks_next_batch_id(batch);
	t0 = GetCurrentTimestamp();
	if (take_batch_id && OidIsValid(p->targets.bronze) && batch->nmsgs > 0)
		ks_write_bronze(batch);
	/* in the order of their names, so that workers lock tables alike */
	for (int i = 0; i < batch->ntargets; i++)
	{
		KsBatchStats before = batch->stats;

		use_target(batch, i);
		apply_target(batch, &batch->targets[i]);
		stats_add_diff(&batch->targets[i].stats, &batch->stats, &before);
	}
	use_all(batch);
	if (batch->ntargets > 0)
		batch->apply_ms = ks_ms_between(t0, GetCurrentTimestamp());
}

/*
 * Applies a filled batch inside the caller's transaction: batch id, the
 * data, quarantine rows, the batch marker and the checkpoint.
 */
void
ks_apply_batch(KsBatch *batch)
{
	ks_stage_and_apply(batch, true);
	ks_fault(KS_FAULT_AFTER_MERGE);
	batch->commit_started_at = GetCurrentTimestamp();
	for (int i = 0; i < batch->ntargets; i++)
	{
		KsBatchStats before = batch->stats;

		use_target(batch, i);
		ks_quarantine_rows(batch);
		stats_add_diff(&batch->targets[i].stats, &batch->stats, &before);
	}
	/* messages routed nowhere: their rows name the target they missed */
	if (batch->nunrouted > 0)
	{
		batch->target = NULL;
		batch->rows = batch->unrouted;
		batch->nmsgs = batch->nunrouted;
		ks_quarantine_rows(batch);
	}
	use_all(batch);
	ks_write_checkpoint(batch);
	if (batch->batch_id % 64 == 0)
		ks_prune_batches(batch);
	ks_fault(KS_FAULT_BEFORE_COMMIT);
}
