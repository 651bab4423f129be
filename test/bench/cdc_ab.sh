#!/usr/bin/env bash
# test/bench/cdc_ab.sh — an A/B of builds on routed change events (not a
# timed test): worker CPU seconds (utime + stime of the worker, from
# /proc/<pid>/stat) of one pipeline, envelope debezium, target template
# 'SCHEMA.{source.table}', over BENCH_CDC_AB_EVENTS schema-embedded change
# events (the recorded accounts fixture, ~4.8 kB each, three source
# tables; c/u/d with their tombstones and a truncate per table now and
# then), as JsonConverter wrote them and as AvroConverter would have
# (test/e2e/cdc_avro_produce.py through the test registry).
#
#   cdc_ab.sh [SO_A SO_B ...]
#
# With builds (kafka_sink.so files) each round installs each in turn into
# the harness's PostgreSQL (KS_PGBIN's lib dir), restarts the cluster and
# measures JSON then Avro: A B A B ... in the same session (the last build
# stays installed; run the harness's env, so that pg-start keeps KS_PGBIN);
# without builds, the installed build only.  A build whose catalog tables
# differ (a column's type) brings SO.sql next to it, run as superuser after
# its restart, that puts the installed catalog into its shape.  Every run's tables are compared with a model of
# the events computed here (the last image per key, deletes and truncates
# applied): a run whose rows differ fails the script.  Prints one line per
# run and the medians.  Needs a running harness (KS_KEEP_RUNNING=1 on any
# e2e run leaves one up; KS_PRIVATE_PG=1 for the build swap).
#   BENCH_CDC_AB_EVENTS (30000), BENCH_CDC_AB_ROUNDS (3), BENCH_CDC_AB_FORMATS ("json avro"),
#   BENCH_CDC_AB_BATCH (max_offsets_per_batch, 50000: one batch; smaller: the per-batch costs),
#   BENCH_CDC_AB_PERF (a directory: perf record -g of each run's worker into it)
# shellcheck source=../lib/common.sh
. "$(dirname "$0")/../lib/common.sh"
setup_owner
N="${BENCH_CDC_AB_EVENTS:-30000}"
ROUNDS="${BENCH_CDC_AB_ROUNDS:-3}"
FORMATS="${BENCH_CDC_AB_FORMATS:-json avro}"
FIX="$REPO/test/fixtures/debezium/json_schema/accounts.c.json"
# shellcheck source=ab_lib.sh
. "$(dirname "$0")/ab_lib.sh"
ab_builds "$@"

PY_HOME="${KS_AVRO_VENV:-$KS_RUN/venv}"
if [[ " $FORMATS " == *" avro "* ]] && { [ ! -x "$PY_HOME/bin/python" ] ||
       ! "$PY_HOME/bin/python" -c 'import confluent_kafka.schema_registry.avro, fastavro' 2>/dev/null; }; then
    python3 -m venv "$PY_HOME"
    "$PY_HOME/bin/pip" install -q --disable-pip-version-check 'confluent-kafka[avro,json,schemaregistry]' >/dev/null
fi
USERINFO="ks:cdcab-pw-$SFX"
REGDIR="$KS_RUN/registry_cdcab_$SFX"
mkdir -p "$REGDIR"
python3 "$REPO/test/tools/schema_registry.py" --port 0 --port-file "$REGDIR/port" \
    --state "$REGDIR/state.json" --user "$USERINFO" > "$REGDIR/log" 2>&1 &
REG_PID=$!
at_exit "stop_process $REG_PID"
for _ in $(seq 50); do [ -s "$REGDIR/port" ] && break; sleep 0.1; done
REG="http://127.0.0.1:$(cat "$REGDIR/port")"
REGJSON="jsonb_build_object('url', '$REG', 'basic.auth.user.info', '$USERINFO', 'timeout.ms', 5000)"

# the events ({"key", "value"} lines) and the model (table id name, sorted)
EV="$KS_RUN/cdcab_events_$SFX.jsonl"
MODEL="$KS_RUN/cdcab_model_$SFX.txt"
python3 - "$FIX" "$N" "$EV" "$MODEL" <<'PY'
import copy, json, random, sys
fix = json.load(open(sys.argv[1]))
n = int(sys.argv[2])
rnd = random.Random(29)
tables = ["cab_a", "cab_b", "cab_c"]
state = {t: {} for t in tables}
lsn = 1000
out = open(sys.argv[3], "w")
def emit(key, value):
    out.write(json.dumps({"key": key, "value": value}) + "\n")
