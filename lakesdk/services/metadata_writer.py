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
  completed instants (:mod:`lakesdk.services.metadata_build`, also
  ``table.maintenance.create_metadata_table()``; a partition it lacks is built alone);
* ``None``: an MDT the table has is kept, none is created;
* ``False``: the MDT is dropped (:mod:`lakesdk.services.metadata_table`), as a Hudi writer with
  the MDT disabled drops it.

It keeps ``column_stats`` (:mod:`lakesdk.services.metadata_stats`) and, on partitioned tables,
``partition_stats`` (:mod:`lakesdk.services.partition_stats`): on table version 9 in Hudi 1.1's
layout, on version 8 in Hudi 1.0's (V1), there only while every indexed column has a type
lakesdk writes Hudi 1.0's records of, and the record index when the table asks for it
(:mod:`lakesdk.services.record_index`).  The partitions lakesdk does not maintain (bloom
filters, secondary and expression indexes; the statistics of a version 8 table with an
indexed column of another type) are dropped alone before the first delta commit lakesdk
writes, as Hudi drops a disabled index: removed from ``hoodie.table.metadata.partitions``, then
their folders deleted.  Every partition the table names built is compacted every
``TableOptions(metadata_compact_every=...)`` delta commits, then cleaned.  Tables of version 6 keep
dropping the whole MDT (their MDT's log files follow the version 6 layout).

Crash points for the crash tests: ``metadata_log_written`` (the MDT log file written, its
delta commit pending), ``metadata_committed`` (the MDT delta commit completed, the action not).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from lakesdk import _faults as faults
from lakesdk.commit.table_properties import read_properties
from lakesdk.format.column_stats import (
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
    WRITE_TOKEN,
    FilesChange,
    block_size_of,
    delete_log_block,
    files_log_block,
    files_records,
    hfile_of,
)
from lakesdk.format.metadata_records import RecordType, record_schema_json
from lakesdk.format.metadata_table import (
    METADATA_DIR,
    available_partitions,
    metadata_partitions,
    pending_data_instants,
)
from lakesdk.format.record_index import group_count as rli_group_count
from lakesdk.services.metadata_build import (
    MAINTAINED,
    _drop_partitions,
    _latest_commit_schema,
    _mdt_partition_dirs,
    _mdt_store,
    _remove_failed,
    create_metadata_table,
    keeps_metadata_table,
    maintained,
)
from lakesdk.services.metadata_stats import (
    by_file_group,
    stats_columns,
    stats_records_of,
    table_arrow_schema,
    write_index_definition,
)
from lakesdk.services.partition_stats import (
    by_partition_group,
    changed_partitions,
    group_count,
    records_after_action,
)
from lakesdk.services.record_index import by_group, changes_of, compacted_entry

if TYPE_CHECKING:
    from lakesdk.commit.context import TableContext
    from lakesdk.format.timeline import Timeline
    from lakesdk.storage import Storage
    from lakesdk.timeline.store import TimelineStore

__all__ = ["sync_metadata_table", "create_metadata_table", "keeps_metadata_table",
           "MAINTAINED"]

_SERVICE_WRITES = ("compaction", "clustering", "logcompaction")


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
    change, schema_json, cleaned = _change_of(ctx, inflight, data)
    keep = maintained(ctx, cfg, schema_json)
    extra = sorted(set(metadata_partitions(cfg.props)) - set(keep))
    if extra:
        raw, cfg = _drop_partitions(ctx, raw, cfg, extra, inflight.action)
    if set(keep) - set(available_partitions(cfg.props)):
        # a partition lakesdk keeps is missing (or its build died): built from a listing, alone
        # when ``files`` is built, else with the whole MDT; the files of the instant being
        # committed come with its delta commit (a savepoint has the time of the commit it
        # saves, whose files are in the listing)
        raw, cfg = create_metadata_table(ctx, raw, cfg, schema_json=schema_json,
                                         pending=inflight.requested if _writes_files(inflight.action) else None)
    touched = changed_partitions(ctx, inflight, data, change) if "partition_stats" in keep else None
    # Hudi's writer commits a delta commit for every write and clean, one that wrote or deleted
    # no file included (its block holds the partition list, or the cleaned partitions' records)
    # an undone write may have changed the record index without a file to delete (a replacecommit
    # that wrote none deleted the entries of the keys it replaced): their entries are said again
    synced = bool(change or touched or _always_synced(inflight.action))
    if synced or ("record_index" in keep and inflight.action in ("rollback", "restore")):
        mdt = ctx.storage.child(METADATA_DIR)
        store = _mdt_store(mdt)          # one per sync: its properties read once, its commits parsed once
        tl = store.load()                # and its timeline loaded once, again only after a change to it
        if _remove_failed(mdt, store, tl, inflight.requested):
            tl = store.load()
        if _maybe_compact(ctx, mdt, store, tl, ctx.options.metadata_compact_every, available_partitions(cfg.props)):
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
        if not (synced or rindex):
            return False
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
def _schema_of(store: "TimelineStore", timeline: "Timeline | None" = None) -> str:
    """The record schema the MDT writes with: its latest commit's (Hudi 1.0 writes fewer fields
    than Hudi 1.1, and a reader reconciles every block with the base file's schema)."""
    schema = _latest_commit_schema(store, timeline)
    return _with_meta_fields(schema) if schema else record_schema_json()


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


def _maybe_compact(ctx: "TableContext", mdt: "Storage", store: "TimelineStore", tl: "Timeline", every: int,
                   parts: tuple[str, ...]) -> bool:
    """Compact the MDT partitions ``parts`` (every built one the table's ``hoodie.properties``
    names: a version 8 MDT's own config names none) once ``every`` delta commits completed since its last compaction
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
    slices = [sl for part in parts for sl in reader.slices(part)]
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
    slices, none older than the previous compaction (a reader that loaded the MDT before the
    latest compaction still finds the slice it reads; a partition built since by a delta
    commit of its own keeps that base file until a second compaction); older base files and
    the log files of delta commits completed before the kept slices go, then the timeline
    instants completed before every kept slice (the kept files reference none of them).
    Under the table lock, like every MDT write."""
    tl = store.load()
    compactions = sorted(i.requested for i in tl.completed if i.action == "compaction" or i.completed_action == "commit")
    if len(compactions) < 2:
        return
    keep_from = compactions[-2]
    completion = {i.requested: i.completed or i.requested for i in tl.completed}
    pending = {i.requested for i in tl.pending}
    first = min((i.requested for i in tl.instants), default="")
    cut = keep_from
    for part in _mdt_partition_dirs(mdt):
        files = [f for f in mdt.list(part) if not f.is_dir and (is_base_file(f.name) or is_log_file(f.name))]
        bases: dict[str, list[str]] = {}         # the completed base files' instants, by file group
        for f in files:
            if is_base_file(f.name):
                b = BaseFile.parse(f.name)
                if b.instant in completion or b.instant < first:
                    bases.setdefault(b.file_id, []).append(b.instant)
        # the oldest slice each file group keeps (a group without a completed base keeps all)
        floor = {fid: min(keep_from, sorted(bs)[-2] if len(bs) > 1 else bs[0]) for fid, bs in bases.items()}
        cut = min([cut, *floor.values()])
        for f in files:
            name = f.name
            done: str | None
            if is_base_file(name):
                b = BaseFile.parse(name)
                fid, done = b.file_id, b.instant
            else:
                lf = LogFile.parse(name)
                fid, at = lf.file_id, lf.instant
                done = completion.get(at, at) if at not in pending else None
            kept_from = floor.get(fid)
            if kept_from is not None and done is not None and done < kept_from:
                mdt.delete(f"{part}/{name}")
    for inst in tl.completed:
        if (inst.completed or inst.requested) < cut and inst.requested < cut:
            # the completed file last: an instant cut short here stays a completed one
            for n in sorted(store.all_states(inst.requested, inst.action), key=lambda n: "_" in n.split(".")[0]):
                mdt.delete(f"{store.dir}/{n}")
