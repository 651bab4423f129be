#!/usr/bin/env bash
# test/e2e/transform.sh — filter and computed columns (docs/transform.md)
# against a model (transform_model.py, independent of the extension).
#  - plain JSON, one partition, random keys, prices (some NULL, zero or
#    negative), quantities (some 0) and emails (some NULL or absent): the
#    filter leaves out what it should, computed columns take their values,
#    a division by zero in one message quarantines that message as
#    expression_error and the rest applies; ingested by pipelines that cut
#    the topic differently (one batch, 37 per batch) and by one (7 per
#    batch) whose worker is killed with SIGKILL three times while it runs:
#    every target equals the model row by row, the quarantine holds exactly
#    the model's offsets, batches.filtered sums to the model's count, and
#    message_fate (with bronze) says filtered, applied and quarantined for
#    the model's messages of each kind; without bronze (the 37-per-batch
#    and the killed pipelines) message_fate and message_fates say filtered
#    for exactly the model's filtered offsets, which
#    kafka_sink.filtered_offsets holds once each (pruned with the batch
#    markers, removed by drop_pipeline, hidden from other roles); with
#    bronze and no recorded rows, the filter asked again;
#  - Debezium change events: a filtered update leaves the row as it was, a
#    delete passes whatever the filter, a filtered create inserts nothing,
#    a computed column from the after image;
#  - an expression whose constant part raises when planned (1/0, a cast of
#    a constant, a constant CASE branch; plain and routed): every message
#    quarantined as expression_error, the pipeline running; after the alter,
#    replay_quarantine applies them and the next batch applies;
#  - the expression runs as the owner: an owner's function that reads a
#    table of another role passes create_pipeline and fails the pipeline
#    with permission denied when it runs (nothing quarantined, nothing
#    checkpointed).
# shellcheck source=../lib/common.sh
. "$(dirname "$0")/../lib/common.sh"
setup_owner
W="$KS_RUN/transform.$SFX"
mkdir -p "$W"
N="${KS_TRANSFORM_MESSAGES:-3000}"
seed="${KS_TRANSFORM_SEED:-$((RANDOM * 32768 + RANDOM))}"
T="xf_$SFX"
echo "# seed $seed (KS_TRANSFORM_SEED to replay)"

python3 "$E2E_DIR/transform_model.py" gen "$seed" "$N" "$W/msgs"
python3 "$E2E_DIR/transform_model.py" expect "$W/msgs" "$W/rows" "$W/quar" "$W/filtered" "$W/applied"
"$HARNESS" topic-create "$T" 1 >/dev/null 2>&1 || true
produce "$T" -p 0 < "$W/msgs"

names=("xf${SFX}_one" "xf${SFX}_b37" "xf${SFX}_kill")
maxes=(100000 37 7)
bronze=("e2e.${names[0]}_raw" "" "")
for i in "${!names[@]}"; do
    extra=""
    [ -z "${bronze[$i]}" ] || extra=", bronze => '${bronze[$i]}'"
    sql >/dev/null <<SQL
SET ROLE ks_e2e;
CREATE TABLE e2e.${names[$i]} (id bigint PRIMARY KEY, ts bigint NOT NULL, price numeric, qty int,
                               email text, total numeric(12, 2), email_lc text NOT NULL, cents_each int,
                               _kafka_topic text, _kafka_partition int, _kafka_offset bigint, _kafka_batch_id bigint);
SELECT kafka_sink.create_pipeline(name => '${names[$i]}', bootstrap_servers => '$KS_BOOTSTRAP',
    subscribe => ARRAY['$T'], target => 'e2e.${names[$i]}', order_column => 'ts',
    key_format => 'string', starting_offsets => 'earliest', max_offsets_per_batch => ${maxes[$i]},
    trigger_interval => '0',
    filter => 'price > 0 AND email IS NOT NULL',
    computed => '{"total": "price * qty", "email_lc": "lower(email)", "cents_each": "(price * 100)::int / qty"}'$extra);
