"""Avro binary records <-> Arrow columns, a whole block at a time (numpy, no per-record calls).

An AVRO_DATA block is a sequence of records, each prefixed by its byte length.  Every record
follows the same schema, so field *k* of every record can be decoded at once: the decoder
keeps one read position per record and walks the schema, advancing all positions together
(a ``[null, T]`` union decodes T only at the positions whose branch is T).  Encoding is the
mirror: each field becomes per-record byte runs, which are scattered into the records.

Handled: null, boolean, int, long, float, double, string, bytes, fixed, enum (decode),
records, ``[null, T]``/``[T, null]`` unions of those, and the logical types on top of them
(the caller works with their physical values).  Anything else (arrays, maps, other unions,
decimals stored as bytes) raises :class:`Unsupported`, and the caller uses the record-at-a-time
codec.  A reference by name to a record defined earlier in the schema (a CDC log's ``after``)
is read as that record: :func:`inline_named_types`.  Damaged input raises :class:`Unsupported` too (the
record-at-a-time codec then tells which record is bad); this module never raises anything
else on bad bytes.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakesdk.exceptions import _ColumnarUnsupported

__all__ = ["Unsupported", "decode_records", "encode_records", "inline_named_types"]


Unsupported = _ColumnarUnsupported   # the schema or the data is not for the columnar codec


_PAD = 16                         # zero bytes after the content: a varint read never runs off
_AR10 = np.arange(10, dtype=np.int64)
_SHIFTS = (7 * _AR10).astype(np.uint64)


def _is_null_type(t: Any) -> bool:
    return t == "null" or (isinstance(t, dict) and t.get("type") == "null")


# -- decoding ----------------------------------------------------------------------------------
def _varints(buf: np.ndarray, pos: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(zigzag-decoded int64 values, new positions) of the varints starting at ``pos``.

    One byte at a time for the varints that still continue: short varints (union branches,
    lengths, small numbers) cost one pass."""
    n = len(pos)
    b = buf[pos]
    u = (b & 0x7F).astype(np.uint64)
    nbytes = np.ones(n, dtype=np.int64)
    active = np.flatnonzero(b & 0x80)
    for j in range(1, 10):
        if len(active) == 0:
            break
        b = buf[pos[active] + j]
        u[active] |= (b & 0x7F).astype(np.uint64) << np.uint64(7 * j)
        nbytes[active] += 1
        active = active[(b & 0x80) != 0]
    else:
        if len(active):
            raise Unsupported("a varint longer than 10 bytes")
    values = (u >> np.uint64(1)).astype(np.int64) ^ -(u & np.uint64(1)).astype(np.int64)
    return values, pos + nbytes


def _gather(buf: np.ndarray, pos: np.ndarray, lens: np.ndarray, limit: int) -> tuple[np.ndarray, np.ndarray]:
    """(offsets, bytes) of the runs ``buf[pos:pos+lens]``; runs past ``limit`` are damage."""
    if (lens < 0).any() or (len(pos) and (pos + lens > limit).any()):
        raise Unsupported("a length runs past the data")
    offsets = np.zeros(len(lens) + 1, dtype=np.int64)
    np.cumsum(lens, out=offsets[1:])
    total = int(offsets[-1])
    if total == 0:
        return offsets, np.zeros(0, np.uint8)
    idx = np.repeat(pos - offsets[:-1], lens) + np.arange(total, dtype=np.int64)
    return offsets, buf[idx]


def _fixed_matrix(buf: np.ndarray, pos: np.ndarray, size: int) -> np.ndarray:
    return buf[pos[:, None] + np.arange(size, dtype=np.int64)[None, :]] if size else np.zeros((len(pos), 0), np.uint8)


def _decimal_from_fixed(m: np.ndarray, t: pa.Decimal128Type) -> pa.Array:
    """Big-endian two's complement rows of ``m`` -> decimal128 (sign-extended to 16 bytes)."""
    n, size = m.shape
    if size > 16:
        raise Unsupported("a decimal wider than 16 bytes")
    le = np.zeros((n, 16), dtype=np.uint8)
    if size:
        le[:, :size] = m[:, ::-1]
        neg = (m[:, 0] & 0x80) != 0
        le[neg, size:] = 0xFF
    return pa.Array.from_buffers(t, n, [None, pa.py_buffer(le.tobytes())])


