-- The librdkafka the server loaded (which the build may not have linked
-- against without an rpath), its features, and kafka_sink.versions.
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS kafka_sink;
RESET client_min_messages;

-- a version string, the same one in the view
SELECT kafka_sink.librdkafka_version() ~ '^[0-9]+\.[0-9]+\.[0-9]+' AS looks_like_a_version;
SELECT kafka_sink = '0.3.0' AS ext,
       librdkafka = kafka_sink.librdkafka_version() AS same_librdkafka,
       librdkafka_features = kafka_sink.librdkafka_features() AS same_features,
       postgresql = current_setting('server_version') AS pg
  FROM kafka_sink.versions;
-- every build we support has TLS, SASL (SCRAM, OAUTHBEARER) and zstd
SELECT ARRAY['ssl', 'sasl', 'sasl_scram', 'sasl_oauthbearer', 'zstd'] <@ kafka_sink.librdkafka_features() AS features;

-- not for PUBLIC: like the rest of the schema, for kafka_sink_admin
SET client_min_messages = warning;
DROP ROLE IF EXISTS regress_ver_admin;
DROP ROLE IF EXISTS regress_ver_nobody;
RESET client_min_messages;
CREATE ROLE regress_ver_admin;
GRANT kafka_sink_admin TO regress_ver_admin;
CREATE ROLE regress_ver_nobody;
SET ROLE regress_ver_admin;
SELECT count(*) FROM kafka_sink.versions;
SELECT kafka_sink.librdkafka_version() IS NOT NULL AS admin_can;
RESET ROLE;
SET ROLE regress_ver_nobody;
\set VERBOSITY terse
SELECT kafka_sink.librdkafka_version();
SELECT count(*) FROM kafka_sink.versions;
\set VERBOSITY default
RESET ROLE;
DROP ROLE regress_ver_admin;
DROP ROLE regress_ver_nobody;
