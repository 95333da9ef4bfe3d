"""The ``column_stats`` partition of the metadata table as lakesdk keeps it (table versions 8 and 9).

Every file an action adds gets one record per indexed column (:mod:`lakesdk.format.column_stats`):
a base file's ranges come from its Parquet footer, a log file's from its blocks (a Parquet
block's footer, an Avro block's rows; a log file holding only deletes has empty ranges, so
that a reader still skips its file slice by the base file).  Every file a clean, rollback or
restore deletes gets a deleted record per column.  The records go to the file groups
``col-stats-0000-0`` and ``col-stats-0001-0`` by key hash, as Hudi writes them.

Which columns: those the table's index definition (``.hoodie/.index_defs/index.json``) names
for ``column_stats``; a table without one gets Hudi's default list (the meta fields, then the
first 32 data columns of indexed types) written there when lakesdk builds the partition.

A version 8 table's records have Hudi 1.0's layout (V1, :func:`lakesdk.format.column_stats.v1_range`),
kept only while every indexed column has a type lakesdk writes V1 records of as Hudi 1.0 does
(:func:`v1_columns_faithful`).
"""

from __future__ import annotations

import dataclasses
import json
from typing import TYPE_CHECKING, Any, Callable, Iterable

import pyarrow as pa

from lakesdk.format.column_stats import (
    FILE_GROUPS,
    INDEX_DEFS_PATH,
    V1,
    ColumnRange,
    deleted_record,
    file_group_index,
    index_definition,
    indexed_columns,
    layout_of,
    ranges_from_arrow,
    ranges_from_parquet,
    read_index_columns,
    stats_record,
    unfaithful_v1_columns,
    v1_range,
    value_type_of,
)
from lakesdk.format.file_naming import is_log_file

if TYPE_CHECKING:
    from lakesdk.commit.context import TableContext
    from lakesdk.format.metadata_files import FilesChange
    from lakesdk.storage import Storage

__all__ = ["stats_columns", "stats_records_of", "by_file_group", "write_index_definition", "file_ranges",
           "layout_ranges", "v1_columns_faithful", "exact_ranges", "with_absent_columns"]


def stats_columns(ctx: "TableContext", schema_json: str | None = None) -> tuple[list[str], bool]:
    """The columns the table's ``column_stats`` index holds, and whether its index definition
    names them: else Hudi's default list of the table schema (``schema_json``, an Avro schema,
    else the create schema; none without a schema)."""
    named = read_index_columns(_index_defs(ctx.storage))
    if named:
        return named, True
    from lakesdk.format.schema import avro_to_arrow
    avro: Any = json.loads(schema_json) if schema_json else ctx.config.create_schema
    if not avro:
        return [], False
    return indexed_columns(avro_to_arrow(avro), meta_fields=ctx.config.populate_meta_fields,
                           layout=layout_of(ctx.config.version)), False


def v1_columns_faithful(ctx: "TableContext", schema_json: str | None = None) -> bool:
    """Whether every column a version 8 table's ``column_stats`` indexes (:func:`stats_columns`
    of ``schema_json``, else of the latest commit's schema) has a type lakesdk writes Hudi
    1.0's records of (:func:`lakesdk.format.column_stats.v1_supported`)."""
    from lakesdk.format.schema import avro_to_arrow
    if schema_json is None:
        schema_json = _latest_schema(ctx)
    columns, _ = stats_columns(ctx, schema_json)
    avro: Any = json.loads(schema_json) if schema_json else ctx.config.create_schema
    if not avro or not columns:
        return True
    return not unfaithful_v1_columns(avro_to_arrow(avro), columns)


def _latest_schema(ctx: "TableContext") -> str | None:
    for inst in reversed(ctx.store.load().commits.instants):
        schema = ctx.store.commit_metadata(inst).extra_metadata.get("schema")
        if schema:
            return str(schema)
    return None


def _index_defs(storage: "Storage") -> bytes | None:
    """The bytes of the table's index definition, None when it has none."""
    try:
        return storage.read(INDEX_DEFS_PATH)
    except FileNotFoundError:
        return None


def write_index_definition(storage: "Storage", columns: list[str], layout: int) -> None:
    """Name ``columns`` in the table's index definition (other indexes' definitions kept)."""
    storage.write(INDEX_DEFS_PATH, index_definition(_index_defs(storage), columns, layout))


def _merge(a: ColumnRange, b: ColumnRange) -> ColumnRange:
    """Two blocks' ranges of a column (of one type) as one: the counts summed, the bounds in
    Java's order (a float NaN above every number)."""
    from lakesdk.format.partition_stats import aggregate
    merged = aggregate([a, b], (a.value_type, a.info))
    assert merged is not None
    return merged


def exact_ranges(ranges: list[ColumnRange], read: Callable[[list[str]], pa.Table]) -> list[ColumnRange]:
    """``ranges`` (a Parquet footer's, :func:`~lakesdk.format.column_stats.ranges_from_parquet`)
    with those the footer does not say (a row group without statistics, a value too long for
    them, a NaN bound, NaN left out of the bounds of a chunk of only NaN) computed from the
    column's values (``read``: the table of the named columns), sizes kept: a record with no
    bounds makes Apache Hudi's data skipping leave out a file that holds matching rows."""
    unknown = [r.column for r in ranges if r.null_count < 0]
    if not unknown:
        return ranges
    exact = {r.column: r for r in ranges_from_arrow(read(unknown), unknown)}
    return [dataclasses.replace(exact[r.column], total_size=r.total_size,
                                total_uncompressed_size=r.total_uncompressed_size)
            if r.column in exact else r for r in ranges]


