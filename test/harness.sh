#!/usr/bin/env bash
# test/harness.sh — throwaway Apache Kafka broker and PostgreSQL cluster
# for kafka_sink's end-to-end tests, its demo and interactive development.
#
# Everything lives in one run dir, ${KS_RUN:-<repo>/.run}: data, logs
# (logs/kafka.log, logs/postgresql.log), pid files, chosen ports and an
# env file that other scripts source.  Ports and data dirs are chosen once
# and reused, so stop/start keeps the same broker and cluster (the crash
# tests depend on that).  `stop-all` stops what this run dir started, by pid.
#
#   test/harness.sh deps | kafka-fetch | kafka-start | kafka-stop | kafka-kill
#   test/harness.sh kafka-pause | kafka-resume      # SIGSTOP / SIGCONT
#   test/harness.sh topic-create NAME PARTITIONS [TopicCommand args...]
#   test/harness.sh topic-add-partitions NAME TOTAL | topic-delete NAME
#   test/harness.sh topic-offsets NAME        # partition<TAB>high_watermark
#   test/harness.sh topic-start-offsets NAME  # partition<TAB>log_start_offset
#   test/harness.sh delete-records TOPIC PARTITION OFFSET
#   test/harness.sh consumer-groups ARGS...  # Kafka's ConsumerGroupCommand (kafka-consumer-groups)
#   test/harness.sh pg-start | pg-stop | pg-kill | env | status | stop-all | clean
#   test/harness.sh pg-wipe                  # stop the cluster, delete its data
#   test/harness.sh free-port [AVOID...]     # a free loopback port, not one of AVOID
#   test/harness.sh cluster-id                # a new KRaft cluster id
#
# Environment knobs (all optional):
#   KS_RUN            run dir (default <repo>/.run)
#   KS_KAFKA_VERSION  Apache Kafka version fetched from Maven Central (4.1.1)
#   KS_KAFKA_HEAP     broker -Xmx (512m)
#   KS_KAFKA_PROPS    extra server.properties lines, appended on every start
#   KS_PRELOAD        shared_preload_libraries (default kafka_sink; '' = none)
#   KS_PG_CONF        extra postgresql.conf lines, rewritten on every start
#   KS_APPLY_STRATEGY kafka_sink.apply_strategy for the cluster (sql|auto|on_conflict;
#                     unset = the GUC's default), e.g. to run the suites
#                     with the direct heap apply forced
#   KS_PGUSER_OS      OS user that owns the cluster when run as root (kstest)
#   KS_PGBIN          the PostgreSQL: initdb/pg_ctl/postgres/psql from this
#                     bindir (default Debian's 15; test/run_tests.sh sets it
#                     from PG_CONFIG; after switching majors, pg-wipe first)
#   KS_KAFKA_HOME     where the classpath file and the tools' AppCDS archive
#                     live (~/.cache/kafka_sink/kafka-<version>; jars in ~/.m2)
#   KS_KAFKA_START_TIMEOUT  seconds to wait for the broker (60)
#
# `env` prints (and writes to $KS_RUN/env) export lines for: KS_RUN,
# KS_BOOTSTRAP, PGHOST, PGPORT, PGUSER, PGDATABASE (kafka_sink_test),
# KS_PGDATA, KS_PGBIN, KS_PGOSUSER, KS_LOGS, KS_HARNESS, KS_KAFKA_CP.
#   eval "$(test/harness.sh env)"; psql
set -euo pipefail

HARNESS="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/$(basename "${BASH_SOURCE[0]}")"
REPO="$(cd "$(dirname "$HARNESS")/.." && pwd)"
KS_RUN="${KS_RUN:-$REPO/.run}"
mkdir -p "$KS_RUN"
KS_RUN="$(cd "$KS_RUN" && pwd)"
# marks the dir as ours, so `clean` never deletes a directory it did not make
[ -e "$KS_RUN/.ks_run" ] || [ -n "$(ls -A "$KS_RUN")" ] || touch "$KS_RUN/.ks_run"
LOGS="$KS_RUN/logs"
KDIR="$KS_RUN/kafka"
KS_KAFKA_VERSION="${KS_KAFKA_VERSION:-4.1.1}"
# log4j2 binding for slf4j 1.7 (what kafka 4.x itself depends on)
KS_LOG4J_VERSION="${KS_LOG4J_VERSION:-2.24.3}"
KS_PGBIN="${KS_PGBIN:-/usr/lib/postgresql/15/bin}"
KS_PGUSER_OS="${KS_PGUSER_OS:-kstest}"
KS_PRELOAD="${KS_PRELOAD-kafka_sink}"
KS_DB="kafka_sink_test"
# the cp file lives outside the run dir so several run dirs share one fetch
KS_KAFKA_HOME="${KS_KAFKA_HOME:-$HOME/.cache/kafka_sink/kafka-$KS_KAFKA_VERSION}"
KS_KAFKA_CP_FILE="$KS_KAFKA_HOME/classpath"

