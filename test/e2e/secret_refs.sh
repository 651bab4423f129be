#!/usr/bin/env bash
# secret_refs: secret options given by reference, {"env": "NAME"} and
# {"file": "/path"}, against a real SASL broker of the script's own and the
# test schema registry with basic auth, in a cluster of the script's own
# that logs every statement (log_statement = all, log_min_error_statement =
# error) and librdkafka's debug lines (log_min_messages = debug1), and whose
# postmaster was started with the variables in its environment:
#  - the env form and the file form consume (SASL and the registry's
#    basic.auth.user.info): every message lands with its value;
#  - rotation: a changed file is read at the next client build (the
#    pipeline's restart), no cluster restart: a wrong password in the file
#    is refused visibly, the right one (with SCRAM: a new password set on
#    the broker and in the file) consumes again;
#  - a missing file, an unreadable file, an unset variable, a variable no
#    longer allowed (kafka_sink.secret_env_allowed narrowed on a running
#    pipeline), an owner who lost pg_read_server_files: each fails the
#    pipeline visibly, naming the variable or the path; a variable that is
#    not allowed and a file for an owner without the role are refused by
#    create_pipeline;
#  - the whole server log, kafka_sink.errors and the views (as the owner and
#    as another role) never hold a secret value; a literal canary password
#    in a failing statement does reach the log (the grep can fail).
# SCRAM needs librdkafka >= 2.6.1 against Kafka 4.x (see broker_security.sh):
# with an older one the SASL pipelines use PLAIN, and the rotation is of the
# file alone (the broker's PLAIN users are fixed at its start).
. "$(dirname "$0")/../lib/common.sh"
BDIR="$KS_RUN/sref_broker_$SFX"
SUB="$KS_RUN/sref_pg_$SFX"
# files the server (OS user kstest when run as root) reads: outside /root
SDIR="/tmp/ks_sref_$SFX"
BPID=""
REG_PID=""
T0=$SECONDS

cleanup() {
    stop_process "$REG_PID" 5
    stop_process "$BPID" 10
    rm -rf "$SDIR"
    [ "$KS_EXIT_STATUS" -eq 0 ] || [ ! -s "$BDIR/broker.log" ] || { echo "# broker log tail:"; tail -n 20 "$BDIR/broker.log" | sed 's/^/#   /'; }
}
at_exit cleanup

rnd() { head -c 9 /dev/urandom | od -An -tx1 | tr -d ' \n'; }
PW1="ksRef1$(rnd)"; PW2="ksRef2$(rnd)"; PW_WRONG="ksRefWrong$(rnd)"
PW_ADMIN="ksRefAdm$(rnd)"; PW_REG="ksRefReg$(rnd)"; PW_CANARY="ksRefCanary$(rnd)"
SECRETS=("$PW1" "$PW2" "$PW_WRONG" "$PW_ADMIN" "$PW_REG")

mkdir -p "$BDIR" "$SDIR"
chmod 755 "$SDIR"
put() { printf '%s\n' "$2" > "$SDIR/$1"; chmod 644 "$SDIR/$1"; }

# ---- our own broker: SASL_PLAINTEXT (SCRAM-SHA-256 alice, PLAIN carol) for
# the pipelines, a PLAINTEXT listener for producing and administration
P_SASL="$(free_port)"; P_ADM="$(free_port "$P_SASL")"; P_CTL="$(free_port "$P_SASL" "$P_ADM")"
BS_SASL="127.0.0.1:$P_SASL"; BS_ADM="127.0.0.1:$P_ADM"
cat > "$BDIR/server.properties" <<EOF
# written by test/e2e/secret_refs.sh; single-node KRaft broker+controller
process.roles=broker,controller
node.id=1
controller.quorum.bootstrap.servers=127.0.0.1:$P_CTL
listeners=SASL_PLAINTEXT://$BS_SASL,ADMIN://$BS_ADM,CONTROLLER://127.0.0.1:$P_CTL
advertised.listeners=SASL_PLAINTEXT://$BS_SASL,ADMIN://$BS_ADM
controller.listener.names=CONTROLLER
inter.broker.listener.name=ADMIN
listener.security.protocol.map=CONTROLLER:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,ADMIN:PLAINTEXT
sasl.enabled.mechanisms=SCRAM-SHA-256,PLAIN
listener.name.sasl_plaintext.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="$PW_ADMIN" user_admin="$PW_ADMIN" user_carol="$PW1";
listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
num.partitions=1
offsets.topic.num.partitions=1
$(own_broker_files "$BDIR")
EOF
own_broker_start "$BDIR" --add-scram "SCRAM-SHA-256=[name=alice,password=$PW1]" || exit 1
BPID="$OWN_BROKER_PID"

