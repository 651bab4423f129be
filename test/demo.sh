#!/usr/bin/env bash
# test/demo.sh — kafka_sink end to end, for a new user, in one command.
#
#   test/demo.sh            build, start Kafka + PostgreSQL, run the demo,
#                           leave both running so you can look around
#   test/demo.sh --stop     the same, then stop both
#   test/demo.sh --fresh    wipe the demo's run dir first (new broker+cluster)
#
# It uses its own run dir, KS_RUN=${KS_RUN:-<repo>/.run-demo}, apart from
# the tests'.  Re-running is safe: the topic, the pipeline, the demo schema
# and the extension are dropped and created again.
#
# What it shows: 1000 order events for at most 300 order ids (ids repeat),
# sent out of event-time order to the 4-partition topic orders.v1, land in
# demo.orders as one row per order id holding the event with the newest
# event_ts, which is checked against a model computed by plain SQL from the
# very messages sent.  Then a stale event (older event_ts) is produced
# from SQL and does not overwrite, while a newer one does.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"
export KS_RUN="${KS_RUN:-$REPO/.run-demo}"
H="$REPO/test/harness.sh"
# Debian's PostgreSQL 15 unless PG_CONFIG names another one (its bindir
# runs the demo cluster; start from a fresh run dir when switching majors)
PG_CONFIG="${PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}"
TOPIC=orders.v1
PIPELINE=orders_demo

stop_at_end=0
fresh=0
for a in "$@"; do
    case "$a" in
        --stop)  stop_at_end=1 ;;
        --fresh) fresh=1 ;;
        -h|--help) sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "unknown option $a (--stop, --fresh)" >&2; exit 2 ;;
    esac
done

step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

step "1. packages, build, install"
"$H" deps
make -s -j"$(nproc)" PG_CONFIG="$PG_CONFIG"
make -s install PG_CONFIG="$PG_CONFIG" >/dev/null
export KS_PGBIN="$("$PG_CONFIG" --bindir)"

step "2. Apache Kafka broker and PostgreSQL cluster ($KS_RUN)"
if [ $fresh = 1 ] && [ -e "$KS_RUN/.ks_run" ]; then "$H" clean; fi
"$H" kafka-fetch
"$H" kafka-start
"$H" pg-start
set -a; . "$KS_RUN/env"; set +a
if [ $stop_at_end = 1 ]; then trap '"$H" stop-all' EXIT; fi
psql_demo() { psql -X -v ON_ERROR_STOP=1 -v bootstrap="$KS_BOOTSTRAP" -v topic="$TOPIC" \
                   -v pipeline="$PIPELINE" "$@"; }

step "3. clean slate: drop the previous demo's pipeline, schema, extension and topic"
psql_demo -q <<'SQL'
SET client_min_messages = warning;
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'kafka_sink') THEN
        PERFORM kafka_sink.drop_pipeline(name => 'orders_demo', if_exists => true);
    END IF;
END
$$;
DROP SCHEMA IF EXISTS demo CASCADE;
DROP EXTENSION IF EXISTS kafka_sink CASCADE;
SQL
if kcat -b "$KS_BOOTSTRAP" -L -t "$TOPIC" -m 5 2>/dev/null | grep -q "topic \"$TOPIC\" with"; then
    "$H" topic-delete "$TOPIC"
fi
# topic deletion finishes asynchronously: retry the create until it goes in
for i in $(seq 1 30); do
    if "$H" topic-create "$TOPIC" 4 2>"$KS_RUN/logs/demo-topic.err" | grep -v WARNING; then break; fi
    [ "$i" -lt 30 ] || { cat "$KS_RUN/logs/demo-topic.err" >&2; exit 1; }
    sleep 1
done

step "4. extension, a pipeline owner role and the target table"
psql_demo <<'SQL'
CREATE EXTENSION kafka_sink;
-- A pipeline runs with its owner's privileges, so the owner is an ordinary
-- LOGIN role (not a superuser) that is a member of kafka_sink_admin.
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'demo_owner') THEN
        CREATE ROLE demo_owner LOGIN;
    END IF;
