#!/usr/bin/env python3
"""Schema bombs for test/e2e/schema_bombs.sh: registers Avro writer schemas
whose naive translation or decoding costs far more than their size (or a
tiny message claims far more than it holds), and writes one Confluent wire
frame per file into OUTDIR, named in the order they are to be produced:

  plain/NN_case.bin   for an avro pipeline (target: id bigint, name text)
  cdc/NN_case.bin     for an envelope => 'debezium' avro pipeline (id int, name text)

Usage: schema_bombs_gen.py REGISTRY_URL OUTDIR
With --fuzz DIR instead, writes the same schemas and datums as seeds of
test/fuzz/fuzz_avro.c's schema mode (0x80, the schema text, NUL, the datum).
Standard library only.
"""
import json
import os
import struct
import sys
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from avro_direct_gen import zz  # noqa: E402  (Avro's long: zig-zag varint)




def s(text):
    b = text.encode()
    return zz(len(b)) + b


def rec(name, fields):
    return {"type": "record", "name": name, "fields": [{"name": n, "type": t} for n, t in fields]}


BASE = [("id", "long"), ("name", "string")]


def plain_cases():
    """(case, schema, datum) in production order."""
    good = rec("Good", BASE)
    yield "good_first", good, zz(1) + s("one")
    # a recursive record: decoded by the data, as deep as the data goes
    node = rec("Node", BASE + [("l", ["null", "Node"]), ("r", ["null", "Node"])])
    yield "recursive_applies", node, zz(2) + s("rec") + zz(1) + (zz(20) + s("") + zz(0) + zz(0)) + zz(0)
    deep = b""
    for _ in range(70):
        deep = zz(1) + zz(7) + s("") + deep
    deep += zz(0)  # the innermost l
    deep += zz(0) * 71  # every r
    yield "recursive_too_deep", node, zz(3) + s("deep") + deep
    # a chain of named types, each defined by a field of its own (no deep
    # nesting): C12 has 10 fields of C11, ..., C0 10 null fields: 10^12
    # values that take no byte
    chain = [("c0", rec("C0", [("f%d" % i, "null") for i in range(10)]))]
    for k in range(1, 13):
        chain.append(("c%d" % k, rec("C%d" % k, [("f%d" % i, "C%d" % (k - 1)) for i in range(10)])))
    yield "named_chain", rec("Chain", BASE + chain), zz(4) + s("chain")
    # 2^62 empty records, 2^62 nulls: items that take no byte
    empty = rec("Empty", [])
    yield "block_of_empty_records", rec("Arr", BASE + [("a", {"type": "array", "items": empty})]), \
        zz(5) + s("arr") + zz(1 << 62) + zz(0)
    yield "block_of_nulls", rec("Nulls", BASE + [("a", {"type": "map", "values": "null"})]), \
        zz(6) + s("map") + zz(-(1 << 62)) + zz(0) + zz(0)
    # a string of 2^60 bytes in a message of 15
    yield "huge_string_claim", good, zz(7) + zz(1 << 60) + b"abc"
    # a union of 2000 nulls and a long: not a schema (the spec's rule)
    yield "wide_union", rec("Wide", BASE + [("u", ["null"] * 2000 + ["long"])]), zz(8) + s("wide") + zz(0)
    # wide records of null fields in an array, as many as the bytes allow
    wide = rec("W", [("n%d" % i, "null") for i in range(1500)])
    yield "zero_byte_wide_items", rec("WideItems", BASE + [("a", {"type": "array", "items": wide})]), \
        zz(9) + s("w") + zz(1000) + zz(0)
    # a schema whose registry answer is over 8 MB (schema_registry.c's cap)
    big = rec("Big", BASE)
    big["doc"] = "x" * (9 * 1024 * 1024)
    yield "oversized_schema", big, zz(9) + s("big")
    yield "good_last", good, zz(10) + s("ten")


# Debezium's source block, reduced to the position
SOURCE = {"name": "source", "type": {"type": "record", "name": "Source", "namespace": "bomb",
                                     "fields": [{"name": "lsn", "type": "long"}]}}


