#!/usr/bin/env python3
"""paced_producer.py -- a steady-rate producer for the latency run.

    paced_producer.py BOOTSTRAP TOPIC RATE SECONDS FIRST_KEY [WARMUP_SECONDS]

Produces RATE messages a second for SECONDS seconds (confluent-kafka,
librdkafka defaults but acks=all), every one with a new order_id
(FIRST_KEY, FIRST_KEY+1, ...) so that every message is an insert, and
event_ts = the wall clock at produce() time, to the microsecond.  First
WARMUP messages (not paced, not measured), then WARMUP_SECONDS (default 0)
of the same paced stream, not measured either (the steady state: the
target's first pages, the broker's new segments, plans), then without a
break the measured run from key measured_first_key.  Messages
are paced in 1 ms slots: the producer sleeps until each slot's start and
then produces the messages due by then.  Prints a JSON summary (messages,
achieved rate, delivery errors, the produce-to-ack latency percentiles).
"""
import datetime
import json
import sys
import time

from confluent_kafka import Producer

WARMUP = 400


def main():
    bootstrap, topic = sys.argv[1], sys.argv[2]
    rate, seconds, key = float(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5])
    warmup_seconds = float(sys.argv[6]) if len(sys.argv) > 6 else 0.0
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all",
                  "queue.buffering.max.messages": 1000000})
    errors = []
    acks = []

    def on_delivery(err, msg):
        if err is not None:
            errors.append(str(err))
        else:
            acks.append(time.time() - msg.timestamp()[1] / 1000.0)

    total = int(rate * seconds)
    utc = datetime.timezone.utc
    # warm-up, not measured: metadata, connections, the consumer's first
    # fetch; these WARMUP messages (keys FIRST_KEY..) are excluded by key
    p.list_topics(topic, timeout=10)
    for _ in range(WARMUP):
        p.produce(topic, key=str(key), value='{"order_id":%d,"event_ts":"%s","amount":"0.00","schema_version":1}'
                  % (key, datetime.datetime.now(utc).isoformat(sep=" ")))
        key += 1
    p.flush(30)
    time.sleep(1.0)
    errors.clear()
    acks.clear()
    warm = int(rate * warmup_seconds)
    measured_first_key = key + warm
    total += warm
    t0 = time.time()
    t_measured = t0
    sent = 0
    while sent < total:
        now = time.time()
        due = min(total, int((now - t0) * rate) + 1)
        while sent < due:
            now = time.time()
            ts = datetime.datetime.fromtimestamp(now, utc).isoformat(sep=" ")
            v = '{"order_id":%d,"event_ts":"%s","amount":"%d.%02d","schema_version":1}' % (
                key, ts, key % 10000, key % 100)
            p.produce(topic, key=str(key), value=v,
                      on_delivery=on_delivery if key >= measured_first_key else None)
            key += 1
            sent += 1
            if sent == warm:
                t_measured = time.time()
        p.poll(0)
        slot = t0 + (sent / rate)
        d = slot - time.time()
        if d > 0:
            time.sleep(min(d, 0.001))
    t_end = time.time()
    p.flush(60)
    acks.sort()

    def pct(q):
        return round(acks[min(len(acks) - 1, int(q * len(acks)))] * 1000, 1) if acks else None

    print(json.dumps({"messages": sent - warm, "seconds": t_end - t_measured,
                      "rate": (sent - warm) / (t_end - t_measured),
                      "warmup_messages": warm, "all_messages": sent,
                      "errors": len(errors), "first_error": errors[0] if errors else None,
                      "ack_ms_p50": pct(0.5), "ack_ms_p99": pct(0.99), "measured_first_key": measured_first_key,
                      "t0": t0, "t1": t_end}))


if __name__ == "__main__":
    main()
