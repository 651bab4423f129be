-- Every C function exposed in SQL, called the wrong way: NULLs, bad values,
-- wrong column definition lists, outside a batch, nested in a batch, by
-- another owner and by a role outside kafka_sink_admin.  Each call ends in
-- a clear error (or a harmless answer), never in a crash or another owner's
-- data.  A batch without a broker: kafka_sink._replay() applies quarantined
-- messages with the pipeline's rules, through the same statements
-- (kafka_sink._batch_rows()) a worker runs.
CREATE EXTENSION IF NOT EXISTS kafka_sink;
SET client_min_messages = warning;
DROP SCHEMA IF EXISTS ifn CASCADE;
DROP ROLE IF EXISTS regress_if_a;
DROP ROLE IF EXISTS regress_if_b;
DROP ROLE IF EXISTS regress_if_plain;
RESET client_min_messages;

CREATE ROLE regress_if_a LOGIN;
GRANT kafka_sink_admin TO regress_if_a;
CREATE ROLE regress_if_b LOGIN;
GRANT kafka_sink_admin TO regress_if_b;
CREATE ROLE regress_if_plain LOGIN;
CREATE SCHEMA ifn AUTHORIZATION regress_if_a;
GRANT USAGE ON SCHEMA ifn TO regress_if_b, regress_if_plain;

