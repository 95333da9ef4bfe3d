"""Result objects returned by writes."""

from __future__ import annotations

import html
import json
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from lakesdk._display import human_bytes as _human_bytes
from lakesdk.exceptions import LakeError
from lakesdk.format.instant import Instant, to_instant_time
from lakesdk.format.schema import arrow_to_avro

__all__ = ["WriteResult", "SchemaChange", "schema_change", "moment_time"]


@dataclass(frozen=True)
class SchemaChange:
    """How a write changed the table's schema (Hudi evolves it on write): ``added`` the
    columns it added, as ``(name, type)``, and ``widened`` the columns whose type it changed
    (``int32`` to ``int64``, a struct gaining fields), as ``(name, type before, type after)``.
    Types are Arrow's names (``double``, ``int64``, ``struct<a: int64>``)."""

    added: tuple[tuple[str, str], ...] = ()
    widened: tuple[tuple[str, str, str], ...] = ()

    def __str__(self) -> str:
        parts = []
        if self.added:
            parts.append("added columns: " + ", ".join(f"{n} ({t})" for n, t in self.added))
        if self.widened:
            parts.append("widened columns: " + ", ".join(f"{n} ({a} -> {b})" for n, a, b in self.widened))
        return "; ".join(parts)


def schema_change(before: pa.Schema | None, after: pa.Schema, table: str) -> SchemaChange | None:
    """The change from the table's schema ``before`` a write to the one it recorded, compared
    as Hudi's (Avro) schema says them; None when there is none, or no schema before (a first
    write defines the table's schema)."""
    if before is None:
        return None
    old = {f.name: _avro_type(f, table) for f in before}
    added = tuple((f.name, str(f.type)) for f in after if f.name not in old)
    widened = tuple((f.name, str(before.field(f.name).type), str(f.type)) for f in after
                    if f.name in old and old[f.name] != _avro_type(f, table))
    return SchemaChange(added, widened) if added or widened else None


def _avro_type(f: pa.Field, table: str) -> str:
    try:
        return json.dumps(arrow_to_avro(pa.schema([f]), table)["fields"][0]["type"], sort_keys=True)
    except LakeError:   # a type Hudi's schema has no word for: compared as Arrow says it
        return str(f.type)


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
    schema_change: SchemaChange | None = None   # the columns the write added or widened; None: the schema is as it was

    @property
    def added_columns(self) -> tuple[str, ...]:
        """The names of the columns this write added to the table's schema."""
        return tuple(n for n, _ in self.schema_change.added) if self.schema_change else ()

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
        if self.schema_change is not None:
            rep += f"; {self.schema_change}"
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
        if self.schema_change is not None:
            cells.append(("schema changed", html.escape(str(self.schema_change))))
        rows = "".join(f"<tr><th style='text-align:left'>{k}</th><td>{v}</td></tr>" for k, v in cells)
        return f"<div><b>WriteResult</b> on <code>{self.table}</code><table>{rows}</table></div>"


def moment_time(value: Any) -> str | None:
    """The instant time of a moment a user gives (``as_of=``, an incremental read's bounds):
    None for None, a write's result (a :class:`WriteResult`, or any result with ``completed``
    and ``instant``) its completion time, else what :func:`~lakesdk.format.instant.to_instant_time`
    makes of it (an instant time, an :class:`~lakesdk.format.instant.Instant`, a datetime, an
    ISO string)."""
    if value is None:
        return None
    if hasattr(value, "completed") and hasattr(value, "instant") and not isinstance(value, Instant):
        return value.completed or value.instant  # a WriteResult
    return to_instant_time(value)
