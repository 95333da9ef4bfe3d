"""The Kafka sink's coordinator and participant state machines, without a broker.

The cases follow the K table of shared/spec/semantics/kafka-connect.md (Hudi's
TestConnectTransactionCoordinator / TestConnectTransactionParticipant): the coordinator
runs on a manual clock with 4 partitions, interval 1 s and timeout 1 s; participants get
batches of 5 records from a simulated partition that honours pause/resume/seek.
"""

from __future__ import annotations

import pytest

from lakesdk.streaming.kafka.coordinator import CoordinatorState, TransactionCoordinator
from lakesdk.streaming.kafka.events import (
    ControlEvent,
    EntityType,
    EventType,
    OffsetsFormatError,
    format_offsets,
    parse_offsets,
)
from lakesdk.streaming.kafka.participant import TransactionParticipant

TOPIC = "kafka-connect-test-topic"


# -- events --------------------------------------------------------------------------------------------
def test_event_encoding_round_trip_all_types():
    for t in EventType:
        e = ControlEvent(t, TOPIC, group="g", sender=EntityType.PARTICIPANT, sender_partition=3,
                         receiver=EntityType.COORDINATOR, commit_time="101", txn={"instant": "101"},
                         offsets={0: 1, 3: 9}, kafka_offset=7 if t is EventType.WRITE_STATUS else -1,
                         stats=[{"fileId": "x"}] if t is EventType.WRITE_STATUS else [],
                         records=5 if t is EventType.WRITE_STATUS else 0)
        assert ControlEvent.decode(e.encode()) == e


def test_event_unknown_version_is_rejected():
    with pytest.raises(ValueError, match="protocol version 2"):
        ControlEvent.decode(b'{"v": 2, "type": "START_COMMIT", "topic": "t"}')


def test_offsets_hudi_format_both_ways():
    """K18's value format: '<p>=<o>' joined by ','; JSON objects are read too."""
    assert format_offsets({2: 20, 1: 10}) == "1=10,2=20"
    assert parse_offsets("1=10,2=20") == {1: 10, 2: 20}
    assert parse_offsets('{"1": 10}') == {1: 10}
    assert parse_offsets(None) == {}
    with pytest.raises(OffsetsFormatError):
        parse_offsets("1=10,oops")


# -- coordinator -----------------------------------------------------------------------------------------
class Clock:
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t


class FakeServices:
    def __init__(self, partitions=4, latest=None):
        self.partitions = partitions
        self.latest = dict(latest or {})
        self.next_time = 101
        self.commits: list[tuple[str, list, dict]] = []
        self.aborts: list[str] = []
        self.ends: dict[int, int] | None = None

    def latest_offsets(self):
        return dict(self.latest)

    def num_partitions(self):
        return self.partitions

    def end_offsets(self, num_partitions):
        return self.ends

    def begin(self):
        t = str(self.next_time)
        self.next_time += 1
        return {"instant": t, "action": "deltacommit", "operation": "upsert"}

    def commit(self, txn, stats, schema, extra):
        self.commits.append((txn["instant"], stats, extra))
        self.latest = parse_offsets(extra["kafka.commit.offsets"])
        return txn["instant"]

    def abort(self, txn):
        self.aborts.append(txn["instant"])


def make_coordinator(services=None, **kw):
    clock = Clock()
    sent: list[ControlEvent] = []
    kw = {"commit_interval": 1.0, "write_timeout": 1.0, **kw}
    c = TransactionCoordinator(TOPIC, services or FakeServices(), sent.append, clock=clock, **kw)
    return c, clock, sent


def advance(c, clock, seconds, step=0.05):
    end = clock.t + seconds
    while clock.t < end:
        clock.t = round(clock.t + step, 6)
        c.tick()


def status(p, commit_time, offset, *, records=10, errors=0, stats=None, write_error=None):
    return ControlEvent(EventType.WRITE_STATUS, TOPIC, sender=EntityType.PARTICIPANT, sender_partition=p,
                        receiver=EntityType.COORDINATOR, commit_time=commit_time, kafka_offset=offset,
                        stats=stats if stats is not None else [{"fileId": f"f{p}"}], schema="s", records=records,
                        error_records=errors, write_error=write_error)


def run_round(c, clock, sent, offsets, **kw):
    advance(c, clock, 0.2)
    start = sent[-1]
    assert start.type is EventType.START_COMMIT
    advance(c, clock, 1.0)
    end = sent[-1]
    assert end.type is EventType.END_COMMIT and end.commit_time == start.commit_time
    for p, o in offsets.items():
        c.on_event(status(p, start.commit_time, o, **kw))
    c.tick()
    return start, end


