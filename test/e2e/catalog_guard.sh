#!/usr/bin/env bash
# catalog_guard: the catalog is written only through the API.
#  - a pipeline owner (a member of kafka_sink_admin, not a superuser) cannot
#    write any catalog table directly, even rows of its own pipelines that
#    row level security lets it see: INSERT, UPDATE, DELETE, COPY FROM,
#    INSERT ... ON CONFLICT and MERGE are refused with 42501 "kafka_sink's
#    catalog tables are written only by kafka_sink", and nothing changes;
#    nor can it call the API's SQL bodies (kafka_sink._api_*) or write
#    through the internal helpers (kafka_sink._transition, _split_secrets);
#  - every table of the extension carries the guard, enabled ALWAYS;
#  - a superuser still writes the catalog directly (pg_restore does);
#  - every API function still works for the same owner, against a real
#    broker: create_pipeline, alter_pipeline (with a secret option),
#    pause/resume/stop/start, reset_offsets, replay_quarantine,
#    outbox_send and drop_pipeline (its cascade included);
#  - code of the user's that runs inside the pipeline cannot write the
#    catalog either: a trigger on the target, a deferred constraint
#    trigger (fires at commit), a trigger on the bronze table, a domain
#    CHECK on a target column (runs while decoding) and a batch function
#    that write kafka_sink's tables fail their pipeline visibly (state
#    failed, the guard's error in kafka_sink.errors) with nothing applied or
#    checkpointed past the start; replay_quarantine into a target whose
#    trigger writes the catalog is refused and changes nothing.
. "$(dirname "$0")/../lib/common.sh"
setup_owner
O=ks_e2e
T1="e2e_cg1_$SFX"    # the pipeline that exercises the API
T2="e2e_cg2_$SFX"    # read by the pipelines whose user code misbehaves
"$HARNESS" topic-create "$T1" 1 >/dev/null 2>&1
"$HARNESS" topic-create "$T2" 1 >/dev/null 2>&1
GUARD_MSG="kafka_sink's catalog tables are written only by kafka_sink"

as_owner() { psql -X -A -t -q -v ON_ERROR_STOP=1 -U "$O" "$@"; }
# outcome SQL [STDIN]: as the owner; "refused" when the guard refused it
# (42501 with the guard's message), else the SQLSTATE and message, or ok
outcome() {
    local out
    if out="$(psql -X -A -t -q -v ON_ERROR_STOP=1 -v VERBOSITY=verbose -U "$O" -c "$1" 2>&1 <<<"${2:-}")"; then
        echo ok
    elif grep -q "ERROR: *42501: $GUARD_MSG" <<<"$out"; then
        echo refused
    else
        sed -n 's/^ERROR: *\(.*\)$/\1/p' <<<"$out" | sed -n 1p
    fi
}
produce_text() {  # TOPIC LINES (key|value per line)
    printf '%s\n' "$2" | produce "$1"
}
pid_of() { sql -c "SELECT id FROM kafka_sink.pipeline_definitions WHERE name = '$1'"; }
checkpoint() { sql -c "SELECT coalesce(string_agg(next_offset::text, ',' ORDER BY partition), 'none') FROM kafka_sink.offsets WHERE pipeline_id = (SELECT id FROM kafka_sink.pipeline_definitions WHERE name = '$1')"; }
state_of() { sql -c "SELECT state FROM kafka_sink.pipeline_definitions WHERE name = '$1'"; }
last_error() { sql -c "SELECT coalesce(sqlstate, '') || '|' || message FROM kafka_sink.errors WHERE pipeline_id = (SELECT id FROM kafka_sink.pipeline_definitions WHERE name = '$1') ORDER BY id DESC LIMIT 1"; }
# snapshot of everything of a pipeline in the catalog, to show nothing moved
catalog_of() {
    sql -c "SELECT md5(concat_ws('#',
        (SELECT row_to_json(d)::text FROM kafka_sink.pipeline_definitions d WHERE d.id = $1),
        (SELECT string_agg(row_to_json(x)::text, ',' ORDER BY x.name) FROM kafka_sink.secrets x WHERE x.pipeline_id = $1),
        (SELECT string_agg(row_to_json(x)::text, ',' ORDER BY x.topic, x.partition) FROM kafka_sink.offsets x WHERE x.pipeline_id = $1),
        (SELECT string_agg(row_to_json(x)::text, ',' ORDER BY x.batch_id) FROM kafka_sink.batches x WHERE x.pipeline_id = $1),
        (SELECT string_agg(row_to_json(x)::text, ',' ORDER BY x.id) FROM kafka_sink.quarantine x WHERE x.pipeline_id = $1),
        (SELECT string_agg(row_to_json(x)::text, ',' ORDER BY x.id) FROM kafka_sink.data_loss x WHERE x.pipeline_id = $1),
        (SELECT string_agg(row_to_json(x)::text, ',' ORDER BY x.id) FROM kafka_sink.offset_resets x WHERE x.pipeline_id = $1),
        (SELECT string_agg(row_to_json(x)::text, ',' ORDER BY x.id) FROM kafka_sink.errors x WHERE x.pipeline_id = $1),
        (SELECT count(*) FROM kafka_sink.event_ids),
        (SELECT count(*) FROM kafka_sink.outbox)))"
}

