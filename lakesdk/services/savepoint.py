"""Savepoints and restore.

Savepoint: pin a completed commit ``T`` so that cleaning keeps every file a read as of ``T``
needs, and so that the table can be restored to it::

    T.savepoint.inflight   (empty)
    T_C.savepoint          HoodieSavepointMetadata: per partition, the file names (base and
                           log) of the latest file slices as of T

``T`` is the requested time of the savepointed commit.  Archival stops before the earliest
savepoint.  A savepoint can only be taken of a commit still inside the clean's lookup window
(not before the last clean's earliest commit to retain), because older file versions may be
gone.

Restore: roll back every write instant requested after the savepoint, newest first, as one
restore instant::

    R.restore.requested    HoodieRestorePlan: the instants to roll back, in rollback order
    R.restore.inflight     (empty)
    R_C.restore            HoodieRestoreMetadata: the HoodieRollbackMetadata of each instant

Each instant is rolled back with the rollback service (a rollback instant per instant,
deleting the files it wrote and then its timeline files); once the restore completes the
rollback instants requested after the savepoint are removed, as Hudi does.  A restore that
crashes stays pending and is resumed by the next ``restore`` call (same restore instant).
Order (Hudi's ``RestoreInstantComparator``): pending clustering first, then by completion
time, except that on merge-on-read tables a compaction (or commit) is ordered by requested
time against the others.
"""

from __future__ import annotations

import functools
import logging
import posixpath
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from lakesdk._display import human_bytes as _human
from lakesdk.commit.context import context_of
from lakesdk.concurrency.instants import create_instant
from lakesdk.exceptions import LakeError, RestoreError, SavepointError
from lakesdk.format.instant import WRITE_ACTIONS, Instant
from lakesdk.format.restore_metadata import RestoreMetadataData, RestorePlanData
from lakesdk.format.rollback_metadata import RollbackMetadataData
from lakesdk.format.savepoint_metadata import SavepointMetadataData
from lakesdk.format.timeline import Timeline
from lakesdk.timeline.store import TimelineStore

if TYPE_CHECKING:
    from lakesdk.commit.context import TableContext

__all__ = ["Savepoint", "SavepointError", "RestoreError", "RestorePlan", "RestoreResult", "savepoint",
           "savepoints", "delete_savepoint", "plan_restore", "restore", "restore_order"]

log = logging.getLogger(__name__)

_ROLLBACK_TARGETS = frozenset({"commit", "deltacommit", "replacecommit", "compaction", "clustering", "logcompaction"})




def _requested(value: Any) -> str:
    """Requested time of an instant given as a string, Instant, WriteResult or Savepoint."""
    if isinstance(value, Instant):
        return value.requested
    if hasattr(value, "instant") and isinstance(value.instant, str):
        return value.instant          # WriteResult, Savepoint
    return str(value)


@dataclass(frozen=True)
class Savepoint:
    """A completed savepoint of commit ``instant``."""

    table: str
    instant: str
    completed: str | None
    user: str
    comment: str
    savepointed_at: int
    files: dict[str, tuple[str, ...]] = field(repr=False)

    @property
    def file_count(self) -> int:
        return sum(len(v) for v in self.files.values())

    def __repr__(self) -> str:
        by = f" by {self.user!r}" if self.user else ""
        note = f", {self.comment!r}" if self.comment else ""
        return (f"Savepoint({self.table!r} @ {self.instant}{by}: {self.file_count} files in "
                f"{len(self.files)} partitions{note})")

    def _repr_html_(self) -> str:
        import html
        return f"<div><b>Savepoint</b> {html.escape(repr(self))}</div>"


def _savepoint_instants(timeline: Timeline) -> list[Instant]:
    return [i for i in timeline.instants if i.action == "savepoint" and i.is_completed]


def _load(table: "TableContext", store: TimelineStore, inst: Instant) -> Savepoint:
    md = store.metadata(inst, SavepointMetadataData)
    return Savepoint(table.name, inst.requested, inst.completed, md.user, md.comment, md.savepointed_at, md.files)