log()  { printf '[harness %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die()  { printf '[harness] ERROR: %s\n' "$*" >&2; exit 1; }

# ---------------------------------------------------------------- deps
APT_PKGS=(build-essential pkg-config postgresql-15 postgresql-server-dev-15
          librdkafka-dev postgresql-15-pgtap libtap-parser-sourcehandler-pgtap-perl
          kcat python3 curl prometheus-postgres-exporter
          libavro-dev libcurl4-openssl-dev python3-venv postgresql-15-partman
          debhelper postgresql-server-dev-all pgxnclient)  # the last three: test/e2e/package.sh

cmd_deps() {
    local missing=() p
    for p in "${APT_PKGS[@]}"; do
        dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
    done
    command -v java >/dev/null 2>&1 || missing+=(openjdk-17-jre-headless)
    command -v mvn >/dev/null 2>&1 || missing+=(maven)
    if [ ${#missing[@]} -eq 0 ]; then
        log "deps: all present"
        return 0
    fi
    [ "$(id -u)" = 0 ] || die "missing packages (${missing[*]}); run 'test/harness.sh deps' as root"
    log "deps: installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
    log "deps: done"
}

# ---------------------------------------------------------------- kafka
cmd_kafka_fetch() {
    if [ -s "$KS_KAFKA_CP_FILE" ] && cp_ok "$(cat "$KS_KAFKA_CP_FILE")"; then
        log "kafka-fetch: cached ($KS_KAFKA_CP_FILE)"
        return 0
    fi
    command -v mvn >/dev/null || die "mvn not found; run 'test/harness.sh deps'"
    mkdir -p "$KS_KAFKA_HOME"
    # A throwaway pom whose only job is to resolve the broker, the admin tools
    # and a log4j2 backend from Maven Central into ~/.m2.
    cat > "$KS_KAFKA_HOME/pom.xml" <<EOF
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>local.kafka_sink.test</groupId>
  <artifactId>kafka-runtime</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka_2.13</artifactId><version>$KS_KAFKA_VERSION</version></dependency>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka-tools</artifactId><version>$KS_KAFKA_VERSION</version></dependency>
    <dependency><groupId>org.apache.logging.log4j</groupId><artifactId>log4j-slf4j-impl</artifactId><version>$KS_LOG4J_VERSION</version></dependency>
    <dependency><groupId>org.apache.logging.log4j</groupId><artifactId>log4j-core</artifactId><version>$KS_LOG4J_VERSION</version></dependency>
  </dependencies>
</project>
EOF
    log "kafka-fetch: resolving org.apache.kafka:kafka_2.13:$KS_KAFKA_VERSION + kafka-tools with Maven"
    local t0=$SECONDS
    local try
    for try in 1 2 3; do
        if mvn -B -q -f "$KS_KAFKA_HOME/pom.xml" dependency:build-classpath \
                -Dmdep.outputFile="$KS_KAFKA_CP_FILE.tmp" -Dmdep.includeScope=runtime \
                > "$KS_KAFKA_HOME/mvn.log" 2>&1; then
            break
        fi
        tail -n 40 "$KS_KAFKA_HOME/mvn.log" >&2
        [ $try -lt 3 ] || die "kafka-fetch: maven failed 3 times (full log: $KS_KAFKA_HOME/mvn.log)"
        log "kafka-fetch: maven failed (try $try of 3), retrying in 5 s"
        sleep 5
    done
    cp_ok "$(cat "$KS_KAFKA_CP_FILE.tmp")" || die "kafka-fetch: classpath incomplete"
    mv "$KS_KAFKA_CP_FILE.tmp" "$KS_KAFKA_CP_FILE"
    log "kafka-fetch: done in $((SECONDS - t0))s ($(tr ':' '\n' < "$KS_KAFKA_CP_FILE" | wc -l) jars)"
}

cp_ok() {
    local cp="$1" j
    case "$cp" in *kafka_2.13-"$KS_KAFKA_VERSION".jar*) ;; *) return 1 ;; esac
    case "$cp" in *kafka-tools-"$KS_KAFKA_VERSION".jar*) ;; *) return 1 ;; esac
    local IFS=:
    for j in $cp; do [ -f "$j" ] || return 1; done
}

kafka_cp() {
    [ -s "$KS_KAFKA_CP_FILE" ] || die "no Kafka classpath; run 'test/harness.sh kafka-fetch'"
    cat "$KS_KAFKA_CP_FILE"
}

