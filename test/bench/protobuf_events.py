#!/usr/bin/env python3
"""protobuf_events.py -- the benchmark's order events again, as Protobuf.

  protobuf_events.py BOOTSTRAP TOPIC REGISTRY_URL EVENTS_TSV

Registers the schema below (schemaType PROTOBUF) under TOPIC-value in the
registry (the test registry, test/tools/schema_registry.py), then produces
every line "order_id<TAB>json" of EVENTS_TSV (test/bench/gen_events.py) in
order as one message keyed by the order id, whose value is the same event
as Protobuf in Confluent's wire format (the message index list 0, the
first message): order_id int64, event_ts google.protobuf.Timestamp,
amount string (Protobuf has no decimal; the numeric column takes its
text), schema_version int32; the same fields as avro_events.py's.  The
payload is encoded here, by the wire format's rules (varints, tags,
lengths), not by the protobuf library: the benchmark's venv stays small.
Prints "SCHEMA_ID BYTES" (the id and the mean value size).
"""
import datetime
import json
import struct
import sys
import urllib.request

from confluent_kafka import Producer

SCHEMA = '''syntax = "proto3";
package ks.bench;
import "google/protobuf/timestamp.proto";
message BenchOrder {
  int64 order_id = 1;
  google.protobuf.Timestamp event_ts = 2;
  string amount = 3;
  int32 schema_version = 4;
}
'''
EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)


def varint(u):
    out = bytearray()
    if u < 0:
        u += 1 << 64
    while u >= 0x80:
        out.append((u & 0x7f) | 0x80)
        u >>= 7
    out.append(u)
    return bytes(out)


def main():
    bootstrap, topic, registry, events = sys.argv[1:5]
    req = urllib.request.Request(registry.rstrip("/") + "/subjects/%s-value/versions" % topic,
                                 data=json.dumps({"schemaType": "PROTOBUF", "schema": SCHEMA}).encode(),
                                 headers={"Content-Type": "application/vnd.schemaregistry.v1+json"})
    sid = json.load(urllib.request.urlopen(req))["id"]
    header = b"\x00" + struct.pack(">I", sid) + b"\x00"
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
            nanos = int(ts[20:23]) * 1000000
            stamp = b"\x08" + varint(sec) + (b"\x10" + varint(nanos) if nanos else b"")
            amount = e["amount"].encode()
            payload = (b"\x08" + varint(e["order_id"]) + b"\x12" + varint(len(stamp)) + stamp
                       + b"\x1a" + varint(len(amount)) + amount
                       + (b"\x20" + varint(e["schema_version"]) if e["schema_version"] else b""))
            while True:
                try:
                    p.produce(topic, key=key.encode(), value=header + payload)
                    break
                except BufferError:
                    p.poll(0.1)
            total += len(payload) + 6
            n += 1
            if n % 10000 == 0:
                p.poll(0)
    if p.flush(300):
        sys.exit("protobuf_events: not every message was delivered")
    print(sid, round(total / max(n, 1)))


if __name__ == "__main__":
    main()
