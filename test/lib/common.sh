# test/lib/common.sh: the helpers of the shell tests (test/e2e/*.sh,
# test/chaos/*.sh), sourced, never run.
#
# Expects the harness environment (KS_BOOTSTRAP, PG*, KS_RUN, KS_PGBIN), as
# test/run_tests.sh exports it; when it is missing, reads it from
# ${KS_RUN:-<repo>/.run}/env (a cluster started by test/harness.sh, e.g.
# with KS_KEEP_RUNNING=1).  KS_LIB_NO_ENV=1 leaves that to the caller
# (test/chaos/lib.bash starts the services itself when run standalone).
#
# Groups: env and names; SQL (sql, sql_at, as_role, poll, worker pids);
# results (check, lines_with, finish); set-up (setup_owner); producing
# (produce, produce_py, produce_batch, cdc_event, done_sql, check_caught_up,
# high_watermarks); Confluent's clients (confluent_python, protobuf_python,
# registry_start);
# exit hooks (at_exit); clusters
# of a script's own (own_cluster_start ...); processes of a script's own
# (stop_process, own_broker_files, own_broker_start); waiting (wait_for); ports (free_port);
# the apply strategy (set_apply_strategy, applied_rows, batches_and_quarantine,
# checkpoint_covers_sql).
set -euo pipefail
KS_LIB_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$KS_LIB_DIR/../.." && pwd)"
HARNESS="$REPO/test/harness.sh"
E2E_DIR="$REPO/test/e2e"

# ---------------------------------------------------------------- env

# ks_env: the harness env of ${KS_RUN:-<repo>/.run}, unless it is set already
ks_env() {
    if [ -z "${KS_BOOTSTRAP:-}" ]; then
        local f="${KS_RUN:-$REPO/.run}/env"
        [ -s "$f" ] || { echo "no harness env: $f (run test/run_tests.sh, or test/harness.sh pg-start and kafka-start)" >&2; exit 2; }
        # shellcheck disable=SC1090
        . "$f"
    fi
    export KS_RUN
}
[ -n "${KS_LIB_NO_ENV:-}" ] || ks_env

PASSED=0
FAILED=0
TEST_NAME="$(basename "$0" .sh)"
# a suffix for the names a run creates (topics, tables, pipelines)
SFX="$(head -c 4 /dev/urandom | od -An -tx1 | tr -d ' \n')"

# ---------------------------------------------------------------- SQL

# sql [PSQL ARGS...]: unaligned tuples only, errors fatal to the statement
sql() { psql -X -A -t -q -v ON_ERROR_STOP=1 "$@"; }

# sql_at PORT [PSQL ARGS...]: sql against another cluster of this machine
sql_at() { local port="$1"; shift; PGPORT="$port" sql "$@"; }

# as_role ROLE [PSQL ARGS...]: sql, logged in as ROLE
as_role() { local r="$1"; shift; sql -U "$r" "$@"; }

# poll SQL_BOOLEAN TIMEOUT_SECONDS: true once the query returns t
poll() {
    local deadline=$((SECONDS + $2))
    while [ $SECONDS -lt $deadline ]; do
        [ "$(sql -c "$1" 2>/dev/null)" == "t" ] && return 0
        sleep 0.2
    done
    return 1
}

# worker_pids PIPELINE: pids of its workers in pg_stat_activity, sorted
# (application_name is "kafka_sink: NAME", or "kafka_sink: NAME/N" when the
# pipeline has several workers)
worker_pids() {
    psql -X -q -A -t -c "SELECT pid FROM pg_stat_activity
                          WHERE backend_type = 'kafka_sink worker'
                            AND (application_name = 'kafka_sink: $1'
                                 OR application_name LIKE 'kafka_sink: $1/%')
                          ORDER BY pid" 2>/dev/null | paste -sd' ' - || true
}

