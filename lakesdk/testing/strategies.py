"""Hypothesis strategies for lakesdk tables: column types, values and partition values.

Needs the ``hypothesis`` package (a test dependency).  Each hostile dimension can be
switched off, so a test can exclude a dimension while a defect in it is open::

    >>> import pyarrow as pa
    >>> from lakesdk.testing import strategies as lst
    >>> types = lst.column_types(lst.ALL_FEATURES - {"ts_ns", "uint"})
    >>> t = lst.arrow_table({"at": [0, None]}, pa.schema([("at", pa.timestamp("s", "Asia/Tokyo"))]))
    >>> t.schema.field("at").type, lst.canonical(t.column("at"))
    (TimestampType(timestamp[s, tz=Asia/Tokyo]), [0, None])

The strategies draw Python values that :func:`arrow_table` turns into a ``pyarrow.Table``
of exactly the drawn types (no inference), so a reader can compare what comes back with
what went in, value for value and type for type.
"""

from __future__ import annotations

import datetime as dt
import decimal
from typing import Any, Iterable

import pyarrow as pa
from hypothesis import strategies as st

from lakesdk.testing.assertions import canonical

__all__ = [
    "ALL_FEATURES", "column_types", "values", "partition_values", "key_values", "key_part_values", "arrow_table",
    "canonical",
]

#: Every hostile dimension the strategies know.  Pass a subset as ``features`` to switch some off.
ALL_FEATURES = frozenset({
    # partition values
    "part_slash",       # '/' inside a value ('a/b', '/', 'a/')
    "part_dot",         # '.' and '..' as whole values, and dots inside
    "part_equals",      # '=' inside a value (looks like hive style 'f=v')
    "part_percent",     # '%' and things that look like URL escapes ('%2F')
    "part_empty",       # '' as a value
    "part_null",        # None as a value
    "part_long",        # a value of 200+ characters
    "part_unicode",     # non-ASCII letters, emoji, combining marks, right-to-left text
    "part_space",       # spaces, leading and trailing
    # record keys
    "key_unicode",      # non-ASCII record key values
    "key_separators",   # record key values containing ',' ':' '/' (composite key separators)
    "key_null_parts",   # '' and None as a part of a composite key (Hudi's __empty__ / __null__)
    # column types
    "nested",           # struct columns, nested two deep
    "decimal",          # decimal128 of random precision and scale
    "ts_s", "ts_ms", "ts_us", "ts_ns",   # timestamps of each unit
    "ts_zones",         # timestamps with a zone other than UTC (and naive ones)
    "date",             # date32
    "uint",             # unsigned integers
    "int_small",        # int8 / int16 / int32
    "float",            # float64 including -0.0 and infinities
    "nan",              # NaN in float columns
    "binary",           # bytes
    "nulls",            # nulls in non-key columns
    "unicode",          # non-ASCII strings in string columns
    "extreme_ts",       # timestamps far from the epoch (years 1-9999 where the unit allows)
})

_ZONES = ["UTC", "Asia/Tokyo", "America/New_York", "Asia/Kolkata", "Pacific/Chatham", "+05:30"]
_TS_UNITS = ("s", "ms", "us", "ns")


def _unicode_text(min_size: int = 0, max_size: int = 12) -> st.SearchStrategy[str]:
    return st.text(st.characters(blacklist_categories=["Cs"], blacklist_characters="\x00"),
                   min_size=min_size, max_size=max_size)


def partition_values(features: Iterable[str] = ALL_FEATURES) -> st.SearchStrategy[str | None]:
    """Values of a string partition field, hostile ones only where ``features`` allows."""
    f = set(features)
    plain = st.sampled_from(["a", "b", "north", "2026-11-25", "x_1"])
    options: list[st.SearchStrategy[Any]] = [plain]
    if "part_slash" in f:
        options.append(st.sampled_from(["a/b", "/", "a/", "/a", "2026/11/25"]))
    if "part_dot" in f:
        options.append(st.sampled_from([".", "..", "a.b", ".hidden", "..a"]))
    if "part_equals" in f:
        options.append(st.sampled_from(["=", "a=b", "p=x", "=x"]))
    if "part_percent" in f:
        options.append(st.sampled_from(["%", "100%", "%2F", "a%3Db", "%25"]))
    if "part_empty" in f:
        options.append(st.just(""))
    if "part_null" in f:
        options.append(st.none())
    if "part_long" in f:
        options.append(st.integers(200, 300).map(lambda n: "L" * n))
    if "part_unicode" in f:
        options.append(st.sampled_from(["Zürich", "東京", "🚕", "é", "שלום", "naïve"]))
    if "part_space" in f:
        options.append(st.sampled_from([" ", " a", "a ", "a b"]))
    return st.one_of(*options)


def key_values(features: Iterable[str] = ALL_FEATURES) -> st.SearchStrategy[str]:
    """Record key values (never null, never empty: Hudi rejects a key that is null or empty
    as a whole)."""
    f = set(features)
    options: list[st.SearchStrategy[str]] = [st.text("abcdefgh0123456789", min_size=1, max_size=4)]
    if "key_unicode" in f:
        options.append(st.sampled_from(["ключ", "鍵", "🔑", "ß"]))
    if "key_separators" in f:
        options.append(st.sampled_from(["a,b", "a:b", "k:a,k2:b", "a/b", ",", ":"]))
    return st.one_of(*options)


