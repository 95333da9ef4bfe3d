"""Engine-agnostic write tasks: one call writes one file group's new base file.

These functions run wherever the engine puts them (a Spark task, a local thread, the
driver).  They import neither pyspark nor anything above the merge layer.
"""

from __future__ import annotations

import itertools
import json
import time
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Iterable, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from lakesdk import _faults as faults
from lakesdk.engine import group_merge
from lakesdk.engine.base_file_writer import Footer, write_base_file
from lakesdk.engine.footers import remember_footer
from lakesdk.engine.group_merge import SlicePieces, StoredRows, merge_partial_into_base, merged_pieces, nan_statistics
from lakesdk.engine.meta_columns import with_meta
from lakesdk.engine.slice_reader import SliceReadContext, conform, read_slice
from lakesdk.engine.stored_fields import keep_stored
from lakesdk.format.bloom import BloomConfig
from lakesdk.format.bloom_builder import file_footer
from lakesdk.format.cdc import logging_mode
from lakesdk.format.commit_metadata import WriteStat
from lakesdk.format.file_naming import BaseFile, make_write_token, new_file_id
from lakesdk.format.keys import HUDI_ENCODING, partition_paths, record_keys
from lakesdk.format.schema import with_meta_fields
from lakesdk.merge.ordering import (
    KEY,
    OP,
    OP_DELETE,
    PART,
    MergeCounts,
    Ordering,
    event_time_wins,
    fields_of,
    has_ordering,
    merge_into_base,
    ordering_array,
)
from lakesdk.storage import Storage

if TYPE_CHECKING:
    from lakesdk.format.table_config import TableConfig

__all__ = ["WriteContext", "TaskInfo", "FileGroupTarget", "write_file_group", "write_new_files",
           "add_key_columns", "compacted_file", "write_log_group", "write_clustered_file",
           "cluster_group", "STORED_ORDERING", "stored_ordering_type", "index_ordering_type", "base_file_footer"]

# merge-on-read upserts and deletes: the stored record's ordering value, carried by the key
# index, so that the log write counts what wins without reading the file slice
STORED_ORDERING = "_lk_stored_ord"



@dataclass(frozen=True)
class TaskInfo:
    """Identity of the task writing a file (its write token)."""

    partition_id: int = 0
    stage_id: int = 0
    attempt_id: int = 0
    attempt_number: int = 0       # 0 for the first attempt of a task, 1 for its first retry, ...

    @property
    def write_token(self) -> str:
        return make_write_token(self.partition_id, self.stage_id, self.attempt_id)


@dataclass(frozen=True)
class FileGroupTarget:
    partition: str
    file_id: str
    base_path: str | None = None      # current base file (relative), None for a new file group
    base_instant: str | None = None
    has_logs: bool = False            # merge-on-read: the latest slice has log files
    slice: Any = None                 # the latest FileSlice (merge-on-read writes that keep stored columns)


