-- kafka_sink: reading a pipeline: progress records, waiting for it to
-- catch up, the fate of one message, and the views.  Nothing here writes
-- the catalog.

-- The progress record of the last batch(es), shaped like Spark's
-- StreamingQueryProgress.
CREATE OR REPLACE FUNCTION kafka_sink.last_progress(pipeline text)
RETURNS jsonb
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT b.progress FROM kafka_sink.batches b
      JOIN kafka_sink.pipeline_definitions p ON p.id = b.pipeline_id
     WHERE p.name = last_progress.pipeline
     ORDER BY b.batch_id DESC LIMIT 1
$$;

CREATE OR REPLACE FUNCTION kafka_sink.recent_progress(pipeline text, n integer DEFAULT 10)
RETURNS SETOF jsonb
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT x.progress FROM (
        SELECT b.progress, b.batch_id FROM kafka_sink.batches b
          JOIN kafka_sink.pipeline_definitions p ON p.id = b.pipeline_id
         WHERE p.name = recent_progress.pipeline
         ORDER BY b.batch_id DESC LIMIT greatest(n, 0)) x
    ORDER BY x.batch_id
$$;
COMMENT ON FUNCTION kafka_sink.last_progress(text) IS
'The progress record of a pipeline''s last batch (shaped like Spark''s StreamingQueryProgress), or NULL.';
COMMENT ON FUNCTION kafka_sink.recent_progress(text, integer) IS
'The progress records of a pipeline''s last n batches (default 10), oldest first.';

-- wait() and wait_for(): the high watermarks to reach, taken once ...
-- A pipeline in a database the launcher does not serve cannot run: the
-- state is computed where it is read (status, wait).
CREATE OR REPLACE FUNCTION kafka_sink._database_served()
RETURNS boolean
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT CASE WHEN current_setting('kafka_sink.database', true) IS NULL THEN false
                WHEN current_setting('kafka_sink.database', true) = '' THEN true
                ELSE current_setting('kafka_sink.database', true) = current_database() END
$$;
COMMENT ON FUNCTION kafka_sink._database_served() IS
    'Internal: whether the launcher serves this database: kafka_sink.database (superuser-only) is empty (every database with the extension) or names it';

-- Raises for a running pipeline that no worker will ever run; wait() and
-- wait_for() call it before they contact the broker and at every look.
CREATE OR REPLACE FUNCTION kafka_sink._require_served(p kafka_sink.pipeline_definitions)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF p.state = 'running' AND NOT kafka_sink._database_served() THEN
        RAISE EXCEPTION 'pipeline "%" cannot run in database "%"', p.name, current_database()
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  DETAIL = 'kafka_sink runs pipelines only in the database named by the kafka_sink.database setting.',
                  HINT = 'Create the pipeline in that database, or have a superuser set kafka_sink.database to this one, or empty for every database (a reload applies it).';
    END IF;
END
$$;
COMMENT ON FUNCTION kafka_sink._require_served(kafka_sink.pipeline_definitions) IS
    'Internal: raises when a running pipeline is in a database whose pipelines kafka_sink does not run';

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
COMMENT ON FUNCTION kafka_sink._wait_marks(text) IS
'Internal: the high watermarks a wait() or wait_for() call must reach, taken once.';

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
COMMENT ON FUNCTION kafka_sink._wait_check(text, jsonb, timestamp with time zone) IS
'Internal: one look at the checkpoint for wait() and wait_for(): true when caught up, false past the deadline, NULL to look again; raises for a failed pipeline.';

-- Waits until the pipeline has committed everything up to the high
-- watermarks seen when it was called.  Returns false on timeout.  One
-- statement: its snapshot holds back the cleanup of dead rows while it
-- waits (wait_for() does not).
CREATE OR REPLACE FUNCTION kafka_sink.wait(pipeline text, timeout interval DEFAULT '60 s')
RETURNS boolean
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    deadline timestamptz := clock_timestamp() + timeout;
    marks jsonb := kafka_sink._wait_marks(pipeline);
    done boolean;
BEGIN
    LOOP
        done := kafka_sink._wait_check(pipeline, marks, deadline);
        IF done IS NOT NULL THEN
            RETURN done;
        END IF;
        PERFORM pg_sleep(0.05);
    END LOOP;
