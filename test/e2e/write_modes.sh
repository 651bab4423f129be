#!/usr/bin/env bash
# test/e2e/write_modes.sh — write_mode insert_only and update_only
# (docs/write-modes.md) against a model.  write_modes_model.py generates
# random JSON events over a few keys, with duplicates, partial messages and
# events without an order value, over two partitions (update_only: a key
# stays in one partition, as a keyed producer does; with tombstones);
# the topic is read back and the model computes, one message at a time and
# independently of the extension, the target.  Each topic is ingested by
# pipelines cut differently (one batch, one message per batch, random
# max_offsets_per_batch, one whose worker is killed with SIGKILL while it
# runs); update_only targets are seeded with some keys first.  Every table
# must equal the model; the counters say what happened (nothing inserted
# by update_only, superseded events counted by insert_only, skipped ones by
# update_only); the fate of every message, by message_fate and
# message_fates, is one the model allows (update_only twice: with
# tombstones, and without deletes, where a skipped message is told apart).
# shellcheck source=../lib/common.sh
. "$(dirname "$0")/../lib/common.sh"
setup_owner
W="$KS_RUN/write_modes.$SFX"
mkdir -p "$W"
seed="${KS_WRITE_MODES_SEED:-$((RANDOM * 32768 + RANDOM))}"

