"""Schemas: Arrow <-> Avro (the table schema Hudi stores in commit metadata).

Hudi keeps the table's data schema (without meta fields) as Avro JSON in
``extraMetadata["schema"]`` of each commit and in ``hoodie.table.create.schema``.  Every
field is nullable (``["null", T]`` with default null).  Records are named
``<table>_record`` in namespace ``hoodie.<table>``.

>>> import pyarrow as pa
>>> s = pa.schema([("id", pa.int64()), ("ts", pa.timestamp("us", tz="UTC"))])
>>> avro = arrow_to_avro(s, "trips")
>>> avro["name"], avro["fields"][1]["type"][1]
('trips_record', {'type': 'long', 'logicalType': 'timestamp-micros'})
>>> avro_to_arrow(avro) == pa.schema([("id", pa.int64()), ("ts", pa.timestamp("us", tz="UTC"))])
True
"""

from __future__ import annotations

import math
from typing import Any

import pyarrow as pa

from lakesdk.exceptions import IncompatibleSchemaError, SchemaError

__all__ = [
    "META_FIELDS",
    "META_SCHEMA",
    "arrow_to_avro",
    "avro_to_arrow",
    "with_meta_fields",
    "data_schema",
    "unify_schemas",
    "can_widen",
]

META_FIELDS = ("_hoodie_commit_time", "_hoodie_commit_seqno", "_hoodie_record_key",
               "_hoodie_partition_path", "_hoodie_file_name")
META_SCHEMA = pa.schema([(f, pa.string()) for f in META_FIELDS])


def _decimal_size(precision: int) -> int:
    # smallest byte count whose two's complement range holds 10**precision - 1
    return math.ceil((math.log2(10 ** precision) + 1) / 8)


def _to_avro_type(t: pa.DataType, name: str, namespace: str) -> Any:
    if pa.types.is_boolean(t):
        return "boolean"
    if pa.types.is_int8(t) or pa.types.is_int16(t) or pa.types.is_int32(t) or pa.types.is_uint8(t) or pa.types.is_uint16(t):
        return "int"
    if pa.types.is_integer(t):
        return "long"
    if pa.types.is_float16(t) or pa.types.is_float32(t):
        return "float"
    if pa.types.is_float64(t):
        return "double"
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return "string"
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t):
        return "bytes"
    if pa.types.is_date(t):
        return {"type": "int", "logicalType": "date"}
    if pa.types.is_timestamp(t):
        unit = "millis" if t.unit in ("s", "ms") else "micros"
        prefix = "timestamp" if t.tz is not None else "local-timestamp"
        return {"type": "long", "logicalType": f"{prefix}-{unit}"}
    if pa.types.is_decimal(t):
        return {"type": "fixed", "name": "fixed", "namespace": f"{namespace}.{name}",
                "size": _decimal_size(t.precision), "logicalType": "decimal",
                "precision": t.precision, "scale": t.scale}
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        return {"type": "array", "items": _nullable(_to_avro_type(t.value_type, name, namespace))}
    if pa.types.is_map(t):
        return {"type": "map", "values": _nullable(_to_avro_type(t.item_type, name, namespace))}
    if pa.types.is_struct(t):
        return {"type": "record", "name": name, "namespace": namespace,
                "fields": [_field(t.field(i), f"{namespace}.{name}") for i in range(t.num_fields)]}
    if pa.types.is_dictionary(t):
        return _to_avro_type(t.value_type, name, namespace)
    if pa.types.is_null(t):
        return "string"
    raise IncompatibleSchemaError(f"column {name!r}: Arrow type {t} has no Hudi/Avro equivalent; cast it first")


def _nullable(avro_type: Any) -> list:
    return ["null", avro_type]


def _field(f: pa.Field, namespace: str) -> dict:
    return {"name": f.name, "type": _nullable(_to_avro_type(f.type, f.name, namespace)), "default": None}


