-- kafka_sink.alter_pipeline: its SQL body and its C entry point.  A NULL
-- argument leaves that setting as it is; the limits are checked as the
-- pipeline will have them.  A new parameter: as for create_pipeline
-- (51_create_pipeline.sql).

CREATE OR REPLACE FUNCTION kafka_sink._api_alter_pipeline(
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
    max_trigger_delay     interval DEFAULT NULL,
    dead_letter_topic     text DEFAULT NULL,
    value_format          text DEFAULT NULL,
    key_format            text DEFAULT NULL,
    value_schema          text DEFAULT NULL,
    schema_registry       jsonb DEFAULT NULL,
    envelope              text DEFAULT NULL,
    on_truncate           text DEFAULT NULL,
    targets               jsonb DEFAULT NULL,
    create_targets        boolean DEFAULT NULL,
    evolve                text DEFAULT NULL,
    unavailable_value_placeholder text DEFAULT NULL,
    filter                text DEFAULT NULL,
    computed              jsonb DEFAULT NULL,
    delete_mode           text DEFAULT NULL,
    write_mode            text DEFAULT NULL)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    p kafka_sink.pipeline_definitions;
    k text;
    new_order_column text;
    -- '' removes the filter, '{}' the computed columns; NULL leaves them
    new_filter text;
    new_computed jsonb;
    -- delete_mode and write_mode as the pipeline will have them
    new_delete_mode text;
    new_write_mode text;
    routed boolean;
