#!/usr/bin/env bash
# test/bench/text_ab.sh — an A/B of builds on text and bigint keys (not a
# timed test): the bench's order events (test/bench/gen_events.py, N over
# N/4 keys, 4 partitions) into bench-like bench.orders with order_id text
# (the JSON number's text, as the bench's tk1/tk2) or bigint, one or more
# workers, BENCH_TEXT_AB_BATCH per batch.
#
#   text_ab.sh [SO_A SO_B ...]
#
# With builds (kafka_sink.so files) each round installs each in turn into
# the harness's PostgreSQL (KS_PGBIN's lib dir), restarts the cluster and
# runs every (key type, workers) configuration: A B A B ... (the last
# build stays installed; run it with the harness's env, so that pg-start
# keeps KS_PGBIN); without builds, the installed build only.  Per run: the
# workers' CPU seconds (utime + stime from /proc/<pid>/stat, all workers
# together) from create_pipeline to the checkpoint holding every offset.
# Every run's target must equal the rows of PostgreSQL's own MERGE over
# the same events (the bench's baseline script, test/bench/baseline_sql.sh,
# run once per key type before the rounds), else the script fails.  Needs
# a running harness (KS_KEEP_RUNNING=1 on any e2e run leaves one up;
# KS_PRIVATE_PG=1 for the build swap).
#   BENCH_TEXT_AB_EVENTS (400000), BENCH_TEXT_AB_BATCH (100000),
#   BENCH_TEXT_AB_ROUNDS (4), BENCH_TEXT_AB_KEYS ("text bigint"),
#   BENCH_TEXT_AB_WORKERS ("1 2"), BENCH_TEXT_AB_COLLATE (the text key's
#   collation, e.g. und-x-icu; empty: the database's),
#   BENCH_TEXT_AB_KEYFORM (number: the JSON number's text; mixed: 6 letters
#   of mixed case per order id, text keys only),
#   BENCH_TEXT_AB_PERF (a directory: perf record -g of each run's workers into it),
#   BENCH_TEXT_AB_THREADS (non-empty: each worker thread's CPU s on stderr,
#   the backend's own thread and librdkafka's by name)
# shellcheck source=../lib/common.sh
. "$(dirname "$0")/../lib/common.sh"
setup_owner
N="${BENCH_TEXT_AB_EVENTS:-400000}"
BATCH="${BENCH_TEXT_AB_BATCH:-100000}"
ROUNDS="${BENCH_TEXT_AB_ROUNDS:-4}"
KEYS="${BENCH_TEXT_AB_KEYS:-text bigint}"
WORKERS="${BENCH_TEXT_AB_WORKERS:-1 2}"
COLL="${BENCH_TEXT_AB_COLLATE:-}"
# shellcheck source=ab_lib.sh
. "$(dirname "$0")/ab_lib.sh"
ab_builds "$@"
W="$KS_RUN/text_ab_$SFX"
TOPIC="text_ab_$SFX"
mkdir -p "$W/csv"
chmod -R o+rX "$W" 2>/dev/null || true
clean_w() { rm -rf "$W"; }
at_exit clean_w
python3 "$REPO/test/bench/gen_events.py" "$N" $((N / 4)) 29 "$W/events.tsv" "$W/csv" "$BATCH" > /dev/null
if [ "${BENCH_TEXT_AB_KEYFORM:-number}" = mixed ]; then
    # each order id as 6 letters of mixed case, scattered: ICU's order of
    # them (case second) is not their bytes' (upper case first)
    python3 - "$W/events.tsv" "$W/csv" <<'PY'
