#!/usr/bin/env bash
# cdc_parse (issue 17): the Debezium envelope's fast path against its full
# parse.  An event {"schema": S, "payload": P} whose S is a schema text seen
# before is not parsed again: only P is (envelope_debezium.c, parse_fast).
# Every event here is produced twice: to topic A as {"schema": S,
# "payload": P} (after the first event of each schema: the fast path), to
# topic B as {"payload": P, "schema": S} (the same JSON, never the fast
# path: the full parse).  P is hand-made to hit the edges (numbers that
# jsonb normalizes, duplicate keys, escapes, bad base64 in a scalar and in
# a composite, invalid JSON and UTF-8 inside P, \u0000, a P not an object,
# whitespace around the glue, an extra top-level key).  Both pipelines must
# write the same rows and quarantine the same offsets with the same reason
# and detail.
. "$(dirname "$0")/../lib/common.sh"
setup_owner
FIX="$(cd "$(dirname "$0")/../fixtures/debezium/json_schema" && pwd)"
A="cdcpa_$SFX"
B="cdcpb_$SFX"
for t in "$A" "$B"; do
    "$HARNESS" topic-create "$t" 1 >/dev/null 2>&1
    sql >/dev/null <<SQL
CREATE TABLE e2e.$t (id integer PRIMARY KEY, name text NOT NULL, balance numeric(12,2), rate numeric,
    opened date, updated_at timestamptz, active boolean, meta jsonb, _kafka_source_position numeric);
ALTER TABLE e2e.$t OWNER TO ks_e2e;
SQL
done

# gen ORDER: the events "key|value" (value bytes as they are), schema first (ab) or last (ba)
gen() {
    python3 - "$FIX" "$1" <<'PY'
import json, sys
fix, order = sys.argv[1], sys.argv[2]
out = sys.stdout.buffer
acc = {op: json.load(open("%s/accounts.%s.json" % (fix, op))) for op in ("c", "u", "r", "d")}
S = json.dumps(acc["u"]["value"]["schema"]).encode()
n = [0]

def emit(p, key=True, glue=None, extra=b""):
    """p: the payload's bytes; the key {"id": n} bare"""
    n[0] += 1
    if glue is None:
        v = (b'{"schema":' + S + b',"payload":' + p + extra + b'}') if order == "ab" else \
            (b'{"payload":' + p + b',"schema":' + S + extra + b'}')
    else:
        v = glue(S, p)
    out.write((json.dumps({"id": n[0]}).encode() if key else b"") + b"|" + v + b"\n")

def ev(op="u", **after):
    e = json.loads(json.dumps(acc[op]["value"]["payload"]))
    i = n[0] + 1
    if e.get("after"):
        e["after"]["id"] = i
        e["after"].update(after)
    if e.get("before"):
        e["before"]["id"] = i
    e["source"]["lsn"] = 1000 + i
    return e

def dumps(e):
    return json.dumps(e).encode()

for op in ("c", "r", "u", "c", "u"):
    emit(dumps(ev(op)))
# numbers jsonb normalizes: 1.6411e4 is the date 16411, 1.0e3 an lsn of 1000
emit(dumps(ev()).replace(b'"opened": 16411', b'"opened": 1.6411e4'))
e = ev(); e["source"]["lsn"] = "LSN"
emit(dumps(e).replace(b'"lsn": "LSN"', b'"lsn": 2.0e3'))
emit(dumps(ev()).replace(b'"opened": 16411', b'"opened": -0'))
# a duplicate key: the last wins
emit(dumps(ev(name="first")).replace(b'"name": "first"', b'"name": "first", "name": "last"'))
# escapes
emit(dumps(ev(name="caf\u00e9 \"q\" \\ \t", meta=json.dumps({"k": "\u043a\u043b\u044e\u0447"}))))
# bad base64: a scalar decimal, a variable scale decimal (its composite text in the detail)
emit(dumps(ev(balance="***")))
emit(dumps(ev(rate={"value": "***", "scale": 2})))
emit(dumps(ev(rate={"scale": 1.0e0, "value": "AQ=="})))
# a composite where a scalar goes
emit(dumps(ev(name={"b": 1, "a": [1.50, -0, 1E2]})))
# invalid JSON, invalid UTF-8, \u0000, inside P
emit(dumps(ev()).replace(b'"op": "u"', b'"op": u'))
emit(dumps(ev()).replace(b'"op": "u"', b'"op": "u\xff"'))
emit(dumps(ev()).replace(b'"op": "u"', b'"op": "u\\u0000"'))
# issue 29, the one-pass tree: a cut-off P, nesting past the scanner's 64
# levels (valid: the parser builds it) and past 1000 (refused), bad escapes,
# an escaped key (the scanner leaves it to the parser), huge numbers
emit(dumps(ev())[:-7])
emit(dumps(ev()).replace(b'"op": "u"', b'"op": "u", "deep": ' + b'[' * 70 + b']' * 70))
emit(dumps(ev()).replace(b'"op": "u"', b'"op": "u", "deep": ' + b'[' * 1001 + b']' * 1001))
emit(dumps(ev()).replace(b'"op": "u"', b'"op": "u", "x": "\\x"'))
emit(dumps(ev()).replace(b'"op": "u"', b'"op": "u", "x": "\\ud800"'))
emit(dumps(ev()).replace(b'"op": "u"', b'"op": "u", "x": "\\ud83d\\u0041"'))
emit(dumps(ev(name="plain")).replace(b'"name": "plain"', b'"n\\u0061me": "escaped"'))
e = ev(); e["source"]["lsn"] = "LSN"
emit(dumps(e).replace(b'"lsn": "LSN"', b'"lsn": 1e400'))
emit(dumps(ev()).replace(b'"opened": 16411', b'"opened": 123456789012345678901234567890'))
emit(dumps(ev()).replace(b'"opened": 16411', b'"opened": 16411.0'))
# P not an object; no op; an unknown op
emit(b'[1, 2]')
e = ev(); del e["op"]; emit(dumps(e))
emit(dumps(ev()).replace(b'"op": "u"', b'"op": "x"'))
# whitespace around the glue, an extra top-level key
emit(dumps(ev()), glue=lambda s, p: (b' { "schema" :\t' + s + b' ,\r "payload" : ' + p + b' } ') if order == "ab" else
     (b' { "payload" : ' + p + b' ,\r "schema" :\t' + s + b' } '))
emit(dumps(ev()), extra=b',"x":1')
# a delete (the key's schema: none, bare key) and a last plain update
emit(dumps(ev("d")))
emit(dumps(ev()))
PY
}
gen ab | kcat -P -b "$KS_BOOTSTRAP" -t "$A" -K '|' -Z
gen ba | kcat -P -b "$KS_BOOTSTRAP" -t "$B" -K '|' -Z
for t in "$A" "$B"; do
    sql -c "SET ROLE ks_e2e; SELECT kafka_sink.create_pipeline(name => '$t', bootstrap_servers => '$KS_BOOTSTRAP',
            subscribe => ARRAY['$t'], target => 'e2e.$t', starting_offsets => 'earliest',
            envelope => 'debezium')" >/dev/null
