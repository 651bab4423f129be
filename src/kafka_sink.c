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
#include "bgworker.h"

#include "miscadmin.h"
#include "utils/wait_event.h"

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

/*
 * The wait event a worker's wait reports (compat.h).  On 17+ a named custom
 * wait event, so pg_stat_activity tells a worker waiting for Kafka from one
 * that is idle between launcher rounds; registered on first use in each
 * process (the name's id is shared, in shared memory); before 17 "Extension".
 */
uint32
ks_wait_event(KsWaitEvent which)
{
	static uint32 ids[KS_WAIT_NUM];
	static const char *const names[KS_WAIT_NUM] = {
		[KS_WAIT_LAUNCHER_NAP] = "KafkaSinkLauncherNap",
		[KS_WAIT_MESSAGES] = "KafkaSinkWaitForMessages",
		[KS_WAIT_RELAY_NAP] = "KafkaSinkRelayNap",
	};

	Assert(which >= 0 && which < KS_WAIT_NUM);
	if (ids[which] == 0)
		ids[which] = KS_WAIT_EVENT_EXTENSION_NEW(names[which]);
	return ids[which];
}
