#!/usr/bin/env bash
# trust_hosts: which hosts a pipeline owner can make the server connect to
# (kafka_sink.allowed_hosts), and DROP ROLE of a pipeline's owner.
#  - the patterns: names, *.suffix, IPs, CIDR ranges, :port, IPv6, the
#    broker list syntax (proto://), malformed hosts refused, not guessed;
#  - every option that carries a host is refused at create/alter when its
#    host is not listed: bootstrap_servers, sasl.oauthbearer.token.endpoint.url,
#    schema_registry url, and produce()'s brokers;
#  - a non-superuser cannot widen the list; a superuser can (per role here,
#    so that the other scripts on this cluster are not affected);
#  - a catalog row changed behind the API to an unlisted host is refused in
#    the worker: the pipeline fails, naming the host, nothing quarantined;
#  - the registry client does not follow a redirect (the redirect target
#    never sees a request; the pipeline reports HTTP 302 and retries);
#  - DROP ROLE of an owner is refused naming its pipeline, and succeeds
#    once the pipeline is dropped.
. "$(dirname "$0")/../lib/common.sh"
setup_owner
O="ks_hosts_$SFX"            # the owner under test, with its own allow-list
T="trust_hosts_$SFX"
as_o() { psql -X -A -t -q -v ON_ERROR_STOP=1 -U "$O" "$@"; }
# err SQL: the SQLSTATE and message of the error the owner gets, or "ok"
first_error() {
    local out
    out="$(sed -n 's/^ERROR:  \([0-9A-Z]*\): \(.*\)$/\1 \2/p' | head -1)"
    echo "${out:-ok}"
}
err() { psql -X -A -t -q -U "$O" -v ON_ERROR_STOP=1 -v VERBOSITY=verbose -c "$1" 2>&1 >/dev/null | first_error; }
# su_err SQL: the same for a superuser
su_err() { psql -X -A -t -q -v ON_ERROR_STOP=1 -v VERBOSITY=verbose -c "$1" 2>&1 >/dev/null | first_error; }

sql >/dev/null <<SQL
CREATE ROLE $O LOGIN;
GRANT kafka_sink_admin TO $O;
CREATE SCHEMA th_$SFX AUTHORIZATION $O;
SET ROLE $O;
CREATE TABLE th_$SFX.t (id bigint PRIMARY KEY, v text);
CREATE TABLE th_$SFX.av (id bigint PRIMARY KEY, v text);
SQL
cleanup_owner() {
    sql -c "SELECT kafka_sink.drop_pipeline(name) FROM kafka_sink.pipeline_definitions WHERE owner::text = '$O'" >/dev/null 2>&1
    sql -c "DROP SCHEMA IF EXISTS th_$SFX CASCADE" -c "DROP ROLE IF EXISTS $O" >/dev/null 2>&1
}
at_exit cleanup_owner

BPORT="${KS_BOOTSTRAP##*:}"
printf '1|{"id":1,"v":"a"}\n2|{"id":2,"v":"b"}\n' | produce "$T"

# ---- the patterns (a superuser's session setting; _check_bootstrap_servers) ----
pat() {  # pat LIST SERVERS: ok, or the SQLSTATE
    su_err "SET kafka_sink.allowed_hosts = '$1'; SELECT kafka_sink._check_bootstrap_servers('$2')" | cut -d' ' -f1
}
check "an exact name allows itself, any port" ok "$(pat 'kafka.example.com' 'kafka.example.com:9093')"
check "names compare case-insensitively, a trailing dot ignored" ok "$(pat 'kafka.example.com' 'KAFKA.Example.com.:9093')"
check "an exact name allows no other name" 42501 "$(pat 'kafka.example.com' 'kafka2.example.com')"
check "*.suffix allows names under it" ok "$(pat '*.example.com' 'a.b.example.com,SASL_SSL://c.example.com:9093')"
check "*.suffix does not allow the suffix itself" 42501 "$(pat '*.example.com' 'example.com')"
check "*.suffix does not allow a name merely ending like it" 42501 "$(pat '*.example.com' 'evilexample.com')"
check "one unlisted broker of several refuses the list" 42501 "$(pat '*.example.com' 'a.example.com:9092,169.254.169.254:9092')"
check "a CIDR range allows its addresses" ok "$(pat '10.0.0.0/8' '10.1.2.3:9092')"
check "a CIDR range allows no address outside it" 42501 "$(pat '10.0.0.0/8' '11.1.2.3:9092')"
check "a CIDR range allows no name (names are not resolved)" 42501 "$(pat '10.0.0.0/8' 'localhost:9092')"
check ":port allows that port only (9092 is the brokers' default)" "ok|ok|42501" \
      "$(pat '10.0.0.1:9092' '10.0.0.1:9092')|$(pat '10.0.0.1:9092' '10.0.0.1')|$(pat '10.0.0.1:9092' '10.0.0.1:9093')"
