# test/lib/cdc_topics.sh — what the change topics of the CDC test source
# hold (test/tools/debezium_source.sh, as $SRC), for the scripts that run
# it; sourced after common.sh.
#   expected_total FILE   the messages the events cdc_workload.py's --expect
#                         FILE lists make (snapshot rows, ops, tombstones)
#   topics_total          the messages the change topics hold
#   topics_at_least N     whether they hold N or more
expected_total() {
    python3 -c 'import json, sys
e = json.load(open(sys.argv[1]))
print(sum(t.get("snapshot_rows", 0) + sum(t.get(k, 0) for k in ("c", "u", "d", "t", "tombstones")) for t in e.values()))' "$1"
}
topics_total() { "$SRC" topics 2>/dev/null | awk '{s += $2} END {print s + 0}'; }
topics_at_least() { [ "$(topics_total)" -ge "$1" ]; }
