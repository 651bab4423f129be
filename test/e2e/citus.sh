#!/usr/bin/env bash
# citus: Citus distributed and reference tables as targets.  A coordinator
# (preloading citus and kafka_sink) and two worker nodes (citus only) of
# this script's own on loopback; CREATE EXTENSION kafka_sink on the
# coordinator as a new user runs it (not propagated to the worker nodes,
# which do not have kafka_sink); a pipeline into a hash-distributed table
# and one into a reference table, through kill -9 of the pipeline's worker
# at batch phases, kill -9 of a worker node's postmaster mid-run and an
# immediate stop of the coordinator: the tables equal an independent model (the last message per
# key), every offset is checkpointed once, no prepared transaction is left
# behind after Citus's recovery, and a bad message is quarantined.  Skipped
# (with a line saying so) where ../shared/vendor has no Citus source.
. "$(dirname "$0")/../lib/common.sh"
# a failing command ends the script (set -e): say which one
set -E; trap 'echo "# citus.sh: line $LINENO: exit $? from: $BASH_COMMAND" >&2' ERR
. "$REPO/test/lib/citus_cluster.sh"
citus_skip_unless_available
citus_cluster_start citus
check "two worker nodes" 2 "$(sqlc -c "SELECT count(*) FROM citus_get_active_worker_nodes()")"

# a new user's CREATE EXTENSION on the coordinator: kafka_sink stays local
check "CREATE EXTENSION kafka_sink on the coordinator" "ok" \
      "$(sqlc -c "CREATE EXTENSION kafka_sink" 2>&1 && echo ok)"
check "kafka_sink is not on the worker nodes" "0|0" \
      "$(sql_at "$P1" -c "SELECT count(*) FROM pg_extension WHERE extname = 'kafka_sink'")|$(sql_at "$P2" -c "SELECT count(*) FROM pg_extension WHERE extname = 'kafka_sink'")"
check "kafka_sink is not a distributed object" 0 \
      "$(sqlc -c "SELECT count(*) FROM pg_dist_object WHERE classid = 'pg_extension'::regclass AND objid = (SELECT oid FROM pg_extension WHERE extname = 'kafka_sink')")"
PGPORT="$PC" setup_owner >/dev/null
check "the owner role is on the worker nodes (Citus propagates it)" "1|1" \
      "$(sql_at "$P1" -c "SELECT count(*) FROM pg_roles WHERE rolname = 'ks_e2e'")|$(sql_at "$P2" -c "SELECT count(*) FROM pg_roles WHERE rolname = 'ks_e2e'")"

T="e2e_citus_$SFX"
"$HARNESS" topic-create "$T" 4 >/dev/null 2>&1
W="$KS_RUN/citus_work_$SFX"
mkdir -p "$W"
# the messages of five rounds (a random subset of 400 keys each, random
# values, seq increasing), two bad ones, and the model: the last message
# of each key
python3 - "$W" <<'PY'
import json, random, sys
w = sys.argv[1]
rnd = random.Random(27)
seq = 0
last = {}
for r in range(1, 6):
    with open(f"{w}/round{r}.txt", "w") as f:
        for i in rnd.sample(range(1, 401), 300):
            seq += 1
            v = "v%d_%d" % (r, rnd.randrange(10**6))
            last[i] = (i, v, seq)
            f.write("k%d|%s\n" % (i, json.dumps({"id": i, "v": v, "seq": seq})))
        if r == 2:
            f.write("k9001|{\"id\": 9001, \"v\": \n")                       # invalid JSON
            f.write("k9002|%s\n" % json.dumps({"id": 9002, "v": "bad", "seq": 1}))  # breaks the CHECK
with open(f"{w}/model.txt", "w") as f:
    for i in sorted(last):
        f.write("%d|%s|%d\n" % last[i])
PY
K="$(grep -c . "$W/model.txt")"
TOTAL="$(cat "$W"/round*.txt | grep -c .)"

for t in cd cr; do
    sqlc >/dev/null <<SQL