def savepoints(table: "TableContext") -> list[Savepoint]:
    """Completed savepoints, oldest first."""
    table = context_of(table)
    store = table.store
    out = []
    for i in _savepoint_instants(store.load()):
        try:
            out.append(_load(table, store, i))
        except FileNotFoundError:    # deleted since the timeline was read
            continue
    return out


def _lookup_window(store: TimelineStore, timeline: Timeline) -> str | None:
    """Earliest commit a savepoint may pin: the last clean's earliest commit to retain (a
    pending clean's plan counts), else the first completed commit."""
    from lakesdk.services.clean import last_clean
    prev = last_clean(store, timeline, pending=True)
    if prev is not None:
        md = prev[1]
        ectr = getattr(md, "earliest_commit_to_retain", None) or getattr(md, "earliest_instant", None)
        if ectr:
            return str(ectr)
    writes = timeline.commits
    return writes[0].requested if len(writes) else None


def savepoint(table: "TableContext", instant: Any = None, *, user: str = "", comment: str = "") -> Savepoint:
    """Savepoint the completed commit ``instant`` (default: the latest completed commit)."""
    table = context_of(table)
    from lakesdk.concurrency.instants import holding
    # under the table lock, as a clean turns inflight and reads the savepoints: a clean that
    # starts later keeps the files named here; one that started before is seen inflight
    with holding(table.lock()):
        return _savepoint(table, instant, user, comment)


def _savepoint(table: "TableContext", instant: Any, user: str, comment: str) -> Savepoint:
    from lakesdk.exceptions import TimeTravelError
    from lakesdk.read.view import FileSystemView
    store = table.store
    timeline = store.load()
    writes = timeline.commits
    if instant is None:
        if not len(writes):
            raise SavepointError(f"{table.name!r} has no completed commit to savepoint")
        target = writes[-1]
    else:
        req = _requested(instant)
        target = next((i for i in writes if i.requested == req), None)  # type: ignore[assignment]
        if target is None:
            raise SavepointError(f"Could not savepoint non-existing commit {req}: it is not a completed commit on the "
                                 f"active timeline of {table.name!r}", instant=req)
    window = _lookup_window(store, timeline)
    if window is not None and target.requested < window:
        raise SavepointError(f"Could not savepoint commit {target.requested} as this is beyond the lookup window "
                             f"{window}: a clean may already have deleted its file versions", instant=target.requested)
    if any(i.requested == target.requested for i in _savepoint_instants(timeline)):
        raise SavepointError(f"commit {target.requested} is already savepointed; see table.maintenance.savepoints()",
                             instant=target.requested)
    view = FileSystemView(table.storage, table.config, store, timeline, as_of=target.requested)
    files: dict[str, list[str]] = {}
    try:
        slices = view.latest_slices()
    except TimeTravelError as e:     # a clean that completed since the timeline was read
        raise SavepointError(f"Could not savepoint commit {target.requested}: a clean deleted file versions it "
                             f"needs ({e})", instant=target.requested) from e
    for s in slices:
        names = ([s.base_file.name] if s.base_file else []) + [lf.name for lf in s.log_files]
        files.setdefault(s.partition, []).extend(names)
    _refuse_files_of_running_cleans(store, view.timeline, target.requested, files)
    md = SavepointMetadataData(user, int(time.time() * 1000), comment, {p: tuple(v) for p, v in files.items()})
    from lakesdk.services.transaction import InstantTransaction
    inflight = Instant("savepoint", "inflight", target.requested)
    if not table.storage.exists(store.path(inflight)):
        store.create(inflight)
    txn = InstantTransaction.resume(table, inflight, operation="savepoint")
    done = txn.commit(md.to_avro())
    txn.finish()
    return Savepoint(table.name, target.requested, done.completed, user, comment, md.savepointed_at, md.files)


