"""Queries: snapshot, time travel and incremental reads, as immutable builders.

A :class:`Query` holds what to read; planning is :mod:`lakesdk.read.plan`'s (one timeline
load per plan), execution the engine's (:mod:`lakesdk.engine.read` to Arrow,
:mod:`lakesdk.engine.spark_read` to Spark)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Literal, Sequence

import pyarrow as pa

from lakesdk.engine.read import ReadPlan
from lakesdk.format.instant import Instant, to_instant_time
from lakesdk.format.schema import META_FIELDS
from lakesdk.read.bind import Bound
from lakesdk.read.plan import ReadRequest, bind_filter, plan_read
from lakesdk.read.predicate import Predicate, from_filters, parse_where

if TYPE_CHECKING:
    from lakesdk.table.table import Table

__all__ = ["Query", "ReadPlan"]


def _moment(value: Any) -> str | None:
    if value is None:
        return None
    if hasattr(value, "completed") and hasattr(value, "instant") and not isinstance(value, Instant):
        return value.completed or value.instant  # a WriteResult
    return to_instant_time(value)


@dataclass(frozen=True)
class Query:
    """A read of a table.  Chained calls return new queries; nothing runs until
    ``to_arrow()``, ``to_pandas()``, ``to_spark()`` or ``count()``."""

    table: "Table"
    kind: Literal["snapshot", "incremental"] = "snapshot"
    columns: tuple[str, ...] | None = None
    predicate: Predicate | None = None
    as_of_time: str | None = None
    start: str | None = None
    end: str | None = None
    meta: bool = False
    read_optimized: bool = False
    start_inclusive: bool = False

    # -- builders -------------------------------------------------------------------------------
    def select(self, *columns: str) -> "Query":
        cols = tuple(columns[0]) if len(columns) == 1 and isinstance(columns[0], (list, tuple)) else tuple(columns)
        return replace(self, columns=cols)

    def where(self, condition: str | Sequence[tuple[str, str, Any]]) -> "Query":
        p = parse_where(condition) if isinstance(condition, str) else from_filters(condition)
        return replace(self, predicate=p if self.predicate is None else self.predicate & p)

    def as_of(self, moment: Any) -> "Query":
        return replace(self, as_of_time=_moment(moment))

    def with_meta_fields(self, meta: bool = True) -> "Query":
        return replace(self, meta=meta)

    def with_read_optimized(self, read_optimized: bool = True) -> "Query":
        """Merge-on-read tables: read base files only (fast, may lag the latest writes)."""
        return replace(self, read_optimized=read_optimized)

    # -- planning --------------------------------------------------------------------------------
    def _request(self) -> ReadRequest:
        return ReadRequest(self.kind, self.columns, self.predicate, self.as_of_time, self.start, self.end,
                           self.read_optimized, self.start_inclusive)

    def plan(self) -> ReadPlan:
        """What the query will read, against the timeline as it is now (:func:`lakesdk.read.plan.plan_read`)."""
        from functools import partial

        from lakesdk.services.time_travel import check_time_travel
        ctx = self.table.context
        return plan_read(ctx, self._request(), guard=partial(check_time_travel, ctx))

    def _bound(self, schema: pa.Schema, spark: Any = None) -> Bound | None:
        """The filter bound to the table's schema (literals cast to their columns' types, text
        read as timestamps in Spark's session time zone, UTC without a session)."""
        return bind_filter(self.predicate, schema, spark)

    # -- execution --------------------------------------------------------------------------------
    def _out_columns(self, schema: pa.Schema) -> list[str]:
        if self.columns:
            return list(self.columns)
        return (list(META_FIELDS) if self.meta else []) + schema.names

    def to_arrow(self) -> pa.Table:
        """Read into a pyarrow Table (Arrow-native reader on the driver; merge-on-read
        slices are merged by the same merger the writer uses, a thread per slice)."""
        from lakesdk.engine.read import read_arrow
        plan = self.plan()
        bound = self._bound(plan.schema)
        return read_arrow(self.table.context, plan, self._out_columns(plan.schema),
                          bound.to_arrow() if bound is not None else None)

    def to_pandas(self) -> Any:
        """Read into a pandas DataFrame."""
        return self.to_arrow().to_pandas()

    def to_spark(self) -> Any:
        """A Spark DataFrame over the planned files (Spark's Parquet reader for local files)."""
        from lakesdk.engine.spark_read import read_spark
        plan = self.plan()
        spark = self.table.spark
        bound = self._bound(plan.schema, spark)
        return read_spark(self.table.context, spark, plan, self._out_columns(plan.schema),
                          bound.to_spark() if bound is not None else None)

    def count(self) -> int:
        return self.to_arrow().num_rows

    def __repr__(self) -> str:
        parts: list[str] = [self.kind]
        if self.as_of_time:
            parts.append(f"as_of={self.as_of_time}")
        if self.kind == "incremental":
            parts.append(f"range={'[' if self.start_inclusive else '('}{self.start or '-inf'}, {self.end or 'latest'}]")
        if self.columns:
            parts.append(f"columns={list(self.columns)}")
        if self.predicate is not None:
            parts.append(f"where={self.predicate.text!r}")
        return f"<Query {self.table.name!r} {' '.join(parts)}>"
