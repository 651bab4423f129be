#!/usr/bin/env bash
# test/e2e/history.sh — mode history (docs/history.md) against a model.
# For a few random seeds, history_model.py generates events (keys, partial
# messages with random subsets of fields and explicit nulls, order values
# around now with ties and late events, tombstones, re-sent ranges); after
# they are produced, the broker's timestamps (a tombstone's order value)
# are read back, and the model computes, independently of the extension,
# the history table version by version and what each key held at chosen
# times.  The topic is ingested by pipelines that cut it differently (one
# batch, one message per batch, two random max_offsets_per_batch) and by
# one whose worker is killed with SIGKILL three times while it runs; every
# table must equal the model, and the point-in-time query of the docs must
# return what the model held.  Pipelines with track_history_columns (a
# tracked set that changes with the seed) read the same topic, cut in
# three ways, into tables that must equal the model's versions made of its
# states, with each version's number of states.  Change events routed by
# source table with create_targets make history tables that must equal the
# model's (two batch splits).  Then the create-time refusals.
# shellcheck source=../lib/common.sh
. "$(dirname "$0")/../lib/common.sh"
setup_owner
W="$KS_RUN/history.$SFX"
mkdir -p "$W"
SEEDS="${KS_HISTORY_SEEDS:-3}"          # KS_HISTORY_SEED=N: seeds N, N+1, ... (to replay a failure)

table_sql() { # NAME [TRACKED]: with TRACKED, _states in place of _fields
    local kept="_fields text[]"
    [ -z "${2:-}" ] || kept="_states jsonb"
    cat <<SQL
SET ROLE ks_e2e;
CREATE TABLE e2e.$1 (id bigint NOT NULL, ts timestamptz NOT NULL, a text, b text, c integer,
                     _valid_from timestamptz NOT NULL, _valid_to timestamptz,
                     _deleted boolean NOT NULL DEFAULT false, _is_current boolean,
                     $kept,
                     _kafka_offset bigint, PRIMARY KEY (id, _valid_from));
SQL
}

pipeline_sql() { # NAME TOPIC MAX_OFFSETS [TRACKED]
    cat <<SQL
SET ROLE ks_e2e;
SELECT kafka_sink.create_pipeline(name => '$1', bootstrap_servers => '$KS_BOOTSTRAP',
    subscribe => ARRAY['$2'], target => 'e2e.$1', mode => 'history', order_column => 'ts',
    key_format => 'string', delete_on_tombstone => true, starting_offsets => 'earliest',
    max_offsets_per_batch => $3, trigger_interval => '0'
    ${4:+, track_history_columns => string_to_array('$4', ',')});
SQL
}

versions_sql() { # NAME [TRACKED]: with TRACKED, each version's number of states for _fields
    local kept="_fields"
    [ -z "${2:-}" ] || kept="jsonb_array_length(_states)"
    echo "COPY (SELECT id, (extract(epoch FROM _valid_from) * 1000)::bigint,
                       (extract(epoch FROM _valid_to) * 1000)::bigint, _deleted, _is_current, a, b, c,
                       $kept
                  FROM e2e.$1 ORDER BY id, _valid_from) TO STDOUT"
}

# quarantined NAME: how many of the pipeline's messages are in quarantine
quarantined() {
    sql -c "SELECT count(*) FROM kafka_sink.quarantine q JOIN kafka_sink.pipeline_definitions p
             ON p.id = q.pipeline_id WHERE p.name = '$1'"
}

# the point-in-time read of docs/history.md, for every key at each time
pit_sql() { # NAME TIMES_FILE
    echo "CREATE TEMP TABLE pit_times (ms bigint);"
    echo "COPY pit_times FROM STDIN;"
    cat "$2"
    echo '\.'
    echo "COPY (SELECT p.ms, h.id, h.a, h.b, h.c
                  FROM pit_times p
                  CROSS JOIN (SELECT DISTINCT id FROM e2e.$1) k
                  CROSS JOIN LATERAL (SELECT t.id, t.a, t.b, t.c FROM e2e.$1 t
                        WHERE t.id = k.id
                          AND t._valid_from <= 'epoch'::timestamptz + p.ms * interval '1 millisecond'
                          AND (t._valid_to IS NULL
                               OR 'epoch'::timestamptz + p.ms * interval '1 millisecond' < t._valid_to)
                          AND NOT t._deleted) h
                 ORDER BY p.ms, h.id) TO STDOUT;"
}

