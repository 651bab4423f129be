/*-------------------------------------------------------------------------
 *
 * consumer.c
 *		The Kafka consumer: the pipeline's client, metadata and watermark
 *		queries, option values checked by librdkafka, message headers, the
 *		consumer-group mirror of the checkpoint, and the log ring and error
 *		callback every client of this process shares (kafka_client.h).
 *		Which options may be set at all is decided by kafka_options.c,
 *		asked right before every client is built.
 *
 * Owns: every rd_kafka_* call of the consumer side.  Must not: touch the
 * catalog or hold a transaction; only this file and producer.c include
 * rdkafka.h.
 *
 * librdkafka's own threads never call into PostgreSQL: logs and errors are
 * routed to the consumer queue (log.queue) and served by the worker's
 * thread in ks_consumer_poll; the log callback only copies lines into a
 * small ring that ks_consumer_emit_logs turns into ereport(LOG) later.
 *
 *-------------------------------------------------------------------------
 */
#include "kafka_sink.h"
#include "pipeline.h"
#include "kafka_options.h"
#include "hosts.h"
#include "secret_ref.h"
#include "consumer.h"
#include "producer.h"
#include "jsontree.h"

#include <fcntl.h>
#include <pthread.h>
#include <time.h>
#include <unistd.h>

#include "kafka_client.h"

#include "lib/stringinfo.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "catalog/pg_collation.h"
#include "regex/regex.h"
#include "utils/builtins.h"
#include "utils/formatting.h"
#include "utils/json.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

struct KsConsumer
{
	rd_kafka_t *rk;
	rd_kafka_queue_t *queue;
	int			pipefd[2];
	KsPipeline *pipeline;
	/* the consumer group the checkpoints are mirrored to (kafka_options' group.id) */
	char	   *mirror_group;
	rd_kafka_queue_t *mirror_queue; /* results of AlterConsumerGroupOffsets */
	bool		mirror_in_flight;
};

/* ---- log ring: filled by any thread, emitted by the backend's thread ---- */

#define KS_LOG_RING 32
#define KS_LOG_LEN 400
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static char log_ring[KS_LOG_RING][KS_LOG_LEN];
static int	log_level[KS_LOG_RING];
static int	log_head = 0;
static int	log_count = 0;

void
ks_rd_log_cb(const rd_kafka_t *rk, int level, const char *fac, const char *buf)
{
	(void) rk;
	pthread_mutex_lock(&log_lock);
	snprintf(log_ring[log_head], KS_LOG_LEN, "%s: %s", fac, buf);
	log_level[log_head] = level;
	log_head = (log_head + 1) % KS_LOG_RING;
	if (log_count < KS_LOG_RING)
		log_count++;
	pthread_mutex_unlock(&log_lock);
}

void
ks_consumer_emit_logs(void)
{
	char		lines[KS_LOG_RING][KS_LOG_LEN];
	int			levels[KS_LOG_RING];
	int			n;

	pthread_mutex_lock(&log_lock);
	n = log_count;
	for (int i = 0; i < n; i++)
	{
		int			idx = (log_head - n + i + KS_LOG_RING) % KS_LOG_RING;

		memcpy(lines[i], log_ring[idx], KS_LOG_LEN);
		levels[i] = log_level[idx];
	}
	log_count = 0;
	pthread_mutex_unlock(&log_lock);

	/*
	 * librdkafka's debug output (syslog level 7, what the owner's "debug"
	 * option turns on) goes to DEBUG1: an owner must not be able to fill the
	 * server log; set log_min_messages = debug1 to see it.
	 */
	for (int i = 0; i < n; i++)
		ereport(levels[i] >= 7 ? DEBUG1 : LOG,
				(errmsg("librdkafka: %s", lines[i])));
}

/* ---- options ---- */

void
ks_rd_conf_set(rd_kafka_conf_t *conf, const char *name, const char *value)
{
	char		errstr[512];

	if (rd_kafka_conf_set(conf, name, value, errstr, sizeof(errstr)) != RD_KAFKA_CONF_OK)
	{
		rd_kafka_conf_destroy(conf);
		/* librdkafka's message may quote the value */
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid Kafka option \"%s\"", name),
				 ks_option_is_secret(name) ? 0 : errdetail("librdkafka: %s.", errstr),
				 errhint("See the librdkafka CONFIGURATION.md for the valid properties and values.")));
	}
}

