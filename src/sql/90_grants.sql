-- kafka_sink: privileges on functions.  Every function is the extension
-- owner's and kafka_sink_admin's to execute, except the exceptions below;
-- views and tables got theirs beside them (20_security.sql, 60_, 70_).

REVOKE ALL ON ALL FUNCTIONS IN SCHEMA kafka_sink FROM PUBLIC;
GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA kafka_sink TO kafka_sink_admin;
REVOKE ALL ON PROCEDURE kafka_sink.wait_for(text, interval, boolean) FROM PUBLIC;
GRANT EXECUTE ON PROCEDURE kafka_sink.wait_for(text, interval, boolean) TO kafka_sink_admin;

-- The SQL bodies of the API (50_, 51_, 52_): only the extension owner may
-- call them; everyone else goes through the public C entry points (fmgr
-- does not check EXECUTE when they call them).
DO $$
DECLARE
    f regprocedure;
BEGIN
    FOR f IN SELECT p.oid::regprocedure FROM pg_catalog.pg_proc p
              WHERE p.pronamespace = 'kafka_sink'::regnamespace AND p.proname LIKE '\_api\_%'
    LOOP
        EXECUTE format('REVOKE ALL ON FUNCTION %s FROM PUBLIC, kafka_sink_admin', f);
        EXECUTE format('COMMENT ON FUNCTION %s IS %L', f,
                       format('The SQL body of kafka_sink.%s, called only through it (with the catalog writes allowed).',
                              substr((SELECT proname FROM pg_catalog.pg_proc WHERE oid = f), 6)));
    END LOOP;
END
$$;

-- The catalog guard is a trigger function: nobody calls it.
REVOKE ALL ON FUNCTION kafka_sink._catalog_guard() FROM kafka_sink_admin;

-- The monitoring functions are pg_monitor's, not kafka_sink_admin's, whose
-- members must not see the other tenants' pipelines (80_metrics.sql).
REVOKE ALL ON FUNCTION kafka_sink.metrics_pipelines(), kafka_sink.metrics_partitions(),
    kafka_sink.metrics_quarantine(), kafka_sink.metrics_errors(), kafka_sink.metrics_outbox()
    FROM kafka_sink_admin;
GRANT EXECUTE ON FUNCTION kafka_sink.metrics_pipelines(), kafka_sink.metrics_partitions(),
    kafka_sink.metrics_quarantine(), kafka_sink.metrics_errors(), kafka_sink.metrics_outbox()
    TO pg_monitor;