# ---- the registry, with basic auth ------------------------------------------------------
python3 "$REPO/test/tools/schema_registry.py" --port 0 --port-file "$BDIR/reg_port" \
    --state "$BDIR/reg_state.json" --user "ks:$PW_REG" > "$BDIR/reg.log" 2>&1 &
REG_PID=$!

# ---- our own cluster: every statement logged, the variables in its environment ----------
KS_SREF_PW="$PW1" KS_SREF_REG="ks:$PW_REG" KS_PG_CONF="log_statement = 'all'
log_min_error_statement = error
log_min_messages = debug1
kafka_sink.secret_env_allowed = 'KS_SREF_PW, KS_SREF_REG, KS_SREF_UNSET'" own_cluster_start "$SUB" || exit 1
export PGPORT="$(own_port "$SUB")"
LOGF="$SUB/logs/postgresql.log"
setup_owner >/dev/null
sql >/dev/null <<SQL
DO \$\$ BEGIN
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'ks_e2e_other') THEN CREATE ROLE ks_e2e_other LOGIN; END IF;
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'ks_e2e_nofile') THEN CREATE ROLE ks_e2e_nofile LOGIN; END IF;
END \$\$;
GRANT kafka_sink_admin TO ks_e2e_other, ks_e2e_nofile;
GRANT pg_read_server_files TO ks_e2e;
GRANT USAGE, CREATE ON SCHEMA e2e TO ks_e2e_nofile;
SQL
poll "SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'kafka_sink launcher'" 30 || true

up=0
for _ in $(seq 90); do
    kill -0 "$BPID" 2>/dev/null || break
    if kcat -b "$BS_ADM" -L -m 2 2>/dev/null | grep -q '1 brokers:'; then up=1; break; fi
    sleep 0.5
done
check "our SASL broker answers on its PLAINTEXT listener (kcat -L)" 1 "$up"
[ "$up" = 1 ] || exit 1
for _ in $(seq 50); do [ -s "$BDIR/reg_port" ] && break; sleep 0.1; done
REG="http://127.0.0.1:$(cat "$BDIR/reg_port")"
echo "# broker and cluster up in $((SECONDS - T0)) s"

RDVER="$(sql -c "SELECT kafka_sink.librdkafka_version()")"
if [ "$(printf '%s\n2.6.1\n' "$RDVER" | sort -V | head -1)" = 2.6.1 ]; then
    MECH=SCRAM-SHA-256; SUSER=alice
else
    MECH=PLAIN; SUSER=carol
fi
echo "# librdkafka $RDVER: the SASL pipelines use $MECH ($SUSER)"