# one run: MODE (insert_only|update_only|update_nodel: update_only, no tombstones)
run() {
    local mode="$1" topic="wm_${1}_$SFX" n r i name variant wm
    python3 "$E2E_DIR/write_modes_model.py" gen "$mode" "$seed" "$W"
    "$HARNESS" topic-create "$topic" 2 >/dev/null 2>&1 || true
    kcat -P -b "$KS_BOOTSTRAP" -t "$topic" -p 0 -K $'\t' -Z < "$W/p0"
    kcat -P -b "$KS_BOOTSTRAP" -t "$topic" -p 1 -K $'\t' -Z < "$W/p1"
    n=$(($(wc -l < "$W/p0") + $(wc -l < "$W/p1")))
    kcat -C -b "$KS_BOOTSTRAP" -t "$topic" -o beginning -e -q -f '%p\t%o\t%k\t%s\n' > "$W/rb.$mode"
    check "seed $seed ($mode): the topic holds the $n messages produced" "$n" "$(wc -l < "$W/rb.$mode")"
    r=$((RANDOM % 6 + 2))
    local p="${mode:0:3}${mode: -3}$SFX"
    if [ "$mode" = insert_only ]; then
        names=("wm${p}_one" "wm${p}_each" "wm${p}_kill" "wm${p}_pos$r")
        maxes=(100000 1 3 "$r")
        variants=(insert_only insert_only insert_only insert_pos)
    else
        names=("wm${p}_one" "wm${p}_each" "wm${p}_kill$r")
        maxes=(100000 1 "$r")
        variants=("$mode" "$mode" "$mode")
    fi
    for variant in $(printf '%s\n' "${variants[@]}" | sort -u); do
        python3 "$E2E_DIR/write_modes_model.py" expect "$variant" "$W/rb.$mode" "$W" "$W/expected.$variant" ||
            check "seed $seed ($variant): the model ran" 0 1
    done
    for i in "${!names[@]}"; do
        name="${names[$i]}"
        variant="${variants[$i]}"
        local order="order_column => 'v',"
        [ "$variant" = insert_pos ] && order=""
        wm="${mode/update_nodel/update_only}"
        local opts=""
        [ "$mode" = update_only ] && opts="key_format => 'string', delete_on_tombstone => true,"
        [ "$mode" = update_nodel ] && opts="key_format => 'string',"
        sql >/dev/null <<SQL
SET ROLE ks_e2e;
CREATE TABLE e2e.$name (id bigint PRIMARY KEY, v bigint, a text DEFAULT 'none', b text,
                        _kafka_partition integer, _kafka_offset bigint, _kafka_topic text, _kafka_batch_id bigint);
$( [[ "$mode" = update_* ]] && sed "s/@T@/e2e.$name/" "$W/seed.sql" )
SELECT kafka_sink.create_pipeline(name => '$name', bootstrap_servers => '$KS_BOOTSTRAP',
    subscribe => ARRAY['$topic'], target => 'e2e.$name', $order $opts write_mode => '$wm',
    starting_offsets => 'earliest', max_offsets_per_batch => ${maxes[$i]}, trigger_interval => '0',
    bronze => 'e2e.${name}_raw');
SQL
    done
    # kill -9 the worker of the third pipeline twice while it runs
    sigkill_worker "${names[2]}" 2
    for i in "${!names[@]}"; do
        name="${names[$i]}"
        variant="${variants[$i]}"
        what="seed $seed ($variant): $name (max_offsets_per_batch ${maxes[$i]})"
        if ! poll "$(done_sql "$name" "$n")" 300; then
            check "$what consumed the topic" "t" "f"
            continue
        fi
        batches="$(sql -c "SELECT count(*) FROM kafka_sink.batches b JOIN kafka_sink.pipeline_definitions p
                            ON p.id = b.pipeline_id WHERE p.name = '$name' AND b.messages > 0")"
        sql -c "COPY (SELECT id, v, a, b, _kafka_partition, _kafka_offset FROM e2e.$name ORDER BY id) TO STDOUT" \
            > "$W/actual.$name"
        check_model "$what: $n messages in $batches batches equal the model" "$W/expected.$variant" "$W/actual.$name"
        check_fates "$what: message_fate and message_fates give every message a fate the model allows" \
                    "$name" "$topic" "$W/expected.$variant.fates"
        check "$what quarantined nothing" 0 \
              "$(sql -c "SELECT count(*) FROM kafka_sink.quarantine q JOIN kafka_sink.pipeline_definitions p
                          ON p.id = q.pipeline_id WHERE p.name = '$name'")"
        stats="$(sql -c "SELECT coalesce(sum(inserted), 0) || ' ' ||
                                coalesce(sum(inserted + updated + superseded), 0) || ' ' || coalesce(sum(stale), 0)
                           FROM kafka_sink.batches b JOIN kafka_sink.pipeline_definitions p
                             ON p.id = b.pipeline_id WHERE p.name = '$name'")"
        if [[ "$mode" = update_* ]]; then
            check "$what inserted nothing" 0 "${stats%% *}"
            # one message per batch: each skipped message is its batch's winner
            [ "${maxes[$i]}" = 1 ] &&
                check "$what: batches.skipped counts the model's skipped messages" \
                      "$(sed -n 's/.*skipped=\([0-9]*\).*/\1/p' "$W/expected.$variant.stats")" \
                      "$(sql -c "SELECT coalesce(sum(b.skipped), 0) FROM kafka_sink.batches b
                                  JOIN kafka_sink.pipeline_definitions p ON p.id = b.pipeline_id WHERE p.name = '$name'")"
        else
            # one insert per key; every other event replaced a row or was superseded
            keys="$(wc -l < "$W/expected.$variant")"
            check "$what: $keys keys inserted, each of the $n events inserted, updated or superseded" \
                  "$keys $n 0" "$stats"
        fi
    done
    # the model saw what the test is about, so the test can fail
    if [ "$mode" = insert_only ]; then
        check "seed $seed: an earlier event arrived after a later one of its key" t \
              "$(grep -qv 'late_earlier=0' "$W/expected.insert_only.stats" && echo t || echo f)"
    else
        check "seed $seed: the model skipped keys not in the target and applied others" t \
              "$(grep -qE 'applied=[1-9].* skipped=[1-9]' "$W/expected.$mode.stats" && echo t || echo f)"
    fi
    for name in "${names[@]}"; do
        sql -c "SET ROLE ks_e2e; SELECT kafka_sink.drop_pipeline('$name')" > /dev/null
    done
}

