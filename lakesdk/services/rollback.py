"""Rollback: undo a failed (pending) write, or the latest completed one.

Plan: the files the instant wrote, from its markers (``.hoodie/.temp/<instant>/``), its
commit metadata when it completed, and, when neither exists, a scan for files named with
the instant.  The plan is written as ``R.rollback.requested`` (``HoodieRollbackPlan``);
then ``R.rollback.inflight``; the files are deleted; ``R_C.rollback``
(``HoodieRollbackMetadata``) completes it; last, the rolled-back instant's timeline files
(completed, inflight, requested), markers and heartbeat are removed.  A rollback that
crashes half-way is pending on the timeline and is re-executed by the next writer
(deleting is idempotent).

Failed writes are found by two policies: ``eager`` (single writer, the default) rolls back
every pending write before a new one starts; ``lazy`` (several writers) only those whose
heartbeat expired, so that concurrent writers are left alone.
"""

from __future__ import annotations

import posixpath
import time
from dataclasses import dataclass
from datetime import UTC
from typing import TYPE_CHECKING, Any, Literal

from lakesdk._display import human_bytes as _human
from lakesdk.commit.context import context_of
from lakesdk.concurrency.instants import create_instant
from lakesdk.exceptions import (
    CorruptTimelineError,
    InstantNotFoundError,
    RollbackNotAllowedError,
    WriteConflictError,
)
from lakesdk.format.file_naming import written_by
from lakesdk.format.instant import WRITE_ACTIONS, Instant
from lakesdk.format.rollback_metadata import RollbackMetadataData, RollbackPlanData, RollbackRequest
from lakesdk.storage import Storage
from lakesdk.timeline.store import TimelineStore

if TYPE_CHECKING:
    from lakesdk.commit.context import TableContext

__all__ = ["RollbackPlan", "RollbackResult", "RollbackStep", "plan_rollback", "rollback", "rollback_failed_writes",
           "files_written_by", "RollbackNotAllowedError"]


@dataclass(frozen=True)
class RollbackPlan:
    """What rolling back ``target`` deletes: the data files it wrote (from its markers, its
    commit metadata, or a scan for its instant time), then its timeline files.  Nothing is
    written until :func:`rollback` runs; ``instant`` is set when a pending rollback (one a
    crash interrupted) already holds this plan and will be reused."""

    table: str
    target: Instant
    files: tuple[str, ...]
    sizes: tuple[int, ...]
    instant: str | None = None

    @property
    def bytes(self) -> int:
        return sum(self.sizes)

    @property
    def partitions(self) -> list[str]:
        return sorted({posixpath.dirname(f) for f in self.files})

    def __len__(self) -> int:
        return len(self.files)

    def effect(self) -> str:
        """The expected effect, in words."""
        what = "a failed write" if not self.target.is_completed else "the latest completed write"
        files = (f"deletes {len(self.files)} data files ({_human(self.bytes)}) in {len(self.partitions)} partitions"
                 if self.files else "deletes no data file (the write left none)")
        return (f"{files}, then removes {self.target.action} {self.target.requested} ({what}) from the timeline; "
                "a rollback instant records what was removed")

    def __repr__(self) -> str:
        at = f" @ {self.instant} (pending, will be resumed)" if self.instant else " (not scheduled)"
        return (f"RollbackPlan({self.table!r}{at}: roll back {self.target.action} {self.target.requested} "
                f"({self.target.state}): {self.effect()})")

    def _repr_html_(self) -> str:
        import html
        rows = "".join(f"<tr><td>{html.escape(posixpath.dirname(f) or '<root>')}</td>"
                       f"<td><code>{html.escape(posixpath.basename(f))}</code></td><td>{_human(z)}</td></tr>"
                       for f, z in list(zip(self.files, self.sizes))[:100])
        more = f"<caption>first 100 of {len(self.files)} files</caption>" if len(self.files) > 100 else ""
        table = (f"<table>{more}<tr><th>partition</th><th>file</th><th>size</th></tr>{rows}</table>"
                 if self.files else "")
        return (f"<div><b>RollbackPlan</b> on <code>{html.escape(self.table)}</code>: roll back "
                f"<b>{self.target.action} {self.target.requested}</b> ({self.target.state})<br>"
                f"{html.escape(self.effect())}{table}</div>")


