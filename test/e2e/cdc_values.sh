#!/usr/bin/env bash
# cdc_values (issue 29): the Debezium envelope's values built without their
# text, and routing's walk of the payload alone, against a model and
# against the text path.
#  - Values: Connect's Decimal (big-endian two's-complement bytes, 0 to 13
#    of them: the int64 path up to 8, numeric arithmetic beyond),
#    VariableScaleDecimal, Date, Timestamp, MicroTimestamp, NanoTimestamp
#    into date, timestamp, timestamptz, timestamp(3) and numeric columns,
#    io.debezium.data.Json into jsonb (built from the one-pass tree),
#    with an embedded schema and without one (the column's type decides).
#    Values in years 1-9999 against cdc_values_model (Python, from
#    Connect's and Debezium's definitions); the table's rows and the
#    quarantine equal, offset by offset, those of a second pipeline run
#    with kafka_sink.direct_values off (every value through its text and
#    the input function, as before), out-of-range values (year 0, 10000,
#    days that overflow) included.
#  - Routing: a third pipeline, target 'SCHEMA.{source.table}', batches of
#    4 (from the second batch on, the envelope has the schema cached, and
#    routing walks the payload alone): every event lands in the table the
#    model names (a duplicate "source" key: the last wins; an escaped key;
#    an escaped table name), the union of the routed tables equals the
#    first pipeline's table, and an event whose payload is not JSON is
#    quarantined as by the first pipeline.
. "$(dirname "$0")/../lib/common.sh"
setup_owner
T="cdcv_$SFX"
S="cdcv_r_$SFX"
"$HARNESS" topic-create "$T" 1 >/dev/null 2>&1
cols="id integer PRIMARY KEY, d date, ts timestamp, tsm timestamp, tsn timestamp, tz timestamptz,
      t3 timestamp(3), dec numeric, vsd numeric, j jsonb, _kafka_source_position numeric"
sql >/dev/null <<SQL
SET client_min_messages = warning;
CREATE TABLE e2e.${T}_on ($cols); ALTER TABLE e2e.${T}_on OWNER TO ks_e2e;
CREATE TABLE e2e.${T}_off ($cols); ALTER TABLE e2e.${T}_off OWNER TO ks_e2e;
DROP SCHEMA IF EXISTS $S CASCADE; CREATE SCHEMA $S AUTHORIZATION ks_e2e;
CREATE TABLE $S.cva ($cols); ALTER TABLE $S.cva OWNER TO ks_e2e;
CREATE TABLE $S.cvb ($cols); ALTER TABLE $S.cvb OWNER TO ks_e2e;
SQL
W="$KS_RUN/cdc_values_$SFX"
# what the build before the payload walk quarantined the cut-off event with, when routed
CUT_OFF_RT='no_target: The value is not a JSON object, so the field "source.table" of the target template cannot be read.'
mkdir -p "$W"
python3 - "$W" <<'PY'
import base64, datetime, json, sys
w = sys.argv[1]
EPOCH = datetime.datetime(1970, 1, 1)

def b64(b):
    return base64.b64encode(b).decode()

def twos(n, nbytes=None):
    """n as big-endian two's complement, in the fewest bytes (or nbytes)"""
    if nbytes is None:
        nbytes = 1
        while not (-(1 << (8 * nbytes - 1)) <= n < (1 << (8 * nbytes - 1))):
            nbytes += 1
    return n.to_bytes(nbytes, "big", signed=True)

def dec_text(n, scale):
    """the numeric text of n * 10^-scale, with scale digits after the point"""
    if scale <= 0:
        return str(n)
    s = str(abs(n)).rjust(scale + 1, "0")
    return ("-" if n < 0 else "") + s[:-scale] + "." + s[-scale:]

def ts_text(us):
    return (EPOCH + datetime.timedelta(microseconds=us)).isoformat(sep=" ")

def trunc_div(a, b):
    """C's integer division (toward zero)"""
    q = abs(a) // b
    return q if a >= 0 else -q

