"""Avro object container files as the timeline stores them (one record, codec null).

Hudi serialises every Avro timeline file (commit metadata on table version 8+, plans,
clean, rollback, savepoint and restore metadata) with ``DataFileWriter`` and no codec, and
reads the first record with the model class's schema.  :func:`write_record` writes such a
file; :func:`read_record` reads one as Hudi does, after checking the container framing
against the file's size, so that damaged bytes give a
:class:`~lakesdk.exceptions.CorruptTimelineError` (never a decoder crash, a huge allocation
or a shorter file read as a valid one)::

    file   := "Obj\\x01" metadata sync block+        (ends exactly after the last block)
    block  := long count >= 1, long size, size bytes of count records, sync
    long   := zig-zag varint (at most 10 bytes)

The record is decoded with lakesdk's copy of the model schema as reader schema (Avro schema
resolution), so its fields have the types the schema declares.
"""

from __future__ import annotations

import io
import json
from functools import lru_cache
from importlib import resources
from typing import Any

import fastavro

from lakesdk.exceptions import CorruptTimelineError, _BadAvroBytes

__all__ = ["AVRO_MAGIC", "FileBytes", "is_avro", "read_record", "write_record", "model_schema", "check_writer_schema"]

AVRO_MAGIC = b"Obj\x01"
_SYNC_LEN = 16


@lru_cache(maxsize=None)
def model_schema(name: str) -> Any:
    """The parsed ``org.apache.hudi.avro.model.<name>`` schema shipped with lakesdk."""
    text = resources.files("lakesdk.format").joinpath(f"schemas/{name}.avsc").read_text()
    return fastavro.parse_schema(json.loads(text))


def is_avro(data: bytes) -> bool:
    return data[:4] == AVRO_MAGIC


class FileBytes(bytes):
    """The bytes of a file, with the file's ``path``: parse errors name the file."""

    path: str | None = None

    def __new__(cls, data: bytes, path: str | None = None) -> "FileBytes":
        obj = super().__new__(cls, data)
        obj.path = path
        return obj


def _zero_width(t: Any, named: dict[str, Any], seen: frozenset[str]) -> bool:
    """Whether values of Avro type ``t`` can take no bytes at all."""
    if isinstance(t, str):
        if t == "null":
            return True
        if t in named and t not in seen:
            return _zero_width(named[t], named, seen | {t})
        return False
    if isinstance(t, list):
        return False  # the branch index takes a byte
    if isinstance(t, dict):
        kind = t.get("type")
        if kind == "record" or kind == "error":
            fields = t.get("fields")
            return isinstance(fields, list) and all(
                isinstance(f, dict) and _zero_width(f.get("type"), named, seen) for f in fields)
        if kind == "fixed":
            return t.get("size") == 0
        if kind in ("array", "map", "enum"):
            return False
        return _zero_width(kind, named, seen)
    return False


def check_writer_schema(schema: Any) -> None:
    """Raise ``ValueError`` when an array or map of ``schema`` holds items that take no bytes:
    a damaged item count could then make a reader loop (almost) forever on a few bytes."""
    named: dict[str, Any] = {}
    stack = [schema]
    todo: list[Any] = []
    while stack:
        t = stack.pop()
        if isinstance(t, list):
            stack.extend(t)
        elif isinstance(t, dict):
            if isinstance(t.get("name"), str):
                named[t["name"]] = t
                if isinstance(t.get("namespace"), str):
                    named[f"{t['namespace']}.{t['name']}"] = t
            kind = t.get("type")
            if kind in ("array", "map"):
                todo.append(t.get("items") if kind == "array" else t.get("values"))
                stack.append(todo[-1])
            elif kind in ("record", "error") and isinstance(t.get("fields"), list):
                stack.extend(f.get("type") for f in t["fields"] if isinstance(f, dict))
            elif isinstance(kind, (dict, list)):
                stack.append(kind)
    for item in todo:
        if _zero_width(item, named, frozenset()):
            raise ValueError(f"an array or map of the schema holds items that take no bytes ({item!r:.60})")


def _long(data: bytes, pos: int) -> tuple[int, int]:
    """A zig-zag varint at ``pos``: (value, position after it); bytes that end inside it, or a
    varint of more than 10 bytes, raise ``_BadAvroBytes``."""
    try:
        b = data[pos]
        if b < 0x80:     # one byte: most counts, lengths and sizes
            return (b >> 1) ^ -(b & 1), pos + 1
        acc, shift, i = b & 0x7F, 7, pos + 1
        while i < pos + 10:
            b = data[i]
            acc |= (b & 0x7F) << shift
            i += 1
            if b < 0x80:
                return (acc >> 1) ^ -(acc & 1), i
            shift += 7
    except IndexError:
        raise _BadAvroBytes(f"the file ends inside a number at byte {max(pos, len(data))}") from None
    raise _BadAvroBytes(f"the number at byte {pos} is longer than 10 bytes")


def _bytes(data: bytes, pos: int) -> tuple[bytes, int]:
    n, pos = _long(data, pos)
    if n < 0 or pos + n > len(data):
        raise _BadAvroBytes(f"a length of {n} bytes at byte {pos} runs past the end of the file ({len(data)} bytes)")
    return data[pos:pos + n], pos + n