@dataclass(frozen=True)
class RollbackStep:
    """One step of a rollback as it ran (:attr:`RollbackResult.steps`): its name, what it
    did, the paths it deleted (or, planned, will delete), and with ``rollback(trace=True)``
    the timeline files of the two instants (the one rolled back and the rollback) after it."""

    name: str
    text: str
    paths: tuple[str, ...]
    timeline: tuple[str, ...]


@dataclass(frozen=True)
class RollbackResult:
    """What a rollback removed, and the steps it took (Hudi's rollback protocol)."""

    table: str
    rolled_back: Instant
    rollback_instant: str
    deleted_files: tuple[str, ...]
    seconds: float
    steps: tuple[RollbackStep, ...] = ()

    def __repr__(self) -> str:
        return (f"RollbackResult({self.table!r}: rolled back {self.rolled_back.action} {self.rolled_back.requested} "
                f"({self.rolled_back.state}) @ {self.rollback_instant}, deleted {len(self.deleted_files)} files, "
                f"seconds={self.seconds:.2f})")

    def _repr_html_(self) -> str:
        import html
        return f"<div><b>RollbackResult</b> {html.escape(repr(self))}</div>"


def files_written_by(storage: Storage, store: TimelineStore, inst: Instant, *, scan: bool | None = None) -> set[str]:
    """Data files (relative paths) that ``inst`` created or appended."""
    from lakesdk.markers import marked_data_files
    files = marked_data_files(storage, inst.requested)
    if files is None:
        files, scan = set(), True
    if inst.is_completed and inst.completed_action in WRITE_ACTIONS:
        md = store.commit_metadata(inst)
        files |= {p for s in md.write_stats for p in s.written_paths}
    # a crash inside a local write leaves "<data file>.<random>.tmp" beside the marker's file
    for part in {posixpath.dirname(f) for f in files}:
        names = {posixpath.basename(f) for f in files if posixpath.dirname(f) == part}
        for e in storage.list(part):
            if e.name.endswith(".tmp") and e.name.rsplit(".", 2)[0] in names:
                files.add(e.path)
    if scan or (scan is None and not files):
        for f in storage.find(""):
            if not f.path.startswith(".hoodie") and written_by(posixpath.basename(f.path), inst.requested):
                files.add(f.path)
    return files


