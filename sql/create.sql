-- The extension, its catalog and the happy path of the pipeline API,
-- without a broker.
CREATE EXTENSION kafka_sink;

-- not relocatable, lives in schema kafka_sink, and pg_dump keeps the catalog
SELECT e.extversion, e.extrelocatable, n.nspname
  FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace
 WHERE e.extname = 'kafka_sink';
SELECT c::regclass AS dumped FROM pg_extension e, unnest(e.extconfig) c
 WHERE e.extname = 'kafka_sink' ORDER BY c::regclass::text;

-- the catalog's constraints (NOT NULL ones aside: 18 lists them here too)
SELECT conrelid::regclass AS tbl, contype, count(*)
  FROM pg_constraint WHERE connamespace = 'kafka_sink'::regnamespace AND contype <> 'n'
 GROUP BY 1, 2 ORDER BY conrelid::regclass::text, 2;

-- the library refuses to load outside shared_preload_libraries; here it was
-- preloaded, so LOAD is a no-op rather than the error a plain session gets
SELECT current_setting('shared_preload_libraries') LIKE '%kafka_sink%' AS preloaded;

-- roles
SET client_min_messages = warning;
DROP SCHEMA IF EXISTS app CASCADE;
DROP ROLE IF EXISTS regress_app;
DROP ROLE IF EXISTS regress_other;
RESET client_min_messages;
CREATE ROLE regress_app LOGIN;
GRANT kafka_sink_admin TO regress_app;
CREATE ROLE regress_other LOGIN;
GRANT kafka_sink_admin TO regress_other;
CREATE SCHEMA app AUTHORIZATION regress_app;

SET ROLE regress_app;
CREATE TABLE app.orders (order_id bigint PRIMARY KEY, event_ts timestamptz NOT NULL,
                         amount numeric(18,2), status text);
CREATE TABLE app.events (id bigserial PRIMARY KEY, payload jsonb);
CREATE TABLE app.pairs (a int, b int, v text, UNIQUE (b, a));

-- the happy path, with every argument named
SELECT kafka_sink.create_pipeline(
    name                  => 'orders',
    bootstrap_servers     => '127.0.0.1:9',
    subscribe             => ARRAY['orders.v1'],
    target                => 'app.orders',
    order_column          => 'event_ts',
    starting_offsets      => 'earliest',
    fail_on_data_loss     => true,
    max_offsets_per_batch => 5000,
    max_batch_bytes       => 1048576,
    trigger_interval      => '250 ms',
    kafka_options         => '{"sasl.password": "s3cret", "client.rack": "r1", "session.timeout.ms": 10000}',
    start                 => false) > 0 AS created;
-- key columns default to the primary key; secrets are masked in the view
SELECT name, owner, state, subscribe, target, key_columns, order_column, mode,
       starting_offsets, fail_on_data_loss, max_offsets_per_batch, max_batch_bytes,
       trigger_interval, workers, kafka_options
  FROM kafka_sink.pipelines;
-- the secret itself sits in kafka_sink.secrets, never in the definition
SELECT s.name, s.value = 's3cret' AS stored FROM kafka_sink.secrets s;
SELECT kafka_options ? 'sasl.password' AS leaked FROM kafka_sink.pipeline_definitions;

-- other source forms and modes
SELECT kafka_sink.create_pipeline(name => 'pattern', bootstrap_servers => '127.0.0.1:9',
       subscribe_pattern => '^orders\..*', target => 'app.orders', start => false) > 0 AS created;
SELECT kafka_sink.create_pipeline(name => 'assigned', bootstrap_servers => '127.0.0.1:9',
       assign => '{"orders.v1": [0, 2]}', target => 'app.events', mode => 'append',
       starting_offsets => '{"orders.v1": {"0": 42, "2": -2}}', start => false) > 0 AS created;