-- err(sql): runs sql and shows the SQLSTATE, message, detail and hint of its
-- error, or ok and how many rows it returned
CREATE FUNCTION ifn.err(sql text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    st text; m text; d text; h text; n bigint;
BEGIN
    EXECUTE format('SELECT count(*) FROM (%s) q', sql) INTO n;
    RETURN 'ok: ' || n || ' rows';
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, m = MESSAGE_TEXT,
                            d = PG_EXCEPTION_DETAIL, h = PG_EXCEPTION_HINT;
    RETURN st || ': ' || m
        || CASE WHEN d <> '' THEN E'\n  detail: ' || d ELSE '' END
        || CASE WHEN h <> '' THEN E'\n  hint: ' || h ELSE '' END;
END
$$;
GRANT EXECUTE ON FUNCTION ifn.err(text) TO PUBLIC;

-- the probe: a statement that a batch function or a trigger runs during a
-- batch, chosen by the test through the setting ifn.probe
CREATE TABLE ifn.seen (order_id bigint, note text, kafka_offset bigint);
GRANT ALL ON ifn.seen TO regress_if_a;
CREATE FUNCTION ifn.run_probe() RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    IF coalesce(current_setting('ifn.probe', true), '') <> '' THEN
        EXECUTE current_setting('ifn.probe');
    END IF;
END
$$;
GRANT EXECUTE ON FUNCTION ifn.run_probe() TO PUBLIC;

SET ROLE regress_if_a;
CREATE TABLE ifn.orders (order_id bigint PRIMARY KEY, event_ts timestamptz NOT NULL,
                         amount numeric(18,2), note varchar(10));
CREATE TABLE ifn.merged (LIKE ifn.orders INCLUDING ALL);
CREATE FUNCTION ifn.on_batch(batch_id bigint, rows ifn.orders[]) RETURNS void
    LANGUAGE plpgsql AS $$ BEGIN PERFORM ifn.run_probe(); END $$;
CREATE FUNCTION ifn.on_row() RETURNS trigger
    LANGUAGE plpgsql AS $$ BEGIN PERFORM ifn.run_probe(); RETURN NEW; END $$;
CREATE TRIGGER probe BEFORE INSERT ON ifn.merged FOR EACH ROW EXECUTE FUNCTION ifn.on_row();
SELECT kafka_sink.create_pipeline(name => 'if_fn', bootstrap_servers => '127.0.0.1:9',
       subscribe => ARRAY['if.v1'], target => 'ifn.orders', mode => 'function',
       batch_function => 'ifn.on_batch(bigint, ifn.orders[])', start => false) > 0 AS created;
SELECT kafka_sink.create_pipeline(name => 'if_merge', bootstrap_servers => '127.0.0.1:9',
       subscribe => ARRAY['if.v1'], target => 'ifn.merged', start => false) > 0 AS created;
RESET ROLE;
SELECT id AS fn_id FROM kafka_sink.pipeline_definitions WHERE name = 'if_fn' \gset
SELECT id AS merge_id FROM kafka_sink.pipeline_definitions WHERE name = 'if_merge' \gset

-- two quarantined messages per pipeline: the batch that _replay applies
INSERT INTO kafka_sink.quarantine (pipeline_id, batch_id, topic, partition, message_offset, message_ts,
                                   key, value, reason, detail)
SELECT p, 1, 'if.v1', 0, o, '2026-01-01 00:00:00+00',
       convert_to(o::text, 'UTF8'),
       convert_to(format('{"order_id": %s, "event_ts": "2026-01-01T00:00:0%sZ", "amount": "1.50", "note": "n%s"}',
                         o, o, o), 'UTF8'),
       'constraint_violation', 'test'
  FROM unnest(ARRAY[:fn_id, :merge_id]::bigint[]) p, generate_series(1, 2) o;
SELECT array_agg(id ORDER BY id) AS fn_ids FROM kafka_sink.quarantine WHERE pipeline_id = :fn_id \gset
SELECT array_agg(id ORDER BY id) AS merge_ids FROM kafka_sink.quarantine WHERE pipeline_id = :merge_id \gset

-- ---- _batch_rows() and _batch_messages() outside a batch ----
SET ROLE regress_if_a;
SELECT ifn.err($$SELECT * FROM kafka_sink._batch_rows() AS s(order_id bigint)$$);
SELECT ifn.err($$SELECT kafka_sink._batch_rows()$$);
SELECT ifn.err($$SELECT * FROM kafka_sink._batch_messages() AS m(topic text, partition integer,
                 "offset" bigint, ts timestamptz, key bytea, value bytea, headers jsonb)$$);
SELECT ifn.err($$SELECT * FROM kafka_sink._batch_messages() AS m(x text)$$);
-- without a column definition list the parser refuses already
SELECT ifn.err($$SELECT * FROM kafka_sink._batch_rows()$$);

-- ---- during a batch: the column definition list must be the batch's ----
-- the batch of ifn.orders: 4 columns, 4 presence flags, 5 message columns
\set good 'order_id bigint, event_ts timestamptz, amount numeric(18,2), note varchar(10), _ks_p0 boolean, _ks_p1 boolean, _ks_p2 boolean, _ks_p3 boolean, _ks_topic text, _ks_partition integer, _ks_offset bigint, _ks_seq integer, _ks_ts timestamptz'
\set tail '_ks_p0 boolean, _ks_p1 boolean, _ks_p2 boolean, _ks_p3 boolean, _ks_topic text, _ks_partition integer, _ks_offset bigint, _ks_seq integer, _ks_ts timestamptz'
-- text where the batch has bigint (was: a crash of the server)
SELECT set_config('ifn.probe', format('SELECT * FROM kafka_sink._batch_rows() AS s(order_id text, event_ts timestamptz, amount numeric(18,2), note varchar(10), %s)', :'tail'), false) IS NOT NULL AS probe;
SELECT ifn.err(format('SELECT * FROM kafka_sink._replay(%s, %L)', :fn_id, :'fn_ids'));
-- one column too few
SELECT set_config('ifn.probe', 'SELECT * FROM kafka_sink._batch_rows() AS s(order_id bigint, event_ts timestamptz, amount numeric(18,2), note varchar(10), _ks_p0 boolean, _ks_p1 boolean, _ks_p2 boolean, _ks_p3 boolean, _ks_topic text, _ks_partition integer, _ks_offset bigint, _ks_seq integer)', false) IS NOT NULL AS probe;
SELECT ifn.err(format('SELECT * FROM kafka_sink._replay(%s, %L)', :fn_id, :'fn_ids'));
-- one column too many
SELECT set_config('ifn.probe', format('SELECT * FROM kafka_sink._batch_rows() AS s(%s, extra bigint)', :'good'), false) IS NOT NULL AS probe;
SELECT ifn.err(format('SELECT * FROM kafka_sink._replay(%s, %L)', :fn_id, :'fn_ids'));
-- a wrong typmod: varchar(20) for varchar(10), numeric for numeric(18,2)
SELECT set_config('ifn.probe', format('SELECT * FROM kafka_sink._batch_rows() AS s(order_id bigint, event_ts timestamptz, amount numeric(18,2), note varchar(20), %s)', :'tail'), false) IS NOT NULL AS probe;
SELECT ifn.err(format('SELECT * FROM kafka_sink._replay(%s, %L)', :fn_id, :'fn_ids'));
SELECT set_config('ifn.probe', format('SELECT * FROM kafka_sink._batch_rows() AS s(order_id bigint, event_ts timestamptz, amount numeric, note varchar(10), %s)', :'tail'), false) IS NOT NULL AS probe;
SELECT ifn.err(format('SELECT * FROM kafka_sink._replay(%s, %L)', :fn_id, :'fn_ids'));
-- a presence flag as text
SELECT set_config('ifn.probe', 'SELECT * FROM kafka_sink._batch_rows() AS s(order_id bigint, event_ts timestamptz, amount numeric(18,2), note varchar(10), _ks_p0 text, _ks_p1 boolean, _ks_p2 boolean, _ks_p3 boolean, _ks_topic text, _ks_partition integer, _ks_offset bigint, _ks_seq integer, _ks_ts timestamptz)', false) IS NOT NULL AS probe;
SELECT ifn.err(format('SELECT * FROM kafka_sink._replay(%s, %L)', :fn_id, :'fn_ids'));
-- in the select list: no column definition list at all
SELECT set_config('ifn.probe', 'SELECT kafka_sink._batch_rows()', false) IS NOT NULL AS probe;
SELECT ifn.err(format('SELECT * FROM kafka_sink._replay(%s, %L)', :fn_id, :'fn_ids'));
-- _batch_messages() during a batch that writes no bronze table
SELECT set_config('ifn.probe', 'SELECT * FROM kafka_sink._batch_messages() AS m(topic text, partition integer, "offset" bigint, ts timestamptz, key bytea, value bytea, headers jsonb)', false) IS NOT NULL AS probe;
SELECT ifn.err(format('SELECT * FROM kafka_sink._replay(%s, %L)', :fn_id, :'fn_ids'));
-- _replay() nested in a batch
SELECT set_config('ifn.probe', format('SELECT * FROM kafka_sink._replay(%s, %L)', :merge_id, :'merge_ids'), false) IS NOT NULL AS probe;
SELECT ifn.err(format('SELECT * FROM kafka_sink._replay(%s, %L)', :fn_id, :'fn_ids'));
-- the same from a trigger on the target of a MERGE
SELECT set_config('ifn.probe', format('SELECT * FROM kafka_sink._batch_rows() AS s(order_id text, event_ts timestamptz, amount numeric(18,2), note varchar(10), %s)', :'tail'), false) IS NOT NULL AS probe;
SELECT ifn.err(format('SELECT * FROM kafka_sink._replay(%s, %L)', :merge_id, :'merge_ids'));
-- nothing was applied by the failed batches
SELECT count(*) AS merged, (SELECT count(*) FROM kafka_sink.quarantine WHERE replayed_at IS NOT NULL) AS replayed
  FROM ifn.merged;
-- the right list works, in the batch function and in the trigger
SELECT set_config('ifn.probe', format('INSERT INTO ifn.seen SELECT s.order_id, s.note, s._ks_offset FROM kafka_sink._batch_rows() AS s(%s)', :'good'), false) IS NOT NULL AS probe;
-- (through the API: a direct _replay() may not mark the quarantine rows)
SELECT * FROM kafka_sink.replay_quarantine('if_fn', ids => :'fn_ids');
SELECT * FROM ifn.seen ORDER BY order_id;
TRUNCATE ifn.seen;
SELECT * FROM kafka_sink.replay_quarantine('if_merge', ids => :'merge_ids');
-- the trigger fired once per row, and saw the whole batch each time
SELECT order_id, count(*) FROM ifn.seen GROUP BY 1 ORDER BY 1;
SELECT order_id, note FROM ifn.merged ORDER BY 1;
SELECT set_config('ifn.probe', '', false) IS NOT NULL AS probe;

-- ---- _replay(): arguments ----
SELECT * FROM kafka_sink._replay(NULL, '{}');
SELECT * FROM kafka_sink._replay(:fn_id, NULL);
SELECT ifn.err('SELECT * FROM kafka_sink._replay(-1, ''{}'')');
SELECT ifn.err('SELECT * FROM kafka_sink._replay(0, ''{1}'')');
SELECT * FROM kafka_sink._replay(:fn_id, '{}');
SELECT * FROM kafka_sink._replay(:fn_id, ARRAY[NULL, NULL]::bigint[]);
SELECT * FROM kafka_sink._replay(:fn_id, '{{-1, 0}, {9223372036854775807, -9223372036854775808}}');

-- ---- _watermarks(): arguments, checked before any broker is contacted ----
SELECT ifn.err('SELECT * FROM kafka_sink._watermarks(NULL)');
SELECT ifn.err('SELECT * FROM kafka_sink._watermarks(''no_such_pipeline'')');
SELECT ifn.err('SELECT * FROM kafka_sink._watermarks('''')');
SELECT ifn.err('SELECT * FROM kafka_sink._watermarks(''if_fn'', ''infinity'')');
SELECT ifn.err('SELECT * FROM kafka_sink._watermarks(''if_fn'', ''-infinity'')');

-- ---- produce(): arguments, checked before anything is sent ----
SELECT ifn.err('SELECT * FROM kafka_sink.produce('''', ''t'', ''k'', ''v'')');
SELECT ifn.err('SELECT * FROM kafka_sink.produce(''127.0.0.1:9'', NULL, ''k'', ''v'')');
SELECT ifn.err('SELECT * FROM kafka_sink.produce(''127.0.0.1:9'', ''a b'', ''k'', ''v'')');
SELECT ifn.err('SELECT * FROM kafka_sink.produce(''127.0.0.1:9'', ''..'', ''k'', ''v'')');
SELECT ifn.err(format('SELECT * FROM kafka_sink.produce(''127.0.0.1:9'', %L, ''k'', ''v'')', repeat('x', 250)));
SELECT ifn.err('SELECT * FROM kafka_sink.produce(''127.0.0.1:9'', ''t'', ''k'', ''v'', headers => ''{"h": {"x": 1}}'')');
SELECT ifn.err('SELECT * FROM kafka_sink.produce(''127.0.0.1:9'', ''t'', ''k'', ''v'', partition => -2147483648)');

-- ---- the option checks ----
SELECT kafka_sink._check_kafka_options(NULL) IS NULL AS strict;
SELECT ifn.err('SELECT kafka_sink._check_kafka_options(''[]'')');
SELECT ifn.err('SELECT kafka_sink._check_kafka_options(''"x"'')');
SELECT ifn.err('SELECT kafka_sink._check_kafka_options(''{"client.rack": [1]}'')');
SELECT kafka_sink._is_secret_option(NULL) IS NULL AS strict,
       kafka_sink._is_secret_option('') AS empty,
       kafka_sink._is_secret_option('sasl.password') AS secret;

-- ---- the hop count (src/kafka/hops.c): 1 outside a worker's batch; kafka_sink's headers ----
SELECT kafka_sink._outbox_hops() AS hops;
SELECT ifn.err('SELECT * FROM kafka_sink.produce(''127.0.0.1:9'', ''t'', ''k'', ''v'', headers => ''{"kafka_sink.hops": "0"}'')');
SELECT ifn.err('SELECT kafka_sink.outbox_send(''t'', ''k'', ''v'', ''{"kafka_sink.pipeline": "x"}'')');

-- ---- the shared-memory views: no workers run in this database ----
SELECT ifn.err('SELECT * FROM kafka_sink._worker_pids()');
SELECT ifn.err('SELECT * FROM kafka_sink._partition_stats()');
SELECT ifn.err('SELECT kafka_sink._wake_launcher()');

-- ---- the writer's side of the batches' fence: the API's only ----
SELECT ifn.err('SELECT kafka_sink._fence_batches(NULL)');
SELECT ifn.err('SELECT kafka_sink._fence_batches(0)');
SELECT ifn.err(format('SELECT kafka_sink._fence_batches(%s)', :fn_id));
RESET ROLE;

-- ---- another owner: A's pipelines do not exist for B ----
SET ROLE regress_if_b;
SELECT regexp_replace(ifn.err(format('SELECT * FROM kafka_sink._replay(%s, %L)', :fn_id, :'fn_ids')),
                      'pipeline \d+', 'pipeline <id of if_fn>') AS err;
SELECT ifn.err('SELECT * FROM kafka_sink._watermarks(''if_fn'')');
SELECT ifn.err('SELECT * FROM kafka_sink._watermarks(''if_merge'', now())');
SELECT count(*) AS visible FROM kafka_sink.pipelines;
RESET ROLE;

-- ---- a role outside kafka_sink_admin may call none of them ----
-- (even with USAGE on the schema, which it does not have either)
GRANT USAGE ON SCHEMA kafka_sink TO regress_if_plain;
SET ROLE regress_if_plain;
SELECT ifn.err('SELECT kafka_sink._check_kafka_options(''{}'')');
SELECT ifn.err('SELECT kafka_sink._is_secret_option(''x'')');
SELECT ifn.err('SELECT * FROM kafka_sink.produce(''127.0.0.1:9'', ''t'', ''k'', ''v'')');
SELECT ifn.err('SELECT * FROM kafka_sink._watermarks(''if_fn'')');
SELECT ifn.err('SELECT * FROM kafka_sink._batch_rows() AS s(a int)');
SELECT ifn.err('SELECT * FROM kafka_sink._batch_messages() AS s(a int)');
SELECT ifn.err(format('SELECT * FROM kafka_sink._replay(%s, %L)', :fn_id, :'fn_ids'));
SELECT ifn.err('SELECT * FROM kafka_sink._partition_stats()');
SELECT ifn.err('SELECT kafka_sink._wake_launcher()');
SELECT ifn.err('SELECT * FROM kafka_sink._worker_pids()');
SELECT ifn.err('SELECT kafka_sink._fence_batches(1)');
SELECT ifn.err('SELECT kafka_sink._outbox_hops()');
RESET ROLE;
REVOKE USAGE ON SCHEMA kafka_sink FROM regress_if_plain;
-- _cdc_position (message_fate's source position, the worker's rule; more in
-- the cdc_position test): a wrong offset is an error
SELECT ifn.err('SELECT 1 WHERE kafka_sink._cdc_position(''{"lsn": 1}'', NULL) IS NULL');
SELECT ifn.err('SELECT 1 WHERE kafka_sink._cdc_position(''{"ts_ms": 1}'', -9223372036854775808) IS NULL');

-- every C function of the extension is covered above, and none is PUBLIC
-- (the name and the number of arguments: create_pipeline's grow with each release)
SELECT p.proname || '/' || p.pronargs AS c_function,
       has_function_privilege('regress_if_plain', p.oid, 'EXECUTE') AS plain_may_call
  FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang
 WHERE p.pronamespace = 'kafka_sink'::regnamespace AND l.lanname = 'c'
 ORDER BY (p.proname || '/' || p.pronargs) COLLATE "C";

SET ROLE regress_if_a;
SELECT kafka_sink.drop_pipeline('if_fn');
SELECT kafka_sink.drop_pipeline('if_merge');
RESET ROLE;
DROP SCHEMA ifn CASCADE;
DROP ROLE regress_if_a;
DROP ROLE regress_if_b;
DROP ROLE regress_if_plain;
