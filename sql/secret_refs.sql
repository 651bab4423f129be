-- Secrets by reference: a secret option may be {"env": "NAME"} (a variable
-- kafka_sink.secret_env_allowed lists) or {"file": "/path"} (an owner who
-- may read server files) instead of its value.  The form is checked
-- strictly, a reference is refused on an option that is not a secret, and
-- the reference (never a value) is what the catalog and the views keep.
-- Resolution against a broker and a registry: test/e2e/secret_refs.sh.
CREATE EXTENSION IF NOT EXISTS kafka_sink;
SET client_min_messages = warning;
DROP SCHEMA IF EXISTS sref CASCADE;
DROP ROLE IF EXISTS regress_sref;
DROP ROLE IF EXISTS regress_sref_files;
RESET client_min_messages;

CREATE ROLE regress_sref LOGIN;
GRANT kafka_sink_admin TO regress_sref;
CREATE ROLE regress_sref_files LOGIN;
GRANT kafka_sink_admin, pg_read_server_files TO regress_sref_files;
CREATE SCHEMA sref;
GRANT USAGE ON SCHEMA sref TO regress_sref, regress_sref_files;
CREATE TABLE sref.t (id bigint PRIMARY KEY, v text);
GRANT SELECT, INSERT, UPDATE, DELETE ON sref.t TO regress_sref, regress_sref_files;

-- err(sql): the SQLSTATE, message, detail and hint of sql's error, or ok
CREATE FUNCTION sref.err(sql text) RETURNS text LANGUAGE plpgsql AS $$
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
-- create(name, kafka_options[, schema_registry]): a pipeline, not started
CREATE FUNCTION sref.create(name text, options jsonb, registry jsonb DEFAULT NULL) RETURNS text LANGUAGE sql AS $$
    SELECT sref.err(format('SELECT kafka_sink.create_pipeline(name => %L, bootstrap_servers => %L,
        subscribe => ARRAY[%L], target => %L, start => false, kafka_options => %L,
        value_format => %L, schema_registry => %L)',
        name, '127.0.0.1:9', 'sref', 'sref.t', options,
        CASE WHEN registry IS NULL THEN 'json' ELSE 'avro' END, registry))
$$;
CREATE FUNCTION sref.alter(name text, options jsonb) RETURNS text LANGUAGE sql AS $$
    SELECT sref.err(format('SELECT kafka_sink.alter_pipeline(%L, kafka_options => %L)', name, options))
$$;
-- stored(name): what the definition keeps beside what the secrets table keeps
CREATE FUNCTION sref.stored(p_name text) RETURNS TABLE (definition jsonb, secret_names text[])
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog AS $$
    SELECT d.kafka_options || coalesce(jsonb_build_object('schema_registry', d.schema_registry), '{}'),
           ARRAY(SELECT s.name FROM kafka_sink.secrets s WHERE s.pipeline_id = d.id ORDER BY 1)
      FROM kafka_sink.pipeline_definitions d WHERE d.name = p_name
$$;
GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA sref TO PUBLIC;

SHOW kafka_sink.secret_env_allowed;
SET ROLE regress_sref;

-- only secret options take a reference
SELECT sref.create('sref_bad', '{"client.id": {"env": "KS_ID"}}');
SELECT sref.create('sref_bad', '{"sasl.username": {"file": "/etc/kafka/user"}}');
SELECT sref.create('sref_bad', '{"ssl.ca.location": {"file": "/etc/ssl/ca.pem"}}');
-- the form: one key, env or file, a string; a name; an absolute normalized path
SELECT sref.create('sref_bad', '{"sasl.password": {}}');
SELECT sref.create('sref_bad', '{"sasl.password": {"env": "A", "file": "/b"}}');
SELECT sref.create('sref_bad', '{"sasl.password": {"vault": "kv/kafka"}}');
SELECT sref.create('sref_bad', '{"sasl.password": {"env": 1}}');
SELECT sref.create('sref_bad', '{"sasl.password": {"env": ["A"]}}');
SELECT sref.create('sref_bad', '{"sasl.password": {"env": ""}}');
SELECT sref.create('sref_bad', '{"sasl.password": {"env": "1PW"}}');
SELECT sref.create('sref_bad', '{"sasl.password": {"env": "KS-PW"}}');
SELECT sref.create('sref_bad', '{"sasl.password": {"env": "KS PW"}}');
SELECT sref.create('sref_bad', '{"sasl.password": {"file": "secrets/pw"}}');
SELECT sref.create('sref_bad', '{"sasl.password": {"file": "/etc/kafka/../shadow"}}');
SELECT sref.create('sref_bad', '{"sasl.password": {"file": "/etc//kafka/pw"}}');
SELECT sref.create('sref_bad', '{"sasl.password": {"file": "/etc/kafka/./pw"}}');
SELECT sref.create('sref_bad', '{"sasl.password": {"file": "/etc/kafka/"}}');
SELECT sref.create('sref_bad', '{"sasl.password": {"file": ""}}');
-- a NUL cannot be in jsonb at all
SELECT sref.create('sref_bad', '{"sasl.password": {"file": "/etc/kafka/pw\u0000x"}}');
-- env: only the variables a superuser listed (none by default)
SELECT sref.create('sref_bad', '{"sasl.password": {"env": "KS_PW"}}');
-- file: only for owners who may read server files
SELECT sref.create('sref_bad', '{"sasl.password": {"file": "/etc/kafka/pw"}}');
SELECT sref.create('sref_bad', '{}', '{"url": "http://127.0.0.1:9", "basic.auth.user.info": {"file": "/etc/kafka/registry"}}');
-- nothing was created by any of these
SELECT count(*) FROM kafka_sink.pipelines WHERE name = 'sref_bad';

