-- Kafka options: an allow-list.  Every property that is not in it is
-- refused by name; options that run a program, load a library, install a
-- signal handler or write files are refused for everyone; the ones
-- kafka_sink manages cannot be overridden; paths to server files need
-- pg_read_server_files.  No error shows a value.
CREATE EXTENSION IF NOT EXISTS kafka_sink;
SET client_min_messages = warning;
DROP SCHEMA IF EXISTS opt CASCADE;
DROP ROLE IF EXISTS regress_opt;
DROP ROLE IF EXISTS regress_opt_files;
RESET client_min_messages;

CREATE ROLE regress_opt LOGIN;
GRANT kafka_sink_admin TO regress_opt;
CREATE ROLE regress_opt_files LOGIN;
GRANT kafka_sink_admin, pg_read_server_files TO regress_opt_files;
CREATE SCHEMA opt;
GRANT USAGE ON SCHEMA opt TO regress_opt, regress_opt_files;
CREATE TABLE opt.t (id bigint PRIMARY KEY, v text);
GRANT SELECT, INSERT, UPDATE, DELETE ON opt.t TO regress_opt, regress_opt_files;

-- err(sql): the SQLSTATE, message, detail and hint of sql's error, or ok
CREATE FUNCTION opt.err(sql text) RETURNS text LANGUAGE plpgsql AS $$
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
-- create(options): create_pipeline with these kafka_options, not started
CREATE FUNCTION opt.create(name text, options jsonb) RETURNS text LANGUAGE sql AS $$
    SELECT opt.err(format('SELECT kafka_sink.create_pipeline(name => %L, bootstrap_servers => %L,
        subscribe => ARRAY[%L], target => %L, start => false, kafka_options => %L)',
        name, '127.0.0.1:9', 'opt', 'opt.t', options))
$$;
-- alter(options): alter_pipeline of opt_ok with these kafka_options
CREATE FUNCTION opt.alter(options jsonb) RETURNS text LANGUAGE sql AS $$
    SELECT opt.err(format('SELECT kafka_sink.alter_pipeline(%L, kafka_options => %L)', 'opt_ok', options))
$$;
GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA opt TO PUBLIC;

SET ROLE regress_opt;

-- allowed options, an inline PEM among them
SELECT opt.create('opt_ok', '{"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
    "sasl.username": "u", "sasl.password": "pw-not-shown", "client.id": "c1", "client.rack": "r1",
    "fetch.wait.max.ms": 50, "fetch.max.bytes": 1048576, "socket.timeout.ms": 30000,
    "ssl.ca.pem": "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----",
    "ssl.ca.location": "probe", "debug": "broker", "sasl.kerberos.service.name": "kafka"}');
SELECT kafka_options FROM kafka_sink.pipelines WHERE name = 'opt_ok';

-- programs, libraries, signal handlers, offset files: refused for everyone
SELECT opt.create('opt_bad', '{"plugin.library.paths": "/lib/x86_64-linux-gnu/libm.so.6"}');
SELECT opt.create('opt_bad', '{"interceptors": "x"}');
SELECT opt.create('opt_bad', '{"sasl.kerberos.kinit.cmd": "touch /tmp/pwned"}');
SELECT opt.create('opt_bad', '{"sasl.kerberos.keytab": "/etc/krb5.keytab"}');
SELECT opt.create('opt_bad', '{"ssl.engine.location": "/usr/lib/engine.so"}');
SELECT opt.create('opt_bad', '{"ssl.engine.id": "pkcs11"}');
SELECT opt.create('opt_bad', '{"ssl.providers": "legacy"}');
SELECT opt.create('opt_bad', '{"internal.termination.signal": 15}');
SELECT opt.create('opt_bad', '{"offset.store.method": "file"}');
SELECT opt.create('opt_bad', '{"offset.store.path": "/tmp/offsets"}');
SELECT opt.create('opt_bad', '{"enable.sasl.oauthbearer.unsecure.jwt": "true"}');
-- callbacks and opaques are C API only, whatever their name
SELECT opt.create('opt_bad', '{"rebalance_cb": "x"}');
SELECT opt.create('opt_bad', '{"opaque": "x"}');
SELECT opt.create('opt_bad', '{"ssl.certificate.verify_cb": "x"}');
SELECT opt.create('opt_bad', '{"ssl_engine_callback_data": "x"}');
SELECT opt.create('opt_bad', '{"ssl_key": "secret-not-shown"}');
-- managed by kafka_sink, aliases included
SELECT opt.create('opt_bad', '{"isolation.level": "read_uncommitted"}');
SELECT opt.create('opt_bad', '{"group.instance.id": "someone-elses-member"}');
SELECT opt.create('opt_bad', '{"enable.auto.commit": "true"}');
SELECT opt.create('opt_bad', '{"auto.commit.enable": "true"}');
SELECT opt.create('opt_bad', '{"auto.offset.reset": "earliest"}');
SELECT opt.create('opt_bad', '{"bootstrap.servers": "evil:9092"}');
SELECT opt.create('opt_bad', '{"metadata.broker.list": "evil:9092"}');
SELECT opt.create('opt_bad', '{"sasl.kerberos.min.time.before.relogin": 60000}');
SELECT opt.create('opt_bad', '{"queued.max.messages.kbytes": 2097151}');
SELECT opt.create('opt_bad', '{"log.queue": "false"}');
-- not in the table: unknown names, case variants, whitespace, librdkafka's topic. prefix
SELECT opt.create('opt_bad', '{"no.such.option": "1"}');
SELECT opt.create('opt_bad', '{"PLUGIN.LIBRARY.PATHS": "/lib/x86_64-linux-gnu/libm.so.6"}');
SELECT opt.create('opt_bad', '{"Group.Id": "g"}');
SELECT opt.create('opt_bad', '{" group.id": "g"}');
SELECT opt.create('opt_bad', '{"topic.auto.offset.reset": "earliest"}');
SELECT opt.create('opt_bad', '{"statistics.interval.ms": 1000}');
-- producer-only properties do not apply to a pipeline's consumer
SELECT opt.create('opt_bad', '{"compression.type": "zstd"}');
-- values that decide what the server does: mechanisms, Kerberos names, URLs
SELECT opt.create('opt_bad', '{"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "GSSAPI"}');
SELECT opt.create('opt_bad', '{"security.protocol": "SASL_PLAINTEXT", "sasl.mechanisms": "GSSAPI"}');
SELECT opt.create('opt_bad', '{"security.protocol": "sasl_ssl"}');
SELECT opt.create('opt_bad', '{"sasl.mechanism": "NTLM"}');
SELECT opt.create('opt_bad', '{"sasl.kerberos.principal": "a; touch /tmp/x"}');
SELECT opt.create('opt_bad', '{"sasl.kerberos.service.name": "$(id)"}');
SELECT opt.create('opt_bad', '{"sasl.oauthbearer.token.endpoint.url": "file:///etc/passwd"}');
SELECT opt.create('opt_bad', '{"sasl.oauthbearer.metadata.authentication.type": "azure_imds"}');
-- paths to server files: not for a role without pg_read_server_files
SELECT opt.create('opt_bad', '{"ssl.ca.location": "/etc/ssl/certs/ca-certificates.crt"}');
SELECT opt.create('opt_bad', '{"ssl.key.location": "/etc/ssl/private/server.key"}');
SELECT opt.create('opt_bad', '{"ssl.certificate.location": "server.crt"}');
SELECT opt.create('opt_bad', '{"ssl.keystore.location": "/tmp/ks.p12"}');
SELECT opt.create('opt_bad', '{"ssl.crl.location": "/tmp/crl.pem"}');
SELECT opt.create('opt_bad', '{"https.ca.location": "/tmp/ca.pem"}');
SELECT opt.create('opt_bad', '{"sasl.oauthbearer.assertion.private.key.file": "/tmp/k.pem"}');
-- nothing was created, and no value was shown
SELECT count(*) FROM kafka_sink.pipelines WHERE name = 'opt_bad';

