#!/usr/bin/env python3
"""cdc_temporal_model.py -- random change events with truncates for
test/e2e/cdc_temporal.sh, and the history table they must give, computed
independently of the extension from the source's own timeline (the rule of
docs/history.md, "Change events" and "Truncates").

    cdc_temporal_model.py SEED OUT_DIR

simulates a source table t (id, name) over keys 1..K: creates of absent
keys, updates and deletes of present ones, key changes (a delete and a
create at one position, as Debezium sends an UPDATE of the key) and
truncates (every present key gone), at increasing positions (lsn).  It
writes

    OUT_DIR/p0, OUT_DIR/p1   the Debezium events (JSON, test/lib/cdc_event.py's
                             shape) as "key|value" lines for kcat -K '|' -Z:
                             a key's events in partition id % 2, a truncate
                             in a random one; then, per partition, a re-sent
                             range (Connect re-sending after a crash);
    OUT_DIR/expect           the table: "id|from|to|name|deleted|current|
                             from_at|to_at" per version, ordered by id and
                             from (from_at, to_at: _valid_from_at and
                             _valid_to_at in epoch microseconds, empty for
                             NULL).

Each position has a commit time, not monotonic in the position (a few
equal to the one before), sent as source.ts_ns, ts_us or ts_ms, or only as
the envelope's ts_ms, or not at all; a version's from_at is its event's
time by the rule of docs/history.md ("Reading by time": the first of
source.ts_ns, ts_us, ts_ms, then the envelope's ts_ms), a truncate's
deleted versions take the truncate's; to_at is the next version's from_at.

The table follows from the timeline alone: each event of a key is the
version starting at its position; a delete, and a truncate for every key
present then, is a deleted version keeping the values it ends; a version
lasts until the key's next one.  How the events are spread over partitions,
re-sent or cut into batches must not change it.  Standard library only.
"""
import json
import os
import random
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from cdc_event import source_block  # noqa: E402  (the event's source block, one rule)

K = 7


TIMES = {}   # position -> (the source block's time fields, the envelope's ts_ms or None, from_at or None)


def commit_time(r, lsn, prev):
    """a position's commit time (µs) and how the event sends it"""
    us = prev if prev is not None and r.random() < 0.1 else 1700000000000000 + lsn * 997 + r.randint(-20000, 20000)
    how = r.choice(["ns", "us", "us", "ms", "envelope", "none"])
    src = {"ns": {"ts_ms": us // 1000, "ts_us": us, "ts_ns": us * 1000 + r.randint(0, 999)},
           "us": {"ts_ms": us // 1000, "ts_us": us}, "ms": {"ts_ms": us // 1000}}.get(how, {})
    env = None if how == "none" else us // 1000 + r.randint(1, 900)     # the connector's, later
    at = {"ns": us, "us": us, "ms": us // 1000 * 1000, "envelope": env * 1000 if env is not None else None,
          "none": None}[how]
    TIMES[lsn] = (src, env, at)
    return us


def event(op, k, lsn, name=None):
    src, _ = source_block("lsn=%d" % lsn, "t")
    del src["ts_ms"]
    src.update(TIMES[lsn][0])
    key = json.dumps({"id": k})
    if op == "tomb":
        return key + "|"
    v = {"before": None, "after": {"id": k, "name": name}, "source": src, "op": op}
    if TIMES[lsn][1] is not None:
        v["ts_ms"] = TIMES[lsn][1]
    if op == "d":
        v["before"], v["after"] = {"id": k, "name": None}, None
    if op == "t":
        v["after"] = None
        return "|" + json.dumps(v)
    return key + "|" + json.dumps(v)


def main():
    seed, out = int(sys.argv[1]), sys.argv[2]
    r = random.Random(seed)
    present = {}                       # key -> name
    versions = {}                      # key -> [[from, name, deleted]]
    parts = [[], []]
    lsn = 1000
    n_truncates = 0
    us = None

    def version(k, v, name, deleted):
        versions.setdefault(k, []).append([v, name, deleted])

    for i in range(r.randint(50, 80)):
        lsn += r.randint(1, 9)
        us = commit_time(r, lsn, us)
        absent = [k for k in range(1, K + 1) if k not in present]
        ops = (["create"] * 3 if absent else []) + (["update"] * 3 + ["delete", "keychange"] if present else [])
        if present and r.random() < 0.07:
            ops = ["truncate"]
        op = r.choice(ops)
        if op == "create":
            k = r.choice(absent)
            present[k] = "n%d.%d" % (k, i)
            parts[k % 2].append(event("c", k, lsn, present[k]))
            version(k, lsn, present[k], False)
        elif op == "update":
            k = r.choice(sorted(present))
            present[k] = "u%d.%d" % (k, i)
            parts[k % 2].append(event("u", k, lsn, present[k]))
            version(k, lsn, present[k], False)
        elif op == "delete" or (op == "keychange" and not absent):
            k = r.choice(sorted(present))
            parts[k % 2] += [event("d", k, lsn), event("tomb", k, lsn)]
            version(k, lsn, present.pop(k), True)
        elif op == "keychange":
            k, k2 = r.choice(sorted(present)), r.choice(absent)
            name = present.pop(k)
            parts[k % 2] += [event("d", k, lsn), event("tomb", k, lsn)]
            version(k, lsn, name, True)
            present[k2] = name
            parts[k2 % 2].append(event("c", k2, lsn, name))
            version(k2, lsn, name, False)
        else:
            n_truncates += 1
            parts[r.randint(0, 1)].append(event("t", 0, lsn))
            for k in sorted(present):
                version(k, lsn, present[k], True)
            present.clear()
    for p in parts:
        if len(p) > 2:
            a = r.randint(0, len(p) - 2)
            p += p[a:r.randint(a + 1, len(p))]
    for i, p in enumerate(parts):
        with open(os.path.join(out, "p%d" % i), "w") as f:
            f.write("".join(line + "\n" for line in p))
    with open(os.path.join(out, "expect"), "w") as f:
        for k in sorted(versions):
            vs = versions[k]
            for j, (v, name, deleted) in enumerate(vs):
                to = vs[j + 1][0] if j + 1 < len(vs) else None
                at = TIMES[v][2]
                to_at = TIMES[to][2] if to is not None else None
                f.write("%d|%d|%s|%s|%s|%s|%s|%s\n" % (k, v, "" if to is None else to, name, str(deleted).lower(),
                                                       str(to is None and not deleted).lower(),
                                                       "" if at is None else at, "" if to_at is None else to_at))
    print("%d events, %d truncates, %d versions" % (sum(len(p) for p in parts), n_truncates,
                                                    sum(len(v) for v in versions.values())))


if __name__ == "__main__":
    main()
