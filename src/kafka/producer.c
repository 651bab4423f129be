/*-------------------------------------------------------------------------
 *
 * producer.c
 *		The Kafka producers: the one behind kafka_sink.produce (one message,
 *		waited for) and the outbox relay's idempotent batch producer.
 *
 * Owns: every rd_kafka_* call of the producing side.  Must not: touch the
 * catalog (the relay, outbox.c, reads and marks rows) or hold a
 * transaction while it waits for acknowledgements.
 *
 *-------------------------------------------------------------------------
 */
#include "kafka_sink.h"
#include "pipeline.h"
#include "kafka_client.h"
#include "kafka_options.h"
#include "hosts.h"
#include "secret_ref.h"
#include "producer.h"

#include "miscadmin.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

/* ---- the producer behind kafka_sink.produce ---- */

typedef struct KsDelivery
{
	bool		done;
	rd_kafka_resp_err_t err;
	int32		partition;
	int64		offset;
} KsDelivery;

static rd_kafka_t *producer = NULL;
static char *producer_servers = NULL;

static void
delivery_cb(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque)
{
	KsDelivery *d = (KsDelivery *) m->_private;

	(void) rk;
	(void) opaque;

	if (d == NULL)
		return;
	d->done = true;
	d->err = m->err;
	d->partition = m->partition;
	d->offset = m->offset;
}

static rd_kafka_t *
get_producer(const char *servers)
{
	rd_kafka_conf_t *conf;
	char		errstr[512];

	/* the cached client too: kafka_sink.allowed_hosts may have changed */
	ks_hosts_check_brokers("bootstrap_servers", servers);
	if (producer && strcmp(producer_servers, servers) == 0)
		return producer;
	if (producer)
	{
		rd_kafka_flush(producer, 1000);
		rd_kafka_destroy(producer);
		producer = NULL;
		pfree(producer_servers);
	}
	/* produce() takes no Kafka options: its client is all kafka_sink's own */
	ks_options_check(NIL, GetUserId(), KS_USE_PRODUCER);
	conf = rd_kafka_conf_new();
	ks_rd_conf_set(conf, "bootstrap.servers", servers);
	ks_rd_conf_set(conf, "client.id", "kafka_sink.produce");
	ks_rd_conf_set(conf, "enable.idempotence", "true");
	ks_rd_conf_set(conf, "linger.ms", "0");
	ks_rd_conf_set(conf, "message.timeout.ms", "5000");
	ks_rd_conf_set(conf, "log.queue", "true");
	ks_rd_conf_set(conf, "sasl.kerberos.min.time.before.relogin", "0");
	rd_kafka_conf_set_log_cb(conf, ks_rd_log_cb);
	rd_kafka_conf_set_dr_msg_cb(conf, delivery_cb);
	producer = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof(errstr));
	if (producer == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_CONNECTION_FAILURE),
				 errmsg("could not create a Kafka producer"),
				 errdetail("librdkafka: %s.", errstr)));
	rd_kafka_set_log_queue(producer, NULL);
	producer_servers = MemoryContextStrdup(TopMemoryContext, servers);
	return producer;
}

/*
 * Produces one message and waits for its acknowledgement.  headers is a
 * list of KsOption (name, value); partition -1 lets the partitioner choose.
 */
void
ks_produce(const char *servers, const char *topic,
		   const char *key, size_t key_len, const char *value, size_t value_len,
		   List *headers, int32 partition, int32 *out_partition, int64 *out_offset)
{
	rd_kafka_t *rk = get_producer(servers);
	rd_kafka_headers_t *hdrs = NULL;
	rd_kafka_resp_err_t err;
	volatile KsDelivery d = {0};
	ListCell   *lc;

	if (headers != NIL)
	{
		hdrs = rd_kafka_headers_new(list_length(headers));
		foreach(lc, headers)
		{
			KsOption   *h = lfirst(lc);

			rd_kafka_header_add(hdrs, h->name, -1, h->value, h->value ? -1 : 0);
		}
	}
	err = rd_kafka_producev(rk,
							RD_KAFKA_V_TOPIC(topic),
							RD_KAFKA_V_PARTITION(partition < 0 ? RD_KAFKA_PARTITION_UA : partition),
							RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
							RD_KAFKA_V_KEY((void *) key, key_len),
							RD_KAFKA_V_VALUE((void *) value, value_len),
							RD_KAFKA_V_HEADERS(hdrs),
							RD_KAFKA_V_OPAQUE((void *) &d),
							RD_KAFKA_V_END);
	if (err != RD_KAFKA_RESP_ERR_NO_ERROR)
	{
		if (hdrs)
			rd_kafka_headers_destroy(hdrs);
		ereport(ERROR,
				(errcode(ERRCODE_CONNECTION_FAILURE),
				 errmsg("could not produce to topic \"%s\"", topic),
				 errdetail("librdkafka: %s.", rd_kafka_err2str(err))));
	}

	/*
	 * Wait for the delivery report.  On cancel the message may still be
	 * delivered later: produce() is not transactional.
	 */
	PG_TRY();
	{
		while (!d.done)
		{
			rd_kafka_poll(rk, 50);
			CHECK_FOR_INTERRUPTS();
		}
	}
	PG_CATCH();
	{
		/* the callback must not write into a dead stack frame */
		rd_kafka_purge(rk, RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT);
		while (!d.done && rd_kafka_outq_len(rk) > 0)
			rd_kafka_poll(rk, 10);
		PG_RE_THROW();
	}
	PG_END_TRY();
	ks_consumer_emit_logs();

	if (d.err != RD_KAFKA_RESP_ERR_NO_ERROR)
		ereport(ERROR,
				(errcode(ERRCODE_CONNECTION_FAILURE),
				 errmsg("could not produce to topic \"%s\"", topic),
				 errdetail("librdkafka: %s.", rd_kafka_err2str(d.err)),
				 errhint("Check that the broker at \"%s\" is reachable and the topic exists.", servers)));
	*out_partition = d.partition;
	*out_offset = d.offset;
}

