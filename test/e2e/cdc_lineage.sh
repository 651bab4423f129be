#!/usr/bin/env bash
# cdc_lineage: message_fate and message_fates for Debezium change events
# (envelope debezium: deletes, truncates, the tombstone after a delete, an
# event made stale by its source position) on one table, and for a routed
# pipeline (target template over source.table): the table each message
# went to.  Before this piece message_fates said 'applied or superseded'
# for every change event of a routed pipeline and message_fate 'landed'.
. "$(dirname "$0")/../lib/common.sh"
setup_owner
T="e2e_cdclin_$SFX"
TR="e2e_cdclin_r_$SFX"
for t in "$T" "$TR"; do "$HARNESS" topic-create "$t" 1 >/dev/null 2>&1; done

# ev OP ID LSN [TABLE]: one change event line "key|value" (the key bare)
ev() { cdc_event "$1" "$2" "lsn=${3:-0}" ${4+--table "$4"}; }
fates() { sql -c "SET ROLE ks_e2e" -c "SELECT string_agg(\"offset\" || ':' || fate || ':' || coalesce(target, '-'), ' ' ORDER BY \"offset\") FROM kafka_sink.message_fates('$1')"; }
LIN="_kafka_topic text, _kafka_partition int, _kafka_offset bigint, _kafka_batch_id bigint, _kafka_source_position numeric"

sql >/dev/null <<SQL
CREATE TABLE e2e.cl_$SFX (id int PRIMARY KEY, name text, $LIN);
CREATE TABLE e2e.cla_$SFX (id int PRIMARY KEY, name text, $LIN);
CREATE TABLE e2e.clb_$SFX (id int PRIMARY KEY, name text, $LIN);
ALTER TABLE e2e.cl_$SFX OWNER TO ks_e2e;
ALTER TABLE e2e.cla_$SFX OWNER TO ks_e2e;
ALTER TABLE e2e.clb_$SFX OWNER TO ks_e2e;
SET ROLE ks_e2e;
SELECT kafka_sink.create_pipeline(name => 'cl_$SFX', bootstrap_servers => '$KS_BOOTSTRAP',
       subscribe => ARRAY['$T'], target => 'e2e.cl_$SFX', starting_offsets => 'earliest',
       envelope => 'debezium', bronze => 'e2e.cl_raw_$SFX');
SELECT kafka_sink.create_pipeline(name => 'clr_$SFX', bootstrap_servers => '$KS_BOOTSTRAP',
       subscribe => ARRAY['$TR'], target => 'e2e.{source.table}', starting_offsets => 'earliest',
       envelope => 'debezium', bronze => 'e2e.clr_raw_$SFX');
SQL

# batch 1 (offsets 0-5): create 1, 2, 3; update 1; delete 2 and its tombstone
{ ev c 1 100; ev c 2 110; ev c 3 120; ev u 1 130; ev d 2 140; ev tomb 2; } | produce_batch "$T"
check_caught_up "cl_$SFX"
# batch 2 (offsets 6-8): a re-sent old create of 3 (stale by position), a
# re-sent create of 2 older than its delete (stale: no row, not resurrected),
# a truncate at 200
{ ev c 3 115; ev c 2 105; ev t 0 200; } | produce_batch "$T"
check_caught_up "cl_$SFX"
# batch 3 (offset 9): create 4 after the truncate
{ ev c 4 210; } | produce_batch "$T"
check_caught_up "cl_$SFX"
check "rows: only 4 survives the truncate" "4" "$(sql -c "SELECT string_agg(id::text, ',' ORDER BY id) FROM e2e.cl_$SFX")"
check "message_fates of change events: the table and the fate of each" \
      "0:truncated:e2e.cl_$SFX 1:deleted:e2e.cl_$SFX 2:truncated:e2e.cl_$SFX 3:truncated:e2e.cl_$SFX 4:deleted:e2e.cl_$SFX 5:superseded:e2e.cl_$SFX 6:truncated:e2e.cl_$SFX 7:deleted:e2e.cl_$SFX 8:truncated:e2e.cl_$SFX 9:applied:e2e.cl_$SFX" \
      "$(fates cl_$SFX)"
check "message_fate agrees with message_fates for every offset" 0 \
      "$(sql -c "SET ROLE ks_e2e" -c "SELECT count(*) FROM kafka_sink.message_fates('cl_$SFX') f,
                 LATERAL kafka_sink.message_fate('cl_$SFX', f.topic, f.partition, f.\"offset\") g
                 WHERE (g.fate, g.detail, g.target) IS DISTINCT FROM (f.fate, f.detail, f.target)")"
check "the detail of a re-sent create older than its key's delete names the delete's position" \
      "no row for key {\"id\": 2}: it was deleted at source position 140, not older than this event's 105" \
      "$(sql -c "SET ROLE ks_e2e" -c "SELECT detail FROM kafka_sink.message_fate('cl_$SFX', '$T', 0, 7)")"
check "the tombstone after a delete" \
      "superseded|the tombstone Debezium sends after a delete: the delete did the work, nothing to apply" \
      "$(sql -c "SET ROLE ks_e2e" -c "SELECT fate || '|' || detail FROM kafka_sink.message_fate('cl_$SFX', '$T', 0, 5)")"

# a stale event that still meets its row: batch 4 re-sends create 4 at 205
{ ev c 4 205; } | produce_batch "$T"
check_caught_up "cl_$SFX"
check "a re-sent older create of a live row is stale, by source position" \
      "stale|the row for key {\"id\": 4} (from batch" \
      "$(sql -c "SET ROLE ks_e2e" -c "SELECT fate || '|' || split_part(detail, ')', 1) || ')' FROM kafka_sink.message_fate('cl_$SFX', '$T', 0, 10)" | sed 's/ [0-9]*)$//')"

# the routed pipeline: two tables by source.table, one batch
{ ev c 1 100 "cla_$SFX"; ev c 1 110 "clb_$SFX"; ev c 2 120 "cla_$SFX"; ev u 1 130 "cla_$SFX"; ev d 2 140 "cla_$SFX"; ev tomb 2; } | produce_batch "$TR"
check_caught_up "clr_$SFX"
check "message_fates of a routed pipeline names each message's table" \
      "0:superseded:e2e.cla_$SFX 1:applied:e2e.clb_$SFX 2:deleted:e2e.cla_$SFX 3:applied:e2e.cla_$SFX 4:deleted:e2e.cla_$SFX 5:superseded:-" \
      "$(fates clr_$SFX)"
check "message_fate of a routed message" "applied|e2e.clb_$SFX" \
      "$(sql -c "SET ROLE ks_e2e" -c "SELECT fate || '|' || target FROM kafka_sink.message_fate('clr_$SFX', '$TR', 0, 1)")"

for n in cl clr; do sql -c "SELECT kafka_sink.drop_pipeline('${n}_$SFX')" >/dev/null; done
finish
