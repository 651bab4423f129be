/*-------------------------------------------------------------------------
 *
 * catalog.h
 *		The catalog (catalog.c): every read and write of kafka_sink's own
 *		tables, the transaction block of the workers, and ks_spi_exec, the
 *		one SPI helper, which checks return codes.
 *
 *		Owns: the declarations of every statement on kafka_sink.*, of the
 *		workers' transaction and of the SPI helpers, and KsWanted.  Must not:
 *		decide anything (callers decide what to write), or declare SQL on
 *		the user's tables (statements.h, history.h).
 *
 *-------------------------------------------------------------------------
 */
#ifndef KS_CATALOG_H
#define KS_CATALOG_H

#include "kafka_sink.h"
#include "pipeline.h"
#include "apply.h"
#include "producer.h"

/* transactions and SPI */
extern void ks_xact_begin(const char *activity);
extern void ks_xact_commit(void);
extern ErrorData *ks_try_subxact(void (*fn) (void *arg), void *arg);
extern void ks_spi_connect(void);
extern void ks_spi_exec(const char *what, const char *sql, int nargs, Oid *argtypes,
						Datum *values, const char *nulls, bool read_only, int expected);

/* pipeline definitions, state, errors */
extern KsPipeline *ks_catalog_load_pipeline(int64 pipeline_id, MemoryContext mcxt);
extern char *ks_pipeline_state(int64 pipeline_id);
extern int64 ks_catalog_pipeline_id(const char *name);
extern void ks_record_error(int64 pipeline_id, const char *kind, int sqlerrcode,
							const char *message, const char *detail);
extern void ks_set_state(int64 pipeline_id, const char *state);
extern bool ks_catalog_finish_bounded(int64 pipeline_id);

/* the launcher: pipelines that should have workers */
typedef struct KsWanted
{
	int64		pipeline_id;
	Oid			owner;
	int			workers;
	int			generation;
	bool		paused;
	char	   *problem;		/* why a worker cannot do its job, or NULL */
	char	   *hint;
} KsWanted;

extern List *ks_catalog_wanted(bool allow_superuser, MemoryContext cxt);

/* offsets */
extern bool ks_load_offsets(int64 pipeline_id, KsPartition *parts, int nparts);
extern void ks_insert_initial_offsets(int64 pipeline_id, KsPartition *parts, int nparts);
extern bool ks_pipeline_has_offsets(int64 pipeline_id);

/* the batch's writes (checkpoint.c) */
extern bool ks_catalog_batch_id_floor(int64 pipeline_id, int32 generation, int64 *floor);
extern bool ks_catalog_record_batch_id(int64 pipeline_id, int64 batch_id);
extern void ks_catalog_insert_marker(int64 pipeline_id, int64 batch_id, int worker,
									 const char *ranges, const KsBatchStats *s,
									 TimestampTz started_at, const char *progress);
extern void ks_catalog_insert_data_loss(int64 pipeline_id, int64 batch_id, const char *topic,
										int32 partition, int64 expected, int64 available);
extern void ks_catalog_insert_filtered(int64 pipeline_id, int64 batch_id, const char *topic,
									   int32 partition, int64 *offsets, int n,
									   const char *filter);
extern void ks_catalog_insert_revived(int64 pipeline_id, int64 batch_id, const char *topic,
									  int32 partition, int64 *offsets, List *held, int n);
extern bool ks_catalog_advance_offset(int64 pipeline_id, const char *topic, int32 partition,
									  int64 from, int64 to, int64 batch_id);
extern void ks_catalog_prune_batches(int64 pipeline_id, int64 upto, int64 older_than_s);

/* quarantine, dead letters, replay (quarantine.c, replay.c) */
extern int64 ks_catalog_insert_quarantine(int64 pipeline_id, int64 batch_id, KsMessage *m,
										  const char *headers_json, const char *reason,
										  const char *detail, const char *target);
extern Oid	ks_catalog_extension_owner(void);
extern void ks_catalog_insert_dead_letter(const char *topic, KsMessage *m, Datum header_names,
										  Datum header_values, const char *created_by,
										  int64 quarantine_id, int hops);
extern int	ks_catalog_read_quarantine(int64 pipeline_id, Datum ids, int64 **qids,
									   KsMessage ***msgs);
extern void ks_catalog_mark_replay(int64 qid, const char *reason, const char *detail, const char *revived,
								   const char *filter);

/* event ids (dedupe.c) */
extern List *ks_catalog_seen_event_ids(Oid target, List *ids);
extern void ks_catalog_record_event_ids(Oid target, List *ids, int64 batch_id);
extern void ks_catalog_prune_event_ids(Oid target, int64 older_than_s);
extern void ks_catalog_cdc_positions(int64 pipeline_id, Oid target, List *keys,
									 List **found_keys, List **found_positions);
extern void ks_catalog_cdc_record(int64 pipeline_id, Oid target, List *keys, List *positions, List *times);
extern void ks_catalog_cdc_prune(int64 pipeline_id, Oid target, int64 older_than_s);

/* the outbox relay (outbox.c) */
extern int	ks_catalog_outbox_pending(int limit, KsOutMsg **msgs, int64 **ids,
									  MemoryContext cxt);
extern void ks_catalog_outbox_delivered(int64 *ids, int32 *parts, int64 *offs, int n);
extern void ks_catalog_outbox_failed(int64 id, const char *error);
extern void ks_catalog_outbox_prune(int64 older_than_s);

/* kafka_sink.schemas: schemas fetched from a schema registry (schema_registry.c) */
extern bool ks_catalog_schema_get(const char *registry, int32 id, char **type, char **text);
extern bool ks_catalog_schema_put(const char *registry, int32 id, const char *type,
								  const char *text);

#endif							/* KS_CATALOG_H */
