-- Routing (issue 16): a target template, a targets map, create_targets and
-- evolve as create_pipeline and alter_pipeline take them; what cannot work
-- is refused with an errcode, a message and a hint.  Needs no broker (the
-- worker's side is test/e2e/routing.sh).
CREATE EXTENSION IF NOT EXISTS kafka_sink;
SET client_min_messages = warning;
DROP SCHEMA IF EXISTS route CASCADE;
DROP ROLE IF EXISTS regress_route;
RESET client_min_messages;

CREATE ROLE regress_route LOGIN;
GRANT kafka_sink_admin TO regress_route;
CREATE SCHEMA route AUTHORIZATION regress_route;

-- err(sql): runs sql and shows the SQLSTATE, message, detail and hint of its error
CREATE FUNCTION route.err(sql text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    st text; m text; d text; h text;
BEGIN
    EXECUTE sql;
    RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, m = MESSAGE_TEXT,
                            d = PG_EXCEPTION_DETAIL, h = PG_EXCEPTION_HINT;
    RETURN st || ': ' || m
        || CASE WHEN d <> '' THEN E'\n  detail: ' || d ELSE '' END
        || CASE WHEN h <> '' THEN E'\n  hint: ' || h ELSE '' END;
END
$$;
GRANT EXECUTE ON FUNCTION route.err(text) TO PUBLIC;

-- mk(extra): create_pipeline of a stopped pipeline 'r' with extra arguments
CREATE FUNCTION route.mk(extra text) RETURNS text LANGUAGE sql AS $$
    SELECT route.err(format('SELECT kafka_sink.create_pipeline(name => %L, bootstrap_servers => %L, subscribe => ARRAY[%L], start => false, %s)',
                            'r', '127.0.0.1:9', 'a', extra))
$$;
GRANT EXECUTE ON FUNCTION route.mk(text) TO PUBLIC;

SET ROLE regress_route;
CREATE TABLE route.orders (id bigint PRIMARY KEY, v text);

-- templates: accepted, kept apart from target, shown by the pipelines view
SELECT route.mk($$target => '{topic}'$$);
SELECT target, target_template, targets, create_targets, evolve FROM kafka_sink.pipelines WHERE name = 'r';
SELECT kafka_sink.drop_pipeline('r', true);
SELECT route.mk($$target => 'replica.{source.table}', key_columns => ARRAY['id'], order_column => 'v'$$);
SELECT target, target_template, key_columns, order_column FROM kafka_sink.pipelines WHERE name = 'r';
SELECT kafka_sink.drop_pipeline('r', true);
SELECT route.mk($$target => '{source.schema}.{source.table}', mode => 'append'$$);
SELECT kafka_sink.drop_pipeline('r', true);
SELECT route.mk($$target => 'cdc_{source.db}_{source.table}'$$);
SELECT kafka_sink.drop_pipeline('r', true);
-- a template needs no table to exist; a plain target still does
SELECT route.mk($$target => 'nowhere.{topic}'$$);
SELECT kafka_sink.drop_pipeline('r', true);
SELECT route.mk($$target => 'nowhere.t'$$);

-- bad templates
SELECT route.mk($$target => 'a.b.{topic}'$$);
SELECT route.mk($$target => '{topic'$$);
SELECT route.mk($$target => '{topic}}'$$);
SELECT route.mk($$target => '{}'$$);
SELECT route.mk($$target => '{a..b}'$$);
SELECT route.mk($$target => '.{topic}'$$);
SELECT route.mk($$target => '{topic}.'$$);
SELECT route.mk($$target => '{{topic}}'$$);
-- value fields need JSON or Avro values (Avro as its JsonConverter twin); {topic} does not
SELECT route.mk($$target => '{source.table}', value_format => 'json_schema', schema_registry => '{"url": "http://127.0.0.1:9"}'$$);
SELECT route.mk($$target => '{source.table}', value_format => 'avro', schema_registry => '{"url": "http://127.0.0.1:9"}'$$);
SELECT kafka_sink.drop_pipeline('r', true);
SELECT route.mk($$target => 'route.{topic}', value_format => 'avro',
                  value_schema => '{"type": "record", "name": "r", "fields": [{"name": "id", "type": "long"}]}'$$);
SELECT kafka_sink.drop_pipeline('r', true);
-- a batch function takes one row type
SELECT route.mk($$target => '{topic}', mode => 'function', batch_function => 'pg_catalog.now()'$$);

-- targets map: alone, beside a plain target, beside a template
SELECT route.mk($$targets => '{"a": "route.orders", "inventory.items": "\"Odd Schema\".\"T\""}'$$);
SELECT target, target_template, targets FROM kafka_sink.pipelines WHERE name = 'r';
SELECT kafka_sink.drop_pipeline('r', true);
SELECT route.mk($$target => 'route.orders', targets => '{"b": "route.other"}'$$);
SELECT kafka_sink.drop_pipeline('r', true);
SELECT route.mk($$target => 'route.{topic}', targets => '{"b": "route.other"}'$$);
SELECT kafka_sink.drop_pipeline('r', true);
-- bad maps
SELECT route.mk($$targets => '[]'$$);
SELECT route.mk($$targets => '{}'$$);
SELECT route.mk($$targets => '{"a": 1}'$$);
SELECT route.mk($$targets => '{"": "route.orders"}'$$);
SELECT route.mk($$targets => '{"a": "orders"}'$$);
SELECT route.mk($$targets => '{"a": "x.y.z"}'$$);
SELECT route.mk($$targets => '{"a": "route.\"unclosed"}'$$);
SELECT route.mk(format($$targets => '{"a": "route.%s"}'$$, repeat('t', 64)));
-- keys still need to be a list of names
SELECT route.mk($$targets => '{"a": "route.orders"}', key_columns => ARRAY[]::text[]$$);

-- create_targets and evolve: with routing and JSON values, never NULL
SELECT route.mk($$target => '{topic}', create_targets => true, evolve => 'add_columns'$$);
SELECT create_targets, evolve FROM kafka_sink.pipelines WHERE name = 'r';
SELECT kafka_sink.drop_pipeline('r', true);
SELECT route.mk($$target => '{topic}', evolve => 'drop_columns'$$);
SELECT route.mk($$target => '{topic}', create_targets => NULL$$);
SELECT route.mk($$target => 'route.orders', create_targets => true$$);
SELECT route.mk($$target => 'route.{topic}', create_targets => true, value_format => 'json_schema', schema_registry => '{"url": "http://127.0.0.1:9"}'$$);
SELECT count(*) FROM kafka_sink.pipelines WHERE name = 'r';
SELECT route.mk($$target => 'route.{topic}', create_targets => true, value_format => 'avro',
                  value_schema => '{"type": "record", "name": "r", "fields": [{"name": "id", "type": "long"}]}'$$);
SELECT count(*) FROM kafka_sink.pipelines WHERE name = 'r';
SELECT kafka_sink.drop_pipeline('r', true);

-- alter_pipeline: the map replaced, removed ('{}'), checked
SELECT route.mk($$target => 'route.orders'$$);
SELECT route.err($$SELECT kafka_sink.alter_pipeline('r', targets => '{"t": "route.orders"}')$$);
SELECT targets FROM kafka_sink.pipelines WHERE name = 'r';
SELECT route.err($$SELECT kafka_sink.alter_pipeline('r', targets => '{"t": "orders"}')$$);
SELECT route.err($$SELECT kafka_sink.alter_pipeline('r', targets => '{}')$$);
SELECT targets FROM kafka_sink.pipelines WHERE name = 'r';
SELECT route.err($$SELECT kafka_sink.alter_pipeline('r', evolve => 'add_columns')$$);
SELECT route.err($$SELECT kafka_sink.alter_pipeline('r', targets => '{"t": "route.orders"}', evolve => 'add_columns')$$);
SELECT targets, evolve FROM kafka_sink.pipelines WHERE name = 'r';
SELECT kafka_sink.drop_pipeline('r', true);
SELECT route.mk($$targets => '{"t": "route.orders"}'$$);
SELECT route.err($$SELECT kafka_sink.alter_pipeline('r', targets => '{}')$$);
SELECT kafka_sink.drop_pipeline('r', true);
SELECT route.mk($$target => 'route.{source.table}'$$);
SELECT route.err($$SELECT kafka_sink.alter_pipeline('r', value_format => 'json_schema',
                    schema_registry => '{"url": "http://127.0.0.1:9"}')$$);
SELECT kafka_sink.drop_pipeline('r', true);

-- routed pipelines take filter and computed columns and the write modes:
-- the expressions' text is parsed at create and alter, they are analyzed
-- against each routed table that exists then (the targets map's, the
-- template's for a subscribed topic; route.ra is topic ra's), and the worker
-- analyzes them again where it opens a table; delete_mode soft's mark
-- columns are checked the same way
CREATE TABLE route.ra (id bigint PRIMARY KEY, v text, n int, _deleted boolean NOT NULL DEFAULT false);
CREATE FUNCTION route.mkra(extra text) RETURNS text LANGUAGE sql AS $$
    SELECT route.err(format('SELECT kafka_sink.create_pipeline(name => %L, bootstrap_servers => %L, subscribe => ARRAY[%L, %L], start => false, %s)',
                            'r', '127.0.0.1:9', 'ra', 'rb', extra))
$$;
SELECT kafka_sink._template_target('route.{topic}', 'ra') AS ra, kafka_sink._template_target('{topic}', 'srv.inv.Orders') AS split,
       kafka_sink._template_target('{source.table}', 'ra') AS reads_value, kafka_sink._template_target('t_{headers.h}', 'ra') AS reads_header;
SELECT route.mkra($$target => 'route.{topic}', filter => 'n > 0', computed => '{"v": "n::text"}'$$);
SELECT filter, computed FROM kafka_sink.pipelines WHERE name = 'r';
SELECT kafka_sink.drop_pipeline('r', true);
SELECT route.mkra($$target => 'route.{topic}', filter => 'missing > 0'$$);
SELECT route.mkra($$target => 'route.{topic}', computed => '{"n": "v"}'$$);
SELECT route.mkra($$target => 'route.{topic}', computed => '{"id": "n"}'$$);
SELECT route.mkra($$target => 'route.{topic}', filter => 'now() IS NOT NULL'$$);
-- a template that reads the value names no table yet: the text only
SELECT route.mkra($$target => 'route.{source.table}', filter => 'missing > 0'$$);
SELECT kafka_sink.drop_pipeline('r', true);
SELECT route.mkra($$target => 'route.{source.table}', filter => 'n > 0, n < 9'$$);
SELECT route.mkra($$target => 'route.{source.table}', computed => '{"v": "(SELECT 1) FROM x"}'$$);
-- a map: each table it names that exists (the one that does not: at first use)
SELECT route.mkra($$targets => '{"x": "route.ra", "y": "route.nosuch", "z": "nosuch.t"}', filter => 'n > 0'$$);
SELECT kafka_sink.drop_pipeline('r', true);
SELECT route.mkra($$targets => '{"x": "route.ra", "y": "route.orders"}', filter => 'n > 0'$$);
-- delete_mode soft: the marks of each routed table that exists
SELECT route.mkra($$target => 'route.{topic}', envelope => 'debezium', delete_mode => 'soft'$$);
SELECT delete_mode FROM kafka_sink.pipelines WHERE name = 'r';
SELECT kafka_sink.drop_pipeline('r', true);
SELECT route.mkra($$targets => '{"x": "route.ra", "y": "route.orders"}', envelope => 'debezium', delete_mode => 'soft'$$);
SELECT route.mkra($$targets => '{"x": "route.ra"}', envelope => 'debezium'$$);
SELECT route.err($$SELECT kafka_sink.alter_pipeline('r', delete_mode => 'soft')$$);
SELECT route.err($$SELECT kafka_sink.alter_pipeline('r', targets => '{"x": "route.orders"}')$$);
SELECT delete_mode, targets FROM kafka_sink.pipelines WHERE name = 'r';
SELECT kafka_sink.drop_pipeline('r', true);
-- write modes, and filters added or re-checked by alter_pipeline
SELECT route.mk($$target => 'route.orders', targets => '{"x": "route.orders"}', write_mode => 'update_only'$$);
SELECT route.err($$SELECT kafka_sink.alter_pipeline('r', filter => 'n > 0')$$);
SELECT route.err($$SELECT kafka_sink.alter_pipeline('r', filter => 'v IS NOT NULL')$$);
SELECT route.err($$SELECT kafka_sink.alter_pipeline('r', targets => '{"x": "route.ra"}', filter => 'n > 0')$$);
SELECT route.err($$SELECT kafka_sink.alter_pipeline('r', write_mode => 'insert_only')$$);
SELECT filter, targets, write_mode FROM kafka_sink.pipelines WHERE name = 'r';
SELECT kafka_sink.drop_pipeline('r', true);
DROP FUNCTION route.mkra(text);
DROP TABLE route.ra;

-- alter_pipeline: a routed pipeline (no target of its own) changes its
-- envelope and on_truncate, with create_pipeline's checks
SELECT route.mk($$target => 'route.{topic}'$$);
SELECT route.err($$SELECT kafka_sink.alter_pipeline('r', on_truncate => 'ignore')$$);
SELECT route.err($$SELECT kafka_sink.alter_pipeline('r', envelope => 'cdc')$$);
SELECT route.err($$SELECT kafka_sink.alter_pipeline('r', envelope => 'debezium', on_truncate => 'ignore')$$);
SELECT envelope, on_truncate, order_column FROM kafka_sink.pipelines WHERE name = 'r';
SELECT route.err($$SELECT kafka_sink.alter_pipeline('r', on_truncate => 'fail')$$);
SELECT envelope, on_truncate, order_column FROM kafka_sink.pipelines WHERE name = 'r';
SELECT route.err($$SELECT kafka_sink.alter_pipeline('r', envelope => 'plain')$$);
SELECT envelope, on_truncate FROM kafka_sink.pipelines WHERE name = 'r';
SELECT kafka_sink.drop_pipeline('r', true);
SELECT route.mk($$targets => '{"t": "route.orders"}', value_format => 'protobuf', schema_registry => '{"url": "http://127.0.0.1:9"}'$$);
SELECT route.err($$SELECT kafka_sink.alter_pipeline('r', envelope => 'debezium')$$);
SELECT kafka_sink.drop_pipeline('r', true);
-- a routed history pipeline keeps envelope debezium
SELECT route.mk($$target => 'route.{topic}', mode => 'history', envelope => 'debezium'$$);
SELECT route.err($$SELECT kafka_sink.alter_pipeline('r', envelope => 'plain')$$);
SELECT route.err($$SELECT kafka_sink.alter_pipeline('r', on_truncate => 'ignore')$$);
SELECT envelope, on_truncate FROM kafka_sink.pipelines WHERE name = 'r';
SELECT kafka_sink.drop_pipeline('r', true);
-- a bronze-only pipeline still takes no decoding options
SELECT route.mk($$bronze => 'route.raw'$$);
SELECT route.err($$SELECT kafka_sink.alter_pipeline('r', envelope => 'debezium')$$);
SELECT kafka_sink.drop_pipeline('r', true);

-- the template parser as the worker uses it
SELECT route.err($$SELECT kafka_sink._check_target_template('x.{source.table}')$$);
SELECT route.err($$SELECT kafka_sink._check_target_template('plain')$$);
SELECT kafka_sink._check_target_template(NULL);

-- the column types of Kafka Connect schema fields (create_targets, evolve)
SELECT f->>'type' AS type, f->>'name' AS name, kafka_sink._connect_type(f)
  FROM jsonb_array_elements('[
    {"type": "int8"}, {"type": "int16"}, {"type": "int32"}, {"type": "int64"},
    {"type": "float32"}, {"type": "float64"}, {"type": "float"}, {"type": "double"}, {"type": "boolean"}, {"type": "string"}, {"type": "bytes"},
    {"type": "struct"}, {"type": "array"}, {"type": "map"}, {"type": "weird"}, {},
    {"type": "int32", "name": "io.debezium.time.Date"},
    {"type": "int32", "name": "org.apache.kafka.connect.data.Date"},
    {"type": "int32", "name": "io.debezium.time.Time"},
    {"type": "int64", "name": "io.debezium.time.MicroTime"},
    {"type": "int64", "name": "io.debezium.time.NanoTime"},
    {"type": "int64", "name": "io.debezium.time.Timestamp"},
    {"type": "int64", "name": "org.apache.kafka.connect.data.Timestamp"},
    {"type": "int64", "name": "io.debezium.time.MicroTimestamp"},
    {"type": "string", "name": "io.debezium.time.ZonedTimestamp"},
    {"type": "string", "name": "io.debezium.time.ZonedTime"},
    {"type": "int32", "name": "io.debezium.time.Year"},
    {"type": "bytes", "name": "org.apache.kafka.connect.data.Decimal", "parameters": {"scale": "2", "connect.decimal.precision": "12"}},
    {"type": "bytes", "name": "org.apache.kafka.connect.data.Decimal", "parameters": {"scale": "2"}},
    {"type": "bytes", "name": "org.apache.kafka.connect.data.Decimal", "parameters": {"scale": "9", "connect.decimal.precision": "3"}},
    {"type": "bytes", "name": "org.apache.kafka.connect.data.Decimal", "parameters": {"scale": "1); DROP TABLE x; --", "connect.decimal.precision": "3"}},
    {"type": "struct", "name": "io.debezium.data.VariableScaleDecimal"},
    {"type": "string", "name": "io.debezium.data.Json"},
    {"type": "string", "name": "io.debezium.data.Uuid"},
    {"type": "string", "name": "io.debezium.data.Enum"}
  ]'::jsonb) f;

-- create_targets as the worker calls it (as the owner): from the embedded
-- schema of a value (a Debezium envelope's after, or the value's struct),
-- keyed on the message key's fields; names quoted, never spliced
SELECT kafka_sink._create_target('route', 'made', '{"schema": {"type": "struct", "fields": [
           {"field": "before", "type": "struct", "fields": [{"field": "id", "type": "int64"}]},
           {"field": "after", "type": "struct", "fields": [
               {"field": "id", "type": "int64", "optional": false},
               {"field": "Name \"x\"", "type": "string"},
               {"field": "amount", "type": "bytes", "name": "org.apache.kafka.connect.data.Decimal",
                "parameters": {"scale": "2", "connect.decimal.precision": "10"}},
               {"field": "at", "type": "string", "name": "io.debezium.time.ZonedTimestamp"}]},
           {"field": "op", "type": "string"}]}, "payload": {}}',
       '{"schema": {"type": "struct", "fields": [{"field": "id", "type": "int64"}]}, "payload": {"id": 1}}',
       NULL, 'merge');
