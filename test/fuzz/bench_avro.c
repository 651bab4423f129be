/*-------------------------------------------------------------------------
 *
 * bench_avro.c
 *		Micro-benchmark: the bench's order event decoded from Avro
 *		(ks_avro_decode, src/decode/avro_binary.c) and from Protobuf
 *		(ks_pb_decode, src/decode/protobuf.c) against the same event decoded
 *		from JSON (ks_json_walk, src/infra/jsonwalk.c), ns per message, with the
 *		4 paths order_id, event_ts, amount, schema_version.
 *
 *		JSON: {"order_id":123,"event_ts":"2025-01-01 00:00:01.234+00",
 *		       "amount":"123.45","schema_version":1}
 *		Avro: order_id long, event_ts timestamp-millis, amount
 *		      decimal(12,2) bytes, schema_version int
 *		Protobuf: int64 order_id = 1; google.protobuf.Timestamp event_ts = 2;
 *		      string amount = 3; int32 schema_version = 4 (after the
 *		      message-index byte 0)
 *
 * Both produce the texts the column input functions take next, so the
 * rest of decoding costs the same.  Built and run by test/fuzz/bench.sh
 * (frontend build, -O2, no sanitizers): "bench_avro [messages]".
 *
 *-------------------------------------------------------------------------
 */
#include "postgres_fe.h"

#include <time.h>

#include "common/jsonapi.h"

#include "avro_binary.h"
#include "jsonwalk.h"
#include "protobuf.h"

#define NDISTINCT 4096
#define NSLOTS 4
#define ROUNDS 5

#ifdef KS_FUZZ_NEED_JSON_ERRDETAIL
char *
json_errdetail(JsonParseErrorType error, JsonLexContext *lex)
{
	return psprintf("JSON parse error %d at line %d", (int) error, lex->line_number);
}
#endif

static const char *schema_text =
"{\"type\":\"record\",\"name\":\"Order\",\"fields\":["
"{\"name\":\"order_id\",\"type\":\"long\"},"
"{\"name\":\"event_ts\",\"type\":{\"type\":\"long\",\"logicalType\":\"timestamp-millis\"}},"
"{\"name\":\"amount\",\"type\":{\"type\":\"bytes\",\"logicalType\":\"decimal\",\"precision\":12,\"scale\":2}},"
"{\"name\":\"schema_version\",\"type\":\"int\"}]}";

static const char *proto_text =
"syntax = \"proto3\"; import \"google/protobuf/timestamp.proto\";"
"message Order { int64 order_id = 1; google.protobuf.Timestamp event_ts = 2;"
" string amount = 3; int32 schema_version = 4; }";

static char pb_msgs[NDISTINCT][48];
static size_t pb_lens[NDISTINCT];
static char *json_msgs[NDISTINCT];
static size_t json_lens[NDISTINCT];
static char avro_msgs[NDISTINCT][32];
static size_t avro_lens[NDISTINCT];

static double
now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static size_t
put_varint(char *p, uint64 u)
{
	size_t		n = 0;

	while (u >= 0x80)
	{
		p[n++] = (char) ((u & 0x7f) | 0x80);
		u >>= 7;
	}
	p[n++] = (char) u;
	return n;
}

static size_t
put_long(char *p, int64 v)
{
	return put_varint(p, ((uint64) v << 1) ^ (uint64) (v >> 63));
}

static void
make_messages(void)
{
	for (int i = 0; i < NDISTINCT; i++)
	{
		int64		order_id = 100000 + i * 7;
		int64		ts_ms = INT64CONST(1735689600000) + i * 1234;	/* 2025-01-01 */
		int64		cents = 100 + (i * 7919) % 1000000;
		char		ts[64];
		time_t		secs = (time_t) (ts_ms / 1000);
		struct tm	tm;
		char	   *p = avro_msgs[i];
		size_t		n = 0;
		unsigned char amount[8];
		int			alen = 0;

		gmtime_r(&secs, &tm);
		strftime(ts, sizeof(ts), "%Y-%m-%d %H:%M:%S", &tm);
		json_msgs[i] = psprintf("{\"order_id\":%lld,\"event_ts\":\"%s.%03d+00\",\"amount\":\"%lld.%02lld\",\"schema_version\":1}",
								(long long) order_id, ts, (int) (ts_ms % 1000),
								(long long) (cents / 100), (long long) (cents % 100));
		json_lens[i] = strlen(json_msgs[i]);

		n += put_long(p + n, order_id);
		n += put_long(p + n, ts_ms);
		/* the unscaled amount, big-endian two's complement, shortest */
		for (int64 c = cents; c > 0 || alen == 0; c >>= 8)
			amount[alen++] = (unsigned char) (c & 0xff);
		if (amount[alen - 1] & 0x80)
			amount[alen++] = 0;
		n += put_long(p + n, alen);
		for (int k = alen - 1; k >= 0; k--)
			p[n++] = (char) amount[k];
		n += put_long(p + n, 1);
		avro_lens[i] = n;

		/* Protobuf: varints are Avro's without the zigzag */
		{
			char	   *q = pb_msgs[i];
			size_t		m = 0;
			char		amt[32];
			int			alen2 = snprintf(amt, sizeof(amt), "%lld.%02lld",
										 (long long) (cents / 100), (long long) (cents % 100));
			char		tsb[16];
			size_t		tl = 0;

			q[m++] = 0;			/* message index: the first message */
			q[m++] = 0x08;
			m += put_varint(q + m, (uint64) order_id);
			tsb[tl++] = 0x08;
			tl += put_varint(tsb + tl, (uint64) (ts_ms / 1000));
			tsb[tl++] = 0x10;
			tl += put_varint(tsb + tl, (uint64) (ts_ms % 1000) * 1000000);
			q[m++] = 0x12;
			q[m++] = (char) tl;
			memcpy(q + m, tsb, tl);
			m += tl;
			q[m++] = 0x1a;
			q[m++] = (char) alen2;
			memcpy(q + m, amt, alen2);
			m += alen2;
			q[m++] = 0x20;
			q[m++] = 1;
			pb_lens[i] = m;
		}
	}
}

