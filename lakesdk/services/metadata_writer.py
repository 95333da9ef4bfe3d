"""Keeping Hudi's metadata table (MDT) as Apache Hudi 1.x does: its ``files`` partition.

At the commit point of every action (:meth:`lakesdk.services.transaction.InstantTransaction.commit`,
under the table lock with several writers) :func:`sync_metadata_table` writes the MDT delta
commit of the action's instant time and completes it before the action completes, as the Hudi
tech spec asks of a writer: a reader then never lists from an MDT that misses a completed
commit, and ignores a delta commit whose data instant is still pending (a writer that died in
between; its rollback deletes the files with an MDT delta commit of its own).  What each action
records is in :mod:`lakesdk.format.metadata_files`.

Which MDT a table keeps (``TableOptions(metadata=...)``, Hudi's ``hoodie.metadata.enable``):

* ``True`` (the default, as in Hudi 1.x): the MDT is kept; a table without one gets one at
  its next action (a new table at its first commit), built from a listing of the files of its
  completed instants (:func:`create_metadata_table`, also
  ``table.maintenance.create_metadata_table()``);
* ``None``: an MDT the table has is kept, none is created;
* ``False``: the MDT is dropped (:mod:`lakesdk.services.metadata_table`), as a Hudi writer with
  the MDT disabled drops it.

It keeps ``column_stats`` (:mod:`lakesdk.services.metadata_stats`) and, on partitioned tables,
``partition_stats`` (:mod:`lakesdk.services.partition_stats`): on table version 9 in Hudi 1.1's
layout, on version 8 in Hudi 1.0's (V1), there only while every indexed column has a type
lakesdk writes Hudi 1.0's records of.  The partitions lakesdk does not maintain (``record_index``,
bloom filters, secondary and expression indexes; the statistics of a version 8 table with an
indexed column of another type) are dropped alone
before the first delta commit lakesdk writes, as Hudi drops a disabled index: removed from
``hoodie.table.metadata.partitions``, then their folders deleted.  Tables of version 6 keep
dropping the whole MDT (their MDT's log files follow the version 6 layout).

Crash points for the crash tests: ``metadata_log_written`` (the MDT log file written, its
delta commit pending), ``metadata_committed`` (the MDT delta commit completed, the action not).
"""

from __future__ import annotations

import json
import warnings
from typing import TYPE_CHECKING, Any

from lakesdk import _faults as faults
from lakesdk.commit.table_properties import read_properties, rewrite_properties
from lakesdk.exceptions import MetadataTableDroppedWarning
from lakesdk.format.column_stats import (
    FILE_GROUPS,
    INDEX_DEFS_PATH,
    layout_of,
    layout_of_record,
    range_of_record,
    stats_group,
    stats_record,
)
from lakesdk.format.commit_metadata import CommitMetadata, WriteStat
from lakesdk.format.file_naming import BaseFile, LogFile, is_base_file, is_log_file
from lakesdk.format.instant import WRITE_ACTIONS, Instant
from lakesdk.format.metadata_files import (
    FILES_GROUP,
    INIT_INSTANT,
    WRITE_TOKEN,
    FilesChange,
    block_size_of,
    delete_log_block,
    files_log_block,
    files_records,
    hfile_of,
    mdt_properties,
)
from lakesdk.format.metadata_records import RecordType, record_schema_json
from lakesdk.format.metadata_table import (
    INFLIGHT_KEY,
    METADATA_DIR,
    PARTITIONS_KEY,
    metadata_partitions,
    pending_data_instants,
)
from lakesdk.format.partition_stats import FILE_GROUPS as PSTATS_GROUPS
from lakesdk.format.record_index import group_count as rli_group_count
from lakesdk.format.table_config import TableConfig
from lakesdk.services.metadata_stats import (
    by_file_group,
    stats_columns,
    stats_records_of,
    table_arrow_schema,
    v1_columns_faithful,
    write_index_definition,
)
from lakesdk.services.partition_stats import (
    by_partition_group,
    changed_partitions,
    group_count,
    keeps_partition_stats,
    records_after_action,
    records_of_listing,
)
from lakesdk.services.record_index import (
    bootstrap_records,
    by_group,
    changes_of,
    compacted_entry,
    define_record_index,
    keeps_record_index,
)

