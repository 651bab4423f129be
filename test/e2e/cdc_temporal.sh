#!/usr/bin/env bash
# cdc_temporal: a temporal replica (issue 26). First the truncate rule of
# mode history on hand-made change events over two partitions (the
# expected versions written out by hand from docs/history.md), then
# against cdc_temporal_model.py over random seeds (KS_TEMPORAL_SEEDS="N
# ..." replays them): the table computed from the source's timeline,
# whatever the partitions, re-sending and batch sizes. Then a real
# PostgreSQL source ->
# Debezium (Kafka Connect) -> Kafka -> three kafka_sink pipelines in mode
# history (envelope debezium), one per source table (integer, text and
# composite keys: test/tools/cdc_workload.py), each into a history table:
# the source's columns, the source position (_kafka_source_position) and
# the version columns _valid_from, _valid_to (numeric, positions),
# _deleted and _is_current.
#  - rounds of inserts, updates, deletes, primary-key changes and truncates
#    (of products mid-round, of order_lines alone in a round of its own);
#    after each round, in one repeatable-read transaction of the source,
#    the source's full state is copied into snap_N.* and its WAL position
#    (pg_current_wal_lsn(), above every change of the round and below every
#    later one) recorded as point N;
#  - mid-run: a clean Connect restart (offsets flushed), then a SIGKILL of
#    one pipeline's worker while it applies, then a SIGKILL of Connect with
#    no offset flush since (DBZ_FLUSH_MS=600000): it re-sends two rounds,
#    truncates included;
#  - at the end, for every point N and every table, the point-in-time read
#    of docs/history.md (`_valid_from <= P AND (_valid_to IS NULL OR P <
#    _valid_to) AND NOT _deleted`) equals snap_N (test/tools/cdc_compare.py,
#    type-aware, by primary key); the current versions (`_is_current`) equal
#    the source; nothing is quarantined; the re-sending really happened and
#    consecutive points differ (the comparisons are not vacuous).
# Knobs: CDC_OPS (40 operations per round), CDC_BREAK=1 (moves one
# version's _valid_to before the last comparisons: the script must then
# fail; a check of the checks). About 80 s here.
. "$(dirname "$0")/../lib/common.sh"
TOOLS="$REPO/test/tools"
SRC="$TOOLS/debezium_source.sh"
OPS="${CDC_OPS:-40}"
export DBZ_DIR="$KS_RUN/cdc_temporal_$SFX"
export DBZ_FLUSH_MS=600000 DBZ_CONVERTER=json DBZ_NAME="dbz_tmp_$SFX" DBZ_TOPIC_PREFIX="dbz_tmp_$SFX" DBZ_DB=src_temporal
W="$DBZ_DIR/work"
mkdir -p "$W"
E="$W/expect.json"
rm -f "$E"
HS="hist_$SFX"                      # the history tables' schema
TABLES="accounts products order_lines"
t_start=$SECONDS

cleanup() {
    local t
    for t in $TABLES; do
        sql -c "SELECT kafka_sink.drop_pipeline(name => 'tmp_${t}_$SFX', if_exists => true)" >/dev/null 2>&1
    done
    "$SRC" clean >/dev/null 2>&1
}
at_exit cleanup
setup_owner

wl() { python3 "$TOOLS/cdc_workload.py" --conninfo "$DBZ_SRC_CONNINFO" "$@"; }
src() { psql -X -A -t -q -v ON_ERROR_STOP=1 -d "$DBZ_SRC_CONNINFO" "$@"; }
. "$KS_LIB_DIR/cdc_topics.sh"   # expected_total, topics_total, topics_at_least, applied
quarantined() {
    sql -c "SELECT count(*) FROM kafka_sink.quarantine q JOIN kafka_sink.pipeline_definitions p
              ON p.id = q.pipeline_id WHERE p.name LIKE 'tmp\\_%\\_$SFX'" 2>/dev/null || echo '?'
}
# caught_up: the topics hold what the workloads caused and every pipeline
# has applied its topic's end
caught_up() {
    local n t
    n="$(expected_total "$E")"
    wait_for 90 topics_at_least "$n" || { echo "# the topics hold $(topics_total) messages, expected $n"; return 1; }
    sleep 1   # a straggler of the same transaction
    for t in $TABLES; do
        [ "$(sql -c "SELECT kafka_sink.wait('tmp_${t}_$SFX', '90 s')" 2>&1)" = t ] || { echo "# tmp_${t}_$SFX did not catch up"; return 1; }
    done
}

