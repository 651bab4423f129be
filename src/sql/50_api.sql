-- kafka_sink: the writer API besides create_pipeline and alter_pipeline
-- (51_, 52_).  The trust boundary (docs/design/catalog.md, "The catalog
-- is written only through the API"): every public function that writes the
-- catalog is a C entry point, kafka_sink_api_call, that allows catalog
-- writes while it runs its SQL body kafka_sink._api_<name> (same
-- parameters).  The bodies run as the caller; only the extension owner may
-- call them directly (90_grants.sql revokes EXECUTE from PUBLIC and
-- kafka_sink_admin, and comments them).  To change an API function,
-- change its _api_ body; a new one is a body plus an entry point here.

-- Moves a pipeline from one of the states in "from" to "to", or explains
-- why it cannot; wakes the launcher at commit.
CREATE OR REPLACE FUNCTION kafka_sink._transition(name text, "from" text[], "to" text, hint text)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    p kafka_sink.pipeline_definitions;
BEGIN
    PERFORM kafka_sink._require_admin();
    p := kafka_sink._get_pipeline(name, true);
    IF p.state = "to" THEN
        RETURN;
    END IF;
    IF NOT p.state = ANY ("from") THEN
        RAISE EXCEPTION 'pipeline "%" is %, it cannot become %', name, p.state, "to"
            USING ERRCODE = 'object_not_in_prerequisite_state', HINT = hint;
    END IF;
    UPDATE kafka_sink.pipeline_definitions x SET state = "to", updated_at = now() WHERE x.id = p.id;
    PERFORM kafka_sink._wake_launcher();
END
$$;
COMMENT ON FUNCTION kafka_sink._transition(text, text[], text, text) IS
'Internal: moves a pipeline from one of the given states to another (start, stop, pause, resume), or explains why it cannot.';

CREATE OR REPLACE FUNCTION kafka_sink._api_start(name text)
RETURNS void
LANGUAGE sql
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT kafka_sink._transition(name, ARRAY['stopped', 'failed', 'finished', 'paused'], 'running',
                                  'A paused pipeline can also be resumed with kafka_sink.resume.')
$$;

CREATE OR REPLACE FUNCTION kafka_sink.start(name text)
RETURNS void
AS 'MODULE_PATHNAME', 'kafka_sink_api_call'
LANGUAGE C VOLATILE;
REVOKE ALL ON FUNCTION kafka_sink.start(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION kafka_sink.start(text) TO kafka_sink_admin;
COMMENT ON FUNCTION kafka_sink.start(text) IS
'Starts a stopped, failed, finished or paused pipeline from its checkpoint.';

CREATE OR REPLACE FUNCTION kafka_sink._api_stop(name text)
RETURNS void
LANGUAGE sql
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT kafka_sink._transition(name, ARRAY['running', 'paused', 'failed', 'finished'], 'stopped',
                                  'The pipeline is already stopped.')
$$;

CREATE OR REPLACE FUNCTION kafka_sink.stop(name text)
RETURNS void
AS 'MODULE_PATHNAME', 'kafka_sink_api_call'
LANGUAGE C VOLATILE;
REVOKE ALL ON FUNCTION kafka_sink.stop(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION kafka_sink.stop(text) TO kafka_sink_admin;
COMMENT ON FUNCTION kafka_sink.stop(text) IS
'Stops a pipeline''s workers; the checkpoint stays.';

-- pause keeps the workers and their assignment metadata, applies nothing,
-- and keeps the watermarks (and so the lag) up to date; stop ends the
-- workers.  Both keep the checkpoint; resume and start continue from it.
CREATE OR REPLACE FUNCTION kafka_sink._api_pause(name text)
RETURNS void
LANGUAGE sql
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT kafka_sink._transition(name, ARRAY['running'], 'paused', 'Only a running pipeline can be paused.')
$$;

CREATE OR REPLACE FUNCTION kafka_sink.pause(name text)
RETURNS void
AS 'MODULE_PATHNAME', 'kafka_sink_api_call'
LANGUAGE C VOLATILE;
REVOKE ALL ON FUNCTION kafka_sink.pause(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION kafka_sink.pause(text) TO kafka_sink_admin;
COMMENT ON FUNCTION kafka_sink.pause(text) IS
'Pauses a running pipeline: its workers stay, apply nothing, and keep the lag up to date.';

CREATE OR REPLACE FUNCTION kafka_sink._api_resume(name text)
RETURNS void
LANGUAGE sql
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT kafka_sink._transition(name, ARRAY['paused'], 'running',
                                  'Use kafka_sink.start for a stopped or failed pipeline.')
$$;

CREATE OR REPLACE FUNCTION kafka_sink.resume(name text)
RETURNS void
AS 'MODULE_PATHNAME', 'kafka_sink_api_call'
LANGUAGE C VOLATILE;
REVOKE ALL ON FUNCTION kafka_sink.resume(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION kafka_sink.resume(text) TO kafka_sink_admin;
COMMENT ON FUNCTION kafka_sink.resume(text) IS
'Resumes a paused pipeline from its checkpoint.';

CREATE OR REPLACE FUNCTION kafka_sink._api_drop_pipeline(name text, if_exists boolean DEFAULT false)
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

CREATE OR REPLACE FUNCTION kafka_sink.drop_pipeline(name text, if_exists boolean DEFAULT false)
RETURNS void
AS 'MODULE_PATHNAME', 'kafka_sink_api_call'
LANGUAGE C VOLATILE;
REVOKE ALL ON FUNCTION kafka_sink.drop_pipeline(text, boolean) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION kafka_sink.drop_pipeline(text, boolean) TO kafka_sink_admin;
COMMENT ON FUNCTION kafka_sink.drop_pipeline(text, boolean) IS
'Drops a pipeline and its catalog rows (checkpoint, batches and their filtered offsets, quarantine, errors); the target''s data stays.';

-- Moves the checkpoint of a stopped pipeline: to 'earliest', 'latest',
-- per-partition JSON ({"t": {"0": 42, "1": -2}}, partitions not named keep
-- their checkpoint) or a timestamp.  Every change is recorded in
-- kafka_sink.offset_resets.  Returns the partitions it moved.  Without a
-- temporary table: a temporary table named by the function is resolved in
-- the caller's pg_temp, where the caller could have put one with a trigger
-- or a rule of their own, run with the catalog writes allowed.  Every named
-- partition must be one the pipeline reads, and every offset within its log.
CREATE OR REPLACE FUNCTION kafka_sink._api_reset_offsets(pipeline text, "to" text)
RETURNS TABLE (topic text, partition integer, old_offset bigint, new_offset bigint)
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    p kafka_sink.pipeline_definitions;
    j jsonb;
    ts timestamptz;
    wm jsonb;
    moved jsonb;
    bad_topic text;
    bad_partition integer;
    bad_offset bigint;
    bad_low bigint;
    bad_high bigint;
BEGIN
    PERFORM kafka_sink._require_admin();
    p := kafka_sink._get_pipeline(pipeline, true);
    IF p.state IN ('running', 'paused') THEN
        RAISE EXCEPTION 'pipeline "%" is %', pipeline, p.state
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = 'Stop it first with kafka_sink.stop; offsets move only on a stopped pipeline.';
    END IF;
    PERFORM kafka_sink._check_offsets("to", 'reset_offsets');
    IF left("to", 1) = '{' THEN
        j := "to"::jsonb;
    ELSIF "to" NOT IN ('earliest', 'latest') THEN
        ts := "to"::timestamptz;
    END IF;
    -- the broker's watermarks, asked once
    SELECT coalesce(jsonb_agg(to_jsonb(w)), '[]') INTO wm FROM kafka_sink._watermarks(pipeline, ts) w;
    IF j IS NOT NULL THEN
        SELECT x.topic, x.partition INTO bad_topic, bad_partition
          FROM (SELECT jt.key AS topic, jp.key::int AS partition
                  FROM jsonb_each(j) jt, jsonb_each(jt.value) jp) x
         WHERE NOT EXISTS (SELECT 1 FROM jsonb_to_recordset(wm) AS w(topic text, partition integer)
                            WHERE w.topic = x.topic AND w.partition = x.partition)
         LIMIT 1;
        IF FOUND THEN
            RAISE EXCEPTION 'topic "%" partition % is not a partition of pipeline "%"', bad_topic, bad_partition, pipeline
                USING ERRCODE = 'invalid_parameter_value',
                      DETAIL = 'The topic or partition does not exist, or the pipeline does not read it.',
                      HINT = 'SELECT * FROM kafka_sink.progress lists the partitions the pipeline reads.';
        END IF;
        SELECT x.topic, x.partition, x.off, w.low, w.high
          INTO bad_topic, bad_partition, bad_offset, bad_low, bad_high
          FROM (SELECT jt.key AS topic, jp.key::int AS partition, (jp.value #>> '{}')::bigint AS off
                  FROM jsonb_each(j) jt, jsonb_each(jt.value) jp) x
          JOIN jsonb_to_recordset(wm) AS w(topic text, partition integer, low bigint, high bigint)
            ON w.topic = x.topic AND w.partition = x.partition
         WHERE x.off NOT IN (-1, -2) AND (x.off > w.high OR x.off < w.low)
         LIMIT 1;
        IF FOUND THEN
            RAISE EXCEPTION 'offset % is outside the log of topic "%" partition %', bad_offset, bad_topic, bad_partition
                USING ERRCODE = 'invalid_parameter_value',
                      DETAIL = format('The partition holds offsets %s to %s.', bad_low, bad_high),
                      HINT = 'Pass an offset within the log, or -2 (earliest) or -1 (latest).';
        END IF;
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
          FROM jsonb_to_recordset(wm) AS w(topic text, partition integer, low bigint, high bigint, at_offset bigint)
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

CREATE OR REPLACE FUNCTION kafka_sink.reset_offsets(pipeline text, "to" text)
RETURNS TABLE (topic text, partition integer, old_offset bigint, new_offset bigint)
AS 'MODULE_PATHNAME', 'kafka_sink_api_call'
LANGUAGE C VOLATILE;
REVOKE ALL ON FUNCTION kafka_sink.reset_offsets(text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION kafka_sink.reset_offsets(text, text) TO kafka_sink_admin;
COMMENT ON FUNCTION kafka_sink.reset_offsets(text, text) IS
'Moves the checkpoint of a stopped pipeline to earliest, latest, a timestamp or per-partition offsets, recording each change in kafka_sink.offset_resets. Returns the partitions it moved.';

-- Queues a message for Kafka in the caller's transaction: it is published
-- by the outbox relay only if the transaction commits.  Returns its stable
-- event id, which the relay sends as the header "event_id", after its hop
-- count "kafka_sink.hops" (header names kafka_sink.* are kafka_sink's).
CREATE OR REPLACE FUNCTION kafka_sink._api_outbox_send(topic text, key text, value text, headers jsonb DEFAULT NULL)
RETURNS uuid
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    id uuid;
BEGIN
    IF topic IS NULL OR topic !~ '^[A-Za-z0-9._-]{1,249}$' THEN
        RAISE EXCEPTION 'invalid topic name "%"', topic
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Kafka topic names use letters, digits, ".", "_" and "-", at most 249 characters.';
    END IF;
    IF headers IS NOT NULL AND jsonb_typeof(headers) <> 'object' THEN
        RAISE EXCEPTION 'headers must be a JSON object'
            USING ERRCODE = 'invalid_parameter_value', HINT = 'Pass a JSON object such as ''{"source": "billing"}''.';
    END IF;
    IF EXISTS (SELECT 1 FROM jsonb_object_keys(headers) k WHERE k LIKE 'kafka\_sink.%') THEN
        RAISE EXCEPTION 'header "%" is reserved',
                        (SELECT min(k) FROM jsonb_object_keys(headers) k WHERE k LIKE 'kafka\_sink.%')
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = 'Header names beginning with "kafka_sink." are written by kafka_sink.',
                  HINT = 'Choose another header name.';
    END IF;
    -- the hop count (src/kafka/hops.c): a message queued by a batch derives from it
    INSERT INTO kafka_sink.outbox AS o (topic, key, value, headers, created_by, hops)
    VALUES (topic, key, value, headers, session_user, kafka_sink._outbox_hops())
    RETURNING o.event_id INTO id;
    RETURN id;
END
$$;

CREATE OR REPLACE FUNCTION kafka_sink.outbox_send(topic text, key text, value text, headers jsonb DEFAULT NULL)
RETURNS uuid
AS 'MODULE_PATHNAME', 'kafka_sink_api_call'
LANGUAGE C VOLATILE;
REVOKE ALL ON FUNCTION kafka_sink.outbox_send(text, text, text, jsonb) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION kafka_sink.outbox_send(text, text, text, jsonb) TO kafka_sink_admin;
COMMENT ON FUNCTION kafka_sink.outbox_send(text, text, text, jsonb) IS
'Queues a message for Kafka in the caller''s transaction; the outbox relay publishes it only if the transaction commits. Returns its event id.';

-- Re-applies quarantined messages of a pipeline (not yet replayed, matching
-- the filters) once their cause is fixed: in offset order, with the
-- pipeline's rules and ordering guard, in the caller's transaction.
-- Messages that apply now are marked replayed (replayed_at); the others
-- stay, with their new reason.  target: only the messages routed (or
-- meant) for that table, a schema-qualified SQL name (quarantine.target).
CREATE OR REPLACE FUNCTION kafka_sink._api_replay_quarantine(
    pipeline    text,
    reason      text DEFAULT NULL,
    topic       text DEFAULT NULL,
    partition   integer DEFAULT NULL,
    from_offset bigint DEFAULT NULL,
    to_offset   bigint DEFAULT NULL,
    ids         bigint[] DEFAULT NULL,
    target      text DEFAULT NULL)
RETURNS TABLE (replayed bigint, still_failing bigint)
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    p kafka_sink.pipeline_definitions;
    chosen bigint[];
    target_name text;
    parts text[];
BEGIN
    PERFORM kafka_sink._require_admin();
    p := kafka_sink._get_pipeline(pipeline);
    IF _api_replay_quarantine.target IS NOT NULL THEN
        BEGIN
            parts := parse_ident(_api_replay_quarantine.target);
        EXCEPTION WHEN invalid_parameter_value OR invalid_name OR name_too_long THEN
            parts := NULL;
        END;
        IF cardinality(parts) IS DISTINCT FROM 2 THEN
            RAISE EXCEPTION 'target "%" is not a schema-qualified table name', _api_replay_quarantine.target
                USING ERRCODE = 'invalid_parameter_value',
                      HINT = 'Write schema.table, as kafka_sink.quarantine.target shows it.';
        END IF;
        -- as the worker writes quarantine.target (quote_qualified_identifier)
        target_name := format('%I.%I', parts[1], parts[2]);
    END IF;
    IF p.target IS NULL AND p.target_template IS NULL AND p.targets IS NULL THEN
        RAISE EXCEPTION 'pipeline "%" has no target to replay into', pipeline
            USING ERRCODE = 'wrong_object_type', HINT = 'A bronze-only pipeline quarantines nothing.';
    END IF;
    IF reason IS NOT NULL AND reason NOT IN ('invalid_json', 'not_an_object', 'missing_required_field',
            'invalid_value', 'unknown_schema_version', 'null_key', 'constraint_violation', 'value_too_large',
            'rejected_by_target', 'unknown_schema_id', 'not_wire_format', 'invalid_avro',
            'invalid_envelope', 'no_target', 'target_refused', 'schema_change_refused', 'dead_letter_loop',
            'no_partition', 'invalid_protobuf') THEN
        RAISE EXCEPTION 'unknown quarantine reason "%"', reason
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Reasons are invalid_json, not_an_object, missing_required_field, invalid_value, unknown_schema_version, null_key, constraint_violation, value_too_large, rejected_by_target, unknown_schema_id, not_wire_format, invalid_avro, invalid_envelope, no_target, target_refused, schema_change_refused, dead_letter_loop, no_partition and invalid_protobuf.';
    END IF;
    SELECT array_agg(q.id) INTO chosen
      FROM kafka_sink.quarantine q
     WHERE q.pipeline_id = p.id AND q.replayed_at IS NULL
       AND (_api_replay_quarantine.reason IS NULL OR q.reason = _api_replay_quarantine.reason)
       AND (_api_replay_quarantine.topic IS NULL OR q.topic = _api_replay_quarantine.topic)
       AND (_api_replay_quarantine.partition IS NULL OR q.partition = _api_replay_quarantine.partition)
       AND (from_offset IS NULL OR q.message_offset >= from_offset)
       AND (to_offset IS NULL OR q.message_offset <= to_offset)
       AND (_api_replay_quarantine.ids IS NULL OR q.id = ANY (_api_replay_quarantine.ids))
       AND (target_name IS NULL OR q.target = target_name);
    IF chosen IS NULL THEN
        RETURN QUERY SELECT 0::bigint, 0::bigint;
        RETURN;
    END IF;
    RETURN QUERY SELECT * FROM kafka_sink._replay(p.id, chosen);
END
$$;

CREATE OR REPLACE FUNCTION kafka_sink.replay_quarantine(
    pipeline    text,
    reason      text DEFAULT NULL,
    topic       text DEFAULT NULL,
    partition   integer DEFAULT NULL,
    from_offset bigint DEFAULT NULL,
    to_offset   bigint DEFAULT NULL,
    ids         bigint[] DEFAULT NULL,
    target      text DEFAULT NULL)
RETURNS TABLE (replayed bigint, still_failing bigint)
AS 'MODULE_PATHNAME', 'kafka_sink_api_call'
LANGUAGE C VOLATILE;
REVOKE ALL ON FUNCTION kafka_sink.replay_quarantine(text, text, text, integer, bigint, bigint, bigint[], text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION kafka_sink.replay_quarantine(text, text, text, integer, bigint, bigint, bigint[], text) TO kafka_sink_admin;
COMMENT ON FUNCTION kafka_sink.replay_quarantine(text, text, text, integer, bigint, bigint, bigint[], text) IS
'Applies quarantined messages of a pipeline again (those matching the filters, target among them: the table a message was routed to), in offset order and in the caller''s transaction; those that apply now are marked replayed.';
