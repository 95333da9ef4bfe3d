"""Reading one file slice: its base file merged with its log blocks (engine-agnostic).

Runs inside a Spark task or on the driver; memory is bounded by the slice.  Log blocks
are applied in order; blocks of instants that are not visible (pending, failed, or after
the read's moment) are skipped, and so are blocks that a rollback command block voids.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from lakesdk.format.file_group import FileSlice
from lakesdk.format.schema import with_meta_fields
from lakesdk.merge.ordering import KEY, OP, OP_DELETE, OP_UPSERT, PART, SEQ
from lakesdk.merge.slice_merge import merge_versions
from lakesdk.storage import Storage

__all__ = ["SliceReadContext", "conform", "read_slice", "slice_versions"]

IS_DELETED = "_hoodie_is_deleted"


def conform(table: pa.Table, schema: pa.Schema, *, keep: Iterable[str] = ()) -> pa.Table:
    """Project/cast ``table`` onto ``schema`` (missing columns become nulls); extra
    columns named in ``keep`` are carried along at the end."""
    cols, fields = [], []
    for f in schema:
        if f.name in table.column_names:
            c = table.column(f.name)
            if c.type != f.type:
                c = c.cast(f.type)
            cols.append(c)
        else:
            cols.append(pa.nulls(table.num_rows, f.type))
        fields.append(pa.field(f.name, f.type, nullable=True))
    for k in keep:
        if k in table.column_names and k not in schema.names:
            cols.append(table.column(k))
            fields.append(table.schema.field(k))
    return pa.Table.from_arrays(cols, schema=pa.schema(fields))


@dataclass(frozen=True)
class SliceReadContext:
    """What a slice read needs; picklable."""

    storage: Storage
    schema: pa.Schema                    # data schema (no meta fields)
    ordering: str | None
    merge_mode: str
    valid_instants: frozenset[str]       # requested times of the visible delta commits
    columns: tuple[str, ...] | None = None
    column_groups: dict[str, list[str]] | None = None
    merger: Any = None

    @property
    def full_schema(self) -> pa.Schema:
        return with_meta_fields(self.schema)


def _tag(t: pa.Table, seq: int, op: int | np.ndarray) -> pa.Table:
    n = t.num_rows
    ops = pa.array(op, pa.int8()) if isinstance(op, np.ndarray) else pa.repeat(pa.scalar(op, pa.int8()), n)
    return t.append_column(SEQ, pa.repeat(pa.scalar(seq, pa.int64()), n)).append_column(OP, ops)


def slice_versions(ctx: SliceReadContext, sl: FileSlice, columns: Iterable[str] | None = None) -> pa.Table:
    """Every version of every record of the slice, in the full schema plus ``_lk_seq``/``_lk_op``."""
    from lakesdk.format.damaged import damaged_file
    from lakesdk.format.log_block import BlockType, read_log_file

    full = ctx.full_schema
    if columns is not None:
        need = list(dict.fromkeys([*columns, KEY, PART, *([ctx.ordering] if ctx.ordering else [])]))
        full = pa.schema([f for f in full if f.name in need])
    parts: list[pa.Table] = []
    if sl.base_path:
        with ctx.storage.open_input(sl.base_path) as f, damaged_file(sl.base_path):
            base_cols = [c for c in full.names if c in pq.read_schema(f).names]
            f.seek(0)
            base = pq.read_table(f, columns=base_cols)
        parts.append(_tag(conform(base, full), 0, OP_UPSERT))
    blocks = []
    paths = []
    for path in sl.log_paths:
        found = read_log_file(ctx.storage.read(path))
        blocks.extend(found)
        paths.extend([path] * len(found))
    voided = {b.target_instant for b in blocks if b.is_rollback}
    seq = 0
    for b, path in zip(blocks, paths):
        if b.block_type not in (BlockType.AVRO_DATA, BlockType.PARQUET_DATA, BlockType.DELETE):
            continue
        if b.instant not in ctx.valid_instants or b.instant in voided:
            continue
        seq += 1
        if b.block_type == BlockType.DELETE:
            with damaged_file(path, f"DELETE block at offset {b.offset} of the log file"):
                d = b.delete_records()
            ordv = d.column("ordering_value") if "ordering_value" in d.column_names else None
            cols = {KEY: d.column(KEY), PART: d.column(PART)}
            if ctx.ordering and ordv is not None and ctx.ordering in full.names:
                target = full.field(ctx.ordering).type
                # Hudi writes an int 0 (IntWrapper) for deletes that carry no ordering value
                if ordv.type == pa.int32():
                    ordv = pc.if_else(pc.equal(ordv, 0), pa.scalar(None, ordv.type), ordv)
                try:
                    cols[ctx.ordering] = pc.cast(ordv, target)
                except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                    cols[ctx.ordering] = pa.nulls(d.num_rows, target)
            parts.append(_tag(conform(pa.table(cols), full), seq, OP_DELETE))
            continue
        with damaged_file(path, f"{b.block_type.name} block at offset {b.offset} of the log file"):
            recs = b.records()
        ops: int | np.ndarray = OP_UPSERT
        if IS_DELETED in recs.column_names:
            flag = pc.fill_null(recs.column(IS_DELETED), False)
            ops = np.where(np.asarray(flag.to_numpy(zero_copy_only=False), dtype=bool), OP_DELETE, OP_UPSERT).astype(np.int8)
        parts.append(_tag(conform(recs, full), seq, ops))
    if not parts:
        return _tag(full.empty_table(), 0, OP_UPSERT)
    return pa.concat_tables(parts)


def read_slice(ctx: SliceReadContext, sl: FileSlice, columns: Iterable[str] | None = None) -> pa.Table:
    """The merged rows of one file slice (full schema, or ``columns`` plus key fields)."""
    if not sl.log_files and sl.base_path:
        full = ctx.full_schema
        from lakesdk.format.damaged import damaged_file
        with ctx.storage.open_input(sl.base_path) as f, damaged_file(sl.base_path):
            t = pq.read_table(f)
        out = conform(t, full)
        if IS_DELETED in out.column_names:
            out = out.filter(pc.invert(pc.fill_null(out.column(IS_DELETED), False)))
        return out.select(list(columns)) if columns is not None else out
    versions = slice_versions(ctx, sl, None if (ctx.column_groups or ctx.merger) else columns)
    merged = merge_versions(versions, ordering=ctx.ordering, merge_mode=ctx.merge_mode,
                            column_groups=ctx.column_groups, merger=ctx.merger)
    merged = merged.drop_columns([SEQ, OP])
    return merged.select(list(columns)) if columns is not None else merged
