-- 09_row_faults: an error that is a row's fault quarantines the row and the
-- batch goes on; an error that is the system's fails the pipeline and
-- quarantines nothing.  A trigger raising (RAISE, a custom P0 SQLSTATE,
-- ASSERT, STRICT finding nothing) for some rows, a BEFORE DELETE trigger
-- refusing a tombstone, a row level security WITH CHECK policy and an index
-- row too large are the rows' fault; a trigger function naming a table
-- without its schema (the worker pins search_path), a revoked INSERT and a
-- trigger function lacking a privilege are the system's.  Replay applies
-- what a dropped trigger rejected.  See "Whose fault is an error" in
-- docs/design/decoding.md.
\ir common.psql
SELECT plan(26);

SELECT 't09_' || :'sfx' AS topic \gset
SELECT 'rf_' || :'sfx' AS sch \gset
CREATE SCHEMA :sch AUTHORIZATION ks_tap;
DO $$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'ks_tap_other') THEN
        CREATE ROLE ks_tap_other;
    END IF;
END
$$;

CREATE TEMP VIEW qv AS
SELECT p.name, convert_from(q.key, 'UTF8') AS k, q.reason, q.detail, q.replayed_at
  FROM kafka_sink.quarantine q JOIN kafka_sink.pipelines p ON p.id = q.pipeline_id;
CREATE TEMP VIEW ev AS
SELECT p.name, e.kind, e.sqlstate, e.message, e.detail
  FROM kafka_sink.errors e JOIN kafka_sink.pipelines p ON p.id = e.pipeline_id;

SET ROLE ks_tap;
SET search_path = :sch, pg_catalog;

-- ---- (1, 2) a trigger rejects some rows; (tombstones) a BEFORE DELETE trigger refuses one
CREATE TABLE guarded (k bigint PRIMARY KEY, v text, n int DEFAULT 0);
CREATE FUNCTION guard() RETURNS trigger LANGUAGE plpgsql AS $fn$
DECLARE
    x int;
BEGIN
    IF TG_OP = 'DELETE' THEN
        IF OLD.v = 'locked' THEN
            RAISE EXCEPTION 'row % is locked', OLD.k;
        END IF;
        RETURN OLD;
    END IF;
    IF NEW.v = 'raise' THEN
        RAISE EXCEPTION 'row % rejected', NEW.k;
    ELSIF NEW.v = 'custom' THEN
        RAISE EXCEPTION 'row % rejected with a code of our own', NEW.k USING ERRCODE = 'P0K42';
    ELSIF NEW.v = 'assert' THEN
        ASSERT NEW.k < 0, 'a row saying assert must have a negative key';
    ELSIF NEW.v = 'strict' THEN
        SELECT 1 INTO STRICT x WHERE false;
    END IF;
    RETURN NEW;
END
$fn$;
INSERT INTO guarded VALUES (100, 'locked'), (101, 'free');
CREATE TRIGGER guard BEFORE INSERT OR UPDATE OR DELETE ON guarded FOR EACH ROW EXECUTE FUNCTION guard();
RESET search_path;
RESET ROLE;

SELECT count(*) FROM (SELECT ks_send(:'bootstrap', :'topic', k, v, 0)
  FROM (VALUES ('1', '{"v":"ok"}'), ('2', '{"v":"raise"}'), ('3', '{"v":"ok"}'),
               ('4', '{"v":"custom"}'), ('5', '{"v":"assert"}'), ('6', '{"v":"strict"}'),
               ('7', '{"v":"ok","n":7}'), ('8', '{"v":"ok"}'),
               ('100', NULL), ('101', NULL),
               ('9', '{"v":"ok"}')) AS m(k, v)) x;

SET ROLE ks_tap;
SELECT kafka_sink.create_pipeline(name => 'guard_' || :'sfx', bootstrap_servers => :'bootstrap',
       subscribe => ARRAY[:'topic'], target => :'sch' || '.guarded', starting_offsets => 'earliest',
       key_format => 'string', delete_on_tombstone => true) > 0;
