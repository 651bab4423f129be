#!/usr/bin/env bash
# test/chaos/exactly_once.sh -- kafka_sink's guarantee (DESIGN.md section 1)
# under crashes: the target of a merge pipeline must equal a model computed
# from the produced messages, whatever was killed while it consumed.
#
#   test/chaos/exactly_once.sh                # standalone (see lib.bash)
#   test/run_tests.sh chaos                   # with the suite's broker/cluster
#
# What it does:
#   1. a fresh 4-partition topic, role chaos, table chaos.orders, pipeline
#      "chaos" (merge on order_id, order column event_ts, batches of 5000);
#   2. CHAOS_MESSAGES (100000) order events over CHAOS_KEYS (10000) order ids
#      (repeated keys, out-of-order event_ts, equal event_ts, producer
#      duplicates; test/chaos/gen_orders.py), produced by kcat with
#      idempotence, keyed (so each key stays in one partition, in order), in
#      CHAOS_CHUNKS (30) chunks of random sizes, with random pauses, while
#      the chaos goes on;
#   3. the chaos: kill -9 of the worker CHAOS_KILLS (16) times at random
#      points (two of three aimed at a batch being applied; every kill
#      makes the postmaster restart the cluster), one pg-kill (immediate
#      shutdown) + pg-start, one broker stop + start with one more worker
#      kill while the broker is down, a 5 s broker hang (kafka-pause /
#      kafka-resume: SIGSTOP / SIGCONT), and a few pg_cancel_backend aimed at
#      a batch (a transient error: rollback and rewind in the same worker);
#      after each, the worker must come back within CHAOS_WORKER_TIMEOUT
#      (90) s, and the worker started during the broker outage must catch
#      up with new messages by itself once the broker is back;
#   4. kafka_sink.wait, then the checks:
#      a. target == model (test/chaos/model.py, from the produced file)
#      b. checkpoint == high watermarks, and the topic holds exactly the
#         produced messages
#      c. batch ids are 1..last_batch_id, sum(messages) == produced
#      d. no quarantine rows
#      e. the batches' per-partition ranges chain from 0 to the checkpoint
#         with no gap and no overlap, each range's message count = its size
# Last line: "exactly_once: N passed, N failed"; exit status 1 on a failure.
# Other knobs: CHAOS_SEED (random, printed: rerun a failure with it),
# CHAOS_WORKERS (1: workers of the pipeline, each owning some partitions),
# CHAOS_EXTRA_KILLS (10: more kills while the producer still runs),
# CHAOS_KEEP=1, CHAOS_KEEP_RUNNING=1.
# CHAOS_FORMAT=avro: the same messages as Avro values in Confluent's wire
# format (test/chaos/avro_producer.py with confluent-kafka instead of kcat),
# the pipeline reading them through test/tools/schema_registry.py
# (value_format avro); the model and every check stay the same.
set -euo pipefail

CHAOS_NAME=exactly_once${CHAOS_FORMAT:+_$CHAOS_FORMAT}
CHAOS_NAME=${CHAOS_NAME%_json}
# shellcheck source=test/chaos/lib.bash
. "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lib.bash"

MESSAGES="${CHAOS_MESSAGES:-100000}"
KEYS="${CHAOS_KEYS:-10000}"
KILLS="${CHAOS_KILLS:-16}"
CHUNKS="${CHAOS_CHUNKS:-30}"
SEED="${CHAOS_SEED:-$((RANDOM * 32768 + RANDOM))}"
WORKER_TIMEOUT="${CHAOS_WORKER_TIMEOUT:-90}"
BATCH=5000
WORKERS="${CHAOS_WORKERS:-1}"
P=chaos                                  # pipeline, role and schema
FORMAT="${CHAOS_FORMAT:-json}"
case "$FORMAT" in json|avro) ;; *) echo "CHAOS_FORMAT is json or avro" >&2; exit 2 ;; esac
[ "$KEYS" -le "$MESSAGES" ] || { echo "CHAOS_KEYS must not exceed CHAOS_MESSAGES" >&2; exit 2; }
[ "$KILLS" -ge 2 ] || { echo "CHAOS_KILLS must be at least 2" >&2; exit 2; }

