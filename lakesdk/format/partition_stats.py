"""Hudi's partition statistics index: the ``partition_stats`` partition of the metadata table.

For every data partition and every indexed column the MDT holds one ``HoodieMetadataRecord``
of type 6 (``PARTITION_STATS``) with a ``ColumnStatsMetadata`` payload, the column's
statistics over the files of the partition's latest file slices: the smallest of their
smallest values, the largest of their largest, the sums of their null counts, value counts
and sizes.  A reader that knows a filter leaves out whole partitions before it looks at
file-level statistics (:mod:`lakesdk.format.column_stats`).

As Apache Hudi 1.1 writes it (apache/hudi ``HoodieTableMetadataUtil``,
``HoodieMetadataPayload.createPartitionStatsRecords``, ``MetadataPartitionType.PARTITION_STATS``,
``FileFormatUtils.getColumnRangeInPartition``, ``HoodieColumnRangeMetadata.merge``):

* key: ``getPartitionStatsIndexKey`` = base64 of the 64-bit XXHash of the column name, then of
  the partition path (``.`` when not partitioned): the first two parts of a ``column_stats``
  key (:func:`~lakesdk.format.column_stats.partition_stats_key`);
* ``fileName`` holds the partition path, ``isTightBound`` is true (Hudi writes tight bounds
  whenever ``column_stats`` is available, which partition stats require), the value layout is
  ``column_stats``'s (``valueType``, the wrappers), the value type the table schema's;
* file groups ``partition-stats-<n>-0``, one by default
  (``hoodie.metadata.index.partition.stats.file.group.count``), a key in group ``n`` = Java's
  ``String.hashCode`` of the key modulo the count (``mapRecordKeyToFileGroupIndex``);
* merging a record with a newer one (``mergeColumnStatsRecords``): a deleted or tight newer
  record replaces the older; only a record that is not tight widens the older one;
* the aggregation: min of the minimums and max of the maximums in Java's order (a float NaN
  above every number), sums of the counts and sizes (``HoodieColumnRangeMetadata.merge``).

Which columns: those of ``column_stats``.  Hudi 1.1 enables the index with
``hoodie.metadata.index.column.stats.enable`` (apache/hudi #14165: ``isPartitionStatsIndexEnabled``
returns the column stats switch) on partitioned tables only (``tableConfig.isTablePartitioned()``);
the Hudi versions after 1.1 leave it out on Lance tables too, whose base files have no column
ranges (a partition's record would then hold the ranges of its log files only).

>>> from lakesdk.format.column_stats import ColumnRange, ValueType
>>> a = ColumnRange("x", ValueType.DOUBLE, None, 1.0, 2.0, 0, 3, 10, 12)
>>> b = ColumnRange("x", ValueType.DOUBLE, None, -1.0, float("nan"), 1, 2)
>>> aggregate([a, b])
ColumnRange(column='x', value_type=<ValueType.DOUBLE: 6>, info=None, min_value=-1.0, max_value=nan, null_count=1, value_count=5, total_size=10, total_uncompressed_size=12)
>>> partition_stats_group(file_group_index(partition_stats_key("x", "p=1"), FILE_GROUPS))
'partition-stats-0000-0'
"""

from __future__ import annotations

import math
from typing import Any, Iterable

from lakesdk.format.column_stats import (
    V1,
    V2,
    ColumnRange,
    ValueType,
    file_group_index,
    partition_stats_key,
    range_of_record,
    stats_record,
)
from lakesdk.format.metadata_records import RecordType

__all__ = ["PARTITION", "FILE_GROUPS", "partition_stats_group", "aggregate", "partition_record",
           "deleted_partition_record", "file_group_of", "partition_range_of", "universal_bounds", "unknown_range"]

PARTITION = "partition_stats"
FILE_GROUPS = 1
_FLOATS = (ValueType.FLOAT, ValueType.DOUBLE)
_INTS = (ValueType.INT, ValueType.LONG)


def partition_stats_group(index: int) -> str:
    return f"partition-stats-{index:04d}-0"


def file_group_of(key: str, groups: int = FILE_GROUPS) -> str:
    """The file group of the partition a key goes to (``groups`` file groups)."""
    return partition_stats_group(file_group_index(key, groups))


def _order(v: Any, floating: bool) -> Any:
    """Java's order of a bound: a float NaN above every number, -0.0 below 0.0."""
    if floating and isinstance(v, float):
        return (math.isnan(v), 0.0 if math.isnan(v) else v, math.copysign(1.0, v) > 0)
    return v


def _lo(a: Any, b: Any, floating: bool) -> Any:
    if a is None or b is None:
        return b if a is None else a
    return b if _order(b, floating) < _order(a, floating) else a


def _hi(a: Any, b: Any, floating: bool) -> Any:
    if a is None or b is None:
        return b if a is None else a
    return b if _order(b, floating) > _order(a, floating) else a


