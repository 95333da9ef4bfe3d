"""The Spark classes lakesdk's signatures name, for type checkers only, and the Arrow types
Spark's Arrow exchange with Python takes (what a ``mapInArrow`` task returns).

pyspark is imported under ``lakesdk/engine/`` only, so the layers above import these names from
here inside ``if TYPE_CHECKING:``; importing this module does not import pyspark.  A Spark
Connect session is typed as a :class:`SparkSession`, as pyspark's own builder types it."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pyarrow as pa

if TYPE_CHECKING:
    from pyspark.sql import DataFrame as DataFrame
    from pyspark.sql import SparkSession as SparkSession

__all__ = ["exchange_type", "for_spark_exchange"]


def exchange_type(t: pa.DataType) -> pa.DataType:
    """``t`` as Spark's Arrow exchange takes it: timestamps in microseconds (same zone, same
    instants), decimals of 32, 64 and (up to Spark's 38 digits) 256 bits as 128-bit ones,
    fixed-size binary as binary (Spark's Arrow reader refuses those three), nested types
    field by field."""
    if pa.types.is_timestamp(t):
        return pa.timestamp("us", tz=t.tz)
    if pa.types.is_decimal(t) and not pa.types.is_decimal128(t) and t.precision <= 38:
        return pa.decimal128(t.precision, t.scale)
    if pa.types.is_fixed_size_binary(t):
        return pa.binary()
    if pa.types.is_struct(t):
        return pa.struct([t.field(i).with_type(exchange_type(t.field(i).type)) for i in range(t.num_fields)])
    if pa.types.is_list(t):
        return pa.list_(t.value_field.with_type(exchange_type(t.value_type)))
    if pa.types.is_large_list(t):
        return pa.large_list(t.value_field.with_type(exchange_type(t.value_type)))
    if pa.types.is_fixed_size_list(t):
        return pa.list_(t.value_field.with_type(exchange_type(t.value_type)), t.list_size)
    if pa.types.is_map(t):
        return pa.map_(t.key_field.with_type(exchange_type(t.key_type)),
                       t.item_field.with_type(exchange_type(t.item_type)), t.keys_sorted)
    return t


def for_spark_exchange(schema: pa.Schema) -> pa.Schema:
    """The Arrow schema Spark's ``mapInArrow`` accepts for ``schema`` (:func:`exchange_type`)."""
    return pa.schema([f.with_type(exchange_type(f.type)) for f in schema], metadata=schema.metadata)
