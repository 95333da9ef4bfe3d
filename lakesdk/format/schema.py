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
    "type_family",
    "META_FIELDS",
    "META_SCHEMA",
    "arrow_to_avro",
    "avro_to_arrow",
    "with_meta_fields",
    "data_schema",
    "unify_schemas",
    "can_widen",
    "normalize_type",
    "normalize_input",
    "nullable",
    "cast_to_schema",
    "invalid_avro_names",
    "missing_fields",
    "name_clashes",
]

META_FIELDS = ("_hoodie_commit_time", "_hoodie_commit_seqno", "_hoodie_record_key",
               "_hoodie_partition_path", "_hoodie_file_name")
META_SCHEMA = pa.schema([(f, pa.string()) for f in META_FIELDS])


def type_family(t: pa.DataType) -> str:
    """The family of an Arrow type for comparisons and casts: int, float, decimal, string,
    bool, date, timestamp, null or other (SQL's type families, as filters and merges use them)."""
    if pa.types.is_integer(t):
        return "int"
    if pa.types.is_floating(t):
        return "float"
    if pa.types.is_decimal(t):
        return "decimal"
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return "string"
    if pa.types.is_boolean(t):
        return "bool"
    if pa.types.is_date(t):
        return "date"
    if pa.types.is_timestamp(t):
        return "timestamp"
    if pa.types.is_null(t):
        return "null"
    return "other"


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


def _from_avro_type(t: Any, names: dict[str, pa.DataType] | None = None,
                    namespace: str = "") -> tuple[pa.DataType, bool]:
    """Avro type -> (Arrow type, nullable).  ``names``: the named types (records, enums,
    fixed) defined so far, by full and short name, for a later reference by name (a CDC
    log's ``after`` names the record its ``before`` defined)."""
    names = {} if names is None else names
    if isinstance(t, list):
        non_null = [x for x in t if x != "null"]
        nullable = len(non_null) < len(t)
        if len(non_null) == 1:
            return _from_avro_type(non_null[0], names, namespace)[0], nullable
        if not non_null:
            return pa.null(), True
        raise SchemaError(f"Avro union {t} is not supported (only [null, T] unions)")
    if isinstance(t, str):
        prim = {"boolean": pa.bool_(), "int": pa.int32(), "long": pa.int64(), "float": pa.float32(),
                "double": pa.float64(), "string": pa.string(), "bytes": pa.binary(), "null": pa.null()}
        if t in prim:
            return prim[t], False
        named = names.get(t) or names.get(f"{namespace}.{t}" if namespace and "." not in t else t)
        if named is not None:
            return named, False
        raise SchemaError(f"Avro named type reference {t!r} names no type defined before it")
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
    if base in ("record", "enum", "fixed"):
        name = str(t.get("name", ""))
        ns = str(t.get("namespace") or (name.rpartition(".")[0] if "." in name else namespace))
        full = name if "." in name else (f"{ns}.{name}" if ns else name)
        if base == "record":
            out: pa.DataType = pa.struct([_arrow_field(f, names, ns) for f in t["fields"]])
        elif base == "enum":
            out = pa.string()
        else:
            size = int(t["size"])
            if size < 0:
                raise SchemaError(f"Avro fixed type {t} has a negative size")
            out = pa.binary(size)
        if name:
            names[full] = names.setdefault(name, out) if name == full else out
        return out, False
    if base == "array":
        it, n = _from_avro_type(t["items"], names, namespace)
        return pa.list_(pa.field("element", it, nullable=n)), False
    if base == "map":
        vt, n = _from_avro_type(t["values"], names, namespace)
        return pa.map_(pa.string(), pa.field("value", vt, nullable=n)), False
    if isinstance(base, (str, list, dict)):
        return _from_avro_type(base, names, namespace)
    raise SchemaError(f"unsupported Avro type {t}")


def _arrow_field(f: dict, names: dict[str, pa.DataType] | None = None, namespace: str = "") -> pa.Field:
    t, nullable = _from_avro_type(f["type"], names, namespace)
    return pa.field(f["name"], t, nullable=True if nullable else True)


def avro_to_arrow(avro: dict) -> pa.Schema:
    """Arrow schema of an Avro record schema (all fields nullable, as Hudi reads them).

    Schemas read from files (commit metadata, ``hoodie.table.create.schema``, log block
    headers) may be damaged: anything that is not an Avro record schema raises
    :class:`SchemaError`."""
    try:
        if not isinstance(avro, dict) or not isinstance(avro.get("fields", []), list):
            raise TypeError("not a JSON object with a list of fields")
        names: dict[str, pa.DataType] = {}
        ns = str(avro.get("namespace") or "")
        return pa.schema([_arrow_field(f, names, ns) for f in avro.get("fields", [])])
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
        if pa.types.is_integer(f.type) and pa.types.is_floating(g.type):
            # pandas turns an int column holding None into float64: the table column stays an
            # integer column; the values are checked (integral, in range) before anything is written
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


# -- input normalization: what a base file and the Avro schema can both say ------------------

