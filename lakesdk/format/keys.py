"""Record keys and partition paths, computed on Arrow data.

Record key (``_hoodie_record_key``), as Apache Hudi's key generators write it:
  * one key field (simple / non-partitioned / timestamp key generators): the value as text,
    e.g. ``"1"``;
  * complex key generator (several key fields, or ``COMPLEX`` with one): ``field:value``
    pairs joined by ``,``, e.g. ``"id:1,name:Alice"``.  A null part is written
    ``field:__null__`` and an empty one ``field:__empty__`` (Hudi's ``KeyGenerator``
    ``NULL_RECORDKEY_PLACEHOLDER`` / ``EMPTY_RECORDKEY_PLACEHOLDER``), e.g.
    ``"id:1,name:__empty__"``.

A row whose key is null or empty as a whole (one key field null or ``''``; every part of a
composite key null or ``''``) has no key: Hudi refuses it (``HoodieKeyException``), and so
does lakesdk, with :class:`~lakesdk.exceptions.NullKeyError`, before anything is written.
A composite key refuses values holding ``,`` (two rows could get the same key) and the
values ``__null__``/``__empty__`` (they would read back as a null and an empty value) with
:class:`~lakesdk.exceptions.InvalidKeyValueError`.

Key encodings (:data:`HUDI_ENCODING`, :data:`LEGACY_ENCODING`): lakesdk before this rule
wrote an empty composite part as nothing (``"id:1,name:"``), refused every null key value and
accepted an empty single key.  Tables keep the keys they hold: a table lakesdk creates
records ``hoodie.lakesdk.record.key.encoding=hudi``; a table without that property (written
by Apache Hudi, or created by an earlier lakesdk) uses Hudi's encoding unless its stored keys
show the earlier one (see :func:`stored_key_encoding`); ``table.maintenance.upgrade_key_encoding()``
rewrites such keys as Hudi writes them.

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

Sequence number (``_hoodie_commit_seqno``): ``<instant>_<task partition>_<record number>``,
as Hudi's ``HoodieRecord.generateSequenceId`` writes it (:func:`sequence_numbers`).

>>> import pyarrow as pa
>>> t = pa.table({"id": [1, 2], "city": ["sf", None]})
>>> record_keys(t, ("id",), "SIMPLE").to_pylist()
['1', '2']
>>> record_keys(pa.table({"id": [1, 2], "name": ["", None]}), ("id", "name"), "COMPLEX").to_pylist()
['id:1,name:__empty__', 'id:2,name:__null__']
>>> partition_paths(t, ("city",), hive_style=True).to_pylist()
['city=sf', 'city=__HIVE_DEFAULT_PARTITION__']
>>> parse_partition_path("city=sf/d=1", ("city", "d"), hive_style=True)
{'city': 'sf', 'd': '1'}
"""

from __future__ import annotations

import re

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakesdk.exceptions import (
    InvalidKeyValueError,
    InvalidPartitionValueError,
    KeyEncodingError,
    MissingColumnError,
    NullKeyError,
)

__all__ = ["sequence_numbers", "record_keys", "partition_paths", "parse_partition_path", "DEFAULT_PARTITION",
           "escape_partition_value", "unescape_partition_value", "partition_value_problem",
           "HUDI_ENCODING", "LEGACY_ENCODING", "KEY_ENCODINGS", "NULL_PLACEHOLDER", "EMPTY_PLACEHOLDER",
           "is_composite", "has_missing_key_parts", "legacy_key_pattern", "stored_key_encoding",
           "null_key_error", "keyless_key_error"]

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
    if pa.types.is_integer(t):   # the C part's text where it can (integer_text), else Arrow's cast below
        chunks = [integer_text(c) for c in (col.chunks if isinstance(col, pa.ChunkedArray) else [col])]
        if all(c is not None for c in chunks):
            return pa.chunked_array(chunks, pa.string()) if isinstance(col, pa.ChunkedArray) else chunks[0]
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


