-- envelope and on_truncate (issue 16): what create_pipeline and
-- alter_pipeline refuse, and what they store.  Needs no broker.
CREATE EXTENSION IF NOT EXISTS kafka_sink;
SET client_min_messages = warning;
DROP SCHEMA IF EXISTS cdcenv CASCADE;
DROP ROLE IF EXISTS regress_cdcenv;
RESET client_min_messages;

CREATE ROLE regress_cdcenv LOGIN;
GRANT kafka_sink_admin TO regress_cdcenv;
CREATE SCHEMA cdcenv AUTHORIZATION regress_cdcenv;

CREATE FUNCTION cdcenv.err(sql text) RETURNS text LANGUAGE plpgsql AS $$
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

SET ROLE regress_cdcenv;
CREATE TABLE cdcenv.replica (id int PRIMARY KEY, name text, _kafka_source_position numeric);
CREATE TABLE cdcenv.nopos (id int PRIMARY KEY, name text);
CREATE TABLE cdcenv.intpos (id int PRIMARY KEY, name text, _kafka_source_position bigint);

-- bad values
SELECT cdcenv.err($$SELECT kafka_sink.create_pipeline('e1', 'localhost:9', 'cdcenv.replica',
       subscribe => ARRAY['t'], start => false, envelope => 'maxwell')$$);
SELECT cdcenv.err($$SELECT kafka_sink.create_pipeline('e1', 'localhost:9', 'cdcenv.replica',
       subscribe => ARRAY['t'], start => false, envelope => NULL)$$);
SELECT cdcenv.err($$SELECT kafka_sink.create_pipeline('e1', 'localhost:9', 'cdcenv.replica',
       subscribe => ARRAY['t'], start => false, envelope => 'debezium', on_truncate => 'cascade')$$);
SELECT cdcenv.err($$SELECT kafka_sink.create_pipeline('e1', 'localhost:9', 'cdcenv.replica',
       subscribe => ARRAY['t'], start => false, on_truncate => 'ignore')$$);
-- the source position column
SELECT cdcenv.err($$SELECT kafka_sink.create_pipeline('e1', 'localhost:9', 'cdcenv.nopos',
       subscribe => ARRAY['t'], start => false, envelope => 'debezium')$$);
SELECT cdcenv.err($$SELECT kafka_sink.create_pipeline('e1', 'localhost:9', 'cdcenv.intpos',
       subscribe => ARRAY['t'], start => false, envelope => 'debezium')$$);
SELECT cdcenv.err($$SELECT kafka_sink.create_pipeline('e1', 'localhost:9', 'cdcenv.replica',
       subscribe => ARRAY['t'], start => false, envelope => 'debezium', order_column => 'name')$$);
-- debezium needs merge and json
SELECT cdcenv.err($$SELECT kafka_sink.create_pipeline('e1', 'localhost:9', 'cdcenv.replica',
       subscribe => ARRAY['t'], start => false, envelope => 'debezium', mode => 'append')$$);
SELECT count(*) AS nothing_written FROM kafka_sink.pipelines WHERE name = 'e1';

-- accepted: the order column defaults to the position column
SELECT cdcenv.err($$SELECT kafka_sink.create_pipeline('e1', 'localhost:9', 'cdcenv.replica',
       subscribe => ARRAY['t'], start => false, envelope => 'debezium', on_truncate => 'fail')$$);
SELECT name, envelope, on_truncate, order_column FROM kafka_sink.pipelines WHERE name = 'e1';

-- alter_pipeline: NULL leaves them, bad values are refused
SELECT cdcenv.err($$SELECT kafka_sink.alter_pipeline('e1', on_truncate => 'sometimes')$$);
SELECT cdcenv.err($$SELECT kafka_sink.alter_pipeline('e1', on_truncate => 'ignore')$$);
SELECT cdcenv.err($$SELECT kafka_sink.alter_pipeline('e1', workers => 1)$$);
SELECT name, envelope, on_truncate, order_column FROM kafka_sink.pipelines WHERE name = 'e1';
SELECT cdcenv.err($$SELECT kafka_sink.alter_pipeline('e1', envelope => 'plain')$$);
SELECT name, envelope, on_truncate, order_column FROM kafka_sink.pipelines WHERE name = 'e1';

-- a plain pipeline switched to debezium needs the position column
SELECT cdcenv.err($$SELECT kafka_sink.create_pipeline('e2', 'localhost:9', 'cdcenv.nopos',
       subscribe => ARRAY['t'], start => false)$$);
SELECT cdcenv.err($$SELECT kafka_sink.alter_pipeline('e2', envelope => 'debezium')$$);
SELECT name, envelope, on_truncate, order_column FROM kafka_sink.pipelines WHERE name = 'e2';

-- the catalog of deleted keys is written only by kafka_sink
SELECT cdcenv.err($$INSERT INTO kafka_sink.cdc_deletions (pipeline_id, target, key, position)
       SELECT id, 'cdcenv.replica', '["1"]', 1 FROM kafka_sink.pipelines WHERE name = 'e1'$$);

-- mode history applies truncates (the default); doing so needs DELETE on
-- the table (a truncate's delete of a version can be removed again)
CREATE TABLE cdcenv.hist (id int, name text, _kafka_source_position numeric NOT NULL,
                          _valid_from numeric NOT NULL, _valid_to numeric, _deleted boolean NOT NULL,
                          PRIMARY KEY (id, _valid_from));
REVOKE DELETE ON cdcenv.hist FROM regress_cdcenv;
SELECT cdcenv.err($$SELECT kafka_sink.create_pipeline('h1', 'localhost:9', 'cdcenv.hist', subscribe => ARRAY['t'],
       mode => 'history', envelope => 'debezium', start => false)$$);
SELECT cdcenv.err($$SELECT kafka_sink.create_pipeline('h1', 'localhost:9', 'cdcenv.hist', subscribe => ARRAY['t'],
       mode => 'history', envelope => 'debezium', on_truncate => 'ignore', start => false)$$);
SELECT cdcenv.err($$SELECT kafka_sink.alter_pipeline('h1', on_truncate => 'apply')$$);
GRANT DELETE ON cdcenv.hist TO regress_cdcenv;
SELECT cdcenv.err($$SELECT kafka_sink.alter_pipeline('h1', on_truncate => 'apply')$$);
SELECT name, mode, envelope, on_truncate FROM kafka_sink.pipelines WHERE name = 'h1';

SELECT kafka_sink.drop_pipeline('e1');
SELECT kafka_sink.drop_pipeline('e2');
SELECT kafka_sink.drop_pipeline('h1');
RESET ROLE;
DROP SCHEMA cdcenv CASCADE;
DROP ROLE regress_cdcenv;