@dataclass
class WriteContext:
    """Everything a write task needs; picklable."""

    storage: Storage
    instant: str
    schema: pa.Schema                      # target data schema (no meta fields)
    key_fields: tuple[str, ...]
    partition_fields: tuple[str, ...]
    keygen: str
    hive_style: bool
    ordering: Ordering                      # one ordering field, a tuple of several, or None
    merge_mode: str
    target_file_bytes: int = 120 * 1024 * 1024
    record_size_estimate: int | None = None   # bytes per record (None: measured on the rows, record_size)
    compression: str = "snappy"
    operation: str = "upsert"
    table_name: str = "table"
    merge_on_read: bool = False
    markers: Any = None                     # WriteMarkers of the instant (created before each file)
    markers_ready: Any = None               # () -> None: waits for the markers created for every file at once
    column_groups: dict[str, list[str]] | None = None   # partial-update tables
    merger: Any = None                      # a user-defined merger function (custom merge mode)
    targets: dict[str, FileGroupTarget] = field(default_factory=dict)
    urlencode: bool = False                 # hoodie.datasource.write.partitionpath.urlencode
    keep_columns: tuple[str, ...] = ()      # columns the data lacks: updated records keep their stored values
    slice_ctx: Any = None                   # SliceReadContext for keep_columns on merge-on-read
    key_encoding: str = HUDI_ENCODING        # how null and empty key values are written (lakesdk.format.keys)
    log_block_format: str = "parquet"        # hoodie.logfile.data.block.format: merge-on-read data blocks
    bloom: BloomConfig | None = field(default_factory=BloomConfig)   # base files' bloom filters (None: none)
    global_index: bool = False               # upserts find a key in any partition (hoodie.index.type=GLOBAL_*)
    update_partition_path: bool = True       # hoodie.simple.index.update.partition.path (global index)
    cdc_mode: str | None = None              # hoodie.table.cdc.supplemental.logging.mode (None: CDC off)

    @property
    def file_schema(self) -> pa.Schema:
        return with_meta_fields(self.schema)

    @property
    def merges_partially(self) -> bool:
        """Whether a stored record and the incoming ones are stitched column by column (a
        partial update's column groups, a custom merger) rather than one replacing the other."""
        return (self.merge_mode == "PARTIAL_UPDATE" and self.column_groups is not None) or self.merger is not None

    @classmethod
    def for_table(cls, storage: Storage, config: "TableConfig", options: Any, *, instant: str, schema: pa.Schema,
                  operation: str, merger: Any = None, **more: Any) -> "WriteContext":
        """The context of a write of ``operation`` into a table: its key, partitioning, ordering,
        merge mode and column groups from its ``config``, its bloom filters from its ``options``
        (a :class:`~lakesdk.config.options.TableOptions`); ``more`` sets further fields."""
        return cls(storage=storage, instant=instant, schema=schema, key_fields=config.record_key_fields,
                   partition_fields=config.partition_fields, keygen=config.keygen_type, hive_style=config.hive_style,
                   urlencode=config.urlencode, ordering=config.ordering_key, merge_mode=config.merge_mode,
                   table_name=config.name, column_groups=config.column_groups, merger=merger, operation=operation,
                   bloom=BloomConfig.of_writes(options, config.props), cdc_mode=logging_mode(config.props), **more)

    def slice_context(self, valid_instants: frozenset[str]) -> "SliceReadContext":
        """How this write reads the file slices it merges with: its schema, ordering and
        merger, with the log blocks of ``valid_instants``."""
        return SliceReadContext(self.storage, self.schema, self.ordering, self.merge_mode, valid_instants,
                                column_groups=self.column_groups, merger=self.merger)


def stored_ordering_type(ctx: WriteContext) -> pa.DataType | None:
    """The type of the stored ordering value the key index carries (None: not needed).

    Only merge-on-read writes under event-time ordering need it: a copy-on-write write
    reads the base file anyway, and the other merge modes have no record that loses."""
    if not (ctx.merge_on_read and ctx.ordering and ctx.merge_mode == "EVENT_TIME_ORDERING"
            and ctx.column_groups is None and ctx.merger is None and ctx.operation != "insert"):
        return None
    return _ordering_value_type(ctx)


def _ordering_value_type(ctx: WriteContext) -> pa.DataType | None:
    """The type of the table's ordering value: its field's, or with several ordering fields a
    struct of theirs (None: the schema lacks one of them)."""
    fields = fields_of(ctx.ordering)
    if not all(f in ctx.schema.names for f in fields):
        return None
    if len(fields) > 1:   # several ordering fields: a struct of their values
        return pa.struct([pa.field(f, ctx.schema.field(f).type) for f in fields])
    return ctx.schema.field(fields[0]).type


def index_ordering_type(ctx: WriteContext) -> pa.DataType | None:
    """The type of the stored ordering value the key index of an index lookup in every
    partition carries: :func:`stored_ordering_type`, and with a global index under event-time
    ordering on copy-on-write too (a record whose key is stored in another partition is
    compared with the stored version before it moves: :mod:`lakesdk.engine.global_index`)."""
    found = stored_ordering_type(ctx)
    if found is not None or not (ctx.global_index and ctx.ordering and ctx.merge_mode == "EVENT_TIME_ORDERING"):
        return found
    return _ordering_value_type(ctx)


