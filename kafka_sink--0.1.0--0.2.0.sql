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

-- the new reason is accepted as a filter
CREATE OR REPLACE FUNCTION kafka_sink.replay_quarantine(
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
       AND (replay_quarantine.reason IS NULL OR q.reason = replay_quarantine.reason)
       AND (replay_quarantine.topic IS NULL OR q.topic = replay_quarantine.topic)
       AND (replay_quarantine.partition IS NULL OR q.partition = replay_quarantine.partition)
       AND (from_offset IS NULL OR q.message_offset >= from_offset)
       AND (to_offset IS NULL OR q.message_offset <= to_offset)
       AND (replay_quarantine.ids IS NULL OR q.id = ANY (replay_quarantine.ids));
    IF chosen IS NULL THEN
        RETURN QUERY SELECT 0::bigint, 0::bigint;
        RETURN;
    END IF;
    RETURN QUERY SELECT * FROM kafka_sink._replay(p.id, chosen);
END
$$;

-- ---- lag tooling and batching knobs (issue 13) ----
-- Two things, one block (kept together to ease merging with the API rename):
--  * group.id in kafka_options is allowed now (src/kafka_options.c): it names
--    a consumer group the worker commits its checkpointed offsets to, after
--    each batch, for Kafka's own lag tools.  Nothing in SQL changes for it.
--  * min_offsets_per_batch and max_trigger_delay (Spark's minOffsetsPerTrigger
--    and maxTriggerDelay): a batch waits for at least min_offsets_per_batch
--    messages, unless max_trigger_delay has passed since the previous batch.
-- create_pipeline and alter_pipeline get the two new parameters at the end of
-- their argument lists: DROP + CREATE, privileges as in 0.1.0.
-- See "Lag tooling and batching knobs" in docs/design-notes.md.

ALTER TABLE kafka_sink.pipeline_definitions
    ADD COLUMN min_offsets_per_batch bigint NOT NULL DEFAULT 0,
    ADD COLUMN max_trigger_delay interval NOT NULL DEFAULT '15 min',
    ADD CONSTRAINT pipeline_definitions_min_offsets_per_batch_check
        CHECK (min_offsets_per_batch >= 0 AND min_offsets_per_batch <= max_offsets_per_batch),
    ADD CONSTRAINT pipeline_definitions_max_trigger_delay_check
        CHECK (max_trigger_delay >= '0' AND max_trigger_delay <= '1 day');
COMMENT ON COLUMN kafka_sink.pipeline_definitions.min_offsets_per_batch IS
    'A batch waits until it holds at least this many messages (0: no minimum), unless max_trigger_delay has passed since the previous batch';
COMMENT ON COLUMN kafka_sink.pipeline_definitions.max_trigger_delay IS
    'How long after the previous batch a batch may wait for min_offsets_per_batch messages; then it takes what there is';

CREATE FUNCTION kafka_sink._check_batching_knobs(min_offsets_per_batch bigint, max_trigger_delay interval,
                                                 max_offsets_per_batch bigint)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF min_offsets_per_batch IS NULL OR min_offsets_per_batch < 0 THEN
        RAISE EXCEPTION 'min_offsets_per_batch must be 0 or positive'
            USING ERRCODE = 'invalid_parameter_value', HINT = 'The default is 0: no minimum.';
    END IF;
    IF min_offsets_per_batch > max_offsets_per_batch THEN
        RAISE EXCEPTION 'min_offsets_per_batch (%) cannot exceed max_offsets_per_batch (%)',
                        min_offsets_per_batch, max_offsets_per_batch
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'A batch closes when it holds max_offsets_per_batch messages; raise max_offsets_per_batch or lower min_offsets_per_batch.';
    END IF;
    IF max_trigger_delay IS NULL OR max_trigger_delay < '0' OR max_trigger_delay > '1 day' THEN
        RAISE EXCEPTION 'max_trigger_delay must be between 0 and 1 day'
            USING ERRCODE = 'invalid_parameter_value', HINT = 'The default is 15 min.';
    END IF;
END
$$;
REVOKE ALL ON FUNCTION kafka_sink._check_batching_knobs(bigint, interval, bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION kafka_sink._check_batching_knobs(bigint, interval, bigint) TO kafka_sink_admin;
COMMENT ON FUNCTION kafka_sink._check_batching_knobs(bigint, interval, bigint) IS
    'Checks min_offsets_per_batch and max_trigger_delay for create_pipeline and alter_pipeline';

DROP FUNCTION kafka_sink.create_pipeline(text, text, text, text[], text, jsonb, text[], text, text,
    regprocedure, text, boolean, bigint, bigint, interval, integer, jsonb, boolean, jsonb, text,
    boolean, text, jsonb, text, interval, text, text);
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
    min_offsets_per_batch bigint DEFAULT 0,
    max_trigger_delay     interval DEFAULT '15 min')
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
    IF EXISTS (SELECT 1 FROM kafka_sink.pipeline_definitions p WHERE p.name = create_pipeline.name) THEN
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
    -- batching knobs (lag tooling and batching knobs)
    PERFORM kafka_sink._check_batching_knobs(min_offsets_per_batch, max_trigger_delay, max_offsets_per_batch);
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
         schema_version_field, schema_versions, event_id, event_id_retention, bronze, ending_offsets,
         min_offsets_per_batch, max_trigger_delay)
    VALUES
        (name, (SELECT oid FROM pg_roles WHERE rolname = current_user)::regrole,
         CASE WHEN start THEN 'running' ELSE 'stopped' END,
         bootstrap_servers, subscribe, subscribe_pattern, assign,
         target_oid, key_columns, order_column, mode, batch_function, starting_offsets,
         fail_on_data_loss, max_offsets_per_batch, max_batch_bytes, trigger_interval,
         workers, '{}', columns, key_format, delete_on_tombstone,
         schema_version_field, schema_versions, event_id, event_id_retention, bronze_oid, ending_offsets,
         min_offsets_per_batch, max_trigger_delay)
    RETURNING p.id INTO new_id;

    plain_options := kafka_sink._split_secrets(new_id, kafka_options);
    UPDATE kafka_sink.pipeline_definitions p SET kafka_options = plain_options WHERE p.id = new_id;
    PERFORM kafka_sink._wake_launcher();
    RETURN new_id;