if TYPE_CHECKING:
    from lakesdk.commit.context import TableContext
    from lakesdk.format.timeline import Timeline
    from lakesdk.storage import Storage
    from lakesdk.timeline.store import TimelineStore

__all__ = ["sync_metadata_table", "create_metadata_table", "keeps_metadata_table",
           "MAINTAINED"]

#: the MDT partitions lakesdk keeps
MAINTAINED = ("files", "column_stats", "partition_stats")
_SERVICE_WRITES = ("compaction", "clustering", "logcompaction")


def maintained(ctx: "TableContext", cfg: TableConfig, schema_json: str | None = None) -> tuple[str, ...]:
    """The MDT partitions lakesdk keeps for this table: ``files``, and ``column_stats`` unless
    ``TableOptions(metadata_column_stats=False)``, with ``partition_stats`` when the table is
    partitioned (and not of Lance files) unless ``TableOptions(metadata_partition_stats=False)``.
    On a version 8 table the statistics only while every column they index has a type lakesdk
    writes Hudi 1.0's records of (the table's schema ``schema_json``, else its latest commit's)."""
    rli = ("record_index",) if keeps_record_index(cfg) else ()
    if cfg.version >= 8 and ctx.options.metadata_column_stats and (cfg.version >= 9
                                                                    or v1_columns_faithful(ctx, schema_json)):
        pstats = ctx.options.metadata_partition_stats and keeps_partition_stats(cfg)
        return (MAINTAINED if pstats else MAINTAINED[:2]) + rli
    return ("files", *rli)


def keeps_metadata_table(ctx: "TableContext", cfg: TableConfig) -> bool:
    """Whether lakesdk keeps this table's MDT (rather than dropping it) under ``cfg``."""
    named = metadata_partitions(cfg.props)
    enabled = ctx.options.metadata
    return enabled is not False and cfg.version >= 8 and (enabled is True or "files" in named)