def add_key_columns(ctx: WriteContext, batch: pa.Table) -> pa.Table:
    """Append ``_hoodie_record_key`` and ``_hoodie_partition_path`` computed from the data."""
    rk = record_keys(batch, ctx.key_fields, ctx.keygen, encoding=ctx.key_encoding)
    pp = partition_paths(batch, ctx.partition_fields, hive_style=ctx.hive_style, urlencode=ctx.urlencode)
    for name, col in ((KEY, rk), (PART, pp)):
        if name in batch.column_names:
            batch = batch.drop_columns([name])
        batch = batch.append_column(name, col)
    return batch


def _with_meta(ctx: WriteContext, rows: pa.Table, file_name: str, task: TaskInfo, seq_start: int,
               partition: str | None = None, dictionaries: bool = False) -> pa.Table:
    return with_meta(rows, instant=ctx.instant, file_name=file_name, partition_id=task.partition_id, seq_start=seq_start,
                     schema=ctx.schema, file_schema=ctx.file_schema, partition=partition, dictionaries=dictionaries)


def _mark(ctx: WriteContext, path: str, io_type: str) -> None:
    """Create the data file's marker (durable before the file exists), or wait until the
    markers of every file of the write, created in one request meanwhile, are durable."""
    if ctx.markers_ready is not None:
        ctx.markers_ready()
    if ctx.markers is not None:
        part, _, name = path.rpartition("/")
        ctx.markers.create(part, name, io_type)
        faults.crash_point("after_markers")


def base_file_footer(ctx: WriteContext, keys: pa.Array | pa.ChunkedArray) -> Footer:
    """The footer entries of a base file holding the record ``keys`` (in file order) and
    what they tell the key index (a file of no key: an empty filter, as Hudi writes it)."""
    return file_footer(keys, ctx.bloom)


def _write_parquet(ctx: WriteContext, path: str, rows: pa.Table | Iterable[pa.Table], task: TaskInfo | None = None,
                   footer: Footer | None = None, *, statistics: bool | list[str] | None = None) -> tuple[int, int]:
    """Write a base file of ``rows`` (a table, or its pieces as they come: :func:`write_base_file`),
    its footer the key range and bloom filter of its record keys as Hudi writes them, the key
    index's first look (``footer``: computed already: :func:`base_file_footer`, or
    :func:`kept_footer`): (its size, its rows)."""
    half = faults.armed("mid_data_file") or (faults.fail_first_attempt() and task is not None and task.attempt_number == 0)
    size, rows_written, index = write_base_file(ctx.storage, path, rows, compression=ctx.compression, schema=ctx.file_schema,
                                         bloom=ctx.bloom, footer=footer,
                                         statistics=statistics, half=half)
    if index is not None:
        remember_footer(ctx.storage, path, index)
    return size, rows_written


def read_parquet(storage: Storage, path: str, columns: list[str] | None = None) -> pa.Table:
    """A Parquet file of the table (Arrow's native reader for local files); damaged bytes
    raise :class:`~lakesdk.CorruptFileError` naming the file."""
    from lakesdk.format.damaged import damaged_file
    if storage.is_local:
        with damaged_file(path):
            return pq.read_table(storage.url(path), columns=columns, use_threads=False)
    with storage.open_input(path) as f, damaged_file(path):
        return pq.read_table(f, columns=columns)


def read_base(ctx: WriteContext, path: str) -> pa.Table:
    return conform(read_parquet(ctx.storage, path), ctx.file_schema)


