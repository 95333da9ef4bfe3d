"""Reading one file slice: its base file merged with its log blocks (engine-agnostic).

Runs inside a Spark task or on the driver; memory is bounded by the slice.  Log blocks
are applied in order; blocks of instants that are not visible (pending, failed, or after
the read's moment) are skipped, and so are blocks that a rollback command block voids.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Iterable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakesdk.exceptions import CorruptFileError
from lakesdk.format.file_group import FileSlice
from lakesdk.format.schema import with_meta_fields
from lakesdk.merge.columns import IS_DELETED
from lakesdk.merge.ordering import KEY, OP, OP_DELETE, OP_UPSERT, PART, SEQ, Ordering, fields_of
from lakesdk.merge.slice_merge import merge_versions
from lakesdk.storage import Storage

if TYPE_CHECKING:
    from lakesdk.format.table_config import TableConfig

__all__ = ["SliceReadContext", "as_rows_of", "conform", "log_versions", "is_in", "merge_touched", "read_slice", "slice_versions", "split_base",
           "split_touched", "touched_keys", "keys_as", "deleted_flags"]



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
    ordering: Ordering                     # one ordering field, a tuple of several, or None
    merge_mode: str
    valid_instants: frozenset[str]       # requested times of the visible delta commits
    columns: tuple[str, ...] | None = None
    column_groups: dict[str, list[str]] | None = None
    merger: Any = None

    @property
    def full_schema(self) -> pa.Schema:
        return with_meta_fields(self.schema)

    @classmethod
    def for_table(cls, storage: Storage, config: "TableConfig", schema: pa.Schema, valid_instants: frozenset[str],
                  merger: Any = None) -> "SliceReadContext":
        """How a table's file slices are merged (its ordering, merge mode and column groups),
        with the log blocks of ``valid_instants`` and the table's ``merger``."""
        return cls(storage, schema, config.ordering_key, config.merge_mode, valid_instants,
                   column_groups=config.column_groups, merger=merger)


def _tag(t: pa.Table, seq: int, op: int | np.ndarray) -> pa.Table:
    n = t.num_rows
    ops = pa.array(op, pa.int8()) if isinstance(op, np.ndarray) else pa.repeat(pa.scalar(op, pa.int8()), n)
    return t.append_column(SEQ, pa.repeat(pa.scalar(seq, pa.int64()), n)).append_column(OP, ops)


def _projected_schema(ctx: SliceReadContext, columns: Iterable[str] | None) -> pa.Schema:
    full = ctx.full_schema
    if columns is not None:
        need = list(dict.fromkeys([*columns, KEY, PART, *fields_of(ctx.ordering), IS_DELETED]))
        full = pa.schema([f for f in full if f.name in need])
    return full


def _read_base_file(ctx: SliceReadContext, path: str, names: list[str] | None) -> pa.Table:
    """A base file's columns among ``names`` (None: all), read by the reader of its format
    (:mod:`lakesdk.engine.base_file`; local files through Arrow's own file I/O)."""
    from lakesdk.engine.base_file import read_file
    return read_file(ctx.storage, path, names)


def _base_rows(ctx: SliceReadContext, sl: FileSlice, full: pa.Schema) -> pa.Table | None:
    """The slice's base file in ``full`` (None: the slice has no base file)."""
    if not sl.base_path:
        return None
    return conform(_read_base_file(ctx, sl.base_path, full.names), full)


