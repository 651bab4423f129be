#!/usr/bin/env python3
"""Test data for test/e2e/avro.sh, produced with the real Confluent client.

  avro_produce.py types BOOTSTRAP REGISTRY USERINFO AVRO_TOPIC JSON_TOPIC
      every Avro type of the issue, value and key through confluent-kafka's
      AvroSerializer; the same records as JSON (their PostgreSQL texts) to
      JSON_TOPIC, keys as JSON objects
  avro_produce.py versions BOOTSTRAP REGISTRY USERINFO TOPIC
      three writer schemas on one topic (a field added with a default, a
      field removed, int widened to long), 3 messages each, then one message
      of a fourth schema without the NOT NULL column qty
  avro_produce.py json_schema BOOTSTRAP REGISTRY USERINFO TOPIC
      two messages through the JSONSerializer
  avro_produce.py register REGISTRY USERINFO SUBJECT SCHEMA  -> prints the id
  avro_produce.py frame BOOTSTRAP TOPIC ID SCHEMA RECORD [TRUNCATE]
      one value in the wire format with schema id ID (no registry call),
      the payload written with SCHEMA; TRUNCATE drops that many bytes; ID -1:
      plain Avro binary, no frame
  avro_produce.py raw BOOTSTRAP TOPIC HEX        one value of raw bytes
"""
import datetime
import decimal
import io
import json
import struct
import sys
import uuid

from confluent_kafka import Producer
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.schema_registry.json_schema import JSONSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
import fastavro

UTC = datetime.timezone.utc

ALL_TYPES = {
    "type": "record", "name": "AllTypes", "namespace": "ks.e2e",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "b", "type": "boolean"},
        {"name": "i", "type": "int"},
        {"name": "l", "type": "long"},
        {"name": "f", "type": "float"},
        {"name": "d", "type": "double"},
        {"name": "s", "type": "string"},
        {"name": "opt", "type": ["null", "string"], "default": None},
        {"name": "by", "type": "bytes"},
        {"name": "e", "type": {"type": "enum", "name": "Color", "symbols": ["RED", "GREEN", "BLUE"]}},
        {"name": "e2", "type": "Color"},
        {"name": "fx", "type": {"type": "fixed", "name": "Four", "size": 4}},
        {"name": "arr", "type": {"type": "array", "items": "int"}},
        {"name": "sarr", "type": {"type": "array", "items": ["null", "string"]}},
        {"name": "m", "type": {"type": "map", "values": "long"}},
        {"name": "rec", "type": {"type": "record", "name": "Inner",
                                 "fields": [{"name": "a", "type": "int"}, {"name": "t", "type": "string"}]}},
        {"name": "dec", "type": {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2}},
        {"name": "decf", "type": {"type": "fixed", "name": "Dec8", "size": 8, "logicalType": "decimal",
                                  "precision": 12, "scale": 3}},
        {"name": "dt", "type": {"type": "int", "logicalType": "date"}},
        {"name": "tm", "type": {"type": "int", "logicalType": "time-millis"}},
        {"name": "tmu", "type": {"type": "long", "logicalType": "time-micros"}},
        {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "tsu", "type": {"type": "long", "logicalType": "timestamp-micros"}},
        {"name": "lts", "type": {"type": "long", "logicalType": "local-timestamp-millis"}},
        {"name": "u", "type": {"type": "string", "logicalType": "uuid"}},
    ]}
KEY = {"type": "record", "name": "AllTypesKey", "namespace": "ks.e2e",
       "fields": [{"name": "id", "type": "long"}]}


