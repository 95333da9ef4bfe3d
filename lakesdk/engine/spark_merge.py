"""The Spark side of ``t.merge(...)`` (:mod:`lakesdk.table.merge`): the source joined with the
table's snapshot, each row given the first clause whose condition holds, and the changed rows
as one DataFrame in the table's schema (with ``_lk_op``), which the table's write path commits.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

from lakesdk.engine.spark_cluster import arrow_frame, shuffle_partitions
from lakesdk.exceptions import KeyChangeError, MergeConflictError, SchemaError
from lakesdk.merge.ordering import null_ordering_error

__all__ = ["SparkMergeChanges", "spark_merge_changes", "key_change_error", "typed_as"]


def key_change_error(table: str, clause: Any, columns: Sequence[str], examples: Sequence[tuple[Any, Any]],
                     count: int, key: Sequence[str]) -> KeyChangeError:
    """The refusal of a merge clause that would change the record key or partition path of
    ``count`` stored records (``examples``: (stored, new) value pairs of ``columns``)."""
    what = "record key" if set(columns) <= set(key) else "partition path" if not set(columns) & set(key) \
        else "record key and partition path"
    call = f"when_{c}" if (c := clause.kind).startswith("matched") else f"when_not_matched_{c}"
    shown = f"{call}(updates={clause.values!r})" if clause.values else f"{call}()"
    eg = ", ".join(f"{old!r} -> {new!r}" for old, new in examples[:3])
    return KeyChangeError(
        f"merge into {table!r}: {shown} would change the {what} ({', '.join(columns)}) of {count} stored "
        f"record(s) (e.g. {eg}); nothing was written. A record is identified by its key and partition path: "
        "the change would insert a second record and keep the stored one (Apache Hudi does not change them "
        "either). Leave these fields out of the clause (for when_matched_update_all, match on the record key "
        "or drop the source's key column), or delete the stored record (when_matched_delete) and write the new "
        "one with t.upsert(...)", columns=tuple(columns), clause=shown)


@dataclass(frozen=True)
class SparkMergeChanges:
    """The rows a merge changes (a Spark DataFrame) and the rows each clause selected."""

    changes: Any
    counts: dict[int | None, int]   # rows by the index of the clause that took them (None: no clause)
    source_rows: int
    unchanged: int
    acted: int

    def rows(self, *, local: bool) -> Any:
        """The changes to write: an Arrow table when Spark is local (the rows are here), else the DataFrame."""
        return self.changes.toArrow() if local else self.changes


def spark_merge_changes(spark: Any, arrow: Any, sdf: Any, *, on: Sequence[str], clauses: Sequence[Any], config: Any,
                        key: Sequence[str], target_columns: Sequence[str], read_target: Callable[[], Any],
                        lacking_columns: Callable[[list[str]], set[str]], ordering: str | None,
                        key_guards: dict[int, tuple[str, ...]] | None = None) -> SparkMergeChanges:
    """Join the source (``arrow`` or the Spark DataFrame ``sdf``) with the target
    (``read_target()``, the table's snapshot as a DataFrame) on ``on`` and select each row's
    clause (``clauses``: ``kind``, ``condition``, ``values`` as :class:`lakesdk.table.merge.MergeBuilder`
    holds them).  ``key_guards``: the key and partition fields a clause must leave as stored
    (by clause index; a change is a KeyChangeError, raised before anything is written)."""
    from pyspark.sql import functions as F

    cfg = config
    src = arrow_frame(spark, arrow) if arrow is not None else sdf
    missing = [k for k in on if k not in src.columns]
    if missing:
        raise SchemaError(f"merge key(s) {missing} are not columns of the source ({', '.join(src.columns)})")
    lacking = lacking_columns(src.columns)
    # a partitioned table's records are (partition, key): a source row matches the target rows
    # of its own partition folder ('' and null share one), as Hudi's MERGE INTO tags them
    parts = [f for f in cfg.partition_fields if f in src.columns]
    by_folder = [_folder(F.col(k), src.schema[k].dataType).alias(k) if k in parts else F.col(k) for k in on]
    by_folder += [_folder(F.col(f), src.schema[f].dataType).alias(f) for f in parts if f not in on]
    dup = src.groupBy(*by_folder).count().filter("count > 1").limit(3).collect()
    if dup:
        keys = [tuple(r[k] for k in on) for r in dup]
        raise MergeConflictError(
            f"the merge source has several rows for the same key (e.g. {keys}); a target row can be "
            "matched by one source row only: de-duplicate the source first")
    target_cols = list(target_columns)
    tgt = read_target() if target_cols else None
    if tgt is None:
        tgt = spark.createDataFrame([], src.schema)
        target_cols = src.columns
    by_key = set(on) == set(key)   # rows match as their record keys do: a null key part matches a null
    # the join keys: a partition field by its folder and the record key parts compare null-safe
    # (gathered in one struct: structs compare equal field by field, a null matching a null),
    # other match columns as values
    safe: list[str] = []
    plain: list[str] = []
    for k in [*on, *[f for f in parts if f not in on and f in tgt.columns]]:
        (safe if k in parts or by_key else plain).append(k)
    n = shuffle_partitions(spark)
    s = _joining(src, "__s_", "__lk_sjk", safe, plain, n)
    tt = _joining(tgt, "__t_", "__lk_tjk", safe, plain, n)
    cond = None
    for a, b in ([("__lk_sjk", "__lk_tjk")] if safe else []) + [(f"__s_{k}", f"__t_{k}") for k in plain]:
        c = F.col(a) == F.col(b)
        cond = c if cond is None else (cond & c)
    by_source = any(c.kind.startswith("by_source") for c in clauses)
    joined = s.join(tt, cond, "full_outer" if by_source else "left_outer").drop("__lk_sjk", "__lk_tjk")

    def sql(e: str) -> Any:
        """s.x -> source column, t.x -> target column, inside a Spark SQL expression."""
        import re
        e2 = re.sub(r"\bs\.(`?)(\w+)\1", r"`__s_\2`", e)
        e2 = re.sub(r"\bt\.(`?)(\w+)\1", r"`__t_\2`", e2)
        return F.expr(e2)

    matched = F.col("__s_present").isNotNull() & F.col("__t_present").isNotNull()
    src_only = F.col("__s_present").isNotNull() & F.col("__t_present").isNull()
    tgt_only = F.col("__s_present").isNull() & F.col("__t_present").isNotNull()
    action = None
    for i, c in enumerate(clauses):
        when = matched if c.kind.startswith("matched") else src_only if c.kind.startswith("not_matched") \
            else tgt_only
        if c.condition:
            when = when & sql(c.condition)
        action = F.when(when, F.lit(i)) if action is None else action.when(when, F.lit(i))
    joined = joined.withColumn("__action", action)
    aggs = [F.count(F.lit(1)).alias("count")]
    check_ordering = arrow is None and ordering in src.columns   # a Spark source: counted in this job
    if check_ordering:
        aggs.append(F.count(F.when(F.col("__s_present").isNotNull() & F.col(f"`__s_{ordering}`").isNull(), 1))
                    .alias("__null_ord"))
    agg = joined.groupBy("__action", F.col("__s_present").isNotNull().alias("__has_s")).agg(*aggs).collect()
    if check_ordering and ordering is not None and sum(r["__null_ord"] for r in agg):
        raise null_ordering_error(ordering, sum(r["__null_ord"] for r in agg),
                                  sum(r["count"] for r in agg if r["__has_s"]), cfg.name, "merge source")
    counts: dict[int | None, int] = {}
    for r in agg:
        counts[r["__action"]] = counts.get(r["__action"], 0) + r["count"]
    source_rows = sum(r["count"] for r in agg if r["__has_s"])
    unchanged = sum(r["count"] for r in agg if r["__has_s"] and r["__action"] is None)
    # one output row per acted-on row, in the target schema, with its op
    outs = []
    all_cols = list(dict.fromkeys([*target_cols, *[c for c in src.columns if c not in target_cols]]))
    for i, c in enumerate(clauses):
        rows = joined.filter(F.col("__action") == i)
        if c.kind.endswith("delete"):
            # the delete carries the source's ordering value when it has one (as Hudi's MERGE
            # INTO does): a delete older than the stored record is ignored on event-time tables
            # (a source row has one there, else it was refused above; a target row without a
            # source row carries its own, so its delete applies)
            o = set(cfg.ordering_fields)
            exprs = [(F.coalesce(F.col(f"__s_{k}"), F.col(f"__t_{k}")) if k in o and k in src.columns
                      else F.col(f"__t_{k}")).alias(k) for k in target_cols]
            op = 1
        elif c.kind in ("matched_update_all", "not_matched_insert_all"):
            # a table column the source lacks: refused above unless the caller opted in;
            # "keep" keeps an updated row's stored value, "null" (and an insert) writes null
            exprs = [(F.col(f"__s_{k}") if k in src.columns
                      else F.col(f"__t_{k}") if k in tgt.columns and k not in lacking
                      else F.lit(None)).alias(k) for k in all_cols]
            op = 0
        else:
            vals = c.values or {}
            unknown = [k for k in vals if k not in all_cols]
            if unknown:
                raise SchemaError(f"merge clause sets unknown column(s) {unknown}; the table has {target_cols}")
            base = "__t_" if c.kind != "not_matched_insert" else None
            exprs = []
            # an explicit clause writes the table's columns (and the ones it sets), not every
            # source column: a source-only column would become a table column of nulls
            for k in dict.fromkeys([*target_cols, *vals]):
                if k in vals:
                    exprs.append(sql(vals[k]).alias(k))
                elif k in on:
                    exprs.append(F.coalesce(F.col(f"__s_{k}"), F.col(f"__t_{k}")).alias(k))
                elif base and k in tgt.columns:
                    exprs.append(F.col(f"{base}{k}").alias(k))
                else:
                    exprs.append(F.lit(None).alias(k))
            op = 0
        if i in (key_guards or {}):
            _check_keys_kept(rows, exprs, (key_guards or {})[i], c, cfg, tgt.schema)
        outs.append(rows.select(*exprs, F.lit(op).cast("tinyint").alias("_lk_op")))
    changes = outs[0]
    for o in outs[1:]:
        changes = changes.unionByName(o, allowMissingColumns=True)
    acted = sum(counts.get(i, 0) for i in range(len(clauses)))
    return SparkMergeChanges(changes, counts, source_rows, unchanged, acted)


def _joining(df: Any, prefix: str, jk: str, safe: list[str], plain: list[str], n: int) -> Any:
    """One side of the merge's join: its columns renamed ``prefix`` + name, the null-safe
    keys ``safe`` as one struct ``jk``, a ``prefix`` + ``present`` flag, shuffled
    by the join keys into ``n`` partitions.  The flag is added after the shuffle: a join
    whose sides both are shuffles takes at least ``spark.sql.shuffle.partitions`` (200 by
    default, and a write persists the joined rows, whose plan adaptive execution does not
    coalesce then), while a side that is not (a projection over the shuffle) keeps ``n``."""
    from pyspark.sql import functions as F
    cols = [F.col(f"`{c}`").alias(f"{prefix}{c}") for c in df.columns]
    if safe:
        cols.append(F.struct(*[_folder(F.col(f"`{k}`"), df.schema[k].dataType).alias(k) for k in safe])
                    .alias(jk))
    keys = ([jk] if safe else []) + [f"{prefix}{k}" for k in plain]
    return df.select(*cols).repartition(n, *keys).withColumn(f"{prefix}present", F.lit(True))


def _folder(col: Any, data_type: Any) -> Any:
    """A partition value's folder identity in Spark: '' (and the text
    ``__HIVE_DEFAULT_PARTITION__``) go to the folder of nulls, so they compare as null."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import StringType

    from lakesdk.format.keys import DEFAULT_PARTITION
    if not isinstance(data_type, StringType):
        return col
    return F.when(col.isin("", DEFAULT_PARTITION), F.lit(None).cast("string")).otherwise(col)


