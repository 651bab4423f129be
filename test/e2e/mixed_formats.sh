#!/usr/bin/env bash
# mixed_formats: one topic of Avro, Protobuf and JSON Schema messages, in
# Confluent's wire format, written by confluent-kafka's own serializers
# (test/e2e/mixed_formats_produce.py) through the test registry, read by one
# pipeline with value_format 'registry' (each schema id's schemaType picks
# the decoder) into one target.
#  - each format's schema changes mid-stream (a field removed, a field
#    added: an Avro default, a proto3 optional, an optional JSON property);
#  - the registry killed while the second versions' ids are not fetched yet:
#    nothing applied past them, nothing quarantined, the status says so;
#    restarted on its port, every message lands;
#  - the target equals the model the producer computed (per key, the fields
#    a message carries overwrite, the others keep their value);
#  - bad frames quarantined by the format their id names: not_wire_format,
#    invalid_avro under an Avro id, invalid_protobuf under a Protobuf id,
#    invalid_json under a JSON Schema id; unknown_schema_id;
#  - value_format 'registry' without a registry is refused;
#  - message_fate and message_fates find a message's row when its key is
#    Protobuf (key_format protobuf), a header (headers.<name>) or the
#    message key's text (kafka.key).
. "$(dirname "$0")/../lib/common.sh"
setup_owner
protobuf_python
PRODUCE="$PY $E2E_DIR/mixed_formats_produce.py"

# ---- the registry (killed and restarted on its port below) ----
USERINFO="ks:mix-pw-$SFX"
registry_start "$USERINFO" "mix_$SFX"

S="mix_$SFX"
T="e2e_mix_$SFX"
P="mix_$SFX"
REGJSON="jsonb_build_object('url', '$REG', 'basic.auth.user.info', '$USERINFO', 'timeout.ms', 2000)"
sql >/dev/null <<SQL
CREATE SCHEMA $S AUTHORIZATION ks_e2e;
SET ROLE ks_e2e;
CREATE TABLE $S.items (id bigint PRIMARY KEY, name text, qty int, fmt text, note text);
SQL
"$HARNESS" topic-create "$T" 1 >/dev/null 2>&1
quarantined() { sql -c "SELECT coalesce(string_agg(reason, ',' ORDER BY message_offset), '') FROM kafka_sink.quarantine q JOIN kafka_sink.pipeline_definitions p ON p.id = q.pipeline_id WHERE p.name = '$P' AND q.replayed_at IS NULL"; }
nquarantined() { sql -c "SELECT count(*) FROM kafka_sink.quarantine q JOIN kafka_sink.pipeline_definitions p ON p.id = q.pipeline_id WHERE p.name = '$P'"; }

check "value_format registry without a schema_registry is refused" "value_format registry needs a schema_registry" \
      "$(sql -c "SET ROLE ks_e2e" -c "SELECT kafka_sink.create_pipeline(name => 'mix_bad_$SFX', bootstrap_servers => '$KS_BOOTSTRAP',
          subscribe => ARRAY['$T'], target => '$S.items', value_format => 'registry')" 2>&1 | sed -n 's/^ERROR:  //p')"

# ---- the frames, by the official serializers, while the registry is up ----
N=300
FR="$REGDIR/frames"
$PRODUCE frames "$REGDIR/work" "$REG" "$USERINFO" "$FR" "$N" > "$REGDIR/produce.log" 2>&1 ||
    { cat "$REGDIR/produce.log"; echo "not ok - the serializers write the frames"; FAILED=$((FAILED + 1)); }
check "three formats, two versions each, on one topic" \
      "avro 1|avro 2|json 1|json 2|protobuf 1|protobuf 2" \
      "$(cut -d' ' -f1,2 "$FR" | sort -u | paste -sd'|')"
check "the registry holds their types" "AVRO|JSON|PROTOBUF" \
      "$(for s in avro json protobuf; do curl -s -u "$USERINFO" "$REG/subjects/mixed-$s/versions/2" |
           python3 -c 'import json,sys; print(json.load(sys.stdin).get("schemaType", "AVRO"))'; done | paste -sd'|')"
# the first version-2 message of any format: the registry goes down before it
FIRST_V2="$(awk '$2 == 2 { print NR - 1; exit }' "$FR")"

sql -c "SET ROLE ks_e2e" -c "SELECT kafka_sink.create_pipeline(name => '$P', bootstrap_servers => '$KS_BOOTSTRAP',
          subscribe => ARRAY['$T'], target => '$S.items', starting_offsets => 'earliest', trigger_interval => '50 ms',
          value_format => 'registry', schema_registry => $REGJSON)" >/dev/null

