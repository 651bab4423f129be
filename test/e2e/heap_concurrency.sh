#!/usr/bin/env bash
# test/e2e/heap_concurrency.sh — the heap apply strategy (apply_heap.c)
# against concurrent writers: a differential with the SQL strategy's MERGE
# under READ COMMITTED.
#
# Part 1, one pipeline per strategy (kafka_sink.apply_strategy = sql, then
# auto), the same scenarios: a psql session (the "holder") changes or locks
# a row in an open transaction, the scenario's messages are produced, the
# script waits until the worker is blocked by the holder (pg_blocking_pids),
# then the holder commits or rolls back.  The final table, each scenario's
# batch counts and the message_fate of every message must be the same for
# both strategies AND equal to what the MERGE gives (written down below):
#   1. holder UPDATE v = 1000 (after the event's 20): the guard, evaluated
#      again on the new version, makes the event stale;
#   2. holder UPDATE v = 5, b = 'user2': the event applies on top (b kept);
#   3. holder DELETE: the MERGE (15+) takes the concurrently deleted row as
#      NOT MATCHED and inserts the event;
#   4. holder UPDATE, ROLLBACK: the event applies to the old row;
#   5. holder INSERT of a key the batch inserts (v = 7, before the event's
#      20), committed after the worker blocked on the key index: the SQL
#      strategy's MERGE raises 23505, which apply_sql.c turns into a
#      serialization failure, and the worker retries the batch, whose MERGE
#      then matches the committed row and updates it; the heap strategy's
#      insert raises 23505 too and the call falls back to the MERGE (same
#      transaction, a new snapshot), which matches and updates: the event
#      applies on top of the holder's row, no quarantine;
#   6. 30 keys (20 existing, 10 new), one of them locked by a holder UPDATE
#      v = 1000: the rest apply, the locked one is stale after the commit;
#   7. holder UPDATE b (committed) while a tombstone arrives: deleted;
#   8. holder UPDATE of the key (8 -> 800): the MERGE's EvalPlanQual finds
#      the join no longer true and inserts key 8 (800 stays);
#   9. holder INSERT of a key, uncommitted, while its tombstone arrives: the
#      DELETE's snapshot does not see the row, so it neither waits nor
#      deletes; the row stays once the holder commits (here the script waits
#      for the batch, not for a blocked worker).
# sink.applyRows proves the way: with auto the heap applied every scenario's
# rows but the 5th's, which went through the SQL fallback; with sql the heap
# applied none.
#
# Part 2, workers => 2 over a two-partition topic whose keys appear on both
# partitions (explicit partitions), each strategy: the two workers write the
# same keys concurrently; the table must be the model (the greatest order
# value per key; the values are all distinct, so no tie between partitions).
# shellcheck source=../lib/common.sh
. "$(dirname "$0")/../lib/common.sh"
setup_owner
W="$KS_RUN/heap_concurrency.$SFX"
mkdir -p "$W"
TIMEOUT="${KS_HEAP_CONC_TIMEOUT:-120}"
PRE=26  # the messages writing the rows the scenarios start from
HOLDER_PID=""
HOLDER="hc_holder_$SFX"
cleanup() {
    local rc=$?
    set +e
    trap - EXIT
    exec 7>&- 2>/dev/null
    stop_process "$HOLDER_PID" 2
    set_apply_strategy RESET 2>/dev/null
    exit $rc
}
trap cleanup EXIT



# holder_begin MARK SQL: a session of its own runs SQL in an open transaction
# (returns once SQL has run: its last statement is the mark)
holder_begin() {
    rm -f "$W/fifo"
    mkfifo "$W/fifo"
    psql -X -q -A -t -v ON_ERROR_STOP=1 < "$W/fifo" > "$W/holder.$1.out" 2>&1 &
    HOLDER_PID=$!
    exec 7> "$W/fifo"
    printf "SET application_name = '%s';\nBEGIN;\n%s\nSELECT 'hc_mark_%s';\n" "$HOLDER" "$2" "$1" >&7
    poll "SELECT EXISTS (SELECT FROM pg_stat_activity WHERE application_name = '$HOLDER'
                           AND state = 'idle in transaction' AND query = 'SELECT ''hc_mark_$1'';')" 30
}

