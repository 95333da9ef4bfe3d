"""Hudi log files: the block framing and the AVRO_DATA, PARQUET_DATA, DELETE and COMMAND blocks.

A merge-on-read file group keeps its changes in log files (``.<fileId>_<instant>.log.<n>_<token>``).
A log file is nothing but blocks appended one after another; the grammar is the same for table
versions 6 and 8.  All integers are big-endian (Java ``DataOutputStream``)::

    log file      := block*
    block         := MAGIC block_length format_version block_type
                     header content_length content footer total_length
    MAGIC         := "#HUDI#"                          6 bytes
    block_length  := int64   bytes after this field, up to and including total_length
    format_version:= int32   always 1 (HoodieLogFormat.CURRENT_VERSION)
    block_type    := int32   BlockType ordinal
    header        := metadata                          (HeaderKey -> str)
    footer        := metadata                          (always empty in practice: count 0)
    metadata      := int32 count, count * (int32 key ordinal, int32 n, n bytes of UTF-8)
    content_length:= int64
    content       := content_length bytes, by block type:
        AVRO_DATA, CDC_DATA := int32 version (3), int32 record count,
                               count * (int32 n, n bytes: one record, Avro binary,
                                        writer schema = header SCHEMA)
        PARQUET_DATA        := a complete Parquet file (empty: no records); header
                               SCHEMA as for Avro blocks
        DELETE              := int32 version (3), int32 n,
                               n bytes: Avro binary of HoodieDeleteRecordList
        COMMAND             := empty; header COMMAND_BLOCK_TYPE "0" = rollback of the
                               blocks written by header TARGET_INSTANT_TIME
        HFILE_DATA          := a complete HFile (metadata table only): entries
                               (record key, Avro binary of the value, writer
                               schema = header SCHEMA); LogBlock.hfile() reads it
    total_length  := int64   bytes from MAGIC up to, not including, this field
                             (= block_length + 6)

Header entries are written in the order of the ``header`` dict (Hudi's own writer uses a hash
map, so the order varies between files and means nothing).  Data and delete blocks written by
Hudi carry INSTANT_TIME (the deltacommit) and SCHEMA (the full Avro schema *with* the
``_hoodie_*`` meta fields); a rollback block carries INSTANT_TIME, COMMAND_BLOCK_TYPE and
TARGET_INSTANT_TIME.

**Delete records.**  ``HoodieDeleteRecordList`` is ``{deleteRecordList: array<{recordKey:
[null,string], partitionPath: [null,string], orderingVal: [null, BooleanWrapper, IntWrapper,
LongWrapper, FloatWrapper, DoubleWrapper, BytesWrapper, StringWrapper, DateWrapper,
DecimalWrapper, TimeMicrosWrapper, TimestampMicrosWrapper, ArrayWrapper]}>}`` where every
``XWrapper`` is a record with a single field ``value`` (schema:
``lakesdk/format/schemas/HoodieDeleteRecordList.avsc``).  The *union index* is what goes on
disk, so the branch order is part of the format.  A delete that carries no ordering value is
written by Hudi as ``IntWrapper(0)``, its "natural order" marker (``DeleteRecord.create``): such
a delete always wins over the record it deletes.  Hudi's Java log scanner tests a delete's
ordering value with ``deleteOrderingVal.equals(0)`` when the key was already seen, which a null
value would fail, so :func:`encode_delete_block` writes ``IntWrapper(0)`` whenever no ordering
value is given at all.  (The spec's flat ``[null,int,long,...]`` description of this union is
not what Hudi writes: the conformance delete block holds branch 2, IntWrapper, value 0.)

**Corruption.**  A block is corrupt when the magic is missing where a block should start, its
length runs past the end of the data, its trailing total length disagrees with its length, or
its fields do not fit exactly inside it (or its format version or block type is unknown).
Like Hudi's ``HoodieLogFileReader``, the reader then scans forward for the next magic and
carries on; a half-written tail after a crash is the common case.  Consecutive failures without
a good block in between count as one corrupt stretch.

>>> blob = encode_rollback_block("20250126040826878", "20250126040936578")
>>> [block] = read_log_file(blob + blob[:40])          # a second block cut short
>>> block.block_type.name, block.is_rollback, block.target_instant
('COMMAND', True, '20250126040826878')
>>> scan_log_file(blob + b"garbage" + blob)[1]
1
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

import pyarrow as pa

from lakesdk.exceptions import LakeError, LogBlockError, _CorruptLogBlock
from lakesdk.format.hfile import HFileReader
from lakesdk.format.log_data_blocks import (
    DELETE_KEY_COLUMNS,
    decode_avro_records,
    decode_delete_content,
    decode_parquet_records,
    encode_avro_data_block,
    encode_data_block,
    encode_delete_block,
    encode_parquet_data_block,
)
from lakesdk.format.log_data_blocks import _delete_schema as _delete_schema
from lakesdk.format.log_framing import (
    CONTENT_VERSION,
    I32X2,
    I64,
    LOG_FORMAT_VERSION,
    MAGIC,
    ROLLBACK_COMMAND,
    BlockType,
    HeaderKey,
    encode_block,
    encode_rollback_block,
    read_metadata,
)

__all__ = [
    "MAGIC",
    "LOG_FORMAT_VERSION",
    "CONTENT_VERSION",
    "BlockType",
    "HeaderKey",
    "LogBlock",
    "LogBlockError",
    "read_log_file",
    "hfile_block_items",
    "scan_log_file",
    "encode_block",
    "encode_avro_data_block",
    "encode_parquet_data_block",
    "encode_data_block",
    "encode_delete_block",
    "encode_rollback_block",
    "DELETE_KEY_COLUMNS",
]

# magic + block length + format version + type + header count + content length + footer count + total length
_MIN_BLOCK = 6 + 8 + 4 + 4 + 4 + 8 + 4 + 8

# the old private name of the delete content decoder
_decode_delete_content = decode_delete_content


# -- the block -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class LogBlock:
    """One block of a log file, as found on disk.

    ``header`` and ``footer`` map :class:`HeaderKey` to the string value (an ordinal this
    module does not know stays a plain ``int`` key).  ``offset`` is the position of the
    block's magic in the file, ``size`` the block's total byte count (magic through the
    trailing length), so ``offset + size`` is where the next block starts.
    """

    block_type: BlockType
    header: dict[HeaderKey, str]
    footer: dict[HeaderKey, str]
    content: bytes
    offset: int
    size: int
    format_version: int = field(default=LOG_FORMAT_VERSION, compare=False)

    @property
    def instant(self) -> str | None:
        """Header INSTANT_TIME: the (delta)commit that wrote this block."""
        return self.header.get(HeaderKey.INSTANT_TIME)

    @property
    def target_instant(self) -> str | None:
        """Header TARGET_INSTANT_TIME: for a rollback block, the instant whose blocks are void."""
        return self.header.get(HeaderKey.TARGET_INSTANT_TIME)

    @property
    def is_rollback(self) -> bool:
        """A COMMAND block whose COMMAND_BLOCK_TYPE is ``"0"`` (ROLLBACK_BLOCK)."""
        return (self.block_type == BlockType.COMMAND
                and self.header.get(HeaderKey.COMMAND_BLOCK_TYPE) == ROLLBACK_COMMAND)

    @property
    def avro_schema(self) -> dict | None:
        """The SCHEMA header parsed as JSON (the writer schema of the block), if present."""
        text = self.header.get(HeaderKey.SCHEMA)
        if text is None:
            return None
        try:
            schema = json.loads(text)
        except (ValueError, RecursionError):
            raise LogBlockError(f"the SCHEMA header of the {self.block_type.name} block at offset {self.offset} "
                                f"is not JSON: {text[:60]!r}") from None
        if not isinstance(schema, dict):
            raise LogBlockError(f"the SCHEMA header of the {self.block_type.name} block at offset {self.offset} "
                                "is not an Avro record schema")
        return schema

    def records(self, columns: Iterable[str] | None = None) -> pa.Table:
        """The data records of an AVRO_DATA, CDC_DATA or PARQUET_DATA block as an Arrow table.

        Avro blocks are decoded with the SCHEMA header as writer schema; the Arrow schema is
        :func:`lakesdk.format.schema.avro_to_arrow` of it.  A Parquet block is the embedded
        Parquet file, read as it is.  ``columns``: a Parquet block reads only those of them
        it has (an Avro block decodes whole records, then drops the others).
        """
        if self.block_type == BlockType.PARQUET_DATA:
            try:
                return decode_parquet_records(self.content, self.avro_schema, columns)
            except (pa.ArrowException, OSError, ValueError) as exc:
                raise LogBlockError(f"the PARQUET_DATA block at offset {self.offset} does not hold a readable "
                                    f"Parquet file ({len(self.content)} bytes): {exc}") from None
        if self.block_type in (BlockType.AVRO_DATA, BlockType.CDC_DATA):
            schema = self.avro_schema
            if schema is None:
                raise LogBlockError(f"the {self.block_type.name} block at offset {self.offset} has no SCHEMA "
                                    "header, so its records cannot be decoded")
            try:
                out = decode_avro_records(self.content, schema)
                if columns is not None:
                    wanted = set(columns)
                    out = out.select([c for c in out.column_names if c in wanted])
                return out
            except LakeError:
                raise
            except (pa.ArrowException, ValueError, TypeError, KeyError, IndexError, AttributeError,
                    RecursionError) as exc:
                raise LogBlockError(f"the {self.block_type.name} block at offset {self.offset} cannot be decoded "
                                    f"with its SCHEMA header: {type(exc).__name__}: {exc}") from None
        raise LogBlockError(f"a {self.block_type.name} block holds no data records "
                            "(only AVRO_DATA, CDC_DATA and PARQUET_DATA blocks do)")

    def hfile(self, path: str | None = None) -> HFileReader:
        """The HFile an HFILE_DATA block holds (the metadata table's log blocks): its entries
        are (record key as UTF-8 bytes, the value in Avro binary written with the schema of
        the SCHEMA header, :attr:`avro_schema`).  ``path``: the log file, named by errors.
        A damaged HFile raises :class:`~lakesdk.CorruptFileError`."""
        if self.block_type != BlockType.HFILE_DATA:
            raise LogBlockError(f"a {self.block_type.name} block holds no HFile (only HFILE_DATA blocks do)")
        where = f"the HFILE_DATA block at offset {self.offset}"
        return HFileReader(self.content, name=f"{path}: {where}" if path else where, path=path)

    def delete_records(self) -> pa.Table:
        """The keys of a DELETE block.

        Columns ``_hoodie_record_key`` (string), ``_hoodie_partition_path`` (string) and
        ``ordering_value``, typed by the wrapper found: IntWrapper -> int32, LongWrapper ->
        int64, FloatWrapper -> float32, DoubleWrapper -> float64, StringWrapper -> string,
        BytesWrapper -> binary, BooleanWrapper -> bool, DateWrapper -> date32, DecimalWrapper
        -> decimal128(30, 15), TimeMicrosWrapper -> time64[us], TimestampMicrosWrapper ->
        timestamp[us, UTC], ArrayWrapper -> list.  Int and long mix to int64, any number mix
        with a float to float64; the null branch gives a null cell (all null: int64).  An
        int32 ``0`` is Hudi's "no ordering value, natural order" marker.
        """
        if self.block_type != BlockType.DELETE:
            raise LogBlockError(f"a {self.block_type.name} block holds no delete records")
        return decode_delete_content(self.content)


# -- reading ------------------------------------------------------------------------------------
def hfile_block_items(block: LogBlock, path: str | None = None) -> Iterator[tuple[bytes, bytes]]:
    """The ``(key, value)`` entries of an HFILE_DATA block in key order (:meth:`LogBlock.hfile`)."""
    return block.hfile(path).items()


def read_log_file(data: bytes) -> list[LogBlock]:
    """Every well-formed block of a log file, in file order; corrupt stretches are skipped."""
    return scan_log_file(data)[0]


def scan_log_file(data: bytes) -> tuple[list[LogBlock], int]:
    """Every well-formed block, and how many corrupt stretches were skipped.

    On a corrupt block the reader looks for the next magic after the bad block's start and
    resumes there (a magic found inside the bad bytes that does not start a good block
    belongs to the same stretch and is not counted again).
    """
    if not isinstance(data, bytes):
        data = bytes(data)
    blocks: list[LogBlock] = []
    corrupt = 0
    in_corrupt_stretch = False
    pos = 0
    end = len(data)
    while pos < end:
        try:
            block = _parse_block(data, pos)
        except _CorruptLogBlock:
            if not in_corrupt_stretch:
                corrupt += 1
                in_corrupt_stretch = True
            nxt = data.find(MAGIC, pos + 1)
            if nxt < 0:
                break
            pos = nxt
            continue
        in_corrupt_stretch = False
        blocks.append(block)
        pos += block.size
    return blocks, corrupt


def checked_block_type(format_version: int, type_ordinal: int) -> BlockType:
    """The block type a block's header says; :class:`_CorruptLogBlock` for another format
    version or a type Hudi does not have."""
    if format_version != LOG_FORMAT_VERSION:
        raise _CorruptLogBlock
    try:
        return BlockType(type_ordinal)
    except ValueError:
        raise _CorruptLogBlock from None


def _parse_block(data: bytes, pos: int) -> LogBlock:
    end_of_data = len(data)
    if data[pos:pos + 6] != MAGIC or pos + 14 > end_of_data:
        raise _CorruptLogBlock
    (block_length,) = I64.unpack_from(data, pos + 6)
    end = pos + 14 + block_length  # one past the trailing total length
    if block_length < _MIN_BLOCK - 14 or end > end_of_data:
        raise _CorruptLogBlock
    (total_length,) = I64.unpack_from(data, end - 8)
    if total_length != end - 8 - pos:
        raise _CorruptLogBlock
    limit = end - 8  # everything below must fit before the trailing length
    cur = pos + 14
    format_version, type_ordinal = I32X2.unpack_from(data, cur)
    cur += 8
    block_type = checked_block_type(format_version, type_ordinal)
    header, cur = read_metadata(data, cur, limit)
    if cur + 8 > limit:
        raise _CorruptLogBlock
    (content_length,) = I64.unpack_from(data, cur)
    cur += 8
    if content_length < 0 or cur + content_length > limit:
        raise _CorruptLogBlock
    content = data[cur:cur + content_length]
    cur += content_length
    footer, cur = read_metadata(data, cur, limit)
    if cur != limit:
        raise _CorruptLogBlock
    return LogBlock(block_type, header, footer, content, pos, end - pos, format_version)
