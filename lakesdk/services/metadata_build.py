"""Building Hudi's metadata table (MDT), or partitions of it, and trimming it, as Apache Hudi
1.x does (``HoodieBackedTableMetadataWriter.initializeFromFilesystem``).

The data table's ``hoodie.properties`` names the MDT partitions that are built
(``hoodie.table.metadata.partitions``: readers trust these only) and those being built
(``hoodie.table.metadata.partitions.inflight``).  A build names its partitions inflight before
it writes a file of them and moves them to the built ones after its last, so that no reader
trusts a partition while it is built, and a crash leaves the partitions named (inflight) for
the next writer, which builds them again:

* a table whose MDT has a built ``files`` partition gets a missing partition (``column_stats``
  turned on, the record index asked for) built alone (:func:`create_metadata_table` with
  ``files`` built): what an earlier build of it left is removed (its folder, its instant), and
  its base files are written by a delta commit of its own, at the first free time of the MDT's
  initial instants (Hudi's ``generateUniqueInstantTime``: ``00000000000000`` plus a millisecond
  offset); the ``files`` partition, and the plans that read it, are untouched;
* a table without one (a new table, an MDT dropped, a build of it that died) gets the whole MDT
  built from a listing at ``00000000000000000``: the partitions it names built go inflight first
  (a reader lists storage meanwhile), the folder is deleted and written again.

Crash points for the crash tests: ``metadata_partitions_inflight`` (the partitions named
inflight, nothing of them written), ``metadata_partition_written`` (their base files written,
their delta commit pending) and ``metadata_partition_committed`` (their delta commit completed,
still named inflight).
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING

from lakesdk import _faults as faults
from lakesdk.commit.table_properties import read_properties, rewrite_properties
from lakesdk.exceptions import MetadataTableDroppedWarning
from lakesdk.format.column_stats import FILE_GROUPS, INDEX_DEFS_PATH, layout_of, stats_group
from lakesdk.format.commit_metadata import CommitMetadata, WriteStat
from lakesdk.format.file_naming import BaseFile, LogFile, is_base_file, is_log_file
from lakesdk.format.instant import Instant
from lakesdk.format.metadata_files import (
    FILES_GROUP,
    INIT_INSTANT,
    INITIAL_PREFIX,
    WRITE_TOKEN,
    FilesChange,
    block_size_of,
    files_records,
    hfile_of,
    mdt_properties,
)
from lakesdk.format.metadata_records import record_schema_json
from lakesdk.format.metadata_table import (
    INFLIGHT_KEY,
    METADATA_DIR,
    PARTITIONS_KEY,
    available_partitions,
    inflight_partitions,
    metadata_partitions,
)
from lakesdk.format.partition_stats import FILE_GROUPS as PSTATS_GROUPS
from lakesdk.format.table_config import TableConfig
from lakesdk.services.metadata_stats import (
    by_file_group,
    stats_columns,
    stats_records_of,
    table_arrow_schema,
    v1_columns_faithful,
    write_index_definition,
)
from lakesdk.services.partition_stats import by_partition_group, keeps_partition_stats, records_of_listing
from lakesdk.services.record_index import bootstrap_records, define_record_index, keeps_record_index

if TYPE_CHECKING:
    from lakesdk.commit.context import TableContext
    from lakesdk.format.timeline import Timeline
    from lakesdk.storage import Storage
    from lakesdk.timeline.store import TimelineStore

__all__ = ["MAINTAINED", "maintained", "keeps_metadata_table", "create_metadata_table"]

#: the MDT partitions lakesdk keeps
MAINTAINED = ("files", "column_stats", "partition_stats")


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


def _latest_commit_schema(store: "TimelineStore", timeline: "Timeline | None" = None) -> str | None:
    """The schema (Avro JSON) the latest commit on ``store``'s timeline (``timeline``, loaded
    when None) that records one records."""
    for inst in reversed((timeline if timeline is not None else store.load()).commits.instants):
        schema = store.commit_metadata(inst).extra_metadata.get("schema")
        if schema:
            return str(schema)
    return None


# -- building the MDT and its partitions ----------------------------------------------------------
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
    """Build what the MDT lacks of the partitions lakesdk keeps (:func:`maintained`) from a
    listing of the files of the completed instants (``pending``, the instant being committed,
    adds its own with its delta commit): the missing partitions alone when ``files`` is built,
    else the whole MDT (see the module doc).  Returns the new config's bytes and config.  The
    caller holds the table lock (with several writers).  ``schema_json``: the schema of the
    pending instant, when it has one."""
    storage = ctx.storage
    if raw is None or cfg is None:
        raw, cfg = read_properties(storage)
    keep = maintained(ctx, cfg, schema_json)
    built = available_partitions(cfg.props)
    whole = "files" not in built
    todo = tuple(keep) if whole else tuple(p for p in keep if p not in built)
    if not todo:
        return raw, cfg
    # named inflight before a file of them is written: no reader trusts them while they are built
    props = dict(cfg.props)
    if whole:
        props[PARTITIONS_KEY] = ""
    props[INFLIGHT_KEY] = ",".join(sorted(set(inflight_partitions(cfg.props)) | set(todo)
                                          | (set(built) if whole else set())))
    if props != cfg.props:
        new = TableConfig(props)
        rewrite_properties(storage, raw, new)
        raw, cfg = new.to_text().encode("utf-8"), new
    faults.crash_point("metadata_partitions_inflight")
    mdt = storage.child(METADATA_DIR)
    if whole:
        storage.delete_dir(METADATA_DIR)
        mprops = mdt_properties(cfg.name, cfg.version)
        if cfg.version >= 9:
            mprops[PARTITIONS_KEY] = ",".join(sorted(keep))
        _write_mdt_properties(mdt, mprops)
        store = _mdt_store(mdt)
        when = INIT_INSTANT
    else:
        store = _mdt_store(mdt)
        when = _cleared_for(mdt, store, todo)
    listing = _listing(ctx, pending)
    groups, columns = _initial_records(ctx, cfg, todo, listing, schema_json)
    _bulk_commit(mdt, store, when, groups, todo, cfg.version)
    if columns:
        write_index_definition(storage, columns, layout_of(cfg.version))
    if "record_index" in todo:
        define_record_index(storage, cfg.version)
    if not whole and cfg.version >= 9:
        mprops = dict(store.config.props)
        mprops[PARTITIONS_KEY] = ",".join(sorted(set(available_partitions(mprops)) | set(todo)))
        _write_mdt_properties(mdt, mprops)
    props = dict(cfg.props)
    props[PARTITIONS_KEY] = ",".join(sorted(set(available_partitions(props)) | set(todo)))
    props[INFLIGHT_KEY] = ",".join(p for p in inflight_partitions(props) if p not in todo and p not in built)
    if columns or ("record_index" in todo and cfg.version >= 9):
        props.setdefault("hoodie.table.index.defs.path", INDEX_DEFS_PATH)
    new = TableConfig(props)
    rewrite_properties(storage, raw, new)
    return new.to_text().encode("utf-8"), new


def _write_mdt_properties(mdt: "Storage", props: dict[str, str]) -> None:
    mdt.write(".hoodie/hoodie.properties", TableConfig(props).to_text().encode("utf-8"))


def _cleared_for(mdt: "Storage", store: "TimelineStore", parts: tuple[str, ...]) -> str:
    """Remove what an earlier build of the MDT partitions ``parts`` left (a pending MDT instant,
    an initial delta commit that wrote only those partitions, their folders) and return the
    time of the delta commit that builds them: the first initial time the MDT's timeline does
    not hold (Hudi's ``generateUniqueInstantTime``)."""
    tl = store.load()
    _remove_failed(mdt, store, tl)
    for inst in tl.completed:
        if inst.requested.startswith(INITIAL_PREFIX) and inst.action == "deltacommit":
            wrote = set(store.commit_metadata(inst).partition_to_write_stats)
            if wrote and wrote <= set(parts):
                _remove_instant(mdt, store, inst)
    for part in parts:
        mdt.delete_dir(part)
    taken = {i.requested for i in store.load().instants} | {INIT_INSTANT}
    return next(t for t in (f"{INITIAL_PREFIX}{n:03d}" for n in range(1000)) if t not in taken)


def _initial_records(ctx: "TableContext", cfg: TableConfig, parts: tuple[str, ...], listing: FilesChange,
                     schema_json: str | None) -> tuple[list[tuple[str, str, dict]], list[str]]:
    """(MDT partition, file group, records) of the MDT partitions ``parts`` built from
    ``listing``, and the columns of the column statistics when it builds them (else empty)."""
    groups: list[tuple[str, str, dict]] = []
    columns: list[str] = []
    if "files" in parts:
        groups.append(("files", FILES_GROUP, files_records(listing, all_partitions=True)))
    if "column_stats" in parts or "partition_stats" in parts:
        schema_json = _latest_commit_schema(ctx.store) or schema_json
        cols, _ = stats_columns(ctx, schema_json)
        arrow = table_arrow_schema(cols, schema_json)
        stats = stats_records_of(ctx, listing, cols, arrow)
        if "column_stats" in parts:
            columns = list(cols)
            grouped = by_file_group(stats)
            groups += [("column_stats", stats_group(i), grouped.get(i, {})) for i in range(FILE_GROUPS)]
        if "partition_stats" in parts:
            pstats = by_partition_group(records_of_listing(ctx, listing, stats, cols, arrow), PSTATS_GROUPS)
            groups += [("partition_stats", group, recs) for group, recs in sorted(pstats.items())]
    if "record_index" in parts:
        groups += [("record_index", group, recs) for group, recs in sorted(bootstrap_records(ctx)[0].items())]
    return groups, columns


def _bulk_commit(mdt: "Storage", store: "TimelineStore", when: str, groups: list[tuple[str, str, dict]],
                 parts: tuple[str, ...], version: int) -> None:
    """The MDT delta commit ``when`` that writes each of ``groups`` as a base HFile (Hudi's
    ``bulkCommit``), the partitions ``parts`` marked as partitions first."""
    for part in parts:
        mdt.write(f"{part}/.hoodie_partition_metadata",
                  f"#partition metadata\ncommitTime={when}\npartitionDepth=1\n".encode())
    requested = Instant("deltacommit", "requested", when)
    store.create(requested)
    inflight = store.transition(requested, "inflight")
    by_part: dict[str, list[WriteStat]] = {}
    schema = record_schema_json(version)
    for part, group, records in groups:
        base = BaseFile(group, WRITE_TOKEN, when, "hfile").name
        data = hfile_of(records, base=True, schema_json=schema, block_size=block_size_of(part))
        mdt.write(f"{part}/{base}", data)
        by_part.setdefault(part, []).append(WriteStat(
            fileId=group, path=f"{part}/{base}", partitionPath=part, prevCommit="null", numWrites=len(records),
            numInserts=len(records), totalWriteBytes=len(data), fileSizeInBytes=len(data)))
    faults.crash_point("metadata_partition_written")
    md = CommitMetadata(partition_to_write_stats=by_part, extra_metadata={"schema": schema},
                        operation_type="BULK_INSERT")
    store.transition(inflight, "completed", md.encode(layout=2), after=store.load().max_time())
    faults.crash_point("metadata_partition_committed")


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
    try:
        mprops = dict(_mdt_store(mdt).config.props)
    except FileNotFoundError:      # a first build killed before it wrote the MDT: nothing of it to trim
        mprops = None
    if mprops is not None:
        mprops[PARTITIONS_KEY] = ",".join(p for p in (mprops.get(PARTITIONS_KEY) or "").split(",")
                                          if p and p not in names)
        _write_mdt_properties(mdt, mprops)
        for name in names:
            mdt.delete_dir(name)
    from lakesdk.services.metadata_table import _outside_lakesdk
    warnings.warn(MetadataTableDroppedWarning(
        f"lakesdk dropped the metadata table partitions {', '.join(names)} of {cfg.name!r} before its {action} "
        "completed, and keeps the files partition: lakesdk does not maintain those indexes yet, and Hudi's readers "
        "would answer from them stale. Apache Hudi builds them again when a writer enables them.",
        table=cfg.name, partitions=tuple(names)), stacklevel=_outside_lakesdk())
    return new.to_text().encode("utf-8"), new
