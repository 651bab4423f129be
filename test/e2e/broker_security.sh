#!/usr/bin/env bash
# broker_security: SASL and SSL options pass through to librdkafka, against a
# real broker.  The shared test broker is PLAINTEXT only, so this script
# starts its own single-node KRaft broker (never touching the shared one)
# with four listeners:
#   SASL_PLAINTEXT  SCRAM-SHA-256 (alice), SCRAM-SHA-512 (bob), PLAIN (carol),
#                   OAUTHBEARER (Kafka's unsecured JWT validator)
#   SSL             server certificate signed by a CA the script makes
#   SASL_SSL        SCRAM-SHA-512 over TLS
#   MTLS            SSL with ssl.client.auth=required (client certificates
#                   signed by the same CA)
#   CONTROLLER      PLAINTEXT, the KRaft quorum
# and checks:
#  - a pipeline per mechanism catches up (kafka_sink.wait) and the target
#    has the rows; the password is masked in kafka_sink.pipelines;
#  - a wrong password is visible within seconds in kafka_sink.status and in
#    kafka_sink.errors (not a silent stall), and wait() on that pipeline
#    fails or times out within its timeout instead of hanging;
#  - no password (right or wrong) ever reaches the server log,
#    kafka_sink.errors or kafka_sink.status;
#  - OAUTHBEARER with sasl.oauthbearer.method=oidc: librdkafka fetches an
#    (unsigned) JWT from a token endpoint the script serves on loopback
#    (client-credentials grant, HTTP Basic client id/secret) and the broker
#    accepts it; a wrong client secret is visible.  OIDC needs a librdkafka
#    built with libcurl (builtin.features has "oidc"): Debian's 2.0.2 is not,
#    and there create_pipeline refuses the option;
#  - mTLS: client certificate and key from files (ssl.*.location, an owner
#    that may read server files: pg_read_server_files) and inline
#    (ssl.*.pem, an owner without that role); no certificate is refused
#    visibly.
# The librdkafka in use is the one the server loaded
# (kafka_sink.librdkafka_version()); with KS_RDKAFKA=X.Y.Z (run_tests.sh
# builds against that one) it must be X.Y.Z, i.e. the rpath works.
# SCRAM needs librdkafka >= 2.6.1 against a Kafka 4.x broker: older versions
# send a client-final nonce that 4.x rejects as "invalid credentials"
# (confluentinc/librdkafka#4895).  With an older librdkafka (Debian 12 has
# 2.0.2) the SCRAM checks become: the pipeline, with the right password, is
# refused and kafka_sink.status says so; the broker's SCRAM users are proven
# good by the Java client instead.
# Passwords are random and are passed through a table, never in statement
# text (PostgreSQL logs the text of a failing statement by itself).
. "$(dirname "$0")/../lib/common.sh"
setup_owner
LOGF="$KS_LOGS/postgresql.log"
O=ks_e2e
BDIR="$KS_RUN/sasl_$SFX"
# files PostgreSQL (OS user kstest) must read: o+rx, outside /root
SSLDIR="/tmp/ks_ssl_$SFX"
BPID=""
TPID=""
T0=$SECONDS
TABLES="sha256 sha512 plain wrong ssl saslssl mtls mtlspem nocert oidc oidcwrong"

# at exit: the pipelines, tables and roles, then the token server and the
# broker, then the certificates
cleanup() {
    sql -c "SELECT kafka_sink.drop_pipeline(name) FROM kafka_sink.pipeline_definitions WHERE name LIKE 'bsec\\_%\\_$SFX'" >/dev/null 2>&1
    sql -c "DROP TABLE IF EXISTS e2e.bsec_opts_$SFX" >/dev/null 2>&1
    for t in $TABLES; do
        sql -c "DROP TABLE IF EXISTS e2e.bsec_${t}_$SFX" >/dev/null 2>&1
    done
    sql -c "REVOKE pg_read_server_files FROM $O" >/dev/null 2>&1
    sql -c "DROP OWNED BY ks_e2e_pem" >/dev/null 2>&1
    sql -c "DROP ROLE IF EXISTS ks_e2e_pem" >/dev/null 2>&1
    stop_process "$TPID" 2
    stop_process "$BPID" 10
    rm -rf "$SSLDIR"
    [ "$KS_EXIT_STATUS" -eq 0 ] || [ ! -s "$BDIR/broker.log" ] || { echo "# broker log tail:"; tail -n 20 "$BDIR/broker.log" | sed 's/^/#   /'; }
}
at_exit cleanup