chaos_setup_env
RUN_ID="$(date +%Y%m%d%H%M%S)_$$"
TOPIC="chaos_eo_$RUN_ID"
CHAOS_WORK="$KS_RUN/chaos/exactly_once.$RUN_ID"
mkdir -p "$CHAOS_WORK"
W="$CHAOS_WORK"
log "seed $SEED, $MESSAGES messages, $KEYS keys, $KILLS worker kills, $WORKERS worker(s), topic $TOPIC, files in $W"

# ---------------------------------------------------------------- setup
log "generating the messages"
python3 "$CHAOS_DIR/gen_orders.py" "$W/produced.txt" "$MESSAGES" "$KEYS" "$SEED"
python3 "$CHAOS_DIR/split_chunks.py" "$W/produced.txt" "$CHUNKS" "$SEED" "$W/chunk."
chunks=("$W"/chunk.*)

harness topic-create "$TOPIC" 4 2> "$W/topic-create.err" >/dev/null \
    || { cat "$W/topic-create.err" >&2; die "could not create topic $TOPIC"; }

chaos_owner_schema "$P" "$P" "$P"
psql -X -q -v ON_ERROR_STOP=1 <<SQL >/dev/null
SET ROLE $P;
CREATE TABLE $P.orders (
    order_id bigint PRIMARY KEY,
    event_ts bigint NOT NULL,
    amount   numeric(18,2),
    note     text
);
SQL
FORMAT_ARGS=
if [ "$FORMAT" = avro ]; then
    # confluent-kafka from PyPI (as test/e2e/avro.sh), the test registry
    PY_HOME="${KS_AVRO_VENV:-$KS_RUN/venv}"
    if [ ! -x "$PY_HOME/bin/python" ] || ! "$PY_HOME/bin/python" -c 'import confluent_kafka, fastavro' 2>/dev/null; then
        python3 -m venv "$PY_HOME"
        "$PY_HOME/bin/pip" install -q --disable-pip-version-check 'confluent-kafka[avro,json,schemaregistry]' >/dev/null
    fi
    AVRO_PY="$PY_HOME/bin/python"
    python3 "$CHAOS_DIR/../tools/schema_registry.py" --port 0 --port-file "$W/registry.port" \
        --state "$W/registry.json" > "$W/registry.log" 2>&1 &
    REGISTRY_PID=$!
    stop_registry() { stop_process "$REGISTRY_PID"; wait "$REGISTRY_PID" 2>/dev/null || true; }
    chaos_cleanup_hooks+=(stop_registry)
    for _ in $(seq 100); do [ -s "$W/registry.port" ] && break; sleep 0.1; done
    REGISTRY="http://127.0.0.1:$(cat "$W/registry.port")"
    SCHEMA_ID="$(curl -sf -XPOST -H 'Content-Type: application/json' \
        --data "$(python3 -c 'import json,sys; print(json.dumps({"schema": sys.argv[1]}))' "$("$AVRO_PY" "$CHAOS_DIR/avro_producer.py" - - -1)")" \
        "$REGISTRY/subjects/$TOPIC-value/versions" | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')" \
        || die "could not register the Avro schema"
    FORMAT_ARGS=", value_format => 'avro', schema_registry => '{\"url\": \"$REGISTRY\"}'"
    log "Avro values: registry $REGISTRY, schema id $SCHEMA_ID"
fi
PIPELINE_ID="$(q "SET ROLE $P; SELECT kafka_sink.create_pipeline(
        name => '$P', bootstrap_servers => '$KS_BOOTSTRAP', subscribe => ARRAY['$TOPIC'],
        target => '$P.orders', order_column => 'event_ts', starting_offsets => 'earliest',
        max_offsets_per_batch => $BATCH, workers => $WORKERS $FORMAT_ARGS)")"
