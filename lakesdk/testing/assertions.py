"""Assertions for tests of code that writes tables: :func:`assert_table_equal`.

>>> import pyarrow as pa
>>> from lakesdk.testing import assert_table_equal
>>> assert_table_equal(pa.table({"id": [2, 1], "v": ["b", "a"]}), [{"id": 1, "v": "a"}, {"id": 2, "v": "b"}], key="id")
>>> assert_table_equal(pa.table({"id": [1], "v": ["a"]}), [{"id": 1, "v": "z"}], key="id")
Traceback (most recent call last):
...
AssertionError: the tables differ in 1 of 1 rows (key id):
  id=1: v: 'a' != 'z' (actual != expected)
"""

from __future__ import annotations

from typing import Any, Iterable, Sequence

__all__ = ["assert_table_equal", "canonical"]

_META = ("_hoodie_commit_time", "_hoodie_commit_seqno", "_hoodie_record_key", "_hoodie_partition_path",
         "_hoodie_file_name", "_hoodie_operation")


def canonical(arr: Any) -> list[object]:
    """Values of an Arrow column as exactly comparable Python values: timestamps as integers
    in their unit, floats by bit pattern (NaN equals NaN, -0.0 differs from 0.0), structs as
    tuples of (name, value)."""
    import pyarrow as pa
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks() if arr.num_chunks else pa.array([], arr.type)
    t = arr.type
    if pa.types.is_timestamp(t):
        return arr.cast(pa.int64()).to_pylist()
    if pa.types.is_floating(t):
        return [None if v is None else ("nan" if v != v else float(v).hex()) for v in arr.to_pylist()]
    if pa.types.is_struct(t):
        children = [canonical(arr.field(i)) for i in range(t.num_fields)]
        valid = arr.is_valid().to_pylist()
        names = [t.field(i).name for i in range(t.num_fields)]
        return [tuple(zip(names, vs)) if ok else None for ok, *vs in zip(valid, *children)] if children else \
            [() if ok else None for ok in valid]
    return arr.to_pylist()


def _arrow(value: Any, *, meta_fields: bool) -> tuple[Any, tuple[str, ...]]:
    """(Arrow table, the table's record key if ``value`` knows it) of a Table, a Query, an
    Arrow table, a pandas or Spark DataFrame, or a list of dicts."""
    import pyarrow as pa

    from lakesdk.table.data import is_spark_df
    key: tuple[str, ...] = ()
    if is_spark_df(value):   # first: a Spark Connect DataFrame answers any attribute with a column
        value = value.toArrow()
    if hasattr(value, "context") and hasattr(value, "read"):        # a Table
        key = tuple(value.key)
        value = value.read(meta_fields=meta_fields)
    if hasattr(value, "plan") and hasattr(value, "to_arrow"):        # a Query
        key = key or tuple(getattr(getattr(value, "table", None), "key", ()) or ())
        value = value.to_arrow()
    elif hasattr(value, "toArrow"):                                   # a Spark DataFrame
        value = value.toArrow()
    elif hasattr(value, "to_arrow") and not isinstance(value, pa.Table):
        value = value.to_arrow()
    if isinstance(value, pa.RecordBatch):
        value = pa.Table.from_batches([value])
    if not isinstance(value, pa.Table):
        import pandas as pd
        if isinstance(value, pd.DataFrame):
            value = pa.Table.from_pandas(value, preserve_index=False)
        elif isinstance(value, (list, tuple)):
            value = pa.Table.from_pylist(list(value))
        else:
            raise TypeError(f"cannot compare a {type(value).__name__}: pass a lakesdk Table or Query, an Arrow "
                            "table, a pandas or Spark DataFrame, or a list of dicts")
    if not meta_fields:
        value = value.drop_columns([c for c in _META if c in value.column_names])
    return value, key


