#!/usr/bin/env bash
# protobuf: Protobuf values in Confluent's wire format through the test
# registry (test/tools/schema_registry.py), written by confluent-kafka's own
# ProtobufSerializer (test/e2e/protobuf_produce.py), and schema references.
#  - a schema importing a second .proto that the serializer registers under
#    its own subject (a reference), well-known types, enums into text and
#    integer columns, nested paths, repeated fields into arrays, maps into
#    jsonb, oneof, proto3 optional;
#  - a schema change mid-stream (a field added, the message type the second
#    of its file: message index [1]);
#  - the registry killed while the new schema id is not fetched yet: nothing
#    lost, nothing quarantined, the status says so; restarted, every message
#    lands; the target equals the model computed by the producer;
#  - bad frames quarantined as not_wire_format, unknown_schema_id and
#    invalid_protobuf (wrong wire type, bad message index, bad UTF-8, cut
#    off), the unknown id replayed once it is registered;
#  - references for Avro (a named type from another subject) and JSON Schema
#    ($ref to another subject, kept with the schema); a cycle, a dangling
#    reference and a chain deeper than 16: quarantined with the cause named,
#    no hang, no crash;
#  - Protobuf keys feed the key column.
. "$(dirname "$0")/../lib/common.sh"
setup_owner
protobuf_python
PRODUCE="$PY $E2E_DIR/protobuf_produce.py"

# ---- the registry ---------------------------------------------------------------------
USERINFO="ks:pb-pw-$SFX"
registry_start "$USERINFO" "pb_$SFX"
register() {  # SUBJECT BODY_JSON -> id
    curl -s -u "$USERINFO" -XPOST -H 'Content-Type: application/json' -d "$2" "$REG/subjects/$1/versions" |
        python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])'
}

S="pb_$SFX"
REGJSON="jsonb_build_object('url', '$REG', 'basic.auth.user.info', '$USERINFO', 'timeout.ms', 2000)"
sql >/dev/null <<SQL
CREATE SCHEMA $S AUTHORIZATION ks_e2e;
SET ROLE ks_e2e;
CREATE TABLE $S.orders (order_id bigint PRIMARY KEY, customer text, status text,
    ts timestamptz, discount_cents bigint, qty int[], tags jsonb, city text, zip text, currency text,
    units bigint, note text, email text, phone text, priority int);
CREATE TABLE $S.refs (id bigint PRIMARY KEY, city text);
CREATE TABLE $S.nums (order_id bigint PRIMARY KEY, status int);
CREATE TABLE $S.keyed (order_id bigint PRIMARY KEY, customer text);
CREATE TABLE $S.js (id bigint PRIMARY KEY, city text);
SQL
T="e2e_pb_$SFX"; T_REF="e2e_pb_refs_$SFX"; T_KEY="e2e_pb_keys_$SFX"; T_JS="e2e_pb_js_$SFX"
for t in "$T" "$T_REF" "$T_KEY" "$T_JS"; do "$HARNESS" topic-create "$t" 1 >/dev/null 2>&1; done
rows() { sql -c "SELECT count(*) FROM $S.$1"; }
quarantined() { sql -c "SELECT coalesce(string_agg(reason, ',' ORDER BY message_offset), '') FROM kafka_sink.quarantine q JOIN kafka_sink.pipeline_definitions p ON p.id = q.pipeline_id WHERE p.name = '$1' AND q.replayed_at IS NULL"; }

# ---- the frames, written by the official serializer (both versions, while the registry is up) ----
FR="$REGDIR/frames"
for ph in 1 2; do
    $PRODUCE frames "$REGDIR/work" "$REG" "$USERINFO" "$FR" $ph > "$REGDIR/produce.log" 2>&1 ||
        { cat "$REGDIR/produce.log"; echo "not ok - the serializer writes the frames"; FAILED=$((FAILED + 1)); }
done
check "the serializer registered the import under its own subject, with a reference" "common/money.proto|t" \
      "$(curl -s -u "$USERINFO" "$REG/subjects" | python3 -c 'import json,sys; print(sorted(json.load(sys.stdin))[0])')|$(curl -s -u "$USERINFO" "$REG/subjects/e2e-value/versions/1" | python3 -c 'import json,sys; print(str(json.load(sys.stdin)["references"][0]["name"] == "common/money.proto").lower()[0])')"

sql -c "SET ROLE ks_e2e" -c "SELECT kafka_sink.create_pipeline(name => 'pb_$SFX', bootstrap_servers => '$KS_BOOTSTRAP',
          subscribe => ARRAY['$T'], target => '$S.orders', starting_offsets => 'earliest', trigger_interval => '50 ms',
          value_format => 'protobuf', schema_registry => $REGJSON,
          columns => '{\"city\": \"shipping.city\", \"zip\": \"shipping.zip\",
                       \"currency\": \"total.currency\", \"units\": \"total.units\"}')" >/dev/null