sql >/dev/null <<SQL
CREATE TABLE e2e.cg_$SFX (id bigint PRIMARY KEY, n int CHECK (n > 0));
ALTER TABLE e2e.cg_$SFX OWNER TO $O;
SQL

# =============================================================================
# the API works for the owner: create, ingest
# =============================================================================
P="cg_$SFX"
check "create_pipeline as the owner" ok \
      "$(outcome "SELECT kafka_sink.create_pipeline(name => '$P', bootstrap_servers => '$KS_BOOTSTRAP', subscribe => ARRAY['$T1'], target => 'e2e.cg_$SFX', starting_offsets => 'earliest', event_id => 'eid')")"
produce_text "$T1" '1|{"id":1,"n":1,"eid":"e1"}
2|{"id":2,"n":2,"eid":"e2"}
3|{"id":3,"n":3,"eid":"e3"}
4|{"id":4,"n":-4,"eid":"e4"}'
check "it ingests: three rows, one message quarantined, checkpoint 4" "t|3|1|4" \
      "$(as_owner -c "SELECT kafka_sink.wait('$P', '60 s')")|$(sql -c "SELECT count(*) FROM e2e.cg_$SFX")|$(sql -c "SELECT count(*) FROM kafka_sink.quarantine WHERE pipeline_id = $(pid_of "$P")")|$(checkpoint "$P")"
PID="$(pid_of "$P")"
QID="$(sql -c "SELECT id FROM kafka_sink.quarantine WHERE pipeline_id = $PID")"
# some rows in every table, so that UPDATE and DELETE have something of its own to hit
sql >/dev/null <<SQL
INSERT INTO kafka_sink.data_loss (pipeline_id, batch_id, topic, partition, expected_offset, available_offset)
VALUES ($PID, 1, '$T1', 0, 0, 0);
INSERT INTO kafka_sink.offset_resets (pipeline_id, topic, partition, old_offset, new_offset, spec, reset_by)
VALUES ($PID, '$T1', 0, 0, 0, 'earliest', '$O');
INSERT INTO kafka_sink.errors (pipeline_id, kind, message) VALUES ($PID, 'transient', 'set up by the test');
SQL
check "the superuser writes the catalog directly (pg_restore does)" "ok|ok" \
      "$(sql -c "UPDATE kafka_sink.errors SET detail = 'su' WHERE pipeline_id = $PID" >/dev/null && echo ok)|$(sql -c "COPY kafka_sink.errors (pipeline_id, kind, message) FROM STDIN (FORMAT csv)" <<<"$PID,transient,copied by the superuser" >/dev/null && echo ok)"

# =============================================================================
# direct writes by the owner are refused, on every table
# =============================================================================
before="$(catalog_of "$PID")"
check "every table of the extension has the guard, enabled always" "0|t" \
      "$(sql -c "SELECT count(*) FROM pg_depend d JOIN pg_class c ON c.oid = d.objid
                  WHERE d.classid = 'pg_class'::regclass AND d.deptype = 'e' AND c.relkind IN ('r', 'p')
                    AND d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'kafka_sink')
                    AND NOT EXISTS (SELECT 1 FROM pg_trigger t WHERE t.tgrelid = c.oid AND t.tgname = 'catalog_guard'
                                      AND t.tgenabled = 'A' AND t.tgfoid = 'kafka_sink._catalog_guard()'::regprocedure)")|$(sql -c "SELECT count(*) >= 10 FROM pg_trigger WHERE tgname = 'catalog_guard'")"

