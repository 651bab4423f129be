#!/usr/bin/env bash
# test/tools/debezium_source.sh — a CDC source for the tests: a PostgreSQL
# cluster of its own (wal_level = logical) and Kafka Connect standalone
# (Apache Kafka's connect-runtime from KS_KAFKA_CP) running the Debezium
# PostgreSQL source connector (pgoutput) against it, writing change topics
# to the harness's broker (KS_BOOTSTRAP).  Groundwork for issue 16: the
# end-to-end test will point kafka_sink at these topics.
#
#   debezium_source.sh fetch            the connector's jars (cached)
#   debezium_source.sh start            cluster (if not running), database,
#                                       publication, then Connect with the
#                                       connector; waits for the snapshot to
#                                       end and streaming to begin
#   debezium_source.sh start-source     the cluster, database and publication
#                                       only (e.g. to create and fill tables
#                                       before the connector's snapshot)
#   debezium_source.sh stop             Connect, then the cluster
#   debezium_source.sh stop-connect     Connect only (SIGTERM: offsets flushed)
#   debezium_source.sh restart-connect [--kill]
#                                       stop Connect (--kill: SIGKILL, so what
#                                       it had not committed is re-sent) and
#                                       start it again with the same offsets
#   debezium_source.sh drop-slot        drop the connector's replication slot
#                                       (Connect must be stopped)
#   debezium_source.sh status           Connect's pid and REST status, slots
#   debezium_source.sh topics           the change topics: name<TAB>messages
#   debezium_source.sh env              export lines: DBZ_SRC_PORT,
#                                       DBZ_SRC_DB, DBZ_SRC_CONNINFO, ...
#   debezium_source.sh clean            stop, then delete DBZ_DIR
#
# Needs the harness env (KS_BOOTSTRAP, KS_KAFKA_CP, KS_HARNESS; from
# test/run_tests.sh, or ${KS_RUN:-<repo>/.run}/env), java 17, mvn, kcat.
#
# Knobs (environment; the ones of the connector are read by start and
# restart-connect and remembered in DBZ_DIR/knobs for later calls):
#   DBZ_DIR          this source's dir ($KS_RUN/dbz_source): the cluster
#                    (a harness run dir), Connect's files, connect.log
#   DBZ_VERSION      io.debezium:debezium-connector-postgres (3.6.1.Final)
#   DBZ_CACHE        plugin cache (~/.cache/kafka_sink/debezium-$DBZ_VERSION)
#   DBZ_NAME         connector name; also the slot name (dbz_src)
#   DBZ_TOPIC_PREFIX topic.prefix (dbz): topics PREFIX.SCHEMA.TABLE
#   DBZ_DB           the source database (cdc_source)
#   DBZ_TABLES       table.include.list (cdc\..*)
#   DBZ_CONVERTER    json (JsonConverter, schemas.enable=true; default) |
#                    json-noschema (schemas.enable=false); avro: later
#   DBZ_DECIMAL      decimal.handling.mode precise | string | double (precise)
#   DBZ_TIME         time.precision.mode adaptive | adaptive_time_microseconds
#                    | connect (adaptive)
#   DBZ_SKIPPED_OPS  skipped.operations (none: truncates are emitted)
#   DBZ_SNAPSHOT     snapshot.mode (initial)
#   DBZ_FLUSH_MS     Connect's offset.flush.interval.ms (10000): what was
#                    sent since the last flush is re-sent after a --kill
#   DBZ_EXTRA        extra connector properties, one per line
#   DBZ_HEAP         Connect's -Xmx (384m)
#   DBZ_TIMEOUT      seconds to wait for streaming to begin (120)
#
# Everything listens on 127.0.0.1 only.  `start` stops what it started if it
# fails; the caller stops a started source with `stop` (e.g. in its exit
# hook).  Only processes whose pid this script recorded are signalled.
set -euo pipefail

SELF="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/$(basename "${BASH_SOURCE[0]}")"
REPO="$(cd "$(dirname "$SELF")/../.." && pwd)"
if [ -z "${KS_BOOTSTRAP:-}" ] && [ -s "${KS_RUN:-$REPO/.run}/env" ]; then
    # shellcheck disable=SC1090
    . "${KS_RUN:-$REPO/.run}/env"
fi
HARNESS="${KS_HARNESS:-$REPO/test/harness.sh}"

