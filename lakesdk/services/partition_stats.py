"""The ``partition_stats`` partition of the metadata table as lakesdk keeps it (table version 9).

What Apache Hudi 1.1 writes (apache/hudi ``HoodieTableMetadataUtil``: ``convertMetadataToRecords``,
``convertMetadataToPartitionStatRecords``, ``collectAndProcessColumnMetadata``,
``convertFilesToPartitionStatsRecords``; ``HoodieMetadataPayload.createPartitionStatsRecords``;
``MetadataPartitionType.PARTITION_STATS``; ``HoodieMetadataConfig.isPartitionStatsIndexEnabled``):

* the index is kept with ``column_stats`` (``hoodie.metadata.index.column.stats.enable``,
  apache/hudi #14165) on partitioned tables; building it (``convertFilesToPartitionStatsRecords``)
  reads the column ranges of every file of each partition's latest file slices and aggregates
  them per partition and column (:func:`lakesdk.format.partition_stats.aggregate`);
* every write commit (a compaction's and a clustering's too) recomputes the partitions its write
  stats name: the ranges of the files it wrote, plus the ``column_stats`` records (read by the
  key prefix of column and partition) of the files of the partition's latest file slices,
  inflight ones included (``getPartitionLatestFileSlicesIncludingInflight``), written tight;
* a ``DELETE_PARTITION`` writes deleted records for every column of the deleted partitions;
* a clean writes none (the latest slices did not change), a rollback or restore none either
  (Hudi rolls back the MDT delta commits of the instants it undoes).

Hudi's own records are therefore wider than the rows in two cases, which every Hudi-written
table of the test corpus shows: after a clustering or ``insert_overwrite`` the replaced file
groups still count (their slices are the "latest including inflight" while the replace is
inflight; a clustering's partitions count each row twice), and a partition whose latest files
hold no row keeps its previous record (no range to write).  With a compaction pending, Hudi
takes the empty slice the compaction opened as a file group's latest, so its record may miss
the rows of the slice being compacted: lakesdk's reads do not prune by partition statistics
while a compaction is pending.

lakesdk writes the same records (keys, file group, layout, aggregation) computed from the
partition's latest file slices *after* the action, as a reader then sees them: the action's
files added, the files it deletes gone, the file groups it replaces left out, the instants a
rollback or restore undoes left out.  Every action recomputes the partitions whose files it
changed (a clean and a rollback too: lakesdk's MDT keeps the delta commit of a rolled-back
instant, so the rollback's own delta commit must say the partition as it is now).  A file of
those slices without a ``column_stats`` record has its ranges read from the file; a partition
left without files gets deleted records, one whose files hold no row records of no value.
"""

from __future__ import annotations

import posixpath
from typing import TYPE_CHECKING, Any, Iterable, Mapping, cast

import pyarrow as pa

from lakesdk.format.column_stats import (
    V1,
    ColumnRange,
    layout_of,
    partition_id,
    range_of_record,
    v1_value_type,
    value_type_of,
)
from lakesdk.format.file_group import FileSlice
from lakesdk.format.instant import Instant
from lakesdk.format.metadata_table import undone_instants
from lakesdk.format.partition_stats import (
    FILE_GROUPS,
    PARTITION,
    aggregate,
    deleted_partition_record,
    file_group_of,
    partition_record,
    unknown_range,
)
from lakesdk.format.table_config import TableConfig

if TYPE_CHECKING:
    from lakesdk.commit.context import TableContext
    from lakesdk.format.metadata_files import FilesChange
    from lakesdk.read.metadata_table import MetadataTableReader
    from lakesdk.storage import Storage

__all__ = ["keeps_partition_stats", "changed_partitions", "records_after_action", "records_of_listing", "by_partition_group",
           "group_count"]

#: after every instant: the action being committed completes last
_LAST = "9" * 17


def keeps_partition_stats(cfg: TableConfig) -> bool:
    """Whether a table keeps ``partition_stats`` next to ``column_stats``: partitioned tables
    whose base files have column ranges (not Lance)."""
    return bool(cfg.partition_fields) and cfg.base_file_format != "LANCE"


def group_count(mdt: "Storage") -> int:
    """How many file groups the MDT's ``partition_stats`` partition has (Hudi's default: 1)."""
    try:
        ids = {e.name.lstrip(".").split("_")[0] for e in mdt.list(PARTITION) if not e.is_dir
               and e.name.lstrip(".").startswith("partition-stats-")}
    except FileNotFoundError:
        return FILE_GROUPS
    return len({i[:len("partition-stats-0000-0")] for i in ids}) or FILE_GROUPS


def by_partition_group(records: Mapping[str, dict[str, Any]], groups: int) -> dict[str, dict[str, dict[str, Any]]]:
    """The records by the file group their key goes to (every group named, empty ones too)."""
    from lakesdk.format.partition_stats import partition_stats_group
    out: dict[str, dict[str, dict[str, Any]]] = {partition_stats_group(i): {} for i in range(groups)}
    for k, r in records.items():
        out[file_group_of(k, groups)][k] = r
    return out


