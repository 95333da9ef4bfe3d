"""The write of one file group's tagged records: which task writes it, and its file.

* copy-on-write, and a new file group: the next base file (:func:`write_file_group`);
* merge-on-read: a log file of the latest file slice (:func:`write_log_group`), unless a key
  of the records is stored more than once in that slice (an insert or bulk insert stored it
  again, or a clustering put two file groups' copies together).  Then the slice's records are
  merged with the incoming ones into a new base file of the file group, as a copy-on-write
  write would (Hudi's merge-on-read writers rewrite small base files the same way).

A log record cannot update or delete several copies of one key: a reader merges a log
record with one base record of its key (Hudi's key-based file group reader merges the first,
lakesdk's merge keeps one version per key), so the copies would read differently in
different readers.  In a base file each stored copy is merged with the incoming record on its
own (:func:`~lakesdk.merge.ordering.merge_into_base`), which every reader reads alike.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from lakesdk.engine.slice_reader import conform, read_slice
from lakesdk.engine.tasks import (
    FileGroupTarget,
    TaskInfo,
    WriteContext,
    planned_file,
    write_file_group,
    write_log_group,
)
from lakesdk.format.commit_metadata import WriteStat
from lakesdk.format.file_naming import BaseFile
from lakesdk.merge.ordering import ROW, SEQ, MergeCounts

__all__ = ["write_group", "planned_group_file", "rewrites_slice"]


def _stored_twice(incoming: pa.Table) -> bool:
    """Whether the key index tagged some record more than once for this file group: its key
    is stored more than once in the file slice (the copies share the record's ``_lk_seq``)."""
    return SEQ in incoming.column_names and incoming.num_rows > 1 and \
        pc.count_distinct(incoming.column(SEQ), mode="all").as_py() < incoming.num_rows


def rewrites_slice(ctx: WriteContext, target: FileGroupTarget, incoming: pa.Table) -> bool:
    """Whether a merge-on-read write of ``incoming`` into ``target`` writes a new base file of
    the file group instead of a log file (a key stored more than once in its latest slice)."""
    return bool(ctx.merge_on_read and target.base_path and target.slice is not None and ctx.slice_ctx is not None
                and _stored_twice(incoming))


def planned_group_file(ctx: WriteContext, target: FileGroupTarget, incoming: pa.Table,
                       task: TaskInfo) -> tuple[str, str, str]:
    """(partition, file name, IO type) of the file :func:`write_group` writes (its marker)."""
    if rewrites_slice(ctx, target, incoming):
        return target.partition, BaseFile(target.file_id, task.write_token, ctx.instant).name, "MERGE"
    return planned_file(ctx, target, task)


def cdc_marker(ctx: WriteContext, partition: str, file_id: str, task: TaskInfo) -> tuple[str, str, str]:
    """The marker of the CDC log file a rewrite of a base file may write beside it."""
    from lakesdk.format.cdc import CDC_SUFFIX
    from lakesdk.format.file_naming import LogFile
    return partition, LogFile(file_id, ctx.instant, 1, task.write_token, CDC_SUFFIX).name, "CREATE"


def write_group(ctx: WriteContext, target: FileGroupTarget, incoming: pa.Table, task: TaskInfo) -> tuple[WriteStat, MergeCounts]:
    """Write the tagged records of one file group (see the module docstring)."""
    if ctx.merge_on_read and (target.base_path or target.has_logs):
        if rewrites_slice(ctx, target, incoming):
            stored: Any = conform(read_slice(ctx.slice_ctx, target.slice), ctx.file_schema)
            rows = incoming.drop_columns([ROW]) if ROW in incoming.column_names else incoming
            return write_file_group(ctx, target, rows, task, stored=stored)
        return write_log_group(ctx, target, incoming.drop_columns([ROW]) if ROW in incoming.column_names
                               else incoming, task)
    return write_file_group(ctx, target, incoming, task)