# cluster_id: a new KRaft cluster id (base64url of a UUID), never one
# starting with "-": the storage tool's parser takes that for an option
cluster_id() {
    python3 -c '
import base64, uuid
c = "-"
while c.startswith("-"):
    c = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
print(c)'
}

# free_port: a loopback TCP port below the Linux ephemeral range (so a
# client socket cannot steal it between a stop and a restart), free now.
free_port() {
    python3 - "$@" <<'EOF'
import random, socket, sys
avoid = set(int(a) for a in sys.argv[1:])
for _ in range(500):
    p = random.randint(15000, 32000)
    if p in avoid:
        continue
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", p))
    except OSError:
        continue
    finally:
        s.close()
    print(p)
    sys.exit(0)
sys.exit("no free port")
EOF
}

port_in_use() {
    python3 - "$1" <<'EOF'
import socket, sys
s = socket.socket()
# as servers do: TIME_WAIT leftovers of our own earlier run do not count
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
try:
    s.bind(("127.0.0.1", int(sys.argv[1])))
except OSError:
    sys.exit(0)
finally:
    s.close()
sys.exit(1)
EOF
}

# ports are chosen once per run dir and then kept, so restarts reuse them
kafka_ports() {
    mkdir -p "$KDIR"
    if [ ! -s "$KDIR/port" ] || [ ! -s "$KDIR/controller_port" ]; then
        local p c
        p="$(free_port)"
        c="$(free_port "$p")"
        echo "$p" > "$KDIR/port"
        echo "$c" > "$KDIR/controller_port"
    fi
    KPORT="$(cat "$KDIR/port")"
    KCPORT="$(cat "$KDIR/controller_port")"
    BOOTSTRAP="127.0.0.1:$KPORT"
}

pid_alive() {  # pid_alive PIDFILE PATTERN
    local pid
    [ -s "$1" ] || return 1
    pid="$(cat "$1")"
    kill -0 "$pid" 2>/dev/null || return 1
    tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null | grep -q -- "$2"
}

write_log4j() {
    mkdir -p "$KDIR"
    cat > "$KDIR/log4j2-broker.properties" <<'EOF'
status = warn
appender.out.type = Console
appender.out.name = OUT
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.out.ref = OUT
logger.kafka.name = kafka
logger.kafka.level = INFO
logger.request.name = kafka.request.logger
logger.request.level = WARN
logger.state.name = state.change.logger
logger.state.level = WARN
EOF
    cat > "$KDIR/log4j2-tools.properties" <<'EOF'
status = error
appender.err.type = Console
appender.err.name = ERR
appender.err.target = SYSTEM_ERR
appender.err.layout.type = PatternLayout
appender.err.layout.pattern = %p %m (%c)%n
rootLogger.level = WARN
rootLogger.appenderRef.err.ref = ERR
EOF
}

write_server_properties() {
    cat > "$KDIR/server.properties" <<EOF
# written by test/harness.sh; single-node KRaft broker+controller
process.roles=broker,controller
node.id=1
controller.quorum.bootstrap.servers=127.0.0.1:$KCPORT
listeners=PLAINTEXT://127.0.0.1:$KPORT,CONTROLLER://127.0.0.1:$KCPORT
advertised.listeners=PLAINTEXT://127.0.0.1:$KPORT
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
log.dirs=$KDIR/data
num.partitions=1
auto.create.topics.enable=true
delete.topic.enable=true
offsets.topic.replication.factor=1
offsets.topic.num.partitions=4
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
transaction.state.log.num.partitions=4
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
num.network.threads=2
num.io.threads=4
log.retention.check.interval.ms=5000
# after a kill -9 the restarted broker must wait out its old session before
# it may register again: keep that wait short (default 9 s)
broker.heartbeat.interval.ms=500
broker.session.timeout.ms=4000
EOF
    if [ -n "${KS_KAFKA_PROPS:-}" ]; then
        printf '# KS_KAFKA_PROPS\n%s\n' "$KS_KAFKA_PROPS" >> "$KDIR/server.properties"
    fi
}

