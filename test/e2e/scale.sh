#!/usr/bin/env bash
# scale: 20 pipelines at once.
#  - 20 pipelines (merge and append) over 4 topics, each into its own table,
#    run side by side, one worker each: all catch up and every target is
#    exactly right;
#  - with max_worker_processes too small for them (the cluster restarted
#    with max_worker_processes = 8), the pipelines that get no worker say so
#    in kafka_sink.status (last_error names max_worker_processes) and in
#    kafka_sink.errors, the others keep working, and a slot that frees up
#    goes to a waiting pipeline.
# The cluster is restarted with its usual settings at the end.
. "$(dirname "$0")/../lib/common.sh"
setup_owner
N=20
NT=4
ORIG_PG_CONF="${KS_PG_CONF-}"
ORIG_MWP="$(sql -c "SHOW max_worker_processes")"
RESTARTED=0
pname() { echo "sc_$1_$SFX"; }
restart_pg() {  # restart_pg [EXTRA_CONF]
    "$HARNESS" pg-stop >/dev/null 2>&1
    KS_PG_CONF="$1" "$HARNESS" pg-start >/dev/null 2>&1
}
cleanup() {
    local rc=$?
    set +e
    trap - EXIT
    for i in $(seq 1 $N); do sql -c "SELECT kafka_sink.drop_pipeline('$(pname "$i")', if_exists => true)" >/dev/null 2>&1; done
    if [ "$RESTARTED" = 1 ]; then
        restart_pg "$ORIG_PG_CONF"
    fi
    exit $rc
}
trap cleanup EXIT

for t in $(seq 1 $NT); do "$HARNESS" topic-create "e2e_scale_${t}_$SFX" 4 >/dev/null 2>&1 & done
wait
# topic t: ids 1..500, then ids 1..500 again with ts 2 (the winners); the
# first round before the pipelines exist, the second while they run
produce_round() {  # produce_round TOPIC_NO ROUND
    python3 -c "
for i in range(1, 501):
    print('%d|{\"id\":%d,\"ts\":$2,\"v\":\"t$1-%d-$2\"}' % (i, i, i))" \
        | produce "e2e_scale_${1}_$SFX"
}
for t in $(seq 1 $NT); do produce_round "$t" 1; done

# pipeline i reads topic (i % NT) + 1; odd i merge, even i append
{
    echo "SET client_min_messages = warning;"
    for i in $(seq 1 $N); do
        if [ $((i % 2)) = 1 ]; then
            echo "CREATE TABLE e2e.sc_${i}_$SFX (id bigint PRIMARY KEY, ts int, v text);"
        else
            echo "CREATE TABLE e2e.sc_${i}_$SFX (id bigint, ts int, v text, _kafka_partition int, _kafka_offset bigint);"
        fi
        echo "ALTER TABLE e2e.sc_${i}_$SFX OWNER TO ks_e2e;"
    done
    echo "SET ROLE ks_e2e;"
    for i in $(seq 1 $N); do
        mode=merge; [ $((i % 2)) = 0 ] && mode=append
        order=""; [ $mode = merge ] && order=", order_column => 'ts'"
        echo "SELECT kafka_sink.create_pipeline(name => '$(pname "$i")', bootstrap_servers => '$KS_BOOTSTRAP',
              subscribe => ARRAY['e2e_scale_$((i % NT + 1))_$SFX'], target => 'e2e.sc_${i}_$SFX', mode => '$mode'$order,
              starting_offsets => 'earliest', max_offsets_per_batch => 300);"
    done
} | sql >/dev/null
t0=$SECONDS
for t in $(seq 1 $NT); do produce_round "$t" 2 & done
wait
waited=""
for i in $(seq 1 $N); do waited+="$(sql -c "SELECT kafka_sink.wait('$(pname "$i")', '120 s')")"; done
echo "# $N pipelines caught up in $((SECONDS - t0)) s"
check "all $N pipelines catch up" "$(printf 't%.0s' $(seq 1 $N))" "$waited"
check "$N pipeline workers run, one per pipeline" "$N|$N" \
      "$(sql -c "SELECT count(*) || '|' || count(DISTINCT application_name) FROM pg_stat_activity WHERE backend_type = 'kafka_sink worker' AND application_name LIKE 'kafka_sink: sc\\_%\\_$SFX'")"
