/*-------------------------------------------------------------------------
 *
 * quarantine.h
 *		Quarantine rows of a batch (quarantine.c), with the dead-letter
 *		outbox row written with each when the pipeline has a
 *		dead_letter_topic.
 *
 *		Owns: ks_quarantine_rows, the batch's quarantine rows and their
 *		dead-letter outbox rows.  Must not: decide which rows are
 *		quarantined (decode.c, dedupe.c, route.c and apply_sql.c set the
 *		reasons) or hold SQL text (catalog.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef KS_QUARANTINE_H
#define KS_QUARANTINE_H

#include "apply.h"

extern void ks_quarantine_rows(KsBatch *batch);

#endif							/* KS_QUARANTINE_H */
