#!/usr/bin/env bash
# dead_letter: a pipeline's dead_letter_topic gets every quarantined message
# through the outbox relay.
#  - good and bad messages (invalid JSON, a missing required field, an
#    invalid value, a tombstone, bytes invalid in UTF-8 with a key invalid in
#    UTF-8): the dead-letter topic has exactly the quarantined ones, with the
#    original key, value and headers byte for byte, then the headers
#    kafka_sink.pipeline/topic/partition/offset/timestamp/reason/detail/
#    batch_id/quarantine_id, then kafka_sink.hops (one more than the
#    original's) and event_id; one
#    outbox row per quarantine row;
#  - replay_quarantine that fails again publishes nothing new;
#  - a batch that rolls back (fault point before_commit, the worker exits
#    before its commit, again and again) publishes nothing until it commits;
#  - kill -9 of the relay during delivery (3000 rows), repeatedly: every quarantine row
#    is in the dead-letter topic at least once, every copy with the event id
#    of its outbox row (duplicates only with the same event id).
. "$(dirname "$0")/../lib/common.sh"
setup_owner
IN="e2e_dlq_in_$SFX"
DLQ="e2e_dlq_$SFX"
P="dlq_$SFX"
S="dlq_$SFX"
W="$KS_RUN/dead_letter_$SFX"
mkdir -p "$W"
PGLOG_FILE="$KS_RUN/logs/postgresql.log"
"$HARNESS" topic-create "$IN" 2 >/dev/null 2>&1
"$HARNESS" topic-create "$DLQ" 1 >/dev/null 2>&1

cleanup() {
    sql -c "ALTER SYSTEM RESET kafka_sink.fault_point" -c "ALTER SYSTEM RESET kafka_sink.fault_action" \
        -c "ALTER SYSTEM RESET kafka_sink.outbox_bootstrap_servers" -c "SELECT pg_reload_conf()" >/dev/null 2>&1 || true
}
trap cleanup EXIT

sql -c "ALTER SYSTEM SET kafka_sink.outbox_bootstrap_servers = '$KS_BOOTSTRAP'" -c "SELECT pg_reload_conf()" >/dev/null
poll "SELECT relay_pid IS NOT NULL FROM kafka_sink.outbox_status" 30 || true

sql >/dev/null <<SQL
CREATE SCHEMA $S AUTHORIZATION ks_e2e;
SET ROLE ks_e2e;
CREATE TABLE $S.t (id bigint PRIMARY KEY, amount numeric(18,2) NOT NULL, note text);
SELECT kafka_sink.create_pipeline(name => '$P', bootstrap_servers => '$KS_BOOTSTRAP',
       subscribe => ARRAY['$IN'], target => '$S.t', starting_offsets => 'earliest',
       dead_letter_topic => '$DLQ');
SQL
check "the pipelines view shows the dead-letter topic" "$DLQ" \
      "$(sql -c "SELECT dead_letter_topic FROM kafka_sink.pipelines WHERE name = '$P'")"

