#!/usr/bin/env python3
"""Messages with headers for test/e2e/headers.sh, and the model of what they
must become, computed here from the messages alone.

  headers_produce.py produce ROUND BOOTSTRAP TOPIC
      round 1 and 2: confluent-kafka's Producer (binary headers, a header
      without value, repeated headers, explicit timestamps); round 3: kcat
      with -H, one call per message
  headers_produce.py avro BOOTSTRAP TOPIC
      two plain Avro values with headers; prints their schema
  headers_produce.py rows          the rows the target must hold at the end
                                   (after the fix and the replay), one line each
  headers_produce.py quarantine    offset:reason of each quarantined message
                                   before the replay
The line format of rows is the SQL of headers.sh: the columns joined by
'|', NULL as '~', bytea as hex.
"""
import json
import subprocess
import sys

T0 = 1700000000123
U1 = "0b1f1d3e-8c27-4b8a-9a55-c7e3a0d7f001"
U2 = "0b1f1d3e-8c27-4b8a-9a55-c7e3a0d7f002"

# (round, key, value, headers [(name, bytes or None)], timestamp ms or None)
MSGS = [
    (1, b"k0", {"id": 1, "qty": 10, "headers": {"x": "vx0"}},
     [("tenant", b"a"), ("v", b"1"), ("event_id", b"e0"), ("trace", U1.encode()),
      ("bin", b"\x00\xff\x01"), ("amount", b"12.5"), ("note", b"hello")], T0),
    # the same event id: a producer retry, dropped
    (1, b"k1", {"id": 1, "qty": 999}, [("tenant", b"a"), ("v", b"1"), ("event_id", b"e0")], T0 + 1),
    # tenant sent twice: the last one; schema version 2 maps qty from quantity
    (1, b"k2", {"id": 1, "quantity": 7},
     [("tenant", b"x"), ("v", b"2"), ("tenant", b"b"), ("event_id", b"e2")], T0 + 2),
    # no tenant header: the key column is absent
    (1, b"k3", {"id": 2, "qty": 5}, [("v", b"1"), ("event_id", b"e3")], T0 + 3),
    # a note that is not UTF-8 text: invalid_value until note is bytea
    (1, b"k4", {"id": 3, "qty": 6},
     [("tenant", b"a"), ("v", b"1"), ("event_id", b"e4"), ("note", b"\xff\xfe")], T0 + 4),
    # round 2: absent headers keep the row's values
    (2, b"k5", {"id": 1, "qty": 11}, [("tenant", b"a"), ("v", b"1"), ("event_id", b"e5")], T0 + 5),
    # no key; a header without value is a JSON null
    (2, None, {"id": 4, "qty": 1}, [("tenant", b"c"), ("v", b"1"), ("event_id", b"e6"), ("trace", None)], T0 + 6),
    (2, b"k7", {"id": 5, "qty": 2}, [("tenant", b"c"), ("v", b"3"), ("event_id", b"e7")], T0 + 7),
    (2, b"k8", {"id": 6, "qty": 3}, [("tenant", b"c"), ("v", b"1"), ("event_id", b"e8"), ("amount", b"abc")], T0 + 8),
    (2, b"k9", {"id": 7, "qty": 4}, [("tenant", b"c"), ("v", b"1"), ("event_id", b"e9"), ("trace", U2.encode())], T0 + 9),
    # round 3, kcat -H: a repeated header, UTF-8 text, an event id sent twice
    (3, b"kc10", {"id": 8, "qty": 9},
     [("tenant", b"z"), ("tenant", b"d"), ("v", b"1"), ("event_id", b"e10"), ("note", "été".encode())], None),
    (3, b"kc11", {"id": 8, "qty": 100}, [("tenant", b"d"), ("v", b"1"), ("event_id", b"e10")], None),
    (3, b"kc12", {"id": 9, "qty": 1, "headers": {"x": "vx9"}},
     [("tenant", b"d"), ("v", b"1"), ("event_id", b"e12")], None),
]
VERSIONS = {"1": {"qty": "qty"}, "2": {"qty": "quantity"}}
HEADER_COLS = {"tenant": "tenant", "trace": "trace", "raw": "bin", "amount": "amount", "note": "note"}
COLS = ["tenant", "id", "qty", "trace", "raw", "amount", "note", "hv",
        "src_topic", "src_part", "src_off", "src_ts", "k", "ktext"]


def last(headers, name):
    """(found, value): the last header of that name."""
    found, val = False, None
    for n, v in headers:
        if n == name:
            found, val = True, v
    return found, val


