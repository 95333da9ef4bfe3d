"""Executing a read plan: what a query reads (:class:`ReadPlan`, built by
:mod:`lakesdk.read.plan`) into a pyarrow Table on the driver.  The Spark executor is
:mod:`lakesdk.engine.spark_read`.

The plan is the contract between the read layer's planner and the engine's executors, so it
is defined here, where both can import it (the read layer sits above the engine)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterator

import pyarrow as pa
import pyarrow.compute as pc

from lakesdk.format.file_group import FileSlice
from lakesdk.format.instant import Instant
from lakesdk.format.schema import with_meta_fields

if TYPE_CHECKING:
    from lakesdk.commit.context import TableContext
    from lakesdk.engine.slice_reader import SliceReadContext

__all__ = ["ReadPlan", "count_rows", "iter_arrow", "read_arrow", "slice_context"]


@dataclass(frozen=True)
class ReadPlan:
    """What a query will read: file slices, the instants it covers, and the schema."""

    slices: tuple[FileSlice, ...]
    schema: pa.Schema
    instants: tuple[Instant, ...]        # snapshot: the visible commits; incremental: those in range
    commit_times: frozenset[str] | None   # incremental: requested times whose rows to keep
    pruned_partitions: int
    total_partitions: int
    visible: tuple[Instant, ...] = ()     # commits visible to the read
    log_instants: frozenset[str] | None = None  # requested times whose log blocks apply (default: visible)

    @property
    def files(self) -> list[str]:
        return [s.base_path for s in self.slices if s.base_path]

    @property
    def bytes(self) -> int:
        return sum(s.total_size for s in self.slices)

    @property
    def merges(self) -> bool:
        """True when a file slice has log files to merge (merge-on-read)."""
        return any(s.log_files for s in self.slices)

    def __repr__(self) -> str:
        return (f"<ReadPlan {len(self.slices)} file slices, {self.bytes} bytes, "
                f"{self.total_partitions - self.pruned_partitions}/{self.total_partitions} partitions>")


def slice_context(table: "TableContext", plan: ReadPlan) -> "SliceReadContext":
    """How the plan's merge-on-read slices are merged: the merger the writer uses."""
    from lakesdk.engine.slice_reader import SliceReadContext
    cfg = table.config
    return SliceReadContext(table.storage, plan.schema, cfg.ordering_field, cfg.merge_mode,
                            plan.log_instants if plan.log_instants is not None
                            else frozenset(i.requested for i in plan.visible), column_groups=cfg.column_groups,
                            merger=table.merger())


def _filter_merged(t: pa.Table, plan: ReadPlan, cols: list[str], expr: Any) -> pa.Table:
    if plan.commit_times is not None:
        t = t.filter(pc.field("_hoodie_commit_time").isin(sorted(plan.commit_times)))
    if expr is not None:
        t = t.filter(expr)
    return t.select(cols)


def read_arrow(table: "TableContext", plan: ReadPlan, columns: list[str], expr: pc.Expression | None,
               limit: int | None = None) -> pa.Table:
    """The rows of ``plan`` (``columns`` of those ``expr`` keeps) as a pyarrow Table: the
    Arrow-native reader on the driver; merge-on-read slices are merged by the same merger
    the writer uses, a thread per slice.  ``limit``: at most that many rows, reading stops
    once they are found (:func:`iter_arrow`)."""
    import pyarrow.dataset as ds
    if limit is not None:
        schema = output_schema(plan, columns)
        return pa.Table.from_batches(list(iter_arrow(table, plan, columns, expr, limit=limit)), schema)
    full = with_meta_fields(plan.schema)
    cols = columns
    if plan.merges:
        from concurrent.futures import ThreadPoolExecutor

        from lakesdk._progress import progress as show_progress
        from lakesdk.engine.slice_reader import read_slice
        ctx = slice_context(table, plan)
        with ThreadPoolExecutor(max_workers=8) as pool:
            tables = list(show_progress(pool.map(lambda sl: _filter_merged(read_slice(ctx, sl), plan, cols, expr),
                                                 plan.slices), total=len(plan.slices), desc="reading file slices",
                                        setting=table.options.progress))
        return pa.concat_tables(tables) if tables else full.empty_table().select(cols)
    files = plan.files
    if not files:
        return full.empty_table().select(cols)
    storage = table.storage
    fs, paths = _arrow_fs(storage, files)
    if plan.commit_times is not None:
        inc = pc.field("_hoodie_commit_time").isin(sorted(plan.commit_times))
        expr = inc if expr is None else (expr & inc)
    from lakesdk.format.damaged import damaged_files
    with damaged_files(list(paths)):
        dataset = ds.dataset(paths, schema=full, format="parquet", filesystem=fs)
        return dataset.to_table(columns=cols, filter=expr)


