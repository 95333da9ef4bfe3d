"""Reading a table's metadata table (``.hoodie/metadata``): the ``files`` partition and the
records of the other partitions, as of the data table's timeline.

The metadata table (MDT) is a merge-on-read table of its own: HFile base files, log files of
HFile data blocks, its own timeline.  A partition's file group is read as its latest file
slice: the base file's records, then the log blocks of the completed MDT delta commits in
order (rolled-back blocks skipped, a delete block removing keys), each record merged onto the
one before it (:mod:`lakesdk.format.metadata_records`).  A delta commit counts only when the
data instant of the same time is not pending on the data timeline: Hudi completes the MDT
delta commit first, so a writer that died in between leaves one that its rollback removes.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from dataclasses import dataclass
from functools import cached_property, partial
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, cast

from lakesdk._lru import WeightedLRU
from lakesdk.exceptions import CorruptFileError
from lakesdk.format.file_group import FileSlice
from lakesdk.format.file_naming import BaseFile, LogFile, is_base_file, is_log_file, parse_data_file
from lakesdk.format.log_block import BlockType, read_log_file
from lakesdk.format.log_framing import HeaderKey
from lakesdk.format.metadata_files import INITIAL_PREFIX
from lakesdk.format.metadata_records import (
    ALL_PARTITIONS_KEY,
    MetadataRecord,
    RecordLocation,
    RecordType,
    data_partition_of,
    decode_record,
    mdt_partition_key,
    merge_file_entries,
)
from lakesdk.format.metadata_table import METADATA_DIR, pending_data_instants
from lakesdk.format.table_config import TableConfig
from lakesdk.format.timeline import Timeline
from lakesdk.read.mdt_blocks import _Block
from lakesdk.read.record_lookup import decode_records
from lakesdk.storage import FileInfo, Storage

if TYPE_CHECKING:
    from lakesdk.timeline.store import TimelineStore

__all__ = ["MetadataTableReader", "PartitionListing"]


@dataclass(frozen=True)
class PartitionListing:
    """The files of one data partition as the MDT lists them: file name -> size."""
    partition: str
    files: dict[str, int]


class MetadataTableReader:
    """The MDT of the table on ``storage``, read against the data table's ``timeline``."""

    def __init__(self, storage: Storage, timeline: Timeline, *, store: "TimelineStore | None" = None,
                 mdt_timeline: Timeline | None = None, prelist: tuple[str, ...] = (),
                 timeline_dir: str = ".hoodie/timeline") -> None:
        """``store`` and ``mdt_timeline``: the MDT's timeline store and its timeline, when the
        caller (the MDT's writer, under the table lock) has them already.  Otherwise the MDT's
        ``hoodie.properties`` is read, its timeline (``timeline_dir``: the data table's, whose
        layout the MDT shares; listed again when the MDT's says otherwise) and the MDT partitions
        ``prelist`` listed, all at once.  A partition listed before the MDT timeline was read is
        as good as one listed after: the MDT files of every data instant the data ``timeline``
        holds completed were written before it was read.  A compaction of the MDT completed in
        between leaves the slice before it, which holds those instants too (read from storage,
        a file a clean deleted since fails the read and the caller lists again; from
        :data:`_RAW`, the bytes it held); an MDT built again in between writes its files under
        instants completed again, so its files are read again."""
        from lakesdk.timeline.store import TimelineStore
        self.storage = storage
        self.mdt = storage.child(METADATA_DIR)
        #: the MDT partitions listed, and each file's (size, modified time) as listed
        self._listings: dict[str, list[FileInfo]] = {}
        self._stamps: dict[str, tuple[int, float | None]] = {}
        if store is None:
            from lakesdk.storage.overlap import at_once
            calls: list[Callable[[], Any]] = [lambda: self.mdt.read(".hoodie/hoodie.properties")]
            if mdt_timeline is None:
                calls.append(lambda: self.mdt.list(timeline_dir))
            calls += [partial(self.mdt.list, p) for p in prelist]
            got = at_once(*calls, parallel=not storage.is_local)
            store = TimelineStore(self.mdt, TableConfig.from_bytes(got[0]))
            if mdt_timeline is None:
                entries = got[1] if store.dir == timeline_dir else self.mdt.list(store.dir)
                mdt_timeline = store.timeline_of(entries)
            for p, entries in zip(prelist, got[len(calls) - len(prelist):]):
                self._listings[p] = entries
        self.store = store
        self.config = store.config
        if mdt_timeline is None:
            mdt_timeline = self.store.load()
        # an MDT instant's completion time; older than the active MDT timeline: archived, completed
        self._completion = {i.requested: i.completed or i.requested for i in mdt_timeline.completed}
        self._start = min((i.requested for i in mdt_timeline.instants), default="")
        #: the requested times of the completed MDT delta commits
        self.delta_commits = frozenset(i.requested for i in mdt_timeline.completed if i.action == "deltacommit")
        pending = pending_data_instants(timeline)
        self.valid = frozenset(i for i in self._completion if i not in pending)
        self._timeline, self._mdt_timeline = timeline, mdt_timeline

    @cached_property
    def newer_than_timeline(self) -> bool:
        """Whether this MDT holds writes the data timeline it was read against does not know
        (read earlier): its record index may name file groups, or keys in them, that a plan of
        that timeline lacks.  The data table's instants are created under its lock later than
        every instant before: an MDT delta commit later than all of the timeline's, or an MDT
        partition built (at an initial time) that completed after all it records (a build
        completes before the data instant whose commit runs it), holds such writes."""
        instants = self._timeline.instants
        newest = max((i.requested for i in instants), default="")
        last = max([newest, *(i.completed or "" for i in instants)])
        return any((i.completed or "") > last if i.requested.startswith(INITIAL_PREFIX) else i.requested > newest
                   for i in self._mdt_timeline.completed if i.action == "deltacommit")

    def _list(self, partition: str) -> list[FileInfo]:
        """The files of an MDT partition, listed once by this reader (one snapshot of it)."""
        entries = self._listings.get(partition)
        if entries is None:
            entries = self._listings[partition] = self.mdt.list(partition)
        for e in entries:
            self._stamps[e.path] = (e.size, e.modified)
        return entries

    def _read_all(self, paths: list[str]) -> list[bytes]:
        """The bytes of the MDT files ``paths``, read at once; a file this process read before
        under the key :meth:`_raw_key` gives it now is not read again (:data:`_RAW`)."""
        keys = [self._raw_key(p) for p in paths]
        out: list[bytes | None] = [(_RAW.get(k) if k is not None else None) for k in keys]
        todo = [i for i, b in enumerate(out) if b is None]
        if todo:
            from lakesdk.storage.overlap import at_once
            reads = [partial(self.mdt.read, paths[i]) for i in todo]
            for i, data in zip(todo, at_once(*reads, parallel=not self.mdt.is_local)):
                out[i] = data
                k = keys[i]
                if k is not None and len(data) <= _DECODED_MAX_BYTES:
                    _RAW.put(k, data, len(data))
        return cast(list[bytes], out)

    def _raw_key(self, path: str) -> tuple[str, int, float, str] | None:
        """The key of an MDT file's bytes in :data:`_RAW`: its URL, size and modified time as
        listed, and the completion time of the MDT instant that wrote it (a file written again
        under the same name, by a delta commit retried or an MDT built again, belongs to an
        instant completed again); None when the listing gives no modified time or the instant
        is not completed."""
        stamp = self._stamps.get(path)
        if stamp is None or stamp[1] is None:
            return None
        parsed = parse_data_file(path.rpartition("/")[2])
        done = self._completed(parsed.instant) if parsed is not None else None
        if done is None:
            return None
        return (self.mdt.url(path), stamp[0], stamp[1], done)

    def _completed(self, instant: str) -> str | None:
        done = self._completion.get(instant)
        return done if done is not None else instant if instant < self._start else None

    # -- file slices ---------------------------------------------------------------------------
    def slices(self, partition: str) -> list[FileSlice]:
        """The latest file slice of each file group of an MDT partition (``files``, ...): its
        newest base file of a completed instant, and the log files of completed delta commits
        on top of it (table version 8+: a log file belongs to the newest base file no later than
        its delta commit's completion; version 6: the log files name their base file's instant)."""
        bases: dict[str, list[tuple[BaseFile, int]]] = defaultdict(list)
        logs: dict[str, list[tuple[LogFile, int]]] = defaultdict(list)
        try:
            entries = [e for e in self._list(partition) if not e.is_dir]
        except FileNotFoundError:
            return []
        for e in entries:
            if is_base_file(e.name):
                b = BaseFile.parse(e.name)
                if self._completed(b.instant) is not None:
                    bases[b.file_id].append((b, e.size))
            elif is_log_file(e.name):
                lf = LogFile.parse(e.name)
                if not lf.is_cdc:
                    logs[lf.file_id].append((lf, e.size))
        out = []
        layout = self.config.layout_version
        for fid in sorted(set(bases) | set(logs)):
            base, size = max(bases.get(fid, []), key=lambda x: x[0].instant, default=(None, 0))
            mine = []
            for lf, lsize in sorted(logs.get(fid, []), key=lambda x: (x[0].instant, x[0].version, x[0].write_token)):
                done = self._completed(lf.instant) if layout >= 2 else lf.instant
                if done is None or (base is not None and (done < base.instant if layout >= 2
                                                          else lf.instant != base.instant)):
                    continue
                mine.append((lf, lsize))
            if base is None and not mine:
                continue
            first = base.instant if base is not None else mine[0][0].instant
            out.append(FileSlice(partition, fid, first, base, size, tuple(x[0] for x in mine),
                                 tuple(x[1] for x in mine)))
        return out

    def built_slices(self, partition: str) -> list[FileSlice]:
        """:meth:`slices` of a partition the data table names built (``files``, the record
        index), whose every file group has a base file from its build or a compaction: none, or
        a file group whose base files all belong to MDT instants this reader does not know as
        completed, means the MDT changed past this reader's read of its timeline (built again;
        compacted twice and cleaned): ``FileNotFoundError``, which a plan answers by reading the
        MDT again, never an empty or partial answer."""
        out = self.slices(partition)
        based = {sl.file_id for sl in out if sl.base_file is not None}
        if not out or any(not e.is_dir and is_base_file(e.name) and BaseFile.parse(e.name).file_id not in based
                          for e in self._list(partition)):
            raise FileNotFoundError(
                f"{self.mdt.url(partition)}: the metadata table's {partition} partition has no file slice as of the "
                "MDT timeline this reader read (the MDT was built again or compacted since): read it again")
        return out

    def records(self, partition: str) -> dict[str, MetadataRecord]:
        """Every live record of an MDT partition by key, base and log blocks merged."""
        out: dict[str, MetadataRecord] = {}
        for sl in (self.built_slices(partition) if partition == "files" else self.slices(partition)):
            out.update(self._slice_records(sl))
        return out

    def column_ranges(self, columns: list[str], partitions: Iterable[str] | None = None, *,
                      exact: bool = False) -> dict[tuple[str, str], dict[str, Any]]:
        """The ``column_stats`` of ``columns`` (of the data ``partitions``, None: all):
        (partition hash, file name) -> column -> :class:`~lakesdk.format.column_stats.ColumnRange`
        (records read by key prefix; ``exact``: see :func:`~lakesdk.format.column_stats.range_of_record`)."""
        from lakesdk.format.column_stats import column_prefix, partition_id, range_of_record
        parts = [""] if partitions is None else [partition_id(p) for p in partitions]
        prefixes = tuple((column_prefix(c) + p).encode("ascii") for c in columns for p in parts)
        out: dict[tuple[str, str], dict[str, Any]] = {}
        for sl in self.slices("column_stats"):
            for key, rec in self._slice_records(sl, prefixes).items():
                cs = (rec.raw or {}).get("ColumnStatsMetadata") or {}
                r = range_of_record(cs, exact=exact)
                if r is not None:
                    out.setdefault((key[12:24], str(cs.get("fileName"))), {})[r.column] = r
        return out

    def partition_ranges(self, columns: list[str]) -> dict[str, dict[str, Any]]:
        """The ``partition_stats`` of ``columns`` a reader may skip by: partition hash -> column
        -> :class:`~lakesdk.format.column_stats.ColumnRange` (tight bounds only, see
        :func:`lakesdk.format.partition_stats.partition_range_of`)."""
        from lakesdk.format.column_stats import column_prefix
        from lakesdk.format.partition_stats import PARTITION, partition_range_of
        prefixes = tuple(column_prefix(c).encode("ascii") for c in columns)
        out: dict[str, dict[str, Any]] = {}
        for sl in self.slices(PARTITION):
            for key, rec in self._slice_records(sl, prefixes).items():
                r = partition_range_of((rec.raw or {}).get("ColumnStatsMetadata") or {})
                if r is not None:
                    out.setdefault(key[12:24], {})[r.column] = r
        return out

    def partition_files(self, partitions: Iterable[str]) -> dict[str, dict[str, int]]:
        """The live files of the data ``partitions`` as the ``files`` partition lists them
        (partition -> file name -> size; records read by key prefix)."""
        keys = {mdt_partition_key(p): p for p in partitions}
        out: dict[str, dict[str, int]] = {p: {} for p in keys.values()}
        prefixes = tuple(k.encode("utf-8") for k in keys)
        for sl in self.built_slices("files"):
            for key, rec in self._slice_records(sl, prefixes).items():
                if key in keys and rec.type == RecordType.FILE_LIST and rec.files is not None:
                    out[keys[key]] = {n: e.size for n, e in rec.files.items() if not e.deleted}
        return out

    def written_at(self, partition: str, instant: str) -> list[MetadataRecord]:
        """The records the MDT delta commit ``instant`` wrote to ``partition``'s log files,
        whether they count or not (what a rollback of its data instant must say again)."""
        out: list[MetadataRecord] = []
        for sl in self.slices(partition):
            for path in sl.log_paths:
                out += [r for b in _log_blocks(self.mdt.url(path), self.mdt.read(path)) if b.instant == instant
                        for r in b.records]
        return out

    def record_locations(self, keys: Iterable[str]) -> dict[str, RecordLocation]:
        """Where the ``record_index`` partition puts each of ``keys`` (a key it does not hold is
        left out): each key looked up in the one file group its hash names, by seeks in the
        base HFile and the HFiles of that group's log blocks, merged as the slice's records are
        (:mod:`lakesdk.read.record_lookup`: the files are read by byte ranges)."""
        from lakesdk.read.record_lookup import record_locations
        return record_locations(self, keys)

    def _slice_records(self, sl: FileSlice, prefixes: tuple[bytes, ...] | None = None) -> dict[str, MetadataRecord]:
        from lakesdk.format.hfile import HFileReader
        merged: dict[str, MetadataRecord] = {}
        datas = self._read_all(([sl.base_path] if sl.base_path is not None else []) + list(sl.log_paths))
        if sl.base_path is not None:
            path = sl.base_path
            url, data = self.mdt.url(path), datas.pop(0)
            if prefixes is None and sl.partition == "files":
                merged = _base_records(url, data)
            elif prefixes is not None:
                for rec in _base_records_under(url, data, prefixes):
                    _put(merged, rec)
            else:
                reader = HFileReader(data, name=url)
                for rec in decode_records(reader, _schema_of(reader, url), url):
                    _put(merged, rec)
        blocks: list[_Block] = []
        for path, data in zip(sl.log_paths, datas):
            blocks.extend(_log_blocks(self.mdt.url(path), data))
        if self.config.layout_version >= 2:
            # merged in the order their delta commits completed (as the data instants did, under
            # the table lock), not by instant time: a record that says a data partition as a
            # whole (partition_stats) from an action that began earlier but completed later
            # holds the files of the one that completed in between
            blocks.sort(key=lambda b: self._completion.get(b.instant or "", b.instant or ""))
        voided = {b.target for b in blocks if b.rollback}
        text = None if prefixes is None else tuple(p.decode("utf-8") for p in prefixes)
        for b in blocks:
            if b.instant not in self.valid or b.instant in voided:
                continue
            for rec in b.records:
                if text is None or rec.key.startswith(text):
                    _put(merged, rec)
            for k in b.deleted:
                merged.pop(k, None)
        return merged

    # -- the files partition -------------------------------------------------------------------
    def partitions(self) -> list[str]:
        """The data table's partition paths ("" for a non-partitioned table), from the one
        record that lists them (read by key)."""
        merged: dict[str, MetadataRecord] = {}
        for sl in self.built_slices("files"):
            merged.update(self._slice_records(sl, (ALL_PARTITIONS_KEY.encode("utf-8"),)))
        rec = merged.get(ALL_PARTITIONS_KEY)
        if rec is None or rec.files is None:
            return []
        return sorted(data_partition_of(p) for p, e in rec.files.items() if not e.deleted)

    def listings(self) -> Iterator[PartitionListing]:
        """The live files of every data partition, as the ``files`` partition lists them."""
        for key, rec in sorted(self.records("files").items()):
            if rec.type != RecordType.FILE_LIST or rec.files is None:
                continue
            yield PartitionListing(data_partition_of(key),
                                   {n: e.size for n, e in sorted(rec.files.items()) if not e.deleted})


