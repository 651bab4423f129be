/*-------------------------------------------------------------------------
 *
 * hops.h
 *		The outbox hop count (hops.c): how often a message came through
 *		kafka_sink's outbox, the loop it ends.
 *
 *		Owns: the header's name, the hop-count rule and the batch's count.
 *		Must not: write headers (quarantine.c, catalog.c and api.c do,
 *		with the count it gives).
 *
 *-------------------------------------------------------------------------
 */
#ifndef KS_HOPS_H
#define KS_HOPS_H

#include "kafka_sink.h"

#define KS_HOPS_HEADER "kafka_sink.hops"

extern int	ks_message_hops(KsMessage *msg);
extern bool ks_message_looped(KsMessage *msg, char **detail);
extern void ks_hops_begin_batch(KsMessage **msgs, int nmsgs);
extern int	ks_hops_next(void);
extern bool ks_hops_in_batch(void);
extern bool ks_header_name_reserved(const char *name);

#endif							/* KS_HOPS_H */
