#!/usr/bin/env bash
# test/tools/debezium_fixtures.sh — records real Debezium change events into
# test/fixtures/debezium/ (groundwork for issue 16: the deterministic
# envelope tests of the next session decode these instead of running
# Debezium).  Not run by CI; re-run it by hand after a Debezium upgrade.
#
#   debezium_fixtures.sh [OUT_DIR]     (default <repo>/test/fixtures/debezium)
#
# For each variant (converter x decimal.handling.mode x time.precision.mode)
# it runs test/tools/debezium_source.sh against a fresh cdc_workload.py data
# set (seed 21, 3 rows a table; snapshot, then 30 operations, a truncate of
# every table) and keeps, per table, the first message of each kind:
# r, c, u, d, the tombstone, t, and a key change (the d carrying the
# __debezium.newkey header and the c carrying __debezium.oldkey).  Each file
# OUT_DIR/VARIANT/TABLE.KIND.json is {"topic", "partition", "offset",
# "headers", "key", "value"} with key and value as the JSON the converter
# wrote (null for a tombstone value or a truncate key).  Variants other than
# json_schema and json_noschema keep only r, c and u (the types are the
# point there).  Needs the harness env (a running broker).
set -euo pipefail
REPO="$(cd "$(dirname "$0")/../.." && pwd)"
OUT="${1:-$REPO/test/fixtures/debezium}"
if [ -z "${KS_BOOTSTRAP:-}" ]; then . "${KS_RUN:-$REPO/.run}/env"; fi
SRC="$REPO/test/tools/debezium_source.sh"
export DBZ_DIR="${KS_RUN:-$REPO/.run}/dbz_fixtures"
export DBZ_FLUSH_MS=1000
trap '"$SRC" clean >/dev/null 2>&1 || true' EXIT
RUNID="$(date +%s)"

record() {  # record VARIANT CONVERTER DECIMAL TIME ALL_KINDS
    local v="$1"
    export DBZ_CONVERTER="$2" DBZ_DECIMAL="$3" DBZ_TIME="$4" DBZ_NAME="fix_${v}_$RUNID" DBZ_TOPIC_PREFIX="fix_${v}_$RUNID"
    "$SRC" start-source
    eval "$("$SRC" env)"
    python3 "$REPO/test/tools/cdc_workload.py" --conninfo "$DBZ_SRC_CONNINFO" --seed 21 init --rows 3
    "$SRC" start
    python3 "$REPO/test/tools/cdc_workload.py" --conninfo "$DBZ_SRC_CONNINFO" --seed 22 run --ops 30 --no-truncate
    # a key change of each key type, whatever the workload chose
    psql -X -q -d "$DBZ_SRC_CONNINFO" -c "UPDATE cdc.accounts SET id = id + 100000 WHERE id = (SELECT min(id) FROM cdc.accounts)" \
         -c "UPDATE cdc.products SET sku = sku || '-renamed' WHERE sku = (SELECT min(sku) FROM cdc.products)" \
         -c "UPDATE cdc.order_lines SET line_no = line_no + 100 WHERE (order_id, line_no) = (SELECT order_id, line_no FROM cdc.order_lines ORDER BY 1, 2 LIMIT 1)"
    psql -X -q -d "$DBZ_SRC_CONNINFO" -c "TRUNCATE cdc.accounts" -c "TRUNCATE cdc.products" -c "TRUNCATE cdc.order_lines"
    sleep 3
    "$SRC" stop-connect
    "$SRC" drop-slot
    rm -rf "${OUT:?}/$v"; mkdir -p "$OUT/$v"
    python3 - "$KS_BOOTSTRAP" "$DBZ_TOPIC_PREFIX" "$OUT/$v" "$5" <<'PY'
import json, subprocess, sys
bootstrap, prefix, out, all_kinds = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4] == "1"
for table in ("accounts", "products", "order_lines"):
    topic = "%s.cdc.%s" % (prefix, table)
    p = subprocess.run(["kcat", "-C", "-b", bootstrap, "-t", topic, "-o", "beginning", "-e", "-q", "-J"],
                       capture_output=True, text=True, check=True)
    seen = {}
    for line in p.stdout.splitlines():
        m = json.loads(line)
        key = json.loads(m["key"]) if m.get("key") is not None else None
        val = json.loads(m["payload"]) if m.get("payload") is not None else None
        hdrs = m.get("headers") or []
        names = hdrs[0::2] if hdrs and isinstance(hdrs[0], str) else []
        if val is None:
            kind = "tombstone"
        else:
            op = (val.get("payload") if "payload" in val and "schema" in val else val)["op"]
            kind = op
            if op == "d" and "__debezium.newkey" in names:
                kind = "key_change.d"
            if op == "c" and "__debezium.oldkey" in names:
                kind = "key_change.c"
        if not all_kinds and kind not in ("r", "c", "u"):
            continue
        if kind in seen:
            continue
        seen[kind] = {"topic": topic, "partition": m["partition"], "offset": m["offset"],
                      "headers": hdrs, "key": key, "value": val}
    for kind, rec in seen.items():
        with open("%s/%s.%s.json" % (out, table, kind), "w") as f:
            json.dump(rec, f, indent=1, ensure_ascii=False)
            f.write("\n")
    print("%s: %s" % (topic, " ".join(sorted(seen))))
PY
}

record json_schema              json          precise adaptive 1
record json_noschema            json-noschema precise adaptive 1
record json_schema_decimal_string json        string  adaptive 0
record json_schema_decimal_double json        double  adaptive 0
record json_schema_time_connect json          precise connect  0
record json_schema_time_micros  json          precise adaptive_time_microseconds 0
