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