rnd() { head -c 9 /dev/urandom | od -An -tx1 | tr -d ' \n'; }
contains() { local n; n="$(grep -c -- "$1" || true)"; [ "${n:-0}" -gt 0 ] && echo t || echo f; }

PW_ADMIN="ksAdm$(rnd)"; PW_ALICE="ksAlice256$(rnd)"; PW_BOB="ksBob512$(rnd)"
PW_CAROL="ksCarolPlain$(rnd)"; PW_WRONG="ksWrong$(rnd)"; PW_KS="ksStore$(rnd)"
PW_OIDC="ksOidc$(rnd)"
SECRETS=("$PW_ADMIN" "$PW_ALICE" "$PW_BOB" "$PW_CAROL" "$PW_WRONG" "$PW_KS" "$PW_OIDC")

# =============================================================================
# the CA and the broker's keystore
# =============================================================================
SSL_OK=1
mkdir -p "$BDIR" "$SSLDIR"
chmod 755 "$SSLDIR"
(
    cd "$SSLDIR"
    openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=kafka_sink test CA $SFX" \
        -keyout ca.key -out ca.pem
    openssl req -newkey rsa:2048 -nodes -subj "/CN=127.0.0.1" -keyout broker.key -out broker.csr
    printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\n' > ext.cnf
    openssl x509 -req -in broker.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 \
        -extfile ext.cnf -out broker.pem
    openssl pkcs12 -export -in broker.pem -inkey broker.key -certfile ca.pem -name broker \
        -passout "pass:$PW_KS" -out "$BDIR/broker.p12"
    # the client certificate for mTLS (files PostgreSQL reads: 644, test only)
    openssl req -newkey rsa:2048 -nodes -subj "/CN=kafka_sink client $SFX" -keyout client.key -out client.csr
    printf 'basicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=clientAuth\n' > cext.cnf
    openssl x509 -req -in client.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 \
        -extfile cext.cnf -out client.pem
    rm -f ca.key broker.key broker.csr client.csr ca.srl
    chmod 644 ca.pem client.pem client.key
) > "$BDIR/ssl.log" 2>&1 || SSL_OK=0
[ "$SSL_OK" = 1 ] || { echo "# could not make the certificates:"; sed 's/^/#   /' "$BDIR/ssl.log"; }
CA="$SSLDIR/ca.pem"
# a line from the middle of the client key: must never show in a log or view
[ "$SSL_OK" != 1 ] || SECRETS+=("$(sed -n 5p "$SSLDIR/client.key")")

# =============================================================================
# our own broker
# =============================================================================
P_SASL="$(free_port)"; P_SSL="$(free_port "$P_SASL")"
P_SSSL="$(free_port "$P_SASL" "$P_SSL")"; P_MTLS="$(free_port "$P_SASL" "$P_SSL" "$P_SSSL")"
P_CTL="$(free_port "$P_SASL" "$P_SSL" "$P_SSSL" "$P_MTLS")"
P_TOK="$(free_port "$P_SASL" "$P_SSL" "$P_SSSL" "$P_MTLS" "$P_CTL")"
BS_SASL="127.0.0.1:$P_SASL"; BS_SSL="127.0.0.1:$P_SSL"; BS_SSSL="127.0.0.1:$P_SSSL"; BS_MTLS="127.0.0.1:$P_MTLS"
PLAIN_JAAS="org.apache.kafka.common.security.plain.PlainLoginModule required username=\"admin\" password=\"$PW_ADMIN\" user_admin=\"$PW_ADMIN\" user_carol=\"$PW_CAROL\";"
SCRAM_JAAS="org.apache.kafka.common.security.scram.ScramLoginModule required;"
# OAUTHBEARER: no server callback handler configured = Kafka's unsecured JWT
# validator (alg "none", principal from "sub", "exp" required)
OAUTH_JAAS="org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required unsecuredLoginStringClaim_sub=\"admin\";"
if [ "$SSL_OK" = 1 ]; then
    LISTENERS="SASL_PLAINTEXT://127.0.0.1:$P_SASL,SSL://127.0.0.1:$P_SSL,SASL_SSL://127.0.0.1:$P_SSSL,MTLS://127.0.0.1:$P_MTLS"
