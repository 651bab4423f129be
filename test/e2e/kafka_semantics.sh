#!/usr/bin/env bash
# kafka_semantics: what the real broker does to a pipeline.
#  - read_committed: messages of aborted producer transactions never reach
#    the target, and transaction markers leave no gap in the checkpoint;
#  - data loss: fail_on_data_loss = true stops the pipeline in 'failed' with
#    an error naming topic, partition, expected and earliest offsets; false
#    records the gap in data_loss and goes on from the earliest offset;
#  - a topic deleted and created again (the checkpoint past the new log's
#    end): fails with fail_on_data_loss = true, is recorded as a 'reset' and
#    read from the new log's start with false;
#  - a partition added to a subscribed topic is picked up;
#  - an unreachable broker is visible in status, and the pipeline recovers
#    on its own when the broker returns.
. "$(dirname "$0")/../lib/common.sh"
setup_owner
sql -c "ALTER SYSTEM SET kafka_sink.metadata_refresh_interval = '500ms'" -c "SELECT pg_reload_conf()" >/dev/null

# ---- transactions ---------------------------------------------------------
TXN_BIN="$KS_RUN/txn_producer"
gcc -O1 -o "$TXN_BIN" "$REPO/test/tools/txn_producer.c" $(pkg-config --cflags --libs rdkafka)
T="e2e_txn_$SFX"
"$HARNESS" topic-create "$T" 1 >/dev/null 2>&1
committed="$("$TXN_BIN" "$KS_BOOTSTRAP" "$T" "txid-$SFX" c3,a4,c2,a1,a2,c5 | sort -n | paste -sd,)"
sql >/dev/null <<SQL
CREATE TABLE e2e.txn_$SFX (k int PRIMARY KEY, fate text);
ALTER TABLE e2e.txn_$SFX OWNER TO ks_e2e;
SET ROLE ks_e2e;
SELECT kafka_sink.create_pipeline(name => 'txn_$SFX', bootstrap_servers => '$KS_BOOTSTRAP',
       subscribe => ARRAY['$T'], target => 'e2e.txn_$SFX', starting_offsets => 'earliest');
SQL
check "read_committed: the pipeline catches up" t "$(sql -c "SELECT kafka_sink.wait('txn_$SFX', '60 s')")"
check "only committed transactions reach the target" "$committed" \
      "$(sql -c "SELECT string_agg(k::text, ',' ORDER BY k) FROM e2e.txn_$SFX")"
check "no aborted message was applied" 0 "$(sql -c "SELECT count(*) FROM e2e.txn_$SFX WHERE fate <> 'committed'")"
hw="$("$HARNESS" topic-offsets "$T" 2>/dev/null | awk -F'\t' '$1==0{print $2}')"
check "the checkpoint reaches the high watermark past the transaction markers" "$hw" \
      "$(sql -c "SELECT next_offset FROM kafka_sink.offsets o JOIN kafka_sink.pipelines p ON p.id = o.pipeline_id WHERE p.name = 'txn_$SFX'")"
check "batch markers count only the committed messages" 10 \
      "$(sql -c "SELECT sum(messages) FROM kafka_sink.batches b JOIN kafka_sink.pipelines p ON p.id = b.pipeline_id WHERE p.name = 'txn_$SFX'")"

# ---- data loss --------------------------------------------------------------
# loss_setup NAME: topic e2e_NAME_SFX with k = 1..10, a pipeline NAME_SFX
# into e2e.NAME_SFX that read them all, stopped
loss_setup() {
    local name="$1_$SFX" topic="e2e_$1_$SFX"
    "$HARNESS" topic-create "$topic" 1 >/dev/null 2>&1
    for i in $(seq 1 10); do echo "$i	{\"k\":$i}"; done | kcat -P -b "$KS_BOOTSTRAP" -t "$topic" -p 0 -K '	'
    sql >/dev/null <<SQL
CREATE TABLE e2e.$name (k int PRIMARY KEY);
ALTER TABLE e2e.$name OWNER TO ks_e2e;
SET ROLE ks_e2e;
SELECT kafka_sink.create_pipeline(name => '$name', bootstrap_servers => '$KS_BOOTSTRAP',
       subscribe => ARRAY['$topic'], target => 'e2e.$name', starting_offsets => 'earliest');
SELECT kafka_sink.wait('$name', '60 s');
SELECT kafka_sink.stop('$name');
SQL
    poll "SELECT worker_pids IS NULL FROM kafka_sink.status WHERE name = '$name'" 20 || true
}
T="e2e_loss_$SFX"
loss_setup loss
for i in $(seq 11 20); do echo "$i	{\"k\":$i}"; done | kcat -P -b "$KS_BOOTSTRAP" -t "$T" -p 0 -K '	'
"$HARNESS" delete-records "$T" 0 15 >/dev/null 2>&1
sql -c "SET ROLE ks_e2e" -c "SELECT kafka_sink.start('loss_$SFX')" >/dev/null
poll "SELECT state = 'failed' FROM kafka_sink.pipelines WHERE name = 'loss_$SFX'" 30 || true
check "fail_on_data_loss = true: the pipeline fails" failed \
      "$(sql -c "SELECT state FROM kafka_sink.pipelines WHERE name = 'loss_$SFX'")"
