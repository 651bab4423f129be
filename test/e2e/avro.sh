#!/usr/bin/env bash
# avro: Avro and JSON Schema messages through a Confluent-compatible schema
# registry (test/tools/schema_registry.py, proven first with confluent-kafka's
# own client), test data produced with confluent-kafka's serializers.
#  - every Avro type, values and keys, lands exactly as its JSON twin;
#  - three writer schemas on one topic land right, message by message; a
#    NOT NULL column no schema fills is missing_required_field;
#  - each bad frame kind is quarantined with its reason (not_wire_format,
#    unknown_schema_id, invalid_avro) and replays once the cause is fixed;
#  - plain Avro with an inline value_schema; json_schema;
#  - message_fate/message_fates on an Avro pipeline with lineage columns
#    and a bronze table answer (no key decoding in SQL);
#  - a registry outage mid-stream: nothing lost or quarantined, status says
#    so, the rows land when it is back; a restart decodes from the catalog;
#  - the registry password is masked in the views, invisible to other
#    roles, and in no log line or error.
. "$(dirname "$0")/../lib/common.sh"
setup_owner
PY_HOME="${KS_AVRO_VENV:-$KS_RUN/venv}"
if [ ! -x "$PY_HOME/bin/python" ] || ! "$PY_HOME/bin/python" -c 'import confluent_kafka.schema_registry.avro, jsonschema, fastavro' 2>/dev/null; then
    echo "# venv $PY_HOME: confluent-kafka[avro,json,schemaregistry] from PyPI"
    python3 -m venv "$PY_HOME"
    "$PY_HOME/bin/pip" install -q --disable-pip-version-check 'confluent-kafka[avro,json,schemaregistry]' >/dev/null
fi
PY="$PY_HOME/bin/python"
PRODUCE="$PY $E2E_DIR/avro_produce.py"

# ---- the registry ---------------------------------------------------------------------
PW="reg-pw-$SFX"
USERINFO="ks:$PW"
REGDIR="$KS_RUN/registry_$SFX"
mkdir -p "$REGDIR"
python3 "$REPO/test/tools/schema_registry.py" --port 0 --port-file "$REGDIR/port" \
    --state "$REGDIR/state.json" --user "$USERINFO" > "$REGDIR/log" 2>&1 &
REG_PID=$!
stop_registry() { stop_process "$REG_PID"; wait "$REG_PID" 2>/dev/null; }
at_exit stop_registry
for _ in $(seq 50); do [ -s "$REGDIR/port" ] && break; sleep 0.1; done
REG="http://127.0.0.1:$(cat "$REGDIR/port")"
registry_mode() { curl -s -XPOST -d "{\"mode\": \"$1\"}" "$REG/_control" >/dev/null; }
registry_requests() { curl -s "$REG/_control" | python3 -c 'import json,sys; print(json.load(sys.stdin)["requests"])'; }

check "confluent-kafka's client registers and fetches through the test registry" 0 \
      "$("$PY" "$REPO/test/tools/registry_check.py" "$REG" "$USERINFO" > "$REGDIR/check.log" 2>&1; echo $?)"

S="av_$SFX"
REGJSON="jsonb_build_object('url', '$REG', 'basic.auth.user.info', '$USERINFO', 'timeout.ms', 2000)"
sql >/dev/null <<SQL
CREATE SCHEMA $S AUTHORIZATION ks_e2e;
SET ROLE ks_e2e;
CREATE TYPE $S.color AS ENUM ('RED', 'GREEN', 'BLUE');
CREATE TABLE $S.avro_t (id bigint PRIMARY KEY, b boolean, i int, l bigint, f real, d double precision,
    s text, opt text, "by" bytea, e text, e2 $S.color, fx bytea, arr int[], sarr text[], m jsonb, rec jsonb,
    inner_a int, dec numeric(10,2), decf numeric(12,3), dt date, tm time, tmu time, ts timestamptz,
    tsu timestamptz, lts timestamp, u uuid);
CREATE TABLE $S.json_t (LIKE $S.avro_t INCLUDING ALL);
CREATE TABLE $S.items (id bigint PRIMARY KEY, name text NOT NULL DEFAULT 'unnamed', qty bigint NOT NULL, note text);
CREATE TABLE $S.plain (id bigint PRIMARY KEY, name text, qty bigint);
CREATE TABLE $S.js (id bigint PRIMARY KEY, name text);
CREATE TABLE $S.outage (id bigint PRIMARY KEY, name text, qty bigint);
SQL