def sync_metadata_table(ctx: "TableContext", inflight: Instant, data: bytes, timeline: "Timeline | None" = None) -> bool:
    """Bring the MDT up to ``inflight`` completing with the completed file ``data`` (or drop it,
    see the module doc).  The caller holds the table lock (with several writers) and passes
    the data timeline it read under it (None: loaded when needed).  True when the MDT got the
    instant's delta commit (False: the table keeps no MDT, or the action changed nothing it holds)."""
    from lakesdk.read.metadata_table import MetadataTableReader
    from lakesdk.services.metadata_table import drop_metadata_table, has_metadata_table
    if not keeps_metadata_table(ctx, ctx.config) and not has_metadata_table(ctx):
        return False
    raw, cfg = read_properties(ctx.storage)          # read again: another writer may have changed it
    if not keeps_metadata_table(ctx, cfg):
        drop_metadata_table(ctx, inflight.action)
        return False
    named = metadata_partitions(cfg.props)
    change, schema_json, cleaned = _change_of(ctx, inflight, data)
    keep = maintained(ctx, cfg, schema_json)
    if set(keep) - set(named):
        # a partition lakesdk keeps is missing: the MDT is built again from a listing
        # the files of the instant being committed come with its delta commit (a savepoint has
        # the time of the commit it saves, whose files are in the listing)
        raw, cfg = create_metadata_table(ctx, raw, cfg, schema_json=schema_json,
                                         pending=inflight.requested if _writes_files(inflight.action) else None)
    elif set(named) - set(keep):
        raw, cfg = _drop_partitions(ctx, raw, cfg, sorted(set(named) - set(keep)), inflight.action)
    touched = changed_partitions(ctx, inflight, data, change) if "partition_stats" in keep else None
    # Hudi's writer commits a delta commit for every write and clean, one that wrote or deleted
    # no file included (its block holds the partition list, or the cleaned partitions' records)
    if change or touched or _always_synced(inflight.action):
        mdt = ctx.storage.child(METADATA_DIR)
        store = _mdt_store(mdt)          # one per sync: its properties read once, its commits parsed once
        tl = store.load()                # and its timeline loaded once, again only after a change to it
        if _remove_failed(mdt, store, tl, inflight.requested):
            tl = store.load()
        if _maybe_compact(ctx, mdt, store, tl, ctx.options.metadata_compact_every):
            _clean(mdt, store)
            tl = store.load()
        stats = pstats = None
        if "column_stats" in keep:
            columns, defined = stats_columns(ctx, schema_json)
            if columns and not defined:
                write_index_definition(ctx.storage, columns, layout_of(cfg.version))
            arrow = table_arrow_schema(columns, schema_json)
            stats = stats_records_of(ctx, change, columns, arrow)
            if touched:
                if arrow is None:
                    arrow = table_arrow_schema(columns, _latest_commit_schema(ctx.store))
                # the MDT as it is now (compacted and cleaned above, a failed attempt's delta commit gone)
                data_tl = timeline if timeline is not None else ctx.store.load()
                reader = MetadataTableReader(ctx.storage, data_tl, store=store, mdt_timeline=tl)
                pstats = by_partition_group(records_after_action(ctx, reader, inflight, data, change, touched, stats,
                                                                 columns, arrow, timeline=data_tl), group_count(mdt))
        rindex = None
        if "record_index" in keep:
            data_tl = timeline if timeline is not None else ctx.store.load()
            reader = MetadataTableReader(ctx.storage, data_tl, store=store, mdt_timeline=tl)
            ups, dels = changes_of(ctx, reader, inflight, data, change)
            rindex = by_group(ups, dels, rli_group_count(mdt))
        files = files_records(change, all_partitions=_writes_files(inflight.action), partitions=cleaned)
        _write_delta_commit(mdt, store, inflight.requested, files, stats, pstats, rindex, timeline=tl)
        return True
    return False


# -- what an action changes -------------------------------------------------------------------------
def _writes_files(action: str) -> bool:
    """Whether an action of this kind writes data files (its commit metadata records them)."""
    return action in WRITE_ACTIONS or action in _SERVICE_WRITES


def _always_synced(action: str) -> bool:
    """Whether every completed action of this kind has an MDT delta commit, even one that wrote
    or deleted no file: Hudi's writer commits one for each write and each clean
    (``HoodieBackedTableMetadataWriter.update`` calls ``processAndCommit`` unconditionally);
    a savepoint has none, and lakesdk records a rollback or restore by the files it deleted."""
    return _writes_files(action) or action == "clean"


def _change_of(ctx: "TableContext", inflight: Instant, data: bytes) -> tuple[FilesChange, str | None, tuple[str, ...]]:
    """The files an action changed, the table schema (Avro JSON) its commit metadata records
    when it is a write, and the partitions a clean cleaned (each gets a record, as in Hudi)."""
    from lakesdk.format.clean_metadata import CleanMetadataData
    from lakesdk.format.restore_metadata import RestoreMetadataData
    from lakesdk.format.rollback_metadata import RollbackMetadataData
    action = inflight.action
    change = FilesChange()
    if _writes_files(action):
        md = CommitMetadata.parse(data, layout=ctx.config.layout_version,
                                  replace=action in ("replacecommit", "clustering"))
        # a listed file has a size (Hudi's payload refuses an existing file of size 0)
        written = [(s.partitionPath or "", s.path.rsplit("/", 1)[-1],
                    int(s.fileSizeInBytes or 0) or ctx.storage.size(s.path))
                   for s in md.write_stats if s.path and s.path != "null"]
        # the CDC log files beside the base files (Hudi lists them in ``files`` too)
        written += [(s.partitionPath or "", path.rsplit("/", 1)[-1], int(size))
                    for s in md.write_stats for path, size in (s.cdcStats or {}).items()]
        return FilesChange.of_writes(written), md.extra_metadata.get("schema") or None, ()
    if action == "clean":
        deleted = CleanMetadataData.parse(data).deleted
        for part, names in deleted.items():
            for n in names:
                change.delete(part, n)
        return change, None, tuple(sorted(deleted))
    elif action == "rollback":
        for part, paths in RollbackMetadataData.parse(data).deleted.items():
            for p in paths:
                change.delete(part, p)
    elif action == "restore":
        for records in RestoreMetadataData.parse(data).rollbacks.values():
            for rec in records:
                for part, m in (rec.get("partitionMetadata") or {}).items():
                    for p in m.get("successDeleteFiles") or ():
                        change.delete(part, p)
    return change, None, ()


