"""The ``record_index`` partition of the metadata table as lakesdk keeps it (table versions 8 and 9).

A table keeps it when its ``hoodie.properties`` asks for Hudi's record index
(``hoodie.index.type=RECORD_INDEX``, ``create_table(index="record")``, or
``hoodie.metadata.record.index.enable=true``), or when the MDT names it already (a table Apache
Hudi built one for).  Its records are :mod:`lakesdk.format.record_index`'s; what each action
changes, computed at the action's commit point (:func:`lakesdk.services.metadata_writer.sync_metadata_table`)
and written in the same MDT delta commit as its ``files`` records:

* a write: every key of a file it wrote (a base file's keys, the keys of its log data blocks)
  whose record index entry names another file group gets an entry naming the new one (an
  insert, a key moved to another partition, a key clustering rewrote); a key it removed from a
  file group (the keys of its log delete blocks, the keys of a rewritten base file its new
  version lacks, the keys of the file groups an insert overwrite replaces) and wrote nowhere
  is deleted, when the index names that group.  An update in place writes nothing, as in Hudi;
* a compaction, a log compaction, a clean or a savepoint: nothing (file ids do not change);
* a rollback or a restore: every key the index names in a file group the action deleted
  files of, every key those file groups hold after it, and every key the delta commits of the
  undone instants wrote, gets the entry that is true after it (or is deleted).

Every lookup is a point lookup by key (:meth:`MetadataTableReader.record_locations`).  The
index is built from the latest file slices of the table (:func:`bootstrap_records`) when the
MDT is built, or by ``table.maintenance.create_index("record")`` (:mod:`lakesdk.services.indexes`).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Iterable

import pyarrow as pa

from lakesdk.format.file_naming import BaseFile, LogFile, is_base_file, is_log_file
from lakesdk.format.log_block import BlockType, read_log_file
from lakesdk.format.metadata_table import metadata_partitions
from lakesdk.format.record_index import (
    ENABLE_KEY,
    PARTITION,
    file_group_count,
    file_group_id,
    file_group_indices,
    index_record,
    instant_millis,
)
from lakesdk.format.table_config import INDEX_TYPE_KEY
from lakesdk.merge.ordering import KEY

if TYPE_CHECKING:
    from lakesdk.commit.context import TableContext
    from lakesdk.format.instant import Instant
    from lakesdk.format.metadata_files import FilesChange
    from lakesdk.format.table_config import TableConfig
    from lakesdk.read.metadata_table import MetadataTableReader
    from lakesdk.storage import Storage

__all__ = ["keeps_record_index", "bootstrap_records", "changes_of", "by_group", "Changes"]

#: (upserted records by key, deleted keys)
Changes = tuple[dict[str, Any], set[str]]
_NO_CHANGE_ACTIONS = ("compaction", "logcompaction", "clean", "savepoint")


def keeps_record_index(cfg: "TableConfig") -> bool:
    """Whether the table keeps a record index (see the module doc)."""
    props = cfg.props
    return cfg.version >= 8 and ((props.get(INDEX_TYPE_KEY) or "").strip().upper() == "RECORD_INDEX"
                                 or (props.get(ENABLE_KEY) or "").strip().lower() == "true"
                                 or PARTITION in metadata_partitions(props))


def compacted_entry(key: str, info: dict[str, Any], entries: dict[tuple, Any]) -> Any:
    """What the MDT's compaction writes for a ``HoodieRecordIndexInfo`` of ``key``: the
    :class:`~lakesdk.format.record_index.IndexEntry` of its location when that entry encodes to
    the same fields (shared by the keys of one location: ``entries``), else the record as read."""
    sig = tuple(sorted(info.items()))
    entry = entries.get(sig)
    if sig not in entries:
        from lakesdk.format.metadata_records import decode_file_id
        from lakesdk.format.record_index import IndexEntry
        entry = IndexEntry(info.get("partitionName") or "", decode_file_id(info), info.get("instantTime") or 0)
        entries[sig] = entry = entry if entry.as_record(key)["recordIndexMetadata"] == info else None
    return entry if entry is not None else {"key": key, "type": 5, "recordIndexMetadata": info}


def by_group(records: dict[str, Any], deletes: Iterable[str], n: int) -> dict[str, Changes]:
    """Records and deletions by record index file group (of ``n``)."""
    out: dict[str, Changes] = {}
    keys = list(records)
    for k, i in zip(keys, file_group_indices(keys, n).tolist()):
        out.setdefault(file_group_id(i), ({}, set()))[0][k] = records[k]
    gone = list(deletes)
    for k, i in zip(gone, file_group_indices(gone, n).tolist()):
        out.setdefault(file_group_id(i), ({}, set()))[1].add(k)
    return out


# -- the keys of data files ---------------------------------------------------------------------
def _base_keys(storage: "Storage", path: str) -> list[str]:
    from lakesdk.engine.tasks import read_parquet
    return [str(k) for k in read_parquet(storage, path, [KEY]).column(KEY).to_pylist()]


def _base_key_array(storage: "Storage", path: str) -> pa.Array:
    from lakesdk.engine.tasks import read_parquet
    keys = read_parquet(storage, path, [KEY]).column(KEY).combine_chunks()
    return keys.cast(pa.string()) if keys.type != pa.string() else keys


def _kept_apart(now: pa.Array, before: pa.Array) -> tuple[list[str], list[str]]:
    """(the keys of ``now`` not in ``before``, the keys of ``before`` not in ``now``, sorted):
    what a new version of a base file added and dropped."""
    import pyarrow.compute as pc
    added = now.filter(pc.invert(pc.is_in(now, value_set=before)))
    dropped = before.filter(pc.invert(pc.is_in(before, value_set=now)))
    return [str(k) for k in added.to_pylist()], sorted(str(k) for k in dropped.to_pylist())


def _log_keys(storage: "Storage", path: str, instant: str | None) -> tuple[list[str], list[str]]:
    """(keys written, keys deleted) by the blocks of a data log file (of ``instant`` only, unless None)."""
    written: list[str] = []
    deleted: list[str] = []
    for b in read_log_file(storage.read(path)):
        if instant is not None and b.instant != instant:
            continue
        if b.block_type in (BlockType.AVRO_DATA, BlockType.PARQUET_DATA):
            t = b.records([KEY, "_hoodie_is_deleted"])
            keys = [str(k) for k in t.column(KEY).to_pylist()]
            flags = t.column("_hoodie_is_deleted").to_pylist() if "_hoodie_is_deleted" in t.column_names else None
            for i, k in enumerate(keys):
                (deleted if flags is not None and flags[i] else written).append(k)
        elif b.block_type == BlockType.DELETE:
            deleted += [str(k) for k in b.delete_records().column(KEY).to_pylist()]
    return written, deleted


def _slice_keys(ctx: "TableContext", slices: list[Any], timeline: Any, view: Any) -> list[tuple[Any, list[str]]]:
    """The live keys of each file slice (log blocks merged)."""
    from lakesdk.engine.slice_reader import read_slice
    out = []
    sctx = None
    for sl in slices:
        if not sl.log_files:
            out.append((sl, _base_keys(ctx.storage, sl.base_path)) if sl.base_path else (sl, []))
            continue
        if sctx is None:
            sctx = _slice_context(ctx, timeline, view)
        t = read_slice(sctx, sl, columns=[KEY])
        out.append((sl, [str(k) for k in t.column(KEY).to_pylist()]))
    return out


def _slice_context(ctx: "TableContext", timeline: Any, view: Any) -> Any:
    """What reading the keys of file slices with log files takes."""
    from lakesdk.engine.slice_reader import SliceReadContext
    from lakesdk.format.schema import avro_to_arrow
    schema_json = _schema_json(ctx, timeline)
    arrow = avro_to_arrow(json.loads(schema_json)) if schema_json else pa.schema([])
    arrow = pa.schema([f for f in arrow if not f.name.startswith("_hoodie_")])
    return SliceReadContext.for_table(ctx.storage, ctx.config, arrow, view.log_instants)


def _held_elsewhere(ctx: "TableContext", view: Any, timeline: Any, keys: list[str],
                    apart: set[tuple[str, str]]) -> dict[str, tuple[str, str, str]]:
    """Where the latest slices of file groups other than ``apart`` hold ``keys`` (any
    partition; bloom filters and key ranges first): key -> (partition, file id, base instant)."""
    from lakesdk.engine.key_index import FID, PART, pruned_key_index
    rest = [sl for sl in view.latest_slices() if (sl.partition, sl.file_id) not in apart]
    if not rest or not keys:
        return {}
    sctx = _slice_context(ctx, timeline, view) if any(sl.log_files for sl in rest) else None
    found = pruned_key_index(ctx.storage, rest, {None: pa.array(keys, pa.string())}, slice_ctx=sctx)
    base = {(sl.partition, sl.file_id): sl.base_instant for sl in rest}
    out: dict[str, tuple[str, str, str]] = {}
    for k, p, f in zip(*(found.column(c).to_pylist() for c in (KEY, PART, FID))):
        out.setdefault(str(k), (p, f, base[(p, f)]))
    return out


def _schema_json(ctx: "TableContext", timeline: Any) -> str | None:
    for inst in reversed(timeline.commits.instants):
        schema = ctx.store.commit_metadata(inst).extra_metadata.get("schema")
        if schema:
            return str(schema)
    cs = ctx.config.create_schema
    return json.dumps(cs) if cs else None


def _view(ctx: "TableContext", timeline: Any, *, listed: bool = False) -> Any:
    """The file system view of ``timeline``; ``listed``: of the files on storage (not the MDT's
    listing, which a rollback being committed has not updated yet)."""
    from lakesdk.read.view import FileSystemView, list_data_files
    return FileSystemView(ctx.storage, ctx.config, ctx.store, timeline,
                          files=list_data_files(ctx.storage) if listed else None)


def define_record_index(storage: "Storage", version: int) -> None:
    """Name the record index in the table's index definition (``.hoodie/.index_defs/index.json``,
    other definitions kept) as Hudi 1.1 does on a version 9 table (not partitioned by data
    partition); Hudi 1.0 writes none."""
    from lakesdk.format.column_stats import INDEX_DEFS_PATH
    if version < 9:
        return
    try:
        doc = json.loads(storage.read(INDEX_DEFS_PATH))
    except (FileNotFoundError, ValueError):
        doc = {}
    defs = doc.setdefault("indexDefinitions", {})
    if PARTITION not in defs:
        defs[PARTITION] = {"indexName": PARTITION, "indexType": PARTITION, "indexFunction": "", "sourceFields": [],
                           "indexOptions": {"isPartitioned": "false"}, "version": "V1"}
        storage.write(INDEX_DEFS_PATH, json.dumps(doc, indent=2).encode("utf-8"))


# -- building the index -------------------------------------------------------------------------
def bootstrap_records(ctx: "TableContext", timeline: Any = None) -> tuple[dict[str, dict[str, Any]], int]:
    """The records of a new record index of the table as the completed instants of ``timeline``
    (loaded when None) leave it, by file group, and the number of file groups
    (:func:`~lakesdk.format.record_index.file_group_count` of the key count): each key of each
    latest file slice, with the slice's base instant (Hudi's ``readRecordKeysFromFileSlices``)."""
    tl = timeline if timeline is not None else ctx.store.load()
    view = _view(ctx, tl, listed=True)       # the MDT being built lists nothing yet
    tz = ctx.config.timezone
    records: dict[str, Any] = {}
    for sl, keys in _slice_keys(ctx, view.latest_slices(), tl, view):
        entry = index_record("", sl.partition, sl.file_id, instant_millis(sl.base_instant, tz))
        for k in keys:
            records[k] = entry
    n = file_group_count(len(records))
    groups: dict[str, dict[str, Any]] = {file_group_id(i): {} for i in range(n)}
    keys = list(records)
    for k, i in zip(keys, file_group_indices(keys, n).tolist()):
        groups[file_group_id(i)][k] = records[k]
    return groups, n


# -- what an action changes ---------------------------------------------------------------------
def changes_of(ctx: "TableContext", reader: "MetadataTableReader", inflight: "Instant", data: bytes,
               change: "FilesChange") -> Changes:
    """The record index records and deletions of the action ``inflight`` completing with ``data``
    (see the module doc); ``reader``: the MDT as it is before the action's delta commit."""
    action = inflight.action
    if action in _NO_CHANGE_ACTIONS:
        return {}, set()
    if action in ("rollback", "restore"):
        return _undo_changes(ctx, reader, inflight, data, change)
    return _write_changes(ctx, reader, inflight, data)