def key_part_values(features: Iterable[str] = ALL_FEATURES, *,
                    nullable: bool = True) -> st.SearchStrategy[str | None]:
    """Values of one field of a composite record key: :func:`key_values`, and where
    ``features`` has ``key_null_parts`` also ``''`` and (``nullable``) None, which Hudi writes
    as ``field:__empty__`` / ``field:__null__``.  Keep another field of the key non-empty: a key
    whose every part is null or empty is refused."""
    options: list[st.SearchStrategy[Any]] = [key_values(features)]
    if "key_null_parts" in set(features):
        options.append(st.sampled_from(["", None] if nullable else [""]))
    return st.one_of(*options)


def column_types(features: Iterable[str] = ALL_FEATURES, *, depth: int = 0) -> st.SearchStrategy[pa.DataType]:
    """Arrow types of non-key columns."""
    f = set(features)
    options: list[pa.DataType] = [pa.int64(), pa.string(), pa.bool_()]
    if "float" in f:
        options.append(pa.float64())
    if "int_small" in f:
        options += [pa.int8(), pa.int16(), pa.int32()]
    if "uint" in f:
        options += [pa.uint8(), pa.uint32(), pa.uint64()]
    if "date" in f:
        options.append(pa.date32())
    if "binary" in f:
        options.append(pa.binary())
    units = [u for u in _TS_UNITS if f"ts_{u}" in f]
    strategies: list[st.SearchStrategy[pa.DataType]] = [st.sampled_from(options)]
    if units:
        zones: list[str | None] = ["UTC"]
        if "ts_zones" in f:
            zones += [None, *_ZONES[1:]]
        strategies.append(st.builds(pa.timestamp, st.sampled_from(units), st.sampled_from(zones)))
    if "decimal" in f:
        strategies.append(st.integers(1, 38).flatmap(
            lambda p: st.integers(0, p).map(lambda s: pa.decimal128(p, s))))
    if "nested" in f and depth < 2:
        strategies.append(st.lists(column_types(f, depth=depth + 1), min_size=1, max_size=3).map(
            lambda ts: pa.struct([pa.field(f"f{i}", t) for i, t in enumerate(ts)])))
    return st.one_of(*strategies)


_EPOCH = dt.datetime(1970, 1, 1)


def values(t: pa.DataType, features: Iterable[str] = ALL_FEATURES, *, nullable: bool = True) -> st.SearchStrategy[object]:
    """Python values of type ``t`` (None where ``nulls`` is on and ``nullable``)."""
    f = set(features)
    s: st.SearchStrategy[Any]
    if pa.types.is_boolean(t):
        s = st.booleans()
    elif pa.types.is_integer(t):
        info = (t.bit_width, pa.types.is_signed_integer(t))
        lo, hi = (-(2 ** (info[0] - 1)), 2 ** (info[0] - 1) - 1) if info[1] else (0, 2 ** info[0] - 1)
        s = st.integers(lo, hi)
    elif pa.types.is_floating(t):
        s = st.floats(allow_nan="nan" in f, allow_infinity=True)
    elif pa.types.is_string(t):
        s = _unicode_text() if "unicode" in f else st.text("abcxyz ,:/=", max_size=8)
    elif pa.types.is_binary(t):
        s = st.binary(max_size=8)
    elif pa.types.is_date(t):
        s = st.dates(dt.date(1, 1, 1) if "extreme_ts" in f else dt.date(1900, 1, 1), dt.date(9999, 12, 31)
                     if "extreme_ts" in f else dt.date(2200, 1, 1))
    elif pa.types.is_timestamp(t):
        # integers since the epoch in the type's unit: exact for every unit, no datetime rounding
        per_s = {"s": 1, "ms": 10 ** 3, "us": 10 ** 6, "ns": 10 ** 9}[t.unit]
        lo_y, hi_y = (1, 9999) if "extreme_ts" in f else (1900, 2200)
        lo = int((dt.datetime(lo_y, 1, 1) - _EPOCH).total_seconds()) * per_s
        hi = int((dt.datetime(hi_y, 12, 31) - _EPOCH).total_seconds()) * per_s
        if t.unit == "ns":
            lo, hi = max(lo, -(2 ** 63) + 1), min(hi, 2 ** 63 - 1)
            # mostly whole microseconds (what a microsecond store keeps), sometimes finer digits
            s = st.one_of(st.integers(-(-lo // 1000), hi // 1000).map(lambda us: us * 1000), st.integers(lo, hi))
        else:
            s = st.integers(lo, hi)
    elif pa.types.is_decimal(t):
        # unscaled integers: exact at every precision (Decimal arithmetic would round at 28 digits)
        s = st.integers(-(10 ** t.precision) + 1, 10 ** t.precision - 1).map(
            lambda i: decimal.Decimal(f"{i}E-{t.scale}"))
    elif pa.types.is_struct(t):
        s = st.fixed_dictionaries({t.field(i).name: values(t.field(i).type, f) for i in range(t.num_fields)})
    else:
        raise TypeError(f"no strategy for {t}")
    return st.one_of(st.none(), s) if nullable and "nulls" in f else s


def arrow_table(columns: dict[str, list[Any]], schema: pa.Schema) -> pa.Table:
    """An Arrow table of exactly ``schema`` from drawn Python values (timestamps as integers)."""
    arrays = []
    for field in schema:
        arrays.append(_array(columns[field.name], field.type))
    return pa.Table.from_arrays(arrays, schema=schema)


def _array(vals: list[Any], t: pa.DataType) -> pa.Array:
    if pa.types.is_timestamp(t):
        return pa.array(vals, pa.int64()).cast(t)
    if pa.types.is_struct(t):
        children = [_array([None if v is None else v[t.field(i).name] for v in vals], t.field(i).type)
                    for i in range(t.num_fields)]
        mask = pa.array([v is None for v in vals], pa.bool_())
        return pa.StructArray.from_arrays(children, fields=list(t), mask=mask)
    return pa.array(vals, t)