def aggregate(ranges: Iterable[ColumnRange], value_type: tuple[ValueType, str | None] | None = None) -> ColumnRange | None:
    """One column's statistics over files (None for no file), typed as the files hold the
    column; ``value_type`` (the column's type in the table schema) types a mix of integer or
    float widths, and an unknown result.  Unknown when a file's statistics are (null count
    -1), or when files hold the column in types whose stored values do not compare (a decimal
    of another scale, a string and a number): then the null count is unknown and the bounds
    are those of every value of the type (:func:`unknown_range`)."""
    out: ColumnRange | None = None
    known = True
    types: set[tuple[ValueType, str | None]] = set()
    # a V1 record of a file without values says no type: it counts, its type does not
    ranges = sorted(ranges, key=lambda r: r.value_type == ValueType.NULL)
    for r in ranges:
        if r.value_type != ValueType.NULL or not types:
            types.add((r.value_type, r.info))
        if out is None:
            out = r
            known = r.null_count >= 0
            continue
        kinds = {t for t, _ in types}
        known = known and r.null_count >= 0 and (len(types) == 1 or kinds <= set(_INTS) or kinds <= set(_FLOATS))
        floating = out.value_type in _FLOATS
        out = ColumnRange(out.column, out.value_type, out.info,
                          _lo(out.min_value, r.min_value, floating) if known else None,
                          _hi(out.max_value, r.max_value, floating) if known else None,
                          out.null_count + r.null_count if known else -1, out.value_count + r.value_count,
                          out.total_size + r.total_size, out.total_uncompressed_size + r.total_uncompressed_size)
    if out is None:
        return None
    if len(types) == 1:
        vt, info = next(iter(types))
    else:
        family = _INTS if {t for t, _ in types} <= set(_INTS) else _FLOATS
        wide = (family[-1], None)
        vt, info = value_type if value_type is not None and (known is False or value_type[0] in family) else wide
    if not known:
        return unknown_range(out.column, vt, info, out.value_count, out.total_size, out.total_uncompressed_size)
    lo, hi = out.min_value, out.max_value
    if vt in _FLOATS:
        lo, hi = (float(lo) if lo is not None else None), (float(hi) if hi is not None else None)
    return ColumnRange(out.column, vt, info, lo, hi, out.null_count, out.value_count, out.total_size,
                       out.total_uncompressed_size)


_UNIVERSAL: dict[ValueType, tuple[Any, Any]] = {
    ValueType.BOOLEAN: (False, True), ValueType.INT: (-2 ** 31, 2 ** 31 - 1), ValueType.LONG: (-2 ** 63, 2 ** 63 - 1),
    ValueType.FLOAT: (-math.inf, math.nan), ValueType.DOUBLE: (-math.inf, math.nan),
    ValueType.DATE: (-2 ** 31, 2 ** 31 - 1),
    ValueType.TIMESTAMP_MILLIS: (-(2 ** 63 - 1) // 1000, (2 ** 63 - 1) // 1000),
    ValueType.LOCAL_TIMESTAMP_MILLIS: (-(2 ** 63 - 1) // 1000, (2 ** 63 - 1) // 1000),
    ValueType.TIMESTAMP_MICROS: (-2 ** 63, 2 ** 63 - 1), ValueType.LOCAL_TIMESTAMP_MICROS: (-2 ** 63, 2 ** 63 - 1)}


def universal_bounds(value_type: ValueType, info: str | None) -> tuple[Any, Any] | None:
    """Bounds every value of the type lies within (stored values; a float's largest is NaN,
    as Spark SQL orders it), None for a type without a largest value (a string)."""
    if value_type == ValueType.DECIMAL:
        digits = int((info or "0,0").split(",")[0])
        return (-(10 ** digits - 1), 10 ** digits - 1) if digits > 0 else None
    return _UNIVERSAL.get(value_type)


def unknown_range(column: str, value_type: ValueType, info: str | None, value_count: int,
                  size: int = 0, usize: int = 0) -> ColumnRange:
    """A partition's statistics of a column whose bounds lakesdk does not know (files holding
    it in types whose values do not compare, or without ranges): the bounds of every value of
    its type, so that no reader leaves the partition out (Apache Hudi's partition pruning
    leaves out a partition whose record has no bounds, and one without a record), the null
    count unknown (Hudi prunes no partition by null counts)."""
    lo, hi = universal_bounds(value_type, info) or (None, None)
    return ColumnRange(column, value_type, info, lo, hi, -1, value_count, size, usize)


def partition_record(partition: str, r: ColumnRange, layout: int = V2) -> dict[str, Any]:
    """The ``HoodieMetadataRecord`` (a dict for fastavro) of one column of one partition."""
    return stats_record(partition, partition, r, kind=RecordType.PARTITION_STATS, tight=True, layout=layout)


def deleted_partition_record(partition: str, column: str, layout: int = V2) -> dict[str, Any]:
    """The record saying a partition's statistics of ``column`` are gone (the partition has
    no file left), as Hudi writes them for a deleted partition."""
    cs: dict[str, Any] = {"fileName": partition, "columnName": column, "minValue": None, "maxValue": None,
                          "valueCount": None, "nullCount": None, "totalSize": None, "totalUncompressedSize": None,
                          "isDeleted": True, "isTightBound": True}
    if layout != V1:
        cs["valueType"] = None
    return {"key": partition_stats_key(column, partition), "type": int(RecordType.PARTITION_STATS),
            "ColumnStatsMetadata": cs}


def partition_range_of(raw: dict[str, Any]) -> ColumnRange | None:
    """The statistics a decoded partition ``ColumnStatsMetadata`` says, None when it says
    nothing a reader may skip by: deleted, not a tight bound (an older record it widens may be
    left out of a read), or of a layout lakesdk does not read."""
    if not raw.get("isTightBound"):
        return None
    return range_of_record(raw)