else
    LISTENERS="SASL_PLAINTEXT://127.0.0.1:$P_SASL"
fi
cat > "$BDIR/server.properties" <<EOF
# written by test/e2e/broker_security.sh; single-node KRaft broker+controller
process.roles=broker,controller
node.id=1
controller.quorum.bootstrap.servers=127.0.0.1:$P_CTL
listeners=$LISTENERS,CONTROLLER://127.0.0.1:$P_CTL
advertised.listeners=$LISTENERS
controller.listener.names=CONTROLLER
inter.broker.listener.name=SASL_PLAINTEXT
listener.security.protocol.map=CONTROLLER:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,SSL:SSL,SASL_SSL:SASL_SSL,MTLS:SSL
sasl.enabled.mechanisms=SCRAM-SHA-256,SCRAM-SHA-512,PLAIN,OAUTHBEARER
sasl.mechanism.inter.broker.protocol=PLAIN
listener.name.sasl_plaintext.plain.sasl.jaas.config=$PLAIN_JAAS
listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config=$SCRAM_JAAS
listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config=$SCRAM_JAAS
listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config=$OAUTH_JAAS
listener.name.sasl_ssl.plain.sasl.jaas.config=$PLAIN_JAAS
listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config=$SCRAM_JAAS
listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=$SCRAM_JAAS
listener.name.sasl_ssl.oauthbearer.sasl.jaas.config=$OAUTH_JAAS
ssl.keystore.type=PKCS12
ssl.keystore.location=$BDIR/broker.p12
ssl.keystore.password=$PW_KS
ssl.key.password=$PW_KS
ssl.client.auth=none
listener.name.mtls.ssl.client.auth=required
listener.name.mtls.ssl.truststore.type=PEM
listener.name.mtls.ssl.truststore.location=$SSLDIR/ca.pem
num.partitions=2
offsets.topic.num.partitions=2
$(own_broker_files "$BDIR")
EOF
[ "$SSL_OK" = 1 ] || sed -i '/^ssl\./d; /^listener\.name\.mtls\./d; s/,MTLS:SSL//' "$BDIR/server.properties"
own_broker_start "$BDIR" \
    --add-scram "SCRAM-SHA-256=[name=alice,password=$PW_ALICE]" \
    --add-scram "SCRAM-SHA-512=[name=bob,password=$PW_BOB]" || exit 1
BPID="$OWN_BROKER_PID"

# =============================================================================
# an OIDC token endpoint on loopback: client-credentials grant, HTTP Basic
# client id/secret; issues unsigned JWTs (alg "none") that Kafka's unsecured
# validator accepts.  Counts what it served in $BDIR/token.log.
# =============================================================================
cat > "$BDIR/token_server.py" <<'PY'
import base64, http.server, json, os, sys, time
port, log = int(sys.argv[1]), sys.argv[2]
want = "Basic " + base64.b64encode(("kafka_sink:" + os.environ["KS_OIDC_SECRET"]).encode()).decode()

def b64(obj):
    # base64url without padding; the JSON is padded with spaces until the
    # encoding has no '-' or '_' so that any base64 decoder reads it
    raw = json.dumps(obj)
    while True:
        enc = base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")
        if "-" not in enc and "_" not in enc:
            return enc
        raw += " "

class H(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0)).decode()
        ok = self.headers.get("Authorization") == want and "grant_type=client_credentials" in body
        with open(log, "a") as f:
            f.write(("issued" if ok else "refused") + "\n")
        if not ok:
            self.send_response(401)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(b'{"error": "invalid_client"}')
            return
        now = int(time.time())
        tok = b64({"alg": "none"}) + "." + b64({"sub": "kafka_sink_oidc", "iat": now, "exp": now + 3600, "scope": "kafka"}) + "."
        out = json.dumps({"access_token": tok, "token_type": "bearer", "expires_in": 3600}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)
    def log_message(self, *a):
        pass

http.server.HTTPServer(("127.0.0.1", port), H).serve_forever()
PY
: > "$BDIR/token.log"
( KS_OIDC_SECRET="$PW_OIDC" exec python3 "$BDIR/token_server.py" "$P_TOK" "$BDIR/token.log" > "$BDIR/token_server.out" 2>&1 < /dev/null ) &
TPID=$!
TOKEN_URL="http://127.0.0.1:$P_TOK/token"

