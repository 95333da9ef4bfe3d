"""Hudi's column statistics index: the ``column_stats`` partition of the metadata table.

For every data file (base file or log file) and every indexed column the MDT holds one
``HoodieMetadataRecord`` of type 3 whose ``ColumnStatsMetadata`` says the column's smallest
and largest value in the file, its null count, value count (rows, nulls included) and sizes.
A reader that knows a filter skips the files whose ranges rule it out.

Keys (apache/hudi ``HoodieMetadataPayload`` and ``HashID``): base64 of the 64-bit XXHash
(seed ``0xdabadaba``, big-endian) of the column name, then of the partition path (``.`` when
not partitioned), then base64 of the MD5 of the file name, so that one column's records are
contiguous and a reader seeks them by prefix.  A key goes to file group
``col-stats-<n>-0`` with ``n`` = Java's ``String.hashCode`` of the key modulo the number of
file groups (2 by default, ``hoodie.metadata.index.column.stats.file.group.count``).

Values (table version 9, the index definition's version ``V2``): each min/max is a primitive
in a wrapper record with a ``valueType`` naming the logical type (``ValueType`` below): a
date is its day number in an ``IntWrapper``, a timestamp its microseconds in a
``LongWrapper``, a decimal its unscaled value's minimal two's-complement bytes in a
``BytesWrapper`` with ``precision,scale`` as additional info.

Values (table version 8, Hudi 1.0's layout, the index version ``V1``): no ``valueType``; the
wrapper alone says the type, as Hudi 1.0 picks it from the Java value it read (apache/hudi
``HoodieAvroUtils.wrapValueIntoAvro``, ``ParquetUtils.readColumnStatsFromMetadata``,
``HoodieTableMetadataUtil.collectColumnRangeMetadata``; Hudi 1.1 keeps that path for version 8
tables, ``ValueType.V1``): a date is its day number in a ``DateWrapper``, a timestamp the raw
count of its unit in a ``LongWrapper``, a decimal its unscaled value at scale 15 in a
``DecimalWrapper`` (Avro ``decimal(30, 15)``, so Hudi 1.0 indexes a decimal only when its scale
is at most 15 and it has at most 15 integer digits).  lakesdk keeps ``column_stats`` on a
version 8 table only when every indexed column has a type whose V1 record it writes as Hudi 1.0
does and Hudi 1.0 reads back as the same values (:func:`v1_supported`).

Which columns (Hudi 1.x defaults): ``_hoodie_commit_time``, ``_hoodie_partition_path`` and
``_hoodie_record_key`` when the meta fields are populated, then the first 32 data columns of
types the index holds (not nested, list, map or binary).  The index definition in
``.hoodie/.index_defs/index.json`` names them.

Bounds are exact: a base file's come from its Parquet footer, and from the column's values
where the footer does not say them (a row group without statistics, a value too long for
them, a NaN bound, a chunk of only NaN); a log file's from the rows it holds.  A float NaN
is ordered above every number, as Hudi orders a log file's values and Spark SQL compares
them (a column holding NaN has the maximum NaN), except in a footer that leaves NaN out of
bounds it has (pyarrow's), which every reader pruning row groups by that footer trusts too.

>>> column_stats_key("currency", "region=us", "c7bbe63e-fa43-40ba-94a9-03158165edc6-0_1-27-53_20260307162434124.parquet")
'/m6lxu4Dh5w=431THTTwO5Q=W7RhzS2IFnrW7FlqIkFJUw=='
>>> file_group_index('/m6lxu4Dh5w=431THTTwO5Q=W7RhzS2IFnrW7FlqIkFJUw==', 2)
0
"""

from __future__ import annotations

import base64
import decimal
import hashlib
import json
import math
import struct
from dataclasses import dataclass
from enum import IntEnum
from functools import lru_cache
from typing import Any, Iterable, Mapping

import pyarrow as pa

from lakesdk.format.metadata_records import RecordType, mdt_partition_key

