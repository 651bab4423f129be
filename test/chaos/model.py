#!/usr/bin/env python3
"""model.py -- the expected target of a kafka_sink merge pipeline, computed
independently of the extension from the messages that were produced.

    model.py FILE...                  final row per key, as COPY text
    model.py --all FILE...            one row per message (an append-mode
                                      target), in production order
    model.py --explain KEY FILE...    every message of one key, in order

Each FILE holds "key<TAB>json" lines in production order (several files are
read one after the other, as one stream).  The rule: per order_id, the
message with the greatest event_ts wins; on equal event_ts the message
produced later wins (all messages of a key go to one partition, so "later
in production order" is "higher offset").

The output is exactly what

    COPY (SELECT order_id, event_ts, amount, note FROM t ORDER BY order_id) TO STDOUT

prints for the table (order_id bigint, event_ts bigint, amount numeric(18,2),
note text): tab separated, NULL as \\N, amount with two decimals rounded half
away from zero (numeric's rounding), text escaped as COPY's text format does.
Standard library only.
"""
import decimal
import json
import sys

CENTS = decimal.Decimal("0.01")


def copy_text(v):
    """A value as COPY ... TO STDOUT (FORMAT text) writes it."""
    if v is None:
        return "\\N"
    s = str(v)
    out = []
    for ch in s:
        if ch == "\\":
            out.append("\\\\")
        elif ch == "\t":
            out.append("\\t")
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\r":
            out.append("\\r")
        elif ch == "\b":
            out.append("\\b")
        elif ch == "\f":
            out.append("\\f")
        elif ch == "\v":
            out.append("\\v")
        else:
            out.append(ch)
    return "".join(out)


def amount_text(a):
    if a is None:
        return None
    d = decimal.Decimal(str(a)) if not isinstance(a, decimal.Decimal) else a
    # numeric rounds half away from zero, which is decimal's ROUND_HALF_UP
    return str(d.quantize(CENTS, rounding=decimal.ROUND_HALF_UP))


def row_text(m):
    """order_id, event_ts, amount, note of a message, as a COPY text line"""
    return "%d\t%d\t%s\t%s\n" % (int(m["order_id"]), int(m["event_ts"]),
                                 copy_text(amount_text(m.get("amount"))),
                                 copy_text(m.get("note")))


def messages(files):
    n = 0
    for path in files:
        with open(path, encoding="utf-8") as f:
            for line in f:
                line = line.rstrip("\n")
                if not line:
                    continue
                key, _, value = line.partition("\t")
                # numbers as Decimal from their exact JSON text, never float
                m = json.loads(value, parse_float=decimal.Decimal)
                yield n, key, m
                n += 1


def main():
    args = sys.argv[1:]
    explain = None
    if args[:1] == ["--all"]:
        for n, key, m in messages(args[1:]):
            sys.stdout.write(row_text(m))
        return
    if args[:1] == ["--explain"]:
        explain = int(args[1])
        args = args[2:]
    if not args:
        sys.exit(__doc__)
    if explain is not None:
        for n, key, m in messages(args):
            if int(m["order_id"]) == explain:
                print("line %d key %s event_ts %s amount %s note %r"
                      % (n + 1, key, m["event_ts"], amount_text(m.get("amount")), m.get("note")))
        return
    win = {}                         # order_id -> message
    for n, key, m in messages(args):
        oid = int(m["order_id"])
        if str(oid) != key:
            sys.exit("line %d: key %r is not the order_id %d" % (n + 1, key, oid))
        cur = win.get(oid)
        # ">=": on equal event_ts the later message wins
        if cur is None or int(m["event_ts"]) >= int(cur["event_ts"]):
            win[oid] = m
    for oid in sorted(win):
        sys.stdout.write(row_text(win[oid]))


if __name__ == "__main__":
    main()
