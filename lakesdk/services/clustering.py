"""Clustering: rewrite many small file groups into fewer, larger (optionally sorted) ones.

Planning and scheduling are in :mod:`lakesdk.services.clustering_plan` (re-exported here;
its doc says how groups are planned and what ``T.clustering.requested`` holds); this module
executes a scheduled clustering ``T``.

Execute: the instant goes inflight, each input slice is read merged (base file and log files), the rows of a group
(sorted by ``sort_by`` when given) are split evenly into new base files named with ``T``
(markers first, as for writes), and ``T_C.replacecommit`` completes it: its
``partitionToReplaceFileIds`` lists the input file groups, operation type ``CLUSTER``.
Readers see the same rows before and after; the replaced file groups stay on storage for
time travel until a clean removes them.

While a clustering is pending, writes that would update or delete records of its file
groups fail with :class:`~lakesdk.exceptions.ClusteringConflictError` (Hudi's reject-update
strategy); inserts go to other file groups.  A write that planned before the clustering was
scheduled may still change an input file group; the clustering then checks (before it writes
and again at its commit, under the table lock with several writers) that its input slices
are still the latest, and rolls itself back with that error when they are not.  A heartbeat (``.hoodie/.heartbeat/T``) marks a clustering
as running.  An interrupted clustering stays pending; once its heartbeat expired, the next
:func:`cluster` call (or inline clustering) deletes what the failed attempt wrote and
executes it again; ``table.maintenance.rollback(instant)`` removes it instead.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from lakesdk.commit.context import context_of
from lakesdk.exceptions import (
    ClusteringConflictError,
    InstantNotFoundError,
)
from lakesdk.format.clustering_plan import ClusteringPlanData
from lakesdk.format.commit_metadata import CommitMetadata, WriteStat
from lakesdk.format.file_group import FileSlice
from lakesdk.format.instant import Instant
from lakesdk.services.claim import running_elsewhere
from lakesdk.services.clustering_plan import (
    ClusteringResult,
    clustering_instant,
    commits_since_clustering,
    plan_clustering,
    schedule_clustering,
    slices_of,
)
from lakesdk.timeline.store import TimelineStore

if TYPE_CHECKING:
    from lakesdk.commit.context import TableContext

__all__ = ["execute_clustering", "cluster", "cluster_after_write"]

log = logging.getLogger(__name__)


# -- execution --------------------------------------------------------------------------------------
def _discard_failed_attempt(table: "TableContext", store: TimelineStore, inst: Instant, partitions: set[str]) -> None:
    """Delete what an interrupted earlier execution of ``inst`` wrote (its file ids are
    random: left behind, they would appear as extra file groups once it completes)."""
    from lakesdk.format.file_naming import written_by
    from lakesdk.services.rollback import files_written_by
    files = files_written_by(table.storage, store, inst)
    for part in partitions:   # belt and braces: clustering writes only into its plan's partitions
        for e in table.storage.list(part):
            if not e.is_dir and written_by(e.name, inst.requested):
                files.add(e.path)
    for path in sorted(files):
        table.storage.delete(path)
    table.storage.delete_dir(f".hoodie/.temp/{inst.requested}")


def _changed_inputs(table: "TableContext", data: ClusteringPlanData) -> list[tuple[str, str]]:
    """Input file groups whose latest slice is no longer the one the plan names (a write
    that planned before the clustering was scheduled changed them since): clustering them
    now would drop that write's changes."""
    from lakesdk.read.view import FileSystemView
    store = table.store
    timeline = store.load()
    view = FileSystemView(table.storage, table.config, store, timeline)
    latest = {(s.partition, s.file_id): s for s in view.latest_slices()}
    out = []
    for s in (x for g in data.groups for x in g.slices):
        cur = latest.get((s.partition, s.file_id))
        if cur is None or (cur.base_file.name if cur.base_file else None) != s.base_file or \
                not {lf.name for lf in cur.log_files} <= set(s.log_files):
            out.append((s.partition, s.file_id))
    return out


def _abort_if_changed(table: "TableContext", instant: str, data: ClusteringPlanData) -> None:
    changed = _changed_inputs(table, data)
    if not changed:
        return
    from lakesdk.services.rollback import rollback
    rollback(table, instant, _allow_alive=True)
    shown = ", ".join(f"{p or '<root>'}/{f}" for p, f in changed[:5])
    raise ClusteringConflictError(
        f"clustering {instant} of {table.name!r} was rolled back: {len(changed)} of its file groups ({shown}) were "
        "changed by a write that completed after the clustering was scheduled, and rewriting the planned file "
        "slices would drop those changes. Run table.maintenance.cluster() again to plan anew",
        instant=instant, file_groups=tuple(changed))


