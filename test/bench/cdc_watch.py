#!/usr/bin/env python3
"""cdc_watch.py -- the CDC rows' helper for debezium_peer.sh's cdc mode.

    cdc_watch.py BOOTSTRAP GROUP TOPICS_REGEX TIMEOUT JAVA_PID OUT_JSON N
        waits until GROUP has committed the end offset of every partition of
        every topic matching TOPICS_REGEX (which must hold N messages in
        all); writes {"done_at", "committed", "end", "progress"} to OUT_JSON;
        exits 1 when JAVA_PID exits first or TIMEOUT seconds pass
    cdc_watch.py --summary WATCH_JSON CONNECT_LOG T0 N CPU_S RSS_KB MSG_BYTES VERSION
        the peer's summary JSON on stdout (and DBZ_PROGRESS, when set, gets
        "unix_time committed" lines like py_consumer.py's)
"""
import json
import os
import re
import sys
import time


def watch(bootstrap, group, regex, timeout, jpid, out, n):
    from confluent_kafka import Consumer, KafkaException, TopicPartition
    rx = re.compile(regex)
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    md = c.list_topics(timeout=10)
    parts = [TopicPartition(t, p) for t, tm in md.topics.items() if rx.fullmatch(t) for p in tm.partitions]
    end = sum(c.get_watermark_offsets(tp, timeout=10)[1] for tp in parts)
    if end != n:
        sys.exit("cdc_watch: the topics /%s/ hold %d messages, expected %d" % (regex, end, n))
    t0 = time.time()
    progress, last = [], -1
    while True:
        try:
            got = sum(max(tp.offset, 0) for tp in c.committed(parts, timeout=10))
        except KafkaException:      # the group's coordinator is not known yet
            got = max(last, 0)
        if got != last:
            progress.append((round(time.time(), 3), got))
            last = got
        if got >= end:
            break
        try:
            os.kill(jpid, 0)
        except OSError:
            sys.exit("cdc_watch: the Connect worker exited (%d of %d committed)" % (got, end))
        if time.time() - t0 > timeout:
            sys.exit("cdc_watch: timeout, %d of %d committed" % (got, end))
        time.sleep(0.1)
    with open(out, "w") as f:
        json.dump({"done_at": time.time(), "committed": got, "end": end, "progress": progress}, f)
    c.close()


def summary(watch_json, log, t0, n, cpu, rss, msg_bytes, version):
    t0, n = float(t0), int(n)
    w = json.load(open(watch_json))
    ready = None                       # the task has its partitions
    for line in open(log, errors="replace"):
        if "Adding newly assigned partitions" in line:
            ready = int(line.split(" ", 1)[0]) / 1000.0
            break
    secs = w["done_at"] - t0
    out = {"connector": "debezium-connector-jdbc %s on Kafka Connect standalone "
                        "(upsert, delete.enabled, truncate.enabled)" % version,
           "t0": round(t0, 3), "seconds": round(secs, 3), "msgs_per_s": round(n / secs, 1),
           "startup_seconds": round(ready - t0, 3) if ready else None,
           "cpu_s": float(cpu), "rss_kb": int(rss), "message_bytes": int(msg_bytes), "progress": w["progress"]}
    print(json.dumps(out))
    if os.environ.get("DBZ_PROGRESS"):
        with open(os.environ["DBZ_PROGRESS"], "w") as f:
            for t, c in w["progress"]:
                f.write("%.3f %d\n" % (t, c))


if __name__ == "__main__":
    a = sys.argv[1:]
    if a and a[0] == "--summary" and len(a) == 9:
        summary(*a[1:])
    elif len(a) == 7:
        watch(a[0], a[1], a[2], float(a[3]), int(a[4]), a[5], int(a[6]))
    else:
        sys.exit(__doc__)
