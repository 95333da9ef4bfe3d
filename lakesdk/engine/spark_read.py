"""Executing a read plan (:class:`lakesdk.engine.read.ReadPlan`) as a Spark DataFrame:
Spark's Parquet reader over base files, an Arrow task per merge-on-read file slice."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from lakesdk.engine.read import ReadPlan, slice_context
from lakesdk.format.schema import with_meta_fields

if TYPE_CHECKING:
    from lakesdk.commit.context import TableContext

__all__ = ["read_spark"]


def read_spark(table: "TableContext", spark: Any, plan: ReadPlan, columns: list[str], condition: Any = None) -> Any:
    """A DataFrame of ``columns`` of the rows of ``plan`` that ``condition`` (a Spark
    ``Column``, or None) keeps."""
    from pyspark.sql import functions as F

    from lakesdk.engine.spark import read_files_spark, read_slices_spark
    full = with_meta_fields(plan.schema)
    if plan.merges:
        df = read_slices_spark(spark, slice_context(table, plan), list(plan.slices), full)
    else:
        df = read_files_spark(spark, table.storage, plan.files, full)
    if plan.commit_times is not None:
        df = df.filter(F.col("_hoodie_commit_time").isin(sorted(plan.commit_times)))
    if condition is not None:
        df = df.filter(condition)
    return df.select(*columns)
