"""Result objects returned by writes."""

from __future__ import annotations

from dataclasses import dataclass, field

from lakesdk._display import human_bytes as _human_bytes
from lakesdk.format.instant import Instant

__all__ = ["WriteResult"]




@dataclass(frozen=True)
class WriteResult:
    """What one write did.

    ``instant`` is the requested instant time (``yyyyMMddHHmmssSSS``) that names the
    commit's files; ``completed`` is its completion time (what time travel and
    incremental queries compare with on table version 8).

    The counts count records of the table, as Hudi's write stats do: ``inserted`` the new
    records written, ``updated`` / ``deleted`` the stored records replaced / deleted, and
    ``skipped`` the stored records an incoming version lost to (event-time ordering).  A key
    stored twice (an insert or bulk insert of a stored key) counts each copy: deleting it is
    ``deleted=2``.
    """

    table: str
    operation: str
    instant: str
    completed: str | None
    action: str
    inserted: int = 0
    updated: int = 0
    deleted: int = 0
    skipped: int = 0
    files: int = 0
    bytes: int = 0
    partitions: int = 0
    seconds: float = 0.0
    replaced_file_groups: int = 0
    file_paths: tuple[str, ...] = field(default=(), repr=False)
    compaction: "WriteResult | None" = field(default=None, repr=False)   # an inline compaction it triggered

    @property
    def as_instant(self) -> Instant:
        return Instant(self.action, "completed" if self.completed else "inflight", self.instant, self.completed)

    @property
    def rows_written(self) -> int:
        return self.inserted + self.updated

    def to_dict(self) -> dict[str, object]:
        return {k: getattr(self, k) for k in ("table", "operation", "instant", "completed", "action", "inserted",
                                              "updated", "deleted", "skipped", "files", "bytes", "partitions",
                                              "seconds")}

    def __repr__(self) -> str:
        extra = f", skipped={self.skipped}" if self.skipped else ""
        rep = f", replaced_file_groups={self.replaced_file_groups}" if self.replaced_file_groups else ""
        if self.compaction is not None:
            rep += f", then compacted @ {self.compaction.instant}"
        return (f"WriteResult({self.operation} {self.table!r} @ {self.instant}: inserted={self.inserted}, "
                f"updated={self.updated}, deleted={self.deleted}{extra}, files={self.files}, "
                f"bytes={_human_bytes(self.bytes)}, seconds={self.seconds:.2f}{rep})")

    def _repr_html_(self) -> str:
        cells = [("operation", self.operation), ("instant", self.instant), ("completed", self.completed or ""),
                 ("inserted", self.inserted), ("updated", self.updated), ("deleted", self.deleted),
                 ("skipped (older ordering value)", self.skipped), ("files written", self.files),
                 ("bytes", _human_bytes(self.bytes)), ("partitions", self.partitions),
                 ("seconds", f"{self.seconds:.2f}")]
        if self.replaced_file_groups:
            cells.append(("replaced file groups", self.replaced_file_groups))
        rows = "".join(f"<tr><th style='text-align:left'>{k}</th><td>{v}</td></tr>" for k, v in cells)
        return f"<div><b>WriteResult</b> on <code>{self.table}</code><table>{rows}</table></div>"
