#!/usr/bin/env bash
# schema_bombs (issue 23): Avro writer schemas whose naive translation or
# decoding costs far more than their size, and tiny messages that claim
# more than they hold (test/e2e/schema_bombs_gen.py registers them in the
# test registry and writes the frames):
#  - an avro pipeline: a recursive record decodes as deep as its data goes
#    (applied; 70 levels of data is invalid_avro), a chain of named types of
#    10^12 values that take no byte, 2^62 empty records or nulls, a string of
#    2^60 bytes, a union of 2000 nulls, 1000 records of 1500 null fields in
#    a few bytes, a schema whose registry answer is over 8 MB (not a registry
#    outage for ever): each invalid_avro with its detail;
#  - a debezium avro pipeline: the report's event (Value refers to itself
#    twice, an 8-byte event) is applied; a chain whose Connect schema would be
#    2^26 structs is invalid_avro; 40000 records of a type that (and whose
#    field) has 150000 other members, in a 20 kB event, are applied quickly;
#    160000 empty records in a 20 kB event (8 JSON values a byte) are
#    invalid_avro;
#  - a debezium JSON pipeline: an event nesting arrays 100000 levels deep
#    is invalid_json (the parser recurses per level: no stack depth ERROR);
#  - the good messages after them are applied, the pipelines keep running,
#    catch up within a minute, and each worker's peak RSS stays small.
. "$(dirname "$0")/../lib/common.sh"
setup_owner
MAX_HWM_KB="${KS_BOMBS_MAX_HWM_KB:-400000}"

REGDIR="$KS_RUN/registry_bombs_$SFX"
mkdir -p "$REGDIR/frames"
python3 "$REPO/test/tools/schema_registry.py" --port 0 --port-file "$REGDIR/port" \
    --state "$REGDIR/state.json" > "$REGDIR/log" 2>&1 &
REG_PID=$!
stop_registry() { stop_process "$REG_PID"; wait "$REG_PID" 2>/dev/null; }
at_exit stop_registry
for _ in $(seq 50); do [ -s "$REGDIR/port" ] && break; sleep 0.1; done
REG="http://127.0.0.1:$(cat "$REGDIR/port")"
python3 "$E2E_DIR/schema_bombs_gen.py" "$REG" "$REGDIR/frames"

