/*-------------------------------------------------------------------------
 *
 * route.h
 *		Routing (route.c): whether a pipeline routes, each message's table
 *		(the template, the targets map), and the batch split by table, each
 *		created, evolved and checked once per batch.
 *
 *		Owns: the declarations of route.c.  Must not: expose its compiled
 *		routing (KsRouting stays route.c's).
 *
 *-------------------------------------------------------------------------
 */
#ifndef KS_ROUTE_H
#define KS_ROUTE_H

#include "apply.h"
#include "pipeline.h"

extern bool ks_routing_enabled(KsPipeline *p);
extern void ks_route_batch(KsBatch *batch);
extern char *ks_route_name(KsPipeline *p, KsMessage *m, char **why);
extern KsTarget *ks_route_open(KsPipeline *p, KsMessage *m);
extern PGDLLEXPORT Datum kafka_sink_check_target_template(PG_FUNCTION_ARGS);
extern PGDLLEXPORT Datum kafka_sink_template_target(PG_FUNCTION_ARGS);

#endif							/* KS_ROUTE_H */
