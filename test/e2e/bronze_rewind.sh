#!/usr/bin/env bash
# bronze_rewind: reset_offsets back over offsets already landed in bronze
# (one partition to the start, the other to the middle of what it landed),
# then more messages: bronze holds every message exactly once, its rows
# from before the rewind untouched, checked against the messages produced
# (the model: the producer's own lines, not anything the extension says).
. "$(dirname "$0")/../lib/common.sh"
setup_owner
T="e2e_brw_$SFX"
P="brw_$SFX"
B="e2e.brw_raw_$SFX"
MODEL="$KS_RUN/brw_model_$SFX.txt"
"$HARNESS" topic-create "$T" 2 >/dev/null 2>&1

# gen FROM TO PARTITION: lines "key|value", value m<i>, into MODEL too
gen() { for i in $(seq "$1" "$2"); do echo "k$i|m$i"; done | tee -a "$MODEL" | produce "$T" -p "$3"; }
bronze_rows() { sql -c "SELECT count(*) || '|' || count(DISTINCT (topic, partition, \"offset\")) FROM $B"; }
# every value in bronze, sorted, against the model's values, sorted
same_values() {
    diff <(cut -d'|' -f2 "$MODEL" | sort) \
         <(sql -c "SELECT convert_from(value, 'UTF8') FROM $B" | sort) >/dev/null && echo same || echo differ
}
landed() { sql -c "SELECT md5(string_agg(partition || ':' || \"offset\" || ':' || batch_id || ':' || landed_at, ',' ORDER BY partition, \"offset\")) FROM $B WHERE batch_id <= $1"; }

: > "$MODEL"
gen 1 700 0
gen 701 1200 1
sql -c "SET ROLE ks_e2e" -c "SELECT kafka_sink.create_pipeline(name => '$P', bootstrap_servers => '$KS_BOOTSTRAP',
       subscribe => ARRAY['$T'], bronze => '$B', starting_offsets => 'earliest',
       max_offsets_per_batch => 250)" >/dev/null
check_caught_up "$P"
check "bronze: 1200 rows, 1200 distinct offsets" "1200|1200" "$(bronze_rows)"
check "bronze: the produced values" same "$(same_values)"
last="$(sql -c "SELECT max(batch_id) FROM $B")"
before="$(landed "$last")"

# rewind: partition 0 to its start (700 landed), partition 1 to 200 (of 500)
sql -c "SET ROLE ks_e2e" -c "SELECT kafka_sink.stop('$P')" >/dev/null
check "reset_offsets back over landed offsets" "0:700:0 1:500:200" \
      "$(sql -c "SET ROLE ks_e2e" -c "SELECT string_agg(partition || ':' || old_offset || ':' || new_offset, ' ' ORDER BY partition) FROM kafka_sink.reset_offsets('$P', '{\"$T\": {\"0\": 0, \"1\": 200}}')")"
gen 1201 1400 0
gen 1401 1500 1
sql -c "SET ROLE ks_e2e" -c "SELECT kafka_sink.start('$P')" >/dev/null
check_caught_up "$P"
check "the checkpoint is at the end of the log" "$(high_watermarks "$T")" \
      "$(sql -c "SELECT string_agg(partition || ':' || next_offset, ' ' ORDER BY partition) FROM kafka_sink.offsets o JOIN kafka_sink.pipelines p ON p.id = o.pipeline_id WHERE p.name = '$P'")"
check "the rewound range was read again (batches after the reset hold 1300 offsets)" 1300 \
      "$(sql -c "SELECT sum(b.messages) FROM kafka_sink.batches b JOIN kafka_sink.pipelines p ON p.id = b.pipeline_id WHERE p.name = '$P' AND b.batch_id > $last")"
check "after the rewind: 1500 rows, 1500 distinct offsets (no duplicates)" "1500|1500" "$(bronze_rows)"
check "after the rewind: the produced values, each once" same "$(same_values)"
check "the rows landed before the rewind are kept as they were" "$before" "$(landed "$last")"
check "only the new offsets landed after the rewind" "300|0:700:899 1:500:599" \
      "$(sql -c "SELECT count(*) FROM $B WHERE batch_id > $last")|$(sql -c "SELECT string_agg(partition || ':' || lo || ':' || hi, ' ' ORDER BY partition) FROM (SELECT partition, min(\"offset\") lo, max(\"offset\") hi FROM $B WHERE batch_id > $last GROUP BY partition) s")"

sql -c "SELECT kafka_sink.drop_pipeline('$P')" >/dev/null
finish