END
$$;

REVOKE ALL ON FUNCTION kafka_sink.create_pipeline(text, text, text, text[], text, jsonb, text[], text, text,
    regprocedure, text, boolean, bigint, bigint, interval, integer, jsonb, boolean, jsonb, text,
    boolean, text, jsonb, text, interval, text, text, bigint, interval) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION kafka_sink.create_pipeline(text, text, text, text[], text, jsonb, text[], text, text,
    regprocedure, text, boolean, bigint, bigint, interval, integer, jsonb, boolean, jsonb, text,
    boolean, text, jsonb, text, interval, text, text, bigint, interval) TO kafka_sink_admin;
COMMENT ON FUNCTION kafka_sink.create_pipeline(text, text, text, text[], text, jsonb, text[], text, text,
    regprocedure, text, boolean, bigint, bigint, interval, integer, jsonb, boolean, jsonb, text,
    boolean, text, jsonb, text, interval, text, text, bigint, interval) IS
    'Creates a pipeline from Kafka topics into a table; returns its id';

DROP FUNCTION kafka_sink.alter_pipeline(text, bigint, bigint, interval, integer, jsonb, text, boolean, text);
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
    min_offsets_per_batch bigint DEFAULT NULL,
    max_trigger_delay     interval DEFAULT NULL)
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
    -- batching knobs (lag tooling and batching knobs): checked as they will be
    PERFORM kafka_sink._check_batching_knobs(coalesce(alter_pipeline.min_offsets_per_batch, p.min_offsets_per_batch),
                                             coalesce(alter_pipeline.max_trigger_delay, p.max_trigger_delay),
                                             coalesce(alter_pipeline.max_offsets_per_batch, p.max_offsets_per_batch));
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
        max_offsets_per_batch = coalesce(alter_pipeline.max_offsets_per_batch, x.max_offsets_per_batch),
        max_batch_bytes = coalesce(alter_pipeline.max_batch_bytes, x.max_batch_bytes),
        trigger_interval = coalesce(alter_pipeline.trigger_interval, x.trigger_interval),
        workers = coalesce(alter_pipeline.workers, x.workers),
        kafka_options = p.kafka_options,
        starting_offsets = coalesce(alter_pipeline.starting_offsets, x.starting_offsets),
        fail_on_data_loss = coalesce(alter_pipeline.fail_on_data_loss, x.fail_on_data_loss),
        bootstrap_servers = coalesce(alter_pipeline.bootstrap_servers, x.bootstrap_servers),
        min_offsets_per_batch = coalesce(alter_pipeline.min_offsets_per_batch, x.min_offsets_per_batch),
        max_trigger_delay = coalesce(alter_pipeline.max_trigger_delay, x.max_trigger_delay),
        generation = x.generation + 1,
        updated_at = now()
    WHERE x.id = p.id;
    PERFORM kafka_sink._wake_launcher();
END
$$;

REVOKE ALL ON FUNCTION kafka_sink.alter_pipeline(text, bigint, bigint, interval, integer, jsonb, text, boolean,
    text, bigint, interval) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION kafka_sink.alter_pipeline(text, bigint, bigint, interval, integer, jsonb, text, boolean,
    text, bigint, interval) TO kafka_sink_admin;
COMMENT ON FUNCTION kafka_sink.alter_pipeline(text, bigint, bigint, interval, integer, jsonb, text, boolean,
    text, bigint, interval) IS
    'Changes a pipeline''s settings (NULL keeps one); its workers restart on the new definition';

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
       p.min_offsets_per_batch, p.max_trigger_delay
  FROM kafka_sink.pipeline_definitions p;

-- ---- end of lag tooling and batching knobs ----
