"""FileSystemView: the file groups and slices a reader sees as of an instant."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Callable, Iterable, cast

from lakesdk.exceptions import StorageError
from lakesdk.format.file_group import FileGroup, FileSlice
from lakesdk.format.file_naming import BaseFile, LogFile, parse_data_file
from lakesdk.format.keys import parse_partition_path
from lakesdk.format.table_config import TableConfig
from lakesdk.format.timeline import Clock, Timeline
from lakesdk.read import view_cache
from lakesdk.read.listing import (
    _NAMES,
    _NAMES_MAX,
    Expected,
    _ByPartition,
    _infos,
    _listed,
    _partition_of,
    _stat_rows,
    list_data_files,
    listed_files,
)
from lakesdk.storage import FileInfo, Storage
from lakesdk.timeline.moved import unseen_may_be_archived
from lakesdk.timeline.store import TimelineStore

if TYPE_CHECKING:
    from lakesdk.read.metadata_table import MetadataTableReader

__all__ = ["FileSystemView", "ExpectedFile", "list_data_files", "listed_files"]

PartitionFilter = Callable[[dict[str, str | None]], bool]
#: actions that delete data files of completed commits
_DELETERS = frozenset({"clean", "restore"})
_LIST_ATTEMPTS = 10


@dataclass(frozen=True)
class ExpectedFile:
    """A file of a file slice a read reaches, as the write stat of the commit that wrote it
    records it."""

    path: str
    size: int
    instant: str           # requested time of the commit that wrote it
    partition: str
    file_id: str
    kind: str              # "base" or "log"

    def size_differs(self, size: int) -> bool:
        """Whether ``size`` in storage is not what the write stat records: a base file of another
        size, or a log file shorter than its last append (later appends make it longer)."""
        return _size_differs(self.kind, self.size, size)


#: an :class:`ExpectedFile`'s fields, in order, and the file's name in its partition's listing
_Expected = Expected


#: the file slice of one base file by (partition, file name, size), shared by the views of the
#: process: a plan of a table of many files makes each once, not once a view (bounded as
#: :data:`~lakesdk.read.listing._NAMES` is)
_SLICES: dict[tuple[str, str, int], FileSlice] = {}


def _base_of(sl: FileSlice) -> tuple[BaseFile, int]:
    """The base file of a slice that has one, and its size."""
    return cast(BaseFile, sl.base_file), sl.base_size


def _size_differs(kind: str, expected: int, size: int) -> bool:
    """:meth:`ExpectedFile.size_differs` of a file of ``kind`` whose write stat records ``expected`` bytes."""
    return bool(expected) and ((kind == "base" and size != expected) or (kind == "log" and size < expected))


class FileSystemView:
    """File groups as of ``as_of`` (None = latest completed state).

    A base file is visible when the commit that wrote it is completed (and, with ``as_of``,
    requested at or before it for time travel, ``clock="requested"``; completed by it for the
    end of an incremental range, ``clock="completed"``, :meth:`Timeline.visible_as_of`) or
    older than the active timeline (archived).  File groups replaced by a visible
    replacecommit are hidden.
    """

    def __init__(self, storage: Storage, config: TableConfig, store: TimelineStore, timeline: Timeline,
                 *, as_of: str | None = None, clock: Clock = "requested",
                 files: Iterable[FileInfo] | None = None, recheck: bool = True, fresh: bool = False,
                 partitions: Callable[[str], bool] | None = None) -> None:
        self.storage = storage
        self.config = config
        self.store = store
        self.as_of = as_of
        self.clock: Clock = clock
        #: the MDT reader the files were listed with (None: listed from storage or given), and
        #: the MDT partitions ``hoodie.properties`` named then
        self._metadata: MetadataTableReader | None = None
        self._named: tuple[str, ...] = ()
        #: whether the files were listed from the MDT (by this view or one of the same timeline:
        #: :mod:`~lakesdk.read.view_cache`, whose views read the MDT only when asked, :attr:`metadata`)
        self.from_metadata = False
        self._reread = False
        self._cached: view_cache.Listed | None = None
        #: the partitions (by path) this view holds: None all; else the listing, the file groups
        #: and the check of the write stats keep only the partitions it keeps
        self.scope = partitions
        #: every partition the listing named, in the scope or not (given files: theirs)
        self.listed_partitions: list[str] = []
        #: the files listed by partition, as the MDT lists them (None: :attr:`_files` only); the
        #: list of :class:`FileInfo` is built from it when a caller needs one
        self._by_partition: _ByPartition | None = None
        self._file_infos: list[FileInfo] | None = None
        self._use(store, timeline)
        if files is not None:
            self._files = list(files)
            self.listed_partitions = sorted({_partition_of(f.path) for f in self._files})
            if partitions is not None:
                self._files = [f for f in self._files if partitions(_partition_of(f.path))]
        else:
            self._list(store, recheck and not fresh, recheck)
        self._groups: dict[tuple[str, str], FileGroup] | None = None
        self._sorted_groups: list[FileGroup] | None = None
        #: each file name parsed (once: the listing's and the write stats' names are the same)
        self._names = _NAMES

    def _list(self, store: TimelineStore, again: bool = True, recheck: bool = True) -> None:
        """List the data files; when a clean or restore started after the timeline was read
        (it may have deleted files that timeline still needs: the slice a compaction replaced
        since), or archival moved completed instants of it away (a clean among them, which
        the active timeline then no longer shows), list again against the newer timeline.
        Without ``recheck`` the timeline is not read again after the listing: the caller
        reads it later and checks :meth:`outdated_by` itself (a write, when it creates its instant).
        Files kept for this timeline (:mod:`~lakesdk.read.view_cache`) are taken, after the same
        check unless ``again`` is off (``fresh``: a read's plan that read the timeline just before)."""
        hit = view_cache.get(view_cache.key_of(self.storage, self.config, self.timeline))
        if hit is not None and again:
            now = store.load()
            if self.outdated_by(now):
                self._use(store, now)
                hit = None
        if hit is not None:     # listed from the MDT against this timeline, and checked, before
            scope = self.scope
            self._file_infos, self._by_partition = None, hit.by_partition if scope is None else [
                (p, files) for p, files in hit.by_partition if scope(p)]
            self.listed_partitions, self.from_metadata, self._reread = hit.partitions, True, True
            self._cached = hit if scope is None else None
            return
        for _ in range(_LIST_ATTEMPTS):
            listing = _listed(self.storage, self.config, self.timeline, self.scope, store.load if recheck else None)
            self._metadata, self._named = listing.metadata, listing.named
            self.from_metadata = listing.metadata is not None
            if listing.files is not None:
                self._files = listing.files
            else:
                self._file_infos, self._by_partition = None, listing.by_partition
            self.listed_partitions = listing.partitions
            if not recheck:
                return
            now = listing.after      # the timeline read again once the files were listed
            if not self.outdated_by(now):
                if self.from_metadata and self.scope is None and listing.by_partition is not None:
                    self._cached = view_cache.keep(self.storage, self.config, self.timeline, listing.partitions,
                                                   listing.by_partition)
                return
            self._use(store, now)
        raise StorageError(
            f"the files of the table at {self.storage.base_url} could not be listed consistently: cleans or restores "
            f"kept deleting files during {_LIST_ATTEMPTS} listings; retry the operation")

    @property
    def metadata(self) -> "MetadataTableReader | None":
        """The MDT reader the files were listed with (None: listed from storage, or given)."""
        self._read_metadata()
        return self._metadata

    def _read_metadata(self) -> None:
        if self._reread:      # files from the cache: the MDT read when asked
            self._metadata, self._named = view_cache.metadata_of(self.storage, self.config, self.timeline)
            self._reread = False

    @property
    def metadata_partitions(self) -> tuple[str, ...]:
        """The MDT partitions ``hoodie.properties`` named when :attr:`metadata` was read."""
        self._read_metadata()
        return self._named

    @property
    def _files(self) -> list[FileInfo]:
        """The files listed (those of the partitions in the scope)."""
        if self._file_infos is None:
            self._file_infos = _infos(self._by_partition or [])
        return self._file_infos

    @_files.setter
    def _files(self, files: list[FileInfo]) -> None:
        self._file_infos, self._by_partition = files, None

    def _present(self) -> dict[str, dict[str, int]]:
        """partition -> file name -> size of the files listed."""
        if self._by_partition is not None:
            return dict(self._by_partition)
        out: dict[str, dict[str, int]] = defaultdict(dict)
        for f in self._files:
            part, _, name = f.path.rpartition("/")
            out[part][name] = f.size
        return out

    def outdated_by(self, now: Timeline, *, pending: bool = False) -> bool:
        """Whether files this view's listing holds may be gone in the later timeline ``now``: a
        clean or restore started since this view's timeline, or archival moved completed
        instants of it away (a clean among them, which the active timeline then no longer shows).
        With ``pending`` (a write planning against this view), also whether files it left out
        may be the table's now while no active instant says so: an instant that completed since
        may have been archived (:func:`~lakesdk.timeline.moved.unseen_may_be_archived`)."""
        def deleters(tl: Timeline) -> set[tuple[str, str]]:
            return {(i.requested, i.action) for i in tl.instants if i.action in _DELETERS}
        active = {i.requested for i in now.instants}
        if not (deleters(now) <= deleters(self.timeline) and all(i.requested in active for i in self.timeline.completed)):
            return True
        return pending and unseen_may_be_archived(self.store, self.timeline, now)

    def current_as_of(self, now: Timeline, *, pending: bool = False) -> "FileSystemView":
        """This view when the later timeline ``now`` cannot have deleted a file it holds
        (:meth:`outdated_by`, ``pending`` as there), else the same view (as of, clock,
        partitions) listed again against ``now``."""
        if not self.outdated_by(now, pending=pending):
            return self
        return FileSystemView(self.storage, self.config, self.store, now, as_of=self.as_of, clock=self.clock,
                              partitions=self.scope)

    def _use(self, store: TimelineStore, timeline: Timeline) -> None:
        """Take ``timeline`` as the state the files are read against."""
        as_of = self.as_of
        self.timeline = timeline
        visible = timeline.visible_as_of(as_of, clock=self.clock)
        self.visible = visible
        self._completion = {i.requested: (i.completed or i.requested) for i in visible}
        # writes in progress (a pending savepoint has the time of the commit it saves, whose
        # files stay visible: of an archived commit too)
        pending = {i.requested for i in timeline.pending if i.action != "savepoint"}
        # the start of the active timeline; savepointed instants do not count (archival beyond a
        # savepoint keeps them while archiving later commits: Hudi's getFirstNonSavepointCommit)
        sps = {i.requested for i in timeline.instants if i.action == "savepoint"}
        first = next((i.requested for i in timeline.instants if i.requested not in sps),
                     max((i.requested for i in timeline.instants), default=None))
        self._pending = pending
        self._first = first
        self._newest = timeline.max_time() or ""
        replaced: set[tuple[str, str]] = set()
        store.prefetch(i for i in visible if i.completed_action == "replacecommit")
        for inst in visible:
            if inst.completed_action == "replacecommit":
                md = store.commit_metadata(inst)
                for part, fids in (md.partition_to_replace_file_ids or {}).items():
                    replaced.update((part, f) for f in fids)
        # a caller that sets replaced (to see them: archival, clean) builds its own file groups
        self.replaced: frozenset[tuple[str, str]] | set[tuple[str, str]] = frozenset(replaced)
        self._hidden = self.replaced
        self._archived: dict[str, str] | None = None   # what the history says, for this timeline
        self._expected: list[ExpectedFile] | None = None
        self._rows: list[_Expected] | None = None

    def _is_valid(self, instant: str) -> bool:
        if instant in self._completion:
            return True
        if instant in self._pending:
            return False
        # files older than the active timeline belong to archived (completed) commits
        if self._first is not None and instant < self._first:
            if self.as_of is None or self.clock == "requested" or self.config.layout_version < 2:
                return self.as_of is None or instant <= self.as_of
            return self._archived_completion().get(instant, instant) <= self.as_of
        # a commit archived after an instant that still starts the active timeline (a hole an
        # instant created late left before lakesdk created instants under the table lock); an
        # instant newer than this timeline cannot be archived yet (files of a write in progress)
        if self._first is not None and instant < self._newest:
            return instant in self._archived_completion()
        return False

    def _archived_completion(self) -> dict[str, str]:
        """requested -> completion time of the write instants in the timeline history
        (layout 2) that a read as of ``as_of`` sees."""
        if self._archived is None:
            self._archived = {}
            if self.config.layout_version >= 2:
                from lakesdk.format.instant import WRITE_ACTIONS
                from lakesdk.timeline.history import LSMTimeline
                lsm = LSMTimeline(self.storage, self.config)
                if lsm.manifest():
                    self._archived = {i.requested: i.completed or i.requested for i in lsm.instants()
                                      if i.completed_action in WRITE_ACTIONS
                                      and (self.as_of is None or self.timeline.time_of(i, self.clock) <= self.as_of)}
        return self._archived

    def _log_completion(self, instant: str) -> str | None:
        """Completion time of the delta commit of a log file, None when the read does not see it
        (log files of archived delta commits: from the timeline history, before the start of the
        active timeline or in a hole after it, as :meth:`_is_valid` takes base files)."""
        done = self._completion.get(instant)
        if done is None and instant not in self._pending and self._first is not None and instant < self._newest:
            done = self._archived_completion().get(instant)
        return done

    def _parse(self, name: str) -> BaseFile | LogFile | None:
        """A data file's name parsed: a base file, a log file, or None for any other name."""
        try:
            return self._names[name]
        except KeyError:
            if len(self._names) >= _NAMES_MAX:
                self._names.clear()
            parsed = self._names[name] = parse_data_file(name)
            return parsed

    def _build(self) -> dict[tuple[str, str], FileGroup]:
        # the slice of a file group's one base file, made at once (the common case); the base
        # files of a group that has several
        bases: dict[tuple[str, str], FileSlice] = {}
        more: dict[tuple[str, str], list[tuple[BaseFile, int]]] = {}
        logs: dict[tuple[str, str], list[tuple[LogFile, int]]] = defaultdict(list)
        cdcs: dict[tuple[str, str], list[tuple[LogFile, int]]] = defaultdict(list)
        names = self._names
        shared = _SLICES
        valid: dict[str, bool] = {}        # a base file's instant checked once per instant, not per file
        for part, listed in self._by_partition if self._by_partition is not None else self._present().items():
            for name, size in listed.items():
                parsed = names.get(name)
                if parsed is None:
                    parsed = self._parse(name)
                    if parsed is None:      # not a data file's name: a typed error of what it is not
                        parsed = LogFile.parse(name) if name.startswith(".") else BaseFile.parse(name)
                if isinstance(parsed, LogFile):
                    (cdcs if parsed.is_cdc else logs)[(part, parsed.file_id)].append((parsed, size))
                    continue
                ok = valid.get(parsed.instant)
                if ok is None:
                    ok = valid[parsed.instant] = self._is_valid(parsed.instant)
                if ok:
                    key = (part, parsed.file_id)
                    first = bases.get(key)
                    if first is None:
                        # the slice of one base file, shared by the views of the process (immutable)
                        one = shared.get((part, name, size))
                        if one is None:
                            if len(shared) >= _NAMES_MAX:
                                shared.clear()
                            one = shared[(part, name, size)] = FileSlice(part, key[1], parsed.instant, parsed, size)
                        bases[key] = one
                    elif key in more:
                        more[key].append((parsed, size))
                    else:
                        more[key] = [_base_of(first), (parsed, size)]
        groups: dict[tuple[str, str], FileGroup] = {}
        layout = self.config.layout_version
        replaced = self.replaced
        for key, sl in bases.items():
            if key in replaced:
                continue
            if key not in more and key not in logs and key not in cdcs:    # the common case: one base file
                groups[key] = FileGroup(key[0], key[1], [sl])
            else:
                self._group(groups, key, more.get(key) or [_base_of(sl)], logs.get(key, []), cdcs.get(key), layout)
        for key, lg in logs.items():     # file groups of log files only
            if key not in bases and key not in replaced:
                self._group(groups, key, [], lg, cdcs.get(key), layout)
        return groups

    def _group(self, groups: dict[tuple[str, str], FileGroup], key: tuple[str, str], bs: list[tuple[BaseFile, int]],
               lg: list[tuple[LogFile, int]], cdc: list[tuple[LogFile, int]] | None, layout: int) -> None:
        """Add to ``groups`` the file group ``key`` of the base files ``bs``, the log files ``lg``
        and the CDC log files ``cdc``, when it has a slice."""
        part, fid = key
        if len(bs) > 1:
            bs.sort(key=lambda x: x[0].instant)
        # one base per instant (a duplicate from a retried task would share the instant)
        slices: list[FileSlice] = [FileSlice(part, fid, b.instant, b, size) for b, size in bs]
        if lg:
            slices = self._attach_logs(part, fid, slices, lg, layout)
        if cdc:      # the changes a base file's write logged belong to its slice
            by_instant = defaultdict(list)
            for lf, size in sorted(cdc, key=lambda x: (x[0].version, x[0].write_token)):
                by_instant[lf.instant].append((lf, size))
            slices = [replace(s, cdc_files=tuple(by_instant[s.base_instant])) if s.base_instant in by_instant
                      else s for s in slices]
        if slices:
            groups[key] = FileGroup(part, fid, slices)

    def _attach_logs(self, part: str, fid: str, slices: list[FileSlice],
                     logs: list[tuple[LogFile, int]], layout: int) -> list[FileSlice]:
        by_base: dict[str, list[tuple[LogFile, int]]] = defaultdict(list)
        base_instants = [s.base_instant for s in slices]
        for lf, size in sorted(logs, key=lambda x: (x[0].instant, x[0].version, x[0].write_token)):
            if layout >= 2:
                done = self._log_completion(lf.instant)
                if done is None:
                    continue
                # the slice a log belongs to: the one with the largest instant <= the log's completion,
                # a slice that a log before it began included (Hudi's HoodieFileGroup adds the log files
                # in order: the first log of a group without a base file begins the slice the next join)
                owner = max((b for b in (*base_instants, *by_base) if b <= done), default=None)
                by_base[owner or lf.instant].append((lf, size))
            else:
                if not self._is_valid(lf.instant) and lf.instant not in base_instants:
                    continue
                by_base[lf.instant].append((lf, size))
        out = []
        for s in slices:
            ls = sorted(by_base.pop(s.base_instant, []), key=lambda x: (x[0].instant, x[0].version, x[0].write_token))
            out.append(FileSlice(part, fid, s.base_instant, s.base_file, s.base_size,
                                 tuple(x[0] for x in ls), tuple(x[1] for x in ls)))
        for inst, ls in sorted(by_base.items()):  # log-only file slices
            ls = sorted(ls, key=lambda x: (x[0].instant, x[0].version, x[0].write_token))
            out.append(FileSlice(part, fid, inst, None, 0, tuple(x[0] for x in ls), tuple(x[1] for x in ls)))
        out.sort(key=lambda s: s.base_instant)
        return out

    # -- API --------------------------------------------------------------------------------
    @property
    def file_groups(self) -> list[FileGroup]:
        return list(self._by_key())

    def _by_key(self) -> list[FileGroup]:
        """The file groups, built once, sorted by partition and file id."""
        if self._sorted_groups is None:
            moment = (self.as_of, self.clock)
            cache = self._cached if self.replaced is self._hidden else None
            built = cache.built.get(moment) if cache is not None else None
            if built is None:
                groups = self._build()      # keyed by (partition, file id): sorted by key, no key function
                built = (groups, [groups[k] for k in sorted(groups)], self._archived)
                if cache is not None:
                    view_cache.add_built(cache, moment, built)
            self._groups, self._sorted_groups, self._archived = built
        return self._sorted_groups

    def expected_files(self) -> list[ExpectedFile]:
        """Every file of every file slice this view's read reaches, per the write stats of the
        visible commits of the active timeline: the newest base file of each file group that no
        visible replacecommit replaced, and the log files the view attaches on top of it."""
        if self._expected is None:
            self._expected = [ExpectedFile(*row[:6]) for row in self._expected_rows()]
        return list(self._expected)

    def _expected_rows(self) -> list[_Expected]:
        """:meth:`expected_files` as tuples of their fields (a plan checks them all and builds
        an :class:`ExpectedFile` only for a file that fails the check)."""
        if self._rows is None:
            self._rows = self._expected_files()
        return self._rows

    def _expected_files(self) -> list[_Expected]:
        layout = self.config.layout_version
        bases: dict[tuple[str, str], _Expected] = {}
        logs: dict[tuple[str, str], dict[str, _Expected]] = defaultdict(dict)
        scope = self.scope
        self.store.prefetch(self.visible)
        for inst in self.visible:
            for partition, rows in _stat_rows(self.store.commit_metadata(inst), self._parse):
                if scope is not None and not scope(partition):
                    continue
                for key, is_base, row in rows:
                    if is_base:
                        cur = bases.get(key)
                        if cur is None or row[2] >= cur[2]:
                            bases[key] = row
                    else:     # a log file appended to by several commits: the largest size recorded
                        by_path = logs[key]
                        cur = by_path.get(row[0])
                        by_path[row[0]] = row if cur is None or cur[1] <= row[1] else (row[0], cur[1], *row[2:])
        out = []
        replaced = self.replaced
        for key in sorted(bases.keys() | logs.keys()):
            if key in replaced:
                continue
            b = bases.get(key)
            if b is not None:
                out.append(b)
            lg = logs.get(key)
            if not lg:
                continue
            for e in lg.values():
                if layout >= 2:
                    done = self._log_completion(e[2])
                    if done is None or (b is not None and done < b[2]):
                        continue
                elif b is not None and e[2] < b[2]:     # layout 1: a log names its base instant
                    continue
                out.append(e)
        return out

    def missing_files(self, keep: Callable[[ExpectedFile], bool] | None = None) -> list[ExpectedFile]:
        """The files of :meth:`expected_files` that storage does not hold."""
        present = {f.path for f in self._files}
        return [e for e in self.expected_files() if e.path not in present and (keep is None or keep(e))]

    def short_files(self, keep: Callable[[ExpectedFile], bool] | None = None) -> list[tuple[ExpectedFile, int]]:
        """The files of :meth:`expected_files` whose size in storage is not what their write stat
        records (a base file of another size, a log file shorter than its last append), with
        the size found: ``lakesdk check``'s ``size_mismatch`` rule."""
        present = {f.path: f.size for f in self._files}
        out = []
        for e in self.expected_files():
            size = present.get(e.path)
            if size is None or (keep is not None and not keep(e)):
                continue
            if e.size_differs(size):
                out.append((e, size))
        return out

    def verify_stored(self, keep: Callable[[ExpectedFile], bool]) -> None:
        """:meth:`verify` of the files ``keep`` selects against storage itself when the view
        listed its files from the metadata table (which records the sizes the commits wrote):
        one size call per file, for an operation about to rewrite them (a compaction)."""
        if not self.from_metadata:
            return
        stored = []
        for e in self.expected_files():
            if keep(e):
                try:
                    stored.append(FileInfo(e.path, self.storage.size(e.path), False))
                except FileNotFoundError:
                    pass
        listed, self._files = self._files, stored
        try:
            self.verify(keep)
        finally:
            self._files = listed

    def verify(self, keep: Callable[[ExpectedFile], bool] | None = None) -> None:
        """Raise when a file of a file slice this view's read reaches is missing: a
        :class:`~lakesdk.exceptions.TimeTravelError` when a clean deleted it (time travel too far
        back), else a :class:`~lakesdk.exceptions.DataFileMissingError`; or when its size is not
        the one its commit recorded (cut short, replaced): a
        :class:`~lakesdk.exceptions.CorruptFileError`.  A log file cut at a block boundary would
        otherwise read as a shorter valid one and drop committed updates without a word."""
        moment = (self.as_of, self.clock)
        cache = self._cached if keep is None and self.replaced is self._hidden else None
        if cache is not None and moment in cache.verified:
            return      # a view of the same timeline and moment checked the same listing
        if keep is None:       # every file: checked on the rows, an ExpectedFile built only for a failure
            present, none = self._present(), cast(dict[str, int], {})
            failed = False
            for _, expected, _, part, _, kind, name in self._expected_rows():
                size = present.get(part, none).get(name)
                if size is None or (expected and size != expected and (kind == "base" or size < expected)):
                    failed = True      # missing, or a size _size_differs rejects
                    break
            if not failed:
                if cache is not None:
                    view_cache.add_verified(cache, moment)
                return
        from lakesdk.read.view_damage import raise_damage
        raise_damage(self, keep)

    @property
    def log_instants(self) -> frozenset[str]:
        """Requested times of the delta commits whose log blocks a read of this view applies:
        the visible ones and those of the timeline history whose log files the view attached."""
        self._by_key()
        archived = self._archived or {}
        return frozenset(self._completion) | frozenset(archived)

    def partitions(self) -> list[str]:
        return sorted({g.partition for g in self.file_groups})

    def partition_values(self, partition: str) -> dict[str, str | None]:
        return parse_partition_path(partition, self.config.partition_fields, hive_style=self.config.hive_style,
                                    urlencoded=self.config.urlencode)

    def latest_slices(self, partition_filter: PartitionFilter | None = None,
                      file_groups: set[tuple[str, str]] | None = None) -> list[FileSlice]:
        """The latest file slice of each file group (filtered); raises when a file of one of
        them that the timeline's write stats record is missing (:meth:`verify`)."""
        if file_groups is None and partition_filter is None:
            self.verify()
            return [g.slices[-1] for g in self._by_key() if g.slices]
        self.verify(lambda e: (file_groups is None or (e.partition, e.file_id) in file_groups)
                    and (partition_filter is None or partition_filter(self.partition_values(e.partition))))
        out = []
        for g in self.file_groups:
            if file_groups is not None and (g.partition, g.file_id) not in file_groups:
                continue
            if partition_filter is not None and not partition_filter(self.partition_values(g.partition)):
                continue
            if g.latest is not None:
                out.append(g.latest)
        return out

    def any_base_path(self) -> str | None:
        """A base file of the latest slices (whose footer holds the schema), None without one."""
        return next((s.base_path for s in self.latest_slices() if s.base_path), None)

    def __repr__(self) -> str:
        n = len(self._groups) if self._groups is not None else "?"
        return f"<FileSystemView as_of={self.as_of or 'latest'} file_groups={n}>"
