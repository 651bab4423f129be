#!/usr/bin/env bash
# test/e2e/softdel.sh — delete_mode soft (docs/soft-deletes.md) against a
# model.  For a few random seeds, softdel_model.py generates plain JSON
# events (partial upserts with ties, tombstones, re-sent ranges) and
# Debezium change events (creates, updates, deletes with their tombstones,
# truncates, re-sent ranges); after they are produced the broker's
# timestamps are read back and the model computes, one message at a time
# and independently of the extension, the soft target and the hard one.
# Each topic is ingested by pipelines cut differently (one batch, one
# message per batch, random max_offsets_per_batch), with a target marking
# in _deleted and _deleted_at or in _deleted_at alone, one whose worker is
# killed with SIGKILL while it runs, a run with kafka_sink.apply_strategy =
# on_conflict, and a hard one beside them; every table must equal the
# model, and message_fate's revived (the upsert that brought a marked row
# back: counted once per mark, the exact offsets at one message per
# batch, the detail naming what the marked row held).  Then routed pipelines (a table per topic or per source table,
# each equal to the model of its own events; a table without a mark column
# quarantined, then replayed; create_targets making _deleted_at), and the
# create-time refusals; an older change event stays stale, not revived,
# when the recorded delete position is pruned.
# shellcheck source=../lib/common.sh
. "$(dirname "$0")/../lib/common.sh"
setup_owner
W="$KS_RUN/softdel.$SFX"
mkdir -p "$W"
SEEDS="${KS_SOFTDEL_SEEDS:-2}"          # KS_SOFTDEL_SEED=N: seeds N, N+1, ... (to replay a failure)
trap 'set_apply_strategy RESET 2>/dev/null' EXIT

table_sql() { # KIND(plain|cdc) NAME MARKS(both|at|none)
    local marks
    case "$3" in
        both) marks=", _deleted boolean NOT NULL DEFAULT false, _deleted_at timestamptz" ;;
        at) marks=", _deleted_at timestamptz" ;;
        *) marks="" ;;
    esac
    if [ "$1" = plain ]; then
        echo "SET ROLE ks_e2e; CREATE TABLE e2e.$2 (id bigint PRIMARY KEY, v bigint, a text, b text, c integer
              $marks, _kafka_offset bigint, _kafka_topic text, _kafka_partition integer, _kafka_batch_id bigint);"
    else
        echo "SET ROLE ks_e2e; CREATE TABLE e2e.$2 (id int PRIMARY KEY, name text, qty int,
              _kafka_source_position numeric $marks, _kafka_offset bigint, _kafka_topic text,
              _kafka_partition integer, _kafka_batch_id bigint);"
    fi
}

pipeline_sql() { # KIND NAME TOPIC MAX_OFFSETS DELETE_MODE
    local opts="key_format => 'string', order_column => 'v', delete_on_tombstone => true"
    [ "$1" = cdc ] && opts="envelope => 'debezium', on_truncate => 'apply'"
    # soft: a bronze table, for message_fate (check_fates)
    [ "$5" = soft ] && opts="$opts, bronze => 'e2e.$2_raw'"
    echo "SET ROLE ks_e2e;
          SELECT kafka_sink.create_pipeline(name => '$2', bootstrap_servers => '$KS_BOOTSTRAP',
              subscribe => ARRAY['$3'], target => 'e2e.$2', $opts, delete_mode => '$5',
              starting_offsets => 'earliest', max_offsets_per_batch => $4, trigger_interval => '0');"
}

copy_sql() { # KIND NAME MARKS
    local mark="_deleted, (extract(epoch FROM _deleted_at) * 1000)::bigint,"
    [ "$3" = at ] && mark="_deleted_at IS NOT NULL, (extract(epoch FROM _deleted_at) * 1000)::bigint,"
    [ "$3" = none ] && mark=""
    if [ "$1" = plain ]; then
        echo "COPY (SELECT id, v, a, b, c, $mark _kafka_offset FROM e2e.$2 ORDER BY id) TO STDOUT"
    else
        echo "COPY (SELECT id, name, qty, _kafka_source_position, $mark _kafka_offset FROM e2e.$2 ORDER BY id) TO STDOUT"
    fi
}

