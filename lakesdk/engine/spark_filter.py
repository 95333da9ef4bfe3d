"""A bound filter rendered as a Spark ``Column`` (:meth:`lakesdk.read.bind.Bound.to_spark`).

The tree is the one :mod:`lakesdk.read.bind` builds (the read layer sits above the engine, so
its nodes are read by shape here): a column has ``path`` and ``type``, a literal ``value`` and
``type`` (a pyarrow type, the literal already cast to it), a node ``op`` and ``args``.
"""

from __future__ import annotations

import datetime as _dt
from typing import Any

import pyarrow as pa

from lakesdk.format.schema import type_family as _family

__all__ = ["to_spark_column", "spark_type"]


def spark_type(t: pa.DataType) -> str:
    """The Spark SQL type name a literal of Arrow type ``t`` is cast to."""
    fam = _family(t)
    if fam == "int":
        return {8: "tinyint", 16: "smallint", 32: "int"}.get(t.bit_width, "bigint")
    if fam == "float":
        return "float" if t.bit_width == 32 else "double"
    if fam == "decimal":
        return f"decimal({t.precision},{t.scale})"
    if fam == "timestamp":
        return "timestamp" if t.tz else "timestamp_ntz"
    return {"string": "string", "bool": "boolean", "date": "date", "null": "string"}.get(fam, "string")


def to_spark_column(n: Any) -> Any:
    """The Spark ``Column`` of a bound filter tree (SQL's three-valued logic, as Spark has it)."""
    from pyspark.sql import functions as F
    if hasattr(n, "path"):
        return F.col(".".join("`" + p.replace("`", "``") + "`" for p in n.path))
    if hasattr(n, "value"):
        v, t, fam = n.value, n.type, _family(n.type)
        if v is None:
            return F.lit(None).cast(spark_type(t) if fam != "null" else "boolean")
        if fam == "decimal":
            return F.lit(str(v)).cast(spark_type(t))
        if fam == "timestamp":
            if t.tz:
                us = (v - _dt.datetime(1970, 1, 1, tzinfo=_dt.UTC)) // _dt.timedelta(microseconds=1)
                return F.timestamp_micros(F.lit(us))
            return F.lit(v.isoformat(sep=" ")).cast("timestamp_ntz")
        if fam == "date" and isinstance(v, _dt.date):
            # as days since 1970-01-01: a datetime.date literal before year 2 (or 1900 on some
            # JVMs) fails in Py4J's conversion with an empty IllegalArgumentException
            return F.date_from_unix_date(F.lit(v.toordinal() - _dt.date(1970, 1, 1).toordinal()))
        if fam == "int":
            return F.lit(v).cast("bigint")
        return F.lit(v)
    op, a = n.op, n.args
    if hasattr(n, "type"):   # a typed value: arithmetic, || or coalesce (operands cast to its type)
        t = spark_type(n.type)
        args = [to_spark_column(x) if op == "||" else to_spark_column(x).cast(t) for x in a]
        if op == "neg":
            return -args[0]
        if op == "coalesce":
            return F.coalesce(*args)
        if op == "||":
            return F.concat(*args)
        return {"+": args[0].__add__, "-": args[0].__sub__, "*": args[0].__mul__, "/": args[0].__truediv__}[op](args[1])
    if op == "and":
        return to_spark_column(a[0]) & to_spark_column(a[1])
    if op == "or":
        return to_spark_column(a[0]) | to_spark_column(a[1])
    if op == "not":
        return ~to_spark_column(a[0])
    if op == "isnull":
        return to_spark_column(a[0]).isNull()
    if op == "notnull":
        return to_spark_column(a[0]).isNotNull()
    if op == "like":
        return to_spark_column(a[0]).like(a[1].value) if a[1].value is not None else F.lit(None).cast("boolean")
    if op == "in":
        return _unpushed(a[0]).isin(*[to_spark_column(v) for v in a[1]])
    x, y = _unpushed(a[0]), _unpushed(a[1])
    return {"=": x.__eq__, "!=": x.__ne__, "<": x.__lt__, "<=": x.__le__, ">": x.__gt__, ">=": x.__ge__}[op](y)


def _unpushed(n: Any) -> Any:
    """The Spark column of a compared value; a floating-point column as ``nanvl(c, c)`` (the
    same values): Spark would push a comparison of the column itself into Parquet's row-group
    statistics, which leave NaN out of a chunk's bounds, and drop a row group of 1.0 and NaN
    for ``c > 5`` although Spark SQL orders NaN above every number."""
    col = to_spark_column(n)
    if hasattr(n, "path") and _family(n.type) == "float":
        from pyspark.sql import functions as F
        return F.nanvl(col, col)
    return col