/*
 * Checks each value against librdkafka, without ever echoing a value (it
 * may be a secret).  Only for options that passed ks_options_check: setting
 * a property can itself run code (plugin.library.paths loads its libraries
 * in rd_kafka_conf_set).
 */
void
ks_check_options(List *options)
{
	rd_kafka_conf_t *conf = rd_kafka_conf_new();
	ListCell   *lc;

	foreach(lc, options)
	{
		KsOption   *o = lfirst(lc);
		char		errstr[512];

		/* a reference is read by the worker, when it builds its client */
		if (o->ref != KS_REF_NONE)
			continue;
		if (rd_kafka_conf_set(conf, o->name, o->value, errstr, sizeof(errstr)) != RD_KAFKA_CONF_OK)
		{
			rd_kafka_conf_destroy(conf);
			if (ks_option_is_secret(o->name))
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("invalid value for Kafka option \"%s\"", o->name),
						 errhint("See the librdkafka CONFIGURATION.md for the valid properties and values.")));
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("invalid Kafka option \"%s\"", o->name),
					 errdetail("librdkafka: %s.", errstr),
					 errhint("See the librdkafka CONFIGURATION.md for the valid properties and values.")));
		}
	}
	rd_kafka_conf_destroy(conf);
}

/* ---- the pipeline consumer ---- */

/* The last client-level error (broker down, authentication failed, ...). */
static char last_error[512];
static bool last_error_set = false;

/*
 * The last error about one broker (authentication, TLS), kept for a while:
 * "all brokers are down" is its consequence and would hide it.  librdkafka
 * 2.x reports an identical broker error once per 30 s but "all brokers are
 * down" at each change, so without this the status of a pipeline with a
 * wrong password or a refused client certificate only says "1/1 brokers are
 * down".
 */
#define KS_ERROR_CAUSE_SECS 300
static char last_cause[440];
static time_t last_cause_at = 0;

/*
 * The consumer has a group.id only because librdkafka's assign() needs one
 * (2.0.2: "Local: Unknown group" without it); it never joins the group nor
 * commits to it, yet librdkafka looks up the group's coordinator and
 * reports that connection's failures as "GroupCoordinator: ...".  They say
 * nothing about this pipeline (the broker's own connection reports a real
 * outage): debug output, never the pipeline's error.
 */
static bool
unused_group_noise(const char *errstr)
{
	return strncmp(errstr, "GroupCoordinator", strlen("GroupCoordinator")) == 0;
}

void
ks_rd_error_cb(rd_kafka_t *rk, int err, const char *reason, void *opaque)
{
	time_t		now = time(NULL);

	(void) opaque;
	if (unused_group_noise(reason))
	{
		ks_rd_log_cb(rk, 7, "ERROR", reason);
		return;
	}
	/* served on the worker's thread through the consumer queue */
	ks_rd_log_cb(rk, err == RD_KAFKA_RESP_ERR__FATAL ? 3 : 4, "ERROR", reason);
	pthread_mutex_lock(&log_lock);
	if (err == RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN && last_cause_at != 0 &&
		now - last_cause_at < KS_ERROR_CAUSE_SECS)
		snprintf(last_error, sizeof(last_error), "%s: %s (last broker error: %s)",
				 rd_kafka_err2name(err), reason, last_cause);
	else
	{
		snprintf(last_error, sizeof(last_error), "%s: %s", rd_kafka_err2name(err), reason);
		if (err != RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN)
		{
			snprintf(last_cause, sizeof(last_cause), "%s: %s", rd_kafka_err2name(err), reason);
			last_cause_at = now;
		}
	}
	last_error_set = true;
	pthread_mutex_unlock(&log_lock);
}

/* Takes the last client-level error, if one came since the last call. */
bool
ks_consumer_take_error(char *buf, size_t len)
{
	bool		found;

	pthread_mutex_lock(&log_lock);
	found = last_error_set;
	if (found)
		strlcpy(buf, last_error, len);
	last_error_set = false;
	pthread_mutex_unlock(&log_lock);
	return found;
}

