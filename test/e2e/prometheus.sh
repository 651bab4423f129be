#!/usr/bin/env bash
# prometheus: the real prometheus-postgres-exporter (Debian's 0.11) with
# contrib/prometheus/kafka_sink_queries.yaml, connected as a role that is only
# in pg_monitor, scraped over HTTP; every number is checked against the views.
#  - the monitoring role sees every pipeline (two owners) through the
#    kafka_sink.metrics_*() functions, yet cannot read the views or tables;
#    a kafka_sink_admin member cannot call the functions (RLS stays);
#  - per pipeline: state (one series per state), workers, lag in messages
#    and bytes, rates, last batch duration, commit and error times, and
#    batches_total, a counter that keeps growing;
#  - per partition: committed offset, watermarks, lag; quarantine counts by
#    reason, errors by kind, the outbox backlog;
#  - no secret (a sasl.password in kafka_options) and no error text in the
#    scrape.
. "$(dirname "$0")/../lib/common.sh"
setup_owner

EXPORTER=/usr/bin/prometheus-postgres-exporter
if [ ! -x "$EXPORTER" ]; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q prometheus-postgres-exporter >/dev/null 2>&1 || true
fi
if [ ! -x "$EXPORTER" ]; then
    check "prometheus-postgres-exporter is installed" present missing
    finish; exit
fi
QUERIES="$REPO/contrib/prometheus/kafka_sink_queries.yaml"
MON=ks_prometheus
OWNER_B=ks_prom_owner
PW="prom-secret-$SFX"
WORK="$KS_RUN/prometheus_$SFX"
mkdir -p "$WORK"
EXP_PID=""
cleanup() {
    if [ -n "$EXP_PID" ]; then kill "$EXP_PID" 2>/dev/null || true; wait "$EXP_PID" 2>/dev/null || true; fi
}
trap cleanup EXIT

sql >/dev/null <<SQL
SET client_min_messages = warning;
DO \$\$ BEGIN
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '$MON') THEN CREATE ROLE $MON LOGIN; END IF;
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '$OWNER_B') THEN CREATE ROLE $OWNER_B LOGIN; END IF;
END \$\$;
GRANT pg_monitor TO $MON;
GRANT kafka_sink_admin TO $OWNER_B;
SQL
errcode() { as_role "$1" -v VERBOSITY=sqlstate -c "$2" 2>&1 >/dev/null | grep -o '[0-9][0-9A-Z]\{4\}' | head -1; }

# ---- pipeline A (owner ks_e2e): known messages, two of them invalid ------------------
TA="e2e_prom_a_$SFX"
A="prom_a_$SFX"
"$HARNESS" topic-create "$TA" 2 >/dev/null 2>&1
for i in $(seq 1 10); do echo "$i|{\"id\":$i,\"v\":$i}"; done | produce "$TA" -p 0
{ for i in $(seq 11 16); do echo "$i|{\"id\":$i,\"v\":$i}"; done
  echo '17|not json'; echo '18|{"id":18,"v":-1}'; echo '19|{"id":19,'; } | produce "$TA" -p 1
sql >/dev/null <<SQL
CREATE TABLE e2e.prom_a_$SFX (id bigint PRIMARY KEY, v bigint CHECK (v >= 0));
ALTER TABLE e2e.prom_a_$SFX OWNER TO ks_e2e;
SET ROLE ks_e2e;
SELECT kafka_sink.create_pipeline(name => '$A', bootstrap_servers => '$KS_BOOTSTRAP',
       subscribe => ARRAY['$TA'], target => 'e2e.prom_a_$SFX', starting_offsets => 'earliest');
SQL
check "A caught up" t "$(as_role ks_e2e -c "SELECT kafka_sink.wait('$A', '60 s')")"
check "A: 16 rows applied, 3 quarantined (two reasons)" "16|3|2" \
      "$(sql -c "SELECT (SELECT count(*) FROM e2e.prom_a_$SFX) || '|' || count(*) || '|' || count(DISTINCT reason)
                 FROM kafka_sink.quarantine q JOIN kafka_sink.pipeline_definitions d ON d.id = q.pipeline_id WHERE d.name = '$A'")"

