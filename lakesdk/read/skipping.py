"""Data skipping: the file slices a filter cannot match, by the metadata table's column statistics.

A table whose metadata table (MDT) keeps ``column_stats`` (:mod:`lakesdk.format.column_stats`)
says, for every data file and indexed column, the smallest and largest value, the null count
and the row count.  A file slice is skipped when, for each of its files (base file and log
files), the filter is false or NULL for every row those statistics allow; a file without
statistics of a column the filter names may match, so its slice is read.  Statistics belong to
a file name, and a file never changes, so they hold for time travel and incremental reads too.

What is decided (anything else may match): ``AND``, ``OR``, comparisons of a column with a
value (``= != < <= > >=``), ``IN``, ``IS NULL`` and ``IS NOT NULL``.  A comparison with NULL
matches nothing, a column whose rows are all null matches no comparison.  Floats: a Parquet
writer leaves NaN out of its bounds, and Spark SQL orders NaN above every number and equal to
itself, so ``> >= !=`` never skip by a float column, and a comparison with NaN never skips.
An integer or decimal column compared with a double is compared in double, as the read
compares it, with its bounds widened past any engine's rounding.  A version 8 table's records
(Hudi 1.0's layout) say a timestamp as a long, read as microseconds of a microsecond column
(nothing is skipped by another unit's), and a decimal at scale 15.  Tables whose
merge may compute values (a custom merger or payload) skip only by their base files on
copy-on-write; on merge-on-read nothing is skipped.
"""

from __future__ import annotations

import datetime as _dt
import decimal
import math
from typing import TYPE_CHECKING, Any, Mapping

import pyarrow as pa

from lakesdk.format.column_stats import ColumnRange, ValueType, decimal_of, partition_id
from lakesdk.format.metadata_files import INITIAL_PREFIX

if TYPE_CHECKING:
    from lakesdk.format.file_group import FileSlice
    from lakesdk.read.bind import Bound
    from lakesdk.read.view import FileSystemView

__all__ = ["skip_slices", "prune_partitions", "may_match", "filter_columns"]

_FLIP = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "=": "=", "!=": "!="}
_VALUE_MERGES = ("COMMIT_TIME_ORDERING", "EVENT_TIME_ORDERING")


def filter_columns(bound: "Bound") -> set[str]:
    """The top-level columns a bound filter names."""
    from lakesdk.read.bind import _cols
    return {c.path[0] for c in _cols(bound.tree, []) if len(c.path) == 1}


def skip_slices(view: "FileSystemView", slices: list["FileSlice"], bound: "Bound | None") -> tuple[list["FileSlice"], int]:
    """The slices ``bound`` may match, and how many were skipped (none unless the view listed
    its files from an MDT that keeps ``column_stats``)."""
    config = view.config
    if bound is None or not slices or not view.from_metadata:
        return slices, 0
    reader = view.metadata
    if reader is None or "column_stats" not in view.metadata_partitions:
        return slices, 0
    if config.merge_mode not in _VALUE_MERGES and any(s.log_files for s in slices):
        return slices, 0
    columns = filter_columns(bound)
    if not columns:
        return slices, 0
    try:
        stats = reader.column_ranges(sorted(columns))
    except FileNotFoundError:
        return slices, 0          # the MDT was dropped or rebuilt meanwhile: read everything
    kept = [s for s in slices if _slice_may_match(s, bound, stats)]
    return kept, len(slices) - len(kept)