END
$$;

-- The same as a procedure that commits between looks, so that it holds
-- no snapshot while it waits: CALL kafka_sink.wait_for('orders', '10 min').
-- It must be called outside a transaction block.  (A procedure that
-- commits cannot have a SET clause, so everything here is qualified.)
CREATE OR REPLACE PROCEDURE kafka_sink.wait_for(pipeline text, timeout interval DEFAULT '60 s',
                                     INOUT caught_up boolean DEFAULT NULL)
LANGUAGE plpgsql
AS $$
DECLARE
    deadline pg_catalog.timestamptz := pg_catalog.clock_timestamp() OPERATOR(pg_catalog.+) timeout;
    marks pg_catalog.jsonb := kafka_sink._wait_marks(pipeline);
BEGIN
    LOOP
        caught_up := kafka_sink._wait_check(pipeline, marks, deadline);
        EXIT WHEN caught_up IS NOT NULL;
        COMMIT;
        PERFORM pg_catalog.pg_sleep(0.05);
    END LOOP;
END
$$;
COMMENT ON FUNCTION kafka_sink.wait(text, interval) IS
'Waits until the pipeline has committed everything up to the high watermarks seen when called; false on timeout. Raises if the pipeline failed.';
COMMENT ON PROCEDURE kafka_sink.wait_for(text, interval, boolean) IS
'wait() as a procedure that commits between looks, holding no snapshot while it waits; call it outside a transaction block.';

-- lineage(pipeline, key, target): in 70_lineage.sql (it takes routed
-- pipelines' tables since 0.2.0)

CREATE OR REPLACE FUNCTION kafka_sink._bronze_message(bronze regclass, topic text, partition integer, "offset" bigint)
RETURNS TABLE (ts timestamptz, key bytea, value bytea)
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF bronze IS NULL THEN
        RETURN;
    END IF;
    RETURN QUERY EXECUTE format('SELECT b.ts, b.key, b.value FROM %s b'
                                ' WHERE b.topic = $1 AND b.partition = $2 AND b."offset" = $3', bronze)
                 USING topic, partition, "offset";
END
$$;
COMMENT ON FUNCTION kafka_sink._bronze_message(regclass, text, integer, bigint) IS
'Internal: the raw message at a topic, partition and offset in a bronze table (nothing when there is no bronze table).';

-- The path a column reads (its mapping in columns: a path, or an object
-- with one; else its own name).
CREATE OR REPLACE FUNCTION kafka_sink._column_path(columns jsonb, col text)
RETURNS text
LANGUAGE sql
IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT coalesce(CASE WHEN jsonb_typeof(columns->col) = 'object' THEN columns->col->>'path'
                         ELSE columns->>col END, col)
$$;
COMMENT ON FUNCTION kafka_sink._column_path(jsonb, text) IS
'Internal: the field path a column reads by the pipeline''s columns mapping (a path, or an object with one), else the column''s own name.';

-- The key columns of a message whose key columns are mapped to headers or
-- Kafka's metadata (src/decode/meta.c's names: headers.<name>, the last
-- header of that name; kafka.key, kafka.topic, kafka.partition,
-- kafka.offset, kafka.timestamp), the others read from value (JSON) by
-- their path: a JSON object of the key columns, for message_fate(s).
CREATE OR REPLACE FUNCTION kafka_sink._message_key(columns jsonb, keycols text[], value jsonb, topic text,
                                                   partition integer, "offset" bigint, ts timestamptz,
                                                   key bytea, headers jsonb)
RETURNS jsonb
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    c text;
    path text;
    v jsonb;
    k jsonb := '{}';
