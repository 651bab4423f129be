#!/usr/bin/env bash
# test/fuzz/run.sh — build the libFuzzer targets (fuzz_jsonwalk for
# src/infra/jsonwalk.c, fuzz_avro for src/decode/avro_binary.c against libavro,
# fuzz_protobuf for src/decode/protobuf*.c, and protobuf_diff: the same
# decoder against the official protobuf library) and run each for a
# bounded time (make fuzz; test/run_tests.sh may call it too).
# FUZZ_TARGETS="fuzz_avro" runs only that one.
#
#   FUZZ_SECONDS=60 bash test/fuzz/run.sh
#
# Builds test/fuzz/fuzz_jsonwalk.c + src/infra/jsonwalk.c and jsontree.c with clang
# (-fsanitize=fuzzer,address,undefined, -DFRONTEND) against PostgreSQL's
# frontend libpgcommon/libpgport, then fuzzes a fresh copy of
# test/fuzz/corpus for FUZZ_SECONDS (inputs up to 64 KiB).  Exits non-zero
# on any crash, sanitizer report, leak, timeout or build failure; the last
# line is "fuzz_jsonwalk: N passed, N failed".  Installs clang and
# libclang-rt-14-dev with apt-get when missing and running as root.
#
# Env: FUZZ_SECONDS (default 60), PG_CONFIG, CC (default clang-14 or clang),
# FUZZ_WORKDIR for the binary, log and crash artifacts (default
# $KS_RUN/fuzz when the harness has made $KS_RUN, else <repo>/.run-fuzz,
# both git-ignored), FUZZ_VERBOSE=1 streams libFuzzer's output,
# overlapping paths ("a" with "a.b") are compared too, unless KS_FUZZ_STRICT=0;
# see fuzz_jsonwalk.c.  A crash is saved as <work dir>/artifacts/crash-*;
# replay it with "<work dir>/fuzz_jsonwalk <file>"; add it to
# test/fuzz/corpus once fixed so every run replays it.
set -uo pipefail

NAME=fuzz
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
SECONDS_TO_RUN="${FUZZ_SECONDS:-60}"
# Inside the harness's run dir only once the harness owns it: test/harness.sh
# marks a run dir as its own (.ks_run) only when it finds it empty.
if [ -n "${FUZZ_WORKDIR:-}" ]; then
    WORK="$FUZZ_WORKDIR"
elif [ -n "${KS_RUN:-}" ] && [ -e "$KS_RUN/.ks_run" ]; then
    WORK="$KS_RUN/fuzz"
else
    WORK="$REPO/.run-fuzz"
fi

summary() { echo "$NAME: $1 passed, $2 failed"; }
fail() { echo "$NAME: $*" >&2; summary 0 1; exit 1; }

case "$SECONDS_TO_RUN" in ''|*[!0-9]*) fail "FUZZ_SECONDS must be a whole number of seconds" ;; esac

# ---- toolchain ----

PG_CONFIG="${PG_CONFIG:-$(command -v pg_config || echo /usr/lib/postgresql/15/bin/pg_config)}"
[ -x "$PG_CONFIG" ] || fail "pg_config not found (set PG_CONFIG)"
PG_INC="$("$PG_CONFIG" --includedir-server)"
LIBDIR=
for d in "$("$PG_CONFIG" --pkglibdir)" "$("$PG_CONFIG" --libdir)"; do
    if [ -f "$d/libpgcommon.a" ] && [ -f "$d/libpgport.a" ]; then LIBDIR="$d"; break; fi
done
[ -n "$LIBDIR" ] || fail "libpgcommon.a/libpgport.a not found under $("$PG_CONFIG" --pkglibdir) or $("$PG_CONFIG" --libdir) (install postgresql-server-dev-NN)"

mkdir -p "$WORK" || fail "cannot create $WORK"

