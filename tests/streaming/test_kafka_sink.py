"""The exactly-once Kafka sink against a real Kafka-protocol broker (noida-db on 127.0.0.1).

Each test produces keyed records with a unique ``id`` and checks that the table holds each
exactly once: the rows, and the commit stats (every record was an insert, none an update,
so no record was written twice), and that the offsets in the latest commit's metadata equal
the consumer group's committed offsets and the topic's end offsets.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time

import pytest

import lakesdk as lk

pytestmark = pytest.mark.kafka
ck = pytest.importorskip("confluent_kafka")

from lakesdk.streaming.kafka import KafkaSink  # noqa: E402
from lakesdk.streaming.kafka.worker import latest_commit_offsets  # noqa: E402

from ..helpers import end_offsets, group_offsets, make_topic, produce  # noqa: E402


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
    store = t.context.store
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
        deadline = time.monotonic() + 30    # the group offsets follow the table's commit (later under load)
        st = sink.status()
        while st.lag and time.monotonic() < deadline:
            time.sleep(0.3)
            st = sink.status()
        assert st.coordinator_state in ("IDLE", "ACKED_COMMIT", "STARTED_COMMIT") and st.lag == 0
        assert "partition" in repr(st) and st.last_committed_instant
    assert_exactly_once(t, topic, broker, range(900), group=sink.config.group_id)
    assert len(t.timeline.commits) >= 2
    before = [i.requested for i in t.timeline.commits]
    produce(broker, topic, range(900, 1000))
    with KafkaSink(t.path, topic, broker, commit_interval=0.5, write_timeout=10, session_timeout_ms=6000) as sink2:
        wait_ingested(t, topic, broker, 60)
        deadline = time.monotonic() + 60    # the status follows the table's commit (later under load)
        st2 = sink2.status()
        while sum(r.records for r in st2.history) < 1000 and time.monotonic() < deadline:
            time.sleep(0.3)
            st2 = sink2.status()
    assert_exactly_once(t, topic, broker, range(1000), group=f"lakesdk-sink-{topic}")
    # the new coordinator's history starts with the first sink's commits, loaded from the table
    assert [r.instant for r in st2.history][:len(before)] == before
    assert sum(r.records for r in st2.history) == 1000


def test_k5_write_status_timeout_aborts_round_and_retries(tmp_path, broker, monkeypatch):
    """K5 live: partition 1 drops its first END_COMMIT, so no WRITE_STATUS: the round times out, is rolled
    back, and the next round writes everything exactly once.  Rounds last their interval (``catch_up=False``,
    as in Hudi): a partition that caught up with its round's target would report before END_COMMIT."""
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
    sink = KafkaSink(t.path, topic, broker, commit_interval=0.5, write_timeout=1.5, session_timeout_ms=6000,
                     catch_up=False)
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


def test_local_broker_repr_and_missing_executable(tmp_path, monkeypatch):
    """LocalBroker: a repr without I/O, and a typed error naming ``pip install noida-db`` when the
    executable is neither next to the interpreter nor on PATH."""
    from lakesdk.testing.kafka import BrokerNotFoundError, LocalBroker
    assert repr(LocalBroker()) == "<LocalBroker no port yet stopped>"
    monkeypatch.setattr(sys, "executable", str(tmp_path / "python"))
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(BrokerNotFoundError, match="pip install noida-db") as e:
        LocalBroker().start()
    assert isinstance(e.value, lk.LakeError) and isinstance(e.value, ImportError)


def test_local_broker_answers_and_stops(tmp_path):
    from lakesdk.testing.kafka import LocalBroker
    with LocalBroker(data_dir=tmp_path / "b") as b:
        assert repr(b).startswith(f"<LocalBroker {b.bootstrap} running pid=")
        name = b.create_topic("two", 2)
        assert len(ck.admin.AdminClient({"bootstrap.servers": b.bootstrap}).list_topics(timeout=5)
                   .topics[name].partitions) == 2
    assert not b.running and repr(b) == f"<LocalBroker {b.bootstrap} stopped>"


