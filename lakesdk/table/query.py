"""Queries: snapshot, time travel and incremental reads, as immutable builders."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Literal, Sequence

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds

from lakesdk.commit.schema_store import resolve_schema
from lakesdk.exceptions import InvalidFilterError, TimeTravelError
from lakesdk.format.file_group import FileSlice
from lakesdk.format.instant import Instant, to_instant_time
from lakesdk.format.schema import META_FIELDS, with_meta_fields
from lakesdk.read.bind import Bound, session_time_zone
from lakesdk.read.predicate import Predicate, from_filters, parse_where
from lakesdk.read.view import FileSystemView

if TYPE_CHECKING:
    from lakesdk.table.table import Table

__all__ = ["Query", "ReadPlan"]


def _moment(value: Any) -> str | None:
    if value is None:
        return None
    if hasattr(value, "completed") and hasattr(value, "instant") and not isinstance(value, Instant):
        return value.completed or value.instant  # a WriteResult
    return to_instant_time(value)


@dataclass(frozen=True)
class ReadPlan:
    """What a query will read: file slices, the instants it covers, and the schema."""

    slices: tuple[FileSlice, ...]
    schema: pa.Schema
    instants: tuple[Instant, ...]        # snapshot: the visible commits; incremental: those in range
    commit_times: frozenset[str] | None   # incremental: requested times whose rows to keep
    pruned_partitions: int
    total_partitions: int
    visible: tuple[Instant, ...] = ()     # commits visible to the read
    log_instants: frozenset[str] | None = None  # requested times whose log blocks apply (default: visible)

    @property
    def files(self) -> list[str]:
        return [s.base_path for s in self.slices if s.base_path]

    @property
    def bytes(self) -> int:
        return sum(s.total_size for s in self.slices)

    def __repr__(self) -> str:
        return (f"<ReadPlan {len(self.slices)} file slices, {self.bytes} bytes, "
                f"{self.total_partitions - self.pruned_partitions}/{self.total_partitions} partitions>")


@dataclass(frozen=True)
class Query:
    """A read of a table.  Chained calls return new queries; nothing runs until
    ``to_arrow()``, ``to_pandas()``, ``to_spark()`` or ``count()``."""

    table: "Table"
    kind: Literal["snapshot", "incremental"] = "snapshot"
    columns: tuple[str, ...] | None = None
    predicate: Predicate | None = None
    as_of_time: str | None = None
    start: str | None = None
    end: str | None = None
    meta: bool = False
    read_optimized: bool = False
    start_inclusive: bool = False

    # -- builders -------------------------------------------------------------------------------
    def select(self, *columns: str) -> "Query":
        cols = tuple(columns[0]) if len(columns) == 1 and isinstance(columns[0], (list, tuple)) else tuple(columns)
        return replace(self, columns=cols)

    def where(self, condition: str | Sequence[tuple[str, str, Any]]) -> "Query":
        p = parse_where(condition) if isinstance(condition, str) else from_filters(condition)
        return replace(self, predicate=p if self.predicate is None else self.predicate & p)

    def as_of(self, moment: Any) -> "Query":
        return replace(self, as_of_time=_moment(moment))

    def with_meta_fields(self, meta: bool = True) -> "Query":
        return replace(self, meta=meta)

    def with_read_optimized(self, read_optimized: bool = True) -> "Query":
        """Merge-on-read tables: read base files only (fast, may lag the latest writes)."""
        return replace(self, read_optimized=read_optimized)

    # -- planning --------------------------------------------------------------------------------
    def plan(self) -> ReadPlan:
        t = self.table
        store = t.context.store
        timeline = store.load()
        if self.kind == "incremental":
            return self._plan_incremental(store, timeline)
        if self.as_of_time is not None:
            _check_as_of(t, store, timeline, self.as_of_time)
        view = FileSystemView(t.storage, t.config, store, timeline, as_of=self.as_of_time)
        schema = resolve_schema(store, view.visible, create_schema=t.config.create_schema,
                                base_file=self._any_base(view), history=self._archived_as_of(timeline, self.as_of_time))
        if schema is None:
            schema = pa.schema([])
        bound = self._validate(schema)
        parts = view.partitions()
        pf = bound.prune if bound is not None and t.config.partition_fields else None
        slices = view.latest_slices(pf)
        if self.read_optimized:
            slices = [_base_only(s) for s in slices if s.base_file is not None]
        kept_parts = {s.partition for s in slices}
        return ReadPlan(tuple(slices), schema, tuple(view.visible), None, len(parts) - len(kept_parts), len(parts),
                        tuple(view.visible), view.log_instants)

    def _archived_as_of(self, timeline: Any, moment: str | None) -> list[Any]:
        """Archived write instants a read as of ``moment`` sees (a time-travel read, or an
        incremental read ending there): the schema as of an archived commit comes from its
        metadata in the timeline history, not from a data file."""
        if moment is None or self.table.config.layout_version < 2:
            return []
        from lakesdk.format.instant import WRITE_ACTIONS
        from lakesdk.services.archival import archived_instants
        active = {(i.requested, i.completed_action) for i in timeline}
        return [a for a in archived_instants(self.table.context)
                if a.instant.is_completed and a.instant.completed_action in WRITE_ACTIONS
                and a.instant.requested <= moment
                and (a.instant.requested, a.instant.completed_action) not in active]

    @staticmethod
    def _any_base(view: FileSystemView) -> str | None:
        for s in view.latest_slices():
            if s.base_path:
                return s.base_path
        return None

    def _plan_incremental(self, store: Any, timeline: Any) -> ReadPlan:
        t = self.table
        if not t.config.populate_meta_fields:
            raise TimeTravelError(
                f"Incremental queries are not supported when meta fields are disabled: {t.name!r} has "
                "hoodie.populate.meta.fields=false, so its rows carry no _hoodie_commit_time to select changes by; "
                "read a snapshot or time travel with as_of() instead")
        if self.start is not None and self.end is not None and self.start > self.end:
            raise TimeTravelError(f"incremental range ({self.start}, {self.end}] is empty: start is after end")
        if self.end is not None:
            from lakesdk.services.clean import check_time_travel
            check_time_travel(t.context, self.end, store=store, timeline=timeline)
        in_range = list(timeline.in_range(self.start, self.end, start_inclusive=self.start_inclusive))
        if t.config.layout_version < 2 and in_range:
            _check_hollow(t, timeline, self.start, in_range[-1].requested)
        # commits archived into the timeline history: their rows are still in the latest file
        # slices (upserts keep _hoodie_commit_time of untouched rows), found by a full scan
        archived = self._archived_in_range(timeline)
        end = self.end
        view = FileSystemView(t.storage, t.config, store, timeline, as_of=end)
        schema = resolve_schema(store, view.visible, create_schema=t.config.create_schema,
                                base_file=self._any_base(view),
                                history=self._archived_as_of(timeline, end)) or pa.schema([])
        bound = self._validate(schema)
        touched: set[tuple[str, str]] = set()
        for inst in in_range:
            md = store.commit_metadata(inst)
            for st in md.write_stats:
                if st.fileId:
                    touched.add((st.partitionPath or "", st.fileId))
        pf = bound.prune if bound is not None and t.config.partition_fields else None
        slices = view.latest_slices(pf, file_groups=None if archived else touched)
        parts = view.partitions()
        selected = sorted(archived + in_range, key=lambda i: (i.completed or i.requested, i.requested))
        return ReadPlan(tuple(slices), schema, tuple(selected), frozenset(i.requested for i in selected),
                        len(parts) - len({s.partition for s in slices}), len(parts), tuple(view.visible),
                        view.log_instants)

    def _archived_in_range(self, timeline: Any) -> list[Instant]:
        """Write instants of the timeline history (table version 8+) inside the range."""
        t = self.table
        if t.config.layout_version < 2:
            return []
        from lakesdk.format.timeline import Timeline
        from lakesdk.timeline.history import LSMTimeline
        lsm = LSMTimeline(t.storage, t.config)
        if not lsm.manifest():
            return []
        active = {i.requested for i in timeline.commits}
        history = Timeline(tuple(i for i in lsm.instants() if i.requested not in active), timeline.layout)
        return list(history.in_range(self.start, self.end, start_inclusive=self.start_inclusive))

    def _bound(self, schema: pa.Schema, spark: Any = None) -> Bound | None:
        """The filter bound to the table's schema (literals cast to their columns' types, text
        read as timestamps in Spark's session time zone, UTC without a session)."""
        if self.predicate is None:
            return None
        return self.predicate.bind(with_meta_fields(schema), session_time_zone(spark))

    def _validate(self, schema: pa.Schema) -> Bound | None:
        names = list(META_FIELDS) + schema.names
        bound = self._bound(schema)
        if self.columns:
            missing = [c for c in self.columns if c not in names]
            if missing:
                raise InvalidFilterError(f"unknown column(s) {missing} in columns=; the table has: {', '.join(schema.names)}")
        return bound

    # -- execution --------------------------------------------------------------------------------
    def _out_columns(self, schema: pa.Schema) -> list[str]:
        if self.columns:
            return list(self.columns)
        return (list(META_FIELDS) if self.meta else []) + schema.names

    def _slice_context(self, plan: ReadPlan) -> Any:
        from lakesdk.engine.slice_reader import SliceReadContext
        cfg = self.table.config
        return SliceReadContext(self.table.storage, plan.schema, cfg.ordering_field, cfg.merge_mode,
                                plan.log_instants if plan.log_instants is not None
                                else frozenset(i.requested for i in plan.visible), column_groups=cfg.column_groups,
                                merger=self.table.context.merger())

    def _filter_merged(self, t: pa.Table, plan: ReadPlan, cols: list[str], expr: Any) -> pa.Table:
        if plan.commit_times is not None:
            t = t.filter(pc.field("_hoodie_commit_time").isin(sorted(plan.commit_times)))
        if expr is not None:
            t = t.filter(expr)
        return t.select(cols)

    def to_arrow(self) -> pa.Table:
        """Read into a pyarrow Table (Arrow-native reader on the driver; merge-on-read
        slices are merged by the same merger the writer uses, a thread per slice)."""
        plan = self.plan()
        full = with_meta_fields(plan.schema)
        cols = self._out_columns(plan.schema)
        bound = self._bound(plan.schema)
        expr = bound.to_arrow() if bound is not None else None
        if any(s.log_files for s in plan.slices):
            from concurrent.futures import ThreadPoolExecutor

            from lakesdk._progress import progress as show_progress
            from lakesdk.engine.slice_reader import read_slice
            ctx = self._slice_context(plan)
            with ThreadPoolExecutor(max_workers=8) as pool:
                tables = list(show_progress(pool.map(lambda sl: self._filter_merged(read_slice(ctx, sl), plan, cols, expr),
                                                     plan.slices), total=len(plan.slices), desc="reading file slices",
                                            setting=self.table.options.progress))
            return pa.concat_tables(tables) if tables else full.empty_table().select(cols)
        files = plan.files
        if not files:
            return full.empty_table().select(cols)
        storage = self.table.storage
        fs, paths = _arrow_fs(storage, files)
        if plan.commit_times is not None:
            inc = pc.field("_hoodie_commit_time").isin(sorted(plan.commit_times))
            expr = inc if expr is None else (expr & inc)
        from lakesdk.format.damaged import damaged_files
        with damaged_files(list(paths)):
            dataset = ds.dataset(paths, schema=full, format="parquet", filesystem=fs)
            return dataset.to_table(columns=cols, filter=expr)

    def to_pandas(self) -> Any:
        """Read into a pandas DataFrame."""
        return self.to_arrow().to_pandas()

    def to_spark(self) -> Any:
        """A Spark DataFrame over the planned files (Spark's Parquet reader for local files)."""
        from pyspark.sql import functions as F

        from lakesdk.engine.spark import read_files_spark
        plan = self.plan()
        full = with_meta_fields(plan.schema)
        spark = self.table.spark
        if any(s.log_files for s in plan.slices):
            from lakesdk.engine.spark import read_slices_spark
            df = read_slices_spark(spark, self._slice_context(plan), list(plan.slices), full)
        else:
            df = read_files_spark(spark, self.table.storage, plan.files, full)
        if plan.commit_times is not None:
            df = df.filter(F.col("_hoodie_commit_time").isin(sorted(plan.commit_times)))
        bound = self._bound(plan.schema, spark)
        if bound is not None:
            df = df.filter(bound.to_spark())
        return df.select(*self._out_columns(plan.schema))

    def count(self) -> int:
        return self.to_arrow().num_rows

    def __repr__(self) -> str:
        parts: list[str] = [self.kind]
        if self.as_of_time:
            parts.append(f"as_of={self.as_of_time}")
        if self.kind == "incremental":
            parts.append(f"range={'[' if self.start_inclusive else '('}{self.start or '-inf'}, {self.end or 'latest'}]")
        if self.columns:
            parts.append(f"columns={list(self.columns)}")
        if self.predicate is not None:
            parts.append(f"where={self.predicate.text!r}")
        return f"<Query {self.table.name!r} {' '.join(parts)}>"


