"""Turning what users pass (pandas, pyarrow, Spark, dicts, lists) into Arrow or Spark data."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pyarrow as pa

from lakesdk.exceptions import DuplicateColumnError, IncompatibleSchemaError, SchemaError

__all__ = ["to_arrow_or_spark", "is_spark_df", "keys_to_arrow", "check_column_names"]


def is_spark_df(data: Any) -> bool:
    mod = type(data).__module__
    return mod.startswith("pyspark.sql") and type(data).__name__ == "DataFrame"


def to_arrow_or_spark(data: Any) -> tuple[pa.Table | None, Any]:
    """(arrow table, None) for local data, (None, spark DataFrame) for Spark data.  Input
    that has no table form (columns of unequal lengths, a column mixing kinds of values,
    complex numbers) or whose column names clash is a typed error."""
    arrow, sdf = _convert(data)
    if arrow is not None:
        check_column_names(arrow.schema)
    else:
        from lakesdk.engine.spark import spark_arrow_schema
        check_column_names(spark_arrow_schema(sdf))
    return arrow, sdf


def _convert(data: Any) -> tuple[pa.Table | None, Any]:
    if is_spark_df(data):
        return None, data
    if isinstance(data, pa.Table):
        return data, None
    if isinstance(data, pa.RecordBatch):
        return pa.Table.from_batches([data]), None
    mod = type(data).__module__
    if mod.startswith("pandas") and type(data).__name__ == "DataFrame":
        return _from_pandas(data), None
    if mod.startswith("polars") and hasattr(data, "to_arrow"):
        return data.to_arrow(), None
    if isinstance(data, dict):
        return _from_columns(_one_row_or_columns(data), "dict"), None
    if isinstance(data, (list, tuple)):
        if not data:
            raise SchemaError("no rows to write: the list is empty")
        if all(isinstance(r, dict) for r in data):
            # every key of every row becomes a column (from_pylist would take the first row's keys only
            # and silently drop the others); a row without a column gets null there, as in pandas
            names = list(dict.fromkeys(k for r in data for k in r))
            return _from_columns({n: [r.get(n) for r in data] for n in names}, "list of dicts"), None
    if hasattr(data, "__arrow_c_stream__"):
        return pa.table(data), None
    raise SchemaError(
        f"cannot write a {type(data).__name__}: pass a pandas DataFrame, pyarrow Table, "
        "Spark DataFrame, a dict of columns or a list of dicts")


def check_column_names(schema: pa.Schema) -> None:
    """Refuse columns (or struct fields) of one name, or of names equal but for case
    (:class:`DuplicateColumnError`): Spark and Hudi resolve names case-insensitively."""
    from lakesdk.format.schema import name_clashes
    clashes = name_clashes(schema)
    if clashes:
        exact = [g for g in clashes if len(set(g)) < len(g)]
        names = ", ".join(repr(n) for g in clashes for n in g)
        why = (f"the data has several columns named {names}: a table column has one name" if exact else
               f"the data's columns {names} differ only by case: Spark and Hudi resolve column names "
               "case-insensitively, so a table cannot hold both (Spark could no longer read it: COLUMN_ALREADY_EXISTS)")
        raise DuplicateColumnError(f"{why}. Rename or drop one of them before writing; nothing was written",
                                   columns=tuple(n for g in clashes for n in g))


def _kinds(values: Any) -> str:
    return ", ".join(sorted({type(v).__name__ for v in values if v is not None}))


def _unusable(name: str, values: Any, err: Exception) -> IncompatibleSchemaError:
    """A column whose values have no one Arrow type (mixed kinds, complex numbers, ...)."""
    kinds = _kinds(values)
    if "complex" in kinds:
        return IncompatibleSchemaError(
            f"column {name!r} holds complex numbers, which Hudi's schema (Avro) has no type for ({err}); store "
            f"the real and imaginary parts as two float columns (df['{name}_re'] = df['{name}'].real, "
            f"df['{name}_im'] = df['{name}'].imag). Nothing was written")
    return IncompatibleSchemaError(
        f"column {name!r} cannot be written: its values mix kinds ({kinds}) that no one column type holds "
        f"({err}); convert the column to one type first (e.g. df[{name!r}].astype(str), or pd.to_numeric). "
        "Nothing was written")


def _is_column(v: Any) -> bool:
    """A dict value that holds one value per row (a list, tuple, array or Series), not one value
    (a number, a string, bytes, None, a dict: a struct value)."""
    if isinstance(v, (str, bytes, bytearray, Mapping, pa.Scalar)):
        return False
    if isinstance(v, np.ndarray):
        return v.ndim > 0
    return hasattr(v, "__len__")


def _one_row_or_columns(data: dict) -> dict:
    """A dict of columns as given, or a dict whose values are all single values as one row
    (``{"id": 1, "v": 2}``).  A dict mixing the two has no one reading: a typed error naming
    which columns are which."""
    columns = [k for k, v in data.items() if _is_column(v)]
    if len(columns) == len(data):
        return data
    if not columns:
        return {k: [v] for k, v in data.items()}
    scalars = [k for k in data if k not in columns]
    raise SchemaError(
        f"the dict mixes single values (columns {scalars}) with sequences (columns {columns}): pass one row "
        f"as a dict of single values ({{'id': 1, 'v': 2}}), rows as a list of such dicts, or columns as a dict of "
        f"equally long lists ({{'id': [1, 2], 'v': [2, 3]}}); a list value of one row goes in a list of dicts "
        "([{'id': 1, 'tags': ['a', 'b']}]). Nothing was written")


def _from_columns(cols: dict, what: str) -> pa.Table:
    """A table from a dict of columns: every column as long as the others, each of one type."""
    lengths = {k: len(v) if _is_column(v) else None for k, v in cols.items()}
    if None in lengths.values() or len(set(lengths.values())) > 1:
        raise SchemaError(
            f"the {what}'s columns must be sequences of one length, found lengths "
            f"{ {k: ('not a sequence' if n is None else n) for k, n in lengths.items()} }; give every column one "
            "value per row (None for a missing value). Nothing was written")
    arrays = {}
    for k, v in cols.items():
        if isinstance(v, (pa.Array, pa.ChunkedArray)):
            arrays[k] = v
            continue
        try:
            arrays[k] = pa.array(v)
        except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, TypeError, OverflowError) as err:
            raise _unusable(k, list(v), err) from None
    return pa.table(arrays)


def _from_pandas(df: Any) -> pa.Table:
    dup = [str(c) for c in df.columns[df.columns.duplicated()]]
    if dup:
        check_column_names(pa.schema([(str(c), pa.null()) for c in df.columns]))
    try:
        return pa.Table.from_pandas(df, preserve_index=False)
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
        for name in df.columns:   # the column pyarrow could not convert
            try:
                pa.Table.from_pandas(df[[name]], preserve_index=False)
            except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError) as col_err:
                raise _unusable(str(name), df[name].tolist(), col_err) from None
        raise


def keys_to_arrow(keys: Any, key_fields: tuple[str, ...]) -> tuple[pa.Table | None, Any]:
    """Delete input: scalars / tuples of key values, or anything :func:`to_arrow_or_spark` takes.
    An empty list deletes nothing (no rows, as an empty upsert writes nothing)."""
    if isinstance(keys, (list, tuple)) and not keys:
        return pa.table({f: pa.array([], pa.null()) for f in key_fields}), None
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
