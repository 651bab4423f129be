#!/usr/bin/env bash
# security: what a pipeline owner, another admin and a plain role can do.
#  - search_path: an owner whose search_path puts its own schema before
#    pg_catalog, holding operators, functions, aggregates, types and
#    catalog-named views that trap when called, runs pipelines (merge with
#    bronze, lineage and tombstones; append) and the whole API: no trap is
#    called by the API or the workers, and the results are right; the
#    launcher (a superuser) must not call them either when the database's
#    search_path names the schema;
#  - secrets: secret kafka_options are kept in kafka_sink.secrets, shown as
#    ******** to the owner, invisible to another admin, unreadable by a
#    plain role, and never written to the server log, to an error message
#    or to kafka_sink.errors (also for bad options and a failing worker);
#  - privileges: a revoked privilege on the target fails the pipeline with
#    nothing applied; only kafka_sink_admin may manage pipelines; one admin
#    cannot touch another's pipeline; superuser-owned pipelines only with
#    kafka_sink.allow_superuser_pipelines.
# (Bugs this script found were fixed: the launcher's search_path, direct calls
# of internal C functions, silent consumer-creation failures, a librdkafka crash.)
# the launcher and kafka_sink._watermarks do not pin search_path; a worker
# whose consumer cannot be created is silent in SQL; kafka_options can crash
# librdkafka and with it the whole server.
# Secrets are passed through a table, never in statement text: PostgreSQL
# logs the text of a failing statement (log_min_error_statement), which is
# no fault of the extension.
. "$(dirname "$0")/../lib/common.sh"
setup_owner
LOGF="$KS_LOGS/postgresql.log"
LOG0="$(stat -c %s "$LOGF")"
new_log() { tail -c +$((LOG0 + 1)) "$LOGF"; }
HJ=ks_sec_hj        # the owner with the hostile search_path
A=ks_sec_a          # an admin
B=ks_sec_b          # another admin
PLAIN=ks_sec_plain  # not in kafka_sink_admin
SAFE_PATH='-c search_path=pg_catalog,public'
DB_PATH_SET=0

# contains PATTERN: t when stdin has a line matching it, else f; reads all of
# stdin (grep -q would stop early and, under pipefail, fail the writer)
contains() { local n; n="$(grep -c -- "$1" || true)"; [ "${n:-0}" -gt 0 ] && echo t || echo f; }
# errcode ROLE SQL: the SQLSTATE the statement fails with, or ok
errcode() {
    local out
    if out="$(psql -X -A -t -q -v ON_ERROR_STOP=1 -v VERBOSITY=sqlstate -U "$1" -c "$2" 2>&1)"; then
        echo ok
    else
        sed -n 's/^ERROR: *\([0-9A-Z]\{5\}\).*/\1/p' <<<"$out" | sed -n 1p
    fi
}
# retry_sql SQL: as the superuser, until it succeeds (the server may be
# restarting after a crash), at most 60 s
retry_sql() {
    local i
    for ((i = 0; i < 120; i++)); do
        PGOPTIONS="$SAFE_PATH" sql -c "$1" >/dev/null 2>&1 && return 0
        sleep 0.5
    done
    return 1
}
launcher_pid() { PGOPTIONS="$SAFE_PATH" sql -c "SELECT pid FROM pg_stat_activity WHERE backend_type = 'kafka_sink launcher'"; }
scheduler_pid() { PGOPTIONS="$SAFE_PATH" sql -c "SELECT pid FROM pg_stat_activity WHERE backend_type = 'kafka_sink scheduler' AND datname = current_database()"; }
# restart_launcher: terminate it and this database's scheduler (the one
# connected to the database); the postmaster starts the launcher again (5 s),
# the launcher the scheduler, which reads the database's settings anew
restart_launcher() {
    local old oldsched; old="$(launcher_pid)"; oldsched="$(scheduler_pid)"
    PGOPTIONS="$SAFE_PATH" sql -c "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE backend_type = 'kafka_sink launcher'
                                       OR (backend_type = 'kafka_sink scheduler' AND datname = current_database())" >/dev/null
    PGOPTIONS="$SAFE_PATH" poll "SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'kafka_sink launcher' AND pid <> ${old:-0}" 30 || true
    PGOPTIONS="$SAFE_PATH" poll "SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'kafka_sink scheduler' AND datname = current_database() AND pid <> ${oldsched:-0}" 30 || true
}

