"""The Kafka sink's participants read ahead between rounds, and a worker writes a round once.

Without a broker: participants on the simulated partition of the protocol tests, and a worker
on an in-memory Kafka (a data topic whose consumer honours assign, pause, resume and seek, and
a control topic that delivers what the worker's producer sends), driven by a manual clock.
"""

from __future__ import annotations

import json

import pytest

import lakesdk as lk
from lakesdk.streaming.kafka.config import SinkConfig
from lakesdk.streaming.kafka.decoding import make_batch_decoder
from lakesdk.streaming.kafka.events import ControlEvent, EventType, format_offsets
from lakesdk.streaming.kafka.participant import RECORD_OVERHEAD_BYTES, TransactionParticipant

from .test_kafka_protocol import TOPIC, SimPartition, _Msg

ck = pytest.importorskip("confluent_kafka")


def event(kind, commit_time, offset):
    return ControlEvent(kind, TOPIC, commit_time=str(commit_time), txn={"instant": str(commit_time)},
                        offsets={0: offset})


class Reader:
    """A participant with read-ahead on a simulated partition holding records 0..n-1."""

    def __init__(self, n=20, prefetch_bytes=1 << 20, **kw):
        self.ctx = SimPartition()
        self.records = [(o, json.dumps({"id": o}).encode()) for o in range(n)]
        self.written: list[list[int]] = []
        self.sent: list[ControlEvent] = []

        def writer(txn, rows):
            self.written.append([r["id"] for r in rows])
            return [{"fileId": "f"}], "schema"
        self.p = TransactionParticipant(TOPIC, 0, self.ctx, writer, self.sent.append, prefetch_bytes=prefetch_bytes,
                                        decode_batch=make_batch_decoder(SinkConfig("t", TOPIC, "b")), **kw)
        self.p.start(position=0)

    def deliver(self, upto):
        """Records from the partition's position up to ``upto`` (exclusive), unless paused."""
        if self.ctx.paused:
            return
        start = self.ctx.position
        self.p.buffer_many(self.records[start:upto])
        self.ctx.position = max(start, min(upto, len(self.records)))
        self.p.process()

    def send(self, kind, commit_time, offset):
        self.p.on_event(event(kind, commit_time, offset))
        self.p.process()


def test_a_partition_reads_ahead_between_rounds_and_the_next_round_takes_it_without_a_seek():
    r = Reader()
    assert not r.ctx.paused                   # not paused until the first START_COMMIT
    r.deliver(3)                              # read before the first round opens
    r.send(EventType.START_COMMIT, 101, 0)
    r.deliver(5)
    r.send(EventType.END_COMMIT, 101, 0)
    assert r.written == [[0, 1, 2, 3, 4]] and r.sent[-1].kafka_offset == 5
    assert not r.ctx.paused                   # Hudi pauses here until the next START_COMMIT
    r.deliver(9)                              # read while the round commits
    assert r.p.buffered == 4
    r.send(EventType.ACK_COMMIT, 101, 5)
    r.send(EventType.START_COMMIT, 102, 5)
    r.deliver(12)
    r.send(EventType.END_COMMIT, 102, 5)
    assert r.written[-1] == list(range(5, 12)) and r.sent[-1].kafka_offset == 12
    assert r.ctx.seeks == []                  # every round started where the buffer did
    assert r.ctx.kafka_commits == [5]


def test_a_round_that_failed_drops_what_was_read_ahead_and_reads_again_from_its_offset():
    """Round 101 wrote 0..4 but was rolled back (no ACK); the partition read 5..8 meanwhile.  The next
    START_COMMIT carries the table's offset, 0: the read-ahead is dropped by the seek and 0..9 are written
    once, by round 102."""
    r = Reader()
    r.send(EventType.START_COMMIT, 101, 0)
    r.deliver(5)
    r.send(EventType.END_COMMIT, 101, 0)
    r.deliver(9)
    r.send(EventType.START_COMMIT, 102, 0)
    assert r.ctx.seeks == [0] and r.p.buffered == 0
    r.deliver(10)
    r.send(EventType.END_COMMIT, 102, 0)
    assert r.written == [[0, 1, 2, 3, 4], list(range(10))] and r.sent[-1].kafka_offset == 10