# kjava MAINCLASS ARGS... — a short-lived admin tool JVM.  The first call
# dumps an AppCDS archive of the classes it loaded; later calls map it, which
# halves their start-up (~1.3 s -> ~0.6 s).  An unusable archive (other JDK)
# is ignored by -Xshare:auto; JVM warnings go to stderr, never stdout.
kjava() {
    local key cds cdsopt
    key="$( { readlink -f "$(command -v java)"; cat "$KS_KAFKA_CP_FILE"; } | cksum | cut -d' ' -f1)"
    cds="$KS_KAFKA_HOME/tools-$key.jsa"
    if [ -n "${KJAVA_NOCDS:-}" ]; then
        cdsopt="-Xshare:auto"
    elif [ -s "$cds" ]; then
        cdsopt="-XX:SharedArchiveFile=$cds"
    else
        cdsopt="-XX:ArchiveClassesAtExit=$cds.$$"
    fi
    local rc=0
    java -Xms32m -Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Xshare:auto \
         "$cdsopt" -Xlog:disable -Xlog:all=error:stderr \
         -XX:-UsePerfData -Djava.awt.headless=true \
         -Dlog4j2.configurationFile="$KDIR/log4j2-tools.properties" \
         -cp "$(kafka_cp)" "$@" || rc=$?
    if [ -s "$cds.$$" ]; then mv -f "$cds.$$" "$cds"; else rm -f "$cds.$$"; fi
    return $rc
}

kafka_ready() {
    kcat -b "$BOOTSTRAP" -L -m 3 2>/dev/null | grep -q '1 brokers:'
}

cmd_kafka_start() {
    kafka_ports
    mkdir -p "$LOGS"
    if pid_alive "$KDIR/pid" kafka.Kafka; then
        log "kafka-start: already running (pid $(cat "$KDIR/pid")) on $BOOTSTRAP"
        write_env
        return 0
    fi
    [ -s "$KS_KAFKA_CP_FILE" ] || cmd_kafka_fetch
    write_log4j
    write_server_properties
    if port_in_use "$KPORT" || port_in_use "$KCPORT"; then
        die "kafka-start: port $KPORT or $KCPORT is taken by another process (ss -ltnp)"
    fi
    if [ ! -f "$KDIR/data/meta.properties" ]; then
        local cluster_id
        cluster_id="$(cluster_id)"
        log "kafka-start: formatting $KDIR/data (cluster id $cluster_id)"
        rm -rf "$KDIR/data"
        KJAVA_NOCDS=1 kjava kafka.tools.StorageTool format -t "$cluster_id" \
              -c "$KDIR/server.properties" --standalone >> "$LOGS/kafka-format.log" 2>&1 \
            || { cat "$LOGS/kafka-format.log" >&2; die "kafka-start: format failed"; }
    fi
    log "kafka-start: starting broker on $BOOTSTRAP (controller 127.0.0.1:$KCPORT)"
    local t0=$SECONDS
    echo "===== $(date -Is) kafka-start" >> "$LOGS/kafka.log"
    # setsid: a Ctrl-C in the developer's terminal reaches the runner's trap,
    # which stops the broker in order, instead of killing it mid-write.
    ( exec setsid java -Xms256m -Xmx"${KS_KAFKA_HEAP:-512m}" -XX:+UseG1GC \
          -XX:MaxGCPauseMillis=20 -Djava.awt.headless=true \
          -Dlog4j2.configurationFile="$KDIR/log4j2-broker.properties" \
          -cp "$(kafka_cp)" kafka.Kafka "$KDIR/server.properties" \
          >> "$LOGS/kafka.log" 2>&1 < /dev/null ) &
    echo $! > "$KDIR/pid"
    local deadline=$((SECONDS + ${KS_KAFKA_START_TIMEOUT:-60}))
    until kafka_ready; do
        if ! pid_alive "$KDIR/pid" kafka.Kafka; then
            tail -n 40 "$LOGS/kafka.log" >&2
            die "kafka-start: broker exited (full log: $LOGS/kafka.log)"
        fi
        if [ $SECONDS -ge $deadline ]; then
            tail -n 40 "$LOGS/kafka.log" >&2
            die "kafka-start: broker did not answer on $BOOTSTRAP within ${KS_KAFKA_START_TIMEOUT:-60}s (full log: $LOGS/kafka.log)"
        fi
        sleep 0.5
    done
    log "kafka-start: up in $((SECONDS - t0))s (pid $(cat "$KDIR/pid"))"
    write_env
}