# every message of a topic, binary-safe: "p o ts keylen valuelen " key value headers, then a marker
dump() {
    kcat -C -b "$KS_BOOTSTRAP" -t "$1" -e -q -f '%p %o %T %K %S %k%s%h\n@@END@@\n' > "$2" 2>/dev/null
}
quarantine_rows() {  # id, partition, offset, reason, detail, batch_id of the pipeline's quarantine
    sql -c "COPY (SELECT q.id, q.partition, q.message_offset, q.reason, q.detail, q.batch_id
                    FROM kafka_sink.quarantine q JOIN kafka_sink.pipeline_definitions p ON p.id = q.pipeline_id
                   WHERE p.name = '$P' ORDER BY q.id) TO STDOUT" > "$W/quarantine.tsv"
    sql -c "COPY (SELECT quarantine_id, event_id, delivered_at IS NOT NULL FROM kafka_sink.outbox
                   WHERE topic = '$DLQ' ORDER BY id) TO STDOUT" > "$W/outbox.tsv"
}
# verify [MODE]: compares the dead-letter topic with the input topic, the
# quarantine and the outbox; prints a summary line (see the checks)
verify() {
    dump "$IN" "$W/in.bin"
    dump "$DLQ" "$W/dlq.bin"
    quarantine_rows
    python3 - "$W" "$P" "$IN" <<'PY'
import re, sys
w, pipeline, src = sys.argv[1:4]
KS = ['kafka_sink.pipeline', 'kafka_sink.topic', 'kafka_sink.partition', 'kafka_sink.offset',
      'kafka_sink.timestamp', 'kafka_sink.reason', 'kafka_sink.detail', 'kafka_sink.batch_id',
      'kafka_sink.quarantine_id']
SPLIT = re.compile(rb',(?=(?:src|trace|event_id|kafka_sink\.[a-z_]+)=)')

def parse(path):
    data = open(path, 'rb').read()
    pos, out = 0, []
    while pos < len(data):
        f = []
        for _ in range(5):
            sp = data.index(b' ', pos)
            f.append(int(data[pos:sp]))
            pos = sp + 1
        p, o, ts, kl, vl = f
        key = None if kl < 0 else data[pos:pos + kl]
        pos += max(kl, 0)
        val = None if vl < 0 else data[pos:pos + vl]
        pos += max(vl, 0)
        end = data.index(b'\n@@END@@\n', pos)
        raw = data[pos:end]
        pos = end + 9
        hdrs = [tuple(h.split(b'=', 1)) for h in SPLIT.split(raw)] if raw else []
        out.append((p, o, ts, key, val, hdrs))
    return out

src_msgs = {(m[0], m[1]): m for m in parse(w + '/in.bin')}
dlq = parse(w + '/dlq.bin')
def unescape(s):  # COPY's text format
    return re.sub(r'\\(.)', lambda m: {'n': '\n', 't': '\t', 'r': '\r', 'b': '\b', 'f': '\f', 'v': '\v'}
                  .get(m.group(1), m.group(1)), s)

quar = {}
for line in open(w + '/quarantine.tsv', encoding='utf-8', errors='replace'):
    qid, p, o, reason, detail, batch = line.rstrip('\n').split('\t')
    detail = unescape(detail)
    quar[int(qid)] = (int(p), int(o), reason, detail, batch)
outbox = {}
rows_per_q = {}
for line in open(w + '/outbox.tsv'):
    qid, eid, _ = line.rstrip('\n').split('\t')
    outbox[int(qid)] = eid
    rows_per_q[int(qid)] = rows_per_q.get(int(qid), 0) + 1

bad = []
seen = {}
for p, o, ts, key, val, hdrs in dlq:
    h = dict((k.decode(), v) for k, v in hdrs)
    names = [k.decode() for k, _ in hdrs]
    try:
        qid = int(h['kafka_sink.quarantine_id'])
        sp, so = int(h['kafka_sink.partition']), int(h['kafka_sink.offset'])
    except (KeyError, ValueError):
        bad.append(('no kafka_sink headers', p, o))
        continue
    orig = src_msgs.get((sp, so))
    q = quar.get(qid)
    if orig is None or q is None:
        bad.append(('no such message or quarantine row', qid, sp, so))
        continue
    seen.setdefault(qid, set()).add(h.get('event_id', b'').decode())
    if (q[0], q[1]) != (sp, so):
        bad.append(('quarantine row of another message', qid))
    if key != orig[3] or val != orig[4]:
        bad.append(('key or value differ', qid, key, orig[3], val, orig[4]))
    # kafka_sink's own headers of the original are not copied
    kept = [x for x in orig[5] if not x[0].startswith(b'kafka_sink.')]
    hops = max([int(v) for k, v in orig[5] if k == b'kafka_sink.hops'] or [0])
    if names != [k.decode() for k, _ in kept] + KS + ['kafka_sink.hops', 'event_id'] or hdrs[:len(kept)] != kept:
        bad.append(('headers', qid, names))
    if h.get('kafka_sink.hops') != str(hops + 1).encode():
        bad.append(('hop count', qid, h.get('kafka_sink.hops'), hops + 1))
    expect = {'kafka_sink.pipeline': pipeline, 'kafka_sink.topic': src, 'kafka_sink.timestamp': str(orig[2]),
              'kafka_sink.reason': q[2], 'kafka_sink.detail': q[3], 'kafka_sink.batch_id': q[4]}
    for k, v in expect.items():
        if h.get(k, b'').decode('utf-8', 'replace') != v:
            bad.append(('header value', qid, k, h.get(k), v))
missing = [q for q in quar if q not in seen]
unstable = [q for q, eids in seen.items() if eids != {outbox.get(q)}]
not_once = [q for q in quar if rows_per_q.get(q) != 1]
dups = len(dlq) - len(seen)
reasons = ','.join(sorted({q[2] for q in quar.values()}))
print(f"quarantined={len(quar)} missing={len(missing)} bad={len(bad)} unstable={len(unstable)} "
      f"outbox_rows_not_one={len(not_once)} dups={dups} reasons={reasons}")
for b in bad[:5]:
    print('#', b, file=sys.stderr)
PY
}

