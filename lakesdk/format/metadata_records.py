"""Records of Hudi's metadata table: ``HoodieMetadataRecord`` decoded, and the ``files`` merge.

Every value the metadata table (MDT) stores, in its HFile base files and in the HFile data
blocks of its log files, is one Avro ``HoodieMetadataRecord`` (binary, no framing) written
with the schema the file carries (the HFile's file info ``schema``, the log block's SCHEMA
header; lakesdk keeps the one Hudi 1.1 writes in ``schemas/HoodieMetadataRecord.avsc``)::

    HoodieMetadataRecord := key: string, type: int, one payload by type (the others null)
    type 1  partition list  key "__all_partitions__"; filesystemMetadata: partition -> entry
    type 2  file list       key = partition path ("." when not partitioned);
                            filesystemMetadata: file name -> {size: long, isDeleted: boolean}
    type 3  column stats    ColumnStatsMetadata (file, column, min/max wrapped, counts, sizes)
    type 4  bloom filter    BloomFilterMetadata (type code, instant, filter bytes, isDeleted)
    type 5  record index    recordIndexMetadata (partition, file id as UUID bits + index or
                            a string, instant time in epoch milliseconds, position)
    type 6  partition stats ColumnStatsMetadata per partition and column
    type 7  secondary index SecondaryIndexMetadata {isDeleted}

Merging a ``files`` record with a newer one (Hudi's ``HoodieMetadataPayload``, combining file
system metadata): a file of the newer record adds to the older listing with the larger of the
two sizes (sizes only grow: a log file is appended to); a deletion (``isDeleted``) removes the
file, or stays as a tombstone when the older listing does not hold it, so that it still
applies to an older base file merged later.  A record deleted as a whole (a delete block in a
log file) removes the key.

>>> older = {"a.parquet": FileEntry(10, False), "b.log.1": FileEntry(5, False)}
>>> newer = {"a.parquet": FileEntry(0, True), "b.log.1": FileEntry(7, False), "c.parquet": FileEntry(3, False)}
>>> merge_file_entries(older, newer)
{'b.log.1': FileEntry(size=7, deleted=False), 'c.parquet': FileEntry(size=3, deleted=False)}
>>> merge_file_entries({}, {"x": FileEntry(0, True)})
{'x': FileEntry(size=0, deleted=True)}
"""

from __future__ import annotations

import io
import json
import uuid
from dataclasses import dataclass
from enum import IntEnum
from functools import lru_cache
from importlib import resources
from typing import Any, Mapping

import fastavro

from lakesdk.exceptions import CorruptFileError, _BadAvroBytes
from lakesdk.format.avro_file import _long

__all__ = ["RecordType", "FileEntry", "MetadataRecord", "ColumnStats", "RecordLocation", "decode_record",
           "merge_file_entries", "record_schema", "record_schema_json", "ALL_PARTITIONS_KEY", "NON_PARTITIONED_KEY",
           "mdt_partition_key", "data_partition_of", "decode_file_id"]

ALL_PARTITIONS_KEY = "__all_partitions__"
NON_PARTITIONED_KEY = "."


class RecordType(IntEnum):
    PARTITION_LIST = 1
    FILE_LIST = 2
    COLUMN_STATS = 3
    BLOOM_FILTER = 4
    RECORD_INDEX = 5
    PARTITION_STATS = 6
    SECONDARY_INDEX = 7


@dataclass(frozen=True, slots=True)
class FileEntry:
    size: int
    deleted: bool


@dataclass(frozen=True)
class ColumnStats:
    """One ``column_stats`` (or ``partition_stats``) entry; min/max unwrapped from their wrappers."""
    file_name: str | None
    column: str | None
    min_value: Any
    max_value: Any
    value_count: int | None
    null_count: int | None
    total_size: int | None
    deleted: bool


@dataclass(frozen=True)
class RecordLocation:
    """One ``record_index`` entry: where a record key lives."""
    partition: str | None
    file_id: str
    instant_ms: int | None
    position: int | None


