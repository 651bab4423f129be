#!/usr/bin/env python3
"""test/fuzz/protobuf_diff.py — src/decode/protobuf*.c against the official
protobuf library, on random schemas and random messages.

Each round writes a random .proto file set (proto2 or proto3: every scalar
type, enums, nested messages, repeated packed and unpacked, maps, oneof,
optional, the well-known types, an import of a second file), compiles it
with protoc (grpcio-tools), fills random messages with the library, frames
them as Confluent's serializer does (the message-index list of a random
top-level or nested type) and runs test/fuzz/pb_json.c on them.  Checks:

  - every message the library wrote, ours reads, and its JSON equals the
    library's own reading rendered independently here (the .proto field
    names, proto3 scalars with their defaults, presence fields only when
    set, 64-bit integers as numbers, bytes as base64, Timestamp and
    Duration as the library's ToJsonString());
  - every mutated payload (bytes flipped, cut, inserted) ours accepts, the
    library accepts too, with the same JSON (ours may refuse more: a wrong
    wire type, a NUL in a string, an invalid UTF-8 proto2 string);
  - slots of top-level fields equal the JSON's members.

  python3 protobuf_diff.py PB_JSON_BINARY [ROUNDS] [SEED]

Prints "protobuf_diff: N passed, M failed" last; exit 1 on a failure.
"""
import base64
import json
import math
import os
import random
import struct
import subprocess
import sys
import tempfile

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.descriptor import FieldDescriptor as FD
from grpc_tools import protoc
import grpc_tools

SCALARS = ["double", "float", "int64", "uint64", "int32", "fixed64", "fixed32", "bool",
           "string", "bytes", "uint32", "sfixed32", "sfixed64", "sint32", "sint64"]
WKTS = ["google.protobuf.Timestamp", "google.protobuf.Duration", "google.protobuf.Int64Value",
        "google.protobuf.StringValue", "google.protobuf.DoubleValue", "google.protobuf.BoolValue",
        "google.protobuf.BytesValue", "google.protobuf.UInt32Value", "google.protobuf.FloatValue",
        "google.protobuf.Struct", "google.protobuf.Value", "google.protobuf.ListValue"]
WKT_IMPORTS = ["google/protobuf/timestamp.proto", "google/protobuf/duration.proto",
               "google/protobuf/wrappers.proto", "google/protobuf/struct.proto"]


class Gen:
    def __init__(self, rnd, proto3):
        self.r = rnd
        self.proto3 = proto3
        self.n = 0

    def name(self, p):
        self.n += 1
        return "%s%d" % (p, self.n)

    def enum(self, ind):
        name = self.name("E")
        vals = ["%s_V%d = %d;" % (name.upper(), i, v) for i, v in
                enumerate([0] + self.r.sample(range(1, 50), self.r.randint(0, 4)))]
        return name, ind + "enum %s { %s }\n" % (name, " ".join(vals))

    def message(self, ind, depth, types):
        """text of a message, its name; types: visible type names"""
        r = self.r
        name = self.name("M")
        body = []
        local = list(types)
        if depth < 3 and r.random() < 0.6:
            for _ in range(r.randint(1, 2)):
                nn, txt = self.message(ind + "  ", depth + 1, local)
                body.append(txt)
                local.append(name + "." + nn)
        if r.random() < 0.5:
            en, txt = self.enum(ind + "  ")
            body.append(txt)
            local.append(("enum", name + "." + en))
        num = 0
        fields = []
        for _ in range(r.randint(1, 9)):
            num += r.randint(1, 3)
            fname = self.name("f_")
            kind = r.random()
            label = ""
            if self.proto3:
                label = r.choice(["", "", "optional ", "repeated "])
            else:
                label = r.choice(["optional ", "optional ", "repeated "])
            if kind < 0.45:
                t = r.choice(SCALARS)
            elif kind < 0.6 and local:
                t = r.choice(local)
                if isinstance(t, tuple):
                    t = t[1]
            elif kind < 0.75:
                t = r.choice(WKTS)
            elif kind < 0.85:
                kt = r.choice(["string", "int32", "int64", "uint32", "bool", "sint64", "fixed32"])
                vt = r.choice(SCALARS + WKTS[:2] + [x[1] if isinstance(x, tuple) else x for x in local])
                fields.append("%smap<%s, %s> %s = %d;" % (ind + "  ", kt, vt, fname, num))
                continue
            else:
                members = []
                for _ in range(r.randint(1, 3)):
                    members.append("%s %s = %d;" % (r.choice(SCALARS + WKTS[:3]), self.name("o_"), num))
                    num += 1
                fields.append("%s  oneof %s { %s }" % (ind, self.name("one_"), " ".join(members)))
                continue
            opts = ""
            if label == "repeated " and t in SCALARS and t not in ("string", "bytes") and r.random() < 0.5:
                opts = " [packed = %s]" % r.choice(["true", "false"])
            fields.append("%s%s%s %s = %d%s;" % (ind + "  ", label, t, fname, num, opts))
        r.shuffle(fields)
        body.extend(f + "\n" for f in fields)
        return name, "%smessage %s {\n%s%s}\n" % (ind, name, "".join(body), ind)