check "IPv6 literals and ranges, in brackets with a port" "ok|ok|42501" \
      "$(pat '[fd00::/8]:9092' '[fd00::1]:9092')|$(pat '::1' '[::1]:9092')|$(pat '[fd00::/8]:9092' '[fe80::1]:9092')"
check "an empty list allows nothing" 42501 "$(pat '' 'localhost:9092')"
check "malformed hosts are refused, not guessed" "22023|22023|22023" \
      "$(pat '*' 'a b@evil:9092')|$(pat '*' 'host:99999')|$(pat '*' '[169.254.169.254]:80')"
check "a malformed pattern is refused by SET" 22023 \
      "$(su_err "SET kafka_sink.allowed_hosts = 'ok.example.com, bad host!'" | cut -d' ' -f1)"

# ---- a non-superuser cannot widen it; a superuser can, here for one role ----
check "the owner cannot SET kafka_sink.allowed_hosts" 42501 \
      "$(err "SET kafka_sink.allowed_hosts = '*'" | cut -d' ' -f1)"
check "the owner cannot ALTER ROLE itself SET kafka_sink.allowed_hosts" 42501 \
      "$(err "ALTER ROLE $O SET kafka_sink.allowed_hosts = '*'" | cut -d' ' -f1)"
sql -c "ALTER ROLE $O SET kafka_sink.allowed_hosts = '127.0.0.0/8, localhost'" >/dev/null
check "the owner's sessions see the superuser's setting" "127.0.0.0/8, localhost" \
      "$(as_o -c "SHOW kafka_sink.allowed_hosts")"

# ---- refused at create / alter, for every option that carries a host ----
create() {  # create NAME SERVERS [EXTRA ARGS]
    as_o -c "SELECT kafka_sink.create_pipeline(name => '$1_$SFX', bootstrap_servers => '$2',
        subscribe => ARRAY['$T'], target => 'th_$SFX.t', starting_offsets => 'earliest', start => false ${3:-})"
}
META="169.254.169.254"
check "bootstrap_servers on an unlisted host: refused at create, host named" \
      "42501 bootstrap_servers names host \"$META:9092\", which kafka_sink.allowed_hosts does not allow" \
      "$(err "SELECT kafka_sink.create_pipeline(name => 'm_$SFX', bootstrap_servers => '$META:9092', subscribe => ARRAY['$T'], target => 'th_$SFX.t', start => false)")"
check "sasl.oauthbearer.token.endpoint.url on an unlisted host: refused at create" \
      "42501 Kafka option \"sasl.oauthbearer.token.endpoint.url\" names host \"$META:80\", which kafka_sink.allowed_hosts does not allow" \
      "$(err "SELECT kafka_sink.create_pipeline(name => 'o_$SFX', bootstrap_servers => '127.0.0.1:$BPORT', subscribe => ARRAY['$T'], target => 'th_$SFX.t', start => false, kafka_options => '{\"sasl.oauthbearer.token.endpoint.url\": \"http://$META/latest/meta-data/iam\"}')")"
check "a token endpoint URL with a backslash or user information is refused as invalid" "22023|22023" \
      "$(err "SELECT kafka_sink.create_pipeline(name => 'o_$SFX', bootstrap_servers => '127.0.0.1:$BPORT', subscribe => ARRAY['$T'], target => 'th_$SFX.t', start => false, kafka_options => '{\"sasl.oauthbearer.token.endpoint.url\": \"http://127.0.0.1\\\\@$META/\"}')" | cut -d' ' -f1)|$(err "SELECT kafka_sink.create_pipeline(name => 'o_$SFX', bootstrap_servers => '127.0.0.1:$BPORT', subscribe => ARRAY['$T'], target => 'th_$SFX.t', start => false, kafka_options => '{\"sasl.oauthbearer.token.endpoint.url\": \"http://u:p@$META/\"}')" | cut -d' ' -f1)"
check "schema_registry url on an unlisted host: refused at create" \
      "42501 schema registry option \"url\" names host \"$META:8081\", which kafka_sink.allowed_hosts does not allow" \
      "$(err "SELECT kafka_sink.create_pipeline(name => 'r_$SFX', bootstrap_servers => '127.0.0.1:$BPORT', subscribe => ARRAY['$T'], target => 'th_$SFX.av', start => false, value_format => 'avro', schema_registry => '{\"url\": \"http://127.0.0.1:8081,http://$META:8081\"}')")"
check "produce() to an unlisted broker: refused before connecting" \
      "42501 bootstrap_servers names host \"$META:9092\", which kafka_sink.allowed_hosts does not allow" \
      "$(err "SELECT * FROM kafka_sink.produce('$META:9092', '$T', 'k', 'v')")"
