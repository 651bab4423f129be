#!/usr/bin/env bash
# test/e2e/routed_modes.sh — write modes, filter and computed columns on
# routed pipelines (issue 26; docs/routing.md, docs/write-modes.md,
# docs/transform.md), each routed table against a model computed
# independently of the extension:
#  - write_mode insert_only, update_only (with tombstones) and update_only
#    without deletes, each one pipeline routing 'e2e.{topic}' over three
#    topics of two partitions into three tables (write_modes_model.py per
#    topic, update_only tables seeded first), its worker killed with
#    SIGKILL while it runs: every table equals its topic's model, the fate
#    of every offset (message_fate and message_fates) is one the model
#    allows, update_only inserts nothing, one message per batch counts the
#    model's skipped messages, insert_only counts the others superseded;
#  - filter and computed columns on 'e2e.{topic}' over three topics
#    (transform_model.py per topic): every table equals its model, the
#    quarantine holds exactly the model's expression_error offsets,
#    filtered messages are counted, recorded in kafka_sink.filtered_offsets
#    and have the fate filtered (both functions), and so does every other
#    offset's fate; with the record removed, filtered is told from bronze;
#  - Debezium change events of three source tables routed by
#    'schema.{source.table}' (routed_cdc_model.py), with the filter and a
#    computed column, upsert and update_only: one table lacks the computed
#    column, so its messages are quarantined as target_refused (with a
#    detail naming the expression's problem) while the other tables go on;
#    alter_pipeline refuses a filter that table cannot take; once the
#    column is added, replay_quarantine lands them and every table equals
#    the model, every offset's fate the model's;
#  - create_pipeline checks the routed tables that exist: a computed column
#    one of them lacks, a soft-delete table without its mark.
# shellcheck source=../lib/common.sh
. "$(dirname "$0")/../lib/common.sh"
setup_owner
W="$KS_RUN/routed_modes.$SFX"
mkdir -p "$W"
seed="${KS_ROUTED_MODES_SEED:-$((RANDOM * 32768 + RANDOM))}"
echo "# seed $seed (KS_ROUTED_MODES_SEED to replay)"
# part NAME: whether this run does part NAME (KS_ROUTED_MODES_PARTS: "wm xf cdc", the default)
part() { [[ " ${KS_ROUTED_MODES_PARTS:-wm xf cdc} " = *" $1 "* ]]; }
LIN="_kafka_partition integer, _kafka_offset bigint, _kafka_topic text, _kafka_batch_id bigint"

pipeline_sum() { # PIPELINE COLUMN: the column summed over its batches
    sql -c "SELECT coalesce(sum(b.$2), 0) FROM kafka_sink.batches b JOIN kafka_sink.pipeline_definitions p
             ON p.id = b.pipeline_id WHERE p.name = '$1'"
}
quarantined() { # PIPELINE [WHERE]: its quarantine rows not replayed
    sql -c "SELECT count(*) FROM kafka_sink.quarantine q JOIN kafka_sink.pipeline_definitions p
             ON p.id = q.pipeline_id WHERE p.name = '$1' AND q.replayed_at IS NULL ${2:+AND $2}"
}

