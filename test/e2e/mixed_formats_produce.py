#!/usr/bin/env python3
"""Test data for test/e2e/mixed_formats.sh: one topic carrying Avro,
Protobuf and JSON Schema messages, each written by confluent-kafka's own
serializer (AvroSerializer, ProtobufSerializer, JSONSerializer) through the
test registry, each format's schema changing mid-stream, and the model.

  mixed_formats_produce.py frames WORKDIR REGISTRY USERINFO OUT N
      N messages over keys 1..40; each message's format chosen at random;
      each format switches from its version 1 (id, name, qty, fmt) to its
      version 2 (qty removed, note added: an Avro default, a proto3
      optional, an optional JSON property) at its own point of the stream.
      Writes "format version value_hex" lines to OUT and the expected rows
      to OUT.model as JSON lines: per key, the fields each message carries
      overwrite, the fields its writer schema lacks (or an unset optional)
      leave the column as it was (NULL when never set), a proto3 plain
      scalar is always carried (its default when not on the wire).
  mixed_formats_produce.py send BOOTSTRAP TOPIC OUT FROM TO
      produces lines FROM..TO-1 of OUT, in order, as one partition's values
"""
import json
import os
import random
import sys

AVRO_V1 = json.dumps({"type": "record", "name": "Item", "namespace": "mixed", "fields": [
    {"name": "id", "type": "long"}, {"name": "name", "type": "string"},
    {"name": "qty", "type": "int"}, {"name": "fmt", "type": "string"}]})
AVRO_V2 = json.dumps({"type": "record", "name": "Item", "namespace": "mixed", "fields": [
    {"name": "id", "type": "long"}, {"name": "name", "type": "string"},
    {"name": "fmt", "type": "string"}, {"name": "note", "type": "string", "default": ""}]})
PROTO_V1 = '''syntax = "proto3";
package mixed.v1;
message Item { int64 id = 1; string name = 2; int32 qty = 3; string fmt = 4; }
'''
PROTO_V2 = '''syntax = "proto3";
package mixed.v2;
message Item { int64 id = 1; string name = 2; reserved 3; string fmt = 4; optional string note = 5; }
'''
JSON_V1 = json.dumps({"type": "object", "title": "Item", "properties": {
    "id": {"type": "integer"}, "name": {"type": "string"}, "qty": {"type": "integer"},
    "fmt": {"type": "string"}}, "required": ["id", "name", "qty", "fmt"]})
JSON_V2 = json.dumps({"type": "object", "title": "Item", "properties": {
    "id": {"type": "integer"}, "name": {"type": "string"}, "fmt": {"type": "string"},
    "note": {"type": "string"}}, "required": ["id", "name", "fmt"]})


def compile_protos(d):
    from grpc_tools import protoc
    import grpc_tools
    os.makedirs(d, exist_ok=True)
    inc = os.path.join(os.path.dirname(grpc_tools.__file__), "_proto")
    for name, text in (("item_v1.proto", PROTO_V1), ("item_v2.proto", PROTO_V2)):
        open(os.path.join(d, name), "w").write(text)
        if protoc.main(["protoc", "-I" + d, "-I" + inc, "--python_out=" + d, name]) != 0:
            sys.exit("protoc failed on " + name)
    sys.path.insert(0, d)
    import item_v1_pb2
    import item_v2_pb2
    return item_v1_pb2.Item, item_v2_pb2.Item


def frames(workdir, registry, userinfo, out, n):
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.schema_registry.json_schema import JSONSerializer
    from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    n = int(n)
    pb1, pb2 = compile_protos(os.path.join(workdir, "proto"))
    client = SchemaRegistryClient({"url": registry, "basic.auth.user.info": userinfo})

    # one subject per format and version family, as a mixed topic needs
    # (TopicNameStrategy would put three types under one subject)
    def subject(name):
        return {"subject.name.strategy": lambda ctx, record: "mixed-" + name}

    ser = {
        ("avro", 1): AvroSerializer(client, AVRO_V1, conf=subject("avro")),
        ("avro", 2): AvroSerializer(client, AVRO_V2, conf=subject("avro")),
        ("protobuf", 1): ProtobufSerializer(pb1, client, dict(subject("protobuf"), **{"use.deprecated.format": False})),
        ("protobuf", 2): ProtobufSerializer(pb2, client, dict(subject("protobuf"), **{"use.deprecated.format": False})),
        ("json", 1): JSONSerializer(JSON_V1, client, conf=subject("json")),
        ("json", 2): JSONSerializer(JSON_V2, client, conf=subject("json")),
    }
    ctx = SerializationContext("mixed", MessageField.VALUE)
    rnd = random.Random(2025)
    switch = {"avro": n // 3, "protobuf": n // 2, "json": 2 * n // 3}
    model = {}
    lines = []
    for i in range(n):
        fmt = rnd.choice(["avro", "protobuf", "json"])
        version = 2 if i >= switch[fmt] else 1
        key = rnd.randint(1, 40)
        name = rnd.choice(["ann", "bo", "", "zoë", "d'Artagnan"])
        qty = rnd.randint(-3, 500) if rnd.random() < 0.9 else 0
        note = rnd.choice(["", "fragile", "call first"]) if rnd.random() < 0.7 else None
        carried = {"id": key, "name": name, "fmt": fmt}
        if version == 1:
            carried["qty"] = qty
        if fmt == "avro":
            rec = dict(carried)
            if version == 2:
                # the Avro writer always writes the field; a default fills it
                rec["note"] = note if note is not None else ""
                carried["note"] = rec["note"]
            value = ser[(fmt, version)](rec, ctx)
        elif fmt == "protobuf":
            m = (pb1 if version == 1 else pb2)(**carried)
            if version == 2 and note is not None:
                m.note = note       # explicit presence: set, even to ""
                carried["note"] = note
            value = ser[(fmt, version)](m, ctx)
        else:
            rec = dict(carried)
            if version == 2 and note is not None:
                rec["note"] = note
                carried["note"] = note
            value = ser[(fmt, version)](rec, ctx)
        lines.append("%s %d %s" % (fmt, version, value.hex()))
        model.setdefault(key, {"id": key}).update(carried)
    with open(out, "w") as f:
        f.write("\n".join(lines) + "\n")
    with open(out + ".model", "w") as f:
        for k in sorted(model):
            f.write(json.dumps(model[k]) + "\n")


def send(bootstrap, topic, out, lo, hi):
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for line in open(out).read().split("\n")[int(lo):int(hi)]:
        p.produce(topic, value=bytes.fromhex(line.split()[2]), partition=0)
    if p.flush(60) != 0:
        sys.exit("not all messages were delivered")


if __name__ == "__main__":
    {"frames": frames, "send": send}[sys.argv[1]](*sys.argv[2:])
