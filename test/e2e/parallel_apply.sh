#!/usr/bin/env bash
# parallel_apply: the batches of a pipeline's workers apply in parallel, and
# the stop/drop fence still holds (issue 17).
#  - with workers => 2, while worker A's batch is held inside its MERGE (a
#    trigger of the target waits for an advisory lock this script holds),
#    worker B commits a batch of its own partition (before: B waited for
#    A's lock on the pipeline's row);
#  - stop() called while A's batch is in flight waits for it: it does not
#    return before that batch committed, and no batch commits after stop()
#    returned (the fence: kafka_sink._fence_batches, EXCLUSIVE, against the
#    batches' SHARE);
#  - batch ids stay unique and last_batch_id is the largest committed one;
#  - kafka_sink._fence_batches called outside the API is refused.
. "$(dirname "$0")/../lib/common.sh"
setup_owner
T="e2e_par_$SFX"
P="par_$SFX"
TAB="e2e.par_$SFX"
KEY=$((RANDOM * 32768 + RANDOM))
HOLDER_APP="par_holder_$SFX"
STOP_APP="par_stop_$SFX"
"$HARNESS" topic-create "$T" 2 >/dev/null 2>&1

cleanup() {
    local rc=$?
    set +e
    trap - EXIT
    sql -c "SELECT pg_terminate_backend(pid) FROM pg_stat_activity
             WHERE application_name IN ('$HOLDER_APP', '$STOP_APP')" >/dev/null 2>&1
    sql -c "SELECT kafka_sink.drop_pipeline('$P', if_exists => true)" >/dev/null 2>&1
    exit $rc
}
trap cleanup EXIT

sql >/dev/null <<SQL
CREATE TABLE $TAB (id bigint PRIMARY KEY, v text);
CREATE FUNCTION e2e.par_hold_$SFX() RETURNS trigger LANGUAGE plpgsql AS \$\$
BEGIN
    IF NEW.v = 'block' THEN
        PERFORM pg_advisory_xact_lock($KEY);
    END IF;
    RETURN NEW;
END \$\$;
CREATE TRIGGER par_hold BEFORE INSERT OR UPDATE ON $TAB FOR EACH ROW EXECUTE FUNCTION e2e.par_hold_$SFX();
ALTER TABLE $TAB OWNER TO ks_e2e;
ALTER FUNCTION e2e.par_hold_$SFX() OWNER TO ks_e2e;
SET ROLE ks_e2e;
SELECT kafka_sink.create_pipeline(name => '$P', bootstrap_servers => '$KS_BOOTSTRAP',
       subscribe => ARRAY['$T'], target => '$TAB', starting_offsets => 'earliest',
       workers => 2, trigger_interval => '100 ms');
SQL

has_row() { [ "$(sql -c "SELECT count(*) FROM $TAB WHERE id = $1")" = 1 ]; }
markers() { sql -c "SELECT count(*) FROM kafka_sink.batches b JOIN kafka_sink.pipeline_definitions p ON p.id = b.pipeline_id WHERE p.name = '$P'"; }

# both workers run and own one partition each; one row through each
poll "SELECT count(DISTINCT worker) = 2 FROM kafka_sink.progress WHERE pipeline = '$P' AND worker IS NOT NULL" 90 || true
check "two workers own the two partitions" 2 \
    "$(sql -c "SELECT count(DISTINCT worker) FROM kafka_sink.progress WHERE pipeline = '$P' AND worker IS NOT NULL")"
echo '100|{"id":100,"v":"warm"}' | produce "$T" -p 0
echo '200|{"id":200,"v":"warm"}' | produce "$T" -p 1
wait_for 60 has_row 100 && wait_for 60 has_row 200 || true
check "both partitions applied" 2 "$(sql -c "SELECT count(*) FROM $TAB WHERE id IN (100, 200)")"

# hold the advisory lock the trigger waits for, from a session of our own
PGAPPNAME="$HOLDER_APP" sql -c "SELECT pg_advisory_lock($KEY)" -c "SELECT pg_sleep(120)" >/dev/null 2>&1 &
HOLDER=$!
poll "SELECT count(*) = 1 FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
       WHERE a.application_name = '$HOLDER_APP' AND l.locktype = 'advisory' AND l.objsubid = 1 AND l.granted" 30 || true

