"""Optimistic concurrency: conflict resolution at commit time, under the table lock.

A write that started at requested time ``T`` conflicts with every write that completed
after ``T`` and touched one of the same file groups (pending writes are no candidates:
whichever of two overlapping writes commits second is the one checked and fails):
copy-on-write rewrites of the same file group would lose one side's records.  Merge-on-read
writes that only append log blocks do not conflict with each other (non-blocking
concurrency: readers and compaction merge the blocks by ordering value).

Two writers can also collide without sharing a file group: both insert a key that the table
did not have when they started, each into a file group of its own, and both commits would
land with the key twice (Hudi's strategy notes "UUID's can clash even for insert/insert"
and lets it happen).  So when a concurrently completed commit inserted records into a
partition this write inserted into, the record keys of the two sides' insert-bearing base
files are compared, and a shared key is a conflict.

An overwrite (a replacecommit of insert_overwrite) replaces the file groups it saw when it
started; a file group that a concurrent commit created in an overwritten partition would
survive it.  So an overwrite conflicts with any concurrently completed write into one of
the partitions it overwrites.

A merge, or a delete by predicate, writes what it computed from rows it read: it conflicts
with any write that completed since it read them and touched the same file groups, log
appends included (otherwise a merge setting ``v = t.v + 1`` would overwrite a concurrent
update of ``v`` with a value computed from the one before it).

Compactions, pending or completed, are never candidates (as in Hudi for table version 8):
file slices are cut by completion time, so a log appended by a write that completes after
a compaction was scheduled belongs to the next slice and is neither lost nor merged twice.

A write reads its timeline before it creates its instant.  A commit that completed between
the two is a candidate, but archival's pending-write bound keeps only the commits that
completed after the instant was created: it may move that commit into the timeline history
while the write runs.  So the candidates are those of the timeline read at commit and those
of the timeline read under the lock when the instant was created (``also``); the metadata of
one archived since is read from the history, one rolled back since is no candidate (its files
are gone), and one found nowhere (a restore removed it) is a conflict, as nothing can be
checked against it.
"""

from __future__ import annotations

from dataclasses import dataclass

from lakesdk.exceptions import InstantNotFoundError, WriteConflictError
from lakesdk.format.commit_metadata import CommitMetadata, WriteStat
from lakesdk.format.file_naming import BaseFile
from lakesdk.format.instant import WRITE_ACTIONS, Instant
from lakesdk.format.timeline import Timeline
from lakesdk.storage import Storage
from lakesdk.timeline.moved import rollbacks_of_read, rolled_back
from lakesdk.timeline.store import TimelineStore

__all__ = ["FileGroupConflict", "ensure_still_pending", "find_conflicts", "raise_on_conflict"]


@dataclass(frozen=True)
class FileGroupConflict:
    """One conflict found at commit: the ``other`` write that completed first, the
    (partition, file id) pairs the two writes share (for a key collision or an overwritten
    partition: the other write's file groups involved), and the ``reason`` in words."""

    other: Instant
    file_groups: tuple[tuple[str, str], ...]     # (partition, file id)
    reason: str = "changed the same file groups first"

    @property
    def partitions(self) -> list[str]:
        return sorted({p for p, _ in self.file_groups})


def _is_log_only(stats: list[WriteStat]) -> bool:
    return bool(stats) and all(s.logFiles for s in stats)


def _touched(stats: list[WriteStat], md: CommitMetadata | None = None) -> set[tuple[str, str]]:
    out = {(s.partitionPath or "", s.fileId) for s in stats if s.fileId}
    if md is not None and md.partition_to_replace_file_ids:
        out |= {(p, f) for p, fids in md.partition_to_replace_file_ids.items() for f in fids}
    return out


_KEY = "_hoodie_record_key"


def _inserting(stats: list[WriteStat]) -> dict[str, list[str]]:
    """Partition -> base files that received inserts (new keys land in base files)."""
    out: dict[str, list[str]] = {}
    for s in stats:
        if s.numInserts > 0 and s.path and not s.path.rsplit("/", 1)[-1].startswith("."):
            out.setdefault(s.partitionPath or "", []).append(s.path)
    return out


