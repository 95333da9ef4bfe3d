"""The framing of Hudi log blocks: the block types, the header and footer keys, reading and
writing header/footer metadata, and :func:`encode_block` (magic through trailing length).

The grammar is in :mod:`lakesdk.format.log_block`; the content of data and delete blocks in
:mod:`lakesdk.format.log_data_blocks`.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from enum import IntEnum
from typing import Any

from lakesdk.exceptions import _CorruptLogBlock

__all__ = ["MAGIC", "LOG_FORMAT_VERSION", "CONTENT_VERSION", "ROLLBACK_COMMAND", "I32", "I64", "I32X2", "BlockType",
           "HeaderKey", "read_metadata", "encode_block", "encode_rollback_block"]

MAGIC = b"#HUDI#"
LOG_FORMAT_VERSION = 1
CONTENT_VERSION = 3
ROLLBACK_COMMAND = "0"

I32 = struct.Struct(">i")
I64 = struct.Struct(">q")
I32X2 = struct.Struct(">ii")


class BlockType(IntEnum):
    """``HoodieLogBlockType``: the int32 after the format version."""

    COMMAND = 0
    DELETE = 1
    CORRUPT = 2  # only ever produced by Hudi's reader, never written
    AVRO_DATA = 3
    HFILE_DATA = 4
    PARQUET_DATA = 5
    CDC_DATA = 6


class HeaderKey(IntEnum):
    """``HeaderMetadataType``: the ordinals used as header (and footer) keys."""

    INSTANT_TIME = 0
    TARGET_INSTANT_TIME = 1
    SCHEMA = 2
    COMMAND_BLOCK_TYPE = 3
    COMPACTED_BLOCK_TIMES = 4
    RECORD_POSITIONS = 5
    BLOCK_IDENTIFIER = 6
    IS_PARTIAL = 7  # table version 8+
    BASE_FILE_INSTANT_TIME_OF_RECORD_POSITIONS = 8  # table version 8+


def read_metadata(data: bytes, cur: int, limit: int) -> tuple[dict[HeaderKey, str], int]:
    if cur + 4 > limit:
        raise _CorruptLogBlock
    (count,) = I32.unpack_from(data, cur)
    cur += 4
    if count < 0:
        raise _CorruptLogBlock
    out: dict[HeaderKey, str] = {}
    for _ in range(count):
        if cur + 8 > limit:
            raise _CorruptLogBlock
        ordinal, n = I32X2.unpack_from(data, cur)
        cur += 8
        if n < 0 or cur + n > limit:
            raise _CorruptLogBlock
        try:
            value = data[cur:cur + n].decode("utf-8")
        except UnicodeDecodeError:
            raise _CorruptLogBlock from None
        cur += n
        key: Any = HeaderKey(ordinal) if ordinal in HeaderKey._value2member_map_ else ordinal
        out[key] = value
    return out, cur


# -- writing: framing ---------------------------------------------------------------------------
def _metadata_bytes(meta: Mapping[HeaderKey, str] | None) -> bytes:
    items = list((meta or {}).items())
    parts = [I32.pack(len(items))]
    for key, value in items:
        raw = str(value).encode("utf-8")
        parts.append(I32X2.pack(int(key), len(raw)))
        parts.append(raw)
    return b"".join(parts)


def encode_block(block_type: BlockType, header: Mapping[HeaderKey, str], content: bytes,
                 footer: Mapping[HeaderKey, str] | None = None) -> bytes:
    """Frame ``content`` as one complete block (magic through trailing length).

    Header and footer entries are written in their mapping's order.  Appending the result to a
    log file appends the block.
    """
    body = b"".join([
        I32X2.pack(LOG_FORMAT_VERSION, int(block_type)),
        _metadata_bytes(header),
        I64.pack(len(content)),
        bytes(content),
        _metadata_bytes(footer),
    ])
    block_length = len(body) + 8  # + trailing total length
    return b"".join([MAGIC, I64.pack(block_length), body, I64.pack(6 + 8 + len(body))])


def encode_rollback_block(target_instant: str, instant: str) -> bytes:
    """A COMMAND block that rolls back every block written by ``target_instant``.

    ``instant`` is the rollback's own instant.  Header order is INSTANT_TIME,
    COMMAND_BLOCK_TYPE, TARGET_INSTANT_TIME (as in Hudi-written rollback blocks observed).
    """
    header = {HeaderKey.INSTANT_TIME: instant,
              HeaderKey.COMMAND_BLOCK_TYPE: ROLLBACK_COMMAND,
              HeaderKey.TARGET_INSTANT_TIME: target_instant}
    return encode_block(BlockType.COMMAND, header, b"")