# point N: the source's state (snap_N.*, with the source's keys) and its
# WAL position, read in one snapshot with nothing else writing
NPOINTS=0
record_point() {
    local n=$NPOINTS t lsn
    lsn="$(src -c "BEGIN ISOLATION LEVEL REPEATABLE READ;
                   SELECT (pg_current_wal_lsn() - '0/0'::pg_lsn) || ' ' || (extract(epoch FROM clock_timestamp()) * 1000000)::bigint;
                   CREATE SCHEMA snap_$n;
                   $(for t in $TABLES; do echo "CREATE TABLE snap_$n.$t (LIKE cdc.$t INCLUDING ALL); INSERT INTO snap_$n.$t SELECT * FROM cdc.$t;"; done)
                   COMMIT;")"
    echo "${lsn%% *}" > "$W/point.$n"
    echo "${lsn#* }" > "$W/time.$n"
    echo "# point $n at position ${lsn%% *}, time ${lsn#* } (epoch µs): $(src -c "SELECT (SELECT count(*) FROM snap_$n.accounts) || ' accounts, '
              || (SELECT count(*) FROM snap_$n.products) || ' products, ' || (SELECT count(*) FROM snap_$n.order_lines) || ' order lines'")"
    NPOINTS=$((n + 1))
}

# the history tables: the source's columns without their constraints, the
# position, the version columns, the unique index on (key, _valid_from)
history_ddl() {
    src -c "
        SELECT format('CREATE TABLE %I.%I (%s, _kafka_source_position numeric NOT NULL, _valid_from numeric NOT NULL,'
                      ' _valid_to numeric, _deleted boolean NOT NULL, _is_current boolean,'
                      ' _valid_from_at timestamptz, _valid_to_at timestamptz, PRIMARY KEY (%s, _valid_from));',
                      '$HS', c.relname,
                      (SELECT string_agg(format('%I %s', a.attname, format_type(a.atttypid, a.atttypmod)), ', ' ORDER BY a.attnum)
                         FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped),
                      (SELECT string_agg(format('%I', a.attname), ', ' ORDER BY array_position(i.indkey::int2[], a.attnum))
                         FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY (i.indkey)
                        WHERE i.indrelid = c.oid AND i.indisprimary))
          FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
         WHERE n.nspname = 'cdc' AND c.relkind = 'r' ORDER BY c.relname"
}
source_columns() {  # source_columns TABLE: its column list
    src -c "SELECT string_agg(format('%I', attname), ', ' ORDER BY attnum) FROM pg_attribute
             WHERE attrelid = 'cdc.$1'::regclass AND attnum > 0 AND NOT attisdropped"
}
REPLICA="host=${PGHOST:-127.0.0.1} port=$PGPORT dbname=$PGDATABASE user=${PGUSER:-$(id -un)}"
compare() {  # compare SOURCE_SCHEMA REPLICA_TEMPLATE LABEL DESCRIPTION
    local rc=0
    python3 "$TOOLS/cdc_compare.py" --source "$DBZ_SRC_CONNINFO" --schema "$1" --replica "$REPLICA" \
        --target "$2" > "$W/compare.$3.out" 2>&1 || rc=$?
    sed 's/^/#   /' "$W/compare.$3.out"
    check "$4" 0 "$rc"
}

# ---- the truncate rule on hand-made change events (docs/history.md,
# "Truncates"), before the real source: a truncate at T ends the version
# in effect at T of every key, keys of later batches included, and only
# those; two partitions, so that an older event can arrive after it
HT="tmp_hand_$SFX"
"$HARNESS" topic-create "$HT" 2 >/dev/null 2>&1 || true
sql >/dev/null <<SQL
SET ROLE ks_e2e;
CREATE TABLE e2e.htr_$SFX (id int NOT NULL, name text, _kafka_source_position numeric NOT NULL,
                           _valid_from numeric NOT NULL, _valid_to numeric, _deleted boolean NOT NULL,
                           _is_current boolean, _kafka_offset bigint, PRIMARY KEY (id, _valid_from),
                           CONSTRAINT not_bad CHECK (name IS DISTINCT FROM 'bad'));
SELECT kafka_sink.create_pipeline(name => 'htr_$SFX', bootstrap_servers => '$KS_BOOTSTRAP',
       subscribe => ARRAY['$HT'], target => 'e2e.htr_$SFX', starting_offsets => 'earliest',
       envelope => 'debezium', mode => 'history');