BEGIN
    PERFORM kafka_sink._require_admin();
    p := kafka_sink._get_pipeline(name, true);
    -- the limits as the pipeline will have them (a new value, or the current one)
    PERFORM kafka_sink._check_limits(coalesce(_api_alter_pipeline.max_offsets_per_batch, p.max_offsets_per_batch),
                                     coalesce(_api_alter_pipeline.max_batch_bytes, p.max_batch_bytes),
                                     coalesce(_api_alter_pipeline.trigger_interval, p.trigger_interval),
                                     coalesce(_api_alter_pipeline.workers, p.workers),
                                     coalesce(_api_alter_pipeline.min_offsets_per_batch, p.min_offsets_per_batch),
                                     coalesce(_api_alter_pipeline.max_trigger_delay, p.max_trigger_delay));
    IF bootstrap_servers IS NOT NULL AND btrim(bootstrap_servers) = '' THEN
        RAISE EXCEPTION 'bootstrap_servers cannot be empty'
            USING ERRCODE = 'invalid_parameter_value', HINT = 'Pass bootstrap_servers => ''localhost:9092''.';
    END IF;
    PERFORM kafka_sink._check_bootstrap_servers(bootstrap_servers);
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
        -- a key with a JSON null value removes the option; a key given
        -- anew replaces the old value, a literal or a reference, whichever it was
        FOR k IN SELECT key FROM jsonb_each(kafka_options) LOOP
            DELETE FROM kafka_sink.secrets s WHERE s.pipeline_id = p.id AND s.name = k;
            p.kafka_options := p.kafka_options - k;
        END LOOP;
        p.kafka_options := p.kafka_options ||
            kafka_sink._split_secrets(p.id, jsonb_strip_nulls(kafka_options));
    END IF;

    -- routing: targets => '{}' removes the map (the pipeline keeps its target);
    -- checked again when the value format changes (value fields need json)
    IF num_nonnulls(targets, create_targets, evolve, value_format) > 0 THEN
        IF targets = '{}' THEN
            p.targets := NULL;
        ELSIF targets IS NOT NULL THEN
            p.targets := targets;
        END IF;
        p.create_targets := coalesce(_api_alter_pipeline.create_targets, p.create_targets);
        p.evolve := coalesce(_api_alter_pipeline.evolve, p.evolve);
        IF p.target IS NULL AND p.target_template IS NULL AND p.targets IS NULL AND p.bronze IS NULL THEN
            RAISE EXCEPTION 'pipeline "%" would have no target', name
                USING ERRCODE = 'invalid_parameter_value',
                      HINT = 'A pipeline without a target or a target template keeps a non-empty targets map.';
        END IF;
        IF p.target_template IS NOT NULL OR p.targets IS NOT NULL OR p.create_targets OR p.evolve <> 'none' THEN
            PERFORM kafka_sink._check_routing(p.target_template, p.targets, p.create_targets, p.evolve,
                                              p.mode, coalesce(_api_alter_pipeline.value_format, p.value_format));
        END IF;
    END IF;

    IF num_nonnulls(value_format, key_format, value_schema, schema_registry) > 0 THEN
        PERFORM kafka_sink._alter_formats(p, value_format, key_format, value_schema, schema_registry);
    END IF;

    -- envelope and on_truncate as the pipeline will have them, with its
    -- (possibly just changed) value format
    new_order_column := p.order_column;
    -- routed: a template or a targets map, as the pipeline will have them
    routed := p.target_template IS NOT NULL OR p.targets IS NOT NULL;
    IF num_nonnulls(envelope, on_truncate) > 0 THEN
        IF p.target IS NULL AND NOT routed THEN
            RAISE EXCEPTION 'a bronze-only pipeline takes no decoding options'
                USING ERRCODE = 'invalid_parameter_value',
                      HINT = 'Pass a target to decode messages; a bronze-only pipeline only lands them raw.';
        END IF;
        -- a routed pipeline without a target of its own: each table is
        -- checked where it is used, as at create (_check_envelope, route.c)
        new_order_column := kafka_sink._check_envelope(
            coalesce(_api_alter_pipeline.envelope, p.envelope),
            coalesce(_api_alter_pipeline.on_truncate,
                     CASE WHEN _api_alter_pipeline.envelope = 'plain' THEN 'apply' ELSE p.on_truncate END),
            p.target, p.order_column, p.mode,
            (SELECT x.value_format FROM kafka_sink.pipeline_definitions x WHERE x.id = p.id));
        -- back to plain: the source position was the change events' order;
        -- plain messages carry none, and a NULL order value is the lowest,
        -- so keeping it would make every later upsert of a key stale
        IF _api_alter_pipeline.envelope = 'plain' AND p.envelope = 'debezium'
           AND new_order_column = '_kafka_source_position' THEN
            new_order_column := NULL;
        END IF;
        IF p.target IS NOT NULL THEN
            PERFORM kafka_sink._check_target(p.target, p.key_columns, new_order_column, p.mode);
        END IF;
    END IF;
    IF routed AND p.mode = 'history' AND coalesce(_api_alter_pipeline.envelope, p.envelope) IS DISTINCT FROM 'debezium' THEN
        RAISE EXCEPTION 'a routed history pipeline needs envelope debezium'
            USING ERRCODE = 'feature_not_supported',
                  DETAIL = 'Routed history tables take their versions from the change events'' source positions (_valid_from numeric).',
                  HINT = 'Pass envelope => ''debezium'', or create one history pipeline per target table.';
    END IF;

    -- delete_mode and write_mode: the checks of create_pipeline, against the
    -- pipeline as it will be (its envelope, its routing, its target's
    -- columns and privileges now); checked again whenever one of those changes
    new_delete_mode := coalesce(_api_alter_pipeline.delete_mode, p.delete_mode);
    new_write_mode := coalesce(_api_alter_pipeline.write_mode, p.write_mode);
    IF num_nonnulls(_api_alter_pipeline.delete_mode, _api_alter_pipeline.write_mode, envelope, targets) > 0 THEN
        PERFORM kafka_sink._check_delete_mode(new_delete_mode, p.mode, p.target, routed,
                                              coalesce(_api_alter_pipeline.envelope, p.envelope),
                                              p.delete_on_tombstone);
        IF routed AND new_delete_mode = 'soft' THEN
            -- the mark columns of each routed table that exists now
            PERFORM kafka_sink._check_delete_mode(new_delete_mode, p.mode, r, false,
                                                  coalesce(_api_alter_pipeline.envelope, p.envelope),
                                                  p.delete_on_tombstone)
               FROM kafka_sink._routed_tables(p.target_template, p.targets, p.subscribe) r;
        END IF;
        PERFORM kafka_sink._check_write_mode(new_write_mode, p.mode, routed,
                                             coalesce(_api_alter_pipeline.envelope, p.envelope),
                                             p.delete_on_tombstone, new_delete_mode);
        IF num_nonnulls(_api_alter_pipeline.delete_mode, _api_alter_pipeline.write_mode) > 0
           AND p.target IS NOT NULL THEN
            -- the privileges the new mode writes with
            PERFORM kafka_sink._check_target(p.target, p.key_columns, new_order_column, p.mode);
        END IF;
    END IF;

    IF nullif(unavailable_value_placeholder, '') IS NOT NULL THEN
        PERFORM kafka_sink._check_unavailable_placeholder(unavailable_value_placeholder,
                                                          coalesce(_api_alter_pipeline.envelope, p.envelope));
    END IF;

    new_filter := CASE WHEN _api_alter_pipeline.filter IS NULL THEN p.filter
                       ELSE nullif(_api_alter_pipeline.filter, '') END;
    new_computed := CASE WHEN _api_alter_pipeline.computed IS NULL THEN p.computed
                         WHEN _api_alter_pipeline.computed = '{}' THEN NULL
                         ELSE _api_alter_pipeline.computed END;
    IF (num_nonnulls(_api_alter_pipeline.filter, _api_alter_pipeline.computed) > 0 OR targets IS NOT NULL)
       AND num_nonnulls(new_filter, new_computed) > 0 THEN
        IF p.target IS NULL AND NOT routed THEN
            RAISE EXCEPTION 'filter and computed need a target'
                USING ERRCODE = 'feature_not_supported',
                      HINT = 'A bronze-only pipeline decodes nothing: pass a target (or a routing) to transform messages.';
        END IF;
        -- routed: the text, and each routed table that exists now (as at create)
        PERFORM kafka_sink._check_transform(p.target, p.mode, p.key_columns, new_order_column,
                                            new_filter, new_computed);
        IF routed THEN
            PERFORM kafka_sink._check_transform(r, p.mode, p.key_columns, new_order_column,
                                                new_filter, new_computed)
               FROM kafka_sink._routed_tables(p.target_template, p.targets, p.subscribe) r;
        END IF;
    END IF;

    UPDATE kafka_sink.pipeline_definitions x SET
        envelope = coalesce(_api_alter_pipeline.envelope, x.envelope),
        on_truncate = coalesce(_api_alter_pipeline.on_truncate,
                               CASE WHEN _api_alter_pipeline.envelope = 'plain' THEN 'apply' ELSE x.on_truncate END),
        order_column = new_order_column,
        max_offsets_per_batch = coalesce(_api_alter_pipeline.max_offsets_per_batch, x.max_offsets_per_batch),
        max_batch_bytes = coalesce(_api_alter_pipeline.max_batch_bytes, x.max_batch_bytes),
        trigger_interval = coalesce(_api_alter_pipeline.trigger_interval, x.trigger_interval),
        workers = coalesce(_api_alter_pipeline.workers, x.workers),
        kafka_options = p.kafka_options,
        starting_offsets = coalesce(_api_alter_pipeline.starting_offsets, x.starting_offsets),
        fail_on_data_loss = coalesce(_api_alter_pipeline.fail_on_data_loss, x.fail_on_data_loss),
        bootstrap_servers = coalesce(_api_alter_pipeline.bootstrap_servers, x.bootstrap_servers),
        min_offsets_per_batch = coalesce(_api_alter_pipeline.min_offsets_per_batch, x.min_offsets_per_batch),
        max_trigger_delay = coalesce(_api_alter_pipeline.max_trigger_delay, x.max_trigger_delay),
        dead_letter_topic = CASE WHEN _api_alter_pipeline.dead_letter_topic IS NULL THEN x.dead_letter_topic
                                 ELSE nullif(_api_alter_pipeline.dead_letter_topic, '') END,
        targets = p.targets,
        create_targets = p.create_targets,
        evolve = p.evolve,
        -- '' removes the placeholder (NULL leaves it as it is)
        unavailable_value_placeholder = CASE WHEN _api_alter_pipeline.unavailable_value_placeholder IS NULL
                                             THEN x.unavailable_value_placeholder
                                             ELSE nullif(_api_alter_pipeline.unavailable_value_placeholder, '') END,
        filter = new_filter,
        computed = new_computed,
        delete_mode = new_delete_mode,
        write_mode = new_write_mode,
        generation = x.generation + 1,
        updated_at = now()
    WHERE x.id = p.id;
    PERFORM kafka_sink._wake_launcher();
