#!/usr/bin/env python3
"""test/tools/cdc_topic_check.py — checks the Debezium change topics of
test/tools/debezium_source.sh against what test/tools/cdc_workload.py said
it would cause (groundwork for issue 16; used by test/e2e/cdc_source.sh).

    cdc_topic_check.py --bootstrap B --prefix P --schema S --expect FILE
                       [--mark FILE --expect-after FILE] [--full-identity t1,t2]

Reads every topic P.S.<table> from the beginning (kcat -J), values with or
without an embedded schema, and prints TAP-like "ok - ..." / "not ok - ..."
lines; exits 1 when one is "not ok".

Segment 1 is each topic up to the offset in --mark (a JSON object topic ->
offset, taken just before Connect was killed; all of it without --mark):
  - ops per table: r = "rows" of the init, c/u/d/t (and tombstones) =
    the workload's counts in --expect;
  - before/after: r, c: no before, an after; u: an after, a before only for
    the --full-identity tables (REPLICA IDENTITY FULL); d: no after, a before
    (every column for a full-identity table, else the key columns, the
    others null, or their type's zero (0, "", false) when NOT NULL);
    t: no before, no after, no key;
  - every d is followed (next message of the partition) by a tombstone of
    the same key;
  - source.lsn never decreases along a partition among streamed events, and
    snapshot events (op r) carry no lsn greater than the first streamed one.
Segment 2 (from the mark on; only with --mark): every event whose source.lsn
is not above segment 1's highest is a re-send, and must equal an event of
segment 1 in key, op, before, after and every source field (lsn, txId,
sequence, ts_ms ...): the position the guards will rely on; the events above
it are new and counted against --expect-after.
"""
import argparse
import collections
import json
import subprocess
import sys

results = []


def check(desc, ok, detail=""):
    results.append(ok)
    print("%s - %s" % ("ok" if ok else "not ok", desc))
    if not ok and detail:
        for line in str(detail).splitlines()[:10]:
            print("#   " + line)


def payload(s):
    if s is None:
        return None
    v = json.loads(s)
    if isinstance(v, dict) and set(v) == {"schema", "payload"}:
        return v["payload"]
    return v


def read_topic(bootstrap, topic):
    p = subprocess.run(["kcat", "-C", "-b", bootstrap, "-t", topic, "-o", "beginning", "-e", "-q", "-J"],
                       capture_output=True, text=True)
    if p.returncode != 0:
        return None
    out = []
    for line in p.stdout.splitlines():
        m = json.loads(line)
        out.append({"partition": m["partition"], "offset": m["offset"], "key": payload(m.get("key")),
                    "value": payload(m.get("payload")), "headers": m.get("headers")})
    return out


