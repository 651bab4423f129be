#!/usr/bin/env bash
# test/bench/run.sh — kafka_sink's benchmark (`make bench`).
#
# One run, on the real broker and a throwaway PostgreSQL 15 cluster
# (test/harness.sh, run dir ${KS_RUN:-<repo>/.run-bench}):
#
#   1. N JSON order events (BENCH_EVENTS, default 2,000,000) over N/4
#      order ids, produced with kcat to a 4-partition topic (key = order_id);
#      the same events as CSV for the baseline.
#   2. baseline: PostgreSQL's own limit for the work, psql only: per 50k
#      events one transaction of COPY into a TEMP staging table, DISTINCT ON
#      reduce, MERGE with the ordering guard, an offsets row update.
#   3. ours: create_pipeline(starting_offsets => 'earliest') until the
#      checkpoint holds every offset (polled every 0.1 s; kafka_sink.wait()
#      confirms), max_offsets_per_batch 50000 and 100000, then 50000 with
#      bronze => 'bench.orders_raw'; worker CPU and peak RSS.
#   3b. ours on the same events as Avro (BENCH_AVRO, default 1): a second
#      topic filled once by test/bench/avro_events.py in Confluent's wire
#      format, read with value_format avro through test/tools/schema_registry.py
#      (max_offsets_per_batch 50000, compared with the baseline like the rest);
#      and as Protobuf (BENCH_PROTOBUF, default BENCH_AVRO): a third topic
#      filled once by test/bench/protobuf_events.py, value_format protobuf
#      through the same registry, run right after the Avro row.
#   4. peers: a plain Python consumer (confluent-kafka + psycopg 3, COPY +
#      INSERT ... ON CONFLICT with the guard, Kafka commit after the DB
#      commit), in a venv under the run dir; Kafka Connect + the Debezium
#      JDBC sink in upsert mode (test/bench/debezium_peer.sh, one round).
#   5. latency: a paced producer at BENCH_LAT_RATE msgs/s (20000) for
#      BENCH_LAT_WARMUP (5, not measured) + BENCH_LAT_SECONDS (30) seconds,
#      unique keys, event_ts = produce time,
#      trigger_interval BENCH_LAT_TRIGGER (100 ms); bronze off and on.
#   6. profile: perf record -g on the worker for BENCH_PROFILE_SECONDS (20).
#   7. the table on stdout, test/bench/out/{results.md,results.json,
#      throughput.png,perf-*.txt}.
#
# Every target table is compared with the baseline's at the end of its run
# (same rows, same values): all implement "greatest event_ts per order_id,
# ties to the later offset".
#
# Knobs: BENCH_EVENTS, BENCH_KEYS (N/4), BENCH_REPEAT (2: rounds of the
# throughput runs, the fastest of each counts), BENCH_LAT_RATE, BENCH_LAT_SECONDS, BENCH_LAT_TRIGGER (100 ms),
# BENCH_PROFILE (1; 0 skips perf), BENCH_PROFILE_SECONDS, BENCH_PEERS (1;
# 0 skips the Python consumer and Debezium), BENCH_DEBEZIUM (BENCH_PEERS), BENCH_BUILD (1; 0 skips make && make
# install), BENCH_KEEP (0; 1 leaves the broker and the cluster running),
# BENCH_OUT (test/bench/out), BENCH_PRIVATE_PG (1: install into, and run
# the cluster from, a private copy of the PostgreSQL tree under the run dir),
# BENCH_WAL_WARM (1: WAL segments created before the first run and kept by
# min_wal_size, the steady state; 0: the cluster as it is), BENCH_WAL_WARM_SEGMENTS,
# KS_RUN.  The throughput runs repeat BENCH_REPEAT times, interleaved.
# KS_BENCH_PARTS ("orders cdc"): which parts run; "orders" is 1-7 above,
# "cdc" the CDC rows (test/bench/cdc_part.sh: Debezium change events
# through kafka_sink's envelope => 'debezium' beside the Debezium JDBC sink
# on the same topics; knobs BENCH_CDC_ROWS, BENCH_CDC_OPS there), e.g.
# `KS_BENCH_PARTS=cdc make bench` to measure only that.
#
# It stops what it started (broker, cluster) unless BENCH_KEEP=1; a broker
# or cluster that was already running is left running.
set -euo pipefail

BENCH_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$BENCH_DIR/../.." && pwd)"
cd "$REPO"
export KS_RUN="${KS_RUN:-$REPO/.run-bench}"
H="$REPO/test/harness.sh"
PG_CONFIG="${PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}"

# BENCH_QUICK=1: a run of a few minutes (1M events, one round, shorter
# latency and profile runs); every knob set explicitly still wins
QUICK="${BENCH_QUICK:-0}"
if [ "$QUICK" = 1 ]; then
    : "${BENCH_EVENTS:=1000000}" "${BENCH_REPEAT:=1}" "${BENCH_LAT_SECONDS:=10}" "${BENCH_LAT_WARMUP:=3}"
    : "${BENCH_PROFILE_SECONDS:=8}"
fi
N="${BENCH_EVENTS:-2000000}"
# BENCH_ONLY="m100k w2 avro ...": only these configurations (the baseline
# always runs: every ratio is to it); names as in results.json, plus lat,
# lat_bronze, profile, py, dbz
ONLY="${BENCH_ONLY:-}"
only() { [ -z "$ONLY" ] || [[ " $ONLY " == *" $1 "* ]]; }
KEYS="${BENCH_KEYS:-$((N / 4))}"
[ "$KEYS" -ge 1 ] || KEYS=1
SEED="${BENCH_SEED:-42}"
BATCH=50000
LAT_RATE="${BENCH_LAT_RATE:-20000}"
LAT_SECONDS="${BENCH_LAT_SECONDS:-30}"
LAT_WARMUP="${BENCH_LAT_WARMUP:-5}"
LAT_TRIGGER="${BENCH_LAT_TRIGGER:-100 ms}"
PROFILE="${BENCH_PROFILE:-1}"
PROFILE_SECONDS="${BENCH_PROFILE_SECONDS:-20}"
PROFILE_STRATEGY="${BENCH_PROFILE_STRATEGY:-default}"   # sql: profile the MERGE instead
PEERS="${BENCH_PEERS:-1}"
REPEAT="${BENCH_REPEAT:-2}"
BUILD="${BENCH_BUILD:-1}"
KEEP="${BENCH_KEEP:-0}"
OUT="${BENCH_OUT:-$BENCH_DIR/out}"
PARTS="${KS_BENCH_PARTS:-orders cdc}"
has_part() { case " $PARTS " in *" $1 "*) return 0 ;; esac; return 1; }
for p_ in $PARTS; do case "$p_" in orders|cdc) ;; *) echo "KS_BENCH_PARTS: orders and/or cdc, not '$p_'" >&2; exit 2 ;; esac; done
W="$KS_RUN/bench"                    # work files: data, samples, perf.data
OWNER=bench_owner
TOPIC="bench.orders.n$N.k$KEYS.s$SEED"
RUNID="$(date +%s)"