def _base_only(s: FileSlice) -> FileSlice:
    return FileSlice(s.partition, s.file_id, s.base_instant, s.base_file, s.base_size)


def _arrow_fs(storage: Any, files: list[str]) -> tuple[Any, list[str]]:
    import pyarrow.fs as pafs
    if storage.is_local:
        return pafs.LocalFileSystem(), [storage.url(f) for f in files]
    handler = pafs.PyFileSystem(pafs.FSSpecHandler(storage.fs))
    return handler, [f"{storage.root}/{f}" for f in files]


#: pending actions that make a time-travel read unrepeatable (a clustering or compaction
#: rewrites rows without changing them, so it does not count)
_INCOMPLETE_WRITES = frozenset({"commit", "deltacommit", "replacecommit"})


def _check_as_of(table: "Table", store: Any, timeline: Any, moment: str) -> None:
    """Hudi's ``TimelineUtils.validateTimestampAsOf``: a time-travel moment must be before
    the first incomplete write (else the read could change once it completes) and not
    before what the last clean retained (see :func:`lakesdk.services.clean.check_time_travel`)."""
    from lakesdk.services.clean import check_time_travel
    first = next((i for i in timeline.pending if i.action in _INCOMPLETE_WRITES), None)
    if first is not None and moment >= first.requested:
        raise TimeTravelError(
            f"Time travel's timestamp '{moment}' must be earlier than the first incomplete commit timestamp "
            f"'{first.requested}' ({first.action} {first.state} on {table.name!r}): the read could change when it "
            "completes. Pick an earlier moment, wait for the write, or roll back a failed one "
            "(table.maintenance.rollback_failed_writes())")
    check_time_travel(table.context, moment, store=store, timeline=timeline)


def _check_hollow(table: "Table", timeline: Any, start: str | None, last: str) -> None:
    """Table version 6 (requested-time ranges): a write still pending inside the range is a
    hole that would be read later with rows of an instant already passed (Hudi's
    ``hoodie.read.timeline.holes.resolution.policy=FAIL``)."""
    hollow = [i for i in timeline.pending if i.action in _INCOMPLETE_WRITES
              and (start is None or i.requested > start) and i.requested < last]
    if hollow:
        raise TimeTravelError(
            f"Found hollow commit: '{hollow[0].requested}' ({hollow[0].action} {hollow[0].state}) on {table.name!r} is "
            f"pending but completed commits up to {last} follow it in the incremental range: end the range before "
            f"{hollow[0].requested}, or wait for that write (or roll it back) and read again")
