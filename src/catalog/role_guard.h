/*-------------------------------------------------------------------------
 *
 * role_guard.h
 *		The DROP ROLE guard (role_guard.c): a pipeline's owner cannot be
 *		dropped, called from catalog_guard.c's utility hook.
 *
 *		Owns: the declaration of role_guard.c.  Must not: grow other
 *		utility-hook checks (catalog_guard.c has the hook).
 *
 *-------------------------------------------------------------------------
 */
#ifndef KS_ROLE_GUARD_H
#define KS_ROLE_GUARD_H

#include "kafka_sink.h"


struct DropRoleStmt;
extern void ks_role_guard_check_drop(struct DropRoleStmt *stmt);

#endif							/* KS_ROLE_GUARD_H */
