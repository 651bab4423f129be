#!/usr/bin/env python3
"""test/tools/cdc_compare.py — is every source table equal to its replica?
(groundwork for issue 16: the end-to-end CDC test's verdict)

    cdc_compare.py --source CONNINFO --replica CONNINFO [--schema cdc]
                   [--tables a,b,...] [--target '{schema}.{table}'] [--max-diffs 20]

For each table of the source schema (or the --tables listed), the replica
table (--target: a template over {schema} and {table}; default the same
name) must hold the same rows: matched by the source's primary key, every
source column compared (extra replica columns, e.g. lineage, are ignored).
Equality is type-aware, driven by the source column's type: numeric by
value (1.50 = 1.5), timestamptz as an instant (any offset), timestamp, date
and time parsed, uuid case-insensitively, json/jsonb as parsed JSON (a text
replica column holding the JSON text is parsed first), floats exactly,
everything else as text.  Prints each difference (up to --max-diffs per
table) and a line per table; exits 1 on any difference, 2 on a usage or
connection error.  psql does the reading (no Python driver needed).
"""
import argparse
import datetime as dt
import decimal
import json
import subprocess
import sys
import uuid


def psql_json(conninfo, query):
    args = ["psql", "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-d", conninfo]
    p = subprocess.run(args, input="SET TimeZone = 'UTC';\nSET extra_float_digits = 3;\n" + query + "\n",
                       capture_output=True, text=True)
    if p.returncode != 0:
        print("cdc_compare: psql (%s): %s" % (conninfo, p.stderr.strip()), file=sys.stderr)
        sys.exit(2)
    out = p.stdout.strip()
    return json.loads(out, parse_float=decimal.Decimal) if out else None


def qident(name):
    return '"' + name.replace('"', '""') + '"'


def qname(dotted):
    parts = dotted.split(".", 1)
    return ".".join(qident(p) for p in parts)


def columns(conninfo, table):
    """[(name, type)], [primary key columns], or (None, None) when there is no such table"""
    lit = "'" + table.replace("'", "''") + "'"
    r = psql_json(conninfo, """
        SELECT json_build_object(
          'cols', (SELECT json_agg(json_build_array(a.attname, format_type(a.atttypid, a.atttypmod)) ORDER BY a.attnum)
                     FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped),
          'pk',   (SELECT json_agg(a.attname ORDER BY array_position(i.indkey::int2[], a.attnum))
                     FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY (i.indkey)
                    WHERE i.indrelid = c.oid AND i.indisprimary))
          FROM pg_class c WHERE c.oid = to_regclass(%s)""" % lit)
    if not r:
        return None, None
    return [tuple(x) for x in r["cols"]], (r["pk"] or [])


def norm(value, srctype, reptype):
    """a comparable form of value, read from a column of reptype, meaning srctype"""
    if value is None:
        return None
    t = srctype.split("(")[0].strip()
    try:
        if t in ("json", "jsonb"):
            if reptype not in ("json", "jsonb") and isinstance(value, str):
                value = json.loads(value, parse_float=decimal.Decimal)
            return json.dumps(value, sort_keys=True, default=lambda d: str(d.normalize()) if isinstance(d, decimal.Decimal) else str(d))
        if t == "numeric":
            d = decimal.Decimal(str(value))
            return ("numeric", d if d.is_nan() else d.normalize()) if not d.is_nan() else ("numeric", "NaN")
        if t in ("double precision", "real"):
            return ("float", float(value))
        if t in ("integer", "bigint", "smallint"):
            return ("int", int(value))
        if t == "boolean":
            return ("bool", value if isinstance(value, bool) else str(value).lower() in ("t", "true", "1"))
        if t == "timestamp with time zone":
            return ("tstz", dt.datetime.fromisoformat(str(value).replace(" ", "T")).astimezone(dt.timezone.utc))
        if t == "timestamp without time zone":
            return ("ts", dt.datetime.fromisoformat(str(value).replace(" ", "T")))
        if t == "date":
            return ("date", dt.date.fromisoformat(str(value)))
        if t in ("time without time zone", "time"):
            return ("time", dt.time.fromisoformat(str(value)))
        if t == "uuid":
            return ("uuid", uuid.UUID(str(value)))
    except (ValueError, decimal.InvalidOperation, json.JSONDecodeError):
        return ("unparsable as %s" % srctype, value)
    return ("text", str(value) if not isinstance(value, str) else value)


