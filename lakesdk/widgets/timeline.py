"""TimelineWidget: the instants of a table in the order Hudi orders them, each with its stages.

What it teaches (tutorial 02): every action is an *instant* that goes requested -> inflight ->
completed; instants are ordered by their requested time, and on table versions 8 and 9 a
reader's view is cut by *completion* time, which need not follow the requested order when
writers race.  So the figure has no wall-clock axis (sub-second commits would merge into one
block): one slot per instant.

Figure (``widget.figure``), x = slot, y = lane:

* the requested-time order, top: instant ``k`` (by requested time) is a bar in slot ``k``,
  labelled with its action, on a *lane*: instants whose [requested, completed] spans overlap
  (racing writers, a service running beside a write) go on separate lanes, so a lane is a
  sequence of instants that did not overlap.  Three bar traces, ``requested``, ``inflight`` and
  ``completed``, one per current state; point ``i`` of a trace is ``widget.bars[state][i]``
  and ``customdata`` holds ``[requested, completed, action, state, slot, lane]``.  A
  ``stages`` trace marks each instant's three stages with dots, filled for each stage it has
  reached;
* the completion-time order, bottom (a row below the lanes, ``completion order`` trace): the completed
  instants in slot order of their completion, and ``order links`` from each instant's
  requested slot to its completion slot: crossing links are instants that completed out of
  requested order.

The axes have fixed ranges, so nothing moves when a bar is clicked.  Clicking a bar selects
the instant: the side panel lists the files it wrote (its write stats; a pending write's
markers; a rollback's deleted files; a compaction plan's slices).  The ``as of`` slider (the
completed commits in completion order) shows the table's first rows as of that commit and
drives a linked :class:`~lakesdk.widgets.file_layout.FileLayoutWidget` (``widget.link(fl)``),
and "Time travel" shows ``table.as_of(instant).to_pandas().head()``.  Times are UTC.
"""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from lakesdk.format.instant import WRITE_ACTIONS, Instant, parse_instant_time
from lakesdk.widgets._common import (
    STATE_COLOURS,
    BarClickMixin,
    LiveMixin,
    TableWidgetBase,
    esc,
    fmt_time,
    go,
    html_table,
    human_bytes,
    ipywidgets,
    sync_figure,
)
from lakesdk.widgets._figure import FigureWidget

if TYPE_CHECKING:
    import pandas as pd
    import pyarrow as pa

    from lakesdk.widgets.file_layout import FileLayoutWidget

__all__ = ["TimelineWidget", "STATES", "assign_lanes", "completion_order"]

STATES = ("requested", "inflight", "completed")
_PENDING_WRITES = frozenset({"commit", "deltacommit", "replacecommit", "compaction", "clustering", "logcompaction"})
#: the completion-time order's row sits this far below the last lane
_COMPLETION_GAP = 1.0
#: x offsets of the three stage dots inside a slot
_STAGE_DX = (-0.25, 0.0, 0.25)
_BAR = 0.8


def _utcnow() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


def assign_lanes(instants: list[Instant], now: datetime | None = None) -> list[int]:
    """A lane per instant (in requested order): the first lane whose last instant ended before
    this one was requested, so instants whose [requested, completed] spans overlap (a pending
    one reaches ``now``) are on separate lanes."""
    ends: list[datetime] = []
    out = []
    for inst in instants:
        start, end = TimelineWidget.bar_times(inst, now)
        lane = next((k for k, e in enumerate(ends) if e < start), len(ends))
        if lane == len(ends):
            ends.append(end)
        else:
            ends[lane] = end
        out.append(lane)
    return out


def completion_order(instants: list[Instant]) -> list[Instant]:
    """The completed instants by completion time (then requested time): the order a reader of
    table version 8 or 9 sees them land in."""
    return sorted((i for i in instants if i.is_completed), key=lambda i: (i.completed or i.requested, i.requested))