# ---- write modes: 'e2e.{topic}' over three topics ------------------------------
wm_run() { # MODE: insert_only | update_only | update_nodel; MAX: max_offsets_per_batch
    local mode="$1" max="$2" name="rmw${1:0:3}${1: -3}$SFX" wm="${1/update_nodel/update_only}"
    local opts="" n=0 k topic topics="" keys=0
    [ "$mode" = update_only ] && opts="key_format => 'string', delete_on_tombstone => true,"
    [ "$mode" = update_nodel ] && opts="key_format => 'string',"
    for k in 0 1 2; do
        topic="${name}_t$k"
        mkdir -p "$W/$name.$k"
        python3 "$E2E_DIR/write_modes_model.py" gen "$mode" "$((seed + k))" "$W/$name.$k"
        "$HARNESS" topic-create "$topic" 2 >/dev/null 2>&1 || true
        kcat -P -b "$KS_BOOTSTRAP" -t "$topic" -p 0 -K $'\t' -Z < "$W/$name.$k/p0"
        kcat -P -b "$KS_BOOTSTRAP" -t "$topic" -p 1 -K $'\t' -Z < "$W/$name.$k/p1"
        kcat -C -b "$KS_BOOTSTRAP" -t "$topic" -o beginning -e -q -f '%p\t%o\t%k\t%s\n' > "$W/$name.$k/rb"
        n=$((n + $(wc -l < "$W/$name.$k/rb")))
        python3 "$E2E_DIR/write_modes_model.py" expect "$mode" "$W/$name.$k/rb" "$W/$name.$k" "$W/$name.$k/expected" ||
            check "seed $seed ($mode): the model of topic $k ran" 0 1
        keys=$((keys + $(wc -l < "$W/$name.$k/expected")))
        topics="$topics${topics:+, }'$topic'"
        sql >/dev/null <<SQL
SET ROLE ks_e2e;
CREATE TABLE e2e.$topic (id bigint PRIMARY KEY, v bigint, a text DEFAULT 'none', b text, $LIN);
$( [[ "$mode" = update_* ]] && sed "s/@T@/e2e.$topic/" "$W/$name.$k/seed.sql" )
SQL
    done
    sql >/dev/null <<SQL
SET ROLE ks_e2e;
SELECT kafka_sink.create_pipeline(name => '$name', bootstrap_servers => '$KS_BOOTSTRAP',
    subscribe => ARRAY[$topics], target => 'e2e.{topic}', order_column => 'v', $opts write_mode => '$wm',
    starting_offsets => 'earliest', max_offsets_per_batch => $max, trigger_interval => '0',
    bronze => 'e2e.${name}_raw');
SQL
    sigkill_worker "$name" 1
    local what="seed $seed ($mode, routed over 3 topics, max_offsets_per_batch $max)"
    if ! poll "$(done_sql "$name" "$n")" 300; then
        check "$what: consumed the topics" t f
        return
    fi
    for k in 0 1 2; do
        topic="${name}_t$k"
        sql -c "COPY (SELECT id, v, a, b, _kafka_partition, _kafka_offset FROM e2e.$topic ORDER BY id) TO STDOUT" \
            > "$W/$name.$k/actual"
        check_model "$what: table $k equals its topic's model" "$W/$name.$k/expected" "$W/$name.$k/actual"
        check_fates "$what: message_fate and message_fates give every offset of topic $k a fate its model allows" \
                    "$name" "$topic" "$W/$name.$k/expected.fates"
    done
    check "$what: quarantined nothing" 0 "$(quarantined "$name")"
    if [[ "$mode" = update_* ]]; then
        check "$what: inserted nothing" 0 "$(pipeline_sum "$name" inserted)"
        if [ "$max" = 1 ]; then
            check "$what: batches.skipped counts the models' skipped messages" \
                  "$(cat "$W/$name".*/expected.stats | sed -n 's/.*skipped=\([0-9]*\).*/\1/p' | awk '{ s += $1 } END { print s + 0 }')" \
                  "$(pipeline_sum "$name" skipped)"
        fi
        check "$what: the models skipped keys not in the tables and applied others" t \
              "$(grep -qE 'applied=[1-9].* skipped=[1-9]' "$W/$name".*/expected.stats && echo t || echo f)"
    else
        check "$what: $keys keys inserted, each of the $n events inserted, updated or superseded" \
              "$keys $n" "$(pipeline_sum "$name" inserted) $(pipeline_sum "$name" "inserted + updated + superseded")"
        check "$what: an earlier event arrived after a later one of its key" t \
              "$(grep -qv 'late_earlier=0' "$W/$name".*/expected.stats && echo t || echo f)"
    fi
    sql -c "SET ROLE ks_e2e; SELECT kafka_sink.drop_pipeline('$name')" > /dev/null
}

