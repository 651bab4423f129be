#!/usr/bin/env bash
# cdc_source: the CDC source of the CDC tests works.  This does NOT test
# kafka_sink (cdc_replica.sh does); it checks that what the end-to-end test
# feeds kafka_sink is what we think it is, so a failure there points at the
# sink, not at the source:
#  - test/tools/debezium_source.sh starts a PostgreSQL source of its own
#    (wal_level = logical, no kafka_sink) and Kafka Connect standalone with
#    the Debezium PostgreSQL connector (pgoutput) against it;
#  - test/tools/cdc_workload.py: an initial data set (the snapshot, op r),
#    then inserts, updates, deletes, key changes and a truncate over three
#    tables (integer, text and composite keys);
#  - the change topics (read with kcat by test/tools/cdc_topic_check.py)
#    carry exactly the expected ops per table, before/after as the replica
#    identity says, a tombstone after each delete, the truncate event
#    (skipped.operations=none), source.lsn never decreasing;
#  - Connect is stopped cleanly (offsets flushed), then a workload, then
#    Connect is killed with SIGKILL before its next offset flush and started
#    again: what it re-sends carries the same source positions (lsn, txId,
#    sequence) and rows as the first time (what the guards of issue 16 will
#    rely on), and what comes after is new.
# The source cluster, Connect and their files are removed at exit.
. "$(dirname "$0")/../lib/common.sh"
TOOLS="$REPO/test/tools"
export DBZ_DIR="$KS_RUN/cdc_source_$SFX"
export DBZ_NAME="dbz_$SFX" DBZ_TOPIC_PREFIX="dbz_$SFX" DBZ_CONVERTER=json
# no periodic offset flush during the test: only the clean stop flushes,
# so the kill makes Connect re-send everything after that (deterministic)
export DBZ_FLUSH_MS=600000
SRC="$TOOLS/debezium_source.sh"
W="$DBZ_DIR/work"
cleanup_source() { "$SRC" clean >/dev/null 2>&1; }
at_exit cleanup_source
t_start=$SECONDS

"$SRC" start-source
eval "$("$SRC" env)"
mkdir -p "$W"
wl() { python3 "$TOOLS/cdc_workload.py" --conninfo "$DBZ_SRC_CONNINFO" "$@"; }
wl --seed 11 --expect "$W/expect.json" init --rows 12
t0=$SECONDS
"$SRC" start
echo "# Connect started and the snapshot taken in $((SECONDS - t0)) s"
wl --seed 12 --expect "$W/expect.json" run --ops 60

. "$KS_LIB_DIR/cdc_topics.sh"   # expected_total, topics_total, topics_at_least
topics_json() {   # topic -> high watermark (one partition each)
    "$SRC" topics | python3 -c 'import json, sys
print(json.dumps({l.split("\t")[0]: int(l.split("\t")[1]) for l in sys.stdin if l.strip()}))'
}

n1="$(expected_total "$W/expect.json")"
check "snapshot and first workload reach the topics ($n1 messages)" t \
      "$(wait_for 60 topics_at_least "$n1" && echo t || echo "f ($(topics_total))")"

# a clean stop flushes the offsets: nothing is re-sent after it
"$SRC" restart-connect
wl --seed 13 --expect "$W/expect.json" run --ops 40 --no-truncate
n2="$(expected_total "$W/expect.json")"
check "after a clean restart of Connect: the second workload arrives, nothing re-sent ($n2 messages)" "$n2" \
      "$(wait_for 60 topics_at_least "$n2"; sleep 2; topics_total)"

# the kill: no offset flush since the clean restart, so the second workload is re-sent
topics_json > "$W/mark.json"
"$SRC" restart-connect --kill
wl --seed 14 --expect "$W/expect_after.json" run --ops 20 --truncate products
check "after the kill: the re-sent and the third workload's events arrive" t \
      "$(wait_for 60 topics_at_least "$((n2 + $(expected_total "$W/expect_after.json")))" && echo t || echo f)"
sleep 2

python3 "$TOOLS/cdc_topic_check.py" --bootstrap "$KS_BOOTSTRAP" --prefix "$DBZ_TOPIC_PREFIX" \
        --expect "$W/expect.json" --mark "$W/mark.json" --expect-after "$W/expect_after.json" \
        --full-identity accounts > "$W/check.out" 2>&1 || true
cat "$W/check.out"
PASSED=$((PASSED + $(grep -c '^ok - ' "$W/check.out" || true)))
FAILED=$((FAILED + $(grep -c '^not ok - ' "$W/check.out" || true)))
check "cdc_topic_check ran" t "$(grep -q '^# re-sent' "$W/check.out" && echo t || echo f)"
resent="$(sed -n 's/^# re-sent after the kill of Connect: \([0-9]*\) events/\1/p' "$W/check.out")"
check "the kill before an offset flush made Connect re-send (the check above is not vacuous)" t \
      "$([ "${resent:-0}" -gt 0 ] && echo t || echo f)"
echo "# cdc_source took $((SECONDS - t_start)) s"
finish