# ---- pipeline B (another owner): a secret option, then a permanent error -----------
TB="e2e_prom_b_$SFX"
B="prom_b_$SFX"
"$HARNESS" topic-create "$TB" 1 >/dev/null 2>&1
printf '1|{"id":1}\n2|{"id":2}\n' | produce "$TB" -p 0
sql >/dev/null <<SQL
CREATE TABLE e2e.prom_b_$SFX (id bigint PRIMARY KEY);
GRANT USAGE ON SCHEMA e2e TO $OWNER_B;
GRANT SELECT, INSERT, UPDATE ON e2e.prom_b_$SFX TO $OWNER_B;
SQL
as_role "$OWNER_B" -c "SELECT kafka_sink.create_pipeline(name => '$B', bootstrap_servers => '$KS_BOOTSTRAP',
       subscribe => ARRAY['$TB'], target => 'e2e.prom_b_$SFX', starting_offsets => 'earliest',
       kafka_options => '{\"security.protocol\": \"plaintext\", \"sasl.password\": \"$PW\"}')" >/dev/null
check "B caught up" t "$(as_role "$OWNER_B" -c "SELECT kafka_sink.wait('$B', '60 s')")"
sql -c "REVOKE INSERT ON e2e.prom_b_$SFX FROM $OWNER_B" >/dev/null
printf '3|{"id":3}\n' | produce "$TB" -p 0
poll "SELECT state = 'failed' FROM kafka_sink.pipeline_definitions WHERE name = '$B'" 60 || true
check "B failed with a permanent error" "failed|1" \
      "$(sql -c "SELECT state || '|' || (SELECT count(*) FROM kafka_sink.errors e WHERE e.pipeline_id = d.id AND kind = 'permanent')
                 FROM kafka_sink.pipeline_definitions d WHERE name = '$B'")"

# ---- A paused with lag ------------------------------------------------------------------
as_role ks_e2e -c "SELECT kafka_sink.pause('$A')" >/dev/null
poll "SELECT worker_detail = 'paused' FROM kafka_sink.status WHERE name = '$A'" 30 || true
for i in $(seq 20 24); do echo "$i|{\"id\":$i,\"v\":$i}"; done | produce "$TA" -p 0
for i in $(seq 25 27); do echo "$i|{\"id\":$i,\"v\":$i}"; done | produce "$TA" -p 1
poll "SELECT sum(lag_messages) = 8 FROM kafka_sink.progress WHERE pipeline = '$A'" 60 || true
check "A paused, 8 messages behind (5 + 3)" "paused|0:5 1:3" \
      "$(sql -c "SELECT (SELECT state FROM kafka_sink.status WHERE name = '$A') || '|' ||
                        string_agg(partition || ':' || lag_messages, ' ' ORDER BY partition)
                   FROM kafka_sink.progress WHERE pipeline = '$A'")"

# ---- the outbox: one message that no relay delivers here ---------------------------
as_role ks_e2e -c "SELECT kafka_sink.outbox_send('e2e_prom_out_$SFX', 'k', '{\"secret\":\"$PW-not-in-outbox\"}')" >/dev/null 2>&1 || true

# ---- privileges of the monitoring role ----------------------------------------------------
check "pg_monitor alone cannot read kafka_sink.status" 42501 "$(errcode "$MON" "SELECT count(*) FROM kafka_sink.status")"
check "pg_monitor alone cannot read kafka_sink.secrets" 42501 "$(errcode "$MON" "SELECT count(*) FROM kafka_sink.secrets")"
check "a kafka_sink_admin member cannot call the metrics functions" 42501 \
      "$(errcode ks_e2e "SELECT count(*) FROM kafka_sink.metrics_pipelines()")"
check "a kafka_sink_admin member sees its own pipeline only (RLS)" "$A" \
      "$(as_role ks_e2e -c "SELECT string_agg(name, ',') FROM kafka_sink.status WHERE name IN ('$A', '$B')")"
check "the monitoring role sees both owners' pipelines" "$A,$B" \
      "$(as_role "$MON" -c "SELECT string_agg(pipeline, ',' ORDER BY pipeline) FROM kafka_sink.metrics_pipelines() WHERE pipeline IN ('$A', '$B')")"

# ---- the exporter ----------------------------------------------------------------------
PORT="$("$HARNESS" free-port)"
DATA_SOURCE_NAME="host=$PGHOST port=$PGPORT user=$MON dbname=$PGDATABASE sslmode=disable" \
    "$EXPORTER" --web.listen-address="127.0.0.1:$PORT" --extend.query-path="$QUERIES" \
    --disable-default-metrics --disable-settings-metrics --log.level=warn \
    > "$WORK/exporter.log" 2>&1 &
