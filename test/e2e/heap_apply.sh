#!/usr/bin/env bash
# test/e2e/heap_apply.sh — the direct heap apply strategy (apply_heap.c)
# writes exactly what the SQL strategy's MERGE writes.  A differential: for
# a few random seeds, determinism_model.py's message sequences (keys,
# partial messages with random subsets of optional fields, explicit nulls,
# order values with ties and stale ones, absent and null order values,
# tombstones; KS_HEAP_APPLY_MESSAGES over KS_HEAP_APPLY_KEYS keys) go into
# two equal tables, once with kafka_sink.apply_strategy = sql and once with
# auto (the same random max_offsets_per_batch, so the same batches).  Each
# table has constraints the generated values do break: a CHECK on c and a
# UNIQUE on a (another key's value), so that row faults go through the
# heap's fallback to the SQL strategy and its bisection into quarantine.
# Tables, lineage columns, each batch's counts and the quarantined offsets
# and reasons must be the same.  The batches' progress records
# (sink.applyRows) prove which way the rows went: with auto the heap
# strategy applied rows and, after a fault, the SQL one took over; with sql
# the heap applied none.
# shellcheck source=../lib/common.sh
. "$(dirname "$0")/../lib/common.sh"
setup_owner
W="$KS_RUN/heap_apply.$SFX"
mkdir -p "$W"
SEEDS="${KS_HEAP_APPLY_SEEDS:-4}"
NMSG="${KS_HEAP_APPLY_MESSAGES:-400}"
NKEYS="${KS_HEAP_APPLY_KEYS:-30}"
cleanup() {
    local rc=$?
    set +e
    trap - EXIT
    set_apply_strategy RESET 2>/dev/null
    exit $rc
}
trap cleanup EXIT


table_sql() {
    cat <<SQL
SET ROLE ks_e2e;
CREATE TABLE e2e.$1 (id bigint PRIMARY KEY, v bigint, a text UNIQUE, b text DEFAULT 'dflt',
                     c integer CHECK (c IS NULL OR c % 7 <> 4),
                     _kafka_offset bigint, _kafka_partition integer, _kafka_topic text,
                     _kafka_timestamp timestamptz);
INSERT INTO e2e.$1 (id, v, a, b, c) VALUES (1, 50, 'pre1', 'pre1', 1), (2, NULL, 'pre2', NULL, 2),
                                           (3, 5, NULL, 'pre3', 3);
SELECT kafka_sink.create_pipeline(name => '$1', bootstrap_servers => '$KS_BOOTSTRAP',
    subscribe => ARRAY['$2'], target => 'e2e.$1', order_column => 'v',
    key_format => 'string', delete_on_tombstone => true, starting_offsets => 'earliest',
    max_offsets_per_batch => $3, trigger_interval => '0');
SQL
}


dump() { # NAME: the table, each batch's counts, the quarantine
    sql -c "COPY (SELECT id, v, a, b, c, _kafka_offset, _kafka_partition, _kafka_topic, _kafka_timestamp
                  FROM e2e.$1 ORDER BY id) TO STDOUT"
    echo "--"
    batches_and_quarantine "$1"
}

declare -A rows_by
total_q=0
total_sql=0
for s in $(seq 1 "$SEEDS"); do
    seed=$((RANDOM * 32768 + RANDOM))
    topic="heap_${SFX}_$s"
    python3 "$E2E_DIR/determinism_model.py" "$seed" "$W/msgs.$s" "$W/expected.$s" "$NMSG" "$NKEYS"
    n="$(wc -l < "$W/msgs.$s")"
    kcat -P -b "$KS_BOOTSTRAP" -t "$topic" -p 0 -K $'\t' -Z < "$W/msgs.$s"
    max=$((RANDOM % 30 + 3))
    for st in sql auto; do
        name="h${SFX}_${s}_$st"
        set_apply_strategy "$st"
        table_sql "$name" "$topic" "$max" | sql > /dev/null
        if ! poll "$(checkpoint_covers_sql "$name" "$n")" "${KS_HEAP_APPLY_TIMEOUT:-120}"; then
            check "seed $seed: $name consumed the topic" "t" "f"
            continue
        fi
        sql -c "SET ROLE ks_e2e; SELECT kafka_sink.stop('$name')" > /dev/null
        dump "$name" > "$W/dump.$s.$st"
        rows_by["$st"]="$(applied_rows "$name")"
    done
    # "heap sql quarantined": which strategy applied the winners and tombstones
    read -r h_heap h_sql h_q <<< "${rows_by[auto]}"
    read -r s_heap s_sql _ <<< "${rows_by[sql]}"
    check "seed $seed: with auto the heap strategy applied rows ($h_heap)" t "$([ "${h_heap:-0}" -gt 0 ] && echo t || echo f)"
    # a seed may break no constraint: the faults are counted over all seeds
    total_q=$((total_q + ${h_q:-0})); total_sql=$((total_sql + ${h_sql:-0}))
    check "seed $seed: with sql the MERGE applied every row ($s_sql rows, $s_heap by the heap)" t \
        "$([ "${s_heap:-1}" -eq 0 ] && [ "${s_sql:-0}" -gt 0 ] && echo t || echo f)"
    q="$(sed -n '/^--$/,$p' "$W/dump.$s.sql" | sed -n '2,$p' | sed -n '/^--$/,$p' | grep -vc '^--$' || true)"
    rows="$(sed -n '1,/^--$/p' "$W/dump.$s.sql" | grep -vc '^--$' || true)"
    if diff -u "$W/dump.$s.sql" "$W/dump.$s.auto" > "$W/diff.$s"; then
        check "seed $seed: heap and SQL strategies agree ($n messages, max_offsets_per_batch $max, $rows rows, $q quarantined)" same same
    else
        check "seed $seed: heap and SQL strategies agree ($n messages, max_offsets_per_batch $max)" same differs
        head -40 "$W/diff.$s"
    fi
    for st in sql auto; do
        sql -c "SET ROLE ks_e2e; SELECT kafka_sink.drop_pipeline('h${SFX}_${s}_$st')" > /dev/null
    done
