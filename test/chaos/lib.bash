# test/chaos/lib.bash -- shared by the chaos scripts (sourced, not run; the
# name does not end in .sh so test/run_tests.sh does not take it for a test).
#
# Two ways to run a chaos script:
#   - from test/run_tests.sh: KS_RUN, KS_BOOTSTRAP, PGPORT, ... are exported,
#     the broker and the cluster are up.  Nothing is started; whatever the
#     script stops (broker, cluster) is started again before it exits.
#   - standalone: KS_RUN defaults to <repo>/.run-chaos; the broker and the
#     cluster are started if they are not running, and what the script
#     started is stopped again at the end (CHAOS_KEEP_RUNNING=1 keeps them).
#     The extension must be built and installed (make && make install).
# CHAOS_KEEP=1 keeps the pipelines, tables and topics of a passing run too
# (a failing run always keeps them, stopped, for inspection).

CHAOS_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# the helpers shared with the e2e scripts (sql, check, poll, worker pids,
# produce, at_exit, ...); the env is chaos_setup_env's to load
KS_LIB_NO_ENV=1
# shellcheck source=test/lib/common.sh
. "$CHAOS_DIR/../lib/common.sh"
H="$HARNESS"

chaos_passed=0
chaos_failed=0
chaos_failed_names=()
chaos_mode=
chaos_started_kafka=0
chaos_started_pg=0
chaos_stopped_kafka=0
chaos_stopped_pg=0
chaos_paused_kafka=0
chaos_bg_pids=()
chaos_cleanup_hooks=()
CHAOS_T0=$SECONDS

log()  { printf '[%s %s] %s\n' "$CHAOS_NAME" "$(date +%H:%M:%S)" "$*"; }
warn() { printf '[%s %s] WARNING: %s\n' "$CHAOS_NAME" "$(date +%H:%M:%S)" "$*" >&2; }
pass() { chaos_passed=$((chaos_passed + 1)); printf 'PASS: %s\n' "$*"; }
fail() {
    chaos_failed=$((chaos_failed + 1))
    local short="$1"
    [ ${#short} -le 70 ] || short="${short:0:67}..."
    chaos_failed_names+=("[$short]")
    printf 'FAIL: %s\n' "$*"
}
die()  { fail "aborted: $*"; chaos_summary; exit 1; }

harness() { "$H" "$@"; }

# ---------------------------------------------------------------- services

chaos_setup_env() {
    if [ -n "${KS_BOOTSTRAP:-}" ] && [ -n "${PGPORT:-}" ]; then
        chaos_mode=caller
        if [ -z "${KS_RUN:-}" ] || [ ! -s "$KS_RUN/env" ]; then
            echo "KS_BOOTSTRAP and PGPORT are set but KS_RUN/env is not: cannot drive the harness" >&2
            exit 2
        fi
        export KS_RUN
        log "using the caller's broker $KS_BOOTSTRAP and cluster 127.0.0.1:$PGPORT (KS_RUN=$KS_RUN)"
        kcat -b "$KS_BOOTSTRAP" -L -m 5 >/dev/null 2>&1 || die "the broker $KS_BOOTSTRAP does not answer"
    else
        chaos_mode=standalone
        export KS_RUN="${KS_RUN:-$REPO/.run-chaos}"
        log "standalone: run dir $KS_RUN"
        local st
        st="$(harness status 2>/dev/null || true)"
        harness kafka-fetch >/dev/null
        case "$st" in *"kafka: running"*) ;; *) chaos_started_kafka=1 ;; esac
        case "$st" in *"postgresql: running"*) ;; *) chaos_started_pg=1 ;; esac
        harness kafka-start
        harness pg-start
    fi
    set -a
    # shellcheck disable=SC1091
    . "$KS_RUN/env"
    set +a
    PGLOG_FILE="$KS_RUN/logs/postgresql.log"
    PGLOG_START=$(( $(stat -L -c %s "$PGLOG_FILE" 2>/dev/null || echo 0) + 1 ))
    q "SELECT 1" >/dev/null || die "PostgreSQL on 127.0.0.1:$PGPORT does not answer"
    [ "$(q "SELECT count(*) FROM pg_available_extensions WHERE name = 'kafka_sink'")" = 1 ] \
        || die "the kafka_sink extension is not installed (make && make install)"
    at_exit chaos_exit
    trap 'echo; warn "interrupted"; exit 130' INT TERM
}

