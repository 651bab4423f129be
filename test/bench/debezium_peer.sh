#!/usr/bin/env bash
# test/bench/debezium_peer.sh — benchmark peer: Kafka Connect (standalone,
# Apache Kafka's own connect-runtime from $KS_KAFKA_CP) + the Debezium JDBC
# sink connector, upserting the benchmark's order events into PostgreSQL.
#
#   debezium_peer.sh BOOTSTRAP TOPIC EVENTS_TSV N TARGET_TABLE OUT_JSON
#
#   BOOTSTRAP     the broker (KS_BOOTSTRAP)
#   TOPIC         the schema-embedded topic to use: created with 4 partitions
#                 and filled from EVENTS_TSV if it does not hold N messages
#                 (reused as is if it does), e.g. "$TOPIC.connect"
#   EVENTS_TSV    gen_events.py's KAFKA_OUT ("order_id<TAB>json" lines)
#   N             number of events (= lines of EVENTS_TSV)
#   TARGET_TABLE  dropped and created as (order_id bigint primary key,
#                 event_ts timestamptz not null, amount numeric(18,2),
#                 schema_version int); left in place afterwards
#   OUT_JSON      the summary (also printed on stdout):
#     {"seconds", "msgs_per_s"            connector start (JVM launch) until the
#                                         sink's group has committed every offset
#      "startup_seconds"                  JVM launch until the task had its partitions
#      "seconds_after_start", "msgs_per_s_after_start"   the rest
#      "rows", "rows_differing_from_rule" vs greatest event_ts per order_id,
#                                         ties to the later offset
#      "rows_differing_from_last_offset"  vs the last event per order_id
#      "message_bytes", "cpu_s", "rss_kb", "connector", "t0"}
#
# PostgreSQL from the libpq environment (PGHOST, PGPORT, PGUSER, PGDATABASE;
# the JDBC URL is built from them; trust auth assumed, password PGPASSWORD or
# a dummy).  Also needs: KS_KAFKA_CP (test/harness.sh env), KS_HARNESS (for
# topic-create / topic-offsets), kcat, java 17, mvn, and a Python with
# confluent_kafka and psycopg (PY, default $KS_RUN/venv/bin/python).
#
# The events are produced with a Connect schema (JsonConverter,
# schemas.enable=true): value {"schema": struct{order_id int64, event_ts
# string, amount string, schema_version int32}, "payload": <the event>},
# key {"schema": int64, "payload": order_id}; ~4x the plain message size.
# event_ts and amount stay strings: the JDBC URL has stringtype=unspecified,
# so pgjdbc sends them untyped and PostgreSQL casts them to timestamptz and
# numeric (no SMT).  Sink: insert.mode=upsert, primary.key.mode=record_value,
# primary.key.fields=order_id, batch.size=DBZ_BATCH, consumer
# max.poll.records=DBZ_BATCH, offset.flush.interval.ms=1000 (Connect commits
# sink offsets only on that interval: the end is seen up to 1 s late).
# Debezium's upsert has no ordering guard: the last record per key wins, so
# rows_differing_from_rule is expected to be > 0 (stale events overwrite).
#
#   debezium_peer.sh cdc BOOTSTRAP TOPICS_REGEX N TABLE_FORMAT OUT_JSON
#
# The CDC mode (the bench's CDC rows, test/bench/cdc_part.sh): the same sink
# consumes Debezium change topics natively (no SMT on the value) from
# TOPICS_REGEX (N messages in all, tombstones included); a RegexRouter
# keeps the last part of PREFIX.SCHEMA.TABLE, so ${topic} in TABLE_FORMAT
# is the source table (e.g. "cdc_dbz_${topic}": tables in the connection's
# default schema, created by the caller: schema.evolution=none);
# insert.mode=upsert, delete.enabled=true, truncate.enabled=true,
# primary.key.mode=record_key.  OUT_JSON: {"seconds", "msgs_per_s",
# "startup_seconds", "cpu_s", "rss_kb", "message_bytes", "connector", "t0",
# "progress"}; the caller compares the tables with the source
# (test/tools/cdc_compare.py).
#
# Knobs: DBZ_VERSION (3.5.0.Final: 3.6.x's connector jar is not served
# here), PGJDBC_VERSION (42.7.8), DBZ_HEAP (512m), DBZ_BATCH (50000),
# DBZ_REDUCTION (1: use.reduction.buffer=true and reWriteBatchedInserts=true;
# 0: the connector's defaults), DBZ_WORK (${KS_RUN}/debezium: plugin dir,
# worker files, connect.log), DBZ_TIMEOUT (600 s), DBZ_PROGRESS (a file:
# "unix_time committed" lines, the committed-offset samples, as
# py_consumer.py's PROGRESS_OUT), DBZ_PREPARE_ONLY (1: fetch the jars and
# fill the topic, then exit; OUT_JSON untouched: lets the caller keep that
# work out of its own measurements).  Exits non-zero on any failure.
# Jars are fetched once with mvn (cached in ~/.m2 and DBZ_WORK/plugins).
set -euo pipefail

