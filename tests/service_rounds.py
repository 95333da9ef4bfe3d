"""Writers racing table services, in processes, and the check that the table is the fold of
exactly the commits that landed (used by tests/services/test_service_races.py).

A round creates a table partitioned by ``p`` with the ordering field ``ts`` and runs writer
processes (optimistic concurrency) that upsert batches of overlapping keys against service
processes; afterwards the table, read by lakesdk and by the ``hudi`` reader, must be the
fold of the landed commits: in completion order, a version of a key replaces the current
one when its ordering value is not smaller (event-time ordering).  Kinds of rounds:

* ``storage``: two writers and the services with the storage lock;
* ``zookeeper``: the same with the ZooKeeper lock against a real server;
* ``kafka``: one writer and the exactly-once Kafka sink (a producer process feeding a topic,
  a sink process writing it into the merge-on-read table) with the storage lock.  The sink's
  commits are read back from the timeline (and its history): their ``kafka.commit.offsets``
  must follow each other from 0 to the topic's end offsets, each commit must have written
  the records of its offset range once, and those records join the fold;
* ``spark``: two writers whose writes run on a Spark standalone cluster (``engine="spark"``,
  one application with one executor each).

In ``kafka`` and ``spark`` rounds the services are paced: each process runs one service
after each write that landed (a writer's or the sink's) instead of back to back.  Their
writes take seconds on a loaded 2-core machine (a sink round is an interval, a write and a
commit; a Spark write is a few jobs), and services run back to back refused or overtook
every one of them: the sink never committed and no Spark write landed.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import textwrap
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

import lakesdk as lk
from lakesdk.services.archival import archived_instants

from .helpers import (
    check_no_leftovers,
    end_offsets,
    group_offsets,
    hudi_rows,
    make_topic,
    result_of,
    stress,
    topic_records,
)

PARTITIONS = 4

WRITER = textwrap.dedent("""
    import json, random, sys, time
    import pandas as pd
    import lakesdk as lk
    path, wid, lock, n, opts = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), json.loads(sys.argv[5])
    rows, keys, parts, inline = int(sys.argv[6]), int(sys.argv[7]), int(sys.argv[8]), int(sys.argv[9])
    spark_cfg = json.loads(sys.argv[10]) if len(sys.argv) > 10 else None
    spark = None
    if spark_cfg:                    # writes run on a Spark cluster: one executor per writer
        from pyspark.sql import SparkSession
        b = SparkSession.builder.master(spark_cfg["master"]).appName(f"writer-{wid}")
        for k, v in spark_cfg["conf"].items():
            b = b.config(k, v)
        spark = b.getOrCreate()
    t = lk.open_table(path, spark=spark, concurrency="optimistic", lock=lock, lock_options=opts,
                      options=lk.TableOptions(compact_every=inline or None, engine="spark" if spark else "auto"))
    rng = random.Random(wid)
    out = []

    def clustering_pending(instant):    # the clustering that refused a batch (any, when it is not named)
        return any(x.action == "clustering" and (not instant or x.requested == instant) for x in t.timeline.pending)

    for i in range(n):
        mine = {(i + wid) % parts, (i + wid + 1) % parts}   # two of the partitions, rotating
        ids = sorted(rng.sample([k for k in range(rows) if k % parts in mine], keys))
        ts = (i + 1) * 10 + wid        # increasing per batch, never equal across writers
        val = f"w{wid}-{i}"
        df = pd.DataFrame({"id": ids, "p": [f"p{k % parts}" for k in ids], "ts": [ts] * keys, "v": [val] * keys})
        rec = {"keys": ids, "ts": ts, "v": val}
        for attempt in range(3):
            try:
                r = t.upsert(df)
                out.append({**rec, "ok": True, "instant": r.instant, "completed": r.completed})
                break
            except lk.ClusteringConflictError as e:   # updates of file groups being clustered are
                out.append({**rec, "ok": False, "error": type(e).__name__})   # refused: once it is done,
                deadline = time.monotonic() + 300                            # the batch is tried again
                while time.monotonic() < deadline and clustering_pending(e.instant):
                    time.sleep(0.05)
            except lk.WriteConflictError as e:   # anything else fails the writer, and the test
                out.append({**rec, "ok": False, "error": type(e).__name__})
                break
    if spark is not None:
        out = [{**r, "master": spark.sparkContext.master} for r in out]
        spark.stop()
    print("RESULT" + json.dumps(out))
