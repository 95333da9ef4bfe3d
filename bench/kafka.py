"""Kafka sink benchmark: records per second end to end, against the broker's raw consume rate.

    python bench/kafka.py [--quick] [--records N] [--partitions P] [--workers W]
                          [--commit-interval S] [--bootstrap HOST:PORT]

Without ``--bootstrap`` a local broker is started (``LocalBroker``: noida-db on 127.0.0.1).
One run:

1. produce ``--records`` keyed JSON records (default 200,000; ``--quick``: 20,000) into a new
   topic of ``--partitions`` partitions (default 6); not timed;
2. ``raw``: a plain confluent-kafka consumer reads the whole topic (every partition assigned,
   from the beginning, values not decoded); timed until every partition's end offset is
   reached;
3. ``sink``: ``KafkaSink(workers=W)`` into a new merge-on-read table (key ``id``, ordering
   ``ts``, partitioned by ``part``); timed from ``start()`` until the table's latest commit
   records every partition's end offset; then the table is checked (every id exactly once),
   else the script exits 1.

The last line printed is the summary::

    kafka: records=N partitions=P workers=W commits=C sink_s=X sink_rps=X raw_consume_s=X raw_consume_rps=X sink_vs_raw=X

``sink_vs_raw`` = sink_rps / raw_consume_rps.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import lakesdk as lk  # noqa: E402
from lakesdk.streaming.kafka import KafkaSink  # noqa: E402
from lakesdk.streaming.kafka.worker import latest_commit_offsets  # noqa: E402
from lakesdk.testing.kafka import LocalBroker  # noqa: E402


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)
    for _ in range(100):
        md = admin.list_topics(timeout=10)
        if topic in md.topics and len(md.topics[topic].partitions) == partitions:
            return
        time.sleep(0.1)
    raise RuntimeError(f"topic {topic} did not show {partitions} partitions")


def produce(bootstrap: str, topic: str, n: int) -> float:
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.num.messages": 10000,
                  "queue.buffering.max.messages": 1000000})
    t0 = time.perf_counter()
    for i in range(n):
        value = json.dumps({"id": i, "ts": i, "part": f"p{i % 4}", "amount": i * 0.5, "name": f"user-{i % 977}"})
        while True:
            try:
                p.produce(topic, key=str(i).encode(), value=value.encode())
                break
            except BufferError:
                p.poll(0.05)
        if i % 5000 == 0:
            p.poll(0)
    left = p.flush(120)
    if left:
        raise RuntimeError(f"{left} records were not delivered")
    return time.perf_counter() - t0


def end_offsets(bootstrap: str, topic: str, partitions: int) -> dict[int, int]:
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-probe-{uuid.uuid4().hex}"})
    try:
        return {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(partitions)}
    finally:
        c.close()


def raw_consume(bootstrap: str, topic: str, ends: dict[int, int]) -> tuple[float, int]:
    """Seconds to read every record of the topic with a plain consumer, and the records read."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-raw-{uuid.uuid4().hex}",
                  "enable.auto.commit": False, "enable.partition.eof": False})
    try:
        t0 = time.perf_counter()
        c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in ends])
        seen = {p: 0 for p in ends}
        n = 0
        while any(seen[p] < e for p, e in ends.items()):
            for m in c.consume(num_messages=10000, timeout=1.0) or []:
                if m.error():
                    continue
                n += 1
                seen[m.partition()] = m.offset() + 1
        return time.perf_counter() - t0, n
    finally:
        c.close()


def run_sink(bootstrap: str, topic: str, table, ends: dict[int, int], workers: int,
             interval: float) -> tuple[float, int]:
    sink = KafkaSink(table.path, topic, bootstrap, workers=workers, commit_interval=interval, write_timeout=120,
                     group=f"bench-sink-{uuid.uuid4().hex[:8]}")
    t0 = time.perf_counter()
    sink.start()
    try:
        while True:
            offs, _ = latest_commit_offsets(table, topic)
            if all(offs.get(p, 0) >= e for p, e in ends.items()):
                break
            st = sink.status()
            if st.errors:
                raise RuntimeError(f"sink worker failed: {st.errors}")
            time.sleep(0.05)
        secs = time.perf_counter() - t0
    finally:
        sink.stop()
    return secs, len(table.timeline.commits)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="20,000 records")
    ap.add_argument("--records", type=int, default=None)
    ap.add_argument("--partitions", type=int, default=6)
    ap.add_argument("--workers", type=int, default=1, help="sink workers (threads of this process)")
    ap.add_argument("--commit-interval", type=float, default=2.0)
    ap.add_argument("--bootstrap", default=None, help="an existing broker (default: start a LocalBroker)")
    args = ap.parse_args(argv)
    n = args.records or (20_000 if args.quick else 200_000)
    broker = None if args.bootstrap else LocalBroker().start()
    bootstrap = args.bootstrap or broker.bootstrap  # type: ignore[union-attr]
    root = tempfile.mkdtemp(prefix="lakesdk-bench-kafka-")
    try:
        topic = f"bench-{uuid.uuid4().hex[:8]}"
        create_topic(bootstrap, topic, args.partitions)
        produce_s = produce(bootstrap, topic, n)
        ends = end_offsets(bootstrap, topic, args.partitions)
        print(f"produced {sum(ends.values())} records into {args.partitions} partitions in {produce_s:.2f} s "
              f"({n / produce_s:,.0f} records/s, not timed)", flush=True)
        raw_s, raw_n = raw_consume(bootstrap, topic, ends)
        print(f"raw consume: {raw_n} records in {raw_s:.2f} s ({raw_n / raw_s:,.0f} records/s)", flush=True)
        table = lk.Lake(os.path.join(root, "lake")).create_table("events", key="id", ordering="ts",
                                                                 partition_by="part", table_type="mor")
        sink_s, commits = run_sink(bootstrap, topic, table, ends, args.workers, args.commit_interval)
        print(f"sink: {n} records in {sink_s:.2f} s ({n / sink_s:,.0f} records/s, {commits} commits, "
              f"{args.workers} worker(s), commit interval {args.commit_interval:g} s)", flush=True)
        ids = table.read().to_arrow().column("id").to_pylist()
        if len(ids) != n or len(set(ids)) != n:
            print(f"ERROR: {len(ids)} rows, {len(set(ids))} distinct ids for {n} records", file=sys.stderr)
            return 1
        sink_rps, raw_rps = n / sink_s, raw_n / raw_s
        print(f"kafka: records={n} partitions={args.partitions} workers={args.workers} commits={commits} "
              f"sink_s={sink_s:.2f} sink_rps={sink_rps:.0f} raw_consume_s={raw_s:.2f} raw_consume_rps={raw_rps:.0f} "
              f"sink_vs_raw={sink_rps / raw_rps:.3f}")
        return 0
    finally:
        shutil.rmtree(root, ignore_errors=True)
        if broker is not None:
            broker.stop()


if __name__ == "__main__":
    sys.exit(main())
