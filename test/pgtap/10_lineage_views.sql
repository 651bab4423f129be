-- 10_lineage_views: lineage as relations, on a known data set over two
-- partitions and several batches (updates, stale messages, messages
-- superseded within their batch, tombstone deletes, quarantined ones):
-- every committed offset is in exactly one batch range and the ranges
-- chain; every target row is once in its lineage view, with its batch,
-- commit time and raw message; the fates add up to the messages read and
-- agree with message_fate() one by one; the by-hand MERGE of
-- pipeline_statements does what the pipeline does; other roles see
-- nothing more than their privileges give them.
\ir common.psql
SELECT plan(23);

SELECT 't10_' || :'sfx' AS topic, 'lv_' || :'sfx' AS pipe, 'tap.lv_' || :'sfx' || '_lineage' AS lview \gset
\setenv LV_TOPIC :topic
\! bash test/harness.sh topic-create "$LV_TOPIC" 2 >/dev/null 2>&1
CREATE TABLE tap.lv_:sfx (
    k       text PRIMARY KEY,
    ts      bigint NOT NULL,
    amount  numeric NOT NULL,
    _kafka_topic text, _kafka_partition integer, _kafka_offset bigint,
    _kafka_timestamp timestamptz, _kafka_batch_id bigint);
ALTER TABLE tap.lv_:sfx OWNER TO ks_tap;
DO $$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'ks_tap_other') THEN
        CREATE ROLE ks_tap_other LOGIN;
    END IF;
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'ks_tap_reader') THEN
        CREATE ROLE ks_tap_reader LOGIN;
    END IF;
END
$$;
GRANT kafka_sink_admin TO ks_tap_other;
GRANT USAGE ON SCHEMA tap TO ks_tap_other, ks_tap_reader;

-- phase 1, read as one batch: k1 twice (the second wins: the first is
-- superseded), k2, k3 (deleted later), a bad message, p1's k4
SELECT count(*) FROM (VALUES
    ('k1', '{"ts":10,"amount":1}', 0), ('k2', '{"ts":10,"amount":2}', 0), ('k1', '{"ts":20,"amount":3}', 0),
    ('k3', '{"ts":10,"amount":4}', 0), ('k5', 'not json', 0), ('k4', '{"ts":10,"amount":5}', 1),
    ('k6', '{"amount":6}', 1)) AS m(k, v, p),
  LATERAL (SELECT ks_send(:'bootstrap', :'topic', m.k, m.v, m.p)) s;
SET ROLE ks_tap;
SELECT kafka_sink.create_pipeline(name => :'pipe', bootstrap_servers => :'bootstrap',
       subscribe => ARRAY[:'topic'], target => 'tap.lv_' || :'sfx', order_column => 'ts',
       key_format => 'string', delete_on_tombstone => true, bronze => 'tap.lv_raw_' || :'sfx',
       starting_offsets => 'earliest') > 0;
RESET ROLE;
SELECT ok(kafka_sink.wait(:'pipe'), 'phase 1 is applied');

-- phase 2: k2 older (stale), k1 newer (overwrites), k3's tombstone, p1: k4 newer
SELECT count(*) FROM (VALUES ('k2', '{"ts":5,"amount":7}', 0), ('k1', '{"ts":30,"amount":8}', 0),
                             ('k3', NULL, 0), ('k4', '{"ts":11,"amount":9}', 1)) AS m(k, v, p),
  LATERAL (SELECT ks_send(:'bootstrap', :'topic', m.k, m.v, m.p)) s;
SELECT ok(kafka_sink.wait(:'pipe'), 'phase 2 is applied');
SELECT count(*) FROM (VALUES ('k7', '{"ts":1,"amount":10}', 1), ('k8', '{"ts":1,"amount":11}', 0)) AS m(k, v, p),
  LATERAL (SELECT ks_send(:'bootstrap', :'topic', m.k, m.v, m.p)) s;
SELECT ok(kafka_sink.wait(:'pipe'), 'phase 3 is applied');
SELECT id AS pid FROM kafka_sink.pipelines WHERE name = :'pipe' \gset

-- batch_ranges
SELECT ok((SELECT count(DISTINCT batch_id) >= 3 FROM kafka_sink.batch_ranges WHERE pipeline = :'pipe'),
          'the data set spans several batches');
SELECT is((SELECT count(*) FROM kafka_sink.offsets o, generate_series(o.start_offset, o.next_offset - 1) g(off)
            WHERE o.pipeline_id = :pid
              AND (SELECT count(*) FROM kafka_sink.batch_ranges r WHERE r.pipeline_id = o.pipeline_id
                      AND r.topic = o.topic AND r.partition = o.partition
                      AND g.off >= r.start_offset AND g.off < r.end_offset) <> 1),
          0::bigint, 'every committed offset is in exactly one batch range');
