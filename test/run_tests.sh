#!/usr/bin/env bash
# test/run_tests.sh — the one test command (CI runs it through .ci/run).
#
#   test/run_tests.sh [regress] [tap] [e2e] [chaos] [fuzz]   (default: all)
#   KS_TESTS="tap" test/run_tests.sh              (same, by env var)
#   KS_TAP_FILES="test/t/01_produce.sql" test/run_tests.sh tap
#   KS_SCRIPTS="kafka_semantics" test/run_tests.sh e2e   (only these scripts)
#
# Installs the OS packages, builds and installs the extension, fetches and
# starts an Apache Kafka broker and a throwaway PostgreSQL 15 cluster
# (test/harness.sh), then runs the suites:
#   regress  make installcheck (pg_regress: sql/ + expected/)
#   tap      pg_prove over test/t/*.sql, one suite per file
#   e2e      every executable test/e2e/*.sh, one suite per script
#   chaos    every executable test/chaos/*.sh, one suite per script
#            (e2e and chaos scripts get the harness env exported; broker and
#            cluster are started again after each, as a script may stop or
#            kill them)
# The broker and the cluster are always stopped at the end, also on failure
# or Ctrl-C.  The last line is "N passed, N failed" counting suites.
#
# Env: PG_CONFIG (default /usr/lib/postgresql/15/bin/pg_config),
# KS_PRIVATE_PG=1 installs into a private copy of that PostgreSQL under the
# repo (.pginst) instead of into it (several clones can test at once),
# KS_RUN (default <repo>/.run), KS_KEEP_RUN=1 keeps the run dir's data
# from a previous run (default: start from an empty broker and cluster),
# KS_KEEP_RUNNING=1 leaves broker and cluster up after the run,
# KS_SUITE_TIMEOUT seconds per suite (default 900),
# KS_RDKAFKA=2.12.1 builds against that librdkafka (test/tools/librdkafka.sh)
# instead of the system's.
set -uo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO" || exit 2
export KS_RUN="${KS_RUN:-$REPO/.run}"
H="$REPO/test/harness.sh"
# the PostgreSQL to build and test against: PG_CONFIG=/path/to/pg_config
# (default Debian's 15); test/harness.sh runs initdb/postgres from its bindir
export PG_CONFIG="${PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}"
SUITE_TIMEOUT="${KS_SUITE_TIMEOUT:-900}"

parts=("$@")
[ ${#parts[@]} -gt 0 ] || read -r -a parts <<< "${KS_TESTS:-regress tap e2e chaos fuzz}"
want() { local p; for p in "${parts[@]}"; do [ "$p" = "$1" ] && return 0; done; return 1; }
for p in "${parts[@]}"; do
    case "$p" in regress|tap|e2e|chaos|fuzz) ;; *) echo "unknown part '$p' (regress, tap, e2e, chaos, fuzz)" >&2; exit 2 ;; esac
done

passed=0
failed=0
failed_names=()
started=0
finished=0
T0=$SECONDS

child=

# run_limited CMD...: the suite under a time limit, in the background so a
# Ctrl-C runs the trap at once (bash defers traps while a foreground child
# runs, and timeout's own process group does not get the terminal's SIGINT)
run_limited() {
    timeout -k 10 "$SUITE_TIMEOUT" "$@" &
    child=$!
    local rc=0
    wait "$child" || rc=$?
    child=
    return $rc
}

say() { printf '\n=== %s\n' "$*"; }
pass() { passed=$((passed + 1)); echo "--- PASS: $1"; }
fail() { failed=$((failed + 1)); failed_names+=("$1"); echo "--- FAIL: $1"; }