# worker_pid PIPELINE: the pid of one of its workers (a random one), or nothing
worker_pid() {
    psql -X -q -A -t -c "SELECT pid FROM pg_stat_activity
                          WHERE backend_type = 'kafka_sink worker'
                            AND (application_name = 'kafka_sink: $1'
                                 OR application_name LIKE 'kafka_sink: $1/%')
                          ORDER BY random() LIMIT 1" 2>/dev/null || true
}

# wait_worker PIPELINE OLD_PID TIMEOUT: prints the pid of a worker other
# than OLD_PID once one runs; fails after TIMEOUT seconds
wait_worker() {
    local name="$1" old="$2" deadline=$((SECONDS + $3)) pid
    while [ $SECONDS -lt $deadline ]; do
        pid="$(worker_pid "$name")"
        if [ -n "$pid" ] && [ "$pid" != "$old" ]; then
            echo "$pid"
            return 0
        fi
        sleep 0.2
    done
    return 1
}

# kill_worker_times PIPELINE N: SIGKILL of the pipeline's worker N times
# while it runs, each after a random fraction of a second, waiting after
# each for the postmaster to restart every backend
kill_worker_times() {
    local pid
    for _ in $(seq 1 "$2"); do
        pid="$(wait_worker "$1" "" 60 || true)"
        sleep "0.$((RANDOM % 8 + 1))"
        [ -n "$pid" ] && kill -9 "$pid" 2>/dev/null || true
        wait_for 60 sql -c "SELECT 1" >/dev/null 2>&1 || true
    done
}

# wait_for TIMEOUT_SECONDS CMD...: true once CMD succeeds (polled every 0.2 s)
wait_for() {
    local deadline=$((SECONDS + $1))
    shift
    while [ $SECONDS -lt $deadline ]; do
        "$@" && return 0
        sleep 0.2
    done
    return 1
}

# ---------------------------------------------------------------- results

# check DESCRIPTION EXPECTED ACTUAL
check() {
    if [ "$2" == "$3" ]; then
        PASSED=$((PASSED + 1)); echo "ok - $1"
    else
        FAILED=$((FAILED + 1)); echo "not ok - $1"; echo "#   expected: $2"; echo "#   actual:   $3"
    fi
}

# lines_with FILE STRING...: how many lines of FILE contain each STRING, summed
lines_with() {
    local f="$1" s n total=0
    shift
    for s in "$@"; do
        n="$(grep -c -- "$s" "$f" || true)"
        total=$((total + n))
    done
    echo "$total"
}

# finish: the summary line; the script's status (call it last)
# sigkill_worker PIPELINE [TIMES]: kill -9 its worker TIMES (default 2)
# times while it runs, each after a random pause, waiting for the
# postmaster's restart of every backend
sigkill_worker() {
    local pid
    for _ in $(seq 1 "${2:-2}"); do
        pid="$(wait_worker "$1" "" 60 || true)"
        sleep "0.$((RANDOM % 8 + 1))"
        [ -n "$pid" ] && kill -9 "$pid" 2>/dev/null || true
        wait_for 60 sql -c "SELECT 1" >/dev/null 2>&1 || true
    done
}

# check_model WHAT EXPECTED ACTUAL: a check that file ACTUAL equals the
# model's EXPECTED, with the first lines of their diff when it does not
check_model() {
    if diff -u "$2" "$3" > "$3.diff"; then
        check "$1" "same" "same"
    else
        check "$1" "same" "differs"
        head -30 "$3.diff"
    fi
}

