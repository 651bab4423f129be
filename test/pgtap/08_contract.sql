-- 08_contract: the explicit data contract.  Nested fields mapped with
-- columns =>, the key from the Kafka message key (string and json),
-- tombstones that delete in batch order, schema versions with per-version
-- mappings (and unknown_schema_version), producer duplicates removed by
-- event id across batches and across a rebuild of the pipeline, the bronze
-- landing (idempotent, and bronze-only pipelines), and replay of the
-- quarantine after the cause is fixed.
\ir common.psql
SELECT plan(37);

SELECT 't08_' || :'sfx' AS topic \gset
SELECT 'c08_' || :'sfx' AS sch \gset
CREATE SCHEMA :sch AUTHORIZATION ks_tap;
SET ROLE ks_tap;
SET search_path = :sch, public, pg_catalog;
CREATE TABLE nested (order_id bigint PRIMARY KEY, amount numeric(18,2), city text, ts timestamptz);
CREATE TABLE bykey (order_id bigint PRIMARY KEY, status text);
CREATE TABLE byjsonkey (tenant text, order_id bigint, status text, PRIMARY KEY (tenant, order_id));
CREATE TABLE versions (order_id bigint PRIMARY KEY, amount numeric(18,2) NOT NULL);
CREATE TABLE dedup (id bigserial PRIMARY KEY, event_id text, order_id bigint);
CREATE TABLE replay (order_id bigint PRIMARY KEY, ts bigint NOT NULL, qty int CHECK (qty > 0));
RESET search_path;
RESET ROLE;

-- ---- nested fields --------------------------------------------------------
SELECT ks_send(:'bootstrap', :'topic' || '.nested', '1',
  '{"order_id":1,"payload":{"amount":"12.5","shipping":{"city":"Lyon"}},"meta":{"ts":"2026-03-01T10:00:00Z"},"amount":"999"}', 0);
SET ROLE ks_tap;
SELECT kafka_sink.create_pipeline(name => 'nested_' || :'sfx', bootstrap_servers => :'bootstrap',
       subscribe => ARRAY[:'topic' || '.nested'], target => :'sch' || '.nested', starting_offsets => 'earliest',
       columns => '{"amount": "payload.amount", "city": "payload.shipping.city", "ts": "meta.ts"}') > 0;
RESET ROLE;
SELECT ok(kafka_sink.wait('nested_' || :'sfx'), 'nested: caught up');
SELECT results_eq(format('SELECT order_id, amount, city, ts FROM %s.nested', :'sch'),
    $$VALUES (1::bigint, 12.50::numeric, 'Lyon'::text, '2026-03-01 10:00:00+00'::timestamptz)$$,
    'columns => maps nested fields; the mapped path wins over a same-named top-level field');

-- ---- the key from the message key, and tombstones ------------------------------
SELECT ks_send(:'bootstrap', :'topic' || '.bykey', k, v, 0)
  FROM (VALUES ('1', '{"status":"created"}'), ('2', '{"status":"created"}'),
               ('1', NULL), ('1', '{"status":"re-created"}'),      -- delete then re-insert: present
               ('2', '{"status":"paid"}'), ('2', NULL),              -- update then delete: absent
               ('3', NULL),                                          -- delete of a missing row
               (NULL, '{"status":"no key"}')) AS m(k, v);
SET ROLE ks_tap;
SELECT kafka_sink.create_pipeline(name => 'bykey_' || :'sfx', bootstrap_servers => :'bootstrap',
       subscribe => ARRAY[:'topic' || '.bykey'], target => :'sch' || '.bykey', starting_offsets => 'earliest',
       key_format => 'string', delete_on_tombstone => true) > 0;
RESET ROLE;
SELECT ok(kafka_sink.wait('bykey_' || :'sfx'), 'bykey: caught up');
SELECT results_eq(format('SELECT order_id, status FROM %s.bykey ORDER BY 1', :'sch'),
    $$VALUES (1::bigint, 're-created'::text)$$,
    'tombstones delete in batch order: delete then re-insert ends present, update then delete ends absent');