def records():
    out = []
    samples = [
        (1, True, 42, 2**40, 1.5, 3.141592653589793, "plain", None, b"\x00\x01\xff", "RED", "GREEN",
         b"\xde\xad\xbe\xef", [1, 2, 3], ["x", None, 'q"uo\\te'], {"a": 1, "b": -2}, (5, "inner"),
         decimal.Decimal("12.34"), decimal.Decimal("-123456789.125"),
         datetime.date(2024, 2, 29), datetime.time(12, 34, 56, 789000), datetime.time(23, 59, 59, 999999),
         datetime.datetime(2024, 2, 29, 12, 34, 56, 789000, tzinfo=UTC),
         datetime.datetime(2024, 2, 29, 12, 34, 56, 123456, tzinfo=UTC),
         datetime.datetime(2024, 2, 29, 1, 2, 3, 4000),
         uuid.UUID("0b0e8b8e-7f0a-4a53-9d6c-6a3f1c4f8e01")),
        (2, False, -7, -1, -0.25, -1e-300, "ünïcödé ✓ \"q\" \\ tab\t", "set", b"", "BLUE", "RED",
         b"\x00\x00\x00\x00", [], [], {}, (-1, ""),
         decimal.Decimal("-0.05"), decimal.Decimal("0.001"),
         datetime.date(1969, 12, 31), datetime.time(0, 0), datetime.time(0, 0, 0, 1),
         datetime.datetime(1969, 12, 31, 23, 59, 59, 999000, tzinfo=UTC),
         datetime.datetime(1900, 1, 1, 0, 0, 0, 1, tzinfo=UTC),
         datetime.datetime(2000, 1, 1),
         uuid.UUID("00000000-0000-0000-0000-000000000000")),
        (3, True, 2**31 - 1, -2**63, 3.0e38, 1e308, "", "", bytes(range(256)), "GREEN", "BLUE",
         b"\x01\x02\x03\x04", [-2**31, 0], ["only"], {"k": 2**62}, (0, "t"),
         decimal.Decimal("99999999.99"), decimal.Decimal("0"),
         datetime.date(1, 1, 1), datetime.time(23, 59, 59, 999000), datetime.time(12, 0),
         datetime.datetime(9999, 12, 31, 23, 59, 59, 999000, tzinfo=UTC),
         datetime.datetime(1970, 1, 1, tzinfo=UTC),
         datetime.datetime(1999, 12, 31, 23, 59, 59),
         uuid.UUID("ffffffff-ffff-4fff-bfff-ffffffffffff")),
    ]
    names = [f["name"] for f in ALL_TYPES["fields"]]
    for s in samples:
        r = dict(zip(names, s))
        r["rec"] = {"a": s[15][0], "t": s[15][1]}
        out.append(r)
    return out


def pg_array(items):
    def el(x):
        if x is None:
            return "NULL"
        return '"' + str(x).replace("\\", "\\\\").replace('"', '\\"') + '"'
    return "{" + ",".join(el(x) for x in items) + "}"


def json_twin(r):
    """The record as JSON, each value as the text of its PostgreSQL type."""
    return {
        "id": r["id"], "b": r["b"], "i": r["i"], "l": r["l"], "f": r["f"], "d": r["d"], "s": r["s"],
        "opt": r["opt"], "by": "\\x" + r["by"].hex(), "e": r["e"], "e2": r["e2"],
        "fx": "\\x" + r["fx"].hex(), "arr": pg_array(r["arr"]), "sarr": pg_array(r["sarr"]),
        "m": r["m"], "rec": r["rec"], "dec": str(r["dec"]), "decf": str(r["decf"]),
        "dt": r["dt"].isoformat(), "tm": r["tm"].isoformat(), "tmu": r["tmu"].isoformat(),
        "ts": r["ts"].isoformat(), "tsu": r["tsu"].isoformat(), "lts": r["lts"].isoformat(),
        "u": str(r["u"]),
    }


def conf(registry, userinfo):
    return {"url": registry, "basic.auth.user.info": userinfo}


def producer(bootstrap):
    return Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})


