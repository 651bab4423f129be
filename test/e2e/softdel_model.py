#!/usr/bin/env python3
"""softdel_model.py -- random events for test/e2e/softdel.sh and the merge
targets they must give with delete_mode soft and hard, computed
independently of the extension by applying the messages one at a time in
offset order with the rules of docs/soft-deletes.md (written from the
issue and the docs, not from the extension's SQL).

    softdel_model.py gen plain|cdc SEED MESSAGES_FILE
    softdel_model.py expect plain|cdc MESSAGES_FILE TIMESTAMPS_FILE SOFT_FILE HARD_FILE
    softdel_model.py switch MESSAGES_FILE TIMESTAMPS_FILE BOUNDARY OUT_FILE
    softdel_model.py retable TABLE plain|schema MESSAGES_FILE OUT_FILE

gen writes "key<TAB>value" lines (an empty value is sent as a tombstone by
kcat -Z; a Debezium truncate has an empty key):
  plain: upserts {"v": order value 1..8 (ties), a, b, c: a random subset,
         explicit nulls} and tombstones of keys 1..K, with re-sent ranges
         (earlier lines again, at later offsets), and a tombstone last;
  cdc:   a source's history (c, u, d followed by its tombstone, truncates)
         with growing lsn positions, and re-sent ranges (a connector
         restarting from an older position).
expect reads the messages and the broker's timestamps ("offset<TAB>ms"),
and writes the soft target and the hard one as the test's COPY prints
them (and into SOFT_FILE.marks how many times the model marked a row) (plain soft: id v a b c deleted deleted_at_ms offset; plain hard:
id v a b c offset; cdc soft: id name qty position deleted deleted_at_ms
offset; cdc hard: id name qty position offset), ordered by id.

The rules, one message at a time:
  plain upsert at v: a missing row is inserted (absent fields null); a
    marked row comes back whole as an insert would write it (unmarked);
    otherwise it applies iff the row's v is null or v >= it, setting the
    fields present;
  plain tombstone: marks an unmarked row (_deleted, _deleted_at = its
    Kafka timestamp, _kafka_offset = its offset; values and v kept);
    nothing on a missing or marked row.  Hard: removes the row.
  change event upsert at position q: stale if q <= the key's latest
    delete position or the latest truncate's; else applies iff the row is
    missing or its position is null or q >= it (a marked row comes back);
  change event delete at p: if the row's position is null or < p, marks it
    (a marked row keeps its _deleted_at), position p, its offset; the
    key's delete position becomes the greater;  hard: removes the row;
  truncate at t: every row with a null position or one < t is marked (a
    marked one keeps its _deleted_at), position t, offset kept; hard:
    removed; the truncate position becomes the greater;
  a tombstone after a change event's delete: nothing.
expect also writes SOFT_FILE.fates, the fates message_fate may give each
offset of the soft target ("0:offset<TAB>fate|fate..."), from the soft
target above: the message a row names is applied, or soft_deleted when it
is the delete that marked the row (a change event's upsert whose row a
truncate marked: truncated), or revived when its upsert found the row
marked (applied or revived when an earlier upsert revived the row since
its last mark: the batch split decides which of the two brought it back);
SOFT_FILE.revivals: how many upserts found their row marked and passed the
guard, one message at a time (a marked row comes back once per mark, so
every pipeline's batches.revived sums to it, whatever the batch split), and
SOFT_FILE.revived their offsets (the revived_offsets of a pipeline reading
one message per batch); SOFT_FILE.held: the offsets whose fate is revived
and what the marked row they brought back held to order by (message_fate's
detail names it); a truncate is truncated; a tombstone for a
key that never had a row is deleted (change events: a delete of such a key
deleted, an upsert the guards kept out deleted or truncated); Debezium's
tombstone after a delete superseded; any other message did not become its
key's row: superseded, stale or overwritten, by where the batches fell.
switch: plain messages into one target whose delete_mode alter_pipeline
changed from hard to soft when the checkpoint was at offset BOUNDARY: a
message below it follows the hard rules, one at or after it the soft
rules, on the same rows (written as the soft target; OUT_FILE.marks and
OUT_FILE.sides: the messages before and after the boundary).
retable: the cdc messages of one source table of a routed pipeline
(docs/routing.md, '{source.table}'): source.table set to TABLE, and with
schema each value wrapped as Kafka Connect's JsonConverter writes it
({"schema", "payload"}, for create_targets); a delete of key 1 (and its
tombstone) is appended to both MESSAGES_FILE and OUT_FILE, so that the
table ends with a marked row; expect reads MESSAGES_FILE (the same
offsets).
Standard library only.
"""
import json
import random
import sys