check "pipeline_definitions: UPDATE kafka_options, state, last_batch_id; INSERT; DELETE" \
      "refused|refused|refused|refused|refused" \
      "$(outcome "UPDATE kafka_sink.pipeline_definitions SET kafka_options = '{\"bootstrap.servers\": \"evil:9092\"}' WHERE id = $PID")|$(outcome "UPDATE kafka_sink.pipeline_definitions SET state = 'stopped' WHERE id = $PID")|$(outcome "UPDATE kafka_sink.pipeline_definitions SET last_batch_id = 0 WHERE id = $PID")|$(outcome "INSERT INTO kafka_sink.pipeline_definitions (name, owner, bootstrap_servers, subscribe, target, state) VALUES ('cg_direct_$SFX', '$O', '$KS_BOOTSTRAP', ARRAY['$T1'], 'e2e.cg_$SFX', 'stopped')")|$(outcome "DELETE FROM kafka_sink.pipeline_definitions WHERE id = $PID")"
check "secrets: INSERT, UPDATE, DELETE" "refused|refused|refused" \
      "$(outcome "INSERT INTO kafka_sink.secrets (pipeline_id, name, value) VALUES ($PID, 'sasl.password', 'x')")|$(outcome "UPDATE kafka_sink.secrets SET value = 'x' WHERE pipeline_id = $PID")|$(outcome "DELETE FROM kafka_sink.secrets WHERE pipeline_id = $PID")"
check "offsets: UPDATE next_offset, INSERT, DELETE" "refused|refused|refused" \
      "$(outcome "UPDATE kafka_sink.offsets SET next_offset = 0 WHERE pipeline_id = $PID")|$(outcome "INSERT INTO kafka_sink.offsets (pipeline_id, topic, partition, next_offset) VALUES ($PID, '$T1', 7, 0)")|$(outcome "DELETE FROM kafka_sink.offsets WHERE pipeline_id = $PID")"
check "batches: DELETE, UPDATE, INSERT" "refused|refused|refused" \
      "$(outcome "DELETE FROM kafka_sink.batches WHERE pipeline_id = $PID")|$(outcome "UPDATE kafka_sink.batches SET messages = 0 WHERE pipeline_id = $PID")|$(outcome "INSERT INTO kafka_sink.batches (pipeline_id, batch_id, ranges, started_at) VALUES ($PID, 999, '[]', now())")"
check "quarantine: INSERT, UPDATE (mark replayed), DELETE" "refused|refused|refused" \
      "$(outcome "INSERT INTO kafka_sink.quarantine (pipeline_id, batch_id, topic, partition, message_offset, reason, detail) VALUES ($PID, 1, '$T1', 0, 99, 'invalid_json', 'x')")|$(outcome "UPDATE kafka_sink.quarantine SET replayed_at = now() WHERE pipeline_id = $PID")|$(outcome "DELETE FROM kafka_sink.quarantine WHERE pipeline_id = $PID")"
check "event_ids: INSERT, UPDATE, DELETE (ids of the owner's own target)" "refused|refused|refused" \
      "$(outcome "INSERT INTO kafka_sink.event_ids (target, event_id) VALUES ('e2e.cg_$SFX', 'e99')")|$(outcome "UPDATE kafka_sink.event_ids SET seen_at = now() WHERE target = 'e2e.cg_$SFX'::regclass")|$(outcome "DELETE FROM kafka_sink.event_ids WHERE target = 'e2e.cg_$SFX'::regclass")"
