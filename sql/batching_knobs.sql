-- Lag tooling and batching knobs (issue 13), without a broker:
--  * min_offsets_per_batch and max_trigger_delay: parameters of
--    create_pipeline and alter_pipeline, columns with CHECKs, shown in
--    kafka_sink.pipelines; every bad value gets an errcode, a message and a
--    hint, and writes nothing;
--  * group.id in kafka_options: allowed now (it names the consumer group the
--    checkpoints are mirrored to), as a sane group name.
CREATE EXTENSION IF NOT EXISTS kafka_sink;
SET client_min_messages = warning;
DROP SCHEMA IF EXISTS knobs CASCADE;
DROP ROLE IF EXISTS regress_knobs;
RESET client_min_messages;

CREATE ROLE regress_knobs LOGIN;
GRANT kafka_sink_admin TO regress_knobs;
CREATE SCHEMA knobs AUTHORIZATION regress_knobs;

-- err(sql): the SQLSTATE, message, detail and hint of sql's error, or ok
CREATE FUNCTION knobs.err(sql text) RETURNS text LANGUAGE plpgsql AS $$
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
GRANT EXECUTE ON FUNCTION knobs.err(text) TO PUBLIC;

SET ROLE regress_knobs;
CREATE TABLE knobs.t (id bigint PRIMARY KEY, v text);
-- create(extra arguments): a stopped pipeline named k
CREATE FUNCTION knobs.create(extra text) RETURNS text LANGUAGE sql AS $$
    SELECT knobs.err(format('SELECT kafka_sink.create_pipeline(name => %L, bootstrap_servers => %L,
        subscribe => ARRAY[%L], target => %L, start => false, %s)',
        'k', 'localhost:9', 'knobs_topic', 'knobs.t', extra))
$$;

-- ---- min_offsets_per_batch and max_trigger_delay ----
-- the defaults: no minimum, 15 minutes (as Spark's maxTriggerDelay)
SELECT knobs.create('workers => 1');
SELECT min_offsets_per_batch, max_trigger_delay FROM kafka_sink.pipelines WHERE name = 'k';
SELECT kafka_sink.drop_pipeline('k');

-- bad values at creation: nothing is written
SELECT knobs.create('min_offsets_per_batch => -1');
SELECT knobs.create('min_offsets_per_batch => NULL');
SELECT knobs.create('min_offsets_per_batch => 1000, max_offsets_per_batch => 999');
SELECT knobs.create('min_offsets_per_batch => 200000');
SELECT knobs.create('max_trigger_delay => ''-1 s''');
SELECT knobs.create('max_trigger_delay => ''2 days''');
SELECT knobs.create('max_trigger_delay => NULL');
SELECT count(*) FROM kafka_sink.pipelines WHERE name = 'k';

-- good values are stored and shown
SELECT knobs.create('min_offsets_per_batch => 100, max_trigger_delay => ''3 s'', max_offsets_per_batch => 100');
SELECT min_offsets_per_batch, max_offsets_per_batch, max_trigger_delay
  FROM kafka_sink.pipelines WHERE name = 'k';

-- alter_pipeline: checked against the values the pipeline will have
SELECT knobs.err($$SELECT kafka_sink.alter_pipeline('k', min_offsets_per_batch => 101)$$);
SELECT knobs.err($$SELECT kafka_sink.alter_pipeline('k', max_offsets_per_batch => 50)$$);
SELECT knobs.err($$SELECT kafka_sink.alter_pipeline('k', max_trigger_delay => '25 hours')$$);
SELECT knobs.err($$SELECT kafka_sink.alter_pipeline('k', min_offsets_per_batch => -5)$$);
SELECT d.min_offsets_per_batch, d.max_offsets_per_batch, d.max_trigger_delay, d.generation
  FROM kafka_sink.pipeline_definitions d WHERE d.name = 'k';
-- both limits in one call, then the minimum taken away (0) and NULL keeping the delay
SELECT knobs.err($$SELECT kafka_sink.alter_pipeline('k', max_offsets_per_batch => 5000, min_offsets_per_batch => 2000)$$);
SELECT min_offsets_per_batch, max_offsets_per_batch, max_trigger_delay FROM kafka_sink.pipelines WHERE name = 'k';
SELECT knobs.err($$SELECT kafka_sink.alter_pipeline('k', min_offsets_per_batch => 0, max_trigger_delay => '0')$$);
SELECT min_offsets_per_batch, max_offsets_per_batch, max_trigger_delay FROM kafka_sink.pipelines WHERE name = 'k';
SELECT knobs.err($$SELECT kafka_sink.alter_pipeline('k', max_trigger_delay => '1 day')$$);
SELECT max_trigger_delay FROM kafka_sink.pipelines WHERE name = 'k';
RESET ROLE;

-- the table's CHECKs hold whatever path writes the catalog (the failing row's
-- detail is left out: it holds ids and times)
SELECT split_part(knobs.err($$UPDATE kafka_sink.pipeline_definitions SET min_offsets_per_batch = max_offsets_per_batch + 1 WHERE name = 'k'$$), E'\n', 1);
SELECT split_part(knobs.err($$UPDATE kafka_sink.pipeline_definitions SET min_offsets_per_batch = -1 WHERE name = 'k'$$), E'\n', 1);
SELECT split_part(knobs.err($$UPDATE kafka_sink.pipeline_definitions SET max_trigger_delay = '-1 s' WHERE name = 'k'$$), E'\n', 1);
SELECT split_part(knobs.err($$UPDATE kafka_sink.pipeline_definitions SET max_trigger_delay = '2 days' WHERE name = 'k'$$), E'\n', 1);

