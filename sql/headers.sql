-- Kafka headers and metadata as fields (issue 25): the names create_pipeline
-- takes and refuses (src/decode/meta.c), and envelope debezium with
-- value_format json_schema.  Needs no broker.
CREATE EXTENSION IF NOT EXISTS kafka_sink;
SET client_min_messages = warning;
DROP SCHEMA IF EXISTS hdr CASCADE;
DROP ROLE IF EXISTS regress_hdr;
RESET client_min_messages;

CREATE ROLE regress_hdr LOGIN;
GRANT kafka_sink_admin TO regress_hdr;
CREATE SCHEMA hdr AUTHORIZATION regress_hdr;

CREATE FUNCTION hdr.err(sql text) RETURNS text LANGUAGE plpgsql AS $$
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

SET ROLE regress_hdr;
CREATE TABLE hdr.t (tenant text, id int, raw bytea, ts timestamptz, PRIMARY KEY (tenant, id));
CREATE TABLE hdr.replica (id int PRIMARY KEY, name text, tenant text, _kafka_source_position numeric);

-- accepted: headers (any name, dots, case kept), the five kafka.* fields,
-- the escape of a value field called headers or kafka
SELECT hdr.err($$SELECT kafka_sink.create_pipeline('h1', 'localhost:9', 'hdr.t',
       subscribe => ARRAY['t'], start => false,
       columns => '{"tenant": "headers.Tenant.Id", "raw": "kafka.key", "ts": "kafka.timestamp"}',
       event_id => 'headers.event_id', schema_version_field => 'headers.v',
       schema_versions => '{"1": {}, "2": {"raw": "headers.raw", "ts": "\\kafka.ts"}}')$$);
SELECT columns, event_id, schema_version_field FROM kafka_sink.pipelines WHERE name = 'h1';
SELECT hdr.err($$SELECT kafka_sink.create_pipeline('h2', 'localhost:9', 'hdr.t',
       subscribe => ARRAY['t'], start => false,
       columns => '{"tenant": "kafka.topic", "id": "kafka.partition", "raw": "headers.a..b\\"}')$$);
-- refused: an unknown kafka.* name, headers. without a name, kafka.timestamp
-- as an event id or a schema version
SELECT hdr.err($$SELECT kafka_sink.create_pipeline('h3', 'localhost:9', 'hdr.t',
       subscribe => ARRAY['t'], start => false, columns => '{"raw": "kafka.headers"}')$$);
SELECT hdr.err($$SELECT kafka_sink.create_pipeline('h3', 'localhost:9', 'hdr.t',
       subscribe => ARRAY['t'], start => false, columns => '{"raw": "headers."}')$$);
SELECT hdr.err($$SELECT kafka_sink.create_pipeline('h3', 'localhost:9', 'hdr.t',
       subscribe => ARRAY['t'], start => false, event_id => 'kafka.ofset')$$);
SELECT hdr.err($$SELECT kafka_sink.create_pipeline('h3', 'localhost:9', 'hdr.t',
       subscribe => ARRAY['t'], start => false, event_id => 'kafka.timestamp')$$);
SELECT hdr.err($$SELECT kafka_sink.create_pipeline('h3', 'localhost:9', 'hdr.t',
       subscribe => ARRAY['t'], start => false, schema_version_field => 'kafka.Key',
       schema_versions => '{"1": {}}')$$);
SELECT hdr.err($$SELECT kafka_sink.create_pipeline('h3', 'localhost:9', 'hdr.t',
       subscribe => ARRAY['t'], start => false,
       schema_versions => '{"1": {"raw": "kafka.raw"}}', schema_version_field => 'v')$$);
-- a routed pipeline checks the names at create time too
SELECT hdr.err($$SELECT kafka_sink.create_pipeline('h3', 'localhost:9', 'hdr.{headers.tenant}',
       subscribe => ARRAY['t'], start => false, columns => '{"raw": "kafka.value"}')$$);
SELECT hdr.err($$SELECT kafka_sink.create_pipeline('h3', 'localhost:9', 'hdr.{headers.tenant}',
       subscribe => ARRAY['t'], start => false, event_id => 'kafka.id')$$);

-- routing templates: headers and kafka.topic/partition/offset/key name tables
SELECT hdr.err($$SELECT kafka_sink.create_pipeline('r1', 'localhost:9', 'hdr.t_{headers.tenant}',
       subscribe => ARRAY['t'], start => false)$$);
