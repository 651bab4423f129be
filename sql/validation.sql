-- Every bad argument of the pipeline API gets an errcode, a message and a
-- hint, and writes nothing.
CREATE EXTENSION IF NOT EXISTS kafka_sink;
SET client_min_messages = warning;
DROP SCHEMA IF EXISTS val CASCADE;
DROP ROLE IF EXISTS regress_val;
DROP ROLE IF EXISTS regress_val_nologin;
DROP ROLE IF EXISTS regress_val_plain;
RESET client_min_messages;

CREATE ROLE regress_val LOGIN;
GRANT kafka_sink_admin TO regress_val;
CREATE ROLE regress_val_nologin NOLOGIN;
GRANT kafka_sink_admin TO regress_val_nologin;
CREATE ROLE regress_val_plain LOGIN;
CREATE SCHEMA val AUTHORIZATION regress_val;
GRANT USAGE ON SCHEMA val TO regress_val_nologin, regress_val_plain;

-- err(sql): runs sql and shows the SQLSTATE, message, detail and hint of its error
CREATE FUNCTION val.err(sql text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    st text; m text; d text; h text;
BEGIN
    EXECUTE sql;
    RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, m = MESSAGE_TEXT,
                            d = PG_EXCEPTION_DETAIL, h = PG_EXCEPTION_HINT;
    RETURN st || ': ' || m
        || CASE WHEN d <> '' THEN E'\n  detail: ' || d ELSE '' END
        || CASE WHEN h <> '' THEN E'\n  hint: ' || h ELSE '' END;
END
$$;
GRANT EXECUTE ON FUNCTION val.err(text) TO PUBLIC;

-- create_with(args, without): val.err of a create_pipeline call made of a
-- valid base (name 'p1', bootstrap_servers '127.0.0.1:9', subscribe
-- ARRAY['a'], target 'val.orders') and ARGS, named arguments that add to it
-- or replace the base's argument of that name; WITHOUT names base arguments
-- left out.  So each case below shows only the argument that is wrong.
CREATE FUNCTION val.create_with(args text DEFAULT '', without text[] DEFAULT '{}')
RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    base text[] := ARRAY[['name', '''p1'''],
                         ['bootstrap_servers', '''127.0.0.1:9'''],
                         ['subscribe', 'ARRAY[''a'']'],
                         ['target', '''val.orders''']];
    parts text[] := '{}';
    i int;
BEGIN
    FOR i IN 1 .. array_length(base, 1) LOOP
        CONTINUE WHEN base[i][1] = ANY (without)
                   OR args ~ ('\m' || base[i][1] || '\s*=>');
        parts := parts || (base[i][1] || ' => ' || base[i][2]);
    END LOOP;
    IF args <> '' THEN
        parts := parts || args;
    END IF;
    RETURN val.err('SELECT kafka_sink.create_pipeline(' || array_to_string(parts, ', ') || ')');
END
$$;
GRANT EXECUTE ON FUNCTION val.create_with(text, text[]) TO PUBLIC;

SET ROLE regress_val;
CREATE TABLE val.orders (order_id bigint PRIMARY KEY, event_ts timestamptz NOT NULL,
                         amount numeric(18,2), pos point, doc json);
CREATE TABLE val.nokey (id bigint, v text);
CREATE TABLE val.multi (a int, b int, v text, UNIQUE (a, b));
-- partitioned: the key must hold the partition key (of each level)
CREATE TABLE val.parted (id int, day int, region text, v text, PRIMARY KEY (id, day, region))
    PARTITION BY RANGE (day);
CREATE TABLE val.parted_1 PARTITION OF val.parted FOR VALUES FROM (0) TO (10) PARTITION BY LIST (region);
CREATE TABLE val.parted_expr (id int, day int, v text) PARTITION BY RANGE ((day % 7));
RESET ROLE;
CREATE TABLE val.not_mine (id bigint PRIMARY KEY);
CREATE TABLE val.read_only (id bigint PRIMARY KEY);
GRANT SELECT ON val.read_only TO regress_val;
SET ROLE regress_val;


-- source: none, or more than one, of subscribe / subscribe_pattern / assign
SELECT val.create_with(without => '{subscribe}');
SELECT val.create_with($$subscribe_pattern => '^a'$$);
SELECT val.create_with($$assign => '{"a": [0]}'$$);
SELECT val.create_with($$subscribe => ARRAY[]::text[]$$);
SELECT val.create_with($$subscribe => ARRAY['bad topic!']$$);
-- an invalid regex
SELECT val.create_with($$subscribe_pattern => '^orders('$$, without => '{subscribe}');
-- malformed assign JSON
SELECT val.create_with($$assign => '[0, 1]'$$, without => '{subscribe}');
SELECT val.create_with($$assign => '{"orders.v1": [0, "x"]}'$$, without => '{subscribe}');
SELECT val.create_with($$assign => '{"orders.v1": []}'$$, without => '{subscribe}');
SELECT val.create_with($$assign => '{"orders.v1": [-1]}'$$, without => '{subscribe}');
-- an unknown target
SELECT val.create_with($$target => 'val.nope'$$);
SELECT val.create_with(without => '{target}');
-- key columns missing, or not covered by a unique index
SELECT val.create_with($$key_columns => ARRAY['nope']$$);
SELECT val.create_with($$key_columns => ARRAY['amount']$$);
SELECT val.create_with($$target => 'val.nokey'$$);
SELECT val.create_with($$target => 'val.multi', key_columns => ARRAY['a']$$);
SELECT val.create_with($$key_columns => ARRAY['order_id', 'order_id']$$);
SELECT val.create_with($$target => 'val.parted', key_columns => ARRAY['id']$$);
SELECT val.create_with($$target => 'val.parted', key_columns => ARRAY['id', 'region']$$);
SELECT val.create_with($$target => 'val.parted_expr', key_columns => ARRAY['id']$$);
-- an order column that is missing or has no ordering
SELECT val.create_with($$order_column => 'nope'$$);
SELECT val.create_with($$order_column => 'pos'$$);
SELECT val.create_with($$order_column => 'doc'$$);
-- a bad starting_offsets
SELECT val.create_with($$starting_offsets => 'yesterday-ish'$$);
SELECT val.create_with($$starting_offsets => '{"a": {"0": 42,'$$);
SELECT val.create_with($$starting_offsets => '{"a": {"0": -3}}'$$);
SELECT val.create_with($$starting_offsets => '{"a": {"x": 1}}'$$);
SELECT val.create_with($$starting_offsets => NULL$$);
-- batch limits that are not positive
SELECT val.create_with($$max_offsets_per_batch => 0$$);
SELECT val.create_with($$max_batch_bytes => -1$$);
SELECT val.create_with($$trigger_interval => '-1 s'$$);
SELECT val.create_with($$workers => 0$$);
-- unknown or invalid librdkafka options, in librdkafka's words; secrets are never echoed
SELECT val.create_with($$kafka_options => '{"no.such.option": "1"}'$$);
SELECT val.create_with($$kafka_options => '{"session.timeout.ms": "soon"}'$$);
SELECT val.create_with($$kafka_options => '{"security.protocol": "carrier-pigeon"}'$$);
SELECT val.create_with($$kafka_options => '{"enable.auto.commit": "true"}'$$);
SELECT val.create_with($$kafka_options => '{"linger.ms": {"a": 1}}'$$);
SELECT val.create_with($$kafka_options => '["a"]'$$);
-- other arguments
SELECT val.create_with($$name => 'bad name'$$);
SELECT val.create_with($$bootstrap_servers => ''$$);
SELECT val.create_with($$mode => 'upsert'$$);
SELECT val.create_with($$mode => 'function'$$);
SELECT val.create_with($$mode => 'function', batch_function => 'pg_catalog.now()'$$);
SELECT val.create_with($$mode => 'append', order_column => 'event_ts'$$);
-- a caller without privileges on the target
SELECT val.create_with($$target => 'val.not_mine'$$);
SELECT val.create_with($$target => 'val.read_only'$$);

-- the data contract's options
CREATE TABLE val.pair (a int, b int, v text, PRIMARY KEY (a, b));
CREATE TABLE val.badraw (topic text);
SELECT val.create_with($$columns => '{"nope": "x.y"}'$$);
SELECT val.create_with($$columns => '{"amount": "payload..amount"}'$$);
SELECT val.create_with($$columns => '{"amount": {"path": "a", "scale": "x"}}'$$);
SELECT val.create_with($$columns => '["amount"]'$$);
SELECT val.create_with($$key_format => 'avro'$$);
SELECT val.create_with($$target => 'val.pair', key_format => 'string'$$);
SELECT val.create_with($$delete_on_tombstone => true$$);
SELECT val.create_with($$schema_version_field => 'v'$$);
SELECT val.create_with($$schema_version_field => 'v', schema_versions => '{"1": "amount"}'$$);
SELECT val.create_with($$schema_version_field => 'v', schema_versions => '{"2": {"nope": "x"}}'$$);
SELECT val.create_with($$event_id => '.id'$$);
SELECT val.create_with($$bronze => 'unqualified'$$, without => '{target}');
SELECT val.create_with($$bronze => 'val.badraw'$$, without => '{target}');
SELECT val.create_with($$bronze => 'val.raw', order_column => 'ts'$$, without => '{target}');
DROP TABLE val.pair, val.badraw;

-- nothing was written by any of the failed calls
SELECT count(*) AS pipelines FROM kafka_sink.pipelines;
RESET ROLE;
SELECT count(*) AS pipelines, (SELECT count(*) FROM kafka_sink.secrets) AS secrets FROM kafka_sink.pipeline_definitions;

-- a duplicate pipeline name
SET ROLE regress_val;
SELECT kafka_sink.create_pipeline(name => 'p1', bootstrap_servers => '127.0.0.1:9', subscribe => ARRAY['a'], target => 'val.orders', start => false) > 0 AS created;
SELECT val.create_with($$subscribe => ARRAY['b']$$);

-- alter_pipeline validates the same way and writes nothing on error
SELECT val.err($$SELECT kafka_sink.alter_pipeline('p1', max_offsets_per_batch => 0)$$);
SELECT val.err($$SELECT kafka_sink.alter_pipeline('p1', trigger_interval => '2 hours')$$);
SELECT val.err($$SELECT kafka_sink.alter_pipeline('p1', kafka_options => '{"no.such.option": "1"}')$$);
SELECT val.err($$SELECT kafka_sink.alter_pipeline('p1', starting_offsets => 'whenever')$$);
SELECT val.err($$SELECT kafka_sink.alter_pipeline('nope', workers => 2)$$);
SELECT val.err($$SELECT kafka_sink.start('nope')$$);
SELECT val.err($$SELECT kafka_sink.stop(NULL)$$);
SELECT val.err($$SELECT kafka_sink.drop_pipeline('nope')$$);
SELECT val.err($$SELECT * FROM kafka_sink.replay_quarantine('p1', reason => 'bad_luck')$$);
SELECT * FROM kafka_sink.replay_quarantine('p1');
SELECT kafka_sink.drop_pipeline('nope', if_exists => true);
SELECT max_offsets_per_batch, trigger_interval, kafka_options FROM kafka_sink.pipelines WHERE name = 'p1';

-- a role that cannot log in cannot own a pipeline (workers connect as the owner)
RESET ROLE;
SET ROLE regress_val_nologin;
SELECT val.create_with($$name => 'p2'$$);
-- a role outside kafka_sink_admin can neither define pipelines nor produce
RESET ROLE;
SET ROLE regress_val_plain;
SELECT val.create_with($$name => 'p2'$$);
SELECT val.err($$SELECT * FROM kafka_sink.produce('127.0.0.1:9', 't', 'k', 'v')$$);
SELECT val.err($$SELECT * FROM kafka_sink.pipeline_definitions$$);
-- a superuser cannot own a pipeline unless kafka_sink.allow_superuser_pipelines is set
RESET ROLE;
SELECT val.create_with($$name => 'p2'$$);
-- produce validates its arguments
SELECT val.err($$SELECT * FROM kafka_sink.produce(NULL, 't', 'k', 'v')$$);
SELECT val.err($$SELECT * FROM kafka_sink.produce('127.0.0.1:9', '', 'k', 'v')$$);
SELECT val.err($$SELECT * FROM kafka_sink.produce('127.0.0.1:9', 't', 'k', 'v', partition => -1)$$);
SELECT val.err($$SELECT * FROM kafka_sink.produce('127.0.0.1:9', 't', 'k', 'v', headers => '[1]')$$);

SELECT kafka_sink.drop_pipeline('p1');
DROP SCHEMA val CASCADE;
DROP ROLE regress_val;
DROP ROLE regress_val_nologin;
DROP ROLE regress_val_plain;