SELECT is((SELECT string_agg(reason, ',') FROM kafka_sink.quarantine q JOIN kafka_sink.pipelines p ON p.id = q.pipeline_id
            WHERE p.name = 'bykey_' || :'sfx'), 'null_key', 'a message without a key is null_key');
-- a tombstone in a later batch deletes a row written by an earlier one
SELECT ks_send(:'bootstrap', :'topic' || '.bykey', '1', NULL, 0);
SELECT ok(kafka_sink.wait('bykey_' || :'sfx'), 'bykey: caught up again');
SELECT is((SELECT count(*) FROM :sch.bykey), 0::bigint, 'a tombstone deletes across batches');
SELECT is((SELECT sum(deleted) FROM kafka_sink.batches b JOIN kafka_sink.pipelines p ON p.id = b.pipeline_id
            WHERE p.name = 'bykey_' || :'sfx'), 1::numeric,
          'deleted counts rows removed from the target (a key inserted and deleted within one batch never existed)');

SELECT ks_send(:'bootstrap', :'topic' || '.jsonkey', k, v, 0)
  FROM (VALUES ('{"tenant":"a","order_id":1}', '{"status":"x"}'),
               ('{"tenant":"b","order_id":1}', '{"status":"y","tenant":"ignored"}'),
               ('{"tenant":"a"}', '{"status":"z"}')) AS m(k, v);
SET ROLE ks_tap;
SELECT kafka_sink.create_pipeline(name => 'jsonkey_' || :'sfx', bootstrap_servers => :'bootstrap',
       subscribe => ARRAY[:'topic' || '.jsonkey'], target => :'sch' || '.byjsonkey', starting_offsets => 'earliest',
       key_format => 'json') > 0;
RESET ROLE;
SELECT ok(kafka_sink.wait('jsonkey_' || :'sfx'), 'jsonkey: caught up');
SELECT results_eq(format('SELECT tenant, order_id, status FROM %s.byjsonkey ORDER BY 1, 2', :'sch'),
    $$VALUES ('a'::text, 1::bigint, 'x'::text), ('b', 1, 'y')$$,
    'key_format json takes a composite key from the message key, over the value''s fields');
SELECT is((SELECT reason FROM kafka_sink.quarantine q JOIN kafka_sink.pipelines p ON p.id = q.pipeline_id
            WHERE p.name = 'jsonkey_' || :'sfx'), 'null_key', 'a JSON key missing a key column is null_key');

-- ---- schema versions ---------------------------------------------------------------
SELECT ks_send(:'bootstrap', :'topic' || '.versions', '1', v, 0)
  FROM (VALUES ('{"schema_version":1,"order_id":1,"amount":"10.25"}'),
               ('{"schema_version":2,"order_id":2,"amount_cents":1999}'),
               ('{"schema_version":"2","order_id":3,"amount_cents":5}'),
               ('{"schema_version":3,"order_id":4,"amount":"1"}'),
               ('{"order_id":5,"amount":"1"}')) AS m(v);
SET ROLE ks_tap;
SELECT kafka_sink.create_pipeline(name => 'versions_' || :'sfx', bootstrap_servers => :'bootstrap',
       subscribe => ARRAY[:'topic' || '.versions'], target => :'sch' || '.versions', starting_offsets => 'earliest',
       schema_version_field => 'schema_version',
       schema_versions => '{"1": {}, "2": {"amount": {"path": "amount_cents", "scale": 2}}}') > 0;
RESET ROLE;
SELECT ok(kafka_sink.wait('versions_' || :'sfx'), 'versions: caught up');
SELECT results_eq(format('SELECT order_id, amount FROM %s.versions ORDER BY 1', :'sch'),
    $$VALUES (1::bigint, 10.25::numeric), (2, 19.99), (3, 0.05)$$,
    'v1 amount as a string and v2 amount_cents as an integer both land in amount');