# check_held WHAT PIPELINE TOPIC HELD_FILE [SUFFIX]: message_fate and
# message_fates name, in the detail of each message the model says
# revived, what the marked row held to order by ("offset<TAB>v = 3":
# softdel_model.py), then SUFFIX (a replay's)
check_held() {
    local n vals
    n="$(wc -l < "$4")"
    [ "$n" -gt 0 ] || { check "$1 (the model has a revived message: the check can fail)" t f; return; }
    vals="$(awk -F'\t' -v q="'" '{ printf "%s(%s::bigint, %s%s%s)", (NR > 1 ? ", " : ""), $1, q, $2, q }' "$4")"
    check "$1" "$n/$n" \
          "$(sql -c "SELECT count(*) FILTER (WHERE f.fate = 'revived' AND s.fate = 'revived' AND f.detail = s.detail
                                                 AND f.detail LIKE '%marked deleted (delete_mode soft) at ' || v.h || '${5:-}: its current source')
                             || '/' || count(*)
                        FROM (VALUES $vals) v(o, h)
                        CROSS JOIN LATERAL kafka_sink.message_fate('$2', '$3', 0, v.o) f
                        JOIN kafka_sink.message_fates('$2', '$3') s ON s.partition = 0 AND s.\"offset\" = v.o")"
}