def output_schema(plan: ReadPlan, columns: list[str]) -> pa.Schema:
    """The schema of the rows :func:`iter_arrow` yields."""
    return with_meta_fields(plan.schema).empty_table().select(columns).schema


def _conformed(batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    if batch.schema == schema:
        return batch
    return pa.RecordBatch.from_arrays([batch.column(i).cast(f.type) for i, f in enumerate(schema)], schema=schema)


#: merge-on-read slices read ahead of the consumer of a stream (a thread each)
READ_AHEAD = 4


def iter_arrow(table: "TableContext", plan: ReadPlan, columns: list[str], expr: pc.Expression | None, *,
               limit: int | None = None) -> Iterator[pa.RecordBatch]:
    """The rows of ``plan`` as a stream of record batches (all in :func:`output_schema`),
    read file by file (copy-on-write: Arrow's dataset scanner) or slice by slice
    (merge-on-read: at most :data:`READ_AHEAD` merged slices ahead of the consumer), so
    memory stays bounded by a few slices.  ``limit``: stop once that many rows are out
    (no more files or slices are read)."""
    schema = output_schema(plan, columns)
    if limit is not None and limit <= 0:
        return
    left = limit
    for batch in (_iter_merged(table, plan, columns, expr) if plan.merges else _iter_files(table, plan, columns, expr)):
        if batch.num_rows == 0:
            continue
        if left is not None and batch.num_rows >= left:
            yield _conformed(batch.slice(0, left), schema)
            return
        if left is not None:
            left -= batch.num_rows
        yield _conformed(batch, schema)


def _iter_merged(table: "TableContext", plan: ReadPlan, columns: list[str],
                 expr: pc.Expression | None) -> Iterator[pa.RecordBatch]:
    from collections import deque
    from concurrent.futures import Future, ThreadPoolExecutor

    from lakesdk.engine.slice_reader import read_slice
    ctx = slice_context(table, plan)
    todo = iter(plan.slices)
    pending: deque[Future[pa.Table]] = deque()
    pool = ThreadPoolExecutor(max_workers=READ_AHEAD)
    try:
        for sl in todo:
            pending.append(pool.submit(lambda s: _filter_merged(read_slice(ctx, s), plan, columns, expr), sl))
            if len(pending) >= READ_AHEAD:
                break
        while pending:
            done = pending.popleft().result()
            nxt = next(todo, None)
            if nxt is not None:
                pending.append(pool.submit(lambda s: _filter_merged(read_slice(ctx, s), plan, columns, expr), nxt))
            yield from done.to_batches()
    finally:
        for f in pending:
            f.cancel()
        pool.shutdown(wait=False, cancel_futures=True)


def _iter_files(table: "TableContext", plan: ReadPlan, columns: list[str],
                expr: pc.Expression | None) -> Iterator[pa.RecordBatch]:
    import pyarrow.dataset as ds
    files = plan.files
    if not files:
        return
    fs, paths = _arrow_fs(table.storage, files)
    if plan.commit_times is not None:
        inc = pc.field("_hoodie_commit_time").isin(sorted(plan.commit_times))
        expr = inc if expr is None else (expr & inc)
    from lakesdk.format.damaged import damaged_files
    with damaged_files(list(paths)):
        dataset = ds.dataset(paths, schema=with_meta_fields(plan.schema), format="parquet", filesystem=fs)
        yield from dataset.to_batches(columns=columns, filter=expr, fragment_readahead=2)


def count_rows(table: "TableContext", plan: ReadPlan) -> int | None:
    """The number of rows of ``plan`` from the Parquet footers of its base files, without
    reading data; None when the footers cannot tell (slices with log files to merge, an
    incremental read's commit-time filter).  The footers, not commit stats: they are what a
    read finds, whatever the stats say."""
    if plan.merges or plan.commit_times is not None:
        return None
    files = plan.files
    if not files:
        return 0
    from concurrent.futures import ThreadPoolExecutor
    with ThreadPoolExecutor(max_workers=min(8, len(files))) as pool:
        return sum(pool.map(lambda f: _footer_rows(table.storage, f), files))


def _footer_rows(storage: Any, path: str) -> int:
    import pyarrow.parquet as pq

    from lakesdk.format.damaged import damaged_file
    with damaged_file(path):
        if storage.is_local:
            return int(pq.ParquetFile(storage.url(path)).metadata.num_rows)
        with storage.open_input(path) as f:
            return int(pq.ParquetFile(f).metadata.num_rows)


def _arrow_fs(storage: Any, files: list[str]) -> tuple[Any, list[str]]:
    import pyarrow.fs as pafs
    if storage.is_local:
        return pafs.LocalFileSystem(), [storage.url(f) for f in files]
    handler = pafs.PyFileSystem(pafs.FSSpecHandler(storage.fs))
    return handler, [f"{storage.root}/{f}" for f in files]