check "the error names topic, partition, expected and earliest offsets" \
      "data loss on topic \"$T\" partition 0: expected offset 10, earliest available offset 15" \
      "$(sql -c "SELECT last_error FROM kafka_sink.status WHERE name = 'loss_$SFX'")"
check "nothing past the gap was applied" 10 "$(sql -c "SELECT count(*) FROM e2e.loss_$SFX")"
check "the checkpoint did not move" 10 \
      "$(sql -c "SELECT next_offset FROM kafka_sink.offsets o JOIN kafka_sink.pipelines p ON p.id = o.pipeline_id WHERE p.name = 'loss_$SFX'")"
sql -c "SET ROLE ks_e2e" -c "SELECT kafka_sink.alter_pipeline('loss_$SFX', fail_on_data_loss => false)" \
    -c "SELECT kafka_sink.start('loss_$SFX')" >/dev/null
check "fail_on_data_loss = false: the pipeline goes on" t "$(sql -c "SELECT kafka_sink.wait('loss_$SFX', '60 s')")"
check "the gap is recorded in data_loss" "$T|0|10|15" \
      "$(sql -c "SELECT topic, partition, expected_offset, available_offset FROM kafka_sink.data_loss d JOIN kafka_sink.pipelines p ON p.id = d.pipeline_id WHERE p.name = 'loss_$SFX'")"
check "reading continued from the earliest available offset" "1-10,16-20" \
      "$(sql -c "SELECT min(k) FILTER (WHERE k <= 10) || '-' || max(k) FILTER (WHERE k <= 10) || ',' || min(k) FILTER (WHERE k > 10) || '-' || max(k) FROM e2e.loss_$SFX")"

# ---- the topic deleted and created again ---------------------------------------
# The checkpoint (10) is then past the end of the new log (3 messages): with
# fail_on_data_loss = true the pipeline fails and says so; with false it
# records a 'reset' in data_loss and reads the new log from its start.
T="e2e_reset_$SFX"
loss_setup reset
"$HARNESS" topic-delete "$T" >/dev/null 2>&1
for _ in $(seq 1 50); do
    "$HARNESS" topic-create "$T" 1 >/dev/null 2>&1 && break
    sleep 0.2
done
for i in 101 102 103; do echo "$i	{\"k\":$i}"; done | kcat -P -b "$KS_BOOTSTRAP" -t "$T" -p 0 -K '	'
sql -c "SET ROLE ks_e2e" -c "SELECT kafka_sink.start('reset_$SFX')" >/dev/null
poll "SELECT state = 'failed' FROM kafka_sink.pipelines WHERE name = 'reset_$SFX'" 30 || true
check "topic created again, fail_on_data_loss = true: the pipeline fails" failed \
      "$(sql -c "SELECT state FROM kafka_sink.pipelines WHERE name = 'reset_$SFX'")"
check "the error says the checkpoint is past the end of the log" \
      "data loss on topic \"$T\" partition 0: expected offset 10 is past the end of the log (offsets 0 to 3): the topic was deleted and created again, or its log was truncated" \
      "$(sql -c "SELECT last_error FROM kafka_sink.status WHERE name = 'reset_$SFX'")"
check "nothing of the new log was applied" 10 "$(sql -c "SELECT count(*) FROM e2e.reset_$SFX")"
sql -c "SET ROLE ks_e2e" -c "SELECT kafka_sink.alter_pipeline('reset_$SFX', fail_on_data_loss => false)" \
    -c "SELECT kafka_sink.start('reset_$SFX')" >/dev/null