#: the bytes of MDT files by (URL, size and modified time as listed, completion time of the
#: instant that wrote the file): a plan reads a file of an MDT slice it read before only when a
#: listing shows it changed or its instant completed again (files up to 4 MiB, 32 MiB in all)
_RAW: WeightedLRU[tuple[str, int, float, str], bytes] = WeightedLRU(32 << 20)

#: decoded MDT log files by (URL, content digest): a log file is written once (an MDT delta
#: commit written again after a failed attempt has other bytes or the same records), so its
#: records are decoded once per process, not by every plan and commit that reads the slice
#: (the most recent 512 files)
_DECODED: WeightedLRU[tuple[str, bytes], tuple[_Block, ...]] = WeightedLRU(512)
_DECODED_MAX_BYTES = 4 << 20     # larger log files (a record index's) are decoded on each read


def _log_blocks(url: str, data: bytes) -> tuple[_Block, ...]:
    """The blocks of the MDT log file ``data`` (at ``url``), decoded (cached by content)."""
    key = (url, hashlib.blake2b(data, digest_size=16).digest()) if len(data) <= _DECODED_MAX_BYTES else None
    if key is not None:
        hit = _DECODED.get(key)
        if hit is not None:
            return hit
    out: list[_Block] = []
    for b in read_log_file(data):
        if b.block_type == BlockType.HFILE_DATA:
            schema = b.header.get(HeaderKey.SCHEMA)
            if not schema:
                raise CorruptFileError(f"{url}: an HFile data block at offset {b.offset} has no SCHEMA header", path=url)
            recs = tuple(decode_records(b.hfile(url), schema, url))
            out.append(_Block(b.instant, False, None, records=recs))
        elif b.block_type == BlockType.DELETE:
            keys = b.delete_records().column("_hoodie_record_key").to_pylist()
            out.append(_Block(b.instant, False, None, deleted=tuple(str(k) for k in keys)))
        elif b.block_type == BlockType.COMMAND:
            out.append(_Block(b.instant, b.is_rollback, b.target_instant))
        else:
            raise CorruptFileError(f"{url}: a metadata table log file holds a {b.block_type.name} block at offset "
                                   f"{b.offset}; it holds HFile data, delete and command blocks only", path=url)
    blocks = tuple(out)
    if key is not None:
        _DECODED.put(key, blocks, 1)
    return blocks