#: Hudi's ``KeyGenerator.NULL_RECORDKEY_PLACEHOLDER`` and ``EMPTY_RECORDKEY_PLACEHOLDER``
NULL_PLACEHOLDER = "__null__"
EMPTY_PLACEHOLDER = "__empty__"
_KEY_PLACEHOLDERS = (NULL_PLACEHOLDER, EMPTY_PLACEHOLDER)
#: Hudi's key generators: a null composite part is ``field:__null__``, an empty one
#: ``field:__empty__``; a key null or empty as a whole is refused
HUDI_ENCODING = "hudi"
#: lakesdk's earlier keys: an empty composite part is ``field:``, a null key value is refused,
#: an empty single-field key is ``""`` (or ``field:`` with the complex key generator)
LEGACY_ENCODING = "legacy"
KEY_ENCODINGS = (HUDI_ENCODING, LEGACY_ENCODING)


def is_composite(fields: tuple[str, ...], keygen: str) -> bool:
    """Whether keys are ``field:value`` pairs (Hudi's complex key generator)."""
    return keygen == "COMPLEX" or len(fields) > 1


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


def _missing(text: pa.ChunkedArray | pa.Array) -> pa.ChunkedArray | pa.Array:
    """Per row: the value is null or empty (never null itself)."""
    return pc.or_kleene(pc.is_null(text), pc.equal(text, ""))


def has_missing_key_parts(table: pa.Table, fields: tuple[str, ...]) -> bool:
    """Whether some row has a null or empty record-key value: only such rows get different
    keys (or are refused differently) under the two key encodings."""
    for f in fields:
        if f in table.column_names and (pc.any(_missing(_as_text(table.column(f)))).as_py() or False):
            return True
    return False


def null_key_error(field: str, n: int, total: int, *, legacy_composite: bool = False) -> NullKeyError:
    hint = ("; the table's keys are in lakesdk's earlier encoding, which has no null key part: "
            "table.maintenance.upgrade_key_encoding() rewrites them as Hudi does (a null part is field:__null__)"
            if legacy_composite else "")
    return NullKeyError(f"record key field {field!r} is null in {n} of {total} rows; every row needs a key: "
                        f"fill or drop those rows before writing{hint}")


def keyless_key_error(fields: tuple[str, ...], n: int, total: int) -> NullKeyError:
    """Rows whose key is null or empty as a whole (Hudi's ``HoodieKeyException``)."""
    what = f"field {fields[0]!r} is" if len(fields) == 1 else f"fields {list(fields)} are all"
    return NullKeyError(
        f"record key {what} null or empty ('') in {n} of {total} rows; Hudi refuses a record key that is "
        "entirely null or empty (HoodieKeyException), so every row needs a non-empty key value: fill or drop "
        "those rows before writing")


def record_keys(table: pa.Table, fields: tuple[str, ...], keygen: str, *,
                encoding: str = HUDI_ENCODING) -> pa.ChunkedArray:
    """The ``_hoodie_record_key`` values for every row, in the table's key ``encoding``;
    raises NullKeyError for a row without a key and InvalidKeyValueError for a composite-key
    value that would not read back."""
    cols = [_column(table, f, "record key") for f in fields]
    composite = is_composite(fields, keygen)
    if encoding == LEGACY_ENCODING or not composite:
        for f, c in zip(fields, cols):
            if c.null_count:
                raise null_key_error(f, c.null_count, len(c), legacy_composite=composite)
    texts = [_as_text(c) for c in cols]
    if len(fields) > 1:
        for f, text in zip(fields, texts):
            _check_composite_part(f, text, fields)
    if encoding == HUDI_ENCODING:
        keyless = _missing(texts[0])
        for text in texts[1:]:
            keyless = pc.and_(keyless, _missing(text))
        n = pc.sum(keyless).as_py() or 0
        if n:
            raise keyless_key_error(fields, n, len(keyless))
        if composite:   # Hudi's KeyGenerator.constructRecordKey: null -> __null__, '' -> __empty__
            texts = [pc.fill_null(pc.if_else(pc.equal(t, ""), EMPTY_PLACEHOLDER, t), NULL_PLACEHOLDER) for t in texts]
    if composite:
        parts: list = []
        for f, text in zip(fields, texts):
            parts += [pa.scalar(f"{f}:"), text, pa.scalar(",")]
        parts.pop()
        out = pc.binary_join_element_wise(*parts, "")
    else:
        out = texts[0]
    return out if isinstance(out, pa.ChunkedArray) else pa.chunked_array([out])


