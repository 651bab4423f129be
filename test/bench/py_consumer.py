#!/usr/bin/env python3
"""py_consumer.py -- the peer: a plain Python Kafka-to-PostgreSQL upsert
consumer, written the way users write one today.

    py_consumer.py BOOTSTRAP TOPIC TARGET_TABLE EXPECTED BATCH PROGRESS_OUT

confluent-kafka consumer (its own group, from the earliest offset, no auto
commit) + psycopg 3.  Per batch of BATCH messages: json.loads each value,
COPY the fields into a temporary staging table, reduce to one row per key
(DISTINCT ON, newest event_ts, then the later offset) and
INSERT ... ON CONFLICT (order_id) DO UPDATE ... WHERE excluded.event_ts >=
t.event_ts, commit the database transaction, then commit the Kafka offsets
(at-least-once: a crash between the two commits replays the batch).
Stops once EXPECTED messages are committed.  Appends "unix_time committed"
to PROGRESS_OUT after every batch; prints a JSON summary on stdout.
"""
import json
import sys
import time

import psycopg
from confluent_kafka import Consumer, KafkaException


def main():
    bootstrap, topic, target, expected, batch_size, progress = sys.argv[1:7]
    expected, batch_size = int(expected), int(batch_size)
    t0 = time.time()
    consumer = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": "kafka_sink-bench-py-%d" % int(t0 * 1000),
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
    })
    consumer.subscribe([topic])
    conn = psycopg.connect(application_name="kafka_sink bench python consumer")
    conn.execute("CREATE TEMP TABLE stage (order_id bigint, event_ts timestamptz, amount numeric(18,2),"
                 " schema_version int, kpartition int, koffset bigint) ON COMMIT DELETE ROWS")
    conn.commit()
    upsert = ("INSERT INTO %s AS t (order_id, event_ts, amount, schema_version)"
              " SELECT DISTINCT ON (order_id) order_id, event_ts, amount, schema_version FROM stage"
              " ORDER BY order_id, event_ts DESC, koffset DESC"
              " ON CONFLICT (order_id) DO UPDATE SET event_ts = excluded.event_ts,"
              " amount = excluded.amount, schema_version = excluded.schema_version"
              " WHERE excluded.event_ts >= t.event_ts" % target)
    committed = 0
    batches = 0
    first_msg_at = None
    with open(progress, "a") as prog:
        while committed < expected:
            batch = []
            deadline = time.time() + 1.0
            while len(batch) < batch_size and committed + len(batch) < expected:
                msgs = consumer.consume(num_messages=min(10000, batch_size - len(batch)), timeout=0.5)
                for m in msgs:
                    if m.error():
                        raise KafkaException(m.error())
                batch.extend(msgs)
                if batch and first_msg_at is None:
                    first_msg_at = time.time()
                if not msgs and batch and time.time() > deadline:
                    break       # a partial batch after a quiet second
            if not batch:
                continue
            with conn.cursor() as cur:
                with cur.copy("COPY stage FROM STDIN") as cp:
                    for m in batch:
                        d = json.loads(m.value())
                        cp.write_row((d["order_id"], d["event_ts"], d.get("amount"),
                                      d.get("schema_version"), m.partition(), m.offset()))
                cur.execute(upsert)
            conn.commit()
            consumer.commit(asynchronous=False)
            committed += len(batch)
            batches += 1
            prog.write("%.3f %d\n" % (time.time(), committed))
            prog.flush()
    t1 = time.time()
    consumer.close()
    conn.close()
    print(json.dumps({"messages": committed, "batches": batches, "seconds": t1 - t0,
                      "first_message_after_s": (first_msg_at or t1) - t0,
                      "t0": t0, "t1": t1}))


if __name__ == "__main__":
    main()