# ---- good and bad messages ---------------------------------------------------------------
printf '%s\n' 'k1|{"id":1,"amount":"10"}' 'k3|{"id":3}' 'k6|{"id":6,"amount":"abc"}' \
    | produce "$IN" -p 0
printf '{"id":2,' > "$W/invalid.json"
kcat -P -b "$KS_BOOTSTRAP" -t "$IN" -p 0 -k k2 -H src=e2e -H trace=t-2 "$W/invalid.json"
# Avro-like bytes: the Confluent wire format's zero byte and schema id, bytes
# invalid in UTF-8, a newline; the key is invalid in UTF-8 too
printf '\x00\x00\x00\x00\x01\xff\xfe\n\x02' > "$W/avro.bin"
kcat -P -b "$KS_BOOTSTRAP" -t "$IN" -p 1 -k $'k\xc3\x28' -H src=e2e "$W/avro.bin"
printf '%s\n' 'k4|{"id":4,"amount":"5"}' | produce "$IN" -p 1
sql -c "SELECT count(*) FROM kafka_sink.produce('$KS_BOOTSTRAP', '$IN', 'k5', NULL, partition => 1)" >/dev/null
check "the pipeline catches up" t "$(sql -c "SELECT kafka_sink.wait('$P', '60 s')")"
check "good rows applied" "1:10.00 4:5.00" "$(sql -c "SELECT string_agg(id || ':' || amount, ' ' ORDER BY id) FROM $S.t")"
poll "SELECT pending = 0 FROM kafka_sink.outbox_status" 60 || true
sleep 0.5
check "the dead-letter topic has exactly the quarantined messages, byte for byte, with their headers" \
      "quarantined=5 missing=0 bad=0 unstable=0 outbox_rows_not_one=0 dups=0 reasons=invalid_json,invalid_value,missing_required_field,not_an_object" \
      "$(verify)"
check "the outbox rows were written as the pipeline's owner" "ks_e2e" \
      "$(sql -c "SELECT string_agg(DISTINCT created_by, ',') FROM kafka_sink.outbox WHERE topic = '$DLQ'")"

# a replay that fails again does not dead-letter the messages a second time
check "replay: all still failing" "0|5" \
      "$(sql -c "SET ROLE ks_e2e" -c "SELECT replayed || '|' || still_failing FROM kafka_sink.replay_quarantine('$P')")"
check "replay queues no dead-letter message" 5 \
      "$(sql -c "SELECT count(*) FROM kafka_sink.outbox WHERE topic = '$DLQ'")"