check "data_loss, offset_resets, errors: INSERT, UPDATE, DELETE" \
      "refused|refused|refused|refused|refused|refused|refused|refused|refused" \
      "$(outcome "INSERT INTO kafka_sink.data_loss (pipeline_id, batch_id, topic, partition, expected_offset, available_offset) VALUES ($PID, 1, '$T1', 0, 0, 5)")|$(outcome "UPDATE kafka_sink.data_loss SET available_offset = 9 WHERE pipeline_id = $PID")|$(outcome "DELETE FROM kafka_sink.data_loss WHERE pipeline_id = $PID")|$(outcome "INSERT INTO kafka_sink.offset_resets (pipeline_id, topic, partition, new_offset, spec) VALUES ($PID, '$T1', 0, 0, 'earliest')")|$(outcome "UPDATE kafka_sink.offset_resets SET reset_by = 'someone_else' WHERE pipeline_id = $PID")|$(outcome "DELETE FROM kafka_sink.offset_resets WHERE pipeline_id = $PID")|$(outcome "INSERT INTO kafka_sink.errors (pipeline_id, kind, message) VALUES ($PID, 'transient', 'x')")|$(outcome "UPDATE kafka_sink.errors SET message = 'x' WHERE pipeline_id = $PID")|$(outcome "DELETE FROM kafka_sink.errors WHERE pipeline_id = $PID")"
check "INSERT ... ON CONFLICT DO UPDATE, MERGE" "refused|refused" \
      "$(outcome "INSERT INTO kafka_sink.offsets (pipeline_id, topic, partition, next_offset) VALUES ($PID, '$T1', 0, 0) ON CONFLICT (pipeline_id, topic, partition) DO UPDATE SET next_offset = 0")|$(outcome "MERGE INTO kafka_sink.offsets o USING (SELECT $PID AS pipeline_id) s ON o.pipeline_id = s.pipeline_id WHEN MATCHED THEN UPDATE SET next_offset = 0")"
# COPY FROM: row level security refuses it for an ordinary admin; an admin
# with BYPASSRLS (given by a superuser) gets as far as the guard, which also
# keeps it off the pipelines of others
BY="ks_cg_bypass_$SFX"
sql -c "CREATE ROLE $BY LOGIN BYPASSRLS IN ROLE kafka_sink_admin" >/dev/null
check "COPY FROM STDIN: refused (by row level security, or for an admin with BYPASSRLS by the guard); UPDATE of another owner's pipeline too" \
      "0A000: COPY FROM not supported with row-level security|refused|refused" \
      "$(outcome "COPY kafka_sink.offsets (pipeline_id, topic, partition, next_offset) FROM STDIN (FORMAT csv)" "$PID,$T1,5,0")|$(O="$BY" outcome "COPY kafka_sink.offsets (pipeline_id, topic, partition, next_offset) FROM STDIN (FORMAT csv)" "$PID,$T1,5,0")|$(O="$BY" outcome "UPDATE kafka_sink.offsets SET next_offset = 0 WHERE pipeline_id = $PID")"
sql -c "DROP ROLE $BY" >/dev/null
# the outbox: no DML privilege for admins, and the guard behind it
sql -c "GRANT INSERT, UPDATE, DELETE ON kafka_sink.outbox TO $O" >/dev/null
check "outbox (even with DML granted): INSERT, UPDATE, DELETE" "refused|refused|refused" \
      "$(outcome "INSERT INTO kafka_sink.outbox (topic, value) VALUES ('$T1', 'x')")|$(outcome "UPDATE kafka_sink.outbox SET delivered_at = now()")|$(outcome "DELETE FROM kafka_sink.outbox")"
sql -c "REVOKE INSERT, UPDATE, DELETE ON kafka_sink.outbox FROM $O" >/dev/null
check "the API's SQL bodies cannot be called directly" \
      "42501: permission denied for function _api_create_pipeline|42501: permission denied for function _api_reset_offsets|42501: permission denied for function _api_stop" \
      "$(outcome "SELECT kafka_sink._api_create_pipeline('cg_body_$SFX', '$KS_BOOTSTRAP', 'e2e.cg_$SFX', ARRAY['$T1'], NULL, NULL, NULL, NULL, 'merge', NULL, 'earliest', true, 100000, 67108864, '100 ms', 1, '{}', false, NULL, 'none', false, NULL, NULL, NULL, '7 days', NULL, NULL)")|$(outcome "SELECT * FROM kafka_sink._api_reset_offsets('$P', 'earliest')")|$(outcome "SELECT kafka_sink._api_stop('$P')")"
# (_transition stops at the batches' fence, which only the API may take)
check "the internal helpers write nothing when called directly" \
      "42501: kafka_sink._fence_batches can only be called by the kafka_sink API|refused" \
      "$(outcome "SELECT kafka_sink._transition('$P', ARRAY['running'], 'stopped', '')")|$(outcome "SELECT kafka_sink._split_secrets($PID, '{\"sasl.password\": \"x\"}')")"
