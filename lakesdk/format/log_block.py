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
        PARQUET_DATA        := a complete Parquet file
        DELETE              := int32 version (3), int32 n,
                               n bytes: Avro binary of HoodieDeleteRecordList
        COMMAND             := empty; header COMMAND_BLOCK_TYPE "0" = rollback of the
                               blocks written by header TARGET_INSTANT_TIME
        HFILE_DATA          := an HFile (metadata table only; not decoded here)
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

import copy
import decimal
import io
import json
import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import IntEnum
from functools import lru_cache
from importlib import resources
from typing import Any

import fastavro
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from lakesdk.exceptions import LakeError, LogBlockError, SchemaError, _CorruptLogBlock
from lakesdk.format.avro_file import check_writer_schema
from lakesdk.format.schema import avro_to_arrow

__all__ = [
    "MAGIC",
    "LOG_FORMAT_VERSION",
    "CONTENT_VERSION",
    "BlockType",
    "HeaderKey",
    "LogBlock",
    "LogBlockError",
    "read_log_file",
    "scan_log_file",
    "encode_block",
    "encode_avro_data_block",
    "encode_delete_block",
    "encode_rollback_block",
    "DELETE_KEY_COLUMNS",
]

MAGIC = b"#HUDI#"
LOG_FORMAT_VERSION = 1
CONTENT_VERSION = 3
ROLLBACK_COMMAND = "0"
DELETE_KEY_COLUMNS = ("_hoodie_record_key", "_hoodie_partition_path", "ordering_value")

_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_I32X2 = struct.Struct(">ii")
# magic + block length + format version + type + header count + content length + footer count + total length
_MIN_BLOCK = 6 + 8 + 4 + 4 + 4 + 8 + 4 + 8


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

    def records(self) -> pa.Table:
        """The data records of an AVRO_DATA, CDC_DATA or PARQUET_DATA block as an Arrow table.

        Avro blocks are decoded with the SCHEMA header as writer schema; the Arrow schema is
        :func:`lakesdk.format.schema.avro_to_arrow` of it.  A Parquet block is the embedded
        Parquet file, read as it is.
        """
        if self.block_type == BlockType.PARQUET_DATA:
            try:
                table = pq.read_table(pa.BufferReader(self.content))
                table.validate(full=True)  # Parquet readers do not check that strings are UTF-8
                return table
            except (pa.ArrowException, OSError, ValueError) as exc:
                raise LogBlockError(f"the PARQUET_DATA block at offset {self.offset} does not hold a readable "
                                    f"Parquet file ({len(self.content)} bytes): {exc}") from None
        if self.block_type in (BlockType.AVRO_DATA, BlockType.CDC_DATA):
            schema = self.avro_schema
            if schema is None:
                raise LogBlockError(f"the {self.block_type.name} block at offset {self.offset} has no SCHEMA "
                                    "header, so its records cannot be decoded")
            try:
                return _decode_avro_records(self.content, schema)
            except LakeError:
                raise
            except (pa.ArrowException, ValueError, TypeError, KeyError, IndexError, AttributeError,
                    RecursionError) as exc:
                raise LogBlockError(f"the {self.block_type.name} block at offset {self.offset} cannot be decoded "
                                    f"with its SCHEMA header: {type(exc).__name__}: {exc}") from None
        raise LogBlockError(f"a {self.block_type.name} block holds no data records "
                            "(only AVRO_DATA, CDC_DATA and PARQUET_DATA blocks do)")

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
        return _decode_delete_content(self.content)


# -- reading ------------------------------------------------------------------------------------
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


def _parse_block(data: bytes, pos: int) -> LogBlock:
    end_of_data = len(data)
    if data[pos:pos + 6] != MAGIC or pos + 14 > end_of_data:
        raise _CorruptLogBlock
    (block_length,) = _I64.unpack_from(data, pos + 6)
    end = pos + 14 + block_length  # one past the trailing total length
    if block_length < _MIN_BLOCK - 14 or end > end_of_data:
        raise _CorruptLogBlock
    (total_length,) = _I64.unpack_from(data, end - 8)
    if total_length != end - 8 - pos:
        raise _CorruptLogBlock
    limit = end - 8  # everything below must fit before the trailing length
    cur = pos + 14
    format_version, type_ordinal = _I32X2.unpack_from(data, cur)
    cur += 8
    if format_version != LOG_FORMAT_VERSION:
        raise _CorruptLogBlock
    try:
        block_type = BlockType(type_ordinal)
    except ValueError:
        raise _CorruptLogBlock from None
    header, cur = _read_metadata(data, cur, limit)
    if cur + 8 > limit:
        raise _CorruptLogBlock
    (content_length,) = _I64.unpack_from(data, cur)
    cur += 8
    if content_length < 0 or cur + content_length > limit:
        raise _CorruptLogBlock
    content = data[cur:cur + content_length]
    cur += content_length
    footer, cur = _read_metadata(data, cur, limit)
    if cur != limit:
        raise _CorruptLogBlock
    return LogBlock(block_type, header, footer, content, pos, end - pos, format_version)


