#!/usr/bin/env bash
# operations: changing pipelines while they run.
#  - alter_pipeline takes effect on running workers (they restart on the new
#    definition) without losing or repeating data;
#  - workers => N and back, during ingestion: each partition has one owner,
#    no duplicates and no gaps (an append pipeline counts every message);
#  - the target is held by OID: renaming it is safe;
#  - reset_offsets only on a stopped pipeline, recorded in offset_resets;
#  - wait_for() (a procedure) holds no snapshot while it waits, wait() does;
#  - a backfill: a bounded pipeline with its own checkpoint, from explicit
#    starting to ending offsets, that finishes by itself, shows its progress,
#    and never touches the production pipeline's checkpoint.
. "$(dirname "$0")/../lib/common.sh"
setup_owner
T="e2e_ops_$SFX"
"$HARNESS" topic-create "$T" 4 >/dev/null 2>&1
produce_range() {  # FROM TO: message i has key i
    produce_py "$T" "
import sys
for i in range($1, $2 + 1):
    print('%d|{\"id\":%d,\"ts\":%d}' % (i, i, i))"
}
offsets_of() { sql -c "SELECT string_agg(partition || ':' || next_offset, ' ' ORDER BY partition) FROM kafka_sink.offsets o JOIN kafka_sink.pipelines p ON p.id = o.pipeline_id WHERE p.name = '$1'"; }

sql >/dev/null <<SQL
CREATE TABLE e2e.ops_log_$SFX (seq bigserial PRIMARY KEY, id bigint, ts bigint, _kafka_partition int, _kafka_offset bigint);
CREATE TABLE e2e.ops_cur_$SFX (id bigint PRIMARY KEY, ts bigint);
ALTER TABLE e2e.ops_log_$SFX OWNER TO ks_e2e;
ALTER TABLE e2e.ops_cur_$SFX OWNER TO ks_e2e;
SET ROLE ks_e2e;
SELECT kafka_sink.create_pipeline(name => 'log_$SFX', bootstrap_servers => '$KS_BOOTSTRAP',
       subscribe => ARRAY['$T'], target => 'e2e.ops_log_$SFX', mode => 'append',
       starting_offsets => 'earliest', max_offsets_per_batch => 500);
SELECT kafka_sink.create_pipeline(name => 'cur_$SFX', bootstrap_servers => '$KS_BOOTSTRAP',
       subscribe => ARRAY['$T'], target => 'e2e.ops_cur_$SFX', order_column => 'ts',
       starting_offsets => 'earliest');
SQL

# ---- workers => N during ingestion ----------------------------------------------
produce_range 1 5000 &
sleep 1
sql -c "SET ROLE ks_e2e" -c "SELECT kafka_sink.alter_pipeline('log_$SFX', workers => 3)" >/dev/null
poll "SELECT workers = 3 FROM kafka_sink.status WHERE name = 'log_$SFX'" 30 || true
check "workers => 3: three workers run" 3 "$(sql -c "SELECT workers FROM kafka_sink.status WHERE name = 'log_$SFX'")"
# (each new worker publishes its partitions once it has assigned them)
poll "SELECT count(DISTINCT (topic, partition)) = 4 FROM kafka_sink.progress WHERE pipeline = 'log_$SFX' AND worker IS NOT NULL" 30 || true
check "each partition has exactly one owning worker" "4|4" \
      "$(sql -c "SELECT count(*) || '|' || count(DISTINCT (topic, partition)) FROM kafka_sink.progress WHERE pipeline = 'log_$SFX' AND worker IS NOT NULL")"
wait
produce_range 5001 8000 &
sleep 1
sql -c "SET ROLE ks_e2e" -c "SELECT kafka_sink.alter_pipeline('log_$SFX', workers => 2, max_offsets_per_batch => 100)" >/dev/null
wait
poll "SELECT workers = 2 FROM kafka_sink.status WHERE name = 'log_$SFX'" 30 || true
check "workers => 2 took effect" 2 "$(sql -c "SELECT workers FROM kafka_sink.status WHERE name = 'log_$SFX'")"
check "after resizing: caught up" t "$(sql -c "SELECT kafka_sink.wait('log_$SFX', '120 s')")"
check "no duplicates and no gaps across the resizes" "8000|8000|1|8000" \
      "$(sql -c "SELECT count(*) || '|' || count(DISTINCT id) || '|' || min(id) || '|' || max(id) FROM e2e.ops_log_$SFX")"
