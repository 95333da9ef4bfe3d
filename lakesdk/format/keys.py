"""Record keys and partition paths, computed on Arrow data.

Record key (``_hoodie_record_key``):
  * one key field (simple / non-partitioned / timestamp key generators): the value as text,
    e.g. ``"1"``;
  * complex key generator: ``field:value`` pairs joined by ``,``, e.g. ``"id:1,name:Alice"``.

Partition path (``_hoodie_partition_path``): one segment per partition field, joined by
``/``; a segment is ``field=value`` (hive style) or ``value``; a null or empty value is
``__HIVE_DEFAULT_PARTITION__``; non-partitioned tables use ``""``.

Every value either reads back exactly or is refused, before anything is written, with
:class:`~lakesdk.exceptions.InvalidPartitionValueError`.  With
``hoodie.datasource.write.partitionpath.urlencode=true`` values are escaped as Hudi's
``PartitionPathEncodeUtils.escapePathName`` does (``/`` -> ``%2F``, ...; a leading ``.`` or
``_`` of a non-hive-style value too, else the folder would be hidden) and unescaped on read.
Without it, values holding ``/`` or a control character, and (not hive style) values starting with ``.`` or
``_`` or holding ``=``, are refused; so is a path segment longer than 255 bytes.

A composite record key (``field:value,...``) refuses values holding ``,`` (two rows could
get the same key) and the values ``__null__``/``__empty__`` (Hudi's placeholders) with
:class:`~lakesdk.exceptions.InvalidKeyValueError`.

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

import pyarrow as pa
import pyarrow.compute as pc

from lakesdk.exceptions import InvalidKeyValueError, InvalidPartitionValueError, MissingColumnError, NullKeyError

__all__ = ["record_keys", "partition_paths", "parse_partition_path", "DEFAULT_PARTITION",
           "escape_partition_value", "unescape_partition_value", "partition_value_problem"]

DEFAULT_PARTITION = "__HIVE_DEFAULT_PARTITION__"
#: the longest file or folder name most file systems accept (bytes)
MAX_SEGMENT_BYTES = 255
# PartitionPathEncodeUtils.charToEscape
_ESCAPED = frozenset([chr(c) for c in range(0x20)] + list('"#%\'*/:=?\\\x7f{[]^'))
_URLENCODE_HINT = ("create the table with partition_urlencode=True "
                   "(hoodie.datasource.write.partitionpath.urlencode=true) to store such values percent-encoded")


def escape_partition_value(value: str, *, hive_style: bool = True) -> str:
    """Hudi's ``PartitionPathEncodeUtils.escapePathName``: ``%XX`` for control characters and
    ``"#%'*/:=?\\{[]^`` and DEL.  Not hive style, a leading ``.`` or ``_`` is escaped too
    (a folder named so is hidden from listings; Hudi's unescape reads it back)."""
    out = "".join(f"%{ord(c):02X}" if c in _ESCAPED else c for c in value)
    if not hive_style and out[:1] in (".", "_"):
        out = f"%{ord(out[0]):02X}{out[1:]}"
    return out


def unescape_partition_value(value: str) -> str:
    """Hudi's ``PartitionPathEncodeUtils.unescapePathName``: each ``%XX`` -> the character XX."""
    if "%" not in value:
        return value
    out, i, n = [], 0, len(value)
    while i < n:
        c = value[i]
        if c == "%" and i + 2 < n:
            try:
                out.append(chr(int(value[i + 1:i + 3], 16)))
                i += 3
                continue
            except ValueError:
                pass
        out.append(c)
        i += 1
    return "".join(out)


def partition_value_problem(value: str, field: str, *, hive_style: bool, urlencode: bool) -> str | None:
    """Why ``value`` (text, not empty) of partition field ``field`` cannot be stored as a
    partition path segment that reads back as itself; None when it can."""
    if not urlencode:
        if "/" in value:
            return "holds '/', which would split the partition path into folders"
        ctrl = next((c for c in value if c < " " or c == "\x7f"), None)
        if ctrl is not None:
            return (f"holds the control character {ctrl!r}, which file systems, object stores and Hudi readers "
                    "refuse in paths")
        if not hive_style:
            if value in (".", ".."):
                return "names the current or parent folder"
            if value[0] in "._":
                return f"starts with {value[0]!r}: the folder would be hidden from listings (Hudi and Hadoop skip them)"
            if "=" in value:
                return "holds '=', which reads back as a hive-style field=value segment"
            if ":" in value:
                return ("holds ':', which Hadoop paths (Spark's reader, Hudi's Java readers) take for a URI scheme "
                        "in a folder name that does not start with field=")
        seg = value
    else:
        seg = escape_partition_value(value, hive_style=hive_style)
    n = len((f"{field}={seg}" if hive_style else seg).encode("utf-8"))
    if n > MAX_SEGMENT_BYTES:
        return f"makes a folder name of {n} bytes; file systems accept at most {MAX_SEGMENT_BYTES}"
    return None


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


#: Hudi's KeyGenUtils NULL_RECORDKEY_PLACEHOLDER and EMPTY_RECORDKEY_PLACEHOLDER
_KEY_PLACEHOLDERS = ("__null__", "__empty__")


def _check_composite_part(field: str, text: pa.ChunkedArray | pa.Array, fields: tuple[str, ...]) -> None:
    """A ``,`` inside one value of a composite key makes the key ambiguous (``a="x,b:y", b="z"``
    and ``a="x", b="y,b:z"`` both give ``a:x,b:y,b:z``) and Hudi's key parser splits it."""
    bad = pc.match_substring(text, ",")
    n = pc.sum(bad).as_py() or 0
    if n:
        first = pc.filter(text, bad)[0].as_py()
        raise InvalidKeyValueError(
            f"record key field {field!r} holds ',' in {n} of {len(text)} rows (first: {first!r}); the composite key "
            f"of {list(fields)} is written as field:value pairs joined by ',' (Hudi's ComplexKeyGenerator), so such a "
            f"value makes keys of different rows collide. Expected values without ','; replace the ',' "
            f"(or key the table by one field) before writing")
    special = pc.is_in(text, pa.array(list(_KEY_PLACEHOLDERS)))
    n = pc.sum(special).as_py() or 0
    if n:
        first = pc.filter(text, special)[0].as_py()
        raise InvalidKeyValueError(
            f"record key field {field!r} is {first!r} in {n} of {len(text)} rows; in a composite key Hudi reads "
            f"{' and '.join(map(repr, _KEY_PLACEHOLDERS))} as a null and an empty value, so the key would not read "
            "back as written. Expected another value; replace it before writing")


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
            text = _as_text(c)
            if len(fields) > 1:
                _check_composite_part(f, text, fields)
            parts.append(pa.scalar(f"{f}:"))
            parts.append(text)
            parts.append(pa.scalar(","))
        parts.pop()
        out = pc.binary_join_element_wise(*parts, "")
    else:
        out = _as_text(cols[0])
    return out if isinstance(out, pa.ChunkedArray) else pa.chunked_array([out])


def _segments(col: pa.ChunkedArray | pa.Array, field: str, *, hive_style: bool, urlencode: bool) -> pa.Array:
    """Text partition values -> path segment values (escaped when ``urlencode``), each distinct
    value checked once; raises InvalidPartitionValueError."""
    if isinstance(col, pa.ChunkedArray):
        col = col.combine_chunks() if col.num_chunks else pa.array([], pa.string())
    enc = pc.dictionary_encode(col, null_encoding="encode")
    values = enc.dictionary.to_pylist()
    out = []
    for v in values:
        if v is None or v == "":
            out.append(DEFAULT_PARTITION)
            continue
        seg = escape_partition_value(v, hive_style=hive_style) if urlencode else v
        problem = partition_value_problem(v, field, hive_style=hive_style, urlencode=urlencode)
        if problem is not None:
            shown = v if len(v) <= 80 else v[:60] + f"... ({len(v)} characters)"
            hint = "use a shorter value" if urlencode or "bytes" in problem else f"change the value, or {_URLENCODE_HINT}"
            raise InvalidPartitionValueError(
                f"partition field {field!r} has the value {shown!r}, which {problem}: it would not read back as "
                f"the same value (expected a value that names one visible folder). Nothing was written; {hint}")
        out.append(seg)
    segs = pa.DictionaryArray.from_arrays(enc.indices, pa.array(out, pa.string()))
    return pc.cast(segs, pa.string())


def partition_paths(table: pa.Table, fields: tuple[str, ...], *, hive_style: bool,
                    urlencode: bool = False) -> pa.ChunkedArray:
    """The ``_hoodie_partition_path`` of every row; raises InvalidPartitionValueError for a
    value that would not read back as itself."""
    if not fields:
        return pa.chunked_array([pa.repeat(pa.scalar("", pa.string()), table.num_rows)])
    segs: list = []
    for f in fields:
        v = _segments(_as_text(_column(table, f, "partition")), f, hive_style=hive_style, urlencode=urlencode)
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
            out[k] = None if v == DEFAULT_PARTITION else (unescape_partition_value(v) if urlencoded else v)
        return out
    if len(segs) != len(fields):
        # e.g. a timestamp-based key generator writing yyyy/MM/dd into one field
        return {fields[0]: path} if len(fields) == 1 else {}
    for f, v in zip(fields, segs):
        out[f] = None if v == DEFAULT_PARTITION else (unescape_partition_value(v) if urlencoded else v)
    return out