def copy_text(t):
    """t as a field of COPY's text format"""
    return t.replace("\\", "\\\\")

def field(name, typ, semantic=None, params=None):
    f = {"type": typ, "optional": True, "field": name}
    if semantic:
        f["name"] = semantic
    if params:
        f["parameters"] = params
    return f

vfields = [field("id", "int32"), field("d", "int32", "io.debezium.time.Date"),
           field("ts", "int64", "io.debezium.time.MicroTimestamp"),
           field("tsm", "int64", "io.debezium.time.Timestamp"),
           field("tsn", "int64", "io.debezium.time.NanoTimestamp"),
           field("tz", "int64", "io.debezium.time.MicroTimestamp"),
           field("t3", "int64", "io.debezium.time.MicroTimestamp"),
           field("dec", "bytes", "org.apache.kafka.connect.data.Decimal", {"scale": "3"}),
           field("j", "string", "io.debezium.data.Json"),
           {"type": "struct", "optional": True, "field": "vsd", "name": "io.debezium.data.VariableScaleDecimal",
            "fields": [{"type": "int32", "optional": False, "field": "scale"},
                       {"type": "bytes", "optional": False, "field": "value"}]}]
schema = {"type": "struct", "name": "cdcv.Envelope", "optional": False, "fields": [
    {"type": "struct", "optional": True, "field": "before", "name": "cdcv.Value", "fields": vfields},
    {"type": "struct", "optional": True, "field": "after", "name": "cdcv.Value", "fields": vfields},
    {"type": "struct", "optional": False, "field": "source", "fields": [
        field("lsn", "int64"), field("table", "string")]},
    field("op", "string")]}
S = json.dumps(schema)

# in range (years 1 to 9999): the model's values
dates = [0, -1, 1, 16411, -719162, 2932896, 10957, -25567]
micros = [0, -1, 1, 1700000000123456, -62135596800000000, 253402300799999999, -123456789, 946684800000001]
millis = [0, -1, 1700000000123, -62135596800000, 253402300799999]
nanos = [0, -1, -1500, 1999, 1700000000123456789, -9000000000000000999, 9000000000000000999]
decs = [(b"", 0), (b"\x00", 0), (b"\x01", 1), (b"\xff", -1), (b"\x7f", 127), (b"\x00\x80", 128),
        (b"\x80", -128), (twos(-129), -129), (twos(5), 5), (twos(-5), -5), (twos(123456), 123456),
        (twos(2**63 - 1), 2**63 - 1), (twos(-2**63), -2**63), (twos(2**63), 2**63),
        (twos(-2**63 - 1), -2**63 - 1), (twos(10**30), 10**30), (twos(-10**30), -10**30),
        (twos(255, 8), 255), (twos(-1, 8), -1), (twos(-1, 9), -1)]
vsds = [(2, 12345), (0, -7), (10, 1), (3, -2**63), (0, 2**70)]
# io.debezium.data.Json into jsonb: duplicates, key order, numbers jsonb
# normalizes, escapes, scalars alone, nesting past the scanner's 64 levels
jsons = ['{"b": 1, "a": [1.50, -0, 1E2, 0.0e0], "a": "dup", "aa": {}}', '{}', '[]', '"str"', '1.50', 'true',
         'null', '{"k": "caf\\u00e9 \\"q\\" \\n \\/", "\\u00e9": 1, "\u00fc": [null, false]}',
         '[' * 70 + ']' * 70, '123456789012345678901234567890.000', '-0', ' { "x" : {"y": {"z": [1, {"w": null}]}}} ',
         '{"x": 1e400, "y": -1.5E-7}', '{"t": "\\ud83d\\ude00", "z": 0}']
n = max(len(dates), len(micros), len(millis), len(nanos), len(decs), len(vsds), len(jsons))

events = []   # (key, value text)
model = []    # id|d|ts|tsm|tsn|tz|t3|dec|vsd|table
route = []    # id table
lsn = [1000]

