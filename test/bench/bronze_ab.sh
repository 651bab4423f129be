#!/usr/bin/env bash
# test/bench/bronze_ab.sh — an A/B of bronze (not a timed test): the bench's
# order events (test/bench/gen_events.py, N over N/4 keys, 4 partitions)
# into bench-like bench.orders with one worker, BENCH_BRONZE_AB_BATCH per
# batch, in interleaved rounds of
#   baseline  PostgreSQL's own: psql, \copy + DISTINCT ON + MERGE per batch
#             (test/bench/run.sh's baseline), the backend's CPU
#   off       the pipeline without bronze
#   pk        bronze into a table of the shape earlier versions made
#             (PRIMARY KEY (partition, "offset", topic))
#   narrow    bronze into the table create_pipeline makes now (an index on
#             (partition, "offset"), no unique key)
#   only      a bronze-only pipeline (no target) into the table create_pipeline makes
#   narrowff, onlyff  narrow and only into a table whose index on (partition,
#             "offset") is WITH (fillfactor = 100, deduplicate_items = off)
#   onlybrin  only into a table with a BRIN index on (partition, "offset")
#             instead: the worker's check per batch does not run (it needs a
#             btree) and nothing keeps a message from landing twice, so this
#             is NOT a shape to use: it measures what the btree entry and the
#             check cost, the most any cheaper index could save
#
#   bronze_ab.sh [SO_A SO_B ...]
#
# With builds (kafka_sink.so files) each round installs each in turn into
# the harness's PostgreSQL (KS_PGBIN's lib dir; KS_PRIVATE_PG=1), restarts
# the cluster and runs the configurations but the baseline under it (the
# baseline runs once per round, under the first build): labels are
# CONFIG@bN.  Each round starts one configuration later than the one before.
# Per run: seconds from create_pipeline to the checkpoint holding every
# offset (polled every 0.1 s), the worker's CPU seconds (utime + stime from
# /proc/<pid>/stat), the WAL it wrote (pg_current_wal_lsn() before and
# after) and the WAL segments the cluster had to create for it (files in
# pg_wal before and after: each a 16 MB zero-fill, XLogFileInit, in the
# process that needs it); then the medians and each one's ratio to the
# baseline's median time.  Every run's target must equal the baseline's
# rows and every bronze table must hold each offset once, else the script
# fails.  The cluster gets max_wal_size 16GB and checkpoint_timeout 30min
# (as test/bench/run.sh sets them) and a CHECKPOINT before each run.
# BENCH_BRONZE_AB_WAL=warm (the default; "cold" leaves the cluster as it
# is): min_wal_size 4GB and, before the first run, enough WAL segments
# created and recycled that no run creates one, the steady state of a
# server that has run a while (its segments are recycled, never zero-filled
# again) for the baseline and the pipelines alike (docs/performance.md).
# Needs a running harness (KS_KEEP_RUNNING=1 on any e2e run leaves one up).
# BENCH_BRONZE_AB_EVENTS (400000), BENCH_BRONZE_AB_BATCH (50000),
# BENCH_BRONZE_AB_ROUNDS (3), BENCH_BRONZE_AB_CONFIGS ("baseline off pk narrow"),
# BENCH_BRONZE_AB_PERF (a directory: perf record -g of each run's worker into it).
# shellcheck source=../lib/common.sh
. "$(dirname "$0")/../lib/common.sh"
setup_owner
N="${BENCH_BRONZE_AB_EVENTS:-400000}"
BATCH="${BENCH_BRONZE_AB_BATCH:-50000}"
ROUNDS="${BENCH_BRONZE_AB_ROUNDS:-3}"
CONFIGS="${BENCH_BRONZE_AB_CONFIGS:-baseline off pk narrow}"
WAL_MODE="${BENCH_BRONZE_AB_WAL:-warm}"
PERF_DIR="${BENCH_BRONZE_AB_PERF:-}"
# shellcheck source=ab_lib.sh
. "$(dirname "$0")/ab_lib.sh"
ab_builds "$@"
W="$KS_RUN/bronze_ab_$SFX"
TOPIC="bronze_ab_$SFX"
mkdir -p "$W/csv"
chmod -R o+rX "$W" 2>/dev/null || true
rm_work() { rm -rf "$W"; }
at_exit rm_work
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

# no checkpoint inside a run (as test/bench/run.sh); the WAL's steady state
sql -c "ALTER SYSTEM SET max_wal_size = '16GB'" -c "ALTER SYSTEM SET checkpoint_timeout = '30min'" \
    -c "SELECT pg_reload_conf()" > /dev/null