-- a literal keeps working, and is masked
SELECT sref.create('sref_lit', '{"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
    "sasl.username": "u", "sasl.password": "pw-not-shown"}');
SELECT kafka_options FROM kafka_sink.pipelines WHERE name = 'sref_lit';
RESET ROLE;

SET ROLE regress_sref_files;
-- the file form for an owner with pg_read_server_files: the reference is
-- kept in the definition (it is no secret) and shown; no value is stored
SELECT sref.create('sref_file', '{"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
    "sasl.username": "u", "sasl.password": {"file": "/etc/kafka/pw"},
    "ssl.key.password": {"file": "/etc/kafka/key-pw"}}',
    '{"url": "http://127.0.0.1:9", "basic.auth.user.info": {"file": "/etc/kafka/registry"}}');
SELECT kafka_options, schema_registry FROM kafka_sink.pipelines WHERE name = 'sref_file';
SELECT * FROM sref.stored('sref_file');
-- the registry's literal still goes to the secrets table, masked
SELECT sref.err($$SELECT kafka_sink.alter_pipeline('sref_file', schema_registry => '{"url": "http://127.0.0.1:9", "basic.auth.user.info": "u:registry-pw-not-shown"}')$$);
SELECT schema_registry FROM kafka_sink.pipelines WHERE name = 'sref_file';
SELECT * FROM sref.stored('sref_file');
-- and back to a reference: the literal is gone from the catalog
SELECT sref.err($$SELECT kafka_sink.alter_pipeline('sref_file', schema_registry => '{"url": "http://127.0.0.1:9", "basic.auth.user.info": {"file": "/etc/kafka/registry"}}')$$);
SELECT * FROM sref.stored('sref_file');
-- alter: a literal replaces a reference and a reference a literal, nothing left behind
SELECT sref.alter('sref_file', '{"sasl.password": "pw2-not-shown"}');
SELECT kafka_options FROM kafka_sink.pipelines WHERE name = 'sref_file';
SELECT * FROM sref.stored('sref_file');
SELECT sref.alter('sref_file', '{"sasl.password": {"file": "/etc/kafka/pw2"}}');
SELECT kafka_options FROM kafka_sink.pipelines WHERE name = 'sref_file';
SELECT * FROM sref.stored('sref_file');
-- alter checks a reference as create does
SELECT sref.alter('sref_file', '{"sasl.password": {"file": "pw"}}');
SELECT sref.alter('sref_file', '{"sasl.password": {"env": "KS_PW"}}');
SELECT sref.alter('sref_file', '{"client.id": {"file": "/etc/hostname"}}');
-- null removes it, as for any option
SELECT sref.alter('sref_file', '{"sasl.password": null}');
SELECT * FROM sref.stored('sref_file');
RESET ROLE;

-- another role sees neither the pipeline nor its secrets
SET ROLE regress_sref;
SELECT count(*) FROM kafka_sink.pipelines WHERE name = 'sref_file';
RESET ROLE;

SET ROLE regress_sref_files;
SELECT kafka_sink.drop_pipeline('sref_file');
RESET ROLE;
SET ROLE regress_sref;
SELECT kafka_sink.drop_pipeline('sref_lit');
RESET ROLE;
DROP SCHEMA sref CASCADE;
DROP ROLE regress_sref;
DROP ROLE regress_sref_files;
