#!/usr/bin/env bash
# test/chaos/history_chaos.sh -- exactly-once of mode history (docs/history.md)
# under kill -9, with and without track_history_columns.
#
#   test/chaos/history_chaos.sh               # standalone (see lib.bash)
#   test/run_tests.sh chaos                   # with the suite's broker/cluster
#
#   1. test/e2e/history_model.py generates CHAOS_HIST_EVENTS (2400) events
#      over CHAOS_HIST_KEYS (120) keys: order values out of order, ties,
#      partial messages (absent fields, explicit nulls), tombstones, re-sent
#      ranges; they go to a 1-partition topic in chunks, one per case below
#      and a first one without fault;
#   2. two history pipelines read it, batches of CHAOS_HIST_BATCH (50): one
#      into a table with _fields, one with track_history_columns (a tracked
#      set that changes with the seed) into a table with _states;
#   3. for each case of CHAOS_HIST_CASES (default: the fault points
#      after_fetch, after_decode, after_merge, before_commit, after_commit
#      with action sigkill -- the worker kills itself, the postmaster
#      restarts the cluster --, after_merge and before_commit with fatal,
#      and postmaster/kill9: kill -9 of the postmaster while a worker is in
#      a batch, then a new start): the fault is set, a chunk produced, both
#      workers must fail (their pids change, the log shows it) and, before
#      after_commit, nothing may commit meanwhile; the fault is reset and
#      both pipelines catch up;
#   4. at the end, with the broker's timestamps read back (a tombstone's
#      order value), history_model.py computes the tables independently of
#      the extension; each must equal it version by version (the tracked
#      one with each version's number of states), each checkpoint equal
#      the high watermark, the batches' ranges tile the partition from 0
#      (each offset in one committed batch), batch ids contiguous with
#      sum(messages) = produced, no quarantine rows.
# CHAOS_SEED replays a run.  Last line "history_chaos: N passed, N failed".
set -euo pipefail

CHAOS_NAME=history_chaos
# shellcheck source=test/chaos/lib.bash
. "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lib.bash"

CASES="${CHAOS_HIST_CASES:-after_fetch/sigkill after_decode/sigkill after_merge/sigkill before_commit/sigkill after_commit/sigkill after_merge/fatal before_commit/fatal postmaster/kill9}"
N_EV="${CHAOS_HIST_EVENTS:-2400}"
N_KEYS="${CHAOS_HIST_KEYS:-120}"
BATCH="${CHAOS_HIST_BATCH:-50}"
SEED="${CHAOS_SEED:-$((RANDOM * 32768 + RANDOM))}"
FAIL_TIMEOUT="${CHAOS_HIST_FAIL_TIMEOUT:-30}"
OWNER=chaos
S=chaos_hist                                # schema
E2E="$CHAOS_DIR/../e2e"

chaos_setup_env
RUN_ID="$(date +%Y%m%d%H%M%S)_$$"
CHAOS_WORK="$KS_RUN/chaos/history_chaos.$RUN_ID"
mkdir -p "$CHAOS_WORK"
W="$CHAOS_WORK"
TOPIC="chaos_hist_$RUN_ID"
PU=chaos_hist_u                             # history, _fields
PT=chaos_hist_t                             # history, track_history_columns
tracked_sets=("a" "b,c" "a,c")
TRACKED="${tracked_sets[$((SEED % 3))]}"
log "seed $SEED; $N_EV events over $N_KEYS keys, batches of $BATCH; tracking $TRACKED; cases: $CASES; files in $W"