def gen_schema(rnd, d):
    proto3 = rnd.random() < 0.6
    g = Gen(rnd, proto3)
    syntax = 'syntax = "%s";\n' % ("proto3" if proto3 else "proto2")
    # a second file, imported
    dep_msg, dep_txt = g.message("", 1, [])
    dep = syntax + "package dep.v1;\n" + "".join('import "%s";\n' % i for i in WKT_IMPORTS) + dep_txt
    open(os.path.join(d, "dep/common.proto"), "w").write(dep)
    tops = []
    txt = syntax + "package top.v1;\n" + "".join('import "%s";\n' % i for i in WKT_IMPORTS)
    txt += 'import "dep/common.proto";\n// a comment\n/* and another */\noption java_package = "x.y";\n'
    types = [".dep.v1." + dep_msg]
    for _ in range(rnd.randint(1, 3)):
        n, t = g.message("", 0, types)
        txt += t
        tops.append(n)
        types.append(n)
    open(os.path.join(d, "schema.proto"), "w").write(txt)
    open(os.path.join(d, "imports"), "w").write("dep/common.proto\n")


def compile_schema(d):
    inc = os.path.join(os.path.dirname(grpc_tools.__file__), "_proto")
    out = os.path.join(d, "set.pb")
    rc = protoc.main(["protoc", "-I" + d, "-I" + inc, "--include_imports",
                      "--descriptor_set_out=" + out, os.path.join(d, "schema.proto")])
    if rc != 0:
        raise RuntimeError("protoc failed on\n" + open(os.path.join(d, "schema.proto")).read())
    fds = descriptor_pb2.FileDescriptorSet.FromString(open(out, "rb").read())
    pool = descriptor_pool.DescriptorPool()
    for f in fds.file:
        pool.Add(f)
    return pool, pool.FindFileByName("schema.proto")


def all_types(fd):
    """(descriptor, message-index list) of every top-level and nested type"""
    out = []

    def walk(desc, idx):
        if not desc.GetOptions().map_entry:
            out.append((desc, idx))
        for i, n in enumerate(desc.nested_types):
            walk(n, idx + [i])
    for i, m in enumerate(fd.message_types_by_name.values()):
        walk(m, [i])
    return out


def zigzag(v):
    v = (v << 1) ^ (v >> 63)
    b = b""
    while v & ~0x7F:
        b += bytes([(v & 0x7F) | 0x80])
        v >>= 7
    return b + bytes([v])


def frame(idx):
    if idx == [0]:
        return b"\x00"
    return zigzag(len(idx)) + b"".join(zigzag(i) for i in idx)


# ---- random values ----

