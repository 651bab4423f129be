-- security_hijack.sql: objects that shadow what kafka_sink uses, for
-- test/e2e/security.sh.  Run as the (non-superuser) owner of schema
-- ks_hijack, which is put first on the owner's search_path, before
-- pg_catalog.  Every object calls ks_hijack.trap(), which bumps a sequence
-- (not transactional: a rolled back call still counts), records who called
-- it in ks_hijack.pwned and writes KS_HIJACK_CALLED to the server log.
SET client_min_messages = warning;
CREATE SEQUENCE ks_hijack.pwned_seq;
CREATE TABLE ks_hijack.pwned (at timestamptz DEFAULT pg_catalog.clock_timestamp(), what text,
                              by_user name, session_user_ name, app text, pid int, query text);
GRANT USAGE ON SCHEMA ks_hijack TO PUBLIC;
GRANT INSERT ON ks_hijack.pwned TO PUBLIC;
GRANT USAGE, UPDATE ON SEQUENCE ks_hijack.pwned_seq TO PUBLIC;
CREATE FUNCTION ks_hijack.trap(what text) RETURNS boolean LANGUAGE plpgsql SET search_path = pg_catalog AS $$
BEGIN
    PERFORM pg_catalog.nextval('ks_hijack.pwned_seq');
    INSERT INTO ks_hijack.pwned (what, by_user, session_user_, app, pid, query)
    VALUES (what, current_user, session_user, current_setting('application_name'), pg_backend_pid(),
            left(current_query(), 200));
    RAISE LOG 'KS_HIJACK_CALLED % by % (session %)', what, current_user, session_user;
    RETURN true;
END $$;
-- a trapping operator for every binary operator of pg_catalog on the common
-- types, and a trapping function for every overload of the functions
-- kafka_sink's SQL uses (those plpgsql can wrap)
DO $gen$
DECLARE
    r record;
    n int := 0;
    body text;
    args text;
