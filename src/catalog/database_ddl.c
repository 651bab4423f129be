/*-------------------------------------------------------------------------
 *
 * database_ddl.c
 *		What the launcher and the schedulers must hear of statements on
 *		databases and on the extension, from the utility hook
 *		(catalog_guard.c).
 *
 * CREATE EXTENSION kafka_sink and CREATE DATABASE (whose template may have
 * it) ask the launcher for a rescan at commit; DROP EXTENSION kafka_sink
 * wakes the database's scheduler at commit, which stops the database's
 * workers and exits.  DROP DATABASE, ALTER DATABASE ... RENAME TO or SET
 * TABLESPACE, and CREATE DATABASE ... TEMPLATE need a database nobody is
 * connected to: before them, the database is emptied of our scheduler and
 * workers and blocked (shmem.c: ks_database_clear), after them, whether
 * they succeeded or not, unblocked.
 *
 * Owns: which statements those are.  Must not: refuse a statement, or
 * signal processes itself (shmem.c does).
 *
 *-------------------------------------------------------------------------
 */
#include "kafka_sink.h"
#include "database_ddl.h"
#include "shmem.h"

#include "commands/dbcommands.h"
#include "commands/defrem.h"
#include "miscadmin.h"
#include "nodes/parsenodes.h"

/* the database a DefElem list names by option (TEMPLATE, TABLESPACE) */
static bool
has_option(List *options, const char *name)
{
	ListCell   *lc;

	foreach(lc, options)
		if (strcmp(lfirst_node(DefElem, lc)->defname, name) == 0)
			return true;
	return false;
}

static char *
option_string(List *options, const char *name)
{
	ListCell   *lc;

	foreach(lc, options)
	{
		DefElem    *d = lfirst_node(DefElem, lc);

		if (strcmp(d->defname, name) == 0 && d->arg != NULL)
			return defGetString(d);
	}
	return NULL;
}

static bool
drops_extension(DropStmt *stmt)
{
	ListCell   *lc;

	if (stmt->removeType != OBJECT_EXTENSION)
		return false;
	foreach(lc, stmt->objects)
		if (IsA(lfirst(lc), String) && strcmp(strVal(lfirst(lc)), KS_EXTENSION_NAME) == 0)
			return true;
	return false;
}

/*
 * Before the statement: the database to block while it runs (emptied of
 * our processes already), or InvalidOid.
 */
Oid
ks_database_ddl_before(Node *stmt)
{
	const char *dbname = NULL;
	Oid			database;

	if (IsA(stmt, CreateExtensionStmt) &&
		strcmp(((CreateExtensionStmt *) stmt)->extname, KS_EXTENSION_NAME) == 0)
		ks_wake_launcher_at_commit(true);
	else if (IsA(stmt, DropStmt) && drops_extension((DropStmt *) stmt))
		ks_wake_launcher_at_commit(false);
	else if (IsA(stmt, DropdbStmt))
		dbname = ((DropdbStmt *) stmt)->dbname;
	else if (IsA(stmt, RenameStmt) && ((RenameStmt *) stmt)->renameType == OBJECT_DATABASE)
		dbname = ((RenameStmt *) stmt)->subname;
	else if (IsA(stmt, AlterDatabaseStmt) &&
			 has_option(((AlterDatabaseStmt *) stmt)->options, "tablespace"))
		dbname = ((AlterDatabaseStmt *) stmt)->dbname;
	else if (IsA(stmt, CreatedbStmt))
	{
		ks_wake_launcher_at_commit(true);
		dbname = option_string(((CreatedbStmt *) stmt)->options, "template");
	}
	if (dbname == NULL)
		return InvalidOid;
	database = get_database_oid(dbname, true);
	if (!OidIsValid(database) || database == MyDatabaseId)
		return InvalidOid;		/* PostgreSQL's own error follows */
	ks_database_clear(database);
	return database;
}

/* After it, or after its error. */
void
ks_database_ddl_after(Oid database)
{
	if (OidIsValid(database))
		ks_database_unblock(database);
}