# -- the latest file slices after an action ---------------------------------------------------------
class _StoreAfter:
    """The table's timeline store, answering the commit metadata of the instant being
    committed (its completed file is not written yet) from its bytes."""

    def __init__(self, store: Any, instant: Instant, data: bytes, layout: int) -> None:
        self._store, self._instant, self._data, self._layout = store, instant, data, layout

    def commit_metadata(self, inst: Instant) -> Any:
        if inst.requested == self._instant.requested and inst.action == self._instant.action:
            from lakesdk.format.commit_metadata import CommitMetadata
            return CommitMetadata.parse(self._data, layout=self._layout, replace=True)
        return self._store.commit_metadata(inst)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


def _replaced_partitions(ctx: "TableContext", inflight: Instant, data: bytes) -> set[str]:
    """The partitions whose file groups a replace (``insert_overwrite``, clustering) replaces:
    their latest slices change although the action may write no file there."""
    if inflight.action not in ("replacecommit", "clustering"):
        return set()
    from lakesdk.format.commit_metadata import CommitMetadata
    md = CommitMetadata.parse(data, layout=ctx.config.layout_version, replace=True)
    return {p for p, fids in (md.partition_to_replace_file_ids or {}).items() if fids}


def _latest_slices(ctx: "TableContext", files: Mapping[str, Mapping[str, int]], timeline: Any,
                   store: Any) -> dict[str, list[FileSlice]]:
    """The latest file slice of every file group of ``files`` (partition -> name -> size)."""
    from lakesdk.read.view import FileSystemView
    from lakesdk.storage import FileInfo
    infos = [FileInfo(posixpath.join(p, n) if p else n, size, False) for p, names in files.items()
             for n, size in names.items()]
    view = FileSystemView(ctx.storage, ctx.config, cast(Any, store), timeline, files=infos)
    out: dict[str, list[FileSlice]] = {p: [] for p in files}
    for g in view.file_groups:
        if g.latest is not None:
            out.setdefault(g.partition, []).append(g.latest)
    return out


def _undone_partitions(ctx: "TableContext", undone: set[str]) -> set[str]:
    """The partitions the instants a rollback undoes changed: a completed one's commit metadata
    names them (written and replaced); a pending one whose MDT delta commit completed before its
    writer died (that delta commit counts once the instant leaves the timeline) names them in
    the ``partition_stats`` records of that delta commit, which the MDT's compaction has not
    folded in (it waits for the data instant)."""
    from lakesdk.read.metadata_table import MetadataTableReader
    out: set[str] = set()
    reader = None
    for inst in ctx.store.load().instants:
        if inst.requested not in undone:
            continue
        if inst.is_completed:
            md = ctx.store.commit_metadata(inst)
            out |= {s.partitionPath or "" for s in md.write_stats}
            out |= {p for p, fids in (md.partition_to_replace_file_ids or {}).items() if fids}
            continue
        reader = reader or MetadataTableReader(ctx.storage, ctx.store.load())
        if inst.requested in reader.delta_commits:
            out |= {str((r.raw or {}).get("ColumnStatsMetadata", {}).get("fileName") or "")
                    for r in reader.written_at(PARTITION, inst.requested)}
    return out


def changed_partitions(ctx: "TableContext", inflight: Instant, data: bytes, change: "FilesChange") -> set[str]:
    """The partitions whose latest file slices the action ``inflight`` changes: those whose
    files ``change`` adds or deletes, those whose file groups a replace replaces (it may write
    no file there), and those the instants a rollback undoes changed (lakesdk's MDT keeps
    their delta commits, whose records say those partitions as they were with them)."""
    out = set(change.added) | set(change.deleted) | _replaced_partitions(ctx, inflight, data)
    if inflight.action == "rollback":
        out |= _undone_partitions(ctx, undone_instants(inflight.action, data))
    return out


def _slices_after(ctx: "TableContext", reader: "MetadataTableReader", inflight: Instant, data: bytes,
                  change: "FilesChange", touched: Iterable[str], timeline: Any = None) -> dict[str, list[FileSlice]]:
    """The latest file slices of the partitions ``touched``, once the action ``inflight``
    (completing with the completed file ``data``, adding and deleting the files of ``change``)
    has completed on the data ``timeline`` (loaded when None)."""
    from lakesdk.format.timeline import Timeline
    files = reader.partition_files(sorted(touched))
    for p in touched:
        cur = files.setdefault(p, {})
        for n in change.deleted.get(p, ()):
            cur.pop(n, None)
        for n, size in change.added.get(p, {}).items():
            cur[n] = max(size, cur.get(n, 0))
    tl = timeline if timeline is not None else ctx.store.load()
    gone = undone_instants(inflight.action, data) | {inflight.requested}
    done = inflight.to("completed", _LAST)
    after = Timeline(tuple(sorted((*(i for i in tl.instants if i.requested not in gone), done),
                                  key=lambda i: (i.requested, i.completed or ""))), tl.layout)
    return _latest_slices(ctx, files, after, _StoreAfter(ctx.store, done, data, ctx.config.layout_version))