T_PLAIN="e2e_bombs_plain_$SFX"; T_CDC="e2e_bombs_cdc_$SFX"; T_JSON="e2e_bombs_json_$SFX"
for t in "$T_PLAIN" "$T_CDC" "$T_JSON"; do "$HARNESS" topic-create "$t" 1 >/dev/null 2>&1; done
kcat -P -b "$KS_BOOTSTRAP" -t "$T_PLAIN" -p 0 "$REGDIR"/frames/plain/*.bin
kcat -P -b "$KS_BOOTSTRAP" -t "$T_CDC" -p 0 "$REGDIR"/frames/cdc/*.bin
python3 - <<'PY' | produce_batch "$T_JSON"
def ev(i, name, lsn, extra=""):
    return '|{"op": "c", "source": {"lsn": %d}, "after": {"id": %d, "name": "%s"%s}}' % (lsn, i, name, extra)
print(ev(1, "one", 10))
print(ev(2, "deep", 11, ', "x": ' + "[" * 100000 + "]" * 100000))
print(ev(3, "three", 12))
PY

sql >/dev/null <<SQL
SET ROLE ks_e2e;
CREATE TABLE e2e.bombs_plain_$SFX (id bigint PRIMARY KEY, name text);
CREATE TABLE e2e.bombs_cdc_$SFX (id int PRIMARY KEY, name text, _kafka_source_position numeric);
CREATE TABLE e2e.bombs_json_$SFX (LIKE e2e.bombs_cdc_$SFX INCLUDING ALL);
SELECT kafka_sink.create_pipeline(name => 'bombs_plain_$SFX', bootstrap_servers => '$KS_BOOTSTRAP',
    subscribe => ARRAY['$T_PLAIN'], target => 'e2e.bombs_plain_$SFX', starting_offsets => 'earliest',
    value_format => 'avro', schema_registry => jsonb_build_object('url', '$REG'));
SELECT kafka_sink.create_pipeline(name => 'bombs_cdc_$SFX', bootstrap_servers => '$KS_BOOTSTRAP',
    subscribe => ARRAY['$T_CDC'], target => 'e2e.bombs_cdc_$SFX', starting_offsets => 'earliest',
    envelope => 'debezium', value_format => 'avro', schema_registry => jsonb_build_object('url', '$REG'));
SELECT kafka_sink.create_pipeline(name => 'bombs_json_$SFX', bootstrap_servers => '$KS_BOOTSTRAP',
    subscribe => ARRAY['$T_JSON'], target => 'e2e.bombs_json_$SFX', starting_offsets => 'earliest',
    envelope => 'debezium');
SQL

# fates NAME: offset:reason:the detail's first words after its schema id, per quarantine row
fates() {
    sql -c "SELECT coalesce(string_agg(q.message_offset || ':' || q.reason || ':' ||
                   substr(regexp_replace(q.detail, '^.*(schema id [0-9]+|\(id [0-9]+\))[^:]*: ', ''), 1, 30), '|'
                   ORDER BY q.message_offset), '-')
              FROM kafka_sink.quarantine q JOIN kafka_sink.pipelines p ON p.id = q.pipeline_id WHERE p.name = '$1'"
}
hwm_kb() { awk '/^VmHWM/ {print $2}' "/proc/$1/status" 2>/dev/null || echo 0; }

START=$SECONDS
for p in plain cdc json; do
    check "bombs_$p catches up within a minute" t "$(sql -c "SELECT kafka_sink.wait('bombs_${p}_$SFX', '60 s')")"
done
echo "# caught up in $((SECONDS - START)) s"

check "avro: the recursive record is applied by its data, the good messages around the bombs too" \
      "1:one,2:rec,10:ten" \
      "$(sql -c "SELECT string_agg(id || ':' || name, ',' ORDER BY id) FROM e2e.bombs_plain_$SFX")"
check "avro: each bomb is invalid_avro with its detail" \
"2:invalid_avro:the value nests more than 64 l|3:invalid_avro:decoding takes more work than |4:invalid_avro:more array or map items than t|5:invalid_avro:more array or map items than t|6:invalid_avro:a length of 115292150460684697|7:invalid_avro:a union has two branches of th|8:invalid_avro:decoding takes more work than |9:invalid_avro:the registry's answer for it i" \
      "$(fates "bombs_plain_$SFX")"
check "debezium avro: the recursive Value's 8-byte event is applied, the good events too" \
      "1:one,2:-,4:four,5:members" \
      "$(sql -c "SELECT string_agg(id || ':' || coalesce(name, '-'), ',' ORDER BY id) FROM e2e.bombs_cdc_$SFX")"
check "debezium avro: the Connect schema of 2^26 structs and 8 values a byte are invalid_avro" \
      "2:invalid_avro:its Connect schema would be la|4:invalid_avro:the value renders to more JSON" "$(fates "bombs_cdc_$SFX")"
check "debezium json: the event nested 100000 levels deep is invalid_json, the others apply" \
      "1:one,3:three|1:invalid_json:the text nests arrays and obje" \
      "$(sql -c "SELECT string_agg(id || ':' || name, ',' ORDER BY id) FROM e2e.bombs_json_$SFX")|$(fates "bombs_json_$SFX")"
check "the pipelines keep running" "running,running,running" \
      "$(sql -c "SELECT string_agg(state, ',') FROM kafka_sink.pipelines WHERE name IN ('bombs_plain_$SFX', 'bombs_cdc_$SFX', 'bombs_json_$SFX')")"
for p in plain cdc json; do
    pid="$(worker_pid "bombs_${p}_$SFX")"
    kb="$(hwm_kb "$pid")"
    echo "# bombs_$p worker $pid: VmHWM $kb kB"
    check "bombs_$p: the worker's peak RSS stays under $MAX_HWM_KB kB" t \
          "$([ -n "$pid" ] && [ "$kb" -gt 0 ] && [ "$kb" -lt "$MAX_HWM_KB" ] && echo t || echo f)"
done

sql >/dev/null <<SQL
SELECT kafka_sink.drop_pipeline('bombs_plain_$SFX');
SELECT kafka_sink.drop_pipeline('bombs_cdc_$SFX');
SELECT kafka_sink.drop_pipeline('bombs_json_$SFX');
SQL
finish