SELECT a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull
  FROM pg_attribute a WHERE a.attrelid = 'route.made'::regclass AND a.attnum > 0 ORDER BY a.attnum;
SELECT pg_get_constraintdef(c.oid) FROM pg_constraint c WHERE c.conrelid = 'route.made'::regclass AND c.contype <> 'n';
SELECT relowner::regrole FROM pg_class WHERE oid = 'route.made'::regclass;
-- a plain struct keyed by a bare JSON key; append needs no key
SELECT kafka_sink._create_target('route', 'made2', '{"schema": {"type": "struct", "fields": [
           {"field": "k", "type": "string"}, {"field": "v", "type": "int32"}]}, "payload": {}}',
       '{"k": "a"}', NULL, 'merge');
SELECT pg_get_constraintdef(c.oid) FROM pg_constraint c WHERE c.conrelid = 'route.made2'::regclass AND c.contype <> 'n';
SELECT kafka_sink._create_target('route', 'made3', '{"schema": {"type": "struct", "fields": [{"field": "v", "type": "int32"}]}}',
       NULL, NULL, 'append');
SELECT count(*) FROM pg_constraint c WHERE c.conrelid = 'route.made3'::regclass AND c.contype <> 'n';
-- delete_mode soft: the table gets the mark column _deleted_at
SELECT kafka_sink._create_target('route', 'made4', '{"schema": {"type": "struct", "fields": [
           {"field": "k", "type": "string"}, {"field": "v", "type": "int32"}]}, "payload": {}}',
       '{"k": "a"}', NULL, 'merge', 'soft');
