/*-------------------------------------------------------------------------
 *
 * database_ddl.h
 *		Statements on databases and on the extension, as the launcher and
 *		the schedulers must hear of them (database_ddl.c).
 *
 *		Owns: the declarations of database_ddl.c.  Must not: declare the
 *		utility hook (catalog_guard.h).
 *
 *-------------------------------------------------------------------------
 */
#ifndef KS_DATABASE_DDL_H
#define KS_DATABASE_DDL_H

#include "kafka_sink.h"

#include "nodes/nodes.h"

extern Oid	ks_database_ddl_before(Node *stmt);
extern void ks_database_ddl_after(Oid database);

#endif							/* KS_DATABASE_DDL_H */
