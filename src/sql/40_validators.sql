-- kafka_sink: validation helpers of the API (each raises a user-facing
-- error or returns normally) and the small helpers the API bodies share.
-- create_pipeline and alter_pipeline call them from 51_ and 52_; a new
-- option gets its check here, as a function of its own.

CREATE OR REPLACE FUNCTION kafka_sink._require_admin()
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF NOT pg_has_role(current_user, 'kafka_sink_admin', 'MEMBER') THEN
        RAISE EXCEPTION 'permission denied to manage kafka_sink pipelines'
            USING ERRCODE = 'insufficient_privilege',
                  HINT = 'A superuser must GRANT kafka_sink_admin TO the role.';
    END IF;
END
$$;

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
COMMENT ON FUNCTION kafka_sink._require_admin() IS
'Internal: raises unless the current role is a member of kafka_sink_admin.';
COMMENT ON FUNCTION kafka_sink._get_pipeline(text, boolean) IS
'Internal: the definition of a pipeline the current role can see, by name (optionally locked), or an error naming it.';

CREATE OR REPLACE FUNCTION kafka_sink._check_source(subscribe text[], subscribe_pattern text, assign jsonb)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    t text;
    p jsonb;
BEGIN
    IF num_nonnulls(subscribe, subscribe_pattern, assign) <> 1 THEN
        RAISE EXCEPTION 'exactly one of subscribe, subscribe_pattern or assign must be set'
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Pass subscribe => ARRAY[''orders.v1''] to read one topic.';
    END IF;
    IF subscribe IS NOT NULL THEN
        IF cardinality(subscribe) = 0 OR array_position(subscribe, NULL) IS NOT NULL THEN
            RAISE EXCEPTION 'subscribe must be a non-empty list of topic names'
                USING ERRCODE = 'invalid_parameter_value',
                      HINT = 'Pass subscribe => ARRAY[''orders.v1''].';
        END IF;
        FOREACH t IN ARRAY subscribe LOOP
            IF t !~ '^[A-Za-z0-9._-]{1,249}$' THEN
                RAISE EXCEPTION 'invalid topic name "%"', t
                    USING ERRCODE = 'invalid_parameter_value',
                          HINT = 'Kafka topic names use letters, digits, ".", "_" and "-", at most 249 characters.';
            END IF;
        END LOOP;
    END IF;
    IF subscribe_pattern IS NOT NULL THEN
        BEGIN
            PERFORM '' ~ subscribe_pattern;
        EXCEPTION WHEN invalid_regular_expression THEN
            RAISE EXCEPTION 'invalid subscribe_pattern "%"', subscribe_pattern
                USING ERRCODE = 'invalid_regular_expression',
                      DETAIL = SQLERRM,
                      HINT = 'subscribe_pattern is a PostgreSQL regular expression matched against topic names, for example ''^orders\..*''.';
        END;
    END IF;
    IF assign IS NOT NULL THEN
        IF jsonb_typeof(assign) <> 'object' OR assign = '{}' THEN
            RAISE EXCEPTION 'assign must be a JSON object mapping topics to partition arrays'
                USING ERRCODE = 'invalid_parameter_value',
                      HINT = 'Pass assign => ''{"orders.v1": [0, 1]}''.';
        END IF;
        FOR t, p IN SELECT * FROM jsonb_each(assign) LOOP
            IF t !~ '^[A-Za-z0-9._-]{1,249}$' THEN
                RAISE EXCEPTION 'invalid topic name "%" in assign', t
                    USING ERRCODE = 'invalid_parameter_value',
                          HINT = 'Kafka topic names use letters, digits, ".", "_" and "-", at most 249 characters.';
            END IF;
            IF jsonb_typeof(p) <> 'array' OR jsonb_array_length(p) = 0
               OR EXISTS (SELECT 1 FROM jsonb_array_elements(p) e
                          WHERE jsonb_typeof(e) <> 'number'
                             OR e::text !~ '^[0-9]{1,9}$') THEN
                RAISE EXCEPTION 'assign for topic "%" must be a non-empty array of partition numbers', t
                    USING ERRCODE = 'invalid_parameter_value',
                          HINT = 'Pass assign => ''{"orders.v1": [0, 1]}''.';
            END IF;
        END LOOP;
    END IF;
END
$$;
COMMENT ON FUNCTION kafka_sink._check_source(text[], text, jsonb) IS
'Internal: raises unless exactly one of subscribe, subscribe_pattern or assign is set, and valid.';

-- starting_offsets: 'earliest', 'latest', a timestamp, or per-partition JSON
-- such as {"orders.v1": {"0": 42, "1": -2}} (-2 earliest, -1 latest).
CREATE OR REPLACE FUNCTION kafka_sink._check_starting_offsets(starting_offsets text)
RETURNS void
LANGUAGE sql
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT kafka_sink._check_offsets(starting_offsets, 'starting_offsets')
$$;
COMMENT ON FUNCTION kafka_sink._check_starting_offsets(text) IS
'Internal: raises unless starting_offsets is a spec the workers can use (kafka_sink._check_offsets).';

-- The definition as a whole, whoever writes it (the API or a superuser's
-- UPDATE): the offsets specs parse as the worker parses them, and a backfill
-- does not end before it starts.
CREATE OR REPLACE FUNCTION kafka_sink._check_definition()
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
CREATE OR REPLACE TRIGGER check_definition
    BEFORE INSERT OR UPDATE OF starting_offsets, ending_offsets ON kafka_sink.pipeline_definitions
    FOR EACH ROW EXECUTE FUNCTION kafka_sink._check_definition();

-- A table a pipeline writes (target or bronze) must be a table of the user's
-- own that a worker can see: not a temporary table (a worker is another
-- session), not a table of the extension or of another extension.
CREATE OR REPLACE FUNCTION kafka_sink._check_user_table(rel regclass, what text)
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
CREATE OR REPLACE FUNCTION kafka_sink._check_writable_column(target regclass, col text, what text)
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
CREATE OR REPLACE FUNCTION kafka_sink._check_lineage_columns(target regclass)
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

-- Checks the target (or the row type of a function-mode pipeline), its key
-- and order columns and the caller's privileges.  Returns the key columns,
-- defaulted to the primary key.
CREATE OR REPLACE FUNCTION kafka_sink._check_target(target regclass, key_columns text[], order_column text, mode text)
RETURNS text[]
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    k text;
    keys_attnums int2[];
    kind "char";
    part_columns text[];
    missing text[];
