#!/usr/bin/env bash
# bronze_rewind: reset_offsets back over offsets already landed in bronze
# (one partition to the start, the other to the middle of what it landed),
# then more messages: bronze holds every message exactly once, its rows
# from before the rewind untouched, checked against the messages produced
# (the model: the producer's own lines, not anything the extension says);
# then a backfill pipeline over all of it, with 100 offsets the pipeline
# has not read yet: only those land, and the pipeline skips them after.
# Twice: into the table create_pipeline makes (no unique key: the worker's
# check per batch and partition keeps a message from landing twice) and
# into one of the shape earlier versions made (the primary key (partition,
# "offset", topic)), which must keep working.  Then two pipelines landing
# the same topic into one such table at the same time, small batches:
# each offset once (the lock per table and partition).  And the look-up
# lineage and message_fate() run on bronze uses the table's index.
# And three topics into one bronze table: each row carries its own topic.
. "$(dirname "$0")/../lib/common.sh"
setup_owner

# scenario SHAPE: new (the table create_pipeline makes) or old (the
# 0.2.0 shape, made here first), each on a topic of its own
scenario() {
SHAPE="$1"
P="brw_${SHAPE}_$SFX"
B="e2e.brw_raw_${SHAPE}_$SFX"
T="e2e_brw_${SHAPE}_$SFX"
MODEL="$KS_RUN/brw_model_${SHAPE}_$SFX.txt"
"$HARNESS" topic-create "$T" 2 >/dev/null 2>&1
if [ "$SHAPE" = old ]; then
    sql -c "SET ROLE ks_e2e" -c "CREATE TABLE $B (topic text COLLATE \"C\" NOT NULL, partition integer NOT NULL,
        \"offset\" bigint NOT NULL, ts timestamptz, key bytea, value bytea, headers jsonb, batch_id bigint NOT NULL,
        landed_at timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (partition, \"offset\", topic))"
fi
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
check "$SHAPE shape: bronze: 1200 rows, 1200 distinct offsets" "1200|1200" "$(bronze_rows)"
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
check "$SHAPE shape: after the rewind: 1500 rows, 1500 distinct offsets (no duplicates)" "1500|1500" "$(bronze_rows)"
check "$SHAPE shape: after the rewind: the produced values, each once" same "$(same_values)"
check "$SHAPE shape: the rows landed before the rewind are kept as they were" "$before" "$(landed "$last")"
check "$SHAPE shape: only the new offsets landed after the rewind" "300|0:700:899 1:500:599" \
      "$(sql -c "SELECT count(*) FROM $B WHERE batch_id > $last")|$(sql -c "SELECT string_agg(partition || ':' || lo || ':' || hi, ' ' ORDER BY partition) FROM (SELECT partition, min(\"offset\") lo, max(\"offset\") hi FROM $B WHERE batch_id > $last GROUP BY partition) s")"

# a backfill over everything landed, while the pipeline is stopped and 100
# new messages wait in partition 0: it lands those 100 only (its own
# checkpoint starts at the beginning, the pipeline's is behind them);
# then the pipeline reads them again and adds nothing
sql -c "SET ROLE ks_e2e" -c "SELECT kafka_sink.stop('$P')" >/dev/null
gen 1501 1600 0
# (batch ids are per pipeline: the backfill's rows are told by landed_at)
t0="$(sql -c "SELECT clock_timestamp()")"
before="$(sql -c "SELECT md5(string_agg(partition || ':' || \"offset\" || ':' || batch_id || ':' || landed_at, ',' ORDER BY partition, \"offset\")) FROM $B")"
sql -c "SET ROLE ks_e2e" -c "SELECT kafka_sink.create_pipeline(name => '${P}_bf', bootstrap_servers => '$KS_BOOTSTRAP',
       subscribe => ARRAY['$T'], bronze => '$B', starting_offsets => 'earliest', ending_offsets => 'latest',
       max_offsets_per_batch => 300)" >/dev/null
poll "SELECT state = 'finished' FROM kafka_sink.pipelines WHERE name = '${P}_bf'" 120 || true
check "$SHAPE shape: the backfill finishes" finished "$(sql -c "SELECT state FROM kafka_sink.pipelines WHERE name = '${P}_bf'")"
check "$SHAPE shape: the backfill read every offset (1600 in its batches)" 1600 \
      "$(sql -c "SELECT sum(b.messages) FROM kafka_sink.batches b JOIN kafka_sink.pipelines p ON p.id = b.pipeline_id WHERE p.name = '${P}_bf'")"
check "$SHAPE shape: after the backfill: 1600 rows, 1600 distinct offsets" "1600|1600" "$(bronze_rows)"
check "$SHAPE shape: the backfill landed only the 100 new offsets" "100|0:900:999" \
      "$(sql -c "SELECT count(*) || '|' || min(partition) || ':' || min(\"offset\") || ':' || max(\"offset\") FROM $B WHERE landed_at > '$t0'")"
check "$SHAPE shape: the rows landed before the backfill are kept as they were" "$before" \
      "$(sql -c "SELECT md5(string_agg(partition || ':' || \"offset\" || ':' || batch_id || ':' || landed_at, ',' ORDER BY partition, \"offset\")) FROM $B WHERE landed_at <= '$t0'")"
t0="$(sql -c "SELECT clock_timestamp()")"
sql -c "SET ROLE ks_e2e" -c "SELECT kafka_sink.start('$P')" >/dev/null
check_caught_up "$P"
check "$SHAPE shape: the pipeline read the backfilled offsets and added nothing" "1600|1600|0" \
      "$(bronze_rows)|$(sql -c "SELECT count(*) FROM $B WHERE landed_at > '$t0'")"
check "$SHAPE shape: after the backfill: the produced values, each once" same "$(same_values)"
sql -c "SELECT kafka_sink.drop_pipeline('${P}_bf')" >/dev/null

sql -c "SELECT kafka_sink.drop_pipeline('$P')" >/dev/null
}

scenario new
check "the new bronze table has no unique index, and an index on (partition, \"offset\")" "false|(partition, \"offset\")" \
      "$(sql -c "SELECT bool_or(i.indisunique) || '|' || string_agg(substring(pg_get_indexdef(i.indexrelid) FROM '\(.*\)'), ',')
                   FROM pg_index i WHERE i.indrelid = 'e2e.brw_raw_new_$SFX'::regclass")"
scenario old

# lineage's look-up of a message in bronze (kafka_sink._bronze_message's
# query) is an index scan, on either shape
for shape in new old; do
    check "$shape shape: the look-up of one message in bronze uses an index" yes \
          "$(sql -c "SET enable_seqscan = off" -c "EXPLAIN SELECT b.ts, b.key, b.value FROM e2e.brw_raw_${shape}_$SFX b WHERE b.topic = 'e2e_brw_${shape}_$SFX' AND b.partition = 0 AND b.\"offset\" = 5" |
             grep -q -E "Index (Only )?Scan|Bitmap Index Scan" && echo yes || echo no)"
    check "$shape shape: and a seq scan is not cheaper by the planner's reckoning" yes \
          "$(sql -c "EXPLAIN SELECT b.ts, b.key, b.value FROM e2e.brw_raw_${shape}_$SFX b WHERE b.topic = 'e2e_brw_${shape}_$SFX' AND b.partition = 0 AND b.\"offset\" = 5" |
             grep -q -E "Index (Only )?Scan|Bitmap Index Scan" && echo yes || echo no)"
done

# two pipelines land the same 4,000 messages into one new-shape table at
# the same time, 50 per batch: every offset once
T2="e2e_brw2_$SFX"
B2="e2e.brw_raw_two_$SFX"
"$HARNESS" topic-create "$T2" 2 >/dev/null 2>&1
for p in 0 1; do seq 1 2000 | sed "s/^/k|m$p-/" | produce "$T2" -p "$p"; done
for i in 1 2; do
    sql -c "SET ROLE ks_e2e" -c "SELECT kafka_sink.create_pipeline(name => 'brw_two${i}_$SFX', bootstrap_servers => '$KS_BOOTSTRAP',
           subscribe => ARRAY['$T2'], bronze => '$B2', starting_offsets => 'earliest', max_offsets_per_batch => 50,
           start => false)" >/dev/null
