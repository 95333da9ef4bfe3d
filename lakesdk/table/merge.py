"""The merge builder: ``t.merge(source, on=...)`` with when-matched / when-not-matched clauses.

Semantics follow Delta Lake's MERGE: clauses are tried in the order given and the first
whose condition holds applies to a row; ``s.`` names the source and ``t.`` the target.
Conditions and ``set`` values are Spark SQL expressions, evaluated by Spark over the join of
the source with the table's current snapshot.  The changed rows are then written as one
commit through the table's write path, which touches only the file groups that hold
matched keys.  As with every write to an event-time table, a row whose ordering value is
lower than the stored one does not replace it (Hudi's MERGE INTO behaves the same), and a
source row without an ordering value is refused before anything is written
(:class:`~lakesdk.exceptions.NullOrderingValueError`, whichever clause would take it).

On a partitioned table, a source row holding the partition fields matches the target rows of
its own partition only (``''`` and null share one partition folder): the table's records are
(partition, key), as Hudi's MERGE INTO tags the source rows through its index.

A source with duplicate keys is an error: which of its rows should update the target
would be ambiguous.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal

from lakesdk.exceptions import MergeConflictError, MissingColumnError, OptionsError, SchemaError
from lakesdk.merge.ordering import event_time_field, null_ordering_error

if TYPE_CHECKING:
    from lakesdk.commit.results import WriteResult
    from lakesdk.table.table import Table

__all__ = ["MergeBuilder", "MergeResult", "MergeConflictError"]


Kind = Literal["matched_update", "matched_update_all", "matched_delete", "not_matched_insert",
               "not_matched_insert_all", "by_source_update", "by_source_delete"]


@dataclass(frozen=True)
class _Clause:
    kind: Kind
    condition: str | None = None
    values: dict[str, str] | None = None

    @property
    def label(self) -> str:
        cond = f" if {self.condition}" if self.condition else ""
        return f"{self.kind}{cond}"


@dataclass(frozen=True)
class MergeResult:
    """What the merge did to the table, and the rows each clause selected.

    ``updated``, ``inserted`` and ``deleted`` count records of the table (from the commit),
    ``skipped`` the rows a clause selected that did not change the table because the stored
    record has a higher ordering value (event-time tables), and ``unchanged`` the source
    rows no clause selected.  ``per_clause`` holds the rows each clause selected, in the
    order the clauses were given."""

    source_rows: int
    updated: int
    inserted: int
    deleted: int
    unchanged: int
    per_clause: tuple[tuple[str, int], ...]
    write: "WriteResult | None"
    seconds: float
    skipped: int = 0

    def __repr__(self) -> str:
        at = f" @ {self.write.instant}" if self.write and self.write.instant else " (no changes)"
        extra = f", skipped={self.skipped}" if self.skipped else ""
        return (f"MergeResult({self.source_rows} source rows{at}: updated={self.updated}, inserted={self.inserted}, "
                f"deleted={self.deleted}{extra}, unchanged={self.unchanged}, seconds={self.seconds:.2f})")

    def _repr_html_(self) -> str:
        rows = "".join(f"<tr><td><code>{c}</code></td><td>{n}</td></tr>" for c, n in self.per_clause)
        return f"<div><b>{repr(self)}</b><table><tr><th>clause</th><th>rows</th></tr>{rows}</table></div>"


@dataclass(frozen=True)
class MergeBuilder:
    """Immutable: each ``when_*`` returns a new builder; ``execute()`` runs it."""

    table: "Table"
    source: Any
    on: tuple[str, ...]
    clauses: tuple[_Clause, ...] = field(default=())
    missing_columns: str = "error"   # table columns the source lacks, for the *_all clauses

    def __post_init__(self) -> None:
        from lakesdk.table.write import MISSING_COLUMNS
        if self.missing_columns not in MISSING_COLUMNS:
            raise OptionsError(f"missing_columns must be one of {list(MISSING_COLUMNS)}, not {self.missing_columns!r}")

    def _add(self, clause: _Clause) -> "MergeBuilder":
        return replace(self, clauses=self.clauses + (clause,))

    def when_matched_update(self, set: dict[str, str], condition: str | None = None) -> "MergeBuilder":  # noqa: A002
        return self._add(_Clause("matched_update", condition, dict(set)))

    def when_matched_update_all(self, condition: str | None = None) -> "MergeBuilder":
        return self._add(_Clause("matched_update_all", condition))

    def when_matched_delete(self, condition: str | None = None) -> "MergeBuilder":
        return self._add(_Clause("matched_delete", condition))

    def when_not_matched_insert(self, values: dict[str, str], condition: str | None = None) -> "MergeBuilder":
        return self._add(_Clause("not_matched_insert", condition, dict(values)))

    def when_not_matched_insert_all(self, condition: str | None = None) -> "MergeBuilder":
        return self._add(_Clause("not_matched_insert_all", condition))

    def when_not_matched_by_source_update(self, set: dict[str, str], condition: str | None = None) -> "MergeBuilder":  # noqa: A002
        return self._add(_Clause("by_source_update", condition, dict(set)))

    def when_not_matched_by_source_delete(self, condition: str | None = None) -> "MergeBuilder":
        return self._add(_Clause("by_source_delete", condition))

    def __repr__(self) -> str:
        body = "".join(f"\n  .{c.label}" for c in self.clauses) or " (no clauses)"
        return f"<MergeBuilder into {self.table.name!r} on {list(self.on)}{body}>"

    # -- execution -------------------------------------------------------------------------------
    def execute(self) -> MergeResult:
        from pyspark.sql import functions as F

        from lakesdk.table.data import to_arrow_or_spark
        t0 = time.perf_counter()
        if not self.clauses:
            raise SchemaError("the merge has no clauses: add when_matched_... or when_not_matched_...")
        t = self.table
        spark = t.spark
        arrow, sdf = to_arrow_or_spark(self.source)
        if arrow is not None:
            # the types a write stores (nanoseconds as micros, refusing lost digits; unsigned
            # integers widened, uint64 refused), before Spark sees them
            from lakesdk.format.schema import normalize_input
            arrow = normalize_input(arrow)
        cfg = t.config
        # event-time tables: every source row needs its ordering value, whichever clause takes
        # it (Hudi's MERGE INTO writes the source rows as records, and refuses a null one)
        ordering = event_time_field(cfg.ordering_field, cfg.merge_mode)
        if arrow is not None and ordering is not None and ordering in arrow.column_names \
                and arrow.column(ordering).null_count:
            raise null_ordering_error(ordering, arrow.column(ordering).null_count, arrow.num_rows, cfg.name,
                                      "merge source")
        src = spark.createDataFrame(arrow) if arrow is not None else sdf
        missing = [k for k in self.on if k not in src.columns]
        if missing:
            raise SchemaError(f"merge key(s) {missing} are not columns of the source ({', '.join(src.columns)})")
        lacking = self._lacking_columns(src.columns)
        # a partitioned table's records are (partition, key): a source row matches the target rows
        # of its own partition folder ('' and null share one), as Hudi's MERGE INTO tags them
        parts = [f for f in cfg.partition_fields if f in src.columns]
        by_folder = [_folder(F.col(k), src.schema[k].dataType).alias(k) if k in parts else F.col(k) for k in self.on]
        by_folder += [_folder(F.col(f), src.schema[f].dataType).alias(f) for f in parts if f not in self.on]
        dup = src.groupBy(*by_folder).count().filter("count > 1").limit(3).collect()
        if dup:
            keys = [tuple(r[k] for k in self.on) for r in dup]
            raise MergeConflictError(
                f"the merge source has several rows for the same key (e.g. {keys}); a target row can be "
                "matched by one source row only: de-duplicate the source first")
        target_cols = t.schema.names
        tgt = t.read().to_spark() if target_cols else None
        s = src.select([F.col(c).alias(f"__s_{c}") for c in src.columns]).withColumn("__s_present", F.lit(True))
        if tgt is None:
            tgt = spark.createDataFrame([], src.schema)
            target_cols = src.columns
        tt = tgt.select([F.col(c).alias(f"__t_{c}") for c in tgt.columns]).withColumn("__t_present", F.lit(True))
        cond = None
        by_key = set(self.on) == set(t.key)   # rows match as their record keys do: a null key part matches a null
        for k in [*self.on, *[f for f in parts if f not in self.on and f in tgt.columns]]:
            if k in parts:
                c = _folder(F.col(f"__s_{k}"), src.schema[k].dataType).eqNullSafe(
                    _folder(F.col(f"__t_{k}"), tgt.schema[k].dataType))
            elif by_key:
                c = F.col(f"__s_{k}").eqNullSafe(F.col(f"__t_{k}"))
            else:
                c = F.col(f"__s_{k}") == F.col(f"__t_{k}")
            cond = c if cond is None else (cond & c)
        by_source = any(c.kind.startswith("by_source") for c in self.clauses)
        joined = s.join(tt, cond, "full_outer" if by_source else "left_outer")

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
        for i, c in enumerate(self.clauses):
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
        for i, c in enumerate(self.clauses):
            rows = joined.filter(F.col("__action") == i)
            if c.kind.endswith("delete"):
                # the delete carries the source's ordering value when it has one (as Hudi's MERGE
                # INTO does): a delete older than the stored record is ignored on event-time tables
                # (a source row has one there, else it was refused above; a target row without a
                # source row carries its own, so its delete applies)
                o = cfg.ordering_field
                exprs = [(F.coalesce(F.col(f"__s_{k}"), F.col(f"__t_{k}")) if k == o and k in src.columns
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
                    elif k in self.on:
                        exprs.append(F.coalesce(F.col(f"__s_{k}"), F.col(f"__t_{k}")).alias(k))
                    elif base and k in tgt.columns:
                        exprs.append(F.col(f"{base}{k}").alias(k))
                    else:
                        exprs.append(F.lit(None).alias(k))
                op = 0
            outs.append(rows.select(*exprs, F.lit(op).cast("tinyint").alias("_lk_op")))
        changes = outs[0]
        for o in outs[1:]:
            changes = changes.unionByName(o, allowMissingColumns=True)
        acted = sum(counts.get(i, 0) for i in range(len(self.clauses)))
        write = None
        if acted:
            from lakesdk.table.write import WriteOperation
            data = changes.toArrow() if t.context.spark_is_local() else changes   # local Spark: the rows are here
            if data is not None and hasattr(data, "num_rows"):
                data = _fix_types(data, t, arrow.schema if arrow is not None else None)
            write = WriteOperation(t, "merge", data).execute()
        per = tuple((c.label, int(counts.get(i, 0))) for i, c in enumerate(self.clauses))
        # what happened to the table is what the commit did: a selected row whose ordering
        # value is lower than the stored one changes nothing (skipped)
        upd, ins, dele, skipped = (write.updated, write.inserted, write.deleted, write.skipped) if write else (0, 0, 0, 0)
        return MergeResult(source_rows, upd, ins, dele, unchanged, per, write, time.perf_counter() - t0, skipped)


    def _lacking_columns(self, source_columns: list[str]) -> set[str]:
        """Table columns the source lacks that an ``*_all`` clause would write: a
        :class:`MissingColumnError` unless ``missing_columns`` opted in; returns the ones
        written as null (``"null"``), none for ``"keep"``."""
        if not any(c.kind in ("matched_update_all", "not_matched_insert_all") for c in self.clauses):
            return set()
        t = self.table
        cfg = t.config
        if cfg.merge_mode == "PARTIAL_UPDATE" and cfg.column_groups:
            return set()   # a partial-update table: each stream writes its own column groups
        from lakesdk.format.schema import META_FIELDS
        missing = [c for c in t.schema.names if c not in META_FIELDS and c not in source_columns]
        if not missing or self.missing_columns == "keep":
            return set()
        if self.missing_columns == "null":
            return set(missing)
        raise MissingColumnError(
            f"merge into {cfg.name!r}: the source lacks table column(s) {missing} (source columns: "
            f"{', '.join(source_columns)}); when_matched_update_all would keep their stored values and "
            "when_not_matched_insert_all would insert nulls. Add the columns to the source, or pass "
            "missing_columns='null' (write nulls) or missing_columns='keep' (updated rows keep their stored "
            "values, inserted rows get nulls) to t.merge(...), or name the columns in explicit clauses")


def _folder(col: Any, data_type: Any) -> Any:
    """A partition value's folder identity in Spark: '' (and the text
    ``__HIVE_DEFAULT_PARTITION__``) go to the folder of nulls, so they compare as null."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import StringType

    from lakesdk.format.keys import DEFAULT_PARTITION
    if not isinstance(data_type, StringType):
        return col
    return F.when(col.isin("", DEFAULT_PARTITION), F.lit(None).cast("string")).otherwise(col)


def _fix_types(data: Any, t: "Table", source: Any = None) -> Any:
    """Spark widens some types (e.g. a null literal becomes null-typed, every timestamp becomes
    ``timestamp[us, tz=UTC]``): cast back to the table schema, and columns the table does not
    have yet (all of them at the first commit) to the Arrow source's (normalized) types."""
    import pyarrow as pa

    from lakesdk.format.schema import normalize_type
    schema = t.schema
    want = {f.name: f.type for f in schema}
    for f in source or ():
        if f.name not in want:
            want[f.name] = normalize_type(f.type, f.name)
    cols = []
    for name in data.column_names:
        col = data.column(name)
        if name in want and col.type != want[name]:
            try:
                col = col.cast(want[name])
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                pass
        cols.append(col)
    return pa.Table.from_arrays(cols, names=data.column_names)