#: the records of the ``files`` partition's base files read whole, decoded, by (URL, content
#: digest) (a base file is written once), so that a process decodes a table's listing once, not
#: on every plan; the most recent of them, up to 8 MiB of files (a table of
#: 10,000 files has one of about 300 kB)
_BASES: WeightedLRU[tuple[str, bytes], dict[str, MetadataRecord]] = WeightedLRU(8 << 20)


def _base_records(url: str, data: bytes) -> dict[str, MetadataRecord]:
    """Every record of the MDT base HFile ``data`` (at ``url``) by key (a new dict; the records
    decoded once, cached by content)."""
    from lakesdk.format.hfile import HFileReader
    key = (url, hashlib.blake2b(data, digest_size=16).digest()) if len(data) <= _DECODED_MAX_BYTES else None
    if key is not None:
        hit = _BASES.get(key)
        if hit is not None:
            return dict(hit)
    reader = HFileReader(data, name=url)
    schema = _schema_of(reader, url)
    out: dict[str, MetadataRecord] = {}
    for k, value in reader:
        _put(out, decode_record(value, schema, key=k, path=url))
    if key is not None:
        _BASES.put(key, out, len(data))
    return dict(out)


#: the records of MDT base files under key prefixes (a statistics partition's records of some
#: columns, of some partitions), decoded, by (URL, content digest, prefixes): a key index and a
#: read that skips files by ``column_stats`` ask the same column's records on every operation,
#: and decoding them (fastavro, about 30 us a record) would cost 0.3 s each time at 10,000
#: files; the most recent, up to 60,000 records in all
_PREFIXED: WeightedLRU[tuple[str, bytes, tuple[bytes, ...]], tuple[MetadataRecord, ...]] = WeightedLRU(60_000)


