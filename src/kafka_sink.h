/*-------------------------------------------------------------------------
 *
 * kafka_sink.h
 *		What every module of kafka_sink needs: postgres.h and compat.h (the
 *		differences between PostgreSQL versions), the extension's and its
 *		schema's names, a topic partition, a worker's partition and a
 *		message as the extension sees them (offsets.c in infra already
 *		reads them), and the conversions of Kafka's timestamps and of bytes.
 *
 *		Owns: only those.  Must not: grow a module's API: each module has
 *		its own header in its stage folder (the GUCs guc.h, shared memory
 *		shmem.h, the pipeline definition catalog/pipeline.h, ...), included
 *		by the files that use it.  Kafka is seen through consumer.h and
 *		producer.h, rdkafka.h only by consumer.c and producer.c
 *		(kafka_client.h).
 *
 *-------------------------------------------------------------------------
 */
#ifndef KAFKA_SINK_H
#define KAFKA_SINK_H

#include "postgres.h"

#include "datatype/timestamp.h"
#include "fmgr.h"

#define KS_EXTENSION_NAME "kafka_sink"

/* API differences across the supported PostgreSQL versions (15 to 18) */
#include "compat.h"
#define KS_SCHEMA "kafka_sink"

typedef struct KsTopicPartition
{
	char	   *topic;
	int32		partition;
} KsTopicPartition;

/* One partition owned by a worker, with its checkpoint and batch range. */
typedef struct KsPartition
{
	char	   *topic;
	int32		partition;
	int64		committed;		/* next offset according to the catalog */
	int64		end;			/* next offset after the current batch */
	int64		messages;		/* messages in the current batch */
	int64		bytes;			/* their key and value bytes */
	int			stat;			/* index into KS_PARTSTATS(), or -1 */
	int64		latest;			/* cached high watermark when the batch closed */
	int64		end_offset;		/* bounded pipelines: stop before this offset; -1 none */
	bool		loss;			/* data loss found in this batch */
	int64		loss_expected;
	int64		loss_available;
	bool		seen;			/* still present in the latest metadata */
} KsPartition;

/* A message as the rest of the extension sees it. */
typedef struct KsMessage
{
	const char *topic;
	int32		partition;
	int64		offset;
	const char *key;			/* NULL when the message has no key */
	size_t		key_len;
	const char *value;			/* NULL for a tombstone */
	size_t		value_len;
	int64		timestamp_ms;	/* -1 when unknown */
	int			part_index;		/* index into the worker's partitions */
	void	   *handle;			/* rd_kafka_message_t, owned by consumer.c */
	const char *headers_json;	/* no handle (a replay): the quarantine's
								 * headers, ks_message_headers_json's text */
} KsMessage;

/* ---- small conversions everyone needs ---- */

/* Unix epoch milliseconds (Kafka's timestamps) <-> TimestampTz */
static inline TimestampTz
ks_epoch_ms_to_timestamptz(int64 ms)
{
	return (TimestampTz) (ms / 1000 - (int64) (POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) * SECS_PER_DAY) *
		USECS_PER_SEC + (ms % 1000) * 1000;
}

static inline int64
ks_timestamptz_to_epoch_ms(TimestampTz ts)
{
	return ts / 1000 + (int64) (POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) * SECS_PER_DAY * 1000;
}

/* bytes as a bytea datum */
static inline Datum
ks_bytea_datum(const char *data, size_t len)
{
	bytea	   *b = palloc(VARHDRSZ + len);

	SET_VARSIZE(b, VARHDRSZ + len);
	memcpy(VARDATA(b), data, len);
	return PointerGetDatum(b);
}

#endif							/* KAFKA_SINK_H */
