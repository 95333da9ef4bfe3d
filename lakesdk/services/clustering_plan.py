"""Clustering plans: the plan values (:class:`ClusteringPlan`, :class:`ClusteringGroup`,
:class:`ClusteringResult`), the timeline helpers, and planning and scheduling a clustering.
Executing one is in :mod:`lakesdk.services.clustering`, which re-exports every name here.

Plan (Hudi's size-based plan strategy): the latest file slices of each partition whose base
file is smaller than ``small_file_limit`` (a slice without a base file counts as 0 bytes)
and whose file group is not under a pending compaction or clustering are sorted by base
size, largest first, and packed greedily into groups of at most ``max_bytes_per_group``
(a slice without a base file weighs ``target_file_size``); at most ``max_groups`` groups
in all.  A group of one slice is only kept with ``sort_by`` or ``single_group=True``
(rewriting one file alone does not reduce the file count).  Each group is rewritten into
``ceil(group bytes / target_file_size)`` new file groups.

Schedule: ``T.clustering.requested`` holds Hudi's ``HoodieRequestedReplaceMetadata``
(operation ``CLUSTER``) with the ``HoodieClusteringPlan``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Iterable, Sequence, TypeVar

from lakesdk._display import human_bytes as _human
from lakesdk.commit.context import context_of
from lakesdk.exceptions import (
    ClusteringConflictError,
    InstantNotFoundError,
    LakeError,
    MissingColumnError,
)
from lakesdk.format.clustering_plan import (
    SORT_COLUMNS_PARAM,
    ClusteringGroupData,
    ClusteringPlanData,
    ClusteringSliceInfo,
)
from lakesdk.format.compaction_plan import CompactionPlanData
from lakesdk.format.file_group import FileSlice
from lakesdk.format.file_naming import BaseFile, LogFile
from lakesdk.format.instant import Instant
from lakesdk.format.timeline import Timeline
from lakesdk.timeline.store import TimelineStore

if TYPE_CHECKING:
    import pandas as pd

    from lakesdk.commit.context import TableContext

__all__ = ["ClusteringGroup", "ClusteringPlan", "ClusteringResult", "plan_clustering", "pack_slices",
           "eligible_slices", "schedule_clustering", "pending_clusterings", "clustering_instant", "plan_of_instant",
           "slices_of", "pending_clustering_file_groups", "commits_since_clustering", "SMALL_FILE_LIMIT",
           "MAX_BYTES_PER_GROUP", "TARGET_FILE_SIZE", "MAX_GROUPS"]

_Item = TypeVar("_Item")   # what pack_slices packs

MiB = 1024 * 1024
#: Hudi's defaults (hoodie.clustering.plan.strategy.*)
SMALL_FILE_LIMIT = 300 * MiB
MAX_BYTES_PER_GROUP = 2048 * MiB
TARGET_FILE_SIZE = 1024 * MiB
MAX_GROUPS = 30


# -- plan values ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class ClusteringGroup:
    """Input file slices of one partition rewritten together into ``num_output_groups`` files."""

    partition: str
    slices: tuple[FileSlice, ...]
    num_output_groups: int

    @property
    def base_bytes(self) -> int:
        return sum(s.base_size for s in self.slices)

    @property
    def bytes(self) -> int:
        """Bytes of every input file (base and log files)."""
        return sum(s.base_size + sum(s.log_sizes) for s in self.slices)

    @property
    def files(self) -> int:
        return sum((1 if s.base_file else 0) + len(s.log_files) for s in self.slices)

    @property
    def file_ids(self) -> list[str]:
        return [s.file_id for s in self.slices]

    def __repr__(self) -> str:
        return (f"ClusteringGroup({self.partition or '<root>'}: {len(self.slices)} file groups, {self.files} files "
                f"({_human(self.bytes)}) -> {self.num_output_groups})")


@dataclass(frozen=True)
class ClusteringPlan:
    """What a clustering will rewrite; ``instant`` is set once scheduled.

    ``skipped`` counts the latest file slices left out, by reason."""

    table: str
    groups: tuple[ClusteringGroup, ...]
    sort_by: tuple[str, ...] = ()
    small_file_limit: int = SMALL_FILE_LIMIT
    max_bytes_per_group: int = MAX_BYTES_PER_GROUP
    target_file_size: int = TARGET_FILE_SIZE
    instant: str | None = None
    skipped: dict[str, int] = field(default_factory=dict)

    # -- summary ------------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.groups)

    @property
    def partitions(self) -> list[str]:
        return sorted({g.partition for g in self.groups})

    @property
    def file_groups(self) -> list[tuple[str, str]]:
        """(partition, file id) of every input file group (the ones the clustering replaces)."""
        return [(g.partition, s.file_id) for g in self.groups for s in g.slices]

    @property
    def input_file_groups(self) -> int:
        return sum(len(g.slices) for g in self.groups)

    @property
    def input_files(self) -> int:
        return sum(g.files for g in self.groups)

    @property
    def input_bytes(self) -> int:
        return sum(g.bytes for g in self.groups)

    @property
    def output_file_groups(self) -> int:
        return sum(g.num_output_groups for g in self.groups)

    @property
    def effect(self) -> str:
        if not self.groups:
            return "nothing to cluster"
        s = (f"{self.input_file_groups} file groups ({self.input_files} files, {_human(self.input_bytes)}) in "
             f"{len(self.partitions)} partitions become {self.output_file_groups} new file groups "
             f"(-{self.input_files - self.output_file_groups} live files)")
        if self.sort_by:
            s += f" sorted by {', '.join(self.sort_by)}"
        return s + "; the replaced files stay for time travel until a clean removes them"

    def __repr__(self) -> str:
        at = f" @ {self.instant}" if self.instant else " (not scheduled)"
        n = len(self.groups)
        return f"ClusteringPlan({self.table!r}{at}: {n} group{'' if n == 1 else 's'}; {self.effect})"

    def _repr_html_(self) -> str:
        rows = "".join(
            f"<tr><td>{i}</td><td>{_esc(g.partition or '<root>')}</td><td>{len(g.slices)}</td><td>{g.files}</td>"
            f"<td>{_human(g.bytes)}</td><td>{g.num_output_groups}</td>"
            f"<td><code>{', '.join(g.file_ids[:4])}{' ...' if len(g.slices) > 4 else ''}</code></td></tr>"
            for i, g in enumerate(self.groups[:50]))
        more = f"<caption>first 50 of {len(self.groups)} groups</caption>" if len(self.groups) > 50 else ""
        skipped = ", ".join(f"{n} {why}" for why, n in sorted(self.skipped.items()) if n)
        return (f"<div><b>{_esc(repr(self))}</b>"
                f"<div>small-file limit {_human(self.small_file_limit)}, at most {_human(self.max_bytes_per_group)} "
                f"per group, target file size {_human(self.target_file_size)}"
                f"{'; slices left out: ' + skipped if skipped else ''}</div>"
                f"<table>{more}<tr><th>group</th><th>partition</th><th>file groups</th><th>files</th><th>bytes</th>"
                f"<th>output file groups</th><th>file ids</th></tr>{rows}</table></div>")

    def to_pandas(self) -> pd.DataFrame:
        """One row per input file slice."""
        import pandas as pd
        rows = [{"group": i, "partition": g.partition, "file_id": s.file_id, "base_file": s.base_file.name
                 if s.base_file else None, "base_bytes": s.base_size, "log_files": len(s.log_files),
                 "output_file_groups": g.num_output_groups} for i, g in enumerate(self.groups) for s in g.slices]
        return pd.DataFrame(rows, columns=["group", "partition", "file_id", "base_file", "base_bytes", "log_files",
                                           "output_file_groups"])

    def to_plan_data(self) -> ClusteringPlanData:
        groups = tuple(ClusteringGroupData(
            tuple(ClusteringSliceInfo(s.partition, s.file_id, s.base_file.name if s.base_file else None,
                                      tuple(lf.name for lf in s.log_files)) for s in g.slices),
            g.num_output_groups,
            {"TOTAL_IO_READ_MB": g.bytes / MiB, "TOTAL_IO_WRITE_MB": g.base_bytes / MiB,
             "TOTAL_IO_MB": (g.bytes + g.base_bytes) / MiB, "TOTAL_LOG_FILES": float(sum(len(s.log_files)
                                                                                        for s in g.slices)),
             "TOTAL_LOG_FILE_SIZE": float(sum(sum(s.log_sizes) for s in g.slices))}) for g in self.groups)
        params = {SORT_COLUMNS_PARAM: ",".join(self.sort_by)} if self.sort_by else {}
        params["hoodie.clustering.plan.strategy.target.file.max.bytes"] = str(self.target_file_size)
        return ClusteringPlanData(groups, strategy_params=params)


def _esc(s: str) -> str:
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


@dataclass(frozen=True)
class ClusteringResult:
    """A completed clustering: the replacecommit and what it rewrote."""

    table: str
    instant: str
    completed: str | None
    replaced_file_groups: int
    new_file_groups: int
    rows: int
    bytes_read: int
    bytes_written: int
    partitions: int
    seconds: float
    file_paths: tuple[str, ...] = ()
    sort_by: tuple[str, ...] = ()

    @property
    def action(self) -> str:
        return "replacecommit"

    @property
    def files(self) -> int:
        return self.new_file_groups

    def __repr__(self) -> str:
        sort = f", sorted by {', '.join(self.sort_by)}" if self.sort_by else ""
        return (f"ClusteringResult({self.table!r} @ {self.instant}: {self.replaced_file_groups} file groups "
                f"({_human(self.bytes_read)}) -> {self.new_file_groups} ({_human(self.bytes_written)}), "
                f"{self.rows} rows in {self.partitions} partitions{sort}, seconds={self.seconds:.2f})")

    def _repr_html_(self) -> str:
        rows = [("instant", self.instant), ("completed", self.completed or "-"),
                ("replaced file groups", self.replaced_file_groups), ("new file groups", self.new_file_groups),
                ("rows", self.rows), ("read", _human(self.bytes_read)), ("written", _human(self.bytes_written)),
                ("partitions", self.partitions), ("sorted by", ", ".join(self.sort_by) or "-"),
                ("seconds", f"{self.seconds:.2f}")]
        body = "".join(f"<tr><th style='text-align:left'>{k}</th><td>{v}</td></tr>" for k, v in rows)
        return f"<div><b>clustering of {_esc(self.table)}</b><table>{body}</table></div>"


# -- timeline helpers -----------------------------------------------------------------------------
def pending_clustering_file_groups(store: TimelineStore, timeline: Timeline) -> dict[tuple[str, str], str]:
    """(partition, file id) -> requested time of the pending clustering that rewrites it."""
    return {key: inst.requested for inst, plan in store.pending_plans(timeline, ClusteringPlanData)
            for key in plan.file_groups()}


def _pending_compaction_file_groups(store: TimelineStore, timeline: Timeline) -> set[tuple[str, str]]:
    return {(o.partition, o.file_id) for _, plan in store.pending_plans(timeline, CompactionPlanData)
            for o in plan.operations}


def commits_since_clustering(timeline: Timeline) -> int:
    """Completed commits and delta commits after the last completed replacecommit (Hudi
    counts from the last replacecommit, clustering or insert_overwrite; all when none)."""
    n = 0
    for inst in reversed(timeline.completed.by_completion()):
        if inst.completed_action == "replacecommit":
            break
        if inst.action in ("commit", "deltacommit"):
            n += 1
    return n


# -- planning ---------------------------------------------------------------------------------------
def pack_slices(sizes: Sequence[tuple[_Item, int | None]], *, max_bytes_per_group: int, target_file_size: int,
                max_groups: int, single_group: bool) -> list[tuple[list[_Item], int]]:
    """Hudi's size-based packing of one partition's eligible slices.

    ``sizes`` holds (item, base file bytes or None for a slice without a base file).  Items
    are sorted by size, largest first (a missing base weighs ``target_file_size``) and packed
    greedily: a new group starts when adding the next item would exceed
    ``max_bytes_per_group``.  At most ``max_groups`` groups.  A last group of one item is
    kept only with ``single_group``.  Returns (items, number of output file groups)."""
    def weight(sz: int | None) -> int:
        return target_file_size if sz is None else sz
    ordered = sorted(sizes, key=lambda x: weight(x[1]), reverse=True)
    groups: list[tuple[list[_Item], int]] = []
    current: list[_Item] = []
    total = 0

    def out_groups(n: int) -> int:
        return max(1, math.ceil(n / max(1, target_file_size)))
    for item, sz in ordered:
        w = weight(sz)
        if current and total + w > max_bytes_per_group:
            groups.append((current, out_groups(total)))
            current, total = [], 0
            if len(groups) >= max_groups:
                return groups
        current.append(item)
        total += w
    if current and (len(current) > 1 or single_group) and len(groups) < max_groups:
        groups.append((current, out_groups(total)))
    return groups


def eligible_slices(slices: Iterable[FileSlice], *, small_file_limit: int,
                    in_clustering: set[tuple[str, str]] = frozenset(),  # type: ignore[assignment]
                    in_compaction: set[tuple[str, str]] = frozenset(),  # type: ignore[assignment]
                    ) -> tuple[dict[str, list[tuple[FileSlice, int | None]]], dict[str, int]]:
    """The latest slices a clustering may rewrite, per partition, as (slice, base bytes or
    None without a base file); and how many were left out, by reason.  Left out: file groups
    under a pending clustering or compaction, and slices whose base file is not smaller than
    ``small_file_limit`` (a slice without a base file counts as 0 bytes here)."""
    skipped = {"in pending clustering": 0, "in pending compaction": 0, "not small": 0}
    by_part: dict[str, list[tuple[FileSlice, int | None]]] = {}
    for sl in slices:
        key = (sl.partition, sl.file_id)
        if key in in_clustering:
            skipped["in pending clustering"] += 1
        elif key in in_compaction:
            skipped["in pending compaction"] += 1
        elif (sl.base_size if sl.base_file else 0) >= small_file_limit:
            skipped["not small"] += 1
        else:
            by_part.setdefault(sl.partition, []).append((sl, sl.base_size if sl.base_file else None))
    return by_part, {k: v for k, v in skipped.items() if v}


def plan_clustering(table: "TableContext", *, small_file_limit: int = SMALL_FILE_LIMIT,
                    max_bytes_per_group: int = MAX_BYTES_PER_GROUP, target_file_size: int = TARGET_FILE_SIZE,
                    max_groups: int = MAX_GROUPS, sort_by: str | Iterable[str] | None = None,
                    single_group: bool = False, partitions: Iterable[str] | None = None) -> ClusteringPlan:
    """The file groups a clustering would rewrite now (nothing is written); see the module doc."""
    table = context_of(table)
    from lakesdk.read.view import FileSystemView
    for name, v in (("small_file_limit", small_file_limit), ("max_bytes_per_group", max_bytes_per_group),
                    ("target_file_size", target_file_size), ("max_groups", max_groups)):
        if not isinstance(v, int) or v <= 0:
            raise ValueError(f"{name} must be a positive integer, not {v!r}")
    sort_cols = (sort_by,) if isinstance(sort_by, str) else tuple(sort_by or ())
    if sort_cols:
        names = set(table.schema.names)
        missing = [c for c in sort_cols if c not in names]
        if missing:
            raise MissingColumnError(f"sort_by column(s) {missing} are not in the table {table.name!r} "
                                     f"(columns: {', '.join(sorted(names))})")
    store = table.store
    timeline = store.load()
    view = FileSystemView(table.storage, table.config, store, timeline)
    wanted = set(partitions) if partitions is not None else None
    candidates = [sl for sl in view.latest_slices() if wanted is None or sl.partition in wanted]
    by_part, skipped = eligible_slices(candidates, small_file_limit=small_file_limit,
                                       in_clustering=set(pending_clustering_file_groups(store, timeline)),
                                       in_compaction=_pending_compaction_file_groups(store, timeline))
    groups: list[ClusteringGroup] = []
    for part in sorted(by_part):
        left = max_groups - len(groups)
        if left <= 0:
            break
        for items, n_out in pack_slices(by_part[part], max_bytes_per_group=max_bytes_per_group,
                                        target_file_size=target_file_size, max_groups=left,
                                        single_group=single_group or bool(sort_cols)):
            groups.append(ClusteringGroup(part, tuple(items), n_out))
    return ClusteringPlan(table.name, tuple(groups), sort_cols, small_file_limit, max_bytes_per_group,
                          target_file_size, None, skipped)


def schedule_clustering(table: "TableContext", plan: ClusteringPlan) -> ClusteringPlan:
    """Write the plan as a requested clustering instant (``T.clustering.requested``).

    Under the table lock (with several writers), where the instant is created, the plan's
    file groups must not be under a pending clustering or compaction: another process may
    have scheduled one since this plan was made.  Then nothing is written and
    :class:`~lakesdk.exceptions.ClusteringConflictError` names the file groups taken (plan
    again)."""
    table = context_of(table)
    table.check_writes("clustering")
    if not plan.groups:
        raise LakeError(f"the clustering plan of {table.name!r} is empty: nothing to schedule")
    store = table.store
    data = plan.to_plan_data().to_avro(table.storage.base_url)

    def plan_at(requested: str) -> bytes:
        timeline = store.load()
        busy = pending_clustering_file_groups(store, timeline)
        in_compaction = _pending_compaction_file_groups(store, timeline)
        taken = [fg for fg in plan.file_groups if fg in busy or fg in in_compaction]
        if taken:
            other = busy.get(taken[0]) or "compaction"
            raise ClusteringConflictError(
                f"{len(taken)} file group(s) of the clustering plan of {table.name!r} ({taken[:3]}) are already under "
                f"pending clustering or compaction {other} (scheduled by another process since the plan was made); "
                "nothing was scheduled: plan again (table.maintenance.plan_clustering()), or finish the pending one "
                "with table.maintenance.cluster()", instant=busy.get(taken[0], ""), file_groups=tuple(taken))
        return data
    from lakesdk.concurrency.instants import create_planned_instant
    instant = create_planned_instant(store, table.lock(), "clustering", plan_at)
    assert instant is not None    # plan_at never returns None
    return ClusteringPlan(plan.table, plan.groups, plan.sort_by, plan.small_file_limit, plan.max_bytes_per_group,
                          plan.target_file_size, instant.requested, plan.skipped)


def slices_of(table: "TableContext", data: ClusteringPlanData, *,
               strict: bool = True) -> list[tuple[str, list[FileSlice], int]]:
    """The plan's input slices with their file sizes.  ``strict``: a missing input file is an
    error (the clustering cannot run); otherwise it counts as 0 bytes (for display)."""
    table = context_of(table)
    def size(path: str) -> int:
        try:
            return table.storage.size(path)
        except FileNotFoundError:
            if strict:
                raise LakeError(f"input file {path!r} of the clustering plan is missing from {table.name!r}; roll "
                                "the clustering back (table.maintenance.rollback(<instant>)) and plan again") from None
            return 0
    out = []
    for g in data.groups:
        slices = []
        for s in g.slices:
            prefix = f"{s.partition}/" if s.partition else ""
            base = BaseFile.parse(s.base_file) if s.base_file else None
            logs = tuple(LogFile.parse(n) for n in s.log_files)
            slices.append(FileSlice(s.partition, s.file_id, base.instant if base else (logs[0].instant if logs else ""),
                                    base, size(prefix + s.base_file) if s.base_file else 0, logs,
                                    tuple(size(prefix + lf.name) for lf in logs)))
        part = g.slices[0].partition if g.slices else ""
        out.append((part, slices, g.num_output_groups))
    return out


def clustering_instant(table: "TableContext", timeline: Timeline, instant: str) -> Instant:
    """The clustering ``instant`` of ``timeline`` (pending or completed); InstantNotFoundError
    when the timeline has none at that time."""
    inst = next((i for i in timeline if i.requested == instant and i.action == "clustering"), None)
    if inst is None:
        raise InstantNotFoundError(f"no clustering instant {instant!r} on the timeline of {table.name!r}",
                                   instant=instant)
    return inst


def plan_of_instant(table: "TableContext", instant: str) -> ClusteringPlan:
    """The plan of a scheduled (pending or completed) clustering instant."""
    table = context_of(table)
    store = table.store
    data = store.plan(clustering_instant(table, store.load(), instant), ClusteringPlanData)
    groups = tuple(ClusteringGroup(p, tuple(s), n) for p, s, n in slices_of(table, data, strict=False))
    return ClusteringPlan(table.name, groups, data.sort_columns, instant=instant)


def pending_clusterings(table: "TableContext") -> list[ClusteringPlan]:
    """Plans of the clusterings scheduled but not completed, oldest first (``.instant`` set)."""
    table = context_of(table)
    return [plan_of_instant(table, i.requested) for i in table.timeline.pending if i.action == "clustering"]
