"""The ``files`` partition of Hudi's metadata table as lakesdk writes it: what an action
changes, the records that say so, and the bytes of the files that hold them.

Each action that changes a table's files writes one delta commit of the metadata table (MDT)
with the action's instant time (:mod:`lakesdk.services.metadata_writer`): a new log file
``files/.files-0000-0_<instant>.log.1_0-0-0`` holding one HFile data block, whose entries are
``HoodieMetadataRecord``s keyed by partition path (``.`` for a non-partitioned table) with
the files the action added (name -> size) or deleted (``isDeleted``), plus the partition list
``__all_partitions__`` naming the partitions it wrote.  A write adds the files its write stats
name (a replaced file group's files stay listed until a clean deletes them, as in Hudi); a
clean, rollback or restore deletes the files it deleted.  As in Hudi, a write's block always
holds the partition list (with no partition for a write of no file) and a clean's a record of
every partition it cleaned (with no file where it deleted none).  The MDT starts from a listing: a
base HFile ``files/files-0000-0_0-0-0_00000000000000000.hfile`` written by the delta commit
``00000000000000000`` (Hudi's first initialization time).

>>> change = FilesChange.of_writes([("p=a", "f1.parquet", 10), ("p=a", ".f2.log.1_0-0-0", 5)])
>>> sorted(files_records(change))
['__all_partitions__', 'p=a']
>>> files_records(FilesChange(deleted={"": {"f1.parquet"}}))["."]["filesystemMetadata"]
{'f1.parquet': {'size': 0, 'isDeleted': True}}
"""

from __future__ import annotations

import io
import posixpath
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

import fastavro

from lakesdk.format.hfile_writer import DEFAULT_BLOCK_SIZE, write_hfile
from lakesdk.format.log_framing import BlockType, HeaderKey, encode_block
from lakesdk.format.metadata_records import (
    ALL_PARTITIONS_KEY,
    RecordType,
    _parsed,
    mdt_partition_key,
    record_schema,
    record_schema_json,
)

__all__ = ["FilesChange", "files_records", "hfile_of", "block_size_of", "RECORD_INDEX_BLOCK_SIZE", "files_log_block",
           "mdt_properties", "FILES_GROUP", "INIT_INSTANT", "INITIAL_PREFIX", "WRITE_TOKEN", "METADATA_PAYLOAD", "delete_log_block"]

#: the data block size of the record index's HFiles: a lookup reads and walks one block per key
#: it finds (about 15 entries), where Hudi's 1 MiB blocks hold thousands, so that a lookup of
#: keys spread over the whole index (random keys) costs about as much per key at any size of the
#: index; the data index grows instead (an entry per block), parsed once per process
#: (:mod:`lakesdk.format.hfile_lookup`).  2 KiB: 25% less per key than 4 KiB for 40% more bytes
#: on disk than 1 MiB blocks (gzip has less to work with)
RECORD_INDEX_BLOCK_SIZE = 2048

FILES_GROUP = "files-0000-0"
INIT_INSTANT = "00000000000000000"
#: the times of the MDT's initial instants (its partitions built) start so (Hudi's ``SOLO_COMMIT_TIMESTAMP``)
INITIAL_PREFIX = "0" * 14
WRITE_TOKEN = "0-0-0"
METADATA_PAYLOAD = "org.apache.hudi.metadata.HoodieMetadataPayload"


@dataclass
class FilesChange:
    """Files an action added (partition -> name -> size) and deleted (partition -> names)."""

    added: dict[str, dict[str, int]] = field(default_factory=dict)
    deleted: dict[str, set[str]] = field(default_factory=dict)

    @classmethod
    def of_writes(cls, files: Iterable[tuple[str, str, int]]) -> "FilesChange":
        out = cls()
        for part, name, size in files:
            cur = out.added.setdefault(part, {})
            cur[name] = max(size, cur.get(name, 0))
        return out

    def delete(self, part: str, path: str) -> None:
        self.deleted.setdefault(part, set()).add(posixpath.basename(path))

    def __bool__(self) -> bool:
        return bool(self.added or self.deleted)


def _record(key: str, typ: int, files: Mapping[str, tuple[int, bool]]) -> dict[str, Any]:
    return {"key": key, "type": typ,
            "filesystemMetadata": {n: {"size": s, "isDeleted": d} for n, (s, d) in sorted(files.items())}}


def files_records(change: FilesChange, *, all_partitions: bool = False,
                  partitions: Iterable[str] = ()) -> dict[str, dict[str, Any]]:
    """The ``HoodieMetadataRecord``s (as dicts) of a change, by key; with ``all_partitions``
    the partition list even when the change adds none (an MDT built for a table without files,
    a write of no file); ``partitions`` get a file list even when the change names none of
    their files (a clean's partitions where it deleted nothing).

    >>> files_records(FilesChange(), all_partitions=True)["__all_partitions__"]["filesystemMetadata"]
    {}
    >>> files_records(FilesChange(), partitions=["p=a"])["p=a"]["filesystemMetadata"]
    {}
    """
    out: dict[str, dict[str, Any]] = {}
    parts = set(change.added) | set(change.deleted) | set(partitions)
    for part in parts:
        files: dict[str, tuple[int, bool]] = {n: (0, True) for n in change.deleted.get(part, ())}
        files.update({n: (s, False) for n, s in change.added.get(part, {}).items()})
        out[mdt_partition_key(part)] = _record(mdt_partition_key(part), RecordType.FILE_LIST, files)
    if change.added or all_partitions:
        out[ALL_PARTITIONS_KEY] = _record(ALL_PARTITIONS_KEY, RecordType.PARTITION_LIST,
                                          {mdt_partition_key(p): (0, False) for p in change.added})
    return out