def cdc_cases():
    v1 = {"type": "record", "name": "Value", "namespace": "bomb.one",
          "fields": [{"name": "id", "type": "int"}, {"name": "name", "type": ["null", "string"]}]}
    env1 = {"type": "record", "name": "Envelope", "namespace": "bomb.one",
            "fields": [{"name": "before", "type": ["null", v1]}, {"name": "after", "type": ["null", "Value"]},
                       SOURCE, {"name": "op", "type": "string"}]}
    yield "good_first", env1, zz(0) + zz(1) + zz(1) + zz(1) + s("one") + zz(100) + s("c")
    # the report: Value refers to itself twice; a 7-byte event
    v2 = {"type": "record", "name": "Value", "namespace": "bomb.rec",
          "fields": [{"name": "id", "type": "int"}, {"name": "name", "type": ["null", "string"]},
                     {"name": "l", "type": ["null", "Value"]}, {"name": "r", "type": ["null", "Value"]}]}
    env2 = {"type": "record", "name": "Envelope", "namespace": "bomb.rec",
            "fields": [{"name": "before", "type": ["null", v2]}, {"name": "after", "type": ["null", "Value"]},
                       SOURCE, {"name": "op", "type": "string"}]}
    event = zz(0) + zz(1) + zz(2) + zz(0) + zz(0) + zz(0) + zz(101) + s("c")
    yield "recursive_value", env2, event
    # a chain of records each referring twice to the one before, each
    # defined by a field of Value: D26 is 2^26 copies of D0
    chain = [{"name": "d0", "type": {"type": "record", "name": "D0", "fields": [{"name": "z", "type": "null"}]}}]
    for k in range(1, 27):
        chain.append({"name": "d%d" % k, "type": {"type": "record", "name": "D%d" % k,
                      "fields": [{"name": "a", "type": "D%d" % (k - 1)}, {"name": "b", "type": "D%d" % (k - 1)}]}})
    v3 = {"type": "record", "name": "Value", "namespace": "bomb.chain",
          "fields": [{"name": "id", "type": "int"}, {"name": "name", "type": ["null", "string"]}] + chain}
    env3 = {"type": "record", "name": "Envelope", "namespace": "bomb.chain",
            "fields": [{"name": "before", "type": ["null", v3]}, {"name": "after", "type": ["null", "Value"]},
                       SOURCE, {"name": "op", "type": "string"}]}
    yield "named_chain", env3, zz(0) + zz(1) + zz(3) + zz(0) + zz(102) + s("c")
    # a record and its field, each with 150000 members beside those Avro
    # reads, and 40000 records of it in a 20 kB event: the translation of
    # each value looks its type up again
    junk = {"j%d" % i: 0 for i in range(150000)}
    r = {"type": "record", "name": "R", "fields": [dict({"name": "f", "type": "null"}, **junk)]}
    r.update(junk)
    v4 = {"type": "record", "name": "Value", "namespace": "bomb.members",
          "fields": [{"name": "id", "type": "int"}, {"name": "name", "type": ["null", "string"]},
                     {"name": "pad", "type": "string"}, {"name": "a", "type": {"type": "array", "items": r}}]}
    env4 = {"type": "record", "name": "Envelope", "namespace": "bomb.members",
            "fields": [{"name": "before", "type": ["null", v4]}, {"name": "after", "type": ["null", "Value"]},
                       SOURCE, {"name": "op", "type": "string"}]}
    yield "wide_members", env4, zz(0) + zz(1) + zz(5) + zz(1) + s("members") + s("p" * 20000) + \
        zz(40000) + zz(0) + zz(104) + s("c")
    # 160000 empty records in a 20 kB event: 8 JSON values a byte
    v5 = {"type": "record", "name": "Value", "namespace": "bomb.empty",
          "fields": [{"name": "id", "type": "int"}, {"name": "name", "type": ["null", "string"]},
                     {"name": "pad", "type": "string"},
                     {"name": "e", "type": {"type": "array", "items": {"type": "record", "name": "E", "fields": []}}}]}
    env5 = {"type": "record", "name": "Envelope", "namespace": "bomb.empty",
            "fields": [{"name": "before", "type": ["null", v5]}, {"name": "after", "type": ["null", "Value"]},
                       SOURCE, {"name": "op", "type": "string"}]}
    yield "empty_records", env5, zz(0) + zz(1) + zz(6) + zz(1) + s("empty") + s("p" * 20000) + \
        zz(160000) + zz(0) + zz(105) + s("c")
    yield "good_last", env1, zz(0) + zz(1) + zz(4) + zz(1) + s("four") + zz(103) + s("c")


def register(url, subject, schema):
    body = json.dumps({"schema": json.dumps(schema)}).encode()
    req = urllib.request.Request("%s/subjects/%s/versions" % (url, subject), data=body,
                                 headers={"Content-Type": "application/vnd.schemaregistry.v1+json"})
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.load(r)["id"]


def main():
    if sys.argv[1] == "--fuzz":
        out = sys.argv[2]
        for kind, cases in (("plain", plain_cases()), ("cdc", cdc_cases())):
            for case, schema, datum in cases:
                if case.startswith("good") or case in ("wide_members", "oversized_schema"):
                    continue  # (megabytes, over libFuzzer's max_len)
                text = json.dumps(schema, separators=(",", ":")).encode()
                with open(os.path.join(out, "bomb_%s_%s" % (kind, case)), "wb") as f:
                    f.write(b"\x80" + text + b"\x00" + datum)
        return
    url, out = sys.argv[1], sys.argv[2]
    for kind, cases in (("plain", plain_cases()), ("cdc", cdc_cases())):
        os.makedirs(os.path.join(out, kind), exist_ok=True)
        for i, (case, schema, datum) in enumerate(cases):
            sid = register(url, "bombs-%s-%s-value" % (kind, case), schema)
            with open(os.path.join(out, kind, "%02d_%s.bin" % (i, case)), "wb") as f:
                f.write(b"\x00" + struct.pack(">i", sid) + datum)


if __name__ == "__main__":
    main()