topic() { "$HARNESS" topic-create "$1" "${2:-1}" >/dev/null 2>&1; }
T_AVRO="e2e_avro_types_$SFX"; T_JSON="e2e_avro_twins_$SFX"; T_VER="e2e_avro_versions_$SFX"
T_PLAIN="e2e_avro_plain_$SFX"; T_JS="e2e_avro_js_$SFX"; T_OUT="e2e_avro_outage_$SFX"
for t in "$T_AVRO" "$T_JSON" "$T_VER" "$T_PLAIN" "$T_JS" "$T_OUT"; do topic "$t"; done

create() {  # NAME TOPIC TARGET EXTRA...
    sql -c "SET ROLE ks_e2e" -c "SELECT kafka_sink.create_pipeline(name => '$1', bootstrap_servers => '$KS_BOOTSTRAP',
              subscribe => ARRAY['$2'], target => '$S.$3', starting_offsets => 'earliest', trigger_interval => '50 ms',
              key_columns => ARRAY['id'] $4)" >/dev/null
}
rows() { sql -c "SELECT count(*) FROM $S.$1"; }
quarantined() { sql -c "SELECT coalesce(string_agg(reason, ',' ORDER BY message_offset), '') FROM kafka_sink.quarantine q JOIN kafka_sink.pipeline_definitions p ON p.id = q.pipeline_id WHERE p.name = '$1' AND q.replayed_at IS NULL"; }
replay() { sql -c "SET ROLE ks_e2e" -c "SELECT replayed || '/' || still_failing FROM kafka_sink.replay_quarantine('$1')"; }

# ---- every type, values and keys, against the JSON twins ------------------------------------
$PRODUCE types "$KS_BOOTSTRAP" "$REG" "$USERINFO" "$T_AVRO" "$T_JSON"
create "avro_types_$SFX" "$T_AVRO" avro_t ", key_format => 'avro', value_format => 'avro', schema_registry => $REGJSON, columns => '{\"inner_a\": \"rec.a\"}'"
create "json_twins_$SFX" "$T_JSON" json_t ", key_format => 'json', columns => '{\"inner_a\": \"rec.a\"}'"
poll "SELECT (SELECT count(*) FROM $S.avro_t) = 3 AND (SELECT count(*) FROM $S.json_t) = 3" 60 || true
check "three Avro messages of every type land" 3 "$(rows avro_t)"
check "their JSON twins land" 3 "$(rows json_t)"
check "nothing is quarantined" "" "$(quarantined "avro_types_$SFX")$(quarantined "json_twins_$SFX")"
check "each Avro row equals its JSON twin, column by column" 0 \
      "$(sql -c "SELECT count(*) FROM ((TABLE $S.avro_t EXCEPT TABLE $S.json_t) UNION ALL (TABLE $S.json_t EXCEPT TABLE $S.avro_t)) x")"
check "spot check: decimal, timestamp-micros, arrays, map, nested path, enum" \
      "-123456789.125|2024-02-29 12:34:56.123456+00|{1,2,3}|{x,NULL,\"q\\\"uo\\\\te\"}|{\"a\": 1, \"b\": -2}|5|GREEN" \
      "$(sql -c "SET TimeZone = UTC" -c "SELECT decf, tsu, arr, sarr, m, inner_a, e2 FROM $S.avro_t WHERE id = 1")"
check "the schemas fetched are in kafka_sink.schemas" t \
      "$(sql -c "SELECT count(*) >= 2 FROM kafka_sink.schemas WHERE registry = '$REG'")"

# lineage (message_fate, message_fates) on an Avro pipeline with lineage
# columns and a bronze table: Avro keys are decoded through the schemas in
# kafka_sink.schemas (lineage.c), so each fate is told (it was 'applied or
# superseded' before the CDC lineage piece)
sql -c "SET ROLE ks_e2e" -c "CREATE TABLE $S.fates (id bigint PRIMARY KEY, s text, _kafka_topic text,
          _kafka_partition int, _kafka_offset bigint, _kafka_batch_id bigint)" >/dev/null
