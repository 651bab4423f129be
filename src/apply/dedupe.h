/*-------------------------------------------------------------------------
 *
 * dedupe.h
 *		Producer duplicates (dedupe.c): event ids already applied to a
 *		target, marked before the apply and recorded after it.
 *
 *		Owns: the event-id rule's two calls, before the apply and after
 *		it.  Must not: apply rows, or hold SQL text (the ids' rows are
 *		catalog.c's).
 *
 *-------------------------------------------------------------------------
 */
#ifndef KS_DEDUPE_H
#define KS_DEDUPE_H

#include "apply.h"

extern void ks_mark_duplicates(KsBatch *batch);
extern void ks_record_event_ids(KsBatch *batch);

#endif							/* KS_DEDUPE_H */