mkdir -p "$OUT" "$W"
RAW="$OUT/raw.tsv"
: > "$RAW"
LOG="$OUT/bench.log"
: > "$LOG"

T_START=$SECONDS
say()  { printf '[bench %s +%ss] %s\n' "$(date +%H:%M:%S)" "$((SECONDS - T_START))" "$*" | tee -a "$LOG" >&2; }
die()  { say "ERROR: $*"; exit 1; }
put()  { printf '%s\t%s\n' "$1" "$2" >> "$RAW"; }     # put KEY VALUE
now()  { date +%s.%N; }
sub()  { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.3f", a - b}'; }   # sub A B: A - B

# ------------------------------------------------------------------ setup
say "packages (harness deps, gnuplot-nox, linux-perf, python3-venv)"
bash "$H" deps >> "$LOG" 2>&1
apt_missing=()
command -v gnuplot >/dev/null 2>&1 || apt_missing+=(gnuplot-nox)
if [ "$PROFILE" = 1 ] && ! command -v perf >/dev/null 2>&1; then apt_missing+=(linux-perf); fi
python3 -c 'import venv, ensurepip' 2>/dev/null || apt_missing+=(python3-venv)
if [ ${#apt_missing[@]} -gt 0 ]; then
    [ "$(id -u)" = 0 ] || die "missing ${apt_missing[*]}: install them (apt-get install ${apt_missing[*]})"
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y -qq --no-install-recommends "${apt_missing[@]}" >> "$LOG" 2>&1 \
        || { apt-get update -qq >> "$LOG" 2>&1; apt-get install -y -qq --no-install-recommends "${apt_missing[@]}" >> "$LOG" 2>&1; }
fi

VENV="$KS_RUN/venv"
if ! "$VENV/bin/python" -c 'import confluent_kafka, psycopg, fastavro' 2>/dev/null; then
    say "python venv $VENV (confluent-kafka[avro], psycopg[binary] from PyPI)"
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install -q --disable-pip-version-check 'confluent-kafka[avro]' 'psycopg[binary]' >> "$LOG" 2>&1
fi
PY="$VENV/bin/python"

# The extension is installed into a private copy of the PostgreSQL 15 tree
# under the run dir (DESTDIR), and the cluster runs from that copy: another
# clone's concurrent `make install` into /usr cannot swap the kafka_sink.so
# or the extension script under the benchmark.  BENCH_PRIVATE_PG=0 uses the
# system tree (make install) instead.
# the version being built (its install script: kafka_sink--<version>.sql)
EXTV="$(sed -n "s/^EXTVERSION = //p" Makefile)"
if [ "${BENCH_PRIVATE_PG:-1}" = 1 ]; then
    PGP="$KS_RUN/pginst"
    sysbin="$("$PG_CONFIG" --bindir)"; syspkglib="$("$PG_CONFIG" --pkglibdir)"; sysshare="$("$PG_CONFIG" --sharedir)"
    if [ ! -x "$PGP$sysbin/postgres" ]; then
        say "private PostgreSQL tree $PGP (a copy of $(dirname "$sysbin") and $sysshare)"
        mkdir -p "$PGP$(dirname "$(dirname "$sysbin")")" "$PGP$(dirname "$sysshare")"
        cp -a "$(dirname "$sysbin")" "$PGP$(dirname "$(dirname "$sysbin")")/"
        cp -a "$sysshare" "$PGP$(dirname "$sysshare")/"
        chmod -R o+rX "$PGP"
    fi
    export KS_PGBIN="$PGP$sysbin"
    INSTALLED_SO="$PGP$syspkglib/kafka_sink.so"
    INSTALLED_SQL="$PGP$sysshare/extension/kafka_sink--$EXTV.sql"
    INSTALL_ARGS=(DESTDIR="$PGP")
else
    INSTALLED_SO="$("$PG_CONFIG" --pkglibdir)/kafka_sink.so"
    INSTALLED_SQL="$("$PG_CONFIG" --sharedir)/extension/kafka_sink--$EXTV.sql"
    INSTALL_ARGS=()
fi
if [ "$BUILD" = 1 ]; then
    say "build and install the extension (make && make install ${INSTALL_ARGS[*]})"
    # objects built against another PostgreSQL (run_tests.sh's matrix) are
    # cleaned first: the stamp is run_tests.sh's build_install's
    if [ "$(cat "$REPO/.ks_build_pg" 2>/dev/null)" != "$PG_CONFIG" ]; then
        make -s clean >/dev/null 2>&1 || true
    fi
    echo "$PG_CONFIG" > "$REPO/.ks_build_pg"
    make -s -j"$(nproc)" PG_CONFIG="$PG_CONFIG" >> "$LOG" 2>&1 || die "make failed (see $LOG)"
    # unchanged: keep the file a running cluster has mapped (perf needs it)
    if ! cmp -s kafka_sink.so "$INSTALLED_SO" \
       || ! cmp -s kafka_sink--$EXTV.sql "$INSTALLED_SQL"; then
        make -s install PG_CONFIG="$PG_CONFIG" "${INSTALL_ARGS[@]}" >> "$LOG" 2>&1 || die "make install failed (see $LOG)"
    fi
fi

say "broker and cluster ($KS_RUN)"
st="$(bash "$H" status 2>/dev/null || true)"
started_kafka=0; started_pg=0
case "$st" in *"kafka: running"*) ;; *) started_kafka=1 ;; esac
case "$st" in *"postgresql: running"*) ;; *) started_pg=1 ;; esac
bg_pids=()
exit_hooks=()
at_bench_exit() { exit_hooks+=("$1"); }
cleanup() {
    local rc=$? h
    for p in "${bg_pids[@]}"; do kill "$p" 2>/dev/null || true; done
    for h in "${exit_hooks[@]}"; do "$h"; done
    if [ "$KEEP" != 1 ]; then
        [ $started_pg = 1 ] && bash "$H" pg-stop >> "$LOG" 2>&1
        [ $started_kafka = 1 ] && bash "$H" kafka-stop >> "$LOG" 2>&1
    else
        say "BENCH_KEEP=1: broker and cluster left running (KS_RUN=$KS_RUN test/harness.sh stop-all)"
    fi
    exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM
bash "$H" kafka-fetch >> "$LOG" 2>&1
bash "$H" kafka-start >> "$LOG" 2>&1 || die "kafka-start failed (see $LOG)"
bash "$H" pg-start >> "$LOG" 2>&1 || die "pg-start failed (see $LOG)"
set -a
# shellcheck disable=SC1091
. "$KS_RUN/env"
set +a
if [ $started_pg = 0 ]; then
    pm="$(head -n 1 "$KS_PGDATA/postmaster.pid" 2>/dev/null || echo 0)"
    if [ "$(readlink -f "/proc/$pm/exe" 2>/dev/null)" != "$(readlink -f "$KS_PGBIN/postgres")" ]; then
        die "the cluster in $KS_RUN is already running, but not from $KS_PGBIN: stop it first (KS_RUN=$KS_RUN test/harness.sh pg-stop)"
    fi
    if [ "$INSTALLED_SO" -nt "$KS_PGDATA/postmaster.pid" ]; then
        say "note: kafka_sink.so was installed after the cluster started; restarting the cluster"
        bash "$H" pg-stop >> "$LOG" 2>&1; bash "$H" pg-start >> "$LOG" 2>&1
    fi
fi

psu()  { psql -X -q -A -t -v ON_ERROR_STOP=1 "$@"; }                 # superuser
pso()  { PGUSER=$OWNER psql -X -q -A -t -v ON_ERROR_STOP=1 "$@"; }   # the pipeline owner

# no checkpoint in the middle of a measured phase: each phase starts with a
# CHECKPOINT and then stays well below max_wal_size and checkpoint_timeout
psu <<SQL >> "$LOG"
ALTER SYSTEM SET max_wal_size = '16GB';
ALTER SYSTEM SET checkpoint_timeout = '30min';
SELECT pg_reload_conf();
SQL
# The WAL's steady state, the same for every phase, the baseline's
# included: a server that has run a while recycles its WAL segments at
# each checkpoint and never zero-fills a new one (XLogFileInit: a 16 MB
# pwrite and an fsync in the process that needs the segment).  A fresh
# cluster would make the first phases that write much WAL (bronze) pay
# for creating them.  min_wal_size keeps BENCH_WAL_WARM_SEGMENTS segments
# (about 350 bytes of WAL per message with bronze, ~0.4 GB at 1M), created
# once here and recycled by each phase's CHECKPOINT.  BENCH_WAL_WARM=0
# leaves the cluster as it is.
if [ "${BENCH_WAL_WARM:-1}" = 1 ]; then
    WARM_SEGS="${BENCH_WAL_WARM_SEGMENTS:-$(( (N / 1000000 + 1) * 32 ))}"
    say "WAL steady state: min_wal_size $((WARM_SEGS * 16 + 256))MB, $WARM_SEGS segments created and recycled"
    psu -c "ALTER SYSTEM SET min_wal_size = '$((WARM_SEGS * 16 + 256))MB'" -c "SELECT pg_reload_conf()" >> "$LOG"
    wal_have="$(psu -c "SELECT count(*) FROM pg_ls_waldir() WHERE name ~ '^[0-9A-F]{24}\$'")"
    for _ in $(seq "$wal_have" "$WARM_SEGS"); do
        psu -c "SELECT pg_logical_emit_message(false, 'bench', 'warm')" -c "SELECT pg_switch_wal()" > /dev/null
    done
    psu -c CHECKPOINT >> "$LOG"
fi

psu <<SQL >> "$LOG"
SET client_min_messages = warning;
DO \$\$ BEGIN
    IF EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'kafka_sink') THEN
        PERFORM kafka_sink.drop_pipeline(name => p.name, if_exists => true)
           FROM kafka_sink.pipeline_definitions p WHERE p.name LIKE 'bench%';
    END IF;