def file_ranges(storage: "Storage", path: str, columns: list[str], schema: pa.Schema | None = None) -> list[ColumnRange]:
    """The ranges of ``columns`` in the data file at ``path`` (base file or log file); a base
    file lakesdk cannot read statistics of (Lance) has none."""
    import pyarrow.parquet as pq

    from lakesdk.format.damaged import damaged_file
    name = path.rsplit("/", 1)[-1]
    if not is_log_file(name):
        if not name.endswith(".parquet"):
            return []
        with damaged_file(path):
            if storage.is_local:
                pf = pq.ParquetFile(storage.url(path))
            else:
                pf = pq.ParquetFile(pa.BufferReader(storage.read(path)))
            return exact_ranges(ranges_from_parquet(pf.metadata, pf.schema_arrow, columns), pf.read)
    from lakesdk.format.log_block import read_log_file
    from lakesdk.format.log_framing import BlockType
    out: dict[str, ColumnRange] = {}
    data_schema: pa.Schema | None = None
    with damaged_file(path):
        blocks = read_log_file(storage.read(path))
        for block in blocks:
            if block.block_type == BlockType.PARQUET_DATA:
                pf = pq.ParquetFile(pa.BufferReader(block.content))
                ranges = exact_ranges(ranges_from_parquet(pf.metadata, pf.schema_arrow, columns), pf.read)
                data_schema = pf.schema_arrow
            elif block.block_type in (BlockType.AVRO_DATA,):
                records = block.records(columns)
                ranges = ranges_from_arrow(records, columns)
                data_schema = records.schema
            else:
                continue
            for r in ranges:
                out[r.column] = _merge(out[r.column], r) if r.column in out else r
    if not out:
        # deletes only: no value in any column (a reader skips by the other files of the slice)
        empty = schema if schema is not None else data_schema
        if empty is not None:
            return ranges_from_arrow(empty.empty_table(), columns)
    return list(out.values())


def layout_ranges(ranges: Iterable[ColumnRange], layout: int) -> list[ColumnRange]:
    """``ranges`` as records of ``layout`` hold them (V1: :func:`~lakesdk.format.column_stats.v1_range`)."""
    if layout != V1:
        return list(ranges)
    return [v for v in (v1_range(r) for r in ranges) if v is not None]


def stats_records_of(ctx: "TableContext", change: "FilesChange", columns: list[str],
                     schema: pa.Schema | None = None) -> dict[str, dict[str, Any]]:
    """The ``column_stats`` records of a change, by key, in the table's layout."""
    layout = layout_of(ctx.config.version)
    out: dict[str, dict[str, Any]] = {}
    for part, names in change.deleted.items():
        for n in names:
            for c in columns:
                rec = deleted_record(part, n, c, layout=layout)
                out[rec["key"]] = rec
    for part, files in change.added.items():
        for n in files:
            path = f"{part}/{n}" if part else n
            ranges = with_absent_columns(file_ranges(ctx.storage, path, columns, schema), columns, schema)
            for r in layout_ranges(ranges, layout):
                rec = stats_record(part, n, r, layout=layout)
                out[rec["key"]] = rec
    return out


def with_absent_columns(ranges: list[ColumnRange], columns: Iterable[str], schema: pa.Schema | None) -> list[ColumnRange]:
    """``ranges`` of a file with the ``columns`` it does not hold (written before they were
    added to the table) as columns of only nulls, typed as ``schema`` (the table's) has them:
    Apache Hudi's data skipping takes a column a file has no record of as of unknown null
    count, and leaves the file out for ``IS NULL`` when another column of the filter has a
    record of it.  A file of no indexed column (its row count unknown) gets none."""
    if schema is None or not ranges:
        return ranges
    have = {r.column for r in ranges}
    rows = max(r.value_count for r in ranges)
    out = list(ranges)
    for c in columns:
        vt = value_type_of(schema.field(c).type) if c not in have and c in schema.names else None
        if vt is not None and rows >= 0:
            out.append(ColumnRange(c, vt[0], vt[1], None, None, rows, rows))
    return out


def by_file_group(records: dict[str, dict[str, Any]], groups: int = FILE_GROUPS) -> dict[int, dict[str, dict[str, Any]]]:
    out: dict[int, dict[str, dict[str, Any]]] = {}
    for k, r in records.items():
        out.setdefault(file_group_index(k, groups), {})[k] = r
    return out


def table_arrow_schema(columns: Iterable[str], schema_json: str | None) -> pa.Schema | None:
    if not schema_json:
        return None
    from lakesdk.format.schema import avro_to_arrow, with_meta_fields
    s = with_meta_fields(avro_to_arrow(json.loads(schema_json)))
    wanted = set(columns)
    return pa.schema([f for f in s if f.name in wanted])