def _decode(avro: Any, target: pa.DataType, buf: np.ndarray, pos: np.ndarray, limit: int) -> tuple[pa.Array, np.ndarray]:
    """The values of type ``avro`` at ``pos`` as an Arrow array of type ``target``, and the
    positions after them."""
    n = len(pos)
    if isinstance(avro, list):
        if len(avro) != 2 or sum(_is_null_type(t) for t in avro) != 1:
            raise Unsupported(f"union {avro}")
        null_branch = 0 if _is_null_type(avro[0]) else 1
        branch, pos = _varints(buf, pos)
        if ((branch != 0) & (branch != 1)).any():
            raise Unsupported("a union branch out of range")
        present = branch != null_branch
        sub, sub_pos = _decode(avro[1 - null_branch], target, buf, pos[present], limit)
        pos = pos.copy()
        pos[present] = sub_pos
        if present.all():
            return sub, pos
        idx = np.full(n, 0, dtype=np.int64)
        idx[present] = np.arange(int(present.sum()), dtype=np.int64)
        return sub.take(pa.array(idx, mask=~present)), pos
    kind = avro.get("type") if isinstance(avro, dict) else avro
    if isinstance(kind, (dict, list)):
        return _decode(kind, target, buf, pos, limit)
    if kind == "null":
        return pa.nulls(n, target), pos
    if kind == "boolean":
        values = buf[pos] != 0
        return pa.array(values, pa.bool_()).cast(target), pos + 1
    if kind in ("int", "long"):
        values, pos = _varints(buf, pos)
        t = pa.int32() if kind == "int" else pa.int64()
        if kind == "int" and len(values) and (values.min() < -2**31 or values.max() >= 2**31):
            raise Unsupported("an int out of range")
        arr = pa.array(values.astype(np.int32) if kind == "int" else values, t)
        return (arr if target == t else arr.cast(target)), pos
    if kind in ("float", "double"):
        size, dtype = (4, "<f4") if kind == "float" else (8, "<f8")
        m = np.ascontiguousarray(_fixed_matrix(buf, pos, size))
        arr = pa.array(m.view(dtype).reshape(n).astype(dtype[1:], copy=False))
        return (arr if arr.type == target else arr.cast(target)), pos + size
    if kind in ("string", "bytes"):
        if isinstance(avro, dict) and avro.get("logicalType") == "decimal":
            raise Unsupported("a decimal stored as bytes")
        lens, pos = _varints(buf, pos)
        offsets, data = _gather(buf, pos, lens, limit)
        t = pa.string() if kind == "string" else pa.binary()
        if int(offsets[-1]) >= 2**31:
            raise Unsupported("more than 2 GiB of strings")
        arr = pa.Array.from_buffers(t, n, [None, pa.py_buffer(offsets.astype(np.int32).tobytes()),
                                           pa.py_buffer(data.tobytes())])
        if kind == "string":
            try:
                arr.validate(full=True)
            except pa.ArrowInvalid:
                raise Unsupported("a string that is not UTF-8") from None
        return (arr if target == t else arr.cast(target)), pos + lens
    if kind == "fixed":
        size = int(avro["size"])
        m = _fixed_matrix(buf, pos, size)
        if pa.types.is_decimal128(target) and avro.get("logicalType") == "decimal":
            return _decimal_from_fixed(m, target), pos + size
        arr = pa.Array.from_buffers(pa.binary(size), n, [None, pa.py_buffer(np.ascontiguousarray(m).tobytes())])
        return (arr if target == arr.type else arr.cast(target)), pos + size
    if kind == "enum":
        symbols = pa.array(avro["symbols"], pa.string())
        idx, pos = _varints(buf, pos)
        if len(idx) and (idx.min() < 0 or idx.max() >= len(symbols)):
            raise Unsupported("an enum index out of range")
        arr = symbols.take(pa.array(idx))
        return (arr if target == arr.type else arr.cast(target)), pos
    if kind == "record":
        if not pa.types.is_struct(target):
            raise Unsupported("a record read as a non-struct")
        children = []
        for f, tf in zip(avro["fields"], target):
            child, pos = _decode(f["type"], tf.type, buf, pos, limit)
            children.append(child)
        return pa.StructArray.from_arrays(children, fields=list(target)), pos
    raise Unsupported(f"Avro type {kind!r}")