EXP_PID=$!
scrape() {
    local deadline=$((SECONDS + 30))
    while [ $SECONDS -lt $deadline ]; do
        if curl -sf "http://127.0.0.1:$PORT/metrics" > "$1" 2>/dev/null && grep -q '^kafka_sink_' "$1"; then return 0; fi
        sleep 0.3
    done
    return 1
}
scrape "$WORK/scrape1.txt" || true
# the time-dependent answers of the views (rates over the last 60 s, ages),
# read right after the scrape
declare -A TIMELY
for p in "$A" "$B"; do
    TIMELY[$p]="$(sql -F ' ' -c "SELECT coalesce(input_rows_per_second, 0), coalesce(processed_rows_per_second, 0),
                                        coalesce(extract(epoch FROM clock_timestamp() - last_commit_at), 'NaN')
                                   FROM kafka_sink.status WHERE name = '$p'")"
done
OUTBOX_ROW="$(sql -F ' ' -c "SELECT pending, coalesce(extract(epoch FROM oldest_pending_age), 0), (relay_pid IS NOT NULL)::int FROM kafka_sink.outbox_status")"

# metric lines as name|label=value,...|value with the labels sorted, the
# exporter's server label left out and numbers in one notation; "key" picks
# the series of this run (label value containing $SFX) or the outbox ones
cat > "$WORK/norm.py" <<'PY'
import math, re, sys
def num(s):
    v = float(s)
    if math.isnan(v): return "NaN"
    return str(int(v)) if v == int(v) and abs(v) < 1e15 else repr(v)
mode, sfx = sys.argv[1], sys.argv[2]
for line in sys.stdin:
    line = line.rstrip("\n")
    if mode == "scrape":
        if not line.startswith("kafka_sink_"): continue
        m = re.match(r'^([a-z_]+)(?:\{(.*)\})? (\S+)$', line)
        if not m: continue
        name, labels, value = m.group(1), m.group(2) or "", m.group(3)
        pairs = sorted(p for p in re.findall(r'([a-z_]+)="((?:[^"\\]|\\.)*)"', labels) if p[0] != "server")
    else:
        name, labels, value = line.split("|")
        pairs = sorted(tuple(p.split("=", 1)) for p in labels.split(",") if p)
    if pairs and not any(sfx in v for _, v in pairs): continue
    print("%s|%s|%s" % (name, ",".join("%s=%s" % p for p in pairs), num(value)))
PY
norm() { python3 "$WORK/norm.py" "$1" "$SFX" | sort; }
metrics() { norm scrape < "$1" | grep -E "^($2)\|" || true; }
expected() { sql -c "$1" | norm sql; }
S1="$WORK/scrape1.txt"

check "exporter: the queries file loaded, no query failed" "0|0" \
      "$(grep -c '^pg_exporter_user_queries_load_error{.*} 1' "$S1" || true)|$(grep -ci 'level=error' "$WORK/exporter.log" || true)"
check "exporter: batches_total is typed a counter" 1 "$(grep -c '^# TYPE kafka_sink_pipeline_batches_total counter' "$S1" || true)"

# state: one series per state, 1 for the current one
check "kafka_sink_pipeline_state per pipeline and state (A paused, B failed)" \
      "$(expected "SELECT 'kafka_sink_pipeline_state|pipeline=' || s.name || ',state=' || x || '|' || (s.state = x)::int
                     FROM kafka_sink.status s, unnest(ARRAY['running','paused','stopped','failed','finished']) x
                    WHERE s.name IN ('$A', '$B')")" \
      "$(metrics "$S1" kafka_sink_pipeline_state)"
check "A's state series says paused, B's failed" "$A:paused $B:failed" \
      "$(metrics "$S1" kafka_sink_pipeline_state | grep '|1$' | sed -E 's/.*pipeline=([^,]*),state=([^|]*)\|1/\1:\2/' | sort | tr '\n' ' ' | sed 's/ $//')"

# exact per pipeline numbers
exact="kafka_sink_pipeline_(workers|lag_messages|lag_bytes|last_batch_duration_seconds|last_commit_timestamp_seconds|batches_total|last_error_timestamp_seconds)"
check "per pipeline: workers, lag, duration, commit/error times, batches_total equal the views" \
      "$(expected "SELECT 'kafka_sink_pipeline_' || k || '|pipeline=' || s.name || '|' || coalesce(v, 'NaN')
                     FROM kafka_sink.status s
                     CROSS JOIN LATERAL (SELECT sum(lag_messages) AS lag FROM kafka_sink.progress g WHERE g.pipeline = s.name) l
                     CROSS JOIN LATERAL (VALUES ('workers', coalesce(s.workers, 0)::text),
                                                ('lag_messages', l.lag::text),
                                                ('lag_bytes', s.bytes_behind_estimate::text),
                                                ('last_batch_duration_seconds', extract(epoch FROM s.last_batch_duration)::float8::text),
                                                ('last_commit_timestamp_seconds', extract(epoch FROM s.last_commit_at)::float8::text),
                                                ('batches_total', s.last_batch_id::text),
                                                ('last_error_timestamp_seconds', extract(epoch FROM s.last_error_at)::float8::text)) x(k, v)
                    WHERE s.name IN ('$A', '$B')")" \
      "$(metrics "$S1" "$exact")"
