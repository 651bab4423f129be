-- kafka_sink._cdc_position: message_fate's source position is the worker's
-- own C function (ks_cdc_position); a wrong call is an error, never a crash.
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS kafka_sink;
RESET client_min_messages;
-- the language: C, not a second copy of the rule in SQL
SELECT l.lanname FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang
 WHERE p.oid = 'kafka_sink._cdc_position(jsonb, bigint)'::regprocedure;
-- PostgreSQL lsn; MySQL file * 10^26 + pos * 10^6 + row; ts_ms * 10^19 + offset
SELECT kafka_sink._cdc_position('{"lsn": 123456789012, "ts_ms": 1}', 5);
SELECT kafka_sink._cdc_position('{"file": "mysql-bin.000009", "pos": 400, "row": 1}', 5);
SELECT kafka_sink._cdc_position('{"file": "mysql-bin.000010", "pos": 4}', 5);
SELECT kafka_sink._cdc_position('{"ts_ms": 1700000000123}', 5);
-- the worker's edges: a row that is not a number counts as 0; a pos beyond
-- bigint, a row of a million or a file without a number fall back to ts_ms
SELECT kafka_sink._cdc_position('{"file": "mysql-bin.000009", "pos": 400, "row": "3"}', 5);
SELECT kafka_sink._cdc_position('{"file": "b.1", "pos": 10000000000000000000, "ts_ms": 7}', 5);
SELECT kafka_sink._cdc_position('{"file": "b.1", "pos": 1, "row": 1000000, "ts_ms": 7}', 5);
SELECT kafka_sink._cdc_position('{"file": "mysql-bin", "pos": 1, "ts_ms": 7}', 5);
-- no position: NULL (the worker quarantines such an event)
SELECT kafka_sink._cdc_position('{"change_lsn": "00000025:00000d98:0002"}', 5) IS NULL AS no_position;
SELECT kafka_sink._cdc_position('{"ts_ms": -1}', 5) IS NULL AS negative_ts;
SELECT kafka_sink._cdc_position('"a string"', 5) IS NULL AS not_an_object;
SELECT kafka_sink._cdc_position('[{"lsn": 1}]', 5) IS NULL AS an_array;
SELECT kafka_sink._cdc_position(NULL, 5) IS NULL AS null_source;
-- wrong calls
SELECT kafka_sink._cdc_position('{"lsn": 1}', NULL);
SELECT kafka_sink._cdc_position('{"ts_ms": 1}', -1);