def _write_changes(ctx: "TableContext", reader: "MetadataTableReader", inflight: "Instant", data: bytes) -> Changes:
    from lakesdk.format.commit_metadata import CommitMetadata
    instant = inflight.requested
    md = CommitMetadata.parse(data, layout=ctx.config.layout_version,
                              replace=inflight.action in ("replacecommit", "clustering"))
    written: dict[str, tuple[str, str]] = {}
    removed: dict[str, set[tuple[str, str]]] = {}
    listings: dict[str, list[str]] = {}
    for s in md.write_stats:
        if not s.path or s.path == "null":
            continue
        part, fid = s.partitionPath or "", str(s.fileId)
        name = s.path.rsplit("/", 1)[-1]
        if is_log_file(name):
            w, d = _log_keys(ctx.storage, s.path, instant)
        elif is_base_file(name):
            prev = str(s.prevCommit or "")
            old = _previous_base(ctx.storage, listings, part, fid, prev, s.prevBaseFile) \
                if prev and prev != "null" else None
            if old is None:
                w, d = _base_keys(ctx.storage, s.path), []
            else:                       # a key the file group kept is indexed there already
                w, d = _kept_apart(_base_key_array(ctx.storage, s.path), _base_key_array(ctx.storage, old))
        else:
            continue
        for k in w:
            written[k] = (part, fid)
        for k in d:
            removed.setdefault(k, set()).add((part, fid))
    replaced = {(p, f) for p, fids in (md.partition_to_replace_file_ids or {}).items() for f in fids}
    if replaced and inflight.action != "clustering" and (md.operation_type or "").upper() != "CLUSTER":
        for k, rec in reader.records(PARTITION).items():
            loc = rec.location
            if loc is not None and (loc.partition or "", loc.file_id) in replaced:
                removed.setdefault(k, set()).add((loc.partition or "", loc.file_id))
    # an insert or bulk insert does not look its keys up (as in Hudi): each key it wrote is
    # indexed where it wrote it, so only the keys it removed (from a small file it packed) are
    inserts = (md.operation_type or "").upper() in ("INSERT", "BULK_INSERT")
    found = reader.record_locations(set(removed) if inserts else set(written) | set(removed))
    was = {k: (loc.partition or "", loc.file_id) for k, loc in found.items()}
    ms = instant_millis(instant, ctx.config.timezone)
    entries = {loc: index_record("", *loc, ms) for loc in set(written.values())}    # one per file group
    records = {k: entries[loc] for k, loc in written.items() if was.get(k) != loc}
    deletes = {k for k, groups in removed.items() if k not in written and was.get(k) in groups}
    return records, deletes