# check_fates WHAT PIPELINE TOPIC EXPECTED: a check that the fate of every
# offset EXPECTED lists ("partition:offset<TAB>fate|fate...", the fates a
# model allows) is one of them, as message_fate answers it one offset at a
# time and as message_fates answers the whole range (fates_check.py)
check_fates() {
    local out="$4.actual.$2"
    sql -c "COPY (SELECT s.partition || ':' || s.\"offset\",
                         (SELECT f.fate FROM kafka_sink.message_fate('$2', '$3', s.partition, s.\"offset\") f), s.fate
                    FROM kafka_sink.message_fates('$2', '$3') s ORDER BY s.partition, s.\"offset\") TO STDOUT" > "$out" 2>&1
    if python3 "$E2E_DIR/fates_check.py" "$4" "$out" > "$out.diff"; then
        check "$1" "same" "same"
    else
        check "$1" "same" "differs"
        head -12 "$out.diff"
    fi
}

finish() {
    echo "$TEST_NAME: $PASSED passed, $FAILED failed"
    [ "$FAILED" -eq 0 ]
}

# ---------------------------------------------------------------- set-up

# setup_owner: a non-superuser pipeline owner ks_e2e with its schema e2e
# (on the cluster of PGPORT)
setup_owner() {
    sql <<'SQL'
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS kafka_sink;
DO $$ BEGIN
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'ks_e2e') THEN CREATE ROLE ks_e2e LOGIN; END IF;
END $$;
GRANT kafka_sink_admin TO ks_e2e;
CREATE SCHEMA IF NOT EXISTS e2e AUTHORIZATION ks_e2e;
SQL
}

# ---------------------------------------------------------------- producing

# produce TOPIC [KCAT ARGS...]: stdin's lines "key|value" into TOPIC
# (extra args e.g. -p 0 for one partition)
produce() { local t="$1"; shift; kcat -P -b "$KS_BOOTSTRAP" -t "$t" -K '|' "$@"; }

# produce_py TOPIC PYTHON [KCAT ARGS...]: the lines "key|value" that the
# python code prints into TOPIC
produce_py() { local t="$1" code="$2"; shift 2; python3 -c "$code" | produce "$t" "$@"; }

# produce_batch TOPIC: stdin's lines "key|value" into TOPIC in one go, an
# empty value as a tombstone (NULL); with check_caught_up after it, one
# round is one batch
produce_batch() { produce "$1" -Z; }

# cdc_event OP ID POSITION [OPTIONS]: one Debezium change event as a line
# "key|value" (test/lib/cdc_event.py says what OP, POSITION and OPTIONS are)
cdc_event() { python3 "$KS_LIB_DIR/cdc_event.py" "$@"; }

# done_sql PIPELINE N: SQL that is true once the pipeline has checkpointed N
# messages (summed over its partitions), for poll
done_sql() {
    echo "SELECT coalesce((SELECT sum(o.next_offset) FROM kafka_sink.offsets o
                    JOIN kafka_sink.pipeline_definitions p ON p.id = o.pipeline_id
                   WHERE p.name = '$1'), 0) >= $2"
}

# check_caught_up PIPELINE: a check that kafka_sink.wait() saw it catch up
check_caught_up() { check "$1 caught up" t "$(sql -c "SELECT kafka_sink.wait('$1', '90 s')")"; }

# high_watermarks TOPIC: "P:OFFSET P:OFFSET ..." (partition order), the
# offsets a caught-up checkpoint of every partition equals
high_watermarks() {
    "$HARNESS" topic-offsets "$1" 2>/dev/null | awk -F'\t' '{printf "%s%s:%s", (NR > 1 ? " " : ""), $1, $2}'
}

# ---------------------------------------------------------------- Confluent's clients

# confluent_python: sets PY, a python with confluent-kafka[avro,json,
# schemaregistry] (from PyPI, in a venv under the run directory, or
# KS_AVRO_VENV), installed when missing
confluent_python() {
    local home="${KS_AVRO_VENV:-$KS_RUN/venv}"
    if [ ! -x "$home/bin/python" ] || ! "$home/bin/python" -c 'import confluent_kafka.schema_registry.avro, jsonschema, fastavro' 2>/dev/null; then
        echo "# venv $home: confluent-kafka[avro,json,schemaregistry] from PyPI"
        python3 -m venv "$home"
        "$home/bin/pip" install -q --disable-pip-version-check 'confluent-kafka[avro,json,schemaregistry]' >/dev/null
    fi
    PY="$home/bin/python"
}