cleanup() {
    local rc=$?
    set +e
    trap - EXIT
    if [ "$DB_PATH_SET" = 1 ]; then
        retry_sql "ALTER DATABASE $PGDATABASE RESET search_path"
        restart_launcher
    fi
    if [ -n "$(PGOPTIONS="$SAFE_PATH" sql -c "SELECT 1 FROM pg_db_role_setting s JOIN pg_database d ON d.oid = s.setdatabase WHERE d.datname = current_database() AND s.setrole = 0 AND array_to_string(s.setconfig, ',') LIKE '%ks_hijack%'" 2>/dev/null)" ]; then
        retry_sql "ALTER DATABASE $PGDATABASE RESET search_path"
    fi
    retry_sql "ALTER SYSTEM RESET kafka_sink.allow_superuser_pipelines"
    retry_sql "SELECT pg_reload_conf()"
    retry_sql "SELECT kafka_sink.drop_pipeline(name) FROM kafka_sink.pipeline_definitions WHERE name LIKE '%\\_$SFX'"
    PGOPTIONS="$SAFE_PATH" sql >/dev/null 2>&1 <<SQL
SET client_min_messages = warning;
DROP SCHEMA IF EXISTS ks_hijack CASCADE;
DROP SCHEMA IF EXISTS ks_sec CASCADE;
DO \$\$ DECLARE r text; BEGIN
    FOREACH r IN ARRAY ARRAY['$HJ', '$A', '$B', '$PLAIN'] LOOP
        IF EXISTS (SELECT FROM pg_roles WHERE rolname = r) THEN
            EXECUTE format('DROP OWNED BY %I', r);
            EXECUTE format('DROP ROLE %I', r);
        END IF;
    END LOOP;
END \$\$;
SQL
    exit $rc
}
trap cleanup EXIT

sql >/dev/null <<SQL
SET client_min_messages = warning;
DROP SCHEMA IF EXISTS ks_hijack CASCADE;
DROP SCHEMA IF EXISTS ks_sec CASCADE;
DO \$\$ DECLARE r text; BEGIN
    FOREACH r IN ARRAY ARRAY['$HJ', '$A', '$B', '$PLAIN'] LOOP
        IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = r) THEN
            EXECUTE format('CREATE ROLE %I LOGIN', r);
        END IF;
    END LOOP;
END \$\$;
GRANT kafka_sink_admin TO $HJ, $A, $B;
CREATE SCHEMA ks_hijack AUTHORIZATION $HJ;
CREATE SCHEMA ks_sec;
GRANT USAGE, CREATE ON SCHEMA ks_sec TO $HJ, $A, $B;
SQL

# =============================================================================
# search_path
# =============================================================================
T="e2e_sec_hj_$SFX"
"$HARNESS" topic-create "$T" 2 >/dev/null 2>&1
as_role "$HJ" -f "$E2E_DIR/security_hijack.sql" >/dev/null
sql -c "ALTER ROLE $HJ SET search_path = ks_hijack, public, pg_catalog" >/dev/null
trap_calls() { sql -c "SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM ks_hijack.pwned_seq"; }
reset_traps() { sql -c "SELECT setval('ks_hijack.pwned_seq', 1, false)" -c "TRUNCATE ks_hijack.pwned" >/dev/null; }

# the traps work: the owner's own unqualified SQL reaches them
as_role "$HJ" -c "SELECT now() IS NOT NULL AND 1::bigint = 1::bigint AND (SELECT count(*) FROM pg_class) > 0" >/dev/null
check "sanity: the owner's session picks up the shadowing objects (now, =, count, pg_class)" \
      "aggregate count(*)|function now()|operator =(bigint,bigint)|relation pg_class" \
      "$(sql -c "SELECT string_agg(DISTINCT what, '|' ORDER BY what) FILTER (WHERE what IN ('function now()', 'operator =(bigint,bigint)', 'aggregate count(*)', 'relation pg_class')) FROM ks_hijack.pwned")"
reset_traps
HJ_MARK="$(stat -c %s "$LOGF")"

# data: keys 1..40 twice; key 5's second message is older (stale), key 7's
# violates a CHECK (quarantined, replayed later), key 9 gets a tombstone
{
    for k in $(seq 1 40); do echo "$k|{\"id\":$k,\"ts\":1,\"amount\":\"$k\"}"; done
    for k in $(seq 1 40); do
        case $k in
            5) echo "$k|{\"id\":$k,\"ts\":0,\"amount\":\"50\"}" ;;
            7) echo "$k|{\"id\":$k,\"ts\":2,\"amount\":\"-1\"}" ;;
            *) echo "$k|{\"id\":$k,\"ts\":2,\"amount\":\"$((k * 10))\"}" ;;
        esac
    done
} | produce "$T"
expected_cur="$(for k in $(seq 1 40); do
    case $k in 5) echo "5:5.00" ;; 7) echo "7:-1.00" ;; 9) ;; *) echo "$k:$((k * 10)).00" ;; esac
done | paste -sd,)"

sql >/dev/null <<SQL
CREATE TABLE ks_sec.hj_cur_$SFX (id bigint PRIMARY KEY, ts bigint NOT NULL,
    amount numeric(10,2) CONSTRAINT hj_amount_pos CHECK (amount >= 0),
    _kafka_topic text, _kafka_partition int, _kafka_offset bigint, _kafka_batch_id bigint);
