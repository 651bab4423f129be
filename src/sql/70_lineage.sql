-- ---- lineage: batch ranges, lineage views, message fates, the apply statements ----
--
-- Lineage as relations a user can join, filter and point a BI tool at
-- (docs/design/observability.md, "Lineage as relations").  Nothing here writes the
-- catalog: the views read it under its row level security, and
-- create_lineage_view creates a view in the target's schema as its caller.

-- One row per batch and partition, expanded from batches.ranges.  A view,
-- not a table: the worker writes one marker per batch as before (nothing
-- on the hot path), and the batch's own row is found by its primary key.
-- A filter on pipeline and batch_id uses that key; a filter on topic,
-- partition or offset alone reads every retained batch of the pipeline
-- (kafka_sink.keep_batches, keep_batches_for) and expands its ranges.
CREATE OR REPLACE VIEW kafka_sink.batch_ranges WITH (security_invoker = true) AS
SELECT p.name AS pipeline, b.pipeline_id, b.batch_id, b.worker, r.topic, r.partition,
       r.start AS start_offset, r."end" AS end_offset, r.messages,
       b.started_at, b.committed_at,
       b.messages AS batch_messages, b.inserted, b.updated, b.deleted, b.stale, b.superseded,
       b.quarantined, b.duplicates, b.filtered, b.soft_deleted, b.skipped, b.revived
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
CREATE OR REPLACE VIEW kafka_sink._lineage_ranges WITH (security_barrier = true) AS
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
    -- the caller names one it writes, as for lineage()
    tgt := kafka_sink._pipeline_target(p, create_lineage_view.target);
    IF tgt IS NULL THEN
        RAISE EXCEPTION 'pipeline "%" has no target', pipeline
            USING ERRCODE = 'wrong_object_type', HINT = 'A bronze-only pipeline writes no rows to trace; query its bronze table.';
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
-- unique key, bronze by its (partition, "offset") index, the target by its key index, as
-- hash or merge joins or index probes, as the planner finds cheaper), no
-- statement runs per message.
-- (Its rows are a named type: a RETURNS TABLE column may not share the
-- name of a parameter, and topic and partition are both.)
-- (kafka_sink.message_fate_row is a type: src/sql/pre_install/70_types.sql)
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
    fdetail text;
    rfdetail text;
    unfiltered kafka_sink.pipeline_definitions;
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
    -- for _traced_fate where the batch recorded its filtered offsets
    -- (m.filt tells them): the filter is not asked again
    unfiltered := p;
    unfiltered.filter := NULL;
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
    filt AS MATERIALIZED (
        SELECT fo.topic, fo.partition, fo.batch_id, o.o AS "offset", fo.filter
          FROM kafka_sink.filtered_offsets fo
          JOIN parts pa ON pa.topic = fo.topic AND pa.partition = fo.partition,
               unnest(fo.offsets) AS o(o)
         WHERE fo.pipeline_id = $1 AND o.o BETWEEN pa.lo AND pa.hi),
    unrecorded AS MATERIALIZED (
        SELECT b.batch_id FROM kafka_sink.batches b
         WHERE b.pipeline_id = $1 AND b.filtered > 0
           AND NOT EXISTS (SELECT 1 FROM kafka_sink.filtered_offsets fo
                            WHERE fo.pipeline_id = $1 AND fo.batch_id = b.batch_id)),
    m AS MATERIALIZED (
        SELECT pa.topic, pa.partition, g.o AS "offset", g.o >= pa.next_offset AS pending,
               ib.batch_id, l."offset" IS NOT NULL AS lost,
               q.batch_id AS q_batch, q.reason || ': ' || q.detail AS q_detail, q.target AS q_target,
               f."offset" IS NOT NULL OR rq.replay_filter IS NOT NULL AS filt,
               CASE WHEN f."offset" IS NOT NULL THEN f.filter ELSE rq.replay_filter END AS f_filter,
               f."offset" IS NULL AND rq.replay_filter IS NOT NULL AS f_replayed,
               (ib.batch_id IS NULL OR ib.batch_id IN (SELECT u.batch_id FROM unrecorded u)) AS refilter
          FROM parts pa
         CROSS JOIN LATERAL generate_series(pa.lo, pa.hi) AS g(o)
          LEFT JOIN in_batch ib ON ib.topic = pa.topic AND ib.partition = pa.partition AND ib."offset" = g.o
          LEFT JOIN filt f ON f.topic = pa.topic AND f.partition = pa.partition AND f."offset" = g.o
                          AND f.batch_id = ib.batch_id
          LEFT JOIN lost l ON l.topic = pa.topic AND l.partition = pa.partition AND l."offset" = g.o
          LEFT JOIN kafka_sink.quarantine q
                 ON q.pipeline_id = $1 AND q.topic = pa.topic AND q.partition = pa.partition
                AND q.message_offset = g.o AND q.replayed_at IS NULL
          LEFT JOIN kafka_sink.quarantine rq
                 ON rq.pipeline_id = $1 AND rq.topic = pa.topic AND rq.partition = pa.partition
                AND rq.message_offset = g.o AND rq.replay_filter IS NOT NULL)
    $q$;

    classify := $q$
        CASE WHEN m.pending THEN 'pending'
             WHEN m.lost THEN 'lost'
             WHEN m.q_batch IS NOT NULL THEN 'quarantined'
             WHEN m.filt THEN 'filtered' $q$;
    -- the detail of a message recorded filtered (message_fate's), over m
    -- (rf in the last branch's statement)
    fdetail := format('kafka_sink._filtered_detail(m.f_filter, %L::text, m.f_replayed)', p.filter);
    rfdetail := format('kafka_sink._filtered_detail(rf.f_filter, %L::text, rf.f_replayed)', p.filter);

    -- routed tables, change events, Avro keys: each message read from
    -- bronze and judged by _traced_fate (a function call per message, no
    -- statement per message beyond its row's look-up by key)
    IF p.mode = 'merge' AND p.bronze IS NOT NULL
       AND (routed OR p.envelope = 'debezium' OR p.key_format IN ('avro', 'protobuf')) THEN
        RETURN QUERY EXECUTE body || format($q$
        SELECT m.topic, m.partition, m."offset",
               %s ELSE f.fate END,
               CASE WHEN m.q_batch IS NOT NULL AND NOT m.pending AND NOT m.lost THEN m.q_batch
                    WHEN NOT m.pending THEN m.batch_id END,
               CASE WHEN m.pending THEN 'not read yet'
                    WHEN m.lost THEN 'deleted from Kafka before it was read (fail_on_data_loss = false)'
                    WHEN m.q_batch IS NOT NULL THEN m.q_detail
                    WHEN m.filt THEN %s
                    ELSE f.detail END,
               CASE WHEN m.pending OR m.lost THEN NULL
                    WHEN m.q_batch IS NOT NULL THEN m.q_target
                    ELSE f.target END
          FROM m
          LEFT JOIN %s br ON NOT m.pending AND NOT m.lost AND m.q_batch IS NULL
                         AND br.topic = m.topic COLLATE "C" AND br.partition = m.partition AND br."offset" = m."offset"
          LEFT JOIN LATERAL kafka_sink._traced_fate(CASE WHEN m.refilter THEN $6 ELSE $7 END,
                                                    m.topic, m.partition, m."offset", m.batch_id,
                                                    br."offset" IS NOT NULL, br.key, br.value) f
                 ON NOT m.pending AND NOT m.lost AND m.q_batch IS NULL
         ORDER BY 1, 2, 3 $q$, classify, fdetail, p.bronze)
            USING p.id, topic, partition, from_offset, to_offset, p, unfiltered;
        RETURN;
    END IF;

    -- mode history: message_fate's answer for each message (a version's
    -- lineage columns name the message it holds)
    IF p.mode = 'history' THEN
        RETURN QUERY EXECUTE body || $q$
        SELECT m.topic, m.partition, m."offset", f.fate, f.batch_id, f.detail, f.target
          FROM m CROSS JOIN LATERAL kafka_sink.message_fate($6, m.topic, m.partition, m."offset") f
         ORDER BY 1, 2, 3 $q$
            USING p.id, topic, partition, from_offset, to_offset, p.name;
        RETURN;
    END IF;

    -- (a key in a registry's wire format other than Avro is decoded by the
    -- worker only: as message_fate, no more than 'applied or superseded')
    IF p.target IS NULL OR p.mode <> 'merge' OR NOT has_lineage OR p.bronze IS NULL
       OR routed
       OR p.key_format = 'avro'
       OR (p.key_format = 'none' AND p.value_format <> 'json' AND NOT kafka_sink._meta_keys(p.columns, p.key_columns)) THEN
        RETURN QUERY EXECUTE body || format($q$
        SELECT m.topic, m.partition, m."offset",
               %s ELSE %L END,
               CASE WHEN m.q_batch IS NOT NULL AND NOT m.pending AND NOT m.lost THEN m.q_batch
                    WHEN NOT m.pending THEN m.batch_id END,
               CASE WHEN m.pending THEN 'not read yet'
                    WHEN m.lost THEN 'deleted from Kafka before it was read (fail_on_data_loss = false)'
                    WHEN m.q_batch IS NOT NULL THEN m.q_detail
                    WHEN m.filt THEN %s
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
            fdetail,
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
    ELSIF EXISTS (SELECT 1 FROM unnest(p.key_columns) c WHERE kafka_sink._column_path(p.columns, c) ~ '^(headers|kafka)\.') THEN
        -- a key column from a header or Kafka's metadata (meta.c)
        keyexpr := format('kafka_sink._message_key(%L::jsonb, %L::text[], %s, br.topic, br.partition, br."offset",'
                          ' br.ts, br.key, br.headers)',
                          p.columns, p.key_columns,
                          CASE WHEN kafka_sink._meta_keys(p.columns, p.key_columns) THEN 'NULL::jsonb'
                               ELSE 'CASE WHEN br.value IS NOT NULL THEN convert_from(br.value, ''UTF8'')::jsonb END' END);
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
        SELECT m.*, br."offset" IS NOT NULL AS has_msg, br.value IS NULL AS is_tomb, v.v,
               jsonb_populate_record(NULL::%1$s, v.v) AS k,
               CASE WHEN br."offset" IS NOT NULL AND %7$L::text IS NOT NULL AND m.refilter
                    THEN kafka_sink._message_filtered($1, m.topic, br.key, br.value) END AS filtered
          FROM m
          LEFT JOIN %2$s br ON NOT m.pending AND NOT m.lost AND m.q_batch IS NULL
                           AND br.topic = m.topic COLLATE "C" AND br.partition = m.partition AND br."offset" = m."offset"
          CROSS JOIN LATERAL (SELECT CASE WHEN br."offset" IS NOT NULL THEN %3$s END AS v) v),
    rf AS (
        SELECT mk.*, f.fate, f.detail
          FROM mk
          LEFT JOIN LATERAL (SELECT t.ctid IS NOT NULL AS has_row, t._kafka_topic, t._kafka_partition, t._kafka_offset,
                                    t._kafka_batch_id %8$s
                               FROM (SELECT) one LEFT JOIN %1$s t ON %5$s) t ON mk.has_msg
          LEFT JOIN LATERAL kafka_sink._row_fate($6, mk.topic, mk.partition, mk."offset", mk.batch_id, mk.v, mk.is_tomb,
                                                 t.has_row, t._kafka_topic, t._kafka_partition, t._kafka_offset,
                                                 t._kafka_batch_id, t.marked, t.mark, t.held) f ON mk.has_msg)
    SELECT rf.topic, rf.partition, rf."offset",
           %4$s
                WHEN NOT rf.has_msg THEN 'applied or superseded'
                WHEN rf.filtered THEN 'filtered'
                ELSE rf.fate END,
           CASE WHEN rf.q_batch IS NOT NULL AND NOT rf.pending AND NOT rf.lost THEN rf.q_batch
                WHEN NOT rf.pending THEN rf.batch_id END,
           CASE WHEN rf.pending THEN 'not read yet'
                WHEN rf.lost THEN 'deleted from Kafka before it was read (fail_on_data_loss = false)'
                WHEN rf.q_batch IS NOT NULL THEN rf.q_detail
                WHEN rf.filt THEN %9$s
                WHEN NOT rf.has_msg THEN 'lineage columns on the target and a bronze table are needed to tell more'
                WHEN rf.filtered THEN kafka_sink._filtered_detail(%7$L, %7$L)
                ELSE rf.detail END,
           CASE WHEN rf.pending OR rf.lost THEN NULL
                WHEN rf.q_batch IS NOT NULL THEN rf.q_target
                ELSE %6$L END
      FROM rf
     ORDER BY 1, 2, 3 $q$,
        p.target, p.bronze, keyexpr, replace(classify, 'm.', 'rf.'), keycond, p.target::text, p.filter,
        kafka_sink._row_fate_columns(p, p.target), rfdetail)
        USING p.id, topic, partition, from_offset, to_offset, p;
END
$$;
REVOKE ALL ON FUNCTION kafka_sink.message_fates(text, text, integer, bigint, bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION kafka_sink.message_fates(text, text, integer, bigint, bigint) TO kafka_sink_admin;
COMMENT ON FUNCTION kafka_sink.message_fates(text, text, integer, bigint, bigint) IS
'The fate of every message of a pipeline in an offset range (both ends included; default: from the first checkpoint or retained batch to the last committed offset), by the rules of message_fate(): pending, lost, quarantined, filtered, applied, soft_deleted, revived, superseded, stale, overwritten, deleted, skipped, deleted or skipped, truncated, appended, landed, or applied or superseded (without lineage columns and bronze), with the table each message went to (routed pipelines: the table its routing names; change events judged by source position). Cost: linear in the messages of the range plus the retained batches of the pipeline; no statement per message (filtered messages from kafka_sink.filtered_offsets; for a batch that recorded none, before 0.3.0, the filter asked again of each message read from bronze) but, for delete_mode soft, one primary-key look-up of kafka_sink.revived_offsets per message that is its row''s source.';


CREATE OR REPLACE FUNCTION kafka_sink.pipeline_statements(pipeline text)
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
'The statements each batch of the pipeline runs, per target and in order, with the apply strategy (sql; on_conflict for the insert and update that replace the MERGE when kafka_sink.apply_strategy = on_conflict; citus for the update and insert that replace it on a Citus distributed or reference table, which read the batch from a temporary table the worker stages): statement is the text as the worker runs it ($1 the batch id, the rows from kafka_sink._batch_rows()); by_hand the same statement reading the staging table pg_temp.kafka_sink_batch that the staging row creates, to run with PREPARE s(bigint) AS ...; EXECUTE s(batch_id).';
-- ---- lineage of change events, routed tables and Avro keys (message_fate, message_fates) ----
--
-- What message_fate and message_fates need past the plain single-target
-- JSON case: the table a message went to (route.c's rules, through
-- _message_target), its key (Avro and Protobuf through the stored schemas
-- only, _avro_key; headers and kafka.* from bronze, _message_key), and for envelope debezium the event's op and source
-- position, judged against the row's position and kafka_sink.cdc_deletions
-- (docs/design/cdc.md, "Message fates of change events").

CREATE OR REPLACE FUNCTION kafka_sink._message_target(pipeline_id bigint, topic text, value bytea)
RETURNS text
AS 'MODULE_PATHNAME', 'kafka_sink_message_target'
LANGUAGE C
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION kafka_sink._message_target(bigint, text, bytea) IS
'Internal: the quoted, qualified name of the table a message of topic with this value goes to by the pipeline''s routing (its target template, targets map or target), by the worker''s own rules; NULL when none can be named. The table need not exist.';

CREATE OR REPLACE FUNCTION kafka_sink._message_filtered(pipeline_id bigint, topic text, key bytea, value bytea)
RETURNS boolean
AS 'MODULE_PATHNAME', 'kafka_sink_message_filtered'
LANGUAGE C
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION kafka_sink._message_filtered(bigint, text, bytea, bytea) IS
'Internal: whether the pipeline''s filter leaves this message out, decoded as the worker decodes it (docs/transform.md); NULL without a filter, or for a message that is no upsert that decodes.';

CREATE OR REPLACE FUNCTION kafka_sink._avro_key(registry text, key bytea, fields text[], OUT key jsonb, OUT problem text)
AS 'MODULE_PATHNAME', 'kafka_sink_avro_key'
LANGUAGE C
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION kafka_sink._avro_key(text, bytea, text[]) IS
'Internal: a message key in Confluent''s wire format decoded with the Avro or Protobuf schema stored in kafka_sink.schemas for its id (the registry is never called), as a JSON object of the fields named; problem says why not (no key, not the wire format, an id not stored, neither Avro nor Protobuf, bytes that do not decode).';

-- The detail of a filtered message (docs/transform.md), the one home of
-- its wording, for message_fate, message_fates and _traced_fate: ran is the
-- filter that left it out (recorded with the batch's filtered offsets, or
-- on the quarantine row a replay filtered, replayed true; the pipeline's
-- filter where it is asked again of bronze), now the pipeline's filter now.
CREATE OR REPLACE FUNCTION kafka_sink._filtered_detail(ran text, now text, replayed boolean DEFAULT false)
RETURNS text
LANGUAGE sql
IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
SELECT CASE WHEN replayed THEN 'replayed by replay_quarantine: ' ELSE '' END
       || format('the pipeline''s filter is not true for it: %s', ran)
       || CASE WHEN now IS NULL THEN ' (the filter then; the pipeline has no filter now)'
               WHEN now <> ran THEN format(' (the filter then; the pipeline''s filter now: %s)', now)
               ELSE '' END
$$;
COMMENT ON FUNCTION kafka_sink._filtered_detail(text, text, boolean) IS
'Internal: message_fate''s detail of a filtered message, naming the filter that left it out (ran) and the pipeline''s filter now where it differs; replayed: left out by replay_quarantine.';

-- A change event's source position: envelope_debezium.c's own function
-- (ks_cdc_position), so that message_fate and the worker order events by
-- one rule.  NULL when the event has none (a NULL source included).
CREATE OR REPLACE FUNCTION kafka_sink._cdc_position(source jsonb, "offset" bigint)
RETURNS numeric
AS 'MODULE_PATHNAME', 'kafka_sink_cdc_position'
LANGUAGE C IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION kafka_sink._cdc_position(jsonb, bigint) IS
'Internal: the source position of a Debezium change event''s source block read at this Kafka offset, by the worker''s own rule (PostgreSQL lsn; MySQL binlog file number * 10^26 + pos * 10^6 + row; else ts_ms * 10^19 + the offset); NULL when it has none.';

-- The columns a fate's row look-up reads past the lineage columns, as SQL
-- over the target's alias t: whether the row is marked deleted (delete_mode
-- soft: _deleted, else a non-null _deleted_at; false without either), the
-- mark as text, and what the row holds to order by (the order column, or
-- for change events the source position column) as text.
CREATE OR REPLACE FUNCTION kafka_sink._row_fate_columns(p kafka_sink.pipeline_definitions, tgt regclass)
RETURNS text
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    has_del boolean;
    has_at boolean;
    held text := coalesce(p.order_column, CASE WHEN p.envelope = 'debezium' THEN '_kafka_source_position' END);
    held_sql text := 'NULL::text';
BEGIN
    SELECT bool_or(a.attname = '_deleted'), bool_or(a.attname = '_deleted_at') INTO has_del, has_at
      FROM pg_attribute a WHERE a.attrelid = tgt AND a.attnum > 0 AND NOT a.attisdropped;
    IF held IS NOT NULL AND EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = tgt AND a.attname = held
                                       AND a.attnum > 0 AND NOT a.attisdropped) THEN
        held_sql := CASE WHEN p.envelope = 'debezium' THEN format('''source position '' || coalesce(t.%I::text, ''NULL'')', held)
                         ELSE format('%L || coalesce(t.%I::text, ''NULL'')', quote_ident(held) || ' = ', held) END;
    END IF;
    RETURN format(', %s AS marked, %s AS mark, %s AS held',
                  CASE WHEN p.delete_mode <> 'soft' THEN 'false' WHEN has_del THEN 't._deleted IS TRUE'
                       WHEN has_at THEN 't._deleted_at IS NOT NULL' ELSE 'false' END,
                  CASE WHEN p.delete_mode <> 'soft' THEN 'NULL::text'
                       WHEN has_del AND has_at THEN '''_deleted = true, _deleted_at = '' || coalesce(t._deleted_at::text, ''NULL'')'
                       WHEN has_del THEN '''_deleted = true'''
                       WHEN has_at THEN '''_deleted_at = '' || t._deleted_at::text' ELSE 'NULL::text' END,
                  held_sql);
END
$$;
COMMENT ON FUNCTION kafka_sink._row_fate_columns(kafka_sink.pipeline_definitions, regclass) IS
'Internal: the SQL list (over the target''s alias t) of what message_fate(s) read of a message''s row past its lineage: marked, mark and held (docs/observing.md).';

-- The fate of one read, not quarantined, not filtered message of a merge
-- pipeline, from its key's row as found (the one home of these rules, for
-- message_fate, message_fates and _traced_fate):
--   no row: skipped (update_only, a key the target never held: a pipeline
--     without deletes), deleted or skipped (update_only with deletes: the
--     lineage cannot tell which), else deleted (is_delete: the message is
--     itself a delete);
--   a row without lineage (_kafka_offset NULL: written by someone else):
--     stale, never deleted;
--   the row names the message: soft_deleted (delete_mode soft: a delete
--     that marked it), truncated (soft: applied, then marked by a truncate),
--     revived (soft: an upsert that brought the marked row back, as the
--     batch that wrote the row recorded in kafka_sink.revived_offsets),
--     else applied;
--   another message: insert_only superseded (the first event won), else
--     superseded (same batch), stale (an older batch), overwritten.
-- k: the key for the detail; held: the row's order value or source
-- position, as text; pos and op: a change event's source position and op.
CREATE OR REPLACE FUNCTION kafka_sink._row_fate(p kafka_sink.pipeline_definitions, topic text, partition integer,
                                                "offset" bigint, b_id bigint, k jsonb, is_delete boolean,
                                                has_row boolean, r_topic text, r_partition integer, r_offset bigint,
                                                r_batch bigint, marked boolean, mark text, held text,
                                                pos numeric DEFAULT NULL, op text DEFAULT NULL,
                                                OUT fate text, OUT detail text)
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    cdc boolean := p.envelope = 'debezium';
    over text;
BEGIN
    IF NOT has_row THEN
        IF p.write_mode = 'update_only' AND NOT is_delete THEN
            IF p.delete_mode = 'hard' AND (p.delete_on_tombstone OR cdc) THEN
                fate := 'deleted or skipped';
                detail := format('no row for key %s: write_mode update_only skipped it (a key the target did not hold), or a delete removed the row; the lineage does not tell which', k);
            ELSE
                fate := 'skipped';
                detail := format('no row for key %s: write_mode update_only skips an event whose key the target does not hold', k);
            END IF;
        ELSE
            fate := 'deleted';
            detail := format('no row for key %s', k);
        END IF;
    ELSIF r_offset IS NULL THEN
        fate := 'stale';
        detail := format('the row for key %s has no lineage (not written by this pipeline, or before its lineage columns): this message is not its source', k);
    ELSIF r_topic = topic AND r_partition = partition AND r_offset = "offset" THEN
        IF marked AND is_delete THEN
            fate := 'soft_deleted';
            detail := format('marked the row with key %s deleted (%s; delete_mode soft), its values kept, %s', k, mark, held);
        ELSIF marked THEN
            fate := 'truncated';
            detail := format('applied, then a truncate marked the row with key %s deleted (%s; delete_mode soft), %s', k, mark, held);
        ELSE
            -- revived: recorded by the batch that wrote the row (or, for a
            -- row replay_quarantine wrote, _kafka_batch_id 0, on the
            -- quarantine row), with what the marked row held to order by
            IF p.delete_mode = 'soft' AND r_batch = 0 THEN
                SELECT q.replay_revived INTO over FROM kafka_sink.quarantine q
                 WHERE q.pipeline_id = p.id AND q.topic = _row_fate.topic AND q.partition = _row_fate.partition
                   AND q.message_offset = _row_fate."offset" AND q.replayed_at IS NOT NULL;
            ELSIF p.delete_mode = 'soft' THEN
                SELECT ro.held[pg_catalog.array_position(ro.offsets, _row_fate."offset")] INTO over
                  FROM kafka_sink.revived_offsets ro
                 WHERE ro.pipeline_id = p.id AND ro.batch_id = r_batch AND ro.topic = _row_fate.topic
                   AND ro.partition = _row_fate.partition AND _row_fate."offset" = ANY (ro.offsets);
            END IF;
            IF over IS NOT NULL THEN
                fate := 'revived';
                detail := format('brought back the row with key %s, marked deleted (delete_mode soft)%s%s: its current source',
                                 k, CASE WHEN over <> '' THEN ' at ' || over ELSE '' END,
                                 CASE WHEN r_batch = 0 THEN ', replayed by replay_quarantine' ELSE '' END);
            ELSE
                fate := 'applied';
                detail := format('the current source of the row with key %s', k);
            END IF;
        END IF;
    ELSIF p.write_mode = 'insert_only' THEN
        fate := 'superseded';
        detail := format('the first event of key %s won (write_mode insert_only): offset %s in batch %s', k, r_offset, r_batch);
    ELSIF r_batch = b_id THEN
        fate := 'superseded';
        detail := format('offset %s of the same batch won for key %s', r_offset, k);
    ELSIF r_batch < b_id THEN
        fate := 'stale';
        detail := CASE WHEN cdc AND held IS NOT NULL
                       THEN format('the row for key %s (from batch %s) was newer: its %s, this %s %s',
                                   k, r_batch, held, CASE op WHEN 'd' THEN 'delete''s' ELSE 'event''s' END, pos)
                       ELSE format('the row for key %s (from batch %s) was newer', k, r_batch) END;
    ELSE
        fate := 'overwritten';
        detail := CASE WHEN is_delete
                       THEN format('deleted, then written again by offset %s in batch %s', r_offset, r_batch)
                       ELSE format('replaced by offset %s in batch %s', r_offset, r_batch) END;
    END IF;
END
$$;
COMMENT ON FUNCTION kafka_sink._row_fate(kafka_sink.pipeline_definitions, text, integer, bigint, bigint, jsonb, boolean, boolean, text, integer, bigint, bigint, boolean, text, text, numeric, text) IS
'Internal: the fate and detail of one read message of a merge pipeline from its key''s row as found (applied, soft_deleted, truncated, revived, superseded, stale, overwritten, deleted, skipped, deleted or skipped), for message_fate, message_fates and _traced_fate.';

-- The fate of one read, not quarantined message of a merge pipeline that
-- routes, reads change events or has Avro keys: the table it went to (or
-- would have), its fate and a detail.  b_id: the batch that read it; key
-- and value: the raw message from bronze (NULL value: a tombstone), has_msg
-- false when bronze does not hold it.
CREATE OR REPLACE FUNCTION kafka_sink._traced_fate(p kafka_sink.pipeline_definitions, topic text, partition integer,
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
    has_row boolean;
    nrows bigint;
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
    -- filtered (docs/transform.md): the filter asked again of the message
    -- (routed: in the table its routing names)
    IF p.filter IS NOT NULL AND kafka_sink._message_filtered(p.id, topic, msg_key, msg_value) THEN
        fate := 'filtered';
        detail := kafka_sink._filtered_detail(p.filter, p.filter);
        RETURN;
    END IF;
    IF target IS NULL THEN
        fate := 'applied or superseded';
        -- bronze keeps the headers, but routing by them is the worker's only
        detail := CASE WHEN p.target_template ~ '\{(headers|kafka)\.'
                       THEN 'a table named by a header or Kafka''s metadata is not traced here'
                       ELSE 'the pipeline''s routing names no table for it' END;
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
    IF p.key_format IN ('avro', 'protobuf') THEN
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
    ELSIF p.key_format = 'none' AND kafka_sink._meta_keys(p.columns, keycols) THEN
        -- every key column from a header or Kafka's metadata (meta.c)
        k := kafka_sink._message_key(p.columns, keycols, NULL, topic, partition, "offset",
                                     (SELECT m.ts FROM kafka_sink._bronze_message(p.bronze, topic, partition, "offset") m),
                                     msg_key, kafka_sink._bronze_headers(p.bronze, topic, partition, "offset"));
    ELSIF p.value_format = 'json' AND msg_value IS NOT NULL THEN
        k := kafka_sink._message_key(p.columns, keycols, convert_from(msg_value, 'UTF8')::jsonb, topic, partition, "offset",
                                     (SELECT m.ts FROM kafka_sink._bronze_message(p.bronze, topic, partition, "offset") m),
                                     msg_key, kafka_sink._bronze_headers(p.bronze, topic, partition, "offset"));
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
                   ' t._kafka_batch_id AS batch_id%s'
                   ' FROM %s t, jsonb_populate_record(NULL::%s, $1) kk WHERE %s',
                   kafka_sink._row_fate_columns(p, tgt), tgt, tgt, cond)
       INTO r USING k;
    GET DIAGNOSTICS nrows = ROW_COUNT;     -- (EXECUTE does not set FOUND)
    has_row := nrows > 0;

    -- a row, or no row of a plain message: the rules of _row_fate
    IF has_row OR NOT cdc THEN
        SELECT f.fate, f.detail INTO fate, detail
          FROM kafka_sink._row_fate(p, topic, partition, "offset", b_id, k, msg_value IS NULL OR op IS NOT DISTINCT FROM 'd', has_row,
                                    r.topic, r.partition, r."offset", r.batch_id, r.marked, r.mark, r.held, pos, op) f;
    ELSIF op = 'd' THEN
        fate := 'deleted';
        detail := format('deleted the row with key %s at source position %s', k, pos);
    ELSE
        -- no row: a delete or truncate at a source position at or past this
        -- event's removed it, or kept it from coming back (stale on arrival)
        EXECUTE format('SELECT to_jsonb(ARRAY[%s]) FROM jsonb_populate_record(NULL::%s, $1) kk',
                       (SELECT string_agg(format('kk.%I::text', c), ', ') FROM unnest(keycols) c), tgt)
           INTO keyarr USING k;
        SELECT max(d.position) FILTER (WHERE d.key = keyarr::text), max(d.position) FILTER (WHERE d.key = 'null')
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
            -- no delete at or past this event's position: update_only
            -- skipped it (its key was not in the target)
            IF p.write_mode = 'update_only' THEN
                fate := 'skipped';
                detail := format('no row for key %s, and no delete at or past this event''s source position %s: write_mode update_only skips an event whose key the target does not hold', k, pos);
            ELSE
                fate := 'deleted';
                detail := format('no row for key %s', k);
            END IF;
        END IF;
    END IF;
END
$$;
COMMENT ON FUNCTION kafka_sink._traced_fate(kafka_sink.pipeline_definitions, text, integer, bigint, bigint, boolean, bytea, bytea) IS
'Internal: the table, fate and detail of one read message of a merge pipeline that routes, reads Debezium change events or has Avro keys (message_fate, message_fates).';

-- ---- lineage(pipeline, key, target): routed pipelines ----
--
-- Which message and batch produced a target row.  key is a JSON object of
-- the key columns of the table (key_columns, else the table's primary key,
-- as the worker keys it; for envelope debezium the fields of the message
-- key), e.g. '{"order_id": 42}'.  Needs the lineage columns _kafka_topic,
-- _kafka_partition, _kafka_offset (and _kafka_batch_id) on the table; the
-- raw message comes from bronze when the pipeline keeps one.
--
-- A routed pipeline (target template, targets map) writes many tables:
-- target names one, and must be one the pipeline writes (its targets map,
-- its target, or a table its retained batches' progress records name), so
-- the function is never a way to read some other table.  It runs with the
-- caller's rights (no SECURITY DEFINER): the caller's SELECT on the table
-- applies as for any query.
CREATE OR REPLACE FUNCTION kafka_sink._pipeline_written_tables(p kafka_sink.pipeline_definitions)
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
'Internal: the tables a pipeline writes as far as its definition (target, targets map) and its retained batches'' progress records name them, for lineage() and create_lineage_view().';

-- The table of pipeline p that target names, the one rule of lineage()
-- and create_lineage_view(): p's own target when target is NULL or the
-- same; for a routed pipeline a table it writes (_pipeline_written_tables;
-- its target when none is named).  Raises for any other table; NULL when
-- p has no target and names none.
CREATE OR REPLACE FUNCTION kafka_sink._pipeline_target(p kafka_sink.pipeline_definitions, target regclass)
RETURNS regclass
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    written text[];
BEGIN
    IF p.target_template IS NULL AND p.targets IS NULL THEN
        IF target IS NOT NULL AND target IS DISTINCT FROM p.target THEN
            RAISE EXCEPTION 'pipeline "%" does not write %', p.name, target
                USING ERRCODE = 'invalid_parameter_value',
                      HINT = CASE WHEN p.target IS NULL THEN 'It has no target.' ELSE format('Its target is %s.', p.target) END;
        END IF;
        RETURN p.target;
    END IF;
    target := coalesce(target, p.target);
    written := kafka_sink._pipeline_written_tables(p);
    IF target IS NULL THEN
        RAISE EXCEPTION 'pipeline "%" routes to many tables', p.name
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = CASE WHEN cardinality(written) = 0
                                THEN 'Its retained batches name no table it wrote.'
                                ELSE format('It wrote %s.', array_to_string(written, ', ')) END,
                  HINT = 'Name the table: target => ''schema.table''.';
    END IF;
    -- compared as regclass: the names come quoted and qualified, the
    -- argument however the caller spelled it
    IF NOT EXISTS (SELECT 1 FROM unnest(written) w WHERE to_regclass(w) = target) THEN
        RAISE EXCEPTION 'pipeline "%" does not write %', p.name, target
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = CASE WHEN cardinality(written) = 0
                                THEN 'Its retained batches name no table it wrote.'
                                ELSE format('It wrote %s.', array_to_string(written, ', ')) END,
                  HINT = 'Name one of the tables it wrote.';
    END IF;
    RETURN target;
END
$$;
COMMENT ON FUNCTION kafka_sink._pipeline_target(kafka_sink.pipeline_definitions, regclass) IS
'Internal: the table of a pipeline that lineage() and create_lineage_view() trace: its target, or for a routed pipeline one of the tables it writes; raises for any other.';

CREATE OR REPLACE FUNCTION kafka_sink.lineage(pipeline text, key jsonb, target regclass DEFAULT NULL)
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
    tgt := kafka_sink._pipeline_target(p, lineage.target);
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
COMMENT ON FUNCTION kafka_sink.lineage(text, jsonb, regclass) IS
'Which message and batch produced the row with the given key (a JSON object of the table''s key columns) of the pipeline''s target; a routed pipeline needs target => one of the tables it writes. Needs the lineage columns on the table; the raw message comes from bronze when the pipeline keeps one. Runs with the caller''s rights.';