END
$$;
GRANT kafka_sink_admin TO demo_owner;
CREATE SCHEMA demo AUTHORIZATION demo_owner;
SET ROLE demo_owner;
CREATE TABLE demo.orders (
    order_id bigint PRIMARY KEY,
    event_ts timestamptz NOT NULL,
    amount   numeric(18,2),
    status   text,
    -- optional lineage columns: the pipeline fills them with the message's coordinates
    _kafka_topic     text,
    _kafka_partition int,
    _kafka_offset    bigint,
    _kafka_batch_id  bigint
);
\d demo.orders
SQL

step "5. produce 1000 order events (order ids 1..300 repeat, event_ts out of order) with kcat"
mkdir -p "$KS_RUN/demo"
python3 - "$KS_RUN/demo/orders.txt" <<'EOF'
import datetime, json, random, sys
rnd = random.Random(42)                 # same events on every run
base = datetime.datetime(2025, 1, 1, tzinfo=datetime.timezone.utc)
statuses = ["created", "paid", "shipped", "delivered", "cancelled"]
with open(sys.argv[1], "w") as f:
    for i in range(1000):
        order_id = rnd.randint(1, 300)
        # a permutation of 0..999 minutes: every event_ts distinct, and the
        # send order is not the event-time order
        ts = base + datetime.timedelta(minutes=(i * 7919) % 1000)
        value = {"order_id": order_id, "event_ts": ts.isoformat(),
                 "amount": round(rnd.uniform(5, 500), 2),
                 "status": rnd.choice(statuses)}
        f.write("%d|%s\n" % (order_id, json.dumps(value, separators=(",", ":"))))
EOF
kcat -b "$KS_BOOTSTRAP" -P -t "$TOPIC" -K '|' < "$KS_RUN/demo/orders.txt"
echo "high watermarks of $TOPIC (partition, offset):"
"$H" topic-offsets "$TOPIC"

step "6. create the pipeline and wait until it has caught up"
psql_demo <<'SQL'
SET ROLE demo_owner;
SELECT kafka_sink.create_pipeline(
    name              => :'pipeline',
    bootstrap_servers => :'bootstrap',
    subscribe         => ARRAY[:'topic'],
    target            => 'demo.orders',
    order_column      => 'event_ts',
    starting_offsets  => 'earliest',
    bronze            => 'demo.orders_raw') AS pipeline_id;
\timing on
SELECT kafka_sink.wait(:'pipeline', '120 s') AS caught_up \gset
\timing off
\if :caught_up
\else
    \echo 'the pipeline did not catch up within 120 s:'
    \x on
    SELECT * FROM kafka_sink.status;
    DO $$ BEGIN RAISE EXCEPTION 'demo stopped: the pipeline did not catch up'; END $$;
\endif
SQL

step "7. results"
psql_demo <<SQL
-- the model: the very messages sent, reduced by plain SQL (newest event_ts wins)
CREATE TEMP TABLE sent (key text, value jsonb);
\copy sent FROM '$KS_RUN/demo/orders.txt' WITH (FORMAT text, DELIMITER '|')
CREATE TEMP VIEW model AS
SELECT DISTINCT ON ((value->>'order_id')::bigint)
       (value->>'order_id')::bigint AS order_id, (value->>'event_ts')::timestamptz AS event_ts,
       (value->>'amount')::numeric(18,2) AS amount, value->>'status' AS status
  FROM sent ORDER BY (value->>'order_id')::bigint, (value->>'event_ts')::timestamptz DESC;

SELECT (SELECT count(*) FROM sent) AS messages_sent,
       (SELECT count(*) FROM demo.orders) AS rows_in_target,
       (SELECT count(*) FROM model) AS distinct_order_ids;