def execute_clustering(table: "TableContext", instant: str) -> ClusteringResult:
    """Execute a scheduled clustering and commit its replacecommit (a heartbeat marks it as
    running meanwhile; an inflight one whose heartbeat expired is re-executed)."""
    table = context_of(table)
    t0 = time.perf_counter()
    store = table.store
    timeline = store.load()
    inst = clustering_instant(table, timeline, instant)
    if inst.is_completed:
        raise ClusteringConflictError(f"clustering {instant} of {table.name!r} is already completed",
                                      instant=instant, held_elsewhere=True)
    data = store.plan(inst, ClusteringPlanData)
    from lakesdk.services.claim import claim
    from lakesdk.services.transaction import InstantTransaction

    def busy(expiry: float) -> Exception:
        return ClusteringConflictError(
            f"clustering {instant} of {table.name!r} is being executed by another process (its heartbeat is fresh), "
            "or was completed by it; wait for it to finish. If that process is gone, its heartbeat expires after "
            f"{expiry:.0f} s and cluster() takes over", instant=instant, held_elsewhere=True)
    # claimed under the table lock: two processes executing one clustering would each write its
    # output file groups, and the files of the one whose commit did not land would stay
    resumed = inst.state == "inflight"      # an attempt whose executor is gone: its files are discarded
    inst, heartbeat = claim(table, "clustering", instant, busy)
    txn = InstantTransaction.resume(table, inst, operation="cluster", heartbeat=heartbeat)
    try:
        _abort_if_changed(table, instant, data)
        return _execute(table, store, txn, data, t0, resumed=resumed)
    finally:
        txn.stop_heartbeat()


def _execute(table: "TableContext", store: TimelineStore, txn: Any, data: ClusteringPlanData,
             t0: float, *, resumed: bool) -> ClusteringResult:
    from lakesdk import _faults as faults
    from lakesdk.commit.schema_store import resolve_schema, schema_extra_metadata
    from lakesdk.engine.local import _task, run_parallel
    from lakesdk.engine.tasks import WriteContext, cluster_group

    cfg = table.config
    inst = txn.instant
    instant = inst.requested
    timeline = store.load()
    groups = slices_of(table, data)
    if resumed:
        _discard_failed_attempt(table, store, inst, {p for p, _, _ in groups})
    faults.crash_point("after_requested")
    schema = resolve_schema(store, timeline, create_schema=cfg.create_schema)
    ctx = WriteContext.for_table(table.storage, cfg, table.options, instant=instant, schema=schema,
                                 operation="cluster", merger=table.merger())
    slice_ctx = ctx.slice_context(frozenset(i.requested for i in timeline.commits if i.requested < instant))
    ctx.markers = txn.markers()
    sort_by = data.sort_columns
    engine = table.engine()
    if engine == "local":
        stats: list[WriteStat] = [st for sts in run_parallel(
            lambda g: cluster_group(ctx, slice_ctx, g[0], g[1], g[2], sort_by, _task(0)), groups) for st in sts]
    else:
        stats = _cluster_groups_spark(table.spark, ctx, slice_ctx, groups, sort_by)
        written = {st.path for st in stats}   # remove leftovers of failed or speculative task attempts
        for part in {p for p, _, _ in groups}:
            for e in table.storage.list(part):
                if not e.is_dir and e.name.endswith(f"_{instant}.parquet") and e.path not in written:
                    table.storage.delete(e.path)
    rows_total = sum(st.numWrites for st in stats)
    bytes_read = sum(sl.base_size + sum(sl.log_sizes) for _, sls, _ in groups for sl in sls)
    faults.crash_point("after_data")
    replaced: dict[str, list[str]] = {}
    for part, slices, _ in groups:
        replaced.setdefault(part, []).extend(s.file_id for s in slices)
    parts: dict[str, list[WriteStat]] = {}
    for s in sorted(stats, key=lambda s: (s.partitionPath, s.fileId)):
        parts.setdefault(s.partitionPath, []).append(s)
    for p in parts:
        _ensure_partition_metafile(table, p, instant)
    md = CommitMetadata(partition_to_write_stats=parts, extra_metadata=schema_extra_metadata(schema, cfg.name),
                        operation_type="CLUSTER", partition_to_replace_file_ids=replaced)
    # the input must not have changed since the plan (checked under the lock with several writers)
    try:
        done = txn.commit(md.encode(layout=cfg.layout_version), checks=[lambda now: _abort_if_changed(table, instant, data)], always=True)
    except ClusteringConflictError as e:
        if e.held_elsewhere:   # taken over while this process stalled: its output files (new file ids) go
            for st in stats:
                table.storage.delete(st.path)
        raise
    faults.crash_point("after_commit")
    txn.finish()
    return ClusteringResult(cfg.name, instant, done.completed, sum(len(v) for v in replaced.values()), len(stats),
                            rows_total, bytes_read, sum(s.totalWriteBytes for s in stats), len(replaced),
                            time.perf_counter() - t0, tuple(s.path for s in stats), sort_by)