def _base_records_under(url: str, data: bytes, prefixes: tuple[bytes, ...]) -> tuple[MetadataRecord, ...]:
    """The records of the MDT base HFile ``data`` (at ``url``) whose keys start with one of
    ``prefixes``, in the order of the prefixes, then of the keys (decoded once, cached by
    content and prefixes; the records are shared: callers never change them)."""
    from lakesdk.format.hfile import HFileReader
    key = (url, hashlib.blake2b(data, digest_size=16).digest(), prefixes)
    hit = _PREFIXED.get(key)
    if hit is not None:
        return hit
    reader = HFileReader(data, name=url)
    schema = _schema_of(reader, url)
    out = tuple(decode_records((kv for p in prefixes for kv in reader.items(prefix=p)), schema, url))
    _PREFIXED.put(key, out, len(out))
    return out


def _put(merged: dict[str, MetadataRecord], rec: MetadataRecord) -> None:
    old = merged.get(rec.key)
    if old is not None and old.files is not None and rec.files is not None:
        rec = MetadataRecord(rec.key, rec.type, files=merge_file_entries(old.files, rec.files), raw=rec.raw)
    merged[rec.key] = rec


def _schema_of(reader: object, url: str) -> str:
    info = getattr(reader, "file_info", {}) or {}
    raw = info.get(b"schema")
    if raw is None:
        raise CorruptFileError(f"{url}: the HFile's file info names no Avro schema (key 'schema')", path=url)
    return bytes(raw).decode("utf-8")
