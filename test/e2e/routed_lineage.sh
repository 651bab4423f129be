#!/usr/bin/env bash
# routed_lineage: kafka_sink.lineage(pipeline, key, target) for a routed
# pipeline (target template over source.table, envelope debezium, keyed on
# each table's primary key) and for a single-target change-event pipeline:
#  - without target, a routed pipeline's call says it routes to many tables
#    and names the tables its retained batches wrote;
#  - with one of them, the message and batch that wrote the key's row;
#  - a table the pipeline does not write is refused (never a way to read
#    another table), for a routed and for a single-target pipeline;
#  - the two-argument call on a single-target pipeline keeps working.
# Before this piece lineage had no target argument and raised "has no
# keyed target" for the routed pipeline.
. "$(dirname "$0")/../lib/common.sh"
setup_owner
TR="e2e_rlin_$SFX"
T1="e2e_rlin1_$SFX"
for t in "$TR" "$T1"; do "$HARNESS" topic-create "$t" 1 >/dev/null 2>&1; done

# ev OP ID LSN TABLE: one change event line "key|value"
ev() { cdc_event "$1" "$2" "lsn=$3" --table "$4"; }
# err SQL: the error message (and its detail) of a statement run as ks_e2e
err() { sql -c "SET ROLE ks_e2e" -c "$1" 2>&1 | sed -n 's/^\(ERROR\|DETAIL\):  //p' | paste -sd'|'; }
as_owner() { sql -c "SET ROLE ks_e2e" -c "$1"; }
LIN="_kafka_topic text, _kafka_partition int, _kafka_offset bigint, _kafka_batch_id bigint, _kafka_source_position numeric"

sql >/dev/null <<SQL
CREATE TABLE e2e.rla_$SFX (id int PRIMARY KEY, name text, $LIN);
CREATE TABLE e2e.rlb_$SFX (id int PRIMARY KEY, name text, $LIN);
CREATE TABLE e2e.rlo_$SFX (id int PRIMARY KEY, name text, $LIN);
CREATE TABLE e2e.rl1_$SFX (id int PRIMARY KEY, name text, $LIN);
ALTER TABLE e2e.rla_$SFX OWNER TO ks_e2e;
ALTER TABLE e2e.rlb_$SFX OWNER TO ks_e2e;
ALTER TABLE e2e.rlo_$SFX OWNER TO ks_e2e;
ALTER TABLE e2e.rl1_$SFX OWNER TO ks_e2e;
INSERT INTO e2e.rlo_$SFX VALUES (1, 'other', 'secret', 0, 7, 1, 0);
SET ROLE ks_e2e;
SELECT kafka_sink.create_pipeline(name => 'rl_$SFX', bootstrap_servers => '$KS_BOOTSTRAP',
       subscribe => ARRAY['$TR'], target => 'e2e.{source.table}', starting_offsets => 'earliest',
       envelope => 'debezium', bronze => 'e2e.rl_raw_$SFX');
SELECT kafka_sink.create_pipeline(name => 'rl1_$SFX', bootstrap_servers => '$KS_BOOTSTRAP',
       subscribe => ARRAY['$T1'], target => 'e2e.rl1_$SFX', starting_offsets => 'earliest',
       envelope => 'debezium', bronze => 'e2e.rl1_raw_$SFX');
SQL

# offsets 0: 1 into rla; 1: 2 into rlb; 2: update of 1 in rla
{ ev c 1 100 "rla_$SFX"; ev c 2 110 "rlb_$SFX"; ev u 1 120 "rla_$SFX"; } | produce_batch "$TR"
{ ev c 5 100 x; ev u 5 110 x; } | produce_batch "$T1"
check_caught_up "rl_$SFX"
check_caught_up "rl1_$SFX"

check "routed, no target: refused, naming the tables it wrote" \
      "pipeline \"rl_$SFX\" routes to many tables|It wrote e2e.rla_$SFX, e2e.rlb_$SFX." \
      "$(err "SELECT * FROM kafka_sink.lineage('rl_$SFX', '{\"id\": 1}')")"
check "routed, target rla: the last message that wrote key 1, its batch and raw message" \
      "$TR|0|2|true|true|n1@120" \
      "$(as_owner "SELECT topic || '|' || partition || '|' || \"offset\" || '|' || (batch_id IS NOT NULL) || '|' || (batch_committed_at IS NOT NULL)
                          || '|' || (convert_from(message_value, 'UTF8')::jsonb->'after'->>'name')
                     FROM kafka_sink.lineage('rl_$SFX', '{\"id\": 1}', 'e2e.rla_$SFX')")"
check "routed, target rlb: key 2" "1" \
      "$(as_owner "SELECT \"offset\" FROM kafka_sink.lineage('rl_$SFX', '{\"id\": 2}', 'e2e.rlb_$SFX')")"
check "routed, a key the table does not hold: no row" "0" \
      "$(as_owner "SELECT count(*) FROM kafka_sink.lineage('rl_$SFX', '{\"id\": 2}', 'e2e.rla_$SFX')")"
check "routed, a table it does not write: refused (its rows are not read)" \
      "pipeline \"rl_$SFX\" does not write e2e.rlo_$SFX|It wrote e2e.rla_$SFX, e2e.rlb_$SFX." \
      "$(err "SELECT * FROM kafka_sink.lineage('rl_$SFX', '{\"id\": 1}', 'e2e.rlo_$SFX')")"
check "single target, two arguments: as before (keyed on the primary key for change events)" "$T1|1" \
      "$(as_owner "SELECT topic || '|' || \"offset\" FROM kafka_sink.lineage('rl1_$SFX', '{\"id\": 5}')")"
check "single target, its own table named: the same" "1" \
      "$(as_owner "SELECT \"offset\" FROM kafka_sink.lineage('rl1_$SFX', '{\"id\": 5}', 'e2e.rl1_$SFX')")"
check "single target, another table: refused" \
      "pipeline \"rl1_$SFX\" does not write e2e.rlo_$SFX" \
      "$(err "SELECT * FROM kafka_sink.lineage('rl1_$SFX', '{\"id\": 1}', 'e2e.rlo_$SFX')")"
# the caller's own rights on the table apply (not SECURITY DEFINER): the
# owner without SELECT on rla cannot read it through lineage
check "the caller's SELECT rights on the table apply" \
      "permission denied for table rla_$SFX" \
      "$(sql -c "REVOKE SELECT ON e2e.rla_$SFX FROM ks_e2e" -c "SET ROLE ks_e2e" \
             -c "SELECT * FROM kafka_sink.lineage('rl_$SFX', '{\"id\": 1}', 'e2e.rla_$SFX')" 2>&1 | sed -n 's/^ERROR:  //p')"
sql -c "GRANT SELECT ON e2e.rla_$SFX TO ks_e2e" >/dev/null

for n in rl rl1; do sql -c "SELECT kafka_sink.drop_pipeline('${n}_$SFX')" >/dev/null; done
finish
