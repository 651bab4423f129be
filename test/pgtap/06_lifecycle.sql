-- 06_lifecycle: a running pipeline has a worker; stop and drop end it
-- within seconds; start brings it back; a worker that dies is restarted by
-- the launcher and resumes from the checkpoint without loss or duplicates.
\ir common.psql
SELECT plan(10);

SELECT 't06_' || :'sfx' AS topic \gset
CREATE TABLE tap.life_:sfx (k int PRIMARY KEY, v int);
CREATE TABLE tap.life_log_:sfx (id bigserial PRIMARY KEY, k int, v int);
ALTER TABLE tap.life_:sfx OWNER TO ks_tap;
ALTER TABLE tap.life_log_:sfx OWNER TO ks_tap;
SELECT ks_send(:'bootstrap', :'topic', 'x', format('{"k":%s,"v":%s}', i % 5, i), 0) FROM generate_series(1, 20) i;

SET ROLE ks_tap;
SELECT kafka_sink.create_pipeline(name => 'life_' || :'sfx', bootstrap_servers => :'bootstrap',
       subscribe => ARRAY[:'topic'], target => 'tap.life_' || :'sfx', starting_offsets => 'earliest') > 0;
SELECT kafka_sink.create_pipeline(name => 'lifelog_' || :'sfx', bootstrap_servers => :'bootstrap',
       subscribe => ARRAY[:'topic'], target => 'tap.life_log_' || :'sfx', mode => 'append',
       starting_offsets => 'earliest') > 0;
RESET ROLE;

SELECT ok(ks_poll(format($$SELECT worker_pids IS NOT NULL FROM kafka_sink.status WHERE name = 'life_%s'$$, :'sfx'), '20 s'),
          'a created pipeline starts its worker by itself');
SELECT ok(kafka_sink.wait('life_' || :'sfx') AND kafka_sink.wait('lifelog_' || :'sfx'), 'both pipelines catch up');
SELECT is((SELECT backend_type || ' / ' || application_name FROM pg_stat_activity
            WHERE pid = (SELECT worker_pids[1] FROM kafka_sink.status WHERE name = 'life_' || :'sfx')),
          'kafka_sink worker / kafka_sink: life_' || :'sfx',
          'the worker shows in pg_stat_activity with its backend type and application name');

SELECT kafka_sink.stop('life_' || :'sfx');
SELECT ok(ks_poll(format($$SELECT worker_pids IS NULL FROM kafka_sink.status WHERE name = 'life_%s'$$, :'sfx'), '10 s'),
          'stop ends the worker within seconds');
SELECT kafka_sink.start('life_' || :'sfx');
SELECT ok(ks_poll(format($$SELECT worker_pids IS NOT NULL FROM kafka_sink.status WHERE name = 'life_%s'$$, :'sfx'), '10 s'),
          'start brings it back');

-- kill the append pipeline's worker between batches; the launcher restarts it
SELECT worker_pids[1] AS oldpid FROM kafka_sink.status WHERE name = 'lifelog_' || :'sfx' \gset
SELECT pg_terminate_backend(:oldpid);
SELECT ks_send(:'bootstrap', :'topic', 'x', format('{"k":%s,"v":%s}', i % 5, i), 0) FROM generate_series(21, 40) i;
SELECT ok(ks_poll(format($$SELECT worker_pids IS NOT NULL AND worker_pids[1] <> %s FROM kafka_sink.status WHERE name = 'lifelog_%s'$$, :oldpid, :'sfx'), '30 s'),
          'a worker that died is restarted by the launcher');
SELECT ok(kafka_sink.wait('lifelog_' || :'sfx'), 'the restarted worker catches up');
SELECT results_eq(format('SELECT v FROM tap.life_log_%s ORDER BY id', :'sfx'), 'SELECT generate_series(1, 40)',
                  'after the restart every message was appended exactly once, in order');

SELECT kafka_sink.drop_pipeline('life_' || :'sfx');
SELECT ok(ks_poll(format($$SELECT count(*) = 0 FROM kafka_sink._worker_pids() w
                           WHERE NOT EXISTS (SELECT 1 FROM kafka_sink.pipeline_definitions p WHERE p.id = w.pipeline_id)$$), '10 s'),
          'drop ends the worker within seconds');
SELECT is((SELECT count(*) FROM tap.life_:sfx), 5::bigint, 'drop keeps the target''s data');

SELECT kafka_sink.drop_pipeline('lifelog_' || :'sfx');
SELECT * FROM finish();