KsConsumer *
ks_consumer_create(KsPipeline *p, const char *group_suffix)
{
	KsConsumer *c;
	rd_kafka_conf_t *conf;
	char		errstr[512];
	char	   *group;
	char	  **values;
	ListCell   *lc;

	/*
	 * The catalog is data: whatever wrote it, nothing reaches librdkafka
	 * that the allow-list refuses for this pipeline's owner.  Before
	 * rd_kafka_conf_new, so that a refused option never touches librdkafka.
	 */
	ks_options_check(p->security.options, p->security.owner, KS_USE_CONSUMER);
	ks_hosts_check_brokers("bootstrap_servers", p->source.bootstrap_servers);

	values = ks_option_values(p->security.options, "Kafka option", p->security.owner);
	c = palloc0(sizeof(KsConsumer));
	conf = rd_kafka_conf_new();
	c->pipeline = p;
	c->pipefd[0] = c->pipefd[1] = -1;
	/* a broker error of an earlier consumer is no cause of this one's */
	pthread_mutex_lock(&log_lock);
	last_cause_at = 0;
	pthread_mutex_unlock(&log_lock);

	ks_rd_conf_set(conf, "bootstrap.servers", p->source.bootstrap_servers);
	/* needed by assign() only (unused_group_noise): never joined nor committed to */
	group = psprintf("kafka_sink.%s%s", p->name, group_suffix ? group_suffix : "");
	ks_rd_conf_set(conf, "group.id", group);
	ks_rd_conf_set(conf, "client.id", "kafka_sink");
	ks_rd_conf_set(conf, "enable.auto.commit", "false");
	ks_rd_conf_set(conf, "enable.auto.offset.store", "false");
	ks_rd_conf_set(conf, "auto.offset.reset", "error");
	ks_rd_conf_set(conf, "enable.partition.eof", "true");
	ks_rd_conf_set(conf, "isolation.level", "read_committed");
	ks_rd_conf_set(conf, "log.queue", "true");
	/* never run sasl.kerberos.kinit.cmd (a shell line) for GSSAPI */
	ks_rd_conf_set(conf, "sasl.kerberos.min.time.before.relogin", "0");
	/*
	 * librdkafka 2.0.2 backs a partition's fetcher off for
	 * fetch.error.backoff.ms whenever queued.min.messages is exceeded (its
	 * issue 2879).  Keep the pre-fetch queue well above a whole batch so the
	 * threshold is rarely hit, and the backoff short when it is.  With a
	 * floor of 100,000 a worker that decodes fast emptied the queue faster
	 * than it refilled (40-80 ms waits every few batches of 50,000); at
	 * 1,000,000 those waits went away (docs/performance.md).  What bounds
	 * the queue is then queued.max.messages.kbytes, which librdkafka applies
	 * per partition here (64 MB by default, so 256 MB more worker RSS on 4
	 * partitions).  A quarter of max_batch_bytes per partition (16 MB by
	 * default) was as fast while applying took most of a batch's time; once
	 * the heap apply made applying faster, the queue ran dry and batches
	 * waited 100-160 ms for Kafka (0.7 s of a 3.5 s run): half of
	 * max_batch_bytes (32 MB by default) removed the waits for ~70 MB more
	 * peak RSS on 4 partitions (docs/performance.md).
	 */
	ks_rd_conf_set(conf, "queued.min.messages",
			 psprintf("%lld", (long long) Max(1000000, Min(p->batching.max_offsets_per_batch * 4, 10000000))));
	ks_rd_conf_set(conf, "queued.max.messages.kbytes",
			 psprintf("%lld", (long long) Max(16384, Min(p->batching.max_batch_bytes / 2048, 2097151))));
	ks_rd_conf_set(conf, "fetch.error.backoff.ms", "10");
	ks_rd_conf_set(conf, "reconnect.backoff.max.ms", "2000");
	rd_kafka_conf_set_log_cb(conf, ks_rd_log_cb);
	rd_kafka_conf_set_error_cb(conf, ks_rd_error_cb);

	foreach(lc, p->security.options)
	{
		KsOption   *o = lfirst(lc);

		/*
		 * group.id names the group the checkpoints are mirrored to, never
		 * this consumer's own group: this client must not read that group's
		 * offsets, nor look like one of its members.
		 */
		char	   *value = values[foreach_current_index(lc)];

		if (strcmp(o->name, "group.id") == 0)
		{
			c->mirror_group = pstrdup(o->value);
			continue;
		}
		ks_rd_conf_set(conf, o->name, value);
		ks_secret_free(o, value);
	}

	c->rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, errstr, sizeof(errstr));
	if (c->rk == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_CONNECTION_FAILURE),
				 errmsg("could not create a Kafka consumer"),
				 errdetail("librdkafka: %s.", errstr)));
	rd_kafka_set_log_queue(c->rk, NULL);
	rd_kafka_poll_set_consumer(c->rk);
	c->queue = rd_kafka_queue_get_consumer(c->rk);

	if (pipe(c->pipefd) != 0)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not create a pipe: %m")));
	fcntl(c->pipefd[0], F_SETFL, O_NONBLOCK);
	fcntl(c->pipefd[1], F_SETFL, O_NONBLOCK);
	rd_kafka_queue_io_event_enable(c->queue, c->pipefd[1], "1", 1);
	return c;
}

