-- kafka_sink 0.1.0 -> 0.2.0
--
-- Every change to the catalog, views and SQL API since 0.1.0, in order.
-- The install script of 0.2.0 is built by the Makefile as the 0.1.0 script
-- followed by this one (as pg_cron keeps a base script plus updates), so a
-- fresh install and an upgrade run the same statements; test/e2e/upgrade.sh
-- checks that they end in the same schema.

\echo Use "ALTER EXTENSION kafka_sink UPDATE TO '0.2.0'" to load this file. \quit

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
    IF path !~ '^[^.]+(\.[^.]+)*$' THEN
        RAISE EXCEPTION 'invalid JSON path "%" for column "%"', path, col
            USING ERRCODE = 'invalid_parameter_value', HINT = 'A path names nested fields with dots, such as "payload.amount".';
    END IF;
END
$$;

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
    SELECT string_agg(c, ', ') INTO missing
      FROM unnest(ARRAY['topic', 'partition', 'offset', 'ts', 'key', 'value', 'headers', 'batch_id']) c
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

CREATE OR REPLACE FUNCTION kafka_sink.reset_offsets(pipeline text, "to" text)
RETURNS TABLE (topic text, partition integer, old_offset bigint, new_offset bigint)
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    p kafka_sink.pipeline_definitions;
    j jsonb;
    ts timestamptz;
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
    CREATE TEMP TABLE IF NOT EXISTS kafka_sink_reset (topic text, partition int, old_offset bigint, new_offset bigint);
    TRUNCATE kafka_sink_reset;
    INSERT INTO kafka_sink_reset
    SELECT w.topic, w.partition, o.next_offset,
           CASE WHEN "to" = 'earliest' THEN w.low
                WHEN "to" = 'latest' THEN w.high
                WHEN j IS NOT NULL THEN
                    CASE (j -> w.topic ->> w.partition::text)::bigint
                        WHEN -2 THEN w.low WHEN -1 THEN w.high
                        ELSE (j -> w.topic ->> w.partition::text)::bigint END
                ELSE CASE WHEN w.at_offset < 0 THEN w.high ELSE w.at_offset END
           END
      FROM kafka_sink._watermarks(pipeline, ts) w
      LEFT JOIN kafka_sink.offsets o
             ON o.pipeline_id = p.id AND o.topic = w.topic AND o.partition = w.partition
     WHERE j IS NULL OR j -> w.topic ? w.partition::text;
    IF j IS NOT NULL THEN
        -- every partition named must exist, and its offset be within its log
        SELECT x.topic, x.partition, x.off INTO bad_topic, bad_partition, bad_offset
          FROM (SELECT jt.key AS topic, jp.key::int AS partition, (jp.value #>> '{}')::bigint AS off
                  FROM jsonb_each(j) jt, jsonb_each(jt.value) jp) x
         WHERE NOT EXISTS (SELECT 1 FROM kafka_sink_reset r WHERE r.topic = x.topic AND r.partition = x.partition)
         LIMIT 1;
        IF FOUND THEN
            RAISE EXCEPTION 'topic "%" partition % is not a partition of pipeline "%"', bad_topic, bad_partition, pipeline
                USING ERRCODE = 'invalid_parameter_value',
                      DETAIL = 'The topic or partition does not exist, or the pipeline does not read it.',
                      HINT = 'SELECT * FROM kafka_sink.progress lists the partitions the pipeline reads.';
        END IF;
        SELECT r.topic, r.partition, r.new_offset, w.low, w.high
          INTO bad_topic, bad_partition, bad_offset, bad_low, bad_high
          FROM kafka_sink_reset r
          JOIN kafka_sink._watermarks(pipeline) w ON w.topic = r.topic AND w.partition = r.partition
         WHERE r.new_offset > w.high OR r.new_offset < w.low
         LIMIT 1;
        IF FOUND THEN
            RAISE EXCEPTION 'offset % is outside the log of topic "%" partition %', bad_offset, bad_topic, bad_partition
                USING ERRCODE = 'invalid_parameter_value',
                      DETAIL = format('The partition holds offsets %s to %s.', bad_low, bad_high),
                      HINT = 'Pass an offset within the log, or -2 (earliest) or -1 (latest).';
        END IF;
    END IF;
    DELETE FROM kafka_sink_reset r WHERE r.new_offset IS NULL OR r.new_offset IS NOT DISTINCT FROM r.old_offset;
    INSERT INTO kafka_sink.offsets AS o (pipeline_id, topic, partition, next_offset, start_offset)
    SELECT p.id, r.topic, r.partition, r.new_offset, r.new_offset FROM kafka_sink_reset r
    ON CONFLICT ON CONSTRAINT offsets_pkey DO UPDATE SET next_offset = excluded.next_offset,
        batch_id = NULL, updated_at = now();
    INSERT INTO kafka_sink.offset_resets (pipeline_id, topic, partition, old_offset, new_offset, spec)
    SELECT p.id, r.topic, r.partition, r.old_offset, r.new_offset, "to" FROM kafka_sink_reset r;
    RETURN QUERY SELECT r.topic, r.partition, r.old_offset, r.new_offset FROM kafka_sink_reset r
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