i = 0
while i < n:
    t = rnd.choice(tables)
    lsn += 8
    r = rnd.random()
    v = copy.deepcopy(fix["value"])
    k = copy.deepcopy(fix["key"])
    pl = v["payload"]
    pl["source"]["table"] = t
    pl["source"]["lsn"] = lsn
    if r < 0.0005:
        pl["op"], pl["before"], pl["after"] = "t", None, None
        emit(None, v)
        state[t].clear()
        i += 1
        continue
    live = state[t]
    if r < 0.12 and live:
        id_ = rnd.choice(list(live))
        pl["op"], pl["before"], pl["after"] = "d", dict(fix["value"]["payload"]["after"], id=id_), None
        k["payload"]["id"] = id_
        emit(k, v)
        emit(k, None)
        del live[id_]
        i += 2
        continue
    if r < 0.45 and live:
        id_ = rnd.choice(list(live))
        pl["op"] = "u"
    else:
        id_ = rnd.randint(1, max(n // 6, 10))
        pl["op"] = "c" if id_ not in live else "u"
    name = "n%d@%d" % (id_, lsn)
    pl["after"] = dict(pl["after"], id=id_, name=name)
    pl["before"] = None
    k["payload"]["id"] = id_
    emit(k, v)
    live[id_] = name
    i += 1
with open(sys.argv[4], "w") as m:
    for t in tables:
        for id_ in sorted(state[t]):
            m.write("%s %d %s\n" % (t, id_, state[t][id_]))
PY
total=$(wc -l < "$EV")
for f in $FORMATS; do
    "$HARNESS" topic-create "cdcab_${f}_$SFX" 1 >/dev/null 2>&1
done
[[ " $FORMATS " != *" json "* ]] || python3 - "$EV" <<'PY' | kcat -P -b "$KS_BOOTSTRAP" -t "cdcab_json_$SFX" -K '|' -Z
import json, sys
for line in open(sys.argv[1]):
    m = json.loads(line)
    print("|".join("" if m[k] is None else json.dumps(m[k]) for k in ("key", "value")))
PY
[[ " $FORMATS " != *" avro "* ]] || "$PY_HOME/bin/python" "$E2E_DIR/cdc_avro_produce.py" "$KS_BOOTSTRAP" "$REG" "$USERINFO" "cdcab_avro_$SFX" < "$EV" >/dev/null
echo "# $total messages (change events and their tombstones), $(du -m "$EV" | cut -f1) MB as JSON"

run() {  # LABEL FORMAT -> "LABEL FORMAT cpu_s"
    local s="cab_$RUNS" name pid fmt="" got
    RUNS=$((RUNS + 1))
    name="cdcab_${2}_${RUNS}_$SFX"
    [ "$2" = avro ] && fmt=", value_format => 'avro', key_format => 'avro', schema_registry => $REGJSON"
    sql >/dev/null <<SQL
SET client_min_messages = warning;
DROP SCHEMA IF EXISTS $s CASCADE; CREATE SCHEMA $s AUTHORIZATION ks_e2e;
$(for t in cab_a cab_b cab_c; do echo "CREATE TABLE $s.$t (id integer PRIMARY KEY, name text NOT NULL, balance numeric(12,2), rate numeric,
    opened date, updated_at timestamptz, active boolean, meta jsonb, _kafka_source_position numeric);
ALTER TABLE $s.$t OWNER TO ks_e2e;"; done)
CHECKPOINT;
SET ROLE ks_e2e;
SELECT kafka_sink.create_pipeline(name => '$name', bootstrap_servers => '$KS_BOOTSTRAP',
    subscribe => ARRAY['cdcab_${2}_$SFX'], target => '$s.{source.table}', envelope => 'debezium',
    starting_offsets => 'earliest', max_offsets_per_batch => ${BENCH_CDC_AB_BATCH:-50000}$fmt);
SQL
    if [ -n "${BENCH_CDC_AB_PERF:-}" ]; then  # a profile of each run: perf.data in this dir
        for _ in $(seq 100); do pid="$(worker_pid "$name")"; [ -n "$pid" ] && break; sleep 0.1; done
        perf record -F 999 -g -p "$pid" -o "$BENCH_CDC_AB_PERF/perf-$1-$2.data" >/dev/null 2>&1 &
        PERF_PID=$!
    fi
    poll "$(checkpoint_covers_sql "$name" "$total")" 900 || { echo "$name did not catch up"; exit 1; }
    pid="$(worker_pid "$name")"
    [ -z "${PERF_PID:-}" ] || { kill -INT "$PERF_PID"; wait "$PERF_PID" 2>/dev/null || true; PERF_PID=""; }
    cpu="$(awk '{printf "%.2f", ($14 + $15) / 100}' "/proc/$pid/stat")"
    got="$(sql -c "SELECT string_agg(t || ' ' || id || ' ' || name, E'\n' ORDER BY t, id) FROM (
                    SELECT 'cab_a' t, id, name FROM $s.cab_a UNION ALL SELECT 'cab_b', id, name FROM $s.cab_b
                    UNION ALL SELECT 'cab_c', id, name FROM $s.cab_c) x")"
    sql -c "SELECT kafka_sink.drop_pipeline('$name')" >/dev/null
    sql -c "DROP SCHEMA $s CASCADE" >/dev/null
    [ "$got" = "$(cat "$MODEL")" ] || { echo "$name: the rows differ from the model"; exit 1; }
    echo "$1 $2 $cpu"
}
RUNS=0
RES="$KS_RUN/cdcab_results_$SFX.txt"
: > "$RES"
for r in $(seq "$ROUNDS"); do
    for k in "${!SOS[@]}"; do
        swap "${SOS[$k]}"
        for f in $FORMATS; do run "build$k" "$f" | tee -a "$RES"; done
    done
done
echo "# medians (worker CPU s; messages per worker CPU s)"
sort "$RES" | awk -v n="$total" '{k = $1 " " $2; v[k] = v[k] " " $3} END {for (k in v) print k, v[k]}' |
    while read -r b f vals; do
        m="$(echo "$vals" | tr ' ' '\n' | sort -n | awk '{a[NR] = $1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}')"
        echo "$b $f median $m s ($(awk -v n="$total" -v m="$m" 'BEGIN {printf "%.0f", n / m}') msgs/CPU-s) of: $vals"
    done
for f in $FORMATS; do "$HARNESS" topic-delete "cdcab_${f}_$SFX" >/dev/null 2>&1 || true; done
rm -f "$EV" "$MODEL"