SQL
done
kill_worker_times "${names[2]}" 3
for i in "${!names[@]}"; do
    name="${names[$i]}"
    if ! poll "$(done_sql "$name" "$N")" 300; then
        check "$name (max_offsets_per_batch ${maxes[$i]}) consumed the topic" "t" "f"
        continue
    fi
    sql -c "COPY (SELECT id, ts, price, qty, email, total, email_lc, cents_each FROM e2e.$name ORDER BY id) TO STDOUT" \
        > "$W/actual.$i"
    if diff -u "$W/rows" "$W/actual.$i" > "$W/diff.$i"; then
        check "$name: $(wc -l < "$W/rows") rows equal the model row by row" same same
    else
        check "$name: the rows equal the model row by row" same differs
        head -20 "$W/diff.$i"
    fi
    check "$name: exactly the model's messages quarantined as expression_error" \
          "$(wc -l < "$W/quar"):$(tr '\n' ' ' < "$W/quar")" \
          "$(sql -c "SELECT count(*) || ':' || coalesce(string_agg(q.message_offset || ' ', '' ORDER BY q.message_offset), '')
                       FROM kafka_sink.quarantine q JOIN kafka_sink.pipeline_definitions p ON p.id = q.pipeline_id
                      WHERE p.name = '$name' AND q.reason = 'expression_error'
                        AND q.detail LIKE 'computed column \"cents_each\" raised: division by zero'")"
    check "$name: nothing else quarantined" 0 \
          "$(sql -c "SELECT count(*) FROM kafka_sink.quarantine q JOIN kafka_sink.pipeline_definitions p
                      ON p.id = q.pipeline_id WHERE p.name = '$name' AND q.reason <> 'expression_error'")"
    check "$name: batches count the model's filtered messages" "$(wc -l < "$W/filtered")" \
          "$(sql -c "SELECT coalesce(sum(b.filtered), 0) FROM kafka_sink.batches b
                      JOIN kafka_sink.pipeline_definitions p ON p.id = b.pipeline_id WHERE p.name = '$name'")"
done
# message_fate with bronze: filtered, applied and quarantined messages
fates() { # FILE: the fates of its first 20 offsets, counted
    head -20 "$1" | while read -r o; do
        sql -c "SELECT fate FROM kafka_sink.message_fate('${names[0]}', '$T', 0, $o)"
    done | sort | uniq -c | awk '{printf "%s%s:%s", (NR > 1 ? " " : ""), $2, $1}'
}
count20() { local n; n="$(head -20 "$1" | wc -l)"; echo "$2:$n"; }
check "message_fate: the model's filtered messages are filtered" "$(count20 "$W/filtered" filtered)" "$(fates "$W/filtered")"
check "message_fate: the model's winners are applied" "$(count20 "$W/applied" applied)" "$(fates "$W/applied")"
if [ -s "$W/quar" ]; then
    check "message_fate: the model's raising messages are quarantined" "$(count20 "$W/quar" quarantined)" "$(fates "$W/quar")"
fi
# every offset's fate, by message_fate and by message_fates (the set), from
# the model's files: filtered, quarantined, applied, else superseded by the
# key's winner (one batch) or stale or overwritten
python3 "$E2E_DIR/transform_model.py" fates "$N" "$W/filtered" "$W/quar" "$W/applied" "$W/fates"
check_fates "message_fate and message_fates: every offset's fate is the model's (filtered told apart in both)" \
            "${names[0]}" "$T" "$W/fates"
# a batch that counted filtered messages but recorded none of them (one
# committed before 0.3.0, as the catalog's superuser leaves it here): the
# filter asked again of the message in bronze
sql -c "DELETE FROM kafka_sink.filtered_offsets fo USING kafka_sink.pipeline_definitions p
         WHERE p.id = fo.pipeline_id AND p.name = '${names[0]}'" > /dev/null
check_fates "batches without filtered_offsets rows (before 0.3.0): filtered told from bronze, in both" \
            "${names[0]}" "$T" "$W/fates"
