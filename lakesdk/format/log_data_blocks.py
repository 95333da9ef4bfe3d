"""The content of Hudi log data blocks: AVRO_DATA records (Arrow <-> Avro binary) and DELETE
blocks (``HoodieDeleteRecordList``), encoded into framed blocks and decoded from a block's
content.  The format is described in :mod:`lakesdk.format.log_block`.
"""

from __future__ import annotations

import copy
import decimal
import io
import json
from collections.abc import Iterable, Mapping
from functools import lru_cache
from importlib import resources
from typing import Any

import fastavro
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from lakesdk.exceptions import LogBlockError, SchemaError
from lakesdk.format import avro_columnar
from lakesdk.format.avro_file import check_writer_schema
from lakesdk.format.log_framing import CONTENT_VERSION, I32, I32X2, BlockType, HeaderKey, encode_block
from lakesdk.format.schema import avro_to_arrow

__all__ = ["DELETE_KEY_COLUMNS", "DATA_BLOCK_FORMATS", "encode_avro_data_block", "encode_parquet_data_block",
           "encode_data_block", "encode_delete_block", "decode_avro_records", "decode_parquet_records",
           "decode_delete_content"]

#: the values of ``hoodie.logfile.data.block.format`` lakesdk writes
DATA_BLOCK_FORMATS = ("parquet", "avro")

DELETE_KEY_COLUMNS = ("_hoodie_record_key", "_hoodie_partition_path", "ordering_value")


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


def _record_spans(content: bytes, count: int) -> tuple[np.ndarray, np.ndarray] | None:
    """(start, length) of each record of an Avro data block's content, or None when the
    length prefixes do not tile the content exactly (the record-at-a-time decoder then tells
    what is wrong)."""
    starts = np.empty(count, dtype=np.int64)
    lengths = np.empty(count, dtype=np.int64)
    unpack = I32.unpack_from
    end = len(content)
    pos = 8
    for i in range(count):
        if pos + 4 > end:
            return None
        (n,) = unpack(content, pos)
        if n < 0:
            return None
        starts[i] = pos + 4
        lengths[i] = n
        pos += 4 + n
    return (starts, lengths) if pos == end else None


def decode_avro_records(content: bytes, avro_schema: dict) -> pa.Table:
    target = avro_to_arrow(avro_schema)
    physical = pa.schema([f.with_type(_physical(f.type)) for f in target])
    if len(content) < 8:
        raise LogBlockError(f"Avro data block content is {len(content)} bytes, too short for its version and count")
    version, count = I32X2.unpack_from(content, 0)
    if version != CONTENT_VERSION:
        raise LogBlockError(f"Avro data block content version {version} is not supported (expected {CONTENT_VERSION})")
    if count < 0 or count > (len(content) - 8) // 4:
        raise LogBlockError(f"Avro data block says it holds {count} records, but its {len(content)} bytes "
                            "cannot hold that many")
    check_writer_schema(avro_schema)
    stripped = _strip_temporal(copy.deepcopy(avro_schema))
    try:
        parsed = fastavro.parse_schema(copy.deepcopy(stripped))
    except Exception as exc:  # noqa: BLE001 - fastavro raises several kinds for bad schemas
        raise LogBlockError(f"the SCHEMA header is not a valid Avro schema: {type(exc).__name__}: {exc}") from None
    spans = _record_spans(content, count)
    if spans is not None:
        try:
            table = avro_columnar.decode_records(content, spans[0], spans[1],
                                                 avro_columnar.inline_named_types(stripped), physical)
            return table.cast(target) if physical != target else table
        except avro_columnar.Unsupported:
            pass   # a schema the columnar codec does not handle, or damaged bytes: record by record
    return _decode_record_by_record(content, count, parsed, physical, target)


def _decode_record_by_record(content: bytes, count: int, parsed: Any, physical: pa.Schema,
                             target: pa.Schema) -> pa.Table:
    buf = io.BytesIO(content)
    reader = fastavro.schemaless_reader
    rows = []
    pos = 8
    for i in range(count):
        if pos + 4 > len(content):
            raise LogBlockError(f"Avro data block ends after {i} of {count} records")
        (n,) = I32.unpack_from(content, pos)
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