# one run: KIND SEED_INDEX SEED STRATEGY; the pipelines of the run share a topic
run() {
    local kind="$1" s="$2" seed="$3" strategy="$4" topic n r1 r2 i name
    topic="sd_${kind}_${SFX}_${s}_$strategy"
    python3 "$E2E_DIR/softdel_model.py" gen "$kind" "$seed" "$W/msgs.$kind.$s"
    n="$(wc -l < "$W/msgs.$kind.$s")"
    "$HARNESS" topic-create "$topic" 1 >/dev/null 2>&1 || true
    kcat -P -b "$KS_BOOTSTRAP" -t "$topic" -p 0 -K $'\t' -Z < "$W/msgs.$kind.$s"
    kcat -C -b "$KS_BOOTSTRAP" -t "$topic" -p 0 -o beginning -e -q -f '%o\t%T\n' > "$W/ts.$kind.$s"
    python3 "$E2E_DIR/softdel_model.py" expect "$kind" "$W/msgs.$kind.$s" "$W/ts.$kind.$s" \
        "$W/soft.$kind.$s" "$W/hard.$kind.$s"
    r1=$((RANDOM % 6 + 2))
    r2=$((RANDOM % 20 + 2))
    local p="${kind:0:1}${SFX}_${s}_${strategy:0:2}"
    if [ "$strategy" = on_conflict ]; then
        names=("sd${p}_rb$r2" "hd${p}_ra$r1")
        maxes=("$r2" "$r1")
        marks=(both none)
        modes=(soft hard)
    else
        names=("sd${p}_one" "sd${p}_each" "sd${p}_ra$r1" "sd${p}_kill" "hd${p}_rb$r2")
        maxes=(100000 1 "$r1" 3 "$r2")
        marks=(both both at both none)
        modes=(soft soft soft soft hard)
    fi
    for i in "${!names[@]}"; do
        table_sql "$kind" "${names[$i]}" "${marks[$i]}" | sql >/dev/null
        pipeline_sql "$kind" "${names[$i]}" "$topic" "${maxes[$i]}" "${modes[$i]}" | sql > /dev/null
    done
    if [ "$strategy" != on_conflict ]; then
        sigkill_worker "${names[3]}" 2
    fi
    for i in "${!names[@]}"; do
        name="${names[$i]}"
        what="seed $seed ($kind, $strategy): $name (${modes[$i]}, max_offsets_per_batch ${maxes[$i]})"
        if ! poll "$(done_sql "$name" "$n")" 300; then
            check "$what consumed the topic" "t" "f"
            continue
        fi
        batches="$(sql -c "SELECT count(*) FROM kafka_sink.batches b JOIN kafka_sink.pipeline_definitions p
                            ON p.id = b.pipeline_id WHERE p.name = '$name' AND b.messages > 0")"
        sql -c "$(copy_sql "$kind" "$name" "${marks[$i]}")" > "$W/actual.$kind.$s.$name"
        expected="$W/soft.$kind.$s"
        [ "${modes[$i]}" = hard ] && expected="$W/hard.$kind.$s"
        check_model "$what: $n messages in $batches batches equal the model" "$expected" "$W/actual.$kind.$s.$name"
        if [ "${modes[$i]}" = soft ]; then
            check_fates "$what: message_fate and message_fates give every offset a fate the model allows" \
                        "$name" "$topic" "$W/soft.$kind.$s.fates"
            check_held "$what: a revived message's detail names what the marked row held" \
                       "$name" "$topic" "$W/soft.$kind.$s.held"
            check "$what: the batches count the model's marks as soft_deleted, none as deleted" \
                  "0 t" "$(sql -c "SELECT coalesce(sum(b.deleted), 0) || ' ' || CASE WHEN sum(b.soft_deleted) > 0 THEN 't' ELSE 'f' END
                                    FROM kafka_sink.batches b JOIN kafka_sink.pipeline_definitions p
                                      ON p.id = b.pipeline_id WHERE p.name = '$name'")"
            # revived: the batches record each upsert that brought a marked
            # row back once (revived_offsets, as many as batches.revived);
            # a marked row comes back once per mark whatever the batch
            # split, so as many as the model's one at a time; one message
            # per batch: the model's very offsets (an older re-sent event
            # the guard keeps out is not one)
            check "$what: revived_offsets holds each revived message once, as many as batches.revived counts" \
                  "t" "$(sql -c "SELECT (SELECT count(*) FROM kafka_sink.revived_offsets ro JOIN kafka_sink.pipeline_definitions p
                                          ON p.id = ro.pipeline_id, unnest(ro.offsets) o WHERE p.name = '$name')
                                  = (SELECT count(DISTINCT o) FROM kafka_sink.revived_offsets ro JOIN kafka_sink.pipeline_definitions p
                                          ON p.id = ro.pipeline_id, unnest(ro.offsets) o WHERE p.name = '$name')
                                 AND (SELECT count(*) FROM kafka_sink.revived_offsets ro JOIN kafka_sink.pipeline_definitions p
                                          ON p.id = ro.pipeline_id, unnest(ro.offsets) o WHERE p.name = '$name')
                                  = (SELECT coalesce(sum(b.revived), 0) FROM kafka_sink.batches b JOIN kafka_sink.pipeline_definitions p
                                          ON p.id = b.pipeline_id WHERE p.name = '$name')")"
            check "$what: batches.revived sums to the model's revivals" \
                  "$(cat "$W/soft.$kind.$s.revivals")" \
                  "$(sql -c "SELECT coalesce(sum(b.revived), 0) FROM kafka_sink.batches b JOIN kafka_sink.pipeline_definitions p
                              ON p.id = b.pipeline_id WHERE p.name = '$name'")"
            if [ "${maxes[$i]}" = 1 ]; then
                check "$what: one message per batch: revived_offsets are the model's revived offsets" \
                      "$(cat "$W/soft.$kind.$s.revived")" \
                      "$(sql -c "SELECT coalesce(string_agg(o::text, ' ' ORDER BY o), '') FROM kafka_sink.revived_offsets ro
                                  JOIN kafka_sink.pipeline_definitions p ON p.id = ro.pipeline_id, unnest(ro.offsets) o
                                 WHERE p.name = '$name'")"
            fi
        fi
        check "$what quarantined nothing" 0 \
              "$(sql -c "SELECT count(*) FROM kafka_sink.quarantine q JOIN kafka_sink.pipeline_definitions p
                          ON p.id = q.pipeline_id WHERE p.name = '$name'")"
    done
    check "seed $seed ($kind): the model marked rows (the test can fail)" t \
          "$([ "$(cat "$W/soft.$kind.$s.marks")" -gt 0 ] && echo t || echo f)"
    # (a change event's delete may be followed by the key's next create)
    check "seed $seed ($kind): the model expects fates of marked rows (the fate check can fail)" t \
          "$(grep -qE $'\t(soft_deleted|truncated)$' "$W/soft.$kind.$s.fates" && echo t || echo f)"
    check "seed $seed ($kind): the model expects revived messages (the revived checks can fail)" t \
          "$(grep -qE $'\trevived$' "$W/soft.$kind.$s.fates" && [ "$(cat "$W/soft.$kind.$s.revivals")" -gt 0 ] && echo t || echo f)"
    for name in "${names[@]}"; do
        sql -c "SET ROLE ks_e2e; SELECT kafka_sink.drop_pipeline('$name')" > /dev/null
    done
}

