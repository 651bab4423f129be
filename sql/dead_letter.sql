-- The dead-letter topic of a pipeline: validated as a Kafka topic name, not
-- a topic the pipeline reads, not on a bronze-only pipeline; shown in the
-- pipelines view; set and removed by alter_pipeline.  A warning when the
-- outbox relay (kafka_sink.outbox_bootstrap_servers) is not configured.
CREATE EXTENSION IF NOT EXISTS kafka_sink;
SET client_min_messages = warning;
DROP SCHEMA IF EXISTS dlq CASCADE;
DROP ROLE IF EXISTS regress_dlq;
RESET client_min_messages;

CREATE ROLE regress_dlq LOGIN;
GRANT kafka_sink_admin TO regress_dlq;
CREATE SCHEMA dlq AUTHORIZATION regress_dlq;

-- err(sql): runs sql and shows the SQLSTATE, message, detail and hint of its error
CREATE FUNCTION dlq.err(sql text) RETURNS text LANGUAGE plpgsql AS $$
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
GRANT EXECUTE ON FUNCTION dlq.err(text) TO PUBLIC;

SET ROLE regress_dlq;
CREATE TABLE dlq.orders (order_id bigint PRIMARY KEY, amount numeric(18,2));

-- bad topic names: not a Kafka topic name, "." and "..", too long, empty
SELECT dlq.err($$SELECT kafka_sink.create_pipeline(name => 'd1', bootstrap_servers => '127.0.0.1:9',
    subscribe => ARRAY['orders'], target => 'dlq.orders', start => false, dead_letter_topic => 'orders dlq')$$);
SELECT dlq.err($$SELECT kafka_sink.create_pipeline(name => 'd1', bootstrap_servers => '127.0.0.1:9',
    subscribe => ARRAY['orders'], target => 'dlq.orders', start => false, dead_letter_topic => '..')$$);
SELECT dlq.err($$SELECT kafka_sink.create_pipeline(name => 'd1', bootstrap_servers => '127.0.0.1:9',
    subscribe => ARRAY['orders'], target => 'dlq.orders', start => false, dead_letter_topic => repeat('x', 250))$$);
SELECT dlq.err($$SELECT kafka_sink.create_pipeline(name => 'd1', bootstrap_servers => '127.0.0.1:9',
    subscribe => ARRAY['orders'], target => 'dlq.orders', start => false, dead_letter_topic => '')$$);
SELECT dlq.err($$SELECT kafka_sink.create_pipeline(name => 'd1', bootstrap_servers => '127.0.0.1:9',
    subscribe => ARRAY['orders'], target => 'dlq.orders', start => false, dead_letter_topic => 'ordérs')$$);
-- a topic the pipeline reads (subscribe, subscribe_pattern, assign)
SELECT dlq.err($$SELECT kafka_sink.create_pipeline(name => 'd1', bootstrap_servers => '127.0.0.1:9',
    subscribe => ARRAY['orders'], target => 'dlq.orders', start => false, dead_letter_topic => 'orders')$$);
SELECT dlq.err($$SELECT kafka_sink.create_pipeline(name => 'd1', bootstrap_servers => '127.0.0.1:9',
    subscribe_pattern => '^orders', target => 'dlq.orders', start => false, dead_letter_topic => 'orders.dlq')$$);
SELECT dlq.err($$SELECT kafka_sink.create_pipeline(name => 'd1', bootstrap_servers => '127.0.0.1:9',
    assign => '{"orders.dlq": [0]}', target => 'dlq.orders', start => false, dead_letter_topic => 'orders.dlq')$$);
-- a bronze-only pipeline quarantines nothing
SELECT dlq.err($$SELECT kafka_sink.create_pipeline(name => 'd1', bootstrap_servers => '127.0.0.1:9',
    subscribe => ARRAY['orders'], bronze => 'dlq.raw', start => false, dead_letter_topic => 'orders.dlq')$$);
-- nothing was written
SELECT count(*) FROM kafka_sink.pipelines;
SELECT to_regclass('dlq.raw');

-- a valid one: a warning, since no relay publishes the outbox here
SELECT kafka_sink._outbox_relay_configured();
SELECT kafka_sink.create_pipeline(name => 'd1', bootstrap_servers => '127.0.0.1:9',
    subscribe => ARRAY['orders'], target => 'dlq.orders', start => false,
    dead_letter_topic => 'orders.dlq') > 0 AS created;
SELECT name, dead_letter_topic FROM kafka_sink.pipelines;
-- without one: NULL, and no warning
SELECT kafka_sink.create_pipeline(name => 'd2', bootstrap_servers => '127.0.0.1:9',
    subscribe => ARRAY['orders'], target => 'dlq.orders', start => false) > 0 AS created;
SELECT name, dead_letter_topic FROM kafka_sink.pipelines ORDER BY name;

-- alter_pipeline validates the same way, and writes nothing on error
SELECT dlq.err($$SELECT kafka_sink.alter_pipeline('d2', dead_letter_topic => 'bad/topic')$$);
SELECT dlq.err($$SELECT kafka_sink.alter_pipeline('d2', dead_letter_topic => 'orders')$$);
SELECT name, dead_letter_topic FROM kafka_sink.pipelines ORDER BY name;
-- sets it, leaves it (NULL: unchanged), removes it ('')
SELECT kafka_sink.alter_pipeline('d2', dead_letter_topic => 'orders_dead-letters.v1');
SELECT kafka_sink.alter_pipeline('d2', workers => 2);
SELECT name, workers, dead_letter_topic FROM kafka_sink.pipelines ORDER BY name;
SELECT kafka_sink.alter_pipeline('d1', dead_letter_topic => '');
SELECT name, dead_letter_topic FROM kafka_sink.pipelines ORDER BY name;

-- the catalog refuses a bad name even from a superuser's direct write
RESET ROLE;
SELECT split_part(dlq.err($$UPDATE kafka_sink.pipeline_definitions SET dead_letter_topic = 'a b' WHERE name = 'd2'$$), E'\n', 1);
-- and the outbox refuses a row with both a text and a bytes value
SELECT split_part(dlq.err($$INSERT INTO kafka_sink.outbox (topic, value, value_bytes) VALUES ('t', 'v', '\x00')$$), E'\n', 1);
SELECT split_part(dlq.err($$INSERT INTO kafka_sink.outbox (topic, header_names, header_values) VALUES ('t', '{a,b}', '{"\\x00"}')$$), E'\n', 1);

SET ROLE regress_dlq;
SELECT kafka_sink.drop_pipeline('d1');
SELECT kafka_sink.drop_pipeline('d2');
RESET ROLE;
DROP SCHEMA dlq CASCADE;
DROP ROLE regress_dlq;
