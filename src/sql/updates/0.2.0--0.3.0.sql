-- kafka_sink 0.2.0 -> 0.3.0: the schema changes of this step (src/sql/README.md).
-- Every function, procedure, view, trigger, grant and comment comes after
-- this file from the parts in src/sql/, as in a fresh install.

-- evolve's check takes the key and order columns and the column cap
-- (schema-driven DDL that cannot be turned against the table)
DROP FUNCTION kafka_sink._evolve_target(regclass, text, boolean);

-- create_targets makes the mark column of delete_mode soft (_deleted_at)
DROP FUNCTION kafka_sink._create_target(text, text, text, text, text[], text);

-- the outbox's hop count and the quarantine reason dead_letter_loop (loops
-- through the outbox end)
ALTER TABLE kafka_sink.outbox
    ADD COLUMN hops integer NOT NULL DEFAULT 1 CONSTRAINT outbox_hops_check CHECK (hops >= 1);
COMMENT ON COLUMN kafka_sink.outbox.hops IS
    'How many times the message came through kafka_sink, this time included, sent as the header kafka_sink.hops: a pipeline quarantines a message with more than kafka_sink.max_outbox_hops as dead_letter_loop';
ALTER TABLE kafka_sink.quarantine DROP CONSTRAINT quarantine_reason_check;
ALTER TABLE kafka_sink.quarantine ADD CONSTRAINT quarantine_reason_check CHECK (reason IN (
    'invalid_json', 'not_an_object', 'missing_required_field',
    'invalid_value', 'unknown_schema_version', 'null_key',
    'constraint_violation', 'value_too_large', 'rejected_by_target',
    'unknown_schema_id', 'not_wire_format', 'invalid_avro', 'invalid_envelope',
    'no_target', 'target_refused', 'schema_change_refused', 'dead_letter_loop', 'no_partition', 'invalid_protobuf',
    'expression_error'));
COMMENT ON COLUMN kafka_sink.quarantine.reason IS
    'Why the message was not applied: invalid_json, not_an_object, missing_required_field, invalid_value, '
    'unknown_schema_version, null_key, constraint_violation (a constraint or data error of the row), '
    'value_too_large, rejected_by_target (a trigger, row level security policy or check option of the target '
    'rejected the row), unknown_schema_id (the registry does not know the frame''s schema id), not_wire_format '
    '(no magic byte 0 and schema id), invalid_avro (the payload does not decode with its schema), '
    'invalid_envelope (a change event without a known op, or without the row its op needs), '
    'no_target (routing: the message''s target could not be named or does not exist), target_refused '
    '(routing: the target exists but the pipeline may not write it: see the detail), schema_change_refused '
    '(evolve: a change of the embedded schema that kafka_sink will not make), dead_letter_loop (the message '
    'came through kafka_sink''s outbox more than kafka_sink.max_outbox_hops times: it is sent to no dead-letter topic), '
    'no_partition (a partitioned target has no partition for the row: replayable once the partition exists), '
    'invalid_protobuf (the Protobuf payload does not decode with its schema, or its schema does not compile), '
    'expression_error (the pipeline''s filter or a computed column raised for the message''s values)';

-- envelope debezium: the connector's own unavailable.value.placeholder
-- (issue 25); create_pipeline and alter_pipeline take it as their last
-- argument, so their released signatures go
ALTER TABLE kafka_sink.pipeline_definitions
    ADD COLUMN unavailable_value_placeholder text
        CONSTRAINT pipeline_definitions_unavailable_value_placeholder_check
        CHECK (unavailable_value_placeholder <> '');
COMMENT ON COLUMN kafka_sink.pipeline_definitions.unavailable_value_placeholder IS
    'envelope debezium: the connector''s unavailable.value.placeholder (NULL: Debezium''s default __debezium_unavailable_value); a column holding it is left as the replica has it';
