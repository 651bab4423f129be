/*-------------------------------------------------------------------------
 *
 * catalog_guard.h
 *		The catalog guard (catalog_guard.c): whether this backend may write
 *		kafka_sink's own tables now (the API functions and the workers may,
 *		nobody else), and its initialisation in _PG_init.
 *
 *		Owns: the declarations of catalog_guard.c.  Must not: be needed
 *		by a module that only reads the catalog.
 *
 *-------------------------------------------------------------------------
 */
#ifndef KS_CATALOG_GUARD_H
#define KS_CATALOG_GUARD_H

#include "kafka_sink.h"

extern int	ks_catalog_writes_raise(void);
extern int	ks_catalog_writes_suspend(void);
extern void ks_catalog_writes_restore(int saved);
extern void ks_catalog_writes_for_worker(void);
extern bool ks_catalog_writes_allowed(void);
extern void ks_catalog_guard_init(void);

#endif							/* KS_CATALOG_GUARD_H */