create "avro_fates_$SFX" "$T_AVRO" fates ", key_format => 'avro', value_format => 'avro', schema_registry => $REGJSON, bronze => '$S.fates_raw'"
poll "SELECT count(*) = 3 FROM $S.fates" 60 || true
check "lineage of Avro messages: message_fates and message_fate answer for each" \
      "3|3|0" \
      "$(sql -c "SET ROLE ks_e2e" -c "SELECT count(*) || '|' || count(*) FILTER (WHERE g.fate = f.fate) || '|'
                        || count(*) FILTER (WHERE f.fate NOT IN ('applied', 'superseded', 'stale', 'overwritten'))
                 FROM kafka_sink.message_fates('avro_fates_$SFX') f,
                      LATERAL kafka_sink.message_fate('avro_fates_$SFX', f.topic, f.partition, f.\"offset\") g")"

# ---- three writer schemas on one topic ---------------------------------------------------------
$PRODUCE versions "$KS_BOOTSTRAP" "$REG" "$USERINFO" "$T_VER"
create "avro_versions_$SFX" "$T_VER" items ", value_format => 'avro', schema_registry => $REGJSON"
poll "SELECT count(*) = 9 FROM $S.items" 60 || true
check "messages of three writer schemas land message by message" \
      "1|n1|1||4|n4|1099511627780|v2|7|unnamed|7|" \
      "$(sql -c "SELECT string_agg(concat_ws('|', id, name, qty, coalesce(note, '')), '|' ORDER BY id) FROM $S.items WHERE id IN (1, 4, 7)")"
check "a schema without the NOT NULL column is missing_required_field" missing_required_field \
      "$(quarantined "avro_versions_$SFX")"

# ---- bad frames, quarantined and replayed after the fix -------------------------------------------
NEXT_ID=$(( $(python3 -c "import json; print(len(json.load(open('$REGDIR/state.json'))['schemas']))") + 1 ))
V5='{"type":"record","name":"Item5","namespace":"ks.e2e","fields":[{"name":"id","type":"long"},{"name":"qty","type":"long"},{"name":"name","type":"string"}]}'
V1='{"type":"record","name":"Item","namespace":"ks.e2e","fields":[{"name":"id","type":"long"},{"name":"name","type":"string"},{"name":"qty","type":"int"}]}'
V1_ID=$($PRODUCE register "$REG" "$USERINFO" "$T_VER-value" "$V1")
$PRODUCE raw "$KS_BOOTSTRAP" "$T_VER" "0100000001020304"                         # magic byte 1
$PRODUCE raw "$KS_BOOTSTRAP" "$T_VER" "0000"                                     # too short
$PRODUCE frame "$KS_BOOTSTRAP" "$T_VER" "$NEXT_ID" "$V5" '{"id": 20, "qty": 5, "name": "later"}'   # unknown id
$PRODUCE frame "$KS_BOOTSTRAP" "$T_VER" "$V1_ID" "$V1" '{"id": 21, "name": "cut", "qty": 1}' 1       # truncated
poll "SELECT count(*) = 5 FROM kafka_sink.quarantine q JOIN kafka_sink.pipeline_definitions p ON p.id = q.pipeline_id WHERE p.name = 'avro_versions_$SFX'" 60 || true
check "each bad frame kind is quarantined with its reason" \
      "missing_required_field,not_wire_format,not_wire_format,unknown_schema_id,invalid_avro" \
      "$(quarantined "avro_versions_$SFX")"
check "the quarantine keeps the raw bytes and so the schema id" "$NEXT_ID" \
      "$(sql -c "SELECT kafka_sink.wire_schema_id(value) FROM kafka_sink.quarantine WHERE reason = 'unknown_schema_id' AND topic = '$T_VER'")"
check "the unknown id is registered later (it gets id $NEXT_ID)" "$NEXT_ID" \
      "$($PRODUCE register "$REG" "$USERINFO" "$T_VER-value" "$V5")"
check "replay_quarantine: the message with the now registered id applies" "1/4" "$(replay "avro_versions_$SFX")"
check "its row is there" "later|5" "$(sql -c "SELECT name || '|' || qty FROM $S.items WHERE id = 20")"