@dataclass(frozen=True)
class MetadataRecord:
    key: str
    type: int
    files: dict[str, FileEntry] | None = None
    column_stats: ColumnStats | None = None
    location: RecordLocation | None = None
    deleted: bool = False          # a bloom filter or secondary index entry marked deleted
    raw: Mapping[str, Any] | None = None


def mdt_partition_key(partition: str) -> str:
    """The ``files`` record key of a data partition path ("" is the non-partitioned table's)."""
    return partition or NON_PARTITIONED_KEY


def data_partition_of(key: str) -> str:
    return "" if key == NON_PARTITIONED_KEY else key


@lru_cache(maxsize=2)
def record_schema_json(table_version: int = 9) -> str:
    """The ``HoodieMetadataRecord`` schema Hudi 1.1 writes (meta fields included), as JSON text;
    for a version 8 table Hudi 1.0's: the same without the column statistics' ``valueType``
    and the ``ArrayWrapper`` of their values (the fields Hudi 1.1 added)."""
    schema = json.loads(resources.files("lakesdk.format").joinpath("schemas/HoodieMetadataRecord.avsc").read_text())
    if table_version < 9:
        for field in schema["fields"]:
            if field["name"] == "ColumnStatsMetadata":
                stats = field["type"][1]
                stats["fields"] = [f for f in stats["fields"] if f["name"] != "valueType"]
                for f in stats["fields"]:
                    if f["name"] in ("minValue", "maxValue"):
                        f["type"] = [t for t in f["type"] if not (t if isinstance(t, str) else t.get("name", ""))
                                     .endswith("ArrayWrapper")]
    return json.dumps(schema, separators=(",", ":"))


def record_schema() -> Any:
    """The parsed ``HoodieMetadataRecord`` schema (:func:`record_schema_json`)."""
    return _parsed(record_schema_json())


@lru_cache(maxsize=16)
def _parsed(schema_json: str) -> Any:
    return fastavro.parse_schema(json.loads(schema_json))


def _unwrap(v: Any) -> Any:
    # min/max values are unions of single-field wrapper records, decoded with their names
    if isinstance(v, tuple):
        v = v[1]
    if isinstance(v, dict) and "value" in v and len(v) == 1:
        return v["value"]
    return v


def decode_file_id(ri: Mapping[str, Any]) -> str:
    """The file id of a ``HoodieRecordIndexInfo``: a string (encoding 1), or a UUID from its high
    and low bits with ``-<fileIndex>`` when the index is set (encoding 0)."""
    if ri.get("fileIdEncoding", 0) == 1 or ri.get("fileIdHighBits") is None:
        return str(ri.get("fileId") or "")
    hi, lo = ri["fileIdHighBits"] & (2**64 - 1), ri["fileIdLowBits"] & (2**64 - 1)
    u = str(uuid.UUID(int=(hi << 64) | lo))
    idx = ri.get("fileIndex")
    return u if idx is None or idx < 0 else f"{u}-{idx}"


def decode_record(value: bytes, schema_json: str, *, key: bytes | None = None,
                  path: str = "<metadata table>") -> MetadataRecord:
    """One ``HoodieMetadataRecord`` from its Avro bytes and the writer schema's JSON text.
    ``key``: the HFile key the value was stored under, which is the record's key (Hudi's HFile
    writer blanks the ``key`` field of the value: the HFile key holds it).  Bytes that do not
    decode (or do not end where the record does) are a
    :class:`~lakesdk.exceptions.CorruptFileError` naming ``path``.

    A file or partition list (the ``files`` partition's records) is decoded by
    :func:`_decode_file_list` when the schema allows it, else (and whenever its bytes are not
    exactly such a record) by fastavro, whose call costs more than the decoding of a small record."""
    shape = _file_list_shape(schema_json)
    if shape is not None:
        try:
            fast = _decode_file_list(value, shape)
            fast_key = None if fast is None else fast["key"] if key is None else key.decode("utf-8")
        except (IndexError, ValueError, _BadAvroBytes):   # damaged or unusual bytes: fastavro says what is wrong
            fast = fast_key = None
        if fast is not None and fast_key is not None:
            listed = fast["filesystemMetadata"]
            return MetadataRecord(fast_key, fast["type"], raw=fast, files=None if listed is None else {
                name: FileEntry(e["size"], e["isDeleted"]) for name, e in listed.items()})
    return _decode_avro(value, schema_json, key=key, path=path)