def log_versions(ctx: SliceReadContext, sl: FileSlice, full: pa.Schema,
                  key_field: str | None = None) -> list[pa.Table]:
    """The record versions of the slice's visible log blocks, in ``full`` plus
    ``_lk_seq``/``_lk_op`` (1, 2, ... in block order).

    ``key_field``: the integer field a simple record key is the text of, in ``full`` (which
    then need not hold the record key): a delete block's keys are cast to its values,
    raising ``ArrowInvalid`` unless every key is the text of one."""
    from lakesdk.format.damaged import damaged_file
    from lakesdk.format.log_block import BlockType, read_log_file

    parts: list[pa.Table] = []
    blocks = []
    paths = []
    for i, path in enumerate(sl.log_paths):
        data = ctx.storage.read(path)
        expected = sl.log_sizes[i] if i < len(sl.log_sizes) else 0
        if len(data) < expected:
            # listed from the metadata table (or cut after the listing): a log file cut at a block
            # boundary would read as a shorter valid one and drop committed updates without a word
            raise CorruptFileError(
                f"log file {path} of file group {sl.file_id} is damaged: expected {expected} bytes (the size its "
                f"commit recorded), found {len(data)}. Reading it would return some of its records and silently "
                "drop the rest. Run `lakesdk check` on the table to list every damaged file, then restore the file "
                "or roll the table back before reading or writing again", path=path)
        found = read_log_file(data)
        blocks.extend(found)
        paths.extend([path] * len(found))
    voided = {b.target_instant for b in blocks if b.is_rollback}
    wanted = [*full.names, IS_DELETED]   # only these columns of a data block are read
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
            if key_field is not None:
                cols[key_field] = keys_as(d.column(KEY), full.field(key_field).type)
            fields = fields_of(ctx.ordering)
            if ordv is not None and fields and all(f in full.names for f in fields):
                # Hudi writes an int 0 (IntWrapper) for deletes that carry no ordering value
                if ordv.type == pa.int32():
                    ordv = pc.if_else(pc.equal(ordv, 0), pa.scalar(None, ordv.type), ordv)
                # several ordering fields: a struct of their values (ArrayWrapper), one child per field
                parts_of = ([ordv.combine_chunks().field(i) if i < ordv.type.num_fields else None
                             for i in range(len(fields))] if pa.types.is_struct(ordv.type)
                            else [ordv] if len(fields) == 1 else [None] * len(fields))
                for f, v in zip(fields, parts_of):
                    target = full.field(f).type
                    try:
                        cols[f] = pc.cast(v, target) if v is not None else pa.nulls(d.num_rows, target)
                    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                        cols[f] = pa.nulls(d.num_rows, target)
            parts.append(_tag(conform(pa.table(cols), full), seq, OP_DELETE))
            continue
        with damaged_file(path, f"{b.block_type.name} block at offset {b.offset} of the log file"):
            recs = b.records(wanted)
        ops: int | np.ndarray = OP_UPSERT
        if IS_DELETED in recs.column_names:
            flag = pc.fill_null(recs.column(IS_DELETED), False)
            ops = np.where(np.asarray(flag.to_numpy(zero_copy_only=False), dtype=bool), OP_DELETE, OP_UPSERT).astype(np.int8)
        parts.append(_tag(conform(recs, full), seq, ops))
    return parts


def slice_versions(ctx: SliceReadContext, sl: FileSlice, columns: Iterable[str] | None = None) -> pa.Table:
    """Every version of every record of the slice, in the full schema plus ``_lk_seq``/``_lk_op``."""
    full = _projected_schema(ctx, columns)
    base = _base_rows(ctx, sl, full)
    parts = ([_tag(base, 0, OP_UPSERT)] if base is not None else []) + log_versions(ctx, sl, full)
    if not parts:
        return _tag(full.empty_table(), 0, OP_UPSERT)
    return pa.concat_tables(parts)


def _merge(ctx: SliceReadContext, versions: pa.Table, key: str = KEY) -> pa.Table:
    merged = merge_versions(versions, ordering=ctx.ordering, merge_mode=ctx.merge_mode,
                            column_groups=ctx.column_groups, merger=ctx.merger, key=key)
    return merged.drop_columns([c for c in (SEQ, OP) if c in merged.column_names])


def as_rows_of(merged: pa.Table, schema: pa.Schema) -> pa.Table:
    if merged.schema == schema:
        return merged
    return conform(merged, schema)


def read_slice(ctx: SliceReadContext, sl: FileSlice, columns: Iterable[str] | None = None) -> pa.Table:
    """The merged rows of one file slice (full schema, or ``columns`` plus key fields).

    Only the keys that have a version in the log blocks are merged: the base rows of the
    other keys pass through untouched (as in Hudi's file group reader, a merger only sees
    keys with more than the base version).  The untouched base rows come first, in the base
    file's order, then the winners of the touched keys (no particular order).
    """
    if not sl.log_files and sl.base_path:
        out = drop_deleted(conform(_read_base_file(ctx, sl.base_path, None), ctx.full_schema))
        return out.select(list(columns)) if columns is not None else out
    full = _projected_schema(ctx, None if (ctx.column_groups is not None or ctx.merger) else columns)
    base = _base_rows(ctx, sl, full)
    logs = log_versions(ctx, sl, full)
    untouched, touched, n = split_touched(base, logs)
    merged = merge_touched(ctx, [(touched, logs, n)])
    if merged is None:
        out = untouched if untouched is not None else full.empty_table()
    elif untouched is None:
        out = merged
    else:
        out = pa.concat_tables([untouched, as_rows_of(merged, untouched.schema)])
    return out.select(list(columns)) if columns is not None else out


