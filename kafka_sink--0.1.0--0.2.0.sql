-- kafka_sink 0.1.0 -> 0.2.0
--
-- Every change to the catalog, views and SQL API since 0.1.0, in blocks, in
-- order.  The install script of 0.2.0 is built from src/sql/ (each object
-- once, in its final form); this script must bring a 0.1.0 database (with
-- its pipelines and data) to the same schema: test/e2e/upgrade.sh compares
-- every member object, definition, privilege, comment, constraint, index,
-- trigger and policy.  A later change goes into both: its final form into
-- the part in src/sql/ that owns it, and the statements that get there from
-- here into a new block at the end of this script (ALTER TABLE ... ADD
-- COLUMN, CREATE OR REPLACE FUNCTION, or DROP + CREATE with its REVOKE,
-- GRANT and COMMENT when a signature changes).

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
-- otherwise that of 0.1.0, except reset_offsets (below).  create_pipeline
-- and alter_pipeline, whose parameters 0.2.0 extends, are created once, in
-- their final form, at the end of this script (the dead-letter block).
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

-- The public API: the same names, parameters and defaults as before, in C
-- (create_pipeline and alter_pipeline: in the dead-letter block).
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

-- ---- a current librdkafka: the version actually loaded ----
-- kafka_sink can be built against another librdkafka than the system's
-- (PKG_CONFIG_PATH, with an rpath); what the dynamic linker loaded is what
-- counts (SCRAM against Kafka 4.x needs >= 2.6.1, OIDC needs libcurl).
CREATE FUNCTION kafka_sink.librdkafka_version()
RETURNS text
LANGUAGE c STABLE PARALLEL SAFE
AS 'MODULE_PATHNAME', 'kafka_sink_librdkafka_version';
COMMENT ON FUNCTION kafka_sink.librdkafka_version() IS
'The version of the librdkafka loaded by the server (rd_kafka_version_str()), which can differ from the one kafka_sink was compiled against.';

CREATE FUNCTION kafka_sink.librdkafka_features()
RETURNS text[]
LANGUAGE c STABLE PARALLEL SAFE
AS 'MODULE_PATHNAME', 'kafka_sink_librdkafka_features';
COMMENT ON FUNCTION kafka_sink.librdkafka_features() IS
'The loaded librdkafka''s builtin.features: ssl, sasl_scram, sasl_oauthbearer, oidc (token endpoint, needs libcurl), zstd, ...';

CREATE VIEW kafka_sink.versions AS
SELECT (SELECT extversion FROM pg_catalog.pg_extension WHERE extname = 'kafka_sink') AS kafka_sink,
       kafka_sink.librdkafka_version() AS librdkafka,
       kafka_sink.librdkafka_features() AS librdkafka_features,
       pg_catalog.current_setting('server_version') AS postgresql;
COMMENT ON VIEW kafka_sink.versions IS
'The installed kafka_sink version, the librdkafka loaded by the server and its features, and the PostgreSQL version.';

REVOKE ALL ON FUNCTION kafka_sink.librdkafka_version(), kafka_sink.librdkafka_features() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION kafka_sink.librdkafka_version(), kafka_sink.librdkafka_features() TO kafka_sink_admin;
REVOKE ALL ON kafka_sink.versions FROM PUBLIC;
GRANT SELECT ON kafka_sink.versions TO kafka_sink_admin;

-- ---- failure visibility and create-time refusals (issue 12, sections 4 and 6) ----

-- One parser of offsets specs: the C function the worker uses (src/offsets.c).
-- what names the spec in messages: starting_offsets, ending_offsets or
-- reset_offsets; with start, an ending_offsets is checked against it.
CREATE FUNCTION kafka_sink._check_offsets(spec text, what text, start text DEFAULT NULL)
RETURNS void
LANGUAGE C
AS 'MODULE_PATHNAME', 'kafka_sink_check_offsets';
COMMENT ON FUNCTION kafka_sink._check_offsets(text, text, text) IS
    'Raises unless an offsets spec is one the pipeline workers can use (the same parser as theirs).';

CREATE OR REPLACE FUNCTION kafka_sink._check_starting_offsets(starting_offsets text)
RETURNS void
LANGUAGE sql
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT kafka_sink._check_offsets(starting_offsets, 'starting_offsets')
$$;

-- The definition as a whole, whoever writes it (the API or a superuser's
-- UPDATE): the offsets specs parse as the worker parses them, and a backfill
-- does not end before it starts.
CREATE FUNCTION kafka_sink._check_definition()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM kafka_sink._check_offsets(NEW.starting_offsets, 'starting_offsets');
    IF NEW.ending_offsets IS NOT NULL THEN
        PERFORM kafka_sink._check_offsets(NEW.ending_offsets, 'ending_offsets', NEW.starting_offsets);
    END IF;
    RETURN NEW;
END
$$;
COMMENT ON FUNCTION kafka_sink._check_definition() IS
    'Trigger: refuses a pipeline definition whose offsets specs a worker could not use.';
CREATE TRIGGER check_definition
    BEFORE INSERT OR UPDATE OF starting_offsets, ending_offsets ON kafka_sink.pipeline_definitions
    FOR EACH ROW EXECUTE FUNCTION kafka_sink._check_definition();

-- A table a pipeline writes (target or bronze) must be a table of the user's
-- own that a worker can see: not a temporary table (a worker is another
-- session), not a table of the extension or of another extension.
CREATE FUNCTION kafka_sink._check_user_table(rel regclass, what text)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    c pg_class;
BEGIN
    SELECT * INTO c FROM pg_class WHERE oid = rel;
    IF c.relpersistence = 't' THEN
        RAISE EXCEPTION '% % is a temporary table', what, rel
            USING ERRCODE = 'wrong_object_type',
                  DETAIL = 'A pipeline worker is a session of its own: it cannot see a temporary table.',
                  HINT = 'Use an ordinary (or unlogged) table.';
    END IF;
    IF c.relnamespace = 'kafka_sink'::regnamespace
       OR c.relnamespace IN (SELECT oid FROM pg_namespace WHERE nspname = 'pg_catalog' OR nspname = 'information_schema'
                             OR nspname LIKE 'pg\_toast%')
       OR EXISTS (SELECT 1 FROM pg_depend d WHERE d.classid = 'pg_class'::regclass AND d.objid = rel
                     AND d.deptype = 'e') THEN
        RAISE EXCEPTION '% % belongs to an extension or to the system', what, rel
            USING ERRCODE = 'wrong_object_type',
                  HINT = 'A pipeline writes a table of your own, in a schema of your own.';
    END IF;
END
$$;
COMMENT ON FUNCTION kafka_sink._check_user_table(regclass, text) IS
    'Raises unless a table is one a pipeline may write: not temporary, not the extension''s or the system''s.';

-- A key, order or mapped column must be one the worker writes: generated
-- columns and GENERATED ALWAYS identity columns are left out of its rows.
CREATE FUNCTION kafka_sink._check_writable_column(target regclass, col text, what text)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    a pg_attribute;
BEGIN
    SELECT * INTO a FROM pg_attribute
     WHERE attrelid = target AND attname = col AND attnum > 0 AND NOT attisdropped;
    IF a.attgenerated <> '' THEN
        RAISE EXCEPTION '% "%" of % is a generated column', what, col, target
            USING ERRCODE = 'invalid_column_reference',
                  DETAIL = 'Its value is computed by PostgreSQL: a pipeline cannot write it.',
                  HINT = 'Use the columns it is computed from, or make it an ordinary column.';
    END IF;
    IF a.attidentity = 'a' THEN
        RAISE EXCEPTION '% "%" of % is a GENERATED ALWAYS identity column', what, col, target
            USING ERRCODE = 'invalid_column_reference',
                  DETAIL = 'PostgreSQL numbers it: a pipeline cannot write it.',
                  HINT = format('ALTER TABLE %s ALTER COLUMN %I SET GENERATED BY DEFAULT, or use another column.', target, col);
    END IF;
END
$$;
COMMENT ON FUNCTION kafka_sink._check_writable_column(regclass, text, text) IS
    'Raises when a column named by a pipeline is generated or GENERATED ALWAYS AS IDENTITY.';

-- The lineage columns the worker fills from the message's coordinates must
-- have types those values fit, or every batch would fail.
CREATE FUNCTION kafka_sink._check_lineage_columns(target regclass)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    col text;
    typ regtype;
    allowed regtype[];
BEGIN
    FOR col, typ, allowed IN
        SELECT a.attname::text, coalesce(nullif(t.typbasetype, 0), a.atttypid)::regtype, l.allowed
          FROM (VALUES ('_kafka_topic', ARRAY['text', 'character varying', 'name']::regtype[]),
                       ('_kafka_partition', ARRAY['integer', 'bigint', 'numeric']::regtype[]),
                       ('_kafka_offset', ARRAY['bigint', 'numeric']::regtype[]),
                       ('_kafka_timestamp', ARRAY['timestamp with time zone', 'timestamp without time zone']::regtype[]),
                       ('_kafka_batch_id', ARRAY['bigint', 'numeric']::regtype[])) l(name, allowed)
          JOIN pg_attribute a ON a.attrelid = target AND a.attname = l.name AND a.attnum > 0 AND NOT a.attisdropped
          JOIN pg_type t ON t.oid = a.atttypid
    LOOP
        IF NOT typ = ANY (allowed) THEN
            RAISE EXCEPTION 'lineage column "%" of % has type %', col, target, typ
                USING ERRCODE = 'datatype_mismatch',
                      DETAIL = format('The pipeline fills %s from the message''s coordinates; it takes %s.', col,
                                      array_to_string(allowed::text[], ', ')),
                      HINT = 'Change the column''s type, or rename the column if it is not meant for lineage.';
        END IF;
        IF EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = target AND a.attname = col
                      AND (a.attgenerated <> '' OR a.attidentity = 'a')) THEN
            RAISE EXCEPTION 'lineage column "%" of % is generated', col, target
                USING ERRCODE = 'invalid_column_reference',
                      HINT = 'Make it an ordinary column: the pipeline fills it.';
        END IF;
    END LOOP;
END
$$;
COMMENT ON FUNCTION kafka_sink._check_lineage_columns(regclass) IS
    'Raises when a lineage column (_kafka_topic, _kafka_partition, ...) has a type its value does not fit.';

CREATE OR REPLACE FUNCTION kafka_sink._check_target(target regclass, key_columns text[], order_column text, mode text)
RETURNS text[]
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    k text;
    keys_attnums int2[];
    kind "char";
BEGIN
    SELECT relkind INTO kind FROM pg_class WHERE oid = target;
    IF kind NOT IN ('r', 'p') THEN
        RAISE EXCEPTION 'target "%" is not a table', target
            USING ERRCODE = 'wrong_object_type',
                  HINT = 'The target must be an ordinary or partitioned table.';
    END IF;
    PERFORM kafka_sink._check_user_table(target, 'target');
    IF mode IN ('merge', 'append') AND NOT has_table_privilege(target, 'INSERT') THEN
        RAISE EXCEPTION 'permission denied for table %', target
            USING ERRCODE = 'insufficient_privilege',
                  HINT = 'The pipeline writes as its owner, who needs INSERT, UPDATE and SELECT on the target.';
    END IF;
    IF mode = 'merge' AND NOT (has_table_privilege(target, 'UPDATE') AND has_table_privilege(target, 'SELECT')) THEN
        RAISE EXCEPTION 'permission denied for table %', target
            USING ERRCODE = 'insufficient_privilege',
                  HINT = 'The pipeline writes as its owner, who needs INSERT, UPDATE and SELECT on the target.';
    END IF;

    IF key_columns IS NULL AND mode = 'merge' THEN
        SELECT array_agg(a.attname::text ORDER BY array_position(i.indkey::int2[], a.attnum))
          INTO key_columns
          FROM pg_index i
          JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY (i.indkey)
         WHERE i.indrelid = target AND i.indisprimary;
        IF key_columns IS NULL THEN
            RAISE EXCEPTION 'target % has no primary key', target
                USING ERRCODE = 'invalid_table_definition',
                      HINT = 'Pass key_columns => ARRAY[''order_id''], covered by a unique index, or add a primary key.';
        END IF;
    END IF;

    IF key_columns IS NOT NULL THEN
        IF cardinality(key_columns) = 0 OR array_position(key_columns, NULL) IS NOT NULL THEN
            RAISE EXCEPTION 'key_columns must be a non-empty list of column names'
                USING ERRCODE = 'invalid_parameter_value',
                      HINT = 'Pass key_columns => ARRAY[''order_id''].';
        END IF;
        FOREACH k IN ARRAY key_columns LOOP
            IF NOT EXISTS (SELECT 1 FROM pg_attribute
                            WHERE attrelid = target AND attname = k AND attnum > 0 AND NOT attisdropped) THEN
                RAISE EXCEPTION 'key column "%" does not exist in %', k, target
                    USING ERRCODE = 'undefined_column',
                          HINT = 'key_columns name columns of the target table.';
            END IF;
        END LOOP;
        PERFORM kafka_sink._check_writable_column(target, kc, 'key column') FROM unnest(key_columns) kc;
        SELECT array_agg(attnum ORDER BY attnum) INTO keys_attnums
          FROM pg_attribute WHERE attrelid = target AND attname = ANY (key_columns);
        IF cardinality(keys_attnums) <> cardinality(key_columns) THEN
            RAISE EXCEPTION 'key_columns contains a column twice'
                USING ERRCODE = 'invalid_parameter_value',
                      HINT = 'Name each key column once.';
        END IF;
        IF mode = 'merge' AND NOT EXISTS (
                SELECT 1 FROM pg_index i
                 WHERE i.indrelid = target AND i.indisunique AND i.indisvalid
                   AND i.indpred IS NULL AND i.indexprs IS NULL
                   AND (SELECT array_agg(x ORDER BY x) FROM unnest(i.indkey::int2[]) x) = keys_attnums) THEN
            RAISE EXCEPTION 'key columns % are not covered by a unique index on %', key_columns, target
                USING ERRCODE = 'invalid_table_definition',
                      HINT = 'A deterministic MERGE needs a unique key: CREATE UNIQUE INDEX ON the target (the key columns).';
        END IF;
    END IF;

    IF order_column IS NOT NULL THEN
        IF NOT EXISTS (SELECT 1 FROM pg_attribute
                        WHERE attrelid = target AND attname = order_column AND attnum > 0 AND NOT attisdropped) THEN
            RAISE EXCEPTION 'order column "%" does not exist in %', order_column, target
                USING ERRCODE = 'undefined_column',
                      HINT = 'order_column names a column of the target, such as an event timestamp or version.';
        END IF;
        IF NOT EXISTS (SELECT 1 FROM pg_attribute a
                         JOIN pg_opclass oc ON oc.opcintype = a.atttypid
                                           AND oc.opcdefault
                         JOIN pg_am am ON am.oid = oc.opcmethod AND am.amname = 'btree'
                        WHERE a.attrelid = target AND a.attname = order_column) THEN
            RAISE EXCEPTION 'order column "%" has a type with no ordering', order_column
                USING ERRCODE = 'undefined_function',
                      HINT = 'Use a column of a type with a default btree operator class, such as timestamptz or bigint.';
        END IF;
        PERFORM kafka_sink._check_writable_column(target, order_column, 'order column');
        IF mode <> 'merge' THEN
            RAISE EXCEPTION 'order_column only applies to mode merge'
                USING ERRCODE = 'invalid_parameter_value',
                      HINT = 'Drop order_column, or use mode => ''merge''.';
        END IF;
    END IF;
    PERFORM kafka_sink._check_lineage_columns(target);
    RETURN key_columns;
END
$$;

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
    PERFORM kafka_sink._check_writable_column(target, col, 'mapped column');
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

-- (with the PostgreSQL 16-18 fix: the missing columns in the array's order)
CREATE OR REPLACE FUNCTION kafka_sink._bronze_table(name text)
RETURNS regclass
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    rel regclass := to_regclass(name);
    parsed text[];
    missing text;
BEGIN
    IF rel IS NULL THEN
        parsed := parse_ident(name);
        IF cardinality(parsed) <> 2 THEN
            RAISE EXCEPTION 'bronze table name "%" must be schema-qualified', name
                USING ERRCODE = 'invalid_name', HINT = 'Pass bronze => ''bronze.orders_raw''.';
        END IF;
        IF parsed[1] = 'kafka_sink' OR parsed[1] ~ '^pg_' THEN
            RAISE EXCEPTION 'bronze table "%" cannot be created in schema "%"', name, parsed[1]
                USING ERRCODE = 'invalid_schema_name',
                      HINT = 'Pass a schema of your own, such as bronze => ''bronze.orders_raw''; the extension''s schema and system schemas are not for pipeline tables.';
        END IF;
        -- The key leads with the integers and compares the topic bytewise:
        -- a text first column makes every btree comparison of the insert
        -- path a collation-aware string comparison (docs/performance.md).
        EXECUTE format('CREATE TABLE %I.%I (
                            topic      text COLLATE "C" NOT NULL,
                            partition  integer NOT NULL,
                            "offset"   bigint NOT NULL,
                            ts         timestamptz,
                            key        bytea,
                            value      bytea,
                            headers    jsonb,
                            batch_id   bigint NOT NULL,
                            landed_at  timestamptz NOT NULL DEFAULT now(),
                            PRIMARY KEY (partition, "offset", topic))', parsed[1], parsed[2]);
        rel := format('%I.%I', parsed[1], parsed[2])::regclass;
    END IF;
    PERFORM kafka_sink._check_user_table(rel, 'bronze table');
    -- in the array's order: the planner may pick a hashed anti-join that
    -- does not keep it (PostgreSQL 16+ does, here)
    SELECT string_agg(c, ', ' ORDER BY n) INTO missing
      FROM unnest(ARRAY['topic', 'partition', 'offset', 'ts', 'key', 'value', 'headers', 'batch_id'])
           WITH ORDINALITY AS u(c, n)
     WHERE NOT EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = rel AND a.attname = c
                          AND a.attnum > 0 AND NOT a.attisdropped);
    IF missing IS NOT NULL THEN
        RAISE EXCEPTION 'bronze table % lacks the columns %', rel, missing
            USING ERRCODE = 'invalid_table_definition',
                  HINT = 'Let create_pipeline create the bronze table, or add the standard columns.';
    END IF;
    IF NOT has_table_privilege(rel, 'INSERT') THEN
        RAISE EXCEPTION 'permission denied for table %', rel
            USING ERRCODE = 'insufficient_privilege',
                  HINT = 'The pipeline owner needs INSERT on the bronze table.';
    END IF;
    RETURN rel;
END
$$;

CREATE OR REPLACE FUNCTION kafka_sink._check_batch_function(fn regprocedure, target regclass)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    args oidvector;
BEGIN
    SELECT proargtypes INTO args FROM pg_proc WHERE oid = fn;
    IF (SELECT prokind FROM pg_proc WHERE oid = fn) <> 'f' THEN
        RAISE EXCEPTION 'batch function % is not a plain function', fn
            USING ERRCODE = 'wrong_object_type',
                  HINT = 'Pass a function (not a procedure, aggregate or window function) taking (bigint, rows[]).';
    END IF;
    IF (SELECT pronamespace FROM pg_proc WHERE oid = fn) = 'kafka_sink'::regnamespace
       OR EXISTS (SELECT 1 FROM pg_depend d WHERE d.classid = 'pg_proc'::regclass AND d.objid = fn
                     AND d.deptype = 'e') THEN
        RAISE EXCEPTION 'batch function % belongs to an extension', fn
            USING ERRCODE = 'wrong_object_type',
                  HINT = 'Pass a function of your own, in a schema of your own.';
    END IF;
    IF array_length(args::oid[], 1) IS DISTINCT FROM 2
       OR args[0] <> 'bigint'::regtype
       OR args[1] <> (SELECT typarray FROM pg_type WHERE typrelid = target) THEN
        RAISE EXCEPTION 'batch function % must take (bigint, %[])', fn, target
            USING ERRCODE = 'invalid_function_definition',
                  HINT = 'The function receives the batch id and the batch''s rows in offset order.';
    END IF;
    IF NOT has_function_privilege(fn, 'EXECUTE') THEN
        RAISE EXCEPTION 'permission denied for function %', fn
            USING ERRCODE = 'insufficient_privilege',
                  HINT = 'The pipeline owner needs EXECUTE on the batch function.';
    END IF;
END
$$;

-- reset_offsets checks what it is asked: every named partition must be one
-- the pipeline reads, and every offset within its log (the guard's body,
-- without a temporary table, with these checks).
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

-- wait() and wait_for() raise for a failed pipeline first: a pipeline that
-- failed before reading anything has nothing "behind" and is not caught up.
CREATE OR REPLACE FUNCTION kafka_sink._wait_check(pipeline text, marks jsonb, deadline timestamptz)
RETURNS boolean
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    p kafka_sink.pipeline_definitions := kafka_sink._get_pipeline(pipeline);
    behind bigint;
    err text;
BEGIN
    -- a failed pipeline says so, even when nothing is behind (it may have
    -- failed before reading anything)
    IF p.state = 'failed' THEN
        SELECT concat_ws(' ', e.message, e.detail) INTO err FROM kafka_sink.errors e
         WHERE e.pipeline_id = p.id ORDER BY e.occurred_at DESC, e.id DESC LIMIT 1;
        RAISE EXCEPTION 'pipeline "%" failed', pipeline
            USING ERRCODE = 'object_not_in_prerequisite_state', DETAIL = coalesce(err, ''),
                  HINT = 'Fix the cause, then SELECT kafka_sink.start(...).';
    END IF;
    SELECT count(*) INTO behind
      FROM jsonb_to_recordset(marks) AS m(topic text, partition integer, high bigint)
      LEFT JOIN kafka_sink.offsets o
             ON o.pipeline_id = p.id AND o.topic = m.topic AND o.partition = m.partition
     WHERE CASE WHEN o.next_offset IS NULL THEN m.high > 0 ELSE o.next_offset <> m.high END;
    IF behind = 0 THEN
        RETURN true;
    END IF;
    IF clock_timestamp() >= deadline THEN
        RETURN false;
    END IF;
    RETURN NULL;
END
$$;

REVOKE ALL ON FUNCTION kafka_sink._check_offsets(text, text, text), kafka_sink._check_definition(),
    kafka_sink._check_user_table(regclass, text), kafka_sink._check_writable_column(regclass, text, text),
    kafka_sink._check_lineage_columns(regclass) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION kafka_sink._check_offsets(text, text, text), kafka_sink._check_definition(),
    kafka_sink._check_user_table(regclass, text), kafka_sink._check_writable_column(regclass, text, text),
    kafka_sink._check_lineage_columns(regclass) TO kafka_sink_admin;

-- ---- lineage: batch ranges, lineage views, message fates, the apply statements ----
--
-- Lineage as relations a user can join, filter and point a BI tool at
-- (docs/design-notes.md, "Lineage as relations").  Nothing here writes the
-- catalog: the views read it under its row level security, and
-- create_lineage_view creates a view in the target's schema as its caller.

-- One row per batch and partition, expanded from batches.ranges.  A view,
-- not a table: the worker writes one marker per batch as before (nothing
-- on the hot path), and the batch's own row is found by its primary key.
-- A filter on pipeline and batch_id uses that key; a filter on topic,
-- partition or offset alone reads every retained batch of the pipeline
-- (kafka_sink.keep_batches, keep_batches_for) and expands its ranges.
CREATE VIEW kafka_sink.batch_ranges WITH (security_invoker = true) AS
SELECT p.name AS pipeline, b.pipeline_id, b.batch_id, b.worker, r.topic, r.partition,
       r.start AS start_offset, r."end" AS end_offset, r.messages,
       b.started_at, b.committed_at,
       b.messages AS batch_messages, b.inserted, b.updated, b.deleted, b.stale, b.superseded,
       b.quarantined, b.duplicates
  FROM kafka_sink.batches b
  JOIN kafka_sink.pipeline_definitions p ON p.id = b.pipeline_id
 CROSS JOIN LATERAL pg_catalog.jsonb_to_recordset(b.ranges)
       AS r(topic text, partition integer, start bigint, "end" bigint, messages bigint);
GRANT SELECT ON kafka_sink.batch_ranges TO kafka_sink_admin;
COMMENT ON VIEW kafka_sink.batch_ranges IS
'One row per committed batch and partition: offsets start_offset (inclusive) to end_offset (exclusive), the partition''s messages, commit time and the batch''s counts. Join a target''s _kafka_batch_id to batch_id, or kafka_sink.quarantine on (pipeline_id, batch_id). Only retained batches (kafka_sink.keep_batches, keep_batches_for) appear. Row level secured: a role sees the pipelines of roles it is a member of.';

-- The batch ranges the lineage views join, for any role: only the
-- pipelines of roles the querying role is a member of (as the catalog's
-- row level security), so that a role that may read a target but not its
-- pipeline gets the target's rows with NULL batch columns rather than an
-- error.  Owned by the extension's owner, hence not security_invoker;
-- security_barrier keeps a caller's functions from seeing filtered rows.
CREATE VIEW kafka_sink._lineage_ranges WITH (security_barrier = true) AS
SELECT b.pipeline_id, p.name AS pipeline, b.batch_id, r.topic, r.partition,
       r.start AS start_offset, r."end" AS end_offset, b.committed_at
  FROM kafka_sink.batches b
  JOIN kafka_sink.pipeline_definitions p ON p.id = b.pipeline_id
 CROSS JOIN LATERAL pg_catalog.jsonb_to_recordset(b.ranges)
       AS r(topic text, partition integer, start bigint, "end" bigint)
 WHERE pg_catalog.pg_has_role(current_user, p.owner::oid, 'MEMBER');
GRANT SELECT ON kafka_sink._lineage_ranges TO PUBLIC;
COMMENT ON VIEW kafka_sink._lineage_ranges IS
'Internal: the batch ranges of the pipelines of roles the querying role is a member of, for the lineage views made by kafka_sink.create_lineage_view.';

-- A lineage view of one target of a pipeline: every row of the target,
-- once, with the pipeline and the commit time of the batch that wrote it
-- and (raw => true and a bronze table) the raw message.  Made on demand
-- rather than by create_pipeline: it is the caller's object in the
-- target's schema, dropped with DROP VIEW, and made again (the same call)
-- after the target's columns change.  security_invoker: the querying role
-- needs SELECT on the target (and on bronze when raw), its row level
-- security applies, and SELECT on the view itself is granted to PUBLIC.
CREATE FUNCTION kafka_sink.create_lineage_view(pipeline text, target regclass DEFAULT NULL,
                                               view_name text DEFAULT NULL, raw boolean DEFAULT true)
RETURNS regclass
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    p kafka_sink.pipeline_definitions;
    tgt regclass;
    parsed text[];
    vschema text;
    vname text;
    existing regclass;
    missing text;
    has_ts boolean;
    use_raw boolean;
    marker text;
    v regclass;
BEGIN
    PERFORM kafka_sink._require_admin();
    p := kafka_sink._get_pipeline(pipeline);
    IF raw IS NULL THEN
        RAISE EXCEPTION 'raw cannot be null'
            USING ERRCODE = 'null_value_not_allowed', HINT = 'Pass true or false.';
    END IF;
    -- a list of targets (several per pipeline) will name one here
    tgt := coalesce(create_lineage_view.target, p.target);
    IF tgt IS NULL THEN
        RAISE EXCEPTION 'pipeline "%" has no target', pipeline
            USING ERRCODE = 'wrong_object_type', HINT = 'A bronze-only pipeline writes no rows to trace; query its bronze table.';
    END IF;
    IF tgt IS DISTINCT FROM p.target THEN
        RAISE EXCEPTION 'pipeline "%" does not write %', pipeline, tgt
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = format('Its target is %s.', p.target);
    END IF;
    IF p.mode = 'function' THEN
        RAISE EXCEPTION 'pipeline "%" passes its rows to a batch function', pipeline
            USING ERRCODE = 'wrong_object_type',
                  HINT = 'The batch function decides what it writes; the pipeline cannot trace it.';
    END IF;
    SELECT string_agg(c, ', ') INTO missing
      FROM unnest(ARRAY['_kafka_topic', '_kafka_partition', '_kafka_offset', '_kafka_batch_id']) c
     WHERE NOT EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = tgt AND a.attname = c
                          AND a.attnum > 0 AND NOT a.attisdropped);
    IF missing IS NOT NULL THEN
        RAISE EXCEPTION 'target % has no lineage columns %', tgt, missing
            USING ERRCODE = 'undefined_column',
                  HINT = 'Add _kafka_topic text, _kafka_partition int, _kafka_offset bigint and _kafka_batch_id bigint (and optionally _kafka_timestamp timestamptz) to the target; the pipeline fills them.';
    END IF;
    has_ts := EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = tgt AND a.attname = '_kafka_timestamp'
                        AND a.attnum > 0 AND NOT a.attisdropped);
    use_raw := raw AND p.bronze IS NOT NULL;

    SELECT n.nspname, c.relname || '_lineage' INTO vschema, vname
      FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = tgt;
    IF view_name IS NOT NULL THEN
        BEGIN
            parsed := parse_ident(view_name);
        EXCEPTION WHEN invalid_parameter_value THEN
            parsed := NULL;
        END;
        IF parsed IS NULL OR cardinality(parsed) NOT IN (1, 2) THEN
            RAISE EXCEPTION 'invalid view name "%"', view_name
                USING ERRCODE = 'invalid_name', HINT = 'Pass a name such as ''orders_lineage'' or ''reporting.orders_lineage''.';
        END IF;
        vname := parsed[cardinality(parsed)];
        IF cardinality(parsed) = 2 THEN
            vschema := parsed[1];
        END IF;
    END IF;

    -- a lineage view made before is made again; anything else is kept
    marker := format('kafka_sink lineage view of pipeline %s (id %s), target %s', p.name, p.id, tgt);
    existing := to_regclass(format('%I.%I', vschema, vname));
    IF existing IS NOT NULL THEN
        IF (SELECT relkind FROM pg_class WHERE oid = existing) <> 'v'
           OR coalesce(obj_description(existing, 'pg_class'), '') NOT LIKE 'kafka_sink lineage view of %' THEN
            RAISE EXCEPTION 'relation % already exists', existing
                USING ERRCODE = 'duplicate_table',
                      HINT = 'Pass view_name => another name; only a lineage view made by create_lineage_view is replaced.';
        END IF;
        EXECUTE format('DROP VIEW %s', existing);
    END IF;

    EXECUTE format(
        'CREATE VIEW %I.%I WITH (security_invoker = true) AS'
        ' SELECT t.*, lr.pipeline AS _kafka_pipeline, lr.committed_at AS _kafka_committed_at%s,'
        ' %s AS _kafka_key, %s AS _kafka_value, %s AS _kafka_headers'
        ' FROM %s t'
        ' LEFT JOIN LATERAL (SELECT x.pipeline, x.committed_at FROM kafka_sink._lineage_ranges x'
        '   WHERE x.pipeline_id = %s AND x.batch_id = t._kafka_batch_id'
        '     AND x.topic = t._kafka_topic AND x.partition = t._kafka_partition'
        '     AND t._kafka_offset >= x.start_offset AND t._kafka_offset < x.end_offset) lr ON true%s',
        vschema, vname,
        CASE WHEN has_ts THEN '' WHEN use_raw THEN ', br.ts AS _kafka_timestamp' ELSE ', NULL::timestamptz AS _kafka_timestamp' END,
        CASE WHEN use_raw THEN 'br.key' ELSE 'NULL::bytea' END,
        CASE WHEN use_raw THEN 'br.value' ELSE 'NULL::bytea' END,
        CASE WHEN use_raw THEN 'br.headers' ELSE 'NULL::jsonb' END,
        tgt, p.id,
        CASE WHEN use_raw THEN
            format(' LEFT JOIN %s br ON br.topic = t._kafka_topic COLLATE "C" AND br.partition = t._kafka_partition'
                   ' AND br."offset" = t._kafka_offset', p.bronze)
        ELSE '' END);
    v := format('%I.%I', vschema, vname)::regclass;
    EXECUTE format('COMMENT ON VIEW %s IS %L', v,
                   marker || ': each row of the target with the pipeline, the commit time of the batch that wrote it'
                   || CASE WHEN use_raw THEN ' and the raw message from ' || p.bronze::text ELSE '' END
                   || '. _kafka_pipeline and _kafka_committed_at are NULL for a role that is not a member of the pipeline''s owner,'
                   || ' for a batch no longer retained, and for rows written by replay_quarantine (_kafka_batch_id 0).'
                   || ' Made by kafka_sink.create_lineage_view; call it again after the target''s columns change.');
    EXECUTE format('GRANT SELECT ON %s TO PUBLIC', v);
    RETURN v;