def write_file_group(ctx: WriteContext, target: FileGroupTarget, incoming: pa.Table, task: TaskInfo,
                     stored: pa.Table | None = None) -> tuple[WriteStat, MergeCounts]:
    """Merge ``incoming`` into the file group's current base file (or ``stored``: its records)
    and write the next one, a batch of the stored records at a time
    (:mod:`lakesdk.engine.group_merge`); a partial update's, a custom merger's and a CDC table's
    merge take the stored records whole."""
    t0 = time.perf_counter()
    name = BaseFile(target.file_id, task.write_token, ctx.instant).name
    path = f"{target.partition}/{name}" if target.partition else name
    had_base = stored is not None or target.base_path is not None
    if ctx.cdc_mode or ctx.merges_partially or (ctx.operation == "insert" and ctx.keep_columns):
        return _write_file_group_whole(ctx, target, incoming, task, stored, path, t0)
    # the stored file's commit times, partition paths and file names come as dictionaries, and the new
    # records' go alike: the writer takes them as they are
    rows = StoredRows(ctx.storage, ctx.file_schema, path=None if stored is not None else target.base_path, table=stored,
                      dictionaries=True)
    try:
        counts = MergeCounts()
        seq = 0

        def write_new(new: pa.Table, stored_rows: pa.Table | None) -> pa.Table:
            nonlocal seq
            out = _with_meta(ctx, keep_stored(ctx.keep_columns, new, stored_rows), name, task, seq,
                             dictionaries=rows.dictionaries)
            seq += out.num_rows
            return out
        incoming, kept = group_merge.placed(rows, incoming, ctx.bloom) if ctx.operation != "insert" else (incoming, None)
        if ctx.operation == "insert":    # Hudi's insert appends into small files without merging (duplicates kept)
            pieces: Iterable[pa.Table] = itertools.chain(rows.batches(), [write_new(incoming, None)])
            counts.inserted = incoming.num_rows
        else:
            pieces = merged_pieces(rows, incoming, ordering=ctx.ordering, merge_mode=ctx.merge_mode, counts=counts,
                                   write_new=write_new)
        statistics = nan_statistics(rows, incoming, ctx.file_schema)
        primed = _primed(pieces)  # its first piece merged while the write's markers are made
        t1 = time.perf_counter()
        _mark(ctx, path, "MERGE" if had_base else "CREATE")
        size, written = _write_parquet(ctx, path, primed, task, kept, statistics=statistics)
    finally:
        rows.close()
    return _group_stat(target, path, written, counts, size, had_base, t0, t1, time.perf_counter()), counts


def _primed(pieces: Iterable[pa.Table]) -> Iterator[pa.Table]:
    """``pieces`` with the first one computed now (and let go once taken)."""
    it = iter(pieces)
    head = list(itertools.islice(it, 1))
    return itertools.chain((head.pop() for _ in range(len(head))), it)


def _group_stat(target: FileGroupTarget, path: str, written: int, counts: MergeCounts, size: int, had_base: bool,
                t0: float, t1: float, t2: float, cdc: dict[str, int] | None = None) -> WriteStat:
    return WriteStat(
        fileId=target.file_id, path=path, partitionPath=target.partition,
        prevCommit=target.base_instant or "null",
        numWrites=written, numDeletes=counts.deleted, numUpdateWrites=counts.updated,
        numInserts=counts.inserted, totalWriteBytes=size, fileSizeInBytes=size,
        prevBaseFile=target.base_path.rsplit("/", 1)[-1] if target.base_path else None,
        runtimeStats={"totalScanTime": int((t1 - t0) * 1000), "totalCreateTime": 0 if had_base else int((t2 - t1) * 1000),
                      "totalUpsertTime": int((t2 - t1) * 1000) if had_base else 0},
        cdcStats=cdc,
    )


def _write_file_group_whole(ctx: WriteContext, target: FileGroupTarget, incoming: pa.Table, task: TaskInfo,
                            stored: pa.Table | None, path: str, t0: float) -> tuple[WriteStat, MergeCounts]:
    """:func:`write_file_group` of a merge that takes the stored records whole."""
    base = stored if stored is not None else read_base(ctx, target.base_path) if target.base_path else None
    t1 = time.perf_counter()
    if ctx.operation == "insert":
        kept, new = base, incoming
        counts = MergeCounts(inserted=incoming.num_rows)
    elif ctx.merges_partially:
        kept, new, counts = merge_partial_into_base(ctx, base, incoming)
    else:
        kept, new, _is_update, counts = merge_into_base(base, incoming, ordering=ctx.ordering,
                                                        merge_mode=ctx.merge_mode)
    new = keep_stored(ctx.keep_columns, new, base)
    new_rows = _with_meta(ctx, new, path.rsplit("/", 1)[-1], task, 0)
    out = pa.concat_tables([kept, new_rows]) if kept is not None and kept.num_rows else new_rows
    del kept, new, new_rows
    had_base = base is not None
    if not ctx.cdc_mode:
        base = None     # the stored rows are in ``out`` now (a copy): not held while the file is written
    footer = base_file_footer(ctx, out.column(KEY))
    _mark(ctx, path, "MERGE" if had_base else "CREATE")
    size, written = _write_parquet(ctx, path, out, task, footer)
    cdc = _write_cdc_log(ctx, target, base, out, task) if ctx.cdc_mode and base is not None else None
    return _group_stat(target, path, written, counts, size, had_base, t0, t1, time.perf_counter(), cdc), counts


