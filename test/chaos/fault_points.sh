#!/usr/bin/env bash
# test/chaos/fault_points.sh -- exactly-once at every phase of a batch, with
# the fault injection of kafka_sink (kafka_sink.fault_point / fault_action).
#
#   test/chaos/fault_points.sh                # standalone (see lib.bash)
#   test/run_tests.sh chaos                   # with the suite's broker/cluster
#
# For each fault point after_fetch, after_decode, after_merge, before_commit,
# after_commit, with action fatal (the worker exits, its transaction rolls
# back) and then with action sigkill (the worker kills itself: the
# postmaster restarts the cluster, again for every batch tried until the
# fault is reset) -- CHAOS_FAULT_CASES overrides the list, e.g.
# CHAOS_FAULT_CASES="after_merge/fatal before_commit/sigkill":
#   1. a fresh 4-partition topic and two fresh pipelines on it: a merge
#      pipeline into a table keyed by order_id (order column event_ts) and an
#      append pipeline into a table with an identity key, batches of
#      CHAOS_FP_BATCH (1000) messages;
#   2. CHAOS_FP_MESSAGES (3000) messages over CHAOS_FP_KEYS (500) keys,
#      applied without fault (both pipelines have rows and a checkpoint);
#   3. the fault is set (ALTER SYSTEM + pg_reload_conf), as many messages
#      again (same keys, overlapping event_ts) are produced, and each
#      pipeline's worker must fail: its pid changes and the log shows the
#      fault (FATAL "kafka_sink fault injected" / "terminated by signal 9");
#      for a fault before the commit, nothing may commit meanwhile;
#   4. the fault is reset; both pipelines catch up (kafka_sink.wait);
#   5. checks: merge target == model (test/chaos/model.py), append target ==
#      every message exactly once (same multiset, same count), both
#      checkpoints == high watermarks, batch ids contiguous with
#      sum(messages) == produced, no quarantine rows.
# One PASS/FAIL line per case; last line "fault_points: N passed, N failed".
# The fault GUCs are reset on exit, whatever happens.
set -euo pipefail

CHAOS_NAME=fault_points
# shellcheck source=test/chaos/lib.bash
. "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lib.bash"

CASES="${CHAOS_FAULT_CASES:-after_fetch/fatal after_decode/fatal after_merge/fatal before_commit/fatal after_commit/fatal after_fetch/sigkill after_decode/sigkill after_merge/sigkill before_commit/sigkill after_commit/sigkill}"
N_MSG="${CHAOS_FP_MESSAGES:-3000}"
N_KEYS="${CHAOS_FP_KEYS:-500}"
BATCH="${CHAOS_FP_BATCH:-1000}"
SEED="${CHAOS_SEED:-$((RANDOM * 32768 + RANDOM))}"
FAIL_TIMEOUT="${CHAOS_FP_FAIL_TIMEOUT:-30}"
OWNER=chaos
S=chaos_fp                                  # schema

chaos_setup_env
RUN_ID="$(date +%Y%m%d%H%M%S)_$$"
CHAOS_WORK="$KS_RUN/chaos/fault_points.$RUN_ID"
mkdir -p "$CHAOS_WORK"
W="$CHAOS_WORK"
log "seed $SEED; cases: $CASES; files in $W"

# ---------------------------------------------------------------- setup
chaos_owner_schema "$OWNER" "$S" 'chaos_fp_%'
reset_fault            # a previous run killed in the middle may have left one
cur_pipelines=()
cleanup() {
    local p
    if [ $chaos_failed -gt 0 ] || [ "${CHAOS_KEEP:-0}" = 1 ]; then
        for p in "${cur_pipelines[@]}"; do
            psql -X -q -c "SELECT kafka_sink.stop('$p')" >/dev/null 2>&1 || true
        done
        log "kept the pipelines (stopped), schema $S, topics chaos_fp_* and $W"
    else
        psql -X -q -c "SELECT kafka_sink.drop_pipeline(name, if_exists => true)
                         FROM kafka_sink.pipeline_definitions WHERE name LIKE 'chaos_fp_%'" \
             -c "DROP SCHEMA IF EXISTS $S CASCADE" >/dev/null 2>&1 || true
        rm -rf "$W"
    fi
}
# hooks run in order: reset the fault first
chaos_cleanup_hooks+=(reset_fault_on_exit cleanup)