def _decode_avro(value: bytes, schema_json: str, *, key: bytes | None, path: str) -> MetadataRecord:
    """:func:`decode_record` by fastavro, whatever the record."""
    buf = io.BytesIO(value)
    try:
        # the wrappers of column statistics decoded with their names: a V1 record's say its type
        rec = fastavro.schemaless_reader(buf, _parsed(schema_json), None, return_record_name=True,
                                         return_record_name_override=True)
    except Exception as exc:  # noqa: BLE001 - any decoder failure means damaged bytes
        raise CorruptFileError(f"{path}: a metadata table record does not decode ({exc}); the file is damaged",
                               path=path) from None
    if buf.tell() != len(value) or not isinstance(rec, dict) or "key" not in rec or "type" not in rec:
        raise CorruptFileError(f"{path}: a metadata table record has {len(value) - buf.tell()} bytes after it, or no "
                               "key and type: the file is damaged", path=path)
    typ = rec["type"]
    try:
        record_key = str(rec["key"]) if key is None else key.decode("utf-8")
    except UnicodeDecodeError:
        raise CorruptFileError(f"{path}: a metadata table key is not UTF-8 ({key!r}): the file is damaged",
                               path=path) from None
    files = rec.get("filesystemMetadata")
    out: dict[str, Any] = {"raw": rec}
    if files is not None:
        out["files"] = {name: FileEntry(int(e["size"]), bool(e["isDeleted"])) for name, e in files.items()}
    cs = rec.get("ColumnStatsMetadata")
    if cs is not None:
        out["column_stats"] = ColumnStats(cs.get("fileName"), cs.get("columnName"), _unwrap(cs.get("minValue")),
                                          _unwrap(cs.get("maxValue")), cs.get("valueCount"), cs.get("nullCount"),
                                          cs.get("totalSize"), bool(cs.get("isDeleted")))
        out["deleted"] = bool(cs.get("isDeleted"))
    ri = rec.get("recordIndexMetadata")
    if ri is not None:
        out["location"] = RecordLocation(ri.get("partitionName"), decode_file_id(ri), ri.get("instantTime"), ri.get("position"))
    for field in ("BloomFilterMetadata", "SecondaryIndexMetadata"):
        payload = rec.get(field)
        if payload is not None:
            out["deleted"] = bool(payload.get("isDeleted"))
    return MetadataRecord(record_key, typ, **out)


#: how :func:`_decode_file_list` reads a field: a nullable string, the key, the type, the
#: file map, or a union that must hold null
_NULL_STRING, _KEY, _TYPE, _FILE_MAP, _NULL = range(5)


def _type_name(t: Any) -> Any:
    return t.get("type") if isinstance(t, dict) and isinstance(t.get("type"), str) else t


@lru_cache(maxsize=16)
def _file_list_shape(schema_json: str) -> tuple[tuple[str, int], ...] | None:
    """(field name, how it is read) of every field of a ``HoodieMetadataRecord`` schema whose
    file and partition lists :func:`_decode_file_list` can read, None for another schema."""
    try:
        fields = json.loads(schema_json)["fields"]
        out = []
        for f in fields:
            name, t = f["name"], f["type"]
            if name == "key" and _type_name(t) == "string":
                kind = _KEY
            elif name == "type" and _type_name(t) == "int":
                kind = _TYPE
            elif name == "filesystemMetadata":
                m = t[1] if isinstance(t, list) and len(t) == 2 and _type_name(t[0]) == "null" else None
                info = m.get("values") if isinstance(m, dict) and m.get("type") == "map" else None
                if not (isinstance(info, dict) and info.get("type") == "record"
                        and [(x["name"], _type_name(x["type"])) for x in info["fields"]]
                        == [("size", "long"), ("isDeleted", "boolean")]):
                    return None
                kind = _FILE_MAP
            elif isinstance(t, list) and t and _type_name(t[0]) == "null":
                kind = _NULL_STRING if len(t) == 2 and _type_name(t[1]) == "string" else _NULL
            else:
                return None
            out.append((name, kind))
    except (ValueError, KeyError, TypeError, AttributeError, IndexError):
        return None
    kinds = [k for _, k in out]
    if sorted(k for k in kinds if k in (_KEY, _TYPE, _FILE_MAP)) != [_KEY, _TYPE, _FILE_MAP]:
        return None
    return tuple(out)