__all__ = ["ValueType", "ColumnRange", "column_stats_key", "partition_stats_key", "file_group_index",
           "indexed_columns", "ranges_from_parquet", "ranges_from_arrow", "stats_record", "deleted_record",
           "stats_group", "range_of_record", "xxh64", "META_COLUMNS", "MAX_COLUMNS", "FILE_GROUPS", "INDEX_DEFS_PATH",
           "read_index_columns", "index_definition", "column_prefix", "partition_id", "decimal_of", "V1", "V2",
           "layout_of", "v1_supported", "v1_range", "v1_value_type", "unfaithful_v1_columns", "layout_of_record"]

META_COLUMNS = ("_hoodie_commit_time", "_hoodie_partition_path", "_hoodie_record_key")
MAX_COLUMNS = 32
FILE_GROUPS = 2
INDEX_DEFS_PATH = ".hoodie/.index_defs/index.json"
_SEED = 0xdabadaba
_M = (1 << 64) - 1
_P1, _P2, _P3, _P4, _P5 = (11400714785074694791, 14029467366897019727, 1609587929392839161, 9650029242287828579,
                           2870177450012600261)
_WRAPPER = "org.apache.hudi.avro.model."
#: the layouts of a column statistics record: Hudi 1.0's (table version 8) and Hudi 1.1's (version 9)
V1, V2 = 1, 2
_V1_SCALE = 15            # DecimalWrapper's decimal(30, 15)
_V1_INTEGER_DIGITS = 15
_V1_DECIMAL = "30,15"
#: the day numbers Hudi 1.0 writes as they are: from 1582-10-15 (a Parquet footer's dates go
#: through a Julian-Gregorian calendar before) to 9999-12-31 (a later year fails its parsing)
_V1_DAYS = (-141427, 2932896)


def layout_of(table_version: int) -> int:
    """The column statistics layout of a table of ``table_version``."""
    return V1 if table_version < 9 else V2


class ValueType(IntEnum):
    """Hudi's ``org.apache.hudi.stats.ValueType`` (its ordinal is stored)."""
    V1 = 0
    NULL = 1
    BOOLEAN = 2
    INT = 3
    LONG = 4
    FLOAT = 5
    DOUBLE = 6
    STRING = 7
    BYTES = 8
    FIXED = 9
    DECIMAL = 10
    UUID = 11
    DATE = 12
    TIME_MILLIS = 13
    TIME_MICROS = 14
    TIMESTAMP_MILLIS = 15
    TIMESTAMP_MICROS = 16
    TIMESTAMP_NANOS = 17
    LOCAL_TIMESTAMP_MILLIS = 18
    LOCAL_TIMESTAMP_MICROS = 19
    LOCAL_TIMESTAMP_NANOS = 20


_V1_WRAPPERS = {ValueType.BOOLEAN: "BooleanWrapper", ValueType.INT: "IntWrapper", ValueType.LONG: "LongWrapper",
                ValueType.FLOAT: "FloatWrapper", ValueType.DOUBLE: "DoubleWrapper", ValueType.STRING: "StringWrapper",
                ValueType.DATE: "DateWrapper", ValueType.DECIMAL: "DecimalWrapper"}
#: the value type a V1 wrapper says (a wrapper lakesdk does not read, bytes or a time, says none)
_V1_TYPES = {**{w: vt for vt, w in _V1_WRAPPERS.items()}, "LocalDateWrapper": ValueType.DATE,
             "TimestampMicrosWrapper": ValueType.TIMESTAMP_MICROS}

#: the wrapper of each value type in a V2 record: V1's, but a decimal's unscaled bytes, a date's
#: days and a timestamp's count in the wrappers of its physical type
_WRAPPERS = {**_V1_WRAPPERS, ValueType.DECIMAL: "BytesWrapper", ValueType.DATE: "IntWrapper",
             ValueType.TIMESTAMP_MILLIS: "LongWrapper", ValueType.TIMESTAMP_MICROS: "LongWrapper",
             ValueType.LOCAL_TIMESTAMP_MILLIS: "LongWrapper", ValueType.LOCAL_TIMESTAMP_MICROS: "LongWrapper"}


# -- keys -------------------------------------------------------------------------------------------
def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (64 - r))) & _M


def _round(acc: int, lane: int) -> int:
    return (_rotl((acc + lane * _P2) & _M, 31) * _P1) & _M


