"""Spark's own read API for lakesdk tables: ``lk.spark.register(spark)`` makes the
``lakesdk`` format known to a session, then

    spark.read.format("lakesdk").load(path)                                  # snapshot
    spark.read.format("lakesdk").option("as.of.instant", t0).load(path)      # time travel
    (spark.read.format("lakesdk").option("hoodie.datasource.query.type", "incremental")
         .option("hoodie.datasource.read.begin.instanttime", t0).load(path))  # changes after t0
    spark.readStream.format("lakesdk").load(path)                            # a stream of changes

return the rows ``t.read().to_spark()`` (``t.as_of(t0)``, ``t.incremental(t0)``) returns.
A session lakesdk starts or is given is registered on first use; ``register`` is for a
session lakesdk has not seen.  The options: :mod:`lakesdk.table.spark_source`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from lakesdk.engine.spark_types import SparkSession

__all__ = ["FORMAT", "register"]

FORMAT = "lakesdk"


def register(spark: Any = None) -> SparkSession:
    """Register the ``lakesdk`` format with ``spark`` (default: the session lakesdk would
    use, :func:`lakesdk.get_spark`); idempotent.  Returns the session."""
    from lakesdk.engine.session import get_spark
    from lakesdk.table.spark_source import register as _register
    return _register(get_spark(spark))