# kcat with SASL: kc MECH USER PASSWORD kcat-args...
kc() {
    local m="$1" u="$2" p="$3"; shift 3
    kcat -b "$BS_SASL" -X security.protocol=SASL_PLAINTEXT -X sasl.mechanisms="$m" \
         -X sasl.username="$u" -X sasl.password="$p" "$@"
}
up=0
deadline=$((SECONDS + 45))
while [ $SECONDS -lt $deadline ]; do
    kill -0 "$BPID" 2>/dev/null || break
    if kc PLAIN admin "$PW_ADMIN" -L -m 2 2>/dev/null | grep -q '1 brokers:'; then up=1; break; fi
    sleep 0.5
done
check "our SASL broker answers a PLAIN client (kcat -L)" 1 "$up"
[ "$up" = 1 ] || exit 1
echo "# broker up in $((SECONDS - T0)) s (SASL $BS_SASL, SSL $BS_SSL, SASL_SSL $BS_SSSL)"

# one topic, two partitions, 5 messages (auto-created by the produce)
T="bsec_$SFX"
for i in 1 2 3 4 5; do printf '%d|{"id":%d,"v":"v%d"}\n' "$i" "$i" "$i"; done \
    | kc PLAIN admin "$PW_ADMIN" -P -t "$T" -K '|' 2>"$BDIR/kcat.err" \
    || { sed 's/^/#   /' "$BDIR/kcat.err"; }
check "kcat with a wrong PLAIN password is refused by the broker (sanity)" f \
      "$(kc PLAIN carol "$PW_WRONG" -L -m 3 2>/dev/null | contains '1 brokers:')"
# the librdkafka the server loaded, and whether its SCRAM works with Kafka 4.x
RDVER="$(sql -c "SELECT kafka_sink.librdkafka_version()")"
RDFEAT="$(sql -c "SELECT array_to_string(kafka_sink.librdkafka_features(), ',')")"
SCRAM_OK=0
[ "$(printf '%s\n2.6.1\n' "$RDVER" | sort -V | head -1)" = 2.6.1 ] && SCRAM_OK=1
OIDC_OK=0
[[ ",$RDFEAT," == *,oidc,* ]] && OIDC_OK=1
echo "# librdkafka $RDVER loaded ($RDFEAT): SCRAM against Kafka 4.x $([ $SCRAM_OK = 1 ] && echo usable || echo 'NOT usable (< 2.6.1, confluentinc/librdkafka#4895)'), OIDC $([ $OIDC_OK = 1 ] && echo usable || echo 'NOT usable (built without libcurl)')"
[ -z "${KS_RDKAFKA:-}" ] || check "the server loaded the librdkafka it was built against (KS_RDKAFKA=$KS_RDKAFKA)" "$KS_RDKAFKA" "$RDVER"
# the broker's SCRAM users are good: the Java client authenticates with them
jscram() {  # jscram MECH USER PASSWORD: t when the Java AdminClient authenticates
    printf 'security.protocol=SASL_PLAINTEXT\nsasl.mechanism=%s\nsasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="%s" password="%s";\n' "$1" "$2" "$3" > "$BDIR/client.properties"
    timeout 30 java -Xmx128m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Dlog4j2.configurationFile="$BDIR/log4j2.properties" -cp "$KS_KAFKA_CP" \
        kafka.admin.ConfigCommand --bootstrap-server "$BS_SASL" --command-config "$BDIR/client.properties" \
        --describe --entity-type users --entity-name "$2" 2>/dev/null | contains "SCRAM credential configs for user-principal '$2' are.*$1"
}
check "the Java client authenticates with SCRAM-SHA-256 (alice) and SCRAM-SHA-512 (bob)" "t|t" \
      "$(jscram SCRAM-SHA-256 alice "$PW_ALICE")|$(jscram SCRAM-SHA-512 bob "$PW_BOB")"
rm -f "$BDIR/client.properties"