# ---- helpers --------------------------------------------------------------------------------
as_owner() { as_role "${OWNER:-ks_e2e}" "$@"; }
sasl_opts() {  # sasl_opts PASSWORD_JSON: kafka_options for our SASL listener
    echo "{\"security.protocol\": \"SASL_PLAINTEXT\", \"sasl.mechanism\": \"$MECH\", \"sasl.username\": \"$SUSER\", \"sasl.password\": $1, \"debug\": \"security,broker\"}"
}
create() {  # create NAME TOPIC KAFKA_OPTIONS_JSON [EXTRA]: as $OWNER (default ks_e2e), started
    as_owner -c "CREATE TABLE IF NOT EXISTS e2e.$1 (id bigint PRIMARY KEY, v text)" \
             -c "SELECT kafka_sink.create_pipeline(name => '$1', bootstrap_servers => '${BS:-$BS_SASL}',
                   subscribe => ARRAY['$2'], target => 'e2e.$1', starting_offsets => 'earliest',
                   trigger_interval => '50 ms', kafka_options => '$3' ${4:-})" >/dev/null
}
produce_json() {  # produce_json TOPIC FROM TO: {"id": i, "v": "v<i>"} on the PLAINTEXT listener
    local i
    for ((i = $2; i <= $3; i++)); do printf '{"id":%d,"v":"v%d"}\n' "$i" "$i"; done \
        | kcat -P -b "$BS_ADM" -t "$1"
}
# landed NAME N: wait() within 30 s|rows|rows whose v is v<id> (the model)
landed() {
    echo "$(as_owner -c "SELECT kafka_sink.wait('$1', '30 s')" 2>&1 | head -1)|$(sql -c "SELECT count(*) FROM e2e.$1")|$(sql -c "SELECT count(*) FROM e2e.$1 WHERE v = 'v' || id AND id BETWEEN 1 AND $2")"
}
# failed_with NAME TEXT: within 30 s the pipeline is failed and its last
# error holds TEXT (a fixed string)|rows applied
failed_with() {
    poll "SELECT state = 'failed' AND strpos(last_error, \$q\$$2\$q\$) > 0 FROM kafka_sink.status WHERE name = '$1'" 30 || true
    echo "$(sql -c "SELECT state || ':' || (strpos(coalesce(last_error, ''), \$q\$$2\$q\$) > 0) FROM kafka_sink.status WHERE name = '$1'")|$(sql -c "SELECT count(*) FROM e2e.$1")"
}
# auth_refused NAME: within 30 s status names the authentication failure
auth_refused() {
    local q="SELECT coalesce(worker_detail, '') || coalesce(last_error, '') ~* 'sasl|authenticat' FROM kafka_sink.status WHERE name = '$1'"
    poll "$q" 30 || true
    sql -c "$q"
}
restart() {  # restart NAME: stop, wait for its workers to go, start (a new client)
    as_owner -c "SELECT kafka_sink.stop('$1')" >/dev/null
    poll "SELECT coalesce(workers, 0) = 0 FROM kafka_sink.status WHERE name = '$1'" 30 || true
    as_owner -c "SELECT kafka_sink.start('$1')" >/dev/null
}
refusal() { as_owner -c "$1" 2>&1 | grep -o 'ERROR:.*' | head -1; }
status_of() { sql -c "SELECT concat_ws(' || ', state, worker_detail, last_error) FROM kafka_sink.status WHERE name = '$1'"; }

# =============================================================================
# the env form and the file form consume
# =============================================================================
T_ENV="sref_env_$SFX"; T_FILE="sref_file_$SFX"; T_FAIL="sref_fail_$SFX"
produce_json "$T_ENV" 1 5; produce_json "$T_FILE" 1 5; produce_json "$T_FAIL" 1 3
put pw "$PW1"
create "sref_env_$SFX" "$T_ENV" "$(sasl_opts '{"env": "KS_SREF_PW"}')"
create "sref_file_$SFX" "$T_FILE" "$(sasl_opts "{\"file\": \"$SDIR/pw\"}")"
check "env form ($MECH): caught up, 5 rows, each with its value" "t|5|5" "$(landed "sref_env_$SFX" 5)"
check "file form ($MECH): caught up, 5 rows, each with its value" "t|5|5" "$(landed "sref_file_$SFX" 5)"
check "the views show the references, not values" \
      '{"env": "KS_SREF_PW"}|{"file": "'"$SDIR"'/pw"}' \
      "$(as_owner -c "SELECT kafka_options->'sasl.password' FROM kafka_sink.pipelines WHERE name = 'sref_env_$SFX'")|$(as_owner -c "SELECT kafka_options->'sasl.password' FROM kafka_sink.pipelines WHERE name = 'sref_file_$SFX'")"