# -- writing the MDT --------------------------------------------------------------------------------
def _mdt_store(mdt: "Storage") -> "TimelineStore":
    from lakesdk.timeline.store import TimelineStore
    return TimelineStore(mdt, TableConfig.from_bytes(mdt.read(".hoodie/hoodie.properties")))


def _remove_instant(mdt: "Storage", store: "TimelineStore", inst: Instant) -> None:
    """Delete an MDT instant: its completed file first (readers then ignore it), then the files
    it wrote, then its pending files."""
    names = sorted(store.all_states(inst.requested, inst.action), key=lambda n: "_" not in n.split(".")[0])
    done = [n for n in names if "_" in n.split(".")[0]]
    for name in done:
        mdt.delete(f"{store.dir}/{name}")
    for part in _mdt_partition_dirs(mdt):
        for f in mdt.list(part):
            name = f.name
            at = (LogFile.parse(name).instant if is_log_file(name) else BaseFile.parse(name).instant
                  if is_base_file(name) else None)
            if not f.is_dir and at == inst.requested:
                mdt.delete(f"{part}/{name}")
    for name in names:
        if name not in done:
            mdt.delete(f"{store.dir}/{name}")


def _mdt_partition_dirs(mdt: "Storage") -> list[str]:
    return sorted(e.name for e in mdt.list("") if e.is_dir and not e.name.startswith("."))


def _remove_failed(mdt: "Storage", store: "TimelineStore", timeline: "Timeline", instant: str | None = None) -> bool:
    """Delete what a crash inside an earlier MDT delta commit or compaction left (a pending MDT
    instant), and the MDT delta commit of ``instant`` (the data instant at its commit point, so
    still pending) that an earlier attempt of the same commit completed before it died: it is
    written again, as Hudi's writer rolls back the MDT instant it finds and applies it anew.
    Under the table lock nothing else writes the MDT.  Whether it removed anything."""
    removed = False
    for inst in timeline.instants:
        if not inst.is_completed or (inst.requested == instant and inst.action == "deltacommit"):
            _remove_instant(mdt, store, inst)
            removed = True
    return removed


def _schema_of(store: "TimelineStore", timeline: "Timeline | None" = None) -> str:
    """The record schema the MDT writes with: its latest commit's (Hudi 1.0 writes fewer fields
    than Hudi 1.1, and a reader reconciles every block with the base file's schema)."""
    schema = _latest_commit_schema(store, timeline)
    return _with_meta_fields(schema) if schema else record_schema_json()


def _latest_commit_schema(store: "TimelineStore", timeline: "Timeline | None" = None) -> str | None:
    """The schema (Avro JSON) the latest commit on ``store``'s timeline (``timeline``, loaded
    when None) that records one records."""
    for inst in reversed((timeline if timeline is not None else store.load()).commits.instants):
        schema = store.commit_metadata(inst).extra_metadata.get("schema")
        if schema:
            return str(schema)
    return None


_META = ("_hoodie_commit_time", "_hoodie_commit_seqno", "_hoodie_record_key", "_hoodie_partition_path",
         "_hoodie_file_name")