def prune_partitions(view: "FileSystemView", slices: list["FileSlice"],
                     bound: "Bound | None") -> tuple[list["FileSlice"], int, int]:
    """The slices of the partitions whose ``partition_stats`` may match ``bound``, how many
    slices and partitions were left out.  Only for a read of the latest state (the statistics
    say the latest file slices) from an MDT that keeps them, by the same rules as
    :func:`skip_slices`, and only when the MDT says no more than the view's timeline: every
    delta commit it holds belongs to an instant completed on it (or older than it), and no
    compaction is pending (Hudi's records then may leave out the slice being compacted)."""
    from lakesdk.format.partition_stats import PARTITION
    config = view.config
    if bound is None or not slices or view.as_of is not None or not view.from_metadata:
        return slices, 0, 0
    reader = view.metadata
    if reader is None or PARTITION not in view.metadata_partitions:
        return slices, 0, 0
    if config.merge_mode not in _VALUE_MERGES and any(s.log_files for s in slices):
        return slices, 0, 0
    tl = view.timeline
    if any(i.action in ("compaction", "logcompaction") for i in tl.pending):
        return slices, 0, 0
    done = {i.requested for i in tl.completed}
    first = min((i.requested for i in tl.instants), default="")
    beyond = {d for d in reader.delta_commits & reader.valid if d not in done and d >= first and not d.startswith(INITIAL_PREFIX)}
    if beyond and beyond - _undone_on(view):
        return slices, 0, 0       # a delta commit of an instant this timeline does not hold completed
    columns = filter_columns(bound)
    if not columns:
        return slices, 0, 0
    try:
        stats = reader.partition_ranges(sorted(columns))
    except FileNotFoundError:
        return slices, 0, 0
    ruled_out = {p for p in {s.partition for s in slices}
                 if partition_id(p) in stats and not may_match(bound.tree, stats[partition_id(p)])}
    kept = [s for s in slices if s.partition not in ruled_out]
    return kept, len(slices) - len(kept), len(ruled_out)


def _undone_on(view: "FileSystemView") -> set[str]:
    """The instants the completed rollbacks and restores of the view's timeline undid (their
    delta commits stay in lakesdk's MDT; the rollback's own delta commit says again what they
    changed), and the rollbacks a completed restore ran (their instants leave the timeline
    when it completes; their delta commits count)."""
    from lakesdk.format.restore_metadata import RestoreMetadataData
    from lakesdk.format.rollback_metadata import RollbackMetadataData
    out: set[str] = set()
    for inst in view.timeline.completed:
        if inst.action == "rollback":
            out |= view.store.metadata(inst, RollbackMetadataData).undone
        elif inst.action == "restore":
            md = view.store.metadata(inst, RestoreMetadataData)
            out |= md.undone | {str(r["startRollbackTime"]) for recs in md.rollbacks.values()
                                for r in recs if r.get("startRollbackTime")}
    return out


def _slice_may_match(s: "FileSlice", bound: "Bound", stats: Mapping[tuple[str, str], dict[str, ColumnRange]]) -> bool:
    names = ([s.base_file.name] if s.base_file is not None else []) + [f.name for f in s.log_files]
    part = partition_id(s.partition)
    return any(may_match(bound.tree, stats.get((part, n), {})) for n in names)


def may_match(n: Any, stats: Mapping[str, ColumnRange]) -> bool:
    """False only if no row of a file with these ranges can make ``n`` true."""
    from lakesdk.read.bind import BCol, BNode
    from lakesdk.read.values import BLit
    if not isinstance(n, BNode):
        return True
    if n.op == "and":
        return may_match(n.args[0], stats) and may_match(n.args[1], stats)
    if n.op == "or":
        return may_match(n.args[0], stats) or may_match(n.args[1], stats)
    if n.op in ("isnull", "notnull"):
        x = n.args[0]
        r = stats.get(x.path[0]) if isinstance(x, BCol) and len(x.path) == 1 else None
        if r is None or r.null_count < 0 or r.value_count < 0:
            return True
        return r.null_count > 0 if n.op == "isnull" else r.value_count > r.null_count
    if n.op == "in":
        x, items = n.args
        return any(may_match(BNode("=", (x, i)), stats) for i in items)
    if n.op in _FLIP:
        x, y = n.args
        op = n.op
        if isinstance(x, BLit) and isinstance(y, BCol):
            x, y, op = y, x, _FLIP[op]
        if not (isinstance(x, BCol) and isinstance(y, BLit) and len(x.path) == 1):
            return True
        r = stats.get(x.path[0])
        if r is None:
            return True
        return _compare_may_match(op, r, y.value, x.type)
    return True


