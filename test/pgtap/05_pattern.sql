-- 05_pattern: subscribe_pattern reads every matching topic, and picks up a
-- matching topic created later within a metadata refresh interval; assign
-- reads exactly the partitions it names.
\ir common.psql
SELECT plan(7);

ALTER SYSTEM SET kafka_sink.metadata_refresh_interval = '500ms';
SELECT pg_reload_conf();

SELECT 't05_' || :'sfx' AS base \gset
CREATE TABLE tap.pat_:sfx (k text PRIMARY KEY, src text);
CREATE TABLE tap.asg_:sfx (k text PRIMARY KEY, src text);
ALTER TABLE tap.pat_:sfx OWNER TO ks_tap;
ALTER TABLE tap.asg_:sfx OWNER TO ks_tap;

SELECT ks_send(:'bootstrap', :'base' || '.a', 'a1', '{"k":"a1","src":"a"}', 0);
SELECT ks_send(:'bootstrap', :'base' || '_nomatch', 'n1', '{"k":"n1","src":"nomatch"}', 0);

SET ROLE ks_tap;
SELECT kafka_sink.create_pipeline(name => 'pat_' || :'sfx', bootstrap_servers => :'bootstrap',
       subscribe_pattern => '^' || :'base' || '\.', target => 'tap.pat_' || :'sfx',
       starting_offsets => 'earliest') > 0;
SELECT kafka_sink.create_pipeline(name => 'asg_' || :'sfx', bootstrap_servers => :'bootstrap',
       assign => jsonb_build_object(:'base' || '.a', jsonb_build_array(0)), target => 'tap.asg_' || :'sfx',
       starting_offsets => 'earliest') > 0;
RESET ROLE;

SELECT ok(kafka_sink.wait('pat_' || :'sfx'), 'the pattern pipeline catches up');
SELECT results_eq(format('SELECT k FROM tap.pat_%s ORDER BY 1', :'sfx'), $$VALUES ('a1'::text)$$,
                  'a pattern reads matching topics only');

-- a new matching topic, created after the pipeline started
SELECT ks_send(:'bootstrap', :'base' || '.b', 'b1', '{"k":"b1","src":"b"}', 0);
SELECT ok(ks_poll(format($$SELECT count(*) = 2 FROM tap.pat_%s$$, :'sfx'), '30 s'),
          'a matching topic created later is picked up');
SELECT ok(kafka_sink.wait('pat_' || :'sfx'), 'wait() covers the new topic too');
SELECT results_eq(format('SELECT k, src FROM tap.pat_%s ORDER BY 1', :'sfx'),
                  $$VALUES ('a1'::text, 'a'::text), ('b1', 'b')$$,
                  'the new topic is read from its beginning');

SELECT ok(kafka_sink.wait('asg_' || :'sfx'), 'the assign pipeline catches up');
SELECT results_eq(format('SELECT k FROM tap.asg_%s ORDER BY 1', :'sfx'), $$VALUES ('a1'::text)$$,
                  'assign reads the named partitions only');

SELECT kafka_sink.drop_pipeline('pat_' || :'sfx');
SELECT kafka_sink.drop_pipeline('asg_' || :'sfx');
ALTER SYSTEM RESET kafka_sink.metadata_refresh_interval;
SELECT pg_reload_conf();
SELECT * FROM finish();