check "A: lag 8 messages, bytes > 0, one worker, batches > 0; B: no worker, an error time" "8|t|1|t|0|t" \
      "$(metrics "$S1" "$exact" | awk -F'|' -v a="pipeline=$A" -v b="pipeline=$B" '
            $2 == a && $1 ~ /_lag_messages$/ { lm = $3 } $2 == a && $1 ~ /_lag_bytes$/ { lb = ($3 > 0 ? "t" : "f") }
            $2 == a && $1 ~ /_workers$/ { wa = $3 } $2 == a && $1 ~ /_batches_total$/ { bt = ($3 > 0 ? "t" : "f") }
            $2 == b && $1 ~ /_workers$/ { wb = $3 } $2 == b && $1 ~ /_last_error_timestamp_seconds$/ { et = ($3 > 1e9 ? "t" : "f") }
            END { print lm "|" lb "|" wa "|" bt "|" wb "|" et }')"

# time-dependent numbers: rates over the last 60 s, seconds since the commit
close_to() {  # NAME PIPELINE SQL_VALUE TOLERANCE: t when the scraped value is within TOLERANCE
    local got; got="$(metrics "$S1" "$1" | grep "|pipeline=$2|" | cut -d'|' -f3)"
    python3 -c "import sys; g, w, t = sys.argv[1:]; print('t' if g and abs(float(g) - float(w)) <= float(t) else 'f ' + g + ' vs ' + w)" "$got" "$3" "$4"
}
for p in "$A" "$B"; do
    read -r inrate prate since <<< "${TIMELY[$p]}"
    check "$p: input_rows_per_second as in status (within 25%)" t \
          "$(close_to kafka_sink_pipeline_input_rows_per_second "$p" "$inrate" "$(python3 -c "print(max(0.25 * $inrate, 0.2))")")"
    check "$p: processed_rows_per_second as in status" t \
          "$(close_to kafka_sink_pipeline_processed_rows_per_second "$p" "$prate" "$(python3 -c "print(max(0.01 * $prate, 0.2))")")"
    check "$p: seconds_since_last_commit as in status (within 10 s)" t \
          "$(close_to kafka_sink_pipeline_seconds_since_last_commit "$p" "$since" 10)"
done

# per partition
check "per partition: committed offset, watermarks, lag equal kafka_sink.progress" \
      "$(expected "SELECT 'kafka_sink_partition_' || k || '|partition=' || g.partition || ',pipeline=' || g.pipeline || ',topic=' || g.topic || '|' || coalesce(v::text, 'NaN')
                     FROM kafka_sink.progress g
                     CROSS JOIN LATERAL (VALUES ('committed_offset', g.committed_offset), ('log_start_offset', g.log_start_offset),
                                                ('high_watermark', g.high_watermark), ('lag_messages', g.lag_messages),
                                                ('lag_bytes', g.lag_bytes_estimate)) x(k, v)
                    WHERE g.pipeline IN ('$A', '$B')")" \
      "$(metrics "$S1" "kafka_sink_partition_(committed_offset|log_start_offset|high_watermark|lag_messages|lag_bytes)")"
check "A's partitions: committed 10 and 6+3, high watermarks 15 and 12" \
      "0|10|15|5 1|9|12|3" \
      "$(metrics "$S1" "kafka_sink_partition_(committed_offset|high_watermark|lag_messages)" | grep "pipeline=$A" |
         awk -F'|' '{ split($2, l, ","); sub("partition=", "", l[1]); v[l[1]] = v[l[1]] "|" $3 }
                    END { for (p in v) print p v[p] }' | sort |
         awk -F'|' '{ printf "%s%s|%s|%s|%s", (NR > 1 ? " " : ""), $1, $2, $3, $4 }')"

