"""Snapshots of a Kafka sink: :class:`SinkStatus`, one :class:`PartitionStatus` per partition,
the :class:`CommittedRound` history, and :func:`merge_snapshots` (the workers' snapshots into one
status).  Plain data (no I/O): the sink, the CLI and the notebook monitor all read them."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

__all__ = ["SinkStatus", "PartitionStatus", "CommittedRound", "merge_snapshots"]


@dataclass(frozen=True)
class PartitionStatus:
    """One partition of the data topic, as its worker last saw it (offsets are *next* offsets).

    ``committed``: the offset in the table's latest commit, as the participant knows it;
    ``position``: the next offset the open transaction expects (None: no transaction);
    ``end``: the partition's high watermark; ``consumed``: one past the last offset read from
    Kafka; ``written``: the offset the last WRITE_STATUS reported (the batch written for the
    round); ``kafka_committed``: the offset this worker committed to the consumer group
    (None: none yet); ``records_written`` / ``error_records``: counts since the worker started."""

    partition: int
    worker: str
    committed: int
    position: int | None
    end: int | None
    records_written: int
    error_records: int
    consumed: int | None = None
    written: int | None = None
    kafka_committed: int | None = None
    buffered: int = 0

    @property
    def lag(self) -> int | None:
        """Records in Kafka that are not committed in the table yet."""
        return None if self.end is None else max(0, self.end - self.committed)


@dataclass(frozen=True)
class CommittedRound:
    """A round the coordinator committed: its instant, the offsets recorded with it, the records."""

    instant: str
    offsets: dict[int, int]
    records: int


@dataclass(frozen=True)
class SinkStatus:
    """A snapshot of a sink (no I/O; each worker refreshes its part about once a second).

    Attributes:
        topic: the data topic.
        running: whether any worker runs.
        workers: how many workers run.
        coordinator_state: ``INIT``, ``IDLE`` (no new data), ``STARTED_COMMIT``, ``ENDED_COMMIT``,
            ``WRITE_STATUS_RCVD``, ``ACKED_COMMIT``, ``FAILED_COMMIT``, ``WRITE_STATUS_TIMEDOUT`` or
            ``STOPPED``; None when no worker of this process runs the coordinator.
        coordinator_worker: the worker that runs the coordinator (it owns partition 0).
        round: the number of the current (or last) round of this coordinator.
        instant: that round's instant.
        round_started: when that round started (seconds since the epoch), or None.
        reported: the partitions whose WRITE_STATUS arrived for that round.
        expected_partitions: how many partitions the round waits for.
        last_committed_instant: the latest instant this coordinator committed.
        committed_rounds / aborted_rounds: rounds committed / rolled back by this coordinator.
        records_committed: records in the committed rounds.
        last_error: the coordinator's latest error, if any.
        partitions: one :class:`PartitionStatus` per assigned partition.
        history: the committed rounds, oldest first (:class:`CommittedRound`: instant, offsets,
            records; the most recent 200).  A coordinator starts with the table's latest 20 sink
            commits (records from their commit statistics), so the list survives a restart.
        errors: errors of workers that stopped.

    Derived: ``lag`` (sum over partitions), ``committed_offsets`` (table),
    ``group_offsets`` (consumer group), ``end_offsets``.
    """

    topic: str
    running: bool
    workers: int
    coordinator_state: str | None = None
    coordinator_worker: str | None = None
    round: int = 0
    instant: str | None = None
    last_committed_instant: str | None = None
    committed_rounds: int = 0
    aborted_rounds: int = 0
    last_error: str | None = None
    partitions: tuple[PartitionStatus, ...] = field(default_factory=tuple)
    errors: tuple[str, ...] = ()
    round_started: float | None = None
    reported: tuple[int, ...] = ()
    expected_partitions: int = 0
    records_committed: int = 0
    history: tuple[CommittedRound, ...] = ()

    @property
    def lag(self) -> int | None:
        lags = [p.lag for p in self.partitions]
        return None if not lags or any(x is None for x in lags) else sum(x for x in lags if x is not None)

    @property
    def committed_offsets(self) -> dict[int, int]:
        """partition -> next offset, as committed in the table."""
        return {p.partition: p.committed for p in self.partitions}

    @property
    def group_offsets(self) -> dict[int, int | None]:
        """partition -> next offset, as committed to the consumer group by the sink."""
        return {p.partition: p.kafka_committed for p in self.partitions}

    @property
    def end_offsets(self) -> dict[int, int | None]:
        return {p.partition: p.end for p in self.partitions}

    def __repr__(self) -> str:
        if not self.running and not self.partitions:
            tail = "; ".join(self.errors)
            return f"<SinkStatus {self.topic!r} stopped: no worker running{'; ' + tail if tail else ''}>"
        lines = [f"<SinkStatus {self.topic!r} {'running' if self.running else 'stopped'} "
                 f"workers={self.workers} lag={self.lag}"]
        if self.coordinator_state:
            started = "" if self.round_started is None else \
                time.strftime(" started %H:%M:%S", time.localtime(self.round_started))
            lines.append(f"  coordinator {self.coordinator_state} on {self.coordinator_worker}: round {self.round} "
                         f"instant {self.instant}{started} (reported {len(self.reported)}/{self.expected_partitions}); "
                         f"committed {self.committed_rounds} ({self.records_committed} records), "
                         f"aborted {self.aborted_rounds}")
        lines.append(f"  last committed instant: {self.last_committed_instant}")
        if self.last_error:
            lines.append(f"  last error: {self.last_error}")
        for e in self.errors:
            lines.append(f"  worker error: {e}")
        if self.partitions:
            lines.append("  partition  committed      group   position   consumed        end        lag   records  worker")
            for p in self.partitions:
                lines.append(f"  {p.partition:>9}  {p.committed:>9}  {_n(p.kafka_committed):>9}  {_n(p.position):>9}  "
                             f"{_n(p.consumed):>9}  {_n(p.end):>9}  {_n(p.lag):>9}  {p.records_written:>8}  {p.worker}")
        return "\n".join(lines) + ">"

    def _repr_html_(self) -> str:
        import html
        e = html.escape
        head = f"<b>SinkStatus</b> <code>{e(self.topic)}</code> {'running' if self.running else 'stopped'}"
        if not self.running and not self.partitions:
            errs = "".join(f"<li>{e(x)}</li>" for x in self.errors)
            return f"<div>{head}: no worker running{'<ul>' + errs + '</ul>' if errs else ''}</div>"
        cells: list[tuple[str, Any]] = [("workers", self.workers), ("lag", _n(self.lag))]
        if self.coordinator_state:
            started = "" if self.round_started is None else \
                time.strftime("%H:%M:%S", time.localtime(self.round_started))
            cells += [("coordinator", f"{self.coordinator_state} on {self.coordinator_worker}"),
                      ("round", f"{self.round}: instant {self.instant} started {started}, reported "
                                f"{list(self.reported)} of {self.expected_partitions} partitions"),
                      ("committed rounds", f"{self.committed_rounds} ({self.records_committed} records), "
                                           f"aborted {self.aborted_rounds}")]
        cells.append(("last committed instant", self.last_committed_instant or "-"))
        if self.last_error:
            cells.append(("last error", self.last_error))
        cells += [("worker error", x) for x in self.errors]
        info = "".join(f"<tr><th style='text-align:left'>{e(k)}</th><td>{e(str(v))}</td></tr>" for k, v in cells)
        cols = ["partition", "committed (table)", "committed (group)", "position", "consumed", "end", "lag",
                "records", "worker"]
        rows = "".join(
            "<tr>" + "".join(f"<td>{e(str(v))}</td>" for v in (
                p.partition, p.committed, _n(p.kafka_committed), _n(p.position), _n(p.consumed), _n(p.end),
                _n(p.lag), p.records_written, p.worker)) + "</tr>" for p in self.partitions)
        parts = (f"<table><tr>{''.join(f'<th>{c}</th>' for c in cols)}</tr>{rows}</table>"
                 if self.partitions else "")
        return f"<div>{head}<table>{info}</table>{parts}</div>"


def _n(x: int | None) -> str:
    return "-" if x is None else str(x)


def merge_snapshots(topic: str, snaps: list[dict[str, Any]], errors: list[str]) -> SinkStatus:
    parts: list[PartitionStatus] = []
    coord: dict[str, Any] | None = None
    cworker = None
    for s in snaps:
        for p, ps in (s.get("partitions") or {}).items():
            last = ps.get("last_consumed")
            parts.append(PartitionStatus(int(p), s["worker"], ps["committed"], ps["position"], ps.get("end"),
                                         ps["records_written"], ps["error_records"],
                                         consumed=None if last is None else last + 1, written=ps.get("written"),
                                         kafka_committed=ps.get("kafka_committed"), buffered=ps.get("buffered", 0)))
        if s.get("coordinator"):
            coord, cworker = s["coordinator"], s["worker"]
    running = any(s.get("running") for s in snaps)
    c = coord or {}
    return SinkStatus(topic, running, sum(1 for s in snaps if s.get("running")),
                      coordinator_state=c.get("state"), coordinator_worker=cworker, round=c.get("round", 0),
                      instant=c.get("instant"), last_committed_instant=c.get("last_committed_instant"),
                      committed_rounds=c.get("committed_rounds", 0), aborted_rounds=c.get("aborted_rounds", 0),
                      last_error=c.get("last_error"), partitions=tuple(sorted(parts, key=lambda p: p.partition)),
                      errors=tuple(errors), round_started=c.get("round_started"),
                      reported=tuple(c.get("reported") or ()), expected_partitions=c.get("expected", 0),
                      records_committed=c.get("records_committed", 0),
                      history=tuple(CommittedRound(i, dict(o), r) for i, o, r in c.get("history") or ()))
