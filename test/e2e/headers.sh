#!/usr/bin/env bash
# headers: Kafka headers and metadata as fields (docs/data-contract.md,
# "Headers and Kafka metadata").  One pipeline maps columns of several
# types to headers (text, uuid, numeric, bytea) and to kafka.topic,
# kafka.partition, kafka.offset, kafka.timestamp and kafka.key (as bytea
# and as text), takes a key column from a header, its event id and its
# schema version from headers, and a value field literally called
# "headers" through the escape \headers.x.  Produced with confluent-kafka
# (binary headers, a header without value, repeated headers, timestamps)
# and with kcat -H; the expected rows and quarantine reasons are computed
# by headers_produce.py from the messages alone.  Then a header that is not
# UTF-8 text for a text column is quarantined and lands after the column
# becomes bytea (replay reads the headers back from the quarantine), and a
# pipeline routed by {headers.tenant} writes two tables, quarantines a
# message without the header and one naming a missing table, and lands the
# latter by replay once the table exists; plain Avro values read their
# header columns the same way; message_fate says what it cannot trace.
# Create-time refusals are in
# pg_regress (sql/headers.sql).
. "$(dirname "$0")/../lib/common.sh"
setup_owner
confluent_python
MODEL="$E2E_DIR/headers_produce.py"

# ---- header-mapped columns, key, event id, schema version ----------------------------
T="e2e_hdr_$SFX"
P="hdr_$SFX"
"$HARNESS" topic-create "$T" 1 >/dev/null 2>&1
sql >/dev/null <<SQL
CREATE TABLE e2e.hdr_$SFX (
    tenant text NOT NULL, id int NOT NULL, qty int, trace uuid, raw bytea, amount numeric(10,2),
    note text, hv text, src_topic text, src_part int, src_off bigint, src_ts timestamptz,
    k bytea, ktext text, _kafka_topic text, _kafka_partition int, _kafka_offset bigint, _kafka_batch_id bigint,
    PRIMARY KEY (tenant, id));
ALTER TABLE e2e.hdr_$SFX OWNER TO ks_e2e;
SET ROLE ks_e2e;
SELECT kafka_sink.create_pipeline(name => '$P', bootstrap_servers => '$KS_BOOTSTRAP',
       subscribe => ARRAY['$T'], target => 'e2e.hdr_$SFX', starting_offsets => 'earliest',
       columns => '{"tenant": "headers.tenant", "trace": "headers.trace", "raw": "headers.bin",
                    "amount": "headers.amount", "note": "headers.note", "hv": "\\\\headers.x",
                    "src_topic": "kafka.topic", "src_part": "kafka.partition", "src_off": "kafka.offset",
                    "src_ts": "kafka.timestamp", "k": "kafka.key", "ktext": "kafka.key"}',
       schema_version_field => 'headers.v',
       schema_versions => '{"1": {}, "2": {"qty": "quantity"}}',
       event_id => 'headers.event_id', bronze => 'e2e.hdr_bronze_$SFX');
SQL
rows() {
    sql -c "SELECT string_agg(concat_ws('|', tenant, id, coalesce(qty::text, '~'), coalesce(trace::text, '~'),
                    coalesce(encode(raw, 'hex'), '~'), coalesce(amount::text, '~'), coalesce($1, '~'),
                    coalesce(hv, '~'), src_topic, src_part, src_off,
                    CASE WHEN src_off >= 10 AND src_ts BETWEEN now() - interval '1 day' AND now() THEN 'recent'
                         ELSE coalesce((extract(epoch FROM src_ts) * 1000)::bigint::text, '~') END,
                    coalesce(encode(k, 'hex'), '~'), coalesce(ktext, '~')), E'\n' ORDER BY tenant, id)
              FROM e2e.hdr_$SFX"
}
quarantined() {
    sql -c "SELECT coalesce(string_agg(q.message_offset || ':' || q.reason, ',' ORDER BY q.message_offset), '-')
              FROM kafka_sink.quarantine q JOIN kafka_sink.pipelines p ON p.id = q.pipeline_id
             WHERE p.name = '$1' AND q.replayed_at IS NULL"
}
for round in 1 2 3; do
    "$PY" "$MODEL" produce "$round" "$KS_BOOTSTRAP" "$T"
    check_caught_up "$P"