def test_a_partition_pauses_when_its_read_ahead_reaches_prefetch_bytes():
    size = RECORD_OVERHEAD_BYTES + len(json.dumps({"id": 0}).encode())
    r = Reader(prefetch_bytes=3 * size)
    r.deliver(2)
    assert not r.ctx.paused and r.p.buffered_bytes == 2 * size
    r.deliver(4)
    assert r.ctx.paused and r.p.buffered == 4
    r.deliver(8)                              # paused: nothing more comes
    assert r.p.buffered == 4
    r.send(EventType.START_COMMIT, 101, 0)    # the round takes the buffer: reading resumes
    assert not r.ctx.paused and r.p.buffered == 0 and r.p.buffered_bytes == 0
    r.deliver(6)
    r.send(EventType.END_COMMIT, 101, 0)
    assert r.written == [list(range(6))] and r.ctx.seeks == []


def test_a_start_commit_seeks_when_the_consumer_position_is_unknown_or_elsewhere():
    r = Reader()
    r.p.start()                               # position unknown (as Hudi's participant): seek
    r.send(EventType.START_COMMIT, 101, 0)
    assert r.ctx.seeks == [0]
    r.deliver(4)
    r.send(EventType.END_COMMIT, 101, 0)
    r.send(EventType.START_COMMIT, 102, 2)    # the leader's offset is behind what was read: seek back
    assert r.ctx.seeks == [0, 2]


def test_without_prefetch_bytes_a_partition_pauses_between_rounds_as_in_hudi():
    r = Reader(prefetch_bytes=0)
    assert r.ctx.paused
    r.send(EventType.START_COMMIT, 101, 0)
    assert not r.ctx.paused
    r.deliver(3)
    r.send(EventType.END_COMMIT, 101, 0)
    assert r.ctx.paused and r.written == [[0, 1, 2]]


# -- a worker on an in-memory Kafka ---------------------------------------------------------------------
class MemoryTopic:
    def __init__(self, partitions):
        self.records: list[list[bytes]] = [[] for _ in range(partitions)]


class MemoryConsumer:
    """The data consumer: delivers each assigned, unpaused partition's records from its position."""

    def __init__(self, topic: MemoryTopic):
        self.topic = topic
        self.position: dict[int, int] = {}
        self.paused: set[int] = set()
        self.assigned_at: dict[int, int] = {}
        self.commits: dict[int, int] = {}

    def assign(self, tps):
        for tp in tps:
            self.position[tp.partition] = self.assigned_at[tp.partition] = tp.offset

    def unassign(self):
        self.position.clear()

    def pause(self, tps):
        self.paused |= {tp.partition for tp in tps}

    def resume(self, tps):
        self.paused -= {tp.partition for tp in tps}

    def seek(self, tp):
        self.position[tp.partition] = tp.offset

    def commit(self, offsets, asynchronous=False):
        self.commits.update({tp.partition: tp.offset for tp in offsets})

    def consume(self, num_messages=1, timeout=0):
        out = []
        for p, pos in sorted(self.position.items()):
            if p in self.paused:
                continue
            recs = self.topic.records[p]
            out += [_Msg(p, o, recs[o]) for o in range(max(pos, 0), len(recs))]
            self.position[p] = len(recs)
        return out

    def get_watermark_offsets(self, tp, timeout=None):
        return 0, len(self.topic.records[tp.partition])

    def list_topics(self, topic=None, timeout=None):
        from types import SimpleNamespace
        parts = dict.fromkeys(range(len(self.topic.records)))
        return SimpleNamespace(topics={TOPIC: SimpleNamespace(partitions=parts)})

    def close(self):
        pass


