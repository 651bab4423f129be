#!/usr/bin/env bash
# outbox: effects leave PostgreSQL only if their transaction commits.
#  - outbox_send in a committed transaction is published, in a rolled-back
#    one never; each message carries its stable event id as a header;
#  - a batch function that MERGEs and calls outbox_send: exactly-once in
#    PostgreSQL, at-least-once (deduplicable by event id) to Kafka;
#  - kill -9 of the relay while it publishes, repeatedly: every committed
#    outbox row appears in Kafka at least once, in order per key, no
#    rolled-back row ever appears, and event ids are stable across retries;
#  - kafka_sink.outbox_status shows pending rows, their age, and errors.
. "$(dirname "$0")/../lib/common.sh"
setup_owner
OUT="e2e_outbox_$SFX"
"$HARNESS" topic-create "$OUT" 3 >/dev/null 2>&1
sql -c "ALTER SYSTEM SET kafka_sink.outbox_bootstrap_servers = '$KS_BOOTSTRAP'" -c "SELECT pg_reload_conf()" >/dev/null
poll "SELECT relay_pid IS NOT NULL FROM kafka_sink.outbox_status" 30 || true
check "the relay starts when outbox_bootstrap_servers is set" t \
      "$(sql -c "SELECT relay_pid IS NOT NULL FROM kafka_sink.outbox_status")"

consume() {  # every message of the topic: partition, offset, key, event_id header, value
    kcat -C -b "$KS_BOOTSTRAP" -t "$OUT" -e -q -f '%p\t%o\t%k\t%h\t%s\n' 2>/dev/null
}

# ---- commit versus rollback ---------------------------------------------------------
sql >/dev/null <<SQL
SET ROLE ks_e2e;
BEGIN;
SELECT kafka_sink.outbox_send('$OUT', 'k1', '{"n":1,"run":"$SFX"}', '{"source":"e2e"}');
COMMIT;
BEGIN;
SELECT kafka_sink.outbox_send('$OUT', 'k1', '{"n":"rolled back"}');
ROLLBACK;
SQL
poll "SELECT pending = 0 FROM kafka_sink.outbox_status" 30 || true
sleep 0.5
got="$(consume)"
check "the committed message is published" 1 "$(grep -c '"n":1,' <<< "$got" || true)"
check "the rolled-back message never is" 0 "$(grep -c 'rolled back' <<< "$got" || true)"
eid="$(sql -c "SELECT event_id FROM kafka_sink.outbox WHERE value = '{\"n\":1,\"run\":\"$SFX\"}'")"
check "the message carries its event id and headers" 1 "$(grep -c "event_id=$eid,source=e2e" <<< "$got" || true)"
check "the delivered row records partition and offset" t \
      "$(sql -c "SELECT delivered_at IS NOT NULL AND \"offset\" IS NOT NULL FROM kafka_sink.outbox WHERE event_id = '$eid'")"

# ---- a batch function that MERGEs and sends ----------------------------------------------
IN="e2e_outbox_in_$SFX"
"$HARNESS" topic-create "$IN" 1 >/dev/null 2>&1
sql >/dev/null <<SQL
CREATE SCHEMA ob_$SFX AUTHORIZATION ks_e2e;
SET ROLE ks_e2e;
CREATE TABLE ob_$SFX.payments (id bigint PRIMARY KEY, amount numeric(18,2), status text);
CREATE TABLE ob_$SFX.incoming (id bigint, amount numeric(18,2), status text);
CREATE FUNCTION ob_$SFX.apply(batch_id bigint, rows ob_$SFX.incoming[]) RETURNS void
LANGUAGE plpgsql AS \$fn\$
BEGIN
    MERGE INTO ob_$SFX.payments t
    USING (SELECT DISTINCT ON (id) r.* FROM unnest(rows) WITH ORDINALITY AS r(id, amount, status, n)
            ORDER BY id, n DESC) s ON t.id = s.id
    WHEN MATCHED THEN UPDATE SET amount = s.amount, status = s.status
    WHEN NOT MATCHED THEN INSERT VALUES (s.id, s.amount, s.status);
    PERFORM kafka_sink.outbox_send('$OUT', r.id::text,
                                   json_build_object('payment', r.id, 'status', r.status, 'batch', batch_id)::text)
       FROM unnest(rows) r WHERE r.status = 'paid';
