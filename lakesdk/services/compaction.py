"""Compaction of merge-on-read tables.

Schedule: the file slices that have log files become operations of a
``HoodieCompactionPlan`` written as ``T.compaction.requested``.  Execute: the instant goes
inflight, each slice is merged (base + logs, by the table's merger) into a new base file
named with ``T``, and ``T_C.commit`` completes it (operation ``COMPACT``).  Readers see the
same rows before, during and after: while the compaction is pending its base files are not
visible, and logs that complete after ``T`` attach to the new slice.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal

from lakesdk._display import human_bytes as _human
from lakesdk.commit.context import context_of
from lakesdk.concurrency.heartbeat import Heartbeat
from lakesdk.exceptions import CompactionConflictError, CorruptTimelineError, InstantNotFoundError, LakeError
from lakesdk.format.clustering_plan import ClusteringPlanData
from lakesdk.format.commit_metadata import CommitMetadata, WriteStat
from lakesdk.format.compaction_plan import CompactionOperation, CompactionPlanData
from lakesdk.format.file_group import FileSlice
from lakesdk.format.file_naming import BaseFile, LogFile
from lakesdk.format.instant import Instant, parse_instant_time
from lakesdk.format.timeline import Timeline
from lakesdk.services.claim import claim, running_elsewhere

if TYPE_CHECKING:
    from lakesdk.commit.context import TableContext
    from lakesdk.commit.results import WriteResult

__all__ = ["CompactionPlan", "plan_compaction", "schedule_compaction", "schedule_new_compaction", "execute_compaction",
           "compact",
           "deltacommits_since_compaction", "compaction_due", "order_operations", "running_elsewhere", "TRIGGERS"]

#: ``hoodie.compact.inline.trigger.strategy`` values
TRIGGERS = ("NUM_COMMITS", "NUM_COMMITS_AFTER_LAST_REQUEST", "TIME_ELAPSED", "NUM_OR_TIME", "NUM_AND_TIME")
#: the trigger names of the API (lower case, as every option value; Hudi's names are taken too)
CompactionTrigger = Literal["num_commits", "num_commits_after_last_request", "time_elapsed", "num_or_time",
                            "num_and_time"]
_MB = 1024 * 1024


def compaction_due(timeline: Timeline, *, trigger: str = "num_commits", max_delta_commits: int = 5,
                   max_delta_seconds: float = 3600, now: str | None = None) -> bool:
    """Whether a compaction should be scheduled now (Hudi's
    ``ScheduleCompactionActionExecutor.needCompact``).

    Counts completed delta commits requested after the last completed compaction (all of
    them before the first compaction); ``NUM_COMMITS_AFTER_LAST_REQUEST`` counts after the
    last compaction *request* instead (pending or completed).  Elapsed time runs from the
    last completed compaction (else the first delta commit) to ``now`` (an instant time;
    default the current time).  No delta commit at all: never due.
    """
    trig = str(trigger).upper()
    if trig not in TRIGGERS:
        from lakesdk.exceptions import OptionsError
        raise OptionsError(f"unknown compaction trigger {trigger!r} (hoodie.compact.inline.trigger.strategy): "
                           f"expected one of {', '.join(repr(t.lower()) for t in TRIGGERS)}",
                           key="hoodie.compact.inline.trigger.strategy")
    if max_delta_commits < 1 or max_delta_seconds < 0:
        raise ValueError("max_delta_commits must be >= 1 and max_delta_seconds >= 0")
    deltas = [i for i in timeline.instants if i.is_completed and i.action == "deltacommit"]
    if not deltas:
        return False
    compactions = [i for i in timeline.instants if i.action == "compaction"]
    if trig == "NUM_COMMITS_AFTER_LAST_REQUEST":
        last_request = compactions[-1].requested if compactions else ""
        return sum(1 for d in deltas if d.requested > last_request) >= max_delta_commits
    done = [c for c in compactions if c.is_completed]
    last = done[-1].requested if done else None
    enough = sum(1 for d in deltas if last is None or d.requested > last) >= max_delta_commits
    start = parse_instant_time(last or deltas[0].requested)
    end = parse_instant_time(now) if now else datetime.now(UTC).replace(tzinfo=None)
    late = (end - start).total_seconds() >= max_delta_seconds
    return {"NUM_COMMITS": enough, "TIME_ELAPSED": late, "NUM_OR_TIME": enough or late,
            "NUM_AND_TIME": enough and late}[trig]


def order_operations(ops: list[CompactionOperation], *, log_size_threshold: int = 0,
                     target_io_mb: float = 512000) -> list[CompactionOperation]:
    """The default strategy (Hudi's ``LogFileSizeBasedCompactionStrategy`` over
    ``BoundedIOCompactionStrategy``): drop operations whose log files total less than
    ``log_size_threshold`` bytes, largest logs first, then take operations while the IO
    budget ``target_io_mb`` lasts (the operation that uses it up is still taken)."""
    kept = [o for o in ops if o.metrics.get("TOTAL_LOG_FILES_SIZE", 0) >= log_size_threshold]
    kept.sort(key=lambda o: -o.metrics.get("TOTAL_LOG_FILES_SIZE", 0))
    out = []
    budget = float(target_io_mb)
    for o in kept:
        out.append(o)
        budget -= o.metrics.get("TOTAL_IO_MB", 0)
        if budget <= 0:
            break
    return out




@dataclass(frozen=True)
class CompactionPlan:
    """What a compaction will do; ``instant`` is set once scheduled."""

    table: str
    operations: tuple[CompactionOperation, ...]
    instant: str | None = None

    @property
    def log_files(self) -> int:
        return sum(len(o.log_files) for o in self.operations)

    @property
    def log_bytes(self) -> int:
        return int(sum(o.metrics.get("TOTAL_LOG_FILES_SIZE", 0) for o in self.operations))

    @property
    def partitions(self) -> list[str]:
        return sorted({o.partition for o in self.operations})

    def __len__(self) -> int:
        return len(self.operations)

    @property
    def base_bytes(self) -> int:
        return int(sum(o.metrics.get("TOTAL_BASE_FILE_SIZE", 0) for o in self.operations))

    def effect(self) -> str:
        """The expected effect, in words."""
        if not self.operations:
            return "nothing to compact: no file slice has log files"
        return (f"merges {self.log_files} log files ({_human(self.log_bytes)}) of {len(self.operations)} file groups "
                f"in {len(self.partitions)} partitions into new base files; reads return the same rows, "
                "the replaced slices stay until a clean")

    def __repr__(self) -> str:
        at = f" @ {self.instant}" if self.instant else " (not scheduled)"
        return (f"CompactionPlan({self.table!r}{at}: {len(self.operations)} file groups in "
                f"{len(self.partitions)} partitions, {self.log_files} log files ({_human(self.log_bytes)}) "
                f"to merge into new base files)")

    def _repr_html_(self) -> str:
        import html
        rows = "".join(
            f"<tr><td>{html.escape(o.partition or '<root>')}</td><td><code>{html.escape(o.file_id)}</code></td>"
            f"<td>{html.escape(o.base_file or '-')}</td><td>{_human(o.metrics.get('TOTAL_BASE_FILE_SIZE', 0))}</td>"
            f"<td>{'<br>'.join(html.escape(n) for n in o.log_files)}</td>"
            f"<td>{_human(o.metrics.get('TOTAL_LOG_FILES_SIZE', 0))}</td></tr>" for o in self.operations[:50])
        more = f"<caption>first 50 of {len(self.operations)} file groups</caption>" if len(self.operations) > 50 else ""
        at = f"@ {self.instant}" if self.instant else "(not scheduled)"
        return (f"<div><b>CompactionPlan</b> on <code>{html.escape(self.table)}</code> {at}<br>"
                f"{html.escape(self.effect())}<table>{more}<tr><th>partition</th><th>file group</th><th>base file</th>"
                f"<th>base size</th><th>log files</th><th>log bytes</th></tr>{rows}</table></div>")


def deltacommits_since_compaction(table: "TableContext") -> int:
    table = context_of(table)
    n = 0
    for inst in reversed(table.timeline.completed.by_completion()):
        if inst.action == "compaction":
            break
        if inst.action == "deltacommit":
            n += 1
    return n


def _pending_clustering_file_ids(store: Any, timeline: Timeline) -> set[str]:
    """File ids that pending clusterings rewrite (the input slices of their plans).  A plan
    file that is empty holds no plan (Hudi takes such a requested file for no clustering)."""
    out: set[str] = set()
    for i in timeline.pending.filter(actions=["clustering"]):
        try:
            plan = store.plan(i, ClusteringPlanData)
        except FileNotFoundError:
            continue
        except CorruptTimelineError as exc:
            try:
                if store.storage.size(store.path(Instant("clustering", "requested", i.requested))) == 0:
                    continue
            except FileNotFoundError:
                continue
            raise CorruptTimelineError(
                f"the plan of pending clustering {i.requested} cannot be read ({exc}): a compaction cannot tell which "
                "file groups it rewrites; execute or roll back that clustering first", path=exc.path) from exc
        out.update(s.file_id for g in plan.groups for s in g.slices if s.file_id)
    return out


def _operations(table: "TableContext", store: Any, timeline: Timeline, *, before: str | None = None,
                file_groups: set[tuple[str, str]] | None = None, min_log_files: int = 1) -> list[CompactionOperation]:
    """One operation per latest file slice with log files, except file groups that a pending
    compaction or clustering already covers.  With ``before`` (the compaction's instant time)
    only the log files of delta commits that completed before it are taken: a reader cuts
    file slices by completion time, so exactly those belong to the slice that the new base
    file replaces; later ones belong to the next slice (Hudi's
    ``BaseHoodieCompactionPlanGenerator``: ``isCompletedBefore(compactionInstant, ...)``)."""
    from lakesdk.read.view import FileSystemView
    from lakesdk.services.clean import _pending_compaction_ops
    view = FileSystemView(table.storage, table.config, store, timeline)
    timeline = view.timeline      # a newer one when a clean ran while the files were listed
    pending_ops, _ = _pending_compaction_ops(store, timeline)
    busy = {fid for fid, _ in pending_ops} | _pending_clustering_file_ids(store, timeline)
    completion = {i.requested: i.completed or i.requested for i in timeline.commits}
    ops = []
    for sl in view.latest_slices(file_groups=file_groups):
        if sl.file_id in busy:
            continue
        pairs = list(zip(sl.log_files, sl.log_sizes))
        if before is not None and table.config.layout_version >= 2:
            pairs = [(lf, n) for lf, n in pairs if lf.instant in completion and completion[lf.instant] < before]
        if not pairs or len(pairs) < min_log_files:
            continue
        logs = float(sum(n for _, n in pairs))
        read = (sl.base_size + logs) / _MB
        write = (sl.base_size or table.options.target_file_size) / _MB
        ops.append(CompactionOperation(
            sl.file_id, sl.partition, sl.base_instant, sl.base_file.name if sl.base_file else None,
            tuple(lf.name for lf, _ in pairs),
            {"TOTAL_LOG_FILES": float(len(pairs)), "TOTAL_LOG_FILES_SIZE": logs,
             "TOTAL_BASE_FILE_SIZE": float(sl.base_size), "TOTAL_IO_READ_MB": read, "TOTAL_IO_WRITE_MB": write,
             "TOTAL_IO_MB": read + write}))
    chosen = {(op.partition, op.file_id) for op in ops}
    view.verify_stored(lambda e: (e.partition, e.file_id) in chosen)
    return ops


def plan_compaction(table: "TableContext", *, min_log_files: int = 1, log_size_threshold: int = 0,
                    target_io_mb: float = 512000) -> CompactionPlan:
    """The slices a compaction would merge now (nothing is written): the latest slice of
    every file group with at least ``min_log_files`` log files of completed delta commits,
    except file groups that a pending compaction or clustering already covers; ordered and
    bounded by :func:`order_operations`.  :func:`schedule_compaction` takes the log files
    again as of the compaction's instant time."""
    table = context_of(table)
    if not table.config.is_mor:
        raise LakeError(f"Can only compact table of type MERGE_ON_READ: {table.name!r} is a copy-on-write table, "
                        "there are no log files to compact")
    store = table.store
    ops = _operations(table, store, store.load(), min_log_files=min_log_files)
    return CompactionPlan(table.name, tuple(order_operations(ops, log_size_threshold=log_size_threshold,
                                                             target_io_mb=target_io_mb)))


def schedule_compaction(table: "TableContext", plan: CompactionPlan) -> CompactionPlan:
    """Write the plan as a requested compaction instant ``T``.

    ``T`` is taken first, then the plan's file groups are planned again as of ``T``: each
    operation lists exactly the log files of delta commits that completed before ``T``
    (those a reader attaches to the slice the new base file replaces; a log file planned
    from an older listing could miss a delta commit that completed in between, and its
    updates would be hidden by the new base file).  With several writers this runs under
    the table lock, which delta commits also hold when they complete, so none completes
    between ``T`` and the plan and every later one completes after ``T``.  File groups that
    another compaction or a clustering took meanwhile are left out; when none is left, the
    plan is returned unscheduled (``instant`` None, no operations)."""
    table = context_of(table)
    table.check_writes("compaction")
    store = table.store
    wanted = {(o.partition, o.file_id) for o in plan.operations}
    order = {key: n for n, key in enumerate((o.partition, o.file_id) for o in plan.operations)}
    from lakesdk.concurrency.instants import create_planned_instant
    planned: list[Any] = []

    def plan_at(requested: str) -> bytes | None:
        ops = _operations(table, store, store.load(), before=requested, file_groups=wanted)
        ops.sort(key=lambda o: order[(o.partition, o.file_id)])
        planned[:] = ops
        return CompactionPlanData(tuple(ops)).to_avro() if ops else None
    instant = create_planned_instant(store, table.lock(), "compaction", plan_at)
    if instant is None:
        return CompactionPlan(plan.table, ())
    return CompactionPlan(plan.table, tuple(planned), instant.requested)


def schedule_new_compaction(table: "TableContext", *, min_log_files: int = 1) -> CompactionPlan | None:
    """Plan a compaction (:func:`plan_compaction`) and schedule it (:func:`schedule_compaction`);
    None when no slice has log files to compact, or none is left once planned again as of the
    compaction's instant time."""
    plan = plan_compaction(table, min_log_files=min_log_files)
    if not len(plan):
        return None
    scheduled = schedule_compaction(table, plan)   # planned again as of its instant time
    return scheduled if scheduled.instant else None


def compact(table: "TableContext", instant: str | None = None, *, min_log_files: int = 1) -> WriteResult | None:
    """Execute the pending compaction ``instant``, or plan, schedule and execute one now
    (``table.maintenance.compact()``, and the inline compaction of ``TableOptions.compact_every``).
    Returns the compaction's WriteResult, or ``None`` when there was nothing to compact.
    Without ``instant``, pending compactions that another process is executing are left to it
    (``None`` when it takes the one this call picked); with ``instant``, that raises
    CompactionConflictError."""
    table = context_of(table)
    table.check_writes("compaction")
    if instant is not None:
        return execute_compaction(table, instant)
    pending = [i for i in table.timeline.pending if i.action == "compaction" and not running_elsewhere(table, i)]
    if pending:
        instant = pending[0].requested
    else:
        plan = schedule_new_compaction(table, min_log_files=min_log_files)
        if plan is None or plan.instant is None:   # a scheduled plan has its instant
            return None
        instant = plan.instant
    try:
        return execute_compaction(table, instant)
    except CompactionConflictError:
        return None   # another process took it first


def execute_compaction(table: "TableContext", instant: str) -> WriteResult:
    """Execute a scheduled compaction and commit it; returns a WriteResult.  Raises
    :class:`CompactionConflictError` when another process is executing it."""
    table = context_of(table)
    t0 = time.perf_counter()
    store = table.store
    timeline = store.load()
    try:
        inst = next(i for i in timeline if i.requested == instant and i.action == "compaction")
    except StopIteration:
        raise InstantNotFoundError(f"no compaction instant {instant!r} on the timeline", instant=instant) from None
    if inst.is_completed:   # by another process since the caller listed it
        raise CompactionConflictError(f"compaction {instant} of {table.name!r} is already completed", instant=instant)
    # the plan is in the requested file (the inflight one is empty), also when resuming a
    # compaction whose executor died after it went inflight
    plan = store.plan(inst, CompactionPlanData)
    from lakesdk.services.transaction import InstantTransaction
    inst, heartbeat = _claim(table, store, instant)
    txn = InstantTransaction.resume(table, inst, operation="compact", heartbeat=heartbeat)
    try:
        return _execute(table, store, timeline, txn, plan, t0)
    finally:
        txn.stop_heartbeat()


def _claim(table: "TableContext", store: Any, instant: str) -> tuple[Instant, Heartbeat]:
    """Take the compaction ``instant`` for this process (:func:`lakesdk.services.claim.claim`):
    two processes never execute it at once (each would delete the other's base files as
    leftovers)."""
    def busy(expiry: float) -> Exception:
        return CompactionConflictError(
            f"compaction {instant} of {table.name!r} is being executed by another process (or was completed by it); "
            "wait for it to finish. If that process is gone, its heartbeat expires after "
            f"{expiry:.0f} s and compact() takes over", instant=instant)
    return claim(table, "compaction", instant, busy)


def _execute(table: "TableContext", store: Any, timeline: Timeline, txn: Any, plan: CompactionPlanData,
             t0: float) -> WriteResult:
    from lakesdk.commit.results import WriteResult
    from lakesdk.commit.schema_store import resolve_schema, schema_extra_metadata
    from lakesdk.engine.tasks import WriteContext

    cfg = table.config
    instant = txn.instant.requested
    schema = resolve_schema(store, timeline, create_schema=cfg.create_schema)
    slices = []
    # a log file is read against the size its commit recorded: one cut short is an error, not fewer records
    from lakesdk.read.view import FileSystemView
    recorded = {e.path: e.size for e in FileSystemView(table.storage, cfg, store, timeline, files=()).expected_files()
                if e.kind == "log"}
    for op in plan.operations:
        base = BaseFile.parse(op.base_file) if op.base_file else None
        logs = tuple(LogFile.parse(n) for n in op.log_files)
        prefix = f"{op.partition}/" if op.partition else ""
        base_size = table.storage.size(prefix + op.base_file) if op.base_file else 0
        slices.append(FileSlice(op.partition, op.file_id, op.base_instant, base, base_size, logs,
                                tuple(recorded.get(prefix + lf.name) or table.storage.size(prefix + lf.name)
                                      for lf in logs)))
    ctx = WriteContext.for_table(table.storage, cfg, table.options, instant=instant, schema=schema,
                                 operation="compact", merger=table.merger())
    slice_ctx = ctx.slice_context(frozenset(i.requested for i in timeline.commits if i.requested < instant))
    ctx.markers = txn.markers()
    engine = table.engine()
    if engine == "local":
        from lakesdk.engine.local import compact_slices_local
        stats: list[WriteStat] = compact_slices_local(ctx, slice_ctx, slices, desc=f"compacting {instant}",
                                                      progress=table.options.progress)
    else:
        from lakesdk.engine.spark import compact_slices_spark
        stats = compact_slices_spark(table.spark, ctx, slice_ctx, slices)
    written = {s.path for s in stats}
    for p in {s.partitionPath for s in stats}:  # remove leftovers of failed task attempts
        for f in table.storage.list(p):
            if f.name.endswith(f"_{instant}.parquet") and f.path not in written:
                table.storage.delete(f.path)
    parts: dict[str, list[WriteStat]] = {}
    for s in stats:
        parts.setdefault(s.partitionPath, []).append(s)
    md = CommitMetadata(partition_to_write_stats=parts, extra_metadata=schema_extra_metadata(schema, cfg.name),
                        operation_type="COMPACT", compacted=True)
    done = txn.commit(md.encode(layout=cfg.layout_version))
    txn.finish()
    return WriteResult(table=cfg.name, operation="compact", instant=instant, completed=done.completed,
                       action="compaction", files=len(stats), bytes=sum(s.totalWriteBytes for s in stats),
                       partitions=len(parts), seconds=time.perf_counter() - t0,
                       file_paths=tuple(s.path for s in stats))