def _with_meta_fields(schema_json: str) -> str:
    """The schema the MDT's files carry: its commits record it without the meta fields, which
    its HFiles and log blocks carry first (always null)."""
    schema = json.loads(schema_json)
    names = {f["name"] for f in schema.get("fields", ())}
    meta = [{"name": n, "type": ["null", "string"], "doc": "", "default": None} for n in _META if n not in names]
    schema["fields"] = meta + list(schema.get("fields", ()))
    return json.dumps(schema, separators=(",", ":"))


def _groups_of(files: dict[str, dict], stats: dict[str, dict] | None,
               pstats: dict[str, dict[str, dict]] | None = None) -> list[tuple[str, str, dict[str, dict]]]:
    """(MDT partition, file group, records) of a delta commit: the ``files`` records, the
    ``column_stats`` records spread over their file groups, the ``partition_stats`` records
    (by file group)."""
    out = [("files", FILES_GROUP, files)] if files else []
    for idx, recs in sorted(by_file_group(stats or {}).items()):
        out.append(("column_stats", stats_group(idx), recs))
    out += [("partition_stats", group, recs) for group, recs in sorted((pstats or {}).items()) if recs]
    return out


def _write_delta_commit(mdt: "Storage", store: "TimelineStore", instant: str, files: dict[str, dict],
                        stats: dict[str, dict] | None = None, pstats: dict[str, dict[str, dict]] | None = None,
                        rindex: dict[str, tuple[dict[str, dict], set[str]]] | None = None, *,
                        timeline: "Timeline") -> None:
    """Write the MDT delta commit of the data instant ``instant`` (``files``: its ``files``
    records; none: no log file, as Hudi completes an upsert of no record); ``timeline``: the
    MDT's as it is now (under the table lock nothing else writes the MDT)."""
    # what a crash left is gone already (sync_metadata_table)
    tl = timeline
    schema = _schema_of(store, tl)
    requested = Instant("deltacommit", "requested", instant)
    store.create(requested)
    inflight = store.transition(requested, "inflight", CommitMetadata(operation_type="UPSERT_PREPPED").encode(layout=2))
    stats_by_part: dict[str, list[WriteStat]] = {}
    groups: list[tuple[str, str, dict[str, dict], set[str]]] = [(p, g, r, set()) for p, g, r in
                                                                  _groups_of(files, stats, pstats)]
    groups += [("record_index", g, r, d) for g, (r, d) in sorted((rindex or {}).items()) if r or d]
    for part, group, records, deleted in groups:
        name = LogFile(group, instant, 1, WRITE_TOKEN).name
        block = (files_log_block(records, instant, schema_json=schema, block_size=block_size_of(part)) if records
                 else b"") + \
            (delete_log_block(deleted, instant, part, schema_json=schema) if deleted else b"")
        mdt.write(f"{part}/{name}", block)
        stats_by_part.setdefault(part, []).append(WriteStat(
            fileId=group, path=f"{part}/{name}", partitionPath=part, prevCommit=instant, numWrites=len(records),
            numUpdateWrites=len(records), totalWriteBytes=len(block), fileSizeInBytes=len(block), logVersion=1,
            logOffset=0, baseFile="", logFiles=[name], numDeletes=len(deleted)))
    faults.crash_point("metadata_log_written")
    md = CommitMetadata(partition_to_write_stats=stats_by_part, extra_metadata={"schema": schema},
                        operation_type="UPSERT_PREPPED")
    # completed after every MDT time (a compaction by a machine whose clock runs ahead included):
    # a log file that completed before the newest base file would be left out of the file slice
    store.transition(inflight, "completed", md.encode(layout=2), after=max(tl.max_time() or "", instant))
    faults.crash_point("metadata_committed")