-- alter_pipeline checks the same way; a refused change keeps the old options
SELECT opt.alter('{"plugin.library.paths": "/lib/x86_64-linux-gnu/libm.so.6"}');
SELECT opt.alter('{"isolation.level": "read_uncommitted"}');
SELECT opt.alter('{"group.id": "kafka_sink.g"}');
SELECT opt.alter('{"sasl.kerberos.kinit.cmd": "touch /tmp/pwned"}');
SELECT opt.alter('{"ssl.key.location": "/etc/ssl/private/server.key"}');
SELECT opt.alter('{"fetch.wait.max.ms": 100, "ssl.certificate.pem": "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----"}');
SELECT kafka_options->>'fetch.wait.max.ms' AS fetch_wait, kafka_options ? 'ssl.certificate.pem' AS pem,
       kafka_options ? 'ssl.key.location' AS key_path
  FROM kafka_sink.pipelines WHERE name = 'opt_ok';

-- a member of pg_read_server_files may name server files
SET ROLE regress_opt_files;
SELECT opt.create('opt_files', '{"security.protocol": "SSL", "ssl.ca.location": "/etc/ssl/certs/ca-certificates.crt",
    "ssl.certificate.location": "/tmp/client.pem", "ssl.key.location": "/tmp/client.key", "ssl.key.password": "kp"}');
SELECT kafka_options FROM kafka_sink.pipelines WHERE name = 'opt_files';
-- but not run programs, nor override what kafka_sink manages
SELECT opt.create('opt_files2', '{"sasl.kerberos.kinit.cmd": "true"}');
SELECT opt.create('opt_files2', '{"isolation.level": "read_uncommitted"}');
-- nor use the server's Kerberos tickets
SELECT opt.create('opt_files2', '{"security.protocol": "SASL_SSL"}');

-- a superuser cannot run programs either
RESET ROLE;
SELECT opt.err($$SELECT kafka_sink._check_kafka_options('{"sasl.kerberos.kinit.cmd": "true"}')$$);
SELECT opt.err($$SELECT kafka_sink._check_kafka_options('{"plugin.library.paths": "x"}')$$);
SELECT opt.err($$SELECT kafka_sink._check_kafka_options('{"isolation.level": "read_committed"}')$$);
-- GSSAPI and server files are a superuser's to use
SELECT opt.err($$SELECT kafka_sink._check_kafka_options('{"security.protocol": "SASL_PLAINTEXT", "sasl.kerberos.principal": "kafkaclient/host.example.com@EXAMPLE.COM"}')$$);
SELECT opt.err($$SELECT kafka_sink._check_kafka_options('{"ssl.ca.location": "/etc/ssl/certs"}')$$);

-- secrets: table-driven, as before
SELECT n, kafka_sink._is_secret_option(n)
  FROM unnest(ARRAY['sasl.password', 'ssl.key.password', 'ssl.key.pem', 'ssl.keystore.password',
                    'sasl.oauthbearer.client.secret', 'sasl.oauthbearer.config',
                    'sasl.oauthbearer.assertion.private.key.passphrase', 'sasl.username',
                    'ssl.key.location', 'ssl.ca.pem', 'client.id']) n;

SELECT kafka_sink.drop_pipeline('opt_ok');
SELECT kafka_sink.drop_pipeline('opt_files');
DROP SCHEMA opt CASCADE;
DROP ROLE regress_opt;
DROP ROLE regress_opt_files;