import glob, re, sys
A = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
def mixed(n):
    h = (int(n) * 2654435761) % (52 ** 6)
    return "".join(A[(h // 52 ** i) % 52] for i in range(6))
ev = sys.argv[1]
out = []
for line in open(ev):
    k, v = line.rstrip("\n").split("\t", 1)
    out.append("%s\t%s" % (mixed(k), re.sub(r'^\{"order_id":(\d+)', lambda m: '{"order_id":"%s"' % mixed(m.group(1)), v)))
open(ev, "w").write("\n".join(out) + "\n")
for f in glob.glob(sys.argv[2] + "/chunk-*.csv"):
    rows = [l.split(",", 1) for l in open(f)]
    open(f, "w").write("".join(mixed(a) + "," + b for a, b in rows))
PY
fi
"$HARNESS" topic-create "$TOPIC" 4 >/dev/null 2>&1
drop_topic() { "$HARNESS" topic-delete "$TOPIC" >/dev/null 2>&1 || true; }
at_exit drop_topic
kcat -P -b "$KS_BOOTSTRAP" -t "$TOPIC" -K $'\t' -l -X linger.ms=20 -X batch.num.messages=10000 \
     -X queue.buffering.max.messages=1000000 "$W/events.tsv"
sql -c "CREATE SCHEMA IF NOT EXISTS bench AUTHORIZATION ks_e2e" 2>/dev/null || true
key_def() {  # KEYTYPE
    if [ "$1" = text ]; then echo "order_id text${COLL:+ COLLATE \"$COLL\"} PRIMARY KEY"; else echo "order_id bigint PRIMARY KEY"; fi
}
orders() { echo "$(key_def "$1"), event_ts timestamptz NOT NULL, amount numeric(18,2), schema_version int"; }

# the rows PostgreSQL's own MERGE gives, per key type
# shellcheck source=baseline_sql.sh
. "$REPO/test/bench/baseline_sql.sh"
baseline_sql "$W" "$W/csv" "$N" "$BATCH" > "$W/baseline.sql"
declare -A BASE_MD5
for k in $KEYS; do
    sql -c "SET client_min_messages = warning" -c "DROP TABLE IF EXISTS bench.orders_base, bench.baseline_offsets"
    sql -c "CREATE TABLE bench.orders_base ($(orders "$k"))" \
        -c "CREATE TABLE bench.baseline_offsets (next_offset bigint NOT NULL, updated_at timestamptz)" \
        -c "INSERT INTO bench.baseline_offsets VALUES (0, now())"
    stage_key="order_id bigint"
    [ "$k" = bigint ] || stage_key="order_id text${COLL:+ COLLATE \"$COLL\"}"
    sed -e "s/^CREATE TEMP TABLE stage (order_id bigint,/CREATE TEMP TABLE stage ($stage_key,/" "$W/baseline.sql" > "$W/baseline_$k.sql"
    sql -f "$W/baseline_$k.sql" > /dev/null
    BASE_MD5[$k]="$(rows_md5 bench.orders_base)"
    echo "# baseline $k: $(cat "$W/baseline.cpu") backend CPU s, minflt $(cat "$W/baseline.minflt" 2>/dev/null)"
done
sql -c "SET client_min_messages = warning" -c "DROP TABLE IF EXISTS bench.orders_base, bench.baseline_offsets"

RUNS=0
run() {  # LABEL KEYTYPE WORKERS -> "LABEL KEYTYPE wWORKERS cpu_s"
    local name cpu=0 pids p
    RUNS=$((RUNS + 1))
    name="tab_${RUNS}_$SFX"
    sql -c "SET client_min_messages = warning" -c "DROP TABLE IF EXISTS bench.orders"
    sql -c "SET ROLE ks_e2e" -c "CREATE TABLE bench.orders ($(orders "$2"))"
    sql -c CHECKPOINT
    sql -c "SET ROLE ks_e2e" -c "SELECT kafka_sink.create_pipeline(name => '$name', bootstrap_servers => '$KS_BOOTSTRAP',
        subscribe => ARRAY['$TOPIC'], target => 'bench.orders', order_column => 'event_ts',
        starting_offsets => 'earliest', max_offsets_per_batch => $BATCH, workers => $3)" > /dev/null
    if [ -n "${BENCH_TEXT_AB_PERF:-}" ]; then  # a profile of each run: perf.data in this dir
        for _ in $(seq 100); do pids="$(worker_pids "$name")"; [ "$(wc -w <<< "$pids")" -ge "$3" ] && break; sleep 0.1; done
        perf record -F 999 -g -p "$(tr ' ' ',' <<< "$pids")" -o "$BENCH_TEXT_AB_PERF/perf-$1-$2-w$3-$RUNS.data" >/dev/null 2>&1 &
        PERF_PID=$!
    fi
    poll "$(checkpoint_covers_sql "$name" "$N")" 900 || { echo "$name did not catch up"; exit 1; }
    [ -z "${PERF_PID:-}" ] || { kill -INT "$PERF_PID"; wait "$PERF_PID" 2>/dev/null || true; PERF_PID=""; }
    pids="$(worker_pids "$name")"
    for p in $pids; do cpu="$(awk -v a="$cpu" -v b="$(proc_cpu "$p")" 'BEGIN {printf "%.2f", a + b}')"; done
    [ -z "${BENCH_TEXT_AB_THREADS:-}" ] || for p in $pids; do thread_cpu "$p" | sed "s/^/# $1 $2 w$3 thread /" >&2; done
    [ "$(rows_md5 bench.orders)" = "${BASE_MD5[$2]}" ] || { echo "$name: rows differ from the baseline's"; exit 1; }
    sql -c "SELECT kafka_sink.drop_pipeline('$name')" > /dev/null
    echo "$1 $2 w$3 $cpu (load $(cut -d' ' -f1 /proc/loadavg))"
}
RES="$W/results.txt"
: > "$RES"
for r in $(seq "$ROUNDS"); do
    for i in "${!SOS[@]}"; do
        # each round starts one build later: none always runs after the same other
        b=$(( (i + r - 1) % ${#SOS[@]} ))
        swap "${SOS[$b]}"
        # not through a pipe: run counts the runs (each perf file its own)
        for k in $KEYS; do for w in $WORKERS; do run "build$b" "$k" "$w" >> "$RES"; tail -n 1 "$RES"; done; done
    done
done
sql -c "SET client_min_messages = warning" -c "DROP TABLE IF EXISTS bench.orders"
echo "# medians (workers' CPU s)"
awk '{k = $1 " " $2 " " $3; v[k] = v[k] " " $4} END {for (k in v) print k, v[k]}' "$RES" | sort |
    while read -r b k w vals; do
        m="$(echo "$vals" | tr ' ' '\n' | grep . | sort -g | awk '{a[NR] = $1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}')"
        echo "$b $k $w median $m of:$vals"
    done