# the same messages, the enum into an integer column
sql -c "SET ROLE ks_e2e" -c "SELECT kafka_sink.create_pipeline(name => 'pb_num_$SFX', bootstrap_servers => '$KS_BOOTSTRAP',
          subscribe => ARRAY['$T'], target => '$S.nums', starting_offsets => 'earliest', trigger_interval => '50 ms',
          value_format => 'protobuf', schema_registry => $REGJSON)" >/dev/null

# ---- version 1, then bad frames of each reason ----
$PRODUCE send "$KS_BOOTSTRAP" "$T" "$FR" 1
V1_ID=2
hexid() { printf '%08x' "$1"; }
bad() { $PRODUCE raw "$KS_BOOTSTRAP" "$T" "$1"; }
bad 6869                                               # not_wire_format
bad "00$(hexid 4)000863"                              # unknown_schema_id (registered below)
bad "00$(hexid $V1_ID)000a0141"                       # invalid_protobuf: order_id with wire type 2
bad "00$(hexid $V1_ID)020a0801"                       # invalid_protobuf: message index [5]
bad "00$(hexid $V1_ID)0008011202fffe"                 # invalid_protobuf: customer not UTF-8
bad "00$(hexid $V1_ID)0008011205616e"                 # invalid_protobuf: a length past the end
poll "SELECT count(*) = 6 FROM kafka_sink.quarantine q JOIN kafka_sink.pipeline_definitions p ON p.id = q.pipeline_id WHERE p.name = 'pb_$SFX'" 60 || true
check "bad frames are quarantined with their reasons" \
      "not_wire_format,unknown_schema_id,invalid_protobuf,invalid_protobuf,invalid_protobuf,invalid_protobuf" \
      "$(quarantined "pb_$SFX")"
check "the detail names the problem" "true|true|true" \
      "$(sql -c "SELECT bool_or(detail LIKE '%wire type 2%')::text || '|' || bool_or(detail LIKE '%message index 5 does not exist%') || '|' || bool_or(detail LIKE '%not valid UTF-8%') FROM kafka_sink.quarantine q JOIN kafka_sink.pipeline_definitions p ON p.id = q.pipeline_id WHERE p.name = 'pb_$SFX'")"
check "version 1 applied, the pipeline running" "running" "$(sql -c "SELECT state FROM kafka_sink.pipelines WHERE name = 'pb_$SFX'")"

# ---- the registry killed, then version 2 (a schema id not fetched yet) ----
check_caught_up "pb_$SFX"
before="$(sql -c "SELECT md5(string_agg(o::text, ',' ORDER BY order_id)) FROM $S.orders o")"
kill -KILL "$REG_PID"; wait "$REG_PID" 2>/dev/null || true
$PRODUCE send "$KS_BOOTSTRAP" "$T" "$FR" 2
poll "SELECT last_error LIKE 'schema registry unavailable%' FROM kafka_sink.status WHERE name = 'pb_$SFX'" 60 || true
check "registry killed: the status says so" t \
      "$(sql -c "SELECT last_error LIKE 'schema registry unavailable%' FROM kafka_sink.status WHERE name = 'pb_$SFX'")"
check "registry killed: nothing applied past it, nothing more quarantined" "$before|6" \
      "$(sql -c "SELECT md5(string_agg(o::text, ',' ORDER BY order_id)) FROM $S.orders o")|$(sql -c "SELECT count(*) FROM kafka_sink.quarantine q JOIN kafka_sink.pipeline_definitions p ON p.id = q.pipeline_id WHERE p.name = 'pb_$SFX'")"
registry_start "$USERINFO" "pb_$SFX" "$REG_PORT"
check_caught_up "pb_$SFX"

# ---- the target against the model ----
MODEL_JSON="$(python3 -c 'import json,sys; print(json.dumps([json.loads(l) for l in open(sys.argv[1])]))' "$FR.model")"
sql -v model="$MODEL_JSON" >/dev/null <<SQL
SET ROLE ks_e2e;
CREATE TABLE $S.model AS SELECT * FROM jsonb_populate_recordset(NULL::$S.orders, :'model');
SQL
check "the target equals the model (both versions, the import, every column)" "0|$(wc -l < "$FR.model")" \
      "$(sql -c "SELECT count(*) FROM ((TABLE $S.orders EXCEPT TABLE $S.model) UNION ALL (TABLE $S.model EXCEPT TABLE $S.orders)) x")|$(rows orders)"