END \$\$;
DROP EXTENSION IF EXISTS kafka_sink CASCADE;
CREATE EXTENSION kafka_sink;
DO \$\$ BEGIN
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '$OWNER') THEN CREATE ROLE $OWNER LOGIN; END IF;
END \$\$;
GRANT kafka_sink_admin TO $OWNER;
DROP SCHEMA IF EXISTS bench CASCADE;
CREATE SCHEMA bench AUTHORIZATION $OWNER;
SQL

dbz_env() { env PGUSER=$OWNER PY="$PY" KS_HARNESS="$H" DBZ_WORK="$KS_RUN/debezium" DBZ_BATCH=$BATCH "$@"; }
DBZ="${BENCH_DEBEZIUM:-$PEERS}"
AVRO="${BENCH_AVRO:-1}"
PROTOBUF="${BENCH_PROTOBUF:-$AVRO}"   # needs the registry the Avro part starts

# ------------------------------------------------------------------ data
DATA="$W/data-n$N-k$KEYS-s$SEED"
if has_part orders; then
topic_total() {
    bash "$H" topic-offsets "$1" 2>/dev/null | awk '{s += $2} END {print s + 0}'
}
if [ ! -f "$DATA/ok" ]; then
    say "generating $N events over $KEYS order ids"
    rm -rf "$DATA"; mkdir -p "$DATA"
    "$PY" "$BENCH_DIR/gen_events.py" "$N" "$KEYS" "$SEED" "$DATA/events.tsv" "$DATA/csv" "$BATCH" \
        > "$DATA/summary"
    touch "$DATA/ok"
fi
read -r _ DISTINCT < "$DATA/summary"
put events "$N"; put distinct_keys "$DISTINCT"
put message_bytes "$(head -n 1000 "$DATA/events.tsv" | awk -F'\t' '{s += length($2)} END {printf "%.0f", s / NR}')"

# (all topics: asking for one by name would auto-create it)
have="$(kcat -b "$KS_BOOTSTRAP" -L -m 5 2>/dev/null | grep -cF "topic \"$TOPIC\" with" || true)"
if [ "$have" != 0 ] && [ "$(topic_total "$TOPIC")" != "$N" ]; then
    say "topic $TOPIC is incomplete: recreating it"
    bash "$H" topic-delete "$TOPIC" >> "$LOG" 2>&1
    have=0
    sleep 2
fi
if [ "$have" = 0 ]; then
    for i in $(seq 1 30); do
        bash "$H" topic-create "$TOPIC" 4 >> "$LOG" 2>&1 && break
        [ "$i" -lt 30 ] || die "could not create topic $TOPIC"
        sleep 1
    done
    say "producing $N events to $TOPIC (kcat -P, 4 partitions, key = order_id)"
    t0="$(now)"
    kcat -P -b "$KS_BOOTSTRAP" -t "$TOPIC" -K $'\t' -l \
         -X linger.ms=20 -X batch.num.messages=10000 -X queue.buffering.max.messages=1000000 \
         "$DATA/events.tsv" 2>> "$LOG"
    t1="$(now)"
    put produce_seconds "$(sub $t1 $t0)"
fi
got="$(topic_total "$TOPIC")"
[ "$got" = "$N" ] || die "topic $TOPIC holds $got messages, expected $N"
bash "$H" topic-offsets "$TOPIC" | tr '\t' ' ' | sed 's/^/partition /' >> "$LOG"

# the same events on 16 partitions, for workers 2 and 4 (BENCH_P16, default 1)
P16="${BENCH_P16:-1}"
TOPIC16="$TOPIC.p16"
if [ "$P16" = 1 ] && [ "$(topic_total "$TOPIC16" 2>/dev/null || echo 0)" != "$N" ]; then
    bash "$H" topic-delete "$TOPIC16" >> "$LOG" 2>&1 || true
    sleep 1
    bash "$H" topic-create "$TOPIC16" 16 >> "$LOG" 2>&1 || die "could not create topic $TOPIC16"
    say "producing the $N events again to $TOPIC16 (16 partitions)"
    kcat -P -b "$KS_BOOTSTRAP" -t "$TOPIC16" -K $'\t' -l \
         -X linger.ms=20 -X batch.num.messages=10000 -X queue.buffering.max.messages=1000000 \
         "$DATA/events.tsv" 2>> "$LOG"
    got="$(topic_total "$TOPIC16")"
    [ "$got" = "$N" ] || die "topic $TOPIC16 holds $got messages, expected $N"
