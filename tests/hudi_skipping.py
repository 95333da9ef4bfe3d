"""Apache Hudi's Spark data skipping, emulated over ``column_stats`` and ``partition_stats``
records, to state what a Hudi reader of a lakesdk table keeps.

As Hudi 1.x does it (apache/hudi, hudi-spark-datasource/hudi-spark-common):

* ``ColumnStatsIndexSupport.transpose``: one row per file (per partition) of the records of the
  filter's columns: ``<c>_minValue``, ``<c>_maxValue``, ``<c>_nullCount`` and the first record's
  ``valueCount``; a column without a record of the file is (null, null, null);
* ``DataSkippingUtils.translateIntoColumnStatsIndexFilterExpr``: ``c = v`` is ``min <= v AND
  max >= v``, ``c < v`` ``min < v``, ``c <= v`` ``min <= v``, ``c > v`` ``max > v``, ``c >= v``
  ``max >= v``, ``c != v`` ``NOT(min = v AND max = v)``, ``c IN (..)`` the OR of the ``=``,
  ``c IS NULL`` ``nullCount > 0``, ``c IS NOT NULL`` ``nullCount IS NULL OR valueCount IS NULL
  OR nullCount < valueCount``; evaluated by Spark SQL (a NULL operand makes a comparison NULL,
  a float NaN is above every number and equal to itself);
* ``SparkBaseIndexSupport.getCandidateFiles``: a file is kept when the translated filter is
  true on its row, or when it has no row (no record of any column of the filter);
* ``PartitionStatsIndexSupport.prunePartitions`` and ``HoodieFileIndex.prunePartitionsAndGetFileSlices``:
  the conjuncts naming ``IS NULL`` / ``IS NOT NULL`` are dropped; a partition is listed only
  when the translated filter is true on its row: one without a row is left out, unless no
  partition has one (then nothing is pruned).

A filter here is a tuple: ``("cmp", col, op, value)``, ``("in", col, values)``,
``("isnull", col)``, ``("notnull", col)``, ``("and", a, b)``, ``("or", a, b)``.
"""

from __future__ import annotations

import datetime as dt
import math
from typing import Any, Mapping

from lakesdk.format.column_stats import ValueType, decimal_of, range_of_record


def columns_of(f: tuple) -> set[str]:
    if f[0] in ("and", "or"):
        return columns_of(f[1]) | columns_of(f[2])
    return {f[1]}


# -- Spark SQL's three-valued logic ---------------------------------------------------------------
def _cmp(a: Any, b: Any) -> int | None:
    if a is None or b is None:
        return None
    fa, fb = isinstance(a, float) and math.isnan(a), isinstance(b, float) and math.isnan(b)
    if fa or fb:
        return 0 if fa and fb else (1 if fa else -1)
    return (a > b) - (a < b)


def _op(op: str, a: Any, b: Any) -> bool | None:
    c = _cmp(a, b)
    if c is None:
        return None
    return {"=": c == 0, "!=": c != 0, "<": c < 0, "<=": c <= 0, ">": c > 0, ">=": c >= 0}[op]


def _and(a: bool | None, b: bool | None) -> bool | None:
    if a is False or b is False:
        return False
    return None if a is None or b is None else True


def _or(a: bool | None, b: bool | None) -> bool | None:
    if a is True or b is True:
        return True
    return None if a is None or b is None else False


def _not(a: bool | None) -> bool | None:
    return None if a is None else not a


def spark_eval(f: tuple, row: Mapping[str, Any]) -> bool | None:
    """``f`` on one row, as Spark SQL evaluates it."""
    kind = f[0]
    if kind == "and":
        return _and(spark_eval(f[1], row), spark_eval(f[2], row))
    if kind == "or":
        return _or(spark_eval(f[1], row), spark_eval(f[2], row))
    v = row.get(f[1])
    if kind == "isnull":
        return v is None
    if kind == "notnull":
        return v is not None
    if kind == "in":
        out: bool | None = False
        for x in f[2]:
            out = _or(out, _op("=", v, x))
        return out
    return _op(f[2], v, f[3])