def test_k1_all_partitions_succeed_five_rounds():
    """K1: each round commits with every partition's offset, ACKs, and the next END carries the union."""
    svc = FakeServices()
    c, clock, sent = make_coordinator(svc)
    c.start()
    committed: dict[int, int] = {}
    for r in range(5):
        offs = {p: 100 * (r + 1) + p for p in range(4)}
        start, end = run_round(c, clock, sent, offs)
        assert end.offsets == committed          # the END carries what was committed so far
        assert sent[-1].type is EventType.ACK_COMMIT
        committed.update(offs)
        assert sent[-1].offsets == committed
        assert svc.commits[-1][0] == start.commit_time and len(svc.commits[-1][1]) == 4
        assert parse_offsets(svc.commits[-1][2]["kafka.commit.offsets"]) == committed
        assert c.state is CoordinatorState.ACKED_COMMIT
    assert [x[0] for x in svc.commits] == ["101", "102", "103", "104", "105"]
    advance(c, clock, 0.15)
    assert sent[-1].type is EventType.START_COMMIT and sent[-1].commit_time == "106"   # ~100 ms after the ACK


def test_k2_empty_write_statuses_still_commit():
    """K2: every partition reports an empty status: still a commit with the offsets, then ACK."""
    svc = FakeServices()
    c, clock, sent = make_coordinator(svc)
    c.start()
    run_round(c, clock, sent, {p: 7 for p in range(4)}, records=0, stats=[])
    assert svc.commits and svc.commits[0][1] == [] and sent[-1].type is EventType.ACK_COMMIT


def test_k3_error_records_allowed_commit():
    """K3: error records with allow_commit_on_errors=True (the default): committed."""
    svc = FakeServices()
    c, clock, sent = make_coordinator(svc)
    c.start()
    run_round(c, clock, sent, {p: 10 for p in range(4)}, errors=1)
    assert len(svc.commits) == 1 and sent[-1].type is EventType.ACK_COMMIT


def test_k4_error_records_not_allowed_fail_and_restart_with_same_offsets():
    """K4: allow_commit_on_errors=False: no commit, FAILED_COMMIT, a new START after 500 ms with unchanged offsets."""
    svc = FakeServices(latest={0: 3})
    c, clock, sent = make_coordinator(svc, allow_commit_on_errors=False)
    c.start()
    start, _ = run_round(c, clock, sent, {p: 10 for p in range(4)}, errors=2)
    assert not svc.commits and svc.aborts == [start.commit_time] and c.state is CoordinatorState.FAILED_COMMIT
    advance(c, clock, 0.45)
    assert sent[-1].type is EventType.END_COMMIT
    advance(c, clock, 0.1)
    assert sent[-1].type is EventType.START_COMMIT and sent[-1].commit_time != start.commit_time
    assert sent[-1].offsets == {0: 3}


def test_k5_subset_of_partitions_times_out():
    """K5: only 2 of 4 report: after the write timeout the round is aborted, START follows, offsets unchanged."""
    svc = FakeServices()
    c, clock, sent = make_coordinator(svc)
    c.start()
    start, _ = run_round(c, clock, sent, {0: 5, 1: 5})
    assert c.state is CoordinatorState.ENDED_COMMIT
    advance(c, clock, 1.0)
    assert c.state is CoordinatorState.WRITE_STATUS_TIMEDOUT and svc.aborts == [start.commit_time]
    advance(c, clock, 0.55)
    assert sent[-1].type is EventType.START_COMMIT and sent[-1].offsets == {} and not svc.commits


def test_k15_stale_and_early_write_statuses_are_ignored():
    """K15: a WRITE_STATUS for an older instant, or one that arrives before END_COMMIT, does not count."""
    svc = FakeServices()
    c, clock, sent = make_coordinator(svc)
    c.start()
    advance(c, clock, 0.2)
    ct = sent[-1].commit_time
    for p in range(4):
        c.on_event(status(p, ct, 5))     # state STARTED_COMMIT: too early
    c.tick()
    assert c.current.statuses == {}
    advance(c, clock, 1.0)
    for p in range(4):
        c.on_event(status(p, "100", 5))  # another instant
    c.tick()
    assert c.current.statuses == {} and not svc.commits