BEGIN
    SELECT relkind INTO kind FROM pg_class WHERE oid = target;
    IF kind NOT IN ('r', 'p') THEN
        RAISE EXCEPTION 'target "%" is not a table', target
            USING ERRCODE = 'wrong_object_type',
                  HINT = 'The target must be an ordinary or partitioned table.';
    END IF;
    PERFORM kafka_sink._check_user_table(target, 'target');
    IF mode IN ('merge', 'append', 'history') AND NOT has_table_privilege(target, 'INSERT') THEN
        RAISE EXCEPTION 'permission denied for table %', target
            USING ERRCODE = 'insufficient_privilege',
                  HINT = 'The pipeline writes as its owner, who needs INSERT, UPDATE and SELECT on the target.';
    END IF;
    IF mode IN ('merge', 'history') AND NOT (has_table_privilege(target, 'UPDATE') AND has_table_privilege(target, 'SELECT')) THEN
        RAISE EXCEPTION 'permission denied for table %', target
            USING ERRCODE = 'insufficient_privilege',
                  HINT = 'The pipeline writes as its owner, who needs INSERT, UPDATE and SELECT on the target.';
    END IF;

    IF key_columns IS NULL AND mode IN ('merge', 'history') THEN
        -- a history table's primary key is (the key, _valid_from)
        SELECT array_agg(a.attname::text ORDER BY array_position(i.indkey::int2[], a.attnum))
          INTO key_columns
          FROM pg_index i
          JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY (i.indkey)
         WHERE i.indrelid = target AND i.indisprimary AND (mode = 'merge' OR a.attname <> '_valid_from');
        IF key_columns IS NULL THEN
            RAISE EXCEPTION 'target % has no primary key%', target,
                            CASE mode WHEN 'history' THEN ' on (the key, _valid_from)' ELSE '' END
                USING ERRCODE = 'invalid_table_definition',
                      HINT = CASE mode WHEN 'history'
                                 THEN 'Pass key_columns => ARRAY[''order_id''], or add PRIMARY KEY (order_id, _valid_from).'
                                 ELSE 'Pass key_columns => ARRAY[''order_id''], covered by a unique index, or add a primary key.' END;
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
            IF kind = 'p' THEN
                -- a unique index on a partitioned table must hold the
                -- partition key of the table and of each partitioned
                -- partition below it (PostgreSQL refuses it otherwise)
                IF EXISTS (SELECT 1 FROM pg_partition_tree(target) t
                             JOIN pg_partitioned_table pt ON pt.partrelid = t.relid
                            WHERE 0 = ANY (pt.partattrs::int2[])) THEN
                    RAISE EXCEPTION 'partitioned table % has no unique index on key columns % and cannot have one', target, key_columns
                        USING ERRCODE = 'invalid_table_definition',
                              DETAIL = 'It, or a partition of it, is partitioned by an expression, and a unique index on a partitioned table must hold its partition key columns.',
                              HINT = 'Partition the target by columns, or use mode => ''append''.';
                END IF;
                SELECT array_agg(DISTINCT a.attname::text ORDER BY a.attname::text) INTO part_columns
                  FROM pg_partition_tree(target) t
                  JOIN pg_partitioned_table pt ON pt.partrelid = t.relid
                  CROSS JOIN LATERAL unnest(pt.partattrs::int2[]) AS x(attnum)
                  JOIN pg_attribute a ON a.attrelid = t.relid AND a.attnum = x.attnum;
                SELECT array_agg(c ORDER BY c) INTO missing FROM unnest(part_columns) c WHERE c <> ALL (key_columns);
                IF missing IS NOT NULL THEN
                    RAISE EXCEPTION 'key columns % must include the partition key column(s) % of partitioned table %',
                                    key_columns, missing, target
                        USING ERRCODE = 'invalid_table_definition',
                              DETAIL = 'A unique index on a partitioned table must hold its partition key columns, so the key of a merge must too.',
                              HINT = format('Pass key_columns => %s and CREATE UNIQUE INDEX ON %s (%s).',
                                            (SELECT 'ARRAY[' || string_agg(quote_literal(c), ',') || ']'
                                               FROM unnest(key_columns || missing) c),
                                            target,
                                            (SELECT string_agg(quote_ident(c), ', ') FROM unnest(key_columns || missing) c));
                END IF;
            END IF;
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
        IF mode NOT IN ('merge', 'history') THEN
            RAISE EXCEPTION 'order_column only applies to modes merge and history'
                USING ERRCODE = 'invalid_parameter_value',
                      HINT = 'Drop order_column, or use mode => ''merge''.';
        END IF;
    END IF;
    IF mode = 'history' THEN
        PERFORM kafka_sink._check_history_target(target, key_columns, order_column);
    END IF;
    PERFORM kafka_sink._check_lineage_columns(target);
    RETURN key_columns;
END
$$;
COMMENT ON FUNCTION kafka_sink._check_target(regclass, text[], text, text) IS
'Internal: checks a pipeline''s target, key and order columns and the caller''s privileges on it; returns the key columns (by default the primary key).';

-- Mode history (docs/history.md): the order column, the version columns of
-- its type, _deleted, the optional _is_current and _fields, and the unique
-- index on (the key, _valid_from) that the batch's statement probes.
CREATE OR REPLACE FUNCTION kafka_sink._check_history_target(target regclass, key_columns text[], order_column text)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    order_type text;
    col record;
    want_attnums int2[];
    is_citus boolean := false;
