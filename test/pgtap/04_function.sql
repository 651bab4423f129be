-- 04_function: mode 'function', the foreachBatch analogue.  The user's
-- function gets the batch id and the batch's rows in offset order, runs in
-- the batch's transaction, and can write several tables; a function that
-- raises makes the batch roll back and the pipeline stop as failed without
-- advancing its checkpoint.
\ir common.psql
SELECT plan(9);

SELECT 't04_' || :'sfx' AS topic \gset
SELECT 'fn_' || :'sfx' AS sch \gset
CREATE SCHEMA :sch AUTHORIZATION ks_tap;
SET ROLE ks_tap;
SET search_path = :sch, pg_catalog;
CREATE TABLE fn_rows (order_id bigint, event_ts bigint NOT NULL, amount numeric(18,2));
CREATE TABLE fn_totals (order_id bigint PRIMARY KEY, total numeric, events int);
CREATE TABLE fn_batches (batch_id bigint PRIMARY KEY, n int, first_ts bigint);
CREATE FUNCTION fn_apply(batch_id bigint, rows fn_rows[]) RETURNS void
LANGUAGE plpgsql SET search_path FROM CURRENT AS $fn$
BEGIN
    IF EXISTS (SELECT 1 FROM unnest(rows) r WHERE r.amount < 0) THEN
        RAISE EXCEPTION 'negative amount in batch %', batch_id USING ERRCODE = 'raise_exception';
    END IF;
    INSERT INTO fn_batches VALUES (batch_id, cardinality(rows), rows[1].event_ts);
    MERGE INTO fn_totals t
    USING (SELECT order_id, sum(amount) AS total, count(*)::int AS events
             FROM unnest(rows) GROUP BY order_id) s
       ON t.order_id = s.order_id
     WHEN MATCHED THEN UPDATE SET total = t.total + s.total, events = t.events + s.events
     WHEN NOT MATCHED THEN INSERT VALUES (s.order_id, s.total, s.events);
END
$fn$;
RESET search_path;
RESET ROLE;

SELECT ks_send(:'bootstrap', :'topic', (i % 3)::text,
               format('{"order_id":%s,"event_ts":%s,"amount":"%s"}', i % 3, i, i), 0)
  FROM generate_series(1, 30) i;

SET ROLE ks_tap;
SELECT kafka_sink.create_pipeline(name => 'fn_' || :'sfx', bootstrap_servers => :'bootstrap',
       subscribe => ARRAY[:'topic'], target => :'sch' || '.fn_rows', mode => 'function',
       batch_function => format('%s.fn_apply(bigint, %s.fn_rows[])', :'sch', :'sch')::regprocedure,
       starting_offsets => 'earliest', max_offsets_per_batch => 7) > 0;
RESET ROLE;
SELECT ok(kafka_sink.wait('fn_' || :'sfx'), 'the function pipeline catches up');

SELECT results_eq(format('SELECT order_id, total, events FROM %s.fn_totals ORDER BY 1', :'sch'),
    $$SELECT i % 3::bigint, sum(i)::numeric, count(*)::int FROM generate_series(1, 30) i GROUP BY 1 ORDER BY 1$$,
    'the function saw every message exactly once');
SELECT is((SELECT sum(n) FROM :sch.fn_batches), 30::bigint, 'the rows of all batches add up to the messages');
SELECT is((SELECT max(n) FROM :sch.fn_batches), 7, 'max_offsets_per_batch bounds each batch');
SELECT results_eq(format('SELECT batch_id FROM %s.fn_batches ORDER BY 1', :'sch'),
    format($$SELECT b.batch_id FROM kafka_sink.batches b JOIN kafka_sink.pipelines p ON p.id = b.pipeline_id
              WHERE p.name = 'fn_%s' AND b.messages > 0 ORDER BY 1$$, :'sfx'),
    'the function gets the same batch ids as the batch markers, in the same transaction');
SELECT results_eq(format('SELECT first_ts FROM %s.fn_batches ORDER BY batch_id', :'sch'),
    'SELECT generate_series(1, 30, 7)::bigint',
    'each batch''s rows arrive in offset order with their decoded values');

-- a function error is permanent: failed, the error recorded, nothing advanced
SELECT o.next_offset AS before FROM kafka_sink.offsets o JOIN kafka_sink.pipelines p ON p.id = o.pipeline_id
 WHERE p.name = 'fn_' || :'sfx' \gset
SELECT ks_send(:'bootstrap', :'topic', '1', '{"order_id":1,"event_ts":99,"amount":"-1"}', 0);
SELECT ok(ks_poll(format($$SELECT state = 'failed' FROM kafka_sink.pipelines WHERE name = 'fn_%s'$$, :'sfx')),
          'a batch function that raises stops the pipeline in state failed');
SELECT matches((SELECT last_error FROM kafka_sink.status WHERE name = 'fn_' || :'sfx'),
               'negative amount in batch', 'status shows the error');
SELECT is((SELECT o.next_offset FROM kafka_sink.offsets o JOIN kafka_sink.pipelines p ON p.id = o.pipeline_id
            WHERE p.name = 'fn_' || :'sfx'), :'before'::bigint,
          'the failed batch did not advance the checkpoint');

SELECT kafka_sink.drop_pipeline('fn_' || :'sfx');
SELECT * FROM finish();
