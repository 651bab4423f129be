#!/usr/bin/env bash
# test/run_tests.sh — the one test command (CI runs it through .ci/run).
#
#   test/run_tests.sh [regress] [tap] [e2e] [chaos] [fuzz]   (default: all)
#   KS_TESTS="tap" test/run_tests.sh              (same, by env var)
#   KS_TAP_FILES="test/pgtap/01_produce.sql" test/run_tests.sh tap
#   KS_SCRIPTS="kafka_semantics" test/run_tests.sh e2e   (only these scripts)
#
# Installs the OS packages, builds and installs the extension, fetches and
# starts an Apache Kafka broker and a throwaway PostgreSQL cluster
# (test/harness.sh; PostgreSQL 15 unless told otherwise), then runs the suites:
#   regress  test/tools/check_sql_scripts.sh (the rule of src/sql/README.md),
#            test/tools/check_layers.py (the stages of src/README.md, on the
#            built objects), test/tools/check_doc_links.py (every relative
#            link in the docs resolves, every test file is in test/README.md),
#            then make installcheck (pg_regress: sql/ + expected/)
#   tap      pg_prove over test/pgtap/*.sql, one suite per file
#   e2e      every executable test/e2e/*.sh, one suite per script
#   chaos    every executable test/chaos/*.sh, one suite per script
#            (e2e and chaos scripts get the harness env exported; broker and
#            cluster are started again after each, as a script may stop or
#            kill them)
# The broker and the cluster are always stopped at the end, also on failure
# or Ctrl-C.  The last line is "N passed, N failed" counting suites.
#
# Every suite's time is printed with its result and again in a table at
# the end.
#
# The PostgreSQL (15, 16, 17, 18; see test/tools/pg_binaries.sh):
#   PG_CONFIG=/path/to/pg_config   any PostgreSQL (default Debian's 15), or
#   KS_PG_MAJOR=17                 one that test/tools/pg_binaries.sh fetches
#   KS_PG_MATRIX="16 17 18"        after the suites above, for each of these
#                                  majors in turn (same broker, a new cluster):
#                                  build with -Werror, install, and run
#                                  KS_MATRIX_TESTS (default "regress tap e2e
#                                  chaos") limited to the scripts
#                                  KS_MATRIX_SCRIPTS (default "exactly_once
#                                  upgrade protobuf": protobuf for the
#                                  registry's fetch, prefetch and outage
#                                  path) and those of KS_MATRIX_SCRIPTS_16
#                                  ("history"), _17 ("softdel transform
#                                  write_modes"), _18 (all four), with CHAOS_* from
#                                  KS_MATRIX_CHAOS_ENV (a smaller exactly_once;
#                                  it still kills workers and the postmaster).
#                                  Their suites are named "pgNN: ...".
#   KS_RDKAFKA_MATRIX="2.12.1 2.15.1" then, for each of these librdkafka versions
#                                  (test/tools/librdkafka.sh), PostgreSQL 15
#                                  again with KS_RDKAFKA_TESTS (default
#                                  "regress tap e2e") and KS_RDKAFKA_SCRIPTS
#                                  (default "broker_security secret_refs"), with
#                                  kafka_sink.apply_strategy =
#                                  KS_RDKAFKA_APPLY_STRATEGY (default sql:
#                                  the MERGE for every target).
#   KS_RDKAFKA=2.12.1              build everything against that librdkafka.
#   KS_JOBS=2                      (.ci/run sets it) the two matrices above,
#                                  and the 15 scripts named in
#                                  KS_SIDE_SCRIPTS, run at the same time as
#                                  the other suites, in a side job: a copy of
#                                  the checkout in ${KS_RUN}-side/src with a
#                                  run dir, a broker and a private
#                                  PostgreSQL of its own.  Its output is
#                                  shown, and its suites counted, at the end.
# Env: KS_PRIVATE_PG=1 installs into a private copy of Debian's PostgreSQL
# under the repo (.pginst) instead of into it (several clones can test at
# once; the trees of pg_binaries.sh are private to the checkout already),
# KS_RUN (default <repo>/.run), KS_KEEP_RUN=1 keeps the run dir's data
# from a previous run (default: start from an empty broker and cluster),
# KS_KEEP_RUNNING=1 leaves broker and cluster up after the run,
# KS_SUITE_TIMEOUT seconds per suite (default 900).
set -uo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO" || exit 2
export KS_RUN="${KS_RUN:-$REPO/.run}"
H="$REPO/test/harness.sh"
# the PostgreSQL to build and test against: PG_CONFIG=/path/to/pg_config
# (default Debian's 15) or KS_PG_MAJOR; test/harness.sh runs
# initdb/postgres from its bindir
PG_BINARIES="$REPO/test/tools/pg_binaries.sh"
if [ -n "${KS_PG_MAJOR:-}" ]; then
    PG_CONFIG="$(bash "$PG_BINARIES" "$KS_PG_MAJOR")" || { echo "no PostgreSQL $KS_PG_MAJOR" >&2; exit 2; }