END
$$;
REVOKE ALL ON FUNCTION kafka_sink.create_lineage_view(text, regclass, text, boolean) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION kafka_sink.create_lineage_view(text, regclass, text, boolean) TO kafka_sink_admin;
COMMENT ON FUNCTION kafka_sink.create_lineage_view(text, regclass, text, boolean) IS
'Creates (or makes again) the lineage view of a pipeline''s target, by default <target>_lineage in the target''s schema: every row of the target once, with the pipeline, the commit time of the batch that wrote it and, with raw and a bronze table, the raw message. The view runs with the querying role''s rights (security_invoker); it is the caller''s, and DROP VIEW drops it. Returns the view.';

-- The fate of every message of a pipeline in an offset range, as a set:
-- the same rules as message_fate(), set-based.  Cost: linear in the
-- messages of the range plus the retained batches of the pipeline; each
-- source is read once (the batch ranges expanded, the quarantine by its
-- unique key, bronze by its primary key, the target by its key index, as
-- hash or merge joins or index probes, as the planner finds cheaper), no
-- statement runs per message.
-- (Its rows are a named type: a RETURNS TABLE column may not share the
-- name of a parameter, and topic and partition are both.)
CREATE TYPE kafka_sink.message_fate_row AS (topic text, partition integer, "offset" bigint, fate text,
                                            batch_id bigint, detail text);
COMMENT ON TYPE kafka_sink.message_fate_row IS
'A row of kafka_sink.message_fates: a message''s coordinates, its fate, the batch that read it (or quarantined it) and a detail.';
CREATE FUNCTION kafka_sink.message_fates(pipeline text, topic text DEFAULT NULL, partition integer DEFAULT NULL,
                                         from_offset bigint DEFAULT NULL, to_offset bigint DEFAULT NULL)
RETURNS SETOF kafka_sink.message_fate_row
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    p kafka_sink.pipeline_definitions;
    has_lineage boolean;
    keyexpr text;
    keycond text;
    body text;
    classify text;
BEGIN
    PERFORM kafka_sink._require_admin();
    p := kafka_sink._get_pipeline(pipeline);
    IF from_offset < 0 OR to_offset < 0 THEN
        RAISE EXCEPTION 'offsets cannot be negative'
            USING ERRCODE = 'invalid_parameter_value', HINT = 'Pass from_offset and to_offset as Kafka offsets (0 or more).';
    END IF;
    IF from_offset > to_offset THEN
        RAISE EXCEPTION 'from_offset % is past to_offset %', from_offset, to_offset
            USING ERRCODE = 'invalid_parameter_value', HINT = 'Both ends of the range are included.';
    END IF;
    IF partition < 0 THEN
        RAISE EXCEPTION 'partition cannot be negative'
            USING ERRCODE = 'invalid_parameter_value', HINT = 'Kafka partitions are numbered from 0.';
    END IF;
    has_lineage := p.target IS NOT NULL AND (SELECT count(*) FROM pg_attribute a
                       WHERE a.attrelid = p.target AND NOT a.attisdropped AND a.attnum > 0
                         AND a.attname IN ('_kafka_topic', '_kafka_partition', '_kafka_offset', '_kafka_batch_id')) = 4;

    -- the messages of the range: per partition with a checkpoint, from
    -- from_offset (else the first checkpoint or the first retained batch)
    -- to to_offset (else the last committed offset); offsets at or past
    -- the checkpoint are pending, so only listed when to_offset asks
    body := $q$
    WITH parts AS MATERIALIZED (
        SELECT o.topic, o.partition, o.next_offset,
               coalesce($4, least(o.start_offset, (
                   SELECT min(r.start) FROM kafka_sink.batches b,
                          jsonb_to_recordset(b.ranges) AS r(topic text, partition integer, start bigint)
                    WHERE b.pipeline_id = $1 AND r.topic = o.topic AND r.partition = o.partition)), o.next_offset) AS lo,
               coalesce($5, o.next_offset - 1) AS hi
          FROM kafka_sink.offsets o
         WHERE o.pipeline_id = $1 AND ($2::text IS NULL OR o.topic = $2) AND ($3::int IS NULL OR o.partition = $3)),
    in_batch AS MATERIALIZED (
        SELECT pa.topic, pa.partition, g.o AS "offset", max(b.batch_id) AS batch_id
          FROM kafka_sink.batches b,
               jsonb_to_recordset(b.ranges) AS r(topic text, partition integer, start bigint, "end" bigint),
               parts pa,
               generate_series(greatest(r.start, pa.lo), least(r."end" - 1, pa.hi, pa.next_offset - 1)) AS g(o)
         WHERE b.pipeline_id = $1 AND r.topic = pa.topic AND r.partition = pa.partition
         GROUP BY 1, 2, 3),
    lost AS MATERIALIZED (
        SELECT DISTINCT pa.topic, pa.partition, g.o AS "offset"
          FROM kafka_sink.data_loss d
          JOIN parts pa ON pa.topic = d.topic AND pa.partition = d.partition,
               generate_series(greatest(d.expected_offset, pa.lo), least(d.available_offset - 1, pa.hi)) AS g(o)
         WHERE d.pipeline_id = $1 AND d.kind = 'deleted'),
    m AS MATERIALIZED (
        SELECT pa.topic, pa.partition, g.o AS "offset", g.o >= pa.next_offset AS pending,
               ib.batch_id, l."offset" IS NOT NULL AS lost,
               q.batch_id AS q_batch, q.reason || ': ' || q.detail AS q_detail
          FROM parts pa
         CROSS JOIN LATERAL generate_series(pa.lo, pa.hi) AS g(o)
          LEFT JOIN in_batch ib ON ib.topic = pa.topic AND ib.partition = pa.partition AND ib."offset" = g.o
          LEFT JOIN lost l ON l.topic = pa.topic AND l.partition = pa.partition AND l."offset" = g.o
          LEFT JOIN kafka_sink.quarantine q
                 ON q.pipeline_id = $1 AND q.topic = pa.topic AND q.partition = pa.partition
                AND q.message_offset = g.o AND q.replayed_at IS NULL)
    $q$;

    classify := $q$
        CASE WHEN m.pending THEN 'pending'
             WHEN m.lost THEN 'lost'
             WHEN m.q_batch IS NOT NULL THEN 'quarantined' $q$;

    IF p.target IS NULL OR p.mode <> 'merge' OR NOT has_lineage OR p.bronze IS NULL THEN
        RETURN QUERY EXECUTE body || format($q$
        SELECT m.topic, m.partition, m."offset",
               %s ELSE %L END,
               CASE WHEN m.q_batch IS NOT NULL AND NOT m.pending AND NOT m.lost THEN m.q_batch
                    WHEN NOT m.pending THEN m.batch_id END,
               CASE WHEN m.pending THEN 'not read yet'
                    WHEN m.lost THEN 'deleted from Kafka before it was read (fail_on_data_loss = false)'
                    WHEN m.q_batch IS NOT NULL THEN m.q_detail
                    ELSE %L END
          FROM m ORDER BY 1, 2, 3 $q$,
            classify,
            CASE WHEN p.target IS NULL THEN 'landed' WHEN p.mode = 'append' THEN 'appended'
                 WHEN p.mode = 'function' THEN 'passed to the batch function' ELSE 'applied or superseded' END,
            CASE WHEN p.target IS NULL THEN 'bronze only' WHEN p.mode <> 'merge' THEN NULL
                 ELSE 'lineage columns on the target and a bronze table are needed to tell more' END)
            USING p.id, topic, partition, from_offset, to_offset;
        RETURN;
    END IF;

    -- the message's key, decoded as message_fate() decodes it
    IF p.key_format = 'string' THEN
        keyexpr := format('jsonb_build_object(%L, convert_from(br.key, ''UTF8''))', p.key_columns[1]);
    ELSIF p.key_format = 'json' THEN
        keyexpr := 'convert_from(br.key, ''UTF8'')::jsonb';
    ELSE
        SELECT 'CASE WHEN br.value IS NOT NULL THEN jsonb_build_object(' ||
               string_agg(format('%L, (convert_from(br.value, ''UTF8'')::jsonb) #> %L::text[]', c,
                                 string_to_array(coalesce(p.columns->c->>'path', p.columns->>c, c), '.')), ', ')
               || ') END'
          INTO keyexpr FROM unnest(p.key_columns) c;
    END IF;
    SELECT string_agg(format('t.%1$I = (mk.k).%1$I', c), ' AND ') INTO keycond FROM unnest(p.key_columns) c;

    RETURN QUERY EXECUTE body || format($q$,
    mk AS (
        SELECT m.*, br."offset" IS NOT NULL AS has_msg, v.v, jsonb_populate_record(NULL::%1$s, v.v) AS k
          FROM m
          LEFT JOIN %2$s br ON NOT m.pending AND NOT m.lost AND m.q_batch IS NULL
                           AND br.topic = m.topic COLLATE "C" AND br.partition = m.partition AND br."offset" = m."offset"
          CROSS JOIN LATERAL (SELECT CASE WHEN br."offset" IS NOT NULL THEN %3$s END AS v) v)
    SELECT mk.topic, mk.partition, mk."offset",
           %4$s
                WHEN NOT mk.has_msg THEN 'applied or superseded'
                WHEN t._kafka_offset IS NULL THEN 'deleted'
                WHEN t._kafka_topic = mk.topic AND t._kafka_partition = mk.partition AND t._kafka_offset = mk."offset" THEN 'applied'
                WHEN t._kafka_batch_id = mk.batch_id THEN 'superseded'
                WHEN t._kafka_batch_id < mk.batch_id THEN 'stale'
                ELSE 'overwritten' END,
           CASE WHEN mk.q_batch IS NOT NULL AND NOT mk.pending AND NOT mk.lost THEN mk.q_batch
                WHEN NOT mk.pending THEN mk.batch_id END,
           CASE WHEN mk.pending THEN 'not read yet'
                WHEN mk.lost THEN 'deleted from Kafka before it was read (fail_on_data_loss = false)'
                WHEN mk.q_batch IS NOT NULL THEN mk.q_detail
                WHEN NOT mk.has_msg THEN 'lineage columns on the target and a bronze table are needed to tell more'
                WHEN t._kafka_offset IS NULL THEN format('no row for key %%s', mk.v)
                WHEN t._kafka_topic = mk.topic AND t._kafka_partition = mk.partition AND t._kafka_offset = mk."offset"
                     THEN format('the current source of the row with key %%s', mk.v)
                WHEN t._kafka_batch_id = mk.batch_id THEN format('offset %%s of the same batch won for key %%s', t._kafka_offset, mk.v)
                WHEN t._kafka_batch_id < mk.batch_id THEN format('the row for key %%s (from batch %%s) was newer', mk.v, t._kafka_batch_id)
                ELSE format('replaced by offset %%s in batch %%s', t._kafka_offset, t._kafka_batch_id) END
      FROM mk
      LEFT JOIN %1$s t ON mk.has_msg AND %5$s
     ORDER BY 1, 2, 3 $q$,
        p.target, p.bronze, keyexpr, replace(classify, 'm.', 'mk.'), keycond)
        USING p.id, topic, partition, from_offset, to_offset;