SELECT string_agg(a.attname || ' ' || format_type(a.atttypid, a.atttypmod), ', ' ORDER BY a.attnum)
  FROM pg_attribute a WHERE a.attrelid = 'route.made4'::regclass AND a.attnum > 0;
-- why not
SELECT kafka_sink._create_target('route', 'no1', 'not json', NULL, NULL, 'merge');
SELECT kafka_sink._create_target('route', 'no2', '{"id": 1}', '{"id": 1}', NULL, 'merge');
SELECT kafka_sink._create_target('route', 'no3', '{"schema": {"type": "struct", "fields": [{"field": "v", "type": "int32"}]}}',
       'plain key', NULL, 'merge');
SELECT kafka_sink._create_target('route', 'no4', '{"schema": {"type": "struct", "fields": [{"field": "v", "type": "int32"}]}}',
       '{"id": 1}', NULL, 'merge');
-- a schema that asks for columns the pipeline will not make raises (the
-- worker quarantines that message as schema_change_refused)
SELECT route.err(format($$SELECT kafka_sink._create_target('route', 'no5', %L, NULL, NULL, 'append')$$,
       format('{"schema": {"type": "struct", "fields": [{"field": "%s", "type": "int32"}]}}', repeat('x', 64))));
SELECT route.err($$SELECT kafka_sink._create_target('route', 'no6', '{"schema": {"type": "struct", "fields": [{"field": "v", "type": "int32"}, {"field": "v", "type": "string"}]}}',
       NULL, NULL, 'append')$$);