def xxh64(data: bytes, seed: int = 0) -> int:
    """XXHash64 of ``data`` (the reference algorithm; the keys hashed here are short)."""
    seed &= _M
    n, i = len(data), 0
    if n >= 32:
        v = [(seed + _P1 + _P2) & _M, (seed + _P2) & _M, seed, (seed - _P1) & _M]
        while i + 32 <= n:
            for j in range(4):
                v[j] = _round(v[j], struct.unpack_from("<Q", data, i + 8 * j)[0])
            i += 32
        h = (_rotl(v[0], 1) + _rotl(v[1], 7) + _rotl(v[2], 12) + _rotl(v[3], 18)) & _M
        for x in v:
            h = (((h ^ _round(0, x)) * _P1) + _P4) & _M
    else:
        h = (seed + _P5) & _M
    h = (h + n) & _M
    while i + 8 <= n:
        h = ((_rotl(h ^ _round(0, struct.unpack_from("<Q", data, i)[0]), 27) * _P1) + _P4) & _M
        i += 8
    if i + 4 <= n:
        h = ((_rotl(h ^ ((struct.unpack_from("<I", data, i)[0] * _P1) & _M), 23) * _P2) + _P3) & _M
        i += 4
    while i < n:
        h = (_rotl(h ^ ((data[i] * _P5) & _M), 11) * _P1) & _M
        i += 1
    h ^= h >> 33
    h = (h * _P2) & _M
    h ^= h >> 29
    h = (h * _P3) & _M
    return h ^ (h >> 32)


@lru_cache(maxsize=4096)
def _id64(text: str) -> str:
    # Java widens the int seed to a long: 0xdabadaba is negative, so its upper bits are set
    return base64.b64encode(struct.pack(">Q", xxh64(text.encode("utf-8"), _SEED - (1 << 32)))).decode("ascii")


def _id128(text: str) -> str:
    return base64.b64encode(hashlib.md5(text.encode("utf-8"), usedforsecurity=False).digest()).decode("ascii")


def column_stats_key(column: str, partition: str, file_name: str) -> str:
    return _id64(column) + _id64(mdt_partition_key(partition)) + _id128(file_name)


def partition_stats_key(column: str, partition: str) -> str:
    return _id64(column) + _id64(mdt_partition_key(partition))


def column_prefix(column: str) -> str:
    """The key prefix of every record of ``column``."""
    return _id64(column)


def partition_id(partition: str) -> str:
    """The second part of a ``column_stats`` key: the partition's hash."""
    return _id64(mdt_partition_key(partition))


def file_group_index(key: str, groups: int) -> int:
    """Hudi's ``mapRecordKeyToFileGroupIndex``: Java's ``String.hashCode`` modulo ``groups``."""
    h = 0
    units = key.encode("utf-16-be")
    for i in range(0, len(units), 2):
        h = (31 * h + ((units[i] << 8) | units[i + 1])) & 0xFFFFFFFF
    if h >= 1 << 31:
        h -= 1 << 32
    return abs(abs(h) % groups) if h != -(1 << 31) else abs(-(1 << 31) % groups)


def stats_group(index: int) -> str:
    return f"col-stats-{index:04d}-0"


# -- which columns, which types ---------------------------------------------------------------------
def value_type_of(t: pa.DataType) -> tuple[ValueType, str | None] | None:
    """The value type a column of arrow type ``t`` is indexed as, or None when not indexed."""
    if pa.types.is_boolean(t):
        return ValueType.BOOLEAN, None
    if pa.types.is_integer(t):
        return (ValueType.LONG if t.bit_width == 64 else ValueType.INT), None
    if pa.types.is_float32(t):
        return ValueType.FLOAT, None
    if pa.types.is_float64(t):
        return ValueType.DOUBLE, None
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return ValueType.STRING, None
    if pa.types.is_decimal(t):
        return ValueType.DECIMAL, f"{t.precision},{t.scale}"
    if pa.types.is_date32(t):
        return ValueType.DATE, None
    if pa.types.is_timestamp(t) and t.unit in ("ms", "us"):
        local = t.tz is None
        if t.unit == "ms":
            return (ValueType.LOCAL_TIMESTAMP_MILLIS if local else ValueType.TIMESTAMP_MILLIS), None
        return (ValueType.LOCAL_TIMESTAMP_MICROS if local else ValueType.TIMESTAMP_MICROS), None
    return None