def test_k16_duplicate_write_status_overwrites():
    """K16: a partition reporting twice counts once; the later report wins."""
    svc = FakeServices()
    c, clock, sent = make_coordinator(svc)
    c.start()
    start, _ = run_round(c, clock, sent, {0: 1, 1: 1, 2: 1})
    c.on_event(status(0, start.commit_time, 9))
    c.tick()
    assert not svc.commits and c.current.statuses[0].kafka_offset == 9
    c.on_event(status(3, start.commit_time, 4))
    c.tick()
    assert parse_offsets(svc.commits[0][2]["kafka.commit.offsets"]) == {0: 9, 1: 1, 2: 1, 3: 4}


def test_k17_timeout_after_success_has_no_effect():
    """K17: the WRITE_STATUS_TIMEOUT of a committed round does nothing."""
    svc = FakeServices()
    c, clock, sent = make_coordinator(svc)
    c.start()
    run_round(c, clock, sent, {p: 1 for p in range(4)})
    advance(c, clock, 1.2)
    assert not svc.aborts and c.committed_rounds == 1


def test_k18_restart_loads_offsets_of_latest_commit_and_rejects_malformed():
    """K18: start() loads {1: 10, 2: 20}; the first START carries them; a malformed value raises."""
    c, clock, sent = make_coordinator(FakeServices(latest={1: 10, 2: 20}))
    c.start()
    advance(c, clock, 0.2)
    assert sent[-1].type is EventType.START_COMMIT and sent[-1].offsets == {1: 10, 2: 20}

    class Bad(FakeServices):
        def latest_offsets(self):
            return parse_offsets("1=10,x")
    c2, _, _ = make_coordinator(Bad())
    with pytest.raises(OffsetsFormatError):
        c2.start()


def test_k19_partition_count_is_reread_every_round():
    """K19: the topic grows from 4 to 6 partitions: the next round waits for 6 senders."""
    svc = FakeServices()
    c, clock, sent = make_coordinator(svc)
    c.start()
    run_round(c, clock, sent, {p: 1 for p in range(4)})
    svc.partitions = 6
    run_round(c, clock, sent, {p: 2 for p in range(4)})
    assert len(svc.commits) == 1
    for p in (4, 5):
        c.on_event(status(p, c.current.commit_time, 2))
    c.tick()
    assert len(svc.commits) == 2


def test_k20_stop_is_idempotent_and_late_events_do_not_throw():
    """K20: stop(), stop() again, a late WRITE_STATUS, a last stop(): nothing throws; the open instant is
    rolled back exactly once."""
    svc = FakeServices()
    c, clock, sent = make_coordinator(svc, commit_interval=60)
    c.start()
    advance(c, clock, 0.2)
    c.stop()
    c.stop()
    c.on_event(status(0, "101", 1))
    c.tick()
    c.stop()
    assert c.state is CoordinatorState.STOPPED and svc.aborts == ["101"]


def test_coordinator_skips_rounds_while_no_new_data():
    """lakesdk: no instant is opened while every end offset equals the committed offset."""
    svc = FakeServices(latest={p: 5 for p in range(4)})
    svc.ends = {p: 5 for p in range(4)}
    c, clock, sent = make_coordinator(svc)
    c.start()
    advance(c, clock, 3)
    assert [e.type for e in sent] == [EventType.ACK_COMMIT] and c.state is CoordinatorState.IDLE   # the resync
    svc.ends = {0: 6, 1: 5, 2: 5, 3: 5}
    advance(c, clock, 1.1)
    assert sent[1].type is EventType.START_COMMIT and c.rounds == 1


def test_recovered_coordinator_resyncs_group_offsets_first():
    """A coordinator that starts on a table with history publishes an ACK_COMMIT with the latest commit's
    offsets before its first round (its predecessor may have died between commit and ACK); a participant
    that gets it commits the offset to the consumer group.  A fresh table publishes nothing."""
    c, clock, sent = make_coordinator(FakeServices(latest={1: 10, 2: 20}), latest_instant=lambda: "100")
    c.start()
    assert [(e.type, e.commit_time, e.offsets) for e in sent] == [(EventType.ACK_COMMIT, "100", {1: 10, 2: 20})]
    ctx = SimPartition()
    p = TransactionParticipant(TOPIC, 2, ctx, lambda txn, rows: ([], None), [].append)
    p.start()
    p.on_event(sent[0])
    p.process()
    assert ctx.kafka_commits == [20] and p.committed_offset == 20 and p.txn is None
    c2, _, sent2 = make_coordinator(FakeServices())
    c2.start()
    assert sent2 == []