SELECT route.err($$SELECT kafka_sink._create_target('route', 'no7', '{"schema": {"type": "struct", "fields": [{"field": "v", "type": "int32"}, {"field": "_Kafka_Partition", "type": "boolean"}]}}',
       NULL, NULL, 'append')$$);
SELECT route.err($$SELECT kafka_sink._create_target('route', 'no8', '{"schema": {"type": "struct", "fields": [{"field": "id", "type": "int32"}, {"field": "ID", "type": "string"}]}}',
       '{"id": 1}', NULL, 'merge')$$);
SELECT route.err(format($$SELECT kafka_sink._create_target('route', 'no9', %L, NULL, NULL, 'append')$$,
       jsonb_build_object('schema', jsonb_build_object('type', 'struct', 'fields',
           (SELECT jsonb_agg(jsonb_build_object('field', 'c' || i, 'type', 'int32')) FROM generate_series(1, 1600) i)))));
SELECT to_regclass('route.no7'), to_regclass('route.no8'), to_regclass('route.no9');
SELECT to_regclass('route.no1'), to_regclass('route.no5');
RESET ROLE;
CREATE SCHEMA route_locked;
SET ROLE regress_route;
SELECT route.err($$SELECT kafka_sink._create_target('route_locked', 't', '{"schema": {"type": "struct", "fields": [{"field": "v", "type": "int32"}]}}', NULL, NULL, 'append')$$);
RESET ROLE;
-- not even a superuser's pipeline creates in the extension's or the system's schemas
SELECT route.err($$SELECT kafka_sink._create_target('kafka_sink', 't', '{"schema": {"type": "struct", "fields": [{"field": "v", "type": "int32"}]}}', NULL, NULL, 'append')$$);
SELECT route.err($$SELECT kafka_sink._create_target('pg_toast', 't', '{"schema": {"type": "struct", "fields": [{"field": "v", "type": "int32"}]}}', NULL, NULL, 'append')$$);
SET ROLE regress_route;