check "the progress record counts filtered messages" t \
      "$(sql -c "SELECT (b.progress->'sink'->>'filtered')::bigint = b.filtered
                   FROM kafka_sink.batches b JOIN kafka_sink.pipeline_definitions p ON p.id = b.pipeline_id
                  WHERE p.name = '${names[0]}' ORDER BY b.batch_id DESC LIMIT 1")"
# without bronze (the other two pipelines, one of them killed mid-stream):
# the worker's record of the filtered offsets (kafka_sink.filtered_offsets)
# tells them, once each; the others are no more than applied or superseded
python3 "$E2E_DIR/transform_model.py" fates "$N" "$W/filtered" "$W/quar" - "$W/fates.nobronze"
fsum="$(sort -n "$W/filtered" | tr '\n' ' ' | md5sum | cut -c1-32)"
for name in "${names[1]}" "${names[2]}"; do
    check_fates "$name (no bronze): message_fate and message_fates say filtered for exactly the model's filtered offsets" \
                "$name" "$T" "$W/fates.nobronze"
    check "$name: filtered_offsets holds each of the model's filtered offsets once, in the batch that counted it" \
          "$(wc -l < "$W/filtered"):$(wc -l < "$W/filtered"):$fsum:true" \
          "$(sql -c "SELECT count(*) || ':' || count(DISTINCT o) || ':' || md5(coalesce(string_agg(o || ' ', '' ORDER BY o), ''))
                            || ':' || (SELECT bool_and(b.filtered = coalesce((SELECT sum(cardinality(fo.offsets))
                                                                               FROM kafka_sink.filtered_offsets fo
                                                                              WHERE fo.pipeline_id = b.pipeline_id
                                                                                AND fo.batch_id = b.batch_id), 0))
                                         FROM kafka_sink.batches b WHERE b.pipeline_id = p.id)
                       FROM kafka_sink.pipeline_definitions p
                       JOIN kafka_sink.filtered_offsets fo ON fo.pipeline_id = p.id, unnest(fo.offsets) o
                      WHERE p.name = '$name' GROUP BY p.id")"
done
sql -c "CREATE ROLE ks_e2e_admin_$SFX IN ROLE kafka_sink_admin; CREATE ROLE ks_e2e_nobody_$SFX" > /dev/null
check "filtered_offsets: the owner sees its pipelines' rows, another kafka_sink_admin member none, any other role is refused" \
      "t|0|42501" \
      "$(sql -c "SET ROLE ks_e2e; SELECT count(*) > 0 FROM kafka_sink.filtered_offsets")|$(sql -c "SET ROLE ks_e2e_admin_$SFX; SELECT count(*) FROM kafka_sink.filtered_offsets")|$(sql -c "SET ROLE ks_e2e_nobody_$SFX; DO \$\$ BEGIN PERFORM count(*) FROM kafka_sink.filtered_offsets; EXCEPTION WHEN OTHERS THEN RAISE NOTICE '%', SQLSTATE; END \$\$" 2>&1 | grep -o '[0-9A-Z]\{5\}$')"
sql -c "DROP ROLE ks_e2e_admin_$SFX; DROP ROLE ks_e2e_nobody_$SFX" > /dev/null
# retention: pruning a batch marker takes its filtered offsets with it
pid2="$(sql -c "SELECT id FROM kafka_sink.pipeline_definitions WHERE name = '${names[2]}'")"
cut="$(sql -c "SELECT percentile_disc(0.5) WITHIN GROUP (ORDER BY batch_id) FROM kafka_sink.filtered_offsets WHERE pipeline_id = $pid2")"
sql -c "DELETE FROM kafka_sink.batches WHERE pipeline_id = $pid2 AND batch_id <= $cut" > /dev/null
check "pruned batch markers take their filtered offsets along (the later ones stay)" "0:true" \
      "$(sql -c "SELECT count(*) FILTER (WHERE batch_id <= $cut) || ':' || (count(*) > 0)
                   FROM kafka_sink.filtered_offsets WHERE pipeline_id = $pid2")"