# ---- a batch that rolls back publishes nothing -------------------------------------------------
log_off=$(( $(stat -c %s "$PGLOG_FILE") + 1 ))
sql -c "ALTER SYSTEM SET kafka_sink.fault_point = 'before_commit'" -c "ALTER SYSTEM SET kafka_sink.fault_action = 'fatal'" \
    -c "SELECT pg_reload_conf()" >/dev/null
sleep 1
printf '%s\n' 'r1|{"id":11,' 'r2|{"id":12}' 'r3|[1,2]' 'r4|{"id":14,"amount":"1"}' \
    | produce "$IN" -p 0
faults=0
for _ in $(seq 1 150); do
    faults="$(tail -c +"$log_off" "$PGLOG_FILE" | grep -c 'kafka_sink fault injected' || true)"
    [ "$faults" -ge 2 ] && break
    sleep 0.2
done
check "the worker failed before its commit, twice or more" yes "$([ "$faults" -ge 2 ] && echo yes || echo "no ($faults)")"
sleep 1
check "rolled back: no quarantine row, no outbox row" "5|5" \
      "$(sql -c "SELECT (SELECT count(*) FROM kafka_sink.quarantine q JOIN kafka_sink.pipeline_definitions p
                           ON p.id = q.pipeline_id WHERE p.name = '$P') || '|' ||
                        (SELECT count(*) FROM kafka_sink.outbox WHERE topic = '$DLQ')")"
dump "$DLQ" "$W/dlq.bin"
check "rolled back: nothing new in the dead-letter topic" 5 "$(grep -c '@@END@@' "$W/dlq.bin" || true)"
sql -c "ALTER SYSTEM RESET kafka_sink.fault_point" -c "ALTER SYSTEM RESET kafka_sink.fault_action" \
    -c "SELECT pg_reload_conf()" >/dev/null
check "after the fault the pipeline catches up" t "$(sql -c "SELECT kafka_sink.wait('$P', '120 s')")"
poll "SELECT pending = 0 FROM kafka_sink.outbox_status" 60 || true
sleep 0.5
check "once committed, the batch's quarantined messages are dead-lettered once each" \
      "quarantined=8 missing=0 bad=0 unstable=0 outbox_rows_not_one=0 dups=0 reasons=invalid_json,invalid_value,missing_required_field,not_an_object" \
      "$(verify)"

# ---- kill -9 of the relay during delivery -----------------------------------------------------
# The relay points at no broker while 3000 bad messages (and 1000 good
# ones) are quarantined; then it gets the real broker (it publishes at most
# 1000 rows a round) and is killed (the postmaster then restarts the
# cluster): once at random, then in turn while it is held in a round's send
# (the broker paused with SIGSTOP) and right after it marked a round
# delivered, while it sends the next one.
sql -c "ALTER SYSTEM SET kafka_sink.outbox_bootstrap_servers = '127.0.0.1:1'" -c "SELECT pg_reload_conf()" >/dev/null
python3 - > "$W/many.txt" <<'PY'
for i in range(1000, 5000):
    k = f"m{i}"
    if i % 4 == 0:
        print(f'{k}|{{"id":{i},"amount":"{i}"}}')
    elif i % 4 == 1:
        print(f'{k}|{{"id":{i},')
    elif i % 4 == 2:
        print(f'{k}|{{"id":{i}}}')
    else:
        print(f'{k}|{{"id":{i},"amount":"x{i}"}}')
PY
produce "$IN" < "$W/many.txt"
check "the pipeline quarantines the 3000 bad messages" t "$(sql -c "SELECT kafka_sink.wait('$P', '180 s')")"
check "their dead-letter rows wait in the outbox" 3000 \
      "$(sql -c "SELECT count(*) FROM kafka_sink.outbox WHERE topic = '$DLQ' AND delivered_at IS NULL")"