SELECT results_eq(format($$SELECT message_offset, reason FROM kafka_sink.quarantine q JOIN kafka_sink.pipelines p
                           ON p.id = q.pipeline_id WHERE p.name = 'versions_%s' ORDER BY 1$$, :'sfx'),
    $$VALUES (3::bigint, 'unknown_schema_version'::text), (4, 'unknown_schema_version')$$,
    'an unknown or missing version is unknown_schema_version');

-- ---- producer duplicates ---------------------------------------------------------
SELECT ks_send(:'bootstrap', :'topic' || '.dedup', 'x', format('{"event_id":"e%s","order_id":%s}', i, i), 0)
  FROM generate_series(1, 5) i;
SELECT ks_send(:'bootstrap', :'topic' || '.dedup', 'x', '{"event_id":"e3","order_id":3}', 0);   -- same batch
SET ROLE ks_tap;
SELECT kafka_sink.create_pipeline(name => 'dedup_' || :'sfx', bootstrap_servers => :'bootstrap',
       subscribe => ARRAY[:'topic' || '.dedup'], target => :'sch' || '.dedup', mode => 'append',
       starting_offsets => 'earliest', event_id => 'event_id') > 0;
RESET ROLE;
SELECT ok(kafka_sink.wait('dedup_' || :'sfx'), 'dedup: caught up');
SELECT ks_send(:'bootstrap', :'topic' || '.dedup', 'x', '{"event_id":"e2","order_id":2}', 0);   -- a later batch
SELECT ks_send(:'bootstrap', :'topic' || '.dedup', 'x', '{"event_id":"e6","order_id":6}', 0);
SELECT ok(kafka_sink.wait('dedup_' || :'sfx'), 'dedup: caught up again');
-- rebuild: a new pipeline with a fresh checkpoint reads everything again
SELECT kafka_sink.drop_pipeline('dedup_' || :'sfx');
SET ROLE ks_tap;
SELECT kafka_sink.create_pipeline(name => 'dedup2_' || :'sfx', bootstrap_servers => :'bootstrap',
       subscribe => ARRAY[:'topic' || '.dedup'], target => :'sch' || '.dedup', mode => 'append',
       starting_offsets => 'earliest', event_id => 'event_id') > 0;
RESET ROLE;
SELECT ok(kafka_sink.wait('dedup2_' || :'sfx'), 'dedup after rebuild: caught up');
SELECT results_eq(format('SELECT event_id FROM %s.dedup ORDER BY id', :'sch'),
    $$VALUES ('e1'::text), ('e2'), ('e3'), ('e4'), ('e5'), ('e6')$$,
    'each event id is applied once: within a batch, across batches and across a rebuild');
SELECT is((SELECT sum(duplicates) FROM kafka_sink.batches b JOIN kafka_sink.pipelines p ON p.id = b.pipeline_id
            WHERE p.name = 'dedup2_' || :'sfx'), 8::numeric, 'the rebuilt pipeline counts every message as a duplicate');

-- ---- bronze --------------------------------------------------------------------------
SET ROLE ks_tap;
SELECT kafka_sink.create_pipeline(name => 'bronze_' || :'sfx', bootstrap_servers => :'bootstrap',
       subscribe => ARRAY[:'topic' || '.bykey'], bronze => :'sch' || '.raw', starting_offsets => 'earliest') > 0;
RESET ROLE;
SELECT ok(kafka_sink.wait('bronze_' || :'sfx'), 'bronze-only: caught up');
SELECT is((SELECT count(*) FROM :sch.raw), 9::bigint, 'a bronze-only pipeline lands every message raw, tombstones included');
SELECT results_eq(format($$SELECT "offset", encode(key, 'escape'), value IS NULL FROM %s.raw
                           WHERE "offset" IN (0, 2, 7) ORDER BY 1$$, :'sch'),
    $$VALUES (0::bigint, '1'::text, false), (2, '1', true), (7, NULL, false)$$,
    'bronze keeps offset, key and value (null for a tombstone)');
