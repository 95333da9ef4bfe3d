"""Reading and writing a table's timeline files (the grammar is :mod:`lakesdk.format.timeline`)."""

from __future__ import annotations

import hashlib
import threading
import time
from collections import OrderedDict
from typing import Callable, Iterable, TypeVar, overload

from lakesdk.exceptions import CorruptTimelineError, InstantNotFoundError
from lakesdk.format.avro_file import FileBytes
from lakesdk.format.clean_metadata import CleanerPlanData, CleanMetadataData
from lakesdk.format.clustering_plan import ClusteringPlanData
from lakesdk.format.commit_metadata import CommitMetadata
from lakesdk.format.compaction_plan import CompactionPlanData
from lakesdk.format.instant import Instant
from lakesdk.format.restore_metadata import RestoreMetadataData, RestorePlanData
from lakesdk.format.rollback_metadata import RollbackMetadataData, RollbackPlanData
from lakesdk.format.savepoint_metadata import SavepointMetadataData
from lakesdk.format.table_config import TableConfig
from lakesdk.format.timeline import InstantClock, Timeline, _family, corrupt_commit_error
from lakesdk.storage import FileInfo, Storage

__all__ = ["TimelineStore"]

#: concurrent reads of :meth:`TimelineStore.prefetch` (an object store serves them in parallel)
_PREFETCH_THREADS = 16

#: commit metadata parsed, by the content of its file (digest, layout, replace): shared by every
#: store of the process, so that the plans and commits of a session parse each completed
#: instant's write stats once, not once per operation (10,000 write stats take about 0.2 s).
#: Keyed by content, not name: the same name may hold other bytes in another table, or in a
#: table dropped and made again at the same path.  Entries are read-only; the cache is bounded
#: by the number of write stats it holds.
_PARSED: OrderedDict[tuple[bytes, int, bool], CommitMetadata] = OrderedDict()
_PARSED_WEIGHTS: dict[tuple[bytes, int, bool], int] = {}
_PARSED_MAX_STATS = 1_000_000
_PARSED_LOCK = threading.Lock()
_parsed_stats = 0


def _parsed(data: bytes, layout: int, replace: bool, parse: Callable[[], CommitMetadata]) -> CommitMetadata:
    """``parse()`` of the commit metadata ``data``, from the process's cache when these bytes
    were parsed before (a parse that raises is not kept)."""
    global _parsed_stats
    key = (hashlib.blake2b(data, digest_size=16).digest(), layout, replace)
    with _PARSED_LOCK:
        hit = _PARSED.get(key)
        if hit is not None:
            _PARSED.move_to_end(key)
            return hit
    md = parse()
    weight = 1 + sum(len(v) for v in md.partition_to_write_stats.values())
    with _PARSED_LOCK:
        if key not in _PARSED:
            _PARSED[key] = md
            _PARSED_WEIGHTS[key] = weight
            _parsed_stats += weight
            while _parsed_stats > _PARSED_MAX_STATS and len(_PARSED) > 1:
                old, _ = _PARSED.popitem(last=False)
                _parsed_stats -= _PARSED_WEIGHTS.pop(old)
    return md

# the plans of instants (the record of their requested file), each with the actions it plans
Plan = TypeVar("Plan", CompactionPlanData, ClusteringPlanData, CleanerPlanData, RollbackPlanData, RestorePlanData)
_PLAN_ACTIONS: dict[type, tuple[str, ...]] = {
    CompactionPlanData: ("compaction", "logcompaction"), ClusteringPlanData: ("clustering",),
    CleanerPlanData: ("clean",), RollbackPlanData: ("rollback",), RestorePlanData: ("restore",)}
# the metadata of completed table-service instants (the record of their completed file), each with its action
Metadata = TypeVar("Metadata", CleanMetadataData, RollbackMetadataData, SavepointMetadataData, RestoreMetadataData)
_METADATA_ACTIONS: dict[type, str] = {CleanMetadataData: "clean", RollbackMetadataData: "rollback",
                                      SavepointMetadataData: "savepoint", RestoreMetadataData: "restore"}