DBZ_DIR="${DBZ_DIR:-${KS_RUN:-$REPO/.run}/dbz_source}"
mkdir -p "$DBZ_DIR"
DBZ_DIR="$(cd "$DBZ_DIR" && pwd)"
PGRUN="$DBZ_DIR/pg"                 # the harness run dir of the source cluster
CDIR="$DBZ_DIR/connect"

say() { printf '[debezium_source %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { say "ERROR: $*"; exit 1; }

# knobs: the environment wins; else what the last start remembered; else defaults
KNOBS=(DBZ_VERSION DBZ_NAME DBZ_TOPIC_PREFIX DBZ_DB DBZ_TABLES DBZ_CONVERTER DBZ_DECIMAL
       DBZ_TIME DBZ_SKIPPED_OPS DBZ_SNAPSHOT DBZ_FLUSH_MS DBZ_EXTRA DBZ_HEAP DBZ_TIMEOUT)
declare -A DEF=([DBZ_VERSION]=3.6.1.Final [DBZ_NAME]=dbz_src [DBZ_TOPIC_PREFIX]=dbz
                [DBZ_DB]=cdc_source [DBZ_TABLES]='cdc\..*' [DBZ_CONVERTER]=json
                [DBZ_DECIMAL]=precise [DBZ_TIME]=adaptive [DBZ_SKIPPED_OPS]=none
                [DBZ_SNAPSHOT]=initial [DBZ_FLUSH_MS]=10000 [DBZ_EXTRA]=''
                [DBZ_HEAP]=384m [DBZ_TIMEOUT]=120)
load_knobs() {
    local k
    declare -A saved=()
    if [ -s "$DBZ_DIR/knobs" ]; then
        while IFS= read -r -d '' k && IFS= read -r -d '' v; do saved[$k]="$v"; done < "$DBZ_DIR/knobs"
    fi
    for k in "${KNOBS[@]}"; do
        if [ -n "${!k+x}" ]; then :;
        elif [ -n "${saved[$k]+x}" ]; then printf -v "$k" '%s' "${saved[$k]}";
        else printf -v "$k" '%s' "${DEF[$k]}"; fi
    done
}
save_knobs() {
    local k
    for k in "${KNOBS[@]}"; do printf '%s\0%s\0' "$k" "${!k}"; done > "$DBZ_DIR/knobs"
}
load_knobs
DBZ_CACHE="${DBZ_CACHE:-$HOME/.cache/kafka_sink/debezium-$DBZ_VERSION}"
PLUGIN_PATH="$DBZ_CACHE/plugins"              # Connect: one subdirectory per plugin
PLUGIN="$PLUGIN_PATH/debezium-connector-postgres"

# ------------------------------------------------------------- jars
cmd_fetch() {
    if [ -f "$PLUGIN/.ok" ]; then return 0; fi
    command -v mvn >/dev/null || die "mvn not found (test/harness.sh deps)"
    local t0=$SECONDS tmp="$DBZ_CACHE/fetch.$$"
    say "fetching io.debezium:debezium-connector-postgres:$DBZ_VERSION (mvn) into $PLUGIN"
    rm -rf "$tmp"; mkdir -p "$tmp"
    cat > "$tmp/pom.xml" <<EOF
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>local.kafka_sink.test</groupId><artifactId>debezium-postgres-fetch</artifactId><version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency>
      <groupId>io.debezium</groupId><artifactId>debezium-connector-postgres</artifactId><version>$DBZ_VERSION</version>
      <exclusions>
        <!-- Kafka's own jars come from the worker (Apache Kafka on KS_KAFKA_CP) -->
        <exclusion><groupId>org.apache.kafka</groupId><artifactId>*</artifactId></exclusion>
        <!-- not resolvable from Maven Central here, and not needed by the connector -->
        <exclusion><groupId>io.debezium</groupId><artifactId>debezium-storage-chronicle-queue</artifactId></exclusion>
      </exclusions>
    </dependency>
  </dependencies>
</project>
EOF
    local try
    for try in 1 2 3; do
        if mvn -B -q -f "$tmp/pom.xml" dependency:copy-dependencies \
               -DoutputDirectory="$tmp/jars" -DincludeScope=runtime > "$tmp/mvn.log" 2>&1; then
            break
        fi
        tail -n 30 "$tmp/mvn.log" >&2
        [ "$try" -lt 3 ] || die "mvn failed 3 times (log: $tmp/mvn.log)"
        say "mvn failed (try $try of 3), retrying in 5 s"; sleep 5
    done
    ls "$tmp/jars"/debezium-connector-postgres-*.jar >/dev/null 2>&1 || die "no connector jar in $tmp/jars"
    # slf4j-api is on the worker's classpath: one copy, so the plugin logs
    # through the worker's log4j2 binding
    rm -f "$tmp/jars"/slf4j-api-*.jar
    rm -rf "$PLUGIN"; mkdir -p "$PLUGIN_PATH"
    mv "$tmp/jars" "$PLUGIN"
    touch "$PLUGIN/.ok"
    rm -rf "$tmp"
    say "fetched in $((SECONDS - t0)) s ($(ls "$PLUGIN" | wc -l) jars)"
}

# ------------------------------------------------------------- the source cluster
pg_port() { cat "$PGRUN/pgport"; }
src_sql() {  # src_sql DB [PSQL ARGS...]
    local db="$1"; shift
    psql -X -A -t -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$(pg_port)" -U "$(pg_user)" -d "$db" "$@"
}
pg_user() { if [ "$(id -u)" = 0 ]; then echo "${KS_PGUSER_OS:-${KS_PGOSUSER:-kstest}}"; else id -un; fi; }

cluster_start() {
    mkdir -p "$PGRUN"
    # KS_PRELOAD='': kafka_sink is not loaded in the source; no extension here
    KS_RUN="$PGRUN" KS_PRELOAD='' KS_PG_CONF="wal_level = logical
max_wal_senders = 10
max_replication_slots = 10
wal_sender_timeout = '30s'" "$HARNESS" pg-start >/dev/null 2>&1 \
        || { tail -n 30 "$PGRUN/logs/postgresql.log" >&2 2>/dev/null; die "the source cluster did not start"; }
    if [ "$(src_sql postgres -c "SELECT count(*) FROM pg_database WHERE datname = '$DBZ_DB'")" = 0 ]; then
        src_sql postgres -c "CREATE DATABASE \"$DBZ_DB\""
    fi
    # one publication for every table; table.include.list selects among them
    # (publication.autocreate.mode=disabled: the connector never alters it)
    src_sql "$DBZ_DB" -c "DO \$\$ BEGIN
        IF NOT EXISTS (SELECT FROM pg_publication WHERE pubname = 'dbz_publication') THEN
            CREATE PUBLICATION dbz_publication FOR ALL TABLES;
        END IF; END \$\$"
}
cluster_stop() {
    [ -s "$PGRUN/pgport" ] || return 0
    KS_RUN="$PGRUN" "$HARNESS" pg-stop >/dev/null 2>&1 || KS_RUN="$PGRUN" "$HARNESS" pg-kill >/dev/null 2>&1 || true
}

# ------------------------------------------------------------- Connect
connect_pid() {
    local pid
    [ -s "$CDIR/pid" ] || return 1
    pid="$(cat "$CDIR/pid")"
    kill -0 "$pid" 2>/dev/null || return 1
    tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null | grep -q -- "ConnectStandalone $CDIR/worker.properties" || return 1
    echo "$pid"
}
rest_port() { cat "$CDIR/rest_port"; }
rest() { curl -s -m 5 "http://127.0.0.1:$(rest_port)$1"; }

write_connect_files() {
    mkdir -p "$CDIR"
    [ -s "$CDIR/rest_port" ] || "$HARNESS" free-port > "$CDIR/rest_port"
    local schemas conv=org.apache.kafka.connect.json.JsonConverter
    case "$DBZ_CONVERTER" in
        json) schemas=true ;;
        json-noschema) schemas=false ;;
        *) die "DBZ_CONVERTER: json or json-noschema (avro: not yet)" ;;
    esac
    cat > "$CDIR/log4j2.properties" <<EOF
