"""ChangesWidget: what each commit of a range did to the table's records (``t.changes()``).

The figure has one group of bars per commit (in commit order): how many records it inserted,
updated and deleted.  A range slider picks the commits shown; below the figure, for each
commit of the range, the inserted records, the updated ones with their old and new values side
by side (a changed cell shows ``old → new``, highlighted) and the deleted ones.  Clicking a bar
shows that commit alone.  The counts and rows are those of :meth:`Table.changes`
(``widget.changes`` holds the Arrow table read).
"""

from __future__ import annotations

import time
from typing import Any

from lakesdk.widgets._common import TableWidgetBase, esc, go, ipywidgets, sync_figure
from lakesdk.widgets._figure import FigureWidget

__all__ = ["ChangesWidget", "OPS"]

#: (op, trace name, colour): the order of the bars and of the sections
OPS = (("i", "inserted", "#2e7d32"), ("u", "updated", "#1565c0"), ("d", "deleted", "#c62828"))


def _show(v: Any) -> str:
    if v is None:
        return "∅"
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return str(v)


class ChangesWidget(TableWidgetBase):
    """Inserts, updates (old and new values side by side) and deletes of each commit in
    ``(start, end]`` (the bounds of :meth:`Table.changes`); ``rows``: at most that many
    records per section."""

    title = "Changes"

    def __init__(self, table: Any, *, start: Any = None, end: Any = None, rows: int = 20) -> None:
        if rows < 1:
            raise ValueError(f"rows must be at least 1, found {rows}")
        super().__init__(table)
        self.start, self.end, self.max_rows = start, end, int(rows)
        self.changes: Any = None
        self.commits: list[str] = []           # instant times with changes, in commit order
        self.counts: dict[str, dict[str, int]] = {}
        self.figure = FigureWidget(layout=go.Layout(
            height=260, margin=dict(l=10, r=20, t=30, b=40), barmode="stack",
            xaxis=dict(type="category", title=None), yaxis=dict(title="records"),
            legend=dict(orientation="h", y=1.12), hovermode="closest"))
        for _op, name, colour in OPS:
            self.figure.add_bar(name=name, x=[], y=[], marker_color=colour,
                                hovertemplate=f"commit %{{x}}<br>%{{y}} {name}<extra></extra>")
        self.range = ipywidgets.SelectionRangeSlider(options=["-"], description="commits",
                                                     layout=ipywidgets.Layout(width="95%"),
                                                     style={"description_width": "initial"})
        self._quiet = False          # set while refresh() replaces the slider's options
        self.range.observe(self._on_range, names="value")
        self.detail = ipywidgets.HTML("")
        self._set_body(self.figure, self.range, self.detail)
        for bar in self.figure.data:
            bar.on_click(self._on_click)
        self.add_class("lakesdk-changes")
        self.refresh()

    def refresh(self) -> "ChangesWidget":
        """Read the changes of the range again and redraw."""
        self.changes = self.table.changes(self.start, self.end).to_arrow()
        self._by_commit: dict[str, list[dict]] = {}
        for row in self.changes.to_pylist():
            self._by_commit.setdefault(row["ts_ms"], []).append(row)
        self.commits = list(self._by_commit)
        self.counts = {c: {op: sum(r["op"] == op for r in rows) for op, _, _ in OPS}
                       for c, rows in self._by_commit.items()}
        with self.figure.batch_update():
            for bar, (op, _, _) in zip(self.figure.data, OPS):
                bar.x = self.commits
                bar.y = [self.counts[c][op] for c in self.commits]
        sync_figure(self.figure)
        options = self.commits or ["-"]
        self._quiet = True
        try:
            self.range.options = options
            self.range.value = (options[0], options[-1])
        finally:
            self._quiet = False
        self._show_range()
        total = self.changes.num_rows
        self.status.value = (f"<span style='color:#555'>{total} changes in {len(self.commits)} commits"
                             f" · read {time.strftime('%H:%M:%S')}</span>")
        return self

    def select(self, commit: str) -> None:
        """Show the changes of one commit."""
        if commit in self.commits:
            self.range.value = (commit, commit)

    def _on_click(self, trace: Any, points: Any, _state: Any = None) -> None:
        if points.point_inds:
            i = points.point_inds[0]
            if 0 <= i < len(self.commits):
                self.select(self.commits[i])

    def shown(self) -> list[str]:
        """The commits the range slider selects."""
        if not self.commits:
            return []
        lo, hi = self.range.value
        a, b = self.commits.index(lo), self.commits.index(hi)
        return self.commits[a:b + 1]

    def _on_range(self, _change: Any) -> None:
        if not self._quiet:
            self._show_range()

    def _show_range(self) -> None:
        self.detail.value = self.detail_html(self.shown())

    def detail_html(self, commits: list[str]) -> str:
        """The sections of ``commits``: inserted, updated (old → new) and deleted records."""
        if not commits:
            return ("<div class='lakesdk-panel' style='color:#555'>No changes in the range: no commit wrote, "
                    "updated or deleted a record (clustering and compaction change none).</div>")
        names = [f.name for f in self.changes.schema.field("after").type]
        out = []
        for c in commits:
            mine = self._by_commit[c]
            parts = [f"<div class='lakesdk-change-commit'><b>commit {esc(c)}</b>: "
                     + ", ".join(f"{self.counts[c][op]} {name}" for op, name, _ in OPS) + "</div>"]
            for op, name, colour in OPS:
                these = [r for r in mine if r["op"] == op]
                if these:
                    parts.append(self._section(name, colour, names, these, op))
            out.append("".join(parts))
        return "<div class='lakesdk-panel lakesdk-changes-detail'>" + "".join(out) + "</div>"

    def _section(self, title: str, colour: str, names: list[str], rows: list[dict], op: str) -> str:
        head = "".join(f"<th style='text-align:left;padding-right:8px'>{esc(n)}</th>" for n in names)
        body = []
        for r in rows[:self.max_rows]:
            before, after = r["before"] or {}, r["after"] or {}
            cells = []
            for n in names:
                if op == "u" and before.get(n) != after.get(n):
                    cells.append(f"<td class='lakesdk-changed' style='background:#fff3cd;padding-right:8px;"
                                 f"white-space:nowrap'><s style='color:#777'>{esc(_show(before.get(n)))}</s> → "
                                 f"<b>{esc(_show(after.get(n)))}</b></td>")
                else:
                    v = (after if op != "d" else before).get(n)
                    cells.append(f"<td style='padding-right:8px;white-space:nowrap'>{esc(_show(v))}</td>")
            body.append("<tr>" + "".join(cells) + "</tr>")
        more = (f"<div><i>{len(rows) - self.max_rows} more not shown</i></div>" if len(rows) > self.max_rows
                else "")
        return (f"<div style='margin:6px 0 2px;color:{colour}'><b>{esc(title)}</b> ({len(rows)})</div>"
                f"<table class='lakesdk-table lakesdk-changes-{esc(title)}' style='font-size:12px;"
                f"border-collapse:collapse;line-height:1.3'><thead><tr>{head}</tr></thead>"
                f"<tbody>{''.join(body)}</tbody></table>{more}")

    def static_html(self) -> str:
        """The figure and the sections of the whole range (no controls)."""
        base = super().static_html()
        return base[:-len("</div>")] + self.detail_html(self.commits) + "</div>"

    def __repr__(self) -> str:
        return f"<ChangesWidget {self.table.name!r} {len(self.commits)} commits>"
