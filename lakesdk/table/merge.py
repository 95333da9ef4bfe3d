"""The merge builder: ``t.merge(source, on=...)`` with when-matched / when-not-matched clauses.

Semantics follow Delta Lake's MERGE: clauses are tried in the order given and the first
whose condition (``where=``) holds applies to a row; ``s.`` names the source and ``t.`` the
target.  Conditions and the ``updates=`` / ``values=`` expressions are Spark SQL
expressions.  With the local engine and a pandas or Arrow source they are evaluated by
pyarrow (:mod:`lakesdk.table.local_merge`: the same typed tree as filters, with Spark SQL's
semantics) over the join of the source with the target rows of its keys, without Spark; an expression outside what lakesdk evaluates
(docs/api/merge.md) runs the merge on Spark, as the spark engine and Spark sources always
do, over the join of the source with the table's snapshot.  The changed rows are then written as one
commit through the table's write path, which touches only the file groups that hold
matched keys.  As with every write to an event-time table, a row whose ordering value is
lower than the stored one does not replace it (Hudi's MERGE INTO behaves the same), and a
source row without an ordering value is refused before anything is written
(:class:`~lakesdk.exceptions.NullOrderingValueError`, whichever clause would take it).

On a partitioned table, a source row holding the partition fields matches the target rows of
its own partition only (``''`` and null share one partition folder): the table's records are
(partition, key), as Hudi's MERGE INTO tags the source rows through its index.

A source with duplicate keys is an error: which of its rows should update the target
would be ambiguous.  A clause that would change a stored record's key or partition path (an
``updates=`` entry naming such a field, or ``when_matched_update_all`` matching on other
columns with a source row carrying another key) is refused with
:class:`~lakesdk.exceptions.KeyChangeError` before anything is written: the change would
insert a second record and keep the stored one.
"""

from __future__ import annotations

import html
import time
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal

from lakesdk.exceptions import KeyChangeError, MergeConflictError, MissingColumnError, OptionsError, SchemaError
from lakesdk.merge.ordering import event_time_field, event_time_fields, null_ordering_error
from lakesdk.table.renamed import renamed_keyword

if TYPE_CHECKING:
    from lakesdk.commit.results import SchemaChange, WriteResult
    from lakesdk.table.handle import Handle

__all__ = ["MergeBuilder", "MergeResult", "MergeConflictError", "KeyChangeError"]


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
    engine: str = "spark"   # where the clauses were evaluated: "local" (pyarrow) or "spark"

    @property
    def instant(self) -> str | None:
        """The commit's instant time, as :attr:`WriteResult.instant` (None when nothing changed)."""
        return self.write.instant if self.write is not None else None

    @property
    def completed(self) -> str | None:
        """The commit's completion time, as :attr:`WriteResult.completed` (None when nothing changed)."""
        return self.write.completed if self.write is not None else None

    @property
    def schema_change(self) -> "SchemaChange | None":
        """The columns the merge added to (or widened in) the table's schema, as
        :attr:`WriteResult.schema_change` (None when the schema is as it was)."""
        return self.write.schema_change if self.write is not None else None

    @property
    def added_columns(self) -> tuple[str, ...]:
        """The names of the columns the merge added to the table's schema."""
        return self.write.added_columns if self.write is not None else ()

    def __repr__(self) -> str:
        at = f" @ {self.write.instant}" if self.write and self.write.instant else " (no changes)"
        extra = f", skipped={self.skipped}" if self.skipped else ""
        change = f"; {self.schema_change}" if self.schema_change is not None else ""
        return (f"MergeResult({self.source_rows} source rows{at}: updated={self.updated}, inserted={self.inserted}, "
                f"deleted={self.deleted}{extra}, unchanged={self.unchanged}, seconds={self.seconds:.2f}{change})")

    def _repr_html_(self) -> str:
        rows = "".join(f"<tr><td><code>{html.escape(c)}</code></td><td>{n}</td></tr>" for c, n in self.per_clause)
        return f"<div><b>{html.escape(repr(self))}</b><table><tr><th>clause</th><th>rows</th></tr>{rows}</table></div>"


