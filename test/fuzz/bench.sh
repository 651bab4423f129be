#!/usr/bin/env bash
# test/fuzz/bench.sh — build and run the micro-benchmark of src/infra/jsonwalk.c
# (bench_jsonwalk.c): ns/message of the parser-only path (as before the
# fast path) and of ks_json_walk over order-event messages; the Avro decoder
# on the same event (bench_avro.c); the Debezium envelope's payload scan
# over test/fixtures/debezium (bench_debezium.c).
#
#   bash test/fuzz/bench.sh [messages]        (default 1000000)
#
# Frontend build like run.sh's fuzz target, but -O2 and no sanitizers.
# Env: PG_CONFIG, CC (default clang-14, clang or cc), FUZZ_WORKDIR for the
# binary (default <repo>/.run-fuzz, git-ignored).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
WORK="${FUZZ_WORKDIR:-$REPO/.run-fuzz}"
PG_CONFIG="${PG_CONFIG:-$(command -v pg_config || echo /usr/lib/postgresql/15/bin/pg_config)}"
PG_INC="$("$PG_CONFIG" --includedir-server)"
LIBDIR=
for d in "$("$PG_CONFIG" --pkglibdir)" "$("$PG_CONFIG" --libdir)"; do
    if [ -f "$d/libpgcommon.a" ] && [ -f "$d/libpgport.a" ]; then LIBDIR="$d"; break; fi
done
[ -n "$LIBDIR" ] || { echo "bench_jsonwalk: libpgcommon.a/libpgport.a not found" >&2; exit 1; }
CC_BIN="${CC:-}"
if [ -z "$CC_BIN" ]; then
    for c in clang-14 clang cc; do command -v "$c" >/dev/null 2>&1 && { CC_BIN="$c"; break; }; done
fi
DEFS=()
nm -g --defined-only "$LIBDIR/libpgcommon.a" 2>/dev/null | grep -qw json_errdetail ||
    DEFS+=(-DKS_FUZZ_NEED_JSON_ERRDETAIL)

mkdir -p "$WORK"
"$CC_BIN" -O2 -DFRONTEND -D_GNU_SOURCE "${DEFS[@]}" -Wall -Wextra \
    -isystem "$PG_INC" -I"$REPO/src" -I"$REPO/src/infra" -I"$REPO/src/decode" \
    "$HERE/bench_jsonwalk.c" "$REPO/src/infra/jsonwalk.c" \
    "$LIBDIR/libpgcommon.a" "$LIBDIR/libpgport.a" -o "$WORK/bench_jsonwalk"
"$WORK/bench_jsonwalk" "$@"
# the same event from Avro and Protobuf (bench_avro.c): no more than from JSON
"$CC_BIN" -O2 -DFRONTEND -D_GNU_SOURCE "${DEFS[@]}" -Wall -Wextra \
    -isystem "$PG_INC" -I"$REPO/src" -I"$REPO/src/infra" -I"$REPO/src/decode" \
    "$HERE/bench_avro.c" "$REPO/src/decode/avro_binary.c" "$REPO/src/infra/jsontree.c" "$REPO/src/infra/jsonwalk.c" \
    "$REPO/src/decode/protobuf.c" "$REPO/src/decode/protobuf_parse.c" \
    "$LIBDIR/libpgcommon.a" "$LIBDIR/libpgport.a" -lm -o "$WORK/bench_avro"
"$WORK/bench_avro" "$@"
# the Debezium envelope's cached-schema path (bench_debezium.c) over the
# recorded change events, one a line as JsonConverter writes them
python3 -c '
import glob, json, sys
for f in sorted(glob.glob(sys.argv[1] + "/json_schema*/*.json")):
    v = json.load(open(f)).get("value")
    if isinstance(v, dict) and "payload" in v:
        print(json.dumps(v, separators=(",", ":"), ensure_ascii=False))
' "$REPO/test/fixtures/debezium" > "$WORK/debezium_events.jsonl"
"$CC_BIN" -O2 -DFRONTEND -D_GNU_SOURCE "${DEFS[@]}" -Wall -Wextra \
    -isystem "$PG_INC" -I"$REPO/src" -I"$REPO/src/infra" -I"$REPO/src/decode" \
    "$HERE/bench_debezium.c" "$REPO/src/infra/jsontree.c" "$REPO/src/infra/jsonwalk.c" \
    "$LIBDIR/libpgcommon.a" "$LIBDIR/libpgport.a" -o "$WORK/bench_debezium"
"$WORK/bench_debezium" "$WORK/debezium_events.jsonl"
