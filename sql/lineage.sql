-- Lineage without a broker: the statements a pipeline runs (and that the
-- by-hand text runs), create_lineage_view, message_fates and batch_ranges
-- refuse bad arguments with an errcode, a message and a hint, and show
-- nothing of a pipeline to a role that cannot see it.
CREATE EXTENSION IF NOT EXISTS kafka_sink;
SET client_min_messages = warning;
DROP SCHEMA IF EXISTS lin CASCADE;
DROP ROLE IF EXISTS regress_lin;
DROP ROLE IF EXISTS regress_lin_other;
DROP ROLE IF EXISTS regress_lin_reader;
RESET client_min_messages;

CREATE ROLE regress_lin LOGIN;
GRANT kafka_sink_admin TO regress_lin;
CREATE ROLE regress_lin_other LOGIN;
GRANT kafka_sink_admin TO regress_lin_other;
CREATE ROLE regress_lin_reader LOGIN;
CREATE SCHEMA lin AUTHORIZATION regress_lin;
GRANT USAGE ON SCHEMA lin TO regress_lin_other, regress_lin_reader;

CREATE FUNCTION lin.err(sql text) RETURNS text LANGUAGE plpgsql AS $$
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
GRANT EXECUTE ON FUNCTION lin.err(text) TO PUBLIC;

SET ROLE regress_lin;
CREATE TABLE lin.orders (order_id bigint PRIMARY KEY, event_ts timestamptz NOT NULL,
                         amount numeric(18,2) NOT NULL, note text DEFAULT 'none',
                         _kafka_topic text, _kafka_partition integer, _kafka_offset bigint,
                         _kafka_timestamp timestamptz, _kafka_batch_id bigint);
CREATE TABLE lin.events (id bigint, v text, _kafka_topic text, _kafka_partition integer,
                         _kafka_offset bigint, _kafka_batch_id bigint);
CREATE TABLE lin.plain (id bigint PRIMARY KEY, v text);
CREATE FUNCTION lin.fn(bigint, lin.plain[]) RETURNS void LANGUAGE sql AS 'SELECT';
SELECT kafka_sink.create_pipeline(name => 'lin_orders', bootstrap_servers => '127.0.0.1:9',
       subscribe => ARRAY['lin.orders'], target => 'lin.orders', order_column => 'event_ts',
       key_format => 'string', delete_on_tombstone => true, bronze => 'lin.orders_raw', start => false) > 0;
SELECT kafka_sink.create_pipeline(name => 'lin_events', bootstrap_servers => '127.0.0.1:9',
       subscribe => ARRAY['lin.events'], target => 'lin.events', mode => 'append', start => false) > 0;
SELECT kafka_sink.create_pipeline(name => 'lin_plain', bootstrap_servers => '127.0.0.1:9',
       subscribe => ARRAY['lin.plain'], target => 'lin.plain', start => false) > 0;
SELECT kafka_sink.create_pipeline(name => 'lin_fn', bootstrap_servers => '127.0.0.1:9',
       subscribe => ARRAY['lin.plain'], target => 'lin.plain', mode => 'function',
       batch_function => 'lin.fn(bigint, lin.plain[])', start => false) > 0;
SELECT kafka_sink.create_pipeline(name => 'lin_raw', bootstrap_servers => '127.0.0.1:9',
       subscribe => ARRAY['lin.raw'], bronze => 'lin.raw_only', start => false) > 0;

-- the statements, as run and by hand, with the strategy
\x on
SELECT * FROM kafka_sink.pipeline_statements('lin_orders');
SELECT step, kind, strategy, statement, by_hand FROM kafka_sink.pipeline_statements('lin_events');
SELECT step, kind, strategy, statement, by_hand FROM kafka_sink.pipeline_statements('lin_fn');
SELECT step, kind, strategy, statement, by_hand FROM kafka_sink.pipeline_statements('lin_raw');
\x off

