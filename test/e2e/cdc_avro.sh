#!/usr/bin/env bash
# cdc_avro: Avro-encoded Debezium change events (issues 15 and 16), as
# Confluent's AvroConverter writes them: values and keys in the Confluent
# wire format through the test registry (test/tools/schema_registry.py),
# produced by confluent-kafka's AvroSerializer with the writer schemas
# AvroConverter derives from the Connect schemas (test/e2e/cdc_avro_produce.py
# derives them from the JsonConverter events).  Every event goes to a JSON
# topic as JsonConverter wrote it and to an Avro topic; the two pipelines'
# tables must be equal, row by row, source positions included:
#  - hand-made events through the guards: c/r/u/d, tombstones, a key change
#    within and across batches, a re-sent range, a truncate and its replay,
#    an old create after a delete, bad envelopes (same reasons);
#  - the recorded Debezium fixtures (test/fixtures/debezium), every value
#    encoding (decimal precise/string/double, VariableScaleDecimal,
#    time.precision.mode adaptive/connect/micros, ZonedTimestamp, Json, Uuid,
#    dates before 1970), ops r/c/u/d, the tombstone and key changes;
#  - Avro's own bad frames: not_wire_format, unknown_schema_id;
#  - routing by {source.table} with create_targets: the tables created from
#    the Avro writer schemas equal those created from the JSON schemas; then
#    by {source.table} alone into existing tables (source.table read from
#    the Avro datum, the event translated once): the JSON rows;
#  - bytes, Connect's Time/Timestamp (Avro logical types), int16, Json, Uuid.
# (Confluent's AvroConverter is not on Maven Central: no real Connect run
# with Avro here; cdc_replica.sh covers the real connector with JSON.)
. "$(dirname "$0")/../lib/common.sh"
setup_owner
FIX="$(cd "$(dirname "$0")/../fixtures/debezium" && pwd)"
PY_HOME="${KS_AVRO_VENV:-$KS_RUN/venv}"
if [ ! -x "$PY_HOME/bin/python" ] || ! "$PY_HOME/bin/python" -c 'import confluent_kafka.schema_registry.avro, fastavro' 2>/dev/null; then
    echo "# venv $PY_HOME: confluent-kafka[avro,json,schemaregistry] from PyPI"
    python3 -m venv "$PY_HOME"
    "$PY_HOME/bin/pip" install -q --disable-pip-version-check 'confluent-kafka[avro,json,schemaregistry]' >/dev/null
fi
PY="$PY_HOME/bin/python"

# ---- the registry ---------------------------------------------------------------------
USERINFO="ks:cdc-pw-$SFX"
REGDIR="$KS_RUN/registry_cdc_$SFX"
mkdir -p "$REGDIR"
python3 "$REPO/test/tools/schema_registry.py" --port 0 --port-file "$REGDIR/port" \
    --state "$REGDIR/state.json" --user "$USERINFO" > "$REGDIR/log" 2>&1 &
REG_PID=$!
stop_registry() { stop_process "$REG_PID"; wait "$REG_PID" 2>/dev/null; }
at_exit stop_registry
for _ in $(seq 50); do [ -s "$REGDIR/port" ] && break; sleep 0.1; done
REG="http://127.0.0.1:$(cat "$REGDIR/port")"
REGJSON="jsonb_build_object('url', '$REG', 'basic.auth.user.info', '$USERINFO', 'timeout.ms', 5000)"

T="e2e_cdca_$SFX"
# twin LINES_FILE JSON_TOPIC AVRO_TOPIC: each {"key", "value"} line as JSON and as Avro
twin() {
    python3 - "$1" <<'PY' | kcat -P -b "$KS_BOOTSTRAP" -t "$2" -K '|' -Z
import json, sys
for line in open(sys.argv[1]):
    if line.strip():
        m = json.loads(line)
        print("|".join("" if m[k] is None else json.dumps(m[k]) for k in ("key", "value")))
PY
    "$PY" "$E2E_DIR/cdc_avro_produce.py" "$KS_BOOTSTRAP" "$REG" "$USERINFO" "$3" < "$1" >/dev/null
}
rows() { sql -c "SELECT coalesce(string_agg(id || ':' || name || '@' || _kafka_source_position, ' ' ORDER BY id), '-') FROM e2e.$1"; }
fates() {
    sql -c "SELECT coalesce(string_agg(q.reason || ':' || regexp_replace(q.detail, 'schema id [0-9]+', 'schema id N'), '|' ORDER BY q.message_offset), '-')
              FROM kafka_sink.quarantine q JOIN kafka_sink.pipelines p ON p.id = q.pipeline_id WHERE p.name = '$1'"
}
pipeline() {  # NAME TOPIC TABLE json|avro
    local fmt=""
    [ "$4" = avro ] && fmt=", value_format => 'avro', key_format => 'avro', schema_registry => $REGJSON"
    sql -c "SET ROLE ks_e2e; SELECT kafka_sink.create_pipeline(name => '$1', bootstrap_servers => '$KS_BOOTSTRAP',
            subscribe => ARRAY['$2'], target => '$3', starting_offsets => 'earliest', envelope => 'debezium'$fmt)" >/dev/null
}