def _refuse_files_of_running_cleans(store: TimelineStore, timeline: Timeline, commit: str,
                                    files: dict[str, list[str]]) -> None:
    """A clean that is inflight read the savepoints when it started and may be deleting any
    file of its plan now: a savepoint may not name one."""
    from lakesdk.format.clean_metadata import CleanerPlanData
    for inst in timeline.instants:
        if inst.action != "clean" or inst.state != "inflight":
            continue
        plan = store.plan(inst, CleanerPlanData)
        doomed = plan.file_names()
        hit = sorted((p, n) for p, names in files.items() for n in names if (p, n) in doomed)
        if hit:
            raise SavepointError(f"Could not savepoint commit {commit}: clean {inst.requested} is deleting file "
                                 f"versions it needs ({hit[0][0]}/{hit[0][1]} and {len(hit) - 1} more); savepoint a "
                                 "later commit, or retry once the clean completes", instant=commit)


def delete_savepoint(table: "TableContext", instant: Any) -> bool:
    """Delete the savepoint of ``instant`` (completed file first, then the inflight file).
    Returns False (and logs a warning) when there is none."""
    table = context_of(table)
    store = table.store
    req = _requested(instant)
    names = [n for n in store.all_states(req) if n.endswith((".savepoint", ".savepoint.inflight"))]
    if not names:
        log.warning("no savepoint of %s on %r; nothing deleted", req, table.name)
        return False
    for n in sorted(names, key=lambda n: 1 if n.endswith(".inflight") else 0):
        table.storage.delete(posixpath.join(store.dir, n))
    return True


# -- restore ---------------------------------------------------------------------------------------
def restore_order(instants: list[Instant], *, merge_on_read: bool) -> list[Instant]:
    """``instants`` in the order a restore rolls them back (Hudi's RestoreInstantComparator,
    newest first): pending clustering first; then by completion time, except that on
    merge-on-read tables a compaction or commit is compared with the others by requested
    time."""
    clustering = sorted((i for i in instants if i.action == "clustering" and not i.is_completed),
                        key=lambda i: i.requested, reverse=True)
    rest = [i for i in instants if i not in clustering]

    def done(i: Instant) -> str:
        return i.completed or i.requested

    def cmp(a: Instant, b: Instant) -> int:
        by_requested = merge_on_read and ({a.completed_action, b.completed_action} & {"commit"})
        ka, kb = (a.requested, b.requested) if by_requested else (done(a), done(b))
        return (ka > kb) - (ka < kb) or (a.requested > b.requested) - (a.requested < b.requested)

    return clustering + sorted(rest, key=functools.cmp_to_key(cmp), reverse=True)


@dataclass(frozen=True)
class RestoreStep:
    instant: Instant
    files: tuple[str, ...]
    bytes: int


@dataclass(frozen=True)
class RestorePlan:
    """What restoring a savepoint will roll back (newest first)."""

    table: str
    savepoint: str
    steps: tuple[RestoreStep, ...]
    instant: str | None = None

    @property
    def instants(self) -> list[Instant]:
        return [s.instant for s in self.steps]

    @property
    def files(self) -> int:
        return sum(len(s.files) for s in self.steps)

    @property
    def bytes(self) -> int:
        return sum(s.bytes for s in self.steps)

    def __len__(self) -> int:
        return len(self.steps)

    def __repr__(self) -> str:
        at = f" @ {self.instant}" if self.instant else " (not scheduled)"
        if not self.steps:
            return f"RestorePlan({self.table!r}{at}: the table is at savepoint {self.savepoint}; nothing to roll back)"
        names = ", ".join(f"{s.instant.action} {s.instant.requested}" for s in self.steps[:3])
        more = f", ... ({len(self.steps) - 3} more)" if len(self.steps) > 3 else ""
        return (f"RestorePlan({self.table!r}{at}: roll back {len(self.steps)} instants newest first ({names}{more}), "
                f"deleting {self.files} files ({_human(self.bytes)}); afterwards the table holds exactly the rows "
                f"of savepoint {self.savepoint})")

    def effect(self) -> str:
        """The expected effect, in words."""
        if not self.steps:
            return f"nothing to roll back: the table is at savepoint {self.savepoint}"
        return (f"rolls back {len(self.steps)} instants newest first, deleting {self.files} data files "
                f"({_human(self.bytes)}); the table then holds exactly the rows of savepoint {self.savepoint}")

    def _repr_html_(self) -> str:
        import html

        def names(s: RestoreStep) -> str:
            shown = "<br>".join(html.escape(f) for f in s.files[:20])
            return shown + (f"<br>... {len(s.files) - 20} more" if len(s.files) > 20 else "")
        rows = "".join(f"<tr><td>{s.instant.requested}</td><td>{s.instant.action}</td><td>{s.instant.state}</td>"
                       f"<td>{len(s.files)}</td><td>{_human(s.bytes)}</td><td><code>{names(s)}</code></td></tr>"
                       for s in self.steps)
        at = f"@ {self.instant}" if self.instant else "(not scheduled)"
        return (f"<div><b>RestorePlan</b> on <code>{html.escape(self.table)}</code> {at} to savepoint "
                f"<b>{self.savepoint}</b><br>{html.escape(self.effect())}"
                f"<table><tr><th>instant</th><th>action</th><th>state</th><th>files</th><th>bytes</th>"
                f"<th>data files</th></tr>{rows}</table></div>")