stop_pid() {  # stop_pid PIDFILE PATTERN NAME SIGNAL TIMEOUT
    local pidfile="$1" pat="$2" name="$3" sig="$4" timeout="$5" pid i
    if ! pid_alive "$pidfile" "$pat"; then
        rm -f "$pidfile"
        log "$name: not running"
        return 0
    fi
    pid="$(cat "$pidfile")"
    kill -"$sig" "$pid" 2>/dev/null || true
    kill -CONT "$pid" 2>/dev/null || true   # a paused broker must see the TERM
    for ((i = 0; i < timeout * 10; i++)); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    if kill -0 "$pid" 2>/dev/null; then
        log "$name: pid $pid still alive after ${timeout}s, SIGKILL"
        kill -KILL "$pid" 2>/dev/null || true
        for ((i = 0; i < 50; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    fi
    rm -f "$pidfile"
    log "$name: stopped (pid $pid)"
}

cmd_kafka_stop() { stop_pid "$KDIR/pid" kafka.Kafka kafka-stop TERM 30; }
# kafka-kill: SIGKILL, no controlled shutdown (broker crash for fault tests)
cmd_kafka_kill() { stop_pid "$KDIR/pid" kafka.Kafka kafka-kill KILL 5; }

# kafka-pause / kafka-resume: SIGSTOP / SIGCONT, a broker that hangs with
# its sockets open (clients time out instead of being refused)
cmd_kafka_pause() {
    pid_alive "$KDIR/pid" kafka.Kafka || die "kafka-pause: broker not running"
    kill -STOP "$(cat "$KDIR/pid")"; log "kafka-pause: broker paused"
}
cmd_kafka_resume() {
    pid_alive "$KDIR/pid" kafka.Kafka || die "kafka-resume: broker not running"
    kill -CONT "$(cat "$KDIR/pid")"; log "kafka-resume: broker resumed"
}

need_broker() {
    kafka_ports
    kafka_ready || die "broker on $BOOTSTRAP is not answering; run 'test/harness.sh kafka-start'"
    write_log4j
}

cmd_topic_create() {
    [ $# -ge 2 ] || die "usage: topic-create NAME PARTITIONS [TopicCommand args...]"
    local name="$1" parts="$2"; shift 2
    need_broker
    kjava org.apache.kafka.tools.TopicCommand --bootstrap-server "$BOOTSTRAP" \
        --create --topic "$name" --partitions "$parts" --replication-factor 1 "$@"
}

cmd_topic_add_partitions() {
    [ $# -eq 2 ] || die "usage: topic-add-partitions NAME TOTAL_PARTITIONS"
    need_broker
    kjava org.apache.kafka.tools.TopicCommand --bootstrap-server "$BOOTSTRAP" \
        --alter --topic "$1" --partitions "$2"
}

cmd_topic_delete() {
    [ $# -eq 1 ] || die "usage: topic-delete NAME"
    need_broker
    kjava org.apache.kafka.tools.TopicCommand --bootstrap-server "$BOOTSTRAP" \
        --delete --topic "$1"
}

# offsets by kcat, not a JVM: metadata gives the partitions, one -Q call
# lists them all (-1 = end offset, -2 = log start offset).  kcat -Q asks
# through a producer handle, i.e. read_uncommitted: "end" is the high
# watermark (equal to the last stable offset unless transactions are open).
kcat_offsets() {  # kcat_offsets TOPIC -1|-2
    local topic="$1" which="$2" parts args=() p
    need_broker
    parts="$(kcat -b "$BOOTSTRAP" -L -t "$topic" -m 10 2>/dev/null \
             | sed -n 's/^ *partition \([0-9]*\),.*/\1/p' | sort -n)"
    [ -n "$parts" ] || die "topic '$topic' not found on $BOOTSTRAP"
    for p in $parts; do args+=(-t "$topic:$p:$which"); done
    kcat -b "$BOOTSTRAP" -m 10 -Q "${args[@]}" \
        | sed -n 's/^.* \[\([0-9]*\)\] offset \(-\{0,1\}[0-9]*\)$/\1\t\2/p' | sort -n
}

cmd_topic_offsets()       { [ $# -eq 1 ] || die "usage: topic-offsets NAME"; kcat_offsets "$1" -1; }
cmd_topic_start_offsets() { [ $# -eq 1 ] || die "usage: topic-start-offsets NAME"; kcat_offsets "$1" -2; }

cmd_delete_records() {
    [ $# -eq 3 ] || die "usage: delete-records TOPIC PARTITION OFFSET"
    need_broker
    local f="$KDIR/delete-records.$$.json"
    printf '{"version":1,"partitions":[{"topic":"%s","partition":%d,"offset":%d}]}\n' \
        "$1" "$2" "$3" > "$f"
    kjava org.apache.kafka.tools.DeleteRecordsCommand --bootstrap-server "$BOOTSTRAP" \
        --offset-json-file "$f"
    rm -f "$f"
}

# consumer-groups ARGS...: Kafka's own kafka-consumer-groups tool against the
# broker, e.g. --describe --group G, --delete --group G, --reset-offsets ...
cmd_consumer_groups() {
    need_broker
    kjava org.apache.kafka.tools.consumer.group.ConsumerGroupCommand --bootstrap-server "$BOOTSTRAP" "$@"
}

# ---------------------------------------------------------------- postgres
# PostgreSQL refuses to run as root: as root the cluster belongs to an
# unprivileged OS user; otherwise to whoever runs the harness.
pg_os_user() {
    if [ "$(id -u)" = 0 ]; then echo "$KS_PGUSER_OS"; else id -un; fi
}

as_pg() {
    if [ "$(id -u)" = 0 ]; then runuser -u "$KS_PGUSER_OS" -- "$@"; else "$@"; fi
}

ensure_pg_os_user() {
    [ "$(id -u)" = 0 ] || return 0
    id -u "$KS_PGUSER_OS" >/dev/null 2>&1 && return 0
    log "creating OS user $KS_PGUSER_OS"
    useradd --system --no-create-home --home-dir /nonexistent \
            --shell /usr/sbin/nologin "$KS_PGUSER_OS"
}

# The cluster's root: $KS_RUN/pg when the cluster's OS user can reach it,
# else a private dir under /var/tmp (a clone under /root is not traversable
# by kstest).  Chosen once, remembered in $KS_RUN/pgroot.
pg_paths() {
    if [ ! -s "$KS_RUN/pgroot" ]; then
        local root="$KS_RUN/pg"
        mkdir -p "$root"
        if [ "$(id -u)" = 0 ]; then
            ensure_pg_os_user
            chown "$KS_PGUSER_OS" "$root"
            if ! runuser -u "$KS_PGUSER_OS" -- test -w "$root"; then
                rmdir "$root" 2>/dev/null || true
                root="$(mktemp -d /var/tmp/kafka_sink-pg.XXXXXX)"
                chown "$KS_PGUSER_OS" "$root"
            fi
        fi
        # unix sockets have a ~107 byte path limit
        echo "$root" > "$KS_RUN/pgroot"
    fi
    PGROOT="$(cat "$KS_RUN/pgroot")"
    PGDATA_DIR="$PGROOT/data"
    PGLOG="$LOGS/postgresql.log"
    if [ "$PGROOT" != "$KS_RUN/pg" ]; then
        # the cluster's user cannot write into the run dir: log beside the
        # data, and link it into logs/ so the log is where everyone looks
        PGLOG="$PGROOT/postgresql.log"
        mkdir -p "$LOGS"
        ln -sfn "$PGLOG" "$LOGS/postgresql.log"
    fi
    PGSOCK="$PGROOT/sock"
    if [ ${#PGSOCK} -gt 90 ]; then
        PGSOCK="/tmp/ks-sock-$(printf '%s' "$PGROOT" | cksum | cut -d' ' -f1)"
    fi
    if [ ! -s "$KS_RUN/pgport" ]; then
        local avoid=()
        [ -s "$KDIR/port" ] && avoid+=("$(cat "$KDIR/port")" "$(cat "$KDIR/controller_port")")
        free_port "${avoid[@]}" > "$KS_RUN/pgport"
    fi
    PGPORT_NUM="$(cat "$KS_RUN/pgport")"
    PGUSER_NAME="$(pg_os_user)"
}

pg_running() {
    pg_paths
    [ -f "$PGDATA_DIR/postmaster.pid" ] || return 1
    as_pg "$KS_PGBIN/pg_ctl" -D "$PGDATA_DIR" status >/dev/null 2>&1
}

write_pg_conf() {
    # the harness's settings sit in their own file, rewritten on every start
    # so KS_PRELOAD / KS_PG_CONF apply on a restart; ALTER SYSTEM still wins.
    local f="$PGDATA_DIR/kafka_sink_harness.conf"
    {
        echo "# written by test/harness.sh on every pg-start"
        echo "listen_addresses = '127.0.0.1'"
        echo "port = $PGPORT_NUM"
        echo "unix_socket_directories = '$PGSOCK'"
        echo "shared_preload_libraries = '$KS_PRELOAD'"
        echo "kafka_sink.database = '$KS_DB'"
        echo "max_worker_processes = 40"
        echo "max_connections = 100"
        echo "logging_collector = off"
        echo "log_line_prefix = '%m [%p] %q%u@%d '"
        echo "log_min_messages = info"
        echo "log_timezone = 'UTC'"
        echo "timezone = 'UTC'"
        echo "shared_buffers = 128MB"
        [ -n "${KS_APPLY_STRATEGY:-}" ] \
            && echo "kafka_sink.apply_strategy = '$KS_APPLY_STRATEGY'"
        [ -n "${KS_PG_CONF:-}" ] && printf '# KS_PG_CONF\n%s\n' "$KS_PG_CONF"
    } > "$f.tmp"
    if [ "$(id -u)" = 0 ]; then chown "$KS_PGUSER_OS" "$f.tmp"; fi
    mv "$f.tmp" "$f"
}

cmd_pg_start() {
    [ -x "$KS_PGBIN/pg_ctl" ] || die "no $KS_PGBIN/pg_ctl; run 'test/harness.sh deps'"
    pg_paths
    mkdir -p "$LOGS"
    if [ "$(id -u)" = 0 ]; then
        mkdir -p "$PGSOCK"; chown "$KS_PGUSER_OS" "$PGSOCK"
        touch "$PGLOG"; chown "$KS_PGUSER_OS" "$PGLOG"
        # the server (COPY ... FROM PROGRAM 'kcat ...') and psql as kstest
        # may need to read the run dir; never write outside PGROOT.
        chmod o+rx "$KS_RUN" "$LOGS" 2>/dev/null || true
    else
        mkdir -p "$PGSOCK"
    fi
    if pg_running; then
        log "pg-start: already running on 127.0.0.1:$PGPORT_NUM"
        write_env
        return 0
    fi
    if [ ! -f "$PGDATA_DIR/PG_VERSION" ]; then
        log "pg-start: initdb $PGDATA_DIR (OS user $PGUSER_NAME)"
        as_pg "$KS_PGBIN/initdb" -D "$PGDATA_DIR" -U "$PGUSER_NAME" --auth=trust \
              -E UTF8 --locale=C.UTF-8 --no-sync > "$LOGS/initdb.log" 2>&1 \
            || { cat "$LOGS/initdb.log" >&2; die "pg-start: initdb failed"; }
        echo "include_if_exists = 'kafka_sink_harness.conf'" \
            | as_pg tee -a "$PGDATA_DIR/postgresql.conf" >/dev/null
    fi
    write_pg_conf
    if port_in_use "$PGPORT_NUM"; then
        die "pg-start: port $PGPORT_NUM is taken by another process (ss -ltnp)"
    fi
    log "pg-start: starting PostgreSQL on 127.0.0.1:$PGPORT_NUM (preload '$KS_PRELOAD')"
    local t0=$SECONDS
    echo "===== $(date -Is) pg-start" | as_pg tee -a "$PGLOG" >/dev/null
    # KS_CORE_DUMPS=1: a crashing backend leaves a core file in the data
    # directory (core_pattern permitting), for a backtrace with gdb.  The
    # limit is raised in the server's own shell: runuser's PAM session
    # resets it.
    local core_limit=
    [ -n "${KS_CORE_DUMPS:-}" ] && core_limit='ulimit -c unlimited;'
    if ! as_pg bash -c "$core_limit"' exec "$@"' pg_ctl "$KS_PGBIN/pg_ctl" \
            -D "$PGDATA_DIR" -l "$PGLOG" -w -t 60 start > /dev/null; then
        tail -n 40 "$PGLOG" >&2
        die "pg-start: PostgreSQL did not start (full log: $PGLOG)"
    fi
    if [ "$(as_pg "$KS_PGBIN/psql" -h 127.0.0.1 -p "$PGPORT_NUM" -U "$PGUSER_NAME" -d postgres -XAtc \
            "SELECT 1 FROM pg_database WHERE datname = '$KS_DB'")" != 1 ]; then
        as_pg "$KS_PGBIN/createdb" -h 127.0.0.1 -p "$PGPORT_NUM" -U "$PGUSER_NAME" "$KS_DB"
        log "pg-start: created database $KS_DB"
    fi
    log "pg-start: up in $((SECONDS - t0))s"
    write_env
}

cmd_pg_stop() {
    if pg_running; then
        as_pg "$KS_PGBIN/pg_ctl" -D "$PGDATA_DIR" -m fast -w -t 60 stop >/dev/null
        log "pg-stop: stopped"
    else
        log "pg-stop: not running"
    fi
}

# pg-kill: immediate shutdown (no checkpoint, crash recovery on next start)
cmd_pg_kill() {
    if pg_running; then
        as_pg "$KS_PGBIN/pg_ctl" -D "$PGDATA_DIR" -m immediate -w -t 60 stop >/dev/null
        log "pg-kill: stopped (immediate)"
    else
        log "pg-kill: not running"
    fi
}

# ---------------------------------------------------------------- env
env_lines() {
    kafka_ports
    pg_paths
    local cp=""
    [ -s "$KS_KAFKA_CP_FILE" ] && cp="$(cat "$KS_KAFKA_CP_FILE")"
    printf 'export %s=%q\n' \
        KS_RUN "$KS_RUN" \
        KS_BOOTSTRAP "$BOOTSTRAP" \
        PGHOST 127.0.0.1 \
        PGPORT "$PGPORT_NUM" \
        PGUSER "$PGUSER_NAME" \
        PGDATABASE "$KS_DB" \
        KS_PGDATA "$PGDATA_DIR" \
        KS_PGBIN "$KS_PGBIN" \
        KS_PGOSUSER "$PGUSER_NAME" \
        KS_LOGS "$LOGS" \
        KS_HARNESS "$HARNESS" \
        KS_KAFKA_CP "$cp"
}

write_env() {
    env_lines > "$KS_RUN/env.tmp"
    mv "$KS_RUN/env.tmp" "$KS_RUN/env"
    chmod a+r "$KS_RUN/env"
}

cmd_env() {
    write_env
    cat "$KS_RUN/env"
}

cmd_status() {
    kafka_ports
    pg_paths
    if pid_alive "$KDIR/pid" kafka.Kafka; then
        echo "kafka: running pid $(cat "$KDIR/pid") on $BOOTSTRAP"
    else
        echo "kafka: stopped ($BOOTSTRAP)"
    fi
    if pg_running; then
        echo "postgresql: running on 127.0.0.1:$PGPORT_NUM, data $PGDATA_DIR"
    else
        echo "postgresql: stopped (127.0.0.1:$PGPORT_NUM, data $PGDATA_DIR)"
    fi
    echo "logs: $LOGS"
}

cmd_stop_all() {
    local rc=0
    cmd_pg_stop || { rc=1; cmd_pg_kill || true; }
    cmd_kafka_stop || rc=1
    return $rc
}

# pg-wipe: stop the cluster and delete its data dir (the broker keeps
# running): the next pg-start initdbs anew, with the KS_PGBIN of that call;
# test/run_tests.sh does this between PostgreSQL major versions.
cmd_pg_wipe() {
    pg_paths
    cmd_pg_stop || cmd_pg_kill || true
    if [ -d "$PGDATA_DIR" ]; then
        rm -rf "$PGDATA_DIR"
        log "pg-wipe: deleted $PGDATA_DIR"
    fi
}

# clean: stop everything, then delete the run dir (and the cluster's dir
# when it had to live outside it): the next start formats and initdbs anew.
cmd_clean() {
    [ -e "$KS_RUN/.ks_run" ] || die "clean: $KS_RUN was not made by the harness; not deleting it"
    cmd_stop_all || true
    if [ -s "$KS_RUN/pgroot" ]; then
        local root; root="$(cat "$KS_RUN/pgroot")"
        case "$root" in
            /var/tmp/kafka_sink-pg.*) rm -rf "$root" ;;
        esac
    fi
    find "$KS_RUN" -mindepth 1 -maxdepth 1 ! -name .ks_run -exec rm -rf {} +
    log "clean: emptied $KS_RUN"
}

usage() {
    sed -n '2,/^set -euo/p' "$HARNESS" | sed '$d' | sed 's/^# \{0,1\}//'
    exit "${1:-0}"
}

main() {
    [ $# -ge 1 ] || usage 1
    local sub="$1"; shift
    case "$sub" in
        deps)                 cmd_deps "$@" ;;
        kafka-fetch)          cmd_kafka_fetch "$@" ;;
        kafka-start)          cmd_kafka_start "$@" ;;
        kafka-stop)           cmd_kafka_stop "$@" ;;
        kafka-kill)           cmd_kafka_kill "$@" ;;
        kafka-pause)          cmd_kafka_pause "$@" ;;
        kafka-resume)         cmd_kafka_resume "$@" ;;
        topic-create)         cmd_topic_create "$@" ;;
        topic-add-partitions) cmd_topic_add_partitions "$@" ;;
        topic-delete)         cmd_topic_delete "$@" ;;
        topic-offsets)        cmd_topic_offsets "$@" ;;
        topic-start-offsets)  cmd_topic_start_offsets "$@" ;;
        delete-records)       cmd_delete_records "$@" ;;
        consumer-groups)      cmd_consumer_groups "$@" ;;
        pg-start)             cmd_pg_start "$@" ;;
        pg-stop)              cmd_pg_stop "$@" ;;
        pg-kill)              cmd_pg_kill "$@" ;;
        env)                  cmd_env "$@" ;;
        status)               cmd_status "$@" ;;
        stop-all)             cmd_stop_all "$@" ;;
        clean)                cmd_clean "$@" ;;
        pg-wipe)              cmd_pg_wipe "$@" ;;
        free-port)            free_port "$@" ;;
        cluster-id)           cluster_id ;;
        -h|--help|help)       usage 0 ;;
        *)                    echo "unknown subcommand: $sub" >&2; usage 1 ;;
    esac
}

main "$@"
