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
    steps            [[step, epoch ms], ...] the write's path through the commit protocol, in
                     order (:data:`STEPS`): requested, files_written, lock_requested,
                     lock_acquired, checked, metadata_table, completed; a write that lost
                     stops at the step it reached (absent in records of older versions)

Recording never fails a write: storage errors while journaling are swallowed.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC
from typing import TYPE_CHECKING, Any, Iterator, Sequence

import pyarrow as pa

from lakesdk.storage.fs import Storage

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["JOURNAL_DIR", "STEPS", "TRANSACTIONS_SCHEMA", "TransactionRecord", "Transactions", "read_transactions", "record_transaction",
           "schema_fields", "writer_id", "outcome_of", "instant_ms"]

JOURNAL_DIR = ".hoodie/.aux/lakesdk/transactions"
OUTCOMES = ("committed", "conflict", "schema_conflict", "early_conflict", "failed")
#: the steps of a write through the commit protocol, in order (:class:`lakesdk.services.transaction.InstantTransaction`)
STEPS = ("requested", "files_written", "lock_requested", "lock_acquired", "checked", "metadata_table", "completed")


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
    steps: tuple[tuple[str, int], ...] = ()
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
                "schema_at_commit": _lists(self.schema_at_commit), "steps": [list(x) for x in self.steps],
                **self.extra}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "TransactionRecord":
        known = {"version", "instant", "action", "operation", "writer", "started_ms", "ended_ms", "outcome",
                 "file_groups", "conflicts_with", "reason", "schema", "schema_at_start", "schema_at_commit", "steps"}
        return cls(instant=str(d["instant"]), action=str(d.get("action", "")), outcome=str(d.get("outcome", "")),
                   operation=str(d.get("operation", "")), writer=str(d.get("writer", "")),
                   started_ms=int(d.get("started_ms") or 0), ended_ms=int(d.get("ended_ms") or 0),
                   file_groups=tuple((str(p), str(f)) for p, f in d.get("file_groups") or ()),
                   conflicts_with=d.get("conflicts_with"), reason=str(d.get("reason") or ""),
                   schema=_tuples(d.get("schema")), schema_at_start=_tuples(d.get("schema_at_start")),
                   schema_at_commit=_tuples(d.get("schema_at_commit")),
                   steps=tuple((str(n), int(ms)) for n, ms in d.get("steps") or ()),
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


def instant_ms(instant: str) -> int:
    """Epoch milliseconds of an instant time (``yyyyMMddHHmmss[SSS]``, UTC); 0 if it is not one."""

    from lakesdk.format.instant import parse_instant_time
    try:
        return int(parse_instant_time(instant).replace(tzinfo=UTC).timestamp() * 1000)
    except (ValueError, TypeError):
        return 0


def outcome_of(err: BaseException | None) -> str:
    """The journal outcome of a write that raised ``err`` (None: it committed)."""
    if err is None:
        return "committed"
    from lakesdk.exceptions import EarlyConflictError, WriteConflictError
    if isinstance(err, EarlyConflictError):
        return "early_conflict"
    try:
        from lakesdk.concurrency.schema_conflicts import SchemaEvolutionConflictError
    except ImportError:  # pragma: no cover
        SchemaEvolutionConflictError = ()  # type: ignore[assignment,misc]  # noqa: N806
    if isinstance(err, SchemaEvolutionConflictError):
        return "schema_conflict"
    if isinstance(err, WriteConflictError):
        return "conflict"
    return "failed"


#: ``Transactions.to_arrow()``: one row per journaled write, oldest first; no column is null
#: (``conflicts_with`` is "" when the write lost to no other, ``reason`` "" when it committed).
TRANSACTIONS_SCHEMA = pa.schema([
    pa.field("instant", pa.string(), nullable=False),
    pa.field("action", pa.string(), nullable=False),
    pa.field("operation", pa.string(), nullable=False),
    pa.field("outcome", pa.string(), nullable=False),          # one of OUTCOMES
    pa.field("conflicts_with", pa.string(), nullable=False),   # the instant of the write it lost to
    pa.field("file_groups", pa.int64(), nullable=False),       # how many file groups it wrote
    pa.field("seconds", pa.float64(), nullable=False),         # from its start to its outcome
    pa.field("writer", pa.string(), nullable=False),           # host:pid:thread
    pa.field("reason", pa.string(), nullable=False),
])


class Transactions(Sequence[TransactionRecord]):
    """The journaled writes of one table (``t.inspect.transactions()``), oldest first.

    A read-only sequence of :class:`TransactionRecord`; ``to_arrow()`` (a ``pyarrow.Table`` of
    :data:`TRANSACTIONS_SCHEMA`) and ``to_pandas()`` give one row per write.  The repr is a small table (no I/O)."""

    def __init__(self, records: Sequence[TransactionRecord], *, table: str = "") -> None:
        self._records = list(records)
        self.table = table

    def __len__(self) -> int:
        return len(self._records)

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return Transactions(self._records[i], table=self.table)
        return self._records[i]

    def __iter__(self) -> Iterator[TransactionRecord]:
        return iter(self._records)

    def get(self, instant: str) -> TransactionRecord | None:
        """The record of ``instant`` (None if the instant was not journaled)."""
        return next((r for r in self._records if r.instant == instant), None)

    @property
    def committed(self) -> "Transactions":
        return Transactions([r for r in self._records if r.won], table=self.table)

    @property
    def lost(self) -> "Transactions":
        """Writes that did not commit (conflicts of every kind, and failures)."""
        return Transactions([r for r in self._records if not r.won], table=self.table)

    def _rows(self) -> list[dict[str, Any]]:
        rows = []
        for r in self._records:
            other = r.conflicts_with or {}
            rows.append({"instant": r.instant, "action": r.action, "operation": r.operation, "outcome": r.outcome,
                         "conflicts_with": other.get("instant") or "", "file_groups": len(r.file_groups),
                         "seconds": round(r.seconds, 3), "writer": r.writer, "reason": r.reason})
        return rows

    def to_arrow(self) -> pa.Table:
        """One row per journaled write, a ``pyarrow.Table`` of :data:`TRANSACTIONS_SCHEMA`."""
        return pa.Table.from_pylist(self._rows(), schema=TRANSACTIONS_SCHEMA)

    def to_pandas(self) -> pd.DataFrame:
        """pandas DataFrame: one row per journaled write (``to_arrow().to_pandas()``)."""
        return self.to_arrow().to_pandas()

    def __repr__(self) -> str:
        counts: dict[str, int] = {}
        for r in self._records:
            counts[r.outcome] = counts.get(r.outcome, 0) + 1
        summary = ", ".join(f"{n} {o}" for o, n in sorted(counts.items())) or "none"
        head = f"<Transactions {self.table!r}: {len(self)} writes ({summary})"
        lines = [(f"  {r['instant']} {r['action']:<13} {r['operation']:<10} {r['outcome']:<15}"
                  + (f" vs {r['conflicts_with']}" if r["conflicts_with"] else "")).rstrip() for r in self._rows()[-20:]]
        more = [f"  ... {len(self) - 20} earlier"] if len(self) > 20 else []
        return "\n".join([head, *more, *lines]) + ">"

    def _repr_html_(self) -> str:
        from html import escape
        colors = {"committed": "#1a7f37", "early_conflict": "#9a6700"}
        cols = ("instant", "action", "operation", "outcome", "conflicts_with", "file_groups", "seconds", "writer")
        head = "".join(f"<th style='text-align:left'>{c}</th>" for c in cols)
        body = []
        for r in self._rows():
            color = colors.get(r["outcome"], "#cf222e")
            cells = "".join(
                f"<td style='color:{color}' title='{escape(r['reason'], quote=True)}'>{escape(str(r[c]))}</td>"
                if c == "outcome" else f"<td>{escape(str(r[c]))}</td>" for c in cols)
            body.append(f"<tr>{cells}</tr>")
        return (f"<div><b>lakesdk transactions</b> <code>{escape(self.table)}</code> ({len(self)} writes)"
                f"<table><tr>{head}</tr>{''.join(body)}</table></div>")