-- reading the same range twice adds nothing: a second pipeline into the same bronze table
SET ROLE ks_tap;
SELECT kafka_sink.create_pipeline(name => 'bronze2_' || :'sfx', bootstrap_servers => :'bootstrap',
       subscribe => ARRAY[:'topic' || '.bykey'], bronze => :'sch' || '.raw', starting_offsets => 'earliest') > 0;
RESET ROLE;
SELECT ok(kafka_sink.wait('bronze2_' || :'sfx'), 'second bronze pipeline: caught up');
SELECT is((SELECT count(*) FROM :sch.raw), 9::bigint, 'bronze is idempotent: the same range read twice adds nothing');

-- a bronze table of the user's own: other column order, extra columns with
-- defaults and an identity (the multi-insert path fills them as INSERT would)
SET ROLE ks_tap;
SET search_path = :sch, public, pg_catalog;
CREATE TABLE raw_own (seq bigint GENERATED ALWAYS AS IDENTITY, note text NOT NULL DEFAULT 'landed',
                      value bytea, key bytea, headers jsonb, ts timestamptz, batch_id bigint NOT NULL,
                      "offset" bigint NOT NULL, partition integer NOT NULL, topic text NOT NULL,
                      PRIMARY KEY (topic, partition, "offset"));
-- one with a trigger, one with a CHECK constraint: the INSERT statement path
CREATE TABLE raw_trig (LIKE raw INCLUDING ALL);
CREATE TABLE trig_seen (n int);
CREATE FUNCTION raw_trig_count() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN EXECUTE format('INSERT INTO %I.trig_seen VALUES (1)', TG_TABLE_SCHEMA); RETURN NEW; END $$;
CREATE TRIGGER raw_trig_count AFTER INSERT ON raw_trig FOR EACH ROW EXECUTE FUNCTION raw_trig_count();
CREATE TABLE raw_check (LIKE raw INCLUDING ALL, CHECK ("offset" >= 0));
-- and one whose NOT NULL key a keyless message violates
CREATE TABLE raw_notnull (LIKE raw INCLUDING ALL);
ALTER TABLE raw_notnull ALTER COLUMN key SET NOT NULL;
RESET search_path;
SELECT kafka_sink.create_pipeline(name => 'bronze_' || t || '_' || :'sfx', bootstrap_servers => :'bootstrap',
       subscribe => ARRAY[:'topic' || '.bykey'], bronze => :'sch' || '.raw_' || t, starting_offsets => 'earliest') > 0
  FROM unnest(ARRAY['own', 'trig', 'check', 'notnull']) t;
RESET ROLE;
SELECT ok(kafka_sink.wait('bronze_own_' || :'sfx') AND kafka_sink.wait('bronze_trig_' || :'sfx')
          AND kafka_sink.wait('bronze_check_' || :'sfx'), 'bronze tables of the user''s own: caught up');
SELECT results_eq(format($$SELECT t.seq, t.note, t."offset", t.key, t.value, t.ts, t.batch_id > 0
                           FROM %1$s.raw_own t ORDER BY "offset"$$, :'sch'),
    format($$SELECT row_number() OVER (ORDER BY "offset"), 'landed'::text, "offset", key, value, ts, true
             FROM %1$s.raw ORDER BY "offset"$$, :'sch'),
    'own bronze table: same messages as the standard one, defaults and identity filled per row');
SELECT results_eq(format($$SELECT "offset", key, value, ts, headers FROM %1$s.raw_trig
                           UNION ALL SELECT "offset", key, value, ts, headers FROM %1$s.raw_check ORDER BY 1$$, :'sch'),
    format($$SELECT "offset", key, value, ts, headers FROM %1$s.raw
             UNION ALL SELECT "offset", key, value, ts, headers FROM %1$s.raw ORDER BY 1$$, :'sch'),
    'bronze with a trigger and with a CHECK constraint: the same messages');
