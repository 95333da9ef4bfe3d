"""Archival: move old completed instants from the active timeline into the timeline history.

Table version 8+ only: the instants go to the LSM history under
``.hoodie/timeline/history/`` (see :mod:`lakesdk.format.lsm_timeline`); then their files
leave ``.hoodie/timeline/`` (requested and inflight files first, then the completed ones,
oldest first, so that a crash never leaves a hole in the active timeline).

Which instants (``TimelineArchiverV2`` of Apache Hudi, ``hoodie.keep.min.commits`` /
``hoodie.keep.max.commits``): nothing until more than ``max_commits`` completed commits are
active; then the oldest completed commits are archived, keeping the newest ``min_commits``
and never reaching

* the earliest pending instant (nor the last completed commit before it, nor a commit that
  completed after it was requested: its conflict check at commit reads those),
* the earliest savepoint (unless ``beyond_savepoint``: savepointed commits then stay active
  and archival continues past them, after which the table can no longer be restored),
* a replacecommit whose replaced file groups still have files (a clean deletes them first;
  archiving the replacecommit earlier would bring the replaced rows back),
* merge-on-read: a delta commit whose log files belong to a file slice that a read of a
  retained instant uses (readers attach log files by their delta commit's completion time,
  which must stay on the active timeline),
* with ``beyond_savepoint``: a commit after a retained (savepointed) instant whose base files
  a read of a retained instant uses (readers that list storage take base files after the
  start of the active timeline as committed only when their commit is active).

Completed clean, rollback and restore instants requested before the last archived commit
are archived with them.  Base files of archived commits stay readable: a reader treats a
base file older than the active timeline as committed (``FileSystemView``), and so do Hudi
and the ``hudi`` reader, which list storage.
"""

from __future__ import annotations

import posixpath
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from lakesdk.commit.context import context_of
from lakesdk.exceptions import LakeError, UnsupportedTableVersionError
from lakesdk.format.file_group import FileGroup
from lakesdk.format.instant import WRITE_ACTIONS, Instant
from lakesdk.format.lsm_timeline import ArchivedInstant
from lakesdk.format.timeline import Timeline
from lakesdk.services.metadata_table import drop_metadata_table
from lakesdk.timeline.history import LSMTimeline
from lakesdk.timeline.store import TimelineStore

if TYPE_CHECKING:
    from lakesdk.commit.context import TableContext

__all__ = ["ArchivePlan", "ArchiveResult", "plan_archive", "archive", "archived_instants"]

_SERVICE_ACTIONS = frozenset({"clean", "rollback", "restore"})
_PLAN_ACTIONS = frozenset({"clean", "compaction", "logcompaction", "clustering", "replacecommit"})


@dataclass(frozen=True)
class ArchivePlan:
    """The instants an archival would move to the history (nothing is written)."""

    table: str
    instants: tuple[Instant, ...]
    active_commits: int
    active_instants: int
    min_commits: int
    max_commits: int
    bounds: tuple[str, ...] = ()          # why archival stops where it does
    basis: tuple[tuple[str, str, str], ...] = field(default=(), repr=False, compare=False)

    @property
    def commits(self) -> int:
        return sum(1 for i in self.instants if i.completed_action in WRITE_ACTIONS)

    def __len__(self) -> int:
        return len(self.instants)

    def __repr__(self) -> str:
        if not self.instants:
            why = "; ".join(self.bounds) or "nothing to archive"
            return (f"ArchivePlan({self.table!r}: nothing to archive ({self.active_commits} completed commits active; "
                    f"{why})")
        lo, hi = self.instants[0].requested, self.instants[-1].requested
        bound = f"; stops at {'; '.join(self.bounds)}" if self.bounds else ""
        return (f"ArchivePlan({self.table!r}: move {len(self.instants)} instants ({self.commits} commits, "
                f"{len(self.instants) - self.commits} others) from {lo} to {hi} into the timeline history; "
                f"{self.active_commits - self.commits} completed commits and "
                f"{self.active_instants - len(self.instants)} instants stay active{bound})")

    def effect(self) -> str:
        """The expected effect, in words."""
        if not self.instants:
            return "nothing to archive: " + ("; ".join(self.bounds) or "the active timeline is small enough")
        return (f"moves {len(self.instants)} completed instants ({self.commits} commits) from the active timeline into "
                f"the timeline history; {self.active_instants - len(self.instants)} instants stay active. "
                "No data file is touched: the table reads the same, t.history() still lists them")

    def _repr_html_(self) -> str:
        import html
        rows = "".join(f"<tr><td>{i.requested}</td><td>{i.action}</td><td>{i.completed}</td></tr>"
                       for i in self.instants[:100])
        more = f"<caption>first 100 of {len(self.instants)} instants</caption>" if len(self.instants) > 100 else ""
        stops = f"<br>stops at: {html.escape('; '.join(self.bounds))}" if self.bounds else ""
        return (f"<div><b>ArchivePlan</b> on <code>{html.escape(self.table)}</code> (keep {self.min_commits}..."
                f"{self.max_commits} commits)<br>{html.escape(self.effect())}{stops}<table>{more}<tr><th>instant</th>"
                f"<th>action</th><th>completed</th></tr>{rows}</table></div>")