def _value(rec: Mapping[str, Any], schema: Any) -> bytes:
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, schema, dict(rec))
    return buf.getvalue()


_MARK = "\x00lakesdk-key\x00"


def _entry_value(key: str, entry: Any, schema: Any, templates: dict[Any, tuple[bytes, bytes]]) -> bytes:
    """The Avro bytes of a record index entry (:class:`~lakesdk.format.record_index.IndexEntry`)
    for ``key``: the record of its location encoded once with a marker key, the key spliced in
    (an Avro string: its zig-zag varint length, then its UTF-8 bytes)."""
    parts = templates.get(entry)
    if parts is None:
        raw = _value(entry.as_record(_MARK), schema)
        mark = _avro_string(_MARK)
        at = raw.index(mark)
        parts = templates[entry] = (raw[:at], raw[at + len(mark):])
    return parts[0] + _avro_string(key) + parts[1]


def _avro_string(s: str) -> bytes:
    b = s.encode("utf-8")
    n = len(b) << 1          # zig-zag of a length (never negative)
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out) + b


def block_size_of(partition: str) -> int:
    """The data block size of the HFiles lakesdk writes into an MDT partition: Hudi's
    ``hoodie.hfile.block.size`` (1 MiB), and :data:`RECORD_INDEX_BLOCK_SIZE` for ``record_index``."""
    return RECORD_INDEX_BLOCK_SIZE if partition == "record_index" else DEFAULT_BLOCK_SIZE


def hfile_of(records: Mapping[str, Mapping[str, Any]], *, base: bool = False, schema_json: str | None = None,
             block_size: int = DEFAULT_BLOCK_SIZE) -> bytes:
    """An HFile of records in key order, written with ``schema_json`` (an MDT keeps the schema
    it was built with: Hudi 1.0's lacks fields of 1.1's; default lakesdk's, Hudi 1.1's); a base
    file carries the schema in its file info."""
    text = schema_json or record_schema_json()
    schema = record_schema() if schema_json is None else _parsed(text)
    templates: dict[Any, tuple[bytes, bytes]] = {}
    items = sorted((k.encode("utf-8"), _value(r, schema) if isinstance(r, Mapping) else _entry_value(k, r, schema,
                                                                                                      templates))
                   for k, r in records.items())
    info: dict[bytes | str, bytes] | None = {b"schema": text.encode("utf-8")} if base else None
    return write_hfile(items, file_info=info, block_size=block_size)


def files_log_block(records: Mapping[str, Mapping[str, Any]], instant: str, *, schema_json: str | None = None,
                    block_size: int = DEFAULT_BLOCK_SIZE) -> bytes:
    """One HFile data block of ``records``, for the MDT delta commit ``instant``."""
    header = {HeaderKey.INSTANT_TIME: instant, HeaderKey.SCHEMA: schema_json or record_schema_json()}
    return encode_block(BlockType.HFILE_DATA, header, hfile_of(records, schema_json=schema_json, block_size=block_size))


def delete_log_block(keys: Iterable[str], instant: str, partition: str, *, schema_json: str | None = None) -> bytes:
    """One DELETE block of MDT record ``keys`` (of the MDT ``partition``, which Hudi names as
    their partition path; no ordering value), for the MDT delta commit ``instant``."""
    import pyarrow as pa

    from lakesdk.format.log_data_blocks import encode_delete_block
    ks = sorted(keys)
    header = {HeaderKey.INSTANT_TIME: instant, HeaderKey.SCHEMA: schema_json or record_schema_json()}
    return encode_delete_block(pa.table({"_hoodie_record_key": pa.array(ks, pa.string()),
                                         "_hoodie_partition_path": pa.array([partition] * len(ks), pa.string())}),
                               header)


def mdt_properties(table_name: str, version: int) -> dict[str, str]:
    """The ``hoodie.properties`` of a new MDT (as Hudi 1.x writes it), ``files`` built."""
    return {
        "hoodie.table.name": f"{table_name}_metadata", "hoodie.table.type": "MERGE_ON_READ",
        "hoodie.table.version": str(version), "hoodie.table.initial.version": str(version),
        "hoodie.timeline.layout.version": "2", "hoodie.timeline.path": "timeline",
        "hoodie.timeline.history.path": "history", "hoodie.archivelog.folder": "history",
        "hoodie.table.keygenerator.type": "HOODIE_TABLE_METADATA", "hoodie.table.recordkey.fields": "key",
        "hoodie.table.base.file.format": "HFILE", "hoodie.populate.meta.fields": "false",
        "hoodie.datasource.write.drop.partition.columns": "false", "hoodie.record.merge.mode": "CUSTOM",
        "hoodie.record.merge.strategy.id": "00000000-0000-0000-0000-000000000000",
        "hoodie.compaction.payload.class": METADATA_PAYLOAD,
        # Hudi 1.1 names the built partitions in the MDT's config too (Hudi 1.0 does not)
        **({"hoodie.table.metadata.partitions": "files"} if version >= 9 else {}),
    }