for s in $(seq 1 "$SEEDS"); do
    seed=$((RANDOM * 32768 + RANDOM))
    [ -z "${KS_SOFTDEL_SEED:-}" ] || seed=$((KS_SOFTDEL_SEED + s - 1))
    run plain "$s" "$seed" sql
    run cdc "$s" "$((seed + 1))" sql
done
set_apply_strategy on_conflict
seed=$((RANDOM * 32768 + RANDOM))
[ -z "${KS_SOFTDEL_SEED:-}" ] || seed="$KS_SOFTDEL_SEED"
run plain oc "$seed" on_conflict
run cdc oc "$((seed + 1))" on_conflict
set_apply_strategy RESET

# delete_mode changed by alter_pipeline while the pipeline runs: hard,
# then soft from the first batch after the alter commits.  The alter and
# the read of the checkpoint are one transaction (the alter waits for a
# batch in flight; no batch of the old definition commits after it:
# checkpoint.c), so the checkpoint read is the boundary the model applies;
# the second half of the messages is produced after it.
switch() {
    local seed="$1" topic="sd_switch_$SFX" name="sdsw$SFX" n half r b
    python3 "$E2E_DIR/softdel_model.py" gen plain "$seed" "$W/msgs.switch"
    n="$(wc -l < "$W/msgs.switch")"
    half=$((n / 2))
    "$HARNESS" topic-create "$topic" 1 >/dev/null 2>&1 || true
    head -n "$half" "$W/msgs.switch" | kcat -P -b "$KS_BOOTSTRAP" -t "$topic" -p 0 -K $'\t' -Z
    r=$((RANDOM % 4 + 2))
    table_sql plain "$name" both | sql >/dev/null
    pipeline_sql plain "$name" "$topic" "$r" hard | sql >/dev/null
    poll "$(done_sql "$name" 1)" 60 || check "seed $seed (switch): a first batch committed" t f
    b="$(sql -c "SET ROLE ks_e2e" -c "BEGIN" \
             -c "SELECT kafka_sink.alter_pipeline('$name', delete_mode => 'soft')" \
             -c "COPY (SELECT o.next_offset FROM kafka_sink.offsets o JOIN kafka_sink.pipeline_definitions p
                        ON p.id = o.pipeline_id WHERE p.name = '$name' AND o.partition = 0) TO STDOUT" \
             -c "COMMIT" | grep -E '^[0-9]+$')"
    tail -n +"$((half + 1))" "$W/msgs.switch" | kcat -P -b "$KS_BOOTSTRAP" -t "$topic" -p 0 -K $'\t' -Z
    kcat -C -b "$KS_BOOTSTRAP" -t "$topic" -p 0 -o beginning -e -q -f '%o\t%T\n' > "$W/ts.switch"
    python3 "$E2E_DIR/softdel_model.py" switch "$W/msgs.switch" "$W/ts.switch" "${b:-0}" "$W/soft.switch"
    local what="seed $seed (switch): hard, then soft from offset ${b:-?} (max_offsets_per_batch $r)"
    poll "$(done_sql "$name" "$n")" 300 || check "$what consumed the topic" t f
    sql -c "$(copy_sql plain "$name" both)" > "$W/actual.switch"
    check_model "$what: $n messages equal the model" "$W/soft.switch" "$W/actual.switch"
    check "seed $seed (switch): messages on both sides of the boundary, rows marked after it" t \
          "$(grep -qE 'before=[1-9].* after=[1-9]' "$W/soft.switch.sides" &&
             [ "$(cat "$W/soft.switch.marks")" -gt 0 ] && echo t || echo f)"
    sql -c "SET ROLE ks_e2e; SELECT kafka_sink.drop_pipeline('$name')" > /dev/null
}
seed=$((RANDOM * 32768 + RANDOM))
[ -z "${KS_SOFTDEL_SEED:-}" ] || seed="$KS_SOFTDEL_SEED"
switch "$seed"

