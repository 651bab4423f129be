#!/usr/bin/env bash
# consumer_group_lag: Kafka's own lag tooling sees a pipeline with group.id.
#  - with {"group.id": G} in kafka_options the worker commits its checkpoint
#    to group G after each batch: Kafka's ConsumerGroupCommand (the
#    kafka-consumer-groups tool) shows CURRENT-OFFSET = LOG-END-OFFSET and
#    LAG 0 for every partition after catch-up;
#  - paused, the group's offsets stay: the LAG sums to what was produced
#    meanwhile; resumed, it goes back to 0;
#  - a pipeline without group.id leaves no group on the broker (nor does the
#    one with it leave any group but G);
#  - another consumer active in the group: the broker refuses kafka_sink's
#    commits; the pipeline is not affected, the failure is logged once, and
#    the group shows the checkpoint again once it is empty;
#  - the catalog stays the truth: the group is never read back.  Reset to
#    latest (would skip), to earliest (would reprocess) or deleted while the
#    pipeline is stopped, the pipeline goes on from its own checkpoint: an
#    append target holds every message exactly once; and the group shows the
#    catalog's checkpoint again.
. "$(dirname "$0")/../lib/common.sh"
setup_owner
T="e2e_cg_$SFX"
A="cga_$SFX"          # with group.id
B="cgb_$SFX"          # without
G="ks_lag_$SFX"
"$HARNESS" topic-create "$T" 3 >/dev/null 2>&1

produce_range() {  # FROM TO: message i has key i
    produce_py "$T" "
for i in range($1, $2 + 1):
    print('%d|{\"id\":%d}' % (i, i))"
}
# describe: "partition current log_end lag" per partition of T in group G, sorted
describe() {
    "$HARNESS" consumer-groups --describe --group "$G" 2>/dev/null \
        | awk -v g="$G" -v t="$T" '$1 == g && $2 == t { print $3, $4, $5, $6 }' | sort -n
}
# lag_state: "p:lag ..." and whether every CURRENT-OFFSET equals LOG-END-OFFSET
lag_state() {
    describe | awk '{ s = s sep $1 ":" $4; sep = " "; if ($2 != $3) eq = "f" }
                    END { if (eq == "") eq = "t"; print s "|" eq }'
}
lag_sum() { describe | awk '{ n += ($4 == "-" ? 0 : $4) } END { print n + 0 }'; }
# wait_lag EXPECTED_STATE SECONDS: polls lag_state until it is EXPECTED_STATE
wait_lag() {
    local deadline=$((SECONDS + $2)) got=""
    while [ $SECONDS -lt $deadline ]; do
        got="$(lag_state)"
        [ "$got" == "$1" ] && break
        sleep 1
    done
    echo "$got"
}
model() {  # rows|distinct coordinates|distinct ids|min id|max id of A's append target
    sql -c "SELECT concat_ws('|', count(*), count(DISTINCT (_kafka_partition, _kafka_offset)),
                              count(DISTINCT id), min(id), max(id)) FROM e2e.cga_$SFX"
}
as_owner() { sql -c "SET ROLE ks_e2e" -c "$1" >/dev/null; }
stop_a() {
    as_owner "SELECT kafka_sink.stop('$A')"
    poll "SELECT coalesce(workers, 0) = 0 FROM kafka_sink.status WHERE name = '$A'" 30 || true
}
start_a() { as_owner "SELECT kafka_sink.start('$A')"; }
# group_tool ARGS...: Kafka's ConsumerGroupCommand, tried again (up to 4
# times) when it fails: under load its admin requests can time out
group_tool() {
    local i
    for i in 1 2 3 4; do
        "$HARNESS" consumer-groups "$@" > "$KS_RUN/cg_tool.out" 2>&1 && return 0
        sleep 2
    done
    echo "# consumer-groups $* failed: $(tail -n 3 "$KS_RUN/cg_tool.out" | tr '\n' ' ')"
    return 1
}