N = r"\N"
MARKS = [0]                                 # how many times a row was marked (the test can fail)
REVIVALS = []                               # the offsets of the upserts that found their row marked (soft)
HELD = {}                                   # of each, what the marked row held to order by


def gen_plain(rnd, out):
    keys = rnd.randint(4, 7)
    lines = []
    for _ in range(rnd.randint(90, 140)):
        k = rnd.randint(1, keys)
        if rnd.random() < 0.2:
            lines.append("%d\t" % k)
        else:
            v = {"v": rnd.randint(1, 8)}
            for c in ("a", "b", "c"):
                x = rnd.random()
                if x < 0.15:
                    v[c] = None
                elif x < 0.65:
                    v[c] = rnd.randint(0, 99) if c == "c" else "%s%d" % (c, rnd.randint(0, 99))
            lines.append("%d\t%s" % (k, json.dumps(v)))
        if len(lines) > 6 and rnd.random() < 0.08:
            i = rnd.randint(0, len(lines) - 3)
            lines.extend(lines[i:i + rnd.randint(2, 6)])
    # a key upserted, marked and upserted again (its fate revived, the
    # checks of revived can fail), an older copy of the first upsert
    # re-sent after; then a tombstone last of another key, so that a row
    # ends marked (its fate soft_deleted)
    k = rnd.randint(1, keys)
    first = "%d\t%s" % (k, json.dumps({"v": 5, "a": "first"}))
    lines.extend([first, "%d\t" % k, "%d\t%s" % (k, json.dumps({"v": 6, "a": "revived"})), first])
    lines.append("%d\t" % rnd.choice([x for x in range(1, keys + 1) if x != k]))
    out.write("\n".join(lines) + "\n")


def cdc_value(op, k, lsn, after):
    src = {"connector": "postgresql", "lsn": lsn, "ts_ms": 1700000000000, "table": "t", "schema": "public"}
    v = {"before": None, "after": after, "source": src, "op": op, "ts_ms": 1700000000001}
    if op == "d":
        v["before"] = {"id": k, "name": None, "qty": None}
        v["after"] = None
    if op == "t":
        v["after"] = None
    return json.dumps(v)


def gen_cdc(rnd, out):
    keys = rnd.randint(3, 6)
    alive = {}
    lsn = 100
    lines = []
    for _ in range(rnd.randint(60, 100)):
        lsn += rnd.randint(1, 20)
        if rnd.random() < 0.04:
            lines.append("\t" + cdc_value("t", 0, lsn, None))
            alive = {}
            continue
        k = rnd.randint(1, keys)
        if k in alive and rnd.random() < 0.3:
            key = json.dumps({"id": k})
            lines.append(key + "\t" + cdc_value("d", k, lsn, None))
            lines.append(key + "\t")        # the tombstone Debezium sends after a delete
            del alive[k]
            continue
        op = "u" if k in alive else rnd.choice("cr")
        alive[k] = True
        after = {"id": k, "name": "n%d@%d" % (k, lsn), "qty": rnd.randint(0, 50)}
        lines.append(json.dumps({"id": k}) + "\t" + cdc_value(op, k, lsn, after))
        if len(lines) > 8 and rnd.random() < 0.06:
            i = rnd.randint(0, len(lines) - 4)
            lines.extend(lines[i:i + rnd.randint(3, 10)])   # a connector restart re-sends a range
    # a key (not 1: retable deletes it last) written, deleted and created
    # again (revived), the first event re-sent between (older than the
    # delete: stale, it revives nothing)
    k = rnd.randint(2, keys)
    key = json.dumps({"id": k})
    first = key + "\t" + cdc_value("u" if k in alive else "c", k, lsn + 1,
                                   {"id": k, "name": "n%d@%d" % (k, lsn + 1), "qty": 1})
    lines.extend([first, key + "\t" + cdc_value("d", k, lsn + 2, None), key + "\t", first,
                  key + "\t" + cdc_value("c", k, lsn + 3, {"id": k, "name": "n%d@%d" % (k, lsn + 3), "qty": 2})])
    out.write("\n".join(lines) + "\n")