fi

# fill_once NAME TOPIC SCRIPT: the events again as NAME (avro, protobuf) by
# test/bench/SCRIPT through the registry, on a topic of their own, unless a
# previous run filled it; records NAME.message_bytes
fill_once() {
    if [ "$(topic_total "$2" 2>/dev/null || echo 0)" != "$N" ] || [ ! -s "$W/$1.summary" ]; then
        bash "$H" topic-delete "$2" >> "$LOG" 2>&1 || true
        bash "$H" topic-create "$2" 4 >> "$LOG" 2>&1 || die "could not create topic $2"
        say "producing the $N events again as $1 to $2 (test/bench/$3)"
        "$PY" "$BENCH_DIR/$3" "$KS_BOOTSTRAP" "$2" "$REGISTRY" "$DATA/events.tsv" \
            > "$W/$1.summary" 2>> "$LOG" || die "producing the $1 events failed (see $LOG)"
    fi
    put "$1.message_bytes" "$(cut -d' ' -f2 "$W/$1.summary")"
}

# the same events as Avro, on a topic of their own, filled once
AVRO_TOPIC="$TOPIC.avro"
AVRO_ARGS=
if [ "$AVRO" = 1 ]; then
    rm -f "$W/registry.port"
    python3 "$REPO/test/tools/schema_registry.py" --port 0 --port-file "$W/registry.port" \
        --state "$W/registry.json" >> "$LOG" 2>&1 &
    bg_pids+=($!)
    for _ in $(seq 100); do [ -s "$W/registry.port" ] && break; sleep 0.1; done
    REGISTRY="http://127.0.0.1:$(cat "$W/registry.port")"
    AVRO_ARGS=", value_format => 'avro', schema_registry => '{\"url\": \"$REGISTRY\"}'"
    fill_once avro "$AVRO_TOPIC" avro_events.py
fi

# the same events as Protobuf, on a topic of their own, filled once, through
# the same registry
PB_TOPIC="$TOPIC.protobuf"
PB_ARGS=
if [ "$AVRO" = 1 ] && [ "$PROTOBUF" = 1 ]; then
    PB_ARGS=", value_format => 'protobuf', schema_registry => '{\"url\": \"$REGISTRY\"}'"
    fill_once protobuf "$PB_TOPIC" protobuf_events.py
fi

# the Debezium peer reads the same events with a Connect schema embedded
# (its JDBC sink needs one): a second topic, filled once, outside any timing
if [ "$DBZ" = 1 ]; then
    say "debezium peer: fetching the connector (Maven, cached) and filling $TOPIC.connect (schema-embedded JSON)"
    dbz_env DBZ_PREPARE_ONLY=1 bash "$BENCH_DIR/debezium_peer.sh" "$KS_BOOTSTRAP" "$TOPIC.connect" \
        "$DATA/events.tsv" "$N" bench.orders_dbz /dev/null >> "$LOG" 2>&1 \
        || { say "debezium peer: could not prepare it (see $LOG); skipped"; DBZ=0; }
fi
fi   # has_part orders

# the target's columns; KEYTYPE text for the text-key runs (tk1, tk2),
# whose baseline (baseline_text) writes bench.orders_base_text
KEYTYPE=bigint
orders_ddl() { echo "order_id $KEYTYPE PRIMARY KEY, event_ts timestamptz NOT NULL, amount numeric(18,2), schema_version int"; }
# MODE=history: the target of ours() keeps every version (docs/history.md);
# its current versions are what must equal the baseline's rows
MODE=merge
history_ddl() {
    echo "order_id $KEYTYPE NOT NULL, event_ts timestamptz NOT NULL, amount numeric(18,2), schema_version int,
          _valid_from timestamptz NOT NULL, _valid_to timestamptz, _deleted boolean NOT NULL,
          PRIMARY KEY (order_id, _valid_from)"
}
# MODE=softdel: delete_mode soft (docs/soft-deletes.md) with _deleted and
# _deleted_at (the events hold no tombstone: every row stays live, and the
# live rows must equal the baseline's); MODE=insert_only and update_only:
# write_mode (docs/write-modes.md).  insert_only's rows must equal
# first_model() (the smallest event_ts per key, ties to the earlier
# offset: the guard reversed), its target has the lineage columns that
# order ties; update_only's target holds every even key before the run,
# at an event_ts before all events, so that the odd keys are skipped: its
# rows must equal the baseline's even keys
base_table() { [ "$KEYTYPE" = text ] && echo bench.orders_base_text || echo bench.orders_base; }
# first_model: bench.orders_first, insert_only's rows, from the CSV the
# baseline reads (once, outside any timing)
first_model() {
    [ "$(psu -c "SELECT to_regclass('bench.orders_first') IS NOT NULL")" = f ] || return 0
    {
        echo "SET client_min_messages = warning;"
        echo "CREATE UNLOGGED TABLE bench.events_all (order_id bigint, event_ts timestamptz, amount numeric(18,2), schema_version int, seq bigint);"
        for f in "$DATA"/csv/chunk-*.csv; do echo "\\copy bench.events_all FROM '$f' WITH (FORMAT csv)"; done
        echo "CREATE TABLE bench.orders_first AS SELECT DISTINCT ON (order_id) order_id, event_ts, amount, schema_version
                FROM bench.events_all ORDER BY order_id, event_ts, seq;"
        echo "DROP TABLE bench.events_all;"
    } | pso >> "$LOG"
}
CREATE_ORDERS="$(orders_ddl)"

# machine CPU time (all cores, seconds) used so far, busy = not idle/iowait
machine_busy() { awk '/^cpu / {print ($2+$3+$4+$7+$8+$9) / 100}' /proc/stat; }
# proc_cpu PID: utime+stime of the whole process (all threads), seconds
proc_cpu() {
    local tck; tck="$(getconf CLK_TCK)"
    sed 's/^.*) //' "/proc/$1/stat" | awk -v t="$tck" '{printf "%.2f", ($12 + $13) / t}'
}
proc_hwm() { awk '/^VmHWM/ {print $2}' "/proc/$1/status"; }   # kB
worker_pid() {
    psu -c "SELECT coalesce(worker_pids[1], 0) FROM kafka_sink.status WHERE name = '$1'" 2>/dev/null || echo 0
}
worker_pids() {   # all of a pipeline's workers, space-separated
    psu -c "SELECT array_to_string(worker_pids, ' ') FROM kafka_sink.status WHERE name = '$1'" 2>/dev/null || true
}
start_sampler() {  # start_sampler OUTFILE SQL TARGET: every 0.1 s, until TARGET
    : > "$1"
    "$PY" "$BENCH_DIR/sampler.py" "$1" 0.1 "$3" "$2" 2>> "$LOG" &
    SAMPLER=$!
    bg_pids+=("$SAMPLER")
}
stop_sampler() { kill "$SAMPLER" 2>/dev/null || true; wait "$SAMPLER" 2>/dev/null || true; }
same_as_baseline() {  # same_as_baseline TABLE [REFERENCE] -> yes/no (REFERENCE: the baseline's table)
    local d ref="${2:-$(base_table)}"
    d="$(psu -c "SELECT count(*) FROM ((SELECT order_id, event_ts, amount, schema_version FROM $1
                                          EXCEPT ALL SELECT order_id, event_ts, amount, schema_version FROM $ref)
                                       UNION ALL (SELECT order_id, event_ts, amount, schema_version FROM $ref
                                          EXCEPT ALL SELECT order_id, event_ts, amount, schema_version FROM $1)) x")"
    [ "$d" = 0 ] && echo yes || echo "no ($d rows differ)"
}
loadavg() { cut -d' ' -f1 /proc/loadavg; }