log "pipeline $P created (id $PIPELINE_ID)"

keep_or_drop() {
    if [ $chaos_failed -gt 0 ] || [ "${CHAOS_KEEP:-0}" = 1 ]; then
        # keep the evidence, but stop the worker
        psql -X -q -c "SELECT kafka_sink.stop('$P')" >/dev/null 2>&1 || true
        log "kept (stopped) pipeline $P, table $P.orders, topic $TOPIC and $W"
    else
        psql -X -q -c "SELECT kafka_sink.drop_pipeline('$P', if_exists => true)" -c "DROP SCHEMA IF EXISTS $P CASCADE" \
            >/dev/null 2>&1 || true
        harness topic-delete "$TOPIC" >/dev/null 2>&1 || true
        rm -rf "$W"
    fi
}
chaos_cleanup_hooks+=(keep_or_drop)

# ---------------------------------------------------------------- production
# One background producer sends the chunks in file order, one kcat at a
# time (so each key's messages reach its partition in file order), with a
# random pause between chunks.  kcat gives up when every broker is down, so
# the chaos loop pauses it around the broker outage (producer.pause, and
# waits for producer.state "paused"); the last chunk waits for the outage
# to be over (producer.last), so new messages always follow it.
producer_loop() {
    trap - EXIT INT
    local i=0 f kpid=
    trap '[ -n "$kpid" ] && kill "$kpid" 2>/dev/null; exit 143' TERM
    for f in "${chunks[@]}"; do
        i=$((i + 1))
        while [ -e "$W/producer.pause" ] || { [ $i = ${#chunks[@]} ] && [ ! -e "$W/producer.last" ]; }; do
            echo paused > "$W/producer.state"
            sleep 0.1
        done
        echo "busy $i" > "$W/producer.state"
        if [ "$FORMAT" = avro ]; then
            "$AVRO_PY" "$CHAOS_DIR/avro_producer.py" "$KS_BOOTSTRAP" "$TOPIC" "$SCHEMA_ID" \
                < "$f" 2> "$W/kcat.$i.err" &
        else
            kcat -P -b "$KS_BOOTSTRAP" -t "$TOPIC" -K $'\t' -z lz4 \
                 -X enable.idempotence=true -X message.timeout.ms=120000 -X linger.ms=5 \
                 < "$f" 2> "$W/kcat.$i.err" &
        fi
        kpid=$!
        if ! wait "$kpid"; then
            echo "$i" > "$W/producer.failed"
            echo failed > "$W/producer.state"
            exit 1
        fi
        kpid=
        echo "$i" > "$W/producer.count"
        echo "idle $i" > "$W/producer.state"
        sleep "$(rand_between 300 2000)"
    done
    echo "done" > "$W/producer.state"
}

producer_running() { [ -n "$producer_pid" ] && kill -0 "$producer_pid" 2>/dev/null; }
producer_count() { cat "$W/producer.count" 2>/dev/null || echo 0; }

# producer_pause: returns once no kcat runs (or the producer is finished)
producer_pause() {
    local deadline=$((SECONDS + 150)) st
    touch "$W/producer.pause"
    while [ $SECONDS -lt $deadline ]; do
        st="$(cat "$W/producer.state" 2>/dev/null || true)"
        case "$st" in paused|done|failed) return 0 ;; esac
        producer_running || return 0
        sleep 0.1
    done
    die "the producer did not pause within 150 s (state: $st)"
}

finish_producer() {
    [ -n "$producer_pid" ] || return 0
    local rc=0
    wait "$producer_pid" || rc=$?
    producer_pid=
    if [ $rc -ne 0 ]; then
        local c; c="$(cat "$W/producer.failed" 2>/dev/null || echo '?')"
        cat "$W/kcat.$c.err" >&2 || true
        die "kcat failed producing chunk $c (producer exit $rc): the topic may now hold part of it"
    fi
}

# ---------------------------------------------------------------- chaos
kills=0
cancels=0
kill_phases=()
chaos_ok=1

# phase PID: what the worker is doing, from pg_stat_activity
phase() {
    local s
    s="$(psql -X -q -A -t -c "SELECT CASE WHEN state = 'active' THEN 'active: ' || query
                                          ELSE state || coalesce(' (after: ' || nullif(query, '') || ')', '') END
                                FROM pg_stat_activity WHERE pid = $1" 2>/dev/null || true)"
    echo "${s:-unknown}"
}

# wait_applying PID TIMEOUT [cancel]: until the worker is inside a batch
# transaction.  A batch takes tens of milliseconds, too short to catch by
# starting psql in a loop: the loop runs in the server, re-reading the
# activity every 2 ms.  With "cancel", the server itself sends the query
# cancel a random 0..20 ms after it saw the batch, if it still runs then.
wait_applying() {
    local r act=
    [ "${3:-}" = cancel ] && act="PERFORM pg_sleep(random() * 0.02);
                    PERFORM pg_stat_clear_snapshot();
                    IF EXISTS (SELECT 1 FROM pg_stat_activity WHERE pid = $1 AND state = 'active'
                                  AND query LIKE 'kafka_sink: applying%') THEN
                        PERFORM pg_cancel_backend($1);
                    ELSE
                        PERFORM set_config('chaos.seen', 'late', false);
                        EXIT;
                    END IF;"
    r="$(psql -X -q -A -t -v ON_ERROR_STOP=1 -c "DO \$\$
        DECLARE deadline timestamptz := clock_timestamp() + interval '$2 s';
        BEGIN
            LOOP
                PERFORM pg_stat_clear_snapshot();
                IF EXISTS (SELECT 1 FROM pg_stat_activity WHERE pid = $1 AND state = 'active'
                              AND query LIKE 'kafka_sink: applying%') THEN
                    PERFORM set_config('chaos.seen', 'yes', false);
                    $act
                    EXIT;
                END IF;
                EXIT WHEN clock_timestamp() > deadline;
                PERFORM pg_sleep(0.002);
            END LOOP;
        END \$\$" -c "SELECT current_setting('chaos.seen', true)" 2>/dev/null || true)"
    [ "$r" = yes ]
}

do_kill() {  # do_kill PID HOW [PHASE]
    local pid="$1" how="$2" ph="${3:-}"
    [ -n "$ph" ] || ph="$(phase "$pid")"
    if kill9_worker "$pid"; then
        kills=$((kills + 1))
        kill_phases+=("$ph")
        log "kill -9 #$kills of worker $pid ($how; it was $ph)"
    else
        warn "could not kill worker $pid"
    fi
}

need_worker() {  # need_worker OLD_PID WHY -> sets $pid
    local t0=$SECONDS
    if ! pid="$(wait_worker "$P" "$1" "$WORKER_TIMEOUT")"; then
        fail "worker back within ${WORKER_TIMEOUT}s ($2)"
        chaos_ok=0
        return 1
    fi
    log "worker $pid up after $((SECONDS - t0))s ($2)"
}

# one kill: two of three aimed at a batch being applied (a random 0..30 ms
# after the worker was seen inside one), the others at a random time
kill_event() {
    if [ $((kills % 3)) != 2 ]; then
        if wait_applying "$pid" 8; then
            sleep "$(rand_between 0 30)"
            do_kill "$pid" "aimed at a batch" "active: kafka_sink: applying a batch (0-30 ms before)"
        else
            do_kill "$pid" "aimed at a batch, none came within 8 s"
        fi
    else
        sleep "$(rand_between 50 2500)"
        do_kill "$pid" "random point"
    fi
    old=$pid
}

# the events: CHAOS_KILLS worker kills, a cluster crash after the first
# third, a broker outage (with a kill in it) after the second third
pgkill_at=$(( (KILLS + 2) / 3 ))
kafka_at=$(( (KILLS * 2 + 2) / 3 ))
pause_at=$(( (KILLS + 1) / 2 ))
events=()
for ((i = 1; i <= KILLS; i++)); do
    events+=(kill)
    [ $((i % 4)) = 2 ] && events+=(cancel)
    [ $i = $pgkill_at ] && events+=(pgkill)
    [ $i = $kafka_at ] && events+=(kafka)
    [ $i = $pause_at ] && events+=(kpause)
done

rm -f "$W"/producer.*
producer_loop &
producer_pid=$!
chaos_bg_pids+=("$producer_pid")
log "producer started: ${#chunks[@]} chunks of $(wc -l "${chunks[@]}" | awk '$2 != "total" {print $1}' | sort -n | sed -n '1p;$p' | paste -sd- -) messages"
log "chaos: ${events[*]}"
old=0
pid=
n=0
for ev in "${events[@]}"; do
    n=$((n + 1))
    need_worker "$old" "before event $n ($ev), producer $(cat "$W/producer.state" 2>/dev/null)" || break
    case "$ev" in
        kill)
            kill_event
            ;;
        cancel)
            # a query cancel inside a batch: a transient error, so the same
            # worker rolls back, rewinds to the checkpoint and goes on
            for _ in 1 2 3; do
                if wait_applying "$pid" 8 cancel; then
                    cancels=$((cancels + 1))
                    log "pg_cancel_backend #$cancels of worker $pid (inside a batch)"
                    break
                fi
            done
            old=0
            ;;
        kpause)
            # a hung broker (SIGSTOP): connections stay open, requests time out
            sleep "$(rand_between 0 1000)"
            log "hung broker: test/harness.sh kafka-pause for 5 s (the worker was $(phase "$pid"))"
            kafka_pause
            sleep 5
            kafka_resume
            old=0
            ;;
        pgkill)
            sleep "$(rand_between 0 1500)"
            log "cluster crash: test/harness.sh pg-kill (the worker was $(phase "$pid"))"
            pg_kill
            sleep 1
            pg_start
            old=$pid
            ;;
        kafka)
            sleep "$(rand_between 0 1000)"
            producer_pause
            c0="$(producer_count)"
            log "broker outage: test/harness.sh kafka-stop (producer paused after chunk $c0)"
            kafka_stop
            sleep 2
            do_kill "$pid" "while the broker is down"
            old=$pid
            need_worker "$old" "broker still down" || break
            sleep 1
            pids0="$(worker_pids "$P")"
            sleep 2
            log "broker back: test/harness.sh kafka-start"
            kafka_start
            touch "$W/producer.last"
            rm -f "$W/producer.pause"
            # the worker that started while the broker was down must go on
            # by itself: new messages, no kill, caught up within 60 s
            deadline=$((SECONDS + 60))
            while [ "$(producer_count)" = "$c0" ] && producer_running && [ $SECONDS -lt $deadline ]; do sleep 0.2; done
            t0=$SECONDS
            if [ "$(producer_count)" != "$c0" ] \
               && [ "$(psql -X -q -A -t -c "SELECT kafka_sink.wait('$P', '60 s')" 2>&1)" = t ] \
               && [ "$(worker_pids "$P")" = "$pids0" ]; then
                log "worker(s) $pids0, started during the outage, caught up with chunk $(producer_count) in $((SECONDS - t0))s"
            else
                fail "the worker(s) started during the broker outage catch up with new messages within 60 s (workers $pids0 -> $(worker_pids "$P"), chunks delivered $c0 -> $(producer_count))"
                chaos_ok=0
                # the evidence: what the worker shows, its recent errors, the
                # offsets against the log's end, and its lines in the log
                log "status: $(qr 10 "SELECT state || ' | ' || coalesce(worker_detail, '') || ' | behind ' || max_offsets_behind || ' | last commit ' || coalesce(last_commit_at::text, '-') FROM kafka_sink.status WHERE name = '$P'" || echo '?')"
                qr 10 "SELECT occurred_at || ' ' || kind || ' ' || message FROM kafka_sink.errors WHERE pipeline_id = $PIPELINE_ID ORDER BY id DESC LIMIT 5" || true
                harness topic-offsets "$TOPIC" 2>&1 | head -n 20 || true
                qr 10 "SELECT partition || ': ' || next_offset FROM kafka_sink.offsets WHERE pipeline_id = $PIPELINE_ID ORDER BY 1" 2>&1 | head -n 20 || true
                for wp in $pids0 $(worker_pids "$P"); do
                    pg_log_since_start | grep -F "[$wp]" | tail -n 25 || true
                done
            fi
            old=0                  # the next event uses the running worker
            ;;
    esac
