/*-------------------------------------------------------------------------
 *
 * producer.h
 *		The Kafka producers (producer.c): the one behind kafka_sink.produce
 *		and the outbox relay's batch producer.
 *
 *		Owns: KsProducer (opaque), KsOutMsg and the two ways to send.
 *		Must not: expose rdkafka.h (kafka_client.h) or touch the catalog
 *		(the relay, outbox.c, reads and marks the rows).
 *
 *-------------------------------------------------------------------------
 */
#ifndef KS_PRODUCER_H
#define KS_PRODUCER_H

#include "kafka_sink.h"
#include "consumer.h"

typedef struct KsProducer KsProducer;

typedef struct KsOutMsg
{
	const char *topic;
	const char *key;
	size_t		key_len;
	const char *value;
	size_t		value_len;
	List	   *raw_headers;	/* of KsHeader, sent first */
	List	   *headers;		/* of KsOption, sent after raw_headers */
	/* set by ks_producer_send_all */
	bool		done;
	int			err;
	char		errstr[256];
	int32		partition_out;
	int64		offset_out;
} KsOutMsg;

extern KsProducer *ks_producer_create(const char *servers, List *options);
extern void ks_producer_send_all(KsProducer *p, KsOutMsg *msgs, int n, int timeout_ms);
extern void ks_produce(const char *servers, const char *topic,
					   const char *key, size_t key_len, const char *value, size_t value_len,
					   List *headers, int32 partition, int32 *out_partition, int64 *out_offset);

#endif							/* KS_PRODUCER_H */