def lsn(ev):
    return (ev["value"].get("source") or {}).get("lsn")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--prefix", required=True)
    ap.add_argument("--schema", default="cdc")
    ap.add_argument("--expect", required=True)
    ap.add_argument("--mark")
    ap.add_argument("--expect-after")
    ap.add_argument("--full-identity", default="accounts")
    a = ap.parse_args()
    expect = json.load(open(a.expect))
    after = json.load(open(a.expect_after)) if a.expect_after else {}
    mark = json.load(open(a.mark)) if a.mark else {}
    full = set(t for t in a.full_identity.split(",") if t)
    resent_total = 0
    for table in sorted(expect):
        topic = "%s.%s.%s" % (a.prefix, a.schema, table)
        msgs = read_topic(a.bootstrap, topic)
        if msgs is None:
            check("%s: topic readable" % topic, False)
            continue
        cut = mark.get(topic)
        seg1 = [m for m in msgs if cut is None or m["offset"] < cut]
        seg2 = [m for m in msgs if cut is not None and m["offset"] >= cut]
        e = expect[table]

        def counts(seg):
            n = collections.Counter()
            for m in seg:
                n["tombstones" if m["value"] is None else m["value"].get("op")] += 1
            return n

        got = counts(seg1)
        want = collections.Counter({"r": e.get("snapshot_rows", 0), "c": e.get("c", 0), "u": e.get("u", 0),
                                    "d": e.get("d", 0), "t": e.get("t", 0), "tombstones": e.get("tombstones", 0)})
        check("%s: ops r/c/u/d/t/tombstones = %s" % (table, "/".join(str(want[k]) for k in "r c u d t tombstones".split())),
              +got == +want, "got %s" % dict(got))

        # before / after per op
        bad = []
        keycols = None
        for m in seg1:
            v = m["value"]
            if v is None:
                continue
            op, b, af = v.get("op"), v.get("before"), v.get("after")
            if m["key"] is not None:
                keycols = sorted(m["key"])
            if op in ("r", "c") and not (b is None and af is not None):
                bad.append("%s at %d: before %s after %s" % (op, m["offset"], b is not None, af is not None))
            if op == "u" and not (af is not None and (b is not None) == (table in full)):
                bad.append("u at %d: before %s after %s" % (m["offset"], b is not None, af is not None))
            if op == "d":
                if af is not None or b is None:
                    bad.append("d at %d: before %s after %s" % (m["offset"], b is not None, af is not None))
                elif table not in full and any(val not in (None, 0, "", False) for c, val in b.items() if c not in (m["key"] or {})):
                    # key-only before: Debezium fills a NOT NULL non-key column
                    # with its type's zero (0, "", false), the others with null
                    bad.append("d at %d: a non-key value in before of a DEFAULT identity table: %s" % (m["offset"], b))
            if op == "t" and (b is not None or af is not None or m["key"] is not None):
                bad.append("t at %d: before/after/key present" % m["offset"])
        check("%s: before/after as the op and the replica identity (%s) say" % (table, "FULL" if table in full else "DEFAULT"),
              not bad, "\n".join(bad))

        # tombstone after every delete
        bad = []
        byp = collections.defaultdict(list)
        for m in seg1:
            byp[m["partition"]].append(m)
        for ms in byp.values():
            for i, m in enumerate(ms):
                if m["value"] is not None and m["value"].get("op") == "d":
                    nx = ms[i + 1] if i + 1 < len(ms) else None
                    if nx is None or nx["value"] is not None or nx["key"] != m["key"]:
                        bad.append("d at %d not followed by its tombstone" % m["offset"])
        check("%s: a tombstone of the same key follows every delete" % table, not bad, "\n".join(bad))

        # lsn order
        bad = []
        for ms in byp.values():
            streamed = [m for m in ms if m["value"] is not None and m["value"].get("op") != "r"]
            snap = [m for m in ms if m["value"] is not None and m["value"].get("op") == "r"]
            for x, y in zip(streamed, streamed[1:]):
                if lsn(y) is None or lsn(x) is None or lsn(y) < lsn(x):
                    bad.append("lsn %s at %d after %s at %d" % (lsn(y), y["offset"], lsn(x), x["offset"]))
            if snap and streamed and max(lsn(m) or 0 for m in snap) > lsn(streamed[0]):
                bad.append("a snapshot event's lsn is above the first streamed one")
            if snap and any(m["value"]["source"].get("snapshot") in (None, "false") for m in snap):
                bad.append("an op r event without source.snapshot")
        check("%s: source.lsn never decreases along the partition (snapshot events first)" % table, not bad, "\n".join(bad))

        if cut is None:
            continue
        hi = max((lsn(m) or 0 for m in seg1 if m["value"] is not None), default=0)
        index = {}
        for m in seg1:
            if m["value"] is not None and m["value"].get("op") != "r":
                index.setdefault((lsn(m), m["value"]["op"], json.dumps(m["key"], sort_keys=True)), []).append(m)
        resent = [m for m in seg2 if m["value"] is not None and (lsn(m) or 0) <= hi]
        new = [m for m in seg2 if not (m["value"] is not None and (lsn(m) or 0) <= hi)]
        # a re-sent delete's tombstone follows it: a tombstone right after a re-sent d is a re-send too
        bad = []
        for m in resent:
            v = m["value"]
            cands = index.get((lsn(m), v["op"], json.dumps(m["key"], sort_keys=True)), [])
            if not any(c["value"]["before"] == v["before"] and c["value"]["after"] == v["after"]
                       and c["value"]["source"] == v["source"] for c in cands):
                near = cands[0]["value"]["source"] if cands else None
                bad.append("offset %d (op %s, lsn %s) matches no earlier event; source %s vs %s"
                           % (m["offset"], v["op"], lsn(m), json.dumps(v["source"]), json.dumps(near)))
        resent_total += len(resent)
        check("%s: the %d events re-sent after the kill carry the positions and rows they had" % (table, len(resent)),
              not bad, "\n".join(bad))
        ea = after.get(table, {})
        # tombstones of re-sent deletes are re-sent too: count them apart
        resent_d = sum(1 for m in resent if m["value"]["op"] == "d")
        got2 = counts(new)
        got2["tombstones"] -= resent_d
        want2 = collections.Counter({k: ea.get(k, 0) for k in ("c", "u", "d", "t", "tombstones")})
        check("%s: new events after the restart: c/u/d/t/tombstones = %s" % (table, "/".join(str(want2[k]) for k in "c u d t tombstones".split())),
              +got2 == +want2, "got %s" % dict(got2))
    if a.mark:
        print("# re-sent after the kill of Connect: %d events" % resent_total)
    sys.exit(0 if all(results) else 1)


if __name__ == "__main__":
    main()
