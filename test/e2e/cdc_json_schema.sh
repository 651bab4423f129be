#!/usr/bin/env bash
# cdc_json_schema: envelope => 'debezium' with value_format => 'json_schema'
# (Debezium with Confluent's JsonSchemaConverter: each event in the wire
# format, magic byte 0 and the schema id, then the bare event), and the
# connector's own unavailable.value.placeholder (unavailable_value_placeholder).
#  1. JSON Schema frames, keys framed too, with a header-mapped column
#     (kcat -H): creates, an update, a delete by the framed key and its
#     tombstone, a key change; a frame of an unknown schema id and a value
#     without the frame are quarantined (unknown_schema_id, not_wire_format);
#     the rows equal the model the script states; headers with the plain
#     envelope and json_schema values too.
#  2. A custom placeholder keeps the replica's value exactly as the default
#     one does: two pipelines, one with Debezium's default placeholder and
#     one with a custom one, get the same events with their own placeholder
#     (text, jsonb, bytea in base64, a text[] as a list of it), across
#     batches and folded within one, and end with equal tables, equal to the
#     model; the other pipeline's placeholder is ordinary data to each.
# (Confluent's JsonSchemaConverter is not on Maven Central: the frames are
# hand-made in its shape, as cdc_avro.sh makes AvroConverter's.)
. "$(dirname "$0")/../lib/common.sh"
setup_owner

# ---- the registry ---------------------------------------------------------------------
USERINFO="ks:cdcjs-pw-$SFX"
registry_start "$USERINFO" "cdcjs_$SFX"
REGJSON="jsonb_build_object('url', '$REG', 'basic.auth.user.info', '$USERINFO', 'timeout.ms', 5000)"

# register SUBJECT SCHEMA_JSON -> the id
register() {
    curl -sf -u "$USERINFO" -H 'Content-Type: application/vnd.schemaregistry.v1+json' \
         --data "$(python3 -c 'import json,sys; print(json.dumps({"schemaType": "JSON", "schema": sys.argv[1]}))' "$2")" \
         "$REG/subjects/$1/versions" | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])'
}
ROW='{"type": "object", "title": "dbz.inventory.customers.Value", "properties": {
  "id": {"type": "integer", "connect.index": 0, "connect.type": "int32"},
  "name": {"oneOf": [{"type": "null"}, {"type": "string"}], "connect.index": 1}}}'
VALUE_SCHEMA="{\"type\": \"object\", \"title\": \"dbz.inventory.customers.Envelope\", \"properties\": {
  \"before\": {\"oneOf\": [{\"type\": \"null\"}, $ROW], \"connect.index\": 0},
  \"after\": {\"oneOf\": [{\"type\": \"null\"}, $ROW], \"connect.index\": 1},
  \"source\": {\"type\": \"object\", \"connect.index\": 2},
  \"op\": {\"type\": \"string\", \"connect.index\": 3}}}"
KEY_SCHEMA='{"type": "object", "title": "dbz.inventory.customers.Key", "properties": {"id": {"type": "integer", "connect.index": 0, "connect.type": "int32"}}}'
T="e2e_cdcjs_$SFX"
VID="$(register "$T-value" "$VALUE_SCHEMA")"
KID="$(register "$T-key" "$KEY_SCHEMA")"

# frames: stdin's lines "KEY_ID KEY_JSON|VALUE_ID VALUE_JSON" (an id - : no
# frame; an empty value: a tombstone) as "key|value" for kcat -K '|' -Z
frames() {
    python3 -c '
import struct, sys
out = sys.stdout.buffer
for line in sys.stdin:
    line = line.rstrip("\n")
    if not line:
        continue
    parts = []
    for half in line.split("|", 1):
        half = half.strip()
        if not half:
            parts.append(b"")
            continue
        sid, _, body = half.partition(" ")
        parts.append(body.encode() if sid == "-" else b"\0" + struct.pack(">i", int(sid)) + body.encode())
    out.write(parts[0] + b"|" + parts[1] + b"\n")
'
}

sql >/dev/null <<SQL
CREATE TABLE e2e.cdcjs_$SFX (id int PRIMARY KEY, name text, tenant text, _kafka_source_position numeric);
ALTER TABLE e2e.cdcjs_$SFX OWNER TO ks_e2e;
SET ROLE ks_e2e;
SELECT kafka_sink.create_pipeline(name => 'cdcjs_$SFX', bootstrap_servers => '$KS_BOOTSTRAP',
       subscribe => ARRAY['$T'], target => 'e2e.cdcjs_$SFX', starting_offsets => 'earliest',
       envelope => 'debezium', value_format => 'json_schema', schema_registry => $REGJSON,
       columns => '{"tenant": "headers.tenant"}');