# holder_end COMMIT|ROLLBACK
holder_end() {
    echo "$1;" >&7
    exec 7>&-
    wait "$HOLDER_PID"
    HOLDER_PID=""
}

# blocked NAME: a worker of the pipeline waits for the holder's transaction
blocked() {
    poll "SELECT EXISTS (SELECT FROM pg_stat_activity w, pg_stat_activity h
                          WHERE w.backend_type = 'kafka_sink worker' AND w.application_name = 'kafka_sink: $1'
                            AND h.application_name = '$HOLDER' AND h.pid = ANY (pg_blocking_pids(w.pid)))" "$TIMEOUT"
}

# counts NAME: the sums of the batches' counts, and the rows each strategy applied
counts() {
    sql -Atc "SELECT coalesce(sum(b.inserted), 0), coalesce(sum(b.updated), 0), coalesce(sum(b.deleted), 0),
                     coalesce(sum(b.stale), 0), coalesce(sum(b.superseded), 0), coalesce(sum(b.quarantined), 0),
                     coalesce(sum((b.progress->'sink'->'applyRows'->>'heap')::bigint), 0),
                     coalesce(sum((b.progress->'sink'->'applyRows'->>'sql')::bigint), 0)
                FROM kafka_sink.batches b JOIN kafka_sink.pipeline_definitions p ON p.id = b.pipeline_id
               WHERE p.name = '$1'" | tr '|' ' '
}

# delta BEFORE AFTER: "ins upd del stale superseded quarantined" and "heap sql", after - before
delta() {
    local -a a b
    read -r -a a <<< "$1"
    read -r -a b <<< "$2"
    echo "ins=$((b[0] - a[0])) upd=$((b[1] - a[1])) del=$((b[2] - a[2])) stale=$((b[3] - a[3]))" \
         "superseded=$((b[4] - a[4])) quarantined=$((b[5] - a[5]))|$((b[6] - a[6])) $((b[7] - a[7]))"
}

# ---------------------------------------------------------------- part 1

# scenario NUMBER HOLDER_SQL END MESSAGES: the messages ("key|json" lines,
# "key|" a tombstone) while the holder's transaction blocks the worker
declare -A got counts_of
scenario() {
    local num="$1" hsql="$2" end="$3" msgs="$4" wait="${5:-blocked}" before after m
    before="$(counts "$NAME")"
    if ! holder_begin "$num" "$hsql"; then
        check "$NAME scenario $num: the holder's transaction is open" t f
        return
    fi
    m="$(printf '%s\n' "$msgs" | grep -c .)"
    printf '%s\n' "$msgs" | kcat -P -b "$KS_BOOTSTRAP" -t "$TOPIC" -p 0 -K '|' -Z
    NMSG=$((NMSG + m))
    if [ "$wait" = blocked ]; then
        if blocked "$NAME"; then got["$num.$ST"]=t; else got["$num.$ST"]=f; fi
    elif poll "$(checkpoint_covers_sql "$NAME" "$NMSG")" 30; then
        got["$num.$ST"]=t
    else
        got["$num.$ST"]=f
    fi
    holder_end "$end"
    if ! poll "$(checkpoint_covers_sql "$NAME" "$NMSG")" "$TIMEOUT"; then
        check "$NAME scenario $num: consumed" t f
    fi
    after="$(counts "$NAME")"
    counts_of["$num.$ST"]="$(delta "$before" "$after")"
}

range() { local k; for k in $(seq "$1" "$2"); do printf '%s|%s\n' "$k" "$3"; done; }

for ST in sql auto; do
    NAME="hc_${SFX}_$ST"
    TOPIC="hc_${SFX}_$ST"
    NMSG=0
    set_apply_strategy "$ST"
    "$HARNESS" topic-create "$TOPIC" 1 >/dev/null 2>&1
    sql >/dev/null <<SQL
SET ROLE ks_e2e;
CREATE TABLE e2e.$NAME (id bigint PRIMARY KEY, v bigint, a text, b text DEFAULT 'dflt',
                       _kafka_topic text, _kafka_partition integer, _kafka_offset bigint,
                       _kafka_batch_id bigint);
