"""Timeline records of compaction and log compaction instants (Avro).

``T.compaction.requested`` (and ``T.logcompaction.requested``) holds one
``HoodieCompactionPlan`` record: an operation per file slice to compact (base instant, base
file name, log file names, file id, partition path, metrics).  Version 2 plans name files
relative to their partition.  The inflight file is empty; the completed one holds commit
metadata (:mod:`lakesdk.format.commit_metadata`).

Each action's timeline records have one module of :mod:`lakesdk.format` (see its docstring);
:class:`lakesdk.timeline.store.TimelineStore` reads them from a table.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from lakesdk.format.avro_file import read_record, write_record

__all__ = ["CompactionOperation", "CompactionPlanData"]


@dataclass(frozen=True)
class CompactionOperation:
    file_id: str
    partition: str
    base_instant: str
    base_file: str | None
    log_files: tuple[str, ...]
    metrics: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"baseInstantTime": self.base_instant, "deltaFilePaths": list(self.log_files),
                "dataFilePath": self.base_file, "fileId": self.file_id, "partitionPath": self.partition,
                "metrics": dict(self.metrics), "externalDataFilePath": None}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "CompactionOperation":
        def name(p: str | None) -> str | None:
            return p.rsplit("/", 1)[-1] if p else p
        return cls(d.get("fileId") or "", d.get("partitionPath") or "", d.get("baseInstantTime") or "",
                   name(d.get("dataFilePath")), tuple(name(p) for p in d.get("deltaFilePaths") or []),  # type: ignore[misc]
                   dict(d.get("metrics") or {}))


@dataclass(frozen=True)
class CompactionPlanData:
    operations: tuple[CompactionOperation, ...]
    extra_metadata: dict[str, str] = field(default_factory=dict)
    version: int = 2

    def to_avro(self) -> bytes:
        rec = {"operations": [o.to_dict() for o in self.operations], "extraMetadata": self.extra_metadata,
               "version": self.version}
        return write_record("HoodieCompactionPlan", rec)

    @classmethod
    def parse(cls, data: bytes) -> "CompactionPlanData":
        r = read_record(data, "HoodieCompactionPlan", "compaction plan")
        return cls(tuple(CompactionOperation.from_dict(o) for o in r.get("operations") or []),
                   dict(r.get("extraMetadata") or {}), int(r.get("version") or 1))
