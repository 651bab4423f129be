/*-------------------------------------------------------------------------
 *
 * role_guard.c
 *		DROP ROLE of a pipeline's owner is refused, naming the pipelines.
 *
 * A pipeline runs as its owner; with the owner dropped the catalog row
 * keeps a dangling OID (owner is regrole) and the pipeline fails at its
 * next start.  PostgreSQL's own answer, a shared dependency in pg_shdepend,
 * does not fit rows of an extension's table: DROP ROLE, DROP OWNED and
 * REASSIGN OWNED describe or act on each dependent object by its catalog,
 * and fail on a class they do not know ("unrecognized object class").
 * So kafka_sink's ProcessUtility hook (catalog_guard.c, the one hook of the
 * library) calls ks_role_guard_check_drop before DROP ROLE runs, which looks:
 *  - in the current database, if kafka_sink is installed there, every
 *    pipeline of the catalog, whatever its state, read directly (row level
 *    security would hide other owners' pipelines from the caller);
 *  - in shared memory, the running workers of every database (the slots
 *    know their owner), for a DROP ROLE issued from another database.
 * Not covered: a stopped or failed pipeline of another database than the
 * one DROP ROLE runs in (nothing shared records it), and a pipeline created
 * in a transaction not yet committed when DROP ROLE looks.
 *
 * Owns: the DROP ROLE check.  Must not: change any pipeline.
 *
 *-------------------------------------------------------------------------
 */
#include "kafka_sink.h"
#include "shmem.h"
#include "role_guard.h"

#include "access/heapam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/tableam.h"
#include "catalog/namespace.h"
#include "commands/dbcommands.h"
#include "commands/extension.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "storage/lwlock.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"

/* Appends the names of this database's pipelines owned by role to names. */
static int
local_pipelines(Oid role, StringInfo names)
{
	Oid			nsp;
	Oid			relid;
	Relation	rel;
	TableScanDesc scan;
	HeapTuple	tup;
	Snapshot	snap;
	AttrNumber	att_name;
	AttrNumber	att_owner;
	int			n = 0;

	if (!OidIsValid(get_extension_oid("kafka_sink", true)))
		return 0;
	nsp = get_namespace_oid("kafka_sink", true);
	if (!OidIsValid(nsp))
		return 0;
	relid = get_relname_relid("pipeline_definitions", nsp);
	if (!OidIsValid(relid))
		return 0;
	att_name = get_attnum(relid, "name");
	att_owner = get_attnum(relid, "owner");
	if (att_name == InvalidAttrNumber || att_owner == InvalidAttrNumber)
		return 0;

	rel = table_open(relid, AccessShareLock);
	snap = RegisterSnapshot(GetLatestSnapshot());
	scan = table_beginscan(rel, snap, 0, NULL);
	while ((tup = heap_getnext(scan, ForwardScanDirection)) != NULL)
	{
		bool		isnull;
		Datum		owner = heap_getattr(tup, att_owner, RelationGetDescr(rel), &isnull);
		Datum		name;

		if (isnull || DatumGetObjectId(owner) != role)
			continue;
		name = heap_getattr(tup, att_name, RelationGetDescr(rel), &isnull);
		if (isnull)
			continue;
		if (n++ > 0)
			appendStringInfoString(names, ", ");
		appendStringInfoString(names, quote_identifier(TextDatumGetCString(name)));
	}
	table_endscan(scan);
	UnregisterSnapshot(snap);
	table_close(rel, AccessShareLock);
	return n;
}

/* The running workers of role in other databases: "id N in database D". */
static int
remote_pipelines(Oid role, StringInfo names, int n)
{
	List	   *dbs = NIL;
	List	   *ids = NIL;
	ListCell   *a;
	ListCell   *b;

	if (ks_shared == NULL)
		return n;
	LWLockAcquire(ks_shared->lock, LW_SHARED);
	for (int i = 0; i < ks_shared->nslots; i++)
	{
		KsWorkerSlot *s = &ks_shared->slots[i];
		bool		seen = false;

		if (!s->in_use || s->owner != role || s->database == MyDatabaseId)
			continue;
		forboth(a, dbs, b, ids)
			if (lfirst_oid(a) == s->database && *(int64 *) lfirst(b) == s->pipeline_id)
			seen = true;
		if (!seen)
		{
			int64	   *id = palloc(sizeof(int64));

			*id = s->pipeline_id;
			dbs = lappend_oid(dbs, s->database);
			ids = lappend(ids, id);
		}
	}
	LWLockRelease(ks_shared->lock);

	/* catalog lookups only with the lock released */
	forboth(a, dbs, b, ids)
	{
		char	   *db = get_database_name(lfirst_oid(a));

		if (n++ > 0)
			appendStringInfoString(names, ", ");
		appendStringInfo(names, "id " INT64_FORMAT " in database %s",
						 *(int64 *) lfirst(b), db ? quote_identifier(db) : "?");
	}
	return n;
}

void
ks_role_guard_check_drop(DropRoleStmt *stmt)
{
	ListCell   *lc;

	foreach(lc, stmt->roles)
	{
		RoleSpec   *spec = lfirst(lc);
		Oid			role;
		StringInfoData names;
		int			n;

		/* DropRole itself refuses CURRENT_USER and the like */
		if (spec->roletype != ROLESPEC_CSTRING)
			continue;
		role = get_role_oid(spec->rolename, true);
		if (!OidIsValid(role))
			continue;
		initStringInfo(&names);
		n = local_pipelines(role, &names);
		n = remote_pipelines(role, &names, n);
		if (n > 0)
			ereport(ERROR,
					(errcode(ERRCODE_DEPENDENT_OBJECTS_STILL_EXIST),
					 errmsg("role \"%s\" cannot be dropped because it owns kafka_sink pipelines",
							spec->rolename),
					 errdetail_plural("It owns pipeline %s.", "It owns pipelines %s.", n, names.data),
					 errhint("Drop the pipelines with kafka_sink.drop_pipeline() first; a pipeline runs as its owner.")));
	}
}
