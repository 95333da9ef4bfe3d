"""Table-service plans stored in requested instants (Avro): the compaction plan.

``T.compaction.requested`` holds one ``HoodieCompactionPlan`` record: an operation per file
slice to compact (base instant, base file name, log file names, file id, partition path,
metrics).  Version 2 plans name files relative to their partition.
"""

from __future__ import annotations

import io
import json
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from typing import Any

import fastavro

from lakesdk.exceptions import CorruptTimelineError

__all__ = ["CompactionOperation", "CompactionPlanData"]


@lru_cache(maxsize=None)
def _schema(name: str) -> Any:
    text = resources.files("lakesdk.format").joinpath(f"schemas/{name}.avsc").read_text()
    return fastavro.parse_schema(json.loads(text))


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
        buf = io.BytesIO()
        rec = {"operations": [o.to_dict() for o in self.operations], "extraMetadata": self.extra_metadata,
               "version": self.version}
        fastavro.writer(buf, _schema("HoodieCompactionPlan"), [rec], codec="null")
        return buf.getvalue()

    @classmethod
    def parse(cls, data: bytes) -> "CompactionPlanData":
        try:
            recs = list(fastavro.reader(io.BytesIO(data)))
        except Exception as exc:  # noqa: BLE001
            raise CorruptTimelineError(f"compaction plan is not a valid Avro file: {exc}") from exc
        if not recs:
            return cls(())
        r = recs[0]
        return cls(tuple(CompactionOperation.from_dict(o) for o in r.get("operations") or []),
                   dict(r.get("extraMetadata") or {}), int(r.get("version") or 1))