# ---------------------------------------------------------------- setup
chaos_owner_schema "$OWNER" "$S" 'chaos_hist_%'
reset_fault            # a previous run killed in the middle may have left one
cleanup() {
    if [ $chaos_failed -gt 0 ] || [ "${CHAOS_KEEP:-0}" = 1 ]; then
        psql -X -q -c "SELECT kafka_sink.stop('$PU')" -c "SELECT kafka_sink.stop('$PT')" >/dev/null 2>&1 || true
        log "kept the pipelines (stopped), schema $S, topic $TOPIC and $W"
    else
        psql -X -q -c "SELECT kafka_sink.drop_pipeline(name, if_exists => true)
                         FROM kafka_sink.pipeline_definitions WHERE name LIKE 'chaos_hist_%'" \
             -c "DROP SCHEMA IF EXISTS $S CASCADE" >/dev/null 2>&1 || true
        harness topic-delete "$TOPIC" >/dev/null 2>&1 || true
        rm -rf "$W"
    fi
}
chaos_cleanup_hooks+=(reset_fault_on_exit cleanup)

harness topic-create "$TOPIC" 1 >/dev/null 2> "$W/topic.err" \
    || { cat "$W/topic.err" >&2; die "could not create topic $TOPIC"; }
psql -X -q -v ON_ERROR_STOP=1 <<SQL >/dev/null
SET ROLE $OWNER;
CREATE TABLE $S.hist_u (id bigint NOT NULL, ts timestamptz NOT NULL, a text, b text, c integer,
                        _valid_from timestamptz NOT NULL, _valid_to timestamptz,
                        _deleted boolean NOT NULL DEFAULT false, _is_current boolean,
                        _fields text[], _kafka_offset bigint, PRIMARY KEY (id, _valid_from));
CREATE TABLE $S.hist_t (LIKE $S.hist_u INCLUDING DEFAULTS, _states jsonb, PRIMARY KEY (id, _valid_from));
ALTER TABLE $S.hist_t DROP COLUMN _fields;
SELECT kafka_sink.create_pipeline(name => '$PU', bootstrap_servers => '$KS_BOOTSTRAP',
    subscribe => ARRAY['$TOPIC'], target => '$S.hist_u', mode => 'history', order_column => 'ts',
    key_format => 'string', delete_on_tombstone => true, starting_offsets => 'earliest',
    max_offsets_per_batch => $BATCH, trigger_interval => '0');
SELECT kafka_sink.create_pipeline(name => '$PT', bootstrap_servers => '$KS_BOOTSTRAP',
    subscribe => ARRAY['$TOPIC'], target => '$S.hist_t', mode => 'history', order_column => 'ts',
    key_format => 'string', delete_on_tombstone => true, starting_offsets => 'earliest',
    max_offsets_per_batch => $BATCH, trigger_interval => '0',
    track_history_columns => string_to_array('$TRACKED', ','));
SQL

pipeline_id() { qr 30 "SELECT id FROM kafka_sink.pipeline_definitions WHERE name = '$1'"; }
IDU="$(pipeline_id "$PU")"
IDT="$(pipeline_id "$PT")"

