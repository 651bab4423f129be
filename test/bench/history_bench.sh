#!/usr/bin/env bash
# test/bench/history_bench.sh — mode history beside merge mode on the same
# topic (docs/performance.md, "History mode"): N events (default 200,000)
# over K keys (default 20,000), complete messages with increasing order
# values, 5% of them late (an order value before the key's latest), read by
# a merge pipeline and a history pipeline with the same batch size; prints
# each one's messages per second (first batch start to last commit) and the
# history table's size.  Not a timed test: run by hand against a harness
# (test/harness.sh pg-start and kafka-start, or KS_KEEP_RUNNING=1).
# shellcheck source=../lib/common.sh
. "$(dirname "$0")/../lib/common.sh"
setup_owner
N="${BENCH_EVENTS:-200000}"
K="${BENCH_KEYS:-20000}"
T="hbench_$SFX"
"$HARNESS" topic-create "$T" 1 >/dev/null 2>&1 || true
python3 - "$N" "$K" <<'PY' | kcat -P -b "$KS_BOOTSTRAP" -t "$T" -p 0 -K $'\t' -z lz4
import json, random, sys
n, k = int(sys.argv[1]), int(sys.argv[2])
rnd = random.Random(1)
for i in range(n):
    key = rnd.randrange(k)
    ts = i * 10 - (rnd.randrange(1, 50000) * 10 if rnd.random() < 0.05 else 0)
    print("%d\t%s" % (key, json.dumps({"id": key, "v": max(ts, 0), "name": "n%d" % i, "qty": i % 97})))
PY
sql >/dev/null <<SQL
SET ROLE ks_e2e;
CREATE TABLE e2e.hb_merge_$SFX (id bigint PRIMARY KEY, v bigint, name text, qty int);
CREATE TABLE e2e.hb_hist_$SFX (id bigint NOT NULL, v bigint NOT NULL, name text, qty int,
    _valid_from bigint NOT NULL, _valid_to bigint, _deleted boolean NOT NULL, _is_current boolean,
    _fields text[], PRIMARY KEY (id, _valid_from));
SELECT kafka_sink.create_pipeline(name => 'hb_merge_$SFX', bootstrap_servers => '$KS_BOOTSTRAP',
    subscribe => ARRAY['$T'], target => 'e2e.hb_merge_$SFX', order_column => 'v', key_format => 'string',
    starting_offsets => 'earliest', max_offsets_per_batch => 10000, trigger_interval => '0');
SQL
poll "$(done_sql "hb_merge_$SFX" "$N")" 900
sql -c "SET ROLE ks_e2e" -c "SELECT kafka_sink.create_pipeline(name => 'hb_hist_$SFX', bootstrap_servers => '$KS_BOOTSTRAP',
    subscribe => ARRAY['$T'], target => 'e2e.hb_hist_$SFX', mode => 'history', order_column => 'v', key_format => 'string',
    starting_offsets => 'earliest', max_offsets_per_batch => 10000, trigger_interval => '0')" >/dev/null
poll "$(done_sql "hb_hist_$SFX" "$N")" 1800
for m in merge hist; do
    sql -c "SELECT '$m: ' || sum(b.messages) || ' messages in ' || count(*) || ' batches, '
                   || round(sum(b.messages) / extract(epoch FROM max(b.committed_at) - min(b.started_at))) || ' msg/s, '
                   || 'mean batch ' || round(avg(extract(epoch FROM b.committed_at - b.started_at) * 1000)) || ' ms'
              FROM kafka_sink.batches b JOIN kafka_sink.pipeline_definitions p ON p.id = b.pipeline_id
             WHERE p.name = 'hb_${m}_$SFX' AND b.messages > 0"
done
sql -c "SELECT 'history table: ' || count(*) || ' versions, ' || pg_size_pretty(pg_total_relation_size('e2e.hb_hist_$SFX'))
          FROM e2e.hb_hist_$SFX"
for m in merge hist; do sql -c "SET ROLE ks_e2e; SELECT kafka_sink.drop_pipeline('hb_${m}_$SFX')" >/dev/null; done
