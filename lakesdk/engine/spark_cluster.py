"""What lakesdk asks of a Spark session's cluster, classic or Spark Connect: its parallelism,
from it the number of partitions of a write's shuffles, how to send each file group's
records to a task of its own, and how rows held on the driver become a DataFrame."""

from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import Any, Iterator

__all__ = ["parallelism", "shuffle_partitions", "by_task", "arrow_frame", "LOCAL_RELATION_ROWS", "session_setting"]

#: driver-side rows up to which :func:`arrow_frame` gives Spark a local relation
LOCAL_RELATION_ROWS = 20_000
_ARROW_LOCAL_RELATION = "spark.sql.execution.arrow.localRelationThreshold"
_SETTINGS = threading.RLock()   # one change of a session setting at a time (session_setting)

_CONNECT_PARALLELISM: dict[str, int] = {}   # by Spark Connect session id
_SLOTS: dict[int, list[int]] = {}   # by partition count: a value that hashes to each partition


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


def by_task(spark: Any, df: Any, column: str, values: list[str]) -> Any:
    """``df`` repartitioned so that the rows of each of ``values`` (of ``column``: file ids)
    go to a task of their own, dealt in turn when there are more than twice the cores: one
    shuffle into ``min(len(values), 2 * cores)`` partitions.  Hashing the values themselves
    would put two file groups in one task as often as not (two groups into four partitions
    share one a quarter of the time, and that task then rewrites both while a core idles).
    Each value is mapped to a number that Spark's hash partitioning sends to the partition
    chosen for it; a value not listed goes where its number's hash (null's) sends it."""
    from pyspark.sql import functions as F
    n = max(1, min(len(values), 2 * parallelism(spark)))
    slots = _slots(spark, n)
    pairs = [x for i, v in enumerate(sorted(values)) for x in (F.lit(v), F.lit(slots[i % n]).cast("long"))]
    slot = F.create_map(*pairs)[F.col(column)] if pairs else F.lit(None).cast("long")
    return df.repartition(n, slot.alias("_lk_slot"))


def _slots(spark: Any, n: int) -> list[int]:
    """For each of ``n`` partitions, a long that Spark's hash partitioning into ``n`` sends
    there (``pmod(hash(v), n)``, as ``repartition`` computes it): found once per count by a
    small query, remembered."""
    if n not in _SLOTS:
        from pyspark.sql import functions as F
        rows = (spark.range(0, 64 * n).select(F.col("id"), F.pmod(F.hash(F.col("id")), F.lit(n)).alias("p"))
                .groupBy("p").agg(F.min("id").alias("v")).collect())
        found = {int(r["p"]): int(r["v"]) for r in rows}
        if len(found) < n:   # not seen in 64n draws: cannot happen in practice
            raise RuntimeError(f"no value hashes to every one of {n} partitions")
        _SLOTS[n] = [found[p] for p in range(n)]
    return _SLOTS[n]


def arrow_frame(spark: Any, table: Any, schema: Any = None, *, exchange_types: bool = False) -> Any:
    """A DataFrame of the Arrow ``table`` held on the driver (``schema``: its Spark schema,
    else Arrow's).

    Spark makes one of up to ``spark.sql.execution.arrow.localRelationThreshold`` (48 MB) a
    local relation: its rows are part of the plan, and the optimizer walks them at every
    rule of every query over it (500,000 index rows cost an upsert of 5M rows four seconds
    of planning, longer than writing its files).  Beyond ``LOCAL_RELATION_ROWS`` rows a
    classic session gets the rows as an RDD of Arrow batches instead (the setting is lowered
    for the call, then restored), in at most one partition per core.  Spark Connect makes
    every ``createDataFrame`` a local relation: there, with ``exchange_types`` (the table's
    Arrow types are those Spark exchanges with Python for ``schema``, as ``mapInArrow``
    returns them), the rows go as a few Arrow IPC streams, one row each, that a task per
    core reads back; other rows stay a local relation."""
    from lakesdk.engine.session import is_connect
    if table.num_rows <= LOCAL_RELATION_ROWS:
        return spark.createDataFrame(table, schema)
    if is_connect(spark):
        if not exchange_types or schema is None:
            return spark.createDataFrame(table, schema)
        return _from_ipc_streams(spark, table, schema)
    with session_setting(spark, _ARROW_LOCAL_RELATION, "0"):
        df = spark.createDataFrame(table, schema)
    return df.coalesce(parallelism(spark))


@contextmanager
def session_setting(spark: Any, key: str, value: str) -> Iterator[None]:
    """``spark``'s SQL setting ``key`` set to ``value`` for the block, then restored (also when
    the block fails).  One such block runs at a time in this process, so that two threads
    changing a setting cannot leave it changed: the second would restore the first's value."""
    with _SETTINGS:
        old = spark.conf.get(key)
        spark.conf.set(key, value)
        try:
            yield
        finally:
            spark.conf.set(key, old)


def _from_ipc_streams(spark: Any, table: Any, schema: Any) -> Any:
    """``table`` as one Arrow IPC stream per core, each a row of a small local relation,
    read back into rows in the tasks (:func:`_read_streams`)."""
    import pyarrow as pa
    pieces = max(1, min(parallelism(spark), table.num_rows))
    step = -(-table.num_rows // pieces)
    blobs = []
    for start in range(0, table.num_rows, step):
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, table.schema) as w:
            w.write_table(table.slice(start, step))
        blobs.append((sink.getvalue().to_pybytes(),))
    return spark.createDataFrame(blobs, "_lk_ipc binary").mapInArrow(_read_streams, schema)


def _read_streams(batches: Any) -> Any:
    """The record batches of the Arrow IPC streams in the one column of ``batches``."""
    import pyarrow as pa
    for b in batches:
        for blob in b.column(0).to_pylist():
            yield from pa.ipc.open_stream(blob).read_all().to_batches()
