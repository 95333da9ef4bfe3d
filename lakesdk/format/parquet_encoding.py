"""Which columns of a Parquet file lakesdk writes get dictionary encoding.

A dictionary pays where values repeat.  Where they hardly do (ids, event times, measures,
names), Arrow's writer still builds a dictionary until it outgrows its page limit and then
writes the rest of the column chunk plain: the first pages dictionary-encoded, the others
not.  Such column chunks cost the writer time and, measured with Spark's vectorized Parquet
reader, make a read of the file 30-40% slower than the same values written plain (Apache
Hudi's Parquet writer, parquet-mr, gives a dictionary up early for the same reason).  So the
decision is made per column before the file is written, from an evenly spread sample of its
values: a column keeps its dictionary when the sample says its distinct values fit within the
dictionary page limit.  A wrong guess costs only size or speed, never a value: a dictionary
that outgrows the limit still falls back to plain pages."""

from __future__ import annotations

import math
from typing import Iterable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

__all__ = ["dictionary_columns", "statistics_columns", "SAMPLE"]

#: values sampled per column
SAMPLE = 2048
#: a column chunk of at most this many values keeps its dictionary (too small to matter)
_SMALL = 4 * SAMPLE


def _expected_distinct(distinct: float, sample: int) -> float:
    """How many distinct values a sample of ``sample`` values drawn evenly from a column of
    ``distinct`` equally frequent values holds, about."""
    return distinct * (1.0 - math.exp(-sample / distinct))


def _value_width(col: pa.Array) -> float | None:
    """Bytes a dictionary entry of ``col`` takes (None: a type Parquet writes no dictionary for)."""
    t = col.type
    if pa.types.is_boolean(t) or pa.types.is_null(t):
        return None
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_binary(t) or pa.types.is_large_binary(t):
        valid = col.drop_null()
        return 4.0 + (float(pc.mean(pc.binary_length(valid)).as_py() or 0.0) if len(valid) else 0.0)
    try:
        return max(1.0, t.bit_width / 8)
    except ValueError:
        return None


def _worth_a_dictionary(col: pa.ChunkedArray, limit: int) -> bool:
    n = len(col)
    if n <= _SMALL:
        return True
    sample = col.take(pa.array(np.linspace(0, n - 1, SAMPLE).astype(np.int64)))
    sample = sample.combine_chunks() if isinstance(sample, pa.ChunkedArray) else sample
    valid = len(sample) - sample.null_count
    if valid < SAMPLE // 16:       # mostly nulls: the dictionary holds little
        return True
    width = _value_width(sample)
    if width is None:
        return True
    fits = max(1.0, limit / width)   # distinct values the dictionary page holds
    if fits >= n:
        return True
    distinct = pc.count_distinct(sample, mode="only_valid").as_py()
    return distinct <= _expected_distinct(fits, valid)


def dictionary_columns(table: pa.Table, *, limit: int, never: Iterable[str] = ()) -> list[str]:
    """The columns of ``table`` (top-level names) to write with dictionary encoding, given
    the dictionary page ``limit`` in bytes: every column but ``never`` and the flat columns
    whose sampled values show too many distinct values for the limit.  Nested columns keep
    their dictionaries."""
    skip = set(never)
    out = []
    for field, col in zip(table.schema, table.columns):
        if field.name in skip:
            continue
        t = field.type
        if pa.types.is_nested(t) or pa.types.is_dictionary(t) or _worth_a_dictionary(col, limit):
            out.append(field.name)
    return out


def statistics_columns(table: pa.Table) -> bool | list[str]:
    """The ``write_statistics`` of a Parquet file of ``table``: every column's, but for a
    floating-point column holding NaN none (True when no column holds NaN).  Parquet writers
    leave NaN out of a chunk's bounds, so a chunk of 1.0 and NaN would say [1, 1], and readers
    that prune row groups by them (Spark's Parquet reader, Arrow's datasets, Apache Hudi's
    column statistics read from the footer) would drop it for ``c > 5``, although Spark SQL
    orders NaN above every number; without statistics nothing prunes the chunk."""
    nan = nan_columns(table)
    if not nan:
        return True
    return [f.name for f in table.schema if f.name not in nan]


def nan_columns(table: pa.Table, names: Iterable[str] | None = None) -> set[str]:
    """The top-level floating-point columns of ``table`` (those of ``names``, when given) that
    hold NaN: the columns :func:`statistics_columns` writes no statistics for."""
    wanted = None if names is None else set(names)
    return {f.name for f in table.schema if pa.types.is_floating(f.type) and (wanted is None or f.name in wanted)
            and table.column(f.name).null_count < len(table) and pc.any(pc.is_nan(table.column(f.name))).as_py()}