CREATE TABLE ks_sec.hj_log_$SFX (id bigint, ts bigint, amount numeric(10,2), _kafka_partition int, _kafka_offset bigint);
ALTER TABLE ks_sec.hj_cur_$SFX OWNER TO $HJ;
ALTER TABLE ks_sec.hj_log_$SFX OWNER TO $HJ;
SQL
CUR="hj_cur_$SFX"
LOGP="hj_log_$SFX"
# Every API call below runs in a session of the owner, with its search_path.
# The statements around the calls use no operator, function or cast of
# their own (those would rightly pick up the owner's objects): results are
# filtered in the shell or checked as the superuser.
hj() { as_role "$HJ" -c "$1"; }
as_role "$HJ" >/dev/null <<SQL
SELECT kafka_sink.create_pipeline(name => '$CUR', bootstrap_servers => '$KS_BOOTSTRAP',
       subscribe => ARRAY['$T'], target => 'ks_sec.hj_cur_$SFX', order_column => 'ts',
       starting_offsets => 'earliest', bronze => 'ks_sec.hj_raw_$SFX',
       key_format => 'string', delete_on_tombstone => true);
SELECT kafka_sink.create_pipeline(name => '$LOGP', bootstrap_servers => '$KS_BOOTSTRAP',
       subscribe => ARRAY['$T'], target => 'ks_sec.hj_log_$SFX', mode => 'append',
       starting_offsets => 'earliest', max_offsets_per_batch => 30);
SQL
check "hostile search_path: the merge pipeline catches up" t "$(hj "SELECT kafka_sink.wait('$CUR', '60 s')")"
check "hostile search_path: the append pipeline catches up" t "$(hj "SELECT kafka_sink.wait('$LOGP', '60 s')")"
check "kafka_sink.status as the owner" "$CUR|running $LOGP|running" \
      "$(hj "SELECT name, state FROM kafka_sink.status" | sort | paste -sd' ')"
check "kafka_sink.progress as the owner: 2 partitions each, caught up" "$CUR|0 $CUR|0 $LOGP|0 $LOGP|0" \
      "$(hj "SELECT pipeline, lag_messages FROM kafka_sink.progress" | sort | paste -sd' ')"
check "kafka_sink.pipelines as the owner" "$CUR|merge|ts $LOGP|append|" \
      "$(hj "SELECT name, mode, order_column FROM kafka_sink.pipelines" | sort | paste -sd' ')"
check "last_progress and recent_progress as the owner" "t|t" \
      "$(hj "SELECT kafka_sink.last_progress('$CUR')" | contains '"batchId"')|$(n="$(hj "SELECT * FROM kafka_sink.recent_progress('$LOGP', 3)" | grep -c '"batchId"')"; [ "$n" -ge 1 ] && [ "$n" -le 3 ] && echo t || echo f)"
check "the quarantine holds key 7's second message (constraint_violation)" "constraint_violation" \
      "$(hj "SELECT reason FROM kafka_sink.quarantine")"
lin="$(hj "SELECT topic, partition, \"offset\", batch_id FROM kafka_sink.lineage('$CUR', '{\"id\": 1}')")"
check "lineage as the owner: key 1 comes from its second message" '{"id":1,"ts":2,"amount":"10"}|t' \
      "$(IFS='|' read -r lt lp lo lb <<<"$lin"; sql -c "SELECT convert_from(value, 'UTF8') || '|' || CASE WHEN '$lb' <> '' THEN 't' ELSE 'f' END FROM ks_sec.hj_raw_$SFX WHERE topic = '$lt' AND partition = '${lp:--1}' AND \"offset\" = '${lo:--1}'")"
check "message_fate as the owner" 1 \
      "$(hj "SELECT fate FROM kafka_sink.message_fate('$CUR', '$T', 0, 0)" | grep -vc '^pending$')"
# a tombstone for key 9, produced through the API
hj "SELECT * FROM kafka_sink.produce('$KS_BOOTSTRAP', '$T', '9', NULL)" >/dev/null
check "produce + wait as the owner" t "$(hj "SELECT kafka_sink.wait('$CUR', '60 s')")"
check "wait_for (a procedure, no SET clause) as the owner" t "$(hj "CALL kafka_sink.wait_for('$CUR', '60 s')")"
hj "ALTER TABLE ks_sec.hj_cur_$SFX DROP CONSTRAINT hj_amount_pos" >/dev/null
check "replay_quarantine as the owner" "1|0" \
      "$(hj "SELECT replayed, still_failing FROM kafka_sink.replay_quarantine('$CUR', reason => 'constraint_violation')")"
as_role "$HJ" >/dev/null <<SQL
SELECT kafka_sink.pause('$LOGP');
SELECT kafka_sink.resume('$LOGP');
SELECT kafka_sink.alter_pipeline('$LOGP', max_offsets_per_batch => 25, kafka_options => '{"fetch.wait.max.ms": "100"}');
SELECT kafka_sink.stop('$CUR');
SQL
check "reset_offsets as the owner" 2 \
      "$(hj "SELECT topic, partition FROM kafka_sink.reset_offsets('$CUR', 'earliest')" | grep -c .)"