status = warn
appender.file.type = File
appender.file.name = F
appender.file.fileName = $CDIR/connect.log
appender.file.append = true
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = %d{ISO8601} %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.f.ref = F
logger.kafka.name = org.apache.kafka
logger.kafka.level = WARN
logger.worker.name = org.apache.kafka.connect.runtime.WorkerSourceTask
logger.worker.level = INFO
EOF
    cat > "$CDIR/worker.properties" <<EOF
bootstrap.servers=$KS_BOOTSTRAP
key.converter=$conv
value.converter=$conv
key.converter.schemas.enable=$schemas
value.converter.schemas.enable=$schemas
offset.storage.file.filename=$CDIR/connect.offsets
offset.flush.interval.ms=$DBZ_FLUSH_MS
plugin.path=$PLUGIN_PATH
plugin.discovery=service_load
listeners=http://127.0.0.1:$(rest_port)
EOF
    cat > "$CDIR/connector.properties" <<EOF
name=$DBZ_NAME
connector.class=io.debezium.connector.postgresql.PostgresConnector
tasks.max=1
database.hostname=127.0.0.1
database.port=$(pg_port)
database.user=$(pg_user)
database.password=unused
database.dbname=$DBZ_DB
topic.prefix=$DBZ_TOPIC_PREFIX
plugin.name=pgoutput
publication.name=dbz_publication
publication.autocreate.mode=disabled
slot.name=$DBZ_NAME
table.include.list=$DBZ_TABLES
snapshot.mode=$DBZ_SNAPSHOT
decimal.handling.mode=$DBZ_DECIMAL
time.precision.mode=$DBZ_TIME
skipped.operations=$DBZ_SKIPPED_OPS
tombstones.on.delete=true
include.unknown.datatypes=true
poll.interval.ms=100
status.update.interval.ms=1000
${DBZ_EXTRA}
EOF
}