check "an API call that fails inside the owner's exception handler leaves catalog writes refused" "refused" \
      "$(outcome "DO \$\$ BEGIN BEGIN PERFORM kafka_sink.create_pipeline(name => '$P', bootstrap_servers => '$KS_BOOTSTRAP', subscribe => ARRAY['$T1'], target => 'e2e.cg_$SFX'); EXCEPTION WHEN duplicate_object THEN NULL; END; UPDATE kafka_sink.offsets SET next_offset = 0 WHERE pipeline_id = $PID; END \$\$")"
check "nothing of the pipeline changed, and it still runs" "$before|running|4" \
      "$(catalog_of "$PID")|$(state_of "$P")|$(checkpoint "$P")"

# =============================================================================
# every API function works for the owner
# =============================================================================
gen0="$(sql -c "SELECT generation FROM kafka_sink.pipeline_definitions WHERE id = $PID")"
check "alter_pipeline: a new generation" "ok|$((gen0 + 1))|1000" \
      "$(outcome "SELECT kafka_sink.alter_pipeline('$P', max_offsets_per_batch => 1000)")|$(sql -c "SELECT generation || '|' || max_offsets_per_batch FROM kafka_sink.pipeline_definitions WHERE id = $PID")"
check "pause, then resume" "ok|paused|ok|running" \
      "$(outcome "SELECT kafka_sink.pause('$P')")|$(state_of "$P")|$(outcome "SELECT kafka_sink.resume('$P')")|$(state_of "$P")"
produce_text "$T1" '5|{"id":5,"n":5,"eid":"e5"}'
check "resumed: it ingests" "t|4|5" "$(as_owner -c "SELECT kafka_sink.wait('$P', '60 s')")|$(sql -c "SELECT count(*) FROM e2e.cg_$SFX")|$(checkpoint "$P")"
check "stop" "ok|stopped" "$(outcome "SELECT kafka_sink.stop('$P')")|$(state_of "$P")"
check "reset_offsets to earliest returns the move and records it" "$T1|0|5|0|1" \
      "$(as_owner -c "SELECT topic || '|' || partition || '|' || old_offset || '|' || new_offset FROM kafka_sink.reset_offsets('$P', 'earliest')")|$(sql -c "SELECT count(*) FROM kafka_sink.offset_resets WHERE pipeline_id = $PID AND spec = 'earliest' AND reset_by = '$O' AND new_offset = 0 AND old_offset = 5")"
check "the checkpoint moved" 0 "$(checkpoint "$P")"
check "start: it reads everything again, the event ids make it a no-op" "ok|t|4|5" \
      "$(outcome "SELECT kafka_sink.start('$P')")|$(as_owner -c "SELECT kafka_sink.wait('$P', '60 s')")|$(sql -c "SELECT count(*) FROM e2e.cg_$SFX")|$(checkpoint "$P")"
check "alter_pipeline with a secret option (stopped): the secret lands in kafka_sink.secrets" "ok|ok|1" \
      "$(outcome "SELECT kafka_sink.stop('$P')")|$(outcome "SELECT kafka_sink.alter_pipeline('$P', kafka_options => '{\"sasl.password\": \"s3cret\"}')")|$(sql -c "SELECT count(*) FROM kafka_sink.secrets WHERE pipeline_id = $PID AND name = 'sasl.password'")"
check "and removed again, and started" "ok|0|ok|running" \
      "$(outcome "SELECT kafka_sink.alter_pipeline('$P', kafka_options => '{\"sasl.password\": null}')")|$(sql -c "SELECT count(*) FROM kafka_sink.secrets WHERE pipeline_id = $PID AND name = 'sasl.password'")|$(outcome "SELECT kafka_sink.start('$P')")|$(state_of "$P")"

# replay_quarantine: first into a target whose trigger writes the catalog
sql >/dev/null <<SQL
SET ROLE $O;
CREATE FUNCTION e2e.cg_evil_$SFX() RETURNS trigger LANGUAGE plpgsql AS \$\$
BEGIN
    UPDATE kafka_sink.offsets SET next_offset = 0;
    UPDATE kafka_sink.pipeline_definitions SET kafka_options = '{"bootstrap.servers": "evil:9092"}';
    RETURN NEW;