def split_touched(base: pa.Table | None, logs: list[pa.Table],
                  key_field: str | None = None) -> tuple[pa.Table | None, pa.Table | None, int]:
    """(the base rows no log version touches, the touched ones as versions of sequence 0 in
    the logs' schema, the number of keys the logs touch) of one file slice.

    ``key_field``: the base rows carry no record key column but the one integer key field
    the record key is the text of (a simple key generator); log keys that are not such
    text raise ``ArrowInvalid``."""
    logs = [t for t in logs if t.num_rows]
    if not logs:    # none visible: the base rows alone, those flagged deleted dropped (as without log files)
        return (drop_deleted(base) if base is not None else None), None, 0
    keys = touched_keys(logs)
    if base is None or base.num_rows == 0:
        return base, None, len(keys)
    if key_field is not None:
        keys = keys_as(keys, base.schema.field(key_field).type)
    untouched, touched = split_base(base, keys, key_field, logs[0].schema)
    return untouched, touched, len(keys)


def touched_keys(logs: list[pa.Table], key: str = KEY) -> pa.Array:
    """The distinct record keys (or values of the ``key`` column) of a slice's log versions."""
    logs = [t for t in logs if t.num_rows]
    if not logs:
        return pa.array([], pa.string())
    return pc.unique(pa.chunked_array([c for t in logs for c in t.column(key).chunks],
                                      type=logs[0].schema.field(key).type))


def keys_as(keys: pa.Array, key_type: pa.DataType) -> pa.Array:
    """Record keys as values of the integer key field's ``key_type``, raising
    ``ArrowInvalid`` unless every key is the text of its value."""
    typed = pc.cast(keys, key_type)
    if not pc.equal(pc.cast(typed, pa.string()), keys).to_numpy(zero_copy_only=False).all():
        raise pa.ArrowInvalid("record keys that are not the text of the key field")
    return typed


def split_base(base: pa.Table | pa.RecordBatch, keys: pa.Array, key_field: str | None,
               log_schema: pa.Schema, hit: pa.Array | None = None) -> tuple[pa.Table, pa.Table | None]:
    """(the rows of ``base`` whose key is not in ``keys``, those whose key is, as versions of
    sequence 0 in ``log_schema``) - by the record key column, or by ``key_field`` (then
    ``keys`` are of its type); ``hit``: which rows those are, when known."""
    if isinstance(base, pa.RecordBatch):
        base = pa.Table.from_batches([base])
    flagged = deleted_flags(base)
    if hit is None:
        hit = is_in(base.column(key_field), keys) if key_field is not None else pc.is_in(base.column(KEY), value_set=keys)
    if not pc.any(hit).as_py():
        return (base if flagged is None else base.filter(pc.invert(flagged))), None
    touched = base.filter(hit)
    if key_field is not None and KEY in log_schema.names:
        touched = touched.append_column(pa.field(KEY, pa.string()), pc.cast(touched.column(key_field), pa.string()))
    schema = pa.schema([f for f in log_schema if f.name not in (SEQ, OP)])
    if touched.schema != schema:
        touched = conform(touched, schema)
    if flagged is None:
        return base.filter(pc.invert(hit)), _tag(touched, 0, OP_UPSERT)
    # a base row flagged _hoodie_is_deleted is a delete: it takes part in the merge as one
    ops = np.where(np.asarray(flagged.filter(hit).to_numpy(zero_copy_only=False), dtype=bool), OP_DELETE, OP_UPSERT)
    return base.filter(pc.invert(pc.or_(hit, flagged))), _tag(touched, 0, ops.astype(np.int8))


def drop_deleted(t: pa.Table) -> pa.Table:
    """``t`` without the rows ``_hoodie_is_deleted`` flags."""
    flagged = deleted_flags(t)
    return t if flagged is None else t.filter(pc.invert(flagged))