@dataclass(frozen=True)
class MergeBuilder:
    """Immutable: each ``when_*`` returns a new builder; ``execute()`` runs it."""

    table: "Handle"
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

    def when_matched_update(self, updates: dict[str, str] | None = None, where: str | None = None, *,
                            set: dict[str, str] | None = None,  # noqa: A002
                            condition: str | None = None) -> "MergeBuilder":
        """Update the target rows a source row matches (those where ``where`` holds, if given):
        ``updates`` maps each column to set to a Spark SQL expression over ``s.`` (the source)
        and ``t.`` (the target), ``{"fare": "s.fare", "ts": "s.ts"}``.  ``set=`` and
        ``condition=`` are the deprecated names of ``updates=`` and ``where=``."""
        where = renamed_keyword("when_matched_update", "where", where, "condition", condition)
        updates = renamed_keyword("when_matched_update", "updates", updates, "set", set)
        return self._add(_Clause("matched_update", where, _assignments("when_matched_update", "updates", updates)))

    def when_matched_update_all(self, where: str | None = None, *, condition: str | None = None) -> "MergeBuilder":
        """Update the matched target rows (where ``where`` holds) with every column of the source row."""
        where = renamed_keyword("when_matched_update_all", "where", where, "condition", condition)
        return self._add(_Clause("matched_update_all", where))

    def when_matched_delete(self, where: str | None = None, *, condition: str | None = None) -> "MergeBuilder":
        """Delete the matched target rows (where ``where`` holds)."""
        where = renamed_keyword("when_matched_delete", "where", where, "condition", condition)
        return self._add(_Clause("matched_delete", where))

    def when_not_matched_insert(self, values: dict[str, str] | None = None, where: str | None = None, *,
                                condition: str | None = None) -> "MergeBuilder":
        """Insert the source rows no target row matches (where ``where`` holds): ``values``
        maps each column to an expression over ``s.``, ``{"id": "s.id", "fare": "s.fare"}``."""
        where = renamed_keyword("when_not_matched_insert", "where", where, "condition", condition)
        return self._add(_Clause("not_matched_insert", where,
                                 _assignments("when_not_matched_insert", "values", values)))

    def when_not_matched_insert_all(self, where: str | None = None, *,
                                    condition: str | None = None) -> "MergeBuilder":
        """Insert the unmatched source rows (where ``where`` holds) with every column of the source."""
        where = renamed_keyword("when_not_matched_insert_all", "where", where, "condition", condition)
        return self._add(_Clause("not_matched_insert_all", where))

    def when_not_matched_by_source_update(self, updates: dict[str, str] | None = None, where: str | None = None, *,
                                          set: dict[str, str] | None = None,  # noqa: A002
                                          condition: str | None = None) -> "MergeBuilder":
        """Update the target rows no source row matches (where ``where`` holds): ``updates``
        maps each column to an expression over ``t.``.  ``set=`` and ``condition=`` are the
        deprecated names of ``updates=`` and ``where=``."""
        where = renamed_keyword("when_not_matched_by_source_update", "where", where, "condition", condition)
        updates = renamed_keyword("when_not_matched_by_source_update", "updates", updates, "set", set)
        return self._add(_Clause("by_source_update", where,
                                 _assignments("when_not_matched_by_source_update", "updates", updates)))

    def when_not_matched_by_source_delete(self, where: str | None = None, *,
                                          condition: str | None = None) -> "MergeBuilder":
        """Delete the target rows no source row matches (where ``where`` holds)."""
        where = renamed_keyword("when_not_matched_by_source_delete", "where", where, "condition", condition)
        return self._add(_Clause("by_source_delete", where))

    def __repr__(self) -> str:
        body = "".join(f"\n  .{c.label}" for c in self.clauses) or " (no clauses)"
        return f"<MergeBuilder into {self.table.name!r} on {list(self.on)}{body}>"

    # -- execution -------------------------------------------------------------------------------
    def execute(self) -> MergeResult:
        from lakesdk.table.data import to_arrow_or_spark
        t0 = time.perf_counter()
        if not self.clauses:
            raise SchemaError("the merge has no clauses: add when_matched_... or when_not_matched_...")
        t = self.table
        if t.context.global_index()[0]:
            from lakesdk.table.write_input import global_merge_error
            raise global_merge_error(t.name)
        t.context.check_writable("merge")
        from lakesdk.table.write_input import check_partition_paths
        check_partition_paths(t.config, "merge", None)
        arrow, sdf = to_arrow_or_spark(self.source)
        if arrow is not None:
            # the types a write stores (nanoseconds as micros, refusing lost digits; unsigned
            # integers widened, uint64 refused), before Spark sees them
            from lakesdk.format.schema import normalize_input
            arrow = normalize_input(arrow)
        cfg = t.config
        # event-time tables: every source row needs its ordering value, whichever clause takes
        # it (Hudi's MERGE INTO writes the source rows as records, and refuses a null one)
        ordering = event_time_field(cfg.ordering_key, cfg.merge_mode)
        for f in event_time_fields(cfg.ordering_key, cfg.merge_mode):
            if arrow is not None and f in arrow.column_names and arrow.column(f).null_count:
                raise null_ordering_error(f, arrow.column(f).null_count, arrow.num_rows, cfg.name, "merge source")
        if arrow is not None:
            self._lacking_fields(arrow.schema)
        else:
            from lakesdk.engine.spark import spark_arrow_schema
            self._lacking_fields(spark_arrow_schema(sdf))
        guards = self._key_guards(arrow.column_names if arrow is not None else list(sdf.columns))
        m: Any = None
        engine = "spark"
        read_at = t.context.store.load()    # before the target's rows are read: see WriteInput.read_at
        if arrow is not None and t.context.engine() == "local":
            from lakesdk.table.local_merge import LocalMergeUnsupported, local_merge_plan
            try:
                run = local_merge_plan(t, arrow, on=self.on, clauses=self.clauses, lacking_columns=self._lacking_columns,
                                       key_guards=guards)
            except LocalMergeUnsupported as err:
                if not _spark_installed():
                    raise err.cause from None
                run = None   # an expression lakesdk does not evaluate: Spark does
            if run is not None:
                m = run()
                engine = "local"
        if m is None:
            from lakesdk.engine.spark_merge import spark_merge_changes
            from lakesdk.table.query import Query
            m = spark_merge_changes(t.spark, arrow, sdf, on=self.on, clauses=self.clauses, config=cfg, key=t.key,
                                    target_columns=t.schema.names, read_target=lambda: Query(t).to_spark(),
                                    lacking_columns=self._lacking_columns, ordering=ordering, key_guards=guards)
        counts, source_rows, unchanged, acted = m.counts, m.source_rows, m.unchanged, m.acted
        write = None
        if acted:
            from lakesdk.table.write import WriteOperation
            data = m.changes if engine == "local" else m.rows(local=t.context.spark_is_local())
            import pyarrow as pa
            want = _wanted_types(t, arrow.schema if arrow is not None else None)
            if isinstance(data, pa.Table):   # (a Spark Connect DataFrame answers any attribute)
                data = _fix_types(data, want)
            else:   # the changes stay in Spark (Spark runs elsewhere: a cluster, Spark Connect)
                from lakesdk.engine.spark_merge import typed_as
                data = typed_as(data, want)
            # the clauses have applied missing_columns to the table's columns; "null" also lets
            # the write take a struct without some of the table's fields (the Arrow path's
            # cast adds them as nulls)
            write = WriteOperation(t, "merge", data, missing_columns="null" if self.missing_columns == "null" else "error",
                                   read_at=read_at).execute()
        per = tuple((c.label, int(counts.get(i, 0))) for i, c in enumerate(self.clauses))
        # what happened to the table is what the commit did: a selected row whose ordering
        # value is lower than the stored one changes nothing (skipped)
        upd, ins, dele, skipped = (write.updated, write.inserted, write.deleted, write.skipped) if write else (0, 0, 0, 0)
        return MergeResult(source_rows, upd, ins, dele, unchanged, per, write, time.perf_counter() - t0, skipped,
                           engine)

    def _key_guards(self, source_columns: list[str]) -> dict[int, tuple[str, ...]]:
        """The record-key and partition fields each clause that rewrites stored records could
        change, by clause index: the rows it takes are checked (a changed value is a
        :class:`KeyChangeError`).  A clause that sets such a field; ``when_matched_update_all``
        matching on other columns than a key field the source carries, or nulling a partition
        field the source lacks (``missing_columns="null"``).  Deletes and inserts keep keys."""
        cfg = self.table.config
        key, parts = tuple(cfg.record_key_fields), tuple(cfg.partition_fields)
        guards: dict[int, tuple[str, ...]] = {}
        for i, c in enumerate(self.clauses):
            if c.kind in ("matched_update", "by_source_update"):
                cols = [k for k in dict.fromkeys([*key, *parts]) if k in (c.values or {})]
            elif c.kind == "matched_update_all":
                cols = [k for k in key if k in source_columns and k not in self.on]
                lacking = self._lacking_columns(source_columns)
                cols += [p for p in parts if p in lacking and p not in cols]
            else:
                continue
            if cols:
                guards[i] = tuple(cols)
        return guards

    def _lacking_fields(self, source: Any) -> None:
        """Struct fields of the table that the source's structs lack, for the ``*_all``
        clauses: a :class:`MissingColumnError` unless ``missing_columns="null"`` (written as
        null); ``"keep"`` does not reach into structs in a merge (refused too)."""
        if self.missing_columns == "null" or not any(
                c.kind in ("matched_update_all", "not_matched_insert_all") for c in self.clauses):
            return
        cfg = self.table.config
        if cfg.merge_mode == "PARTIAL_UPDATE" and cfg.column_groups is not None:
            return   # a partial-update table: each stream writes its own column groups
        from lakesdk.format.schema import missing_fields
        tschema = self.table.schema
        nested = [p for f in tschema if f.name in source.names
                  for p, _ in missing_fields(f.type, source.field(f.name).type, f.name)]
        if nested:
            keep = (" (missing_columns='keep' keeps stored columns, not struct fields, in a merge: upsert the "
                    "rows with missing_columns='keep' for that)" if self.missing_columns == "keep" else "")
            raise MissingColumnError(
                f"merge into {self.table.config.name!r}: the source's structs lack the table's field(s) {nested}; "
                "when_matched_update_all and when_not_matched_insert_all would write them as null" + keep +
                ". Add the fields to the source, or pass missing_columns='null' to t.merge(...) to write nulls")

    def _lacking_columns(self, source_columns: list[str]) -> set[str]:
        """Table columns the source lacks that an ``*_all`` clause would write: a
        :class:`MissingColumnError` unless ``missing_columns`` opted in; returns the ones
        written as null (``"null"``), none for ``"keep"``."""
        if not any(c.kind in ("matched_update_all", "not_matched_insert_all") for c in self.clauses):
            return set()
        t = self.table
        cfg = t.config
        if cfg.merge_mode == "PARTIAL_UPDATE" and cfg.column_groups is not None:
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