CREATE TABLE e2e.$t (id int PRIMARY KEY, v text CHECK (v <> 'bad'), seq bigint,
                     _kafka_partition int, _kafka_offset bigint);
ALTER TABLE e2e.$t OWNER TO ks_e2e;
SQL
done
sqlc -c "SELECT create_distributed_table('e2e.cd', 'id', shard_count => 8)" >/dev/null
sqlc -c "SELECT create_reference_table('e2e.cr')" >/dev/null
check "shards of the distributed table on both worker nodes" 2 \
      "$(sqlc -c "SELECT count(DISTINCT nodeport) FROM citus_shards WHERE table_name = 'e2e.cd'::regclass")"
PD="citus_d_$SFX" PR="citus_r_$SFX"
drop_pipelines() {
    sqlc -c "SELECT kafka_sink.drop_pipeline('$PD', if_exists => true)" -c "SELECT kafka_sink.drop_pipeline('$PR', if_exists => true)" >/dev/null 2>&1
}
at_exit drop_pipelines
sqlc >/dev/null <<SQL
SET ROLE ks_e2e;
SELECT kafka_sink.create_pipeline(name => '$PD', bootstrap_servers => '$KS_BOOTSTRAP', subscribe => ARRAY['$T'],
       target => 'e2e.cd', order_column => 'seq', starting_offsets => 'earliest',
       max_offsets_per_batch => 120, workers => 2);
SELECT kafka_sink.create_pipeline(name => '$PR', bootstrap_servers => '$KS_BOOTSTRAP', subscribe => ARRAY['$T'],
       target => 'e2e.cr', order_column => 'seq', starting_offsets => 'earliest',
       max_offsets_per_batch => 120);
SQL
# routing: one pipeline, target 'e2e.{topic}', into two distributed tables
RA="rta_$SFX" RB="rtb_$SFX" PT="citus_t_$SFX"
for t in "$RA" "$RB"; do
    "$HARNESS" topic-create "$t" 2 >/dev/null 2>&1
    sqlc >/dev/null <<SQL
CREATE TABLE e2e.$t (id int PRIMARY KEY, v text, seq bigint);
ALTER TABLE e2e.$t OWNER TO ks_e2e;
SELECT create_distributed_table('e2e.$t', 'id');
SQL
    python3 -c "
for i in range(1, 151):
    print('k%d|{\"id\": %d, \"v\": \"$t-%d\", \"seq\": %d}' % (i % 50, i % 50, i, i))" | produce "$t"
done
sqlc >/dev/null <<SQL
SET ROLE ks_e2e;
SELECT kafka_sink.create_pipeline(name => '$PT', bootstrap_servers => '$KS_BOOTSTRAP', subscribe => ARRAY['$RA', '$RB'],
       target => 'e2e.{topic}', order_column => 'seq', starting_offsets => 'earliest');
SQL
drop_routed() { sqlc -c "SELECT kafka_sink.drop_pipeline('$PT', if_exists => true)" >/dev/null 2>&1; }
at_exit drop_routed
check "pipeline_statements: a Citus target's update and insert" "update citus|insert citus" \
      "$(sqlc -c "SELECT string_agg(kind || ' ' || strategy, '|' ORDER BY step) FROM kafka_sink.pipeline_statements('$PD') WHERE kind IN ('merge', 'update', 'insert')")"
