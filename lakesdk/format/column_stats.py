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

Which columns (Hudi 1.x defaults): ``_hoodie_commit_time``, ``_hoodie_partition_path`` and
``_hoodie_record_key`` when the meta fields are populated, then the first 32 data columns of
types the index holds (not nested, list, map or binary).  The index definition in
``.hoodie/.index_defs/index.json`` names them.

Bounds are exact where they exist: a base file's come from its Parquet footer (NaN is not
counted by a Parquet writer, so a float range says nothing about NaN), a log file's from
the rows it holds.

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
           "read_index_columns", "index_definition", "column_prefix", "partition_id", "decimal_of"]

META_COLUMNS = ("_hoodie_commit_time", "_hoodie_partition_path", "_hoodie_record_key")
MAX_COLUMNS = 32
FILE_GROUPS = 2
INDEX_DEFS_PATH = ".hoodie/.index_defs/index.json"
_SEED = 0xdabadaba
_M = (1 << 64) - 1
_P1, _P2, _P3, _P4, _P5 = (11400714785074694791, 14029467366897019727, 1609587929392839161, 9650029242287828579,
                           2870177450012600261)
_WRAPPER = "org.apache.hudi.avro.model."


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


_WRAPPERS = {ValueType.BOOLEAN: "BooleanWrapper", ValueType.INT: "IntWrapper", ValueType.LONG: "LongWrapper",
             ValueType.FLOAT: "FloatWrapper", ValueType.DOUBLE: "DoubleWrapper", ValueType.STRING: "StringWrapper",
             ValueType.DECIMAL: "BytesWrapper", ValueType.DATE: "IntWrapper",
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


def indexed_columns(schema: pa.Schema, *, meta_fields: bool = True, max_columns: int = MAX_COLUMNS) -> list[str]:
    """Hudi's default column list: the three meta fields it always indexes (when populated),
    then the first ``max_columns`` data columns of indexed types."""
    out = [c for c in META_COLUMNS if meta_fields]
    data = [f.name for f in schema if not f.name.startswith("_hoodie_") and value_type_of(f.type) is not None]
    return out + data[:max_columns]


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
    """Ranges of ``columns`` over the rows of ``table`` (a log block's records); NaN is left
    out of a float range as a Parquet writer leaves it out."""
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
        if vt[0] in (ValueType.FLOAT, ValueType.DOUBLE):
            data = pc.filter(col, pc.invert(pc.fill_null(pc.is_nan(col), False)))
        mm = pc.min_max(data)
        lo, hi = _to_stored(mm["min"].as_py(), col.type), _to_stored(mm["max"].as_py(), col.type)
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


# -- records ----------------------------------------------------------------------------------------
def _wrap(v: Any, vt: ValueType) -> Any:
    if v is None:
        return None
    if vt == ValueType.DECIMAL:
        n = int(v)
        length = max(1, (n + (n < 0)).bit_length() // 8 + 1)
        v = n.to_bytes(length, "big", signed=True)
    return (_WRAPPER + _WRAPPERS[vt], {"value": v})


def stats_record(partition: str, file_name: str, r: ColumnRange, *, kind: int = RecordType.COLUMN_STATS,
                 tight: bool = False, key: str | None = None) -> dict[str, Any]:
    """The ``HoodieMetadataRecord`` (as a dict for fastavro) of one range (version 2 layout);
    ``kind`` PARTITION_STATS names the partition in ``fileName``."""
    if key is None:
        key = (column_stats_key(r.column, partition, file_name) if kind == RecordType.COLUMN_STATS
               else partition_stats_key(r.column, partition))
    return {"key": key, "type": int(kind), "ColumnStatsMetadata": {
        "fileName": file_name, "columnName": r.column, "minValue": _wrap(r.min_value, r.value_type),
        "maxValue": _wrap(r.max_value, r.value_type), "valueCount": r.value_count,
        "nullCount": None if r.null_count < 0 else r.null_count, "totalSize": r.total_size,
        "totalUncompressedSize": r.total_uncompressed_size, "isDeleted": False, "isTightBound": tight,
        "valueType": {"typeOrdinal": int(r.value_type), "additionalInfo": r.info}}}


def deleted_record(partition: str, file_name: str, column: str) -> dict[str, Any]:
    """The record saying a file's statistics of ``column`` are gone (the file was deleted)."""
    return {"key": column_stats_key(column, partition, file_name), "type": int(RecordType.COLUMN_STATS),
            "ColumnStatsMetadata": {"fileName": file_name, "columnName": column, "minValue": None, "maxValue": None,
                                    "valueCount": None, "nullCount": None, "totalSize": None,
                                    "totalUncompressedSize": None, "isDeleted": True, "isTightBound": False,
                                    "valueType": None}}


def range_of_record(raw: Mapping[str, Any]) -> ColumnRange | None:
    """The range a decoded ``ColumnStatsMetadata`` says (version 2 layout), None when deleted or
    of a layout lakesdk does not read (then nothing is skipped by it)."""
    if raw.get("isDeleted"):
        return None
    vti = raw.get("valueType")
    if not vti:
        return None
    try:
        vt = ValueType(vti.get("typeOrdinal"))
    except ValueError:
        return None
    if vt not in _WRAPPERS:
        return None
    lo, hi = _unwrap(raw.get("minValue"), vt), _unwrap(raw.get("maxValue"), vt)
    nulls = raw.get("nullCount")
    values = raw.get("valueCount")
    return ColumnRange(str(raw.get("columnName")), vt, vti.get("additionalInfo"), lo, hi,
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


def index_definition(existing: bytes | None, columns: list[str]) -> bytes:
    """``index.json`` with the ``column_stats`` definition naming ``columns`` (others kept)."""
    try:
        doc = json.loads(existing) if existing else {}
    except ValueError:
        doc = {}
    defs = doc.setdefault("indexDefinitions", {})
    defs["column_stats"] = {"indexName": "column_stats", "indexType": "column_stats", "indexFunction": "column_stats",
                            "sourceFields": list(columns), "indexOptions": {}, "version": "V2"}
    return json.dumps(doc, indent=2).encode("utf-8")
