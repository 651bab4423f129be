#!/usr/bin/env bash
# cdc_positions: the source positions of envelope => 'debezium' other than
# PostgreSQL's lsn (issue 16), with hand-made change events against a real
# broker.  MySQL: (binlog file number, pos, row), so a rollover
# mysql-bin.000009 -> mysql-bin.000010 orders after any position of 000009;
# equal (file, pos) events are ordered by row; a re-sent range never
# regresses a row nor resurrects a deleted one.  Sources without lsn or
# file/pos (SQL Server, Oracle, MongoDB, ...): source.ts_ms, then the Kafka
# offset.  Batch boundaries: one produce round per batch, each waited for.
. "$(dirname "$0")/../lib/common.sh"
setup_owner
T="e2e_cdcpos_$SFX"
for t in "${T}_my" "${T}_ss"; do "$HARNESS" topic-create "$t" 1 >/dev/null 2>&1; done

# my OP ID FILE POS ROW NAME: a MySQL change event "key|value"
my() { cdc_event "$1" "$2" "mysql=$3:$4:$5" --name "$6"; }
# ss OP ID TS_MS NAME: a SQL Server change event (change_lsn is a string: the ts_ms fallback)
ss() { cdc_event "$1" "$2" "ts=$3" --name "$4"; }
rows() { sql -c "SELECT coalesce(string_agg(id || ':' || name, ' ' ORDER BY id), '-') FROM e2e.$1"; }
quarantined() { sql -c "SELECT count(*) FROM kafka_sink.quarantine q JOIN kafka_sink.pipelines p ON p.id = q.pipeline_id WHERE p.name = '$1'"; }

sql >/dev/null <<SQL
CREATE TABLE e2e.pos_my_$SFX (id int PRIMARY KEY, name text, _kafka_source_position numeric);
CREATE TABLE e2e.pos_ss_$SFX (LIKE e2e.pos_my_$SFX INCLUDING ALL);
ALTER TABLE e2e.pos_my_$SFX OWNER TO ks_e2e;
ALTER TABLE e2e.pos_ss_$SFX OWNER TO ks_e2e;
SET ROLE ks_e2e;
SELECT kafka_sink.create_pipeline(name => 'pos_my_$SFX', bootstrap_servers => '$KS_BOOTSTRAP',
       subscribe => ARRAY['${T}_my'], target => 'e2e.pos_my_$SFX', starting_offsets => 'earliest',
       envelope => 'debezium');
SELECT kafka_sink.create_pipeline(name => 'pos_ss_$SFX', bootstrap_servers => '$KS_BOOTSTRAP',
       subscribe => ARRAY['${T}_ss'], target => 'e2e.pos_ss_$SFX', starting_offsets => 'earliest',
       envelope => 'debezium');
SQL

B9=mysql-bin.000009; B10=mysql-bin.000010
# ---- MySQL ----
# round 1: creates, then two updates of key 3 in ONE binlog event (equal
# file and pos, rows 0 and 1): row 1 is the later; an update of 1 later in the file
{
    my c 1 $B9 100 0 a; my c 2 $B9 100 1 b; my c 3 $B9 150 0 c
    my u 3 $B9 400 1 c-row1; my u 3 $B9 400 0 c-row0; my u 1 $B9 200 0 a2
} | produce_batch "${T}_my"
check_caught_up "pos_my_$SFX"
check "MySQL: (file, pos, row) order within a batch; equal pos ordered by row, not by offset" \
      "1:a2 2:b 3:c-row1" "$(rows pos_my_$SFX)"
check "MySQL: the position is file * 10^26 + pos * 10^6 + row" \
      "900000000000000000400000001" "$(sql -c "SELECT _kafka_source_position FROM e2e.pos_my_$SFX WHERE id = 3")"
