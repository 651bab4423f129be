#!/usr/bin/env bash
# test/e2e/onconflict_diff.sh — the on_conflict apply strategy (INSERT ...
# ON CONFLICT (key) DO NOTHING, then the UPDATE under the ordering guard)
# writes exactly what the MERGE writes.  Table shapes (a CHECK and lineage
# columns, NOT NULL with defaults, no order column, only a key, a composite
# text key, a partitioned table) are each created twice and fed the same
# random messages (random keys and order values so that some are stale,
# fields absent, null or set, tombstones, duplicates, values that break a
# CHECK or a NOT NULL) in the same random batch sizes, once with
# kafka_sink.apply_strategy = sql and once with on_conflict.  Compared:
# the rows, every batch's counts and the quarantine, and the history of
# every row change (an AFTER row trigger logging each insert, update and
# delete with its batch), so the two tables are equal after every batch.
# Each on_conflict pipeline must have gone through ON CONFLICT
# (sink.applyRows.onConflict).  Then 6,000 such messages through the MERGE,
# and through on_conflict with three kill -9 of its worker mid-run: the
# same rows.
# shellcheck source=../lib/common.sh
. "$(dirname "$0")/../lib/common.sh"
setup_owner
W="$KS_RUN/onconflict_diff.$SFX"
mkdir -p "$W"
SEED="${KS_ONCONFLICT_SEED:-$((RANDOM * 32768 + RANDOM))}"
NMSG="${KS_ONCONFLICT_MESSAGES:-400}"
MAX=$((RANDOM % 30 + 5))
echo "# seed $SEED, $NMSG messages, max_offsets_per_batch $MAX"
at_exit "set_apply_strategy RESET"

# the messages: "key<TAB>value", keys 1..40; v the order column (stale ones
# too), t and c absent / null / set, c sometimes breaking the CHECK, 8%
# tombstones, 5% sent twice; the composite topic's values carry their key
python3 - "$SEED" "$NMSG" "$W" <<'PY'
import json, random, sys
rnd = random.Random(int(sys.argv[1]))
n, w = int(sys.argv[2]), sys.argv[3]
with open(f"{w}/msgs", "w") as f, open(f"{w}/comp", "w") as g:
    for i in range(n):
        k = rnd.randint(1, 40)
        if rnd.random() < 0.08:
            line = f"{k}\t"
        else:
            m = {"v": rnd.randint(0, 60)}
            for fld, val in (("t", lambda: f"t{i}"), ("c", lambda: rnd.randint(0, 200))):
                r = rnd.random()
                if r < 0.12:
                    m[fld] = None
                elif r < 0.7:
                    m[fld] = val()
            line = f"{k}\t{json.dumps(m)}"
        for _ in range(2 if rnd.random() < 0.05 else 1):
            print(line, file=f)
        c = {"k": rnd.choice(["a", "B", "b", "é"]), "n": rnd.randint(1, 6), "v": rnd.randint(0, 30)}
        if rnd.random() < 0.6:
            c["t"] = f"t{i}"
        print(json.dumps(c), file=g)
PY
topic="ocd_$SFX"; ctopic="ocdc_$SFX"
kcat -P -b "$KS_BOOTSTRAP" -t "$topic" -p 0 -K $'\t' -Z < "$W/msgs"
kcat -P -b "$KS_BOOTSTRAP" -t "$ctopic" -p 0 < "$W/comp"
n="$(wc -l < "$W/msgs")"; nc="$(wc -l < "$W/comp")"

SHAPES=()
declare -A DDL ARGS
# shape NAME DDL CREATE_PIPELINE_ARGS: @T@ is the table
shape() { SHAPES+=("$1"); DDL[$1]="$2"; ARGS[$1]="$3"; }
LIN="_kafka_offset bigint, _kafka_batch_id bigint"
MSGS="subscribe => ARRAY['$topic'], key_format => 'string', delete_on_tombstone => true"
shape check_lineage "CREATE TABLE @T@ (id int PRIMARY KEY, v int, t text, c int CHECK (c IS NULL OR c % 13 <> 5), $LIN);" \
    "$MSGS, order_column => 'v'"
shape notnull_defaults "CREATE TABLE @T@ (id int PRIMARY KEY, v int NOT NULL, t text NOT NULL DEFAULT 'dflt',
    c int DEFAULT 7 CHECK (c <> 100));" "$MSGS, order_column => 'v'"
shape no_order "CREATE TABLE @T@ (id int PRIMARY KEY, v int, t text, c int, $LIN);" "$MSGS"
shape only_key "CREATE TABLE @T@ (id int PRIMARY KEY);" "$MSGS"
shape composite "CREATE TABLE @T@ (k text COLLATE \"C\", n int, v int, t text, PRIMARY KEY (k, n));" \
    "subscribe => ARRAY['$ctopic'], order_column => 'v'"
