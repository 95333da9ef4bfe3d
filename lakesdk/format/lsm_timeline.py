"""The timeline history of table version 8+: Hudi 1.0's LSM timeline.

Archival moves completed instants out of the active timeline into Parquet files under
``.hoodie/timeline/history/`` (``hoodie.timeline.history.path``)::

    _version_                        the latest snapshot version N (UTF-8 digits)
    manifest_<N>                     JSON {"files": [{"fileName": ..., "fileLen": ...}, ...]}:
                                     the Parquet files that make up snapshot N
    <min>_<max>_<level>.parquet      one row per instant; <min> = smallest requested time,
                                     <max> = largest completion time in the file, <level> = LSM
                                     layer (0 for freshly archived batches)

Parquet columns (``HoodieLSMTimelineInstant``): ``instantTime``, ``completionTime``,
``action`` (the completed action: commit, deltacommit, replacecommit, clean, rollback,
restore, savepoint), ``metadata`` (the bytes of the completed timeline file), ``plan`` (the
bytes of the requested file for clean, compaction, clustering/replacecommit), ``version``.

Every append writes a new level-0 file and a new manifest, then ``_version_``; when a level
holds 10 files they are merged into one file of the next level (universal compaction).
Readers read ``_version_``, then that manifest, then its files, so a reader never sees a
half-written snapshot.  Files that no manifest of the last 3 versions names are deleted.

The ``hudi`` reader (hudi-rs) does not read this history; Hudi's Java readers do.

>>> parse_history_file_name("20250101000000000_20250101000500000_0.parquet")
('20250101000000000', '20250101000500000', 0)
"""

from __future__ import annotations

import io
import json
import re
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Iterable

from lakesdk.exceptions import CorruptTimelineError
from lakesdk.format.instant import Instant
from lakesdk.format.table_config import TableConfig
from lakesdk.storage import Storage

__all__ = ["ArchivedInstant", "LSMTimeline", "history_dir", "parse_history_file_name", "COMPACTION_BATCH"]

VERSION_FILE = "_version_"
MANIFEST_PREFIX = "manifest_"
COMPACTION_BATCH = 10          # files per layer that trigger a merge into the next layer
KEEP_VERSIONS = 3              # snapshot versions kept for readers
_FILE_RE = re.compile(r"^(\d+)_(\d+)_(\d+)\.parquet$")
_MANIFEST_RE = re.compile(r"^manifest_(\d+)$")


def parse_history_file_name(name: str) -> tuple[str, str, int]:
    m = _FILE_RE.match(name)
    if not m:
        raise CorruptTimelineError(f"{name!r} is not a history file name (<min>_<max>_<level>.parquet)")
    return m.group(1), m.group(2), int(m.group(3))


def history_dir(config: TableConfig) -> str:
    """Folder of the LSM history, relative to the table base (layout 2 only)."""
    return f"{config.timeline_dir}/" + config.props.get("hoodie.timeline.history.path", "history")


@lru_cache(maxsize=None)
def _avro_schema_text() -> str:
    return resources.files("lakesdk.format").joinpath("schemas/HoodieLSMTimelineInstant.avsc").read_text()


@dataclass(frozen=True)
class ArchivedInstant:
    """One archived instant: the completed instant, its completed file's bytes and its plan."""

    instant: Instant
    metadata: bytes | None = None
    plan: bytes | None = None

    @property
    def action(self) -> str:
        return self.instant.completed_action