def _execute(table: "TableContext", store: TimelineStore, target: Instant, plan: RollbackPlanData,
             rollback_instant: Instant, trace: bool = False) -> RollbackResult:
    from lakesdk.services.transaction import InstantTransaction
    t0 = time.perf_counter()
    storage = table.storage
    # a pending rollback may be executed by two processes at once (a writer aborting itself while
    # another writer rolls it back as failed): deleting the planned files twice is harmless, and
    # the commit point lets one of them complete it
    txn = InstantTransaction.resume(table, rollback_instant, operation="rollback")
    steps: list[RollbackStep] = []

    def step(name: str, text: str, paths: Any = ()) -> None:
        names = (store.all_states(target.requested, target.action) +
                 store.all_states(rollback_instant.requested, "rollback")) if trace else []
        steps.append(RollbackStep(name, text, tuple(paths), tuple(sorted(names))))
    to_delete = [path for req in plan.requests for path in req.files_to_delete]
    step("planned" if rollback_instant.state == "requested" else "resumed",
         (f"{rollback_instant.requested}.rollback.requested holds the plan: the {len(to_delete)} data files "
          f"{target.action} {target.requested} wrote (from its markers), to delete"
          if rollback_instant.state == "requested" else
          f"rollback {rollback_instant.requested}, which a crash interrupted, is resumed with its plan"), to_delete)
    try:
        rollback_instant = txn.start()
    except CorruptTimelineError:        # made inflight by the other executor
        rollback_instant = txn.instant = rollback_instant.to("inflight")
    step("started", "the rollback is inflight: from here it only moves forward (a crash resumes it)")
    deleted: dict[str, list[str]] = {}
    failed: dict[str, list[str]] = {}
    todo = [(req.partition, path) for req in plan.requests for path in req.files_to_delete]
    # markers made after the plan listed them (a writer of another process still writing: it
    # checks the instant once its file is written, and saw no rollback before the plan existed)
    from lakesdk.markers import marked_data_files
    planned = {path for _, path in todo}
    late = (marked_data_files(storage, target.requested) or set()) - planned
    todo += [(posixpath.dirname(path), path) for path in sorted(late)]
    for partition, path in todo:
        try:
            storage.delete(path)
            deleted.setdefault(partition, []).append(path)
        except OSError:
            failed.setdefault(partition, []).append(path)
    step("deleted data files", f"deleted {sum(len(v) for v in deleted.values())} data files: readers never saw "
         f"them ({target.requested} did not complete)" if not target.is_completed else
         f"deleted {sum(len(v) for v in deleted.values())} data files of {target.requested}",
         [p for v in deleted.values() for p in v])
    md = RollbackMetadataData(rollback_instant.requested, int((time.perf_counter() - t0) * 1000),
                              ((target.requested, target.action),),
                              {p: tuple(v) for p, v in deleted.items()}, {p: tuple(v) for p, v in failed.items()})
    try:
        txn.commit(md.to_avro())
    except WriteConflictError:
        if not any(i.action == "rollback" and i.requested == rollback_instant.requested and i.is_completed
                   for i in store.load()):
            raise
    txn.finish()
    step("completed", f"the rollback completed: its metadata records the deleted files (Hudi's metadata table, if "
         f"kept, got a delta commit of {rollback_instant.requested} first)")
    # the rolled-back instant leaves the timeline: completed file first, requested last
    names = store.all_states(target.requested, target.action)
    for name in sorted(names, key=lambda n: (0 if "_" in n.split(".")[0] else 1 if "inflight" in n else 2)):
        storage.delete(posixpath.join(store.dir, name))
    storage.delete_dir(f".hoodie/.temp/{target.requested}")
    storage.delete(f".hoodie/.heartbeat/{target.requested}")
    step("removed the instant", f"{target.action} {target.requested} left the timeline (its timeline files), with "
         "its markers and heartbeat", [posixpath.join(store.dir, n) for n in sorted(names)]
         + [f".hoodie/.temp/{target.requested}/", f".hoodie/.heartbeat/{target.requested}"])
    return RollbackResult(table.name, target, rollback_instant.requested,
                          tuple(p for v in deleted.values() for p in v), time.perf_counter() - t0, tuple(steps))


def _target(table: "TableContext", timeline: Any, req: str, *, force: bool, allow_alive: bool) -> Instant:
    """The instant to roll back, after the rules: a completed write only when it is the
    latest and not savepointed; a pending write only when its writer is gone."""
    from lakesdk.concurrency.heartbeat import is_expired
    try:
        target = next(i for i in timeline if i.requested == req and i.action != "rollback")
    except StopIteration:
        raise InstantNotFoundError(f"no instant {req!r} to roll back on {table.name!r}", instant=req) from None
    if target.is_completed:
        if target.completed_action not in WRITE_ACTIONS:
            raise RollbackNotAllowedError(f"{target.action} {req} is not a write; only writes can be rolled back",
                                          instant=req)
        if any(i.action == "savepoint" and i.is_completed and i.requested == req for i in timeline):
            raise RollbackNotAllowedError(
                f"Could not rollback a savepointed commit: completed instant {req} is savepointed; delete the "
                "savepoint first (table.maintenance.delete_savepoint(...)) or restore to it", instant=req)
        done = target.completed or target.requested
        later = [i for i in timeline.commits.by_completion()
                 if i.requested != req and (i.completed or i.requested) > done]
        if later:
            names = ", ".join(f"{i.action} {i.requested}" for i in reversed(later[-5:]))
            more = f" and {len(later) - 5} more" if len(later) > 5 else ""
            raise RollbackNotAllowedError(
                f"completed instant {req} is not the latest completed write: {len(later)} later write(s) completed "
                f"after it ({names}{more}). Roll those back first, newest first, or restore the table to a "
                f"savepoint taken at or before {req} (table.maintenance.savepoint(...) / "
                "table.maintenance.restore(...))", instant=req)
        check_active_commit_left(table, timeline, {req}, f"rolling back {target.action} {req}")
        check_previous_files_left(table, timeline, target)
    elif not force and not allow_alive and table.storage.exists(f".hoodie/.heartbeat/{req}") and not is_expired(
            table.storage, req, table.options.heartbeat_interval_s, table.options.heartbeat_misses):
        raise RollbackNotAllowedError(
            f"{target.action} {req} is still running (its heartbeat is fresh); wait for it, or pass force=True "
            "if you know its writer is gone", instant=req)
    return target


