#!/usr/bin/env python3
"""history_model.py -- random events for test/e2e/history.sh and the history
table they must give, computed independently of the extension from the rule
of docs/history.md (written from the issue, not from the extension's SQL).

    history_model.py gen SEED NOW_MS MESSAGES_FILE [EVENTS KEYS]
    history_model.py expect MESSAGES_FILE TIMESTAMPS_FILE VERSIONS_FILE PIT_FILE SEED [TRACKED]
    history_model.py cdc SEED MESSAGES_FILE VERSIONS_FILE [VERSIONS_WITHOUT_TRUNCATES [T1_TRACKING_B]]

gen writes "key<TAB>json" lines (a tombstone is "key<TAB>", sent with
kcat -Z): upserts of keys 1..K with ts (epoch ms) around NOW_MS, partial
messages (random subsets of a, b, c; explicit nulls), ties, late events,
tombstones, and re-sent ranges (the same lines again, later offsets).
With EVENTS and KEYS (test/chaos/history_chaos.sh: a longer stream), that
many events over keys 1..KEYS, order values spread over EVENTS * 40 ms
either side of NOW_MS, and about one re-sent range per 100 events.

expect reads the messages and the Kafka timestamps the broker gave them
("offset<TAB>timestamp_ms" lines: a tombstone's order value), and writes

    VERSIONS_FILE  the table, as COPY (SELECT id, epoch ms of _valid_from,
                   of _valid_to, _deleted, _is_current, a, b, c, _fields
                   ORDER BY id, _valid_from) TO STDOUT prints it;
    PIT_FILE       lines "t<TAB>id<TAB>a<TAB>b<TAB>c": what each key held at
                   chosen times t (point-in-time reads), deleted keys absent.

The rule, per key, over the set of its events (arrival order only breaks
ties: the later offset is the later message):
  - an event at order value v is the version starting at v; it lasts until
    the next version of the key starts (_valid_to), the last one is open
    (_valid_to NULL, _is_current unless it is a delete);
  - several events at one v: taken in offset order, a delete discards the
    events at v before it; an upsert after a delete at v replaces it;
  - a delete at v is a version of its own with _deleted, keeping the values
    of the version it ends;
  - a field absent from an upsert takes the value of the version before v
    (null when that is a delete or there is none); among events at one v, a
    later present field overwrites an earlier one;
  - _fields: the fields the version's own events carried, in column order.

With TRACKED (comma-separated columns: track_history_columns), the versions
above are the states, and the table holds runs of them: a state starts a
new version when its _deleted or one of the TRACKED columns differs from
the state before it; a version runs from its first state's start to the
next version's, with the values of its last state.  VERSIONS_FILE then has
no _fields but the number of states of each version (jsonb_array_length of
_states); the point-in-time reads return the versions' values.

cdc writes Debezium change events (JsonConverter with schemas.enable, so
that create_targets can make the tables) of two source tables t1 and t2,
rows {id, a, b, c}, in a random order with re-sent ones, each at a distinct
source position (lsn); a delete is followed by its tombstone; a few
truncates of a table (a delete at its position of every key of the table
whose version in effect there is live, nothing for the others).  VERSIONS_FILE
has "table<TAB>id<TAB>_valid_from<TAB>_valid_to<TAB>_deleted<TAB>_is_current
<TAB>a<TAB>b<TAB>c<TAB>_valid_from_at<TAB>_valid_to_at" lines, by the same
rule with v the position (a change event carries every column).  T1_TRACKING_B:
table t1's versions with track_history_columns b ("id<TAB>_valid_from<TAB>
_valid_to<TAB>_deleted<TAB>_is_current<TAB>a<TAB>b<TAB>c<TAB>number of
states<TAB>_valid_from_at<TAB>_valid_to_at").
Each position has a commit time (not monotonic in the position, sometimes
equal to another's), sent as source.ts_ns, ts_us or ts_ms, or only as the
envelope's ts_ms, or not at all; _valid_from_at is the first of source.ts_ns,
ts_us, ts_ms, then the envelope's, in microseconds (NULL: none); a version
made of several states starts at its first state's; _valid_to_at is the
next version's _valid_from_at (docs/history.md, "Reading by time"); printed
as epoch microseconds.
Standard library only.
"""
import datetime
import json
import random
import sys

EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)


def iso(ms):
    """epoch ms -> the ISO 8601 text the message carries"""
    d = EPOCH + datetime.timedelta(milliseconds=ms)
    return d.strftime("%Y-%m-%dT%H:%M:%S.") + "%03dZ" % (ms % 1000)


def epoch_ms(text):
    d = datetime.datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=datetime.timezone.utc)
    return (d - EPOCH) // datetime.timedelta(milliseconds=1)