done
check "every message quarantined for the reason the model gives (missing key header, invalid header bytes, unknown header version)" \
      "$("$PY" "$MODEL" quarantine "$T")" "$(quarantined "$P")"
check "the dropped producer duplicates (header event ids) are no quarantine rows, and the pipeline runs" running \
      "$(sql -c "SELECT state FROM kafka_sink.status WHERE name = '$P'")"
check "a detail names the header that is not UTF-8 text" 1 \
      "$(sql -c "SELECT count(*) FROM kafka_sink.quarantine q JOIN kafka_sink.pipelines p ON p.id = q.pipeline_id
                  WHERE p.name = '$P' AND q.message_offset = 4 AND q.detail LIKE '%\"note\"%not UTF-8 text%'")"
# the fix: note becomes bytea; the replay reads the quarantined message's headers back
sql >/dev/null <<SQL
ALTER TABLE e2e.hdr_$SFX ALTER COLUMN note TYPE bytea USING convert_to(note, 'UTF8');
SET ROLE ks_e2e;
SELECT * FROM kafka_sink.replay_quarantine('$P', reason => 'invalid_value');
SQL
check "after the fix and the replay, the target equals the model (header columns of every type, header key, last of a repeated header, absent headers kept, null header, kafka.* fields, \\headers.x)" \
      "$("$PY" "$MODEL" rows "$T")" "$(rows "encode(note, 'hex')")"
check "the replay landed the binary header, the other faults remain" "3:null_key,7:unknown_schema_version,8:invalid_value" \
      "$(quarantined "$P")"
check "bronze keeps the binary header as the quarantine does" '"\\x00ff01"' \
      "$(sql -c "SELECT h->'value' FROM e2e.hdr_bronze_$SFX b, jsonb_array_elements(b.headers) h WHERE b.\"offset\" = 0 AND h->>'key' = 'bin'")"
# the key comes from the message's tenant header: message_fate reads it from
# bronze's headers, and finds the row that offset 2 is the source of
check "message_fate finds the row of a key taken from a header" \
      "applied|the current source of the row with key $(sql -c "SELECT jsonb_build_object('id', id, 'tenant', tenant) FROM e2e.hdr_$SFX WHERE src_off = 2")" \
      "$(sql -c "SELECT fate || '|' || detail FROM kafka_sink.message_fate('$P', '$T', 0, 2)")"
check "message_fate of a quarantined header message" "quarantined" \
      "$(sql -c "SELECT fate FROM kafka_sink.message_fate('$P', '$T', 0, 3)")"
sql -c "SELECT kafka_sink.drop_pipeline('$P')" >/dev/null

# ---- Avro values: the same header fields -------------------------------------------------
T3="e2e_hdra_$SFX"
"$HARNESS" topic-create "$T3" 1 >/dev/null 2>&1
SCHEMA="$("$PY" "$MODEL" avro "$KS_BOOTSTRAP" "$T3")"
sql >/dev/null <<SQL
CREATE TABLE e2e.hdra_$SFX (tenant text, id int, qty int, trace uuid, PRIMARY KEY (tenant, id));
ALTER TABLE e2e.hdra_$SFX OWNER TO ks_e2e;
SET ROLE ks_e2e;
SELECT kafka_sink.create_pipeline(name => 'hdra_$SFX', bootstrap_servers => '$KS_BOOTSTRAP',
       subscribe => ARRAY['$T3'], target => 'e2e.hdra_$SFX', starting_offsets => 'earliest',
       value_format => 'avro', value_schema => '$SCHEMA',
       columns => '{"tenant": "headers.tenant", "trace": "headers.trace"}');
