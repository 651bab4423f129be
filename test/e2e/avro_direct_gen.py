#!/usr/bin/env python3
"""Random Avro values for test/e2e/avro_direct.sh (plain Avro binary, no
registry: the pipelines read them with value_schema).

  avro_direct_gen.py schema             -> prints the writer schema
  avro_direct_gen.py write DIR N SEED   -> DIR/000001.avro ... one datum each

Values: the edges of int and long, random 32- and 64-bit patterns as
float and double (NaN, the infinities, -0, subnormals included), random
Unicode strings (no NUL, no surrogates), timestamps in millis and micros
over and beyond PostgreSQL's range (those must be refused the same way by
both paths), and a nullable long.
"""
import json
import os
import random
import struct
import sys

SCHEMA = {
    "type": "record", "name": "Direct", "namespace": "ks.e2e",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "i", "type": "int"},
        {"name": "il", "type": "int"},
        {"name": "l", "type": "long"},
        {"name": "f", "type": "float"},
        {"name": "f8", "type": "float"},
        {"name": "d", "type": "double"},
        {"name": "b", "type": "boolean"},
        {"name": "s", "type": "string"},
        {"name": "tsm", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "tsu", "type": {"type": "long", "logicalType": "timestamp-micros"}},
        {"name": "lts", "type": {"type": "long", "logicalType": "local-timestamp-micros"}},
        {"name": "n", "type": ["null", "long"]},
    ],
}


def zz(n):
    n = (n << 1) ^ (n >> 63)
    n &= (1 << 64) - 1
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def rint(r):
    return r.choice([-2**31, 2**31 - 1, 0, -1, 1, r.randint(-2**31, 2**31 - 1)])


def rlong(r):
    return r.choice([-2**63, 2**63 - 1, 0, -1, r.randint(-2**31, 2**31), r.randint(-2**63, 2**63 - 1)])


def rstring(r):
    n = r.choice([0, 1, 3, 10, 30])
    cps = []
    for _ in range(n):
        cp = r.choice([r.randint(1, 0x7F), r.randint(0x80, 0x7FF), r.randint(0x800, 0xD7FF),
                       r.randint(0xE000, 0xFFFF), r.randint(0x10000, 0x10FFFF)])
        cps.append(chr(cp))
    return "".join(cps).encode("utf-8")


def rts_micros(r):
    # PostgreSQL: 4713 BC .. 294276 AD, i.e. about -2.1e17 .. 9.2e18 us from 1970
    return r.choice([r.randint(-2 * 10**17, 10**17), r.randint(-3 * 10**17, 2**63 - 1),
                     -210866803200000000, -210866803200000001, 9223371331200000000 - 1,
                     9223371331200000000, 0, r.randint(-10**12, 10**16)])


def rts_millis(r):
    return r.choice([r.randint(-2 * 10**14, 10**14), r.randint(-3 * 10**14, 10**16),
                     2**62, -2**62, 0, r.randint(-10**9, 10**13)])


def datum(r, i):
    b = bytearray()
    b += zz(i)                                   # id
    b += zz(rint(r))                             # i
    b += zz(rint(r))                             # il
    b += zz(rlong(r))                            # l
    b += struct.pack("<I", r.getrandbits(32))    # f
    b += struct.pack("<I", r.getrandbits(32))    # f8
    b += struct.pack("<Q", r.getrandbits(64))    # d
    b += bytes([r.randint(0, 1)])                # b
    s = rstring(r)
    b += zz(len(s)) + s                          # s
    b += zz(rts_millis(r))                       # tsm
    b += zz(rts_micros(r))                       # tsu
    b += zz(rts_micros(r))                       # lts
    if r.random() < 0.3:
        b += zz(0)                               # n: null
    else:
        b += zz(1) + zz(rlong(r))
    return bytes(b)


def main():
    if sys.argv[1] == "schema":
        print(json.dumps(SCHEMA))
        return
    d, n, seed = sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    r = random.Random(seed)
    os.makedirs(d, exist_ok=True)
    for i in range(1, n + 1):
        with open(os.path.join(d, "%06d.avro" % i), "wb") as f:
            f.write(datum(r, i))


if __name__ == "__main__":
    main()
