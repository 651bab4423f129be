/*-------------------------------------------------------------------------
 *
 * envelope.h
 *		Envelopes: how a message becomes a row operation for a target.
 *
 * The plain envelope (envelope_plain.c) is what kafka_sink always did: the
 * value is the row (an upsert, or an insert in append mode), a tombstone
 * with delete_on_tombstone deletes the row of its key.  A change-event
 * envelope (Debezium: op, before, after) is a new file, envelope_<name>.c,
 * with a KsEnvelope declared below and one line in ks_envelope_find.
 *
 * An envelope fills one KsRow: its values (through the format, format.h,
 * and the shared conversion of decode.h), is_delete for a delete, or a
 * quarantine reason and detail.
 *
 *-------------------------------------------------------------------------
 */
#ifndef KS_ENVELOPE_H
#define KS_ENVELOPE_H

#include "kafka_sink.h"
#include "decode.h"
#include "utils/jsonb.h"

typedef struct KsEnvelope
{
	const char *name;
	/* one message (row->msg) -> row; may raise an input function's ERROR */
	void		(*decode) (KsTarget *t, KsPipeline *p, KsRow *row);
} KsEnvelope;

/* envelope_plain.c */
extern const KsEnvelope ks_envelope_plain;

/* envelope_debezium.c */
extern const KsEnvelope ks_envelope_debezium;
/* a change event's source position as a numeric's text, or NULL */
extern char *ks_cdc_position(const char *source_json, int64 offset);

/*
 * envelope_debezium_avro.c: whether the pipeline's value (is_key false) or
 * key is Avro, and an Avro change event (or key) as the {"schema",
 * "payload"} jsonb JsonConverter would have written (or its text, in the
 * database's encoding, which the envelope parses once itself), or NULL
 * with a reason
 */
extern bool ks_cdc_avro(KsPipeline *p, bool is_key);
extern char *ks_cdc_avro_event_text(KsPipeline *p, bool is_key, const char *data, size_t len,
									KsReason *reason, char **detail);
extern Jsonb *ks_cdc_avro_event(KsPipeline *p, bool is_key, const char *data, size_t len,
								KsReason *reason, char **detail);

/* the envelope called name, or NULL (envelope_plain.c holds the table) */
extern const KsEnvelope *ks_envelope_find(const char *name);

#endif							/* KS_ENVELOPE_H */