def _read_metadata(data: bytes, cur: int, limit: int) -> tuple[dict[HeaderKey, str], int]:
    if cur + 4 > limit:
        raise _CorruptLogBlock
    (count,) = _I32.unpack_from(data, cur)
    cur += 4
    if count < 0:
        raise _CorruptLogBlock
    out: dict[HeaderKey, str] = {}
    for _ in range(count):
        if cur + 8 > limit:
            raise _CorruptLogBlock
        ordinal, n = _I32X2.unpack_from(data, cur)
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
    parts = [_I32.pack(len(items))]
    for key, value in items:
        raw = str(value).encode("utf-8")
        parts.append(_I32X2.pack(int(key), len(raw)))
        parts.append(raw)
    return b"".join(parts)


def encode_block(block_type: BlockType, header: Mapping[HeaderKey, str], content: bytes,
                 footer: Mapping[HeaderKey, str] | None = None) -> bytes:
    """Frame ``content`` as one complete block (magic through trailing length).

    Header and footer entries are written in their mapping's order.  Appending the result to a
    log file appends the block.
    """
    body = b"".join([
        _I32X2.pack(LOG_FORMAT_VERSION, int(block_type)),
        _metadata_bytes(header),
        _I64.pack(len(content)),
        bytes(content),
        _metadata_bytes(footer),
    ])
    block_length = len(body) + 8  # + trailing total length
    return b"".join([MAGIC, _I64.pack(block_length), body, _I64.pack(6 + 8 + len(body))])


def encode_rollback_block(target_instant: str, instant: str) -> bytes:
    """A COMMAND block that rolls back every block written by ``target_instant``.

    ``instant`` is the rollback's own instant.  Header order is INSTANT_TIME,
    COMMAND_BLOCK_TYPE, TARGET_INSTANT_TIME (as in Hudi-written rollback blocks observed).
    """
    header = {HeaderKey.INSTANT_TIME: instant,
              HeaderKey.COMMAND_BLOCK_TYPE: ROLLBACK_COMMAND,
              HeaderKey.TARGET_INSTANT_TIME: target_instant}
    return encode_block(BlockType.COMMAND, header, b"")


# -- Avro data blocks ---------------------------------------------------------------------------
_TEMPORAL_LOGICAL = {"timestamp-millis", "timestamp-micros", "local-timestamp-millis",
                     "local-timestamp-micros", "date", "time-millis", "time-micros"}


def _non_null_branch(avro_type: Any) -> Any:
    if isinstance(avro_type, list):
        rest = [t for t in avro_type if t != "null"]
        return rest[0] if len(rest) == 1 else None
    return avro_type


def _strip_temporal(avro_type: Any) -> Any:
    """The same Avro schema with date/time/timestamp logical types removed.

    Logical types do not change the binary encoding, so decoding with the stripped schema
    yields the raw ints, which Arrow converts exactly and quickly (no datetime objects).
    """
    if isinstance(avro_type, list):
        return [_strip_temporal(t) for t in avro_type]
    if isinstance(avro_type, dict):
        t = dict(avro_type)
        if t.get("logicalType") in _TEMPORAL_LOGICAL:
            t.pop("logicalType")
        kind = t.get("type")
        if kind == "record":
            t["fields"] = [{**f, "type": _strip_temporal(f["type"])} for f in t.get("fields", [])]
        elif kind == "array":
            t["items"] = _strip_temporal(t["items"])
        elif kind == "map":
            t["values"] = _strip_temporal(t["values"])
        elif isinstance(kind, (dict, list)):
            t["type"] = _strip_temporal(kind)
        return t
    return avro_type