BEGIN
    FOREACH c IN ARRAY coalesce(keycols, '{}') LOOP
        path := kafka_sink._column_path(columns, c);
        IF path LIKE 'headers.%' THEN
            -- a header sent more than once: the last one (meta.c)
            SELECT h.h->'value' INTO v
              FROM jsonb_array_elements(CASE WHEN jsonb_typeof(headers) = 'array' THEN headers ELSE '[]' END)
                   WITH ORDINALITY AS h(h, n)
             WHERE h.h->>'key' = substr(path, 9)
             ORDER BY h.n DESC LIMIT 1;
        ELSIF path = 'kafka.key' THEN
            BEGIN
                v := to_jsonb(convert_from(key, 'UTF8'));
            EXCEPTION WHEN character_not_in_repertoire OR untranslatable_character THEN
                v := to_jsonb('\x' || encode(key, 'hex'));
            END;
        ELSIF path = 'kafka.topic' THEN
            v := to_jsonb(topic);
        ELSIF path = 'kafka.partition' THEN
            v := to_jsonb(partition);
        ELSIF path = 'kafka.offset' THEN
            v := to_jsonb("offset");
        ELSIF path = 'kafka.timestamp' THEN
            v := to_jsonb(ts);
        ELSE
            v := value #> string_to_array(path, '.');
        END IF;
        IF v IS NOT NULL THEN
            k := k || jsonb_build_object(c, v);
        END IF;
    END LOOP;
    RETURN k;
END
$$;
COMMENT ON FUNCTION kafka_sink._message_key(jsonb, text[], jsonb, text, integer, bigint, timestamptz, bytea, jsonb) IS
'Internal: a message''s key columns as a JSON object, each read by its mapping: a header (headers.<name>, the last of that name), Kafka''s metadata (kafka.key, kafka.topic, kafka.partition, kafka.offset, kafka.timestamp) or a path into the JSON value.';

-- Whether every key column is mapped to a header or Kafka's metadata (the
-- value is then not needed to find the message's row).
CREATE OR REPLACE FUNCTION kafka_sink._meta_keys(columns jsonb, keycols text[])
RETURNS boolean
LANGUAGE sql
IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT keycols IS NOT NULL AND cardinality(keycols) > 0
       AND bool_and(kafka_sink._column_path(columns, c) ~ '^(headers\.|kafka\.(key|topic|partition|offset|timestamp)$)')
      FROM unnest(keycols) AS c
$$;
COMMENT ON FUNCTION kafka_sink._meta_keys(jsonb, text[]) IS
'Internal: whether every key column is mapped to a header or Kafka''s metadata.';

-- The headers of the message at a topic, partition and offset in a bronze
-- table (NULL when there is no bronze table or no such message).
CREATE OR REPLACE FUNCTION kafka_sink._bronze_headers(bronze regclass, topic text, partition integer, "offset" bigint)
RETURNS jsonb
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    h jsonb;
BEGIN
    IF bronze IS NULL THEN
        RETURN NULL;
    END IF;
    EXECUTE format('SELECT b.headers FROM %s b WHERE b.topic = $1 AND b.partition = $2 AND b."offset" = $3', bronze)
       INTO h USING topic, partition, "offset";
    RETURN h;
END
$$;
COMMENT ON FUNCTION kafka_sink._bronze_headers(regclass, text, integer, bigint) IS
'Internal: the headers (as bronze keeps them) of the message at a topic, partition and offset in a bronze table; NULL when there is none.';