SQL
cev() { cdc_event "$1" "$2" "lsn=${3:-0}" ${4+--name "$4"}; }
# hrows: each version as key:from-to:name[:deleted][:current]
hrows() { sql -c "SELECT string_agg(id || ':' || _valid_from || '-' || coalesce(_valid_to::text, '') || ':'
                         || coalesce(name, '~') || CASE WHEN _deleted THEN ':deleted' ELSE '' END
                         || CASE WHEN _is_current THEN ':current' ELSE '' END, ' ' ORDER BY id, _valid_from)
                    FROM e2e.htr_$SFX"; }
{ cev c 1 100 a; cev c 2 110 b; cev d 2 120; cev tomb 2; cev c 3 130 c; cev t 0 150; cev c 4 160 d; cev u 1 170 a2; } \
    | produce "$HT" -p 0 -Z
check_caught_up "htr_$SFX"
V1="1:100-150:a 1:150-170:a:deleted 1:170-:a2:current 2:110-120:b 2:120-:b:deleted 3:130-150:c 3:150-:c:deleted 4:160-:d:current"
check "a truncate ends every version in effect at its position, in its batch; a key deleted before it gets no second delete" \
      "$V1" "$(hrows)"
{ cev c 1 100 a; cev c 2 110 b; cev d 2 120; cev tomb 2; cev c 3 130 c; cev t 0 150; cev c 4 160 d; cev u 1 170 a2; } \
    | produce "$HT" -p 0 -Z
check_caught_up "htr_$SFX"
check "the whole range re-sent, truncate included, changes nothing" "$V1" "$(hrows)"
# from the other partition, later: a key created before the truncate (it
# was not in the table when the truncate was applied) and one after it
{ cev c 5 140 e; cev u 4 180 d2; } | produce "$HT" -p 1 -Z
check_caught_up "htr_$SFX"
check "an older event of a new key arriving after the truncate is ended by it" \
      "1:100-150:a 1:150-170:a:deleted 1:170-:a2:current 2:110-120:b 2:120-:b:deleted 3:130-150:c 3:150-:c:deleted 4:160-180:d 4:180-:d2:current 5:140-150:e 5:150-:e:deleted" \
      "$(hrows)"
# a second truncate; a batch bisected by a bad row: the truncate and an
# older event of a new key in different halves
{ cev t 0 200; } | produce "$HT" -p 0 -Z
check_caught_up "htr_$SFX"
{ cev t 0 300; cev c 7 260 bad; cev c 8 250 x; cev c 9 310 y; } | produce "$HT" -p 0 -Z
check_caught_up "htr_$SFX"
check "a second truncate ends only the live keys; the older event of a bisected batch is ended by the truncate of the other half" \
      "1:100-150:a 1:150-170:a:deleted 1:170-200:a2 1:200-:a2:deleted 2:110-120:b 2:120-:b:deleted 3:130-150:c 3:150-:c:deleted 4:160-180:d 4:180-200:d2 4:200-:d2:deleted 5:140-150:e 5:150-:e:deleted 8:250-300:x 8:300-:x:deleted 9:310-:y:current" \
      "$(hrows)"
echo "# key 8's delete at 300 names $(sql -c "SELECT coalesce(_kafka_offset::text, 'no message (its truncate was in another statement: bisected)')
                                          FROM e2e.htr_$SFX WHERE id = 8 AND _valid_from = 300")"
check "the bad row quarantined, nothing else" "constraint_violation" \
      "$(sql -c "SELECT string_agg(q.reason, ' ') FROM kafka_sink.quarantine q JOIN kafka_sink.pipeline_definitions p
                  ON p.id = q.pipeline_id WHERE p.name = 'htr_$SFX'")"
check "point in time: the keys live at 145, 165, 175, 205, 255, 315" "1,3,5 4 1,4 - 8 9" \
      "$(for t in 145 165 175 205 255 315; do sql -c "SELECT coalesce(string_agg(id::text, ',' ORDER BY id), '-') FROM e2e.htr_$SFX
              WHERE _valid_from <= $t AND (_valid_to IS NULL OR $t < _valid_to) AND NOT _deleted"; done | tr '\n' ' ' | sed 's/ $//')"
sql -c "SET ROLE ks_e2e; SELECT kafka_sink.drop_pipeline('htr_$SFX')" >/dev/null