RESET ROLE;
SELECT ok(kafka_sink.wait('guard_' || :'sfx'), 'guard: caught up although a trigger rejects some rows');
SELECT results_eq(format('SELECT k FROM %I.guarded ORDER BY k', :'sch'),
    $$VALUES (1::bigint), (3), (7), (8), (9), (100)$$,
    'the rows the trigger accepts are applied, the tombstone it accepts deletes, the refused one keeps its row');
SELECT results_eq(format($$SELECT k::int, reason FROM qv WHERE name = 'guard_%s' ORDER BY k::int$$, :'sfx'),
    $$VALUES (2, 'rejected_by_target'), (4, 'rejected_by_target'), (5, 'rejected_by_target'),
             (6, 'rejected_by_target'), (100, 'rejected_by_target')$$,
    'exactly the rows the trigger rejects are quarantined as rejected_by_target (RAISE, a P0 code, ASSERT, STRICT, DELETE)');
SELECT matches((SELECT detail FROM qv WHERE name = 'guard_' || :'sfx' AND k = '2'), 'row 2 rejected',
    'the detail is the trigger''s message');
SELECT matches((SELECT detail FROM qv WHERE name = 'guard_' || :'sfx' AND k = '5'), 'negative key',
    'an ASSERT''s message is kept');
SELECT is((SELECT state FROM kafka_sink.pipelines WHERE name = 'guard_' || :'sfx'), 'running',
    'guard: the pipeline keeps running');
SELECT is((SELECT sum(quarantined) FROM kafka_sink.batches b JOIN kafka_sink.pipelines p ON p.id = b.pipeline_id
            WHERE p.name = 'guard_' || :'sfx'), 5::numeric,
    'the batch markers count the rejected rows, and the checkpoint moved over them');
SELECT ks_send(:'bootstrap', :'topic', '10', '{"v":"ok"}', 0) >= 0;
SELECT ok(kafka_sink.wait('guard_' || :'sfx'), 'guard: later batches go on');
SELECT is((SELECT count(*) FROM :sch.guarded WHERE k = 10), 1::bigint, 'a later message is applied');

-- ---- (7) replay after the cause is fixed
DROP TRIGGER guard ON :sch.guarded;
SET ROLE ks_tap;
SELECT results_eq(format($$SELECT replayed, still_failing FROM kafka_sink.replay_quarantine('guard_%s',
                             reason => 'rejected_by_target')$$, :'sfx'),
    $$VALUES (5::bigint, 0::bigint)$$, 'replay_quarantine(reason => rejected_by_target) applies them once the trigger is gone');
RESET ROLE;
SELECT results_eq(format('SELECT k FROM %I.guarded ORDER BY k', :'sch'),
    $$VALUES (1::bigint), (2), (3), (4), (5), (6), (7), (8), (9), (10)$$,
    'the replayed rows are in the target and the replayed tombstone deleted its row');

-- ---- (3) row level security WITH CHECK: the pipeline's owner is not the table's owner
CREATE TABLE :sch.secured (k bigint PRIMARY KEY, n int NOT NULL);
INSERT INTO :sch.secured VALUES (50, 1);
ALTER TABLE :sch.secured OWNER TO ks_tap_other;
GRANT SELECT, INSERT, UPDATE ON :sch.secured TO ks_tap;
ALTER TABLE :sch.secured ENABLE ROW LEVEL SECURITY;
CREATE POLICY non_negative ON :sch.secured TO ks_tap USING (true) WITH CHECK (n >= 0);
SELECT count(*) FROM (SELECT ks_send(:'bootstrap', :'topic' || '.rls', k::text, format('{"k":%s,"n":%s}', k, n), 0)
  FROM (VALUES (1, 1), (2, 2), (3, -3), (4, 4), (50, -5), (6, 6), (7, -7), (8, 8)) AS m(k, n)) x;
SET ROLE ks_tap;
SELECT kafka_sink.create_pipeline(name => 'rls_' || :'sfx', bootstrap_servers => :'bootstrap',
       subscribe => ARRAY[:'topic' || '.rls'], target => :'sch' || '.secured', starting_offsets => 'earliest') > 0;
