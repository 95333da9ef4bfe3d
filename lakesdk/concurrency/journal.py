"""The transaction journal: one small JSON record per write under optimistic concurrency.

Hudi's timeline says which writes committed; it does not say which writes lost a race, to
whom, or why.  lakesdk keeps that story beside the timeline, in
``.hoodie/.aux/lakesdk/transactions/<instant>.<action>.json`` (Hudi and the ``hudi``
reader ignore ``.aux``), so that the transactions widget and ``t.inspect`` can show
writers as lanes, the file groups each touched and the verdict of every conflict.

Record format, version 1 (a JSON object; unknown keys are ignored by readers)::

    version          1
    instant          requested time of the write (its instant)
    action           commit | deltacommit | replacecommit | ...
    operation        upsert | insert | delete | merge | ...
    writer           "host:pid:thread" of the writing process
    started_ms       epoch milliseconds when the write began
    ended_ms         epoch milliseconds when the outcome was known
    outcome          committed | conflict | schema_conflict | early_conflict | failed
    file_groups      [[partition, file_id], ...] this write touched (or would have)
    conflicts_with   null, or {"instant", "action", "file_groups": [[p, f], ...]}
    reason           human-readable text (the error message for failures)
    schema           writer schema: [[name, arrow type string], ...] or null
    schema_at_start  table schema when the write started (same shape) or null
    schema_at_commit table schema seen at validation (same shape) or null

Recording never fails a write: storage errors while journaling are swallowed.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from lakesdk.storage.fs import Storage

__all__ = ["JOURNAL_DIR", "TransactionRecord", "read_transactions", "record_transaction", "schema_fields", "writer_id"]

JOURNAL_DIR = ".hoodie/.aux/lakesdk/transactions"
OUTCOMES = ("committed", "conflict", "schema_conflict", "early_conflict", "failed")


def writer_id() -> str:
    """``host:pid:thread`` of the caller."""
    return f"{socket.gethostname()}:{os.getpid()}:{threading.current_thread().name}"


def schema_fields(schema: Any) -> list[list[str]] | None:
    """A pyarrow schema as ``[[name, type], ...]`` (None stays None)."""
    if schema is None:
        return None
    return [[f.name, str(f.type)] for f in schema]


@dataclass(frozen=True)
class TransactionRecord:
    """One journaled write."""

    instant: str
    action: str
    outcome: str
    operation: str = ""
    writer: str = ""
    started_ms: int = 0
    ended_ms: int = 0
    file_groups: tuple[tuple[str, str], ...] = ()
    conflicts_with: dict[str, Any] | None = None
    reason: str = ""
    schema: tuple[tuple[str, str], ...] | None = None
    schema_at_start: tuple[tuple[str, str], ...] | None = None
    schema_at_commit: tuple[tuple[str, str], ...] | None = None
    extra: dict[str, Any] = field(default_factory=dict, compare=False)

    @property
    def won(self) -> bool:
        return self.outcome == "committed"

    @property
    def seconds(self) -> float:
        return max(0.0, (self.ended_ms - self.started_ms) / 1000.0)

    def to_json(self) -> dict[str, Any]:
        return {"version": 1, "instant": self.instant, "action": self.action, "operation": self.operation,
                "writer": self.writer, "started_ms": self.started_ms, "ended_ms": self.ended_ms,
                "outcome": self.outcome, "file_groups": [list(g) for g in self.file_groups],
                "conflicts_with": self.conflicts_with, "reason": self.reason,
                "schema": _lists(self.schema), "schema_at_start": _lists(self.schema_at_start),
                "schema_at_commit": _lists(self.schema_at_commit), **self.extra}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "TransactionRecord":
        known = {"version", "instant", "action", "operation", "writer", "started_ms", "ended_ms", "outcome",
                 "file_groups", "conflicts_with", "reason", "schema", "schema_at_start", "schema_at_commit"}
        return cls(instant=str(d["instant"]), action=str(d.get("action", "")), outcome=str(d.get("outcome", "")),
                   operation=str(d.get("operation", "")), writer=str(d.get("writer", "")),
                   started_ms=int(d.get("started_ms") or 0), ended_ms=int(d.get("ended_ms") or 0),
                   file_groups=tuple((str(p), str(f)) for p, f in d.get("file_groups") or ()),
                   conflicts_with=d.get("conflicts_with"), reason=str(d.get("reason") or ""),
                   schema=_tuples(d.get("schema")), schema_at_start=_tuples(d.get("schema_at_start")),
                   schema_at_commit=_tuples(d.get("schema_at_commit")),
                   extra={k: v for k, v in d.items() if k not in known})

    def __repr__(self) -> str:
        other = f" vs {self.conflicts_with.get('instant')}" if self.conflicts_with else ""
        return (f"<TransactionRecord {self.instant} {self.action} {self.outcome}{other} "
                f"by {self.writer or '?'}, {len(self.file_groups)} file groups>")


def _lists(s: Any) -> Any:
    return None if s is None else [list(x) for x in s]


def _tuples(s: Any) -> Any:
    return None if s is None else tuple((str(a), str(b)) for a, b in s)


def record_transaction(storage: Storage, record: TransactionRecord) -> bool:
    """Write ``record``; returns False (and never raises) when storage refuses."""
    if record.outcome not in OUTCOMES:
        raise ValueError(f"unknown outcome {record.outcome!r}; expected one of {', '.join(OUTCOMES)}")
    try:
        storage.write(f"{JOURNAL_DIR}/{record.instant}.{record.action}.json",
                      json.dumps(record.to_json(), sort_keys=True).encode())
        return True
    except Exception:  # noqa: BLE001 - the journal is advisory
        return False


def read_transactions(storage: Storage) -> list[TransactionRecord]:
    """Every journaled write, oldest first (by start time, then instant)."""
    try:
        infos = storage.list(JOURNAL_DIR)
    except (FileNotFoundError, OSError):
        return []
    out: list[TransactionRecord] = []
    for info in infos:
        name = info.path.rsplit("/", 1)[-1]
        if not name.endswith(".json"):
            continue
        try:
            out.append(TransactionRecord.from_json(json.loads(storage.read(f"{JOURNAL_DIR}/{name}"))))
        except (OSError, ValueError, KeyError, TypeError):
            continue  # a torn or foreign file is skipped, never fatal
    out.sort(key=lambda r: (r.started_ms, r.instant))
    return out


def now_ms() -> int:
    return int(time.time() * 1000)
