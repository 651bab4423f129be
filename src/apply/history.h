/*-------------------------------------------------------------------------
 *
 * history.h
 *		Mode history (history.c): the events a batch applies and the
 *		statement that folds them into the versions of their keys.
 *
 *		Owns: history.c's declarations: which events a batch applies and
 *		the text of the history statement.  Must not: run the statement (the
 *		SQL strategy, apply_sql.c, does) or write the catalog.
 *
 *-------------------------------------------------------------------------
 */
#ifndef KS_HISTORY_H
#define KS_HISTORY_H

#include "kafka_sink.h"
#include "apply.h"

extern int	ks_history_rows(KsBatch *batch, int *sel);
extern char *ks_history_sql(KsTarget *t, bool by_hand, List *truncates);

#endif							/* KS_HISTORY_H */