# quarantine and errors
check "quarantine: messages and pending by reason equal kafka_sink.quarantine" \
      "$(expected "SELECT 'kafka_sink_quarantine_' || k || '|pipeline=' || d.name || ',reason=' || q.reason || '|' || v
                     FROM (SELECT pipeline_id, reason, count(*) AS n, count(*) FILTER (WHERE replayed_at IS NULL) AS pend
                             FROM kafka_sink.quarantine GROUP BY 1, 2) q
                     JOIN kafka_sink.pipeline_definitions d ON d.id = q.pipeline_id
                     CROSS JOIN LATERAL (VALUES ('messages', q.n), ('pending', q.pend)) x(k, v)
                    WHERE d.name IN ('$A', '$B')")" \
      "$(metrics "$S1" "kafka_sink_quarantine_(messages|pending)")"
check "quarantine: 3 messages of A held" 3 \
      "$(metrics "$S1" kafka_sink_quarantine_messages | awk -F'|' '{ s += $3 } END { print s + 0 }')"
check "errors: recorded and last time by kind equal kafka_sink.errors" \
      "$(expected "SELECT 'kafka_sink_errors_' || k || '|kind=' || e.kind || ',pipeline=' || d.name || '|' || v
                     FROM (SELECT pipeline_id, kind, count(*)::float8 AS n, extract(epoch FROM max(occurred_at))::float8 AS t
                             FROM kafka_sink.errors GROUP BY 1, 2) e
                     JOIN kafka_sink.pipeline_definitions d ON d.id = e.pipeline_id
                     CROSS JOIN LATERAL (VALUES ('recorded', e.n), ('last_timestamp_seconds', e.t)) x(k, v)
                    WHERE d.name IN ('$A', '$B')")" \
      "$(metrics "$S1" "kafka_sink_errors_(recorded|last_timestamp_seconds)")"
check "errors: B has a permanent one" t \
      "$(metrics "$S1" kafka_sink_errors_recorded | grep -q "kind=permanent,pipeline=$B|[1-9]" && echo t || echo f)"

# outbox
read -r opend oage orelay <<< "$OUTBOX_ROW"
check "outbox: pending and relay as in outbox_status" "$opend|$orelay" \
      "$(metrics "$S1" kafka_sink_outbox_pending | cut -d'|' -f3)|$(metrics "$S1" kafka_sink_outbox_relay_running | cut -d'|' -f3)"
check "outbox: oldest pending age as in outbox_status (within 10 s)" t \
      "$(python3 -c "import sys; g, w = sys.argv[1:]; print('t' if g and abs(float(g) - float(w)) <= 10 else 'f ' + g + ' vs ' + w)" \
           "$(metrics "$S1" kafka_sink_outbox_oldest_pending_age_seconds | cut -d'|' -f3)" "$oage")"

# nothing secret or textual
check "the scrape holds no secret and no error text" "0|0|0" \
      "$(lines_with "$S1" "$PW")|$(lines_with "$S1" "permission denied")|$(lines_with "$S1" "$KS_BOOTSTRAP")"

# ---- resumed: the lag goes, the counter grows ----------------------------------------
b1="$(metrics "$S1" kafka_sink_pipeline_batches_total | grep "pipeline=$A|" | cut -d'|' -f3)"
as_role ks_e2e -c "SELECT kafka_sink.resume('$A')" >/dev/null
check "A resumed and caught up" t "$(as_role ks_e2e -c "SELECT kafka_sink.wait('$A', '60 s')")"
poll "SELECT sum(lag_messages) = 0 FROM kafka_sink.progress WHERE pipeline = '$A'" 30 || true
scrape "$WORK/scrape2.txt" || true
S2="$WORK/scrape2.txt"
check "after resume: A running, lag 0, batches_total grew and equals last_batch_id" \
      "1|0|t|$(sql -c "SELECT last_batch_id FROM kafka_sink.status WHERE name = '$A'")" \
      "$(metrics "$S2" kafka_sink_pipeline_state | grep -c "pipeline=$A,state=running|1")|$(metrics "$S2" kafka_sink_pipeline_lag_messages | grep "pipeline=$A|" | cut -d'|' -f3)|$(python3 -c "print('t' if float('$(metrics "$S2" kafka_sink_pipeline_batches_total | grep "pipeline=$A|" | cut -d'|' -f3)') > float('${b1:-0}') else 'f')")|$(metrics "$S2" kafka_sink_pipeline_batches_total | grep "pipeline=$A|" | cut -d'|' -f3)"

cleanup
EXP_PID=""
as_role ks_e2e -c "SELECT kafka_sink.drop_pipeline('$A')" >/dev/null
as_role "$OWNER_B" -c "SELECT kafka_sink.drop_pipeline('$B')" >/dev/null
sql -c "DELETE FROM kafka_sink.outbox WHERE topic = 'e2e_prom_out_$SFX'" >/dev/null
finish
