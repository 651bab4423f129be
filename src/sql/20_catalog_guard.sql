-- ---- trust boundary: the catalog is written only through the API ----
--
-- Members of kafka_sink_admin keep their DML privileges on the catalog (the
-- API runs as the caller, so that row level security and the caller's own
-- privileges decide what it may do), but the trigger kafka_sink._catalog_guard
-- refuses every INSERT, UPDATE, DELETE or TRUNCATE (COPY FROM, ON CONFLICT,
-- MERGE included) unless the session is a superuser's or kafka_sink's C
-- code allows catalog writes at that moment: the public API functions that
-- write are C trampolines (kafka_sink_api_call) that allow them while they
-- run their SQL body kafka_sink._api_<name>, and pipeline workers allow
-- them except while code of the user's runs.  See docs/design/catalog.md,
-- "The catalog is written only through the API".
--
-- To change an API function, change kafka_sink._api_<name> (50_api.sql,
-- 51_, 52_).  Every table of 10_tables.sql gets the trigger from the loop
-- below; the upgrade script attaches it to a table it adds with the same
-- two statements.  The trigger function is nobody's to call (90_grants.sql).

CREATE OR REPLACE FUNCTION kafka_sink._catalog_guard()
RETURNS trigger
AS 'MODULE_PATHNAME', 'kafka_sink_catalog_guard'
LANGUAGE C;
REVOKE ALL ON FUNCTION kafka_sink._catalog_guard() FROM PUBLIC;
COMMENT ON FUNCTION kafka_sink._catalog_guard() IS
'Trigger on every catalog table: refuses writes that do not come from kafka_sink (its API functions and workers) or a superuser.';

-- The guard on every table of the extension (pg_depend: its members).
DO $$
DECLARE
    t regclass;
BEGIN
    FOR t IN SELECT c.oid::regclass FROM pg_catalog.pg_depend d
               JOIN pg_catalog.pg_class c ON c.oid = d.objid
              WHERE d.classid = 'pg_catalog.pg_class'::regclass AND d.deptype = 'e'
                AND d.refclassid = 'pg_catalog.pg_extension'::regclass
                AND d.refobjid = (SELECT oid FROM pg_catalog.pg_extension WHERE extname = 'kafka_sink')
                AND c.relkind IN ('r', 'p')
              ORDER BY c.relname
    LOOP
        EXECUTE format('CREATE OR REPLACE TRIGGER catalog_guard BEFORE INSERT OR UPDATE OR DELETE OR TRUNCATE ON %s'
                       ' FOR EACH STATEMENT EXECUTE FUNCTION kafka_sink._catalog_guard()', t);
        -- also with session_replication_role = replica
        EXECUTE format('ALTER TABLE %s ENABLE ALWAYS TRIGGER catalog_guard', t);
    END LOOP;
END
$$;