# =============================================================================
# options, targets, pipelines
# =============================================================================
sql >/dev/null <<SQL
CREATE TABLE e2e.bsec_opts_$SFX (n text PRIMARY KEY, bs text NOT NULL, o jsonb NOT NULL);
ALTER TABLE e2e.bsec_opts_$SFX OWNER TO $O;
INSERT INTO e2e.bsec_opts_$SFX VALUES
  ('sha256', '$BS_SASL', '{"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-256", "sasl.username": "alice", "sasl.password": "$PW_ALICE"}'),
  ('sha512', '$BS_SASL', '{"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "bob", "sasl.password": "$PW_BOB"}'),
  ('plain',  '$BS_SASL', '{"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN", "sasl.username": "carol", "sasl.password": "$PW_CAROL"}'),
  ('wrong',  '$BS_SASL', '{"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN", "sasl.username": "carol", "sasl.password": "$PW_WRONG"}'),
  ('ssl',    '$BS_SSL',  '{"security.protocol": "SSL", "ssl.ca.location": "$CA"}'),
  ('saslssl','$BS_SSSL', '{"security.protocol": "SASL_SSL", "ssl.ca.location": "$CA", "sasl.mechanism": "PLAIN", "sasl.username": "carol", "sasl.password": "$PW_CAROL"}'),
  ('oidc',   '$BS_SASL', '{"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "OAUTHBEARER", "sasl.oauthbearer.method": "oidc", "sasl.oauthbearer.client.id": "kafka_sink", "sasl.oauthbearer.client.secret": "$PW_OIDC", "sasl.oauthbearer.token.endpoint.url": "$TOKEN_URL"}'),
  ('oidcwrong', '$BS_SASL', '{"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "OAUTHBEARER", "sasl.oauthbearer.method": "oidc", "sasl.oauthbearer.client.id": "kafka_sink", "sasl.oauthbearer.client.secret": "$PW_WRONG", "sasl.oauthbearer.token.endpoint.url": "$TOKEN_URL"}');
-- mTLS, the key and certificate from files: for owners that may read server
-- files (superusers, pg_read_server_files), as the option allow-list wants
GRANT pg_read_server_files TO $O;
-- mTLS inline (ssl.*.pem): any owner; this one may not read server files
DO \$\$ BEGIN
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'ks_e2e_pem') THEN CREATE ROLE ks_e2e_pem LOGIN; END IF;
END \$\$;
GRANT kafka_sink_admin TO ks_e2e_pem;
GRANT USAGE ON SCHEMA e2e TO ks_e2e_pem;
GRANT SELECT ON e2e.bsec_opts_$SFX TO ks_e2e_pem;
SQL
if [ "$SSL_OK" = 1 ]; then
    sql >/dev/null <<SQL
INSERT INTO e2e.bsec_opts_$SFX VALUES
  ('mtls',   '$BS_MTLS', '{"security.protocol": "SSL", "ssl.ca.location": "$CA", "ssl.certificate.location": "$SSLDIR/client.pem", "ssl.key.location": "$SSLDIR/client.key"}'),
  ('mtlspem','$BS_MTLS', jsonb_build_object('security.protocol', 'SSL', 'ssl.ca.pem', pg_read_file('$CA'),
                           'ssl.certificate.pem', pg_read_file('$SSLDIR/client.pem'), 'ssl.key.pem', pg_read_file('$SSLDIR/client.key'))),
  ('nocert', '$BS_MTLS', '{"security.protocol": "SSL", "ssl.ca.location": "$CA"}');
SQL
fi
# owner_of NAME: the role that owns pipeline NAME
owner_of() { [ "$1" = mtlspem ] && echo ks_e2e_pem || echo "$O"; }
for t in $TABLES; do
    sql -c "CREATE TABLE e2e.bsec_${t}_$SFX (id bigint PRIMARY KEY, v text); ALTER TABLE e2e.bsec_${t}_$SFX OWNER TO $(owner_of "$t")" >/dev/null