# ---- hand-made events through the guards --------------------------------------------------
# ev OP ID LSN [NAME] ...: JsonConverter lines {"key", "value"} with their Connect schemas
ev() {
    python3 - "$@" <<'PY'
import json, sys
KEY = {"type": "struct", "name": "ks.cdc.t.Key", "optional": False,
       "fields": [{"field": "id", "type": "int32", "optional": False}]}
ROW = {"type": "struct", "name": "ks.cdc.t.Value", "optional": True,
       "fields": [{"field": "id", "type": "int32", "optional": False},
                  {"field": "name", "type": "string", "optional": True},
                  {"field": "qty", "type": "int32", "optional": True}]}
SRC = {"type": "struct", "name": "io.debezium.connector.postgresql.Source", "optional": False,
       "fields": [{"field": "connector", "type": "string", "optional": False},
                  {"field": "ts_ms", "type": "int64", "optional": False},
                  {"field": "table", "type": "string", "optional": False},
                  {"field": "lsn", "type": "int64", "optional": True}]}
ENV = {"type": "struct", "name": "ks.cdc.t.Envelope", "optional": False, "version": 2,
       "fields": [dict(ROW, field="before"), dict(ROW, field="after"), dict(SRC, field="source"),
                  {"field": "op", "type": "string", "optional": False},
                  {"field": "ts_ms", "type": "int64", "optional": True}]}
op, id_ = sys.argv[1], int(sys.argv[2])
lsn = int(sys.argv[3]) if len(sys.argv) > 3 else 0
name = sys.argv[4] if len(sys.argv) > 4 else "n%d@%d" % (id_, lsn)
key = {"schema": KEY, "payload": {"id": id_}}
src = {"connector": "postgresql", "lsn": lsn, "ts_ms": 1700000000000, "table": "t"}
v = {"before": None, "after": {"id": id_, "name": name, "qty": 5}, "source": src, "op": op, "ts_ms": None}
if op == "tomb":
    print(json.dumps({"key": key, "value": None}))
    sys.exit()
if op == "d":
    v["before"], v["after"] = {"id": id_, "name": None, "qty": 0}, None
if op == "t":
    v["after"], key = None, None
if op == "c-noafter":
    v["op"], v["after"] = "c", None
print(json.dumps({"key": key, "value": {"schema": ENV, "payload": v}}))
PY
}
sql >/dev/null <<SQL
CREATE TABLE e2e.cdca_json_$SFX (id int PRIMARY KEY, name text, qty int NOT NULL, _kafka_source_position numeric);
CREATE TABLE e2e.cdca_avro_$SFX (LIKE e2e.cdca_json_$SFX INCLUDING ALL);
ALTER TABLE e2e.cdca_json_$SFX OWNER TO ks_e2e;
ALTER TABLE e2e.cdca_avro_$SFX OWNER TO ks_e2e;
SQL
for t in "${T}_json" "${T}_avro"; do "$HARNESS" topic-create "$t" 1 >/dev/null 2>&1; done
pipeline "cdca_json_$SFX" "${T}_json" "e2e.cdca_json_$SFX" json
pipeline "cdca_avro_$SFX" "${T}_avro" "e2e.cdca_avro_$SFX" avro
check "envelope debezium takes value_format avro" avro \
      "$(sql -c "SELECT value_format FROM kafka_sink.pipelines WHERE name = 'cdca_avro_$SFX'")"

