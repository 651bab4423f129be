#!/usr/bin/env python3
"""avro_events.py -- the benchmark's order events again, as Avro.

  avro_events.py BOOTSTRAP TOPIC REGISTRY_URL EVENTS_TSV

Registers the schema below under TOPIC-value in the registry (the test
registry, test/tools/schema_registry.py), then produces every line
"order_id<TAB>json" of EVENTS_TSV (test/bench/gen_events.py) in order as
one message keyed by the order id, whose value is the same event as Avro
in Confluent's wire format: order_id long, event_ts timestamp-millis,
amount decimal(18,2), schema_version int.  Prints "SCHEMA_ID BYTES" (the
id and the mean value size).
"""
import datetime
import json
import struct
import sys
import urllib.request

from confluent_kafka import Producer

SCHEMA = {"type": "record", "name": "BenchOrder", "namespace": "ks.bench", "fields": [
    {"name": "order_id", "type": "long"},
    {"name": "event_ts", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {"name": "amount", "type": {"type": "bytes", "logicalType": "decimal", "precision": 18, "scale": 2}},
    {"name": "schema_version", "type": "int"}]}
EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)


def zigzag(v):
    u = (v << 1) ^ (v >> 63)
    out = bytearray()
    while u >= 0x80:
        out.append((u & 0x7f) | 0x80)
        u >>= 7
    out.append(u)
    return bytes(out)


def register(registry, topic, body):
    """Registers body (the registry's JSON) under TOPIC-value: its id."""
    req = urllib.request.Request(registry.rstrip("/") + "/subjects/%s-value/versions" % topic,
                                 data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/vnd.schemaregistry.v1+json"})
    return json.load(urllib.request.urlopen(req))["id"]


def produce_all(bootstrap, topic, events, header, encode):
    """Every event of EVENTS_TSV as header + encode(event, epoch seconds,
    milliseconds), keyed by its order id, in order: the mean value size."""
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.num.messages": 10000,
                  "queue.buffering.max.messages": 1000000, "enable.idempotence": True})
    day_cache = {}
    total = n = 0
    with open(events) as f:
        for line in f:
            key, value = line.rstrip("\n").split("\t", 1)
            e = json.loads(value)
            ts = e["event_ts"]                       # "YYYY-MM-DD HH:MM:SS.mmm+00"
            sec = day_cache.get(ts[:19])
            if sec is None:
                sec = int((datetime.datetime.strptime(ts[:19], "%Y-%m-%d %H:%M:%S")
                           .replace(tzinfo=datetime.timezone.utc) - EPOCH).total_seconds())
                if len(day_cache) > 100000:
                    day_cache.clear()
                day_cache[ts[:19]] = sec
            payload = encode(e, sec, int(ts[20:23]))
            while True:
                try:
                    p.produce(topic, key=key.encode(), value=header + payload)
                    break
                except BufferError:
                    p.poll(0.1)
            total += len(payload) + len(header)
            n += 1
            if n % 10000 == 0:
                p.poll(0)
    if p.flush(300):
        sys.exit("%s: not every message was delivered" % sys.argv[0])
    return round(total / max(n, 1))


def avro(e, sec, millis):
    ms = sec * 1000 + millis
    whole, cents = e["amount"].split(".")
    unscaled = int(whole) * 100 + int(cents)
    amount = unscaled.to_bytes((unscaled.bit_length() + 8) // 8 or 1, "big", signed=True)
    return (zigzag(e["order_id"]) + zigzag(ms) + zigzag(len(amount)) + amount
            + zigzag(e["schema_version"]))


def main():
    bootstrap, topic, registry, events = sys.argv[1:5]
    sid = register(registry, topic, {"schema": json.dumps(SCHEMA)})
    print(sid, produce_all(bootstrap, topic, events, b"\x00" + struct.pack(">I", sid), avro))


if __name__ == "__main__":
    main()