part wm && {
    wm_run insert_only "$((RANDOM % 6 + 2))"
    wm_run update_only "$((RANDOM % 6 + 2))"
    wm_run update_nodel 1
}

part xf && {
# ---- filter and computed: 'e2e.{topic}' over three topics -----------------------
XN="${KS_ROUTED_MODES_MESSAGES:-600}"
XP="rmx$SFX"
topics=""
for k in 0 1 2; do
    topic="${XP}_t$k"
    mkdir -p "$W/$XP.$k"
    python3 "$E2E_DIR/transform_model.py" gen "$((seed + 10 + k))" "$XN" "$W/$XP.$k/msgs"
    python3 "$E2E_DIR/transform_model.py" expect "$W/$XP.$k/msgs" "$W/$XP.$k/rows" "$W/$XP.$k/quar" \
            "$W/$XP.$k/filtered" "$W/$XP.$k/applied"
    "$HARNESS" topic-create "$topic" 1 >/dev/null 2>&1 || true
    produce "$topic" -p 0 < "$W/$XP.$k/msgs"
    topics="$topics${topics:+, }'$topic'"
    sql >/dev/null <<SQL
SET ROLE ks_e2e;
CREATE TABLE e2e.$topic (id bigint PRIMARY KEY, ts bigint NOT NULL, price numeric, qty int,
                         email text, total numeric(12, 2), email_lc text NOT NULL, cents_each int, $LIN);
SQL
done
sql >/dev/null <<SQL
SET ROLE ks_e2e;
SELECT kafka_sink.create_pipeline(name => '$XP', bootstrap_servers => '$KS_BOOTSTRAP',
    subscribe => ARRAY[$topics], target => 'e2e.{topic}', order_column => 'ts',
    key_format => 'string', starting_offsets => 'earliest', max_offsets_per_batch => 97,
    trigger_interval => '0', bronze => 'e2e.${XP}_raw',
    filter => 'price > 0 AND email IS NOT NULL',
    computed => '{"total": "price * qty", "email_lc": "lower(email)", "cents_each": "(price * 100)::int / qty"}');
SQL
if poll "$(done_sql "$XP" "$((3 * XN))")" 300; then
    fsum=0
    for k in 0 1 2; do
        topic="${XP}_t$k"
        sql -c "COPY (SELECT id, ts, price, qty, email, total, email_lc, cents_each FROM e2e.$topic ORDER BY id) TO STDOUT" \
            > "$W/$XP.$k/actual"
        check_model "filter and computed, routed: table $k equals its topic's model row by row" \
                    "$W/$XP.$k/rows" "$W/$XP.$k/actual"
        check "filter and computed, routed: topic $k's quarantine is exactly the model's expression_error offsets" \
              "$(tr '\n' ' ' < "$W/$XP.$k/quar")" \
              "$(sql -c "SELECT coalesce(string_agg(q.message_offset || ' ', '' ORDER BY q.message_offset), '')
                           FROM kafka_sink.quarantine q JOIN kafka_sink.pipeline_definitions p ON p.id = q.pipeline_id
                          WHERE p.name = '$XP' AND q.topic = '$topic' AND q.reason = 'expression_error'
                            AND q.target = 'e2e.$topic'
                            AND q.detail = 'computed column \"cents_each\" raised: division by zero'")"
        check "filter and computed, routed: filtered_offsets holds topic $k's filtered offsets, once each" \
              "$(sort -n "$W/$XP.$k/filtered" | tr '\n' ' ')" \
              "$(sql -c "SELECT coalesce(string_agg(o || ' ', '' ORDER BY o), '')
                           FROM kafka_sink.filtered_offsets fo JOIN kafka_sink.pipeline_definitions p ON p.id = fo.pipeline_id,
                                unnest(fo.offsets) o WHERE p.name = '$XP' AND fo.topic = '$topic'")"
        python3 "$E2E_DIR/transform_model.py" fates "$XN" "$W/$XP.$k/filtered" "$W/$XP.$k/quar" \
                "$W/$XP.$k/applied" "$W/$XP.$k/fates"
        check_fates "filter and computed, routed: every offset of topic $k has its model's fate (filtered told apart, in both)" \
                    "$XP" "$topic" "$W/$XP.$k/fates"
        check "filter and computed, routed: message_fate names topic $k's table for a filtered message" "e2e.$topic" \
              "$(sql -c "SELECT f.target FROM kafka_sink.message_fate('$XP', '$topic', 0, $(head -1 "$W/$XP.$k/filtered")) f")"
        fsum=$((fsum + $(wc -l < "$W/$XP.$k/filtered")))
    done
    check "filter and computed, routed: batches count the models' filtered messages" "$fsum" \
          "$(pipeline_sum "$XP" filtered)"
    check "filter and computed, routed: nothing else quarantined" 0 "$(quarantined "$XP" "q.reason <> 'expression_error'")"
    # no record of the filtered offsets (a batch before 0.3.0): the filter
    # asked again of each message in bronze, in the table its routing names
    sql -c "DELETE FROM kafka_sink.filtered_offsets fo USING kafka_sink.pipeline_definitions p
             WHERE p.id = fo.pipeline_id AND p.name = '$XP'" > /dev/null
    for k in 0 2; do
        check_fates "filter and computed, routed, without filtered_offsets: topic $k's fates, filtered told from bronze" \
                    "$XP" "${XP}_t$k" "$W/$XP.$k/fates"
    done
else
    check "filter and computed, routed: consumed the topics" t f
fi
sql -c "SET ROLE ks_e2e; SELECT kafka_sink.drop_pipeline('$XP')" > /dev/null

}
part cdc && {
# ---- Debezium, 'schema.{source.table}': upsert and update_only ------------------
CT="rmc$SFX"
"$HARNESS" topic-create "$CT" 1 >/dev/null 2>&1 || true
python3 "$E2E_DIR/routed_cdc_model.py" gen "$((seed + 20))" "$W/cdc.events"
produce "$CT" -p 0 -Z < "$W/cdc.events"
CN="$(wc -l < "$W/cdc.events")"
cdc_cols="id int PRIMARY KEY, name text, qty int, name_uc text, _kafka_source_position numeric NOT NULL, $LIN"
for variant in upsert update_only; do
    mkdir -p "$W/cdc.$variant"
    python3 "$E2E_DIR/routed_cdc_model.py" expect "$variant" "$W/cdc.events" "$W/cdc.$variant"
done
sql >/dev/null <<SQL
CREATE SCHEMA rmcu_$SFX AUTHORIZATION ks_e2e;
CREATE SCHEMA rmco_$SFX AUTHORIZATION ks_e2e;
SET ROLE ks_e2e;
CREATE TABLE rmcu_$SFX.ta ($cdc_cols);
CREATE TABLE rmcu_$SFX.tb ($cdc_cols);
-- tc lacks the computed column name_uc: its messages are quarantined
CREATE TABLE rmcu_$SFX.tc (id int PRIMARY KEY, name text, qty int, _kafka_source_position numeric NOT NULL, $LIN);
CREATE TABLE rmco_$SFX.ta ($cdc_cols);
CREATE TABLE rmco_$SFX.tb ($cdc_cols);
CREATE TABLE rmco_$SFX.tc ($cdc_cols);
INSERT INTO rmco_$SFX.ta (id, name, qty, name_uc, _kafka_source_position)
     VALUES (1, 'seed1', 1, 'SEED1', 0), (2, 'seed2', 2, 'SEED2', 0), (3, 'seed3', 3, 'SEED3', 0);
INSERT INTO rmco_$SFX.tb SELECT * FROM rmco_$SFX.ta;
INSERT INTO rmco_$SFX.tc SELECT * FROM rmco_$SFX.ta;
SQL
# create_pipeline checks the routed tables that exist: the template names
# none yet (it reads the value), a targets map does
check "create_pipeline: a targets map's existing table without the computed column is refused (42703)" \
      "42703: computed column \"name_uc\" is not a column of target rmcu_$SFX.tc" \
      "$(sql -c "SET ROLE ks_e2e" -c "DO \$\$ BEGIN PERFORM kafka_sink.create_pipeline(name => 'rmcx_$SFX',
                    bootstrap_servers => '$KS_BOOTSTRAP', subscribe => ARRAY['$CT'], start => false,
                    targets => '{\"public.ta\": \"rmcu_$SFX.ta\", \"public.tc\": \"rmcu_$SFX.tc\"}',
                    envelope => 'debezium', computed => '{\"name_uc\": \"upper(name)\"}');
                 EXCEPTION WHEN OTHERS THEN RAISE NOTICE '%: %', SQLSTATE, SQLERRM; END \$\$" 2>&1 | sed -n 's/^NOTICE:  //p')"
check "create_pipeline: delete_mode soft with a targets map's existing table without its mark is refused (42P16)" \
      "42P16: delete_mode soft needs a column _deleted boolean or _deleted_at timestamptz in rmcu_$SFX.ta" \
      "$(sql -c "SET ROLE ks_e2e" -c "DO \$\$ BEGIN PERFORM kafka_sink.create_pipeline(name => 'rmcx_$SFX',
                    bootstrap_servers => '$KS_BOOTSTRAP', subscribe => ARRAY['$CT'], start => false,
                    targets => '{\"public.ta\": \"rmcu_$SFX.ta\"}', envelope => 'debezium', delete_mode => 'soft');
                 EXCEPTION WHEN OTHERS THEN RAISE NOTICE '%: %', SQLSTATE, SQLERRM; END \$\$" 2>&1 | sed -n 's/^NOTICE:  //p')"
sql >/dev/null <<SQL
SET ROLE ks_e2e;
SELECT kafka_sink.create_pipeline(name => 'rmcu_$SFX', bootstrap_servers => '$KS_BOOTSTRAP',
    subscribe => ARRAY['$CT'], target => 'rmcu_$SFX.{source.table}', envelope => 'debezium',
    starting_offsets => 'earliest', max_offsets_per_batch => 13, trigger_interval => '0',
    bronze => 'rmcu_$SFX.raw', filter => 'qty > 0', computed => '{"name_uc": "upper(name)"}');
SELECT kafka_sink.create_pipeline(name => 'rmco_$SFX', bootstrap_servers => '$KS_BOOTSTRAP',
    subscribe => ARRAY['$CT'], target => 'rmco_$SFX.{source.table}', envelope => 'debezium',
    starting_offsets => 'earliest', max_offsets_per_batch => 17, trigger_interval => '0',
    bronze => 'rmco_$SFX.raw', filter => 'qty > 0', computed => '{"name_uc": "upper(name)"}',
    write_mode => 'update_only');
SQL
cdc_rows() { # SCHEMA TABLE
    sql -c "COPY (SELECT id, name, qty, name_uc FROM $1.$2 ORDER BY id) TO STDOUT"
}
cdc_tables() { # VARIANT SCHEMA [TABLES]: each table against the model
    local t
    for t in ${3:-ta tb tc}; do
        cdc_rows "$2" "$t" > "$W/cdc.$1/$t.actual"
        check_model "change events ($1), '$2.{source.table}': table $t equals the model" \
                    "$W/cdc.$1/$t.rows" "$W/cdc.$1/$t.actual"
    done
}
if poll "$(done_sql "rmcu_$SFX" "$CN")" 300 && poll "$(done_sql "rmco_$SFX" "$CN")" 300; then
    # tc: every message of it quarantined as target_refused, the others applied
    tc_offsets="$(awk -F'\t' '$2 == "tc" { sub(/^0:/, "", $1); printf "%s ", $1 }' "$W/cdc.upsert/tables")"
    check "change events: tc's messages quarantined as target_refused, the detail naming the expression's problem" \
          "$tc_offsets" \
          "$(sql -c "SELECT coalesce(string_agg(q.message_offset || ' ', '' ORDER BY q.message_offset), '')
                       FROM kafka_sink.quarantine q JOIN kafka_sink.pipeline_definitions p ON p.id = q.pipeline_id
                      WHERE p.name = 'rmcu_$SFX' AND q.reason = 'target_refused' AND q.target = 'rmcu_$SFX.tc'
                        AND q.detail LIKE 'computed column \"name_uc\" is not a column of target rmcu_$SFX.tc%'")"
    check "change events: nothing else quarantined" "0 0" \
          "$(quarantined "rmcu_$SFX" "q.target <> 'rmcu_$SFX.tc'") $(quarantined "rmco_$SFX")"
    check "change events: the pipeline goes on (running, caught up)" running \
          "$(sql -c "SELECT state FROM kafka_sink.status WHERE name = 'rmcu_$SFX'")"
    cdc_tables upsert "rmcu_$SFX" "ta tb"
    cdc_tables update_only "rmco_$SFX"
    awk -F'\t' -v t="$W/cdc.upsert/tables" 'BEGIN { while ((getline l < t) > 0) { split(l, x, "\t"); tab[x[1]] = x[2] } }
         { print $1 "\t" (tab[$1] == "tc" ? "quarantined" : $2) }' "$W/cdc.upsert/fates" > "$W/cdc.upsert/fates.before"
    check_fates "change events (upsert): every offset's fate, tc's quarantined" "rmcu_$SFX" "$CT" "$W/cdc.upsert/fates.before"
    check_fates "change events (update_only): every offset's fate the model's (skipped, filtered told apart)" \
                "rmco_$SFX" "$CT" "$W/cdc.update_only/fates"
    check "change events: the models filtered, skipped and deleted" t \
          "$(grep -qE 'deleted=[1-9].*filtered=[1-9].*skipped=[1-9]' "$W/cdc.update_only/stats" && echo t || echo f)"
    check "change events (update_only): inserted nothing" 0 "$(pipeline_sum "rmco_$SFX" inserted)"
    # alter_pipeline checks the tables its targets map names, as create does
    check "alter_pipeline: a filter an existing routed table cannot take is refused" \
          "42703: the filter refers to column \"nope\", which target rmcu_$SFX.ta does not have" \
          "$(sql -c "SET ROLE ks_e2e" -c "DO \$\$ BEGIN PERFORM kafka_sink.alter_pipeline('rmcu_$SFX',
                        targets => '{\"public.ta\": \"rmcu_$SFX.ta\"}', filter => 'nope > 0');
                     EXCEPTION WHEN OTHERS THEN RAISE NOTICE '%: %', SQLSTATE, SQLERRM; END \$\$" 2>&1 | sed -n 's/^NOTICE:  //p')"
    # the table fixed, its messages replayed: the model's rows
    sql -c "ALTER TABLE rmcu_$SFX.tc ADD COLUMN name_uc text" > /dev/null
    check "replay_quarantine lands tc's messages once the column exists" "$(echo "$tc_offsets" | wc -w)|0" \
          "$(sql -c "SET ROLE ks_e2e" -c "SELECT replayed || '|' || still_failing FROM kafka_sink.replay_quarantine('rmcu_$SFX')")"
    cdc_tables upsert "rmcu_$SFX"
    check_fates "change events (upsert): after the replay every offset's fate is the model's" \
                "rmcu_$SFX" "$CT" "$W/cdc.upsert/fates"
else
    check "change events: both pipelines consumed the topic" t f
fi
for p in "rmcu_$SFX" "rmco_$SFX"; do
    sql -c "SET ROLE ks_e2e; SELECT kafka_sink.drop_pipeline('$p')" > /dev/null
done
}
finish
