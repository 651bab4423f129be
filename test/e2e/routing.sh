#!/usr/bin/env bash
# routing (issue 16): one pipeline writing many tables, with plain JSON values.
#  - target => '<schema>.{topic}': three topics into three tables; one batch
#    (one batch id, one checkpoint) covers rows of several tables; a topic
#    whose table does not exist is quarantined as no_target (its quarantine
#    rows name the table), a table the owner may not write as
#    target_refused; once the table is created (or granted),
#    replay_quarantine lands them; last_progress and status show counts per
#    target; the final state equals an independent model (last value per
#    key);
#  - a targets map: by topic first, then by the value's source schema.table
#    (looked up under payload for {"schema":...,"payload":...} values),
#    then the template '<schema>.{source.table}'; a message none names:
#    no_target;
#  - append mode over three tables picked by a value field, with kill -9 of
#    the worker mid-stream, repeatedly: every message lands exactly once in
#    the table its field names (compared with a model computed from what
#    was produced);
#  - create_targets and evolve => 'add_columns' with values carrying an
#    embedded schema ({"schema":..., "payload":...}): a missing table is
#    created (as the owner, keyed on the message key's fields), a new field
#    becomes a column, a changed type is quarantined as
#    schema_change_refused, a message without schema or key as no_target;
#    two workers creating the same tables at once both land their rows;
#    the recorded Debezium events (test/fixtures/debezium/json_schema)
#    create tables whose column types are the source's (cdc_workload.py).
#  - a table's checks are kept between batches (route.c): a table that
#    fits, then is altered (a mapped column dropped, INSERT revoked, the
#    role it wrote through revoked), is refused as target_refused by the
#    very next batch, and lands again once fixed (model: each message's
#    fate from the table's state when it was produced).
. "$(dirname "$0")/../lib/common.sh"
setup_owner
S="rt_$SFX"
TA="rt_a_$SFX"; TB="rt_b_$SFX"; TC="rt_c_$SFX"; TR="rt_r_$SFX"
TD="rt_d_$SFX"; TE="rt_e_$SFX"; TX="rt_x_$SFX"; TF="rt_f_$SFX"; TG="rt_g_$SFX"; TH="rt_h_$SFX"
P1="rt1_$SFX"; P2="rt2_$SFX"; P3="rt3_$SFX"; P4="rt4_$SFX"; P5="rt5_$SFX"; P6="rt6_$SFX"
W="$KS_RUN/routing_$SFX"
mkdir -p "$W"
for t in "$TA" "$TB" "$TC" "$TR" "$TD" "$TE"; do "$HARNESS" topic-create "$t" 2 >/dev/null 2>&1; done
"$HARNESS" topic-create "$TX" 3 >/dev/null 2>&1
"$HARNESS" topic-create "$TF" 1 >/dev/null 2>&1
"$HARNESS" topic-create "$TG" 4 >/dev/null 2>&1
"$HARNESS" topic-create "$TH" 1 >/dev/null 2>&1

