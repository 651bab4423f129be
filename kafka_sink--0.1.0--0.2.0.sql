-- kafka_sink 0.1.0 -> 0.2.0
--
-- Every change to the catalog, views and SQL API since 0.1.0, in order.
-- The install script of 0.2.0 is built by the Makefile as the 0.1.0 script
-- followed by this one (as pg_cron keeps a base script plus updates), so a
-- fresh install and an upgrade run the same statements; test/e2e/upgrade.sh
-- checks that they end in the same schema.

\echo Use "ALTER EXTENSION kafka_sink UPDATE TO '0.2.0'" to load this file. \quit

-- ---- a current librdkafka: the version actually loaded ----
-- kafka_sink can be built against another librdkafka than the system's
-- (PKG_CONFIG_PATH, with an rpath); what the dynamic linker loaded is what
-- counts (SCRAM against Kafka 4.x needs >= 2.6.1, OIDC needs libcurl).
CREATE FUNCTION kafka_sink.librdkafka_version()
RETURNS text
LANGUAGE c STABLE PARALLEL SAFE
AS 'MODULE_PATHNAME', 'kafka_sink_librdkafka_version';
COMMENT ON FUNCTION kafka_sink.librdkafka_version() IS
'The version of the librdkafka loaded by the server (rd_kafka_version_str()), which can differ from the one kafka_sink was compiled against.';

CREATE FUNCTION kafka_sink.librdkafka_features()
RETURNS text[]
LANGUAGE c STABLE PARALLEL SAFE
AS 'MODULE_PATHNAME', 'kafka_sink_librdkafka_features';
COMMENT ON FUNCTION kafka_sink.librdkafka_features() IS
'The loaded librdkafka''s builtin.features: ssl, sasl_scram, sasl_oauthbearer, oidc (token endpoint, needs libcurl), zstd, ...';

CREATE VIEW kafka_sink.versions AS
SELECT (SELECT extversion FROM pg_catalog.pg_extension WHERE extname = 'kafka_sink') AS kafka_sink,
       kafka_sink.librdkafka_version() AS librdkafka,
       kafka_sink.librdkafka_features() AS librdkafka_features,
       pg_catalog.current_setting('server_version') AS postgresql;
COMMENT ON VIEW kafka_sink.versions IS
'The installed kafka_sink version, the librdkafka loaded by the server and its features, and the PostgreSQL version.';

REVOKE ALL ON FUNCTION kafka_sink.librdkafka_version(), kafka_sink.librdkafka_features() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION kafka_sink.librdkafka_version(), kafka_sink.librdkafka_features() TO kafka_sink_admin;
REVOKE ALL ON kafka_sink.versions FROM PUBLIC;
GRANT SELECT ON kafka_sink.versions TO kafka_sink_admin;
