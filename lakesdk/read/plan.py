"""Planning a read: which file slices a query reads, as of which commits, with which schema.

Each plan is pinned to one load of the timeline: the file-system view, the schema, the
time-travel guard and the incremental range all see the same instants.  The plan
(:class:`~lakesdk.format.read_plan.ReadPlan`, its filter bound once, here) is executed by the engine
(:func:`lakesdk.engine.read.read_arrow`, :func:`lakesdk.engine.spark_read.read_spark`);
:class:`lakesdk.table.query.Query` is the builder calling both."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import pyarrow as pa

from lakesdk.commit.schema_store import resolve_schema
from lakesdk.exceptions import InvalidFilterError, TimeTravelError
from lakesdk.format.file_group import FileSlice
from lakesdk.format.instant import WRITE_ACTIONS, Instant
from lakesdk.format.read_plan import ReadPlan
from lakesdk.format.schema import META_FIELDS, with_meta_fields
from lakesdk.format.timeline import Timeline
from lakesdk.read.bind import Bound, session_time_zone
from lakesdk.read.predicate import Predicate
from lakesdk.read.skipping import prune_partitions, skip_slices
from lakesdk.read.time_travel import check_time_travel
from lakesdk.read.view import FileSystemView
from lakesdk.timeline.history import LSMTimeline

if TYPE_CHECKING:
    from lakesdk.commit.context import TableContext

__all__ = ["ReadRequest", "plan_read", "bind_filter", "check_range", "decided_by_partitions", "diagnose_failed_read"]



@dataclass(frozen=True)
class ReadRequest:
    """What a query asks for (:class:`lakesdk.table.query.Query` without its table)."""

    kind: Literal["snapshot", "incremental"] = "snapshot"
    columns: tuple[str, ...] | None = None
    predicate: Predicate | None = None
    as_of: str | None = None
    start: str | None = None
    end: str | None = None
    read_optimized: bool = False
    start_inclusive: bool = False
    meta: bool = False                 # the meta fields first (when no columns are named)
    time_zone: str | None = None       # of timestamps written as text in the filter (None: Spark's active session's, else UTC)


def bind_filter(predicate: Predicate | None, schema: pa.Schema, time_zone: str | None = None) -> Bound | None:
    """The filter bound to the table's schema (literals cast to their columns' types, text
    read as timestamps in ``time_zone``: None is Spark's active session's, UTC without one)."""
    if predicate is None:
        return None
    return predicate.bind(with_meta_fields(schema), time_zone if time_zone is not None else session_time_zone())


def plan_read(table: "TableContext", request: ReadRequest) -> ReadPlan:
    """The plan of ``request`` against one load of ``table``'s timeline, its filter bound once."""
    store = table.store
    timeline = store.load()
    if request.kind == "incremental":
        return _plan_incremental(table, request, store, timeline)
    if request.as_of is not None:
        _check_as_of(table, store, timeline, request.as_of)
    cfg = table.config
    history = _archived_as_of(table, timeline, request.as_of)
    views: list[FileSystemView] = []

    def whole() -> FileSystemView:
        if not views:
            views.append(FileSystemView(table.storage, cfg, store, timeline, as_of=request.as_of, fresh=True))
        return views[0]

    schema = resolve_schema(store, timeline.visible_as_of(request.as_of), create_schema=cfg.create_schema,
                            base_file=lambda: whole().any_base_path(), history=history) or pa.schema([])
    bound = _validate(request, schema)
    pf = bound.prune if bound is not None and cfg.partition_fields else None
    view = whole() if views or pf is None else _scoped_view(table, store, timeline, request.as_of, pf)
    if view.timeline is not timeline:
        # listed again against a newer timeline (a clean ran meanwhile): planned on that one whole
        timeline, views[:] = view.timeline, []
        history = _archived_as_of(table, timeline, request.as_of)
        view = whole()
        schema = resolve_schema(store, view.visible, create_schema=cfg.create_schema,
                                base_file=lambda: view.any_base_path(), history=history) or pa.schema([])
        bound = _validate(request, schema)
        pf = bound.prune if bound is not None and cfg.partition_fields else None
    # the partitions of the table as of the read: those with file groups (outside a scope: listed)
    parts = view.partitions() if view.scope is None else (
        view.partitions() + [p for p in view.listed_partitions if not view.scope(p)])
    slices = view.latest_slices(pf)
    if request.read_optimized:
        slices = [_base_only(s) for s in slices if s.base_file is not None]
    kept_parts = {s.partition for s in slices}
    slices, by_partition, pruned = prune_partitions(view, slices, bound)
    slices, skipped = skip_slices(view, slices, bound)
    return ReadPlan(slices=tuple(slices), schema=schema, instants=tuple(view.visible), columns=_columns(request, schema),
                    row_filter=bound, pruned_partitions=len(parts) - len(kept_parts), total_partitions=len(parts),
                    visible=tuple(view.visible), log_instants=view.log_instants,
                    skipped_slices=skipped + by_partition, pruned_by_partition_stats=pruned)


