-- 07_quarantine: a message that cannot be applied lands in
-- kafka_sink.quarantine with its coordinates, raw bytes, a reason code and
-- a readable detail, in the same transaction as its batch; the batch goes
-- on.  A message is never both applied and quarantined, and never neither.
\ir common.psql
SELECT plan(19);

SELECT 't07_' || :'sfx' AS topic \gset
CREATE TABLE tap.q_:sfx (
    k        bigint PRIMARY KEY,
    ts       timestamptz NOT NULL,
    amount   numeric(18,2) CHECK (amount >= 0),
    id       uuid,
    note     text DEFAULT 'none',
    doc      jsonb
);
ALTER TABLE tap.q_:sfx OWNER TO ks_tap;

CREATE TEMP TABLE sent (k text, value text, reason text);
INSERT INTO sent VALUES
  ('1',  '{"k":1,"ts":"2026-01-01T00:00:00Z","amount":"1.50","id":"a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11","doc":{"a":[1,2]}}', NULL),
  ('2',  'not json at all', 'invalid_json'),
  ('3',  '{"k":3,"ts":"2026-01-01T00:00:00Z",', 'invalid_json'),
  ('4',  '[1, 2, 3]', 'not_an_object'),
  ('5',  '42', 'not_an_object'),
  ('6',  '{"k":6,"amount":"1"}', 'missing_required_field'),
  ('7',  '{"k":7,"ts":"2026-01-01T00:00:00Z","amount":"abc"}', 'invalid_value'),
  ('8',  '{"k":8,"ts":"yesterday at noon-ish"}', 'invalid_value'),
  ('9',  '{"k":9,"ts":"2026-01-01T00:00:00Z","id":"not-a-uuid"}', 'invalid_value'),
  ('10', '{"k":10,"ts":"2026-01-01T00:00:00Z","amount":1e30}', 'invalid_value'),
  ('11', '{"k":null,"ts":"2026-01-01T00:00:00Z"}', 'null_key'),
  ('12', '{"ts":"2026-01-01T00:00:00Z"}', 'null_key'),
  ('13', '{"k":13,"ts":"2026-01-01T00:00:00Z","amount":"-5"}', 'constraint_violation'),
  ('14', '{"k":14,"ts":null}', 'constraint_violation'),
  ('15', '{"k":15,"ts":"2026-01-01T00:00:00Z","amount":2,"unknown_field":"ignored"}', NULL),
  ('16', NULL, 'not_an_object'),
  ('17', '{"k":17,"ts":"2026-01-01T00:00:00Z","note":"' || repeat('x', 3000) || '"}', 'value_too_large'),
  ('18', '{"k":18,"ts":"2026-01-01T00:00:00Z","note":null}', NULL);

ALTER SYSTEM SET kafka_sink.max_message_bytes = '2kB';
SELECT pg_reload_conf();
SELECT pg_sleep(0.5);

SELECT count(*) FROM (SELECT p.* FROM sent s,
       LATERAL kafka_sink.produce(:'bootstrap', :'topic', s.k, s.value,
                                  '{"origin":"tap"}', 0) p ORDER BY s.k::int) x;

SET ROLE ks_tap;
SELECT kafka_sink.create_pipeline(name => 'q_' || :'sfx', bootstrap_servers => :'bootstrap',
       subscribe => ARRAY[:'topic'], target => 'tap.q_' || :'sfx', starting_offsets => 'earliest') > 0;
RESET ROLE;
SELECT ok(kafka_sink.wait('q_' || :'sfx'), 'the pipeline catches up despite bad messages');

SELECT results_eq(format('SELECT k FROM tap.q_%s ORDER BY k', :'sfx'),
                  $$SELECT k::bigint FROM sent WHERE reason IS NULL ORDER BY 1$$,
                  'every good message is applied');
SELECT results_eq(format($$SELECT convert_from(key, 'UTF8')::int, reason FROM kafka_sink.quarantine q
                            JOIN kafka_sink.pipelines p ON p.id = q.pipeline_id WHERE p.name = 'q_%s'
                           ORDER BY message_offset$$, :'sfx'),
                  $$SELECT k::int, reason FROM sent WHERE reason IS NOT NULL ORDER BY k::int$$,
                  'every bad message is quarantined once, with the expected reason code');
SELECT is((SELECT count(*) FROM kafka_sink.quarantine q JOIN tap.q_:sfx t ON convert_from(q.key, 'UTF8') = t.k::text),
          0::bigint, 'no message is both applied and quarantined');

CREATE TEMP VIEW qv AS SELECT q.* FROM kafka_sink.quarantine q
  JOIN kafka_sink.pipelines p ON p.id = q.pipeline_id WHERE p.name = 'q_' || current_setting('tap.sfx');
SET tap.sfx = :'sfx';
SELECT is((SELECT convert_from(value, 'UTF8') FROM qv WHERE convert_from(key, 'UTF8') = '2'), 'not json at all',
          'the raw value is kept');
