#!/usr/bin/env python3
"""sampler.py -- samples one number from PostgreSQL at a fixed interval.

    sampler.py OUT INTERVAL_S TARGET SQL

Runs SQL (one row, one numeric column) every INTERVAL_S seconds on one
connection (libpq environment: PGHOST, PGPORT, ...) and appends
"unix_time value" lines to OUT, flushed at once.  Stops on SIGTERM, or
after the first sample that reaches TARGET (0 = never).  A failing query
(the table does not exist yet) is sampled as 0.
"""
import signal
import sys
import time

import psycopg


def main():
    out, interval, target, sql = sys.argv[1], float(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    conn = psycopg.connect(autocommit=True, application_name="kafka_sink bench sampler")
    nxt = time.time()
    with open(out, "a") as f:
        while not stop:
            try:
                v = conn.execute(sql).fetchone()[0] or 0
            except psycopg.Error:
                v = 0
            f.write("%.3f %d\n" % (time.time(), int(v)))
            f.flush()
            if target and v >= target:
                break
            nxt += interval
            d = nxt - time.time()
            if d > 0:
                time.sleep(d)
            else:
                nxt = time.time()


if __name__ == "__main__":
    main()
