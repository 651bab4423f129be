#!/usr/bin/env bash
# batching_knobs: min_offsets_per_batch with max_trigger_delay (Spark's
# minOffsetsPerTrigger and maxTriggerDelay) on a bursty topic.
#  - 250 messages in bursts of 50: every batch holds at least 100, except a
#    tail that waited max_trigger_delay after the previous batch;
#  - 30 messages: no batch until max_trigger_delay after the previous one,
#    then one batch with the 30;
#  - paused while a batch waits for its minimum: the pause is honoured, nothing
#    is applied, and resuming loses nothing;
#  - a bounded pipeline whose tail is smaller than the minimum still finishes
#    (its max_trigger_delay is an hour).
. "$(dirname "$0")/../lib/common.sh"
setup_owner
T="e2e_knobs_$SFX"
TB="e2e_knobs_b_$SFX"
P="knobs_$SFX"
PB="knobs_b_$SFX"
"$HARNESS" topic-create "$T" 3 >/dev/null 2>&1
"$HARNESS" topic-create "$TB" 3 >/dev/null 2>&1

produce_range() {  # TOPIC FROM TO: message i has key i
    produce_py "$1" "
for i in range($2, $3 + 1):
    print('%d|{\"id\":%d}' % (i, i))"
}
as_owner() { sql -c "SET ROLE ks_e2e" -c "$1" >/dev/null; }
count() { sql -c "SELECT count(*) FROM e2e.$1"; }
batches() {  # the sizes of P's batches that applied messages, in order
    sql -c "SELECT string_agg(b.messages::text, ' ' ORDER BY b.batch_id) FROM kafka_sink.batches b
            JOIN kafka_sink.pipelines p ON p.id = b.pipeline_id WHERE p.name = '$P' AND b.messages > 0"
}

sql >/dev/null <<SQL
CREATE TABLE e2e.knobs_$SFX (seq bigserial PRIMARY KEY, id bigint, _kafka_partition int, _kafka_offset bigint);
CREATE TABLE e2e.knobs_b_$SFX (seq bigserial PRIMARY KEY, id bigint, _kafka_partition int, _kafka_offset bigint);
ALTER TABLE e2e.knobs_$SFX OWNER TO ks_e2e;
ALTER TABLE e2e.knobs_b_$SFX OWNER TO ks_e2e;
SET ROLE ks_e2e;
SELECT kafka_sink.create_pipeline(name => '$P', bootstrap_servers => '$KS_BOOTSTRAP',
       subscribe => ARRAY['$T'], target => 'e2e.knobs_$SFX', mode => 'append',
       starting_offsets => 'earliest', min_offsets_per_batch => 100, max_trigger_delay => '5 s');
SQL
# the worker runs and has checkpointed its partitions
poll "SELECT count(*) = 3 FROM kafka_sink.offsets o JOIN kafka_sink.pipelines p ON p.id = o.pipeline_id WHERE p.name = '$P'" 60 || true

# ---- 250 messages in bursts of 50 -------------------------------------------------
for b in 0 1 2 3 4; do
    produce_range "$T" $((b * 50 + 1)) $((b * 50 + 50))
    sleep 0.3
done
poll "SELECT count(*) = 250 FROM e2e.knobs_$SFX" 60 || true
check "250 in bursts: all applied" 250 "$(count "knobs_$SFX")"
echo "# batch sizes: $(batches)"
check "250 in bursts: every batch but the last holds at least min_offsets_per_batch (100)" t \
      "$(sql -c "SELECT coalesce(bool_and(b.messages >= 100), true) FROM kafka_sink.batches b
                 JOIN kafka_sink.pipelines p ON p.id = b.pipeline_id
                 WHERE p.name = '$P' AND b.messages > 0
                   AND b.batch_id < (SELECT max(x.batch_id) FROM kafka_sink.batches x WHERE x.pipeline_id = p.id AND x.messages > 0)")"