BEGIN
    -- operators
    FOR r IN SELECT o.oprname, o.oprleft::regtype AS l, o.oprright::regtype AS rt, o.oprresult::regtype AS res,
                    o.oprcode::oid AS fn
               FROM pg_catalog.pg_operator o
              WHERE o.oprnamespace = 'pg_catalog'::regnamespace
                AND o.oprname IN ('=', '<>', '<', '<=', '>', '>=', '+', '-', '||', '~', '!~', '->', '->>', '#>', '#>>', '?', '@>')
                AND o.oprleft IN ('int2'::regtype, 'int4'::regtype, 'int8'::regtype, 'text'::regtype, 'name'::regtype,
                                  'oid'::regtype, 'jsonb'::regtype, 'timestamptz'::regtype, 'bool'::regtype,
                                  'interval'::regtype, 'numeric'::regtype, 'bytea'::regtype, '"char"'::regtype)
                AND o.oprright <> 0 AND o.oprkind = 'b'
    LOOP
        EXECUTE pg_catalog.format(
            'CREATE FUNCTION ks_hijack.op_%s(%s, %s) RETURNS %s LANGUAGE plpgsql SET search_path = pg_catalog AS $f$ BEGIN PERFORM ks_hijack.trap(%L); RETURN %s($1, $2); END $f$',
            n, r.l, r.rt, r.res, pg_catalog.format('operator %s(%s,%s)', r.oprname, r.l, r.rt), r.fn::regproc);
        EXECUTE pg_catalog.format('CREATE OPERATOR ks_hijack.%s (LEFTARG = %s, RIGHTARG = %s, FUNCTION = ks_hijack.op_%s)',
                                  r.oprname, r.l, r.rt, n);
        n := n + 1;
    END LOOP;
    n := 0;
    -- functions: every overload of these names that plpgsql can wrap
    FOR r IN SELECT p.oid, p.proname, p.proretset,
                    pg_catalog.pg_get_function_arguments(p.oid) AS args,
                    pg_catalog.pg_get_function_result(p.oid) AS res,
                    p.pronargs
               FROM pg_catalog.pg_proc p
              WHERE p.pronamespace = 'pg_catalog'::regnamespace AND p.prokind = 'f'
                AND p.proname IN ('now', 'clock_timestamp', 'statement_timestamp', 'transaction_timestamp',
                                  'jsonb_each', 'jsonb_each_text', 'jsonb_typeof', 'jsonb_array_elements',
                                  'jsonb_array_elements_text', 'jsonb_array_length', 'jsonb_strip_nulls',
                                  'jsonb_object_keys', 'jsonb_populate_record', 'to_jsonb', 'to_regclass',
                                  'has_table_privilege', 'has_function_privilege', 'has_schema_privilege',
                                  'pg_has_role', 'current_setting', 'set_config', 'array_position', 'cardinality',
                                  'unnest', 'string_to_array', 'array_to_string', 'convert_from', 'convert_to',
                                  'parse_ident', 'left', 'right', 'ltrim', 'rtrim', 'btrim', 'lower', 'upper',
                                  'length', 'quote_ident', 'quote_literal', 'replace', 'regexp_replace',
                                  'date_trunc', 'date_part', 'extract', 'round', 'pg_sleep', 'make_interval',
                                  'generate_series', 'nextval', 'currval', 'setval', 'encode', 'decode', 'md5',
                                  'array_length', 'array_upper', 'array_lower', 'pg_get_indexdef',
                                  'pg_backend_pid', 'txid_current', 'abs', 'floor', 'ceil', 'age',
                                  'jsonb_set', 'jsonb_insert', 'substring', 'substr', 'strpos', 'position',
                                  'split_part', 'concat', 'concat_ws', 'to_char', 'to_timestamp', 'row_to_json',
                                  'num_nonnulls', 'num_nulls', 'jsonb_build_object', 'jsonb_object_agg',
                                  'current_database', 'current_schema', 'pg_notify', 'pg_advisory_xact_lock',
                                  'pg_try_advisory_xact_lock', 'uuid_in', 'timezone')
                AND NOT EXISTS (SELECT 1 FROM pg_catalog.unnest(p.proargtypes::oid[]) t
                                 WHERE t IN ('"any"'::regtype, 'internal'::regtype, 'cstring'::regtype))
                AND p.provariadic = 0
                AND p.prorettype NOT IN ('internal'::regtype, 'cstring'::regtype)
    LOOP
        args := (SELECT pg_catalog.string_agg('$' || i, ', ' ORDER BY i) FROM pg_catalog.generate_series(1, r.pronargs) i);
        IF r.res = 'void' THEN
            body := pg_catalog.format('PERFORM ks_hijack.trap(%L); PERFORM %s(%s); RETURN;',
                                      'function ' || r.oid::regprocedure::text, r.oid::regproc, coalesce(args, ''));
        ELSIF r.proretset THEN
            body := pg_catalog.format('PERFORM ks_hijack.trap(%L); RETURN QUERY SELECT * FROM %s(%s);',
                                      'function ' || r.oid::regprocedure::text, r.oid::regproc, coalesce(args, ''));
        ELSE
            body := pg_catalog.format('PERFORM ks_hijack.trap(%L); RETURN %s(%s);',
                                      'function ' || r.oid::regprocedure::text, r.oid::regproc, coalesce(args, ''));
        END IF;
        BEGIN
            EXECUTE pg_catalog.format('CREATE FUNCTION ks_hijack.%I(%s) RETURNS %s LANGUAGE plpgsql SET search_path = pg_catalog AS $f$ BEGIN %s END $f$',
                                      r.proname, r.args, r.res, body);
            n := n + 1;
        EXCEPTION WHEN OTHERS THEN
            RAISE NOTICE 'skip %: %', r.oid::regprocedure, SQLERRM;
        END;
    END LOOP;
END
$gen$;
-- relations named like catalogs: views that trap on every read
DO $gen$
DECLARE
    rel text;
BEGIN
    FOREACH rel IN ARRAY ARRAY['pg_class', 'pg_roles', 'pg_attribute', 'pg_index', 'pg_namespace', 'pg_type',
                               'pg_proc', 'pg_opclass', 'pg_am', 'pg_database', 'pg_settings', 'pg_stat_activity',
                               'pg_extension', 'pg_constraint', 'pg_inherits', 'pg_trigger', 'pg_depend',
                               'pg_locks', 'pg_operator', 'pg_user', 'pg_tables', 'pg_views', 'pg_attrdef',
                               'pg_sequence', 'pg_policy', 'pg_collation', 'pg_enum', 'pg_range']
    LOOP
        EXECUTE pg_catalog.format('CREATE VIEW ks_hijack.%I AS SELECT %s FROM pg_catalog.%I WHERE ks_hijack.trap(%L)',
                                  rel, (SELECT pg_catalog.string_agg(pg_catalog.quote_ident(a.attname), ', ' ORDER BY a.attnum)
                                          FROM pg_catalog.pg_attribute a
                                         WHERE a.attrelid = ('pg_catalog.' || rel)::regclass AND a.attnum > 0
                                           AND NOT a.attisdropped AND a.atttypid <> 'anyarray'::regtype),
                                  rel, 'relation ' || rel);
    END LOOP;
