/*-------------------------------------------------------------------------
 *
 * bench_debezium.c
 *		Micro-benchmark of the Debezium envelope's cached-schema path
 *		(parse_fast, src/decode/envelope_debezium.c) over the recorded
 *		change events of test/fixtures/debezium: the payload of
 *		{"schema", "payload"} delimited and checked by jsonwalk.c's scanner
 *		(ks_json_value_end, what the envelope does) against the hand-written
 *		bracket matcher it had before (value_end, copied below, then a
 *		search for NUL and pg_encoding_verifymbstr), each alone and each
 *		followed by the tree parse of the payload (ks_json_tree), which is
 *		the rest of that path's work.
 *
 * Built and run by test/fuzz/bench.sh: "bench_debezium FILE [rounds]",
 * FILE one change event per line (bench.sh writes it from the fixtures).
 *
 * Owns: the measurement.  Must not: be linked into the extension.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres_fe.h"

#include <time.h>

#include "common/jsonapi.h"
#include "mb/pg_wchar.h"

#include "jsontree.h"
#include "jsonwalk.h"

#define MAXMSG 1024
#define ROUNDS 3				/* the best of, per turn */
#define TURNS 7					/* old and new in turn: the best of */

#ifdef KS_FUZZ_NEED_JSON_ERRDETAIL
/* before PostgreSQL 16 the frontend libpgcommon has none (see fuzz_jsonwalk.c) */
char *
json_errdetail(JsonParseErrorType error, JsonLexContext *lex)
{
	return psprintf("JSON parse error %d at line %d", (int) error, lex->line_number);
}
#endif

static const char *p0s[MAXMSG];
static const char *ends[MAXMSG];
static int	nmsg;

/* the envelope's scanner before this change, as it was */
static const char *
old_value_end(const char *p, const char *end)
{
	int			depth = 0;

	for (; p < end; p++)
	{
		if (*p == '"')
		{
			for (p++; p < end && *p != '"'; p++)
				if (*p == '\\')
					p++;
			if (p >= end)
				return NULL;
		}
		else if (*p == '{' || *p == '[')
			depth++;
		else if ((*p == '}' || *p == ']') && --depth == 0)
			return p + 1;
	}
	return NULL;
}

static const char *
old_delimit(const char *p0, const char *end)
{
	const char *p1 = old_value_end(p0, end);

	if (p1 == NULL || memchr(p0, '\0', p1 - p0) != NULL ||
		pg_encoding_verifymbstr(PG_UTF8, p0, p1 - p0) != p1 - p0)
		return NULL;
	return p1;
}

/* the tree's nodes (the lexer's few bytes a parse are left: bounded by rounds) */
static void
tree_free(KsJson *j)
{
	for (int i = 0; i < j->n; i++)
	{
		tree_free(j->items[i]);
		if (j->keys && j->keys[i])
			pfree(j->keys[i]);
	}
	if (j->str)
		pfree(j->str);
	if (j->items)
		pfree(j->items);
	if (j->keys)
		pfree(j->keys);
	pfree(j);
}

static double
now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

/* ns per event, the best of ROUNDS of rounds passes over the events */
static double
run(const char *(*delimit) (const char *, const char *), bool tree, long rounds)
{
	double		best = 0;

	for (int r = 0; r < ROUNDS; r++)
	{
		double		t0 = now_ns();
		double		ns;

		for (long i = 0; i < rounds; i++)
			for (int m = 0; m < nmsg; m++)
			{
				const char *p1 = delimit(p0s[m], ends[m]);

				if (p1 == NULL)
				{
					fprintf(stderr, "bench_debezium: event %d not delimited\n", m);
					exit(1);
				}
				if (tree)
				{
					char	   *text = pnstrdup(p0s[m], p1 - p0s[m]);
					KsJson	   *root = ks_json_tree(text, p1 - p0s[m], PG_UTF8, NULL);

					if (root == NULL)
					{
						fprintf(stderr, "bench_debezium: event %d not parsed\n", m);
						exit(1);
					}
					tree_free(root);
					pfree(text);
				}
			}
		ns = (now_ns() - t0) / ((double) rounds * nmsg);
		if (r == 0 || ns < best)
			best = ns;
	}
	return best;
}

int
main(int argc, char **argv)
{
	FILE	   *f;
	char	   *line = NULL;
	size_t		cap = 0;
	ssize_t		n;
	long		rounds = argc > 2 ? atol(argv[2]) : 2000;
	size_t		bytes = 0;
	double		o,
				w,
				ot,
				wt;

	if (argc < 2 || (f = fopen(argv[1], "r")) == NULL)
	{
		fprintf(stderr, "usage: bench_debezium FILE [rounds]\n");
		return 2;
	}
	while (nmsg < MAXMSG && (n = getline(&line, &cap, f)) > 0)
	{
		char	   *text = strndup(line, n);
		char	   *pl = strstr(text, "\"payload\":");

		if (pl == NULL)
			continue;
		p0s[nmsg] = pl + strlen("\"payload\":");
		ends[nmsg] = text + strlen(text);
		if (*p0s[nmsg] != '{')
			continue;			/* a tombstone's or a null payload */
		/* both must agree on where the payload ends */
		if (old_delimit(p0s[nmsg], ends[nmsg]) != ks_json_value_end(p0s[nmsg], ends[nmsg]))
		{
			fprintf(stderr, "bench_debezium: the two scanners disagree on event %d\n", nmsg);
			return 1;
		}
		bytes += old_value_end(p0s[nmsg], ends[nmsg]) - p0s[nmsg];
		nmsg++;
	}
	if (nmsg == 0)
	{
		fprintf(stderr, "bench_debezium: no change events in %s\n", argv[1]);
		return 1;
	}
	/* in turn, so that a busy machine slows both alike */
	o = w = ot = wt = 1e30;
	for (int t = 0; t < TURNS; t++)
	{
		o = Min(o, run(old_delimit, false, rounds));
		w = Min(w, run(ks_json_value_end, false, rounds));
		ot = Min(ot, run(old_delimit, true, Max(rounds / 10, 1)));
		wt = Min(wt, run(ks_json_value_end, true, Max(rounds / 10, 1)));
	}
	printf("bench_debezium: %d change events, payloads %.0f bytes on average\n",
		   nmsg, (double) bytes / nmsg);
	printf("  delimit the payload: before %.1f ns, jsonwalk %.1f ns (%.2fx)\n", o, w, w / o);
	printf("  delimit and parse:   before %.1f ns, jsonwalk %.1f ns (%.2fx)\n", ot, wt, wt / ot);
	return 0;
}
