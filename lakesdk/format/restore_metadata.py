"""Timeline records of restore instants (Avro)::

    R.restore.requested    HoodieRestorePlan        instants to roll back, newest first
    R.restore.inflight     (empty)
    R_C.restore            HoodieRestoreMetadata    one HoodieRollbackMetadata per rolled-back instant

Each action's timeline records have one module of :mod:`lakesdk.format` (see its docstring);
:class:`lakesdk.timeline.store.TimelineStore` reads them from a table.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from lakesdk.format.avro_file import read_record, write_record

__all__ = ["RestorePlanData", "RestoreMetadataData"]


@dataclass(frozen=True)
class RestorePlanData:
    """``HoodieRestorePlan`` (version 2): instants to roll back, in the order to roll them back."""

    instants: tuple[tuple[str, str], ...]           # (requested time, action)
    savepoint: str | None
    version: int = 2

    def to_avro(self) -> bytes:
        rec = {"instantsToRollback": [{"commitTime": i, "action": a} for i, a in self.instants],
               "version": self.version, "savepointToRestoreTimestamp": self.savepoint}
        return write_record("HoodieRestorePlan", rec)

    @classmethod
    def parse(cls, data: bytes) -> "RestorePlanData":
        r = read_record(data, "HoodieRestorePlan", "restore plan")
        return cls(tuple((i["commitTime"], i["action"]) for i in r.get("instantsToRollback") or []),
                   r.get("savepointToRestoreTimestamp"), int(r.get("version") or 1))


@dataclass(frozen=True)
class RestoreMetadataData:
    """``HoodieRestoreMetadata``: per rolled-back instant, the rollback metadata record
    (``HoodieRollbackMetadata`` as a dict, see :class:`lakesdk.format.rollback_metadata.RollbackMetadataData`)."""

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
        return write_record("HoodieRestoreMetadata", rec)

    @classmethod
    def parse(cls, data: bytes) -> "RestoreMetadataData":
        r = read_record(data, "HoodieRestoreMetadata", "restore metadata")
        info = tuple((i["commitTime"], i["action"]) for i in r.get("restoreInstantInfo") or [])
        if not info:
            info = tuple((i, "") for i in r.get("instantsToRollback") or [])
        return cls(r["startRestoreTime"], int(r["timeTakenInMillis"]), info,
                   {k: [m for m in v if m is not None] for k, v in (r.get("hoodieRestoreMetadata") or {}).items()})