SELECT is((SELECT sum(next_offset - start_offset) FROM kafka_sink.offsets WHERE pipeline_id = :pid), 13::numeric,
          'the checkpoint holds the 13 messages sent');
SELECT is((SELECT count(*) FROM (
             SELECT r.topic, r.partition, r.start_offset, r.end_offset,
                    lag(r.end_offset) OVER w AS prev, row_number() OVER w AS n, count(*) OVER (PARTITION BY r.topic, r.partition) AS last
               FROM kafka_sink.batch_ranges r WHERE r.pipeline = :'pipe'
             WINDOW w AS (PARTITION BY r.topic, r.partition ORDER BY r.start_offset)) x
             JOIN kafka_sink.offsets o ON o.pipeline_id = :pid AND o.topic = x.topic AND o.partition = x.partition
            WHERE (x.n = 1 AND x.start_offset <> o.start_offset) OR (x.n > 1 AND x.start_offset <> x.prev)
               OR (x.n = x.last AND x.end_offset <> o.next_offset) OR x.end_offset <= x.start_offset),
          0::bigint, 'the ranges of a partition chain from the first checkpoint to the committed offset');
SELECT is((SELECT sum(messages) FROM kafka_sink.batch_ranges WHERE pipeline = :'pipe'),
          (SELECT sum(messages) FROM kafka_sink.batches WHERE pipeline_id = :pid)::numeric,
          'the ranges'' messages add up to the batches''');
SELECT is((SELECT count(*) FROM kafka_sink.batch_ranges r JOIN kafka_sink.batches b USING (pipeline_id, batch_id)
            WHERE r.pipeline = :'pipe' AND (r.committed_at, r.stale, r.superseded, r.quarantined, r.inserted)
                  IS DISTINCT FROM (b.committed_at, b.stale, b.superseded, b.quarantined, b.inserted)),
          0::bigint, 'each range carries its batch''s commit time and counts');

-- the lineage view
SET ROLE ks_tap;
SELECT kafka_sink.create_lineage_view(:'pipe')::text = format('tap.lv_%s_lineage', :'sfx');
RESET ROLE;
SELECT results_eq(format('SELECT k, _kafka_batch_id FROM tap.lv_%s_lineage ORDER BY k', :'sfx'),
                  format('SELECT k, _kafka_batch_id FROM tap.lv_%s ORDER BY k', :'sfx'),
                  'every target row appears once in its lineage view');
SELECT is((SELECT count(*) FROM tap.lv_:sfx t
             JOIN :lview l USING (k)
             JOIN kafka_sink.batch_ranges r ON r.pipeline = :'pipe' AND r.batch_id = t._kafka_batch_id
                  AND r.topic = t._kafka_topic AND r.partition = t._kafka_partition
                  AND t._kafka_offset >= r.start_offset AND t._kafka_offset < r.end_offset
             JOIN tap.lv_raw_:sfx b ON b.partition = t._kafka_partition AND b."offset" = t._kafka_offset
            WHERE l._kafka_pipeline = :'pipe' AND l._kafka_committed_at = r.committed_at
              AND l._kafka_value = b.value AND l._kafka_key = convert_to(t.k, 'UTF8')
              AND l._kafka_offset = t._kafka_offset),
          (SELECT count(*) FROM tap.lv_:sfx),
          'each row shows the pipeline, the batch''s commit time and the raw message of the offset that wrote it');
SELECT results_eq(format('SELECT k, amount FROM tap.lv_%s ORDER BY k', :'sfx'),
                  $$VALUES ('k1'::text, 8::numeric), ('k2', 2), ('k4', 9), ('k7', 10), ('k8', 11)$$,
                  'the target holds the expected rows (k3 deleted, k5 and k6 quarantined, k2''s older event stale)');

-- message fates
CREATE TEMP TABLE fates AS SELECT * FROM kafka_sink.message_fates(:'pipe');
SELECT is((SELECT count(*) FROM fates), (SELECT sum(messages) FROM kafka_sink.batches WHERE pipeline_id = :pid)::bigint,
          'the fates add up to the messages read');
SELECT is((SELECT count(*) FROM fates f, LATERAL kafka_sink.message_fate(:'pipe', f.topic, f.partition, f."offset") o
            WHERE (o.fate, o.batch_id, o.detail) IS DISTINCT FROM (f.fate, f.batch_id, f.detail)),
          0::bigint, 'every fate agrees with message_fate() for that message');
