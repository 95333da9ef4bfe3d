"""Rounds that end once they have read what their partitions held when they started (``catch_up``).

The coordinator's START_COMMIT carries each partition's end offset (its target); a participant
that has taken every record before its target writes and reports at once, and the round commits
without waiting for END_COMMIT.  Without a broker: the coordinator on a manual clock, a participant
on the simulated partition of the protocol tests, and generated runs of a worker on the in-memory
Kafka of the read-ahead tests, with records produced while it runs and writes that fail, checked
for exactly-once delivery against the records produced.
"""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lakesdk as lk
from lakesdk.streaming.kafka.config import SinkConfig
from lakesdk.streaming.kafka.coordinator import CoordinatorState
from lakesdk.streaming.kafka.events import ControlEvent, EventType

from .test_kafka_prefetch import ControlLoop, ManualClock, MemoryConsumer, MemoryTopic, Reader
from .test_kafka_protocol import FakeServices, advance, make_coordinator, status

ck = pytest.importorskip("confluent_kafka")


def caught_up(p, commit_time, offset, **kw):
    return replace(status(p, commit_time, offset, **kw), caught_up=True)


# -- the coordinator -----------------------------------------------------------------------------------
def test_a_round_whose_partitions_all_caught_up_commits_without_end_commit():
    svc = FakeServices(partitions=2)
    svc.ends = {0: 7, 1: 3}
    c, clock, sent = make_coordinator(svc, commit_interval=10.0)
    c.start()
    advance(c, clock, 0.2)
    start = sent[-1]
    assert start.type is EventType.START_COMMIT and start.targets == {0: 7, 1: 3}
    c.on_event(caught_up(0, start.commit_time, 7))
    c.tick()
    assert c.state is CoordinatorState.STARTED_COMMIT and not svc.commits
    c.on_event(caught_up(1, start.commit_time, 3))
    c.tick()
    assert [x[0] for x in svc.commits] == [start.commit_time] and svc.latest == {0: 7, 1: 3}
    assert [e.type for e in sent] == [EventType.START_COMMIT, EventType.ACK_COMMIT]
    # the round's END_COMMIT and timeout are gone; the next round starts a commit interval after this one
    svc.ends = {0: 9, 1: 3}
    advance(c, clock, 9.5)
    assert [e.type for e in sent] == [EventType.START_COMMIT, EventType.ACK_COMMIT] and not svc.aborts
    advance(c, clock, 0.6)
    assert sent[-1].type is EventType.START_COMMIT and sent[-1].targets == {0: 9, 1: 3}


def test_a_partition_that_did_not_catch_up_ends_at_the_interval_and_the_early_status_counts():
    svc = FakeServices(partitions=2)
    svc.ends = {0: 7, 1: 3}
    c, clock, sent = make_coordinator(svc, commit_interval=1.0)
    c.start()
    advance(c, clock, 0.2)
    ct = sent[-1].commit_time
    c.on_event(caught_up(1, ct, 3))
    advance(c, clock, 1.0)
    assert sent[-1].type is EventType.END_COMMIT and not svc.commits
    c.on_event(status(0, ct, 5))
    c.tick()
    assert svc.latest == {0: 5, 1: 3} and sent[-1].type is EventType.ACK_COMMIT
    advance(c, clock, 0.2)
    assert sent[-1].type is EventType.START_COMMIT   # the interval has passed: no wait


def test_an_early_status_without_caught_up_or_without_targets_is_ignored_k15():
    """K15 holds where the round has no targets, and for a status that does not say it caught up."""
    for ends, event in (({0: 4}, status(0, "101", 4)), (None, caught_up(0, "101", 4))):
        svc = FakeServices(partitions=1)
        svc.ends = ends
        c, clock, sent = make_coordinator(svc, skip_empty_rounds=False)
        c.start()
        advance(c, clock, 0.2)
        assert sent[-1].commit_time == "101" and sent[-1].targets == (ends or {})
        c.on_event(event)
        c.tick()
        assert not svc.commits and c.state is CoordinatorState.STARTED_COMMIT


def test_without_catch_up_a_round_lasts_the_interval_as_in_hudi():
    svc = FakeServices(partitions=1)
    svc.ends = {0: 4}
    c, clock, sent = make_coordinator(svc, catch_up=False)
    c.start()
    advance(c, clock, 0.2)
    assert sent[-1].targets == {}
    c.on_event(caught_up(0, sent[-1].commit_time, 4))
    c.tick()
    assert not svc.commits


def test_a_caught_up_partition_that_could_not_write_aborts_the_round_at_once():
    svc = FakeServices(partitions=2)
    svc.ends = {0: 7, 1: 3}
    c, clock, sent = make_coordinator(svc, commit_interval=10.0)
    c.start()
    advance(c, clock, 0.2)
    ct = sent[-1].commit_time
    c.on_event(caught_up(1, ct, 3, write_error="boom"))
    c.tick()
    assert svc.aborts == [ct] and c.state is CoordinatorState.FAILED_COMMIT
    advance(c, clock, 0.6)
    assert sent[-1].type is EventType.START_COMMIT and sent[-1].commit_time != ct
    assert EventType.END_COMMIT not in [e.type for e in sent]