/* ---- the outbox relay's producer ---- */

struct KsProducer
{
	rd_kafka_t *rk;
};

static void
batch_delivery_cb(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque)
{
	KsOutMsg   *out = (KsOutMsg *) m->_private;

	(void) rk;
	(void) opaque;
	if (out == NULL)
		return;
	out->done = true;
	out->err = m->err;
	out->partition_out = m->partition;
	out->offset_out = m->offset;
	if (m->err)
		snprintf(out->errstr, sizeof(out->errstr), "%s", rd_kafka_err2str(m->err));
}

/*
 * An idempotent producer: no duplicates from its own retries and the order
 * of messages kept per partition (librdkafka's enable.idempotence).
 */
KsProducer *
ks_producer_create(const char *servers, List *options)
{
	KsProducer *p;
	rd_kafka_conf_t *conf;
	char		errstr[512];
	char	  **values;
	ListCell   *lc;

	/* the relay's options come from its own configuration */
	ks_options_check(options, GetUserId(), KS_USE_PRODUCER);
	ks_hosts_check_brokers("kafka_sink.outbox_bootstrap_servers", servers);
	values = ks_option_values(options, "Kafka option", GetUserId());
	p = palloc0(sizeof(KsProducer));
	conf = rd_kafka_conf_new();
	ks_rd_conf_set(conf, "bootstrap.servers", servers);
	ks_rd_conf_set(conf, "client.id", "kafka_sink.outbox");
	ks_rd_conf_set(conf, "enable.idempotence", "true");
	ks_rd_conf_set(conf, "linger.ms", "5");
	ks_rd_conf_set(conf, "message.timeout.ms", "30000");
	ks_rd_conf_set(conf, "log.queue", "true");
	ks_rd_conf_set(conf, "sasl.kerberos.min.time.before.relogin", "0");
	foreach(lc, options)
	{
		KsOption   *o = lfirst(lc);

		ks_rd_conf_set(conf, o->name, values[foreach_current_index(lc)]);
		ks_secret_free(o, values[foreach_current_index(lc)]);
	}
	rd_kafka_conf_set_log_cb(conf, ks_rd_log_cb);
	rd_kafka_conf_set_error_cb(conf, ks_rd_error_cb);
	rd_kafka_conf_set_dr_msg_cb(conf, batch_delivery_cb);
	p->rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof(errstr));
	if (p->rk == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_CONNECTION_FAILURE),
				 errmsg("could not create a Kafka producer"),
				 errdetail("librdkafka: %s.", errstr)));
	rd_kafka_set_log_queue(p->rk, NULL);
	return p;
}

/*
 * Produces every message in order and waits until each has a delivery
 * report (or timeout_ms passed; the ones left have done = false).
 * Interrupts are served while waiting.
 */
void
ks_producer_send_all(KsProducer *p, KsOutMsg *msgs, int n, int timeout_ms)
{
	TimestampTz deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), timeout_ms);

	for (int i = 0; i < n; i++)
	{
		KsOutMsg   *m = &msgs[i];
		rd_kafka_headers_t *hdrs = rd_kafka_headers_new(list_length(m->raw_headers) +
														list_length(m->headers) + 1);
		rd_kafka_resp_err_t err;
		ListCell   *lc;

		m->done = false;
		m->err = 0;
		foreach(lc, m->raw_headers)
		{
			KsHeader   *h = lfirst(lc);

			rd_kafka_header_add(hdrs, h->name, -1, h->value, h->value ? (ssize_t) h->value_len : 0);
		}
		foreach(lc, m->headers)
		{
			KsOption   *h = lfirst(lc);

			rd_kafka_header_add(hdrs, h->name, -1, h->value, h->value ? -1 : 0);
		}
		for (;;)
		{
			err = rd_kafka_producev(p->rk,
									RD_KAFKA_V_TOPIC(m->topic),
									RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
									RD_KAFKA_V_KEY((void *) m->key, m->key_len),
									RD_KAFKA_V_VALUE((void *) m->value, m->value_len),
									RD_KAFKA_V_HEADERS(hdrs),
									RD_KAFKA_V_OPAQUE((void *) m),
									RD_KAFKA_V_END);
			if (err != RD_KAFKA_RESP_ERR__QUEUE_FULL)
				break;
			rd_kafka_poll(p->rk, 100);
			CHECK_FOR_INTERRUPTS();
		}
		if (err != RD_KAFKA_RESP_ERR_NO_ERROR)
		{
			rd_kafka_headers_destroy(hdrs);
			m->done = true;
			m->err = err;
			snprintf(m->errstr, sizeof(m->errstr), "%s", rd_kafka_err2str(err));
		}
	}
	for (;;)
	{
		bool		all = true;

		for (int i = 0; i < n && all; i++)
			if (!msgs[i].done)
				all = false;
		if (all || GetCurrentTimestamp() >= deadline)
			break;
		rd_kafka_poll(p->rk, 50);
		CHECK_FOR_INTERRUPTS();
	}
	/* nothing may still point at msgs once we return */
	if (rd_kafka_outq_len(p->rk) > 0)
	{
		rd_kafka_purge(p->rk, RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT);
		while (rd_kafka_outq_len(p->rk) > 0)
			rd_kafka_poll(p->rk, 10);
	}
}