hj "SELECT kafka_sink.start('$CUR')" >/dev/null
check "after the reset the merge pipeline re-reads everything" t "$(hj "SELECT kafka_sink.wait('$CUR', '60 s')")"
check "the append pipeline is caught up after alter" t "$(hj "SELECT kafka_sink.wait('$LOGP', '60 s')")"
check "the merge target is right (stale key 5, replayed key 7, deleted key 9)" "$expected_cur" \
      "$(sql -c "SELECT string_agg(id || ':' || amount, ',' ORDER BY id) FROM ks_sec.hj_cur_$SFX")"
check "the append target has every decoded message once" "80|80|1" \
      "$(sql -c "SELECT count(*) || '|' || count(DISTINCT (_kafka_partition, _kafka_offset)) || '|' || (SELECT count(*) FROM kafka_sink.quarantine q JOIN kafka_sink.pipelines p ON p.id = q.pipeline_id WHERE p.name = '$LOGP' AND q.reason = 'not_an_object') FROM ks_sec.hj_log_$SFX")"
hj "SELECT kafka_sink.drop_pipeline('$LOGP')" >/dev/null
check "no shadowing object was called by the API or the workers" "0||0" \
      "$(trap_calls)|$(sql -c "SELECT string_agg(DISTINCT what || ' by ' || coalesce(app, '') || ' in: ' || coalesce(query, ''), '; ') FROM ks_hijack.pwned")|$(tail -c +$((HJ_MARK + 1)) "$LOGF" | grep -c KS_HIJACK_CALLED || true)"

# Was a bug (fixed: SET search_path on the C functions): kafka_sink._watermarks, granted to
# kafka_sink_admin and callable directly, runs its catalog queries
# (src/sqlapi/api.c kafka_sink_watermarks -> ks_load_pipeline) without pinning
# search_path, so `=`, `::int8`, jsonb_each, unnest ... resolve through the
# caller's search_path.  Same for kafka_sink._replay called directly.  Only
# the caller's own objects or those of a schema it put before pg_catalog are
# reached, but the SQL API is otherwise search_path-safe.
reset_traps
hj "SELECT * FROM kafka_sink._watermarks('$CUR')" >/dev/null 2>&1 || true
check "kafka_sink._watermarks called directly does not use the caller's search_path" 0 "$(trap_calls)"

# Was a bug (fixed: the launcher, now the scheduler, pins search_path): it runs as the
# bootstrap superuser and did not pin search_path (src/workers/scheduler.c read_wanted: "... WHERE state IN
# ('running', 'paused')", and ks_record_error), so a database-level
# search_path that puts a schema writable by a non-superuser before
# pg_catalog makes the superuser launcher execute that role's "=" operator.
# A database owner who is not a superuser can set it (ALTER DATABASE ... SET
# search_path) and so run code as superuser.
reset_traps
export PGOPTIONS="$SAFE_PATH"   # our own superuser sessions must not use the path
DB_PATH_SET=1
sql -c "ALTER DATABASE $PGDATABASE SET search_path = ks_hijack, public, pg_catalog" >/dev/null
restart_launcher
sleep 3
check "the launcher and the scheduler (superusers) never run objects of the database's search_path" "0|" \
      "$(trap_calls)|$(sql -c "SELECT string_agg(DISTINCT what || ' as ' || by_user || ' in: ' || coalesce(app, '') || ' ' || coalesce(query, ''), '; ') FROM ks_hijack.pwned")"
sql -c "ALTER DATABASE $PGDATABASE RESET search_path" >/dev/null
restart_launcher
DB_PATH_SET=0
unset PGOPTIONS
hj "SELECT kafka_sink.drop_pipeline('$CUR')" >/dev/null