SELECT kafka_sink.create_pipeline(name => '$NAME', bootstrap_servers => '$KS_BOOTSTRAP',
    subscribe => ARRAY['$TOPIC'], target => 'e2e.$NAME', order_column => 'v',
    key_format => 'string', delete_on_tombstone => true, starting_offsets => 'earliest',
    bronze => 'e2e.${NAME}_raw', trigger_interval => '0');
SQL
    # the rows the scenarios start from, written by the pipeline (lineage)
    { range 1 4 '{"v": 10, "a": "pre"}'; range 7 8 '{"v": 10, "a": "pre"}'
      range 100 119 '{"v": 10, "a": "pre"}'; } | kcat -P -b "$KS_BOOTSTRAP" -t "$TOPIC" -p 0 -K '|'
    NMSG=$PRE
    if ! poll "$(checkpoint_covers_sql "$NAME" "$NMSG")" "$TIMEOUT"; then
        check "$NAME: the first rows applied" t f
        continue
    fi
    scenario 1 "UPDATE e2e.$NAME SET v = 1000, b = 'user1' WHERE id = 1;" COMMIT '1|{"v": 20, "a": "ev1"}'
    scenario 2 "UPDATE e2e.$NAME SET v = 5, b = 'user2' WHERE id = 2;" COMMIT '2|{"v": 20, "a": "ev2"}'
    scenario 3 "DELETE FROM e2e.$NAME WHERE id = 3;" COMMIT '3|{"v": 20, "a": "ev3"}'
    scenario 4 "UPDATE e2e.$NAME SET v = 1000, b = 'user4' WHERE id = 4;" ROLLBACK '4|{"v": 20, "a": "ev4"}'
    scenario 5 "INSERT INTO e2e.$NAME (id, v, a, b) VALUES (5, 7, 'user5', 'user5');" COMMIT '5|{"v": 20, "a": "ev5"}'
    scenario 6 "UPDATE e2e.$NAME SET v = 1000, b = 'user6' WHERE id = 110;" COMMIT \
        "$(range 100 129 '{"v": 20, "a": "ev6"}')"
    scenario 7 "UPDATE e2e.$NAME SET b = 'user7' WHERE id = 7;" COMMIT '7|'
    scenario 8 "UPDATE e2e.$NAME SET id = 800 WHERE id = 8;" COMMIT '8|{"v": 20, "a": "ev8"}'
    scenario 9 "INSERT INTO e2e.$NAME (id, v, a, b) VALUES (9, 50, 'user9', 'user9');" COMMIT '9|' consumed
    sql -c "SET ROLE ks_e2e; SELECT kafka_sink.stop('$NAME')" > /dev/null
    sql -c "COPY (SELECT id, v, a, b FROM e2e.$NAME ORDER BY id) TO STDOUT" > "$W/table.$ST"
    # lineage: which message is each row's source (offsets are the same in both topics)
    sql -c "COPY (SELECT id, _kafka_partition, _kafka_offset FROM e2e.$NAME ORDER BY id) TO STDOUT" > "$W/lineage.$ST"
    sql -c "COPY (SELECT o, f.fate, regexp_replace(f.detail, 'batch [0-9]+', 'batch N')
                    FROM generate_series(0, $NMSG - 1) o,
                         LATERAL kafka_sink.message_fate('$NAME', '$TOPIC', 0, o) f ORDER BY o) TO STDOUT" \
        > "$W/fates.$ST"
done