def encode_avro_data_block(records: pa.Table, avro_schema: dict, header: Mapping[HeaderKey, str], *,
                           block_type: BlockType = BlockType.AVRO_DATA) -> bytes:
    """An AVRO_DATA block (or ``block_type``: a CDC_DATA block, Avro too) holding ``records``,
    written with ``avro_schema``.

    ``header`` must carry INSTANT_TIME; SCHEMA is set to the JSON of ``avro_schema`` when
    absent (and must describe the same schema when present).  Columns are matched to schema
    fields by name; extra columns are ignored, missing ones take the field default.
    Timestamps finer than the schema's unit are truncated.
    """
    header = _header_with_schema(header, avro_schema)
    # a reference by name to a record defined earlier (a CDC log's ``after``) encodes as that record
    write_schema = avro_columnar.inline_named_types(copy.deepcopy(avro_schema))
    columns: dict[str, pa.ChunkedArray] = {}
    for f in write_schema.get("fields", []):
        if f["name"] in records.column_names:
            columns[f["name"]], f["type"] = _prepare_column(records.column(f["name"]), f["type"])
    try:
        data = avro_columnar.encode_records({k: v.combine_chunks() for k, v in columns.items()},
                                            write_schema, records.num_rows)
        return encode_block(block_type, header, I32X2.pack(CONTENT_VERSION, records.num_rows) + data)
    except avro_columnar.Unsupported:
        pass   # a schema the columnar codec does not handle: record by record
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
    parts = [I32X2.pack(CONTENT_VERSION, len(ends))]
    start = 0
    for stop in ends:
        parts.append(I32.pack(stop - start))
        parts.append(data[start:stop])
        start = stop
    return encode_block(block_type, header, b"".join(parts))


# -- Parquet data blocks ------------------------------------------------------------------------
# Data columns of few distinct values stay dictionary-encoded (lakesdk.format.parquet_encoding);
# the per-record meta columns (sequence number, record key) only cost time as dictionaries.
_PARQUET_NO_DICT = ("_hoodie_commit_seqno", "_hoodie_record_key")


def encode_parquet_data_block(records: pa.Table, avro_schema: dict, header: Mapping[HeaderKey, str], *,
                              compression: str = "snappy") -> bytes:
    """A PARQUET_DATA block holding ``records``: the block content is one complete Parquet
    file (what Hudi's ``HoodieParquetDataBlock`` writes for ``hoodie.logfile.data.block.format
    = parquet``), and the header carries SCHEMA as for Avro blocks.

    The records are cast to the Arrow form of ``avro_schema`` first (columns matched by
    name, missing ones null, timestamps finer than the schema truncated), so the file holds
    exactly the types the SCHEMA header describes, as an Avro block would.  No records:
    empty content, as Hudi writes.
    """
    from lakesdk.format.parquet_encoding import dictionary_columns, statistics_columns
    from lakesdk.format.schema import avro_to_arrow

    header = _header_with_schema(header, avro_schema)
    if records.num_rows == 0:
        return encode_block(BlockType.PARQUET_DATA, header, b"")
    target = avro_to_arrow(avro_schema)
    cols = []
    for f in target:
        if f.name in records.column_names:
            c = records.column(f.name)
            cols.append(c if c.type == f.type else pc.cast(c, f.type, safe=not pa.types.is_timestamp(f.type)))
        else:
            cols.append(pa.nulls(records.num_rows, f.type))
    table = pa.Table.from_arrays(cols, schema=target)
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, compression=compression, write_statistics=statistics_columns(table),
                   use_dictionary=dictionary_columns(table, limit=64 * 1024, never=_PARQUET_NO_DICT),
                   dictionary_pagesize_limit=64 * 1024)
    return encode_block(BlockType.PARQUET_DATA, header, sink.getvalue().to_pybytes())