done

# more kills while the producer still runs (at most CHAOS_EXTRA_KILLS)
extra=0
while [ $chaos_ok = 1 ] && producer_running && [ $extra -lt "${CHAOS_EXTRA_KILLS:-10}" ]; do
    need_worker "$old" "extra kill, producer $(cat "$W/producer.state" 2>/dev/null)" || break
    kill_event
    extra=$((extra + 1))
done
touch "$W/producer.last"
rm -f "$W/producer.pause"
finish_producer
log "all $MESSAGES messages produced; $kills worker kills done"
if [ $chaos_ok = 1 ] && [ $kills -lt 10 ]; then
    fail "at least 10 worker kills (only $kills)"
    chaos_ok=0
fi

# ---------------------------------------------------------------- catch up
# the last kill may still be in crash recovery: wait for the worker first
if [ $chaos_ok = 1 ]; then need_worker "$old" "after the chaos" || true; fi
log "kafka_sink.wait('$P', '180 s')"
t0=$SECONDS
caught_up=
deadline=$((SECONDS + 200))
while [ $SECONDS -lt $deadline ]; do
    caught_up="$(psql -X -q -A -t -v ON_ERROR_STOP=1 -c "SELECT kafka_sink.wait('$P', '180 s')" 2>"$W/wait.err" || true)"
    [ -n "$caught_up" ] && break
    grep -qE 'recovery mode|shutting down|starting up|Connection refused|server closed the connection' "$W/wait.err" || break
    sleep 1                # the cluster is restarting: try again