""")

SERVICE = textwrap.dedent("""
    import json, os, sys
    import lakesdk as lk
    path, service, stop, lock, opts = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], json.loads(sys.argv[5])
    t = lk.open_table(path, concurrency="optimistic", lock=lock, lock_options=opts)
    m = t.maintenance

    def once():
        if service == "compaction":
            return m.compact()
        if service == "clustering":                  # one partition a round, every file group of it
            once.n = getattr(once, "n", -1) + 1
            return m.cluster(single_group=True, partitions=[f"p=p{once.n % 4}"])
        if t.config.is_mor:
            m.compact()
        if service == "clean":
            return m.clean(retain_commits=2)
        if service == "clean_versions":           # deletes what a running write may still read
            return m.clean(policy="keep_latest_file_versions", retain_versions=1)
        r = m.archive(min_commits=2, max_commits=4)
        return r if r.archived else None

    ran = conflicts = 0
    while True:
        last = os.path.exists(stop)              # one more round once the writers are done
        try:
            ran += once() is not None
        except lk.WriteConflictError:            # a clustering whose input a write changed rolls back
            conflicts += 1
        if last:
            break
    print("SERVICE" + json.dumps({"ran": ran, "conflicts": conflicts}))
""")

SERVICES = textwrap.dedent("""
    import json, os, random, sys, time
    import lakesdk as lk
    path, seed, stop, lock, opts = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], json.loads(sys.argv[5])
    paced = len(sys.argv) > 6 and sys.argv[6] == "paced"
    t = lk.open_table(path, concurrency="optimistic", lock=lock, lock_options=opts)
    m = t.maintenance
    rng = random.Random(seed)
    names = ["compact", "cluster", "clean_commits", "clean_versions", "archive", "savepoint", "delete_savepoint"]

    def once(name):
        if name == "compact":
            return m.compact() if t.config.is_mor else None
        if name == "cluster":
            return m.cluster(single_group=rng.random() < 0.5,
                             partitions=[f"p=p{rng.randrange(4)}"] if rng.random() < 0.7 else None)
        if name == "clean_commits":
            return m.clean(retain_commits=rng.randint(1, 3))
        if name == "clean_versions":
            return m.clean(policy="keep_latest_file_versions", retain_versions=rng.randint(1, 2))
        if name == "archive":
            lo = rng.randint(1, 3)
            r = m.archive(min_commits=lo, max_commits=lo + rng.randint(1, 2), beyond_savepoint=rng.random() < 0.5)
            return r if r.archived else None
        if name == "savepoint":
            commits = [i.requested for i in t.timeline.commits]
            return m.savepoint(rng.choice(commits)) if commits else None
        sps = m.savepoints()
        return m.delete_savepoint(rng.choice(sps).instant) if sps else None

    def writes():                                # the writes (not the services) that landed
        return {i.requested for i in t.timeline.commits if i.action in ("commit", "deltacommit")}

    ran, refused = {}, {}
    seen = writes()
    while True:
        last = os.path.exists(stop)              # one more round once the writers are done
        if paced and not last:                   # a service once a write landed since the last one
            now = writes()
            if not now - seen:
                time.sleep(0.05)
                continue
            seen = now
        name = rng.choice(names)
        try:
            if once(name) is not None:
                ran[name] = ran.get(name, 0) + 1
        except (lk.WriteConflictError, lk.SavepointError):   # a conflict, or a savepoint refused
            refused[name] = refused.get(name, 0) + 1
        if last:
            break
    print("SERVICE" + json.dumps({"ran": sum(ran.values()), "by_service": ran, "refused": refused}))