SELECT * FROM demo.orders ORDER BY order_id LIMIT 5;
CREATE TEMP VIEW target AS SELECT order_id, event_ts, amount, status FROM demo.orders;
SELECT NOT EXISTS (SELECT * FROM model EXCEPT SELECT * FROM target)
   AND NOT EXISTS (SELECT * FROM target EXCEPT SELECT * FROM model)
       AS target_equals_model \gset
\if :target_equals_model
\echo 'demo.orders equals the model computed by plain SQL from the sent messages: yes'
\else
\echo 'demo.orders differs from the model computed from the sent messages:'
SELECT 'missing or different' AS problem, * FROM (SELECT * FROM model EXCEPT SELECT * FROM target) m
UNION ALL
SELECT 'unexpected', * FROM (SELECT * FROM target EXCEPT SELECT * FROM model) t
ORDER BY order_id LIMIT 20;
DO $$ BEGIN RAISE EXCEPTION 'demo failed: the target does not match the model'; END $$;
\endif
\x on
SELECT * FROM kafka_sink.status;
\x off
SELECT pipeline, topic, partition, committed_offset, log_start_offset, high_watermark, lag_messages,
       last_batch_id FROM kafka_sink.progress ORDER BY topic, partition;
SELECT jsonb_pretty(kafka_sink.last_progress(:'pipeline')) AS last_progress;
SQL

step "8. from SQL: a stale event (older event_ts) for order 1, a newer one for order 2"
psql_demo <<'SQL'
SET ROLE demo_owner;
SELECT order_id, event_ts, status FROM demo.orders WHERE order_id IN (1, 2) ORDER BY 1;
SELECT p.partition, p."offset", m.key
  FROM (SELECT key, value FROM (VALUES
          ('1', jsonb_build_object('order_id', 1, 'event_ts', (SELECT event_ts - interval '1 day' FROM demo.orders WHERE order_id = 1),
                                   'amount', 0, 'status', 'stale: must not win')),
          ('2', jsonb_build_object('order_id', 2, 'event_ts', (SELECT event_ts + interval '1 day' FROM demo.orders WHERE order_id = 2),
                                   'amount', 1, 'status', 'refunded'))) AS v(key, value)) m,
       LATERAL kafka_sink.produce(:'bootstrap', :'topic', m.key, m.value::text,
                                  headers => '{"source":"demo.sh"}') p;
SELECT kafka_sink.wait(:'pipeline', '60 s') AS caught_up;
SELECT order_id, event_ts, status FROM demo.orders WHERE order_id IN (1, 2) ORDER BY 1;
SQL

step "9. lineage: which message wrote order 2, and what happened to the stale event for order 1"
psql_demo <<'SQL'
SET ROLE demo_owner;
SELECT topic, partition, "offset", batch_id, batch_committed_at
  FROM kafka_sink.lineage(:'pipeline', '{"order_id": 2}');
SELECT m.topic, m.partition, m."offset", f.fate, f.detail
  FROM (SELECT topic, partition, "offset" FROM kafka_sink.progress p,
               LATERAL (SELECT p.committed_offset - 1 AS "offset") o
         WHERE p.pipeline = :'pipeline' AND p.committed_offset > 0) m,
       LATERAL kafka_sink.message_fate(:'pipeline', m.topic, m.partition, m."offset") f
 ORDER BY m.partition;
\x on
SELECT name, state, workers, last_batch_id, input_rows_per_second, processed_rows_per_second,
       max_offsets_behind, hot_partition, last_error FROM kafka_sink.status;
SQL

step "done"
if [ $stop_at_end = 1 ]; then
    echo "stopping the broker and the cluster (--stop)"
else
    cat <<EOF
The broker and the cluster are still running.
  connect:  eval "\$(KS_RUN=$KS_RUN test/harness.sh env)"; psql
            (bootstrap servers: $KS_BOOTSTRAP, database: $PGDATABASE on 127.0.0.1:$PGPORT as $PGUSER)
  logs:     $KS_RUN/logs/kafka.log, $KS_RUN/logs/postgresql.log
  stop:     KS_RUN=$KS_RUN test/harness.sh stop-all
EOF
fi