# lineage columns: which batch wrote a row
LIN="_kafka_topic text, _kafka_partition int, _kafka_offset bigint, _kafka_batch_id bigint"
sql >/dev/null <<SQL
CREATE SCHEMA $S AUTHORIZATION ks_e2e;
-- a table the owner may not write (the superuser's, no grants)
CREATE TABLE $S.$TR (id bigint PRIMARY KEY, v text, $LIN);
SET ROLE ks_e2e;
CREATE TABLE $S.$TA (id bigint PRIMARY KEY, v text, $LIN);
CREATE TABLE $S.$TB (id bigint PRIMARY KEY, v text, $LIN);
SQL

# ---- '<schema>.{topic}' over four topics ------------------------------------------
# 200 messages per topic, keys 0..49 (4 versions each); keys map to partitions
python3 - "$W" "$TA" "$TB" "$TC" "$TR" <<'PY'
import json, sys
w, topics = sys.argv[1], sys.argv[2:]
for t in topics:
    with open(f"{w}/{t}.in", "w") as f:
        for i in range(200):
            k = i % 50
            f.write(f"{k}|{json.dumps({'id': k, 'v': f'{t}-{i}'})}\n")
PY
for t in "$TA" "$TB" "$TC" "$TR"; do produce "$t" < "$W/$t.in"; done

sql >/dev/null <<SQL
SET ROLE ks_e2e;
SELECT kafka_sink.create_pipeline(name => '$P1', bootstrap_servers => '$KS_BOOTSTRAP',
       subscribe => ARRAY['$TA', '$TB', '$TC', '$TR'], target => '$S.{topic}',
       key_format => 'string', starting_offsets => 'earliest',
       -- the first batch waits for all 800 messages, so that it holds
       -- every topic whatever the order the partitions are fetched in
       min_offsets_per_batch => 800, max_trigger_delay => '60 s');
SQL
poll "SELECT kafka_sink.wait('$P1', '60 s')" 90 || true

check "{topic}: table a has its 50 keys" 50 "$(sql -c "SELECT count(*) FROM $S.$TA")"
check "{topic}: table b has its 50 keys" 50 "$(sql -c "SELECT count(*) FROM $S.$TB")"
check "{topic}: each row is the last version of its key (model: the last message per key)" "50|50" \
      "$(sql -c "SELECT (SELECT count(*) FILTER (WHERE v = format('$TA-%s', 150 + id)) FROM $S.$TA) || '|' ||
                        (SELECT count(*) FILTER (WHERE v = format('$TB-%s', 150 + id)) FROM $S.$TB)")"
check "{topic}: one batch id wrote rows of both tables" t \
      "$(sql -c "SELECT EXISTS (SELECT _kafka_batch_id FROM $S.$TA INTERSECT SELECT _kafka_batch_id FROM $S.$TB)")"
check "{topic}: that batch's one checkpoint marker covers both topics" t \
      "$(sql -c "SELECT bool_or(b.ranges @> '[{\"topic\": \"$TA\"}]' AND b.ranges @> '[{\"topic\": \"$TB\"}]')
                   FROM kafka_sink.batches b JOIN kafka_sink.pipelines p ON p.id = b.pipeline_id
                  WHERE p.name = '$P1'
                    AND b.batch_id IN (SELECT _kafka_batch_id FROM $S.$TA INTERSECT SELECT _kafka_batch_id FROM $S.$TB)")"
check "{topic}: every message of the four topics is checkpointed" 800 \
      "$(sql -c "SELECT sum(o.next_offset) FROM kafka_sink.offsets o JOIN kafka_sink.pipelines p ON p.id = o.pipeline_id WHERE p.name = '$P1'")"
check "{topic}: a missing table quarantines its 200 messages as no_target, naming the table" \
      "no_target|$S.$TC|200" \
      "$(sql -c "SELECT q.reason, q.target, count(*) FROM kafka_sink.quarantine q JOIN kafka_sink.pipelines p ON p.id = q.pipeline_id
                  WHERE p.name = '$P1' AND q.topic = '$TC' GROUP BY 1, 2")"
check "{topic}: a table the owner may not write quarantines as target_refused" \
      "target_refused|$S.$TR|200|t" \
      "$(sql -c "SELECT q.reason, q.target, count(*), bool_and(q.detail LIKE 'permission denied%') FROM kafka_sink.quarantine q JOIN kafka_sink.pipelines p ON p.id = q.pipeline_id
                  WHERE p.name = '$P1' AND q.topic = '$TR' GROUP BY 1, 2")"
check "{topic}: the pipeline goes on (running, no error)" "running|" \
      "$(sql -c "SELECT state, coalesce(last_error, '') FROM kafka_sink.status WHERE name = '$P1'")"
# per-target counts, summed over the batches (the last batch may be a small one)
check "{topic}: progress records count per target (a, b inserted+updated 200 each; c, r quarantined 200 each)" \
      "$S.$TA:200:0|$S.$TB:200:0|$S.$TC:0:200|$S.$TR:0:200" \
      "$(sql -c "SELECT string_agg(format('%s:%s:%s', k, ins_upd, q), '|' ORDER BY k) FROM (
                   SELECT t.key AS k,
                          sum((t.value->>'inserted')::int + (t.value->>'updated')::int + (t.value->>'superseded')::int) AS ins_upd,
                          sum((t.value->>'quarantined')::int) AS q
                     FROM kafka_sink.batches b JOIN kafka_sink.pipelines p ON p.id = b.pipeline_id,
                          jsonb_each(b.progress->'sink'->'targets') t
                    WHERE p.name = '$P1' GROUP BY t.key) x")"
check "{topic}: last_progress and status show the last batch's targets" t \
      "$(sql -c "SELECT kafka_sink.last_progress('$P1')->'sink'->'targets' IS NOT NULL
                        AND kafka_sink.last_progress('$P1')->'sink'->'targets' = s.last_batch_targets
                   FROM kafka_sink.status s WHERE s.name = '$P1'")"

# the table created (and the other granted): replay lands them
sql >/dev/null <<SQL
GRANT SELECT, INSERT, UPDATE ON $S.$TR TO ks_e2e;
SET ROLE ks_e2e;
CREATE TABLE $S.$TC (id bigint PRIMARY KEY, v text, $LIN);
SQL
check "replay_quarantine(target => the created table) lands its 200 only" "200|0" \
      "$(sql -c "SET ROLE ks_e2e" -c "SELECT replayed || '|' || still_failing FROM kafka_sink.replay_quarantine('$P1', target => '$S.$TC')")"
check "replay_quarantine of the rest after the grant: 200 land" "200|0" \
      "$(sql -c "SET ROLE ks_e2e" -c "SELECT replayed || '|' || still_failing FROM kafka_sink.replay_quarantine('$P1')")"
check "replayed: table c has its 50 keys at their last version" "50|50" \
      "$(sql -c "SELECT count(*), count(*) FILTER (WHERE v = format('$TC-%s', 150 + id)) FROM $S.$TC")"
check "replayed: table r has its 50 keys at their last version" "50|50" \
      "$(sql -c "SELECT count(*), count(*) FILTER (WHERE v = format('$TR-%s', 150 + id)) FROM $S.$TR")"
# new messages now go straight to the new table (one message is a batch
# now: the first batch's min_offsets_per_batch 800 would hold it for
# max_trigger_delay's 60 s, as long as the poll below)
sql -c "SET ROLE ks_e2e; SELECT kafka_sink.alter_pipeline('$P1', min_offsets_per_batch => 1)" > /dev/null
echo '7|{"id": 7, "v": "after"}' | produce "$TC"
poll "SELECT v = 'after' FROM $S.$TC WHERE id = 7" 60 || true
check "after the table exists, new messages of its topic land directly" after "$(sql -c "SELECT v FROM $S.$TC WHERE id = 7")"

# ---- a targets map, then the template -----------------------------------------------
sql >/dev/null <<SQL
SET ROLE ks_e2e;
CREATE TABLE $S.d_tab (id bigint PRIMARY KEY, v text);
CREATE TABLE $S.items (id bigint PRIMARY KEY, v text);
CREATE TABLE $S.e_tab (id bigint PRIMARY KEY, v text);
-- a composite key, which key_format string cannot feed (the data contract)
CREATE TABLE $S.composite (id bigint, v text, PRIMARY KEY (id, v));
SQL
# values wrapped as {"schema":...,"payload":...}: routing reads payload.source.*,
# the columns are mapped from payload
{
    echo '1|{"schema": {"type": "struct"}, "payload": {"id": 1, "v": "d1", "source": {"schema": "inv", "table": "e_tab"}}}'
} | produce "$TD"
{
    echo '1|{"schema": {"type": "struct"}, "payload": {"id": 1, "v": "items1", "source": {"schema": "inv", "table": "items"}}}'
    echo '2|{"schema": {"type": "struct"}, "payload": {"id": 2, "v": "e2", "source": {"schema": "other", "table": "e_tab"}}}'
    echo '3|{"schema": {"type": "struct"}, "payload": {"id": 3, "v": "none", "source": {"schema": "other"}}}'
    echo '4|{"id": 4, "v": "top", "source": {"schema": "x", "table": "nope"}}'
    echo '5|{"schema": {"type": "struct"}, "payload": {"id": 5, "v": "c", "source": {"schema": "inv", "table": "composite"}}}'
} | produce "$TE"
sql >/dev/null <<SQL
SET ROLE ks_e2e;
SELECT kafka_sink.create_pipeline(name => '$P2', bootstrap_servers => '$KS_BOOTSTRAP',
       subscribe => ARRAY['$TD', '$TE'], target => '$S.{source.table}',
       targets => '{"$TD": "$S.d_tab", "inv.items": "$S.items", "inv.composite": "$S.composite"}',
       columns => '{"id": "payload.id", "v": "payload.v"}',
       key_format => 'string', starting_offsets => 'earliest');
SQL
poll "SELECT kafka_sink.wait('$P2', '60 s')" 90 || true
check "map by topic wins over the value's source" "1|d1" "$(sql -c "SELECT id || '|' || v FROM $S.d_tab")"
check "map by source schema.table (under payload)" "1|items1" "$(sql -c "SELECT id || '|' || v FROM $S.items")"
check "the template for a source the map does not name (under payload)" "2|e2" "$(sql -c "SELECT id || '|' || v FROM $S.e_tab")"
check "no table named, or a table that does not exist: no_target (naming the table when there is one); a target against the data contract: target_refused" \
      "3|no_target|;4|no_target|$S.nope;5|target_refused|$S.composite|key_format string needs exactly one key column" \
      "$(sql -c "SELECT string_agg(convert_from(q.key, 'UTF8') || '|' || q.reason || '|' || coalesce(q.target, '')
                                   || CASE WHEN q.reason = 'target_refused' THEN '|' || q.detail ELSE '' END, ';'
                                   ORDER BY convert_from(q.key, 'UTF8'))
                   FROM kafka_sink.quarantine q JOIN kafka_sink.pipelines p ON p.id = q.pipeline_id
                  WHERE p.name = '$P2'")"

# ---- append over three tables, kill -9 of the worker mid-stream --------------------
sql >/dev/null <<SQL
SET ROLE ks_e2e;
CREATE TABLE $S.ap_one (id bigint, kind text, $LIN);
CREATE TABLE $S.ap_two (id bigint, kind text, $LIN);
CREATE TABLE $S.ap_three (id bigint, kind text, $LIN);
SELECT kafka_sink.create_pipeline(name => '$P3', bootstrap_servers => '$KS_BOOTSTRAP',
       subscribe => ARRAY['$TX'], target => '$S.ap_{kind}', mode => 'append',
       max_offsets_per_batch => 500, starting_offsets => 'earliest');
SQL
N=30000
python3 - "$W/x.in" "$N" <<'PY'
import json, random, sys
path, n = sys.argv[1], int(sys.argv[2])
random.seed(16)
kinds = ['one', 'two', 'three']
with open(path, 'w') as f:
    for i in range(n):
        f.write(f"{i}|{json.dumps({'id': i, 'kind': random.choice(kinds)})}\n")
PY
# the model: how many messages of each kind were produced
model="$(python3 -c "
import json, collections, sys
c = collections.Counter(json.loads(l.split('|', 1)[1])['kind'] for l in open('$W/x.in'))
print('|'.join(f'{k}:{c[k]}' for k in sorted(c)))")"
split -l $((N / 6)) "$W/x.in" "$W/x.part."
kills=0
for part in "$W"/x.part.*; do
    produce "$TX" < "$part"
    sleep 0.$((RANDOM % 8))
    pid="$(worker_pid "$P3")"
    if [ -n "$pid" ] && kill -9 "$pid" 2>/dev/null; then
        kills=$((kills + 1))
        sleep 1
        until sql -c "SELECT 1" >/dev/null 2>&1; do sleep 0.5; done
    fi
done
check "the worker was killed mid-stream at least 3 times" t "$([ "$kills" -ge 3 ] && echo t || echo "f ($kills)")"
poll "SELECT coalesce((SELECT sum(o.next_offset) FROM kafka_sink.offsets o JOIN kafka_sink.pipelines p ON p.id = o.pipeline_id WHERE p.name = '$P3'), 0) = $N" 300 || true
check "after the kills, every message is checkpointed" "$N" \
      "$(sql -c "SELECT sum(o.next_offset) FROM kafka_sink.offsets o JOIN kafka_sink.pipelines p ON p.id = o.pipeline_id WHERE p.name = '$P3'")"
check "exactly once over all targets: each table has the model's count of its kind" "$model" \
      "$(sql -c "SELECT string_agg(kind || ':' || n, '|' ORDER BY kind) FROM (
                   SELECT kind, count(*) AS n FROM (SELECT kind FROM $S.ap_one UNION ALL SELECT kind FROM $S.ap_two
                                                    UNION ALL SELECT kind FROM $S.ap_three) x GROUP BY kind) y")"
check "exactly once: no message twice, each in the table its field names" "$N|$N|0" \
      "$(sql -c "SELECT count(*) || '|' || count(DISTINCT (_kafka_partition, _kafka_offset)) || '|' || count(*) FILTER (WHERE t <> 'ap_' || kind)
                   FROM (SELECT 'ap_one' AS t, * FROM $S.ap_one UNION ALL SELECT 'ap_two', * FROM $S.ap_two
                         UNION ALL SELECT 'ap_three', * FROM $S.ap_three) x")"
check "exactly once: every row's batch has one marker (the rows of a batch span the tables)" t \
      "$(sql -c "SELECT count(DISTINCT x._kafka_batch_id) = count(DISTINCT b.batch_id)
                        AND bool_or(x.ntables > 1)
                   FROM (SELECT _kafka_batch_id, count(DISTINCT t) AS ntables FROM (
                           SELECT 'one' AS t, _kafka_batch_id FROM $S.ap_one UNION ALL SELECT 'two', _kafka_batch_id FROM $S.ap_two
                           UNION ALL SELECT 'three', _kafka_batch_id FROM $S.ap_three) y GROUP BY 1) x
                   LEFT JOIN (kafka_sink.batches b JOIN kafka_sink.pipelines p ON p.id = b.pipeline_id AND p.name = '$P3')
                          ON b.batch_id = x._kafka_batch_id")"

# ---- create_targets and evolve => 'add_columns' ---------------------------------------
python3 - "$W/f.in" <<'PY'
import json, sys
def field(name, typ, sem=None):
    f = {"field": name, "type": typ, "optional": name != "id"}
    if sem:
        f["name"] = sem
    return f
S1 = [field("id", "int64"), field("name", "string"), field("price", "float64"),
      field("meta", "string", "io.debezium.data.Json"), field("day", "int32", "io.debezium.time.Date")]
S2 = S1 + [field("extra", "string")]
S3 = [field("id", "int64"), field("name", "string"), field("price", "string")]
KEY = {"type": "struct", "fields": [field("id", "int64")]}
def msg(schema, payload, key=True, table="created_t"):
    payload = dict(payload, source={"schema": "inv", "table": table})
    k = json.dumps({"schema": KEY, "payload": {"id": payload["id"]}}) if key else "plainkey"
    v = json.dumps({"schema": {"type": "struct", "fields": schema}, "payload": payload}) if schema else json.dumps(payload)
    return f"{k}|{v}"
with open(sys.argv[1], "w") as f:
    for line in [
        msg(S1, {"id": 1, "name": "one", "price": 1.5}),
        msg(S1, {"id": 2, "name": "two", "price": 2.5}),
        msg(S2, {"id": 1, "name": "one again", "price": 1.75, "extra": "new field"}),
        msg(S3, {"id": 3, "name": "three", "price": "3.5"}),
        msg(S1, {"id": 4, "name": "no key"}, key=False, table="nokey_t"),
        msg(None, {"id": 5, "name": "no schema"}, table="noschema_t"),
    ]:
        f.write(line + "\n")
PY
produce "$TF" -p 0 < "$W/f.in"
sql >/dev/null <<SQL
SET ROLE ks_e2e;
SELECT kafka_sink.create_pipeline(name => '$P4', bootstrap_servers => '$KS_BOOTSTRAP',
       subscribe => ARRAY['$TF'], target => '$S.{source.table}',
       create_targets => true, evolve => 'add_columns', starting_offsets => 'earliest');
SQL
poll "SELECT kafka_sink.wait('$P4', '60 s')" 90 || true
check "create_targets: the table is created as the owner, keyed on the message key" "ks_e2e|PRIMARY KEY (id)" \
      "$(sql -c "SELECT c.relowner::regrole || '|' || pg_get_constraintdef(k.oid) FROM pg_class c JOIN pg_constraint k ON k.conrelid = c.oid
                  WHERE c.oid = to_regclass('$S.created_t')")"
check "create_targets: columns from the embedded schema (semantic types), the source position, then evolve's column" \
      "id bigint,name text,price double precision,meta jsonb,day date,_kafka_source_position numeric,extra text" \
      "$(sql -c "SELECT string_agg(attname || ' ' || format_type(atttypid, atttypmod), ',' ORDER BY attnum) FROM pg_attribute
                  WHERE attrelid = to_regclass('$S.created_t') AND attnum > 0 AND NOT attisdropped")"
check "create_targets and evolve: the rows, the new field filled (read under payload)" "1|one again|1.75|new field;2|two|2.5|" \
      "$(sql -c "SELECT string_agg(id || '|' || name || '|' || price || '|' || coalesce(extra, ''), ';' ORDER BY id) FROM $S.created_t")"
check "a changed type is refused (schema_change_refused), no key or no schema is no_target" \
      "3|schema_change_refused|$S.created_t|true;4|no_target|$S.nokey_t|true;5|no_target|$S.noschema_t|true" \
      "$(sql -c "SELECT string_agg(q.message_offset || '|' || q.reason || '|' || q.target || '|' ||
                                   (q.detail LIKE CASE q.message_offset WHEN 3 THEN 'Field price is now text%'
                                                                        WHEN 4 THEN '%primary key is unknown%'
                                                                        ELSE '%no embedded schema%' END), ';' ORDER BY q.message_offset)
                   FROM kafka_sink.quarantine q JOIN kafka_sink.pipelines p ON p.id = q.pipeline_id WHERE p.name = '$P4'")"
check "the tables it could not create do not exist" "|" \
      "$(sql -c "SELECT coalesce(to_regclass('$S.nokey_t')::text, '') || '|' || coalesce(to_regclass('$S.noschema_t')::text, '')")"
check "create_targets: the pipeline goes on" "running|" \
      "$(sql -c "SELECT state, coalesce(last_error, '') FROM kafka_sink.status WHERE name = '$P4'")"

# two workers, four partitions, three new tables: the workers' first batches
# create the same tables at once (the loser finds the winner's table)
python3 - "$W/g.in" <<'PY'
import json, sys
fields = [{"field": "id", "type": "int64", "optional": False}, {"field": "v", "type": "string"}]
key_schema = {"type": "struct", "fields": fields[:1]}
with open(sys.argv[1], "w") as f:
    for i in range(3000):
        t = ["race_a", "race_b", "race_c"][i % 3]
        k = json.dumps({"schema": key_schema, "payload": {"id": i}})
        v = json.dumps({"schema": {"type": "struct", "fields": fields},
                        "payload": {"id": i, "v": f"v{i}", "source": {"table": t}}})
        f.write(f"{k}|{v}\n")
PY
produce "$TG" < "$W/g.in"
# event triggers of the test (a superuser's): every CREATE TABLE attempt of
# the pipeline's workers is counted (a sequence: not undone by the loser's
# rollback), and a created table keeps its transaction open a while, so
# that the other worker's CREATE of the same table waits for it and fails
sql >/dev/null <<SQL
CREATE SEQUENCE $S.create_attempts;
GRANT USAGE ON SEQUENCE $S.create_attempts TO ks_e2e;
CREATE FUNCTION $S.count_create() RETURNS event_trigger LANGUAGE plpgsql AS \$\$
BEGIN
    IF current_setting('application_name') LIKE 'kafka_sink: $P5/%' THEN
        PERFORM nextval('$S.create_attempts');
    END IF;
END \$\$;
CREATE FUNCTION $S.slow_create() RETURNS event_trigger LANGUAGE plpgsql AS \$\$
BEGIN
    IF current_setting('application_name') LIKE 'kafka_sink: $P5/%' THEN
        PERFORM pg_sleep(1.5);
    END IF;
END \$\$;
CREATE EVENT TRIGGER count_create_$SFX ON ddl_command_start WHEN TAG IN ('CREATE TABLE') EXECUTE FUNCTION $S.count_create();
CREATE EVENT TRIGGER slow_create_$SFX ON ddl_command_end WHEN TAG IN ('CREATE TABLE') EXECUTE FUNCTION $S.slow_create();
SQL
sql >/dev/null <<SQL
SET ROLE ks_e2e;
SELECT kafka_sink.create_pipeline(name => '$P5', bootstrap_servers => '$KS_BOOTSTRAP',
       subscribe => ARRAY['$TG'], target => '$S.{source.table}', create_targets => true,
       workers => 2, starting_offsets => 'earliest');
SQL
poll "SELECT kafka_sink.wait('$P5', '60 s')" 120 || true
check "two workers creating the same tables: every row lands once, nothing quarantined, no error" "1000|1000|1000|0|running|" \
      "$(sql -c "SELECT (SELECT count(*) FROM $S.race_a) || '|' || (SELECT count(*) FROM $S.race_b) || '|' ||
                        (SELECT count(*) FROM $S.race_c) || '|' ||
                        (SELECT count(*) FROM kafka_sink.quarantine q JOIN kafka_sink.pipelines p ON p.id = q.pipeline_id WHERE p.name = '$P5')
                        || '|' || state || '|' || coalesce(last_error, '') FROM kafka_sink.status WHERE name = '$P5'")"

check "the race happened: a table's CREATE was attempted by both workers" t \
      "$(sql -c "SELECT CASE WHEN last_value > 3 THEN 't' ELSE 'f (' || last_value || ' attempts)' END FROM $S.create_attempts")"
sql -c "DROP EVENT TRIGGER count_create_$SFX" -c "DROP EVENT TRIGGER slow_create_$SFX" >/dev/null

# the recorded Debezium events (JsonConverter with schemas): the tables
# created from them have the source tables' types and keys (the rows
# themselves are the debezium envelope's job: here they are quarantined)
python3 - "$REPO/test/fixtures/debezium/json_schema" > "$W/h.in" <<'PY'
import json, sys
for t in ("accounts", "products", "order_lines"):
    d = json.load(open(f"{sys.argv[1]}/{t}.c.json"))
    print(json.dumps(d["key"]) + "\t" + json.dumps(d["value"]))
PY
kcat -P -b "$KS_BOOTSTRAP" -t "$TH" -K $'\t' < "$W/h.in"
sql >/dev/null <<SQL
SET ROLE ks_e2e;
SELECT kafka_sink.create_pipeline(name => '$P6', bootstrap_servers => '$KS_BOOTSTRAP',
       subscribe => ARRAY['$TH'], target => '$S.{source.table}', create_targets => true,
       starting_offsets => 'earliest');
SQL
poll "SELECT kafka_sink.wait('$P6', '60 s')" 90 || true
shape() {  # the columns and the primary key of a table
    sql -c "SELECT string_agg(attname || ' ' || format_type(atttypid, atttypmod), ', ' ORDER BY attnum)
                   || ' | ' || (SELECT pg_get_constraintdef(oid) FROM pg_constraint WHERE conrelid = to_regclass('$S.$1') AND contype = 'p')
              FROM pg_attribute WHERE attrelid = to_regclass('$S.$1') AND attnum > 0 AND NOT attisdropped"
}
check "Debezium accounts: the source's types (Decimal, VariableScaleDecimal, Date, ZonedTimestamp, Json) and key" \
      "id integer, name text, balance numeric(12,2), rate numeric, opened date, updated_at timestamp with time zone, active boolean, meta jsonb, _kafka_source_position numeric | PRIMARY KEY (id)" \
      "$(shape accounts)"
check "Debezium products: text key, Uuid, MicroTimestamp, MicroTime, double" \
      "sku text, title text, price numeric(10,3), uid uuid, created timestamp(6) without time zone, open_at time(6) without time zone, weight double precision, tags jsonb, _kafka_source_position numeric | PRIMARY KEY (sku)" \
      "$(shape products)"
check "Debezium order_lines: composite key, int64, Time (time(3))" \
      "order_id bigint, line_no integer, sku text, qty integer, amount numeric(14,4), shipped_at timestamp with time zone, ship_date date, ship_time time(3) without time zone, note text, _kafka_source_position numeric | PRIMARY KEY (order_id, line_no)" \
      "$(shape order_lines)"

# a lineage view of one routed table
check "create_lineage_view of one table of a routed pipeline: its 50 rows, each with its batch" "50|50" \
      "$(sql -c "SET ROLE ks_e2e" -c "SELECT kafka_sink.create_lineage_view('$P1', target => '$S.$TA') IS NOT NULL" >/dev/null;
         sql -c "SELECT count(*) || '|' || count(*) FILTER (WHERE _kafka_batch_id IS NOT NULL) FROM $S.${TA}_lineage")"

