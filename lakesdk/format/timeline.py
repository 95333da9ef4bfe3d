"""The timeline: every instant of a table, in requested-time order.

Layout 1 (table v6) keeps timeline files directly in ``.hoodie/``; layout 2 (v8+) in
``.hoodie/timeline/`` and names completed instants ``<requested>_<completed>.<action>``.
A :class:`Timeline` is an immutable value: loading it reads the file names only; commit
metadata is read on demand and cached by :class:`lakesdk.timeline.store.TimelineStore`.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Iterable, Iterator, Literal

from lakesdk.exceptions import CorruptTimelineError, InstantNotFoundError
from lakesdk.format.instant import WRITE_ACTIONS, Instant, format_instant_time

#: which time of an instant a read as of a moment compares (:meth:`Timeline.visible_as_of`)
Clock = Literal["requested", "completed"]

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["Timeline", "InstantClock", "corrupt_commit_error"]


@dataclass(frozen=True)
class Timeline:
    """Instants (latest state of each), ordered by requested time."""

    instants: tuple[Instant, ...]
    layout: int = 2
    #: when it was read from storage (``time.monotonic()``; 0: made, not read), not compared
    loaded_at: float = field(default=0.0, compare=False, repr=False)

    # -- construction -------------------------------------------------------------------
    @classmethod
    def from_file_names(cls, names: Iterable[str], *, layout: int, loaded_at: float = 0.0) -> "Timeline":
        best: dict[tuple[str, str], Instant] = {}
        for name in names:
            if not Instant.is_timeline_file(name):
                continue
            inst = Instant.parse_file_name(name)
            # a completed compaction/clustering file is named commit/replacecommit: fold it
            key = (inst.requested, _family(inst))
            cur = best.get(key)
            if cur is None or inst.order_key[1] > cur.order_key[1]:
                if cur is not None and inst.is_completed and cur.action != inst.action:
                    inst = Instant(cur.action, "completed", inst.requested, inst.completed)
                best[key] = inst
            elif cur.is_completed is False and inst.is_completed:
                best[key] = inst
        ordered = sorted(best.values(), key=lambda i: (i.requested, i.completed or ""))
        return cls(tuple(ordered), layout, loaded_at)

    # -- views ----------------------------------------------------------------------------
    def __iter__(self) -> Iterator[Instant]:
        return iter(self.instants)

    def __len__(self) -> int:
        return len(self.instants)

    def __getitem__(self, i: int) -> Instant:
        return self.instants[i]

    def filter(self, *, actions: Iterable[str] | None = None, states: Iterable[str] | None = None) -> "Timeline":
        a = set(actions) if actions is not None else None
        s = set(states) if states is not None else None
        return Timeline(tuple(i for i in self.instants
                              if (a is None or i.action in a) and (s is None or i.state in s)), self.layout)

    @property
    def completed(self) -> "Timeline":
        return self.filter(states=["completed"])

    @property
    def pending(self) -> "Timeline":
        return self.filter(states=["requested", "inflight"])

    @property
    def commits(self) -> "Timeline":
        """Completed instants that wrote data (commit, deltacommit, replacecommit, compaction, clustering)."""
        return Timeline(tuple(i for i in self.instants if i.is_completed and i.completed_action in WRITE_ACTIONS),
                        self.layout)

    @property
    def last(self) -> Instant | None:
        return self.instants[-1] if self.instants else None

    @property
    def last_completed_write(self) -> Instant | None:
        c = self.commits.by_completion()
        return c[-1] if c else None

    def by_completion(self) -> list[Instant]:
        """Completed instants ordered by completion time (requested time on layout 1)."""
        return sorted((i for i in self.instants if i.is_completed), key=lambda i: (i.completed or i.requested, i.requested))

    def get(self, requested: str, *, action: str | None = None) -> Instant:
        for i in self.instants:
            if i.requested == requested and (action is None or i.action == action):
                return i
        raise InstantNotFoundError(f"no instant {requested!r} on the timeline "
                                   f"(latest: {self.last.requested if self.last else 'none'})", instant=requested)

    def contains(self, requested: str) -> bool:
        return any(i.requested == requested for i in self.instants)

    def max_time(self) -> str | None:
        """The largest requested or completion time on this timeline."""
        times = [t for i in self.instants for t in (i.requested, i.completed) if t]
        return max(times) if times else None

    def visible_as_of(self, moment: str | None, *, clock: Clock = "requested") -> "Timeline":
        """Completed write instants visible to a read as of ``moment`` (None = latest).
        ``clock="requested"``: those requested at or before it, as Hudi's time travel (and the
        ``hudi`` reader) select them.  ``clock="completed"``: those completed by it (requested
        on layout 1), the state an incremental range ending at ``moment`` reads rows in: a
        write requested earlier that completed later is not part of it."""
        if moment is None:
            return self.commits
        return Timeline(tuple(i for i in self.commits if self.time_of(i, clock) <= moment), self.layout)

    def time_of(self, i: Instant, clock: Clock = "completed") -> str:
        """The time of ``i`` an incremental range (``clock="completed"``: completion time on
        layout 2, requested time on layout 1) or a time travel (``"requested"``) compares."""
        return i.completed if clock == "completed" and self.layout >= 2 and i.completed else i.requested

    def in_range(self, start: str | None, end: str | None, *, start_inclusive: bool = False) -> "Timeline":
        """Completed write instants with time in ``(start, end]`` (``[start, end]`` with
        ``start_inclusive``); completion time on layout 2, requested time on layout 1."""
        t = self.time_of

        def after_start(i: Instant) -> bool:
            return start is None or t(i) > start or (start_inclusive and t(i) == start)
        keep = tuple(i for i in self.commits if after_start(i) and (end is None or t(i) <= end))
        return Timeline(keep, self.layout)

    def __repr__(self) -> str:
        c = sum(1 for i in self.instants if i.is_completed)
        last = f", last={self.last!r}" if self.last else ""
        return f"<Timeline {len(self.instants)} instants ({c} completed, {len(self) - c} pending){last}>"

    def _repr_html_(self) -> str:
        rows = "".join(
            f"<tr><td>{i.requested}</td><td>{i.action}</td><td>{i.state}</td><td>{i.completed or ''}</td></tr>"
            for i in self.instants[-50:])
        more = f"<caption>last 50 of {len(self)} instants</caption>" if len(self) > 50 else ""
        return ("<table>" + more + "<thead><tr><th>requested</th><th>action</th><th>state</th>"
                "<th>completed</th></tr></thead><tbody>" + rows + "</tbody></table>")

    def to_pandas(self) -> pd.DataFrame:
        import pandas as pd
        return pd.DataFrame([{"requested": i.requested, "action": i.action, "state": i.state,
                              "completed": i.completed} for i in self.instants],
                            columns=["requested", "action", "state", "completed"])


def corrupt_commit_error(path: str, instant: Instant, layout: int, exc: Exception) -> CorruptTimelineError:
    """The error for a completed write instant whose timeline file cannot be read: every read
    and write needs it, so it says what was expected and how to recover."""
    expected = ("an Avro file holding one HoodieCommitMetadata record" if layout >= 2
                else "HoodieCommitMetadata JSON")
    if instant.completed_action == "replacecommit":
        expected = expected.replace("HoodieCommitMetadata", "HoodieReplaceCommitMetadata")
    folder = path.rsplit("/", 1)[0]
    return CorruptTimelineError(
        f"{path}: the timeline file of the completed {instant.action} {instant.requested} is damaged: {exc}. "
        f"Expected {expected}. Every read and write of the table needs it. Restore the file from a backup or a "
        f"copy of the table; if there is none, move the file out of {folder} (keep it): the instant then "
        "counts as a failed write, which the next write rolls back (its data is removed from the table)",
        path=path)


def _family(i: Instant) -> str:
    """Key that joins the pending and completed files of one instant."""
    if i.is_completed:
        return {"commit": "W", "replacecommit": "R", "deltacommit": "D"}.get(i.action, i.action)
    return {"commit": "W", "compaction": "W", "replacecommit": "R", "clustering": "R",
            "deltacommit": "D", "logcompaction": "D"}.get(i.action, i.action)


class InstantClock:
    """Generates strictly increasing instant times (UTC, millisecond)."""

    _lock = threading.Lock()
    _last = ""

    @classmethod
    def next(cls, after: str | None = None) -> str:
        with cls._lock:
            while True:
                now = format_instant_time(datetime.now(UTC).replace(tzinfo=None))
                floor = max(cls._last, after or "")
                if now > floor:
                    cls._last = now
                    return now
                time.sleep(0.001)
