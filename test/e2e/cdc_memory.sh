#!/usr/bin/env bash
# cdc_memory (issue 16): the worker's memory for a batch of big Debezium
# change events grows with the batch's bytes, not with ~100 kB per event.
# Two routed pipelines (target template '{source.table}', as the CDC bench)
# read N and 2N schema-embedded events (the recorded accounts fixture,
# ~4.8 kB each) from their own topic, produced before the pipeline starts
# so that one batch holds them all; the growth of the peak RSS (VmHWM of
# the worker) from the N to the 2N worker, per byte of the N more events,
# must stay under a small factor.  A ratio of two runs of the same code, so
# the baseline of a worker cancels out; before the per-event scratch
# context (envelope_debezium.c) it was ~20 per byte.
. "$(dirname "$0")/../lib/common.sh"
setup_owner
FIX="$(cd "$(dirname "$0")/../fixtures/debezium/json_schema" && pwd)"
N="${KS_CDC_MEMORY_N:-2000}"
MAX_RATIO="${KS_CDC_MEMORY_MAX_RATIO:-8}"

# gen COUNT TABLE: COUNT change events "key|value" of table TABLE (ids 1..COUNT)
gen() {
    python3 - "$FIX/accounts.c.json" "$1" "$2" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
n, table = int(sys.argv[2]), sys.argv[3]
for i in range(1, n + 1):
    k, v = m["key"], m["value"]
    k["payload"]["id"] = i
    v["payload"]["after"]["id"] = i
    v["payload"]["source"]["lsn"] = 1000 + i
    v["payload"]["source"]["table"] = table
    print(json.dumps(k) + "|" + json.dumps(v))
PY
}

TMPD="$(mktemp -d)"
declare -A BYTES HWM
for s in a b; do
    count=$N; [ "$s" == b ] && count=$((2 * N))
    tb="cdcmem_${s}_$SFX"
    sql >/dev/null <<SQL
CREATE TABLE e2e.$tb (id integer PRIMARY KEY, name text NOT NULL, balance numeric(12,2), rate numeric,
    opened date, updated_at timestamptz, active boolean, meta jsonb, _kafka_source_position numeric);
ALTER TABLE e2e.$tb OWNER TO ks_e2e;
SQL
    "$HARNESS" topic-create "$tb" 1 >/dev/null 2>&1
    f="$TMPD/$tb.txt"
    gen "$count" "$tb" > "$f"
    BYTES[$s]=$(wc -c < "$f")
    kcat -P -b "$KS_BOOTSTRAP" -t "$tb" -K '|' -Z < "$f"
done
rm -rf "$TMPD"
for s in a b; do
    tb="cdcmem_${s}_$SFX"
    sql -c "SET ROLE ks_e2e; SELECT kafka_sink.create_pipeline(name => '$tb', bootstrap_servers => '$KS_BOOTSTRAP',
            subscribe => ARRAY['$tb'], target => 'e2e.{source.table}', starting_offsets => 'earliest',
            envelope => 'debezium', max_offsets_per_batch => 100000)" >/dev/null
done
for s in a b; do
    tb="cdcmem_${s}_$SFX"
    check "$tb caught up" t "$(sql -c "SELECT kafka_sink.wait('$tb', '180 s')")"
    pid="$(worker_pid "$tb")"
    HWM[$s]=$(awk '/^VmHWM/ {print $2 * 1024}' "/proc/$pid/status" 2>/dev/null || echo 0)
done
check "every event landed" "$N $((2 * N))" \
      "$(sql -c "SELECT (SELECT count(*) FROM e2e.cdcmem_a_$SFX) || ' ' || (SELECT count(*) FROM e2e.cdcmem_b_$SFX)")"
extra_bytes=$((BYTES[b] - BYTES[a]))
extra_hwm=$((HWM[b] - HWM[a]))
ratio="$(python3 -c "print('%.1f' % ($extra_hwm / $extra_bytes))")"
echo "# peak RSS: $((HWM[a] / 1048576)) MiB for $N events ($((BYTES[a] / 1048576)) MiB), $((HWM[b] / 1048576)) MiB for $((2 * N)); $ratio bytes of peak RSS per byte of the $N more events"
check "peak RSS grows by less than $MAX_RATIO bytes per byte of the batch (was ~20)" t \
      "$(python3 -c "print('t' if ${HWM[a]} > 0 and $extra_hwm / $extra_bytes < $MAX_RATIO else 'f')")"
check "no quarantine" 0 "$(sql -c "SELECT count(*) FROM kafka_sink.quarantine q JOIN kafka_sink.pipelines p ON p.id = q.pipeline_id WHERE p.name LIKE 'cdcmem_%_$SFX'")"

for s in a b; do
    sql -c "SELECT kafka_sink.drop_pipeline('cdcmem_${s}_$SFX')" >/dev/null
done
finish