-- What happened to one message: pending (not read yet), lost (a data loss
-- gap), quarantined (with its reason), applied (it is the target row's
-- current source), superseded (another message of its key won within its
-- batch), stale (the target already held a newer event when it arrived),
-- overwritten (applied, then replaced by a later batch), deleted (its key's
-- row is gone), soft_deleted (delete_mode soft: it marked its key's row),
-- revived (soft: its upsert brought the marked row back, recorded by its
-- batch in kafka_sink.revived_offsets),
-- skipped (write_mode update_only: its key was not in the target; 'deleted
-- or skipped' where the lineage cannot tell), duplicate (its event id was
-- applied before), filtered (the pipeline's filter left it out: the worker
-- records its offset and the filter, kafka_sink.filtered_offsets; a replay
-- marks the quarantine row, replay_filter), or appended (the rules of a row: _row_fate);
-- in mode history, applied as a version (the lineage columns of a version
-- name it) or folded into history (another message at its order value holds it).
-- Telling superseded, stale, overwritten and deleted apart needs the lineage
-- columns on the target and the raw message in bronze; without them the
-- answer is 'applied or superseded'.
CREATE OR REPLACE FUNCTION kafka_sink.message_fate(pipeline text, topic text, partition integer, "offset" bigint)
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
    r record;
    has_row boolean;
    nrows bigint;
    has_lineage boolean;
    has_msg boolean;
    keycol text;
    tgt regclass;
    unfiltered kafka_sink.pipeline_definitions;
    ran text;
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
       AND message_fate."offset" >= (g->>'start')::bigint AND message_fate."offset" < (g->>'end')::bigint
     ORDER BY x.batch_id DESC LIMIT 1;
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
    -- replayed by replay_quarantine and left out by the filter then
    IF FOUND AND q.replay_filter IS NOT NULL THEN
        RETURN QUERY SELECT 'filtered'::text, q.batch_id, kafka_sink._filtered_detail(q.replay_filter, p.filter, true),
            q.target;
        RETURN;
    END IF;
    IF p.target IS NULL AND p.target_template IS NULL AND p.targets IS NULL AND p.mode <> 'function' THEN
        RETURN QUERY SELECT 'landed'::text, b_id, 'bronze only'::text, NULL::text;
        RETURN;
    END IF;
    -- filtered (docs/transform.md): the offsets the worker recorded in the
    -- batch's transaction (kafka_sink.filtered_offsets); for a batch that
    -- recorded none though it filtered (before 0.3.0) or a pruned one, the
    -- filter asked again of the message in bronze
    SELECT fo.filter INTO ran FROM kafka_sink.filtered_offsets fo
     WHERE fo.pipeline_id = p.id AND fo.batch_id = b_id AND fo.topic = message_fate.topic
       AND fo.partition = message_fate.partition AND message_fate."offset" = ANY (fo.offsets);
    IF FOUND THEN
        RETURN QUERY SELECT 'filtered'::text, b_id, kafka_sink._filtered_detail(ran, p.filter),
            -- routed: the table its routing names (from bronze)
            CASE WHEN p.target_template IS NOT NULL OR p.targets IS NOT NULL
                 THEN kafka_sink._message_target(p.id, topic,
                          (SELECT m.value FROM kafka_sink._bronze_message(p.bronze, topic, partition, "offset") m))
                 ELSE p.target::text END;
        RETURN;
    END IF;
    IF p.filter IS NOT NULL
       AND (b_id IS NULL OR EXISTS (SELECT 1 FROM kafka_sink.batches x
                                     WHERE x.pipeline_id = p.id AND x.batch_id = b_id AND x.filtered > 0
                                       AND NOT EXISTS (SELECT 1 FROM kafka_sink.filtered_offsets fo
                                                        WHERE fo.pipeline_id = p.id AND fo.batch_id = b_id))) THEN
        SELECT * INTO msg FROM kafka_sink._bronze_message(p.bronze, topic, partition, "offset");
        IF FOUND AND kafka_sink._message_filtered(p.id, topic, msg.key, msg.value) THEN
            RETURN QUERY SELECT 'filtered'::text, b_id, kafka_sink._filtered_detail(p.filter, p.filter),
                CASE WHEN p.target_template IS NOT NULL OR p.targets IS NOT NULL
                     THEN kafka_sink._message_target(p.id, topic, msg.value) ELSE p.target::text END;
            RETURN;
        END IF;
    END IF;
    -- mode history (docs/history.md): every decoded message is folded into
    -- the versions of its key; a version's lineage columns name the last
    -- message at its order value that changed it
    IF p.mode = 'history' THEN
        -- routed (change events): the table its routing names, from bronze
        tgt := p.target;
        IF tgt IS NULL AND p.bronze IS NOT NULL THEN
            tgt := to_regclass(kafka_sink._message_target(p.id, topic,
                       (SELECT m.value FROM kafka_sink._bronze_message(p.bronze, topic, partition, "offset") m)));
        END IF;
        has_lineage := (SELECT count(*) FROM pg_attribute a WHERE a.attrelid = tgt AND NOT a.attisdropped
                          AND a.attname IN ('_kafka_topic', '_kafka_partition', '_kafka_offset')) = 3;
        IF has_lineage THEN
            EXECUTE format('SELECT string_agg(CASE WHEN t._deleted THEN ''the delete at '' ELSE ''the version from '' END'
                           ' || t._valid_from::text, '', '' ORDER BY t._valid_from) FROM %s t'
                           ' WHERE t._kafka_topic = $1 AND t._kafka_partition = $2 AND t._kafka_offset = $3', tgt)
               INTO cond USING topic, partition, "offset";
        END IF;
        RETURN QUERY SELECT CASE WHEN cond IS NOT NULL THEN 'applied as a version' ELSE 'folded into history' END,
            b_id,
            CASE WHEN cond IS NOT NULL THEN 'last wrote ' || cond
                 WHEN has_lineage THEN 'applied; its version is held by another message at the same order value (a re-sent copy that changed nothing, or a later message)'
                 ELSE 'applied; lineage columns on the target are needed to tell which version it wrote' END,
            tgt::text;
        RETURN;
    END IF;
    IF p.mode <> 'merge' THEN
        RETURN QUERY SELECT CASE p.mode WHEN 'append' THEN 'appended' ELSE 'passed to the batch function' END, b_id, NULL::text,
            CASE WHEN p.mode = 'append' AND (p.target_template IS NOT NULL OR p.targets IS NOT NULL)
                 THEN kafka_sink._message_target(p.id, topic, (SELECT m.value FROM kafka_sink._bronze_message(p.bronze, topic, partition, "offset") m))
                 ELSE p.target::text END;
        RETURN;
    END IF;
    -- routed tables, change events, Avro and Protobuf keys: the table it
    -- went to, and its fate there (70_lineage.sql)
    IF p.target_template IS NOT NULL OR p.targets IS NOT NULL OR p.envelope = 'debezium'
       OR p.key_format IN ('avro', 'protobuf') THEN
        SELECT * INTO msg FROM kafka_sink._bronze_message(p.bronze, topic, partition, "offset");
        has_msg := FOUND;
        -- filtered was told above (recorded, or asked of bronze): the
        -- filter is not asked again there
        unfiltered := p;
        unfiltered.filter := NULL;
        RETURN QUERY SELECT f.fate, b_id, f.detail, f.target
          FROM kafka_sink._traced_fate(unfiltered, topic, partition, "offset", b_id, has_msg,
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
    -- only (src/decode/format.c): the raw bytes are not JSON text
    IF p.key_format = 'avro'
       OR (p.key_format = 'none' AND p.value_format <> 'json' AND NOT kafka_sink._meta_keys(p.columns, p.key_columns)) THEN
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
    ELSIF kafka_sink._meta_keys(p.columns, p.key_columns) THEN
        -- every key column from a header or Kafka's metadata (meta.c)
        v := kafka_sink._message_key(p.columns, p.key_columns, NULL, topic, partition, "offset", msg.ts, msg.key,
                                     kafka_sink._bronze_headers(p.bronze, topic, partition, "offset"));
    ELSIF msg.value IS NOT NULL THEN
        v := kafka_sink._message_key(p.columns, p.key_columns, convert_from(msg.value, 'UTF8')::jsonb, topic, partition,
                                     "offset", msg.ts, msg.key,
                                     kafka_sink._bronze_headers(p.bronze, topic, partition, "offset"));
    END IF;
    SELECT string_agg(format('t.%1$I = k.%1$I', c), ' AND ') INTO cond FROM unnest(p.key_columns) c;
    EXECUTE format('SELECT t._kafka_topic AS topic, t._kafka_partition AS partition, t._kafka_offset AS "offset",'
                   ' t._kafka_batch_id AS batch_id%s'
                   ' FROM %s t, jsonb_populate_record(NULL::%s, $1) k WHERE %s',
                   kafka_sink._row_fate_columns(p, p.target), p.target, p.target, cond)
       INTO r USING v;
    GET DIAGNOSTICS nrows = ROW_COUNT;     -- (EXECUTE does not set FOUND)
    has_row := nrows > 0;
    -- the rules, with message_fates and _traced_fate (70_lineage.sql)
    RETURN QUERY SELECT f.fate, b_id, f.detail, p.target::text
      FROM kafka_sink._row_fate(p, topic, partition, "offset", b_id, v, msg.value IS NULL, has_row,
                                r.topic, r.partition, r."offset", r.batch_id, r.marked, r.mark, r.held) f;
END
$$;
COMMENT ON FUNCTION kafka_sink.message_fate(text, text, integer, bigint) IS
'What happened to one message: pending, lost, quarantined, filtered, applied, soft_deleted, revived, superseded, stale, overwritten, deleted, skipped, deleted or skipped, truncated, duplicate, appended or landed (mode history: applied as a version, or folded into history), with the batch, a detail and the table it went to (for a routed pipeline the table its routing names; for Debezium change events judged by source position; Avro keys decoded through kafka_sink.schemas).';

-- The wire format's schema id of a raw value (bronze, quarantine), or NULL.
CREATE OR REPLACE FUNCTION kafka_sink.wire_schema_id(value bytea)
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

-- ---- views ----

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
       p.target_template, p.targets, p.create_targets, p.evolve,
       p.unavailable_value_placeholder,
       p.filter, p.computed, p.delete_mode, p.write_mode,
       p.track_history_columns
  FROM kafka_sink.pipeline_definitions p;

-- One row per topic-partition: the committed checkpoint beside the
-- watermarks the owning worker last saw (no broker round trip per query).
CREATE OR REPLACE VIEW kafka_sink.progress WITH (security_invoker = true) AS
SELECT p.name AS pipeline, o.topic, o.partition,
       o.next_offset AS committed_offset,
       s.log_start_offset, s.high_watermark,
       greatest(s.high_watermark - o.next_offset, 0) AS lag_messages,
       round(greatest(s.high_watermark - o.next_offset, 0) * s.avg_message_bytes)::bigint AS lag_bytes_estimate,
       round(s.messages_per_second::numeric, 1) AS messages_per_second,
       o.batch_id AS last_batch_id, o.updated_at AS last_commit_at,
       s.worker, s.pid AS worker_pid, s.watermarks_at
  FROM kafka_sink.pipeline_definitions p
  JOIN kafka_sink.offsets o ON o.pipeline_id = p.id
  LEFT JOIN kafka_sink._partition_stats() s
         ON s.pipeline_id = p.id AND s.topic = o.topic AND s.partition = o.partition;

-- One row per pipeline.  hot_partition names the partition holding more
-- than half of the lag, when there are at least two partitions and at least
-- 100 messages of lag.
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

-- The outbox relay at a glance.
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
GRANT SELECT ON kafka_sink.pipelines, kafka_sink.status, kafka_sink.progress TO kafka_sink_admin;
GRANT SELECT ON kafka_sink.outbox_status TO kafka_sink_admin;

COMMENT ON VIEW kafka_sink.pipelines IS
'The pipelines the current role can see, with their definitions and states; secret kafka_options and the schema registry''s secret are shown as ********.';
COMMENT ON VIEW kafka_sink.progress IS
'One row per pipeline and partition: the committed checkpoint beside the watermarks the owning worker last saw, the lag and the rate.';
COMMENT ON VIEW kafka_sink.status IS
'One row per pipeline: state, workers, last batch and commit, rates, lag (with a hot partition), backfill progress and the last error.';
COMMENT ON COLUMN kafka_sink.status.last_batch_targets IS
    'Per target table of the last batch: {"<table>": {"inserted", "updated", "deleted", "stale", "superseded", "quarantined", "duplicates", "softDeleted", "skipped"}}';
COMMENT ON VIEW kafka_sink.outbox_status IS
'The outbox relay at a glance: rows pending (every role''s), the age of the oldest, the delivery rate, the relay''s pid and its last error (an error of a pending row only to members of the role that queued it); bootstrap_servers only for roles that may read kafka_sink.outbox_bootstrap_servers (superusers, pg_read_all_settings), NULL for others.';


CREATE OR REPLACE VIEW kafka_sink.versions AS
SELECT (SELECT extversion FROM pg_catalog.pg_extension WHERE extname = 'kafka_sink') AS kafka_sink,
       kafka_sink.librdkafka_version() AS librdkafka,
       kafka_sink.librdkafka_features() AS librdkafka_features,
       pg_catalog.current_setting('server_version') AS postgresql;
COMMENT ON VIEW kafka_sink.versions IS
'The installed kafka_sink version, the librdkafka loaded by the server and its features, and the PostgreSQL version.';
REVOKE ALL ON kafka_sink.versions FROM PUBLIC;
GRANT SELECT ON kafka_sink.versions TO kafka_sink_admin;