pick_cc() {
    local c
    for c in ${CC:-} clang-14 clang; do
        command -v "$c" >/dev/null 2>&1 || continue
        printf 'int LLVMFuzzerTestOneInput(const unsigned char *d, unsigned long n) { (void) d; (void) n; return 0; }\n' > "$WORK/probe.c"
        if "$c" -fsanitize=fuzzer,address,undefined "$WORK/probe.c" -o "$WORK/probe" >/dev/null 2>&1; then
            rm -f "$WORK/probe" "$WORK/probe.c"
            echo "$c"
            return 0
        fi
    done
    rm -f "$WORK/probe" "$WORK/probe.c"
    return 1
}

if ! CC_BIN="$(pick_cc)"; then
    [ "$(id -u)" = 0 ] || fail "no clang with libFuzzer; run as root to install it, or: apt-get install clang libclang-rt-14-dev"
    echo "$NAME: installing clang and libclang-rt-14-dev"
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y -qq clang libclang-rt-14-dev >/dev/null 2>&1 ||
        { apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq clang libclang-rt-14-dev >/dev/null 2>&1; } ||
        fail "apt-get install clang libclang-rt-14-dev failed"
    CC_BIN="$(pick_cc)" || fail "clang still cannot link -fsanitize=fuzzer"
fi

# Before PostgreSQL 16 the frontend libpgcommon has no json_errdetail();
# the target then brings its own.
DEFS=()
nm -g --defined-only "$LIBDIR/libpgcommon.a" 2>/dev/null | grep -qw json_errdetail ||
    DEFS+=(-DKS_FUZZ_NEED_JSON_ERRDETAIL)

# protobuf_diff: src/decode/protobuf*.c (built with ASan and UBSan into
# test/fuzz/pb_json.c) against the official protobuf library on random
# schemas and messages (test/fuzz/protobuf_diff.py), in a venv of its own
# under the work dir (protobuf and grpcio-tools from PyPI).
# PROTOBUF_DIFF_ROUNDS (default 40) schemas of 30 messages each.
run_protobuf_diff() {
NAME=protobuf_diff
local venv="$WORK/venv-protobuf" bin="$WORK/pb_json"
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c 'import google.protobuf, grpc_tools' 2>/dev/null; then
    python3 -m venv "$venv" && "$venv/bin/pip" install -q --disable-pip-version-check protobuf grpcio-tools >/dev/null ||
        { echo "$NAME: pip install protobuf grpcio-tools failed" >&2; summary 0 1; return 1; }
fi
"$CC_BIN" -g -O1 -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=all \
    -DFRONTEND -D_GNU_SOURCE -Wall -Wextra -isystem "$PG_INC" -I"$REPO/src" -I"$REPO/src/infra" -I"$REPO/src/decode" \
    "$HERE/pb_json.c" "$REPO/src/decode/protobuf.c" "$REPO/src/decode/protobuf_parse.c" \
    "$LIBDIR/libpgcommon.a" "$LIBDIR/libpgport.a" -o "$bin" > "$WORK/build.log" 2>&1 ||
    { cat "$WORK/build.log" >&2; echo "$NAME: build failed" >&2; summary 0 1; return 1; }
"$venv/bin/python" "$HERE/protobuf_diff.py" "$bin" "${PROTOBUF_DIFF_ROUNDS:-40}" 2>&1 | grep -v 'warning: Import .* is unused'
return "${PIPESTATUS[0]}"
}

run_target() {
NAME="$1"
[ "$NAME" = protobuf_diff ] && { run_protobuf_diff; return; }
# ---- build ----

case "$NAME" in
    fuzz_jsonwalk) SRCS=("$HERE/fuzz_jsonwalk.c" "$REPO/src/infra/jsonwalk.c" "$REPO/src/infra/jsontree.c"); XLIBS=(); SEEDS="$HERE/corpus"
                   DICT=(-dict="$HERE/json.dict") ;;
    fuzz_protobuf) SRCS=("$HERE/fuzz_protobuf.c" "$REPO/src/decode/protobuf.c" "$REPO/src/decode/protobuf_parse.c")
                   XLIBS=(); SEEDS="$HERE/corpus_protobuf"; DICT=(-dict="$HERE/protobuf.dict") ;;
    fuzz_avro)     SRCS=("$HERE/fuzz_avro.c" "$REPO/src/decode/avro_binary.c" "$REPO/src/infra/jsontree.c" "$REPO/src/infra/jsonwalk.c")
                   XLIBS=($(pkg-config --libs avro-c 2>/dev/null || echo -lavro)); SEEDS="$HERE/corpus_avro"; DICT=() ;;
    *) fail "unknown target $NAME" ;;