done
if [ "$caught_up" = t ]; then
    log "caught up in $((SECONDS - t0))s"
else
    fail "the pipeline caught up within 180 s after the chaos (wait returned '${caught_up}': $(tr '\n' ' ' < "$W/wait.err"))"
fi

# ---------------------------------------------------------------- checks
echo
log "checks"

# a. the target equals the model
python3 "$CHAOS_DIR/model.py" "$W/produced.txt" > "$W/model.txt"
qr 30 "COPY (SELECT order_id, event_ts, amount, note FROM $P.orders ORDER BY order_id) TO STDOUT" > "$W/target.txt"
if diff "$W/model.txt" "$W/target.txt" > "$W/target.diff"; then
    pass "a. target equals the model: $(wc -l < "$W/target.txt") rows, one per order id, from $MESSAGES messages"
else
    fail "a. target equals the model: model $(wc -l < "$W/model.txt") rows, target $(wc -l < "$W/target.txt") rows, $(grep -c '^[<>]' "$W/target.diff") differing lines (< model, > target; $W/target.diff)"
    head -n 20 "$W/target.diff"
    for k in $(grep '^[<>]' "$W/target.diff" | awk '{print $2}' | sort -un | head -n 2); do
        echo "  messages of order_id $k in production order:"
        python3 "$CHAOS_DIR/model.py" --explain "$k" "$W/produced.txt" | tail -n 6 | sed 's/^/    /'
    done