def diagnose_failed_read(table: "TableContext", plan: ReadPlan, as_of: str | None) -> None:
    """A read of ``plan`` failed on a file (missing, or damaged bytes): list storage and raise
    the typed error a plan from a listing raises for its file slices (a file missing:
    :class:`~lakesdk.exceptions.DataFileMissingError`, or a ``TimeTravelError`` when a clean
    deleted it; a file of another size than its commit recorded: ``CorruptFileError``).  A plan
    from the metadata table lists no data partition, so this is where a damaged table is told
    apart; returns when the listing shows nothing (the caller re-raises its error)."""
    diagnose_damage(table, as_of, {(s.partition, s.file_id) for s in plan.slices})


def diagnose_damage(table: "TableContext", as_of: str | None = None,
                    groups: set[tuple[str, str]] | None = None) -> None:
    """List storage and raise the typed error of the first file of ``groups`` ((partition,
    file id); None: every file group) that a read as of ``as_of`` needs and storage lacks or
    holds at another size than its commit recorded; returns when there is none."""
    from lakesdk.read.view import list_data_files
    view = FileSystemView(table.storage, table.config, table.store, table.store.load(), as_of=as_of,
                          files=list_data_files(table.storage))
    view.verify(None if groups is None else lambda e: (e.partition, e.file_id) in groups)


#: partition column types whose partition path text is the column's value, exactly
_EXACT_FAMILIES = ("string", "int", "date")


def decided_by_partitions(table: "TableContext", request: ReadRequest, plan: ReadPlan) -> bool:
    """True when every row of the plan's file slices matches the request's filter: it names
    partition columns only, each written as its value into the partition path (the simple and
    complex key generators, columns kept in the data files, types whose text is exact) and
    each kept partition's values make it true (so a count needs no data read).  Unsure is
    False: the rows are read then."""
    cfg = table.config
    fields = cfg.partition_fields
    pred = request.predicate
    if (pred is None or request.kind != "snapshot" or not fields or cfg.keygen_type not in ("SIMPLE", "COMPLEX")
            or cfg.drop_partition_columns or not pred.columns <= set(fields)):
        return False
    from lakesdk.format.keys import parse_partition_path
    from lakesdk.read.bind import _family
    if any(c not in plan.schema.names or _family(plan.schema.field(c).type) not in _EXACT_FAMILIES
           for c in pred.columns):
        return False
    bound = plan.row_filter
    return isinstance(bound, Bound) and all(bound.holds_for(parse_partition_path(p, fields, hive_style=cfg.hive_style, urlencoded=cfg.urlencode))
               for p in {s.partition for s in plan.slices})


def _archived(table: "TableContext") -> list[Any]:
    """The instants of the timeline history (none for table version 6 tables)."""
    if table.config.layout_version < 2:
        return []
    return LSMTimeline(table.storage, table.config).load()


def _archived_as_of(table: "TableContext", timeline: Any, moment: str | None) -> list[Any]:
    """Archived write instants a time-travel read as of ``moment`` sees: the schema as of an
    archived commit comes from its metadata in the timeline history, not from a data file."""
    if moment is None or table.config.layout_version < 2:
        return []
    active = {(i.requested, i.completed_action) for i in timeline}
    return [a for a in _archived(table)
            if a.instant.is_completed and a.instant.completed_action in WRITE_ACTIONS
            and a.instant.requested <= moment
            and (a.instant.requested, a.instant.completed_action) not in active]


def _scoped_view(table: "TableContext", store: Any, timeline: Timeline, as_of: str | None,
                 prune: Any) -> FileSystemView:
    """The view of the partitions whose values ``prune`` keeps only: with the metadata table
    their ``files`` records alone are read, and only their write stats checked."""
    from lakesdk.format.keys import parse_partition_path
    cfg = table.config

    def keep(partition: str) -> bool:
        return bool(prune(parse_partition_path(partition, cfg.partition_fields, hive_style=cfg.hive_style,
                                               urlencoded=cfg.urlencode)))
    return FileSystemView(table.storage, cfg, store, timeline, as_of=as_of, partitions=keep, fresh=True)


