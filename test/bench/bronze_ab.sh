#!/usr/bin/env bash
# test/bench/bronze_ab.sh — an A/B of bronze's table shapes (not a timed
# test): the bench's order events (test/bench/gen_events.py, N over N/4
# keys, 4 partitions) into bench-like bench.orders with one worker,
# BENCH_BRONZE_AB_BATCH per batch, in interleaved rounds of
#   baseline  PostgreSQL's own: psql, \copy + DISTINCT ON + MERGE per batch
#             (test/bench/run.sh's baseline), the backend's CPU
#   off       the pipeline without bronze
#   pk        bronze into a table of the shape earlier versions made
#             (PRIMARY KEY (partition, "offset", topic))
#   narrow    bronze into the table create_pipeline makes now (an index on
#             (partition, "offset"), no unique key)
# Each round starts one configuration later than the one before.  Per run: seconds from create_pipeline to the checkpoint holding every
# offset (polled every 0.1 s), the worker's CPU seconds (utime + stime from
# /proc/<pid>/stat); then the medians and each one's ratio to the
# baseline's median time.  Every run's target must equal the baseline's
# rows and every bronze table must hold each offset once, else the script
# fails.  Needs a running harness (KS_KEEP_RUNNING=1 on any e2e run leaves
# one up).  BENCH_BRONZE_AB_EVENTS (400000), BENCH_BRONZE_AB_BATCH (50000),
# BENCH_BRONZE_AB_ROUNDS (3), BENCH_BRONZE_AB_CONFIGS ("baseline off pk narrow").
# shellcheck source=../lib/common.sh
. "$(dirname "$0")/../lib/common.sh"
setup_owner
N="${BENCH_BRONZE_AB_EVENTS:-400000}"
BATCH="${BENCH_BRONZE_AB_BATCH:-50000}"
ROUNDS="${BENCH_BRONZE_AB_ROUNDS:-3}"
CONFIGS="${BENCH_BRONZE_AB_CONFIGS:-baseline off pk narrow}"
W="$KS_RUN/bronze_ab_$SFX"
TOPIC="bronze_ab_$SFX"
mkdir -p "$W/csv"
chmod -R o+rX "$W" 2>/dev/null || true
at_exit "rm -rf '$W'"
python3 "$REPO/test/bench/gen_events.py" "$N" $((N / 4)) 29 "$W/events.tsv" "$W/csv" "$BATCH" > /dev/null
"$HARNESS" topic-create "$TOPIC" 4 >/dev/null 2>&1
kcat -P -b "$KS_BOOTSTRAP" -t "$TOPIC" -K $'\t' -l -X linger.ms=20 -X batch.num.messages=10000 \
     -X queue.buffering.max.messages=1000000 "$W/events.tsv"
sql -c "CREATE SCHEMA IF NOT EXISTS bench AUTHORIZATION ks_e2e" 2>/dev/null || true
ORDERS="order_id bigint PRIMARY KEY, event_ts timestamptz NOT NULL, amount numeric(18,2), schema_version int"

# the baseline's script, the one test/bench/run.sh runs
# shellcheck source=baseline_sql.sh
. "$REPO/test/bench/baseline_sql.sh"
baseline_sql "$W" "$W/csv" "$N" "$BATCH" > "$W/baseline.sql"

now() { date +%s.%N; }
rows_md5() { sql -c "SELECT md5(string_agg(order_id || ',' || event_ts || ',' || amount || ',' || schema_version, ';' ORDER BY order_id)) FROM $1"; }
proc_cpu() { sed 's/^.*) //' "/proc/$1/stat" | awk -v t="$(getconf CLK_TCK)" '{printf "%.2f", ($12 + $13) / t}'; }