def inline_named_types(schema: Any) -> Any:
    """``schema`` with every reference by name to a record, enum or fixed type defined earlier
    replaced by a copy of that definition under a new name (the binary encoding does not depend
    on names); a reference to a type not defined before it stays (and the codec refuses it)."""
    names: dict[str, Any] = {}
    copies = [0]

    def renamed(t: Any) -> Any:
        """A copy of a definition whose named types get new names (a schema defines a name once)."""
        if isinstance(t, list):
            return [renamed(x) for x in t]
        if not isinstance(t, dict):
            return t
        out = {k: renamed(v) if k in ("type", "items", "values", "fields") else v for k, v in t.items()}
        if t.get("type") in ("record", "enum", "fixed") and "name" in t:
            copies[0] += 1
            out["name"] = f"{str(t['name']).rpartition('.')[2]}_copy{copies[0]}"
        return out

    def walk(t: Any, ns: str) -> Any:
        if isinstance(t, str):
            found = names.get(t) or names.get(f"{ns}.{t}" if ns and "." not in t else t)
            return renamed(found) if found is not None else t
        if isinstance(t, list):
            return [walk(x, ns) for x in t]
        if not isinstance(t, dict):
            return t
        kind = t.get("type")
        if kind in ("record", "enum", "fixed"):
            name = str(t.get("name", ""))
            own = str(t.get("namespace") or (name.rpartition(".")[0] if "." in name else ns))
            out = dict(t)
            if kind == "record":
                out["fields"] = [{**f, "type": walk(f.get("type"), own)} for f in t.get("fields", [])]
            full = name if "." in name else (f"{own}.{name}" if own else name)
            names.setdefault(full, out)
            names.setdefault(name, out)
            return out
        if kind == "array":
            return {**t, "items": walk(t.get("items"), ns)}
        if kind == "map":
            return {**t, "values": walk(t.get("values"), ns)}
        if isinstance(kind, (dict, list)):
            return {**t, "type": walk(kind, ns)}
        return t

    return walk(schema, "")


def decode_records(content: bytes, starts: np.ndarray, lengths: np.ndarray, avro_schema: dict,
                   physical: pa.Schema) -> pa.Table:
    """The records at ``starts`` (each ``lengths`` bytes) of ``content``, written with
    ``avro_schema`` (logical types stripped), as a table of ``physical``.  Raises
    :class:`Unsupported` for what this codec does not handle or for damaged bytes."""
    buf = np.frombuffer(content + bytes(_PAD), dtype=np.uint8)
    pos = starts.astype(np.int64)
    ends = pos + lengths
    limit = len(content)
    cols = []
    fields = avro_schema.get("fields", [])
    if len(fields) != len(physical):
        raise Unsupported("the schema does not match its Arrow form")
    try:
        for f, af in zip(fields, physical):
            col, pos = _decode(f["type"], af.type, buf, pos, limit)
            if len(pos) and (pos > ends).any():
                raise Unsupported("a record decodes past its end")
            cols.append(col)
    except (pa.ArrowException, ValueError, TypeError, KeyError, IndexError, OverflowError) as exc:
        raise Unsupported(f"{type(exc).__name__}: {exc}") from None
    if not np.array_equal(pos, ends):
        raise Unsupported("a record's length disagrees with its fields")
    return pa.Table.from_arrays(cols, schema=physical)


# -- encoding ----------------------------------------------------------------------------------
Pieces = list[tuple[np.ndarray, np.ndarray]]   # (bytes per record, the bytes in record order)