# write_mode changed by alter_pipeline while the pipeline runs: upsert,
# then update_only from the first batch after the alter commits.  The
# alter and the read of the checkpoint are one transaction (the alter
# waits for a batch in flight, then no batch of the old definition
# commits: checkpoint.c), so the checkpoint it reads is the boundary the
# model applies; the second half of the events is produced after it.
switch() {
    local topic="wm_switch_$SFX" name="wmsw$SFX" n r half0 half1 b
    python3 "$E2E_DIR/write_modes_model.py" gen update_only "$seed" "$W"
    # whatever the seed, each side of the boundary has work for its mode: a
    # key no other message has leads each partition (the first batch, before
    # the alter, inserts it) and ends it (after the alter, skipped)
    local i
    for i in 0 1; do
        { printf '%s\t{"id": %s, "v": 1, "a": "first%s"}\n' $((9000 + i)) $((9000 + i)) "$i"
          cat "$W/p$i"
          printf '%s\t{"id": %s, "v": 1, "a": "last%s"}\n' $((9100 + i)) $((9100 + i)) "$i"
        } > "$W/sw$i"
    done
    "$HARNESS" topic-create "$topic" 2 >/dev/null 2>&1 || true
    half0=$(( $(wc -l < "$W/sw0") / 2 )); half1=$(( $(wc -l < "$W/sw1") / 2 ))
    head -n "$half0" "$W/sw0" | kcat -P -b "$KS_BOOTSTRAP" -t "$topic" -p 0 -K $'\t' -Z
    head -n "$half1" "$W/sw1" | kcat -P -b "$KS_BOOTSTRAP" -t "$topic" -p 1 -K $'\t' -Z
    r=$((RANDOM % 3 + 1))
    sql >/dev/null <<SQL
SET ROLE ks_e2e;
CREATE TABLE e2e.$name (id bigint PRIMARY KEY, v bigint, a text DEFAULT 'none', b text,
                        _kafka_partition integer, _kafka_offset bigint);
$(sed "s/@T@/e2e.$name/" "$W/seed.sql")
SELECT kafka_sink.create_pipeline(name => '$name', bootstrap_servers => '$KS_BOOTSTRAP',
    subscribe => ARRAY['$topic'], target => 'e2e.$name', order_column => 'v',
    key_format => 'string', delete_on_tombstone => true,
    starting_offsets => 'earliest', max_offsets_per_batch => $r, trigger_interval => '0');
SQL
    poll "$(done_sql "$name" 1)" 60 || check "seed $seed (switch): a first batch committed" t f
    sql -c "SET ROLE ks_e2e" -c "BEGIN" \
        -c "SELECT kafka_sink.alter_pipeline('$name', write_mode => 'update_only')" \
        -c "COPY (SELECT o.partition, o.next_offset FROM kafka_sink.offsets o JOIN kafka_sink.pipeline_definitions p
                   ON p.id = o.pipeline_id WHERE p.name = '$name') TO STDOUT" \
        -c "COPY (SELECT 'batch', last_batch_id FROM kafka_sink.pipeline_definitions WHERE name = '$name') TO STDOUT" \
        -c "COMMIT" | grep -E '^[0-9a-z]+'$'\t''[0-9]+$' > "$W/boundary.all"
    grep -v '^batch' "$W/boundary.all" > "$W/boundary"
    b="$(sed -n 's/^batch\t//p' "$W/boundary.all")"
    tail -n +"$((half0 + 1))" "$W/sw0" | kcat -P -b "$KS_BOOTSTRAP" -t "$topic" -p 0 -K $'\t' -Z
    tail -n +"$((half1 + 1))" "$W/sw1" | kcat -P -b "$KS_BOOTSTRAP" -t "$topic" -p 1 -K $'\t' -Z
    n=$(($(wc -l < "$W/sw0") + $(wc -l < "$W/sw1")))
    kcat -C -b "$KS_BOOTSTRAP" -t "$topic" -o beginning -e -q -f '%p\t%o\t%k\t%s\n' > "$W/rb.switch"
    python3 "$E2E_DIR/write_modes_model.py" expect switch "$W/rb.switch" "$W" "$W/expected.switch" ||
        check "seed $seed (switch): the model ran" 0 1
    local what="seed $seed (switch): upsert, then update_only from the batch after the alter (boundary $(tr '\t\n' ': ' < "$W/boundary"))"
    if ! poll "$(done_sql "$name" "$n")" 300; then
        check "$what consumed the topic" t f
    fi
    sql -c "COPY (SELECT id, v, a, b, _kafka_partition, _kafka_offset FROM e2e.$name ORDER BY id) TO STDOUT" \
        > "$W/actual.$name"
    check_model "$what: equals the model" "$W/expected.switch" "$W/actual.$name"
    check "$what: no batch after the alter inserted" 0 \
          "$(sql -c "SELECT coalesce(sum(inserted), 0) FROM kafka_sink.batches bt JOIN kafka_sink.pipeline_definitions p
                      ON p.id = bt.pipeline_id WHERE p.name = '$name' AND bt.batch_id > $b")"
    check "seed $seed (switch): messages on both sides of the boundary" t \
          "$(grep -qE 'after=[1-9].*before=[1-9]' "$W/expected.switch.stats" && echo t || echo f)"
    check "seed $seed (switch): the model inserted before and skipped after the alter" t \
          "$(grep -qE 'inserted=[1-9].*skipped=[1-9]' "$W/expected.switch.stats" && echo t || echo f)"
    sql -c "SET ROLE ks_e2e; SELECT kafka_sink.drop_pipeline('$name')" > /dev/null
}