RESET ROLE;
SELECT ok(kafka_sink.wait('rls_' || :'sfx'), 'rls: caught up although the policy rejects some rows');
SELECT results_eq(format('SELECT k, n FROM %I.secured ORDER BY k', :'sch'),
    $$VALUES (1::bigint, 1), (2, 2), (4, 4), (6, 6), (8, 8), (50, 1)$$,
    'rows the policy accepts are applied; a rejected update leaves the row as it was');
SELECT results_eq(format($$SELECT k::int, reason FROM qv WHERE name = 'rls_%s' ORDER BY k::int$$, :'sfx'),
    $$VALUES (3, 'rejected_by_target'), (7, 'rejected_by_target'), (50, 'rejected_by_target')$$,
    'rows violating the WITH CHECK policy (insert and update) are quarantined as rejected_by_target');
SELECT matches((SELECT detail FROM qv WHERE name = 'rls_' || :'sfx' AND k = '3'), 'row-level security',
    'the detail names the policy violation');

-- ---- (6) a value too large for an index row
CREATE TABLE :sch.indexed (k bigint PRIMARY KEY, v text);
CREATE INDEX ON :sch.indexed (v);
ALTER TABLE :sch.indexed OWNER TO ks_tap;
SELECT count(*) FROM (SELECT ks_send(:'bootstrap', :'topic' || '.idx', k::text,
       format('{"k":%s,"v":"%s"}', k, CASE WHEN k = 2
           THEN (SELECT string_agg(md5(i::text || random()::text), '') FROM generate_series(1, 700) i)
           ELSE 'small' END), 0)
  FROM generate_series(1, 3) k) x;
SET ROLE ks_tap;
SELECT kafka_sink.create_pipeline(name => 'idx_' || :'sfx', bootstrap_servers => :'bootstrap',
       subscribe => ARRAY[:'topic' || '.idx'], target => :'sch' || '.indexed', starting_offsets => 'earliest') > 0;
RESET ROLE;
SELECT ok(kafka_sink.wait('idx_' || :'sfx'), 'idx: caught up although one value overflows an index row');
SELECT results_eq(format('SELECT k FROM %I.indexed ORDER BY k', :'sch'), $$VALUES (1::bigint), (3)$$,
    'the other rows are applied');
SELECT results_eq(format($$SELECT k::int, reason FROM qv WHERE name = 'idx_%s'$$, :'sfx'),
    $$VALUES (2, 'value_too_large'::text)$$, 'the row whose index entry is too large is quarantined as value_too_large');

-- ---- (4) a trigger function naming a table without its schema: the system's fault, with a hint
SET ROLE ks_tap;
SET search_path = :sch, pg_catalog;
CREATE TABLE audited (k bigint PRIMARY KEY);
CREATE TABLE audit (k bigint);
CREATE FUNCTION audit_row() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
    INSERT INTO audit VALUES (NEW.k);
    RETURN NEW;
END
$fn$;
CREATE TRIGGER audit_row BEFORE INSERT ON audited FOR EACH ROW EXECUTE FUNCTION audit_row();
RESET search_path;
RESET ROLE;
SELECT count(*) FROM (SELECT ks_send(:'bootstrap', :'topic' || '.unq', k::text, format('{"k":%s}', k), 0)
  FROM generate_series(1, 3) k) x;
SET ROLE ks_tap;
SELECT kafka_sink.create_pipeline(name => 'unq_' || :'sfx', bootstrap_servers => :'bootstrap',
       subscribe => ARRAY[:'topic' || '.unq'], target => :'sch' || '.audited', starting_offsets => 'earliest') > 0;
RESET ROLE;
SELECT ok(ks_poll(format($$SELECT state = 'failed' FROM kafka_sink.pipelines WHERE name = 'unq_%s'$$, :'sfx')),
    'unq: an unresolved name in a trigger function fails the pipeline');
SELECT results_eq(format($$SELECT kind, sqlstate, detail ~ 'search_path' FROM ev WHERE name = 'unq_%s' AND kind <> 'broker'$$, :'sfx'),
    $$VALUES ('permanent', '42P01', true)$$,
    'the error is recorded as permanent with the search_path hint');