def decode_parquet_records(content: bytes, avro_schema: dict | None,
                           columns: Iterable[str] | None = None) -> pa.Table:
    """The records of a PARQUET_DATA block's content (the embedded Parquet file, read as it
    is); empty content is a block without records, typed by the SCHEMA header.
    ``columns``: only those of them the block has (None: all), in the file's order."""
    if not content:
        if avro_schema is None:
            return pa.table({})
        from lakesdk.format.schema import avro_to_arrow
        empty = avro_to_arrow(avro_schema).empty_table()
        return empty if columns is None else empty.select([c for c in empty.column_names if c in set(columns)])
    pf = pq.ParquetFile(pa.BufferReader(content))
    names = None
    if columns is not None:
        wanted = set(columns)
        names = [n for n in pf.schema_arrow.names if n in wanted]
    table = pf.read(columns=names, use_threads=False)
    table.validate(full=True)  # Parquet readers do not check that strings are UTF-8
    return table


def encode_data_block(records: pa.Table, avro_schema: dict, header: Mapping[HeaderKey, str], *,
                      block_format: str = "parquet", compression: str = "snappy") -> bytes:
    """A data block of ``block_format`` (one of :data:`DATA_BLOCK_FORMATS`)."""
    if block_format == "parquet":
        return encode_parquet_data_block(records, avro_schema, header, compression=compression)
    if block_format == "avro":
        return encode_avro_data_block(records, avro_schema, header)
    raise LogBlockError(f"log data block format {block_format!r} is not one of {list(DATA_BLOCK_FORMATS)}")


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
    """(wrapper name, value) per row, ``None`` for a null cell.  A struct column (several
    ordering fields) gives Hudi 1.1's ``ArrayWrapper`` of the fields' wrapped values; a row
    whose fields are all null gets ``IntWrapper(0)`` (no ordering value: natural order)."""
    t = col.type
    if pa.types.is_struct(t):
        arr = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
        children = [list(_ordering_values(pa.chunked_array([arr.field(i)]))) for i in range(t.num_fields)]
        natural = (_NS + "IntWrapper", {"value": 0})
        return [natural if all(v is None for v in row) else (_NS + "ArrayWrapper", {"wrappedValues": list(row)})
                for row in zip(*children)]
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
    content = I32X2.pack(CONTENT_VERSION, len(payload)) + payload
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
        return short, None if items is None else [_unwrap(v) for v in items]
    return short, record["value"]


def _array_ordering(unwrapped: list[tuple[str | None, Any]]) -> pa.Array:
    """Ordering values of a delete block holding ArrayWrappers (several ordering fields): a
    struct array with one child per position (``f0``, ``f1``, ...); a natural-order delete
    (``IntWrapper(0)``, no ordering value) is a row whose children are all null."""
    rows = [v if name == "ArrayWrapper" and v is not None else None for name, v in unwrapped]
    width = max((len(r) for r in rows if r is not None), default=0)
    children = []
    for i in range(width):
        cells = [r[i] if r is not None and i < len(r) else (None, None) for r in rows]
        typ = _ordering_type({n for n, _ in cells if n is not None})
        if typ is None:
            raise LogBlockError("the delete block nests ArrayWrappers in ArrayWrappers")
        children.append(pa.array([v for _, v in cells], type=typ))
    if not children:
        return pa.nulls(len(rows), pa.int32())
    return pa.StructArray.from_arrays(children, names=[f"f{i}" for i in range(width)])


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


def decode_delete_content(content: bytes) -> pa.Table:
    if len(content) < 8:
        raise LogBlockError(f"delete block content is {len(content)} bytes, too short for its version and length")
    version, n = I32X2.unpack_from(content, 0)
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
    names = {name for name, _ in unwrapped if name is not None}
    try:
        if "ArrayWrapper" in names:
            if names - {"ArrayWrapper", "IntWrapper"} or any(n == "IntWrapper" and v != 0 for n, v in unwrapped):
                raise LogBlockError(f"the delete block mixes ordering value types {sorted(names)}, "
                                    "which cannot share one column")
            ordering = _array_ordering(unwrapped)
        else:
            ordering = pa.array([v for _, v in unwrapped], type=_ordering_type(names))
    except (pa.ArrowException, ValueError, TypeError, OverflowError) as exc:
        raise LogBlockError(f"the delete block's ordering values cannot be read: {exc}") from None
    return pa.table({
        "_hoodie_record_key": pa.array([e["recordKey"] for e in entries], type=pa.string()),
        "_hoodie_partition_path": pa.array([e["partitionPath"] for e in entries], type=pa.string()),
        "ordering_value": ordering,
    })