delivered() { sql -c "SELECT count(*) FROM kafka_sink.outbox WHERE topic = '$DLQ' AND delivered_at IS NOT NULL" 2>/dev/null || echo -1; }
sql -c "ALTER SYSTEM SET kafka_sink.outbox_bootstrap_servers = '$KS_BOOTSTRAP'" -c "SELECT pg_reload_conf()" >/dev/null
kills=0
midway=0
# a failure while the broker is paused must not leave it paused
resume_broker() { "$HARNESS" kafka-resume >/dev/null 2>&1 || true; }
at_exit resume_broker
# four kills, and more (up to eight) until two of them came while rows were
# left to deliver: under load a round can finish before the next kill lands
for k in 1 2 3 4 5 6 7 8; do
    if [ "$kills" -ge 4 ] && [ "$midway" -ge 2 ]; then break; fi
    if [ "$k" -gt 4 ] && [ "$(sql -c "SELECT pending FROM kafka_sink.outbox_status" 2>/dev/null || echo 0)" = 0 ]; then break; fi
    poll "SELECT relay_pid IS NOT NULL FROM kafka_sink.outbox_status" 30 || true
    pid="$(sql -c "SELECT relay_pid FROM kafka_sink.outbox_status" 2>/dev/null || true)"
    if [ "$k" = 1 ]; then
        sleep 0.$((RANDOM % 3))$((RANDOM % 10))
    elif [ $((k % 2)) = 0 ]; then
        # the broker is paused (below): the relay, back after the restart,
        # is held in its round's send when it is killed
        sleep 0.$((3 + RANDOM % 6))
    else
        # the broker was paused over the restart (below), so the relay has
        # sent nothing yet: let it mark one round, then pause the broker
        # again and kill it right after (a fast relay may have sent every
        # round by then: the even kills are the ones held mid-send)
        before="$(delivered)"
        "$HARNESS" kafka-resume >/dev/null
        for _ in $(seq 1 300); do
            d="$(delivered)"
            [ "$d" -gt "$before" ] && break
            sleep 0.05
        done
        "$HARNESS" kafka-pause >/dev/null
    fi
    d="$(delivered)"
    if [ -n "$pid" ] && kill -9 "$pid" 2>/dev/null; then
        kills=$((kills + 1))
        if [ "$d" -gt 0 ] && [ "$d" -lt 3008 ]; then midway=$((midway + 1)); fi
        echo "# kill $kills of the relay: $d of 3008 dead-letter rows delivered"
    fi
    "$HARNESS" kafka-pause >/dev/null
    sleep 1
    until sql -c "SELECT 1" >/dev/null 2>&1; do sleep 0.5; done
done
"$HARNESS" kafka-resume >/dev/null
check "the relay was killed at least four times" yes "$([ "$kills" -ge 4 ] && echo yes || echo "no ($kills)")"
check "at least two of the kills came while rows were left to deliver" yes \
      "$([ "$midway" -ge 2 ] && echo yes || echo "no ($midway)")"
poll "SELECT pending = 0 FROM kafka_sink.outbox_status" 180 || true
check "after the kills every dead-letter row is delivered" 0 "$(sql -c "SELECT pending FROM kafka_sink.outbox_status")"
sleep 1
v="$(verify)"
check "every quarantine row is in the dead-letter topic, every copy with its row's event id" \
      "quarantined=3008 missing=0 bad=0 unstable=0 outbox_rows_not_one=0" "${v%% dups=*}"
echo "# duplicates from re-sends after kills (allowed, deduplicable by event id): $(sed 's/.*dups=\([0-9]*\).*/\1/' <<< "$v")"

sql -c "SET ROLE ks_e2e" -c "SELECT kafka_sink.drop_pipeline('$P')" >/dev/null
cleanup
poll "SELECT relay_pid IS NULL FROM kafka_sink.outbox_status" 30 || true
finish