void
ks_consumer_destroy(KsConsumer *c)
{
	if (c == NULL)
		return;
	if (c->queue)
	{
		rd_kafka_queue_io_event_enable(c->queue, -1, NULL, 0);
		rd_kafka_queue_destroy(c->queue);
	}
	if (c->mirror_queue)
	{
		rd_kafka_queue_io_event_enable(c->mirror_queue, -1, NULL, 0);
		rd_kafka_queue_destroy(c->mirror_queue);
	}
	if (c->rk)
	{
		rd_kafka_assign(c->rk, NULL);
		rd_kafka_destroy_flags(c->rk, RD_KAFKA_DESTROY_F_NO_CONSUMER_CLOSE);
	}
	if (c->pipefd[0] >= 0)
		close(c->pipefd[0]);
	if (c->pipefd[1] >= 0)
		close(c->pipefd[1]);
	pfree(c);
}

int
ks_consumer_fd(KsConsumer *c)
{
	return c->pipefd[0];
}

void
ks_consumer_drain_fd(KsConsumer *c)
{
	char		buf[256];

	while (read(c->pipefd[0], buf, sizeof(buf)) > 0)
		;
}

/*
 * Takes one event off the consumer queue without blocking.  Returns false
 * when the queue is empty.
 */
bool
ks_consumer_poll(KsConsumer *c, KsEvent *ev)
{
	rd_kafka_message_t *m = rd_kafka_consumer_poll(c->rk, 0);

	memset(ev, 0, sizeof(KsEvent));
	if (m == NULL)
	{
		ev->kind = KS_EV_NONE;
		return false;
	}
	if (m->rkt)
		ev->msg.topic = rd_kafka_topic_name(m->rkt);
	ev->msg.partition = m->partition;
	ev->msg.offset = m->offset;

	if (m->err == RD_KAFKA_RESP_ERR_NO_ERROR)
	{
		rd_kafka_timestamp_type_t tstype;

		ev->kind = KS_EV_MESSAGE;
		ev->msg.key = m->key;
		ev->msg.key_len = m->key_len;
		ev->msg.value = m->payload;
		ev->msg.value_len = m->len;
		ev->msg.timestamp_ms = rd_kafka_message_timestamp(m, &tstype);
		ev->msg.handle = m;
		return true;
	}

	if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF)
		ev->kind = KS_EV_EOF;
	else if (m->err == RD_KAFKA_RESP_ERR__AUTO_OFFSET_RESET ||
			 m->err == RD_KAFKA_RESP_ERR_OFFSET_OUT_OF_RANGE)
		ev->kind = KS_EV_OUT_OF_RANGE;
	else
	{
		ev->kind = KS_EV_ERROR;
		ev->fatal = (m->err == RD_KAFKA_RESP_ERR__FATAL);
		snprintf(ev->errstr, sizeof(ev->errstr), "%s", rd_kafka_message_errstr(m));
		if (!ev->fatal && unused_group_noise(ev->errstr))
			ev->kind = KS_EV_NONE;
	}
	/* topic names live as long as the consumer; copy nothing else */
	if (ev->msg.topic)
		ev->msg.topic = pstrdup(ev->msg.topic);
	rd_kafka_message_destroy(m);
	return true;
}

/*
 * Serves the consumer queue while the worker has no assignment yet, so that
 * librdkafka's error and log callbacks run (an authentication failure, for
 * one, is only reported there).  Nothing else is queued without partitions.
 */
void
ks_consumer_serve(KsConsumer *c)
{
	rd_kafka_message_t *m;

	while ((m = rd_kafka_consumer_poll(c->rk, 0)) != NULL)
		rd_kafka_message_destroy(m);
}

void
ks_message_release(KsMessage *msg)
{
	if (msg->handle)
		rd_kafka_message_destroy((rd_kafka_message_t *) msg->handle);
	msg->handle = NULL;
}