for s in $(seq 1 "$SEEDS"); do
    seed=$((RANDOM * 32768 + RANDOM))
    [ -z "${KS_HISTORY_SEED:-}" ] || seed=$((KS_HISTORY_SEED + s - 1))
    topic="hist_${SFX}_$s"
    python3 "$E2E_DIR/history_model.py" gen "$seed" "$(date +%s%3N)" "$W/msgs.$s"
    n="$(wc -l < "$W/msgs.$s")"
    "$HARNESS" topic-create "$topic" 1 >/dev/null 2>&1 || true
    kcat -P -b "$KS_BOOTSTRAP" -t "$topic" -p 0 -K $'\t' -Z < "$W/msgs.$s"
    kcat -C -b "$KS_BOOTSTRAP" -t "$topic" -p 0 -o beginning -e -q -f '%o\t%T\n' > "$W/ts.$s"
    python3 "$E2E_DIR/history_model.py" expect "$W/msgs.$s" "$W/ts.$s" "$W/expected.$s" "$W/pit.$s" "$seed"
    # track_history_columns: one of three tracked sets
    tracked_sets=("a" "b,c" "a,c")
    tr="${tracked_sets[$((seed % 3))]}"
    python3 "$E2E_DIR/history_model.py" expect "$W/msgs.$s" "$W/ts.$s" "$W/expected_t.$s" "$W/pit_t.$s" "$seed" "$tr"
    check "seed $seed: tracking $tr, some of the model's versions hold several states (the test can fail)" "t" \
          "$(awk -F'\t' '$9 > 1 { f = 1 } END { print (f ? "t" : "f") }' "$W/expected_t.$s")"
    cut -f1 "$W/pit.$s" | sort -un > "$W/times.$s"
    cut -f1 "$W/pit_t.$s" | sort -un > "$W/times_t.$s"
    r1=$((RANDOM % 6 + 2))
    r2=$((RANDOM % 20 + 2))
    r3=$((RANDOM % 10 + 2))
    names=("h${SFX}_${s}_one" "h${SFX}_${s}_each" "h${SFX}_${s}_ra$r1" "h${SFX}_${s}_rb$r2" "h${SFX}_${s}_kill"
           "h${SFX}_${s}_tone" "h${SFX}_${s}_teach" "h${SFX}_${s}_tr$r3")
    maxes=(100000 1 "$r1" "$r2" 3 100000 1 "$r3")
    tracks=("" "" "" "" "" "$tr" "$tr" "$tr")
    for i in "${!names[@]}"; do
        table_sql "${names[$i]}" "${tracks[$i]}" | sql
        pipeline_sql "${names[$i]}" "$topic" "${maxes[$i]}" "${tracks[$i]}" | sql > /dev/null
    done
    # kill -9 the last one's worker three times while it applies
    kill_worker_times "${names[4]}" 3
    for i in "${!names[@]}"; do
        name="${names[$i]}"
        if ! poll "$(done_sql "$name" "$n")" 300; then
            check "seed $seed: $name (max_offsets_per_batch ${maxes[$i]}) consumed the topic" "t" "f"
            continue
        fi
        batches="$(sql -c "SELECT count(*) FROM kafka_sink.batches b JOIN kafka_sink.pipeline_definitions p
                            ON p.id = b.pipeline_id WHERE p.name = '$name' AND b.messages > 0")"
        sql -c "$(versions_sql "$name" "${tracks[$i]}")" > "$W/actual.$s.$i"
        exp="$W/expected.$s" pit="$W/pit.$s" times="$W/times.$s" what=""
        if [ -n "${tracks[$i]}" ]; then
            exp="$W/expected_t.$s" pit="$W/pit_t.$s" times="$W/times_t.$s" what=" tracking ${tracks[$i]}"
        fi
        if diff -u "$exp" "$W/actual.$s.$i" > "$W/diff.$s.$i"; then
            check "seed $seed: $name$what ($n messages in $batches batches) equals the model version by version" "same" "same"
        else
            check "seed $seed: $name$what ($n messages in $batches batches) equals the model version by version" "same" "differs"
            head -40 "$W/diff.$s.$i"
        fi
        pit_sql "$name" "$times" | sql > "$W/pit_actual.$s.$i"
        if diff -u "$pit" "$W/pit_actual.$s.$i" > "$W/pitdiff.$s.$i"; then
            check "seed $seed: $name point-in-time reads at $(wc -l < "$times") times equal the model" "same" "same"
        else
            check "seed $seed: $name point-in-time reads equal the model" "same" "differs"
            head -20 "$W/pitdiff.$s.$i"
        fi
        check "seed $seed: $name quarantined nothing" 0 "$(quarantined "$name")"
        if [ "$i" = 1 ] || [ "$i" = 6 ]; then
            check "seed $seed: $name applied one message per batch" "$n" "$batches"
        fi
    done
    for name in "${names[@]}"; do
        sql -c "SET ROLE ks_e2e; SELECT kafka_sink.drop_pipeline('$name')" > /dev/null
    done