# =============================================================================
# secrets
# =============================================================================
T="e2e_sec_s_$SFX"
"$HARNESS" topic-create "$T" 1 >/dev/null 2>&1
rnd() { head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n'; }
S_PW="ksSaslPw$(rnd)"; S_KP="ksKeyPw$(rnd)"; S_BAD="ksBadPw$(rnd)"; S_NEW="ksNewPw$(rnd)"
S_ALT="ksAltPw$(rnd)"; S_REJ="ksRejected$(rnd)"; S_PEM="ksPem$(rnd)"; S_SSLPW="ksSslPw$(rnd)"
SECRETS=("$S_PW" "$S_KP" "$S_BAD" "$S_NEW" "$S_ALT" "$S_REJ" "$S_PEM" "$S_SSLPW")
# the options, inserted by a statement that succeeds (so it is not logged)
sql >/dev/null <<SQL
CREATE TABLE ks_sec.opts_$SFX (n int PRIMARY KEY, o jsonb NOT NULL);
GRANT SELECT ON ks_sec.opts_$SFX TO $A;
INSERT INTO ks_sec.opts_$SFX VALUES
  (1, '{"security.protocol": "plaintext", "sasl.password": "$S_PW", "ssl.key.password": "$S_KP", "debug": "conf", "client.rack": "rack-$SFX"}'),
  (2, '{"sasl.password": "$S_BAD", "socket.timeout.ms": "not-a-number"}'),
  (3, '{"sasl.password": "$S_ALT", "fetch.wait.max.ms": "soon"}'),
  (4, '{"sasl.password": "$S_NEW", "debug": null}'),
  (5, '{"ssl_key": "$S_REJ"}'),
  (6, '{"security.protocol": "SSL", "ssl.key.password": "$S_SSLPW", "ssl.key.pem": "-----BEGIN PRIVATE KEY-----\\n$S_PEM\\n-----END PRIVATE KEY-----"}');
CREATE TABLE ks_sec.sec_$SFX (id bigint PRIMARY KEY, v text);
ALTER TABLE ks_sec.sec_$SFX OWNER TO $A;
SQL
opts() { echo "(SELECT o FROM ks_sec.opts_$SFX WHERE n = $1)"; }
SEC="sec_$SFX"
printf '1|{"id":1,"v":"a"}\n2|{"id":2,"v":"b"}\n' | produce "$T"
as_role "$A" -c "SELECT kafka_sink.create_pipeline(name => '$SEC', bootstrap_servers => '$KS_BOOTSTRAP',
       subscribe => ARRAY['$T'], target => 'ks_sec.sec_$SFX', starting_offsets => 'earliest',
       kafka_options => $(opts 1))" >/dev/null
check "with sasl.password and ssl.key.password on PLAINTEXT the pipeline still works" "t|2" \
      "$(as_role "$A" -c "SELECT kafka_sink.wait('$SEC', '60 s')")|$(sql -c "SELECT count(*) FROM ks_sec.sec_$SFX")"
check "the owner sees secrets as ******** and other options as they are" "********|********|rack-$SFX|conf" \
      "$(as_role "$A" -c "SELECT concat_ws('|', kafka_options->>'sasl.password', kafka_options->>'ssl.key.password', kafka_options->>'client.rack', kafka_options->>'debug') FROM kafka_sink.pipelines WHERE name = '$SEC'")"
check "the definition itself holds no secret value" 0 \
      "$(sql -c "SELECT count(*) FROM kafka_sink.pipeline_definitions d, ks_sec.opts_$SFX o, jsonb_each_text(o.o) e WHERE d.name = '$SEC' AND o.n = 1 AND e.key LIKE '%password' AND strpos(d.kafka_options::text, e.value) > 0")"
check "the secrets are stored in kafka_sink.secrets" "sasl.password|ssl.key.password" \
      "$(sql -c "SELECT string_agg(s.name, '|' ORDER BY s.name) FROM kafka_sink.secrets s JOIN kafka_sink.pipeline_definitions d ON d.id = s.pipeline_id JOIN ks_sec.opts_$SFX o ON o.n = 1 WHERE d.name = '$SEC' AND s.value = o.o->>s.name")"
check "another admin sees none of the pipeline: secrets, definitions, status, offsets" "0|0|0|0|0" \
      "$(as_role "$B" -c "SELECT concat_ws('|', (SELECT count(*) FROM kafka_sink.secrets), (SELECT count(*) FROM kafka_sink.pipeline_definitions WHERE name = '$SEC'), (SELECT count(*) FROM kafka_sink.pipelines WHERE name = '$SEC'), (SELECT count(*) FROM kafka_sink.status WHERE name = '$SEC'), (SELECT count(*) FROM kafka_sink.offsets))")"
check "another admin cannot wait on it or read its watermarks (undefined_object)" "42704|42704" \
      "$(errcode "$B" "SELECT kafka_sink.wait('$SEC', '1 s')")|$(errcode "$B" "SELECT * FROM kafka_sink._watermarks('$SEC')")"
check "a plain role cannot read kafka_sink.secrets, the definitions or the pipelines view" "42501|42501|42501" \
      "$(errcode "$PLAIN" "SELECT * FROM kafka_sink.secrets")|$(errcode "$PLAIN" "SELECT * FROM kafka_sink.pipeline_definitions")|$(errcode "$PLAIN" "SELECT * FROM kafka_sink.pipelines")"
out="$(as_role "$A" -c "SELECT kafka_sink.create_pipeline(name => 'sec_bad_$SFX', bootstrap_servers => '$KS_BOOTSTRAP',
       subscribe => ARRAY['$T'], target => 'ks_sec.sec_$SFX', kafka_options => $(opts 2))" 2>&1 || true)"
check "a bad option beside a secret: refused, naming the option, not the secret" "t|f" \
      "$(grep -q 'invalid Kafka option "socket.timeout.ms"' <<<"$out" && echo t || echo f)|$(grep -q "$S_BAD" <<<"$out" && echo t || echo f)"
