"""Spark's own read API over lakesdk's read path: a Python data source (pyspark 4's
``pyspark.sql.datasource``) named ``lakesdk``.

    spark.read.format("lakesdk").option("as.of.instant", "20250101000000000").load(path)
    spark.readStream.format("lakesdk").load(path)

The pieces Spark calls are here; what they ask of the table (the options read as a query,
its schema, its plan split into parts, the newest instant) is a :class:`SourceBackend`,
which the table layer gives (:mod:`lakesdk.table.spark_source`): the engine does not open
tables.  Planning runs on the driver (in the Python worker Spark starts there); each task
reads one :class:`~lakesdk.engine.read.ScanPart` (a few file slices) with the same Arrow
code a local read uses (:func:`lakesdk.engine.read.read_part`), merge-on-read slices merged
in the task, and yields Arrow record batches.

Filters: with ``option("filterPushdown", "true")`` (and Spark's
``spark.sql.python.filterPushdown.enabled`` on) Spark hands :meth:`LakePushdownReader.pushFilters`
the conjuncts of a query's filter.  Those on columns whose comparison lakesdk evaluates
exactly as Spark does (text, integer, boolean and date columns) become a lakesdk predicate:
it prunes partitions and filters the rows in the task, and Spark does not evaluate them
again; the others go back to Spark.  It is off by default: pyspark 4.3's planner keeps the
read planned for a filtered scan on the relation and reuses it for a later scan of the same
DataFrame that pushes nothing (``df.filter("city = 'sf'").collect()`` then ``df.collect()``
returns the ``sf`` rows only).  ``option("where", ...)`` prunes without that risk.
pyspark's Python data sources have no column-pruning hook: every column of the schema is
read (``option("columns", "a,b")`` narrows the schema itself)."""

from __future__ import annotations

import datetime as _dt
from typing import Any, ClassVar, Iterator, Protocol, Sequence

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    EqualTo,
    Filter,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    InputPartition,
    IsNotNull,
    IsNull,
    LessThan,
    LessThanOrEqual,
    Not,
    StringStartsWith,
)

from lakesdk.engine.read import ScanPart, read_part

__all__ = ["FORMAT", "PUSHDOWN_CONF", "LakeDataSource", "LakeReader", "LakeStreamReader", "SourceBackend",
           "filter_tuple", "register_source"]

#: the name ``spark.read.format(...)`` takes
FORMAT = "lakesdk"
#: Spark calls a Python data source's ``pushFilters`` only with this on (and refuses to read
#: from one that has it when off)
PUSHDOWN_CONF = "spark.sql.python.filterPushdown.enabled"

#: a filter tuple (column, op, value) as :func:`lakesdk.read.predicate.from_filters` takes it
FilterTuple = tuple[str, str, Any]


class SourceBackend(Protocol):
    """What the data source asks of a table (options are the reader's, keys in lower case)."""

    def schema(self, options: dict[str, str]) -> pa.Schema:
        """The rows' schema (the columns a read returns)."""

    def exact(self, options: dict[str, str], filters: Sequence[FilterTuple]) -> list[bool]:
        """For each filter: True when the read applies it exactly as Spark would."""

    def scan(self, options: dict[str, str], filters: Sequence[FilterTuple]) -> list[ScanPart]:
        """The read (with the filters applied) as parts for tasks."""

    def initial(self, options: dict[str, str]) -> str:
        """A stream's first offset (an instant time, or ``"earliest"``)."""

    def latest(self, options: dict[str, str], start: str) -> str:
        """The newest offset a stream can read up to (``start`` when nothing is newer)."""

    def changes(self, options: dict[str, str], start: str, end: str) -> list[ScanPart]:
        """The incremental read of the commits in ``(start, end]`` as parts for tasks."""


def _options(raw: Any) -> dict[str, str]:
    return {str(k).lower(): str(v) for k, v in dict(raw).items()}


def _spark_schema(schema: pa.Schema) -> Any:
    from pyspark.sql.pandas.types import from_arrow_schema
    return from_arrow_schema(schema)


def _target(schema: Any) -> pa.Schema:
    """The Arrow schema Spark expects the batches of ``schema`` (a StructType) in."""
    from pyspark.sql.pandas.types import to_arrow_schema
    return to_arrow_schema(schema, timezone="UTC")


def _batches(parts: Sequence[ScanPart], target: pa.Schema) -> Iterator[pa.RecordBatch]:
    """The rows of ``parts`` as batches of ``target`` (columns by name; a column the plan's
    schema lacks, after a schema change between planning and the schema Spark holds, is null)."""
    from lakesdk.engine.slice_reader import conform
    for part in parts:
        # a part that reads itself (a change query's commit), else a part of a read plan
        reader = part.batches() if hasattr(part, "batches") else read_part(part)
        for batch in reader:
            t = conform(pa.Table.from_batches([batch]), target)
            yield from t.cast(target).to_batches()


class _Parts(InputPartition):
    """One task's parts of a plan (pickled to the task)."""

    def __init__(self, parts: list[ScanPart]) -> None:
        super().__init__(None)
        self.parts = parts

    def __repr__(self) -> str:
        return f"<lakesdk input partition of {sum(len(getattr(p, 'slices', ())) for p in self.parts)} file slices>"