# update_only's skipped count against a key another session inserts while
# the batch runs: the session holds a SHARE lock with its insert of key 2
# uncommitted, so the batch's MERGE waits for it after its count of the
# absent keys, and commits once the worker waits.  The count and the MERGE
# share one snapshot: key 2 is absent to both (skipped, its row not
# written), so the counters add up to the batch's messages and skipped is
# exactly the messages whose row does not name them (the model: each
# row's lineage, read here; not the extension's own count)
race() {
    local topic="wm_race_$SFX" name="wmrace$SFX" blocker warm
    "$HARNESS" topic-create "$topic" 1 >/dev/null 2>&1 || true
    sql >/dev/null <<SQL
SET ROLE ks_e2e;
CREATE TABLE e2e.$name (id bigint PRIMARY KEY, v bigint, a text,
                        _kafka_partition integer, _kafka_offset bigint, _kafka_topic text, _kafka_batch_id bigint);
INSERT INTO e2e.$name (id, v, a) VALUES (1, 0, 'seed');
SELECT kafka_sink.create_pipeline(name => '$name', bootstrap_servers => '$KS_BOOTSTRAP',
    subscribe => ARRAY['$topic'], target => 'e2e.$name', order_column => 'v', key_format => 'string',
    write_mode => 'update_only', starting_offsets => 'earliest', trigger_interval => '0');
SQL
    echo '1|{"id": 1, "v": 1, "a": "warm"}' | produce "$topic"
    check_caught_up "$name"
    warm="$(sql -c "SELECT last_batch_id FROM kafka_sink.pipeline_definitions WHERE name = '$name'")"
    sql >"$W/race.out" 2>&1 <<SQL &
BEGIN;
LOCK TABLE e2e.$name IN SHARE MODE;
INSERT INTO e2e.$name (id, v, a) VALUES (2, 0, 'other session');
DO \$\$ BEGIN
    FOR i IN 1..1200 LOOP
        EXIT WHEN EXISTS (SELECT 1 FROM pg_locks l WHERE l.relation = 'e2e.$name'::regclass AND NOT l.granted);
        PERFORM pg_sleep(0.05);
    END LOOP;
END \$\$;
SELECT 'waited:' || EXISTS (SELECT 1 FROM pg_locks l WHERE l.relation = 'e2e.$name'::regclass AND NOT l.granted);
COMMIT;
SQL
    blocker=$!
    poll "SELECT EXISTS (SELECT 1 FROM pg_locks l WHERE l.relation = 'e2e.$name'::regclass AND l.mode = 'ShareLock' AND l.granted)" 30 >/dev/null
    printf '%s\n' '1|{"id": 1, "v": 5, "a": "x"}' '2|{"id": 2, "v": 5, "a": "y"}' | produce_batch "$topic"
    wait "$blocker"
    check "race: the worker's MERGE waited for the other session's lock" "waited:true" "$(grep -o 'waited:[a-z]*' "$W/race.out")"
    check_caught_up "$name"
    # offsets: 0 the warm-up, 1 key 1, 2 key 2 (one batch)
    check "race: the batches' messages are their updated, skipped and stale (no message counted twice)" "2:true" \
          "$(sql -c "SELECT sum(b.messages) || ':' || (sum(b.updated + b.skipped + b.stale + b.superseded) = sum(b.messages))
                       FROM kafka_sink.batches b JOIN kafka_sink.pipeline_definitions p ON p.id = b.pipeline_id
                      WHERE p.name = '$name' AND b.batch_id > $warm")"
    check "race: updated and skipped are the messages whose row names them and the others" "true:true" \
          "$(sql -c "WITH w AS (SELECT count(*) FILTER (WHERE t._kafka_offset = m.o) AS wrote,
                                       count(*) FILTER (WHERE t._kafka_offset IS DISTINCT FROM m.o) AS not_written
                                  FROM (VALUES (1::bigint, 1::bigint), (2, 2)) m(id, o) JOIN e2e.$name t ON t.id = m.id)
                     SELECT (sum(b.updated) = min(w.wrote)) || ':' || (sum(b.skipped) = min(w.not_written))
                       FROM w, kafka_sink.batches b JOIN kafka_sink.pipeline_definitions p ON p.id = b.pipeline_id
                      WHERE p.name = '$name' AND b.batch_id > $warm")"
    sql -c "SET ROLE ks_e2e; SELECT kafka_sink.drop_pipeline('$name')" > /dev/null
}

race
run insert_only
run update_only
run update_nodel    # without deletes: message_fate says skipped, not 'deleted or skipped'
switch
finish