def _write_cdc_log(ctx: WriteContext, target: FileGroupTarget, base: pa.Table, out: pa.Table,
                   task: TaskInfo) -> dict[str, int] | None:
    """The CDC log file of a base file's rewrite (lakesdk.format.cdc) beside the new base file:
    its ``cdcStats`` (path -> size), None when there is nothing to log."""
    from lakesdk.format.cdc import CDC_SUFFIX, cdc_log_block, diff_records
    from lakesdk.format.file_naming import LogFile
    assert ctx.cdc_mode is not None
    data = cdc_log_block(diff_records(base, out, ctx.instant, ctx.schema), ctx.schema, ctx.table_name,
                         ctx.cdc_mode, ctx.instant)
    if data is None:
        return None
    name = LogFile(target.file_id, ctx.instant, 1, task.write_token, CDC_SUFFIX).name
    path = f"{target.partition}/{name}" if target.partition else name
    _mark(ctx, path, "CREATE")
    ctx.storage.write(path, data)
    return {path: len(data)}


def new_file_path(ctx: WriteContext, partition: str, file_id: str, task: TaskInfo) -> str:
    name = BaseFile(file_id, task.write_token, ctx.instant).name
    return f"{partition}/{name}" if partition else name


def planned_file(ctx: WriteContext, target: FileGroupTarget, task: TaskInfo) -> tuple[str, str, str]:
    """(partition, file name, IO type) of the file a write task will produce for ``target``."""
    if ctx.merge_on_read and (target.base_path or target.has_logs):
        from lakesdk.format.file_naming import LogFile
        return target.partition, LogFile(target.file_id, ctx.instant, 1, task.write_token).name, "CREATE"
    name = BaseFile(target.file_id, task.write_token, ctx.instant).name
    return target.partition, name, "MERGE" if target.base_path else "CREATE"


def write_new_file(ctx: WriteContext, partition: str, file_id: str, rows: pa.Table, task: TaskInfo,
                   seq_start: int = 0, footer: Footer | None = None) -> WriteStat:
    """Write ``rows`` as the first base file of a new file group (``footer``: the
    :func:`base_file_footer` of their keys, when computed already)."""
    path = new_file_path(ctx, partition, file_id, task)
    t = _with_meta(ctx, rows, path.rsplit("/", 1)[-1], task, seq_start, partition)
    t0 = time.perf_counter()
    footer = footer if footer is not None else base_file_footer(ctx, t.column(KEY))
    _mark(ctx, path, "CREATE")
    size, _ = _write_parquet(ctx, path, t, task, footer)
    return WriteStat(fileId=file_id, path=path, partitionPath=partition, numWrites=t.num_rows, numInserts=t.num_rows,
                     totalWriteBytes=size, fileSizeInBytes=size,
                     runtimeStats={"totalScanTime": 0, "totalUpsertTime": 0,
                                   "totalCreateTime": int((time.perf_counter() - t0) * 1000)})


#: bytes per record where nothing tells (no commit, no row to measure): Hudi's default estimate
DEFAULT_RECORD_SIZE = 1024
_SIZE_SAMPLE = 10_000


