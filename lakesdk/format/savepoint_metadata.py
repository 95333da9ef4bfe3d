"""Timeline records of savepoint instants (Avro)::

    T.savepoint.inflight   (empty)                  T = requested time of the savepointed commit
    T_C.savepoint          HoodieSavepointMetadata  file names of every partition's slices as of T

Each action's timeline records have one module of :mod:`lakesdk.format` (see its docstring);
:class:`lakesdk.timeline.store.TimelineStore` reads them from a table.
"""

from __future__ import annotations

from dataclasses import dataclass

from lakesdk.format.avro_file import read_record, write_record

__all__ = ["SavepointMetadataData"]


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
        return write_record("HoodieSavepointMetadata", rec)

    @classmethod
    def parse(cls, data: bytes) -> "SavepointMetadataData":
        r = read_record(data, "HoodieSavepointMetadata", "savepoint metadata")
        return cls(r.get("savepointedBy") or "", int(r.get("savepointedAt") or 0), r.get("comments") or "",
                   {p: tuple(m.get("savepointDataFile") or ()) for p, m in (r.get("partitionMetadata") or {}).items()})

    @property
    def file_names(self) -> set[str]:
        return {f.rsplit("/", 1)[-1] for fs in self.files.values() for f in fs}