def _previous_base(storage: "Storage", listings: dict[str, list[str]], part: str, fid: str, prev: str,
                   named: str | None = None) -> str | None:
    """The base file of file group ``fid`` written at ``prev`` (its previous version), if any:
    the one the write stat names (``prevBaseFile``) when it is that file and exists, else found
    in a listing of the partition."""
    if named and is_base_file(named):
        b = BaseFile.parse(named)
        path = f"{part}/{named}" if part else named
        if b.file_id == fid and b.instant == prev and storage.exists(path):
            return path
    if part not in listings:
        try:
            listings[part] = [e.name for e in storage.list(part) if not e.is_dir]
        except FileNotFoundError:
            listings[part] = []
    for n in listings[part]:
        if is_base_file(n):
            b = BaseFile.parse(n)
            if b.file_id == fid and b.instant == prev:
                return f"{part}/{n}" if part else n
    return None


def _undo_changes(ctx: "TableContext", reader: "MetadataTableReader", inflight: "Instant", data: bytes,
                  change: "FilesChange") -> Changes:
    """A rollback's or restore's: the entries true after it of every key it may change."""
    from lakesdk.format.metadata_table import undone_instants
    touched: set[tuple[str, str]] = set()
    for part, names in change.deleted.items():
        for n in names:
            if is_base_file(n):
                touched.add((part, BaseFile.parse(n).file_id))
            elif is_log_file(n):
                touched.add((part, LogFile.parse(n).file_id))
    undone = undone_instants(inflight.action, data)
    affected: set[str] = set()
    for k, rec in reader.records(PARTITION).items():
        loc = rec.location
        if loc is not None and ((loc.partition or ""), loc.file_id) in touched:
            affected.add(k)
    for sl in reader.slices(PARTITION):
        for path in sl.log_paths:
            for b in read_log_file(reader.mdt.read(path)):
                if b.instant in undone:
                    if b.block_type == BlockType.HFILE_DATA:
                        affected |= {kv[0].decode("utf-8") for kv in b.hfile(path)}
                    elif b.block_type == BlockType.DELETE:
                        affected |= {str(k) for k in b.delete_records().column(KEY).to_pylist()}
    from lakesdk.format.timeline import Timeline
    loaded = ctx.store.load()
    # the file groups an undone replacecommit (clustering, overwrite) replaced hold its keys again
    for inst in loaded.completed:
        if inst.requested in undone and inst.completed_action == "replacecommit":
            replaced = ctx.store.commit_metadata(inst).partition_to_replace_file_ids or {}
            touched |= {(part, fid) for part, fids in replaced.items() for fid in fids}
    # the table as it is after the action: the instants it undoes gone from the timeline
    tl = Timeline(tuple(i for i in loaded.instants if i.requested not in undone), loaded.layout)
    view = _view(ctx, tl, listed=True)
    slices = [sl for sl in view.latest_slices(file_groups=touched)] if touched else []
    now: dict[str, tuple[str, str, str]] = {}
    for sl, keys in _slice_keys(ctx, slices, tl, view):
        for k in keys:
            now[k] = (sl.partition, sl.file_id, sl.base_instant)
    affected |= set(now)
    current = reader.record_locations(affected)
    # a key whose entry names a file group the action deleted files of, and that no such group
    # holds after it, may be held by another still (a bulk insert or an insert stored it twice)
    orphans = [k for k in sorted(affected - set(now)) if (cur := current.get(k)) is not None
               and ((cur.partition or ""), cur.file_id) in touched]
    now.update(_held_elsewhere(ctx, view, tl, orphans, touched))
    tz = ctx.config.timezone
    records: dict[str, Any] = {}
    deletes: set[str] = set()
    for k in affected:
        if k in now:
            p, f, at = now[k]
            cur = current.get(k)
            ms = cur.instant_ms if cur is not None and ((cur.partition or ""), cur.file_id) == (p, f) \
                and cur.instant_ms is not None else instant_millis(at, tz)
            records[k] = index_record(k, p, f, ms)
            continue
        cur = current.get(k)
        if cur is not None and ((cur.partition or ""), cur.file_id) not in touched:
            records[k] = index_record(k, cur.partition or "", cur.file_id, cur.instant_ms or 0)
        else:
            deletes.add(k)
    return records, deletes