done

# the point-in-time read is served by the unique index on (id, _valid_from)
check "the point-in-time read uses the (key, _valid_from) index" "t" \
      "$(sql -c "SET enable_seqscan = off; SET enable_bitmapscan = off;
                 EXPLAIN (COSTS OFF) SELECT * FROM e2e.h${SFX}_1_one
                  WHERE id = 1 AND _valid_from <= now() AND (_valid_to IS NULL OR now() < _valid_to)
                    AND NOT _deleted" | grep -q 'Index Scan using h'"${SFX}"'_1_one_pkey' && echo t || echo f)"

# change events into a history table: versions by source position, a late
# update between two, a re-sent range, a delete and a new life after it
CT="hist_cdc_$SFX"
"$HARNESS" topic-create "$CT" 1 >/dev/null 2>&1 || true
sql >/dev/null <<SQL
SET ROLE ks_e2e;
CREATE TABLE e2e.hcdc_$SFX (id int NOT NULL, name text, qty int, _kafka_source_position numeric NOT NULL,
                            _valid_from numeric NOT NULL, _valid_to numeric, _deleted boolean NOT NULL,
                            _is_current boolean, _kafka_offset bigint, PRIMARY KEY (id, _valid_from));
SELECT kafka_sink.create_pipeline(name => 'hcdc_$SFX', bootstrap_servers => '$KS_BOOTSTRAP',
       subscribe => ARRAY['$CT'], target => 'e2e.hcdc_$SFX', starting_offsets => 'earliest',
       envelope => 'debezium', mode => 'history', on_truncate => 'ignore');
SQL
cev() { cdc_event "$1" "$2" "lsn=${3:-0}" ${4+--name "$4"} --extra '{"qty": 5}' --before-extra '{"qty": 0}'; }
hrows() { sql -c "SELECT string_agg(id || ':' || _valid_from || '-' || coalesce(_valid_to::text, '') || ':'
                         || coalesce(name, '~') || CASE WHEN _deleted THEN ':deleted' ELSE '' END
                         || CASE WHEN _is_current THEN ':current' ELSE '' END, ' ' ORDER BY id, _valid_from)
                    FROM e2e.hcdc_$SFX"; }
{ cev c 1 100 a; cev u 1 120 a2; cev c 2 110 b; cev d 2 130; cev tomb 2; } | produce_batch "$CT"
check_caught_up "hcdc_$SFX"
check "change events: versions by position, a delete ends its key's version" \
      "1:100-120:a 1:120-:a2:current 2:110-130:b 2:130-:b:deleted" "$(hrows)"
{ cev c 1 100 a; cev u 1 115 late; cev c 2 140 b2; cev d 2 130; cev tomb 2; cev t 0 150; } | produce_batch "$CT"
check_caught_up "hcdc_$SFX"
check "a late update lands between its neighbours; re-sent events change nothing; a new life after the delete" \
      "1:100-115:a 1:115-120:late 1:120-:a2:current 2:110-130:b 2:130-140:b:deleted 2:140-:b2:current" "$(hrows)"
check "change events: nothing quarantined" 0 "$(quarantined "hcdc_$SFX")"

# routed change events with create_targets: the history tables are made
# with their version columns and the unique index on (key, _valid_from),
# and equal the model table by table, for two batch splits; the events
# include truncates (on_truncate apply), late and re-sent ones too
RT="hist_routed_$SFX"
# _valid_from_at and _valid_to_at as the model prints them: epoch microseconds
AT_COLS="(extract(epoch FROM _valid_from_at) * 1000000)::bigint, (extract(epoch FROM _valid_to_at) * 1000000)::bigint"
"$HARNESS" topic-create "$RT" 1 >/dev/null 2>&1 || true
rseed=$((RANDOM * 32768 + RANDOM))
python3 "$E2E_DIR/history_model.py" cdc "$rseed" "$W/routed.msgs" "$W/routed.expected" "$W/routed.untruncated" \
        "$W/routed.t1_tracked"