def check_previous_files_left(table: "TableContext", timeline: Any, target: Instant) -> None:
    """Refuse to roll back a completed commit when the file versions it superseded are gone: a
    clean (KEEP_LATEST_FILE_VERSIONS, or KEEP_LATEST_COMMITS after more commits) deleted the
    previous version of a file group it rewrote, or the file groups a replacecommit (clustering,
    insert_overwrite) replaced. The rollback would leave those file groups pointing at deleted
    files, and every read would then fail."""
    table = context_of(table)
    from dataclasses import replace as _replace

    from lakesdk.read.view import FileSystemView
    store = table.store
    md = store.commit_metadata(target)
    groups = {(part, fid) for part, fids in (md.partition_to_replace_file_ids or {}).items() for fid in fids}
    groups |= {(part, st.fileId) for part, sts in (md.partition_to_write_stats or {}).items() for st in sts if st.fileId}
    if not groups:
        return
    after = _replace(timeline, instants=tuple(i for i in timeline.instants if i.requested != target.requested),
                     loaded_at=0.0)    # made, not read: a listing against it is not kept
    view = FileSystemView(table.storage, table.config, store, after)
    missing = view.missing_files(lambda e: (e.partition, e.file_id) in groups)
    if missing:
        raise RollbackNotAllowedError(
            f"rolling back {target.action} {target.requested} would bring back file versions it superseded, but a "
            f"clean deleted them since (e.g. {missing[0].path}): every read would then fail. Keep the commit, or "
            "restore the table to a savepoint taken before it", instant=target.requested)


def check_active_commit_left(table: "TableContext", timeline: Any, removed: set[str], what: str) -> None:
    """Refuse to leave the active timeline without a completed write while the timeline history
    holds some: Hudi's file-system view then trusts only files older than the first active
    commit, so Hudi readers would see an empty table."""
    table = context_of(table)
    if any(i.requested not in removed for i in timeline.commits):
        return
    from lakesdk.services.archival import archived_instants
    history = [a.instant for a in archived_instants(table)
               if a.instant.is_completed and a.instant.completed_action in WRITE_ACTIONS]
    if history:
        raise RollbackNotAllowedError(
            f"{what} would leave no completed commit on the active timeline of {table.name!r} while the timeline "
            f"history holds {len(history)} archived commit(s) (latest {history[-1].requested}): Hudi readers would "
            "then see an empty table. Write to the table first (a later commit keeps the active timeline valid), "
            "then roll back or restore", instant=next(iter(removed)) if len(removed) == 1 else None)


def _pending_rollback_of(store: TimelineStore, timeline: Any, req: str) -> tuple[Instant, RollbackPlanData] | None:
    """A pending rollback (interrupted by a crash) of instant ``req``, with its plan."""
    for rb in timeline.pending.filter(actions=["rollback"]):
        try:
            plan = store.plan(rb, RollbackPlanData)
        except (FileNotFoundError, CorruptTimelineError):
            continue
        if plan.instant == req:
            return rb, plan
    return None