# ---- the checks kept between batches: a change of the table is seen by the next batch ----
TI="rt_i_$SFX"; P7="rt7_$SFX"; RW="rt_writer_$SFX"
"$HARNESS" topic-create "$TI" 1 >/dev/null 2>&1
sql >/dev/null <<SQL
CREATE ROLE $RW NOLOGIN;
-- the superuser's table: ks_e2e writes it through grants
CREATE TABLE $S.$TI (id bigint PRIMARY KEY, v text, w text);
GRANT SELECT, INSERT, UPDATE ON $S.$TI TO ks_e2e;
SET ROLE ks_e2e;
SELECT kafka_sink.create_pipeline(name => '$P7', bootstrap_servers => '$KS_BOOTSTRAP',
       subscribe => ARRAY['$TI'], target => '$S.{topic}', key_format => 'string',
       columns => '{"id": "id", "v": "v", "w": "w"}', starting_offsets => 'earliest');
SQL
# one message, one batch: wait until it lands or is quarantined
# (TOPIC PIPELINE ID VALUE; the table is named by the topic)
one_message() {
    echo "$3|$4" | produce "$1"
    poll "SELECT count(*) > 0 FROM $S.$1 WHERE id = $3
          UNION ALL SELECT true FROM kafka_sink.quarantine q JOIN kafka_sink.pipelines p ON p.id = q.pipeline_id
           WHERE p.name = '$2' AND convert_from(q.key, 'UTF8') = '$3' ORDER BY 1 DESC LIMIT 1" 60 || true
}
step() { one_message "$TI" "$P7" "$1" "{\"id\": $1, \"v\": \"v$1\", \"w\": \"w$1\"}"; }
step 1; step 2
sql -c "ALTER TABLE $S.$TI DROP COLUMN w" >/dev/null
step 3
sql -c "ALTER TABLE $S.$TI ADD COLUMN w text" >/dev/null
step 4; step 5
sql -c "REVOKE INSERT ON $S.$TI FROM ks_e2e" >/dev/null
step 6
sql -c "GRANT INSERT ON $S.$TI TO $RW" -c "GRANT $RW TO ks_e2e" >/dev/null
step 7; step 8
sql -c "REVOKE $RW FROM ks_e2e" >/dev/null
step 9
sql -c "GRANT $RW TO ks_e2e" >/dev/null
step 10
# the model: each message's fate from the table's state when it was produced
model="1|true;2|true;3|target_refused;4|true;5|true;6|target_refused;7|true;8|true;9|target_refused;10|true"
check "a table that fits, then is altered (a mapped column dropped, INSERT revoked, its writer role revoked): the very next batch refuses it, the one after the fix lands" \
      "$model" \
      "$(sql -c "SELECT string_agg(k || '|' || coalesce(q.reason, (t.id IS NOT NULL)::text), ';' ORDER BY k)
                   FROM generate_series(1, 10) k
                   LEFT JOIN $S.$TI t ON t.id = k
                   LEFT JOIN (SELECT convert_from(q.key, 'UTF8')::int AS key, q.reason
                                FROM kafka_sink.quarantine q JOIN kafka_sink.pipelines p ON p.id = q.pipeline_id
                               WHERE p.name = '$P7') q ON q.key = k")"