# plain Avro (no frame) under a registry pipeline is not_wire_format; with
# an inline value_schema it decodes; a value written with another schema is
# invalid_avro until value_schema says so
create "avro_plain_$SFX" "$T_PLAIN" plain ", value_format => 'avro', schema_registry => $REGJSON"
$PRODUCE frame "$KS_BOOTSTRAP" "$T_PLAIN" -1 "$V1" '{"id": 1, "name": "plain", "qty": 3}'
poll "SELECT EXISTS (SELECT FROM kafka_sink.quarantine WHERE topic = '$T_PLAIN')" 60 || true
check "plain Avro under a registry pipeline is not_wire_format" not_wire_format "$(quarantined "avro_plain_$SFX")"
sql -c "SET ROLE ks_e2e" -c "SELECT kafka_sink.alter_pipeline('avro_plain_$SFX', value_schema => '$V1', schema_registry => 'null')" >/dev/null
check "after alter_pipeline(value_schema) it replays" "1/0" "$(replay "avro_plain_$SFX")"
$PRODUCE frame "$KS_BOOTSTRAP" "$T_PLAIN" -1 "$V5" '{"id": 2, "qty": 7, "name": "v5"}'
poll "SELECT EXISTS (SELECT FROM kafka_sink.quarantine WHERE topic = '$T_PLAIN' AND replayed_at IS NULL)" 60 || true
check "a value written with another schema is invalid_avro" invalid_avro "$(quarantined "avro_plain_$SFX")"
sql -c "SET ROLE ks_e2e" -c "SELECT kafka_sink.alter_pipeline('avro_plain_$SFX', value_schema => '$V5')" >/dev/null
check "after alter_pipeline(value_schema) it replays too" "1/0" "$(replay "avro_plain_$SFX")"
check "plain Avro rows" "1|plain|3,2|v5|7" "$(sql -c "SELECT string_agg(concat_ws('|', id, name, qty), ',' ORDER BY id) FROM $S.plain")"

# ---- json_schema -------------------------------------------------------------------------------------
$PRODUCE json_schema "$KS_BOOTSTRAP" "$REG" "$USERINFO" "$T_JS"
create "avro_js_$SFX" "$T_JS" js ", value_format => 'json_schema', schema_registry => $REGJSON"
poll "SELECT count(*) = 2 FROM $S.js" 60 || true
check "json_schema: JSONSerializer frames land" "1|js1,2|js2" "$(sql -c "SELECT string_agg(id || '|' || name, ',' ORDER BY id) FROM $S.js")"

# ---- a registry outage mid-stream ---------------------------------------------------------------------
V6='{"type":"record","name":"Item6","namespace":"ks.e2e","fields":[{"name":"id","type":"long"},{"name":"name","type":"string"}]}'
V6_ID=$($PRODUCE register "$REG" "$USERINFO" "$T_OUT-value" "$V6")
create "avro_outage_$SFX" "$T_OUT" outage ", value_format => 'avro', schema_registry => $REGJSON"
for i in 1 2 3; do $PRODUCE frame "$KS_BOOTSTRAP" "$T_OUT" "$V1_ID" "$V1" "{\"id\": $i, \"name\": \"before\", \"qty\": $i}"; done
poll "SELECT count(*) = 3 FROM $S.outage" 60 || true
check "before the outage: rows land" 3 "$(rows outage)"
registry_mode error
for i in 4 5 6; do $PRODUCE frame "$KS_BOOTSTRAP" "$T_OUT" "$V6_ID" "$V6" "{\"id\": $i, \"name\": \"during\"}"; done
poll "SELECT last_error LIKE 'schema registry unavailable%' FROM kafka_sink.status WHERE name = 'avro_outage_$SFX'" 60 || true
check "status shows the outage" t \
      "$(sql -c "SELECT last_error LIKE 'schema registry unavailable%' FROM kafka_sink.status WHERE name = 'avro_outage_$SFX'")"
check "the error is recorded as transient" t \
      "$(sql -c "SELECT bool_and(kind = 'transient') FROM kafka_sink.errors e JOIN kafka_sink.pipeline_definitions p ON p.id = e.pipeline_id WHERE p.name = 'avro_outage_$SFX'")"
check "the pipeline keeps running" running "$(sql -c "SELECT state FROM kafka_sink.pipelines WHERE name = 'avro_outage_$SFX'")"
check "nothing applied past the outage, nothing quarantined" "3|" "$(rows outage)|$(quarantined "avro_outage_$SFX")"
registry_mode ok
poll "SELECT count(*) = 6 FROM $S.outage" 90 || true
check "after the outage every message lands" "6|" "$(rows outage)|$(quarantined "avro_outage_$SFX")"