def _partitions(parts: list[ScanPart]) -> list[InputPartition]:
    return [_Parts([p]) for p in parts] or [_Parts([])]


def filter_tuple(f: Filter) -> FilterTuple | None:
    """Spark's pushed filter as a (column, op, value) tuple, None when lakesdk does not take it
    (nested columns, null-safe equality, string suffix and infix tests, values lakesdk does
    not compare with)."""
    def column(attr: tuple[str, ...]) -> str | None:
        return attr[0] if len(attr) == 1 else None

    def plain(v: Any) -> bool:
        return v is None or isinstance(v, (bool, int, float, str, _dt.date))

    ops = {EqualTo: "=", GreaterThan: ">", GreaterThanOrEqual: ">=", LessThan: "<", LessThanOrEqual: "<="}
    if isinstance(f, Not):
        inner = filter_tuple(f.child)
        if inner is None:
            return None
        negated = {"=": "!=", "IN": "NOT IN", "IS": "IS NOT", "IS NOT": "IS", "LIKE": "NOT LIKE"}.get(inner[1])
        return (inner[0], negated, inner[2]) if negated else None
    col = column(getattr(f, "attribute", ()))
    if col is None:
        return None
    for kind, op in ops.items():
        if type(f) is kind:
            value = f.value   # type: ignore[attr-defined]
            return (col, op, value) if value is not None and plain(value) else None
    if isinstance(f, In):
        return (col, "IN", list(f.value)) if all(v is not None and plain(v) for v in f.value) else None
    if isinstance(f, IsNull):
        return (col, "IS", None)
    if isinstance(f, IsNotNull):
        return (col, "IS NOT", None)
    if isinstance(f, StringStartsWith) and not any(c in f.value for c in "%_\\"):
        return (col, "LIKE", f.value + "%")
    return None


class LakeReader(DataSourceReader):
    """A batch read: plans on the driver, reads the parts in tasks."""

    def __init__(self, backend: SourceBackend, options: dict[str, str], schema: Any) -> None:
        self.backend = backend
        self.options = options
        self.target = _target(schema)
        self.filters: list[FilterTuple] = []

    def partitions(self) -> Sequence[InputPartition]:
        return _partitions(self.backend.scan(self.options, self.filters))

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, _Parts)
        yield from _batches(partition.parts, self.target)


class LakePushdownReader(LakeReader):
    """A batch read that takes Spark's filters (:func:`filter_tuple`, :meth:`SourceBackend.exact`)."""

    def pushFilters(self, filters: list[Filter]) -> Iterator[Filter]:
        tuples = [filter_tuple(f) for f in filters]
        candidates = [t for t in tuples if t is not None]
        exact = iter(self.backend.exact(self.options, candidates) if candidates else [])
        for f, t in zip(filters, tuples):
            if t is not None and next(exact):
                self.filters.append(t)
            else:
                yield f


class LakeStreamReader(DataSourceStreamReader):
    """A stream of a table's changes: offsets are ``{"instant": time}`` (completion times on
    table version 8+, requested times on version 6, as incremental queries compare), a
    micro-batch is the incremental read of ``(start, end]``."""

    def __init__(self, backend: SourceBackend, options: dict[str, str], schema: Any) -> None:
        self.backend = backend
        self.options = options
        self.target = _target(schema)

    def initialOffset(self) -> dict:
        return {"instant": self.backend.initial(self.options)}

    def latestOffset(self, start: dict, limit: Any) -> dict:
        return {"instant": self.backend.latest(self.options, start["instant"])}

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        if start["instant"] == end["instant"]:
            return []
        return [_Parts([p]) for p in self.backend.changes(self.options, start["instant"], end["instant"])]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, _Parts)
        yield from _batches(partition.parts, self.target)

    def commit(self, end: dict) -> None:
        pass


class LakeDataSource(DataSource):
    """The ``lakesdk`` data source; a subclass names its :class:`SourceBackend` as ``backend``."""

    backend: ClassVar[Any] = None

    @classmethod
    def name(cls) -> str:
        return FORMAT

    def _backend(self) -> SourceBackend:
        if self.backend is None:
            raise TypeError("LakeDataSource is abstract: register lakesdk's own (lakesdk.spark.register(spark))")
        return self.backend

    def schema(self) -> Any:
        return _spark_schema(self._backend().schema(_options(self.options)))

    def reader(self, schema: Any) -> DataSourceReader:
        opts = _options(self.options)
        pushdown = opts.get("filterpushdown", "false").strip().lower() == "true"
        return (LakePushdownReader if pushdown else LakeReader)(self._backend(), opts, schema)

    def streamReader(self, schema: Any) -> DataSourceStreamReader:
        return LakeStreamReader(self._backend(), _options(self.options), schema)


def register_source(spark: Any, source: type[LakeDataSource]) -> None:
    """Register ``source`` with ``spark`` (classic or Spark Connect).  The session's settings
    are left as they are: a read with ``option("filterPushdown", "true")`` needs
    :data:`PUSHDOWN_CONF` on."""
    spark.dataSource.register(source)