def fmt(x):
    if x is None:
        return N
    if x is True:
        return "t"
    if x is False:
        return "f"
    return str(x)


OTHER = "superseded|stale|overwritten"
# the fate of the message a live row names, by revive()
LIVE_FATE = {"yes": "revived", "maybe": "applied|revived", "no": "applied"}


def write_held(path, fates):
    """The offsets whose fate is revived, with what the row they brought
    back held ("offset<TAB>v = 3", "offset<TAB>source position 120")."""
    with open(path, "w") as f:
        for off in sorted(fates):
            if fates[off] == "revived":
                f.write("%d\t%s\n" % (off, HELD[off]))


def write_fates(path, fates):
    with open(path, "w") as f:
        for off in sorted(fates):
            f.write("0:%d\t%s\n" % (off, fates[off]))


def write_plain_soft(path, rows):
    with open(path, "w") as f:
        for k in sorted(rows):
            r = rows[k]
            f.write("\t".join(fmt(x) for x in (k, r["v"], r["a"], r["b"], r["c"], r["deleted"],
                                                r["deleted_at"], r["off"])) + "\n")


def upsert_plain(rows, k, m, off):
    """A plain upsert of key k at offset off: a missing or marked row is
    written as an insert writes it; otherwise it applies iff the row's v is
    null or m's v >= it (a hard target's rows are never marked)."""
    r = rows.get(k)
    if r is None or r["deleted"]:
        rows[k] = {"v": m["v"], "a": m.get("a"), "b": m.get("b"), "c": m.get("c"),
                   "deleted": False, "deleted_at": None, "off": off, "rev": revive(r, off)}
    elif r["v"] is None or m["v"] >= r["v"]:
        r.update(m)
        r["off"] = off
        r["rev"] = after_revival(r)


def revive(r, off):
    """Whether an upsert that applies to row r (None: no row) revived it:
    "yes" when r is marked (it brought the row back, whatever the batch
    split); else "maybe" when an upsert revived r since its last mark (in
    the same batch segment as this one, this one is the winner that brings
    it back: revived or applied by where the batches fell), else "no"."""
    if r is not None and r["deleted"]:
        REVIVALS.append(off)
        # what the marked row held to order by: a tombstone kept the order
        # value, a change event's delete or truncate left its position
        HELD[off] = ("v = %s" % fmt(r["v"]).replace(N, "NULL")) if "v" in r else "source position %s" % r["pos"]
        return "yes"
    return after_revival(r)


def after_revival(r):
    return "maybe" if r is not None and r.get("rev") in ("yes", "maybe") else "no"


