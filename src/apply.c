/*-------------------------------------------------------------------------
 *
 * apply.c
 *		The one transaction of a micro-batch: decode, bronze, dedupe,
 *		reduce and apply to each target through its strategy, then
 *		quarantine rows, the batch marker and the new offsets.
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
#include "apply.h"
#include "apply_sql.h"
#include "bronze.h"
#include "checkpoint.h"
#include "dedupe.h"
#include "quarantine.h"
#include "reduce.h"
#include "decode.h"

#include "utils/acl.h"
#include "utils/timestamp.h"

/* The strategy that applies a target: the SQL path, the only one today. */
const KsApplyStrategy *
ks_apply_strategy_for(KsPipeline *p, KsTarget *t)
{
	(void) p;
	(void) t;
	return &ks_apply_sql;
}

/*
 * The targets of the batch, each opened as it is now and decoded.  One
 * today (the pipeline's target), none for a bronze-only pipeline.
 */
static void
open_targets(KsBatch *batch)
{
	KsPipeline *p = batch->pipeline;

	batch->ntargets = 0;
	batch->targets = palloc0(sizeof(KsBatchTarget) * 1);
	if (OidIsValid(p->target))
	{
		KsBatchTarget *bt = &batch->targets[batch->ntargets++];

		bt->target = ks_target_open(p);
		bt->mode = p->mode;
		bt->strategy = ks_apply_strategy_for(p, bt->target);
		bt->rows = palloc0(sizeof(KsRow) * Max(batch->nmsgs, 1));
		for (int i = 0; i < batch->nmsgs; i++)
			bt->rows[i].msg = batch->msgs[i];
	}
}

/* Makes target i the one the modules below apply.c work on. */
static void
use_target(KsBatch *batch, int i)
{
	batch->target = batch->targets[i].target;
	batch->rows = batch->targets[i].rows;
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

	for (;;)
	{
		int			failed;
		int			n = 0;

		nsel = ks_reduce(batch, kh, sel, dels, &ndels);
		/* tombstones not run in an earlier round */
		for (int i = 0; i < ndels; i++)
			if (batch->rows[dels[i]].next_candidate == 0)
				dels[n++] = dels[i];
		ndels = n;
		n = 0;
		if (ndels > 0)
		{
			/* tombstones first, so that a re-insert after one lands */
			failed = bt->strategy->delete_rows(batch, state, dels, ndels);
			for (int i = 0; i < ndels; i++)
				batch->rows[dels[i]].next_candidate = 1;
			/* a key whose tombstone failed has new winners: reduce again */
			if (failed > 0)
				continue;
		}
		/* apply only winners not applied in an earlier round */
		for (int i = 0; i < nsel; i++)
			if (batch->rows[sel[i]].next_candidate == 0)
				sel[n++] = sel[i];
		nsel = n;
		ks_sort_by_key(batch, kh, sel, nsel);
		failed = bt->strategy->upsert_rows(batch, state, sel, nsel);
		for (int i = 0; i < nsel; i++)
			batch->rows[sel[i]].next_candidate = 1;
		if (failed == 0)
			break;
	}
}

/* Applies the decoded rows of one target through its strategy. */
static void
apply_target(KsBatch *batch, KsBatchTarget *bt)
{
	KsPipeline *p = batch->pipeline;
	KsBatchStats *s = &batch->stats;
	int64		ins0 = s->inserted,
				upd0 = s->updated;

	if (p->event_id && batch->nmsgs > 0)
		ks_mark_duplicates(batch);
	if (batch->nmsgs > 0)
	{
		void	   *state = bt->strategy->begin(batch, bt);

		if (bt->mode == KS_MODE_MERGE)
			apply_merge(batch, bt, state);
		else
		{
			int		   *sel = palloc(sizeof(int) * Max(batch->nmsgs, 1));
			int			nsel = 0;

			for (int i = 0; i < batch->nmsgs; i++)
				if (batch->rows[i].reason == KS_OK && !batch->rows[i].duplicate)
					sel[nsel++] = i;
			if (bt->mode == KS_MODE_APPEND)
				bt->strategy->insert_rows(batch, state, sel, nsel);
			else
				bt->strategy->call_function(batch, state, sel, nsel);
		}
		bt->strategy->end(batch, state);
		if (p->event_id)
			ks_record_event_ids(batch);
	}

	for (int i = 0; i < batch->nmsgs; i++)
	{
		KsRow	   *r = &batch->rows[i];

		if (r->reason == KS_OK && bt->mode == KS_MODE_MERGE && !r->winner &&
			!r->is_delete && !r->duplicate)
			s->superseded++;
	}
	if (bt->mode == KS_MODE_MERGE)
	{
		int64		winners = 0;

		for (int i = 0; i < batch->nmsgs; i++)
			if (batch->rows[i].winner && batch->rows[i].reason == KS_OK)
				winners++;
		s->stale += Max(0, winners - (s->inserted - ins0) - (s->updated - upd0));
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
	open_targets(batch);
	for (int i = 0; i < batch->ntargets; i++)
		ks_decode_batch(batch->targets[i].target, p, batch->targets[i].rows, batch->nmsgs);
	batch->decode_ms = ks_ms_between(t0, GetCurrentTimestamp());
	ks_fault(KS_FAULT_AFTER_DECODE);
	if (take_batch_id)
		batch->batch_id = ks_next_batch_id(batch);
	t0 = GetCurrentTimestamp();
	if (take_batch_id && OidIsValid(p->bronze) && batch->nmsgs > 0)
		ks_write_bronze(batch);
	for (int i = 0; i < batch->ntargets; i++)
	{
		use_target(batch, i);
		apply_target(batch, &batch->targets[i]);
	}
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
		use_target(batch, i);
		ks_quarantine_rows(batch);
	}
	ks_write_checkpoint(batch);
	if (batch->batch_id % 64 == 0)
		ks_prune_batches(batch);
	ks_fault(KS_FAULT_BEFORE_COMMIT);
}
