"""Commit metadata: what a commit, deltacommit or replacecommit wrote.

Encoding: table version 6 (layout 1) stores it as JSON (Jackson's
``HoodieCommitMetadata``); table version 8+ (layout 2) as an Avro object container file
with one ``org.apache.hudi.avro.model.HoodieCommitMetadata`` (or
``HoodieReplaceCommitMetadata``) record.  ``extraMetadata["schema"]`` holds the table's
Avro schema without meta fields.
"""

from __future__ import annotations

import io
import json
from dataclasses import asdict, dataclass, field, fields
from functools import lru_cache
from importlib import resources
from typing import Any

import fastavro

from lakesdk.exceptions import CorruptTimelineError

__all__ = ["WriteStat", "CommitMetadata"]


@dataclass
class WriteStat:
    """Statistics of one data file written by a commit (``HoodieWriteStat``)."""

    fileId: str
    path: str
    partitionPath: str
    prevCommit: str = "null"
    numWrites: int = 0
    numDeletes: int = 0
    numUpdateWrites: int = 0
    numInserts: int = 0
    totalWriteBytes: int = 0
    totalWriteErrors: int = 0
    fileSizeInBytes: int = 0
    totalLogRecords: int = 0
    totalLogBlocks: int = 0
    totalCorruptLogBlock: int = 0
    totalRollbackBlocks: int = 0
    totalUpdatedRecordsCompacted: int = 0
    totalLogFilesCompacted: int = 0
    totalLogSizeCompacted: int = 0
    totalLogReadTimeMs: int = 0
    numUpdates: int = 0
    logVersion: int | None = None
    logOffset: int | None = None
    baseFile: str | None = None
    logFiles: list[str] | None = None
    prevBaseFile: str | None = None
    minEventTime: int | None = None
    maxEventTime: int | None = None
    totalLogFiles: int | None = None
    tempPath: str | None = None
    runtimeStats: dict[str, int] | None = None
    cdcStats: dict[str, int] | None = None

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "WriteStat":
        names = {f.name for f in fields(cls)}
        kw = {k: v for k, v in d.items() if k in names}
        for req in ("fileId", "path", "partitionPath"):
            kw.setdefault(req, None)
        for f in fields(cls):
            if kw.get(f.name) is None and f.type in ("int",):
                kw[f.name] = 0
        if kw.get("prevCommit") is None:
            kw["prevCommit"] = "null"
        return cls(**kw)

    @property
    def file_name(self) -> str:
        return (self.path or "").rsplit("/", 1)[-1]


@dataclass
class CommitMetadata:
    """``HoodieCommitMetadata`` / ``HoodieReplaceCommitMetadata``."""

    partition_to_write_stats: dict[str, list[WriteStat]] = field(default_factory=dict)
    extra_metadata: dict[str, str] = field(default_factory=dict)
    operation_type: str | None = None
    compacted: bool = False
    partition_to_replace_file_ids: dict[str, list[str]] | None = None

    # -- views --------------------------------------------------------------------------
    @property
    def write_stats(self) -> list[WriteStat]:
        return [s for stats in self.partition_to_write_stats.values() for s in stats]

    @property
    def schema(self) -> dict | None:
        raw = self.extra_metadata.get("schema")
        if not raw:
            return None
        try:
            return json.loads(raw)
        except json.JSONDecodeError:
            return None

    @property
    def is_replace(self) -> bool:
        return self.partition_to_replace_file_ids is not None

    def totals(self) -> dict[str, int]:
        s = self.write_stats
        return {
            "inserted": sum(w.numInserts for w in s),
            "updated": sum(w.numUpdateWrites for w in s),
            "deleted": sum(w.numDeletes for w in s),
            "written": sum(w.numWrites for w in s),
            "files": len(s),
            "bytes": sum(w.totalWriteBytes for w in s),
            "partitions": len(self.partition_to_write_stats),
        }

    # -- decoding -------------------------------------------------------------------------
    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "CommitMetadata":
        p2w = {p: [WriteStat.from_dict(s) for s in (stats or [])]
               for p, stats in (d.get("partitionToWriteStats") or {}).items()}
        rep = d.get("partitionToReplaceFileIds")
        return cls(
            partition_to_write_stats=p2w,
            extra_metadata=dict(d.get("extraMetadata") or {}),
            operation_type=d.get("operationType"),
            compacted=bool(d.get("compacted") or False),
            partition_to_replace_file_ids={k: list(v or []) for k, v in rep.items()} if rep is not None else None,
        )

    @classmethod
    def parse(cls, data: bytes, *, layout: int, replace: bool = False) -> "CommitMetadata":
        """Decode timeline-file bytes: JSON on layout 1, Avro on layout 2 (empty = no stats)."""
        if not data or not data.strip():
            return cls(partition_to_replace_file_ids={} if replace else None)
        if data[:4] == b"Obj\x01":
            try:
                recs = list(fastavro.reader(io.BytesIO(data)))
            except Exception as exc:
                raise CorruptTimelineError(f"commit metadata is not a valid Avro file: {exc}") from exc
            if not recs:
                return cls()
            return cls.from_dict(recs[0])
        try:
            d = json.loads(data.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise CorruptTimelineError(
                f"commit metadata is neither Avro nor JSON (layout {layout}): {exc}") from exc
        if not isinstance(d, dict):
            raise CorruptTimelineError("commit metadata JSON is not an object")
        return cls.from_dict(d)

    # -- encoding -------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "partitionToWriteStats": {p: [asdict(s) for s in stats] for p, stats in self.partition_to_write_stats.items()},
            "extraMetadata": dict(self.extra_metadata),
            "version": 1,
            "operationType": self.operation_type,
        }
        if self.partition_to_replace_file_ids is not None:
            d["partitionToReplaceFileIds"] = self.partition_to_replace_file_ids
        else:
            d["compacted"] = self.compacted
        return d

    def to_avro(self) -> bytes:
        """Avro object container bytes, as Hudi 1.0 writes them (codec null)."""
        schema = _schema("HoodieReplaceCommitMetadata" if self.is_replace else "HoodieCommitMetadata")
        buf = io.BytesIO()
        fastavro.writer(buf, schema, [self.to_dict()], codec="null")
        return buf.getvalue()

    def to_json(self) -> bytes:
        return json.dumps(self.to_dict(), indent=2).encode("utf-8")


@lru_cache(maxsize=None)
def _schema(name: str) -> Any:
    text = resources.files("lakesdk.format").joinpath(f"schemas/{name}.avsc").read_text()
    return fastavro.parse_schema(json.loads(text))