def _physical(t: pa.DataType) -> pa.DataType:
    """The integer Arrow type that holds the raw Avro value of a temporal type."""
    if pa.types.is_timestamp(t) or pa.types.is_time64(t):
        return pa.int64()
    if pa.types.is_date32(t) or pa.types.is_time32(t):
        return pa.int32()
    if pa.types.is_struct(t):
        return pa.struct([f.with_type(_physical(f.type)) for f in t])
    if pa.types.is_list(t):
        return pa.list_(t.value_field.with_type(_physical(t.value_type)))
    if pa.types.is_map(t):
        return pa.map_(t.key_field.with_type(_physical(t.key_type)),
                       t.item_field.with_type(_physical(t.item_type)))
    return t


def _decode_avro_records(content: bytes, avro_schema: dict) -> pa.Table:
    target = avro_to_arrow(avro_schema)
    physical = pa.schema([f.with_type(_physical(f.type)) for f in target])
    if len(content) < 8:
        raise LogBlockError(f"Avro data block content is {len(content)} bytes, too short for its version and count")
    version, count = _I32X2.unpack_from(content, 0)
    if version != CONTENT_VERSION:
        raise LogBlockError(f"Avro data block content version {version} is not supported (expected {CONTENT_VERSION})")
    if count < 0 or count > (len(content) - 8) // 4:
        raise LogBlockError(f"Avro data block says it holds {count} records, but its {len(content)} bytes "
                            "cannot hold that many")
    check_writer_schema(avro_schema)
    try:
        parsed = fastavro.parse_schema(_strip_temporal(copy.deepcopy(avro_schema)))
    except Exception as exc:  # noqa: BLE001 - fastavro raises several kinds for bad schemas
        raise LogBlockError(f"the SCHEMA header is not a valid Avro schema: {type(exc).__name__}: {exc}") from None
    buf = io.BytesIO(content)
    reader = fastavro.schemaless_reader
    rows = []
    pos = 8
    for i in range(count):
        if pos + 4 > len(content):
            raise LogBlockError(f"Avro data block ends after {i} of {count} records")
        (n,) = _I32.unpack_from(content, pos)
        pos += 4
        buf.seek(pos)
        try:
            rows.append(reader(buf, parsed, None))
        except Exception as e:  # fastavro raises EOFError, ValueError, IndexError, ... on bad bytes
            raise LogBlockError(f"record {i} of the Avro data block cannot be decoded with its SCHEMA "
                                f"header: {e!r}") from e
        pos += n
        if buf.tell() != pos:
            raise LogBlockError(f"record {i} of the Avro data block is {n} bytes long but decodes "
                                f"from {buf.tell() - pos + n} bytes: the writer schema does not match")
    if pos != len(content):
        raise LogBlockError(f"the Avro data block holds {len(content) - pos} bytes after its {count} records "
                            "(its record count is damaged)")
    table = pa.Table.from_pylist(rows, schema=physical)
    return table.cast(target) if physical != target else table


def _without_logical_type(avro_type: Any) -> Any:
    """``avro_type`` (a field type, maybe ``[null, T]``) with T's logical type removed."""
    if isinstance(avro_type, list):
        return [_without_logical_type(t) if isinstance(t, dict) else t for t in avro_type]
    return {k: v for k, v in avro_type.items() if k != "logicalType"}


def _fixed_decimal_bytes(col: pa.ChunkedArray, precision: int, scale: int, size: int) -> pa.ChunkedArray:
    """Decimal column -> the big-endian two's complement ``size``-byte values Avro stores."""
    arr = pc.cast(col, pa.decimal128(precision, scale)).combine_chunks()  # raises if a value does not fit
    if len(arr) == 0:
        return pa.chunked_array([], pa.binary(size))
    raw = np.frombuffer(arr.buffers()[1], dtype=np.uint8)[arr.offset * 16:(arr.offset + len(arr)) * 16]
    big_endian = np.ascontiguousarray(raw.reshape(-1, 16)[:, size - 1::-1])  # low `size` bytes, reversed
    fixed = pa.FixedSizeBinaryArray.from_buffers(pa.binary(size), len(arr), [None, pa.py_buffer(big_endian.tobytes())])
    if arr.null_count:
        fixed = pc.if_else(arr.is_valid(), fixed, pa.scalar(None, pa.binary(size)))
    return pa.chunked_array([fixed])