# a restart with the registry down decodes from the catalog
registry_mode error
sql -c "SET ROLE ks_e2e" -c "SELECT kafka_sink.stop('avro_outage_$SFX')" -c "SELECT kafka_sink.start('avro_outage_$SFX')" >/dev/null
before=$(registry_requests)
for i in 7 8; do $PRODUCE frame "$KS_BOOTSTRAP" "$T_OUT" "$V6_ID" "$V6" "{\"id\": $i, \"name\": \"after restart\"}"; done
poll "SELECT count(*) = 8 FROM $S.outage" 60 || true
check "a restarted worker decodes known ids from the catalog, registry down" "8|" "$(rows outage)|$(quarantined "avro_outage_$SFX")"
check "... without calling the registry" "$before" "$(registry_requests)"
registry_mode ok

# a schema id new to the worker is fetched before the batch's transaction
# opens: with the registry hanging, the worker waits on it (timeout.ms 2000)
# with no transaction open (STYLE: no transaction across a network wait)
V7='{"type":"record","name":"Item7","namespace":"ks.e2e","fields":[{"name":"id","type":"long"},{"name":"name","type":"string"}]}'
V7_ID=$($PRODUCE register "$REG" "$USERINFO" "$T_OUT-hang-value" "$V7")
registry_mode hang
before=$(registry_requests)
$PRODUCE frame "$KS_BOOTSTRAP" "$T_OUT" "$V7_ID" "$V7" '{"id": 9, "name": "new id, registry hanging"}'
in_xact=0
for i in $(seq 1 40); do
    n=$(sql -c "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'kafka_sink: avro_outage_$SFX' AND now() - xact_start > interval '500 ms'")
    in_xact=$((in_xact + n))
    sleep 0.2
done
check "the new id was asked for while the registry hung" t "$([ "$(registry_requests)" -gt "$before" ] && echo t || echo f)"
check "no transaction stays open while the registry hangs" 0 "$in_xact"
check "nothing applied or quarantined meanwhile" "8|" "$(rows outage)|$(quarantined "avro_outage_$SFX")"
registry_mode ok
poll "SELECT count(*) = 9 FROM $S.outage" 90 || true
check "after the hang the message with the new id lands" "9|" "$(rows outage)|$(quarantined "avro_outage_$SFX")"

# ---- the registry password ----------------------------------------------------------------------------
check "the pipelines view masks the registry password" "********|$REG" \
      "$(sql -c "SET ROLE ks_e2e" -c "SELECT schema_registry->>'basic.auth.user.info' || '|' || (schema_registry->>'url') FROM kafka_sink.pipelines WHERE name = 'avro_types_$SFX'")"
check "kafka_options does not carry it" f \
      "$(sql -c "SET ROLE ks_e2e" -c "SELECT kafka_options::text LIKE '%schema_registry%' FROM kafka_sink.pipelines WHERE name = 'avro_types_$SFX'")"
sql >/dev/null <<SQL
DO \$\$ BEGIN
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'ks_e2e_other') THEN CREATE ROLE ks_e2e_other LOGIN; END IF;
END \$\$;
GRANT kafka_sink_admin TO ks_e2e_other;
SQL
check "another role sees neither the pipeline, the secret nor the schemas" "0|0|0" \
      "$(sql -c "SET ROLE ks_e2e_other" -c "SELECT (SELECT count(*) FROM kafka_sink.pipelines WHERE name LIKE 'avro%$SFX') || '|' || (SELECT count(*) FROM kafka_sink.secrets) || '|' || (SELECT count(*) FROM kafka_sink.schemas WHERE registry = '$REG')")"
check "the password is in no error" 0 \
      "$(sql -c "SELECT count(*) FROM kafka_sink.errors WHERE concat(message, detail) LIKE '%$PW%'")"
check "the password is in no log line" 0 "$(lines_with "$KS_RUN/logs/postgresql.log" "$PW")"
check "a URL with a password in it is refused" 22023 \
      "$(sql -c "SET ROLE ks_e2e" -c "DO \$\$ BEGIN PERFORM kafka_sink.alter_pipeline('avro_types_$SFX', schema_registry => '{\"url\": \"http://u:p@127.0.0.1:1\"}'); EXCEPTION WHEN OTHERS THEN RAISE NOTICE '%', SQLSTATE; END \$\$" 2>&1 | sed -n 's/.*NOTICE:  //p')"

for n in avro_types json_twins avro_fates avro_versions avro_plain avro_js avro_outage; do
    sql -c "SET ROLE ks_e2e" -c "SELECT kafka_sink.drop_pipeline('${n}_$SFX')" >/dev/null
done
finish