DROP FUNCTION kafka_sink.create_pipeline(text, text, text, text[], text, jsonb, text[], text, text, regprocedure, text, boolean, bigint, bigint, interval, integer, jsonb, boolean, jsonb, text, boolean, text, jsonb, text, interval, text, text, bigint, interval, text, text, text, jsonb, text, text, jsonb, boolean, text);
DROP FUNCTION kafka_sink._api_create_pipeline(text, text, text, text[], text, jsonb, text[], text, text, regprocedure, text, boolean, bigint, bigint, interval, integer, jsonb, boolean, jsonb, text, boolean, text, jsonb, text, interval, text, text, bigint, interval, text, text, text, jsonb, text, text, jsonb, boolean, text);
DROP FUNCTION kafka_sink.alter_pipeline(text, bigint, bigint, interval, integer, jsonb, text, boolean, text, bigint, interval, text, text, text, text, jsonb, text, text, jsonb, boolean, text);
DROP FUNCTION kafka_sink._api_alter_pipeline(text, bigint, bigint, interval, integer, jsonb, text, boolean, text, bigint, interval, text, text, text, text, jsonb, text, text, jsonb, boolean, text);

-- mode history (docs/history.md): one row per version of a key
ALTER TABLE kafka_sink.pipeline_definitions DROP CONSTRAINT pipeline_definitions_mode_check;
ALTER TABLE kafka_sink.pipeline_definitions ADD CONSTRAINT pipeline_definitions_mode_check
    CHECK (mode IN ('merge', 'append', 'function', 'history'));

-- the protobuf format (values and keys, Confluent wire format)
ALTER TABLE kafka_sink.pipeline_definitions DROP CONSTRAINT pipeline_definitions_value_format_check;
ALTER TABLE kafka_sink.pipeline_definitions ADD CONSTRAINT pipeline_definitions_value_format_check
    CHECK (value_format IN ('json', 'avro', 'json_schema', 'protobuf', 'registry'));
ALTER TABLE kafka_sink.pipeline_definitions DROP CONSTRAINT pipeline_definitions_key_format_check;
ALTER TABLE kafka_sink.pipeline_definitions ADD CONSTRAINT pipeline_definitions_key_format_check
    CHECK (key_format IN ('none', 'string', 'json', 'avro', 'protobuf'));
ALTER TABLE kafka_sink.pipeline_definitions DROP CONSTRAINT pipeline_definitions_key_registry_check;
ALTER TABLE kafka_sink.pipeline_definitions ADD CONSTRAINT pipeline_definitions_key_registry_check
    CHECK (key_format NOT IN ('avro', 'protobuf') OR schema_registry IS NOT NULL);
COMMENT ON COLUMN kafka_sink.pipeline_definitions.value_format IS
    'json, avro (Confluent wire format, or plain Avro with value_schema), json_schema (Confluent wire format, JSON payload), protobuf (Confluent wire format) or registry (Confluent wire format, each schema id read as the registry''s schemaType says: AVRO, PROTOBUF or JSON)';

-- the declarative transform (issue 26, docs/transform.md): filter and
-- computed columns, the count of filtered messages per batch
ALTER TABLE kafka_sink.pipeline_definitions
    ADD COLUMN filter text
        CONSTRAINT pipeline_definitions_filter_check CHECK (filter <> ''),
    ADD COLUMN computed jsonb
        CONSTRAINT pipeline_definitions_computed_check CHECK (jsonb_typeof(computed) = 'object');
COMMENT ON COLUMN kafka_sink.pipeline_definitions.filter IS
    'A boolean SQL expression over the decoded row (the target''s column names): a message for which it is not true is filtered, counted and not applied (NULL: no filter)';
COMMENT ON COLUMN kafka_sink.pipeline_definitions.computed IS
    'Computed columns: {"column": "<SQL expression over the decoded row>"}, each assigned to its column after decoding (NULL: none)';
ALTER TABLE kafka_sink.batches ADD COLUMN filtered bigint NOT NULL DEFAULT 0;
COMMENT ON COLUMN kafka_sink.batches.filtered IS
    'Messages of the batch the pipeline''s filter left out';

-- soft deletes (issue 26, docs/soft-deletes.md): create_pipeline takes
-- delete_mode as its last argument
ALTER TABLE kafka_sink.pipeline_definitions
    ADD COLUMN delete_mode text NOT NULL DEFAULT 'hard'
        CONSTRAINT pipeline_definitions_delete_mode_check CHECK (delete_mode IN ('hard', 'soft'));
COMMENT ON COLUMN kafka_sink.pipeline_definitions.delete_mode IS
    'Mode merge: what a delete (a tombstone, a change event''s delete or truncate) does: hard removes the row, soft marks it (_deleted true, _deleted_at its Kafka timestamp) and keeps its last values (docs/soft-deletes.md)';