# -- compacting the MDT -----------------------------------------------------------------------------
def _live(part: str, merged: dict) -> dict[str, Any]:
    """The records a compacted base file holds: deletions applied."""
    out: dict[str, Any] = {}
    entries: dict[tuple, Any] = {}
    for k, r in merged.items():
        if part == "files":
            out[k] = {"key": k, "type": r.type, "filesystemMetadata": {
                n: {"size": e.size, "isDeleted": False} for n, e in sorted((r.files or {}).items()) if not e.deleted}}
        elif r.type == RecordType.RECORD_INDEX and r.raw is not None:
            out[k] = compacted_entry(k, r.raw.get("recordIndexMetadata") or {}, entries)
        elif r.type in (RecordType.COLUMN_STATS, RecordType.PARTITION_STATS) and r.raw is not None:
            cs = r.raw.get("ColumnStatsMetadata") or {}
            rng = range_of_record(cs, exact=True)
            if rng is not None:     # deleted (or of a layout lakesdk does not write): left out
                out[k] = stats_record("", str(cs.get("fileName")), rng, kind=r.type,
                                      tight=bool(cs.get("isTightBound")), key=k, layout=layout_of_record(cs))
    return out


def _maybe_compact(ctx: "TableContext", mdt: "Storage", store: "TimelineStore", tl: "Timeline", every: int) -> bool:
    """Compact the MDT once ``every`` delta commits completed since its last compaction
    (Hudi's ``hoodie.metadata.compact.max.delta.commits``), and only while no delta commit
    belongs to a pending data instant (its records would become visible with the new base
    file): a new base HFile of the merged records of each file group, deletions applied, at a
    compaction instant later than every MDT instant.  Runs before the delta commit of the
    instant being committed, under the table lock."""
    from lakesdk.format.compaction_plan import CompactionOperation, CompactionPlanData
    from lakesdk.format.timeline import InstantClock
    from lakesdk.read.metadata_table import MetadataTableReader
    compactions = [i for i in tl.completed if i.action == "compaction" or i.completed_action == "commit"]
    last = max((i.completed or "" for i in compactions), default="")
    since = [i for i in tl.completed if i.action == "deltacommit" and (i.completed or "") > last]
    if len(since) < every or tl.pending:
        return False
    data_timeline = ctx.store.load()
    pending = pending_data_instants(data_timeline)
    if any(i.requested in pending for i in tl.completed if i.action == "deltacommit"):
        return False
    reader = MetadataTableReader(ctx.storage, data_timeline)
    slices = [sl for part in metadata_partitions(reader.config.props) or ("files",) for sl in reader.slices(part)]
    if not slices:
        return False
    schema = _schema_of(store)
    when = InstantClock.next(after=tl.max_time())
    ops = tuple(CompactionOperation(sl.file_id, sl.partition, sl.base_instant,
                                    sl.base_file.name if sl.base_file else None, tuple(f.name for f in sl.log_files))
                for sl in slices)
    merged = [(sl, _live(sl.partition, reader._slice_records(sl))) for sl in slices]
    requested = Instant("compaction", "requested", when)
    store.create(requested, CompactionPlanData(ops).to_avro())
    inflight = store.transition(requested, "inflight")
    by_part: dict[str, list[WriteStat]] = {}
    for sl, records in merged:
        base = BaseFile(sl.file_id, WRITE_TOKEN, when, "hfile").name
        data = hfile_of(records, base=True, schema_json=schema, block_size=block_size_of(sl.partition))
        mdt.write(f"{sl.partition}/{base}", data)
        by_part.setdefault(sl.partition, []).append(WriteStat(
            fileId=sl.file_id, path=f"{sl.partition}/{base}", partitionPath=sl.partition, prevCommit=sl.base_instant,
            numWrites=len(records), numUpdateWrites=len(records), totalWriteBytes=len(data),
            fileSizeInBytes=len(data), totalLogFilesCompacted=len(sl.log_files)))
    faults.crash_point("metadata_compacted")
    md = CommitMetadata(partition_to_write_stats=by_part, extra_metadata={"schema": schema},
                        operation_type="COMPACT", compacted=True)
    store.transition(inflight, "completed", md.encode(layout=2), after=store.load().max_time())
    return True


