-- kafka_sink: who may read and write the catalog.
--
-- Access model: the tables are owned by the extension owner (a superuser).
-- Members of kafka_sink_admin get DML on them, narrowed by row level security
-- to the pipelines whose owner role they are a member of.  The API functions
-- run with the caller's rights (SECURITY INVOKER), so that row level security
-- and the caller's own privileges on the target decide what is allowed.

-- Row level security: a role sees and changes only the pipelines of roles it
-- is a member of.  Superusers bypass it.
ALTER TABLE kafka_sink.pipeline_definitions ENABLE ROW LEVEL SECURITY;
CREATE POLICY own_pipelines ON kafka_sink.pipeline_definitions
    USING (pg_catalog.pg_has_role(current_user, owner::oid, 'MEMBER'))
    WITH CHECK (pg_catalog.pg_has_role(current_user, owner::oid, 'MEMBER'));

DO $$
DECLARE
    t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['secrets', 'offsets', 'batches', 'quarantine', 'data_loss', 'errors', 'offset_resets', 'cdc_deletions', 'filtered_offsets',
                             'revived_offsets']
    LOOP
        EXECUTE format('ALTER TABLE kafka_sink.%I ENABLE ROW LEVEL SECURITY', t);
        EXECUTE format('CREATE POLICY own_pipelines ON kafka_sink.%I
                          USING (EXISTS (SELECT 1 FROM kafka_sink.pipeline_definitions p WHERE p.id = pipeline_id))
                          WITH CHECK (EXISTS (SELECT 1 FROM kafka_sink.pipeline_definitions p WHERE p.id = pipeline_id))', t);
    END LOOP;
END
$$;

-- event ids belong to a target: whoever may write the target sees its ids
ALTER TABLE kafka_sink.event_ids ENABLE ROW LEVEL SECURITY;
CREATE POLICY target_writers ON kafka_sink.event_ids
    USING (pg_catalog.has_table_privilege(target, 'INSERT'))
    WITH CHECK (pg_catalog.has_table_privilege(target, 'INSERT'));

REVOKE ALL ON ALL TABLES IN SCHEMA kafka_sink FROM PUBLIC;
GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA kafka_sink TO kafka_sink_admin;
GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA kafka_sink TO kafka_sink_admin;
-- the outbox is written only through outbox_send and the relay
REVOKE INSERT, UPDATE, DELETE, TRUNCATE ON kafka_sink.outbox FROM kafka_sink_admin;
ALTER TABLE kafka_sink.outbox ENABLE ROW LEVEL SECURITY;
CREATE POLICY own_messages ON kafka_sink.outbox
    USING (pg_catalog.pg_has_role(current_user, created_by, 'MEMBER'));

-- schemas fetched from a registry: for the registries of the pipelines a
-- role sees; written by the workers (kafka_sink's code, so the guard lets
-- them), never changed: an id's schema does not change
ALTER TABLE kafka_sink.schemas ENABLE ROW LEVEL SECURITY;
CREATE POLICY own_registries ON kafka_sink.schemas
    USING (EXISTS (SELECT 1 FROM kafka_sink.pipeline_definitions p WHERE p.schema_registry->>'url' = registry))
    WITH CHECK (EXISTS (SELECT 1 FROM kafka_sink.pipeline_definitions p WHERE p.schema_registry->>'url' = registry));
REVOKE UPDATE, DELETE ON kafka_sink.schemas FROM kafka_sink_admin;