SQL
check_caught_up "hdra_$SFX"
check "Avro values: a header key column and a header uuid column" \
      "a|1|10|0b1f1d3e-8c27-4b8a-9a55-c7e3a0d7f001 b|2|20|0b1f1d3e-8c27-4b8a-9a55-c7e3a0d7f001" \
      "$(sql -c "SELECT string_agg(concat_ws('|', tenant, id, qty, trace), ' ' ORDER BY tenant) FROM e2e.hdra_$SFX")"
sql -c "SELECT kafka_sink.drop_pipeline('hdra_$SFX')" >/dev/null

# ---- routing by a header ------------------------------------------------------------------
T2="e2e_hdrr_$SFX"
P2="hdrr_$SFX"
"$HARNESS" topic-create "$T2" 1 >/dev/null 2>&1
sql >/dev/null <<SQL
CREATE TABLE e2e.rt_${SFX}_a (id int PRIMARY KEY, qty int);
CREATE TABLE e2e.rt_${SFX}_b (id int PRIMARY KEY, qty int);
ALTER TABLE e2e.rt_${SFX}_a OWNER TO ks_e2e;
ALTER TABLE e2e.rt_${SFX}_b OWNER TO ks_e2e;
SET ROLE ks_e2e;
SELECT kafka_sink.create_pipeline(name => '$P2', bootstrap_servers => '$KS_BOOTSTRAP',
       subscribe => ARRAY['$T2'], target => 'e2e.rt_${SFX}_{headers.tenant}', starting_offsets => 'earliest',
       bronze => 'e2e.hdrr_bronze_$SFX');
SQL
hk() { kcat -P -b "$KS_BOOTSTRAP" -t "$T2" "$@"; }
echo '{"id": 1, "qty": 10}' | hk -H tenant=a
echo '{"id": 1, "qty": 20}' | hk -H tenant=b
echo '{"id": 2, "qty": 30}' | hk -H other=a
echo '{"id": 3, "qty": 40}' | hk -H tenant=zz
echo '{"id": 1, "qty": 11}' | hk -H tenant=b -H tenant=a
check_caught_up "$P2"
check "routed by the header: a" "1:11" "$(sql -c "SELECT string_agg(id || ':' || qty, ',' ORDER BY id) FROM e2e.rt_${SFX}_a")"
check "routed by the header: b" "1:20" "$(sql -c "SELECT string_agg(id || ':' || qty, ',' ORDER BY id) FROM e2e.rt_${SFX}_b")"
check "message_fate says it does not trace a table named by a header, instead of naming none" \
      "applied or superseded|a table named by a header or Kafka's metadata is not traced here" \
      "$(sql -c "SELECT fate || '|' || detail FROM kafka_sink.message_fate('$P2', '$T2', 0, 0)")"
check "no header, and a table that does not exist: no_target" "2:no_target,3:no_target" "$(quarantined "$P2")"
check "the detail of the missing header names it" 1 \
      "$(sql -c "SELECT count(*) FROM kafka_sink.quarantine q JOIN kafka_sink.pipelines p ON p.id = q.pipeline_id
                  WHERE p.name = '$P2' AND q.message_offset = 2 AND q.detail LIKE '%no header \"tenant\"%'")"
sql >/dev/null <<SQL
CREATE TABLE e2e.rt_${SFX}_zz (id int PRIMARY KEY, qty int);
ALTER TABLE e2e.rt_${SFX}_zz OWNER TO ks_e2e;
SET ROLE ks_e2e;
SELECT * FROM kafka_sink.replay_quarantine('$P2', reason => 'no_target');
SQL
check "replayed once the table exists (the header read back from the quarantine)" "3:40" \
      "$(sql -c "SELECT string_agg(id || ':' || qty, ',' ORDER BY id) FROM e2e.rt_${SFX}_zz")"
check "the message without the header stays quarantined" "2:no_target" "$(quarantined "$P2")"
sql -c "SELECT kafka_sink.drop_pipeline('$P2')" >/dev/null
finish