check "nothing of the referenced secrets is in kafka_sink.secrets" 0 \
      "$(sql -c "SELECT count(*) FROM kafka_sink.secrets s JOIN kafka_sink.pipeline_definitions p ON p.id = s.pipeline_id WHERE p.name LIKE 'sref\\_%\\_$SFX'")"

# =============================================================================
# rotation: the file is read again at the next client build
# =============================================================================
put pw "$PW_WRONG"
restart "sref_file_$SFX"
check "a wrong password written into the file is used by the restarted client: refused visibly" t \
      "$(auth_refused "sref_file_$SFX")"
if [ "$MECH" = SCRAM-SHA-256 ]; then
    # a new password on the broker (the old one stops working) and in the file
    java -Xmx128m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Dlog4j2.configurationFile="$BDIR/log4j2.properties" \
        -cp "$KS_KAFKA_CP" kafka.admin.ConfigCommand --bootstrap-server "$BS_ADM" --alter \
        --add-config "SCRAM-SHA-256=[password=$PW2]" --entity-type users --entity-name alice > "$BDIR/scram.log" 2>&1 \
        || sed 's/^/#   /' "$BDIR/scram.log"
    put pw "$PW2"
    ROTATED="a new SCRAM password on the broker and in the file"
else
    put pw "$PW1"
    ROTATED="the right password back in the file"
fi
produce_json "$T_FILE" 6 10
restart "sref_file_$SFX"
check "rotation ($ROTATED), no cluster restart: the restarted pipeline catches up, 10 rows" "t|10|10" \
      "$(landed "sref_file_$SFX" 10)"
if [ "$MECH" = SCRAM-SHA-256 ]; then
    # the env form changes only with the postmaster's environment
    restart "sref_env_$SFX"
    check "env form after the broker's rotation: the unchanged variable is refused visibly" t \
          "$(auth_refused "sref_env_$SFX")"
fi

# =============================================================================
# what fails, fails visibly, naming the variable or the path
# =============================================================================
BS="$BS_SASL"
create "sref_missing_$SFX" "$T_FAIL" "$(sasl_opts "{\"file\": \"$SDIR/missing\"}")"
check "a missing file fails the pipeline, naming the path" "failed:true|0" \
      "$(failed_with "sref_missing_$SFX" "could not open file \"$SDIR/missing\" of Kafka option \"sasl.password\": No such file")"
put unreadable "$PW1"; chmod 000 "$SDIR/unreadable"
create "sref_unreadable_$SFX" "$T_FAIL" "$(sasl_opts "{\"file\": \"$SDIR/unreadable\"}")"
check "an unreadable file fails the pipeline, naming the path" "failed:true|0" \
      "$(failed_with "sref_unreadable_$SFX" "could not open file \"$SDIR/unreadable\" of Kafka option \"sasl.password\": Permission denied")"
: > "$SDIR/empty"; chmod 644 "$SDIR/empty"
create "sref_empty_$SFX" "$T_FAIL" "$(sasl_opts "{\"file\": \"$SDIR/empty\"}")"
check "an empty file fails the pipeline, naming the path" "failed:true|0" \
      "$(failed_with "sref_empty_$SFX" "file \"$SDIR/empty\" of Kafka option \"sasl.password\" is empty")"
create "sref_unset_$SFX" "$T_FAIL" "$(sasl_opts '{"env": "KS_SREF_UNSET"}')"
check "an unset variable fails the pipeline, naming the variable" "failed:true|0" \
      "$(failed_with "sref_unset_$SFX" 'environment variable "KS_SREF_UNSET" of Kafka option "sasl.password" is not set')"
check "a variable kafka_sink.secret_env_allowed does not list is refused by create_pipeline" \
      'ERROR:  environment variable "HOME" of Kafka option "sasl.password" is not allowed' \
      "$(refusal "SELECT kafka_sink.create_pipeline(name => 'sref_home_$SFX', bootstrap_servers => '$BS_SASL', subscribe => ARRAY['$T_FAIL'], target => 'e2e.sref_env_$SFX', kafka_options => '$(sasl_opts '{"env": "HOME"}')')")"