ROUND="$KS_RUN/cdca_round_$SFX"
step() {  # DESCRIPTION EXPECTED: the round in $ROUND to both, the tables equal and as expected
    twin "$ROUND" "${T}_json" "${T}_avro"
    check_caught_up "cdca_json_$SFX"; check_caught_up "cdca_avro_$SFX"
    check "json: $1" "$2" "$(rows cdca_json_$SFX)"
    check "avro: $1" "$2" "$(rows cdca_avro_$SFX)"
}
{ ev r 5 90; ev c 1 100 a; ev c 3 105; ev c 2 110; ev u 1 120 a2; ev d 2 130; ev tomb 2
  ev d 3 140; ev tomb 3; ev c 4 140; ev x 7 1; ev c-noafter 7 2; } > "$ROUND"
step "c/r/u/d in one batch, the key change 3 -> 4" "1:a2@120 4:n4@140@140 5:n5@90@90"
check "the same bad envelopes quarantined for the same reasons" "$(fates "cdca_json_$SFX")" "$(fates "cdca_avro_$SFX")"
check "... which are these" 'invalid_envelope:unknown op "x" (known: c, r, u, d, t)|invalid_envelope:the change event of op "c" has no "after" object' \
      "$(fates "cdca_avro_$SFX")"
check "deleted keys recorded with their positions (keys from the Avro key)" '["2"]:130 ["3"]:140' \
      "$(sql -c "SELECT string_agg(d.key::text || ':' || d.position, ' ' ORDER BY d.key::text) FROM kafka_sink.cdc_deletions d JOIN kafka_sink.pipelines p ON p.id = d.pipeline_id WHERE p.name = 'cdca_avro_$SFX'")"
{ ev c 1 100 a; ev c 2 110; ev c 3 105; ev u 1 120 a2; ev d 4 150; ev tomb 4; } > "$ROUND"
step "re-sent events do not regress or resurrect rows; 4 deleted" "1:a2@120 5:n5@90@90"
{ ev c 6 150; } > "$ROUND"
step "the key change across batches: 6 created" "1:a2@120 5:n5@90@90 6:n6@150@150"
{ ev u 5 250 five; ev t 0 200; ev c 8 190; } > "$ROUND"
step "the truncate removes the older rows only" "5:five@250"
{ ev c 9 300; ev t 0 200; ev c 1 120 a2; } > "$ROUND"
step "a replayed truncate removes only rows older than it" "5:five@250 9:n9@300@300"
{ ev d 9 310; ev tomb 9; } > "$ROUND"
step "delete 9" "5:five@250"
{ ev c 9 305 old; } > "$ROUND"
step "an old create after a delete does not resurrect the row" "5:five@250"

# ---- Avro's own bad frames ----------------------------------------------------------------
printf 'not avro' | kcat -P -b "$KS_BOOTSTRAP" -t "${T}_avro"
printf '\000\000\000\047\017xx' | kcat -P -b "$KS_BOOTSTRAP" -t "${T}_avro"
check_caught_up "cdca_avro_$SFX"
check "bad frames: not_wire_format, unknown_schema_id" "not_wire_format unknown_schema_id" \
      "$(sql -c "SELECT string_agg(q.reason, ' ' ORDER BY q.message_offset) FROM kafka_sink.quarantine q JOIN kafka_sink.pipelines p ON p.id = q.pipeline_id
                  WHERE p.name = 'cdca_avro_$SFX' AND q.reason IN ('not_wire_format', 'unknown_schema_id')")"

# ---- the recorded fixtures, every value encoding --------------------------------------------
sql >/dev/null <<SQL
CREATE TABLE e2e.accounts_$SFX (id integer PRIMARY KEY, name text NOT NULL, balance numeric(12,2), rate numeric,
    opened date, updated_at timestamptz, active boolean, meta jsonb, _kafka_source_position numeric);
CREATE TABLE e2e.products_$SFX (sku text PRIMARY KEY, title text, price numeric(10,3), uid uuid, created timestamp,
    open_at time, weight double precision, tags jsonb, _kafka_source_position numeric);
CREATE TABLE e2e.order_lines_$SFX (order_id bigint, line_no integer, sku text, qty integer NOT NULL,
    amount numeric(14,4), shipped_at timestamptz, ship_date date, ship_time time(3), note text,
    _kafka_source_position numeric, PRIMARY KEY (order_id, line_no));
SQL
VARIANTS="json_schema json_schema_decimal_string json_schema_decimal_double json_schema_time_connect json_schema_time_micros"
for v in $VARIANTS; do
    for tb in accounts products order_lines; do
        for f in json avro; do
            sql >/dev/null <<SQL