def test_cow_table_is_refused_with_a_clear_error(tmp_path):
    t = new_table(tmp_path, table_type="cow")
    with pytest.raises(lk.TableConfigError, match='table_type="mor"'):
        KafkaSink(t.path, "x", "127.0.0.1:1").start()


# -- worker processes, killed with SIGKILL ---------------------------------------------------------------
class Workers:
    """CLI worker processes (``lakesdk kafka-sink --workers 1`` each) sharing one consumer group.

    Each worker's name is also its ``--instance-id`` (Kafka static membership): a worker restarted under
    the same name takes over the killed one's partitions at once, without waiting for the broker to expire
    the dead member's session (noida-db does not expire it at all; Apache Kafka after session.timeout.ms)."""

    def __init__(self, tmp_path, table, topic, bootstrap, *, interval=0.5, timeout=4.0):
        self.dir = tmp_path
        self.argv = [sys.executable, "-m", "lakesdk.cli.kafka", "--table", table.path, "--topic", topic,
                     "--bootstrap", bootstrap, "--workers", "1", "--commit-interval", str(interval), "--write-timeout", str(timeout),
                     "--session-timeout-ms", "6000", "--max-poll-interval-ms", "10000", "--log-level", "WARNING"]
        self.bootstrap = bootstrap
        self.group = f"lakesdk-sink-{topic}"
        self.procs: dict[str, subprocess.Popen] = {}
        self.runs = 0
        self.kills: list[str] = []

    def start(self, name):
        self.runs += 1
        err = open(self.dir / f"{name}-{self.runs}.log", "wb")
        self.procs[name] = subprocess.Popen([*self.argv, "--instance-id", name], stdout=err, stderr=subprocess.STDOUT)
        return name

    def check_alive(self):
        for name, p in self.procs.items():
            if p.poll() is not None:
                logs = "\n".join(f.read_text(errors="replace")[-3000:] for f in self.dir.glob(f"{name}-*.log"))
                raise AssertionError(f"worker {name} exited with {p.returncode}: {logs}")

    def group_state(self) -> tuple[str, dict[int, str]]:
        """The group's state and partition -> worker name (client.id holds the pid)."""
        from confluent_kafka.admin import AdminClient
        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        g = admin.describe_consumer_groups([self.group], request_timeout=5)[self.group].result(10)
        by_pid = {str(p.pid): n for n, p in self.procs.items()}
        out = {}
        for m in g.members:
            name = by_pid.get((m.client_id or "-").split("-")[-2])
            for tp in m.assignment.topic_partitions:
                out[tp.partition] = name
        return str(g.state).rsplit(".", 1)[-1], out

    def wait_stable(self, n_partitions, timeout=60.0) -> dict[int, str]:
        """Wait until the group is STABLE and every partition belongs to a live worker, and every live
        worker is a member."""
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            self.check_alive()
            try:
                last = self.group_state()
                state, owners = last
                if state == "STABLE" and len(owners) == n_partitions and None not in owners.values() \
                        and set(owners.values()) == set(self.procs):
                    return owners
            except Exception as e:  # noqa: BLE001 - the group is rebalancing
                last = e
            time.sleep(0.3)
        raise AssertionError(f"the consumer group did not become stable: {last}")

    def kill(self, name):
        p = self.procs[name]
        p.send_signal(signal.SIGKILL)
        p.wait(10)
        self.kills.append(name)

    def stop_all(self):
        for p in self.procs.values():
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in self.procs.values():
            try:
                p.wait(60)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(10)