SELECT hdr.err($$SELECT kafka_sink.create_pipeline('r2', 'localhost:9', '{headers.schema}.t_{kafka.partition}',
       subscribe => ARRAY['t'], start => false)$$);
SELECT hdr.err($$SELECT kafka_sink.create_pipeline('r3', 'localhost:9', 'hdr.t_{kafka.timestamp}',
       subscribe => ARRAY['t'], start => false)$$);
SELECT hdr.err($$SELECT kafka_sink.create_pipeline('r3', 'localhost:9', 'hdr.t_{kafka.tenant}',
       subscribe => ARRAY['t'], start => false)$$);
SELECT hdr.err($$SELECT kafka_sink.create_pipeline('r3', 'localhost:9', 'hdr.t_{headers.}',
       subscribe => ARRAY['t'], start => false)$$);
-- a value field called headers: the escape
SELECT hdr.err($$SELECT kafka_sink.create_pipeline('r3', 'localhost:9', 'hdr.t_{\headers.tenant}',
       subscribe => ARRAY['t'], start => false)$$);

-- envelope debezium reads JsonSchemaConverter's values (value_format json_schema)
SELECT hdr.err($$SELECT kafka_sink.create_pipeline('d1', 'localhost:9', 'hdr.replica',
       subscribe => ARRAY['t'], start => false, envelope => 'debezium', value_format => 'json_schema',
       schema_registry => '{"url": "http://127.0.0.1:9"}', columns => '{"tenant": "headers.tenant"}')$$);
SELECT envelope, value_format FROM kafka_sink.pipelines WHERE name = 'd1';
SELECT hdr.err($$SELECT kafka_sink.alter_pipeline('d1', value_format => 'json')$$);
SELECT hdr.err($$SELECT kafka_sink.alter_pipeline('d1', value_format => 'json_schema',
       schema_registry => '{"url": "http://127.0.0.1:9"}')$$);
-- unavailable_value_placeholder: envelope debezium only, not empty; alter
-- sets it, '' removes it
SELECT hdr.err($$SELECT kafka_sink.create_pipeline('p1', 'localhost:9', 'hdr.t',
       subscribe => ARRAY['t'], start => false, unavailable_value_placeholder => 'X')$$);
SELECT hdr.err($$SELECT kafka_sink.create_pipeline('p1', 'localhost:9', 'hdr.replica',
       subscribe => ARRAY['t'], start => false, envelope => 'debezium', unavailable_value_placeholder => '')$$);
SELECT hdr.err($$SELECT kafka_sink.create_pipeline('p1', 'localhost:9', 'hdr.replica',
       subscribe => ARRAY['t'], start => false, envelope => 'debezium', unavailable_value_placeholder => repeat('x', 1025))$$);
SELECT hdr.err($$SELECT kafka_sink.create_pipeline('p1', 'localhost:9', 'hdr.replica',
       subscribe => ARRAY['t'], start => false, envelope => 'debezium', unavailable_value_placeholder => '<toast>')$$);
SELECT unavailable_value_placeholder FROM kafka_sink.pipelines WHERE name = 'p1';
SELECT hdr.err($$SELECT kafka_sink.alter_pipeline('h1', unavailable_value_placeholder => 'X')$$);
SELECT hdr.err($$SELECT kafka_sink.alter_pipeline('p1', unavailable_value_placeholder => 'other')$$);
SELECT unavailable_value_placeholder FROM kafka_sink.pipelines WHERE name = 'p1';
SELECT hdr.err($$SELECT kafka_sink.alter_pipeline('p1', unavailable_value_placeholder => '')$$);
SELECT unavailable_value_placeholder IS NULL AS default_placeholder FROM kafka_sink.pipelines WHERE name = 'p1';

-- the internal check itself
SELECT kafka_sink._check_field_path('headers.x', 'a test'), kafka_sink._check_field_path('a.b', 'a test'),
       kafka_sink._check_field_path('\kafka.x', 'a test'), kafka_sink._check_field_path(NULL, 'a test');

RESET ROLE;
SELECT kafka_sink.drop_pipeline(name) FROM kafka_sink.pipelines WHERE name IN ('h1', 'h2', 'r1', 'r2', 'r3', 'd1', 'p1') ORDER BY name;
DROP SCHEMA hdr CASCADE;
DROP OWNED BY regress_hdr;
DROP ROLE regress_hdr;
