"""Queries: snapshot, time travel and incremental reads, as immutable builders.

A :class:`Query` holds what to read; planning is :mod:`lakesdk.read.plan`'s (one timeline
load per plan, the filter bound once: the plan carries it and the output columns), execution
the engine's (:mod:`lakesdk.engine.read` to Arrow,
:mod:`lakesdk.engine.spark_read` to Spark)."""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Iterator, Literal, Sequence, cast

import pyarrow as pa

from lakesdk.commit.results import moment_time
from lakesdk.format.read_plan import ReadPlan
from lakesdk.read.plan import ReadRequest, plan_read
from lakesdk.read.predicate import Predicate, from_filters, parse_where

if TYPE_CHECKING:
    import pandas as pd
    import polars as pl

    from lakesdk.commit.context import TableHandle
    from lakesdk.engine.spark_types import DataFrame as SparkDataFrame

__all__ = ["Query"]


@dataclass(frozen=True)
class Query:
    """A read of a table.  Chained calls return new queries; nothing runs until
    ``to_arrow()``, ``to_pandas()``, ``to_polars()``, ``to_batches()``, ``to_spark()`` or
    ``count()``.  A query is an Arrow stream (``__arrow_c_stream__``): ``pa.table(q)``,
    ``pl.DataFrame(q)`` and other Arrow stream consumers read it batch by batch."""

    table: "TableHandle"
    kind: Literal["snapshot", "incremental"] = "snapshot"
    columns: tuple[str, ...] | None = None
    predicate: Predicate | None = None
    as_of_time: str | None = None
    start: str | None = None
    end: str | None = None
    meta: bool = False
    read_optimized: bool = False
    start_inclusive: bool = False
    row_limit: int | None = None

    # -- builders -------------------------------------------------------------------------------
    def select(self, *columns: str) -> "Query":
        cols = tuple(columns[0]) if len(columns) == 1 and isinstance(columns[0], (list, tuple)) else tuple(columns)
        return replace(self, columns=cols)

    def where(self, condition: str | Sequence[tuple[str, str, Any]]) -> "Query":
        p = parse_where(condition) if isinstance(condition, str) else from_filters(condition)
        return replace(self, predicate=p if self.predicate is None else self.predicate & p)

    def limit(self, n: int | None) -> "Query":
        """At most ``n`` rows (``None``: all): reading stops once they are found (copy-on-write:
        no further base files are read; merge-on-read: no further file slices are merged).
        With a filter, the rows are ``n`` of the matching ones; which ones is unspecified."""
        if n is not None and (isinstance(n, bool) or not isinstance(n, int) or n < 0):
            raise ValueError(f"limit must be a whole number >= 0 (or None for all rows), found {n!r}")
        return replace(self, row_limit=n)

    def as_of(self, moment: Any) -> "Query":
        return replace(self, as_of_time=moment_time(moment))

    def with_meta_fields(self, meta: bool = True) -> "Query":
        return replace(self, meta=meta)

    def with_read_optimized(self, read_optimized: bool = True) -> "Query":
        """Merge-on-read tables: read base files only (fast, may lag the latest writes)."""
        return replace(self, read_optimized=read_optimized)

    # -- planning --------------------------------------------------------------------------------
    def _request(self, time_zone: str | None = None) -> ReadRequest:
        return ReadRequest(kind=self.kind, columns=self.columns, predicate=self.predicate, as_of=self.as_of_time,
                           start=self.start, end=self.end, read_optimized=self.read_optimized,
                           start_inclusive=self.start_inclusive, meta=self.meta, time_zone=time_zone)

    def plan(self, *, time_zone: str | None = None) -> ReadPlan:
        """What the query will read, against the timeline as it is now
        (:func:`lakesdk.read.plan.plan_read`): the file slices, the schema, the output columns
        and the filter bound to the schema (timestamps written as text read in ``time_zone``;
        None: Spark's active session's, else UTC)."""
        return plan_read(self.table.context, self._request(time_zone))

    # -- execution --------------------------------------------------------------------------------
    def to_arrow(self) -> pa.Table:
        """Read into a pyarrow Table (Arrow-native reader on the driver; merge-on-read
        slices are merged by the same merger the writer uses, a thread per slice)."""
        from lakesdk.engine.read import read_arrow
        plan = self.plan()
        with self._typed_failures(plan):
            return read_arrow(self.table.context, plan, list(plan.columns), plan.scan_filter, limit=self.row_limit)

    @contextmanager
    def _typed_failures(self, plan: ReadPlan) -> Iterator[None]:
        """A file the read found missing or damaged: the typed error a listing tells
        (:func:`lakesdk.read.plan.diagnose_failed_read`), else the error as it was."""
        from lakesdk.exceptions import CorruptFileError
        from lakesdk.read.plan import diagnose_failed_read
        try:
            yield
        except (FileNotFoundError, CorruptFileError):
            diagnose_failed_read(self.table.context, plan, self._request().as_of)
            raise
        except Exception as err:
            if "PATH_NOT_FOUND" not in str(err):      # Spark's error for a path a read names
                raise
            diagnose_failed_read(self.table.context, plan, self._request().as_of)
            raise

    def to_batches(self) -> pa.RecordBatchReader:
        """A stream of the rows as a ``pyarrow.RecordBatchReader``: planned now, read as it is
        consumed, file by file (copy-on-write) or file slice by file slice (merge-on-read,
        a few slices merged ahead), so memory stays bounded by a few files, not the table.
        The limit, if any, stops the reading."""
        from lakesdk.engine.read import iter_arrow, output_schema
        plan = self.plan()
        cols = list(plan.columns)
        batches = iter_arrow(self.table.context, plan, cols, plan.scan_filter, limit=self.row_limit)

        def typed() -> Iterator[pa.RecordBatch]:
            with self._typed_failures(plan):
                yield from batches
        return pa.RecordBatchReader.from_batches(output_schema(plan, cols), typed())

    def __arrow_c_stream__(self, requested_schema: Any = None) -> Any:
        """The Arrow PyCapsule stream protocol: ``pa.table(q)``, ``pa.RecordBatchReader.from_stream(q)``,
        ``pl.DataFrame(q)`` read the query as a stream (:meth:`to_batches`)."""
        return self.to_batches().__arrow_c_stream__(requested_schema)

    def to_pandas(self) -> pd.DataFrame:
        """Read into a pandas DataFrame."""
        return self.to_arrow().to_pandas()

    def to_polars(self) -> pl.DataFrame:
        """Read into a polars DataFrame (``pip install 'lakesdk[polars]'``)."""
        try:
            import polars as pl
        except ImportError:
            from lakesdk.exceptions import MissingDependencyError
            raise MissingDependencyError("polars", "polars", "Query.to_polars()") from None
        return cast("pl.DataFrame", pl.from_arrow(self.to_arrow()))   # a DataFrame, from a pa.Table

    def to_spark(self) -> SparkDataFrame:
        """A Spark DataFrame over the planned files (Spark's Parquet reader for local files)."""
        from lakesdk.engine.spark_read import read_spark
        from lakesdk.read.bind import session_time_zone
        spark = self.table.spark
        plan = self.plan(time_zone=session_time_zone(spark))
        with self._typed_failures(plan):
            df = read_spark(self.table.context, spark, plan, list(plan.columns),
                            plan.row_filter.to_spark() if plan.row_filter is not None else None)
        return df.limit(self.row_limit) if self.row_limit is not None else df

    def count(self) -> int:
        """The number of rows the query returns.  Answered from metadata where it answers
        exactly, without reading data: a snapshot whose file slices have no log files to merge
        (copy-on-write, merge-on-read after compaction, read-optimized), unfiltered or
        filtered on partition columns alone that each kept partition decides, is the sum of
        the row counts in its base files' footers (Parquet) or metadata (Lance).  Otherwise
        (log files to merge, row filters, incremental reads) the rows are read, one column of
        them."""
        from lakesdk.engine.read import count_rows, read_arrow
        from lakesdk.read.plan import decided_by_partitions
        plan = self.plan()
        ctx = self.table.context
        exact = self.predicate is None or decided_by_partitions(ctx, self._request(), plan)
        with self._typed_failures(plan):
            n = count_rows(ctx, plan) if exact else None
            if n is None:
                cols = plan.schema.names[:1] or ["_hoodie_record_key"]
                n = read_arrow(ctx, plan, cols, plan.scan_filter, limit=self.row_limit).num_rows
        return n if self.row_limit is None else min(n, self.row_limit)

    def _repr_html_(self) -> str:
        """The query in a notebook: what it reads, its columns and its first rows
        (:mod:`lakesdk.table.preview`)."""
        from lakesdk.table.preview import query_html
        return query_html(self)

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
        if self.row_limit is not None:
            parts.append(f"limit={self.row_limit}")
        return f"<Query {self.table.name!r} {' '.join(parts)}>"