END \$\$;
ALTER TABLE e2e.cg_$SFX DROP CONSTRAINT cg_${SFX}_n_check;
CREATE TRIGGER evil BEFORE INSERT OR UPDATE ON e2e.cg_$SFX FOR EACH ROW EXECUTE FUNCTION e2e.cg_evil_$SFX();
SQL
qbefore="$(catalog_of "$PID")"
check "replay_quarantine into a target whose trigger writes the catalog: refused, nothing changes" \
      "refused|$qbefore|4" \
      "$(outcome "SELECT * FROM kafka_sink.replay_quarantine('$P')")|$(catalog_of "$PID")|$(sql -c "SELECT count(*) FROM e2e.cg_$SFX")"
sql -c "DROP TRIGGER evil ON e2e.cg_$SFX" >/dev/null
check "replay_quarantine once the cause is fixed" "1|0|-4|t" \
      "$(as_owner -c "SELECT replayed || '|' || still_failing FROM kafka_sink.replay_quarantine('$P')")|$(sql -c "SELECT n FROM e2e.cg_$SFX WHERE id = 4")|$(sql -c "SELECT replayed_at IS NOT NULL FROM kafka_sink.quarantine WHERE id = $QID")"

# outbox_send
eid="$(as_owner -c "SELECT kafka_sink.outbox_send('$T1', 'k', 'v')")"
check "outbox_send queues the message, created by the owner" "1|$O" \
      "$(sql -c "SELECT count(*) || '|' || min(created_by) FROM kafka_sink.outbox WHERE event_id = '$eid'")"
sql -c "DELETE FROM kafka_sink.outbox WHERE event_id = '$eid'" >/dev/null

# =============================================================================
# code of the user's inside a pipeline cannot write the catalog
# =============================================================================
sql >/dev/null <<SQL
SET ROLE $O;
CREATE FUNCTION e2e.cg_write_catalog_$SFX() RETURNS void LANGUAGE plpgsql AS \$\$
BEGIN
    UPDATE kafka_sink.offsets SET next_offset = next_offset + 1000;
END \$\$;
CREATE FUNCTION e2e.cg_trig_$SFX() RETURNS trigger LANGUAGE plpgsql AS \$\$
BEGIN
    PERFORM e2e.cg_write_catalog_$SFX();
    RETURN NEW;
END \$\$;
-- a trigger on the target
CREATE TABLE e2e.cg_t_$SFX (id bigint PRIMARY KEY, n int);
CREATE TRIGGER t BEFORE INSERT ON e2e.cg_t_$SFX FOR EACH ROW EXECUTE FUNCTION e2e.cg_trig_$SFX();
-- a deferred constraint trigger: fires at commit
CREATE TABLE e2e.cg_d_$SFX (id bigint PRIMARY KEY, n int);
CREATE CONSTRAINT TRIGGER d AFTER INSERT ON e2e.cg_d_$SFX DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW EXECUTE FUNCTION e2e.cg_trig_$SFX();
-- a trigger on the bronze table
CREATE TABLE e2e.cg_b_$SFX (topic text NOT NULL, partition integer NOT NULL, "offset" bigint NOT NULL,
    ts timestamptz, key bytea, value bytea, headers jsonb, batch_id bigint NOT NULL,
    PRIMARY KEY (partition, "offset", topic));
CREATE TRIGGER b BEFORE INSERT ON e2e.cg_b_$SFX FOR EACH ROW EXECUTE FUNCTION e2e.cg_trig_$SFX();
-- a domain whose CHECK writes the catalog: runs while decoding
CREATE FUNCTION e2e.cg_check_$SFX(v int) RETURNS boolean LANGUAGE plpgsql AS \$\$
BEGIN
    PERFORM e2e.cg_write_catalog_$SFX();
    RETURN true;