def indexed_columns(schema: pa.Schema, *, meta_fields: bool = True, max_columns: int = MAX_COLUMNS,
                    layout: int = V2) -> list[str]:
    """Hudi's default column list: the three meta fields it always indexes (when populated),
    then the first ``max_columns`` data columns of indexed types (Hudi 1.0's for ``V1``: every
    type but nested, list and map ones, and decimals ``decimal(30, 15)`` does not hold)."""
    out = [c for c in META_COLUMNS if meta_fields]
    indexed = _v1_candidate if layout == V1 else (lambda t: value_type_of(t) is not None)
    data = [f.name for f in schema if not f.name.startswith("_hoodie_") and indexed(f.type)]
    return out + data[:max_columns]


def _v1_decimal_fits(precision: int, scale: int) -> bool:
    """Whether ``decimal(30, 15)`` (Hudi 1.0's DecimalWrapper) holds every value of a decimal."""
    return scale <= _V1_SCALE and precision - scale <= _V1_INTEGER_DIGITS


def _v1_candidate(t: pa.DataType) -> bool:
    """Whether Hudi 1.0 indexes a column of type ``t`` (``isColumnTypeSupported`` with Avro
    records: not a record, array, map or enum; a decimal only within ``decimal(30, 15)``)."""
    if pa.types.is_struct(t) or pa.types.is_map(t) or pa.types.is_dictionary(t) or pa.types.is_list(t) \
            or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        return False
    return _v1_decimal_fits(t.precision, t.scale) if pa.types.is_decimal(t) else True


def v1_supported(t: pa.DataType) -> bool:
    """Whether lakesdk writes the V1 records of a column of type ``t`` as Hudi 1.0 writes them,
    and Hudi 1.0 reads them back as the column's values: booleans, signed integers (and 8 and
    16 bit unsigned ones), floats, strings, dates, microsecond timestamps and decimals within
    ``decimal(30, 15)``.  Not: binary (Hudi orders a log file's bytes signed, Parquet unsigned),
    millisecond timestamps (Hudi 1.0 reads a raw count as microseconds), times, nanoseconds."""
    if pa.types.is_unsigned_integer(t):
        return t.bit_width <= 16
    if pa.types.is_timestamp(t):
        return t.unit == "us"
    if pa.types.is_decimal(t):
        return _v1_decimal_fits(t.precision, t.scale)
    return value_type_of(t) is not None


def unfaithful_v1_columns(schema: pa.Schema, columns: Iterable[str]) -> list[str]:
    """The ``columns`` of ``schema`` whose V1 records lakesdk does not write (:func:`v1_supported`)."""
    return [c for c in columns if c in schema.names and not v1_supported(schema.field(c).type)]


# -- ranges -----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ColumnRange:
    """One column's statistics in one file, values as the MDT stores them (a date is its day
    number, a timestamp its count of its unit, a decimal its unscaled int; ``None`` bounds:
    unknown or all null)."""
    column: str
    value_type: ValueType
    info: str | None
    min_value: Any
    max_value: Any
    null_count: int
    value_count: int
    total_size: int = 0
    total_uncompressed_size: int = 0


def _unscaled(v: decimal.Decimal, scale: int) -> int:
    """The unscaled value of ``v`` at ``scale`` digits after the point, exactly (no decimal
    context: its 28 digits would round a decimal(38, 0))."""
    sign, digits, exp = v.as_tuple()
    n = int("".join(map(str, digits)) or "0")
    shift = int(exp) + scale
    n = n * 10 ** shift if shift >= 0 else n // 10 ** -shift
    return -n if sign else n


def decimal_of(unscaled: int, scale: int) -> decimal.Decimal:
    """The decimal of an unscaled value, exactly."""
    return decimal.Decimal(f"{int(unscaled)}E{-scale}")