# shellcheck disable=SC2317  # reached through the traps
finish() {
    local rc=$?
    [ $finished = 1 ] && return
    finished=1
    trap - EXIT INT TERM
    # a Ctrl-C also kills a `| tee` reading our output: never die of SIGPIPE
    # before the broker and the cluster are stopped
    trap '' PIPE
    if [ -n "$child" ]; then
        kill -TERM "$child" 2>/dev/null || true
        wait "$child" 2>/dev/null || true
    fi
    if [ $failed -gt 0 ] || [ $rc -ne 0 ]; then
        [ $failed -gt 0 ] || { failed=$((failed + 1)); failed_names+=("run aborted"); }
        # the tails before stopping, so they show the failure, not the shutdown
        local logs="$KS_RUN/logs"
        if [ -d "$logs" ]; then
            say "$logs/kafka.log: last warnings and errors"
            grep -E '\] (WARN|ERROR|FATAL) ' "$logs/kafka.log" 2>/dev/null | tail -n 25 || true
            say "$logs/postgresql.log: last 60 lines"
            tail -n 60 "$logs/postgresql.log" 2>/dev/null || true
        fi
    fi
    if [ $started = 1 ] && [ "${KS_KEEP_RUNNING:-0}" != 1 ]; then
        say "stopping broker and cluster"
        "$H" stop-all || true
    fi
    if [ ${#failed_names[@]} -gt 0 ]; then
        echo
        echo "full logs: $KS_RUN/logs (kafka.log, postgresql.log)"
        echo "failed: ${failed_names[*]}"
    fi
    echo "time: $((SECONDS - T0))s"
    echo "$passed passed, $failed failed"
    [ $failed -eq 0 ] && exit 0 || exit 1
}
trap finish EXIT
trap 'trap "" PIPE; failed_names+=("interrupted"); failed=$((failed + 1)); echo; echo "interrupted"; finish' INT TERM

# setup: any failure here aborts the run (counted as one failed suite)
setup_step() {
    local name="$1"; shift
    if ! "$@"; then
        fail "setup: $name"
        exit 1
    fi
}

say "deps"
setup_step deps "$H" deps

# KS_RDKAFKA=2.12.1: build against that librdkafka instead of the system's
# (test/tools/librdkafka.sh builds it once into a cached prefix; the
# Makefile takes it from PKG_CONFIG_PATH and links it with an rpath)
if [ -n "${KS_RDKAFKA:-}" ]; then
    say "librdkafka $KS_RDKAFKA"
    rdk_prefix="$(bash test/tools/librdkafka.sh "$KS_RDKAFKA")" || { fail "setup: librdkafka $KS_RDKAFKA"; exit 1; }
    export PKG_CONFIG_PATH="$rdk_prefix/lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
    echo "PKG_CONFIG_PATH=$PKG_CONFIG_PATH"
fi

say "build and install"
setup_step make make -j"$(nproc)" PG_CONFIG="$PG_CONFIG" ${CI:+COPT=-Werror}
if [ "${KS_PRIVATE_PG:-0}" = 1 ]; then
    # a copy of the tree; PostgreSQL finds its lib and share dirs relative
    # to its binaries, so the copy runs the kafka_sink installed into it
    PGP="${KS_PRIVATE_PG_DIR:-$REPO/.pginst}"
    sysbin="$("$PG_CONFIG" --bindir)"; sysshare="$("$PG_CONFIG" --sharedir)"
    if [ ! -x "$PGP$sysbin/postgres" ]; then
        mkdir -p "$PGP$(dirname "$(dirname "$sysbin")")" "$PGP$(dirname "$sysshare")"
        cp -a "$(dirname "$sysbin")" "$PGP$(dirname "$(dirname "$sysbin")")/"
        cp -a "$sysshare" "$PGP$(dirname "$sysshare")/"
        chmod -R o+rX "$PGP"
    fi
    export KS_PGBIN="$PGP$sysbin"
    setup_step "make install" make install PG_CONFIG="$PG_CONFIG" DESTDIR="$PGP"
else
    export KS_PGBIN="$("$PG_CONFIG" --bindir)"
    setup_step "make install" make install PG_CONFIG="$PG_CONFIG"
fi

say "broker and cluster ($KS_RUN)"
setup_step kafka-fetch "$H" kafka-fetch
if [ "${KS_KEEP_RUN:-0}" != 1 ] && [ -e "$KS_RUN/.ks_run" ]; then
    "$H" clean >/dev/null
fi
started=1
setup_step kafka-start "$H" kafka-start
setup_step pg-start "$H" pg-start
set -a
# shellcheck disable=SC1091
. "$KS_RUN/env"
set +a
echo "KS_BOOTSTRAP=$KS_BOOTSTRAP PGHOST=$PGHOST PGPORT=$PGPORT PGUSER=$PGUSER PGDATABASE=$PGDATABASE"

if want regress; then
    say "regress: make installcheck"
    rm -f regression.diffs regression.out
    if run_limited make installcheck PG_CONFIG="$PG_CONFIG"; then
        pass regress
    else
        if [ -f regression.diffs ]; then
            say "regression.diffs"
            head -n 400 regression.diffs
        fi
        fail regress
    fi
fi

if want tap; then
    if [ -n "${KS_TAP_FILES:-}" ]; then
        read -r -a tap_files <<< "$KS_TAP_FILES"
    else
        tap_files=(test/t/*.sql)
    fi
    for f in "${tap_files[@]}"; do
        [ -f "$f" ] || continue
        say "tap: $f"
        if run_limited pg_prove --verbose --failures -d "$PGDATABASE" "$f"; then
            pass "tap: $f"
        else
            fail "tap: $f"
        fi
    done
fi

# run_scripts PART: every executable test/PART/*.sh, one suite each, with the
# harness env exported; the broker and the cluster are started again after
# each (a script may stop or kill them)
run_scripts() {
    local part="$1" f
    for f in test/"$part"/*.sh; do
        [ -f "$f" ] && [ -x "$f" ] || continue
        # KS_SCRIPTS="kafka_semantics outbox": only these (by base name)
        if [ -n "${KS_SCRIPTS:-}" ] && [[ " $KS_SCRIPTS " != *" $(basename "$f" .sh) "* ]]; then continue; fi
        say "$part: $f"
        if run_limited "$f"; then
            pass "$part: $f"
        else
            fail "$part: $f"
        fi
        "$H" kafka-start >/dev/null || true
        "$H" pg-start >/dev/null || true
    done
}

want e2e && run_scripts e2e
want chaos && run_scripts chaos

# the decoder's fuzz target, for a bounded time (make fuzz runs it longer)
if want fuzz; then
    say "fuzz: test/fuzz/run.sh (${FUZZ_SECONDS:-30} s)"
    if FUZZ_SECONDS="${FUZZ_SECONDS:-30}" run_limited bash test/fuzz/run.sh; then
        pass "fuzz: test/fuzz/run.sh"
    else
        fail "fuzz: test/fuzz/run.sh"
    fi
fi

[ $((passed + failed)) -gt 0 ] || echo "no suite ran"
exit 0