esac
BIN="$WORK/$NAME"
BUILD=("$CC_BIN" -g -O1 -fno-omit-frame-pointer
       -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all
       -DFRONTEND -D_GNU_SOURCE "${DEFS[@]}" -Wall -Wextra
       -isystem "$PG_INC" -I"$REPO/src" -I"$REPO/src/infra" -I"$REPO/src/decode"
       "${SRCS[@]}"
       "$LIBDIR/libpgcommon.a" "$LIBDIR/libpgport.a" "${XLIBS[@]}"
       -o "$BIN")
echo "$NAME: ${BUILD[*]}"
"${BUILD[@]}" > "$WORK/build.log" 2>&1 || { cat "$WORK/build.log" >&2; fail "build failed"; }
if [ -s "$WORK/build.log" ]; then cat "$WORK/build.log"; fi

# ---- run ----

CORPUS="$(mktemp -d "$WORK/corpus.XXXXXX")" || fail "mktemp failed"
cp "$SEEDS"/* "$CORPUS"/ || fail "cannot copy the seed corpus"
rm -rf "$WORK/artifacts"
mkdir -p "$WORK/artifacts"
LOG="$WORK/$NAME.log"

child=
tailer=
cleanup() {
    local p
    for p in $child $tailer; do kill -TERM "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
}
trap 'cleanup; fail "interrupted"' INT TERM

echo "$NAME: fuzzing for ${SECONDS_TO_RUN}s (log: $LOG)"
ARGS=(-max_total_time="$SECONDS_TO_RUN" -max_len=65536 -timeout=10 -rss_limit_mb=2048
      "${DICT[@]}" -artifact_prefix="$WORK/artifacts/" -print_final_stats=1
      "$CORPUS")
# -max_total_time is checked between inputs; timeout(1) is the backstop
timeout -k 10 "$((SECONDS_TO_RUN + 300))" "$BIN" "${ARGS[@]}" > "$LOG" 2>&1 &
child=$!
if [ "${FUZZ_VERBOSE:-0}" = 1 ]; then
    tail -n +1 -f --pid="$child" "$LOG" &
    tailer=$!
fi
wait "$child"
rc=$?
if [ -n "$tailer" ]; then wait "$tailer"; fi
child=
tailer=
trap - INT TERM

crashes=$(find "$WORK/artifacts" -type f | wc -l)
if [ "$rc" -ne 0 ] || [ "$crashes" -ne 0 ] || grep -qE 'ERROR: (AddressSanitizer|LeakSanitizer|UndefinedBehaviorSanitizer|libFuzzer)|runtime error:' "$LOG"; then
    [ "${FUZZ_VERBOSE:-0}" = 1 ] || tail -n 60 "$LOG"
    echo "$NAME: FAILED (exit $rc); corpus kept in $CORPUS"
    for a in "$WORK"/artifacts/*; do
        [ -f "$a" ] && echo "$NAME: reproduce with: $BIN $a"
    done
    summary 0 1
    return 1
fi

# the last status line: "#N DONE cov: C ft: F corp: K/S exec/s: E rss: R"
done_line=$(grep -E '^#[0-9]+[[:space:]]+DONE' "$LOG" | tail -n 1)
echo "$NAME: ${done_line:-finished}"
grep -E '^stat::(number_of_executed_units|average_exec_per_sec|peak_rss_mb)' "$LOG" | sed "s/^/$NAME: /"
rm -rf "$CORPUS"
summary 1 0
return 0
}

overall=0
for t in ${FUZZ_TARGETS:-fuzz_jsonwalk fuzz_avro fuzz_protobuf protobuf_diff}; do
    run_target "$t" || overall=1
done
exit $overall