wait_both() {
    # a kill still in flight restarts the coordinator under a wait: wait again
    local r="" i
    for i in 1 2 3; do
        wait_for 60 coordinator_up
        # a wait ended by that restart fails: not the script (set -e), the next try
        r="$(sqlc -c "SELECT kafka_sink.wait('$PD', '120 s')" 2>/dev/null || true)|$(sqlc -c "SELECT kafka_sink.wait('$PR', '120 s')" 2>/dev/null || true)"
        [ "$r" = "t|t" ] && break
        sleep 2
    done
    check "$1: both pipelines caught up" "t|t" "$r"
}
coordinator_up() { sqlc -c "SELECT 1" >/dev/null 2>&1; }
fault() {  # fault POINT|RESET: kafka_sink.fault_point with sigkill on the coordinator
    # the kill restarts the coordinator (crash recovery): a connection made
    # just before the restart is ended by it, so the setting is tried again
    local i
    for i in $(seq 1 30); do
        wait_for 60 coordinator_up
        if [ "$1" = RESET ]; then
            sqlc -c "ALTER SYSTEM RESET kafka_sink.fault_point" -c "ALTER SYSTEM RESET kafka_sink.fault_action" \
                 -c "SELECT pg_reload_conf()" >/dev/null 2>&1 && return 0
        else
            sqlc -c "ALTER SYSTEM SET kafka_sink.fault_point = '$1'" -c "ALTER SYSTEM SET kafka_sink.fault_action = 'sigkill'" \
                 -c "SELECT pg_reload_conf()" >/dev/null 2>&1 && return 0
        fi
        sleep 1
    done
    echo "# could not set kafka_sink.fault_point to $1 on the coordinator" >&2
    return 1
}
CLOG="$COORD/logs/postgresql.log"
faults_logged() { grep -c 'terminated by signal 9' "$CLOG" || true; }
wait_fault() {  # wait_fault N: until more than N kills of a worker were logged
    local i
    for i in $(seq 1 150); do [ "$(faults_logged)" -gt "$1" ] && return 0; sleep 0.2; done
    return 1
}

# round 1: clean
produce "$T" < "$W/round1.txt"
wait_both "round 1"
# round 2 (with the bad messages): kill -9 of the pipeline's worker after its statements ran
n="$(faults_logged)"
fault after_merge
produce "$T" < "$W/round2.txt"
check "round 2: a worker was killed after its statements" 0 "$(wait_fault "$n"; echo $?)"
fault RESET
wait_for 60 coordinator_up
wait_both "round 2"
# round 3: kill -9 just before the commit (the worker nodes' transactions open)
n="$(faults_logged)"
fault before_commit
produce "$T" < "$W/round3.txt"
check "round 3: a worker was killed before its commit" 0 "$(wait_fault "$n"; echo $?)"
fault RESET
wait_for 60 coordinator_up
wait_both "round 3"
# round 4: kill -9 of a worker node's postmaster mid-run (its backends
# exit once they see it gone), then the node starts again (crash
# recovery); the batches meanwhile fail and are retried
produce "$T" < "$W/round4.txt"
sleep 0.5
W1DATA="$(cat "$W1/pgroot")/data"
w1pid="$(head -1 "$W1DATA/postmaster.pid")"
w1kids="$(pgrep -P "$w1pid" | paste -sd' ' -)"
kill -9 "$w1pid"
node_gone() {
    local p
    for p in $w1pid $w1kids; do kill -0 "$p" 2>/dev/null && return 1; done
    return 0
}
check "round 4: the worker node's processes ended after kill -9 of its postmaster" 0 "$(wait_for 60 node_gone; echo $?)"
node_gone || own_cluster_kill "$W1"
sleep 2
citus_node_start "$W1"
wait_both "round 4 (worker node killed and restarted)"
# round 5: kill -9 of a pipeline worker at a random point, then an
# immediate stop of the coordinator mid-run
produce "$T" < "$W/round5.txt"
pid="$(PGPORT="$PC" worker_pid "$PD")"
[ -n "$pid" ] && kill -9 "$pid" 2>/dev/null
sleep 1
own_cluster_kill "$COORD"
citus_coordinator_start
wait_for 60 coordinator_up
wait_both "round 5 (coordinator restarted)"

