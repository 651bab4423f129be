-- LOCK TABLE on kafka_sink's catalog (adversarial review, catalog guard):
-- an admin's DML privileges let it LOCK any catalog table in any mode, and
-- one admin holding ACCESS EXCLUSIVE in an idle transaction stalled every
-- owner's workers.  Only ACCESS SHARE is left to non-superusers, also
-- through a view of their own that reads the catalog.
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS kafka_sink;
DROP SCHEMA IF EXISTS catlock CASCADE;
DROP ROLE IF EXISTS regress_catlock;
CREATE ROLE regress_catlock IN ROLE kafka_sink_admin;
CREATE SCHEMA catlock AUTHORIZATION regress_catlock;
RESET client_min_messages;

-- every table and view of the extension, in every mode above ACCESS SHARE:
-- the ones an admin could lock are listed
SET ROLE regress_catlock;
DO $$
DECLARE
    rel regclass;
    m text;
    locked text[] := '{}';
BEGIN
    FOR rel IN SELECT c.oid::regclass FROM pg_depend d JOIN pg_class c ON c.oid = d.objid
                WHERE d.classid = 'pg_class'::regclass AND d.deptype = 'e'
                  AND d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'kafka_sink')
                  AND c.relkind IN ('r', 'p', 'v')
                ORDER BY c.relname
    LOOP
        FOREACH m IN ARRAY ARRAY['ROW SHARE', 'ROW EXCLUSIVE', 'SHARE UPDATE EXCLUSIVE', 'SHARE',
                                 'SHARE ROW EXCLUSIVE', 'EXCLUSIVE', 'ACCESS EXCLUSIVE']
        LOOP
            BEGIN
                EXECUTE format('LOCK TABLE %s IN %s MODE', rel, m);
                locked := locked || format('%s in %s mode', rel, m);
            EXCEPTION WHEN insufficient_privilege THEN
                NULL;
            END;
        END LOOP;
    END LOOP;
    RAISE NOTICE 'locked: %', locked;
END $$;

\set VERBOSITY default
BEGIN;
LOCK TABLE kafka_sink.offsets IN ACCESS EXCLUSIVE MODE;
ROLLBACK;
-- ACCESS SHARE, as any SELECT takes it, stays allowed
BEGIN;
LOCK TABLE kafka_sink.offsets, kafka_sink.pipeline_definitions IN ACCESS SHARE MODE;
ROLLBACK;
-- LOCK on a view locks what it reads, with the view owner's privileges
CREATE VIEW catlock.v1 AS SELECT 1 AS one WHERE EXISTS (SELECT 1 FROM kafka_sink.batches);
CREATE VIEW catlock.v2 AS SELECT * FROM catlock.v1;
BEGIN;
LOCK TABLE catlock.v2 IN EXCLUSIVE MODE;
ROLLBACK;
-- the admin's own tables lock as ever
CREATE TABLE catlock.t (id int);
BEGIN;
LOCK TABLE catlock.t IN ACCESS EXCLUSIVE MODE;
ROLLBACK;
\set VERBOSITY terse
RESET ROLE;
-- a superuser may
BEGIN;
LOCK TABLE kafka_sink.offsets IN ACCESS EXCLUSIVE MODE;
ROLLBACK;
DROP SCHEMA catlock CASCADE;
DROP ROLE regress_catlock;