""")

# Records of the Kafka round: batch i updates ``keys`` random keys of the table and inserts one
# new key per partition, all with ts = (i + 1) * 10 + 2 (never equal to a writer's ts).  The
# next batch is produced once the sink's consumer group committed the offsets of this one (the
# group's offsets follow the table's commits), so the sink writes about one round per batch.
PRODUCER = textwrap.dedent("""
    import json, random, sys, time
    from confluent_kafka import Consumer, Producer, TopicPartition
    bootstrap, topic, group = sys.argv[1], sys.argv[2], sys.argv[3]
    batches, rows, keys, parts, seed = (int(x) for x in sys.argv[4:9])
    rng = random.Random(seed)
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    n = len(c.list_topics(topic, timeout=10).topics[topic].partitions)
    tps = [TopicPartition(topic, q) for q in range(n)]
    for i in range(batches):
        ids = sorted(rng.sample(range(rows), keys)) + [rows + i * parts + j for j in range(parts)]
        for k in ids:
            row = {"id": k, "p": f"p{k % parts}", "ts": (i + 1) * 10 + 2, "v": f"k-{i}"}
            p.produce(topic, key=str(k).encode(), value=json.dumps(row).encode())
        assert p.flush(30) == 0, "records not delivered"
        ends = {q: c.get_watermark_offsets(TopicPartition(topic, q), timeout=10)[1] for q in range(n)}
        deadline = time.monotonic() + 300
        while True:                      # the sink has the batch: its group committed the offsets
            got = {tp.partition: tp.offset for tp in c.committed(tps, timeout=10)}
            if all(got.get(q, -1) >= e for q, e in ends.items()):
                break
            assert time.monotonic() < deadline, f"the sink did not ingest batch {i}: group {got}, end {ends}"
            time.sleep(0.05)
    c.close()
    print("RESULT" + json.dumps({"batches": batches}))