BEGIN
    -- Citus does not execute the history statement on a distributed
    -- table (docs/citus.md); pg_dist_partition exists only with Citus
    IF to_regclass('pg_catalog.pg_dist_partition') IS NOT NULL THEN
        EXECUTE 'SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_dist_partition WHERE logicalrelid = $1)'
           INTO is_citus USING target;
    END IF;
    IF is_citus THEN
        RAISE EXCEPTION 'target % is a Citus table, which mode history does not write', target
            USING ERRCODE = 'feature_not_supported',
                  DETAIL = 'The history statement joins the stored versions with the batch in ways Citus does not execute on a distributed table.',
                  HINT = 'Write the history to a local table on the coordinator, or use mode merge: see docs/citus.md.';
    END IF;
    IF order_column IS NULL THEN
        RAISE EXCEPTION 'mode history needs an order_column'
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Pass order_column => ''event_ts'': its value is where each version starts (_valid_from).';
    END IF;
    IF order_column IN ('_valid_from', '_valid_to', '_is_current', '_deleted', '_fields', '_valid_from_at', '_valid_to_at')
       OR order_column = ANY (key_columns) THEN
        RAISE EXCEPTION 'order column "%" cannot be a key or version column', order_column
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Keep the event''s order value in a column of its own; _valid_from copies it.';
    END IF;
    IF key_columns && ARRAY['_valid_from', '_valid_to', '_is_current', '_deleted', '_fields', '_valid_from_at', '_valid_to_at'] THEN
        RAISE EXCEPTION 'key_columns cannot name a version column'
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'key_columns are the business key; the unique index is on (the key, _valid_from).';
    END IF;
    SELECT format_type(a.atttypid, a.atttypmod) INTO order_type
      FROM pg_attribute a WHERE a.attrelid = target AND a.attname = order_column;
    FOR col IN
        SELECT w.name, w.type, w.required, format_type(a.atttypid, a.atttypmod) AS has_type,
               a.attgenerated <> '' OR a.attidentity = 'a' AS computed
          FROM (VALUES ('_valid_from', order_type, true), ('_valid_to', order_type, true),
                       ('_deleted', 'boolean', true), ('_is_current', 'boolean', false),
                       ('_fields', 'text[]', false), ('_valid_from_at', 'timestamp with time zone', false),
                       ('_valid_to_at', 'timestamp with time zone', false)) AS w(name, type, required)
          LEFT JOIN pg_attribute a ON a.attrelid = target AND a.attname = w.name AND a.attnum > 0
                                  AND NOT a.attisdropped
    LOOP
        IF col.has_type IS NULL AND col.required THEN
            RAISE EXCEPTION 'a history target needs a column % %', col.name, col.type
                USING ERRCODE = 'invalid_table_definition',
                      HINT = format('ALTER TABLE %s ADD COLUMN %I %s (see docs/history.md for the table''s shape).',
                                    target, col.name, col.type);
        END IF;
        IF col.has_type IS NOT NULL AND (col.has_type <> col.type OR col.computed) THEN
            RAISE EXCEPTION 'column % of a history target must be a plain column of type %, not %',
                            col.name, col.type, col.has_type
                USING ERRCODE = 'invalid_table_definition',
                      HINT = format('_valid_from and _valid_to have the order column''s type (%s), _deleted and _is_current boolean, _fields text[], _valid_from_at and _valid_to_at timestamptz.',
                                    order_type);
        END IF;
    END LOOP;
    IF EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = target AND attname = '_valid_to_at' AND NOT attisdropped)
       AND NOT EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = target AND attname = '_valid_from_at' AND NOT attisdropped) THEN
        RAISE EXCEPTION 'a history target with _valid_to_at needs _valid_from_at'
            USING ERRCODE = 'invalid_table_definition',
                  HINT = format('ALTER TABLE %s ADD COLUMN _valid_from_at timestamptz: _valid_to_at is the next version''s.', target);
    END IF;
    SELECT array_agg(attnum ORDER BY attnum) INTO want_attnums
      FROM pg_attribute WHERE attrelid = target AND attname = ANY (key_columns || '_valid_from'::text);
    IF NOT EXISTS (
            SELECT 1 FROM pg_index i
             WHERE i.indrelid = target AND i.indisunique AND i.indisvalid
               AND i.indpred IS NULL AND i.indexprs IS NULL
               AND (SELECT array_agg(x ORDER BY x) FROM unnest(i.indkey::int2[]) x) = want_attnums) THEN
        RAISE EXCEPTION 'a history target needs a unique index on (%, _valid_from)', array_to_string(key_columns, ', ')
            USING ERRCODE = 'invalid_table_definition',
                  HINT = format('CREATE UNIQUE INDEX ON %s (%s, _valid_from): it keeps one row per version and serves point-in-time reads.',
                                target, array_to_string(key_columns, ', '));
    END IF;
END
$$;
COMMENT ON FUNCTION kafka_sink._check_history_target(regclass, text[], text) IS
'Internal: checks a history-mode target: an order column, _valid_from and _valid_to of its type, _deleted boolean, the optional _is_current boolean, _fields text[], _valid_from_at and _valid_to_at timestamptz, and a unique index on (the key columns, _valid_from).';

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
    IF NOT kafka_sink._check_field_path(path, format('column "%s"', col))
       AND NOT kafka_sink._json_path_valid(path) THEN
        RAISE EXCEPTION 'invalid JSON path "%" for column "%"', path, col
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'A path names nested fields with dots, such as "payload.amount"; write \. for a dot within a field name ("a\.b" is the field "a.b").';
    END IF;
END
$$;
COMMENT ON FUNCTION kafka_sink._check_mapping(regclass, text, jsonb, text) IS
'Internal: checks one column mapping (a path, or {"path": ..., "scale": n}) against the target.';

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
    IF delete_on_tombstone IS NULL OR (delete_on_tombstone AND (key_format = 'none' OR mode NOT IN ('merge', 'history'))) THEN
        RAISE EXCEPTION 'delete_on_tombstone needs mode merge or history and a key_format of string or json'
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
        IF schema_version_field = 'kafka.timestamp' THEN
            RAISE EXCEPTION 'kafka.timestamp cannot be the schema_version_field'
                USING ERRCODE = 'invalid_parameter_value',
                      HINT = 'Name a field of the value or a header: schema_version_field => ''headers.schema_version''.';
        END IF;
        IF NOT kafka_sink._check_field_path(schema_version_field, 'schema_version_field')
           AND NOT kafka_sink._json_path_valid(schema_version_field) THEN
            RAISE EXCEPTION 'invalid JSON path "%" for schema_version_field', schema_version_field
                USING ERRCODE = 'invalid_parameter_value',
                      HINT = 'A path names nested fields with dots; write \. for a dot within a field name.';
        END IF;
    END IF;
    IF event_id = 'kafka.timestamp' THEN
        RAISE EXCEPTION 'kafka.timestamp cannot be the event_id'
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Name a field of the value or a header holding the producer''s event id: event_id => ''headers.event_id''.';
    END IF;
    IF event_id IS NOT NULL AND NOT kafka_sink._check_field_path(event_id, 'event_id')
       AND NOT kafka_sink._json_path_valid(event_id) THEN
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
COMMENT ON FUNCTION kafka_sink._check_contract(regclass, text[], jsonb, text, boolean, text, jsonb, text, text) IS
'Internal: checks the data contract''s options: column mappings, key format, tombstones, schema versions, event ids and the key index.';

-- The unique index a merge pipeline keys on (the one the worker picks:
-- over exactly the key columns, the primary key first) must be a btree
-- whose equality operators have hash support: the worker reduces a batch
-- by hashing keys with the index's equality and collation.
CREATE OR REPLACE FUNCTION kafka_sink._check_key_index(target regclass, key_columns text[])
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
COMMENT ON FUNCTION kafka_sink._check_batch_function(regprocedure, regclass) IS
'Internal: checks a function-mode pipeline''s batch function: a plain function of the user''s taking (bigint, rows[]), executable by the caller.';