SELECT is((SELECT headers FROM qv WHERE convert_from(key, 'UTF8') = '2'), '[{"key": "origin", "value": "tap"}]'::jsonb,
          'the headers are kept');
SELECT ok((SELECT bool_and(topic = :'topic' AND partition = 0 AND message_ts IS NOT NULL AND batch_id > 0) FROM qv),
          'topic, partition, offset, timestamp and batch are kept');
SELECT is((SELECT value FROM qv WHERE convert_from(key, 'UTF8') = '16'), NULL, 'a tombstone is quarantined with a null value');
SELECT matches((SELECT detail FROM qv WHERE convert_from(key, 'UTF8') = '7'), 'field "amount" is not a valid numeric\(18,2\)',
               'invalid_value names the field and the type');
SELECT matches((SELECT detail FROM qv WHERE convert_from(key, 'UTF8') = '10'), 'field "amount" .*numeric field overflow',
               'a value that does not fit the typmod is invalid_value');
SELECT matches((SELECT detail FROM qv WHERE convert_from(key, 'UTF8') = '6'), 'required field "ts" is missing',
               'missing_required_field names the field');
SELECT matches((SELECT detail FROM qv WHERE convert_from(key, 'UTF8') = '13'), 'check constraint',
               'a CHECK violation on the target is constraint_violation with the database''s words');
SELECT matches((SELECT detail FROM qv WHERE convert_from(key, 'UTF8') = '3'), 'invalid JSON',
               'invalid_json says why');
SELECT matches((SELECT detail FROM qv WHERE convert_from(key, 'UTF8') = '17'), 'max_message_bytes',
               'value_too_large names the limit');
SELECT results_eq(format('SELECT note, doc FROM tap.q_%s WHERE k IN (1, 18) ORDER BY k', :'sfx'),
                  $$VALUES ('none'::text, '{"a":[1,2]}'::jsonb), (NULL, NULL)$$,
                  'a missing field takes the column default; an explicit null is null; nested JSON goes to jsonb');
SELECT is((SELECT sum(quarantined) FROM kafka_sink.batches b JOIN kafka_sink.pipelines p ON p.id = b.pipeline_id
            WHERE p.name = 'q_' || :'sfx'), (SELECT count(*) FROM sent WHERE reason IS NOT NULL)::numeric,
          'batch markers count the quarantined messages');

-- 10k messages with 1% bad ones: no good message lost, exactly the bad ones quarantined
SELECT 't07b_' || :'sfx' AS topic2 \gset
CREATE TABLE tap.q2_:sfx (k bigint PRIMARY KEY, amount numeric(18,2) NOT NULL CHECK (amount >= 0));
ALTER TABLE tap.q2_:sfx OWNER TO ks_tap;
SELECT format('kcat -P -b %s -t %s -p 0 -K "|"', :'bootstrap', :'topic2') AS kcat \gset
COPY (SELECT i || '|' || CASE
          WHEN i % 100 = 0 AND i % 300 = 0 THEN format('{"k":%s,"amount":-1}', i)    -- CHECK violation
          WHEN i % 100 = 0 AND i % 300 = 100 THEN format('{"k":%s,"amount":"x"}', i) -- invalid value
          WHEN i % 100 = 0 THEN format('{"k":%s,', i)                                 -- invalid JSON
          ELSE format('{"k":%s,"amount":%s}', i, i % 7) END
        FROM generate_series(1, 10000) i) TO PROGRAM :'kcat';
SET ROLE ks_tap;
SELECT kafka_sink.create_pipeline(name => 'q2_' || :'sfx', bootstrap_servers => :'bootstrap',
       subscribe => ARRAY[:'topic2'], target => 'tap.q2_' || :'sfx', starting_offsets => 'earliest') > 0;
RESET ROLE;
SELECT ok(kafka_sink.wait('q2_' || :'sfx', '120 s'), 'the 10k pipeline catches up');
SELECT results_eq(format('SELECT k FROM tap.q2_%s ORDER BY k', :'sfx'),
                  'SELECT i::bigint FROM generate_series(1, 10000) i WHERE i % 100 <> 0',
                  'no good message is lost');
SELECT results_eq(format($$SELECT message_offset + 1, reason FROM kafka_sink.quarantine q
                            JOIN kafka_sink.pipelines p ON p.id = q.pipeline_id WHERE p.name = 'q2_%s'
                           ORDER BY 1$$, :'sfx'),
                  $$SELECT i::bigint, CASE WHEN i % 300 = 0 THEN 'constraint_violation'
                                      WHEN i % 300 = 100 THEN 'invalid_value' ELSE 'invalid_json' END
                      FROM generate_series(100, 10000, 100) i$$,
                  'exactly the bad messages are quarantined, each with its reason');

ALTER SYSTEM RESET kafka_sink.max_message_bytes;
SELECT pg_reload_conf();
SELECT kafka_sink.drop_pipeline('q_' || :'sfx');
SELECT kafka_sink.drop_pipeline('q2_' || :'sfx');
SELECT * FROM finish();