# routed pipelines (docs/routing.md): one pipeline writes a table per
# topic (plain: target 'e2e.{topic}') or per source table (change events:
# 'e2e.{source.table}', each source table's events in its own topic, as
# Debezium writes them).  Each table gets its own random events (tombstones,
# deletes, truncates, re-sent ranges) and must equal the model of those
# events alone; batches of random size mix the tables.  Table a marks in
# _deleted and _deleted_at, b in _deleted_at alone, c has no mark column
# (create_pipeline refuses it when it exists; created after the create, as
# a table that appears later): its
# messages are quarantined as target_refused (the others go on), and land
# by replay_quarantine once the column is added; change events also route
# to d, which does not exist: create_targets makes it with _deleted_at, and
# their pipeline is made soft by alter_pipeline before it starts.
routed() {
    local kind="$1" seed="$2" tables="a b c" p="sdr${1:0:1}$SFX" t n total=0 topics="" r name what quarantined
    local mark_col=6                        # the model's _deleted (softdel_model.py expect)
    [ "$kind" = cdc ] && tables="a b c d" mark_col=5
    r=$((RANDOM % 7 + 2))
    for t in $tables; do
        name="${p}_$t"
        python3 "$E2E_DIR/softdel_model.py" gen "$kind" "$((seed + ${#topics}))" "$W/r.$name.model"
        if [ "$kind" = cdc ]; then
            python3 "$E2E_DIR/softdel_model.py" retable "$name" "$([ "$t" = d ] && echo schema || echo plain)" \
                "$W/r.$name.model" "$W/r.$name.msgs"
        else
            cp "$W/r.$name.model" "$W/r.$name.msgs"
        fi
        n="$(wc -l < "$W/r.$name.msgs")"
        total=$((total + n))
        "$HARNESS" topic-create "$name" 1 >/dev/null 2>&1 || true
        kcat -P -b "$KS_BOOTSTRAP" -t "$name" -p 0 -K $'\t' -Z < "$W/r.$name.msgs"
        kcat -C -b "$KS_BOOTSTRAP" -t "$name" -p 0 -o beginning -e -q -f '%o\t%T\n' > "$W/r.$name.ts"
        python3 "$E2E_DIR/softdel_model.py" expect "$kind" "$W/r.$name.model" "$W/r.$name.ts" \
            "$W/r.$name.soft" "$W/r.$name.hard"
        topics="$topics${topics:+, }'$name'"
        case "$t" in
            a) table_sql "$kind" "$name" both | sql >/dev/null ;;
            b|c) table_sql "$kind" "$name" "$([ "$t" = b ] && echo at || echo none)" | sql >/dev/null ;;
        esac
    done
    local opts="key_format => 'string', order_column => 'v', delete_on_tombstone => true, target => 'e2e.{topic}'"
    [ "$kind" = cdc ] && opts="envelope => 'debezium', on_truncate => 'apply', target => 'e2e.{source.table}',
                               create_targets => true, key_columns => ARRAY['id']"
    # change events: created hard and stopped, made soft by alter_pipeline
    # (its routed tables are checked where the worker opens them), started
    local mode=soft alter="" start=true
    [ "$kind" = cdc ] && mode=hard start=false \
        alter="SELECT kafka_sink.alter_pipeline('$p', delete_mode => 'soft'); SELECT kafka_sink.start('$p');"
    if [ "$kind" = plain ]; then
        # create_pipeline checks the routed tables that exist ('{topic}' for
        # the subscribed topics): c, without a mark column, is refused; made
        # after the create, it is checked where the worker opens it
        check "routed $kind: create_pipeline refuses an existing routed table without a mark column (42P16, naming it)" \
              "42P16: delete_mode soft needs a column _deleted boolean or _deleted_at timestamptz in e2e.${p}_c" \
              "$(sql -c "SET ROLE ks_e2e" -c "DO \$\$ BEGIN PERFORM kafka_sink.create_pipeline(name => '$p',
                    bootstrap_servers => '$KS_BOOTSTRAP', subscribe => ARRAY[$topics], $opts, delete_mode => 'soft',
                    start => false);
                 EXCEPTION WHEN OTHERS THEN RAISE NOTICE '%: %', SQLSTATE, SQLERRM; END \$\$" 2>&1 | sed -n 's/^NOTICE:  //p')"
        sql -c "SET ROLE ks_e2e; DROP TABLE e2e.${p}_c" > /dev/null
        start=false alter="$(table_sql "$kind" "${p}_c" none) SELECT kafka_sink.start('$p');"
    fi
    sql >/dev/null <<SQL