fi

# b. checkpoint == high watermarks == what was produced
harness topic-offsets "$TOPIC" > "$W/watermarks.txt"
qr 30 "SELECT partition || E'\t' || next_offset FROM kafka_sink.offsets
        WHERE pipeline_id = $PIPELINE_ID AND topic = '$TOPIC' ORDER BY partition" > "$W/offsets.txt"
hw_sum="$(awk -F'\t' '{s += $2} END {print s + 0}' "$W/watermarks.txt")"
if ! diff "$W/watermarks.txt" "$W/offsets.txt" > "$W/offsets.diff"; then
    fail "b. offsets equal the high watermarks: partition<TAB>offset, < high watermark, > checkpoint:"
    cat "$W/offsets.diff"
elif [ "$hw_sum" != "$MESSAGES" ]; then
    fail "b. offsets equal the high watermarks, but the topic holds $hw_sum messages, not the $MESSAGES produced"
else
    pass "b. offsets equal the high watermarks ($(paste -sd' ' "$W/offsets.txt" | tr '\t' ':')), $hw_sum messages in the topic"
fi

# c. batch ids 1..last_batch_id, every message counted once
read -r last nb bmin bmax bsum <<< "$(qr 30 "SELECT d.last_batch_id, count(b.batch_id), coalesce(min(b.batch_id), 0),
        coalesce(max(b.batch_id), 0), coalesce(sum(b.messages), 0)
   FROM kafka_sink.pipeline_definitions d LEFT JOIN kafka_sink.batches b ON b.pipeline_id = d.id
  WHERE d.id = $PIPELINE_ID GROUP BY d.last_batch_id" | tr '|' ' ')"