out="$(as_role "$A" -c "SELECT kafka_sink.alter_pipeline('$SEC', kafka_options => $(opts 3))" 2>&1 || true)"
check "alter_pipeline with a bad option beside a new secret: refused, no secret shown, old secret kept" "t|f|t" \
      "$(grep -q 'invalid Kafka option "fetch.wait.max.ms"' <<<"$out" && echo t || echo f)|$(grep -q "$S_ALT" <<<"$out" && echo t || echo f)|$(sql -c "SELECT s.value = o.o->>'sasl.password' FROM kafka_sink.secrets s JOIN kafka_sink.pipeline_definitions d ON d.id = s.pipeline_id, ks_sec.opts_$SFX o WHERE d.name = '$SEC' AND s.name = 'sasl.password' AND o.n = 1")"
out="$(as_role "$A" -c "SELECT kafka_sink.alter_pipeline('$SEC', kafka_options => $(opts 5))" 2>&1 || true)"
check "a secret-named option librdkafka rejects: the error names it, not its value" "t|f" \
      "$(grep -q '"ssl_key"' <<<"$out" && echo t || echo f)|$(grep -q "$S_REJ" <<<"$out" && echo t || echo f)"
as_role "$A" -c "SELECT kafka_sink.alter_pipeline('$SEC', kafka_options => $(opts 4))" >/dev/null
check "rotating the secret: stored, still masked, debug removed (JSON null)" "t|********|" \
      "$(sql -c "SELECT s.value = o.o->>'sasl.password' FROM kafka_sink.secrets s JOIN kafka_sink.pipeline_definitions d ON d.id = s.pipeline_id, ks_sec.opts_$SFX o WHERE d.name = '$SEC' AND s.name = 'sasl.password' AND o.n = 4")|$(as_role "$A" -c "SELECT concat_ws('|', kafka_options->>'sasl.password', coalesce(kafka_options->>'debug', '')) FROM kafka_sink.pipelines WHERE name = '$SEC'")"
printf '3|{"id":3,"v":"c"}\n' | produce "$T"
check "the restarted worker goes on" "t|3" \
      "$(as_role "$A" -c "SELECT kafka_sink.wait('$SEC', '60 s')")|$(sql -c "SELECT count(*) FROM ks_sec.sec_$SFX")"
# a worker that cannot start because of its options (a key that is no PEM)
as_role "$A" -c "SELECT kafka_sink.create_pipeline(name => 'sec_fail_$SFX', bootstrap_servers => '$KS_BOOTSTRAP',
       subscribe => ARRAY['$T'], target => 'ks_sec.sec_$SFX', starting_offsets => 'earliest',
       kafka_options => $(opts 6))" >/dev/null
poll "SELECT count(*) > 0 FROM kafka_sink.errors e JOIN kafka_sink.pipeline_definitions d ON d.id = e.pipeline_id WHERE d.name = 'sec_fail_$SFX'" 15 || true
# Was a bug (fixed: the pipeline fails with the error recorded): when rd_kafka_new fails in the worker
# (src/kafka/consumer.c ks_consumer_create: ERROR "could not create a Kafka
# consumer", e.g. "ssl.key.pem failed: not in PEM format?"), the worker
# exits and is restarted with backoff, but the reason is only in the server
# log: kafka_sink.errors stays empty, status shows the pipeline 'running'
# with no worker_detail and no last_error.
check "a worker that cannot create its consumer says why in kafka_sink.status" t \
      "$(sql -c "SELECT coalesce(last_error, worker_detail, '') LIKE '%could not create a Kafka consumer%' FROM kafka_sink.status WHERE name = 'sec_fail_$SFX'")"
check "the failing worker's error names the option, not the key" "t|f" \
      "$(new_log | contains 'ssl.key.pem failed')|$(new_log | contains "$S_PEM")"
sql -c "SELECT kafka_sink.drop_pipeline('sec_fail_$SFX')" >/dev/null
leaks="$(lines_with "$LOGF" "${SECRETS[@]}")"
check "no secret appears anywhere in the server log" 0 "$leaks"
check "no secret appears in kafka_sink.errors or kafka_sink.quarantine" 0 \
      "$(sql -c "SELECT count(*) FROM ks_sec.opts_$SFX o, jsonb_each_text(o.o) e,
                   (SELECT coalesce(message, '') || coalesce(detail, '') AS t FROM kafka_sink.errors
                    UNION ALL SELECT detail FROM kafka_sink.quarantine) x
                  WHERE (e.key LIKE '%password' OR e.key LIKE 'ssl%key%') AND strpos(x.t, e.value) > 0")"
