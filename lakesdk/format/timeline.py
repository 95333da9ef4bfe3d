"""The timeline: every instant of a table, in requested-time order.

Layout 1 (table v6) keeps timeline files directly in ``.hoodie/``; layout 2 (v8+) in
``.hoodie/timeline/`` and names completed instants ``<requested>_<completed>.<action>``.
A :class:`Timeline` is an immutable value: loading it reads the file names only; commit
metadata is read on demand and cached by :class:`TimelineStore`.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Callable, Iterable, Iterator

from lakesdk.exceptions import CorruptTimelineError, InstantNotFoundError
from lakesdk.format.avro_file import FileBytes
from lakesdk.format.commit_metadata import CommitMetadata
from lakesdk.format.instant import WRITE_ACTIONS, Instant, format_instant_time
from lakesdk.format.table_config import TableConfig
from lakesdk.storage import Storage

__all__ = ["Timeline", "TimelineStore", "InstantClock", "corrupt_commit_error"]


@dataclass(frozen=True)
class Timeline:
    """Instants (latest state of each), ordered by requested time."""

    instants: tuple[Instant, ...]
    layout: int = 2

    # -- construction -------------------------------------------------------------------
    @classmethod
    def from_file_names(cls, names: Iterable[str], *, layout: int) -> "Timeline":
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
        return cls(tuple(ordered), layout)

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

    def visible_as_of(self, moment: str | None) -> "Timeline":
        """Completed write instants visible to a time-travel read as of ``moment``
        (None = latest): those whose requested time is at or before it, as Hudi's
        time travel (and the ``hudi`` reader) select them."""
        if moment is None:
            return self.commits
        return Timeline(tuple(i for i in self.commits if i.requested <= moment), self.layout)

    def in_range(self, start: str | None, end: str | None, *, start_inclusive: bool = False) -> "Timeline":
        """Completed write instants with time in ``(start, end]`` (``[start, end]`` with
        ``start_inclusive``); completion time on layout 2, requested time on layout 1."""
        def t(i: Instant) -> str:
            return i.completed if self.layout >= 2 and i.completed else i.requested

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

    def to_pandas(self) -> Any:
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
                now = format_instant_time(datetime.now(timezone.utc).replace(tzinfo=None))
                floor = max(cls._last, after or "")
                if now > floor:
                    cls._last = now
                    return now
                time.sleep(0.001)


class TimelineStore:
    """Reads and writes timeline files of one table."""

    def __init__(self, storage: Storage, config: TableConfig) -> None:
        self.storage = storage
        self.config = config
        self.layout = config.layout_version
        self.dir = config.timeline_dir
        self._cache: dict[tuple[str, str], CommitMetadata] = {}

    def load(self) -> Timeline:
        names = [e.name for e in self.storage.list(self.dir) if not e.is_dir]
        return Timeline.from_file_names(names, layout=self.layout)

    def path(self, instant: Instant) -> str:
        return f"{self.dir}/{instant.file_name(layout=self.layout)}"

    def read_bytes(self, instant: Instant) -> bytes:
        """The bytes of the instant's file; parsers that fail on them name the file."""
        return FileBytes(self.storage.read(self.path(instant)), self.storage.url(self.path(instant)))

    def commit_metadata(self, instant: Instant) -> CommitMetadata:
        """Commit metadata of a completed write instant (cached)."""
        key = (instant.requested, instant.completed or "")
        m = self._cache.get(key)
        if m is None:
            try:
                data = self.read_bytes(instant)
            except FileNotFoundError:
                raise InstantNotFoundError(f"timeline file of {instant!r} is missing",
                                           instant=instant.requested) from None
            try:
                m = CommitMetadata.parse(data, layout=self.layout, replace=instant.completed_action == "replacecommit")
            except CorruptTimelineError as exc:
                raise corrupt_commit_error(self.storage.url(self.path(instant)), instant, self.layout, exc) from None
            self._cache[key] = m
        return m

    # -- writing ----------------------------------------------------------------------------
    def create(self, instant: Instant, data: bytes = b"") -> None:
        if not self.storage.create_exclusive(self.path(instant), data):
            raise CorruptTimelineError(f"timeline file {self.path(instant)} already exists")

    def create_new(self, action: str, data: bytes = b"", *, after: str | None = None,
                   claim: Callable[[str], Callable[[], None] | None] | None = None) -> Instant:
        """Create a requested instant of ``action`` at a new time (after ``after``) that no
        other instant of any action holds.

        An instant time names one instant of the timeline (its data files, markers and
        heartbeat are keyed by it): two processes taking the same millisecond for different
        actions (a write and a clustering) would clean up each other's files.  The exclusive
        create only excludes the same file name, so after it the timeline is listed: when
        another instant holds the time, this one backs off (its file is deleted) and the next
        millisecond is tried.  Of two creators of one time, the later one always sees the
        earlier one's file, so at most one keeps it (both may back off, and retry).

        ``claim(time)``, when given, runs before the file is created (a writer starts its
        heartbeat there) and returns what undoes it when this time is given up."""
        for _ in range(50):
            instant = Instant(action, "requested", InstantClock.next(after=after))
            undo = claim(instant.requested) if claim is not None else None
            if self.storage.create_exclusive(self.path(instant), data):
                if not self.time_taken(instant):
                    return instant
                self.storage.delete(self.path(instant))
            if undo is not None:
                undo()
            after = instant.requested
        raise CorruptTimelineError(f"could not create a new {action} instant in {self.dir} after 50 attempts")

    def time_taken(self, instant: Instant) -> bool:
        """Whether an instant other than ``instant`` (any action, any state) holds its time."""
        mine = instant.file_name(layout=self.layout)
        prefix = instant.requested
        for e in self.storage.list(self.dir):
            name = e.name
            if name != mine and name.startswith(prefix) and name[len(prefix):len(prefix) + 1] in (".", "_"):
                return True
        return False

    def transition(self, instant: Instant, state: str, data: bytes = b"", *, after: str | None = None) -> Instant:
        """Write the next state's file and return the new instant value.  A completion time
        is later than the requested time and than ``after`` (the latest time on the timeline
        a committer read under the table lock: completion times then grow in commit order
        even across machines whose clocks differ)."""
        if state == "completed":
            completed = InstantClock.next(after=max(instant.requested, after or ""))
            new = instant.to("completed", completed)
        else:
            new = instant.to(state)  # type: ignore[arg-type]
        self.create(new, data)
        return new

    def delete(self, instant: Instant) -> None:
        self.storage.delete(self.path(instant))

    def all_states(self, requested: str, action: str | None = None) -> list[str]:
        """Timeline file names of the instant ``requested`` (any state); with ``action``, only
        that instant's (another action may share the time, written by another writer)."""
        out = []
        for e in self.storage.list(self.dir):
            # "<name>.<random>.tmp" is what a crash inside an atomic local write leaves behind
            name = e.name.rsplit(".", 2)[0] if e.name.endswith(".tmp") else e.name
            if not name.startswith(requested) or not Instant.is_timeline_file(name):
                continue
            inst = Instant.parse_file_name(name)
            if inst.requested != requested:
                continue
            if action is not None and _family(inst) != _family(Instant(action, "requested", requested)):
                continue
            out.append(e.name)
        return out