def rows(conninfo, table, cols):
    sel = ", ".join(qident(c) for c in cols)
    r = psql_json(conninfo, "SELECT json_agg(row_to_json(t)) FROM (SELECT %s FROM %s) t" % (sel, qname(table)))
    return r or []


def compare(a, src_table, rep_table):
    scols, pk = columns(a.source, src_table)
    if scols is None:
        return ["%s: no such table in the source" % src_table]
    if not pk:
        return ["%s: has no primary key in the source" % src_table]
    rcols, _ = columns(a.replica, rep_table)
    if rcols is None:
        return ["%s: its replica %s does not exist" % (src_table, rep_table)]
    rtypes = dict(rcols)
    stypes = dict(scols)
    missing = [c for c, _ in scols if c not in rtypes]
    if missing:
        return ["%s: the replica %s lacks the columns %s" % (src_table, rep_table, ", ".join(missing))]
    names = [c for c, _ in scols]

    def keyed(rs, side):
        out, dups = {}, []
        for r in rs:
            k = tuple(norm(r[c], stypes[c], rtypes[c] if side == "replica" else stypes[c]) for c in pk)
            if k in out:
                dups.append(k)
            out[k] = r
        return out, dups

    srows, _ = keyed(rows(a.source, src_table, names), "source")
    rrows, rdups = keyed(rows(a.replica, rep_table, names), "replica")
    diffs = []
    show = lambda k: "(" + ", ".join("%s=%s" % (c, v[1] if isinstance(v, tuple) else v) for c, v in zip(pk, k)) + ")"
    for k in rdups:
        diffs.append("%s: key %s appears more than once in the replica" % (src_table, show(k)))
    for k in sorted(set(srows) - set(rrows), key=repr):
        diffs.append("%s: key %s missing from the replica" % (src_table, show(k)))
    for k in sorted(set(rrows) - set(srows), key=repr):
        diffs.append("%s: key %s in the replica but not in the source (resurrected or never deleted)" % (src_table, show(k)))
    for k in sorted(set(srows) & set(rrows), key=repr):
        s, r = srows[k], rrows[k]
        bad = [c for c in names if norm(s[c], stypes[c], stypes[c]) != norm(r[c], stypes[c], rtypes[c])]
        if bad:
            diffs.append("%s: key %s differs in %s" % (src_table, show(k), "; ".join(
                "%s: source %s, replica %s" % (c, json.dumps(s[c], default=str, ensure_ascii=False),
                                               json.dumps(r[c], default=str, ensure_ascii=False)) for c in bad)))
    print("# %s -> %s: %d source rows, %d replica rows, %d differences" % (src_table, rep_table, len(srows), len(rrows), len(diffs)))
    return diffs


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--source", required=True)
    ap.add_argument("--replica", required=True)
    ap.add_argument("--schema", default="cdc")
    ap.add_argument("--tables", help="comma-separated table names of the schema (default: all its tables)")
    ap.add_argument("--target", default="{schema}.{table}")
    ap.add_argument("--max-diffs", type=int, default=20)
    a = ap.parse_args()
    if a.tables:
        tables = [t.strip() for t in a.tables.split(",") if t.strip()]
    else:
        lit = "'" + a.schema.replace("'", "''") + "'"
        tables = psql_json(a.source, "SELECT json_agg(relname ORDER BY relname) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
                                     " WHERE n.nspname = %s AND c.relkind IN ('r', 'p')" % lit) or []
    if not tables:
        print("cdc_compare: no tables to compare", file=sys.stderr)
        sys.exit(2)
    total = 0
    for t in tables:
        d = compare(a, "%s.%s" % (a.schema, t), a.target.format(schema=a.schema, table=t))
        total += len(d)
        for line in d[:a.max_diffs]:
            print(line)
        if len(d) > a.max_diffs:
            print("... and %d more differences in %s" % (len(d) - a.max_diffs, t))
    print("cdc_compare: %s (%d tables, %d differences)" % ("equal" if total == 0 else "DIFFERENT", len(tables), total))
    sys.exit(1 if total else 0)


if __name__ == "__main__":
    main()