# round 2: the rollover: an update at a small pos of 000010, then events of
# 000009 at greater positions (a connector re-sending its old file) in the
# next batch
{ my u 2 $B10 4 0 b-new; } | produce_batch "${T}_my"
check_caught_up "pos_my_$SFX"
{ my u 2 $B9 900000 0 b-old-file; my u 2 $B9 100 1 b; } | produce_batch "${T}_my"
check_caught_up "pos_my_$SFX"
check "MySQL: binlog rollover 000009 -> 000010: no later position of 000009 overwrites 000010's row" \
      "1:a2 2:b-new 3:c-row1" "$(rows pos_my_$SFX)"
# round 3: a connector restart re-sends the whole range of round 1, and
# re-sends the latest event of key 3 itself (an equal position: the same event)
{
    my c 1 $B9 100 0 a; my c 2 $B9 100 1 b; my c 3 $B9 150 0 c
    my u 3 $B9 400 1 c-row1; my u 3 $B9 400 0 c-row0; my u 1 $B9 200 0 a2
} | produce_batch "${T}_my"
check_caught_up "pos_my_$SFX"
check "MySQL: a re-sent range regresses no row (equal positions included)" \
      "1:a2 2:b-new 3:c-row1" "$(rows pos_my_$SFX)"
# round 4: delete 1 in 000010; then (next batch) its old create and update re-sent from 000009
{ my d 1 $B10 50 0 x; my tomb 1 $B10 50 0 x; } | produce_batch "${T}_my"
check_caught_up "pos_my_$SFX"
{ my c 1 $B9 100 0 a; my u 1 $B9 200 0 a2; } | produce_batch "${T}_my"
check_caught_up "pos_my_$SFX"
check "MySQL: re-sent creates of 000009 do not resurrect a row deleted in 000010" \
      "2:b-new 3:c-row1" "$(rows pos_my_$SFX)"
# a create after the delete, later in 000010, lands
{ my c 1 $B10 60 0 a3; } | produce_batch "${T}_my"
check_caught_up "pos_my_$SFX"
check "MySQL: a newer create after the delete lands" "1:a3 2:b-new 3:c-row1" "$(rows pos_my_$SFX)"
check "MySQL: nothing quarantined" 0 "$(quarantined pos_my_$SFX)"
check "MySQL: positions never decreased (each row's position is its last event's)" \
      "1:1000000000000000000060000000 2:1000000000000000000004000000 3:900000000000000000400000001" \
      "$(sql -c "SELECT string_agg(id || ':' || _kafka_source_position, ' ' ORDER BY id) FROM e2e.pos_my_$SFX")"

# ---- SQL Server (ts_ms, then the offset) ----
{ ss c 1 1000 a; ss c 2 1000 b; ss u 1 2000 a2; ss u 2 1000 b2; } | produce_batch "${T}_ss"
check_caught_up "pos_ss_$SFX"
check "ts_ms fallback: greater ts_ms wins; equal ts_ms: the later offset" "1:a2 2:b2" "$(rows pos_ss_$SFX)"
{ ss c 1 1000 a; ss u 1 1500 a-mid; ss d 2 3000 x; } | produce_batch "${T}_ss"
check_caught_up "pos_ss_$SFX"
{ ss c 2 2500 b-old; } | produce_batch "${T}_ss"
check_caught_up "pos_ss_$SFX"
check "ts_ms fallback: older re-sent events regress nothing, resurrect nothing" "1:a2" "$(rows pos_ss_$SFX)"
check "ts_ms fallback: the position is ts_ms * 10^19 + the offset" \
      "20000000000000000000002" "$(sql -c "SELECT _kafka_source_position FROM e2e.pos_ss_$SFX WHERE id = 1")"
check "ts_ms fallback: nothing quarantined" 0 "$(quarantined pos_ss_$SFX)"

sql -c "SET ROLE ks_e2e; SELECT kafka_sink.drop_pipeline('pos_my_$SFX'); SELECT kafka_sink.drop_pipeline('pos_ss_$SFX')" >/dev/null
finish