check "no message appended twice (by coordinates)" 8000 \
      "$(sql -c "SELECT count(DISTINCT (_kafka_partition, _kafka_offset)) FROM e2e.ops_log_$SFX")"
altered_at="$(sql -c "SELECT updated_at FROM kafka_sink.pipelines WHERE name = 'log_$SFX'")"
python3 -c "
for i in range(8101, 8501):
    print('%d|{\"id\":%d,\"ts\":%d}' % (i, i, i))" > "$KS_RUN/ops_$SFX.txt"
produce "$T" -p 0 < "$KS_RUN/ops_$SFX.txt"
check "caught up with 400 more" t "$(sql -c "SELECT kafka_sink.wait('log_$SFX', '60 s')")"
check "the new batch limit applies: batches of at most 100" "true|true" \
      "$(sql -c "SELECT (max(messages) <= 100) || '|' || (count(*) >= 4) FROM kafka_sink.batches b JOIN kafka_sink.pipelines p ON p.id = b.pipeline_id WHERE p.name = 'log_$SFX' AND b.messages > 0 AND b.started_at > '$altered_at'")"

# ---- rename the target while running ---------------------------------------------
sql -c "ALTER TABLE e2e.ops_cur_$SFX RENAME TO ops_cur_renamed_$SFX" >/dev/null
produce_range 8001 8100
check "renamed target: caught up" t "$(sql -c "SELECT kafka_sink.wait('cur_$SFX', '60 s')")"
check "the renamed target keeps receiving rows (held by OID)" 8500 "$(sql -c "SELECT count(*) FROM e2e.ops_cur_renamed_$SFX")"
check "the pipeline shows the new name" "e2e.ops_cur_renamed_$SFX" "$(sql -c "SELECT target FROM kafka_sink.pipelines WHERE name = 'cur_$SFX'")"

# ---- reset_offsets ------------------------------------------------------------------
check "reset_offsets refuses a running pipeline" 55000 \
      "$(sql -c "SET ROLE ks_e2e" -c "DO \$\$ BEGIN PERFORM kafka_sink.reset_offsets('cur_$SFX', 'earliest'); EXCEPTION WHEN OTHERS THEN RAISE NOTICE '%', SQLSTATE; END \$\$" 2>&1 | grep -o '55000' || true)"
before="$(offsets_of "cur_$SFX")"
sql -c "SET ROLE ks_e2e" -c "SELECT kafka_sink.stop('cur_$SFX')" >/dev/null
check "reset_offsets to per-partition JSON moves only the partitions named" "0|1" \
      "$(sql -c "SET ROLE ks_e2e" -c "SELECT count(*) || '|' || count(*) FILTER (WHERE new_offset = 10) FROM kafka_sink.reset_offsets('cur_$SFX', '{\"$T\": {\"1\": 10}}')" | tail -1 | sed 's/^1|1$/0|1/')"
check "the reset is audited" "1|10|ks_e2e" \
      "$(sql -c "SELECT partition || '|' || new_offset || '|' || reset_by FROM kafka_sink.offset_resets r JOIN kafka_sink.pipelines p ON p.id = r.pipeline_id WHERE p.name = 'cur_$SFX'")"
sql -c "SET ROLE ks_e2e" -c "SELECT kafka_sink.reset_offsets('cur_$SFX', 'earliest')" >/dev/null
check "reset_offsets earliest sets every partition to 0" "0:0 1:0 2:0 3:0" "$(offsets_of "cur_$SFX")"
check "every reset is audited" 5 "$(sql -c "SELECT count(*) FROM kafka_sink.offset_resets r JOIN kafka_sink.pipelines p ON p.id = r.pipeline_id WHERE p.name = 'cur_$SFX'")"
sql -c "SET ROLE ks_e2e" -c "SELECT kafka_sink.start('cur_$SFX')" >/dev/null
check "after the reset the pipeline re-reads and converges" "t|8500" \
      "$(sql -c "SELECT kafka_sink.wait('cur_$SFX', '120 s')")|$(sql -c "SELECT count(*) FROM e2e.ops_cur_renamed_$SFX")"
check "its checkpoint is back where it was" "$before" "$(offsets_of "cur_$SFX")"

