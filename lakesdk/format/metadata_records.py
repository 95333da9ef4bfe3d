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

from lakesdk.exceptions import CorruptFileError

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


@dataclass(frozen=True)
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
    :class:`~lakesdk.exceptions.CorruptFileError` naming ``path``."""
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
