#!/usr/bin/env python3
"""gen_events.py -- the benchmark's order events, in two encodings.

    gen_events.py N KEYS SEED KAFKA_OUT CSV_DIR CHUNK

Writes N order events, in production order, twice:

  KAFKA_OUT   one message a line, "order_id<TAB>json", for `kcat -P -K '\\t'`:
              {"order_id":123,"event_ts":"2025-01-01 00:00:01.234+00","amount":"123.45","schema_version":1}
  CSV_DIR     the same events as CSV (order_id,event_ts,amount,schema_version,seq)
              in files of CHUNK lines (chunk-000000.csv, ...), for the
              PostgreSQL-only baseline; seq is the event's position in the
              stream (0-based), the baseline's stand-in for the Kafka offset.

Keys are drawn uniformly from 1..KEYS, so a key repeats about N/KEYS times.
event_ts advances 1 ms per event with up to 5 s of jitter backwards, so
some events arrive after a newer one for their key (the ordering guard
matters) and some tie.  Deterministic for a given SEED.  Prints
"events distinct_keys" on stdout.
"""
import datetime
import os
import random
import sys


def main():
    if len(sys.argv) != 7:
        sys.exit(__doc__)
    n, nkeys, seed = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    kafka_out, csv_dir, chunk = sys.argv[4], sys.argv[5], int(sys.argv[6])
    rnd = random.Random(seed)
    os.makedirs(csv_dir, exist_ok=True)
    base = datetime.datetime(2025, 1, 1, tzinfo=datetime.timezone.utc)
    prefix_cache = {}
    seen = bytearray(nkeys + 1)
    distinct = 0
    csv = None
    randint = rnd.randrange
    with open(kafka_out, "w", buffering=1 << 20) as kf:
        for i in range(n):
            if i % chunk == 0:
                if csv:
                    csv.close()
                csv = open(os.path.join(csv_dir, "chunk-%06d.csv" % (i // chunk)), "w",
                           buffering=1 << 20)
            k = randint(nkeys) + 1
            if not seen[k]:
                seen[k] = 1
                distinct += 1
            ms = 5000 + i - randint(5000)          # jitter: up to 5 s older
            sec, msec = divmod(ms, 1000)
            p = prefix_cache.get(sec)
            if p is None:
                p = (base + datetime.timedelta(seconds=sec)).strftime("%Y-%m-%d %H:%M:%S")
                if len(prefix_cache) > 100000:
                    prefix_cache.clear()
                prefix_cache[sec] = p
            ts = "%s.%03d+00" % (p, msec)
            c = randint(1000000)
            amount = "%d.%02d" % divmod(c, 100)
            kf.write('%d\t{"order_id":%d,"event_ts":"%s","amount":"%s","schema_version":1}\n'
                     % (k, k, ts, amount))
            csv.write("%d,%s,%s,1,%d\n" % (k, ts, amount, i))
    if csv:
        csv.close()
    print(n, distinct)


if __name__ == "__main__":
    main()
