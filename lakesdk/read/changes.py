"""Change data capture: what each commit of a range did to each record (Apache Hudi's CDC
queries, RFC-51), as rows of ``op`` (``i``, ``u``, ``d``), ``ts_ms`` (the commit's instant time,
as Hudi names it), ``before`` and ``after`` (the record's data columns, null for an insert's
before and a delete's after).

A commit's changes are found per file group it touched, by comparing the group's records
before the commit with its records after it: a record the commit wrote
(``_hoodie_commit_time`` is the commit's) is an insert when its key was not in the group
before, an update of the record it replaces when it was; a key the group no longer holds is a
delete.  This is exact for both table types (a merge-on-read group's records are its slice
merged, as a read merges it) whether or not the table logged its changes, and it is what
Hudi's reader infers where no CDC log file exists (``HoodieCDCInferenceCase``): a base file's
records all inserted (``BASE_FILE_INSERT``) or all deleted (``BASE_FILE_DELETE``,
``REPLACE_COMMIT``), a log file's records merged into the slice before it (``LOG_FILE``).  A
record a commit left as it was (the merge kept the stored one, which wins on its ordering
value) is no change.  Clustering and compaction move records without changing them: their
commits have no changes, as in Hudi.

The range is that of :meth:`Table.incremental`: commits completed in ``(start, end]``
(requested times on table version 6).  A state before a commit must still be readable: a
range reaching back past what a clean deleted is a :class:`~lakesdk.exceptions.TimeTravelError`,
never a change misreported."""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Iterator

import pyarrow as pa
import pyarrow.compute as pc

from lakesdk.commit.schema_store import resolve_schema
from lakesdk.exceptions import DataFileMissingError, LakeError, TimeTravelError
from lakesdk.format.cdc import changes_schema, diff_records
from lakesdk.format.file_group import FileSlice
from lakesdk.format.instant import Instant
from lakesdk.format.read_plan import ReadPlan
from lakesdk.format.schema import META_FIELDS
from lakesdk.format.timeline import Timeline
from lakesdk.read.plan import check_range
from lakesdk.read.time_travel import check_time_travel
from lakesdk.read.view import FileSystemView
from lakesdk.storage import FileInfo

if TYPE_CHECKING:
    from lakesdk.commit.context import TableContext

__all__ = ["ChangePlan", "ChangeStep", "plan_changes", "iter_changes", "NO_CHANGES"]

#: operations whose commits change no record (Hudi's ``WriteOperationType.yieldChanges`` is false)
NO_CHANGES = frozenset({"CLUSTER", "COMPACT", "LOG_COMPACT", "INDEX", "ALTER_SCHEMA", "BOOTSTRAP_INDEX"})


@dataclass(frozen=True)
class ChangeStep:
    """One commit of the range: the file groups it touched, and the moment before it (the
    time of the commit before it, None when it is the table's first)."""

    instant: Instant
    groups: frozenset[tuple[str, str]]
    before: str | None
    prev_commits: dict[tuple[str, str], str]   # (partition, file id) -> the base instant a base file write replaced
    before_instant: str | None = None          # the requested time of the commit before it (the clean guard's moment)
    cdc_logs: dict[tuple[str, str], tuple[str, ...]] = field(default_factory=dict)   # the CDC logs it wrote, by group


@dataclass(frozen=True)
class ChangePlan:
    """The commits a change query reads, against one load of the timeline and one listing."""

    schema: pa.Schema                     # the data columns, the latest schema (as an incremental read)
    steps: tuple[ChangeStep, ...]
    timeline: Timeline
    files: tuple[FileInfo, ...]


