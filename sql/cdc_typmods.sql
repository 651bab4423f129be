-- CDC gaps (issue 16): evolve => 'add_columns' compares typmods.  A field
-- whose type the column takes but which is wider than the column's typmod
-- (numeric precision/scale, time precision, a source string length beyond
-- varchar(n)) is refused: evolve never alters a column.  A narrower field,
-- or one without a stated precision or length, is taken.  Called directly
-- (kafka_sink._evolve_target is what the worker calls per embedded schema;
-- the worker's side is test/e2e/routing.sh).
CREATE EXTENSION IF NOT EXISTS kafka_sink;
SET client_min_messages = warning;
DROP SCHEMA IF EXISTS tm CASCADE;
RESET client_min_messages;
CREATE SCHEMA tm;
CREATE TABLE tm.t (id int PRIMARY KEY, amount numeric(10,2), free numeric, code varchar(10),
                   at timestamp(3), atz timestamptz(0), fix char(4));

-- f(name, type-json): a one-field Debezium envelope schema
CREATE FUNCTION tm.s(field jsonb) RETURNS text LANGUAGE sql AS $$
    SELECT jsonb_build_object('type', 'struct', 'fields', jsonb_build_array(
        jsonb_build_object('field', 'after', 'type', 'struct', 'optional', true,
                           'fields', jsonb_build_array(field))))::text
$$;
CREATE FUNCTION tm.dec(name text, p int, s int) RETURNS jsonb LANGUAGE sql AS $$
    SELECT jsonb_build_object('field', name, 'type', 'bytes', 'name', 'org.apache.kafka.connect.data.Decimal',
                              'parameters', jsonb_build_object('scale', s::text, 'connect.decimal.precision', p::text))
$$;
CREATE FUNCTION tm.str(name text, len int) RETURNS jsonb LANGUAGE sql AS $$
    SELECT jsonb_build_object('field', name, 'type', 'string', 'parameters',
                              jsonb_build_object('__debezium.source.column.type', 'VARCHAR',
                                                 '__debezium.source.column.length', len::text))
$$;

-- numeric(10,2): the same and narrower fields fit; wider precision or scale do not
SELECT kafka_sink._evolve_target('tm.t', tm.s(tm.dec('amount', 10, 2)), false) AS same;
SELECT kafka_sink._evolve_target('tm.t', tm.s(tm.dec('amount', 8, 1)), false) AS narrower;
SELECT kafka_sink._evolve_target('tm.t', tm.s(tm.dec('amount', 12, 4)), false) AS wider_both;
SELECT kafka_sink._evolve_target('tm.t', tm.s(tm.dec('amount', 10, 4)), false) AS wider_scale;
SELECT kafka_sink._evolve_target('tm.t', tm.s(tm.dec('amount', 12, 2)), false) AS wider_precision;
-- an unconstrained numeric takes any Decimal; a VariableScaleDecimal states no typmod
SELECT kafka_sink._evolve_target('tm.t', tm.s(tm.dec('free', 30, 10)), false) AS unconstrained;
SELECT kafka_sink._evolve_target('tm.t', tm.s('{"field": "amount", "type": "struct", "name": "io.debezium.data.VariableScaleDecimal"}'), false) AS variable_scale;

-- varchar(10) / char(4): the source column's length when Debezium sends it
SELECT kafka_sink._evolve_target('tm.t', tm.s(tm.str('code', 10)), false) AS varchar_same;
SELECT kafka_sink._evolve_target('tm.t', tm.s(tm.str('code', 8)), false) AS varchar_narrower;
SELECT kafka_sink._evolve_target('tm.t', tm.s(tm.str('code', 20)), false) AS varchar_wider;
SELECT kafka_sink._evolve_target('tm.t', tm.s(tm.str('fix', 5)), false) AS char_wider;
SELECT kafka_sink._evolve_target('tm.t', tm.s('{"field": "code", "type": "string"}'), false) AS varchar_no_length;

-- timestamp(3): a MicroTimestamp (6) is wider, a Timestamp (3) the same
SELECT kafka_sink._evolve_target('tm.t', tm.s('{"field": "at", "type": "int64", "name": "io.debezium.time.Timestamp"}'), false) AS ts_same;
SELECT kafka_sink._evolve_target('tm.t', tm.s('{"field": "at", "type": "int64", "name": "io.debezium.time.MicroTimestamp"}'), false) AS ts_wider;
SELECT kafka_sink._evolve_target('tm.t', tm.s('{"field": "atz", "type": "string", "name": "io.debezium.time.ZonedTimestamp"}'), false) AS tstz_wider;

-- add true: a new field is added; a refused one alters nothing
SELECT kafka_sink._evolve_target('tm.t', tm.s('{"field": "extra", "type": "int32"}'), true) AS added;
SELECT kafka_sink._evolve_target('tm.t', tm.s(tm.dec('amount', 12, 4)), true) AS refused;
SELECT format_type(atttypid, atttypmod) FROM pg_attribute WHERE attrelid = 'tm.t'::regclass AND attname IN ('amount', 'extra') ORDER BY attnum;

DROP SCHEMA tm CASCADE;
