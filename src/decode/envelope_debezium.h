/*-------------------------------------------------------------------------
 *
 * envelope_debezium.h
 *		The Debezium envelope's one export beside its table entry
 *		(ks_envelope_debezium, envelope.h): a change event's source position,
 *		which kafka_sink.message_fate(s) also computes (lineage.c).
 *
 *		Owns: that declaration.  Must not: declare the envelope's table
 *		entry (envelope.h does).
 *
 *-------------------------------------------------------------------------
 */
#ifndef KS_ENVELOPE_DEBEZIUM_H
#define KS_ENVELOPE_DEBEZIUM_H

#include "kafka_sink.h"

/* a change event's source position as a numeric's text, or NULL */
extern char *ks_cdc_position(const char *source_json, int64 offset);

#endif							/* KS_ENVELOPE_DEBEZIUM_H */
