-- kafka_sink 0.2.0: catalog, views and the SQL API, built by the Makefile
-- from the parts in src/sql/, joined in the order the Makefile lists them
-- (each part may use what the parts before it define).  An upgraded
-- database gets the same schema from kafka_sink--0.1.0--0.2.0.sql
-- (test/e2e/upgrade.sh compares them).

DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = 'kafka_sink_admin') THEN
        CREATE ROLE kafka_sink_admin NOLOGIN;
    END IF;
END
$$;

GRANT USAGE ON SCHEMA kafka_sink TO kafka_sink_admin;