class LSMTimeline:
    """Reads and appends the history of one table."""

    def __init__(self, storage: Storage, config: TableConfig) -> None:
        if config.layout_version < 2:
            raise CorruptTimelineError("the LSM timeline history exists on timeline layout 2 (table version 8+) only")
        self.storage = storage
        self.dir = history_dir(config)

    # -- snapshot versions --------------------------------------------------------------------
    def versions(self) -> list[int]:
        out = []
        for e in self.storage.list(self.dir):
            m = _MANIFEST_RE.match(e.name)
            if m and not e.is_dir:
                out.append(int(m.group(1)))
        return sorted(out)

    def latest_version(self) -> int:
        """The version ``_version_`` names (else the largest manifest), -1 when empty."""
        try:
            return int(self.storage.read(f"{self.dir}/{VERSION_FILE}").decode("utf-8").strip())
        except (FileNotFoundError, ValueError):
            vs = self.versions()
            return vs[-1] if vs else -1

    def manifest(self, version: int | None = None) -> list[tuple[str, int]]:
        """(file name, length) of the files of snapshot ``version`` (default latest)."""
        v = self.latest_version() if version is None else version
        if v < 0:
            return []
        try:
            d = json.loads(self.storage.read(f"{self.dir}/{MANIFEST_PREFIX}{v}").decode("utf-8") or "{}")
        except FileNotFoundError:
            raise CorruptTimelineError(f"{self.dir}/{VERSION_FILE} names version {v} but manifest_{v} is missing") from None
        return [(f["fileName"], int(f.get("fileLen") or 0)) for f in d.get("files") or []]

    # -- reading ------------------------------------------------------------------------------
    def load(self, *, with_payload: bool = True) -> list[ArchivedInstant]:
        """Every archived instant of the latest snapshot, ordered by requested time."""
        import pyarrow.parquet as pq
        # the plan tells a compaction (commit) and a clustering (replacecommit) apart
        cols = ["instantTime", "completionTime", "action", "plan"] + (["metadata"] if with_payload else [])
        seen: dict[tuple[str, str], ArchivedInstant] = {}
        for name, _ in self.manifest():
            with self.storage.open_input(f"{self.dir}/{name}") as f:
                t = pq.read_table(f, columns=cols)
            for row in t.to_pylist():
                action = row["action"] or ""
                plan = row.get("plan")
                if action == "commit" and plan:
                    action = "compaction"        # a completed compaction keeps its plan
                elif action == "deltacommit" and plan:
                    action = "logcompaction"
                elif action == "replacecommit" and plan:
                    action = "clustering"          # insert_overwrite leaves its requested file empty
                inst = Instant(action, "completed", row["instantTime"], row["completionTime"])
                seen[(inst.requested, inst.completed_action)] = ArchivedInstant(inst, row.get("metadata"), plan)
        return sorted(seen.values(), key=lambda a: (a.instant.requested, a.instant.completed or ""))

    def instants(self) -> list[Instant]:
        return [a.instant for a in self.load(with_payload=False)]

    # -- writing ------------------------------------------------------------------------------
    @staticmethod
    def _parquet(entries: Iterable[ArchivedInstant]) -> bytes:
        import pyarrow as pa
        import pyarrow.parquet as pq
        rows = sorted(entries, key=lambda a: (a.instant.requested, a.instant.completed or ""))
        schema = pa.schema([
            pa.field("instantTime", pa.string()), pa.field("completionTime", pa.string()),
            pa.field("action", pa.string()), pa.field("metadata", pa.binary()), pa.field("plan", pa.binary()),
            pa.field("version", pa.int32(), nullable=False),
        ], metadata={"parquet.avro.schema": json.dumps(json.loads(_avro_schema_text())),
                     "writer.model.name": "avro"})
        table = pa.table({
            "instantTime": [a.instant.requested for a in rows],
            "completionTime": [a.instant.completed for a in rows],
            "action": [a.action for a in rows],
            "metadata": [a.metadata for a in rows],
            "plan": [a.plan for a in rows],
            "version": pa.array([1] * len(rows), pa.int32()),
        }, schema=schema)
        buf = io.BytesIO()
        pq.write_table(table, buf, compression="snappy")
        return buf.getvalue()

    @staticmethod
    def _file_name(entries: list[ArchivedInstant], level: int) -> str:
        lo = min(a.instant.requested for a in entries)
        hi = max(a.instant.completed or a.instant.requested for a in entries)
        return f"{lo}_{hi}_{level}.parquet"

    def _publish(self, files: list[tuple[str, int]]) -> int:
        version = max(self.latest_version(), max(self.versions(), default=0)) + 1
        body = json.dumps({"files": [{"fileName": n, "fileLen": size} for n, size in sorted(files)]}, indent=2)
        if not self.storage.create_exclusive(f"{self.dir}/{MANIFEST_PREFIX}{version}", body.encode("utf-8")):
            raise CorruptTimelineError(f"{self.dir}/{MANIFEST_PREFIX}{version} already exists: "
                                       "another archiver runs at the same time")
        self.storage.write(f"{self.dir}/{VERSION_FILE}", str(version).encode("utf-8"))
        return version

    def append(self, entries: list[ArchivedInstant]) -> str | None:
        """Write ``entries`` as a new level-0 file, publish a snapshot, compact and clean.
        Returns the name of the level-0 file (None when there was nothing to write)."""
        if not entries:
            return None
        name = self._file_name(entries, 0)
        data = self._parquet(entries)
        self.storage.write(f"{self.dir}/{name}", data)
        files = [f for f in self.manifest() if f[0] != name] + [(name, len(data))]
        self._publish(files)
        self.compact()
        return name

    def compact(self, batch: int = COMPACTION_BATCH) -> None:
        """Merge ``batch`` files of a level into one file of the next level, level by level."""
        import pyarrow.parquet as pq
        level = 0
        changed = False
        while True:
            files = self.manifest()
            at = sorted(f for f in files if parse_history_file_name(f[0])[2] == level)
            if len(at) < batch:
                if not any(parse_history_file_name(f[0])[2] > level for f in files):
                    break
                level += 1
                continue
            group = at[:batch]
            entries: list[ArchivedInstant] = []
            for name, _ in group:
                with self.storage.open_input(f"{self.dir}/{name}") as f:
                    for row in pq.read_table(f).to_pylist():
                        inst = Instant(row["action"], "completed", row["instantTime"], row["completionTime"])
                        entries.append(ArchivedInstant(inst, row.get("metadata"), row.get("plan")))
            merged = self._file_name(entries, level + 1)
            data = self._parquet(entries)
            self.storage.write(f"{self.dir}/{merged}", data)
            names = {n for n, _ in group}
            self._publish([f for f in files if f[0] not in names and f[0] != merged] + [(merged, len(data))])
            changed = True
        if changed:
            self.clean()

    def clean(self, keep: int = KEEP_VERSIONS) -> None:
        """Delete manifests older than the last ``keep`` versions and the files none of the
        kept manifests name."""
        versions = self.versions()
        kept = versions[-keep:]
        live = {n for v in kept for n, _ in self.manifest(v)}
        for v in versions[:-keep]:
            self.storage.delete(f"{self.dir}/{MANIFEST_PREFIX}{v}")
        for e in self.storage.list(self.dir):
            if _FILE_RE.match(e.name) and e.name not in live:
                self.storage.delete(e.path)

    def __repr__(self) -> str:
        return f"<LSMTimeline {self.dir} version={self.latest_version()}>"
