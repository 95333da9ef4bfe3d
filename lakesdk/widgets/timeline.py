"""TimelineWidget: every instant of a table as a bar from its requested time to its
completion time (pending instants reach "now"), one row per action, coloured by state.

Figure layout (``widget.figure``): three horizontal bar traces named ``requested``,
``inflight`` and ``completed`` (one per state, so the legend shows the colours).  Point
``i`` of a trace is ``widget.bars[state][i]``; its ``base`` is the requested time and its
``x`` the duration in milliseconds (plotly's date-axis Gantt encoding), and ``customdata``
holds ``[requested, completed, action, state]`` as instant times.  Times are UTC, as
instant times are.

Clicking a bar selects the instant: the side panel lists the files it wrote (its write
stats; a pending write's markers; a rollback's deleted files; a compaction plan's slices)
and a "Time travel" button shows ``table.as_of(instant).to_pandas().head()``.
"""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime
from typing import Any

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

__all__ = ["TimelineWidget", "ACTION_ROWS", "STATES"]

#: y rows, top to bottom (other actions found on the timeline are appended).
ACTION_ROWS = ("commit", "deltacommit", "replacecommit", "clean", "compaction", "rollback", "savepoint", "restore")
STATES = ("requested", "inflight", "completed")
_PENDING_WRITES = frozenset({"commit", "deltacommit", "replacecommit", "compaction", "clustering", "logcompaction"})


def _utcnow() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