# ---- version 1 of all three, then bad frames ----
$PRODUCE send "$KS_BOOTSTRAP" "$T" "$FR" 0 "$FIRST_V2"
hexid() { printf '%08x' "$1"; }
id_of() { curl -s -u "$USERINFO" "$REG/subjects/mixed-$1/versions/1" | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])'; }
AVRO_ID="$(id_of avro)"; PB_ID="$(id_of protobuf)"; JS_ID="$(id_of json)"
raw() { $PY -c "
import sys
from confluent_kafka import Producer
p = Producer({'bootstrap.servers': '$KS_BOOTSTRAP'})
p.produce('$T', value=bytes.fromhex(sys.argv[1]), partition=0)
sys.exit(p.flush(30))" "$1"; }
raw 6869                                  # not_wire_format
raw "00$(hexid "$AVRO_ID")02"             # invalid_avro: id 1, then nothing for name
raw "00$(hexid "$PB_ID")000a0141"         # invalid_protobuf: id with wire type 2
raw "00$(hexid "$JS_ID")7b2269"           # invalid_json: {"i
raw "00$(hexid 999)00"                    # unknown_schema_id
poll "SELECT count(*) = 5 FROM kafka_sink.quarantine q JOIN kafka_sink.pipeline_definitions p ON p.id = q.pipeline_id WHERE p.name = '$P'" 60 || true
check "bad frames quarantined by the decoder their schema id's type chose" \
      "not_wire_format,invalid_avro,invalid_protobuf,invalid_json,unknown_schema_id" "$(quarantined)"
check_caught_up "$P"
check "version 1 applied, the pipeline running" "running" "$(sql -c "SELECT state FROM kafka_sink.pipelines WHERE name = '$P'")"

# ---- the registry killed before the second versions' ids are fetched ----
before="$(sql -c "SELECT md5(string_agg(i::text, ',' ORDER BY id)) FROM $S.items i")"
kill -KILL "$REG_PID"; wait "$REG_PID" 2>/dev/null || true
$PRODUCE send "$KS_BOOTSTRAP" "$T" "$FR" "$FIRST_V2" "$N"
poll "SELECT last_error LIKE 'schema registry unavailable%' FROM kafka_sink.status WHERE name = '$P'" 60 || true
check "registry killed: the status says so" t \
      "$(sql -c "SELECT last_error LIKE 'schema registry unavailable%' FROM kafka_sink.status WHERE name = '$P'")"
check "registry killed: nothing applied past it, nothing more quarantined" "$before|5" \
      "$(sql -c "SELECT md5(string_agg(i::text, ',' ORDER BY id)) FROM $S.items i")|$(nquarantined)"
registry_start "$USERINFO" "mix_$SFX" "$REG_PORT"
check_caught_up "$P"

# ---- the target against the model ----
MODEL_JSON="$(python3 -c 'import json,sys; print(json.dumps([json.loads(l) for l in open(sys.argv[1])]))' "$FR.model")"
sql -v model="$MODEL_JSON" >/dev/null <<SQL
SET ROLE ks_e2e;
CREATE TABLE $S.model AS SELECT * FROM jsonb_populate_recordset(NULL::$S.items, :'model');
SQL
check "the target equals the model (three formats, both versions each)" "0|$(wc -l < "$FR.model")" \
      "$(sql -c "SELECT count(*) FROM ((TABLE $S.items EXCEPT TABLE $S.model) UNION ALL (TABLE $S.model EXCEPT TABLE $S.items)) x")|$(sql -c "SELECT count(*) FROM $S.items")"
check "rows last written by each format, notes from version 2" "t|t" \
      "$(sql -c "SELECT count(DISTINCT fmt) = 3 FROM $S.items")|$(sql -c "SELECT count(note) > 0 FROM $S.items")"
check "every message applied or quarantined once: the checkpoint covers them all, 5 quarantined" "$((N + 5))|5" \
      "$(sql -c "SELECT o.next_offset FROM kafka_sink.offsets o JOIN kafka_sink.pipeline_definitions p ON p.id = o.pipeline_id WHERE p.name = '$P'")|$(nquarantined)"
check "the registry's schemas are kept by type" "AVRO|JSON|PROTOBUF" \
      "$(sql -c "SELECT string_agg(DISTINCT schema_type, '|' ORDER BY schema_type) FROM kafka_sink.schemas WHERE registry = '$REG'")"

# ---- message_fate: a Protobuf key, a key from a header, a key from kafka.key ----
# offsets 0..2 of one topic: key 1, then (a later batch) key 1 again and key 2
T2="e2e_mix_keys_$SFX"
"$HARNESS" topic-create "$T2" 1 >/dev/null 2>&1
KEY_ID="$(curl -s -u "$USERINFO" -XPOST -H 'Content-Type: application/json' \
    -d '{"schemaType": "PROTOBUF", "schema": "syntax = \"proto3\"; message K { int64 id = 1; }"}' \
    "$REG/subjects/mixed-key/versions" | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')"