def _plan_data(table: "TableContext", store: TimelineStore, target: Instant) -> RollbackPlanData:
    files = files_written_by(table.storage, store, target)
    by_part: dict[str, list[str]] = {}
    for f in sorted(files):
        by_part.setdefault(posixpath.dirname(f), []).append(f)
    return RollbackPlanData(target.requested, target.action,
                            tuple(RollbackRequest(p, None, tuple(v)) for p, v in sorted(by_part.items())))


def plan_rollback(table: "TableContext", instant: str | Instant, *, force: bool = False) -> RollbackPlan:
    """What rolling back ``instant`` would delete (nothing is written); raises
    :class:`RollbackNotAllowedError` when :func:`rollback` would refuse it."""
    table = context_of(table)
    store = table.store
    timeline = store.load()
    req = instant.requested if isinstance(instant, Instant) else str(instant)
    target = _target(table, timeline, req, force=force, allow_alive=False)
    pending = _pending_rollback_of(store, timeline, req)
    data = pending[1] if pending else _plan_data(table, store, target)
    files = tuple(f for r in data.requests for f in r.files_to_delete)
    sizes = []
    for f in files:
        try:
            sizes.append(table.storage.size(f))
        except (FileNotFoundError, OSError):
            sizes.append(0)
    return RollbackPlan(table.name, target, files, tuple(sizes), pending[0].requested if pending else None)


def rollback(table: "TableContext", instant: str | Instant, *, force: bool = False, trace: bool = False,
             _allow_alive: bool = False, _only_pending: bool = False) -> RollbackResult:
    """Roll back ``instant``: a pending write (its writer failed or died), or the latest
    completed write.  A pending write whose heartbeat is fresh belongs to a live writer and
    is refused unless ``force=True``.  A completed write with later completed writes is
    refused (roll back the later ones first, or restore a savepoint).  A rollback of the
    same instant that a crash interrupted is resumed (same rollback instant).  The result's
    ``steps`` say what each step of the rollback did; with ``trace=True`` each also holds the
    timeline files of the two instants after it (a listing of the timeline per step)."""
    table = context_of(table)
    store = table.store
    req = instant.requested if isinstance(instant, Instant) else str(instant)
    # Rolling back another writer's pending write: decide and write the plan under the table
    # lock, which that writer holds while it checks that it is still pending and completes.
    # Either it completed first (seen here: nothing to roll back) or it sees the plan and
    # refuses to complete; without the lock a slow writer could complete between this check and
    # the plan, and the rollback would then delete the files of a landed commit.
    lock = table.lock() if _only_pending else None
    if lock is not None:
        lock.acquire()
    try:
        timeline = store.load()
        if _only_pending and any(i.requested == req and i.is_completed and i.action != "rollback" for i in timeline):
            # a slow writer completed it since it was found failed
            raise InstantNotFoundError(f"{req} completed meanwhile on {table.name!r}: nothing to roll back",
                                       instant=req)
        target = _target(table, timeline, req, force=force, allow_alive=_allow_alive)
        pending = _pending_rollback_of(store, timeline, req)
        if pending is None:
            plan = _plan_data(table, store, target)
            rb = create_instant(store, table.lock(), "rollback", plan.to_avro())
    finally:
        if lock is not None:
            lock.release()
    if pending is not None:
        return _execute(table, store, target, pending[1], pending[0], trace)
    return _execute(table, store, target, plan, rb, trace)


def resume_pending_rollbacks(table: "TableContext", *, min_age_s: float = 0.0,
                             timeline: Any = None) -> list[RollbackResult]:
    """Finish rollbacks that a crash interrupted (with several writers: only those older
    than ``min_age_s``, since a young one belongs to a writer that is still at it), found on
    ``timeline`` (loaded when None)."""
    table = context_of(table)
    from datetime import datetime
    store = table.store
    out = []
    now = datetime.now(UTC).replace(tzinfo=None)
    for rb in (timeline if timeline is not None else store.load()).pending.filter(actions=["rollback"]):
        if (now - rb.requested_at).total_seconds() < min_age_s:
            continue
        try:
            plan = store.plan(rb, RollbackPlanData)
            target = Instant(plan.action or "commit", "inflight", plan.instant)
            out.append(_execute(table, store, target, plan, rb))
        except (FileNotFoundError, CorruptTimelineError, InstantNotFoundError):
            continue   # finished by its own writer meanwhile
    return out