check "fail_on_data_loss = false: the pipeline goes on" t "$(sql -c "SELECT kafka_sink.wait('reset_$SFX', '60 s')")"
check "the reset is recorded in data_loss" "$T|0|10|0|reset" \
      "$(sql -c "SELECT topic, partition, expected_offset, available_offset, kind FROM kafka_sink.data_loss d JOIN kafka_sink.pipelines p ON p.id = d.pipeline_id WHERE p.name = 'reset_$SFX'")"
check "the new log was read from its start" "1-10,101-103" \
      "$(sql -c "SELECT min(k) FILTER (WHERE k <= 10) || '-' || max(k) FILTER (WHERE k <= 10) || ',' || min(k) FILTER (WHERE k > 10) || '-' || max(k) FROM e2e.reset_$SFX")"
check "the checkpoint is the new log's end" 3 \
      "$(sql -c "SELECT next_offset FROM kafka_sink.offsets o JOIN kafka_sink.pipelines p ON p.id = o.pipeline_id WHERE p.name = 'reset_$SFX'")"
check "the batch's range starts over at the new log's start" "0|3" \
      "$(sql -c "SELECT g->>'start', g->>'end' FROM kafka_sink.batches b JOIN kafka_sink.pipelines p ON p.id = b.pipeline_id, jsonb_array_elements(b.ranges) g WHERE p.name = 'reset_$SFX' AND b.batch_id = (SELECT max(batch_id) FROM kafka_sink.batches b2 WHERE b2.pipeline_id = p.id)")"

# ---- a partition added to a subscribed topic ---------------------------------
T="e2e_parts_$SFX"
"$HARNESS" topic-create "$T" 2 >/dev/null 2>&1
sql >/dev/null <<SQL
CREATE TABLE e2e.parts_$SFX (k int PRIMARY KEY, p int);
ALTER TABLE e2e.parts_$SFX OWNER TO ks_e2e;
SET ROLE ks_e2e;
SELECT kafka_sink.create_pipeline(name => 'parts_$SFX', bootstrap_servers => '$KS_BOOTSTRAP',
       subscribe => ARRAY['$T'], target => 'e2e.parts_$SFX', starting_offsets => 'earliest');
SQL
echo '1	{"k":1,"p":0}' | kcat -P -b "$KS_BOOTSTRAP" -t "$T" -p 0 -K '	'
echo '2	{"k":2,"p":1}' | kcat -P -b "$KS_BOOTSTRAP" -t "$T" -p 1 -K '	'
check "two partitions: caught up" t "$(sql -c "SELECT kafka_sink.wait('parts_$SFX', '60 s')")"
check "two partitions are read" 2 "$(sql -c "SELECT count(*) FROM e2e.parts_$SFX")"
"$HARNESS" topic-add-partitions "$T" 3 >/dev/null 2>&1
echo '3	{"k":3,"p":2}' | kcat -P -b "$KS_BOOTSTRAP" -t "$T" -p 2 -K '	'
poll "SELECT count(*) = 3 FROM e2e.parts_$SFX" 30 || true
check "a partition added later is picked up, from its beginning" "0,1,2" \
      "$(sql -c "SELECT string_agg(p::text, ',' ORDER BY p) FROM e2e.parts_$SFX")"

# ---- the broker goes away and comes back --------------------------------------
"$HARNESS" kafka-stop >/dev/null 2>&1
if poll "SELECT worker_detail <> '' FROM kafka_sink.status WHERE name = 'parts_$SFX'" 60; then r=t; else r=f; fi
check "an unreachable broker shows in status" t "$r"
check "the pipeline stays running while the broker is down" running \
      "$(sql -c "SELECT state FROM kafka_sink.pipelines WHERE name = 'parts_$SFX'")"
"$HARNESS" kafka-start >/dev/null 2>&1
echo '4	{"k":4,"p":0}' | kcat -P -b "$KS_BOOTSTRAP" -t "$T" -p 0 -K '	'
check "it recovers on its own when the broker returns" t "$(sql -c "SELECT kafka_sink.wait('parts_$SFX', '90 s')")"
check "the message produced after the outage is applied" 4 "$(sql -c "SELECT count(*) FROM e2e.parts_$SFX")"
check "the status detail clears after recovery" "" \
      "$(sql -c "SELECT coalesce(worker_detail, '') FROM kafka_sink.status WHERE name = 'parts_$SFX'")"

for p in txn loss parts; do sql -c "SELECT kafka_sink.drop_pipeline('${p}_$SFX')" >/dev/null; done
sql -c "ALTER SYSTEM RESET kafka_sink.metadata_refresh_interval" -c "SELECT pg_reload_conf()" >/dev/null
finish