static int
cmp_tp(const ListCell *a, const ListCell *b)
{
	KsTopicPartition *x = lfirst(a);
	KsTopicPartition *y = lfirst(b);
	int			r = strcmp(x->topic, y->topic);

	if (r != 0)
		return r;
	return (x->partition > y->partition) - (x->partition < y->partition);
}

/*
 * Lists the partitions of the given topics, or of every topic matching
 * pattern (a PostgreSQL regular expression).  Returns NULL and sets errmsg
 * when the broker cannot be asked.
 */
List *
ks_consumer_list_partitions(KsConsumer *c, List *topics, const char *pattern,
							int timeout_ms, char **errmsg)
{
	const struct rd_kafka_metadata *md;
	rd_kafka_resp_err_t err;
	List	   *result = NIL;
	text	   *pat = pattern ? cstring_to_text(pattern) : NULL;

	*errmsg = NULL;
	err = rd_kafka_metadata(c->rk, 1, NULL, &md, timeout_ms);
	if (err != RD_KAFKA_RESP_ERR_NO_ERROR)
	{
		*errmsg = psprintf("could not fetch topic metadata: %s", rd_kafka_err2str(err));
		return NIL;
	}
	for (int i = 0; i < md->topic_cnt; i++)
	{
		const struct rd_kafka_metadata_topic *t = &md->topics[i];
		bool		wanted = false;

		if (t->err != RD_KAFKA_RESP_ERR_NO_ERROR)
			continue;
		if (pat)
			wanted = strncmp(t->topic, "__", 2) != 0 &&
				RE_compile_and_execute(pat, t->topic, strlen(t->topic),
									   REG_ADVANCED, C_COLLATION_OID, 0, NULL);
		else
		{
			ListCell   *lc;

			foreach(lc, topics)
				if (strcmp((char *) lfirst(lc), t->topic) == 0)
					wanted = true;
		}
		if (!wanted)
			continue;
		for (int j = 0; j < t->partition_cnt; j++)
		{
			KsTopicPartition *tp = palloc(sizeof(KsTopicPartition));

			tp->topic = pstrdup(t->topic);
			tp->partition = t->partitions[j].id;
			result = lappend(result, tp);
		}
	}
	rd_kafka_metadata_destroy(md);
	list_sort(result, cmp_tp);
	return result;
}

bool
ks_consumer_watermarks(KsConsumer *c, const char *topic, int32 partition,
					   int64 *low, int64 *high, int timeout_ms, char **errmsg)
{
	int64_t		lo,
				hi;
	rd_kafka_resp_err_t err;

	err = rd_kafka_query_watermark_offsets(c->rk, topic, partition, &lo, &hi, timeout_ms);
	if (err != RD_KAFKA_RESP_ERR_NO_ERROR)
	{
		*errmsg = psprintf("could not read the watermarks of %s [%d]: %s",
						   topic, partition, rd_kafka_err2str(err));
		return false;
	}
	*low = lo;
	*high = hi;
	return true;
}

/*
 * The watermarks librdkafka last saw in fetch responses: no network round
 * trip.  False when it has none yet.
 */
bool
ks_consumer_cached_watermarks(KsConsumer *c, const char *topic, int32 partition,
							  int64 *low, int64 *high)
{
	int64_t		lo = -1,
				hi = -1;

	if (rd_kafka_get_watermark_offsets(c->rk, topic, partition, &lo, &hi) != RD_KAFKA_RESP_ERR_NO_ERROR ||
		hi < 0)
		return false;
	*low = lo;
	*high = hi;
	return true;
}

/* The first offset whose timestamp is >= ts_ms; -1 when there is none. */
bool
ks_consumer_offset_for_time(KsConsumer *c, const char *topic, int32 partition,
							int64 ts_ms, int64 *offset, int timeout_ms, char **errmsg)
{
	rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(1);
	rd_kafka_resp_err_t err;

	rd_kafka_topic_partition_list_add(l, topic, partition)->offset = ts_ms;
	err = rd_kafka_offsets_for_times(c->rk, l, timeout_ms);
	if (err == RD_KAFKA_RESP_ERR_NO_ERROR)
		err = l->elems[0].err;
	if (err != RD_KAFKA_RESP_ERR_NO_ERROR)
	{
		*errmsg = psprintf("could not look up offsets by time for %s [%d]: %s",
						   topic, partition, rd_kafka_err2str(err));
		rd_kafka_topic_partition_list_destroy(l);
		return false;
	}
	*offset = l->elems[0].offset;
	rd_kafka_topic_partition_list_destroy(l);
	return true;
}

