"""Timeline records of clean, savepoint and restore instants (Avro).

Every file is an Avro object container file (codec null) holding one record of the
``org.apache.hudi.avro.model`` schema named below; the ``.avsc`` files under
``lakesdk/format/schemas/`` carry the record and field names Hudi's readers resolve::

    T.clean.requested      HoodieCleanerPlan        files to delete, earliest instant to retain
    T.clean.inflight       (empty)
    T_C.clean              HoodieCleanMetadata      files deleted per partition
    T.savepoint.inflight   (empty)                  T = requested time of the savepointed commit
    T_C.savepoint          HoodieSavepointMetadata  file names of every partition's slices as of T
    R.restore.requested    HoodieRestorePlan        instants to roll back, newest first
    R.restore.inflight     (empty)
    R_C.restore            HoodieRestoreMetadata    one HoodieRollbackMetadata per rolled-back instant

Clean plans are version 2: ``filePathsToBeDeletedPerPartition`` names full paths; clean
metadata (version 2) names files by their file name.  Savepointed instants that a clean
saw are kept in ``extraMetadata["savepointed_timestamps"]`` (comma separated), which the
next clean compares with to decide whether it may clean incrementally.

>>> p = CleanerPlanData("KEEP_LATEST_COMMITS", "20250101000000000", "commit", "20250102000000000",
...                     {"a": ("/t/a/f1_0-1-1_20241231000000000.parquet",)})
>>> CleanerPlanData.parse(p.to_avro()) == p
True
"""

from __future__ import annotations

import io
import json
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from typing import Any

import fastavro

from lakesdk.format.avro_file import read_record

__all__ = ["SAVEPOINTED_TIMESTAMPS", "CleanerPlanData", "CleanMetadataData", "SavepointMetadataData",
           "RestorePlanData", "RestoreMetadataData", "avro_record", "avro_bytes"]

#: extraMetadata key of clean plans/metadata listing the savepointed instants (CleanerUtils)
SAVEPOINTED_TIMESTAMPS = "savepointed_timestamps"


@lru_cache(maxsize=None)
def _schema(name: str) -> Any:
    text = resources.files("lakesdk.format").joinpath(f"schemas/{name}.avsc").read_text()
    return fastavro.parse_schema(json.loads(text))


def avro_bytes(schema: str, record: dict[str, Any]) -> bytes:
    """One record as an Avro object container file (codec null), as Hudi writes timeline files."""
    buf = io.BytesIO()
    fastavro.writer(buf, _schema(schema), [record], codec="null")
    return buf.getvalue()


_SCHEMA_OF = {"clean plan": "HoodieCleanerPlan", "clean metadata": "HoodieCleanMetadata",
              "savepoint metadata": "HoodieSavepointMetadata", "restore plan": "HoodieRestorePlan",
              "restore metadata": "HoodieRestoreMetadata", "rollback metadata": "HoodieRollbackMetadata"}


def avro_record(data: bytes, what: str, schema: str | None = None) -> dict[str, Any]:
    """The first record of an Avro timeline file, read with its model schema (``schema``, or
    the one ``what`` names); damaged bytes raise :class:`CorruptTimelineError`."""
    name = schema or _SCHEMA_OF.get(what)
    if name is None:
        raise ValueError(f"no model schema for {what!r}")
    return dict(read_record(data, name, what))


def _split(value: str | None) -> tuple[str, ...]:
    return tuple(s for s in (value or "").split(",") if s)