class TimelineWidget(BarClickMixin, LiveMixin, TableWidgetBase):
    """The table's timeline: instants in requested order with their stages, racing instants on
    separate lanes, and the completion order below.

    ``live=True`` (or :meth:`start_live`) re-reads the timeline every ``interval_s`` seconds
    from a background thread and updates the figure in place; :meth:`stop_live` (or
    closing the widget) stops it.
    """

    title = "Timeline"

    def __init__(self, table: Any, *, live: bool = False, interval_s: float = 2.0) -> None:
        super().__init__(table)
        self.instants: list[Instant] = []
        #: state -> instants in point order of that state's trace
        self.bars: dict[str, list[Instant]] = {s: [] for s in STATES}
        #: requested time -> lane
        self.lanes: dict[str, int] = {}
        self.selected: Instant | None = None
        self.selected_files: list[str] = []
        self.as_of_instant: Instant | None = None
        self._linked: list[Any] = []
        self._lock = threading.RLock()
        self._details: dict[tuple[str, str, str | None], dict[str, Any]] = {}
        self.refreshes = 0

        self.figure = FigureWidget(layout=go.Layout(
            barmode="overlay", height=260, margin=dict(l=120, r=10, t=36, b=44),
            xaxis=dict(title=dict(text="instants in requested-time order · stages: " + " ".join(
                           f"<span style='color:{STATE_COLOURS[s]}'>●</span> {s}" for s in STATES),
                           font=dict(size=11)),
                       zeroline=False, showgrid=False, fixedrange=True, tickfont=dict(size=10)),
            yaxis=dict(zeroline=False, showgrid=False, fixedrange=True),
            legend=dict(orientation="h", y=1.02, yanchor="bottom", x=0, font=dict(size=11)), showlegend=True,
            hovermode="closest", clickmode="event", dragmode=False,
        ))
        for state in STATES:
            self.figure.add_bar(name=state, orientation="h", base=[], x=[], y=[], customdata=[], hovertext=[],
                                text=[], textposition="inside", insidetextanchor="middle",
                                textfont=dict(size=10, color="#ffffff"),
                                marker=dict(color=STATE_COLOURS[state], line=dict(color=STATE_COLOURS[state], width=1)),
                                hovertemplate="%{hovertext}<extra></extra>", width=0.55)
        self.figure.add_scatter(name="stages", mode="markers", x=[], y=[], hoverinfo="skip", showlegend=False,
                                marker=dict(size=7, color=[], line=dict(width=1.5, color=[]), symbol="circle"))
        self.figure.add_bar(name="completion order", orientation="h", base=[], x=[], y=[], customdata=[],
                            hovertext=[], text=[], textposition="inside", insidetextanchor="middle",
                            textfont=dict(size=10, color="#ffffff"), width=0.55,
                            marker=dict(color="#66bb6a", line=dict(color="#2e7d32", width=1)),
                            hovertemplate="%{hovertext}<extra></extra>")
        self.figure.add_scatter(name="order links", mode="lines", x=[], y=[], hoverinfo="skip", showlegend=False,
                                line=dict(color="#9e9e9e", width=1, dash="dot"))
        for trace in self.figure.data[:len(STATES)]:
            trace.on_click(self._on_click)

        self.panel = ipywidgets.HTML(self._panel_html(), layout=ipywidgets.Layout(min_width="260px"))
        self.travel_button = ipywidgets.Button(description="Time travel", icon="history", disabled=True,
                                               tooltip="table.as_of(instant).to_pandas().head()")
        self.travel_button.on_click(lambda _b: self.time_travel())
        self.travel_output = ipywidgets.HTML("")
        self.slider = ipywidgets.SelectionSlider(options=[("-", "")], value="", description="as of",
                                                 continuous_update=False, disabled=True,
                                                 layout=ipywidgets.Layout(width="98%"))
        self.slider.observe(self._on_slide, names="value")
        self.as_of_output = ipywidgets.HTML("")
        side = ipywidgets.VBox([self.panel, self.travel_button, self.travel_output],
                               layout=ipywidgets.Layout(width="34%", min_width="0"))
        fig_box = ipywidgets.Box([self.figure], layout=ipywidgets.Layout(width="66%", min_width="0"))
        self._init_live(interval_s)
        self._set_body(ipywidgets.HBox([fig_box, side], layout=ipywidgets.Layout(width="100%")),
                       self.slider, self.as_of_output)
        self.add_class("lakesdk-timeline")
        self.refresh()
        if live:
            self.start_live()

    # -- reading the table ----------------------------------------------------------------
    def refresh(self) -> "TimelineWidget":
        """Re-read the timeline and update the figure in place."""
        with self._lock:
            timeline = self.table.context.store.load()
            now = _utcnow()
            insts = sorted(timeline, key=lambda i: (i.requested, i.action))
            lanes = assign_lanes(insts, now)
            done = completion_order(insts)
            slot = {(i.requested, i.action): k for k, i in enumerate(insts)}
            cslot = {(i.requested, i.action): k for k, i in enumerate(done)}
            per_state: dict[str, list[Instant]] = {s: [] for s in STATES}
            where: dict[tuple[str, str], tuple[int, int]] = {}
            for inst, lane in zip(insts, lanes):
                per_state[inst.state].append(inst)
                where[(inst.requested, inst.action)] = (slot[(inst.requested, inst.action)], lane)
            n_lanes = max(lanes, default=0) + 1
            below = n_lanes - 1 + _COMPLETION_GAP            # y of the completion-time order
            with self.figure.batch_update():
                for trace in self.figure.data[:len(STATES)]:
                    pts = per_state[trace.name]
                    trace.base = [where[(i.requested, i.action)][0] - _BAR / 2 for i in pts]
                    trace.x = [_BAR] * len(pts)
                    trace.y = [where[(i.requested, i.action)][1] for i in pts]
                    trace.text = [_short(i.action) for i in pts]
                    trace.customdata = [[i.requested, i.completed or "", i.action, i.state,
                                         *where[(i.requested, i.action)]] for i in pts]
                    trace.hovertext = [self._hover(i, *self.bar_times(i, now)) for i in pts]
                self._draw_stages(insts, lanes)
                comp = self.figure.data[len(STATES) + 1]
                comp.base = [k - _BAR / 2 for k in range(len(done))]
                comp.x = [_BAR] * len(done)
                comp.y = [below] * len(done)
                comp.text = [_short(i.action) for i in done]
                comp.customdata = [[i.requested, i.completed or "", i.action, i.state, k] for k, i in enumerate(done)]
                comp.hovertext = [f"<b>{esc(i.action)}</b> {i.requested}<br>completed {i.completed or '-'}<br>"
                                  f"{k + 1}. to complete; {slot[(i.requested, i.action)] + 1}. requested"
                                  for k, i in enumerate(done)]
                links_x: list[float | None] = []
                links_y: list[float | None] = []
                for i in done:
                    s, lane = where[(i.requested, i.action)]
                    links_x += [s, cslot[(i.requested, i.action)], None]
                    links_y += [lane + 0.3, below - 0.3, None]
                links = self.figure.data[len(STATES) + 2]
                links.x, links.y = links_x, links_y
                lay = self.figure.layout
                lay.xaxis.range = [-0.6, max(len(insts), 1) - 0.4]
                lay.xaxis.tickvals = list(range(len(insts)))
                lay.xaxis.ticktext = [str(k + 1) for k in range(len(insts))]
                lay.yaxis.range = [below + 0.6, -0.6]                        # lane 1 on top
                lay.yaxis.tickvals = [*range(n_lanes), below]
                lay.yaxis.ticktext = [f"lane {k + 1}" for k in range(n_lanes)] + ["completion order"]
                lay.height = 150 + 34 * (n_lanes + 1)
                self._highlight()
            sync_figure(self.figure)
            self.instants = insts
            self.bars = per_state
            self.lanes = {i.requested: lane for i, lane in zip(insts, lanes)}
            self._update_slider(done)
            self.refreshes += 1
            n_pending = sum(1 for i in insts if not i.is_completed)
            out_of_order = sum(1 for a, b in zip(done, done[1:]) if b.requested < a.requested)
            live = " · live" if self.live else ""
            self.status.value = (f"<span style='color:#555'>{len(insts)} instants ({n_pending} pending) on "
                                 f"{n_lanes} lane{'s' if n_lanes != 1 else ''}"
                                 + (f", {out_of_order} completed out of requested order" if out_of_order else "")
                                 + f" · read {now.strftime('%H:%M:%S')} UTC{live}</span>")
            if self.selected is not None:
                same = [i for i in insts if i.requested == self.selected.requested and i.action == self.selected.action]
                if same and same[0] != self.selected:
                    self.select(same[0])   # its state changed: show the new one
        return self

    def _draw_stages(self, insts: list[Instant], lanes: list[int]) -> None:
        """Three dots per instant (requested, inflight, completed), filled up to its state."""
        xs, ys, fill, edge = [], [], [], []
        for k, (inst, lane) in enumerate(zip(insts, lanes)):
            reached = STATES.index(inst.state)
            for s, dx in enumerate(_STAGE_DX):
                colour = STATE_COLOURS[STATES[s]]
                xs.append(k + dx)
                ys.append(lane + 0.42)
                fill.append(colour if s <= reached else "#ffffff")
                edge.append(colour)
        st = self.figure.data[len(STATES)]
        st.x, st.y = xs, ys
        st.marker.color = fill
        st.marker.line.color = edge

    @staticmethod
    def bar_times(inst: Instant, now: datetime | None = None) -> tuple[datetime, datetime]:
        """(start, end) of an instant's bar: requested -> completed; a pending instant ends at
        ``now`` (a completed instant without a completion time, on table version 6, at its start)."""
        start = parse_instant_time(inst.requested)
        if inst.completed:
            end = parse_instant_time(inst.completed)
        elif inst.is_completed:
            end = start
        else:
            end = max(start, now or _utcnow())
        return start, end

    def details(self, inst: Instant) -> dict[str, Any]:
        """What the instant's timeline files say (commit metadata totals, rollback and
        compaction plans, a pending write's markers).  Completed instants are read once and
        cached; pending ones are re-read (their markers grow while they run)."""
        key = (inst.requested, inst.state, inst.completed)
        d = self._details.get(key)
        if d is None or not inst.is_completed:
            d = self._read_details(inst)
            self._details[key] = d
        return d

    def _read_details(self, inst: Instant) -> dict[str, Any]:
        store = self.table.context.store
        d: dict[str, Any] = {}
        try:
            if inst.is_completed and inst.completed_action in WRITE_ACTIONS:
                md = store.commit_metadata(inst)
                d.update(md.totals(), operation=md.operation_type or "",
                         files_list=sorted(s.path for s in md.write_stats if s.path),
                         stats=[(s.partitionPath, s.path, s.numWrites, s.numInserts, s.numUpdateWrites,
                                 s.numDeletes, s.fileSizeInBytes or s.totalWriteBytes) for s in md.write_stats])
            elif inst.action == "rollback" and inst.is_completed:
                from lakesdk.format.rollback_metadata import RollbackMetadataData
                rb = store.metadata(inst, RollbackMetadataData)
                d.update(rolled_back=", ".join(f"{a or 'write'} {i}" for i, a in rb.rolled_back),
                         files_list=sorted(p for v in rb.deleted.values() for p in v), files_label="deleted files")
            elif inst.action == "rollback":
                from lakesdk.format.rollback_metadata import RollbackPlanData
                rb_plan = store.plan(inst, RollbackPlanData)
                d.update(rolled_back=f"{rb_plan.action} {rb_plan.instant}",
                         files_list=sorted(p for r in rb_plan.requests for p in r.files_to_delete),
                         files_label="files to delete (plan)")
            elif inst.action == "compaction" and not inst.is_completed:
                from lakesdk.format.compaction_plan import CompactionPlanData
                plan = store.plan(inst, CompactionPlanData)
                d.update(operation="COMPACT (planned)",
                         files_list=sorted(f"{o.partition}/{o.file_id}" if o.partition else o.file_id
                                           for o in plan.operations), files_label="file groups to compact")
            elif not inst.is_completed and inst.action in _PENDING_WRITES:
                if inst.state == "inflight":
                    from lakesdk.format.commit_metadata import CommitMetadata
                    md = CommitMetadata.parse(store.read_bytes(inst), layout=store.layout)
                    d["operation"] = md.operation_type or ""
                from lakesdk.markers import parse_marker_name, read_markers
                d.update(files_list=sorted({parse_marker_name(m).data_path for m in read_markers(self.table.storage,
                                                                                                  inst.requested)}),
                         files_label="files its markers name (pending)")
        except Exception as exc:  # noqa: BLE001 - a widget shows what it can; the error goes in the panel
            d["error"] = f"{type(exc).__name__}: {exc}"
        return d

    def _hover(self, inst: Instant, start: datetime, end: datetime) -> str:
        d = self.details(inst)
        lines = [f"<b>{esc(inst.action)}</b> {esc(inst.state)}", f"instant {inst.requested}",
                 f"requested {fmt_time(start)}"]
        if inst.completed:
            lines.append(f"completed {fmt_time(end)}")
        elif not inst.is_completed:
            lines.append("pending (bar reaches now)")
        lines.append(f"duration {(end - start).total_seconds():.3f} s")
        if d.get("operation"):
            lines.append(f"operation {esc(d['operation'])}")
        if "inserted" in d:
            lines.append(f"inserted {d['inserted']} · updated {d['updated']} · deleted {d['deleted']}")
            lines.append(f"files {d['files']} · {human_bytes(d['bytes'])} · partitions {d['partitions']}")
        if d.get("rolled_back"):
            lines.append(f"rolled back {esc(d['rolled_back'])}")
        if "files_list" in d and "inserted" not in d:
            lines.append(f"{esc(d.get('files_label', 'files'))}: {len(d['files_list'])}")
        if d.get("error"):
            lines.append(f"<i>{esc(d['error'])}</i>")
        return "<br>".join(lines)

    # -- selection ----------------------------------------------------------------------------
    def select(self, instant: Instant | str) -> Instant:
        """Select an instant (an Instant or its requested time): fill the side panel."""
        instant = self._find(instant)
        with self._lock:
            self.selected = instant
            self.selected_files = list(self.details(instant).get("files_list", []))
            self.travel_output.value = ""
            self.travel_button.disabled = False
            self.panel.value = self._panel_html()
            self._highlight()
            sync_figure(self.figure)
        return instant

    def _highlight(self) -> None:
        """Outline the selected instant's bar in black."""
        sel = self.selected
        with self.figure.batch_update():
            for trace in self.figure.data[:len(STATES)]:
                chosen = [sel is not None and cd[0] == sel.requested and cd[2] == sel.action
                          for cd in (trace.customdata or [])]
                trace.marker.line.width = [3 if c else 1 for c in chosen]
                trace.marker.line.color = ["#000000" if c else STATE_COLOURS[trace.name] for c in chosen]

    # -- as of -----------------------------------------------------------------------------------
    def link(self, file_layout: FileLayoutWidget) -> FileLayoutWidget:
        """Let the ``as of`` slider drive ``file_layout`` (a FileLayoutWidget of the same table):
        it shows the file groups as of the commit the slider is on.  Returns it."""
        self._linked.append(file_layout)
        if self.as_of_instant is not None:
            self._apply_as_of(self.as_of_instant)
        return file_layout

    def _update_slider(self, done: list[Instant]) -> None:
        """The slider's stops: the completed writes in completion order (kept where it was)."""
        writes = [i for i in done if i.completed_action in WRITE_ACTIONS]
        options = [(f"{k + 1}. {_short(i.action)} {i.requested_at.strftime('%H:%M:%S.%f')[:-3]}", i.requested)
                   for k, i in enumerate(writes)]
        current = self.as_of_instant.requested if self.as_of_instant is not None else None
        self._sliding = False              # the options and value set here are no user's move
        try:
            self.slider.options = options or [("-", "")]
            self.slider.disabled = not options
            if options:
                self.slider.value = current if current in {v for _, v in options} else options[-1][1]
        finally:
            self._sliding = True
        if not self.as_of_output.value:
            self.as_of_output.value = ("<div style='color:#555'>Move the <b>as of</b> slider to see the table as of "
                                       "a commit (and the file layouts linked with <code>link()</code>).</div>")

    _sliding = True

    def _on_slide(self, change: dict[str, Any]) -> None:
        if self._sliding and change["new"]:
            self._apply_as_of(self._find(change["new"]))     # a failed read is shown under the figure

    def show_as_of(self, instant: Instant | str) -> pa.Table:
        """The table as of a completed commit (its requested time): its first rows below the
        figure, and the linked file layouts pinned to it.  Returns the rows (pyarrow); a read
        that fails (the commit's files cleaned, say) raises its typed error, also shown under
        the figure."""
        inst = self._find(instant)
        if self.slider.value != inst.requested and any(v == inst.requested for _, v in self.slider.options):
            self._sliding = False
            try:
                self.slider.value = inst.requested
            finally:
                self._sliding = True
        rows = self._apply_as_of(inst)
        if self._as_of_error is not None:
            raise self._as_of_error
        return rows

    _rows: Any = None
    _as_of_error: Exception | None = None

    def _apply_as_of(self, inst: Instant) -> Any:
        from lakesdk._display import PREVIEW_ROWS, rows_html
        self.as_of_instant = inst
        self._as_of_error = None
        try:
            q = self.table.as_of(inst.requested)
            rows = q.limit(PREVIEW_ROWS + 1).to_arrow()
            n = q.count()
            self._rows = rows.slice(0, PREVIEW_ROWS)
            self.as_of_output.value = (
                f"<div class='lakesdk-as-of' data-instant='{inst.requested}'><b>as of {inst.requested}</b> "
                f"({esc(inst.action)}, completed {esc(inst.completed or '-')}): {n} rows"
                f"{rows_html(self._rows, more=rows.num_rows > PREVIEW_ROWS)}</div>")
        except Exception as exc:  # noqa: BLE001 - the error goes under the figure (show_as_of raises it)
            self._rows, self._as_of_error = None, exc
            self.as_of_output.value = f"<div style='color:#b71c1c'>{esc(type(exc).__name__)}: {esc(exc)}</div>"
        for fl in self._linked:
            fl.as_of = inst.requested
            fl.refresh()
        return self._rows

    def _find(self, instant: Instant | str) -> Instant:
        if isinstance(instant, Instant):
            return instant
        matches = [i for i in self.instants if i.requested == instant]
        if not matches:
            raise KeyError(f"no instant {instant!r} on the timeline shown (refresh() to re-read it)")
        return matches[0]

    def _panel_html(self) -> str:
        inst = self.selected
        if inst is None:
            return ("<div class='lakesdk-panel' data-instant=''><b>Click a bar</b> to see the instant's files "
                    "and to time-travel to it.</div>")
        d = self.details(inst)
        start, end = self.bar_times(inst)
        head = [("action", inst.action), ("state", inst.state), ("requested", inst.requested),
                ("completed", inst.completed or "-"), ("duration", f"{(end - start).total_seconds():.3f} s"
                                                        if inst.is_completed else "pending")]
        if d.get("operation"):
            head.append(("operation", d["operation"]))
        if "inserted" in d:
            head += [("inserted / updated / deleted", f"{d['inserted']} / {d['updated']} / {d['deleted']}"),
                     ("files", d["files"]), ("bytes", human_bytes(d["bytes"])), ("partitions", d["partitions"])]
        if d.get("rolled_back"):
            head.append(("rolled back", d["rolled_back"]))
        info = "".join(f"<tr><th style='text-align:left;padding-right:8px'>{esc(k)}</th><td>{esc(v)}</td></tr>"
                       for k, v in head)
        if d.get("stats"):
            files = html_table(["partition", "file", "records (ins/upd/del)", "bytes"],
                               [(p, path.rsplit("/", 1)[-1], f"{w} ({i}/{u}/{de})", human_bytes(b))
                                for p, path, w, i, u, de, b in sorted(d["stats"], key=lambda s: s[1])],
                               cls="lakesdk-files", clip=(1,))
            label = "written files (write stats)"
        else:
            files = html_table(["path"], [(p,) for p in d.get("files_list", [])], cls="lakesdk-files", clip=(0,))
            label = d.get("files_label", "files")
        err = f"<div style='color:#b71c1c'>{esc(d['error'])}</div>" if d.get("error") else ""
        return (f"<div class='lakesdk-panel' data-instant='{inst.requested}'>"
                f"<b>{esc(inst.action)}</b> <code class='lakesdk-selected'>{inst.requested}</code>"
                f"<table style='font-size:12px'>{info}</table>{err}"
                f"<div style='margin-top:6px'><b>{esc(label)}</b> ({len(d.get('files_list', []))})</div>{files}</div>")

    def time_travel(self) -> pd.DataFrame:
        """``table.as_of(<selected instant's requested time>).to_pandas()``: the table with
        the commits requested at or before it; the first rows go to the side panel."""
        inst = self.selected
        if inst is None:
            raise ValueError("no instant is selected: click a bar (or call select(instant)) first")
        t0 = time.perf_counter()
        try:
            df = self.table.as_of(inst.requested).to_pandas()
        except Exception as exc:  # noqa: BLE001
            self.travel_output.value = f"<div style='color:#b71c1c'>{esc(type(exc).__name__)}: {esc(exc)}</div>"
            raise
        note = "" if inst.is_completed else " (the instant is pending: its data is not visible)"
        self.travel_output.value = (
            f"<div class='lakesdk-travel' data-instant='{inst.requested}'><b>as_of({inst.requested})</b>: "
            f"{len(df)} rows{esc(note)}, read in {time.perf_counter() - t0:.2f} s"
            f"{df.head().to_html(index=False, max_cols=12)}</div>")
        return df

    # -- data -------------------------------------------------------------------------------------
    def to_pandas(self) -> pd.DataFrame:
        """The instants as a DataFrame: one row per instant, in requested order, with its slot,
        lane, its slot in completion order (None while pending), and its trace and point."""
        import pandas as pd
        rows = []
        for trace in self.figure.data[:len(STATES)]:
            for k, (req, done, action, state, slot, lane) in enumerate(trace.customdata or []):
                rows.append({"action": action, "state": state, "requested": req, "completed": done or None,
                             "slot": slot, "lane": lane, "trace": trace.name, "point": k})
        comp = {(cd[0], cd[2]): cd[4] for cd in (self.figure.data[len(STATES) + 1].customdata or [])}
        for r in rows:
            r["completion_slot"] = comp.get((r["requested"], r["action"]))
        cols = ["action", "state", "requested", "completed", "slot", "lane", "completion_slot", "trace", "point"]
        return pd.DataFrame(rows, columns=cols).sort_values("slot").reset_index(drop=True)


def _short(action: str) -> str:
    """An action's label inside a bar."""
    return {"deltacommit": "delta", "replacecommit": "replace", "compaction": "compact",
            "logcompaction": "logcompact"}.get(action, action)