for n in pbkey hdrkey rawkey; do
    sql >/dev/null <<SQL
SET ROLE ks_e2e;
CREATE TABLE $S.$n (id bigint PRIMARY KEY, name text, _kafka_topic text, _kafka_partition int,
                    _kafka_offset bigint, _kafka_batch_id bigint);
SQL
done
make_keyed() {  # NAME EXTRA_ARGS
    sql -c "SET ROLE ks_e2e" -c "SELECT kafka_sink.create_pipeline(name => 'mix_$1_$SFX', bootstrap_servers => '$KS_BOOTSTRAP',
          subscribe => ARRAY['$T2'], target => '$S.$1', starting_offsets => 'earliest', trigger_interval => '50 ms',
          key_columns => ARRAY['id'], value_format => 'registry', schema_registry => $REGJSON,
          bronze => '$S.$1_bronze', $2)" >/dev/null
}
make_keyed pbkey "key_format => 'protobuf'"
make_keyed hdrkey "columns => '{\"id\": \"headers.item\"}'"
# kafka.key: a topic of its own, JSON values, the key's text
T3="e2e_mix_raw_$SFX"
"$HARNESS" topic-create "$T3" 1 >/dev/null 2>&1
sql -c "SET ROLE ks_e2e" -c "SELECT kafka_sink.create_pipeline(name => 'mix_rawkey_$SFX', bootstrap_servers => '$KS_BOOTSTRAP',
          subscribe => ARRAY['$T3'], target => '$S.rawkey', starting_offsets => 'earliest', trigger_interval => '50 ms',
          key_columns => ARRAY['id'], bronze => '$S.rawkey_bronze', columns => '{\"id\": \"kafka.key\"}')" >/dev/null
# the value: Avro version 1 (id 9 in the value, which the keys override), name n<offset>
keyed() {  # ID OFFSET
    $PY -c "
import sys
from confluent_kafka import Producer
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
sys.path.insert(0, '$E2E_DIR')
from mixed_formats_produce import AVRO_V1
ser = AvroSerializer(SchemaRegistryClient({'url': '$REG', 'basic.auth.user.info': '$USERINFO'}), AVRO_V1,
                     conf={'subject.name.strategy': lambda c, r: 'mixed-avro'})
i, off = int(sys.argv[1]), sys.argv[2]
value = ser({'id': 9, 'name': 'n' + off, 'qty': 1, 'fmt': 'avro'}, SerializationContext('mixed', MessageField.VALUE))
p = Producer({'bootstrap.servers': '$KS_BOOTSTRAP'})
key = bytes([0]) + int($KEY_ID).to_bytes(4, 'big') + bytes([0, 8, i])
p.produce('$T2', key=key, value=value, partition=0, headers=[('item', str(i).encode()), ('item', str(i).encode())])
sys.exit(p.flush(30))" "$1" "$2"
}
keyed 1 0
echo '1|{"id": 9, "name": "n0"}' | produce "$T3"
for n in pbkey hdrkey rawkey; do check_caught_up "mix_${n}_$SFX"; done
keyed 1 1; keyed 2 2
printf '%s\n' '1|{"id": 9, "name": "n1"}' '2|{"id": 9, "name": "n2"}' | produce "$T3"
fates() { sql -c "SELECT string_agg(fate, ',' ORDER BY \"offset\") FROM kafka_sink.message_fates('mix_$1_$SFX', '$2', 0, 0, 2)"; }
topic_of() { case "$1" in rawkey) echo "$T3" ;; *) echo "$T2" ;; esac; }
for n in pbkey hdrkey rawkey; do
    check_caught_up "mix_${n}_$SFX"
    check "$n: the rows (model: the last message per key)" "1|n1,2|n2" \
          "$(sql -c "SELECT string_agg(id || '|' || name, ',' ORDER BY id) FROM $S.$n")"
    check "$n: message_fate finds each message's row by its key" "overwritten|applied|applied" \
          "$(for o in 0 1 2; do sql -c "SELECT fate FROM kafka_sink.message_fate('mix_${n}_$SFX', '$(topic_of "$n")', 0, $o)"; done | paste -sd'|')"
    check "$n: message_fates agrees" "overwritten,applied,applied" "$(fates "$n" "$(topic_of "$n")")"
done

for n in "$P" "mix_pbkey_$SFX" "mix_hdrkey_$SFX" "mix_rawkey_$SFX"; do
    sql -c "SET ROLE ks_e2e" -c "SELECT kafka_sink.drop_pipeline('$n')" >/dev/null
done
finish
