"""The exactly-once Kafka sink against a real Kafka-protocol broker (noida-db on 127.0.0.1).

Each test produces keyed records with a unique ``id`` and checks that the table holds each
exactly once: the rows, and the commit stats (every record was an insert, none an update,
so no record was written twice), and that the offsets in the latest commit's metadata equal
the consumer group's committed offsets and the topic's end offsets.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest

import lakesdk as lk

pytestmark = pytest.mark.kafka
ck = pytest.importorskip("confluent_kafka")

from lakesdk.streaming.kafka import KafkaSink  # noqa: E402
from lakesdk.streaming.kafka.worker import latest_commit_offsets  # noqa: E402


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def broker(tmp_path_factory):
    """A Kafka-protocol broker: ``noida-db start --only kafka`` (pip install noida-db)."""
    exe = shutil.which("noida-db") or str(Path(sys.executable).with_name("noida-db"))
    if not os.path.exists(exe):
        pytest.skip("the Kafka tests need a broker: pip install noida-db")
    port = _free_port()
    d = tmp_path_factory.mktemp("noida")
    log = open(d / "broker.log", "wb")
    proc = subprocess.Popen([exe, "start", "--only", "kafka", "--kafka-port", str(port), "--data-dir", str(d / "data")],
                            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    bootstrap = f"127.0.0.1:{port}"
    from confluent_kafka.admin import AdminClient
    deadline = time.monotonic() + 60
    ok = False
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                pass
            AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=3)
            ok = True
            break
        except Exception:  # noqa: BLE001 - not up yet
            time.sleep(0.3)
    if not ok:
        proc.kill()
        pytest.fail(f"the broker did not start: {(d / 'broker.log').read_text(errors='replace')[-2000:]}")
    yield bootstrap
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        pass
    try:
        proc.wait(15)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(5)
    log.close()


def make_topic(bootstrap: str, partitions: int) -> str:
    from confluent_kafka.admin import AdminClient, NewTopic
    name = f"t{uuid.uuid4().hex[:10]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(15)
    for _ in range(50):
        md = admin.list_topics(timeout=5)
        if name in md.topics and len(md.topics[name].partitions) == partitions:
            break
        time.sleep(0.1)
    return name


def produce(bootstrap: str, topic: str, ids, *, encode=None) -> None:
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    enc = encode or (lambda i: json.dumps({"id": i, "ts": 1, "v": f"r{i}", "part": f"p{i % 2}"}).encode())
    for n, i in enumerate(ids):
        p.produce(topic, key=str(i).encode(), value=enc(i))
        if n % 1000 == 0:
            p.poll(0)
    p.flush(30)


def end_offsets(bootstrap: str, topic: str) -> dict[int, int]:
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"probe-{uuid.uuid4().hex}"})
    try:
        n = len(c.list_topics(topic, timeout=10).topics[topic].partitions)
        return {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(n)}
    finally:
        c.close()


def group_offsets(bootstrap: str, group: str, topic: str, n: int) -> dict[int, int]:
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        return {tp.partition: tp.offset for tp in c.committed([TopicPartition(topic, p) for p in range(n)], timeout=10)}
    finally:
        c.close()


def wait_ingested(table, topic: str, bootstrap: str, timeout: float, *, check=None) -> dict[int, int]:
    ends = end_offsets(bootstrap, topic)
    deadline = time.monotonic() + timeout
    offs: dict[int, int] = {}
    while time.monotonic() < deadline:
        offs, _ = latest_commit_offsets(table, topic)
        if all(offs.get(p, 0) >= e for p, e in ends.items()):
            return offs
        if check is not None:
            check()
        time.sleep(0.3)
    raise AssertionError(f"not ingested within {timeout}s: table offsets {offs}, end offsets {ends}")


def new_table(tmp_path, *, partition_by=None, table_type="mor"):
    return lk.Lake(str(tmp_path / "lake")).create_table("events", key="id", ordering="ts", partition_by=partition_by,
                                                         table_type=table_type)


def assert_exactly_once(t, topic: str, bootstrap: str, ids, *, group: str | None = None):
    ids = sorted(ids)
    df = t.read().to_pandas()
    assert len(df) == len(ids), f"{len(df)} rows for {len(ids)} records"
    assert sorted(df.id.tolist()) == ids
    store = t._store()
    tl = store.load()
    inserted = updated = 0
    for inst in tl.commits:
        tot = store.commit_metadata(inst).totals()
        inserted += tot["inserted"]
        updated += tot["updated"]
    assert (inserted, updated) == (len(ids), 0), "a record was written more than once"
    offs, _ = latest_commit_offsets(t, topic)
    ends = end_offsets(bootstrap, topic)
    assert offs == ends
    if group is not None:
        assert group_offsets(bootstrap, group, topic, len(ends)) == offs
    assert not tl.pending, f"pending instants left: {list(tl.pending)}"


# -- in-process ----------------------------------------------------------------------------------------
def test_k1_k6_k18_k22_happy_path_exactly_once_and_resume(tmp_path, broker):
    """K1/K6/K22: 3 partitions, keyed JSON, short rounds: every record once, commit offsets == group offsets.
    K18: a new sink resumes from the latest commit's offsets without duplicates."""
    topic = make_topic(broker, 3)
    t = new_table(tmp_path, partition_by="part")
    produce(broker, topic, range(0, 600))
    sink = KafkaSink(t.path, topic, broker, commit_interval=0.5, write_timeout=10, session_timeout_ms=6000)
    with sink:
        wait_ingested(t, topic, broker, 60)
        produce(broker, topic, range(600, 900))      # a second burst while running: more rounds
        wait_ingested(t, topic, broker, 60)
        time.sleep(1.0)
        st = sink.status()
        assert st.coordinator_state in ("IDLE", "ACKED_COMMIT", "STARTED_COMMIT") and st.lag == 0
        assert "partition" in repr(st) and st.last_committed_instant
    assert_exactly_once(t, topic, broker, range(900), group=sink.config.group_id)
    assert len(t.timeline.commits) >= 2
    produce(broker, topic, range(900, 1000))
    with KafkaSink(t.path, topic, broker, commit_interval=0.5, write_timeout=10, session_timeout_ms=6000):
        wait_ingested(t, topic, broker, 60)
    assert_exactly_once(t, topic, broker, range(1000), group=f"lakesdk-sink-{topic}")