def _check_keys_kept(rows: Any, exprs: list[Any], columns: Sequence[str], clause: Any, cfg: Any, tschema: Any) -> None:
    """The rows a clause rewrites keep their record key and partition folder: else
    KeyChangeError (one Spark job, run only for a clause that could change them)."""
    from pyspark.sql import functions as F
    both = rows.select(*exprs, *[F.col(f"__t_{k}").alias(f"__old_{k}") for k in columns])
    cond = None
    for k in columns:
        typ = tschema[k].dataType
        new, old = F.col(f"`{k}`").cast(typ), F.col(f"__old_{k}")
        if k in cfg.partition_fields:
            new, old = _folder(new, typ), _folder(old, typ)
        differs = ~new.eqNullSafe(old)
        cond = differs if cond is None else (cond | differs)
    bad = both.filter(cond).select(*[c for k in columns for c in (F.col(f"__old_{k}"), F.col(f"`{k}`"))])
    sample = bad.limit(3).collect()
    if sample:
        examples = [(r[2 * j], r[2 * j + 1]) for r in sample for j in range(len(columns))]
        raise key_change_error(cfg.name, clause, columns, examples, bad.count(), cfg.record_key_fields)


def typed_as(df: Any, want: dict[str, Any]) -> Any:
    """``df`` (a merge's changes kept in Spark) with each column that ``want`` names (Arrow
    types) cast to its Spark type where the two differ only in their timestamps' kind, or
    the column holds nulls alone: Spark gives the timestamps of an Arrow source its zoned
    kind, and a null literal no type.  The Arrow path casts its rows back to the table's
    types the same way (``lakesdk.table.merge``)."""
    from pyspark.sql import functions as F
    from pyspark.sql.pandas.types import from_arrow_type
    from pyspark.sql.types import NullType
    for f in df.schema.fields:
        if f.name not in want:
            continue
        try:
            target = from_arrow_type(want[f.name], prefer_timestamp_ntz=True)
        except Exception:  # noqa: BLE001 - a type Spark has no match for: the write checks it
            continue
        if target != f.dataType and (isinstance(f.dataType, NullType) or _same_but_timestamps(f.dataType, target)):
            df = df.withColumn(f.name, F.col(f"`{f.name}`").cast(target))
    return df


def _same_but_timestamps(a: Any, b: Any) -> bool:
    """Spark types ``a`` and ``b`` are alike but for timestamps with and without a zone."""
    from pyspark.sql.types import ArrayType, MapType, StructType, TimestampNTZType, TimestampType
    kinds = (TimestampType, TimestampNTZType)
    if isinstance(a, kinds) and isinstance(b, kinds):
        return True
    if isinstance(a, StructType) and isinstance(b, StructType):
        return len(a.fields) == len(b.fields) and all(
            x.name == y.name and _same_but_timestamps(x.dataType, y.dataType) for x, y in zip(a.fields, b.fields))
    if isinstance(a, ArrayType) and isinstance(b, ArrayType):
        return _same_but_timestamps(a.elementType, b.elementType)
    if isinstance(a, MapType) and isinstance(b, MapType):
        return _same_but_timestamps(a.keyType, b.keyType) and _same_but_timestamps(a.valueType, b.valueType)
    return bool(a == b)