# ------------------------------------------------------------------ baseline
SCRIPT="$W/baseline.sql"
# shellcheck source=baseline_sql.sh
. "$BENCH_DIR/baseline_sql.sh"
has_part orders && baseline_sql "$W" "$DATA/csv" "$N" "$BATCH" > "$SCRIPT"
# the same with text keys, into bench.orders_base_text
has_part orders && sed -e 's/^CREATE TEMP TABLE stage (order_id bigint,/CREATE TEMP TABLE stage (order_id text,/' \
    -e 's/^MERGE INTO bench.orders_base AS t/MERGE INTO bench.orders_base_text AS t/' "$SCRIPT" > "$W/baseline_text.sql"
# baseline KEY: one timed run of the script into an empty target
baseline() {
    local key="$1" b0 b1 t0 t1
    say "baseline ($key): psql, COPY + DISTINCT ON + MERGE per $BATCH events, one transaction each"
    pso <<SQL
SET client_min_messages = warning;
DROP TABLE IF EXISTS $(base_table), bench.baseline_offsets;
CREATE TABLE $(base_table) ($(orders_ddl));
CREATE TABLE bench.baseline_offsets (next_offset bigint NOT NULL, updated_at timestamptz);
INSERT INTO bench.baseline_offsets VALUES (0, now());
SQL
    psu -c CHECKPOINT
    start_sampler "$W/$key.samples" "SELECT next_offset FROM bench.baseline_offsets" "$N"
    put "$key.load" "$(loadavg)"; b0="$(machine_busy)"
    t0="$(now)"
    pso -f "$([ "$KEYTYPE" = text ] && echo "$W/baseline_text.sql" || echo "$SCRIPT")" >> "$LOG"
    t1="$(now)"
    b1="$(machine_busy)"
    sleep 0.3; stop_sampler
    put "$key.t0" "$t0"; put "$key.seconds" "$(sub $t1 $t0)"
    put "$key.machine_busy_s" "$(sub $b1 $b0)"
    put "$key.samples" "$W/$key.samples"
    put "$key.rows" "$(psu -c "SELECT count(*) FROM $(base_table)")"
    [ -s "$W/baseline.cpu" ] && put "$key.backend_cpu_s" "$(cat "$W/baseline.cpu")"
    rm -f "$W/baseline.cpu" "$W/baseline.pid"
}

# ------------------------------------------------------------------ ours
# ours NAME MAX_OFFSETS BRONZE(0|1) [WORKERS]: one pipeline from 'earliest'
# until caught up
ours() {
    local name="bench_${1//./_}" maxoff="$2" bronze="$3" key="$1" workers="${4:-1}" bronze_arg="" pids
    local topic="${5:-$TOPIC}" format_arg="${6:-}"
    local ddl mode_arg="" rows_of="bench.orders" ref="" prefill=""
    [ "$bronze" = 1 ] && bronze_arg=", bronze => 'bench.orders_raw'"
    ddl="$(orders_ddl)"
    case "$MODE" in
        history)
            ddl="$(history_ddl)"; mode_arg=", mode => 'history'"
            rows_of="(SELECT * FROM bench.orders WHERE _valid_to IS NULL AND NOT _deleted) h" ;;
        softdel)
            ddl="$ddl, _deleted boolean NOT NULL DEFAULT false, _deleted_at timestamptz"
            mode_arg=", delete_mode => 'soft', delete_on_tombstone => true, key_format => 'string'"
            rows_of="(SELECT * FROM bench.orders WHERE NOT _deleted) s" ;;
        insert_only)
            first_model
            ddl="$ddl, _kafka_partition integer, _kafka_offset bigint"
            mode_arg=", write_mode => 'insert_only'"; ref=bench.orders_first ;;
        update_only)
            mode_arg=", write_mode => 'update_only'"
            prefill="INSERT INTO bench.orders SELECT order_id, '-infinity', NULL, NULL FROM $(base_table) WHERE order_id % 2 = 0;"
            ref="(SELECT * FROM $(base_table) WHERE order_id % 2 = 0) e" ;;
    esac
    say "ours ($key): max_offsets_per_batch $maxoff, bronze $([ "$bronze" = 1 ] && echo on || echo off), workers $workers, mode $MODE"
    pso <<SQL
SET client_min_messages = warning;
DROP TABLE IF EXISTS bench.orders, bench.orders_raw;
CREATE TABLE bench.orders ($ddl);
$prefill
SQL
    psu -c CHECKPOINT
    start_sampler "$W/$key.samples" \
        "SELECT sum(o.next_offset) FROM kafka_sink.offsets o JOIN kafka_sink.pipeline_definitions p ON p.id = o.pipeline_id WHERE p.name = '$name'" \
        "$N"
    put "$key.load" "$(loadavg)"
    local b0 b1 res t0 t1 deadline=$((SECONDS + 3600))
    b0="$(machine_busy)"
    res="$(pso -F ' ' <<SQL
SELECT 't0', extract(epoch FROM clock_timestamp());
SELECT 'id', kafka_sink.create_pipeline(
    name => '$name', bootstrap_servers => '$KS_BOOTSTRAP', subscribe => ARRAY['$topic'],
    target => 'bench.orders', order_column => 'event_ts', starting_offsets => 'earliest',
    max_offsets_per_batch => $maxoff, workers => $workers $bronze_arg $format_arg $mode_arg);