def test_new_assignment_commits_table_offset_to_group_once():
    """A participant started with the table's offset (a new assignment) commits it to the group at its
    first process(), even when no round follows; not again while nothing changes.  A START_COMMIT whose
    offset is ahead of the group's commits it too."""
    ctx = SimPartition()
    p = TransactionParticipant(TOPIC, 0, ctx, lambda txn, rows: ([], None), [].append)
    p.start(1331)
    assert ctx.kafka_commits == []
    p.process()
    p.process()
    assert ctx.kafka_commits == [1331] and p.kafka_committed == 1331
    p.on_event(ControlEvent(EventType.START_COMMIT, TOPIC, commit_time="5", offsets={0: 1400}))
    p.process()
    assert ctx.kafka_commits == [1331, 1400]


def test_group_commit_failure_is_retried():
    class Flaky(SimPartition):
        fails = 1

        def commit_offset(self, offset):
            if self.fails:
                self.fails -= 1
                raise RuntimeError("REBALANCE_IN_PROGRESS")
            super().commit_offset(offset)
    ctx = Flaky()
    p = TransactionParticipant(TOPIC, 0, ctx, lambda txn, rows: ([], None), [].append)
    p.start(7)
    p.process()
    assert ctx.kafka_commits == [] and p.kafka_committed is None
    p.process()
    assert ctx.kafka_commits == [7] and p.kafka_committed == 7


def test_write_error_aborts_round_at_once():
    svc = FakeServices()
    c, clock, sent = make_coordinator(svc)
    c.start()
    run_round(c, clock, sent, {0: 1})
    c.on_event(status(1, c.current.commit_time, 1, write_error="OSError: disk full"))
    c.tick()
    assert svc.aborts and c.state is CoordinatorState.FAILED_COMMIT and "disk full" in c.last_error


# -- participant ------------------------------------------------------------------------------------------
class SimPartition:
    """Hudi's MockKafkaConnect: a partition with records 0.., a consumer position, pause and seek."""

    def __init__(self, start=0):
        self.position = start
        self.paused = True
        self.seeks: list[int] = []
        self.kafka_commits: list[int] = []

    def pause(self):
        self.paused = True

    def resume(self):
        self.paused = False

    def seek(self, offset):
        self.seeks.append(offset)
        self.position = offset
        return True

    def commit_offset(self, offset):
        self.kafka_commits.append(offset)


class Harness:
    def __init__(self, partition=4, *, base=0):
        self.ctx = SimPartition(base)
        self.sent: list[ControlEvent] = []
        self.written: list[list[dict]] = []
        self.partition = partition
        self.coordinator_committed = 0
        self.commit_time = 101
        self.participant = self.new_participant()

    def new_participant(self):
        def writer(txn, rows):
            self.written.append(list(rows))
            return [{"fileId": f"f{len(self.written)}"}], "schema"
        p = TransactionParticipant(TOPIC, self.partition, self.ctx, writer, self.sent.append)
        p.start()
        self.participant = p
        return p

    def event(self, kind, commit_time=None):
        ct = str(commit_time or self.commit_time)
        ev = ControlEvent(kind, TOPIC, commit_time=ct, txn={"instant": ct},
                          offsets={self.partition: self.coordinator_committed})
        self.participant.on_event(ev)
        self.participant.process()
        if kind is EventType.END_COMMIT:   # the coordinator takes the write status at once (MockCoordinator)
            st = [s for s in self.sent if s.type is EventType.WRITE_STATUS and s.commit_time == ct]
            if st:
                assert st[-1].kafka_offset >= self.coordinator_committed
                self.coordinator_committed = st[-1].kafka_offset

    def publish(self, n):
        """Feed n records from the simulated position (replaying after a seek, like MockKafkaConnect)."""
        while True:
            if self.ctx.paused:
                return
            before = len(self.ctx.seeks)
            start = self.ctx.position
            for o in range(start, start + n):
                self.participant.buffer(o, {"id": o})
            self.ctx.position = start + n
            self.participant.process()
            if len(self.ctx.seeks) == before:
                return

    def full_round(self, n=5):
        self.commit_time += 1
        self.event(EventType.START_COMMIT)
        self.publish(n)
        self.event(EventType.END_COMMIT)
        self.event(EventType.ACK_COMMIT)

    def check(self, written, position, committed):
        assert len(self.written[-1]) == written
        assert self.ctx.position == position
        assert self.participant.committed_offset == self.coordinator_committed == committed


