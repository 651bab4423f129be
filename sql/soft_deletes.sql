-- delete_mode (issue 26, docs/soft-deletes.md): its checks at create time,
-- with their errcodes, and the statements a soft-delete pipeline runs
-- (pipeline_statements: the delete and the truncate are UPDATEs marking
-- the row; the MERGE's guard and SET read the mark).  Needs no broker.
CREATE EXTENSION IF NOT EXISTS kafka_sink;
SET client_min_messages = warning;
DROP SCHEMA IF EXISTS sdl CASCADE;
DROP ROLE IF EXISTS regress_sdl;
RESET client_min_messages;
CREATE ROLE regress_sdl LOGIN;
GRANT kafka_sink_admin TO regress_sdl;
CREATE SCHEMA sdl AUTHORIZATION regress_sdl;
SET ROLE regress_sdl;
CREATE TABLE sdl.both (id int PRIMARY KEY, v bigint, a text, _deleted boolean NOT NULL DEFAULT false,
                       _deleted_at timestamptz, _kafka_offset bigint);
CREATE TABLE sdl.at_only (id int PRIMARY KEY, a text, _deleted_at timestamptz);
CREATE TABLE sdl.none (id int PRIMARY KEY, a text);
CREATE TABLE sdl.wrong (id int PRIMARY KEY, a text, _deleted text);
CREATE TABLE sdl.gen (id int PRIMARY KEY, a text, _deleted boolean GENERATED ALWAYS AS (a IS NULL) STORED);
CREATE TABLE sdl.cdc (id int PRIMARY KEY, name text, _kafka_source_position numeric, _deleted boolean);
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
SELECT pg_temp.refused($s$SELECT kafka_sink.create_pipeline(name => 'sdl_x', bootstrap_servers => '127.0.0.1:9', subscribe => ARRAY['t'], start => false, target => 'sdl.both', key_format => 'string', delete_on_tombstone => true, delete_mode => 'gentle')$s$);
SELECT pg_temp.refused($s$SELECT kafka_sink.create_pipeline(name => 'sdl_x', bootstrap_servers => '127.0.0.1:9', subscribe => ARRAY['t'], start => false, target => 'sdl.both', key_format => 'string', delete_on_tombstone => true, delete_mode => NULL)$s$);
SELECT pg_temp.refused($s$SELECT kafka_sink.create_pipeline(name => 'sdl_x', bootstrap_servers => '127.0.0.1:9', subscribe => ARRAY['t'], start => false, target => 'sdl.both', mode => 'append', delete_mode => 'soft')$s$);
SELECT pg_temp.refused($s$SELECT kafka_sink.create_pipeline(name => 'sdl_x', bootstrap_servers => '127.0.0.1:9', subscribe => ARRAY['t'], start => false, target => 'sdl.both', delete_mode => 'soft')$s$);
SELECT pg_temp.refused($s$SELECT kafka_sink.create_pipeline(name => 'sdl_x', bootstrap_servers => '127.0.0.1:9', subscribe => ARRAY['t'], start => false, target => 'sdl.none', key_format => 'string', delete_on_tombstone => true, delete_mode => 'soft')$s$);
SELECT pg_temp.refused($s$SELECT kafka_sink.create_pipeline(name => 'sdl_x', bootstrap_servers => '127.0.0.1:9', subscribe => ARRAY['t'], start => false, target => 'sdl.wrong', key_format => 'string', delete_on_tombstone => true, delete_mode => 'soft')$s$);
SELECT pg_temp.refused($s$SELECT kafka_sink.create_pipeline(name => 'sdl_x', bootstrap_servers => '127.0.0.1:9', subscribe => ARRAY['t'], start => false, target => 'sdl.gen', key_format => 'string', delete_on_tombstone => true, delete_mode => 'soft')$s$);
SELECT pg_temp.refused($s$SELECT kafka_sink.create_pipeline(name => 'sdl_x', bootstrap_servers => '127.0.0.1:9', subscribe => ARRAY['t'], start => false, target => 'sdl.{topic}', key_format => 'string', delete_on_tombstone => true, delete_mode => 'soft')$s$);
-- accepted: both marks, _deleted_at alone, change events
SELECT kafka_sink.create_pipeline(name => 'sdl_both', bootstrap_servers => '127.0.0.1:9', subscribe => ARRAY['t'],
       start => false, target => 'sdl.both', key_format => 'string', order_column => 'v',
       delete_on_tombstone => true, delete_mode => 'soft') IS NOT NULL AS created;
SELECT kafka_sink.create_pipeline(name => 'sdl_at', bootstrap_servers => '127.0.0.1:9', subscribe => ARRAY['t'],
       start => false, target => 'sdl.at_only', key_format => 'string', delete_on_tombstone => true,
       delete_mode => 'soft') IS NOT NULL AS created;
SELECT kafka_sink.create_pipeline(name => 'sdl_cdc', bootstrap_servers => '127.0.0.1:9', subscribe => ARRAY['t'],
       start => false, target => 'sdl.cdc', envelope => 'debezium', delete_mode => 'soft') IS NOT NULL AS created;
SELECT name, delete_mode FROM kafka_sink.pipelines WHERE name LIKE 'sdl%' ORDER BY name;
-- the statements: a marked row passes the guard (plain) and comes back whole
SELECT kind, statement FROM kafka_sink.pipeline_statements('sdl_both') WHERE kind IN ('delete', 'merge') ORDER BY step;
SELECT kind, statement FROM kafka_sink.pipeline_statements('sdl_at') WHERE kind = 'delete';
-- change events: the delete and the truncate keep their positions in the row
SELECT kind, statement FROM kafka_sink.pipeline_statements('sdl_cdc') WHERE kind IN ('truncate', 'delete') ORDER BY step;
SELECT kafka_sink.drop_pipeline('sdl_both', true);
SELECT kafka_sink.drop_pipeline('sdl_at', true);
SELECT kafka_sink.drop_pipeline('sdl_cdc', true);
DROP FUNCTION pg_temp.refused(text);
DROP SCHEMA sdl CASCADE;
RESET ROLE;
DROP ROLE regress_sdl;
