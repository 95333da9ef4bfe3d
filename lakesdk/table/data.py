"""Turning what users pass (pandas, pyarrow, Spark, dicts, lists) into Arrow or Spark data."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from lakesdk.exceptions import SchemaError

__all__ = ["to_arrow_or_spark", "is_spark_df", "keys_to_arrow"]


def is_spark_df(data: Any) -> bool:
    mod = type(data).__module__
    return mod.startswith("pyspark.sql") and type(data).__name__ == "DataFrame"


def to_arrow_or_spark(data: Any) -> tuple[pa.Table | None, Any]:
    """(arrow table, None) for local data, (None, spark DataFrame) for Spark data."""
    if is_spark_df(data):
        return None, data
    if isinstance(data, pa.Table):
        return data, None
    if isinstance(data, pa.RecordBatch):
        return pa.Table.from_batches([data]), None
    mod = type(data).__module__
    if mod.startswith("pandas") and type(data).__name__ == "DataFrame":
        return pa.Table.from_pandas(data, preserve_index=False), None
    if mod.startswith("polars") and hasattr(data, "to_arrow"):
        return data.to_arrow(), None
    if isinstance(data, dict):
        return pa.table(data), None
    if isinstance(data, (list, tuple)):
        if not data:
            raise SchemaError("no rows to write: the list is empty")
        if all(isinstance(r, dict) for r in data):
            # every key of every row becomes a column (from_pylist would take the first row's keys only
            # and silently drop the others); a row without a column gets null there, as in pandas
            names = list(dict.fromkeys(k for r in data for k in r))
            return pa.table({n: [r.get(n) for r in data] for n in names}), None
    if hasattr(data, "__arrow_c_stream__"):
        return pa.table(data), None
    raise SchemaError(
        f"cannot write a {type(data).__name__}: pass a pandas DataFrame, pyarrow Table, "
        "Spark DataFrame, a dict of columns or a list of dicts")


def keys_to_arrow(keys: Any, key_fields: tuple[str, ...]) -> tuple[pa.Table | None, Any]:
    """Delete input: scalars / tuples of key values, or anything :func:`to_arrow_or_spark` takes."""
    if isinstance(keys, (list, tuple)) and keys and not all(isinstance(k, dict) for k in keys):
        if len(key_fields) == 1:
            return pa.table({key_fields[0]: list(keys)}), None
        rows = [dict(zip(key_fields, k if isinstance(k, (list, tuple)) else (k,))) for k in keys]
        if any(len(r) != len(key_fields) for r in rows):
            raise SchemaError(f"each key must give values for {key_fields}")
        return pa.Table.from_pylist(rows), None
    if isinstance(keys, (str, int)):
        return pa.table({key_fields[0]: [keys]}), None
    return to_arrow_or_spark(keys)