check_caught_up "pb_num_$SFX"
check "an enum into an integer column: its number (the model's)" 0 \
      "$(sql -c "SELECT count(*) FROM $S.nums n FULL JOIN jsonb_to_recordset('$MODEL_JSON') AS m(order_id bigint, status_no int) USING (order_id) WHERE n.status IS DISTINCT FROM m.status_no")"
check "version 2's field landed, nothing more quarantined" "t|6" \
      "$(sql -c "SELECT count(priority) > 0 FROM $S.orders")|$(sql -c "SELECT count(*) FROM kafka_sink.quarantine q JOIN kafka_sink.pipeline_definitions p ON p.id = q.pipeline_id WHERE p.name = 'pb_$SFX'")"

# ---- replay: the unknown id registered ----
late_id="$(register e2e-late '{"schemaType": "PROTOBUF", "schema": "syntax = \"proto3\"; message Order { int64 order_id = 1; }"}')"
check "the late schema takes the id the frame named" 4 "$late_id"
check "replayed: the unknown id lands" "1/0" \
      "$(sql -c "SET ROLE ks_e2e" -c "SELECT replayed || '/' || still_failing FROM kafka_sink.replay_quarantine('pb_$SFX', reason => 'unknown_schema_id')")"
check "replayed: the invalid ones still fail" "0/4" \
      "$(sql -c "SET ROLE ks_e2e" -c "SELECT replayed || '/' || still_failing FROM kafka_sink.replay_quarantine('pb_$SFX', reason => 'invalid_protobuf')")"
check "replayed row" 99 "$(sql -c "SELECT order_id FROM $S.orders WHERE order_id = 99")"

# ---- references: Avro named types from another subject, cycles ----
addr='{"type": "record", "name": "Address", "namespace": "ks", "fields": [{"name": "city", "type": "string"}]}'
register e2e-addr "$(python3 -c 'import json,sys; print(json.dumps({"schema": sys.argv[1]}))' "$addr")" >/dev/null
main='{"type": "record", "name": "Shipment", "namespace": "ks", "fields": [{"name": "id", "type": "long"}, {"name": "addr", "type": "ks.Address"}]}'
avro_ref_id="$(register e2e-ship "$(python3 -c 'import json,sys; print(json.dumps({"schema": sys.argv[1], "references": [{"name": "ks.Address", "subject": "e2e-addr", "version": 1}]}))' "$main")")"
# a cycle: a imports b imports a
cyc_a="$(register e2e-cyc-a '{"schemaType": "PROTOBUF", "schema": "syntax = \"proto3\"; import \"b.proto\"; message A { int64 id = 1; }", "references": [{"name": "b.proto", "subject": "e2e-cyc-b", "version": 1}]}')"
register e2e-cyc-b '{"schemaType": "PROTOBUF", "schema": "syntax = \"proto3\"; import \"a.proto\"; message B { int64 id = 1; }", "references": [{"name": "a.proto", "subject": "e2e-cyc-a", "version": 1}]}' >/dev/null
# a reference to a subject that does not exist
dangling="$(register e2e-dangling '{"schemaType": "PROTOBUF", "schema": "syntax = \"proto3\"; import \"x.proto\"; message A { int64 id = 1; }", "references": [{"name": "x.proto", "subject": "e2e-nowhere", "version": 1}]}')"
sql -c "SET ROLE ks_e2e" -c "SELECT kafka_sink.create_pipeline(name => 'pb_refs_$SFX', bootstrap_servers => '$KS_BOOTSTRAP',
          subscribe => ARRAY['$T_REF'], target => '$S.refs', starting_offsets => 'earliest', trigger_interval => '50 ms',
          value_format => 'avro', schema_registry => $REGJSON, columns => '{\"city\": \"addr.city\"}')" >/dev/null
# id 7 as a long (zigzag 14), city "Oslo"
$PRODUCE raw "$KS_BOOTSTRAP" "$T_REF" "00$(hexid "$avro_ref_id")0e084f736c6f"
$PRODUCE raw "$KS_BOOTSTRAP" "$T_REF" "00$(hexid "$cyc_a")000801"
$PRODUCE raw "$KS_BOOTSTRAP" "$T_REF" "00$(hexid "$dangling")000801"
poll "SELECT (SELECT count(*) FROM $S.refs) + (SELECT count(*) FROM kafka_sink.quarantine q JOIN kafka_sink.pipeline_definitions p ON p.id = q.pipeline_id WHERE p.name = 'pb_refs_$SFX') = 3" 60 || true
check "an Avro schema with a named type from another subject decodes" "7|Oslo" "$(sql -c "SELECT id || '|' || city FROM $S.refs")"
check "a cycle of references and a dangling one are quarantined, named" "true|true" \
      "$(sql -c "SELECT bool_or(detail LIKE '%cycle%')::text || '|' || bool_or(detail LIKE '%e2e-nowhere%') FROM kafka_sink.quarantine q JOIN kafka_sink.pipeline_definitions p ON p.id = q.pipeline_id WHERE p.name = 'pb_refs_$SFX'")"