@dataclass(frozen=True)
class CleanerPlanData:
    """``HoodieCleanerPlan`` (version 2)."""

    policy: str
    earliest_instant: str | None                   # earliest instant to retain (requested time)
    earliest_action: str | None
    last_completed_commit: str
    files: dict[str, tuple[str, ...]]              # partition -> full paths to delete
    savepointed: tuple[str, ...] = ()
    partitions_to_delete: tuple[str, ...] = ()
    version: int = 2

    def file_names(self) -> set[tuple[str, str]]:
        """(partition, file name) of every file the plan deletes."""
        return {(p, f.rsplit("/", 1)[-1]) for p, paths in self.files.items() for f in paths}

    def to_avro(self) -> bytes:
        ectr = None
        if self.earliest_instant:
            ectr = {"timestamp": self.earliest_instant, "action": self.earliest_action or "commit", "state": "COMPLETED"}
        rec = {
            "earliestInstantToRetain": ectr,
            "lastCompletedCommitTimestamp": self.last_completed_commit,
            "policy": self.policy,
            "filesToBeDeletedPerPartition": None,
            "version": self.version,
            "filePathsToBeDeletedPerPartition": {
                p: [{"filePath": f, "isBootstrapBaseFile": False} for f in fs] for p, fs in self.files.items()},
            "partitionsToBeDeleted": list(self.partitions_to_delete),
            "extraMetadata": {SAVEPOINTED_TIMESTAMPS: ",".join(self.savepointed)} if self.savepointed else None,
        }
        return avro_bytes("HoodieCleanerPlan", rec)

    @classmethod
    def parse(cls, data: bytes) -> "CleanerPlanData":
        r = avro_record(data, "clean plan")
        e = r.get("earliestInstantToRetain") or {}
        files: dict[str, tuple[str, ...]] = {}
        for p, infos in (r.get("filePathsToBeDeletedPerPartition") or {}).items():
            files[p] = tuple(i["filePath"] for i in infos or [] if i.get("filePath"))
        for p, paths in (r.get("filesToBeDeletedPerPartition") or {}).items():  # version 1 plans
            files.setdefault(p, tuple(paths or []))
        return cls(r.get("policy") or "", e.get("timestamp") or None, e.get("action") or None,
                   r.get("lastCompletedCommitTimestamp") or "", files,
                   _split((r.get("extraMetadata") or {}).get(SAVEPOINTED_TIMESTAMPS)),
                   tuple(r.get("partitionsToBeDeleted") or ()), int(r.get("version") or 1))

    @property
    def total_files(self) -> int:
        return sum(len(v) for v in self.files.values())


@dataclass(frozen=True)
class CleanMetadataData:
    """``HoodieCleanMetadata`` (version 2: file names, not paths)."""

    start_time: str
    took_ms: int
    policy: str
    earliest_commit_to_retain: str                 # "" when the policy keeps no commit window
    last_completed_commit: str
    deleted: dict[str, tuple[str, ...]]            # partition -> deleted file names
    failed: dict[str, tuple[str, ...]] = field(default_factory=dict)
    patterns: dict[str, tuple[str, ...]] = field(default_factory=dict)
    savepointed: tuple[str, ...] = ()
    version: int = 2

    @property
    def total_deleted(self) -> int:
        return sum(len(v) for v in self.deleted.values())

    def to_avro(self) -> bytes:
        parts = sorted(set(self.deleted) | set(self.failed) | set(self.patterns))
        rec = {
            "startCleanTime": self.start_time, "timeTakenInMillis": self.took_ms,
            "totalFilesDeleted": self.total_deleted, "earliestCommitToRetain": self.earliest_commit_to_retain,
            "lastCompletedCommitTimestamp": self.last_completed_commit,
            "partitionMetadata": {p: {"partitionPath": p, "policy": self.policy,
                                      "deletePathPatterns": list(self.patterns.get(p, self.deleted.get(p, ()))),
                                      "successDeleteFiles": list(self.deleted.get(p, ())),
                                      "failedDeleteFiles": list(self.failed.get(p, ())),
                                      "isPartitionDeleted": False} for p in parts},
            "version": self.version, "bootstrapPartitionMetadata": {},
            "extraMetadata": {SAVEPOINTED_TIMESTAMPS: ",".join(self.savepointed)} if self.savepointed else None,
        }
        return avro_bytes("HoodieCleanMetadata", rec)

    @classmethod
    def parse(cls, data: bytes) -> "CleanMetadataData":
        r = avro_record(data, "clean metadata")
        pm = r.get("partitionMetadata") or {}
        policy = next((m.get("policy") for m in pm.values() if m.get("policy")), "") or r.get("policy") or ""
        return cls(r["startCleanTime"], int(r["timeTakenInMillis"]), policy, r.get("earliestCommitToRetain") or "",
                   r.get("lastCompletedCommitTimestamp") or "",
                   {p: tuple(m.get("successDeleteFiles") or ()) for p, m in pm.items()},
                   {p: tuple(m["failedDeleteFiles"]) for p, m in pm.items() if m.get("failedDeleteFiles")},
                   {p: tuple(m.get("deletePathPatterns") or ()) for p, m in pm.items()},
                   _split((r.get("extraMetadata") or {}).get(SAVEPOINTED_TIMESTAMPS)), int(r.get("version") or 1))