def model(topic, fixed):
    """rows by key and the quarantine, applying the messages in offset order.
    fixed: note is bytea (after the fix), and the replay ran."""
    rows, quarantine, seen, pending = {}, {}, set(), []
    for off, (rnd, key, value, headers, ts) in enumerate(MSGS):
        found, v = last(headers, "v")
        if not found or v is None or v.decode() not in VERSIONS:
            quarantine[off] = "unknown_schema_version"
            continue
        found, tenant = last(headers, "tenant")
        if not found or tenant is None:
            quarantine[off] = "null_key"
            continue
        new = {"tenant": tenant.decode(), "id": str(value["id"])}
        qf = VERSIONS[v.decode()]["qty"]
        if qf in value:
            new["qty"] = str(value[qf])
        bad = None
        for col, h in HEADER_COLS.items():
            if col == "tenant":
                continue
            found, hv = last(headers, h)
            if not found:
                continue
            if hv is None:
                new[col] = None
            elif col == "raw":
                new[col] = hv.hex()
            elif col == "amount":
                try:
                    new[col] = "%.2f" % float(hv.decode())
                except ValueError:
                    bad = "invalid_value"
            elif col == "note":
                try:
                    hv.decode("utf-8")
                    new[col] = hv.hex()     # compared as bytes (text before the fix)
                except UnicodeDecodeError:
                    bad = "invalid_value"
                    if fixed:
                        new[col] = hv.hex()
                        bad = "replayed"
            else:
                new[col] = hv.decode()
        if "headers" in value:
            new["hv"] = value["headers"]["x"]
        new.update({"src_topic": topic, "src_part": "0", "src_off": str(off),
                    "src_ts": str(ts) if ts is not None else "recent",
                    "k": key.hex() if key is not None else None,
                    "ktext": key.decode() if key is not None else None})
        eid = last(headers, "event_id")[1]
        if bad == "invalid_value":
            quarantine[off] = bad
            continue
        if bad == "replayed":
            # quarantined first, applied by the replay after everything else
            quarantine[off] = "invalid_value"
            pending.append((eid, new))
            continue
        if eid in seen:
            continue
        seen.add(eid)
        k = (new["tenant"], new["id"])
        rows.setdefault(k, {}).update(new)
    for eid, new in pending:
        seen.add(eid)
        rows.setdefault((new["tenant"], new["id"]), {}).update(new)
    return rows, quarantine


def produce(rnd, bootstrap, topic):
    msgs = [m for m in MSGS if m[0] == rnd]
    if rnd < 3:
        from confluent_kafka import Producer
        p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": False,
                      "max.in.flight.requests.per.connection": 1, "linger.ms": 0})
        for _, key, value, headers, ts in msgs:
            p.produce(topic, value=json.dumps(value).encode(), key=key, headers=headers, timestamp=ts)
            p.flush(10)
        return
    for _, key, value, headers, _ in msgs:
        args = ["kcat", "-P", "-b", bootstrap, "-t", topic, "-K", "|"]
        for n, v in headers:
            args += ["-H", n.encode() + b"=" + v]
        subprocess.run(args, input=key + b"|" + json.dumps(value).encode() + b"\n", check=True)


AVRO_SCHEMA = {"type": "record", "name": "Row", "fields": [
    {"name": "id", "type": "int"}, {"name": "qty", "type": "int"}]}


def produce_avro(bootstrap, topic):
    """Plain Avro binary values (the pipeline's value_schema) with headers."""
    import io
    import fastavro
    from confluent_kafka import Producer
    schema = fastavro.parse_schema(AVRO_SCHEMA)
    p = Producer({"bootstrap.servers": bootstrap})
    for i, tenant in ((1, b"a"), (2, b"b")):
        buf = io.BytesIO()
        fastavro.schemaless_writer(buf, schema, {"id": i, "qty": 10 * i})
        p.produce(topic, value=buf.getvalue(), headers=[("tenant", tenant), ("trace", U1.encode())])
    p.flush(10)


def main():
    cmd = sys.argv[1]
    if cmd == "avro":
        produce_avro(sys.argv[2], sys.argv[3])
        print(json.dumps(AVRO_SCHEMA))
    elif cmd == "produce":
        produce(int(sys.argv[2]), sys.argv[3], sys.argv[4])
    elif cmd == "rows":
        rows, _ = model(sys.argv[2], True)
        for k in sorted(rows):
            r = rows[k]
            print("|".join("~" if r.get(c) is None else r[c] for c in COLS))
    elif cmd == "quarantine":
        _, q = model(sys.argv[2], False)
        print(",".join("%d:%s" % (o, q[o]) for o in sorted(q)))


main()