# protobuf_python: as confluent_python, with the protobuf extra and
# grpcio-tools (protoc for the tests' .proto files)
protobuf_python() {
    local home="${KS_AVRO_VENV:-$KS_RUN/venv}"
    if [ ! -x "$home/bin/python" ] || ! "$home/bin/python" -c 'import confluent_kafka.schema_registry.protobuf, confluent_kafka.schema_registry.avro, jsonschema, grpc_tools' 2>/dev/null; then
        echo "# venv $home: confluent-kafka[avro,json,protobuf,schemaregistry] and grpcio-tools from PyPI"
        python3 -m venv "$home"
        "$home/bin/pip" install -q --disable-pip-version-check 'confluent-kafka[avro,json,protobuf,schemaregistry]' grpcio-tools >/dev/null
    fi
    PY="$home/bin/python"
}

# registry_start USERINFO NAME [PORT]: test/tools/schema_registry.py with
# basic auth USERINFO, its state in $KS_RUN/registry_NAME (REGDIR), stopped
# at exit; sets REG, its URL, and REG_PORT.  Called again with the port
# after a kill -9 of REG_PID, it comes back with the state it had.
registry_start() {
    REGDIR="$KS_RUN/registry_$2"
    mkdir -p "$REGDIR"
    [ -n "${3:-}" ] || rm -f "$REGDIR/port"
    python3 "$REPO/test/tools/schema_registry.py" --port "${3:-0}" --port-file "$REGDIR/port" \
        --state "$REGDIR/state.json" --user "$1" >> "$REGDIR/log" 2>&1 &
    REG_PID=$!
    [ -n "${KS_REGISTRY_HOOKED:-}" ] || { at_exit registry_stop; KS_REGISTRY_HOOKED=1; }
    for _ in $(seq 50); do [ -s "$REGDIR/port" ] && break; sleep 0.1; done
    REG_PORT="$(cat "$REGDIR/port")"
    REG="http://127.0.0.1:$REG_PORT"
}
# shellcheck disable=SC2317  # reached through the trap
registry_stop() { stop_process "$REG_PID"; wait "$REG_PID" 2>/dev/null || true; }

# ---------------------------------------------------------------- exit hooks

