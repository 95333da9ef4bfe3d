"""Timeline records of clustering instants (Avro).

``T.clustering.requested`` holds one ``HoodieRequestedReplaceMetadata`` record (operation
type ``CLUSTER``) wrapping a ``HoodieClusteringPlan``: input groups of file slices (each a
``HoodieSliceInfo``: the base file as a full path and log files by name, as Hudi 1.x writes
them), the number of output file groups per input group, metrics, and the execution strategy
with its parameters.  The completed file (``T_C.replacecommit``) holds replace commit
metadata (:mod:`lakesdk.format.commit_metadata`).

Each action's timeline records have one module of :mod:`lakesdk.format` (see its docstring);
:class:`lakesdk.timeline.store.TimelineStore` reads them from a table.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from lakesdk.exceptions import CorruptTimelineError
from lakesdk.format.avro_file import read_record, write_record

__all__ = ["SORT_COLUMNS_PARAM", "EXECUTION_STRATEGY", "ClusteringSliceInfo", "ClusteringGroupData", "ClusteringPlanData"]


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
        return write_record("HoodieRequestedReplaceMetadata", rec)

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