done
check "with auto, row faults ($total_q quarantined) went through the SQL strategy ($total_sql rows)" t \
    "$([ "$total_q" -gt 0 ] && [ "$total_sql" -gt 0 ] && echo t || echo f)"

# ---- targets the heap strategy must leave to the MERGE (heap_eligible) ----
# with auto: a plain table goes through the heap, each of these through SQL
set_apply_strategy auto
topic="heap_${SFX}_refused"
for i in 1 2 3 4 5; do printf '%s\t{"id": %s, "v": %s}\n' "$i" "$i" "$i"; done |
    kcat -P -b "$KS_BOOTSTRAP" -t "$topic" -p 0 -K $'\t' -Z
refused_case() { # NAME EXPECT(heap|sql) SETUP-SQL: a target, a pipeline, which strategy wrote it
    local name="hr${SFX}_$1"
    sql > /dev/null <<SQL
SET client_min_messages = warning;
CREATE TABLE e2e.$name (id bigint PRIMARY KEY, v bigint);
ALTER TABLE e2e.$name OWNER TO ks_e2e;
$3
SET ROLE ks_e2e;
SELECT kafka_sink.create_pipeline(name => '$name', bootstrap_servers => '$KS_BOOTSTRAP',
    subscribe => ARRAY['$topic'], target => 'e2e.$name', order_column => 'v',
    key_format => 'string', starting_offsets => 'earliest', trigger_interval => '0');
SQL
    poll "$(checkpoint_covers_sql "$name" 5)" 60 || true
    read -r h_heap h_sql _ <<< "$(applied_rows "$name")"
    if [ "$2" = heap ]; then
        check "$1: with auto the heap strategy writes it ($h_heap rows, $h_sql by the MERGE)" t \
            "$([ "${h_heap:-0}" -gt 0 ] && [ "${h_sql:-1}" -eq 0 ] && echo t || echo f)"
    else
        check "$1: with auto the MERGE writes it ($h_sql rows, $h_heap by the heap)" t \
            "$([ "${h_heap:-1}" -eq 0 ] && [ "${h_sql:-0}" -gt 0 ] && echo t || echo f)"
    fi
    check "$1: every message applied" 5 "$(sql -Atc "SELECT count(*) FROM e2e.$name")"
    sql -c "SET ROLE ks_e2e; SELECT kafka_sink.drop_pipeline('$name')" > /dev/null
}
refused_case plain heap ""
refused_case trigger sql "CREATE FUNCTION e2e.noop_${SFX}() RETURNS trigger LANGUAGE plpgsql AS \$\$BEGIN RETURN NEW; END\$\$;
CREATE TRIGGER t BEFORE INSERT ON e2e.hr${SFX}_trigger FOR EACH ROW EXECUTE FUNCTION e2e.noop_${SFX}();"
refused_case published sql "CREATE PUBLICATION hr${SFX}_pub FOR TABLE e2e.hr${SFX}_published WITH (publish = 'insert, update');"
refused_case insert_only_publication heap "CREATE PUBLICATION hr${SFX}_pubi FOR TABLE e2e.hr${SFX}_insert_only_publication WITH (publish = 'insert');"
refused_case deferrable sql "ALTER TABLE e2e.hr${SFX}_deferrable ADD UNIQUE (v) DEFERRABLE;"
sql -c "DROP PUBLICATION hr${SFX}_pub, hr${SFX}_pubi" > /dev/null
finish
