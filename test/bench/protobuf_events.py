#!/usr/bin/env python3
"""protobuf_events.py -- the benchmark's order events again, as Protobuf.

  protobuf_events.py BOOTSTRAP TOPIC REGISTRY_URL EVENTS_TSV

Registers the schema below (schemaType PROTOBUF) under TOPIC-value in the
registry (the test registry, test/tools/schema_registry.py), then produces
the events as avro_events.py does (its produce_all), each value the same
event as Protobuf in Confluent's wire format (the message-index list 0:
the first message): order_id int64, event_ts google.protobuf.Timestamp,
amount string (Protobuf has no decimal; the numeric column takes its
text), schema_version int32.  The payload is encoded here by the wire
format's rules (varints, tags, lengths), not by the protobuf library: the
benchmark's venv stays as it is.  Prints "SCHEMA_ID BYTES" (the id and the
mean value size).
"""
import os
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from avro_events import produce_all, register  # noqa: E402

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


def varint(u):
    out = bytearray()
    if u < 0:
        u += 1 << 64
    while u >= 0x80:
        out.append((u & 0x7f) | 0x80)
        u >>= 7
    out.append(u)
    return bytes(out)


def protobuf(e, sec, millis):
    nanos = millis * 1000000
    stamp = b"\x08" + varint(sec) + (b"\x10" + varint(nanos) if nanos else b"")
    amount = e["amount"].encode()
    # proto3: a zero scalar is not written
    return (b"\x08" + varint(e["order_id"]) + b"\x12" + varint(len(stamp)) + stamp
            + b"\x1a" + varint(len(amount)) + amount
            + (b"\x20" + varint(e["schema_version"]) if e["schema_version"] else b""))


def main():
    bootstrap, topic, registry, events = sys.argv[1:5]
    sid = register(registry, topic, {"schemaType": "PROTOBUF", "schema": SCHEMA})
    print(sid, produce_all(bootstrap, topic, events, b"\x00" + struct.pack(">I", sid) + b"\x00", protobuf))


if __name__ == "__main__":
    main()