END
\$fn\$;
SELECT kafka_sink.create_pipeline(name => 'ob_$SFX', bootstrap_servers => '$KS_BOOTSTRAP',
       subscribe => ARRAY['$IN'], target => 'ob_$SFX.incoming', mode => 'function',
       batch_function => 'ob_$SFX.apply(bigint, ob_$SFX.incoming[])', starting_offsets => 'earliest');
SQL
printf '%s\n' '1|{"id":1,"amount":"10","status":"new"}' '1|{"id":1,"amount":"10","status":"paid"}' \
              '2|{"id":2,"amount":"5","status":"paid"}' | produce "$IN"
check "the batch function pipeline catches up" t "$(sql -c "SELECT kafka_sink.wait('ob_$SFX', '60 s')")"
poll "SELECT pending = 0 FROM kafka_sink.outbox_status" 30 || true
sleep 0.5
check "the MERGE landed" "1:paid 2:paid" "$(sql -c "SELECT string_agg(id || ':' || status, ' ' ORDER BY id) FROM ob_$SFX.payments")"
check "the effects of the batch reached Kafka once each" 2 "$(consume | grep -c '"status" : "paid"' || true)"
sql -c "SELECT kafka_sink.drop_pipeline('ob_$SFX')" >/dev/null

# ---- kill -9 of the relay during delivery ----------------------------------------------------
# Three sessions queue 600 messages each over 30 keys while the relay points
# at no broker; every fifth transaction rolls back.  Then the relay gets the
# real broker and is killed (the postmaster then restarts the cluster)
# several times while it publishes.
sql -c "ALTER SYSTEM SET kafka_sink.outbox_bootstrap_servers = '127.0.0.1:1'" -c "SELECT pg_reload_conf()" >/dev/null
sender() {
    sql >/dev/null <<SQL
SET ROLE ks_e2e;
DO \$\$
BEGIN
    FOR i IN 1..600 LOOP
        PERFORM kafka_sink.outbox_send('$OUT', 'key' || (i % 10 + $1 * 10),
                                       json_build_object('s', $1, 'i', i)::text);
        IF i % 5 = 0 THEN
            ROLLBACK;
        ELSE
            COMMIT;
        END IF;
    END LOOP;
END
\$\$;
SQL
}
sender 1 & sender 2 & sender 3 &
wait
sql -c "ALTER SYSTEM SET kafka_sink.outbox_bootstrap_servers = '$KS_BOOTSTRAP'" -c "SELECT pg_reload_conf()" >/dev/null
kills=0
for k in 1 2 3 4; do
    poll "SELECT relay_pid IS NOT NULL FROM kafka_sink.outbox_status" 30 || true
    pid="$(sql -c "SELECT relay_pid FROM kafka_sink.outbox_status" 2>/dev/null || true)"
    sleep 0.$((RANDOM % 3))$((RANDOM % 10))
    if [ -n "$pid" ] && kill -9 "$pid" 2>/dev/null; then kills=$((kills + 1)); fi
    sleep 1
    until sql -c "SELECT 1" >/dev/null 2>&1; do sleep 0.5; done
