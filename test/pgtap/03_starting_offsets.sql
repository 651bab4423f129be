-- 03_starting_offsets: every form of starting_offsets (earliest, latest,
-- per-partition JSON with -2/-1, a timestamp resolved with offsets-for-times)
-- applies only to partitions with no checkpoint; changing it later does not
-- rewind.
\ir common.psql
SELECT plan(12);

SELECT 't03_' || :'sfx' AS topic \gset
SET ks.sfx = :'sfx';
DO $$
DECLARE
    t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['earliest', 'latest', 'json', 'ts'] LOOP
        EXECUTE format('CREATE TABLE tap.%I (k bigint PRIMARY KEY, v text)', 'so_' || t || '_' || current_setting('ks.sfx'));
        EXECUTE format('ALTER TABLE tap.%I OWNER TO ks_tap', 'so_' || t || '_' || current_setting('ks.sfx'));
    END LOOP;
END
$$;

-- five messages before any pipeline: offsets 0..4 of partition 0
SELECT ks_send(:'bootstrap', :'topic', 'k', format('{"k":%s,"v":"before"}', i), 0) FROM generate_series(1, 5) i;
SELECT pg_sleep(1.2);
SELECT clock_timestamp() AS cut \gset
SELECT pg_sleep(0.2);
-- two more after the cut: offsets 5 and 6
SELECT ks_send(:'bootstrap', :'topic', 'k', format('{"k":%s,"v":"after cut"}', i), 0) FROM generate_series(6, 7) i;

SET ROLE ks_tap;
SELECT kafka_sink.create_pipeline(name => 'so_earliest_' || :'sfx', bootstrap_servers => :'bootstrap',
       subscribe => ARRAY[:'topic'], target => 'tap.so_earliest_' || :'sfx', starting_offsets => 'earliest') > 0;
SELECT kafka_sink.create_pipeline(name => 'so_latest_' || :'sfx', bootstrap_servers => :'bootstrap',
       subscribe => ARRAY[:'topic'], target => 'tap.so_latest_' || :'sfx') > 0;
SELECT kafka_sink.create_pipeline(name => 'so_json_' || :'sfx', bootstrap_servers => :'bootstrap',
       subscribe => ARRAY[:'topic'], target => 'tap.so_json_' || :'sfx',
       starting_offsets => format('{"%s": {"0": 3}}', :'topic')) > 0;
SELECT kafka_sink.create_pipeline(name => 'so_ts_' || :'sfx', bootstrap_servers => :'bootstrap',
       subscribe => ARRAY[:'topic'], target => 'tap.so_ts_' || :'sfx', starting_offsets => :'cut') > 0;
RESET ROLE;

-- the latest pipeline must have written its first checkpoint before more data arrives
SELECT ok(ks_poll(format($$SELECT EXISTS (SELECT 1 FROM kafka_sink.offsets o JOIN kafka_sink.pipelines p
                                             ON p.id = o.pipeline_id WHERE p.name = 'so_latest_%s')$$, :'sfx')),
          'a latest pipeline checkpoints its starting position at once');
SELECT is((SELECT o.next_offset FROM kafka_sink.offsets o JOIN kafka_sink.pipelines p ON p.id = o.pipeline_id
            WHERE p.name = 'so_latest_' || :'sfx'), 7::bigint,
          'latest resolves to the high watermark');
SELECT ks_send(:'bootstrap', :'topic', 'k', '{"k":8,"v":"after start"}', 0);

SELECT ok(kafka_sink.wait('so_earliest_' || :'sfx') AND kafka_sink.wait('so_latest_' || :'sfx')
          AND kafka_sink.wait('so_json_' || :'sfx') AND kafka_sink.wait('so_ts_' || :'sfx'),
          'all four pipelines catch up');

SELECT results_eq(format('SELECT k FROM tap.so_earliest_%s ORDER BY k', :'sfx'),
                  'SELECT generate_series(1, 8)::bigint', 'earliest reads from the first offset');
SELECT results_eq(format('SELECT k FROM tap.so_latest_%s ORDER BY k', :'sfx'),
                  'VALUES (8::bigint)', 'latest (the default) reads only what comes after the start');
SELECT results_eq(format('SELECT k FROM tap.so_json_%s ORDER BY k', :'sfx'),
                  'SELECT generate_series(4, 8)::bigint', 'per-partition JSON starts at the given offset');
SELECT results_eq(format('SELECT k FROM tap.so_ts_%s ORDER BY k', :'sfx'),
                  'SELECT generate_series(6, 8)::bigint', 'a timestamp starts at the first message at or after it');

-- changing starting_offsets after a checkpoint does not rewind
SET ROLE ks_tap;
SELECT kafka_sink.stop('so_latest_' || :'sfx');
SELECT kafka_sink.alter_pipeline('so_latest_' || :'sfx', starting_offsets => 'earliest');
SELECT kafka_sink.start('so_latest_' || :'sfx');
RESET ROLE;
SELECT ks_send(:'bootstrap', :'topic', 'k', '{"k":9,"v":"after restart"}', 0);
SELECT ok(kafka_sink.wait('so_latest_' || :'sfx'), 'the restarted pipeline catches up');
SELECT results_eq(format('SELECT k FROM tap.so_latest_%s ORDER BY k', :'sfx'),
                  'VALUES (8::bigint), (9)', 'a changed starting_offsets does not rewind a checkpointed partition');
SELECT is((SELECT starting_offsets FROM kafka_sink.pipelines WHERE name = 'so_latest_' || :'sfx'), 'earliest',
          'the new starting_offsets is stored for partitions that have no checkpoint yet');

-- a partition with a checkpoint ignores even a JSON naming it (k = 9 was
-- sent after the JSON pipeline last caught up: wait for it too)
SELECT ok(kafka_sink.wait('so_json_' || :'sfx'), 'the JSON pipeline catches up with the last message');
SELECT is((SELECT o.next_offset FROM kafka_sink.offsets o JOIN kafka_sink.pipelines p ON p.id = o.pipeline_id
            WHERE p.name = 'so_json_' || :'sfx'), 9::bigint,
          'the JSON pipeline''s checkpoint followed the data');

SELECT kafka_sink.drop_pipeline(name) FROM kafka_sink.pipelines WHERE name LIKE 'so\_%\_' || :'sfx';
SELECT * FROM finish();