SET ROLE ks_e2e;
SELECT kafka_sink.create_pipeline(name => '$p', bootstrap_servers => '$KS_BOOTSTRAP',
    subscribe => ARRAY[$topics], $opts, delete_mode => '$mode', bronze => 'e2e.${p}_raw', start => $start,
    starting_offsets => 'earliest', max_offsets_per_batch => $r, trigger_interval => '0');
$alter
SQL
    [ "$kind" = cdc ] && check "routed $kind: alter_pipeline(delete_mode => 'soft') on a routed pipeline" soft \
        "$(sql -c "SELECT delete_mode FROM kafka_sink.pipelines WHERE name = '$p'")"
    what="seed $seed (routed $kind, max_offsets_per_batch $r)"
    poll "$(done_sql "$p" "$total")" 300 || check "$what consumed its topics" t f
    check "$what: the pipeline runs on past the table without a mark column" "running|" \
          "$(sql -c "SELECT state || '|' || coalesce(last_error, '') FROM kafka_sink.status WHERE name = '$p'")"
    for t in $tables; do
        name="${p}_$t"
        if [ "$t" = c ]; then
            # a change event's tombstone names no table: skipped, not quarantined
            quarantined="$(wc -l < "$W/r.$name.msgs")"
            [ "$kind" = cdc ] && quarantined="$(grep -cvP '\t$' "$W/r.$name.msgs")"
            check "$what: $name (no mark column): its messages (change events: but the tombstones, which name no table) quarantined as target_refused, none applied" \
                  "$quarantined|target_refused|0" \
                  "$(sql -c "SELECT count(*) || '|' || string_agg(DISTINCT reason, ',') || '|' || (SELECT count(*) FROM e2e.$name)
                              FROM kafka_sink.quarantine q JOIN kafka_sink.pipeline_definitions d ON d.id = q.pipeline_id
                             WHERE d.name = '$p' AND q.topic = '$name'")"
            check "$what: the quarantine row says which column is missing" t \
                  "$(sql -c "SELECT bool_and(detail LIKE '%delete_mode soft needs a column _deleted boolean or _deleted_at timestamptz in e2e.$name%')
                              FROM kafka_sink.quarantine q WHERE q.topic = '$name'")"
            sql -c "SET ROLE ks_e2e; ALTER TABLE e2e.$name ADD COLUMN _deleted_at timestamptz" >/dev/null
            check "$what: $name after ALTER TABLE ADD COLUMN _deleted_at: replay_quarantine lands them all" \
                  "$quarantined|0" \
                  "$(sql -c "SET ROLE ks_e2e" -c "SELECT replayed || '|' || still_failing FROM kafka_sink.replay_quarantine('$p', target => 'e2e.$name')")"
            sql -c "$(copy_sql "$kind" "$name" at)" > "$W/r.$name.actual"
            check_model "$what: $name replayed equals the model of its events" "$W/r.$name.soft" "$W/r.$name.actual"
            # the replay's revivals: on the quarantine rows, as many as the
            # model's (once per mark, as for batches), and message_fate
            # says revived for the replayed upsert a live row names
            check "$what: $name replayed: the quarantine rows record the model's revivals" \
                  "$(cat "$W/r.$name.soft.revivals")" \
                  "$(sql -c "SELECT count(*) FROM kafka_sink.quarantine q JOIN kafka_sink.pipeline_definitions d
                              ON d.id = q.pipeline_id WHERE d.name = '$p' AND q.topic = '$name' AND q.replay_revived IS NOT NULL")"
            check_fates "$what: $name replayed: message_fate gives every offset a fate the model allows" \
                        "$p" "$name" "$W/r.$name.soft.fates"
            check_held "$what: $name replayed: a revived message's detail names what the marked row held" \
                       "$p" "$name" "$W/r.$name.soft.held" ", replayed by replay_quarantine"
            continue
        fi
        if [ "$t" = d ]; then
            check "create_targets with delete_mode soft: $name is created with _deleted_at timestamptz" \
                  "id integer, name text, qty integer, _kafka_source_position numeric, _deleted_at timestamp with time zone" \
                  "$(sql -c "SELECT string_agg(attname || ' ' || format_type(atttypid, atttypmod), ', ' ORDER BY attnum)
                              FROM pg_attribute WHERE attrelid = to_regclass('e2e.$name') AND attnum > 0 AND NOT attisdropped")"
            # no lineage columns in a created table: the model's without its offset
            cut -f 1-6 "$W/r.$name.soft" > "$W/r.$name.soft6"
            sql -c "COPY (SELECT id, name, qty, _kafka_source_position, _deleted_at IS NOT NULL,
                                 (extract(epoch FROM _deleted_at) * 1000)::bigint FROM e2e.$name ORDER BY id) TO STDOUT" \
                > "$W/r.$name.actual" || true
            check_model "$what: $name (created) equals the model of its events" "$W/r.$name.soft6" "$W/r.$name.actual"
        else
            sql -c "$(copy_sql "$kind" "$name" "$([ "$t" = a ] && echo both || echo at)")" > "$W/r.$name.actual"
            check_model "$what: $name equals the model of its events" "$W/r.$name.soft" "$W/r.$name.actual"
            check_fates "$what: $name: message_fate gives every offset a fate the model allows" \
                        "$p" "$name" "$W/r.$name.soft.fates"
            check_held "$what: $name: a revived message's detail names what the marked row held" \
                       "$p" "$name" "$W/r.$name.soft.held"
        fi
        [ "$t" = d ] || check "$what: $name: revived_offsets record the model's revivals" \
                  "$(cat "$W/r.$name.soft.revivals")" \
                  "$(sql -c "SELECT count(*) FROM kafka_sink.revived_offsets ro JOIN kafka_sink.pipeline_definitions d
                              ON d.id = ro.pipeline_id, unnest(ro.offsets) o WHERE d.name = '$p' AND ro.topic = '$name'")"
        check "$what: $name quarantined nothing" 0 \
              "$(sql -c "SELECT count(*) FROM kafka_sink.quarantine q JOIN kafka_sink.pipeline_definitions d
                          ON d.id = q.pipeline_id WHERE d.name = '$p' AND q.topic = '$name'")"
        check "$what: $name: the model ends with a marked row (the test can fail)" t \
              "$([ "$(cat "$W/r.$name.soft.marks")" -gt 0 ] && awk -F'\t' -v c="$mark_col" '$c == "t" { m = 1 } END { exit !m }' "$W/r.$name.soft" && echo t || echo f)"
    done
    sql -c "SET ROLE ks_e2e; SELECT kafka_sink.drop_pipeline('$p')" > /dev/null
}
seed=$((RANDOM * 32768 + RANDOM))
[ -z "${KS_SOFTDEL_SEED:-}" ] || seed="$KS_SOFTDEL_SEED"
routed plain "$seed"
routed cdc "$((seed + 1))"