SELECT is((SELECT count(*) FROM qv WHERE name = 'unq_' || :'sfx'), 0::bigint, 'unq: nothing is quarantined');

-- ---- (5) the owner's INSERT revoked: the system's fault, even with a policy on the table
CREATE TABLE :sch.revoked (k bigint PRIMARY KEY, n int NOT NULL);
ALTER TABLE :sch.revoked OWNER TO ks_tap_other;
GRANT SELECT, INSERT, UPDATE ON :sch.revoked TO ks_tap;
ALTER TABLE :sch.revoked ENABLE ROW LEVEL SECURITY;
CREATE POLICY non_negative ON :sch.revoked TO ks_tap USING (true) WITH CHECK (n >= 0);
SELECT count(*) FROM (SELECT ks_send(:'bootstrap', :'topic' || '.rev', k::text, format('{"k":%s,"n":1}', k), 0)
  FROM generate_series(1, 3) k) x;
SET ROLE ks_tap;
SELECT kafka_sink.create_pipeline(name => 'rev_' || :'sfx', bootstrap_servers => :'bootstrap',
       subscribe => ARRAY[:'topic' || '.rev'], target => :'sch' || '.revoked', starting_offsets => 'earliest',
       start => false) > 0;
RESET ROLE;
REVOKE INSERT ON :sch.revoked FROM ks_tap;
SET ROLE ks_tap;
SELECT kafka_sink.start('rev_' || :'sfx');
RESET ROLE;
SELECT ok(ks_poll(format($$SELECT state = 'failed' FROM kafka_sink.pipelines WHERE name = 'rev_%s'$$, :'sfx')),
    'rev: a revoked privilege fails the pipeline');
SELECT results_eq(format($$SELECT kind, sqlstate FROM ev WHERE name = 'rev_%s' AND kind <> 'broker'$$, :'sfx'),
    $$VALUES ('permanent', '42501')$$, 'rev: recorded as permanent insufficient_privilege');
SELECT is((SELECT count(*) FROM qv WHERE name = 'rev_' || :'sfx'), 0::bigint, 'rev: nothing is quarantined');

-- ---- a trigger function lacking a privilege: the system's fault, not every row's
CREATE TABLE :sch.forbidden (k bigint);
ALTER TABLE :sch.forbidden OWNER TO ks_tap_other;
SET ROLE ks_tap;
SET search_path = :sch, pg_catalog;
CREATE TABLE logged (k bigint PRIMARY KEY);
CREATE FUNCTION log_row() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $fn$
BEGIN
    INSERT INTO forbidden VALUES (NEW.k);
    RETURN NEW;
END
$fn$;
CREATE TRIGGER log_row BEFORE INSERT ON logged FOR EACH ROW EXECUTE FUNCTION log_row();
RESET search_path;
RESET ROLE;
SELECT count(*) FROM (SELECT ks_send(:'bootstrap', :'topic' || '.priv', k::text, format('{"k":%s}', k), 0)
  FROM generate_series(1, 3) k) x;
SET ROLE ks_tap;
SELECT kafka_sink.create_pipeline(name => 'priv_' || :'sfx', bootstrap_servers => :'bootstrap',
       subscribe => ARRAY[:'topic' || '.priv'], target => :'sch' || '.logged', starting_offsets => 'earliest') > 0;
RESET ROLE;
SELECT ok(ks_poll(format($$SELECT state = 'failed' FROM kafka_sink.pipelines WHERE name = 'priv_%s'$$, :'sfx')),
    'priv: a trigger function without a privilege it needs fails the pipeline');
SELECT is((SELECT count(*) FROM qv WHERE name = 'priv_' || :'sfx'), 0::bigint,
    'priv: nothing is quarantined (the owner holds its privileges on the target, but the error came from the function)');

SELECT kafka_sink.drop_pipeline(p || :'sfx') FROM unnest(ARRAY['guard_', 'rls_', 'idx_', 'unq_', 'rev_', 'priv_']) p;
SELECT * FROM finish();