@dataclass(frozen=True)
class ArchiveResult:
    table: str
    archived: tuple[Instant, ...] = field(repr=False)
    history_file: str | None
    active_instants: int
    seconds: float

    def __repr__(self) -> str:
        if not self.archived:
            return f"ArchiveResult({self.table!r}: nothing archived, {self.active_instants} active instants)"
        return (f"ArchiveResult({self.table!r}: archived {len(self.archived)} instants into {self.history_file}, "
                f"{self.active_instants} instants stay active, seconds={self.seconds:.2f})")

    def _repr_html_(self) -> str:
        import html
        return f"<div><b>ArchiveResult</b> {html.escape(repr(self))}</div>"


def _groups(table: "TableContext", store: TimelineStore, timeline: Timeline) -> list[FileGroup]:
    from lakesdk.read.view import FileSystemView
    view = FileSystemView(table.storage, table.config, store, timeline)
    view.replaced = set()       # replaced groups too: their files and logs
    return view.file_groups


def _needed(groups: list[FileGroup], retained: list[str]) -> tuple[set[str], set[str]]:
    """(base-file instants, log-file instants) of the file slices that a read of a retained
    instant (or of the latest state) uses."""
    bases: set[str] = set()
    logs: set[str] = set()
    for g in groups:
        used = {len(g.slices) - 1} if g.slices else set()
        for r in retained:
            idx = max((k for k, s in enumerate(g.slices) if s.base_instant <= r), default=None)
            if idx is not None:
                used.add(idx)
        for k in used:
            s = g.slices[k]
            if s.base_file is not None:
                bases.add(s.base_instant)
            logs.update(lf.instant for lf in s.log_files)
    return bases, logs


