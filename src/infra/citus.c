/*-------------------------------------------------------------------------
 *
 * citus.c
 *		What kafka_sink knows of Citus, the distributed PostgreSQL
 *		extension, on a coordinator: which targets are Citus tables (they
 *		take the Citus apply path of apply_sql.c, never the heap strategy),
 *		and that kafka_sink's own CREATE/ALTER/DROP EXTENSION stays on the
 *		coordinator.
 *
 * Why the extension statements stay local: Citus (13.2,
 * commands/extension.c) propagates every CREATE and ALTER EXTENSION but
 * its own to the worker nodes, where kafka_sink is not preloaded, so its
 * install script fails there.  kafka_sink's catalog and workers live on
 * the coordinator only, and Citus has no list of extensions it leaves
 * alone; its propagation is off while citus.enable_ddl_propagation is, so
 * the utility hook (catalog_guard.c) sets that off, like a SET clause, for
 * the statements that name kafka_sink and no other extension.
 *
 * Citus reports a worker node's failure mid-transaction ("failure on
 * connection marked as essential") with no SQLSTATE, so as XX000, which
 * would fail the pipeline: while Citus is loaded, the worker retries such
 * a batch a bounded number of times (ks_citus_maybe_node_failure).
 *
 * Owns: the read of pg_dist_partition, only when the citus extension
 * exists (kafka_sink never depends on Citus), that GUC's setting, and the
 * XX000 rule.
 * Must not: build or run apply statements.
 *
 *-------------------------------------------------------------------------
 */
#include "kafka_sink.h"
#include "citus.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "catalog/namespace.h"
#include "catalog/pg_namespace.h"
#include "commands/extension.h"
#include "utils/fmgroids.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"

/* pg_dist_partition's columns (Citus 11 to 13) */
#define Anum_pg_dist_partition_logicalrelid 1
#define Anum_pg_dist_partition_partmethod 2
#define Anum_pg_dist_partition_repmodel 5

/*
 * The Citus kind of a relation: its row of pg_dist_partition (partmethod
 * 'h' hash-distributed, 'a'/'r' append/range, 'n' none: a reference table
 * when its replication model is 't', else a Citus local or single-shard
 * table).  A sequential scan of a table with one row per Citus table: a
 * target is opened once per batch.
 */
KsCitusKind
ks_citus_kind(Oid relid)
{
	Oid			distrel;
	Relation	rel;
	SysScanDesc scan;
	ScanKeyData key;
	HeapTuple	tup;
	KsCitusKind kind = KS_CITUS_NONE;

	if (!OidIsValid(get_extension_oid("citus", true)))
		return KS_CITUS_NONE;
	distrel = get_relname_relid("pg_dist_partition", PG_CATALOG_NAMESPACE);
	if (!OidIsValid(distrel))
		return KS_CITUS_NONE;
	rel = table_open(distrel, AccessShareLock);
	if (RelationGetDescr(rel)->natts < Anum_pg_dist_partition_repmodel)
	{
		table_close(rel, AccessShareLock);
		return KS_CITUS_NONE;
	}
	ScanKeyInit(&key, Anum_pg_dist_partition_logicalrelid, BTEqualStrategyNumber,
				F_OIDEQ, ObjectIdGetDatum(relid));
	scan = systable_beginscan(rel, InvalidOid, false, NULL, 1, &key);
	tup = systable_getnext(scan);
	if (HeapTupleIsValid(tup))
	{
		bool		isnull;
		Datum		method = heap_getattr(tup, Anum_pg_dist_partition_partmethod,
										  RelationGetDescr(rel), &isnull);
		Datum		repmodel;

		if (!isnull && DatumGetChar(method) != 'n')
			kind = KS_CITUS_DISTRIBUTED;
		else
		{
			repmodel = heap_getattr(tup, Anum_pg_dist_partition_repmodel,
									RelationGetDescr(rel), &isnull);
			kind = (!isnull && DatumGetChar(repmodel) == 't') ? KS_CITUS_REFERENCE : KS_CITUS_OTHER;
		}
	}
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
	return kind;
}

const char *
ks_citus_kind_name(KsCitusKind kind)
{
	switch (kind)
	{
		case KS_CITUS_DISTRIBUTED:
			return "distributed";
		case KS_CITUS_REFERENCE:
			return "reference";
		case KS_CITUS_OTHER:
			return "citus";
		default:
			return "none";
	}
}

/* whether the statement is an extension statement naming only kafka_sink */
static bool
names_kafka_sink(Node *stmt)
{
	if (IsA(stmt, CreateExtensionStmt))
		return strcmp(((CreateExtensionStmt *) stmt)->extname, "kafka_sink") == 0;
	if (IsA(stmt, AlterExtensionStmt))
		return strcmp(((AlterExtensionStmt *) stmt)->extname, "kafka_sink") == 0;
	if (IsA(stmt, DropStmt) && ((DropStmt *) stmt)->removeType == OBJECT_EXTENSION)
	{
		ListCell   *lc;

		foreach(lc, ((DropStmt *) stmt)->objects)
			if (strcmp(strVal(lfirst(lc)), "kafka_sink") != 0)
				return false;
		return true;
	}
	return false;
}

int
ks_citus_keep_local_begin(Node *stmt)
{
	int			level;

	if (!names_kafka_sink(stmt) ||
		GetConfigOption("citus.enable_ddl_propagation", true, false) == NULL)
		return 0;
	level = NewGUCNestLevel();
	(void) set_config_option("citus.enable_ddl_propagation", "off", PGC_USERSET, PGC_S_SESSION,
							 GUC_ACTION_SAVE, true, 0, false);
	return level;
}

bool
ks_citus_maybe_node_failure(int sqlerrcode)
{
	return sqlerrcode == ERRCODE_INTERNAL_ERROR &&
		GetConfigOption("citus.enable_ddl_propagation", true, false) != NULL;
}
