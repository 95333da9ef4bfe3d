"""Executing a read plan (:class:`lakesdk.format.read_plan.ReadPlan`, built by
:mod:`lakesdk.read.plan`) into a pyarrow Table on the driver.  The Spark executor is
:mod:`lakesdk.engine.spark_read`."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterator, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from lakesdk.format.file_group import FileSlice
from lakesdk.format.read_plan import ReadPlan, ScanFilter
from lakesdk.format.schema import with_meta_fields
from lakesdk.merge.columns import IS_DELETED

if TYPE_CHECKING:
    from lakesdk.engine.context import EngineContext
    from lakesdk.engine.slice_reader import SliceReadContext
    from lakesdk.storage import Storage

__all__ = ["ScanPart", "count_rows", "iter_arrow", "iter_plan", "read_arrow", "read_part", "slice_context",
           "split_plan"]

#: threads of a merge-on-read read's pool (log blocks, splits, merges) beside Arrow's own scan
#: threads: one per core on local files (CPU-bound: more threads only contend), more on an
#: object store (log reads wait on requests)
_SLICE_THREADS = max(2, os.cpu_count() or 2)
_REMOTE_SLICE_THREADS = 8


def slice_context(table: "EngineContext", plan: ReadPlan) -> "SliceReadContext":
    """How the plan's merge-on-read slices are merged: the merger the writer uses."""
    from lakesdk.engine.slice_reader import SliceReadContext
    valid = plan.log_instants if plan.log_instants is not None else frozenset(i.requested for i in plan.visible)
    return SliceReadContext.for_table(table.storage, table.config, plan.schema, valid, table.merger())


def _filter_merged(t: pa.Table, plan: ReadPlan, cols: list[str], flt: ScanFilter | None) -> pa.Table:
    flt = _row_filter(plan, flt)
    return (t if flt is None else t.filter(flt.expr)).select(cols)


def _row_filter(plan: ReadPlan, flt: ScanFilter | None) -> ScanFilter | None:
    """``flt`` and, for an incremental read, its commit-time filter; with a
    ``_hoodie_is_deleted`` column, the rows it flags dropped (a base file another writer wrote
    may hold them: Hudi's row-writer bulk insert stores them as they are), on every path."""
    if IS_DELETED in plan.schema.names:
        alive = ScanFilter.of(pc.field(IS_DELETED).is_null() | (pc.field(IS_DELETED) == pa.scalar(False)), [IS_DELETED])
        flt = alive if flt is None else flt & alive
    if plan.commit_times is None:
        return flt
    inc = ScanFilter.of(pc.field("_hoodie_commit_time").isin(sorted(plan.commit_times)), ["_hoodie_commit_time"])
    return inc if flt is None else flt & inc


def read_arrow(table: "EngineContext", plan: ReadPlan, columns: list[str], flt: ScanFilter | None,
               limit: int | None = None) -> pa.Table:
    """The rows of ``plan`` (``columns`` of those ``flt`` keeps: the plan's ``scan_filter`` or
    another filter of its rows) as a pyarrow Table: the Arrow-native reader on the driver;
    merge-on-read slices are merged by the same merger the writer uses, a thread per slice.
    ``limit``: at most that many rows, reading stops once they are found (:func:`iter_arrow`)."""
    if limit is not None:
        schema = output_schema(plan, columns)
        return pa.Table.from_batches(list(iter_arrow(table, plan, columns, flt, limit=limit)), schema)
    full = with_meta_fields(plan.schema)
    cols = columns
    if plan.merges:
        return _read_merged(table, plan, cols, flt)
    files = plan.files
    if not files:
        return full.empty_table().select(cols)
    from lakesdk.engine.base_file import scan_table
    return scan_table(table.storage, files, full, cols, _row_filter(plan, flt))


def output_schema(plan: ReadPlan, columns: list[str]) -> pa.Schema:
    """The schema of the rows :func:`iter_arrow` yields."""
    return with_meta_fields(plan.schema).empty_table().select(columns).schema