def test_k5_write_status_timeout_aborts_round_and_retries(tmp_path, broker, monkeypatch):
    """K5 live: partition 1 drops its first END_COMMIT, so no WRITE_STATUS: the round times out, is rolled
    back, and the next round writes everything exactly once."""
    from lakesdk.streaming.kafka.participant import TransactionParticipant
    orig = TransactionParticipant._end_commit
    dropped: list[str] = []

    def flaky(self, ev):
        if self.partition == 1 and not dropped:
            dropped.append(ev.commit_time)
            self.txn = None          # as if the participant had lost its transaction
            return
        return orig(self, ev)
    monkeypatch.setattr(TransactionParticipant, "_end_commit", flaky)
    topic = make_topic(broker, 3)
    t = new_table(tmp_path)
    produce(broker, topic, range(300))
    sink = KafkaSink(t.path, topic, broker, commit_interval=0.5, write_timeout=1.5, session_timeout_ms=6000)
    with sink:
        wait_ingested(t, topic, broker, 60)
        st = sink.status()
    assert dropped and st.aborted_rounds >= 1
    assert dropped[0] not in {i.requested for i in t.timeline.commits}
    assert any(i.action == "rollback" for i in t.timeline)
    assert_exactly_once(t, topic, broker, range(300), group=sink.config.group_id)


def test_k23_avro_records_with_schema(tmp_path, broker):
    """K23: Avro binary values written with a given schema become rows keyed by the record key."""
    import io

    import fastavro
    schema = {"type": "record", "name": "E", "fields": [{"name": "id", "type": "long"}, {"name": "ts", "type": "long"},
                                                         {"name": "v", "type": "string"}]}
    parsed = fastavro.parse_schema(schema)

    def enc(i):
        b = io.BytesIO()
        fastavro.schemaless_writer(b, parsed, {"id": i, "ts": 1, "v": f"a{i}"})
        return b.getvalue()
    topic = make_topic(broker, 2)
    t = new_table(tmp_path)
    produce(broker, topic, range(50), encode=enc)
    with KafkaSink(t.path, topic, broker, format="avro", avro_schema=json.dumps(schema), commit_interval=0.5,
                   write_timeout=10, session_timeout_ms=6000):
        wait_ingested(t, topic, broker, 60)
    df = t.read().to_pandas().sort_values("id")
    assert df.id.tolist() == list(range(50)) and df.v.tolist() == [f"a{i}" for i in range(50)]


def test_cow_table_is_refused_with_a_clear_error(tmp_path):
    t = new_table(tmp_path, table_type="cow")
    with pytest.raises(lk.TableConfigError, match='table_type="mor"'):
        KafkaSink(t.path, "x", "127.0.0.1:1").start()