def emit(i, after, table, wrapped=True, raw=None):
    lsn[0] += 8
    p = {"before": None, "after": after, "source": {"lsn": lsn[0], "table": table}, "op": "c"}
    body = raw(json.dumps(p)) if raw else json.dumps(p)
    v = ('{"schema":%s,"payload":%s}' % (S, body)) if wrapped else body
    events.append((json.dumps({"id": i}), v))

for i in range(n):
    d = dates[i % len(dates)]
    us = micros[i % len(micros)]
    ms = millis[i % len(millis)]
    ns = nanos[i % len(nanos)]
    db, dv = decs[i % len(decs)]
    vs, vv = vsds[i % len(vsds)]
    jv = jsons[i % len(jsons)]
    table = "cva" if i % 2 == 0 else "cvb"
    emit(i + 1, {"id": i + 1, "d": d, "ts": us, "tsm": ms, "tsn": ns, "tz": us, "t3": us,
                 "dec": b64(db), "vsd": {"scale": vs, "value": b64(twos(vv))}, "j": jv}, table)
    model.append("|".join([str(i + 1), (EPOCH + datetime.timedelta(days=d)).date().isoformat(),
                           ts_text(us), ts_text(ms * 1000), ts_text(trunc_div(ns, 1000)),
                           ts_text(us) + "+00", ts_text(us), dec_text(dv, 3), dec_text(vv, vs), copy_text(jv)]))
    route.append("%d %s" % (i + 1, table))

# without an embedded schema: the column's type decides (a timestamp(3) column reads ms)
for i in range(n, n + len(decs)):
    k = i - n
    d = dates[k % len(dates)]
    us = micros[k % len(micros)]
    ms = millis[k % len(millis)]
    db, dv = decs[k]
    jv = jsons[k % len(jsons)]
    emit(i + 1, {"id": i + 1, "d": d, "ts": us, "tsm": us, "tsn": us, "tz": us, "t3": ms,
                 "dec": b64(db), "j": jv}, "cva", wrapped=False)
    model.append("|".join([str(i + 1), (EPOCH + datetime.timedelta(days=d)).date().isoformat(),
                           ts_text(us), ts_text(us), ts_text(us), ts_text(us) + "+00",
                           ts_text(ms * 1000), dec_text(dv, 0), "", copy_text(jv)]))
    route.append("%d cva" % (i + 1))

# routing's edges: a duplicate "source" (the last wins), an escaped key, an escaped table name
base = 200
after = lambda i: {"id": i, "d": 1, "ts": 1, "tsm": 1, "tsn": 1000, "tz": 1, "t3": 1,
                   "dec": b64(b"\x01"), "vsd": {"scale": 0, "value": b64(b"\x01")}}
def model_row(i):
    return "|".join([str(i), "1970-01-02", ts_text(1), ts_text(1000), ts_text(1), ts_text(1) + "+00",
                     ts_text(1), "0.001", "1", ""])
emit(base + 1, after(base + 1), "cvb",
     raw=lambda t: t.replace('"source": {', '"source": {"lsn": 1, "table": "cva"}, "source": {'))
model.append(model_row(base + 1)); route.append("%d cvb" % (base + 1))
emit(base + 2, after(base + 2), "cvb", raw=lambda t: t.replace('"table": "cvb"', '"t\\u0061ble": "cvb"'))
model.append(model_row(base + 2)); route.append("%d cvb" % (base + 2))
emit(base + 3, after(base + 3), "cva", raw=lambda t: t.replace('"table": "cva"', '"table": "c\\u0076a"'))
model.append(model_row(base + 3)); route.append("%d cva" % (base + 3))
# a payload that is not JSON (quarantined): a cut-off one
emit(base + 4, after(base + 4), "cva", raw=lambda t: t[:-3])

