"""Open instants written by several processes: the coordinator opens and commits, the
participants write files (the exactly-once Kafka sink uses this).

    coordinator:   txn = begin(table)                        requested -> inflight, heartbeat
    participants:  stats = write_batch(table, txn, batch)    data files only, direct markers
    coordinator:   commit(table, txn, all_stats, extra)      one completed instant, or
                   abort(table, txn)                         a rollback of everything written

An :class:`OpenInstant` is a small JSON-able value, so it travels in control messages.
Merge-on-read tables take any number of participants: each writes its own log files and
new file groups.  On copy-on-write tables two participants rewriting the same file group
in one instant would lose records, so :func:`commit` refuses that with a conflict.
"""

from __future__ import annotations

import base64
import json
import time
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from lakesdk.commit.results import WriteResult
from lakesdk.exceptions import InstantNotFoundError, WriteConflictError
from lakesdk.format.commit_metadata import CommitMetadata, WriteStat
from lakesdk.format.instant import Instant

if TYPE_CHECKING:
    from lakesdk.services.rollback import RollbackResult
    from lakesdk.table.table import Table

__all__ = ["OpenInstant", "begin", "write_batch", "commit", "abort"]


@dataclass(frozen=True)
class OpenInstant:
    instant: str
    action: str
    operation: str = "upsert"

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> "OpenInstant":
        return cls(**json.loads(text))


def begin(table: "Table", *, operation: str = "upsert") -> OpenInstant:
    """Open an instant (requested -> inflight) for files that other processes will write."""
    from lakesdk.services.rollback import rollback_failed_writes
    from lakesdk.services.transaction import InstantTransaction
    ctx = table.context
    policy = "lazy" if table.options.concurrency == "optimistic" else table.options.failed_writes
    rollback_failed_writes(ctx, policy=policy)
    action = "deltacommit" if table.config.is_mor else "commit"
    txn = InstantTransaction.begin(ctx, action, operation=operation)
    txn.start(CommitMetadata(operation_type=operation.upper()).encode(layout=table.config.layout_version))
    ctx.heartbeats()[txn.instant.requested] = txn.heartbeat
    return OpenInstant(txn.instant.requested, action, operation)


def write_batch(table: "Table", txn: OpenInstant, data: Any, *,
                missing_columns: str = "error") -> tuple[list[dict[str, Any]], str]:
    """Write one batch's files for ``txn`` (in any process); returns the write stats as
    dicts and the schema (base64 Arrow IPC) the files were written with.  ``missing_columns``:
    a table column the batch lacks, as :meth:`Table.upsert` takes it (``"null"``: written null).

    The batch is checked before any of its files is written, as a write is: a refused batch
    (a :class:`~lakesdk.exceptions.SchemaError` such as an ``InvalidPartitionValueError``,
    ``MissingColumnError``, ``NullKeyError``, ``NullOrderingValueError`` or
    ``IncompatibleSchemaError``) writes nothing
    and leaves ``txn`` open and usable: write a corrected batch and :func:`commit`, or
    :func:`abort`.  A batch that fails while its files are written (a ``WriteError``) may
    leave files its markers name; :func:`commit` removes files no stat names, and
    :func:`abort` rolls everything back."""
    from lakesdk.markers import DirectWriteMarkers
    from lakesdk.table.write import WriteOperation
    op = WriteOperation(table, txn.operation, data, missing_columns=missing_columns)  # type: ignore[arg-type]
    stats, _counts, schema = op.write_files(txn.instant, markers=DirectWriteMarkers(table.storage, txn.instant))
    _ensure_open_after_writing(table, txn, [s.path for s in stats])
    return [asdict(s) for s in stats], base64.b64encode(schema.serialize().to_pybytes()).decode()


def _ensure_open_after_writing(table: "Table", txn: OpenInstant, paths: list[str]) -> None:
    """``txn`` must still be pending once this batch's files are written.  Its owner may
    have died meanwhile and the next one rolled the instant back (a rollback deletes the
    files it finds; a file finished later would be left behind, and readers take a file of
    an instant older than the active timeline for committed once the rollback is archived),
    or the instant may have completed without this batch.  Then the batch's files are
    deleted here and :class:`WriteConflictError` says the round is gone.  (A rollback also
    lists the instant's markers again once its plan is written, for the files whose
    writers looked before it.)"""
    from lakesdk.concurrency.conflicts import ensure_still_pending
    store = table.context.store
    try:
        ensure_still_pending(table.name, store.load(), Instant(txn.action, "inflight", txn.instant), store)
    except WriteConflictError:
        for path in paths:
            table.storage.delete(path)
        raise


