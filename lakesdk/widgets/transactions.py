"""TransactionsWidget: concurrent writers as lanes over time, and who won each race.

Sources, merged into one list of :class:`WriteSpan` (``widget.writes``):

* the transaction journal (:func:`lakesdk.concurrency.journal.read_transactions`): one
  record per write under optimistic concurrency, with its writer, start and end, outcome,
  the file groups it touched, the write it conflicted with and why, and its schemas;
* the timeline, for writes the journal does not know: completed writes and table services
  (single-writer tables, other engines) from their instant times and commit metadata, in
  the lanes ``(not journaled) writes`` and ``(not journaled) table services``; pending
  writes each in a lane ``pending <instant>``, with the age of their heartbeat
  (``.hoodie/.heartbeat/<instant>``).

Figure layout (``widget.figure``): one horizontal bar trace per outcome, in
:data:`OUTCOMES` order (``committed``, ``conflict``, ``schema_conflict``,
``early_conflict``, ``failed``, ``inflight``); y = the lane (writer id), ``base`` = start,
``x`` = duration in milliseconds, ``customdata`` = ``[instant, action, lane, outcome]``;
point ``i`` of a trace is ``widget.bars[outcome][i]``.  Then two bar traces of outlines
drawn over those bars (same encoding, no fill, no hover): ``overlap`` (red) for every write
that touched a common file group with another while both ran (``widget.overlaps``), and
``selected`` (black) for the selected write; last a scatter trace ``overlap links``
marking, for each overlap, both lanes at the middle of the two writes' common time.  Inflight bars
whose writer is gone (heartbeat expired or missing) are hatched.  Then the commit protocol
of each journaled write (:mod:`lakesdk.widgets._steps`): two thin bar traces,
``waiting for the lock`` and ``holding the lock`` (lock requested to acquired, acquired to
completed or aborted), and a scatter trace ``steps`` with a mark per step the write reached
(requested, files written, lock requested, lock acquired, checked, metadata table,
completed, or aborted).  Times are UTC.

Below the figure, the verdicts table (``widget.verdicts()``) says which commit won and why
each other write failed; the schema table compares the schemas of writers that hit a
schema conflict (``widget.schema_versions()``).  Click a bar for the write's details and
its steps, each with its time after the instant was requested.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from lakesdk.concurrency.journal import TransactionRecord, read_transactions
from lakesdk.format.instant import WRITE_ACTIONS, Instant, parse_instant_time
from lakesdk.widgets._common import (
    BarClickMixin,
    LiveMixin,
    TableWidgetBase,
    esc,
    fmt_time,
    go,
    html_table,
    ipywidgets,
    sync_figure,
    utc_from_ms,
)
from lakesdk.widgets._figure import FigureWidget
from lakesdk.widgets._steps import STEP_SYMBOLS, lock_phases, step_hover, steps_html, steps_of

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["TransactionsWidget", "WriteSpan", "Overlap", "OUTCOMES", "OUTCOME_COLOURS", "LOCK_COLOURS", "STEPS_TRACE"]

OUTCOMES = ("committed", "conflict", "schema_conflict", "early_conflict", "failed", "inflight")
OUTCOME_COLOURS = {"committed": "#2e7d32", "conflict": "#c62828", "schema_conflict": "#6a1b9a",
                   "early_conflict": "#ef6c00", "failed": "#616161", "inflight": "#1565c0"}
LOSING = frozenset({"conflict", "schema_conflict", "early_conflict"})
OVERLAP_COLOUR = "#d50000"
#: trace names after the outcome bars: outlines of overlapping and selected writes, overlap connectors
OVERLAP_TRACE, SELECTED_TRACE, CONNECTOR_TRACE = "overlap", "selected", "overlap links"
#: thin bars over a journaled write: the time it waited for the table lock, and held it to commit
LOCK_COLOURS = {"waiting for the lock": "#9e9e9e", "holding the lock": "#212121"}
STEPS_TRACE = "steps"
LANE_WRITES = "(not journaled) writes"
LANE_SERVICES = "(not journaled) table services"
_SERVICES = frozenset({"compaction", "clustering", "logcompaction"})
_PENDING = WRITE_ACTIONS | _SERVICES


def _utcnow() -> datetime:
    return utc_from_ms(time.time() * 1000)


def _fg_text(groups: Any) -> str:
    return ", ".join(f"{p}/{f}" if p else f for p, f in groups)


@dataclass(frozen=True)
class WriteSpan:
    """One write as a bar: from the journal (``source="journal"``) or the timeline."""

    instant: str
    action: str
    lane: str
    outcome: str
    start: datetime
    end: datetime
    operation: str = ""
    file_groups: tuple[tuple[str, str], ...] = ()
    conflicts_with: dict[str, Any] | None = None
    reason: str = ""
    source: str = "journal"
    completed: str | None = None              # completion time on the timeline, if any
    heartbeat_age_s: float | None = None      # inflight: seconds since the last beat (None: no heartbeat)
    heartbeat_expired: bool | None = None
    record: TransactionRecord | None = field(default=None, compare=False, repr=False)

    @property
    def seconds(self) -> float:
        return max(0.0, (self.end - self.start).total_seconds())

    @property
    def heartbeat(self) -> str:
        """The heartbeat's freshness (inflight writes), '' otherwise."""
        if self.outcome != "inflight":
            return ""
        if self.heartbeat_age_s is None:
            return "no heartbeat: its writer is gone"
        state = "expired: its writer is presumed dead" if self.heartbeat_expired else "fresh: its writer is alive"
        return f"last beat {self.heartbeat_age_s:.0f} s ago ({state})"

    def __repr__(self) -> str:
        return (f"<WriteSpan {self.instant} {self.action} {self.outcome} lane={self.lane!r} "
                f"{self.seconds:.3f} s, {len(self.file_groups)} file groups>")


