#!/usr/bin/env bash
# Kafka options are checked where they are used, not only in the API.
#
# Pipelines are created legally (not started); then a superuser writes
# forbidden options straight into the catalog (kafka_sink.pipeline_definitions
# and kafka_sink.secrets), as any path that writes data could:
#  - plugin.library.paths naming a shared library whose constructor leaves a
#    marker file (librdkafka dlopens it inside rd_kafka_conf_set);
#  - sasl.kerberos.kinit.cmd with GSSAPI: a shell line that would touch a
#    marker (librdkafka runs it when the client is created);
#  - a Kerberos principal pasted by librdkafka's default kinit command;
#  - ssl.engine.location naming the same library (an OpenSSL engine);
#  - isolation.level=read_uncommitted (managed by kafka_sink), group.id
#    naming one of kafka_sink's own groups.
# Each started pipeline must go 'failed', with the option named in
# kafka_sink.status.last_error and kafka_sink.errors; no marker file may
# appear; the server must not crash and a legal pipeline beside them runs.
. "$(dirname "$0")/../lib/common.sh"
setup_owner
LOGF="$KS_LOGS/postgresql.log"
LOG0="$(stat -c %s "$LOGF")"
T="opt_enf_$SFX"
as_owner() { psql -X -A -t -q -v ON_ERROR_STOP=1 -U ks_e2e "$@"; }

# a directory the server can write, and a library that marks its loading
MARK="$(mktemp -d /tmp/ks_optmark.XXXXXX)"
chmod 777 "$MARK"
trap 'rm -rf "$MARK"' EXIT
cat > "$MARK/mark.c" <<EOF
#include <fcntl.h>
#include <unistd.h>
__attribute__((constructor)) static void mark(void)
{
    int fd = open("$MARK/library_loaded", O_WRONLY | O_CREAT, 0666);
    if (fd >= 0) close(fd);
}
EOF
gcc -shared -fPIC -o "$MARK/libmark.so" "$MARK/mark.c"
chmod 755 "$MARK/libmark.so"

printf '1|{"id":1,"v":"a"}\n2|{"id":2,"v":"b"}\n' | produce "$T"
sql >/dev/null <<SQL
CREATE TABLE e2e.opt_enf_$SFX (id bigint PRIMARY KEY, v text);
ALTER TABLE e2e.opt_enf_$SFX OWNER TO ks_e2e;
SQL
create() {  # create NAME: a legal, stopped pipeline
    as_owner -c "SELECT kafka_sink.create_pipeline(name => '$1_$SFX', bootstrap_servers => '$KS_BOOTSTRAP',
        subscribe => ARRAY['$T'], target => 'e2e.opt_enf_$SFX', starting_offsets => 'earliest',
        kafka_options => '{\"client.rack\": \"r1\"}', start => false)" >/dev/null
}
# opts NAME JSON: a superuser overwrites the stored options
opts() { sql -c "UPDATE kafka_sink.pipeline_definitions SET kafka_options = '$2' WHERE name = '$1_$SFX'" >/dev/null; }
# secret NAME OPTION VALUE: a superuser adds a row to kafka_sink.secrets
secret() {
    sql -c "INSERT INTO kafka_sink.secrets (pipeline_id, name, value)
            SELECT id, '$2', '$3' FROM kafka_sink.pipeline_definitions WHERE name = '$1_$SFX'" >/dev/null
}

for p in plugin kinit principal engine isolation group good; do create "$p"; done
opts plugin "{\"plugin.library.paths\": \"$MARK/libmark.so\"}"
opts kinit '{"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "GSSAPI"}'
secret kinit sasl.kerberos.kinit.cmd "touch $MARK/kinit_ran"
opts principal "{\"security.protocol\": \"SASL_PLAINTEXT\", \"sasl.mechanism\": \"GSSAPI\", \"sasl.kerberos.principal\": \"x; touch $MARK/principal_ran #\"}"
opts engine "{\"security.protocol\": \"SSL\", \"ssl.engine.location\": \"$MARK/libmark.so\"}"
opts isolation '{"isolation.level": "read_uncommitted"}'
secret group group.id "kafka_sink.good_$SFX"

for p in plugin kinit principal engine isolation group good; do
    as_owner -c "SELECT kafka_sink.start('${p}_$SFX')" >/dev/null
done