if [ "$WAL_MODE" = warm ]; then
    sql -c "ALTER SYSTEM SET min_wal_size = '4GB'" -c "SELECT pg_reload_conf()" > /dev/null
    # segments for more WAL than a run writes (bronze: ~350 bytes per
    # message), created once and recycled by the checkpoint (min_wal_size
    # keeps them): no run below zero-fills a new one
    for _ in $(seq $(( (N / 400000 + 1) * 16 ))); do
        sql -c "SELECT pg_logical_emit_message(false, 'bronze_ab', 'warm')" -c "SELECT pg_switch_wal()" > /dev/null
    done
    sql -c CHECKPOINT
fi
wal_reset() {
    sql -c "ALTER SYSTEM RESET max_wal_size" -c "ALTER SYSTEM RESET checkpoint_timeout" \
        -c "ALTER SYSTEM RESET min_wal_size" -c "SELECT pg_reload_conf()" > /dev/null 2>&1
}
at_exit wal_reset

now() { date +%s.%N; }
wal_state() { sql -c "SELECT pg_current_wal_lsn() || ' ' || (SELECT count(*) FROM pg_ls_waldir() WHERE name ~ '^[0-9A-F]{24}$')"; }

BASE_MD5=
declare -A SECS CPU WALMB SEGS
LABELS=()
run() { # CONFIG ROUND LABEL
    local c="$1" label="$3" t0 t1 cpu="" name="bab_${1}_$2_$SFX" bronze_arg="" target_arg pid w0 w1 perf_pid=""
    sql -c "SET client_min_messages = warning" -c "DROP TABLE IF EXISTS bench.orders, bench.orders_raw, bench.orders_base, bench.baseline_offsets"
    if [ "$c" = baseline ]; then
        sql -c "CREATE TABLE bench.orders_base ($ORDERS)" \
            -c "CREATE TABLE bench.baseline_offsets (next_offset bigint NOT NULL, updated_at timestamptz)" \
            -c "INSERT INTO bench.baseline_offsets VALUES (0, now())"
        sql -c CHECKPOINT
        w0="$(wal_state)"
        t0="$(now)"
        sql -f "$W/baseline.sql" > /dev/null
        t1="$(now)"
        w1="$(wal_state)"
        cpu="$(cat "$W/baseline.cpu")"
        BASE_MD5="$(rows_md5 bench.orders_base)"
    else
        target_arg=", target => 'bench.orders', order_column => 'event_ts'"
        case "$c" in only*) target_arg="" ;; esac
        [ -z "$target_arg" ] || sql -c "SET ROLE ks_e2e" -c "CREATE TABLE bench.orders ($ORDERS)"
        if [ "$c" = pk ]; then
            # the shape of bronze tables created before 0.3.0
            sql -c "SET ROLE ks_e2e" -c "CREATE TABLE bench.orders_raw (topic text COLLATE \"C\" NOT NULL,
                partition integer NOT NULL, \"offset\" bigint NOT NULL, ts timestamptz, key bytea, value bytea,
                headers jsonb, batch_id bigint NOT NULL, landed_at timestamptz NOT NULL DEFAULT now(),
                PRIMARY KEY (partition, \"offset\", topic))"
        fi
        local index=""
        case "$c" in
            narrowff|onlyff) index="(partition, \"offset\") WITH (fillfactor = 100, deduplicate_items = off)" ;;
            onlybrin) index="USING brin (partition, \"offset\")" ;;
        esac
        if [ -n "$index" ]; then
            sql -c "SET ROLE ks_e2e" -c "CREATE TABLE bench.orders_raw (topic text COLLATE \"C\" NOT NULL,
                partition integer NOT NULL, \"offset\" bigint NOT NULL, ts timestamptz, key bytea, value bytea,
                headers jsonb, batch_id bigint NOT NULL, landed_at timestamptz NOT NULL DEFAULT now())" \
                -c "CREATE INDEX ON bench.orders_raw $index"
        fi
        [ "$c" = off ] || bronze_arg=", bronze => 'bench.orders_raw'"
        sql -c CHECKPOINT
        w0="$(wal_state)"
        t0="$(now)"
        sql -c "SET ROLE ks_e2e" -c "SELECT kafka_sink.create_pipeline(name => '$name', bootstrap_servers => '$KS_BOOTSTRAP',
            subscribe => ARRAY['$TOPIC'] $target_arg,
            starting_offsets => 'earliest', max_offsets_per_batch => $BATCH $bronze_arg)" > /dev/null
        if [ -n "$PERF_DIR" ]; then
            for _ in $(seq 100); do pid="$(worker_pid "$name")"; [ -n "$pid" ] && break; sleep 0.05; done
            perf record -F 999 -g -p "$pid" -o "$PERF_DIR/perf-$label-$2.data" >/dev/null 2>&1 &
            perf_pid=$!
        fi
        until [ "$(sql -c "$(checkpoint_covers_sql "$name" "$N")")" = t ]; do
            [ "$(sql -c "SELECT state FROM kafka_sink.pipeline_definitions WHERE name = '$name'")" != failed ] ||
                { echo "$name failed"; exit 1; }
            sleep 0.1
        done
        t1="$(now)"
        w1="$(wal_state)"
        [ -z "$perf_pid" ] || { kill -INT "$perf_pid"; wait "$perf_pid" 2>/dev/null || true; }
        pid="$(worker_pid "$name")"
        [ -n "$pid" ] && cpu="$(proc_cpu "$pid")"
        [ -z "$target_arg" ] || [ "$(rows_md5 bench.orders)" = "$BASE_MD5" ] || { echo "$name: rows differ from the baseline's"; exit 1; }
        if [ "$c" != off ]; then
            [ "$(sql -c "SELECT count(*) || '|' || count(DISTINCT (partition, \"offset\")) FROM bench.orders_raw")" = "$N|$N" ] ||
                { echo "$name: bronze does not hold each offset once"; exit 1; }
        fi
        sql -c "SELECT kafka_sink.drop_pipeline('$name')" > /dev/null
    fi
    local secs walmb segs
    secs="$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.2f", b - a}')"
    walmb="$(sql -c "SELECT round(pg_wal_lsn_diff('${w1% *}', '${w0% *}') / 1048576.0, 1)")"
    segs=$(( ${w1#* } - ${w0#* } ))
    [ $segs -ge 0 ] || segs=0
    [[ " ${LABELS[*]} " == *" $label "* ]] || LABELS+=("$label")
    SECS[$label]+="$secs "; CPU[$label]+="$cpu "; WALMB[$label]+="$walmb "; SEGS[$label]+="$segs "
    printf 'round %s %-12s %6.2f s  cpu %s  WAL %s MB, %s new segments  (load %s)\n' "$2" "$label" "$secs" \
        "$cpu" "$walmb" "$segs" "$(cut -d' ' -f1 /proc/loadavg)"
}
# the baseline first (the runs compare with its rows), then interleaved
swap "${SOS[0]}"
run baseline 0 baseline
SECS[baseline]=""; CPU[baseline]=""; WALMB[baseline]=""; SEGS[baseline]=""
# each round starts one configuration later (A B C, B C A, ...): none is
# always the run after the same other one; with builds, each round runs
# every build, in turn
read -r -a CFG <<< "$CONFIGS"
for r in $(seq "$ROUNDS"); do
    for b in "${!SOS[@]}"; do
        swap "${SOS[$b]}"
        for k in $(seq 0 $((${#CFG[@]} - 1))); do
            c="${CFG[$(( (k + r - 1) % ${#CFG[@]} ))]}"
            if [ "$c" = baseline ]; then
                [ "$b" = 0 ] && run baseline "$r" baseline
            elif [ ${#SOS[@]} -gt 1 ]; then
                run "$c" "$r" "$c@b$b"
            else
                run "$c" "$r" "$c"
            fi
        done
    done
done
sql -c "SET client_min_messages = warning" -c "DROP TABLE IF EXISTS bench.orders, bench.orders_raw, bench.orders_base, bench.baseline_offsets"
base=""
[ -z "${SECS[baseline]:-}" ] || base="$(echo "${SECS[baseline]}" | median)"
echo "| config | seconds (median) | worker CPU s (median) | WAL MB (median) | new WAL segments | / baseline (median time) |"
echo "|---|---:|---:|---:|---:|---:|"
for c in "${LABELS[@]}"; do
    [ -n "${SECS[$c]}" ] || continue  # the baseline when CONFIGS leaves it out
    s="$(echo "${SECS[$c]}" | median)"
    echo "| $c | $s (${SECS[$c]% }) | $(echo "${CPU[$c]}" | median) (${CPU[$c]% }) | $(echo "${WALMB[$c]}" | median) | ${SEGS[$c]% } | $( [ -n "$base" ] && awk -v a="$base" -v b="$s" 'BEGIN {printf "%.2f", a / b}') |"
done
