#!/usr/bin/env bash
# observability: every view on a known data set with known answers.
#  - kafka_sink.progress per partition: committed offset, watermarks, lag;
#  - kafka_sink.status: state, workers, last batch, lag aggregates, and the
#    hot-partition flag when one partition holds most of the lag (made with
#    pause, which keeps the worker and its watermarks but applies nothing);
#  - last_progress / recent_progress: the Spark-like progress records;
#  - lineage: which message and batch produced a row, and what happened to
#    a message: applied, superseded, stale, overwritten, deleted, quarantined;
#  - the worker's pg_stat_activity entry and wait event.
. "$(dirname "$0")/../lib/common.sh"
setup_owner
T="e2e_obs_$SFX"
P="obs_$SFX"
"$HARNESS" topic-create "$T" 3 >/dev/null 2>&1

# batch 1 (known offsets): partition 0 and 1
printf '%s\n' \
  '1|{"order_id":1,"ts":10,"amount":"1.00"}' \
  '1|{"order_id":1,"ts":30,"amount":"3.00"}' \
  '1|{"order_id":1,"ts":20,"amount":"2.00"}' \
  '2|{"order_id":2,"ts":10,"amount":"-5"}' \
  '3|{"order_id":3,"ts":10,"amount":"7.00"}' | produce "$T" -p 0
printf '%s\n' \
  '4|{"order_id":4,"ts":10,"amount":"4.00"}' \
  '5|{"order_id":5,"ts":50,"amount":"5.00"}' | produce "$T" -p 1

sql >/dev/null <<SQL
CREATE TABLE e2e.obs_$SFX (order_id bigint PRIMARY KEY, ts bigint NOT NULL,
    amount numeric(18,2) CHECK (amount >= 0),
    _kafka_topic text, _kafka_partition int, _kafka_offset bigint, _kafka_batch_id bigint);
ALTER TABLE e2e.obs_$SFX OWNER TO ks_e2e;
SET ROLE ks_e2e;
SELECT kafka_sink.create_pipeline(name => '$P', bootstrap_servers => '$KS_BOOTSTRAP',
       subscribe => ARRAY['$T'], target => 'e2e.obs_$SFX', order_column => 'ts',
       starting_offsets => 'earliest', bronze => 'e2e.obs_raw_$SFX',
       key_format => 'string', delete_on_tombstone => true);
SQL
check "caught up" t "$(sql -c "SELECT kafka_sink.wait('$P', '60 s')")"

# ---- progress per partition ----------------------------------------------------
poll "SELECT count(*) = 3 FROM kafka_sink.progress WHERE pipeline = '$P' AND high_watermark IS NOT NULL" 20 || true
check "progress: committed offset, log start, high watermark and lag per partition" \
      "$T|0|5|0|5|0 $T|1|2|0|2|0 $T|2|0|0|0|0" \
      "$(sql -c "SELECT string_agg(concat_ws('|', topic, partition, committed_offset, log_start_offset, high_watermark, lag_messages), ' ' ORDER BY partition) FROM kafka_sink.progress WHERE pipeline = '$P'")"
check "progress: the owning worker is the status's worker" t \
      "$(sql -c "SELECT bool_and(g.worker_pid = s.worker_pids[1]) FROM kafka_sink.progress g JOIN kafka_sink.status s ON s.name = g.pipeline WHERE g.pipeline = '$P'")"

# ---- status ------------------------------------------------------------------------
check "status: state, one worker, last batch, no lag, no hot partition" "running|1|t|0|0|" \
      "$(sql -c "SELECT concat_ws('|', state, workers, last_batch_id > 0, max_offsets_behind, bytes_behind_estimate, coalesce(hot_partition, '')) FROM kafka_sink.status WHERE name = '$P'")"
check "status: recent rates are positive" t \
      "$(sql -c "SELECT input_rows_per_second > 0 AND processed_rows_per_second > 0 FROM kafka_sink.status WHERE name = '$P'")"
check "status: the worker shows in pg_stat_activity, waiting on Kafka" "kafka_sink worker|kafka_sink: $P|Extension" \
      "$(sql -c "SELECT backend_type || '|' || application_name || '|' || coalesce(wait_event_type, '') FROM pg_stat_activity WHERE pid = (SELECT worker_pids[1] FROM kafka_sink.status WHERE name = '$P')")"