# at exit (common.sh's at_exit): background jobs, cleanup hooks, then
# restore the services
# shellcheck disable=SC2317  # reached through at_exit
chaos_exit() {
    trap - INT TERM
    local p
    for p in "${chaos_bg_pids[@]}"; do
        kill "$p" 2>/dev/null && wait "$p" 2>/dev/null
    done
    if [ $chaos_paused_kafka = 1 ]; then log "resuming the broker"; harness kafka-resume; fi
    if [ $chaos_stopped_kafka = 1 ]; then log "restoring the broker"; harness kafka-start; fi
    if [ $chaos_stopped_pg = 1 ]; then log "restoring the cluster"; harness pg-start; fi
    local h
    for h in "${chaos_cleanup_hooks[@]}"; do $h; done
    if [ "$chaos_mode" = standalone ] && [ "${CHAOS_KEEP_RUNNING:-0}" != 1 ]; then
        [ $chaos_started_pg = 1 ] && harness pg-stop
        [ $chaos_started_kafka = 1 ] && harness kafka-stop
    fi
}

kafka_stop()  { chaos_stopped_kafka=1; harness kafka-stop; }
kafka_start() { harness kafka-start; chaos_stopped_kafka=0; }
kafka_pause()  { chaos_paused_kafka=1; harness kafka-pause; }
kafka_resume() { harness kafka-resume; chaos_paused_kafka=0; }
pg_kill()     { chaos_stopped_pg=1; harness pg-kill; }
pg_start()    { harness pg-start; chaos_stopped_pg=0; }

# ---------------------------------------------------------------- SQL

# q SQL: one statement (or several), unaligned tuples only, errors fatal to it
q() { psql -X -q -A -t -v ON_ERROR_STOP=1 -c "$1"; }

# qr TIMEOUT SQL: a query retried while the cluster restarts (so: one that
# can run twice); QR_SLEEP seconds between tries (0.3)
qr() {
    local sql="$2" out deadline=$((SECONDS + $1))
    while :; do
        if out="$(psql -X -q -A -t -v ON_ERROR_STOP=1 -c "$sql" 2>"$CHAOS_WORK/qr.err")"; then
            printf '%s\n' "$out"
            return 0
        fi
        if [ $SECONDS -ge $deadline ]; then
            cat "$CHAOS_WORK/qr.err" >&2
            return 1
        fi
        sleep "${QR_SLEEP:-0.3}"
    done
}

postmaster_pid() { head -n 1 "$KS_PGDATA/postmaster.pid" 2>/dev/null || true; }

# chaos_owner_schema OWNER SCHEMA PIPELINES: the extension, a LOGIN role
# OWNER in kafka_sink_admin, the pipelines whose names are LIKE PIPELINES
# dropped and SCHEMA made anew, owned by OWNER
chaos_owner_schema() {
    psql -X -q -v ON_ERROR_STOP=1 <<SQL >/dev/null
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS kafka_sink;
DO \$\$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '$1') THEN
        CREATE ROLE $1 LOGIN;
    END IF;
END
\$\$;
GRANT kafka_sink_admin TO $1;
SELECT kafka_sink.drop_pipeline(name, if_exists => true)
  FROM kafka_sink.pipeline_definitions WHERE name LIKE '$3';
DROP SCHEMA IF EXISTS $2 CASCADE;
CREATE SCHEMA $2 AUTHORIZATION $1;
SQL
}

# ---------------------------------------------------------------- fault GUCs
# (kafka_sink.fault_point / fault_action; chaos_cleanup_hooks+=(reset_fault_on_exit)
# resets them at exit)
fault_set=0
# set_fault POINT ACTION (retried: the cluster may be restarting)
set_fault() {
    fault_set=1
    qr 120 "ALTER SYSTEM SET kafka_sink.fault_point = '$1'" >/dev/null
    qr 120 "ALTER SYSTEM SET kafka_sink.fault_action = '$2'" >/dev/null
    qr 120 "SELECT pg_reload_conf()" >/dev/null
}
# reset_fault: in a sigkill crash loop the cluster accepts connections only
# for a few tens of milliseconds between two restarts: try every 20 ms, and
# reset (and reload) the fault point first, which ends the loop
reset_fault() {
    QR_SLEEP=0.02 qr 120 "ALTER SYSTEM RESET kafka_sink.fault_point" >/dev/null || return 1
    QR_SLEEP=0.02 qr 120 "SELECT pg_reload_conf()" >/dev/null || return 1
    qr 120 "ALTER SYSTEM RESET kafka_sink.fault_action" >/dev/null || return 1
    qr 120 "SELECT pg_reload_conf()" >/dev/null || return 1
    fault_set=0
}
# shellcheck disable=SC2317  # reached through chaos_cleanup_hooks
reset_fault_on_exit() {
    [ $fault_set = 1 ] || return 0
    log "resetting the fault GUCs"
    reset_fault || warn "could not reset kafka_sink.fault_point: run ALTER SYSTEM RESET kafka_sink.fault_point; SELECT pg_reload_conf();"
}