def record_size(ctx: WriteContext, rows: pa.Table) -> int:
    """Bytes per record of the write's base files: its estimate (the table's last commit's,
    or ``hoodie.copyonwrite.record.size.estimate``), else measured on a sample of ``rows`` (with
    their key columns) written as the files are (:func:`~lakesdk.engine.base_file_writer.measured_record_size`)."""
    from lakesdk.engine.base_file_writer import measured_record_size
    if ctx.record_size_estimate is not None:
        return ctx.record_size_estimate
    n = rows.num_rows
    if not n:
        return DEFAULT_RECORD_SIZE
    sample = rows.take(pa.array(np.unique(np.linspace(0, n - 1, _SIZE_SAMPLE).astype(np.int64)))) if n > _SIZE_SAMPLE else rows
    ctx = replace(ctx, instant=ctx.instant or "0" * 17)   # the rows carry their key columns already
    name = BaseFile(new_file_id(), make_write_token(0, 0, 0), ctx.instant).name
    return measured_record_size(_with_meta(ctx, sample, name, TaskInfo(), 0), ctx.compression)


def write_new_files(ctx: WriteContext, batches: Iterable[pa.Table], task: TaskInfo) -> Iterator[WriteStat]:
    """Bulk insert: write incoming rows (with key columns) straight into new file groups,
    one open file per partition, rolled over at the target file size: every file of a
    partition holds the target's rows but its last (the rows past the last full file wait for
    more batches, not written as a small file of their own)."""
    per_file_rows = 0
    buffers: dict[str, list[pa.Table]] = {}
    counts: dict[str, int] = {}

    def flush(part: str, last: bool = True) -> Iterator[WriteStat]:
        rows = pa.concat_tables(buffers.pop(part))
        counts.pop(part, None)
        full = rows.num_rows if last else rows.num_rows - rows.num_rows % per_file_rows
        for start in range(0, full, per_file_rows):
            yield write_new_file(ctx, part, new_file_id(), rows.slice(start, per_file_rows), task, start)
        if full < rows.num_rows:
            buffers[part] = [rows.slice(full)]
            counts[part] = rows.num_rows - full

    for batch in batches:
        if batch.num_rows == 0:
            continue
        if not per_file_rows:     # measured on the first rows when nothing tells the record size
            per_file_rows = max(1, ctx.target_file_bytes // record_size(ctx, batch))
        parts = batch.column(PART)
        uniq = pc.unique(parts).to_pylist()
        for p in uniq:
            sub = batch.filter(pc.equal(parts, p)) if len(uniq) > 1 else batch
            buffers.setdefault(p, []).append(sub)
            counts[p] = counts.get(p, 0) + sub.num_rows
            if counts[p] >= per_file_rows:
                yield from flush(p, last=False)
    for p in list(buffers):
        yield from flush(p)


def _distinct_keys(t: pa.Table, mask: np.ndarray) -> int:
    """How many distinct record keys the rows of ``mask`` hold (one file group: one partition)."""
    if not mask.any():
        return 0
    return int(pc.count_distinct(t.filter(pa.array(mask)).column(KEY), mode="all").as_py())


def _log_counts(ctx: WriteContext, incoming: pa.Table, ops: np.ndarray) -> MergeCounts:
    """What a merge-on-read log write does to the table: every incoming record is tagged (its key is in the
    file group); under event-time ordering, one whose ordering value is lower than the stored one
    (``_lk_stored_ord`` from the key index) changes nothing (skipped), as the merge on read will decide.
    Keys count once (a delete batch may name a key twice)."""
    n = incoming.num_rows
    wins = np.ones(n, dtype=bool)
    if STORED_ORDERING in incoming.column_names and stored_ordering_type(ctx) is not None:
        inc = ordering_array(incoming, ctx.ordering) if has_ordering(incoming, ctx.ordering) else \
            pa.chunked_array([pa.nulls(n, incoming.column(STORED_ORDERING).type)])
        wins = event_time_wins(inc, incoming.column(STORED_ORDERING), ops)
    is_del = ops == OP_DELETE
    # one key, one outcome: a key some record of the batch changes is not also skipped
    lost = ~wins
    if lost.any() and wins.any():
        won = pc.unique(incoming.filter(pa.array(wins)).column(KEY))
        lost &= ~np.asarray(pc.is_in(incoming.column(KEY), value_set=won).to_numpy(zero_copy_only=False), dtype=bool)
    return MergeCounts(updated=_distinct_keys(incoming, ~is_del & wins), deleted=_distinct_keys(incoming, is_del & wins),
                       skipped=_distinct_keys(incoming, lost))


def write_log_group(ctx: WriteContext, target: FileGroupTarget, incoming: pa.Table, task: TaskInfo) -> tuple[WriteStat, MergeCounts]:
    """Merge-on-read: append the incoming upserts (a data block: Parquet or Avro, by
    ``ctx.log_block_format``) and deletes (a delete block) to a new log file of the file
    group's latest slice."""
    from lakesdk.format.file_naming import LogFile
    from lakesdk.format.log_block import HeaderKey, encode_data_block, encode_delete_block
    from lakesdk.format.schema import arrow_to_avro

    t0 = time.perf_counter()
    ops = np.asarray(incoming.column(OP).to_numpy(zero_copy_only=False), dtype=np.int8)
    ups = incoming.filter(pa.array(ops == 0))
    dels = incoming.filter(pa.array(ops != 0))
    log = LogFile(target.file_id, ctx.instant, 1, task.write_token)
    path = f"{target.partition}/{log.name}" if target.partition else log.name
    header = {HeaderKey.INSTANT_TIME: ctx.instant}
    chunks = []
    if ups.num_rows:
        if ctx.keep_columns and target.slice is not None and ctx.slice_ctx is not None:
            stored = read_slice(ctx.slice_ctx, target.slice, columns=[KEY, *dict.fromkeys(c.partition(".")[0] for c in ctx.keep_columns)])
            ups = keep_stored(ctx.keep_columns, ups, stored)
        rows = _with_meta(ctx, ups, target.file_id, task, 0)
        avro = arrow_to_avro(rows.schema, ctx.table_name, meta=True)
        chunks.append(encode_data_block(rows, avro, {**header, HeaderKey.SCHEMA: json.dumps(avro)},
                                        block_format=ctx.log_block_format, compression=ctx.compression))
    if dels.num_rows:
        keys = {KEY: dels.column(KEY), PART: dels.column(PART)}
        if has_ordering(dels, ctx.ordering):   # several fields: a struct, written as Hudi's ArrayWrapper
            keys["ordering_value"] = ordering_array(dels, ctx.ordering)
        chunks.append(encode_delete_block(pa.table(keys), dict(header)))
        # a key both deleted and written again in one batch (partial-update and custom-merger
        # tables keep the delete before the versions after it): the delete block goes first,
        # so the merge on read applies the delete, then the new versions
        if ups.num_rows and pc.any(pc.is_in(dels.column(KEY), value_set=ups.column(KEY))).as_py():
            chunks.reverse()
    data = b"".join(chunks)
    _mark(ctx, path, "CREATE")   # table version 8: every log file is new, so CREATE (APPEND on v6)
    if faults.armed("mid_data_file") or (faults.fail_first_attempt() and task.attempt_number == 0):
        ctx.storage.write(path, data[: len(data) // 2])
        faults.crash_point("mid_data_file")
        faults.record(f"failed first attempt {path}")
        raise RuntimeError(f"injected failure of the first task attempt writing {path}")
    ctx.storage.write(path, data)
    counts = _log_counts(ctx, incoming, ops)
    # with CDC on, the stat names the slice the log file joins (its base instant and log files),
    # which Hudi's CDC reader merges the log's records onto (its LOG_FILE case)
    prev, logs = ctx.instant, [log.name]
    if ctx.cdc_mode and target.slice is not None:
        prev = target.slice.base_instant
        logs = [lf.name for lf in target.slice.log_files] + logs
    stat = WriteStat(
        fileId=target.file_id, path=path, partitionPath=target.partition, prevCommit=prev,
        numWrites=ups.num_rows, numDeletes=counts.deleted, numUpdateWrites=counts.updated, numInserts=0,
        totalWriteBytes=len(data), fileSizeInBytes=len(data), totalLogRecords=incoming.num_rows,
        totalLogBlocks=len(chunks), logVersion=1, logOffset=0,
        baseFile=target.base_path.rsplit("/", 1)[-1] if target.base_path else "", logFiles=logs,
        runtimeStats={"totalScanTime": 0, "totalCreateTime": 0, "totalUpsertTime": int((time.perf_counter() - t0) * 1000)},
    )
    return stat, counts


def compacted_file(ctx: WriteContext, sl: Any, task: TaskInfo) -> tuple[str, str, str]:
    """(partition, file name, io type) of the base file a compaction task writes for ``sl``:
    its marker, for :meth:`WriteMarkers.create_many`."""
    return sl.partition, BaseFile(sl.file_id, task.write_token, ctx.instant).name, "CREATE"


def compact_file_slice(ctx: WriteContext, slice_ctx: Any, sl: Any, task: TaskInfo) -> WriteStat:
    """Compaction: merge one file slice (base + logs) into a new base file at ``ctx.instant``
    (its marker is made first unless ``ctx.markers`` is None: the caller made it)."""
    t0 = time.perf_counter()
    name = compacted_file(ctx, sl, task)[1]
    path = f"{sl.partition}/{name}" if sl.partition else name
    with SlicePieces(slice_ctx, sl, ctx.bloom) as pieces:
        primed = _primed(conform(p, ctx.file_schema) for p in pieces)  # the first batch merged while the marker is made
        _mark(ctx, path, "CREATE")
        size, written = _write_parquet(ctx, path, primed, task, pieces.footer, statistics=pieces.statistics)
    return WriteStat(
        fileId=sl.file_id, path=path, partitionPath=sl.partition, prevCommit=sl.base_instant or "null",
        numWrites=written, numUpdateWrites=written, totalWriteBytes=size, fileSizeInBytes=size,
        totalLogFilesCompacted=len(sl.log_files), totalLogSizeCompacted=sum(sl.log_sizes),
        prevBaseFile=sl.base_file.name if sl.base_file else None,
        runtimeStats={"totalScanTime": 0, "totalCreateTime": int((time.perf_counter() - t0) * 1000), "totalUpsertTime": 0},
    )


def write_clustered_file(ctx: WriteContext, partition: str, file_id: str, rows: pa.Table, task: TaskInfo) -> WriteStat:
    """Clustering: write merged rows (full schema, meta fields included) as the first base
    file of a new file group at ``ctx.instant``.  Commit time, sequence number and record
    key are preserved (as Hudi's clustering does), so incremental reads do not see the
    rewritten rows as changes; only ``_hoodie_file_name`` names the new file."""
    t0 = time.perf_counter()
    path = new_file_path(ctx, partition, file_id, task)
    out = conform(rows, ctx.file_schema)
    name = path.rsplit("/", 1)[-1]
    out = out.set_column(out.schema.get_field_index("_hoodie_file_name"), ctx.file_schema.field("_hoodie_file_name"),
                         pa.repeat(pa.scalar(name, pa.string()), out.num_rows))
    _mark(ctx, path, "CREATE")
    size, _ = _write_parquet(ctx, path, out, task)
    return WriteStat(fileId=file_id, path=path, partitionPath=partition, numWrites=out.num_rows,
                     numInserts=0, totalWriteBytes=size, fileSizeInBytes=size,
                     runtimeStats={"totalScanTime": 0, "totalUpsertTime": 0,
                                   "totalCreateTime": int((time.perf_counter() - t0) * 1000)})


def cluster_group(ctx: WriteContext, slice_ctx: Any, partition: str, slices: list[Any], num_output: int,
                  sort_by: tuple[str, ...], task: TaskInfo) -> list[WriteStat]:
    """Clustering: read the group's file slices merged, sort the rows by ``sort_by`` (when
    given), split them evenly into ``num_output`` new file groups and write those."""
    from lakesdk.format.file_naming import new_file_id

    parts = [conform(read_slice(slice_ctx, sl), ctx.file_schema) for sl in slices]
    rows = pa.concat_tables(parts) if parts else ctx.file_schema.empty_table()
    if rows.num_rows == 0:
        return []
    if sort_by and rows.num_rows > 1:
        rows = rows.sort_by([(c, "ascending") for c in sort_by])
    n = max(1, min(num_output, rows.num_rows))
    per = -(-rows.num_rows // n)
    return [write_clustered_file(ctx, partition, new_file_id(), rows.slice(o, per), task)
            for o in range(0, rows.num_rows, per)]
