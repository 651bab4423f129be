#!/usr/bin/env bash
# cdc_position_rule: the worker and SQL (kafka_sink._cdc_position, which
# message_fate uses) give a change event the same source position: one
# event per key, each kind of source block (PostgreSQL lsn; MySQL binlog
# file, pos and row; the ts_ms fallback) and the edges where a second copy
# of the rule in SQL used to differ from the worker's (a MySQL row that is
# a string, a pos beyond bigint, a file with no number): each row's
# _kafka_source_position, written by the worker, equals _cdc_position of
# its event's source block (from bronze) at its offset.
. "$(dirname "$0")/../lib/common.sh"
setup_owner
T="e2e_cdcrule_$SFX"
"$HARNESS" topic-create "$T" 1 >/dev/null 2>&1
LIN="_kafka_topic text, _kafka_partition int, _kafka_offset bigint, _kafka_batch_id bigint, _kafka_source_position numeric"

sql >/dev/null <<SQL
CREATE TABLE e2e.cpr_$SFX (id int PRIMARY KEY, name text, $LIN);
ALTER TABLE e2e.cpr_$SFX OWNER TO ks_e2e;
SET ROLE ks_e2e;
SELECT kafka_sink.create_pipeline(name => 'cpr_$SFX', bootstrap_servers => '$KS_BOOTSTRAP',
       subscribe => ARRAY['$T'], target => 'e2e.cpr_$SFX', starting_offsets => 'earliest',
       envelope => 'debezium', bronze => 'e2e.cpr_raw_$SFX');
SQL

B=mysql-bin.000009
{
    cdc_event c 1 lsn=123456789012                         # PostgreSQL lsn
    cdc_event c 2 "mysql=$B:400:1"                         # MySQL file, pos, row
    cdc_event c 3 "mysql=$B:400:0" --source '{"row": "3"}' # a row that is a string: row 0
    cdc_event c 4 "mysql=$B:0:0" --source '{"pos": 10000000000000000000}' # pos beyond bigint: ts_ms
    cdc_event c 5 "mysql=$B:7:0" --source '{"file": "mysql-bin"}'          # no file number: ts_ms
    cdc_event c 6 ts=1700000000123                         # SQL Server: ts_ms, then the offset
} | produce_batch "$T"
check_caught_up "cpr_$SFX"
check "every event applied, none quarantined" "6|0" \
      "$(sql -c "SELECT (SELECT count(*) FROM e2e.cpr_$SFX) || '|' || (SELECT count(*) FROM kafka_sink.quarantine q JOIN kafka_sink.pipelines p ON p.id = q.pipeline_id WHERE p.name = 'cpr_$SFX')")"
check "the worker's positions (file * 10^26 + pos * 10^6 + row; ts_ms * 10^19 + offset)" \
      "1:123456789012 2:900000000000000000400000001 3:900000000000000000400000000 4:17000000000000000000000000000003 5:17000000000000000000000000000004 6:17000000001230000000000000000005" \
      "$(sql -c "SELECT string_agg(id || ':' || _kafka_source_position, ' ' ORDER BY id) FROM e2e.cpr_$SFX")"
check "SQL's _cdc_position of each event's source block equals the worker's position" \
      "1:true 2:true 3:true 4:true 5:true 6:true" \
      "$(sql -c "SELECT string_agg(t.id || ':' || (t._kafka_source_position IS NOT DISTINCT FROM
                        kafka_sink._cdc_position(convert_from(b.value, 'UTF8')::jsonb->'source', t._kafka_offset)), ' ' ORDER BY t.id)
                   FROM e2e.cpr_$SFX t,
                        LATERAL kafka_sink._bronze_message('e2e.cpr_raw_$SFX', t._kafka_topic, t._kafka_partition, t._kafka_offset) b")"

sql -c "SELECT kafka_sink.drop_pipeline('cpr_$SFX')" >/dev/null
finish
