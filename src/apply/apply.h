/*-------------------------------------------------------------------------
 *
 * apply.h
 *		The batch and its one transaction (apply.c): the batch, its list
 *		of targets, and the interface of the apply strategies.
 *
 * A batch is the messages a worker fetched, applied in one transaction to
 * a list of targets (the pipeline's one target, or one per table its
 * messages are routed to, route.h), each with its own mapping, key, order
 * column, strategy and statements.  A strategy applies rows chosen by the
 * strategy-agnostic code in apply.c (the reduce, the bisection of faults
 * is the strategy's own): the SQL strategy (apply_sql.c) runs the MERGE,
 * DELETE, INSERT or batch function through SPI; the heap strategy
 * (apply_heap.c, as pglogical has beside its SPI apply) writes the same
 * rows straight through the heap and its indexes; ks_apply_strategy_for()
 * chooses one per target.
 *
 * Owns: KsBatch, KsBatchTarget, KsBatchStats, the KsApplyStrategy
 * interface and apply.c's declarations.  Must not: declare a strategy's
 * own exports (apply_sql.h, apply_heap.h) or another module's (reduce.h,
 * checkpoint.h, ...); the worker's state is worker.h's.
 *
 *-------------------------------------------------------------------------
 */
#ifndef KS_APPLY_H
#define KS_APPLY_H

#include "kafka_sink.h"
#include "pipeline.h"
#include "decode.h"
#include "errclass.h"

typedef struct KsBatchStats
{
	int64		messages;
	int64		inserted;
	int64		updated;
	int64		deleted;
	int64		stale;
	int64		superseded;
	int64		quarantined;
	int64		duplicates;
	int64		filtered;		/* left out by the pipeline's filter */
	int64		soft_deleted;	/* delete_mode soft: rows marked deleted */
	int64		skipped;		/* write_mode update_only: keys not in the target */
	int64		revived;		/* delete_mode soft: marked rows an upsert brought
								 * back (counted in updated too) */
	int64		bytes;
	/*
	 * Merge mode: rows (winners and tombstones) handed to the target's
	 * strategy, and of those the ones the heap strategy applied itself and
	 * the winners the on_conflict strategy wrote (the rest ran through the
	 * SQL strategy's MERGE and DELETE); shown in the progress record as
	 * sink.applyRows, so that a test can tell which way a batch went.
	 */
	int64		apply_rows;
	int64		heap_rows;
	int64		onconflict_rows;
} KsBatchStats;

typedef struct KsApplyStrategy KsApplyStrategy;

/*
 * One target of a batch: what it is, how it is written, its messages and
 * their decoded rows.  Without routing the one target takes every message
 * of the batch; with routing (route.c) each message goes to one target, or
 * to none (batch->unrouted).
 */
typedef struct KsBatchTarget
{
	KsTarget   *target;			/* columns, key, order column, mapping */
	KsMode		mode;			/* merge, append or the batch function */
	const KsApplyStrategy *strategy;
	KsMessage **msgs;			/* the target's messages, in batch order */
	int			nmsgs;
	KsRow	   *rows;			/* one per message of msgs */
	KsBatchStats stats;			/* this target's share of batch->stats */
} KsBatchTarget;

typedef struct KsBatch
{
	KsPipeline *pipeline;
	int			worker_index;
	KsPartition *parts;
	int			nparts;
	KsMessage **msgs;
	int			nmsgs;
	KsBatchTarget *targets;		/* none for a bronze-only pipeline; with
								 * routing, in the order of their names */
	int			ntargets;
	KsRow	   *unrouted;		/* routing: messages no target takes, with
								 * their reason (no_target, target_refused) */
	int			nunrouted;
	KsRow	  **row_of;			/* per message of msgs: its row, wherever it is */
	/*
	 * The target being applied: targets[i].target, .rows, and as msgs and
	 * nmsgs the target's messages, while apply.c works on target i (the
	 * modules below it read these); all_msgs and all_nmsgs keep the batch's.
	 */
	KsTarget   *target;
	KsRow	   *rows;
	char	   *history_truncate;	/* mode history: the earliest position of
									 * the target's truncates in the batch,
									 * or NULL (history.c) */
	KsMessage **all_msgs;
	int			all_nmsgs;
	TimestampTz started_at;
	int64		batch_id;
	KsBatchStats stats;
	/* timing, for the progress record */
	TimestampTz previous_commit_at;
	TimestampTz fetch_started_at;
	TimestampTz fetch_ended_at;
	double		decode_ms;
	double		apply_ms;
	TimestampTz commit_started_at;
} KsBatch;

/*
 * An apply strategy.  begin() returns its state for the target (prepared
 * statements, settings); the row functions apply the rows given (indexes
 * into batch->rows) and return how many they quarantined, with each such
 * row's reason set; end() undoes what begin() set.  All of it runs in the
 * batch's transaction: an error that is not a row's fault propagates.
 */
struct KsApplyStrategy
{
	const char *name;
	void	   *(*begin) (KsBatch *batch, KsBatchTarget *bt);
	/* merge: tombstones that win their key, then the winners in key order */
	int			(*delete_rows) (KsBatch *batch, void *state, int *rows, int nrows);
	int			(*upsert_rows) (KsBatch *batch, void *state, int *rows, int nrows);
	/* append: every row that decoded, in offset order */
	int			(*insert_rows) (KsBatch *batch, void *state, int *rows, int nrows);
	/* function: the batch function, once, over the rows */
	void		(*call_function) (KsBatch *batch, void *state, int *rows, int nrows);
	void		(*end) (KsBatch *batch, void *state);
};

/* apply.c */
extern void ks_apply_batch(KsBatch *batch);
extern KsBatchTarget *ks_batch_add_target(KsBatch *batch, KsTarget *t, int nmsgs);
extern void ks_stage_and_apply(KsBatch *batch, bool take_batch_id);
extern const KsApplyStrategy *ks_apply_strategy_for(KsPipeline *p, KsTarget *t);

/* milliseconds from a to b, 0 when either is unknown */
static inline double
ks_ms_between(TimestampTz a, TimestampTz b)
{
	return a == 0 || b == 0 ? 0 : (double) (b - a) / 1000.0;
}

#endif							/* KS_APPLY_H */
