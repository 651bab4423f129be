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

-- ---- prometheus: numbers for the monitoring role ----
-- The views are security_invoker and the catalog has row level security: a
-- role sees the pipelines of the roles it is a member of, so pg_monitor sees
-- none, and a kafka_sink_admin member only its own (being made a member of
-- every owner would also give it their write rights).  These functions are
-- the monitoring surface instead: SECURITY DEFINER (run as the extension's
-- owner, a superuser, so every pipeline is seen), built on the views so the
-- numbers are the views' numbers, and returning only names, states, reason
-- codes and numbers: never options, secrets, error or detail text, message
-- contents or target rows.  EXECUTE goes to pg_monitor, the role an exporter
-- is usually given, and not to kafka_sink_admin (whose members must not see
-- the other tenants' pipelines).  contrib/prometheus/kafka_sink_queries.yaml
-- turns them into metrics for prometheus-postgres-exporter.
GRANT USAGE ON SCHEMA kafka_sink TO pg_monitor;

CREATE FUNCTION kafka_sink.metrics_pipelines()
RETURNS TABLE (pipeline text, state text, workers integer,
               lag_messages bigint, lag_bytes bigint,
               input_rows_per_second float8, processed_rows_per_second float8,
               last_batch_duration_seconds float8,
               last_commit_timestamp_seconds float8, seconds_since_last_commit float8,
               batches bigint, last_error_timestamp_seconds float8)
LANGUAGE sql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
SELECT s.name, s.state, coalesce(s.workers, 0),
       l.lag_messages, s.bytes_behind_estimate::bigint,
       coalesce(s.input_rows_per_second, 0)::float8,
       coalesce(s.processed_rows_per_second, 0)::float8,
       extract(epoch FROM s.last_batch_duration)::float8,
       extract(epoch FROM s.last_commit_at)::float8,
       extract(epoch FROM clock_timestamp() - s.last_commit_at)::float8,
       s.last_batch_id,
       extract(epoch FROM s.last_error_at)::float8
  FROM kafka_sink.status s
  LEFT JOIN LATERAL (SELECT sum(g.lag_messages)::bigint AS lag_messages
                       FROM kafka_sink.progress g WHERE g.pipeline = s.name) l ON true
$$;
COMMENT ON FUNCTION kafka_sink.metrics_pipelines() IS
'Per pipeline numbers of kafka_sink.status for monitoring (every pipeline, no text but the name and state); EXECUTE is granted to pg_monitor. lag_messages is the sum of kafka_sink.progress.lag_messages (which reads 0 while no worker has seen the watermarks; lag_bytes is NULL then); batches is last_batch_id, a counter that survives the pruning of kafka_sink.batches.';

CREATE FUNCTION kafka_sink.metrics_partitions()
RETURNS TABLE (pipeline text, topic text, partition integer,
               committed_offset bigint, log_start_offset bigint, high_watermark bigint,
               lag_messages bigint, lag_bytes bigint, messages_per_second float8)
LANGUAGE sql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
SELECT g.pipeline, g.topic, g.partition, g.committed_offset, g.log_start_offset,
       g.high_watermark, g.lag_messages, g.lag_bytes_estimate, g.messages_per_second::float8
  FROM kafka_sink.progress g
$$;
COMMENT ON FUNCTION kafka_sink.metrics_partitions() IS
'Per partition numbers of kafka_sink.progress for monitoring (every pipeline); EXECUTE is granted to pg_monitor. Watermarks, lag_bytes and the rate are NULL while no worker has seen the watermarks (lag_messages then reads 0, as in the view).';

CREATE FUNCTION kafka_sink.metrics_quarantine()
RETURNS TABLE (pipeline text, reason text, messages bigint, pending bigint)
LANGUAGE sql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
SELECT p.name, q.reason, count(*), count(*) FILTER (WHERE q.replayed_at IS NULL)
  FROM kafka_sink.quarantine q
  JOIN kafka_sink.pipeline_definitions p ON p.id = q.pipeline_id
 GROUP BY p.name, q.reason
$$;
COMMENT ON FUNCTION kafka_sink.metrics_quarantine() IS
'Quarantine rows held per pipeline and reason (all, and not yet replayed) for monitoring; no message contents or detail. EXECUTE is granted to pg_monitor.';

CREATE FUNCTION kafka_sink.metrics_errors()
RETURNS TABLE (pipeline text, kind text, recorded bigint, last_timestamp_seconds float8)
LANGUAGE sql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
SELECT p.name, e.kind, count(*), extract(epoch FROM max(e.occurred_at))::float8
  FROM kafka_sink.errors e
  JOIN kafka_sink.pipeline_definitions p ON p.id = e.pipeline_id
 GROUP BY p.name, e.kind
$$;
COMMENT ON FUNCTION kafka_sink.metrics_errors() IS
'Errors held in kafka_sink.errors (the last 100 of each pipeline) per pipeline and kind, and when the last one occurred; no message text. EXECUTE is granted to pg_monitor.';

CREATE FUNCTION kafka_sink.metrics_outbox()
RETURNS TABLE (pending bigint, oldest_pending_age_seconds float8,
               delivered_per_second float8, relay_running integer)
LANGUAGE sql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
SELECT o.pending, coalesce(extract(epoch FROM o.oldest_pending_age), 0)::float8,
       o.delivered_per_second::float8, (o.relay_pid IS NOT NULL)::integer
  FROM kafka_sink.outbox_status o
$$;
COMMENT ON FUNCTION kafka_sink.metrics_outbox() IS
'The outbox relay''s numbers of kafka_sink.outbox_status for monitoring (every role''s messages; no error text, no servers). EXECUTE is granted to pg_monitor.';

REVOKE ALL ON FUNCTION kafka_sink.metrics_pipelines(), kafka_sink.metrics_partitions(),
    kafka_sink.metrics_quarantine(), kafka_sink.metrics_errors(), kafka_sink.metrics_outbox()
    FROM PUBLIC;
GRANT EXECUTE ON FUNCTION kafka_sink.metrics_pipelines(), kafka_sink.metrics_partitions(),
    kafka_sink.metrics_quarantine(), kafka_sink.metrics_errors(), kafka_sink.metrics_outbox()
    TO pg_monitor;

-- ---- formats: Avro and JSON Schema through a schema registry (issue 15) ----
--
-- value_format 'json' (as before), 'avro' (Confluent's wire format with a
-- schema_registry, or plain Avro binary with one inline value_schema) or
-- 'json_schema' (the wire format with a JSON payload); key_format 'avro'.
-- Schemas fetched from a registry are kept in kafka_sink.schemas.  The
-- registry password (basic.auth.user.info) is stored in kafka_sink.secrets
-- as 'schema_registry.basic.auth.user.info' and masked in the views.  See
-- "Formats and the schema registry" in docs/design-notes.md.

ALTER TABLE kafka_sink.pipeline_definitions
    ADD COLUMN value_format text NOT NULL DEFAULT 'json'
        CONSTRAINT pipeline_definitions_value_format_check CHECK (value_format IN ('json', 'avro', 'json_schema')),
    ADD COLUMN value_schema text,
    ADD COLUMN schema_registry jsonb
        CONSTRAINT pipeline_definitions_schema_registry_check CHECK (jsonb_typeof(schema_registry) = 'object'),
    ADD CONSTRAINT pipeline_definitions_registry_needed_check
        CHECK (value_format = 'json' OR schema_registry IS NOT NULL OR (value_format = 'avro' AND value_schema IS NOT NULL)),
    ADD CONSTRAINT pipeline_definitions_value_schema_check
        CHECK (value_schema IS NULL OR value_format = 'avro');
ALTER TABLE kafka_sink.pipeline_definitions DROP CONSTRAINT pipeline_definitions_key_format_check;
ALTER TABLE kafka_sink.pipeline_definitions ADD CONSTRAINT pipeline_definitions_key_format_check
    CHECK (key_format IN ('none', 'string', 'json', 'avro'));
ALTER TABLE kafka_sink.pipeline_definitions ADD CONSTRAINT pipeline_definitions_key_registry_check
    CHECK (key_format <> 'avro' OR schema_registry IS NOT NULL);
COMMENT ON COLUMN kafka_sink.pipeline_definitions.value_format IS
    'json, avro (Confluent wire format, or plain Avro with value_schema) or json_schema (Confluent wire format, JSON payload)';
COMMENT ON COLUMN kafka_sink.pipeline_definitions.value_schema IS
    'value_format avro without a registry: the one Avro writer schema of every value (plain Avro binary)';
COMMENT ON COLUMN kafka_sink.pipeline_definitions.schema_registry IS
    'The schema registry: url, timeout.ms, ssl.ca.location (basic.auth.user.info is kept in kafka_sink.secrets)';

ALTER TABLE kafka_sink.quarantine DROP CONSTRAINT quarantine_reason_check;
ALTER TABLE kafka_sink.quarantine ADD CONSTRAINT quarantine_reason_check CHECK (reason IN (
    'invalid_json', 'not_an_object', 'missing_required_field',
    'invalid_value', 'unknown_schema_version', 'null_key',
    'constraint_violation', 'value_too_large', 'rejected_by_target',
    'unknown_schema_id', 'not_wire_format', 'invalid_avro'));
COMMENT ON COLUMN kafka_sink.quarantine.reason IS
    'Why the message was not applied: invalid_json, not_an_object, missing_required_field, invalid_value, '
    'unknown_schema_version, null_key, constraint_violation (a constraint or data error of the row), '
    'value_too_large, rejected_by_target (a trigger, row level security policy or check option of the target '
    'rejected the row), unknown_schema_id (the registry does not know the frame''s schema id), not_wire_format '
    '(no magic byte 0 and schema id), invalid_avro (the payload does not decode with its schema)';

-- schemas: what registries answered for schema ids (an id never changes
-- its schema), so that restarts, replicas, replay_quarantine and lineage
-- decode without calling the registry again.  Readable and writable for
-- the registries of the pipelines a role sees.
CREATE TABLE kafka_sink.schemas (
    registry    text NOT NULL,
    id          integer NOT NULL,
    schema_type text NOT NULL DEFAULT 'AVRO',
    schema      text NOT NULL,
    fetched_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (registry, id)
);
COMMENT ON TABLE kafka_sink.schemas IS
    'Schemas fetched from schema registries by id (registry is the pipeline''s schema_registry url), kept so that decoding never needs the registry twice for one id.';
SELECT pg_catalog.pg_extension_config_dump('kafka_sink.schemas', '');
ALTER TABLE kafka_sink.schemas ENABLE ROW LEVEL SECURITY;
CREATE POLICY own_registries ON kafka_sink.schemas
    USING (EXISTS (SELECT 1 FROM kafka_sink.pipeline_definitions p WHERE p.schema_registry->>'url' = registry))
    WITH CHECK (EXISTS (SELECT 1 FROM kafka_sink.pipeline_definitions p WHERE p.schema_registry->>'url' = registry));
REVOKE ALL ON kafka_sink.schemas FROM PUBLIC;
GRANT SELECT, INSERT ON kafka_sink.schemas TO kafka_sink_admin;
CREATE TRIGGER catalog_guard BEFORE INSERT OR UPDATE OR DELETE OR TRUNCATE ON kafka_sink.schemas
    FOR EACH STATEMENT EXECUTE FUNCTION kafka_sink._catalog_guard();
ALTER TABLE kafka_sink.schemas ENABLE ALWAYS TRIGGER catalog_guard;

CREATE FUNCTION kafka_sink._check_registry_options(options jsonb)
RETURNS void
AS 'MODULE_PATHNAME', 'kafka_sink_check_registry_options'
LANGUAGE C;
CREATE FUNCTION kafka_sink._is_secret_registry_option(name text)
RETURNS boolean
AS 'MODULE_PATHNAME', 'kafka_sink_is_secret_registry_option'
LANGUAGE C IMMUTABLE STRICT;
CREATE FUNCTION kafka_sink._check_avro_schema(schema text)
RETURNS void
AS 'MODULE_PATHNAME', 'kafka_sink_check_avro_schema'
LANGUAGE C;

-- The formats of create_pipeline and alter_pipeline, checked together.
CREATE FUNCTION kafka_sink._check_formats(value_format text, key_format text, value_schema text,
                                          schema_registry jsonb)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF value_format IS NULL OR value_format NOT IN ('json', 'avro', 'json_schema') THEN
        RAISE EXCEPTION 'invalid value_format "%"', value_format
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'value_format is ''json'', ''avro'' or ''json_schema''.';
    END IF;
    IF key_format = 'avro' AND schema_registry IS NULL THEN
        RAISE EXCEPTION 'key_format avro needs a schema_registry'
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Avro keys are read in Confluent''s wire format: pass schema_registry => ''{"url": "http://registry:8081"}''.';
    END IF;
    IF value_schema IS NOT NULL AND value_format <> 'avro' THEN
        RAISE EXCEPTION 'value_schema needs value_format avro'
            USING ERRCODE = 'invalid_parameter_value', HINT = 'Pass value_format => ''avro'' as well.';
    END IF;
    IF value_schema IS NOT NULL AND schema_registry IS NOT NULL THEN
        RAISE EXCEPTION 'value_schema and schema_registry exclude each other'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = 'With a registry every value names its writer schema by id; value_schema is for plain Avro without a registry.',
                  HINT = 'Pass one of them.';
    END IF;
    IF value_format <> 'json' AND schema_registry IS NULL AND value_schema IS NULL THEN
        RAISE EXCEPTION 'value_format % needs a schema_registry%', value_format,
                CASE WHEN value_format = 'avro' THEN ' or a value_schema' ELSE '' END
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Pass schema_registry => ''{"url": "http://registry:8081"}''.';
    END IF;
    PERFORM kafka_sink._check_avro_schema(value_schema);
    PERFORM kafka_sink._check_registry_options(schema_registry);
END
$$;

-- Stores schema_registry: its secret in kafka_sink.secrets, the rest in
-- the definition.  NULL removes the registry.
CREATE FUNCTION kafka_sink._set_schema_registry(p_pipeline_id bigint, registry jsonb)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    k text;
    v text;
    plain jsonb := '{}';
BEGIN
    DELETE FROM kafka_sink.secrets s WHERE s.pipeline_id = p_pipeline_id AND s.name LIKE 'schema\_registry.%';
    IF registry IS NOT NULL THEN
        FOR k, v IN SELECT * FROM jsonb_each_text(jsonb_strip_nulls(registry)) LOOP
            IF kafka_sink._is_secret_registry_option(k) THEN
                INSERT INTO kafka_sink.secrets AS s (pipeline_id, name, value)
                VALUES (p_pipeline_id, 'schema_registry.' || k, v);
            ELSE
                plain := plain || jsonb_build_object(k, v);
            END IF;
        END LOOP;
    END IF;
    UPDATE kafka_sink.pipeline_definitions p
       SET schema_registry = CASE WHEN registry IS NULL THEN NULL ELSE plain END
     WHERE p.id = p_pipeline_id;
END
$$;

-- alter_pipeline's formats: a new schema_registry replaces the old one
-- whole, and a JSON null removes it.
CREATE FUNCTION kafka_sink._alter_formats(p kafka_sink.pipeline_definitions, new_value_format text,
                                          new_key_format text, new_value_schema text, new_registry jsonb)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    vf text := coalesce(new_value_format, p.value_format);
    kf text := coalesce(new_key_format, p.key_format);
    vs text := CASE WHEN new_value_schema = '' THEN NULL ELSE coalesce(new_value_schema, p.value_schema) END;
    reg jsonb;
    keep_registry boolean := new_registry IS NULL;
BEGIN
    IF new_key_format IS NOT NULL AND new_key_format <> p.key_format
       AND NOT (new_key_format IN ('json', 'avro') AND p.key_format IN ('json', 'avro')) THEN
        RAISE EXCEPTION 'key_format can only change between json and avro'
            USING ERRCODE = 'feature_not_supported',
                  HINT = 'Recreate the pipeline to read its keys another way.';
    END IF;
    IF new_registry IS NOT NULL AND jsonb_typeof(new_registry) = 'null' THEN
        reg := NULL;
    ELSIF new_registry IS NOT NULL THEN
        reg := new_registry;
    ELSIF p.schema_registry IS NOT NULL THEN
        -- the stored options with the stored secret, to check them together
        reg := p.schema_registry || coalesce((SELECT jsonb_object_agg(substr(s.name, 17), s.value)
                                                FROM kafka_sink.secrets s
                                               WHERE s.pipeline_id = p.id AND s.name LIKE 'schema\_registry.%'), '{}');
    END IF;
    IF new_value_format = 'json' AND new_value_schema IS NULL THEN
        vs := NULL;
    END IF;
    PERFORM kafka_sink._check_formats(vf, kf, vs, reg);
    -- the formats first: a registry removed for a value_schema must find it set
    UPDATE kafka_sink.pipeline_definitions x
       SET value_format = vf, key_format = kf, value_schema = vs
     WHERE x.id = p.id;
    IF NOT keep_registry THEN
        PERFORM kafka_sink._set_schema_registry(p.id, reg);
    END IF;
END
$$;
COMMENT ON FUNCTION kafka_sink._alter_formats(kafka_sink.pipeline_definitions, text, text, text, jsonb) IS
'alter_pipeline''s formats: schema_registry replaces the registry whole (a JSON null removes it), value_schema => '''' removes the inline schema.';

-- the wire format's schema id of a raw value (bronze, quarantine), or NULL
CREATE FUNCTION kafka_sink.wire_schema_id(value bytea)
RETURNS integer
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT CASE WHEN length(value) >= 5 AND get_byte(value, 0) = 0
                THEN (get_byte(value, 1)::bigint << 24 | get_byte(value, 2) << 16
                      | get_byte(value, 3) << 8 | get_byte(value, 4))::bit(32)::integer END
$$;
COMMENT ON FUNCTION kafka_sink.wire_schema_id(bytea) IS
'The schema id of a value in Confluent''s wire format (magic byte 0, the id big-endian), as kept raw in bronze tables and the quarantine; NULL when the value is not in that format.';

DO $$
DECLARE
    f regprocedure;
BEGIN
    FOREACH f IN ARRAY ARRAY['kafka_sink._check_registry_options(jsonb)', 'kafka_sink._is_secret_registry_option(text)',
                             'kafka_sink._check_avro_schema(text)',
                             'kafka_sink._check_formats(text, text, text, jsonb)',
                             'kafka_sink._set_schema_registry(bigint, jsonb)',
                             'kafka_sink._alter_formats(kafka_sink.pipeline_definitions, text, text, text, jsonb)',
                             'kafka_sink.wire_schema_id(bytea)']::regprocedure[]
    LOOP
        EXECUTE format('REVOKE ALL ON FUNCTION %s FROM PUBLIC', f);
        EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO kafka_sink_admin', f);
    END LOOP;
END
$$;
COMMENT ON FUNCTION kafka_sink._check_registry_options(jsonb) IS
'Checks schema_registry options against their allow-list (as _check_kafka_options does for Kafka options).';
COMMENT ON FUNCTION kafka_sink._is_secret_registry_option(text) IS
'Whether a schema_registry option is a secret, stored in kafka_sink.secrets and masked.';
COMMENT ON FUNCTION kafka_sink._check_avro_schema(text) IS
'Checks that value_schema is a valid Avro record schema, with the parser decoding uses.';
COMMENT ON FUNCTION kafka_sink._check_formats(text, text, text, jsonb) IS
'Checks value_format, key_format, value_schema and schema_registry together.';
COMMENT ON FUNCTION kafka_sink._set_schema_registry(bigint, jsonb) IS
'Stores a pipeline''s schema_registry: its secret in kafka_sink.secrets, the rest in the definition.';

-- create_pipeline and alter_pipeline with the format parameters
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
    value_format          text DEFAULT 'json',
    value_schema          text DEFAULT NULL,
    schema_registry       jsonb DEFAULT NULL)
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
        PERFORM kafka_sink._check_contract(target_oid, key_columns, columns,
                                           CASE key_format WHEN 'avro' THEN 'json' ELSE key_format END,
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
    PERFORM kafka_sink._check_formats(value_format, key_format, value_schema, schema_registry);

    INSERT INTO kafka_sink.pipeline_definitions AS p
        (name, owner, state, bootstrap_servers, subscribe, subscribe_pattern, assign,
         target, key_columns, order_column, mode, batch_function, starting_offsets,
         fail_on_data_loss, max_offsets_per_batch, max_batch_bytes, trigger_interval,
         workers, kafka_options, columns, key_format, delete_on_tombstone,
         schema_version_field, schema_versions, event_id, event_id_retention, bronze, ending_offsets,
         value_format, value_schema, schema_registry)
    VALUES
        (name, (SELECT oid FROM pg_roles WHERE rolname = current_user)::regrole,
         CASE WHEN start THEN 'running' ELSE 'stopped' END,
         bootstrap_servers, subscribe, subscribe_pattern, assign,
         target_oid, key_columns, order_column, mode, batch_function, starting_offsets,
         fail_on_data_loss, max_offsets_per_batch, max_batch_bytes, trigger_interval,
         workers, '{}', columns, key_format, delete_on_tombstone,
         schema_version_field, schema_versions, event_id, event_id_retention, bronze_oid, ending_offsets,
         value_format, value_schema, CASE WHEN schema_registry IS NOT NULL THEN '{}'::jsonb END)
    RETURNING p.id INTO new_id;

    plain_options := kafka_sink._split_secrets(new_id, kafka_options);
    UPDATE kafka_sink.pipeline_definitions p SET kafka_options = plain_options WHERE p.id = new_id;
    PERFORM kafka_sink._set_schema_registry(new_id, schema_registry);
    PERFORM kafka_sink._wake_launcher();
    RETURN new_id;
END
$$;

REVOKE ALL ON FUNCTION kafka_sink._api_create_pipeline(text, text, text, text[], text, jsonb, text[], text, text, regprocedure, text, boolean, bigint, bigint, interval, integer, jsonb, boolean, jsonb, text, boolean, text, jsonb, text, interval, text, text, text, text, jsonb) FROM PUBLIC, kafka_sink_admin;
COMMENT ON FUNCTION kafka_sink._api_create_pipeline(text, text, text, text[], text, jsonb, text[], text, text, regprocedure, text, boolean, bigint, bigint, interval, integer, jsonb, boolean, jsonb, text, boolean, text, jsonb, text, interval, text, text, text, text, jsonb) IS
'The SQL body of kafka_sink.create_pipeline, called only through it (with the catalog writes allowed).';

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
    value_format          text DEFAULT NULL,
    key_format            text DEFAULT NULL,
    value_schema          text DEFAULT NULL,
    schema_registry       jsonb DEFAULT NULL)
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

    IF num_nonnulls(value_format, key_format, value_schema, schema_registry) > 0 THEN
        PERFORM kafka_sink._alter_formats(p, value_format, key_format, value_schema, schema_registry);
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

REVOKE ALL ON FUNCTION kafka_sink._api_alter_pipeline(text, bigint, bigint, interval, integer, jsonb, text, boolean, text, text, text, text, jsonb) FROM PUBLIC, kafka_sink_admin;
COMMENT ON FUNCTION kafka_sink._api_alter_pipeline(text, bigint, bigint, interval, integer, jsonb, text, boolean, text, text, text, text, jsonb) IS
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
    value_format          text DEFAULT 'json',
    value_schema          text DEFAULT NULL,
    schema_registry       jsonb DEFAULT NULL)
RETURNS bigint
AS 'MODULE_PATHNAME', 'kafka_sink_api_call'
LANGUAGE C VOLATILE;
REVOKE ALL ON FUNCTION kafka_sink.create_pipeline(text, text, text, text[], text, jsonb, text[], text, text, regprocedure, text, boolean, bigint, bigint, interval, integer, jsonb, boolean, jsonb, text, boolean, text, jsonb, text, interval, text, text, text, text, jsonb) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION kafka_sink.create_pipeline(text, text, text, text[], text, jsonb, text[], text, text, regprocedure, text, boolean, bigint, bigint, interval, integer, jsonb, boolean, jsonb, text, boolean, text, jsonb, text, interval, text, text, text, text, jsonb) TO kafka_sink_admin;
COMMENT ON FUNCTION kafka_sink.create_pipeline(text, text, text, text[], text, jsonb, text[], text, text, regprocedure, text, boolean, bigint, bigint, interval, integer, jsonb, boolean, jsonb, text, boolean, text, jsonb, text, interval, text, text, text, text, jsonb) IS
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
    value_format          text DEFAULT NULL,
    key_format            text DEFAULT NULL,
    value_schema          text DEFAULT NULL,
    schema_registry       jsonb DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'kafka_sink_api_call'
LANGUAGE C VOLATILE;
REVOKE ALL ON FUNCTION kafka_sink.alter_pipeline(text, bigint, bigint, interval, integer, jsonb, text, boolean, text, text, text, text, jsonb) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION kafka_sink.alter_pipeline(text, bigint, bigint, interval, integer, jsonb, text, boolean, text, text, text, text, jsonb) TO kafka_sink_admin;
COMMENT ON FUNCTION kafka_sink.alter_pipeline(text, bigint, bigint, interval, integer, jsonb, text, boolean, text, text, text, text, jsonb) IS
'Changes a pipeline''s tunables, options, bootstrap servers, starting offsets or formats; its workers restart with the new definition. A kafka_options key with a JSON null removes that option; schema_registry replaces the registry whole (a JSON null removes it).';

-- the pipelines view: the formats, the registry with its secret masked;
-- kafka_options no longer lists the registry's secret
CREATE OR REPLACE VIEW kafka_sink.pipelines WITH (security_invoker = true) AS
SELECT p.id, p.name, p.owner::regrole AS owner, p.state, p.bootstrap_servers,
       p.subscribe, p.subscribe_pattern, p.assign, p.target, p.key_columns,
       p.order_column, p.mode, p.batch_function, p.starting_offsets,
       p.fail_on_data_loss, p.max_offsets_per_batch, p.max_batch_bytes,
       p.trigger_interval, p.workers, p.columns, p.key_format, p.delete_on_tombstone,
       p.schema_version_field, p.schema_versions, p.event_id, p.event_id_retention, p.bronze,
       p.ending_offsets,
       p.kafka_options || coalesce((SELECT jsonb_object_agg(s.name, '********')
                                      FROM kafka_sink.secrets s
                                     WHERE s.pipeline_id = p.id AND s.name NOT LIKE 'schema\_registry.%'), '{}')
           AS kafka_options,
       p.last_batch_id, p.created_at, p.updated_at,
       p.value_format, p.value_schema,
       p.schema_registry || coalesce((SELECT jsonb_object_agg(substr(s.name, 17), '********')
                                        FROM kafka_sink.secrets s
                                       WHERE s.pipeline_id = p.id AND s.name LIKE 'schema\_registry.%'), '{}')
           AS schema_registry
  FROM kafka_sink.pipeline_definitions p;

-- replay_quarantine knows the new reasons
CREATE OR REPLACE FUNCTION kafka_sink._api_replay_quarantine(
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
            'rejected_by_target', 'unknown_schema_id', 'not_wire_format', 'invalid_avro') THEN
        RAISE EXCEPTION 'unknown quarantine reason "%"', reason
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Reasons are invalid_json, not_an_object, missing_required_field, invalid_value, unknown_schema_version, null_key, constraint_violation, value_too_large, rejected_by_target, unknown_schema_id, not_wire_format and invalid_avro.';
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