done
sql -c "SET ROLE ks_e2e" -c "SELECT kafka_sink.start('brw_two1_$SFX'), kafka_sink.start('brw_two2_$SFX')" >/dev/null
check_caught_up "brw_two1_$SFX"
check_caught_up "brw_two2_$SFX"
check "two pipelines at once into one bronze table: 4000 rows, 4000 distinct offsets" "4000|4000" \
      "$(sql -c "SELECT count(*) || '|' || count(DISTINCT (topic, partition, \"offset\")) FROM $B2")"
check "and their values are the messages produced" "$(for p in 0 1; do seq 1 2000 | sed "s/^/m$p-/"; done | sort | md5sum)" \
      "$(sql -c "SELECT convert_from(value, 'UTF8') FROM $B2" | sort | md5sum)"
check "both pipelines landed some of them (their batches overlapped)" "2" \
      "$(sql -c "SELECT count(DISTINCT p.name) FROM $B2 b JOIN kafka_sink.batches x ON x.batch_id = b.batch_id
                  JOIN kafka_sink.pipelines p ON p.id = x.pipeline_id WHERE p.name LIKE 'brw_two%'")"
for i in 1 2; do sql -c "SELECT kafka_sink.drop_pipeline('brw_two${i}_$SFX')" >/dev/null; done
# three topics into one bronze table, 2,500 messages each (more than one
# multi-insert chunk of 1,000 rows), batches of up to 6,000 that mix them:
# every row carries the topic its message came from (the value names it)
# and every row of a batch its transaction's landed_at
B3="e2e.brw_raw_three_$SFX"
for t in a b c; do
    "$HARNESS" topic-create "e2e_brw3${t}_$SFX" 2 >/dev/null 2>&1
    seq 1 2500 | sed "s/^/k|e2e_brw3${t}_$SFX:/" | produce "e2e_brw3${t}_$SFX"
done
sql -c "SET ROLE ks_e2e" -c "SELECT kafka_sink.create_pipeline(name => 'brw_three_$SFX', bootstrap_servers => '$KS_BOOTSTRAP',
       subscribe => ARRAY['e2e_brw3a_$SFX', 'e2e_brw3b_$SFX', 'e2e_brw3c_$SFX'], bronze => '$B3',
       starting_offsets => 'earliest', max_offsets_per_batch => 6000)" >/dev/null
check_caught_up "brw_three_$SFX"
check "three topics into one bronze table: 7500 rows, each (topic, partition, offset) once" "7500|7500" \
      "$(sql -c "SELECT count(*) || '|' || count(DISTINCT (topic, partition, \"offset\")) FROM $B3")"
check "every bronze row's topic is the one its message was produced to" \
      "$(for t in a b c; do seq 1 2500 | sed "s/^/e2e_brw3${t}_$SFX|e2e_brw3${t}_$SFX:/"; done | sort | md5sum)" \
      "$(sql -c "SELECT topic || '|' || convert_from(value, 'UTF8') FROM $B3" | sort | md5sum)"
check "a batch's rows share one landed_at (the batch transaction's now())" "0" \
      "$(sql -c "SELECT count(*) FROM (SELECT batch_id FROM $B3 GROUP BY batch_id HAVING count(DISTINCT landed_at) > 1) x")"
sql -c "SELECT kafka_sink.drop_pipeline('brw_three_$SFX')" >/dev/null
finish