def _assignments(call: str, keyword: str, value: dict[str, str] | None) -> dict[str, str]:
    """A clause's columns and their expressions, given as ``keyword`` (an :class:`OptionsError` without them)."""
    if value is None:
        raise OptionsError(f"{call}() needs {keyword}={{column: expression, ...}}, the columns it writes and "
                           f"their Spark SQL expressions, e.g. {keyword}={{\"fare\": \"s.fare\"}}", key=keyword)
    return dict(value)


def _spark_installed() -> bool:
    import importlib.util
    return importlib.util.find_spec("pyspark") is not None


def _wanted_types(t: "Handle", source: Any = None) -> dict[str, Any]:
    """The Arrow type of each column a merge writes: the table's, and for a column the table
    does not have yet (all of them at the first commit) the Arrow source's (normalized)."""
    from lakesdk.format.schema import normalize_type
    want = {f.name: f.type for f in t.schema}
    for f in source or ():
        if f.name not in want:
            want[f.name] = normalize_type(f.type, f.name)
    return want


def _fix_types(data: Any, want: dict[str, Any]) -> Any:
    """Spark widens some types (e.g. a null literal becomes null-typed, every timestamp becomes
    ``timestamp[us, tz=UTC]``): cast back to the ``want``ed types (:func:`_wanted_types`)."""
    import pyarrow as pa

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