SQL
)"
    echo "$res" >> "$LOG"
    # Caught up = the checkpoint holds every offset: the sampler's short
    # queries see it within 0.1 s and it exits.  Not timed by sitting in
    # kafka_sink.wait(): its one long statement holds a snapshot for the
    # whole wait, which keeps every dead row version of the target alive
    # and made the very run it timed 1.4-1.6x slower (docs/performance.md).
    while kill -0 "$SAMPLER" 2>/dev/null; do
        [ $SECONDS -lt $deadline ] || die "$name did not catch up within an hour"
        [ "$(psu -c "SELECT state FROM kafka_sink.pipeline_definitions WHERE name = '$name'")" != failed ] \
            || die "$name failed: $(psu -c "SELECT last_error FROM kafka_sink.status WHERE name = '$name'")"
        sleep 0.2
    done
    stop_sampler
    b1="$(machine_busy)"
    t0="$(echo "$res" | awk '$1 == "t0" {print $2}')"
    t1="$(tail -n 1 "$W/$key.samples" | cut -d' ' -f1)"
    [ "$(tail -n 1 "$W/$key.samples" | cut -d' ' -f2)" -ge "$N" ] || die "the sampler of $name stopped early (see $LOG)"
    pids="$(worker_pids "$name")"
    # and kafka_sink.wait() agrees, at once
    [ "$(pso -c "SELECT kafka_sink.wait('$name', '1 min')")" = t ] || die "$name did not catch up"
    put "$key.t0" "$t0"; put "$key.seconds" "$(sub $t1 $t0)"
    put "$key.machine_busy_s" "$(sub $b1 $b0)"
    put "$key.samples" "$W/$key.samples"
    put "$key.max_offsets" "$maxoff"; put "$key.bronze" "$bronze"; put "$key.workers" "$workers"
    # CPU: all workers together; RSS: the largest worker
    local pid cpu=0 hwm=0
    for pid in $pids; do
        [ -r "/proc/$pid/stat" ] || continue
        cpu="$(awk -v a="$cpu" -v b="$(proc_cpu "$pid")" 'BEGIN {printf "%.2f", a + b}')"
        hwm="$(awk -v a="$hwm" -v b="$(proc_hwm "$pid")" 'BEGIN {print (b > a ? b : a)}')"
    done
    if [ "$hwm" != 0 ]; then
        put "$key.worker_pid" "$pids"
        put "$key.cpu_s" "$cpu"
        put "$key.rss_kb" "$hwm"
    fi
    psu -F $'\t' -c "SELECT '$key.batches', count(*) FROM kafka_sink.batches b JOIN kafka_sink.pipeline_definitions p ON p.id = b.pipeline_id WHERE p.name = '$name' AND b.messages > 0
                     UNION ALL SELECT '$key.' || k || '_ms', round(sum((b.progress->'durationMs'->>k)::float)) FROM kafka_sink.batches b JOIN kafka_sink.pipeline_definitions p ON p.id = b.pipeline_id, unnest(ARRAY['fetch','decode','apply','commit']) k WHERE p.name = '$name' GROUP BY k
                     UNION ALL SELECT '$key.batch_s', round(sum(extract(epoch FROM b.committed_at - b.started_at))::numeric, 2) FROM kafka_sink.batches b JOIN kafka_sink.pipeline_definitions p ON p.id = b.pipeline_id WHERE p.name = '$name'
                     UNION ALL SELECT '$key.' || k || '_rows', coalesce(sum((b.progress->'sink'->'applyRows'->>k)::bigint), 0) FROM kafka_sink.batches b JOIN kafka_sink.pipeline_definitions p ON p.id = b.pipeline_id, unnest(ARRAY['heap','sql']) k WHERE p.name = '$name' GROUP BY k" >> "$RAW"
    put "$key.same_as_baseline" "$(same_as_baseline "$rows_of" "$ref")"
    [ "$bronze" = 1 ] && put "$key.bronze_rows" "$(psu -c 'SELECT count(*) FROM bench.orders_raw')"
    pso -c "SELECT kafka_sink.drop_pipeline('$name')" > /dev/null
    pso -c "SET client_min_messages = warning; DROP TABLE IF EXISTS bench.orders, bench.orders_raw"
}


# ------------------------------------------------------------------ python peer
# python_peer KEY: the plain Python consumer over the whole topic
python_peer() {
    local key="$1" b0 b1
    say "peer ($key): plain Python consumer (confluent-kafka + psycopg 3), $BATCH per batch"
    pso -c "SET client_min_messages = warning; DROP TABLE IF EXISTS bench.orders_py; CREATE TABLE bench.orders_py ($CREATE_ORDERS)"
    psu -c CHECKPOINT
    : > "$W/$key.progress"
    put "$key.load" "$(loadavg)"
    b0="$(machine_busy)"
    PGUSER=$OWNER "$PY" "$BENCH_DIR/py_consumer.py" "$KS_BOOTSTRAP" "$TOPIC" bench.orders_py "$N" "$BATCH" \
        "$W/$key.progress" > "$W/$key.json" 2>> "$LOG" || die "python consumer failed (see $LOG)"
    b1="$(machine_busy)"
    cat "$W/$key.json" >> "$LOG"
    "$PY" -c 'import json, sys; d = json.load(open(sys.argv[1])); print("%s.seconds\t%.3f\n%s.t0\t%.3f\n%s.batches\t%d" % (sys.argv[2], d["seconds"], sys.argv[2], d["t0"], sys.argv[2], d["batches"]))' \
        "$W/$key.json" "$key" >> "$RAW"
    put "$key.samples" "$W/$key.progress"
    put "$key.machine_busy_s" "$(sub $b1 $b0)"
    put "$key.same_as_baseline" "$(same_as_baseline bench.orders_py)"
    pso -c "DROP TABLE bench.orders_py"
}

# debezium_peer KEY: Kafka Connect (standalone) + the Debezium JDBC sink in
# upsert mode over the schema-embedded copy of the topic
debezium_peer() {
    local key="$1" b0 b1
    say "peer ($key): Kafka Connect + Debezium JDBC sink (upsert), batch.size $BATCH"
    psu -c CHECKPOINT > /dev/null
    put "$key.load" "$(loadavg)"
    b0="$(machine_busy)"
    if ! dbz_env DBZ_PROGRESS="$W/$key.progress" bash "$BENCH_DIR/debezium_peer.sh" "$KS_BOOTSTRAP" \
            "$TOPIC.connect" "$DATA/events.tsv" "$N" bench.orders_dbz "$W/$key.json" >> "$LOG" 2>&1; then
        say "debezium peer failed (see $LOG); left out of the table"
        return 0
    fi
    b1="$(machine_busy)"
    "$PY" -c 'import json, sys
d = json.load(open(sys.argv[1]))
for f in ("seconds", "t0", "startup_seconds", "rows_differing_from_rule", "rows_differing_from_last_offset",
          "cpu_s", "rss_kb", "message_bytes"):
    print("%s.%s\t%s" % (sys.argv[2], f, d.get(f)))' "$W/$key.json" "$key" >> "$RAW"
    put "$key.samples" "$W/$key.progress"
    put "$key.machine_busy_s" "$(sub $b1 $b0)"
    put "$key.same_as_baseline" "$(same_as_baseline bench.orders_dbz)"
    pso -c "DROP TABLE bench.orders_dbz"
}

