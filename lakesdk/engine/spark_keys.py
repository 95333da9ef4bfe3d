"""Record keys and partition paths of Spark DataFrames: the check of a write's key and
partition values before an instant exists (one Spark job), and the key columns as Spark
expressions where they equal what Arrow computes (:func:`lakesdk.engine.tasks.add_key_columns`)."""

from __future__ import annotations

from typing import Any, Callable

import pyarrow as pa

from lakesdk import exceptions as exc_mod
from lakesdk.engine.tasks import WriteContext, add_key_columns
from lakesdk.exceptions import LakeError
from lakesdk.merge.ordering import OP, OP_UPSERT, event_time_fields, null_ordering_error

__all__ = ["check_key_values_spark", "spark_key_columns", "partition_value_refused", "spark_arrow_schema"]


def spark_arrow_schema(df: Any) -> pa.Schema:
    from pyspark.sql.pandas.types import to_arrow_schema
    return to_arrow_schema(df.schema, timezone="UTC", prefers_large_types=False)


def check_key_values_spark(df: Any, ctx: WriteContext,
                           resolve_encoding: Callable[[], str] | None = None) -> list[str] | None:
    """Before an instant is opened: rows of a Spark DataFrame without a record key (a
    :class:`~lakesdk.exceptions.NullKeyError`, counted exactly: a null key value, or under
    Hudi's key encoding a key null or empty as a whole), whose partition values (text
    columns) could not round-trip through a partition path, or whose composite-key values
    hold ``,`` or are Hudi's ``__null__``/``__empty__`` raise the typed error
    :func:`add_key_columns` would raise in a task; under event-time ordering, records written
    as data whose ordering value is null raise a
    :class:`~lakesdk.exceptions.NullOrderingValueError` (counted exactly).  One Spark job
    (an aggregation).

    When some row has a null or empty key value, ``resolve_encoding`` (if given) decides
    ``ctx.key_encoding`` first: only such rows depend on it.

    Returns the partition paths of the rows (sorted) when the same job can collect them (the
    distinct values of text or integer partition fields, made paths on the driver as the
    tasks make them), else None; a table without partition fields: ``[""]``."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import StringType

    from lakesdk.format.keys import HUDI_ENCODING, is_composite, keyless_key_error, null_key_error
    text = {f.name for f in df.schema.fields if isinstance(f.dataType, StringType)}
    conds = []
    for f in ctx.partition_fields:
        if f in text:
            conds.append(partition_value_refused(F.col(f"`{f}`"), f, ctx))
    if len(ctx.key_fields) > 1:
        conds += [F.col(f"`{k}`").contains(",") | F.col(f"`{k}`").isin("__null__", "__empty__")
                  for k in ctx.key_fields if k in text]
    keys = [k for k in ctx.key_fields if k in df.columns]
    cols = [c for c in dict.fromkeys((*ctx.key_fields, *ctx.partition_fields)) if c in df.columns]
    aggs = [F.count(F.lit(1)).alias("_lk_rows")]
    aggs += [F.count(F.when(F.col(f"`{k}`").isNull(), 1)).alias(f"_lk_null{i}") for i, k in enumerate(keys)]
    ords = [f for f in event_time_fields(ctx.ordering, ctx.merge_mode) if f in df.columns] \
        if ctx.operation != "delete" else []
    if ords:   # a merge's deletes (the per-row op) may go without an ordering value
        ups = F.col(OP) == OP_UPSERT if OP in df.columns else F.lit(True)
        aggs += [F.count(F.when(ups, 1)).alias("_lk_ups")]
        aggs += [F.count(F.when(ups & F.col(f"`{f}`").isNull(), 1)).alias(f"_lk_null_ord{i}")
                 for i, f in enumerate(ords)]
    missing = [F.col(f"`{k}`").isNull() | (F.col(f"`{k}`") == "") if k in text else F.col(f"`{k}`").isNull()
               for k in keys]
    if missing:
        some, every = missing[0], missing[0]
        for m in missing[1:]:
            some, every = some | m, every & m
        aggs += [F.count(F.when(some, 1)).alias("_lk_missing"), F.count(F.when(every, 1)).alias("_lk_keyless")]
    if conds:
        cond = conds[0]
        for c in conds[1:]:
            cond = cond | c
        first_bad = F.first(F.when(F.coalesce(cond, F.lit(False)), F.struct(*[F.col(f"`{c}`") for c in cols])),
                            ignorenulls=True)
        aggs.append(first_bad.alias("_lk_bad"))
    pfields = ctx.partition_fields
    by_value = bool(pfields) and all(f in df.columns and _text_type(df.schema[f].dataType) for f in pfields)
    if by_value:
        aggs.append(F.collect_set(F.struct(*[F.col(f"`{f}`") for f in pfields])).alias("_lk_parts"))
    row = df.agg(*aggs).collect()[0]
    if missing and row["_lk_missing"] and resolve_encoding is not None:
        ctx.key_encoding = resolve_encoding()
    hudi = ctx.key_encoding == HUDI_ENCODING
    composite = is_composite(ctx.key_fields, ctx.keygen)
    if not hudi or not composite:
        for i, k in enumerate(keys):
            n = row[f"_lk_null{i}"]
            if n:
                raise null_key_error(k, n, row["_lk_rows"], legacy_composite=composite)
    if hudi and missing and row["_lk_keyless"]:
        raise keyless_key_error(ctx.key_fields, row["_lk_keyless"], row["_lk_rows"])
    for i, f in enumerate(ords):
        if row[f"_lk_null_ord{i}"]:
            what = "merge's updates and inserts" if OP in df.columns else ctx.operation
            raise null_ordering_error(f, row[f"_lk_null_ord{i}"], row["_lk_ups"], ctx.table_name, what)
    bad_row = row["_lk_bad"] if conds else None
    if bad_row is not None:
        sample = pa.Table.from_pylist([bad_row.asDict()], schema=pa.schema([spark_arrow_schema(df).field(c) for c in cols]))
        add_key_columns(ctx, sample)   # raises the typed error
    if not pfields:
        return [""]
    if not by_value:
        return None
    from lakesdk.format.keys import partition_paths
    arrow = spark_arrow_schema(df)
    values = pa.Table.from_pylist([r.asDict() for r in row["_lk_parts"]], schema=pa.schema([arrow.field(f) for f in pfields]))
    return sorted(set(partition_paths(values, pfields, hive_style=ctx.hive_style, urlencode=ctx.urlencode).to_pylist()))


_INTEGRAL = ("byte", "short", "integer", "long")


def _text_type(dt: Any) -> str | None:
    """``string`` or ``integral`` when Spark's text of a value of type ``dt`` (a cast to
    string) is the text Arrow's cast gives (:func:`lakesdk.format.keys.record_keys`), else None."""
    name = dt.typeName()
    return "string" if name == "string" else "integral" if name in _INTEGRAL else None