def legacy_key_pattern(fields: tuple[str, ...], keygen: str) -> str:
    """A regular expression matching a stored ``_hoodie_record_key`` that only lakesdk's
    earlier encoding writes: an empty key part written as nothing (``a:,b:x``, ``a:x,b:``),
    or an empty single-field key.  Hudi never writes one (an empty part is ``a:__empty__``,
    an empty key is refused); only a value holding ``,<next field>:`` could look alike."""
    if not is_composite(fields, keygen):
        return "^$"
    e = [re.escape(f) for f in fields]
    if len(e) == 1:
        return f"^{e[0]}:$"
    alts = [f"^{e[0]}:,{e[1]}:"] + [f",{e[i]}:,{e[i + 1]}:" for i in range(1, len(e) - 1)] + [f",{e[-1]}:$"]
    return "|".join(alts)


def _hudi_key_pattern(fields: tuple[str, ...]) -> str:
    names = "|".join(re.escape(f) for f in fields)
    return f"(^|,)({names}):__(null|empty)__(,|$)"


def stored_key_encoding(keys: pa.ChunkedArray | pa.Array, fields: tuple[str, ...], keygen: str) -> str:
    """The encoding a table's stored record ``keys`` show: :data:`LEGACY_ENCODING` when some key
    has an empty part written as nothing (see :func:`legacy_key_pattern`), else
    :data:`HUDI_ENCODING` (Hudi's placeholders, or no null or empty part at all).  Keys of both
    encodings raise :class:`~lakesdk.exceptions.KeyEncodingError`: the same row may be stored
    twice, once under each."""
    keys = pc.drop_null(keys)
    legacy = pc.match_substring_regex(keys, legacy_key_pattern(fields, keygen))
    n_legacy = pc.sum(legacy).as_py() or 0
    if not n_legacy:
        return HUDI_ENCODING
    if is_composite(fields, keygen):
        hudi = pc.match_substring_regex(keys, _hudi_key_pattern(fields))
        n_hudi = pc.sum(hudi).as_py() or 0
        if n_hudi:
            raise KeyEncodingError(
                f"the table's record keys mix two encodings of a null or empty key part: {n_legacy} key(s) like "
                f"{pc.filter(keys, legacy)[0].as_py()!r} (lakesdk's earlier encoding: an empty part written as "
                f"nothing) and {n_hudi} like {pc.filter(keys, hudi)[0].as_py()!r} (Hudi's __null__/__empty__), so a "
                "row may be stored twice. Run table.maintenance.upgrade_key_encoding() to rewrite the earlier keys "
                "as Hudi writes them (keeping one row per key) before writing rows with null or empty key values")
    return LEGACY_ENCODING


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




def integer_text(values: pa.Array) -> pa.Array | None:
    """The decimal text of integers that fit an int64, as ``pc.cast(values, pa.string())`` gives
    it, written by the C part (a few times faster than Arrow's cast); None where it is not built,
    for a null value, or beyond 2 GiB of text."""
    from lakesdk.format.bloom_hash import native
    if native is None or values.null_count or not pa.types.is_integer(values.type) or pa.types.is_uint64(values.type):
        return None
    v = np.ascontiguousarray(values.to_numpy(zero_copy_only=False), dtype=np.int64)
    off = np.empty(len(v) + 1, np.int32)
    total = native.integers(v, off, None)
    if total < 0:
        return None
    data = np.empty(total, np.uint8)
    native.integers(v, off, data)
    return pa.Array.from_buffers(pa.string(), len(v), [None, pa.py_buffer(off), pa.py_buffer(data)])


def sequence_numbers(instant: str, partition_id: int, n: int, start: int = 0) -> pa.Array:
    """``_hoodie_commit_seqno`` of ``n`` records, numbered from ``start`` in task
    ``partition_id`` of the write of ``instant``: ``"<instant>_<partition_id>_<number>"``."""
    prefix = f"{instant}_{partition_id}_".encode()
    # bytes of the numbers' digits: those of each digit count, the numbers start..start+n-1
    total, lo, end = n * len(prefix), start, start + n
    while lo < end:
        top = min(end, 10 ** len(str(lo)))
        total += (top - lo) * len(str(lo))
        lo = top
    from lakesdk.format.bloom_hash import native
    if native is None or total >= 1 << 31 or n == 0:
        idx = pc.cast(pa.array(np.arange(start, start + n, dtype=np.int64)), pa.string())
        return pc.binary_join_element_wise(prefix.decode(), idx, "")
    off, data = np.empty(n + 1, np.int32), np.empty(total, np.uint8)
    native.decimals(prefix, start, off, data)
    return pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(off), pa.py_buffer(data)])