# ---- the same rule against cdc_temporal_model.py (the table computed from
# the source's timeline, independently of the extension) over random seeds:
# creates, updates, deletes, key changes and truncates over two partitions
# (a truncate in either), re-sent ranges, partition 0 applied before
# partition 1 arrives; one batch, one message per batch, four per batch
SEEDS="${KS_TEMPORAL_SEEDS:-$RANDOM $RANDOM $RANDOM}"
for seed in $SEEDS; do
    MT="tmp_model_${seed}_$SFX"
    "$HARNESS" topic-create "$MT" 2 >/dev/null 2>&1 || true
    mkdir -p "$W/model.$seed"
    echo "# seed $seed (KS_TEMPORAL_SEEDS=$seed replays it): $(python3 "$(dirname "$0")/cdc_temporal_model.py" "$seed" "$W/model.$seed")"
    for per in 1000 1 4; do
        sql >/dev/null <<SQL
SET ROLE ks_e2e;
CREATE TABLE e2e.hm_${seed}_${per}_$SFX (id int NOT NULL, name text, _kafka_source_position numeric NOT NULL,
                           _valid_from numeric NOT NULL, _valid_to numeric, _deleted boolean NOT NULL,
                           _is_current boolean, _valid_from_at timestamptz, _valid_to_at timestamptz,
                           PRIMARY KEY (id, _valid_from));
SELECT kafka_sink.create_pipeline(name => 'hm_${seed}_${per}_$SFX', bootstrap_servers => '$KS_BOOTSTRAP',
       subscribe => ARRAY['$MT'], target => 'e2e.hm_${seed}_${per}_$SFX', starting_offsets => 'earliest',
       envelope => 'debezium', mode => 'history', max_offsets_per_batch => $per, trigger_interval => '20 ms');
SQL
    done
    for part in 0 1; do
        produce "$MT" -p "$part" -Z < "$W/model.$seed/p$part"
        for per in 1000 1 4; do
            [ "$(sql -c "SELECT kafka_sink.wait('hm_${seed}_${per}_$SFX', '90 s')")" = t ] \
                || echo "# hm_${seed}_${per}_$SFX did not catch up with partition $part"
        done
    done
    for per in 1000 1 4; do
        name="hm_${seed}_${per}_$SFX"
        sql -c "SELECT id || '|' || _valid_from || '|' || coalesce(_valid_to::text, '') || '|' || coalesce(name, '')
                       || '|' || _deleted || '|' || _is_current
                       || '|' || coalesce((extract(epoch FROM _valid_from_at) * 1000000)::bigint::text, '')
                       || '|' || coalesce((extract(epoch FROM _valid_to_at) * 1000000)::bigint::text, '')
                  FROM e2e.$name ORDER BY id, _valid_from" > "$W/model.$seed/got.$per"
        check "seed $seed, $per per batch: the history table equals the model version by version" "" \
              "$(diff "$W/model.$seed/expect" "$W/model.$seed/got.$per" | head -n 6 | tr '\n' ' ')"
        check "seed $seed, $per per batch: nothing quarantined" 0 \
              "$(sql -c "SELECT count(*) FROM kafka_sink.quarantine q JOIN kafka_sink.pipeline_definitions p
                          ON p.id = q.pipeline_id WHERE p.name = '$name'")"
        sql -c "SET ROLE ks_e2e; SELECT kafka_sink.drop_pipeline('$name')" >/dev/null
    done
done

# ---- the source, its first rows, Connect and its snapshot
"$SRC" start-source
eval "$("$SRC" env)"
wl --seed 61 --expect "$E" init --rows 12
# the rows each truncate removes, counted by the source itself (a schema
# Debezium does not capture)
src >/dev/null <<'SQL'
CREATE SCHEMA audit;
CREATE TABLE audit.truncated (tbl text, n bigint);
CREATE FUNCTION audit.count_rows() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE format('INSERT INTO audit.truncated SELECT %L, count(*) FROM %I.%I', TG_TABLE_NAME, TG_TABLE_SCHEMA, TG_TABLE_NAME);
    RETURN NULL;