# connect_start: Connect in its own session; waits until the connector
# streams (its log says so) — after the snapshot, when one is taken
connect_start() {
    cmd_fetch
    [ -n "${KS_KAFKA_CP:-}" ] || die "KS_KAFKA_CP is empty (test/harness.sh kafka-fetch, then env)"
    if connect_pid >/dev/null; then say "Connect already runs (pid $(connect_pid))"; return 0; fi
    write_connect_files
    local mark=0
    [ -f "$CDIR/connect.log" ] && mark="$(wc -l < "$CDIR/connect.log")"
    echo "===== $(date -Is) start" >> "$CDIR/stdout.log"
    ( exec setsid java -Xms64m -Xmx"$DBZ_HEAP" -XX:+UseSerialGC -XX:TieredStopAtLevel=1 \
          -Djava.awt.headless=true -Dlog4j2.configurationFile="$CDIR/log4j2.properties" \
          -cp "$KS_KAFKA_CP" org.apache.kafka.connect.cli.ConnectStandalone \
          "$CDIR/worker.properties" "$CDIR/connector.properties" \
          >> "$CDIR/stdout.log" 2>&1 < /dev/null ) &
    echo $! > "$CDIR/pid"
    local t0=$SECONDS deadline=$((SECONDS + DBZ_TIMEOUT))
    while :; do
        if tail -n +"$((mark + 1))" "$CDIR/connect.log" 2>/dev/null | grep -q 'Starting streaming\|Processing messages'; then
            break
        fi
        # (kill -0, not connect_pid: until the exec the pid runs bash, not java)
        kill -0 "$(cat "$CDIR/pid")" 2>/dev/null || { tail -n 40 "$CDIR/stdout.log" "$CDIR/connect.log" >&2; die "Connect exited (logs in $CDIR)"; }
        if tail -n +"$((mark + 1))" "$CDIR/connect.log" 2>/dev/null | grep -q 'Task threw an uncaught and unrecoverable exception\|Failed to start task'; then
            tail -n +"$((mark + 1))" "$CDIR/connect.log" | grep -A 20 ' ERROR ' | head -n 40 >&2
            die "the connector failed (log $CDIR/connect.log)"
        fi
        [ $SECONDS -lt $deadline ] || { tail -n 40 "$CDIR/connect.log" >&2; die "the connector did not start streaming within ${DBZ_TIMEOUT} s"; }
        sleep 0.3
    done
    say "Connect pid $(cat "$CDIR/pid") streaming ($DBZ_NAME -> $DBZ_TOPIC_PREFIX.*, $DBZ_CONVERTER, decimal $DBZ_DECIMAL, time $DBZ_TIME) after $((SECONDS - t0)) s"
}