def plan_archive(table: "TableContext", *, min_commits: int = 20, max_commits: int = 30,
                 beyond_savepoint: bool = False) -> ArchivePlan:
    """What :func:`archive` would move now."""
    table = context_of(table)
    if table.config.layout_version < 2:
        raise UnsupportedTableVersionError(
            f"{table.name!r} is a table version {table.config.version} table: lakesdk archives into the timeline "
            "history of versions 8 and 9 (the LSM timeline) only, not into the archived log files of version 6; "
            "nothing was archived. Archive it with Apache Hudi, or upgrade it to version 8 with Apache Hudi",
            key="hoodie.table.version")
    if min_commits < 1:
        raise ValueError(f"min_commits must be >= 1, not {min_commits}")
    if max_commits <= min_commits:
        raise ValueError(f"max_commits ({max_commits}) must be greater than min_commits ({min_commits}): "
                         "Increase hoodie.keep.max.commits")
    store = table.store
    timeline = store.load()
    commits = list(timeline.commits)          # completed writes, by requested time
    base: dict[str, Any] = dict(table=table.name, active_commits=len(commits), active_instants=len(timeline),
                min_commits=min_commits, max_commits=max_commits)
    if len(commits) <= max_commits:
        return ArchivePlan(instants=(), bounds=(f"at most max_commits={max_commits} completed commits are active",),
                           **base)
    bounds: dict[str, str] = {}
    pending = [i for i in timeline.instants if not i.is_completed]
    if pending:
        first = min(pending, key=lambda i: i.requested)
        before = [c for c in commits if c.requested < first.requested]
        bounds[f"pending {first.action} {first.requested}"] = before[-1].requested if before else first.requested
        # a commit that completed after it started stays active, whenever it was requested: the
        # pending write's conflict check at its commit reads the active timeline for them
        later = [c.requested for c in commits if (c.completed or "") > first.requested]
        if later:
            bounds[f"commits completed after pending {first.action} {first.requested} started"] = min(later)
    sps = sorted(i.requested for i in timeline.instants if i.action == "savepoint")
    if sps and not beyond_savepoint:
        bounds[f"savepoint {sps[0]}"] = sps[0]
    groups = _groups(table, store, timeline)
    existing = {(g.partition, g.file_id) for g in groups}
    for c in commits:
        if c.completed_action == "replacecommit":
            replaced = store.commit_metadata(c).partition_to_replace_file_ids or {}
            if any((p, f) in existing for p, fids in replaced.items() for f in fids):
                bounds[f"replacecommit {c.requested} (its replaced files are not cleaned yet)"] = c.requested
                break
    boundary = min(bounds.values()) if bounds else None
    n = len(commits) - min_commits
    spset = set(sps)
    chosen = [c for c in commits if (boundary is None or c.requested < boundary)
              and not (beyond_savepoint and c.requested in spset)][:n]
    # never archive an instant that a file slice a retained read uses still needs (Hudi keeps the
    # earliest instant a needed file slice refers to): merge-on-read log files are attached by their
    # delta commit's completion time; a base file of a commit archived past a retained instant (a
    # hole left by beyond_savepoint) is outside the active timeline for readers that list storage
    while chosen:
        names = {c.requested for c in chosen}
        retained = [c.requested for c in commits if c.requested not in names]
        first_retained = min(retained, default=None)
        bases, logs = _needed(groups, retained)
        bad_logs = sorted(i for i in logs if i in names)
        bad_bases = sorted(i for i in bases if i in names and first_retained is not None and i > first_retained)
        if not bad_logs and not bad_bases:
            break
        if bad_logs and (not bad_bases or bad_logs[0] <= bad_bases[0]):
            b = bad_logs[0]
            bounds[f"log files of delta commit {b} (read by a retained file slice)"] = b
        else:
            b = bad_bases[0]
            bounds[f"base files of commit {b} (read by a retained file slice after {first_retained})"] = b
        chosen = [c for c in chosen if c.requested < b]
    if not chosen:
        return ArchivePlan(instants=(), bounds=tuple(bounds), **base)
    last = chosen[-1].requested
    others = [i for i in timeline.instants if i.is_completed and i.action in _SERVICE_ACTIONS and i.requested < last]
    instants = tuple(sorted(chosen + others, key=lambda i: (i.requested, i.completed or "")))
    stop = [k for k, v in sorted(bounds.items(), key=lambda kv: kv[1]) if v > last][:1]
    if len(chosen) == n:
        stop.insert(0, f"the newest min_commits={min_commits} commits")
    return ArchivePlan(instants=instants, bounds=tuple(stop), basis=_basis(timeline, last), **base)


def _basis(timeline: Timeline, last: str) -> tuple[tuple[str, str, str], ...]:
    """The instants up to ``last`` (the newest one a plan archives), with their states: while
    these stay the same, the plan stays valid (see :func:`archive`)."""
    return tuple(sorted((i.requested, i.action, i.state) for i in timeline.instants if i.requested <= last))


def _state_files(store: TimelineStore, inst: Instant) -> tuple[list[str], str]:
    """(pending-state file names, completed file name) of a completed instant."""
    layout = store.layout
    pending = [] if inst.action == "savepoint" else [Instant(inst.action, "requested", inst.requested).file_name(layout=layout)]
    pending.append(Instant(inst.action, "inflight", inst.requested).file_name(layout=layout))
    return pending, inst.file_name(layout=layout)


def archive(table: "TableContext", *, min_commits: int = 20, max_commits: int = 30,
            beyond_savepoint: bool = False) -> ArchiveResult:
    """Plan and run an archival (see module doc).

    With several writers the move runs under the table lock.  The plan (which lists the file
    groups, the costly part) is made before it, and checked under it: a new instant is created
    under the lock too, at a time later than every instant then on the timeline
    (:mod:`lakesdk.concurrency.instants`), so an instant that appeared since the plan is later
    than everything the plan moves and cannot change it.  Only a change among the instants up
    to the newest one moved (another archival, a savepoint, a restore) can; then the plan is
    made again, under the lock."""
    table = context_of(table)
    from lakesdk.concurrency.instants import holding
    t0 = time.perf_counter()
    kw: dict[str, Any] = dict(min_commits=min_commits, max_commits=max_commits, beyond_savepoint=beyond_savepoint)
    plan = plan_archive(table, **kw)
    if not plan.instants:
        return ArchiveResult(table.name, (), None, plan.active_instants, time.perf_counter() - t0)
    with holding(table.lock()):
        if _basis(table.store.load(), plan.instants[-1].requested) != plan.basis:
            plan = plan_archive(table, **kw)
        return _archive(table, plan, t0)


