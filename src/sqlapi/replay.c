/*-------------------------------------------------------------------------
 *
 * replay.c
 *		kafka_sink._replay(): quarantined messages applied again, through
 *		the same stages as a batch (decode, dedupe, reduce, apply), in the
 *		caller's transaction and with the caller's rights.
 *
 * Owns: reading quarantine rows back into messages and marking them
 * replayed (with the filter that left one out, if any) or failing again.  Must not: take a batch id, write a marker
 * or move offsets (a replay is not a batch of the pipeline).
 *
 * Exports only SQL entry points (PG_FUNCTION_INFO_V1, declared in
 * src/sql/30_c_functions.sql), so it has no header of its own.
 *
 *-------------------------------------------------------------------------
 */
#include "kafka_sink.h"
#include "pipeline.h"
#include "route.h"
#include "apply.h"
#include "apply_sql.h"
#include "bronze.h"
#include "catalog.h"
#include "sqlcall.h"
#include "decode.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "utils/builtins.h"

/*
 * kafka_sink._replay(pipeline_id, ids): applies quarantined messages again,
 * in offset order and with the pipeline's rules (the ordering guard
 * included), in the caller's transaction and with the caller's rights.
 * Messages that now apply are marked replayed; the others get their new
 * reason.  Returns (replayed, still_failing).
 * Checks: STRICT (no NULL arguments); ids may be empty, hold NULLs (they
 * match nothing) or have several dimensions (= ANY flattens them); the
 * pipeline is read through SPI with the caller's rights, so another
 * owner's pipeline, like a missing one or a negative id, "does not
 * exist" (row level security), and so are its quarantine rows; not inside
 * a batch (a batch function or trigger calling it would nest a second
 * batch into the statement that reads the first) nor in a kafka_sink
 * background worker.
 */
PG_FUNCTION_INFO_V1(kafka_sink_replay);
Datum
kafka_sink_replay(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	int64		pipeline_id = PG_GETARG_INT64(0);
	Datum		ids = PG_GETARG_DATUM(1);
	KsPipeline *p;
	KsBatch		batch = {0};
	int64	   *qids;
	int64		replayed = 0,
				failing = 0;
	Datum		out[2];
	bool		nulls[2] = {false, false};

	ks_srf_check_context(fcinfo, "kafka_sink._replay()");
	if (ks_batch_rows_active() || ks_batch_messages_active() || ks_in_own_worker())
		ereport(ERROR,
				(errcode(KS_ERRCODE_WRONG_CONTEXT),
				 errmsg("kafka_sink._replay() cannot run inside a kafka_sink batch"),
				 errdetail("It was called from a batch function, a trigger or another statement run while a batch is applied."),
				 errhint("Call kafka_sink.replay_quarantine() from a session of its own.")));
	InitMaterializedSRF(fcinfo, 0);
	ks_spi_connect();
	p = pipeline_id > 0 ? ks_load_pipeline(pipeline_id, CurrentMemoryContext) : NULL;
	if (p == NULL || (!OidIsValid(p->targets.target) && !ks_routing_enabled(p)))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("pipeline %lld does not exist or has no target", (long long) pipeline_id),
				 errhint("SELECT id, name, target FROM kafka_sink.pipelines lists the pipelines you can see.")));
	batch.nmsgs = ks_catalog_read_quarantine(pipeline_id, ids, &qids, &batch.msgs);
	batch.pipeline = p;
	batch.batch_id = 0;
	ks_stage_and_apply(&batch, false);

	for (int i = 0; i < batch.nmsgs; i++)
	{
		KsRow	   *r = batch.row_of[i];

		if (r->reason == KS_OK)
		{
			replayed++;
			/*
			 * a message the filter leaves out now is filtered, one whose
			 * upsert brought a marked row back revived: say so
			 */
			ks_catalog_mark_replay(qids[i], NULL, NULL, r->revived, r->filtered ? p->targets.filter : NULL);
		}
		else
		{
			failing++;
			ks_catalog_mark_replay(qids[i], ks_reason_name(r->reason), r->detail ? r->detail : "", NULL, NULL);
		}
	}
	SPI_finish();
	out[0] = Int64GetDatum(replayed);
	out[1] = Int64GetDatum(failing);
	tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, out, nulls);
	return (Datum) 0;
}