BASE_MD5=
declare -A SECS CPU
run() { # CONFIG ROUND
    local c="$1" t0 t1 cpu="" name="bab_${1}_$2_$SFX" bronze_arg="" pid
    sql -c "SET client_min_messages = warning" -c "DROP TABLE IF EXISTS bench.orders, bench.orders_raw, bench.orders_base, bench.baseline_offsets"
    if [ "$c" = baseline ]; then
        sql -c "CREATE TABLE bench.orders_base ($ORDERS)" \
            -c "CREATE TABLE bench.baseline_offsets (next_offset bigint NOT NULL, updated_at timestamptz)" \
            -c "INSERT INTO bench.baseline_offsets VALUES (0, now())"
        sql -c CHECKPOINT
        t0="$(now)"
        sql -f "$W/baseline.sql" > /dev/null
        t1="$(now)"
        cpu="$(cat "$W/baseline.cpu")"
        BASE_MD5="$(rows_md5 bench.orders_base)"
    else
        sql -c "SET ROLE ks_e2e" -c "CREATE TABLE bench.orders ($ORDERS)"
        if [ "$c" = pk ]; then
            # the shape of bronze tables created before 0.3.0
            sql -c "SET ROLE ks_e2e" -c "CREATE TABLE bench.orders_raw (topic text COLLATE \"C\" NOT NULL,
                partition integer NOT NULL, \"offset\" bigint NOT NULL, ts timestamptz, key bytea, value bytea,
                headers jsonb, batch_id bigint NOT NULL, landed_at timestamptz NOT NULL DEFAULT now(),
                PRIMARY KEY (partition, \"offset\", topic))"
        fi
        [ "$c" = off ] || bronze_arg=", bronze => 'bench.orders_raw'"
        sql -c CHECKPOINT
        t0="$(now)"
        sql -c "SET ROLE ks_e2e" -c "SELECT kafka_sink.create_pipeline(name => '$name', bootstrap_servers => '$KS_BOOTSTRAP',
            subscribe => ARRAY['$TOPIC'], target => 'bench.orders', order_column => 'event_ts',
            starting_offsets => 'earliest', max_offsets_per_batch => $BATCH $bronze_arg)" > /dev/null
        until [ "$(sql -c "$(checkpoint_covers_sql "$name" "$N")")" = t ]; do
            [ "$(sql -c "SELECT state FROM kafka_sink.pipeline_definitions WHERE name = '$name'")" != failed ] ||
                { echo "$name failed"; exit 1; }
            sleep 0.1
        done
        t1="$(now)"
        pid="$(worker_pid "$name")"
        [ -n "$pid" ] && cpu="$(proc_cpu "$pid")"
        [ "$(rows_md5 bench.orders)" = "$BASE_MD5" ] || { echo "$name: rows differ from the baseline's"; exit 1; }
        if [ "$c" != off ]; then
            [ "$(sql -c "SELECT count(*) || '|' || count(DISTINCT (partition, \"offset\")) FROM bench.orders_raw")" = "$N|$N" ] ||
                { echo "$name: bronze does not hold each offset once"; exit 1; }
        fi
        sql -c "SELECT kafka_sink.drop_pipeline('$name')" > /dev/null
    fi
    SECS[$c]+="$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.2f", b - a}') "
    CPU[$c]+="$cpu "
    printf 'round %s %-8s %6.2f s  cpu %s  (load %s)\n' "$2" "$c" "$(awk -v a="$t0" -v b="$t1" 'BEGIN {print b - a}')" \
        "$cpu" "$(cut -d' ' -f1 /proc/loadavg)"
}
median() { tr ' ' '\n' | grep . | sort -g | awk '{a[NR] = $1} END {if (NR % 2) print a[(NR + 1) / 2]; else printf "%.2f\n", (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }
# the baseline first (the runs compare with its rows), then interleaved
run baseline 0
SECS[baseline]=""; CPU[baseline]=""
# each round starts one configuration later (A B C, B C A, ...): none is
# always the run after the same other one
read -r -a CFG <<< "$CONFIGS"
for r in $(seq "$ROUNDS"); do
    for k in $(seq 0 $((${#CFG[@]} - 1))); do run "${CFG[$(( (k + r - 1) % ${#CFG[@]} ))]}" "$r"; done
done
sql -c "SET client_min_messages = warning" -c "DROP TABLE IF EXISTS bench.orders, bench.orders_raw, bench.orders_base, bench.baseline_offsets"
base="$(echo "${SECS[baseline]:-}" | median)"
echo "| config | seconds (median) | worker CPU s (median) | / baseline (median time) |"
echo "|---|---:|---:|---:|"
for c in $CONFIGS; do
    s="$(echo "${SECS[$c]}" | median)"
    echo "| $c | $s (${SECS[$c]% }) | $(echo "${CPU[$c]}" | median) (${CPU[$c]% }) | $( [ -n "$base" ] && awk -v a="$base" -v b="$s" 'BEGIN {printf "%.2f", a / b}') |"
done