def expect_plain(msgs, ts, soft_out, hard_out):
    soft, hard = {}, {}
    for off, line in enumerate(msgs):
        key, _, val = line.partition("\t")
        k = int(key)
        if val == "":
            r = soft.get(k)
            if r is not None and not r["deleted"]:
                r.update(deleted=True, deleted_at=ts[off], off=off)
                MARKS[0] += 1
            hard.pop(k, None)
            continue
        m = json.loads(val)
        for rows in (soft, hard):
            upsert_plain(rows, k, m, off)
    write_plain_soft(soft_out, soft)
    with open(hard_out, "w") as f:
        for k in sorted(hard):
            r = hard[k]
            f.write("\t".join(fmt(x) for x in (k, r["v"], r["a"], r["b"], r["c"], r["off"])) + "\n")
    fates = {}
    for off, line in enumerate(msgs):
        key, _, val = line.partition("\t")
        r = soft.get(int(key))
        if r is None:
            fates[off] = "deleted"
        elif r["off"] == off:
            fates[off] = "soft_deleted" if r["deleted"] else LIVE_FATE[r["rev"]]
        else:
            fates[off] = OTHER
    write_fates(soft_out + ".fates", fates)
    write_held(soft_out + ".held", fates)


def expect_cdc(msgs, ts, soft_out, hard_out):
    soft, hard = {}, {}
    delpos = {}
    trunc = None
    for off, line in enumerate(msgs):
        key, _, val = line.partition("\t")
        if val == "":
            continue                        # the tombstone after a delete
        e = json.loads(val)
        pos = e["source"]["lsn"]
        if e["op"] == "t":
            for rows, is_soft in ((soft, True), (hard, False)):
                for k in list(rows):
                    r = rows[k]
                    if r["pos"] < pos:
                        if is_soft:
                            MARKS[0] += 1
                            r.update(deleted=True, deleted_at=r["deleted_at"] if r["deleted"] else ts[off],
                                     pos=pos)
                        else:
                            del rows[k]
            trunc = pos if trunc is None else max(trunc, pos)
            continue
        k = json.loads(key)["id"]
        if e["op"] == "d":
            for rows, is_soft in ((soft, True), (hard, False)):
                r = rows.get(k)
                if r is not None and r["pos"] < pos:
                    if is_soft:
                        MARKS[0] += 1
                        r.update(deleted=True, deleted_at=r["deleted_at"] if r["deleted"] else ts[off],
                                 pos=pos, off=off)
                    else:
                        del rows[k]
            delpos[k] = max(delpos.get(k, pos), pos)
            continue
        if (trunc is not None and pos <= trunc) or (k in delpos and pos <= delpos[k]):
            continue                        # stale: the CDC guards
        a = e["after"]
        for rows in (soft, hard):
            r = rows.get(k)
            if r is None or pos >= r["pos"]:
                rows[k] = {"name": a["name"], "qty": a["qty"], "pos": pos, "deleted": False,
                           "deleted_at": None, "off": off, "rev": revive(r, off)}
    with open(soft_out, "w") as f:
        for k in sorted(soft):
            r = soft[k]
            f.write("\t".join(fmt(x) for x in (k, r["name"], r["qty"], r["pos"], r["deleted"],
                                                r["deleted_at"], r["off"])) + "\n")
    with open(hard_out, "w") as f:
        for k in sorted(hard):
            r = hard[k]
            f.write("\t".join(fmt(x) for x in (k, r["name"], r["qty"], r["pos"], r["off"])) + "\n")
    fates = {}
    for off, line in enumerate(msgs):
        key, _, val = line.partition("\t")
        if val == "":
            fates[off] = "superseded"
            continue
        e = json.loads(val)
        if e["op"] == "t":
            fates[off] = "truncated"
            continue
        r = soft.get(json.loads(key)["id"])
        if r is None:
            fates[off] = "deleted" if e["op"] == "d" else "deleted|truncated"
        elif r["off"] == off:
            fates[off] = ("soft_deleted" if e["op"] == "d" else "truncated") if r["deleted"] else LIVE_FATE[r["rev"]]
        else:
            fates[off] = OTHER
    write_fates(soft_out + ".fates", fates)
    write_held(soft_out + ".held", fates)


