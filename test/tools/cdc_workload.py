#!/usr/bin/env python3
"""test/tools/cdc_workload.py — a deterministic change workload for a CDC
source database (groundwork for issue 16; see test/tools/debezium_source.sh).

    cdc_workload.py [--conninfo CI] [--schema S] [--seed N] [--expect FILE] [--sql] init [--rows N]
    cdc_workload.py [--conninfo CI] [--schema S] [--seed N] [--expect FILE] [--sql] run  [--ops N]
                    [--truncate TABLE | --no-truncate]

Three tables with different key types, in schema S (default cdc):
  S.accounts    id integer                    REPLICA IDENTITY FULL (full `before`)
  S.products    sku text                      REPLICA IDENTITY DEFAULT (key-only `before` on delete)
  S.order_lines (order_id bigint, line_no int) REPLICA IDENTITY DEFAULT
with numeric (constrained and unconstrained), timestamptz, timestamp, date,
time, uuid, jsonb, boolean, double precision, text with unicode, and NULLs.

init    drops and creates the schema, then inserts N rows per table (default 20)
run     N operations (default 100) over the current rows, in transactions of
        1-4 statements: inserts, updates, deletes, primary-key changes (an
        UPDATE of the key: Debezium emits a delete + tombstone + create), and
        one TRUNCATE of one table (default order_lines) two thirds through,
        after which that table gets new rows again.

Deterministic: the same seed on the same database state gives the same SQL
(run reads the current keys, sorted, to choose its targets).  --sql prints
the SQL instead of running it.  --expect FILE adds the Debezium events this
call should cause, per table and op, to FILE (JSON; created if missing):
  init: "rows" and "snapshot_rows" (what a later snapshot emits as op r);
  run:  c, u, d, t (a key change counts one d and one c), "tombstones"
        (one per d), and "rows" (the table's rows afterwards).
The SQL goes through psql (no Python driver needed); CI is a libpq
connection string (default: the libpq environment).
"""
import argparse
import datetime as dt
import decimal
import json
import os
import random
import subprocess
import sys
import uuid

TABLES = ("accounts", "products", "order_lines")

DDL = """
DROP SCHEMA IF EXISTS {s} CASCADE;
CREATE SCHEMA {s};
CREATE TABLE {s}.accounts (
    id         integer PRIMARY KEY,
    name       text NOT NULL,
    balance    numeric(12,2),
    rate       numeric,
    opened     date,
    updated_at timestamptz,
    active     boolean,
    meta       jsonb
);
ALTER TABLE {s}.accounts REPLICA IDENTITY FULL;
CREATE TABLE {s}.products (
    sku        text PRIMARY KEY,
    title      text,
    price      numeric(10,3),
    uid        uuid,
    created    timestamp,
    open_at    time,
    weight     double precision,
    tags       jsonb
);
CREATE TABLE {s}.order_lines (
    order_id   bigint,
    line_no    integer,
    sku        text,
    qty        integer NOT NULL,
    amount     numeric(14,4),
    shipped_at timestamptz,
    ship_date  date,
    ship_time  time(3),
    note       text,
    PRIMARY KEY (order_id, line_no)
);
"""

UNICODE = ["héllo wörld", "naïve café", "日本語テキスト", "emoji 🚀✓", "Ελληνικά", "quote ' and \" and \\ backslash",
           "tab\tand\nnewline", "", "  padded  ", "Zürich–Kraków", "العربية", "ß→SS"]


def lit(v):
    """an SQL literal"""
    if v is None:
        return "NULL"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, decimal.Decimal)):
        return str(v)
    if isinstance(v, float):
        return repr(v) if v == v else "'NaN'"
    if isinstance(v, Json):
        v = json.dumps(v.v, ensure_ascii=False, sort_keys=True)
    return "'" + str(v).replace("'", "''") + "'"


class Json:
    """a jsonb value (any JSON, scalars too)"""
    def __init__(self, v):
        self.v = v