class TimelineStore:
    """Reads and writes timeline files of one table."""

    def __init__(self, storage: Storage, config: TableConfig) -> None:
        self.storage = storage
        self.config = config
        self.layout = config.layout_version
        self.dir = config.timeline_dir
        self._cache: dict[tuple[str, str], CommitMetadata] = {}

    def load(self) -> Timeline:
        at = time.monotonic()
        return self.timeline_of(self.storage.list(self.dir), at)

    def timeline_of(self, entries: Iterable[FileInfo], at: float | None = None) -> Timeline:
        """The timeline of a listing of :attr:`dir` made by the caller (``at``: when it began,
        ``time.monotonic()``; now without it)."""
        return Timeline.from_file_names([e.name for e in entries if not e.is_dir], layout=self.layout,
                                        loaded_at=time.monotonic() if at is None else at)

    def path(self, instant: Instant) -> str:
        return f"{self.dir}/{instant.file_name(layout=self.layout)}"

    def read_bytes(self, instant: Instant) -> bytes:
        """The bytes of the instant's file; parsers that fail on them name the file."""
        return FileBytes(self.storage.read(self.path(instant)), self.storage.url(self.path(instant)))

    def prefetch(self, instants: Iterable[Instant]) -> None:
        """Read the commit metadata of the completed ``instants`` not cached yet, the reads at
        once (on an object store one round trip for all instead of one each; parsed here, in
        order, as :meth:`commit_metadata` parses them).  A file gone since is left to
        :meth:`commit_metadata` (the timeline history, or its error)."""
        todo = [i for i in instants if i.is_completed and (i.requested, i.completed or "") not in self._cache]
        if len(todo) < 2:
            return
        from concurrent.futures import ThreadPoolExecutor

        def read(i: Instant) -> bytes | None:
            try:
                return self.read_bytes(i)
            except FileNotFoundError:
                return None
        with ThreadPoolExecutor(max_workers=min(_PREFETCH_THREADS, len(todo)), thread_name_prefix="timeline") as pool:
            datas = list(pool.map(read, todo))
        for inst, data in zip(todo, datas):
            if data is not None:
                self._cache[(inst.requested, inst.completed or "")] = self._parse(inst, data)

    def commit_metadata(self, instant: Instant) -> CommitMetadata:
        """Commit metadata of a completed write instant (cached)."""
        key = (instant.requested, instant.completed or "")
        m = self._cache.get(key)
        if m is None:
            try:
                data = self.read_bytes(instant)
            except FileNotFoundError:
                # archival (another process) may have moved it into the timeline history since
                # the caller loaded the timeline: its completed file's bytes are kept there
                archived = self._archived_metadata(instant)
                if archived is None:
                    raise InstantNotFoundError(f"timeline file of {instant!r} is missing",
                                               instant=instant.requested) from None
                data = FileBytes(archived, f"{self.storage.url(self.path(instant))} (timeline history)")
            m = self._cache[key] = self._parse(instant, data)
        return m

    def _parse(self, instant: Instant, data: bytes) -> CommitMetadata:
        replace = instant.completed_action == "replacecommit"
        try:
            return _parsed(bytes(data), self.layout, replace,
                           lambda: CommitMetadata.parse(data, layout=self.layout, replace=replace))
        except CorruptTimelineError as exc:
            raise corrupt_commit_error(self.storage.url(self.path(instant)), instant, self.layout, exc) from None

    def plan(self, instant: Instant, kind: type[Plan]) -> Plan:
        """The plan of ``instant`` (in any state: its requested file holds it) as ``kind``, the
        plan of the instant's action: :class:`CompactionPlanData` (compaction, log compaction),
        :class:`ClusteringPlanData`, :class:`CleanerPlanData`, :class:`RollbackPlanData` or
        :class:`RestorePlanData`.  Raises :class:`FileNotFoundError` when the file is gone
        (rolled back or archived since the timeline was read) and :class:`CorruptTimelineError`
        naming the file when it does not hold such a plan.  Not cached: a plan is read when an
        instant is pending, while a rollback may still remove it."""
        if instant.action not in _PLAN_ACTIONS[kind]:
            raise ValueError(f"{instant!r} is not planned by a {kind.__name__} (that plans {_PLAN_ACTIONS[kind]})")
        return kind.parse(self.read_bytes(Instant(instant.action, "requested", instant.requested)))

    def pending_plans(self, timeline: Timeline, kind: type[Plan]) -> list[tuple[Instant, Plan]]:
        """The pending instants of ``timeline`` planned by a ``kind`` (:meth:`plan`) with their
        plans, oldest first; one whose plan is gone since the timeline was read (rolled back
        meanwhile) is left out."""
        out = []
        for inst in timeline.pending.filter(actions=_PLAN_ACTIONS[kind]):
            try:
                out.append((inst, self.plan(inst, kind)))
            except FileNotFoundError:
                continue
        return out

    def metadata(self, instant: Instant, kind: type[Metadata]) -> Metadata:
        """The metadata of the completed clean, rollback, savepoint or restore ``instant`` as
        ``kind`` (:class:`CleanMetadataData`, :class:`RollbackMetadataData`,
        :class:`SavepointMetadataData` or :class:`RestoreMetadataData`), from the timeline
        history when archival moved it there since the timeline was read (as
        :meth:`commit_metadata`).  Raises :class:`FileNotFoundError` when it is in neither and
        :class:`CorruptTimelineError` naming the file when it does not hold such a record.

        Not cached, unlike commit metadata: a savepoint deleted and taken again on a layout 1
        timeline has the same file name, and a cached record would still answer for a
        savepoint or a rollback removed since (a deleted savepoint protects no file)."""
        if instant.action != _METADATA_ACTIONS[kind] or not instant.is_completed:
            raise ValueError(f"{instant!r} is not a completed {_METADATA_ACTIONS[kind]} instant, "
                             f"whose metadata is a {kind.__name__}")
        return kind.parse(self.read_completed(instant))

    def read_completed(self, instant: Instant) -> bytes:
        """The completed file's bytes of ``instant``, from the timeline history when archival
        moved it there since the timeline was read (a service racing an archival)."""
        try:
            return self.read_bytes(instant)
        except FileNotFoundError:
            data = self._archived_metadata(instant)
            if data is None:
                raise
            return FileBytes(data, self.storage.url(self.path(instant)))

    def _archived_metadata(self, instant: Instant) -> bytes | None:
        """The completed file's bytes of ``instant`` from the timeline history (layout 2),
        None when it is not there."""
        if self.layout < 2 or not instant.is_completed:
            return None
        from lakesdk.timeline.history import LSMTimeline
        for a in LSMTimeline(self.storage, self.config).load():
            if a.instant.requested == instant.requested and a.instant.completed == instant.completed:
                return a.metadata
        return None

    # -- writing ----------------------------------------------------------------------------
    def create(self, instant: Instant, data: bytes = b"") -> None:
        if not self.storage.create_exclusive(self.path(instant), data):
            raise CorruptTimelineError(f"timeline file {self.path(instant)} already exists")

    @overload
    def create_new(self, action: str, data: bytes = b"", *, after: str | None = None,
                   claim: Callable[[str], Callable[[], None] | None] | None = None, plan: None = None) -> Instant: ...

    @overload
    def create_new(self, action: str, data: bytes = b"", *, after: str | None = None,
                   claim: Callable[[str], Callable[[], None] | None] | None = None,
                   plan: Callable[[str], bytes | None]) -> Instant | None: ...

    def create_new(self, action: str, data: bytes = b"", *, after: str | None = None,
                   claim: Callable[[str], Callable[[], None] | None] | None = None,
                   plan: Callable[[str], bytes | None] | None = None) -> Instant | None:
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
        heartbeat there) and returns what undoes it when this time is given up.  ``plan(time)``,
        when given, makes the file's bytes for that time (a compaction plans its log files as
        of its instant time); when it returns None nothing is created and None is returned."""
        for _ in range(50):
            instant = Instant(action, "requested", InstantClock.next(after=after))
            if plan is not None:
                planned = plan(instant.requested)
                if planned is None:
                    return None
                data = planned
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