# ---- progress records ------------------------------------------------------------
lp="$(sql -c "SELECT kafka_sink.last_progress('$P')")"
check "last_progress: batchId is the last batch" t \
      "$(sql -c "SELECT ('$lp'::jsonb->>'batchId')::bigint = last_batch_id FROM kafka_sink.status WHERE name = '$P'")"
check "last_progress: has the Spark-like fields" t \
      "$(sql -c "SELECT j ? 'numInputRows' AND j ? 'inputRowsPerSecond' AND j ? 'processedRowsPerSecond'
                 AND j->'durationMs' ?& ARRAY['fetch','decode','apply','commit','triggerExecution']
                 AND j->'sources'->0 ?& ARRAY['startOffset','endOffset','latestOffset','metrics']
                 AND j->'sources'->0->'metrics' ?& ARRAY['avgOffsetsBehindLatest','maxOffsetsBehindLatest','estimatedTotalBytesBehindLatest']
                 AND j->'sink' ?& ARRAY['inserted','updated','deleted','stale','superseded','quarantined']
                 FROM (SELECT '$lp'::jsonb AS j) x")"
check "recent_progress: the sink counts add up over all batches" "7|4|0|0|0|2|1" \
      "$(sql -c "SELECT concat_ws('|', sum((j->>'numInputRows')::int), sum((j->'sink'->>'inserted')::int), sum((j->'sink'->>'updated')::int), sum((j->'sink'->>'deleted')::int), sum((j->'sink'->>'stale')::int), sum((j->'sink'->>'superseded')::int), sum((j->'sink'->>'quarantined')::int)) FROM kafka_sink.recent_progress('$P', 100) j")"
check "recent_progress: the end offsets of the last record are the checkpoint" '{"0": 5, "1": 2, "2": 0}' \
      "$(sql -c "SELECT j->'sources'->0->'endOffset'->'$T' FROM kafka_sink.recent_progress('$P', 1) j")"

# ---- batch 2: a stale event, an overwrite, a delete -----------------------------------
printf '%s\n' \
  '5|{"order_id":5,"ts":40,"amount":"9.00"}' \
  '4|{"order_id":4,"ts":60,"amount":"6.00"}' | produce "$T" -p 1
printf '3|\n' | kcat -P -b "$KS_BOOTSTRAP" -t "$T" -p 0 -K '|' -Z
check "caught up after batch 2" t "$(sql -c "SELECT kafka_sink.wait('$P', '60 s')")"

fate() { sql -c "SELECT fate FROM kafka_sink.message_fate('$P', '$T', $1, $2)"; }
check "fate: the winner of its batch is applied" applied "$(fate 0 1)"
check "fate: a message beaten within its batch is superseded" superseded "$(fate 0 0)"
check "fate: an older event than the target's is stale" stale "$(fate 1 2)"
check "fate: an applied message replaced later is overwritten" overwritten "$(fate 1 0)"
check "fate: a message whose row was deleted" deleted "$(fate 0 4)"
check "fate: a quarantined message, with its reason" "quarantined|constraint_violation" \
      "$(sql -c "SELECT fate || '|' || split_part(detail, ':', 1) FROM kafka_sink.message_fate('$P', '$T', 0, 3)")"
check "fate: a message not read yet is pending" pending "$(fate 2 0)"
check "lineage: the row's message and batch, with the raw message from bronze" \
      "$T|1|3|t|{\"order_id\":4,\"ts\":60,\"amount\":\"6.00\"}" \
      "$(sql -c "SELECT concat_ws('|', topic, partition, \"offset\", batch_id > 1, convert_from(message_value, 'UTF8')) FROM kafka_sink.lineage('$P', '{\"order_id\": 4}')")"