# revived is what the MERGE did, guard included: a change event older than
# the delete that marked its row stays stale even when the recorded
# delete position is gone (kafka_sink.cdc_deletions pruned, as
# event_id_retention does), since the marked row holds the delete's
# position; the newer create after it revives the row, and its detail
# names that position.  One message per batch, offsets by hand: c 1@100,
# d 1@200 (and its tombstone), then u 1@150, c 1@300.
guarded() {
    local topic="sd_guard_$SFX" name="sdg$SFX" id
    "$HARNESS" topic-create "$topic" 1 >/dev/null 2>&1 || true
    python3 - "$E2E_DIR" > "$W/guard.msgs" <<'PY'
import json, sys
sys.path.insert(0, sys.argv[1])
from softdel_model import cdc_value
k = json.dumps({"id": 1})
print(k + "\t" + cdc_value("c", 1, 100, {"id": 1, "name": "n@100", "qty": 1}))
print(k + "\t" + cdc_value("d", 1, 200, None))
print(k + "\t")
PY
    kcat -P -b "$KS_BOOTSTRAP" -t "$topic" -p 0 -K $'\t' -Z < "$W/guard.msgs"
    table_sql cdc "$name" both | sql >/dev/null
    pipeline_sql cdc "$name" "$topic" 1 soft | sql >/dev/null
    poll "$(done_sql "$name" 3)" 120 || check "guard: the first messages consumed" t f
    id="$(sql -c "SELECT id FROM kafka_sink.pipeline_definitions WHERE name = '$name'")"
    check "guard: the delete recorded its position, then pruned" "1" \
          "$(sql -c "WITH d AS (DELETE FROM kafka_sink.cdc_deletions WHERE pipeline_id = $id RETURNING 1) SELECT count(*) FROM d")"
    produce_cdc() { # LSN NAME QTY OP
        python3 -c "import json, sys; sys.path.insert(0, sys.argv[1]); from softdel_model import cdc_value
print(json.dumps({'id': 1}) + '\t' + cdc_value(sys.argv[5], 1, int(sys.argv[2]), {'id': 1, 'name': sys.argv[3], 'qty': int(sys.argv[4])}))" \
            "$E2E_DIR" "$@" | kcat -P -b "$KS_BOOTSTRAP" -t "$topic" -p 0 -K $'\t' -Z
    }
    produce_cdc 150 n@150 2 u
    poll "$(done_sql "$name" 4)" 120 || check "guard: the older update consumed" t f
    check "guard: the older update stays stale (the marked row holds the delete's position)" \
          "stale|the row for key {\"id\": 1} (from batch N) was newer: its source position 200, this event's 150" \
          "$(sql -c "SELECT f.fate || '|' || regexp_replace(f.detail, 'batch [0-9]+', 'batch N')
                      FROM kafka_sink.message_fate('$name', '$topic', 0, 3) f")"
    produce_cdc 300 n@300 3 c
    poll "$(done_sql "$name" 5)" 120 || check "guard: all messages consumed" t f
    check "guard: the newer create revives the row, its detail naming the delete's position" \
          "revived|brought back the row with key {\"id\": 1}, marked deleted (delete_mode soft) at source position 200: its current source" \
          "$(sql -c "SELECT f.fate || '|' || f.detail FROM kafka_sink.message_fate('$name', '$topic', 0, 4) f")"
    check "guard: revived_offsets and batches.revived hold the create alone" "{4}|{\"source position 200\"}|1" \
          "$(sql -c "SELECT (SELECT string_agg(offsets::text || '|' || held::text, ',') FROM kafka_sink.revived_offsets WHERE pipeline_id = $id)
                             || '|' || (SELECT sum(revived) FROM kafka_sink.batches WHERE pipeline_id = $id)")"
    check "guard: the row is the create's" "1	n@300	3	300	f" \
          "$(sql -c "COPY (SELECT id, name, qty, _kafka_source_position, _deleted FROM e2e.$name) TO STDOUT")"
    sql -c "SET ROLE ks_e2e; SELECT kafka_sink.drop_pipeline('$name')" > /dev/null
}
guarded