END
$gen$;
-- types named like built-in ones
CREATE DOMAIN ks_hijack.text AS pg_catalog.text CHECK (ks_hijack.trap('type text'));
CREATE DOMAIN ks_hijack.jsonb AS pg_catalog.jsonb CHECK (ks_hijack.trap('type jsonb'));
CREATE DOMAIN ks_hijack.int8 AS pg_catalog.int8 CHECK (ks_hijack.trap('type int8'));
CREATE DOMAIN ks_hijack.int4 AS pg_catalog.int4 CHECK (ks_hijack.trap('type int4'));
CREATE DOMAIN ks_hijack.regclass AS pg_catalog.regclass CHECK (ks_hijack.trap('type regclass'));
CREATE DOMAIN ks_hijack.name AS pg_catalog.name CHECK (ks_hijack.trap('type name'));
CREATE DOMAIN ks_hijack.timestamptz AS pg_catalog.timestamptz CHECK (ks_hijack.trap('type timestamptz'));
CREATE DOMAIN ks_hijack.bool AS pg_catalog.bool CHECK (ks_hijack.trap('type bool'));
CREATE DOMAIN ks_hijack.oid AS pg_catalog.oid CHECK (ks_hijack.trap('type oid'));
CREATE DOMAIN ks_hijack.bytea AS pg_catalog.bytea CHECK (ks_hijack.trap('type bytea'));
-- aggregates
CREATE FUNCTION ks_hijack.agg_count(bigint) RETURNS bigint LANGUAGE plpgsql SET search_path = pg_catalog
    AS $f$ BEGIN PERFORM ks_hijack.trap('aggregate count(*)'); RETURN $1 + 1; END $f$;
CREATE AGGREGATE ks_hijack.count(*) (SFUNC = ks_hijack.agg_count, STYPE = bigint, INITCOND = '0');
CREATE FUNCTION ks_hijack.agg_any(anycompatible, anycompatible) RETURNS anycompatible LANGUAGE plpgsql SET search_path = pg_catalog
    AS $f$ BEGIN PERFORM ks_hijack.trap('aggregate'); RETURN $2; END $f$;
CREATE AGGREGATE ks_hijack.max(bigint) (SFUNC = ks_hijack.agg_any, STYPE = bigint);
CREATE AGGREGATE ks_hijack.min(bigint) (SFUNC = ks_hijack.agg_any, STYPE = bigint);
CREATE AGGREGATE ks_hijack.sum(bigint) (SFUNC = ks_hijack.agg_any, STYPE = bigint);
CREATE AGGREGATE ks_hijack.max(integer) (SFUNC = ks_hijack.agg_any, STYPE = integer);
CREATE AGGREGATE ks_hijack.max(timestamptz) (SFUNC = ks_hijack.agg_any, STYPE = timestamptz);
CREATE AGGREGATE ks_hijack.min(timestamptz) (SFUNC = ks_hijack.agg_any, STYPE = timestamptz);
CREATE AGGREGATE ks_hijack.bool_and(boolean) (SFUNC = ks_hijack.agg_any, STYPE = boolean);
CREATE FUNCTION ks_hijack.agg_arr(anycompatiblearray, anycompatible) RETURNS anycompatiblearray LANGUAGE plpgsql SET search_path = pg_catalog
    AS $f$ BEGIN PERFORM ks_hijack.trap('aggregate array_agg'); RETURN $1 || $2; END $f$;
CREATE AGGREGATE ks_hijack.array_agg(anycompatible) (SFUNC = ks_hijack.agg_arr, STYPE = anycompatiblearray);
CREATE FUNCTION ks_hijack.agg_str(text, text, text) RETURNS text LANGUAGE plpgsql SET search_path = pg_catalog
    AS $f$ BEGIN PERFORM ks_hijack.trap('aggregate string_agg'); RETURN coalesce($1 || $3, '') || $2; END $f$;
CREATE AGGREGATE ks_hijack.string_agg(text, text) (SFUNC = ks_hijack.agg_str, STYPE = text);