def normalize_type(t: pa.DataType, name: str = "") -> pa.DataType:
    """The type lakesdk writes for an incoming column of type ``t``.

    The table schema is Avro: base files must carry what it declares, so
    ``timestamp[ns]`` (pandas' default) becomes ``timestamp[us]`` (Avro ``timestamp-micros``,
    Hudi's ``TIMESTAMP_MICROS``), ``timestamp[s]`` becomes ``timestamp[ms]``, ``uint8``/``uint16``
    become ``int32``, ``uint32`` becomes ``int64``, ``float16`` becomes ``float32`` and
    ``date64`` becomes ``date32``; nested types are normalized field by field.  ``uint64`` has
    no lossless Avro type and is refused (by type, whatever its values).
    """
    if pa.types.is_timestamp(t):
        if t.unit == "ns":
            return pa.timestamp("us", tz=t.tz)
        if t.unit == "s":
            return pa.timestamp("ms", tz=t.tz)
        return t
    if pa.types.is_unsigned_integer(t):
        if t.bit_width <= 16:
            return pa.int32()
        if t.bit_width == 32:
            return pa.int64()
        raise IncompatibleSchemaError(
            f"column {name!r} is uint64, which no Hudi/Avro type holds (Avro's long is signed: values from "
            f"2**63 up would read back wrong); cast the column to int64 (values below 2**63) or to "
            f"decimal(20, 0) before writing")
    if pa.types.is_float16(t):
        return pa.float32()
    if pa.types.is_date64(t):
        return pa.date32()
    if pa.types.is_struct(t):
        fields = [t.field(i) for i in range(t.num_fields)]
        return pa.struct([f.with_type(normalize_type(f.type, f"{name}.{f.name}")) for f in fields])
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        v = t.value_field
        nv = v.with_type(normalize_type(v.type, f"{name}[]"))
        if nv.type == v.type:
            return t
        if pa.types.is_large_list(t):
            return pa.large_list(nv)
        if pa.types.is_fixed_size_list(t):
            return pa.list_(nv, t.list_size)
        return pa.list_(nv)
    if pa.types.is_map(t):
        it = t.item_field
        ni = it.with_type(normalize_type(it.type, f"{name}{{}}"))
        return t if ni.type == it.type else pa.map_(t.key_field.type, ni)
    if pa.types.is_dictionary(t):
        vt = normalize_type(t.value_type, name)
        return t if vt == t.value_type else vt
    return t


def concrete_type(t: pa.DataType) -> pa.DataType:
    """``t`` with every ``null`` type (a column or a nested field that held only nulls, as
    pandas and Arrow infer it) made ``string``: a table schema never stores Avro's bare ``null``
    type, which could hold no later value."""
    if pa.types.is_null(t):
        return pa.string()
    if pa.types.is_struct(t):
        return pa.struct([t.field(i).with_type(concrete_type(t.field(i).type)) for i in range(t.num_fields)])
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        v = t.value_field.with_type(concrete_type(t.value_type))
        return pa.large_list(v) if pa.types.is_large_list(t) else pa.list_(v)
    if pa.types.is_fixed_size_list(t):
        return pa.list_(t.value_field.with_type(concrete_type(t.value_type)), t.list_size)
    if pa.types.is_map(t):
        return pa.map_(t.key_field.type, t.item_field.with_type(concrete_type(t.item_type)))
    return t


def _nullable_type(t: pa.DataType) -> pa.DataType:
    if pa.types.is_struct(t):
        return pa.struct([pa.field(t.field(i).name, _nullable_type(t.field(i).type), nullable=True)
                          for i in range(t.num_fields)])
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        v = pa.field(t.value_field.name, _nullable_type(t.value_type), nullable=True)
        return pa.large_list(v) if pa.types.is_large_list(t) else pa.list_(v)
    if pa.types.is_fixed_size_list(t):
        return pa.list_(pa.field(t.value_field.name, _nullable_type(t.value_type), nullable=True), t.list_size)
    if pa.types.is_map(t):
        return pa.map_(t.key_field.type, pa.field(t.item_field.name, _nullable_type(t.item_type), nullable=True))
    return t


def nullable(schema: pa.Schema) -> pa.Schema:
    """``schema`` with every field (nested ones too) nullable, as Hudi's Avro schema declares
    them: data whose columns are ``NOT NULL`` (Spark's ``range``, literals) and stored rows
    then share one file schema."""
    return pa.schema([pa.field(f.name, _nullable_type(f.type), nullable=True) for f in schema])


def _sample(col: Any, cast: Any) -> str:
    """A value of ``col`` that does not survive ``cast`` (for error messages)."""
    import pyarrow.compute as pc
    try:
        col = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
        lossy = cast(col, safe=False)
        back = pc.cast(lossy, col.type, safe=False)
        bad = pc.and_(pc.is_valid(col), pc.invert(pc.fill_null(pc.equal(back, col), False)))
        idx = pc.indices_nonzero(bad)
        if len(idx):
            return repr(col[idx[0].as_py()].as_py())
    except Exception:  # noqa: BLE001 - only the message is at stake
        pass
    return "some values"