# the throughput runs, BENCH_REPEAT rounds, interleaved (a noisy minute on
# a shared machine then hurts one round of everything, not every round of
# one thing); the report takes each configuration's fastest round
# kafka_sink.direct_values around one run: off = every value through its text
direct_values() {
    if [ "$1" = off ]; then psu -c "ALTER SYSTEM SET kafka_sink.direct_values = off" >/dev/null
    else psu -c "ALTER SYSTEM RESET kafka_sink.direct_values" >/dev/null; fi
    psu -c "SELECT pg_reload_conf()" >/dev/null
    sleep 0.5
}
# kafka_sink.apply_strategy around one run: sql (the MERGE), auto (the
# direct heap strategy where it is exact, the default), or default (RESET)
apply_strategy() {
    if [ "$1" = default ]; then psu -c "ALTER SYSTEM RESET kafka_sink.apply_strategy" >/dev/null
    else psu -c "ALTER SYSTEM SET kafka_sink.apply_strategy = $1" >/dev/null; fi
    psu -c "SELECT pg_reload_conf()" >/dev/null
    sleep 0.5
}
has_part orders && for r in $(seq 1 "$REPEAT"); do
    baseline "baseline.r$r"
    if only m50k; then ours "m50k.r$r" 50000 0; fi
    if only m100k; then ours "m100k.r$r" 100000 0; fi
    if only m100k_text; then
        direct_values off
        ours "m100k_text.r$r" 100000 0
        direct_values on
    fi
    if only m100k_sql; then
        apply_strategy sql
        ours "m100k_sql.r$r" 100000 0
        apply_strategy default
    fi
    if only bronze; then ours "bronze.r$r" 50000 1; fi
    # one round: history runs several times slower than merge
    if [ "$r" = 1 ] && only hist; then MODE=history; ours "hist.r$r" 100000 0; MODE=merge; fi
    # soft deletes and the write modes beside merge (m100k), same batch size
    if only softdel; then MODE=softdel; ours "softdel.r$r" 100000 0; MODE=merge; fi
    if only insert_only; then MODE=insert_only; ours "insert_only.r$r" 100000 0; MODE=merge; fi
    if only update_only; then MODE=update_only; ours "update_only.r$r" 100000 0; MODE=merge; fi
    if only tk1 || only tk2; then
        KEYTYPE=text
        baseline "baseline_text.r$r"
        if only tk1; then ours "tk1.r$r" 100000 0; fi
        if only tk2; then ours "tk2.r$r" 100000 0 2; fi
        KEYTYPE=bigint
    fi
    if only w2; then ours "w2.r$r" 100000 0 2; fi
    if [ "$P16" = 1 ]; then
        if only w1p16; then ours "w1p16.r$r" 100000 0 1 "$TOPIC16"; fi
        if only w2p16; then ours "w2p16.r$r" 100000 0 2 "$TOPIC16"; fi
        if only w4p16; then ours "w4p16.r$r" 100000 0 4 "$TOPIC16"; fi
    fi
    if [ "$AVRO" = 1 ] && only avro; then ours "avro.r$r" 50000 0 1 "$AVRO_TOPIC" "$AVRO_ARGS"; fi
    if [ "$AVRO" = 1 ] && only avro_text; then
        direct_values off
        ours "avro_text.r$r" 50000 0 1 "$AVRO_TOPIC" "$AVRO_ARGS"
        direct_values on
    fi
    if [ "$AVRO" = 1 ] && [ "$PROTOBUF" = 1 ] && only protobuf; then
        ours "protobuf.r$r" 50000 0 1 "$PB_TOPIC" "$PB_ARGS"
    fi
    if [ "$PEERS" = 1 ] && only py; then python_peer "py.r$r"; fi
    # one round: it is several times slower than the rest, its noise does not matter
    if [ "$DBZ" = 1 ] && [ "$r" = 1 ] && only dbz; then debezium_peer "dbz.r$r"; fi
done

# ------------------------------------------------------------------ latency
# latency KEY BRONZE(0|1): steady LAT_RATE msgs/s, unique keys, trigger_interval LAT_TRIGGER
latency() {
    local key="$1" bronze="$2" name="bench_$1" topic="bench.$1.$RUNID" bronze_arg="" pid c0 c1 i
    [ "$bronze" = 1 ] && bronze_arg=", bronze => 'bench.orders_lat_raw'"
    say "latency ($key): $LAT_RATE msgs/s for ${LAT_SECONDS}s, trigger_interval $LAT_TRIGGER, bronze $([ "$bronze" = 1 ] && echo on || echo off)"
    bash "$H" topic-create "$topic" 4 >> "$LOG" 2>&1 || die "could not create $topic"
    pso <<SQL > /dev/null
SET client_min_messages = warning;
DROP TABLE IF EXISTS bench.orders_lat, bench.orders_lat_raw;
CREATE TABLE bench.orders_lat ($CREATE_ORDERS,
    inserted_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    _kafka_batch_id bigint);
SELECT kafka_sink.create_pipeline(
    name => '$name', bootstrap_servers => '$KS_BOOTSTRAP', subscribe => ARRAY['$topic'],
    target => 'bench.orders_lat', order_column => 'event_ts', starting_offsets => 'earliest',
    trigger_interval => '$LAT_TRIGGER', max_offsets_per_batch => 50000 $bronze_arg);
SQL
    psu -c CHECKPOINT > /dev/null
    # the worker is up and has its partitions: progress shows watermarks
    for i in $(seq 1 100); do
        [ "$(psu -c "SELECT count(*) FROM kafka_sink.progress WHERE pipeline = '$name' AND worker_pid IS NOT NULL")" = 4 ] && break
        sleep 0.2
    done
    sleep 1
    pid="$(worker_pid "$name")"
    [ "$pid" != 0 ] || die "$name has no worker"
    c0="$(proc_cpu "$pid")"
    put "$key.load" "$(loadavg)"; put "$key.trigger_interval" "$LAT_TRIGGER"
    "$PY" "$BENCH_DIR/paced_producer.py" "$KS_BOOTSTRAP" "$topic" "$LAT_RATE" "$LAT_SECONDS" 1 "$LAT_WARMUP" \
        > "$W/$key.producer.json" 2>> "$LOG" || die "paced producer failed (see $LOG)"
    cat "$W/$key.producer.json" >> "$LOG"
    put "$key.producer" "$W/$key.producer.json"
    [ "$(pso -c "SELECT kafka_sink.wait('$name', '5 min')")" = t ] || die "$name did not catch up"
    c1="$(proc_cpu "$pid")"
    first="$("$PY" -c 'import json, sys; print(json.load(open(sys.argv[1]))["measured_first_key"])' "$W/$key.producer.json")"
    put "$key.cpu_s" "$(sub $c1 $c0)"
    put "$key.rss_kb" "$(proc_hwm "$pid")"
    psu -F $'\t' <<SQL >> "$RAW"
WITH l AS (
    SELECT extract(epoch FROM t.inserted_at - t.event_ts) * 1000 AS written_ms,
           extract(epoch FROM b.committed_at - t.event_ts) * 1000 AS committed_ms
      FROM bench.orders_lat t
      JOIN kafka_sink.pipeline_definitions p ON p.name = '$name'
      JOIN kafka_sink.batches b ON b.pipeline_id = p.id AND b.batch_id = t._kafka_batch_id
     WHERE t.order_id >= $first)
SELECT '$key.' || k, round(v::numeric, 1) FROM (
    SELECT count(*)::float8 AS rows,
           percentile_cont(0.5) WITHIN GROUP (ORDER BY written_ms) AS p50_written,
           percentile_cont(0.99) WITHIN GROUP (ORDER BY written_ms) AS p99_written,
           max(written_ms) AS max_written,
           percentile_cont(0.5) WITHIN GROUP (ORDER BY committed_ms) AS p50_committed,
           percentile_cont(0.99) WITHIN GROUP (ORDER BY committed_ms) AS p99_committed,
           max(committed_ms) AS max_committed
      FROM l) s,
    LATERAL (VALUES ('rows', rows), ('p50_written_ms', p50_written), ('p99_written_ms', p99_written),
                    ('max_written_ms', max_written), ('p50_committed_ms', p50_committed),
                    ('p99_committed_ms', p99_committed), ('max_committed_ms', max_committed)) v(k, v);
SELECT '$key.p99_written_ms_by_5s', string_agg(round(p)::text, ' ' ORDER BY w) FROM (
    SELECT (t.order_id - $first) / ($LAT_RATE * 5) AS w,
           percentile_cont(0.99) WITHIN GROUP (ORDER BY extract(epoch FROM t.inserted_at - t.event_ts) * 1000) AS p
      FROM bench.orders_lat t WHERE t.order_id >= $first GROUP BY 1) x;
SELECT '$key.batches', count(*), round(avg(messages)) FROM kafka_sink.batches b
  JOIN kafka_sink.pipeline_definitions p ON p.id = b.pipeline_id WHERE p.name = '$name' AND b.messages > 0;
SELECT '$key.' || k, round(v::numeric, 1) FROM (
    SELECT avg(d) AS avg_, percentile_cont(0.5) WITHIN GROUP (ORDER BY d) AS p50,
           percentile_cont(0.99) WITHIN GROUP (ORDER BY d) AS p99, max(d) AS max_,
           avg(apply) AS apply_avg, max(apply) AS apply_max
      FROM (SELECT extract(epoch FROM b.committed_at - b.started_at) * 1000 AS d,
                   (b.progress->'durationMs'->>'decode')::float + (b.progress->'durationMs'->>'apply')::float AS apply
              FROM kafka_sink.batches b JOIN kafka_sink.pipeline_definitions p ON p.id = b.pipeline_id
             WHERE p.name = '$name' AND b.messages > 0) x) s,
    LATERAL (VALUES ('batch_ms_avg', avg_), ('batch_ms_p50', p50), ('batch_ms_p99', p99), ('batch_ms_max', max_),
                    ('decode_apply_ms_avg', apply_avg), ('decode_apply_ms_max', apply_max)) v(k, v);
SQL
    pso -c "SELECT kafka_sink.drop_pipeline('$name')" > /dev/null
    pso -c "SET client_min_messages = warning; DROP TABLE IF EXISTS bench.orders_lat, bench.orders_lat_raw"
    bash "$H" topic-delete "$topic" >> "$LOG" 2>&1 || true
}

