-- kafka_sink: composite types (install only: a type is changed by ALTER TYPE
-- in an update script, src/sql/updates/).

-- The rows of kafka_sink.message_fates (70_lineage.sql).  A named type: a
-- RETURNS TABLE column may not share the name of a parameter, and topic and
-- partition are both.
CREATE TYPE kafka_sink.message_fate_row AS (topic text, partition integer, "offset" bigint, fate text,
                                            batch_id bigint, detail text, target text);
COMMENT ON TYPE kafka_sink.message_fate_row IS
'A row of kafka_sink.message_fates: a message''s coordinates, its fate, the batch that read it (or quarantined it), a detail and the table it went to.';
