#!/usr/bin/env python3
"""The model of test/e2e/transform.sh, independent of the extension.

  transform_model.py gen SEED N OUT        messages "key|json" (one partition)
  transform_model.py expect MSGS ROWS QUAR FILTERED APPLIED
  transform_model.py fates N FILTERED QUAR APPLIED|- OUT   every offset's fate

The pipeline under test has
  filter   => 'price > 0 AND email IS NOT NULL'
  computed => {"total": "price * qty", "email_lc": "lower(email)",
               "cents_each": "(price * 100)::int / qty"}
order_column ts, key id.  A message whose filter is not true is filtered
(NULL is not true); one that passes with qty = 0 raises division_by_zero
in cents_each: quarantined as expression_error; every other one competes
for its key: the greatest ts wins, a tie goes to the later offset.
ROWS: the target's rows as COPY text (id, ts, price, qty, email, total,
email_lc, cents_each) in id order; QUAR: the quarantined offsets; FILTERED:
the filtered offsets; APPLIED: the offsets the rows come from.
"""
import json
import random
import sys
from decimal import Decimal


def gen(seed, n, out):
    rnd = random.Random(seed)
    with open(out, "w") as f:
        for _ in range(n):
            k = rnd.randint(1, 150)
            price = rnd.choice([None, "-1.50", "0"] + ["%d.%02d" % (rnd.randint(0, 500), rnd.randint(0, 99))] * 6)
            qty = rnd.choice([0] + [rnd.randint(1, 40)] * 15)
            email = rnd.choice([None, "User%d@Example.COM" % rnd.randint(1, 9), "x%d@y.org" % k])
            msg = {"id": k, "ts": rnd.randint(1, 400), "qty": qty}
            if price is not None or rnd.random() < 0.5:
                msg["price"] = None if price is None else Decimal(price)
            if email is not None or rnd.random() < 0.5:
                msg["email"] = email
            f.write("%d|%s\n" % (k, encode(msg)))


def encode(msg):
    parts = []
    for key, v in msg.items():
        if isinstance(v, Decimal):
            parts.append('"%s": %s' % (key, v))
        else:
            parts.append('"%s": %s' % (key, json.dumps(v)))
    return "{" + ", ".join(parts) + "}"


def expect(msgs, rows_out, quar_out, filtered_out, applied_out):
    best = {}
    quar = []
    filtered = []
    with open(msgs) as f:
        for offset, line in enumerate(f):
            m = json.loads(line.rstrip("\n").split("|", 1)[1], parse_float=Decimal, parse_int=int)
            price = m.get("price")
            price = None if price is None else Decimal(price)
            email = m.get("email")
            if not (price is not None and price > 0 and email is not None):
                filtered.append(offset)
                continue
            if m["qty"] == 0:
                quar.append(offset)
                continue
            cand = (m["ts"], offset)
            if m["id"] not in best or cand > best[m["id"]][0]:
                best[m["id"]] = (cand, m, price, email)
    with open(rows_out, "w") as f:
        for k in sorted(best):
            _, m, price, email = best[k]
            cents = int(price * 100)
            f.write("\t".join(str(x) for x in (
                k, m["ts"], price, m["qty"], email, price * m["qty"], email.lower(), cents // m["qty"])) + "\n")
    with open(quar_out, "w") as f:
        f.write("".join("%d\n" % o for o in quar))
    with open(filtered_out, "w") as f:
        f.write("".join("%d\n" % o for o in filtered))
    with open(applied_out, "w") as f:
        f.write("".join("%d\n" % best[k][0][1] for k in sorted(best)))


def fates(n, filtered, quar, applied, out):
    """Every offset's fate, "0:offset TAB fate|...": filtered, quarantined,
    applied (the files expect wrote; APPLIED "-": none is told applied,
    without bronze), else superseded, stale or overwritten (by where the
    batches fell), or "applied or superseded" when APPLIED is "-"."""
    fate = {}
    for path, what in ((filtered, "filtered"), (quar, "quarantined"), (applied, "applied")):
        if path == "-":
            continue
        with open(path) as f:
            for line in f:
                fate[int(line)] = what
    other = "applied or superseded" if applied == "-" else "superseded|stale|overwritten"
    with open(out, "w") as f:
        f.write("".join("0:%d\t%s\n" % (o, fate.get(o, other)) for o in range(n)))


if __name__ == "__main__":
    if sys.argv[1] == "gen":
        gen(int(sys.argv[2]), int(sys.argv[3]), sys.argv[4])
    elif sys.argv[1] == "fates":
        fates(int(sys.argv[2]), *sys.argv[3:7])
    else:
        expect(*sys.argv[2:7])
