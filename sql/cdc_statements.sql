-- CDC gaps (issue 16): pipeline_statements shows the statements per target
-- of a routed pipeline (the tables of its targets map, and those its
-- batches wrote), and the truncate statement of envelope => 'debezium'
-- (on_truncate => 'apply' only), in merge and in history mode.  Needs no broker.
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

-- history of change events: the history statement, and the one a batch
-- with a new truncate runs in its place ($2 the truncate's position); both
-- prepare against the staging table as the notes say
CREATE TABLE cst.h (id int, v text, _kafka_source_position numeric, _valid_from numeric NOT NULL,
                    _valid_to numeric, _deleted boolean, PRIMARY KEY (id, _valid_from));
SELECT kafka_sink.create_pipeline(name => 'cst_hist', bootstrap_servers => '127.0.0.1:9', subscribe => ARRAY['t'],
       start => false, target => 'cst.h', mode => 'history', envelope => 'debezium') IS NOT NULL AS created;
SELECT string_agg(kind, ',' ORDER BY step) FROM kafka_sink.pipeline_statements('cst_hist');
SELECT by_hand AS staging FROM kafka_sink.pipeline_statements('cst_hist') WHERE kind = 'staging' \gset
SELECT by_hand AS hist FROM kafka_sink.pipeline_statements('cst_hist') WHERE kind = 'history' \gset
SELECT by_hand AS histtr FROM kafka_sink.pipeline_statements('cst_hist') WHERE kind = 'history truncate' \gset
SELECT position('$2' IN :'hist') = 0 AS plain_has_no_position, position('$2' IN :'histtr') > 0 AS truncate_takes_it;
:staging;
PREPARE h(bigint) AS :hist;
PREPARE ht(bigint, numeric) AS :histtr;
DEALLOCATE h;
DEALLOCATE ht;
DROP TABLE kafka_sink_batch;
SELECT kafka_sink.alter_pipeline('cst_hist', on_truncate => 'ignore');
SELECT string_agg(kind, ',' ORDER BY step) FROM kafka_sink.pipeline_statements('cst_hist');
SELECT kafka_sink.drop_pipeline('cst_hist', true);

SELECT kafka_sink.drop_pipeline('cst_one', true);
SELECT kafka_sink.drop_pipeline('cst_routed', true);
DROP SCHEMA cst CASCADE;
RESET ROLE;
DROP ROLE regress_cst;