-- ---- group.id: the consumer group the checkpoints are mirrored to ----
SET ROLE regress_knobs;
SELECT knobs.err($$SELECT kafka_sink.alter_pipeline('k', kafka_options => '{"group.id": "orders-sink.lag_1"}')$$);
SELECT kafka_options FROM kafka_sink.pipelines WHERE name = 'k';
-- not a secret: stored in the definition, not in kafka_sink.secrets
SELECT count(*) FROM kafka_sink.secrets s JOIN kafka_sink.pipeline_definitions d ON d.id = s.pipeline_id
 WHERE d.name = 'k';
SELECT knobs.err($$SELECT kafka_sink.alter_pipeline('k', kafka_options => '{"group.id": ""}')$$);
SELECT knobs.err($$SELECT kafka_sink.alter_pipeline('k', kafka_options => '{"group.id": "has space"}')$$);
SELECT knobs.err($$SELECT kafka_sink.alter_pipeline('k', kafka_options => '{"group.id": "a/b"}')$$);
SELECT knobs.err(format('SELECT kafka_sink.alter_pipeline(%L, kafka_options => %L)', 'k',
                        jsonb_build_object('group.id', repeat('g', 250))));
SELECT knobs.err(format('SELECT kafka_sink.alter_pipeline(%L, kafka_options => %L)', 'k',
                        jsonb_build_object('group.id', repeat('g', 249))));
SELECT knobs.err($$SELECT kafka_sink.alter_pipeline('k', kafka_options => '{"group.id": "kafka_sink.k"}')$$);
-- the group settings stay kafka_sink's: it never joins a group
SELECT knobs.err($$SELECT kafka_sink.alter_pipeline('k', kafka_options => '{"group.instance.id": "x"}')$$);
SELECT knobs.err($$SELECT kafka_sink.alter_pipeline('k', kafka_options => '{"partition.assignment.strategy": "range"}')$$);
-- a JSON null removes it
SELECT knobs.err($$SELECT kafka_sink.alter_pipeline('k', kafka_options => '{"group.id": null}')$$);
SELECT kafka_options FROM kafka_sink.pipelines WHERE name = 'k';
-- at creation too
SELECT kafka_sink.drop_pipeline('k');
SELECT knobs.create($$kafka_options => '{"group.id": "kafka_sink.x"}'$$);
SELECT knobs.create($$kafka_options => '{"group.id": "orders_lag"}'$$);
SELECT kafka_options FROM kafka_sink.pipelines WHERE name = 'k';
SELECT kafka_sink.drop_pipeline('k');
RESET ROLE;

SET client_min_messages = warning;
DROP SCHEMA knobs CASCADE;
DROP ROLE regress_knobs;