-- Stores options: secret values go to kafka_sink.secrets, the rest is
-- returned.  A secret given by reference ({"env": ...}, {"file": ...},
-- checked by _check_kafka_options) is no secret itself: it stays in the
-- definition, where the worker finds it.
CREATE OR REPLACE FUNCTION kafka_sink._split_secrets(p_pipeline_id bigint, options jsonb)
RETURNS jsonb
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    k text;
    v jsonb;
    plain jsonb := '{}';
BEGIN
    FOR k, v IN SELECT * FROM jsonb_each(options) LOOP
        IF jsonb_typeof(v) = 'object' THEN
            plain := plain || jsonb_build_object(k, v);
        ELSIF kafka_sink._is_secret_option(k) THEN
            INSERT INTO kafka_sink.secrets AS s (pipeline_id, name, value)
            VALUES (p_pipeline_id, k, v #>> '{}')
            ON CONFLICT (pipeline_id, name) DO UPDATE SET value = excluded.value;
        ELSE
            plain := plain || jsonb_build_object(k, v #>> '{}');
        END IF;
    END LOOP;
    RETURN plain;
END
$$;

-- Creates the bronze table if absent (as the caller), or checks that an
COMMENT ON FUNCTION kafka_sink._split_secrets(bigint, jsonb) IS
'Internal: stores the secret kafka_options of a pipeline in kafka_sink.secrets and returns the others (a secret given by reference among them: the reference is no secret).';

-- existing one has the standard columns.  Returns it.
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
        -- No unique key: the worker checks once per batch and partition
        -- which offsets the table holds (under a lock per partition) and
        -- lands the others.  The narrow index on (partition, "offset")
        -- serves that check and lineage's look-ups at well under the cost
        -- per row of the (partition, "offset", topic) primary key of
        -- earlier versions, which tables made by them keep and which works
        -- as well (docs/design/apply.md, docs/performance.md).
        EXECUTE format('CREATE TABLE %I.%I (
                            topic      text COLLATE "C" NOT NULL,
                            partition  integer NOT NULL,
                            "offset"   bigint NOT NULL,
                            ts         timestamptz,
                            key        bytea,
                            value      bytea,
                            headers    jsonb,
                            batch_id   bigint NOT NULL,
                            landed_at  timestamptz NOT NULL DEFAULT now());
                        CREATE INDEX ON %I.%I (partition, "offset")', parsed[1], parsed[2], parsed[1], parsed[2]);
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
COMMENT ON FUNCTION kafka_sink._bronze_table(text) IS
'Internal: creates a pipeline''s bronze table (as the caller) or checks an existing one; returns it.';

-- The limits of a pipeline's batching, as the pipeline will have them:
-- create_pipeline passes its arguments, alter_pipeline each new value or
-- the current one.  The one place these errors are raised; the table's
-- CHECKs stay as the catalog's own invariant (for a superuser's direct
-- write).
CREATE OR REPLACE FUNCTION kafka_sink._check_limits(max_offsets_per_batch bigint, max_batch_bytes bigint,
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

-- Whether kafka_sink.outbox_bootstrap_servers is set (a superuser-only
-- setting: its value may name internal hosts, so only this is told).
CREATE OR REPLACE FUNCTION kafka_sink._outbox_relay_configured()
RETURNS boolean
LANGUAGE sql STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT coalesce(current_setting('kafka_sink.outbox_bootstrap_servers', true), '') <> ''
$$;
COMMENT ON FUNCTION kafka_sink._outbox_relay_configured() IS
    'Internal: whether kafka_sink.outbox_bootstrap_servers is set, so that the outbox relay runs';


-- A dead-letter topic: a valid Kafka topic name, for a pipeline that can
-- quarantine (it has a target), and none of the topics it reads (whether or
-- not the outbox cluster is the pipeline's: a topic read back would
-- quarantine its own dead letters again, forever).  A topic that leads
-- back to the pipeline through the dead-letter topics of the other
-- pipelines the caller sees (one reads it and sends its dead letters to a
-- topic this one reads, or further round) is a loop: a warning, since the
-- clusters may differ and the hop count (src/kafka/hops.c) ends it anyway after
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


-- The formats of create_pipeline and alter_pipeline (issue 15), checked
-- together: value_format, key_format avro, value_schema, schema_registry.
CREATE OR REPLACE FUNCTION kafka_sink._check_formats(value_format text, key_format text, value_schema text,
                                          schema_registry jsonb)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF value_format IS NULL OR value_format NOT IN ('json', 'avro', 'json_schema', 'protobuf', 'registry') THEN
        RAISE EXCEPTION 'invalid value_format "%"', value_format
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'value_format is ''json'', ''avro'', ''json_schema'', ''protobuf'' or ''registry'' (each schema id''s type in the registry chooses).';
    END IF;
    IF key_format IN ('avro', 'protobuf') AND schema_registry IS NULL THEN
        RAISE EXCEPTION 'key_format % needs a schema_registry', key_format
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Avro and Protobuf keys are read in Confluent''s wire format: pass schema_registry => ''{"url": "http://registry:8081"}''.';
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
CREATE OR REPLACE FUNCTION kafka_sink._set_schema_registry(p_pipeline_id bigint, registry jsonb)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    k text;
    v jsonb;
    plain jsonb := '{}';
BEGIN
    DELETE FROM kafka_sink.secrets s WHERE s.pipeline_id = p_pipeline_id AND s.name LIKE 'schema\_registry.%';
    IF registry IS NOT NULL THEN
        FOR k, v IN SELECT * FROM jsonb_each(jsonb_strip_nulls(registry)) LOOP
            -- a secret by reference stays in the definition (as _split_secrets)
            IF jsonb_typeof(v) = 'object' THEN
                plain := plain || jsonb_build_object(k, v);
            ELSIF kafka_sink._is_secret_registry_option(k) THEN
                INSERT INTO kafka_sink.secrets AS s (pipeline_id, name, value)
                VALUES (p_pipeline_id, 'schema_registry.' || k, v #>> '{}');
            ELSE
                plain := plain || jsonb_build_object(k, v #>> '{}');
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
CREATE OR REPLACE FUNCTION kafka_sink._alter_formats(p kafka_sink.pipeline_definitions, new_value_format text,
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
       AND NOT (new_key_format IN ('json', 'avro', 'protobuf') AND p.key_format IN ('json', 'avro', 'protobuf')) THEN
        RAISE EXCEPTION 'key_format can only change between json, avro and protobuf'
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

-- envelope and on_truncate (issue 16).  envelope => 'debezium' needs a
-- merge target whose order column takes the source position: a numeric
-- column, _kafka_source_position unless order_column names another one.
-- Returns the order column the pipeline gets.  The worker checks the same
-- again when it opens the target (target.c).
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
        -- history's commit-time columns (docs/history.md, "Reading by time")
        IF mode = 'history' AND EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = target AND attnum > 0
                                          AND NOT attisdropped AND attname IN ('_valid_from_at', '_valid_to_at')) THEN
            RAISE EXCEPTION 'history target % has _valid_from_at or _valid_to_at, which only change events fill', target
                USING ERRCODE = 'invalid_table_definition',
                      HINT = 'They keep a change event''s commit time (envelope debezium); with a timestamptz order column _valid_from is the time already: drop them (see docs/history.md).';
        END IF;
        RETURN order_column;
    END IF;
    IF mode IS NULL OR mode NOT IN ('merge', 'history') THEN
        RAISE EXCEPTION 'envelope debezium needs a target in mode merge or history'
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Change events are applied by key: pass target => ''schema.table'' and mode => ''merge''.';
    END IF;
    -- history: a truncate's delete of a version can be removed again (docs/history.md)
    IF mode = 'history' AND on_truncate = 'apply' AND target IS NOT NULL AND NOT has_table_privilege(target, 'DELETE') THEN
        RAISE EXCEPTION 'permission denied for table %', target
            USING ERRCODE = 'insufficient_privilege',
                  DETAIL = 'A history pipeline applying truncates deletes the versions a truncate no longer ends.',
                  HINT = 'Grant DELETE on the table to the pipeline''s owner, or pass on_truncate => ''ignore'' or ''fail''.';
    END IF;
    IF value_format IS NULL OR value_format NOT IN ('json', 'avro', 'json_schema') THEN
        RAISE EXCEPTION 'envelope debezium supports value_format json, avro and json_schema only'
            USING ERRCODE = 'feature_not_supported',
                  HINT = 'Use Kafka Connect''s JsonConverter (with or without schemas.enable), Confluent''s AvroConverter (value_format avro with a schema_registry) or its JsonSchemaConverter (value_format json_schema with a schema_registry).';
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
COMMENT ON FUNCTION kafka_sink._check_envelope(text, text, regclass, text, text, text) IS
'Internal: checks envelope and on_truncate; for envelope debezium returns the order column taking the source position (_kafka_source_position by default), which must be a numeric column of the target.';

-- envelope debezium (issue 25): the connector's unavailable.value.placeholder,
-- when it is not Debezium's default.  NULL is the default.
CREATE OR REPLACE FUNCTION kafka_sink._check_unavailable_placeholder(placeholder text, envelope text)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF placeholder IS NULL THEN
        RETURN;
    END IF;
    IF envelope IS DISTINCT FROM 'debezium' THEN
        RAISE EXCEPTION 'unavailable_value_placeholder needs envelope debezium'
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Only Debezium change events carry the placeholder; pass envelope => ''debezium'' as well.';
    END IF;
    IF placeholder = '' OR length(placeholder) > 1024 THEN
        RAISE EXCEPTION 'unavailable_value_placeholder must be between 1 and 1024 characters'
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Pass the connector''s unavailable.value.placeholder exactly as it is configured.';
    END IF;
END
$$;
COMMENT ON FUNCTION kafka_sink._check_unavailable_placeholder(text, text) IS
'Internal: checks unavailable_value_placeholder (the connector''s unavailable.value.placeholder): envelope debezium, 1 to 1024 characters.';

-- delete_mode (issue 26, docs/soft-deletes.md): soft keeps a deleted row of
-- a merge-mode target, marked in _deleted boolean and/or _deleted_at
-- timestamptz (target.c reads the same columns when the worker opens it).
CREATE OR REPLACE FUNCTION kafka_sink._check_delete_mode(delete_mode text, mode text, target regclass,
                                                         routed boolean, envelope text,
                                                         delete_on_tombstone boolean)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    col record;
    marks integer := 0;
BEGIN
    IF delete_mode IS NULL OR delete_mode NOT IN ('hard', 'soft') THEN
        RAISE EXCEPTION 'invalid delete_mode "%"', delete_mode
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'delete_mode is ''hard'' (a delete removes the row, the default) or ''soft'' (it marks the row).';
    END IF;
    IF delete_mode = 'hard' THEN
        RETURN;
    END IF;
    IF mode IS DISTINCT FROM 'merge' THEN
        RAISE EXCEPTION 'delete_mode soft needs mode merge'
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Mode history marks deletes in its own _deleted column; append and function modes delete nothing.';
    END IF;
    IF target IS NULL AND NOT routed THEN
        RAISE EXCEPTION 'delete_mode soft needs a target table'
            USING ERRCODE = 'feature_not_supported',
                  HINT = 'A bronze-only pipeline keeps every message in its bronze table: it deletes nothing.';
    END IF;
    IF envelope IS DISTINCT FROM 'debezium' AND NOT coalesce(delete_on_tombstone, false) THEN
        RAISE EXCEPTION 'delete_mode soft needs deletes: delete_on_tombstone or envelope debezium'
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Pass delete_on_tombstone => true (with a key_format) so that tombstones mark rows deleted.';
    END IF;
    -- routed: the pipeline's own target (if any) now, and each routed
    -- table here when the worker opens it (route.c, with that table as
    -- target); a table without its marks is quarantined as target_refused,
    -- replayable once it has them
    IF target IS NULL THEN
        RETURN;
    END IF;
    FOR col IN
        SELECT a.attname::text AS name, a.atttypid, format_type(a.atttypid, a.atttypmod) AS type,
               a.attgenerated <> '' AS generated,
               CASE a.attname WHEN '_deleted' THEN 'boolean'::regtype ELSE 'timestamptz'::regtype END AS wanted
          FROM pg_attribute a
         WHERE a.attrelid = target AND a.attnum > 0 AND NOT a.attisdropped
           AND a.attname IN ('_deleted', '_deleted_at')
    LOOP
        IF col.generated OR col.atttypid <> col.wanted THEN
            RAISE EXCEPTION 'column % of a soft-delete target must be a plain column of type %, not %',
                            col.name, col.wanted, CASE WHEN col.generated THEN 'a generated ' ELSE '' END || col.type
                USING ERRCODE = 'invalid_table_definition',
                      HINT = CASE WHEN col.generated
                                  THEN format('ALTER TABLE %s ALTER COLUMN %I DROP EXPRESSION: kafka_sink writes the mark.', target, col.name)
                                  ELSE format('ALTER TABLE %s ALTER COLUMN %I TYPE %s.', target, col.name, col.wanted) END;
        END IF;
        marks := marks + 1;
    END LOOP;
    IF marks = 0 THEN
        RAISE EXCEPTION 'delete_mode soft needs a column _deleted boolean or _deleted_at timestamptz in %', target
            USING ERRCODE = 'invalid_table_definition',
                  HINT = format('ALTER TABLE %s ADD COLUMN _deleted boolean NOT NULL DEFAULT false, ADD COLUMN _deleted_at timestamptz (either one will do).', target);
    END IF;
END
$$;
COMMENT ON FUNCTION kafka_sink._check_delete_mode(text, text, regclass, boolean, text, boolean) IS
'Internal: checks delete_mode: hard or soft; soft needs mode merge, a target (or routing: each routed table is checked as the worker opens it) with a plain _deleted boolean and/or _deleted_at timestamptz column, and deletes (delete_on_tombstone or envelope debezium).';

-- write_mode (issue 26, docs/write-modes.md): upsert, insert_only or
-- update_only, for a merge pipeline (one target, or each routed table);
-- insert_only keeps immutable facts, which are never deleted.
CREATE OR REPLACE FUNCTION kafka_sink._check_write_mode(write_mode text, mode text, routed boolean,
                                                        envelope text, delete_on_tombstone boolean,
                                                        delete_mode text)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF write_mode IS NULL OR write_mode NOT IN ('upsert', 'insert_only', 'update_only') THEN
        RAISE EXCEPTION 'invalid write_mode "%"', write_mode
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'write_mode is ''upsert'' (the default), ''insert_only'' (the first event of a key wins) or ''update_only'' (keys not in the target are skipped).';
    END IF;
    IF write_mode = 'upsert' THEN
        RETURN;
    END IF;
    IF mode IS DISTINCT FROM 'merge' THEN
        RAISE EXCEPTION 'write_mode % needs mode merge', write_mode
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Append, function and history modes do not upsert: leave write_mode at ''upsert''.';
    END IF;
    IF write_mode = 'insert_only' AND (envelope IS NOT DISTINCT FROM 'debezium'
                                      OR coalesce(delete_on_tombstone, false)
                                      OR delete_mode IS NOT DISTINCT FROM 'soft') THEN
        RAISE EXCEPTION 'write_mode insert_only takes no deletes'
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'insert_only keeps immutable facts, which are not deleted: leave delete_on_tombstone false, envelope plain and delete_mode hard, or use write_mode upsert.';
    END IF;
END
$$;
COMMENT ON FUNCTION kafka_sink._check_write_mode(text, text, boolean, text, boolean, text) IS
'Internal: checks write_mode: upsert, insert_only or update_only; the last two need mode merge; insert_only takes no deletes (delete_on_tombstone, envelope debezium, delete_mode soft).';

-- The routed tables of a pipeline that exist now: each one its targets map
-- names, and each one its template names for a subscribed topic (when the
-- template reads only the topic: _template_target).  create_pipeline and
-- alter_pipeline check them (filter, computed, delete_mode soft) as the
-- worker checks every routed table where it first uses it in a batch.
CREATE OR REPLACE FUNCTION kafka_sink._routed_tables(template text, targets jsonb, subscribe text[])
RETURNS SETOF regclass
LANGUAGE sql
STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT DISTINCT to_regclass(n.name)
      FROM (SELECT m.value AS name
              FROM jsonb_each_text(CASE jsonb_typeof(targets) WHEN 'object' THEN targets ELSE '{}' END) m
            UNION
            SELECT kafka_sink._template_target(template, t)
              FROM unnest(subscribe) t WHERE template IS NOT NULL) n
     WHERE n.name IS NOT NULL AND to_regclass(n.name) IS NOT NULL
     ORDER BY 1
$$;
COMMENT ON FUNCTION kafka_sink._routed_tables(text, jsonb, text[]) IS
'Internal: the tables a routed pipeline writes that exist now: those its targets map names, and those its template names for a subscribed topic when it reads only the topic.';

-- track_history_columns (mode history, docs/history.md): data columns of
-- the target (not a key, the order column, a version or lineage column),
-- and the target keeps each version's states in _states jsonb (without
-- _fields: a state keeps its own).
CREATE OR REPLACE FUNCTION kafka_sink._check_track_history(track text[], mode text, target regclass,
                                                          key_columns text[], order_column text)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    c text;
BEGIN
    IF track IS NULL THEN
        RETURN;
    END IF;
    IF mode IS DISTINCT FROM 'history' OR target IS NULL THEN
        RAISE EXCEPTION 'track_history_columns needs mode history and one target'
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Leave track_history_columns NULL, or create a history pipeline with target => ''schema.table''.';
    END IF;
    IF cardinality(track) = 0 OR array_position(track, NULL) IS NOT NULL THEN
        RAISE EXCEPTION 'track_history_columns cannot be empty or hold NULL'
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Name the columns whose change starts a new version, or leave it NULL to track every column.';
    END IF;
    FOREACH c IN ARRAY track LOOP
        IF NOT EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = target AND a.attname = c
                          AND a.attnum > 0 AND NOT a.attisdropped)
           OR c = ANY (key_columns) OR c = order_column OR c LIKE '\_kafka\_%'
           OR c IN ('_valid_from', '_valid_to', '_deleted', '_is_current', '_fields', '_states', '_valid_from_at', '_valid_to_at') THEN
            RAISE EXCEPTION 'track_history_columns names "%", which is not a data column of %', c, target
                USING ERRCODE = 'invalid_parameter_value',
                      HINT = 'Name columns of the target that events carry, other than the key and the order column.';
        END IF;
    END LOOP;
    IF NOT EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = target AND a.attname = '_states'
                      AND a.atttypid = 'jsonb'::regtype AND NOT a.attisdropped
                      AND a.attgenerated = '') THEN
        RAISE EXCEPTION 'a history target with track_history_columns needs a column _states jsonb'
            USING ERRCODE = 'invalid_table_definition',
                  HINT = format('ALTER TABLE %s ADD COLUMN _states jsonb: it keeps the states a version went through (see docs/history.md).', target);
    END IF;
    IF EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = target AND a.attname = '_fields'
                  AND NOT a.attisdropped) THEN
        RAISE EXCEPTION 'a history target with track_history_columns has no _fields column'
            USING ERRCODE = 'invalid_table_definition',
                  HINT = format('ALTER TABLE %s DROP COLUMN _fields: each state in _states keeps the fields its messages carried.', target);
    END IF;