def commit(table: "Table", txn: OpenInstant, stats: list[dict[str, Any]], *, schema: str | None = None,
           extra_metadata: dict[str, str] | None = None) -> WriteResult:
    """Complete ``txn`` with every participant's stats (files markers show but no stat names
    are removed first)."""
    from lakesdk.commit.schema_store import schema_extra_metadata
    from lakesdk.markers import DirectWriteMarkers
    t0 = time.perf_counter()
    store = table.context.store
    ws = [WriteStat.from_dict(s) for s in stats]
    if not table.config.is_mor:
        seen: dict[tuple[str, str], int] = {}
        for s in ws:
            key = (s.partitionPath, s.fileId)
            seen[key] = seen.get(key, 0) + 1
        dup = [k for k, n in seen.items() if n > 1]
        if dup:
            err = WriteConflictError(f"participants of {txn.instant} rewrote the same file groups {dup[:3]} of a "
                                     "copy-on-write table; the instant was rolled back (use a merge-on-read table)")
            abort(table, txn, reason=str(err), outcome="conflict")
            raise err
    markers = DirectWriteMarkers(table.storage, txn.instant)
    written = {p for s in ws for p in s.written_paths}
    for path in sorted((markers.data_files() | markers.appended_log_files()) - written):
        table.storage.delete(path)
    arrow_schema = pa.ipc.read_schema(pa.py_buffer(base64.b64decode(schema))) if schema else table.schema
    parts: dict[str, list[WriteStat]] = {}
    for s in sorted(ws, key=lambda s: (s.partitionPath, s.fileId)):
        parts.setdefault(s.partitionPath, []).append(s)
    md = CommitMetadata(partition_to_write_stats=parts,
                        extra_metadata={**schema_extra_metadata(arrow_schema, table.config.name), **(extra_metadata or {})},
                        operation_type=txn.operation.upper())
    from lakesdk.services.transaction import InstantTransaction
    hb = table.context.heartbeats().pop(txn.instant, None)
    itx = InstantTransaction.resume(table.context, Instant(txn.action, "inflight", txn.instant),
                                    operation=txn.operation, heartbeat=hb, markers=markers)

    def file_groups(now: Any) -> None:
        from lakesdk.concurrency.conflicts import find_conflicts, raise_on_conflict
        raise_on_conflict(table.name, itx.instant, find_conflicts(store, now, itx.instant, ws))
    try:
        done = itx.commit(md.encode(layout=table.config.layout_version), checks=[file_groups])
    except WriteConflictError as err:   # lost a race (or was rolled back as dead): nothing committed
        if hb is not None:
            table.context.heartbeats()[txn.instant] = hb     # abort stops it
        if any(i.requested == txn.instant and not i.is_completed for i in store.load()):
            try:
                abort(table, txn, reason=str(err), outcome="conflict")
            except InstantNotFoundError:
                pass    # the writer that took this one for dead finished its rollback meanwhile
        raise
    itx.finish()
    if hb is None:      # opened by another process: its heartbeat file is left
        table.storage.delete(f".hoodie/.heartbeat/{txn.instant}")
    tot = md.totals()
    _journal(table, txn, "committed", groups={(s.partitionPath or "", s.fileId) for s in ws if s.fileId},
             schema=arrow_schema, steps=itx.steps)
    return WriteResult(table=table.name, operation=txn.operation, instant=txn.instant, completed=done.completed,
                       action=txn.action, inserted=tot["inserted"], updated=tot["updated"], deleted=tot["deleted"],
                       files=tot["files"], bytes=tot["bytes"], partitions=tot["partitions"],
                       seconds=time.perf_counter() - t0, file_paths=tuple(sorted(written)))


def abort(table: "Table", txn: OpenInstant, *, reason: str = "aborted", outcome: str = "failed") -> RollbackResult:
    """Roll back everything written for ``txn``."""
    from lakesdk.markers import read_markers
    from lakesdk.services.rollback import rollback
    hb = table.context.heartbeats().pop(txn.instant, None)
    if hb is not None:
        hb.stop()
    try:
        names = read_markers(table.storage, txn.instant)
    except Exception:  # noqa: BLE001 - only feeds the journal
        names = set()
    try:
        return rollback(table.context, txn.instant, force=True)
    finally:
        from lakesdk.concurrency.early import planned_groups
        _journal(table, txn, outcome, groups=set(planned_groups(names)), reason=reason)


def _journal(table: "Table", txn: OpenInstant, outcome: str, *, groups: set[tuple[str, str]],
             schema: pa.Schema | None = None, reason: str = "", steps: list[tuple[str, int]] | None = None) -> None:
    """One transaction-journal record (optimistic concurrency only; never raises)."""
    if table.options.concurrency != "optimistic":
        return
    from lakesdk.concurrency.journal import (
        TransactionRecord,
        instant_ms,
        now_ms,
        record_transaction,
        schema_fields,
        writer_id,
    )
    fields = schema_fields(schema)
    record_transaction(table.storage, TransactionRecord(
        instant=txn.instant, action=txn.action, outcome=outcome, operation=txn.operation, writer=writer_id(),
        started_ms=instant_ms(txn.instant), ended_ms=now_ms(), file_groups=tuple(sorted(groups)), reason=reason,
        schema=None if fields is None else tuple((name, type_) for name, type_ in fields), steps=tuple(steps or ())))
