-- 01_produce: kafka_sink.produce talks to the real broker started by
-- test/harness.sh.  What it sends is read back with kcat, an independent
-- client, so the test does not trust the extension to report on itself.
--
-- Needs KS_BOOTSTRAP in the environment (test/run_tests.sh exports it; by
-- hand: eval "$(test/harness.sh env)"; pg_prove test/pgtap/01_produce.sql).
-- Messages sent to Kafka stay there (produce is not transactional); each run
-- uses a fresh topic, auto-created by the broker with one partition.
\set ON_ERROR_STOP 1
\set QUIET 1
\pset format unaligned
\pset tuples_only true
\pset pager off
\getenv bootstrap KS_BOOTSTRAP

SET client_min_messages = warning;
BEGIN;
CREATE EXTENSION IF NOT EXISTS kafka_sink;
CREATE EXTENSION IF NOT EXISTS pgtap;
SET LOCAL search_path = public, pg_catalog;
-- backstop: a hanging produce fails the file instead of blocking the run
SET LOCAL statement_timeout = '60s';

SELECT plan(14);

SELECT isnt(:'bootstrap'::text, ''::text, 'KS_BOOTSTRAP is set (the harness broker)');

SELECT 'ks_t01_' || to_char(clock_timestamp(), 'YYYYMMDDHH24MISS') || '_'
       || substr(md5(random()::text), 1, 8) AS topic \gset

-- ---- first message: key, value, one header, explicit partition 0 --------
CREATE TEMP TABLE produced AS
SELECT 1 AS n, p.partition, p."offset"
  FROM kafka_sink.produce(:'bootstrap', :'topic', 'key-1', 'value-1',
                          '{"trace_id": "abc-123"}'::jsonb, 0) AS p;

SELECT is((SELECT count(*)::int FROM produced), 1,
          'produce returns exactly one row (partition, offset)');
SELECT is((SELECT partition FROM produced WHERE n = 1), 0,
          'produce with partition => 0 reports partition 0');
SELECT is((SELECT "offset" FROM produced WHERE n = 1), 0::bigint,
          'the first message of a fresh topic gets offset 0');

-- ---- read it back with kcat at exactly the reported coordinates --------
CREATE TEMP TABLE consumed (partition int, "offset" bigint, key text, value text, headers text);
SELECT format('kcat -b %s -C -q -e -c 1 -t %s -p %s -o %s -f ''%%p\t%%o\t%%k\t%%s\t%%h\n''',
              :'bootstrap', :'topic', partition, "offset") AS kcat_cmd
  FROM produced WHERE n = 1 \gset
COPY consumed FROM PROGRAM :'kcat_cmd';

SELECT is((SELECT count(*)::int FROM consumed), 1,
          'kcat finds a message at the partition and offset produce reported');
SELECT results_eq(
    'SELECT partition, "offset", key, value FROM consumed',
    $$VALUES (0, 0::bigint, 'key-1'::text, 'value-1'::text)$$,
    'kcat reads back the same partition, offset, key and value');
SELECT is((SELECT headers FROM consumed), 'trace_id=abc-123',
          'the header given as jsonb arrives as a Kafka header');

-- ---- second message to the same partition: the next offset -------------
INSERT INTO produced
SELECT 2, p.partition, p."offset"
  FROM kafka_sink.produce(:'bootstrap', :'topic', 'key-2', 'value-2', partition => 0) AS p;

SELECT is((SELECT "offset" FROM produced WHERE n = 2),
          (SELECT "offset" + 1 FROM produced WHERE n = 1),
          'a second produce to the same partition returns offset + 1');

TRUNCATE consumed;
SELECT format('kcat -b %s -C -q -e -c 1 -t %s -p 0 -o %s -f ''%%p\t%%o\t%%k\t%%s\t%%h\n''',
              :'bootstrap', :'topic', "offset") AS kcat_cmd
  FROM produced WHERE n = 2 \gset
COPY consumed FROM PROGRAM :'kcat_cmd';
SELECT results_eq(
    'SELECT "offset", key, value, headers FROM consumed',
    $$VALUES (1::bigint, 'key-2'::text, 'value-2'::text, ''::text)$$,
    'kcat reads the second message at offset 1, without headers');

-- ---- an unreachable broker: an error, and within seconds ---------------
-- 127.0.0.1:1 refuses connections; produce waits at most
-- message.timeout.ms (10 s) for the delivery report.
SELECT clock_timestamp() AS t0 \gset
SELECT throws_ok(
    format($$SELECT * FROM kafka_sink.produce('127.0.0.1:1', %L, 'k', 'v')$$, :'topic'),
    '08006', NULL,
    'produce to an unreachable broker raises connection_failure (08006)');
SELECT cmp_ok(clock_timestamp() - :'t0'::timestamptz, '<', interval '20 s',
              'the unreachable-broker error comes within 20 s (message.timeout.ms)');

-- ---- privileges: EXECUTE is revoked from PUBLIC -------------------------
CREATE ROLE ks_t01_plain NOLOGIN;
-- schema usage, so that the error below is about the function itself
GRANT USAGE ON SCHEMA kafka_sink TO ks_t01_plain;
SET LOCAL ROLE ks_t01_plain;
SELECT throws_ok(
    format($$SELECT * FROM kafka_sink.produce(%L, %L, 'k', 'v')$$, :'bootstrap', :'topic'),
    '42501', 'permission denied for function produce',
    'a role that is not a member of kafka_sink_admin cannot call produce');
RESET ROLE;

GRANT kafka_sink_admin TO ks_t01_plain;
SET LOCAL ROLE ks_t01_plain;
SELECT lives_ok(
    format($$SELECT * FROM kafka_sink.produce(%L, %L, 'k', 'v', partition => 0)$$, :'bootstrap', :'topic'),
    'the same role may produce once it is granted kafka_sink_admin');
RESET ROLE;

-- the broker's own count: high watermark of partition 0, asked by kcat
CREATE TEMP TABLE watermark (line text);
SELECT format('kcat -b %s -Q -t %s:0:-1', :'bootstrap', :'topic') AS kcat_cmd \gset
COPY watermark FROM PROGRAM :'kcat_cmd';
SELECT is((SELECT substring(line FROM 'offset (\d+)$')::bigint FROM watermark WHERE line LIKE '%[0]%'),
          3::bigint,
          'the broker holds exactly the three messages produced to partition 0');

SELECT * FROM finish();
ROLLBACK;
