"""Record keys and partition paths, computed on Arrow data.

Record key (``_hoodie_record_key``):
  * one key field (simple / non-partitioned / timestamp key generators): the value as text,
    e.g. ``"1"``;
  * complex key generator: ``field:value`` pairs joined by ``,``, e.g. ``"id:1,name:Alice"``.

Partition path (``_hoodie_partition_path``): one segment per partition field, joined by
``/``; a segment is ``field=value`` (hive style) or ``value``; a null or empty value is
``__HIVE_DEFAULT_PARTITION__``; non-partitioned tables use ``""``.

>>> import pyarrow as pa
>>> t = pa.table({"id": [1, 2], "city": ["sf", None]})
>>> record_keys(t, ("id",), "SIMPLE").to_pylist()
['1', '2']
>>> partition_paths(t, ("city",), hive_style=True).to_pylist()
['city=sf', 'city=__HIVE_DEFAULT_PARTITION__']
>>> parse_partition_path("city=sf/d=1", ("city", "d"), hive_style=True)
{'city': 'sf', 'd': '1'}
"""

from __future__ import annotations

from urllib.parse import unquote

import pyarrow as pa
import pyarrow.compute as pc

from lakesdk.exceptions import MissingColumnError, NullKeyError

__all__ = ["record_keys", "partition_paths", "parse_partition_path", "DEFAULT_PARTITION"]

DEFAULT_PARTITION = "__HIVE_DEFAULT_PARTITION__"


def _as_text(col: pa.ChunkedArray | pa.Array) -> pa.ChunkedArray | pa.Array:
    t = col.type
    if pa.types.is_string(t):
        return col
    if pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return pc.cast(col, pa.string())
    if pa.types.is_boolean(t):
        return pc.if_else(col, "true", "false")
    if pa.types.is_dictionary(t):
        return _as_text(pc.cast(col, t.value_type))
    return pc.cast(col, pa.string())


def _column(table: pa.Table, name: str, role: str) -> pa.ChunkedArray:
    if name not in table.column_names:
        raise MissingColumnError(
            f"{role} field {name!r} is missing from the data (columns: {', '.join(table.column_names)}); "
            f"add the column {name!r} to every row")
    return table.column(name)


def record_keys(table: pa.Table, fields: tuple[str, ...], keygen: str) -> pa.ChunkedArray:
    """The ``_hoodie_record_key`` values for every row; raises on null key values."""
    cols = [_column(table, f, "record key") for f in fields]
    for f, c in zip(fields, cols):
        n = c.null_count
        if n:
            raise NullKeyError(
                f"record key field {f!r} is null in {n} of {len(c)} rows; every row needs a key: "
                f"fill or drop those rows before writing")
    if keygen == "COMPLEX" or len(fields) > 1:
        parts = []
        for f, c in zip(fields, cols):
            parts.append(pa.scalar(f"{f}:"))
            parts.append(_as_text(c))
            parts.append(pa.scalar(","))
        parts.pop()
        out = pc.binary_join_element_wise(*parts, "")
    else:
        out = _as_text(cols[0])
    return out if isinstance(out, pa.ChunkedArray) else pa.chunked_array([out])


def partition_paths(table: pa.Table, fields: tuple[str, ...], *, hive_style: bool) -> pa.ChunkedArray:
    """The ``_hoodie_partition_path`` of every row."""
    if not fields:
        return pa.chunked_array([pa.repeat(pa.scalar("", pa.string()), table.num_rows)])
    segs: list = []
    for f in fields:
        v = _as_text(_column(table, f, "partition"))
        v = pc.if_else(pc.or_kleene(pc.is_null(v), pc.equal(v, "")), DEFAULT_PARTITION, v)
        if hive_style:
            v = pc.binary_join_element_wise(pa.scalar(f"{f}="), v, "")
        segs.append(v)
        segs.append(pa.scalar("/"))
    segs.pop()
    out = segs[0] if len(segs) == 1 else pc.binary_join_element_wise(*segs, "")
    return out if isinstance(out, pa.ChunkedArray) else pa.chunked_array([out])


def parse_partition_path(path: str, fields: tuple[str, ...], *, hive_style: bool,
                         urlencoded: bool = False) -> dict[str, str | None]:
    """Partition path -> ``{field: value}`` (values as text; the default partition -> None)."""
    if not fields or path == "":
        return {}
    segs = path.split("/")
    out: dict[str, str | None] = {}
    if hive_style or all("=" in s for s in segs):
        for s in segs:
            k, _, v = s.partition("=")
            out[k] = None if v == DEFAULT_PARTITION else (unquote(v) if urlencoded else v)
        return out
    if len(segs) != len(fields):
        # e.g. a timestamp-based key generator writing yyyy/MM/dd into one field
        return {fields[0]: path} if len(fields) == 1 else {}
    for f, v in zip(fields, segs):
        out[f] = None if v == DEFAULT_PARTITION else (unquote(v) if urlencoded else v)
    return out


