#!/usr/bin/env python3
"""Proves test/tools/schema_registry.py with the official Confluent client.

confluent-kafka's SchemaRegistryClient registers and fetches through it,
the AvroSerializer and JSONSerializer frame messages through it (magic 0,
the id big-endian, the payload) and their deserializers read them back;
a wrong password is refused.  Exits non-zero on the first failure.

Usage: registry_check.py URL USER:PASSWORD
"""
import struct
import sys

from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

url, userinfo = sys.argv[1], sys.argv[2]
conf = {"url": url, "basic.auth.user.info": userinfo}
client = SchemaRegistryClient(conf)
failures = 0


def check(what, ok):
    global failures
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failures += 1


AVRO = """{"type": "record", "name": "Check", "namespace": "ks.test",
 "fields": [{"name": "id", "type": "long"}, {"name": "name", "type": "string"}]}"""
AVRO2 = """{"type": "record", "name": "Check", "namespace": "ks.test",
 "fields": [{"name": "id", "type": "long"}, {"name": "name", "type": "string"},
            {"name": "extra", "type": ["null", "int"], "default": null}]}"""

sid = client.register_schema("check-value", Schema(AVRO, "AVRO"))
check("register returns an id (%s)" % sid, isinstance(sid, int) and sid > 0)
check("registering the same schema again returns the same id",
      client.register_schema("check-value", Schema(AVRO, "AVRO")) == sid)
sid2 = client.register_schema("check-value", Schema(AVRO2, "AVRO"))
check("a second schema gets another id", sid2 != sid)
check("get_schema by id", client.get_schema(sid).schema_str == AVRO)
check("get_subjects lists the subject", "check-value" in client.get_subjects())
check("get_versions lists both versions", client.get_versions("check-value") == [1, 2])
latest = client.get_latest_version("check-value")
check("the latest version is the second schema", latest.schema_id == sid2 and latest.version == 2)
check("get_version 1", client.get_version("check-value", 1).schema_id == sid)
check("lookup_schema finds a registered schema",
      client.lookup_schema("check-value", Schema(AVRO, "AVRO")).version == 1)

ctx = SerializationContext("check", MessageField.VALUE)
ser = AvroSerializer(SchemaRegistryClient(conf), AVRO2)
frame = ser({"id": 7, "name": "seven", "extra": 3}, ctx)
check("AvroSerializer writes magic byte 0", frame[0] == 0)
check("AvroSerializer writes the id big-endian", struct.unpack(">I", frame[1:5])[0] == sid2)
de = AvroDeserializer(SchemaRegistryClient(conf))
check("AvroDeserializer reads it back by id", de(frame, ctx) == {"id": 7, "name": "seven", "extra": 3})

JSONS = """{"type": "object", "title": "CheckJ", "properties": {"id": {"type": "integer"},
 "name": {"type": "string"}}, "required": ["id"]}"""
jser = JSONSerializer(JSONS, SchemaRegistryClient(conf))
jframe = jser({"id": 8, "name": "eight"}, SerializationContext("checkj", MessageField.VALUE))
jid = struct.unpack(">I", jframe[1:5])[0]
check("JSONSerializer frames JSON (magic 0, a new id)", jframe[0] == 0 and jid not in (sid, sid2))
check("the JSON schema is registered with schemaType JSON", client.get_schema(jid).schema_type == "JSON")
jde = JSONDeserializer(None, schema_registry_client=SchemaRegistryClient(conf))
check("JSONDeserializer reads it back",
      jde(jframe, SerializationContext("checkj", MessageField.VALUE)) == {"id": 8, "name": "eight"})

try:
    client.get_schema(999999)
    check("an unknown id is an error", False)
except SchemaRegistryError as e:
    check("an unknown id is 404 / 40403", e.http_status_code == 404 and e.error_code == 40403)

bad = SchemaRegistryClient({"url": url, "basic.auth.user.info": userinfo.split(":")[0] + ":wrong"})
try:
    bad.get_subjects()
    check("a wrong password is refused", False)
except SchemaRegistryError as e:
    check("a wrong password is refused with 401", e.http_status_code == 401)

print("registry_check: %d failed" % failures)
sys.exit(1 if failures else 0)
