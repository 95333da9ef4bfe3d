"""The TransactionCoordinator: one per data topic, run by the worker that owns partition 0.

Hudi's ``ConnectTransactionCoordinator`` as a single-threaded state machine.  The worker's
loop calls :meth:`TransactionCoordinator.tick` often and hands it control events with
:meth:`TransactionCoordinator.on_event`; scheduled events (START_COMMIT, END_COMMIT,
WRITE_STATUS_TIMEOUT) carry a due time on an injectable clock, so tests drive it without
sleeping.  One round::

    START_COMMIT   begin() -> inflight instant; publish START_COMMIT(instant, offsets)
    END_COMMIT     commit_interval later; publish END_COMMIT
    WRITE_STATUS   one per partition (the newest per partition counts, K16); when every
                   partition of the topic reported: commit() with kafka.commit.offsets,
                   publish ACK_COMMIT, next START_COMMIT 100 ms later
    TIMEOUT        write_timeout after END_COMMIT without all statuses: abort() (rollback),
                   next START_COMMIT 500 ms later; offsets unchanged (K5)

Differences from Hudi, each on purpose:

* the global offsets are re-read from the table's latest completed commit at every
  START_COMMIT (the table is the source of truth), so a coordinator that lost a race can
  never rewind participants behind a newer commit;
* with ``skip_empty_rounds`` a round is not opened while every partition's end offset
  equals its committed offset (no empty instant per interval on an idle topic);
* a participant that could not write its batch reports ``write_error`` and the round is
  aborted at once instead of waiting for the timeout;
* with ``catch_up`` (lakesdk's default) a round ends as soon as it has read what its partitions
  held when it started, as a Hudi Streamer round reads up to the end offsets it found: its
  START_COMMIT carries each partition's end offset (``targets``), a participant that has taken
  every record before its target writes and reports at once (``caught_up``), and the round
  commits when every partition reported, without waiting for END_COMMIT.  A partition that does
  not get there within ``commit_interval`` writes what it has at END_COMMIT, as before.  Rounds
  then start at most once per ``commit_interval`` (START_COMMIT to START_COMMIT), so a steady
  stream is batched as with Hudi's interval, and a backlog is read without pauses;
* a coordinator that starts on a table with history first publishes an ACK_COMMIT carrying
  the latest commit's offsets (no round, commit time of that commit): the previous
  coordinator may have died between its table commit and its ACK, and this ACK lets every
  participant commit those offsets to the consumer group.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Callable, Protocol

from lakesdk.streaming.kafka.events import ControlEvent, EntityType, EventType

log = logging.getLogger(__name__)

__all__ = ["CoordinatorState", "CoordinatorServices", "CommittedRound", "TransactionCoordinator", "START_COMMIT_INIT_DELAY_S",
           "RESTART_COMMIT_DELAY_S"]

START_COMMIT_INIT_DELAY_S = 0.1     # Hudi START_COMMIT_INIT_DELAY_MS
RESTART_COMMIT_DELAY_S = 0.5        # Hudi RESTART_COMMIT_DELAY_MS


class CoordinatorState(StrEnum):
    INIT = "INIT"
    IDLE = "IDLE"                                   # lakesdk: no new data, no round open
    STARTED_COMMIT = "STARTED_COMMIT"
    ENDED_COMMIT = "ENDED_COMMIT"
    FAILED_COMMIT = "FAILED_COMMIT"
    WRITE_STATUS_RCVD = "WRITE_STATUS_RCVD"
    WRITE_STATUS_TIMEDOUT = "WRITE_STATUS_TIMEDOUT"
    ACKED_COMMIT = "ACKED_COMMIT"
    STOPPED = "STOPPED"


class CoordinatorServices(Protocol):
    """What the coordinator needs from the table and the broker."""

    def latest_offsets(self) -> dict[int, int]:
        """``kafka.commit.offsets`` of the latest completed commit ({} when none)."""

    def num_partitions(self) -> int:
        """Partitions of the data topic now (re-read every round, K19)."""

    def end_offsets(self, num_partitions: int) -> dict[int, int] | None:
        """High watermark of each of the topic's ``num_partitions`` partitions, or None when unknown."""

    def begin(self) -> dict[str, Any]:
        """Open an instant; returns the OpenInstant as a dict (``instant`` is the commit time)."""

    def commit(self, txn: dict[str, Any], stats: list[dict[str, Any]], schema: str | None,
               extra_metadata: dict[str, str]) -> str:
        """Complete the instant; returns the completed instant time."""

    def abort(self, txn: dict[str, Any]) -> None:
        """Roll the instant back."""


@dataclass
class RoundInfo:
    number: int
    commit_time: str
    txn: dict[str, Any]
    num_partitions: int
    started: float
    started_at: float = field(default_factory=time.time)   # wall clock, for status displays
    statuses: dict[int, ControlEvent] = field(default_factory=dict)
    targets: dict[int, int] = field(default_factory=dict)   # catch_up: each partition's end offset at START_COMMIT