/*
 * Assigns exactly these partitions, each at its checkpoint.  A new
 * assignment discards whatever librdkafka had fetched ahead, so this is
 * also how the worker seeks back after a rollback.
 */
void
ks_consumer_assign(KsConsumer *c, KsPartition *parts, int nparts)
{
	rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(Max(nparts, 1));
	rd_kafka_resp_err_t err;

	for (int i = 0; i < nparts; i++)
		rd_kafka_topic_partition_list_add(l, parts[i].topic, parts[i].partition)->offset =
			parts[i].committed;
	err = rd_kafka_assign(c->rk, l);
	rd_kafka_topic_partition_list_destroy(l);
	if (err != RD_KAFKA_RESP_ERR_NO_ERROR)
		ereport(ERROR,
				(errcode(ERRCODE_CONNECTION_FAILURE),
				 errmsg("could not assign Kafka partitions"),
				 errdetail("librdkafka: %s.", rd_kafka_err2str(err))));
}

/* ---- mirroring the checkpoint to a consumer group ---- */

/* The group kafka_options names (group.id), or NULL. */
const char *
ks_consumer_mirror_group(KsConsumer *c)
{
	return c->mirror_group;
}

/*
 * Commits the checkpoint of these partitions (their committed offsets) to
 * the mirror group, without waiting: AlterConsumerGroupOffsets through the
 * Admin API, which commits as no member of the group (generation -1), so
 * the broker never takes this client for a member and nothing rebalances.
 * The broker refuses it while the group has active members.  At most one
 * request is in flight: returns false, sending nothing, while one is.  The
 * result comes back through ks_consumer_mirror_result; it wakes the same
 * pipe as the consumer queue.
 */
bool
ks_consumer_mirror_send(KsConsumer *c, KsPartition *parts, int nparts)
{
	rd_kafka_topic_partition_list_t *l;
	rd_kafka_AlterConsumerGroupOffsets_t *req;
	rd_kafka_AdminOptions_t *opts;
	char		errstr[256];

	if (c->mirror_group == NULL || c->mirror_in_flight)
		return false;
	l = rd_kafka_topic_partition_list_new(Max(nparts, 1));
	for (int i = 0; i < nparts; i++)
		if (parts[i].committed >= 0)
			rd_kafka_topic_partition_list_add(l, parts[i].topic, parts[i].partition)->offset =
				parts[i].committed;
	if (l->cnt == 0)
	{
		rd_kafka_topic_partition_list_destroy(l);
		return true;
	}
	if (c->mirror_queue == NULL)
	{
		c->mirror_queue = rd_kafka_queue_new(c->rk);
		rd_kafka_queue_io_event_enable(c->mirror_queue, c->pipefd[1], "1", 1);
	}
	req = rd_kafka_AlterConsumerGroupOffsets_new(c->mirror_group, l);
	opts = rd_kafka_AdminOptions_new(c->rk, RD_KAFKA_ADMIN_OP_ALTERCONSUMERGROUPOFFSETS);
	rd_kafka_AdminOptions_set_request_timeout(opts, 10000, errstr, sizeof(errstr));
	rd_kafka_AlterConsumerGroupOffsets(c->rk, &req, 1, opts, c->mirror_queue);
	rd_kafka_AdminOptions_destroy(opts);
	rd_kafka_AlterConsumerGroupOffsets_destroy(req);
	rd_kafka_topic_partition_list_destroy(l);
	c->mirror_in_flight = true;
	return true;
}

bool
ks_consumer_mirror_pending(KsConsumer *c)
{
	return c->mirror_in_flight;
}

/*
 * Takes the result of the request in flight, without blocking: 0 when none
 * came, 1 when the group took every offset, -1 when something failed (the
 * first failure is described in err).
 */