check "seed $rseed: the change events' truncates change the model's tables (the test can fail)" "t" \
      "$(cmp -s "$W/routed.expected" "$W/routed.untruncated" && echo f || echo t)"
kcat -P -b "$KS_BOOTSTRAP" -t "$RT" -p 0 -K $'\t' -Z < "$W/routed.msgs"
rn="$(wc -l < "$W/routed.msgs")"
rmax=$((RANDOM % 12 + 2))
for split in 100000 "$rmax"; do
    rs="hr${split}_$SFX"
    sql >/dev/null <<SQL
CREATE SCHEMA $rs AUTHORIZATION ks_e2e;
SET ROLE ks_e2e;
SELECT kafka_sink.create_pipeline(name => '$rs', bootstrap_servers => '$KS_BOOTSTRAP',
       subscribe => ARRAY['$RT'], target => '$rs.{source.table}', create_targets => true,
       envelope => 'debezium', mode => 'history', on_truncate => 'apply', bronze => '$rs.raw',
       starting_offsets => 'earliest', max_offsets_per_batch => $split, trigger_interval => '0');
SQL
    if ! poll "$(done_sql "$rs" "$rn")" 300; then
        check "seed $rseed: routed history pipeline $rs consumed the topic" "t" "f"
        continue
    fi
    check "routed history ($rs): create_targets made the tables with the version columns and the unique index" \
          "id integer,a text,b text,c integer,_kafka_source_position numeric,_valid_from numeric,_valid_to numeric,_deleted boolean,_is_current boolean,_valid_from_at timestamp with time zone,_valid_to_at timestamp with time zone|PRIMARY KEY (id, _valid_from)" \
          "$(sql -c "SELECT string_agg(attname || ' ' || format_type(atttypid, atttypmod), ',' ORDER BY attnum)
                            || '|' || (SELECT pg_get_constraintdef(k.oid) FROM pg_constraint k
                                        WHERE k.conrelid = '$rs.t1'::regclass AND k.contype = 'p')
                       FROM pg_attribute WHERE attrelid = '$rs.t1'::regclass AND attnum > 0 AND NOT attisdropped")"
    sql -c "COPY (SELECT 't1', id, _valid_from, _valid_to, _deleted, _is_current, a, b, c, $AT_COLS FROM $rs.t1
                  UNION ALL SELECT 't2', id, _valid_from, _valid_to, _deleted, _is_current, a, b, c, $AT_COLS FROM $rs.t2
                  ORDER BY 1, 2, 3) TO STDOUT" > "$W/routed.actual.$split"
    check_model "seed $rseed: routed history tables ($rn messages, max_offsets_per_batch $split) equal the model version by version" \
                "$W/routed.expected" "$W/routed.actual.$split"
    check "routed history ($rs): nothing quarantined" 0 "$(quarantined "$rs")"
    check "routed history ($rs): message_fate names the routed table" "folded into history|$rs.$(head -1 "$W/routed.msgs" | grep -o '"table": "t[12]"' | grep -o 't[12]')" \
          "$(sql -c "SELECT fate || '|' || target FROM kafka_sink.message_fate('$rs', '$RT', 0, 0)")"
    sql -c "SET ROLE ks_e2e; SELECT kafka_sink.drop_pipeline('$rs')" > /dev/null
done

# table t1's change events alone (their tombstones, skipped anyway, left
# out) into one history table with track_history_columns b, truncates
# included, one message per batch: the model's versions made of its states
T1="hist_t1_$SFX"
"$HARNESS" topic-create "$T1" 1 >/dev/null 2>&1 || true
grep '"table": "t1"' "$W/routed.msgs" | kcat -P -b "$KS_BOOTSTRAP" -t "$T1" -p 0 -K $'\t' -Z
t1n="$(grep -c '"table": "t1"' "$W/routed.msgs")"
sql >/dev/null <<SQL
SET ROLE ks_e2e;
CREATE TABLE e2e.ht1_$SFX (id int NOT NULL, a text, b text, c int, _kafka_source_position numeric NOT NULL,
                           _valid_from numeric NOT NULL, _valid_to numeric, _deleted boolean NOT NULL,
                           _is_current boolean, _states jsonb, _valid_from_at timestamptz, _valid_to_at timestamptz,
                           PRIMARY KEY (id, _valid_from));