END
$$;
REVOKE ALL ON FUNCTION kafka_sink.message_fates(text, text, integer, bigint, bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION kafka_sink.message_fates(text, text, integer, bigint, bigint) TO kafka_sink_admin;
COMMENT ON FUNCTION kafka_sink.message_fates(text, text, integer, bigint, bigint) IS
'The fate of every message of a pipeline in an offset range (both ends included; default: from the first checkpoint or retained batch to the last committed offset), by the rules of message_fate(): pending, lost, quarantined, applied, superseded, stale, overwritten, deleted, appended, landed, or applied or superseded (without lineage columns and bronze). Cost: linear in the messages of the range plus the retained batches of the pipeline; no statement per message.';

-- The statements a batch runs, as built by the worker's own code (C).
CREATE FUNCTION kafka_sink._pipeline_statements(pipeline_id bigint)
RETURNS TABLE (step integer, target regclass, kind text, strategy text, statement text, by_hand text, note text)
AS 'MODULE_PATHNAME', 'kafka_sink_pipeline_statements'
LANGUAGE C VOLATILE
SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION kafka_sink._pipeline_statements(bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION kafka_sink._pipeline_statements(bigint) TO kafka_sink_admin;
COMMENT ON FUNCTION kafka_sink._pipeline_statements(bigint) IS
'Internal: the statements of kafka_sink.pipeline_statements, by pipeline id, built by the functions the worker runs them from.';

CREATE FUNCTION kafka_sink.pipeline_statements(pipeline text)
RETURNS TABLE (step integer, target regclass, kind text, strategy text, statement text, by_hand text, note text)
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM kafka_sink._require_admin();
    RETURN QUERY SELECT * FROM kafka_sink._pipeline_statements((kafka_sink._get_pipeline(pipeline)).id);
END
$$;
REVOKE ALL ON FUNCTION kafka_sink.pipeline_statements(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION kafka_sink.pipeline_statements(text) TO kafka_sink_admin;
COMMENT ON FUNCTION kafka_sink.pipeline_statements(text) IS
'The statements each batch of the pipeline runs, per target and in order, with the apply strategy (sql): statement is the text as the worker runs it ($1 the batch id, the rows from kafka_sink._batch_rows()); by_hand the same statement reading the staging table pg_temp.kafka_sink_batch that the staging row creates, to run with PREPARE s(bigint) AS ...; EXECUTE s(batch_id).';

-- ---- lag tooling and batching knobs (issue 13) ----
-- Two things, one block (kept together to ease merging with the API rename):
--  * group.id in kafka_options is allowed now (src/kafka_options.c): it names
--    a consumer group the worker commits its checkpointed offsets to, after
--    each batch, for Kafka's own lag tools.  Nothing in SQL changes for it.
--  * min_offsets_per_batch and max_trigger_delay (Spark's minOffsetsPerTrigger
--    and maxTriggerDelay): a batch waits for at least min_offsets_per_batch
--    messages, unless max_trigger_delay has passed since the previous batch.
-- create_pipeline and alter_pipeline get the two new parameters at the end of
-- their argument lists (created in the dead-letter block below).
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

-- ---- end of lag tooling and batching knobs ----

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

-- create_pipeline and alter_pipeline in their 0.2.0 form, with the
-- batching knobs and dead_letter_topic (last): the SQL bodies and the
-- public C entry points (see the trust boundary); the limits are checked by
-- kafka_sink._check_limits (created at the end).
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
    min_offsets_per_batch bigint DEFAULT 0,
    max_trigger_delay     interval DEFAULT '15 min',
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

    INSERT INTO kafka_sink.pipeline_definitions AS p
        (name, owner, state, bootstrap_servers, subscribe, subscribe_pattern, assign,
         target, key_columns, order_column, mode, batch_function, starting_offsets,
         fail_on_data_loss, max_offsets_per_batch, max_batch_bytes, trigger_interval,
         workers, kafka_options, columns, key_format, delete_on_tombstone,
         schema_version_field, schema_versions, event_id, event_id_retention, bronze, ending_offsets,
         min_offsets_per_batch, max_trigger_delay, dead_letter_topic)
    VALUES
        (name, (SELECT oid FROM pg_roles WHERE rolname = current_user)::regrole,
         CASE WHEN start THEN 'running' ELSE 'stopped' END,
         bootstrap_servers, subscribe, subscribe_pattern, assign,
         target_oid, key_columns, order_column, mode, batch_function, starting_offsets,
         fail_on_data_loss, max_offsets_per_batch, max_batch_bytes, trigger_interval,
         workers, '{}', columns, key_format, delete_on_tombstone,
         schema_version_field, schema_versions, event_id, event_id_retention, bronze_oid, ending_offsets,
         min_offsets_per_batch, max_trigger_delay, dead_letter_topic)
    RETURNING p.id INTO new_id;

    plain_options := kafka_sink._split_secrets(new_id, kafka_options);
    UPDATE kafka_sink.pipeline_definitions p SET kafka_options = plain_options WHERE p.id = new_id;
    PERFORM kafka_sink._wake_launcher();
    RETURN new_id;
END
$$;

REVOKE ALL ON FUNCTION kafka_sink._api_create_pipeline(text, text, text, text[], text, jsonb, text[], text, text, regprocedure, text, boolean, bigint, bigint, interval, integer, jsonb, boolean, jsonb, text, boolean, text, jsonb, text, interval, text, text, bigint, interval, text) FROM PUBLIC, kafka_sink_admin;
COMMENT ON FUNCTION kafka_sink._api_create_pipeline(text, text, text, text[], text, jsonb, text[], text, text, regprocedure, text, boolean, bigint, bigint, interval, integer, jsonb, boolean, jsonb, text, boolean, text, jsonb, text, interval, text, text, bigint, interval, text) IS
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
    min_offsets_per_batch bigint DEFAULT NULL,
    max_trigger_delay     interval DEFAULT NULL,
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
        min_offsets_per_batch = coalesce(_api_alter_pipeline.min_offsets_per_batch, x.min_offsets_per_batch),
        max_trigger_delay = coalesce(_api_alter_pipeline.max_trigger_delay, x.max_trigger_delay),
        dead_letter_topic = CASE WHEN _api_alter_pipeline.dead_letter_topic IS NULL THEN x.dead_letter_topic
                                 ELSE nullif(_api_alter_pipeline.dead_letter_topic, '') END,
        generation = x.generation + 1,
        updated_at = now()
    WHERE x.id = p.id;
    PERFORM kafka_sink._wake_launcher();
END
$$;

REVOKE ALL ON FUNCTION kafka_sink._api_alter_pipeline(text, bigint, bigint, interval, integer, jsonb, text, boolean, text, bigint, interval, text) FROM PUBLIC, kafka_sink_admin;
COMMENT ON FUNCTION kafka_sink._api_alter_pipeline(text, bigint, bigint, interval, integer, jsonb, text, boolean, text, bigint, interval, text) IS
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
    min_offsets_per_batch bigint DEFAULT 0,
    max_trigger_delay     interval DEFAULT '15 min',
    dead_letter_topic     text DEFAULT NULL)
RETURNS bigint
AS 'MODULE_PATHNAME', 'kafka_sink_api_call'
LANGUAGE C VOLATILE;
REVOKE ALL ON FUNCTION kafka_sink.create_pipeline(text, text, text, text[], text, jsonb, text[], text, text, regprocedure, text, boolean, bigint, bigint, interval, integer, jsonb, boolean, jsonb, text, boolean, text, jsonb, text, interval, text, text, bigint, interval, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION kafka_sink.create_pipeline(text, text, text, text[], text, jsonb, text[], text, text, regprocedure, text, boolean, bigint, bigint, interval, integer, jsonb, boolean, jsonb, text, boolean, text, jsonb, text, interval, text, text, bigint, interval, text) TO kafka_sink_admin;
COMMENT ON FUNCTION kafka_sink.create_pipeline(text, text, text, text[], text, jsonb, text[], text, text, regprocedure, text, boolean, bigint, bigint, interval, integer, jsonb, boolean, jsonb, text, boolean, text, jsonb, text, interval, text, text, bigint, interval, text) IS
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
    min_offsets_per_batch bigint DEFAULT NULL,
    max_trigger_delay     interval DEFAULT NULL,
    dead_letter_topic     text DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'kafka_sink_api_call'
LANGUAGE C VOLATILE;
REVOKE ALL ON FUNCTION kafka_sink.alter_pipeline(text, bigint, bigint, interval, integer, jsonb, text, boolean, text, bigint, interval, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION kafka_sink.alter_pipeline(text, bigint, bigint, interval, integer, jsonb, text, boolean, text, bigint, interval, text) TO kafka_sink_admin;
COMMENT ON FUNCTION kafka_sink.alter_pipeline(text, bigint, bigint, interval, integer, jsonb, text, boolean, text, bigint, interval, text) IS
'Changes a pipeline''s tunables, options, bootstrap servers or starting offsets; its workers restart with the new definition. A kafka_options key with a JSON null removes that option.';

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
       , p.dead_letter_topic
  FROM kafka_sink.pipeline_definitions p;

-- ---- end of dead-letter topic ----

-- ---- restructure (issue 14): one limits check, a comment on every object ----
--
-- The install script is now built from src/sql/ (one definition per object,
-- in its final form); this block brings an upgraded database to the same
-- schema.  create_pipeline and alter_pipeline check the batch limits,
-- workers and batching knobs with one function, kafka_sink._check_limits
-- (alter_pipeline with the values the pipeline will have); the messages
-- are those of before (tidied: each function of 0.2.0 is created once here,
-- in its final form, except where a later block replaces an earlier one).

-- The limits of a pipeline's batching, as the pipeline will have them:
-- create_pipeline passes its arguments, alter_pipeline each new value or
-- the current one.  The one place these errors are raised; the table's
-- CHECKs stay as the catalog's own invariant (for a superuser's direct
-- write).
CREATE FUNCTION kafka_sink._check_limits(max_offsets_per_batch bigint, max_batch_bytes bigint,
                                         trigger_interval interval, workers integer,
                                         min_offsets_per_batch bigint, max_trigger_delay interval)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
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
    IF workers IS NULL OR workers NOT BETWEEN 1 AND 64 THEN
        RAISE EXCEPTION 'workers must be between 1 and 64'
            USING ERRCODE = 'invalid_parameter_value', HINT = 'Each worker owns a disjoint set of partitions.';
    END IF;
END
$$;
COMMENT ON FUNCTION kafka_sink._check_limits(bigint, bigint, interval, integer, bigint, interval) IS
'Internal: the one check of a pipeline''s batch limits, workers and batching knobs, for create_pipeline and alter_pipeline (with the values the pipeline will have).';
REVOKE ALL ON FUNCTION kafka_sink._check_limits(bigint, bigint, interval, integer, bigint, interval) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION kafka_sink._check_limits(bigint, bigint, interval, integer, bigint, interval) TO kafka_sink_admin;



-- Comments on the objects of 0.1.0 that had none (the install script has
-- them beside the objects; sql/comments.sql checks that none is missing).
COMMENT ON TABLE kafka_sink.pipeline_definitions IS
'Pipeline definitions and states, one row per pipeline (written through create_pipeline, alter_pipeline and the state functions; read through kafka_sink.pipelines, which hides secrets). Row level secured: a role sees the pipelines of roles it is a member of.';
COMMENT ON TABLE kafka_sink.secrets IS
'librdkafka properties of a pipeline that are secrets (passwords, keys); shown as ******** by kafka_sink.pipelines.';
COMMENT ON TABLE kafka_sink.offsets IS
'The checkpoint: per pipeline and partition, the next offset to read, written in the same transaction as the data it covers.';
COMMENT ON TABLE kafka_sink.batches IS
'One marker per committed batch: its offset ranges, counts and progress record (pruned by kafka_sink.keep_batches and keep_batches_for).';
COMMENT ON TABLE kafka_sink.quarantine IS
'Messages that could not be applied, with their bytes, headers and reason; kafka_sink.replay_quarantine applies them again.';
COMMENT ON TABLE kafka_sink.event_ids IS
'Producer event ids already applied to a target, for deduplicating retries across batches and pipeline rebuilds; pruned after event_id_retention.';
COMMENT ON TABLE kafka_sink.data_loss IS
'Offset gaps skipped with fail_on_data_loss = false: deleted before they were read, or a reset log.';
COMMENT ON TABLE kafka_sink.offset_resets IS
'The audit of kafka_sink.reset_offsets: every checkpoint it moved, from what to what, by whom.';
COMMENT ON TABLE kafka_sink.outbox IS
'Messages to publish to Kafka once their transaction commits (kafka_sink.outbox_send, dead-letter messages); the outbox relay delivers them in id order.';
COMMENT ON TABLE kafka_sink.errors IS
'Recent pipeline failures (the last 100 of each pipeline), newest last; kafka_sink.status shows the last one.';
COMMENT ON SEQUENCE kafka_sink.pipeline_definitions_id_seq IS
'Pipeline ids (identity of kafka_sink.pipeline_definitions.id).';
COMMENT ON SEQUENCE kafka_sink.quarantine_id_seq IS
'Quarantine row ids (identity of kafka_sink.quarantine.id).';
COMMENT ON SEQUENCE kafka_sink.data_loss_id_seq IS
'Data loss row ids (identity of kafka_sink.data_loss.id).';
COMMENT ON SEQUENCE kafka_sink.offset_resets_id_seq IS
'Offset reset row ids (identity of kafka_sink.offset_resets.id).';
COMMENT ON SEQUENCE kafka_sink.outbox_id_seq IS
'Outbox message ids, the relay''s delivery order (identity of kafka_sink.outbox.id).';
COMMENT ON SEQUENCE kafka_sink.errors_id_seq IS
'Error row ids (identity of kafka_sink.errors.id).';
COMMENT ON FUNCTION kafka_sink._check_kafka_options(jsonb) IS
'Internal: raises unless every kafka_options key is allowed for a pipeline (the allow-list of src/kafka_options.c) with a valid value.';
COMMENT ON FUNCTION kafka_sink._is_secret_option(text) IS
'Internal: whether a librdkafka property is a secret (kept in kafka_sink.secrets, never shown).';
COMMENT ON FUNCTION kafka_sink._watermarks(text, timestamp with time zone) IS
'Internal: the broker''s low and high watermarks of every partition a pipeline reads, asked now; with at, the first offset at or after that time.';
COMMENT ON FUNCTION kafka_sink._batch_rows() IS
'Internal: the calling pipeline worker''s staged batch as rows of the target (only inside a worker''s batch).';
COMMENT ON FUNCTION kafka_sink._batch_messages() IS
'Internal: the calling pipeline worker''s raw messages, for the bronze table (only inside a worker''s batch).';
COMMENT ON FUNCTION kafka_sink._replay(bigint, bigint[]) IS
'Internal: applies quarantined messages again by id, in offset order; the body of replay_quarantine.';
COMMENT ON FUNCTION kafka_sink._partition_stats() IS
'Internal: per partition, the watermarks, message size and rate the owning worker last saw (shared memory, no broker round trip).';
COMMENT ON FUNCTION kafka_sink._wake_launcher() IS
'Internal: wakes the launcher at commit, so that it starts or stops workers for the changed pipelines.';
COMMENT ON FUNCTION kafka_sink._worker_pids() IS
'Internal: the running workers (pipeline id, worker number, pid, state, detail) and the outbox relay (pipeline id -1).';
COMMENT ON FUNCTION kafka_sink._require_admin() IS
'Internal: raises unless the current role is a member of kafka_sink_admin.';
COMMENT ON FUNCTION kafka_sink._get_pipeline(text, boolean) IS
'Internal: the definition of a pipeline the current role can see, by name (optionally locked), or an error naming it.';
COMMENT ON FUNCTION kafka_sink._check_source(text[], text, jsonb) IS
'Internal: raises unless exactly one of subscribe, subscribe_pattern or assign is set, and valid.';
COMMENT ON FUNCTION kafka_sink._check_starting_offsets(text) IS
'Internal: raises unless starting_offsets is a spec the workers can use (kafka_sink._check_offsets).';
COMMENT ON FUNCTION kafka_sink._check_target(regclass, text[], text, text) IS
'Internal: checks a pipeline''s target, key and order columns and the caller''s privileges on it; returns the key columns (by default the primary key).';
COMMENT ON FUNCTION kafka_sink._check_mapping(regclass, text, jsonb, text) IS
'Internal: checks one column mapping (a path, or {"path": ..., "scale": n}) against the target.';
COMMENT ON FUNCTION kafka_sink._check_contract(regclass, text[], jsonb, text, boolean, text, jsonb, text, text) IS
'Internal: checks the data contract''s options: column mappings, key format, tombstones, schema versions, event ids and the key index.';
COMMENT ON FUNCTION kafka_sink._check_batch_function(regprocedure, regclass) IS
'Internal: checks a function-mode pipeline''s batch function: a plain function of the user''s taking (bigint, rows[]), executable by the caller.';
COMMENT ON FUNCTION kafka_sink._split_secrets(bigint, jsonb) IS
'Internal: stores the secret kafka_options of a pipeline in kafka_sink.secrets and returns the others.';
COMMENT ON FUNCTION kafka_sink._bronze_table(text) IS
'Internal: creates a pipeline''s bronze table (as the caller) or checks an existing one; returns it.';
COMMENT ON FUNCTION kafka_sink._transition(text, text[], text, text) IS
'Internal: moves a pipeline from one of the given states to another (start, stop, pause, resume), or explains why it cannot.';
COMMENT ON FUNCTION kafka_sink.last_progress(text) IS
'The progress record of a pipeline''s last batch (shaped like Spark''s StreamingQueryProgress), or NULL.';
COMMENT ON FUNCTION kafka_sink.recent_progress(text, integer) IS
'The progress records of a pipeline''s last n batches (default 10), oldest first.';
COMMENT ON FUNCTION kafka_sink._wait_marks(text) IS
'Internal: the high watermarks a wait() or wait_for() call must reach, taken once.';
COMMENT ON FUNCTION kafka_sink._wait_check(text, jsonb, timestamp with time zone) IS
'Internal: one look at the checkpoint for wait() and wait_for(): true when caught up, false past the deadline, NULL to look again; raises for a failed pipeline.';
COMMENT ON FUNCTION kafka_sink.wait(text, interval) IS
'Waits until the pipeline has committed everything up to the high watermarks seen when called; false on timeout. Raises if the pipeline failed.';
COMMENT ON PROCEDURE kafka_sink.wait_for(text, interval, boolean) IS
'wait() as a procedure that commits between looks, holding no snapshot while it waits; call it outside a transaction block.';
COMMENT ON FUNCTION kafka_sink.lineage(text, jsonb) IS
'Which message and batch produced the target row with the given key (needs the lineage columns on the target; the raw message comes from bronze when the pipeline keeps one).';
COMMENT ON FUNCTION kafka_sink._bronze_message(regclass, text, integer, bigint) IS
'Internal: the raw message at a topic, partition and offset in a bronze table (nothing when there is no bronze table).';
COMMENT ON FUNCTION kafka_sink.message_fate(text, text, integer, bigint) IS
'What happened to one message: pending, lost, quarantined, applied, superseded, stale, overwritten, deleted, duplicate, appended or landed, with the batch and a detail.';
COMMENT ON VIEW kafka_sink.pipelines IS
'The pipelines the current role can see, with their definitions and states; secret kafka_options are shown as ********.';
COMMENT ON VIEW kafka_sink.progress IS
'One row per pipeline and partition: the committed checkpoint beside the watermarks the owning worker last saw, the lag and the rate.';
COMMENT ON VIEW kafka_sink.status IS
'One row per pipeline: state, workers, last batch and commit, rates, lag (with a hot partition), backfill progress and the last error.';
COMMENT ON VIEW kafka_sink.outbox_status IS
'The outbox relay at a glance: pending messages, the oldest one''s age, the delivery rate, the relay''s pid and last error.';

-- ---- end of restructure ----

-- ---- review: outbox_status for the admins it is granted to ----
-- outbox_status is granted to kafka_sink_admin but read
-- kafka_sink.outbox_bootstrap_servers, a GUC_SUPERUSER_ONLY setting: every
-- non-superuser admin got "must be superuser or have privileges of
-- pg_read_all_settings" and the view was usable by superusers only (the
-- tests read it as one).  The servers are now shown to those who may read
-- the setting and NULL to others; and since the view runs as its owner
-- (its counts are the relay's whole queue, as always), the error of a
-- pending row is shown only to members of the role that queued it, as the
-- outbox's own row level security would.
CREATE OR REPLACE VIEW kafka_sink.outbox_status AS
SELECT (SELECT count(*) FROM kafka_sink.outbox WHERE delivered_at IS NULL) AS pending,
       (SELECT clock_timestamp() - min(created_at) FROM kafka_sink.outbox WHERE delivered_at IS NULL)
           AS oldest_pending_age,
       (SELECT round(count(*) / 60.0, 1) FROM kafka_sink.outbox
         WHERE delivered_at > clock_timestamp() - interval '60 s') AS delivered_per_second,
       (SELECT max(delivered_at) FROM kafka_sink.outbox) AS last_delivery_at,
       r.pid AS relay_pid,
       coalesce(nullif(r.detail, ''),
                (SELECT o.last_error FROM kafka_sink.outbox o
                  WHERE o.delivered_at IS NULL AND o.last_error IS NOT NULL
                    AND pg_catalog.pg_has_role(current_user, o.created_by, 'MEMBER')
                  ORDER BY o.id LIMIT 1)) AS last_error,
       CASE WHEN pg_catalog.pg_has_role(current_user, 'pg_read_all_settings', 'USAGE')
            THEN pg_catalog.current_setting('kafka_sink.outbox_bootstrap_servers') END AS bootstrap_servers
  FROM (SELECT 1) one
  LEFT JOIN kafka_sink._worker_pids() r ON r.pipeline_id = -1;
COMMENT ON VIEW kafka_sink.outbox_status IS
'The outbox relay at a glance: rows pending (every role''s), the age of the oldest, the delivery rate, the relay''s pid and its last error (an error of a pending row only to members of the role that queued it); bootstrap_servers only for roles that may read kafka_sink.outbox_bootstrap_servers (superusers, pg_read_all_settings), NULL for others.';
-- ---- end of review: outbox_status ----

-- ---- review: a pipeline in a database the launcher does not serve ----
-- The launcher runs the pipelines of one database, kafka_sink.database.
-- A pipeline created and started in another database (the extension can
-- be created in any) stayed 'running' with no worker, no error and lag 0,
-- and wait() timed out.  Nothing there can write kafka_sink.errors (no
-- kafka_sink process connects to that database), so the state is computed
-- where it is read: status.last_error says why, and wait()/wait_for()
-- raise.  kafka_sink.database is superuser-only, hence a SECURITY DEFINER
-- helper that tells only whether this database is the one.
CREATE FUNCTION kafka_sink._database_served()
RETURNS boolean
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT coalesce(current_setting('kafka_sink.database', true) = current_database(), false)
$$;
COMMENT ON FUNCTION kafka_sink._database_served() IS
    'Internal: whether kafka_sink.database (superuser-only) names this database, the only one whose pipelines get workers';
REVOKE ALL ON FUNCTION kafka_sink._database_served() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION kafka_sink._database_served() TO kafka_sink_admin;

-- Raises for a running pipeline that no worker will ever run; wait() and
-- wait_for() call it before they contact the broker and at every look.
CREATE FUNCTION kafka_sink._require_served(p kafka_sink.pipeline_definitions)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF p.state = 'running' AND NOT kafka_sink._database_served() THEN
        RAISE EXCEPTION 'pipeline "%" cannot run in database "%"', p.name, current_database()
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  DETAIL = 'kafka_sink runs pipelines only in the database named by the kafka_sink.database setting.',
                  HINT = 'Create the pipeline in that database, or have a superuser set kafka_sink.database to this one (it takes a restart).';
    END IF;
END
$$;
COMMENT ON FUNCTION kafka_sink._require_served(kafka_sink.pipeline_definitions) IS
    'Internal: raises when a running pipeline is in a database whose pipelines kafka_sink does not run';
REVOKE ALL ON FUNCTION kafka_sink._require_served(kafka_sink.pipeline_definitions) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION kafka_sink._require_served(kafka_sink.pipeline_definitions) TO kafka_sink_admin;

CREATE OR REPLACE FUNCTION kafka_sink._wait_marks(pipeline text)
RETURNS jsonb
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    marks jsonb;
BEGIN
    PERFORM kafka_sink._require_served(kafka_sink._get_pipeline(pipeline));
    SELECT coalesce(jsonb_agg(jsonb_build_object('topic', w.topic, 'partition', w.partition, 'high', w.high)), '[]')
      INTO marks
      FROM kafka_sink._watermarks(pipeline) w;
    RETURN marks;
END
$$;

CREATE OR REPLACE VIEW kafka_sink.status WITH (security_invoker = true) AS
SELECT p.name, p.state,
       w.workers, w.worker_pids, w.worker_detail,
       p.last_batch_id,
       b.committed_at AS last_commit_at,
       b.committed_at - b.started_at AS last_batch_duration,
       r.input_rows_per_second, r.processed_rows_per_second,
       l.avg_offsets_behind, l.max_offsets_behind, l.bytes_behind_estimate,
       CASE WHEN l.partitions >= 2 AND l.total_lag >= 100 AND l.max_offsets_behind * 2 > l.total_lag
            THEN l.hot END AS hot_partition,
       bf.percent_done AS backfill_percent_done,
       CASE WHEN bf.remaining > 0 AND r.processed_rows_per_second > 0 AND p.state = 'running'
            THEN make_interval(secs => bf.remaining / least(r.input_rows_per_second, r.processed_rows_per_second))
            WHEN bf.remaining = 0 THEN interval '0' END AS backfill_time_left,
       CASE WHEN p.state = 'running' AND NOT kafka_sink._database_served()
            THEN p.updated_at ELSE e.occurred_at END AS last_error_at,
       CASE WHEN p.state = 'running' AND NOT kafka_sink._database_served()
            THEN format('pipeline "%s" cannot run: kafka_sink runs pipelines only in the database named by kafka_sink.database, not in "%s"',
                        p.name, current_database()) COLLATE "default"
            ELSE e.message END AS last_error
  FROM kafka_sink.pipeline_definitions p
  LEFT JOIN kafka_sink.batches b ON b.pipeline_id = p.id AND b.batch_id = p.last_batch_id
  LEFT JOIN LATERAL (
        SELECT count(*)::int AS workers,
               array_agg(x.pid ORDER BY x.worker) FILTER (WHERE x.pid > 0) AS worker_pids,
               string_agg(x.detail, '; ' ORDER BY x.worker) FILTER (WHERE x.detail <> '') AS worker_detail
          FROM kafka_sink._worker_pids() x WHERE x.pipeline_id = p.id) w ON true
  LEFT JOIN LATERAL (
        SELECT round(sum(x.messages) / greatest(extract(epoch FROM clock_timestamp() - min(x.started_at)), 1), 1)
                   AS input_rows_per_second,
               round(sum(x.messages) / greatest(extract(epoch FROM sum(x.committed_at - x.started_at)), 0.001), 1)
                   AS processed_rows_per_second
          FROM kafka_sink.batches x
         WHERE x.pipeline_id = p.id AND x.committed_at > clock_timestamp() - interval '60 s') r ON true
  LEFT JOIN LATERAL (
        SELECT count(*) AS partitions,
               round(avg(g.lag_messages), 1) AS avg_offsets_behind,
               max(g.lag_messages) AS max_offsets_behind,
               sum(g.lag_messages) AS total_lag,
               sum(g.lag_bytes_estimate) AS bytes_behind_estimate,
               (array_agg(g.topic || '[' || g.partition || ']' ORDER BY g.lag_messages DESC NULLS LAST))[1] AS hot
          FROM kafka_sink.progress g WHERE g.pipeline = p.name) l ON true
  LEFT JOIN LATERAL (
        SELECT round(100.0 * sum(least(o.next_offset, o.end_offset) - o.start_offset)
                     / nullif(sum(o.end_offset - o.start_offset), 0), 1) AS percent_done,
               sum(greatest(o.end_offset - o.next_offset, 0)) AS remaining
          FROM kafka_sink.offsets o
         WHERE o.pipeline_id = p.id AND p.ending_offsets IS NOT NULL) bf ON true
  LEFT JOIN LATERAL (SELECT * FROM kafka_sink.errors x WHERE x.pipeline_id = p.id
                      ORDER BY x.occurred_at DESC, x.id DESC LIMIT 1) e ON true;

CREATE OR REPLACE FUNCTION kafka_sink._wait_check(pipeline text, marks jsonb, deadline timestamptz)
RETURNS boolean
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    p kafka_sink.pipeline_definitions := kafka_sink._get_pipeline(pipeline);
    behind bigint;
    err text;
BEGIN
    -- a failed pipeline says so, even when nothing is behind (it may have
    -- failed before reading anything)
    IF p.state = 'failed' THEN
        SELECT concat_ws(' ', e.message, e.detail) INTO err FROM kafka_sink.errors e
         WHERE e.pipeline_id = p.id ORDER BY e.occurred_at DESC, e.id DESC LIMIT 1;
        RAISE EXCEPTION 'pipeline "%" failed', pipeline
            USING ERRCODE = 'object_not_in_prerequisite_state', DETAIL = coalesce(err, ''),
                  HINT = 'Fix the cause, then SELECT kafka_sink.start(...).';
    END IF;
    -- a running pipeline of a database the launcher does not serve never
    -- gets a worker: it says so rather than time out
    PERFORM kafka_sink._require_served(p);
    SELECT count(*) INTO behind
      FROM jsonb_to_recordset(marks) AS m(topic text, partition integer, high bigint)
      LEFT JOIN kafka_sink.offsets o
             ON o.pipeline_id = p.id AND o.topic = m.topic AND o.partition = m.partition
     WHERE CASE WHEN o.next_offset IS NULL THEN m.high > 0 ELSE o.next_offset <> m.high END;
    IF behind = 0 THEN
        RETURN true;
    END IF;
    IF clock_timestamp() >= deadline THEN
        RETURN false;
    END IF;
    RETURN NULL;
END
$$;
-- ---- end of review: database not served ----

-- ---- formats: Avro and JSON Schema through a schema registry (issue 15) ----
--
-- value_format 'json' (as before), 'avro' (Confluent's wire format with a
-- schema_registry, or plain Avro binary with one inline value_schema) or
-- 'json_schema' (the wire format with a JSON payload); key_format 'avro'.
-- Schemas fetched from a registry are kept in kafka_sink.schemas.  The
-- registry password (basic.auth.user.info) is stored in kafka_sink.secrets
-- as 'schema_registry.basic.auth.user.info' and masked in the views.  See
-- "Formats and the schema registry" in docs/design-notes.md.  The install
-- script has the same in its parts (10_tables, 20_security, 30_, 40_, 50_,
-- 51_, 52_, 60_).

ALTER TABLE kafka_sink.pipeline_definitions
    ADD COLUMN value_format text NOT NULL DEFAULT 'json'
        CONSTRAINT pipeline_definitions_value_format_check CHECK (value_format IN ('json', 'avro', 'json_schema')),
    ADD COLUMN value_schema text,
    ADD COLUMN schema_registry jsonb
        CONSTRAINT pipeline_definitions_schema_registry_check CHECK (jsonb_typeof(schema_registry) = 'object'),
    ADD CONSTRAINT pipeline_definitions_registry_needed_check
        CHECK (value_format = 'json' OR schema_registry IS NOT NULL OR (value_format = 'avro' AND value_schema IS NOT NULL)),
    ADD CONSTRAINT pipeline_definitions_value_schema_check
        CHECK (value_schema IS NULL OR value_format = 'avro'),
    ADD CONSTRAINT pipeline_definitions_key_registry_check
        CHECK (key_format <> 'avro' OR schema_registry IS NOT NULL);
-- auto-named in 0.1.0
ALTER TABLE kafka_sink.pipeline_definitions DROP CONSTRAINT pipeline_definitions_key_format_check;
ALTER TABLE kafka_sink.pipeline_definitions ADD CONSTRAINT pipeline_definitions_key_format_check
    CHECK (key_format IN ('none', 'string', 'json', 'avro'));
COMMENT ON COLUMN kafka_sink.pipeline_definitions.value_format IS
    'json, avro (Confluent wire format, or plain Avro with value_schema) or json_schema (Confluent wire format, JSON payload)';
COMMENT ON COLUMN kafka_sink.pipeline_definitions.value_schema IS
    'value_format avro without a registry: the one Avro writer schema of every value (plain Avro binary)';
COMMENT ON COLUMN kafka_sink.pipeline_definitions.schema_registry IS
    'The schema registry: url, timeout.ms, ssl.ca.location (basic.auth.user.info is kept in kafka_sink.secrets)';
COMMENT ON TABLE kafka_sink.secrets IS
'librdkafka properties of a pipeline that are secrets (passwords, keys), and its schema registry''s (named schema_registry.<option>); shown as ******** by kafka_sink.pipelines.';

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

-- The schema registry's options (schema_registry => '{"url": ...}'): an
-- allow-list as for kafka_options (src/kafka_options.c); its secret
-- (basic.auth.user.info) is kept in kafka_sink.secrets.
CREATE FUNCTION kafka_sink._check_registry_options(options jsonb)
RETURNS void
AS 'MODULE_PATHNAME', 'kafka_sink_check_registry_options'
LANGUAGE C;
COMMENT ON FUNCTION kafka_sink._check_registry_options(jsonb) IS
'Internal: raises unless every schema_registry option is allowed (its allow-list in src/kafka_options.c, as _check_kafka_options for Kafka options) and a url is given.';

CREATE FUNCTION kafka_sink._is_secret_registry_option(name text)
RETURNS boolean
AS 'MODULE_PATHNAME', 'kafka_sink_is_secret_registry_option'
LANGUAGE C IMMUTABLE STRICT;
COMMENT ON FUNCTION kafka_sink._is_secret_registry_option(text) IS
'Internal: whether a schema_registry option is a secret (kept in kafka_sink.secrets as schema_registry.<option>, never shown).';

-- value_schema, parsed by the parser decoding uses (src/avro_binary.c)
CREATE FUNCTION kafka_sink._check_avro_schema(schema text)
RETURNS void
AS 'MODULE_PATHNAME', 'kafka_sink_check_avro_schema'
LANGUAGE C;
COMMENT ON FUNCTION kafka_sink._check_avro_schema(text) IS
'Internal: raises unless value_schema is a valid Avro record schema, parsed as decoding parses it.';

-- The formats of create_pipeline and alter_pipeline (issue 15), checked
-- together: value_format, key_format avro, value_schema, schema_registry.
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
COMMENT ON FUNCTION kafka_sink._check_formats(text, text, text, jsonb) IS
'Internal: checks value_format, key_format, value_schema and schema_registry together.';

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
COMMENT ON FUNCTION kafka_sink._set_schema_registry(bigint, jsonb) IS
'Internal: stores a pipeline''s schema_registry: its secret in kafka_sink.secrets, the rest in the definition (NULL removes the registry).';

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
'Internal: alter_pipeline''s formats: schema_registry replaces the registry whole (a JSON null removes it), value_schema => '''' removes the inline schema.';

-- The wire format's schema id of a raw value (bronze, quarantine), or NULL.
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

-- create_pipeline and alter_pipeline with the format parameters, after
-- those of the dead-letter block (bodies and entry points)
DROP FUNCTION kafka_sink.create_pipeline(text, text, text, text[], text, jsonb, text[], text, text, regprocedure, text, boolean, bigint, bigint, interval, integer, jsonb, boolean, jsonb, text, boolean, text, jsonb, text, interval, text, text, bigint, interval, text);
DROP FUNCTION kafka_sink._api_create_pipeline(text, text, text, text[], text, jsonb, text[], text, text, regprocedure, text, boolean, bigint, bigint, interval, integer, jsonb, boolean, jsonb, text, boolean, text, jsonb, text, interval, text, text, bigint, interval, text);
DROP FUNCTION kafka_sink.alter_pipeline(text, bigint, bigint, interval, integer, jsonb, text, boolean, text, bigint, interval, text);
DROP FUNCTION kafka_sink._api_alter_pipeline(text, bigint, bigint, interval, integer, jsonb, text, boolean, text, bigint, interval, text);

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
    min_offsets_per_batch bigint DEFAULT 0,
    max_trigger_delay     interval DEFAULT '15 min',
    dead_letter_topic     text DEFAULT NULL,
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
        -- Avro keys decode to the same fields as JSON keys (format.h)
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

    INSERT INTO kafka_sink.pipeline_definitions AS p
        (name, owner, state, bootstrap_servers, subscribe, subscribe_pattern, assign,
         target, key_columns, order_column, mode, batch_function, starting_offsets,
         fail_on_data_loss, max_offsets_per_batch, max_batch_bytes, trigger_interval,
         workers, kafka_options, columns, key_format, delete_on_tombstone,
         schema_version_field, schema_versions, event_id, event_id_retention, bronze, ending_offsets,
         min_offsets_per_batch, max_trigger_delay, dead_letter_topic,
         value_format, value_schema, schema_registry)
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
         value_format, value_schema, CASE WHEN schema_registry IS NOT NULL THEN '{}'::jsonb END)
    RETURNING p.id INTO new_id;

    plain_options := kafka_sink._split_secrets(new_id, kafka_options);
    UPDATE kafka_sink.pipeline_definitions p SET kafka_options = plain_options WHERE p.id = new_id;
    PERFORM kafka_sink._set_schema_registry(new_id, schema_registry);
    PERFORM kafka_sink._wake_launcher();
    RETURN new_id;
END
$$;

REVOKE ALL ON FUNCTION kafka_sink._api_create_pipeline(text, text, text, text[], text, jsonb, text[], text, text, regprocedure, text, boolean, bigint, bigint, interval, integer, jsonb, boolean, jsonb, text, boolean, text, jsonb, text, interval, text, text, bigint, interval, text, text, text, jsonb) FROM PUBLIC, kafka_sink_admin;
COMMENT ON FUNCTION kafka_sink._api_create_pipeline(text, text, text, text[], text, jsonb, text[], text, text, regprocedure, text, boolean, bigint, bigint, interval, integer, jsonb, boolean, jsonb, text, boolean, text, jsonb, text, interval, text, text, bigint, interval, text, text, text, jsonb) IS
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
    min_offsets_per_batch bigint DEFAULT NULL,
    max_trigger_delay     interval DEFAULT NULL,
    dead_letter_topic     text DEFAULT NULL,
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
        min_offsets_per_batch = coalesce(_api_alter_pipeline.min_offsets_per_batch, x.min_offsets_per_batch),
        max_trigger_delay = coalesce(_api_alter_pipeline.max_trigger_delay, x.max_trigger_delay),
        dead_letter_topic = CASE WHEN _api_alter_pipeline.dead_letter_topic IS NULL THEN x.dead_letter_topic
                                 ELSE nullif(_api_alter_pipeline.dead_letter_topic, '') END,
        generation = x.generation + 1,
        updated_at = now()
    WHERE x.id = p.id;
    PERFORM kafka_sink._wake_launcher();
END
$$;

REVOKE ALL ON FUNCTION kafka_sink._api_alter_pipeline(text, bigint, bigint, interval, integer, jsonb, text, boolean, text, bigint, interval, text, text, text, text, jsonb) FROM PUBLIC, kafka_sink_admin;
COMMENT ON FUNCTION kafka_sink._api_alter_pipeline(text, bigint, bigint, interval, integer, jsonb, text, boolean, text, bigint, interval, text, text, text, text, jsonb) IS
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
    min_offsets_per_batch bigint DEFAULT 0,
    max_trigger_delay     interval DEFAULT '15 min',
    dead_letter_topic     text DEFAULT NULL,
    value_format          text DEFAULT 'json',
    value_schema          text DEFAULT NULL,
    schema_registry       jsonb DEFAULT NULL)
RETURNS bigint
AS 'MODULE_PATHNAME', 'kafka_sink_api_call'
LANGUAGE C VOLATILE;
REVOKE ALL ON FUNCTION kafka_sink.create_pipeline(text, text, text, text[], text, jsonb, text[], text, text, regprocedure, text, boolean, bigint, bigint, interval, integer, jsonb, boolean, jsonb, text, boolean, text, jsonb, text, interval, text, text, bigint, interval, text, text, text, jsonb) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION kafka_sink.create_pipeline(text, text, text, text[], text, jsonb, text[], text, text, regprocedure, text, boolean, bigint, bigint, interval, integer, jsonb, boolean, jsonb, text, boolean, text, jsonb, text, interval, text, text, bigint, interval, text, text, text, jsonb) TO kafka_sink_admin;
COMMENT ON FUNCTION kafka_sink.create_pipeline(text, text, text, text[], text, jsonb, text[], text, text, regprocedure, text, boolean, bigint, bigint, interval, integer, jsonb, boolean, jsonb, text, boolean, text, jsonb, text, interval, text, text, bigint, interval, text, text, text, jsonb) IS
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
    min_offsets_per_batch bigint DEFAULT NULL,
    max_trigger_delay     interval DEFAULT NULL,
    dead_letter_topic     text DEFAULT NULL,
    value_format          text DEFAULT NULL,
    key_format            text DEFAULT NULL,
    value_schema          text DEFAULT NULL,
    schema_registry       jsonb DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'kafka_sink_api_call'
LANGUAGE C VOLATILE;
REVOKE ALL ON FUNCTION kafka_sink.alter_pipeline(text, bigint, bigint, interval, integer, jsonb, text, boolean, text, bigint, interval, text, text, text, text, jsonb) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION kafka_sink.alter_pipeline(text, bigint, bigint, interval, integer, jsonb, text, boolean, text, bigint, interval, text, text, text, text, jsonb) TO kafka_sink_admin;
COMMENT ON FUNCTION kafka_sink.alter_pipeline(text, bigint, bigint, interval, integer, jsonb, text, boolean, text, bigint, interval, text, text, text, text, jsonb) IS
'Changes a pipeline''s tunables, options, bootstrap servers, starting offsets, dead-letter topic or formats; its workers restart with the new definition. A kafka_options key with a JSON null removes that option; schema_registry replaces the registry whole (a JSON null removes it).';

-- the pipelines view: the formats at the end, the registry with its
-- secret masked; kafka_options no longer lists the registry's secret
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
       p.min_offsets_per_batch, p.max_trigger_delay, p.dead_letter_topic,
       p.value_format, p.value_schema,
       p.schema_registry || coalesce((SELECT jsonb_object_agg(substr(s.name, 17), '********')
                                        FROM kafka_sink.secrets s
                                       WHERE s.pipeline_id = p.id AND s.name LIKE 'schema\_registry.%'), '{}')
           AS schema_registry
  FROM kafka_sink.pipeline_definitions p;
COMMENT ON VIEW kafka_sink.pipelines IS
'The pipelines the current role can see, with their definitions and states; secret kafka_options and the schema registry''s secret are shown as ********.';

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

-- message_fate and message_fates (lineage, which met the formats here):
-- a key in Avro or in a registry's wire format is decoded by the worker
-- only, so they tell 'applied or superseded' instead of failing on bytes
-- that are not JSON text
CREATE OR REPLACE FUNCTION kafka_sink.message_fate(pipeline text, topic text, partition integer, "offset" bigint)
RETURNS TABLE (fate text, batch_id bigint, detail text)
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    p kafka_sink.pipeline_definitions;
    q kafka_sink.quarantine;
    committed bigint;
    b_id bigint;
    msg record;
    v jsonb;
    cond text;
    row_batch bigint;
    row_offset bigint;
    row_topic text;
    row_partition int;
    has_lineage boolean;
    keycol text;
BEGIN
    p := kafka_sink._get_pipeline(pipeline);
    SELECT o.next_offset INTO committed FROM kafka_sink.offsets o
     WHERE o.pipeline_id = p.id AND o.topic = message_fate.topic AND o.partition = message_fate.partition;
    IF committed IS NULL OR message_fate."offset" >= committed THEN
        RETURN QUERY SELECT 'pending'::text, NULL::bigint, 'not read yet'::text;
        RETURN;
    END IF;
    SELECT x.batch_id INTO b_id FROM kafka_sink.batches x, jsonb_array_elements(x.ranges) g
     WHERE x.pipeline_id = p.id AND g->>'topic' = message_fate.topic AND (g->>'partition')::int = message_fate.partition
       AND message_fate."offset" >= (g->>'start')::bigint AND message_fate."offset" < (g->>'end')::bigint LIMIT 1;
    IF EXISTS (SELECT 1 FROM kafka_sink.data_loss d WHERE d.pipeline_id = p.id AND d.topic = message_fate.topic
                 AND d.partition = message_fate.partition AND d.kind = 'deleted'
                 AND message_fate."offset" >= d.expected_offset AND message_fate."offset" < d.available_offset) THEN
        RETURN QUERY SELECT 'lost'::text, b_id, 'deleted from Kafka before it was read (fail_on_data_loss = false)'::text;
        RETURN;
    END IF;
    SELECT * INTO q FROM kafka_sink.quarantine x
     WHERE x.pipeline_id = p.id AND x.topic = message_fate.topic AND x.partition = message_fate.partition
       AND x.message_offset = message_fate."offset";
    IF FOUND AND q.replayed_at IS NULL THEN
        RETURN QUERY SELECT 'quarantined'::text, q.batch_id, q.reason || ': ' || q.detail;
        RETURN;
    END IF;
    IF p.target IS NULL THEN
        RETURN QUERY SELECT 'landed'::text, b_id, 'bronze only'::text;
        RETURN;
    END IF;
    IF p.mode <> 'merge' THEN
        RETURN QUERY SELECT CASE p.mode WHEN 'append' THEN 'appended' ELSE 'passed to the batch function' END, b_id, NULL::text;
        RETURN;
    END IF;
    has_lineage := (SELECT count(*) FROM pg_attribute a WHERE a.attrelid = p.target AND NOT a.attisdropped
                      AND a.attname IN ('_kafka_topic', '_kafka_partition', '_kafka_offset', '_kafka_batch_id')) = 4;
    SELECT * INTO msg FROM kafka_sink._bronze_message(p.bronze, topic, partition, "offset");
    IF NOT has_lineage OR msg IS NULL THEN
        RETURN QUERY SELECT 'applied or superseded'::text, b_id,
            'lineage columns on the target and a bronze table are needed to tell more'::text;
        RETURN;
    END IF;
    -- a key in Avro or in a registry's wire format is decoded by the worker
    -- only (src/format.c): the raw bytes are not JSON text
    IF p.key_format = 'avro' OR (p.key_format = 'none' AND p.value_format <> 'json') THEN
        RETURN QUERY SELECT 'applied or superseded'::text, b_id,
            format('the key of a message in value_format %s or key_format %s is not decoded here',
                   p.value_format, p.key_format);
        RETURN;
    END IF;
    -- the message's key, decoded the way the pipeline does for the common cases
    IF p.key_format = 'string' THEN
        v := jsonb_build_object(p.key_columns[1], convert_from(msg.key, 'UTF8'));
    ELSIF p.key_format = 'json' THEN
        v := convert_from(msg.key, 'UTF8')::jsonb;
    ELSIF msg.value IS NOT NULL THEN
        v := '{}';
        FOREACH keycol IN ARRAY p.key_columns LOOP
            v := v || jsonb_build_object(keycol, convert_from(msg.value, 'UTF8')::jsonb
                        #> string_to_array(coalesce(p.columns->>keycol, p.columns->keycol->>'path', keycol), '.'));
        END LOOP;
    END IF;
    SELECT string_agg(format('t.%1$I = k.%1$I', c), ' AND ') INTO cond FROM unnest(p.key_columns) c;
    EXECUTE format('SELECT t._kafka_topic, t._kafka_partition, t._kafka_offset, t._kafka_batch_id'
                   ' FROM %s t, jsonb_populate_record(NULL::%s, $1) k WHERE %s', p.target, p.target, cond)
       INTO row_topic, row_partition, row_offset, row_batch USING v;
    IF row_offset IS NULL THEN
        RETURN QUERY SELECT 'deleted'::text, b_id, format('no row for key %s', v);
    ELSIF row_topic = topic AND row_partition = partition AND row_offset = "offset" THEN
        RETURN QUERY SELECT 'applied'::text, b_id, format('the current source of the row with key %s', v);
    ELSIF row_batch = b_id THEN
        RETURN QUERY SELECT 'superseded'::text, b_id,
            format('offset %s of the same batch won for key %s', row_offset, v);
    ELSIF row_batch < b_id THEN
        RETURN QUERY SELECT 'stale'::text, b_id,
            format('the row for key %s (from batch %s) was newer', v, row_batch);
    ELSE
        RETURN QUERY SELECT 'overwritten'::text, b_id,
            format('replaced by offset %s in batch %s', row_offset, row_batch);
    END IF;
END
$$;

CREATE OR REPLACE FUNCTION kafka_sink.message_fates(pipeline text, topic text DEFAULT NULL, partition integer DEFAULT NULL,
                                         from_offset bigint DEFAULT NULL, to_offset bigint DEFAULT NULL)
RETURNS SETOF kafka_sink.message_fate_row
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    p kafka_sink.pipeline_definitions;
    has_lineage boolean;
    keyexpr text;
    keycond text;
    body text;
    classify text;
BEGIN
    PERFORM kafka_sink._require_admin();
    p := kafka_sink._get_pipeline(pipeline);
    IF from_offset < 0 OR to_offset < 0 THEN
        RAISE EXCEPTION 'offsets cannot be negative'
            USING ERRCODE = 'invalid_parameter_value', HINT = 'Pass from_offset and to_offset as Kafka offsets (0 or more).';
    END IF;
    IF from_offset > to_offset THEN
        RAISE EXCEPTION 'from_offset % is past to_offset %', from_offset, to_offset
            USING ERRCODE = 'invalid_parameter_value', HINT = 'Both ends of the range are included.';
    END IF;
    IF partition < 0 THEN
        RAISE EXCEPTION 'partition cannot be negative'
            USING ERRCODE = 'invalid_parameter_value', HINT = 'Kafka partitions are numbered from 0.';
    END IF;
    has_lineage := p.target IS NOT NULL AND (SELECT count(*) FROM pg_attribute a
                       WHERE a.attrelid = p.target AND NOT a.attisdropped AND a.attnum > 0
                         AND a.attname IN ('_kafka_topic', '_kafka_partition', '_kafka_offset', '_kafka_batch_id')) = 4;

    -- the messages of the range: per partition with a checkpoint, from
    -- from_offset (else the first checkpoint or the first retained batch)
    -- to to_offset (else the last committed offset); offsets at or past
    -- the checkpoint are pending, so only listed when to_offset asks
    body := $q$
    WITH parts AS MATERIALIZED (
        SELECT o.topic, o.partition, o.next_offset,
               coalesce($4, least(o.start_offset, (
                   SELECT min(r.start) FROM kafka_sink.batches b,
                          jsonb_to_recordset(b.ranges) AS r(topic text, partition integer, start bigint)
                    WHERE b.pipeline_id = $1 AND r.topic = o.topic AND r.partition = o.partition)), o.next_offset) AS lo,
               coalesce($5, o.next_offset - 1) AS hi
          FROM kafka_sink.offsets o
         WHERE o.pipeline_id = $1 AND ($2::text IS NULL OR o.topic = $2) AND ($3::int IS NULL OR o.partition = $3)),
    in_batch AS MATERIALIZED (
        SELECT pa.topic, pa.partition, g.o AS "offset", max(b.batch_id) AS batch_id
          FROM kafka_sink.batches b,
               jsonb_to_recordset(b.ranges) AS r(topic text, partition integer, start bigint, "end" bigint),
               parts pa,
               generate_series(greatest(r.start, pa.lo), least(r."end" - 1, pa.hi, pa.next_offset - 1)) AS g(o)
         WHERE b.pipeline_id = $1 AND r.topic = pa.topic AND r.partition = pa.partition
         GROUP BY 1, 2, 3),
    lost AS MATERIALIZED (
        SELECT DISTINCT pa.topic, pa.partition, g.o AS "offset"
          FROM kafka_sink.data_loss d
          JOIN parts pa ON pa.topic = d.topic AND pa.partition = d.partition,
               generate_series(greatest(d.expected_offset, pa.lo), least(d.available_offset - 1, pa.hi)) AS g(o)
         WHERE d.pipeline_id = $1 AND d.kind = 'deleted'),
    m AS MATERIALIZED (
        SELECT pa.topic, pa.partition, g.o AS "offset", g.o >= pa.next_offset AS pending,
               ib.batch_id, l."offset" IS NOT NULL AS lost,
               q.batch_id AS q_batch, q.reason || ': ' || q.detail AS q_detail
          FROM parts pa
         CROSS JOIN LATERAL generate_series(pa.lo, pa.hi) AS g(o)
          LEFT JOIN in_batch ib ON ib.topic = pa.topic AND ib.partition = pa.partition AND ib."offset" = g.o
          LEFT JOIN lost l ON l.topic = pa.topic AND l.partition = pa.partition AND l."offset" = g.o
          LEFT JOIN kafka_sink.quarantine q
                 ON q.pipeline_id = $1 AND q.topic = pa.topic AND q.partition = pa.partition
                AND q.message_offset = g.o AND q.replayed_at IS NULL)
    $q$;

    classify := $q$
        CASE WHEN m.pending THEN 'pending'
             WHEN m.lost THEN 'lost'
             WHEN m.q_batch IS NOT NULL THEN 'quarantined' $q$;

    -- (a key in Avro or in a registry's wire format is decoded by the worker
    -- only: as message_fate, no more than 'applied or superseded')
    IF p.target IS NULL OR p.mode <> 'merge' OR NOT has_lineage OR p.bronze IS NULL
       OR p.key_format = 'avro' OR (p.key_format = 'none' AND p.value_format <> 'json') THEN
        RETURN QUERY EXECUTE body || format($q$
        SELECT m.topic, m.partition, m."offset",
               %s ELSE %L END,
               CASE WHEN m.q_batch IS NOT NULL AND NOT m.pending AND NOT m.lost THEN m.q_batch
                    WHEN NOT m.pending THEN m.batch_id END,
               CASE WHEN m.pending THEN 'not read yet'
                    WHEN m.lost THEN 'deleted from Kafka before it was read (fail_on_data_loss = false)'
                    WHEN m.q_batch IS NOT NULL THEN m.q_detail
                    ELSE %L END
          FROM m ORDER BY 1, 2, 3 $q$,
            classify,
            CASE WHEN p.target IS NULL THEN 'landed' WHEN p.mode = 'append' THEN 'appended'
                 WHEN p.mode = 'function' THEN 'passed to the batch function' ELSE 'applied or superseded' END,
            CASE WHEN p.target IS NULL THEN 'bronze only' WHEN p.mode <> 'merge' THEN NULL
                 WHEN has_lineage AND p.bronze IS NOT NULL
                 THEN format('the key of a message in value_format %s or key_format %s is not decoded here',
                             p.value_format, p.key_format)
                 ELSE 'lineage columns on the target and a bronze table are needed to tell more' END)
            USING p.id, topic, partition, from_offset, to_offset;
        RETURN;
    END IF;

    -- the message's key, decoded as message_fate() decodes it
    IF p.key_format = 'string' THEN
        keyexpr := format('jsonb_build_object(%L, convert_from(br.key, ''UTF8''))', p.key_columns[1]);
    ELSIF p.key_format = 'json' THEN
        keyexpr := 'convert_from(br.key, ''UTF8'')::jsonb';
    ELSE
        SELECT 'CASE WHEN br.value IS NOT NULL THEN jsonb_build_object(' ||
               string_agg(format('%L, (convert_from(br.value, ''UTF8'')::jsonb) #> %L::text[]', c,
                                 string_to_array(coalesce(p.columns->c->>'path', p.columns->>c, c), '.')), ', ')
               || ') END'
          INTO keyexpr FROM unnest(p.key_columns) c;
    END IF;
    SELECT string_agg(format('t.%1$I = (mk.k).%1$I', c), ' AND ') INTO keycond FROM unnest(p.key_columns) c;

    RETURN QUERY EXECUTE body || format($q$,
    mk AS (
        SELECT m.*, br."offset" IS NOT NULL AS has_msg, v.v, jsonb_populate_record(NULL::%1$s, v.v) AS k
          FROM m
          LEFT JOIN %2$s br ON NOT m.pending AND NOT m.lost AND m.q_batch IS NULL
                           AND br.topic = m.topic COLLATE "C" AND br.partition = m.partition AND br."offset" = m."offset"
          CROSS JOIN LATERAL (SELECT CASE WHEN br."offset" IS NOT NULL THEN %3$s END AS v) v)
    SELECT mk.topic, mk.partition, mk."offset",
           %4$s
                WHEN NOT mk.has_msg THEN 'applied or superseded'
                WHEN t._kafka_offset IS NULL THEN 'deleted'
                WHEN t._kafka_topic = mk.topic AND t._kafka_partition = mk.partition AND t._kafka_offset = mk."offset" THEN 'applied'
                WHEN t._kafka_batch_id = mk.batch_id THEN 'superseded'
                WHEN t._kafka_batch_id < mk.batch_id THEN 'stale'
                ELSE 'overwritten' END,
           CASE WHEN mk.q_batch IS NOT NULL AND NOT mk.pending AND NOT mk.lost THEN mk.q_batch
                WHEN NOT mk.pending THEN mk.batch_id END,
           CASE WHEN mk.pending THEN 'not read yet'
                WHEN mk.lost THEN 'deleted from Kafka before it was read (fail_on_data_loss = false)'
                WHEN mk.q_batch IS NOT NULL THEN mk.q_detail
                WHEN NOT mk.has_msg THEN 'lineage columns on the target and a bronze table are needed to tell more'
                WHEN t._kafka_offset IS NULL THEN format('no row for key %%s', mk.v)
                WHEN t._kafka_topic = mk.topic AND t._kafka_partition = mk.partition AND t._kafka_offset = mk."offset"
                     THEN format('the current source of the row with key %%s', mk.v)
                WHEN t._kafka_batch_id = mk.batch_id THEN format('offset %%s of the same batch won for key %%s', t._kafka_offset, mk.v)
                WHEN t._kafka_batch_id < mk.batch_id THEN format('the row for key %%s (from batch %%s) was newer', mk.v, t._kafka_batch_id)
                ELSE format('replaced by offset %%s in batch %%s', t._kafka_offset, t._kafka_batch_id) END
      FROM mk
      LEFT JOIN %1$s t ON mk.has_msg AND %5$s
     ORDER BY 1, 2, 3 $q$,
        p.target, p.bronze, keyexpr, replace(classify, 'm.', 'mk.'), keycond)
        USING p.id, topic, partition, from_offset, to_offset;
END
$$;

-- ---- end of formats ----

-- ---- CDC: debezium envelope ----
--
-- envelope 'plain' (as before) or 'debezium' (change events: op, before,
-- after, source), on_truncate 'apply' | 'ignore' | 'fail'; the quarantine
-- reason invalid_envelope; kafka_sink.cdc_deletions (the positions of
-- deleted keys and truncates, so that replayed older events are stale).
-- See "CDC: the Debezium envelope and its guards" in docs/design-notes.md.
-- The install script has the same in its parts (10_tables, 20_security,
-- 40_, 51_, 52_, 60_).

ALTER TABLE kafka_sink.pipeline_definitions
    ADD COLUMN envelope text NOT NULL DEFAULT 'plain'
        CONSTRAINT pipeline_definitions_envelope_check CHECK (envelope IN ('plain', 'debezium')),
    ADD COLUMN on_truncate text NOT NULL DEFAULT 'apply'
        CONSTRAINT pipeline_definitions_on_truncate_check CHECK (on_truncate IN ('apply', 'ignore', 'fail'));
COMMENT ON COLUMN kafka_sink.pipeline_definitions.envelope IS
    'What a message means: plain (the value is the row) or debezium (a change event: op, before, after, source)';
COMMENT ON COLUMN kafka_sink.pipeline_definitions.on_truncate IS
    'envelope debezium: what a truncate event does: apply (delete the rows older than it), ignore, or fail (the pipeline fails)';

ALTER TABLE kafka_sink.quarantine DROP CONSTRAINT quarantine_reason_check;
ALTER TABLE kafka_sink.quarantine ADD CONSTRAINT quarantine_reason_check CHECK (reason IN (
    'invalid_json', 'not_an_object', 'missing_required_field',
    'invalid_value', 'unknown_schema_version', 'null_key',
    'constraint_violation', 'value_too_large', 'rejected_by_target',
    'unknown_schema_id', 'not_wire_format', 'invalid_avro',
    'invalid_envelope'));
COMMENT ON COLUMN kafka_sink.quarantine.reason IS
    'Why the message was not applied: invalid_json, not_an_object, missing_required_field, invalid_value, '
    'unknown_schema_version, null_key, constraint_violation (a constraint or data error of the row), '
    'value_too_large, rejected_by_target (a trigger, row level security policy or check option of the target '
    'rejected the row), unknown_schema_id (the registry does not know the frame''s schema id), not_wire_format '
    '(no magic byte 0 and schema id), invalid_avro (the payload does not decode with its schema), '
    'invalid_envelope (a change event without a known op, or without the row its op needs)';

CREATE TABLE kafka_sink.cdc_deletions (
    pipeline_id bigint NOT NULL REFERENCES kafka_sink.pipeline_definitions (id) ON DELETE CASCADE,
    target      regclass NOT NULL,
    key         jsonb NOT NULL,
    position    numeric NOT NULL,
    recorded_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (pipeline_id, target, key)
);
CREATE INDEX ON kafka_sink.cdc_deletions (pipeline_id, target, recorded_at);
SELECT pg_catalog.pg_extension_config_dump('kafka_sink.cdc_deletions', '');
COMMENT ON TABLE kafka_sink.cdc_deletions IS
'Change events (envelope debezium): the source position of the last delete of each key and of the last truncate (key null) per pipeline and target, so that replayed older events do not bring rows back; deleted keys are pruned after event_id_retention.';
ALTER TABLE kafka_sink.cdc_deletions ENABLE ROW LEVEL SECURITY;
CREATE POLICY own_pipelines ON kafka_sink.cdc_deletions
    USING (EXISTS (SELECT 1 FROM kafka_sink.pipeline_definitions p WHERE p.id = pipeline_id))
    WITH CHECK (EXISTS (SELECT 1 FROM kafka_sink.pipeline_definitions p WHERE p.id = pipeline_id));
REVOKE ALL ON kafka_sink.cdc_deletions FROM PUBLIC;
GRANT SELECT, INSERT, UPDATE, DELETE ON kafka_sink.cdc_deletions TO kafka_sink_admin;
CREATE TRIGGER catalog_guard BEFORE INSERT OR UPDATE OR DELETE OR TRUNCATE ON kafka_sink.cdc_deletions
    FOR EACH STATEMENT EXECUTE FUNCTION kafka_sink._catalog_guard();
ALTER TABLE kafka_sink.cdc_deletions ENABLE ALWAYS TRIGGER catalog_guard;

-- envelope and on_truncate (issue 16).  envelope => 'debezium' needs a
-- merge target whose order column takes the source position: a numeric
-- column, _kafka_source_position unless order_column names another one.
-- Returns the order column the pipeline gets.  The worker checks the same
-- again when it opens the target (target.c).
CREATE FUNCTION kafka_sink._check_envelope(envelope text, on_truncate text, target regclass,
                                           order_column text, mode text, value_format text)
RETURNS text
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    col text := order_column;
    typ regtype;
BEGIN
    IF envelope IS NULL OR envelope NOT IN ('plain', 'debezium') THEN
        RAISE EXCEPTION 'invalid envelope "%"', envelope
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'envelope is ''plain'' (the value is the row) or ''debezium'' (change events).';
    END IF;
    IF on_truncate IS NULL OR on_truncate NOT IN ('apply', 'ignore', 'fail') THEN
        RAISE EXCEPTION 'invalid on_truncate "%"', on_truncate
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'on_truncate is ''apply'', ''ignore'' or ''fail''.';
    END IF;
    IF envelope = 'plain' THEN
        IF on_truncate <> 'apply' THEN
            RAISE EXCEPTION 'on_truncate needs envelope debezium'
                USING ERRCODE = 'invalid_parameter_value',
                      HINT = 'Only change events carry truncates; pass envelope => ''debezium'' as well.';
        END IF;
        RETURN order_column;
    END IF;
    IF target IS NULL OR mode IS DISTINCT FROM 'merge' THEN
        RAISE EXCEPTION 'envelope debezium needs a target in mode merge'
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Change events are applied by key: pass target => ''schema.table'' and mode => ''merge''.';
    END IF;
    IF value_format IS DISTINCT FROM 'json' THEN
        RAISE EXCEPTION 'envelope debezium supports value_format json only'
            USING ERRCODE = 'feature_not_supported',
                  HINT = 'Use Kafka Connect''s JsonConverter (with or without schemas.enable).';
    END IF;
    col := coalesce(col, '_kafka_source_position');
    SELECT a.atttypid::regtype INTO typ FROM pg_attribute a
     WHERE a.attrelid = target AND a.attname = col AND a.attnum > 0 AND NOT a.attisdropped;
    IF typ IS NULL THEN
        RAISE EXCEPTION 'target % has no column "%" for the source position', target, col
            USING ERRCODE = 'undefined_column',
                  DETAIL = 'With envelope debezium every row keeps the source position of its last change, which orders replayed and re-sent events.',
                  HINT = format('ALTER TABLE %s ADD COLUMN %I numeric', target, col);
    END IF;
    IF (SELECT CASE WHEN t.typtype = 'd' THEN t.typbasetype ELSE t.oid END FROM pg_type t WHERE t.oid = typ)
       <> 'numeric'::regtype THEN
        RAISE EXCEPTION 'source position column "%" of % must be numeric, not %', col, target, typ
            USING ERRCODE = 'datatype_mismatch',
                  HINT = 'The source position (a PostgreSQL LSN, a MySQL binlog position) does not fit a smaller type.';
    END IF;
    RETURN col;
END
$$;
COMMENT ON FUNCTION kafka_sink._check_envelope(text, text, regclass, text, text, text) IS
'Internal: checks envelope and on_truncate; for envelope debezium returns the order column taking the source position (_kafka_source_position by default), which must be a numeric column of the target.';

DROP FUNCTION kafka_sink.create_pipeline(text, text, text, text[], text, jsonb, text[], text, text, regprocedure, text, boolean, bigint, bigint, interval, integer, jsonb, boolean, jsonb, text, boolean, text, jsonb, text, interval, text, text, bigint, interval, text, text, text, jsonb);
DROP FUNCTION kafka_sink._api_create_pipeline(text, text, text, text[], text, jsonb, text[], text, text, regprocedure, text, boolean, bigint, bigint, interval, integer, jsonb, boolean, jsonb, text, boolean, text, jsonb, text, interval, text, text, bigint, interval, text, text, text, jsonb);
DROP FUNCTION kafka_sink.alter_pipeline(text, bigint, bigint, interval, integer, jsonb, text, boolean, text, bigint, interval, text, text, text, text, jsonb);
DROP FUNCTION kafka_sink._api_alter_pipeline(text, bigint, bigint, interval, integer, jsonb, text, boolean, text, bigint, interval, text, text, text, text, jsonb);

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
    min_offsets_per_batch bigint DEFAULT 0,
    max_trigger_delay     interval DEFAULT '15 min',
    dead_letter_topic     text DEFAULT NULL,
    value_format          text DEFAULT 'json',
    value_schema          text DEFAULT NULL,
    schema_registry       jsonb DEFAULT NULL,
    envelope              text DEFAULT 'plain',
    on_truncate           text DEFAULT 'apply')
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
        -- envelope debezium: the order column takes the source position
        order_column := kafka_sink._check_envelope(envelope, on_truncate, target_oid, order_column, mode,
                                                   value_format);
        key_columns := kafka_sink._check_target(target_oid, key_columns, order_column, mode);
        -- Avro keys decode to the same fields as JSON keys (format.h)
        PERFORM kafka_sink._check_contract(target_oid, key_columns, columns,
                                           CASE key_format WHEN 'avro' THEN 'json' ELSE key_format END,
                                           delete_on_tombstone, schema_version_field,
                                           schema_versions, event_id, mode);
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

    INSERT INTO kafka_sink.pipeline_definitions AS p
        (name, owner, state, bootstrap_servers, subscribe, subscribe_pattern, assign,
         target, key_columns, order_column, mode, batch_function, starting_offsets,
         fail_on_data_loss, max_offsets_per_batch, max_batch_bytes, trigger_interval,
         workers, kafka_options, columns, key_format, delete_on_tombstone,
         schema_version_field, schema_versions, event_id, event_id_retention, bronze, ending_offsets,
         min_offsets_per_batch, max_trigger_delay, dead_letter_topic,
         value_format, value_schema, schema_registry, envelope, on_truncate)
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
         envelope, on_truncate)
    RETURNING p.id INTO new_id;

    plain_options := kafka_sink._split_secrets(new_id, kafka_options);
    UPDATE kafka_sink.pipeline_definitions p SET kafka_options = plain_options WHERE p.id = new_id;
    PERFORM kafka_sink._set_schema_registry(new_id, schema_registry);
    PERFORM kafka_sink._wake_launcher();
    RETURN new_id;
END
$$;

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
    max_trigger_delay     interval DEFAULT '15 min',
    dead_letter_topic     text DEFAULT NULL,
    value_format          text DEFAULT 'json',
    value_schema          text DEFAULT NULL,
    schema_registry       jsonb DEFAULT NULL,
    envelope              text DEFAULT 'plain',
    on_truncate           text DEFAULT 'apply')
RETURNS bigint
AS 'MODULE_PATHNAME', 'kafka_sink_api_call'
LANGUAGE C VOLATILE;
REVOKE ALL ON FUNCTION kafka_sink.create_pipeline(text, text, text, text[], text, jsonb, text[], text, text, regprocedure, text, boolean, bigint, bigint, interval, integer, jsonb, boolean, jsonb, text, boolean, text, jsonb, text, interval, text, text, bigint, interval, text, text, text, jsonb, text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION kafka_sink.create_pipeline(text, text, text, text[], text, jsonb, text[], text, text, regprocedure, text, boolean, bigint, bigint, interval, integer, jsonb, boolean, jsonb, text, boolean, text, jsonb, text, interval, text, text, bigint, interval, text, text, text, jsonb, text, text) TO kafka_sink_admin;
COMMENT ON FUNCTION kafka_sink.create_pipeline(text, text, text, text[], text, jsonb, text[], text, text, regprocedure, text, boolean, bigint, bigint, interval, integer, jsonb, boolean, jsonb, text, boolean, text, jsonb, text, interval, text, text, bigint, interval, text, text, text, jsonb, text, text) IS
'Creates a pipeline owned by the calling role (a member of kafka_sink_admin that can log in) and, unless start => false, starts it. Returns its id. envelope => ''debezium'' reads Debezium change events (the target keeps each row''s source position in _kafka_source_position numeric, or order_column); on_truncate says what their truncates do: apply, ignore or fail.';


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
    min_offsets_per_batch bigint DEFAULT NULL,
    max_trigger_delay     interval DEFAULT NULL,
    dead_letter_topic     text DEFAULT NULL,
    value_format          text DEFAULT NULL,
    key_format            text DEFAULT NULL,
    value_schema          text DEFAULT NULL,
    schema_registry       jsonb DEFAULT NULL,
    envelope              text DEFAULT NULL,
    on_truncate           text DEFAULT NULL)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    p kafka_sink.pipeline_definitions;
    k text;
    new_order_column text;
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

    IF num_nonnulls(value_format, key_format, value_schema, schema_registry) > 0 THEN
        PERFORM kafka_sink._alter_formats(p, value_format, key_format, value_schema, schema_registry);
    END IF;

    -- envelope and on_truncate as the pipeline will have them, with its
    -- (possibly just changed) value format
    new_order_column := p.order_column;
    IF num_nonnulls(envelope, on_truncate) > 0 THEN
        IF p.target IS NULL THEN
            RAISE EXCEPTION 'a bronze-only pipeline takes no decoding options'
                USING ERRCODE = 'invalid_parameter_value',
                      HINT = 'Pass a target to decode messages; a bronze-only pipeline only lands them raw.';
        END IF;
        new_order_column := kafka_sink._check_envelope(
            coalesce(_api_alter_pipeline.envelope, p.envelope),
            coalesce(_api_alter_pipeline.on_truncate,
                     CASE WHEN _api_alter_pipeline.envelope = 'plain' THEN 'apply' ELSE p.on_truncate END),
            p.target, p.order_column, p.mode,
            (SELECT x.value_format FROM kafka_sink.pipeline_definitions x WHERE x.id = p.id));
        PERFORM kafka_sink._check_target(p.target, p.key_columns, new_order_column, p.mode);
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
        generation = x.generation + 1,
        updated_at = now()
    WHERE x.id = p.id;
    PERFORM kafka_sink._wake_launcher();
END
$$;

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
    max_trigger_delay     interval DEFAULT NULL,
    dead_letter_topic     text DEFAULT NULL,
    value_format          text DEFAULT NULL,
    key_format            text DEFAULT NULL,
    value_schema          text DEFAULT NULL,
    schema_registry       jsonb DEFAULT NULL,
    envelope              text DEFAULT NULL,
    on_truncate           text DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'kafka_sink_api_call'
LANGUAGE C VOLATILE;
REVOKE ALL ON FUNCTION kafka_sink.alter_pipeline(text, bigint, bigint, interval, integer, jsonb, text, boolean, text, bigint, interval, text, text, text, text, jsonb, text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION kafka_sink.alter_pipeline(text, bigint, bigint, interval, integer, jsonb, text, boolean, text, bigint, interval, text, text, text, text, jsonb, text, text) TO kafka_sink_admin;
COMMENT ON FUNCTION kafka_sink.alter_pipeline(text, bigint, bigint, interval, integer, jsonb, text, boolean, text, bigint, interval, text, text, text, text, jsonb, text, text) IS
'Changes a pipeline''s tunables, options, bootstrap servers, starting offsets, dead-letter topic or formats; its workers restart with the new definition. A kafka_options key with a JSON null removes that option; schema_registry replaces the registry whole (a JSON null removes it). envelope and on_truncate: as for create_pipeline; switching to envelope debezium needs the source position column.';

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
       p.min_offsets_per_batch, p.max_trigger_delay, p.dead_letter_topic,
       p.value_format, p.value_schema,
       p.schema_registry || coalesce((SELECT jsonb_object_agg(substr(s.name, 17), '********')
                                        FROM kafka_sink.secrets s
                                       WHERE s.pipeline_id = p.id AND s.name LIKE 'schema\_registry.%'), '{}')
           AS schema_registry,
       p.envelope, p.on_truncate
  FROM kafka_sink.pipeline_definitions p;

-- as 90_grants.sql leaves them: the bodies are nobody's to call, the
-- validator is kafka_sink_admin's
REVOKE ALL ON FUNCTION kafka_sink._api_create_pipeline(text, text, text, text[], text, jsonb, text[], text, text, regprocedure, text, boolean, bigint, bigint, interval, integer, jsonb, boolean, jsonb, text, boolean, text, jsonb, text, interval, text, text, bigint, interval, text, text, text, jsonb, text, text) FROM PUBLIC, kafka_sink_admin;
COMMENT ON FUNCTION kafka_sink._api_create_pipeline(text, text, text, text[], text, jsonb, text[], text, text, regprocedure, text, boolean, bigint, bigint, interval, integer, jsonb, boolean, jsonb, text, boolean, text, jsonb, text, interval, text, text, bigint, interval, text, text, text, jsonb, text, text) IS
'The SQL body of kafka_sink.create_pipeline, called only through it (with the catalog writes allowed).';
REVOKE ALL ON FUNCTION kafka_sink._api_alter_pipeline(text, bigint, bigint, interval, integer, jsonb, text, boolean, text, bigint, interval, text, text, text, text, jsonb, text, text) FROM PUBLIC, kafka_sink_admin;
COMMENT ON FUNCTION kafka_sink._api_alter_pipeline(text, bigint, bigint, interval, integer, jsonb, text, boolean, text, bigint, interval, text, text, text, text, jsonb, text, text) IS
'The SQL body of kafka_sink.alter_pipeline, called only through it (with the catalog writes allowed).';
REVOKE ALL ON FUNCTION kafka_sink._check_envelope(text, text, regclass, text, text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION kafka_sink._check_envelope(text, text, regclass, text, text, text) TO kafka_sink_admin;
-- ---- end of CDC: debezium envelope ----

-- ---- routing: one pipeline writing many tables (issue 16) ----
--
-- target may be a template with {placeholders} (kept in target_template),
-- targets is an explicit routing map; create_targets creates a missing
-- target from the message's embedded schema, evolve => 'add_columns' adds
-- columns for new fields.  Quarantine rows record their target; new
-- reasons no_target, target_refused, schema_change_refused.  status shows
-- the last batch's per-target counts.  See "Routing" in
-- docs/design-notes.md.  The install script has the same in its parts
-- (10_tables, 30_, 40_, 50_, 51_, 52_, 60_).

ALTER TABLE kafka_sink.pipeline_definitions
    ADD COLUMN target_template text
        CONSTRAINT pipeline_definitions_target_template_check CHECK (strpos(target_template, '{') > 0),
    ADD COLUMN targets jsonb
        CONSTRAINT pipeline_definitions_targets_check CHECK (jsonb_typeof(targets) = 'object'),
    ADD COLUMN create_targets boolean NOT NULL DEFAULT false,
    ADD COLUMN evolve text NOT NULL DEFAULT 'none'
        CONSTRAINT pipeline_definitions_evolve_check CHECK (evolve IN ('none', 'add_columns'));
DO $$
DECLARE
    c name;
BEGIN
    SELECT conname INTO STRICT c FROM pg_catalog.pg_constraint
     WHERE conrelid = 'kafka_sink.pipeline_definitions'::regclass AND contype = 'c'
       AND pg_catalog.pg_get_constraintdef(oid) ~ 'target IS NOT NULL\) OR \(bronze IS NOT NULL'
       AND pg_catalog.pg_get_constraintdef(oid) !~ 'target_template';
    EXECUTE format('ALTER TABLE kafka_sink.pipeline_definitions DROP CONSTRAINT %I', c);
END
$$;
ALTER TABLE kafka_sink.pipeline_definitions ADD CONSTRAINT pipeline_definitions_target_needed_check
    CHECK (mode = 'function' OR target IS NOT NULL OR bronze IS NOT NULL
           OR target_template IS NOT NULL OR targets IS NOT NULL);

ALTER TABLE kafka_sink.quarantine ADD COLUMN target text;
ALTER TABLE kafka_sink.quarantine DROP CONSTRAINT quarantine_reason_check;
ALTER TABLE kafka_sink.quarantine ADD CONSTRAINT quarantine_reason_check CHECK (reason IN (
    'invalid_json', 'not_an_object', 'missing_required_field',
    'invalid_value', 'unknown_schema_version', 'null_key',
    'constraint_violation', 'value_too_large', 'rejected_by_target',
    'unknown_schema_id', 'not_wire_format', 'invalid_avro', 'invalid_envelope',
    'no_target', 'target_refused', 'schema_change_refused'));
COMMENT ON COLUMN kafka_sink.quarantine.reason IS
    'Why the message was not applied: invalid_json, not_an_object, missing_required_field, invalid_value, '
    'unknown_schema_version, null_key, constraint_violation (a constraint or data error of the row), '
    'value_too_large, rejected_by_target (a trigger, row level security policy or check option of the target '
    'rejected the row), unknown_schema_id (the registry does not know the frame''s schema id), not_wire_format '
    '(no magic byte 0 and schema id), invalid_avro (the payload does not decode with its schema), '
    'invalid_envelope (a change event without a known op, or without the row its op needs), '
    'no_target (routing: the message''s target could not be named or does not exist), target_refused '
    '(routing: the target exists but the pipeline may not write it: see the detail), schema_change_refused '
    '(evolve: a change of the embedded schema that kafka_sink will not make)';
COMMENT ON COLUMN kafka_sink.quarantine.target IS
    'The table the message was routed to, or would have been (quoted, schema-qualified); NULL for rows written before 0.2.0';
COMMENT ON COLUMN kafka_sink.pipeline_definitions.target_template IS
    'A target with {placeholders} ({topic}, or a JSON path of the value such as {source.table}), expanded per message; NULL: none';
COMMENT ON COLUMN kafka_sink.pipeline_definitions.targets IS
    'Explicit routing map {"<topic or source schema.table>": "<schema.table>"}, tried before target; NULL: none';
COMMENT ON COLUMN kafka_sink.pipeline_definitions.create_targets IS
    'Whether a missing routed target is created (as the owner, in the batch''s transaction) from the event''s embedded schema';
COMMENT ON COLUMN kafka_sink.pipeline_definitions.evolve IS
    'none, or add_columns: nullable columns added to a routed target for new fields of the embedded schema (never dropped or narrowed)';

-- Routing (route.c): the parser of target templates that the worker uses.
CREATE FUNCTION kafka_sink._check_target_template(template text)
RETURNS void
AS 'MODULE_PATHNAME', 'kafka_sink_check_target_template'
LANGUAGE C STRICT
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION kafka_sink._check_target_template(text) IS
'Internal: raises unless a target template ({topic}, {a.json.path}, literal text, at most one schema dot outside braces) parses as the worker parses it.';

-- Routing (issue 16): a target template, the targets map, create_targets
-- and evolve, as create_pipeline gets them.  The worker parses and checks
-- them again where it uses them (route.c); each routed table is checked
-- with kafka_sink._check_target when the worker first writes it.
CREATE FUNCTION kafka_sink._check_routing(template text, targets jsonb, create_targets boolean,
                                          evolve text, mode text, value_format text)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    e record;
    parts text[];
BEGIN
    IF evolve NOT IN ('none', 'add_columns') THEN
        RAISE EXCEPTION 'invalid evolve "%"', evolve
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'evolve is ''none'' or ''add_columns''.';
    END IF;
    IF (create_targets OR evolve <> 'none') AND template IS NULL AND targets IS NULL THEN
        RAISE EXCEPTION 'create_targets and evolve need routing'
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Pass a target template such as ''replica.{source.table}'', or a targets map.';
    END IF;
    IF (create_targets OR evolve <> 'none') AND value_format <> 'json' THEN
        RAISE EXCEPTION 'create_targets and evolve read the embedded schema of JSON values'
            USING ERRCODE = 'feature_not_supported',
                  HINT = 'Use value_format json with values as Kafka Connect''s JsonConverter writes them (schemas.enable), or create the targets first.';
    END IF;
    IF mode = 'function' THEN
        RAISE EXCEPTION 'mode function cannot route to many targets'
            USING ERRCODE = 'feature_not_supported',
                  DETAIL = 'A batch function takes the rows of one table type.',
                  HINT = 'Use mode merge or append with a target template or a targets map.';
    END IF;
    IF template IS NOT NULL THEN
        PERFORM kafka_sink._check_target_template(template);
        IF value_format <> 'json' AND template ~ '\{(?!topic\})' THEN
            RAISE EXCEPTION 'target template "%" reads value fields, which needs value_format json', template
                USING ERRCODE = 'feature_not_supported',
                      HINT = 'With another value_format, route by {topic} or with a targets map keyed by topic.';
        END IF;
    END IF;
    IF targets IS NOT NULL THEN
        IF jsonb_typeof(targets) <> 'object' OR targets = '{}' THEN
            RAISE EXCEPTION 'targets must be a non-empty JSON object'
                USING ERRCODE = 'invalid_parameter_value',
                      HINT = 'Pass targets => ''{"orders": "public.orders", "inventory.items": "replica.items"}''.';
        END IF;
        FOR e IN SELECT key, value FROM jsonb_each(targets) LOOP
            IF e.key = '' OR jsonb_typeof(e.value) <> 'string' THEN
                RAISE EXCEPTION 'targets entry "%" must map a non-empty name to a table name', e.key
                    USING ERRCODE = 'invalid_parameter_value',
                          HINT = 'Each key is a topic or a source schema.table, each value a schema-qualified table name such as "public.orders".';
            END IF;
            BEGIN
                parts := parse_ident(e.value #>> '{}');
            EXCEPTION WHEN invalid_parameter_value OR invalid_name OR name_too_long THEN
                parts := NULL;
            END;
            IF cardinality(parts) IS DISTINCT FROM 2 OR octet_length(parts[1]) >= 64 OR octet_length(parts[2]) >= 64 THEN
                RAISE EXCEPTION 'targets entry "%": "%" is not a schema-qualified table name', e.key, e.value #>> '{}'
                    USING ERRCODE = 'invalid_parameter_value',
                          HINT = 'Write schema.table, quoting names as in SQL (e.g. "public.orders" or "\"My Schema\".t").';
            END IF;
        END LOOP;
    END IF;
END
$$;
COMMENT ON FUNCTION kafka_sink._check_routing(text, jsonb, boolean, text, text, text) IS
'Internal: raises unless a pipeline''s routing options (target template, targets map, create_targets, evolve) are well-formed.';

-- create_targets and evolve (issue 16): the column type of a field of a
-- Kafka Connect schema (JsonConverter's embedded {"schema", "payload"}),
-- Debezium's and Connect's semantic types first.  Only these type names
-- reach DDL: nothing of the message is spliced but quoted identifiers and
-- checked integers.
CREATE FUNCTION kafka_sink._connect_type(field jsonb)
RETURNS text
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    p text := field->'parameters'->>'connect.decimal.precision';
    s text := field->'parameters'->>'scale';
BEGIN
    CASE field->>'name'
        WHEN 'io.debezium.time.Date', 'org.apache.kafka.connect.data.Date' THEN RETURN 'date';
        WHEN 'io.debezium.time.Time', 'org.apache.kafka.connect.data.Time' THEN RETURN 'time(3) without time zone';
        WHEN 'io.debezium.time.MicroTime', 'io.debezium.time.NanoTime' THEN RETURN 'time(6) without time zone';
        WHEN 'io.debezium.time.Timestamp', 'org.apache.kafka.connect.data.Timestamp' THEN RETURN 'timestamp(3) without time zone';
        WHEN 'io.debezium.time.MicroTimestamp', 'io.debezium.time.NanoTimestamp' THEN RETURN 'timestamp(6) without time zone';
        WHEN 'io.debezium.time.ZonedTimestamp' THEN RETURN 'timestamp with time zone';
        WHEN 'io.debezium.time.ZonedTime' THEN RETURN 'time with time zone';
        WHEN 'io.debezium.time.Year' THEN RETURN 'integer';
        WHEN 'io.debezium.data.VariableScaleDecimal' THEN RETURN 'numeric';
        WHEN 'io.debezium.data.Json' THEN RETURN 'jsonb';
        WHEN 'io.debezium.data.Uuid' THEN RETURN 'uuid';
        WHEN 'org.apache.kafka.connect.data.Decimal' THEN
            IF p ~ '^[0-9]{1,4}$' AND s ~ '^[0-9]{1,4}$' AND p::int BETWEEN 1 AND 1000 AND s::int <= p::int THEN
                RETURN format('numeric(%s,%s)', p::int, s::int);
            END IF;
            RETURN 'numeric';
        ELSE
            NULL;
    END CASE;
    RETURN CASE field->>'type'
        WHEN 'int8' THEN 'smallint' WHEN 'int16' THEN 'smallint' WHEN 'int32' THEN 'integer'
        WHEN 'int64' THEN 'bigint'
        -- JsonConverter writes Connect's FLOAT32/FLOAT64 as "float"/"double"
        WHEN 'float' THEN 'real' WHEN 'double' THEN 'double precision'
        WHEN 'float32' THEN 'real' WHEN 'float64' THEN 'double precision'
        WHEN 'boolean' THEN 'boolean' WHEN 'string' THEN 'text' WHEN 'bytes' THEN 'bytea'
        ELSE 'text' END;
END
$$;
COMMENT ON FUNCTION kafka_sink._connect_type(jsonb) IS
'Internal: the column type create_targets and evolve give a field of a Kafka Connect schema (Debezium and Connect semantic types, then the Connect type; others text).';

-- The row's struct in an embedded value schema: a Debezium envelope's
-- "after" (or "before") field, else the schema itself; NULL when neither
-- is a struct with fields.
CREATE FUNCTION kafka_sink._row_schema(value_schema jsonb)
RETURNS jsonb
LANGUAGE sql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT s FROM (
        SELECT f AS s, 1 AS o FROM jsonb_array_elements(
                   CASE WHEN jsonb_typeof(value_schema->'fields') = 'array' THEN value_schema->'fields' END) f
         WHERE f->>'field' IN ('after', 'before') AND f->>'type' = 'struct'
        UNION ALL
        SELECT value_schema, 2
         WHERE value_schema->>'type' = 'struct') x
     WHERE jsonb_typeof(s->'fields') = 'array'
     ORDER BY o, s->>'field' LIMIT 1
$$;
COMMENT ON FUNCTION kafka_sink._row_schema(jsonb) IS
'Internal: the row struct of an embedded value schema (a Debezium envelope''s after/before, else the schema itself), or NULL.';

-- create_targets: creates schema_name.table_name as the caller (the
-- pipeline's owner, in the batch's transaction) from a message's embedded
-- schema; the key is the message key's fields (its embedded schema, or the
-- fields of a JSON object key), else key_columns.  Returns NULL when it
-- created the table, else why it cannot (the message is quarantined as
-- no_target).  Raises when the owner may not create there.
CREATE FUNCTION kafka_sink._create_target(schema_name text, table_name text, value text, msg_key text,
                                          key_columns text[], mode text)
RETURNS text
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v jsonb;
    k jsonb;
    s jsonb;
    cols text[] := '{}';
    names text[] := '{}';
    keys text[] := key_columns;
    f jsonb;
    n text;
BEGIN
    BEGIN
        v := value::jsonb;
        k := msg_key::jsonb;
    EXCEPTION WHEN invalid_text_representation THEN
        IF v IS NULL THEN
            RETURN 'The value is not JSON: there is no embedded schema to create the target from.';
        END IF;
        k := NULL;
    END;
    s := kafka_sink._row_schema(CASE WHEN jsonb_typeof(v) = 'object' THEN v->'schema' END);
    IF s IS NULL THEN
        RETURN 'The value has no embedded schema (Kafka Connect''s JsonConverter with schemas.enable) to create the target from.';
    END IF;
    IF keys IS NULL AND jsonb_typeof(k) = 'object' AND jsonb_typeof(k->'schema'->'fields') = 'array' THEN
        SELECT array_agg(x->>'field' ORDER BY i) INTO keys
          FROM jsonb_array_elements(k->'schema'->'fields') WITH ORDINALITY AS e(x, i);
    ELSIF keys IS NULL AND jsonb_typeof(k) = 'object' AND NOT k ? 'schema' THEN
        SELECT array_agg(x ORDER BY x) INTO keys FROM jsonb_object_keys(k) x;
    END IF;
    IF keys IS NULL AND mode = 'merge' THEN
        RETURN 'The message key is not a JSON object naming the key fields, and the pipeline has no key_columns: the target''s primary key is unknown.';
    END IF;
    FOR f IN SELECT x FROM jsonb_array_elements(s->'fields') x LOOP
        n := f->>'field';
        IF n IS NULL OR n = '' OR octet_length(n) >= 64 OR n = ANY (names) THEN
            RETURN format('The embedded schema has a field name that cannot be a column: %s.', coalesce(quote_literal(n), 'none'));
        END IF;
        names := names || n;
        cols := cols || format('%I %s', n, kafka_sink._connect_type(f));
    END LOOP;
    IF cardinality(cols) = 0 THEN
        RETURN 'The embedded schema has no fields.';
    END IF;
    IF keys IS NOT NULL AND EXISTS (SELECT 1 FROM unnest(keys) x WHERE x IS NULL OR NOT x = ANY (names)) THEN
        RETURN format('The key fields %s are not all fields of the value''s schema.', keys);
    END IF;
    IF NOT '_kafka_source_position' = ANY (names) THEN
        cols := cols || '_kafka_source_position numeric'::text;
    END IF;
    -- never in kafka_sink's or the system's schemas, nor a temporary one
    -- (a superuser-owned pipeline could create there)
    IF schema_name IN ('kafka_sink', 'pg_catalog', 'information_schema')
       OR schema_name LIKE 'pg\_toast%' OR schema_name LIKE 'pg\_temp%' THEN
        RAISE EXCEPTION 'create_targets does not create tables in schema %', schema_name
            USING ERRCODE = 'insufficient_privilege',
                  HINT = 'A pipeline writes a table of your own, in a schema of your own.';
    END IF;
    IF NOT has_schema_privilege(schema_name, 'CREATE') THEN
        RAISE EXCEPTION 'permission denied for schema %', schema_name
            USING ERRCODE = 'insufficient_privilege',
                  DETAIL = 'create_targets creates a missing target as the pipeline''s owner, in a schema where the owner has CREATE.';
    END IF;
    EXECUTE format('CREATE TABLE %I.%I (%s%s)', schema_name, table_name, array_to_string(cols, ', '),
                   CASE WHEN keys IS NOT NULL
                        THEN format(', PRIMARY KEY (%s)', (SELECT string_agg(format('%I', x), ', ') FROM unnest(keys) x)) ELSE '' END);
    RETURN NULL;
END
$$;
COMMENT ON FUNCTION kafka_sink._create_target(text, text, text, text, text[], text) IS
'Internal (create_targets): creates a missing routed target as the caller from a message''s embedded schema, keyed on the message key''s fields; returns NULL, or why it cannot.';

-- evolve => 'add_columns': adds a nullable column for each field of the
-- embedded schema the target lacks.  Never drops or narrows: a field whose
-- type is neither the column's nor implicitly cast to it is refused.
-- Returns NULL when the target takes the schema (after adding columns),
-- else why not (the messages with that schema are quarantined as
-- schema_change_refused).  add false: only checks.
CREATE FUNCTION kafka_sink._evolve_target(target regclass, value_schema text, add boolean)
RETURNS text
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    s jsonb;
    f jsonb;
    n text;
    want text;
    want_oid oid;
    have pg_attribute;
BEGIN
    BEGIN
        s := kafka_sink._row_schema(value_schema::jsonb);
    EXCEPTION WHEN invalid_text_representation THEN
        s := NULL;
    END;
    IF s IS NULL THEN
        RETURN NULL;            -- no embedded schema: nothing to evolve
    END IF;
    FOR f IN SELECT x FROM jsonb_array_elements(s->'fields') x LOOP
        n := f->>'field';
        IF n IS NULL OR n = '' OR octet_length(n) >= 64 THEN
            RETURN format('The embedded schema has a field name that cannot be a column: %s.', coalesce(quote_literal(n), 'none'));
        END IF;
        want := kafka_sink._connect_type(f);
        want_oid := want::regtype;
        SELECT * INTO have FROM pg_attribute WHERE attrelid = target AND attname = n AND attnum > 0 AND NOT attisdropped;
        IF NOT FOUND THEN
            IF add THEN
                EXECUTE format('ALTER TABLE %s ADD COLUMN %I %s', target, n, want);
            END IF;
        ELSIF have.atttypid <> want_oid
              AND NOT EXISTS (SELECT 1 FROM pg_cast c WHERE c.castsource = want_oid AND c.casttarget = have.atttypid
                                 AND c.castcontext = 'i') THEN
            RETURN format('Field %I is now %s, which column %I of %s (%s) does not take: evolve never narrows or changes a column.',
                          n, want, n, target, format_type(have.atttypid, have.atttypmod));
        END IF;
    END LOOP;
    RETURN NULL;
END
$$;
COMMENT ON FUNCTION kafka_sink._evolve_target(regclass, text, boolean) IS
'Internal (evolve => add_columns): adds a nullable column for each new field of an embedded schema; returns NULL, or why a change is refused.';

REVOKE ALL ON FUNCTION kafka_sink._check_target_template(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION kafka_sink._check_target_template(text) TO kafka_sink_admin;
REVOKE ALL ON FUNCTION kafka_sink._check_routing(text, jsonb, boolean, text, text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION kafka_sink._check_routing(text, jsonb, boolean, text, text, text) TO kafka_sink_admin;
REVOKE ALL ON FUNCTION kafka_sink._connect_type(jsonb) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION kafka_sink._connect_type(jsonb) TO kafka_sink_admin;
REVOKE ALL ON FUNCTION kafka_sink._row_schema(jsonb) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION kafka_sink._row_schema(jsonb) TO kafka_sink_admin;
REVOKE ALL ON FUNCTION kafka_sink._create_target(text, text, text, text, text[], text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION kafka_sink._create_target(text, text, text, text, text[], text) TO kafka_sink_admin;
REVOKE ALL ON FUNCTION kafka_sink._evolve_target(regclass, text, boolean) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION kafka_sink._evolve_target(regclass, text, boolean) TO kafka_sink_admin;

DROP FUNCTION kafka_sink.replay_quarantine(text, text, text, integer, bigint, bigint, bigint[]);
DROP FUNCTION kafka_sink._api_replay_quarantine(text, text, text, integer, bigint, bigint, bigint[]);
CREATE FUNCTION kafka_sink._api_replay_quarantine(
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
            'no_target', 'target_refused', 'schema_change_refused', 'dead_letter_loop') THEN
        RAISE EXCEPTION 'unknown quarantine reason "%"', reason
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Reasons are invalid_json, not_an_object, missing_required_field, invalid_value, unknown_schema_version, null_key, constraint_violation, value_too_large, rejected_by_target, unknown_schema_id, not_wire_format, invalid_avro, no_target, target_refused, schema_change_refused and dead_letter_loop.';
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

CREATE FUNCTION kafka_sink.replay_quarantine(
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
REVOKE ALL ON FUNCTION kafka_sink._api_replay_quarantine(text, text, text, integer, bigint, bigint, bigint[], text) FROM PUBLIC, kafka_sink_admin;
COMMENT ON FUNCTION kafka_sink._api_replay_quarantine(text, text, text, integer, bigint, bigint, bigint[], text) IS
'The SQL body of kafka_sink.replay_quarantine, called only through it (with the catalog writes allowed).';

CREATE OR REPLACE FUNCTION kafka_sink.create_lineage_view(pipeline text, target regclass DEFAULT NULL,
                                               view_name text DEFAULT NULL, raw boolean DEFAULT true)
RETURNS regclass
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    p kafka_sink.pipeline_definitions;
    tgt regclass;
    parsed text[];
    vschema text;
    vname text;
    existing regclass;
    missing text;
    has_ts boolean;
    use_raw boolean;
    marker text;
    v regclass;
BEGIN
    PERFORM kafka_sink._require_admin();
    p := kafka_sink._get_pipeline(pipeline);
    IF raw IS NULL THEN
        RAISE EXCEPTION 'raw cannot be null'
            USING ERRCODE = 'null_value_not_allowed', HINT = 'Pass true or false.';
    END IF;
    -- a routed pipeline (target template, targets map) writes many tables:
    -- the caller names one
    tgt := coalesce(create_lineage_view.target, p.target);
    IF tgt IS NULL AND (p.target_template IS NOT NULL OR p.targets IS NOT NULL) THEN
        RAISE EXCEPTION 'pipeline "%" routes to many tables', pipeline
            USING ERRCODE = 'invalid_parameter_value', HINT = 'Name the table: target => ''schema.table''.';
    END IF;
    IF tgt IS NULL THEN
        RAISE EXCEPTION 'pipeline "%" has no target', pipeline
            USING ERRCODE = 'wrong_object_type', HINT = 'A bronze-only pipeline writes no rows to trace; query its bronze table.';
    END IF;
    IF tgt IS DISTINCT FROM p.target AND p.target_template IS NULL AND p.targets IS NULL THEN
        RAISE EXCEPTION 'pipeline "%" does not write %', pipeline, tgt
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = format('Its target is %s.', p.target);
    END IF;
    IF p.mode = 'function' THEN
        RAISE EXCEPTION 'pipeline "%" passes its rows to a batch function', pipeline
            USING ERRCODE = 'wrong_object_type',
                  HINT = 'The batch function decides what it writes; the pipeline cannot trace it.';
    END IF;
    SELECT string_agg(c, ', ') INTO missing
      FROM unnest(ARRAY['_kafka_topic', '_kafka_partition', '_kafka_offset', '_kafka_batch_id']) c
     WHERE NOT EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = tgt AND a.attname = c
                          AND a.attnum > 0 AND NOT a.attisdropped);
    IF missing IS NOT NULL THEN
        RAISE EXCEPTION 'target % has no lineage columns %', tgt, missing
            USING ERRCODE = 'undefined_column',
                  HINT = 'Add _kafka_topic text, _kafka_partition int, _kafka_offset bigint and _kafka_batch_id bigint (and optionally _kafka_timestamp timestamptz) to the target; the pipeline fills them.';
    END IF;
    has_ts := EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = tgt AND a.attname = '_kafka_timestamp'
                        AND a.attnum > 0 AND NOT a.attisdropped);
    use_raw := raw AND p.bronze IS NOT NULL;

    SELECT n.nspname, c.relname || '_lineage' INTO vschema, vname
      FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = tgt;
    IF view_name IS NOT NULL THEN
        BEGIN
            parsed := parse_ident(view_name);
        EXCEPTION WHEN invalid_parameter_value THEN
            parsed := NULL;
        END;
        IF parsed IS NULL OR cardinality(parsed) NOT IN (1, 2) THEN
            RAISE EXCEPTION 'invalid view name "%"', view_name
                USING ERRCODE = 'invalid_name', HINT = 'Pass a name such as ''orders_lineage'' or ''reporting.orders_lineage''.';
        END IF;
        vname := parsed[cardinality(parsed)];
        IF cardinality(parsed) = 2 THEN
            vschema := parsed[1];
        END IF;
    END IF;

    -- a lineage view made before is made again; anything else is kept
    marker := format('kafka_sink lineage view of pipeline %s (id %s), target %s', p.name, p.id, tgt);
    existing := to_regclass(format('%I.%I', vschema, vname));
    IF existing IS NOT NULL THEN
        IF (SELECT relkind FROM pg_class WHERE oid = existing) <> 'v'
           OR coalesce(obj_description(existing, 'pg_class'), '') NOT LIKE 'kafka_sink lineage view of %' THEN
            RAISE EXCEPTION 'relation % already exists', existing
                USING ERRCODE = 'duplicate_table',
                      HINT = 'Pass view_name => another name; only a lineage view made by create_lineage_view is replaced.';
        END IF;
        EXECUTE format('DROP VIEW %s', existing);
    END IF;

    EXECUTE format(
        'CREATE VIEW %I.%I WITH (security_invoker = true) AS'
        ' SELECT t.*, lr.pipeline AS _kafka_pipeline, lr.committed_at AS _kafka_committed_at%s,'
        ' %s AS _kafka_key, %s AS _kafka_value, %s AS _kafka_headers'
        ' FROM %s t'
        ' LEFT JOIN LATERAL (SELECT x.pipeline, x.committed_at FROM kafka_sink._lineage_ranges x'
        '   WHERE x.pipeline_id = %s AND x.batch_id = t._kafka_batch_id'
        '     AND x.topic = t._kafka_topic AND x.partition = t._kafka_partition'
        '     AND t._kafka_offset >= x.start_offset AND t._kafka_offset < x.end_offset) lr ON true%s',
        vschema, vname,
        CASE WHEN has_ts THEN '' WHEN use_raw THEN ', br.ts AS _kafka_timestamp' ELSE ', NULL::timestamptz AS _kafka_timestamp' END,
        CASE WHEN use_raw THEN 'br.key' ELSE 'NULL::bytea' END,
        CASE WHEN use_raw THEN 'br.value' ELSE 'NULL::bytea' END,
        CASE WHEN use_raw THEN 'br.headers' ELSE 'NULL::jsonb' END,
        tgt, p.id,
        CASE WHEN use_raw THEN
            format(' LEFT JOIN %s br ON br.topic = t._kafka_topic COLLATE "C" AND br.partition = t._kafka_partition'
                   ' AND br."offset" = t._kafka_offset', p.bronze)
        ELSE '' END);
    v := format('%I.%I', vschema, vname)::regclass;
    EXECUTE format('COMMENT ON VIEW %s IS %L', v,
                   marker || ': each row of the target with the pipeline, the commit time of the batch that wrote it'
                   || CASE WHEN use_raw THEN ' and the raw message from ' || p.bronze::text ELSE '' END
                   || '. _kafka_pipeline and _kafka_committed_at are NULL for a role that is not a member of the pipeline''s owner,'
                   || ' for a batch no longer retained, and for rows written by replay_quarantine (_kafka_batch_id 0).'
                   || ' Made by kafka_sink.create_lineage_view; call it again after the target''s columns change.');
    EXECUTE format('GRANT SELECT ON %s TO PUBLIC', v);
    RETURN v;
END
$$;

CREATE OR REPLACE FUNCTION kafka_sink.message_fates(pipeline text, topic text DEFAULT NULL, partition integer DEFAULT NULL,
                                         from_offset bigint DEFAULT NULL, to_offset bigint DEFAULT NULL)
RETURNS SETOF kafka_sink.message_fate_row
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    p kafka_sink.pipeline_definitions;
    has_lineage boolean;
    keyexpr text;
    keycond text;
    body text;
    classify text;
BEGIN
    PERFORM kafka_sink._require_admin();
    p := kafka_sink._get_pipeline(pipeline);
    IF from_offset < 0 OR to_offset < 0 THEN
        RAISE EXCEPTION 'offsets cannot be negative'
            USING ERRCODE = 'invalid_parameter_value', HINT = 'Pass from_offset and to_offset as Kafka offsets (0 or more).';
    END IF;
    IF from_offset > to_offset THEN
        RAISE EXCEPTION 'from_offset % is past to_offset %', from_offset, to_offset
            USING ERRCODE = 'invalid_parameter_value', HINT = 'Both ends of the range are included.';
    END IF;
    IF partition < 0 THEN
        RAISE EXCEPTION 'partition cannot be negative'
            USING ERRCODE = 'invalid_parameter_value', HINT = 'Kafka partitions are numbered from 0.';
    END IF;
    has_lineage := p.target IS NOT NULL AND (SELECT count(*) FROM pg_attribute a
                       WHERE a.attrelid = p.target AND NOT a.attisdropped AND a.attnum > 0
                         AND a.attname IN ('_kafka_topic', '_kafka_partition', '_kafka_offset', '_kafka_batch_id')) = 4;

    -- the messages of the range: per partition with a checkpoint, from
    -- from_offset (else the first checkpoint or the first retained batch)
    -- to to_offset (else the last committed offset); offsets at or past
    -- the checkpoint are pending, so only listed when to_offset asks
    body := $q$
    WITH parts AS MATERIALIZED (
        SELECT o.topic, o.partition, o.next_offset,
               coalesce($4, least(o.start_offset, (
                   SELECT min(r.start) FROM kafka_sink.batches b,
                          jsonb_to_recordset(b.ranges) AS r(topic text, partition integer, start bigint)
                    WHERE b.pipeline_id = $1 AND r.topic = o.topic AND r.partition = o.partition)), o.next_offset) AS lo,
               coalesce($5, o.next_offset - 1) AS hi
          FROM kafka_sink.offsets o
         WHERE o.pipeline_id = $1 AND ($2::text IS NULL OR o.topic = $2) AND ($3::int IS NULL OR o.partition = $3)),
    in_batch AS MATERIALIZED (
        SELECT pa.topic, pa.partition, g.o AS "offset", max(b.batch_id) AS batch_id
          FROM kafka_sink.batches b,
               jsonb_to_recordset(b.ranges) AS r(topic text, partition integer, start bigint, "end" bigint),
               parts pa,
               generate_series(greatest(r.start, pa.lo), least(r."end" - 1, pa.hi, pa.next_offset - 1)) AS g(o)
         WHERE b.pipeline_id = $1 AND r.topic = pa.topic AND r.partition = pa.partition
         GROUP BY 1, 2, 3),
    lost AS MATERIALIZED (
        SELECT DISTINCT pa.topic, pa.partition, g.o AS "offset"
          FROM kafka_sink.data_loss d
          JOIN parts pa ON pa.topic = d.topic AND pa.partition = d.partition,
               generate_series(greatest(d.expected_offset, pa.lo), least(d.available_offset - 1, pa.hi)) AS g(o)
         WHERE d.pipeline_id = $1 AND d.kind = 'deleted'),
    m AS MATERIALIZED (
        SELECT pa.topic, pa.partition, g.o AS "offset", g.o >= pa.next_offset AS pending,
               ib.batch_id, l."offset" IS NOT NULL AS lost,
               q.batch_id AS q_batch, q.reason || ': ' || q.detail AS q_detail
          FROM parts pa
         CROSS JOIN LATERAL generate_series(pa.lo, pa.hi) AS g(o)
          LEFT JOIN in_batch ib ON ib.topic = pa.topic AND ib.partition = pa.partition AND ib."offset" = g.o
          LEFT JOIN lost l ON l.topic = pa.topic AND l.partition = pa.partition AND l."offset" = g.o
          LEFT JOIN kafka_sink.quarantine q
                 ON q.pipeline_id = $1 AND q.topic = pa.topic AND q.partition = pa.partition
                AND q.message_offset = g.o AND q.replayed_at IS NULL)
    $q$;

    classify := $q$
        CASE WHEN m.pending THEN 'pending'
             WHEN m.lost THEN 'lost'
             WHEN m.q_batch IS NOT NULL THEN 'quarantined' $q$;

    -- (a key in Avro or in a registry's wire format is decoded by the worker
    -- only: as message_fate, no more than 'applied or superseded')
    -- a routed pipeline: which table a message went to is not traced here
    -- (its quarantine rows name it)
    IF p.target IS NULL OR p.mode <> 'merge' OR NOT has_lineage OR p.bronze IS NULL
       OR p.target_template IS NOT NULL OR p.targets IS NOT NULL
       OR p.key_format = 'avro' OR (p.key_format = 'none' AND p.value_format <> 'json') THEN
        RETURN QUERY EXECUTE body || format($q$
        SELECT m.topic, m.partition, m."offset",
               %s ELSE %L END,
               CASE WHEN m.q_batch IS NOT NULL AND NOT m.pending AND NOT m.lost THEN m.q_batch
                    WHEN NOT m.pending THEN m.batch_id END,
               CASE WHEN m.pending THEN 'not read yet'
                    WHEN m.lost THEN 'deleted from Kafka before it was read (fail_on_data_loss = false)'
                    WHEN m.q_batch IS NOT NULL THEN m.q_detail
                    ELSE %L END
          FROM m ORDER BY 1, 2, 3 $q$,
            classify,
            CASE WHEN p.target_template IS NOT NULL OR p.targets IS NOT NULL
                      THEN CASE WHEN p.mode = 'append' THEN 'appended' ELSE 'applied or superseded' END
                 WHEN p.target IS NULL THEN 'landed' WHEN p.mode = 'append' THEN 'appended'
                 WHEN p.mode = 'function' THEN 'passed to the batch function' ELSE 'applied or superseded' END,
            CASE WHEN p.target_template IS NOT NULL OR p.targets IS NOT NULL
                      THEN 'routed to one of several tables: kafka_sink.quarantine.target names the table of a quarantined message, a lineage view (create_lineage_view with target) the rows of one table'
                 WHEN p.target IS NULL THEN 'bronze only' WHEN p.mode <> 'merge' THEN NULL
                 WHEN has_lineage AND p.bronze IS NOT NULL
                 THEN format('the key of a message in value_format %s or key_format %s is not decoded here',
                             p.value_format, p.key_format)
                 ELSE 'lineage columns on the target and a bronze table are needed to tell more' END)
            USING p.id, topic, partition, from_offset, to_offset;
        RETURN;
    END IF;

    -- the message's key, decoded as message_fate() decodes it
    IF p.key_format = 'string' THEN
        keyexpr := format('jsonb_build_object(%L, convert_from(br.key, ''UTF8''))', p.key_columns[1]);
    ELSIF p.key_format = 'json' THEN
        keyexpr := 'convert_from(br.key, ''UTF8'')::jsonb';
    ELSE
        SELECT 'CASE WHEN br.value IS NOT NULL THEN jsonb_build_object(' ||
               string_agg(format('%L, (convert_from(br.value, ''UTF8'')::jsonb) #> %L::text[]', c,
                                 string_to_array(coalesce(p.columns->c->>'path', p.columns->>c, c), '.')), ', ')
               || ') END'
          INTO keyexpr FROM unnest(p.key_columns) c;
    END IF;
    SELECT string_agg(format('t.%1$I = (mk.k).%1$I', c), ' AND ') INTO keycond FROM unnest(p.key_columns) c;

    RETURN QUERY EXECUTE body || format($q$,
    mk AS (
        SELECT m.*, br."offset" IS NOT NULL AS has_msg, v.v, jsonb_populate_record(NULL::%1$s, v.v) AS k
          FROM m
          LEFT JOIN %2$s br ON NOT m.pending AND NOT m.lost AND m.q_batch IS NULL
                           AND br.topic = m.topic COLLATE "C" AND br.partition = m.partition AND br."offset" = m."offset"
          CROSS JOIN LATERAL (SELECT CASE WHEN br."offset" IS NOT NULL THEN %3$s END AS v) v)
    SELECT mk.topic, mk.partition, mk."offset",
           %4$s
                WHEN NOT mk.has_msg THEN 'applied or superseded'
                WHEN t._kafka_offset IS NULL THEN 'deleted'
                WHEN t._kafka_topic = mk.topic AND t._kafka_partition = mk.partition AND t._kafka_offset = mk."offset" THEN 'applied'
                WHEN t._kafka_batch_id = mk.batch_id THEN 'superseded'
                WHEN t._kafka_batch_id < mk.batch_id THEN 'stale'
                ELSE 'overwritten' END,
           CASE WHEN mk.q_batch IS NOT NULL AND NOT mk.pending AND NOT mk.lost THEN mk.q_batch
                WHEN NOT mk.pending THEN mk.batch_id END,
           CASE WHEN mk.pending THEN 'not read yet'
                WHEN mk.lost THEN 'deleted from Kafka before it was read (fail_on_data_loss = false)'
                WHEN mk.q_batch IS NOT NULL THEN mk.q_detail
                WHEN NOT mk.has_msg THEN 'lineage columns on the target and a bronze table are needed to tell more'
                WHEN t._kafka_offset IS NULL THEN format('no row for key %%s', mk.v)
                WHEN t._kafka_topic = mk.topic AND t._kafka_partition = mk.partition AND t._kafka_offset = mk."offset"
                     THEN format('the current source of the row with key %%s', mk.v)
                WHEN t._kafka_batch_id = mk.batch_id THEN format('offset %%s of the same batch won for key %%s', t._kafka_offset, mk.v)
                WHEN t._kafka_batch_id < mk.batch_id THEN format('the row for key %%s (from batch %%s) was newer', mk.v, t._kafka_batch_id)
                ELSE format('replaced by offset %%s in batch %%s', t._kafka_offset, t._kafka_batch_id) END
      FROM mk
      LEFT JOIN %1$s t ON mk.has_msg AND %5$s
     ORDER BY 1, 2, 3 $q$,
        p.target, p.bronze, keyexpr, replace(classify, 'm.', 'mk.'), keycond)
        USING p.id, topic, partition, from_offset, to_offset;
END
$$;

DROP FUNCTION kafka_sink.create_pipeline(text, text, text, text[], text, jsonb, text[], text, text, regprocedure, text, boolean, bigint, bigint, interval, integer, jsonb, boolean, jsonb, text, boolean, text, jsonb, text, interval, text, text, bigint, interval, text, text, text, jsonb, text, text);
DROP FUNCTION kafka_sink._api_create_pipeline(text, text, text, text[], text, jsonb, text[], text, text, regprocedure, text, boolean, bigint, bigint, interval, integer, jsonb, boolean, jsonb, text, boolean, text, jsonb, text, interval, text, text, bigint, interval, text, text, text, jsonb, text, text);
DROP FUNCTION kafka_sink.alter_pipeline(text, bigint, bigint, interval, integer, jsonb, text, boolean, text, bigint, interval, text, text, text, text, jsonb, text, text);
DROP FUNCTION kafka_sink._api_alter_pipeline(text, bigint, bigint, interval, integer, jsonb, text, boolean, text, bigint, interval, text, text, text, text, jsonb, text, text);

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
    evolve                text DEFAULT 'none')
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
    PERFORM kafka_sink._check_source(subscribe, subscribe_pattern, assign);

    IF mode IS NULL OR mode NOT IN ('merge', 'append', 'function') THEN
        RAISE EXCEPTION 'invalid mode "%"', mode
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'mode is one of ''merge'', ''append'' or ''function''.';
    END IF;
    IF create_targets IS NULL OR evolve IS NULL THEN
        RAISE EXCEPTION 'create_targets and evolve cannot be null'
            USING ERRCODE = 'null_value_not_allowed',
                  HINT = 'Pass create_targets => false and evolve => ''none'' (the defaults).';
    END IF;
    IF routed OR create_targets OR evolve <> 'none' THEN
        PERFORM kafka_sink._check_routing(template, targets, create_targets, evolve, mode, value_format);
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
        -- Avro keys decode to the same fields as JSON keys (format.h)
        PERFORM kafka_sink._check_contract(target_oid, key_columns, columns,
                                           CASE key_format WHEN 'avro' THEN 'json' ELSE key_format END,
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

    INSERT INTO kafka_sink.pipeline_definitions AS p
        (name, owner, state, bootstrap_servers, subscribe, subscribe_pattern, assign,
         target, key_columns, order_column, mode, batch_function, starting_offsets,
         fail_on_data_loss, max_offsets_per_batch, max_batch_bytes, trigger_interval,
         workers, kafka_options, columns, key_format, delete_on_tombstone,
         schema_version_field, schema_versions, event_id, event_id_retention, bronze, ending_offsets,
         min_offsets_per_batch, max_trigger_delay, dead_letter_topic,
         value_format, value_schema, schema_registry, envelope, on_truncate,
         target_template, targets, create_targets, evolve)
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
         envelope, on_truncate, template, targets, create_targets, evolve)
    RETURNING p.id INTO new_id;

    plain_options := kafka_sink._split_secrets(new_id, kafka_options);
    UPDATE kafka_sink.pipeline_definitions p SET kafka_options = plain_options WHERE p.id = new_id;
    PERFORM kafka_sink._set_schema_registry(new_id, schema_registry);
    PERFORM kafka_sink._wake_launcher();
    RETURN new_id;
END
$$;

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
    max_trigger_delay     interval DEFAULT '15 min',
    dead_letter_topic     text DEFAULT NULL,
    value_format          text DEFAULT 'json',
    value_schema          text DEFAULT NULL,
    schema_registry       jsonb DEFAULT NULL,
    envelope              text DEFAULT 'plain',
    on_truncate           text DEFAULT 'apply',
    targets               jsonb DEFAULT NULL,
    create_targets        boolean DEFAULT false,
    evolve                text DEFAULT 'none')
RETURNS bigint
AS 'MODULE_PATHNAME', 'kafka_sink_api_call'
LANGUAGE C VOLATILE;
REVOKE ALL ON FUNCTION kafka_sink.create_pipeline(text, text, text, text[], text, jsonb, text[], text, text, regprocedure, text, boolean, bigint, bigint, interval, integer, jsonb, boolean, jsonb, text, boolean, text, jsonb, text, interval, text, text, bigint, interval, text, text, text, jsonb, text, text, jsonb, boolean, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION kafka_sink.create_pipeline(text, text, text, text[], text, jsonb, text[], text, text, regprocedure, text, boolean, bigint, bigint, interval, integer, jsonb, boolean, jsonb, text, boolean, text, jsonb, text, interval, text, text, bigint, interval, text, text, text, jsonb, text, text, jsonb, boolean, text) TO kafka_sink_admin;
COMMENT ON FUNCTION kafka_sink.create_pipeline(text, text, text, text[], text, jsonb, text[], text, text, regprocedure, text, boolean, bigint, bigint, interval, integer, jsonb, boolean, jsonb, text, boolean, text, jsonb, text, interval, text, text, bigint, interval, text, text, text, jsonb, text, text, jsonb, boolean, text) IS
'Creates a pipeline owned by the calling role (a member of kafka_sink_admin that can log in) and, unless start => false, starts it. Returns its id. envelope => ''debezium'' reads Debezium change events (the target keeps each row''s source position in _kafka_source_position numeric, or order_column); on_truncate says what their truncates do: apply, ignore or fail.';

REVOKE ALL ON FUNCTION kafka_sink._api_create_pipeline(text, text, text, text[], text, jsonb, text[], text, text, regprocedure, text, boolean, bigint, bigint, interval, integer, jsonb, boolean, jsonb, text, boolean, text, jsonb, text, interval, text, text, bigint, interval, text, text, text, jsonb, text, text, jsonb, boolean, text) FROM PUBLIC, kafka_sink_admin;
COMMENT ON FUNCTION kafka_sink._api_create_pipeline(text, text, text, text[], text, jsonb, text[], text, text, regprocedure, text, boolean, bigint, bigint, interval, integer, jsonb, boolean, jsonb, text, boolean, text, jsonb, text, interval, text, text, bigint, interval, text, text, text, jsonb, text, text, jsonb, boolean, text) IS
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
    evolve                text DEFAULT NULL)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    p kafka_sink.pipeline_definitions;
    k text;
    new_order_column text;
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
    IF num_nonnulls(envelope, on_truncate) > 0 THEN
        IF p.target IS NULL THEN
            RAISE EXCEPTION 'a bronze-only pipeline takes no decoding options'
                USING ERRCODE = 'invalid_parameter_value',
                      HINT = 'Pass a target to decode messages; a bronze-only pipeline only lands them raw.';
        END IF;
        new_order_column := kafka_sink._check_envelope(
            coalesce(_api_alter_pipeline.envelope, p.envelope),
            coalesce(_api_alter_pipeline.on_truncate,
                     CASE WHEN _api_alter_pipeline.envelope = 'plain' THEN 'apply' ELSE p.on_truncate END),
            p.target, p.order_column, p.mode,
            (SELECT x.value_format FROM kafka_sink.pipeline_definitions x WHERE x.id = p.id));
        PERFORM kafka_sink._check_target(p.target, p.key_columns, new_order_column, p.mode);
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
        generation = x.generation + 1,
        updated_at = now()
    WHERE x.id = p.id;
    PERFORM kafka_sink._wake_launcher();
END
$$;

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
    evolve                text DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'kafka_sink_api_call'
LANGUAGE C VOLATILE;
REVOKE ALL ON FUNCTION kafka_sink.alter_pipeline(text, bigint, bigint, interval, integer, jsonb, text, boolean, text, bigint, interval, text, text, text, text, jsonb, text, text, jsonb, boolean, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION kafka_sink.alter_pipeline(text, bigint, bigint, interval, integer, jsonb, text, boolean, text, bigint, interval, text, text, text, text, jsonb, text, text, jsonb, boolean, text) TO kafka_sink_admin;
COMMENT ON FUNCTION kafka_sink.alter_pipeline(text, bigint, bigint, interval, integer, jsonb, text, boolean, text, bigint, interval, text, text, text, text, jsonb, text, text, jsonb, boolean, text) IS
'Changes a pipeline''s tunables, options, bootstrap servers, starting offsets, dead-letter topic or formats; its workers restart with the new definition. A kafka_options key with a JSON null removes that option; schema_registry replaces the registry whole (a JSON null removes it). envelope and on_truncate: as for create_pipeline; switching to envelope debezium needs the source position column; targets replaces the routing map (''{}'' removes it).';
REVOKE ALL ON FUNCTION kafka_sink._api_alter_pipeline(text, bigint, bigint, interval, integer, jsonb, text, boolean, text, bigint, interval, text, text, text, text, jsonb, text, text, jsonb, boolean, text) FROM PUBLIC, kafka_sink_admin;
COMMENT ON FUNCTION kafka_sink._api_alter_pipeline(text, bigint, bigint, interval, integer, jsonb, text, boolean, text, bigint, interval, text, text, text, text, jsonb, text, text, jsonb, boolean, text) IS
'The SQL body of kafka_sink.alter_pipeline, called only through it (with the catalog writes allowed).';

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
       p.min_offsets_per_batch, p.max_trigger_delay, p.dead_letter_topic,
       p.value_format, p.value_schema,
       p.schema_registry || coalesce((SELECT jsonb_object_agg(substr(s.name, 17), '********')
                                        FROM kafka_sink.secrets s
                                       WHERE s.pipeline_id = p.id AND s.name LIKE 'schema\_registry.%'), '{}')
           AS schema_registry,
       p.envelope, p.on_truncate,
       p.target_template, p.targets, p.create_targets, p.evolve
  FROM kafka_sink.pipeline_definitions p;

CREATE OR REPLACE VIEW kafka_sink.status WITH (security_invoker = true) AS
SELECT p.name, p.state,
       w.workers, w.worker_pids, w.worker_detail,
       p.last_batch_id,
       b.committed_at AS last_commit_at,
       b.committed_at - b.started_at AS last_batch_duration,
       r.input_rows_per_second, r.processed_rows_per_second,
       l.avg_offsets_behind, l.max_offsets_behind, l.bytes_behind_estimate,
       CASE WHEN l.partitions >= 2 AND l.total_lag >= 100 AND l.max_offsets_behind * 2 > l.total_lag
            THEN l.hot END AS hot_partition,
       bf.percent_done AS backfill_percent_done,
       CASE WHEN bf.remaining > 0 AND r.processed_rows_per_second > 0 AND p.state = 'running'
            THEN make_interval(secs => bf.remaining / least(r.input_rows_per_second, r.processed_rows_per_second))
            WHEN bf.remaining = 0 THEN interval '0' END AS backfill_time_left,
       CASE WHEN p.state = 'running' AND NOT kafka_sink._database_served()
            THEN p.updated_at ELSE e.occurred_at END AS last_error_at,
       CASE WHEN p.state = 'running' AND NOT kafka_sink._database_served()
            THEN format('pipeline "%s" cannot run: kafka_sink runs pipelines only in the database named by kafka_sink.database, not in "%s"',
                        p.name, current_database()) COLLATE "default"
            ELSE e.message END AS last_error,
       b.progress->'sink'->'targets' AS last_batch_targets
  FROM kafka_sink.pipeline_definitions p
  LEFT JOIN kafka_sink.batches b ON b.pipeline_id = p.id AND b.batch_id = p.last_batch_id
  LEFT JOIN LATERAL (
        SELECT count(*)::int AS workers,
               array_agg(x.pid ORDER BY x.worker) FILTER (WHERE x.pid > 0) AS worker_pids,
               string_agg(x.detail, '; ' ORDER BY x.worker) FILTER (WHERE x.detail <> '') AS worker_detail
          FROM kafka_sink._worker_pids() x WHERE x.pipeline_id = p.id) w ON true
  LEFT JOIN LATERAL (
        SELECT round(sum(x.messages) / greatest(extract(epoch FROM clock_timestamp() - min(x.started_at)), 1), 1)
                   AS input_rows_per_second,
               round(sum(x.messages) / greatest(extract(epoch FROM sum(x.committed_at - x.started_at)), 0.001), 1)
                   AS processed_rows_per_second
          FROM kafka_sink.batches x
         WHERE x.pipeline_id = p.id AND x.committed_at > clock_timestamp() - interval '60 s') r ON true
  LEFT JOIN LATERAL (
        SELECT count(*) AS partitions,
               round(avg(g.lag_messages), 1) AS avg_offsets_behind,
               max(g.lag_messages) AS max_offsets_behind,
               sum(g.lag_messages) AS total_lag,
               sum(g.lag_bytes_estimate) AS bytes_behind_estimate,
               (array_agg(g.topic || '[' || g.partition || ']' ORDER BY g.lag_messages DESC NULLS LAST))[1] AS hot
          FROM kafka_sink.progress g WHERE g.pipeline = p.name) l ON true
  LEFT JOIN LATERAL (
        SELECT round(100.0 * sum(least(o.next_offset, o.end_offset) - o.start_offset)
                     / nullif(sum(o.end_offset - o.start_offset), 0), 1) AS percent_done,
               sum(greatest(o.end_offset - o.next_offset, 0)) AS remaining
          FROM kafka_sink.offsets o
         WHERE o.pipeline_id = p.id AND p.ending_offsets IS NOT NULL) bf ON true
  LEFT JOIN LATERAL (SELECT * FROM kafka_sink.errors x WHERE x.pipeline_id = p.id
                      ORDER BY x.occurred_at DESC, x.id DESC LIMIT 1) e
         -- the last error, unless it was transient and is over: a batch
         -- committed since, or (a broker error) the running workers show none
         ON (e.kind IN ('transient', 'broker')
             AND (e.occurred_at < b.committed_at
                  OR (e.kind = 'broker' AND p.state = 'running' AND w.workers > 0
                      AND w.worker_detail IS NULL))) IS NOT TRUE;
COMMENT ON COLUMN kafka_sink.status.last_batch_targets IS
    'Per target table of the last batch: {"<table>": {"inserted", "updated", "deleted", "stale", "superseded", "quarantined", "duplicates"}}';

-- envelope debezium with routing: the source position column is checked per
-- routed table by the worker
CREATE OR REPLACE FUNCTION kafka_sink._check_envelope(envelope text, on_truncate text, target regclass,
                                           order_column text, mode text, value_format text)
RETURNS text
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    col text := order_column;
    typ regtype;
BEGIN
    IF envelope IS NULL OR envelope NOT IN ('plain', 'debezium') THEN
        RAISE EXCEPTION 'invalid envelope "%"', envelope
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'envelope is ''plain'' (the value is the row) or ''debezium'' (change events).';
    END IF;
    IF on_truncate IS NULL OR on_truncate NOT IN ('apply', 'ignore', 'fail') THEN
        RAISE EXCEPTION 'invalid on_truncate "%"', on_truncate
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'on_truncate is ''apply'', ''ignore'' or ''fail''.';
    END IF;
    IF envelope = 'plain' THEN
        IF on_truncate <> 'apply' THEN
            RAISE EXCEPTION 'on_truncate needs envelope debezium'
                USING ERRCODE = 'invalid_parameter_value',
                      HINT = 'Only change events carry truncates; pass envelope => ''debezium'' as well.';
        END IF;
        RETURN order_column;
    END IF;
    IF mode IS DISTINCT FROM 'merge' THEN
        RAISE EXCEPTION 'envelope debezium needs a target in mode merge'
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Change events are applied by key: pass target => ''schema.table'' and mode => ''merge''.';
    END IF;
    IF value_format IS DISTINCT FROM 'json' THEN
        RAISE EXCEPTION 'envelope debezium supports value_format json only'
            USING ERRCODE = 'feature_not_supported',
                  HINT = 'Use Kafka Connect''s JsonConverter (with or without schemas.enable).';
    END IF;
    col := coalesce(col, '_kafka_source_position');
    IF target IS NULL THEN
        -- routed (a template or a targets map): each table is checked as
        -- the worker opens it (target.c), with the same rule
        RETURN col;
    END IF;
    SELECT a.atttypid::regtype INTO typ FROM pg_attribute a
     WHERE a.attrelid = target AND a.attname = col AND a.attnum > 0 AND NOT a.attisdropped;
    IF typ IS NULL THEN
        RAISE EXCEPTION 'target % has no column "%" for the source position', target, col
            USING ERRCODE = 'undefined_column',
                  DETAIL = 'With envelope debezium every row keeps the source position of its last change, which orders replayed and re-sent events.',
                  HINT = format('ALTER TABLE %s ADD COLUMN %I numeric', target, col);
    END IF;
    IF (SELECT CASE WHEN t.typtype = 'd' THEN t.typbasetype ELSE t.oid END FROM pg_type t WHERE t.oid = typ)
       <> 'numeric'::regtype THEN
        RAISE EXCEPTION 'source position column "%" of % must be numeric, not %', col, target, typ
            USING ERRCODE = 'datatype_mismatch',
                  HINT = 'The source position (a PostgreSQL LSN, a MySQL binlog position) does not fit a smaller type.';
    END IF;
    RETURN col;
END
$$;

-- ---- end of routing ----

-- ---- perf: batches of several workers in parallel (issue 17) ----
-- Batch ids come from shared memory and a batch holds a per-pipeline fence
-- lock in SHARE mode instead of the pipeline's row; the writer API takes the
-- fence in EXCLUSIVE mode in _get_pipeline(name, true).
CREATE FUNCTION kafka_sink._fence_batches(pipeline_id bigint)
RETURNS void
AS 'MODULE_PATHNAME', 'kafka_sink_fence_batches'
LANGUAGE C VOLATILE;
REVOKE ALL ON FUNCTION kafka_sink._fence_batches(bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION kafka_sink._fence_batches(bigint) TO kafka_sink_admin;
COMMENT ON FUNCTION kafka_sink._fence_batches(bigint) IS
'Internal: waits until no batch of the pipeline is in flight and holds new ones back until commit (stop, drop, alter, reset_offsets, ...); only inside the API.';

CREATE OR REPLACE FUNCTION kafka_sink._get_pipeline(name text, for_update boolean DEFAULT false)
RETURNS kafka_sink.pipeline_definitions
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    p kafka_sink.pipeline_definitions;
BEGIN
    IF name IS NULL THEN
        RAISE EXCEPTION 'pipeline name cannot be null'
            USING ERRCODE = 'null_value_not_allowed', HINT = 'Pass the pipeline''s name.';
    END IF;
    IF for_update THEN
        -- the fence first, then the row: a batch in flight holds the fence
        -- (shared) and writes the row last, so this order cannot deadlock
        SELECT * INTO p FROM kafka_sink.pipeline_definitions x WHERE x.name = _get_pipeline.name;
        IF FOUND THEN
            PERFORM kafka_sink._fence_batches(p.id);
        END IF;
        SELECT * INTO p FROM kafka_sink.pipeline_definitions x WHERE x.name = _get_pipeline.name FOR UPDATE;
    ELSE
        SELECT * INTO p FROM kafka_sink.pipeline_definitions x WHERE x.name = _get_pipeline.name;
    END IF;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'pipeline "%" does not exist', name
            USING ERRCODE = 'undefined_object',
                  HINT = 'SELECT name FROM kafka_sink.pipelines lists the pipelines you can see.';
    END IF;
    RETURN p;
END
$$;

-- ---- end of perf ----

-- ---- CDC gaps: evolve compares typmods (issue 16) ----
-- evolve => 'add_columns': whether a field whose type the column takes
-- (same type, or an implicit cast) still does not fit the column's
-- typmod: a Decimal's precision/scale beyond numeric(p,s), a time or
-- timestamp precision beyond the column's, a string longer than
-- varchar(n)/char(n) (Debezium's __debezium.source.column.length, sent
-- with column.propagate.source.type).  Only what the schema states is
-- compared: a field without a stated precision or length is taken, as
-- before (a value that does not fit is then the row's own error).
-- Evolve never alters a column, so a wider field is refused, not widened.
CREATE FUNCTION kafka_sink._typmod_loses(field jsonb, want text, have_type oid, have_mod integer)
RETURNS boolean
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    p int;
    s int;
    hp int;
    hs int;
    len text;
BEGIN
    IF have_mod IS NULL OR have_mod < 0 THEN
        RETURN false;           -- an unconstrained column takes any typmod
    END IF;
    IF have_type = 'numeric'::regtype THEN
        IF want !~ '^numeric\([0-9]+,[0-9]+\)$' THEN
            RETURN false;
        END IF;
        p := substring(want FROM '^numeric\(([0-9]+),')::int;
        s := substring(want FROM ',([0-9]+)\)$')::int;
        hp := ((have_mod - 4) >> 16) & 65535;
        hs := (have_mod - 4) & 2047;
        IF hs > 1023 THEN
            hs := hs - 2048;    -- PostgreSQL 15's negative scales
        END IF;
        RETURN s > hs OR p - s > hp - hs;
    ELSIF have_type IN ('time'::regtype, 'timetz'::regtype, 'timestamp'::regtype, 'timestamptz'::regtype) THEN
        p := coalesce(substring(want FROM '\(([0-9])\)')::int,
                      CASE WHEN want ~ '^(time|timestamp)( with| without|$)' THEN 6 END);
        RETURN p IS NOT NULL AND p > have_mod;
    ELSIF have_type IN ('varchar'::regtype, 'bpchar'::regtype) THEN
        len := field->'parameters'->>'__debezium.source.column.length';
        RETURN CASE WHEN field->>'type' = 'string' AND len ~ '^[0-9]{1,9}$' THEN len::int > have_mod - 4 ELSE false END;
    END IF;
    RETURN false;
END
$$;
COMMENT ON FUNCTION kafka_sink._typmod_loses(jsonb, text, oid, integer) IS
'Internal (evolve => add_columns): whether a field the column''s type takes is wider than its typmod (numeric precision/scale, time precision, string length).';

-- The field's type as evolve's refusal shows it: with the source column's
-- length when Debezium sends it.
CREATE FUNCTION kafka_sink._connect_type_shown(field jsonb, want text)
RETURNS text
LANGUAGE sql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT CASE WHEN field->>'type' = 'string' AND field->'parameters'->>'__debezium.source.column.length' ~ '^[0-9]{1,9}$'
                THEN format('%s (length %s)', want, field->'parameters'->>'__debezium.source.column.length')
                ELSE want END
$$;
COMMENT ON FUNCTION kafka_sink._connect_type_shown(jsonb, text) IS
'Internal (evolve => add_columns): a field''s column type as a refusal names it, with the source column''s length when stated.';

-- evolve => 'add_columns': adds a nullable column for each field of the
-- embedded schema the target lacks.  Never drops or narrows: a field whose
-- type is neither the column's nor implicitly cast to it is refused.
-- Returns NULL when the target takes the schema (after adding columns),
-- else why not (the messages with that schema are quarantined as
-- schema_change_refused).  add false: only checks.
CREATE OR REPLACE FUNCTION kafka_sink._evolve_target(target regclass, value_schema text, add boolean)
RETURNS text
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    s jsonb;
    f jsonb;
    n text;
    want text;
    want_oid oid;
    have pg_attribute;
BEGIN
    BEGIN
        s := kafka_sink._row_schema(value_schema::jsonb);
    EXCEPTION WHEN invalid_text_representation THEN
        s := NULL;
    END;
    IF s IS NULL THEN
        RETURN NULL;            -- no embedded schema: nothing to evolve
    END IF;
    FOR f IN SELECT x FROM jsonb_array_elements(s->'fields') x LOOP
        n := f->>'field';
        IF n IS NULL OR n = '' OR octet_length(n) >= 64 THEN
            RETURN format('The embedded schema has a field name that cannot be a column: %s.', coalesce(quote_literal(n), 'none'));
        END IF;
        want := kafka_sink._connect_type(f);
        want_oid := want::regtype;
        SELECT * INTO have FROM pg_attribute WHERE attrelid = target AND attname = n AND attnum > 0 AND NOT attisdropped;
        IF NOT FOUND THEN
            IF add THEN
                EXECUTE format('ALTER TABLE %s ADD COLUMN %I %s', target, n, want);
            END IF;
        ELSIF have.atttypid <> want_oid
              AND NOT EXISTS (SELECT 1 FROM pg_cast c WHERE c.castsource = want_oid AND c.casttarget = have.atttypid
                                 AND c.castcontext = 'i') THEN
            RETURN format('Field %I is now %s, which column %I of %s (%s) does not take: evolve never narrows or changes a column.',
                          n, want, n, target, format_type(have.atttypid, have.atttypmod));
        ELSIF kafka_sink._typmod_loses(f, want, have.atttypid, have.atttypmod) THEN
            RETURN format('Field %I is now %s, wider than column %I of %s (%s): evolve never widens or changes a column.',
                          n, kafka_sink._connect_type_shown(f, want), n, target, format_type(have.atttypid, have.atttypmod));
        END IF;
    END LOOP;
    RETURN NULL;
END
$$;
COMMENT ON FUNCTION kafka_sink._evolve_target(regclass, text, boolean) IS
'Internal (evolve => add_columns): adds a nullable column for each new field of an embedded schema; returns NULL, or why a change is refused.';
REVOKE ALL ON FUNCTION kafka_sink._typmod_loses(jsonb, text, oid, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION kafka_sink._typmod_loses(jsonb, text, oid, integer) TO kafka_sink_admin;
REVOKE ALL ON FUNCTION kafka_sink._connect_type_shown(jsonb, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION kafka_sink._connect_type_shown(jsonb, text) TO kafka_sink_admin;
-- ---- end of CDC gaps: evolve typmods ----

-- ---- CDC lineage: message_fate/message_fates for change events, routed tables and Avro keys ----
ALTER TYPE kafka_sink.message_fate_row ADD ATTRIBUTE target text;
COMMENT ON TYPE kafka_sink.message_fate_row IS
'A row of kafka_sink.message_fates: a message''s coordinates, its fate, the batch that read it (or quarantined it), a detail and the table it went to.';
--
-- What message_fate and message_fates need past the plain single-target
-- JSON case: the table a message went to (route.c's rules, through
-- _message_target), its key (Avro through the stored schemas only,
-- _avro_key), and for envelope debezium the event's op and source
-- position, judged against the row's position and kafka_sink.cdc_deletions
-- (docs/design-notes.md, "CDC: message fates of change events").

CREATE FUNCTION kafka_sink._message_target(pipeline_id bigint, topic text, value bytea)
RETURNS text
AS 'MODULE_PATHNAME', 'kafka_sink_message_target'
LANGUAGE C
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION kafka_sink._message_target(bigint, text, bytea) IS
'Internal: the quoted, qualified name of the table a message of topic with this value goes to by the pipeline''s routing (its target template, targets map or target), by the worker''s own rules; NULL when none can be named. The table need not exist.';

CREATE FUNCTION kafka_sink._avro_key(registry text, key bytea, fields text[], OUT key jsonb, OUT problem text)
AS 'MODULE_PATHNAME', 'kafka_sink_avro_key'
LANGUAGE C
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION kafka_sink._avro_key(text, bytea, text[]) IS
'Internal: a message key in Confluent''s wire format decoded with the Avro schema stored in kafka_sink.schemas for its id (the registry is never called), as a JSON object of the fields named; problem says why not (no key, not the wire format, an id not stored, not Avro, bytes that do not decode).';

-- A change event's source position, as envelope_debezium.c computes it:
-- PostgreSQL source.lsn; MySQL file's number * 10^26 + pos * 10^6 + row;
-- else source.ts_ms * 10^19 + the Kafka offset.  NULL when it has none.
CREATE FUNCTION kafka_sink._cdc_position(source jsonb, "offset" bigint)
RETURNS numeric
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT CASE
        WHEN jsonb_typeof(source->'lsn') = 'number' THEN (source->>'lsn')::numeric
        WHEN jsonb_typeof(source->'file') = 'string' AND jsonb_typeof(source->'pos') = 'number'
             AND substring(source->>'file' from '\.([0-9]+)$') IS NOT NULL
             AND (source->>'pos') ~ '^[0-9]+$' AND coalesce(source->>'row', '0') ~ '^[0-9]{1,6}$'
             THEN substring(source->>'file' from '\.([0-9]+)$')::numeric * 10::numeric ^ 26
                  + (source->>'pos')::numeric * 1000000 + coalesce(source->>'row', '0')::numeric
        WHEN jsonb_typeof(source->'ts_ms') = 'number' AND (source->>'ts_ms') ~ '^[0-9]+$'
             THEN (source->>'ts_ms')::numeric * 10::numeric ^ 19 + "offset"
    END
$$;
COMMENT ON FUNCTION kafka_sink._cdc_position(jsonb, bigint) IS
'Internal: the source position of a Debezium change event''s source block, as the worker orders events (PostgreSQL lsn; MySQL binlog file, pos and row; else ts_ms and the Kafka offset).';

-- The fate of one read, not quarantined message of a merge pipeline that
-- routes, reads change events or has Avro keys: the table it went to (or
-- would have), its fate and a detail.  b_id: the batch that read it; key
-- and value: the raw message from bronze (NULL value: a tombstone), has_msg
-- false when bronze does not hold it.
CREATE FUNCTION kafka_sink._traced_fate(p kafka_sink.pipeline_definitions, topic text, partition integer,
                                        "offset" bigint, b_id bigint, has_msg boolean, msg_key bytea, msg_value bytea,
                                        OUT target text, OUT fate text, OUT detail text)
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    routed boolean := p.target_template IS NOT NULL OR p.targets IS NOT NULL;
    cdc boolean := p.envelope = 'debezium';
    tgt regclass;
    keycols text[];
    poscol text := coalesce(p.order_column, '_kafka_source_position');
    ev jsonb;
    op text;
    pos numeric;
    k jsonb;
    kproblem text;
    kwhy text;
    cond text;
    r record;
    keyarr jsonb;
    del_pos numeric;
    trunc_pos numeric;
BEGIN
    IF NOT has_msg THEN
        target := CASE WHEN NOT routed THEN p.target::text END;
        fate := 'applied or superseded';
        detail := 'lineage columns on the target and a bronze table are needed to tell more';
        RETURN;
    END IF;
    IF cdc AND msg_value IS NULL THEN
        -- the tombstone after a delete: the worker skips it (counted superseded)
        target := CASE WHEN routed THEN kafka_sink._message_target(p.id, topic, NULL) ELSE p.target::text END;
        fate := 'superseded';
        detail := 'the tombstone Debezium sends after a delete: the delete did the work, nothing to apply';
        RETURN;
    END IF;
    target := CASE WHEN routed THEN kafka_sink._message_target(p.id, topic, msg_value) ELSE p.target::text END;
    IF target IS NULL THEN
        fate := 'applied or superseded';
        detail := 'the pipeline''s routing names no table for it';
        RETURN;
    END IF;
    tgt := to_regclass(target);
    IF tgt IS NULL THEN
        fate := 'applied or superseded';
        detail := format('table %s does not exist (any more)', target);
        RETURN;
    END IF;
    IF (SELECT count(*) FROM pg_attribute a WHERE a.attrelid = tgt AND NOT a.attisdropped AND a.attnum > 0
          AND a.attname IN ('_kafka_topic', '_kafka_partition', '_kafka_offset', '_kafka_batch_id')) < 4 THEN
        fate := 'applied or superseded';
        detail := 'lineage columns on the target and a bronze table are needed to tell more';
        RETURN;
    END IF;
    -- key_columns, else the target's primary key (as the worker takes them)
    keycols := coalesce(p.key_columns,
        (SELECT array_agg(a.attname::text ORDER BY x.n)
           FROM pg_index i CROSS JOIN LATERAL unnest(i.indkey) WITH ORDINALITY AS x(att, n)
           JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = x.att
          WHERE i.indrelid = tgt AND i.indisprimary));
    IF keycols IS NULL THEN
        fate := 'applied or superseded';
        detail := format('table %s has no key to find the message''s row by', target);
        RETURN;
    END IF;

    IF cdc THEN
        BEGIN
            ev := convert_from(msg_value, 'UTF8')::jsonb;
        EXCEPTION WHEN OTHERS THEN
            ev := NULL;
        END;
        IF jsonb_typeof(ev) = 'object' AND ev ? 'payload' AND jsonb_typeof(ev->'schema') = 'object' THEN
            ev := ev->'payload';
        END IF;
        op := ev->>'op';
        pos := kafka_sink._cdc_position(ev->'source', "offset");
        IF op = 't' THEN
            IF p.on_truncate = 'apply' THEN
                fate := 'truncated';
                detail := format('truncated %s at source position %s: its rows from older source positions were deleted', target, pos);
            ELSE
                fate := 'superseded';
                detail := format('a truncate, not applied (on_truncate %s)', p.on_truncate);
            END IF;
            RETURN;
        END IF;
    END IF;

    -- the message's key
    IF p.key_format = 'avro' THEN
        SELECT a.key, a.problem INTO k, kproblem
          FROM kafka_sink._avro_key(p.schema_registry->>'url', msg_key, keycols) a;
        IF kproblem IS NOT NULL THEN
            fate := 'applied or superseded';
            detail := 'the key cannot be decoded here: ' || kproblem;
            RETURN;
        END IF;
    ELSIF p.key_format = 'string' AND msg_key IS NOT NULL THEN
        k := jsonb_build_object(keycols[1], convert_from(msg_key, 'UTF8'));
    ELSIF p.key_format = 'json' AND msg_key IS NOT NULL THEN
        k := convert_from(msg_key, 'UTF8')::jsonb;
        IF cdc AND jsonb_typeof(k) = 'object' AND k ? 'payload' AND jsonb_typeof(k->'schema') = 'object' THEN
            k := k->'payload';
        END IF;
    ELSIF cdc THEN
        -- a delete's key from before (never its other values), else after
        k := CASE WHEN op = 'd' THEN ev->'before' ELSE ev->'after' END;
    ELSIF p.value_format = 'json' AND msg_value IS NOT NULL THEN
        SELECT jsonb_object_agg(c, (convert_from(msg_value, 'UTF8')::jsonb)
                   #> string_to_array(coalesce(p.columns->c->>'path', p.columns->>c, c), '.'))
          INTO k FROM unnest(keycols) c;
    END IF;
    IF jsonb_typeof(k) IS DISTINCT FROM 'object' THEN
        fate := 'applied or superseded';
        kwhy := CASE WHEN p.value_format <> 'json' AND p.key_format = 'none'
                     THEN format('the key of a message in value_format %s is not decoded here', p.value_format)
                     ELSE 'the message''s key cannot be read' END;
        detail := kwhy;
        RETURN;
    END IF;
    SELECT jsonb_object_agg(c, k->c) INTO k FROM unnest(keycols) c;

    SELECT string_agg(format('t.%1$I = kk.%1$I', c), ' AND ') INTO cond FROM unnest(keycols) c;
    EXECUTE format('SELECT t._kafka_topic AS topic, t._kafka_partition AS partition, t._kafka_offset AS "offset",'
                   ' t._kafka_batch_id AS batch_id, %s AS pos'
                   ' FROM %s t, jsonb_populate_record(NULL::%s, $1) kk WHERE %s',
                   CASE WHEN cdc AND EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = tgt AND a.attname = poscol
                                                AND a.attnum > 0 AND NOT a.attisdropped)
                        THEN format('t.%I::numeric', poscol) ELSE 'NULL::numeric' END,
                   tgt, tgt, cond)
       INTO r USING k;

    IF r."offset" IS NOT NULL AND r.topic = topic AND r.partition = partition AND r."offset" = "offset" THEN
        fate := 'applied';
        detail := format('the current source of the row with key %s', k);
    ELSIF r."offset" IS NOT NULL AND r.batch_id = b_id THEN
        fate := 'superseded';
        detail := format('offset %s of the same batch won for key %s', r."offset", k);
    ELSIF r."offset" IS NOT NULL AND r.batch_id < b_id THEN
        fate := 'stale';
        detail := CASE WHEN cdc AND r.pos IS NOT NULL
                       THEN format('the row for key %s (from batch %s) was newer: its source position %s, this %s %s',
                                   k, r.batch_id, r.pos, CASE op WHEN 'd' THEN 'delete''s' ELSE 'event''s' END, pos)
                       ELSE format('the row for key %s (from batch %s) was newer', k, r.batch_id) END;
    ELSIF r."offset" IS NOT NULL THEN
        fate := 'overwritten';
        detail := CASE WHEN cdc AND op = 'd'
                       THEN format('deleted, then written again by offset %s in batch %s', r."offset", r.batch_id)
                       ELSE format('replaced by offset %s in batch %s', r."offset", r.batch_id) END;
    ELSIF NOT cdc THEN
        fate := 'deleted';
        detail := format('no row for key %s', k);
    ELSIF op = 'd' THEN
        fate := 'deleted';
        detail := format('deleted the row with key %s at source position %s', k, pos);
    ELSE
        -- no row: a delete or truncate at a source position at or past this
        -- event's removed it, or kept it from coming back (stale on arrival)
        EXECUTE format('SELECT to_jsonb(ARRAY[%s]) FROM jsonb_populate_record(NULL::%s, $1) kk',
                       (SELECT string_agg(format('kk.%I::text', c), ', ') FROM unnest(keycols) c), tgt)
           INTO keyarr USING k;
        SELECT max(d.position) FILTER (WHERE d.key = keyarr), max(d.position) FILTER (WHERE d.key = 'null'::jsonb)
          INTO del_pos, trunc_pos
          FROM kafka_sink.cdc_deletions d WHERE d.pipeline_id = p.id AND d.target = tgt;
        -- the first of them at or past this event is what removed the row
        IF trunc_pos >= pos AND (del_pos IS NULL OR del_pos < pos OR trunc_pos < del_pos) THEN
            fate := 'truncated';
            detail := format('no row for key %s: %s was truncated at source position %s, not older than this event''s %s',
                             k, target, trunc_pos, pos);
        ELSIF del_pos >= pos THEN
            fate := 'deleted';
            detail := format('no row for key %s: it was deleted at source position %s, not older than this event''s %s',
                             k, del_pos, pos);
        ELSE
            fate := 'deleted';
            detail := format('no row for key %s', k);
        END IF;
    END IF;
END
$$;
COMMENT ON FUNCTION kafka_sink._traced_fate(kafka_sink.pipeline_definitions, text, integer, bigint, bigint, boolean, bytea, bytea) IS
'Internal: the table, fate and detail of one read message of a merge pipeline that routes, reads Debezium change events or has Avro keys (message_fate, message_fates).';

REVOKE ALL ON FUNCTION kafka_sink._message_target(bigint, text, bytea) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION kafka_sink._message_target(bigint, text, bytea) TO kafka_sink_admin;
REVOKE ALL ON FUNCTION kafka_sink._avro_key(text, bytea, text[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION kafka_sink._avro_key(text, bytea, text[]) TO kafka_sink_admin;
REVOKE ALL ON FUNCTION kafka_sink._cdc_position(jsonb, bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION kafka_sink._cdc_position(jsonb, bigint) TO kafka_sink_admin;
REVOKE ALL ON FUNCTION kafka_sink._traced_fate(kafka_sink.pipeline_definitions, text, integer, bigint, bigint, boolean, bytea, bytea) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION kafka_sink._traced_fate(kafka_sink.pipeline_definitions, text, integer, bigint, bigint, boolean, bytea, bytea) TO kafka_sink_admin;

CREATE OR REPLACE FUNCTION kafka_sink.message_fates(pipeline text, topic text DEFAULT NULL, partition integer DEFAULT NULL,
                                         from_offset bigint DEFAULT NULL, to_offset bigint DEFAULT NULL)
RETURNS SETOF kafka_sink.message_fate_row
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    p kafka_sink.pipeline_definitions;
    has_lineage boolean;
    keyexpr text;
    keycond text;
    body text;
    classify text;
    routed boolean := false;
BEGIN
    PERFORM kafka_sink._require_admin();
    p := kafka_sink._get_pipeline(pipeline);
    IF from_offset < 0 OR to_offset < 0 THEN
        RAISE EXCEPTION 'offsets cannot be negative'
            USING ERRCODE = 'invalid_parameter_value', HINT = 'Pass from_offset and to_offset as Kafka offsets (0 or more).';
    END IF;
    IF from_offset > to_offset THEN
        RAISE EXCEPTION 'from_offset % is past to_offset %', from_offset, to_offset
            USING ERRCODE = 'invalid_parameter_value', HINT = 'Both ends of the range are included.';
    END IF;
    IF partition < 0 THEN
        RAISE EXCEPTION 'partition cannot be negative'
            USING ERRCODE = 'invalid_parameter_value', HINT = 'Kafka partitions are numbered from 0.';
    END IF;
    routed := p.target_template IS NOT NULL OR p.targets IS NOT NULL;
    has_lineage := p.target IS NOT NULL AND (SELECT count(*) FROM pg_attribute a
                       WHERE a.attrelid = p.target AND NOT a.attisdropped AND a.attnum > 0
                         AND a.attname IN ('_kafka_topic', '_kafka_partition', '_kafka_offset', '_kafka_batch_id')) = 4;

    -- the messages of the range: per partition with a checkpoint, from
    -- from_offset (else the first checkpoint or the first retained batch)
    -- to to_offset (else the last committed offset); offsets at or past
    -- the checkpoint are pending, so only listed when to_offset asks
    body := $q$
    WITH parts AS MATERIALIZED (
        SELECT o.topic, o.partition, o.next_offset,
               coalesce($4, least(o.start_offset, (
                   SELECT min(r.start) FROM kafka_sink.batches b,
                          jsonb_to_recordset(b.ranges) AS r(topic text, partition integer, start bigint)
                    WHERE b.pipeline_id = $1 AND r.topic = o.topic AND r.partition = o.partition)), o.next_offset) AS lo,
               coalesce($5, o.next_offset - 1) AS hi
          FROM kafka_sink.offsets o
         WHERE o.pipeline_id = $1 AND ($2::text IS NULL OR o.topic = $2) AND ($3::int IS NULL OR o.partition = $3)),
    in_batch AS MATERIALIZED (
        SELECT pa.topic, pa.partition, g.o AS "offset", max(b.batch_id) AS batch_id
          FROM kafka_sink.batches b,
               jsonb_to_recordset(b.ranges) AS r(topic text, partition integer, start bigint, "end" bigint),
               parts pa,
               generate_series(greatest(r.start, pa.lo), least(r."end" - 1, pa.hi, pa.next_offset - 1)) AS g(o)
         WHERE b.pipeline_id = $1 AND r.topic = pa.topic AND r.partition = pa.partition
         GROUP BY 1, 2, 3),
    lost AS MATERIALIZED (
        SELECT DISTINCT pa.topic, pa.partition, g.o AS "offset"
          FROM kafka_sink.data_loss d
          JOIN parts pa ON pa.topic = d.topic AND pa.partition = d.partition,
               generate_series(greatest(d.expected_offset, pa.lo), least(d.available_offset - 1, pa.hi)) AS g(o)
         WHERE d.pipeline_id = $1 AND d.kind = 'deleted'),
    m AS MATERIALIZED (
        SELECT pa.topic, pa.partition, g.o AS "offset", g.o >= pa.next_offset AS pending,
               ib.batch_id, l."offset" IS NOT NULL AS lost,
               q.batch_id AS q_batch, q.reason || ': ' || q.detail AS q_detail, q.target AS q_target
          FROM parts pa
         CROSS JOIN LATERAL generate_series(pa.lo, pa.hi) AS g(o)
          LEFT JOIN in_batch ib ON ib.topic = pa.topic AND ib.partition = pa.partition AND ib."offset" = g.o
          LEFT JOIN lost l ON l.topic = pa.topic AND l.partition = pa.partition AND l."offset" = g.o
          LEFT JOIN kafka_sink.quarantine q
                 ON q.pipeline_id = $1 AND q.topic = pa.topic AND q.partition = pa.partition
                AND q.message_offset = g.o AND q.replayed_at IS NULL)
    $q$;

    classify := $q$
        CASE WHEN m.pending THEN 'pending'
             WHEN m.lost THEN 'lost'
             WHEN m.q_batch IS NOT NULL THEN 'quarantined' $q$;

    -- routed tables, change events, Avro keys: each message read from
    -- bronze and judged by _traced_fate (a function call per message, no
    -- statement per message beyond its row's look-up by key)
    IF p.mode = 'merge' AND p.bronze IS NOT NULL
       AND (routed OR p.envelope = 'debezium' OR p.key_format = 'avro') THEN
        RETURN QUERY EXECUTE body || format($q$
        SELECT m.topic, m.partition, m."offset",
               %s ELSE f.fate END,
               CASE WHEN m.q_batch IS NOT NULL AND NOT m.pending AND NOT m.lost THEN m.q_batch
                    WHEN NOT m.pending THEN m.batch_id END,
               CASE WHEN m.pending THEN 'not read yet'
                    WHEN m.lost THEN 'deleted from Kafka before it was read (fail_on_data_loss = false)'
                    WHEN m.q_batch IS NOT NULL THEN m.q_detail
                    ELSE f.detail END,
               CASE WHEN m.pending OR m.lost THEN NULL
                    WHEN m.q_batch IS NOT NULL THEN m.q_target
                    ELSE f.target END
          FROM m
          LEFT JOIN %s br ON NOT m.pending AND NOT m.lost AND m.q_batch IS NULL
                         AND br.topic = m.topic COLLATE "C" AND br.partition = m.partition AND br."offset" = m."offset"
          LEFT JOIN LATERAL kafka_sink._traced_fate($6, m.topic, m.partition, m."offset", m.batch_id,
                                                    br."offset" IS NOT NULL, br.key, br.value) f
                 ON NOT m.pending AND NOT m.lost AND m.q_batch IS NULL
         ORDER BY 1, 2, 3 $q$, classify, p.bronze)
            USING p.id, topic, partition, from_offset, to_offset, p;
        RETURN;
    END IF;

    -- (a key in a registry's wire format other than Avro is decoded by the
    -- worker only: as message_fate, no more than 'applied or superseded')
    IF p.target IS NULL OR p.mode <> 'merge' OR NOT has_lineage OR p.bronze IS NULL
       OR routed
       OR p.key_format = 'avro' OR (p.key_format = 'none' AND p.value_format <> 'json') THEN
        RETURN QUERY EXECUTE body || format($q$
        SELECT m.topic, m.partition, m."offset",
               %s ELSE %L END,
               CASE WHEN m.q_batch IS NOT NULL AND NOT m.pending AND NOT m.lost THEN m.q_batch
                    WHEN NOT m.pending THEN m.batch_id END,
               CASE WHEN m.pending THEN 'not read yet'
                    WHEN m.lost THEN 'deleted from Kafka before it was read (fail_on_data_loss = false)'
                    WHEN m.q_batch IS NOT NULL THEN m.q_detail
                    ELSE %L END,
               CASE WHEN m.pending OR m.lost THEN NULL
                    WHEN m.q_batch IS NOT NULL THEN m.q_target
                    ELSE %L END
          FROM m ORDER BY 1, 2, 3 $q$,
            classify,
            CASE WHEN p.target_template IS NOT NULL OR p.targets IS NOT NULL
                      THEN CASE WHEN p.mode = 'append' THEN 'appended' ELSE 'applied or superseded' END
                 WHEN p.target IS NULL THEN 'landed' WHEN p.mode = 'append' THEN 'appended'
                 WHEN p.mode = 'function' THEN 'passed to the batch function' ELSE 'applied or superseded' END,
            CASE WHEN p.target_template IS NOT NULL OR p.targets IS NOT NULL
                      THEN 'routed to one of several tables: the table of each message is named with a bronze table (merge mode); kafka_sink.quarantine.target names the table of a quarantined message'
                 WHEN p.target IS NULL THEN 'bronze only' WHEN p.mode <> 'merge' THEN NULL
                 WHEN has_lineage AND p.bronze IS NOT NULL
                 THEN format('the key of a message in value_format %s or key_format %s is not decoded here',
                             p.value_format, p.key_format)
                 ELSE 'lineage columns on the target and a bronze table are needed to tell more' END,
            p.target::text)
            USING p.id, topic, partition, from_offset, to_offset;
        RETURN;
    END IF;

    -- the message's key, decoded as message_fate() decodes it
    IF p.key_format = 'string' THEN
        keyexpr := format('jsonb_build_object(%L, convert_from(br.key, ''UTF8''))', p.key_columns[1]);
    ELSIF p.key_format = 'json' THEN
        keyexpr := 'convert_from(br.key, ''UTF8'')::jsonb';
    ELSE
        SELECT 'CASE WHEN br.value IS NOT NULL THEN jsonb_build_object(' ||
               string_agg(format('%L, (convert_from(br.value, ''UTF8'')::jsonb) #> %L::text[]', c,
                                 string_to_array(coalesce(p.columns->c->>'path', p.columns->>c, c), '.')), ', ')
               || ') END'
          INTO keyexpr FROM unnest(p.key_columns) c;
    END IF;
    SELECT string_agg(format('t.%1$I = (mk.k).%1$I', c), ' AND ') INTO keycond FROM unnest(p.key_columns) c;

    RETURN QUERY EXECUTE body || format($q$,
    mk AS (
        SELECT m.*, br."offset" IS NOT NULL AS has_msg, v.v, jsonb_populate_record(NULL::%1$s, v.v) AS k
          FROM m
          LEFT JOIN %2$s br ON NOT m.pending AND NOT m.lost AND m.q_batch IS NULL
                           AND br.topic = m.topic COLLATE "C" AND br.partition = m.partition AND br."offset" = m."offset"
          CROSS JOIN LATERAL (SELECT CASE WHEN br."offset" IS NOT NULL THEN %3$s END AS v) v)
    SELECT mk.topic, mk.partition, mk."offset",
           %4$s
                WHEN NOT mk.has_msg THEN 'applied or superseded'
                WHEN t._kafka_offset IS NULL THEN 'deleted'
                WHEN t._kafka_topic = mk.topic AND t._kafka_partition = mk.partition AND t._kafka_offset = mk."offset" THEN 'applied'
                WHEN t._kafka_batch_id = mk.batch_id THEN 'superseded'
                WHEN t._kafka_batch_id < mk.batch_id THEN 'stale'
                ELSE 'overwritten' END,
           CASE WHEN mk.q_batch IS NOT NULL AND NOT mk.pending AND NOT mk.lost THEN mk.q_batch
                WHEN NOT mk.pending THEN mk.batch_id END,
           CASE WHEN mk.pending THEN 'not read yet'
                WHEN mk.lost THEN 'deleted from Kafka before it was read (fail_on_data_loss = false)'
                WHEN mk.q_batch IS NOT NULL THEN mk.q_detail
                WHEN NOT mk.has_msg THEN 'lineage columns on the target and a bronze table are needed to tell more'
                WHEN t._kafka_offset IS NULL THEN format('no row for key %%s', mk.v)
                WHEN t._kafka_topic = mk.topic AND t._kafka_partition = mk.partition AND t._kafka_offset = mk."offset"
                     THEN format('the current source of the row with key %%s', mk.v)
                WHEN t._kafka_batch_id = mk.batch_id THEN format('offset %%s of the same batch won for key %%s', t._kafka_offset, mk.v)
                WHEN t._kafka_batch_id < mk.batch_id THEN format('the row for key %%s (from batch %%s) was newer', mk.v, t._kafka_batch_id)
                ELSE format('replaced by offset %%s in batch %%s', t._kafka_offset, t._kafka_batch_id) END,
           CASE WHEN mk.pending OR mk.lost THEN NULL
                WHEN mk.q_batch IS NOT NULL THEN mk.q_target
                ELSE %6$L END
      FROM mk
      LEFT JOIN %1$s t ON mk.has_msg AND %5$s
     ORDER BY 1, 2, 3 $q$,
        p.target, p.bronze, keyexpr, replace(classify, 'm.', 'mk.'), keycond, p.target::text)
        USING p.id, topic, partition, from_offset, to_offset;
END
$$;
REVOKE ALL ON FUNCTION kafka_sink.message_fates(text, text, integer, bigint, bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION kafka_sink.message_fates(text, text, integer, bigint, bigint) TO kafka_sink_admin;
COMMENT ON FUNCTION kafka_sink.message_fates(text, text, integer, bigint, bigint) IS
'The fate of every message of a pipeline in an offset range (both ends included; default: from the first checkpoint or retained batch to the last committed offset), by the rules of message_fate(): pending, lost, quarantined, applied, superseded, stale, overwritten, deleted, truncated, appended, landed, or applied or superseded (without lineage columns and bronze), with the table each message went to (routed pipelines: the table its routing names; change events judged by source position). Cost: linear in the messages of the range plus the retained batches of the pipeline; no statement per message.';


DROP FUNCTION kafka_sink.message_fate(text, text, integer, bigint);
CREATE FUNCTION kafka_sink.message_fate(pipeline text, topic text, partition integer, "offset" bigint)
RETURNS TABLE (fate text, batch_id bigint, detail text, target text)
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    p kafka_sink.pipeline_definitions;
    q kafka_sink.quarantine;
    committed bigint;
    b_id bigint;
    msg record;
    v jsonb;
    cond text;
    row_batch bigint;
    row_offset bigint;
    row_topic text;
    row_partition int;
    has_lineage boolean;
    has_msg boolean;
    keycol text;
BEGIN
    p := kafka_sink._get_pipeline(pipeline);
    SELECT o.next_offset INTO committed FROM kafka_sink.offsets o
     WHERE o.pipeline_id = p.id AND o.topic = message_fate.topic AND o.partition = message_fate.partition;
    IF committed IS NULL OR message_fate."offset" >= committed THEN
        RETURN QUERY SELECT 'pending'::text, NULL::bigint, 'not read yet'::text, NULL::text;
        RETURN;
    END IF;
    SELECT x.batch_id INTO b_id FROM kafka_sink.batches x, jsonb_array_elements(x.ranges) g
     WHERE x.pipeline_id = p.id AND g->>'topic' = message_fate.topic AND (g->>'partition')::int = message_fate.partition
       AND message_fate."offset" >= (g->>'start')::bigint AND message_fate."offset" < (g->>'end')::bigint LIMIT 1;
    IF EXISTS (SELECT 1 FROM kafka_sink.data_loss d WHERE d.pipeline_id = p.id AND d.topic = message_fate.topic
                 AND d.partition = message_fate.partition AND d.kind = 'deleted'
                 AND message_fate."offset" >= d.expected_offset AND message_fate."offset" < d.available_offset) THEN
        RETURN QUERY SELECT 'lost'::text, b_id, 'deleted from Kafka before it was read (fail_on_data_loss = false)'::text, NULL::text;
        RETURN;
    END IF;
    SELECT * INTO q FROM kafka_sink.quarantine x
     WHERE x.pipeline_id = p.id AND x.topic = message_fate.topic AND x.partition = message_fate.partition
       AND x.message_offset = message_fate."offset";
    IF FOUND AND q.replayed_at IS NULL THEN
        RETURN QUERY SELECT 'quarantined'::text, q.batch_id, q.reason || ': ' || q.detail, q.target;
        RETURN;
    END IF;
    IF p.target IS NULL AND p.target_template IS NULL AND p.targets IS NULL AND p.mode <> 'function' THEN
        RETURN QUERY SELECT 'landed'::text, b_id, 'bronze only'::text, NULL::text;
        RETURN;
    END IF;
    IF p.mode <> 'merge' THEN
        RETURN QUERY SELECT CASE p.mode WHEN 'append' THEN 'appended' ELSE 'passed to the batch function' END, b_id, NULL::text,
            CASE WHEN p.mode = 'append' AND (p.target_template IS NOT NULL OR p.targets IS NOT NULL)
                 THEN kafka_sink._message_target(p.id, topic, (SELECT m.value FROM kafka_sink._bronze_message(p.bronze, topic, partition, "offset") m))
                 ELSE p.target::text END;
        RETURN;
    END IF;
    -- routed tables, change events, Avro keys: the table it went to, and
    -- its fate there (70_lineage.sql)
    IF p.target_template IS NOT NULL OR p.targets IS NOT NULL OR p.envelope = 'debezium' OR p.key_format = 'avro' THEN
        SELECT * INTO msg FROM kafka_sink._bronze_message(p.bronze, topic, partition, "offset");
        has_msg := FOUND;
        RETURN QUERY SELECT f.fate, b_id, f.detail, f.target
          FROM kafka_sink._traced_fate(p, topic, partition, "offset", b_id, has_msg,
                                       CASE WHEN has_msg THEN msg.key END, CASE WHEN has_msg THEN msg.value END) f;
        RETURN;
    END IF;
    has_lineage := (SELECT count(*) FROM pg_attribute a WHERE a.attrelid = p.target AND NOT a.attisdropped
                      AND a.attname IN ('_kafka_topic', '_kafka_partition', '_kafka_offset', '_kafka_batch_id')) = 4;
    SELECT * INTO msg FROM kafka_sink._bronze_message(p.bronze, topic, partition, "offset");
    IF NOT has_lineage OR msg IS NULL THEN
        RETURN QUERY SELECT 'applied or superseded'::text, b_id,
            'lineage columns on the target and a bronze table are needed to tell more'::text, p.target::text;
        RETURN;
    END IF;
    -- a key in Avro or in a registry's wire format is decoded by the worker
    -- only (src/format.c): the raw bytes are not JSON text
    IF p.key_format = 'avro' OR (p.key_format = 'none' AND p.value_format <> 'json') THEN
        RETURN QUERY SELECT 'applied or superseded'::text, b_id,
            format('the key of a message in value_format %s or key_format %s is not decoded here',
                   p.value_format, p.key_format), p.target::text;
        RETURN;
    END IF;
    -- the message's key, decoded the way the pipeline does for the common cases
    IF p.key_format = 'string' THEN
        v := jsonb_build_object(p.key_columns[1], convert_from(msg.key, 'UTF8'));
    ELSIF p.key_format = 'json' THEN
        v := convert_from(msg.key, 'UTF8')::jsonb;
    ELSIF msg.value IS NOT NULL THEN
        v := '{}';
        FOREACH keycol IN ARRAY p.key_columns LOOP
            v := v || jsonb_build_object(keycol, convert_from(msg.value, 'UTF8')::jsonb
                        #> string_to_array(coalesce(p.columns->>keycol, p.columns->keycol->>'path', keycol), '.'));
        END LOOP;
    END IF;
    SELECT string_agg(format('t.%1$I = k.%1$I', c), ' AND ') INTO cond FROM unnest(p.key_columns) c;
    EXECUTE format('SELECT t._kafka_topic, t._kafka_partition, t._kafka_offset, t._kafka_batch_id'
                   ' FROM %s t, jsonb_populate_record(NULL::%s, $1) k WHERE %s', p.target, p.target, cond)
       INTO row_topic, row_partition, row_offset, row_batch USING v;
    IF row_offset IS NULL THEN
        RETURN QUERY SELECT 'deleted'::text, b_id, format('no row for key %s', v), p.target::text;
    ELSIF row_topic = topic AND row_partition = partition AND row_offset = "offset" THEN
        RETURN QUERY SELECT 'applied'::text, b_id, format('the current source of the row with key %s', v), p.target::text;
    ELSIF row_batch = b_id THEN
        RETURN QUERY SELECT 'superseded'::text, b_id,
            format('offset %s of the same batch won for key %s', row_offset, v), p.target::text;
    ELSIF row_batch < b_id THEN
        RETURN QUERY SELECT 'stale'::text, b_id,
            format('the row for key %s (from batch %s) was newer', v, row_batch), p.target::text;
    ELSE
        RETURN QUERY SELECT 'overwritten'::text, b_id,
            format('replaced by offset %s in batch %s', row_offset, row_batch), p.target::text;
    END IF;
END
$$;
COMMENT ON FUNCTION kafka_sink.message_fate(text, text, integer, bigint) IS
'What happened to one message: pending, lost, quarantined, applied, superseded, stale, overwritten, deleted, truncated, duplicate, appended or landed, with the batch, a detail and the table it went to (for a routed pipeline the table its routing names; for Debezium change events judged by source position; Avro keys decoded through kafka_sink.schemas).';
REVOKE ALL ON FUNCTION kafka_sink.message_fate(text, text, integer, bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION kafka_sink.message_fate(text, text, integer, bigint) TO kafka_sink_admin;

-- ---- end of CDC lineage ----

-- ---- CDC: Avro change events (issues 15 and 16) ----
-- envelope debezium reads value_format avro too (Confluent's AvroConverter)
CREATE OR REPLACE FUNCTION kafka_sink._check_envelope(envelope text, on_truncate text, target regclass,
                                           order_column text, mode text, value_format text)
RETURNS text
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    col text := order_column;
    typ regtype;
BEGIN
    IF envelope IS NULL OR envelope NOT IN ('plain', 'debezium') THEN
        RAISE EXCEPTION 'invalid envelope "%"', envelope
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'envelope is ''plain'' (the value is the row) or ''debezium'' (change events).';
    END IF;
    IF on_truncate IS NULL OR on_truncate NOT IN ('apply', 'ignore', 'fail') THEN
        RAISE EXCEPTION 'invalid on_truncate "%"', on_truncate
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'on_truncate is ''apply'', ''ignore'' or ''fail''.';
    END IF;
    IF envelope = 'plain' THEN
        IF on_truncate <> 'apply' THEN
            RAISE EXCEPTION 'on_truncate needs envelope debezium'
                USING ERRCODE = 'invalid_parameter_value',
                      HINT = 'Only change events carry truncates; pass envelope => ''debezium'' as well.';
        END IF;
        RETURN order_column;
    END IF;
    IF mode IS DISTINCT FROM 'merge' THEN
        RAISE EXCEPTION 'envelope debezium needs a target in mode merge'
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Change events are applied by key: pass target => ''schema.table'' and mode => ''merge''.';
    END IF;
    IF value_format IS NULL OR value_format NOT IN ('json', 'avro') THEN
        RAISE EXCEPTION 'envelope debezium supports value_format json and avro only'
            USING ERRCODE = 'feature_not_supported',
                  HINT = 'Use Kafka Connect''s JsonConverter (with or without schemas.enable) or Confluent''s AvroConverter (value_format avro with a schema_registry).';
    END IF;
    col := coalesce(col, '_kafka_source_position');
    IF target IS NULL THEN
        -- routed (a template or a targets map): each table is checked as
        -- the worker opens it (target.c), with the same rule
        RETURN col;
    END IF;
    SELECT a.atttypid::regtype INTO typ FROM pg_attribute a
     WHERE a.attrelid = target AND a.attname = col AND a.attnum > 0 AND NOT a.attisdropped;
    IF typ IS NULL THEN
        RAISE EXCEPTION 'target % has no column "%" for the source position', target, col
            USING ERRCODE = 'undefined_column',
                  DETAIL = 'With envelope debezium every row keeps the source position of its last change, which orders replayed and re-sent events.',
                  HINT = format('ALTER TABLE %s ADD COLUMN %I numeric', target, col);
    END IF;
    IF (SELECT CASE WHEN t.typtype = 'd' THEN t.typbasetype ELSE t.oid END FROM pg_type t WHERE t.oid = typ)
       <> 'numeric'::regtype THEN
        RAISE EXCEPTION 'source position column "%" of % must be numeric, not %', col, target, typ
            USING ERRCODE = 'datatype_mismatch',
                  HINT = 'The source position (a PostgreSQL LSN, a MySQL binlog position) does not fit a smaller type.';
    END IF;
    RETURN col;
END
$$;

-- routing by value fields, create_targets and evolve read Avro values too
CREATE OR REPLACE FUNCTION kafka_sink._check_routing(template text, targets jsonb, create_targets boolean,
                                          evolve text, mode text, value_format text)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    e record;
    parts text[];
BEGIN
    IF evolve NOT IN ('none', 'add_columns') THEN
        RAISE EXCEPTION 'invalid evolve "%"', evolve
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'evolve is ''none'' or ''add_columns''.';
    END IF;
    IF (create_targets OR evolve <> 'none') AND template IS NULL AND targets IS NULL THEN
        RAISE EXCEPTION 'create_targets and evolve need routing'
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Pass a target template such as ''replica.{source.table}'', or a targets map.';
    END IF;
    IF (create_targets OR evolve <> 'none') AND value_format NOT IN ('json', 'avro') THEN
        RAISE EXCEPTION 'create_targets and evolve read the embedded schema of JSON values or the writer schema of Avro values'
            USING ERRCODE = 'feature_not_supported',
                  HINT = 'Use value_format json with values as Kafka Connect''s JsonConverter writes them (schemas.enable), or avro, or create the targets first.';
    END IF;
    IF mode = 'function' THEN
        RAISE EXCEPTION 'mode function cannot route to many targets'
            USING ERRCODE = 'feature_not_supported',
                  DETAIL = 'A batch function takes the rows of one table type.',
                  HINT = 'Use mode merge or append with a target template or a targets map.';
    END IF;
    IF template IS NOT NULL THEN
        PERFORM kafka_sink._check_target_template(template);
        IF value_format NOT IN ('json', 'avro') AND template ~ '\{(?!topic\})' THEN
            RAISE EXCEPTION 'target template "%" reads value fields, which needs value_format json or avro', template
                USING ERRCODE = 'feature_not_supported',
                      HINT = 'With another value_format, route by {topic} or with a targets map keyed by topic.';
        END IF;
    END IF;
    IF targets IS NOT NULL THEN
        IF jsonb_typeof(targets) <> 'object' OR targets = '{}' THEN
            RAISE EXCEPTION 'targets must be a non-empty JSON object'
                USING ERRCODE = 'invalid_parameter_value',
                      HINT = 'Pass targets => ''{"orders": "public.orders", "inventory.items": "replica.items"}''.';
        END IF;
        FOR e IN SELECT key, value FROM jsonb_each(targets) LOOP
            IF e.key = '' OR jsonb_typeof(e.value) <> 'string' THEN
                RAISE EXCEPTION 'targets entry "%" must map a non-empty name to a table name', e.key
                    USING ERRCODE = 'invalid_parameter_value',
                          HINT = 'Each key is a topic or a source schema.table, each value a schema-qualified table name such as "public.orders".';
            END IF;
            BEGIN
                parts := parse_ident(e.value #>> '{}');
            EXCEPTION WHEN invalid_parameter_value OR invalid_name OR name_too_long THEN
                parts := NULL;
            END;
            IF cardinality(parts) IS DISTINCT FROM 2 OR octet_length(parts[1]) >= 64 OR octet_length(parts[2]) >= 64 THEN
                RAISE EXCEPTION 'targets entry "%": "%" is not a schema-qualified table name', e.key, e.value #>> '{}'
                    USING ERRCODE = 'invalid_parameter_value',
                          HINT = 'Write schema.table, quoting names as in SQL (e.g. "public.orders" or "\"My Schema\".t").';
            END IF;
        END LOOP;
    END IF;
END
$$;

-- ---- end of CDC: Avro change events ----

-- ---- lineage(pipeline, key, target): routed pipelines ----
DROP FUNCTION kafka_sink.lineage(text, jsonb);
CREATE FUNCTION kafka_sink._pipeline_written_tables(p kafka_sink.pipeline_definitions)
RETURNS text[]
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT coalesce(array_agg(DISTINCT t ORDER BY t), '{}')
      FROM (SELECT jsonb_object_keys(b.progress->'sink'->'targets') AS t
              FROM kafka_sink.batches b
             WHERE b.pipeline_id = p.id AND jsonb_typeof(b.progress->'sink'->'targets') = 'object'
            UNION ALL
            SELECT v FROM jsonb_each_text(CASE WHEN jsonb_typeof(p.targets) = 'object' THEN p.targets END) e(k, v)
            UNION ALL
            SELECT p.target::text WHERE p.target IS NOT NULL) x
     WHERE t <> ''
$$;
COMMENT ON FUNCTION kafka_sink._pipeline_written_tables(kafka_sink.pipeline_definitions) IS
'Internal: the tables a pipeline writes as far as its definition (target, targets map) and its retained batches'' progress records name them, for lineage().';

CREATE FUNCTION kafka_sink.lineage(pipeline text, key jsonb, target regclass DEFAULT NULL)
RETURNS TABLE (topic text, partition integer, "offset" bigint, batch_id bigint,
               batch_committed_at timestamptz, message_ts timestamptz,
               message_key bytea, message_value bytea)
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    p kafka_sink.pipeline_definitions;
    routed boolean;
    tgt regclass;
    written text[];
    keycols text[];
    cond text;
    r record;
BEGIN
    p := kafka_sink._get_pipeline(pipeline);
    routed := p.target_template IS NOT NULL OR p.targets IS NOT NULL;
    IF p.target IS NULL AND NOT routed THEN
        RAISE EXCEPTION 'pipeline "%" has no keyed target', pipeline
            USING ERRCODE = 'wrong_object_type', HINT = 'Lineage by key needs a merge pipeline.';
    END IF;
    IF routed THEN
        written := kafka_sink._pipeline_written_tables(p);
        IF lineage.target IS NULL THEN
            RAISE EXCEPTION 'pipeline "%" routes to many tables', pipeline
                USING ERRCODE = 'invalid_parameter_value',
                      DETAIL = CASE WHEN cardinality(written) = 0
                                    THEN 'Its retained batches name no table it wrote.'
                                    ELSE format('It wrote %s.', array_to_string(written, ', ')) END,
                      HINT = 'Name the table: target => ''schema.table''.';
        END IF;
        -- compared as regclass: the names come quoted and qualified, the
        -- argument however the caller spelled it
        IF NOT EXISTS (SELECT 1 FROM unnest(written) w WHERE to_regclass(w) = lineage.target) THEN
            RAISE EXCEPTION 'pipeline "%" does not write %', pipeline, lineage.target
                USING ERRCODE = 'invalid_parameter_value',
                      DETAIL = CASE WHEN cardinality(written) = 0
                                    THEN 'Its retained batches name no table it wrote.'
                                    ELSE format('It wrote %s.', array_to_string(written, ', ')) END,
                      HINT = 'Name one of the tables it wrote.';
        END IF;
        tgt := lineage.target;
    ELSE
        IF lineage.target IS NOT NULL AND lineage.target IS DISTINCT FROM p.target THEN
            RAISE EXCEPTION 'pipeline "%" does not write %', pipeline, lineage.target
                USING ERRCODE = 'invalid_parameter_value', HINT = format('Its target is %s.', p.target);
        END IF;
        tgt := p.target;
    END IF;
    IF (SELECT count(*) FROM pg_attribute a WHERE a.attrelid = tgt AND NOT a.attisdropped AND a.attnum > 0
          AND a.attname IN ('_kafka_topic', '_kafka_partition', '_kafka_offset')) < 3 THEN
        RAISE EXCEPTION 'target % has no lineage columns', tgt
            USING ERRCODE = 'undefined_column',
                  HINT = 'Add _kafka_topic text, _kafka_partition int, _kafka_offset bigint and _kafka_batch_id bigint to the target; the pipeline fills them.';
    END IF;
    -- key_columns; a merge pipeline that routes or reads change events
    -- keys each table on its primary key when it has none (as the worker)
    keycols := p.key_columns;
    IF keycols IS NULL AND p.mode = 'merge' AND (routed OR p.envelope = 'debezium') THEN
        keycols := (SELECT array_agg(a.attname::text ORDER BY x.n)
                      FROM pg_index i CROSS JOIN LATERAL unnest(i.indkey) WITH ORDINALITY AS x(att, n)
                      JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = x.att
                     WHERE i.indrelid = tgt AND i.indisprimary);
    END IF;
    IF keycols IS NULL THEN
        RAISE EXCEPTION 'pipeline "%" has no keyed target', pipeline
            USING ERRCODE = 'wrong_object_type',
                  HINT = format('Lineage by key needs a merge pipeline keyed on key_columns or the primary key of %s.', tgt);
    END IF;
    IF key IS NULL OR jsonb_typeof(key) <> 'object' THEN
        RAISE EXCEPTION 'key must be a JSON object of the key columns'
            USING ERRCODE = 'invalid_parameter_value', HINT = format('For example %s.', jsonb_build_object(keycols[1], 42));
    END IF;
    SELECT string_agg(format('t.%1$I = k.%1$I', c), ' AND ') INTO cond FROM unnest(keycols) c;
    EXECUTE format('SELECT t._kafka_topic AS topic, t._kafka_partition AS partition, t._kafka_offset AS "offset"'
                   ' FROM %s t, jsonb_populate_record(NULL::%s, $1) k WHERE %s', tgt, tgt, cond)
       INTO r USING key;
    IF r IS NULL THEN
        RETURN;
    END IF;
    RETURN QUERY
    SELECT r.topic, r.partition, r."offset", b.batch_id, b.committed_at, br.ts, br.key, br.value
      FROM (SELECT 1) one
      LEFT JOIN LATERAL (SELECT x.batch_id, x.committed_at FROM kafka_sink.batches x, jsonb_array_elements(x.ranges) g
                          WHERE x.pipeline_id = p.id AND g->>'topic' = r.topic
                            AND (g->>'partition')::int = r.partition
                            AND r."offset" >= (g->>'start')::bigint AND r."offset" < (g->>'end')::bigint
                          LIMIT 1) b ON true
      LEFT JOIN LATERAL (SELECT * FROM kafka_sink._bronze_message(p.bronze, r.topic, r.partition, r."offset")) br ON true;
END
$$;
REVOKE ALL ON FUNCTION kafka_sink._pipeline_written_tables(kafka_sink.pipeline_definitions) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION kafka_sink._pipeline_written_tables(kafka_sink.pipeline_definitions) TO kafka_sink_admin;
REVOKE ALL ON FUNCTION kafka_sink.lineage(text, jsonb, regclass) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION kafka_sink.lineage(text, jsonb, regclass) TO kafka_sink_admin;
COMMENT ON FUNCTION kafka_sink.lineage(text, jsonb, regclass) IS
'Which message and batch produced the row with the given key (a JSON object of the table''s key columns) of the pipeline''s target; a routed pipeline needs target => one of the tables it writes. Needs the lineage columns on the table; the raw message comes from bronze when the pipeline keeps one. Runs with the caller''s rights.';

-- ---- end of lineage(pipeline, key, target) ----

-- ---- Review debts: one source-position rule ----
-- kafka_sink._cdc_position (message_fate) calls the worker's C function
-- instead of restating the rule in SQL; same signature, so its privileges
-- stay.
CREATE OR REPLACE FUNCTION kafka_sink._cdc_position(source jsonb, "offset" bigint)
RETURNS numeric
AS 'MODULE_PATHNAME', 'kafka_sink_cdc_position'
LANGUAGE C IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION kafka_sink._cdc_position(jsonb, bigint) IS
'Internal: the source position of a Debezium change event''s source block read at this Kafka offset, by the worker''s own rule (PostgreSQL lsn; MySQL binlog file number * 10^26 + pos * 10^6 + row; else ts_ms * 10^19 + the offset); NULL when it has none.';

-- ---- end of Review debts: one source-position rule ----

-- ---- trust boundary: kafka_sink.allowed_hosts ----
-- bootstrap_servers is checked against kafka_sink.allowed_hosts at create
-- and alter time (and by the worker before it connects): a new internal C
-- function, and the create/alter bodies that call it (same signatures:
-- CREATE OR REPLACE keeps their privileges and comments).

CREATE FUNCTION kafka_sink._check_bootstrap_servers(servers text)
RETURNS void
AS 'MODULE_PATHNAME', 'kafka_sink_check_bootstrap_servers'
LANGUAGE C STRICT
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION kafka_sink._check_bootstrap_servers(text) IS
'Internal: raises unless every broker of a bootstrap_servers list is a well-formed host that kafka_sink.allowed_hosts allows.';
REVOKE ALL ON FUNCTION kafka_sink._check_bootstrap_servers(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION kafka_sink._check_bootstrap_servers(text) TO kafka_sink_admin;

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
    evolve                text DEFAULT 'none')
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

    IF mode IS NULL OR mode NOT IN ('merge', 'append', 'function') THEN
        RAISE EXCEPTION 'invalid mode "%"', mode
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'mode is one of ''merge'', ''append'' or ''function''.';
    END IF;
    IF create_targets IS NULL OR evolve IS NULL THEN
        RAISE EXCEPTION 'create_targets and evolve cannot be null'
            USING ERRCODE = 'null_value_not_allowed',
                  HINT = 'Pass create_targets => false and evolve => ''none'' (the defaults).';
    END IF;
    IF routed OR create_targets OR evolve <> 'none' THEN
        PERFORM kafka_sink._check_routing(template, targets, create_targets, evolve, mode, value_format);
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
        -- Avro keys decode to the same fields as JSON keys (format.h)
        PERFORM kafka_sink._check_contract(target_oid, key_columns, columns,
                                           CASE key_format WHEN 'avro' THEN 'json' ELSE key_format END,
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

    INSERT INTO kafka_sink.pipeline_definitions AS p
        (name, owner, state, bootstrap_servers, subscribe, subscribe_pattern, assign,
         target, key_columns, order_column, mode, batch_function, starting_offsets,
         fail_on_data_loss, max_offsets_per_batch, max_batch_bytes, trigger_interval,
         workers, kafka_options, columns, key_format, delete_on_tombstone,
         schema_version_field, schema_versions, event_id, event_id_retention, bronze, ending_offsets,
         min_offsets_per_batch, max_trigger_delay, dead_letter_topic,
         value_format, value_schema, schema_registry, envelope, on_truncate,
         target_template, targets, create_targets, evolve)
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
         envelope, on_truncate, template, targets, create_targets, evolve)
    RETURNING p.id INTO new_id;

    plain_options := kafka_sink._split_secrets(new_id, kafka_options);
    UPDATE kafka_sink.pipeline_definitions p SET kafka_options = plain_options WHERE p.id = new_id;
    PERFORM kafka_sink._set_schema_registry(new_id, schema_registry);
    PERFORM kafka_sink._wake_launcher();
    RETURN new_id;
END
$$;

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
    evolve                text DEFAULT NULL)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    p kafka_sink.pipeline_definitions;
    k text;
    new_order_column text;
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
        -- a key with a JSON null value removes the option
        FOR k IN SELECT key FROM jsonb_each(kafka_options) WHERE jsonb_typeof(value) = 'null' LOOP
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
    IF num_nonnulls(envelope, on_truncate) > 0 THEN
        IF p.target IS NULL THEN
            RAISE EXCEPTION 'a bronze-only pipeline takes no decoding options'
                USING ERRCODE = 'invalid_parameter_value',
                      HINT = 'Pass a target to decode messages; a bronze-only pipeline only lands them raw.';
        END IF;
        new_order_column := kafka_sink._check_envelope(
            coalesce(_api_alter_pipeline.envelope, p.envelope),
            coalesce(_api_alter_pipeline.on_truncate,
                     CASE WHEN _api_alter_pipeline.envelope = 'plain' THEN 'apply' ELSE p.on_truncate END),
            p.target, p.order_column, p.mode,
            (SELECT x.value_format FROM kafka_sink.pipeline_definitions x WHERE x.id = p.id));
        PERFORM kafka_sink._check_target(p.target, p.key_columns, new_order_column, p.mode);
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
        generation = x.generation + 1,
        updated_at = now()
    WHERE x.id = p.id;
    PERFORM kafka_sink._wake_launcher();
END
$$;

-- ---- end of trust boundary: kafka_sink.allowed_hosts ----

-- ---- loops through the outbox (issue 23): the hop count ----
ALTER TABLE kafka_sink.outbox
    ADD COLUMN hops integer NOT NULL DEFAULT 1 CONSTRAINT outbox_hops_check CHECK (hops >= 1);
COMMENT ON COLUMN kafka_sink.outbox.hops IS
    'How many times the message came through kafka_sink, this time included, sent as the header kafka_sink.hops: a pipeline quarantines a message with more than kafka_sink.max_outbox_hops as dead_letter_loop';
ALTER TABLE kafka_sink.quarantine DROP CONSTRAINT quarantine_reason_check;
ALTER TABLE kafka_sink.quarantine ADD CONSTRAINT quarantine_reason_check CHECK (reason IN (
    'invalid_json', 'not_an_object', 'missing_required_field',
    'invalid_value', 'unknown_schema_version', 'null_key',
    'constraint_violation', 'value_too_large', 'rejected_by_target',
    'unknown_schema_id', 'not_wire_format', 'invalid_avro', 'invalid_envelope',
    'no_target', 'target_refused', 'schema_change_refused', 'dead_letter_loop'));
COMMENT ON COLUMN kafka_sink.quarantine.reason IS
    'Why the message was not applied: invalid_json, not_an_object, missing_required_field, invalid_value, '
    'unknown_schema_version, null_key, constraint_violation (a constraint or data error of the row), '
    'value_too_large, rejected_by_target (a trigger, row level security policy or check option of the target '
    'rejected the row), unknown_schema_id (the registry does not know the frame''s schema id), not_wire_format '
    '(no magic byte 0 and schema id), invalid_avro (the payload does not decode with its schema), '
    'invalid_envelope (a change event without a known op, or without the row its op needs), '
    'no_target (routing: the message''s target could not be named or does not exist), target_refused '
    '(routing: the target exists but the pipeline may not write it: see the detail), schema_change_refused '
    '(evolve: a change of the embedded schema that kafka_sink will not make), dead_letter_loop (the message '
    'came through kafka_sink''s outbox more than kafka_sink.max_outbox_hops times: it is sent to no dead-letter topic)';

-- The hop count kafka_sink.outbox_send gives its message (src/hops.c): one
-- more than the messages of the batch a worker is applying, else 1.
CREATE FUNCTION kafka_sink._outbox_hops()
RETURNS integer
AS 'MODULE_PATHNAME', 'kafka_sink_outbox_hops'
LANGUAGE C VOLATILE
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION kafka_sink._outbox_hops() IS
'Internal: the hop count (header kafka_sink.hops) of a message queued now: one more than the messages of the batch being applied, else 1.';
REVOKE ALL ON FUNCTION kafka_sink._outbox_hops() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION kafka_sink._outbox_hops() TO kafka_sink_admin;

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
    -- the hop count (src/hops.c): a message queued by a batch derives from it
    INSERT INTO kafka_sink.outbox AS o (topic, key, value, headers, created_by, hops)
    VALUES (topic, key, value, headers, session_user, kafka_sink._outbox_hops())
    RETURNING o.event_id INTO id;
    RETURN id;
END
$$;


-- A dead-letter topic: a valid Kafka topic name, for a pipeline that can
-- quarantine (it has a target), and none of the topics it reads (whether or
-- not the outbox cluster is the pipeline's: a topic read back would
-- quarantine its own dead letters again, forever).  A topic that leads
-- back to the pipeline through the dead-letter topics of the other
-- pipelines the caller sees (one reads it and sends its dead letters to a
-- topic this one reads, or further round) is a loop: a warning, since the
-- clusters may differ and the hop count (src/hops.c) ends it anyway after
-- kafka_sink.max_outbox_hops rounds.  Without a relay the messages wait in
-- the outbox: a warning, since the relay may be set up after the pipeline
-- (a reload), and nothing is lost meanwhile.
CREATE OR REPLACE FUNCTION kafka_sink._check_dead_letter_topic(dead_letter_topic text, subscribe text[],
                                                     subscribe_pattern text, assign jsonb, target regclass)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    loop_path text[];
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
    -- the topics dead letters reach from here: the pipelines reading one
    -- send theirs on to their dead-letter topic; a topic this pipeline
    -- reads closes the loop (the pipeline's own row, when altered, reads
    -- only such topics, so it is never gone through)
    WITH RECURSIVE reach(topic, path) AS (
        SELECT _check_dead_letter_topic.dead_letter_topic, ARRAY[]::text[]
        UNION ALL
        SELECT d.dead_letter_topic, r.path || ARRAY[d.name, d.dead_letter_topic]
          FROM reach r
          JOIN kafka_sink.pipeline_definitions d
            ON (r.topic = ANY (d.subscribe) OR d.assign ? r.topic OR r.topic ~ d.subscribe_pattern)
         WHERE d.dead_letter_topic IS NOT NULL
           AND d.dead_letter_topic <> ALL (r.path) AND d.dead_letter_topic <> _check_dead_letter_topic.dead_letter_topic
           AND cardinality(r.path) < 64
           AND (r.topic = ANY (_check_dead_letter_topic.subscribe) OR _check_dead_letter_topic.assign ? r.topic
                OR r.topic ~ _check_dead_letter_topic.subscribe_pattern) IS NOT TRUE
    )
    SELECT r.path INTO loop_path FROM reach r
     WHERE cardinality(r.path) > 0
       AND (r.topic = ANY (_check_dead_letter_topic.subscribe) OR _check_dead_letter_topic.assign ? r.topic
                OR r.topic ~ _check_dead_letter_topic.subscribe_pattern)
     ORDER BY cardinality(r.path) LIMIT 1;
    IF loop_path IS NOT NULL THEN
        RAISE WARNING 'dead_letter_topic "%" leads back to a topic the pipeline reads', dead_letter_topic
            USING DETAIL = format('Its dead letters go round through pipeline(s) %s: "%s" -> %s.',
                                  (SELECT string_agg(format('"%s"', loop_path[i]), ', ')
                                     FROM generate_series(1, cardinality(loop_path), 2) i),
                                  dead_letter_topic,
                                  (SELECT string_agg(format('"%s" -> "%s"', loop_path[i], loop_path[i + 1]), ' -> ')
                                     FROM generate_series(1, cardinality(loop_path), 2) i)),
                  HINT = format('A message goes round at most kafka_sink.max_outbox_hops (%s) times, then it is quarantined as dead_letter_loop; choose a dead-letter topic no pipeline reads.',
                                current_setting('kafka_sink.max_outbox_hops', true));
    END IF;
    IF NOT kafka_sink._outbox_relay_configured() THEN
        RAISE WARNING 'the outbox relay is not configured'
            USING DETAIL = 'Dead-letter messages wait in kafka_sink.outbox until kafka_sink.outbox_bootstrap_servers is set.',
                  HINT = 'ALTER SYSTEM SET kafka_sink.outbox_bootstrap_servers = ''host:9092''; SELECT pg_reload_conf(); the dead-letter topic lives on that cluster.';
    END IF;
END
$$;
COMMENT ON FUNCTION kafka_sink._check_dead_letter_topic(text, text[], text, jsonb, regclass) IS
    'Internal: refuses an invalid dead-letter topic, or one the pipeline reads; warns when it leads back to the pipeline through other pipelines'' dead-letter topics, or when the outbox relay is not configured';