# the tables equal the model
model="$(cat "$W/model.txt")"
check "distributed table equals the model ($K keys)" "$model" "$(sqlc -c "SELECT id || '|' || v || '|' || seq FROM e2e.cd ORDER BY id")"
check "reference table equals the model ($K keys)" "$model" "$(sqlc -c "SELECT id || '|' || v || '|' || seq FROM e2e.cr ORDER BY id")"
check "the reference table's placements (two worker nodes and the coordinator) hold every row" "$K|$K|$K" \
      "$(sqlc -c "SELECT string_agg(result, '|' ORDER BY nodeport) FROM run_command_on_placements('e2e.cr', 'SELECT count(*) FROM %s')")"
check "rows on both worker nodes" 2 \
      "$(sqlc -c "SELECT count(*) FROM (SELECT nodeport FROM run_command_on_shards('e2e.cd', 'SELECT count(*) FROM %s') r JOIN citus_shards c ON c.shardid = r.shardid WHERE r.result::int > 0 GROUP BY nodeport) x")"
check "lineage columns: one distinct (partition, offset) per row" "$K|$K" \
      "$(sqlc -c "SELECT count(DISTINCT (_kafka_partition, _kafka_offset)) FROM e2e.cd")|$(sqlc -c "SELECT count(DISTINCT (_kafka_partition, _kafka_offset)) FROM e2e.cr")"
check "the coordinator's shell tables hold nothing (no heap strategy)" "0|0" \
      "$(sqlc -c "SELECT pg_relation_size('e2e.cd')")|$(sqlc -c "SELECT pg_relation_size('e2e.cr')")"
# exactly once: every message in one committed batch; each key inserted
# once, every later message an update (a batch applied twice would count
# its messages again, and find them stale)
for p in "$PD" "$PR"; do
    check "$p: committed batches hold every message once, inserted $K, none stale" "$TOTAL|$K|$((TOTAL - 2 - K))|0|2" \
          "$(sqlc -c "SELECT sum(b.messages) || '|' || sum(b.inserted) || '|' || (sum(b.updated) + sum(b.superseded)) || '|' || sum(b.stale) || '|' || sum(b.quarantined)
                        FROM kafka_sink.batches b JOIN kafka_sink.pipeline_definitions p ON p.id = b.pipeline_id WHERE p.name = '$p'")"
    check "$p: the checkpoint holds every offset" "$TOTAL" \
          "$(sqlc -c "SELECT sum(o.next_offset) FROM kafka_sink.offsets o JOIN kafka_sink.pipeline_definitions p ON p.id = o.pipeline_id WHERE p.name = '$p'")"
    check "$p: the bad messages quarantined" "constraint_violation,invalid_json" \
          "$(sqlc -c "SELECT string_agg(q.reason, ',' ORDER BY q.reason) FROM kafka_sink.quarantine q JOIN kafka_sink.pipeline_definitions p ON p.id = q.pipeline_id WHERE p.name = '$p'")"
done
check "routed: caught up" t "$(sqlc -c "SELECT kafka_sink.wait('$PT', '60 s')")"
for t in "$RA" "$RB"; do
    # the model: id i % 50, the last i of each (101..150)
    check "routed: e2e.$t equals the model" \
          "$(python3 -c "print('\n'.join('%d|$t-%d|%d' % (i % 50, i, i) for i in sorted(range(101, 151), key=lambda i: i % 50)))")" \
          "$(sqlc -c "SELECT id || '|' || v || '|' || seq FROM e2e.$t ORDER BY id")"
done
# no prepared transaction left once Citus recovered them
sqlc -c "SELECT recover_prepared_transactions()" >/dev/null
check "no prepared transaction on any node" "0|0|0" \
      "$(sql_at "$P1" -c "SELECT count(*) FROM pg_prepared_xacts")|$(sql_at "$P2" -c "SELECT count(*) FROM pg_prepared_xacts")|$(sqlc -c "SELECT count(*) FROM pg_prepared_xacts")"
check "no pending Citus transaction record" 0 "$(sqlc -c "SELECT count(*) FROM pg_dist_transaction")"
check "the pipelines run" "running|running" \
      "$(sqlc -c "SELECT string_agg(state, '|' ORDER BY name) FROM kafka_sink.status WHERE name IN ('$PD', '$PR')")"
finish