-- evolve: new fields become nullable columns; a compatible type is kept;
-- a type the column does not take is refused; nothing is dropped
SELECT kafka_sink._evolve_target('route.made2', '{"type": "struct", "fields": [
           {"field": "k", "type": "string"}, {"field": "v", "type": "int16"},
           {"field": "added", "type": "string", "name": "io.debezium.data.Json"}]}', true);
SELECT a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull
  FROM pg_attribute a WHERE a.attrelid = 'route.made2'::regclass AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum;
SELECT kafka_sink._evolve_target('route.made2', '{"type": "struct", "fields": [{"field": "v", "type": "string"}]}', true);
SELECT kafka_sink._evolve_target('route.made2', '{"type": "struct", "fields": [{"field": "new_too", "type": "string"}]}', false);
SELECT kafka_sink._evolve_target('route.made2', 'no schema', true);
SELECT count(*) FROM pg_attribute a WHERE a.attrelid = 'route.made2'::regclass AND a.attname = 'new_too';
-- evolve never makes one of the pipeline's own columns (lineage, source
-- position, soft deletes and history, a variant of a key or order column),
-- nor more than max_new_columns; it adds all of a schema's columns or none
SELECT kafka_sink._evolve_target('route.made2', '{"type": "struct", "fields": [{"field": "fine", "type": "string"},
           {"field": "_kafka_partition", "type": "boolean"}]}', true) AS lineage;
