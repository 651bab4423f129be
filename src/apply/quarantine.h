/*-------------------------------------------------------------------------
 *
 * quarantine.h
 *		Quarantine rows of a batch (quarantine.c), with the dead-letter
 *		outbox row written with each when the pipeline has a
 *		dead_letter_topic.
 *
 *-------------------------------------------------------------------------
 */
#ifndef KS_QUARANTINE_H
#define KS_QUARANTINE_H

#include "apply.h"

extern void ks_quarantine_rows(KsBatch *batch);

#endif							/* KS_QUARANTINE_H */