@dataclass(frozen=True)
class RestoreResult:
    table: str
    instant: str
    completed: str | None
    savepoint: str
    rolled_back: tuple[tuple[str, str], ...]
    deleted_files: int
    seconds: float
    deleted: tuple[str, ...] = field(default=(), repr=False)   # the data files removed (relative paths)

    def __repr__(self) -> str:
        return (f"RestoreResult({self.table!r} @ {self.instant}: restored savepoint {self.savepoint}, rolled back "
                f"{len(self.rolled_back)} instants, deleted {self.deleted_files} files, seconds={self.seconds:.2f})")

    def _repr_html_(self) -> str:
        import html
        return f"<div><b>RestoreResult</b> {html.escape(repr(self))}</div>"


def _targets(table: "TableContext", timeline: Timeline, sp: str) -> list[Instant]:
    later = [i for i in timeline.instants if i.requested > sp and i.action in _ROLLBACK_TARGETS
             and (i.is_completed and i.completed_action in WRITE_ACTIONS or not i.is_completed)]
    return restore_order(later, merge_on_read=table.config.is_mor)


def _check_restorable(table: "TableContext", store: TimelineStore, timeline: Timeline, sp: str) -> None:
    sps = [i.requested for i in _savepoint_instants(timeline)]
    if sp not in sps:
        raise RestoreError(f"No savepoint for instantTime {sp} on {table.name!r} "
                           f"(savepoints: {', '.join(sps) or 'none'}); take one with table.maintenance.savepoint()",
                           savepoint=sp)
    later = [s for s in sps if s > sp]
    if later:
        raise RestoreError(f"savepoints {', '.join(later)} are later than {sp}: restoring would roll back their "
                           "commits; delete them first with table.maintenance.delete_savepoint(...)", savepoint=sp)
    if table.config.layout_version >= 2:
        from lakesdk.timeline.history import LSMTimeline
        archived = [i.requested for i in LSMTimeline(table.storage, table.config).instants() if i.requested > sp]
        if archived:
            raise RestoreError(f"instants after savepoint {sp} were archived (archival beyond savepoint, e.g. "
                               f"{archived[0]}): they can no longer be rolled back, so the table cannot be restored",
                               savepoint=sp)
    from lakesdk.services.rollback import check_active_commit_left
    check_active_commit_left(table, timeline, {i.requested for i in _targets(table, timeline, sp)},
                             f"restoring to savepoint {sp}")


def plan_restore(table: "TableContext", savepoint_instant: Any) -> RestorePlan:
    """The instants restoring ``savepoint_instant`` would roll back, and their files
    (nothing is written)."""
    table = context_of(table)
    from lakesdk.services.rollback import files_written_by
    sp = _requested(savepoint_instant)
    store = table.store
    timeline = store.load()
    _check_restorable(table, store, timeline, sp)
    steps = []
    for inst in _targets(table, timeline, sp):
        files = tuple(sorted(files_written_by(table.storage, store, inst)))
        size = 0
        for f in files:
            try:
                size += table.storage.size(f)
            except (FileNotFoundError, OSError):
                pass
        steps.append(RestoreStep(inst, files, size))
    return RestorePlan(table.name, sp, tuple(steps))