# failed NAME TEXT: state|TEXT in status.last_error|TEXT in kafka_sink.errors
failed() {
    poll "SELECT state = 'failed' FROM kafka_sink.status WHERE name = '$1_$SFX'" 60 || true
    sql -c "SELECT concat_ws('|', s.state, strpos(coalesce(s.last_error, ''), \$t\$$2\$t\$) > 0,
                EXISTS (SELECT 1 FROM kafka_sink.errors e JOIN kafka_sink.pipeline_definitions d ON d.id = e.pipeline_id
                        WHERE d.name = '$1_$SFX' AND strpos(e.message, \$t\$$2\$t\$) > 0))
            FROM kafka_sink.status s WHERE s.name = '$1_$SFX'"
}
check "plugin.library.paths written into the catalog: failed, named" "failed|t|t" \
      "$(failed plugin 'Kafka option "plugin.library.paths" is not supported')"
check "sasl.kerberos.kinit.cmd in kafka_sink.secrets: failed, named" "failed|t|t" \
      "$(failed kinit 'Kafka option "sasl.kerberos.kinit.cmd" is not supported')"
check "GSSAPI with a shell line in the principal: failed, GSSAPI needs a superuser owner" "failed|t|t" \
      "$(failed principal 'Kafka option "sasl.mechanism" = GSSAPI needs a superuser pipeline owner')"
check "ssl.engine.location written into the catalog: failed, named" "failed|t|t" \
      "$(failed engine 'Kafka option "ssl.engine.location" is not supported')"
check "isolation.level=read_uncommitted written into the catalog: failed, named" "failed|t|t" \
      "$(failed isolation 'Kafka option "isolation.level" is managed by kafka_sink')"
check "group.id of kafka_sink's own in kafka_sink.secrets: failed, named" "failed|t|t" \
      "$(failed group 'Kafka option "group.id" cannot name a group starting with "kafka_sink."')"

check "the legal pipeline beside them catches up" "t|2" \
      "$(as_owner -c "SELECT kafka_sink.wait('good_$SFX', '60 s')")|$(sql -c "SELECT count(*) FROM e2e.opt_enf_$SFX")"
# the kinit timer would have fired at once; give it a moment anyway
sleep 2
check "no library was loaded, no command ran (no marker file)" "" \
      "$(cd "$MARK" && ls | grep -v -e '^libmark.so$' -e '^mark.c$' || true)"
check "the server did not crash" "0|1" \
      "$(tail -c +$((LOG0 + 1)) "$LOGF" | grep -c 'terminated by signal' || true)|$(sql -c 'SELECT 1')"
# a refused option is still refused after a restart of the worker: no retry loop loads it
as_owner -c "SELECT kafka_sink.start('plugin_$SFX')" >/dev/null 2>&1 || true
poll "SELECT state = 'failed' FROM kafka_sink.status WHERE name = 'plugin_$SFX'" 60 || true
check "restarted, the plugin pipeline fails again (a second error) and loads nothing" "failed|t|" \
      "$(sql -c "SELECT state FROM kafka_sink.status WHERE name = 'plugin_$SFX'")|$(sql -c "SELECT count(*) >= 2 FROM kafka_sink.errors e JOIN kafka_sink.pipeline_definitions d ON d.id = e.pipeline_id WHERE d.name = 'plugin_$SFX'")|$(cd "$MARK" && ls | grep -v -e '^libmark.so$' -e '^mark.c$' || true)"

# "debug" is an owner's option, but librdkafka's debug output must not fill
# the server log: it is logged at DEBUG1 (not shown at the default level)
LOG1="$(wc -c < "$LOGF")"
as_owner -c "SELECT kafka_sink.create_pipeline(name => 'debuglog_$SFX', bootstrap_servers => '$KS_BOOTSTRAP',
    subscribe => ARRAY['$T'], target => 'e2e.opt_enf_$SFX', starting_offsets => 'earliest',
    kafka_options => '{\"debug\": \"all\"}')" >/dev/null
check "a pipeline with debug = all catches up" t "$(as_owner -c "SELECT kafka_sink.wait('debuglog_$SFX', '60 s')")"
check "its librdkafka debug output is not in the server log at the default level" 0 \
      "$(tail -c +$((LOG1 + 1)) "$LOGF" | grep -cE 'librdkafka: (BRKMAIN|CONNECT|FETCH|SEND|RECV|PROTOCOL|METADATA|CGRP|OFFSET|TOPPAR|MEMBER|INIT|CONF)' || true)"

for p in plugin kinit principal engine isolation group good debuglog; do
    as_owner -c "SELECT kafka_sink.drop_pipeline('${p}_$SFX')" >/dev/null || true
done
finish