CREATE TABLE e2e.${tb}_${v}_${f}_$SFX (LIKE e2e.${tb}_$SFX INCLUDING ALL);
ALTER TABLE e2e.${tb}_${v}_${f}_$SFX OWNER TO ks_e2e;
SQL
            "$HARNESS" topic-create "${T}_${v}_${tb}_$f" 1 >/dev/null 2>&1
        done
        python3 - "$FIX/$v" "$tb" > "$ROUND" <<'PY'
import json, os, sys
d, tb = sys.argv[1], sys.argv[2]
for kind in ["r", "c", "u", "key_change.d", "key_change.c", "d", "tombstone"]:
    f = os.path.join(d, "%s.%s.json" % (tb, kind))
    if os.path.exists(f):
        m = json.load(open(f))
        print(json.dumps({"key": m["key"], "value": m["value"]}))
PY
        twin "$ROUND" "${T}_${v}_${tb}_json" "${T}_${v}_${tb}_avro"
        for f in json avro; do
            pipeline "enc_${v}_${tb}_${f}_$SFX" "${T}_${v}_${tb}_$f" "e2e.${tb}_${v}_${f}_$SFX" $f
        done
    done
done
for v in $VARIANTS; do for tb in accounts products order_lines; do for f in json avro; do
    check_caught_up "enc_${v}_${tb}_${f}_$SFX"
done; done; done
check "every fixture event applied, JSON and Avro" 0 \
      "$(sql -c "SELECT count(*) FROM kafka_sink.quarantine q JOIN kafka_sink.pipelines p ON p.id = q.pipeline_id WHERE p.name LIKE 'enc\_%\_$SFX'")"
for v in $VARIANTS; do
    for tb in accounts products order_lines; do
        check "$v/$tb: the Avro twin lands the same rows (positions included)" "0 t" \
              "$(sql -c "CREATE TEMP VIEW a AS SELECT to_jsonb(t) AS r FROM e2e.${tb}_${v}_json_$SFX t;
                         CREATE TEMP VIEW b AS SELECT to_jsonb(t) AS r FROM e2e.${tb}_${v}_avro_$SFX t;
                         SELECT count(*) || ' ' || CASE WHEN (SELECT count(*) FROM a) > 0 THEN 't' ELSE 'f' END
                           FROM ((TABLE a EXCEPT TABLE b) UNION ALL (TABLE b EXCEPT TABLE a)) x")"
    done
done
check "avro: the key change 1 -> 100001; precise decimal (Decimal logical type), VariableScaleDecimal, date 0" \
      "665845.61|187|1970-01-01" "$(sql -c "SELECT balance || '|' || rate || '|' || opened FROM e2e.accounts_json_schema_avro_$SFX WHERE id = 100001")"
check "avro: the deletes of 4 and 1 applied" 0 "$(sql -c "SELECT count(*) FROM e2e.accounts_json_schema_avro_$SFX WHERE id IN (1, 4)")"
check "avro: order_lines: Date before 1970, ZonedTimestamp, precise numeric(14,4)" \
      "1900-02-28|2004-11-25 19:56:33+00|1.4579" \
      "$(sql -c "SET timezone = 'UTC'; SELECT ship_date || '|' || shipped_at || '|' || amount FROM e2e.order_lines_json_schema_avro_$SFX WHERE order_id = 111 AND line_no = 3")"
# their workers' slots are needed below (kafka_sink.max_workers)
for p in $(sql -c "SELECT name FROM kafka_sink.pipelines WHERE name LIKE 'enc\\_%\\_$SFX'"); do
    sql -c "SELECT kafka_sink.drop_pipeline('$p')" >/dev/null
done

# ---- routing by source.table with create_targets, from the Avro writer schema ---------------
# one pipeline per format over the three json_schema fixture topics; the tables are created
# from the embedded (JSON) or the writer (Avro) schema and must come out the same, rows too
for f in json avro; do
    sql -c "CREATE SCHEMA cdcr_${f}_$SFX AUTHORIZATION ks_e2e" >/dev/null
    fmt=""
    [ "$f" = avro ] && fmt=", value_format => 'avro', key_format => 'avro', schema_registry => $REGJSON"
    sql -c "SET ROLE ks_e2e; SELECT kafka_sink.create_pipeline(name => 'routed_${f}_$SFX', bootstrap_servers => '$KS_BOOTSTRAP',
            subscribe => ARRAY['${T}_json_schema_accounts_$f', '${T}_json_schema_products_$f', '${T}_json_schema_order_lines_$f'],
            target => 'cdcr_${f}_$SFX.{source.table}', create_targets => true, starting_offsets => 'earliest',
            envelope => 'debezium'$fmt)" >/dev/null