# -- the participant -----------------------------------------------------------------------------------
def start(r: Reader, commit_time: int, offset: int, target: int | None) -> None:
    r.p.on_event(ControlEvent(EventType.START_COMMIT, "kafka-connect-test-topic", commit_time=str(commit_time),
                              txn={"instant": str(commit_time)}, offsets={0: offset},
                              targets={} if target is None else {0: target}))
    r.p.process()


def test_a_participant_takes_records_up_to_its_target_and_reports_at_once():
    r = Reader(n=12)
    r.deliver(3)
    start(r, 101, 0, 5)
    assert r.written == [] and not r.sent
    r.deliver(8)            # 3..7 arrive: 3 and 4 are taken, 5..7 stay for the next round
    assert r.written == [[0, 1, 2, 3, 4]]
    st_ = r.sent[-1]
    assert st_.type is EventType.WRITE_STATUS and st_.caught_up and st_.kafka_offset == 5 and st_.records == 5
    r.send(EventType.END_COMMIT, 101, 0)    # the round's END finds the transaction written: nothing sent
    assert len(r.sent) == 1 and r.written == [[0, 1, 2, 3, 4]]
    r.send(EventType.ACK_COMMIT, 101, 5)
    assert r.ctx.kafka_commits[-1] == 5 and r.p.buffered == 3
    start(r, 102, 5, 8)     # read ahead already: reported at once
    assert r.written[-1] == [5, 6, 7] and r.sent[-1].kafka_offset == 8 and r.sent[-1].caught_up
    assert r.ctx.seeks == []


def test_a_participant_already_at_its_target_reports_an_empty_batch():
    r = Reader(n=5)
    start(r, 101, 4, 4)
    assert r.written == [] and r.sent[-1].caught_up and r.sent[-1].records == 0 and r.sent[-1].kafka_offset == 4


def test_without_a_target_a_participant_waits_for_end_commit():
    r = Reader(n=5)
    start(r, 101, 0, None)
    r.deliver(5)
    assert not r.sent
    r.send(EventType.END_COMMIT, 101, 0)
    assert r.written == [[0, 1, 2, 3, 4]] and not r.sent[-1].caught_up


# -- generated runs of a worker -------------------------------------------------------------------------
steps_st = st.lists(st.tuples(st.integers(0, 3), st.integers(0, 30), st.booleans()), min_size=3, max_size=25)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                  HealthCheck.too_slow])
@given(steps=steps_st, catch_up=st.booleans(), interval=st.sampled_from([0.05, 0.2, 1.0]),
       prefetch=st.sampled_from([0, 64, 1 << 20]), data=st.data())
def test_a_worker_delivers_every_record_once_with_and_without_catch_up(tmp_path_factory, monkeypatch, steps,
                                                                        catch_up, interval, prefetch, data):
    """Records produced into three partitions while the worker runs (between its loop turns), some
    writes failing: the table ends with every produced id once, and each committed round's offsets
    only move forward.  With catch_up, a round in which no new record arrives commits before its
    END_COMMIT."""
    from lakesdk.streaming.kafka.worker import SinkWorker, latest_commit_offsets
    root = tmp_path_factory.mktemp("catch-up")
    t = lk.Lake(str(root)).create_table("events", key="id", ordering="ts", table_type="mor")
    topic = MemoryTopic(3)
    produced = 0
    w = SinkWorker(SinkConfig(t.path, "kafka-connect-test-topic", "127.0.0.1:1", commit_interval=interval,
                              write_timeout=5, catch_up=catch_up, prefetch_bytes=prefetch))
    w.table, w.consumer, w.control = t, MemoryConsumer(topic), ControlLoop()
    w.producer = loop = w.control
    write = w._write
    failing = iter(data.draw(st.lists(st.booleans(), max_size=40), label="write fails"))

    def flaky(txn, rows):
        if next(failing, False):
            raise OSError("injected write failure")
        return write(txn, rows)
    monkeypatch.setattr(w, "_write", flaky)
    clock = ManualClock()
    w._on_assign(w.consumer, [ck.TopicPartition("kafka-connect-test-topic", p) for p in range(3)])
    w.coordinator.clock = clock
    w.coordinator._scheduled = [(0.0, kind, ct) for _, kind, ct in w.coordinator._scheduled]
    seen: list[dict[int, int]] = []

    def turn():
        clock.t = round(clock.t + 0.05, 6)
        w.step(data_timeout=0)
        offs = latest_commit_offsets(t, "kafka-connect-test-topic")[0]
        if not seen or offs != seen[-1]:
            seen.append(offs)

    for part, n, idle in steps:
        for _ in range(n):
            topic.records[part % 3].append(json.dumps({"id": produced, "ts": 1}).encode())
            produced += 1
        for _ in range(3 if idle else 1):
            turn()
    ends = {p: len(r) for p, r in enumerate(topic.records)}
    for _ in range(2000):
        if seen and seen[-1] == ends or produced == 0:
            break
        turn()
    w._shutdown()
    if produced == 0:
        return
    assert seen[-1] == ends
    assert all(all(b.get(p, 0) >= a.get(p, 0) for p in a) for a, b in zip(seen, seen[1:]))
    ids = t.read().to_arrow().column("id").to_pylist()
    assert sorted(ids) == list(range(produced))
    early = [e for e in loop.sent if e.type is EventType.WRITE_STATUS and e.caught_up]
    assert bool(early) == catch_up