def _compare_may_match(op: str, r: ColumnRange, value: Any, col_type: pa.DataType) -> bool:
    if value is None:
        return False                         # a comparison with NULL is never true
    if r.null_count >= 0 and r.value_count >= 0 and r.value_count == r.null_count:
        return False                         # every row is null (or there is no row)
    if r.min_value is None or r.max_value is None:
        return True
    floating = r.value_type in (ValueType.FLOAT, ValueType.DOUBLE)
    if isinstance(value, float) and math.isnan(value):
        return True                          # Spark orders NaN above every number
    if floating and op in (">", ">=", "!="):
        return True                          # NaN rows are outside the bounds
    if floating and any(isinstance(b, float) and math.isnan(b) for b in (r.min_value, r.max_value)):
        return True                          # a NaN bound (Hudi's log file ranges order NaN last) bounds nothing
    try:
        lo, hi = _as_value(r.min_value, r, col_type), _as_value(r.max_value, r, col_type)
        v = value
        if isinstance(v, float) and not floating and isinstance(lo, (int, decimal.Decimal)) \
                and not isinstance(lo, bool):
            lo, hi = _as_double(lo, -1), _as_double(hi, 1)
        if isinstance(lo, decimal.Decimal) and not isinstance(v, decimal.Decimal):
            v = decimal.Decimal(str(v))
        if op == "=":
            return bool(lo <= v <= hi)
        if op == "!=":
            return not (lo == hi == v)
        if op == "<":
            return bool(lo < v)
        if op == "<=":
            return bool(lo <= v)
        if op == ">":
            return bool(hi > v)
        if op == ">=":
            return bool(hi >= v)
    except (TypeError, ValueError, ArithmeticError, pa.ArrowException):
        return True                          # values lakesdk cannot compare: read the file
    return True


def _as_value(v: Any, r: ColumnRange, col_type: pa.DataType) -> Any:
    """A stored bound as the Python value of its column (as a bound literal holds it)."""
    vt = r.value_type
    if vt == ValueType.DATE:
        return _dt.date(1970, 1, 1) + _dt.timedelta(days=int(v))
    if vt == ValueType.LONG and pa.types.is_timestamp(col_type) and col_type.unit == "us":
        # Hudi 1.0's layout (table version 8) holds a timestamp's count of microseconds in a long
        return pa.scalar(int(v), pa.int64()).cast(col_type).as_py()
    if vt == ValueType.DECIMAL:
        scale = int((r.info or "0,0").split(",")[1])
        return decimal_of(int(v), scale)
    if vt in (ValueType.TIMESTAMP_MILLIS, ValueType.TIMESTAMP_MICROS, ValueType.LOCAL_TIMESTAMP_MILLIS,
              ValueType.LOCAL_TIMESTAMP_MICROS):
        unit = "ms" if vt in (ValueType.TIMESTAMP_MILLIS, ValueType.LOCAL_TIMESTAMP_MILLIS) else "us"
        local = vt in (ValueType.LOCAL_TIMESTAMP_MILLIS, ValueType.LOCAL_TIMESTAMP_MICROS)
        stored = pa.scalar(int(v), pa.int64()).cast(pa.timestamp(unit, None if local else "UTC"))
        target = col_type if pa.types.is_timestamp(col_type) else stored.type
        return stored.cast(target).as_py()
    return v


def _as_double(v: int | decimal.Decimal, direction: int) -> float:
    """A bound of an integer or decimal column compared with a double: a read compares the
    column's values converted to double, and engines round that conversion differently
    (Spark exactly, Arrow's decimal cast within a few units in the last place), so the bound
    is moved outwards (``direction`` -1 for a lower bound) by far more than either's error."""
    f = float(v)
    return f + direction * abs(f) * 1e-9