def test_k6_regular_round():
    """K6: START +5, END, ACK: 5 written, position 5, WRITE_STATUS offset 5, committed 5 on both sides."""
    h = Harness()
    h.commit_time = 102
    h.event(EventType.START_COMMIT)
    assert not h.ctx.paused
    h.publish(5)
    h.event(EventType.END_COMMIT)
    assert h.ctx.paused and h.sent[-1].kafka_offset == 5 and h.sent[-1].records == 5
    h.event(EventType.ACK_COMMIT)
    assert h.ctx.paused and h.ctx.kafka_commits == [5]
    h.check(5, 5, 5)


def test_k7_coordinator_failed_after_start_commit():
    """K7: START(102) +5, coordinator replaced (committed 0), full round: resync to 0, 0..4 written once."""
    h = Harness()
    h.commit_time = 102
    h.event(EventType.START_COMMIT)
    h.publish(5)
    h.coordinator_committed = 0
    h.full_round()
    h.check(5, 5, 5)
    assert [r["id"] for r in h.written[-1]] == [0, 1, 2, 3, 4]


def test_k8_coordinator_failed_after_end_commit():
    """K8: START +5, END (status lost with the old coordinator), new coordinator at 0, full round."""
    h = Harness()
    h.commit_time = 102
    h.event(EventType.START_COMMIT)
    h.publish(5)
    h.participant.on_event(ControlEvent(EventType.END_COMMIT, TOPIC, commit_time="102", offsets={4: 0}))
    h.participant.process()
    h.coordinator_committed = 0
    h.full_round()
    h.check(5, 5, 5)
    assert [r["id"] for r in h.written[-1]] == [0, 1, 2, 3, 4]


def test_k9_failure_before_start_commit():
    """K9: the participant is re-created before any commit, then a full round."""
    h = Harness()
    h.new_participant()
    h.full_round()
    h.check(5, 5, 5)


def test_k10_failure_after_start_commit():
    """K10: old participant consumed 0..4 in 102; a new one ignores END(102), ACK(102) syncs 0; the next
    round rewinds to 0 and writes 0..4."""
    h = Harness()
    h.commit_time = 102
    h.event(EventType.START_COMMIT)
    h.publish(5)
    h.new_participant()
    n_sent = len(h.sent)
    h.event(EventType.END_COMMIT)
    assert len(h.sent) == n_sent             # no transaction: no WRITE_STATUS
    h.event(EventType.ACK_COMMIT)
    assert h.participant.committed_offset == 0
    h.full_round()
    h.check(5, 5, 5)
    assert [r["id"] for r in h.written[-1]] == [0, 1, 2, 3, 4]


def test_k11_failure_after_end_commit():
    """K11: END(102) committed 5 via the old participant; the new participant syncs 5 on ACK; the next round
    writes 5..9 exactly."""
    h = Harness()
    h.commit_time = 102
    h.event(EventType.START_COMMIT)
    h.publish(5)
    h.event(EventType.END_COMMIT)
    assert h.coordinator_committed == 5
    h.new_participant()
    h.event(EventType.ACK_COMMIT)
    assert h.participant.committed_offset == 5
    h.full_round()
    h.check(5, 10, 10)
    assert [r["id"] for r in h.written[-1]] == [5, 6, 7, 8, 9]


def test_k12_absent_partition_resets_to_zero():
    """K12: committed=7 and a START whose offsets lack the partition: committed becomes 0, reprocess from 0."""
    h = Harness()
    h.participant.committed_offset = 7
    h.participant.on_event(ControlEvent(EventType.START_COMMIT, TOPIC, commit_time="102", offsets={1: 3}))
    h.participant.process()
    assert h.participant.committed_offset == 0 and h.ctx.position == 0


def test_k13_leader_offset_wins_and_older_records_are_ignored():
    """K13: committed=3, START with {p: 9}: committed 9, records below 9 are dropped."""
    h = Harness()
    h.participant.committed_offset = 3
    h.coordinator_committed = 9
    h.commit_time = 102
    h.event(EventType.START_COMMIT)
    assert h.participant.committed_offset == 9 and h.ctx.seeks[-1] == 9
    for o in range(3, 12):
        h.participant.buffer(o, {"id": o})
    h.participant.process()
    h.event(EventType.END_COMMIT)
    assert [r["id"] for r in h.written[-1]] == [9, 10, 11] and h.sent[-1].kafka_offset == 12