produce_file() {  # produce_file TOPIC FILE
    kcat -P -b "$KS_BOOTSTRAP" -t "$1" -K $'\t' -z lz4 -X enable.idempotence=true \
         -X message.timeout.ms=60000 < "$2" 2> "$W/kcat.err" \
        || { cat "$W/kcat.err" >&2; die "kcat failed producing $2 to $1"; }
}

pipeline_id() { qr 30 "SELECT id FROM kafka_sink.pipeline_definitions WHERE name = '$1'"; }

# ---------------------------------------------------------------- one case
case_no=0
run_case() {  # run_case POINT ACTION
    local point="$1" action="$2" tag="$1/$2"
    local c t topic pm pa idm ida f1 f2 errs=() t0 seen
    case_no=$((case_no + 1))
    c=$case_no
    t="$S"
    topic="chaos_fp_${RUN_ID}_$c"
    pm="chaos_fp_m$c"
    pa="chaos_fp_a$c"
    echo
    log "case $c: $tag (topic $topic, pipelines $pm (merge), $pa (append))"

    harness topic-create "$topic" 4 >/dev/null 2> "$W/topic.err" \
        || { cat "$W/topic.err" >&2; die "could not create topic $topic"; }
    psql -X -q -v ON_ERROR_STOP=1 <<SQL >/dev/null
SET ROLE $OWNER;
CREATE TABLE $t.orders_$c (
    order_id bigint PRIMARY KEY,
    event_ts bigint NOT NULL,
    amount   numeric(18,2),
    note     text
);
CREATE TABLE $t.events_$c (
    id       bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    order_id bigint NOT NULL,
    event_ts bigint NOT NULL,
    amount   numeric(18,2),
    note     text
);
SELECT kafka_sink.create_pipeline(name => '$pm', bootstrap_servers => '$KS_BOOTSTRAP',
    subscribe => ARRAY['$topic'], target => '$t.orders_$c', order_column => 'event_ts',
    starting_offsets => 'earliest', max_offsets_per_batch => $BATCH);
SELECT kafka_sink.create_pipeline(name => '$pa', bootstrap_servers => '$KS_BOOTSTRAP',
    subscribe => ARRAY['$topic'], target => '$t.events_$c', mode => 'append',
    starting_offsets => 'earliest', max_offsets_per_batch => $BATCH);
SQL
    cur_pipelines=("$pm" "$pa")
    idm="$(pipeline_id "$pm")"
    ida="$(pipeline_id "$pa")"

    # the first half, without a fault
    f1="$W/case$c.1.txt"
    f2="$W/case$c.2.txt"
    python3 "$CHAOS_DIR/gen_orders.py" "$f1" "$N_MSG" "$N_KEYS" "$((SEED + 2 * c))" 1 0
    python3 "$CHAOS_DIR/gen_orders.py" "$f2" "$N_MSG" "$N_KEYS" "$((SEED + 2 * c + 1))" 1 "$N_MSG"
    produce_file "$topic" "$f1"
    if ! wait_all 60 "$pm" "$pa" > "$W/wait1.out"; then
        fail "$tag: the pipelines apply the first $N_MSG messages before the fault: $(cat "$W/wait1.out")"
        show_diagnostics "$pm" "$pa"
        return 0
    fi

    # the fault, then the second half
    fault_window "$point" "$action" "$FAIL_TIMEOUT" "$pm:$idm" "$pa:$ida" -- produce_file "$topic" "$f2"
    seen=$fault_seen
    errs+=("${fault_errs[@]}")

    # catch up after the reset
    t0=$SECONDS
    if wait_all 120 "$pm" "$pa" > "$W/wait2.out"; then
        log "$tag: both pipelines caught up $((SECONDS - t0))s after the reset"
    else
        errs+=("catch up after the reset: $(cat "$W/wait2.out")")
    fi

    # checks
    local total=$((2 * N_MSG)) hw_sum nrows
    python3 "$CHAOS_DIR/model.py" "$f1" "$f2" > "$W/case$c.model"
    qr 60 "COPY (SELECT order_id, event_ts, amount, note FROM $t.orders_$c ORDER BY order_id) TO STDOUT" > "$W/case$c.target" \
        || errs+=("could not read the merge target")
    if ! diff "$W/case$c.model" "$W/case$c.target" > "$W/case$c.diff"; then
        errs+=("merge target differs from the model: $(grep -c '^[<>]' "$W/case$c.diff") lines ($W/case$c.diff)")
        head -n 10 "$W/case$c.diff"
    fi
    python3 "$CHAOS_DIR/model.py" --all "$f1" "$f2" | LC_ALL=C sort > "$W/case$c.append.model"
    qr 60 "COPY (SELECT order_id, event_ts, amount, note FROM $t.events_$c) TO STDOUT" | LC_ALL=C sort > "$W/case$c.append.target" \
        || errs+=("could not read the append target")
    nrows="$(wc -l < "$W/case$c.append.target")"
    if [ "$nrows" != "$total" ]; then
        errs+=("append target has $nrows rows for $total messages")
    fi
    if ! diff "$W/case$c.append.model" "$W/case$c.append.target" > "$W/case$c.append.diff"; then
        errs+=("append target is not every message exactly once: $(grep -c '^<' "$W/case$c.append.diff") missing, $(grep -c '^>' "$W/case$c.append.diff") extra ($W/case$c.append.diff)")
        head -n 10 "$W/case$c.append.diff"
    fi
    harness topic-offsets "$topic" > "$W/case$c.hw"
    hw_sum="$(awk -F'\t' '{s += $2} END {print s + 0}' "$W/case$c.hw")"
    [ "$hw_sum" = "$total" ] || errs+=("the topic holds $hw_sum messages, $total were produced")
    local id name
    for id in "$idm" "$ida"; do
        name="$([ "$id" = "$idm" ] && echo "$pm" || echo "$pa")"
        qr 60 "SELECT partition || E'\t' || next_offset FROM kafka_sink.offsets
                WHERE pipeline_id = $id ORDER BY partition" > "$W/case$c.off.$id" \
            || errs+=("$name: could not read the checkpoint")
        if ! diff -q "$W/case$c.hw" "$W/case$c.off.$id" >/dev/null; then
            errs+=("$name: checkpoint [$(paste -sd' ' "$W/case$c.off.$id" | tr '\t' ':')] != high watermarks [$(paste -sd' ' "$W/case$c.hw" | tr '\t' ':')]")
        fi
        local last nb bmin bmax bsum nq
        read -r last nb bmin bmax bsum <<< "$(qr 30 "SELECT d.last_batch_id, count(b.batch_id), coalesce(min(b.batch_id), 0),
                coalesce(max(b.batch_id), 0), coalesce(sum(b.messages), 0)
           FROM kafka_sink.pipeline_definitions d LEFT JOIN kafka_sink.batches b ON b.pipeline_id = d.id
          WHERE d.id = $id GROUP BY d.last_batch_id" | tr '|' ' ')"
        if ! { [ "$nb" = "$last" ] && [ "$bmax" = "$last" ] && [ "$bmin" = 1 ] && [ "$bsum" = "$total" ]; }; then
            errs+=("$name: batches: last_batch_id $last, $nb batches, ids $bmin..$bmax, sum(messages) $bsum (want 1..last and $total)")
        fi
        nq="$(qr 60 "SELECT count(*) FROM kafka_sink.quarantine WHERE pipeline_id = $id")" || nq="?"
        [ "$nq" = 0 ] || errs+=("$name: $nq quarantine rows")
    done

    if [ ${#errs[@]} -eq 0 ]; then
        pass "$tag: worker failed ($seen x) and came back; merge target = model ($(wc -l < "$W/case$c.target") rows), append = $total rows each message once, checkpoints = high watermarks, batches contiguous, no quarantine"
        # drop what passed: a smaller data directory keeps crash recovery fast
        psql -X -q -c "SELECT kafka_sink.drop_pipeline('$pm')" -c "SELECT kafka_sink.drop_pipeline('$pa')" \
             -c "DROP TABLE $t.orders_$c, $t.events_$c" >/dev/null 2>&1 || true
        harness topic-delete "$topic" >/dev/null 2>&1 || true
    else
        fail "$tag: $(printf '%s; ' "${errs[@]}")"
        show_diagnostics "$pm" "$pa"
        psql -X -q -c "SELECT kafka_sink.stop('$pm')" -c "SELECT kafka_sink.stop('$pa')" >/dev/null 2>&1 || true
    fi
}

for cs in $CASES; do
    run_case "${cs%/*}" "${cs#*/}"
done

chaos_summary
[ $chaos_failed -eq 0 ]