# at_exit FUNC: run FUNC when the script exits (hooks in reverse order of
# registration, with set +e; the script's exit status is kept).  A script
# that sets its own EXIT trap instead must not use at_exit nor own clusters.
KS_EXIT_HOOKS=()
at_exit() {
    [ ${#KS_EXIT_HOOKS[@]} -gt 0 ] || trap ks_run_exit_hooks EXIT
    KS_EXIT_HOOKS+=("$1")
}
# (a hook sees the script's exit status in KS_EXIT_STATUS)
# shellcheck disable=SC2317  # reached through the trap
ks_run_exit_hooks() {
    local rc=$? i
    trap - EXIT
    set +e
    KS_EXIT_STATUS=$rc
    for ((i = ${#KS_EXIT_HOOKS[@]} - 1; i >= 0; i--)); do
        ${KS_EXIT_HOOKS[$i]}
    done
    exit $rc
}

# ---------------------------------------------------------------- own clusters

# A script's own PostgreSQL cluster (beside the harness's, which it leaves
# alone): test/harness.sh with KS_RUN=DIR, the same broker, another port.
# Killed and removed at exit, whatever happened.
#   own_cluster_start DIR     start it (KS_PG_CONF / KS_PGBIN in the env
#                             of the call apply, as for harness pg-start;
#                             the KS_PGBIN of the first start is the one
#                             that stops it at exit)
#   own_cluster_stop DIR      stop it (a clean shutdown)
#   own_cluster_kill DIR      stop it with -m immediate
#   own_port DIR              its port
#   own_register DIR          remove DIR at exit (for a cluster made by
#                             hand in DIR, e.g. with pg_basebackup)
declare -A KS_OWN_PGBIN=()
KS_OWN_DIRS=()
own_register() {
    [ -n "${KS_OWN_PGBIN[$1]+x}" ] && return 0
    [ ${#KS_OWN_DIRS[@]} -gt 0 ] || at_exit ks_own_cleanup
    KS_OWN_DIRS+=("$1")
    KS_OWN_PGBIN[$1]="${KS_PGBIN:-}"
}
own_cluster_start() {
    own_register "$1"
    KS_RUN="$1" "$HARNESS" pg-start >/dev/null 2>&1 \
        || { echo "# could not start the cluster of $1:" >&2; tail -n 30 "$1/logs/postgresql.log" >&2 2>/dev/null; return 1; }
}
own_cluster_stop() { KS_RUN="$1" "$HARNESS" pg-stop >/dev/null 2>&1; }
own_cluster_kill() { KS_RUN="$1" "$HARNESS" pg-kill >/dev/null 2>&1; }
own_port() { cat "$1/pgport"; }
# shellcheck disable=SC2317  # reached through at_exit
ks_own_cleanup() {
    local i d
    for ((i = ${#KS_OWN_DIRS[@]} - 1; i >= 0; i--)); do
        d="${KS_OWN_DIRS[$i]}"
        [ -d "$d" ] || continue
        KS_RUN="$d" KS_PGBIN="${KS_OWN_PGBIN[$d]:-${KS_PGBIN:-}}" "$HARNESS" pg-kill >/dev/null 2>&1
        KS_RUN="$d" KS_PGBIN="${KS_OWN_PGBIN[$d]:-${KS_PGBIN:-}}" "$HARNESS" clean >/dev/null 2>&1
        rm -rf "$d"
    done
}

# ---------------------------------------------------------------- own processes

# stop_process PID [SECONDS]: SIGTERM, SIGKILL if it still runs after
# SECONDS (default 10); nothing when PID is empty or gone
stop_process() {
    local pid="${1:-}" i
    [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || return 0
    kill -TERM "$pid" 2>/dev/null
    for ((i = 0; i < ${2:-10} * 10; i++)); do
        kill -0 "$pid" 2>/dev/null || return 0
        sleep 0.1
    done
    kill -KILL "$pid" 2>/dev/null || true
}

# own_broker_files DIR: the settings every own single-node broker shares
# (printed, for the script's server.properties, whose listeners and
# security are its own; data in DIR/data) and DIR/log4j2.properties
own_broker_files() {
    cat > "$1/log4j2.properties" <<'EOF'
status = warn
appender.out.type = Console
appender.out.name = OUT
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.out.ref = OUT
logger.request.name = kafka.request.logger
logger.request.level = WARN
logger.state.name = state.change.logger
logger.state.level = WARN
EOF
    cat <<EOF
log.dirs=$1/data
auto.create.topics.enable=true
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
num.network.threads=2
num.io.threads=2
EOF
}

# own_broker_start DIR [STORAGE TOOL ARGS...]: a Kafka broker of the
# script's own (other listeners than the harness's, e.g. SASL/SSL), from
# DIR/server.properties and DIR/log4j2.properties that the script wrote:
# formatted (the extra args go to kafka.tools.StorageTool format, e.g.
# --add-scram ...; its output in DIR/format.log), then started in its own
# session (log DIR/broker.log, pid in DIR/pid and OWN_BROKER_PID).  The
# script waits for it on its own listeners, and stops it with stop_process
# (in its at_exit hook, after dropping what reads from it).
own_broker_start() {
    local dir="$1" cluster_id
    shift
    cluster_id="$("$HARNESS" cluster-id)"
    java -Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 \
         -Dlog4j2.configurationFile="$dir/log4j2.properties" -cp "$KS_KAFKA_CP" \
         kafka.tools.StorageTool format -t "$cluster_id" -c "$dir/server.properties" --standalone \
         "$@" > "$dir/format.log" 2>&1 \
        || { echo "# broker format failed:"; sed 's/^/#   /' "$dir/format.log"; return 1; }
    ( exec setsid java -Xms128m -Xmx384m -XX:+UseG1GC -Djava.awt.headless=true \
          -Dlog4j2.configurationFile="$dir/log4j2.properties" -cp "$KS_KAFKA_CP" \
          kafka.Kafka "$dir/server.properties" > "$dir/broker.log" 2>&1 < /dev/null ) &
    OWN_BROKER_PID=$!
    echo "$OWN_BROKER_PID" > "$dir/pid"
}

# as_pg CMD...: CMD as the OS user of the clusters (the harness runs them
# as KS_PGOSUSER, default kstest, when the tests run as root)
as_pg() { if [ "$(id -u)" = 0 ]; then runuser -u "${KS_PGOSUSER:-kstest}" -- "$@"; else "$@"; fi; }

# ---------------------------------------------------------------- ports

# free_port [NOT...]: a free loopback port, none of NOT
free_port() { "$HARNESS" free-port "$@"; }

# ---------------------------------------------------------------- apply strategy

# set_apply_strategy sql|auto: kafka_sink.apply_strategy for the whole cluster
# (a reload; workers read it per batch); reset it with "RESET" in a trap
set_apply_strategy() {
    if [ "$1" = RESET ]; then
        sql -c "ALTER SYSTEM RESET kafka_sink.apply_strategy" -c "SELECT pg_reload_conf()" >/dev/null
    else
        sql -c "ALTER SYSTEM SET kafka_sink.apply_strategy = '$1'" -c "SELECT pg_reload_conf()" >/dev/null
        sleep 1
    fi
}

# applied_rows NAME: "H S Q", the rows pipeline NAME's batches applied
# through the heap strategy (H) and the SQL strategy (S) (sink.applyRows of
# their progress records; -1 when none says), and quarantined (Q)
applied_rows() {
    sql -Atc "SELECT coalesce(sum((b.progress->'sink'->'applyRows'->>'heap')::bigint), -1),
                     coalesce(sum((b.progress->'sink'->'applyRows'->>'sql')::bigint), -1),
                     coalesce(sum(b.quarantined), 0)
                FROM kafka_sink.batches b JOIN kafka_sink.pipeline_definitions p ON p.id = b.pipeline_id
               WHERE p.name = '$1'" | tr '|' ' '
}

# batches_and_quarantine NAME: pipeline NAME's batches (numbered, with
# their ranges and counts), "--", its quarantined offsets and reasons; for
# comparing two pipelines that read the same messages
batches_and_quarantine() {
    sql -c "COPY (SELECT row_number() OVER (ORDER BY b.batch_id), b.ranges, b.messages, b.inserted, b.updated,
                         b.deleted, b.stale, b.superseded, b.quarantined
                  FROM kafka_sink.batches b JOIN kafka_sink.pipeline_definitions p ON p.id = b.pipeline_id
                  WHERE p.name = '$1' AND b.messages > 0 ORDER BY b.batch_id) TO STDOUT"
    echo "--"
    sql -c "COPY (SELECT q.message_offset, q.reason FROM kafka_sink.quarantine q
                  JOIN kafka_sink.pipeline_definitions p ON p.id = q.pipeline_id
                  WHERE p.name = '$1' ORDER BY 1, 2) TO STDOUT"
}

# checkpoint_covers_sql NAME N: a query, true once pipeline NAME's checkpoint
# holds N offsets (for poll)
checkpoint_covers_sql() {
    echo "SELECT coalesce((SELECT sum(o.next_offset) FROM kafka_sink.offsets o
                    JOIN kafka_sink.pipeline_definitions p ON p.id = o.pipeline_id
                   WHERE p.name = '$1'), 0) >= $2"
}
