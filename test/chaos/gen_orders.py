#!/usr/bin/env python3
"""gen_orders.py -- order events for the kafka_sink chaos tests.

    gen_orders.py OUT MESSAGES KEYS SEED [FIRST_KEY] [FIRST_SEQ]

Writes MESSAGES lines "key<TAB>json" to OUT, in production order.  The JSON
object has exactly the columns of the chaos target table:

    {"order_id": 17, "event_ts": 1700000123456, "amount": "12.34", "note": "s42 k17"}

What the stream exercises (all deterministic for a given SEED):
  - KEYS distinct order ids (FIRST_KEY .. FIRST_KEY+KEYS-1), every one used
    at least once, a hot set of 1% of the keys getting ~20% of the traffic;
  - event_ts out of order: the jitter is much larger than the spacing, so
    most messages arrive after a newer one for their key (stale);
  - ties: ~10% of the messages repeat the current greatest event_ts of
    their key (the later message must win), ~3% repeat an older event_ts
    of the key, ~3% are exact re-sends of an earlier message of the key
    (producer duplicates at a different offset);
  - amount as a JSON string, a JSON number with 0..3 decimals (numeric(18,2)
    rounds) or null; note is unique per message ("s<seq> ..."), so the
    winner of every key is identifiable, with an occasional backslash,
    non-ASCII letter or quote inside.
"""
import json
import random
import sys


def main():
    if len(sys.argv) < 5:
        sys.exit(__doc__)
    out, n, nkeys, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    first_key = int(sys.argv[5]) if len(sys.argv) > 5 else 1
    first_seq = int(sys.argv[6]) if len(sys.argv) > 6 else 0
    if nkeys < 1 or n < nkeys:
        sys.exit("need MESSAGES >= KEYS >= 1")
    rnd = random.Random(seed)
    t0 = 1_700_000_000_000
    hot = max(1, nkeys // 100)
    # every key appears at least once: a shuffled pass over all keys is
    # spread over the stream, the rest is drawn at random
    must = list(range(nkeys))
    rnd.shuffle(must)
    slots = set(rnd.sample(range(n), nkeys))
    must_iter = iter(must)
    history = {}                     # key -> list of (event_ts, value dict)
    best = {}                        # key -> greatest event_ts so far
    extras = ["back\\slash", "caf\u00e9", "quote\"d", "tab\there", "50%"]
    with open(out, "w", encoding="utf-8") as f:
        for i in range(n):
            seq = first_seq + i
            if i in slots:
                k = next(must_iter)
            elif rnd.random() < 0.2:
                k = rnd.randrange(hot)
            else:
                k = rnd.randrange(nkeys)
            key = first_key + k
            h = history.get(key)
            r = rnd.random()
            if h and r < 0.03:
                # producer duplicate: the very same event again
                value = dict(rnd.choice(h)[1])
                f.write("%d\t%s\n" % (key, json.dumps(value, separators=(",", ":"), ensure_ascii=False)))
                continue
            if h and r < 0.13:
                ts = best[key]                      # tie with the current winner
            elif h and r < 0.16:
                ts = rnd.choice(h)[0]               # tie with an older event
            else:
                ts = t0 + i * 100 + rnd.randint(-2_000_000, 200_000)
            a = rnd.random()
            cents = rnd.randint(0, 10_000_000)
            if a < 0.02:
                amount = None
            elif a < 0.5:
                amount = "%d.%02d" % divmod(cents, 100)
            elif a < 0.7:
                amount = cents // 100                                  # integer
            elif a < 0.9:
                amount = float("%d.%d" % (cents // 100, cents % 10))   # one decimal
            else:
                amount = float("%d.%03d" % (cents // 100, rnd.randint(0, 999)))  # rounds
            note = "s%d k%d" % (seq, key)
            if rnd.random() < 0.02:
                note += " " + rnd.choice(extras)
            value = {"order_id": key, "event_ts": ts, "amount": amount, "note": note}
            history.setdefault(key, []).append((ts, value))
            if key not in best or ts > best[key]:
                best[key] = ts
            f.write("%d\t%s\n" % (key, json.dumps(value, separators=(",", ":"), ensure_ascii=False)))


if __name__ == "__main__":
    main()
