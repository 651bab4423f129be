-- kafka_sink 0.1.0 -> 0.2.0
--
-- Every change to the catalog, views and SQL API since 0.1.0, in order.
-- The install script of 0.2.0 is built by the Makefile as the 0.1.0 script
-- followed by this one (as pg_cron keeps a base script plus updates), so a
-- fresh install and an upgrade run the same statements; test/e2e/upgrade.sh
-- checks that they end in the same schema.

\echo Use "ALTER EXTENSION kafka_sink UPDATE TO '0.2.0'" to load this file. \quit

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