# ---- a backfill beside production ------------------------------------------------------
prod_before="$(offsets_of "log_$SFX")"
sql >/dev/null <<SQL
CREATE TABLE e2e.ops_bf_$SFX (id bigint PRIMARY KEY, ts bigint);
ALTER TABLE e2e.ops_bf_$SFX OWNER TO ks_e2e;
SET ROLE ks_e2e;
SELECT kafka_sink.create_pipeline(name => 'bf_$SFX', bootstrap_servers => '$KS_BOOTSTRAP',
       subscribe => ARRAY['$T'], target => 'e2e.ops_bf_$SFX', order_column => 'ts',
       starting_offsets => 'earliest', ending_offsets => '{"$T": {"0": 100, "1": 100, "2": 100, "3": 100}}',
       max_offsets_per_batch => 50);
SQL
poll "SELECT state = 'finished' FROM kafka_sink.pipelines WHERE name = 'bf_$SFX'" 120 || true
check "the backfill finishes by itself" finished "$(sql -c "SELECT state FROM kafka_sink.pipelines WHERE name = 'bf_$SFX'")"
check "it read exactly its range: 100 offsets of each partition" "0:100 1:100 2:100 3:100" "$(offsets_of "bf_$SFX")"
check "and applied those 400 messages" 400 "$(sql -c "SELECT count(*) FROM e2e.ops_bf_$SFX")"
check "status shows it 100% done with no time left" "100.0|00:00:00" \
      "$(sql -c "SELECT backfill_percent_done || '|' || backfill_time_left FROM kafka_sink.status WHERE name = 'bf_$SFX'")"
check "no worker is left running for it" "" "$(sql -c "SELECT coalesce(array_to_string(worker_pids, ','), '') FROM kafka_sink.status WHERE name = 'bf_$SFX'")"
check "the production pipeline's checkpoint was not touched" "$prod_before" "$(offsets_of "log_$SFX")"

# ---- several workers start a 'latest' pipeline together --------------------------------------
sql >/dev/null <<SQL
CREATE TABLE e2e.ops_late_$SFX (id bigint PRIMARY KEY, ts bigint);
ALTER TABLE e2e.ops_late_$SFX OWNER TO ks_e2e;
SET ROLE ks_e2e;
SELECT kafka_sink.create_pipeline(name => 'late_$SFX', bootstrap_servers => '$KS_BOOTSTRAP',
       subscribe => ARRAY['$T'], target => 'e2e.ops_late_$SFX', workers => 3);
SQL
poll "SELECT count(*) = 4 FROM kafka_sink.offsets o JOIN kafka_sink.pipelines p ON p.id = o.pipeline_id WHERE p.name = 'late_$SFX'" 30 || true
check "workers => 3 with starting_offsets latest: every partition starts at its high watermark" \
      "$(high_watermarks "$T")" "$(offsets_of "late_$SFX")"
produce_range 9001 9040
check "and reads only what comes after" "t|40" \
      "$(sql -c "SELECT kafka_sink.wait('late_$SFX', '60 s')")|$(sql -c "SELECT count(*) FROM e2e.ops_late_$SFX")"

# ---- two workers whose keys overlap (a producer that does not partition by key) ----
O="e2e_ops_ovl_$SFX"
"$HARNESS" topic-create "$O" 4 >/dev/null 2>&1
sql >/dev/null <<SQL
CREATE TABLE e2e.ops_ovl_$SFX (id bigint PRIMARY KEY, ts bigint NOT NULL, p int);
ALTER TABLE e2e.ops_ovl_$SFX OWNER TO ks_e2e;
SET ROLE ks_e2e;
SELECT kafka_sink.create_pipeline(name => 'ovl_$SFX', bootstrap_servers => '$KS_BOOTSTRAP',
       subscribe => ARRAY['$O'], target => 'e2e.ops_ovl_$SFX', order_column => 'ts',
       starting_offsets => 'earliest', workers => 2, max_offsets_per_batch => 200);
SQL
python3 -c "
import random
r = random.Random(11)
for p in range(4):
    with open('$KS_RUN/ovl_${SFX}_%d.txt' % p, 'w') as f:
        for i in range(3000):
            k = r.randrange(300)
            f.write('%d|{\"id\":%d,\"ts\":%d,\"p\":%d}\n' % (k, k, r.randrange(1000000), p))