class ControlLoop:
    """The producer and the control consumer: what is produced is consumed next."""

    def __init__(self):
        self.inbox: list[_Msg] = []
        self.sent: list[ControlEvent] = []

    def produce(self, topic, key=None, value=None):
        self.sent.append(ControlEvent.decode(value))
        self.inbox.append(_Msg(0, len(self.sent) - 1, value))

    def flush(self, timeout=None):
        return 0

    def consume(self, num_messages=1, timeout=0):
        out, self.inbox = self.inbox, []
        return out

    def close(self):
        pass


class ManualClock:
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t


def run_worker_until_ingested(w, topic, clock, *, steps=400):
    from lakesdk.streaming.kafka.worker import latest_commit_offsets
    ends = {p: len(r) for p, r in enumerate(topic.records)}
    for _ in range(steps):
        clock.t = round(clock.t + 0.05, 6)
        w.step(data_timeout=0)
        if latest_commit_offsets(w.table, TOPIC)[0] == ends:
            return
    raise AssertionError(f"not ingested after {steps} steps: {latest_commit_offsets(w.table, TOPIC)[0]} != {ends}")


def test_a_worker_writes_each_round_of_its_partitions_in_one_write(tmp_path, monkeypatch):
    """Three partitions on one worker: each round is one ``write_batch`` call with every partition's
    records, in partition order; every partition still reports its own WRITE_STATUS (its offset and
    record count; the write's stats go with the first); the commit records every partition's offset
    and the table holds every id once.  Partitions the table has no offset for are assigned at 0."""
    from lakesdk.streaming.kafka.worker import SinkWorker
    t = lk.Lake(str(tmp_path)).create_table("events", key="id", ordering="ts", partition_by="part",
                                            table_type="mor")
    topic = MemoryTopic(3)
    ids = iter(range(10**6))

    def produce(n):
        for _ in range(n):
            i = next(ids)
            topic.records[i % 3].append(json.dumps({"id": i, "ts": 1, "part": f"p{i % 2}"}).encode())
    w = SinkWorker(SinkConfig(t.path, TOPIC, "127.0.0.1:1", commit_interval=0.2, write_timeout=30))
    w.table, w.consumer, w.control = t, MemoryConsumer(topic), ControlLoop()
    w.producer = w.control
    writes: list[list[int]] = []
    write = w._write

    def spy(txn, rows):
        writes.append([r["id"] for r in rows])
        return write(txn, rows)
    monkeypatch.setattr(w, "_write", spy)
    clock = ManualClock()
    produce(60)
    w._on_assign(w.consumer, [ck.TopicPartition(TOPIC, p) for p in range(3)])
    assert w.consumer.assigned_at == {0: 0, 1: 0, 2: 0} and not w.consumer.paused
    w.coordinator.clock = clock
    w.coordinator._scheduled = [(0.0, kind, ct) for _, kind, ct in w.coordinator._scheduled]
    run_worker_until_ingested(w, topic, clock)
    produce(45)
    run_worker_until_ingested(w, topic, clock)
    commits = [c for c in t.timeline.commits]
    assert len(writes) == len(commits) == 2
    assert [sorted(x) for x in writes] == [list(range(60)), list(range(60, 105))]
    assert writes[0] == [i for p in range(3) for i in range(60) if i % 3 == p]   # partition order
    statuses = [e for e in w.control.sent if e.type is EventType.WRITE_STATUS]
    for instant in (c.requested for c in commits):
        mine = sorted((e for e in statuses if e.commit_time == instant), key=lambda e: e.sender_partition)
        assert [e.sender_partition for e in mine] == [0, 1, 2]
        assert [bool(e.stats) for e in mine] == [True, False, False] and all(e.schema for e in mine)
    assert [e.kafka_offset for e in statuses[-3:]] == [35, 35, 35]
    assert [e.records for e in statuses[-3:]] == [15, 15, 15]
    store = t.context.store
    assert store.commit_metadata(commits[-1]).extra_metadata["kafka.commit.offsets"] == \
        format_offsets({0: 35, 1: 35, 2: 35})
    got = sorted(t.read().to_arrow().column("id").to_pylist())
    assert got == list(range(105))
    w._shutdown()