END
$$;
COMMENT ON FUNCTION kafka_sink._check_track_history(text[], text, regclass, text[], text) IS
'Internal: checks track_history_columns: mode history with one target, data columns of it, a _states jsonb column and no _fields.';

-- Routing (issue 16): a target template, the targets map, create_targets
-- and evolve, as create_pipeline gets them.  The worker parses and checks
-- them again where it uses them (route.c); each routed table is checked
-- with kafka_sink._check_target when the worker first writes it.
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
    -- mode history routes change events only (create_pipeline): each
    -- table's shape is checked as the worker opens it, create_targets
    -- makes it with the version columns (_create_target)
    IF mode = 'function' THEN
        RAISE EXCEPTION 'mode % cannot route to many targets', mode
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
COMMENT ON FUNCTION kafka_sink._check_routing(text, jsonb, boolean, text, text, text) IS
'Internal: raises unless a pipeline''s routing options (target template, targets map, create_targets, evolve) are well-formed.';

-- create_targets and evolve (issue 16): the column type of a field of a
-- Kafka Connect schema (JsonConverter's embedded {"schema", "payload"}),
-- Debezium's and Connect's semantic types first.  Only these type names
-- reach DDL: nothing of the message is spliced but quoted identifiers and
-- checked integers.
CREATE OR REPLACE FUNCTION kafka_sink._connect_type(field jsonb)
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
CREATE OR REPLACE FUNCTION kafka_sink._row_schema(value_schema jsonb)
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

-- create_targets and evolve (issue 23): whether a column a message's
-- schema asks for may be made.  Never one of the pipeline's own names,
-- however the field spells it (case, double quotes, blanks): the lineage
-- columns and the source position (every name beginning with _kafka_),
-- the names reserved for soft deletes and history, a variant of a key or
-- order column (pipeline_columns); never a name PostgreSQL would cut to
-- NAMEDATALEN - 1 bytes (it could become one of those).  NULL when the
-- column may be made, else why not.
CREATE OR REPLACE FUNCTION kafka_sink._refused_column_name(n text, pipeline_columns text[])
RETURNS text
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    norm text := lower(regexp_replace(n, '["[:space:]]', '', 'g'));
    pc text;
BEGIN
    IF n IS NULL OR n = '' THEN
        RETURN 'The embedded schema has a field without a name.';
    END IF;
    IF octet_length(n) >= 64 THEN
        RETURN format('Field %s is longer than 63 bytes: PostgreSQL would cut it into another name.',
                      quote_literal(left(n, 80)));
    END IF;
    IF norm LIKE '\_kafka\_%' THEN
        RETURN format('Field %s would make column %I: names beginning with _kafka_ are the pipeline''s own (lineage columns, the source position).',
                      quote_literal(n), n);
    END IF;
    IF norm IN ('_deleted', '_deleted_at', '_valid_from', '_valid_to', '_is_current', '_valid_from_at', '_valid_to_at') THEN
        RETURN format('Field %s would make column %I: %s is reserved for soft deletes and history.',
                      quote_literal(n), n, norm);
    END IF;
    FOREACH pc IN ARRAY coalesce(pipeline_columns, '{}') LOOP
        IF pc IS DISTINCT FROM n AND lower(regexp_replace(pc, '["[:space:]]', '', 'g')) = norm THEN
            RETURN format('Field %s would make column %I, which differs only by case or quotes from column %I that the pipeline keys or orders by.',
                          quote_literal(n), n, pc);
        END IF;
    END LOOP;
    RETURN NULL;
END
$$;
COMMENT ON FUNCTION kafka_sink._refused_column_name(text, text[]) IS
'Internal (create_targets, evolve): NULL when a column of that name may be made from a message''s schema, else why not (the pipeline''s own names, reserved names, variants of the key or order columns, names longer than 63 bytes).';

-- create_targets: creates schema_name.table_name as the caller (the
-- pipeline's owner, in the batch's transaction) from a message's embedded
-- schema; the key is the message key's fields (its embedded schema, or the
-- fields of a JSON object key), else key_columns.  Returns NULL when it
-- created the table, else why it cannot (no schema, no key: the message is
-- quarantined as no_target).  Raises when the schema asks for columns the
-- pipeline will not make (kafka_sink._refused_column_name, more than 1600;
-- the worker quarantines that message as schema_change_refused) and when
-- the owner may not create there.
CREATE OR REPLACE FUNCTION kafka_sink._create_target(schema_name text, table_name text, value text, msg_key text,
                                          key_columns text[], mode text, delete_mode text DEFAULT 'hard')
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
    why text;
    -- columns of the pipeline's own
    own int := CASE WHEN mode = 'history' THEN 7 WHEN delete_mode = 'soft' THEN 2 ELSE 1 END;
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
    IF keys IS NULL AND mode IN ('merge', 'history') THEN
        RETURN 'The message key is not a JSON object naming the key fields, and the pipeline has no key_columns: the target''s primary key is unknown.';
    END IF;
    -- the message's schema asks for columns the pipeline will not make:
    -- raised, so that the message is quarantined as schema_change_refused
    FOR f IN SELECT x FROM jsonb_array_elements(s->'fields') x LOOP
        n := f->>'field';
        why := coalesce(kafka_sink._refused_column_name(n, keys),
                        CASE WHEN n = ANY (names) THEN format('Field %s appears twice in the embedded schema.', quote_literal(n)) END);
        IF why IS NOT NULL THEN
            RAISE EXCEPTION 'the embedded schema cannot make table %.%', quote_ident(schema_name), quote_ident(table_name)
                USING ERRCODE = 'invalid_column_definition', DETAIL = why;
        END IF;
        names := names || n;
        cols := cols || format('%I %s', n, kafka_sink._connect_type(f));
    END LOOP;
    IF cardinality(cols) = 0 THEN
        RETURN 'The embedded schema has no fields.';
    END IF;
    IF cardinality(cols) + own > 1600 THEN
        RAISE EXCEPTION 'the embedded schema cannot make table %.%', quote_ident(schema_name), quote_ident(table_name)
            USING ERRCODE = 'too_many_columns',
                  DETAIL = format('It has %s fields; with _kafka_source_position%s a table has at most 1600 columns.', cardinality(cols),
                                  CASE WHEN mode = 'history' THEN ' and the version columns'
                                       WHEN delete_mode = 'soft' THEN ' and _deleted_at' ELSE '' END);
    END IF;
    IF keys IS NOT NULL AND EXISTS (SELECT 1 FROM unnest(keys) x WHERE x IS NULL OR NOT x = ANY (names)) THEN
        RETURN format('The key fields %s are not all fields of the value''s schema.', keys);
    END IF;
    cols := cols || '_kafka_source_position numeric'::text;
    IF delete_mode = 'soft' THEN
        -- docs/soft-deletes.md: a delete marks the row with its time
        cols := cols || '_deleted_at timestamptz'::text;
    END IF;
    IF mode = 'history' THEN
        -- docs/history.md: versions by source position, keyed on (key,
        -- _valid_from), with their commit times (reading by time)
        cols := cols || ARRAY['_valid_from numeric NOT NULL', '_valid_to numeric',
                              '_deleted boolean NOT NULL DEFAULT false', '_is_current boolean',
                              '_valid_from_at timestamptz', '_valid_to_at timestamptz'];
        keys := keys || '_valid_from'::text;
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
COMMENT ON FUNCTION kafka_sink._create_target(text, text, text, text, text[], text, text) IS
'Internal (create_targets): creates a missing routed target as the caller from a message''s embedded schema, keyed on the message key''s fields, with _deleted_at timestamptz for delete_mode soft; returns NULL, or why it cannot.';