def _drop_rolled_back_leftovers(table: "TableContext", timeline: Timeline, moved: set[str]) -> None:
    """Delete data files of rolled-back writes older than the first write that stays active.

    A rollback deletes the files it finds; a writer of another process still writing then
    (a Kafka sink participant whose coordinator died) may finish a file after it, and deletes
    it itself once it sees the rollback, unless it dies first.  Such a file is invisible while
    its instant is newer than the start of the active timeline, and every reader (this one,
    Apache Hudi's, the ``hudi`` reader) takes it for a committed file once archival moves
    that start past it.  So before archiving, the partitions each completed rollback touched
    (and those the rolled-back instant's remaining markers name) are listed for files named
    with the rolled-back instant."""
    from lakesdk.format.file_naming import written_by
    from lakesdk.format.rollback_metadata import RollbackMetadataData
    from lakesdk.markers import marked_data_files
    storage, store = table.storage, table.store
    stay = [i.requested for i in timeline.instants
            if i.requested not in moved and i.is_completed and i.completed_action in WRITE_ACTIONS]
    start = min(stay, default=None)
    for rb in timeline.instants:
        if rb.action != "rollback" or not rb.is_completed:
            continue
        try:
            md = store.metadata(rb, RollbackMetadataData)
        except (FileNotFoundError, LakeError):
            continue
        for target, _action in md.rolled_back:
            if start is not None and target >= start:
                continue
            parts = set(md.deleted) | set(md.failed)
            parts |= {posixpath.dirname(f) for f in marked_data_files(storage, target) or ()}
            for part in sorted(parts):
                try:
                    entries = storage.list(part)
                except FileNotFoundError:
                    continue
                for e in entries:
                    if written_by(e.name, target):
                        storage.delete(e.path)


def _archive(table: "TableContext", plan: ArchivePlan, t0: float) -> ArchiveResult:
    store = table.store
    if not plan.instants:
        return ArchiveResult(table.name, (), None, plan.active_instants, time.perf_counter() - t0)
    storage = table.storage
    from lakesdk.commit.table_properties import read_properties
    from lakesdk.services.metadata_writer import keeps_metadata_table
    if not keeps_metadata_table(table, read_properties(storage)[1]):
        drop_metadata_table(table, "archival")
    _drop_rolled_back_leftovers(table, store.load(), {i.requested for i in plan.instants})
    entries = []
    files: list[tuple[list[str], str]] = []
    for inst in plan.instants:
        pending, done = _state_files(store, inst)
        metadata = storage.read(f"{store.dir}/{done}")
        plan_bytes = None
        if inst.action in _PLAN_ACTIONS:
            try:
                plan_bytes = storage.read(f"{store.dir}/{pending[0]}") or None
            except FileNotFoundError:
                plan_bytes = None
        entries.append(ArchivedInstant(inst, metadata, plan_bytes))
        files.append((pending, done))
    name = LSMTimeline(storage, table.config).append(entries)
    for pending, _ in files:                       # pending-state files first
        for n in pending:
            storage.delete(f"{store.dir}/{n}")
    for _, done in files:                          # then the completed ones, oldest first
        storage.delete(f"{store.dir}/{done}")
    for inst in plan.instants:
        storage.delete_dir(f".hoodie/.temp/{inst.requested}")
    return ArchiveResult(table.name, plan.instants, name, len(store.load()), time.perf_counter() - t0)


def archived_instants(table: "TableContext") -> list[ArchivedInstant]:
    """The instants in the timeline history (empty for table version 6 tables, whose
    ``.hoodie/archived`` log files lakesdk does not read)."""
    table = context_of(table)
    if table.config.layout_version < 2:
        return []
    return LSMTimeline(table.storage, table.config).load()