def ranges_from_parquet(md: Any, schema: pa.Schema, columns: Iterable[str]) -> list[ColumnRange]:
    """Ranges of ``columns`` from a Parquet footer (``pyarrow.parquet.FileMetaData``) over all
    row groups; a row group without statistics leaves the bounds unknown (``None``)."""
    out = []
    paths = {md.schema.column(i).path: i for i in range(md.num_columns)}
    for name in columns:
        if name not in paths or name not in schema.names:
            continue
        vt = value_type_of(schema.field(name).type)
        if vt is None:
            continue
        idx = paths[name]
        lo: Any = None
        hi: Any = None
        known = True
        nulls = values = size = usize = 0
        for g in range(md.num_row_groups):
            c = md.row_group(g).column(idx)
            size += c.total_compressed_size
            usize += c.total_uncompressed_size
            values += c.num_values
            s = c.statistics
            if c.num_values == 0:
                continue
            if s is None or not s.has_null_count:
                known = False
                continue
            nulls += s.null_count
            if s.has_min_max:
                a, b = _physical(s.min_raw, c.physical_type, vt[0]), _physical(s.max_raw, c.physical_type, vt[0])
                if a != a or b != b:     # NaN: a writer that ordered NaN in says nothing of the others
                    known = False
                    continue
                lo = a if lo is None or a < lo else lo
                hi = b if hi is None or b > hi else hi
            elif s.null_count != c.num_values:
                known = False
        if not known:
            lo = hi = None
            nulls = -1
        out.append(ColumnRange(name, vt[0], vt[1], lo, hi, nulls, values, size, usize))
    return out


def _physical(v: Any, physical: str, vt: ValueType) -> Any:
    if vt == ValueType.DECIMAL:
        if isinstance(v, bytes):
            return int.from_bytes(v, "big", signed=True)
        return int(v)
    if vt == ValueType.STRING and isinstance(v, bytes):
        return v.decode("utf-8")
    return v


def ranges_from_arrow(table: pa.Table, columns: Iterable[str]) -> list[ColumnRange]:
    """Ranges of ``columns`` over the rows of ``table`` (a log block's records, or a Parquet
    column whose footer does not say its bounds), exact: a float NaN is ordered above every
    number, as Hudi orders a log file's values (Java's ``Double.compareTo``) and Spark SQL
    compares them, so a column holding NaN has the maximum NaN (only NaN: both bounds NaN)."""
    import pyarrow.compute as pc
    out = []
    for name in columns:
        if name not in table.column_names:
            continue
        col = table.column(name)
        vt = value_type_of(col.type)
        if vt is None:
            continue
        nulls = col.null_count
        data = col
        nan = False
        if vt[0] in (ValueType.FLOAT, ValueType.DOUBLE):
            isnan = pc.fill_null(pc.is_nan(col), False)
            nan = bool(pc.any(isnan).as_py())
            data = pc.filter(col, pc.invert(isnan))
        if pa.types.is_timestamp(col.type) or pa.types.is_date32(col.type):
            # compared as their counts of units (stored so): a zoned value near the ends of the
            # range has no Python datetime in its zone (0001-01-01 UTC is year 0 in New York)
            data = data.cast(pa.int64() if pa.types.is_timestamp(col.type) else pa.int32())
        mm = pc.min_max(data)
        lo, hi = _to_stored(mm["min"].as_py(), data.type), _to_stored(mm["max"].as_py(), data.type)
        if nan:
            lo, hi = (math.nan if lo is None else lo), math.nan
        out.append(ColumnRange(name, vt[0], vt[1], lo, hi, nulls, len(col)))
    return out


def _to_stored(v: Any, t: pa.DataType) -> Any:
    """A column's Python value as the MDT stores it (a date its day, a timestamp its count of
    its unit, a decimal its unscaled int; other values as they are)."""
    if v is None:
        return None
    if pa.types.is_decimal(t):
        return _unscaled(v, t.scale)
    if pa.types.is_date32(t):
        return pa.scalar(v, t).cast(pa.int32()).as_py()
    if pa.types.is_timestamp(t):
        return pa.scalar(v, t).cast(pa.int64()).as_py()
    return v


def v1_value_type(vt: tuple[ValueType, str | None]) -> tuple[ValueType, str | None] | None:
    """A column's value type as V1 records hold it (a timestamp a raw long, a decimal at scale
    15), None when lakesdk writes none of it."""
    kind, info = vt
    if kind in (ValueType.TIMESTAMP_MICROS, ValueType.LOCAL_TIMESTAMP_MICROS):
        return ValueType.LONG, None
    if kind == ValueType.DECIMAL:
        p, s = (int(x) for x in (info or "0,0").split(","))
        return (ValueType.DECIMAL, _V1_DECIMAL) if _v1_decimal_fits(p, s) else None
    if kind in _V1_WRAPPERS or kind == ValueType.NULL:
        return kind, info
    return None