def _plan_incremental(table: "TableContext", request: ReadRequest, store: Any, timeline: Any) -> ReadPlan:
    cfg = table.config
    start, end = request.start, request.end
    check_range(table, start, end, "Incremental")
    if end is not None:
        check_time_travel(table, end, store=store, timeline=timeline)
    in_range = list(timeline.in_range(start, end, start_inclusive=request.start_inclusive))
    if cfg.layout_version < 2 and in_range:
        _check_hollow(table, timeline, start, in_range[-1].requested)
    # commits archived into the timeline history: their rows are still in the latest file
    # slices (upserts keep _hoodie_commit_time of untouched rows), found by a full scan
    archived = _archived_in_range(table, request, timeline)
    view = FileSystemView(table.storage, cfg, store, timeline, as_of=end, clock="completed", fresh=True)
    # the rows are in their state as of ``end``: the commits completed by then (a write requested
    # before ``end`` that completed after it is not read: its files would hide the versions the
    # range changed of the rows it rewrote), typed by the latest schema: Apache Hudi's
    # incremental relations read with the latest table schema whatever the range (a column
    # added later reads null, a column whose type changed since reads in its latest type)
    schema = resolve_schema(store, view.timeline.visible_as_of(None), create_schema=cfg.create_schema,
                            base_file=view.any_base_path()) or pa.schema([])
    bound = _validate(request, schema)
    touched: set[tuple[str, str]] = set()
    store.prefetch(in_range)
    for inst in in_range:
        md = store.commit_metadata(inst)
        for st in md.write_stats:
            if st.fileId:
                touched.add((st.partitionPath or "", st.fileId))
    pf = bound.prune if bound is not None and cfg.partition_fields else None
    slices = view.latest_slices(pf, file_groups=None if archived else touched)
    kept_parts = {s.partition for s in slices}
    slices, skipped = skip_slices(view, slices, bound)
    parts = view.partitions()
    selected = sorted(archived + in_range, key=lambda i: (i.completed or i.requested, i.requested))
    return ReadPlan(slices=tuple(slices), schema=schema, instants=tuple(selected), columns=_columns(request, schema),
                    row_filter=bound, commit_times=frozenset(i.requested for i in selected),
                    pruned_partitions=len(parts) - len(kept_parts), total_partitions=len(parts),
                    visible=tuple(view.visible), log_instants=view.log_instants, skipped_slices=skipped)


def check_range(table: "TableContext", start: str | None, end: str | None, kind: str) -> None:
    """An incremental or change query (``kind``: ``"Incremental"``, ``"Change"``) needs the rows'
    commit times, and a range whose start is not after its end."""
    if not table.config.populate_meta_fields:
        raise TimeTravelError(
            f"{kind} queries are not supported when meta fields are disabled: {table.name!r} has "
            "hoodie.populate.meta.fields=false, so its rows carry no _hoodie_commit_time to select changes by; "
            "read a snapshot or time travel with as_of() instead")
    if start is not None and end is not None and start > end:
        raise TimeTravelError(f"{kind.lower()} range ({start}, {end}] is empty: start is after end")


def _archived_in_range(table: "TableContext", request: ReadRequest, timeline: Any) -> list[Instant]:
    """Write instants of the timeline history (table version 8+) inside the range."""
    if table.config.layout_version < 2:
        return []
    lsm = LSMTimeline(table.storage, table.config)
    if not lsm.manifest():
        return []
    active = {i.requested for i in timeline.commits}
    history = Timeline(tuple(i for i in lsm.instants() if i.requested not in active), timeline.layout)
    return list(history.in_range(request.start, request.end, start_inclusive=request.start_inclusive))


def _columns(request: ReadRequest, schema: pa.Schema) -> tuple[str, ...]:
    """The columns a read returns: those named, else the table's (the meta fields first when asked)."""
    if request.columns:
        return tuple(request.columns)
    return (tuple(META_FIELDS) if request.meta else ()) + tuple(schema.names)


def _validate(request: ReadRequest, schema: pa.Schema) -> Bound | None:
    names = list(META_FIELDS) + schema.names
    bound = bind_filter(request.predicate, schema, request.time_zone)
    if request.columns:
        missing = [c for c in request.columns if c not in names]
        if missing:
            raise InvalidFilterError(f"unknown column(s) {missing} in columns=; the table has: {', '.join(schema.names)}")
    return bound


def _base_only(s: FileSlice) -> FileSlice:
    return FileSlice(s.partition, s.file_id, s.base_instant, s.base_file, s.base_size)


#: pending actions that make a time-travel read unrepeatable (a clustering or compaction
#: rewrites rows without changing them, so it does not count)
_INCOMPLETE_WRITES = frozenset({"commit", "deltacommit", "replacecommit"})


def _check_as_of(table: "TableContext", store: Any, timeline: Any, moment: str) -> None:
    """Hudi's ``TimelineUtils.validateTimestampAsOf``: a time-travel moment must be before
    the first incomplete write (else the read could change once it completes) and not
    before what the last clean retained (:func:`lakesdk.read.time_travel.check_time_travel`)."""
    first = next((i for i in timeline.pending if i.action in _INCOMPLETE_WRITES), None)
    if first is not None and moment >= first.requested:
        raise TimeTravelError(
            f"Time travel's timestamp '{moment}' must be earlier than the first incomplete commit timestamp "
            f"'{first.requested}' ({first.action} {first.state} on {table.name!r}): the read could change when it "
            "completes. Pick an earlier moment, wait for the write, or roll back a failed one "
            "(table.maintenance.rollback_failed_writes())")
    check_time_travel(table, moment, store=store, timeline=timeline)


def _check_hollow(table: "TableContext", timeline: Any, start: str | None, last: str) -> None:
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
