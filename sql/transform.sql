-- filter and computed (issue 26, docs/transform.md): what create and alter
-- refuse, with an errcode, a message and a hint, writing nothing; what
-- they store.  Needs no broker (the expressions run in the worker: see
-- test/e2e/transform.sh).
CREATE EXTENSION IF NOT EXISTS kafka_sink;
SET client_min_messages = warning;
DROP SCHEMA IF EXISTS xf CASCADE;
DROP SCHEMA IF EXISTS xf_other CASCADE;
DROP ROLE IF EXISTS regress_xf;
DROP ROLE IF EXISTS regress_xf_other;
RESET client_min_messages;

CREATE ROLE regress_xf LOGIN;
GRANT kafka_sink_admin TO regress_xf;
CREATE ROLE regress_xf_other LOGIN;
CREATE SCHEMA xf AUTHORIZATION regress_xf;
CREATE SCHEMA xf_other AUTHORIZATION regress_xf_other;

-- err(sql): runs sql and shows the SQLSTATE, message, detail and hint of its error
CREATE FUNCTION xf.err(sql text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    st text; m text; d text; h text;
BEGIN
    EXECUTE sql;
    RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, m = MESSAGE_TEXT,
                            d = PG_EXCEPTION_DETAIL, h = PG_EXCEPTION_HINT;
    RETURN st || ': ' || m
        || CASE WHEN d <> '' THEN E'\n  detail: ' || d ELSE '' END
        || CASE WHEN h <> '' THEN E'\n  hint: ' || h ELSE '' END;
END
$$;
GRANT EXECUTE ON FUNCTION xf.err(text) TO PUBLIC;

-- mk(extra): create_pipeline of a stopped pipeline 'x' into xf.t with extra arguments
CREATE FUNCTION xf.mk(extra text) RETURNS text LANGUAGE sql AS $$
    SELECT xf.err(format('SELECT kafka_sink.create_pipeline(name => %L, bootstrap_servers => %L, subscribe => ARRAY[%L], target => %L, start => false, %s)',
                         'x', '127.0.0.1:9', 'a', 'xf.t', extra))
$$;
GRANT EXECUTE ON FUNCTION xf.mk(text) TO PUBLIC;

-- another role's table, and a function reading it
SET ROLE regress_xf_other;
CREATE TABLE xf_other.secret (id int, s text);
CREATE FUNCTION xf_other.peek(int) RETURNS text LANGUAGE sql IMMUTABLE AS $$ SELECT s FROM xf_other.secret WHERE id = $1 $$;
REVOKE ALL ON FUNCTION xf_other.peek(int) FROM PUBLIC;
GRANT USAGE ON SCHEMA xf_other TO PUBLIC;
RESET ROLE;

SET ROLE regress_xf;
CREATE TABLE xf.t (id bigint PRIMARY KEY, ts bigint, price numeric, qty int, email text,
                   total numeric(12, 2), email_lc text NOT NULL, flag boolean,
                   _kafka_offset bigint);
CREATE SEQUENCE xf.s;
CREATE FUNCTION xf.half(numeric) RETURNS numeric LANGUAGE sql IMMUTABLE AS $$ SELECT $1 / 2 $$;
CREATE FUNCTION xf.jitter(numeric) RETURNS numeric LANGUAGE sql VOLATILE AS $$ SELECT $1 + random() $$;

-- refused: not one expression
SELECT xf.mk($$filter => ''$$);
SELECT xf.mk($$filter => 'price > 0; DROP TABLE xf.t'$$);
SELECT xf.mk($$filter => 'price > 0, qty > 0'$$);
SELECT xf.mk($$filter => 'price > 0 FROM xf.t'$$);
SELECT xf.mk($$filter => 'price > 0 AS ok'$$);
SELECT xf.mk($$filter => '*'$$);
SELECT xf.mk($$filter => 'price >'$$);
-- refused: columns that are not the target's, qualified, written by kafka_sink, computed
SELECT xf.mk($$filter => 'nope > 0'$$);
SELECT xf.mk($$filter => 't.price > 0'$$);
SELECT xf.mk($$filter => '_kafka_offset > 0'$$);
SELECT xf.mk($$filter => 'total > 0', computed => '{"total": "price * qty"}'$$);
SELECT xf.mk($$computed => '{"total": "email_lc"}', filter => 'true'$$);
-- refused: a filter that is not boolean, a value that does not fit its column
SELECT xf.mk($$filter => 'price'$$);
SELECT xf.mk($$computed => '{"flag": "price"}'$$);
-- refused: subqueries, aggregates, window and set-returning functions
SELECT xf.mk($$filter => 'EXISTS (SELECT 1 FROM kafka_sink.pipelines)'$$);
SELECT xf.mk($$filter => 'price > (SELECT max(price) FROM xf.t)'$$);
SELECT xf.mk($$filter => 'count(*) > 0'$$);
SELECT xf.mk($$computed => '{"qty": "row_number() OVER ()"}'$$);
SELECT xf.mk($$computed => '{"total": "generate_series(1, qty)"}'$$);
-- refused: volatile or stable (a retried batch must compute the same)
SELECT xf.mk($$filter => 'random() > 0.5'$$);
SELECT xf.mk($$filter => 'now() > ''2020-01-01'''$$);
SELECT xf.mk($$computed => '{"total": "xf.jitter(price)"}'$$);
SELECT xf.mk($$filter => 'email::timestamptz > ''2020-01-01'''$$);
SELECT xf.mk($$filter => 'nextval(''xf.s'') > 0'$$);
-- refused: a function the owner may not execute (another role's); one it
-- may execute but that reads a table it may not read passes here and fails
-- the pipeline when it runs (test/e2e/transform.sh)
SELECT xf.mk($$computed => '{"email": "xf_other.peek(qty)"}'$$);
-- refused: computed keys, order column, kafka_sink's columns, unknown columns, bad shapes
SELECT xf.mk($$computed => '{"id": "qty + 1"}'$$);
SELECT xf.mk($$order_column => 'ts', computed => '{"ts": "qty + 1"}'$$);
SELECT xf.mk($$computed => '{"_kafka_offset": "qty + 1"}'$$);
SELECT xf.mk($$computed => '{"nope": "qty + 1"}'$$);
SELECT xf.mk($$computed => '[]'$$);
SELECT xf.mk($$computed => '{}'$$);
SELECT xf.mk($$computed => '{"total": 3}'$$);
-- refused: no target (bronze only; a routed pipeline takes them: sql/routing.sql)
SELECT xf.err($$SELECT kafka_sink.create_pipeline(name => 'x', bootstrap_servers => '127.0.0.1:9', subscribe => ARRAY['a'], start => false, bronze => 'xf.raw', filter => 'true')$$);
SELECT count(*) AS pipelines_written FROM kafka_sink.pipelines WHERE name = 'x';

-- accepted: immutable expressions, an owner's immutable function, casts that are immutable
SELECT xf.mk($$order_column => 'ts', filter => 'price > 0 AND qty IS NOT NULL AND email LIKE ''%@%''',
               computed => '{"total": "price * qty", "email_lc": "lower(email)", "flag": "xf.half(price) > 10"}'$$);
SELECT filter, computed FROM kafka_sink.pipelines WHERE name = 'x';
-- alter: checked against the target, '' and '{}' remove them
SELECT xf.err($$SELECT kafka_sink.alter_pipeline('x', filter => 'now() IS NULL')$$);
SELECT xf.err($$SELECT kafka_sink.alter_pipeline('x', computed => '{"ts": "qty"}')$$);
SELECT filter, computed FROM kafka_sink.pipelines WHERE name = 'x';
SELECT xf.err($$SELECT kafka_sink.alter_pipeline('x', filter => 'qty % 2 = 0')$$);
SELECT filter FROM kafka_sink.pipelines WHERE name = 'x';
SELECT xf.err($$SELECT kafka_sink.alter_pipeline('x', filter => '', computed => '{}')$$);
SELECT filter, computed FROM kafka_sink.pipelines WHERE name = 'x';
SELECT kafka_sink.drop_pipeline('x', true);

-- the check runs nothing and needs a mode; without a target (a routed pipeline's table not known yet) it parses the text only
SELECT xf.err($$SELECT kafka_sink._check_transform(NULL, 'merge', NULL, NULL, 'true', NULL)$$);
SELECT xf.err($$SELECT kafka_sink._check_transform(NULL, 'merge', NULL, NULL, 'true, false', NULL)$$);
SELECT xf.err($$SELECT kafka_sink._check_transform('xf.t', NULL, NULL, NULL, 'true', NULL)$$);
SELECT xf.err($$SELECT kafka_sink._check_transform('xf.t', 'merge', NULL, NULL, '1/0 = 1', NULL)$$);
RESET ROLE;

SET client_min_messages = warning;
DROP SCHEMA xf CASCADE;
DROP SCHEMA xf_other CASCADE;
DROP ROLE regress_xf;
DROP ROLE regress_xf_other;