class Gen:
    def __init__(self, seed):
        self.r = random.Random(seed)

    def maybe(self, v, p_null=0.15):
        return None if self.r.random() < p_null else v

    def text(self):
        r = self.r
        return r.choice(UNICODE) + (" #%d" % r.randint(0, 999) if r.random() < 0.5 else "")

    def dec(self, digits, scale):
        r = self.r
        whole = r.choice([0, 1, r.randint(0, 10 ** min(digits - scale, 6)), 10 ** (digits - scale) - 1])
        frac = r.randint(0, 10 ** scale - 1)
        v = decimal.Decimal("%d.%0*d" % (whole, scale, frac))
        return -v if r.random() < 0.3 else v

    def vdec(self):  # unconstrained numeric: Debezium's VariableScaleDecimal
        r = self.r
        return r.choice([decimal.Decimal("0"), decimal.Decimal("1e-20").normalize(),
                         decimal.Decimal("12345678901234567890.123456789"),
                         decimal.Decimal(r.randint(-10 ** 9, 10 ** 9)) / (10 ** r.randint(0, 9)),
                         decimal.Decimal(r.randint(0, 1000))])

    def tstz(self):
        r = self.r
        base = dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc)
        t = base + dt.timedelta(seconds=r.randint(-10 ** 9, 10 ** 8), microseconds=r.choice([0, 1, 500000, r.randint(0, 999999)]))
        off = dt.timezone(dt.timedelta(minutes=r.choice([0, 60, -300, 330, 765])))
        return t.astimezone(off).isoformat()

    def ts(self):
        r = self.r
        t = dt.datetime(2000, 1, 1) + dt.timedelta(seconds=r.randint(0, 10 ** 9), microseconds=r.choice([0, 123456, 999999]))
        return t.isoformat(sep=" ")

    def date(self):
        r = self.r
        return r.choice([dt.date(1970, 1, 1), dt.date(1969, 12, 31), dt.date(2038, 1, 20), dt.date(1900, 2, 28),
                         dt.date(2000, 1, 1) + dt.timedelta(days=r.randint(0, 20000))]).isoformat()

    def time(self, frac_digits=6):
        r = self.r
        us = r.choice([0, 999999, r.randint(0, 999999)])
        us -= us % (10 ** (6 - frac_digits))
        t = dt.time(r.randint(0, 23), r.randint(0, 59), r.randint(0, 59), us)
        return r.choice([t.isoformat(), "23:59:59.999" if frac_digits == 3 else "23:59:59.999999", "00:00:00"])

    def uuid(self):
        return str(uuid.UUID(int=self.r.getrandbits(128), version=4))

    def jsonv(self):
        r = self.r
        return Json(r.choice([{"k": r.randint(0, 9), "tags": ["a", "ü"], "nested": {"x": None, "y": 1.5}},
                         [1, "two", {"three": 3}], {"ключ": "значение", "n": r.randint(-5, 5)}, {}, "a json string",
                         12.25, {"big": 12345678901234567890}]))

    def account(self, k):
        r = self.r
        return {"id": k, "name": self.text(), "balance": self.maybe(self.dec(12, 2)), "rate": self.maybe(self.vdec()),
                "opened": self.maybe(self.date()), "updated_at": self.maybe(self.tstz()),
                "active": self.maybe(r.random() < 0.5), "meta": self.maybe(self.jsonv())}

    def product(self, k):
        r = self.r
        return {"sku": k, "title": self.maybe(self.text()), "price": self.maybe(self.dec(10, 3)), "uid": self.maybe(self.uuid()),
                "created": self.maybe(self.ts()), "open_at": self.maybe(self.time()),
                "weight": self.maybe(r.choice([0.0, 1.5, -2.25, 1e-300, 6.02214076e23, r.random() * 100])),
                "tags": self.maybe(self.jsonv())}

    def line(self, k):
        r = self.r
        return {"order_id": k[0], "line_no": k[1], "sku": self.maybe("SKU-%05d" % r.randint(0, 99)), "qty": r.randint(0, 50),
                "amount": self.maybe(self.dec(14, 4)), "shipped_at": self.maybe(self.tstz()), "ship_date": self.maybe(self.date()),
                "ship_time": self.maybe(self.time(3)), "note": self.maybe(self.text(), 0.4)}


KEYCOLS = {"accounts": ("id",), "products": ("sku",), "order_lines": ("order_id", "line_no")}


