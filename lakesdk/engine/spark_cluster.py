"""What lakesdk asks of a Spark session's cluster, classic or Spark Connect: its parallelism,
and from it the number of partitions of a write's shuffles."""

from __future__ import annotations

from typing import Any

__all__ = ["parallelism", "shuffle_partitions"]

_CONNECT_PARALLELISM: dict[str, int] = {}   # by Spark Connect session id


def parallelism(spark: Any) -> int:
    """The default parallelism of ``spark``'s cluster (its cores): the SparkContext's of a
    classic session; under Spark Connect, which has no SparkContext, the session's
    ``spark.default.parallelism`` when set, else the number of partitions Spark gives a
    range (one small job per session, remembered)."""
    from lakesdk.engine.session import is_connect
    if not is_connect(spark):
        return int(spark.sparkContext.defaultParallelism)
    sid = str(getattr(spark, "session_id", ""))
    if sid not in _CONNECT_PARALLELISM:
        _CONNECT_PARALLELISM[sid] = _connect_parallelism(spark)
    return _CONNECT_PARALLELISM[sid]


def _connect_parallelism(spark: Any) -> int:
    from pyspark.sql import functions as F
    try:   # a default given here: a setting the session lacks is no error on the server
        set_ = spark.conf.get("spark.default.parallelism", None)
        if set_:
            return max(1, int(set_))
    except Exception:  # noqa: BLE001 - a server that does not say: count below
        pass
    # a range without a partition count gets the cluster's default parallelism
    last = spark.range(0, 1 << 16).select(F.spark_partition_id().alias("p")).agg(F.max("p")).first()[0]
    return max(1, int(last) + 1) if last is not None else 1


def shuffle_partitions(spark: Any) -> int:
    """The partitions of a write's shuffles by key: two per core of the cluster.  Set on
    each shuffle (``repartition(n, ...)``), not taken from ``spark.sql.shuffle.partitions``:
    a session lakesdk did not start has Spark's default of 200, and a DataFrame the write
    persists keeps its partitions (adaptive execution does not coalesce a cached plan)."""
    return 2 * parallelism(spark)
