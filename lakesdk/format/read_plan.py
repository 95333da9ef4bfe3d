"""A read plan: what a query reads, as the read layer's planner decided it
(:func:`lakesdk.read.plan.plan_read`) and the engine's executors carry it out
(:mod:`lakesdk.engine.read` into Arrow, :mod:`lakesdk.engine.spark_read` into Spark).

The plan carries every decision the planner made: the file slices (partitions pruned, slices
skipped by column and partition statistics), the schema, the instants whose rows and log
blocks count, the output columns, and the row filter bound to the schema once, so that the
executors neither bind it again nor call back into the planner."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Protocol

import pyarrow as pa
import pyarrow.compute as pc

from lakesdk.format.file_group import FileSlice
from lakesdk.format.instant import Instant

__all__ = ["ReadPlan", "RowFilter", "ScanFilter"]


@dataclass(frozen=True)
class ScanFilter:
    """A row filter as a scan of base files applies it: the exact filter, the columns it reads
    and what of it a scan may push into Arrow's Parquet scanner, which prunes row groups by
    their statistics before it filters the rows.

    ``exact``: ``expr`` itself may be pushed.  Otherwise the scan reads the columns it returns
    and ``columns``, pushes ``prune`` (None: nothing), a filter that keeps every row ``expr``
    keeps and that no wrong statistics make Arrow prune wrongly, and filters with ``expr``
    after reading.  Parquet writers leave NaN out of a floating-point column chunk's bounds,
    so a filter reading such a column as Spark SQL compares it (NaN above every number) is not
    exact (:meth:`lakesdk.read.bind.Bound.scan_filter`)."""

    expr: pc.Expression                 # the rows kept
    columns: frozenset[str]             # the top-level columns ``expr`` reads
    prune: pc.Expression | None         # pushed into the scanner: ``expr`` when exact, a weaker filter or None
    exact: bool

    @classmethod
    def of(cls, expr: pc.Expression, columns: Iterable[str]) -> "ScanFilter":
        """An exact filter: ``expr``, which no statistics of ``columns`` make Arrow prune wrongly."""
        return cls(expr, frozenset(columns), expr, True)

    def __and__(self, other: "ScanFilter") -> "ScanFilter":
        """The rows both keep (each pushed part kept: a row both keep passes both)."""
        prune = other.prune if self.prune is None else self.prune if other.prune is None else self.prune & other.prune
        return ScanFilter(self.expr & other.expr, self.columns | other.columns, prune, self.exact and other.exact)

    def read_columns(self, columns: list[str] | None) -> list[str] | None:
        """The columns a scan returning ``columns`` (None: all) reads: the filter's too when it
        filters after reading."""
        if columns is None or self.exact:
            return columns
        return [*columns, *sorted(self.columns.difference(columns))]


class RowFilter(Protocol):
    """A row filter bound to a schema (:class:`lakesdk.read.bind.Bound`): its text, and the
    expressions the executors filter with."""

    text: str

    def to_arrow(self) -> pc.Expression: ...

    def to_spark(self) -> Any: ...

    def scan_filter(self) -> ScanFilter: ...


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
    def scan_filter(self) -> ScanFilter | None:
        """The row filter as a scan of base files applies it (None: every row)."""
        return self.row_filter.scan_filter() if self.row_filter is not None else None

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