def arrow_to_avro(schema: pa.Schema, table_name: str, *, meta: bool = False) -> dict:
    """Avro record schema for the table's data columns; with ``meta=True`` the five meta
    fields come first (the writer schema of log data blocks)."""
    ns = f"hoodie.{table_name}"
    rec = f"{table_name}_record"
    fields = [_field(f, f"{ns}.{rec}") for f in schema if f.name not in META_FIELDS]
    if meta:
        fields = [{"name": m, "type": ["null", "string"], "default": None} for m in META_FIELDS] + fields
    return {"type": "record", "name": rec, "namespace": ns, "fields": fields}


def _from_avro_type(t: Any) -> tuple[pa.DataType, bool]:
    """Avro type -> (Arrow type, nullable)."""
    if isinstance(t, list):
        non_null = [x for x in t if x != "null"]
        nullable = len(non_null) < len(t)
        if len(non_null) == 1:
            return _from_avro_type(non_null[0])[0], nullable
        if not non_null:
            return pa.null(), True
        raise SchemaError(f"Avro union {t} is not supported (only [null, T] unions)")
    if isinstance(t, str):
        prim = {"boolean": pa.bool_(), "int": pa.int32(), "long": pa.int64(), "float": pa.float32(),
                "double": pa.float64(), "string": pa.string(), "bytes": pa.binary(), "null": pa.null()}
        if t in prim:
            return prim[t], False
        raise SchemaError(f"Avro named type reference {t!r} is not supported")
    lt = t.get("logicalType")
    base = t.get("type")
    if lt == "date":
        return pa.date32(), False
    if lt in ("timestamp-micros", "timestamp-millis", "local-timestamp-micros", "local-timestamp-millis"):
        unit = "us" if lt.endswith("micros") else "ms"
        return pa.timestamp(unit, tz=None if lt.startswith("local") else "UTC"), False
    if lt == "decimal":
        return pa.decimal128(int(t["precision"]), int(t.get("scale", 0))), False
    if lt in ("time-micros", "time-millis"):
        return (pa.time64("us") if lt == "time-micros" else pa.time32("ms")), False
    if base == "record":
        return pa.struct([_arrow_field(f) for f in t["fields"]]), False
    if base == "array":
        it, n = _from_avro_type(t["items"])
        return pa.list_(pa.field("element", it, nullable=n)), False
    if base == "map":
        vt, n = _from_avro_type(t["values"])
        return pa.map_(pa.string(), pa.field("value", vt, nullable=n)), False
    if base == "enum":
        return pa.string(), False
    if base == "fixed":
        size = int(t["size"])
        if size < 0:
            raise SchemaError(f"Avro fixed type {t} has a negative size")
        return pa.binary(size), False
    if isinstance(base, (str, list, dict)):
        return _from_avro_type(base)
    raise SchemaError(f"unsupported Avro type {t}")


def _arrow_field(f: dict) -> pa.Field:
    t, nullable = _from_avro_type(f["type"])
    return pa.field(f["name"], t, nullable=True if nullable else True)


def avro_to_arrow(avro: dict) -> pa.Schema:
    """Arrow schema of an Avro record schema (all fields nullable, as Hudi reads them).

    Schemas read from files (commit metadata, ``hoodie.table.create.schema``, log block
    headers) may be damaged: anything that is not an Avro record schema raises
    :class:`SchemaError`."""
    try:
        if not isinstance(avro, dict) or not isinstance(avro.get("fields", []), list):
            raise TypeError("not a JSON object with a list of fields")
        return pa.schema([_arrow_field(f) for f in avro.get("fields", [])])
    except SchemaError:
        raise
    except (KeyError, TypeError, ValueError, AttributeError, IndexError, OverflowError, RecursionError,
            pa.ArrowException) as exc:
        raise SchemaError(f"{str(avro)[:80]!r} is not a valid Avro record schema "
                          f"({type(exc).__name__}: {exc})") from None


def with_meta_fields(schema: pa.Schema) -> pa.Schema:
    """The five ``_hoodie_*`` string columns followed by the data columns."""
    return pa.schema(list(META_SCHEMA) + [f for f in schema if f.name not in META_FIELDS])


