#!/usr/bin/env bash
# test/chaos/two_databases.sh -- exactly once with pipelines in two databases
# at once (kafka_sink.database empty: one launcher, a scheduler per
# database), while workers of either database are killed with kill -9 (each
# kill makes the postmaster restart the cluster: every scheduler, worker and
# the shared memory) and the postmaster itself once (pg-kill: immediate
# shutdown, then pg-start).  Each database's target must equal its own model
# (test/chaos/model.py over the messages produced to its topic), its
# checkpoint the topic's high watermarks, its batches count every message
# once, with contiguous batch ids 1..last_batch_id.  The two pipelines have
# the same id (1, fresh databases): the shared memory (batch-id counters,
# worker slots) is keyed by database and pipeline.
#
#   test/run_tests.sh chaos       (KS_SCRIPTS=two_databases for this one)
# Knobs: CHAOS_MESSAGES (20000 per database), CHAOS_KEYS (2000),
# CHAOS_KILLS (8), CHAOS_CHUNKS (12), CHAOS_SEED.
set -euo pipefail

CHAOS_NAME=two_databases
# shellcheck source=test/chaos/lib.bash
. "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lib.bash"

MESSAGES="${CHAOS_MESSAGES:-20000}"
KEYS="${CHAOS_KEYS:-2000}"
KILLS="${CHAOS_KILLS:-8}"
CHUNKS="${CHAOS_CHUNKS:-12}"
SEED="${CHAOS_SEED:-$((RANDOM * 32768 + RANDOM))}"
BATCH=1000
P=chaos2                                 # pipeline, role and schema

chaos_setup_env
RUN_ID="$(date +%Y%m%d%H%M%S)_$$"
CHAOS_WORK="$KS_RUN/chaos/two_databases.$RUN_ID"
W="$CHAOS_WORK"
mkdir -p "$W"
DBS=("ks_chaos_a_$$" "ks_chaos_b_$$")
log "seed $SEED, $MESSAGES messages per database, $KILLS worker kills, databases ${DBS[*]}, files in $W"

in_db() { local d="$1"; shift; PGDATABASE="$d" "$@"; }

cleanup_dbs() {
    psql -X -q -d postgres -c "ALTER SYSTEM RESET kafka_sink.database" -c "SELECT pg_reload_conf()" >/dev/null 2>&1 || true
    if [ $chaos_failed -gt 0 ] || [ "${CHAOS_KEEP:-0}" = 1 ]; then
        log "kept databases ${DBS[*]} (their pipelines stopped) and $W"
        for d in "${DBS[@]}"; do in_db "$d" psql -X -q -c "SELECT kafka_sink.stop('$P')" >/dev/null 2>&1 || true; done
        return
    fi
    for d in "${DBS[@]}"; do
        psql -X -q -d postgres -c "DROP DATABASE IF EXISTS $d WITH (FORCE)" >/dev/null 2>&1 || true
        harness topic-delete "t_$d" >/dev/null 2>&1 || true
    done
    rm -rf "$W"
}
chaos_cleanup_hooks+=(cleanup_dbs)
q "ALTER SYSTEM SET kafka_sink.database = ''" >/dev/null
q "SELECT pg_reload_conf()" >/dev/null

# ---------------------------------------------------------------- setup
n=0
for d in "${DBS[@]}"; do
    n=$((n + 1))
    python3 "$CHAOS_DIR/gen_orders.py" "$W/produced.$d" "$MESSAGES" "$KEYS" $((SEED + n))
    python3 "$CHAOS_DIR/split_chunks.py" "$W/produced.$d" "$CHUNKS" $((SEED + n)) "$W/chunk.$d."
    harness topic-create "t_$d" 4 >/dev/null 2>&1 || die "could not create topic t_$d"
    q "CREATE DATABASE $d" >/dev/null
    in_db "$d" psql -X -q -v ON_ERROR_STOP=1 >/dev/null <<SQL
SET client_min_messages = warning;
CREATE EXTENSION kafka_sink;
DO \$\$ BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '$P') THEN CREATE ROLE $P LOGIN; END IF;
END \$\$;
GRANT kafka_sink_admin TO $P;
CREATE SCHEMA $P AUTHORIZATION $P;
SET ROLE $P;
CREATE TABLE $P.orders (order_id bigint PRIMARY KEY, event_ts bigint NOT NULL, amount numeric(18,2), note text);
SQL
    id="$(in_db "$d" q "SET ROLE $P; SELECT kafka_sink.create_pipeline(
        name => '$P', bootstrap_servers => '$KS_BOOTSTRAP', subscribe => ARRAY['t_$d'],
        target => '$P.orders', order_column => 'event_ts', starting_offsets => 'earliest',
        max_offsets_per_batch => $BATCH)")"
    log "database $d: pipeline $P id $id, topic t_$d"
    [ "$id" = 1 ] && pass "database $d: the pipeline's id is 1, as in the other database" \
                  || fail "database $d: the pipeline's id is $id, not 1: the test of shared memory keys needs equal ids"
done

