/*-------------------------------------------------------------------------
 *
 * scheduler.h
 *		The scheduler of one database (scheduler.c): its main, started by
 *		the launcher.
 *
 *		Owns: the declarations of scheduler.c.  Must not: declare the
 *		launcher's or the pipeline worker's main (launcher.h, worker.h).
 *
 *-------------------------------------------------------------------------
 */
#ifndef KS_SCHEDULER_H
#define KS_SCHEDULER_H

#include "kafka_sink.h"

extern PGDLLEXPORT void ks_scheduler_main(Datum arg);

#endif							/* KS_SCHEDULER_H */