def data_schema(schema: pa.Schema) -> pa.Schema:
    """Drop meta fields."""
    return pa.schema([f for f in schema if f.name not in META_FIELDS and f.name != "_hoodie_operation"])


_INT_ORDER = [pa.int8(), pa.int16(), pa.int32(), pa.int64()]


def can_widen(src: pa.DataType, dst: pa.DataType) -> bool:
    """True if values of ``src`` can be written into a ``dst`` column without loss."""
    if src == dst:
        return True
    if pa.types.is_null(src):
        return True
    if pa.types.is_integer(src) and pa.types.is_integer(dst):
        if pa.types.is_signed_integer(src) and pa.types.is_signed_integer(dst):
            return src.bit_width <= dst.bit_width
        if pa.types.is_unsigned_integer(src):
            return src.bit_width < dst.bit_width or (pa.types.is_unsigned_integer(dst) and src.bit_width <= dst.bit_width)
        return False
    if pa.types.is_integer(src) and pa.types.is_floating(dst):
        return True  # Avro's promotion rules: int and long promote to float and double
    if pa.types.is_floating(src) and pa.types.is_floating(dst):
        return src.bit_width <= dst.bit_width
    strings = (pa.string(), pa.large_string(), pa.string_view())
    if src in strings and dst in strings:
        return True
    if pa.types.is_timestamp(src) and pa.types.is_timestamp(dst):
        return (src.tz is None) == (dst.tz is None)
    if pa.types.is_decimal(src) and pa.types.is_decimal(dst):
        return src.scale <= dst.scale and (src.precision - src.scale) <= (dst.precision - dst.scale)
    if pa.types.is_dictionary(src):
        return can_widen(src.value_type, dst)
    if pa.types.is_date(src) and pa.types.is_date(dst):
        return True
    if (pa.types.is_binary(src) or pa.types.is_large_binary(src)) and (pa.types.is_binary(dst) or pa.types.is_large_binary(dst)):
        return True
    if pa.types.is_struct(src) and pa.types.is_struct(dst):
        dst_fields = {dst.field(i).name: dst.field(i).type for i in range(dst.num_fields)}
        return all(src.field(i).name in dst_fields and can_widen(src.field(i).type, dst_fields[src.field(i).name])
                   for i in range(src.num_fields))
    if (pa.types.is_list(src) or pa.types.is_large_list(src)) and (pa.types.is_list(dst) or pa.types.is_large_list(dst)):
        return can_widen(src.value_type, dst.value_type)
    return False


def _widen(a: pa.DataType, b: pa.DataType) -> pa.DataType | None:
    if can_widen(a, b):
        return b
    if can_widen(b, a):
        return a
    return None


def unify_schemas(table: pa.Schema, incoming: pa.Schema, *, allow_new_columns: bool = True) -> pa.Schema:
    """The table schema after writing ``incoming`` into it.

    Existing columns keep their position; a column may widen (int -> long, float -> double,
    ...); new columns are appended (nullable).  Raises :class:`IncompatibleSchemaError` for
    a type that cannot be written into the table's column.
    """
    out = []
    inc = {f.name: f for f in incoming if f.name not in META_FIELDS}
    for f in table:
        if f.name in META_FIELDS:
            continue
        g = inc.pop(f.name, None)
        if g is None or g.type == f.type:
            out.append(f)
            continue
        if can_widen(g.type, f.type):
            out.append(f)
            continue
        w = _widen(f.type, g.type)
        if w is None:
            raise IncompatibleSchemaError(
                f"column {f.name!r}: the table stores {f.type}, the incoming data has {g.type}, "
                f"which cannot be written into it; cast the column to {f.type} before writing")
        out.append(pa.field(f.name, w, nullable=True))
    if inc and not allow_new_columns:
        raise SchemaError(f"new columns {sorted(inc)} are not in the table schema; "
                          "allow schema evolution or drop them")
    out.extend(pa.field(g.name, pa.string() if pa.types.is_null(g.type) else g.type, nullable=True) for g in inc.values())
    return pa.schema(out)
