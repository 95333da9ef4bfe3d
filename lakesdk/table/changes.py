"""Change queries (:meth:`Table.changes`): what each commit of a range did to each record,
as an immutable builder like :class:`lakesdk.table.query.Query`.  Planning and reading are
:mod:`lakesdk.read.changes`'s."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Iterator, Sequence, cast

import pyarrow as pa

from lakesdk.format.cdc import changes_schema
from lakesdk.read.changes import ChangePlan, iter_changes, plan_changes
from lakesdk.read.predicate import Predicate, from_filters, parse_where

if TYPE_CHECKING:
    import pandas as pd
    import polars as pl

    from lakesdk.commit.context import TableHandle
    from lakesdk.engine.spark_types import DataFrame as SparkDataFrame

__all__ = ["ChangeQuery", "OPS"]

#: the change operations, as Hudi's ``HoodieCDCOperation`` writes them
OPS = ("i", "u", "d")


@dataclass(frozen=True)
class ChangeQuery:
    """The changes of the commits in ``(start, end]``: rows of ``op`` (``"i"`` insert, ``"u"``
    update, ``"d"`` delete), ``ts_ms`` (the commit's instant time, as Hudi's CDC queries name
    it), ``before`` and ``after`` (the record's data columns as structs; null for an insert's
    ``before`` and a delete's ``after``), in commit order and by record key within a commit.
    Nothing runs until ``to_arrow()``, ``to_pandas()``, ``to_polars()``, ``to_batches()``,
    ``to_spark()`` or ``count()``."""

    table: "TableHandle"
    start: str | None = None
    end: str | None = None
    start_inclusive: bool = False
    ops: tuple[str, ...] = OPS
    row_limit: int | None = None
    predicate: Predicate | None = None

    # -- builders -------------------------------------------------------------------------------
    def limit(self, n: int | None) -> "ChangeQuery":
        """At most ``n`` rows (``None``: all): reading stops at the commit that reaches them."""
        if n is not None and (isinstance(n, bool) or not isinstance(n, int) or n < 0):
            raise ValueError(f"limit must be a whole number >= 0 (or None for all rows), found {n!r}")
        return replace(self, row_limit=n)

    def where(self, condition: str | Sequence[tuple[str, str, Any]]) -> "ChangeQuery":
        """Only the changes whose record matches ``condition`` (a filter as :meth:`Table.read`
        takes it: Spark SQL text or ``[(column, op, value), ...]``), the record after the change
        for an insert or an update, before it for a delete."""
        p = parse_where(condition) if isinstance(condition, str) else from_filters(condition)
        return replace(self, predicate=p if self.predicate is None else self.predicate & p)

    def only(self, *ops: str) -> "ChangeQuery":
        """Only the changes of these operations (``"i"``, ``"u"``, ``"d"``)."""
        bad = [o for o in ops if o not in OPS]
        if bad or not ops:
            raise ValueError(f"change operations are 'i', 'u' and 'd', found {list(ops)!r}")
        return replace(self, ops=tuple(o for o in OPS if o in ops))

    # -- planning and execution -------------------------------------------------------------------
    def plan(self) -> ChangePlan:
        """The commits the query reads and the file groups each touched, against the timeline now."""
        return plan_changes(self.table.context, self.start, self.end, start_inclusive=self.start_inclusive)

    def to_batches(self) -> pa.RecordBatchReader:
        """A stream of the changes, a batch per commit (read as it is consumed)."""
        plan = self.plan()
        schema = changes_schema(plan.schema)
        return pa.RecordBatchReader.from_batches(schema, self._batches(plan))

    def _batches(self, plan: ChangePlan) -> Iterator[pa.RecordBatch]:
        import pyarrow.compute as pc
        left = self.row_limit
        bound = None
        if self.predicate is not None:
            from lakesdk.read.plan import bind_filter
            bound = bind_filter(self.predicate, plan.schema)
        for batch in iter_changes(self.table.context, plan):
            if self.ops != OPS:
                batch = batch.filter(pc.is_in(batch.column("op"), value_set=pa.array(self.ops)))
            if bound is not None and batch.num_rows:
                after, before = batch.column("after"), batch.column("before")
                image = pc.if_else(after.is_valid(), after, before)
                batch = batch.take(_kept(pa.Table.from_struct_array(image), bound.to_arrow()))
            if left is not None:
                if left <= 0:
                    return
                batch = batch.slice(0, left)
                left -= batch.num_rows
            if batch.num_rows:
                yield batch

    def __arrow_c_stream__(self, requested_schema: Any = None) -> Any:
        """The Arrow PyCapsule stream protocol (:meth:`to_batches`)."""
        return self.to_batches().__arrow_c_stream__(requested_schema)

    def to_arrow(self, *, flatten: bool = False) -> pa.Table:
        """The changes as a pyarrow Table; ``flatten=True`` gives a column per image field
        (``before.id``, ``after.id``, ...) instead of the two structs."""
        t = self.to_batches().read_all()
        return t.flatten() if flatten else t

    def to_pandas(self, *, flatten: bool = False) -> pd.DataFrame:
        """The changes as a pandas DataFrame (images as dicts, or flattened columns)."""
        return self.to_arrow(flatten=flatten).to_pandas()

    def to_polars(self, *, flatten: bool = False) -> pl.DataFrame:
        """The changes as a polars DataFrame (``pip install 'lakesdk[polars]'``)."""
        try:
            import polars as pl
        except ImportError:
            from lakesdk.exceptions import MissingDependencyError
            raise MissingDependencyError("polars", "polars", "ChangeQuery.to_polars()") from None
        return cast("pl.DataFrame", pl.from_arrow(self.to_arrow(flatten=flatten)))

    def to_spark(self, *, flatten: bool = False) -> SparkDataFrame:
        """The changes as a Spark DataFrame (read on the driver, then given to Spark)."""
        spark = self.table.spark
        return spark.createDataFrame(self.to_arrow(flatten=flatten))

    def count(self) -> int:
        """The number of changes."""
        return sum(b.num_rows for b in self._batches(self.plan()))

    def __repr__(self) -> str:
        rng = f"({self.start or 'earliest'}, {self.end or 'latest'}]"
        if self.start_inclusive:
            rng = "[" + rng[1:]
        ops = "" if self.ops == OPS else f", only {','.join(self.ops)}"
        lim = "" if self.row_limit is None else f", limit {self.row_limit}"
        return f"<ChangeQuery {self.table.name} {rng}{ops}{lim}>"


def _kept(records: pa.Table, expr: Any) -> pa.Array:
    """The positions of the rows of ``records`` that ``expr`` keeps, in order."""
    rows = pa.array(range(records.num_rows), pa.int64())
    return records.append_column("__row", rows).filter(expr).column("__row").combine_chunks()
