/*-------------------------------------------------------------------------
 *
 * offsets.h
 *		The one parser of offsets specs (offsets.c): starting_offsets and
 *		ending_offsets, shared by the validator and the workers.
 *
 *		Owns: KsSpecKind and the one parse of a spec.  Must not: resolve
 *		offsets against Kafka (assignment.c does) or read the catalog.
 *
 *-------------------------------------------------------------------------
 */
#ifndef KS_OFFSETS_H
#define KS_OFFSETS_H

#include "kafka_sink.h"

#include "nodes/pg_list.h"

typedef enum KsSpecKind
{
	KS_SPEC_EARLIEST,
	KS_SPEC_LATEST,
	KS_SPEC_TIMESTAMP,
	KS_SPEC_PARTITIONS
} KsSpecKind;

extern KsSpecKind ks_parse_offsets_spec(const char *spec, const char *what,
										List **per_partition, int64 *ts_ms);
extern PGDLLEXPORT Datum kafka_sink_check_offsets(PG_FUNCTION_ARGS);

#endif							/* KS_OFFSETS_H */