sql >/dev/null <<SQL
CREATE TABLE e2e.cga_$SFX (seq bigserial PRIMARY KEY, id bigint, _kafka_partition int, _kafka_offset bigint);
CREATE TABLE e2e.cgb_$SFX (id bigint PRIMARY KEY);
ALTER TABLE e2e.cga_$SFX OWNER TO ks_e2e;
ALTER TABLE e2e.cgb_$SFX OWNER TO ks_e2e;
SET ROLE ks_e2e;
SELECT kafka_sink.create_pipeline(name => '$A', bootstrap_servers => '$KS_BOOTSTRAP',
       subscribe => ARRAY['$T'], target => 'e2e.cga_$SFX', mode => 'append',
       starting_offsets => 'earliest', max_offsets_per_batch => 100,
       kafka_options => '{"group.id": "$G"}');
SELECT kafka_sink.create_pipeline(name => '$B', bootstrap_servers => '$KS_BOOTSTRAP',
       subscribe => ARRAY['$T'], target => 'e2e.cgb_$SFX', starting_offsets => 'earliest');
SQL

# ---- catch-up: lag 0 per partition -------------------------------------------------
produce_range 1 300
check "A caught up" t "$(sql -c "SELECT kafka_sink.wait('$A', '90 s')")"
check "B caught up" t "$(sql -c "SELECT kafka_sink.wait('$B', '90 s')")"
check "after catch-up the group shows LAG 0 and CURRENT-OFFSET = LOG-END-OFFSET on each of the 3 partitions" \
      "0:0 1:0 2:0|t" "$(wait_lag "0:0 1:0 2:0|t" 60)"
check "the group's offsets are the catalog's checkpoint" \
      "$(sql -c "SELECT string_agg(o.partition || ':' || o.next_offset, ' ' ORDER BY o.partition) FROM kafka_sink.offsets o JOIN kafka_sink.pipelines p ON p.id = o.pipeline_id WHERE p.name = '$A'")" \
      "$(describe | awk '{ s = s sep $1 ":" $2; sep = " " } END { print s }')"

# ---- paused: the lag grows by what is produced -------------------------------------
as_owner "SELECT kafka_sink.pause('$A')"
poll "SELECT worker_detail = 'paused' FROM kafka_sink.status WHERE name = '$A'" 30 || true
produce_range 301 350
check "B (running) caught up with 50 more" t "$(sql -c "SELECT kafka_sink.wait('$B', '60 s')")"
sleep 2
check "paused: the group's LAG sums to the 50 messages produced meanwhile" 50 "$(lag_sum)"
check "paused: nothing more was applied" 300 "$(sql -c "SELECT count(*) FROM e2e.cga_$SFX")"
as_owner "SELECT kafka_sink.resume('$A')"
check "resumed: caught up" t "$(sql -c "SELECT kafka_sink.wait('$A', '60 s')")"
check "resumed: the group's LAG is back to 0" "0:0 1:0 2:0|t" "$(wait_lag "0:0 1:0 2:0|t" 60)"

# ---- only the group named, none for B --------------------------------------------
groups="$("$HARNESS" consumer-groups --list 2>/dev/null | grep -F "$SFX" | sort | tr '\n' ' ' | sed 's/ $//')"
check "the broker knows the group named in kafka_options and no other group of these pipelines" "$G" "$groups"

# ---- the catalog stays the truth ---------------------------------------------------
# reset to latest while stopped: reading the group back would skip 351..400
stop_a
produce_range 351 400
for _ in 1 2 3 4 5; do
    group_tool --reset-offsets --group "$G" --topic "$T" --to-latest --execute
    [ "$(lag_sum)" = 0 ] && break
    sleep 2
done
check "the tool moved the group to the log end" "0" "$(lag_sum)"
start_a
check "after a reset to latest: caught up" t "$(sql -c "SELECT kafka_sink.wait('$A', '60 s')")"
check "after a reset to latest: nothing skipped, nothing twice" "400|400|400|1|400" "$(model)"