as_role ks_e2e_nofile -c "CREATE TABLE e2e.sref_nofile_$SFX (id bigint PRIMARY KEY, v text)" >/dev/null
check "a file for an owner without pg_read_server_files is refused by create_pipeline" \
      'ERROR:  Kafka option "sasl.password" names a file on the database server' \
      "$(OWNER=ks_e2e_nofile refusal "SELECT kafka_sink.create_pipeline(name => 'sref_nofile_$SFX', bootstrap_servers => '$BS_SASL', subscribe => ARRAY['$T_FAIL'], target => 'e2e.sref_nofile_$SFX', kafka_options => '$(sasl_opts "{\"file\": \"$SDIR/pw\"}")')")"

# roles change: the owner loses pg_read_server_files, the restarted worker refuses the file
sql -c "REVOKE pg_read_server_files FROM ks_e2e" >/dev/null
restart "sref_file_$SFX"
check "an owner who lost pg_read_server_files: the pipeline fails at its next start" "failed:true|10" \
      "$(failed_with "sref_file_$SFX" 'Kafka option "sasl.password" names a file on the database server')"
sql -c "GRANT pg_read_server_files TO ks_e2e" >/dev/null

# the setting changes: a running pipeline whose variable is no longer listed fails
if [ "$MECH" = SCRAM-SHA-256 ]; then as_owner -c "SELECT kafka_sink.stop('sref_env_$SFX')" >/dev/null; fi
sql -c "ALTER SYSTEM SET kafka_sink.secret_env_allowed = 'KS_SREF_REG'" -c "SELECT pg_reload_conf()" >/dev/null
if [ "$MECH" != SCRAM-SHA-256 ]; then
    check "kafka_sink.secret_env_allowed narrowed: the running env pipeline fails, naming the variable" "failed:true|5" \
          "$(failed_with "sref_env_$SFX" 'environment variable "KS_SREF_PW" of Kafka option "sasl.password" is not allowed')"
else
    as_owner -c "SELECT kafka_sink.start('sref_env_$SFX')" >/dev/null
    check "kafka_sink.secret_env_allowed narrowed: the env pipeline fails at its start, naming the variable" "failed:true|5" \
          "$(failed_with "sref_env_$SFX" 'environment variable "KS_SREF_PW" of Kafka option "sasl.password" is not allowed')"
fi

# =============================================================================
# the registry's basic.auth.user.info by file and by env
# =============================================================================
SCHEMA='{"type": "record", "name": "R", "namespace": "ks.e2e", "fields": [{"name": "id", "type": "long"}, {"name": "v", "type": "string"}]}'
T_REG="sref_reg_$SFX"
"$HARNESS" topic-create "$T_REG" 1 >/dev/null 2>&1
SID="$(curl -s -u "ks:$PW_REG" -XPOST -H 'Content-Type: application/vnd.schemaregistry.v1+json' \
       --data "$(python3 -c 'import json,sys; print(json.dumps({"schema": sys.argv[1]}))' "$SCHEMA")" \
       "$REG/subjects/$T_REG-value/versions" | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')"
# Confluent's wire format by hand: 0, the schema id (4 bytes), the Avro body
python3 - "$SID" "$BDIR/avro" <<'PY'
import os, struct, sys
sid, out = int(sys.argv[1]), sys.argv[2]
os.makedirs(out, exist_ok=True)
def zz(n):
    n = (n << 1) ^ (n >> 63)
    b = bytearray()
    while n & ~0x7f:
        b.append((n & 0x7f) | 0x80); n >>= 7
    b.append(n)
    return bytes(b)
for i in range(1, 4):
    v = ("v%d" % i).encode()
    with open("%s/%d.bin" % (out, i), "wb") as f:
        f.write(b"\0" + struct.pack(">i", sid) + zz(i) + zz(len(v)) + v)