-- write modes (issue 26, docs/write-modes.md): create_pipeline takes
-- write_mode as its last argument
ALTER TABLE kafka_sink.pipeline_definitions
    ADD COLUMN write_mode text NOT NULL DEFAULT 'upsert'
        CONSTRAINT pipeline_definitions_write_mode_check CHECK (write_mode IN ('upsert', 'insert_only', 'update_only'));
COMMENT ON COLUMN kafka_sink.pipeline_definitions.write_mode IS
    'Mode merge: upsert (insert or update under the ordering guard), insert_only (the first event of a key wins: smallest order value, then partition and offset) or update_only (events for keys not in the target are skipped) (docs/write-modes.md)';

-- mode history's track_history_columns (issue 26, docs/history.md):
-- create_pipeline takes it as its last argument
ALTER TABLE kafka_sink.pipeline_definitions ADD COLUMN track_history_columns text[];
COMMENT ON COLUMN kafka_sink.pipeline_definitions.track_history_columns IS
    'Mode history: the columns whose change starts a new version; a change to the others updates the version in effect (its states kept in _states jsonb) (docs/history.md); NULL: every column';

-- the counters of soft deletes and update_only's skipped events (issue 26,
-- docs/soft-deletes.md, docs/write-modes.md)
ALTER TABLE kafka_sink.batches ADD COLUMN soft_deleted bigint NOT NULL DEFAULT 0;
ALTER TABLE kafka_sink.batches ADD COLUMN skipped bigint NOT NULL DEFAULT 0;
COMMENT ON COLUMN kafka_sink.batches.soft_deleted IS
    'delete_mode soft: rows of the batch''s target marked deleted (by tombstones, change events'' deletes and truncates); not counted in deleted';
COMMENT ON COLUMN kafka_sink.batches.skipped IS
    'write_mode update_only: events of the batch whose key the target did not hold, not inserted; not counted in stale';

-- a message replay_quarantine filtered (docs/transform.md): the filter then
ALTER TABLE kafka_sink.quarantine ADD COLUMN replay_filter text;
COMMENT ON COLUMN kafka_sink.quarantine.replay_filter IS
    'Set when replay_quarantine replayed the message and the pipeline''s filter left it out (its text then): the message is filtered, not applied (message_fate); NULL otherwise';

-- the offsets the filter left out, per batch and partition (issue 26,
-- docs/transform.md): message_fate tells them filtered without bronze
CREATE TABLE kafka_sink.filtered_offsets (
    pipeline_id bigint NOT NULL,
    batch_id    bigint NOT NULL,
    topic       text NOT NULL,
    partition   integer NOT NULL CHECK (partition >= 0),
    offsets     bigint[] NOT NULL CHECK (cardinality(offsets) > 0),
    filter      text NOT NULL,
    PRIMARY KEY (pipeline_id, batch_id, topic, partition),
    FOREIGN KEY (pipeline_id, batch_id) REFERENCES kafka_sink.batches (pipeline_id, batch_id) ON DELETE CASCADE
);
SELECT pg_catalog.pg_extension_config_dump('kafka_sink.filtered_offsets', '');
COMMENT ON TABLE kafka_sink.filtered_offsets IS
'The offsets the pipeline''s filter left out of each retained batch, per partition (message_fate and message_fates tell them filtered); pruned with the batch''s marker.';
COMMENT ON COLUMN kafka_sink.filtered_offsets.offsets IS
    'The offsets of the batch''s messages of this topic and partition that the pipeline''s filter left out (not applied, counted in batches.filtered), in the order the batch read them';
COMMENT ON COLUMN kafka_sink.filtered_offsets.filter IS
    'The filter the batch ran (the pipeline''s filter when the batch was applied; an alter_pipeline since does not change it), named in message_fate''s detail';
ALTER TABLE kafka_sink.filtered_offsets ENABLE ROW LEVEL SECURITY;
CREATE POLICY own_pipelines ON kafka_sink.filtered_offsets
    USING (EXISTS (SELECT 1 FROM kafka_sink.pipeline_definitions p WHERE p.id = pipeline_id))
    WITH CHECK (EXISTS (SELECT 1 FROM kafka_sink.pipeline_definitions p WHERE p.id = pipeline_id));
