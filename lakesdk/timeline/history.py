"""Reading and writing the timeline history of table version 8+ (Hudi 1.0's LSM timeline; the
layout and its grammar are :mod:`lakesdk.format.lsm_timeline`)."""

from __future__ import annotations

import io
import json
from typing import Any, Iterable

from lakesdk.exceptions import CorruptFileError, CorruptTimelineError
from lakesdk.format.damaged import damaged_file
from lakesdk.format.instant import Instant
from lakesdk.format.lsm_timeline import (
    _ARCHIVED_ACTIONS,
    _FILE_RE,
    _MANIFEST_RE,
    _TIME_RE,
    COMPACTION_BATCH,
    KEEP_VERSIONS,
    MANIFEST_PREFIX,
    VERSION_FILE,
    ArchivedInstant,
    _avro_schema_text,
    history_dir,
    parse_history_file_name,
    parse_manifest,
)
from lakesdk.format.table_config import TableConfig
from lakesdk.storage import Storage

__all__ = ["LSMTimeline"]


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
        # like Hudi (LSMTimeline.latestSnapshotVersion): an unreadable _version_ falls back to the listing
        try:
            text = self.storage.read(f"{self.dir}/{VERSION_FILE}").decode("utf-8").strip()
            if text.isascii() and text.isdigit():
                return int(text)
        except (FileNotFoundError, ValueError):
            pass
        vs = self.versions()
        return vs[-1] if vs else -1

    def manifest(self, version: int | None = None) -> list[tuple[str, int]]:
        """(file name, length) of the files of snapshot ``version`` (default latest)."""
        v = self.latest_version() if version is None else version
        if v < 0:
            return []
        path = f"{self.dir}/{MANIFEST_PREFIX}{v}"
        try:
            data = self.storage.read(path)
        except FileNotFoundError:
            raise CorruptTimelineError(f"{self.dir}/{VERSION_FILE} names version {v} but manifest_{v} is missing") from None
        return parse_manifest(data, path)

    # -- reading ------------------------------------------------------------------------------
    def load(self, *, with_payload: bool = True) -> list[ArchivedInstant]:
        """Every archived instant of the latest snapshot, ordered by requested time."""
        # the plan tells a compaction (commit) and a clustering (replacecommit) apart
        cols = ["instantTime", "completionTime", "action", "plan"] + (["metadata"] if with_payload else [])
        seen: dict[tuple[str, str], ArchivedInstant] = {}
        for name, _ in self.manifest():
            t = self._read(name, cols)
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

    def _read(self, name: str, columns: list[str] | None = None) -> Any:
        """A history file's rows, checked: damaged bytes or rows that are not archived
        instants raise :class:`CorruptFileError` naming the file."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        path = f"{self.dir}/{name}"
        with self.storage.open_input(path) as f, damaged_file(path, "timeline history file"):
            t = pq.read_table(f, columns=columns)
            t.validate(full=True)  # Parquet readers do not check that strings are UTF-8
        for col in ("instantTime", "completionTime", "action"):
            if col not in t.column_names or not pa.types.is_string(t.schema.field(col).type):
                raise CorruptFileError(f"{path}: the timeline history file has no string column {col!r}; "
                                       "restore it from a backup or from a copy of the table", path=path)
        for row in t.select(["instantTime", "completionTime", "action"]).to_pylist():
            if not (isinstance(row["instantTime"], str) and _TIME_RE.fullmatch(row["instantTime"])
                    and (row["completionTime"] is None or _TIME_RE.fullmatch(row["completionTime"]))
                    and row["action"] in _ARCHIVED_ACTIONS):
                raise CorruptFileError(f"{path}: the timeline history file holds a row that is not an "
                                       f"archived instant ({row!r:.120}); restore it from a backup or from "
                                       "a copy of the table", path=path)
        return t

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
                for row in self._read(name).to_pylist():
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