class _KeyReader:
    """Record keys of base files, each file read once per conflict check."""

    def __init__(self, storage: Storage) -> None:
        self.storage = storage
        self._cache: dict[str, frozenset[str] | None] = {}

    def keys(self, paths: list[str]) -> set[str] | None:
        """The keys in ``paths``; None when a file carries no key column (then keys cannot
        be compared and the caller treats the partitions as colliding)."""
        import pyarrow.parquet as pq
        out: set[str] = set()
        for path in paths:
            if path not in self._cache:
                try:
                    from lakesdk.format.damaged import damaged_file
                    with self.storage.open_input(path) as f, damaged_file(path):
                        pf = pq.ParquetFile(f)
                        if _KEY not in pf.schema_arrow.names:
                            self._cache[path] = None
                        else:
                            self._cache[path] = frozenset(pf.read(columns=[_KEY]).column(0).to_pylist())
                except FileNotFoundError:
                    self._cache[path] = frozenset()   # cleaned since: its keys live on in newer files
            got = self._cache[path]
            if got is None:
                return None
            out |= got
        return out


def _key_collisions(reader: _KeyReader, mine: dict[str, list[str]],
                    theirs: dict[str, list[str]]) -> set[tuple[str, str]]:
    """(partition, file id) of the other side's files that hold a key this write inserted too."""
    out: set[tuple[str, str]] = set()
    for part in mine.keys() & theirs.keys():
        my_keys = reader.keys(mine[part])
        for path in theirs[part]:
            their_keys = reader.keys([path])
            if my_keys is None or their_keys is None or my_keys & their_keys:
                fid = BaseFile.parse(path.rsplit("/", 1)[-1]).file_id
                out.add((part, fid))
    return out


def find_conflicts(store: TimelineStore, timeline: Timeline, me: Instant, my_stats: list[WriteStat],
                   replaced: dict[str, list[str]] | None = None, *,
                   seen: frozenset[tuple[str, str]] | None = None,
                   also: Timeline | None = None, computed: bool = False) -> list[FileGroupConflict]:
    """Writes that completed after ``me`` started (more precisely: that were not completed
    in the timeline ``seen`` the write planned against) and touched one of the same file
    groups, or inserted a key that ``me`` inserted too, or (``replaced`` given: ``me`` is an
    overwrite) wrote into a partition that ``me`` overwrites; see the module doc.  ``also``:
    the timeline read when ``me`` was created, whose completed writes are candidates too
    when archival has moved them out of ``timeline`` since.  ``computed``: ``me`` wrote
    values computed from the rows it read (a merge, a delete by predicate), so its log
    appends conflict with the other side's too."""
    mine = _touched(my_stats)
    overwritten: set[str] = set()
    if replaced is not None:      # an overwrite: the partitions it writes and replaces
        mine |= {(p, f) for p, fids in replaced.items() for f in fids}
        overwritten = set(replaced) | {s.partitionPath or "" for s in my_stats}
    if not mine:
        return []
    my_log_only = _is_log_only(my_stats) and replaced is None and not computed
    my_inserts = _inserting(my_stats)
    reader = _KeyReader(store.storage)
    out = []
    active = {i.requested for i in timeline}
    moved = [i for i in also or () if i.requested not in active]     # archived, rolled back or restored since
    if moved:
        undone = rolled_back(store, timeline, {i.requested for i in moved})   # its files are gone: no conflict
        moved = [i for i in moved if i.requested not in undone]
    if seen and not my_log_only:   # a write this one planned against, rolled back (or being rolled back) since:
        for name, rb in sorted(rollbacks_of_read(store, timeline, seen).items()):   # its rows would come back
            out.append(FileGroupConflict(rb, tuple(sorted(mine)), f"rolls back {name}, which this write read"))
    for inst in [*timeline, *moved]:
        if inst.requested == me.requested or inst.action == "compaction":
            continue   # compaction: ordered by completion time, see the module doc
        if inst.is_completed and inst.completed_action in WRITE_ACTIONS:
            if seen is not None and (inst.requested, inst.action) in seen:
                continue   # the write planned against it
            if seen is None and (inst.completed or inst.requested) <= me.requested:
                continue   # completed before this write started
            try:
                md = store.commit_metadata(inst)
            except InstantNotFoundError:
                if inst.requested in active:
                    raise
                out.append(FileGroupConflict(inst, tuple(sorted(mine)), "left the timeline (a restore, or archival "
                                             "whose history lacks it) before this write could be checked against it"))
                continue
            if my_log_only and _is_log_only(md.write_stats) and not md.partition_to_replace_file_ids:
                continue   # two log appends: non-blocking
            theirs = _touched(md.write_stats, md)
            overlap, reason = mine & theirs, FileGroupConflict.reason
            if not overlap and overwritten:
                overlap = {(p, f) for p, f in theirs if p in overwritten}
                reason = "wrote first into partitions this overwrite replaces"
            if not overlap and my_inserts:
                overlap = _key_collisions(reader, my_inserts, _inserting(md.write_stats))
                reason = "inserted first record keys this write inserts too (they would be stored twice)"
        else:
            continue
        if overlap:
            out.append(FileGroupConflict(inst, tuple(sorted(overlap)), reason))
    return out


