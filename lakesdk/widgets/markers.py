"""MarkersWidget: the write markers of pending and failed instants, read-only.

For each instant that has a marker folder (``.hoodie/.temp/<instant>/``) or is a pending
write on the timeline, the widget shows:

* its markers grouped by partition and IO type (``CREATE`` / ``MERGE`` / ``APPEND``) as a
  stacked bar chart (``widget.figure``: one trace per IO type, x = partition, y = count);
* the marker type (``DIRECT`` or ``TIMELINE_SERVER_BASED``, :func:`~lakesdk.markers.detect_marker_type`),
  the instant's state on the timeline and its writer's heartbeat;
* which data files the markers name exist on storage (a failed write leaves them behind);
* "Preview rollback": what a rollback of the instant would delete
  (:func:`lakesdk.services.rollback.files_written_by`), without deleting anything;
* "Roll back": rolls the failed write back (:func:`lakesdk.services.rollback.rollback`, traced),
  then walks through what the rollback did, one step at a time (previous / next): its plan
  written as ``rollback.requested``, the rollback inflight, the data files deleted, the
  rollback completed, the failed instant removed with its markers and heartbeat; each step
  with the paths it deleted and the two instants' timeline files after it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from lakesdk.format.instant import Instant
from lakesdk.widgets._common import (
    IO_COLOURS,
    TableWidgetBase,
    esc,
    go,
    html_table,
    human_bytes,
    ipywidgets,
    sync_figure,
)
from lakesdk.widgets._figure import FigureWidget

if TYPE_CHECKING:
    from lakesdk.services.rollback import RollbackResult

__all__ = ["MarkersWidget", "MarkerInstant"]

_WRITES = frozenset({"commit", "deltacommit", "replacecommit", "compaction", "clustering", "logcompaction"})
IO_ORDER = ("CREATE", "MERGE", "APPEND")


@dataclass(frozen=True)
class MarkerInstant:
    """An instant the widget can show: its timeline entry (None if it is not on the
    timeline any more) and what its heartbeat says."""

    requested: str
    instant: Instant | None
    has_marker_dir: bool
    last_beat: float | None
    heartbeat_expired: bool

    @property
    def status(self) -> str:
        if self.instant is None:
            return "not on the timeline (markers left behind)"
        if self.instant.is_completed:
            return "completed (stale markers: removed by the next writer)"
        if self.last_beat is None:
            return f"{self.instant.state}, no heartbeat: failed"
        age = time.time() - self.last_beat
        verdict = "expired: failed" if self.heartbeat_expired else "fresh: its writer may be alive"
        return f"{self.instant.state}, heartbeat {age:.0f} s ago ({verdict})"

    @property
    def label(self) -> str:
        action = self.instant.action if self.instant is not None else "?"
        state = self.instant.state if self.instant is not None else "gone"
        return f"{self.requested} {action} ({state})"

    def as_instant(self) -> Instant:
        return self.instant if self.instant is not None else Instant("commit", "inflight", self.requested)


class MarkersWidget(TableWidgetBase):
    """Markers of pending and failed writes; pick the instant in the drop-down."""

    title = "Markers"

    def __init__(self, table: Any, *, instant: str | None = None) -> None:
        super().__init__(table)
        self.candidates: list[MarkerInstant] = []
        self.selected: MarkerInstant | None = None
        self.marker_type: str | None = None
        self.markers: Any = None          # DataFrame, one row per marker
        self.rollback_preview: list[str] | None = None
        self.rollback_result: RollbackResult | None = None  # of roll_back(): the steps the widget walks
        self.step_index = 0

        self.figure = FigureWidget(layout=go.Layout(
            barmode="stack", height=320, margin=dict(l=50, r=20, t=70, b=60),
            xaxis=dict(type="category", title="partition"), yaxis=dict(title="markers"),
            title=dict(x=0, xanchor="left", y=0.97, font=dict(size=14)), showlegend=True,
            legend=dict(title="IO type", orientation="h", y=1.02, yanchor="bottom", x=1, xanchor="right")))
        for io in IO_ORDER:
            self.figure.add_bar(name=io, x=[], y=[], marker=dict(color=IO_COLOURS[io]),
                                hovertemplate="%{x}: %{y} " + io + " markers<extra></extra>")
        self.picker = ipywidgets.Dropdown(description="instant", options=[], layout=ipywidgets.Layout(width="420px"))
        self.picker.observe(self._on_pick, names="value")
        self.info = ipywidgets.HTML("")
        self.files = ipywidgets.HTML("")
        self.preview_button = ipywidgets.Button(description="Preview rollback", icon="eye",
                                                tooltip="list what a rollback would delete (deletes nothing)")
        self.preview_button.on_click(lambda _b: self.preview_rollback())
        self.preview_output = ipywidgets.HTML("")
        self.rollback_button = ipywidgets.Button(description="Roll back", icon="undo",
                                                 tooltip="roll the failed write back, then walk through its steps")
        self.rollback_button.on_click(lambda _b: self._roll_back_clicked())
        self.step_buttons = (ipywidgets.Button(description="previous step", icon="arrow-left"),
                             ipywidgets.Button(description="next step", icon="arrow-right"))
        self.step_buttons[0].on_click(lambda _b: self.show_step(self.step_index - 1))
        self.step_buttons[1].on_click(lambda _b: self.show_step(self.step_index + 1))
        for b in self.step_buttons:
            b.layout.display = "none"
        self.step_output = ipywidgets.HTML("")
        side = ipywidgets.VBox([self.info, ipywidgets.HBox([self.preview_button, self.rollback_button]),
                                self.preview_output, self.step_output, ipywidgets.HBox(list(self.step_buttons))],
                               layout=ipywidgets.Layout(width="45%"))
        self._set_body(self.picker, ipywidgets.HBox([ipywidgets.Box([self.figure],
                                                                    layout=ipywidgets.Layout(width="55%")), side]),
                       self.files)
        self.add_class("lakesdk-markers")
        self.refresh(instant=instant)

    # -- reading ---------------------------------------------------------------------------------
    def find_candidates(self) -> list[MarkerInstant]:
        """Pending writes on the timeline and every instant with a marker folder, oldest first."""
        from lakesdk.concurrency.heartbeat import is_expired, last_beat
        from lakesdk.markers import TEMP_DIR
        t = self.table
        timeline = t.context.store.load()
        dirs = {e.name for e in t.storage.list(TEMP_DIR) if e.is_dir}
        by_req: dict[str, Instant] = {}
        for i in timeline:
            if i.action in _WRITES and (i.requested in dirs or not i.is_completed):
                by_req.setdefault(i.requested, i)
        out = []
        for req in sorted(set(by_req) | dirs):
            out.append(MarkerInstant(req, by_req.get(req), req in dirs, last_beat(t.storage, req),
                                     is_expired(t.storage, req, t.options.heartbeat_interval_s,
                                                t.options.heartbeat_misses)))
        return out

    def refresh(self, instant: str | None = None) -> "MarkersWidget":
        """Re-read the candidates and the selected instant's markers."""
        self.candidates = self.find_candidates()
        keep = instant or (self.selected.requested if self.selected is not None else None)
        reqs = [c.requested for c in self.candidates]
        if keep not in reqs:
            keep = reqs[-1] if reqs else None     # the newest: usually the failed write to look at
        self.picker.unobserve(self._on_pick, names="value")
        self.picker.options = [(c.label, c.requested) for c in self.candidates]
        self.picker.value = keep
        self.picker.observe(self._on_pick, names="value")
        self.status.value = (f"<span style='color:#555'>{len(self.candidates)} instants with markers or pending"
                             f" · read {time.strftime('%H:%M:%S')}</span>")
        self.select(keep)
        return self

    def _on_pick(self, change: dict[str, Any]) -> None:
        self.select(change["new"])

    def select(self, requested: str | None) -> None:
        """Show the markers of ``requested`` (None: nothing)."""
        import pandas as pd

        from lakesdk.markers import detect_marker_type, parse_marker_name, read_markers
        t = self.table
        self.rollback_preview = None
        self.preview_output.value = ""
        cand = next((c for c in self.candidates if c.requested == requested), None)
        self.selected = cand
        rows = []
        error = ""
        self.marker_type = None
        if cand is not None:
            try:
                self.marker_type = detect_marker_type(t.storage, cand.requested)
                names = read_markers(t.storage, cand.requested)
            except Exception as exc:  # noqa: BLE001 - an unreadable marker folder is shown, not raised
                names, error = set(), f"{type(exc).__name__}: {exc}"
            for name in sorted(names):
                m = parse_marker_name(name)
                try:
                    size: int | None = t.storage.size(m.data_path)
                except (FileNotFoundError, OSError):
                    size = None
                rows.append({"marker": name, "partition": m.partition, "file_name": m.file_name,
                             "io_type": m.io_type, "data_path": m.data_path, "exists": size is not None,
                             "bytes": size})
        self.markers = pd.DataFrame(rows, columns=["marker", "partition", "file_name", "io_type", "data_path",
                                                   "exists", "bytes"])
        self._draw()
        self.preview_button.disabled = cand is None or (cand.instant is not None and cand.instant.is_completed)
        self.rollback_button.disabled = self.preview_button.disabled
        self.info.value = self._info_html(cand, error)
        self.files.value = self._files_html()

    def _draw(self) -> None:
        df = self.markers
        parts = sorted(df.partition.unique()) if len(df) else []
        with self.figure.batch_update():
            for trace in self.figure.data:
                counts = df[df.io_type == trace.name].groupby("partition").size() if len(df) else {}
                trace.x = [p or "(none)" for p in parts]
                trace.y = [int(counts.get(p, 0)) for p in parts]
            self.figure.layout.title = (f"markers of {self.selected.requested}" if self.selected is not None
                                        else "no pending or failed writes")
            # counts are whole numbers: integer ticks, about eight of them at most
            top = max((int(v) for v in (df.groupby("partition").size() if len(df) else [])), default=1)
            self.figure.layout.yaxis.update(tick0=0, dtick=max(1, -(-top // 8)), tickformat="d", rangemode="tozero")
        sync_figure(self.figure)

    def counts(self) -> dict[tuple[str, str], int]:
        """``{(partition, io_type): markers}`` as drawn (bars of height 0 left out)."""
        out = {}
        for trace in self.figure.data:
            for x, y in zip(trace.x or (), trace.y or ()):
                if y:
                    out[("" if x == "(none)" else x, trace.name)] = int(y)
        return out

    def _info_html(self, cand: MarkerInstant | None, error: str) -> str:
        if cand is None:
            return ("<div class='lakesdk-panel'><b>No pending or failed writes</b>: no instant is pending and "
                    ".hoodie/.temp holds no markers.</div>")
        df = self.markers
        existing = int(df.exists.sum()) if len(df) else 0
        rows = [("instant", cand.requested), ("action", cand.instant.action if cand.instant else "-"),
                ("status", cand.status), ("marker type", self.marker_type or "none (no marker folder)"),
                ("markers", len(df)), ("data files on storage", f"{existing} of {len(df)}"),
                ("bytes on storage", human_bytes(df.bytes.fillna(0).sum() if len(df) else 0))]
        body = "".join(f"<tr><th style='text-align:left;padding-right:8px'>{esc(k)}</th><td>{esc(v)}</td></tr>"
                       for k, v in rows)
        err = f"<div style='color:#b71c1c'>{esc(error)}</div>" if error else ""
        return (f"<div class='lakesdk-panel' data-instant='{cand.requested}'>"
                f"<table style='font-size:12px'>{body}</table>{err}</div>")

    def _files_html(self) -> str:
        df = self.markers
        if df is None or not len(df):
            return ""
        return ("<b>markers and their data files</b>" +
                html_table(["partition", "data file", "IO type", "on storage", "bytes"],
                           [(r.partition, r.file_name, r.io_type, "yes" if r.exists else "no",
                             human_bytes(r.bytes) if r.exists else "-") for r in df.itertuples()],
                           cls="lakesdk-markers-files", clip=(1,)))

    # -- rollback preview -------------------------------------------------------------------------
    def preview_rollback(self) -> list[str]:
        """The data files a rollback of the selected instant would delete (sorted), shown in
        the panel with the timeline, marker and heartbeat files it would also remove.
        Reads only: nothing is deleted."""
        from lakesdk.concurrency.heartbeat import heartbeat_path
        from lakesdk.markers import marker_dir
        from lakesdk.services.rollback import files_written_by
        cand = self.selected
        if cand is None:
            raise ValueError("no instant is selected")
        if cand.instant is not None and cand.instant.is_completed:
            raise ValueError(f"{cand.requested} is completed: its markers are stale and a rollback of a failed "
                             "write does not apply (the next writer removes stale markers)")
        t = self.table
        store = t.context.store
        files = sorted(files_written_by(t.storage, store, cand.as_instant()))
        timeline_files = sorted(f"{store.dir}/{n}" for n in store.all_states(cand.requested))
        extra = [p for p in (marker_dir(cand.requested) + "/", heartbeat_path(cand.requested))
                 if t.storage.exists(p.rstrip("/"))]
        self.rollback_preview = files
        self.preview_output.value = (
            f"<div class='lakesdk-rollback-preview' data-instant='{cand.requested}'>"
            f"<b>A rollback of {cand.requested} would delete {len(files)} data files</b> (nothing was deleted)"
            + html_table(["data file", "bytes"], [(f, self._size(f)) for f in files], clip=(0,))
            + "<div style='margin-top:4px'>then remove its timeline files, markers and heartbeat:</div>"
            + html_table(["path"], [(p,) for p in timeline_files + extra], clip=(0,)) + "</div>")
        return files

    # -- a rollback, step by step -------------------------------------------------------------------
    def roll_back(self, *, force: bool = False) -> "RollbackResult":
        """Roll back the selected failed write (``table.maintenance.rollback(instant, trace=True)``;
        a write whose writer is alive is refused unless ``force=True``), then show its first
        step; :meth:`show_step` walks through the others.  Returns the RollbackResult."""
        cand = self.selected
        if cand is None:
            raise ValueError("no instant is selected")
        result = self.table.maintenance.rollback(cand.requested, force=force, trace=True)
        self.rollback_result = result
        self.refresh()
        self.show_step(0)
        return result

    def _roll_back_clicked(self) -> None:
        from lakesdk.exceptions import LakeError
        try:
            self.roll_back()
        except (LakeError, ValueError) as e:
            self.step_output.value = (f"<div class='lakesdk-rollback-steps' style='color:#b71c1c'>"
                                      f"<b>{esc(type(e).__name__)}</b>: {esc(str(e))}</div>")

    def show_step(self, k: int) -> None:
        """Show step ``k`` (0-based, clamped) of the last :meth:`roll_back`: what it did, the
        paths it deleted and the timeline files of both instants after it."""
        result = self.rollback_result
        if result is None or not result.steps:
            raise ValueError("no rollback to show: roll_back() first")
        steps = result.steps
        self.step_index = k = max(0, min(k, len(steps) - 1))
        st = steps[k]
        self.step_buttons[0].disabled, self.step_buttons[1].disabled = k == 0, k == len(steps) - 1
        for b in self.step_buttons:
            b.layout.display = None
        paths = html_table(["path"], [(p,) for p in st.paths], clip=(0,)) if st.paths else ""
        tl = html_table(["timeline file"], [(n,) for n in st.timeline], clip=(0,)) if st.timeline else \
            "<div style='color:#555'>(neither instant has a timeline file now)</div>"
        self.step_output.value = (
            f"<div class='lakesdk-rollback-steps' data-step='{k}'><b>Rollback of {esc(result.rolled_back.requested)}, "
            f"step {k + 1} of {len(steps)}: {esc(st.name)}</b><div style='margin:4px 0'>{esc(st.text)}</div>"
            f"{paths}<div style='margin-top:4px'>the timeline after this step:</div>{tl}</div>")

    def _size(self, path: str) -> str:
        try:
            return human_bytes(self.table.storage.size(path))
        except (FileNotFoundError, OSError):
            return "missing"