int
ks_consumer_mirror_result(KsConsumer *c, char *err, size_t errlen)
{
	rd_kafka_event_t *ev;
	const rd_kafka_AlterConsumerGroupOffsets_result_t *res;
	const rd_kafka_group_result_t **groups;
	size_t		ngroups = 0;
	int			result = 1;

	if (c->mirror_queue == NULL || !c->mirror_in_flight)
		return 0;
	ev = rd_kafka_queue_poll(c->mirror_queue, 0);
	if (ev == NULL)
		return 0;
	if (rd_kafka_event_type(ev) != RD_KAFKA_EVENT_ALTERCONSUMERGROUPOFFSETS_RESULT)
	{
		rd_kafka_event_destroy(ev);
		return 0;
	}
	c->mirror_in_flight = false;
	if (rd_kafka_event_error(ev) != RD_KAFKA_RESP_ERR_NO_ERROR)
	{
		snprintf(err, errlen, "%s", rd_kafka_event_error_string(ev));
		rd_kafka_event_destroy(ev);
		return -1;
	}
	res = rd_kafka_event_AlterConsumerGroupOffsets_result(ev);
	groups = res ? rd_kafka_AlterConsumerGroupOffsets_result_groups(res, &ngroups) : NULL;
	for (size_t g = 0; g < ngroups && result > 0; g++)
	{
		const rd_kafka_error_t *gerr = rd_kafka_group_result_error(groups[g]);
		const rd_kafka_topic_partition_list_t *l = rd_kafka_group_result_partitions(groups[g]);

		if (gerr)
		{
			snprintf(err, errlen, "%s", rd_kafka_error_string(gerr));
			result = -1;
			break;
		}
		for (int i = 0; l && i < l->cnt; i++)
			if (l->elems[i].err != RD_KAFKA_RESP_ERR_NO_ERROR)
			{
				snprintf(err, errlen, "%s [%d]: %s", l->elems[i].topic, l->elems[i].partition,
						 rd_kafka_err2str(l->elems[i].err));
				result = -1;
				break;
			}
	}
	rd_kafka_event_destroy(ev);
	return result;
}

static void
append_json_bytes(StringInfo buf, const char *data, size_t len)
{
	if (data == NULL)
	{
		appendStringInfoString(buf, "null");
		return;
	}
	/*
	 * Text as it is; bytes that are not UTF-8 text, hold a NUL or could be
	 * read as this hex form ("\x..."), as "\x" and their bytes in hex: the
	 * two forms never meet, so replay reads the bytes back exactly.
	 */
	if (pg_verify_mbstr(PG_UTF8, data, len, true) && memchr(data, '\0', len) == NULL &&
		!(len >= 2 && data[0] == '\\' && data[1] == 'x'))
	{
		char	   *s = pnstrdup(data, len);

		escape_json(buf, s);
		pfree(s);
	}
	else
	{
		appendStringInfoString(buf, "\"\\\\x");
		for (size_t i = 0; i < len; i++)
			appendStringInfo(buf, "%02x", (unsigned char) data[i]);
		appendStringInfoChar(buf, '"');
	}
}

/* The headers of a message as a JSON array of {"key":..,"value":..}, or NULL. */
char *
ks_message_headers_json(KsMessage *msg)
{
	rd_kafka_headers_t *hdrs;
	StringInfoData buf;
	const char *name;
	const void *val;
	size_t		size;

	if (msg->handle == NULL ||
		rd_kafka_message_headers((rd_kafka_message_t *) msg->handle, &hdrs) != RD_KAFKA_RESP_ERR_NO_ERROR)
		return NULL;
	initStringInfo(&buf);
	appendStringInfoChar(&buf, '[');
	for (size_t i = 0; rd_kafka_header_get_all(hdrs, i, &name, &val, &size) == RD_KAFKA_RESP_ERR_NO_ERROR; i++)
	{
		if (i > 0)
			appendStringInfoChar(&buf, ',');
		appendStringInfoString(&buf, "{\"key\":");
		append_json_bytes(&buf, name, strlen(name));
		appendStringInfoString(&buf, ",\"value\":");
		append_json_bytes(&buf, val, size);
		appendStringInfoChar(&buf, '}');
	}
	appendStringInfoChar(&buf, ']');
	return buf.data;
}

/*
 * The headers of a message in their order, as a list of KsHeader whose
 * names and values are copied (values byte for byte; NULL for a header
 * without value).  NIL when it has none, or no librdkafka message behind it.
 */
List *
ks_message_headers(KsMessage *msg)
{
	rd_kafka_headers_t *hdrs;
	const char *name;
	const void *val;
	size_t		size;
	List	   *result = NIL;

	if (msg->handle == NULL ||
		rd_kafka_message_headers((rd_kafka_message_t *) msg->handle, &hdrs) != RD_KAFKA_RESP_ERR_NO_ERROR)
		return NIL;
	for (size_t i = 0; rd_kafka_header_get_all(hdrs, i, &name, &val, &size) == RD_KAFKA_RESP_ERR_NO_ERROR; i++)
	{
		KsHeader   *h = palloc(sizeof(KsHeader));

		h->name = pstrdup(name);
		h->value = NULL;
		h->value_len = 0;
		if (val != NULL)
		{
			h->value = palloc(Max(size, 1));
			memcpy(h->value, val, size);
			h->value_len = size;
		}
		result = lappend(result, h);
	}
	return result;
}