if has_part orders && only lat; then latency lat 0; fi
if has_part orders && only lat_bronze; then latency lat_bronze 1; fi

# ------------------------------------------------------------------ profile
if has_part orders && [ "$PROFILE" = 1 ] && only profile; then
    say "profile: perf record -g on the worker for ${PROFILE_SECONDS}s (max_offsets_per_batch 50000, apply_strategy $PROFILE_STRATEGY)"
    apply_strategy "$PROFILE_STRATEGY"
    pso <<SQL > /dev/null
SET client_min_messages = warning;
DROP TABLE IF EXISTS bench.orders;
CREATE TABLE bench.orders ($CREATE_ORDERS);
SELECT kafka_sink.create_pipeline(
    name => 'bench_profile', bootstrap_servers => '$KS_BOOTSTRAP', subscribe => ARRAY['$TOPIC'],
    target => 'bench.orders', order_column => 'event_ts', starting_offsets => 'earliest',
    max_offsets_per_batch => 50000);
SQL
    pid=0
    for i in $(seq 1 100); do
        pid="$(worker_pid bench_profile)"; [ "$pid" != 0 ] && break; sleep 0.1
    done
    [ "$pid" != 0 ] || die "bench_profile has no worker"
    PERF_CMD="perf record -F 499 -g -p $pid -o $W/perf.data -- sleep $PROFILE_SECONDS"
    put profile.command "$PERF_CMD"
    $PERF_CMD >> "$LOG" 2>&1 || say "perf record failed (see $LOG)"
    put profile.committed "$(psu -c "SELECT sum(o.next_offset) FROM kafka_sink.offsets o JOIN kafka_sink.pipeline_definitions p ON p.id = o.pipeline_id WHERE p.name = 'bench_profile'")"
    pso -c "SELECT kafka_sink.drop_pipeline('bench_profile')" > /dev/null
    pso -c "DROP TABLE bench.orders"
    apply_strategy default
    if [ -s "$W/perf.data" ]; then
        # self time by function; self time by library; inclusive time (children)
        perf report -i "$W/perf.data" --stdio --no-children --sort dso,symbol -g none --percent-limit 0.4 \
            2> /dev/null | grep -v '^$' > "$OUT/perf-self.txt" || true
        perf report -i "$W/perf.data" --stdio --no-children --sort dso -g none --percent-limit 0.2 \
            2> /dev/null | grep -v '^$' > "$OUT/perf-dso.txt" || true
        perf report -i "$W/perf.data" --stdio --children --sort symbol -g none --percent-limit 2 \
            2> /dev/null | grep -v '^$' > "$OUT/perf-children.txt" || true
    fi
fi

# ------------------------------------------------------------------ CDC
if has_part cdc; then
    # shellcheck source=test/bench/cdc_part.sh
    . "$BENCH_DIR/cdc_part.sh"
    cdc_bench
fi

# ------------------------------------------------------------------ report
put machine.cpu "$(awk -F': ' '/^model name/ {print $2; exit}' /proc/cpuinfo)"
put machine.cores "$(nproc)"
put machine.mem "$(free -g | awk '/^Mem:/ {print $2 " GiB"}')"
put machine.kernel "$(uname -r)"
put machine.postgres "$(psu -c 'SHOW server_version')"
put machine.librdkafka "$(pkg-config --modversion rdkafka 2>/dev/null || echo '?')"
put machine.kafka "${KS_KAFKA_VERSION:-4.1.1}"
put machine.commit "$(git -C "$REPO" rev-parse --short HEAD 2>/dev/null || echo '?')$(git -C "$REPO" diff --quiet HEAD -- src 2>/dev/null || echo '+dirty src')"
put total_seconds "$((SECONDS - T_START))"
"$PY" "$BENCH_DIR/report.py" "$RAW" "$OUT"
say "done in $((SECONDS - T_START))s: $OUT/results.md, $OUT/throughput.png"