fi
export PG_CONFIG="${PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}"
read -r -a matrix <<< "${KS_PG_MATRIX:-}"
read -r -a matrix_parts <<< "${KS_MATRIX_TESTS:-regress tap e2e chaos}"
MATRIX_SCRIPTS="${KS_MATRIX_SCRIPTS:-exactly_once upgrade protobuf}"
# and, per major, KS_MATRIX_SCRIPTS_<major>: the mode scripts split so that
# each runs on 18 and on one of 16 and 17 (test/README.md, "Tested on")
matrix_scripts() {
    local extra=
    case "$1" in
        16) extra="${KS_MATRIX_SCRIPTS_16-history}" ;;
        17) extra="${KS_MATRIX_SCRIPTS_17-softdel transform write_modes}" ;;
        18) extra="${KS_MATRIX_SCRIPTS_18-softdel transform write_modes history}" ;;
    esac
    echo "$MATRIX_SCRIPTS${extra:+ $extra}"
}
MATRIX_CHAOS_ENV="${KS_MATRIX_CHAOS_ENV:-CHAOS_MESSAGES=30000 CHAOS_KEYS=3000 CHAOS_CHUNKS=12 CHAOS_KILLS=10 CHAOS_EXTRA_KILLS=4}"
SUITE_TIMEOUT="${KS_SUITE_TIMEOUT:-900}"

parts=("$@")
[ ${#parts[@]} -gt 0 ] || read -r -a parts <<< "${KS_TESTS:-regress tap e2e chaos fuzz}"
for p in "${parts[@]}" "${matrix_parts[@]}"; do
    case "$p" in regress|tap|e2e|chaos|fuzz) ;; *) echo "unknown part '$p' (regress, tap, e2e, chaos, fuzz)" >&2; exit 2 ;; esac
done
for m in "${matrix[@]}"; do
    case "$m" in 15|16|17|18) ;; *) echo "unknown PostgreSQL major '$m' in KS_PG_MATRIX (15, 16, 17, 18)" >&2; exit 2 ;; esac
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