check "status: all running with one worker and no error" "$N" \
      "$(sql -c "SELECT count(*) FROM kafka_sink.status WHERE name LIKE 'sc\\_%\\_$SFX' AND state = 'running' AND workers = 1 AND last_error IS NULL")"
bad=""
for i in $(seq 1 $N); do
    t=$((i % NT + 1))
    if [ $((i % 2)) = 1 ]; then
        # merge: 500 rows, every one the second version
        r="$(sql -c "SELECT count(*) || '|' || count(*) FILTER (WHERE ts = 2 AND v = 't$t-' || id || '-2') FROM e2e.sc_${i}_$SFX")"
        [ "$r" = "500|500" ] || bad+=" $i:$r"
    else
        # append: 1000 rows, each message once
        r="$(sql -c "SELECT count(*) || '|' || count(DISTINCT (_kafka_partition, _kafka_offset)) || '|' || count(DISTINCT v) FROM e2e.sc_${i}_$SFX WHERE v LIKE 't$t-%'")"
        [ "$r" = "1000|1000|1000" ] || bad+=" $i:$r"
    fi
done
check "every target is exactly right (merge: 500 winners; append: 1000 messages once)" "" "$bad"
check "every checkpoint is at the high watermarks (1000 messages read per pipeline)" "$N" \
      "$(sql -c "SELECT count(*) FROM (SELECT p.name FROM kafka_sink.offsets o JOIN kafka_sink.pipelines p ON p.id = o.pipeline_id WHERE p.name LIKE 'sc\\_%\\_$SFX' GROUP BY p.name HAVING sum(o.next_offset) = 1000) x")"

# ---- not enough background worker slots -------------------------------------------------
RESTARTED=1
mark="$(sql -c "SELECT coalesce(max(id), 0) FROM kafka_sink.errors")"
restart_pg "${ORIG_PG_CONF:+$ORIG_PG_CONF
}max_worker_processes = 8"
check "the cluster runs with max_worker_processes = 8" 8 "$(sql -c "SHOW max_worker_processes")"
# the launcher and this database's scheduler take one slot each, the logical
# replication launcher another
poll "SELECT count(*) >= 5 FROM kafka_sink.status WHERE name LIKE 'sc\\_%\\_$SFX' AND workers = 1" 60 || true
poll "SELECT count(*) = $N FROM kafka_sink.status WHERE name LIKE 'sc\\_%\\_$SFX' AND (workers = 1 OR last_error LIKE '%max_worker_processes%')" 60 || true
with="$(sql -c "SELECT count(*) FROM kafka_sink.status WHERE name LIKE 'sc\\_%\\_$SFX' AND workers = 1")"
without="$(sql -c "SELECT count(*) FROM kafka_sink.status WHERE name LIKE 'sc\\_%\\_$SFX' AND coalesce(workers, 0) = 0")"
free="$(sql -c "SELECT current_setting('max_worker_processes')::int - count(*) FROM pg_stat_activity WHERE backend_type NOT IN ('client backend', 'autovacuum launcher', 'autovacuum worker', 'checkpointer', 'background writer', 'walwriter', 'archiver', 'startup', 'walreceiver', 'walsender')")"
echo "# with a worker: $with, without: $without, free background worker slots: $free"
check "only some pipelines get a worker" "t|$N" "$([ "$with" -ge 1 ] && [ "$with" -le 6 ] && echo t || echo f)|$((with + without))"
check "every pipeline without a worker says why in status: max_worker_processes" "$without" \
      "$(sql -c "SELECT count(*) FROM kafka_sink.status WHERE name LIKE 'sc\\_%\\_$SFX' AND coalesce(workers, 0) = 0 AND last_error LIKE 'could not start a pipeline worker: %max_worker_processes%'")"