SELECT kafka_sink._evolve_target('route.made2', '{"type": "struct", "fields": [{"field": " \"_KAFKA_source_position\"", "type": "string"}]}', true) AS quoted;
SELECT kafka_sink._evolve_target('route.made2', '{"type": "struct", "fields": [{"field": "_Valid_To", "type": "string"}]}', true) AS history;
SELECT kafka_sink._evolve_target('route.made2', '{"type": "struct", "fields": [{"field": "K", "type": "string"}]}', true) AS key_variant;
SELECT kafka_sink._evolve_target('route.made2', '{"type": "struct", "fields": [{"field": "Ord", "type": "string"}]}', true, NULL, 'ord') AS order_variant;
SELECT kafka_sink._evolve_target('route.made2', '{"type": "struct", "fields": [{"field": "a", "type": "string"},
           {"field": "b", "type": "string"}, {"field": "c", "type": "string"}]}', true, NULL, NULL, 2) AS too_many;
SELECT kafka_sink._evolve_target('route.made2', format('{"type": "struct", "fields": [{"field": "%s", "type": "string"}]}', repeat('y', 64)), true) AS too_long;
SELECT count(*) FROM pg_attribute a WHERE a.attrelid = 'route.made2'::regclass AND a.attnum > 0
   AND (lower(a.attname) IN ('fine', '_kafka_partition', '_valid_to', 'ord', 'a', 'b', 'c') OR a.attname = 'K');