END
$$;

CREATE OR REPLACE FUNCTION kafka_sink.alter_pipeline(
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
    max_trigger_delay     interval DEFAULT NULL,
    dead_letter_topic     text DEFAULT NULL,
    value_format          text DEFAULT NULL,
    key_format            text DEFAULT NULL,
    value_schema          text DEFAULT NULL,
    schema_registry       jsonb DEFAULT NULL,
    envelope              text DEFAULT NULL,
    on_truncate           text DEFAULT NULL,
    targets               jsonb DEFAULT NULL,
    create_targets        boolean DEFAULT NULL,
    evolve                text DEFAULT NULL,
    unavailable_value_placeholder text DEFAULT NULL,
    filter                text DEFAULT NULL,
    computed              jsonb DEFAULT NULL,
    delete_mode           text DEFAULT NULL,
    write_mode            text DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'kafka_sink_api_call'
LANGUAGE C VOLATILE;
REVOKE ALL ON FUNCTION kafka_sink.alter_pipeline(text, bigint, bigint, interval, integer, jsonb, text, boolean, text, bigint, interval, text, text, text, text, jsonb, text, text, jsonb, boolean, text, text, text, jsonb, text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION kafka_sink.alter_pipeline(text, bigint, bigint, interval, integer, jsonb, text, boolean, text, bigint, interval, text, text, text, text, jsonb, text, text, jsonb, boolean, text, text, text, jsonb, text, text) TO kafka_sink_admin;
COMMENT ON FUNCTION kafka_sink.alter_pipeline(text, bigint, bigint, interval, integer, jsonb, text, boolean, text, bigint, interval, text, text, text, text, jsonb, text, text, jsonb, boolean, text, text, text, jsonb, text, text) IS
'Changes a pipeline''s tunables, options, bootstrap servers, starting offsets, dead-letter topic or formats; its workers restart with the new definition. A kafka_options key with a JSON null removes that option; schema_registry replaces the registry whole (a JSON null removes it). envelope and on_truncate: as for create_pipeline; switching to envelope debezium needs the source position column, switching back to plain drops the order column _kafka_source_position (plain messages carry no source position, and a NULL order value would make every later upsert stale); targets replaces the routing map (''{}'' removes it); unavailable_value_placeholder: as for create_pipeline, '''' removes it; filter and computed: as for create_pipeline, checked against the target as it is now (a routed pipeline: each routed table that exists now; '''' removes the filter, ''{}'' the computed columns); delete_mode and write_mode: as for create_pipeline, checked against the target as it is now (delete_mode soft: each routed table that exists now); a new definition applies from the next batch the workers start.';
