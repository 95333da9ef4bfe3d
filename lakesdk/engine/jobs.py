"""The engine seam of writes: the :class:`WriteJob` protocol both engines implement
(:class:`~lakesdk.engine.local.LocalWriteJob` over an Arrow table on the driver,
:class:`~lakesdk.engine.spark.SparkWriteJob` as Spark jobs), and :func:`write_job`, the one
place that picks and constructs the job of a write."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import pyarrow as pa

from lakesdk.format.commit_metadata import WriteStat
from lakesdk.merge.ordering import OP_DELETE, OP_UPSERT, MergeCounts

if TYPE_CHECKING:
    from lakesdk.engine.context import EngineContext
    from lakesdk.engine.tasks import WriteContext

__all__ = ["WriteJob", "write_job"]

D = TypeVar("D")


class WriteJob(Protocol[D]):
    """One write of one instant, over data of type ``D`` (a pyarrow Table, a Spark
    DataFrame) carrying the key columns.  The write path (:mod:`lakesdk.table.write`) calls
    these steps in order: tag against the key index (or mark all untagged), assign inserts to
    file groups, write them."""

    #: a global key index of the incoming keys reads the file slices this returns for
    #: (slices, keys): those the table's record index names (None: all of them)
    record_index: Any
    key_ranges: Any

    def partitions(self, data: D, /) -> list[str]:
        """The partition paths of the incoming records."""
        ...

    def key_index(self, slices: list[Any], slice_ctx: Any = None, data: D | None = None, /, *,
                  global_keys: bool = False) -> Any:
        """(key, partition, file id) of the stored records of ``slices``: of the keys of
        ``data`` only when it is given (``global_keys``: in any partition)."""
        ...

    def tag(self, data: D, index: Any, /, *, global_keys: bool = False) -> D:
        """The records with the file id of the stored record of the same key (null: new)."""
        ...

    def tag_global(self, data: D, index: Any, /) -> D:
        """Global index: the records to write, tagged, with moved keys' deletes in their old
        file groups (:func:`~lakesdk.engine.global_index.route_moves`)."""
        ...

    def untagged(self, data: D, /) -> D:
        ...

    def drop_untagged_deletes(self, data: D, /) -> D:
        ...

    def only_tagged(self, data: D, /) -> D:
        ...

    def untagged_counts(self, data: D, /) -> dict[str, int]:
        ...

    def tagged_file_ids(self, data: D, fids: set[str], /) -> set[str]:
        ...

    def assign_inserts(self, data: D, buckets: dict[str, list[tuple[str, float]]], /) -> D:
        ...

    def write_groups(self, data: D, /) -> tuple[list[WriteStat], MergeCounts]:
        ...

    def write_new(self, data: D, /) -> list[WriteStat]:
        ...

    def release(self, data: D, /) -> None:
        ...


def write_job(table: "EngineContext", ctx: "WriteContext", arrow: pa.Table | None, sdf: Any, *, deletes: bool = False,
              global_keys: bool = False, combine: bool = False) -> tuple[WriteJob[Any], Any]:
    """The job of a write and its prepared data (the one chooser of the engine of a write).

    Driver-side data (``arrow``) is written locally when the table's engine is ``local``
    (:meth:`TableContext.engine`); otherwise, and for a Spark DataFrame (``sdf``), as Spark
    jobs.  ``deletes``: the records are deletes; ``global_keys``: deletes by key alone;
    ``combine``: a Spark DataFrame's records of one key are combined first (driver-side data
    is combined by the caller); a Spark DataFrame neither combined nor deleted (a bulk
    insert) is returned as given: ``write_new`` computes its keys in the tasks that write it."""
    if arrow is not None and table.engine() == "local":
        from lakesdk.engine.local import LocalWriteJob
        local = LocalWriteJob(ctx, progress=table.options.progress)
        return local, local.prepare(arrow)
    from lakesdk.engine.spark import SparkWriteJob
    job = SparkWriteJob(table.spark, ctx)
    if arrow is None and not deletes and not combine:   # a bulk insert: keys made where its files are written
        return job, sdf
    data = job.prepare(arrow, sdf, OP_DELETE if deletes else OP_UPSERT, global_keys=global_keys)
    if arrow is None and deletes:
        data = job.combine_deletes(data)
    elif arrow is None and combine:
        data = job.combine_by_key(data) if ctx.global_index else job.combine(data)
    return job, data


if TYPE_CHECKING:   # mypy checks both engines against the protocol
    from lakesdk.engine.local import LocalWriteJob as _Local
    from lakesdk.engine.spark import SparkWriteJob as _Spark

    def _local(job: _Local) -> WriteJob[pa.Table]:
        return job

    def _spark(job: _Spark) -> WriteJob[Any]:
        return job