check "those refusals name what no longer fits" "3|true;6|true;9|true" \
      "$(sql -c "SELECT string_agg(convert_from(q.key, 'UTF8') || '|' || (q.detail ~ CASE convert_from(q.key, 'UTF8')
                          WHEN '3' THEN 'maps column \"w\"' ELSE 'permission|privilege|may not|INSERT' END)::text, ';'
                          ORDER BY convert_from(q.key, 'UTF8'))
                   FROM kafka_sink.quarantine q JOIN kafka_sink.pipelines p ON p.id = q.pipeline_id WHERE p.name = '$P7'")"
check "the pipeline goes on (running, no error)" "running|" \
      "$(sql -c "SELECT state, coalesce(last_error, '') FROM kafka_sink.status WHERE name = '$P7'")"

# ... and a function the computed column calls losing its EXECUTE: the
# next batch refuses the table (not the apply failing the pipeline), and
# lands again once it is granted back
TJ="rt_j_$SFX"; P8="rt8_$SFX"
"$HARNESS" topic-create "$TJ" 1 >/dev/null 2>&1
sql >/dev/null <<SQL
SET ROLE ks_e2e;
CREATE FUNCTION $S.up(text) RETURNS text LANGUAGE sql IMMUTABLE AS 'SELECT upper(\$1)';
CREATE TABLE $S.$TJ (id bigint PRIMARY KEY, v text, u text);
SELECT kafka_sink.create_pipeline(name => '$P8', bootstrap_servers => '$KS_BOOTSTRAP',
       subscribe => ARRAY['$TJ'], target => '$S.{topic}', key_format => 'string',
       starting_offsets => 'earliest', computed => '{"u": "$S.up(v)"}');