done
for f in json avro; do check_caught_up "routed_${f}_$SFX"; done
tabledef() {
    sql -c "SELECT string_agg(c.relname || ':' || (SELECT string_agg(attname || ' ' || format_type(atttypid, atttypmod), ',' ORDER BY attnum)
                                                    FROM pg_attribute WHERE attrelid = c.oid AND attnum > 0 AND NOT attisdropped)
                              || ':' || coalesce((SELECT pg_get_constraintdef(k.oid) FROM pg_constraint k WHERE k.conrelid = c.oid AND k.contype = 'p'), '-'),
                              ' ' ORDER BY c.relname)
              FROM pg_class c WHERE c.relnamespace = 'cdcr_${1}_$SFX'::regnamespace AND c.relkind = 'r'"
}
check "routed avro: three tables created" 3 \
      "$(sql -c "SELECT count(*) FROM pg_class WHERE relnamespace = 'cdcr_avro_$SFX'::regnamespace AND relkind = 'r'")"
check "routed avro: the tables created from the Avro writer schema equal those from the JSON schema" \
      "$(tabledef json)" "$(tabledef avro)"
check "routed avro: the tables have the semantic types (numeric(12,2), date, uuid, jsonb, timestamp(6))" t \
      "$(tabledef avro | grep -q 'balance numeric(12,2)' && tabledef avro | grep -q 'uid uuid' && tabledef avro | grep -q 'meta jsonb' \
         && tabledef avro | grep -q 'created timestamp(6) without time zone' && echo t || echo f)"
# same_rows A B: "rows differing, t when A has rows" for tables A and B
same_rows() {
    sql -c "CREATE TEMP VIEW a AS SELECT to_jsonb(t) AS r FROM $1 t;
            CREATE TEMP VIEW b AS SELECT to_jsonb(t) AS r FROM $2 t;
            SELECT count(*) || ' ' || CASE WHEN (SELECT count(*) FROM a) > 0 THEN 't' ELSE 'f' END
              FROM ((TABLE a EXCEPT TABLE b) UNION ALL (TABLE b EXCEPT TABLE a)) x"
}
for tb in accounts products order_lines; do
    check "routed $tb: Avro rows equal JSON rows" "0 t" "$(same_rows "cdcr_json_$SFX.$tb" "cdcr_avro_$SFX.$tb")"
done
check "routed: nothing quarantined" 0 \
      "$(sql -c "SELECT count(*) FROM kafka_sink.quarantine q JOIN kafka_sink.pipelines p ON p.id = q.pipeline_id WHERE p.name LIKE 'routed\\_%\\_$SFX'")"

# ---- routing by source.table alone (no create_targets): read from the Avro datum -----------
# (route.c reads source.table straight from the Avro value, so the event is translated once);
# the tables exist already (as the JSON pass created them) and must get the JSON pass's rows
sql >/dev/null <<SQL
CREATE SCHEMA cdcp_avro_$SFX AUTHORIZATION ks_e2e;
$(for tb in accounts products order_lines; do
    echo "CREATE TABLE cdcp_avro_$SFX.$tb (LIKE cdcr_json_$SFX.$tb INCLUDING ALL); ALTER TABLE cdcp_avro_$SFX.$tb OWNER TO ks_e2e;"
  done)
SQL
sql -c "SET ROLE ks_e2e; SELECT kafka_sink.create_pipeline(name => 'routedp_avro_$SFX', bootstrap_servers => '$KS_BOOTSTRAP',
        subscribe => ARRAY['${T}_json_schema_accounts_avro', '${T}_json_schema_products_avro', '${T}_json_schema_order_lines_avro'],
        target => 'cdcp_avro_$SFX.{source.table}', starting_offsets => 'earliest', envelope => 'debezium',
        value_format => 'avro', key_format => 'avro', schema_registry => $REGJSON)" >/dev/null
check_caught_up "routedp_avro_$SFX"
for tb in accounts products order_lines; do
    check "routed by source.table alone, $tb: Avro rows equal JSON rows" "0 t" \
          "$(same_rows "cdcr_json_$SFX.$tb" "cdcp_avro_$SFX.$tb")"