SELECT results_eq($$SELECT fate, count(*) FROM fates GROUP BY 1 ORDER BY 1$$,
                  $$VALUES ('applied'::text, 5::bigint), ('deleted', 2), ('overwritten', 3), ('quarantined', 2),
                           ('stale', 1)$$,
                  'the data set has each fate: applied, deleted, overwritten, quarantined, stale');
SELECT is((SELECT fate FROM kafka_sink.message_fates(:'pipe', :'topic', 0, 0, 2) WHERE "offset" = 0),
          'overwritten', 'a range can be asked for (k1''s first event, superseded in its batch, later overwritten)');
SELECT results_eq(format($$SELECT "offset", fate FROM kafka_sink.message_fates(%L, %L, 1, 3, 5)$$, :'pipe', :'topic'),
                  $$VALUES (3::bigint, 'applied'::text), (4, 'pending'), (5, 'pending')$$,
                  'offsets past the checkpoint are pending');

-- pipeline_statements: the by-hand MERGE does what the pipeline does
SELECT by_hand AS staging FROM kafka_sink.pipeline_statements(:'pipe') WHERE kind = 'staging' \gset
SELECT by_hand AS merge FROM kafka_sink.pipeline_statements(:'pipe') WHERE kind = 'merge' \gset
SELECT next_offset AS next0 FROM kafka_sink.offsets WHERE pipeline_id = :pid AND partition = 0 \gset
SELECT results_eq(format('SELECT kind, strategy FROM kafka_sink.pipeline_statements(%L) ORDER BY step', :'pipe'),
                  $$VALUES ('bronze'::text, 'sql'::text), ('staging', 'sql'), ('delete', 'sql'), ('merge', 'sql')$$,
                  'the statements: bronze, the staging table, the tombstone DELETE and the MERGE, strategy sql');
BEGIN;
:staging;
PREPARE m(bigint) AS :merge;
-- every field present (_ks_pN: column N set by the message)
INSERT INTO pg_temp.kafka_sink_batch (k, ts, amount, _ks_p0, _ks_p1, _ks_p2, _ks_topic, _ks_partition, _ks_offset, _ks_seq)
VALUES ('k1', 40, 12, true, true, true, :'topic', 0, :next0, 0), ('k2', 1, 13, true, true, true, :'topic', 0, :next0 + 1, 1),
       ('k9', 1, 14, true, true, true, :'topic', 0, :next0 + 2, 2);
EXECUTE m(0);
SELECT string_agg(format('%s/%s/%s/%s/%s', k, ts, amount, _kafka_partition, _kafka_offset), ' ' ORDER BY k) AS by_hand
  FROM tap.lv_:sfx \gset
ROLLBACK;
SELECT count(*) FROM (VALUES ('k1', '{"ts":40,"amount":12}'), ('k2', '{"ts":1,"amount":13}'),
                             ('k9', '{"ts":1,"amount":14}')) AS m(k, v),
  LATERAL (SELECT ks_send(:'bootstrap', :'topic', m.k, m.v, 0)) s;
SELECT ok(kafka_sink.wait(:'pipe'), 'the same messages are applied by the pipeline');
SELECT is((SELECT string_agg(format('%s/%s/%s/%s/%s', k, ts, amount, _kafka_partition, _kafka_offset), ' ' ORDER BY k)
             FROM tap.lv_:sfx), :'by_hand', 'the by-hand MERGE gives the state the pipeline gives');

-- row level security
SET ROLE ks_tap_other;
SELECT is((SELECT count(*) FROM kafka_sink.batch_ranges WHERE pipeline_id = :pid), 0::bigint,
          'another admin sees no batch range of the pipeline');
SELECT throws_ok(format('SELECT * FROM kafka_sink.message_fates(%L)', :'pipe'), '42704', NULL,
                 'another admin gets no fates of the pipeline');
RESET ROLE;
SET ROLE ks_tap;
GRANT SELECT ON tap.lv_:sfx, tap.lv_raw_:sfx TO ks_tap_reader;
ALTER TABLE tap.lv_:sfx ENABLE ROW LEVEL SECURITY;
CREATE POLICY reader_k1 ON tap.lv_:sfx FOR SELECT TO ks_tap_reader USING (k = 'k1');
RESET ROLE;
SET ROLE ks_tap_reader;
SELECT results_eq(format('SELECT k, _kafka_pipeline, _kafka_committed_at FROM tap.lv_%s_lineage', :'sfx'),
                  $$VALUES ('k1'::text, NULL::text, NULL::timestamptz)$$,
                  'a role with SELECT on the target sees the rows its policy allows, and nothing of the pipeline');
RESET ROLE;

SELECT kafka_sink.drop_pipeline(:'pipe');
SELECT * FROM finish();