""")

# Each Spark writer is one application with one executor (the worker has two cores).
SPARK_APP_CONF = {
    "spark.cores.max": "1", "spark.executor.memory": "512m", "spark.driver.memory": "512m",
    "spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1", "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false", "spark.sql.shuffle.partitions": "2", "spark.default.parallelism": "2",
    "spark.sql.adaptive.enabled": "false", "spark.python.worker.reuse": "true",
    "spark.driver.extraJavaOptions": "-XX:+UseSerialGC -XX:TieredStopAtLevel=1",
    "spark.executor.extraJavaOptions": "-XX:+UseSerialGC -XX:TieredStopAtLevel=1",
}


@dataclass
class Round:
    """What a round runs (see the module doc)."""

    kind: str = "storage"               # storage | zookeeper | kafka | spark
    table_type: str = "mor"
    batches: int = 15                   # per writer (and batches the producer sends)
    rows: int = 400
    keys: int = 40
    services: int = 2                   # processes of SERVICES (random services)
    lock: str = "storage"
    lock_options: dict[str, Any] = field(default_factory=lambda: {"timeout_s": 300})
    broker: str | None = None           # kafka: the bootstrap address
    spark: dict[str, Any] | None = None  # spark: the fixture spark_cluster


def new_table(d: str, table_type: str, rows: int) -> Any:
    t = lk.Lake(d).create_table("race", key="id", partition_by="p", table_type=table_type, ordering="ts")
    ids = list(range(rows))
    t.upsert(pd.DataFrame({"id": ids, "p": [f"p{k % PARTITIONS}" for k in ids], "ts": [0] * rows,
                           "v": ["init"] * rows}))
    return t


def _service_output(procs: list[subprocess.Popen], what: str) -> dict[str, Any]:
    summary: dict[str, Any] = {"ran": 0, "by_service": {}}
    for p in procs:
        out, err = p.communicate(timeout=600)
        line = [x for x in out.splitlines() if x.startswith("SERVICE")]
        assert p.returncode == 0 and line, f"{what}: {err[-3000:]}"
        got = json.loads(line[0][7:])
        summary["ran"] += got["ran"]
        for k, n in got.get("by_service", {}).items():
            summary["by_service"][k] = summary["by_service"].get(k, 0) + n
    return summary


def race(d: str, table_type: str, service: str, *, batches: int, rows: int, keys: int, inline: int = 0,
         lock: str = "storage", lock_options: dict[str, Any] | None = None) -> None:
    """One service in a loop (SERVICE) against two writers; checks the fold."""
    opts = lock_options or {"timeout_s": 300}
    t = new_table(d, table_type, rows)
    stop = os.path.join(d, "stop")
    svc = subprocess.Popen([sys.executable, "-c", SERVICE, t.path, service, stop, lock, json.dumps(opts)],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=os.environ.copy())
    try:
        results = stress(t.path, lock, writers=2, commits=batches, lock_options=opts, script=WRITER,
                         args=(rows, keys, PARTITIONS, inline))
    finally:
        open(stop, "w").close()
        summary = _service_output([svc], service)
    check_fold(lk.open_table(t.path), writer_commits(results), summary, rows)


def play(d: str, seed: int, r: Round) -> dict[str, Any]:
    """One round (see :class:`Round`); checks the fold and returns what happened."""
    rng = random.Random(seed)
    table_type = "mor" if r.kind == "kafka" else rng.choice(["cow", "mor"])    # the sink needs merge-on-read
    t = new_table(d, table_type, r.rows)
    stop = os.path.join(d, "stop")
    opts = json.dumps(r.lock_options)
    pace = "paced" if r.kind in ("kafka", "spark") else "free"     # see the module doc
    svcs = [subprocess.Popen([sys.executable, "-c", SERVICES, t.path, str(seed + i), stop, r.lock, opts, pace],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=os.environ.copy())
            for i in range(r.services)]
    sink = None
    try:
        args: tuple = (r.rows, r.keys, PARTITIONS, 0)
        env = None
        if r.kind == "spark":
            assert r.spark is not None
            env = r.spark["env"]
            args += (json.dumps({"master": r.spark["url"], "conf": SPARK_APP_CONF}),)
        if r.kind == "kafka":
            assert r.broker is not None
            sink = KafkaRound(d, t.path, r, seed)
        results = stress(t.path, r.lock, writers=1 if sink else 2, commits=r.batches, lock_options=r.lock_options,
                         script=WRITER, args=args, env=env)
        if sink is not None:
            sink.finish()
    finally:
        if sink is not None:
            sink.stop()
        open(stop, "w").close()
        summary = _service_output(svcs, f"{r.kind} {table_type}")
    t = lk.open_table(t.path)
    commits = writer_commits(results)
    out = {"table_type": table_type, "writer_commits": len(commits), "services": summary["by_service"]}
    if r.kind == "spark":
        assert {x["master"] for x in results} == {r.spark["url"]}, "a writer did not run on the cluster"  # type: ignore[index]
    if sink is not None:
        sink.check_stopped()
        sunk = sink.commits(t)
        out["sink_commits"] = len(sunk)
        commits += sunk
    check_fold(t, commits, summary, r.rows)
    return out


class KafkaRound:
    """The Kafka half of a round: a topic, the producer process and the sink process."""

    def __init__(self, d: str, path: str, r: Round, seed: int) -> None:
        assert r.broker is not None
        self.broker = r.broker
        self.topic = make_topic(r.broker, 2)
        self.group = f"lakesdk-sink-{self.topic}"
        self.log = os.path.join(d, "sink.log")
        lock_args = [f"--lock-option={k}={json.dumps(v) if not isinstance(v, str) else v}"
                     for k, v in r.lock_options.items()]
        with open(self.log, "wb") as log:
            self.sink = subprocess.Popen(
                [sys.executable, "-m", "lakesdk.cli.kafka", "--table", path, "--topic", self.topic,
                 "--bootstrap", r.broker, "--workers", "1", "--commit-interval", "0.3", "--write-timeout", "60",
                 "--session-timeout-ms", "6000", "--concurrency", "optimistic", "--lock", r.lock, *lock_args,
                 "--log-level", "WARNING"], stdout=log, stderr=subprocess.STDOUT)
        self.producer = subprocess.Popen(
            [sys.executable, "-c", PRODUCER, r.broker, self.topic, self.group,
             *map(str, (r.batches, r.rows, r.keys, PARTITIONS, seed))],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def _sink_log(self) -> str:
        with open(self.log, errors="replace") as f:
            return f.read()[-3000:]

    def finish(self) -> None:
        """Wait for the producer: it exits once the sink has committed every batch."""
        try:
            result_of(self.producer)
        except AssertionError as e:
            raise AssertionError(f"{e}\nsink log:\n{self._sink_log()}") from None

    def stop(self) -> int:
        """Stop the sink (SIGTERM: an open round is rolled back) and the producer, if still
        running; returns the sink's exit status."""
        for p in (self.producer, self.sink):
            if p.poll() is None:
                p.terminate()
        self.producer.communicate(timeout=60)
        return self.sink.wait(timeout=120)

    def check_stopped(self) -> None:
        assert self.sink.returncode == 0, f"the sink exited with {self.sink.returncode}:\n{self._sink_log()}"

    def commits(self, t: Any) -> list[tuple[str, list[tuple[int, int, str]]]]:
        """The sink's landed commits as (completion time, records in order), after checking that
        their offsets follow each other from 0 to the end offsets and that each wrote the
        records of its offset range once; and that the consumer group's offsets are the end's."""
        from lakesdk.format.commit_metadata import CommitMetadata
        from lakesdk.streaming.kafka import KAFKA_OFFSET_KEY, parse_offsets
        found = []
        store = t.context.store
        for inst in store.load().commits:
            found.append((inst.completed or inst.requested, store.commit_metadata(inst)))
        for a in archived_instants(t):
            if a.action in ("commit", "deltacommit") and a.metadata:
                found.append((a.instant.completed or a.instant.requested,
                              CommitMetadata.parse(a.metadata, layout=t.config.layout_version)))
        ends = end_offsets(self.broker, self.topic)
        records = topic_records(self.broker, self.topic)
        prev = {q: 0 for q in ends}
        out = []
        for completed, md in sorted(found, key=lambda x: x[0]):
            raw = (md.extra_metadata or {}).get(KAFKA_OFFSET_KEY)
            if not raw:
                continue
            offs = parse_offsets(raw)
            assert set(offs) == set(ends) and all(offs[q] >= prev[q] for q in ends), \
                f"sink commit {completed}: offsets {offs} go back from {prev}"
            recs = [json.loads(records[(q, o)]) for q in sorted(ends) for o in range(prev[q], offs[q])]
            written = md.totals()["written"]
            assert written == len({x["id"] for x in recs}), \
                f"sink commit {completed} wrote {written} records for the {len(recs)} of offsets {prev} .. {offs}"
            out.append((completed, [(x["id"], x["ts"], x["v"]) for x in recs]))
            prev = offs
        assert prev == ends, f"the sink's commits end at offsets {prev}, the topic at {ends}: records were lost"
        assert group_offsets(self.broker, self.group, self.topic, len(ends)) == ends
        return out


