/*-------------------------------------------------------------------------
 *
 * meta.h
 *		Kafka headers and metadata as fields (meta.c): the names
 *		headers.<name>, kafka.key, kafka.timestamp, kafka.topic,
 *		kafka.partition and kafka.offset, wherever a field path is taken
 *		(mappings, event_id, schema_version_field, the routing template).
 *
 *		Owns: KsMeta, naming a path as metadata and reading its value from
 *		a message.  Must not: convert into columns (decode.c) or look at the
 *		message's value.
 *
 *-------------------------------------------------------------------------
 */
#ifndef KS_META_H
#define KS_META_H

#include "kafka_sink.h"
#include "jsonwalk.h"

typedef enum KsMetaKind
{
	KS_META_NONE = 0,			/* a field of the value */
	KS_META_INVALID,			/* kafka.<unknown>, or headers. without a name */
	KS_META_HEADER,
	KS_META_KEY,
	KS_META_TIMESTAMP,
	KS_META_TOPIC,
	KS_META_PARTITION,
	KS_META_OFFSET
} KsMetaKind;

typedef struct KsMeta
{
	KsMetaKind	kind;
	const char *header;			/* KS_META_HEADER: the header's name */
} KsMeta;

extern KsMetaKind ks_meta_parse(const char *path, KsMeta *meta);
extern void ks_meta_value(KsMessage *m, const KsMeta *meta, KsSlotValue *out);
extern const char *ks_meta_text(KsSlotValue *v);
extern PGDLLEXPORT Datum kafka_sink_check_field_path(PG_FUNCTION_ARGS);

#endif							/* KS_META_H */
