-- kafka_sink 0.1.0 -> 0.2.0
--
-- Every change to the catalog, views and SQL API since 0.1.0, in order.
-- The install script of 0.2.0 is built by the Makefile as the 0.1.0 script
-- followed by this one (as pg_cron keeps a base script plus updates), so a
-- fresh install and an upgrade run the same statements; test/e2e/upgrade.sh
-- checks that they end in the same schema.

\echo Use "ALTER EXTENSION kafka_sink UPDATE TO '0.2.0'" to load this file. \quit

-- ---- row faults: rejected_by_target ----
-- A row that the target itself rejects (a trigger raising, a row level
-- security WITH CHECK policy, a view's WITH CHECK OPTION) is quarantined
-- with its own reason; the batch goes on.  See "Whose fault is an error" in
-- docs/design-notes.md.  The CHECK was auto-named in 0.1.0.
ALTER TABLE kafka_sink.quarantine DROP CONSTRAINT quarantine_reason_check;
ALTER TABLE kafka_sink.quarantine ADD CONSTRAINT quarantine_reason_check CHECK (reason IN (
    'invalid_json', 'not_an_object', 'missing_required_field',
    'invalid_value', 'unknown_schema_version', 'null_key',
    'constraint_violation', 'value_too_large', 'rejected_by_target'));
COMMENT ON COLUMN kafka_sink.quarantine.reason IS
    'Why the message was not applied: invalid_json, not_an_object, missing_required_field, invalid_value, '
    'unknown_schema_version, null_key, constraint_violation (a constraint or data error of the row), '
    'value_too_large, rejected_by_target (a trigger, row level security policy or check option of the target '
    'rejected the row)';

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
-- them except while code of the user's runs.  See docs/design-notes.md,
-- "The catalog is written only through the API".
--
-- To change an API function, replace kafka_sink._api_<name>; a new catalog
-- table gets the trigger from the loop at the end of this block (append new
-- tables before it, or attach the trigger the same way).

CREATE FUNCTION kafka_sink._catalog_guard()
RETURNS trigger
AS 'MODULE_PATHNAME', 'kafka_sink_catalog_guard'
LANGUAGE C;
REVOKE ALL ON FUNCTION kafka_sink._catalog_guard() FROM PUBLIC;
COMMENT ON FUNCTION kafka_sink._catalog_guard() IS
'Trigger on every catalog table: refuses writes that do not come from kafka_sink (its API functions and workers) or a superuser.';

-- The SQL bodies of the API.  Those that name their own parameters as
-- <function>.<parameter> are created again under the new name (the name
-- qualifies the parameters); the others are renamed.  Their text is
-- otherwise that of 0.1.0, except reset_offsets (below).
DROP FUNCTION kafka_sink.create_pipeline(text, text, text, text[], text, jsonb, text[], text, text, regprocedure, text, boolean, bigint, bigint, interval, integer, jsonb, boolean, jsonb, text, boolean, text, jsonb, text, interval, text, text);
DROP FUNCTION kafka_sink.alter_pipeline(text, bigint, bigint, interval, integer, jsonb, text, boolean, text);
DROP FUNCTION kafka_sink.drop_pipeline(text, boolean);
DROP FUNCTION kafka_sink.replay_quarantine(text, text, text, integer, bigint, bigint, bigint[]);
DROP FUNCTION kafka_sink.reset_offsets(text, text);
ALTER FUNCTION kafka_sink.start(text) RENAME TO _api_start;
ALTER FUNCTION kafka_sink.stop(text) RENAME TO _api_stop;
ALTER FUNCTION kafka_sink.pause(text) RENAME TO _api_pause;
ALTER FUNCTION kafka_sink.resume(text) RENAME TO _api_resume;
ALTER FUNCTION kafka_sink.outbox_send(text, text, text, jsonb) RENAME TO _api_outbox_send;

CREATE FUNCTION kafka_sink._api_create_pipeline(
    name                  text,
    bootstrap_servers     text,
    target                text DEFAULT NULL,
    subscribe             text[] DEFAULT NULL,
    subscribe_pattern     text DEFAULT NULL,
    assign                jsonb DEFAULT NULL,
    key_columns           text[] DEFAULT NULL,
    order_column          text DEFAULT NULL,
    mode                  text DEFAULT 'merge',
    batch_function        regprocedure DEFAULT NULL,
    starting_offsets      text DEFAULT 'latest',
    fail_on_data_loss     boolean DEFAULT true,
    max_offsets_per_batch bigint DEFAULT 100000,
    max_batch_bytes       bigint DEFAULT 67108864,
    trigger_interval      interval DEFAULT '100 ms',
    workers               integer DEFAULT 1,
    kafka_options         jsonb DEFAULT '{}',
    start                 boolean DEFAULT true,
    columns               jsonb DEFAULT NULL,
    key_format            text DEFAULT 'none',
    delete_on_tombstone   boolean DEFAULT false,
    schema_version_field  text DEFAULT NULL,
    schema_versions       jsonb DEFAULT NULL,
    event_id              text DEFAULT NULL,
    event_id_retention    interval DEFAULT '7 days',
    bronze                text DEFAULT NULL,
    ending_offsets        text DEFAULT NULL)
RETURNS bigint
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    target_oid regclass;
    bronze_oid regclass;
    new_id bigint;
    plain_options jsonb;
BEGIN
    PERFORM kafka_sink._require_admin();
    IF name IS NULL OR name !~ '^[A-Za-z_][A-Za-z0-9_.-]{0,62}$' THEN
        RAISE EXCEPTION 'invalid pipeline name "%"', name
            USING ERRCODE = 'invalid_name',
                  HINT = 'A pipeline name starts with a letter or "_" and has at most 63 letters, digits, "_", "." or "-".';
    END IF;
    IF EXISTS (SELECT 1 FROM kafka_sink.pipeline_definitions p WHERE p.name = _api_create_pipeline.name) THEN
        RAISE EXCEPTION 'pipeline "%" already exists', name
            USING ERRCODE = 'duplicate_object',
                  HINT = 'Choose another name, or drop the pipeline first with kafka_sink.drop_pipeline.';
    END IF;
    IF (SELECT rolsuper FROM pg_roles WHERE rolname = current_user)
       AND NOT coalesce(current_setting('kafka_sink.allow_superuser_pipelines', true), 'off')::boolean THEN
        RAISE EXCEPTION 'pipelines cannot be owned by a superuser'
            USING ERRCODE = 'insufficient_privilege',
                  DETAIL = 'A pipeline runs with its owner''s privileges.',
                  HINT = 'Create the pipeline as an ordinary role that is a member of kafka_sink_admin (SET ROLE), or set kafka_sink.allow_superuser_pipelines.';
    END IF;
    IF NOT (SELECT rolcanlogin FROM pg_roles WHERE rolname = current_user) THEN
        RAISE EXCEPTION 'role "%" cannot own a pipeline because it cannot log in', current_user
            USING ERRCODE = 'invalid_authorization_specification',
                  DETAIL = 'Pipeline workers connect as the pipeline''s owner.',
                  HINT = format('ALTER ROLE %I LOGIN', current_user);
    END IF;
    IF bootstrap_servers IS NULL OR btrim(bootstrap_servers) = '' THEN
        RAISE EXCEPTION 'bootstrap_servers cannot be empty'
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Pass bootstrap_servers => ''localhost:9092''.';
    END IF;
    PERFORM kafka_sink._check_source(subscribe, subscribe_pattern, assign);

    IF mode IS NULL OR mode NOT IN ('merge', 'append', 'function') THEN
        RAISE EXCEPTION 'invalid mode "%"', mode
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'mode is one of ''merge'', ''append'' or ''function''.';
    END IF;
    IF target IS NULL AND bronze IS NULL THEN
        RAISE EXCEPTION 'target cannot be null'
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Pass target => ''schema.table''; in mode function it gives the rows'' type. A bronze-only pipeline passes bronze => ''schema.raw_table'' instead.';
    END IF;
    IF bronze IS NOT NULL THEN
        bronze_oid := kafka_sink._bronze_table(bronze);
    END IF;
    IF target IS NOT NULL THEN
        target_oid := to_regclass(target);
        IF target_oid IS NULL THEN
            RAISE EXCEPTION 'target table "%" does not exist', target
                USING ERRCODE = 'undefined_table',
                      HINT = 'Create the table first, and schema-qualify its name.';
        END IF;
        key_columns := kafka_sink._check_target(target_oid, key_columns, order_column, mode);
        PERFORM kafka_sink._check_contract(target_oid, key_columns, columns, key_format,
                                           delete_on_tombstone, schema_version_field,
                                           schema_versions, event_id, mode);
    ELSIF num_nonnulls(key_columns, order_column, columns, schema_version_field, event_id) > 0
          OR delete_on_tombstone OR key_format <> 'none' OR mode <> 'merge' THEN
        RAISE EXCEPTION 'a bronze-only pipeline takes no decoding options'
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Pass a target to decode messages; a bronze-only pipeline only lands them raw.';
    END IF;
    IF mode = 'function' THEN
        IF batch_function IS NULL THEN
            RAISE EXCEPTION 'mode function needs a batch_function'
                USING ERRCODE = 'invalid_parameter_value',
                      HINT = 'Pass batch_function => ''my_schema.my_fn(bigint, my_schema.my_table[])''.';
        END IF;
        PERFORM kafka_sink._check_batch_function(batch_function, target_oid);
    ELSIF batch_function IS NOT NULL THEN
        RAISE EXCEPTION 'batch_function needs mode function'
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Pass mode => ''function'' as well.';
    END IF;

    PERFORM kafka_sink._check_starting_offsets(starting_offsets);
    IF ending_offsets IS NOT NULL THEN
        IF ending_offsets = 'earliest' THEN
            RAISE EXCEPTION 'ending_offsets cannot be earliest'
                USING ERRCODE = 'invalid_parameter_value',
                      HINT = 'A backfill ends at ''latest'' (the high watermarks when it starts), a timestamp, or per-partition JSON.';
        END IF;
        PERFORM kafka_sink._check_starting_offsets(ending_offsets);
    END IF;
    IF max_offsets_per_batch IS NULL OR max_offsets_per_batch <= 0 THEN
        RAISE EXCEPTION 'max_offsets_per_batch must be positive'
            USING ERRCODE = 'invalid_parameter_value', HINT = 'The default is 100000.';
    END IF;
    IF max_batch_bytes IS NULL OR max_batch_bytes <= 0 THEN
        RAISE EXCEPTION 'max_batch_bytes must be positive'
            USING ERRCODE = 'invalid_parameter_value', HINT = 'The default is 67108864 (64 MB).';
    END IF;
    IF trigger_interval IS NULL OR trigger_interval < '0' OR trigger_interval > '1 hour' THEN
        RAISE EXCEPTION 'trigger_interval must be between 0 and 1 hour'
            USING ERRCODE = 'invalid_parameter_value', HINT = 'The default is 100 ms.';
    END IF;
    IF workers IS NULL OR workers NOT BETWEEN 1 AND 64 THEN
        RAISE EXCEPTION 'workers must be between 1 and 64'
            USING ERRCODE = 'invalid_parameter_value', HINT = 'Each worker owns a disjoint set of partitions.';
    END IF;
    IF fail_on_data_loss IS NULL OR start IS NULL THEN
        RAISE EXCEPTION 'fail_on_data_loss and start cannot be null'
            USING ERRCODE = 'null_value_not_allowed', HINT = 'Pass true or false.';
    END IF;
    IF kafka_options IS NULL THEN
        kafka_options := '{}';
    END IF;
    PERFORM kafka_sink._check_kafka_options(kafka_options);

    INSERT INTO kafka_sink.pipeline_definitions AS p
        (name, owner, state, bootstrap_servers, subscribe, subscribe_pattern, assign,
         target, key_columns, order_column, mode, batch_function, starting_offsets,
         fail_on_data_loss, max_offsets_per_batch, max_batch_bytes, trigger_interval,
         workers, kafka_options, columns, key_format, delete_on_tombstone,
         schema_version_field, schema_versions, event_id, event_id_retention, bronze, ending_offsets)
    VALUES
        (name, (SELECT oid FROM pg_roles WHERE rolname = current_user)::regrole,
         CASE WHEN start THEN 'running' ELSE 'stopped' END,
         bootstrap_servers, subscribe, subscribe_pattern, assign,
         target_oid, key_columns, order_column, mode, batch_function, starting_offsets,
         fail_on_data_loss, max_offsets_per_batch, max_batch_bytes, trigger_interval,
         workers, '{}', columns, key_format, delete_on_tombstone,
         schema_version_field, schema_versions, event_id, event_id_retention, bronze_oid, ending_offsets)
    RETURNING p.id INTO new_id;

    plain_options := kafka_sink._split_secrets(new_id, kafka_options);
    UPDATE kafka_sink.pipeline_definitions p SET kafka_options = plain_options WHERE p.id = new_id;
    PERFORM kafka_sink._wake_launcher();
    RETURN new_id;
END
$$;

CREATE FUNCTION kafka_sink._api_alter_pipeline(
    name                  text,
    max_offsets_per_batch bigint DEFAULT NULL,
    max_batch_bytes       bigint DEFAULT NULL,
    trigger_interval      interval DEFAULT NULL,
    workers               integer DEFAULT NULL,
    kafka_options         jsonb DEFAULT NULL,
    starting_offsets      text DEFAULT NULL,
    fail_on_data_loss     boolean DEFAULT NULL,
    bootstrap_servers     text DEFAULT NULL)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    p kafka_sink.pipeline_definitions;
    k text;
BEGIN
    PERFORM kafka_sink._require_admin();
    p := kafka_sink._get_pipeline(name, true);
    IF max_offsets_per_batch IS NOT NULL AND max_offsets_per_batch <= 0 THEN
        RAISE EXCEPTION 'max_offsets_per_batch must be positive'
            USING ERRCODE = 'invalid_parameter_value', HINT = 'The default is 100000.';
    END IF;
    IF max_batch_bytes IS NOT NULL AND max_batch_bytes <= 0 THEN
        RAISE EXCEPTION 'max_batch_bytes must be positive'
            USING ERRCODE = 'invalid_parameter_value', HINT = 'The default is 67108864 (64 MB).';
    END IF;
    IF trigger_interval IS NOT NULL AND (trigger_interval < '0' OR trigger_interval > '1 hour') THEN
        RAISE EXCEPTION 'trigger_interval must be between 0 and 1 hour'
            USING ERRCODE = 'invalid_parameter_value', HINT = 'The default is 100 ms.';
    END IF;
    IF workers IS NOT NULL AND workers NOT BETWEEN 1 AND 64 THEN
        RAISE EXCEPTION 'workers must be between 1 and 64'
            USING ERRCODE = 'invalid_parameter_value', HINT = 'Each worker owns a disjoint set of partitions.';
    END IF;
    IF bootstrap_servers IS NOT NULL AND btrim(bootstrap_servers) = '' THEN
        RAISE EXCEPTION 'bootstrap_servers cannot be empty'
            USING ERRCODE = 'invalid_parameter_value', HINT = 'Pass bootstrap_servers => ''localhost:9092''.';
    END IF;
    IF starting_offsets IS NOT NULL THEN
        PERFORM kafka_sink._check_starting_offsets(starting_offsets);
        IF EXISTS (SELECT 1 FROM kafka_sink.offsets o WHERE o.pipeline_id = p.id) THEN
            RAISE NOTICE 'starting_offsets only applies to partitions with no checkpoint'
                USING DETAIL = 'Partitions that already have a checkpoint keep reading from it.',
                      HINT = 'Stop the pipeline and use kafka_sink.reset_offsets to move a checkpoint.';
        END IF;
    END IF;
    IF kafka_options IS NOT NULL THEN
        PERFORM kafka_sink._check_kafka_options(kafka_options);
        -- a key with a JSON null value removes the option
        FOR k IN SELECT key FROM jsonb_each(kafka_options) WHERE jsonb_typeof(value) = 'null' LOOP
            DELETE FROM kafka_sink.secrets s WHERE s.pipeline_id = p.id AND s.name = k;
            p.kafka_options := p.kafka_options - k;
        END LOOP;
        p.kafka_options := p.kafka_options ||
            kafka_sink._split_secrets(p.id, jsonb_strip_nulls(kafka_options));
    END IF;

    UPDATE kafka_sink.pipeline_definitions x SET
        max_offsets_per_batch = coalesce(_api_alter_pipeline.max_offsets_per_batch, x.max_offsets_per_batch),
        max_batch_bytes = coalesce(_api_alter_pipeline.max_batch_bytes, x.max_batch_bytes),
        trigger_interval = coalesce(_api_alter_pipeline.trigger_interval, x.trigger_interval),
        workers = coalesce(_api_alter_pipeline.workers, x.workers),
        kafka_options = p.kafka_options,
        starting_offsets = coalesce(_api_alter_pipeline.starting_offsets, x.starting_offsets),
        fail_on_data_loss = coalesce(_api_alter_pipeline.fail_on_data_loss, x.fail_on_data_loss),
        bootstrap_servers = coalesce(_api_alter_pipeline.bootstrap_servers, x.bootstrap_servers),
        generation = x.generation + 1,
        updated_at = now()
    WHERE x.id = p.id;
    PERFORM kafka_sink._wake_launcher();
END
$$;

CREATE FUNCTION kafka_sink._api_drop_pipeline(name text, if_exists boolean DEFAULT false)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM kafka_sink._require_admin();
    IF if_exists AND NOT EXISTS (SELECT 1 FROM kafka_sink.pipeline_definitions p WHERE p.name = _api_drop_pipeline.name) THEN
        RAISE NOTICE 'pipeline "%" does not exist, skipping', name;
        RETURN;
    END IF;
    PERFORM kafka_sink._get_pipeline(name, true);
    DELETE FROM kafka_sink.pipeline_definitions p WHERE p.name = _api_drop_pipeline.name;
    PERFORM kafka_sink._wake_launcher();
END
$$;

-- reset_offsets without a temporary table: a temporary table named by the
-- function is resolved in the caller's pg_temp, where the caller could have
-- put one with a trigger or a rule of their own, run with the catalog
-- writes allowed.  One statement computes the moves, writes the checkpoint
-- and the audit, and keeps the moves for the result.
CREATE FUNCTION kafka_sink._api_reset_offsets(pipeline text, "to" text)
RETURNS TABLE (topic text, partition integer, old_offset bigint, new_offset bigint)
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    p kafka_sink.pipeline_definitions;
    j jsonb;
    ts timestamptz;
    moved jsonb;
BEGIN
    PERFORM kafka_sink._require_admin();
    p := kafka_sink._get_pipeline(pipeline, true);
    IF p.state IN ('running', 'paused') THEN
        RAISE EXCEPTION 'pipeline "%" is %', pipeline, p.state
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = 'Stop it first with kafka_sink.stop; offsets move only on a stopped pipeline.';
    END IF;
    PERFORM kafka_sink._check_starting_offsets("to");
    IF left("to", 1) = '{' THEN
        j := "to"::jsonb;
    ELSIF "to" NOT IN ('earliest', 'latest') THEN
        ts := "to"::timestamptz;
    END IF;
    WITH w AS MATERIALIZED (
        SELECT w.topic, w.partition, o.next_offset AS old_offset,
               CASE WHEN "to" = 'earliest' THEN w.low
                    WHEN "to" = 'latest' THEN w.high
                    WHEN j IS NOT NULL THEN
                        CASE (j -> w.topic ->> w.partition::text)::bigint
                            WHEN -2 THEN w.low WHEN -1 THEN w.high
                            ELSE (j -> w.topic ->> w.partition::text)::bigint END
                    ELSE CASE WHEN w.at_offset < 0 THEN w.high ELSE w.at_offset END
               END AS new_offset
          FROM kafka_sink._watermarks(pipeline, ts) w
          LEFT JOIN kafka_sink.offsets o
                 ON o.pipeline_id = p.id AND o.topic = w.topic AND o.partition = w.partition
         WHERE j IS NULL OR j -> w.topic ? w.partition::text),
    r AS MATERIALIZED (
        SELECT * FROM w WHERE w.new_offset IS NOT NULL AND w.new_offset IS DISTINCT FROM w.old_offset),
    upsert AS (
        INSERT INTO kafka_sink.offsets AS o (pipeline_id, topic, partition, next_offset, start_offset)
        SELECT p.id, r.topic, r.partition, r.new_offset, r.new_offset FROM r
        ON CONFLICT ON CONSTRAINT offsets_pkey DO UPDATE SET next_offset = excluded.next_offset,
            batch_id = NULL, updated_at = now()),
    audit AS (
        INSERT INTO kafka_sink.offset_resets (pipeline_id, topic, partition, old_offset, new_offset, spec)
        SELECT p.id, r.topic, r.partition, r.old_offset, r.new_offset, "to" FROM r)
    SELECT coalesce(jsonb_agg(jsonb_build_object('topic', r.topic, 'partition', r.partition,
                                                 'old_offset', r.old_offset, 'new_offset', r.new_offset)), '[]')
      INTO moved FROM r;
    RETURN QUERY SELECT m.topic, m.partition, m.old_offset, m.new_offset
                   FROM jsonb_to_recordset(moved) AS m(topic text, partition integer, old_offset bigint, new_offset bigint)
                  ORDER BY 1, 2;
END
$$;

CREATE FUNCTION kafka_sink._api_replay_quarantine(
    pipeline    text,
    reason      text DEFAULT NULL,
    topic       text DEFAULT NULL,
    partition   integer DEFAULT NULL,
    from_offset bigint DEFAULT NULL,
    to_offset   bigint DEFAULT NULL,
    ids         bigint[] DEFAULT NULL)
RETURNS TABLE (replayed bigint, still_failing bigint)
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    p kafka_sink.pipeline_definitions;
    chosen bigint[];
BEGIN
    PERFORM kafka_sink._require_admin();
    p := kafka_sink._get_pipeline(pipeline);
    IF p.target IS NULL THEN
        RAISE EXCEPTION 'pipeline "%" has no target to replay into', pipeline
            USING ERRCODE = 'wrong_object_type', HINT = 'A bronze-only pipeline quarantines nothing.';
    END IF;
    IF reason IS NOT NULL AND reason NOT IN ('invalid_json', 'not_an_object', 'missing_required_field',
            'invalid_value', 'unknown_schema_version', 'null_key', 'constraint_violation', 'value_too_large',
            'rejected_by_target') THEN
        RAISE EXCEPTION 'unknown quarantine reason "%"', reason
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Reasons are invalid_json, not_an_object, missing_required_field, invalid_value, unknown_schema_version, null_key, constraint_violation, value_too_large and rejected_by_target.';
    END IF;
    SELECT array_agg(q.id) INTO chosen
      FROM kafka_sink.quarantine q
     WHERE q.pipeline_id = p.id AND q.replayed_at IS NULL
       AND (_api_replay_quarantine.reason IS NULL OR q.reason = _api_replay_quarantine.reason)
       AND (_api_replay_quarantine.topic IS NULL OR q.topic = _api_replay_quarantine.topic)
       AND (_api_replay_quarantine.partition IS NULL OR q.partition = _api_replay_quarantine.partition)
       AND (from_offset IS NULL OR q.message_offset >= from_offset)
       AND (to_offset IS NULL OR q.message_offset <= to_offset)
       AND (_api_replay_quarantine.ids IS NULL OR q.id = ANY (_api_replay_quarantine.ids));
    IF chosen IS NULL THEN
        RETURN QUERY SELECT 0::bigint, 0::bigint;
        RETURN;
    END IF;
    RETURN QUERY SELECT * FROM kafka_sink._replay(p.id, chosen);
END
$$;

-- Only the extension owner may call the bodies; everyone else goes through
-- the public functions (fmgr does not check EXECUTE when they call them).
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

-- The public API: the same names, parameters and defaults as before, in C.
CREATE FUNCTION kafka_sink.create_pipeline(
    name                  text,
    bootstrap_servers     text,
    target                text DEFAULT NULL,
    subscribe             text[] DEFAULT NULL,
    subscribe_pattern     text DEFAULT NULL,
    assign                jsonb DEFAULT NULL,
    key_columns           text[] DEFAULT NULL,
    order_column          text DEFAULT NULL,
    mode                  text DEFAULT 'merge',
    batch_function        regprocedure DEFAULT NULL,
    starting_offsets      text DEFAULT 'latest',
    fail_on_data_loss     boolean DEFAULT true,
    max_offsets_per_batch bigint DEFAULT 100000,
    max_batch_bytes       bigint DEFAULT 67108864,
    trigger_interval      interval DEFAULT '100 ms',
    workers               integer DEFAULT 1,
    kafka_options         jsonb DEFAULT '{}',
    start                 boolean DEFAULT true,
    columns               jsonb DEFAULT NULL,
    key_format            text DEFAULT 'none',
    delete_on_tombstone   boolean DEFAULT false,
    schema_version_field  text DEFAULT NULL,
    schema_versions       jsonb DEFAULT NULL,
    event_id              text DEFAULT NULL,
    event_id_retention    interval DEFAULT '7 days',
    bronze                text DEFAULT NULL,
    ending_offsets        text DEFAULT NULL)
RETURNS bigint
AS 'MODULE_PATHNAME', 'kafka_sink_api_call'
LANGUAGE C VOLATILE;
REVOKE ALL ON FUNCTION kafka_sink.create_pipeline(text, text, text, text[], text, jsonb, text[], text, text, regprocedure, text, boolean, bigint, bigint, interval, integer, jsonb, boolean, jsonb, text, boolean, text, jsonb, text, interval, text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION kafka_sink.create_pipeline(text, text, text, text[], text, jsonb, text[], text, text, regprocedure, text, boolean, bigint, bigint, interval, integer, jsonb, boolean, jsonb, text, boolean, text, jsonb, text, interval, text, text) TO kafka_sink_admin;
COMMENT ON FUNCTION kafka_sink.create_pipeline(text, text, text, text[], text, jsonb, text[], text, text, regprocedure, text, boolean, bigint, bigint, interval, integer, jsonb, boolean, jsonb, text, boolean, text, jsonb, text, interval, text, text) IS
'Creates a pipeline owned by the calling role (a member of kafka_sink_admin that can log in) and, unless start => false, starts it. Returns its id.';

CREATE FUNCTION kafka_sink.alter_pipeline(
    name                  text,
    max_offsets_per_batch bigint DEFAULT NULL,
    max_batch_bytes       bigint DEFAULT NULL,
    trigger_interval      interval DEFAULT NULL,
    workers               integer DEFAULT NULL,
    kafka_options         jsonb DEFAULT NULL,
    starting_offsets      text DEFAULT NULL,
    fail_on_data_loss     boolean DEFAULT NULL,
    bootstrap_servers     text DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'kafka_sink_api_call'
LANGUAGE C VOLATILE;
REVOKE ALL ON FUNCTION kafka_sink.alter_pipeline(text, bigint, bigint, interval, integer, jsonb, text, boolean, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION kafka_sink.alter_pipeline(text, bigint, bigint, interval, integer, jsonb, text, boolean, text) TO kafka_sink_admin;
COMMENT ON FUNCTION kafka_sink.alter_pipeline(text, bigint, bigint, interval, integer, jsonb, text, boolean, text) IS
'Changes a pipeline''s tunables, options, bootstrap servers or starting offsets; its workers restart with the new definition. A kafka_options key with a JSON null removes that option.';

CREATE FUNCTION kafka_sink.drop_pipeline(name text, if_exists boolean DEFAULT false)
RETURNS void
AS 'MODULE_PATHNAME', 'kafka_sink_api_call'
LANGUAGE C VOLATILE;
REVOKE ALL ON FUNCTION kafka_sink.drop_pipeline(text, boolean) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION kafka_sink.drop_pipeline(text, boolean) TO kafka_sink_admin;
COMMENT ON FUNCTION kafka_sink.drop_pipeline(text, boolean) IS
'Drops a pipeline and its catalog rows (checkpoint, batches, quarantine, errors); the target''s data stays.';

CREATE FUNCTION kafka_sink.start(name text)
RETURNS void
AS 'MODULE_PATHNAME', 'kafka_sink_api_call'
LANGUAGE C VOLATILE;
REVOKE ALL ON FUNCTION kafka_sink.start(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION kafka_sink.start(text) TO kafka_sink_admin;
COMMENT ON FUNCTION kafka_sink.start(text) IS
'Starts a stopped, failed, finished or paused pipeline from its checkpoint.';

CREATE FUNCTION kafka_sink.stop(name text)
RETURNS void
AS 'MODULE_PATHNAME', 'kafka_sink_api_call'
LANGUAGE C VOLATILE;
REVOKE ALL ON FUNCTION kafka_sink.stop(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION kafka_sink.stop(text) TO kafka_sink_admin;
COMMENT ON FUNCTION kafka_sink.stop(text) IS
'Stops a pipeline''s workers; the checkpoint stays.';

CREATE FUNCTION kafka_sink.reset_offsets(pipeline text, "to" text)
RETURNS TABLE (topic text, partition integer, old_offset bigint, new_offset bigint)
AS 'MODULE_PATHNAME', 'kafka_sink_api_call'
LANGUAGE C VOLATILE;
REVOKE ALL ON FUNCTION kafka_sink.reset_offsets(text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION kafka_sink.reset_offsets(text, text) TO kafka_sink_admin;
COMMENT ON FUNCTION kafka_sink.reset_offsets(text, text) IS
'Moves the checkpoint of a stopped pipeline to earliest, latest, a timestamp or per-partition offsets, recording each change in kafka_sink.offset_resets. Returns the partitions it moved.';

CREATE FUNCTION kafka_sink.outbox_send(topic text, key text, value text, headers jsonb DEFAULT NULL)
RETURNS uuid
AS 'MODULE_PATHNAME', 'kafka_sink_api_call'
LANGUAGE C VOLATILE;
REVOKE ALL ON FUNCTION kafka_sink.outbox_send(text, text, text, jsonb) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION kafka_sink.outbox_send(text, text, text, jsonb) TO kafka_sink_admin;
COMMENT ON FUNCTION kafka_sink.outbox_send(text, text, text, jsonb) IS
'Queues a message for Kafka in the caller''s transaction; the outbox relay publishes it only if the transaction commits. Returns its event id.';

CREATE FUNCTION kafka_sink.pause(name text)
RETURNS void
AS 'MODULE_PATHNAME', 'kafka_sink_api_call'
LANGUAGE C VOLATILE;
REVOKE ALL ON FUNCTION kafka_sink.pause(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION kafka_sink.pause(text) TO kafka_sink_admin;
COMMENT ON FUNCTION kafka_sink.pause(text) IS
'Pauses a running pipeline: its workers stay, apply nothing, and keep the lag up to date.';

CREATE FUNCTION kafka_sink.resume(name text)
RETURNS void
AS 'MODULE_PATHNAME', 'kafka_sink_api_call'
LANGUAGE C VOLATILE;
REVOKE ALL ON FUNCTION kafka_sink.resume(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION kafka_sink.resume(text) TO kafka_sink_admin;
COMMENT ON FUNCTION kafka_sink.resume(text) IS
'Resumes a paused pipeline from its checkpoint.';

CREATE FUNCTION kafka_sink.replay_quarantine(
    pipeline    text,
    reason      text DEFAULT NULL,
    topic       text DEFAULT NULL,
    partition   integer DEFAULT NULL,
    from_offset bigint DEFAULT NULL,
    to_offset   bigint DEFAULT NULL,
    ids         bigint[] DEFAULT NULL)
RETURNS TABLE (replayed bigint, still_failing bigint)
AS 'MODULE_PATHNAME', 'kafka_sink_api_call'
LANGUAGE C VOLATILE;
REVOKE ALL ON FUNCTION kafka_sink.replay_quarantine(text, text, text, integer, bigint, bigint, bigint[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION kafka_sink.replay_quarantine(text, text, text, integer, bigint, bigint, bigint[]) TO kafka_sink_admin;
COMMENT ON FUNCTION kafka_sink.replay_quarantine(text, text, text, integer, bigint, bigint, bigint[]) IS
'Applies quarantined messages of a pipeline again (those matching the filters), in offset order and in the caller''s transaction; those that apply now are marked replayed.';

-- The guard on every table of the extension (pg_depend: its members).  A
-- table added later gets it from this loop when it is created before it,
-- else with the same two statements.
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
        EXECUTE format('CREATE TRIGGER catalog_guard BEFORE INSERT OR UPDATE OR DELETE OR TRUNCATE ON %s'
                       ' FOR EACH STATEMENT EXECUTE FUNCTION kafka_sink._catalog_guard()', t);
        -- also with session_replication_role = replica
        EXECUTE format('ALTER TABLE %s ENABLE ALWAYS TRIGGER catalog_guard', t);
    END LOOP;
END
$$;

-- ---- determinism: one path parser, keys in the key index's terms ----

-- Whether a mapping path is valid, by the parser the workers decode with
-- (src/jsonwalk.c, ks_path_parse): fields separated by dots, a backslash
-- taking the next character literally ("a\.b" is the field "a.b").
CREATE FUNCTION kafka_sink._json_path_valid(path text)
RETURNS boolean
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE
AS 'MODULE_PATHNAME', 'kafka_sink_json_path_valid';
COMMENT ON FUNCTION kafka_sink._json_path_valid(text) IS
    'Internal: whether a mapping path is valid (dots separate fields; a backslash escapes a dot or a backslash)';
REVOKE ALL ON FUNCTION kafka_sink._json_path_valid(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION kafka_sink._json_path_valid(text) TO kafka_sink_admin;

-- One column mapping: a path string, or {"path": ..., "scale": n}.
CREATE OR REPLACE FUNCTION kafka_sink._check_mapping(target regclass, col text, spec jsonb, what text)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    path text;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = target AND attname = col
                      AND attnum > 0 AND NOT attisdropped) THEN
        RAISE EXCEPTION '% maps column "%", which does not exist in %', what, col, target
            USING ERRCODE = 'undefined_column', HINT = 'Map columns of the target: {"amount": "payload.amount"}.';
    END IF;
    IF jsonb_typeof(spec) = 'string' THEN
        path := spec #>> '{}';
    ELSIF jsonb_typeof(spec) = 'object' AND jsonb_typeof(spec->'path') = 'string'
          AND (spec - 'path' - 'scale') = '{}'
          AND (spec->'scale' IS NULL OR (jsonb_typeof(spec->'scale') = 'number'
                                          AND (spec->>'scale') ~ '^-?[0-9]{1,2}$')) THEN
        path := spec->>'path';
    ELSE
        RAISE EXCEPTION '% for column "%" must be a path or {"path": ..., "scale": n}', what, col
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'For example {"amount": "payload.amount"} or {"amount": {"path": "amount_cents", "scale": 2}}.';
    END IF;
    IF NOT kafka_sink._json_path_valid(path) THEN
        RAISE EXCEPTION 'invalid JSON path "%" for column "%"', path, col
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'A path names nested fields with dots, such as "payload.amount"; write \. for a dot within a field name ("a\.b" is the field "a.b").';
    END IF;
END
$$;

-- The data contract's options: column mappings, key format, tombstones,
-- schema versions and event ids.
CREATE OR REPLACE FUNCTION kafka_sink._check_contract(target regclass, key_columns text[], columns jsonb,
                                                      key_format text, delete_on_tombstone boolean,
                                                      schema_version_field text, schema_versions jsonb,
                                                      event_id text, mode text)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    c text;
    v text;
    spec jsonb;
BEGIN
    IF columns IS NOT NULL THEN
        IF jsonb_typeof(columns) <> 'object' THEN
            RAISE EXCEPTION 'columns must be a JSON object mapping columns to JSON paths'
                USING ERRCODE = 'invalid_parameter_value', HINT = 'For example {"amount": "payload.amount"}.';
        END IF;
        FOR c, spec IN SELECT * FROM jsonb_each(columns) LOOP
            PERFORM kafka_sink._check_mapping(target, c, spec, 'columns');
        END LOOP;
    END IF;
    IF key_format IS NULL OR key_format NOT IN ('none', 'string', 'json') THEN
        RAISE EXCEPTION 'invalid key_format "%"', key_format
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'key_format is ''none'' (key fields in the value), ''string'' or ''json''.';
    END IF;
    IF key_format <> 'none' AND key_columns IS NULL THEN
        RAISE EXCEPTION 'key_format % needs key columns', key_format
            USING ERRCODE = 'invalid_parameter_value', HINT = 'Pass key_columns, or give the target a primary key.';
    END IF;
    IF key_format = 'string' AND cardinality(key_columns) <> 1 THEN
        RAISE EXCEPTION 'key_format string needs exactly one key column'
            USING ERRCODE = 'invalid_parameter_value', HINT = 'Use key_format => ''json'' for a composite key.';
    END IF;
    IF delete_on_tombstone IS NULL OR (delete_on_tombstone AND (key_format = 'none' OR mode <> 'merge')) THEN
        RAISE EXCEPTION 'delete_on_tombstone needs mode merge and a key_format of string or json'
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'A tombstone has no value, so the key must come from the message key.';
    END IF;
    IF (schema_version_field IS NULL) <> (schema_versions IS NULL) THEN
        RAISE EXCEPTION 'schema_version_field and schema_versions go together'
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Pass schema_version_field => ''schema_version'', schema_versions => ''{"1": {}, "2": {"amount": "amount_v2"}}''.';
    END IF;
    IF schema_versions IS NOT NULL THEN
        IF jsonb_typeof(schema_versions) <> 'object' OR schema_versions = '{}' THEN
            RAISE EXCEPTION 'schema_versions must be a non-empty JSON object of version -> column mapping'
                USING ERRCODE = 'invalid_parameter_value',
                      HINT = 'For example {"1": {"amount": "amount"}, "2": {"amount": {"path": "amount_cents", "scale": 2}}}.';
        END IF;
        FOR v, spec IN SELECT * FROM jsonb_each(schema_versions) LOOP
            IF jsonb_typeof(spec) <> 'object' THEN
                RAISE EXCEPTION 'schema version "%" must map columns to JSON paths', v
                    USING ERRCODE = 'invalid_parameter_value', HINT = 'Use {} for a version that needs no mapping.';
            END IF;
            PERFORM kafka_sink._check_mapping(target, m.key, m.value, format('schema version "%s"', v))
               FROM jsonb_each(spec) m;
        END LOOP;
        IF NOT kafka_sink._json_path_valid(schema_version_field) THEN
            RAISE EXCEPTION 'invalid JSON path "%" for schema_version_field', schema_version_field
                USING ERRCODE = 'invalid_parameter_value',
                      HINT = 'A path names nested fields with dots; write \. for a dot within a field name.';
        END IF;
    END IF;
    IF event_id IS NOT NULL AND NOT kafka_sink._json_path_valid(event_id) THEN
        RAISE EXCEPTION 'invalid JSON path "%" for event_id', event_id
            USING ERRCODE = 'invalid_parameter_value', HINT = 'Pass the field holding the producer''s event id, such as ''event_id''.';
    END IF;
    -- merge keys compare as their unique index compares them (apply.c); the
    -- batch is reduced by hashing keys, so that comparison must hash
    IF mode = 'merge' AND key_columns IS NOT NULL THEN
        PERFORM kafka_sink._check_key_index(target, key_columns);
    END IF;
END
$$;

-- The unique index a merge pipeline keys on (the one the worker picks:
-- over exactly the key columns, the primary key first) must be a btree
-- whose equality operators have hash support: the worker reduces a batch
-- by hashing keys with the index's equality and collation.
CREATE FUNCTION kafka_sink._check_key_index(target regclass, key_columns text[])
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    idx regclass;
    bad record;
BEGIN
    SELECT i.indexrelid::regclass INTO idx
      FROM pg_index i
     WHERE i.indrelid = target AND i.indisunique AND i.indpred IS NULL AND i.indexprs IS NULL
       AND (SELECT array_agg(a.attname::text ORDER BY a.attname::text COLLATE "C")
              FROM pg_attribute a WHERE a.attrelid = i.indrelid AND a.attnum = ANY (i.indkey))
           = (SELECT array_agg(x ORDER BY x COLLATE "C") FROM unnest(key_columns) x)
     ORDER BY i.indisprimary DESC, i.indisvalid DESC, i.indexrelid
     LIMIT 1;
    IF idx IS NULL THEN
        RETURN;                 -- _check_target reports a missing unique index
    END IF;
    SELECT a.attname, oc.opcname, am.amname INTO bad
      FROM pg_index i
     CROSS JOIN LATERAL unnest(i.indkey::int2[], i.indclass::oid[]) AS u(attnum, cls)
      JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = u.attnum
      JOIN pg_opclass oc ON oc.oid = u.cls
      JOIN pg_am am ON am.oid = oc.opcmethod
     WHERE i.indexrelid = idx
       AND (am.amname <> 'btree' OR NOT EXISTS (
              SELECT 1 FROM pg_amop eq
                JOIN pg_amop h ON h.amopopr = eq.amopopr AND h.amoplefttype = h.amoprighttype
                JOIN pg_am ham ON ham.oid = h.amopmethod AND ham.amname = 'hash'
               WHERE eq.amopfamily = oc.opcfamily AND eq.amoplefttype = oc.opcintype
                 AND eq.amoprighttype = oc.opcintype AND eq.amopstrategy = 3))
     LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'key column "%" is compared by operator class "%" of index %, which kafka_sink cannot hash',
                        bad.attname, bad.opcname, idx
            USING ERRCODE = 'feature_not_supported',
                  DETAIL = 'A merge pipeline compares keys as its unique index does, and reduces a batch by hashing its keys.',
                  HINT = 'Key the pipeline on a btree unique index whose operator classes have hash support, such as the default ones.';
    END IF;
END
$$;
COMMENT ON FUNCTION kafka_sink._check_key_index(regclass, text[]) IS
    'Internal: refuses a merge key whose unique index compares keys in a way the reduce cannot hash';
REVOKE ALL ON FUNCTION kafka_sink._check_key_index(regclass, text[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION kafka_sink._check_key_index(regclass, text[]) TO kafka_sink_admin;

-- ---- dead-letter topic (issue 13) ----
--
-- A pipeline may name a dead_letter_topic: every message its workers
-- quarantine is also queued in kafka_sink.outbox, in the batch's own
-- transaction, and the outbox relay publishes it to that topic on the
-- cluster of kafka_sink.outbox_bootstrap_servers.  One outbox row per
-- quarantine write: a batch that rolls back leaves neither; after the
-- commit the relay delivers at least once, with a stable event id.  The
-- message keeps the original key, value and headers byte for byte, and
-- gets headers kafka_sink.pipeline, .topic, .partition, .offset,
-- .timestamp, .reason, .detail (at most 1 kB), .batch_id, .quarantine_id.
-- replay_quarantine publishes nothing (the message was dead-lettered when
-- it was quarantined).  See "Dead-letter topic" in docs/design-notes.md.

ALTER TABLE kafka_sink.pipeline_definitions ADD COLUMN dead_letter_topic text
    CONSTRAINT pipeline_definitions_dead_letter_topic_check
    CHECK (dead_letter_topic ~ '^[A-Za-z0-9._-]{1,249}$' AND dead_letter_topic NOT IN ('.', '..'));
COMMENT ON COLUMN kafka_sink.pipeline_definitions.dead_letter_topic IS
    'Topic (on the cluster of kafka_sink.outbox_bootstrap_servers) that every quarantined message is also published to, through the outbox; NULL: none';

-- The outbox carries bytes: a dead-letter message keeps the original key,
-- value and headers as they were, which need not be text (Avro, protobuf,
-- bytes invalid in UTF-8).  outbox_send keeps writing key, value and
-- headers (text and a JSON object); the relay sends key_bytes and
-- value_bytes when set, and header_names/header_values (in order,
-- repeated names allowed, a NULL value is a header without value) before
-- the event id and the JSON headers.
ALTER TABLE kafka_sink.outbox
    ADD COLUMN key_bytes bytea,
    ADD COLUMN value_bytes bytea,
    ADD COLUMN header_names text[],
    ADD COLUMN header_values bytea[],
    ADD COLUMN quarantine_id bigint,
    ADD CONSTRAINT outbox_bytes_check CHECK (num_nulls(key, key_bytes) >= 1 AND num_nulls(value, value_bytes) >= 1),
    ADD CONSTRAINT outbox_header_list_check
        CHECK ((header_names IS NULL) = (header_values IS NULL)
               AND cardinality(header_names) IS NOT DISTINCT FROM cardinality(header_values)
               AND array_position(header_names, NULL) IS NULL);
COMMENT ON COLUMN kafka_sink.outbox.key_bytes IS 'The key as bytes (dead-letter messages); sent instead of key';
COMMENT ON COLUMN kafka_sink.outbox.value_bytes IS 'The value as bytes (dead-letter messages); sent instead of value';
COMMENT ON COLUMN kafka_sink.outbox.header_names IS
    'Headers sent first, in order (dead-letter messages: the original headers, then kafka_sink.*); values in header_values';
COMMENT ON COLUMN kafka_sink.outbox.header_values IS 'The values of header_names, as bytes (NULL: a header without value)';
COMMENT ON COLUMN kafka_sink.outbox.quarantine_id IS
    'For a dead-letter message: the kafka_sink.quarantine row it was queued with (no foreign key: the outbox outlives pipelines)';

-- Whether kafka_sink.outbox_bootstrap_servers is set (a superuser-only
-- setting: its value may name internal hosts, so only this is told).
CREATE FUNCTION kafka_sink._outbox_relay_configured()
RETURNS boolean
LANGUAGE sql STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT coalesce(current_setting('kafka_sink.outbox_bootstrap_servers', true), '') <> ''
$$;
REVOKE ALL ON FUNCTION kafka_sink._outbox_relay_configured() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION kafka_sink._outbox_relay_configured() TO kafka_sink_admin;
COMMENT ON FUNCTION kafka_sink._outbox_relay_configured() IS
    'Internal: whether kafka_sink.outbox_bootstrap_servers is set, so that the outbox relay runs';

-- A dead-letter topic: a valid Kafka topic name, for a pipeline that can
-- quarantine (it has a target), and none of the topics it reads (whether or
-- not the outbox cluster is the pipeline's: a topic read back would
-- quarantine its own dead letters again, forever).  Without a relay the
-- messages wait in the outbox: a warning, since the relay may be set up
-- after the pipeline (a reload), and nothing is lost meanwhile.
CREATE FUNCTION kafka_sink._check_dead_letter_topic(dead_letter_topic text, subscribe text[],
                                                     subscribe_pattern text, assign jsonb, target regclass)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF dead_letter_topic IS NULL THEN
        RETURN;
    END IF;
    IF dead_letter_topic !~ '^[A-Za-z0-9._-]{1,249}$' OR dead_letter_topic IN ('.', '..') THEN
        RAISE EXCEPTION 'invalid dead_letter_topic "%"', dead_letter_topic
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Kafka topic names use letters, digits, ".", "_" and "-", at most 249 characters, and are not "." or "..".';
    END IF;
    IF target IS NULL THEN
        RAISE EXCEPTION 'a bronze-only pipeline has no dead-letter topic'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = 'A bronze-only pipeline lands every message raw and quarantines none.';
    END IF;
    IF dead_letter_topic = ANY (subscribe) OR assign ? dead_letter_topic
       OR dead_letter_topic ~ subscribe_pattern THEN
        RAISE EXCEPTION 'dead_letter_topic "%" is a topic the pipeline reads', dead_letter_topic
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = 'The pipeline would quarantine its own dead-letter messages again.',
                  HINT = 'Choose another topic, such as the source topic''s name followed by ".dlq".';
    END IF;
    IF NOT kafka_sink._outbox_relay_configured() THEN
        RAISE WARNING 'the outbox relay is not configured'
            USING DETAIL = 'Dead-letter messages wait in kafka_sink.outbox until kafka_sink.outbox_bootstrap_servers is set.',
                  HINT = 'ALTER SYSTEM SET kafka_sink.outbox_bootstrap_servers = ''host:9092''; SELECT pg_reload_conf(); the dead-letter topic lives on that cluster.';
    END IF;
END
$$;
REVOKE ALL ON FUNCTION kafka_sink._check_dead_letter_topic(text, text[], text, jsonb, regclass) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION kafka_sink._check_dead_letter_topic(text, text[], text, jsonb, regclass) TO kafka_sink_admin;
COMMENT ON FUNCTION kafka_sink._check_dead_letter_topic(text, text[], text, jsonb, regclass) IS
    'Internal: refuses an invalid dead-letter topic, or one the pipeline reads; warns when the outbox relay is not configured';

-- create_pipeline and alter_pipeline take dead_letter_topic (last): the
-- bodies are those above plus the parameter, its check and its column.
DROP FUNCTION kafka_sink.create_pipeline(text, text, text, text[], text, jsonb, text[], text, text, regprocedure, text, boolean, bigint, bigint, interval, integer, jsonb, boolean, jsonb, text, boolean, text, jsonb, text, interval, text, text);
DROP FUNCTION kafka_sink._api_create_pipeline(text, text, text, text[], text, jsonb, text[], text, text, regprocedure, text, boolean, bigint, bigint, interval, integer, jsonb, boolean, jsonb, text, boolean, text, jsonb, text, interval, text, text);
DROP FUNCTION kafka_sink.alter_pipeline(text, bigint, bigint, interval, integer, jsonb, text, boolean, text);
DROP FUNCTION kafka_sink._api_alter_pipeline(text, bigint, bigint, interval, integer, jsonb, text, boolean, text);

CREATE FUNCTION kafka_sink._api_create_pipeline(
    name                  text,
    bootstrap_servers     text,
    target                text DEFAULT NULL,
    subscribe             text[] DEFAULT NULL,
    subscribe_pattern     text DEFAULT NULL,
    assign                jsonb DEFAULT NULL,
    key_columns           text[] DEFAULT NULL,
    order_column          text DEFAULT NULL,
    mode                  text DEFAULT 'merge',
    batch_function        regprocedure DEFAULT NULL,
    starting_offsets      text DEFAULT 'latest',
    fail_on_data_loss     boolean DEFAULT true,
    max_offsets_per_batch bigint DEFAULT 100000,
    max_batch_bytes       bigint DEFAULT 67108864,
    trigger_interval      interval DEFAULT '100 ms',
    workers               integer DEFAULT 1,
    kafka_options         jsonb DEFAULT '{}',
    start                 boolean DEFAULT true,
    columns               jsonb DEFAULT NULL,
    key_format            text DEFAULT 'none',
    delete_on_tombstone   boolean DEFAULT false,
    schema_version_field  text DEFAULT NULL,
    schema_versions       jsonb DEFAULT NULL,
    event_id              text DEFAULT NULL,
    event_id_retention    interval DEFAULT '7 days',
    bronze                text DEFAULT NULL,
    ending_offsets        text DEFAULT NULL,
    dead_letter_topic     text DEFAULT NULL)
RETURNS bigint
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    target_oid regclass;
    bronze_oid regclass;
    new_id bigint;
    plain_options jsonb;
BEGIN
    PERFORM kafka_sink._require_admin();
    IF name IS NULL OR name !~ '^[A-Za-z_][A-Za-z0-9_.-]{0,62}$' THEN
        RAISE EXCEPTION 'invalid pipeline name "%"', name
            USING ERRCODE = 'invalid_name',
                  HINT = 'A pipeline name starts with a letter or "_" and has at most 63 letters, digits, "_", "." or "-".';
    END IF;
    IF EXISTS (SELECT 1 FROM kafka_sink.pipeline_definitions p WHERE p.name = _api_create_pipeline.name) THEN
        RAISE EXCEPTION 'pipeline "%" already exists', name
            USING ERRCODE = 'duplicate_object',
                  HINT = 'Choose another name, or drop the pipeline first with kafka_sink.drop_pipeline.';
    END IF;
    IF (SELECT rolsuper FROM pg_roles WHERE rolname = current_user)
       AND NOT coalesce(current_setting('kafka_sink.allow_superuser_pipelines', true), 'off')::boolean THEN
        RAISE EXCEPTION 'pipelines cannot be owned by a superuser'
            USING ERRCODE = 'insufficient_privilege',
                  DETAIL = 'A pipeline runs with its owner''s privileges.',
                  HINT = 'Create the pipeline as an ordinary role that is a member of kafka_sink_admin (SET ROLE), or set kafka_sink.allow_superuser_pipelines.';
    END IF;
    IF NOT (SELECT rolcanlogin FROM pg_roles WHERE rolname = current_user) THEN
        RAISE EXCEPTION 'role "%" cannot own a pipeline because it cannot log in', current_user
            USING ERRCODE = 'invalid_authorization_specification',
                  DETAIL = 'Pipeline workers connect as the pipeline''s owner.',
                  HINT = format('ALTER ROLE %I LOGIN', current_user);
    END IF;
    IF bootstrap_servers IS NULL OR btrim(bootstrap_servers) = '' THEN
        RAISE EXCEPTION 'bootstrap_servers cannot be empty'
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Pass bootstrap_servers => ''localhost:9092''.';
    END IF;
    PERFORM kafka_sink._check_source(subscribe, subscribe_pattern, assign);

    IF mode IS NULL OR mode NOT IN ('merge', 'append', 'function') THEN
        RAISE EXCEPTION 'invalid mode "%"', mode
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'mode is one of ''merge'', ''append'' or ''function''.';
    END IF;
    IF target IS NULL AND bronze IS NULL THEN
        RAISE EXCEPTION 'target cannot be null'
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Pass target => ''schema.table''; in mode function it gives the rows'' type. A bronze-only pipeline passes bronze => ''schema.raw_table'' instead.';
    END IF;
    IF bronze IS NOT NULL THEN
        bronze_oid := kafka_sink._bronze_table(bronze);
    END IF;
    IF target IS NOT NULL THEN
        target_oid := to_regclass(target);
        IF target_oid IS NULL THEN
            RAISE EXCEPTION 'target table "%" does not exist', target
                USING ERRCODE = 'undefined_table',
                      HINT = 'Create the table first, and schema-qualify its name.';
        END IF;
        key_columns := kafka_sink._check_target(target_oid, key_columns, order_column, mode);
        PERFORM kafka_sink._check_contract(target_oid, key_columns, columns, key_format,
                                           delete_on_tombstone, schema_version_field,
                                           schema_versions, event_id, mode);
    ELSIF num_nonnulls(key_columns, order_column, columns, schema_version_field, event_id) > 0
          OR delete_on_tombstone OR key_format <> 'none' OR mode <> 'merge' THEN
        RAISE EXCEPTION 'a bronze-only pipeline takes no decoding options'
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Pass a target to decode messages; a bronze-only pipeline only lands them raw.';
    END IF;
    IF mode = 'function' THEN
        IF batch_function IS NULL THEN
            RAISE EXCEPTION 'mode function needs a batch_function'
                USING ERRCODE = 'invalid_parameter_value',
                      HINT = 'Pass batch_function => ''my_schema.my_fn(bigint, my_schema.my_table[])''.';
        END IF;
        PERFORM kafka_sink._check_batch_function(batch_function, target_oid);
    ELSIF batch_function IS NOT NULL THEN
        RAISE EXCEPTION 'batch_function needs mode function'
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Pass mode => ''function'' as well.';
    END IF;

    PERFORM kafka_sink._check_starting_offsets(starting_offsets);
    IF ending_offsets IS NOT NULL THEN
        IF ending_offsets = 'earliest' THEN
            RAISE EXCEPTION 'ending_offsets cannot be earliest'
                USING ERRCODE = 'invalid_parameter_value',
                      HINT = 'A backfill ends at ''latest'' (the high watermarks when it starts), a timestamp, or per-partition JSON.';
        END IF;
        PERFORM kafka_sink._check_starting_offsets(ending_offsets);
    END IF;
    IF max_offsets_per_batch IS NULL OR max_offsets_per_batch <= 0 THEN
        RAISE EXCEPTION 'max_offsets_per_batch must be positive'
            USING ERRCODE = 'invalid_parameter_value', HINT = 'The default is 100000.';
    END IF;
    IF max_batch_bytes IS NULL OR max_batch_bytes <= 0 THEN
        RAISE EXCEPTION 'max_batch_bytes must be positive'
            USING ERRCODE = 'invalid_parameter_value', HINT = 'The default is 67108864 (64 MB).';
    END IF;
    IF trigger_interval IS NULL OR trigger_interval < '0' OR trigger_interval > '1 hour' THEN
        RAISE EXCEPTION 'trigger_interval must be between 0 and 1 hour'
            USING ERRCODE = 'invalid_parameter_value', HINT = 'The default is 100 ms.';
    END IF;
    IF workers IS NULL OR workers NOT BETWEEN 1 AND 64 THEN
        RAISE EXCEPTION 'workers must be between 1 and 64'
            USING ERRCODE = 'invalid_parameter_value', HINT = 'Each worker owns a disjoint set of partitions.';
    END IF;
    IF fail_on_data_loss IS NULL OR start IS NULL THEN
        RAISE EXCEPTION 'fail_on_data_loss and start cannot be null'
            USING ERRCODE = 'null_value_not_allowed', HINT = 'Pass true or false.';
    END IF;
    IF kafka_options IS NULL THEN
        kafka_options := '{}';
    END IF;
    PERFORM kafka_sink._check_kafka_options(kafka_options);
    PERFORM kafka_sink._check_dead_letter_topic(dead_letter_topic, subscribe, subscribe_pattern, assign, target_oid);

    INSERT INTO kafka_sink.pipeline_definitions AS p
        (name, owner, state, bootstrap_servers, subscribe, subscribe_pattern, assign,
         target, key_columns, order_column, mode, batch_function, starting_offsets,
         fail_on_data_loss, max_offsets_per_batch, max_batch_bytes, trigger_interval,
         workers, kafka_options, columns, key_format, delete_on_tombstone,
         schema_version_field, schema_versions, event_id, event_id_retention, bronze, ending_offsets,
         dead_letter_topic)
    VALUES
        (name, (SELECT oid FROM pg_roles WHERE rolname = current_user)::regrole,
         CASE WHEN start THEN 'running' ELSE 'stopped' END,
         bootstrap_servers, subscribe, subscribe_pattern, assign,
         target_oid, key_columns, order_column, mode, batch_function, starting_offsets,
         fail_on_data_loss, max_offsets_per_batch, max_batch_bytes, trigger_interval,
         workers, '{}', columns, key_format, delete_on_tombstone,
         schema_version_field, schema_versions, event_id, event_id_retention, bronze_oid, ending_offsets,
         dead_letter_topic)
    RETURNING p.id INTO new_id;

    plain_options := kafka_sink._split_secrets(new_id, kafka_options);
    UPDATE kafka_sink.pipeline_definitions p SET kafka_options = plain_options WHERE p.id = new_id;
    PERFORM kafka_sink._wake_launcher();
    RETURN new_id;
END
$$;

CREATE FUNCTION kafka_sink._api_alter_pipeline(
    name                  text,
    max_offsets_per_batch bigint DEFAULT NULL,
    max_batch_bytes       bigint DEFAULT NULL,
    trigger_interval      interval DEFAULT NULL,
    workers               integer DEFAULT NULL,
    kafka_options         jsonb DEFAULT NULL,
    starting_offsets      text DEFAULT NULL,
    fail_on_data_loss     boolean DEFAULT NULL,
    bootstrap_servers     text DEFAULT NULL,
    dead_letter_topic     text DEFAULT NULL)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    p kafka_sink.pipeline_definitions;
    k text;
BEGIN
    PERFORM kafka_sink._require_admin();
    p := kafka_sink._get_pipeline(name, true);
    IF max_offsets_per_batch IS NOT NULL AND max_offsets_per_batch <= 0 THEN
        RAISE EXCEPTION 'max_offsets_per_batch must be positive'
            USING ERRCODE = 'invalid_parameter_value', HINT = 'The default is 100000.';
    END IF;
    IF max_batch_bytes IS NOT NULL AND max_batch_bytes <= 0 THEN
        RAISE EXCEPTION 'max_batch_bytes must be positive'
            USING ERRCODE = 'invalid_parameter_value', HINT = 'The default is 67108864 (64 MB).';
    END IF;
    IF trigger_interval IS NOT NULL AND (trigger_interval < '0' OR trigger_interval > '1 hour') THEN
        RAISE EXCEPTION 'trigger_interval must be between 0 and 1 hour'
            USING ERRCODE = 'invalid_parameter_value', HINT = 'The default is 100 ms.';
    END IF;
    IF workers IS NOT NULL AND workers NOT BETWEEN 1 AND 64 THEN
        RAISE EXCEPTION 'workers must be between 1 and 64'
            USING ERRCODE = 'invalid_parameter_value', HINT = 'Each worker owns a disjoint set of partitions.';
    END IF;
    IF bootstrap_servers IS NOT NULL AND btrim(bootstrap_servers) = '' THEN
        RAISE EXCEPTION 'bootstrap_servers cannot be empty'
            USING ERRCODE = 'invalid_parameter_value', HINT = 'Pass bootstrap_servers => ''localhost:9092''.';
    END IF;
    IF starting_offsets IS NOT NULL THEN
        PERFORM kafka_sink._check_starting_offsets(starting_offsets);
        IF EXISTS (SELECT 1 FROM kafka_sink.offsets o WHERE o.pipeline_id = p.id) THEN
            RAISE NOTICE 'starting_offsets only applies to partitions with no checkpoint'
                USING DETAIL = 'Partitions that already have a checkpoint keep reading from it.',
                      HINT = 'Stop the pipeline and use kafka_sink.reset_offsets to move a checkpoint.';
        END IF;
    END IF;
    -- '' removes the dead-letter topic (NULL leaves it as it is)
    IF dead_letter_topic <> '' THEN
        PERFORM kafka_sink._check_dead_letter_topic(dead_letter_topic, p.subscribe, p.subscribe_pattern,
                                                    p.assign, p.target);
    END IF;
    IF kafka_options IS NOT NULL THEN
        PERFORM kafka_sink._check_kafka_options(kafka_options);
        -- a key with a JSON null value removes the option
        FOR k IN SELECT key FROM jsonb_each(kafka_options) WHERE jsonb_typeof(value) = 'null' LOOP
            DELETE FROM kafka_sink.secrets s WHERE s.pipeline_id = p.id AND s.name = k;
            p.kafka_options := p.kafka_options - k;
        END LOOP;
        p.kafka_options := p.kafka_options ||
            kafka_sink._split_secrets(p.id, jsonb_strip_nulls(kafka_options));
    END IF;

    UPDATE kafka_sink.pipeline_definitions x SET
        max_offsets_per_batch = coalesce(_api_alter_pipeline.max_offsets_per_batch, x.max_offsets_per_batch),
        max_batch_bytes = coalesce(_api_alter_pipeline.max_batch_bytes, x.max_batch_bytes),
        trigger_interval = coalesce(_api_alter_pipeline.trigger_interval, x.trigger_interval),
        workers = coalesce(_api_alter_pipeline.workers, x.workers),
        kafka_options = p.kafka_options,
        starting_offsets = coalesce(_api_alter_pipeline.starting_offsets, x.starting_offsets),
        fail_on_data_loss = coalesce(_api_alter_pipeline.fail_on_data_loss, x.fail_on_data_loss),
        bootstrap_servers = coalesce(_api_alter_pipeline.bootstrap_servers, x.bootstrap_servers),
        dead_letter_topic = CASE WHEN _api_alter_pipeline.dead_letter_topic IS NULL THEN x.dead_letter_topic
                                 ELSE nullif(_api_alter_pipeline.dead_letter_topic, '') END,
        generation = x.generation + 1,
        updated_at = now()
    WHERE x.id = p.id;
    PERFORM kafka_sink._wake_launcher();
END
$$;

REVOKE ALL ON FUNCTION kafka_sink._api_create_pipeline(text, text, text, text[], text, jsonb, text[], text, text, regprocedure, text, boolean, bigint, bigint, interval, integer, jsonb, boolean, jsonb, text, boolean, text, jsonb, text, interval, text, text, text) FROM PUBLIC, kafka_sink_admin;
COMMENT ON FUNCTION kafka_sink._api_create_pipeline(text, text, text, text[], text, jsonb, text[], text, text, regprocedure, text, boolean, bigint, bigint, interval, integer, jsonb, boolean, jsonb, text, boolean, text, jsonb, text, interval, text, text, text) IS
'The SQL body of kafka_sink.create_pipeline, called only through it (with the catalog writes allowed).';
REVOKE ALL ON FUNCTION kafka_sink._api_alter_pipeline(text, bigint, bigint, interval, integer, jsonb, text, boolean, text, text) FROM PUBLIC, kafka_sink_admin;
COMMENT ON FUNCTION kafka_sink._api_alter_pipeline(text, bigint, bigint, interval, integer, jsonb, text, boolean, text, text) IS
'The SQL body of kafka_sink.alter_pipeline, called only through it (with the catalog writes allowed).';

CREATE FUNCTION kafka_sink.create_pipeline(
    name                  text,
    bootstrap_servers     text,
    target                text DEFAULT NULL,
    subscribe             text[] DEFAULT NULL,
    subscribe_pattern     text DEFAULT NULL,
    assign                jsonb DEFAULT NULL,
    key_columns           text[] DEFAULT NULL,
    order_column          text DEFAULT NULL,
    mode                  text DEFAULT 'merge',
    batch_function        regprocedure DEFAULT NULL,
    starting_offsets      text DEFAULT 'latest',
    fail_on_data_loss     boolean DEFAULT true,
    max_offsets_per_batch bigint DEFAULT 100000,
    max_batch_bytes       bigint DEFAULT 67108864,
    trigger_interval      interval DEFAULT '100 ms',
    workers               integer DEFAULT 1,
    kafka_options         jsonb DEFAULT '{}',
    start                 boolean DEFAULT true,
    columns               jsonb DEFAULT NULL,
    key_format            text DEFAULT 'none',
    delete_on_tombstone   boolean DEFAULT false,
    schema_version_field  text DEFAULT NULL,
    schema_versions       jsonb DEFAULT NULL,
    event_id              text DEFAULT NULL,
    event_id_retention    interval DEFAULT '7 days',
    bronze                text DEFAULT NULL,
    ending_offsets        text DEFAULT NULL,
    dead_letter_topic     text DEFAULT NULL)
RETURNS bigint
AS 'MODULE_PATHNAME', 'kafka_sink_api_call'
LANGUAGE C VOLATILE;
REVOKE ALL ON FUNCTION kafka_sink.create_pipeline(text, text, text, text[], text, jsonb, text[], text, text, regprocedure, text, boolean, bigint, bigint, interval, integer, jsonb, boolean, jsonb, text, boolean, text, jsonb, text, interval, text, text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION kafka_sink.create_pipeline(text, text, text, text[], text, jsonb, text[], text, text, regprocedure, text, boolean, bigint, bigint, interval, integer, jsonb, boolean, jsonb, text, boolean, text, jsonb, text, interval, text, text, text) TO kafka_sink_admin;
COMMENT ON FUNCTION kafka_sink.create_pipeline(text, text, text, text[], text, jsonb, text[], text, text, regprocedure, text, boolean, bigint, bigint, interval, integer, jsonb, boolean, jsonb, text, boolean, text, jsonb, text, interval, text, text, text) IS
'Creates a pipeline owned by the calling role (a member of kafka_sink_admin that can log in) and, unless start => false, starts it. Returns its id.';

CREATE FUNCTION kafka_sink.alter_pipeline(
    name                  text,
    max_offsets_per_batch bigint DEFAULT NULL,
    max_batch_bytes       bigint DEFAULT NULL,
    trigger_interval      interval DEFAULT NULL,
    workers               integer DEFAULT NULL,
    kafka_options         jsonb DEFAULT NULL,
    starting_offsets      text DEFAULT NULL,
    fail_on_data_loss     boolean DEFAULT NULL,
    bootstrap_servers     text DEFAULT NULL,
    dead_letter_topic     text DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'kafka_sink_api_call'
LANGUAGE C VOLATILE;
REVOKE ALL ON FUNCTION kafka_sink.alter_pipeline(text, bigint, bigint, interval, integer, jsonb, text, boolean, text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION kafka_sink.alter_pipeline(text, bigint, bigint, interval, integer, jsonb, text, boolean, text, text) TO kafka_sink_admin;
COMMENT ON FUNCTION kafka_sink.alter_pipeline(text, bigint, bigint, interval, integer, jsonb, text, boolean, text, text) IS
'Changes a pipeline''s tunables, options, bootstrap servers, starting offsets or dead-letter topic ('''' removes it); its workers restart with the new definition. A kafka_options key with a JSON null removes that option.';

-- the view shows the dead-letter topic (a new last column)
CREATE OR REPLACE VIEW kafka_sink.pipelines WITH (security_invoker = true) AS
SELECT p.id, p.name, p.owner::regrole AS owner, p.state, p.bootstrap_servers,
       p.subscribe, p.subscribe_pattern, p.assign, p.target, p.key_columns,
       p.order_column, p.mode, p.batch_function, p.starting_offsets,
       p.fail_on_data_loss, p.max_offsets_per_batch, p.max_batch_bytes,
       p.trigger_interval, p.workers, p.columns, p.key_format, p.delete_on_tombstone,
       p.schema_version_field, p.schema_versions, p.event_id, p.event_id_retention, p.bronze,
       p.ending_offsets,
       p.kafka_options || coalesce((SELECT jsonb_object_agg(s.name, '********')
                                      FROM kafka_sink.secrets s WHERE s.pipeline_id = p.id), '{}')
           AS kafka_options,
       p.last_batch_id, p.created_at, p.updated_at,
       p.dead_letter_topic
  FROM kafka_sink.pipeline_definitions p;
-- ---- end of dead-letter topic ----