as_role "$A" -c "SELECT kafka_sink.drop_pipeline('$SEC')" >/dev/null
check "dropping the pipeline removes its secrets" "0|0" "$(sql -c "SELECT count(*) FROM kafka_sink.secrets s WHERE NOT EXISTS (SELECT 1 FROM kafka_sink.pipeline_definitions d WHERE d.id = s.pipeline_id)")|$(sql -c "SELECT count(*) FROM kafka_sink.secrets s JOIN ks_sec.opts_$SFX o ON s.value = o.o->>s.name")"

# =============================================================================
# privileges
# =============================================================================
T="e2e_sec_p_$SFX"
"$HARNESS" topic-create "$T" 1 >/dev/null 2>&1
PRIV="priv_$SFX"
sql >/dev/null <<SQL
CREATE TABLE ks_sec.priv_$SFX (id bigint PRIMARY KEY, v text);
GRANT SELECT, INSERT, UPDATE ON ks_sec.priv_$SFX TO $A;
SQL
printf '1|{"id":1,"v":"a"}\n2|{"id":2,"v":"b"}\n' | produce "$T" -p 0
as_role "$A" -c "SELECT kafka_sink.create_pipeline(name => '$PRIV', bootstrap_servers => '$KS_BOOTSTRAP',
       subscribe => ARRAY['$T'], target => 'ks_sec.priv_$SFX', starting_offsets => 'earliest')" >/dev/null
check "a target owned by someone else, with INSERT/UPDATE/SELECT granted: ingests" "t|2" \
      "$(as_role "$A" -c "SELECT kafka_sink.wait('$PRIV', '60 s')")|$(sql -c "SELECT count(*) FROM ks_sec.priv_$SFX")"
checkpoint() { sql -c "SELECT next_offset FROM kafka_sink.offsets o JOIN kafka_sink.pipeline_definitions d ON d.id = o.pipeline_id WHERE d.name = '$PRIV'"; }
sql -c "REVOKE INSERT ON ks_sec.priv_$SFX FROM $A" >/dev/null
printf '3|{"id":3,"v":"c"}\n' | produce "$T" -p 0
poll "SELECT state = 'failed' FROM kafka_sink.pipeline_definitions WHERE name = '$PRIV'" 30 || true
check "INSERT revoked while running: the pipeline fails" failed \
      "$(sql -c "SELECT state FROM kafka_sink.pipelines WHERE name = '$PRIV'")"
check "status shows the permission error" t \
      "$(sql -c "SELECT last_error LIKE 'permission denied for table priv_$SFX%' FROM kafka_sink.status WHERE name = '$PRIV'")"
check "kafka_sink.errors: permanent, 42501" "permanent|42501" \
      "$(sql -c "SELECT kind || '|' || sqlstate FROM kafka_sink.errors e JOIN kafka_sink.pipeline_definitions d ON d.id = e.pipeline_id WHERE d.name = '$PRIV' ORDER BY e.id DESC LIMIT 1")"
check "nothing applied, the checkpoint did not advance" "2|2" "$(sql -c "SELECT count(*) FROM ks_sec.priv_$SFX")|$(checkpoint)"
check "wait() reports the failure" 55000 "$(errcode "$A" "SELECT kafka_sink.wait('$PRIV', '5 s')")"
sql -c "GRANT INSERT ON ks_sec.priv_$SFX TO $A" >/dev/null
as_role "$A" -c "SELECT kafka_sink.start('$PRIV')" >/dev/null
check "granted again and started: it resumes from the checkpoint" "t|3|3" \
      "$(as_role "$A" -c "SELECT kafka_sink.wait('$PRIV', '60 s')")|$(sql -c "SELECT count(*) FROM ks_sec.priv_$SFX")|$(checkpoint)"

check "a role outside kafka_sink_admin cannot create, produce or stop (42501)" "42501|42501|42501" \
      "$(errcode "$PLAIN" "SELECT kafka_sink.create_pipeline(name => 'plain_$SFX', bootstrap_servers => '$KS_BOOTSTRAP', subscribe => ARRAY['$T'], target => 'ks_sec.priv_$SFX')")|$(errcode "$PLAIN" "SELECT * FROM kafka_sink.produce('$KS_BOOTSTRAP', '$T', 'k', '{}')")|$(errcode "$PLAIN" "SELECT kafka_sink.stop('$PRIV')")"
gen_before="$(sql -c "SELECT generation || '|' || state FROM kafka_sink.pipeline_definitions WHERE name = '$PRIV'")"
check "another admin cannot stop, drop, alter, start, pause, reset or replay it (undefined_object)" \
      "42704|42704|42704|42704|42704|42704|42704" \
      "$(errcode "$B" "SELECT kafka_sink.stop('$PRIV')")|$(errcode "$B" "SELECT kafka_sink.drop_pipeline('$PRIV')")|$(errcode "$B" "SELECT kafka_sink.alter_pipeline('$PRIV', workers => 2)")|$(errcode "$B" "SELECT kafka_sink.start('$PRIV')")|$(errcode "$B" "SELECT kafka_sink.pause('$PRIV')")|$(errcode "$B" "SELECT * FROM kafka_sink.reset_offsets('$PRIV', 'earliest')")|$(errcode "$B" "SELECT * FROM kafka_sink.replay_quarantine('$PRIV')")"
