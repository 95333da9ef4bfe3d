"""Timeline records of clean instants (Avro)::

    T.clean.requested      HoodieCleanerPlan        files to delete, earliest instant to retain
    T.clean.inflight       (empty)
    T_C.clean              HoodieCleanMetadata      files deleted per partition

Clean plans are version 2: ``filePathsToBeDeletedPerPartition`` names full paths; clean
metadata (version 2) names files by their file name.  Savepointed instants that a clean
saw are kept in ``extraMetadata["savepointed_timestamps"]`` (comma separated), which the
next clean compares with to decide whether it may clean incrementally.

Each action's timeline records have one module of :mod:`lakesdk.format` (see its docstring);
:class:`lakesdk.timeline.store.TimelineStore` reads them from a table.

>>> p = CleanerPlanData("KEEP_LATEST_COMMITS", "20250101000000000", "commit", "20250102000000000",
...                     {"a": ("/t/a/f1_0-1-1_20241231000000000.parquet",)})
>>> CleanerPlanData.parse(p.to_avro()) == p
True
"""

from __future__ import annotations

from dataclasses import dataclass, field

from lakesdk.format.avro_file import read_record, write_record

__all__ = ["SAVEPOINTED_TIMESTAMPS", "CleanerPlanData", "CleanMetadataData"]


#: extraMetadata key of clean plans/metadata listing the savepointed instants (CleanerUtils)
SAVEPOINTED_TIMESTAMPS = "savepointed_timestamps"


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
        return write_record("HoodieCleanerPlan", rec)

    @classmethod
    def parse(cls, data: bytes) -> "CleanerPlanData":
        r = read_record(data, "HoodieCleanerPlan", "clean plan")
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
        return write_record("HoodieCleanMetadata", rec)

    @classmethod
    def parse(cls, data: bytes) -> "CleanMetadataData":
        r = read_record(data, "HoodieCleanMetadata", "clean metadata")
        pm = r.get("partitionMetadata") or {}
        policy = next((m.get("policy") for m in pm.values() if m.get("policy")), "") or r.get("policy") or ""
        return cls(r["startCleanTime"], int(r["timeTakenInMillis"]), policy, r.get("earliestCommitToRetain") or "",
                   r.get("lastCompletedCommitTimestamp") or "",
                   {p: tuple(m.get("successDeleteFiles") or ()) for p, m in pm.items()},
                   {p: tuple(m["failedDeleteFiles"]) for p, m in pm.items() if m.get("failedDeleteFiles")},
                   {p: tuple(m.get("deletePathPatterns") or ()) for p, m in pm.items()},
                   _split((r.get("extraMetadata") or {}).get(SAVEPOINTED_TIMESTAMPS)), int(r.get("version") or 1))
