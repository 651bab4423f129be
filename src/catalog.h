/*-------------------------------------------------------------------------
 *
 * catalog.h
 *		The catalog: every read and write of kafka_sink's own tables
 *		(catalog.c), the transaction block of the workers, and the one SPI
 *		helper that checks return codes.
 *
 *-------------------------------------------------------------------------
 */
#ifndef KS_CATALOG_H
#define KS_CATALOG_H

#include "kafka_sink.h"

extern void ks_xact_begin(const char *activity);
extern void ks_xact_commit(void);
extern KsPipeline *ks_load_pipeline(int64 pipeline_id, MemoryContext mcxt);
extern char *ks_pipeline_state(int64 pipeline_id);
extern bool ks_load_offsets(int64 pipeline_id, KsPartition *parts, int nparts);
extern void ks_insert_initial_offsets(int64 pipeline_id, KsPartition *parts, int nparts);
extern bool ks_pipeline_has_offsets(int64 pipeline_id);
extern void ks_record_error(int64 pipeline_id, const char *kind, int sqlerrcode,
							const char *message, const char *detail);
extern void ks_set_state(int64 pipeline_id, const char *state);
extern ErrorData *ks_try_subxact(void (*fn) (void *arg), void *arg);

#endif							/* KS_CATALOG_H */
