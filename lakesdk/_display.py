"""Small formatting helpers for reprs (no I/O, no dependencies): sizes, and the HTML of a few
rows that the previews of tables and queries (:mod:`lakesdk.table.preview`) and the timeline
widget show."""

from __future__ import annotations

import html
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["human_bytes", "esc", "rows_html", "PREVIEW_ROWS", "CELL_CHARS", "TH_STYLE", "TD_STYLE", "MUTED_STYLE"]

#: rows a preview shows
PREVIEW_ROWS = 5
#: characters of a value shown in a preview cell (longer ones end with an ellipsis)
CELL_CHARS = 40
TH_STYLE = "text-align:left;padding:1px 10px 1px 0;white-space:nowrap"
TD_STYLE = "padding:1px 10px 1px 0;white-space:nowrap"
MUTED_STYLE = "color:#757575"


def human_bytes(n: float | None) -> str:
    """``1536`` -> ``'1.5 KiB'``.

    >>> human_bytes(512), human_bytes(1536), human_bytes(3 * 1024 ** 4)
    ('512 B', '1.5 KiB', '3.0 TiB')
    """
    x = float(n or 0)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if x < 1024 or unit == "TiB":
            return f"{x:.0f} {unit}" if unit == "B" else f"{x:.1f} {unit}"
        x /= 1024
    return f"{n} B"


def esc(v: Any) -> str:
    """``v`` as HTML text (None as nothing)."""
    return html.escape("" if v is None else str(v))


def _cell(v: Any) -> str:
    if v is None:
        return f"<span style='{MUTED_STYLE}'>null</span>"
    text = v.hex() if isinstance(v, bytes) else str(v)
    if len(text) > CELL_CHARS:
        return f"<span title='{esc(text[:500])}'>{esc(text[:CELL_CHARS - 1])}…</span>"
    return esc(text)


def rows_html(rows: pa.Table, *, more: bool = False) -> str:
    """An HTML table of ``rows`` (values cut at :data:`CELL_CHARS`), "…" under it when there are
    ``more``."""
    head = "".join(f"<th style='{TH_STYLE}'>{esc(n)}</th>" for n in rows.column_names)
    body = "".join("<tr>" + "".join(f"<td style='{TD_STYLE}'>{_cell(r[n])}</td>" for n in rows.column_names)
                   + "</tr>" for r in rows.to_pylist())
    tail = f"<div style='{MUTED_STYLE}'>…</div>" if more else ""
    return (f"<table class='lakesdk-preview' style='border-collapse:collapse;font-size:inherit'><thead><tr>{head}</tr>"
            f"</thead><tbody>{body}</tbody></table>{tail}")