# (with several workers, an id one worker gave up while another had taken a
# later one stays a gap: ids are unique, last_batch_id the largest; one
# worker's ids are contiguous, its rolled-back ids are given back)
if [ "$WORKERS" = 1 ]; then
    if [ "$nb" = "$last" ] && [ "$bmax" = "$last" ] && { [ "$last" = 0 ] || [ "$bmin" = 1 ]; } && [ "$bsum" = "$MESSAGES" ]; then
        pass "c. batch ids contiguous 1..$last and sum(messages) = $bsum"
    else
        fail "c. batch ids contiguous and sum(messages) = $MESSAGES: last_batch_id $last, $nb batches, ids $bmin..$bmax, sum(messages) $bsum"
    fi
elif [ "$nb" -le "$last" ] && [ "$bmax" = "$last" ] && [ "$bsum" = "$MESSAGES" ]; then
    pass "c. batch ids unique (PRIMARY KEY), the largest is last_batch_id $last ($nb batches) and sum(messages) = $bsum"
else
    fail "c. batch ids up to last_batch_id and sum(messages) = $MESSAGES: last_batch_id $last, $nb batches, ids $bmin..$bmax, sum(messages) $bsum"
fi

# d. no quarantine rows
nq="$(qr 30 "SELECT count(*) FROM kafka_sink.quarantine WHERE pipeline_id = $PIPELINE_ID")"
if [ "$nq" = 0 ]; then
    pass "d. no quarantine rows"
else
    fail "d. no quarantine rows: $nq rows"
    qr 30 "SELECT reason, count(*), min(detail) FROM kafka_sink.quarantine WHERE pipeline_id = $PIPELINE_ID GROUP BY 1" || true
fi

# e. the committed ranges tile each partition, from 0 to the checkpoint
bad="$(range_faults "$PIPELINE_ID" "$TOPIC")"
if [ -z "$bad" ]; then
    pass "e. the batches' ranges chain per partition from 0 to the checkpoint, no gap, no overlap"
else
    fail "e. the batches' ranges chain per partition from 0 to the checkpoint: $bad"
fi

echo
log "worker kills: $kills; what each hit:"
printf '%s\n' "${kill_phases[@]}" | sed 's/^/    /' | sort | uniq -c | sed 's/^/  /'
log "query cancels: $cancels, transient errors recorded: $(qr 10 "SELECT count(*) FROM kafka_sink.errors WHERE pipeline_id = $PIPELINE_ID AND kind = 'transient'" || echo '?')"
log "batches: $last; errors recorded: $(qr 10 "SELECT count(*) FROM kafka_sink.errors WHERE pipeline_id = $PIPELINE_ID" || echo '?');" \
    "crash restarts in the log: $(pg_log_since_start | grep -c 'terminated by signal 9' || true)"
[ $chaos_failed -eq 0 ] || show_diagnostics "$P"
chaos_summary
[ $chaos_failed -eq 0 ]