# out of range (years 0 and 10000, days and microseconds that overflow): on and off must agree
oor = 300
for j, (d, us) in enumerate([(-719163, 0), (2932897, 0), (10**12, 0), (-2**40, 0), (0, -62135596800000001),
                             (0, 253402300800000000), (0, -62135596800000000 - 86400000000)]):
    i = oor + j
    emit(i, {"id": i, "d": d, "ts": us, "tsm": us // 1000, "tsn": us, "tz": us, "t3": us,
             "dec": b64(b"\x01"), "vsd": None}, "cva")
# JSON that jsonb_in refuses or that the direct build leaves to it: on and off must agree
for j, jv in enumerate(['{"a": }', '"\\u0000"', '{"a": "\\ud800"}', '[' * 1001 + ']' * 1001, '{"x": 1e1000000}',
                        '1' * 1200, '{"a": 1} x']):
    i = oor + 20 + j
    emit(i, {"id": i, "d": 0, "ts": 0, "tsm": 0, "tsn": 0, "tz": 0, "t3": 0, "dec": b64(b"\x01"), "vsd": None,
             "j": jv}, "cva")
# a last plain event
emit(400, after(400), "cva")
model.append(model_row(400)); route.append("400 cva")

with open(w + "/events", "w") as f:
    for k, v in events:
        f.write(k + "|" + v + "\n")
with open(w + "/model", "w") as f:
    f.write("\n".join(model) + "\n")
with open(w + "/route", "w") as f:
    f.write("\n".join(sorted(route, key=lambda s: int(s.split()[0]))) + "\n")
PY
kcat -P -b "$KS_BOOTSTRAP" -t "$T" -K '|' -Z < "$W/events"
nev=$(wc -l < "$W/events")

run_pipeline() {  # NAME TARGET [extra args]
    sql -c "SET ROLE ks_e2e; SELECT kafka_sink.create_pipeline(name => '$1', bootstrap_servers => '$KS_BOOTSTRAP',
            subscribe => ARRAY['$T'], target => '$2', starting_offsets => 'earliest',
            envelope => 'debezium'${3:-})" >/dev/null
    check "$1 caught up" t "$(sql -c "SELECT kafka_sink.wait('$1', '180 s')")"
}
quar() {
    sql -c "SELECT string_agg(q.message_offset || ' ' || q.reason || ': ' || q.detail, E'\n' ORDER BY q.message_offset)
              FROM kafka_sink.quarantine q JOIN kafka_sink.pipelines p ON p.id = q.pipeline_id WHERE p.name = '$1'"
}
rows() { sql -c "SELECT string_agg(t::text, E'\n' ORDER BY id) FROM $1 t"; }
reset_direct() { sql -c "ALTER SYSTEM RESET kafka_sink.direct_values" -c "SELECT pg_reload_conf()" >/dev/null 2>&1; }
at_exit reset_direct

run_pipeline "${T}_on" "e2e.${T}_on"
run_pipeline "${S}_rt" "$S.{source.table}" ", max_offsets_per_batch => 4"
sql -c "ALTER SYSTEM SET kafka_sink.direct_values = off" -c "SELECT pg_reload_conf()" >/dev/null
sleep 1
run_pipeline "${T}_off" "e2e.${T}_off"
sql -c "ALTER SYSTEM RESET kafka_sink.direct_values" -c "SELECT pg_reload_conf()" >/dev/null

