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
-- routed: taken, each routed table's marks are checked as the worker opens it
SELECT pg_temp.refused($s$SELECT kafka_sink.create_pipeline(name => 'sdl_routed', bootstrap_servers => '127.0.0.1:9', subscribe => ARRAY['t'], start => false, target => 'sdl.{topic}', key_format => 'string', delete_on_tombstone => true, delete_mode => 'soft')$s$);
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
SELECT kafka_sink.drop_pipeline('sdl_routed') IS NOT NULL AS dropped;
-- the statements: a marked row passes the guard (plain) and comes back whole
SELECT kind, statement FROM kafka_sink.pipeline_statements('sdl_both') WHERE kind IN ('delete', 'merge') ORDER BY step;
SELECT kind, statement FROM kafka_sink.pipeline_statements('sdl_at') WHERE kind = 'delete';
-- change events: the delete and the truncate keep their positions in the row
SELECT kind, statement FROM kafka_sink.pipeline_statements('sdl_cdc') WHERE kind IN ('truncate', 'delete') ORDER BY step;
-- alter_pipeline(delete_mode): the checks of create_pipeline against the
-- pipeline as it is, each refusal with its errcode and hint; an accepted
-- change is a new generation (the workers restart on it)
SELECT kafka_sink.create_pipeline(name => 'sdl_alt', bootstrap_servers => '127.0.0.1:9', subscribe => ARRAY['t'], start => false, target => 'sdl.both', key_format => 'string',
       delete_on_tombstone => true) IS NOT NULL AS created;
SELECT kafka_sink.create_pipeline(name => 'sdl_alt_none', bootstrap_servers => '127.0.0.1:9', subscribe => ARRAY['t'], start => false, target => 'sdl.none', key_format => 'string',
       delete_on_tombstone => true) IS NOT NULL AS created;
SELECT kafka_sink.create_pipeline(name => 'sdl_alt_wrong', bootstrap_servers => '127.0.0.1:9', subscribe => ARRAY['t'], start => false, target => 'sdl.wrong', key_format => 'string',
       delete_on_tombstone => true) IS NOT NULL AS created;
SELECT kafka_sink.create_pipeline(name => 'sdl_alt_gen', bootstrap_servers => '127.0.0.1:9', subscribe => ARRAY['t'], start => false, target => 'sdl.gen', key_format => 'string',
       delete_on_tombstone => true) IS NOT NULL AS created;
SELECT kafka_sink.create_pipeline(name => 'sdl_alt_nodel', bootstrap_servers => '127.0.0.1:9', subscribe => ARRAY['t'], start => false, target => 'sdl.both') IS NOT NULL AS created;
SELECT kafka_sink.create_pipeline(name => 'sdl_alt_app', bootstrap_servers => '127.0.0.1:9', subscribe => ARRAY['t'], start => false, target => 'sdl.both', mode => 'append') IS NOT NULL AS created;
SELECT kafka_sink.create_pipeline(name => 'sdl_alt_route', bootstrap_servers => '127.0.0.1:9', subscribe => ARRAY['t'], start => false, target => 'sdl.{topic}', key_format => 'string',
       delete_on_tombstone => true) IS NOT NULL AS created;
SELECT pg_temp.refused($s$SELECT kafka_sink.alter_pipeline('sdl_alt', delete_mode => 'gentle')$s$);
SELECT pg_temp.refused($s$SELECT kafka_sink.alter_pipeline('sdl_alt_none', delete_mode => 'soft')$s$);
SELECT pg_temp.refused($s$SELECT kafka_sink.alter_pipeline('sdl_alt_wrong', delete_mode => 'soft')$s$);
SELECT pg_temp.refused($s$SELECT kafka_sink.alter_pipeline('sdl_alt_gen', delete_mode => 'soft')$s$);
SELECT pg_temp.refused($s$SELECT kafka_sink.alter_pipeline('sdl_alt_nodel', delete_mode => 'soft')$s$);
SELECT pg_temp.refused($s$SELECT kafka_sink.alter_pipeline('sdl_alt_app', delete_mode => 'soft')$s$);
SELECT pg_temp.refused($s$SELECT kafka_sink.alter_pipeline('sdl_alt_route', delete_mode => 'soft')$s$);
-- soft with write_mode insert_only, in one call or after it
SELECT pg_temp.refused($s$SELECT kafka_sink.alter_pipeline('sdl_alt', delete_mode => 'soft', write_mode => 'insert_only')$s$);
-- a targets map beside a soft-delete target: taken (its tables are checked
-- as the worker opens them), and removed again
SELECT pg_temp.refused($s$SELECT kafka_sink.alter_pipeline('sdl_both', targets => '{"x": "sdl.at_only"}')$s$);
SELECT pg_temp.refused($s$SELECT kafka_sink.alter_pipeline('sdl_both', targets => '{}')$s$);
-- the owner's privileges as they are now
REVOKE UPDATE ON sdl.both FROM regress_sdl;
SELECT pg_temp.refused($s$SELECT kafka_sink.alter_pipeline('sdl_alt', delete_mode => 'soft')$s$);
GRANT UPDATE ON sdl.both TO regress_sdl;
-- accepted: hard -> soft -> hard, each a new generation; NULL leaves it
SELECT generation AS g0 FROM kafka_sink.pipeline_definitions WHERE name = 'sdl_alt' \gset
SELECT kafka_sink.alter_pipeline('sdl_alt', delete_mode => 'soft');
SELECT delete_mode, generation - :g0 AS generations FROM kafka_sink.pipeline_definitions WHERE name = 'sdl_alt';
SELECT kind, statement FROM kafka_sink.pipeline_statements('sdl_alt') WHERE kind = 'delete';
SELECT kafka_sink.alter_pipeline('sdl_alt', max_offsets_per_batch => 10);
SELECT delete_mode, generation - :g0 AS generations FROM kafka_sink.pipeline_definitions WHERE name = 'sdl_alt';
SELECT kafka_sink.alter_pipeline('sdl_alt', delete_mode => 'hard');
SELECT delete_mode, generation - :g0 AS generations FROM kafka_sink.pipeline_definitions WHERE name = 'sdl_alt';
SELECT kind, statement FROM kafka_sink.pipeline_statements('sdl_alt') WHERE kind = 'delete';
-- change events: soft, then envelope plain (no tombstones) is refused
SELECT kafka_sink.alter_pipeline('sdl_cdc', delete_mode => 'hard');
SELECT kafka_sink.alter_pipeline('sdl_cdc', delete_mode => 'soft');
SELECT pg_temp.refused($s$SELECT kafka_sink.alter_pipeline('sdl_cdc', envelope => 'plain')$s$);
SELECT name, delete_mode FROM kafka_sink.pipelines WHERE name LIKE 'sdl_alt%' OR name = 'sdl_cdc' ORDER BY name;
SELECT kafka_sink.drop_pipeline(name, true) FROM kafka_sink.pipelines WHERE name LIKE 'sdl_alt%' ORDER BY name;
SELECT kafka_sink.drop_pipeline('sdl_both', true);
SELECT kafka_sink.drop_pipeline('sdl_at', true);
SELECT kafka_sink.drop_pipeline('sdl_cdc', true);
DROP FUNCTION pg_temp.refused(text);
DROP SCHEMA sdl CASCADE;
RESET ROLE;
DROP ROLE regress_sdl;