def _remove_stale_markers_and_heartbeats(table: "TableContext", timeline: Any) -> None:
    """Markers, heartbeats and table-service claims of completed instants (a writer that died
    right after its commit) or of instants no longer on the timeline are garbage."""
    completed = {i.requested for i in timeline.completed}
    known = {i.requested for i in timeline}
    newest = timeline.max_time() or ""
    from lakesdk.services.claim import CLAIMS_DIR
    for folder in (".hoodie/.temp", ".hoodie/.heartbeat", CLAIMS_DIR):
        for e in table.storage.list(folder):
            if not (len(e.name) == 17 and e.name.isdigit()):
                continue   # a heartbeat being written (temp name) or something not ours
            # keep pending instants, and anything newer than this timeline (a concurrent writer
            # may have started since it was loaded)
            if not (e.name in completed or (e.name not in known and e.name < newest)):
                continue
            if e.is_dir:
                table.storage.delete_dir(e.path)
            else:
                table.storage.delete(e.path)


def _dead(table: "TableContext", inst: Instant, is_expired: Any) -> bool:
    """A pending write belongs to a dead writer when its heartbeat expired, and (so that a
    writer that has just created its instant is not mistaken for a dead one) the instant is
    older than the heartbeat tolerance."""
    from datetime import datetime
    tolerance = table.options.heartbeat_interval_s * table.options.heartbeat_misses
    age = (datetime.now(UTC).replace(tzinfo=None) - inst.requested_at).total_seconds()
    return age > tolerance and is_expired(table.storage, inst.requested, table.options.heartbeat_interval_s,
                                          table.options.heartbeat_misses)


def rollback_failed_writes(table: "TableContext", *, policy: Literal["eager", "lazy"] = "eager",
                           exclude: str | None = None, timeline: Any = None) -> list[RollbackResult]:
    """Roll back pending writes left by failed or dead writers (see module doc), found on
    ``timeline`` (the operation's snapshot; loaded when None).  Each rollback checks its
    instant again under the lock, so a snapshot a moment old finds no more than a fresh load
    would, bar a writer that failed since: the next operation rolls that one back."""
    table = context_of(table)
    from lakesdk.concurrency.heartbeat import is_expired
    tolerance = table.options.heartbeat_interval_s * table.options.heartbeat_misses
    given = timeline is not None
    out = resume_pending_rollbacks(table, min_age_s=tolerance if policy == "lazy" else 0.0, timeline=timeline)
    if out or not given:     # resumed rollbacks changed the timeline
        timeline = table.store.load()
    _remove_stale_markers_and_heartbeats(table, timeline)
    for inst in timeline.pending:
        if inst.action not in ("commit", "deltacommit", "replacecommit") or inst.requested == exclude:
            continue
        if policy == "lazy" and not _dead(table, inst, is_expired):
            continue
        try:
            out.append(rollback(table, inst, _allow_alive=True, _only_pending=True))
        except InstantNotFoundError:
            continue   # another writer rolled it back (or its writer completed it) first
    return out


def abort(txn: Any) -> bool:
    """End an :class:`~lakesdk.services.transaction.InstantTransaction` that failed: stop its
    heartbeat; roll the instant back (its files, markers and timeline files) unless it landed
    (its completed file exists: the commit point passed).  Returns whether it was rolled back."""
    txn.stop_heartbeat()
    if txn.landed():
        return False
    try:
        rollback(txn.ctx, txn.instant.requested, _allow_alive=True)
    except InstantNotFoundError:
        # rolled back already by another writer that took this one for dead; a file finished
        # after that rollback is still here: delete it too
        for path in files_written_by(txn.ctx.storage, txn.ctx.store, txn.instant, scan=True):
            txn.ctx.storage.delete(path)
    return True