# -- the records --------------------------------------------------------------------------------
def _ranges_of(records: Mapping[str, Mapping[str, Any]],
               partitions: Iterable[str]) -> dict[tuple[str, str], dict[str, ColumnRange]]:
    """The ranges ``column_stats`` records (as written) say: (partition, file) -> column -> range."""
    ids = {partition_id(p): p for p in partitions}
    out: dict[tuple[str, str], dict[str, ColumnRange]] = {}
    for k, rec in records.items():
        cs = rec.get("ColumnStatsMetadata") or {}
        r = range_of_record(cs, exact=True)
        part = ids.get(k[12:24])
        if r is not None and part is not None:
            out.setdefault((part, str(cs.get("fileName"))), {})[r.column] = r
    return out


def _has_rows(ranges: Mapping[str, ColumnRange]) -> bool:
    return any(r.value_count != 0 for r in ranges.values())


def _partition_records(ctx: "TableContext", slices: Mapping[str, list[FileSlice]],
                       known: Mapping[tuple[str, str], Mapping[str, ColumnRange]], columns: list[str],
                       schema: pa.Schema | None) -> dict[str, dict[str, Any]]:
    """The records of the partitions of ``slices``: the ranges of their files (``known``, else
    read from the file) aggregated per column.  A partition without a file gets deleted
    records; a file with rows but no statistics of a column makes the column's unknown
    (:func:`~lakesdk.format.partition_stats.unknown_range`), a file without the column counts
    its rows as nulls of it."""
    from lakesdk.services.metadata_stats import file_ranges, layout_ranges, with_absent_columns
    layout = layout_of(ctx.config.version)
    types = {f.name: value_type_of(f.type) for f in schema} if schema is not None else {}
    if layout == V1:
        types = {c: v1_value_type(vt) if vt is not None else None for c, vt in types.items()}
    out: dict[str, dict[str, Any]] = {}
    for part, sls in sorted(slices.items()):
        files: list[Mapping[str, ColumnRange]] = []
        for s in sls:
            for path in ([s.base_path] if s.base_path else []) + s.log_paths:
                got = known.get((part, posixpath.basename(path)))
                # no record of the file (Hudi writes none for a file without rows), or none of
                # a column (the file was written before the column was added: its values are null)
                if got is None or (_has_rows(got) and any(c not in got for c in columns)):
                    ranges = with_absent_columns(file_ranges(ctx.storage, path, columns, schema), columns, schema)
                    got = {**{r.column: r for r in layout_ranges(ranges, layout)}, **(got or {})}
                files.append(got)
        rows = [f for f in files if _has_rows(f)]
        for c in columns:
            vt = types.get(c) or next(((f[c].value_type, f[c].info) for f in rows if c in f), None)
            if not sls or vt is None:
                rec = deleted_partition_record(part, c, layout)
            elif any(c not in f for f in rows):     # a file without ranges (Lance)
                n = sum(max(max(r.value_count for r in f.values()), 0) for f in rows)
                rec = partition_record(part, unknown_range(c, vt[0], vt[1], n), layout)
            else:
                agg = aggregate([f[c] for f in rows], vt)
                rec = partition_record(part, agg if agg is not None else ColumnRange(c, vt[0], vt[1], None, None, 0, 0),
                                       layout)
            out[rec["key"]] = rec
    return out


def records_after_action(ctx: "TableContext", reader: "MetadataTableReader", inflight: Instant, data: bytes,
                         change: "FilesChange", touched: Iterable[str], stats: Mapping[str, Mapping[str, Any]],
                         columns: list[str], schema: pa.Schema | None, *, timeline: Any = None) -> dict[str, dict[str, Any]]:
    """The ``partition_stats`` records of the partitions ``touched`` (:func:`changed_partitions`)
    as of after an action (``change``: the files it adds and deletes; ``stats``: its
    ``column_stats`` records; ``reader``: the MDT before the action's delta commit)."""
    touched = set(touched)
    if not columns or not touched:
        return {}
    slices = _slices_after(ctx, reader, inflight, data, change, touched, timeline)
    parts = list(slices)
    ids = {partition_id(p): p for p in parts}
    known = {(ids[pid], name): dict(ranges) for (pid, name), ranges in reader.column_ranges(columns, parts, exact=True).items()
             if pid in ids}
    for k, v in _ranges_of(stats, parts).items():
        known[k] = v
    return _partition_records(ctx, slices, known, columns, schema)


def records_of_listing(ctx: "TableContext", listing: "FilesChange", stats: Mapping[str, Mapping[str, Any]],
                       columns: list[str], schema: pa.Schema | None) -> dict[str, dict[str, Any]]:
    """The ``partition_stats`` records of every partition of ``listing`` (the files of the
    completed instants, ``stats`` their ``column_stats`` records), built with the MDT."""
    if not columns:
        return {}
    slices = _latest_slices(ctx, listing.added, ctx.store.load(), ctx.store)
    return _partition_records(ctx, {p: s for p, s in slices.items() if s}, _ranges_of(stats, slices), columns,
                              schema)
