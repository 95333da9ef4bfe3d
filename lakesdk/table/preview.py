"""What a table, a query and a lake show in a notebook (their ``_repr_html_``).

A learner who displays ``t``, ``t.read()`` or a lake should see what it holds, not only how it
is configured: a few rows, the schema, how many commits made it and how big it is.  Each
preview reads at most :data:`~lakesdk._display.PREVIEW_ROWS` rows (the local reader stops once
it has them) and the timeline, so displaying stays cheap; a read that fails (a missing file, a
damaged commit) shows its typed error in place of the rows, never a traceback in the cell.  The
text ``repr`` stays one line without I/O.

The previews take what they show typed as the protocols below (:class:`PreviewedTable`,
:class:`PreviewedQuery`, :class:`PreviewedLake`), so that this module imports none of the
handles whose ``_repr_html_`` calls it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Protocol

import pyarrow as pa

from lakesdk._display import MUTED_STYLE, PREVIEW_ROWS, TD_STYLE, TH_STYLE, esc, human_bytes, rows_html

if TYPE_CHECKING:
    from lakesdk.format.instant import Instant
    from lakesdk.format.read_plan import ReadPlan
    from lakesdk.format.table_config import TableConfig
    from lakesdk.format.timeline import Timeline

__all__ = ["table_html", "query_html", "lake_html", "schema_html", "PreviewedQuery", "PreviewedTable",
           "PreviewedLake"]

#: fields of a schema shown before "and N more"
SCHEMA_FIELDS = 24
#: tables a lake lists before "and N more"
LAKE_TABLES = 30

_BOX = "max-width:100%;overflow-x:auto;font-size:12px;line-height:1.35"


class PreviewedQuery(Protocol):
    """A query as a preview reads it (:class:`~lakesdk.table.query.Query` is one)."""

    @property
    def row_limit(self) -> int | None: ...
    def plan(self) -> ReadPlan: ...
    def to_arrow(self) -> pa.Table: ...
    def limit(self, n: int | None) -> PreviewedQuery: ...


class PreviewedTable(Protocol):
    """A table as its preview reads it (:class:`~lakesdk.Table` is one)."""

    @property
    def config(self) -> TableConfig: ...
    @property
    def path(self) -> str: ...
    @property
    def timeline(self) -> Timeline: ...
    def read(self) -> PreviewedQuery: ...


class PreviewedLake(Protocol):
    """A lake as its preview lists it (:class:`~lakesdk.Lake` is one)."""

    @property
    def root(self) -> str: ...
    def tables(self) -> list[str]: ...
    def table(self, name: str) -> PreviewedTable: ...


def schema_html(schema: pa.Schema) -> str:
    """The fields of ``schema`` as ``name type`` on one wrapping line, cut after
    :data:`SCHEMA_FIELDS`."""
    shown = [f"<code>{esc(f.name)}</code>&nbsp;<span style='{MUTED_STYLE}'>{esc(f.type)}</span>"
             for f in list(schema)[:SCHEMA_FIELDS]]
    more = len(schema) - SCHEMA_FIELDS
    return ", ".join(shown) + (f", <i>and {more} more</i>" if more > 0 else "")


def _when(i: "Instant | None") -> str:
    if i is None:
        return "-"
    at = i.completed_at or i.requested_at
    return at.strftime("%Y-%m-%d %H:%M:%S UTC")


def _error_html(exc: BaseException) -> str:
    return f"<div style='color:#b71c1c;white-space:normal'>{esc(type(exc).__name__)}: {esc(exc)}</div>"


def _guarded(build: Callable[[], str]) -> str:
    """``build()``, or the error it raised shown in its place (a repr must not raise)."""
    try:
        return build()
    except Exception as exc:  # noqa: BLE001 - shown in the cell instead of a traceback
        return _error_html(exc)


def _preview(query: PreviewedQuery, rows: int) -> tuple[pa.Table, bool]:
    """Up to ``rows`` rows of ``query`` (within its own limit), and whether it returns more."""
    cap = query.row_limit
    if cap is not None and cap <= rows:
        return query.to_arrow(), False
    got = query.limit(rows + 1).to_arrow()
    return got.slice(0, rows), got.num_rows > rows


def _rows_of(q: PreviewedQuery) -> str:
    rows, more = _preview(q, PREVIEW_ROWS)
    return rows_html(rows, more=more)


def _facts(rows: list[tuple[str, str]]) -> str:
    body = "".join(f"<tr><th style='{TH_STYLE}'>{esc(k)}</th><td style='padding:1px 0;white-space:normal'>{v}</td></tr>"
                   for k, v in rows)
    return f"<table style='border-collapse:collapse;font-size:inherit'>{body}</table>"


def table_html(t: PreviewedTable) -> str:
    """A table: its configuration, commits, size and schema, and its first rows."""
    c = t.config
    kind = "copy-on-write" if c.table_type == "COPY_ON_WRITE" else "merge-on-read"
    facts = [("path", esc(t.path)),
             ("type", f"{kind}, Hudi table version {esc(c.props.get('hoodie.table.version'))}"),
             ("record key", esc(", ".join(c.record_key_fields))),
             ("partitioned by", esc(", ".join(c.partition_fields) or "-")),
             ("ordering fields", esc(", ".join(c.ordering_fields) or "-")),
             ("merge mode", esc(c.merge_mode))]
    preview = ""
    try:
        tl = t.timeline
        writes = tl.commits
        pending = len(tl.pending)
        facts.append(("commits", (f"{len(writes)} on the active timeline, the last {_when(writes.last)}"
                                  if len(writes) else "none yet")
                      + (f"; {pending} pending instant{'s' if pending != 1 else ''}" if pending else "")))
        if len(writes):
            q = t.read()
            plan = q.plan()
            files = sum((1 if s.base_file is not None else 0) + len(s.log_files) for s in plan.slices)
            facts.append(("size", f"{human_bytes(plan.bytes)} in {files} file{'s' if files != 1 else ''} "
                                  f"({len(plan.slices)} file group{'s' if len(plan.slices) != 1 else ''}, "
                                  f"{plan.total_partitions} partition{'s' if plan.total_partitions != 1 else ''})"))
            facts.append(("schema", schema_html(plan.schema)))
            preview = _guarded(lambda: _rows_of(q))
        else:
            preview = f"<div style='{MUTED_STYLE}'>no rows yet: write some with <code>t.upsert(...)</code></div>"
    except Exception as exc:  # noqa: BLE001 - shown in the cell instead of a traceback
        preview = _error_html(exc)
    return (f"<div class='lakesdk-summary' style='{_BOX}'><b>lakesdk Table</b> <code>{esc(c.name)}</code>"
            f"{_facts(facts)}{preview}</div>")


def query_html(q: PreviewedQuery) -> str:
    """A query: what it reads, the schema of its rows and the first ones."""
    def build() -> str:
        plan = q.plan()
        rows, more = _preview(q, PREVIEW_ROWS)
        cols = pa.schema([plan.schema.field(n) if n in plan.schema.names else rows.schema.field(n)
                          for n in rows.column_names])
        note = (f"{len(plan.slices)} file slice{'s' if len(plan.slices) != 1 else ''}, {human_bytes(plan.bytes)}"
                + (f"; {plan.skipped_slices} skipped by column statistics" if plan.skipped_slices else ""))
        what = "first rows" if more else "all rows"
        return (f"{_facts([('reads', note), ('columns', schema_html(cols))])}"
                f"<div style='{MUTED_STYLE}'>{what} (<code>.to_arrow()</code>, <code>.to_pandas()</code> or "
                f"<code>.to_spark()</code> read {'them all' if more else 'them'})</div>{rows_html(rows, more=more)}")
    return (f"<div class='lakesdk-summary' style='{_BOX}'><b>lakesdk Query</b> <code>{esc(repr(q))}</code>"
            f"{_guarded(build)}</div>")


def lake_html(lake: PreviewedLake) -> str:
    """A lake: its tables, each with its type, version, commits and the time of the last."""
    def build() -> str:
        names = lake.tables()
        if not names:
            return f"<div style='{MUTED_STYLE}'>no tables yet: <code>lake.create_table(...)</code></div>"
        out = []
        for name in names[:LAKE_TABLES]:
            try:
                t = lake.table(name)
                c = t.config
                writes = t.timeline.commits
                out.append(f"<tr><td style='{TD_STYLE}'><code>{esc(name)}</code></td>"
                           f"<td style='{TD_STYLE}'>{'cow' if c.table_type == 'COPY_ON_WRITE' else 'mor'}</td>"
                           f"<td style='{TD_STYLE}'>v{esc(c.props.get('hoodie.table.version'))}</td>"
                           f"<td style='{TD_STYLE}'>{len(writes)}</td><td style='{TD_STYLE}'>{_when(writes.last)}</td></tr>")
            except Exception as exc:  # noqa: BLE001 - one unreadable table does not hide the others
                out.append(f"<tr><td style='{TD_STYLE}'><code>{esc(name)}</code></td><td colspan='4'>"
                           f"{_error_html(exc)}</td></tr>")
        head = "".join(f"<th style='{TH_STYLE}'>{h}</th>" for h in ("table", "type", "version", "commits", "last commit"))
        more = len(names) - LAKE_TABLES
        return (f"<table style='border-collapse:collapse;font-size:inherit'><thead><tr>{head}</tr></thead><tbody>{''.join(out)}"
                f"</tbody></table>" + (f"<div><i>and {more} more</i></div>" if more > 0 else ""))
    return (f"<div class='lakesdk-summary' style='{_BOX}'><b>lakesdk Lake</b> <code>{esc(lake.root)}</code>"
            f"{_guarded(build)}</div>")