shape partitioned "CREATE TABLE @T@ (id int, v int, t text, c int CHECK (c IS NULL OR c % 11 <> 3), $LIN,
    PRIMARY KEY (id)) PARTITION BY RANGE (id);
    CREATE TABLE @T@_a PARTITION OF @T@ FOR VALUES FROM (MINVALUE) TO (20);
    CREATE TABLE @T@_b PARTITION OF @T@ FOR VALUES FROM (20) TO (MAXVALUE);" "$MSGS, order_column => 'v'"

table_of() { echo "oc${SFX}_$1_$2"; }
# every row change, with the transaction (the batch) that made it
history_ddl() { # TABLE
    cat <<SQL
CREATE TABLE e2e.$1_h (xid bigint DEFAULT txid_current(), op text, row jsonb);
CREATE FUNCTION e2e.$1_log() RETURNS trigger LANGUAGE plpgsql AS \$f\$
BEGIN
    INSERT INTO e2e.$1_h (op, row)
    VALUES (TG_OP, CASE WHEN TG_OP = 'DELETE' THEN to_jsonb(OLD) ELSE to_jsonb(NEW) END - '_kafka_batch_id');
    RETURN NULL;
END \$f\$;
CREATE TRIGGER log AFTER INSERT OR UPDATE OR DELETE ON e2e.$1 FOR EACH ROW EXECUTE FUNCTION e2e.$1_log();
SQL
}
dump() { # TABLE
    local t="$1"
    sql -c "COPY (SELECT r FROM (SELECT to_jsonb(x) - '_kafka_batch_id' AS r FROM e2e.$t x) y ORDER BY r::text) TO STDOUT"
    echo "--"
    batches_and_quarantine "$t"
    echo "--"
    # the history by batch (the n-th transaction that changed the table),
    # in a fixed order within a batch (the two strategies write a batch's
    # inserts and updates in another order)
    sql -c "COPY (SELECT dense_rank() OVER (ORDER BY xid) AS b, op, row FROM e2e.${t}_h ORDER BY b, op, row::text) TO STDOUT"
}

for st in sql on_conflict; do
    set_apply_strategy "$st"
    for s in "${SHAPES[@]}"; do
        t="$(table_of "$s" "$st")"
        { echo "SET client_min_messages = warning; SET ROLE ks_e2e;"
          echo "${DDL[$s]//@T@/e2e.$t}"
          history_ddl "$t"
          echo "SELECT kafka_sink.create_pipeline(name => '$t', bootstrap_servers => '$KS_BOOTSTRAP',
                    target => 'e2e.$t', ${ARGS[$s]}, starting_offsets => 'earliest',
                    max_offsets_per_batch => $MAX, trigger_interval => '0');"; } | sql > /dev/null
    done
    for s in "${SHAPES[@]}"; do
        t="$(table_of "$s" "$st")"
        want="$n"; [ "$s" = composite ] && want="$nc"
        poll "$(checkpoint_covers_sql "$t" "$want")" 120 || check "$s ($st) consumed the topic" t f
        sql -c "SET ROLE ks_e2e; SELECT kafka_sink.stop('$t')" > /dev/null
        dump "$t" > "$W/dump.$s.$st"
    done
done
set_apply_strategy RESET

for s in "${SHAPES[@]}"; do
    rows="$(sed -n '1,/^--$/p' "$W/dump.$s.sql" | grep -vc '^--$' || true)"
    changes="$(sed -n '/^--$/,$p' "$W/dump.$s.sql" | awk -F'\t' 'NF == 3 && ($2 == "INSERT" || $2 == "UPDATE" || $2 == "DELETE")' | wc -l)"
    if diff -u "$W/dump.$s.sql" "$W/dump.$s.on_conflict" > "$W/diff.$s"; then
        check "$s: on_conflict writes what the MERGE writes ($rows rows, $changes row changes; every batch's counts and history, the quarantine)" same same
    else
        check "$s: on_conflict writes what the MERGE writes (seed $SEED, max_offsets_per_batch $MAX)" same differs
        head -30 "$W/diff.$s"
    fi
    oc="$(sql -Atc "SELECT coalesce(sum((b.progress->'sink'->'applyRows'->>'onConflict')::bigint), 0)
                      FROM kafka_sink.batches b JOIN kafka_sink.pipeline_definitions p ON p.id = b.pipeline_id
                     WHERE p.name = '$(table_of "$s" on_conflict)'")"
    check "$s: the on_conflict pipeline's winners went through ON CONFLICT ($oc rows)" t \
        "$([ "${oc:-0}" -gt 0 ] && echo t || echo f)"