def _clean(mdt: "Storage", store: "TimelineStore") -> None:
    """The MDT's own clean, after a compaction: each file group keeps its two latest file
    slices (a reader that loaded the MDT before the latest compaction still finds the slice it
    reads); older base files and the log files of delta commits completed before the
    previous compaction go, then the timeline instants completed before it (the kept files
    reference none of them).  Under the table lock, like every MDT write."""
    tl = store.load()
    compactions = sorted(i.requested for i in tl.completed if i.action == "compaction" or i.completed_action == "commit")
    if len(compactions) < 2:
        return
    keep_from = compactions[-2]
    completion = {i.requested: i.completed or i.requested for i in tl.completed}
    pending = {i.requested for i in tl.pending}
    for part in _mdt_partition_dirs(mdt):
        for f in mdt.list(part):
            name = f.name
            if f.is_dir:
                continue
            if is_base_file(name):
                old = BaseFile.parse(name).instant < keep_from
            elif is_log_file(name):
                at = LogFile.parse(name).instant
                old = at not in pending and completion.get(at, at) < keep_from
            else:
                continue
            if old:
                mdt.delete(f"{part}/{name}")
    for inst in tl.completed:
        if (inst.completed or inst.requested) < keep_from and inst.requested < keep_from:
            # the completed file last: an instant cut short here stays a completed one
            for n in sorted(store.all_states(inst.requested, inst.action), key=lambda n: "_" in n.split(".")[0]):
                mdt.delete(f"{store.dir}/{n}")


# -- creating and trimming the MDT ------------------------------------------------------------------
def _listing(ctx: "TableContext", pending: str | None) -> FilesChange:
    """The data files of the completed instants (and of instants older than the active
    timeline).  A file the timeline records and storage lacks or holds at another size is an
    error: the MDT never lists a damaged file as it is."""
    from lakesdk.read.view import FileSystemView, list_data_files
    timeline = ctx.store.load()
    done = {i.requested for i in timeline.completed}
    first = min((i.requested for i in timeline.instants), default="")
    files = list_data_files(ctx.storage)
    FileSystemView(ctx.storage, ctx.config, ctx.store, timeline, files=files).verify()
    out = []
    for f in files:
        part, _, name = f.path.rpartition("/")
        inst = BaseFile.parse(name).instant if is_base_file(name) else LogFile.parse(name).instant
        if inst != pending and (inst in done or inst < first):
            out.append((part, name, f.size))
    return FilesChange.of_writes(out)


