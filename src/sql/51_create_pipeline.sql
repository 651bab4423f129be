-- kafka_sink.create_pipeline: its SQL body and its C entry point.
--
-- A new parameter goes at the end of both argument lists (the body's and the
-- entry point's are the same), with its check (40_validators.sql), its
-- column in the INSERT (a new column of pipeline_definitions goes at the
-- end of the table in 10_tables.sql) and in the pipelines view
-- (60_observability.sql).  The upgrade script then drops and creates both
-- functions again (the signature changes); see kafka_sink--0.1.0--0.2.0.sql.

CREATE OR REPLACE FUNCTION kafka_sink._api_create_pipeline(
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
    max_trigger_delay     interval DEFAULT '15 min',
    dead_letter_topic     text DEFAULT NULL,
    value_format          text DEFAULT 'json',
    value_schema          text DEFAULT NULL,
    schema_registry       jsonb DEFAULT NULL,
    envelope              text DEFAULT 'plain',
    on_truncate           text DEFAULT 'apply',
    targets               jsonb DEFAULT NULL,
    create_targets        boolean DEFAULT false,
    evolve                text DEFAULT 'none',
    unavailable_value_placeholder text DEFAULT NULL,
    filter                text DEFAULT NULL,
    computed              jsonb DEFAULT NULL,
    delete_mode           text DEFAULT 'hard',
    write_mode            text DEFAULT 'upsert',
    track_history_columns text[] DEFAULT NULL)
RETURNS bigint
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    target_oid regclass;
    bronze_oid regclass;
    new_id bigint;
    plain_options jsonb;
    -- routing: a target with {placeholders} is a template, kept apart
    template text := CASE WHEN strpos(target, '{') > 0 THEN target END;
    routed boolean := coalesce(strpos(target, '{') > 0, false) OR targets IS NOT NULL;
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
    PERFORM kafka_sink._check_bootstrap_servers(bootstrap_servers);
    PERFORM kafka_sink._check_source(subscribe, subscribe_pattern, assign);

    IF mode IS NULL OR mode NOT IN ('merge', 'append', 'function', 'history') THEN
        RAISE EXCEPTION 'invalid mode "%"', mode
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'mode is one of ''merge'', ''append'', ''function'' or ''history''.';
    END IF;
    IF create_targets IS NULL OR evolve IS NULL THEN
        RAISE EXCEPTION 'create_targets and evolve cannot be null'
            USING ERRCODE = 'null_value_not_allowed',
                  HINT = 'Pass create_targets => false and evolve => ''none'' (the defaults).';
    END IF;
    IF routed OR create_targets OR evolve <> 'none' THEN
        PERFORM kafka_sink._check_routing(template, targets, create_targets, evolve, mode, value_format);
    END IF;
    IF routed AND mode = 'history' AND envelope IS DISTINCT FROM 'debezium' THEN
        RAISE EXCEPTION 'a routed history pipeline needs envelope debezium'
            USING ERRCODE = 'feature_not_supported',
                  DETAIL = 'Routed history tables take their versions from the change events'' source positions (_valid_from numeric).',
                  HINT = 'Pass envelope => ''debezium'', or create one history pipeline per target table.';
    END IF;
    IF template IS NOT NULL THEN
        target := NULL;         -- expanded per message by the worker (route.c)
    END IF;
    IF target IS NULL AND bronze IS NULL AND NOT routed THEN
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
        -- envelope debezium: the order column takes the source position
        order_column := kafka_sink._check_envelope(envelope, on_truncate, target_oid, order_column, mode,
                                                   value_format);
        key_columns := kafka_sink._check_target(target_oid, key_columns, order_column, mode);
        -- Avro and Protobuf keys decode to the same fields as JSON keys (format.h)
        PERFORM kafka_sink._check_contract(target_oid, key_columns, columns,
                                           CASE WHEN key_format IN ('avro', 'protobuf') THEN 'json' ELSE key_format END,
                                           delete_on_tombstone, schema_version_field,
                                           schema_versions, event_id, mode);
    ELSIF routed THEN
        -- each routed target is checked where it is used, as the worker
        -- opens it (kafka_sink._check_target, route.c); the options only
        -- need to be well-formed here
        order_column := kafka_sink._check_envelope(envelope, on_truncate, NULL, order_column, mode,
                                                   value_format);
        IF key_columns IS NOT NULL AND (cardinality(key_columns) = 0 OR array_position(key_columns, NULL) IS NOT NULL) THEN
            RAISE EXCEPTION 'key_columns must be a non-empty list of column names'
                USING ERRCODE = 'invalid_parameter_value',
                      HINT = 'Pass key_columns => ARRAY[''order_id''], or leave it out to key each target on its primary key.';
        END IF;
        -- the names of headers and Kafka's metadata, which no table changes
        PERFORM kafka_sink._check_field_path(coalesce(m.value->>'path', m.value #>> '{}'), format('column "%s"', m.key))
           FROM jsonb_each(CASE jsonb_typeof(columns) WHEN 'object' THEN columns ELSE '{}' END) m;
        PERFORM kafka_sink._check_field_path(event_id, 'event_id'),
                kafka_sink._check_field_path(schema_version_field, 'schema_version_field');
    ELSIF num_nonnulls(key_columns, order_column, columns, schema_version_field, event_id) > 0
          OR delete_on_tombstone OR key_format <> 'none' OR mode <> 'merge'
          OR envelope IS DISTINCT FROM 'plain' OR on_truncate IS DISTINCT FROM 'apply' THEN
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
    PERFORM kafka_sink._check_limits(max_offsets_per_batch, max_batch_bytes, trigger_interval, workers,
                                     min_offsets_per_batch, max_trigger_delay);
    IF fail_on_data_loss IS NULL OR start IS NULL THEN
        RAISE EXCEPTION 'fail_on_data_loss and start cannot be null'
            USING ERRCODE = 'null_value_not_allowed', HINT = 'Pass true or false.';
    END IF;
    IF kafka_options IS NULL THEN
        kafka_options := '{}';
    END IF;
    PERFORM kafka_sink._check_kafka_options(kafka_options);
    PERFORM kafka_sink._check_dead_letter_topic(dead_letter_topic, subscribe, subscribe_pattern, assign, target_oid);
    PERFORM kafka_sink._check_formats(value_format, key_format, value_schema, schema_registry);
    PERFORM kafka_sink._check_unavailable_placeholder(unavailable_value_placeholder, envelope);
    IF num_nonnulls(filter, computed) > 0 THEN
        IF target_oid IS NULL AND NOT routed THEN
            RAISE EXCEPTION 'filter and computed need a target'
                USING ERRCODE = 'feature_not_supported',
                      HINT = 'A bronze-only pipeline decodes nothing: pass a target (or a routing) to transform messages.';
        END IF;
        -- routed: the text now, each routed table that exists now, and each
        -- table again where the worker first uses it in a batch (route.c)
        PERFORM kafka_sink._check_transform(target_oid, mode, key_columns, order_column, filter, computed);
        IF routed THEN
            PERFORM kafka_sink._check_transform(r, mode, key_columns, order_column, filter, computed)
               FROM kafka_sink._routed_tables(template, targets, subscribe) r;
        END IF;
    END IF;
    PERFORM kafka_sink._check_delete_mode(delete_mode, mode, target_oid, routed, envelope, delete_on_tombstone);
    IF routed AND delete_mode = 'soft' THEN
        -- the mark columns of each routed table that exists now (the others
        -- where the worker first uses them)
        PERFORM kafka_sink._check_delete_mode(delete_mode, mode, r, false, envelope, delete_on_tombstone)
           FROM kafka_sink._routed_tables(template, targets, subscribe) r;
    END IF;
    PERFORM kafka_sink._check_write_mode(write_mode, mode, routed, envelope, delete_on_tombstone, delete_mode);
    PERFORM kafka_sink._check_track_history(track_history_columns, mode, target_oid, key_columns, order_column);

    INSERT INTO kafka_sink.pipeline_definitions AS p
        (name, owner, state, bootstrap_servers, subscribe, subscribe_pattern, assign,
         target, key_columns, order_column, mode, batch_function, starting_offsets,
         fail_on_data_loss, max_offsets_per_batch, max_batch_bytes, trigger_interval,
         workers, kafka_options, columns, key_format, delete_on_tombstone,
         schema_version_field, schema_versions, event_id, event_id_retention, bronze, ending_offsets,
         min_offsets_per_batch, max_trigger_delay, dead_letter_topic,
         value_format, value_schema, schema_registry, envelope, on_truncate,
         target_template, targets, create_targets, evolve, unavailable_value_placeholder,
         filter, computed, delete_mode, write_mode, track_history_columns)
    VALUES
        (name, (SELECT oid FROM pg_roles WHERE rolname = current_user)::regrole,
         CASE WHEN start THEN 'running' ELSE 'stopped' END,
         bootstrap_servers, subscribe, subscribe_pattern, assign,
         target_oid, key_columns, order_column, mode, batch_function, starting_offsets,
         fail_on_data_loss, max_offsets_per_batch, max_batch_bytes, trigger_interval,
         workers, '{}', columns, key_format, delete_on_tombstone,
         schema_version_field, schema_versions, event_id, event_id_retention, bronze_oid, ending_offsets,
         min_offsets_per_batch, max_trigger_delay, dead_letter_topic,
         -- the registry's options by _set_schema_registry below (its secret apart)
         value_format, value_schema, CASE WHEN schema_registry IS NOT NULL THEN '{}'::jsonb END,
         envelope, on_truncate, template, targets, create_targets, evolve, unavailable_value_placeholder,
         filter, computed, delete_mode, write_mode, track_history_columns)
    RETURNING p.id INTO new_id;

    plain_options := kafka_sink._split_secrets(new_id, kafka_options);
    UPDATE kafka_sink.pipeline_definitions p SET kafka_options = plain_options WHERE p.id = new_id;
    PERFORM kafka_sink._set_schema_registry(new_id, schema_registry);
    PERFORM kafka_sink._wake_launcher();
    RETURN new_id;
END
$$;

CREATE OR REPLACE FUNCTION kafka_sink.create_pipeline(
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
    max_trigger_delay     interval DEFAULT '15 min',
    dead_letter_topic     text DEFAULT NULL,
    value_format          text DEFAULT 'json',
    value_schema          text DEFAULT NULL,
    schema_registry       jsonb DEFAULT NULL,
    envelope              text DEFAULT 'plain',
    on_truncate           text DEFAULT 'apply',
    targets               jsonb DEFAULT NULL,
    create_targets        boolean DEFAULT false,
    evolve                text DEFAULT 'none',
    unavailable_value_placeholder text DEFAULT NULL,
    filter                text DEFAULT NULL,
    computed              jsonb DEFAULT NULL,
    delete_mode           text DEFAULT 'hard',
    write_mode            text DEFAULT 'upsert',
    track_history_columns text[] DEFAULT NULL)
RETURNS bigint
AS 'MODULE_PATHNAME', 'kafka_sink_api_call'
LANGUAGE C VOLATILE;
REVOKE ALL ON FUNCTION kafka_sink.create_pipeline(text, text, text, text[], text, jsonb, text[], text, text, regprocedure, text, boolean, bigint, bigint, interval, integer, jsonb, boolean, jsonb, text, boolean, text, jsonb, text, interval, text, text, bigint, interval, text, text, text, jsonb, text, text, jsonb, boolean, text, text, text, jsonb, text, text, text[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION kafka_sink.create_pipeline(text, text, text, text[], text, jsonb, text[], text, text, regprocedure, text, boolean, bigint, bigint, interval, integer, jsonb, boolean, jsonb, text, boolean, text, jsonb, text, interval, text, text, bigint, interval, text, text, text, jsonb, text, text, jsonb, boolean, text, text, text, jsonb, text, text, text[]) TO kafka_sink_admin;
COMMENT ON FUNCTION kafka_sink.create_pipeline(text, text, text, text[], text, jsonb, text[], text, text, regprocedure, text, boolean, bigint, bigint, interval, integer, jsonb, boolean, jsonb, text, boolean, text, jsonb, text, interval, text, text, bigint, interval, text, text, text, jsonb, text, text, jsonb, boolean, text, text, text, jsonb, text, text, text[]) IS
'Creates a pipeline owned by the calling role (a member of kafka_sink_admin that can log in) and, unless start => false, starts it. Returns its id. envelope => ''debezium'' reads Debezium change events (the target keeps each row''s source position in _kafka_source_position numeric, or order_column); on_truncate says what their truncates do: apply, ignore or fail; unavailable_value_placeholder is the connector''s unavailable.value.placeholder when it is not Debezium''s default. filter (a boolean SQL expression over the decoded row) and computed ({"column": "<SQL expression>"}) transform each decoded message before it is applied (docs/transform.md); on a routed pipeline they are checked against each routed table that exists now and by the worker against each table it opens. delete_mode => ''soft'' (mode merge) keeps a deleted row, marked in _deleted boolean and/or _deleted_at timestamptz (docs/soft-deletes.md). write_mode (mode merge): upsert (the default), insert_only (the first event of a key wins) or update_only (events for keys not in the target are skipped) (docs/write-modes.md). track_history_columns (mode history): the columns whose change starts a new version; a change to the others updates the version in effect (docs/history.md).';