/*
 * The idx-th header named name of a message (0: the first), its value
 * pointing into the message (valid until it is released); false when
 * there is none.  A header without value has *value NULL.
 */
bool
ks_message_header_get(KsMessage *msg, const char *name, int idx, const void **value, size_t *size)
{
	rd_kafka_headers_t *hdrs;

	if (msg->handle == NULL ||
		rd_kafka_message_headers((rd_kafka_message_t *) msg->handle, &hdrs) != RD_KAFKA_RESP_ERR_NO_ERROR)
		return false;
	return rd_kafka_header_get(hdrs, idx, name, value, size) == RD_KAFKA_RESP_ERR_NO_ERROR;
}

/* a hex digit's value, or -1 */
static int
hex_value(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/*
 * The last header named name of a replayed message, from the quarantine's
 * headers (append_json_bytes's forms: text, "\x" and hex, or null).
 */
static bool
json_header_last(const char *headers_json, const char *name, const void **value, size_t *size)
{
	char	   *err = NULL;
	KsJson	   *arr = ks_json_tree(pstrdup(headers_json), strlen(headers_json), GetDatabaseEncoding(), &err);
	bool		found = false;

	if (arr == NULL || arr->kind != KS_J_ARRAY)
		return false;
	for (int i = 0; i < arr->n; i++)
	{
		KsJson	   *k = ks_json_get(arr->items[i], "key");
		KsJson	   *v = ks_json_get(arr->items[i], "value");

		if (k == NULL || k->kind != KS_J_STRING || strcmp(k->str, name) != 0)
			continue;
		found = true;
		*value = NULL;
		*size = 0;
		if (v == NULL || v->kind != KS_J_STRING)
			continue;
		if (v->str[0] == '\\' && v->str[1] == 'x')
		{
			size_t		n = (strlen(v->str) - 2) / 2;
			char	   *b = palloc(Max(n, 1));

			for (size_t j = 0; j < n; j++)
				b[j] = (char) (hex_value(v->str[2 + 2 * j]) * 16 + hex_value(v->str[3 + 2 * j]));
			*value = b;
			*size = n;
		}
		else
		{
			*value = v->str;
			*size = strlen(v->str);
		}
	}
	return found;
}

/*
 * The last header named name of a message (a header sent more than once:
 * the last one), its value valid while the message is; false when there
 * is none.  A header without value has *value NULL.  A replayed message
 * (no librdkafka message behind it) reads the headers it was quarantined
 * with.
 */
bool
ks_message_header_last(KsMessage *msg, const char *name, const void **value, size_t *size)
{
	rd_kafka_headers_t *hdrs;

	if (msg->handle == NULL)
		return msg->headers_json != NULL && json_header_last(msg->headers_json, name, value, size);
	if (rd_kafka_message_headers((rd_kafka_message_t *) msg->handle, &hdrs) != RD_KAFKA_RESP_ERR_NO_ERROR)
		return false;
	return rd_kafka_header_get_last(hdrs, name, value, size) == RD_KAFKA_RESP_ERR_NO_ERROR;
}

/* ---- the loaded librdkafka ---- */

/*
 * The version of the librdkafka this process loaded, which is not
 * necessarily the one kafka_sink was compiled against: the dynamic linker
 * picks the library (rpath, ld.so.conf), and a build against another
 * librdkafka without an rpath still loads the system's.
 */
const char *
ks_librdkafka_version(void)
{
	return rd_kafka_version_str();
}

/* The loaded librdkafka's builtin.features ("gzip,snappy,ssl,sasl,..."), palloc'd. */
char *
ks_librdkafka_features(void)
{
	rd_kafka_conf_t *conf = rd_kafka_conf_new();
	char		buf[1024];
	size_t		size = sizeof(buf);

	if (rd_kafka_conf_get(conf, "builtin.features", buf, &size) != RD_KAFKA_CONF_OK)
		buf[0] = '\0';
	rd_kafka_conf_destroy(conf);
	return pstrdup(buf);
}
