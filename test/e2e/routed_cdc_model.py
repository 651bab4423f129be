#!/usr/bin/env python3
"""test/e2e/routed_cdc_model.py: Debezium change events of three source
tables routed by '{source.table}', through a filter and a computed column,
and the tables and fates they must give, computed one event at a time and
independently of the extension (test/e2e/routed_modes.sh).

  gen SEED OUT
      OUT: "key|value" lines (one partition, in source order: each event's
      lsn is greater than the one before), c/u/d events of source tables
      ta, tb, tc (keys 1..KEYS each), some with qty 0 or null, some
      deletes followed by their tombstone.
  expect upsert|update_only OUT_EVENTS DIR
      DIR/<table>.rows: the table's rows as COPY text (id, name, qty,
      name_uc) by id; DIR/fates: "0:offset TAB fate|fate..." for every
      offset; DIR/stats: what the model saw (so that the test can fail).

The pipelines under test have filter => 'qty > 0' and computed =>
{"name_uc": "upper(name)"}.  A create or update whose after image's qty is
not > 0 (null included) is filtered: nothing changes.  A delete passes
whatever the filter.  upsert: a create or update writes the row (name_uc
the upper case of name), a delete removes it.  update_only: the tables
start with the rows of SEED_ROWS (source position 0, no lineage); a create
or update of a key the table does not hold is skipped, of one it holds
replaces the row; a delete removes the row.  A tombstone does nothing
(superseded).

Fates (message_fate and message_fates): filtered; the message the row
names: applied; another message of a key that has a row: superseded,
stale or overwritten (the batches are not known); no row: a delete, or an
event a later delete removed: deleted; an update_only event skipped:
skipped (deleted too when a later delete of its key exists).
"""
import json
import random
import sys

TABLES = ("ta", "tb", "tc")
KEYS = 8
SEED_ROWS = {1: ("seed1", 1), 2: ("seed2", 2), 3: ("seed3", 3)}


def gen(seed, out):
    rnd = random.Random(seed)
    alive = {t: set() for t in TABLES}
    lsn = 1000
    lines = []
    for _ in range(rnd.randint(150, 200)):
        t = rnd.choice(TABLES)
        k = rnd.randint(1, KEYS)
        lsn += rnd.randint(1, 20)
        src = {"connector": "postgresql", "lsn": lsn, "ts_ms": 1700000000000, "schema": "public", "table": t}
        key = json.dumps({"id": k})
        if k in alive[t] and rnd.random() < 0.25:
            before = {"id": k, "name": None, "qty": None}
            lines.append(key + "|" + json.dumps({"before": before, "after": None, "source": src, "op": "d",
                                                 "ts_ms": 1700000000001}))
            alive[t].discard(k)
            if rnd.random() < 0.5:
                lines.append(key + "|")
            continue
        op = "u" if k in alive[t] else "c"
        alive[t].add(k)
        qty = rnd.choice([None, 0] + [rnd.randint(1, 9)] * 6)
        after = {"id": k, "name": "n%s%d_%d" % (t, k, rnd.randint(0, 999)), "qty": qty}
        lines.append(key + "|" + json.dumps({"before": None, "after": after, "source": src, "op": op,
                                             "ts_ms": 1700000000001}))
    with open(out, "w") as f:
        f.write("".join(l + "\n" for l in lines))


def expect(variant, events, out):
    rows = {t: {} for t in TABLES}
    if variant == "update_only":
        for t in TABLES:
            for k, (name, qty) in SEED_ROWS.items():
                rows[t][k] = (name, qty, name.upper(), None)
    msgs = []
    with open(events) as f:
        for offset, line in enumerate(f):
            key, _, value = line.rstrip("\n").partition("|")
            msgs.append((offset, json.loads(key)["id"], json.loads(value) if value else None))
    fate = {}
    outcome = {}             # offset -> what it did: filtered, tomb, written, deleted, skipped
    last_delete = {}         # (table, key) -> offset of its last delete
    stats = {"filtered": 0, "skipped": 0, "written": 0, "deleted": 0}
    for offset, k, ev in msgs:
        if ev is None:
            outcome[offset] = ("tomb", None, k)
            continue
        t = ev["source"]["table"]
        if ev["op"] == "d":
            last_delete[(t, k)] = offset
            if k in rows[t]:
                del rows[t][k]
                stats["deleted"] += 1
            outcome[offset] = ("deleted", t, k)
            continue
        a = ev["after"]
        if not (a["qty"] is not None and a["qty"] > 0):
            outcome[offset] = ("filtered", t, k)
            stats["filtered"] += 1
            continue
        if variant == "update_only" and k not in rows[t]:
            outcome[offset] = ("skipped", t, k)
            stats["skipped"] += 1
            continue
        rows[t][k] = (a["name"], a["qty"], a["name"].upper(), offset)
        outcome[offset] = ("written", t, k)
        stats["written"] += 1
    for offset, k, ev in msgs:
        what, t, k = outcome[offset]
        if what == "tomb":
            fate[offset] = "superseded"
        elif what == "filtered":
            fate[offset] = "filtered"
        elif k in rows[t]:
            fate[offset] = "applied" if rows[t][k][3] == offset else "superseded|stale|overwritten"
        elif what == "skipped":
            fate[offset] = "skipped|deleted" if last_delete.get((t, k), -1) > offset else "skipped"
        else:
            fate[offset] = "deleted"
    for t in TABLES:
        with open("%s/%s.rows" % (out, t), "w") as f:
            for k in sorted(rows[t]):
                name, qty, uc, _ = rows[t][k]
                f.write("%d\t%s\t%s\t%s\n" % (k, name, qty, uc))
    with open(out + "/fates", "w") as f:
        f.write("".join("0:%d\t%s\n" % (o, fate[o]) for o, _, _ in msgs))
    with open(out + "/tables", "w") as f:
        f.write("".join("0:%d\t%s\n" % (o, outcome[o][1] or "") for o, _, _ in msgs))
    with open(out + "/stats", "w") as f:
        f.write(" ".join("%s=%d" % kv for kv in sorted(stats.items())) + "\n")


if __name__ == "__main__":
    if sys.argv[1] == "gen":
        gen(int(sys.argv[2]), sys.argv[3])
    else:
        expect(sys.argv[2], sys.argv[3], sys.argv[4])