def restore(table: "TableContext", savepoint_instant: Any) -> RestoreResult:
    """Restore the table to ``savepoint_instant``: roll back every later write instant
    (newest first) as one restore instant.  Resumes a pending restore of the same savepoint."""
    table = context_of(table)
    from lakesdk.format.rollback_metadata import RollbackPlanData, RollbackRequest
    from lakesdk.services.rollback import _execute, files_written_by, resume_pending_rollbacks
    t0 = time.perf_counter()
    sp = _requested(savepoint_instant)
    store = table.store
    resume_pending_rollbacks(table)
    timeline = store.load()
    pending = [i for i in timeline.pending if i.action == "restore"]
    if pending:
        rinst = pending[-1]
        plan = store.plan(rinst, RestorePlanData)
        if plan.savepoint and plan.savepoint != sp:
            raise RestoreError(f"a restore to savepoint {plan.savepoint} is pending ({rinst.requested}); "
                               f"finish it first with table.maintenance.restore({plan.savepoint!r})", savepoint=sp)
    else:
        _check_restorable(table, store, timeline, sp)
        plan = RestorePlanData(tuple((i.requested, i.action) for i in _targets(table, timeline, sp)), sp)
        rinst = create_instant(store, table.lock(), "restore", plan.to_avro())
    from lakesdk.services.transaction import InstantTransaction
    txn = InstantTransaction.resume(table, rinst, operation="restore")
    rinst = txn.start()
    rollbacks: dict[str, list[dict[str, Any]]] = {}
    deleted = 0
    paths: list[str] = []
    for req, _action in plan.instants:
        tl = store.load()
        target = next((i for i in tl.instants if i.requested == req and i.action in _ROLLBACK_TARGETS), None)
        if target is None:
            # rolled back by an earlier, interrupted attempt: its rollback record is on the timeline
            done = next((r for r in tl.instants if r.action == "rollback" and r.is_completed
                         and r.requested > rinst.requested and _rolled_back(store, r) == req), None)
            if done is not None:
                rollbacks[req] = [store.metadata(done, RollbackMetadataData).record]
            continue
        files = files_written_by(table.storage, store, target)
        by_part: dict[str, list[str]] = {}
        for f in sorted(files):
            by_part.setdefault(posixpath.dirname(f), []).append(f)
        rplan = RollbackPlanData(target.requested, target.action,
                                 tuple(RollbackRequest(p, None, tuple(v)) for p, v in sorted(by_part.items())))
        rb = create_instant(store, table.lock(), "rollback", rplan.to_avro())
        res = _execute(table, store, target, rplan, rb)
        deleted += len(res.deleted_files)
        paths += res.deleted_files
        done_rb = next(i for i in store.load().instants if i.action == "rollback" and i.requested == rb.requested)
        rollbacks[req] = [store.metadata(done_rb, RollbackMetadataData).record]
    md = RestoreMetadataData(rinst.requested, int((time.perf_counter() - t0) * 1000), plan.instants, rollbacks)
    done = txn.commit(md.to_avro())
    txn.finish()
    # the rollback instants after the savepoint are not needed any more (their targets are gone)
    for r in store.load().instants:
        if r.action == "rollback" and r.is_completed and r.requested > sp:
            for n in sorted(store.all_states(r.requested),
                            key=lambda n: 0 if n.endswith(".requested") else 1 if n.endswith(".inflight") else 2):
                if ".rollback" in n:
                    table.storage.delete(posixpath.join(store.dir, n))
    last = store.load().commits
    if not len(last) or last[-1].requested != sp:
        raise RestoreError(f"restore {rinst.requested} completed but the last completed commit is "
                           f"{last[-1].requested if len(last) else 'none'}, not savepoint {sp}", savepoint=sp)
    return RestoreResult(table.name, rinst.requested, done.completed, sp, plan.instants, deleted,
                         time.perf_counter() - t0, tuple(paths))


def _rolled_back(store: TimelineStore, rb: Instant) -> str | None:
    try:
        rolled_back = store.metadata(rb, RollbackMetadataData).rolled_back
    except (FileNotFoundError, LakeError):
        return None
    return rolled_back[0][0] if rolled_back else None
