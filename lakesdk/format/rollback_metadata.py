"""Timeline records of rollback instants (Avro)::

    T.rollback.requested   HoodieRollbackPlan       the instant to roll back, the files to delete
    T.rollback.inflight    (empty)
    T_C.rollback           HoodieRollbackMetadata   the instants rolled back, the files deleted

Each action's timeline records have one module of :mod:`lakesdk.format` (see its docstring);
:class:`lakesdk.timeline.store.TimelineStore` reads them from a table.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from lakesdk.format.avro_file import read_record, write_record

__all__ = ["RollbackRequest", "RollbackPlanData", "RollbackMetadataData"]


@dataclass(frozen=True)
class RollbackRequest:
    partition: str
    file_id: str | None
    files_to_delete: tuple[str, ...]      # paths relative to the table base


@dataclass(frozen=True)
class RollbackPlanData:
    """``HoodieRollbackPlan``: the instant to roll back and the files to delete."""

    instant: str
    action: str
    requests: tuple[RollbackRequest, ...]
    version: int = 1

    def to_avro(self) -> bytes:
        rec = {"instantToRollback": {"commitTime": self.instant, "action": self.action},
               "RollbackRequests": [{"partitionPath": r.partition, "fileId": r.file_id, "latestBaseInstant": None,
                                     "filesToBeDeleted": list(r.files_to_delete), "logBlocksToBeDeleted": None}
                                    for r in self.requests],
               "version": self.version}
        return write_record("HoodieRollbackPlan", rec)

    @classmethod
    def parse(cls, data: bytes) -> "RollbackPlanData":
        r = read_record(data, "HoodieRollbackPlan", "rollback plan")
        info = r.get("instantToRollback") or {}
        reqs = tuple(RollbackRequest(q["partitionPath"], q.get("fileId"), tuple(q.get("filesToBeDeleted") or []))
                     for q in r.get("RollbackRequests") or [])
        return cls(info.get("commitTime", ""), info.get("action", ""), reqs, int(r.get("version") or 1))


@dataclass(frozen=True)
class RollbackMetadataData:
    """``HoodieRollbackMetadata``: what a completed rollback deleted."""

    start_time: str
    took_ms: int
    rolled_back: tuple[tuple[str, str], ...]            # (instant, action)
    deleted: dict[str, tuple[str, ...]]                 # partition -> deleted file paths
    failed: dict[str, tuple[str, ...]] = field(default_factory=dict)
    #: the record it was read from (fields this class leaves out too), which restore metadata embeds
    record: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @property
    def total_deleted(self) -> int:
        return sum(len(v) for v in self.deleted.values())

    @property
    def undone(self) -> set[str]:
        """The requested times of the instants the rollback undid."""
        return {i for i, _ in self.rolled_back}

    def to_avro(self) -> bytes:
        parts = sorted(set(self.deleted) | set(self.failed))
        rec = {"startRollbackTime": self.start_time, "timeTakenInMillis": self.took_ms,
               "totalFilesDeleted": self.total_deleted, "commitsRollback": [i for i, _ in self.rolled_back],
               "partitionMetadata": {p: {"partitionPath": p, "successDeleteFiles": list(self.deleted.get(p, ())),
                                         "failedDeleteFiles": list(self.failed.get(p, ())),
                                         "rollbackLogFiles": None, "writtenLogFiles": None} for p in parts},
               "version": 1, "instantsRollback": [{"commitTime": i, "action": a} for i, a in self.rolled_back]}
        return write_record("HoodieRollbackMetadata", rec)

    @classmethod
    def parse(cls, data: bytes) -> "RollbackMetadataData":
        r = read_record(data, "HoodieRollbackMetadata", "rollback metadata")
        pm = r.get("partitionMetadata") or {}
        return cls(r["startRollbackTime"], int(r["timeTakenInMillis"]),
                   tuple((i["commitTime"], i["action"]) for i in r.get("instantsRollback") or []) or
                   tuple((c, "") for c in r.get("commitsRollback") or []),
                   {p: tuple(m["successDeleteFiles"]) for p, m in pm.items()},
                   {p: tuple(m["failedDeleteFiles"]) for p, m in pm.items() if m["failedDeleteFiles"]}, r)