# -- the index's rows -----------------------------------------------------------------------------
def _value(v: Any, vt: ValueType, info: str | None) -> Any:
    if v is None:
        return None
    if vt == ValueType.DATE:
        return dt.date(1970, 1, 1) + dt.timedelta(days=int(v))
    if vt == ValueType.DECIMAL:
        return decimal_of(int(v), int((info or "0,0").split(",")[1]))
    return v


def index_stats(cs: Mapping[str, Any]) -> tuple[Any, Any, Any, Any]:
    """A decoded ``ColumnStatsMetadata`` as its transposed columns: (min, max, nullCount,
    valueCount), values as the column's Python values."""
    r = range_of_record(cs, exact=True)
    assert r is not None, cs
    return (_value(r.min_value, r.value_type, r.info), _value(r.max_value, r.value_type, r.info),
            cs.get("nullCount"), cs.get("valueCount"))


def _translated(f: tuple, row: Mapping[str, tuple], value_count: Any, indexed: Any = None) -> bool | None:
    kind = f[0]
    if kind == "and":
        return _and(_translated(f[1], row, value_count, indexed), _translated(f[2], row, value_count, indexed))
    if kind == "or":
        return _or(_translated(f[1], row, value_count, indexed), _translated(f[2], row, value_count, indexed))
    if indexed is not None and f[1] not in indexed:
        return True                      # a column the index does not name: not translated
    lo, hi, nulls, _ = row.get(f[1], (None, None, None, None))
    if kind == "isnull":
        return _op(">", nulls, 0)
    if kind == "notnull":
        return _or(_or(nulls is None, value_count is None), _op("<", nulls, value_count))
    if kind == "in":
        out: bool | None = False
        for x in f[2]:
            out = _or(out, _and(_op("<=", lo, x), _op(">=", hi, x)))
        return out
    op, v = f[2], f[3]
    if op == "=":
        return _and(_op("<=", lo, v), _op(">=", hi, v))
    if op == "!=":
        return _not(_and(_op("=", lo, v), _op("=", hi, v)))
    if op in ("<", "<="):
        return _op(op, lo, v)
    return _op(op, hi, v)


def keeps_file(f: tuple, records: Mapping[str, Mapping[str, Any]], indexed: Any = None) -> bool:
    """Whether Hudi's data skipping keeps a file whose live ``column_stats`` records are
    ``records`` (column -> decoded ``ColumnStatsMetadata``; absent: no record), the index
    naming the columns ``indexed`` (None: every column of ``f``)."""
    row = {c: index_stats(records[c]) for c in columns_of(f) if c in records}
    if not row:
        return True                      # not in the index: kept
    first = next(c for c in sorted(columns_of(f)) if c in row)
    return _translated(f, row, row[first][3], indexed) is True


def _without_null_filters(f: tuple) -> tuple | None:
    """``f`` without its top-level conjuncts naming ``IS NULL`` / ``IS NOT NULL``."""
    if f[0] == "and":
        a, b = _without_null_filters(f[1]), _without_null_filters(f[2])
        return ("and", a, b) if a and b else (a or b)
    return None if _names_nulls(f) else f


def _names_nulls(f: tuple) -> bool:
    if f[0] in ("and", "or"):
        return _names_nulls(f[1]) or _names_nulls(f[2])
    return f[0] in ("isnull", "notnull")


def kept_partitions(f: tuple, records: Mapping[str, Mapping[str, Mapping[str, Any]]],
                    partitions: list[str]) -> set[str]:
    """The ``partitions`` Hudi's partition pruning lists, their ``partition_stats`` records
    ``records`` (partition -> column -> decoded ``ColumnStatsMetadata``)."""
    g = _without_null_filters(f)
    if g is None:
        return set(partitions)
    rows = {p: {c: index_stats(recs[c]) for c in columns_of(g) if c in recs} for p, recs in records.items()}
    rows = {p: r for p, r in rows.items() if r}
    if not rows:
        return set(partitions)
    out = set()
    for p, row in rows.items():
        first = next(c for c in sorted(columns_of(g)) if c in row)
        if _translated(g, row, row[first][3]) is True:
            out.add(p)
    return out

