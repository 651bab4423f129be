/*-------------------------------------------------------------------------
 *
 * consumer.h
 *		The Kafka consumer (consumer.c): the pipeline's client, metadata
 *		and watermark queries, message headers, the consumer-group mirror
 *		of the checkpoint.  Kafka is seen only through these plain
 *		structs; rdkafka.h stays in consumer.c and producer.c.
 *
 *		Owns: KsConsumer (opaque), KsEvent, KsHeader and consumer.c's
 *		calls.  Must not: expose rdkafka.h (kafka_client.h), touch the
 *		catalog or hold a transaction.
 *
 *-------------------------------------------------------------------------
 */
#ifndef KS_CONSUMER_H
#define KS_CONSUMER_H

#include "kafka_sink.h"
#include "pipeline.h"

typedef struct KsConsumer KsConsumer;

typedef enum KsEventKind
{
	KS_EV_NONE,
	KS_EV_MESSAGE,
	KS_EV_EOF,
	KS_EV_OUT_OF_RANGE,
	KS_EV_ERROR
} KsEventKind;

typedef struct KsEvent
{
	KsEventKind kind;
	KsMessage	msg;			/* for KS_EV_MESSAGE; topic/partition/offset for others */
	bool		fatal;
	char		errstr[512];
} KsEvent;

extern KsConsumer *ks_consumer_create(KsPipeline *pipeline, const char *group_suffix);
extern void ks_consumer_destroy(KsConsumer *c);
extern int	ks_consumer_fd(KsConsumer *c);
extern void ks_consumer_drain_fd(KsConsumer *c);
extern bool ks_consumer_poll(KsConsumer *c, KsEvent *ev);
extern void ks_message_release(KsMessage *msg);
extern void ks_consumer_serve(KsConsumer *c);
extern List *ks_consumer_list_partitions(KsConsumer *c, List *topics, const char *pattern,
										 int timeout_ms, char **errmsg);
extern bool ks_consumer_watermarks(KsConsumer *c, const char *topic, int32 partition,
								   int64 *low, int64 *high, int timeout_ms, char **errmsg);
extern bool ks_consumer_offset_for_time(KsConsumer *c, const char *topic, int32 partition,
										int64 ts_ms, int64 *offset, int timeout_ms, char **errmsg);
extern void ks_consumer_assign(KsConsumer *c, KsPartition *parts, int nparts);
extern void ks_consumer_emit_logs(void);
extern bool ks_consumer_cached_watermarks(KsConsumer *c, const char *topic, int32 partition,
										  int64 *low, int64 *high);
extern bool ks_consumer_take_error(char *buf, size_t len);
/* A Kafka header with bytes for a value (NULL: a header without value). */
typedef struct KsHeader
{
	char	   *name;
	char	   *value;
	size_t		value_len;
} KsHeader;

extern char *ks_message_headers_json(KsMessage *msg);
extern List *ks_message_headers(KsMessage *msg);
extern bool ks_message_header_get(KsMessage *msg, const char *name, int idx,
								  const void **value, size_t *size);
extern bool ks_message_header_last(KsMessage *msg, const char *name,
								   const void **value, size_t *size);
extern void ks_check_options(List *options);
extern const char *ks_librdkafka_version(void);
extern char *ks_librdkafka_features(void);

extern const char *ks_consumer_mirror_group(KsConsumer *c);
extern bool ks_consumer_mirror_send(KsConsumer *c, KsPartition *parts, int nparts);
extern int	ks_consumer_mirror_result(KsConsumer *c, char *err, size_t errlen);
extern bool ks_consumer_mirror_pending(KsConsumer *c);

#endif							/* KS_CONSUMER_H */