def _check_framing(data: bytes) -> tuple[str, bytes, slice]:
    """Check the container's framing; return the name of the writer schema's record, the
    schema's bytes and where the first data block's records are."""
    if data[:4] != AVRO_MAGIC:
        raise _BadAvroBytes(f"it does not start with the Avro magic {AVRO_MAGIC!r} (found {bytes(data[:4])!r})")
    pos = 4
    meta: dict[str, bytes] = {}
    while True:
        count, pos = _long(data, pos)
        if count == 0:
            break
        if count < 0:
            count = -count
            _, pos = _long(data, pos)  # byte size of the block of entries
        if count > len(data) - pos:
            raise _BadAvroBytes(f"the header claims {count} entries, more than the file's bytes")
        for _ in range(count):
            key, pos = _bytes(data, pos)
            value, pos = _bytes(data, pos)
            try:
                meta[key.decode("utf-8")] = value
            except UnicodeDecodeError:
                raise _BadAvroBytes("a header key is not UTF-8") from None
    if "avro.schema" not in meta:
        raise _BadAvroBytes("the header has no avro.schema entry")
    raw_schema = meta["avro.schema"]
    name = _writer_schema_name(raw_schema)
    codec = meta.get("avro.codec", b"null")
    if codec not in (b"null", b""):
        raise _BadAvroBytes(f"codec {codec!r} is not the codec timeline files use (null)")
    if pos + _SYNC_LEN > len(data):
        raise _BadAvroBytes("the file ends inside the header's sync marker")
    sync = data[pos:pos + _SYNC_LEN]
    pos += _SYNC_LEN
    blocks = 0
    first = slice(0)
    while pos < len(data):
        count, pos = _long(data, pos)
        size, pos = _long(data, pos)
        if not blocks:
            first = slice(pos, pos + size)
        if count < 1 or size < 1 or count > size:
            raise _BadAvroBytes(f"data block {blocks} claims {count} records in {size} bytes")
        if pos + size + _SYNC_LEN > len(data):
            raise _BadAvroBytes(f"data block {blocks} claims {size} bytes, but the file ends "
                       f"{len(data) - pos} bytes after its start (truncated?)")
        pos += size
        if data[pos:pos + _SYNC_LEN] != sync:
            raise _BadAvroBytes(f"data block {blocks} does not end with the file's sync marker")
        pos += _SYNC_LEN
        blocks += 1
    if blocks == 0:
        raise _BadAvroBytes("it holds no record (a header only: truncated?)")
    return name, raw_schema, first


@lru_cache(maxsize=64)
def _writer_schema_name(raw: bytes) -> str:
    """The record name of a writer schema (its header's ``avro.schema``), once checked; cached
    by its bytes, as a timeline holds files of a handful of schemas."""
    try:
        writer = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise _BadAvroBytes("the header's avro.schema is not JSON") from None
    name = writer.get("name") if isinstance(writer, dict) else None
    if not isinstance(name, str):
        raise _BadAvroBytes("the header's avro.schema is not a named record schema")
    try:
        check_writer_schema(writer)
    except (ValueError, RecursionError) as exc:
        raise _BadAvroBytes(str(exc)) from None
    return name


@lru_cache(maxsize=64)
def _is_model_schema(raw: bytes, name: str) -> bool:
    """Whether a writer schema is lakesdk's model schema ``name`` itself (the files lakesdk
    writes): such a file is read without schema resolution, which would change nothing and
    take as long again as the decoding."""
    try:
        return bool(fastavro.parse_schema(json.loads(raw.decode("utf-8"))) == model_schema(name))
    except Exception:  # noqa: BLE001 - any schema fastavro will not parse is resolved as before
        return False


def read_record(data: bytes, schema: str | tuple[str, ...], what: str) -> dict[str, Any]:
    """The first record of an Avro timeline file, read with the model schema ``schema`` (or,
    given several, the one the file's writer schema is named after).

    Raises :class:`CorruptTimelineError` (``what`` names the file's role) when the framing is
    damaged or the record cannot be read as ``schema``.
    """
    where = getattr(data, "path", None)
    if where:
        what = f"{where}: {what}"
    data = bytes(data)
    names = (schema,) if isinstance(schema, str) else tuple(schema)
    try:
        writer_name, raw_schema, first = _check_framing(data)
    except _BadAvroBytes as exc:
        raise CorruptTimelineError(f"{what} is not a valid Avro file ({len(data)} bytes): {exc}",
                                   path=where) from None
    short = writer_name.rsplit(".", 1)[-1]
    if short not in names:
        raise CorruptTimelineError(
            f"{what} holds a {short!r} record, expected {' or '.join(repr(n) for n in names)}", path=where)
    schema = short
    try:
        if _is_model_schema(raw_schema, schema):
            # the first record of the first block, read with the model schema (the writer's): no
            # container reader, which would parse the header's schema again for each file
            rec = fastavro.schemaless_reader(io.BytesIO(data[first]), model_schema(schema), None)
        else:
            rec = next(iter(fastavro.reader(io.BytesIO(data), reader_schema=model_schema(schema))))
    except Exception as exc:  # noqa: BLE001 - fastavro raises many kinds on bad bytes or schemas
        raise CorruptTimelineError(
            f"{what} cannot be read as {schema} ({len(data)} bytes): {type(exc).__name__}: {exc}",
            path=where) from None
    if not isinstance(rec, dict):
        raise CorruptTimelineError(f"{what} does not hold a {schema} record", path=where)
    return rec


def write_record(schema: str, record: dict[str, Any]) -> bytes:
    """``record`` as an Avro object container file (codec null) with the model schema
    ``schema``, as Hudi writes timeline files."""
    buf = io.BytesIO()
    fastavro.writer(buf, model_schema(schema), [record], codec="null")
    return buf.getvalue()