-- the by-hand MERGE and DELETE run, and do what a batch does: the newer
-- event wins by the ordering guard, the older one is stale, $1 is the
-- batch id, a column the message did not set keeps its value
SELECT by_hand AS staging FROM kafka_sink.pipeline_statements('lin_orders') WHERE kind = 'staging' \gset
SELECT by_hand AS merge FROM kafka_sink.pipeline_statements('lin_orders') WHERE kind = 'merge' \gset
SELECT by_hand AS del FROM kafka_sink.pipeline_statements('lin_orders') WHERE kind = 'delete' \gset
:staging;
PREPARE m(bigint) AS :merge;
PREPARE d(bigint) AS :del;
INSERT INTO pg_temp.kafka_sink_batch (order_id, event_ts, amount, note, _ks_p0, _ks_p1, _ks_p2, _ks_p3,
                                      _ks_topic, _ks_partition, _ks_offset, _ks_seq, _ks_ts)
VALUES (1, '2026-01-01 10:00+00', 10, 'first', true, true, true, true, 'lin.orders', 0, 5, 0, '2026-01-01 10:00:01+00'),
       (2, '2026-01-01 10:00+00', 20, NULL, true, true, true, false, 'lin.orders', 1, 7, 1, NULL);
EXECUTE m(3);
TRUNCATE pg_temp.kafka_sink_batch;
INSERT INTO pg_temp.kafka_sink_batch (order_id, event_ts, amount, note, _ks_p0, _ks_p1, _ks_p2, _ks_p3,
                                      _ks_topic, _ks_partition, _ks_offset, _ks_seq, _ks_ts)
VALUES (1, '2026-01-01 09:00+00', 11, 'older', true, true, true, true, 'lin.orders', 0, 6, 0, NULL),
       (2, '2026-01-01 11:00+00', 21, NULL, true, true, true, false, 'lin.orders', 1, 8, 1, NULL);
EXECUTE m(4);
SELECT * FROM lin.orders ORDER BY order_id;
TRUNCATE pg_temp.kafka_sink_batch;
INSERT INTO pg_temp.kafka_sink_batch (order_id, _ks_topic, _ks_partition, _ks_offset, _ks_seq)
VALUES (2, 'lin.orders', 1, 9, 0);
EXECUTE d(5);
SELECT order_id FROM lin.orders ORDER BY order_id;
DEALLOCATE m;
DEALLOCATE d;
DROP TABLE pg_temp.kafka_sink_batch;

-- bad arguments
SELECT lin.err($$SELECT * FROM kafka_sink.pipeline_statements(NULL)$$);
SELECT lin.err($$SELECT * FROM kafka_sink.pipeline_statements('no_such')$$);
SELECT lin.err($$SELECT * FROM kafka_sink._pipeline_statements(NULL)$$);
SELECT lin.err($$SELECT * FROM kafka_sink._pipeline_statements(-1)$$);
SELECT lin.err($$SELECT * FROM kafka_sink.message_fates(NULL)$$);
SELECT lin.err($$SELECT * FROM kafka_sink.message_fates('no_such')$$);
SELECT lin.err($$SELECT * FROM kafka_sink.message_fates('lin_orders', from_offset => -1)$$);
SELECT lin.err($$SELECT * FROM kafka_sink.message_fates('lin_orders', from_offset => 5, to_offset => 4)$$);
SELECT lin.err($$SELECT * FROM kafka_sink.message_fates('lin_orders', partition => -1)$$);
SELECT count(*) FROM kafka_sink.message_fates('lin_orders');
SELECT lin.err($$SELECT kafka_sink.create_lineage_view(NULL)$$);
SELECT lin.err($$SELECT kafka_sink.create_lineage_view('no_such')$$);
SELECT lin.err($$SELECT kafka_sink.create_lineage_view('lin_plain')$$);
SELECT lin.err($$SELECT kafka_sink.create_lineage_view('lin_fn')$$);
SELECT lin.err($$SELECT kafka_sink.create_lineage_view('lin_raw')$$);
SELECT lin.err($$SELECT kafka_sink.create_lineage_view('lin_orders', target => 'lin.plain')$$);
SELECT lin.err($$SELECT kafka_sink.create_lineage_view('lin_orders', raw => NULL)$$);
SELECT lin.err($$SELECT kafka_sink.create_lineage_view('lin_orders', view_name => 'a.b.c')$$);
SELECT lin.err($$SELECT kafka_sink.create_lineage_view('lin_orders', view_name => '"unterminated')$$);
SELECT lin.err($$SELECT kafka_sink.create_lineage_view('lin_orders', view_name => 'plain')$$);