SELECT kafka_sink.create_pipeline(name => 'pairs', bootstrap_servers => '127.0.0.1:9',
       subscribe => ARRAY['pairs'], target => 'app.pairs', key_columns => ARRAY['a', 'b'],
       starting_offsets => '2026-01-01 00:00:00+00', start => false) > 0 AS created;
CREATE FUNCTION app.on_batch(batch_id bigint, rows app.orders[]) RETURNS void
    LANGUAGE sql AS $$ SELECT $$;
SELECT kafka_sink.create_pipeline(name => 'fn', bootstrap_servers => '127.0.0.1:9',
       subscribe => ARRAY['orders.v1'], target => 'app.orders', mode => 'function',
       batch_function => 'app.on_batch(bigint, app.orders[])', start => false) > 0 AS created;
SELECT name, state, subscribe, subscribe_pattern, assign, key_columns, mode, batch_function, starting_offsets
  FROM kafka_sink.pipelines ORDER BY id;

-- alter_pipeline changes tunables; a JSON null removes an option
SELECT kafka_sink.alter_pipeline('orders', max_offsets_per_batch => 1000, trigger_interval => '1 s',
       workers => 2, kafka_options => '{"client.rack": null, "fetch.wait.max.ms": 50, "sasl.password": "n3w"}');
SELECT max_offsets_per_batch, trigger_interval, workers, kafka_options
  FROM kafka_sink.pipelines WHERE name = 'orders';
SELECT s.value = 'n3w' AS replaced FROM kafka_sink.secrets s;

-- a checkpoint exists: a new starting_offsets does not rewind, and a NOTICE says so
-- (the checkpoint is written by the superuser: only kafka_sink and superusers write the catalog)
RESET ROLE;
INSERT INTO kafka_sink.offsets (pipeline_id, topic, partition, next_offset)
SELECT id, 'orders.v1', 0, 7 FROM kafka_sink.pipelines WHERE name = 'orders';
SET ROLE regress_app;
SELECT kafka_sink.alter_pipeline('orders', starting_offsets => 'latest');
SELECT next_offset FROM kafka_sink.offsets;

-- start and stop
SELECT kafka_sink.start('orders');
SELECT state FROM kafka_sink.pipelines WHERE name = 'orders';
SELECT kafka_sink.stop('orders');
SELECT state FROM kafka_sink.pipelines WHERE name = 'orders';
SELECT name, state, worker_pids, last_batch_id, last_error FROM kafka_sink.status ORDER BY name;

-- another role sees none of it, and cannot change it
RESET ROLE;
SET ROLE regress_other;
SELECT count(*) AS visible FROM kafka_sink.pipelines;
SELECT count(*) AS visible FROM kafka_sink.pipeline_definitions;
SELECT count(*) AS visible FROM kafka_sink.secrets;
SELECT count(*) AS visible FROM kafka_sink.offsets;
SELECT count(*) AS visible FROM kafka_sink.status;
\set VERBOSITY terse
SELECT kafka_sink.stop('orders');
SELECT kafka_sink.drop_pipeline('orders');
UPDATE kafka_sink.pipeline_definitions SET state = 'running';
\set VERBOSITY default

-- drop_pipeline removes the catalog rows but keeps the target's data
RESET ROLE;
SET ROLE regress_app;
INSERT INTO app.orders VALUES (1, '2026-01-01', 1.00, 'kept');
SELECT kafka_sink.drop_pipeline('orders');
SELECT count(*) AS pipelines FROM kafka_sink.pipelines WHERE name = 'orders';
SELECT count(*) AS orphans FROM kafka_sink.offsets;
SELECT count(*) AS orphans FROM kafka_sink.secrets;
SELECT * FROM app.orders;
SELECT kafka_sink.drop_pipeline('pattern');
SELECT kafka_sink.drop_pipeline('assigned');
SELECT kafka_sink.drop_pipeline('pairs');
SELECT kafka_sink.drop_pipeline('fn');

RESET ROLE;
DROP SCHEMA app CASCADE;
DROP ROLE regress_app;
DROP ROLE regress_other;
