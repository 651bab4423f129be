#!/usr/bin/env bash
# test/bench/citus_ab.sh — the Citus bench row of issue 27 (not a timed
# test): one pipeline with 2 workers, the same N JSON messages over N/4
# keys on a 4-partition topic, into a table on one server (a local table
# on the coordinator, with the default apply strategy, which takes the
# heap strategy there, and again with kafka_sink.apply_strategy = sql, the
# MERGE) and into a table distributed over 2 worker nodes
# (test/lib/citus_cluster.sh's cluster), one after the other in the same
# run.  Prints, per target, the wall time until the checkpoint holds every
# offset, the batches' apply time (sum of committed_at - started_at) and
# the CPU seconds of each server (its processes' and its reaped
# children's), and the ratios distributed / local.  The apply time sums
# both workers' batches, which overlap: it can exceed the wall time.  Both tables are
# compared with each other at the end.  Needs a running harness (KS_RUN's
# env: KS_KEEP_RUNNING=1 on any e2e run leaves one up) and Citus
# (test/tools/citus.sh).  BENCH_CITUS_EVENTS (default 100000),
# BENCH_CITUS_BATCH (10000).  On a loaded machine the ratio is what to
# read, not the times.
# shellcheck source=../lib/common.sh
. "$(dirname "$0")/../lib/common.sh"
. "$REPO/test/lib/citus_cluster.sh"
citus_cluster_ready citus_ab
N="${BENCH_CITUS_EVENTS:-100000}"
B="${BENCH_CITUS_BATCH:-10000}"
topic="cab_$SFX"
"$HARNESS" topic-create "$topic" 4 >/dev/null 2>&1 || true
python3 - "$N" <<'PY' | kcat -P -b "$KS_BOOTSTRAP" -t "$topic" -K $'\t'
import json, random, sys
n = int(sys.argv[1])
rnd = random.Random(1)
for i in range(n):
    k = rnd.randint(1, n // 4)
    print(f"{k}\t" + json.dumps({"id": k, "v": i, "status": rnd.choice(["new", "paid", "sent"]),
                                 "amount": rnd.randint(1, 10**6) / 100, "note": f"n{i}"}))
PY
# cpu DIR: CPU seconds of a server so far (live processes + reaped children)
cpu() {
    local pm tck
    pm="$(head -1 "$(cat "$1/pgroot")/data/postmaster.pid")"
    tck="$(getconf CLK_TCK)"
    { cat /proc/"$pm"/stat; for c in $(pgrep -P "$pm"); do cat /proc/"$c"/stat 2>/dev/null; done; } \
        | awk -v pm="$pm" -v t="$tck" '{ s += $14 + $15; if ($1 == pm) s += $16 + $17 } END { printf "%.2f", s / t }'
}
declare -A WALL APPLY CPUC CPUW
run() { # SHAPE (local, local_sql, distributed)
    local t="cab_$1_$SFX" c0 w0 t0
    if [ "$1" = local_sql ]; then PGPORT="$PC" set_apply_strategy sql; else PGPORT="$PC" set_apply_strategy RESET; fi
    sqlc -c "CREATE TABLE e2e.$t (id int PRIMARY KEY, v bigint, status text, amount numeric, note text)" \
         -c "ALTER TABLE e2e.$t OWNER TO ks_e2e" >/dev/null
    [ "$1" = distributed ] && sqlc -c "SELECT create_distributed_table('e2e.$t', 'id')" >/dev/null
    c0="$(cpu "$COORD")" w0="$(echo "$(cpu "$W1") + $(cpu "$W2")" | bc)" t0="$(date +%s.%N)"
    sqlc >/dev/null <<SQL
SET ROLE ks_e2e;
SELECT kafka_sink.create_pipeline(name => '$t', bootstrap_servers => '$KS_BOOTSTRAP',
    subscribe => ARRAY['$topic'], target => 'e2e.$t', order_column => 'v', key_format => 'string',
    starting_offsets => 'earliest', max_offsets_per_batch => $B, trigger_interval => '0', workers => 2);
SQL
    PGPORT="$PC" poll "$(checkpoint_covers_sql "$t" "$N")" 900 || { echo "$t did not catch up"; return 1; }
    WALL[$1]="$(echo "$(date +%s.%N) - $t0" | bc | xargs printf '%.2f')"
    CPUC[$1]="$(echo "$(cpu "$COORD") - $c0" | bc)"
    CPUW[$1]="$(echo "$(cpu "$W1") + $(cpu "$W2") - $w0" | bc)"
    sqlc -c "SET ROLE ks_e2e; SELECT kafka_sink.stop('$t')" >/dev/null
    APPLY[$1]="$(sqlc -c "SELECT round(extract(epoch FROM sum(b.committed_at - b.started_at))::numeric, 2)
                            FROM kafka_sink.batches b JOIN kafka_sink.pipeline_definitions p ON p.id = b.pipeline_id
                           WHERE p.name = '$t'")"
}
run local
run local_sql
run distributed
PGPORT="$PC" set_apply_strategy RESET
same="$(sqlc -c "SELECT count(*) FROM (SELECT * FROM e2e.cab_local_$SFX EXCEPT SELECT * FROM e2e.cab_distributed_$SFX) x")|$(sqlc -c "SELECT count(*) FROM (SELECT * FROM e2e.cab_distributed_$SFX EXCEPT SELECT * FROM e2e.cab_local_$SFX) x")"
echo "# $N messages, batches of $B, 2 workers; tables differ by $same rows (0|0: the same)"
echo "| target | wall (s) | apply (s) | CPU coordinator (s) | CPU worker nodes (s) |"
echo "|---|---|---|---|---|"
for s in local local_sql distributed; do
    echo "| $s | ${WALL[$s]} | ${APPLY[$s]} | ${CPUC[$s]} | ${CPUW[$s]} |"
done
for s in local local_sql; do
    echo "| distributed / $s | $(echo "scale=2; ${WALL[distributed]} / ${WALL[$s]}" | bc) | $(echo "scale=2; ${APPLY[distributed]} / ${APPLY[$s]}" | bc) | $(echo "scale=2; ${CPUC[distributed]} / ${CPUC[$s]}" | bc) | |"
done
finish
