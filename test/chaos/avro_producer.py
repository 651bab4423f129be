#!/usr/bin/env python3
"""Produces a chunk of test/chaos/gen_orders.py's lines as Avro.

  avro_producer.py BOOTSTRAP TOPIC SCHEMA_ID < chunk

Each line "key<TAB>json" becomes one message keyed by the key's text (as
kcat -K does) whose value is the JSON object written as Avro with the
schema below, in Confluent's wire format under SCHEMA_ID (registered by
test/chaos/exactly_once.sh with CHAOS_FORMAT=avro).  Idempotent, lz4, as
the kcat producer; exits non-zero unless every message is delivered.
"""
import io
import json
import struct
import sys

import fastavro
from confluent_kafka import Producer

SCHEMA = {"type": "record", "name": "ChaosOrder", "namespace": "ks.chaos", "fields": [
    {"name": "order_id", "type": "long"},
    {"name": "event_ts", "type": "long"},
    {"name": "amount", "type": ["null", "string", "long", "double"]},
    {"name": "note", "type": "string"}]}

if __name__ == "__main__":
    bootstrap, topic, sid = sys.argv[1], sys.argv[2], int(sys.argv[3])
    if sid < 0:
        print(json.dumps(SCHEMA))
        sys.exit(0)
    parsed = fastavro.parse_schema(SCHEMA)
    header = b"\x00" + struct.pack(">I", sid)
    failed = []
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "compression.type": "lz4",
                  "message.timeout.ms": 120000, "linger.ms": 5})

    def report(err, msg):
        if err is not None:
            failed.append(err)

    for line in sys.stdin:
        key, value = line.rstrip("\n").split("\t", 1)
        buf = io.BytesIO()
        fastavro.schemaless_writer(buf, parsed, json.loads(value))
        while True:
            try:
                p.produce(topic, key=key.encode(), value=header + buf.getvalue(), on_delivery=report)
                break
            except BufferError:
                p.poll(0.1)
        p.poll(0)
    left = p.flush(180)
    if left or failed:
        sys.stderr.write("avro_producer: %d undelivered, %d failed: %s\n" % (left, len(failed), failed[:3]))
        sys.exit(1)