done
as_owner() { psql -X -A -t -q -v ON_ERROR_STOP=1 -U "$O" "$@"; }
as_owner_of() { local n="$1"; shift; psql -X -A -t -q -v ON_ERROR_STOP=1 -U "$(owner_of "$n")" "$@"; }
# create NAME: a pipeline bsec_NAME_SFX from the options row NAME, by its owner
create() {
    as_owner_of "$1" -c "SELECT kafka_sink.create_pipeline(name => 'bsec_$1_$SFX',
        bootstrap_servers => (SELECT bs FROM e2e.bsec_opts_$SFX WHERE n = '$1'),
        subscribe => ARRAY['$T'], target => 'e2e.bsec_$1_$SFX', starting_offsets => 'earliest',
        kafka_options => (SELECT o FROM e2e.bsec_opts_$SFX WHERE n = '$1'))" >/dev/null
}
# caught NAME [OPTION]: wait()|rows in the target|OPTION (default
# sasl.password) as shown by kafka_sink.pipelines, '-' when not set
caught() {
    echo "$(as_owner_of "$1" -c "SELECT kafka_sink.wait('bsec_$1_$SFX', '30 s')" 2>&1 | head -1)|$(sql -c "SELECT count(*) FROM e2e.bsec_$1_$SFX")|$(as_owner_of "$1" -c "SELECT coalesce(kafka_options->>'${2:-sasl.password}', '-') FROM kafka_sink.pipelines WHERE name = 'bsec_$1_$SFX'")"
}
# refused_re NAME REGEX: status matches REGEX (within 30 s)|nothing applied
refused_re() {
    local q="SELECT coalesce(worker_detail, '') || coalesce(last_error, '') ~* '$2' FROM kafka_sink.status WHERE name = 'bsec_$1_$SFX'"
    poll "$q" 30 || true
    echo "$(sql -c "$q")|$(sql -c "SELECT count(*) FROM e2e.bsec_$1_$SFX")"
}
# status_of NAME: what kafka_sink.status says, for the log
status_of() { sql -c "SELECT concat_ws(' || ', state, worker_detail, last_error) FROM kafka_sink.status WHERE name = 'bsec_$1_$SFX'"; }

# create them all first, so the workers connect in parallel
create sha256; create sha512; create plain
[ "$SSL_OK" = 1 ] && { create ssl; create saslssl; create mtls; create mtlspem; create nocert; }
OIDC_CREATE=""
if [ "$OIDC_OK" = 1 ]; then
    create oidc; create oidcwrong
else
    OIDC_CREATE="$(create oidc 2>&1 || true)"
fi
LOG0="$(stat -c %s "$LOGF")"
create wrong

# refused NAME: the SCRAM pipeline with the right password, on an old librdkafka:
# status names the authentication failure|nothing applied|password masked
refused() {
    poll "SELECT coalesce(worker_detail, '') || coalesce(last_error, '') ~* 'sasl|authenticat' FROM kafka_sink.status WHERE name = 'bsec_$1_$SFX'" 30 || true
    echo "$(sql -c "SELECT coalesce(worker_detail, '') || coalesce(last_error, '') ~* 'sasl|authenticat' FROM kafka_sink.status WHERE name = 'bsec_$1_$SFX'")|$(sql -c "SELECT count(*) FROM e2e.bsec_$1_$SFX")|$(as_owner -c "SELECT kafka_sink.pipelines.kafka_options->>'sasl.password' FROM kafka_sink.pipelines WHERE name = 'bsec_$1_$SFX'")"
}
if [ "$SCRAM_OK" = 1 ]; then
    check "SCRAM-SHA-256 (alice): caught up, 5 rows, password masked" "t|5|********" "$(caught sha256)"
    check "SCRAM-SHA-512 (bob): caught up, 5 rows, password masked" "t|5|********" "$(caught sha512)"
else
    echo "# SKIP SCRAM catch-up: librdkafka $RDVER cannot do SCRAM with Kafka 4.x"
    check "SCRAM-SHA-256 on librdkafka $RDVER: refused visibly in status, nothing applied, masked" "t|0|********" "$(refused sha256)"
    check "SCRAM-SHA-512 on librdkafka $RDVER: refused visibly in status, nothing applied, masked" "t|0|********" "$(refused sha512)"
    echo "# SCRAM-SHA-256 status: $(sql -c "SELECT concat_ws(' || ', state, worker_detail, last_error) FROM kafka_sink.status WHERE name = 'bsec_sha256_$SFX'")"
fi
check "PLAIN (carol): caught up, 5 rows, password masked" "t|5|********" "$(caught plain)"
if [ "$SSL_OK" = 1 ]; then
    check "SSL with ssl.ca.location (the test's CA): caught up, 5 rows" "t|5|-" "$(caught ssl)"
    check "SASL_SSL + PLAIN: caught up, 5 rows, password masked" "t|5|********" "$(caught saslssl)"