# fault_window POINT ACTION TIMEOUT NAME:ID... -- CMD...: with the fault
# set, CMD (it produces what the workers will fail on); then waits up to
# TIMEOUT s until the log shows the fault (FATAL "kafka_sink fault
# injected" or a worker "terminated by signal 9") and every pipeline's
# worker pid has changed, and resets the fault.  Sets fault_seen (the
# failures in the log, 0 if none came in time) and fault_errs (what went
# wrong: no failure, or, for a point before the commit, a batch committed
# meanwhile)
fault_window() {
    local point="$1" action="$2" timeout="$3" p pat n fresh t0 log_off before="" after="" i
    local pipes=() olds=()
    shift 3
    while [ "$1" != -- ]; do pipes+=("$1"); shift; done
    shift
    fault_errs=()
    fault_seen=0
    for p in "${pipes[@]}"; do
        olds+=("$(worker_pid "${p%%:*}")")
        before+="$(committed "${p#*:}") | "
    done
    log_off=$(( $(stat -L -c %s "$PGLOG_FILE") + 1 ))
    set_fault "$point" "$action"
    sleep 1                # the workers take the reload when they next wait
    "$@"
    t0=$SECONDS
    if [ "$action" = fatal ]; then pat='FATAL:  kafka_sink fault injected'; else pat='kafka_sink worker.*terminated by signal 9'; fi
    while [ $SECONDS -lt $((t0 + timeout)) ]; do
        n="$(tail -c +"$log_off" "$PGLOG_FILE" | grep -c "$pat" || true)"
        fresh=1
        for i in "${!pipes[@]}"; do
            [ "$(worker_pid "${pipes[$i]%%:*}")" != "${olds[$i]}" ] || fresh=0
        done
        if [ "$n" -gt 0 ] && [ $fresh = 1 ]; then
            fault_seen=$n
            break
        fi
        sleep 0.2
    done
    for p in "${pipes[@]}"; do after+="$(committed "${p#*:}") | "; done
    reset_fault || die "could not reset the fault within 120 s"
    if [ "$fault_seen" = 0 ]; then
        fault_errs+=("no failure of every worker within ${timeout}s (workers ${olds[*]} -> $(for p in "${pipes[@]}"; do worker_pid "${p%%:*}"; done | paste -sd' '))")
    else                   # all the failures of the fault window
        fault_seen="$(tail -c +"$log_off" "$PGLOG_FILE" | grep -cE 'FATAL:  kafka_sink fault injected|kafka_sink worker.*terminated by signal 9' || true)"
        log "$point/$action: $fault_seen failures in the log, fault reset $((SECONDS - t0))s after the messages were produced"
    fi
    if [ "$point" != after_commit ] && [ "$before" != "$after" ]; then
        fault_errs+=("a batch committed while the fault at $point was active: before [${before% | }], after [${after% | }]")
    fi
}

# range_faults PIPELINE_ID TOPIC: what breaks "the committed batches'
# ranges tile each partition of TOPIC from 0 to its checkpoint" (a gap, an
# overlap, a range whose count is not its length, a last range that is not
# the checkpoint), empty when nothing does: each offset in exactly one batch
range_faults() {
    qr 30 "WITH r AS (
        SELECT b.batch_id, (e->>'partition')::int AS part, (e->>'start')::bigint AS s,
               (e->>'end')::bigint AS en, (e->>'messages')::bigint AS m
          FROM kafka_sink.batches b, jsonb_array_elements(b.ranges) e
         WHERE b.pipeline_id = $1 AND e->>'topic' = '$2'),
      l AS (SELECT *, lag(en) OVER (PARTITION BY part ORDER BY batch_id) AS prev FROM r),
      bad AS (
        SELECT format('batch %s partition %s [%s,%s) %s messages after %s', batch_id, part, s, en, m, coalesce(prev, 0)) AS msg
          FROM l WHERE s <> coalesce(prev, 0) OR en - s <> m OR en < s
        UNION ALL
        SELECT format('partition %s: the last range ends at %s, the checkpoint is %s', o.partition, x.en, o.next_offset)
          FROM kafka_sink.offsets o
          LEFT JOIN (SELECT part, max(en) AS en FROM r GROUP BY part) x ON x.part = o.partition
         WHERE o.pipeline_id = $1 AND o.topic = '$2' AND o.next_offset > 0
           AND x.en IS DISTINCT FROM o.next_offset)
      SELECT string_agg(msg, '; ') FROM (SELECT msg FROM bad LIMIT 10) x"
}

# committed PIPELINE_ID: the checkpoint and batch count, as one line
committed() {
    QR_SLEEP=0.02 qr 90 "SELECT (SELECT coalesce(string_agg(partition || ':' || next_offset, ' ' ORDER BY partition), '')
                     FROM kafka_sink.offsets WHERE pipeline_id = $1)
                  || ' batches ' || (SELECT count(*) FROM kafka_sink.batches WHERE pipeline_id = $1)"
}

