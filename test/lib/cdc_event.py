#!/usr/bin/env python3
"""One hand-made Debezium change event (JSON, no Connect schema) as the line
"key|value" the shell tests feed to kcat -K '|' -Z (test/lib/common.sh:
cdc_event).  Sourced by no one; run as

  cdc_event.py OP ID POSITION [--name N] [--table T] [--extra JSON]
               [--before-extra JSON] [--source JSON]

OP: c, r, u, d; t (a truncate: no key, no before/after); tomb (the
tombstone after a delete: the key, an empty value).
POSITION, the source block's connector and position:
  lsn=N                   PostgreSQL: source.lsn
  mysql=FILE:POS:ROW      MySQL: source.file, pos, row (binlog)
  ts=N                    SQL Server: source.ts_ms only (change_lsn is a
                          string), the ts_ms fallback
The row is {"id": ID, "name": N} (N defaults to "n<ID>@<position>") plus
--extra's fields; a delete's before is {"id": ID, "name": null} plus
--before-extra's.  --source's fields are set in the source block last
(e.g. {"row": "3"} for a MySQL row that is not a number).
"""
import argparse
import json

PG_TS = 1700000000000


def source_block(position, table):
    kind, _, arg = position.partition("=")
    if kind == "lsn":
        lsn = int(arg)
        return ({"connector": "postgresql", "lsn": lsn, "ts_ms": PG_TS, "table": table, "schema": "public"},
                str(lsn))
    if kind == "mysql":
        file_, pos, row = arg.split(":")
        return ({"connector": "mysql", "name": "m", "db": "inv", "table": table, "server_id": 1,
                 "file": file_, "pos": int(pos), "row": int(row), "ts_ms": PG_TS, "gtid": None},
                "%s:%s:%s" % (file_, pos, row))
    if kind == "ts":
        ts = int(arg)
        return ({"connector": "sqlserver", "name": "s", "db": "inv", "schema": "dbo", "table": table,
                 "change_lsn": "00000025:00000d98:0002", "commit_lsn": "00000025:00000d98:0003",
                 "event_serial_no": 1, "ts_ms": ts},
                str(ts))
    raise SystemExit("cdc_event.py: position %r is none of lsn=N, mysql=FILE:POS:ROW, ts=N" % position)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("op", choices=["c", "r", "u", "d", "t", "tomb"])
    ap.add_argument("id", type=int)
    ap.add_argument("position")
    ap.add_argument("--name")
    ap.add_argument("--table", default="t")
    ap.add_argument("--extra", default="{}")
    ap.add_argument("--before-extra", default="{}")
    ap.add_argument("--source", default="{}")
    a = ap.parse_args()

    src, where = source_block(a.position, a.table)
    src.update(json.loads(a.source))
    key = json.dumps({"id": a.id})
    if a.op == "tomb":
        print(key + "|")
        return
    after = {"id": a.id, "name": a.name if a.name is not None else "n%d@%s" % (a.id, where)}
    after.update(json.loads(a.extra))
    v = {"before": None, "after": after, "source": src, "op": a.op, "ts_ms": src["ts_ms"] + 1}
    if a.op == "d":
        v["before"] = dict({"id": a.id, "name": None}, **json.loads(a.before_extra))
        v["after"] = None
    if a.op == "t":
        v["after"] = None
        print("|" + json.dumps(v))  # no key, as Debezium sends it
        return
    print(key + "|" + json.dumps(v))


if __name__ == "__main__":
    main()
