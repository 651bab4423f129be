#!/usr/bin/env python3
"""Avro twins of JsonConverter change events, for test/e2e/cdc_avro.sh.

  cdc_avro_produce.py BOOTSTRAP REGISTRY USERINFO TOPIC < lines

Each stdin line is {"key": K, "value": V}, K and V as Kafka Connect's
JsonConverter (schemas.enable=true) wrote them ({"schema", "payload"}) or
null (a tombstone, a truncate without a key).  Each is produced to TOPIC
as Confluent's AvroConverter would have written the same Connect record:
the writer schema derived from the Connect schema the way AvroConverter's
AvroData.fromConnectSchema derives it (records named by the Connect name,
split into namespace and name; connect.name, connect.version,
connect.parameters, connect.default; Decimal as bytes with logicalType
decimal, precision and scale; Connect's Date, Time and Timestamp as
logicalType date, time-millis, timestamp-millis; optional fields as
["null", T] with default null, or [T, "null"] with their default; a
record named twice is referenced by its full name the second time), the
values converted as AvroConverter converts them (bytes from base64), and
serialized by confluent-kafka's own AvroSerializer through the registry
(subjects TOPIC-key and TOPIC-value, TopicNameStrategy).
"""
import base64
import json
import sys

from confluent_kafka import Producer
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

DECIMAL = "org.apache.kafka.connect.data.Decimal"
LOGICAL = {
    "org.apache.kafka.connect.data.Date": "date",
    "org.apache.kafka.connect.data.Time": "time-millis",
    "org.apache.kafka.connect.data.Timestamp": "timestamp-millis",
}
PRIMITIVE = {"int8": "int", "int16": "int", "int32": "int", "int64": "long", "float32": "float",
             "float": "float", "float64": "double", "double": "double", "boolean": "boolean",
             "string": "string", "bytes": "bytes"}


def avro_schema(cs, named):
    """The Avro schema AvroData makes of Connect schema cs (without the optional union)."""
    t = cs["type"]
    name = cs.get("name")
    if t == "struct":
        full = name or "io.confluent.connect.avro.ConnectDefault"
        if full in named:
            return full
        named.add(full)
        ns, _, short = full.rpartition(".")
        base = {"type": "record", "name": short}
        if ns:
            base["namespace"] = ns
        base["fields"] = [avro_field(f, named) for f in cs["fields"]]
    elif t == "array":
        base = {"type": "array", "items": avro_type(cs["items"], named)}
    elif t == "map":
        base = {"type": "map", "values": avro_type(cs["values"], named)}
    else:
        base = {"type": PRIMITIVE[t]}
        if t in ("int8", "int16"):
            base["connect.type"] = t
    params = cs.get("parameters")
    if name == DECIMAL:
        base["scale"] = int(params["scale"])
        base["precision"] = int(params.get("connect.decimal.precision", 64))
    if cs.get("doc") is not None:
        base["connect.doc"] = cs["doc"]
    if cs.get("version") is not None:
        base["connect.version"] = cs["version"]
    if params:
        base["connect.parameters"] = params
    if cs.get("default") is not None:
        base["connect.default"] = cs["default"]
    if name is not None:
        base["connect.name"] = name
    if name == DECIMAL:
        base["logicalType"] = "decimal"
    if name in LOGICAL:
        base["logicalType"] = LOGICAL[name]
    return base


def avro_type(cs, named):
    base = avro_schema(cs, named)
    if not cs.get("optional"):
        return base
    return [base, "null"] if cs.get("default") is not None else ["null", base]


def avro_field(f, named):
    out = {"name": f["field"], "type": avro_type(f, named)}
    if f.get("optional"):
        out["default"] = f.get("default")
    elif f.get("default") is not None:
        out["default"] = f["default"]
    return out


def avro_value(cs, v):
    """A JsonConverter payload value as the Avro datum of avro_schema(cs)."""
    if v is None:
        return None
    t = cs["type"]
    if t == "struct":
        return {f["field"]: avro_value(f, v.get(f["field"])) for f in cs["fields"]}
    if t == "array":
        return [avro_value(cs["items"], x) for x in v]
    if t == "map":
        return {k: avro_value(cs["values"], x) for k, x in v.items()}
    if t == "bytes":
        return base64.b64decode(v)
    return v


def main():
    bootstrap, registry, userinfo, topic = sys.argv[1:5]
    conf = {"url": registry}
    if userinfo:
        conf["basic.auth.user.info"] = userinfo
    client = SchemaRegistryClient(conf)
    producer = Producer({"bootstrap.servers": bootstrap})
    serializers = {}

    def encode(part, field):
        if part is None:
            return None
        schema = json.dumps(avro_schema(part["schema"], set()))
        if (schema, field) not in serializers:
            serializers[(schema, field)] = AvroSerializer(client, schema, conf={"auto.register.schemas": True})
        datum = avro_value(part["schema"], part["payload"])
        return serializers[(schema, field)](datum, SerializationContext(topic, field))

    n = 0
    for line in sys.stdin:
        if not line.strip():
            continue
        m = json.loads(line)
        producer.produce(topic, key=encode(m.get("key"), MessageField.KEY),
                         value=encode(m.get("value"), MessageField.VALUE))
        n += 1
    producer.flush(30)
    print(n)


if __name__ == "__main__":
    main()