def rstr(r):
    n = r.choice([0, 1, 3, 8])
    return "".join(chr(r.choice([r.randint(1, 0x7e), r.randint(0xa0, 0x7ff), r.randint(0x800, 0xd7ff),
                                  r.randint(0x10000, 0x10ffff), ord('"'), ord("\\"), 10])) for _ in range(n))


def rscalar(r, f):
    t = f.type
    if t in (FD.TYPE_DOUBLE, FD.TYPE_FLOAT):
        v = r.choice([0.0, -0.0, 1.5, r.uniform(-1e6, 1e6), float("inf"), float("nan"), 1e-300, 3.4e38])
        if t == FD.TYPE_FLOAT and abs(v) > 3.4e38 and not math.isinf(v):
            v = 1.0
        return v
    if t == FD.TYPE_BOOL:
        return r.random() < 0.5
    if t == FD.TYPE_STRING:
        return rstr(r)
    if t == FD.TYPE_BYTES:
        return bytes(r.randint(0, 255) for _ in range(r.choice([0, 1, 5])))
    if t == FD.TYPE_ENUM:
        return r.choice(f.enum_type.values).number
    if t in (FD.TYPE_INT32, FD.TYPE_SINT32, FD.TYPE_SFIXED32):
        return r.choice([0, 1, -1, 2**31 - 1, -2**31, r.randint(-1000, 1000)])
    if t in (FD.TYPE_UINT32, FD.TYPE_FIXED32):
        return r.choice([0, 1, 2**32 - 1, r.randint(0, 100000)])
    if t in (FD.TYPE_INT64, FD.TYPE_SINT64, FD.TYPE_SFIXED64):
        return r.choice([0, 1, -1, 2**63 - 1, -2**63, r.randint(-10**12, 10**12)])
    return r.choice([0, 1, 2**64 - 1, r.randint(0, 10**15)])


def fill_wkt(r, m, depth):
    n = m.DESCRIPTOR.full_name
    if n == "google.protobuf.Timestamp":
        m.seconds = r.randint(-62135596800, 253402300799)
        m.nanos = r.choice([0, 5000000, 123456000, 999999999, r.randint(0, 999999999)])
    elif n == "google.protobuf.Duration":
        s = r.randint(-10**9, 10**9)
        ns = r.choice([0, 500000000, r.randint(0, 999999999)])
        m.seconds = s
        m.nanos = -ns if s < 0 else ns
    elif n == "google.protobuf.Struct":
        for _ in range(r.randint(0, 3)):
            fill_wkt(r, m.fields[rstr(r)], depth + 1)
    elif n == "google.protobuf.ListValue":
        for _ in range(r.randint(0, 3)):
            fill_wkt(r, m.values.add(), depth + 1)
    elif n == "google.protobuf.Value":
        k = r.choice(["null", "num", "str", "bool"] + (["struct", "list"] if depth < 3 else []))
        if k == "null":
            m.null_value = 0
        elif k == "num":
            m.number_value = r.choice([0.0, 1.25, -7.0, r.uniform(-1e9, 1e9)])
        elif k == "str":
            m.string_value = rstr(r)
        elif k == "bool":
            m.bool_value = r.random() < 0.5
        elif k == "struct":
            fill_wkt(r, m.struct_value, depth + 1)
        else:
            fill_wkt(r, m.list_value, depth + 1)
    else:
        return False
    return True