def raise_on_conflict(table_name: str, me: Instant, conflicts: list[FileGroupConflict]) -> None:
    """Raise :class:`WriteConflictError` for the first of ``conflicts`` (none: return).  The
    error carries ``other_instant``, ``file_groups`` and ``partitions``."""
    if not conflicts:
        return
    c = conflicts[0]
    groups = ", ".join(f"{p or '<root>'}/{f}" for p, f in c.file_groups[:5])
    more = f" and {len(c.file_groups) - 5} more" if len(c.file_groups) > 5 else ""
    err = WriteConflictError(
        f"write {me.requested} to {table_name!r} conflicts with {c.other.action} {c.other.requested} "
        f"(completed {c.other.completed or 'pending'}), which {c.reason}: {groups}{more} "
        f"in partitions {c.partitions}. This write was rolled back and the table holds the other write; "
        "re-read and retry it (t.upsert(...) again applies it on top).",
        other_instant=c.other.requested, file_groups=c.file_groups, partitions=tuple(c.partitions))
    raise err


def _being_rolled_back(store: TimelineStore, timeline: Timeline, me: Instant) -> bool:
    """A rollback names ``me``: one in progress or interrupted (its plan), or one that has
    completed while ``me``'s own timeline files are still being removed.  The rollback
    completes before it removes them, so between the two ``me`` still looks pending; its data
    files are gone by then.  A rollback of ``me`` is always later than ``me``."""
    from lakesdk.exceptions import CorruptTimelineError
    from lakesdk.format.rollback_metadata import RollbackMetadataData, RollbackPlanData
    for rb in timeline.filter(actions=["rollback"]):
        if rb.requested <= me.requested:
            continue
        try:
            if rb.is_completed:
                named = store.metadata(rb, RollbackMetadataData).undone
            else:
                named = {store.plan(rb, RollbackPlanData).instant}
        except (FileNotFoundError, CorruptTimelineError):
            continue
        if me.requested in named:
            return True
    return False


def ensure_still_pending(table_name: str, timeline: Timeline, me: Instant, store: TimelineStore | None = None) -> None:
    """Raise :class:`WriteConflictError` when ``me`` is no longer pending on ``timeline``:
    another writer took this one for dead (its heartbeat expired, e.g. after a long pause)
    and rolled it back, deleting its files.  Committing then would complete an instant
    whose data is gone.  With ``store``, a rollback of ``me`` still in progress counts too
    (it would remove the commit file at its end)."""
    pending = any(i.requested == me.requested and i.action == me.action and not i.is_completed for i in timeline)
    if pending and not (store is not None and _being_rolled_back(store, timeline, me)):
        return
    err = WriteConflictError(
        f"write {me.requested} to {table_name!r} was rolled back by another writer while it ran: its heartbeat "
        "had expired, so it was taken for a failed write and its files were deleted. Nothing was committed; "
        "retry the write (and keep heartbeat_interval_s * heartbeat_misses above the longest pause of a writer).",
        other_instant=None)
    raise err