def _zigzag_varints(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    v = values.astype(np.int64)
    u = ((v << np.int64(1)) ^ (v >> np.int64(63))).astype(np.uint64)
    groups = ((u[:, None] >> _SHIFTS[None, :]) & np.uint64(0x7F)).astype(np.uint8)
    nonzero = np.zeros(len(u), dtype=np.int64)
    rest = u.copy()
    for _ in range(10):   # bytes needed: 7 bits each, at least one
        nonzero += rest != 0
        rest >>= np.uint64(7)
    nbytes = np.maximum(nonzero, 1)
    keep = _AR10[None, :] < nbytes[:, None]
    groups[_AR10[None, :] < (nbytes - 1)[:, None]] |= 0x80
    return nbytes, groups[keep]


def _valid_mask(arr: pa.Array) -> np.ndarray:
    if arr.null_count == 0:
        return np.ones(len(arr), dtype=bool)
    return np.asarray(arr.is_valid().to_numpy(zero_copy_only=False), dtype=bool)


def _encode(avro: Any, arr: pa.Array) -> Pieces:
    n = len(arr)
    if isinstance(avro, list):
        if len(avro) != 2 or sum(_is_null_type(t) for t in avro) != 1:
            raise Unsupported(f"union {avro}")
        null_branch = 0 if _is_null_type(avro[0]) else 1
        valid = _valid_mask(arr)
        branch = np.where(valid, 1 - null_branch, null_branch)
        pieces = [_zigzag_varints(branch)]
        sub = arr if valid.all() else arr.filter(pa.array(valid))
        for lens, data in _encode(avro[1 - null_branch], sub):
            if len(sub) == n:
                pieces.append((lens, data))
            else:
                full = np.zeros(n, dtype=np.int64)
                full[valid] = lens
                pieces.append((full, data))
        return pieces
    if arr.null_count:
        raise Unsupported("a null in a field that is not nullable")
    kind = avro.get("type") if isinstance(avro, dict) else avro
    if isinstance(kind, (dict, list)):
        return _encode(kind, arr)
    if kind == "null":
        return []
    if kind == "boolean":
        values = np.asarray(arr.cast(pa.bool_()).to_numpy(zero_copy_only=False), dtype=np.uint8)
        return [(np.ones(n, dtype=np.int64), values)]
    if kind in ("int", "long"):
        t = pa.int32() if kind == "int" else pa.int64()
        values = np.asarray(pc.cast(arr, t).to_numpy(zero_copy_only=False), dtype=np.int64)
        return [_zigzag_varints(values)]
    if kind in ("float", "double"):
        t, dtype = (pa.float32(), "<f4") if kind == "float" else (pa.float64(), "<f8")
        values = np.asarray(pc.cast(arr, t, safe=False).to_numpy(zero_copy_only=False)).astype(dtype)
        return [(np.full(n, values.itemsize, dtype=np.int64), values.view(np.uint8))]
    if kind in ("string", "bytes"):
        if isinstance(avro, dict) and avro.get("logicalType") == "decimal":
            raise Unsupported("a decimal stored as bytes")
        a = arr.cast(pa.string() if kind == "string" else pa.binary())
        if isinstance(a, pa.ChunkedArray):
            a = a.combine_chunks()
        offsets = np.frombuffer(a.buffers()[1], dtype=np.int32)[a.offset:a.offset + n + 1].astype(np.int64)
        lens = np.diff(offsets)
        data = np.frombuffer(a.buffers()[2], dtype=np.uint8)[offsets[0]:offsets[-1]] if n and a.buffers()[2] \
            else np.zeros(0, np.uint8)
        return [_zigzag_varints(lens), (lens, data)]
    if kind == "fixed":
        size = int(avro["size"])
        if not pa.types.is_fixed_size_binary(arr.type) or arr.type.byte_width != size:
            raise Unsupported("fixed values of another size")
        raw = np.frombuffer(arr.buffers()[1], dtype=np.uint8)[arr.offset * size:(arr.offset + n) * size]
        return [(np.full(n, size, dtype=np.int64), raw)]
    if kind == "record":
        if not pa.types.is_struct(arr.type):
            raise Unsupported("a record from a non-struct")
        pieces = []
        for f in avro["fields"]:
            idx = arr.type.get_field_index(f["name"])
            child = arr.field(idx) if idx >= 0 else pa.nulls(n)
            pieces.extend(_encode(f["type"], child))
        return pieces
    raise Unsupported(f"Avro type {kind!r}")


def encode_records(columns: dict[str, pa.Array], avro_schema: dict, n: int) -> bytes:
    """``n`` records (every record as int32 big-endian length + Avro binary) from
    ``columns`` (already in the physical form of their field's type: see the caller).
    Missing columns are null.  Raises :class:`Unsupported`."""
    pieces: Pieces = []
    try:
        for f in avro_schema.get("fields", []):
            arr = columns.get(f["name"])
            if arr is None:
                if f.get("default") is not None:
                    raise Unsupported("a missing column whose field has a default")
                arr = pa.nulls(n)
            pieces.extend(_encode(f["type"], arr))
    except (pa.ArrowException, ValueError, TypeError, KeyError, OverflowError) as exc:
        raise Unsupported(f"{type(exc).__name__}: {exc}") from None
    rec_len = np.zeros(n, dtype=np.int64)
    for lens, _ in pieces:
        rec_len += lens
    if n and rec_len.max() >= 2**31:
        raise Unsupported("a record over 2 GiB")
    starts = np.zeros(n, dtype=np.int64)
    if n > 1:
        np.cumsum(rec_len[:-1] + 4, out=starts[1:])
    total = int(rec_len.sum()) + 4 * n
    out = np.empty(total, dtype=np.uint8)
    out[starts[:, None] + np.arange(4)[None, :]] = rec_len.astype(">i4").view(np.uint8).reshape(n, 4)
    cur = starts + 4
    for lens, data in pieces:
        m = len(data)
        if m:
            src = np.zeros(n, dtype=np.int64)
            np.cumsum(lens[:-1], out=src[1:])
            out[np.repeat(cur - src, lens) + np.arange(m, dtype=np.int64)] = data
        cur = cur + lens
    return out.tobytes()