@dataclass(frozen=True)
class CommittedRound:
    """One round this coordinator committed: the instant, the offsets it recorded, the records."""

    instant: str
    offsets: dict[int, int]
    records: int
    committed_at: float | None = None   # None: loaded from the table when the coordinator started


class TransactionCoordinator:
    """Hudi's transaction coordinator for one data topic (see the module doc)."""

    def __init__(self, topic: str, services: CoordinatorServices, publish: Callable[[ControlEvent], None], *,
                 group: str = "", commit_interval: float = 60.0, write_timeout: float = 300.0,
                 allow_commit_on_errors: bool = True, skip_empty_rounds: bool = True, catch_up: bool = True,
                 extra_metadata: dict[str, str] | None = None, clock: Callable[[], float] = time.monotonic,
                 start_delay: float = START_COMMIT_INIT_DELAY_S, restart_delay: float = RESTART_COMMIT_DELAY_S,
                 idle_poll: float | None = None, history: int = 200,
                 latest_instant: Callable[[], str | None] | None = None) -> None:
        self.topic = topic
        self.group = group
        self.services = services
        self.publish = publish
        self.commit_interval = commit_interval
        self.write_timeout = write_timeout
        self.allow_commit_on_errors = allow_commit_on_errors
        self.skip_empty_rounds = skip_empty_rounds
        self.catch_up = catch_up
        self.extra_metadata = dict(extra_metadata or {})
        self.clock = clock
        self.start_delay = start_delay
        self.restart_delay = restart_delay
        self.idle_poll = idle_poll if idle_poll is not None else min(commit_interval, 1.0)
        self.latest_instant = latest_instant
        self.state = CoordinatorState.INIT
        self.global_offsets: dict[int, int] = {}
        self.current: RoundInfo | None = None
        self.rounds = 0
        self.committed_rounds = 0
        self.aborted_rounds = 0
        self.last_committed_instant: str | None = None
        self.last_error: str | None = None
        self.records_committed = 0
        self.history: deque[CommittedRound] = deque(maxlen=history)
        self._scheduled: list[tuple[float, EventType | str, str]] = []
        self._inbox: list[ControlEvent] = []
        self._started = False
        self._stopped = False

    # -- lifecycle --------------------------------------------------------------------------------
    def start(self) -> None:
        """Load the offsets of the latest commit (K18; a malformed value raises) and schedule
        the first START_COMMIT."""
        if self._started:
            return
        self._started = True
        self.global_offsets = dict(self.services.latest_offsets())
        self._load_history()
        if self.global_offsets:
            self._publish_resync()
        self._schedule(self.start_delay, EventType.START_COMMIT, "")

    def _load_history(self) -> None:
        """Seed :attr:`history` with the table's latest sink commits (services that offer
        ``history(limit)``), so a status shows them after a coordinator moved or restarted."""
        load = getattr(self.services, "history", None)
        if load is None or not self.history.maxlen:
            return
        try:
            for instant, offsets, records in load(min(self.history.maxlen, 20)):
                self.history.append(CommittedRound(instant, dict(offsets), int(records)))
        except Exception as e:  # noqa: BLE001 - only for display
            log.warning("could not load the sink's commit history: %s", e)

    def _publish_resync(self) -> None:
        """ACK_COMMIT of the latest commit (see the module doc): participants commit its offsets to
        the consumer group.  A failure is only logged; the next round's ACK does it too."""
        instant = ""
        try:
            instant = (self.latest_instant() if self.latest_instant else None) or ""
            self.publish(ControlEvent(EventType.ACK_COMMIT, self.topic, group=self.group,
                                      sender=EntityType.COORDINATOR, sender_partition=0,
                                      receiver=EntityType.PARTICIPANT, commit_time=instant,
                                      offsets=dict(self.global_offsets)))
        except Exception as e:  # noqa: BLE001
            self.last_error = f"resync: {e}"
            log.warning("could not publish the resync ACK_COMMIT %s: %s", instant, e)

    def stop(self, *, abort_open: bool = True) -> None:
        """Stop; idempotent (K20).  The open instant, if any, is rolled back."""
        if self._stopped:
            return
        self._stopped = True
        self._scheduled.clear()
        self._inbox.clear()
        cur = self.current
        if abort_open and cur is not None and self.state in (CoordinatorState.STARTED_COMMIT,
                                                             CoordinatorState.ENDED_COMMIT):
            try:
                self.services.abort(cur.txn)
            except Exception as e:  # noqa: BLE001 - the next coordinator's begin() rolls it back anyway
                log.warning("could not roll back %s on stop: %s", cur.commit_time, e)
        self.state = CoordinatorState.STOPPED

    @property
    def stopped(self) -> bool:
        return self._stopped

    # -- input --------------------------------------------------------------------------------------
    def on_event(self, event: ControlEvent) -> None:
        """Hand over a control event (only WRITE_STATUS for this topic matters); never raises."""
        if self._stopped or event.topic != self.topic or event.type is not EventType.WRITE_STATUS:
            return
        self._inbox.append(event)

    def tick(self) -> None:
        """Process every due scheduled event and every received write status."""
        if self._stopped:
            return
        inbox, self._inbox = self._inbox, []
        for ev in inbox:
            self._on_write_status(ev)
        now = self.clock()
        while not self._stopped:
            due = [s for s in self._scheduled if s[0] <= now]
            if not due:
                break
            first = min(due, key=lambda s: s[0])
            self._scheduled.remove(first)
            _, kind, commit_time = first
            if kind is not EventType.START_COMMIT and (self.current is None or commit_time != self.current.commit_time):
                continue   # stale event (K15, K17)
            if kind is EventType.START_COMMIT:
                self._start_commit()
            elif kind is EventType.END_COMMIT:
                self._end_commit()
            elif kind == "WRITE_STATUS_TIMEOUT":
                self._timeout()

    def next_due(self) -> float | None:
        return min((s[0] for s in self._scheduled), default=None)

    # -- the state machine --------------------------------------------------------------------------
    def _schedule(self, delay: float, kind: EventType | str, commit_time: str) -> None:
        self._scheduled.append((self.clock() + delay, kind, commit_time))

    def _unschedule(self, commit_time: str) -> None:
        """Drop the scheduled END_COMMIT and timeout of a round that ended."""
        self._scheduled = [s for s in self._scheduled if s[1] is EventType.START_COMMIT or s[2] != commit_time]

    def _event(self, kind: EventType) -> ControlEvent:
        cur = self.current
        targets = dict(cur.targets) if cur is not None and kind is EventType.START_COMMIT else {}
        return ControlEvent(kind, self.topic, group=self.group, sender=EntityType.COORDINATOR, sender_partition=0,
                            receiver=EntityType.PARTICIPANT, commit_time=cur.commit_time if cur else "",
                            txn=cur.txn if cur else None, offsets=dict(self.global_offsets), targets=targets)

    def _start_commit(self) -> None:
        opened: RoundInfo | None = None
        try:
            latest = self.services.latest_offsets()
            self.global_offsets = {**self.global_offsets, **latest}
            n = int(self.services.num_partitions())
            ends = self.services.end_offsets(n) if self.skip_empty_rounds or self.catch_up else None
            if self.skip_empty_rounds and ends is not None and len(ends) >= n and all(
                    e <= self.global_offsets.get(p, 0) for p, e in ends.items()):
                self.state = CoordinatorState.IDLE
                self._schedule(self.idle_poll, EventType.START_COMMIT, "")
                return
            txn = self.services.begin()
            self.rounds += 1
            targets = dict(ends) if self.catch_up and ends is not None else {}
            self.current = opened = RoundInfo(self.rounds, txn["instant"], txn, n, self.clock(), targets=targets)
            self.publish(self._event(EventType.START_COMMIT))
            self.state = CoordinatorState.STARTED_COMMIT
            self._schedule(self.commit_interval, EventType.END_COMMIT, txn["instant"])
        except Exception as e:  # noqa: BLE001 - Hudi: log and retry START_COMMIT after 500 ms
            self.last_error = f"start_commit: {e}"
            log.exception("could not start a commit for %s", self.topic)
            if opened is not None:
                self._safe_abort(opened)
                self.state = CoordinatorState.FAILED_COMMIT
            self._schedule(self.restart_delay, EventType.START_COMMIT, "")

    def _end_commit(self) -> None:
        if self.state is not CoordinatorState.STARTED_COMMIT:
            return   # the round already ended (every partition caught up, or it failed)
        try:
            self.publish(self._event(EventType.END_COMMIT))
        except Exception as e:  # noqa: BLE001 - Hudi only logs; the timeout decides
            self.last_error = f"end_commit: {e}"
            log.exception("could not publish END_COMMIT")
        self.state = CoordinatorState.ENDED_COMMIT
        assert self.current is not None
        self._schedule(self.write_timeout, "WRITE_STATUS_TIMEOUT", self.current.commit_time)

    def _on_write_status(self, ev: ControlEvent) -> None:
        cur = self.current
        early = ev.caught_up and bool(cur and cur.targets) and self.state is CoordinatorState.STARTED_COMMIT
        if cur is None or ev.commit_time != cur.commit_time or (self.state is not CoordinatorState.ENDED_COMMIT
                                                                 and not early):
            log.debug("ignoring WRITE_STATUS %s from partition %s in state %s", ev.commit_time,
                      ev.sender_partition, self.state)
            return   # K15: stale, or before END_COMMIT (unless caught up with the round's targets)
        cur.statuses[ev.sender_partition] = ev   # K16: the later report overwrites
        if ev.write_error:
            self.last_error = f"partition {ev.sender_partition}: {ev.write_error}"
            self._fail(cur, f"partition {ev.sender_partition} could not write: {ev.write_error}")
            return
        if len(cur.statuses) >= cur.num_partitions:
            self._finish(cur)

    def _finish(self, cur: RoundInfo) -> None:
        self._unschedule(cur.commit_time)
        statuses = list(cur.statuses.values())
        errors = sum(s.error_records for s in statuses)
        if errors and not self.allow_commit_on_errors:
            self._fail(cur, f"{errors} error records and allow_commit_on_errors=False")   # K4
            return
        offsets = {**self.global_offsets, **{s.sender_partition: s.kafka_offset for s in statuses
                                             if s.kafka_offset >= 0}}
        stats = [st for s in statuses for st in s.stats]
        schema = next((s.schema for s in statuses if s.stats and s.schema), None)
        from lakesdk.streaming.kafka.events import KAFKA_GROUP_KEY, KAFKA_OFFSET_KEY, KAFKA_TOPIC_KEY, format_offsets
        extra = {**self.extra_metadata, KAFKA_OFFSET_KEY: format_offsets(offsets), KAFKA_TOPIC_KEY: self.topic}
        if self.group:
            extra[KAFKA_GROUP_KEY] = self.group
        try:
            done = self.services.commit(cur.txn, stats, schema, extra)
        except Exception as e:  # noqa: BLE001 - a failed commit leaves the offsets unchanged
            self.last_error = f"commit: {e}"
            log.exception("commit of %s failed", cur.commit_time)
            self._fail(cur, str(e))
            return
        self.state = CoordinatorState.WRITE_STATUS_RCVD
        self.global_offsets = offsets
        self.committed_rounds += 1
        records = sum(s.records for s in statuses)
        self.records_committed += records
        self.last_committed_instant = done or cur.commit_time
        self.history.append(CommittedRound(self.last_committed_instant, dict(offsets), records, time.time()))
        try:
            self.publish(self._event(EventType.ACK_COMMIT))
        except Exception as e:  # noqa: BLE001 - participants resync from the next START_COMMIT
            self.last_error = f"ack_commit: {e}"
            log.exception("could not publish ACK_COMMIT")
        self.state = CoordinatorState.ACKED_COMMIT
        delay = self.start_delay
        if cur.targets:   # catch_up: rounds start at most once per commit_interval
            delay = max(delay, cur.started + self.commit_interval - self.clock())
        self._schedule(delay, EventType.START_COMMIT, "")

    def _fail(self, cur: RoundInfo, why: str) -> None:
        log.warning("round %s of %s failed: %s", cur.commit_time, self.topic, why)
        self._unschedule(cur.commit_time)
        self._safe_abort(cur)
        self.aborted_rounds += 1
        self.state = CoordinatorState.FAILED_COMMIT
        self._schedule(self.restart_delay, EventType.START_COMMIT, "")

    def _timeout(self) -> None:
        cur = self.current
        if cur is None or self.state is not CoordinatorState.ENDED_COMMIT:
            return   # K17: the round already finished
        missing = sorted(set(range(cur.num_partitions)) - set(cur.statuses))
        self.last_error = f"write status timeout for {cur.commit_time}: no status from partitions {missing}"
        log.warning(self.last_error)
        self._safe_abort(cur)
        self.aborted_rounds += 1
        self.state = CoordinatorState.WRITE_STATUS_TIMEDOUT
        self._schedule(self.restart_delay, EventType.START_COMMIT, "")

    def _safe_abort(self, cur: RoundInfo) -> None:
        try:
            self.services.abort(cur.txn)
        except Exception as e:  # noqa: BLE001 - the next begin() rolls failed writes back
            log.warning("could not roll back %s: %s", cur.commit_time, e)

    # -- status -----------------------------------------------------------------------------------
    def snapshot(self) -> dict[str, Any]:
        cur = self.current
        return {"state": self.state.value, "round": cur.number if cur else 0,
                "instant": cur.commit_time if cur else None,
                "round_started": cur.started_at if cur else None,
                "reported": sorted(cur.statuses) if cur else [], "expected": cur.num_partitions if cur else 0,
                "global_offsets": dict(self.global_offsets), "committed_rounds": self.committed_rounds,
                "aborted_rounds": self.aborted_rounds, "last_committed_instant": self.last_committed_instant,
                "records_committed": self.records_committed, "last_error": self.last_error,
                "history": [(h.instant, dict(h.offsets), h.records) for h in self.history]}