@dataclass(frozen=True)
class Overlap:
    """Two writes that touched the same file groups while both ran."""

    a: WriteSpan
    b: WriteSpan
    file_groups: tuple[tuple[str, str], ...]
    start: datetime
    end: datetime

    def __repr__(self) -> str:
        return f"<Overlap {self.a.instant} x {self.b.instant} on {len(self.file_groups)} file groups>"


def find_overlaps(writes: list[WriteSpan]) -> list[Overlap]:
    """Pairs of writes whose times overlap and that share a file group."""
    out = []
    for i, a in enumerate(writes):
        fa = set(a.file_groups)
        if not fa:
            continue
        for b in writes[i + 1:]:
            if a.start < b.end and b.start < a.end:
                shared = fa & set(b.file_groups)
                if shared:
                    out.append(Overlap(a, b, tuple(sorted(shared)), max(a.start, b.start), min(a.end, b.end)))
    return out


def writers_text(writes: list[WriteSpan]) -> str:
    """"5 writes by 2 writers, 1 not journaled (writer unknown), 1 by table services": the
    writers the journal names are counted; a write without a journal record (a single-writer
    table's, another engine's) has no known writer, and a table service is no writer."""
    known = {w.lane for w in writes if w.source == "journal"}
    services = sum(1 for w in writes if w.lane == LANE_SERVICES)
    unknown = sum(1 for w in writes if w.source != "journal" and w.lane != LANE_SERVICES)
    out = f"{len(writes)} write{'s' if len(writes) != 1 else ''}"
    if known:
        out += f" by {len(known)} writer{'s' if len(known) != 1 else ''}"
    if unknown:
        out += f", {unknown} not journaled (writer unknown)" if known else " (not journaled: writers unknown)"
    if services:
        out += f", {services} by table services"
    return out