-- the view: default name in the target's schema, made again on a second
-- call, another name on request, the columns of the target then lineage
SELECT kafka_sink.create_lineage_view('lin_orders');
SELECT kafka_sink.create_lineage_view('lin_orders');
SELECT kafka_sink.create_lineage_view('lin_events', view_name => 'lin.ev_lineage', raw => false);
SELECT attname, format_type(atttypid, atttypmod) FROM pg_attribute
 WHERE attrelid = 'lin.orders_lineage'::regclass AND attnum > 0 ORDER BY attnum;
SELECT attname FROM pg_attribute WHERE attrelid = 'lin.ev_lineage'::regclass AND attnum > 0 ORDER BY attnum;
SELECT order_id, _kafka_batch_id, _kafka_pipeline, _kafka_committed_at, _kafka_value FROM lin.orders_lineage;
SELECT obj_description('lin.orders_lineage'::regclass, 'pg_class') LIKE 'kafka_sink lineage view of pipeline lin_orders %';
SELECT id AS lin_id FROM kafka_sink.pipelines WHERE name = 'lin_orders' \gset
RESET ROLE;

-- another admin sees nothing of these pipelines
SET ROLE regress_lin_other;
SELECT lin.err($$SELECT * FROM kafka_sink.pipeline_statements('lin_orders')$$);
-- (the id depends on how many pipelines the suite made before: masked)
SELECT regexp_replace(lin.err(format('SELECT * FROM kafka_sink._pipeline_statements(%s)', :lin_id)), 'pipeline \d+ ', 'pipeline N ') AS err;
SELECT lin.err($$SELECT * FROM kafka_sink.message_fates('lin_orders')$$);
SELECT lin.err($$SELECT kafka_sink.create_lineage_view('lin_orders')$$);
SELECT count(*) FROM kafka_sink.batch_ranges;
SELECT count(*) FROM kafka_sink._lineage_ranges;
-- and the lineage view needs SELECT on the target
SELECT lin.err($$SELECT * FROM lin.orders_lineage$$);
RESET ROLE;
-- a role outside kafka_sink_admin cannot call the functions
SET ROLE regress_lin_reader;
SELECT lin.err($$SELECT * FROM kafka_sink.pipeline_statements('lin_orders')$$);
SELECT lin.err($$SELECT * FROM kafka_sink.message_fates('lin_orders')$$);
SELECT lin.err($$SELECT * FROM kafka_sink.batch_ranges$$);
RESET ROLE;
-- a role with SELECT on the target (not in kafka_sink_admin, not a member
-- of the owner) reads the lineage view: the target's rows, and no batch;
-- the raw message needs SELECT on bronze too
SET ROLE regress_lin;
GRANT SELECT ON lin.orders TO regress_lin_reader;
RESET ROLE;
SET ROLE regress_lin_reader;
SELECT lin.err($$SELECT * FROM lin.orders_lineage$$);
RESET ROLE;
SET ROLE regress_lin;
GRANT SELECT ON lin.orders_raw TO regress_lin_reader;
RESET ROLE;
SET ROLE regress_lin_reader;
SELECT order_id, _kafka_batch_id, _kafka_pipeline, _kafka_committed_at, _kafka_value FROM lin.orders_lineage;
RESET ROLE;

SET ROLE regress_lin;
SELECT kafka_sink.drop_pipeline(name) FROM kafka_sink.pipelines WHERE name LIKE 'lin\_%' ORDER BY name;
RESET ROLE;
DROP SCHEMA lin CASCADE;
DROP ROLE regress_lin;
DROP ROLE regress_lin_other;
DROP ROLE regress_lin_reader;