# worker A (partition 0) is held inside its MERGE
echo '101|{"id":101,"v":"block"}' | produce "$T" -p 0
poll "SELECT count(*) = 1 FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
       WHERE a.backend_type = 'kafka_sink worker' AND l.locktype = 'advisory' AND l.objsubid = 1 AND NOT l.granted" 60 || true
check "worker A waits inside its batch" 1 \
    "$(sql -c "SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
               WHERE a.backend_type = 'kafka_sink worker' AND l.locktype = 'advisory' AND l.objsubid = 1 AND NOT l.granted")"

# worker B (partition 1) commits meanwhile
echo '201|{"id":201,"v":"free"}' | produce "$T" -p 1
wait_for 30 has_row 201 || true
check "worker B commits while worker A's batch is in flight" 1 "$(sql -c "SELECT count(*) FROM $TAB WHERE id = 201")"
check "worker A's batch is not committed yet" 0 "$(sql -c "SELECT count(*) FROM $TAB WHERE id = 101")"

# stop() while A's batch is in flight: it waits for that batch
OUT="$(mktemp)"
( PGAPPNAME="$STOP_APP" sql -c "SET ROLE ks_e2e" -c "SELECT kafka_sink.stop('$P')" >/dev/null 2>"$OUT"
  sql -c "SELECT count(*) FROM $TAB WHERE id = 101" >>"$OUT" ) &
STOPPER=$!
poll "SELECT count(*) = 1 FROM pg_stat_activity WHERE application_name = '$STOP_APP' AND wait_event_type = 'Lock'" 30 || true
sleep 2
check "stop() waits while a batch is in flight" "running" "$(kill -0 $STOPPER 2>/dev/null && echo running || echo returned)"
sql -c "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = '$HOLDER_APP'" >/dev/null
wait $HOLDER 2>/dev/null || true
wait $STOPPER || true
check "the batch in flight committed before stop() returned" 1 "$(tail -n 1 "$OUT")"
rm -f "$OUT"
check "the pipeline is stopped" stopped "$(sql -c "SELECT state FROM kafka_sink.pipeline_definitions WHERE name = '$P'")"

# nothing commits after stop() returned
M0="$(markers)"
echo '102|{"id":102,"v":"late"}' | produce "$T" -p 0
echo '202|{"id":202,"v":"late"}' | produce "$T" -p 1
sleep 3
check "no batch commits after stop() returned" "$M0 0" "$(markers) $(sql -c "SELECT count(*) FROM $TAB WHERE id IN (102, 202)")"

check "batch ids are unique and last_batch_id is the largest" t \
    "$(sql -c "SELECT count(*) = count(DISTINCT b.batch_id) AND max(b.batch_id) = p.last_batch_id
                 FROM kafka_sink.batches b JOIN kafka_sink.pipeline_definitions p ON p.id = b.pipeline_id
                WHERE p.name = '$P' GROUP BY p.last_batch_id")"

# started again, it goes on from the checkpoint with new batch ids
sql -c "SET ROLE ks_e2e" -c "SELECT kafka_sink.start('$P')" >/dev/null
wait_for 90 has_row 102 && wait_for 60 has_row 202 || true
check "started again, the rest is applied" 2 "$(sql -c "SELECT count(*) FROM $TAB WHERE id IN (102, 202)")"
check "batch ids still unique, last_batch_id still the largest" t \
    "$(sql -c "SELECT count(*) = count(DISTINCT b.batch_id) AND max(b.batch_id) = p.last_batch_id
                 FROM kafka_sink.batches b JOIN kafka_sink.pipeline_definitions p ON p.id = b.pipeline_id
                WHERE p.name = '$P' GROUP BY p.last_batch_id")"

# the writer's side of the fence is the API's only
ERR="$(sql -c "SET ROLE ks_e2e" -c "SELECT kafka_sink._fence_batches(p.id) FROM kafka_sink.pipeline_definitions p WHERE p.name = '$P'" 2>&1 || true)"
check "_fence_batches outside the API is refused" 1 "$(echo "$ERR" | grep -c 'can only be called by the kafka_sink API' || true)"

finish