done
check "the relay was killed during delivery" 4 "$kills"
poll "SELECT pending = 0 FROM kafka_sink.outbox_status" 120 || true
check "after the kills every committed row is delivered" 0 "$(sql -c "SELECT pending FROM kafka_sink.outbox_status")"
sleep 1
consume > "$KS_RUN/outbox_$SFX.tsv"
sql -c "COPY (SELECT event_id, key, id FROM kafka_sink.outbox WHERE topic = '$OUT' AND value LIKE '{\"s\"%' ORDER BY id) TO STDOUT" > "$KS_RUN/outbox_rows_$SFX.tsv"
verdict="$(python3 - "$KS_RUN/outbox_$SFX.tsv" "$KS_RUN/outbox_rows_$SFX.tsv" <<'PY'
import sys
msgs = []
for line in open(sys.argv[1]):
    p, o, k, h, v = line.rstrip('\n').split('\t', 4)
    if not v.startswith('{"s"'):
        continue
    eid = dict(x.split('=', 1) for x in h.split(','))['event_id']
    msgs.append((int(p), int(o), k, eid, v))
rows = [l.rstrip('\n').split('\t') for l in open(sys.argv[2])]
committed = {eid: (key, int(rid)) for eid, key, rid in rows}
seen = {m[3] for m in msgs}
missing = [e for e in committed if e not in seen]
stray = [m for m in msgs if m[3] not in committed or '"i" : 5,' in m[4] or m[4].endswith('"i" : 600}')]
rolled_back = [m for m in msgs if int(m[4].split('"i" : ')[1].rstrip('}')) % 5 == 0]
# order per key: first occurrences, in partition offset order, follow the outbox ids
bad_order = 0
by_key = {}
for p, o, k, eid, v in sorted(msgs):
    by_key.setdefault(k, []).append(committed.get(eid, (None, -1))[1])
for k, ids in by_key.items():
    firsts, last = [], -1
    for rid in ids:
        if rid in firsts:
            continue
        if rid < last:
            bad_order += 1
        firsts.append(rid)
        last = rid
dups = len(msgs) - len(seen)
print(f"{len(committed)}|{len(missing)}|{len(rolled_back)}|{bad_order}|dups={dups}")
PY
)"
check "every committed row is in Kafka, none rolled back, in order per key" "1440|0|0|0" "${verdict%|dups=*}"
echo "# duplicates from re-sends after kills (allowed, deduplicable by event id): ${verdict##*dups=}"
check "event ids are stable: every Kafka copy of a row has the row's event id" 0 \
      "$(python3 - "$KS_RUN/outbox_$SFX.tsv" "$KS_RUN/outbox_rows_$SFX.tsv" <<'PY'
import sys
rows = {l.split('\t')[0] for l in open(sys.argv[2])}
bad = 0
for line in open(sys.argv[1]):
    p, o, k, h, v = line.rstrip('\n').split('\t', 4)
    if v.startswith('{"s"') and dict(x.split('=', 1) for x in h.split(','))['event_id'] not in rows:
        bad += 1
print(bad)
PY
)"

# ---- status shows a failing relay ---------------------------------------------------------------
oldpid="$(sql -c "SELECT relay_pid FROM kafka_sink.outbox_status")"
sql -c "ALTER SYSTEM SET kafka_sink.outbox_bootstrap_servers = '127.0.0.1:1'" -c "SELECT pg_reload_conf()" >/dev/null
poll "SELECT relay_pid IS NOT NULL AND relay_pid <> ${oldpid:-0} FROM kafka_sink.outbox_status" 30 || true
sql -c "SET ROLE ks_e2e" -c "SELECT kafka_sink.outbox_send('$OUT', 'k', 'stuck')" >/dev/null
sleep 3
check "status: pending rows and their age while the broker is unreachable" t \
      "$(sql -c "SELECT pending >= 1 AND oldest_pending_age > interval '1 s' FROM kafka_sink.outbox_status")"
sql -c "ALTER SYSTEM RESET kafka_sink.outbox_bootstrap_servers" -c "SELECT pg_reload_conf()" >/dev/null
poll "SELECT relay_pid IS NULL FROM kafka_sink.outbox_status" 30 || true
check "the relay stops when outbox_bootstrap_servers is reset" t "$(sql -c "SELECT relay_pid IS NULL FROM kafka_sink.outbox_status")"
sql -c "DELETE FROM kafka_sink.outbox WHERE delivered_at IS NULL" >/dev/null
finish