COLS = ["a", "b", "c"]


def gen(seed, now_ms, path, nevents=None, nkeys=None):
    rnd = random.Random(seed)
    small = nevents is None                   # history.sh's few keys and events
    if small:
        nkeys = rnd.randint(3, 6)
        nevents = rnd.randint(60, 110)
        spread = 60000
    else:
        spread = nevents * 40
    lines = []
    used_ts = []
    for _ in range(nevents):
        k = rnd.randint(1, nkeys)
        r = rnd.random()
        if r < 0.12:
            lines.append("%d\t" % k)           # tombstone: v = its Kafka timestamp
            continue
        if r < 0.25 and used_ts:
            ts = rnd.choice(used_ts)          # a tie with an earlier event
        else:
            ts = now_ms + rnd.randint(-spread, spread)
            used_ts.append(ts)
        msg = {"id": k, "ts": iso(ts)}
        for c in COLS:
            p = rnd.random()
            if p < 0.35:
                continue                      # absent
            if p < 0.45:
                msg[c] = None                 # explicit null
            elif c == "c":
                msg[c] = rnd.randint(0, 999)
            else:
                msg[c] = rnd.choice(["x", "y", "z", "w"]) + str(rnd.randint(0, 99))
        lines.append("%d\t%s" % (k, json.dumps(msg)))
    # re-sent ranges: a producer retrying, a connector replaying
    resends = rnd.randint(1, 3) if small else max(1, len(lines) // 100)
    for _ in range(resends):
        i = rnd.randrange(len(lines))
        j = min(len(lines), i + rnd.randint(1, 15))
        lines.extend(lines[i:j])
    with open(path, "w") as f:
        for line in lines:
            f.write(line + "\n")


def versions_of(events):
    """events: list of (v, offset, kind, fields) of one key -> versions."""
    by_v = {}
    for ev in sorted(events, key=lambda e: (e[0], e[1])):
        by_v.setdefault(ev[0], []).append(ev)
    out = []
    prev = None                               # the previous version
    for v in sorted(by_v):
        evs = by_v[v]
        if evs[0][2] == "truncate":
            # a truncate ends the version in effect, if one is live
            if prev is None or prev["deleted"]:
                continue
            evs = [(v, evs[-1][1], "delete", {})]
        # a delete discards what came before it at v; what comes after replaces it
        last_del = max((i for i, e in enumerate(evs) if e[2] == "delete"), default=None)
        if last_del is not None:
            evs = evs[last_del:]
            if len(evs) > 1:
                evs = evs[1:]
        if evs[0][2] == "delete":
            vals = dict(prev["vals"]) if prev else {c: None for c in COLS}
            ver = {"v": v, "deleted": True, "vals": vals, "fields": []}
        else:
            if prev is None or prev["deleted"]:
                vals = {c: None for c in COLS}
            else:
                vals = dict(prev["vals"])
            carried = set()
            for e in evs:
                for c, x in e[3].items():
                    vals[c] = x
                    carried.add(c)
            # the order column is carried by every upsert
            ver = {"v": v, "deleted": False, "vals": vals,
                   "fields": ["ts"] + [c for c in COLS if c in carried]}
        out.append(ver)
        prev = ver
    for i, ver in enumerate(out):
        ver["to"] = out[i + 1]["v"] if i + 1 < len(out) else None
        ver["current"] = ver["to"] is None and not ver["deleted"]
    return out


def tracked_of(states, tracked):
    """the visible versions of one key with track_history_columns"""
    out = []
    for i, st in enumerate(states):
        prev = states[i - 1] if i > 0 else None
        if prev is None or prev["deleted"] != st["deleted"] or \
                any(prev["vals"][c] != st["vals"][c] for c in tracked):
            out.append({"v": st["v"], "n": 0})
        ver = out[-1]
        ver["n"] += 1
        ver["deleted"] = st["deleted"]
        ver["vals"] = st["vals"]
        ver["to"] = st["to"]
    for ver in out:
        ver["current"] = ver["to"] is None and not ver["deleted"]
    return out


def fields_text(fields):
    return "{" + ",".join(fields) + "}"


def cell(x):
    if x is None:
        return "\\N"
    if isinstance(x, bool):
        return "t" if x else "f"
    return str(x)


def expect(msgs_path, ts_path, versions_path, pit_path, seed, tracked=None):
    kafka_ts = {}
    with open(ts_path) as f:
        for line in f:
            off, ts = line.rstrip("\n").split("\t")
            kafka_ts[int(off)] = int(ts)
    events = {}
    with open(msgs_path) as f:
        for off, line in enumerate(f):
            key, _, value = line.rstrip("\n").partition("\t")
            k = int(key)
            if value == "":
                events.setdefault(k, []).append((kafka_ts[off], off, "delete", {}))
                continue
            msg = json.loads(value)
            fields = {c: msg[c] for c in COLS if c in msg}
            events.setdefault(k, []).append((epoch_ms(msg["ts"]), off, "upsert", fields))
    table = {k: versions_of(evs) for k, evs in events.items()}
    if tracked:
        table = {k: tracked_of(states, tracked) for k, states in table.items()}
    with open(versions_path, "w") as f:
        for k in sorted(table):
            for ver in table[k]:
                # _fields: the key is not a version's field
                last = str(ver["n"]) if tracked else fields_text(ver["fields"])
                f.write("\t".join([str(k), str(ver["v"]), cell(ver["to"]), cell(ver["deleted"]),
                                   cell(ver["current"])] + [cell(ver["vals"][c]) for c in COLS]
                                  + [last]) + "\n")
    # point-in-time: at each version start, just before it, and at random times
    rnd = random.Random(seed)
    times = set()
    for vs in table.values():
        for ver in vs:
            times.add(ver["v"])
            times.add(ver["v"] - 1)
    lo = min(times)
    hi = max(times)
    for _ in range(20):
        times.add(rnd.randint(lo - 10, hi + 10))
    times = sorted(rnd.sample(sorted(times), min(40, len(times))))
    with open(pit_path, "w") as f:
        for t in times:
            for k in sorted(table):
                for ver in table[k]:
                    if ver["v"] <= t and (ver["to"] is None or t < ver["to"]) and not ver["deleted"]:
                        f.write("\t".join([str(t), str(k)] + [cell(ver["vals"][c]) for c in COLS]) + "\n")

def cdc(seed, msgs_path, versions_path, untruncated_path=None, tracked_path=None):
    rnd = random.Random(seed)
    row_fields = [{"field": "id", "type": "int32", "optional": False},
                  {"field": "a", "type": "string", "optional": True},
                  {"field": "b", "type": "string", "optional": True},
                  {"field": "c", "type": "int32", "optional": True}]
    schema = {"type": "struct", "name": "env", "fields": [
        {"field": "before", "type": "struct", "optional": True, "fields": row_fields},
        {"field": "after", "type": "struct", "optional": True, "fields": row_fields},
        {"field": "source", "type": "struct", "fields": [
            {"field": "connector", "type": "string"}, {"field": "lsn", "type": "int64"},
            {"field": "ts_ms", "type": "int64", "optional": True},
            {"field": "ts_us", "type": "int64", "optional": True},
            {"field": "ts_ns", "type": "int64", "optional": True}, {"field": "schema", "type": "string"},
            {"field": "table", "type": "string"}]},
        {"field": "op", "type": "string"}, {"field": "ts_ms", "type": "int64", "optional": True}]}
    key_schema = {"type": "struct", "fields": row_fields[:1]}
    lsns = rnd.sample(range(1000, 100000), 120)
    # each position's commit time (µs), not monotonic, a few equal; how it
    # is sent; the time _valid_from_at must take
    source_ts, envelope_ts = {}, {}
    AT.clear()
    prev_us = None
    for lsn in sorted(lsns):
        us = 1700000000000000 + lsn * 1000 + rnd.randint(-3000000, 3000000)
        if prev_us is not None and rnd.random() < 0.1:
            us = prev_us                      # the same time as the one before
        prev_us = us
        how = rnd.choice(["ns", "us", "us", "ms", "ms", "envelope", "none"])
        src = {}
        if how == "ns":
            src = {"ts_ms": us // 1000, "ts_us": us, "ts_ns": us * 1000 + rnd.randint(0, 999)}
        elif how == "us":
            src = {"ts_ms": us // 1000, "ts_us": us}
        elif how == "ms":
            src = {"ts_ms": us // 1000}
        source_ts[lsn] = src
        # the connector's own time, later: used only without the source's
        envelope_ts[lsn] = None if how == "none" else us // 1000 + rnd.randint(1, 5000)
        AT[lsn] = {"ns": us, "us": us, "ms": us // 1000 * 1000,
                   "envelope": envelope_ts[lsn] * 1000 if envelope_ts[lsn] is not None else None,
                   "none": None}[how]
    events = []                               # (table, id, lsn, op, row)
    state = {}
    for lsn in sorted(lsns):                  # the source's own order
        table = rnd.choice(["t1", "t2"])
        k = rnd.randint(1, 4)
        live = state.get((table, k))
        if rnd.random() < 0.04:
            events.append((table, None, lsn, "t", None))
            for key in list(state):
                if key[0] == table:
                    state[key] = None
            continue
        if live is not None and rnd.random() < 0.2:
            events.append((table, k, lsn, "d", live))
            state[(table, k)] = None
            continue
        row = {"id": k, "a": rnd.choice(["x", "y", None]), "b": rnd.choice(["p", "q"]),
               "c": rnd.randint(0, 99)}
        events.append((table, k, lsn, "c" if live is None else "u", row))
        state[(table, k)] = row
    # arrival: mostly in the source's order, some late, some re-sent
    order = list(events)
    for _ in range(len(order) // 4):
        i, j = rnd.randrange(len(order)), rnd.randrange(len(order))
        order[i], order[j] = order[j], order[i]
    order += rnd.sample(events, len(events) // 6)
    # a table is made from its first change event with a key: a truncate
    # that would come before it goes right after it (before, it has no
    # target: quarantined as no_target, see docs/history.md)
    for table in ("t1", "t2"):
        first = next((i for i, e in enumerate(order) if e[0] == table and e[3] != "t"), None)
        if first is None:
            order = [e for e in order if e[0] != table]
            continue
        early = [e for e in order[:first] if e[0] == table]
        rest = [e for e in order[:first] if e[0] != table]
        order = rest + [order[first]] + early + order[first + 1:]
    lines = []
    per_key = {}
    keys_of = {}
    for table, k, lsn, op, row in events:
        if k is not None:
            keys_of.setdefault(table, set()).add(k)
    for table, k, lsn, op, row in order:
        if op == "t":
            payload = {"before": None, "after": None, "op": "t",
                       "source": dict({"connector": "postgresql", "lsn": lsn,
                                       "schema": "public", "table": table}, **source_ts[lsn])}
            if envelope_ts[lsn] is not None:
                payload["ts_ms"] = envelope_ts[lsn]
            for key in keys_of.get(table, ()):
                per_key.setdefault((table, key), []).append((lsn, len(lines), "truncate", {}))
            lines.append("\t%s" % json.dumps({"schema": schema, "payload": payload}))
            continue
        key = json.dumps({"schema": key_schema, "payload": {"id": k}})
        payload = {"before": row if op == "d" else None, "after": None if op == "d" else row,
                   "source": dict({"connector": "postgresql", "lsn": lsn,
                                   "schema": "public", "table": table}, **source_ts[lsn]), "op": op}
        if envelope_ts[lsn] is not None:
            payload["ts_ms"] = envelope_ts[lsn]
        fields = {} if op == "d" else {c: row[c] for c in COLS}
        per_key.setdefault((table, k), []).append((lsn, len(lines), "delete" if op == "d" else "upsert", fields))
        lines.append("%s\t%s" % (key, json.dumps({"schema": schema, "payload": payload})))
        if op == "d":
            lines.append("%s\t" % key)       # the tombstone after it (skipped)
    with open(msgs_path, "w") as f:
        for line in lines:
            f.write(line + "\n")
    write_cdc_versions(versions_path, per_key)
    if untruncated_path:                      # the same without the truncates (they must matter)
        write_cdc_versions(untruncated_path, {tk: [e for e in evs if e[2] != "truncate"]
                                              for tk, evs in per_key.items()})
    if tracked_path:
        with open(tracked_path, "w") as f:
            for (table, k) in sorted(per_key):
                if table != "t1":
                    continue
                for ver in tracked_of(versions_of(per_key[(table, k)]), ["b"]):
                    f.write("\t".join([str(k), str(ver["v"]), cell(ver["to"]), cell(ver["deleted"]),
                                       cell(ver["current"])] + [cell(ver["vals"][c]) for c in COLS]
                                      + [str(ver["n"])] + at_cells(ver)) + "\n")


AT = {}                                       # position -> the commit time _valid_from_at takes (µs)


def at_cells(ver):
    """_valid_from_at and _valid_to_at: the times of the version's start and of the next one's"""
    return [cell(AT[ver["v"]]), cell(AT[ver["to"]] if ver["to"] is not None else None)]


def write_cdc_versions(path, per_key):
    with open(path, "w") as f:
        for (table, k) in sorted(per_key):
            for ver in versions_of(per_key[(table, k)]):
                f.write("\t".join([table, str(k), str(ver["v"]), cell(ver["to"]), cell(ver["deleted"]),
                                   cell(ver["current"])] + [cell(ver["vals"][c]) for c in COLS]
                                   + at_cells(ver)) + "\n")


if __name__ == "__main__":
    if sys.argv[1] == "gen":
        gen(int(sys.argv[2]), int(sys.argv[3]), sys.argv[4],
            *(int(x) for x in sys.argv[5:7]))
    elif sys.argv[1] == "cdc":
        cdc(int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5] if len(sys.argv) > 5 else None,
            sys.argv[6] if len(sys.argv) > 6 else None)
    else:
        expect(sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5], int(sys.argv[6]),
               sys.argv[7].split(",") if len(sys.argv) > 7 else None)
