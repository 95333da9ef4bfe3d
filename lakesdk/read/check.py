"""Integrity check of a table: ``table.inspect.check()`` and ``lakesdk check PATH``.

The check reads, never writes.  It verifies

* ``hoodie.properties``: it parses, names a table type and a record key where the table
  needs them, and its ``hoodie.table.checksum`` matches;
* the timeline: every file of the active timeline is an instant whose completed metadata
  parses;
* data files: every file of every file slice a reader can reach (the latest state, and time
  travel to each active commit), per the write stats of the commits that wrote it, exists with
  the size its write stat records (a file a clean deleted is not needed);
* orphans: no base or log file outside every commit (active or archived) and every pending
  write;
* Hudi's metadata table, when ``hoodie.properties`` names its ``files`` partition: it lists
  exactly the data files of the completed instants, with their sizes (what Hudi's readers list).

Each problem has a stable name (:data:`PROBLEM_NAMES`); the report is ``ok`` without any.
When a completed instant does not parse, the data files are not checked: the timeline cannot
say which files it needs until the instant is repaired.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass
from typing import Any

from lakesdk.exceptions import LakeError, TableConfigError, TableNotFoundError
from lakesdk.format.file_naming import BaseFile, LogFile, is_base_file, is_log_file
from lakesdk.format.instant import WRITE_ACTIONS, Instant
from lakesdk.format.properties import parse_properties
from lakesdk.format.table_config import PROPERTIES_PATH, TableConfig, table_checksum
from lakesdk.storage import Storage

__all__ = ["Problem", "CheckReport", "check_table", "PROBLEM_NAMES"]

#: the stable names of the problems a check reports
PROBLEM_NAMES = ("missing_property", "bad_property", "bad_checksum", "unparsable_instant", "missing_file",
                 "size_mismatch", "orphan_file", "metadata_table_mismatch")


@dataclass(frozen=True)
class Problem:
    """One problem: its stable ``name``, the file it is about and what was found."""

    name: str
    path: str
    detail: str
    instant: str | None = None

    def __repr__(self) -> str:
        return f"{self.name}: {self.path}: {self.detail}"


@dataclass(frozen=True)
class CheckReport:
    """What :func:`check_table` found; ``ok`` when there is no problem."""

    table: str
    path: str
    problems: tuple[Problem, ...] = ()
    instants: int = 0
    files_checked: int = 0

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def names(self) -> list[str]:
        """The names of the problems found (sorted, without repeats)."""
        return sorted({p.name for p in self.problems})

    def by_name(self, name: str) -> list[Problem]:
        return [p for p in self.problems if p.name == name]

    def __bool__(self) -> bool:
        return self.ok

    def __repr__(self) -> str:
        head = (f"CheckReport({self.table!r} at {self.path}: {'ok' if self.ok else f'{len(self.problems)} problems'}; "
                f"{self.instants} active instants, {self.files_checked} data files checked)")
        if self.ok:
            return head
        return "\n".join([head] + [f"  {p!r}" for p in self.problems])

    def _repr_html_(self) -> str:
        import html
        state = "<b style='color:green'>ok</b>" if self.ok else f"<b style='color:red'>{len(self.problems)} problems</b>"
        rows = "".join(f"<tr><td>{html.escape(p.name)}</td><td><code>{html.escape(p.path)}</code></td>"
                       f"<td>{html.escape(p.detail)}</td></tr>" for p in self.problems)
        table = f"<table><tr><th>problem</th><th>file</th><th>detail</th></tr>{rows}</table>" if rows else ""
        return (f"<div><b>CheckReport</b> <code>{html.escape(self.table)}</code>: {state} ({self.instants} active "
                f"instants, {self.files_checked} data files checked){table}</div>")


def untyped_merge_on_read(storage: Storage, config: TableConfig) -> str | None:
    """What shows that a table without ``hoodie.table.type`` (which means COPY_ON_WRITE) is a
    merge-on-read table whose properties lost the key: a delta commit or a log file (None when
    nothing does)."""
    if "hoodie.table.type" in config.props:
        return None
    from lakesdk.read.view import list_data_files
    timeline = [e.name for e in _safe_list(storage, config.timeline_dir)]
    delta = next((n for n in timeline if ".deltacommit" in n), None)
    if delta:
        return f"delta commit {delta}"
    # compactions exist on merge-on-read tables only (their plan files stay on the timeline)
    compaction = next((n for n in timeline if ".compaction." in n or ".logcompaction." in n), None)
    if compaction:
        return f"compaction {compaction}"
    log = next((f.path for f in list_data_files(storage) if is_log_file(posixpath.basename(f.path))), None)
    return f"log file {log}" if log else None


def _check_properties(storage: Storage, problems: list[Problem]) -> TableConfig | None:
    import warnings
    try:
        text = storage.read(PROPERTIES_PATH).decode("utf-8", errors="replace")
    except FileNotFoundError:
        raise TableNotFoundError(f"no Hudi table at {storage.base_url!r}: {PROPERTIES_PATH} does not exist",
                                 path=storage.base_url) from None
    try:
        props = dict(parse_properties(text))
    except (LakeError, ValueError) as e:
        problems.append(Problem("bad_property", PROPERTIES_PATH, str(e)))
        return None
    reported: set[str] = set()

    def missing(key: str, detail: str) -> None:
        reported.add(key)
        problems.append(Problem("missing_property", PROPERTIES_PATH, f"{key}: {detail}"))
    for key in ("hoodie.table.name", "hoodie.table.version", "hoodie.table.checksum"):
        if not props.get(key):
            missing(key, "missing or empty")
    if "hoodie.table.recordkey.fields" in props and any(
            not k.strip() for k in props["hoodie.table.recordkey.fields"].split(",")):
        missing("hoodie.table.recordkey.fields", f"{props['hoodie.table.recordkey.fields']!r} names an empty record "
                "key field")
    cs = props.get("hoodie.table.checksum")
    if cs and props.get("hoodie.table.name"):
        name, db = props["hoodie.table.name"], props.get("hoodie.database.name", "") or ""
        want = table_checksum(db, name)
        if not cs.strip().isdigit() or int(cs) not in (want, table_checksum("", name)):
            reported.add("hoodie.table.checksum")
            problems.append(Problem("bad_checksum", PROPERTIES_PATH,
                                    f"hoodie.table.checksum={cs} does not match table {db}.{name}: expected {want}"))
    config = TableConfig(props)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            config.validate()
    except TableConfigError as e:
        if e.key not in reported:
            problems.append(Problem("bad_property", PROPERTIES_PATH, str(e)))
    except LakeError as e:
        problems.append(Problem("bad_property", PROPERTIES_PATH, str(e)))
    try:
        config.layout_version  # noqa: B018
        config.timeline_dir  # noqa: B018
    except (LakeError, KeyError, ValueError):
        return None
    found = untyped_merge_on_read(storage, config)
    if found:
        missing("hoodie.table.type", f"missing (which means COPY_ON_WRITE), but the table has {found}: expected "
                "MERGE_ON_READ")
    return config


def _history(storage: Storage, config: TableConfig, problems: list[Problem]) -> list[tuple[Instant, Any]]:
    """(instant, metadata bytes) of the timeline history (layout 2)."""
    if config.layout_version < 2:
        return []
    from lakesdk.format.lsm_timeline import history_dir
    from lakesdk.timeline.history import LSMTimeline
    try:
        return [(a.instant, a.metadata) for a in LSMTimeline(storage, config).load()]
    except Exception as e:  # noqa: BLE001 - reported, the check goes on
        problems.append(Problem("unparsable_instant", history_dir(config), f"the timeline history does not read: {e}"))
        return []


def check_table(storage: Storage, *, name: str | None = None) -> CheckReport:
    """Check the table at ``storage`` (see the module doc)."""
    from lakesdk.format.clean_metadata import CleanMetadataData
    from lakesdk.format.commit_metadata import CommitMetadata
    from lakesdk.format.timeline import Timeline
    from lakesdk.read.view import FileSystemView, list_data_files
    from lakesdk.timeline.store import TimelineStore

    problems: list[Problem] = []
    config = _check_properties(storage, problems)
    table = name or (config.props.get("hoodie.table.name") if config is not None else None) or storage.base_url
    if config is None:
        return CheckReport(table, storage.base_url, tuple(problems))
    layout = config.layout_version
    store = TimelineStore(storage, config)
    # -- timeline ----------------------------------------------------------------------------------
    try:
        entries = [e.name for e in storage.list(store.dir) if not e.is_dir]
    except FileNotFoundError:
        entries = []
        problems.append(Problem("unparsable_instant", store.dir, "the timeline folder does not exist"))
    names = []
    for n in entries:
        if not n[:1].isdigit() or n.endswith((".tmp", ".crc")):
            continue
        try:
            if not Instant.is_timeline_file(n):
                raise LakeError("not a timeline file name (expected <time>[_<time>].<action>[.<state>])")
            Instant.parse_file_name(n)
        except LakeError as exc:
            problems.append(Problem("unparsable_instant", f"{store.dir}/{n}", str(exc)))
            continue
        names.append(n)
    timeline = Timeline.from_file_names(names, layout=layout)
    metadata: dict[str, CommitMetadata] = {}
    for inst in timeline.commits:
        try:
            metadata[inst.requested] = store.commit_metadata(inst)
        except LakeError as exc:
            problems.append(Problem("unparsable_instant", store.path(inst), str(exc), inst.requested))
    deleted: set[str] = set()          # partition/name of every file a clean deleted
    history = _history(storage, config, problems)
    for inst in timeline.instants:
        if inst.action == "clean" and inst.is_completed:
            try:
                md = store.metadata(inst, CleanMetadataData)
            except (LakeError, FileNotFoundError) as exc:
                problems.append(Problem("unparsable_instant", store.path(inst), str(exc), inst.requested))
                continue
            deleted.update(posixpath.join(p, n) for p, ns in md.deleted.items() for n in ns)
    archived_writes: dict[str, CommitMetadata] = {}
    for inst, data in history:
        try:
            if inst.action == "clean" and data:
                md = CleanMetadataData.parse(data)
                deleted.update(posixpath.join(p, n) for p, ns in md.deleted.items() for n in ns)
            elif inst.completed_action in WRITE_ACTIONS and data:
                archived_writes[inst.requested] = CommitMetadata.parse(
                    data, layout=layout, replace=inst.completed_action == "replacecommit")
        except LakeError as exc:
            problems.append(Problem("unparsable_instant", f"timeline history {inst.requested}", str(exc),
                                    inst.requested))
    # -- data files a reader can reach ---------------------------------------------------------------
    files = list_data_files(storage)
    present = {f.path: f.size for f in files}
    if not any(p.name == "unparsable_instant" for p in problems):
        seen: set[str] = set()
        moments: list[str | None] = [None] + [i.requested for i in timeline.commits]
        for moment in moments:
            view = FileSystemView(storage, config, store, timeline, as_of=moment, files=files)
            for e in view.expected_files():
                if e.path in seen:
                    continue
                seen.add(e.path)
                size = present.get(e.path)
                if size is None:
                    if moment is not None and e.path in deleted:
                        continue                    # time travel that far back is refused (cleaned)
                    why = "a clean deleted it" if e.path in deleted else "it is not in storage"
                    problems.append(Problem("missing_file", e.path,
                                            f"{e.kind} file of file group {e.file_id} written by commit {e.instant} "
                                            f"({e.size} bytes) is missing: {why}", e.instant))
                elif e.size_differs(size):
                    problems.append(Problem("size_mismatch", e.path,
                                            f"{e.kind} file written by commit {e.instant}: its write stat records "
                                            f"{e.size} bytes, found {size}", e.instant))
    # -- orphans ---------------------------------------------------------------------------------------
    written: set[str] = set()
    for cm in list(metadata.values()) + list(archived_writes.values()):
        for st in cm.write_stats:
            written.update(st.written_paths)
    pending = {i.requested for i in timeline.pending}
    commits = {i.requested for i in timeline.commits} | set(archived_writes)
    first = min((i.requested for i in timeline.instants if i.action != "savepoint"), default=None)
    unread_history = layout < 2 and any(True for _ in _safe_list(storage, ".hoodie/archived"))
    for f in files:
        if f.path in written:
            continue
        fname = posixpath.basename(f.path)
        if is_base_file(fname):
            at = BaseFile.parse(fname).instant
            if at in pending or (unread_history and first is not None and at < first):
                continue
        elif is_log_file(fname):
            at = LogFile.parse(fname).instant
            # a log file of a pending write, or (layout 1) appended to a base of a known commit
            if at in pending or (layout < 2 and (at in commits or (unread_history and first is not None
                                                                    and at < first))):
                continue
        else:
            continue
        problems.append(Problem("orphan_file", f.path,
                                f"no commit's write stats and no pending write name this file (instant {at}): "
                                "a left-over of a failed write, or a file copied in", at))
    if not any(p.name == "unparsable_instant" for p in problems):
        done = {i.requested for i in timeline.completed} | {i.requested for i, _ in history if i.is_completed}
        _check_metadata_table(storage, config, timeline, files, done, problems)
    return CheckReport(table, storage.base_url, tuple(problems), len(timeline), len(files))


def _check_metadata_table(storage: Storage, config: TableConfig, timeline: Any, files: list[Any], done: set[str],
                          problems: list[Problem]) -> None:
    """``metadata_table_mismatch``: the MDT's files partition against storage."""
    from lakesdk.format.metadata_table import METADATA_DIR, available_partitions
    from lakesdk.read.metadata_table import MetadataTableReader
    if "files" not in available_partitions(config.props) or config.version < 8:
        return
    try:
        listed = {posixpath.join(lst.partition, n) if lst.partition else n: size
                  for lst in MetadataTableReader(storage, timeline).listings() for n, size in lst.files.items()}
    except (LakeError, FileNotFoundError) as exc:
        problems.append(Problem("metadata_table_mismatch", METADATA_DIR, f"the metadata table cannot be read: {exc}"))
        return
    stored = {}
    for f in files:
        name = posixpath.basename(f.path)
        at = BaseFile.parse(name).instant if is_base_file(name) else LogFile.parse(name).instant
        if at in done:
            stored[f.path] = f.size
    for path in sorted(set(listed) | set(stored)):
        if path not in stored:
            problems.append(Problem("metadata_table_mismatch", path, "the metadata table lists this file, which no "
                                    "completed instant holds in storage: Hudi's readers would look for it"))
        elif path not in listed:
            problems.append(Problem("metadata_table_mismatch", path, "a completed instant wrote this file and the "
                                    "metadata table does not list it: Hudi's readers would not see its records"))
        elif listed[path] != stored[path]:
            problems.append(Problem("metadata_table_mismatch", path, f"the metadata table lists {listed[path]} bytes, "
                                    f"storage holds {stored[path]}"))


def _safe_list(storage: Storage, rel: str) -> list[Any]:
    try:
        return [e for e in storage.list(rel) if not e.is_dir]
    except FileNotFoundError:
        return []