END \$\$;
CREATE DOMAIN e2e.cg_dom_$SFX AS int CHECK (e2e.cg_check_$SFX(VALUE));
CREATE TABLE e2e.cg_c_$SFX (id bigint PRIMARY KEY, n e2e.cg_dom_$SFX);
-- a batch function
CREATE TABLE e2e.cg_f_$SFX (id bigint PRIMARY KEY, n int);
CREATE FUNCTION e2e.cg_fn_$SFX(batch_id bigint, rows e2e.cg_f_$SFX[]) RETURNS void LANGUAGE plpgsql AS \$\$
BEGIN
    INSERT INTO e2e.cg_f_$SFX SELECT * FROM unnest(rows);
    PERFORM e2e.cg_write_catalog_$SFX();
END \$\$;
SQL
create() { as_owner -c "SELECT kafka_sink.create_pipeline(name => '$1', bootstrap_servers => '$KS_BOOTSTRAP', subscribe => ARRAY['$T2'], starting_offsets => 'earliest', $2)" >/dev/null; }
create "cg_trigger_$SFX" "target => 'e2e.cg_t_$SFX'"
create "cg_deferred_$SFX" "target => 'e2e.cg_d_$SFX'"
create "cg_bronze_$SFX" "bronze => 'e2e.cg_b_$SFX'"
create "cg_domain_$SFX" "target => 'e2e.cg_c_$SFX'"
create "cg_function_$SFX" "target => 'e2e.cg_f_$SFX', mode => 'function', batch_function => 'e2e.cg_fn_$SFX(bigint, e2e.cg_f_$SFX[])'"
produce_text "$T2" '1|{"id":1,"n":1}
2|{"id":2,"n":2}'
for kind in trigger deferred bronze domain function; do
    p="cg_${kind}_$SFX"
    poll "SELECT state = 'failed' FROM kafka_sink.pipeline_definitions WHERE name = '$p'" 60 || true
    check "$kind: the pipeline failed with the guard's error" "failed|42501|$GUARD_MSG" \
          "$(state_of "$p")|$(last_error "$p")"
    check "$kind: nothing applied, the checkpoint stayed at the start, no batch" "0|0|0" \
          "$(sql -c "SELECT count(*) FROM (SELECT 1 FROM e2e.cg_t_$SFX WHERE '$kind' = 'trigger' UNION ALL SELECT 1 FROM e2e.cg_d_$SFX WHERE '$kind' = 'deferred' UNION ALL SELECT 1 FROM e2e.cg_b_$SFX WHERE '$kind' = 'bronze' UNION ALL SELECT 1 FROM e2e.cg_c_$SFX WHERE '$kind' = 'domain' UNION ALL SELECT 1 FROM e2e.cg_f_$SFX WHERE '$kind' = 'function') x")|$(checkpoint "$p")|$(sql -c "SELECT count(*) FROM kafka_sink.batches WHERE pipeline_id = $(pid_of "$p")")"
done
check "the misbehaving code moved no checkpoint of the owner's other pipeline" 5 "$(checkpoint "$P")"

# =============================================================================
# drop_pipeline: the cascade to every catalog table still works
# =============================================================================
for kind in trigger deferred bronze domain function; do
    as_owner -c "SELECT kafka_sink.drop_pipeline('cg_${kind}_$SFX')" >/dev/null
done
check "drop_pipeline as the owner, its catalog rows go with it" "ok|0|0|0|0|0|0|0|0" \
      "$(outcome "SELECT kafka_sink.drop_pipeline('$P')")|$(sql -c "SELECT count(*) FROM kafka_sink.pipeline_definitions WHERE id = $PID")|$(sql -c "SELECT count(*) FROM kafka_sink.secrets WHERE pipeline_id = $PID")|$(sql -c "SELECT count(*) FROM kafka_sink.offsets WHERE pipeline_id = $PID")|$(sql -c "SELECT count(*) FROM kafka_sink.batches WHERE pipeline_id = $PID")|$(sql -c "SELECT count(*) FROM kafka_sink.quarantine WHERE pipeline_id = $PID")|$(sql -c "SELECT count(*) FROM kafka_sink.data_loss WHERE pipeline_id = $PID")|$(sql -c "SELECT count(*) FROM kafka_sink.offset_resets WHERE pipeline_id = $PID")|$(sql -c "SELECT count(*) FROM kafka_sink.errors WHERE pipeline_id = $PID")"
sql -c "DELETE FROM kafka_sink.event_ids WHERE target = 'e2e.cg_$SFX'::regclass" >/dev/null
finish
