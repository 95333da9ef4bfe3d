"""Listing a table's data files: from its metadata table's ``files`` partition, or from storage."""

from __future__ import annotations

import posixpath
import weakref
from typing import TYPE_CHECKING, Any, Callable, NamedTuple

from lakesdk.format.file_naming import BaseFile, LogFile, is_base_file, is_log_file
from lakesdk.format.table_config import TableConfig
from lakesdk.format.timeline import Timeline
from lakesdk.storage import FileInfo, Storage

if TYPE_CHECKING:
    from lakesdk.format.commit_metadata import CommitMetadata
    from lakesdk.read.metadata_table import MetadataTableReader

__all__ = ["list_data_files", "listed_files"]


def _skip(path: str) -> bool:
    parts = path.split("/")
    return parts[0] in (".hoodie", "__MACOSX") or any(p.startswith(".") for p in parts[:-1]) or parts[-1].endswith(".crc")


def listed_files(storage: Storage, config: TableConfig, timeline: Timeline) -> list[FileInfo]:
    """The base and log files of a table's completed instants as its metadata table lists them
    (its ``files`` partition: no listing of the data partitions), or, for a table without one,
    :func:`list_data_files`."""
    return _listed(storage, config, timeline).infos()


#: files listed by partition: (partition path, file name -> size), as the MDT lists them
_ByPartition = list[tuple[str, dict[str, int]]]


class _Listing(NamedTuple):
    files: list[FileInfo] | None               # the files listed (None: from ``by_partition``)
    metadata: "MetadataTableReader | None"     # the MDT reader it listed with (None: storage)
    named: tuple[str, ...]                     # the MDT partitions ``hoodie.properties`` named then
    partitions: list[str]                      # every partition listed, in the scope or not
    by_partition: _ByPartition | None = None   # the MDT's listing as it is (None: ``files``)
    after: Any = None                          # what the caller's ``then`` returned

    def infos(self) -> list[FileInfo]:
        return self.files if self.files is not None else _infos(self.by_partition or [])


def _infos(by_partition: _ByPartition) -> list[FileInfo]:
    return [FileInfo(f"{part}/{name}" if part else name, size, False)
            for part, names in by_partition for name, size in names.items()]


def _partition_of(path: str) -> str:
    return path.rpartition("/")[0]


def _from_storage(storage: Storage, scope: Callable[[str], bool] | None,
                  then: Callable[[], Any] | None = None) -> _Listing:
    files = list_data_files(storage)
    parts = sorted({_partition_of(f.path) for f in files})
    if scope is not None:
        kept = {p for p in parts if scope(p)}
        files = [f for f in files if _partition_of(f.path) in kept]
    return _Listing(files, None, (), parts, after=then() if then is not None else None)


def _listed(storage: Storage, config: TableConfig, timeline: Timeline,
            scope: Callable[[str], bool] | None = None, then: Callable[[], Any] | None = None) -> _Listing:
    """:func:`listed_files` (of the partitions ``scope`` keeps), with what it listed from.  A
    ``hoodie.properties`` read earlier may name a metadata table another writer has dropped
    since: read again after the MDT, it then no longer names one.  With the MDT, a scope reads
    the ``files`` records of the partitions it keeps only (seeks by key).  ``then`` is called
    once the files are listed (at the same time as that second read), its result kept as
    :attr:`_Listing.after`: a caller's check that must follow the listing costs no round trip
    of its own."""
    from lakesdk.commit.table_properties import read_properties
    from lakesdk.format.metadata_table import METADATA_DIR, available_partitions
    from lakesdk.storage.overlap import at_once
    if config.is_metadata_table or config.version < 8:
        return _from_storage(storage, scope, then=then)
    if "files" not in available_partitions(config.props):
        # a handle's config read before another writer (or this one) built the MDT
        if not storage.exists(METADATA_DIR) or "files" not in available_partitions(read_properties(storage)[1].props):
            return _from_storage(storage, scope, then=then)
    from lakesdk.read.metadata_table import MetadataTableReader
    for attempt in range(3):
        try:
            reader = MetadataTableReader(storage, timeline, prelist=("files",), timeline_dir=config.timeline_dir)
            if scope is None:
                listings = [(lst.partition, lst.files) for lst in reader.listings()]
                parts = [p for p, _ in listings]
            else:
                parts = reader.partitions()
                listings = sorted(reader.partition_files([p for p in parts if scope(p)]).items())
            break
        except FileNotFoundError:
            if "files" not in available_partitions(read_properties(storage)[1].props):
                return _from_storage(storage, scope, then=then)
            if attempt == 2:
                raise
            # the MDT's clean removed the file slice this read loaded (two compactions since): again
    # still named now: a writer that drops the MDT (or builds it again) unnames it before it deletes
    # a file (and names it after the last): an MDT read while it changed is not trusted
    after, raw = at_once(then or (lambda: None), lambda: read_properties(storage)[1], parallel=not storage.is_local)
    named = available_partitions(raw.props)
    if "files" not in named:
        return _from_storage(storage, scope, then=then)
    return _Listing(None, reader, named, parts, listings, after)


def list_data_files(storage: Storage) -> list[FileInfo]:
    """Every base and log file of a table (one recursive listing)."""
    out = []
    for f in storage.find(""):
        if _skip(f.path):
            continue
        name = posixpath.basename(f.path)
        if is_base_file(name) or is_log_file(name):
            out.append(f)
    return out


#: a row of an expected file: (path, size, instant, partition, file id, kind, name as listed)
Expected = tuple[str, int, str, str, str, str, str]

# the rows of expected files that each parsed commit metadata's write stats give, by partition:
# (file group key, whether a base file, the row); computed once per commit metadata object (the
# timeline store shares those between the views of the process) and dropped with it
_StatRows = list[tuple[str, list[tuple[tuple[str, str], bool, Expected]]]]
_ROWS_BY_COMMIT: dict[int, tuple[weakref.ref[CommitMetadata], _StatRows]] = {}


def _stat_rows(md: CommitMetadata, parse: Callable[[str], BaseFile | LogFile | None]) -> _StatRows:
    """The write stats of ``md`` as rows of expected files (stats of files that are neither a
    base file nor a log file, or of no path, left out)."""
    k = id(md)
    hit = _ROWS_BY_COMMIT.get(k)
    if hit is not None and hit[0]() is md:
        return hit[1]
    out: _StatRows = []
    for partition, stats in md.partition_to_write_stats.items():
        rows = []
        for st in stats:
            path = st.path
            if not path or path == "null":
                continue
            part, _, name = path.rpartition("/")
            listed = name if part else path     # what the listing of ``part`` names it
            key = (part, st.fileId or "")
            parsed = parse(name)
            if isinstance(parsed, BaseFile):
                rows.append((key, True, (path, int(st.fileSizeInBytes or 0), parsed.instant, part, key[1], "base", listed)))
            elif isinstance(parsed, LogFile):
                rows.append((key, False, (path, int(st.fileSizeInBytes or 0), parsed.instant, part, key[1], "log", listed)))
        out.append((partition, rows))
    _ROWS_BY_COMMIT[k] = (weakref.ref(md), out)
    weakref.finalize(md, _ROWS_BY_COMMIT.pop, k, None)
    return out


# data file names parsed, shared by the views of the process: a name's parse never changes, and a
# plan of a table of many files parses each name once, not once a view (bounded: emptied when full)
_NAMES: dict[str, BaseFile | LogFile | None] = {}
_NAMES_MAX = 1 << 17   # about 60 MB at most