def cmd_types(bootstrap, registry, userinfo, avro_topic, json_topic):
    client = SchemaRegistryClient(conf(registry, userinfo))
    vser = AvroSerializer(client, json.dumps(ALL_TYPES))
    kser = AvroSerializer(client, json.dumps(KEY))
    p = producer(bootstrap)
    for r in records():
        p.produce(avro_topic,
                  key=kser({"id": r["id"]}, SerializationContext(avro_topic, MessageField.KEY)),
                  value=vser(r, SerializationContext(avro_topic, MessageField.VALUE)))
        p.produce(json_topic, key=json.dumps({"id": r["id"]}), value=json.dumps(json_twin(r)))
    p.flush(30)


V1 = {"type": "record", "name": "Item", "namespace": "ks.e2e", "fields": [
    {"name": "id", "type": "long"}, {"name": "name", "type": "string"}, {"name": "qty", "type": "int"}]}
V2 = {"type": "record", "name": "Item", "namespace": "ks.e2e", "fields": [
    {"name": "id", "type": "long"}, {"name": "name", "type": "string"}, {"name": "qty", "type": "long"},
    {"name": "note", "type": ["null", "string"], "default": None}]}
V3 = {"type": "record", "name": "Item", "namespace": "ks.e2e", "fields": [
    {"name": "id", "type": "long"}, {"name": "qty", "type": "long"},
    {"name": "note", "type": ["null", "string"], "default": None}]}
V4 = {"type": "record", "name": "Item", "namespace": "ks.e2e", "fields": [
    {"name": "id", "type": "long"}, {"name": "name", "type": "string"}]}


def cmd_versions(bootstrap, registry, userinfo, topic):
    client = SchemaRegistryClient(conf(registry, userinfo))
    client.set_compatibility(subject_name=topic + "-value", level="NONE")
    p = producer(bootstrap)
    ctx = SerializationContext(topic, MessageField.VALUE)
    for schema, rows in ((V1, [{"id": i, "name": "n%d" % i, "qty": i} for i in (1, 2, 3)]),
                         (V2, [{"id": i, "name": "n%d" % i, "qty": 2**40 + i, "note": "v2"} for i in (4, 5, 6)]),
                         (V3, [{"id": i, "qty": i, "note": None} for i in (7, 8, 9)]),
                         (V4, [{"id": 10, "name": "no qty"}])):
        ser = AvroSerializer(client, json.dumps(schema))
        for r in rows:
            p.produce(topic, value=ser(r, ctx))
    p.flush(30)


def cmd_json_schema(bootstrap, registry, userinfo, topic):
    schema = {"type": "object", "title": "Js", "properties": {"id": {"type": "integer"},
                                                               "name": {"type": "string"}}}
    ser = JSONSerializer(json.dumps(schema), SchemaRegistryClient(conf(registry, userinfo)))
    p = producer(bootstrap)
    for i in (1, 2):
        p.produce(topic, value=ser({"id": i, "name": "js%d" % i}, SerializationContext(topic, MessageField.VALUE)))
    p.flush(30)


def cmd_register(registry, userinfo, subject, schema):
    client = SchemaRegistryClient(conf(registry, userinfo))
    print(client.register_schema(subject, Schema(schema, "AVRO")))


def cmd_frame(bootstrap, topic, sid, schema, record, truncate="0"):
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, fastavro.parse_schema(json.loads(schema)), json.loads(record))
    payload = buf.getvalue()
    if int(truncate):
        payload = payload[:-int(truncate)]
    value = payload if int(sid) < 0 else b"\x00" + struct.pack(">I", int(sid)) + payload
    p = producer(bootstrap)
    p.produce(topic, value=value)
    p.flush(30)


def cmd_raw(bootstrap, topic, hexbytes):
    p = producer(bootstrap)
    p.produce(topic, value=bytes.fromhex(hexbytes))
    p.flush(30)


if __name__ == "__main__":
    cmd, args = sys.argv[1], sys.argv[2:]
    {"types": cmd_types, "versions": cmd_versions, "json_schema": cmd_json_schema, "register": cmd_register,
     "frame": cmd_frame, "raw": cmd_raw}[cmd](*args)
