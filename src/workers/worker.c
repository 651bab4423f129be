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
 * The loop reads as its stages, one turn per batch (worker_turn): fill
 * (fill.c) -> the schemas new to the process, fetched with no transaction
 * open (schema_registry.c) -> the transaction around ks_apply_batch ->
 * commit -> mirror the checkpoint to the consumer group (mirror.c) ->
 * publish the progress.
 * Which partitions it reads, and from where, is assignment.c's.
 *
 * Owns: the process (connection, pinned settings, the catalog-write
 * counter, the ready flag), the worker's state (KsWorkerState, worker.h),
 * the order of the stages, pausing, finishing a bounded pipeline, the
 * transaction around ks_apply_batch, transient versus permanent errors,
 * retries and failing the pipeline (ks_worker_fail).  Must not: apply rows
 * or hold SQL text (apply.c, catalog.c), read Kafka itself (fill.c,
 * assignment.c), or hold a transaction while it waits on Kafka.
 *
 *-------------------------------------------------------------------------
 */
#include "kafka_sink.h"
#include "guc.h"
#include "shmem.h"
#include "catalog_guard.h"
#include "target.h"
#include "schema_registry.h"
#include "assignment.h"
#include "fill.h"
#include "mirror.h"
#include "worker.h"
#include "catalog.h"
#include "consumer.h"
#include "decode.h"
#include "errclass.h"
#include "citus.h"
#include "apply.h"
#include "format.h"
#include "bgworker.h"

#include <malloc.h>

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

/*
 * The one worker of this process.  Static storage, not ks_worker_main's
 * stack: its error handler runs after a longjmp and reads it; every
 * function takes it as an argument all the same, so what each stage uses
 * is visible at the call.
 */
static KsWorkerState worker_state;

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
void
ks_worker_fail(KsWorkerState *ws, const char *kind, int sqlerrcode, const char *message,
			   const char *detail, const char *hint)
{
	bool		permanent = strcmp(kind, "transient") != 0;
	const char *name = ws->pipeline ? quote_identifier(ws->pipeline->name) :
		psprintf("%lld", (long long) ws->args.pipeline_id);
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
		ks_fail_pipeline(ws->args.pipeline_id, kind, sqlerrcode, message, full_detail);
		if (!permanent)
			ks_slot_set_detail(ws->args.slot, "retrying after: %s", message);
	}
	PG_CATCH();
	{
		EmitErrorReport();
		FlushErrorState();
		AbortOutOfAnyTransaction();
		LWLockAcquire(ks_shared->lock, LW_EXCLUSIVE);
		ks_shared->slots[ws->args.slot].ready = false;
		LWLockRelease(ks_shared->lock);
		proc_exit(1);
	}
	PG_END_TRY();
	proc_exit(permanent ? 0 : 1);
}

/* ---- helpers of the loop ---- */

/*
 * A bounded (backfill) pipeline: true when this worker's partitions have all
 * reached their end.  The worker whose commit completes the last partition
 * of the pipeline sets it to 'finished' and exits; the launcher then stops
 * the others.
 */