# the MERGE under READ COMMITTED (PostgreSQL 15+), written down
{
    printf '1\t1000\tpre\tuser1\n2\t20\tev2\tuser2\n3\t20\tev3\tdflt\n4\t20\tev4\tdflt\n5\t20\tev5\tuser5\n'
    printf '8\t20\tev8\tdflt\n9\t50\tuser9\tuser9\n'
    for k in $(seq 100 129); do
        if [ "$k" = 110 ]; then printf '110\t1000\tpre\tuser6\n'; else printf '%s\t20\tev6\tdflt\n' "$k"; fi
    done
    printf '800\t10\tpre\tdflt\n'
} > "$W/table.expected"
declare -A expect_counts=(
    [1]="ins=0 upd=0 del=0 stale=1 superseded=0 quarantined=0"
    [2]="ins=0 upd=1 del=0 stale=0 superseded=0 quarantined=0"
    [3]="ins=1 upd=0 del=0 stale=0 superseded=0 quarantined=0"
    [4]="ins=0 upd=1 del=0 stale=0 superseded=0 quarantined=0"
    [5]="ins=0 upd=1 del=0 stale=0 superseded=0 quarantined=0"
    [6]="ins=10 upd=19 del=0 stale=1 superseded=0 quarantined=0"
    [7]="ins=0 upd=0 del=1 stale=0 superseded=0 quarantined=0"
    [8]="ins=1 upd=0 del=0 stale=0 superseded=0 quarantined=0"
    [9]="ins=0 upd=0 del=0 stale=0 superseded=0 quarantined=0"
)
# the fate of each scenario's messages (offsets PRE..): 1 stale, 2-5 applied,
# 6 applied but key 110's, stale, 7 (a tombstone) deleted, 8 applied, 9
# stale (the key's row is the holder's, without lineage: the tombstone is not
# its source, and the row is not gone, so not deleted; docs/observing.md)
{
    echo "$PRE stale"; for o in 1 2 3 4; do echo "$((PRE + o)) applied"; done
    for k in $(seq 100 129); do
        if [ "$k" = 110 ]; then echo "$((PRE + 5 + k - 100)) stale"; else echo "$((PRE + 5 + k - 100)) applied"; fi
    done
    echo "$((PRE + 35)) deleted"; echo "$((PRE + 36)) applied"; echo "$((PRE + 37)) stale"
} > "$W/fates.expected"