check "the reference pipeline keeps running" running "$(sql -c "SELECT state FROM kafka_sink.pipelines WHERE name = 'pb_refs_$SFX'")"

# ---- references: a chain deeper than the bound ----
for i in $(seq 17 -1 0); do
    register "e2e-deep-$i" "{\"schemaType\": \"PROTOBUF\", \"schema\": \"syntax = \\\"proto3\\\"; import \\\"d$((i + 1)).proto\\\"; message D$i { int64 id = 1; }\", \"references\": [{\"name\": \"d$((i + 1)).proto\", \"subject\": \"e2e-deep-$((i + 1))\", \"version\": 1}]}" > "$REGDIR/deep.id"
done
$PRODUCE raw "$KS_BOOTSTRAP" "$T_REF" "00$(hexid "$(cat "$REGDIR/deep.id")")000801"
poll "SELECT count(*) = 1 FROM kafka_sink.quarantine q JOIN kafka_sink.pipeline_definitions p ON p.id = q.pipeline_id WHERE p.name = 'pb_refs_$SFX' AND detail LIKE '%more than 16 deep%'" 60 || true
check "references nested deeper than 16 are quarantined with the bound" 1 \
      "$(sql -c "SELECT count(*) FROM kafka_sink.quarantine q JOIN kafka_sink.pipeline_definitions p ON p.id = q.pipeline_id WHERE p.name = 'pb_refs_$SFX' AND detail LIKE '%more than 16 deep%'")"

# ---- JSON Schema with a reference ($ref to another subject) ----
register e2e-js-addr '{"schemaType": "JSON", "schema": "{\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"}}}"}' >/dev/null
js_id="$(register e2e-js '{"schemaType": "JSON", "schema": "{\"type\": \"object\", \"properties\": {\"id\": {\"type\": \"integer\"}, \"addr\": {\"$ref\": \"addr.json\"}}}", "references": [{"name": "addr.json", "subject": "e2e-js-addr", "version": 1}]}')"
sql -c "SET ROLE ks_e2e" -c "SELECT kafka_sink.create_pipeline(name => 'pb_js_$SFX', bootstrap_servers => '$KS_BOOTSTRAP',
          subscribe => ARRAY['$T_JS'], target => '$S.js', starting_offsets => 'earliest', trigger_interval => '50 ms',
          value_format => 'json_schema', schema_registry => $REGJSON, columns => '{\"city\": \"addr.city\"}')" >/dev/null
$PRODUCE raw "$KS_BOOTSTRAP" "$T_JS" "00$(hexid "$js_id")$(printf '{"id": 5, "addr": {"city": "Bergen"}}' | od -An -tx1 | tr -d ' \n')"
poll "SELECT count(*) = 1 FROM $S.js" 60 || true
check "a JSON Schema with a reference: resolved, kept with it, its messages land" "5|Bergen|JSON+refs" \
      "$(sql -c "SELECT id || '|' || city FROM $S.js")|$(sql -c "SELECT schema_type FROM kafka_sink.schemas WHERE registry = '$REG' AND id = $js_id")"

# ---- Protobuf keys ----
key_id="$(register e2e-key '{"schemaType": "PROTOBUF", "schema": "syntax = \"proto3\"; message K { int64 order_id = 1; }"}')"
sql -c "SET ROLE ks_e2e" -c "SELECT kafka_sink.create_pipeline(name => 'pb_key_$SFX', bootstrap_servers => '$KS_BOOTSTRAP',
          subscribe => ARRAY['$T_KEY'], target => '$S.keyed', starting_offsets => 'earliest', trigger_interval => '50 ms',
          key_columns => ARRAY['order_id'], key_format => 'protobuf', value_format => 'protobuf', schema_registry => $REGJSON)" >/dev/null
# key order_id 42; the value (schema v1) says customer "key" and order_id 7, which the key overrides
$PY -c "
from confluent_kafka import Producer
p = Producer({'bootstrap.servers': '$KS_BOOTSTRAP'})
p.produce('$T_KEY', key=bytes.fromhex('00$(hexid "$key_id")00082a'), value=bytes.fromhex('00$(hexid $V1_ID)00080712036b6579'))
p.flush(30)"
poll "SELECT count(*) = 1 FROM $S.keyed" 60 || true
check "a Protobuf key feeds the key column" "42|key" "$(sql -c "SELECT order_id || '|' || customer FROM $S.keyed")"

for n in pb pb_num pb_refs pb_js pb_key; do
    sql -c "SET ROLE ks_e2e" -c "SELECT kafka_sink.drop_pipeline('${n}_$SFX')" >/dev/null
done
finish