-- a key or order column takes its own type or a narrower integer only:
-- not a float, not a date into a timestamp (an implicit cast all the same)
CREATE TABLE route.keyed (id bigint PRIMARY KEY, at timestamptz);
SELECT kafka_sink._evolve_target('route.keyed', '{"type": "struct", "fields": [{"field": "id", "type": "int32"},
           {"field": "at", "type": "int32", "name": "io.debezium.time.Date"}]}', false) AS narrower_key_date_not_ordered;
CREATE TABLE route.fkeyed (id double precision PRIMARY KEY);
SELECT kafka_sink._evolve_target('route.fkeyed', '{"type": "struct", "fields": [{"field": "id", "type": "int64"}]}', false) AS int_into_float_key;
SELECT kafka_sink._evolve_target('route.keyed', '{"type": "struct", "fields": [{"field": "id", "type": "int64"},
           {"field": "at", "type": "int32", "name": "io.debezium.time.Date"}]}', false, NULL, 'at') AS date_order;
SELECT kafka_sink._evolve_target('route.keyed', '{"type": "struct", "fields": [{"field": "id", "type": "int64"},
           {"field": "at", "type": "string", "name": "io.debezium.time.ZonedTimestamp"}]}', false, NULL, 'at') AS same_types;

-- lineage: a routed pipeline names the table whose lineage view to make
CREATE TABLE route.lin (id bigint PRIMARY KEY, v text, _kafka_topic text, _kafka_partition int,
                        _kafka_offset bigint, _kafka_batch_id bigint);
SELECT route.mk($$target => 'route.{topic}'$$);
SELECT route.err($$SELECT kafka_sink.create_lineage_view('r')$$);
-- ... one it writes, as lineage() requires: not any table
SELECT route.err($$SELECT kafka_sink.create_lineage_view('r', target => 'route.lin')$$);
SELECT route.err($$SELECT * FROM kafka_sink.lineage('r', '{"id": 1}', target => 'route.lin')$$);
SELECT kafka_sink.drop_pipeline('r', true);
SELECT route.mk($$target => 'route.{topic}', targets => '{"t": "route.lin"}'$$);
SELECT kafka_sink.create_lineage_view('r', target => 'route.lin');
SELECT route.err($$SELECT kafka_sink.create_lineage_view('r', target => 'route.orders')$$);
SELECT kafka_sink.drop_pipeline('r', true);
SELECT route.mk($$target => 'route.orders'$$);
SELECT route.err($$SELECT kafka_sink.create_lineage_view('r', target => 'route.lin')$$);
SELECT kafka_sink.drop_pipeline('r', true);

-- replay_quarantine knows the new reasons
SELECT route.mk($$target => '{topic}'$$);
SELECT * FROM kafka_sink.replay_quarantine('r', reason => 'no_target');
SELECT * FROM kafka_sink.replay_quarantine('r', target => 'Route."Some Table"');
SELECT route.err($$SELECT * FROM kafka_sink.replay_quarantine('r', target => 'orders')$$);
SELECT route.err($$SELECT * FROM kafka_sink.replay_quarantine('r', target => 'a.b.c')$$);
SELECT kafka_sink.drop_pipeline('r', true);

RESET ROLE;
SET client_min_messages = warning;
DROP SCHEMA route CASCADE;
DROP SCHEMA route_locked;
DROP OWNED BY regress_route;
DROP ROLE regress_route;