pids="$(sql -c "SELECT string_agg(id::text, ',') FROM kafka_sink.pipeline_definitions WHERE name IN ('${names[0]}', '${names[1]}', '${names[2]}')")"
for name in "${names[@]}"; do
    sql -c "SET ROLE ks_e2e; SELECT kafka_sink.drop_pipeline('$name')" > /dev/null
done
check "drop_pipeline removes the pipeline's filtered offsets" 0 \
      "$(sql -c "SELECT count(*) FROM kafka_sink.filtered_offsets WHERE pipeline_id IN ($pids)")"

# change events: the filter over the after image; deletes pass
CT="xf_cdc_$SFX"
"$HARNESS" topic-create "$CT" 1 >/dev/null 2>&1 || true
sql >/dev/null <<SQL
SET ROLE ks_e2e;
CREATE TABLE e2e.xfcdc_$SFX (id int PRIMARY KEY, name text, qty int, name_uc text,
                             _kafka_source_position numeric NOT NULL, _kafka_topic text, _kafka_partition int,
                             _kafka_offset bigint, _kafka_batch_id bigint);
SELECT kafka_sink.create_pipeline(name => 'xfcdc_$SFX', bootstrap_servers => '$KS_BOOTSTRAP',
       subscribe => ARRAY['$CT'], target => 'e2e.xfcdc_$SFX', starting_offsets => 'earliest',
       envelope => 'debezium', filter => 'qty > 0', computed => '{"name_uc": "upper(name)"}',
       bronze => 'e2e.xfcdc_${SFX}_raw');
SQL
cev() { cdc_event "$1" "$2" "lsn=$3" --name "$4" --extra "{\"qty\": $5}"; }
crows() { sql -c "SELECT string_agg(id || ':' || coalesce(name, '~') || ':' || coalesce(qty::text, '~') || ':'
                                    || coalesce(name_uc, '~'), ' ' ORDER BY id) FROM e2e.xfcdc_$SFX"; }
{ cev c 1 100 a 5; cev c 2 110 b 3; cev c 3 115 c 0; cev u 1 120 a2 0; cev c 4 125 d 1; } | produce_batch "$CT"
check_caught_up "xfcdc_$SFX"
check "change events: filtered update and create left out, computed from the after image" \
      "1:a:5:A 2:b:3:B 4:d:1:D" "$(crows)"
{ cdc_event d 2 "lsn=130"; cdc_event tomb 2 "lsn=130"; cev u 4 140 d2 7; } | produce_batch "$CT"
check_caught_up "xfcdc_$SFX"
check "change events: a delete passes the filter; a later update applies" "1:a:5:A 4:d2:7:D2" "$(crows)"
check "change events: the filtered ones counted" 2 \
      "$(sql -c "SELECT sum(b.filtered) FROM kafka_sink.batches b JOIN kafka_sink.pipeline_definitions p
                  ON p.id = b.pipeline_id WHERE p.name = 'xfcdc_$SFX'")"