# (the token endpoint is not accepted on its listed host here: a librdkafka
# built without OIDC, as Debian's 2.0.2, refuses the option itself)
check "listed hosts are accepted (loopback broker and registry)" "ok" \
      "$(err "SELECT kafka_sink.create_pipeline(name => 'good_$SFX', bootstrap_servers => 'localhost:$BPORT', subscribe => ARRAY['$T'], target => 'th_$SFX.t', starting_offsets => 'earliest', start => false)")"
check "alter_pipeline to an unlisted broker: refused" 42501 \
      "$(err "SELECT kafka_sink.alter_pipeline('good_$SFX', bootstrap_servers => '$META:9092')" | cut -d' ' -f1)"
check "alter_pipeline to an unlisted token endpoint: refused" 42501 \
      "$(err "SELECT kafka_sink.alter_pipeline('good_$SFX', kafka_options => '{\"sasl.oauthbearer.token.endpoint.url\": \"http://$META/\"}')" | cut -d' ' -f1)"

# ---- a superuser widens it: the same create succeeds ----
sql -c "ALTER ROLE $O SET kafka_sink.allowed_hosts = '127.0.0.0/8, localhost, $META'" >/dev/null
check "widened by a superuser, the refused create succeeds" ok \
      "$(err "SELECT kafka_sink.create_pipeline(name => 'm_$SFX', bootstrap_servers => '$META:9092', subscribe => ARRAY['$T'], target => 'th_$SFX.t', start => false)")"
as_o -c "SELECT kafka_sink.drop_pipeline('m_$SFX')" >/dev/null
sql -c "ALTER ROLE $O SET kafka_sink.allowed_hosts = '127.0.0.0/8, localhost'" >/dev/null

# ---- refused where it is used: catalog rows written behind the API ----
create use_broker "127.0.0.1:$BPORT" >/dev/null
create use_oauth "127.0.0.1:$BPORT" >/dev/null
sql >/dev/null <<SQL
UPDATE kafka_sink.pipeline_definitions SET bootstrap_servers = '$META:9092' WHERE name = 'use_broker_$SFX';
UPDATE kafka_sink.pipeline_definitions
   SET kafka_options = '{"sasl.oauthbearer.token.endpoint.url": "http://$META/latest/meta-data/"}'
 WHERE name = 'use_oauth_$SFX';
SQL
failed() {  # failed NAME TEXT: state|TEXT in status.last_error|TEXT in kafka_sink.errors
    poll "SELECT state = 'failed' FROM kafka_sink.status WHERE name = '$1_$SFX'" 60 || true
    sql -c "SELECT concat_ws('|', s.state, strpos(coalesce(s.last_error, ''), \$t\$$2\$t\$) > 0,
                EXISTS (SELECT 1 FROM kafka_sink.errors e JOIN kafka_sink.pipeline_definitions d ON d.id = e.pipeline_id
                        WHERE d.name = '$1_$SFX' AND strpos(e.message, \$t\$$2\$t\$) > 0))
            FROM kafka_sink.status s WHERE s.name = '$1_$SFX'"
}
as_o -c "SELECT kafka_sink.start('use_broker_$SFX')" >/dev/null
as_o -c "SELECT kafka_sink.start('use_oauth_$SFX')" >/dev/null
check "an unlisted broker written into the catalog: the worker refuses it, the pipeline fails naming it" "failed|t|t" \
      "$(failed use_broker "bootstrap_servers names host \"$META:9092\"")"
check "an unlisted token endpoint written into the catalog: refused in the worker" "failed|t|t" \
      "$(failed use_oauth "Kafka option \"sasl.oauthbearer.token.endpoint.url\" names host \"$META:80\"")"
check "nothing of theirs reached the target" 0 "$(sql -c "SELECT count(*) FROM th_$SFX.t")"

# ---- the registry: refused at use, and no redirect followed ----
RDIR="$KS_RUN/trust_hosts_$SFX"
mkdir -p "$RDIR"
python3 - "$RDIR" > "$RDIR/log" 2>&1 <<'PY' &
import http.server, sys, threading, os
d = sys.argv[1]
class Target(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        with open(os.path.join(d, "target_hits"), "a") as f:
            f.write(self.path + "\n")
        self.send_response(200); self.send_header("Content-Type", "application/json"); self.end_headers()
        self.wfile.write(b'{"schema": "\\"string\\""}')
    def log_message(self, *a): pass
target = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Target)
class Redirect(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        with open(os.path.join(d, "redirect_hits"), "a") as f:
            f.write(self.path + "\n")
        self.send_response(302)
        self.send_header("Location", "http://169.254.169.254:%d%s" % (target.server_port, self.path))
        self.send_header("Content-Length", "0"); self.end_headers()
    def log_message(self, *a): pass
redirect = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Redirect)
threading.Thread(target=target.serve_forever, daemon=True).start()
with open(os.path.join(d, "ports.tmp"), "w") as f:
    f.write("%d %d\n" % (redirect.server_port, target.server_port))
