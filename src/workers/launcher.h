/*-------------------------------------------------------------------------
 *
 * launcher.h
 *		The launcher (launcher.c): registered by _PG_init, its main.
 *
 *		Owns: the declarations of launcher.c.  Must not: declare the
 *		pipeline worker's main (worker.h).
 *
 *-------------------------------------------------------------------------
 */
#ifndef KS_LAUNCHER_H
#define KS_LAUNCHER_H

#include "kafka_sink.h"

extern void ks_launcher_register(void);
extern PGDLLEXPORT void ks_launcher_main(Datum arg);

#endif							/* KS_LAUNCHER_H */