check "drop_pipeline(if_exists) by another admin does not drop it either" ok \
      "$(errcode "$B" "SELECT kafka_sink.drop_pipeline('$PRIV', if_exists => true)")"
check "nor can it change the catalog directly: only the API writes it (catalog_guard.sh)" "42501|42501|42501" \
      "$(errcode "$B" "UPDATE kafka_sink.pipeline_definitions SET state = 'stopped' WHERE name = '$PRIV'")|$(errcode "$B" "DELETE FROM kafka_sink.offsets")|$(errcode "$B" "DELETE FROM kafka_sink.pipeline_definitions")"
pid_a="$(sql -c "SELECT id FROM kafka_sink.pipeline_definitions WHERE name = '$PRIV'")"
check "nor insert a checkpoint or a secret for it" "42501|42501" \
      "$(errcode "$B" "INSERT INTO kafka_sink.offsets (pipeline_id, topic, partition, next_offset) VALUES ($pid_a, 'x', 9, 0)")|$(errcode "$B" "INSERT INTO kafka_sink.secrets (pipeline_id, name, value) VALUES ($pid_a, 'sasl.password', 'x')")"
check "the pipeline is untouched" "$gen_before|$(checkpoint)" \
      "$(sql -c "SELECT generation || '|' || state FROM kafka_sink.pipeline_definitions WHERE name = '$PRIV'")|$(checkpoint)"
as_role "$A" -c "SELECT kafka_sink.drop_pipeline('$PRIV')" >/dev/null

# superuser-owned pipelines
sql -c "CREATE TABLE ks_sec.su_$SFX (id bigint PRIMARY KEY, v text)" >/dev/null
su_create="SELECT kafka_sink.create_pipeline(name => 'su_$SFX', bootstrap_servers => '$KS_BOOTSTRAP', subscribe => ARRAY['$T'], target => 'ks_sec.su_$SFX', starting_offsets => 'earliest')"
check "a superuser-owned pipeline is refused by default" 42501 "$(errcode "$PGUSER" "$su_create")"
sql -c "ALTER SYSTEM SET kafka_sink.allow_superuser_pipelines = on" -c "SELECT pg_reload_conf()" >/dev/null
poll "SELECT current_setting('kafka_sink.allow_superuser_pipelines') = 'on'" 10 || true
check "with kafka_sink.allow_superuser_pipelines = on it is allowed" ok "$(errcode "$PGUSER" "$su_create")"
check "and it runs, owned by the superuser" "t|3|$PGUSER" \
      "$(sql -c "SELECT kafka_sink.wait('su_$SFX', '60 s')")|$(sql -c "SELECT count(*) FROM ks_sec.su_$SFX")|$(sql -c "SELECT owner FROM kafka_sink.pipelines WHERE name = 'su_$SFX'")"
sql -c "SELECT kafka_sink.drop_pipeline('su_$SFX')" >/dev/null
sql -c "ALTER SYSTEM RESET kafka_sink.allow_superuser_pipelines" -c "SELECT pg_reload_conf()" >/dev/null

# =============================================================================
# kafka_options that crash librdkafka
# =============================================================================
# librdkafka 2.0.2 (Debian 12) segfaults in its rdk:main thread when
# enable.sasl.oauthbearer.unsecure.jwt is on and sasl.oauthbearer.config
# cannot be parsed (kcat crashes the same way).  Inside a backend that would
# make the postmaster restart the whole cluster, again and again: the
# option is refused up front.
sql >/dev/null <<SQL
INSERT INTO ks_sec.opts_$SFX VALUES (7, '{"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "OAUTHBEARER",
    "enable.sasl.oauthbearer.unsecure.jwt": "true", "sasl.oauthbearer.config": "principal=alice not-a-key-value"}');
SQL
crash_mark="$(stat -c %s "$LOGF")"
refused="$(as_role "$A" -c "SELECT kafka_sink.create_pipeline(name => 'crash_$SFX', bootstrap_servers => '$KS_BOOTSTRAP',
       subscribe => ARRAY['$T'], target => 'ks_sec.priv_$SFX', kafka_options => $(opts 7))" 2>&1 | contains 'is not supported' || true)"
check "kafka_options that crash librdkafka are refused" t "$refused"
crashed=0
for ((i = 0; i < 20; i++)); do
    if [ "$(tail -c +$((crash_mark + 1)) "$LOGF" | contains 'terminated by signal')" = t ]; then crashed=1; break; fi
    sleep 0.5
done
retry_sql "SELECT kafka_sink.drop_pipeline('crash_$SFX', if_exists => true)" || true
check "a pipeline's kafka_options cannot crash the server" 0 "$crashed"
# the server is back before anything else runs
retry_sql "SELECT 1" || true

finish
