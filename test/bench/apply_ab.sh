#!/usr/bin/env bash
# test/bench/apply_ab.sh — a quick A/B of the merge-mode apply strategies
# (not a timed test): the same N JSON messages over N/4 keys, one
# partition, through kafka_sink.apply_strategy sql (the MERGE), auto (the
# heap strategy where eligible) and on_conflict, into a plain table and a
# table hash-partitioned into 4 leaves (the heap strategy refuses it: auto
# is the MERGE there).  Prints, per run, the batches' apply time (the sum
# of committed_at - started_at over the pipeline's batches) and its ratio
# to the MERGE's on the same table.  Needs a running harness (KS_RUN's env:
# KS_KEEP_RUNNING=1 on any e2e run leaves one up).
#   BENCH_AB_EVENTS (default 100000), BENCH_AB_BATCH (10000)
# shellcheck source=../lib/common.sh
. "$(dirname "$0")/../lib/common.sh"
setup_owner
N="${BENCH_AB_EVENTS:-100000}"
B="${BENCH_AB_BATCH:-10000}"
topic="ab_$SFX"
at_exit "set_apply_strategy RESET"
python3 - "$N" <<'PY' | kcat -P -b "$KS_BOOTSTRAP" -t "$topic" -p 0 -K $'\t'
import json, random, sys
n = int(sys.argv[1])
rnd = random.Random(1)
for i in range(n):
    k = rnd.randint(1, n // 4)
    print(f"{k}\t" + json.dumps({"v": i, "status": rnd.choice(["new", "paid", "sent"]),
                                 "amount": rnd.randint(1, 10**6) / 100, "note": f"n{i}"}))
PY
declare -A T
run() { # SHAPE STRATEGY
    local t="ab_${1}_${2}_$SFX" ddl
    set_apply_strategy "$2"
    ddl="CREATE TABLE e2e.$t (id int PRIMARY KEY, v bigint, status text, amount numeric, note text)"
    if [ "$1" = partitioned ]; then
        ddl="$ddl PARTITION BY HASH (id); $(for r in 0 1 2 3; do
            echo "CREATE TABLE e2e.${t}_$r PARTITION OF e2e.$t FOR VALUES WITH (MODULUS 4, REMAINDER $r);"; done)"
    fi
    sql >/dev/null <<SQL
SET client_min_messages = warning; SET ROLE ks_e2e;
$ddl;
SELECT kafka_sink.create_pipeline(name => '$t', bootstrap_servers => '$KS_BOOTSTRAP',
    subscribe => ARRAY['$topic'], target => 'e2e.$t', order_column => 'v', key_format => 'string',
    starting_offsets => 'earliest', max_offsets_per_batch => $B, trigger_interval => '0');
SQL
    poll "$(checkpoint_covers_sql "$t" "$N")" 600 || { echo "$t did not catch up"; return 1; }
    sql -c "SET ROLE ks_e2e; SELECT kafka_sink.stop('$t')" >/dev/null
    T[$1.$2]="$(sql -Atc "SELECT round(extract(epoch FROM sum(b.committed_at - b.started_at))::numeric, 2)
                           FROM kafka_sink.batches b JOIN kafka_sink.pipeline_definitions p ON p.id = b.pipeline_id
                          WHERE p.name = '$t'")"
}
for shape in plain partitioned; do
    for st in sql auto on_conflict; do run "$shape" "$st"; done
done
echo "| target | strategy | apply time (s) | / MERGE |"
echo "|---|---|---|---|"
for shape in plain partitioned; do
    for st in sql auto on_conflict; do
        echo "| $shape | $st | ${T[$shape.$st]} | $(echo "scale=2; ${T[$shape.$st]} / ${T[$shape.sql]}" | bc) |"
    done
done