def _task_error(err: LakeError) -> Any:
    """A Spark expression that fails the task with ``err`` (typed again on the driver by
    :func:`reraise_task_error`)."""
    from pyspark.sql import functions as F
    return F.raise_error(F.lit(f"lakesdk.exceptions.{type(err).__name__}: {err}"))


def spark_key_columns(df: Any, ctx: WriteContext) -> tuple[Any, Any] | None:
    """``(record key, partition path)`` of every row of ``df`` as Spark expressions, equal to
    what :func:`add_key_columns` computes in Arrow; None when that is not certain (a key or
    partition field of another type than text or integers, URL-encoded partition paths).

    The values that :func:`check_key_values_spark` refuses before an instant exists fail the
    task here too (with the same typed error), so no such record is ever written."""
    from pyspark.sql import functions as F

    from lakesdk.format.keys import (
        DEFAULT_PARTITION,
        EMPTY_PLACEHOLDER,
        HUDI_ENCODING,
        NULL_PLACEHOLDER,
        is_composite,
        keyless_key_error,
        null_key_error,
    )
    fields = {f.name: f.dataType for f in df.schema.fields}
    if ctx.urlencode or not ctx.key_fields:
        return None
    kinds = {}
    for f in (*ctx.key_fields, *ctx.partition_fields):
        kind = _text_type(fields[f]) if f in fields else None
        if kind is None:
            return None
        kinds[f] = kind
    hudi = ctx.key_encoding == HUDI_ENCODING
    composite = is_composite(ctx.key_fields, ctx.keygen)

    def col(f: str) -> Any:
        return F.col(f"`{f}`")

    def text(f: str) -> Any:
        return col(f) if kinds[f] == "string" else col(f).cast("string")

    def missing(f: str) -> Any:
        return col(f).isNull() | (col(f) == "") if kinds[f] == "string" else col(f).isNull()
    guards: list[tuple[Any, LakeError]] = []   # (condition, error): the first that holds fails the task
    if not hudi or not composite:
        guards += [(col(f).isNull(), null_key_error(f, 1, 1, legacy_composite=composite)) for f in ctx.key_fields]
    if hudi:
        keyless = missing(ctx.key_fields[0])
        for f in ctx.key_fields[1:]:
            keyless = keyless & missing(f)
        guards.append((keyless, keyless_key_error(ctx.key_fields, 1, 1)))
    if composite:
        parts = []
        for f in ctx.key_fields:
            t = text(f)
            if hudi:
                t = F.when(col(f).isNull(), F.lit(NULL_PLACEHOLDER)).when(t == "", F.lit(EMPTY_PLACEHOLDER)).otherwise(t)
            if len(ctx.key_fields) > 1 and kinds[f] == "string":   # check_key_values_spark refuses these
                guards.append((col(f).contains(",") | col(f).isin(NULL_PLACEHOLDER, EMPTY_PLACEHOLDER),
                               exc_mod.InvalidKeyValueError(f"record key field {f!r} holds ',' or a placeholder value")))
            parts.append(F.concat(F.lit(f"{f}:"), t))
        key = F.concat_ws(",", *parts)
    else:
        key = text(ctx.key_fields[0])
    for cond, err in reversed(guards):
        key = F.when(cond, _task_error(err)).otherwise(key)
    if not ctx.partition_fields:
        return key, F.lit("")
    segs = []
    for f in ctx.partition_fields:
        seg = F.when(missing(f), F.lit(DEFAULT_PARTITION)).otherwise(text(f))
        if kinds[f] == "string":
            bad = partition_value_refused(col(f), f, ctx)
            seg = F.when(F.coalesce(bad, F.lit(False)), _task_error(exc_mod.InvalidPartitionValueError(
                f"partition field {f!r} has a value that would not read back as itself"))).otherwise(seg)
        segs.append(F.concat(F.lit(f"{f}="), seg) if ctx.hive_style else seg)
    return key, F.concat_ws("/", *segs)


def partition_value_refused(c: Any, field: str, ctx: WriteContext) -> Any:
    """Spark condition: the text partition value ``c`` of ``field`` cannot round-trip through a
    partition path (see :func:`lakesdk.format.keys.partition_value_problem`)."""
    from pyspark.sql import functions as F

    from lakesdk.format.keys import MAX_SEGMENT_BYTES
    room = MAX_SEGMENT_BYTES - (len(field.encode("utf-8")) + 1 if ctx.hive_style else 0)
    if ctx.urlencode:
        return F.octet_length(c) * 3 > room
    bad = c.contains("/") | c.rlike("[\\x00-\\x1F\\x7F]") | (F.octet_length(c) > room)
    if not ctx.hive_style:
        bad = bad | c.startswith(".") | c.startswith("_") | c.contains("=") | c.contains(":")
    return bad