done
# the messages reach what the comparison is about
q="$(sql -Atc "SELECT string_agg(DISTINCT q.reason, ',' ORDER BY q.reason) FROM kafka_sink.quarantine q
                 JOIN kafka_sink.pipeline_definitions p ON p.id = q.pipeline_id
                WHERE p.name IN ('$(table_of check_lineage on_conflict)', '$(table_of notnull_defaults on_conflict)')")"
check "the messages broke a CHECK and a NOT NULL (quarantined: $q)" constraint_violation "$q"
for op in UPDATE DELETE; do
    c="$(sql -Atc "SELECT count(*) FROM e2e.$(table_of check_lineage on_conflict)_h WHERE op = '$op'")"
    check "check_lineage: the history holds ${op}s ($c)" t "$([ "$c" -gt 0 ] && echo t || echo f)"
done
stale="$(sql -Atc "SELECT sum(b.stale) FROM kafka_sink.batches b JOIN kafka_sink.pipeline_definitions p ON p.id = b.pipeline_id
                    WHERE p.name = '$(table_of check_lineage on_conflict)'")"
check "check_lineage: some messages were stale by the guard ($stale)" t "$([ "${stale:-0}" -gt 0 ] && echo t || echo f)"

# ---- kill -9 of the on_conflict worker mid-run ------------------------------------
ktopic="ocdk_$SFX"
python3 - "$SEED" "$W/kmsgs" <<'PY'
import json, random, sys
rnd = random.Random(int(sys.argv[1]) + 7)
with open(sys.argv[2], "w") as f:
    for i in range(6000):
        k = rnd.randint(1, 400)
        if rnd.random() < 0.05:
            print(f"{k}\t", file=f)
            continue
        m = {"v": rnd.randint(0, 500)}
        if rnd.random() < 0.6:
            m["t"] = f"t{i}"
        if rnd.random() < 0.6:
            m["c"] = rnd.randint(0, 200)
        print(f"{k}\t{json.dumps(m)}", file=f)
PY
kcat -P -b "$KS_BOOTSTRAP" -t "$ktopic" -p 0 -K $'\t' -Z < "$W/kmsgs"
kn="$(wc -l < "$W/kmsgs")"
for st in sql on_conflict; do
    set_apply_strategy "$st"
    name="ocdk_${st}_$SFX"
    sql > /dev/null <<SQL
SET ROLE ks_e2e;
CREATE TABLE e2e.$name (id int PRIMARY KEY, v int, t text, c int CHECK (c IS NULL OR c % 13 <> 5));
SELECT kafka_sink.create_pipeline(name => '$name', bootstrap_servers => '$KS_BOOTSTRAP',
    subscribe => ARRAY['$ktopic'], target => 'e2e.$name', order_column => 'v', key_format => 'string',
    delete_on_tombstone => true, starting_offsets => 'earliest', max_offsets_per_batch => 200,
    trigger_interval => '0');
SQL
    kills=0; at=""
    if [ "$st" = on_conflict ]; then
        for target in 600 2000 3600; do
            poll "$(checkpoint_covers_sql "$name" "$target")" 90 || true
            pid="$(wait_worker "$name" none 30 || true)"
            now="$(sql -Atc "SELECT coalesce(sum(o.next_offset), 0) FROM kafka_sink.offsets o
                               JOIN kafka_sink.pipeline_definitions p ON p.id = o.pipeline_id
                              WHERE p.name = '$name'" 2>/dev/null || echo '?')"
            if [ -n "$pid" ] && kill -9 "$pid" 2>/dev/null; then kills=$((kills + 1)); at+=" $now"; fi
            sleep 2
        done
        check "on_conflict: $kills kill -9 of the worker mid-run (checkpoint at $at of $kn)" 3 "$kills"
    fi
    poll "$(checkpoint_covers_sql "$name" "$kn")" 180 || check "$name consumed the topic" t f
    sql -c "SET ROLE ks_e2e; SELECT kafka_sink.stop('$name')" > /dev/null
    sql -c "COPY (SELECT id, v, t, c FROM e2e.$name ORDER BY id) TO STDOUT" > "$W/k.$st"
    sql -c "COPY (SELECT q.message_offset, q.reason FROM kafka_sink.quarantine q
                    JOIN kafka_sink.pipeline_definitions p ON p.id = q.pipeline_id
                   WHERE p.name = '$name' ORDER BY 1) TO STDOUT" >> "$W/k.$st"
done
set_apply_strategy RESET
check "after the kills on_conflict's table and quarantine equal the MERGE's ($(wc -l < "$W/k.sql") lines)" \
    "$(cat "$W/k.sql")" "$(cat "$W/k.on_conflict")"

finish