def _producer_thread(bootstrap, topic, ids, seconds, *, encode=None):
    ids = list(ids)
    chunks = max(1, int(seconds / 0.1))
    size = max(1, len(ids) // chunks + 1)

    def run():
        for i in range(0, len(ids), size):
            produce(bootstrap, topic, ids[i:i + size], encode=encode)
            time.sleep(0.1)
    th = threading.Thread(target=run, daemon=True)
    th.start()
    return th


def wait_group_caught_up(table, topic, bootstrap, group, n, timeout=30.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        offs = latest_commit_offsets(table, topic)[0]
        got = group_offsets(bootstrap, group, topic, n)
        if got == offs:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"group offsets {got} != table offsets {offs}")
        time.sleep(0.3)


@pytest.mark.timeout(240)
@pytest.mark.parametrize("victim", ["participant", "coordinator"])
def test_k7_k11_sigkill_worker_mid_round_and_restart(tmp_path, broker, victim):
    """K7-K11 live: two worker processes; records keep arriving; the worker that owns partition 0 (the
    coordinator) or the other one (participants only) is killed with SIGKILL in the middle of a round and
    restarted.  The group resumes from the latest commit's offsets: no record lost, none duplicated, and
    the consumer group's committed offsets catch up with the table's."""
    topic = make_topic(broker, 3)
    t = new_table(tmp_path)
    w = Workers(tmp_path, t, topic, broker)
    try:
        w.start("a")
        w.start("b")
        owners = w.wait_stable(3)
        coordinator = owners[0]
        other = next(n for n in set(owners.values()) if n != coordinator)
        target = coordinator if victim == "coordinator" else other
        th = _producer_thread(broker, topic, range(4000), 6.0)
        time.sleep(2.5)
        w.kill(target)                                  # mid-round: the producer is still running
        time.sleep(1.0)
        w.start(target)                                 # same instance id: takes the partitions back
        w.wait_stable(3)
        th.join()
        wait_ingested(t, topic, broker, 90, check=w.check_alive)
        wait_group_caught_up(t, topic, broker, w.group, 3)
    finally:
        w.stop_all()
    assert_exactly_once(t, topic, broker, range(4000), group=w.group)


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_exactly_once_200k_records_under_repeated_sigkill(tmp_path, broker):
    """The issue's acceptance: 3 worker processes ingest 200,000 keyed records (a unique sequence id each)
    from a 6-partition topic while a participant-only worker and, separately, the coordinator's worker are
    killed with SIGKILL several times and restarted.  Then: every sequence id exactly once in the table
    (rows and commit stats), commit offsets == topic end offsets == the group's committed offsets, no
    pending instant, and the hudi (Rust) reader returns the same rows."""
    import random
    n, parts = 200_000, 6
    topic = make_topic(broker, parts)
    t = new_table(tmp_path, partition_by="part")
    w = Workers(tmp_path, t, topic, broker, interval=1.0, timeout=6.0)
    rnd = random.Random(6)
    try:
        for name in ("a", "b", "c"):
            w.start(name)
        w.wait_stable(parts)
        th = _producer_thread(broker, topic, range(n), 20.0)
        for victim in ["participant", "coordinator"] * 3:
            time.sleep(rnd.uniform(1.0, 3.0))
            owners = w.wait_stable(parts)
            coord = owners[0]
            target = coord if victim == "coordinator" else rnd.choice(sorted(set(owners.values()) - {coord}))
            w.kill(target)
            time.sleep(rnd.uniform(0.2, 1.0))
            w.start(target)
        w.wait_stable(parts)
        th.join()
        wait_ingested(t, topic, broker, 300, check=w.check_alive)
        wait_group_caught_up(t, topic, broker, w.group, parts)
    finally:
        w.stop_all()
    assert len(w.kills) == 6
    assert any(i.action == "rollback" for i in t.timeline), "no kill interrupted an open round"
    assert_exactly_once(t, topic, broker, range(n), group=w.group)
    hudi = pytest.importorskip("hudi")
    import pyarrow as pa
    ht = hudi.HudiTableBuilder.from_base_uri(t.path).build()
    theirs = pa.Table.from_batches(ht.read()).select(["id", "v", "part"]).sort_by("id")
    ours = t.read().to_arrow().select(["id", "v", "part"]).sort_by("id")
    assert theirs.num_rows == n and theirs.column("id").to_pylist() == list(range(n))
    assert theirs.to_pylist() == ours.to_pylist()
