# test/lib/cdc_topics.sh — what the change topics of the CDC test source
# hold (test/tools/debezium_source.sh, as $SRC), for the scripts that run
# it; sourced after common.sh.
#   expected_total FILE   the messages the events cdc_workload.py's --expect
#                         FILE lists make (snapshot rows, ops, tombstones)
#   topics_total          the messages the change topics hold
#   topics_at_least N     whether they hold N or more
#   applied PIPELINE      the offsets its checkpoint holds, all partitions
#   applied_above P N     whether those are more than N
expected_total() {
    python3 -c 'import json, sys
e = json.load(open(sys.argv[1]))
print(sum(t.get("snapshot_rows", 0) + sum(t.get(k, 0) for k in ("c", "u", "d", "t", "tombstones")) for t in e.values()))' "$1"
}
topics_total() { "$SRC" topics 2>/dev/null | awk '{s += $2} END {print s + 0}'; }
topics_at_least() { [ "$(topics_total)" -ge "$1" ]; }
applied() {
    sql -c "SELECT coalesce(sum(o.next_offset), 0) FROM kafka_sink.offsets o
              JOIN kafka_sink.pipeline_definitions p ON p.id = o.pipeline_id WHERE p.name = '$1'" 2>/dev/null || echo 0
}
applied_above() { [ "$(applied "$1")" -gt "$2" ]; }
