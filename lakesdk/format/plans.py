"""Table-service plans stored in requested instants (Avro): the compaction plan, the
rollback plan and metadata, and the clustering plan.

``T.compaction.requested`` holds one ``HoodieCompactionPlan`` record: an operation per file
slice to compact (base instant, base file name, log file names, file id, partition path,
metrics).  Version 2 plans name files relative to their partition.

``T.clustering.requested`` holds one ``HoodieRequestedReplaceMetadata`` record (operation
type ``CLUSTER``) wrapping a ``HoodieClusteringPlan``: input groups of file slices (each a
``HoodieSliceInfo``: the base file as a full path and log files by name, as Hudi 1.x writes
them), the number of output file
groups per input group, metrics, and the execution strategy with its parameters.
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
from lakesdk.format.avro_file import read_record

__all__ = ["CompactionOperation", "CompactionPlanData", "RollbackRequest", "RollbackPlanData", "RollbackMetadataData",
           "ClusteringSliceInfo", "ClusteringGroupData", "ClusteringPlanData"]


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
        r = read_record(data, "HoodieCompactionPlan", "compaction plan")
        return cls(tuple(CompactionOperation.from_dict(o) for o in r.get("operations") or []),
                   dict(r.get("extraMetadata") or {}), int(r.get("version") or 1))


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
        buf = io.BytesIO()
        fastavro.writer(buf, _schema("HoodieRollbackPlan"), [rec], codec="null")
        return buf.getvalue()

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
        buf = io.BytesIO()
        fastavro.writer(buf, _schema("HoodieRollbackMetadata"), [rec], codec="null")
        return buf.getvalue()

    @classmethod
    def parse(cls, data: bytes) -> "RollbackMetadataData":
        r = read_record(data, "HoodieRollbackMetadata", "rollback metadata")
        pm = r.get("partitionMetadata") or {}
        return cls(r["startRollbackTime"], int(r["timeTakenInMillis"]),
                   tuple((i["commitTime"], i["action"]) for i in r.get("instantsRollback") or []) or
                   tuple((c, "") for c in r.get("commitsRollback") or []),
                   {p: tuple(m["successDeleteFiles"]) for p, m in pm.items()},
                   {p: tuple(m["failedDeleteFiles"]) for p, m in pm.items() if m["failedDeleteFiles"]}, r)


def _base_name(p: str | None) -> str | None:
    return p.rsplit("/", 1)[-1] if p else None


@dataclass(frozen=True)
class ClusteringSliceInfo:
    """``HoodieSliceInfo``: one input file slice of a clustering group (file names, no paths)."""

    partition: str
    file_id: str
    base_file: str | None
    log_files: tuple[str, ...] = ()

    def to_dict(self, base_url: str = "") -> dict[str, Any]:
        """As Hudi 1.x writes it: the base file as a full path, log files by name."""
        def full(name: str) -> str:
            rel = f"{self.partition}/{name}" if self.partition else name
            return f"{base_url.rstrip('/')}/{rel}" if base_url else rel
        return {"dataFilePath": full(self.base_file) if self.base_file else None,
                "deltaFilePaths": list(self.log_files), "fileId": self.file_id,
                "partitionPath": self.partition, "bootstrapFilePath": None, "version": 1}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "ClusteringSliceInfo":
        return cls(d.get("partitionPath") or "", d.get("fileId") or "", _base_name(d.get("dataFilePath")),
                   tuple(n for n in (_base_name(p) for p in d.get("deltaFilePaths") or []) if n))


@dataclass(frozen=True)
class ClusteringGroupData:
    """``HoodieClusteringGroup``: slices rewritten together into ``num_output_groups`` files."""

    slices: tuple[ClusteringSliceInfo, ...]
    num_output_groups: int = 1
    metrics: dict[str, float] = field(default_factory=dict)

    def to_dict(self, base_url: str = "") -> dict[str, Any]:
        return {"slices": [s.to_dict(base_url) for s in self.slices], "metrics": dict(self.metrics),
                "numOutputFileGroups": self.num_output_groups, "extraMetadata": None, "version": 1}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "ClusteringGroupData":
        return cls(tuple(ClusteringSliceInfo.from_dict(x) for x in d.get("slices") or []),
                   int(d.get("numOutputFileGroups") or 1), dict(d.get("metrics") or {}))


SORT_COLUMNS_PARAM = "hoodie.clustering.plan.strategy.sort.columns"
EXECUTION_STRATEGY = "org.apache.hudi.client.clustering.run.strategy.SparkSortAndSizeExecutionStrategy"


@dataclass(frozen=True)
class ClusteringPlanData:
    """``HoodieClusteringPlan`` inside ``HoodieRequestedReplaceMetadata`` (``.clustering.requested``)."""

    groups: tuple[ClusteringGroupData, ...]
    strategy_class: str = EXECUTION_STRATEGY
    strategy_params: dict[str, str] = field(default_factory=dict)
    extra_metadata: dict[str, str] = field(default_factory=dict)
    preserve_hoodie_metadata: bool = True
    version: int = 1

    @property
    def sort_columns(self) -> tuple[str, ...]:
        raw = self.strategy_params.get(SORT_COLUMNS_PARAM) or ""
        return tuple(c.strip() for c in raw.split(",") if c.strip())

    def file_groups(self) -> list[tuple[str, str]]:
        """(partition, file id) of every input slice."""
        return [(s.partition, s.file_id) for g in self.groups for s in g.slices]

    def to_avro(self, base_url: str = "") -> bytes:
        """The ``HoodieRequestedReplaceMetadata`` record (operation type CLUSTER) as Avro bytes."""
        plan = {"inputGroups": [g.to_dict(base_url) for g in self.groups],
                "strategy": {"strategyClassName": self.strategy_class, "strategyParams": dict(self.strategy_params),
                             "version": 1},
                "extraMetadata": dict(self.extra_metadata), "version": self.version,
                "preserveHoodieMetadata": self.preserve_hoodie_metadata}
        rec = {"operationType": "CLUSTER", "clusteringPlan": plan, "extraMetadata": {}, "version": 1}
        buf = io.BytesIO()
        fastavro.writer(buf, _schema("HoodieRequestedReplaceMetadata"), [rec], codec="null")
        return buf.getvalue()

    @classmethod
    def parse(cls, data: bytes) -> "ClusteringPlanData":
        """Read a ``.clustering.requested`` (or a requested ``.replacecommit`` of a clustering) file."""
        r = read_record(data, "HoodieRequestedReplaceMetadata", "clustering plan")
        plan = r.get("clusteringPlan")
        if not plan:
            raise CorruptTimelineError(
                f"requested replace metadata (operation {r.get('operationType')!r}) holds no clustering plan")
        strat = plan.get("strategy") or {}
        return cls(tuple(ClusteringGroupData.from_dict(g) for g in plan.get("inputGroups") or []),
                   strat.get("strategyClassName") or EXECUTION_STRATEGY, dict(strat.get("strategyParams") or {}),
                   dict(plan.get("extraMetadata") or {}), bool(plan.get("preserveHoodieMetadata")),
                   int(plan.get("version") or 1))