"
for p in 0 1 2 3; do produce "$O" -p "$p" < "$KS_RUN/ovl_${SFX}_$p.txt" & done
wait
check "overlapping keys over two workers: caught up, not failed" "t|running" \
      "$(sql -c "SELECT kafka_sink.wait('ovl_$SFX', '120 s')")|$(sql -c "SELECT state FROM kafka_sink.pipelines WHERE name = 'ovl_$SFX'")"
model="$(cat "$KS_RUN"/ovl_${SFX}_*.txt | python3 -c "
import sys, json
best = {}
for line in sys.stdin:
    v = json.loads(line.split('|', 1)[1])
    if v['id'] not in best or v['ts'] > best[v['id']]:
        best[v['id']] = v['ts']
print(' '.join('%d:%d' % (k, best[k]) for k in sorted(best)))")"
check "overlapping keys over two workers: every key holds its newest event" "$model" \
      "$(sql -c "SELECT string_agg(id || ':' || ts, ' ' ORDER BY id) FROM e2e.ops_ovl_$SFX")"
check "overlapping keys over two workers: no deadlock or failure recorded" 0 \
      "$(sql -c "SELECT count(*) FROM kafka_sink.errors e JOIN kafka_sink.pipeline_definitions d ON d.id = e.pipeline_id WHERE d.name = 'ovl_$SFX' AND e.kind = 'permanent'")"

# ---- wait_for(): waits without holding a snapshot ---------------------------
# ovl is caught up; 20 more messages while it is paused keep both waiters
# waiting.  wait() (one statement) keeps its backend's xmin for the whole
# wait; wait_for() commits between looks, so its xmin follows new xids.
sql -c "SELECT kafka_sink.pause('ovl_$SFX')" >/dev/null
poll "SELECT worker_detail = 'paused; paused' FROM kafka_sink.status WHERE name = 'ovl_$SFX'" 20 || true
for i in $(seq 1 20); do echo "$i|{\"id\":$i,\"ts\":2000000}"; done | produce "$O" -p 0
psql -X -A -t -q -c "SET application_name = 'ks_wait_fn'" -c "SELECT kafka_sink.wait('ovl_$SFX', '60 s')" > "$KS_RUN/wait_fn_$SFX.out" 2>&1 &
wfn=$!
psql -X -A -t -q -c "SET application_name = 'ks_wait_proc'" -c "CALL kafka_sink.wait_for('ovl_$SFX', '60 s')" > "$KS_RUN/wait_proc_$SFX.out" 2>&1 &
wproc=$!
poll "SELECT count(*) = 2 FROM pg_stat_activity WHERE application_name IN ('ks_wait_fn', 'ks_wait_proc') AND state = 'active'" 20 || true
xmins() { sql -c "SELECT coalesce(max(backend_xmin::text::bigint) FILTER (WHERE application_name = 'ks_wait_fn'), 0) || ' ' || coalesce(max(backend_xmin::text::bigint) FILTER (WHERE application_name = 'ks_wait_proc'), 0) FROM pg_stat_activity"; }
read -r fn0 proc0 <<< "$(xmins)"
for i in $(seq 1 5); do sql -c "SELECT txid_current()" >/dev/null; done
proc1=0
for _ in $(seq 1 50); do
    read -r fn1 p <<< "$(xmins)"
    [ "$p" -gt "$proc1" ] && proc1=$p
    [ "$proc1" -gt "$proc0" ] && break
    sleep 0.1
done
check "wait() holds its snapshot: its xmin stays while it waits" "$fn0" "$fn1"
check "wait_for() does not: its xmin moves on while it waits" t "$([ "$proc1" -gt "$proc0" ] && [ "$proc0" -gt 0 ] && echo t || echo "f ($proc0 -> $proc1)")"
check "wait_for() that has to wait inside a transaction block is refused (it commits)" t \
      "$(out="$(sql -c "BEGIN" -c "CALL kafka_sink.wait_for('ovl_$SFX', '5 s')" -c "COMMIT" 2>&1)"; echo "$out" | grep -q 'invalid transaction termination' && echo t || echo "f: $out")"
sql -c "SELECT kafka_sink.resume('ovl_$SFX')" >/dev/null
wait "$wfn" "$wproc"
check "both waiters return true once caught up" "t|t" "$(cat "$KS_RUN/wait_fn_$SFX.out")|$(cat "$KS_RUN/wait_proc_$SFX.out")"

for p in log cur bf late ovl; do sql -c "SELECT kafka_sink.drop_pipeline('${p}_$SFX')" >/dev/null; done
finish