# the events, cut into one chunk per case and a first one without fault
python3 "$E2E/history_model.py" gen "$SEED" "$(date +%s%3N)" "$W/msgs" "$N_EV" "$N_KEYS"
read -r -a cases <<< "$CASES"
total="$(wc -l < "$W/msgs")"
nchunks=$(( ${#cases[@]} + 1 ))
per=$(( (total + nchunks - 1) / nchunks ))
split -d -a 2 -l "$per" "$W/msgs" "$W/chunk."
chunk_no=0
produce_chunk() {
    local f
    f="$(printf '%s/chunk.%02d' "$W" "$chunk_no")"
    chunk_no=$((chunk_no + 1))
    [ -s "$f" ] || return 0
    kcat -P -b "$KS_BOOTSTRAP" -t "$TOPIC" -p 0 -K $'\t' -Z -X enable.idempotence=true \
         -X message.timeout.ms=60000 < "$f" 2> "$W/kcat.err" \
        || { cat "$W/kcat.err" >&2; die "kcat failed producing $f"; }
}

# in_batch TIMEOUT: true once a kafka_sink worker is inside a batch
in_batch() {
    [ "$(psql -X -q -A -t -c "DO \$\$
        DECLARE deadline timestamptz := clock_timestamp() + interval '$1 s';
        BEGIN
            LOOP
                PERFORM pg_stat_clear_snapshot();
                EXIT WHEN EXISTS (SELECT 1 FROM pg_stat_activity WHERE state = 'active'
                                     AND query LIKE 'kafka_sink: applying%')
                          OR clock_timestamp() > deadline;
                PERFORM pg_sleep(0.002);
            END LOOP;
        END \$\$" -c "SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE state = 'active'
                                         AND query LIKE 'kafka_sink: applying%')" 2>/dev/null | tail -1)" = t ]
}

# kill -9 of our cluster's postmaster, then of whatever of its children is
# still there after 30 s (the workers exit when they see it gone), and a
# new start (crash recovery)
kill9_postmaster() {
    local pm kids p deadline
    pm="$(postmaster_pid)"
    [ -n "$pm" ] && grep -q "$KS_PGDATA" "/proc/$pm/cmdline" 2>/dev/null || { warn "no postmaster of $KS_PGDATA"; return 1; }
    kids="$(awk -v pm="$pm" '/^PPid:/ && $2 == pm { split(FILENAME, a, "/"); print a[3] }' /proc/[0-9]*/status 2>/dev/null || true)"
    chaos_stopped_pg=1
    kill -KILL "$pm"
    deadline=$((SECONDS + 30))
    for p in $kids; do
        while kill -0 "$p" 2>/dev/null && [ $SECONDS -lt $deadline ]; do sleep 0.2; done
        if kill -0 "$p" 2>/dev/null; then
            warn "postmaster child $p still there 30 s after the kill: kill -9"
            kill -KILL "$p" 2>/dev/null || true
        fi
    done
    pg_start >/dev/null
}

# ---------------------------------------------------------------- the cases
produce_chunk
if ! wait_all 120 "$PU" "$PT" > "$W/wait0.out"; then
    die "the pipelines apply the first chunk without fault: $(cat "$W/wait0.out")"
fi
for cs in "${cases[@]}"; do
    point="${cs%/*}"
    action="${cs#*/}"
    errs=()
    echo
    log "case $cs: chunk $chunk_no"
    if [ "$point" = postmaster ]; then
        olds="$(worker_pid "$PU") $(worker_pid "$PT")"
        produce_chunk
        if in_batch 20; then how="inside a batch"; else how="no batch seen within 20 s"; fi
        log "$cs: kill -9 of the postmaster $(postmaster_pid) ($how)"
        kill9_postmaster || errs+=("could not kill and restart the postmaster")
        [ "$how" = "inside a batch" ] || errs+=("the kill came $how")
    else
        fault_window "$point" "$action" "$FAIL_TIMEOUT" "$PU:$IDU" "$PT:$IDT" -- produce_chunk
        errs+=("${fault_errs[@]}")
    fi
    t0=$SECONDS
    if wait_all 180 "$PU" "$PT" > "$W/wait.out"; then
        log "$cs: both pipelines caught up $((SECONDS - t0))s after the fault"
    else
        errs+=("catch up: $(cat "$W/wait.out")")
    fi
    if [ "$point" = postmaster ]; then
        news="$(worker_pid "$PU") $(worker_pid "$PT")"
        for o in $olds; do
            [[ " $news " != *" $o "* ]] || errs+=("worker $o was there before the kill and after it ($olds -> $news)")
        done
    fi
    if [ ${#errs[@]} -eq 0 ]; then
        pass "$cs: both workers failed and came back, both pipelines caught up"
    else
        fail "$cs: $(printf '%s; ' "${errs[@]}")"
    fi
done
while [ -s "$(printf '%s/chunk.%02d' "$W" "$chunk_no")" ]; do produce_chunk; done
wait_all 180 "$PU" "$PT" > "$W/wait.out" || fail "the last chunk: $(cat "$W/wait.out")"

# ---------------------------------------------------------------- checks
echo
kcat -C -b "$KS_BOOTSTRAP" -t "$TOPIC" -p 0 -o beginning -e -q -f '%o\t%T\n' > "$W/ts"
[ "$(wc -l < "$W/ts")" = "$total" ] || fail "the topic holds $(wc -l < "$W/ts") messages, $total were produced"
python3 "$E2E/history_model.py" expect "$W/msgs" "$W/ts" "$W/expected_u" "$W/pit_u" "$SEED"
python3 "$E2E/history_model.py" expect "$W/msgs" "$W/ts" "$W/expected_t" "$W/pit_t" "$SEED" "$TRACKED"
if awk -F'\t' '$9 > 1 { f = 1 } END { exit !f }' "$W/expected_t" && ! cmp -s <(cut -f1-8 "$W/expected_u") <(cut -f1-8 "$W/expected_t"); then
    pass "the model's tracked versions differ from the untracked ones, some hold several states (the check can fail)"
else
    fail "the model's tracked table is the untracked one: the seed tests nothing"
fi
for id in "$IDU" "$IDT"; do
    if [ "$id" = "$IDU" ]; then
        name=$PU tbl=hist_u exp="$W/expected_u" kept=_fields what=""
    else
        name=$PT tbl=hist_t exp="$W/expected_t" kept="jsonb_array_length(_states)" what=" (tracking $TRACKED, with each version's number of states)"
    fi
    qr 60 "COPY (SELECT id, (extract(epoch FROM _valid_from) * 1000)::bigint,
                        (extract(epoch FROM _valid_to) * 1000)::bigint, _deleted, _is_current, a, b, c, $kept
                   FROM $S.$tbl ORDER BY id, _valid_from) TO STDOUT" > "$W/actual.$tbl"
    if diff -u "$exp" "$W/actual.$tbl" > "$W/diff.$tbl"; then
        pass "$name: $total messages, the table equals the model version by version$what ($(wc -l < "$exp") versions)"
    else
        fail "$name: the table differs from the model$what: $(grep -c '^[-+][0-9]' "$W/diff.$tbl") lines ($W/diff.$tbl)"
        head -n 20 "$W/diff.$tbl"
    fi
    bad="$(range_faults "$id" "$TOPIC")" || bad="could not read the batches"
    more="$(qr 30 "SELECT concat_ws('; ',
              CASE WHEN (SELECT coalesce(max(next_offset), 0) FROM kafka_sink.offsets
                          WHERE pipeline_id = $id AND topic = '$TOPIC') <> $total
                   THEN 'the checkpoint is not the high watermark $total' END,
              (SELECT format('last_batch_id %s, %s batches, ids %s..%s, sum(messages) %s', d.last_batch_id,
                             count(b.batch_id), min(b.batch_id), max(b.batch_id), sum(b.messages))
                 FROM kafka_sink.pipeline_definitions d LEFT JOIN kafka_sink.batches b ON b.pipeline_id = d.id
                WHERE d.id = $id GROUP BY d.last_batch_id
               HAVING count(b.batch_id) <> d.last_batch_id OR min(b.batch_id) <> 1 OR sum(b.messages) <> $total),
              (SELECT count(*) || ' quarantine rows' FROM kafka_sink.quarantine WHERE pipeline_id = $id HAVING count(*) > 0))")" \
        || more="could not read the catalog"
    bad="${bad:+$bad${more:+; }}$more"
    if [ -z "$bad" ]; then
        pass "$name: checkpoint = high watermark $total, the batches' ranges tile 0..$total (each offset in one batch), ids contiguous, no quarantine"
    else
        fail "$name: $bad"
    fi
done
log "crash restarts in the log: $(pg_log_since_start | grep -c 'terminated by signal 9' || true)," \
    "injected FATALs: $(pg_log_since_start | grep -c 'kafka_sink fault injected' || true)"
[ $chaos_failed -eq 0 ] || show_diagnostics "$PU" "$PT"
chaos_summary
[ $chaos_failed -eq 0 ]