def _prepare_column(col: pa.ChunkedArray, avro_type: Any) -> tuple[pa.ChunkedArray, Any]:
    """A top-level column in the raw form Avro stores, and the field type to write it with.

    Temporal columns become ints and fixed decimals become bytes, computed by Arrow; the
    field type then loses its logical type (the binary encoding is the same), so fastavro
    does no per-value conversion.  Anything else is left to fastavro.
    """
    branch = _non_null_branch(avro_type)
    logical = branch.get("logicalType") if isinstance(branch, dict) else None
    t = col.type
    if logical in ("timestamp-micros", "local-timestamp-micros", "timestamp-millis", "local-timestamp-millis") \
            and pa.types.is_timestamp(t):
        unit = "us" if logical.endswith("micros") else "ms"
        col = pc.cast(col, pa.timestamp(unit, t.tz), safe=False).cast(pa.int64())
    elif logical == "date" and pa.types.is_date(t):
        col = col.cast(pa.date32()).cast(pa.int32())
    elif logical == "time-micros" and pa.types.is_time(t):
        col = pc.cast(col, pa.time64("us"), safe=False).cast(pa.int64())
    elif logical == "time-millis" and pa.types.is_time(t):
        col = pc.cast(col, pa.time32("ms"), safe=False).cast(pa.int32())
    elif logical == "decimal" and branch.get("type") == "fixed" and pa.types.is_decimal(t) \
            and int(branch["size"]) <= 16 and int(branch["precision"]) <= 38:
        col = _fixed_decimal_bytes(col, int(branch["precision"]), int(branch.get("scale", 0)), int(branch["size"]))
    else:
        return col, avro_type
    return col, _without_logical_type(avro_type)


def encode_avro_data_block(records: pa.Table, avro_schema: dict, header: Mapping[HeaderKey, str]) -> bytes:
    """An AVRO_DATA block holding ``records``, written with ``avro_schema``.

    ``header`` must carry INSTANT_TIME; SCHEMA is set to the JSON of ``avro_schema`` when
    absent (and must describe the same schema when present).  Columns are matched to schema
    fields by name; extra columns are ignored, missing ones take the field default.
    Timestamps finer than the schema's unit are truncated.
    """
    header = _header_with_schema(header, avro_schema)
    write_schema = copy.deepcopy(avro_schema)
    columns: dict[str, pa.ChunkedArray] = {}
    for f in write_schema.get("fields", []):
        if f["name"] in records.column_names:
            columns[f["name"]], f["type"] = _prepare_column(records.column(f["name"]), f["type"])
    rows = (pa.table(columns).to_pylist(maps_as_pydicts="strict") if columns
            else [{} for _ in range(records.num_rows)])
    parsed = fastavro.parse_schema(write_schema)

    buf = io.BytesIO()
    write = fastavro.schemaless_writer
    ends = []
    for row in rows:
        write(buf, parsed, row)
        ends.append(buf.tell())
    data = buf.getvalue()
    parts = [_I32X2.pack(CONTENT_VERSION, len(ends))]
    start = 0
    for stop in ends:
        parts.append(_I32.pack(stop - start))
        parts.append(data[start:stop])
        start = stop
    return encode_block(BlockType.AVRO_DATA, header, b"".join(parts))


def _header_with_schema(header: Mapping[HeaderKey, str], avro_schema: dict) -> dict[HeaderKey, str]:
    out = dict(header)
    if not out.get(HeaderKey.INSTANT_TIME):
        raise LogBlockError("a data block header needs INSTANT_TIME (the deltacommit writing it)")
    given = out.get(HeaderKey.SCHEMA)
    if given is None:
        out[HeaderKey.SCHEMA] = json.dumps(avro_schema, separators=(",", ":"))
    elif json.loads(given) != avro_schema:
        raise LogBlockError("the SCHEMA header does not describe the Avro schema the records are written with")
    return out


# -- delete blocks ------------------------------------------------------------------------------
_NS = "org.apache.hudi.avro.model."
_DECIMAL_QUANTUM = decimal.Decimal(1).scaleb(-15)
_DECIMAL_CONTEXT = decimal.Context(prec=80)


@lru_cache(maxsize=1)
def _delete_schema() -> Any:
    """The parsed ``HoodieDeleteRecordList`` schema (shipped as an .avsc next to this module)."""
    text = resources.files("lakesdk.format").joinpath("schemas/HoodieDeleteRecordList.avsc").read_text()
    return fastavro.parse_schema(json.loads(text))