END $$;
CREATE TRIGGER count_rows BEFORE TRUNCATE ON cdc.products FOR EACH STATEMENT EXECUTE FUNCTION audit.count_rows();
CREATE TRIGGER count_rows BEFORE TRUNCATE ON cdc.order_lines FOR EACH STATEMENT EXECUTE FUNCTION audit.count_rows();
SQL
sql -c "CREATE SCHEMA $HS AUTHORIZATION ks_e2e"
history_ddl | as_role ks_e2e >/dev/null
t0=$SECONDS
"$SRC" start
echo "# Connect started and the snapshot taken in $((SECONDS - t0)) s"
record_point                          # 0: the snapshot (its rows' position is the slot's, below this one)
for t in $TABLES; do
    as_role ks_e2e -c "SELECT kafka_sink.create_pipeline(
        name => 'tmp_${t}_$SFX', bootstrap_servers => '$KS_BOOTSTRAP',
        subscribe => ARRAY['$DBZ_TOPIC_PREFIX.cdc.$t'], target => '$HS.$t', mode => 'history',
        envelope => 'debezium', on_truncate => 'apply', starting_offsets => 'earliest',
        trigger_interval => '50 ms', max_offsets_per_batch => 9)" >/dev/null \
        || check "create_pipeline(mode => 'history', envelope => 'debezium', on_truncate => 'apply') for $t" ok failed
done

# ---- round 1: every kind of change but truncates
wl --seed 62 --expect "$E" run --ops "$OPS" --no-truncate
record_point                          # 1
check "round 1 applied" t "$(caught_up && echo t || echo f)"

# ---- round 2: after a clean Connect restart; products truncated two
# thirds through; the order_lines worker killed while it applies
"$SRC" restart-connect
before="$(applied "tmp_order_lines_$SFX")"
wl --seed 63 --expect "$E" run --ops "$OPS" --truncate products
record_point                          # 2
pid="$(worker_pid "tmp_order_lines_$SFX")"
wait_for 60 applied_above "tmp_order_lines_$SFX" "$before" || true
echo "# SIGKILL to worker $pid with $(( $(applied "tmp_order_lines_$SFX") - before )) round-2 order_lines messages applied"
kill -9 "$pid" 2>/dev/null || true
sleep 0.5
check "the order_lines worker was killed with SIGKILL" t "$([ -n "$pid" ] && ! kill -0 "$pid" 2>/dev/null && echo t || echo f)"

# ---- round 3: a truncate of order_lines alone
wl --seed 64 --expect "$E" run --ops 1 --truncate order_lines
record_point                          # 3
newpid="$(wait_worker "tmp_order_lines_$SFX" "$pid" 120 || true)"
check "a new order_lines worker took over" t "$([ -n "$newpid" ] && echo t || echo f)"
check "rounds 2 and 3 applied" t "$(caught_up && echo t || echo f)"

# ---- Connect killed (no offset flush since round 2): it re-sends rounds 2
# and 3, truncates included; then round 4 (rows of order_lines again)
n="$(expected_total "$E")"
"$SRC" restart-connect --kill
wl --seed 65 --expect "$E" run --ops "$OPS" --no-truncate
record_point                          # 4
check "round 4 and the re-sent events applied" t "$(caught_up && echo t || echo f)"
resent=$(( $(topics_total) - $(expected_total "$E") ))
echo "# $resent messages re-sent by Connect after its SIGKILL ($n expected before it)"
check "Connect re-sent events after its SIGKILL (the phase is not vacuous)" t "$([ "$resent" -gt 0 ] && echo t || echo f)"

if [ "${CDC_BREAK:-0}" = 1 ]; then
    echo "# CDC_BREAK=1: ending one current version early on purpose"
    sql -c "UPDATE $HS.accounts SET _valid_to = _valid_from + 1 WHERE (id, _valid_from) =
              (SELECT id, _valid_from FROM $HS.accounts WHERE _valid_to IS NULL AND NOT _deleted ORDER BY id LIMIT 1)"
fi