def _cluster_groups_spark(spark: Any, ctx: Any, slice_ctx: Any, groups: list[tuple[str, list[FileSlice], int]],
                          sort_by: tuple[str, ...]) -> list[WriteStat]:
    """One Spark task per clustering group; the write stats are collected."""
    import json
    from dataclasses import asdict

    from lakesdk.engine.spark import _stat_schema, _task_info, parallelism
    from lakesdk.engine.tasks import cluster_group
    if not groups:
        return []
    n = max(1, min(len(groups), parallelism(spark) * 2))
    src = spark.createDataFrame([(i,) for i in range(len(groups))], "i int").repartition(n)

    def fn(batches: Any) -> Any:
        info = _task_info()
        for b in batches:
            for i in b.column(0).to_pylist():
                part, slices, n_out = groups[i]
                for st in cluster_group(ctx, slice_ctx, part, slices, n_out, sort_by, info):
                    yield pa.RecordBatch.from_pydict({"stat": [json.dumps(asdict(st))], "counts": ["{}"]})
    return [WriteStat.from_dict(json.loads(r["stat"])) for r in src.mapInArrow(fn, _stat_schema()).collect()]


def _ensure_partition_metafile(table: "TableContext", partition: str, instant: str) -> None:
    from lakesdk.format.file_naming import PARTITION_METAFILE
    if partition and not table.storage.exists(f"{partition}/{PARTITION_METAFILE}"):
        text = f"#partition metadata\ncommitTime={instant}\npartitionDepth={len(partition.split('/'))}\n"
        table.storage.create_exclusive(f"{partition}/{PARTITION_METAFILE}", text.encode())


def cluster(table: "TableContext", instant: str | None = None, **plan_options: Any) -> ClusteringResult | None:
    """Execute the pending clustering ``instant``; without one, finish every pending
    clustering (an interrupted one is re-executed; one another live process executes, or
    completed or rolled back meanwhile, is left to it), or else plan, schedule and execute a
    new one (planned again when another process scheduled some of its file groups between
    the plan and the schedule).  Returns the result of the last clustering run (``None``
    when nothing needed clustering)."""
    table = context_of(table)
    table.check_writes("clustering")
    if instant is not None:
        return execute_clustering(table, instant)
    result = None
    pending = [i for i in table.timeline.pending if i.action == "clustering"]
    for inst in pending:
        if not running_elsewhere(table, inst):
            try:
                result = execute_clustering(table, inst.requested)
            except ClusteringConflictError as e:   # held elsewhere: another process claimed it since
                if not e.held_elsewhere:
                    raise
            except InstantNotFoundError:           # rolled back by another process since the listing
                pass
    if pending:
        return result
    for attempt in range(_SCHEDULE_ATTEMPTS):
        plan = plan_clustering(table, **plan_options)
        if not plan.groups:
            return None
        try:
            scheduled = schedule_clustering(table, plan)
        except ClusteringConflictError:   # another process scheduled some of these file groups meanwhile
            if attempt + 1 == _SCHEDULE_ATTEMPTS:
                raise
            continue
        return execute_clustering(table, scheduled.instant)  # type: ignore[arg-type]
    return None


_SCHEDULE_ATTEMPTS = 5


def cluster_after_write(table: "TableContext") -> ClusteringResult | None:
    """Inline clustering (``TableOptions.cluster_every``): once that many commits completed
    since the last replacecommit, finish pending clusterings and run one with the options'
    limits.  A failure is logged, never raised: the write it follows has already committed."""
    table = context_of(table)
    o = table.options
    every = getattr(o, "cluster_every", None)
    if not every:
        return None
    try:
        timeline = table.timeline
        pending = any(i.action == "clustering" for i in timeline.pending)
        if not pending and commits_since_clustering(timeline) < every:
            return None
        return cluster(table, small_file_limit=o.cluster_small_file_limit,
                       max_bytes_per_group=o.cluster_max_bytes_per_group,
                       target_file_size=o.cluster_target_file_size, sort_by=o.cluster_sort_by or None)
    except Exception:  # noqa: BLE001
        log.warning("inline clustering of %r failed; the write itself committed", table.name, exc_info=True)
        return None
