#!/usr/bin/env bash
# schema_change_refusals (issue 23): one change event never disables a
# table nor stops a routed pipeline through the DDL its schema asks for.
# A Debezium pipeline with create_targets and evolve => 'add_columns'
# (JsonConverter values with embedded schemas):
#  - create_targets: a first event whose schema has a field _kafka_partition
#    is quarantined (schema_change_refused); the table is created from the
#    next event of it;
#  - evolve: events whose schemas would make a lineage column
#    (_kafka_partition boolean, _kafka_offset), the source position under
#    another case, a soft-delete or history name (_deleted, _valid_from), a
#    case or quote variant of the key, a name longer than 63 bytes, 1,700
#    new fields, or change the key column's type are each quarantined as
#    schema_change_refused naming the column; no such column is made; the
#    good events before and after them, of the same table and of others,
#    apply; a good new field still becomes a column;
#  - a table the owner may write but not alter: the event that needs a
#    column is quarantined, the others apply; replay lands it once the
#    table is the owner's;
#  - a table another session holds locked: the events whose ALTER waits past
#    kafka_sink.ddl_lock_timeout are quarantined (the batch waits once, not
#    once per schema), the rest applies; once the lock is gone,
#    replay_quarantine lands them (their columns added);
#  - create_targets behind a lock (a test event trigger locks a table another
#    session holds): each event is quarantined, the batch waits once, not
#    once per attempt; replay makes the table once the lock is gone;
#  - the pipeline stays running throughout.
. "$(dirname "$0")/../lib/common.sh"
setup_owner
S="scr_$SFX"; T="scr_$SFX"; P="scr_$SFX"
W="$KS_RUN/schema_change_refusals_$SFX"
mkdir -p "$W"
"$HARNESS" topic-create "$T" 1 >/dev/null 2>&1
sql >/dev/null <<SQL
CREATE SCHEMA $S AUTHORIZATION ks_e2e;
-- a table the owner may write but not alter (the superuser's)
CREATE TABLE $S.notmine (id integer PRIMARY KEY, name text, _kafka_source_position numeric);
GRANT SELECT, INSERT, UPDATE, DELETE ON $S.notmine TO ks_e2e;
SQL

# ev TABLE ID LSN [EXTRA_FIELDS_JSON [ID_TYPE]]: one Debezium update event
# of TABLE, with the row's schema (id, name) plus EXTRA_FIELDS (a JSON list
# of [name, connect type] pairs; their values are strings or numbers)
cat > "$W/ev.py" <<'PY'
import json, sys
def ev(table, i, lsn, extra=(), id_type="int32"):
    fields = [{"field": "id", "type": id_type, "optional": False},
              {"field": "name", "type": "string", "optional": True}]
    fields += [{"field": n, "type": t, "optional": True} for n, t in extra]
    row = {"id": str(i) if id_type == "string" else i, "name": f"{table}-{i}@{lsn}"}
    for n, t in extra:
        row[n] = True if t == "boolean" else 7 if t.startswith("int") else f"v{lsn}"
    src = {"type": "struct", "field": "source", "fields": [
        {"field": "connector", "type": "string"}, {"field": "lsn", "type": "int64"},
        {"field": "ts_ms", "type": "int64"}, {"field": "schema", "type": "string"},
        {"field": "table", "type": "string"}]}
    value = {"schema": {"type": "struct", "name": "dbz.Envelope", "fields": [
                 {"type": "struct", "field": "before", "optional": True, "fields": fields},
                 {"type": "struct", "field": "after", "optional": True, "fields": fields},
                 src, {"field": "op", "type": "string"}]},
             "payload": {"before": None, "after": row, "op": "u",
                         "source": {"connector": "postgresql", "lsn": lsn, "ts_ms": 1700000000000,
                                    "schema": "public", "table": table}}}
    key = {"schema": {"type": "struct", "fields": [{"field": "id", "type": id_type, "optional": False}]},
           "payload": {"id": row["id"]}}
    return json.dumps(key) + "\t" + json.dumps(value)
for line in sys.stdin:
    a = json.loads(line)
    print(ev(*a))
PY
# events: one JSON list [table, id, lsn, extra, id_type] per line
events() { python3 "$W/ev.py" | kcat -P -b "$KS_BOOTSTRAP" -t "$T" -K $'\t'; }
LONG="$(printf 'x%.0s' $(seq 70))"
WIDE="$(python3 -c 'import json; print(json.dumps([["w%d" % i, "string"] for i in range(1700)]))')"

# round 1: create_targets; round 2: evolve's refusals among good events
events <<EOF
["ta", 1, 10]
["tb", 1, 11]
["tc", 1, 12, [["_kafka_partition", "boolean"]]]
["tc", 2, 13]
["ta", 2, 20, [["_kafka_partition", "boolean"]]]
["ta", 3, 21, [["_kafka_offset", "int64"]]]
["tb", 2, 22]
["ta", 4, 23, [["_KAFKA_Source_Position", "string"]]]
["ta", 5, 24, [["_deleted", "boolean"]]]
["ta", 6, 25, [["_valid_from", "string"]]]
["ta", 7, 26, [["ID", "int32"]]]
["ta", 8, 27, [["\"id\"", "int32"]]]
["ta", 9, 28, [["$LONG", "string"]]]
["ta", 10, 29, $WIDE]
["ta", 11, 30, [], "string"]
["ta", 12, 31, [["note", "string"]]]
["tb", 3, 32]
["notmine", 1, 33]
["notmine", 2, 34, [["added", "string"]]]
["notmine", 3, 35]
EOF
sql >/dev/null <<SQL
SET ROLE ks_e2e;
SELECT kafka_sink.create_pipeline(name => '$P', bootstrap_servers => '$KS_BOOTSTRAP',
       subscribe => ARRAY['$T'], target => '$S.{source.table}', envelope => 'debezium',
       create_targets => true, evolve => 'add_columns', starting_offsets => 'earliest');
SQL
check_caught_up "$P"
q() {  # offset|reason|the detail matches
    sql -c "SELECT string_agg(q.message_offset || '|' || q.reason || '|' || (q.detail LIKE '%' || d.pat || '%'), ';' ORDER BY q.message_offset)
              FROM kafka_sink.quarantine q JOIN kafka_sink.pipelines p ON p.id = q.pipeline_id AND p.name = '$P'
              JOIN (VALUES $1) d(o, pat) ON d.o = q.message_offset"
}
check "create_targets: the event with _kafka_partition is refused, the table made from the next" \
      "2|schema_change_refused|true" "$(q "(2, '_kafka_partition')")"
check "create_targets: tc has its two ordinary columns and the source position, its good row" \
      "id,name,_kafka_source_position|2" \
      "$(sql -c "SELECT string_agg(attname, ',' ORDER BY attnum) FROM pg_attribute WHERE attrelid = '$S.tc'::regclass AND attnum > 0 AND NOT attisdropped")|$(sql -c "SELECT string_agg(id::text, ',') FROM $S.tc")"
check "evolve: each colliding, over-long, too wide or key-retyping event is refused for itself, naming the column" \
      "4|schema_change_refused|true;5|schema_change_refused|true;7|schema_change_refused|true;8|schema_change_refused|true;9|schema_change_refused|true;10|schema_change_refused|true;11|schema_change_refused|true;12|schema_change_refused|true;13|schema_change_refused|true;14|schema_change_refused|true" \
      "$(q "(4, 'column _kafka_partition'), (5, 'column _kafka_offset'), (7, '_KAFKA_Source_Position'), (8, '_deleted is reserved'),
            (9, '_valid_from is reserved'), (10, 'from column id'), (11, 'from column id'), (12, 'longer than 63 bytes'),
            (13, 'adds 1700 columns'), (14, 'Field id is now text')")"
check "evolve: the good events of the same and of other tables applied, the good new field made a column" \
      "ta:1,12|tb:1,2,3|note=v31" \
      "ta:$(sql -c "SELECT string_agg(id::text, ',' ORDER BY id) FROM $S.ta")|tb:$(sql -c "SELECT string_agg(id::text, ',' ORDER BY id) FROM $S.tb")|note=$(sql -c "SELECT note FROM $S.ta WHERE id = 12")"
check "evolve: none of the refused columns exists" "id,name,_kafka_source_position,note" \
      "$(sql -c "SELECT string_agg(attname, ',' ORDER BY attnum) FROM pg_attribute WHERE attrelid = '$S.ta'::regclass AND attnum > 0 AND NOT attisdropped")"
check "a table the owner may not alter: the event needing a column is refused, the others apply" \
      "18|schema_change_refused|true|1,3" \
      "$(q "(18, 'must be owner')")|$(sql -c "SELECT string_agg(id::text, ',' ORDER BY id) FROM $S.notmine")"
check "the pipeline is running" "running|" \
      "$(sql -c "SELECT state || '|' || coalesce(last_error, '') FROM kafka_sink.status WHERE name = '$P'")"

# round 3: a table another session holds locked
sql -c "ALTER SYSTEM SET kafka_sink.ddl_lock_timeout = '2s'" -c "SELECT pg_reload_conf()" >/dev/null
reset_lock_timeout() { sql -c "ALTER SYSTEM RESET kafka_sink.ddl_lock_timeout" -c "SELECT pg_reload_conf()" >/dev/null 2>&1 || true; }
at_exit reset_lock_timeout
sleep 1
# hold TABLE MODE: another session holds a lock on TABLE until release
hold() {
    PGAPPNAME="holder_$SFX" sql -c "BEGIN" -c "LOCK TABLE $1 IN $2 MODE" -c "SELECT pg_sleep(60)" >/dev/null 2>&1 &
    HOLDER=$!
    poll "SELECT count(*) > 0 FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
           WHERE a.application_name = 'holder_$SFX' AND l.relation = '$1'::regclass AND l.granted" 20 >/dev/null || true
}
release() {
    sql -c "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'holder_$SFX'" >/dev/null
    wait "$HOLDER" 2>/dev/null || true
}
hold "$S.tb" "ACCESS SHARE"
# five schemas, each with a new field: one batch waits for the lock once,
# not five times (five waits would take 10 s)
START=$SECONDS
events <<EOF
["tb", 4, 40, [["extra", "string"]]]
["tb", 7, 41, [["extra", "string"], ["more1", "string"]]]
["tb", 8, 42, [["extra", "string"], ["more2", "string"]]]
["tb", 9, 43, [["extra", "string"], ["more3", "string"]]]
["tb", 10, 44, [["extra", "string"], ["more4", "string"]]]
["tb", 5, 45]
["ta", 13, 46]
EOF
check_caught_up "$P"
ELAPSED=$((SECONDS - START))
check "a locked table: the events whose ALTER timed out are quarantined, the others apply" \
      "20|schema_change_refused|true;21|schema_change_refused|true;22|schema_change_refused|true;23|schema_change_refused|true;24|schema_change_refused|true|tb:1,2,3,5|ta13:1" \
      "$(q "(20, 'lock timeout'), (21, 'lock timeout'), (22, 'lock timeout'), (23, 'lock timeout'), (24, 'lock timeout')")|tb:$(sql -c "SELECT string_agg(id::text, ',' ORDER BY id) FROM $S.tb")|ta13:$(sql -c "SELECT count(*) FROM $S.ta WHERE id = 13")"
check "a locked table: the batch waited for the lock once, not once per schema (under 8 s)" "t" \
      "$([ "$ELAPSED" -lt 8 ] && echo t || echo "f ($ELAPSED s)")"
release
check "replay once the lock is gone: the event lands, its column added" "5|0|v40" \
      "$(sql -c "SET ROLE ks_e2e" -c "SELECT replayed || '|' || still_failing FROM kafka_sink.replay_quarantine('$P', target => '$S.tb')")|$(sql -c "SELECT extra FROM $S.tb WHERE id = 4")"
# round 4: create_targets behind a lock: an event trigger of the test makes
# every CREATE TABLE of the owner lock a gate table another session holds
sql >/dev/null <<SQL
CREATE TABLE $S.gate (x int);
GRANT SELECT ON $S.gate TO ks_e2e;
CREATE FUNCTION $S.gated() RETURNS event_trigger LANGUAGE plpgsql AS \$\$
BEGIN
    IF current_user = 'ks_e2e' THEN
        LOCK TABLE $S.gate IN ACCESS SHARE MODE;
    END IF;
END \$\$;
CREATE EVENT TRIGGER gated_$SFX ON ddl_command_start WHEN TAG IN ('CREATE TABLE') EXECUTE FUNCTION $S.gated();
SQL
drop_gate() { sql -c "DROP EVENT TRIGGER IF EXISTS gated_$SFX" >/dev/null 2>&1 || true; }
at_exit drop_gate
hold "$S.gate" "ACCESS EXCLUSIVE"
START=$SECONDS
events <<EOF
["td", 1, 50]
["td", 2, 51]
["td", 3, 52]
["td", 4, 53]
["td", 5, 54]
["ta", 14, 55]
EOF
check_caught_up "$P"
ELAPSED=$((SECONDS - START))
check "create_targets behind a lock: each event is quarantined, the other table's applies, no table made" \
      "27|schema_change_refused|true;28|schema_change_refused|true;29|schema_change_refused|true;30|schema_change_refused|true;31|schema_change_refused|true|ta14:1|" \
      "$(q "(27, 'lock timeout'), (28, 'lock timeout'), (29, 'lock timeout'), (30, 'lock timeout'), (31, 'lock timeout')")|ta14:$(sql -c "SELECT count(*) FROM $S.ta WHERE id = 14")|$(sql -c "SELECT coalesce(to_regclass('$S.td')::text, '')")"
check "create_targets behind a lock: the batch waited once, not once per attempt (under 8 s)" "t" \
      "$([ "$ELAPSED" -lt 8 ] && echo t || echo "f ($ELAPSED s)")"
release
drop_gate
check "replay once the lock is gone: the table is made, its five rows land" "5|0|5" \
      "$(sql -c "SET ROLE ks_e2e" -c "SELECT replayed || '|' || still_failing FROM kafka_sink.replay_quarantine('$P', target => '$S.td')")|$(sql -c "SELECT count(*) FROM $S.td")"

sql -c "ALTER TABLE $S.notmine OWNER TO ks_e2e" >/dev/null
check "replay once the table is the owner's: the event lands, its column added" "1|0|v34" \
      "$(sql -c "SET ROLE ks_e2e" -c "SELECT replayed || '|' || still_failing FROM kafka_sink.replay_quarantine('$P', target => '$S.notmine')")|$(sql -c "SELECT added FROM $S.notmine WHERE id = 2")"
check "the pipeline is still running" "running|" \
      "$(sql -c "SELECT state || '|' || coalesce(last_error, '') FROM kafka_sink.status WHERE name = '$P'")"

sql -c "SELECT kafka_sink.drop_pipeline('$P')" >/dev/null 2>&1 || true
finish