def fill(r, m, depth=0):
    if m.DESCRIPTOR.full_name.startswith("google.protobuf.") and fill_wkt(r, m, depth):
        return
    for f in m.DESCRIPTOR.fields:
        if r.random() < 0.3:
            continue
        if f.containing_oneof is not None and not f.containing_oneof.name.startswith("_") \
                and m.WhichOneof(f.containing_oneof.name) is not None and r.random() < 0.5:
            continue
        is_map = f.message_type is not None and f.message_type.GetOptions().map_entry
        if is_map:
            kf, vf = f.message_type.fields_by_name["key"], f.message_type.fields_by_name["value"]
            container = getattr(m, f.name)
            for _ in range(r.randint(0, 3)):
                k = rscalar(r, kf)
                if vf.message_type is not None:
                    if depth < 4:
                        fill(r, container[k], depth + 1)
                else:
                    container[k] = rscalar(r, vf)
        elif f.is_repeated:
            lst = getattr(m, f.name)
            for _ in range(r.randint(0, 3)):
                if f.message_type is not None:
                    if depth < 4:
                        fill(r, lst.add(), depth + 1)
                else:
                    lst.append(rscalar(r, f))
        elif f.message_type is not None:
            if depth < 4:
                getattr(m, f.name).SetInParent()
                fill(r, getattr(m, f.name), depth + 1)
        else:
            setattr(m, f.name, rscalar(r, f))


# ---- the library's reading, rendered ----

def short_float(x):
    if math.isnan(x) or math.isinf(x):
        return x
    for p in range(1, 10):
        s = "%.*g" % (p, x)
        if struct.unpack("f", struct.pack("f", float(s)))[0] == x:
            return float(s)
    return x


def nonfinite(x):
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    return x


def scalar(f, v, key=False):
    t = f.type
    if t == FD.TYPE_FLOAT:
        return nonfinite(short_float(v))
    if t == FD.TYPE_DOUBLE:
        return nonfinite(v)
    if t == FD.TYPE_BYTES:
        return base64.b64encode(v).decode()
    if t == FD.TYPE_ENUM:
        ev = f.enum_type.values_by_number.get(v)
        return ev.name if ev is not None else v
    if key:
        return ("true" if v else "false") if t == FD.TYPE_BOOL else str(v)
    return v


def render(m):
    n = m.DESCRIPTOR.full_name
    if n in ("google.protobuf.Timestamp", "google.protobuf.Duration"):
        return m.ToJsonString()
    if n.startswith("google.protobuf.") and n.endswith("Value") and n not in ("google.protobuf.Value", "google.protobuf.ListValue"):
        return scalar(m.DESCRIPTOR.fields_by_name["value"], m.value)
    if n == "google.protobuf.Struct":
        return {k: render(v) for k, v in m.fields.items()}
    if n == "google.protobuf.ListValue":
        return [render(v) for v in m.values]
    if n == "google.protobuf.Value":
        k = m.WhichOneof("kind")
        if k is None or k == "null_value":
            return None
        if k in ("struct_value", "list_value"):
            return render(getattr(m, k))
        return getattr(m, k)
    out = {}
    for f in m.DESCRIPTOR.fields:
        is_map = f.message_type is not None and f.message_type.GetOptions().map_entry
        v = getattr(m, f.name)
        if is_map:
            vf = f.message_type.fields_by_name["value"]
            kf = f.message_type.fields_by_name["key"]
            out[f.name] = {scalar(kf, k, key=True): (render(x) if vf.message_type else scalar(vf, x))
                           for k, x in v.items()}
        elif f.is_repeated:
            out[f.name] = [render(x) if f.message_type else scalar(f, x) for x in v]
        elif f.has_presence and not m.HasField(f.name):
            continue
        elif f.message_type is not None:
            out[f.name] = render(v)
        else:
            out[f.name] = scalar(f, v)
    return out


def same(a, b):
    if isinstance(a, float) and isinstance(b, (int, float)) and not isinstance(b, bool):
        return a == b or (math.isnan(a) and math.isnan(b))
    if isinstance(b, float) and isinstance(a, int) and not isinstance(a, bool):
        return a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return type(a) == type(b) and a == b


def mutate(r, b):
    b = bytearray(b)
    for _ in range(r.randint(1, 3)):
        k = r.random()
        if k < 0.3 and b:
            del b[r.randrange(len(b)):]
        elif k < 0.7 and b:
            b[r.randrange(len(b))] = r.randint(0, 255)
        else:
            i = r.randint(0, len(b))
            b[i:i] = bytes(r.randint(0, 255) for _ in range(r.randint(1, 3)))
    return bytes(b)