def normalize_input(table: pa.Table, *, truncate_nanoseconds: bool = False) -> pa.Table:
    """Cast incoming columns to their :func:`normalize_type`.

    Nanosecond timestamps are written as microseconds: a value with non-zero digits below the
    microsecond is refused (:class:`IncompatibleSchemaError`) unless ``truncate_nanoseconds``
    (then those digits are dropped)."""
    cols, fields, changed = [], [], False
    for f, col in zip(table.schema, table.columns):
        nt = normalize_type(f.type, f.name)
        if nt != f.type:
            changed = True
            try:
                col = col.cast(nt, safe=True)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as err:
                if truncate_nanoseconds and "timestamp" in str(f.type):
                    col = col.cast(nt, safe=False)
                else:
                    example = _sample(col, lambda c, safe, t=nt: c.cast(t, safe=safe))
                    hint = ("pass truncate_nanoseconds=True to drop the digits below the microsecond, "
                            "or round the column to microseconds (e.g. Series.dt.floor('us')) first"
                            if "timestamp" in str(f.type) else f"cast the column to {nt} first")
                    raise IncompatibleSchemaError(
                        f"column {f.name!r} ({f.type}) is written as {nt}, which does not hold {example} "
                        f"({err}); {hint}") from None
        cols.append(col)
        fields.append(pa.field(f.name, nt, nullable=f.nullable))
    return pa.Table.from_arrays(cols, schema=pa.schema(fields, metadata=table.schema.metadata)) if changed else table


def cast_to_schema(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """Cast the columns of ``table`` that ``schema`` names to their type there, checking every
    value (before anything is written): a value the column's type cannot hold exactly is an
    :class:`IncompatibleSchemaError` naming the column and a value."""
    out = table
    for f in schema:
        if f.name not in table.column_names:
            continue
        col = table.column(f.name)
        if col.type == f.type:
            continue
        try:
            new = col.cast(f.type, safe=True)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as err:
            example = _sample(col, lambda c, safe, t=f.type: c.cast(t, safe=safe))
            raise IncompatibleSchemaError(
                f"column {f.name!r}: the table stores {f.type}, the incoming {col.type} column holds {example}, "
                f"which {f.type} cannot hold exactly ({err}); nothing was written. Cast or round the column "
                f"to {f.type} first, or write it under a new column name") from None
        out = out.set_column(out.column_names.index(f.name), pa.field(f.name, f.type), new)
    return out


_AVRO_NAME = __import__("re").compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def invalid_avro_names(fields: Any, prefix: str = "") -> list[str]:
    """Field names (nested ones as ``a.b``) that Avro does not allow (``[A-Za-z_][A-Za-z0-9_]*``):
    Hudi's schema, and every reader of it, cannot hold them."""
    bad = []
    for f in fields:
        path = f"{prefix}{f.name}"
        if not _AVRO_NAME.match(f.name):
            bad.append(path)
        t = f.type
        while pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
            t = t.value_type
        if pa.types.is_map(t):
            t = t.item_type
        if pa.types.is_struct(t):
            bad.extend(invalid_avro_names([t.field(i) for i in range(t.num_fields)], f"{path}."))
    return bad


def _children(t: pa.DataType) -> tuple[list[pa.Field], bool]:
    """The fields under a type (a struct's, or those of a list's or map's struct values) and
    whether they are inside a list or map."""
    inner = False
    while pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t) or pa.types.is_map(t):
        t = t.item_type if pa.types.is_map(t) else t.value_type
        inner = True
    return ([t.field(i) for i in range(t.num_fields)] if pa.types.is_struct(t) else []), inner


def missing_fields(stored: pa.DataType, incoming: pa.DataType, path: str, in_list: bool = False) -> list[tuple[str, bool]]:
    """Nested fields of the ``stored`` type (a struct, or a list or map of structs) that the
    ``incoming`` type lacks, as ``(dotted path, inside a list or map)``."""
    have, inner = _children(incoming)
    want, _ = _children(stored)
    if not have:   # not a struct (a column of nulls, another type): nothing to compare
        return []
    got = {f.name: f.type for f in have}
    out: list[tuple[str, bool]] = []
    for f in want:
        p = f"{path}.{f.name}"
        if f.name not in got:
            out.append((p, in_list or inner))
        else:
            out.extend(missing_fields(f.type, got[f.name], p, in_list or inner))
    return out


def name_clashes(fields: Any, prefix: str = "") -> list[tuple[str, ...]]:
    """Groups of column (or struct field) names, nested ones as ``a.b``, equal when case is
    ignored (``fare``, ``Fare``; an exact duplicate too): Spark and Hudi resolve names
    case-insensitively, so a table cannot hold both."""
    groups: dict[str, list[str]] = {}
    for f in fields:
        groups.setdefault(f.name.lower(), []).append(f"{prefix}{f.name}")
    out = [tuple(g) for g in groups.values() if len(g) > 1]
    for f in fields:
        out.extend(name_clashes(_children(f.type)[0], f"{prefix}{f.name}."))
    return out
