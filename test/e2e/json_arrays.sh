#!/usr/bin/env bash
# json_arrays: a JSON array lands in a PostgreSQL array column through the
# array type's input (issue 12, section 6): int[], text[] with commas,
# quotes, braces and backslashes, numeric[], boolean[], jsonb[] (objects and
# arrays as elements), nested int[][], null elements, empty arrays; a
# ragged nested array, an object inside an int[] and an array into a
# non-array column are quarantined as invalid_value.
. "$(dirname "$0")/../lib/common.sh"
setup_owner
T="e2e_arr_$SFX"
"$HARNESS" topic-create "$T" 1 >/dev/null 2>&1

sql >/dev/null <<SQL
CREATE TABLE e2e.arr_$SFX (id bigint PRIMARY KEY, ia int[], ta text[], na numeric[], ba boolean[],
                           ja jsonb[], m int[][], plain int);
ALTER TABLE e2e.arr_$SFX OWNER TO ks_e2e;
SET ROLE ks_e2e;
SELECT kafka_sink.create_pipeline(name => 'arr_$SFX', bootstrap_servers => '$KS_BOOTSTRAP',
       subscribe => ARRAY['$T'], target => 'e2e.arr_$SFX', starting_offsets => 'earliest');
SQL
cat <<'MSGS' | kcat -P -b "$KS_BOOTSTRAP" -t "$T"
{"id": 1, "ia": [1, 2, null, 3], "ta": ["a,b", "q\"uote", "{brace}", "back\\slash", null, "", "NULL"], "na": [1.5, 2, 1e3, -0.25], "ba": [true, false, null], "ja": [{"a": 1}, [1, 2], "s", 3, null, true], "m": [[1, 2], [3, 4]], "plain": 7}
{"id": 2, "m": [[1], [2, 3]]}
{"id": 3, "ia": [{"a": 1}]}
{"id": 4, "plain": [1, 2]}
{"id": 5, "ia": [], "ta": [], "m": []}
{"id": 6, "ia": [1, "x"]}
MSGS
check "caught up" t "$(sql -c "SELECT kafka_sink.wait('arr_$SFX', '60 s')")"
check "int[] with a null element" t "$(sql -c "SELECT ia = ARRAY[1, 2, NULL, 3] AND ia IS NOT DISTINCT FROM ARRAY[1, 2, NULL, 3] FROM e2e.arr_$SFX WHERE id = 1")"
check "text[] keeps commas, quotes, braces, backslashes, null, empty and the word NULL" t \
      "$(sql -c "SELECT ta IS NOT DISTINCT FROM ARRAY['a,b', 'q\"uote', '{brace}', E'back\\\\slash', NULL, '', 'NULL'] FROM e2e.arr_$SFX WHERE id = 1")"
check "numeric[]" '{1.5,2,1000,-0.25}' "$(sql -c "SELECT na FROM e2e.arr_$SFX WHERE id = 1")"
check "boolean[]" '{t,f,NULL}' "$(sql -c "SELECT ba FROM e2e.arr_$SFX WHERE id = 1")"
check "jsonb[]: each element one JSON value" t \
      "$(sql -c "SELECT ja IS NOT DISTINCT FROM ARRAY['{\"a\": 1}', '[1, 2]', '\"s\"', '3', NULL, 'true']::jsonb[] FROM e2e.arr_$SFX WHERE id = 1")"
check "nested int[][]" '{{1,2},{3,4}}|7' "$(sql -c "SELECT m::text || '|' || plain FROM e2e.arr_$SFX WHERE id = 1")"
check "empty arrays" '{}|{}|{}' "$(sql -c "SELECT ia::text || '|' || ta::text || '|' || m::text FROM e2e.arr_$SFX WHERE id = 5")"
check "ragged, object-in-int[], array-into-int and a non-number in int[] are quarantined as invalid_value" \
      "2:invalid_value|3:invalid_value|4:invalid_value|6:invalid_value" \
      "$(sql -c "SELECT string_agg((convert_from(q.value, 'UTF8')::jsonb->>'id') || ':' || q.reason, '|' ORDER BY q.message_offset)
                   FROM kafka_sink.quarantine q JOIN kafka_sink.pipelines p ON p.id = q.pipeline_id WHERE p.name = 'arr_$SFX'")"
check "the quarantine detail names the field" t \
      "$(sql -c "SELECT bool_and(q.detail ~ 'field \"(m|ia|plain)\"')::text::char FROM kafka_sink.quarantine q JOIN kafka_sink.pipelines p ON p.id = q.pipeline_id WHERE p.name = 'arr_$SFX'")"
sql -c "SELECT kafka_sink.drop_pipeline('arr_$SFX')" >/dev/null
finish