def deleted_flags(t: pa.Table) -> pa.ChunkedArray | None:
    """Per row, whether ``_hoodie_is_deleted`` flags it (None: no row is flagged)."""
    if IS_DELETED not in t.column_names:
        return None
    flags = pc.fill_null(t.column(IS_DELETED), False)
    return flags if pc.any(flags).as_py() else None


#: a lookup table of booleans is used for integer membership up to this many slots per value
_DENSE_SLOTS_PER_VALUE = 64


def is_in(values: pa.ChunkedArray | pa.Array, keys: pa.Array) -> pa.Array | pa.ChunkedArray:
    """``pc.is_in(values, value_set=keys)`` (nulls are not in), faster for integer values
    whose range is dense: one boolean per integer of the keys' range, indexed by value."""
    if (not pa.types.is_integer(values.type) or values.type == pa.uint64() or values.null_count
            or len(keys) == 0 or keys.type != values.type):
        return pc.is_in(values, value_set=keys)
    k = np.asarray(keys.drop_null().to_numpy(zero_copy_only=False), dtype=np.int64)
    if k.size == 0:
        return pc.is_in(values, value_set=keys)
    lo, hi = int(k.min()), int(k.max())
    span = hi - lo + 1
    if span > _DENSE_SLOTS_PER_VALUE * (len(values) + k.size):
        return pc.is_in(values, value_set=keys)
    slots = np.zeros(span + 1, dtype=bool)      # the last slot: every value outside the range
    slots[k - lo] = True
    chunks = values.chunks if isinstance(values, pa.ChunkedArray) else [values]
    out = []
    for chunk in chunks:
        v = np.asarray(chunk.to_numpy(zero_copy_only=False), dtype=np.int64)
        # value - lo as unsigned: below the range wraps to a huge offset; both ends clip to `span`
        off = np.subtract(v, lo, dtype=np.int64).view(np.uint64)
        np.minimum(off, np.uint64(span), out=off)
        out.append(pa.array(slots[off]))
    return pa.chunked_array(out, type=pa.bool_()) if isinstance(values, pa.ChunkedArray) else out[0]


#: slices whose versions add up to fewer rows than this are merged together (fewer calls);
#: larger merges are slower per row than several small ones (hash tables out of cache)
_MERGE_BATCH_ROWS = 32_768


def merge_touched(ctx: SliceReadContext, parts: list[tuple[pa.Table | None, list[pa.Table], int]],
                  map_: Callable[..., Iterable[Any]] = map, key: str = KEY) -> pa.Table | None:
    """The winners of the touched keys of many file slices: ``parts`` holds, per slice, its
    touched base versions, its log versions and the number of keys its logs touch
    (:func:`split_touched`).  Small slices are merged together when no key has log versions
    in two of them and the merger is not a user's (a user's merger sees one slice at a
    time).  ``map_``: how the merges run (``map``, or a pool's).  ``key``: the column that
    identifies a record in every part (:func:`merge_versions`)."""
    slices = [([*([touched] if touched is not None else []), *[t for t in logs if t.num_rows]], logs, n)
              for touched, logs, n in parts]
    slices = [s for s in slices if s[0]]
    if not slices:
        return None
    batches: list[list[pa.Table]] = []
    run: list[tuple[list[pa.Table], list[pa.Table], int]] = []

    def flush() -> None:
        if len(run) > 1:
            keys = pa.chunked_array([c for _, logs, _ in run for t in logs for c in t.column(key).chunks],
                                    type=run[0][0][0].schema.field(key).type)
            if pc.count_distinct(keys).as_py() == sum(n for _, _, n in run):
                batches.append([t for g, _, _ in run for t in g])
                run.clear()
                return
        batches.extend(g for g, _, _ in run)
        run.clear()

    for s in slices:
        rows = sum(t.num_rows for t in s[0])
        if ctx.merger is not None or rows >= _MERGE_BATCH_ROWS:
            flush()
            batches.append(s[0])
            continue
        if run and sum(t.num_rows for g, _, _ in run for t in g) + rows > _MERGE_BATCH_ROWS:
            flush()
        run.append(s)
    flush()
    schema = pa.schema([f for f in slices[0][0][0].schema if f.name not in (SEQ, OP)])
    merged = list(map_(lambda g: as_rows_of(_merge(ctx, pa.concat_tables(g), key), schema), batches))
    return pa.concat_tables(merged)