# reset to earliest while stopped: reading the group back would reprocess everything
stop_a
# (a commit the stopped worker still had in flight can land after the
# tool's change: the mirror is advisory; retry until the change holds)
for _ in 1 2 3 4 5; do
    group_tool --reset-offsets --group "$G" --topic "$T" --to-earliest --execute
    [ "$(lag_sum)" = 400 ] && break
    sleep 2
done
check "the tool moved the group to the log start" 400 "$(lag_sum)"
start_a
check "after a reset to earliest: the group shows the catalog's checkpoint again (LAG 0)" \
      "0:0 1:0 2:0|t" "$(wait_lag "0:0 1:0 2:0|t" 60)"
produce_range 401 420
check "after a reset to earliest: caught up" t "$(sql -c "SELECT kafka_sink.wait('$A', '60 s')")"
check "after a reset to earliest: nothing reprocessed" "420|420|420|1|420" "$(model)"

# the group deleted while stopped
stop_a
for _ in 1 2 3 4 5; do
    group_tool --delete --group "$G"
    [ -z "$("$HARNESS" consumer-groups --list 2>/dev/null | grep -Fx "$G" || true)" ] && break
    sleep 2
done
check "the group is gone" "" "$("$HARNESS" consumer-groups --list 2>/dev/null | grep -Fx "$G" || true)"
produce_range 421 450
start_a
check "after deleting the group: caught up" t "$(sql -c "SELECT kafka_sink.wait('$A', '60 s')")"
check "after deleting the group: nothing skipped, nothing twice" "450|450|450|1|450" "$(model)"
check "after deleting the group: it is back, at the checkpoint (LAG 0)" "0:0 1:0 2:0|t" \
      "$(wait_lag "0:0 1:0 2:0|t" 60)"

# ---- a group with an active member elsewhere ---------------------------------------
# kcat -G joins G as a real member (subscribe, rebalance): the broker refuses
# commits from outside the group; the pipeline goes on, logs it (rate-limited),
# and the mirror catches up once the group is empty again.
LOGF="$KS_LOGS/postgresql.log"
LOG0="$(stat -c %s "$LOGF")"
kcat -b "$KS_BOOTSTRAP" -G "$G" -q "$T" >/dev/null 2>&1 &
KC=$!
group_state() { "$HARNESS" consumer-groups --describe --group "$G" --state 2>/dev/null | grep -ow -e Stable -e Empty -e PreparingRebalance -e CompletingRebalance | head -1; }
for _ in $(seq 1 30); do [ "$(group_state)" == "Stable" ] && break; sleep 1; done
check "another consumer is an active member of the group" Stable "$(group_state)"
produce_range 451 470
check "with a member elsewhere: caught up" t "$(sql -c "SELECT kafka_sink.wait('$A', '60 s')")"
check "with a member elsewhere: every message once" "470|470|470|1|470" "$(model)"
sleep 2
n_logged="$(tail -c +$((LOG0 + 1)) "$LOGF" | grep -c "could not commit offsets to consumer group \"$G\"" || true)"
check "the refused commit is logged, once (rate-limited)" 1 "$n_logged"
check "the pipeline records no error for it" 0 \
      "$(sql -c "SELECT count(*) FROM kafka_sink.errors e JOIN kafka_sink.pipeline_definitions d ON d.id = e.pipeline_id WHERE d.name = '$A'")"
kill "$KC" 2>/dev/null || true
wait "$KC" 2>/dev/null || true
for _ in $(seq 1 60); do [ "$(group_state)" == "Empty" ] && break; sleep 1; done
produce_range 471 480
check "the member gone: caught up" t "$(sql -c "SELECT kafka_sink.wait('$A', '60 s')")"
check "the member gone: the next batch's commit is taken, LAG 0" "0:0 1:0 2:0|t" \
      "$(wait_lag "0:0 1:0 2:0|t" 60)"

as_owner "SELECT kafka_sink.drop_pipeline('$A')"
as_owner "SELECT kafka_sink.drop_pipeline('$B')"
finish
