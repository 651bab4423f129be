-- kafka_sink: the internal C entry points (src/*.c), and the C functions
-- that report the loaded librdkafka.  Each validates what it is given; a
-- wrong call is an error.  EXECUTE: 90_grants.sql.  The public C entry
-- points of the API (kafka_sink_api_call) are beside their SQL bodies in
-- 50_api.sql, 51_create_pipeline.sql and 52_alter_pipeline.sql.

CREATE OR REPLACE FUNCTION kafka_sink._check_kafka_options(options jsonb)
RETURNS void
AS 'MODULE_PATHNAME', 'kafka_sink_check_kafka_options'
LANGUAGE C STRICT
SET search_path = pg_catalog, pg_temp;

CREATE OR REPLACE FUNCTION kafka_sink._check_bootstrap_servers(servers text)
RETURNS void
AS 'MODULE_PATHNAME', 'kafka_sink_check_bootstrap_servers'
LANGUAGE C STRICT
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION kafka_sink._check_bootstrap_servers(text) IS
'Internal: raises unless every broker of a bootstrap_servers list is a well-formed host that kafka_sink.allowed_hosts allows.';

CREATE OR REPLACE FUNCTION kafka_sink._check_transform(target regclass, mode text, key_columns text[],
                                                       order_column text, filter text, computed jsonb)
RETURNS void
AS 'MODULE_PATHNAME', 'kafka_sink_check_transform'
LANGUAGE C
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION kafka_sink._check_transform(regclass, text, text[], text, text, jsonb) IS
'Internal: raises unless the filter and the computed columns are each one immutable SQL expression over the target''s columns (no subquery, aggregate, window or set-returning function), the filter boolean and each computed value assignable to its column, as the caller; runs none of them (src/apply/transform.c).';

CREATE OR REPLACE FUNCTION kafka_sink._is_secret_option(name text)
RETURNS boolean
AS 'MODULE_PATHNAME', 'kafka_sink_is_secret_option'
LANGUAGE C IMMUTABLE STRICT;
COMMENT ON FUNCTION kafka_sink._check_kafka_options(jsonb) IS
'Internal: raises unless every kafka_options key is allowed for a pipeline (the allow-list of src/kafka/kafka_options.c) with a valid value.';
COMMENT ON FUNCTION kafka_sink._is_secret_option(text) IS
'Internal: whether a librdkafka property is a secret (kept in kafka_sink.secrets, never shown).';

CREATE OR REPLACE FUNCTION kafka_sink.produce(
    bootstrap_servers text,
    topic             text,
    key               text,
    value             text,
    headers           jsonb DEFAULT NULL,
    partition         integer DEFAULT NULL)
RETURNS TABLE (partition integer, "offset" bigint)
AS 'MODULE_PATHNAME', 'kafka_sink_produce'
LANGUAGE C VOLATILE
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION kafka_sink.produce(text, text, text, text, jsonb, integer) IS
'Produce one message and wait for the broker''s acknowledgement. Not transactional: the message stays in Kafka even if the calling transaction rolls back.';

-- The broker's watermarks of every partition a pipeline reads, asked now;
-- with at, also the first offset at or after that time (-1: none).
CREATE OR REPLACE FUNCTION kafka_sink._watermarks(pipeline text, at timestamptz DEFAULT NULL)
RETURNS TABLE (topic text, partition integer, low bigint, high bigint, at_offset bigint)
AS 'MODULE_PATHNAME', 'kafka_sink_watermarks'
LANGUAGE C VOLATILE
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION kafka_sink._watermarks(text, timestamp with time zone) IS
'Internal: the broker''s low and high watermarks of every partition a pipeline reads, asked now; with at, the first offset at or after that time.';

-- The staged batch of the calling pipeline worker, as records.  Only a
-- kafka_sink worker has a batch; anywhere else this raises an error.
CREATE OR REPLACE FUNCTION kafka_sink._batch_rows()
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'kafka_sink_batch_rows'
LANGUAGE C VOLATILE;

-- The raw messages of the calling worker's batch, for the bronze table.
CREATE OR REPLACE FUNCTION kafka_sink._batch_messages()
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'kafka_sink_batch_messages'
LANGUAGE C VOLATILE;

CREATE OR REPLACE FUNCTION kafka_sink._replay(pipeline_id bigint, ids bigint[])
RETURNS TABLE (replayed bigint, still_failing bigint)
AS 'MODULE_PATHNAME', 'kafka_sink_replay'
LANGUAGE C VOLATILE STRICT
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION kafka_sink._batch_rows() IS
'Internal: the calling pipeline worker''s staged batch as rows of the target (only inside a worker''s batch).';
COMMENT ON FUNCTION kafka_sink._batch_messages() IS
'Internal: the calling pipeline worker''s raw messages, for the bronze table (only inside a worker''s batch).';
COMMENT ON FUNCTION kafka_sink._replay(bigint, bigint[]) IS
'Internal: applies quarantined messages again by id, in offset order; the body of replay_quarantine.';

CREATE OR REPLACE FUNCTION kafka_sink._partition_stats()
RETURNS TABLE (pipeline_id bigint, topic text, partition integer, worker integer, pid integer,
               log_start_offset bigint, high_watermark bigint, watermarks_at timestamptz,
               avg_message_bytes float8, messages_per_second float8)
AS 'MODULE_PATHNAME', 'kafka_sink_partition_stats'
LANGUAGE C VOLATILE
SET search_path = pg_catalog, pg_temp;

CREATE OR REPLACE FUNCTION kafka_sink._wake_launcher()
RETURNS void
AS 'MODULE_PATHNAME', 'kafka_sink_wake_launcher'
LANGUAGE C VOLATILE;

-- The writer's side of the batches' fence (src/apply/checkpoint.c): waits for the
-- pipeline's batches in flight and holds new ones back until commit.
CREATE OR REPLACE FUNCTION kafka_sink._fence_batches(pipeline_id bigint)
RETURNS void
AS 'MODULE_PATHNAME', 'kafka_sink_fence_batches'
LANGUAGE C VOLATILE;
COMMENT ON FUNCTION kafka_sink._fence_batches(bigint) IS
'Internal: waits until no batch of the pipeline is in flight and holds new ones back until commit (stop, drop, alter, reset_offsets, ...); only inside the API.';

CREATE OR REPLACE FUNCTION kafka_sink._worker_pids()
RETURNS TABLE (pipeline_id bigint, worker integer, pid integer, state text, detail text)
AS 'MODULE_PATHNAME', 'kafka_sink_worker_pids'
LANGUAGE C VOLATILE
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION kafka_sink._partition_stats() IS
'Internal: per partition, the watermarks, message size and rate the owning worker last saw (shared memory, no broker round trip).';
COMMENT ON FUNCTION kafka_sink._wake_launcher() IS
'Internal: wakes the launcher at commit, so that it starts or stops workers for the changed pipelines.';
COMMENT ON FUNCTION kafka_sink._worker_pids() IS
'Internal: the running workers (pipeline id, worker number, pid, state, detail) and the outbox relay (pipeline id -1).';

-- Whether a mapping path is valid, by the parser the workers decode with
-- (src/infra/jsonwalk.c, ks_path_parse): fields separated by dots, a backslash
-- taking the next character literally ("a\.b" is the field "a.b").
CREATE OR REPLACE FUNCTION kafka_sink._json_path_valid(path text)
RETURNS boolean
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE
AS 'MODULE_PATHNAME', 'kafka_sink_json_path_valid';
COMMENT ON FUNCTION kafka_sink._json_path_valid(text) IS
    'Internal: whether a mapping path is valid (dots separate fields; a backslash escapes a dot or a backslash)';

-- Whether a field path names a header or Kafka's metadata (headers.<name>,
-- kafka.key, kafka.timestamp, kafka.topic, kafka.partition, kafka.offset),
-- by the parser decoding uses (src/decode/meta.c); raises for kafka.<other>
-- and for headers. without a name.
CREATE OR REPLACE FUNCTION kafka_sink._check_field_path(path text, what text)
RETURNS boolean
LANGUAGE C IMMUTABLE PARALLEL SAFE
AS 'MODULE_PATHNAME', 'kafka_sink_check_field_path';
COMMENT ON FUNCTION kafka_sink._check_field_path(text, text) IS
    'Internal: whether a field path names a header or Kafka''s metadata (headers.<name>, kafka.key, kafka.timestamp, kafka.topic, kafka.partition, kafka.offset); raises for an unknown kafka.* name';

-- One parser of offsets specs: the C function the worker uses (src/infra/offsets.c).
-- what names the spec in messages: starting_offsets, ending_offsets or
-- reset_offsets; with start, an ending_offsets is checked against it.
CREATE OR REPLACE FUNCTION kafka_sink._check_offsets(spec text, what text, start text DEFAULT NULL)
RETURNS void
LANGUAGE C
AS 'MODULE_PATHNAME', 'kafka_sink_check_offsets';
COMMENT ON FUNCTION kafka_sink._check_offsets(text, text, text) IS
    'Raises unless an offsets spec is one the pipeline workers can use (the same parser as theirs).';

-- The statements a batch runs, as built by the worker's own code (C).
CREATE OR REPLACE FUNCTION kafka_sink._pipeline_statements(pipeline_id bigint)
RETURNS TABLE (step integer, target regclass, kind text, strategy text, statement text, by_hand text, note text)
AS 'MODULE_PATHNAME', 'kafka_sink_pipeline_statements'
LANGUAGE C VOLATILE
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION kafka_sink._pipeline_statements(bigint) IS
'Internal: the statements of kafka_sink.pipeline_statements, by pipeline id, built by the functions the worker runs them from.';

-- kafka_sink can be built against another librdkafka than the system's
-- (PKG_CONFIG_PATH, with an rpath); what the dynamic linker loaded is what
-- counts (SCRAM against Kafka 4.x needs >= 2.6.1, OIDC needs libcurl).
CREATE OR REPLACE FUNCTION kafka_sink.librdkafka_version()
RETURNS text
LANGUAGE c STABLE PARALLEL SAFE
AS 'MODULE_PATHNAME', 'kafka_sink_librdkafka_version';
COMMENT ON FUNCTION kafka_sink.librdkafka_version() IS
'The version of the librdkafka loaded by the server (rd_kafka_version_str()), which can differ from the one kafka_sink was compiled against.';

CREATE OR REPLACE FUNCTION kafka_sink.librdkafka_features()
RETURNS text[]
LANGUAGE c STABLE PARALLEL SAFE
AS 'MODULE_PATHNAME', 'kafka_sink_librdkafka_features';
COMMENT ON FUNCTION kafka_sink.librdkafka_features() IS
'The loaded librdkafka''s builtin.features: ssl, sasl_scram, sasl_oauthbearer, oidc (token endpoint, needs libcurl), zstd, ...';

-- The schema registry's options (schema_registry => '{"url": ...}'): an
-- allow-list as for kafka_options (src/kafka/kafka_options.c); its secret
-- (basic.auth.user.info) is kept in kafka_sink.secrets.
CREATE OR REPLACE FUNCTION kafka_sink._check_registry_options(options jsonb)
RETURNS void
AS 'MODULE_PATHNAME', 'kafka_sink_check_registry_options'
LANGUAGE C;
COMMENT ON FUNCTION kafka_sink._check_registry_options(jsonb) IS
'Internal: raises unless every schema_registry option is allowed (its allow-list in src/kafka/kafka_options.c, as _check_kafka_options for Kafka options) and a url is given.';

CREATE OR REPLACE FUNCTION kafka_sink._is_secret_registry_option(name text)
RETURNS boolean
AS 'MODULE_PATHNAME', 'kafka_sink_is_secret_registry_option'
LANGUAGE C IMMUTABLE STRICT;
COMMENT ON FUNCTION kafka_sink._is_secret_registry_option(text) IS
'Internal: whether a schema_registry option is a secret (kept in kafka_sink.secrets as schema_registry.<option>, never shown).';

-- value_schema, parsed by the parser decoding uses (src/decode/avro_binary.c)
CREATE OR REPLACE FUNCTION kafka_sink._check_avro_schema(schema text)
RETURNS void
AS 'MODULE_PATHNAME', 'kafka_sink_check_avro_schema'
LANGUAGE C;
COMMENT ON FUNCTION kafka_sink._check_avro_schema(text) IS
'Internal: raises unless value_schema is a valid Avro record schema, parsed as decoding parses it.';

-- Routing (route.c): the parser of target templates that the worker uses.
CREATE OR REPLACE FUNCTION kafka_sink._check_target_template(template text)
RETURNS void
AS 'MODULE_PATHNAME', 'kafka_sink_check_target_template'
LANGUAGE C STRICT
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION kafka_sink._check_target_template(text) IS
'Internal: raises unless a target template ({topic}, {a.json.path}, literal text, at most one schema dot outside braces) parses as the worker parses it.';

-- Routing (route.c): the table a topic's messages go to by a template that
-- reads only the topic, for the checks of the routed tables that exist
-- (kafka_sink._routed_tables).
CREATE OR REPLACE FUNCTION kafka_sink._template_target(template text, topic text)
RETURNS text
AS 'MODULE_PATHNAME', 'kafka_sink_template_target'
LANGUAGE C STRICT STABLE
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION kafka_sink._template_target(text, text) IS
'Internal: the quoted, qualified table a message of topic goes to by a target template, by the worker''s rules, when the template reads only the topic and literal text; NULL when it reads a field of the value, a header or Kafka''s metadata.';

-- The hop count kafka_sink.outbox_send gives its message (src/kafka/hops.c): one
-- more than the messages of the batch a worker is applying, else 1.
CREATE OR REPLACE FUNCTION kafka_sink._outbox_hops()
RETURNS integer
AS 'MODULE_PATHNAME', 'kafka_sink_outbox_hops'
LANGUAGE C VOLATILE
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION kafka_sink._outbox_hops() IS
'Internal: the hop count (header kafka_sink.hops) of a message queued now: one more than the messages of the batch being applied, else 1.';