def _string(v: bytes, pos: int) -> tuple[str, int]:
    n, pos = _long(v, pos)
    end = pos + n
    if n < 0 or end > len(v):
        raise ValueError("an Avro string runs past the record")
    return v[pos:end].decode("utf-8"), end


def _decode_file_list(v: bytes, shape: tuple[tuple[str, int], ...]) -> dict[str, Any] | None:
    """The fields of a ``HoodieMetadataRecord`` that holds a file or partition list (or none),
    as fastavro decodes them (the same dict); None when another payload is set (a column
    statistics record...), for fastavro to decode.  Raises ``ValueError``, ``IndexError`` or ``_BadAvroBytes`` on
    bytes that are not such a record (fastavro then says what is wrong)."""
    out: dict[str, Any] = {}
    pos = 0
    for name, kind in shape:
        if kind == _KEY:
            out[name], pos = _string(v, pos)
        elif kind == _TYPE:
            t, pos = _long(v, pos)
            if not -2**31 <= t < 2**31:
                raise ValueError("an Avro int out of range")
            out[name] = t
        elif kind == _FILE_MAP:
            branch = v[pos]
            pos += 1
            if branch == 0:
                out[name] = None
                continue
            if branch != 2:
                raise ValueError("a union branch out of range")
            files: dict[str, dict[str, Any]] = {}
            while True:
                count, pos = _long(v, pos)
                if count == 0:
                    break
                if count < 0:
                    count = -count
                    _, pos = _long(v, pos)       # the block's size in bytes
                for _ in range(count):
                    n = v[pos]       # the name's length: one or two bytes of varint inline
                    if n < 0x80:
                        pos += 1
                    elif v[pos + 1] < 0x80:
                        n = (n & 0x7F) | (v[pos + 1] << 7)
                        pos += 2
                    else:
                        n, pos = _long(v, pos)
                        n <<= 1
                    if n & 1 or pos + (n >> 1) > len(v):
                        raise ValueError("an Avro string of a negative length or past the record")
                    end = pos + (n >> 1)
                    file = v[pos:end].decode("utf-8")
                    size, pos = _long(v, end)
                    deleted = v[pos]
                    pos += 1
                    if deleted > 1:
                        raise ValueError("a boolean byte other than 0 or 1")
                    files[file] = {"size": size, "isDeleted": deleted == 1}
            out[name] = files
        else:
            branch = v[pos]
            pos += 1
            if branch == 0:
                out[name] = None
            elif branch == 2 and kind == _NULL_STRING:
                out[name], pos = _string(v, pos)
            else:
                return None      # another payload (not a file or partition list), or bad bytes
    if pos != len(v):
        raise ValueError("bytes after the record")
    return out


def merge_file_entries(older: Mapping[str, FileEntry], newer: Mapping[str, FileEntry]) -> dict[str, FileEntry]:
    """The listing of ``older`` with ``newer`` merged on top (see the module docstring)."""
    out = dict(older)
    for name, e in newer.items():
        old = out.get(name)
        if old is None:
            out[name] = e
        elif e.deleted:
            if old.deleted:
                out[name] = e
            else:
                del out[name]
        else:
            out[name] = FileEntry(max(e.size, old.size), False)
    return out