def v1_range(r: ColumnRange) -> ColumnRange | None:
    """``r`` (values as :func:`ranges_from_parquet` says them) as a V1 record holds it: a
    timestamp's raw count of microseconds a long, a decimal's unscaled value at scale 15; None
    when lakesdk writes no V1 record of its type."""
    vt = v1_value_type((r.value_type, r.info))
    if vt is None:
        return None
    lo, hi = r.min_value, r.max_value
    if r.value_type == ValueType.DECIMAL:
        shift = 10 ** (_V1_SCALE - int((r.info or "0,0").split(",")[1]))
        lo, hi = (None if lo is None else int(lo) * shift), (None if hi is None else int(hi) * shift)
    return ColumnRange(r.column, vt[0], vt[1], lo, hi, r.null_count, r.value_count, r.total_size, r.total_uncompressed_size)


# -- records ----------------------------------------------------------------------------------------
def _wrap_v1(v: Any, vt: ValueType) -> Any:
    return _wrap(v, vt, _V1_WRAPPERS)


def _wrap(v: Any, vt: ValueType, wrappers: Mapping[ValueType, str] = _WRAPPERS) -> Any:
    if v is None:
        return None
    if vt == ValueType.DECIMAL:      # the unscaled value's bytes, as Java's BigInteger has them
        n = int(v)
        v = n.to_bytes(max(1, (n + (n < 0)).bit_length() // 8 + 1), "big", signed=True)
    return (_WRAPPER + wrappers[vt], {"value": v})


def stats_record(partition: str, file_name: str, r: ColumnRange, *, kind: int = RecordType.COLUMN_STATS,
                 tight: bool = False, key: str | None = None, layout: int = V2) -> dict[str, Any]:
    """The ``HoodieMetadataRecord`` (as a dict for fastavro) of one range; ``kind``
    PARTITION_STATS names the partition in ``fileName``.  ``layout`` V1: ``r`` as
    :func:`v1_range` says it, no ``valueType``."""
    if key is None:
        key = (column_stats_key(r.column, partition, file_name) if kind == RecordType.COLUMN_STATS
               else partition_stats_key(r.column, partition))
    wrap = _wrap_v1 if layout == V1 else _wrap
    cs = {"fileName": file_name, "columnName": r.column, "minValue": wrap(r.min_value, r.value_type),
          "maxValue": wrap(r.max_value, r.value_type), "valueCount": r.value_count,
          "nullCount": None if r.null_count < 0 else r.null_count, "totalSize": r.total_size,
          "totalUncompressedSize": r.total_uncompressed_size, "isDeleted": False, "isTightBound": tight}
    if layout != V1:
        cs["valueType"] = {"typeOrdinal": int(r.value_type), "additionalInfo": r.info}
    return {"key": key, "type": int(kind), "ColumnStatsMetadata": cs}


def deleted_record(partition: str, file_name: str, column: str, *, layout: int = V2) -> dict[str, Any]:
    """The record saying a file's statistics of ``column`` are gone (the file was deleted)."""
    cs: dict[str, Any] = {"fileName": file_name, "columnName": column, "minValue": None, "maxValue": None,
                          "valueCount": None, "nullCount": None, "totalSize": None, "totalUncompressedSize": None,
                          "isDeleted": True, "isTightBound": False}
    if layout != V1:
        cs["valueType"] = None
    return {"key": column_stats_key(column, partition, file_name), "type": int(RecordType.COLUMN_STATS),
            "ColumnStatsMetadata": cs}


def layout_of_record(raw: Mapping[str, Any]) -> int:
    """The layout of a decoded live ``ColumnStatsMetadata``: V2 records say their ``valueType``."""
    return V2 if raw.get("valueType") else V1


def range_of_record(raw: Mapping[str, Any], *, exact: bool = False) -> ColumnRange | None:
    """The range a decoded ``ColumnStatsMetadata`` says, None when deleted or of a type lakesdk
    does not read (then nothing is skipped by it).  A V1 record's wrappers say its type
    (decoded with their record names); a V1 date bound outside the days Hudi 1.0 writes as they
    are leaves the bounds unknown to a reader, unless ``exact`` (the record's values as they
    are: to aggregate or rewrite them)."""
    if raw.get("isDeleted"):
        return None
    vti = raw.get("valueType")
    if not vti:
        return _range_v1(raw, exact)
    try:
        vt = ValueType(vti.get("typeOrdinal"))
    except ValueError:
        return None
    if vt not in _WRAPPERS:
        return None
    lo, hi = _unwrap(raw.get("minValue"), vt), _unwrap(raw.get("maxValue"), vt)
    return _range(raw, vt, vti.get("additionalInfo"), lo, hi)


def _range(raw: Mapping[str, Any], vt: ValueType, info: str | None, lo: Any, hi: Any) -> ColumnRange:
    nulls = raw.get("nullCount")
    values = raw.get("valueCount")
    return ColumnRange(str(raw.get("columnName")), vt, info, lo, hi,
                       -1 if nulls is None else int(nulls), -1 if values is None else int(values),
                       int(raw.get("totalSize") or 0), int(raw.get("totalUncompressedSize") or 0))


def _unwrap(v: Any, vt: ValueType) -> Any:
    if isinstance(v, tuple):
        v = v[1]
    if isinstance(v, dict):
        v = v.get("value")
    if vt == ValueType.DECIMAL and isinstance(v, (bytes, bytearray)):
        return int.from_bytes(v, "big", signed=True) if v else None
    return v


def _range_v1(raw: Mapping[str, Any], exact: bool) -> ColumnRange | None:
    bounds = [raw.get("minValue"), raw.get("maxValue")]
    names = {b[0].rsplit(".", 1)[-1] for b in bounds if isinstance(b, tuple)}
    if any(b is not None and not isinstance(b, tuple) for b in bounds) or len(names) > 1:
        return None                  # decoded without wrapper names, or of two types
    vt = _V1_TYPES.get(next(iter(names))) if names else ValueType.NULL
    if vt is None:
        return None
    lo, hi = (None if b is None else b[1].get("value") for b in bounds)
    if vt == ValueType.DECIMAL:
        lo, hi = (v if v is None else int.from_bytes(v, "big", signed=True) if isinstance(v, (bytes, bytearray))
                  else _unscaled(v, _V1_SCALE) for v in (lo, hi))
    r = _range(raw, vt, _V1_DECIMAL if vt == ValueType.DECIMAL else None, lo, hi)
    if not exact and vt == ValueType.DATE and any(v is not None and not _V1_DAYS[0] <= v <= _V1_DAYS[1]
                                                  for v in (lo, hi)):
        return ColumnRange(r.column, vt, None, None, None, -1, r.value_count, r.total_size, r.total_uncompressed_size)
    return r


# -- the index definition ---------------------------------------------------------------------------
def read_index_columns(text: bytes | None) -> list[str] | None:
    """The columns ``index.json`` names for ``column_stats``, or None when it names none."""
    if not text:
        return None
    try:
        defs = json.loads(text).get("indexDefinitions", {})
    except (ValueError, AttributeError):
        return None
    cs = defs.get("column_stats") if isinstance(defs, dict) else None
    fields = cs.get("sourceFields") if isinstance(cs, dict) else None
    return [str(f) for f in fields] if isinstance(fields, list) and fields else None


def index_definition(existing: bytes | None, columns: list[str], layout: int = V2) -> bytes:
    """``index.json`` with the ``column_stats`` definition naming ``columns`` (others kept); a
    V1 definition says no version, as Hudi 1.0 writes it."""
    try:
        doc = json.loads(existing) if existing else {}
    except ValueError:
        doc = {}
    defs = doc.setdefault("indexDefinitions", {})
    defs["column_stats"] = {"indexName": "column_stats", "indexType": "column_stats", "indexFunction": "column_stats",
                            "sourceFields": list(columns), "indexOptions": {}}
    if layout != V1:
        defs["column_stats"]["version"] = "V2"
    return json.dumps(doc, indent=2).encode("utf-8")
