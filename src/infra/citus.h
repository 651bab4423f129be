/*-------------------------------------------------------------------------
 *
 * citus.h
 *		What kafka_sink knows of Citus (src/infra/citus.c): whether a table
 *		is a Citus table, and keeping kafka_sink's own extension statements
 *		on the coordinator.
 *
 *		Owns: the read of Citus's pg_dist_partition (only when the citus
 *		extension exists: never a dependency) and the GUC that stops Citus
 *		propagating CREATE/ALTER/DROP EXTENSION kafka_sink.  Must not: build
 *		or run apply statements (apply_sql.c and statements.c do).
 *
 *-------------------------------------------------------------------------
 */
#ifndef KS_CITUS_H
#define KS_CITUS_H

#include "postgres.h"

#include "nodes/parsenodes.h"

/* what a target is for Citus */
typedef enum KsCitusKind
{
	KS_CITUS_NONE = 0,			/* not a Citus table (or no Citus) */
	KS_CITUS_DISTRIBUTED,		/* create_distributed_table */
	KS_CITUS_REFERENCE,			/* create_reference_table */
	KS_CITUS_OTHER				/* a Citus local or single-shard table */
} KsCitusKind;

extern KsCitusKind ks_citus_kind(Oid relid);
extern const char *ks_citus_kind_name(KsCitusKind kind);

/*
 * Around a utility statement: when it is CREATE, ALTER or DROP EXTENSION
 * kafka_sink on a server with Citus loaded, turns Citus's DDL propagation
 * off for it and returns the GUC nest level to end with AtEOXact_GUC();
 * else 0.
 */
extern int	ks_citus_keep_local_begin(Node *stmt);

/*
 * Whether an error of a batch may be Citus's report of a worker node that
 * failed mid-transaction: Citus raises those (a connection marked as
 * essential that failed, a node unreachable at commit) without a SQLSTATE,
 * so as XX000.  True for XX000 while Citus is loaded in this process; the
 * worker retries such a batch a bounded number of times (KS_CITUS_RETRIES).
 */
extern bool ks_citus_maybe_node_failure(int sqlerrcode);
#define KS_CITUS_RETRIES 12

#endif							/* KS_CITUS_H */