def test_a_round_keeps_fields_its_first_record_lacks(tmp_path):
    """The round's table has a column for every field of any record: pa.Table.from_pylist took the
    first record's fields only, so a field the round's first record lacked was dropped for every
    record (and a table that had the column refused the round)."""
    from lakesdk.streaming.kafka.worker import SinkWorker, open_sink_table
    from lakesdk.table.transaction import begin, commit
    t = lk.Lake(str(tmp_path)).create_table("events", key="id", ordering="ts", table_type="mor")
    w = SinkWorker(SinkConfig(t.path, TOPIC, "127.0.0.1:1"))
    w.table = open_sink_table(w.cfg)
    for rows in ([{"id": 1, "ts": 1}, {"id": 2, "ts": 1, "note": "b"}],
                 [{"id": 3, "ts": 1}, {"id": 4, "ts": 1, "note": "d", "n": {"x": 1}}]):
        txn = begin(w.table)
        stats, schema = w._write({"instant": txn.instant, "action": txn.action, "operation": txn.operation}, rows)
        commit(w.table, txn, stats, schema=schema)
    got = {r["id"]: (r["note"], r["n"]) for r in t.read().to_arrow().select(["id", "note", "n"]).to_pylist()}
    assert got == {1: (None, None), 2: ("b", None), 3: (None, None), 4: ("d", {"x": 1})}


def test_a_gap_right_after_the_round_offset_is_real_when_the_consumer_was_there():
    """A transactional producer's commit marker takes an offset no record has: a round can start at a
    marker's offset with its first record later.  The consumer was at that offset, so the gap is real
    and taken without a seek, as right after a seek."""
    r = Reader()
    r.send(EventType.START_COMMIT, 101, 0)
    r.deliver(6)
    r.send(EventType.END_COMMIT, 101, 0)
    r.send(EventType.ACK_COMMIT, 101, 6)
    r.send(EventType.START_COMMIT, 102, 6)
    r.p.buffer_many([(o, json.dumps({"id": o}).encode()) for o in (8, 9)])   # 6 and 7: markers
    r.p.process()
    r.send(EventType.END_COMMIT, 102, 6)
    assert r.written == [list(range(6)), [8, 9]] and r.sent[-1].kafka_offset == 10 and r.ctx.seeks == []


def test_a_round_without_a_column_the_table_has_writes_it_null(tmp_path):
    """No record of the round has a field the table has: it is null there (the round failed with
    MissingColumnError on every retry, and the sink stopped ingesting)."""
    from lakesdk.streaming.kafka.worker import SinkWorker, open_sink_table
    from lakesdk.table.transaction import begin, commit
    t = lk.Lake(str(tmp_path)).create_table("events", key="id", ordering="ts", table_type="mor")
    w = SinkWorker(SinkConfig(t.path, TOPIC, "127.0.0.1:1"))
    w.table = open_sink_table(w.cfg)
    for rows in ([{"id": 1, "ts": 1, "note": "a"}, {"id": 2, "ts": 1, "note": "b"}],
                 [{"id": 2, "ts": 2}, {"id": 3, "ts": 2}]):
        txn = begin(w.table)
        stats, schema = w._write({"instant": txn.instant, "action": txn.action, "operation": txn.operation}, rows)
        commit(w.table, txn, stats, schema=schema)
    got = {r["id"]: r["note"] for r in t.read().to_arrow().select(["id", "note"]).to_pylist()}
    assert got == {1: "a", 2: None, 3: None}
