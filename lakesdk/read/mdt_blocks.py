"""Decoded log blocks of metadata table log files: what the reader of the metadata table and
the point lookups of the record index (:mod:`lakesdk.read.record_lookup`) share."""

from __future__ import annotations

from dataclasses import dataclass

from lakesdk.exceptions import CorruptFileError
from lakesdk.format.log_block import BlockType, read_log_file
from lakesdk.format.log_framing import HeaderKey
from lakesdk.format.metadata_records import MetadataRecord, decode_record

__all__ = ["_Block", "_blocks_of_keys"]


@dataclass(frozen=True)
class _Block:
    """A log block of an MDT log file, decoded: its records (HFile data) or the keys it deletes."""
    instant: str | None
    rollback: bool
    target: str | None
    records: tuple[MetadataRecord, ...] = ()
    deleted: tuple[str, ...] = ()


def _blocks_of_keys(url: str, data: bytes, keys: set[str]) -> tuple[_Block, ...]:
    """The blocks of the MDT log file ``data`` (at ``url``) with only the records of ``keys``
    decoded (seeks when they are few against a block's entries), and their deleted keys."""
    out: list[_Block] = []
    wanted = sorted(k.encode("utf-8") for k in keys)
    for b in read_log_file(data):
        if b.block_type == BlockType.HFILE_DATA:
            schema = b.header.get(HeaderKey.SCHEMA)
            if not schema:
                raise CorruptFileError(f"{url}: an HFile data block at offset {b.offset} has no SCHEMA header", path=url)
            hf = b.hfile(url)
            if len(wanted) * 8 < len(hf):
                items = [(k, v) for k in wanted if (v := hf.get(k)) is not None]
            else:
                items = [(k, v) for k, v in hf if k.decode("utf-8", "replace") in keys]
            out.append(_Block(b.instant, False, None,
                              records=tuple(decode_record(v, schema, key=k, path=url) for k, v in items)))
        elif b.block_type == BlockType.DELETE:
            deleted = b.delete_records().column("_hoodie_record_key").to_pylist()
            out.append(_Block(b.instant, False, None, deleted=tuple(str(k) for k in deleted if k in keys)))
        elif b.block_type == BlockType.COMMAND:
            out.append(_Block(b.instant, b.is_rollback, b.target_instant))
        else:
            raise CorruptFileError(f"{url}: a metadata table log file holds a {b.block_type.name} block at offset "
                                   f"{b.offset}; it holds HFile data, delete and command blocks only", path=url)
    return tuple(out)