REVOKE ALL ON kafka_sink.filtered_offsets FROM PUBLIC;
GRANT SELECT, INSERT, UPDATE, DELETE ON kafka_sink.filtered_offsets TO kafka_sink_admin;

-- mode history: a truncate's source commit time, for _valid_from_at and
-- _valid_to_at (docs/history.md, "Reading by time")
ALTER TABLE kafka_sink.cdc_deletions ADD COLUMN source_time timestamptz;
COMMENT ON COLUMN kafka_sink.cdc_deletions.source_time IS
    'Mode history: a truncate''s source commit time, which its deleted versions take as _valid_from_at (docs/history.md, "Reading by time"); NULL otherwise';

-- delete_mode soft: the upserts that brought a marked row back, counted and
-- recorded per batch (docs/soft-deletes.md)
ALTER TABLE kafka_sink.batches ADD COLUMN revived bigint NOT NULL DEFAULT 0;
COMMENT ON COLUMN kafka_sink.batches.revived IS
    'delete_mode soft: rows of the batch''s target marked deleted that an upsert brought back (their messages in kafka_sink.revived_offsets); counted in updated too';
ALTER TABLE kafka_sink.quarantine ADD COLUMN replay_revived text;
COMMENT ON COLUMN kafka_sink.quarantine.replay_revived IS
    'delete_mode soft: set when replay_quarantine replayed the message and its upsert brought its key''s marked row back (message_fate: revived): what the marked row held to order by (its delete''s source position or order value; empty without an order column); NULL otherwise';
CREATE TABLE kafka_sink.revived_offsets (
    pipeline_id bigint NOT NULL,
    batch_id    bigint NOT NULL,
    topic       text NOT NULL,
    partition   integer NOT NULL CHECK (partition >= 0),
    offsets     bigint[] NOT NULL CHECK (cardinality(offsets) > 0),
    held        text[] NOT NULL CHECK (cardinality(held) = cardinality(offsets)),
    PRIMARY KEY (pipeline_id, batch_id, topic, partition),
    FOREIGN KEY (pipeline_id, batch_id) REFERENCES kafka_sink.batches (pipeline_id, batch_id) ON DELETE CASCADE
);
SELECT pg_catalog.pg_extension_config_dump('kafka_sink.revived_offsets', '');
COMMENT ON TABLE kafka_sink.revived_offsets IS
'delete_mode soft: the offsets of each retained batch whose upsert brought its key''s marked row back, per partition (message_fate and message_fates tell them revived); pruned with the batch''s marker.';
COMMENT ON COLUMN kafka_sink.revived_offsets.offsets IS
    'The offsets of the batch''s messages of this topic and partition that brought a row marked deleted back (counted in batches.revived), in the order the batch applied them';
COMMENT ON COLUMN kafka_sink.revived_offsets.held IS
    'For each of offsets, what the marked row held to order by when the upsert overrode it (''source position 200'' that a change event''s delete or truncate left, ''v = 5'' that a tombstone kept; empty without an order column)';
ALTER TABLE kafka_sink.revived_offsets ENABLE ROW LEVEL SECURITY;
CREATE POLICY own_pipelines ON kafka_sink.revived_offsets
    USING (EXISTS (SELECT 1 FROM kafka_sink.pipeline_definitions p WHERE p.id = pipeline_id))
    WITH CHECK (EXISTS (SELECT 1 FROM kafka_sink.pipeline_definitions p WHERE p.id = pipeline_id));
REVOKE ALL ON kafka_sink.revived_offsets FROM PUBLIC;
GRANT SELECT, INSERT, UPDATE, DELETE ON kafka_sink.revived_offsets TO kafka_sink_admin;

-- change events: the deleted keys as text (jsonb's canonical form, which
-- key::text gives), compared bytewise: the btree upsert of each delete no
-- longer compares jsonb (docs/performance.md)
ALTER TABLE kafka_sink.cdc_deletions ALTER COLUMN key TYPE text COLLATE "C" USING key::text;
COMMENT ON COLUMN kafka_sink.cdc_deletions.key IS
    'The deleted key: its key columns'' values as a JSON array of texts, in jsonb''s canonical text (collation C: compared bytewise); ''null'' for the truncate; mode history''s truncates {"truncate": position}';
