/*-------------------------------------------------------------------------
 *
 * envelope_debezium_avro.h
 *		Debezium change events in Avro (envelope_debezium_avro.c),
 *		translated to what JsonConverter would have written, for the
 *		Debezium envelope and for lineage.
 *
 *		Owns: the declarations of envelope_debezium_avro.c.  Must not:
 *		expose Avro's decoder (avro_binary.h).
 *
 *-------------------------------------------------------------------------
 */
#ifndef KS_ENVELOPE_DEBEZIUM_AVRO_H
#define KS_ENVELOPE_DEBEZIUM_AVRO_H

#include "decode.h"

#include "utils/jsonb.h"
#include "pipeline.h"

/*
 * Whether the pipeline's value (is_key false) or
 * key is Avro, and an Avro change event (or key) as the {"schema",
 * "payload"} jsonb JsonConverter would have written (or its text, in the
 * database's encoding, which the envelope parses once itself), or NULL
 * with a reason
 */
extern bool ks_cdc_avro(KsPipeline *p, bool is_key);
extern char *ks_cdc_avro_event_text(KsPipeline *p, bool is_key, const char *data, size_t len,
									KsReason *reason, char **detail);
extern bool ks_cdc_avro_fields(KsPipeline *p, const char *data, size_t len, const KsWalkPaths *paths,
							   KsSlotValue *out);
extern Jsonb *ks_cdc_avro_event(KsPipeline *p, bool is_key, const char *data, size_t len,
								KsReason *reason, char **detail);

#endif							/* KS_ENVELOPE_DEBEZIUM_AVRO_H */