def _conformed(batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    if batch.schema == schema:
        return batch
    return pa.RecordBatch.from_arrays([batch.column(i).cast(f.type) for i, f in enumerate(schema)], schema=schema)


#: merge-on-read slices read ahead of the consumer of a stream (a thread each)
READ_AHEAD = 4


def iter_arrow(table: "EngineContext", plan: ReadPlan, columns: list[str], flt: ScanFilter | None, *,
               limit: int | None = None) -> Iterator[pa.RecordBatch]:
    """The rows of ``plan`` as a stream of record batches (all in :func:`output_schema`),
    read file by file (copy-on-write: Arrow's dataset scanner) or slice by slice
    (merge-on-read: at most :data:`READ_AHEAD` merged slices ahead of the consumer), so
    memory stays bounded by a few slices.  ``limit``: stop once that many rows are out
    (no more files or slices are read)."""
    ctx = slice_context(table, plan) if plan.merges else None
    yield from iter_plan(table.storage, ctx, plan, columns, flt, limit=limit)


def iter_plan(storage: "Storage", ctx: "SliceReadContext | None", plan: ReadPlan, columns: Sequence[str],
              flt: ScanFilter | None, *, limit: int | None = None) -> Iterator[pa.RecordBatch]:
    """:func:`iter_arrow` without the table: the storage and, for a plan with log files to
    merge, the slice context (:func:`slice_context`), both picklable, so a task elsewhere
    reads a part of a plan made on the driver the same way."""
    columns = list(columns)
    schema = output_schema(plan, columns)
    if limit is not None and limit <= 0:
        return
    left = limit
    if plan.merges:
        if ctx is None:
            raise ValueError("a plan with log files to merge needs its slice context (slice_context(table, plan))")
        batches = _iter_merged(ctx, plan, columns, flt)
    else:
        batches = _iter_files(storage, plan, columns, flt)
    for batch in batches:
        if batch.num_rows == 0:
            continue
        if left is not None and batch.num_rows >= left:
            yield _conformed(batch.slice(0, left), schema)
            return
        if left is not None:
            left -= batch.num_rows
        yield _conformed(batch, schema)


@dataclass(frozen=True)
class ScanPart:
    """A part of a read plan that one task reads (:func:`read_part`): a few of its file
    slices, with what reading them needs.  Picklable and small: the plan keeps no instant
    lists, only the slices, the schema and an incremental read's commit times."""

    storage: "Storage"
    plan: ReadPlan
    columns: tuple[str, ...]
    flt: ScanFilter | None = None
    ctx: "SliceReadContext | None" = None

    @property
    def slices(self) -> tuple[FileSlice, ...]:
        return self.plan.slices


def split_plan(table: "EngineContext", plan: ReadPlan, columns: Sequence[str], flt: ScanFilter | None, *,
               part_bytes: int = 128 << 20) -> list[ScanPart]:
    """The plan as parts of about ``part_bytes`` each (file slices packed in plan order;
    a bigger slice is a part alone), for tasks that read them with :func:`read_part`."""
    ctx = slice_context(table, plan) if plan.merges else None
    groups: list[list[FileSlice]] = []
    size = 0
    for sl in plan.slices:
        if not (sl.base_path or sl.log_files):
            continue
        if not groups or size + sl.total_size > part_bytes:
            groups.append([])
            size = 0
        groups[-1].append(sl)
        size += sl.total_size
    from dataclasses import replace
    return [ScanPart(table.storage, replace(plan, slices=tuple(g), instants=(), visible=(), row_filter=None), tuple(columns), flt,
                     ctx if any(s.log_files for s in g) else None) for g in groups]


def read_part(part: ScanPart) -> Iterator[pa.RecordBatch]:
    """The rows of one part of a plan, as :func:`iter_arrow` reads the whole plan."""
    yield from iter_plan(part.storage, part.ctx, part.plan, part.columns, part.flt)


def _iter_merged(ctx: "SliceReadContext", plan: ReadPlan, columns: list[str],
                 flt: ScanFilter | None) -> Iterator[pa.RecordBatch]:
    from collections import deque
    from concurrent.futures import Future, ThreadPoolExecutor

    from lakesdk.engine.slice_reader import read_slice
    todo = iter(plan.slices)
    pending: deque[Future[pa.Table]] = deque()
    pool = ThreadPoolExecutor(max_workers=READ_AHEAD)
    try:
        for sl in todo:
            pending.append(pool.submit(lambda s: _filter_merged(read_slice(ctx, s), plan, columns, flt), sl))
            if len(pending) >= READ_AHEAD:
                break
        while pending:
            done = pending.popleft().result()
            nxt = next(todo, None)
            if nxt is not None:
                pending.append(pool.submit(lambda s: _filter_merged(read_slice(ctx, s), plan, columns, flt), nxt))
            yield from done.to_batches()
    finally:
        for f in pending:
            f.cancel()
        pool.shutdown(wait=False, cancel_futures=True)


def _iter_files(storage: "Storage", plan: ReadPlan, columns: list[str],
                flt: ScanFilter | None) -> Iterator[pa.RecordBatch]:
    from lakesdk.engine.base_file import scan_batches
    files = plan.files
    if not files:
        return
    yield from scan_batches(storage, files, with_meta_fields(plan.schema), columns, _row_filter(plan, flt))


def count_rows(table: "EngineContext", plan: ReadPlan) -> int | None:
    """The number of rows of ``plan`` from the footers (metadata) of its base files, without
    reading data; None when the footers cannot tell (slices with log files to merge, an
    incremental read's commit-time filter).  The footers, not commit stats: they are what a
    read finds, whatever the stats say."""
    if plan.merges or plan.commit_times is not None or IS_DELETED in plan.schema.names:
        return None
    files = plan.files
    if not files:
        return 0
    from concurrent.futures import ThreadPoolExecutor

    from lakesdk.engine.base_file import file_rows
    with ThreadPoolExecutor(max_workers=min(8, len(files))) as pool:
        return sum(pool.map(lambda f: file_rows(table.storage, f), files))


def _read_merged(table: "EngineContext", plan: ReadPlan, cols: list[str], flt: ScanFilter | None) -> pa.Table:
    """Merge-on-read: the log blocks of every slice are read on the threads of a pool (only
    the columns the read needs) while every base file is read in one Arrow dataset scan, as
    the copy-on-write read reads them: the base files of slices without logs with the
    filter, the others without it.  Each batch of the latter is split, on the pool, into
    the rows of keys no log touches (kept as they are) and the touched ones; the touched
    rows and the log versions are merged at the end by the merger the writer uses.  The
    filter applies to the merged rows (a base row's log version may match it where the
    base row does not, or the other way round)."""
    from concurrent.futures import Future, ThreadPoolExecutor

    from lakesdk._progress import progress as show_progress
    from lakesdk.engine.slice_reader import (
        _MERGE_BATCH_ROWS,
        log_versions,
        merge_touched,
        split_base,
        touched_keys,
    )
    from lakesdk.merge.ordering import KEY, fields_of

    ctx = slice_context(table, plan)
    full = pa.schema([f.with_nullable(True) for f in with_meta_fields(plan.schema)])
    post = _row_filter(plan, flt)
    if ctx.merger is not None or ctx.column_groups is not None:
        need = set(full.names)     # a merger sees whole rows
    else:   # the filter applies to the merged rows: its columns are merged too
        need = {*cols, KEY, *fields_of(ctx.ordering), *(post.columns if post is not None else ())}
    proj = pa.schema([f for f in full if f.name in need])
    # a simple key that is the text of an integer field: base rows are matched to log keys by
    # that field, and their record key column (plain text, the costliest column to decode) is
    # not read unless asked for (nor for a slice whose log keys are not such text)
    cfg = table.config
    fields = cfg.record_key_fields
    key_field = fields[0] if (len(fields) == 1 and cfg.keygen_type in ("SIMPLE", "NON_PARTITION")
                              and KEY not in cols and flt is None and ctx.merger is None
                              and ctx.column_groups is None and fields[0] in plan.schema.names
                              and pa.types.is_integer(plan.schema.field(fields[0]).type)) else None
    base_names = [n for n in proj.names if not (key_field and n == KEY)]
    if key_field and key_field not in base_names:
        base_names.append(key_field)
    # with such a key field, log versions are matched and merged by it too: their record
    # key column is not decoded (a delete block's keys are cast to it)
    by_field = pa.schema([f for f in full if f.name in base_names]) if key_field else None

    def logs_of(sl: FileSlice) -> tuple[list[pa.Table], pa.Array, pa.Array | None]:
        """(log versions, their distinct keys, the same as values of the key field or None:
        then the versions carry the key field, not the record key)"""
        if by_field is not None and key_field is not None:
            try:
                logs = [t for t in log_versions(ctx, sl, by_field, key_field) if t.num_rows]
                typed = touched_keys(logs, key_field)
                return logs, typed, typed
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                pass    # delete-block keys that are not its text: this slice by the record key
        logs = [t for t in log_versions(ctx, sl, proj) if t.num_rows]
        return logs, touched_keys(logs), None

    def split(batch: pa.RecordBatch, logs: list[pa.Table], keys: pa.Array,
              field: str | None) -> tuple[pa.Table, pa.Table | None]:
        if not logs or batch.num_rows == 0:   # (rows flagged _hoodie_is_deleted: dropped by post)
            untouched, part = pa.Table.from_batches([batch]), None
        else:   # base rows flagged _hoodie_is_deleted: deletes in the merge, dropped when untouched
            untouched, part = split_base(batch, keys, field, logs[0].schema)
        return (untouched if post is None else untouched.filter(post.expr)).select(cols), part

    slices = [sl for sl in plan.slices if sl.base_path or sl.log_files]
    merging = [sl for sl in slices if sl.log_files]
    by_path = {sl.base_path: sl for sl in merging if sl.base_path}
    plain = [sl.base_path for sl in slices if not sl.log_files and sl.base_path]
    out: list[pa.Table] = []
    splits: list[tuple[FileSlice, Future[tuple[pa.Table, pa.Table | None]]]] = []
    threads = _SLICE_THREADS if table.storage.is_local else max(_SLICE_THREADS, _REMOTE_SLICE_THREADS)
    with ThreadPoolExecutor(max_workers=threads) as pool:
        logs = {id(sl): pool.submit(logs_of, sl) for sl in merging}
        if plain:   # slices without logs, while the logs are read (rows flagged deleted dropped by post)
            out.append(_scan(table, plain, full, cols, post))
        redo: list[str] = []   # base files to match by the record key after all
        split_of: dict[int, list[Future[tuple[pa.Table, pa.Table | None]]]] = {}
        merges: list[Future[pa.Table | None]] = []
        ready: list[FileSlice] = []     # slices whose base rows are all split, not merged yet
        ready_versions = 0
        finished_ids: set[int] = set()

        def merge_group(group: list[FileSlice]) -> pa.Table | None:
            """The winners of the touched keys of ``group`` (on the pool, once its splits
            are done: they were submitted before this task, so they run or ran already):
            slices merged by the key field and by the record key apart."""
            parts: dict[str, list[tuple[pa.Table | None, list[pa.Table], int]]] = {}
            for sl in group:
                versions, keys, typed = logs[id(sl)].result()
                touched = [p for _, p in (f.result() for f in split_of.get(id(sl), ())) if p is not None]
                by = key_field if typed is not None and key_field is not None else KEY
                parts.setdefault(by, []).append((pa.concat_tables(touched) if touched else None, versions, len(keys)))
            winners = [w for by, p in parts.items() if (w := merge_touched(ctx, p, key=by)) is not None]
            if len(winners) > 1:    # the columns both have (the record key only one of them)
                names = [n for n in winners[0].column_names if all(n in w.column_names for w in winners)]
                return pa.concat_tables([w.select(names) for w in winners])
            return winners[0] if winners else None

        def finished(sl: FileSlice | None, *, last: bool = False) -> None:
            """``sl``'s base rows are all split: merge it with the slices ready before it
            once they make a merge of about _MERGE_BATCH_ROWS versions (while the scan goes on)."""
            nonlocal ready_versions
            if sl is not None:
                finished_ids.add(id(sl))
                ready.append(sl)
                ready_versions += 2 * sum(t.num_rows for t in logs[id(sl)].result()[0])
            if ready and (last or ready_versions >= _MERGE_BATCH_ROWS // 2):
                merges.append(pool.submit(merge_group, list(ready)))
                ready.clear()
                ready_versions = 0

        current: str | None = None
        for path, batch in (_scan_tagged(table, list(by_path), full, base_names) if by_path else ()):
            if path != current:
                if current is not None and current not in redo:
                    finished(by_path[current])    # the scan yields a file's batches together
                current = path
            sl = by_path[path]
            versions, keys, typed = logs[id(sl)].result()
            if key_field is not None and typed is None and versions:
                if path not in redo:
                    redo.append(path)
                continue
            fut = pool.submit(split, batch, versions, typed if key_field else keys, key_field)
            splits.append((sl, fut))
            split_of.setdefault(id(sl), []).append(fut)
        if current is not None and current not in redo:
            finished(by_path[current])
        if redo:
            names = [*base_names, KEY] if KEY not in base_names else base_names
            for path, batch in _scan_tagged(table, redo, full, names):
                sl = by_path[path]
                versions, keys, _ = logs[id(sl)].result()
                fut = pool.submit(split, batch, versions, keys, None)
                splits.append((sl, fut))
                split_of.setdefault(id(sl), []).append(fut)
        for sl in merging:        # redone slices, slices without a base file or without base rows
            if id(sl) not in finished_ids:
                finished(sl)
        finished(None, last=True)
        for _sl, fut in show_progress(splits, desc="reading file slices",
                                     setting=table.options.progress):
            untouched, _ = fut.result()
            out.append(untouched)
        for merge in merges:
            winners = merge.result()
            if winners is not None:
                out.append((winners if post is None else winners.filter(post.expr)).select(cols))
    out = [t for t in out if t.num_rows] or out[:1]
    if not out:
        return full.empty_table().select(cols)
    return pa.concat_tables([t if t.schema == out[0].schema else t.cast(out[0].schema) for t in out])


def _scan(table: "EngineContext", files: list[str], schema: pa.Schema, columns: list[str],
          flt: ScanFilter | None) -> pa.Table:
    """``columns`` of the rows of base ``files`` that ``flt`` keeps: one dataset scan per format."""
    from lakesdk.engine.base_file import scan_table
    return scan_table(table.storage, files, schema, columns, flt)


def _scan_tagged(table: "EngineContext", files: list[str], schema: pa.Schema,
                 columns: list[str]) -> Iterator[tuple[str, pa.RecordBatch]]:
    """(file, batch) of ``columns`` of every row of base ``files``: one dataset scan per format."""
    from lakesdk.engine.base_file import scan_tagged
    yield from scan_tagged(table.storage, files, schema, columns)