def assert_table_equal(actual: Any, expected: Any, *, key: str | Sequence[str] | None = None,
                       check_types: bool = True, check_order: bool = False, max_diffs: int = 10,
                       meta_fields: bool = False) -> None:
    """Assert that two tables hold the same rows, exactly.

    Either side may be a lakesdk ``Table`` (its snapshot) or ``Query``, an Arrow table, a
    pandas or Spark DataFrame, or a list of dicts.  Rows are matched by ``key`` (default:
    the record key of a lakesdk table on either side, else every column) unless
    ``check_order``; values compare exactly (timestamps in their unit, floats by bit
    pattern, NaN equal to NaN).  ``check_types`` compares the column types too (with it
    off, only names and values).  Hudi's meta fields are left out unless ``meta_fields``.
    A pandas DataFrame's NaN counts as null (pandas' missing value), as pyarrow converts it.
    The error names the columns and up to ``max_diffs`` rows that differ."""
    a, key_a = _arrow(actual, meta_fields=meta_fields)
    e, key_e = _arrow(expected, meta_fields=meta_fields)
    if sorted(a.column_names) != sorted(e.column_names):
        missing = [c for c in e.column_names if c not in a.column_names]
        extra = [c for c in a.column_names if c not in e.column_names]
        raise AssertionError(f"the columns differ: missing {missing}, unexpected {extra}")
    e = e.select(a.column_names)
    if check_types and not isinstance(expected, (list, tuple)):
        diff = [f"{f.name}: {f.type} != {e.schema.field(f.name).type}" for f in a.schema
                if f.type != e.schema.field(f.name).type]
        if diff:
            raise AssertionError("the column types differ (actual != expected): " + "; ".join(diff))
    keys = (key,) if isinstance(key, str) else tuple(key) if key else (key_a or key_e or tuple(a.column_names))
    rows_a, rows_e = _rows(a, keys), _rows(e, keys)
    pairs: list[tuple[tuple[Any, Any], tuple[Any, Any]]]
    if check_order:
        pairs = list(zip(rows_a, rows_e))
    else:
        rows_a.sort(key=_sort_key)
        rows_e.sort(key=_sort_key)
        pairs = []
        by_key_e: dict[Any, list[Any]] = {}
        for k, r in rows_e:
            by_key_e.setdefault(k, []).append(r)
        by_key_a: dict[Any, list[Any]] = {}
        for k, r in rows_a:
            by_key_a.setdefault(k, []).append(r)
        for k in sorted(set(by_key_a) | set(by_key_e), key=_sort_key):
            la, le = by_key_a.get(k, []), by_key_e.get(k, [])
            for i in range(max(len(la), len(le))):
                pairs.append(((k, la[i] if i < len(la) else None), (k, le[i] if i < len(le) else None)))
    names = a.column_names
    diffs = []
    for (ka, ra), (_ke, re_) in pairs:   # ra / re_: a row's values, None when that side lacks it
        if ra == re_:
            continue
        label = ", ".join(f"{c}={v!r}" for c, v in zip(keys, ka)) if ka else "?"
        if ra is None:
            diffs.append(f"  {label}: missing (expected {dict(zip(names, re_))})")
        elif re_ is None:
            diffs.append(f"  {label}: unexpected row {dict(zip(names, ra))}")
        else:
            cols = "; ".join(f"{c}: {x!r} != {y!r}" for c, x, y in zip(names, ra, re_) if x != y)
            diffs.append(f"  {label}: {cols} (actual != expected)")
    if len(a) != len(e) and not diffs:
        diffs.append(f"  {len(a)} rows != {len(e)} rows")
    if diffs:
        more = f"\n  ... and {len(diffs) - max_diffs} more" if len(diffs) > max_diffs else ""
        raise AssertionError(f"the tables differ in {len(diffs)} of {max(len(a), len(e))} rows "
                             f"(key {', '.join(keys)}):\n" + "\n".join(diffs[:max_diffs]) + more)


def _rows(t: Any, keys: Iterable[str]) -> list[tuple[Any, tuple[Any, ...]]]:
    cols = [canonical(t.column(c)) for c in t.column_names]
    idx = [t.column_names.index(k) for k in keys]
    rows = list(zip(*cols)) if cols else []
    return [(tuple(r[i] for i in idx), tuple(r)) for r in rows]


def _sort_key(item: Any) -> Any:
    """A total order over rows of mixed values (None first, then by type name and repr)."""
    return repr(item)