check "250 in bursts: the last holds at least 100 or waited max_trigger_delay after the one before" t \
      "$(sql -c "SELECT b.messages >= 100 OR b.started_at - lag(b.started_at) OVER w >= interval '4.5 s'
                 FROM kafka_sink.batches b JOIN kafka_sink.pipelines p ON p.id = b.pipeline_id
                 WHERE p.name = '$P' AND b.messages > 0 WINDOW w AS (ORDER BY b.batch_id)
                 ORDER BY b.batch_id DESC LIMIT 1")"

# ---- 30 messages: one batch, max_trigger_delay after the previous one ------------------
produce_range "$T" 251 280
t_produced="$(sql -c "SELECT clock_timestamp()")"
sleep 1
check "30 messages: no batch a second later" 250 "$(count "knobs_$SFX")"
poll "SELECT count(*) = 280 FROM e2e.knobs_$SFX" 30 || true
check "30 messages: applied in one batch of 30" "30" "$(batches | awk '{ print $NF }')"
check "30 messages: the batch waited for max_trigger_delay (5 s after the previous batch), not for the messages" "t|t" \
      "$(sql -c "SELECT concat_ws('|', b.started_at - lag(b.started_at) OVER w >= interval '4.5 s',
                                       b.started_at - '$t_produced'::timestamptz >= interval '1 s')
                 FROM kafka_sink.batches b JOIN kafka_sink.pipelines p ON p.id = b.pipeline_id
                 WHERE p.name = '$P' AND b.messages > 0 WINDOW w AS (ORDER BY b.batch_id)
                 ORDER BY b.batch_id DESC LIMIT 1")"

# ---- paused while waiting for the minimum -----------------------------------------------
as_owner "SELECT kafka_sink.alter_pipeline('$P', max_trigger_delay => '1 hour')"
poll "SELECT coalesce(worker_detail, '') = '' AND workers = 1 FROM kafka_sink.status WHERE name = '$P'" 30 || true
sleep 2
produce_range "$T" 281 310
sleep 2
check "waiting for the minimum: nothing applied" 280 "$(count "knobs_$SFX")"
as_owner "SELECT kafka_sink.pause('$P')"
check "waiting for the minimum, a pause is honoured" t \
      "$(poll "SELECT worker_detail = 'paused' FROM kafka_sink.status WHERE name = '$P'" 20 && echo t || echo f)"
check "paused: nothing applied" 280 "$(count "knobs_$SFX")"
as_owner "SELECT kafka_sink.resume('$P')"
as_owner "SELECT kafka_sink.alter_pipeline('$P', min_offsets_per_batch => 0)"
check "resumed without a minimum: caught up" t "$(sql -c "SELECT kafka_sink.wait('$P', '60 s')")"
check "every message exactly once" "310|310|1|310" \
      "$(sql -c "SELECT concat_ws('|', count(*), count(DISTINCT (_kafka_partition, _kafka_offset)), min(id), max(id)) FROM e2e.knobs_$SFX")"

# ---- a bounded pipeline with a tail smaller than the minimum finishes ---------------------
produce_range "$TB" 1 30
as_owner "SELECT kafka_sink.create_pipeline(name => '$PB', bootstrap_servers => '$KS_BOOTSTRAP',
       subscribe => ARRAY['$TB'], target => 'e2e.knobs_b_$SFX', mode => 'append',
       starting_offsets => 'earliest', ending_offsets => 'latest',
       min_offsets_per_batch => 100, max_trigger_delay => '1 hour')"
check "bounded, 30 messages, minimum 100, delay 1 hour: finished" finished \
      "$(poll "SELECT state = 'finished' FROM kafka_sink.pipelines WHERE name = '$PB'" 60 || true; sql -c "SELECT state FROM kafka_sink.pipelines WHERE name = '$PB'")"
check "bounded: all 30 applied" 30 "$(count "knobs_b_$SFX")"

as_owner "SELECT kafka_sink.drop_pipeline('$P')"
as_owner "SELECT kafka_sink.drop_pipeline('$PB')"
finish