usage() { sed -n '2,/^set -euo/p' "$0" | sed 's/^# \{0,1\}//' | head -n -1 >&2; exit 2; }
MODE=orders
[ $# -eq 6 ] || usage
if [ "$1" = cdc ]; then
    MODE=cdc; BOOTSTRAP="$2"; TOPICS_REGEX="$3"; N="$4"; TABLE_FORMAT="$5"; OUT="$6"
else
    BOOTSTRAP="$1"; TOPIC="$2"; EVENTS="$3"; N="$4"; TARGET="$5"; OUT="$6"
fi

DBZ_VERSION="${DBZ_VERSION:-3.5.0.Final}"
PGJDBC_VERSION="${PGJDBC_VERSION:-42.7.8}"
DBZ_HEAP="${DBZ_HEAP:-512m}"
DBZ_BATCH="${DBZ_BATCH:-50000}"
DBZ_REDUCTION="${DBZ_REDUCTION:-1}"
DBZ_TIMEOUT="${DBZ_TIMEOUT:-600}"
DBZ_WORK="${DBZ_WORK:-${KS_RUN:?set KS_RUN or DBZ_WORK}/debezium}"
PY="${PY:-${KS_RUN:-/nonexistent}/venv/bin/python}"
: "${KS_KAFKA_CP:?KS_KAFKA_CP (test/harness.sh env) is needed}"
: "${KS_HARNESS:?KS_HARNESS (test/harness.sh env) is needed}"
: "${PGHOST:?}" "${PGPORT:?}" "${PGUSER:?}" "${PGDATABASE:?}"
"$PY" -c 'import confluent_kafka, psycopg' || { echo "debezium_peer: $PY lacks confluent_kafka/psycopg" >&2; exit 1; }

say() { printf '[debezium_peer %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
mkdir -p "$DBZ_WORK"
W="$(cd "$DBZ_WORK" && pwd)"

# ------------------------------------------------------------- jars
PLUGIN_PATH="$W/plugins/$DBZ_VERSION"       # Connect: one subdirectory per plugin
PLUGIN="$PLUGIN_PATH/debezium-connector-jdbc"
if [ ! -f "$PLUGIN/.ok" ]; then
    say "fetching io.debezium:debezium-connector-jdbc:$DBZ_VERSION + org.postgresql:postgresql:$PGJDBC_VERSION (mvn)"
    rm -rf "$PLUGIN" "$W/fetch"; mkdir -p "$W/fetch"
    cat > "$W/fetch/pom.xml" <<EOF
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>local.kafka_sink.bench</groupId><artifactId>debezium-jdbc-fetch</artifactId><version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency>
      <groupId>io.debezium</groupId><artifactId>debezium-connector-jdbc</artifactId><version>$DBZ_VERSION</version>
      <!-- Kafka's own jars come from the worker (Apache Kafka on KS_KAFKA_CP) -->
      <exclusions><exclusion><groupId>org.apache.kafka</groupId><artifactId>*</artifactId></exclusion></exclusions>
    </dependency>
    <dependency><groupId>org.postgresql</groupId><artifactId>postgresql</artifactId><version>$PGJDBC_VERSION</version></dependency>
  </dependencies>
</project>
EOF
    mvn -B -q -f "$W/fetch/pom.xml" dependency:copy-dependencies \
        -DoutputDirectory="$PLUGIN" -DincludeScope=runtime > "$W/fetch/mvn.log" 2>&1 \
        || { cat "$W/fetch/mvn.log" >&2; exit 1; }
    # jackson-databind/core/annotations and slf4j-api are on the worker's
    # classpath too (same versions): a second copy in the plugin's isolated
    # class loader breaks Hibernate's Jackson module lookup ("Jdk8Module not
    # a subtype"), so the worker's are used.
    rm -f "$PLUGIN"/jackson-databind-*.jar "$PLUGIN"/jackson-core-*.jar \
          "$PLUGIN"/jackson-annotations-*.jar "$PLUGIN"/slf4j-api-*.jar
    touch "$PLUGIN/.ok"
fi

# ------------------------------------------------------------- CDC mode
cdc_mode() {
    local R="$W/run-cdc" NAME url REST_PORT T0 CPU RSS MSG_BYTES=0 t
    NAME="bench-dbz-cdc-$(date +%s%N)"          # the sink's consumer group: connect-$NAME
    rm -rf "$R"; mkdir -p "$R"
    REST_PORT="$("$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
    printf '%s\n' "status = warn" "appender.file.type = File" "appender.file.name = F" \
        "appender.file.fileName = $R/connect.log" "appender.file.layout.type = PatternLayout" \
        "appender.file.layout.pattern = %d{UNIX_MILLIS} %p %m (%c)%n" "rootLogger.level = INFO" \
        "rootLogger.appenderRef.f.ref = F" > "$R/log4j2.properties"
    printf '%s\n' "bootstrap.servers=$BOOTSTRAP" \
        "key.converter=org.apache.kafka.connect.json.JsonConverter" \
        "value.converter=org.apache.kafka.connect.json.JsonConverter" \
        "key.converter.schemas.enable=true" "value.converter.schemas.enable=true" \
        "offset.storage.file.filename=$R/connect.offsets" "offset.flush.interval.ms=1000" \
        "plugin.path=$PLUGIN_PATH" "plugin.discovery=service_load" \
        "listeners=http://127.0.0.1:$REST_PORT" "consumer.max.poll.records=$DBZ_BATCH" \
        "consumer.auto.offset.reset=earliest" > "$R/worker.properties"
    url="jdbc:postgresql://$PGHOST:$PGPORT/$PGDATABASE?stringtype=unspecified&ApplicationName=debezium_peer"
    [ "$DBZ_REDUCTION" = 1 ] && url="$url&reWriteBatchedInserts=true"
    printf '%s\n' "name=$NAME" "connector.class=io.debezium.connector.jdbc.JdbcSinkConnector" "tasks.max=1" \
        "topics.regex=$TOPICS_REGEX" "connection.url=$url" "connection.username=$PGUSER" \
        "connection.password=${PGPASSWORD:-unused}" "insert.mode=upsert" "delete.enabled=true" \
        "truncate.enabled=true" "primary.key.mode=record_key" "schema.evolution=none" \
        "collection.name.format=$TABLE_FORMAT" "batch.size=$DBZ_BATCH" \
        "use.reduction.buffer=$([ "$DBZ_REDUCTION" = 1 ] && echo true || echo false)" \
        "transforms=route" "transforms.route.type=org.apache.kafka.connect.transforms.RegexRouter" \
        'transforms.route.regex=.*[.]([^.]+)' 'transforms.route.replacement=$1' > "$R/sink.properties"
    JP=""      # global: the EXIT trap reads it
    trap '[ -z "$JP" ] || kill "$JP" 2>/dev/null; true' EXIT
    say "Kafka Connect standalone + Debezium JDBC sink $DBZ_VERSION on /$TOPICS_REGEX/ -> $TABLE_FORMAT"
    T0="$(date +%s.%N)"
    java -Xmx"$DBZ_HEAP" -Dlog4j2.configurationFile="$R/log4j2.properties" -cp "$KS_KAFKA_CP" \
         org.apache.kafka.connect.cli.ConnectStandalone "$R/worker.properties" "$R/sink.properties" \
         > "$R/stdout.log" 2>&1 &
    JP=$!
    # wait: the group connect-$NAME has committed every matching topic's end
    "$PY" "$(dirname "$0")/cdc_watch.py" "$BOOTSTRAP" "connect-$NAME" "$TOPICS_REGEX" "$DBZ_TIMEOUT" "$JP" \
          "$R/watch.json" "$N"
    CPU="$(awk -v t="$(getconf CLK_TCK)" '{sub(/^.*\) /, ""); printf "%.2f", ($12 + $13) / t}' "/proc/$JP/stat")"
    RSS="$(awk '/^VmHWM/ {print $2}' "/proc/$JP/status")"
    if grep -q ' ERROR ' "$R/connect.log"; then
        say "errors in $R/connect.log:"; grep ' ERROR ' "$R/connect.log" | head -5 >&2
    fi
    kill "$JP" 2>/dev/null || true; wait "$JP" 2>/dev/null || true; JP=""
    t="$(kcat -b "$BOOTSTRAP" -L 2>/dev/null | sed -n 's/^ *topic "\([^"]*\)" with.*/\1/p' | grep -E "^($TOPICS_REGEX)\$" | head -n 1 || true)"
    [ -z "$t" ] || MSG_BYTES="$(kcat -C -b "$BOOTSTRAP" -t "$t" -p 0 -o beginning -c 1000 -e -q -f '%S\n' 2>/dev/null \
                                | awk '{s += $1} END {printf "%.0f", NR ? s / NR : 0}')"
    "$PY" "$(dirname "$0")/cdc_watch.py" --summary "$R/watch.json" "$R/connect.log" "$T0" "$N" "$CPU" "$RSS" \
          "${MSG_BYTES:-0}" "$DBZ_VERSION" > "$OUT"
    cat "$OUT"
}
if [ "$MODE" = cdc ]; then
    if [ "${DBZ_PREPARE_ONLY:-0}" = 1 ]; then say "prepared: jars in $PLUGIN"; exit 0; fi
    cdc_mode
    exit 0
fi

# ------------------------------------------------------------- topic
topic_total() { bash "$KS_HARNESS" topic-offsets "$1" 2>/dev/null | awk '{s += $2} END {print s + 0}'; }
have="$(kcat -b "$BOOTSTRAP" -L -m 5 2>/dev/null | grep -cF "topic \"$TOPIC\" with" || true)"
if [ "$have" != 0 ] && [ "$(topic_total "$TOPIC")" != "$N" ]; then
    say "topic $TOPIC is incomplete: recreating it"
    bash "$KS_HARNESS" topic-delete "$TOPIC" >&2; have=0; sleep 2
fi
if [ "$have" = 0 ]; then
    for i in $(seq 1 30); do
        bash "$KS_HARNESS" topic-create "$TOPIC" 4 > /dev/null 2>&1 && break
        [ "$i" -lt 30 ] || { say "could not create topic $TOPIC"; exit 1; }
        sleep 1
    done
    say "producing $N schema-embedded JSON events to $TOPIC"
    S='{"type":"struct","name":"bench.order","optional":false,"fields":[{"field":"order_id","type":"int64","optional":false},{"field":"event_ts","type":"string","optional":false},{"field":"amount","type":"string","optional":true},{"field":"schema_version","type":"int32","optional":true}]}'
    awk -F'\t' -v s="$S" '{printf "{\"schema\":{\"type\":\"int64\",\"optional\":false},\"payload\":%s}\t{\"schema\":%s,\"payload\":%s}\n", $1, s, $2}' "$EVENTS" \
        | kcat -P -b "$BOOTSTRAP" -t "$TOPIC" -K $'\t' \
               -X linger.ms=20 -X batch.num.messages=10000 -X queue.buffering.max.messages=1000000
fi
got="$(topic_total "$TOPIC")"
[ "$got" = "$N" ] || { say "topic $TOPIC holds $got messages, expected $N"; exit 1; }
if [ "${DBZ_PREPARE_ONLY:-0}" = 1 ]; then say "prepared: jars in $PLUGIN, topic $TOPIC ($N messages)"; exit 0; fi
MSG_BYTES="$(kcat -C -b "$BOOTSTRAP" -t "$TOPIC" -p 0 -o beginning -c 1000 -e -q -f '%S\n' 2>/dev/null | awk '{s += $1} END {printf "%.0f", NR ? s / NR : 0}')"

# ------------------------------------------------------------- table, worker
psql -X -q -v ON_ERROR_STOP=1 <<SQL
SET client_min_messages = warning;
DROP TABLE IF EXISTS $TARGET;
CREATE TABLE $TARGET (order_id bigint PRIMARY KEY, event_ts timestamptz NOT NULL,
                      amount numeric(18,2), schema_version int);
SQL
psql -X -q -c CHECKPOINT > /dev/null 2>&1 || true   # needs superuser or pg_checkpoint; optional

RUNID="$(date +%s%N)"
NAME="bench-dbz-$RUNID"            # the sink's consumer group: connect-$NAME
R="$W/run"; rm -rf "$R"; mkdir -p "$R"
REST_PORT="$("$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
cat > "$R/log4j2.properties" <<EOF
status = warn
appender.file.type = File
appender.file.name = F
appender.file.fileName = $R/connect.log
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = %d{UNIX_MILLIS} %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.f.ref = F
EOF
cat > "$R/worker.properties" <<EOF
bootstrap.servers=$BOOTSTRAP
key.converter=org.apache.kafka.connect.json.JsonConverter
value.converter=org.apache.kafka.connect.json.JsonConverter
key.converter.schemas.enable=true
value.converter.schemas.enable=true
offset.storage.file.filename=$R/connect.offsets
offset.flush.interval.ms=1000
plugin.path=$PLUGIN_PATH
plugin.discovery=service_load
listeners=http://127.0.0.1:$REST_PORT
consumer.max.poll.records=$DBZ_BATCH
consumer.fetch.max.bytes=104857600
consumer.max.partition.fetch.bytes=33554432
EOF
url="jdbc:postgresql://$PGHOST:$PGPORT/$PGDATABASE?stringtype=unspecified&ApplicationName=debezium_peer"
[ "$DBZ_REDUCTION" = 1 ] && url="$url&reWriteBatchedInserts=true"
cat > "$R/sink.properties" <<EOF
name=$NAME
connector.class=io.debezium.connector.jdbc.JdbcSinkConnector
tasks.max=1
topics=$TOPIC
connection.url=$url
connection.username=$PGUSER
connection.password=${PGPASSWORD:-unused}
insert.mode=upsert
primary.key.mode=record_value
primary.key.fields=order_id
collection.name.format=$TARGET
schema.evolution=none
delete.enabled=false
batch.size=$DBZ_BATCH
use.reduction.buffer=$([ "$DBZ_REDUCTION" = 1 ] && echo true || echo false)
EOF

JP=""
cleanup() {
    if [ -n "$JP" ]; then kill "$JP" 2>/dev/null || true; wait "$JP" 2>/dev/null || true; fi
    return 0
}
trap cleanup EXIT
trap 'exit 130' INT TERM

say "Kafka Connect standalone + Debezium JDBC sink $DBZ_VERSION -> $TARGET (heap $DBZ_HEAP, batch $DBZ_BATCH, reduction $DBZ_REDUCTION)"
T0="$(date +%s.%N)"
java -Xmx"$DBZ_HEAP" -Dlog4j2.configurationFile="$R/log4j2.properties" -cp "$KS_KAFKA_CP" \
     org.apache.kafka.connect.cli.ConnectStandalone "$R/worker.properties" "$R/sink.properties" \
     > "$R/stdout.log" 2>&1 &
JP=$!

# wait: the group connect-$NAME has committed the topic's end offsets
"$PY" - "$BOOTSTRAP" "connect-$NAME" "$TOPIC" "$DBZ_TIMEOUT" "$JP" "$R/watch.json" <<'EOF'
import json, os, sys, time
from confluent_kafka import Consumer, TopicPartition
bootstrap, group, topic, timeout, jpid, out = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4]), int(sys.argv[5]), sys.argv[6]
c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
parts = [TopicPartition(topic, p) for p in c.list_topics(topic, timeout=10).topics[topic].partitions]
end = sum(c.get_watermark_offsets(tp, timeout=10)[1] for tp in parts)
t0 = time.time(); progress = []; last = -1
while True:
    got = sum(max(tp.offset, 0) for tp in c.committed(parts, timeout=10))
    if got != last:
        progress.append((round(time.time(), 3), got)); last = got
    if got >= end:
        break
    try:
        os.kill(jpid, 0)
    except OSError:
        sys.exit("debezium_peer: the Connect worker exited (%d of %d committed)" % (got, end))
    if time.time() - t0 > timeout:
        sys.exit("debezium_peer: timeout, %d of %d committed" % (got, end))
    time.sleep(0.1)
json.dump({"done_at": time.time(), "committed": got, "end": end, "progress": progress}, open(out, "w"))
c.close()
EOF
CPU="$(awk -v t="$(getconf CLK_TCK)" '{sub(/^.*\) /, ""); printf "%.2f", ($12 + $13) / t}' "/proc/$JP/stat")"
RSS="$(awk '/^VmHWM/ {print $2}' "/proc/$JP/status")"
if grep -q ' ERROR ' "$R/connect.log"; then
    say "errors in $R/connect.log:"; grep ' ERROR ' "$R/connect.log" | head -5 >&2
fi
cleanup; JP=""

# ------------------------------------------------------------- check, summary
PGAPPNAME=debezium_peer "$PY" - "$EVENTS" "$TARGET" "$R/watch.json" "$R/connect.log" "$T0" "$N" \
    "$CPU" "$RSS" "$MSG_BYTES" "$DBZ_VERSION" "$DBZ_REDUCTION" "$DBZ_BATCH" > "$OUT" <<'EOF'
import json, os, sys
import psycopg
events, target, watch, log, t0, n, cpu, rss, msg_bytes, version, reduction, batch = sys.argv[1:13]
t0, n = float(t0), int(n)
w = json.load(open(watch))
ready = None                       # the task has its partitions
for line in open(log, errors="replace"):
    if "Adding newly assigned partitions" in line:
        ready = int(line.split(" ", 1)[0]) / 1000.0
        break
rule, last = {}, {}                # order_id -> (event_ts, amount, schema_version)
best = {}
with open(events) as f:
    for line in f:
        k, js = line.rstrip("\n").split("\t", 1)
        d = json.loads(js)
        row = (d["order_id"], d["event_ts"], d.get("amount"), d.get("schema_version"))
        last[row[0]] = row
        # same fixed-width "YYYY-MM-DD HH:MM:SS.mmm+00" format: string order is time order;
        # >= : a tie goes to the later offset (later line, same key = same partition)
        if row[0] not in best or row[1] >= best[row[0]]:
            best[row[0]] = row[1]; rule[row[0]] = row
with psycopg.connect() as conn:
    cur = conn.cursor()
    diff = {}
    for name, exp in (("rule", rule), ("last", last)):
        cur.execute("CREATE TEMP TABLE exp_%s (order_id bigint, event_ts timestamptz, amount numeric(18,2), schema_version int)" % name)
        with cur.copy("COPY exp_%s FROM STDIN" % name) as cp:
            for r in exp.values():
                cp.write_row(r)
        cur.execute("SELECT count(*) FROM %s t FULL JOIN exp_%s e USING (order_id)"
                    " WHERE (t.event_ts, t.amount, t.schema_version) IS DISTINCT FROM (e.event_ts, e.amount, e.schema_version)"
                    % (target, name))
        diff[name] = cur.fetchone()[0]
    cur.execute("SELECT count(*) FROM %s" % target)
    rows = cur.fetchone()[0]
    conn.rollback()
secs = w["done_at"] - t0
out = {
    "connector": "debezium-connector-jdbc %s on Kafka Connect standalone (%s)" % (version, "use.reduction.buffer + reWriteBatchedInserts" if reduction == "1" else "defaults"),
    "batch_size": int(batch),
    "t0": round(t0, 3),
    "seconds": round(secs, 3),
    "msgs_per_s": round(n / secs, 1),
    "startup_seconds": round(ready - t0, 3) if ready else None,
    "seconds_after_start": round(w["done_at"] - ready, 3) if ready else None,
    "msgs_per_s_after_start": round(n / (w["done_at"] - ready), 1) if ready else None,
    "rows": rows,
    "rows_differing_from_rule": diff["rule"],
    "rows_differing_from_last_offset": diff["last"],
    "message_bytes": int(msg_bytes),
    "cpu_s": float(cpu),
    "rss_kb": int(rss),
    "progress": w["progress"],
}
print(json.dumps(out))
if os.environ.get("DBZ_PROGRESS"):   # "unix_time committed" lines, like py_consumer.py's PROGRESS_OUT
    with open(os.environ["DBZ_PROGRESS"], "w") as f:
        for t, c in w["progress"]:
            f.write("%.3f %d\n" % (t, c))
EOF
cat "$OUT"