@dataclass(frozen=True)
class SavepointMetadataData:
    """``HoodieSavepointMetadata``: the file names (base and log) of every partition's
    latest file slices as of the savepointed instant."""

    user: str
    savepointed_at: int                            # milliseconds since the epoch (System.currentTimeMillis)
    comment: str
    files: dict[str, tuple[str, ...]]              # partition -> file names

    def to_avro(self) -> bytes:
        rec = {"savepointedBy": self.user, "savepointedAt": self.savepointed_at, "comments": self.comment,
               "partitionMetadata": {p: {"partitionPath": p, "savepointDataFile": list(fs)}
                                     for p, fs in sorted(self.files.items())},
               "version": 1}
        return avro_bytes("HoodieSavepointMetadata", rec)

    @classmethod
    def parse(cls, data: bytes) -> "SavepointMetadataData":
        r = avro_record(data, "savepoint metadata")
        return cls(r.get("savepointedBy") or "", int(r.get("savepointedAt") or 0), r.get("comments") or "",
                   {p: tuple(m.get("savepointDataFile") or ()) for p, m in (r.get("partitionMetadata") or {}).items()})

    @property
    def file_names(self) -> set[str]:
        return {f.rsplit("/", 1)[-1] for fs in self.files.values() for f in fs}


@dataclass(frozen=True)
class RestorePlanData:
    """``HoodieRestorePlan`` (version 2): instants to roll back, in the order to roll them back."""

    instants: tuple[tuple[str, str], ...]           # (requested time, action)
    savepoint: str | None
    version: int = 2

    def to_avro(self) -> bytes:
        rec = {"instantsToRollback": [{"commitTime": i, "action": a} for i, a in self.instants],
               "version": self.version, "savepointToRestoreTimestamp": self.savepoint}
        return avro_bytes("HoodieRestorePlan", rec)

    @classmethod
    def parse(cls, data: bytes) -> "RestorePlanData":
        r = avro_record(data, "restore plan")
        return cls(tuple((i["commitTime"], i["action"]) for i in r.get("instantsToRollback") or []),
                   r.get("savepointToRestoreTimestamp"), int(r.get("version") or 1))


@dataclass(frozen=True)
class RestoreMetadataData:
    """``HoodieRestoreMetadata``: per rolled-back instant, the rollback metadata record
    (``HoodieRollbackMetadata`` as a dict, see :class:`lakesdk.format.plans.RollbackMetadataData`)."""

    start_time: str
    took_ms: int
    instants: tuple[tuple[str, str], ...]           # (requested time, action), rollback order
    rollbacks: dict[str, list[dict[str, Any]]]      # instant -> [HoodieRollbackMetadata record]

    @property
    def undone(self) -> set[str]:
        """The requested times of the instants the restore rolled back."""
        return {i for i, _ in self.instants}

    def to_avro(self) -> bytes:
        rec = {"startRestoreTime": self.start_time, "timeTakenInMillis": self.took_ms,
               "instantsToRollback": [i for i, _ in self.instants], "hoodieRestoreMetadata": self.rollbacks,
               "version": 1, "restoreInstantInfo": [{"commitTime": i, "action": a} for i, a in self.instants],
               "extraMetadata": None}
        return avro_bytes("HoodieRestoreMetadata", rec)

    @classmethod
    def parse(cls, data: bytes) -> "RestoreMetadataData":
        r = avro_record(data, "restore metadata")
        info = tuple((i["commitTime"], i["action"]) for i in r.get("restoreInstantInfo") or [])
        if not info:
            info = tuple((i, "") for i in r.get("instantsToRollback") or [])
        return cls(r["startRestoreTime"], int(r["timeTakenInMillis"]), info,
                   {k: [m for m in v if m is not None] for k, v in (r.get("hoodieRestoreMetadata") or {}).items()})
