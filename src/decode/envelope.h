/*-------------------------------------------------------------------------
 *
 * envelope.h
 *		Envelopes: how a message becomes a row operation for a target.
 *
 * The plain envelope (envelope_plain.c) is what kafka_sink always did: the
 * value is the row (an upsert, or an insert in append mode), a tombstone
 * with delete_on_tombstone deletes the row of its key.  A change-event
 * envelope is a file of its own, envelope_<name>.c (Debezium's, op,
 * before, after: envelope_debezium.c), with a KsEnvelope declared below
 * and one line in ks_envelope_find.
 *
 * An envelope fills one KsRow: its values (through the format, format.h,
 * and the shared conversion of decode.h), is_delete for a delete, or a
 * quarantine reason and detail.
 *
 * Owns: KsEnvelope, the envelopes' entries and their look-up
 * (ks_envelope_find, in envelope_plain.c).  Must not: know a format's
 * bytes (format.h) or convert values (decode.h).
 *
 *-------------------------------------------------------------------------
 */
#ifndef KS_ENVELOPE_H
#define KS_ENVELOPE_H

#include "kafka_sink.h"
#include "pipeline.h"
#include "decode.h"

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

/* the envelope called name, or NULL (envelope_plain.c holds the table) */
extern const KsEnvelope *ks_envelope_find(const char *name);

#endif							/* KS_ENVELOPE_H */
