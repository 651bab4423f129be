-- 09_input_errors: a value its column's input function rejects is
-- quarantined as invalid_value with the same detail on every PostgreSQL
-- version, whichever way the rejection comes: on 16+ built-in types (and
-- domains with plain CHECKs) report it as a soft error and the batch keeps
-- its subtransaction; an input function that throws (here a domain whose
-- CHECK calls a function that raises) still throws on 16+, and the
-- subtransaction fallback must catch it.  Good, soft-bad and hard-bad
-- values alternate within one batch, so each path resumes after the other.
\ir common.psql
SELECT plan(6);

SELECT 't09_' || :'sfx' AS topic \gset
CREATE FUNCTION tap.ie_check_:sfx(v int) RETURNS boolean LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    IF v = 13 THEN
        RAISE EXCEPTION 'thirteen is unlucky' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN true;
END
$$;
CREATE DOMAIN tap.ie_hard_:sfx AS int CHECK (tap.ie_check_:sfx(VALUE));
CREATE DOMAIN tap.ie_soft_:sfx AS int CHECK (VALUE > 0);
CREATE TABLE tap.ie_:sfx (
    k     bigint PRIMARY KEY,
    n     integer,
    ts    timestamptz,
    hard  tap.ie_hard_:sfx,
    soft  tap.ie_soft_:sfx
);
ALTER TABLE tap.ie_:sfx OWNER TO ks_tap;
GRANT USAGE ON SCHEMA tap TO ks_tap;

CREATE TEMP TABLE sent (k int, value text, detail text);
INSERT INTO sent VALUES
  (1, '{"k":1,"n":1,"ts":"2026-01-01T00:00:00Z","hard":1,"soft":1}', NULL),
  (2, '{"k":2,"n":"two"}', 'field "n" is not a valid integer: invalid input syntax for type integer: "two"'),
  (3, '{"k":3,"hard":13}', 'field "hard" is not a valid tap.ie_hard_' || :'sfx' || ': thirteen is unlucky'),
  (4, '{"k":4,"n":4}', NULL),
  (5, '{"k":5,"n":99999999999}', 'field "n" is not a valid integer: value "99999999999" is out of range for type integer'),
  (6, '{"k":6,"hard":13}', 'field "hard" is not a valid tap.ie_hard_' || :'sfx' || ': thirteen is unlucky'),
  (7, '{"k":7,"ts":"not a time"}', 'field "ts" is not a valid timestamp with time zone: invalid input syntax for type timestamp with time zone: "not a time"'),
  (8, '{"k":8,"soft":-1}', 'field "soft" is not a valid tap.ie_soft_' || :'sfx' || ': value for domain tap.ie_soft_' || :'sfx' || ' violates check constraint "ie_soft_' || :'sfx' || '_check"'),
  (9, '{"k":9,"hard":9,"soft":9}', NULL);

SELECT count(*) FROM (SELECT p.* FROM sent s,
       LATERAL kafka_sink.produce(:'bootstrap', :'topic', s.k::text, s.value, NULL, 0) p ORDER BY s.k) x;

SET ROLE ks_tap;
SELECT kafka_sink.create_pipeline(name => 'ie_' || :'sfx', bootstrap_servers => :'bootstrap',
       subscribe => ARRAY[:'topic'], target => 'tap.ie_' || :'sfx', starting_offsets => 'earliest') > 0;
RESET ROLE;
SELECT ok(kafka_sink.wait('ie_' || :'sfx'), 'the pipeline catches up');

SELECT results_eq(format('SELECT k FROM tap.ie_%s ORDER BY k', :'sfx'),
                  $$SELECT k::bigint FROM sent WHERE detail IS NULL ORDER BY 1$$,
                  'the good values around the bad ones are applied');
SELECT results_eq(format($$SELECT convert_from(key, 'UTF8')::int, reason, detail FROM kafka_sink.quarantine q
                            JOIN kafka_sink.pipelines p ON p.id = q.pipeline_id WHERE p.name = 'ie_%s'
                           ORDER BY message_offset$$, :'sfx'),
                  $$SELECT k, 'invalid_value', detail FROM sent WHERE detail IS NOT NULL ORDER BY k$$,
                  'each rejected value is invalid_value with the same detail on every version');
SELECT is((SELECT sum(messages)::text || ' ' || sum(quarantined)::text FROM kafka_sink.batches b
             JOIN kafka_sink.pipelines p ON p.id = b.pipeline_id WHERE p.name = 'ie_' || :'sfx'),
          '9 6', 'the batches count every message once and the six rejections as quarantined');
SELECT is((SELECT soft FROM tap.ie_:sfx WHERE k = 9)::int, 9, 'a domain value that passes its check is applied');
SELECT is((SELECT n FROM tap.ie_:sfx WHERE k = 4), 4, 'a row after a rejected one keeps its values');

SELECT kafka_sink.drop_pipeline('ie_' || :'sfx');
SELECT * FROM finish();