# wait_all TIMEOUT NAME...: kafka_sink.wait for each, retried across
# restarts; prints why on failure
wait_all() {
    local timeout="$1" name r deadline
    shift
    for name in "$@"; do
        deadline=$((SECONDS + timeout + 20))
        r=
        while [ $SECONDS -lt $deadline ]; do
            r="$(psql -X -q -A -t -v ON_ERROR_STOP=1 -c "SELECT kafka_sink.wait('$name', '$timeout s')" 2>"$CHAOS_WORK/wait.err" || true)"
            [ -n "$r" ] && break
            grep -qE 'recovery mode|shutting down|starting up|Connection refused|server closed the connection|terminating connection|No such file' "$CHAOS_WORK/wait.err" || break
            sleep 1
        done
        if [ "$r" != t ]; then
            echo "$name: kafka_sink.wait returned '${r}': $(tr '\n' ' ' < "$CHAOS_WORK/wait.err")"
            return 1
        fi
    done
}

# (worker_pids, worker_pid, wait_worker: test/lib/common.sh)

# kill9_worker PID: SIGKILL, but only a kafka_sink worker of our own cluster
kill9_worker() {
    local pid="$1" cmd ppid pm
    cmd="$(tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null || true)"
    case "$cmd" in *"kafka_sink worker"*) ;; *) warn "pid $pid is not a kafka_sink worker ($cmd)"; return 1 ;; esac
    ppid="$(awk '/^PPid:/ {print $2}' "/proc/$pid/status" 2>/dev/null || true)"
    pm="$(postmaster_pid)"
    if [ -n "$pm" ] && [ "$ppid" != "$pm" ]; then
        warn "pid $pid is not a child of our postmaster $pm"
        return 1
    fi
    kill -KILL "$pid"
}

# lines of the PostgreSQL log written since the script started
pg_log_since_start() { tail -c +"$PGLOG_START" "$PGLOG_FILE" 2>/dev/null || true; }

show_diagnostics() {  # show_diagnostics PIPELINE...
    local p
    echo "---- diagnostics"
    for p in "$@"; do
        qr 10 "SELECT 'status: ' || row_to_json(s)::text FROM kafka_sink.status s WHERE name = '$p'" || true
        qr 10 "SELECT 'error: ' || e.occurred_at || ' ' || e.kind || ' ' || coalesce(e.sqlstate, '') || ' ' || e.message || coalesce(' / ' || e.detail, '')
                 FROM kafka_sink.errors e JOIN kafka_sink.pipeline_definitions d ON d.id = e.pipeline_id
                WHERE d.name = '$p' ORDER BY e.id DESC LIMIT 8" || true
    done
    echo "---- PostgreSQL log since the start of the test: warnings, errors, kafka_sink (last 60)"
    pg_log_since_start | grep -E 'WARNING|ERROR|FATAL|PANIC|kafka_sink|terminated by signal|server process' \
        | grep -v 'librdkafka: .*Connect to' | tail -n 60
    echo "---- (full log: $PGLOG_FILE)"
}

chaos_summary() {
    echo
    log "time: $((SECONDS - CHAOS_T0))s"
    [ ${#chaos_failed_names[@]} -eq 0 ] || log "failed: ${chaos_failed_names[*]}"
    echo "$CHAOS_NAME: $chaos_passed passed, $chaos_failed failed"
}

rand_between() {  # rand_between MIN_MS MAX_MS -> seconds with 3 decimals
    local ms=$(( $1 + RANDOM % ($2 - $1 + 1) ))
    printf '%d.%03d' $((ms / 1000)) $((ms % 1000))
}
