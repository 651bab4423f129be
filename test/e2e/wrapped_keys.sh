#!/usr/bin/env bash
# wrapped_keys: key_format => 'json' with the plain envelope reads a key
# that Kafka Connect's JsonConverter wrapped with its schema
# ({"schema": {...}, "payload": {...}}, schemas.enable=true) under payload,
# as envelope => 'debezium' reads its keys.  A key field present at the top
# is read there; a bare key still works; a "payload" without a "schema"
# beside it is not unwrapped (the key is the user's own object).
. "$(dirname "$0")/../lib/common.sh"
setup_owner
T="e2e_wkey_$SFX"
"$HARNESS" topic-create "$T" 1 >/dev/null 2>&1
sql >/dev/null <<SQL
CREATE TABLE e2e.wkey_$SFX (tenant text, id int, qty int, PRIMARY KEY (tenant, id));
ALTER TABLE e2e.wkey_$SFX OWNER TO ks_e2e;
SET ROLE ks_e2e;
SELECT kafka_sink.create_pipeline(name => 'wkey_$SFX', bootstrap_servers => '$KS_BOOTSTRAP',
       subscribe => ARRAY['$T'], target => 'e2e.wkey_$SFX', starting_offsets => 'earliest',
       key_format => 'json');
SQL
KS='{"type":"struct","fields":[{"field":"tenant","type":"string"},{"field":"id","type":"int32"}],"optional":false}'
cat <<MSGS | kcat -P -b "$KS_BOOTSTRAP" -t "$T" -K '|' -Z
{"schema":$KS,"payload":{"tenant":"a","id":1}}|{"qty":10}
{"tenant":"a","id":2}|{"qty":20}
{"schema":$KS,"payload":{"tenant":"b","id":1}}|{"qty":30}
{"schema":$KS,"payload":{"tenant":"a","id":1}}|{"qty":11}
{"payload":{"tenant":"c","id":1}}|{"qty":40}
MSGS
check "caught up" t "$(sql -c "SELECT kafka_sink.wait('wkey_$SFX', '90 s')")"
check "wrapped keys unwrapped, bare keys as before, the same key merged" "a/1:11 a/2:20 b/1:30" \
      "$(sql -c "SELECT string_agg(tenant || '/' || id || ':' || qty, ' ' ORDER BY tenant, id) FROM e2e.wkey_$SFX")"
check "a payload without a schema beside it is not unwrapped" "null_key" \
      "$(sql -c "SELECT string_agg(q.reason, ',') FROM kafka_sink.quarantine q JOIN kafka_sink.pipelines p ON p.id = q.pipeline_id WHERE p.name = 'wkey_$SFX'")"
sql -c "SELECT kafka_sink.drop_pipeline('wkey_$SFX')" >/dev/null
finish
