-- CDC gaps (issue 16): pipeline_statements shows the statements per target
-- of a routed pipeline (the tables of its targets map, and those its
-- batches wrote), and the truncate statement of envelope => 'debezium'
-- (on_truncate => 'apply' only).  Needs no broker.
CREATE EXTENSION IF NOT EXISTS kafka_sink;
SET client_min_messages = warning;
DROP SCHEMA IF EXISTS cst CASCADE;
DROP ROLE IF EXISTS regress_cst;
RESET client_min_messages;
CREATE ROLE regress_cst LOGIN;
GRANT kafka_sink_admin TO regress_cst;
CREATE SCHEMA cst AUTHORIZATION regress_cst;
SET ROLE regress_cst;
CREATE TABLE cst.a (id int PRIMARY KEY, v text, _kafka_source_position numeric);
CREATE TABLE cst.b (k1 text, k2 int, w int, _kafka_source_position numeric, PRIMARY KEY (k1, k2));

-- one fixed target: staging, truncate, delete, merge
SELECT kafka_sink.create_pipeline(name => 'cst_one', bootstrap_servers => '127.0.0.1:9', subscribe => ARRAY['t'],
       start => false, target => 'cst.a', envelope => 'debezium') IS NOT NULL AS created;
SELECT step, target, kind, statement FROM kafka_sink.pipeline_statements('cst_one') WHERE kind <> 'staging';
-- on_truncate ignore: no truncate statement
SELECT kafka_sink.alter_pipeline('cst_one', on_truncate => 'ignore');
SELECT string_agg(kind, ',' ORDER BY step) FROM kafka_sink.pipeline_statements('cst_one');

-- routed: each table of the targets map, in name order, with its own key; a missing table left out
SELECT kafka_sink.create_pipeline(name => 'cst_routed', bootstrap_servers => '127.0.0.1:9', subscribe => ARRAY['t1', 't2', 't3'],
       start => false, targets => '{"t2": "cst.b", "t1": "cst.a", "t3": "cst.missing"}', envelope => 'debezium') IS NOT NULL AS created;
SELECT step, target, kind FROM kafka_sink.pipeline_statements('cst_routed');
SELECT target, statement FROM kafka_sink.pipeline_statements('cst_routed') WHERE kind IN ('delete', 'truncate') ORDER BY step;

SELECT kafka_sink.drop_pipeline('cst_one', true);
SELECT kafka_sink.drop_pipeline('cst_routed', true);
DROP SCHEMA cst CASCADE;
RESET ROLE;
DROP ROLE regress_cst;