check "the message is clear" "could not start a pipeline worker: no background worker slot is free (max_worker_processes)" \
      "$(sql -c "SELECT last_error FROM kafka_sink.status WHERE name LIKE 'sc\\_%\\_$SFX' AND coalesce(workers, 0) = 0 LIMIT 1")"
# (of those now without one: a pipeline may have waited for a slot, then got
# one freed by another database's or test's worker still exiting)
check "kafka_sink.errors records it for each of them, with a hint" "$without|$without" \
      "$(sql -c "SELECT count(DISTINCT e.pipeline_id) || '|' || count(DISTINCT e.pipeline_id) FILTER (WHERE e.detail LIKE '%max_worker_processes%') FROM kafka_sink.errors e JOIN kafka_sink.pipelines p ON p.id = e.pipeline_id JOIN kafka_sink.status s ON s.name = p.name WHERE p.name LIKE 'sc\\_%\\_$SFX' AND coalesce(s.workers, 0) = 0 AND e.id > $mark AND e.message LIKE '%max_worker_processes%'")"
check "they stay 'running' (they start when a slot frees up)" "$N" \
      "$(sql -c "SELECT count(*) FROM kafka_sink.pipelines WHERE name LIKE 'sc\\_%\\_$SFX' AND state = 'running'")"
# the pipelines with a worker keep working
first_with="$(sql -c "SELECT name FROM kafka_sink.status WHERE name LIKE 'sc\\_%\\_$SFX' AND workers = 1 ORDER BY name LIMIT 1")"
i_with="$(sed -n 's/^sc_\([0-9]*\)_.*/\1/p' <<<"$first_with")"
t_with=$(( ${i_with:-1} % NT + 1 ))
printf '%s\n' "9001|{\"id\":9001,\"ts\":3,\"v\":\"t$t_with-9001-3\"}" | produce "e2e_scale_${t_with}_$SFX"
check "a pipeline with a worker keeps ingesting" "t|1" \
      "$(sql -c "SELECT kafka_sink.wait('$first_with', '60 s')")|$(sql -c "SELECT count(*) FROM e2e.sc_${i_with:-1}_$SFX WHERE id = 9001")"
# stop the pipelines that have a worker: the waiting ones get the slots
waiting="$(sql -c "SELECT string_agg(name, ' ' ORDER BY name) FROM kafka_sink.status WHERE name LIKE 'sc\\_%\\_$SFX' AND coalesce(workers, 0) = 0")"
sql -c "SELECT kafka_sink.stop(name) FROM kafka_sink.status WHERE name LIKE 'sc\\_%\\_$SFX' AND workers = 1" >/dev/null
poll "SELECT count(*) >= least($with, $without) FROM kafka_sink.status WHERE name = ANY (string_to_array('$waiting', ' ')) AND workers = 1" 60 || true
check "freed slots go to pipelines that were waiting" t \
      "$(sql -c "SELECT count(*) >= least($with, $without) FROM kafka_sink.status WHERE name = ANY (string_to_array('$waiting', ' ')) AND workers = 1")"
late="$(sql -c "SELECT name FROM kafka_sink.status WHERE name = ANY (string_to_array('$waiting', ' ')) AND workers = 1 ORDER BY name LIMIT 1")"
check "and such a late starter is caught up" t "$(sql -c "SELECT kafka_sink.wait('${late:-none}', '60 s')")"

# ---- back to the usual settings ---------------------------------------------------------
for i in $(seq 1 $N); do sql -c "SELECT kafka_sink.drop_pipeline('$(pname "$i")')" >/dev/null; done
restart_pg "$ORIG_PG_CONF"
RESTARTED=0
check "the cluster is back to its usual max_worker_processes" "$ORIG_MWP" "$(sql -c "SHOW max_worker_processes")"
poll "SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'kafka_sink launcher'" 30 || true
check "and the launcher runs" 1 "$(sql -c "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'kafka_sink launcher'")"

finish