class Work:
    def __init__(self, schema, seed, keys):
        self.s = schema
        self.g = Gen(seed)
        self.keys = keys            # table -> sorted list of keys (tuples)
        self.ev = {t: {"c": 0, "u": 0, "d": 0, "t": 0, "tombstones": 0} for t in TABLES}
        self.serial = {"accounts": max([k[0] for k in keys["accounts"]], default=0),
                       "products": max([int(k[0].rsplit("-", 1)[1]) for k in keys["products"]], default=0),
                       "order_lines": max([k[0] for k in keys["order_lines"]], default=1000)}

    def new_key(self, t):
        self.serial[t] += 1
        n = self.serial[t]
        if t == "accounts":
            return (n,)
        if t == "products":
            return (("SKU-%05d" if n % 4 else "sku-ü-%05d") % n,)
        return (n // 3, n % 3 + 1) if n // 3 > 0 else (n, 1)

    def row(self, t, k):
        return {"accounts": lambda: self.g.account(k[0]), "products": lambda: self.g.product(k[0]),
                "order_lines": lambda: self.g.line(k)}[t]()

    def where(self, t, k):
        return " AND ".join("%s = %s" % (c, lit(v)) for c, v in zip(KEYCOLS[t], k))

    def insert(self, t, k=None):
        if k is None:
            k = self.new_key(t)
            while k in self.keys[t]:
                k = self.new_key(t)
        row = self.row(t, k)
        self.keys[t].append(k)
        self.ev[t]["c"] += 1
        return "INSERT INTO %s.%s (%s) VALUES (%s);" % (self.s, t, ", ".join(row), ", ".join(lit(v) for v in row.values()))

    def update(self, t):
        k = self.g.r.choice(self.keys[t])
        row = self.row(t, k)
        cols = [c for c in row if c not in KEYCOLS[t]]
        cols = self.g.r.sample(cols, self.g.r.randint(1, len(cols)))
        self.ev[t]["u"] += 1
        return "UPDATE %s.%s SET %s WHERE %s;" % (self.s, t, ", ".join("%s = %s" % (c, lit(row[c])) for c in cols), self.where(t, k))

    def delete(self, t):
        k = self.g.r.choice(self.keys[t])
        self.keys[t].remove(k)
        self.ev[t]["d"] += 1
        self.ev[t]["tombstones"] += 1
        return "DELETE FROM %s.%s WHERE %s;" % (self.s, t, self.where(t, k))

    def change_key(self, t):
        k = self.g.r.choice(self.keys[t])
        n = self.new_key(t)
        while n in self.keys[t]:
            n = self.new_key(t)
        self.keys[t].remove(k)
        self.keys[t].append(n)
        self.ev[t]["d"] += 1
        self.ev[t]["tombstones"] += 1
        self.ev[t]["c"] += 1
        return "UPDATE %s.%s SET %s WHERE %s;" % (self.s, t, ", ".join("%s = %s" % (c, lit(v)) for c, v in zip(KEYCOLS[t], n)), self.where(t, k))

    def truncate(self, t):
        self.keys[t] = []
        self.ev[t]["t"] += 1
        return "TRUNCATE %s.%s;" % (self.s, t)

    def op(self):
        r = self.g.r
        t = r.choice(TABLES)
        kind = r.choices(["insert", "update", "delete", "change_key"], [35, 35, 15, 10])[0]
        if kind != "insert" and len(self.keys[t]) < 3:
            kind = "insert"
        return getattr(self, kind)(t)


def psql(conninfo, sql_text, query=False):
    args = ["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-A", "-t"]
    if conninfo:
        args += ["-d", conninfo]
    p = subprocess.run(args, input="SET client_min_messages = warning;\n" + sql_text, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit("cdc_workload: psql failed: %s" % p.stderr.strip())
    return p.stdout


def current_keys(conninfo, schema):
    keys = {}
    for t in TABLES:
        cols = KEYCOLS[t]
        out = psql(conninfo, "SELECT json_agg(json_build_array(%s) ORDER BY %s) FROM %s.%s"
                   % (", ".join(cols), ", ".join(cols), schema, t))
        keys[t] = [tuple(k) for k in (json.loads(out.strip() or "null") or [])]  # json_agg of no rows: NULL
    return keys


def add_expect(path, counts):
    old = {}
    if path and os.path.exists(path):
        with open(path) as f:
            old = json.load(f)
    for t, ev in counts.items():
        o = old.setdefault(t, {})
        for k, v in ev.items():
            o[k] = v if k in ("rows", "snapshot_rows") else o.get(k, 0) + v
    if path:
        with open(path, "w") as f:
            json.dump(old, f, indent=1, sort_keys=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--conninfo", default="")
    ap.add_argument("--schema", default="cdc")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--expect")
    ap.add_argument("--sql", action="store_true", help="print the SQL, do not run it")
    sub = ap.add_subparsers(dest="cmd", required=True)
    i = sub.add_parser("init")
    i.add_argument("--rows", type=int, default=20)
    r = sub.add_parser("run")
    r.add_argument("--ops", type=int, default=100)
    r.add_argument("--truncate", default="order_lines", choices=TABLES)
    r.add_argument("--no-truncate", action="store_true")
    a = ap.parse_args()

    if a.cmd == "init":
        w = Work(a.schema, a.seed, {t: [] for t in TABLES})
        stmts = [DDL.format(s=a.schema), "BEGIN;"]
        for t in TABLES:
            stmts += [w.insert(t) for _ in range(a.rows)]
        stmts.append("COMMIT;")
        counts = {t: {"rows": len(w.keys[t]), "snapshot_rows": len(w.keys[t])} for t in TABLES}
    else:
        keys = ({t: [] for t in TABLES} if a.sql and not a.conninfo and "PGDATABASE" not in os.environ
                else current_keys(a.conninfo, a.schema))
        w = Work(a.schema, a.seed, keys)
        stmts = []
        trunc_at = -1 if a.no_truncate else (2 * a.ops) // 3
        n = 0
        while n < a.ops:
            size = w.g.r.randint(1, 4)
            stmts.append("BEGIN;")
            for _ in range(size):
                if n == trunc_at:
                    stmts.append(w.truncate(a.truncate))
                else:
                    stmts.append(w.op())
                n += 1
                if n >= a.ops:
                    break
            stmts.append("COMMIT;")
        counts = {t: dict(w.ev[t], rows=len(w.keys[t])) for t in TABLES}
    text = "\n".join(stmts) + "\n"
    if a.sql:
        sys.stdout.write(text)
    else:
        psql(a.conninfo, "SET TimeZone = 'UTC';\n" + text)
    add_expect(a.expect, counts)


if __name__ == "__main__":
    main()