# suite names get the prefix of the PostgreSQL they run on ("pg17: tap: ...")
# outside the first one; every result carries the suite's time, which
# begin() started
prefix=
suite_t0=$SECONDS
timings=()
say() { printf '\n=== %s\n' "$*"; }
begin() { suite_t0=$SECONDS; say "$prefix$*"; }
took() { local d=$((SECONDS - suite_t0)); timings+=("$(printf '%5ds  %s %s' "$d" "$1" "$2")"); echo "--- $1: $2 (${d}s)"; }
pass() { passed=$((passed + 1)); took PASS "$prefix$1"; }
fail() { failed=$((failed + 1)); failed_names+=("$prefix$1"); took FAIL "$prefix$1"; }

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
    if [ -n "${side_pid:-}" ]; then
        # a run that stopped early takes the side job down with it (its own
        # trap stops its broker and cluster)
        if [ $rc -ne 0 ] || [ "${interrupted:-0}" = 1 ]; then
            kill -TERM "$side_pid" 2>/dev/null || true
        fi
        say "side job (waiting for it; log $SIDE_DIR/log)"
        wait "$side_pid" 2>/dev/null || true
        sed 's/^/[side] /' "$SIDE_DIR/log" 2>/dev/null || true
        local line sp sf
        line="$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$SIDE_DIR/log" 2>/dev/null | tail -n 1)"
        if [ -n "$line" ]; then
            sp="${line%% passed*}"; sf="${line#*passed, }"; sf="${sf%% failed}"
            passed=$((passed + sp))
            failed=$((failed + sf))
            if [ "$sf" -gt 0 ]; then
                failed_names+=("side job: $(sed -n 's/^failed: //p' "$SIDE_DIR/log" | tail -n 1)")
            fi
        else
            failed=$((failed + 1))
            failed_names+=("side job (no result line: $SIDE_DIR/log)")
        fi
        timings+=("$(printf '%5ds  side job, all of it (its own times above)' \
            "$(sed -n 's/^time: \([0-9]*\)s$/\1/p' "$SIDE_DIR/log" 2>/dev/null | tail -n 1)")")
    fi
    if [ ${#timings[@]} -gt 0 ]; then
        echo
        echo "times:"
        printf '  %s\n' "${timings[@]}"
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
trap 'trap "" PIPE; interrupted=1; failed_names+=("interrupted"); failed=$((failed + 1)); echo; echo "interrupted"; finish' INT TERM

# setup: any failure here aborts the run (counted as one failed suite)
setup_step() {
    local name="$1"; shift
    suite_t0=$SECONDS
    if ! "$@"; then
        fail "setup: $name"
        exit 1
    fi
    local d=$((SECONDS - suite_t0))
    timings+=("$(printf '%5ds  setup %s' "$d" "$prefix$name")")
}

# build_install [MAKE ARGS...]: builds against $PG_CONFIG and installs into
# it (or into a private copy, KS_PRIVATE_PG=1); exports KS_PGBIN.  Objects
# built against another PostgreSQL are cleaned first (.ks_build_pg records
# which one the objects are for).
build_install() {
    local stamp="$REPO/.ks_build_pg"
    if [ "$(cat "$stamp" 2>/dev/null)" != "$PG_CONFIG" ]; then
        make -s clean >/dev/null 2>&1 || true
    fi
    echo "$PG_CONFIG" > "$stamp"
    echo "PostgreSQL: $("$PG_CONFIG" --version) ($PG_CONFIG)"
    setup_step make make -j"$(nproc)" PG_CONFIG="$PG_CONFIG" "$@"
    local bindir
    bindir="$("$PG_CONFIG" --bindir)"
    if [ "${KS_PRIVATE_PG:-0}" = 1 ] && [[ "$bindir" != "$REPO"/* ]]; then
        # a copy of the tree; PostgreSQL finds its lib and share dirs relative
        # to its binaries, so the copy runs the kafka_sink installed into it
        PGP="${KS_PRIVATE_PG_DIR:-$REPO/.pginst}"
        local sysbin="$bindir" sysshare
        sysshare="$("$PG_CONFIG" --sharedir)"
        if [ ! -x "$PGP$sysbin/postgres" ]; then
            mkdir -p "$PGP$(dirname "$(dirname "$sysbin")")" "$PGP$(dirname "$sysshare")"
            cp -a "$(dirname "$sysbin")" "$PGP$(dirname "$(dirname "$sysbin")")/"
            cp -a "$sysshare" "$PGP$(dirname "$sysshare")/"
            # the headers too, so the copy can build extensions (upgrade test)
            local sysinc
            sysinc="$("$PG_CONFIG" --pkgincludedir)"
            if [ ! -d "$PGP$sysinc" ]; then
                mkdir -p "$PGP$sysinc" && cp -a "$sysinc/." "$PGP$sysinc/"
            fi
            chmod -R o+rX "$PGP"
        fi
        export KS_PGBIN="$PGP$sysbin"
        setup_step "make install" make install PG_CONFIG="$PG_CONFIG" DESTDIR="$PGP"
    else
        # Debian's tree (CI), or a tree of test/tools/pg_binaries.sh under
        # the repo, which is this checkout's own
        export KS_PGBIN="$bindir"
        setup_step "make install" make install PG_CONFIG="$PG_CONFIG"
    fi
    # psql, pg_prove's psql and the scripts' client tools of the same version
    export PATH="$KS_PGBIN:${PATH_BASE:=$PATH}"
}

# the cluster's env (PGPORT, KS_PGBIN, ...) for the suites
load_env() {
    set -a
    # shellcheck disable=SC1091
    . "$KS_RUN/env"
    set +a
}

begin "deps"
setup_step deps "$H" deps

# the side job (KS_JOBS=2): started once the OS packages are in, so the two
# jobs never run apt at the same time; this job then runs neither matrix
# nor the side's scripts
read -r -a rdk_matrix <<< "${KS_RDKAFKA_MATRIX:-}"
side_pid=
SIDE_DIR="${KS_RUN%/}-side"
if [ "${KS_JOBS:-1}" -gt 1 ] && [ -z "${KS_SIDE:-}" ] &&
   { [ ${#matrix[@]} -gt 0 ] || [ ${#rdk_matrix[@]} -gt 0 ] || [ -n "${KS_SIDE_SCRIPTS:-}" ]; }; then
    begin "side job ($SIDE_DIR)"
    if [ -d "$SIDE_DIR/run" ]; then
        KS_RUN="$SIDE_DIR/run" bash "$SIDE_DIR/src/test/harness.sh" stop-all >/dev/null 2>&1 || true
    fi
    rm -rf "$SIDE_DIR" && mkdir -p "$SIDE_DIR/src"
    # the working tree as it is (uncommitted changes too), without build
    # output and run dirs
    tar -C "$REPO" --exclude=./.run --exclude='./.run-*' --exclude=./.pginst \
        --exclude=./.pg --exclude=./.ks_build_pg --exclude='*.o' --exclude='*.so' \
        --exclude="./$(realpath --relative-to="$REPO" "$SIDE_DIR" 2>/dev/null || echo .none)" \
        -cf - . | tar -C "$SIDE_DIR/src" -xf -
    chmod -R o+rX "$SIDE_DIR"
    # what the checkout finds beside itself (../shared/vendor: Citus) the
    # copy finds through KS_VENDOR
    ( cd "$SIDE_DIR/src" && exec env KS_SIDE=1 KS_RUN="$SIDE_DIR/run" KS_PRIVATE_PG=1 \
        KS_VENDOR="${KS_VENDOR:-$(realpath -m "$REPO/../shared/vendor")}" \
        KS_TESTS= bash test/run_tests.sh e2e chaos ) > "$SIDE_DIR/log" 2>&1 &
    side_pid=$!
    echo "side job: pid $side_pid, log $SIDE_DIR/log:" \
        "${KS_PG_MATRIX:+PostgreSQL $KS_PG_MATRIX; }${KS_RDKAFKA_MATRIX:+librdkafka $KS_RDKAFKA_MATRIX; }${KS_SIDE_SCRIPTS:+scripts $KS_SIDE_SCRIPTS}"
    matrix=()
    rdk_matrix=()
fi

# KS_RDKAFKA=2.12.1: build against that librdkafka instead of the system's
# (test/tools/librdkafka.sh builds it once into a cached prefix; the
# Makefile takes it from PKG_CONFIG_PATH and links it with an rpath)
if [ -n "${KS_RDKAFKA:-}" ]; then
    begin "librdkafka $KS_RDKAFKA"
    setup_step "librdkafka $KS_RDKAFKA" bash test/tools/librdkafka.sh "$KS_RDKAFKA"
    rdk_prefix="$(bash test/tools/librdkafka.sh "$KS_RDKAFKA")"
    export PKG_CONFIG_PATH="$rdk_prefix/lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
    echo "PKG_CONFIG_PATH=$PKG_CONFIG_PATH"
fi
if [ ${#matrix[@]} -gt 0 ]; then
    # fetched before anything starts, so a network failure shows at once
    for m in "${matrix[@]}"; do
        setup_step "pg_binaries $m" bash "$PG_BINARIES" "$m" >/dev/null
    done
fi

begin "build and install"
build_install ${CI:+COPT=-Werror}

begin "broker and cluster ($KS_RUN)"
setup_step kafka-fetch "$H" kafka-fetch
if [ "${KS_KEEP_RUN:-0}" != 1 ] && [ -e "$KS_RUN/.ks_run" ]; then
    "$H" clean >/dev/null
fi
started=1
setup_step kafka-start "$H" kafka-start
setup_step pg-start "$H" pg-start
load_env
echo "KS_BOOTSTRAP=$KS_BOOTSTRAP PGHOST=$PGHOST PGPORT=$PGPORT PGUSER=$PGUSER PGDATABASE=$PGDATABASE"

# selected NAME: whether script NAME runs here: in KS_SCRIPTS (when set),
# and outside the matrices, in the side job's share or not, as this job is
in_matrix=0
selected() {
    if [ $in_matrix = 0 ] && [ -n "${KS_SIDE:-}${side_pid:-}" ]; then
        local mine=0
        [[ " ${KS_SIDE_SCRIPTS:-} " == *" $1 "* ]] && mine=1
        [ -n "${KS_SIDE:-}" ] || mine=$((1 - mine))
        [ $mine = 1 ] || return 1
    fi
    [ -z "${KS_SCRIPTS:-}" ] || [[ " $KS_SCRIPTS " == *" $1 "* ]]
}

# run_scripts PART: every executable test/PART/*.sh, one suite each, with the
# harness env exported; the broker and the cluster are started again after
# each (a script may stop or kill them).  KS_SCRIPTS="kafka_semantics
# outbox": only these (by base name).
run_scripts() {
    local part="$1" f
    for f in test/"$part"/*.sh; do
        [ -f "$f" ] && [ -x "$f" ] || continue
        selected "$(basename "$f" .sh)" || continue
        begin "$part: $f"
        if run_limited "$f"; then
            pass "$part: $f"
        else
            fail "$part: $f"
        fi
        "$H" kafka-start >/dev/null || true
        "$H" pg-start >/dev/null || true
    done
}

# run_parts PART...: the suites, against the cluster that is up
run_parts() {
    local -a ps=("$@")
    has() { local p; for p in "${ps[@]}"; do [ "$p" = "$1" ] && return 0; done; return 1; }

    if has regress; then
        # the SQL is written once (src/sql/README.md): no definitions in the
        # hand-written update files, CREATE OR REPLACE in the parts
        begin "regress: sql scripts"
        if run_limited bash test/tools/check_sql_scripts.sh; then
            pass "sql scripts"
        else
            fail "sql scripts"
        fi
        # the stages of src/ (src/README.md): no module calls up
        begin "regress: layers"
        if run_limited python3 test/tools/check_layers.py; then
            pass "layers"
        else
            fail "layers"
        fi
        # every relative link and anchor in the docs resolves, every design
        # note is in the index and every test file in test/README.md
        begin "regress: doc links"
        if run_limited python3 test/tools/check_doc_links.py; then
            pass "doc links"
        else
            fail "doc links"
        fi
        begin "regress: make installcheck"
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

    if has tap; then
        local -a tap_files
        if [ -n "${KS_TAP_FILES:-}" ]; then
            read -r -a tap_files <<< "$KS_TAP_FILES"
        else
            tap_files=(test/pgtap/*.sql)
        fi
        local f
        for f in "${tap_files[@]}"; do
            [ -f "$f" ] || continue
            begin "tap: $f"
            if run_limited pg_prove --verbose --failures -d "$PGDATABASE" "$f"; then
                pass "tap: $f"
            else
                fail "tap: $f"
            fi
        done
    fi

    has e2e && run_scripts e2e
    has chaos && run_scripts chaos

    # the decoder's fuzz target, for a bounded time (make fuzz runs it longer)
    if has fuzz; then
        begin "fuzz: test/fuzz/run.sh (${FUZZ_SECONDS:-30} s)"
        if FUZZ_SECONDS="${FUZZ_SECONDS:-30}" run_limited bash test/fuzz/run.sh; then
            pass "fuzz: test/fuzz/run.sh"
        else
            fail "fuzz: test/fuzz/run.sh"
        fi
    fi
    return 0
}

# the side job runs the 15 parts only for its scripts (none: no parts)
if [ -z "${KS_SIDE:-}" ] || [ -n "${KS_SIDE_SCRIPTS:-}" ]; then
    run_parts "${parts[@]}"
fi
in_matrix=1

# the other PostgreSQL majors: same broker, a new cluster each
user_scripts="${KS_SCRIPTS:-}"
for m in "${matrix[@]}"; do
    prefix="pg$m: "
    begin "PostgreSQL $m"
    PG_CONFIG="$(bash "$PG_BINARIES" "$m")"
    export PG_CONFIG
    setup_step pg-wipe "$H" pg-wipe
    # (a setup failure here ends the run, counted as one failed suite)
    build_install COPT=-Werror
    setup_step pg-start "$H" pg-start
    load_env
    # the matrix subset: its scripts only, a smaller exactly_once
    KS_SCRIPTS="${user_scripts:-$(matrix_scripts "$m")}"
    export KS_SCRIPTS
    # shellcheck disable=SC2086  # the knobs are words
    export $MATRIX_CHAOS_ENV
    run_parts "${matrix_parts[@]}"
done

# another librdkafka: PostgreSQL 15 (a private copy of its tree, so the
# system's keeps the module linked to Debian's librdkafka), the broker
# security suite and the SQL-level suites against it
for v in "${rdk_matrix[@]}"; do
    prefix="librdkafka $v: "
    begin "librdkafka $v"
    setup_step "build librdkafka $v" bash test/tools/librdkafka.sh "$v"
    rdk_prefix="$(bash test/tools/librdkafka.sh "$v")"
    export PKG_CONFIG_PATH="$rdk_prefix/lib/pkgconfig${PKG_CONFIG_PATH_BASE:+:$PKG_CONFIG_PATH_BASE}"
    export PG_CONFIG=/usr/lib/postgresql/15/bin/pg_config KS_PRIVATE_PG=1
    export KS_RDKAFKA="$v"
    setup_step pg-wipe "$H" pg-wipe
    build_install COPT=-Werror
    setup_step pg-start "$H" pg-start
    load_env
    export KS_SCRIPTS="${KS_RDKAFKA_SCRIPTS:-broker_security secret_refs}"
    # this pass also keeps the MERGE covered on its own: every merge-mode
    # target through the SQL strategy (the default, auto, writes plain
    # tables through the heap strategy everywhere else)
    export KS_APPLY_STRATEGY="${KS_RDKAFKA_APPLY_STRATEGY-sql}"
    read -r -a rdk_parts <<< "${KS_RDKAFKA_TESTS:-regress tap e2e}"
    run_parts "${rdk_parts[@]}"
done

[ $((passed + failed)) -gt 0 ] || echo "no suite ran"
exit 0