def test_k14_end_commit_mismatch_drops_transaction():
    """K14: transaction 102, END_COMMIT(103): cleaned up, resynced, no WRITE_STATUS, no transaction."""
    h = Harness()
    h.commit_time = 102
    h.event(EventType.START_COMMIT)
    h.publish(3)
    h.coordinator_committed = 2
    h.event(EventType.END_COMMIT, commit_time=103)
    assert not [s for s in h.sent if s.type is EventType.WRITE_STATUS]
    assert h.participant.txn is None and h.participant.committed_offset == 2


def test_gap_after_seek_is_accepted_once():
    """A gap that is still there right after seeking (compacted topic, transaction markers) is real."""
    h = Harness()
    h.commit_time = 102
    h.event(EventType.START_COMMIT)     # seeks to 0
    for o in (2, 3):
        h.participant.buffer(o, {"id": o})
    h.participant.process()
    h.event(EventType.END_COMMIT)
    assert [r["id"] for r in h.written[-1]] == [2, 3] and h.sent[-1].kafka_offset == 4


def test_gap_without_seek_rewinds():
    h = Harness()
    h.commit_time = 102
    h.event(EventType.START_COMMIT)
    h.participant.buffer(0, {"id": 0})
    h.participant.process()
    h.participant.buffer(3, {"id": 3})   # 1 and 2 are missing: read again from 1
    h.participant.process()
    assert h.ctx.seeks[-1] == 1 and h.participant.txn.expected_offset == 1


def test_undecodable_records_are_counted():
    """K3 on the participant side: a record that cannot be decoded is an error record, skipped."""
    sent: list[ControlEvent] = []

    def decode(v):
        if v == b"bad":
            raise ValueError("bad")
        return {"id": int(v)}
    p = TransactionParticipant(TOPIC, 0, SimPartition(), lambda txn, rows: ([], None), sent.append, decode=decode)
    p.start()
    p.on_event(ControlEvent(EventType.START_COMMIT, TOPIC, commit_time="1", offsets={0: 0}))
    p.process()
    for o, v in enumerate([b"1", b"bad", b"3"]):
        p.buffer(o, v)
    p.process()
    p.on_event(ControlEvent(EventType.END_COMMIT, TOPIC, commit_time="1", offsets={0: 0}))
    p.process()
    assert sent[-1].records == 2 and sent[-1].error_records == 1 and sent[-1].kafka_offset == 3


def test_k22_ack_commits_offset_to_kafka():
    """K22: after ACK the participant's committed offset is committed to the consumer group."""
    h = Harness()
    h.full_round()
    h.full_round()
    assert h.ctx.kafka_commits == [5, 10]


def test_k24_records_are_buffered_until_end_commit_then_written_once():
    """K24: nothing is written while records arrive; END_COMMIT writes the whole batch in one call, for the
    coordinator's instant (the sink's writes are upserts into a merge-on-read table)."""
    h = Harness()
    h.commit_time = 102
    h.event(EventType.START_COMMIT)
    h.publish(10)
    assert h.written == [] and h.participant.snapshot()["pending_rows"] == 10
    h.event(EventType.END_COMMIT)
    assert len(h.written) == 1 and [r["id"] for r in h.written[0]] == list(range(10))
    assert h.sent[-1].type is EventType.WRITE_STATUS and h.sent[-1].commit_time == "102"
    assert h.sent[-1].stats == [{"fileId": "f1"}] and h.sent[-1].records == 10


# -- worker routing (K21) against a fake consumer --------------------------------------------------------
class _Msg:
    def __init__(self, partition, offset, value):
        self._p, self._o, self._v = partition, offset, value

    def partition(self):
        return self._p

    def offset(self):
        return self._o

    def value(self):
        return self._v

    def error(self):
        return None


class _FakeConsumer:
    def __init__(self, topic, partitions):
        self.topic, self.n = topic, partitions
        self.assigned: list[int] = []
        self.commits: list[tuple[int, int]] = []
        self.inbox: list[_Msg] = []

    def assign(self, tps):
        self.assigned = [tp.partition for tp in tps]

    def unassign(self):
        self.assigned = []

    def pause(self, tps):
        pass

    def resume(self, tps):
        pass

    def seek(self, tp):
        pass

    def commit(self, offsets, asynchronous=False):
        self.commits += [(tp.partition, tp.offset) for tp in offsets]

    def consume(self, num_messages=1, timeout=0):
        out, self.inbox = self.inbox, []
        return out

    def get_watermark_offsets(self, tp, timeout=None):
        return 0, 0

    def list_topics(self, topic=None, timeout=None):
        from types import SimpleNamespace
        return SimpleNamespace(topics={self.topic: SimpleNamespace(partitions=dict.fromkeys(range(self.n)))})

    def close(self):
        pass