SQL
"$HARNESS" topic-create "$T" 1 >/dev/null 2>&1
ev() { echo "{\"before\": $3, \"after\": $4, \"source\": {\"connector\": \"postgresql\", \"lsn\": $2, \"ts_ms\": 1700000000000}, \"op\": \"$1\"}"; }
{
    echo "$KID {\"id\": 1}|$VID $(ev c 100 null '{"id": 1, "name": "a"}')"
    echo "$KID {\"id\": 2}|$VID $(ev c 101 null '{"id": 2, "name": "b"}')"
    echo "$KID {\"id\": 2}|$VID $(ev u 102 '{"id": 2, "name": "b"}' '{"id": 2, "name": "b2"}')"
    echo "$KID {\"id\": 1}|$VID $(ev d 103 '{"id": 1, "name": null}' null)"
    echo "$KID {\"id\": 1}|"
    # a key change: the delete of 3 and the create of 4 share the LSN
    echo "$KID {\"id\": 3}|$VID $(ev c 104 null '{"id": 3, "name": "c"}')"
    echo "$KID {\"id\": 3}|$VID $(ev d 105 '{"id": 3, "name": null}' null)"
    echo "$KID {\"id\": 4}|$VID $(ev c 105 null '{"id": 4, "name": "c"}')"
    echo "$KID {\"id\": 5}|999 $(ev c 106 null '{"id": 5, "name": "e"}')"
    echo "- {\"id\": 6}|- $(ev c 107 null '{"id": 6, "name": "f"}')"
} | frames | kcat -P -b "$KS_BOOTSTRAP" -t "$T" -K '|' -Z -H tenant=acme
check_caught_up "cdcjs_$SFX"
check "JSON Schema frames applied as change events (upsert, update, delete by the framed key, key change), the header column filled" \
      "2|b2|acme@102 4|c|acme@105" \
      "$(sql -c "SELECT string_agg(concat_ws('|', id, name, tenant) || '@' || _kafka_source_position, ' ' ORDER BY id) FROM e2e.cdcjs_$SFX")"
check "an unknown schema id and a value without the frame are quarantined" "8:unknown_schema_id,9:not_wire_format" \
      "$(sql -c "SELECT string_agg(q.message_offset || ':' || q.reason, ',' ORDER BY q.message_offset) FROM kafka_sink.quarantine q JOIN kafka_sink.pipelines p ON p.id = q.pipeline_id WHERE p.name = 'cdcjs_$SFX'")"

# ---- headers with the plain envelope and json_schema values --------------------------------
PLAIN_ID="$(register "${T}_plain-value" "$ROW")"
sql >/dev/null <<SQL
CREATE TABLE e2e.jsplain_$SFX (id int PRIMARY KEY, name text, tenant text, part int);
ALTER TABLE e2e.jsplain_$SFX OWNER TO ks_e2e;
SET ROLE ks_e2e;
SELECT kafka_sink.create_pipeline(name => 'jsplain_$SFX', bootstrap_servers => '$KS_BOOTSTRAP',
       subscribe => ARRAY['${T}_plain'], target => 'e2e.jsplain_$SFX', starting_offsets => 'earliest',
       value_format => 'json_schema', schema_registry => $REGJSON,
       columns => '{"tenant": "headers.tenant", "part": "kafka.partition"}');
SQL
"$HARNESS" topic-create "${T}_plain" 1 >/dev/null 2>&1
printf '%s\n' "- 1|$PLAIN_ID {\"id\": 1, \"name\": \"x\"}" "- 2|$PLAIN_ID {\"id\": 2, \"name\": \"y\"}" \
    | frames | kcat -P -b "$KS_BOOTSTRAP" -t "${T}_plain" -K '|' -H tenant=t1 -H tenant=t2
check_caught_up "jsplain_$SFX"
check "json_schema values with the plain envelope: header and kafka.partition columns" "1|x|t2|0 2|y|t2|0" \
      "$(sql -c "SELECT string_agg(concat_ws('|', id, name, tenant, part), ' ' ORDER BY id) FROM e2e.jsplain_$SFX")"

# ---- a custom unavailable.value.placeholder -------------------------------------------------
DEF="__debezium_unavailable_value"
CUS="<<toasted: not sent>>"
b64() { printf '%s' "$1" | base64 -w0; }
jstr() { python3 -c 'import json,sys; print(json.dumps(sys.argv[1]))' "$1"; }
for v in def cus; do
    sql >/dev/null <<SQL
CREATE TABLE e2e.ph_${v}_$SFX (id int PRIMARY KEY, name text, doc text NOT NULL, js jsonb, blob bytea, tags text[],
    _kafka_source_position numeric);
ALTER TABLE e2e.ph_${v}_$SFX OWNER TO ks_e2e;
SQL
    "$HARNESS" topic-create "${T}_$v" 1 >/dev/null 2>&1
done
sql >/dev/null <<SQL
SET ROLE ks_e2e;
SELECT kafka_sink.create_pipeline(name => 'ph_def_$SFX', bootstrap_servers => '$KS_BOOTSTRAP',
       subscribe => ARRAY['${T}_def'], target => 'e2e.ph_def_$SFX', starting_offsets => 'earliest',
       envelope => 'debezium');
