#!/usr/bin/env bash
# status_recovery: status says what is true now.
#  - the broker stops: worker_detail shows the metadata error while it is
#    down; it starts again and no message arrives (no batch commits):
#    worker_detail and last_error are empty once the broker answers, the
#    broker error stays in kafka_sink.errors;
#  - the consumer's group (needed by librdkafka's assign(), never joined)
#    leaves no GroupCoordinator error in worker_detail, kafka_sink.errors or
#    the log's librdkafka errors.
. "$(dirname "$0")/../lib/common.sh"
setup_owner
T="e2e_strec_$SFX"
P="strec_$SFX"
"$HARNESS" topic-create "$T" 2 >/dev/null 2>&1
sql -c "ALTER SYSTEM SET kafka_sink.metadata_refresh_interval = '1s'" -c "SELECT pg_reload_conf()" >/dev/null
restore() {
    "$HARNESS" kafka-start >/dev/null 2>&1 || true
    sql -c "ALTER SYSTEM RESET kafka_sink.metadata_refresh_interval" -c "SELECT pg_reload_conf()" >/dev/null 2>&1 || true
}
trap restore EXIT

sql >/dev/null <<SQL
SET ROLE ks_e2e;
CREATE TABLE e2e.strec_$SFX (k bigint PRIMARY KEY, v text);
SELECT kafka_sink.create_pipeline(name => '$P', bootstrap_servers => '$KS_BOOTSTRAP',
       subscribe => ARRAY['$T'], target => 'e2e.strec_$SFX', starting_offsets => 'earliest');
SQL
printf '%s\n' '1|{"k":1,"v":"a"}' | produce "$T"
check "caught up before the outage" t "$(sql -c "SELECT kafka_sink.wait('$P', '60 s')")"
detail() { sql -c "SELECT coalesce(worker_detail, '') FROM kafka_sink.status WHERE name = '$P'"; }

PGLOG_FILE="$KS_RUN/logs/postgresql.log"
log_off=$(( $(stat -c %s "$PGLOG_FILE") + 1 ))
"$HARNESS" kafka-stop >/dev/null 2>&1
# sampled while down: the metadata error shows; the coordinator never does
r=f; gc=0; down_at=$SECONDS
for _ in $(seq 1 150); do
    d="$(detail)"
    case "$d" in *GroupCoordinator*) gc=$((gc + 1)) ;; esac
    case "$d" in *"could not fetch topic metadata"*) r=t ;; esac
    [ "$r" = t ] && [ "$SECONDS" -ge "$((down_at + 8))" ] && break
    sleep 0.2
done
check "while the broker is down, worker_detail shows the metadata error" t "$r"
check "... and never the unused group's coordinator" 0 "$gc"
check "the coordinator's failures are no error of the pipeline in the log (debug output only)" 0 \
      "$(tail -c +"$log_off" "$PGLOG_FILE" | grep -c 'LOG:  librdkafka: ERROR: GroupCoordinator' || true)"
"$HARNESS" kafka-start >/dev/null 2>&1
# no message: no batch commits to clear the status
if poll "SELECT coalesce(worker_detail, '') = '' FROM kafka_sink.status WHERE name = '$P'" 60
then r=t; else r="f ($(detail))"; fi
check "once the broker answers, worker_detail is empty with no message arriving" t "$r"
sleep 3
check "and stays empty" "" "$(detail)"
check "status.last_error shows no broker error once healthy (kafka_sink.errors keeps it)" "|t" \
      "$(sql -c "SELECT coalesce(last_error, '') FROM kafka_sink.status WHERE name = '$P'")|$(sql -c "SELECT count(*) > 0 FROM kafka_sink.errors e JOIN kafka_sink.pipeline_definitions p ON p.id = e.pipeline_id WHERE p.name = '$P' AND e.kind = 'broker'")"
check "no batch committed since the outage (the status cleared without one)" 1 \
      "$(sql -c "SELECT count(*) FROM kafka_sink.batches b JOIN kafka_sink.pipeline_definitions p ON p.id = b.pipeline_id
                  WHERE p.name = '$P' AND b.messages > 0")"
check "the unused group's coordinator left no error" 0 \
      "$(sql -c "SELECT count(*) FROM kafka_sink.errors e JOIN kafka_sink.pipeline_definitions p ON p.id = e.pipeline_id
                  WHERE p.name = '$P' AND (e.message LIKE '%GroupCoordinator%' OR e.detail LIKE '%GroupCoordinator%')")"
check "the pipeline applies what comes after" t \
      "$(printf '%s\n' '2|{"k":2,"v":"b"}' | produce "$T"; sql -c "SELECT kafka_sink.wait('$P', '60 s')")"
check "both rows" 2 "$(sql -c "SELECT count(*) FROM e2e.strec_$SFX")"

sql -c "SET ROLE ks_e2e" -c "SELECT kafka_sink.drop_pipeline('$P')" >/dev/null
finish