PY
kcat -P -b "$KS_BOOTSTRAP" -t "$T_REG" "$BDIR/avro/1.bin" "$BDIR/avro/2.bin" "$BDIR/avro/3.bin"
put reg "ks:$PW_REG"
BS="$KS_BOOTSTRAP"
create "sref_regfile_$SFX" "$T_REG" '{}' ", value_format => 'avro', key_columns => ARRAY['id'], schema_registry => '{\"url\": \"$REG\", \"basic.auth.user.info\": {\"file\": \"$SDIR/reg\"}}'"
create "sref_regenv_$SFX" "$T_REG" '{}' ", value_format => 'avro', key_columns => ARRAY['id'], schema_registry => '{\"url\": \"$REG\", \"basic.auth.user.info\": {\"env\": \"KS_SREF_REG\"}}'"
check "registry basic auth from a file: 3 Avro rows, each with its value" "t|3|3" "$(landed "sref_regfile_$SFX" 3)"
check "registry basic auth from the environment: 3 Avro rows, each with its value" "t|3|3" "$(landed "sref_regenv_$SFX" 3)"
check "no message was quarantined" 0 \
      "$(sql -c "SELECT count(*) FROM kafka_sink.quarantine q JOIN kafka_sink.pipeline_definitions p ON p.id = q.pipeline_id WHERE p.name LIKE 'sref\\_reg%\\_$SFX'")"
check "the registry's reference is shown, not a value" '{"file": "'"$SDIR"'/reg"}' \
      "$(as_owner -c "SELECT schema_registry->'basic.auth.user.info' FROM kafka_sink.pipelines WHERE name = 'sref_regfile_$SFX'")"

# =============================================================================
# no secret value in the log, the errors, the views
# =============================================================================
# the negative control: a literal password in a failing statement is logged
# by PostgreSQL itself (the statement's text), so the grep below can fail
as_owner -c "SELECT kafka_sink.create_pipeline(name => 'sref_canary_$SFX', bootstrap_servers => '$BS_SASL', subscribe => ARRAY['$T_FAIL'], target => 'e2e.no_such_table', kafka_options => '{\"sasl.password\": \"$PW_CANARY\"}')" >/dev/null 2>&1 || true
sleep 1
check "control: log_statement = all logged the literal canary of a failing statement" t \
      "$([ "$(lines_with "$LOGF" "$PW_CANARY")" -gt 0 ] && echo t || echo f)"
check "control: the log has the statements that named the references" t \
      "$([ "$(lines_with "$LOGF" 'KS_SREF_PW' "$SDIR/pw")" -gt 0 ] && echo t || echo f)"
check "control: librdkafka's debug lines are in the log" t \
      "$([ "$(lines_with "$LOGF" 'librdkafka: ')" -gt 0 ] && echo t || echo f)"
n=0
for s in "${SECRETS[@]}"; do n=$((n + $(lines_with "$LOGF" "$s"))); done
check "no secret value (the passwords, the registry's) in the whole server log" 0 "$n"
VIEWS="$(for r in ks_e2e ks_e2e_other; do
    as_role "$r" -c "SELECT p::text FROM kafka_sink.pipelines p" -c "SELECT s::text FROM kafka_sink.status s" \
                 -c "SELECT e::text FROM kafka_sink.errors e" 2>&1
done; sql -c "SELECT e::text FROM kafka_sink.errors e")"
n=0
for s in "${SECRETS[@]}"; do n=$((n + $(grep -c -F -- "$s" <<<"$VIEWS" || true))); done
check "no secret value in kafka_sink.pipelines, status and errors (owner, another role, superuser)" 0 "$n"
check "another role sees none of the owner's pipelines" 0 \
      "$(as_role ks_e2e_other -c "SELECT count(*) FROM kafka_sink.pipelines WHERE name LIKE 'sref\\_%'")"

echo "# secret_refs took $((SECONDS - T0)) s"
sql -c "ALTER SYSTEM RESET kafka_sink.secret_env_allowed" -c "SELECT pg_reload_conf()" >/dev/null
finish