SELECT kafka_sink.create_pipeline(name => 'ph_cus_$SFX', bootstrap_servers => '$KS_BOOTSTRAP',
       subscribe => ARRAY['${T}_cus'], target => 'e2e.ph_cus_$SFX', starting_offsets => 'earliest',
       envelope => 'debezium', unavailable_value_placeholder => '$CUS');
SQL
check "the pipelines view shows the placeholder" "$CUS" \
      "$(sql -c "SELECT unavailable_value_placeholder FROM kafka_sink.pipelines WHERE name = 'ph_cus_$SFX'")"
# round PLACEHOLDER OTHER TOPIC N: the events of round N with PLACEHOLDER
# as the placeholder; OTHER (the other pipeline's) is plain data
round() {
    local U B O
    U="$(jstr "$1")"; B="\"$(b64 "$1")\""; O="$(jstr "$2")"
    if [ "$4" = 1 ]; then
        echo '{"id": 1}|{"op": "c", "source": {"lsn": 10}, "after": {"id": 1, "name": "a", "doc": "big document", "js": "{\"k\": [1, 2]}", "blob": "3q2+7w==", "tags": ["x", "y"]}}'
        echo '{"id": 2}|{"op": "c", "source": {"lsn": 11}, "after": {"id": 2, "name": "b", "doc": "second doc", "js": null, "blob": null, "tags": null}}'
        echo "{\"id\": 2}|{\"op\": \"u\", \"source\": {\"lsn\": 12}, \"after\": {\"id\": 2, \"name\": \"b2\", \"doc\": $U, \"js\": $U, \"blob\": $B, \"tags\": [$U]}}"
        # the other pipeline's placeholder is a value like any other
        echo "{\"id\": 3}|{\"op\": \"c\", \"source\": {\"lsn\": 13}, \"after\": {\"id\": 3, \"name\": \"c\", \"doc\": $O, \"js\": null, \"blob\": null, \"tags\": [$O]}}"
    else
        echo "{\"id\": 1}|{\"op\": \"u\", \"source\": {\"lsn\": 20}, \"after\": {\"id\": 1, \"name\": \"a2\", \"doc\": $U, \"js\": $U, \"blob\": $B, \"tags\": [$U]}}"
        echo "{\"id\": 4}|{\"op\": \"u\", \"source\": {\"lsn\": 21}, \"after\": {\"id\": 4, \"name\": \"d\", \"doc\": $U}}"
    fi | produce_batch "$3"
}
for n in 1 2; do
    round "$DEF" "$CUS" "${T}_def" "$n"
    round "$CUS" "$DEF" "${T}_cus" "$n"
    check_caught_up "ph_def_$SFX"
    check_caught_up "ph_cus_$SFX"
done
rows_of() { sql -c "SELECT string_agg(concat_ws('|', id, name, CASE WHEN doc IN ('$DEF', '$CUS') THEN 'OTHER' ELSE doc END,
                                                js, encode(blob, 'hex'),
                                                CASE WHEN tags IN ('{$DEF}', '{\"$CUS\"}') THEN '{OTHER}' ELSE tags::text END)
                                      || '@' || _kafka_source_position, ' ' ORDER BY id) FROM e2e.ph_$1_$SFX"; }
MODEL='1|a2|big document|{"k": [1, 2]}|deadbeef|{x,y}@20 2|b2|second doc@12 3|c|OTHER|{OTHER}@13'
check "default placeholder: unavailable text, jsonb, bytea and array values keep the replica's" "$MODEL" "$(rows_of def)"
check "custom placeholder: the same rows" "$MODEL" "$(rows_of cus)"
check "the other pipeline's placeholder was written as data, each as sent" \
      "$CUS|$DEF" "$(sql -c "SELECT (SELECT doc FROM e2e.ph_def_$SFX WHERE id = 3) || '|' || (SELECT doc FROM e2e.ph_cus_$SFX WHERE id = 3)")"
check "an update of a missing row without its NOT NULL value: quarantined in both" "ph_cus:4,ph_def:4" \
      "$(sql -c "SELECT string_agg(split_part(p.name, '_', 1) || '_' || split_part(p.name, '_', 2) || ':' || (convert_from(q.key, 'UTF8')::jsonb->>'id'), ',' ORDER BY p.name)
                  FROM kafka_sink.quarantine q JOIN kafka_sink.pipelines p ON p.id = q.pipeline_id WHERE p.name LIKE 'ph\\_%$SFX'")"
# alter: '' goes back to the default
sql -c "SET ROLE ks_e2e; SELECT kafka_sink.alter_pipeline('ph_cus_$SFX', unavailable_value_placeholder => '')" >/dev/null
check "alter_pipeline with '' removes the placeholder" t \
      "$(sql -c "SELECT unavailable_value_placeholder IS NULL FROM kafka_sink.pipelines WHERE name = 'ph_cus_$SFX'")"

for p in $(sql -c "SELECT name FROM kafka_sink.pipelines WHERE name LIKE '%$SFX'"); do
    sql -c "SELECT kafka_sink.drop_pipeline('$p')" >/dev/null
done
finish
