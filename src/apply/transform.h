/*-------------------------------------------------------------------------
 *
 * transform.h
 *		The declarative transform (transform.c): a pipeline's filter and
 *		computed columns, analyzed against the target and evaluated on the
 *		decoded rows of a batch.
 *
 *		Owns: the declarations of transform.c.  Must not: expose the
 *		compiled form (it is transform.c's own).
 *
 *-------------------------------------------------------------------------
 */
#ifndef KS_TRANSFORM_H
#define KS_TRANSFORM_H

#include "kafka_sink.h"
#include "apply.h"

/* a column an expression may read or compute */
typedef struct KsExprColumn
{
	const char *name;
	Oid			typid;
	int32		typmod;
	Oid			collation;
	bool		readable;		/* has a decoded value (not lineage, history) */
	bool		computable;		/* not a key, order or kafka_sink's own column */
} KsExprColumn;

extern void ks_transform_check(const char *target_name, KsExprColumn *cols, int ncols,
							   const char *filter, List *computed);
extern void ks_transform_check_target(KsPipeline *p, KsTarget *t);
extern void ks_transform_batch(KsBatch *batch, KsBatchTarget *bt);
extern bool ks_transform_filters_out(KsPipeline *p, KsTarget *t, KsRow *r);

#endif							/* KS_TRANSFORM_H */
