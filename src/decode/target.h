/*-------------------------------------------------------------------------
 *
 * target.h
 *		The target as decoding sees it (target.c): a table's columns, its
 *		key index and the mappings of fields to columns (KsTarget, decode.h).
 *
 *		Owns: the declarations of target.c.  Must not: define KsTarget
 *		(decode.h does, for every stage that converts rows).
 *
 *-------------------------------------------------------------------------
 */
#ifndef KS_TARGET_H
#define KS_TARGET_H

#include "decode.h"
#include "pipeline.h"

extern KsTarget *ks_target_open(KsPipeline *p);
extern KsTarget *ks_target_open_rel(KsPipeline *p, Oid relid, List *key_columns);
extern char *ks_path_escape_field(const char *name);
extern bool ks_column_written_by_sink(const char *name, KsMode mode);

#endif							/* KS_TARGET_H */
