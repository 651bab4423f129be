/*-------------------------------------------------------------------------
 *
 * kafka_sink.c
 *		Module entry point: PG_MODULE_MAGIC and _PG_init.
 *
 * The library must be loaded through shared_preload_libraries, because it
 * reserves shared memory and registers the launcher background worker.
 *
 * Owns: loading the library and calling each module's init.  Must not:
 * do any work of its own.
 *
 *-------------------------------------------------------------------------
 */
#include "kafka_sink.h"
#include "guc.h"
#include "shmem.h"
#include "catalog_guard.h"
#include "launcher.h"
#include "bgworker.h"

#include "miscadmin.h"

/* 18 shows the module's name and version in pg_get_loaded_modules() */
#ifdef PG_MODULE_MAGIC_EXT
PG_MODULE_MAGIC_EXT(.name = "kafka_sink", .version = "0.3.0");
#else
PG_MODULE_MAGIC;
#endif

void		_PG_init(void);

void
_PG_init(void)
{
	if (!process_shared_preload_libraries_in_progress)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("kafka_sink must be loaded via shared_preload_libraries"),
				 errhint("Add kafka_sink to shared_preload_libraries in postgresql.conf and restart the server.")));

	ks_guc_init();
	ks_catalog_guard_init();

	/* pg_upgrade runs the server without workers; reserve nothing else */
	if (IsBinaryUpgrade)
		return;

	ks_shmem_init();
	ks_launcher_register();
}