SELECT kafka_sink.create_pipeline(name => 'ht1_$SFX', bootstrap_servers => '$KS_BOOTSTRAP',
       subscribe => ARRAY['$T1'], target => 'e2e.ht1_$SFX', envelope => 'debezium', mode => 'history',
       track_history_columns => ARRAY['b'], starting_offsets => 'earliest', max_offsets_per_batch => 1,
       trigger_interval => '0');
SQL
if poll "$(done_sql "ht1_$SFX" "$t1n")" 300; then
    sql -c "COPY (SELECT id, _valid_from, _valid_to, _deleted, _is_current, a, b, c, jsonb_array_length(_states), $AT_COLS
                    FROM e2e.ht1_$SFX ORDER BY id, _valid_from) TO STDOUT" > "$W/t1.actual"
    check_model "seed $rseed: change events of t1 with truncates, tracking b, one per batch, equal the model version by version" \
                "$W/routed.t1_tracked" "$W/t1.actual"
    check "ht1_$SFX: nothing quarantined" 0 "$(quarantined "ht1_$SFX")"
else
    check "seed $rseed: ht1_$SFX consumed the topic" "t" "f"
fi
sql -c "SET ROLE ks_e2e; SELECT kafka_sink.drop_pipeline('ht1_$SFX')" > /dev/null

# quarantine and replay: a version the target refuses is quarantined, the
# rest applied; after the fix the replay folds it in where it belongs
QT="hist_q_$SFX"
"$HARNESS" topic-create "$QT" 1 >/dev/null 2>&1 || true
sql >/dev/null <<SQL
SET ROLE ks_e2e;
CREATE TABLE e2e.hq_$SFX (id bigint NOT NULL, ts timestamptz NOT NULL, a text, b text,
                          _valid_from timestamptz NOT NULL, _valid_to timestamptz, _deleted boolean NOT NULL,
                          _fields text[],
                          _kafka_topic text, _kafka_partition int, _kafka_offset bigint,
                          PRIMARY KEY (id, _valid_from), CONSTRAINT no_bad CHECK (a IS DISTINCT FROM 'bad'));
SELECT kafka_sink.create_pipeline(name => 'hq_$SFX', bootstrap_servers => '$KS_BOOTSTRAP',
       subscribe => ARRAY['$QT'], target => 'e2e.hq_$SFX', mode => 'history', order_column => 'ts',
       key_format => 'string', starting_offsets => 'earliest');
SQL
qrows() { sql -c "SELECT string_agg(id || '@' || to_char(_valid_from AT TIME ZONE 'UTC', 'HH24') || ':' || coalesce(a, '~')
                         || '/' || coalesce(b, '~'), ' ' ORDER BY id, _valid_from) FROM e2e.hq_$SFX"; }
{
    echo '1|{"id": 1, "ts": "2026-01-01T10:00:00Z", "a": "x", "b": "p"}'
    echo '1|{"id": 1, "ts": "2026-01-01T12:00:00Z", "b": "q"}'
    echo '1|{"id": 1, "ts": "2026-01-01T11:00:00Z", "a": "bad"}'
    echo '2|{"id": 2, "ts": "2026-01-01T10:00:00Z", "a": "y"}'
    echo '2|{"id": 2, "ts": "not a time"}'
} | produce_batch "$QT"
check_caught_up "hq_$SFX"
check "a refused version is quarantined, the rest applied" "1@10:x/p 1@12:x/q 2@10:y/~" "$(qrows)"
check "quarantined with their reasons" "2:constraint_violation 4:invalid_value" \
      "$(sql -c "SELECT string_agg(q.message_offset || ':' || q.reason, ' ' ORDER BY q.message_offset)
                   FROM kafka_sink.quarantine q JOIN kafka_sink.pipeline_definitions p ON p.id = q.pipeline_id
                  WHERE p.name = 'hq_$SFX'")"
check "message_fate: a message that wrote a version" "applied as a version" \
      "$(sql -c "SELECT fate FROM kafka_sink.message_fate('hq_$SFX', '$QT', 0, 3)")"
check "message_fate: a quarantined one" "quarantined" \
      "$(sql -c "SELECT fate FROM kafka_sink.message_fate('hq_$SFX', '$QT', 0, 2)")"
