"""Floating-point ordering values in Java's total order.

Apache Hudi compares ordering values with their ``compareTo``: ``Double.compareTo`` and
``Float.compareTo`` order every double, NaN included: ``-inf < ... < -0.0 < 0.0 < ... < +inf
< NaN``, and NaN equals NaN (every NaN bit pattern is one value).  Arrow's comparisons follow
IEEE instead (NaN is neither greater nor equal to anything, ``-0.0 == 0.0``) and its sorts put
NaN after every value whatever the order asked, so every comparison of ordering values goes
through :func:`java_order` first: floating-point values become int64 keys whose integer order
is Java's order (nulls stay null); other types are returned as they are.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

__all__ = ["java_order", "has_float"]

_LOW_BITS = np.int64(0x7FFF_FFFF_FFFF_FFFF)


def has_float(t: pa.DataType) -> bool:
    """Whether ``t`` is a floating-point type, or a struct with one."""
    if pa.types.is_struct(t):
        return any(has_float(t.field(i).type) for i in range(t.num_fields))
    return pa.types.is_floating(t)


def _float_keys(arr: pa.Array) -> pa.Array:
    valid = np.asarray(arr.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
    x = np.array(pc.fill_null(pc.cast(arr, pa.float64()), 0.0).to_numpy(zero_copy_only=False), dtype=np.float64)
    x[np.isnan(x)] = np.nan                    # one NaN (Java's doubleToLongBits canonicalizes)
    bits = x.view(np.int64)
    keys = bits ^ ((bits >> 63) & _LOW_BITS)   # negative values: every bit but the sign flipped
    return pa.array(keys, type=pa.int64(), mask=~valid if not valid.all() else None)


def java_order(values: Any) -> Any:
    """``values`` (an Arrow array or chunked array) with floating-point values, and struct
    children of floating point, replaced by int64 keys in Java's ``compareTo`` order; other
    types unchanged.  Equal keys are equal values for Java (NaN = NaN, -0.0 < 0.0)."""
    t = values.type
    if not has_float(t):
        return values
    chunked = isinstance(values, pa.ChunkedArray)
    arr = (values.combine_chunks() if values.num_chunks else pa.array([], t)) if chunked else values
    if pa.types.is_struct(t):
        children = [java_order(c) for c in arr.flatten()]
        mask = arr.is_null() if arr.null_count else None
        out: pa.Array = pa.StructArray.from_arrays(children, names=[t.field(i).name for i in range(t.num_fields)],
                                                   mask=mask)
    else:
        out = _float_keys(arr)
    return pa.chunked_array([out]) if chunked else out
