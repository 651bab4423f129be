/*-------------------------------------------------------------------------
 *
 * envelope_debezium.h
 *		The Debezium envelope's exports beside its table entry
 *		(ks_envelope_debezium, envelope.h): a change event's source position,
 *		which kafka_sink.message_fate(s) also computes (lineage.c), and the
 *		payload of an event whose schema it has cached, which routing walks
 *		alone (route.c).
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

/* routing's shortcut: the payload's span of an event whose schema is cached */
extern bool ks_cdc_cached_payload(const char *data, size_t len, const char **p0, const char **p1);

#endif							/* KS_ENVELOPE_DEBEZIUM_H */