else
    check "SSL: certificates could be made" 1 0
fi
# mTLS: the client certificate from files and inline; no certificate is refused
if [ "$SSL_OK" = 1 ]; then
    check "mTLS, certificate and key from files (owner with pg_read_server_files): caught up, 5 rows" "t|5|-" "$(caught mtls)"
    check "mTLS, inline ssl.certificate.pem/ssl.key.pem (owner without it): caught up, 5 rows, key masked" "t|5|********" "$(caught mtlspem ssl.key.pem)"
    check "mTLS without a client certificate: refused visibly in status, nothing applied" "t|0" "$(refused_re nocert 'certificate|handshake')"
    echo "# no client certificate, status: $(status_of nocert)"
    check "the broker logged the failed client authentication (sanity: mTLS is enforced)" t \
          "$(contains 'SSL handshake failed\|Failed authentication' < "$BDIR/broker.log")"
fi
# OAUTHBEARER through an OIDC token endpoint
if [ "$OIDC_OK" = 1 ]; then
    check "OAUTHBEARER/OIDC: caught up, 5 rows, client secret masked" "t|5|********" "$(caught oidc sasl.oauthbearer.client.secret)"
    check "the token endpoint issued tokens" t "$( [ "$(grep -c '^issued' "$BDIR/token.log")" -gt 0 ] && echo t || echo f)"
    check "OAUTHBEARER/OIDC with a wrong client secret: refused visibly in status, nothing applied" "t|0" \
          "$(refused_re oidcwrong 'oidc|oauth|token|401|authenticat')"
    echo "# wrong client secret, status: $(status_of oidcwrong)"
    check "the token endpoint refused the wrong client secret" t "$( [ "$(grep -c '^refused' "$BDIR/token.log")" -gt 0 ] && echo t || echo f)"
else
    echo "# OIDC on librdkafka $RDVER (no libcurl): create_pipeline said: $(head -3 <<<"$OIDC_CREATE" | tr '\n' ' ')"
    check "OAUTHBEARER/OIDC on librdkafka $RDVER without libcurl: create_pipeline refuses sasl.oauthbearer.method" t \
          "$(contains 'sasl.oauthbearer.method' <<<"$OIDC_CREATE")"
    check "... and the client secret is not echoed" f "$(contains "$PW_OIDC" <<<"$OIDC_CREATE")"
fi

# more messages reach every pipeline (the workers keep their sessions)
for i in 6 7; do printf '%d|{"id":%d,"v":"v%d"}\n' "$i" "$i" "$i"; done \
    | kc PLAIN admin "$PW_ADMIN" -P -t "$T" -K '|'
if [ "$SCRAM_OK" = 1 ]; then
    check "two more messages reach SCRAM-256, SCRAM-512 and PLAIN" "t|7|********,t|7|********,t|7|********" \
          "$(caught sha256),$(caught sha512),$(caught plain)"
else
    check "two more messages reach PLAIN" "t|7|********" "$(caught plain)"
fi
[ "$SSL_OK" != 1 ] || check "two more messages reach SSL, SASL_SSL and both mTLS" "t|7|-,t|7|********,t|7|-,t|7|********" \
      "$(caught ssl),$(caught saslssl),$(caught mtls),$(caught mtlspem ssl.key.pem)"
[ "$OIDC_OK" != 1 ] || check "two more messages reach OAUTHBEARER/OIDC" "t|7|********" "$(caught oidc sasl.oauthbearer.client.secret)"

# =============================================================================
# a wrong password: visible, not a silent stall
# =============================================================================
W="bsec_wrong_$SFX"
wt0=$SECONDS
poll "SELECT coalesce(worker_detail, '') || coalesce(last_error, '') ~* 'sasl|authenticat' FROM kafka_sink.status WHERE name = '$W'" 30 || true
echo "# wrong password: status showed it after $((SECONDS - wt0)) s (created earlier, during the other checks)"
st="$(sql -c "SELECT concat_ws(' || ', state, worker_detail, last_error) FROM kafka_sink.status WHERE name = '$W'")"
echo "# status: $st"
check "wrong password: kafka_sink.status names the authentication failure" t \
      "$(sql -c "SELECT coalesce(worker_detail, '') || coalesce(last_error, '') ~* 'sasl|authenticat' FROM kafka_sink.status WHERE name = '$W'")"