# ---------------------------------------------------------------- production
# one background producer: the chunks of both topics, alternately, one kcat
# at a time (each key's messages stay in order in its partition)
producer_loop() {
    trap - EXIT INT
    local i f d
    for ((i = 0; i < CHUNKS; i++)); do
        for d in "${DBS[@]}"; do
            f="$(printf '%s%03d' "$W/chunk.$d." "$i")"
            kcat -P -b "$KS_BOOTSTRAP" -t "t_$d" -K $'\t' -X enable.idempotence=true \
                 -X message.timeout.ms=120000 < "$f" 2>> "$W/kcat.err" || { echo failed > "$W/producer.state"; exit 1; }
        done
        sleep "$(rand_between 200 1200)"
    done
    echo done > "$W/producer.state"
}
producer_loop &
producer_pid=$!
chaos_bg_pids+=("$producer_pid")

# workers of our two databases
our_workers() {
    psql -X -q -A -t -d postgres -c "SELECT pid FROM pg_stat_activity WHERE backend_type = 'kafka_sink worker'
                                      AND datname IN ('${DBS[0]}', '${DBS[1]}') ORDER BY random()" 2>/dev/null || true
}
both_running() {
    [ "$(psql -X -q -A -t -d postgres -c "SELECT count(DISTINCT datname) FROM pg_stat_activity WHERE backend_type = 'kafka_sink worker'
                                           AND datname IN ('${DBS[0]}', '${DBS[1]}')" 2>/dev/null)" = 2 ]
}

# ---------------------------------------------------------------- chaos
kills=0
pg_killed=0
while [ $kills -lt "$KILLS" ]; do
    wait_for 90 both_running || die "the workers of both databases did not come back within 90 s"
    sleep "$(rand_between 300 2500)"
    if [ $pg_killed = 0 ] && [ $kills = $((KILLS / 2)) ]; then
        log "pg-kill (the postmaster, immediate) and pg-start"
        pg_kill >/dev/null
        pg_start >/dev/null
        pg_killed=1
        continue
    fi
    pid="$(our_workers | head -n 1)"
    [ -n "$pid" ] || continue
    if kill9_worker "$pid"; then
        kills=$((kills + 1))
        log "kill -9 of worker $pid ($kills/$KILLS)"
    fi
done
wait "$producer_pid" || die "the producer failed: $(cat "$W/kcat.err" 2>/dev/null | tail -n 3)"
chaos_bg_pids=()
[ "$(cat "$W/producer.state" 2>/dev/null)" = done ] || die "the producer did not finish"
wait_for 90 both_running || die "the workers did not come back after the chaos"

# ---------------------------------------------------------------- checks
echo
log "checks"
for d in "${DBS[@]}"; do
    in_db "$d" qr 60 "SELECT kafka_sink.wait('$P', '120 s')" >/dev/null || fail "$d: kafka_sink.wait failed"
    python3 "$CHAOS_DIR/model.py" "$W/produced.$d" > "$W/model.$d"
    in_db "$d" qr 30 "COPY (SELECT order_id, event_ts, amount, note FROM $P.orders ORDER BY order_id) TO STDOUT" > "$W/target.$d"
    if diff "$W/model.$d" "$W/target.$d" > "$W/diff.$d"; then
        pass "$d: target equals its model: $(wc -l < "$W/target.$d") rows from $MESSAGES messages"
    else
        fail "$d: target equals its model: $(grep -c '^[<>]' "$W/diff.$d") differing lines ($W/diff.$d)"
        head -n 10 "$W/diff.$d"
    fi
    harness topic-offsets "t_$d" > "$W/watermarks.$d"
    in_db "$d" qr 30 "SELECT partition || E'\t' || next_offset FROM kafka_sink.offsets o
        JOIN kafka_sink.pipeline_definitions p ON p.id = o.pipeline_id WHERE p.name = '$P' ORDER BY partition" > "$W/offsets.$d"
    hw="$(awk -F'\t' '{s += $2} END {print s + 0}' "$W/watermarks.$d")"
    if diff -q "$W/watermarks.$d" "$W/offsets.$d" >/dev/null && [ "$hw" = "$MESSAGES" ]; then
        pass "$d: checkpoint equals the high watermarks, $hw messages in the topic"
    else
        fail "$d: checkpoint equals the high watermarks: $(paste -sd' ' "$W/offsets.$d") vs $(paste -sd' ' "$W/watermarks.$d") ($hw messages)"
    fi
    read -r last nb bmin bsum <<< "$(in_db "$d" qr 30 "SELECT p.last_batch_id, count(b.batch_id), coalesce(min(b.batch_id), 0), coalesce(sum(b.messages), 0)
        FROM kafka_sink.pipeline_definitions p LEFT JOIN kafka_sink.batches b ON b.pipeline_id = p.id
       WHERE p.name = '$P' GROUP BY p.last_batch_id" | tr '|' ' ')"
    if [ "$nb" = "$last" ] && [ "$bmin" = 1 ] && [ "$bsum" = "$MESSAGES" ]; then
        pass "$d: batch ids contiguous 1..$last, sum(messages) = $bsum"
    else
        fail "$d: batch ids contiguous and sum(messages) = $MESSAGES: last $last, $nb batches, min $bmin, sum $bsum"
    fi
    nq="$(in_db "$d" qr 30 "SELECT count(*) FROM kafka_sink.quarantine")"
    [ "$nq" = 0 ] && pass "$d: no quarantine rows" || fail "$d: $nq quarantine rows"
done
log "worker kills: $kills, postmaster kills: $pg_killed"
[ $chaos_failed -eq 0 ] || { for d in "${DBS[@]}"; do PGDATABASE="$d" show_diagnostics "$P"; done; }
chaos_summary
[ $chaos_failed -eq 0 ]