def _wrapper_for(t: pa.DataType) -> str:
    """Name of the orderingVal wrapper an Arrow type is written as."""
    if pa.types.is_dictionary(t):
        return _wrapper_for(t.value_type)
    if pa.types.is_boolean(t):
        return "BooleanWrapper"
    if pa.types.is_integer(t):
        small = t.bit_width < 32 or (t.bit_width == 32 and pa.types.is_signed_integer(t))
        return "IntWrapper" if small else "LongWrapper"
    if pa.types.is_float16(t) or pa.types.is_float32(t):
        return "FloatWrapper"
    if pa.types.is_float64(t):
        return "DoubleWrapper"
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return "StringWrapper"
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t):
        return "BytesWrapper"
    if pa.types.is_date(t):
        return "DateWrapper"
    if pa.types.is_decimal(t):
        return "DecimalWrapper"
    if pa.types.is_time(t):
        return "TimeMicrosWrapper"
    if pa.types.is_timestamp(t):
        return "TimestampMicrosWrapper"
    raise SchemaError(f"an ordering value of Arrow type {t} cannot be written into a delete block; "
                      "cast it to a number, string, date, decimal or timestamp first")


def _ordering_values(col: pa.ChunkedArray) -> Iterable[Any]:
    """(wrapper name, value) per row, ``None`` for a null cell."""
    t = col.type
    if pa.types.is_dictionary(t):
        col = col.cast(t.value_type)
        t = t.value_type
    name = _NS + _wrapper_for(t)
    if pa.types.is_date(t):
        col = col.cast(pa.date32()).cast(pa.int32())
    elif pa.types.is_time(t):
        col = pc.cast(col, pa.time64("us"), safe=False).cast(pa.int64())
    elif pa.types.is_timestamp(t):
        col = pc.cast(col, pa.timestamp("us", t.tz), safe=False).cast(pa.int64())
    elif pa.types.is_float16(t):
        col = col.cast(pa.float32())
    values = col.to_pylist()
    if pa.types.is_decimal(t):
        values = [None if v is None else _decimal_30_15(v) for v in values]
    return [None if v is None else (name, {"value": v}) for v in values]


def _decimal_30_15(v: decimal.Decimal) -> decimal.Decimal:
    """``v`` at scale 15 (rounded half up), checked to fit DecimalWrapper's precision 30."""
    q = v.quantize(_DECIMAL_QUANTUM, rounding=decimal.ROUND_HALF_UP, context=_DECIMAL_CONTEXT)
    if len(q.as_tuple().digits) > 30:
        raise SchemaError(f"ordering value {v} does not fit decimal(30, 15), the type Hudi stores "
                          "decimal ordering values of deletes in")
    return q


def encode_delete_block(keys: pa.Table, header: Mapping[HeaderKey, str]) -> bytes:
    """A DELETE block for ``keys``.

    ``keys`` has ``_hoodie_record_key`` and ``_hoodie_partition_path`` (strings) and optionally
    ``ordering_value``; its Arrow type picks the wrapper: int8/16/32 -> IntWrapper, int64 ->
    LongWrapper, float32 -> FloatWrapper, float64 -> DoubleWrapper, string -> StringWrapper,
    binary -> BytesWrapper, bool, date, decimal (rescaled to 15), time, timestamp (micros).
    Null cells take the null branch.  Without an ``ordering_value`` column, or when it is
    entirely null, every key gets ``IntWrapper(0)``: what Hudi writes for a delete without an
    ordering value (natural order: the delete wins), and safe for Hudi's Java readers.

    ``header`` must carry INSTANT_TIME (Hudi also puts the table's SCHEMA in it).
    """
    if not dict(header).get(HeaderKey.INSTANT_TIME):
        raise LogBlockError("a delete block header needs INSTANT_TIME (the deltacommit writing it)")
    missing = [c for c in DELETE_KEY_COLUMNS[:2] if c not in keys.column_names]
    if missing:
        raise SchemaError(f"delete keys need the columns {list(DELETE_KEY_COLUMNS[:2])}; missing {missing}")
    record_keys = keys.column("_hoodie_record_key").cast(pa.string()).to_pylist()
    partitions = keys.column("_hoodie_partition_path").cast(pa.string()).to_pylist()
    ordering_col = keys.column("ordering_value") if "ordering_value" in keys.column_names else None
    if ordering_col is None or ordering_col.null_count == len(ordering_col):
        natural = (_NS + "IntWrapper", {"value": 0})
        ordering: Iterable[Any] = [natural] * keys.num_rows
    else:
        ordering = _ordering_values(ordering_col)
    records = [{"recordKey": k, "partitionPath": p, "orderingVal": o}
               for k, p, o in zip(record_keys, partitions, ordering)]
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, _delete_schema(), {"deleteRecordList": records})
    payload = buf.getvalue()
    content = _I32X2.pack(CONTENT_VERSION, len(payload)) + payload
    return encode_block(BlockType.DELETE, header, content)


