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
from typing import TYPE_CHECKING, Any

from lakesdk._display import human_bytes as _human
from lakesdk.exceptions import InstantNotFoundError, LakeError
from lakesdk.format.commit_metadata import CommitMetadata, WriteStat
from lakesdk.format.file_group import FileSlice
from lakesdk.format.file_naming import BaseFile, LogFile
from lakesdk.format.plans import CompactionOperation, CompactionPlanData

if TYPE_CHECKING:
    from lakesdk.table.table import Table

__all__ = ["CompactionPlan", "plan_compaction", "schedule_compaction", "execute_compaction",
           "deltacommits_since_compaction"]




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

    def __repr__(self) -> str:
        at = f" @ {self.instant}" if self.instant else " (not scheduled)"
        return (f"CompactionPlan({self.table!r}{at}: {len(self.operations)} file groups in "
                f"{len(self.partitions)} partitions, {self.log_files} log files ({_human(self.log_bytes)}) "
                f"to merge into new base files)")

    def _repr_html_(self) -> str:
        rows = "".join(
            f"<tr><td>{o.partition or '&lt;root&gt;'}</td><td><code>{o.file_id}</code></td>"
            f"<td>{o.base_file or '-'}</td><td>{len(o.log_files)}</td>"
            f"<td>{_human(o.metrics.get('TOTAL_LOG_FILES_SIZE', 0))}</td></tr>" for o in self.operations[:50])
        return (f"<div><b>{repr(self)}</b><table><tr><th>partition</th><th>file group</th><th>base file</th>"
                f"<th>log files</th><th>log bytes</th></tr>{rows}</table></div>")


def deltacommits_since_compaction(table: "Table") -> int:
    n = 0
    for inst in reversed(table.timeline.completed.by_completion()):
        if inst.action == "compaction":
            break
        if inst.action == "deltacommit":
            n += 1
    return n


def plan_compaction(table: "Table", *, min_log_files: int = 1) -> CompactionPlan:
    """The slices a compaction would merge now (nothing is written)."""
    if not table.config.is_mor:
        raise LakeError(f"{table.name!r} is a copy-on-write table: there are no log files to compact")
    from lakesdk.read.view import FileSystemView
    store = table._store()
    timeline = store.load()
    pending = {i.requested for i in timeline.pending if i.action == "compaction"}
    if pending:
        raise LakeError(f"a compaction is already pending at {sorted(pending)[0]}; execute it first "
                        "(table.maintenance.compact(instant=...))")
    view = FileSystemView(table.storage, table.config, store, timeline)
    ops = []
    for sl in view.latest_slices():
        if len(sl.log_files) < min_log_files or not sl.log_files:
            continue
        ops.append(CompactionOperation(
            sl.file_id, sl.partition, sl.base_instant, sl.base_file.name if sl.base_file else None,
            tuple(lf.name for lf in sl.log_files),
            {"TOTAL_LOG_FILES": float(len(sl.log_files)), "TOTAL_LOG_FILES_SIZE": float(sum(sl.log_sizes))}))
    return CompactionPlan(table.name, tuple(ops))


def schedule_compaction(table: "Table", plan: CompactionPlan) -> CompactionPlan:
    """Write the plan as a requested compaction instant."""
    store = table._store()
    instant = store.create_new("compaction", CompactionPlanData(plan.operations).to_avro(),
                               after=store.load().max_time())
    return CompactionPlan(plan.table, plan.operations, instant.requested)


def execute_compaction(table: "Table", instant: str) -> Any:
    """Execute a scheduled compaction and commit it; returns a WriteResult."""
    from lakesdk.engine.slice_reader import SliceReadContext
    from lakesdk.engine.tasks import WriteContext
    from lakesdk.table.results import WriteResult
    from lakesdk.table.schema_store import resolve_schema, schema_extra_metadata

    t0 = time.perf_counter()
    cfg = table.config
    store = table._store()
    timeline = store.load()
    try:
        inst = next(i for i in timeline if i.requested == instant and i.action == "compaction")
    except StopIteration:
        raise InstantNotFoundError(f"no compaction instant {instant!r} on the timeline") from None
    if inst.is_completed:
        raise LakeError(f"compaction {instant} is already completed")
    plan = CompactionPlanData.parse(store.storage.read(store.path(inst)))
    if inst.state == "requested":
        inst = store.transition(inst, "inflight")
    schema = resolve_schema(store, timeline, create_schema=cfg.create_schema)
    slices = []
    for op in plan.operations:
        base = BaseFile.parse(op.base_file) if op.base_file else None
        logs = tuple(LogFile.parse(n) for n in op.log_files)
        prefix = f"{op.partition}/" if op.partition else ""
        base_size = table.storage.size(prefix + op.base_file) if op.base_file else 0
        slices.append(FileSlice(op.partition, op.file_id, op.base_instant, base, base_size, logs,
                                tuple(table.storage.size(prefix + lf.name) for lf in logs)))
    ctx = WriteContext(storage=table.storage, instant=instant, schema=schema, key_fields=cfg.record_key_fields,
                       partition_fields=cfg.partition_fields, keygen=cfg.keygen_type, hive_style=cfg.hive_style,
                       ordering=cfg.ordering_field, merge_mode=cfg.merge_mode, table_name=cfg.name,
                       column_groups=cfg.column_groups, merger=table._merger(),
                       operation="compact")
    visible = frozenset(i.requested for i in timeline.commits if i.requested < instant)
    slice_ctx = SliceReadContext(table.storage, schema, cfg.ordering_field, cfg.merge_mode, visible,
                                 column_groups=cfg.column_groups, merger=table._merger())
    ctx.markers = table._markers(instant)
    engine = table.options.engine if table.options.engine != "auto" else (
        "local" if table._spark_is_local() else "spark")
    if engine == "local":
        from lakesdk.engine.local import run_parallel
        from lakesdk.engine.tasks import TaskInfo, compact_file_slice
        stats: list[WriteStat] = run_parallel(
            lambda a: compact_file_slice(ctx, slice_ctx, a[1], TaskInfo(a[0], 0, a[0])), list(enumerate(slices)),
            desc=f"compacting {instant}", progress=table.options.progress)
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
    done = store.transition(inst, "completed", md.to_avro())
    ctx.markers.delete_all()
    return WriteResult(table=cfg.name, operation="compact", instant=instant, completed=done.completed,
                       action="compaction", files=len(stats), bytes=sum(s.totalWriteBytes for s in stats),
                       partitions=len(parts), seconds=time.perf_counter() - t0,
                       file_paths=tuple(s.path for s in stats))