# offsets: 0 c1, 1 c2, 2 c3 (qty 0), 3 u1 (qty 0), 4 c4, 5 d2, 6 its tombstone, 7 u4
check "change events: message_fates says filtered for the two the filter left out, message_fate too" \
      "2 3|filtered filtered" \
      "$(sql -c "SELECT string_agg(\"offset\"::text, ' ' ORDER BY \"offset\") FILTER (WHERE fate = 'filtered') || '|'
                        || (SELECT string_agg(f.fate, ' ') FROM generate_series(2, 3) o,
                                   kafka_sink.message_fate('xfcdc_$SFX', '$CT', 0, o) f)
                   FROM kafka_sink.message_fates('xfcdc_$SFX', '$CT')")"
check "change events: the other fates" "0:applied 1:deleted 4:overwritten 5:deleted 6:superseded 7:applied" \
      "$(sql -c "SELECT string_agg(\"offset\" || ':' || fate, ' ' ORDER BY \"offset\")
                   FROM kafka_sink.message_fates('xfcdc_$SFX', '$CT') WHERE fate <> 'filtered'")"
# the filter altered afterwards: the fates are what the worker did (its
# record), not what the new filter would say of the messages in bronze
sql -c "SET ROLE ks_e2e; SELECT kafka_sink.alter_pipeline('xfcdc_$SFX', filter => 'qty > 6')" > /dev/null
check "change events: after alter_pipeline(filter), the same fates (from the record, not the new filter)" \
      "2:filtered 3:filtered|0:applied 1:deleted 4:overwritten 5:deleted 6:superseded 7:applied|filtered filtered" \
      "$(sql -c "SELECT string_agg(\"offset\" || ':' || fate, ' ' ORDER BY \"offset\") FILTER (WHERE fate = 'filtered') || '|'
                        || string_agg(\"offset\" || ':' || fate, ' ' ORDER BY \"offset\") FILTER (WHERE fate <> 'filtered') || '|'
                        || (SELECT string_agg(f.fate, ' ') FROM generate_series(2, 3) o,
                                   kafka_sink.message_fate('xfcdc_$SFX', '$CT', 0, o) f)
                   FROM kafka_sink.message_fates('xfcdc_$SFX', '$CT')")"
check "... and message_fate of each of the others too" "0:applied 1:deleted 4:overwritten 5:deleted 6:superseded 7:applied" \
      "$(sql -c "SELECT string_agg(o || ':' || f.fate, ' ' ORDER BY o) FROM unnest(ARRAY[0, 1, 4, 5, 6, 7]) o,
                        kafka_sink.message_fate('xfcdc_$SFX', '$CT', 0, o) f")"
# the detail names the filter that ran (recorded with the batch), not the
# pipeline's filter now: the text this script created the pipeline with
check "change events: after alter_pipeline(filter), the detail names the filter that ran and the one now, in both" \
      "2:the pipeline's filter is not true for it: qty > 0 (the filter then; the pipeline's filter now: qty > 6)|2" \
      "$(sql -c "SELECT min(\"offset\" || ':' || detail) FILTER (WHERE fate = 'filtered') || '|'
                        || (SELECT count(*) FROM generate_series(2, 3) o, kafka_sink.message_fate('xfcdc_$SFX', '$CT', 0, o) f
                             WHERE f.detail = (SELECT x.detail FROM kafka_sink.message_fates('xfcdc_$SFX', '$CT', 0, o, o) x)
                               AND f.detail LIKE '%: qty > 0 (%')
                   FROM kafka_sink.message_fates('xfcdc_$SFX', '$CT')")"
sql -c "SET ROLE ks_e2e; SELECT kafka_sink.drop_pipeline('xfcdc_$SFX')" > /dev/null

# a replay that filters: two messages quarantined by a computed column that
# raises; after an alter that fixes it and filters one of them out,
# replay_quarantine applies the other and records the filtered one, which
# message_fate and message_fates then call filtered (the filter of the
# replay named), with and without bronze
RT="xf_rep_$SFX"
"$HARNESS" topic-create "$RT" 1 >/dev/null 2>&1 || true
for rb in raw none; do
    rn="xfrep_${rb}_$SFX"
    extra=""
    [ "$rb" = none ] || extra=", bronze => 'e2e.${rn}_raw'"
    sql >/dev/null <<SQL
SET ROLE ks_e2e;
CREATE TABLE e2e.$rn (id int PRIMARY KEY, v int, inv int,
                      _kafka_topic text, _kafka_partition int, _kafka_offset bigint, _kafka_batch_id bigint);
SELECT kafka_sink.create_pipeline(name => '$rn', bootstrap_servers => '$KS_BOOTSTRAP',
       subscribe => ARRAY['$RT'], target => 'e2e.$rn', starting_offsets => 'earliest', key_format => 'string',
       filter => 'v < 100', computed => '{"inv": "100 / v"}'$extra);
SQL
done
# offsets: 0 id 1 (applies), 1 id 2 v 0 (raises), 2 id 3 v 0 (raises), 3 id 4 v 200 (filtered by the batch)
printf '%s\n' '1|{"id": 1, "v": 4}' '2|{"id": 2, "v": 0}' '3|{"id": 3, "v": 0}' '4|{"id": 4, "v": 200}' | produce "$RT"
for rb in raw none; do
    rn="xfrep_${rb}_$SFX"
    check_caught_up "$rn"
    sql -c "SET ROLE ks_e2e; SELECT kafka_sink.alter_pipeline('$rn', filter => 'id <> 2', computed => '{\"inv\": \"100 / (v + 1)\"}')" > /dev/null
    check "$rn: before the replay, 1 and 2 quarantined, 3 filtered by its batch" "1:quarantined 2:quarantined 3:filtered" \
          "$(sql -c "SELECT string_agg(\"offset\" || ':' || fate, ' ' ORDER BY \"offset\") FROM kafka_sink.message_fates('$rn', '$RT') WHERE \"offset\" > 0")"
    check "$rn: replay_quarantine replays both (the filtered one counted replayed)" "2:0" \
          "$(sql -c "SET ROLE ks_e2e; SELECT replayed || ':' || still_failing FROM kafka_sink.replay_quarantine('$rn')")"
    check "$rn: the replay applied id 3 and left id 2 out" "1:25 3:100" \
          "$(sql -c "SELECT string_agg(id || ':' || inv, ' ' ORDER BY id) FROM e2e.$rn")"
    check "$rn: message_fate and message_fates: the replayed message the filter left out is filtered, naming the replay's filter" \
          "filtered|replayed by replay_quarantine: the pipeline's filter is not true for it: id <> 2|filtered|true" \
          "$(sql -c "SELECT f.fate || '|' || f.detail || '|' || x.fate || '|' || (x.detail = f.detail)
                       FROM kafka_sink.message_fate('$rn', '$RT', 0, 1) f, kafka_sink.message_fates('$rn', '$RT', 0, 1, 1) x")"
    check "$rn: the replayed message that applied is not filtered, nor is the untouched one; the batch's filtered one names its filter" \
          "false|false|true" \
          "$(sql -c "SELECT (SELECT fate = 'filtered' FROM kafka_sink.message_fate('$rn', '$RT', 0, 2)) || '|'
                         || (SELECT fate = 'filtered' FROM kafka_sink.message_fates('$rn', '$RT', 0, 0, 0)) || '|'
                         || (SELECT detail = 'the pipeline''s filter is not true for it: v < 100 (the filter then; the pipeline''s filter now: id <> 2)'
                               FROM kafka_sink.message_fate('$rn', '$RT', 0, 3))")"
    sql -c "SET ROLE ks_e2e; SELECT kafka_sink.alter_pipeline('$rn', filter => '')" > /dev/null
    check "$rn: the filter removed since: the replay's filter still named" \
          "replayed by replay_quarantine: the pipeline's filter is not true for it: id <> 2 (the filter then; the pipeline has no filter now)" \
          "$(sql -c "SELECT detail FROM kafka_sink.message_fates('$rn', '$RT', 0, 1, 1)")"
    sql -c "SET ROLE ks_e2e; SELECT kafka_sink.drop_pipeline('$rn')" > /dev/null
done

# an expression whose constant part raises when PostgreSQL plans it (1/0,
# ('x' || '')::integer, a CASE branch that is constant): create_pipeline's
# check runs nothing, so it passes; in the worker it raises for every row
# alike, so every message of the batch is quarantined as expression_error
# (the detail says so), the pipeline goes on, and after alter_pipeline
# fixes the expression replay_quarantine applies them; plain and routed
FT="xffold_$SFX"
"$HARNESS" topic-create "$FT" 1 >/dev/null 2>&1 || true
fold_kinds=(plain_computed routed_filter plain_case)
fold_bad=("computed => '{\"w\": \"v + 1/0\"}'"
          "filter => 'v > (''x'' || '''')::integer'"
          "filter => 'CASE WHEN v > 100 THEN 1/0 = 1 ELSE true END'")
fold_fix=("computed => '{\"w\": \"v + 1\"}'"
          "filter => 'v > 0'"
          "filter => 'v > 0'")
fold_why=('division by zero' 'invalid input syntax for type integer' 'division by zero')
fold_table() { if [ "$1" = routed_filter ]; then echo "e2e.$FT"; else echo "e2e.xffold_${1}_$SFX"; fi; }
for i in "${!fold_kinds[@]}"; do
    fn="xffold_${fold_kinds[$i]}_$SFX"
    target="$(fold_table "${fold_kinds[$i]}")"
    [ "${fold_kinds[$i]}" = routed_filter ] && target="e2e.{topic}"
    sql >/dev/null <<SQL
SET ROLE ks_e2e;
CREATE TABLE $(fold_table "${fold_kinds[$i]}") (id int PRIMARY KEY, v int, w int);
SELECT kafka_sink.create_pipeline(name => '$fn', bootstrap_servers => '$KS_BOOTSTRAP',
       subscribe => ARRAY['$FT'], target => '$target', starting_offsets => 'earliest', key_format => 'string',
       trigger_interval => '0', ${fold_bad[$i]});
SQL
done
printf '%s\n' '1|{"id": 1, "v": 1}' '2|{"id": 2, "v": 2}' '3|{"id": 3, "v": 3}' | produce "$FT"
for i in "${!fold_kinds[@]}"; do
    fn="xffold_${fold_kinds[$i]}_$SFX"
    table="$(fold_table "${fold_kinds[$i]}")"
    check_caught_up "$fn"
    check "$fn: a constant part that raises when planned: running, every message quarantined as expression_error, nothing written" \
          "running:3:3:0" \
          "$(sql -c "SELECT s.state || ':'
                         || (SELECT count(*) FROM kafka_sink.quarantine q WHERE q.pipeline_id = p.id
                              AND q.reason = 'expression_error' AND q.detail LIKE '%raised when planned%${fold_why[$i]}%') || ':'
                         || (SELECT sum(o.next_offset) FROM kafka_sink.offsets o WHERE o.pipeline_id = p.id) || ':'
                         || (SELECT count(*) FROM $table)
                       FROM kafka_sink.status s JOIN kafka_sink.pipeline_definitions p ON p.name = s.name
                      WHERE s.name = '$fn'")"
    sql -c "SET ROLE ks_e2e; SELECT kafka_sink.alter_pipeline('$fn', ${fold_fix[$i]})" > /dev/null
    check "$fn: after alter_pipeline, replay_quarantine applies the three" "3:0" \
          "$(sql -c "SET ROLE ks_e2e; SELECT replayed || ':' || still_failing FROM kafka_sink.replay_quarantine('$fn')")"
    want="1: 2: 3:"
    [ "${fold_kinds[$i]}" = plain_computed ] && want="1:2 2:3 3:4"
    check "$fn: the replayed rows" "$want" \
          "$(sql -c "SELECT string_agg(id || ':' || coalesce(w::text, ''), ' ' ORDER BY id) FROM $table")"
    sql -c "SET ROLE ks_e2e; SELECT kafka_sink.drop_pipeline('$fn')" > /dev/null
done
# a pipeline goes on after the alter: the next batch applies with the new expression
echo '4|{"id": 4, "v": 4}' | produce "$FT"
sql >/dev/null <<SQL
SET ROLE ks_e2e;
SELECT kafka_sink.create_pipeline(name => 'xffold_after_$SFX', bootstrap_servers => '$KS_BOOTSTRAP',
       subscribe => ARRAY['$FT'], target => '$(fold_table plain_computed)', starting_offsets => 'earliest',
       key_format => 'string', trigger_interval => '0', computed => '{"w": "v + 1/0"}');
SQL
check_caught_up "xffold_after_$SFX"
sql -c "SET ROLE ks_e2e; SELECT kafka_sink.alter_pipeline('xffold_after_$SFX', computed => '{\"w\": \"v * 10\"}')" > /dev/null
echo '5|{"id": 5, "v": 5}' | produce "$FT"
check_caught_up "xffold_after_$SFX"
check "after the alter, the next batch applies with the new expression (the four quarantined stay until replayed)" \
      "1:2 2:3 3:4 5:50|4" \
      "$(sql -c "SELECT string_agg(id || ':' || w, ' ' ORDER BY id) || '|'
                     || (SELECT count(*) FROM kafka_sink.quarantine q JOIN kafka_sink.pipeline_definitions p
                          ON p.id = q.pipeline_id WHERE p.name = 'xffold_after_$SFX')
                   FROM $(fold_table plain_computed)")"
sql -c "SET ROLE ks_e2e; SELECT kafka_sink.drop_pipeline('xffold_after_$SFX')" > /dev/null

# the expression runs as the owner and nothing else: another role's table
# read through the owner's own (SECURITY INVOKER) function fails the pipeline
ST="xf_sec_$SFX"
"$HARNESS" topic-create "$ST" 1 >/dev/null 2>&1 || true
sql >/dev/null <<SQL
SET client_min_messages = warning;
DROP ROLE IF EXISTS ks_xf_other_$SFX;
CREATE ROLE ks_xf_other_$SFX;
CREATE SCHEMA xf_other_$SFX AUTHORIZATION ks_xf_other_$SFX;
GRANT USAGE ON SCHEMA xf_other_$SFX TO ks_e2e;
SET ROLE ks_xf_other_$SFX;
CREATE TABLE xf_other_$SFX.secret (id int, s text);
INSERT INTO xf_other_$SFX.secret VALUES (1, 'hidden');
RESET ROLE;
SET ROLE ks_e2e;
CREATE FUNCTION e2e.peek_$SFX(int) RETURNS text LANGUAGE sql IMMUTABLE
    AS \$\$ SELECT s FROM xf_other_$SFX.secret WHERE id = \$1 \$\$;
CREATE TABLE e2e.xfsec_$SFX (id int PRIMARY KEY, v text, leaked text);
SELECT kafka_sink.create_pipeline(name => 'xfsec_$SFX', bootstrap_servers => '$KS_BOOTSTRAP',
       subscribe => ARRAY['$ST'], target => 'e2e.xfsec_$SFX', starting_offsets => 'earliest',
       computed => '{"leaked": "e2e.peek_$SFX(id)"}');
SQL
echo '1|{"id": 1, "v": "x"}' | produce "$ST"
poll "SELECT state = 'failed' FROM kafka_sink.status WHERE name = 'xfsec_$SFX'" 60 >/dev/null || true
check "another role's table through the owner's function: the pipeline fails with permission denied" \
      "failed:true" \
      "$(sql -c "SELECT state || ':' || (last_error LIKE '%permission denied for table secret%')
                   FROM kafka_sink.status WHERE name = 'xfsec_$SFX'")"
check "... writing, quarantining and checkpointing nothing" "0:0:0" \
      "$(sql -c "SELECT (SELECT count(*) FROM e2e.xfsec_$SFX) || ':'
                     || (SELECT count(*) FROM kafka_sink.quarantine q JOIN kafka_sink.pipeline_definitions p
                          ON p.id = q.pipeline_id WHERE p.name = 'xfsec_$SFX') || ':'
                     || coalesce((SELECT sum(o.next_offset) FROM kafka_sink.offsets o
                          JOIN kafka_sink.pipeline_definitions p ON p.id = o.pipeline_id
                         WHERE p.name = 'xfsec_$SFX'), 0)")"
sql >/dev/null <<SQL
SET ROLE ks_e2e;
SELECT kafka_sink.drop_pipeline('xfsec_$SFX');
RESET ROLE;
DROP SCHEMA xf_other_$SFX CASCADE;
DROP ROLE ks_xf_other_$SFX;
SQL
finish
