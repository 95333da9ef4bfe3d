"""A read plan: what a query reads, as the read layer's planner decided it
(:func:`lakesdk.read.plan.plan_read`) and the engine's executors carry it out
(:mod:`lakesdk.engine.read` into Arrow, :mod:`lakesdk.engine.spark_read` into Spark).

The plan carries every decision the planner made: the file slices (partitions pruned, slices
skipped by column and partition statistics), the schema, the instants whose rows and log
blocks count, the output columns, and the row filter bound to the schema once, so that the
executors neither bind it again nor call back into the planner."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import pyarrow as pa
import pyarrow.compute as pc

from lakesdk.format.file_group import FileSlice
from lakesdk.format.instant import Instant

__all__ = ["ReadPlan", "RowFilter"]


class RowFilter(Protocol):
    """A row filter bound to a schema (:class:`lakesdk.read.bind.Bound`): its text, and the
    expressions the executors filter with."""

    text: str

    def to_arrow(self) -> pc.Expression: ...

    def to_spark(self) -> Any: ...


@dataclass(frozen=True, kw_only=True)
class ReadPlan:
    """What a query will read: file slices, the instants it covers, the schema, the output
    columns and the row filter."""

    slices: tuple[FileSlice, ...]
    schema: pa.Schema
    instants: tuple[Instant, ...]          # snapshot: the visible commits; incremental: those in range
    columns: tuple[str, ...] = ()          # the columns the read returns, in order
    row_filter: RowFilter | None = None    # bound to ``schema`` (and the meta fields) once, by the planner
    commit_times: frozenset[str] | None = None   # incremental: requested times whose rows to keep
    pruned_partitions: int = 0
    total_partitions: int = 0
    visible: tuple[Instant, ...] = ()     # commits visible to the read
    log_instants: frozenset[str] | None = None  # requested times whose log blocks apply (default: visible)
    skipped_slices: int = 0               # file slices the MDT's column (or partition) statistics ruled out
    pruned_by_partition_stats: int = 0    # partitions (of those) the MDT's partition statistics ruled out

    @property
    def arrow_filter(self) -> pc.Expression | None:
        """The row filter as a pyarrow expression (None: every row)."""
        return self.row_filter.to_arrow() if self.row_filter is not None else None

    @property
    def files(self) -> list[str]:
        return [s.base_path for s in self.slices if s.base_path]

    @property
    def bytes(self) -> int:
        return sum(s.total_size for s in self.slices)

    @property
    def merges(self) -> bool:
        """True when a file slice has log files to merge (merge-on-read)."""
        return any(s.log_files for s in self.slices)

    def __repr__(self) -> str:
        return (f"<ReadPlan {len(self.slices)} file slices, {self.bytes} bytes, "
                f"{self.total_partitions - self.pruned_partitions}/{self.total_partitions} partitions"
                + (f", {self.skipped_slices} skipped by column statistics" if self.skipped_slices else "")
                + (f" ({self.pruned_by_partition_stats} partitions by partition statistics)"
                   if self.pruned_by_partition_stats else "")
                + (f", where {self.row_filter.text}" if self.row_filter is not None else "") + ">")
