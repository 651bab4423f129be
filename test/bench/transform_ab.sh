#!/usr/bin/env bash
# test/bench/transform_ab.sh — what filter and computed columns cost (not a
# timed test): the same N JSON messages over N/4 keys, one partition,
# through three merge pipelines: none, a filter (passing about 2/3: fewer
# rows to write), and two computed columns (no filter: the evaluation's
# cost alone); each run twice, interleaved (none, filter, computed, none,
# filter, computed), since timings on a shared
# machine are only comparable within a run.  Prints each run's apply time
# (the sum of committed_at - started_at over its batches) and the ratio of
# the mean to the plain pipeline's.  Needs a running harness (KS_RUN's env:
# KS_KEEP_RUNNING=1 on any e2e run leaves one up).
#   BENCH_XF_EVENTS (default 100000), BENCH_XF_BATCH (10000)
# shellcheck source=../lib/common.sh
. "$(dirname "$0")/../lib/common.sh"
setup_owner
N="${BENCH_XF_EVENTS:-100000}"
B="${BENCH_XF_BATCH:-10000}"
topic="xfab_$SFX"
python3 - "$N" <<'PY' | kcat -P -b "$KS_BOOTSTRAP" -t "$topic" -p 0 -K $'\t'
import json, random, sys
n = int(sys.argv[1])
rnd = random.Random(1)
for i in range(n):
    k = rnd.randint(1, n // 4)
    print(f"{k}\t" + json.dumps({"v": i, "status": rnd.choice(["new", "paid", "sent"]),
                                 "amount": rnd.randint(1, 10**6) / 100, "note": f"N{i}"}))
PY
declare -A T
run() { # VARIANT ROUND
    local t="xfab_${1}_${2}_$SFX" extra=""
    case "$1" in
        filter) extra=", filter => 'status <> ''new'''" ;;
        computed) extra=", computed => '{\"cents\": \"(amount * 100)::bigint\", \"note_lc\": \"lower(note)\"}'" ;;
    esac
    sql >/dev/null <<SQL
SET client_min_messages = warning; SET ROLE ks_e2e;
CREATE TABLE e2e.$t (id int PRIMARY KEY, v bigint, status text, amount numeric, note text, cents bigint, note_lc text);
SELECT kafka_sink.create_pipeline(name => '$t', bootstrap_servers => '$KS_BOOTSTRAP',
    subscribe => ARRAY['$topic'], target => 'e2e.$t', order_column => 'v', key_format => 'string',
    starting_offsets => 'earliest', max_offsets_per_batch => $B, trigger_interval => '0'$extra);
SQL
    poll "$(checkpoint_covers_sql "$t" "$N")" 600 || { echo "$t did not catch up"; return 1; }
    sql -c "SET ROLE ks_e2e; SELECT kafka_sink.stop('$t')" >/dev/null
    T[$1.$2]="$(sql -Atc "SELECT round(extract(epoch FROM sum(b.committed_at - b.started_at))::numeric, 2)
                           FROM kafka_sink.batches b JOIN kafka_sink.pipeline_definitions p ON p.id = b.pipeline_id
                          WHERE p.name = '$t'")"
}
for r in 1 2; do
    for v in none filter computed; do run "$v" "$r"; done
done
echo "| variant | apply time (s), two runs | mean / none |"
echo "|---|---|---|"
for v in none filter computed; do
    echo "| $v | ${T[$v.1]}, ${T[$v.2]} | $(echo "scale=2; (${T[$v.1]} + ${T[$v.2]}) / (${T[none.1]} + ${T[none.2]})" | bc) |"
done