done
check "routed by source.table alone: nothing quarantined, no message without a target" 0 \
      "$(sql -c "SELECT count(*) FROM kafka_sink.quarantine q JOIN kafka_sink.pipelines p ON p.id = q.pipeline_id WHERE p.name = 'routedp_avro_$SFX'")"


# ---- hand-made encodings the fixtures lack: bytes, Connect's Time/Timestamp (Avro logical
# types), int16, Json, Uuid, a Decimal into a numeric(8,2) -------------------------------------
sql >/dev/null <<SQL
CREATE TABLE e2e.types_json_$SFX (id int PRIMARY KEY, b bytea, t3 time(3), ts timestamptz, ts3 timestamp(3),
    sm smallint, d float8, ok boolean, j jsonb, u uuid, n numeric(8,2), _kafka_source_position numeric);
CREATE TABLE e2e.types_avro_$SFX (LIKE e2e.types_json_$SFX INCLUDING ALL);
ALTER TABLE e2e.types_json_$SFX OWNER TO ks_e2e;
ALTER TABLE e2e.types_avro_$SFX OWNER TO ks_e2e;
SQL
for f in json avro; do "$HARNESS" topic-create "${T}_types_$f" 1 >/dev/null 2>&1; done
python3 > "$ROUND" <<'PY'
import json
def f(name, type_, sem=None, params=None):
    d = {"field": name, "type": type_, "optional": True}
    if sem:
        d["name"], d["version"] = sem, 1
    if params:
        d["parameters"] = params
    return d
ROW = {"type": "struct", "name": "ks.cdc.types.Value", "optional": True, "fields": [
    {"field": "id", "type": "int32", "optional": False}, f("b", "bytes"),
    f("t3", "int32", "org.apache.kafka.connect.data.Time"), f("ts", "int64", "org.apache.kafka.connect.data.Timestamp"),
    f("ts3", "int64", "org.apache.kafka.connect.data.Timestamp"), f("sm", "int16"), f("d", "double"), f("ok", "boolean"),
    f("j", "string", "io.debezium.data.Json"), f("u", "string", "io.debezium.data.Uuid"),
    f("n", "bytes", "org.apache.kafka.connect.data.Decimal", {"scale": "2", "connect.decimal.precision": "8"})]}
ENV = {"type": "struct", "name": "ks.cdc.types.Envelope", "optional": False, "fields": [
    dict(ROW, field="before"), dict(ROW, field="after"),
    {"field": "source", "type": "struct", "name": "io.debezium.connector.postgresql.Source", "optional": False,
     "fields": [{"field": "lsn", "type": "int64", "optional": True}]},
    {"field": "op", "type": "string", "optional": False}]}
KEY = {"type": "struct", "name": "ks.cdc.types.Key", "optional": False, "fields": [{"field": "id", "type": "int32", "optional": False}]}
after = {"id": 1, "b": "3q2+7w==", "t3": 45296789, "ts": 958284369123, "ts3": 958284369123, "sm": -7,
         "d": 1.5e300, "ok": True, "j": "{\"a\": [1, \"ü\"]}", "u": "5cd4710c-e5ff-4b91-811e-802c47df8832", "n": "AMg="}
print(json.dumps({"key": {"schema": KEY, "payload": {"id": 1}},
                  "value": {"schema": ENV, "payload": {"before": None, "after": after, "source": {"lsn": 7}, "op": "c"}}}))
PY
twin "$ROUND" "${T}_types_json" "${T}_types_avro"
for f in json avro; do pipeline "types_${f}_$SFX" "${T}_types_$f" "e2e.types_${f}_$SFX" $f; done
for f in json avro; do check_caught_up "types_${f}_$SFX"; done
for f in json avro; do
    check "$f: bytea, Time in ms, Timestamp into timestamptz and timestamp(3), int16, double, boolean, Json, Uuid, Decimal" \
          '\xdeadbeef|12:34:56.789|2000-05-14 06:06:09.123+00|2000-05-14 06:06:09.123|-7|1.5e+300|t|{"a": [1, "ü"]}|5cd4710c-e5ff-4b91-811e-802c47df8832|2.00|7' \
          "$(sql -c "SET timezone = 'UTC'; SELECT concat_ws('|', b, t3, ts, ts3, sm, d, ok, j, u, n, _kafka_source_position) FROM e2e.types_${f}_$SFX")"
done

for p in $(sql -c "SELECT name FROM kafka_sink.pipelines WHERE name LIKE '%$SFX'"); do
    sql -c "SELECT kafka_sink.drop_pipeline('$p')" >/dev/null
done
finish
