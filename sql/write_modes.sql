-- write_mode (issue 26, docs/write-modes.md): its checks at create time,
-- with their errcodes and hints, and the MERGE each mode runs
-- (pipeline_statements: insert_only updates a row only for an earlier
-- event; update_only inserts nothing).  Needs no broker.
CREATE EXTENSION IF NOT EXISTS kafka_sink;
SET client_min_messages = warning;
DROP SCHEMA IF EXISTS wrm CASCADE;
DROP ROLE IF EXISTS regress_wrm;
RESET client_min_messages;
CREATE ROLE regress_wrm LOGIN;
GRANT kafka_sink_admin TO regress_wrm;
CREATE SCHEMA wrm AUTHORIZATION regress_wrm;
SET ROLE regress_wrm;
CREATE TABLE wrm.facts (id int PRIMARY KEY, v bigint, a text DEFAULT 'none', _kafka_partition integer,
                        _kafka_offset bigint);
CREATE TABLE wrm.plain (id int PRIMARY KEY, a text);
CREATE TABLE wrm.soft (id int PRIMARY KEY, a text, _deleted boolean NOT NULL DEFAULT false);
CREATE TABLE wrm.cdc (id int PRIMARY KEY, a text, _kafka_source_position numeric);
-- refused, each with its errcode and hint
CREATE FUNCTION pg_temp.refused(stmt text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE st text; msg text; hint text;
BEGIN
    EXECUTE stmt;
    RETURN 'accepted';
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT, hint = PG_EXCEPTION_HINT;
    RETURN st || ': ' || msg || ' (hint: ' || hint || ')';
END
$$;
SELECT pg_temp.refused($s$SELECT kafka_sink.create_pipeline(name => 'wrm_x', bootstrap_servers => '127.0.0.1:9', subscribe => ARRAY['t'], start => false, target => 'wrm.facts', write_mode => 'insert')$s$);
SELECT pg_temp.refused($s$SELECT kafka_sink.create_pipeline(name => 'wrm_x', bootstrap_servers => '127.0.0.1:9', subscribe => ARRAY['t'], start => false, target => 'wrm.facts', write_mode => NULL)$s$);
SELECT pg_temp.refused($s$SELECT kafka_sink.create_pipeline(name => 'wrm_x', bootstrap_servers => '127.0.0.1:9', subscribe => ARRAY['t'], start => false, target => 'wrm.facts', mode => 'append', write_mode => 'insert_only')$s$);
SELECT pg_temp.refused($s$SELECT kafka_sink.create_pipeline(name => 'wrm_x', bootstrap_servers => '127.0.0.1:9', subscribe => ARRAY['t'], start => false, target => 'wrm.facts', key_format => 'string', delete_on_tombstone => true, write_mode => 'insert_only')$s$);
SELECT pg_temp.refused($s$SELECT kafka_sink.create_pipeline(name => 'wrm_x', bootstrap_servers => '127.0.0.1:9', subscribe => ARRAY['t'], start => false, target => 'wrm.cdc', envelope => 'debezium', write_mode => 'insert_only')$s$);
SELECT pg_temp.refused($s$SELECT kafka_sink.create_pipeline(name => 'wrm_x', bootstrap_servers => '127.0.0.1:9', subscribe => ARRAY['t'], start => false, target => 'wrm.soft', key_format => 'string', delete_on_tombstone => true, delete_mode => 'soft', write_mode => 'insert_only')$s$);
-- a routed pipeline takes them: each routed table gets the pipeline's write_mode
SELECT kafka_sink.create_pipeline(name => 'wrm_x', bootstrap_servers => '127.0.0.1:9', subscribe => ARRAY['t'], start => false, target => 'wrm.{topic}', write_mode => 'update_only') IS NOT NULL AS created;
SELECT write_mode FROM kafka_sink.pipelines WHERE name = 'wrm_x';
SELECT kafka_sink.drop_pipeline('wrm_x', true);
-- accepted: insert_only with an order column and lineage, without either;
-- update_only with tombstones
SELECT kafka_sink.create_pipeline(name => 'wrm_first', bootstrap_servers => '127.0.0.1:9', subscribe => ARRAY['t'],
       start => false, target => 'wrm.facts', order_column => 'v', write_mode => 'insert_only') IS NOT NULL AS created;
SELECT kafka_sink.create_pipeline(name => 'wrm_once', bootstrap_servers => '127.0.0.1:9', subscribe => ARRAY['t'],
       start => false, target => 'wrm.plain', write_mode => 'insert_only') IS NOT NULL AS created;
SELECT kafka_sink.create_pipeline(name => 'wrm_upd', bootstrap_servers => '127.0.0.1:9', subscribe => ARRAY['t'],
       start => false, target => 'wrm.facts', order_column => 'v', key_format => 'string',
       delete_on_tombstone => true, write_mode => 'update_only') IS NOT NULL AS created;
-- alter_pipeline: an insert_only pipeline cannot take change events
SELECT kafka_sink.create_pipeline(name => 'wrm_cdc', bootstrap_servers => '127.0.0.1:9', subscribe => ARRAY['t'],
       start => false, target => 'wrm.cdc', write_mode => 'insert_only') IS NOT NULL AS created;
SELECT pg_temp.refused($s$SELECT kafka_sink.alter_pipeline('wrm_cdc', envelope => 'debezium')$s$);
SELECT kafka_sink.drop_pipeline('wrm_cdc', true);
-- alter_pipeline(write_mode): the checks of create_pipeline against the
-- pipeline as it is, each refusal with its errcode and hint
SELECT kafka_sink.create_pipeline(name => 'wrm_alt', bootstrap_servers => '127.0.0.1:9', subscribe => ARRAY['t'], start => false, target => 'wrm.facts', order_column => 'v') IS NOT NULL AS created;
SELECT kafka_sink.create_pipeline(name => 'wrm_alt_app', bootstrap_servers => '127.0.0.1:9', subscribe => ARRAY['t'], start => false, target => 'wrm.plain', mode => 'append') IS NOT NULL AS created;
SELECT kafka_sink.create_pipeline(name => 'wrm_alt_tomb', bootstrap_servers => '127.0.0.1:9', subscribe => ARRAY['t'], start => false, target => 'wrm.plain', key_format => 'string',
       delete_on_tombstone => true) IS NOT NULL AS created;
SELECT kafka_sink.create_pipeline(name => 'wrm_alt_cdc', bootstrap_servers => '127.0.0.1:9', subscribe => ARRAY['t'], start => false, target => 'wrm.cdc', envelope => 'debezium') IS NOT NULL AS created;
SELECT kafka_sink.create_pipeline(name => 'wrm_alt_soft', bootstrap_servers => '127.0.0.1:9', subscribe => ARRAY['t'], start => false, target => 'wrm.soft', key_format => 'string',
       delete_on_tombstone => true, delete_mode => 'soft') IS NOT NULL AS created;
SELECT kafka_sink.create_pipeline(name => 'wrm_alt_route', bootstrap_servers => '127.0.0.1:9', subscribe => ARRAY['t'], start => false, target => 'wrm.{topic}') IS NOT NULL AS created;
SELECT pg_temp.refused($s$SELECT kafka_sink.alter_pipeline('wrm_alt', write_mode => 'insert')$s$);
SELECT pg_temp.refused($s$SELECT kafka_sink.alter_pipeline('wrm_alt_app', write_mode => 'insert_only')$s$);
SELECT pg_temp.refused($s$SELECT kafka_sink.alter_pipeline('wrm_alt_tomb', write_mode => 'insert_only')$s$);
SELECT pg_temp.refused($s$SELECT kafka_sink.alter_pipeline('wrm_alt_cdc', write_mode => 'insert_only')$s$);
SELECT pg_temp.refused($s$SELECT kafka_sink.alter_pipeline('wrm_alt_soft', write_mode => 'insert_only')$s$);
-- routed: taken, as a targets map beside an update_only target is
SELECT kafka_sink.alter_pipeline('wrm_alt_route', write_mode => 'update_only');
SELECT kafka_sink.alter_pipeline('wrm_upd', targets => '{"x": "wrm.plain"}');
SELECT name, write_mode, targets FROM kafka_sink.pipelines WHERE name IN ('wrm_alt_route', 'wrm_upd') ORDER BY name;
SELECT kafka_sink.alter_pipeline('wrm_upd', targets => '{}');
-- the owner's privileges as they are now
REVOKE UPDATE ON wrm.facts FROM regress_wrm;
SELECT pg_temp.refused($s$SELECT kafka_sink.alter_pipeline('wrm_alt', write_mode => 'update_only')$s$);
GRANT UPDATE ON wrm.facts TO regress_wrm;
-- accepted: upsert -> insert_only -> update_only -> upsert, each a new generation
SELECT generation AS g0 FROM kafka_sink.pipeline_definitions WHERE name = 'wrm_alt' \gset
SELECT kafka_sink.alter_pipeline('wrm_alt', write_mode => 'insert_only');
SELECT write_mode, generation - :g0 AS generations FROM kafka_sink.pipeline_definitions WHERE name = 'wrm_alt';
SELECT kafka_sink.alter_pipeline('wrm_alt', write_mode => 'update_only');
SELECT write_mode, generation - :g0 AS generations FROM kafka_sink.pipeline_definitions WHERE name = 'wrm_alt';
SELECT kind, statement FROM kafka_sink.pipeline_statements('wrm_alt') WHERE kind = 'merge';
SELECT kafka_sink.alter_pipeline('wrm_alt', write_mode => 'upsert');
SELECT write_mode, generation - :g0 AS generations FROM kafka_sink.pipeline_definitions WHERE name = 'wrm_alt';
-- the tombstones' pipeline, soft and insert_only together: refused as at create
SELECT pg_temp.refused($s$SELECT kafka_sink.alter_pipeline('wrm_alt_soft', delete_mode => 'hard', write_mode => 'insert_only')$s$);
SELECT kafka_sink.drop_pipeline(name, true) FROM kafka_sink.pipelines WHERE name LIKE 'wrm_alt%' ORDER BY name;
SELECT name, delete_mode, write_mode FROM kafka_sink.pipelines WHERE name LIKE 'wrm%' ORDER BY name;
-- the statements
SELECT kind, statement FROM kafka_sink.pipeline_statements('wrm_first') WHERE kind = 'merge';
SELECT kind, statement FROM kafka_sink.pipeline_statements('wrm_once') WHERE kind = 'merge';
SELECT kind, statement FROM kafka_sink.pipeline_statements('wrm_upd') WHERE kind IN ('merge', 'delete') ORDER BY step;
SELECT kafka_sink.drop_pipeline('wrm_first', true);
SELECT kafka_sink.drop_pipeline('wrm_once', true);
SELECT kafka_sink.drop_pipeline('wrm_upd', true);
DROP FUNCTION pg_temp.refused(text);
DROP SCHEMA wrm CASCADE;
RESET ROLE;
DROP ROLE regress_wrm;