# the statements shown are the ones run: the soft delete is an UPDATE
sql >/dev/null <<SQL
SET ROLE ks_e2e;
CREATE TABLE e2e.sdshow_$SFX (id bigint PRIMARY KEY, v bigint, a text, _deleted boolean NOT NULL DEFAULT false);
SELECT kafka_sink.create_pipeline(name => 'sdshow_$SFX', bootstrap_servers => '$KS_BOOTSTRAP',
    subscribe => ARRAY['x'], target => 'e2e.sdshow_$SFX', key_format => 'string', order_column => 'v',
    delete_on_tombstone => true, delete_mode => 'soft', start => false);
SQL
check "pipeline_statements: the soft delete marks the row" "t" \
      "$(sql -c "SELECT statement LIKE 'UPDATE e2e.sdshow_$SFX AS t SET _deleted = true%'
                   FROM kafka_sink.pipeline_statements('sdshow_$SFX') WHERE kind = 'delete'")"
check "kafka_sink.pipelines shows delete_mode" "soft" \
      "$(sql -c "SELECT delete_mode FROM kafka_sink.pipelines WHERE name = 'sdshow_$SFX'")"
sql -c "SET ROLE ks_e2e; SELECT kafka_sink.drop_pipeline('sdshow_$SFX')" > /dev/null
finish