-- evolve => 'add_columns': whether a field whose type the column takes
-- (same type, or an implicit cast) still does not fit the column's
-- typmod: a Decimal's precision/scale beyond numeric(p,s), a time or
-- timestamp precision beyond the column's, a string longer than
-- varchar(n)/char(n) (Debezium's __debezium.source.column.length, sent
-- with column.propagate.source.type).  Only what the schema states is
-- compared: a field without a stated precision or length is taken, as
-- before (a value that does not fit is then the row's own error).
-- Evolve never alters a column, so a wider field is refused, not widened.
CREATE OR REPLACE FUNCTION kafka_sink._typmod_loses(field jsonb, want text, have_type oid, have_mod integer)
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
CREATE OR REPLACE FUNCTION kafka_sink._connect_type_shown(field jsonb, want text)
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
-- embedded schema the target lacks, all in one ALTER TABLE, or none.
-- Never drops or narrows: a field whose type is neither the column's nor
-- implicitly cast to it is refused (for a key or order column: neither its
-- own type nor a narrower integer); so is a new column the pipeline will
-- not make (kafka_sink._refused_column_name, with the key columns, by
-- default the primary key, and the order column), more than
-- max_new_columns new columns (kafka_sink.max_new_columns) or more than a
-- table's 1600 (dropped columns count).  Returns NULL when the target
-- takes the schema (after adding columns), else why not (the messages with
-- that schema are quarantined as schema_change_refused).  add false: only
-- checks.
CREATE OR REPLACE FUNCTION kafka_sink._evolve_target(target regclass, value_schema text, add boolean,
                                          key_columns text[] DEFAULT NULL, order_column text DEFAULT NULL,
                                          max_new_columns integer DEFAULT 100)
RETURNS text
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    s jsonb;
    f jsonb;
    n text;
    why text;
    want text;
    want_oid oid;
    have pg_attribute;
    names text[] := '{}';
    adds text[] := '{}';
    pcols text[];
    natts integer;
BEGIN
    BEGIN
        s := kafka_sink._row_schema(value_schema::jsonb);
    EXCEPTION WHEN invalid_text_representation THEN
        s := NULL;
    END;
    IF s IS NULL THEN
        RETURN NULL;            -- no embedded schema: nothing to evolve
    END IF;
    pcols := coalesce(key_columns,
                      (SELECT array_agg(a.attname::text) FROM pg_index i
                         JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY (i.indkey)
                        WHERE i.indrelid = target AND i.indisprimary), '{}')
             || CASE WHEN order_column IS NOT NULL THEN ARRAY[order_column] ELSE '{}' END;
    FOR f IN SELECT x FROM jsonb_array_elements(s->'fields') x LOOP
        n := f->>'field';
        IF n = ANY (names) THEN
            RETURN format('Field %s appears twice in the embedded schema.', quote_literal(n));
        END IF;
        names := names || n;
        want := kafka_sink._connect_type(f);
        want_oid := want::regtype;
        SELECT * INTO have FROM pg_attribute WHERE attrelid = target AND attname = n AND attnum > 0 AND NOT attisdropped;
        IF NOT FOUND THEN
            why := kafka_sink._refused_column_name(n, pcols);
            IF why IS NOT NULL THEN
                RETURN why;
            END IF;
            -- IF NOT EXISTS: another worker's batch may add it first
            adds := adds || format('ADD COLUMN IF NOT EXISTS %I %s', n, want);
        ELSIF have.atttypid <> want_oid
              AND NOT EXISTS (SELECT 1 FROM pg_cast c WHERE c.castsource = want_oid AND c.casttarget = have.atttypid
                                 AND c.castcontext = 'i') THEN
            RETURN format('Field %I is now %s, which column %I of %s (%s) does not take: evolve never narrows or changes a column.',
                          n, want, n, target, format_type(have.atttypid, have.atttypmod));
        -- a key or order column takes its own type or a wider exact number:
        -- an implicit cast into float, or of a date into a timestamp (a
        -- time zone's), would change what equal and newer mean
        ELSIF n = ANY (pcols) AND have.atttypid <> want_oid
              AND NOT ((want_oid = 'int2'::regtype AND have.atttypid IN ('int4'::regtype, 'int8'::regtype, 'numeric'::regtype))
                       OR (want_oid = 'int4'::regtype AND have.atttypid IN ('int8'::regtype, 'numeric'::regtype))
                       OR (want_oid = 'int8'::regtype AND have.atttypid = 'numeric'::regtype)) THEN
            RETURN format('Field %I is now %s; column %I of %s (%s) is one the pipeline keys or orders by, which takes only its own type or a narrower integer.',
                          n, want, n, target, format_type(have.atttypid, have.atttypmod));
        ELSIF kafka_sink._typmod_loses(f, want, have.atttypid, have.atttypmod) THEN
            RETURN format('Field %I is now %s, wider than column %I of %s (%s): evolve never widens or changes a column.',
                          n, kafka_sink._connect_type_shown(f, want), n, target, format_type(have.atttypid, have.atttypmod));
        END IF;
    END LOOP;
    IF cardinality(adds) = 0 THEN
        RETURN NULL;
    END IF;
    IF cardinality(adds) > max_new_columns THEN
        RETURN format('The embedded schema adds %s columns to %s; evolve adds at most %s for one message (kafka_sink.max_new_columns).',
                      cardinality(adds), target, max_new_columns);
    END IF;
    SELECT count(*) INTO natts FROM pg_attribute WHERE attrelid = target AND attnum > 0;
    IF natts + cardinality(adds) > 1600 THEN
        RETURN format('The embedded schema adds %s columns to %s, which has %s (dropped ones included): a table has at most 1600.',
                      cardinality(adds), target, natts);
    END IF;
    IF add THEN
        EXECUTE format('ALTER TABLE %s %s', target, array_to_string(adds, ', '));
    END IF;
    RETURN NULL;
END
$$;
COMMENT ON FUNCTION kafka_sink._evolve_target(regclass, text, boolean, text[], text, integer) IS
'Internal (evolve => add_columns): adds a nullable column for each new field of an embedded schema, all or none; returns NULL, or why a change is refused.';
