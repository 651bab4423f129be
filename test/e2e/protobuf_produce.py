#!/usr/bin/env python3
"""Test data for test/e2e/protobuf.sh, written with confluent-kafka's own
ProtobufSerializer through the test registry, and its model.

  protobuf_produce.py frames WORKDIR REGISTRY USERINFO OUT PHASE
      compiles orders.proto v1 (importing common/money.proto, which the
      serializer registers under its own subject as a reference) and v2
      (a field added, Order the second message of its file: message index
      [1]), serializes 40 messages of v1 (PHASE 1) or 40 of v2 (PHASE 2,
      run after 1, in a process of its own) (keys 1..30, so
      later ones update earlier ones; presence fields sometimes unset),
      writes "phase value_hex" lines to OUT and the expected rows (the
      model: per key the last message, a field without presence at its
      default, one with presence absent leaving the column as it was) to
      OUT.model as JSON lines
  protobuf_produce.py send BOOTSTRAP TOPIC OUT PHASE
      produces the frames of PHASE (1 or 2) in order
  protobuf_produce.py raw BOOTSTRAP TOPIC HEX    one value of raw bytes
"""
import json
import os
import random
import sys

from grpc_tools import protoc
import grpc_tools

MONEY = '''syntax = "proto3";
package common;
message Money { string currency = 1; int64 units = 2; }
'''
V1 = '''syntax = "proto3";
package shop;
import "common/money.proto";
import "google/protobuf/timestamp.proto";
import "google/protobuf/wrappers.proto";
message Order {
  int64 order_id = 1;
  string customer = 2;
  enum Status { NEW = 0; PAID = 1; SHIPPED = 2; }
  Status status = 3;
  google.protobuf.Timestamp ts = 4;
  google.protobuf.Int64Value discount_cents = 5;
  repeated int32 qty = 6;
  map<string, int32> tags = 7;
  message Address { string city = 1; optional string zip = 2; }
  Address shipping = 8;
  common.Money total = 9;
  optional string note = 10;
  oneof contact { string email = 11; string phone = 12; }
}
'''
V2 = V1.replace("package shop;", "package shop;\n").replace(
    "message Order {", "message Audit { string who = 1; }\nmessage Order {").replace(
    "oneof contact", "int32 priority = 13;\n  oneof contact")


def compile_to(d, name, text):
    os.makedirs(os.path.join(d, "common"), exist_ok=True)
    open(os.path.join(d, "common/money.proto"), "w").write(MONEY)
    open(os.path.join(d, name), "w").write(text)
    inc = os.path.join(os.path.dirname(grpc_tools.__file__), "_proto")
    if protoc.main(["protoc", "-I" + d, "-I" + inc, "--python_out=" + d, name, "common/money.proto"]) != 0:
        sys.exit("protoc failed on " + name)


def frames(workdir, registry, userinfo, out, phase):
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    # one schema version a process: both declare orders.proto
    phase = int(phase)
    d = os.path.join(workdir, "v%d" % phase)
    compile_to(d, "orders.proto", V1 if phase == 1 else V2)
    client = SchemaRegistryClient({"url": registry, "basic.auth.user.info": userinfo})
    rnd = random.Random(25 + phase)
    model = {}
    if phase == 2:
        model = {int(r["order_id"]): r for r in map(json.loads, open(out + ".model"))}
    lines = []
    if True:
        sys.path.insert(0, d)
        import orders_pb2
        ser = ProtobufSerializer(orders_pb2.Order, client, {"use.deprecated.format": False})
        ctx = SerializationContext("e2e", MessageField.VALUE)
        for i in range(40):
            key = rnd.randint(1, 30)
            m = orders_pb2.Order(order_id=key, customer=rnd.choice(["ann", "bo", "", "zoë"]),
                                 status=rnd.randint(0, 2))
            m.qty.extend(rnd.randint(-5, 500) for _ in range(rnd.randint(0, 3)))
            for t in rnd.sample(["a", "b", "c"], rnd.randint(0, 2)):
                m.tags[t] = rnd.randint(-9, 9)
            if rnd.random() < 0.7:
                m.ts.seconds = 1700000000 + rnd.randint(0, 10**6)
                m.ts.nanos = rnd.choice([0, 250000000, 123456000])
            if rnd.random() < 0.6:
                m.discount_cents.value = rnd.randint(0, 900)
            if rnd.random() < 0.6:
                m.shipping.city = rnd.choice(["Oslo", "Lyon", ""])
                if rnd.random() < 0.5:
                    m.shipping.zip = "%05d" % rnd.randint(0, 99999)
            if rnd.random() < 0.8:
                m.total.currency = rnd.choice(["EUR", "NOK"])
                m.total.units = rnd.randint(-10**12, 10**12)
            if rnd.random() < 0.5:
                m.note = rnd.choice(["", "fragile", "call first"])
            c = rnd.random()
            if c < 0.4:
                m.email = "x%d@example.org" % i
            elif c < 0.7:
                m.phone = "+47 %d" % i
            if phase == 2:
                m.priority = rnd.randint(0, 3)
            lines.append("%d %s" % (phase, ser(m, ctx).hex()))
            # the model: columns as PostgreSQL prints them
            row = model.setdefault(key, {"order_id": key})
            row.update(customer=m.customer, status=orders_pb2.Order.Status.Name(m.status),
                       status_no=m.status, qty="{%s}" % ",".join(str(q) for q in m.qty),
                       tags=dict(m.tags))
            if m.HasField("ts"):
                row["ts"] = m.ts.ToDatetime().strftime("%Y-%m-%d %H:%M:%S.%f").rstrip("0").rstrip(".") + "+00"
            if m.HasField("discount_cents"):
                row["discount_cents"] = m.discount_cents.value
            if m.HasField("shipping"):
                row["city"] = m.shipping.city
                if m.shipping.HasField("zip"):
                    row["zip"] = m.shipping.zip
            if m.HasField("total"):
                row["currency"] = m.total.currency
                row["units"] = m.total.units
            if m.HasField("note"):
                row["note"] = m.note
            if m.HasField("email"):
                row["email"] = m.email
            if m.HasField("phone"):
                row["phone"] = m.phone
            if phase == 2:
                row["priority"] = m.priority
    with open(out, "a") as f:
        f.write("\n".join(lines) + "\n")
    with open(out + ".model", "w") as f:
        for k in sorted(model):
            f.write(json.dumps(model[k]) + "\n")


def send(bootstrap, topic, out, phase):
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": bootstrap})
    for line in open(out):
        ph, hexv = line.split()
        if ph == phase:
            p.produce(topic, bytes.fromhex(hexv))
    p.flush(30)


def main():
    cmd = sys.argv[1]
    if cmd == "frames":
        frames(*sys.argv[2:7])
    elif cmd == "send":
        send(*sys.argv[2:6])
    elif cmd == "raw":
        from confluent_kafka import Producer
        p = Producer({"bootstrap.servers": sys.argv[2]})
        p.produce(sys.argv[3], bytes.fromhex(sys.argv[4]))
        p.flush(30)
    else:
        sys.exit("unknown command " + cmd)


if __name__ == "__main__":
    main()
