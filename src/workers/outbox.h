/*-------------------------------------------------------------------------
 *
 * outbox.h
 *		The outbox relay worker (outbox.c): its main, started by the
 *		launcher by name.
 *
 *		Owns: the declaration of outbox.c.  Must not: declare the
 *		producer (producer.h).
 *
 *-------------------------------------------------------------------------
 */
#ifndef KS_OUTBOX_H
#define KS_OUTBOX_H

#include "kafka_sink.h"

extern PGDLLEXPORT void ks_relay_main(Datum arg);

#endif							/* KS_OUTBOX_H */