# connect_stop [TERM|KILL]
connect_stop() {
    local pid i sig="${1:-TERM}"
    pid="$(connect_pid)" || { rm -f "$CDIR/pid"; return 0; }
    kill -"$sig" "$pid" 2>/dev/null || true
    for ((i = 0; i < 300; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$pid" 2>/dev/null; then say "Connect pid $pid still runs after 30 s: SIGKILL"; kill -KILL "$pid" 2>/dev/null || true; sleep 0.5; fi
    rm -f "$CDIR/pid"
    say "Connect stopped ($sig, pid $pid)"
}

# ------------------------------------------------------------- commands
cmd_start() {
    save_knobs
    local started_pg=0
    [ -s "$PGRUN/pgport" ] && KS_RUN="$PGRUN" "$HARNESS" status 2>/dev/null | grep -q 'postgresql: running' || started_pg=1
    # a failed start leaves nothing running that it started
    trap 'rc=$?; if [ $rc -ne 0 ]; then connect_stop KILL; [ $started_pg = 1 ] && cluster_stop; fi' EXIT
    cluster_start
    connect_start
    trap - EXIT
}

cmd_stop() {
    connect_stop TERM
    cluster_stop
}

cmd_restart_connect() {
    local sig=TERM
    [ "${1:-}" = --kill ] && sig=KILL
    save_knobs
    connect_stop "$sig"
    connect_start
}

cmd_drop_slot() {
    connect_pid >/dev/null && die "Connect runs: stop-connect first"
    src_sql "$DBZ_DB" -c "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = '$DBZ_NAME'" >/dev/null
}

cmd_status() {
    local pid
    if pid="$(connect_pid)"; then
        echo "connect: running pid $pid, REST 127.0.0.1:$(rest_port)"
        echo "connector: $(rest "/connectors/$DBZ_NAME/status" || echo '(no answer)')"
    else
        echo "connect: stopped"
    fi
    if [ -s "$PGRUN/pgport" ] && KS_RUN="$PGRUN" "$HARNESS" status 2>/dev/null | grep -q 'postgresql: running'; then
        echo "source: running on 127.0.0.1:$(pg_port), database $DBZ_DB"
        src_sql "$DBZ_DB" -F $'\t' -c "SELECT 'slot', slot_name, active, confirmed_flush_lsn FROM pg_replication_slots"
    else
        echo "source: stopped"
    fi
    echo "knobs: prefix $DBZ_TOPIC_PREFIX, tables $DBZ_TABLES, converter $DBZ_CONVERTER, decimal $DBZ_DECIMAL, time $DBZ_TIME"
}

cmd_topics() {
    local t
    kcat -b "$KS_BOOTSTRAP" -L -m 10 2>/dev/null | sed -n 's/^ *topic "\([^"]*\)" with.*/\1/p' | sort \
        | grep -F "$DBZ_TOPIC_PREFIX." | while read -r t; do
            case "$t" in "$DBZ_TOPIC_PREFIX".*) ;; *) continue ;; esac
            printf '%s\t%s\n' "$t" "$("$HARNESS" topic-offsets "$t" 2>/dev/null | awk '{s += $2} END {print s + 0}')"
        done
}

cmd_env() {
    local port; port="$(pg_port)"
    printf 'export %s=%q\n' DBZ_SRC_PORT "$port" DBZ_SRC_DB "$DBZ_DB" DBZ_SRC_USER "$(pg_user)" \
        DBZ_SRC_CONNINFO "host=127.0.0.1 port=$port dbname=$DBZ_DB user=$(pg_user)" \
        DBZ_TOPIC_PREFIX "$DBZ_TOPIC_PREFIX" DBZ_CONNECT_LOG "$CDIR/connect.log"
}

cmd_clean() {
    cmd_stop
    [ -d "$PGRUN" ] && KS_RUN="$PGRUN" "$HARNESS" clean >/dev/null 2>&1 || true
    rm -rf "$DBZ_DIR"
}

case "${1:-}" in
    fetch) cmd_fetch ;;
    start) cmd_start ;;
    start-source) save_knobs; cluster_start ;;
    stop) cmd_stop ;;
    stop-connect) connect_stop TERM ;;
    restart-connect) shift; cmd_restart_connect "$@" ;;
    drop-slot) cmd_drop_slot ;;
    status) cmd_status ;;
    topics) cmd_topics ;;
    env) cmd_env ;;
    clean) cmd_clean ;;
    *) sed -n '2,/^set -euo/p' "$SELF" | sed '$d' | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
esac
