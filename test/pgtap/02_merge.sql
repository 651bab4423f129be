-- 02_merge: a running pipeline applies micro-batches with the deterministic
-- MERGE.  Proves the ordering guard (an older event never overwrites a newer
-- one, within a batch or across batches), the tie rule (equal order value:
-- the later offset wins), append mode, the batch marker and the checkpoint.
\ir common.psql
SELECT plan(17);

SELECT 't02_' || :'sfx' AS topic \gset
CREATE TABLE tap.orders_:sfx (order_id bigint PRIMARY KEY, event_ts bigint NOT NULL,
                              amount numeric(18,2), status text);
CREATE TABLE tap.events_:sfx (id bigserial PRIMARY KEY, order_id bigint, event_ts bigint,
                              status text);
ALTER TABLE tap.orders_:sfx OWNER TO ks_tap;
ALTER TABLE tap.events_:sfx OWNER TO ks_tap;

-- batch 1, produced before the pipeline exists, so it is one backlog
SELECT ks_send(:'bootstrap', :'topic', '1', '{"order_id":1,"event_ts":10,"amount":"1.10","status":"a"}', 0);
SELECT ks_send(:'bootstrap', :'topic', '1', '{"order_id":1,"event_ts":30,"amount":"3.30","status":"newest"}', 0);
SELECT ks_send(:'bootstrap', :'topic', '1', '{"order_id":1,"event_ts":20,"amount":"2.20","status":"older"}', 0);
SELECT ks_send(:'bootstrap', :'topic', '2', '{"order_id":2,"event_ts":5,"amount":"5","status":"first tie"}', 0);
SELECT ks_send(:'bootstrap', :'topic', '2', '{"order_id":2,"event_ts":5,"amount":"6","status":"second tie"}', 0);
SELECT ks_send(:'bootstrap', :'topic', '3', '{"order_id":3,"event_ts":1,"extra":"ignored","status":"x"}', 0);

SET ROLE ks_tap;
SELECT kafka_sink.create_pipeline(name => 'm_' || :'sfx', bootstrap_servers => :'bootstrap',
       subscribe => ARRAY[:'topic'], target => 'tap.orders_' || :'sfx',
       order_column => 'event_ts', starting_offsets => 'earliest') > 0;
SELECT kafka_sink.create_pipeline(name => 'a_' || :'sfx', bootstrap_servers => :'bootstrap',
       subscribe => ARRAY[:'topic'], target => 'tap.events_' || :'sfx', mode => 'append',
       starting_offsets => 'earliest') > 0;
RESET ROLE;

SELECT ok(kafka_sink.wait('m_' || :'sfx', '60 s'), 'the merge pipeline catches up with the backlog');
SELECT ok(kafka_sink.wait('a_' || :'sfx', '60 s'), 'the append pipeline catches up with the backlog');

SELECT results_eq(format('SELECT order_id, event_ts, amount, status FROM tap.orders_%s ORDER BY 1', :'sfx'),
    $$VALUES (1::bigint, 30::bigint, 3.30::numeric, 'newest'::text),
             (2, 5, 6.00, 'second tie'),
             (3, 1, NULL, 'x')$$,
    'within a batch: the greatest event_ts wins, and on a tie the later offset wins');
SELECT is((SELECT count(*) FROM tap.events_:sfx), 6::bigint,
    'append mode inserts every message');
SELECT results_eq(format('SELECT status FROM tap.events_%s ORDER BY id', :'sfx'),
    $$VALUES ('a'::text), ('newest'), ('older'), ('first tie'), ('second tie'), ('x')$$,
    'append mode inserts in offset order');

-- batch 2: an older event for key 1, a tie for key 2, and a new key
SELECT ks_send(:'bootstrap', :'topic', '1', '{"order_id":1,"event_ts":25,"amount":"9.99","status":"stale"}', 0);
SELECT ks_send(:'bootstrap', :'topic', '2', '{"order_id":2,"event_ts":5,"amount":"7","status":"third tie"}', 0);
SELECT ks_send(:'bootstrap', :'topic', '4', '{"order_id":4,"event_ts":1,"amount":"4","status":"new"}', 0);
SELECT ok(kafka_sink.wait('m_' || :'sfx', '60 s'), 'the merge pipeline catches up again');

SELECT results_eq(format('SELECT order_id, event_ts, amount, status FROM tap.orders_%s ORDER BY 1', :'sfx'),
    $$VALUES (1::bigint, 30::bigint, 3.30::numeric, 'newest'::text),
             (2, 5, 7.00, 'third tie'),
             (3, 1, NULL, 'x'),
             (4, 1, 4.00, 'new')$$,
    'across batches: an older event never overwrites a newer one; a later tie wins');

-- a partial message keeps the columns it does not carry
SELECT ks_send(:'bootstrap', :'topic', '4', '{"order_id":4,"event_ts":2,"status":"paid"}', 0);
SELECT ok(kafka_sink.wait('m_' || :'sfx', '60 s'), 'caught up after a partial message');
SELECT results_eq(format('SELECT amount, status FROM tap.orders_%s WHERE order_id = 4', :'sfx'),
    $$VALUES (4.00::numeric, 'paid'::text)$$,
    'a field absent from the message leaves the column as it was');

-- the checkpoint and the batch markers
SELECT is((SELECT o.next_offset FROM kafka_sink.offsets o JOIN kafka_sink.pipelines p ON p.id = o.pipeline_id
            WHERE p.name = 'm_' || :'sfx' AND o.partition = 0), 10::bigint,
    'the checkpoint is the next offset after the last message');
SELECT is((SELECT sum(messages) FROM kafka_sink.batches b JOIN kafka_sink.pipelines p ON p.id = b.pipeline_id
            WHERE p.name = 'm_' || :'sfx'), 10::numeric,
    'batch markers count every message once');
SELECT is((SELECT array_agg(batch_id ORDER BY batch_id) = array_agg(n ORDER BY n)
             FROM (SELECT b.batch_id, row_number() OVER (ORDER BY b.batch_id) AS n
                     FROM kafka_sink.batches b JOIN kafka_sink.pipelines p ON p.id = b.pipeline_id
                    WHERE p.name = 'm_' || :'sfx') x), true,
    'batch ids are contiguous from 1');
SELECT is((SELECT sum(stale) FROM kafka_sink.batches b JOIN kafka_sink.pipelines p ON p.id = b.pipeline_id
            WHERE p.name = 'm_' || :'sfx'), 1::numeric,
    'the stale event is counted as stale');
SELECT is((SELECT sum(superseded) FROM kafka_sink.batches b JOIN kafka_sink.pipelines p ON p.id = b.pipeline_id
            WHERE p.name = 'm_' || :'sfx'), 3::numeric,
    'events replaced inside their batch are counted as superseded');
SELECT is((SELECT sum(inserted) FROM kafka_sink.batches b JOIN kafka_sink.pipelines p ON p.id = b.pipeline_id
            WHERE p.name = 'm_' || :'sfx'), 4::numeric,
    'one insert per key');
SELECT is((SELECT state FROM kafka_sink.pipelines WHERE name = 'm_' || :'sfx'), 'running',
    'the pipeline is still running');
SELECT ok((SELECT worker_pids IS NOT NULL FROM kafka_sink.status WHERE name = 'm_' || :'sfx'),
    'status shows the worker''s pid');

SELECT kafka_sink.drop_pipeline('m_' || :'sfx');
SELECT kafka_sink.drop_pipeline('a_' || :'sfx');
SELECT * FROM finish();