_ORDERING_TYPES: dict[str, pa.DataType] = {
    "BooleanWrapper": pa.bool_(),
    "IntWrapper": pa.int32(),
    "LongWrapper": pa.int64(),
    "FloatWrapper": pa.float32(),
    "DoubleWrapper": pa.float64(),
    "BytesWrapper": pa.binary(),
    "StringWrapper": pa.string(),
    "DateWrapper": pa.date32(),
    "LocalDateWrapper": pa.date32(),
    "DecimalWrapper": pa.decimal128(30, 15),
    "TimeMicrosWrapper": pa.time64("us"),
    "TimestampMicrosWrapper": pa.timestamp("us", tz="UTC"),
}
_NUMERIC_RANK = {"IntWrapper": 0, "LongWrapper": 1, "FloatWrapper": 2, "DoubleWrapper": 3}


def _unwrap(value: Any) -> tuple[str | None, Any]:
    """(short wrapper name, plain value) of a decoded orderingVal union value."""
    if value is None:
        return None, None
    name, record = value
    short = name.rsplit(".", 1)[-1]
    if short == "ArrayWrapper":
        items = record.get("wrappedValues")
        return short, None if items is None else [_unwrap(v)[1] for v in items]
    return short, record["value"]


def _ordering_type(names: set[str]) -> pa.DataType | None:
    if not names:
        return pa.int64()
    if len(names) == 1:
        only = next(iter(names))
        return None if only == "ArrayWrapper" else _ORDERING_TYPES[only]
    if names <= _NUMERIC_RANK.keys():
        return pa.int64() if names <= {"IntWrapper", "LongWrapper"} else pa.float64()
    raise LogBlockError(f"the delete block mixes ordering value types {sorted(names)}, "
                        "which cannot share one column")


def _decode_delete_content(content: bytes) -> pa.Table:
    if len(content) < 8:
        raise LogBlockError(f"delete block content is {len(content)} bytes, too short for its version and length")
    version, n = _I32X2.unpack_from(content, 0)
    if version != CONTENT_VERSION:
        raise LogBlockError(f"delete block content version {version} is not supported: before version "
                            f"{CONTENT_VERSION} the keys were Java-serialized objects")
    if n < 0 or 8 + n != len(content):
        raise LogBlockError(f"delete block says {n} bytes of keys follow, but {len(content) - 8} do")
    buf = io.BytesIO(content[8:8 + n])
    try:
        decoded: Any = fastavro.schemaless_reader(buf, _delete_schema(), None, return_record_name=True)
    except Exception as exc:  # noqa: BLE001 - fastavro raises EOFError, ValueError, IndexError, ... on bad bytes
        raise LogBlockError(f"the delete block's keys cannot be decoded: {type(exc).__name__}: {exc}") from None
    if buf.tell() != n:
        raise LogBlockError(f"the delete block's keys take {buf.tell()} of its {n} bytes (damaged lengths)")
    entries = decoded["deleteRecordList"]
    unwrapped = [_unwrap(e["orderingVal"]) for e in entries]
    ordering_type = _ordering_type({name for name, _ in unwrapped if name is not None})
    try:
        ordering = pa.array([v for _, v in unwrapped], type=ordering_type)
    except (pa.ArrowException, ValueError, TypeError, OverflowError) as exc:
        raise LogBlockError(f"the delete block's ordering values cannot be read: {exc}") from None
    return pa.table({
        "_hoodie_record_key": pa.array([e["recordKey"] for e in entries], type=pa.string()),
        "_hoodie_partition_path": pa.array([e["partitionPath"] for e in entries], type=pa.string()),
        "ordering_value": ordering,
    })