class TransactionsWidget(BarClickMixin, LiveMixin, TableWidgetBase):
    """Writers as lanes over time, coloured by outcome, with overlaps and verdicts.

    Shows the newest ``limit`` writes.  ``live=True`` (or :meth:`start_live`) refreshes
    every ``interval_s`` seconds.
    """

    title = "Transactions"

    def __init__(self, table: Any, *, live: bool = False, interval_s: float = 2.0, limit: int = 500) -> None:
        if limit < 1:
            raise ValueError(f"limit must be at least 1, found {limit}")
        super().__init__(table)
        self.limit = int(limit)
        self.hidden = 0          # older writes left out (beyond ``limit``)
        self.writes: list[WriteSpan] = []
        self.bars: dict[str, list[WriteSpan]] = {o: [] for o in OUTCOMES}
        self.overlaps: list[Overlap] = []
        self.lanes: list[str] = []
        self.selected: WriteSpan | None = None
        self._lock = threading.RLock()
        self._metadata_cache: dict[str, tuple[tuple[tuple[str, str], ...], str]] = {}
        self.figure = FigureWidget(layout=go.Layout(
            barmode="overlay", height=300, margin=dict(l=10, r=20, t=40, b=40),
            xaxis=dict(type="date", title="time (UTC)"), yaxis=dict(type="category", automargin=True, title=None),
            legend=dict(title="outcome", orientation="h", y=1.02, yanchor="bottom", x=0), showlegend=True,
            hovermode="closest", clickmode="event"))
        for outcome in OUTCOMES:
            colour = OUTCOME_COLOURS[outcome]
            self.figure.add_bar(name=outcome, orientation="h", x=[], y=[], customdata=[], hovertext=[],
                                marker=dict(color=colour, line=dict(color=colour, width=1)),
                                hovertemplate="%{hovertext}<extra></extra>", width=0.6)
        # outlines drawn over the bars (no hover, so hovers and clicks reach the bar below)
        for name, colour in ((OVERLAP_TRACE, OVERLAP_COLOUR), (SELECTED_TRACE, "#000000")):
            self.figure.add_bar(name=name, orientation="h", x=[], y=[], customdata=[], width=0.6,
                                marker=dict(color="rgba(0,0,0,0)", line=dict(color=colour, width=3)),
                                hoverinfo="skip", legendgroup=name, showlegend=name == OVERLAP_TRACE)
        # (markers only: a None gap in an array sent to the browser blanks the whole axis)
        self.figure.add_scatter(name=CONNECTOR_TRACE, mode="markers", x=[], y=[], hovertext=[],
                                marker=dict(color=OVERLAP_COLOUR, size=10, symbol="x"), legendgroup=OVERLAP_TRACE,
                                showlegend=False, hovertemplate="%{hovertext}<extra></extra>")
        # the commit protocol on each journaled write's bar: the time it waited for the table
        # lock and held it (thin bars), and a mark per step it reached (lakesdk.widgets._steps)
        for name, colour in LOCK_COLOURS.items():
            self.figure.add_bar(name=name, orientation="h", x=[], y=[], customdata=[], hovertext=[], width=0.22,
                                marker=dict(color=colour, line=dict(color=colour, width=0)), legendgroup="steps",
                                hovertemplate="%{hovertext}<extra></extra>")
        self.figure.add_scatter(name=STEPS_TRACE, mode="markers", x=[], y=[], hovertext=[], legendgroup="steps",
                                marker=dict(color="#111111", size=9, symbol=[], line=dict(width=1.5)),
                                hovertemplate="%{hovertext}<extra></extra>")
        for trace in self.figure.data[:len(OUTCOMES)]:
            trace.on_click(self._on_click)
        self.panel = ipywidgets.HTML(self._panel_html(), layout=ipywidgets.Layout(min_width="300px"))
        self.verdicts_html = ipywidgets.HTML("")
        self.schemas_html = ipywidgets.HTML("")
        fig_box = ipywidgets.Box([self.figure], layout=ipywidgets.Layout(width="64%"))
        self._set_body(ipywidgets.HBox([fig_box, ipywidgets.Box([self.panel], layout=ipywidgets.Layout(width="36%"))]),
                       self.verdicts_html, self.schemas_html)
        self.add_class("lakesdk-transactions")
        self._init_live(interval_s)
        self.refresh()
        if live:
            self.start_live()

    # -- reading -----------------------------------------------------------------------------------
    def read_writes(self, now: datetime | None = None) -> list[WriteSpan]:
        """The journal's writes plus the timeline's writes it does not know, by start time
        (the newest ``limit``; commit metadata is read only for those)."""
        t = self.table
        now = now or _utcnow()
        records = read_transactions(t.storage)
        timeline = t.context.store.load()
        completions = {i.requested: i.completed for i in timeline if i.is_completed}
        todo: list[tuple[datetime, str, Any]] = []
        for r in records:
            span = self._from_record(r, completions.get(r.instant) if r.outcome == "committed" else None)
            todo.append((span.start, r.instant, span))
        journaled = {r.instant for r in records}
        for inst in timeline:
            if inst.requested in journaled:
                continue
            if (inst.is_completed and (inst.completed_action in WRITE_ACTIONS or inst.action in _SERVICES)) or \
                    (not inst.is_completed and inst.action in _PENDING):
                todo.append((parse_instant_time(inst.requested), inst.requested, inst))
        todo.sort(key=lambda e: (e[0], e[1]))
        self.hidden = max(0, len(todo) - self.limit)
        out = []
        for _start, _req, item in todo[self.hidden:]:
            if isinstance(item, WriteSpan):
                out.append(item)
            elif item.is_completed:
                out.append(self._from_completed(item))
            else:
                out.append(self._from_pending(item, now))
        return out

    @staticmethod
    def _from_record(r: TransactionRecord, completed: str | None) -> WriteSpan:
        start = utc_from_ms(r.started_ms) if r.started_ms else parse_instant_time(r.instant)
        end = utc_from_ms(r.ended_ms) if r.ended_ms else start
        return WriteSpan(r.instant, r.action, r.writer or "(unknown writer)", r.outcome, start, max(start, end),
                         operation=r.operation, file_groups=tuple(r.file_groups), conflicts_with=r.conflicts_with,
                         reason=r.reason, source="journal", completed=completed, record=r)

    def _from_completed(self, inst: Instant) -> WriteSpan:
        start = parse_instant_time(inst.requested)
        end = parse_instant_time(inst.completed) if inst.completed else start
        cached = self._metadata_cache.get(inst.requested)
        if cached is None:     # completed instants do not change: read their metadata once
            try:
                md = self.table.context.store.commit_metadata(inst)
                cached = (tuple(sorted({(s.partitionPath or "", s.fileId) for s in md.write_stats if s.fileId})),
                          (md.operation_type or "").lower())
            except Exception:  # noqa: BLE001 - a bar without file groups is better than no widget
                cached = ((), "")
            self._metadata_cache[inst.requested] = cached
        groups, operation = cached
        lane = LANE_SERVICES if inst.action in _SERVICES else LANE_WRITES
        return WriteSpan(inst.requested, inst.completed_action or inst.action, lane, "committed", start, end,
                         operation=operation, file_groups=groups, source="timeline", completed=inst.completed)

    def _from_pending(self, inst: Instant, now: datetime) -> WriteSpan:
        from lakesdk.concurrency.heartbeat import is_expired, last_beat
        t = self.table
        start = parse_instant_time(inst.requested)
        beat = last_beat(t.storage, inst.requested)
        age = None if beat is None else max(0.0, time.time() - beat)
        expired = is_expired(t.storage, inst.requested, t.options.heartbeat_interval_s, t.options.heartbeat_misses)
        return WriteSpan(inst.requested, inst.action, f"pending {inst.requested}", "inflight", start, max(start, now),
                         file_groups=self._marker_file_groups(inst.requested), source="timeline",
                         heartbeat_age_s=age, heartbeat_expired=expired)

    def _marker_file_groups(self, instant: str) -> tuple[tuple[str, str], ...]:
        from lakesdk.format.file_naming import BaseFile, LogFile
        from lakesdk.markers import parse_marker_name, read_markers
        try:
            names = read_markers(self.table.storage, instant)
        except Exception:  # noqa: BLE001 - no markers (yet), or an unreadable marker folder
            return ()
        groups = set()
        for m in names:
            try:
                mk = parse_marker_name(m)
                leaf = mk.data_path.rsplit("/", 1)[-1]
                fid = LogFile.parse(leaf).file_id if leaf.startswith(".") else BaseFile.parse(leaf).file_id
            except Exception:  # noqa: BLE001
                continue
            groups.add((mk.partition, fid))
        return tuple(sorted(groups))

    def refresh(self) -> "TransactionsWidget":
        """Re-read the journal, the timeline and the heartbeats; redraw."""
        with self._lock:
            now = _utcnow()
            writes = self.read_writes(now)
            overlaps = find_overlaps(writes)
            lanes: list[str] = []
            for w in writes:
                if w.lane not in lanes:
                    lanes.append(w.lane)
            per: dict[str, list[WriteSpan]] = {o: [] for o in OUTCOMES}
            for w in writes:
                per[w.outcome if w.outcome in per else "failed"].append(w)
            self.writes, self.bars, self.overlaps, self.lanes = writes, per, overlaps, lanes
            self._draw()
            if self.selected is not None:
                same = [w for w in writes if w.instant == self.selected.instant]
                self.selected = same[0] if same else None
            self.panel.value = self._panel_html()
            self.verdicts_html.value = self._verdicts_html()
            self.schemas_html.value = self._schemas_html()
            self.refreshes += 1
            n_inflight = len(per["inflight"])
            live = " · live" if self.live else ""
            older = f", {self.hidden} older not shown" if self.hidden else ""
            self.status.value = (f"<span style='color:#555'>{writers_text(writes)}{older}"
                                 f" ({n_inflight} inflight), {len(overlaps)} overlaps"
                                 f" · read {now.strftime('%H:%M:%S')} UTC{live}</span>")
        return self

    def _draw(self) -> None:
        in_overlap = {w.instant for o in self.overlaps for w in (o.a, o.b)}
        sel = self.selected.instant if self.selected is not None else None
        with self.figure.batch_update():
            lay = self.figure.layout
            lay.yaxis.categoryorder = "array"
            lay.yaxis.categoryarray = list(reversed(self.lanes))
            lay.height = 140 + 34 * max(1, len(self.lanes))
            for trace in self.figure.data[:len(OUTCOMES)]:
                ws = self.bars[trace.name]
                trace.base = [fmt_time(w.start) for w in ws]
                trace.x = [round(w.seconds * 1000, 3) for w in ws]
                trace.y = [w.lane for w in ws]
                trace.customdata = [[w.instant, w.action, w.lane, w.outcome] for w in ws]
                trace.hovertext = [self._hover(w) for w in ws]
                trace.marker.pattern.shape = ["/" if w.heartbeat_expired or
                                              (w.outcome == "inflight" and w.heartbeat_age_s is None) else ""
                                              for w in ws]
            outlined = {OVERLAP_TRACE: [w for w in self.writes if w.instant in in_overlap],
                        SELECTED_TRACE: [w for w in self.writes if w.instant == sel]}
            for trace in self.figure.data[len(OUTCOMES):len(OUTCOMES) + 2]:
                ws = outlined[trace.name]
                trace.base = [fmt_time(w.start) for w in ws]
                trace.x = [round(w.seconds * 1000, 3) for w in ws]
                trace.y = [w.lane for w in ws]
                trace.customdata = [[w.instant, w.action, w.lane, w.outcome] for w in ws]
            ov = self.figure.data[len(OUTCOMES) + 2]
            xs: list[Any] = []
            ys: list[Any] = []
            hover: list[Any] = []
            for o in self.overlaps:
                mid = fmt_time(o.start + (o.end - o.start) / 2)
                text = (f"<b>overlap</b> {o.a.instant} × {o.b.instant}<br>{len(o.file_groups)} shared file groups: "
                        f"{esc(_fg_text(o.file_groups[:6]))}{' …' if len(o.file_groups) > 6 else ''}<br>"
                        f"{esc(self.verdict(o.a))}<br>{esc(self.verdict(o.b))}")
                xs += [mid, mid]
                ys += [o.a.lane, o.b.lane]
                hover += [text, text]
            ov.x, ov.y, ov.hovertext = xs, ys, hover
            self._draw_steps()
        sync_figure(self.figure)

    def _draw_steps(self) -> None:
        first = len(OUTCOMES) + 3
        for trace in self.figure.data[first:first + len(LOCK_COLOURS)]:
            spans = [(w, start, end) for w in self.writes for name, start, end in lock_phases(w) if name == trace.name]
            trace.base = [fmt_time(start) for _w, start, _end in spans]
            trace.x = [round((end - start).total_seconds() * 1000, 3) for _w, start, end in spans]
            trace.y = [w.lane for w, _s, _e in spans]
            trace.customdata = [[w.instant, w.action, w.lane, w.outcome] for w, _s, _e in spans]
            trace.hovertext = [f"<b>{esc(trace.name)}</b> {esc(w.instant)}: {(e - s).total_seconds() * 1000:.0f} ms"
                               for w, s, e in spans]
        marks = [(w, st) for w in self.writes for st in steps_of(w)]
        tr = self.figure.data[first + len(LOCK_COLOURS)]
        tr.x = [fmt_time(st.at) for _w, st in marks]
        tr.y = [w.lane for w, _st in marks]
        tr.hovertext = [step_hover(w, st) for w, st in marks]
        tr.marker.symbol = [STEP_SYMBOLS.get(st.name, "circle") for _w, st in marks]

    # -- verdicts ------------------------------------------------------------------------------------
    def _by_instant(self, instant: str | None) -> WriteSpan | None:
        return next((w for w in self.writes if w.instant == instant), None)

    def verdict(self, w: WriteSpan) -> str:
        """One sentence: whether the write won, and why it lost."""
        cw = w.conflicts_with or {}
        other = cw.get("instant")
        groups = [tuple(g) for g in cw.get("file_groups") or ()]
        parts = sorted({p or "(root)" for p, _f in groups})
        on = (f" on {len(groups)} file group{'s' if len(groups) != 1 else ''} in {', '.join(parts)}"
              if groups else "")
        if w.outcome == "committed":
            losers = [x.instant for x in self.writes if (x.conflicts_with or {}).get("instant") == w.instant
                      and x.outcome in LOSING]
            won = f"; won against {', '.join(losers)}" if losers else ""
            return f"{w.instant} committed{' at ' + w.completed if w.completed else ''}{won}"
        if w.outcome in LOSING:
            winner = self._by_instant(other)
            when = ""
            if winner is not None and winner.outcome == "committed":
                when = f", which committed first ({fmt_time(winner.end)} UTC)"
            kind = {"conflict": "conflict at commit", "schema_conflict": "schema conflict",
                    "early_conflict": "early conflict (detected before writing)"}[w.outcome]
            target = f"{cw.get('action') or 'write'} {other}" if other else "a concurrent write"
            return f"{w.instant} lost ({kind}) to {target}{when}{on}"     # the error: the panel's "reason"
        if w.outcome == "failed":
            return f"{w.instant} failed{': ' + w.reason if w.reason else ''}"
        if w.outcome == "inflight":
            return f"{w.instant} still inflight: {w.heartbeat}"
        return f"{w.instant} {w.outcome}"

    def verdicts(self) -> pd.DataFrame:
        """A DataFrame: one row per write, its outcome and verdict, newest last."""
        import pandas as pd
        rows = [{"instant": w.instant, "writer": w.lane, "action": w.action, "operation": w.operation,
                 "outcome": w.outcome, "start": w.start, "end": w.end, "seconds": round(w.seconds, 3),
                 "file_groups": len(w.file_groups), "conflicts_with": (w.conflicts_with or {}).get("instant"),
                 "heartbeat": w.heartbeat, "source": w.source, "verdict": self.verdict(w)} for w in self.writes]
        return pd.DataFrame(rows, columns=["instant", "writer", "action", "operation", "outcome", "start", "end",
                                           "seconds", "file_groups", "conflicts_with", "heartbeat", "source",
                                           "verdict"])

    def schema_versions(self) -> pd.DataFrame:
        """For every write with a schema conflict: each column whose type differs between the
        writer's schema, the table's schema when it started and the one seen at commit."""
        import pandas as pd
        rows = []
        for w in self.writes:
            r = w.record
            if w.outcome != "schema_conflict" or r is None:
                continue
            mine, start, commit = (dict(s or ()) for s in (r.schema, r.schema_at_start, r.schema_at_commit))
            for col in sorted(set(mine) | set(start) | set(commit)):
                vals = (mine.get(col), start.get(col), commit.get(col))
                if len(set(vals)) > 1:
                    rows.append({"instant": w.instant, "writer": w.lane, "column": col, "writer_type": vals[0],
                                 "type_at_start": vals[1], "type_at_commit": vals[2]})
        return pd.DataFrame(rows, columns=["instant", "writer", "column", "writer_type", "type_at_start",
                                           "type_at_commit"])

    # -- html --------------------------------------------------------------------------------------------
    def _hover(self, w: WriteSpan) -> str:
        lines = [f"<b>{esc(w.action)} {esc(w.instant)}</b> {esc(w.outcome)}", f"writer {esc(w.lane)}",
                 f"{fmt_time(w.start)} → {fmt_time(w.end)} ({w.seconds:.3f} s)"]
        if w.operation:
            lines.append(f"operation {esc(w.operation)}")
        lines.append(f"file groups {len(w.file_groups)}: {esc(_fg_text(w.file_groups[:4]))}"
                     f"{' …' if len(w.file_groups) > 4 else ''}")
        if w.heartbeat:
            lines.append(f"heartbeat: {esc(w.heartbeat)}")
        lines.append(esc(self.verdict(w)))
        return "<br>".join(lines)

    def _verdicts_html(self) -> str:
        if not self.writes:
            return ("<div class='lakesdk-verdicts'><b>No writes yet</b>: the journal and the timeline are "
                    "empty.</div>")
        rows = [(w.instant, w.lane, w.action, w.outcome, f"{w.seconds:.3f} s", len(w.file_groups),
                 (w.conflicts_with or {}).get("instant") or "", self.verdict(w)) for w in self.writes]
        note = ("" if any(w.source == "journal" for w in self.writes) else
                "<div style='color:#555'>No transaction journal: lanes come from the timeline only "
                "(writers are not known).</div>")
        return ("<div class='lakesdk-verdicts'><b>Verdicts</b>" + note +
                html_table(["instant", "writer", "action", "outcome", "duration", "file groups", "conflicts with",
                            "verdict"], rows, wrap=(7,)) + "</div>")

    def _schemas_html(self) -> str:
        df = self.schema_versions()
        if not len(df):
            return ""
        return ("<div class='lakesdk-schemas'><b>Schema versions of writers with a schema conflict</b>" +
                html_table(["instant", "writer", "column", "writer's type", "table type at start",
                            "table type at commit"],
                           [tuple("-" if v is None else v for v in r) for r in df.itertuples(index=False)]) +
                "</div>")

    def _panel_html(self) -> str:
        w = self.selected
        if w is None:
            return ("<div class='lakesdk-panel' data-instant=''><b>Click a bar</b> for the write's file groups, "
                    "overlaps and verdict.</div>")
        head = [("writer", w.lane), ("action", w.action), ("operation", w.operation or "-"), ("outcome", w.outcome),
                ("start", fmt_time(w.start)), ("end", fmt_time(w.end)), ("duration", f"{w.seconds:.3f} s"),
                ("source", w.source)]
        if w.heartbeat:
            head.append(("heartbeat", w.heartbeat))
        if w.conflicts_with:
            head.append(("conflicts with", f"{w.conflicts_with.get('action', '')} {w.conflicts_with.get('instant')}"))
        if w.reason:
            head.append(("reason", w.reason))
        info = "".join(f"<tr><th style='text-align:left;padding-right:8px'>{esc(k)}</th><td>{esc(v)}</td></tr>"
                       for k, v in head)
        mine = [o for o in self.overlaps if w in (o.a, o.b)]
        overl = html_table(["overlaps with", "shared file groups"],
                           [((o.b if o.a == w else o.a).instant, _fg_text(o.file_groups)) for o in mine], wrap=(1,))
        return (f"<div class='lakesdk-panel' data-instant='{esc(w.instant)}'><b>{esc(w.action)}</b> "
                f"<code class='lakesdk-selected'>{esc(w.instant)}</code>"
                f"<div style='margin:4px 0;font-size:12px'>{esc(self.verdict(w))}</div>"
                f"<table style='font-size:12px'>{info}</table>"
                f"<div style='margin-top:6px'><b>file groups</b> ({len(w.file_groups)})</div>"
                + html_table(["partition", "file id"], [(p or "(root)", f) for p, f in w.file_groups], clip=(1,))
                + (f"<div style='margin-top:6px'><b>overlaps</b> ({len(mine)})</div>{overl}" if mine else "")
                + steps_html(w) + "</div>")

    # -- selection --------------------------------------------------------------------------------------
    def select(self, write: WriteSpan | str) -> WriteSpan:
        """Select a write (a WriteSpan or its instant): fill the side panel, outline its bar."""
        if isinstance(write, str):
            found = self._by_instant(write)
            if found is None:
                raise KeyError(f"no write {write!r} in the widget (refresh() to re-read the journal)")
            write = found
        with self._lock:
            self.selected = write
            self.panel.value = self._panel_html()
            self._draw()
        return write

    # -- data -----------------------------------------------------------------------------------------------
    def to_pandas(self) -> pd.DataFrame:
        """The bars as a DataFrame: one row per write (trace = outcome, point = index in it)."""
        df = self.verdicts()
        point = {w.instant: k for ws in self.bars.values() for k, w in enumerate(ws)}
        df["point"] = [point[i] for i in df.instant]
        return df