static bool
bounded_done(KsWorkerState *ws)
{
	bool		finished;

	for (int i = 0; i < ws->nparts; i++)
		if (ws->parts[i].end_offset < 0 || ws->parts[i].committed < ws->parts[i].end_offset)
			return false;
	ks_xact_begin("kafka_sink: finishing a bounded pipeline");
	finished = ks_catalog_finish_bounded(ws->pipeline->id);
	ks_xact_commit();
	if (finished)
	{
		ks_mirror_flush(ws, 5000);
		ereport(LOG, (errmsg("kafka_sink: bounded pipeline \"%s\" reached its ending offsets and finished",
							 ws->pipeline->name)));
		proc_exit(0);
	}
	return true;
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
publish_progress(KsWorkerState *ws, KsBatch *b)
{
	KsWorkerSlot *slot = &ks_shared->slots[ws->args.slot];

	LWLockAcquire(ks_shared->lock, LW_EXCLUSIVE);
	slot->last_batch_id = b->batch_id;
	slot->last_batch_at = GetCurrentTimestamp();
	if (!ws->broker_error_shown)
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
worker_appname(KsWorkerState *ws, const char *name)
{
	char		suffix[16] = "";
	char	   *full;

	if (ws->args.nworkers > 1)
		snprintf(suffix, sizeof(suffix), "/%d", ws->args.worker_index);
	full = psprintf("kafka_sink: %s%s", name, suffix);
	if (strlen(full) > NAMEDATALEN - 1)
	{
		uint32		h = hash_bytes((const unsigned char *) name, strlen(name));
		int			keep = NAMEDATALEN - 1 - (int) strlen("kafka_sink: ") - 9 - (int) strlen(suffix);

		full = psprintf("kafka_sink: %.*s~%08x%s", keep, name, h, suffix);
	}
	return full;
}

/* ---- the stages of the loop ---- */

/*
 * Starting: the definition, the application name, the target, the consumer
 * and the first assignment (retried until the broker answers).
 */
static void
worker_start(KsWorkerState *ws)
{
	char	   *appname;

	ks_xact_begin("kafka_sink: loading the pipeline");
	ws->pipeline = ks_load_pipeline(ws->args.pipeline_id, TopMemoryContext);
	ks_xact_commit();
	if (ws->pipeline == NULL || strcmp(ws->pipeline->state, "running") != 0)
		proc_exit(0);

	appname = worker_appname(ws, ws->pipeline->name);
	SetConfigOption("application_name", appname, PGC_USERSET, PGC_S_SESSION);
	pgstat_report_appname(appname);

	/* the target as it is now: a dropped table or column fails at once */
	if (OidIsValid(ws->pipeline->targets.target))
	{
		ks_xact_begin("kafka_sink: checking the target");
		(void) ks_target_open(ws->pipeline);
		ks_xact_commit();
	}

	/* a consumer librdkafka refuses to create is a configuration error */
	ws->consumer = ks_consumer_create(ws->pipeline, NULL);
	ws->batch_cxt = AllocSetContextCreate(TopMemoryContext, "kafka_sink batch", ALLOCSET_DEFAULT_SIZES);

	while (!ks_assignment_refresh(ws, true))
	{
		ks_wait_for_kafka(ws, 2000);
		ks_consumer_serve(ws->consumer);
		ks_consumer_emit_logs();
		ks_note_client_error(ws);
	}
	ks_mirror_resync(ws);
	ws->batch_delay_from = GetCurrentTimestamp();
}

/*
 * Paused: hold no assignment, apply nothing, keep the lag visible.  True
 * while paused; on resuming, the worker reads again from the checkpoint.
 */
static bool
worker_paused(KsWorkerState *ws)
{
	if (ks_shared->slots[ws->args.slot].paused)
	{
		if (!ws->paused)
		{
			ks_consumer_assign(ws->consumer, ws->parts, 0);
			ks_slot_set_detail(ws->args.slot, "paused");
			ws->paused = true;
		}
		ks_publish_watermarks(ws, true);
		ks_consumer_emit_logs();
		return true;
	}
	if (ws->paused)
	{
		ws->paused = false;
		ks_slot_set_detail(ws->args.slot, "%s", "");
		ks_assignment_rewind(ws);
	}
	return false;
}

/*
 * Fills the next batch (fill.c) and describes it for ks_apply_batch.  False
 * when there is nothing to apply.
 */
static bool
fill(KsWorkerState *ws, KsFill *f, KsBatch *batch)
{
	ks_fill_start(ws, f);
	batch->fetch_started_at = GetCurrentTimestamp();
	ks_fill_batch(ws, f);
	ks_publish_watermarks(ws, false);
	if (!ks_fill_has_work(ws, f))
		return false;
	ks_fill_closed(ws);
	ks_fault(KS_FAULT_AFTER_FETCH);

	batch->fetch_ended_at = GetCurrentTimestamp();
	batch->previous_commit_at = ws->last_commit;
	for (int i = 0; i < ws->nparts; i++)
	{
		int64		low;

		if (!ks_consumer_cached_watermarks(ws->consumer, ws->parts[i].topic, ws->parts[i].partition,
										   &low, &ws->parts[i].latest))
			ws->parts[i].latest = -1;
	}
	batch->pipeline = ws->pipeline;
	batch->worker_index = ws->args.worker_index;
	batch->parts = ws->parts;
	batch->nparts = ws->nparts;
	batch->msgs = f->msgs;
	batch->nmsgs = f->nmsgs;
	return true;
}

/*
 * The batch rolled back (called in its error handler).  A pipeline stopped
 * or dropped meanwhile ends the worker quietly (nothing was written); a
 * transient error is recorded and the batch is read again from the
 * checkpoint after a backoff; any other error fails the pipeline.
 */
static void
batch_rolled_back(KsWorkerState *ws, KsFill *f)
{
	ErrorData  *edata;
	long		delay;

	MemoryContextSwitchTo(ws->batch_cxt);
	edata = CopyErrorData();
	FlushErrorState();
	AbortCurrentTransaction();
	MemoryContextSwitchTo(ws->batch_cxt);
	pgstat_report_activity(STATE_IDLE, NULL);

	ks_fill_release(f);

	if (ks_errclass(edata->sqlerrcode) == KS_ERR_STOPPED)
	{
		/* stopped or dropped while we worked: nothing was written */
		ereport(LOG, (errmsg("kafka_sink: pipeline \"%s\" is no longer running, worker exits",
							 ws->pipeline->name)));
		proc_exit(0);
	}
	if (ks_errclass(edata->sqlerrcode) != KS_ERR_TRANSIENT &&
		!(ks_citus_maybe_node_failure(edata->sqlerrcode) && ws->failures < KS_CITUS_RETRIES))
		ks_worker_fail(ws, "permanent", edata->sqlerrcode, edata->message, edata->detail, edata->hint);

	delay = ks_backoff_ms(ws->failures, 100, 30000);
	ws->failures++;
	ereport(LOG,
			(errmsg("kafka_sink: pipeline \"%s\": transient error, retrying in %ld ms: %s",
					ws->pipeline->name, delay, edata->message)));
	ks_record_error(ws->pipeline->id, "transient", edata->sqlerrcode, edata->message,
					detail_and_hint(edata));
	ks_slot_set_detail(ws->args.slot, "retrying after: %s", edata->message);
	ks_assignment_rewind(ws);
	ks_backoff_wait(ws, delay);
}

/*
 * The batch's one transaction: ks_apply_batch writes the rows, the
 * quarantine and the checkpoint, and it commits.  False when it rolled
 * back (batch_rolled_back: retried, or the worker ends).
 */
static bool
apply_in_transaction(KsWorkerState *ws, KsBatch *batch, KsFill *f)
{
	PG_TRY();
	{
		ks_xact_begin("kafka_sink: applying a batch");
		MemoryContextSwitchTo(ws->batch_cxt);
		batch->started_at = GetCurrentTransactionStartTimestamp();
		ks_apply_batch(batch);
		ks_xact_commit();
		MemoryContextSwitchTo(ws->batch_cxt);
		ws->failures = 0;
	}
	PG_CATCH();
	{
		batch_rolled_back(ws, f);
		return false;
	}
	PG_END_TRY();
	return true;
}

/*
 * Committed: the buffered messages are no longer needed, each partition's
 * rate is published and the checkpoint in memory moves to the batch's end.
 */
static void
batch_committed(KsWorkerState *ws, KsFill *f)
{
	TimestampTz now = GetCurrentTimestamp();

	ks_fill_release(f);
	ks_publish_partition_progress(ws, ws->last_commit == 0 ? 0 :
								  (double) (now - ws->last_commit) / USECS_PER_SEC);
	ws->last_commit = now;
	for (int i = 0; i < ws->nparts; i++)
	{
		ws->parts[i].committed = ws->parts[i].end;
		ws->parts[i].messages = 0;
		ws->parts[i].bytes = 0;
		ws->parts[i].loss = false;
	}
	ks_fault(KS_FAULT_AFTER_COMMIT);
}

/*
 * One turn of the loop: fill, apply in one transaction, commit, mirror the
 * checkpoint to the consumer group, publish the progress.  Returns how long
 * to wait before the next turn when the worker may not read (paused, or a
 * bounded pipeline at its end), else 0.
 */
static long
worker_turn(KsWorkerState *ws)
{
	KsFill		f;
	KsBatch		batch = {0};

	if (worker_paused(ws))
		return 1000;
	if (GetCurrentTimestamp() >= ws->next_metadata_refresh && ws->pipeline->source.assign == NIL)
		ks_assignment_refresh(ws, false);
	if (ws->pipeline->source.ending_offsets && bounded_done(ws))
		return 1000;

	if (!fill(ws, &f, &batch))
		return 0;
	/* schemas new to this process: fetched now, not in the transaction */
	ks_schema_prefetch(ws->pipeline, batch.msgs, batch.nmsgs);
	if (!apply_in_transaction(ws, &batch, &f))
		return 0;
	batch_committed(ws, &f);
	ks_mirror_committed(ws);
	publish_progress(ws, &batch);
	return 0;
}

/*
 * Every phase from the connection on runs here, under ks_worker_main's
 * error handler: starting, then one turn per batch, each in a fresh
 * memory context.
 */
static void
worker_run(KsWorkerState *ws)
{
	worker_start(ws);
	for (;;)
	{
		MemoryContext old;
		long		idle_ms;

		QueryCancelPending = false;
		CHECK_FOR_INTERRUPTS();
		MemoryContextReset(ws->batch_cxt);
		old = MemoryContextSwitchTo(ws->batch_cxt);
		idle_ms = worker_turn(ws);
		MemoryContextSwitchTo(old);
		if (idle_ms > 0)
			ks_wait_for_kafka(ws, idle_ms);
	}
}

/*
 * Each batch allocates and frees the same large blocks (its rows, values
 * and sort arrays; librdkafka's fetch buffers).  glibc gave them back to
 * the kernel on every free (mmap above its threshold, or trimming the top
 * of the heap), so every batch faulted the same pages in again: 9 % of a
 * worker's CPU in the kernel's page-fault path.  Fixed thresholds keep
 * them in the process between batches; the peak stays what the batch
 * limits make it (docs/performance.md, "Page faults").
 */
static void
keep_batch_memory(void)
{
	(void) mallopt(M_MMAP_THRESHOLD, 32 * 1024 * 1024);
	(void) mallopt(M_TRIM_THRESHOLD, 256 * 1024 * 1024);
}

void
ks_worker_main(Datum arg)
{
	KsWorkerState *ws = &worker_state;

	(void) arg;
	ks_bgworker_start(&ws->args);
	keep_batch_memory();

	/* an owner that cannot connect is reported by the launcher (reap_slot) */
	ks_fault(KS_FAULT_BEFORE_CONNECT);
	BackgroundWorkerInitializeConnectionByOid(ws->args.database, ws->args.owner, 0);
	pin_settings();
	/* suspended around the user's code: apply_sql.c, bronze.c, decode.c, ks_xact_commit */
	ks_catalog_writes_for_worker();
	LWLockAcquire(ks_shared->lock, LW_EXCLUSIVE);
	ks_shared->slots[ws->args.slot].ready = true;
	LWLockRelease(ks_shared->lock);

	PG_TRY();
	{
		worker_run(ws);
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
		if (ks_errclass(edata->sqlerrcode) == KS_ERR_STOPPED)
		{
			ereport(LOG, (errmsg("kafka_sink: pipeline %lld is no longer running, worker exits",
								 (long long) ws->args.pipeline_id)));
			proc_exit(0);
		}
		ks_worker_fail(ws, ks_errclass(edata->sqlerrcode) == KS_ERR_TRANSIENT ? "transient" : "permanent",
					   edata->sqlerrcode, edata->message, edata->detail, edata->hint);
	}
	PG_END_TRY();
}