# -- worker processes, killed with SIGKILL ---------------------------------------------------------------
class Workers:
    """CLI worker processes (``lakesdk kafka-sink --workers 1`` each) sharing one consumer group."""

    def __init__(self, tmp_path, table, topic, bootstrap, *, interval=0.5, timeout=4.0):
        self.dir = tmp_path
        self.argv = [sys.executable, "-m", "lakesdk.cli.kafka", "--table", table.path, "--topic", topic,
                     "--bootstrap", bootstrap, "--commit-interval", str(interval), "--write-timeout", str(timeout),
                     "--session-timeout-ms", "6000", "--max-poll-interval-ms", "10000", "--log-level", "WARNING"]
        self.bootstrap = bootstrap
        self.group = f"lakesdk-sink-{topic}"
        self.procs: dict[str, subprocess.Popen] = {}
        self.n = 0

    def start(self, name=None):
        name = name or f"w{self.n}"
        self.n += 1
        err = open(self.dir / f"{name}-{self.n}.log", "wb")
        self.procs[name] = subprocess.Popen(self.argv, stdout=err, stderr=subprocess.STDOUT)
        return name

    def check_alive(self):
        for name, p in self.procs.items():
            if p.poll() not in (None, -signal.SIGKILL):
                logs = "\n".join(f.read_text(errors="replace")[-3000:] for f in self.dir.glob(f"{name}-*.log"))
                raise AssertionError(f"worker {name} exited with {p.returncode}: {logs}")

    def owners(self) -> dict[int, str]:
        """partition -> worker name, from the group's membership (client.id holds the pid)."""
        from confluent_kafka.admin import AdminClient
        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        g = admin.describe_consumer_groups([self.group])[self.group].result(10)
        by_pid = {str(p.pid): n for n, p in self.procs.items() if p.poll() is None}
        out = {}
        for m in g.members:
            pid = (m.client_id or "").split("-")[-2] if m.client_id else ""
            for tp in m.assignment.topic_partitions:
                if pid in by_pid:
                    out[tp.partition] = by_pid[pid]
        return out

    def wait_owners(self, n_partitions, timeout=40.0) -> dict[int, str]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.check_alive()
            try:
                o = self.owners()
                alive = {n for n, p in self.procs.items() if p.poll() is None}
                if len(o) == n_partitions and set(o.values()) == alive:
                    return o
            except Exception:  # noqa: BLE001 - group rebalancing
                pass
            time.sleep(0.5)
        raise AssertionError("the consumer group did not settle")

    def xfail_if_group_stuck(self, dead):
        """noida-db 0.2.3 does not expire a SIGKILLed member's session, and a rebalance that waits for it
        can hang: then the group, not the sink, is stuck (Apache Kafka expires it after session.timeout.ms)."""
        from confluent_kafka.admin import AdminClient
        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        g = admin.describe_consumer_groups([self.group])[self.group].result(10)
        pids = {(m.client_id or "").split("-")[-2] for m in g.members if m.client_id}
        if str(self.procs[dead].pid) in pids or str(g.state).endswith("REBALANCING"):
            pytest.xfail(f"broker limitation: the group is {g.state} and still lists the killed worker "
                         f"{self.procs[dead].pid} (noida-db does not expire dead members)")

    def kill(self, name):
        p = self.procs[name]
        p.send_signal(signal.SIGKILL)
        p.wait(10)

    def stop_all(self):
        for p in self.procs.values():
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in self.procs.values():
            try:
                p.wait(60)
            except subprocess.TimeoutExpired:
                p.kill()


def _producer_thread(bootstrap, topic, ids, seconds):
    ids = list(ids)
    chunks = max(1, int(seconds / 0.1))
    size = max(1, len(ids) // chunks + 1)

    def run():
        for i in range(0, len(ids), size):
            produce(bootstrap, topic, ids[i:i + size])
            time.sleep(0.1)
    th = threading.Thread(target=run, daemon=True)
    th.start()
    return th


@pytest.mark.timeout(240)
@pytest.mark.xfail(strict=False, reason=(
    "known gap (issue 6): after a killed worker's rebalance the consumer group's committed offsets can trail "
    "the offsets recorded in the table's commits, and noida-db may never expire the dead member"))
@pytest.mark.parametrize("victim", ["participant", "coordinator"])
def test_k7_k11_sigkill_worker_mid_round_and_restart(tmp_path, broker, victim):
    """K7-K11 live: two worker processes; records keep arriving; the worker that owns partition 0 (the
    coordinator) or the other one (participants only) is killed with SIGKILL in the middle of a round and
    restarted.  The new group resumes from the latest commit's offsets: no record lost, none duplicated."""
    topic = make_topic(broker, 3)
    t = new_table(tmp_path)
    w = Workers(tmp_path, t, topic, broker)
    try:
        w.start()
        w.start()
        owners = w.wait_owners(3)
        coordinator = owners[0]
        other = next(n for n in set(owners.values()) if n != coordinator)
        target = coordinator if victim == "coordinator" else other
        th = _producer_thread(broker, topic, range(4000), 6.0)
        time.sleep(2.5)
        w.kill(target)                                  # mid-round: the producer is still running
        time.sleep(1.0)
        w.start(target + "b")
        th.join()
        try:
            wait_ingested(t, topic, broker, 90, check=w.check_alive)
        except AssertionError:
            w.xfail_if_group_stuck(target)
            raise
        offs = latest_commit_offsets(t, topic)[0]      # the last ACK commits the offsets to the group
        deadline = time.monotonic() + 30
        while group_offsets(broker, w.group, topic, 3) != offs and time.monotonic() < deadline:
            time.sleep(0.5)
    finally:
        w.stop_all()
    assert_exactly_once(t, topic, broker, range(4000), group=w.group)