class _FakeProducer:
    def __init__(self):
        self.sent: list[ControlEvent] = []

    def produce(self, topic, key=None, value=None):
        self.sent.append(ControlEvent.decode(value))

    def flush(self, timeout=None):
        return 0


def test_k21_worker_routes_records_to_the_participant_of_their_partition(tmp_path):
    """K21: assign(0, 1): partition 0 gets the coordinator and a participant, 1 a participant; records
    go to their own partition's participant, records of unknown partitions are dropped; after revoking 1
    its records are dropped; revoking 0 stops the coordinator; re-assigning 1 makes a new participant;
    shutdown clears everything."""
    ck = pytest.importorskip("confluent_kafka")
    import lakesdk as lk
    from lakesdk.streaming.kafka.config import SinkConfig
    from lakesdk.streaming.kafka.worker import SinkWorker
    t = lk.Lake(str(tmp_path / "lake")).create_table("events", key="id", ordering="ts", table_type="mor")
    w = SinkWorker(SinkConfig(t.path, TOPIC, "127.0.0.1:1"))
    w.table, w.consumer, w.control, w.producer = t, _FakeConsumer(TOPIC, 3), _FakeConsumer("ctl", 1), _FakeProducer()
    tp = lambda p: ck.TopicPartition(TOPIC, p)  # noqa: E731
    w._on_assign(w.consumer, [tp(0), tp(1)])
    assert sorted(w.participants) == [0, 1] and w.coordinator is not None and w.consumer.assigned == [0, 1]
    w.consumer.inbox = [_Msg(0, 0, b'{"id": 1}'), _Msg(1, 0, b'{"id": 2}'), _Msg(1, 1, b'{"id": 3}'),
                        _Msg(2, 0, b'{"id": 4}')]
    w.step(data_timeout=0)
    assert (w.participants[0].buffered, w.participants[1].buffered) == (1, 2)   # partition 2 dropped
    old1 = w.participants[1]
    w._on_revoke(w.consumer, [tp(1)])
    assert sorted(w.participants) == [0] and old1.stopped
    w.consumer.inbox = [_Msg(1, 2, b'{"id": 5}'), _Msg(0, 1, b'{"id": 6}')]
    w.step(data_timeout=0)
    assert w.participants[0].buffered == 2 and old1.buffered == 0
    coordinator = w.coordinator
    w._on_revoke(w.consumer, [tp(0)])
    assert w.participants == {} and w.coordinator is None and coordinator.stopped
    w._on_assign(w.consumer, [tp(1)])
    assert w.participants[1] is not old1 and w.coordinator is None
    w._shutdown()
    assert w.participants == {} and w.consumer is None


def test_sink_status_from_worker_snapshots():
    """SinkStatus merges the workers' snapshots: the coordinator's round (instant, start, reported
    partitions), per-partition table/group/consumed/written offsets and lag, and the committed rounds."""
    from lakesdk.streaming.kafka.sink import CommittedRound, merge_snapshots
    c, clock, sent = make_coordinator(FakeServices(partitions=2))
    c.start()
    start, _ = run_round(c, clock, sent, {0: 5, 1: 7})
    advance(c, clock, 1.2)                                       # the next round's START and END
    c.on_event(status(0, c.current.commit_time, 9))
    c.tick()
    h = Harness(partition=1)
    h.full_round(7)
    part = h.participant.snapshot()
    part["end"] = 12
    st = merge_snapshots(TOPIC, [{"worker": "w0", "running": True, "partitions": {1: part},
                                  "coordinator": c.snapshot()}], [])
    assert st.running and st.workers == 1 and st.coordinator_state == "ENDED_COMMIT" and st.coordinator_worker == "w0"
    assert st.instant == c.current.commit_time and st.round == 2 and st.expected_partitions == 2
    assert st.round_started is not None and st.reported == (0,)
    assert st.history == (CommittedRound(start.commit_time, {0: 5, 1: 7}, 20),) and st.records_committed == 20
    (p,) = st.partitions
    assert (p.partition, p.committed, p.kafka_committed, p.consumed, p.written, p.end, p.lag) == (1, 7, 7, 7, 7, 12, 5)
    assert st.committed_offsets == {1: 7} and st.group_offsets == {1: 7} and st.lag == 5
    r = repr(st)
    assert "ENDED_COMMIT on w0: round 2" in r and "(reported 1/2)" in r and "lag=5" in r
    h = st._repr_html_()
    assert "<b>SinkStatus</b>" in h and "ENDED_COMMIT on w0" in h and "<td>12</td>" in h
    assert "no worker running" in merge_snapshots(TOPIC, [], ["w0: OSError: x"])._repr_html_()


