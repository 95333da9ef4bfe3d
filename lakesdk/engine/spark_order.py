"""Ordering values in Spark sorts, in Java's ``compareTo`` order (as Apache Hudi compares them).

Spark orders NaN above every other double already, and sorts nulls where it is told; but it
ties ``-0.0`` with ``0.0``, where Java's ``Double.compareTo`` / ``Float.compareTo`` put
``-0.0`` below ``0.0`` (:mod:`lakesdk.merge.float_order` is the Arrow side of the same
order).  A floating-point ordering field is therefore sorted by its value, then by its sign
on a zero: Spark's text of a double keeps the sign of zero (``"-0.0"``).
"""

from __future__ import annotations

from typing import Any

__all__ = ["descending"]


def descending(df: Any, fields: tuple[str, ...] | list[str], *, nulls_last: bool = False) -> list[Any]:
    """Sort expressions for ``fields`` of ``df`` (greatest first, in Java's order)."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import DoubleType, FloatType
    types = {f.name: f.dataType for f in df.schema.fields}
    out = []
    for f in fields:
        c = F.col(f"`{f}`")
        out.append(c.desc_nulls_last() if nulls_last else c.desc())
        if isinstance(types.get(f), (DoubleType, FloatType)):   # 0.0 before -0.0
            out.append(F.when(c == F.lit(0.0), ~c.cast("string").startswith("-")).desc())
    return out
