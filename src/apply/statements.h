/*-------------------------------------------------------------------------
 *
 * statements.h
 *		The text of every statement a batch runs against the user's
 *		tables (statements.c; mode history's is history.c's), and
 *		kafka_sink.pipeline_statements(), which shows them built by the
 *		same functions.
 *
 *		Owns: the builders of statement text and KS_BY_HAND_STAGING.
 *		Must not: run anything, or hold SQL text on kafka_sink's own tables
 *		(catalog.h).
 *
 *-------------------------------------------------------------------------
 */
#ifndef KS_STATEMENTS_H
#define KS_STATEMENTS_H

#include "kafka_sink.h"
#include "pipeline.h"
#include "decode.h"

/* The staging table of a statement run by hand (pipeline_statements()). */
#define KS_BY_HAND_STAGING "pg_temp.kafka_sink_batch"

extern char *ks_batch_columns_sql(KsTarget *t);
extern char *ks_source_sql(KsTarget *t, bool by_hand);
extern char *ks_merge_sql(KsTarget *t, bool by_hand);
extern char *ks_absent_keys_sql(KsTarget *t);
extern char *ks_revived_sql(KsTarget *t);
extern char *ks_onconflict_insert_sql(KsTarget *t, bool by_hand);
extern char *ks_onconflict_update_sql(KsTarget *t, bool by_hand);
extern char *ks_citus_stage_name(KsTarget *t);
extern char *ks_citus_stage_create_sql(KsTarget *t);
extern char *ks_citus_stage_fill_sql(KsTarget *t);
extern char *ks_citus_update_sql(KsTarget *t, bool by_hand);
extern char *ks_citus_insert_sql(KsTarget *t, bool by_hand);
extern char *ks_truncate_sql(KsTarget *t);
extern char *ks_delete_sql(KsTarget *t, bool by_hand);
extern char *ks_append_sql(KsTarget *t, bool by_hand);
extern char *ks_function_sql(KsPipeline *p, KsTarget *t, bool by_hand);
extern char *ks_bronze_sql(Oid bronze);

#endif							/* KS_STATEMENTS_H */