# ---- the verdicts: each point's read equals the source's state there
for ((p = 0; p < NPOINTS; p++)); do
    pos="$(cat "$W/point.$p")"
    sql -c "CREATE SCHEMA pit_${p}_$SFX" >/dev/null
    for t in $TABLES; do
        sql -c "CREATE VIEW pit_${p}_$SFX.$t AS SELECT $(source_columns "$t") FROM $HS.$t
                 WHERE _valid_from <= $pos AND (_valid_to IS NULL OR $pos < _valid_to) AND NOT _deleted" >/dev/null
    done
    compare "snap_$p" "pit_${p}_$SFX.{table}" "p$p" "point $p (position $pos): the point-in-time read equals the source's state"
    # the same by time: the source's clock at the point, between the
    # commit times of the rounds before and after it
    at="$(cat "$W/time.$p")"
    sql -c "CREATE SCHEMA pat_${p}_$SFX" >/dev/null
    for t in $TABLES; do
        sql -c "CREATE VIEW pat_${p}_$SFX.$t AS SELECT $(source_columns "$t") FROM $HS.$t
                 WHERE _valid_from_at <= (timestamptz 'epoch' + $at * interval '1 microsecond') AND (_valid_to_at IS NULL OR (timestamptz 'epoch' + $at * interval '1 microsecond') < _valid_to_at)
                   AND NOT _deleted" >/dev/null
    done
    compare "snap_$p" "pat_${p}_$SFX.{table}" "t$p" "point $p (time $at): the point-in-time read by time (_valid_from_at, _valid_to_at) equals the source's state"
    if [ "$p" -gt 0 ]; then
        same="$(python3 "$TOOLS/cdc_compare.py" --source "$DBZ_SRC_CONNINFO" --schema "snap_$p" \
                   --replica "$DBZ_SRC_CONNINFO" --target "snap_$((p - 1)).{table}" >/dev/null 2>&1 && echo t || echo f)"
        check "point $p: the source's state differs from point $((p - 1))'s (not vacuous)" f "$same"
    fi
done
sql -c "CREATE SCHEMA cur_$SFX" >/dev/null
for t in $TABLES; do
    sql -c "CREATE VIEW cur_$SFX.$t AS SELECT $(source_columns "$t") FROM $HS.$t WHERE _is_current" >/dev/null
done
compare cdc "cur_$SFX.{table}" cur "the current versions (_is_current) equal the source"
check "one current or deleted open version per key, the rest closed" 0 \
      "$(sql -c "SELECT (SELECT count(*) FROM (SELECT id FROM $HS.accounts WHERE _valid_to IS NULL GROUP BY id HAVING count(*) > 1) x)
                      + (SELECT count(*) FROM $HS.accounts a WHERE _is_current IS DISTINCT FROM (_valid_to IS NULL AND NOT _deleted))")"
# a truncate ends the versions of all its table's keys at one position:
# the deleted versions at the position where most keys were deleted at
# once are the truncate's (every other delete ends one key, or two of a
# key change's transaction at distinct positions)
trunc_deleted() {
    sql -c "SELECT coalesce(max(n), 0) FROM (SELECT count(*) AS n FROM $HS.$1 WHERE _deleted GROUP BY _valid_from) x"
}
for t in products order_lines; do
    n="$(src -c "SELECT string_agg(n::text, ',') FROM audit.truncated WHERE tbl = '$t'")"
    check "the truncate of $t ended the version of each of the $n keys in effect at its position" \
          "$n" "$(trunc_deleted "$t")"
done
check "every version has its commit time, and _valid_to_at is set exactly where _valid_to is" 0 \
      "$(sql -c "SELECT count(*) FROM (SELECT _valid_from_at, _valid_to, _valid_to_at FROM $HS.accounts
                   UNION ALL SELECT _valid_from_at, _valid_to, _valid_to_at FROM $HS.products
                   UNION ALL SELECT _valid_from_at, _valid_to, _valid_to_at FROM $HS.order_lines) x
                  WHERE _valid_from_at IS NULL OR (_valid_to IS NULL) <> (_valid_to_at IS NULL)")"
check "nothing quarantined" 0 "$(quarantined)"
sql -c "SELECT 'history rows: ' || (SELECT count(*) FROM $HS.accounts) || ' accounts, ' || (SELECT count(*) FROM $HS.products)
               || ' products, ' || (SELECT count(*) FROM $HS.order_lines) || ' order lines'" | sed 's/^/# /'
for ((p = 0; p < NPOINTS; p++)); do sql -c "DROP SCHEMA pit_${p}_$SFX CASCADE; DROP SCHEMA pat_${p}_$SFX CASCADE" >/dev/null 2>&1; done
sql -c "DROP SCHEMA cur_$SFX CASCADE" >/dev/null 2>&1
for t in $TABLES; do as_role ks_e2e -c "SELECT kafka_sink.drop_pipeline('tmp_${t}_$SFX')" >/dev/null; done
"$SRC" stop-connect
echo "# cdc_temporal took $((SECONDS - t_start)) s"
finish