typedef bool (*DecodeFn) (int i, const KsWalkPaths *wp, KsSlotValue *out);

static KsAvroSchema *schema;

static bool
decode_json(int i, const KsWalkPaths *wp, KsSlotValue *out)
{
	char	   *detail;

	return ks_json_walk(wp, json_msgs[i], json_lens[i], out, &detail) == KS_WALK_OK;
}

static bool
decode_avro(int i, const KsWalkPaths *wp, KsSlotValue *out)
{
	char	   *detail;

	return ks_avro_decode(schema, wp, NULL, NULL, -1, avro_msgs[i], avro_lens[i], out, &detail) == KS_AVRO_OK;
}

static KsPbSchema *pb_schema;

static bool
decode_pb(int i, const KsWalkPaths *wp, KsSlotValue *out)
{
	char	   *detail;

	return ks_pb_decode(pb_schema, wp, NULL, NULL, pb_msgs[i], pb_lens[i], out, &detail);
}

static double
run(DecodeFn fn, const KsWalkPaths *wp, long n)
{
	double		best = 0;
	KsSlotValue out[NSLOTS];

	for (int r = 0; r < ROUNDS; r++)
	{
		double		t0 = now_ns();

		for (long k = 0; k < n; k++)
		{
			if (!fn((int) (k % NDISTINCT), wp, out))
			{
				fprintf(stderr, "bench_avro: a message does not decode\n");
				exit(1);
			}
			for (int s = 0; s < NSLOTS; s++)
				if (out[s].text)
					pfree(out[s].text);
		}
		if (r == 0 || now_ns() - t0 < best)
			best = now_ns() - t0;
	}
	return best / n;
}

int
main(int argc, char **argv)
{
	long		n = argc > 1 ? atol(argv[1]) : 1000000;
	const char *names[NSLOTS] = {"order_id", "event_ts", "amount", "schema_version"};
	KsWalkPaths wp;
	char	   *err = NULL;
	KsSlotValue jo[NSLOTS],
				ao[NSLOTS],
				po[NSLOTS];
	double		json_ns,
				avro_ns,
				pb_ns;
	KsPbFile	pf = {"bench.proto", proto_text, 0};

	wp.nslots = NSLOTS;
	wp.paths = palloc0(sizeof(KsPath) * NSLOTS);
	for (int s = 0; s < NSLOTS; s++)
		if (!ks_path_parse(names[s], &wp.paths[s]))
			return 1;
	schema = ks_avro_schema_parse(schema_text, strlen(schema_text), &err);
	if (schema == NULL)
	{
		fprintf(stderr, "bench_avro: %s\n", err);
		return 1;
	}
	pb_schema = ks_pb_schema_parse(&pf, 1, &err);
	if (pb_schema == NULL)
	{
		fprintf(stderr, "bench_avro: %s\n", err);
		return 1;
	}
	make_messages();
	/* the same texts from both encodings */
	for (int i = 0; i < NDISTINCT; i++)
	{
		if (!decode_json(i, &wp, jo) || !decode_avro(i, &wp, ao) || !decode_pb(i, &wp, po))
			return 1;
		for (int s = 0; s < NSLOTS; s++)
			if ((strcmp(jo[s].text, ao[s].text) != 0 || strcmp(jo[s].text, po[s].text) != 0) && s != 1)
			{
				fprintf(stderr, "bench_avro: slot %s differs: %s / %s / %s\n", names[s], jo[s].text, ao[s].text, po[s].text);
				return 1;
			}
	}
	json_ns = run(decode_json, &wp, n);
	avro_ns = run(decode_avro, &wp, n);
	pb_ns = run(decode_pb, &wp, n);
	printf("bench_avro: order event, %ld messages, best of %d: JSON %.1f ns/message (%.0f bytes), Avro %.1f ns/message (%.0f bytes), Protobuf %.1f ns/message (%.0f bytes)\n",
		   n, ROUNDS, json_ns, (double) json_lens[0], avro_ns, (double) avro_lens[0], pb_ns, (double) pb_lens[0]);
	return 0;
}