for num in 1 2 3 4 5 6 7 8 9; do
    for st in sql auto; do
        if [ "$num" = 9 ]; then
            check "$st, scenario $num: the batch went through while the holder's transaction was open" t "${got[$num.$st]:-f}"
        else
            check "$st, scenario $num: the worker waited for the holder's transaction" t "${got[$num.$st]:-f}"
        fi
        check "$st, scenario $num: batch counts as the MERGE's" "${expect_counts[$num]}" \
            "${counts_of[$num.$st]%%|*}"
    done
    # rows applied by "heap sql": sql never the heap; auto the heap, but 5 (fallback)
    case "$num" in
        5) want_auto="0 1" ;;
        7 | 9) want_auto="1 0" ;;
        *) want_auto=heap ;;
    esac
    h="${counts_of[$num.auto]#*|}"
    s="${counts_of[$num.sql]#*|}"
    check "sql, scenario $num: the MERGE applied the rows ($s)" t \
        "$([ "${s%% *}" = 0 ] && [ "${s##* }" -gt 0 ] && echo t || echo f)"
    if [ "$want_auto" = heap ]; then
        check "auto, scenario $num: the heap strategy applied the rows ($h)" t \
            "$([ "${h%% *}" -gt 0 ] && [ "${h##* }" = 0 ] && echo t || echo f)"
    else
        check "auto, scenario $num: rows applied by heap, sql" "$want_auto" "$h"
    fi
done
for st in sql auto; do
    if diff -u "$W/table.expected" "$W/table.$st" > "$W/diff.table.$st"; then
        check "$st: the table is the MERGE's" same same
    else
        check "$st: the table is the MERGE's" same differs
        head -30 "$W/diff.table.$st"
    fi
    if diff -u "$W/fates.expected" <(awk -F'\t' -v pre="$PRE" '$1 >= pre {print $1, $2}' "$W/fates.$st") > "$W/diff.fates.$st"; then
        check "$st: the messages' fates are the MERGE's" same same
    else
        check "$st: the messages' fates are the MERGE's" same differs
        head -30 "$W/diff.fates.$st"
    fi
done
for f in table lineage fates; do
    if diff -u "$W/$f.sql" "$W/$f.auto" > "$W/diff.$f"; then
        check "sql and auto agree: $f" same same
    else
        check "sql and auto agree: $f" same differs
        head -30 "$W/diff.$f"
    fi
done
for st in sql auto; do
    sql -c "SET ROLE ks_e2e; SELECT kafka_sink.drop_pipeline('hc_${SFX}_$st')" > /dev/null
done

# ---------------------------------------------------------------- part 2

PKEYS="${KS_HEAP_CONC_KEYS:-40}"
PMSG="${KS_HEAP_CONC_MESSAGES:-600}"
seed=$((RANDOM * 32768 + RANDOM))
# "partition<TAB>key|json" lines, and the model: per key the greatest v
# (distinct values: no tie between the partitions, whose order is not defined)
python3 - "$seed" "$PMSG" "$PKEYS" "$W/pmsgs" "$W/pmodel" <<'PY'
import random, sys
seed, n, keys, out, model = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
rnd = random.Random(seed)
vs = rnd.sample(range(1, 10 * n), n)
# keys 1..keys/4 exist before (v in the middle of the range)
best = {k: (5 * n, "pre") for k in range(1, keys // 4 + 1)}
with open(out, "w") as f:
    for i, v in enumerate(vs):
        k, p = rnd.randint(1, keys), rnd.randint(0, 1)
        a = "p%do%d" % (p, i)
        f.write('%d\t%d|{"v": %d, "a": "%s"}\n' % (p, k, v, a))
        if k not in best or v > best[k][0]:
            best[k] = (v, a)
with open(model, "w") as f:
    for k in sorted(best):
        f.write("%d\t%d\t%s\n" % (k, best[k][0], best[k][1]))
PY
for st in sql auto; do
    NAME="hcp_${SFX}_$st"
    TOPIC="hcp_${SFX}_$st"
    set_apply_strategy "$st"
    "$HARNESS" topic-create "$TOPIC" 2 >/dev/null 2>&1
    for p in 0 1; do
        awk -F'\t' -v p="$p" '$1 == p {print $2}' "$W/pmsgs" | kcat -P -b "$KS_BOOTSTRAP" -t "$TOPIC" -p "$p" -K '|'
    done
    sql >/dev/null <<SQL
SET ROLE ks_e2e;
CREATE TABLE e2e.$NAME (id bigint PRIMARY KEY, v bigint, a text);
INSERT INTO e2e.$NAME SELECT k, 5 * $PMSG, 'pre' FROM generate_series(1, $PKEYS / 4) k;
SELECT kafka_sink.create_pipeline(name => '$NAME', bootstrap_servers => '$KS_BOOTSTRAP',
    subscribe => ARRAY['$TOPIC'], target => 'e2e.$NAME', order_column => 'v',
    key_format => 'string', starting_offsets => 'earliest', workers => 2,
    max_offsets_per_batch => 7, trigger_interval => '0');
SQL
    if poll "$(checkpoint_covers_sql "$NAME" "$PMSG")" "$TIMEOUT"; then
        sql -c "SET ROLE ks_e2e; SELECT kafka_sink.stop('$NAME')" > /dev/null
        sql -c "COPY (SELECT id, v, a FROM e2e.$NAME ORDER BY id) TO STDOUT" > "$W/ptable.$st"
        if diff -u "$W/pmodel" "$W/ptable.$st" > "$W/diff.ptable.$st"; then
            check "$st, workers => 2, seed $seed: the table is the model ($PMSG messages, $PKEYS keys, 2 partitions)" same same
        else
            check "$st, workers => 2, seed $seed: the table is the model" same differs
            head -30 "$W/diff.ptable.$st"
        fi
        read -r _ _ _ _ _ q h s <<< "$(counts "$NAME")"
        check "$st, workers => 2: nothing quarantined" 0 "$q"
        if [ "$st" = auto ]; then
            check "auto, workers => 2: the heap strategy applied rows ($h, $s by the MERGE)" t \
                "$([ "$h" -gt 0 ] && echo t || echo f)"
        else
            check "sql, workers => 2: the heap strategy applied none ($s by the MERGE)" 0 "$h"
        fi
        check "$st, workers => 2: both workers ran" 2 \
            "$(sql -Atc "SELECT count(DISTINCT b.worker) FROM kafka_sink.batches b
                           JOIN kafka_sink.pipeline_definitions p ON p.id = b.pipeline_id
                          WHERE p.name = '$NAME' AND b.messages > 0")"
    else
        check "$st, workers => 2: consumed the topic" t f
    fi
    sql -c "SET ROLE ks_e2e; SELECT kafka_sink.drop_pipeline('$NAME')" > /dev/null
done
if [ -s "$W/ptable.sql" ] && [ -s "$W/ptable.auto" ]; then
    check "workers => 2: sql and auto agree" same "$(cmp -s "$W/ptable.sql" "$W/ptable.auto" && echo same || echo differs)"
fi
finish
