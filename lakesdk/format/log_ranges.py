"""The blocks of a log file read by byte ranges: each block's framing, header and footer, and
the content of every block but an HFILE_DATA block, whose HFile stays on storage for a point
lookup to read by ranges (:class:`~lakesdk.format.hfile.HFileReader` with ``source=``).

The framing is :mod:`lakesdk.format.log_block`'s, checked as :func:`~lakesdk.format.log_block.scan_log_file`
checks it.  A file with a corrupt stretch is not scanned here (None): its reader scans it
whole, as before, to find the next good block.

>>> from lakesdk.format.log_block import encode_rollback_block
>>> from lakesdk.format.byte_ranges import ByteRanges
>>> blob = encode_rollback_block("20250126040826878", "20250126040936578")
>>> [(b.block_type.name, b.is_rollback, hf) for b, hf in scan_log_ranges(ByteRanges.of_bytes(blob * 2))]
[('COMMAND', True, None), ('COMMAND', True, None)]
>>> scan_log_ranges(ByteRanges.of_bytes(blob + b"x"))   # a corrupt tail: read it whole
"""

from __future__ import annotations

from lakesdk.exceptions import _CorruptLogBlock
from lakesdk.format.byte_ranges import ByteRanges
from lakesdk.format.log_block import LogBlock, checked_block_type
from lakesdk.format.log_framing import I32X2, I64, MAGIC, BlockType, read_metadata

__all__ = ["scan_log_ranges"]

#: the first read of a block: its framing and, mostly, its whole header (a header holds the
#: writer's Avro schema)
_FIRST_READ = 16 << 10
_MIN_BLOCK = 6 + 8 + 4 + 4 + 4 + 8 + 4 + 8


def scan_log_ranges(src: ByteRanges) -> list[tuple[LogBlock, ByteRanges | None]] | None:
    """Every block of the log file ``src``, in file order, with the window of its HFile for an
    HFILE_DATA block (whose ``content`` is then empty) and None for the others; None when a
    block is corrupt (the file is then read whole)."""
    out: list[tuple[LogBlock, ByteRanges | None]] = []
    pos = 0
    try:
        while pos < src.size:
            block, hfile = _block_at(src, pos)
            out.append((block, hfile))
            pos += block.size
    except _CorruptLogBlock:
        return None
    return out


def _block_at(src: ByteRanges, pos: int) -> tuple[LogBlock, ByteRanges | None]:
    head = src.read(pos, min(_FIRST_READ, src.size - pos))
    if head[:6] != MAGIC or len(head) < 14:
        raise _CorruptLogBlock
    (block_length,) = I64.unpack_from(head, 6)
    end = pos + 14 + block_length          # one past the trailing total length
    if block_length < _MIN_BLOCK - 14 or end > src.size:
        raise _CorruptLogBlock
    tail = src.read(end - 8, 8)
    if len(tail) != 8 or I64.unpack(tail)[0] != end - 8 - pos:
        raise _CorruptLogBlock
    limit = end - 8 - pos                  # positions below are relative to the block's magic
    while True:                            # the header, read again larger while it runs past what was read
        try:
            format_version, type_ordinal = I32X2.unpack_from(head, 14)
            header, cur = read_metadata(head, 22, min(limit, len(head)))
            if cur + 8 > len(head):
                raise _CorruptLogBlock
            break
        except _CorruptLogBlock:
            if len(head) >= limit:
                raise
            head = src.read(pos, min(2 * len(head), limit))
    block_type = checked_block_type(format_version, type_ordinal)
    (content_length,) = I64.unpack_from(head, cur)
    cur += 8
    if content_length < 0 or cur + content_length > limit:
        raise _CorruptLogBlock
    rest = src.read(pos + cur + content_length, limit - cur - content_length)
    footer, used = read_metadata(rest, 0, len(rest))
    if used != len(rest):
        raise _CorruptLogBlock
    if block_type == BlockType.HFILE_DATA:
        return LogBlock(block_type, header, footer, b"", pos, end - pos), src.window(pos + cur, content_length)
    content = head[cur:cur + content_length] if cur + content_length <= len(head) else \
        src.read(pos + cur, content_length)
    return LogBlock(block_type, header, footer, content, pos, end - pos), None