def create_metadata_table(ctx: "TableContext", raw: bytes | None = None, cfg: TableConfig | None = None, *,
                          pending: str | None = None, schema_json: str | None = None) -> tuple[bytes, TableConfig]:
    """Build the MDT from a listing (the files of the completed instants; ``pending``, the
    instant being committed, adds its own with its delta commit), then name it in
    ``hoodie.properties``: the ``files`` partition, and the statistics it keeps (:func:`maintained`;
    their columns named in the index definition).  A folder an interrupted build left goes
    first.  Returns the new config's bytes and config.  The caller holds the table lock (with
    several writers).  ``schema_json``: the schema of the pending instant, when it has one."""
    storage = ctx.storage
    if raw is None or cfg is None:
        raw, cfg = read_properties(storage)
    keep = maintained(ctx, cfg, schema_json)
    storage.delete_dir(METADATA_DIR)
    mdt = storage.child(METADATA_DIR)
    mprops = mdt_properties(cfg.name, cfg.version)
    if cfg.version >= 9:
        mprops["hoodie.table.metadata.partitions"] = ",".join(sorted(keep))
    mdt.write(".hoodie/hoodie.properties", TableConfig(mprops).to_text().encode("utf-8"))
    listing = _listing(ctx, pending)
    stats = None
    pstats: dict[str, dict[str, dict]] | None = None
    if "column_stats" in keep:
        schema_json = _latest_commit_schema(ctx.store) or schema_json
        columns, _ = stats_columns(ctx, schema_json)
        arrow = table_arrow_schema(columns, schema_json)
        stats = stats_records_of(ctx, listing, columns, arrow)
        if "partition_stats" in keep:
            pstats = by_partition_group(records_of_listing(ctx, listing, stats, columns, arrow), PSTATS_GROUPS)
    for part in keep:
        mdt.write(f"{part}/.hoodie_partition_metadata",
                  f"#partition metadata\ncommitTime={INIT_INSTANT}\npartitionDepth=1\n".encode())
    store = _mdt_store(mdt)
    requested = Instant("deltacommit", "requested", INIT_INSTANT)
    store.create(requested)
    inflight = store.transition(requested, "inflight")
    by_part: dict[str, list[WriteStat]] = {}
    groups = [("files", FILES_GROUP, files_records(listing, all_partitions=True))]
    if stats is not None:
        grouped = by_file_group(stats)
        groups += [("column_stats", stats_group(i), grouped.get(i, {})) for i in range(FILE_GROUPS)]
    groups += [("partition_stats", group, recs) for group, recs in sorted((pstats or {}).items())]
    if "record_index" in keep:
        groups += [("record_index", group, recs) for group, recs in sorted(bootstrap_records(ctx)[0].items())]
        define_record_index(storage, cfg.version)
    schema = record_schema_json(cfg.version)
    for part, group, records in groups:
        base = BaseFile(group, WRITE_TOKEN, INIT_INSTANT, "hfile").name
        data = hfile_of(records, base=True, schema_json=schema, block_size=block_size_of(part))
        mdt.write(f"{part}/{base}", data)
        by_part.setdefault(part, []).append(WriteStat(
            fileId=group, path=f"{part}/{base}", partitionPath=part, prevCommit="null", numWrites=len(records),
            numInserts=len(records), totalWriteBytes=len(data), fileSizeInBytes=len(data)))
    md = CommitMetadata(partition_to_write_stats=by_part, extra_metadata={"schema": schema},
                        operation_type="BULK_INSERT")
    store.transition(inflight, "completed", md.encode(layout=2))
    if stats is not None and columns:
        write_index_definition(storage, columns, layout_of(cfg.version))
    props = dict(cfg.props)
    props[PARTITIONS_KEY] = ",".join(sorted(keep))
    props[INFLIGHT_KEY] = ""
    if stats is not None or ("record_index" in keep and cfg.version >= 9):
        props.setdefault("hoodie.table.index.defs.path", INDEX_DEFS_PATH)
    new = TableConfig(props)
    rewrite_properties(storage, raw, new)
    return new.to_text().encode("utf-8"), new


def _drop_partitions(ctx: "TableContext", raw: bytes, cfg: TableConfig, names: list[str],
                     action: str) -> tuple[bytes, TableConfig]:
    """Drop MDT partitions lakesdk does not maintain, as Hudi drops a disabled index: unlisted
    from ``hoodie.properties`` (the data table's, then the MDT's), then their folders deleted."""
    props = dict(cfg.props)
    for key in (PARTITIONS_KEY, INFLIGHT_KEY):
        props[key] = ",".join(p for p in (props.get(key) or "").split(",") if p.strip() and p.strip() not in names)
    new = TableConfig(props)
    rewrite_properties(ctx.storage, raw, new)
    mdt = ctx.storage.child(METADATA_DIR)
    mprops = dict(_mdt_store(mdt).config.props)
    mprops[PARTITIONS_KEY] = ",".join(p for p in (mprops.get(PARTITIONS_KEY) or "").split(",") if p and p not in names)
    mdt.write(".hoodie/hoodie.properties", TableConfig(mprops).to_text().encode("utf-8"))
    for name in names:
        mdt.delete_dir(name)
    from lakesdk.services.metadata_table import _outside_lakesdk
    warnings.warn(MetadataTableDroppedWarning(
        f"lakesdk dropped the metadata table partitions {', '.join(names)} of {cfg.name!r} before its {action} "
        "completed, and keeps the files partition: lakesdk does not maintain those indexes yet, and Hudi's readers "
        "would answer from them stale. Apache Hudi builds them again when a writer enables them.",
        table=cfg.name, partitions=tuple(names)), stacklevel=_outside_lakesdk())
    return new.to_text().encode("utf-8"), new
