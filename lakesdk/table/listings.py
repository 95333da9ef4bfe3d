"""The Arrow tables a handle lists its state in: :meth:`Table.history() <lakesdk.Table.history>`
(:data:`HISTORY_SCHEMA`) and ``table.inspect.file_groups()`` (:data:`FILE_GROUPS_SCHEMA`).

Each is a ``pyarrow.Table`` of a fixed schema, the same whether it has rows or none, as reads
are Arrow-first; ``.to_pandas()`` gives a pandas DataFrame (an integer column with a null
becomes float64 there, as pandas holds no null in int64).  Instant times stay Hudi's
17-digit strings (what ``as_of=``, ``incremental()`` and ``inspect.commit_metadata`` take);
``completed_at`` is the completion time as a UTC timestamp."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from lakesdk.format.instant import parse_instant_time

if TYPE_CHECKING:
    from lakesdk.commit.context import TableContext
    from lakesdk.read.view import FileSystemView

__all__ = ["FILE_GROUPS_SCHEMA", "HISTORY_SCHEMA", "file_groups_table", "history_table"]

_COUNT = pa.int64()

#: ``Table.history()``: one row per completed instant, archived ones included, in completion order.
#: The write statistics (``operation`` to ``partitions``) are null for instants that write no
#: data (clean, rollback, savepoint, restore...); ``completed`` and ``completed_at`` are null on
#: table version 6 tables, whose timeline records no completion time.
HISTORY_SCHEMA = pa.schema([
    pa.field("instant", pa.string(), nullable=False),        # requested time, yyyyMMddHHmmssSSS
    pa.field("completed", pa.string()),                      # completion time, yyyyMMddHHmmssSSS
    pa.field("completed_at", pa.timestamp("ms", tz="UTC")),  # the same as a timestamp
    pa.field("action", pa.string(), nullable=False),         # commit, deltacommit, clean, ...
    pa.field("operation", pa.string()),                      # UPSERT, INSERT, DELETE, COMPACT, ...
    pa.field("inserted", _COUNT),
    pa.field("updated", _COUNT),
    pa.field("deleted", _COUNT),
    pa.field("files", _COUNT),
    pa.field("bytes", _COUNT),
    pa.field("partitions", _COUNT),
    pa.field("archived", pa.bool_(), nullable=False),        # read from the timeline history
])

#: ``table.inspect.file_groups()``: one row per file group with its latest file slice.
#: ``base_file`` is null for a slice of log files only (a merge-on-read file group whose inserts
#: went to a log file); ``base_instant`` is the slice's instant then too.
FILE_GROUPS_SCHEMA = pa.schema([
    pa.field("partition", pa.string(), nullable=False),      # "" for a non-partitioned table
    pa.field("file_id", pa.string(), nullable=False),
    pa.field("slices", _COUNT, nullable=False),
    pa.field("base_instant", pa.string()),                   # the instant that began the slice
    pa.field("base_file", pa.string()),                      # path relative to the table
    pa.field("base_bytes", _COUNT, nullable=False),
    pa.field("log_files", _COUNT, nullable=False),
])


def instant_timestamp(ts: str | None, timezone: str = "UTC") -> datetime | None:
    """An instant time as an aware UTC datetime: the timeline's time zone is UTC, or ``LOCAL``
    (``hoodie.table.timeline.timezone``: the writer's local time, taken as this process's)."""
    if not ts:
        return None
    naive = parse_instant_time(ts)
    return naive.replace(tzinfo=UTC) if timezone != "LOCAL" else naive.astimezone(UTC)


def history_table(ctx: TableContext) -> pa.Table:
    """The rows of :data:`HISTORY_SCHEMA` for the table of ``ctx``: archived instants from the
    timeline history, then the active timeline, sorted by completion (else requested) time."""
    from lakesdk.format.commit_metadata import CommitMetadata
    from lakesdk.format.instant import WRITE_ACTIONS
    from lakesdk.services.archival import archived_instants
    store = ctx.store
    active = store.load().by_completion()
    # an instant in both the timeline history and the active timeline is the active one
    keys = {(i.requested, i.completed_action) for i in active}
    entries = [(a.instant, a.metadata, True) for a in archived_instants(ctx)
               if (a.instant.requested, a.instant.completed_action) not in keys]
    entries += [(i, None, False) for i in active]
    entries.sort(key=lambda e: (e[0].completed or e[0].requested, e[0].requested))
    tz = ctx.config.timezone
    rows: list[dict[str, Any]] = []
    for inst, data, archived in entries:
        row: dict[str, Any] = {"instant": inst.requested, "completed": inst.completed,
                               "completed_at": instant_timestamp(inst.completed, tz), "action": inst.action,
                               "archived": archived}
        if inst.completed_action in WRITE_ACTIONS:
            md = (CommitMetadata.parse(data or b"", layout=2, replace=inst.completed_action == "replacecommit")
                  if archived else store.commit_metadata(inst))
            tot = md.totals()
            row.update(operation=md.operation_type, inserted=tot["inserted"], updated=tot["updated"],
                       deleted=tot["deleted"], files=tot["files"], bytes=tot["bytes"], partitions=tot["partitions"])
        rows.append(row)
    return pa.Table.from_pylist(rows, schema=HISTORY_SCHEMA)


def file_groups_table(view: FileSystemView) -> pa.Table:
    """The rows of :data:`FILE_GROUPS_SCHEMA` for the file groups ``view`` sees."""
    rows = []
    for g in view.file_groups:
        s = g.latest
        rows.append({"partition": g.partition, "file_id": g.file_id, "slices": len(g.slices),
                     "base_instant": s.base_instant if s else None, "base_file": s.base_path if s else None,
                     "base_bytes": s.base_size if s else 0, "log_files": len(s.log_files) if s else 0})
    return pa.Table.from_pylist(rows, schema=FILE_GROUPS_SCHEMA)