SQL
step8() { one_message "$TJ" "$P8" "$1" "{\"id\": $1, \"v\": \"v$1\"}"; }
step8 1; step8 2
sql -c "SET ROLE ks_e2e" -c "REVOKE EXECUTE ON FUNCTION $S.up(text) FROM PUBLIC, ks_e2e" >/dev/null
step8 3
sql -c "SET ROLE ks_e2e" -c "GRANT EXECUTE ON FUNCTION $S.up(text) TO ks_e2e" >/dev/null
step8 4
check "a computed column's function losing EXECUTE: the next batch refuses the table, the one after the grant lands; the pipeline runs" \
      "1|V1;2|V2;3|target_refused;4|V4|running" \
      "$(sql -c "SELECT string_agg(k || '|' || coalesce(q.reason, t.u, '?'), ';' ORDER BY k)
                        || '|' || (SELECT state FROM kafka_sink.status WHERE name = '$P8')
                   FROM generate_series(1, 4) k
                   LEFT JOIN $S.$TJ t ON t.id = k
                   LEFT JOIN (SELECT convert_from(q.key, 'UTF8')::int AS key, q.reason
                                FROM kafka_sink.quarantine q JOIN kafka_sink.pipelines p ON p.id = q.pipeline_id
                               WHERE p.name = '$P8') q ON q.key = k")"

for p in "$P1" "$P2" "$P3" "$P4" "$P5" "$P6" "$P7" "$P8"; do sql -c "SELECT kafka_sink.drop_pipeline('$p')" >/dev/null 2>&1 || true; done
sql -c "DROP OWNED BY $RW" -c "DROP ROLE $RW" >/dev/null 2>&1 || true
finish
