/*-------------------------------------------------------------------------
 *
 * kafka_client.h
 *		What consumer.c and producer.c share of librdkafka: the only header
 *		that includes rdkafka.h, for those two files alone.
 *
 *		Owns: what consumer.c lends producer.c: setting a property, the
 *		log and the error callbacks.  Must not: be included by any other
 *		file, or declare what the rest of kafka_sink needs (consumer.h,
 *		producer.h).
 *
 *-------------------------------------------------------------------------
 */
#ifndef KS_KAFKA_CLIENT_H
#define KS_KAFKA_CLIENT_H

#include "kafka_sink.h"

#include <librdkafka/rdkafka.h>

/* consumer.c: a property set, or an ERROR that never echoes a secret */
extern void ks_rd_conf_set(rd_kafka_conf_t *conf, const char *name, const char *value);

/* consumer.c: librdkafka's log lines into the ring ks_consumer_emit_logs empties */
extern void ks_rd_log_cb(const rd_kafka_t *rk, int level, const char *fac, const char *buf);

/* consumer.c: client-level errors, for ks_consumer_take_error */
extern void ks_rd_error_cb(rd_kafka_t *rk, int err, const char *reason, void *opaque);

#endif							/* KS_KAFKA_CLIENT_H */