sql -c "ALTER TABLE e2e.hq_$SFX DROP CONSTRAINT no_bad" >/dev/null
check "replay after the fix" "1/0" \
      "$(sql -c "SET ROLE ks_e2e" -c "SELECT replayed || '/' || still_failing FROM kafka_sink.replay_quarantine('hq_$SFX', reason => 'constraint_violation')")"
check "the replayed event lands between its neighbours, the later version folds it" \
      "1@10:x/p 1@11:bad/p 1@12:bad/q 2@10:y/~" "$(qrows)"
check "message_fate: the partial message whose version the replay changed" "applied as a version" \
      "$(sql -c "SELECT fate FROM kafka_sink.message_fate('hq_$SFX', '$QT', 0, 1)")"
echo '1|{"id": 1, "ts": "2026-01-01T10:00:00Z", "a": "x", "b": "p"}' | produce_batch "$QT"
check_caught_up "hq_$SFX"
check "a re-sent copy changes nothing" "1@10:x/p 1@11:bad/p 1@12:bad/q 2@10:y/~" "$(qrows)"
check "message_fate: the re-sent copy" "folded into history" \
      "$(sql -c "SELECT fate FROM kafka_sink.message_fate('hq_$SFX', '$QT', 0, 5)")"
check "message_fates gives message_fate's answer for each message" \
      "6 messages: applied as a version 3, folded into history 1, applied as a version 1 (replayed), quarantined 1" \
      "$(sql -c "SELECT count(*) || ' messages: applied as a version ' || count(*) FILTER (WHERE f.fate = 'applied as a version' AND f.\"offset\" <> 2)
                        || ', folded into history ' || count(*) FILTER (WHERE f.fate = 'folded into history')
                        || ', applied as a version ' || count(*) FILTER (WHERE f.fate = 'applied as a version' AND f.\"offset\" = 2)
                        || ' (replayed), quarantined ' || count(*) FILTER (WHERE f.fate = 'quarantined')
                   FROM kafka_sink.message_fates('hq_$SFX') f")"
for name in "hcdc_$SFX" "hq_$SFX"; do
    sql -c "SET ROLE ks_e2e; SELECT kafka_sink.drop_pipeline('$name')" > /dev/null
done

# create-time refusals: the table's shape, with their errcodes
refusal() { # DESCRIPTION EXPECTED_SQLSTATE TABLE_DDL [OPTIONS]
    local got
    got="$(sql 2>&1 <<SQL || true
SET ROLE ks_e2e;
DROP TABLE IF EXISTS e2e.hbad_$SFX;
$3;
\set VERBOSITY verbose
SELECT kafka_sink.create_pipeline(name => 'hbad_$SFX', bootstrap_servers => '$KS_BOOTSTRAP',
    subscribe => ARRAY['x'], target => 'e2e.hbad_$SFX', mode => 'history', start => false
    ${4:-, order_column => 'ts'});
SQL
)"
    check "refused: $1" "$2" "$(echo "$got" | grep -o 'ERROR:  [0-9A-Z]\{5\}' | head -1 | cut -c9-)"
}
refusal "no order column" 22023 \
    "CREATE TABLE e2e.hbad_$SFX (id int, ts timestamptz, _valid_from timestamptz, _valid_to timestamptz, _deleted boolean, PRIMARY KEY (id, _valid_from))" \
    ", key_columns => ARRAY['id']"
refusal "no _valid_to" 42P16 \
    "CREATE TABLE e2e.hbad_$SFX (id int, ts timestamptz, _valid_from timestamptz, _deleted boolean, PRIMARY KEY (id, _valid_from))"
refusal "_valid_from of another type than the order column" 42P16 \
    "CREATE TABLE e2e.hbad_$SFX (id int, ts timestamptz, _valid_from bigint, _valid_to timestamptz, _deleted boolean, PRIMARY KEY (id, _valid_from))"
refusal "no _deleted" 42P16 \
    "CREATE TABLE e2e.hbad_$SFX (id int, ts timestamptz, _valid_from timestamptz, _valid_to timestamptz, PRIMARY KEY (id, _valid_from))"
refusal "no unique index on (key, _valid_from)" 42P16 \
    "CREATE TABLE e2e.hbad_$SFX (id int, ts timestamptz, _valid_from timestamptz, _valid_to timestamptz, _deleted boolean)" \
    ", order_column => 'ts', key_columns => ARRAY['id']"
refusal "a primary key on the key alone" 42P16 \
    "CREATE TABLE e2e.hbad_$SFX (id int PRIMARY KEY, ts timestamptz, _valid_from timestamptz, _valid_to timestamptz, _deleted boolean)"
refusal "_is_current not boolean" 42P16 \
    "CREATE TABLE e2e.hbad_$SFX (id int, ts timestamptz, _valid_from timestamptz, _valid_to timestamptz, _deleted boolean, _is_current int, PRIMARY KEY (id, _valid_from))"
refusal "routing plain messages" 0A000 \
    "CREATE TABLE e2e.hbad_$SFX (id int, ts timestamptz, _valid_from timestamptz, _valid_to timestamptz, _deleted boolean, PRIMARY KEY (id, _valid_from))" \
    ", order_column => 'ts', targets => '{\"x\": \"e2e.hbad_$SFX\"}'"
TT="id int, ts timestamptz, a text, _valid_from timestamptz, _valid_to timestamptz, _deleted boolean"
refusal "track_history_columns without _states" 42P16 \
    "CREATE TABLE e2e.hbad_$SFX ($TT, PRIMARY KEY (id, _valid_from))" \
    ", order_column => 'ts', track_history_columns => ARRAY['a']"
refusal "track_history_columns with _fields" 42P16 \
    "CREATE TABLE e2e.hbad_$SFX ($TT, _states jsonb, _fields text[], PRIMARY KEY (id, _valid_from))" \
    ", order_column => 'ts', track_history_columns => ARRAY['a']"
refusal "track_history_columns naming the key" 22023 \
    "CREATE TABLE e2e.hbad_$SFX ($TT, _states jsonb, PRIMARY KEY (id, _valid_from))" \
    ", order_column => 'ts', track_history_columns => ARRAY['id']"
refusal "track_history_columns naming no column" 22023 \
    "CREATE TABLE e2e.hbad_$SFX ($TT, _states jsonb, PRIMARY KEY (id, _valid_from))" \
    ", order_column => 'ts', track_history_columns => ARRAY['nope']"
refusal "track_history_columns empty" 22023 \
    "CREATE TABLE e2e.hbad_$SFX ($TT, _states jsonb, PRIMARY KEY (id, _valid_from))" \
    ", order_column => 'ts', track_history_columns => '{}'"
# the commit-time columns (docs/history.md, "Reading by time"): change events only, timestamptz, _valid_to_at with _valid_from_at
refusal "_valid_from_at on plain messages (only change events carry a commit time)" 42P16 \
    "CREATE TABLE e2e.hbad_$SFX ($TT, _valid_from_at timestamptz, PRIMARY KEY (id, _valid_from))"
CT_="id int, name text, _kafka_source_position numeric NOT NULL, _valid_from numeric, _valid_to numeric, _deleted boolean"
refusal "_valid_from_at not timestamptz" 42P16 \
    "CREATE TABLE e2e.hbad_$SFX ($CT_, _valid_from_at timestamp, _valid_to_at timestamptz, PRIMARY KEY (id, _valid_from))" \
    ", envelope => 'debezium'"
refusal "_valid_to_at without _valid_from_at" 42P16 \
    "CREATE TABLE e2e.hbad_$SFX ($CT_, _valid_to_at timestamptz, PRIMARY KEY (id, _valid_from))" \
    ", envelope => 'debezium'"
check "accepted: a change-event history table with both commit-time columns" 1 \
      "$(sql 2>&1 <<SQL | tail -1
SET ROLE ks_e2e;
DROP TABLE IF EXISTS e2e.hbad_$SFX;
CREATE TABLE e2e.hbad_$SFX ($CT_, _valid_from_at timestamptz, _valid_to_at timestamptz, PRIMARY KEY (id, _valid_from));
SELECT kafka_sink.create_pipeline(name => 'hbad_$SFX', bootstrap_servers => '$KS_BOOTSTRAP',
    subscribe => ARRAY['x'], target => 'e2e.hbad_$SFX', mode => 'history', start => false, envelope => 'debezium') > 0;
SELECT kafka_sink.drop_pipeline('hbad_$SFX');
SELECT 1;
SQL
)"
sql -c "DROP TABLE IF EXISTS e2e.hbad_$SFX" >/dev/null
finish
