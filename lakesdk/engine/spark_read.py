"""Executing a read plan (:class:`lakesdk.format.read_plan.ReadPlan`) as a Spark DataFrame:
Spark's Parquet reader over base files, an Arrow task per merge-on-read file slice."""

from __future__ import annotations

import re
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Callable, Iterator

import pyarrow as pa

from lakesdk.engine.read import slice_context
from lakesdk.engine.session import is_connect
from lakesdk.engine.spark_cluster import session_setting
from lakesdk.format.read_plan import ReadPlan
from lakesdk.format.schema import with_meta_fields

if TYPE_CHECKING:
    from lakesdk.engine.context import EngineContext

__all__ = ["read_spark", "read_files_spark", "read_slices_spark"]


def read_spark(table: "EngineContext", spark: Any, plan: ReadPlan, columns: list[str], condition: Any = None) -> Any:
    """A DataFrame of ``columns`` of the rows of ``plan`` that ``condition`` (a Spark
    ``Column``, or None) keeps."""
    from pyspark.sql import functions as F

    from lakesdk.merge.columns import IS_DELETED

    full = with_meta_fields(plan.schema)
    if plan.merges:
        df = read_slices_spark(spark, slice_context(table, plan), list(plan.slices), full)
    else:
        df = read_files_spark(spark, table.storage, plan.files, full)
    if not plan.merges and IS_DELETED in full.names:   # rows flagged deleted (read_slice drops them)
        df = df.filter(F.col(IS_DELETED).isNull() | ~F.col(IS_DELETED))
    if plan.commit_times is not None:
        df = df.filter(F.col("_hoodie_commit_time").isin(sorted(plan.commit_times)))
    if condition is not None:
        df = df.filter(condition)
    return df.select(*columns)


#: the characters of a Hadoop path pattern (glob)
_GLOB = r"[{}\[\]*?\\]"


def _hadoop_path(local: str) -> str:
    """A local file as a Hadoop path pattern that matches only itself: partition folders may
    hold glob characters (``{ } [ ] * ? \\``), escaped with a backslash."""
    return "file://" + re.sub(f"({_GLOB})", r"\\\1", local)


def _no_hadoop_path(local: str) -> bool:
    """Whether Hadoop cannot read the local file ``local`` by a path pattern: one with a glob
    character is matched a folder at a time, and a folder whose name holds ':' is then taken
    for a URI with a scheme ("Relative path in absolute URI"): a partition value ``':['``."""
    return bool(re.search(_GLOB, local)) and any(":" in part for part in local.split("/"))


#: up to this many local base files are looked up on the driver when a read is planned
DRIVER_LISTING_FILES = 10_000
_DISCOVERY = "spark.sql.sources.parallelPartitionDiscovery.threshold"


@contextmanager
def _listed_on_the_driver(spark: Any, files: int) -> Iterator[None]:
    """Spark looks up more than ``spark.sql.sources.parallelPartitionDiscovery.threshold``
    (32) paths given to a read in a job of its own, one task per path: for the exact local
    files a read names (a Spark bulk insert of 5,000,000 rows writes 78), looking them up on
    the driver is much cheaper.  The setting is raised while the read is planned, then restored."""
    try:
        current = int(spark.conf.get(_DISCOVERY, "32") or 32)
    except Exception:  # noqa: BLE001 - a session that does not say: leave it alone
        current = files
    if files <= current or files > DRIVER_LISTING_FILES:
        yield
        return
    with session_setting(spark, _DISCOVERY, str(files)):
        yield


def read_files_spark(spark: Any, storage: Any, paths: list[str], schema: pa.Schema,
                     reader: Callable[[Any, str, pa.Schema], pa.Table] | None = None) -> Any:
    """DataFrame over base files: Spark's own Parquet reader for local Parquet files, an
    Arrow reader task per file for fsspec-only stores and for formats Spark has no reader
    for here (Lance: :mod:`lakesdk.engine.base_file`)."""
    from pyspark.sql.pandas.types import from_arrow_schema

    from lakesdk.engine.base_file import needs_arrow_task, read_file
    sschema = from_arrow_schema(schema)
    if not paths:
        return spark.createDataFrame([], sschema)
    if storage.protocol == "memory":   # Spark's workers have their own memory file system: read here
        return _on_driver(spark, [read_file(storage, p) for p in paths], schema)
    if storage.is_local and not needs_arrow_task(paths) and not any(_no_hadoop_path(storage.url(p)) for p in paths):
        urls = [_hadoop_path(storage.url(p)) for p in paths]
        with _listed_on_the_driver(spark, len(urls)):
            df = spark.read.schema(sschema).parquet(*urls)
            if is_connect(spark):
                # a Connect DataFrame is analyzed when first asked: here, as a classic session makes
                # it (the files looked up with the setting above, a missing one an error of this call)
                _ = df.schema
            return df
    from lakesdk.engine.slice_reader import conform
    from lakesdk.engine.spark import parallelism
    n = max(1, min(len(paths), parallelism(spark) * 2))
    src = spark.createDataFrame([(p,) for p in paths], "p string").repartition(n)

    def fn(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for b in batches:
            for p in b.column(0).to_pylist():
                yield from conform(read_file(storage, p), schema).to_batches()
    return src.mapInArrow(fn, sschema)


def read_slices_spark(spark: Any, ctx: Any, slices: list[Any], schema: pa.Schema) -> Any:
    """DataFrame of merged merge-on-read file slices: one Arrow task per slice."""
    from pyspark.sql.pandas.types import from_arrow_schema

    from lakesdk.engine.slice_reader import read_slice
    from lakesdk.engine.spark import parallelism
    from lakesdk.engine.spark_types import for_spark_exchange
    sschema = from_arrow_schema(schema)
    if not slices:
        return spark.createDataFrame([], sschema)
    if ctx.storage.protocol == "memory":   # Spark's workers have their own memory file system: read here
        return _on_driver(spark, [read_slice(ctx, sl) for sl in slices], schema)
    n = max(1, min(len(slices), parallelism(spark) * 2))
    src = spark.createDataFrame([(i,) for i in range(len(slices))], "i int").repartition(n)

    out = for_spark_exchange(schema)

    def fn(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for b in batches:
            for i in b.column(0).to_pylist():
                yield from read_slice(ctx, slices[i]).select(schema.names).cast(out).to_batches()
    return src.mapInArrow(fn, sschema)


def _on_driver(spark: Any, parts: list[pa.Table], schema: pa.Schema) -> Any:
    """A DataFrame of tables read on the driver (a ``memory://`` table: each Python process,
    a Spark worker too, has a memory file system of its own, which does not hold the table)."""
    from pyspark.sql.pandas.types import from_arrow_schema

    from lakesdk.engine.slice_reader import conform
    from lakesdk.engine.spark_cluster import arrow_frame
    from lakesdk.engine.spark_types import for_spark_exchange
    data = pa.concat_tables([conform(p, schema).select(schema.names) for p in parts])
    return arrow_frame(spark, data.cast(for_spark_exchange(schema)), from_arrow_schema(schema))