def plan_changes(table: "TableContext", start: str | None, end: str | None, *,
                 start_inclusive: bool = False, use_cdc_logs: bool = True) -> ChangePlan:
    """The commits completed in ``(start, end]`` that change records, and what each touched
    (``use_cdc_logs=False``: infer every change, even where a CDC log holds it)."""
    cfg = table.config
    check_range(table, start, end, "Change")
    store = table.store
    timeline = store.load()
    view = FileSystemView(table.storage, cfg, store, timeline)
    timeline = view.timeline
    commits = list(timeline.commits)
    in_range = list(timeline.in_range(start, end, start_inclusive=start_inclusive))
    store.prefetch(in_range)
    schema = resolve_schema(store, timeline.visible_as_of(None), create_schema=cfg.create_schema,
                            base_file=view.any_base_path()) or pa.schema([])
    time_of = timeline.time_of
    order = sorted(commits, key=lambda i: (time_of(i), i.requested))
    times = [time_of(i) for i in order]
    steps = []
    for inst in sorted(in_range, key=lambda i: (time_of(i), i.requested)):
        md = store.commit_metadata(inst)
        if (md.operation_type or "").upper() in NO_CHANGES or inst.action in ("compaction", "clustering"):
            continue
        groups: set[tuple[str, str]] = set()
        prev: dict[tuple[str, str], str] = {}
        logs: dict[tuple[str, str], tuple[str, ...]] = {}
        for st in md.write_stats:
            if st.fileId:
                key = (st.partitionPath or "", st.fileId)
                groups.add(key)
                if st.cdcStats and use_cdc_logs:
                    logs[key] = logs.get(key, ()) + tuple(st.cdcStats)
                name = st.path.rpartition("/")[2] if st.path else ""
                if st.prevCommit not in (None, "", "null") and name and not name.startswith("."):
                    prev[key] = st.prevCommit
        for part, fids in (md.partition_to_replace_file_ids or {}).items():
            groups.update((part, f) for f in fids)
        # the commit completed last before it (of equal times, the one requested last)
        k = bisect_left(times, time_of(inst))
        prior = order[k - 1] if k else None
        steps.append(ChangeStep(inst, frozenset(groups), times[k - 1] if k else None, prev,
                                prior.requested if prior else None, logs))
    return ChangePlan(schema=schema, steps=tuple(steps), timeline=timeline, files=tuple(view._files))


def iter_changes(table: "TableContext", plan: ChangePlan) -> Iterator[pa.RecordBatch]:
    """The changes of each commit of ``plan`` in commit order, a batch per commit (rows in key order)."""
    out_schema = changes_schema(plan.schema)
    keyed = out_schema.append(pa.field("record_key", pa.string()))
    guarded: set[str] = set()

    def guard(step: ChangeStep) -> None:
        """The state before ``step`` must still be stored (Hudi's time-travel clean guard)."""
        if step.before_instant is not None and step.before_instant not in guarded:
            check_time_travel(table, step.before_instant, store=table.store, timeline=plan.timeline)
            guarded.add(step.before_instant)

    for step in plan.steps:
        pieces = []
        inferred = set(step.groups)
        for key, paths in sorted(step.cdc_logs.items()):
            # the changes the write logged (data_before_after): no file group read, and they
            # answer where a clean removed the state before the commit
            logged = _logged(table, plan, step, paths, guard)
            if logged is not None:
                pieces.append(logged)
                inferred.discard(key)
        if inferred:
            guard(step)
        parts = {p for p, _ in inferred}
        bview = _view(table, plan, step.before, parts) if step.before is not None and inferred else None
        aview = _view(table, plan, plan.timeline.time_of(step.instant), parts) if inferred else None
        before = _latest(bview) if bview is not None else {}
        after = _latest(aview) if aview is not None else {}
        for key in sorted(inferred):
            b, a = before.get(key), after.get(key)
            want = step.prev_commits.get(key)
            if want is not None and (b is None or b.base_instant != want):
                raise TimeTravelError(
                    f"the changes of commit {step.instant.requested} in file group {key[1]} need the file slice of "
                    f"{want} it rewrote, which is no longer stored (cleaned): retain more commits with the cleaner "
                    "for change queries to reach that far back, or start the range later")
            old = _read(table, plan, b, bview)
            new = _read(table, plan, a, aview)
            pieces.append(diff_records(old, new, step.instant.requested, plan.schema))
        rows = pa.concat_tables([p.cast(keyed) for p in pieces]) if pieces else keyed.empty_table()
        if len(pieces) > 1:     # each piece is in key order already
            rows = rows.take(pc.sort_indices(rows, sort_keys=[("record_key", "ascending"), ("op", "ascending")]))
        if rows.num_rows:
            yield rows.drop_columns(["record_key"]).cast(out_schema).combine_chunks().to_batches()[0]