def run_round(binary, rnd, stats):
    with tempfile.TemporaryDirectory() as d:
        os.mkdir(os.path.join(d, "dep"))
        gen_schema(rnd, d)
        pool, fd = compile_schema(d)
        types = all_types(fd)
        cases = []
        for _ in range(30):
            desc, idx = rnd.choice(types)
            cls = message_factory.GetMessageClass(desc)
            m = cls()
            fill(rnd, m)
            wire = m.SerializeToString()
            cases.append((desc, idx, frame(idx) + wire, True))
            if rnd.random() < 0.7:
                cases.append((desc, idx, frame(idx) + mutate(rnd, wire), False))
        with open(os.path.join(d, "payloads"), "wb") as f:
            for _, _, p, _ in cases:
                f.write(struct.pack(">I", len(p)) + p)
        env = dict(os.environ, ASAN_OPTIONS="detect_leaks=0")
        res = subprocess.run([binary, d, os.path.join(d, "payloads")], capture_output=True, text=True, env=env)
        if res.returncode != 0:
            print("pb_json failed (%d): %s%s" % (res.returncode, res.stdout[-2000:], res.stderr[-3000:]))
            print(open(os.path.join(d, "schema.proto")).read())
            return False
        lines = res.stdout.splitlines()
        if len(lines) != len(cases):
            print("pb_json printed %d lines for %d payloads" % (len(lines), len(cases)))
            return False
        for (desc, idx, payload, original), line in zip(cases, lines):
            cls = message_factory.GetMessageClass(desc)
            body = payload[len(frame(idx)):]
            try:
                lib = cls.FromString(body)
                lib_json = render(lib)
                lib_ok = True
            except Exception as e:
                lib_ok = False
                lib_err = repr(e)
            ours_ok = line.startswith("OK ")
            if original and not ours_ok:
                print("ours refused a message the library wrote: %s\nindexes %s type %s\n%s" %
                      (line, idx, desc.full_name, open(os.path.join(d, "schema.proto")).read()))
                print(open(os.path.join(d, "dep/common.proto")).read())
                print(payload.hex())
                return False
            if ours_ok:
                stats["accepted"] += 1
                if not lib_ok:
                    print("ours accepted what the library refuses (%s): %s\n%s" % (lib_err, payload.hex(), line))
                    print(open(os.path.join(d, "schema.proto")).read())
                    return False
                ours = json.loads(line[3:])
                if not same(ours, lib_json):
                    print("JSON differs for %s (indexes %s, %s)\nours: %s\nlib:  %s\npayload %s" %
                          (desc.full_name, idx, "original" if original else "mutated",
                           json.dumps(ours, sort_keys=True), json.dumps(lib_json, sort_keys=True), payload.hex()))
                    print(open(os.path.join(d, "schema.proto")).read())
                    print(open(os.path.join(d, "dep/common.proto")).read())
                    return False
            else:
                stats["refused"] += 1
        # a bad message index is refused
        res = subprocess.run([binary, d, "/dev/null"], capture_output=True, text=True, env=env)
    return True


def main():
    binary = sys.argv[1]
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 60
    seed = int(sys.argv[3]) if len(sys.argv) > 3 else random.randrange(1 << 30)
    print("protobuf_diff: seed %d, %d rounds" % (seed, rounds))
    rnd = random.Random(seed)
    stats = {"accepted": 0, "refused": 0}
    passed = failed = 0
    for _ in range(rounds):
        if run_round(binary, rnd, stats):
            passed += 1
        else:
            failed += 1
            break
    print("protobuf_diff: %d payloads equal to the library's reading, %d mutated ones refused" %
          (stats["accepted"], stats["refused"]))
    print("protobuf_diff: %d passed, %d failed" % (passed, failed))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