# ---- a hot partition while paused ----------------------------------------------------
sql -c "SET ROLE ks_e2e" -c "SELECT kafka_sink.pause('$P')" >/dev/null
poll "SELECT worker_detail = 'paused' FROM kafka_sink.status WHERE name = '$P'" 20 || true
for i in $(seq 1 300); do echo "9|{\"order_id\":9,\"ts\":$i,\"amount\":\"1\"}"; done | produce "$T" -p 0
for i in $(seq 1 20); do echo "8|{\"order_id\":8,\"ts\":$i,\"amount\":\"1\"}"; done | produce "$T" -p 2
poll "SELECT sum(lag_messages) = 320 FROM kafka_sink.progress WHERE pipeline = '$P'" 30 || true
check "paused: the worker stays and the lag shows per partition" "0:300 1:0 2:20" \
      "$(sql -c "SELECT string_agg(partition || ':' || lag_messages, ' ' ORDER BY partition) FROM kafka_sink.progress WHERE pipeline = '$P'")"
check "status: lag aggregates and the hot partition" "paused|106.7|300|$T[0]" \
      "$(sql -c "SELECT concat_ws('|', state, avg_offsets_behind, max_offsets_behind, hot_partition) FROM kafka_sink.status WHERE name = '$P'")"
check "status: estimated bytes behind is positive" t \
      "$(sql -c "SELECT bytes_behind_estimate > 0 FROM kafka_sink.status WHERE name = '$P'")"
check "paused: nothing was applied" 0 "$(sql -c "SELECT count(*) FROM e2e.obs_$SFX WHERE order_id IN (8, 9)")"
sql -c "SET ROLE ks_e2e" -c "SELECT kafka_sink.resume('$P')" >/dev/null
check "resumed: caught up" t "$(sql -c "SELECT kafka_sink.wait('$P', '60 s')")"
poll "SELECT max_offsets_behind = 0 FROM kafka_sink.status WHERE name = '$P'" 20 || true
check "resumed: no lag, no hot partition" "running|0|" \
      "$(sql -c "SELECT concat_ws('|', state, max_offsets_behind, coalesce(hot_partition, '')) FROM kafka_sink.status WHERE name = '$P'")"
check "resumed: the newest events won" "8:20 9:300" \
      "$(sql -c "SELECT string_agg(order_id || ':' || ts, ' ' ORDER BY order_id) FROM e2e.obs_$SFX WHERE order_id IN (8, 9)")"

# ---- retention of batch markers ---------------------------------------------------------
sql -c "ALTER SYSTEM SET kafka_sink.keep_batches = 5" -c "ALTER SYSTEM SET kafka_sink.keep_batches_for = 0" \
    -c "SELECT pg_reload_conf()" >/dev/null
R="e2e_ret_$SFX"
"$HARNESS" topic-create "$R" 1 >/dev/null 2>&1
sql >/dev/null <<SQL
CREATE TABLE e2e.ret_$SFX (id bigint PRIMARY KEY);
ALTER TABLE e2e.ret_$SFX OWNER TO ks_e2e;
SET ROLE ks_e2e;
SELECT kafka_sink.create_pipeline(name => 'ret_$SFX', bootstrap_servers => '$KS_BOOTSTRAP',
       subscribe => ARRAY['$R'], target => 'e2e.ret_$SFX', starting_offsets => 'earliest',
       max_offsets_per_batch => 1);
SQL
for i in $(seq 1 70); do echo "$i|{\"id\":$i}"; done | produce "$R"
check "retention: caught up" t "$(sql -c "SELECT kafka_sink.wait('ret_$SFX', '60 s')")"
check "retention: in 70 batches of one message" 70 "$(sql -c "SELECT last_batch_id FROM kafka_sink.pipelines WHERE name = 'ret_$SFX'")"
check "retention: markers outside the last keep_batches were pruned at batch 64, the rest kept" "60|5|70" \
      "$(sql -c "SELECT min(batch_id) || '|' || count(*) FILTER (WHERE batch_id <= 64) || '|' || max(batch_id) FROM kafka_sink.batches b JOIN kafka_sink.pipelines p ON p.id = b.pipeline_id WHERE p.name = 'ret_$SFX'")"
check "retention: every message applied" 70 "$(sql -c "SELECT count(*) FROM e2e.ret_$SFX")"
sql -c "ALTER SYSTEM RESET kafka_sink.keep_batches" -c "ALTER SYSTEM RESET kafka_sink.keep_batches_for" \
    -c "SELECT pg_reload_conf()" >/dev/null

sql -c "SELECT kafka_sink.drop_pipeline('$P')" -c "SELECT kafka_sink.drop_pipeline('ret_$SFX')" >/dev/null
finish