def _logged(table: "TableContext", plan: ChangePlan, step: ChangeStep, paths: tuple[str, ...],
            guard: Callable[[ChangeStep], None]) -> pa.Table | None:
    """The changes a write logged in its CDC log files ``paths`` (one file group), in the
    plan's schema, with their record keys; None when the logs do not hold both images (a
    mode other than ``DATA_BEFORE_AFTER``, or images that do not convert).  A log the commit
    names and storage lacks: TimeTravelError when a clean may have deleted it (the guard),
    else DataFileMissingError."""
    from lakesdk.format.file_naming import LogFile
    from lakesdk.format.keys import HUDI_ENCODING, record_keys
    from lakesdk.format.log_block import read_log_file
    from lakesdk.format.log_framing import BlockType
    tables = []
    for path in sorted(paths, key=lambda p: LogFile.parse(p.rpartition("/")[2]).version):
        try:
            data = table.storage.read(path)
        except FileNotFoundError:
            guard(step)
            raise DataFileMissingError(
                f"the CDC log {path} of commit {step.instant.requested} is missing from storage (deleted outside "
                "lakesdk)", path=path, instant=step.instant.requested) from None
        for block in read_log_file(data):
            if block.block_type != BlockType.CDC_DATA:
                continue
            rec = block.records()
            if rec.column_names != ["op", "ts_ms", "before", "after"]:
                return None
            tables.append(rec)
    if not tables:
        return None
    t = pa.concat_tables(tables)
    try:
        before, after = (_conformed(t.column(c).combine_chunks(), plan.schema) for c in ("before", "after"))
        cfg = table.config
        image = pc.if_else(after.is_valid(), after, before)
        keys = record_keys(pa.table({f: image.field(f) for f in cfg.record_key_fields}), cfg.record_key_fields,
                           cfg.keygen_type, encoding=cfg.key_encoding or HUDI_ENCODING)
    except (pa.ArrowException, LakeError, KeyError, ValueError):
        return None
    return pa.table({"op": t.column("op"), "ts_ms": pa.array([step.instant.requested] * t.num_rows, pa.string()),
                     "before": before, "after": after, "record_key": keys.cast(pa.string())})


def _conformed(images: pa.Array, schema: pa.Schema) -> pa.StructArray:
    """Images logged with the schema of their write, in ``schema`` (a column added since: null)."""
    have = {f.name for f in images.type}
    flat = images.flatten() if isinstance(images, pa.StructArray) else []
    by_name = {f.name: flat[k] for k, f in enumerate(images.type)}
    cols = [by_name[f.name].cast(f.type) if f.name in have else pa.nulls(len(images), f.type) for f in schema]
    return pa.StructArray.from_arrays(cols, fields=list(schema), mask=pc.invert(images.is_valid()))


def _view(table: "TableContext", plan: ChangePlan, moment: str, parts: set[str]) -> FileSystemView:
    """The file-system view of ``parts`` as of ``moment`` (completion clock), from the plan's listing."""
    return FileSystemView(table.storage, table.config, table.store, plan.timeline, as_of=moment, clock="completed",
                          files=plan.files, partitions=parts.__contains__)


def _latest(view: FileSystemView) -> dict[tuple[str, str], FileSlice]:
    return {(g.partition, g.file_id): g.latest for g in view.file_groups if g.latest is not None}


def _read(table: "TableContext", plan: ChangePlan, s: FileSlice | None, view: FileSystemView | None) -> pa.Table:
    """The records of slice ``s`` (merged as a read merges it), meta fields first."""
    from lakesdk.engine.read import read_arrow
    from lakesdk.format.schema import with_meta_fields
    cols = list(META_FIELDS) + plan.schema.names
    if s is None or view is None:
        return with_meta_fields(plan.schema).empty_table().select(cols)
    rp = ReadPlan(slices=(s,), schema=plan.schema, instants=tuple(view.visible), columns=tuple(cols),
                  visible=tuple(view.visible), log_instants=view.log_instants)
    return read_arrow(table, rp, cols, None)
