/*
 * txn_producer: a transactional Kafka producer for the tests.
 *
 *   txn_producer BOOTSTRAP TOPIC TRANSACTIONAL_ID SPEC
 *
 * SPEC is a comma-separated list of transactions, each "c<N>" (commit N
 * messages) or "a<N>" (abort N messages), e.g. "c5,a3,c2".  Messages are
 * numbered from 1 across the whole run; message i has key "<i>" and value
 * {"k": i, "fate": "committed" | "aborted"}.  All go to partition 0.
 * Prints the numbers of the committed messages, one per line.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <librdkafka/rdkafka.h>

static void
die(const char *what, rd_kafka_error_t *err)
{
	fprintf(stderr, "txn_producer: %s: %s\n", what, err ? rd_kafka_error_string(err) : "");
	exit(1);
}

int
main(int argc, char **argv)
{
	char		errstr[512];
	rd_kafka_conf_t *conf;
	rd_kafka_t *rk;
	rd_kafka_error_t *err;
	char	   *spec;
	int			n = 0;

	if (argc != 5)
	{
		fprintf(stderr, "usage: txn_producer BOOTSTRAP TOPIC TRANSACTIONAL_ID SPEC\n");
		return 2;
	}
	conf = rd_kafka_conf_new();
	if (rd_kafka_conf_set(conf, "bootstrap.servers", argv[1], errstr, sizeof(errstr)) ||
		rd_kafka_conf_set(conf, "transactional.id", argv[3], errstr, sizeof(errstr)))
	{
		fprintf(stderr, "txn_producer: %s\n", errstr);
		return 1;
	}
	rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof(errstr));
	if (!rk)
	{
		fprintf(stderr, "txn_producer: %s\n", errstr);
		return 1;
	}
	if ((err = rd_kafka_init_transactions(rk, 30000)))
		die("init_transactions", err);

	spec = strdup(argv[4]);
	for (char *tok = strtok(spec, ","); tok; tok = strtok(NULL, ","))
	{
		int			commit = tok[0] == 'c';
		int			count = atoi(tok + 1);

		if ((err = rd_kafka_begin_transaction(rk)))
			die("begin_transaction", err);
		for (int i = 0; i < count; i++)
		{
			char		key[32];
			char		value[128];
			rd_kafka_resp_err_t e;

			n++;
			snprintf(key, sizeof(key), "%d", n);
			snprintf(value, sizeof(value), "{\"k\": %d, \"fate\": \"%s\"}", n,
					 commit ? "committed" : "aborted");
			e = rd_kafka_producev(rk, RD_KAFKA_V_TOPIC(argv[2]), RD_KAFKA_V_PARTITION(0),
								  RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
								  RD_KAFKA_V_KEY(key, strlen(key)),
								  RD_KAFKA_V_VALUE(value, strlen(value)), RD_KAFKA_V_END);
			if (e)
			{
				fprintf(stderr, "txn_producer: produce: %s\n", rd_kafka_err2str(e));
				return 1;
			}
			if (commit)
				printf("%d\n", n);
		}
		if (commit)
			err = rd_kafka_commit_transaction(rk, 30000);
		else
		{
			/* make sure the aborted messages reach the log before the abort */
			rd_kafka_flush(rk, 30000);
			err = rd_kafka_abort_transaction(rk, 30000);
		}
		if (err)
			die(commit ? "commit_transaction" : "abort_transaction", err);
	}
	rd_kafka_destroy(rk);
	free(spec);
	return 0;
}