SELECT is((SELECT count(*) FROM :sch.trig_seen), 9::bigint, 'the bronze table''s trigger fired once per message');
SELECT ok(ks_poll(format($$SELECT state = 'failed' FROM kafka_sink.pipelines WHERE name = 'bronze_notnull_%s'$$, :'sfx')),
    'a message that violates the bronze table''s NOT NULL fails the pipeline (nothing skipped)');
SELECT ok((SELECT sqlstate = '23502' AND message LIKE '%null value in column "key"%' FROM kafka_sink.errors e
             JOIN kafka_sink.pipelines p ON p.id = e.pipeline_id WHERE p.name = 'bronze_notnull_' || :'sfx'
            ORDER BY e.id DESC LIMIT 1), 'its error names the column');
SELECT is((SELECT count(*) FROM :sch.raw_notnull), 0::bigint, 'and nothing of that batch landed');
SELECT is((SELECT sum(next_offset) FROM kafka_sink.offsets o JOIN kafka_sink.pipelines p ON p.id = o.pipeline_id
            WHERE p.name = 'bronze_notnull_' || :'sfx'), 0::numeric, 'nor did its checkpoint move');

-- ---- replay ------------------------------------------------------------------------------
SELECT ks_send(:'bootstrap', :'topic' || '.replay', '1', v, 0)
  FROM (VALUES ('{"order_id":1,"ts":1,"qty":0}'),        -- CHECK violation
               ('{"order_id":1,"ts":2,"qty":"lots"}'),   -- invalid_value, stays
               ('{"order_id":2,"ts":5,"qty":0}')) AS m(v);   -- CHECK violation
SET ROLE ks_tap;
SELECT kafka_sink.create_pipeline(name => 'replay_' || :'sfx', bootstrap_servers => :'bootstrap',
       subscribe => ARRAY[:'topic' || '.replay'], target => :'sch' || '.replay', order_column => 'ts',
       starting_offsets => 'earliest') > 0;
RESET ROLE;
SELECT ok(kafka_sink.wait('replay_' || :'sfx'), 'replay: caught up');
-- a newer event for order 2 arrives in a later batch and applies
SELECT ks_send(:'bootstrap', :'topic' || '.replay', '1', '{"order_id":2,"ts":9,"qty":3}', 0);
SELECT ok(kafka_sink.wait('replay_' || :'sfx'), 'replay: caught up again');
ALTER TABLE :sch.replay DROP CONSTRAINT replay_qty_check;
SET ROLE ks_tap;
SELECT results_eq(format($$SELECT * FROM kafka_sink.replay_quarantine('replay_%s')$$, :'sfx'),
    $$VALUES (2::bigint, 1::bigint)$$, 'replay applies what now fits and reports what still fails');
RESET ROLE;
SELECT results_eq(format('SELECT order_id, ts, qty FROM %s.replay ORDER BY 1', :'sch'),
    $$VALUES (1::bigint, 1::bigint, 0), (2, 9, 3)$$,
    'replayed messages respect the ordering guard: an older one does not overwrite a newer one');
SELECT results_eq(format($$SELECT message_offset, reason, replayed_at IS NOT NULL FROM kafka_sink.quarantine q
                           JOIN kafka_sink.pipelines p ON p.id = q.pipeline_id WHERE p.name = 'replay_%s' ORDER BY 1$$, :'sfx'),
    $$VALUES (0::bigint, 'constraint_violation'::text, true), (1, 'invalid_value', false), (2, 'constraint_violation', true)$$,
    'replayed messages are marked; the one still failing stays with its reason');

SELECT kafka_sink.drop_pipeline(name) FROM kafka_sink.pipelines WHERE name LIKE '%\_' || :'sfx';
SELECT * FROM finish();