class TimelineWidget(BarClickMixin, LiveMixin, TableWidgetBase):
    """The table's timeline as an interactive Gantt chart.

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
        self.selected: Instant | None = None
        self.selected_files: list[str] = []
        self._lock = threading.RLock()
        self._details: dict[tuple[str, str, str | None], dict[str, Any]] = {}
        self.refreshes = 0

        self.figure = go.FigureWidget(layout=go.Layout(
            barmode="overlay", height=344, margin=dict(l=110, r=20, t=40, b=40),
            xaxis=dict(type="date", title="time (UTC)"),
            yaxis=dict(type="category", categoryorder="array", categoryarray=list(reversed(ACTION_ROWS)),
                       title=None),
            legend=dict(title="state", orientation="h", y=1.02, yanchor="bottom", x=0), showlegend=True,
            hovermode="closest",
            clickmode="event",
        ))
        for state in STATES:
            self.figure.add_bar(name=state, orientation="h", base=[], x=[], y=[], customdata=[], hovertext=[],
                                marker=dict(color=STATE_COLOURS[state], line=dict(color=STATE_COLOURS[state], width=1)),
                                hovertemplate="%{hovertext}<extra></extra>", width=0.6)
        for trace in self.figure.data:
            trace.on_click(self._on_click)

        self.panel = ipywidgets.HTML(self._panel_html(), layout=ipywidgets.Layout(min_width="320px"))
        self.travel_button = ipywidgets.Button(description="Time travel", icon="history", disabled=True,
                                               tooltip="table.as_of(instant).to_pandas().head()")
        self.travel_button.on_click(lambda _b: self.time_travel())
        self.travel_output = ipywidgets.HTML("")
        side = ipywidgets.VBox([self.panel, self.travel_button, self.travel_output],
                               layout=ipywidgets.Layout(width="38%"))
        fig_box = ipywidgets.Box([self.figure], layout=ipywidgets.Layout(width="62%"))
        self._init_live(interval_s)
        self._set_body(ipywidgets.HBox([fig_box, side]))
        self.add_class("lakesdk-timeline")
        self.refresh()
        if live:
            self.start_live()

    # -- reading the table ----------------------------------------------------------------
    def refresh(self) -> "TimelineWidget":
        """Re-read the timeline and update the figure in place (pending bars grow to now)."""
        with self._lock:
            timeline = self.table.context.store.load()
            now = _utcnow()
            rows_order = list(ACTION_ROWS) + sorted({i.action for i in timeline} - set(ACTION_ROWS))
            per_state: dict[str, list[Instant]] = {s: [] for s in STATES}
            for inst in timeline:
                per_state[inst.state].append(inst)
            with self.figure.batch_update():
                self.figure.layout.yaxis.categoryarray = list(reversed(rows_order))
                self.figure.layout.yaxis.range = [-0.5, len(rows_order) - 0.5]   # every action row, even empty
                self.figure.layout.height = 120 + 28 * len(rows_order)
                for trace in self.figure.data:
                    insts = per_state[trace.name]
                    base, x, cd, hover = [], [], [], []
                    for inst in insts:
                        start, end = self.bar_times(inst, now)
                        base.append(fmt_time(start))
                        x.append(round((end - start).total_seconds() * 1000, 3))
                        cd.append([inst.requested, inst.completed or "", inst.action, inst.state])
                        hover.append(self._hover(inst, start, end))
                    trace.base = base
                    trace.x = x
                    trace.y = [i.action for i in insts]
                    trace.customdata = cd
                    trace.hovertext = hover
                self._highlight()
            sync_figure(self.figure)
            self.instants = list(timeline)
            self.bars = per_state
            self.refreshes += 1
            n_pending = sum(1 for i in timeline if not i.is_completed)
            live = " · live" if self.live else ""
            self.status.value = (f"<span style='color:#555'>{len(timeline)} instants ({n_pending} pending)"
                                 f" · read {now.strftime('%H:%M:%S')} UTC{live}</span>")
            if self.selected is not None:
                same = [i for i in timeline if i.requested == self.selected.requested and i.action == self.selected.action]
                if same and same[0] != self.selected:
                    self.select(same[0])   # its state changed: show the new one
        return self

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
                from lakesdk.format.plans import RollbackMetadataData
                rb = RollbackMetadataData.parse(store.read_bytes(inst))
                d.update(rolled_back=", ".join(f"{a or 'write'} {i}" for i, a in rb.rolled_back),
                         files_list=sorted(p for v in rb.deleted.values() for p in v), files_label="deleted files")
            elif inst.action == "rollback":
                from lakesdk.format.plans import RollbackPlanData
                rb_plan = RollbackPlanData.parse(store.read_bytes(Instant("rollback", "requested", inst.requested)))
                d.update(rolled_back=f"{rb_plan.action} {rb_plan.instant}",
                         files_list=sorted(p for r in rb_plan.requests for p in r.files_to_delete),
                         files_label="files to delete (plan)")
            elif inst.action == "compaction" and not inst.is_completed:
                from lakesdk.format.plans import CompactionPlanData
                plan = CompactionPlanData.parse(store.read_bytes(Instant("compaction", "requested", inst.requested)))
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
        if isinstance(instant, str):
            matches = [i for i in self.instants if i.requested == instant]
            if not matches:
                raise KeyError(f"no instant {instant!r} on the timeline shown (refresh() to re-read it)")
            instant = matches[0]
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
            for trace in self.figure.data:
                chosen = [sel is not None and req == sel.requested and action == sel.action
                          for req, _done, action, _state in (trace.customdata or [])]
                trace.marker.line.width = [3 if c else 1 for c in chosen]
                trace.marker.line.color = ["#000000" if c else STATE_COLOURS[trace.name] for c in chosen]

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
                               cls="lakesdk-files", wrap=(1,))
            label = "written files (write stats)"
        else:
            files = html_table(["path"], [(p,) for p in d.get("files_list", [])], cls="lakesdk-files", wrap=(0,))
            label = d.get("files_label", "files")
        err = f"<div style='color:#b71c1c'>{esc(d['error'])}</div>" if d.get("error") else ""
        return (f"<div class='lakesdk-panel' data-instant='{inst.requested}'>"
                f"<b>{esc(inst.action)}</b> <code class='lakesdk-selected'>{inst.requested}</code>"
                f"<table style='font-size:12px'>{info}</table>{err}"
                f"<div style='margin-top:6px'><b>{esc(label)}</b> ({len(d.get('files_list', []))})</div>{files}</div>")

    def time_travel(self) -> Any:
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
    def to_pandas(self) -> Any:
        """The bars as a DataFrame: one row per instant (trace = state, point = index in it)."""
        import pandas as pd
        rows = []
        for trace in self.figure.data:
            for k, (req, done, action, state) in enumerate(trace.customdata or []):
                rows.append({"action": action, "state": state, "requested": req, "completed": done or None,
                             "start": trace.base[k], "duration_ms": trace.x[k], "trace": trace.name, "point": k})
        return pd.DataFrame(rows, columns=["action", "state", "requested", "completed", "start", "duration_ms",
                                           "trace", "point"])
