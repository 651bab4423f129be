/*-------------------------------------------------------------------------
 *
 * bench_jsonwalk.c
 *		Micro-benchmark of ks_json_walk (src/infra/jsonwalk.c): the parser-only
 *		path (ks_json_walk_slow, what ks_json_walk did before the fast path)
 *		against ks_json_walk, over order-event messages like
 *
 *		{"order_id":123,"event_ts":"2025-01-01 00:00:01.234+00",
 *		 "amount":"123.45","schema_version":1}
 *
 *		with the 4 paths order_id, event_ts, amount, schema_version.
 *
 * Built and run by test/fuzz/bench.sh (frontend build, -O2, no
 * sanitizers): "bench_jsonwalk [messages]", default 1000000.  palloc is
 * libpgcommon's frontend one (malloc); the captured values are freed after
 * each message, as the worker's per-batch context reset would.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres_fe.h"

#include <time.h>

#include "common/jsonapi.h"

#include "jsonwalk.h"

#define NDISTINCT 4096			/* messages made, then cycled through */
#define NSLOTS 4
#define ROUNDS 5				/* the best of */

typedef KsWalkResult (*WalkFn) (const KsWalkPaths *paths, const char *data, size_t len,
								KsSlotValue *out, char **detail);

#ifdef KS_FUZZ_NEED_JSON_ERRDETAIL
/* before PostgreSQL 16 the frontend libpgcommon has none (see fuzz_jsonwalk.c) */
char *
json_errdetail(JsonParseErrorType error, JsonLexContext *lex)
{
	return psprintf("JSON parse error %d at line %d", (int) error, lex->line_number);
}
#endif

static char *msgs[NDISTINCT];
static size_t lens[NDISTINCT];

static double
now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

/* ns per message over n messages, the best of ROUNDS */
static double
run(WalkFn fn, const KsWalkPaths *wp, long n)
{
	double		best = 0;

	for (int r = 0; r < ROUNDS; r++)
	{
		double		t0 = now_ns();
		double		ns;

		for (long i = 0; i < n; i++)
		{
			KsSlotValue out[NSLOTS];
			char	   *detail;
			int			m = (int) (i % NDISTINCT);

			if (fn(wp, msgs[m], lens[m], out, &detail) != KS_WALK_OK)
			{
				fprintf(stderr, "bench_jsonwalk: message %d refused: %s\n", m, detail);
				exit(1);
			}
			for (int s = 0; s < NSLOTS; s++)
				if (out[s].text)
					pfree(out[s].text);
		}
		ns = (now_ns() - t0) / n;
		if (r == 0 || ns < best)
			best = ns;
	}
	return best;
}

int
main(int argc, char **argv)
{
	static const char *names[NSLOTS] = {"order_id", "event_ts", "amount", "schema_version"};
	KsPath		paths[NSLOTS];
	KsWalkPaths wp = {NSLOTS, paths};
	long		n = (argc > 1) ? atol(argv[1]) : 1000000;
	double		slow;
	double		fast;
	size_t		total = 0;

	if (n <= 0)
	{
		fprintf(stderr, "usage: bench_jsonwalk [messages]\n");
		return 2;
	}
	for (int s = 0; s < NSLOTS; s++)
		if (!ks_path_parse(names[s], &paths[s]))
			return 1;
	for (int i = 0; i < NDISTINCT; i++)
	{
		msgs[i] = psprintf("{\"order_id\":%d,\"event_ts\":\"2025-01-01 %02d:%02d:%02d.%03d+00\","
						   "\"amount\":\"%d.%02d\",\"schema_version\":1}",
						   100000 + i * 7, i / 3600 % 24, i / 60 % 60, i % 60, i * 37 % 1000,
						   i * 13 % 10000, i % 100);
		lens[i] = strlen(msgs[i]);
		total += lens[i];
	}

	/* the two paths agree on these messages (test/fuzz checks every input) */
	for (int i = 0; i < NDISTINCT; i++)
	{
		KsSlotValue a[NSLOTS];
		KsSlotValue b[NSLOTS];
		char	   *detail;

		if (ks_json_walk_slow(&wp, msgs[i], lens[i], a, &detail) != KS_WALK_OK ||
			!ks_json_walk_fast(&wp, msgs[i], lens[i], b))
		{
			fprintf(stderr, "bench_jsonwalk: a path refused message %d\n", i);
			return 1;
		}
		for (int s = 0; s < NSLOTS; s++)
			if (a[s].kind != b[s].kind || strcmp(a[s].text, b[s].text) != 0)
			{
				fprintf(stderr, "bench_jsonwalk: the paths differ on message %d\n", i);
				return 1;
			}
	}

	slow = run(ks_json_walk_slow, &wp, n);
	fast = run(ks_json_walk, &wp, n);
	printf("bench_jsonwalk: %ld messages of %.0f bytes on average, %d paths, best of %d\n",
		   n, (double) total / NDISTINCT, NSLOTS, ROUNDS);
	printf("bench_jsonwalk: old (pg_parse_json)   %7.1f ns/message\n", slow);
	printf("bench_jsonwalk: new (ks_json_walk)    %7.1f ns/message\n", fast);
	printf("bench_jsonwalk: speed-up              %7.1fx\n", slow / fast);
	return 0;
}