os.rename(os.path.join(d, "ports.tmp"), os.path.join(d, "ports"))
redirect.serve_forever()
PY
HTTP_PID=$!
stop_http() { stop_process "$HTTP_PID"; wait "$HTTP_PID" 2>/dev/null; }
at_exit stop_http
for _ in $(seq 50); do [ -s "$RDIR/ports" ] && break; sleep 0.1; done
read -r RPORT TPORT < "$RDIR/ports"

TA="trust_hosts_av_$SFX"
# a Confluent frame: magic 0, schema id 7, then an Avro string "x"
python3 -c 'import sys; sys.stdout.buffer.write(b"1|\x00\x00\x00\x00\x07\x02x\n")' | produce "$TA"
as_o -c "SELECT kafka_sink.create_pipeline(name => 'redir_$SFX', bootstrap_servers => '127.0.0.1:$BPORT',
    subscribe => ARRAY['$TA'], target => 'th_$SFX.av', starting_offsets => 'earliest', value_format => 'avro',
    schema_registry => '{\"url\": \"http://127.0.0.1:$RPORT\", \"timeout.ms\": 2000}')" >/dev/null
redirected="SELECT EXISTS (SELECT 1 FROM kafka_sink.errors e JOIN kafka_sink.pipeline_definitions d ON d.id = e.pipeline_id
                  WHERE d.name = 'redir_$SFX' AND e.message LIKE 'schema registry unavailable%' AND e.detail LIKE '%HTTP 302%')"
poll "$redirected" 60 || true
check "a registry answering with a redirect: an outage (HTTP 302), reported and retried" t "$(sql -c "$redirected")"
check "the redirect was asked, its target never" "t|0" \
      "$([ -s "$RDIR/redirect_hits" ] && echo t || echo f)|$(cat "$RDIR/target_hits" 2>/dev/null | wc -l)"
check "nothing quarantined, nothing applied while the registry redirects" "0|0" \
      "$(sql -c "SELECT count(*) FROM kafka_sink.quarantine q JOIN kafka_sink.pipeline_definitions d ON d.id = q.pipeline_id WHERE d.name = 'redir_$SFX'")|$(sql -c "SELECT count(*) FROM th_$SFX.av")"
as_o -c "SELECT kafka_sink.stop('redir_$SFX')" >/dev/null
sql -c "UPDATE kafka_sink.pipeline_definitions SET schema_registry = jsonb_set(schema_registry, '{url}', '\"http://$META:$TPORT\"') WHERE name = 'redir_$SFX'" >/dev/null
: > "$RDIR/redirect_hits"
as_o -c "SELECT kafka_sink.start('redir_$SFX')" >/dev/null
poll "SELECT last_error LIKE '%names host \"$META:$TPORT\"%' FROM kafka_sink.status WHERE name = 'redir_$SFX'" 60 || true
check "an unlisted registry written into the catalog: refused in the worker, named" t \
      "$(sql -c "SELECT last_error LIKE '%schema registry option \"url\" names host \"$META:$TPORT\"%' FROM kafka_sink.status WHERE name = 'redir_$SFX'")"
check "still nothing quarantined or applied" "0|0" \
      "$(sql -c "SELECT count(*) FROM kafka_sink.quarantine q JOIN kafka_sink.pipeline_definitions d ON d.id = q.pipeline_id WHERE d.name = 'redir_$SFX'")|$(sql -c "SELECT count(*) FROM th_$SFX.av")"

# ---- DROP ROLE of a pipeline's owner ----
check "DROP ROLE of an owner is refused, naming its pipelines" \
      "2BP01 role \"$O\" cannot be dropped because it owns kafka_sink pipelines" \
      "$(su_err "DROP ROLE $O")"
check "the detail lists the pipeline" t \
      "$(psql -X -A -t -q -c "DROP ROLE $O" 2>&1 | grep -c "good_$SFX" | sed 's/^[1-9][0-9]*$/t/')"
check "DROP ROLE IF EXISTS of a role that does not exist still works" ok \
      "$(su_err "DROP ROLE IF EXISTS ks_no_such_role_$SFX")"
for p in good use_broker use_oauth redir; do as_o -c "SELECT kafka_sink.drop_pipeline('${p}_$SFX')" >/dev/null; done
sql -c "DROP SCHEMA th_$SFX CASCADE" >/dev/null 2>&1
check "with its pipelines dropped, DROP ROLE succeeds" ok "$(su_err "DROP ROLE $O")"
finish