def test_cli_worker_processes_get_their_own_instance_ids():
    from lakesdk.cli.kafka import _child_argv
    argv = ["--table", "t", "--topic", "x", "--bootstrap", "b", "--workers", "3", "--instance-id", "sink"]
    child = _child_argv(argv, 2, "sink")
    assert child[child.index("--instance-id") + 1] == "sink-2" and child.count("--instance-id") == 1
    assert child[child.index("--workers") + 1] == "1" and child.count("--workers") == 1
    assert "--instance-id" not in _child_argv(["--table", "t", "--workers=2"], 0, None)


def test_cli_workers_auto_is_one_per_two_cores_and_at_most_one_per_partition():
    """``--workers auto`` (the default): a worker reads and writes on one thread and decodes on
    another, so one worker process per two usable cores, no more than the topic's partitions
    (a worker without a partition would idle), and one where the partitions are unknown."""
    import argparse

    from lakesdk.cli.kafka import add_arguments, auto_workers
    assert [auto_workers(c, 6) for c in (1, 2, 3, 4, 8, 16, 64)] == [1, 1, 1, 2, 4, 6, 6]
    assert auto_workers(16, None) == 1 and auto_workers(16, 0) == 1 and auto_workers(16, 2) == 2
    p = argparse.ArgumentParser()
    add_arguments(p)
    base = ["--table", "t", "--topic", "x", "--bootstrap", "b"]
    assert p.parse_args(base).workers == "auto" and p.parse_args([*base, "--workers", "3"]).workers == 3
    with pytest.raises(SystemExit):
        p.parse_args([*base, "--workers", "0"])


def test_coordinator_history_is_seeded_from_the_table():
    """A coordinator starts with the table's latest sink commits in its history (for status displays),
    then appends the rounds it commits."""
    class WithHistory(FakeServices):
        def history(self, limit):
            return [("099", {0: 3}, 3), ("100", {0: 5, 1: 2}, 4)]
    c, clock, sent = make_coordinator(WithHistory(partitions=2, latest={0: 5, 1: 2}))
    c.start()
    start, _ = run_round(c, clock, sent, {0: 8, 1: 2})
    assert [(h.instant, h.offsets, h.records) for h in c.history] == [
        ("099", {0: 3}, 3), ("100", {0: 5, 1: 2}, 4), (start.commit_time, {0: 8, 1: 2}, 20)]
    assert c.history[0].committed_at is None and c.history[-1].committed_at is not None


def test_sink_opens_the_table_with_its_concurrency_settings(tmp_path):
    """``concurrency``, ``lock`` and ``lock_options`` (KafkaSink, SinkConfig, the CLI's
    --concurrency/--lock/--lock-option) open the table as open_table does, so the sink can
    write beside other writers and table services; the settings survive the JSON form."""
    import argparse

    import lakesdk as lk
    from lakesdk.cli.kafka import _config, add_arguments
    from lakesdk.streaming.kafka import KafkaSink, SinkConfig
    from lakesdk.streaming.kafka.worker import open_sink_table
    t = lk.Lake(str(tmp_path)).create_table("events", key="id", ordering="ts", table_type="mor")
    p = argparse.ArgumentParser()
    add_arguments(p)
    args = p.parse_args(["--table", t.path, "--topic", "x", "--bootstrap", "127.0.0.1:1", "--concurrency",
                         "optimistic", "--lock", "storage", "--lock-option", "timeout_s=300",
                         "--lock-option", "note=a=b"])
    cfg = _config(args)
    assert cfg.lock_options == (("note", "a=b"), ("timeout_s", 300))
    assert SinkConfig.from_json(cfg.to_json()) == cfg
    assert cfg == KafkaSink(t.path, "x", "127.0.0.1:1", concurrency="optimistic", lock="storage",
                            lock_options={"timeout_s": 300, "note": "a=b"}).config
    opts = open_sink_table(cfg).options
    assert (opts.concurrency, opts.lock, dict(opts.lock_options)["timeout_s"]) == ("optimistic", "storage", 300)
    assert (opts.engine, opts.markers) == ("local", "direct")
    assert open_sink_table(SinkConfig(t.path, "x", "b")).options.concurrency == "single_writer"
    with pytest.raises(SystemExit):
        p.parse_args(["--table", t.path, "--topic", "x", "--bootstrap", "b", "--lock-option", "no-equals-sign"])