# the model: every column compared typed, numerics by their text (the scale too)
sql >/dev/null <<SQL
SET client_min_messages = warning;
DROP TABLE IF EXISTS e2e.${T}_model;
CREATE TABLE e2e.${T}_model (id integer, d text, ts text, tsm text, tsn text, tz text, t3 text, dec text, vsd text, j text);
SQL
sql -c "\\copy e2e.${T}_model FROM '$W/model' WITH (FORMAT text, DELIMITER '|', NULL '')"
nmodel=$(wc -l < "$W/model")
differs() {  # TABLE: the model's rows it does not hold exactly
    sql -c "SELECT string_agg(m.id::text, ' ' ORDER BY m.id) FROM e2e.${T}_model m LEFT JOIN $1 t USING (id)
             WHERE t.id IS NULL OR t.d IS DISTINCT FROM m.d::date OR t.ts IS DISTINCT FROM m.ts::timestamp
                OR t.tsm IS DISTINCT FROM m.tsm::timestamp OR t.tsn IS DISTINCT FROM m.tsn::timestamp
                OR t.tz IS DISTINCT FROM m.tz::timestamptz OR t.t3 IS DISTINCT FROM m.t3::timestamp(3)
                OR t.dec::text IS DISTINCT FROM m.dec OR t.vsd::text IS DISTINCT FROM m.vsd
                OR t.j IS DISTINCT FROM m.j::jsonb OR t.j::text IS DISTINCT FROM m.j::jsonb::text"
}
check "direct values: every in-range row as the model ($nmodel rows)" "" "$(differs "e2e.${T}_on")"
check "direct values off: every in-range row as the model" "" "$(differs "e2e.${T}_off")"
check "direct values on and off: the same rows (out-of-range ones included)" \
      "$(rows "e2e.${T}_off")" "$(rows "e2e.${T}_on")"
qon="$(quar "${T}_on")"
echo "# quarantined:"; echo "$qon" | sed 's/^/#   /'
check "direct values on and off: the same quarantine" "$(quar "${T}_off")" "$qon"
check "the out-of-range rows are there or quarantined (15 events: 7 + 7 JSON + the cut-off one)" 15 \
      "$(sql -c "SELECT (SELECT count(*) FROM e2e.${T}_on WHERE id >= 300 AND id < 400)
                      + (SELECT count(*) FROM kafka_sink.quarantine q JOIN kafka_sink.pipelines p ON p.id = q.pipeline_id
                          WHERE p.name = '${T}_on')")"

# routing
check "routed: each event in the table the model names" "$(cat "$W/route")" \
      "$(sql -c "SELECT string_agg(id || ' ' || tb, E'\n' ORDER BY id) FROM
                 (SELECT id, 'cva' tb FROM $S.cva UNION ALL SELECT id, 'cvb' FROM $S.cvb) x WHERE id < 300 OR id >= 400")"
check "routed: the union of the routed tables is the first pipeline's table" "$(rows "e2e.${T}_on")" \
      "$(sql -c "SELECT string_agg(t::text, E'\n' ORDER BY id) FROM (SELECT * FROM $S.cva UNION ALL SELECT * FROM $S.cvb) t")"
qoff() { sql -c "SELECT string_agg(q.message_offset::text, ' ' ORDER BY q.message_offset) FROM kafka_sink.quarantine q
                  JOIN kafka_sink.pipelines p ON p.id = q.pipeline_id WHERE p.name = '$1'"; }
qrt="$(quar "${S}_rt")"
echo "# quarantined when routed:"; echo "$qrt" | sed 's/^/#   /'
check "routed: the same offsets quarantined as by the first pipeline" "$(qoff "${T}_on")" "$(qoff "${S}_rt")"
check "routed: the cut-off payload quarantined as before the payload walk (routing's words)" \
      "$CUT_OFF_RT" "$(sql -c "SELECT q.reason || ': ' || q.detail FROM kafka_sink.quarantine q JOIN kafka_sink.pipelines p ON p.id = q.pipeline_id
                  WHERE p.name = '${S}_rt' AND q.message_offset = $(( $(grep -n '"id": 204}' "$W/events" | cut -d: -f1) - 1 ))")"
check "all $nev events read by each pipeline" t \
      "$(sql -c "SELECT bool_and(c.next_offset = $nev) FROM kafka_sink.offsets c JOIN kafka_sink.pipelines p ON p.id = c.pipeline_id
                  WHERE p.name IN ('${T}_on', '${T}_off', '${S}_rt')")"
for p in "${T}_on" "${T}_off" "${S}_rt"; do
    sql -c "SELECT kafka_sink.drop_pipeline('$p')" >/dev/null
done
finish
