#!/usr/bin/env python3
"""determinism_model.py -- random partial messages for test/e2e/determinism.sh
and the target they must give, computed independently of the extension by
applying the messages one at a time.

    determinism_model.py SEED MESSAGES_FILE EXPECTED_FILE [MESSAGES [KEYS]]

MESSAGES_FILE gets "key<TAB>json" lines (a tombstone is "key<TAB>", sent
with kcat -Z); EXPECTED_FILE the final table as

    COPY (SELECT id, v, a, b, c, _kafka_offset FROM t ORDER BY id) TO STDOUT

prints it, for the table of determinism.sh:

    id bigint PRIMARY KEY, v bigint (the order column, nullable),
    a text, b text DEFAULT 'dflt', c integer, _kafka_offset bigint

with the rows PRE below already there.  The pipeline: key_format string
(the key is id), order_column v, delete_on_tombstone.

The rule, one message at a time in offset order (single partition):
  - a tombstone deletes the key's row;
  - no row: the message inserts one; an absent field takes the default;
  - a row: the message applies iff the row's v is NULL or the message's v
    is not NULL and >= the row's v (an absent v is NULL); when it applies,
    each present field (null included) overwrites its column, an absent
    one leaves it as it is;
  - _kafka_offset is the offset of the last message applied to the row.
Standard library only.
"""
import json
import random
import sys

COLS = ["a", "b", "c"]
DEFAULTS = {"a": None, "b": "dflt", "c": None}
# the target before the pipeline: key 1 with an order value in the middle
# of the messages' range, key 2 with a NULL order value, key 3 low
PRE = {
    1: {"v": 50, "a": "pre1", "b": "pre1", "c": 1, "_kafka_offset": None},
    2: {"v": None, "a": "pre2", "b": None, "c": 2, "_kafka_offset": None},
    3: {"v": 5, "a": None, "b": "pre3", "c": 3, "_kafka_offset": None},
}


def generate(seed, n=150, keys=6):
    rnd = random.Random(seed)
    msgs = []
    for _ in range(n):
        k = rnd.randint(1, keys)
        if k >= 3 and rnd.random() < 0.08:
            msgs.append((k, None))
            continue
        m = {}
        r = rnd.random()
        if r < 0.07:
            pass                        # v absent
        elif r < 0.12:
            m["v"] = None               # v present and null
        else:
            # a small range, so ties are common; stale ones come for free
            m["v"] = rnd.randint(0, 100)
        for c in COLS:
            if rnd.random() < 0.45:
                if rnd.random() < 0.15:
                    m[c] = None         # present, null
                elif c == "c":
                    m[c] = rnd.randint(-1000, 1000)
                else:
                    m[c] = rnd.choice(["x", "y", "z", "tab\there", "back\\slash", ""]) + str(rnd.randint(0, 99))
        msgs.append((k, m))
    return msgs


def model(msgs):
    rows = {k: dict(v) for k, v in PRE.items()}
    for off, (k, m) in enumerate(msgs):
        if m is None:
            rows.pop(k, None)
            continue
        o = m.get("v")
        row = rows.get(k)
        if row is None:
            row = {"v": o}
            for c in COLS:
                row[c] = m[c] if c in m else DEFAULTS[c]
            row["_kafka_offset"] = off
            rows[k] = row
            continue
        if not (row["v"] is None or (o is not None and o >= row["v"])):
            continue
        if "v" in m:
            row["v"] = o
        for c in COLS:
            if c in m:
                row[c] = m[c]
        row["_kafka_offset"] = off
    return rows


def copy_text(v):
    if v is None:
        return "\\N"
    out = []
    for ch in str(v):
        out.append({"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"}.get(ch, ch))
    return "".join(out)


def main():
    seed, mfile, efile = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    n = int(sys.argv[4]) if len(sys.argv) > 4 else 150
    keys = int(sys.argv[5]) if len(sys.argv) > 5 else 6
    msgs = generate(seed, n, keys)
    with open(mfile, "w") as f:
        for k, m in msgs:
            f.write("%d\t%s\n" % (k, "" if m is None else json.dumps(m)))
    rows = model(msgs)
    with open(efile, "w") as f:
        for k in sorted(rows):
            r = rows[k]
            f.write("\t".join(copy_text(x) for x in [k, r["v"], r["a"], r["b"], r["c"], r["_kafka_offset"]]) + "\n")


if __name__ == "__main__":
    main()