poll "SELECT count(*) > 0 FROM kafka_sink.errors e JOIN kafka_sink.pipeline_definitions d ON d.id = e.pipeline_id WHERE d.name = '$W'" 30 || true
echo "# errors: $(sql -c "SELECT string_agg(kind || ': ' || message, ' / ' ORDER BY e.id) FROM kafka_sink.errors e JOIN kafka_sink.pipeline_definitions d ON d.id = e.pipeline_id WHERE d.name = '$W'")"
check "wrong password: kafka_sink.errors has a row about it" t \
      "$(sql -c "SELECT count(*) > 0 AND bool_or(message || coalesce(detail, '') ~* 'sasl|authenticat') FROM kafka_sink.errors e JOIN kafka_sink.pipeline_definitions d ON d.id = e.pipeline_id WHERE d.name = '$W'")"
state="$(sql -c "SELECT state FROM kafka_sink.pipelines WHERE name = '$W'")"
echo "# wrong password: pipeline state is '$state' (running = the worker keeps retrying)"
check "wrong password: the pipeline is running (retrying) or failed" t \
      "$( [ "$state" = running ] || [ "$state" = failed ] && echo t || echo f)"
check "wrong password: nothing applied, no checkpoint" "0|0" \
      "$(sql -c "SELECT count(*) FROM e2e.bsec_wrong_$SFX")|$(sql -c "SELECT count(*) FROM kafka_sink.offsets o JOIN kafka_sink.pipeline_definitions d ON d.id = o.pipeline_id WHERE d.name = '$W'")"
wt0=$SECONDS
wout="$(as_owner -v VERBOSITY=verbose -c "SELECT kafka_sink.wait('$W', '10 s')" 2>&1 || true)"
wdur=$((SECONDS - wt0))
echo "# wait('10 s') on the wrong-password pipeline took ${wdur} s and said: $(tr '\n' ' ' <<<"$wout")"
check "wrong password: wait('10 s') returns within 20 s" t "$( [ "$wdur" -le 20 ] && echo t || echo f)"
check "wrong password: wait() does not report success" f "$( [ "$wout" = t ] && echo t || echo f)"
check "wrong password: wait() does not echo the password" f "$(contains "$PW_WRONG" <<<"$wout")"

# fixing the password (alter_pipeline) lets it catch up
sql -c "UPDATE e2e.bsec_opts_$SFX SET o = jsonb_set(o, '{sasl.password}', to_jsonb('$PW_CAROL'::text)) WHERE n = 'wrong'" >/dev/null
as_owner -c "SELECT kafka_sink.alter_pipeline('$W', kafka_options => (SELECT o FROM e2e.bsec_opts_$SFX WHERE n = 'wrong'))" >/dev/null
check "after alter_pipeline with the right password it catches up" "t|7|********" "$(caught wrong)"

# =============================================================================
# no secret anywhere
# =============================================================================
leaks="$(lines_with "$LOGF" "${SECRETS[@]}")"
check "no password (right or wrong) appears in the server log" 0 "$leaks"
check "the server log shows the authentication failure" t \
      "$(n="$(tail -c +$((LOG0 + 1)) "$LOGF" | grep -ci -- 'sasl\|authenticat' || true)"; [ "${n:-0}" -gt 0 ] && echo t || echo f)"
check "no password appears in kafka_sink.errors or kafka_sink.status" 0 \
      "$(sql -c "SELECT count(*) FROM unnest(ARRAY['$(IFS=,; echo "${SECRETS[*]}" | sed "s/,/','/g")']) s(v),
                   (SELECT coalesce(message, '') || coalesce(detail, '') AS t FROM kafka_sink.errors
                    UNION ALL SELECT coalesce(worker_detail, '') || coalesce(last_error, '') FROM kafka_sink.status) x
                  WHERE strpos(x.t, s.v) > 0")"

sql -c "SELECT kafka_sink.drop_pipeline(name) FROM kafka_sink.pipeline_definitions WHERE name LIKE 'bsec\\_%\\_$SFX'" >/dev/null
echo "# took $((SECONDS - T0)) s"
finish