def writer_commits(results: list[dict[str, Any]]) -> list[tuple[str, list[tuple[int, int, str]]]]:
    """The landed writes of WRITER processes as (completion time, records)."""
    assert all(r["ok"] or r["error"].endswith("ConflictError") for r in results)
    return [(r["completed"], [(k, r["ts"], r["v"]) for k in r["keys"]]) for r in results if r["ok"]]


def check_fold(t: Any, commits: list[tuple[str, list[tuple[int, int, str]]]], summary: dict[str, Any],
               rows: int) -> None:
    """The table (lakesdk and the ``hudi`` reader) is the fold of ``commits`` over the initial
    rows; nothing is pending and no file is left that no completed commit wrote."""
    assert commits, "no write landed: the race proves nothing"
    assert summary["ran"] >= 1, f"the service never ran: {summary}"
    expect: dict[int, tuple[int, str]] = {k: (0, "init") for k in range(rows)}
    for _, records in sorted(commits, key=lambda c: c[0]):     # event-time ordering, in completion order
        for k, ts, v in records:
            if k not in expect or ts >= expect[k][0]:
                expect[k] = (ts, v)
    want = sorted((k, v) for k, (_, v) in expect.items())
    df = t.read().to_pandas()
    assert df.id.is_unique, f"duplicate keys {sorted(df.id[df.id.duplicated()])[:10]}"
    got = dict(zip(df.id, df.v))
    lost = {k: (v, got.get(k)) for k, v in want if got.get(k) != v}
    extra = sorted(set(got) - set(expect))
    assert not lost and not extra, f"{len(lost)} keys are not the fold of the landed commits (key: (expected, " \
                                   f"found)): {dict(list(lost.items())[:10])}; keys no commit wrote: {extra[:10]}"
    assert hudi_rows(t.path) == want, "the hudi reader does not read the fold of the landed commits"
    assert not t.timeline.pending, f"pending instants left: {list(t.timeline.pending)}"
    completed = {i.requested for i in t.timeline.commits}
    completed |= {a.instant.requested for a in archived_instants(t)}
    check_no_leftovers(t, completed)
