#!/usr/bin/env bash
# function_mode: a batch function that MERGEs into two tables is
# exactly-once across kills.  The function upserts a per-key total and
# count (which a replayed batch would double) and appends one ledger row per
# message; the worker is killed with kill -9 while it ingests; at the end
# both tables equal what the test computes from the messages it produced.
set -uo pipefail
. "$(dirname "$0")/../lib/common.sh"
setup_owner
T="chaos_fn_$SFX"
S="fn_$SFX"
N="${CHAOS_FN_MESSAGES:-30000}"
"$HARNESS" topic-create "$T" 4 >/dev/null 2>&1

sql >/dev/null <<SQL
CREATE SCHEMA $S AUTHORIZATION ks_e2e;
SET ROLE ks_e2e;
CREATE TABLE $S.events (k int, amount int);
CREATE TABLE $S.totals (k int PRIMARY KEY, total bigint NOT NULL, n int NOT NULL);
CREATE TABLE $S.ledger (batch_id bigint, k int, amount int);
CREATE FUNCTION $S.apply(batch_id bigint, rows $S.events[]) RETURNS void
LANGUAGE plpgsql AS \$fn\$
BEGIN
    MERGE INTO $S.totals t
    USING (SELECT k, sum(amount) AS total, count(*)::int AS n FROM unnest(rows) GROUP BY k) s ON t.k = s.k
    WHEN MATCHED THEN UPDATE SET total = t.total + s.total, n = t.n + s.n
    WHEN NOT MATCHED THEN INSERT VALUES (s.k, s.total, s.n);
    INSERT INTO $S.ledger SELECT batch_id, r.k, r.amount FROM unnest(rows) r;
END
\$fn\$;
SELECT kafka_sink.create_pipeline(name => '$S', bootstrap_servers => '$KS_BOOTSTRAP',
       subscribe => ARRAY['$T'], target => '$S.events', mode => 'function',
       batch_function => '$S.apply(bigint, $S.events[])', starting_offsets => 'earliest',
       max_offsets_per_batch => 2000);
SQL

python3 -c "
import random
r = random.Random(7)
for i in range($N):
    k = r.randrange(500)
    print('%d|{\"k\":%d,\"amount\":%d}' % (k, k, r.randrange(1, 1000)))" > "$KS_RUN/$S.txt"
split -n l/5 -d "$KS_RUN/$S.txt" "$KS_RUN/$S.part."
kills=0
for part in "$KS_RUN/$S.part."*; do
    produce "$T" < "$part"
    for j in 1 2; do
        poll "SELECT worker_pids IS NOT NULL FROM kafka_sink.status WHERE name = '$S'" 60 || true
        pid="$(sql -c "SELECT worker_pids[1] FROM kafka_sink.status WHERE name = '$S'" 2>/dev/null || true)"
        sleep 0.$((RANDOM % 5))$((RANDOM % 10))
        if [ -n "$pid" ] && kill -9 "$pid" 2>/dev/null; then kills=$((kills + 1)); fi
        sleep 1
        until sql -c "SELECT 1" >/dev/null 2>&1; do sleep 0.5; done
    done
done
check "the worker was killed during ingestion" 10 "$kills"
check "caught up after the kills" t "$(sql -c "SELECT kafka_sink.wait('$S', '180 s')")"

model="$(python3 - "$KS_RUN/$S.txt" <<'PY'
import json, sys
tot, n = {}, {}
for line in open(sys.argv[1]):
    v = json.loads(line.split('|', 1)[1])
    tot[v['k']] = tot.get(v['k'], 0) + v['amount']
    n[v['k']] = n.get(v['k'], 0) + 1
print(' '.join('%d:%d:%d' % (k, tot[k], n[k]) for k in sorted(tot)))
PY
)"
check "totals (MERGE, would double on a replay) equal the model" "$model" \
      "$(sql -c "SELECT string_agg(k || ':' || total || ':' || n, ' ' ORDER BY k) FROM $S.totals")"
check "the ledger has every message exactly once" "$N" "$(sql -c "SELECT count(*) FROM $S.ledger")"
check "ledger batch ids are exactly the committed batch markers" t \
      "$(sql -c "SELECT (SELECT array_agg(DISTINCT batch_id ORDER BY batch_id) FROM $S.ledger) = (SELECT array_agg(b.batch_id ORDER BY b.batch_id) FROM kafka_sink.batches b JOIN kafka_sink.pipelines p ON p.id = b.pipeline_id WHERE p.name = '$S' AND b.messages > 0)")"
sql -c "SELECT kafka_sink.drop_pipeline('$S')" >/dev/null
finish