done
for t in "$A" "$B"; do
    check "$t caught up" t "$(sql -c "SELECT kafka_sink.wait('$t', '120 s')")"
done
rows() { sql -c "SELECT string_agg(t::text, E'\n' ORDER BY id) FROM e2e.$1 t"; }
quar() {
    sql -c "SELECT string_agg(q.message_offset || ' ' || q.reason || ': ' || q.detail, E'\n' ORDER BY q.message_offset)
              FROM kafka_sink.quarantine q JOIN kafka_sink.pipelines p ON p.id = q.pipeline_id WHERE p.name = '$1'"
}
ra="$(rows "$A")"; rb="$(rows "$B")"
qa="$(quar "$A")"; qb="$(quar "$B")"
echo "# rows:"; echo "$ra" | sed 's/^/#   /'
echo "# quarantined:"; echo "$qa" | sed 's/^/#   /'
check "the same rows, fast path or not" "$rb" "$ra"
check "the same quarantine, fast path or not" "$qb" "$qa"
check "the numbers as jsonb read them (1.6411e4 a date, 2.0e3 a position, -0 a date)" \
      "2014-12-07 2000 1970-01-01" \
      "$(sql -c "SELECT (SELECT opened FROM e2e.$A WHERE id = 6) || ' ' || (SELECT _kafka_source_position FROM e2e.$A WHERE id = 7) || ' ' || (SELECT opened FROM e2e.$A WHERE id = 8)")"
check "a duplicate key: the last wins" last "$(sql -c "SELECT name FROM e2e.$A WHERE id = 9")"
# the malformed payloads of issue 29 (offsets 17-26): the reasons the parse before the one-pass tree gave
check "cut off, deeper than 1000, bad escapes, huge numbers: quarantined as before" \
      "17:invalid_json,19:invalid_json,20:invalid_json,21:invalid_json,22:invalid_json,25:invalid_value,26:invalid_value" \
      "$(sql -c "SELECT string_agg(q.message_offset || ':' || q.reason, ',' ORDER BY q.message_offset) FROM kafka_sink.quarantine q
                  JOIN kafka_sink.pipelines p ON p.id = q.pipeline_id WHERE p.name = '$A' AND q.message_offset BETWEEN 17 AND 26")"
check "70 levels deep (the parser builds it), an escaped key, a position of 1e400: applied" "19 escaped true" \
      "$(sql -c "SELECT (SELECT id FROM e2e.$A WHERE id = 19) || ' ' || (SELECT name FROM e2e.$A WHERE id = 24) || ' ' ||
                        (SELECT (_kafka_source_position = 1e400)::text FROM e2e.$A WHERE id = 25)")"
check "the bad ones quarantined (at least 8)" t "$(sql -c "SELECT count(*) >= 8 FROM kafka_sink.quarantine q JOIN kafka_sink.pipelines p ON p.id = q.pipeline_id WHERE p.name = '$A'")"
for t in "$A" "$B"; do
    sql -c "SELECT kafka_sink.drop_pipeline('$t')" >/dev/null
done
finish
