"""Early conflict detection (ECD): stop a write before it writes data that cannot commit.

Optimistic concurrency finds conflicts at commit time, after every data file is written.
With ``TableOptions(early_conflict_detection=True)`` (``hoodie.write.concurrency.
early.conflict.detection.enable``; only valid with ``concurrency="optimistic"``) a write
also compares the markers it is about to create with the markers of the *other* running
writers, and stops with :class:`lakesdk.EarlyConflictError` before the data file exists.

Candidate writers (Hudi's ``MarkerUtils.getCandidateInstants``): a marker dir
``.hoodie/.temp/<t>`` counts when

1. ``t`` is earlier than this write's instant (string order): of two overlapping
   writers, the one that started later gives way;
2. ``t`` is a pending ingestion write on the timeline (commit or deltacommit);
   completed instants, rolled-back leftovers, and pending compaction, clustering and
   replacecommit instants are not candidates;
3. ``t``'s heartbeat is fresh (``.hoodie/.heartbeat/<t>`` younger than
   ``heartbeat_interval_s * heartbeat_misses``): a missing or expired heartbeat is a dead
   writer, ignored.

Conflict: a marker of a candidate and one of this write name the same
``(partition, fileId)``.  Two *log files* of the same file group do not conflict (the same
rule as lakesdk's commit-time check: merge-on-read log appends are non-blocking).  With
``early_conflict_check_commits=True`` (``...early.conflict.check.commit.conflict``) write
instants that *completed since this write started* and touched one of its file groups
conflict too.

Where the check runs:

* DIRECT markers: before each marker creation (one check per ``create_many`` batch); the
  listing of the other writers' markers is cached for ``early_conflict_check_interval_ms``;
* TIMELINE_SERVER_BASED markers: in the writer's :class:`~lakesdk.markers.MarkerServer`:
  before a create request is queued (the listing is refreshed when older than the
  interval) and asynchronously every interval (Hudi's
  ``MarkerBasedEarlyConflictDetectionRunnable``); a found conflict answers every later
  create request of the instant with HTTP 409, which the client raises as
  :class:`~lakesdk.EarlyConflictError`.

Compaction never runs the check (Hudi skips it for compaction and clustering instants).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any, Iterable

from lakesdk.exceptions import CorruptTimelineError, EarlyConflictError
from lakesdk.format.commit_metadata import CommitMetadata
from lakesdk.format.instant import WRITE_ACTIONS, Instant
from lakesdk.format.timeline import Timeline, corrupt_commit_error
from lakesdk.storage import Storage

__all__ = ["EarlyConflict", "EarlyConflictDetector", "marker_file_group", "early_conflict_error", "planned_groups"]

TEMP_DIR = ".hoodie/.temp"
_INGESTION = ("commit", "deltacommit")


def marker_file_group(name: str) -> tuple[str, str, bool] | None:
    """``(partition, fileId, is_log)`` of a marker name (or a data file path), None if it names
    no data file.  The file id is the text before the first ``_`` of the file name (Hudi's
    ``makerToPartitionAndFileID``); a log file's leading ``.`` is dropped.

    >>> marker_file_group("2016/b21adfa2-7013-4452-a565-4cc39fea5b73-0_4-17-21_001.parquet.marker.CREATE")
    ('2016', 'b21adfa2-7013-4452-a565-4cc39fea5b73-0', False)
    >>> marker_file_group(".f1-0_20240101000000000.log.1_0-1-2.marker.CREATE")
    ('', 'f1-0', True)
    """
    path = name.split(".marker.", 1)[0] if ".marker." in name else name
    part, _, leaf = path.rpartition("/")
    is_log = leaf.startswith(".")
    if is_log:
        leaf = leaf[1:]
    fid = leaf.split("_", 1)[0]
    if not fid or fid == leaf:
        return None
    return part, fid, is_log


@dataclass(frozen=True)
class EarlyConflict:
    """What a check found: the other writer and the file groups both write."""

    instant: str                                  # the other writer's instant
    action: str
    file_groups: tuple[tuple[str, str], ...]      # (partition, fileId) both write
    completed: bool = False                       # the other write completed since this one started

    def __repr__(self) -> str:
        state = "completed" if self.completed else "running"
        return f"EarlyConflict({self.action} {self.instant} ({state}), {len(self.file_groups)} file groups)"


def _groups_text(groups: Iterable[tuple[str, str]]) -> str:
    g = list(groups)
    text = ", ".join(f"{p or '<root>'}/{f}" for p, f in g[:5])
    return text + (f" and {len(g) - 5} more" if len(g) > 5 else "")


def early_conflict_error(table: str, instant: str, conflict: EarlyConflict,
                         planned: Iterable[tuple[str, str]] = ()) -> EarlyConflictError:
    """The typed error for ``conflict`` (one line: it survives a Spark task's error text)."""
    if conflict.completed:
        how, retry = "completed since this write started", "Retry it now (a retry applies it on top)"
    else:
        how = "started earlier and is still running (fresh heartbeat)"
        retry = f"Retry it once {conflict.instant} has finished (a retry applies it on top)"
    err = EarlyConflictError(
        f"write {instant} to {table!r} conflicts early with {conflict.action} {conflict.instant}, which {how}; "
        f"both write file groups: {_groups_text(conflict.file_groups)}. The write stopped before writing that data "
        f"and was rolled back. {retry}, or write disjoint keys or partitions concurrently.",
        other_instant=conflict.instant, other_action=conflict.action, file_groups=conflict.file_groups,
        planned=tuple(planned))
    return err


@dataclass
class _Listing:
    at: float
    timeline: Timeline
    # (partition, fileId) -> [(instant, action, is_log)]
    others: dict[tuple[str, str], list[tuple[str, str, bool]]]
    commits: dict[tuple[str, str], list[tuple[str, str, bool]]]


@dataclass
class EarlyConflictDetector:
    """Checks one write's markers against the other running writers (picklable: the cache
    and the lock are dropped on pickling, so each Spark task lists once per interval).

    ``completed_at_start`` holds the ``(requested, action)`` of every instant completed
    when the write planned (used by ``check_commits``)."""

    storage: Storage
    instant: str
    timeline_dir: str
    layout: int = 2
    heartbeat_interval_s: float = 60.0
    heartbeat_misses: int = 2
    interval_s: float = 1.0
    check_commits: bool = False
    completed_at_start: frozenset[tuple[str, str]] = frozenset()
    table_name: str = "table"
    checks: int = field(default=0, compare=False)
    listings: int = field(default=0, compare=False)

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._refresh_lock = threading.Lock()
        self._listing: _Listing | None = None
        self._metadata: dict[tuple[str, str], list[tuple[str, str, bool]]] = {}

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        for k in ("_lock", "_refresh_lock", "_listing", "_metadata"):
            state.pop(k, None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self.__post_init__()

    def __repr__(self) -> str:
        return (f"EarlyConflictDetector(instant={self.instant!r}, interval_s={self.interval_s:g}, "
                f"check_commits={self.check_commits}, checks={self.checks}, listings={self.listings}, "
                f"base={self.storage.base_url!r})")

    # -- listing ---------------------------------------------------------------------------
    def _timeline(self) -> Timeline:
        names = [e.name for e in self.storage.list(self.timeline_dir) if not e.is_dir]
        return Timeline.from_file_names(names, layout=self.layout)

    def candidates(self, timeline: Timeline | None = None) -> list[Instant]:
        """The other writers whose markers count (see the module doc), oldest first."""
        from lakesdk.concurrency.heartbeat import is_expired
        timeline = timeline if timeline is not None else self._timeline()
        pending: dict[str, Instant] = {}
        for i in timeline.pending:
            if i.action in _INGESTION:
                pending[i.requested] = i
        out = []
        try:
            dirs = [e.name for e in self.storage.list(TEMP_DIR) if e.is_dir]
        except (FileNotFoundError, OSError):
            return []
        for name in sorted(dirs):
            if name >= self.instant or name not in pending:
                continue
            if is_expired(self.storage, name, self.heartbeat_interval_s, self.heartbeat_misses):
                continue
            out.append(pending[name])
        return out

    def _commit_groups(self, inst: Instant) -> list[tuple[str, str, bool]]:
        key = (inst.requested, inst.completed or "")
        got = self._metadata.get(key)
        if got is None:
            path = f"{self.timeline_dir}/{inst.file_name(layout=self.layout)}"
            data = self.storage.read(path)
            try:
                md = CommitMetadata.parse(data, layout=self.layout, replace=inst.completed_action == "replacecommit")
            except CorruptTimelineError as exc:
                raise corrupt_commit_error(self.storage.url(path), inst, self.layout, exc) from None
            got = [(s.partitionPath or "", s.fileId, bool(s.logFiles)) for s in md.write_stats if s.fileId]
            got += [(p, f, False) for p, fids in (md.partition_to_replace_file_ids or {}).items() for f in fids]
            self._metadata[key] = got
        return got

    def refresh(self) -> None:
        """List the other writers' markers (and new completed commits) now."""
        from lakesdk.markers import read_markers
        timeline = self._timeline()
        others: dict[tuple[str, str], list[tuple[str, str, bool]]] = {}
        for inst in self.candidates(timeline):
            try:
                names = read_markers(self.storage, inst.requested)
            except (FileNotFoundError, OSError):
                continue   # finished (and cleaned) meanwhile
            for m in names:
                g = marker_file_group(m)
                if g is not None:
                    others.setdefault((g[0], g[1]), []).append((inst.requested, inst.action, g[2]))
        commits: dict[tuple[str, str], list[tuple[str, str, bool]]] = {}
        if self.check_commits:
            for inst in timeline.completed:
                if (inst.completed_action not in WRITE_ACTIONS or inst.action in ("compaction", "clustering")
                        or inst.requested == self.instant
                        or (inst.requested, inst.action) in self.completed_at_start):
                    continue
                try:
                    groups = self._commit_groups(inst)
                except (FileNotFoundError, OSError, ValueError):
                    continue
                for p, f, is_log in groups:
                    commits.setdefault((p, f), []).append((inst.requested, inst.action, is_log))
        with self._lock:
            self._listing = _Listing(time.monotonic(), timeline, others, commits)
            self.listings += 1

    @property
    def listing_age_s(self) -> float | None:
        """Seconds since the last listing (None before the first)."""
        lst = self._listing
        return None if lst is None else time.monotonic() - lst.at

    # -- matching --------------------------------------------------------------------------
    def match(self, names: Iterable[str]) -> EarlyConflict | None:
        """The first conflict of ``names`` (marker names) with the last listing; no I/O."""
        lst = self._listing
        self.checks += 1
        if lst is None:
            return None
        found: dict[tuple[str, str, bool], set[tuple[str, str]]] = {}
        for n in names:
            g = marker_file_group(n)
            if g is None:
                continue
            key = (g[0], g[1])
            for source, completed in ((lst.others, False), (lst.commits, True)):
                for inst, action, other_log in source.get(key, ()):
                    if g[2] and other_log:
                        continue   # two log files of one file group: non-blocking
                    found.setdefault((inst, action, completed), set()).add(key)
        if not found:
            return None
        (inst, action, completed), groups = min(found.items(), key=lambda kv: kv[0][0])
        return EarlyConflict(inst, action, tuple(sorted(groups)), completed)

    def find(self, names: Iterable[str]) -> EarlyConflict | None:
        """Refresh the listing when it is older than the interval, then :meth:`match`."""
        names = list(names)
        age = self.listing_age_s
        if age is None or age >= self.interval_s:
            with self._refresh_lock:
                age = self.listing_age_s
                if age is None or age >= self.interval_s:
                    self.refresh()
        return self.match(names)

    def error(self, conflict: EarlyConflict, names: Iterable[str] = ()) -> EarlyConflictError:
        """The typed error for ``conflict`` found for ``names``."""
        return early_conflict_error(self.table_name, self.instant, conflict, planned_groups(names))

    def check(self, names: Iterable[str]) -> None:
        """Raise :class:`~lakesdk.EarlyConflictError` if ``names`` conflict (see :meth:`find`)."""
        names = list(names)
        c = self.find(names)
        if c is not None:
            raise self.error(c, names)


def planned_groups(names: Iterable[str]) -> tuple[tuple[str, str], ...]:
    """``(partition, fileId)`` of marker names or data paths, sorted and unique."""
    return tuple(sorted({(g[0], g[1]) for g in map(marker_file_group, names) if g is not None}))