def expect_switch(msgs, ts, boundary, out):
    rows = {}
    sides = [0, 0]
    for off, line in enumerate(msgs):
        soft = off >= boundary
        sides[soft] += 1
        key, _, val = line.partition("\t")
        k = int(key)
        if val == "":
            r = rows.get(k)
            if not soft:
                rows.pop(k, None)
            elif r is not None and not r["deleted"]:
                r.update(deleted=True, deleted_at=ts[off], off=off)
                MARKS[0] += 1
            continue
        m = json.loads(val)
        upsert_plain(rows, k, m, off)
    write_plain_soft(out, rows)
    with open(out + ".sides", "w") as f:
        f.write("before=%d after=%d\n" % tuple(sides))


ROW_SCHEMA = {"type": "struct", "optional": True, "fields": [
    {"field": "id", "type": "int32", "optional": False},
    {"field": "name", "type": "string", "optional": True},
    {"field": "qty", "type": "int32", "optional": True}]}


def retable(table, wrap, msgs_path, out_path):
    schema = {"type": "struct", "name": "dbserver1.public.%s.Envelope" % table, "fields": [
        dict(ROW_SCHEMA, field="before"), dict(ROW_SCHEMA, field="after"),
        {"field": "source", "type": "struct", "fields": [
            {"field": "connector", "type": "string"}, {"field": "lsn", "type": "int64"},
            {"field": "ts_ms", "type": "int64"}, {"field": "table", "type": "string"},
            {"field": "schema", "type": "string"}]},
        {"field": "op", "type": "string"}, {"field": "ts_ms", "type": "int64", "optional": True}]}
    with open(msgs_path) as f:
        lines = f.read().split("\n")[:-1]
    last = max(json.loads(v)["source"]["lsn"] for _, _, v in (x.partition("\t") for x in lines) if v)
    # a delete of key 1 last, with its tombstone: the table ends with a marked row
    lines += [json.dumps({"id": 1}) + "\t" + cdc_value("d", 1, last + 1, None), json.dumps({"id": 1}) + "\t"]
    with open(msgs_path, "w") as f:
        f.write("\n".join(lines) + "\n")
    with open(out_path, "w") as out:
        for line in lines:
            key, _, val = line.partition("\t")
            if val != "":
                e = json.loads(val)
                e["source"]["table"] = table
                val = json.dumps({"schema": schema, "payload": e} if wrap == "schema" else e)
            out.write(key + "\t" + val + "\n")


def read_inputs(msgs_path, ts_path):
    with open(msgs_path) as f:
        msgs = f.read().split("\n")[:-1]
    ts = {}
    with open(ts_path) as f:
        for line in f:
            o, t = line.split("\t")
            ts[int(o)] = int(t)
    return msgs, ts


def main():
    cmd, kind = sys.argv[1], sys.argv[2]
    if cmd == "gen":
        with open(sys.argv[4], "w") as out:
            (gen_plain if kind == "plain" else gen_cdc)(random.Random(int(sys.argv[3])), out)
        return
    if cmd == "retable":
        retable(sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5])
        return
    if cmd == "switch":
        msgs, ts = read_inputs(sys.argv[2], sys.argv[3])
        expect_switch(msgs, ts, int(sys.argv[4]), sys.argv[5])
        marks = sys.argv[5] + ".marks"
    else:
        msgs, ts = read_inputs(sys.argv[3], sys.argv[4])
        (expect_plain if kind == "plain" else expect_cdc)(msgs, ts, sys.argv[5], sys.argv[6])
        marks = sys.argv[5] + ".marks"
    with open(marks, "w") as f:
        f.write("%d\n" % MARKS[0])
    if cmd == "expect":
        with open(sys.argv[5] + ".revivals", "w") as f:
            f.write("%d\n" % len(REVIVALS))
        with open(sys.argv[5] + ".revived", "w") as f:
            f.write(" ".join(str(o) for o in sorted(REVIVALS)) + "\n")


if __name__ == "__main__":
    main()
