"""KafkaMonitorWidget: a Kafka sink's coordinator, rounds, offsets and lag.

``KafkaMonitorWidget(source)`` takes a :class:`~lakesdk.streaming.kafka.KafkaSink` (its
``status()`` is read on every refresh, and its table for the committed rounds), a
:class:`~lakesdk.streaming.kafka.SinkStatus` snapshot, or a callable returning one.

* the header: coordinator state and worker, the current round and its instant, the last
  committed instant, committed and aborted rounds, total lag, errors;
* ``widget.figure``: per-partition bars (x = ``p<partition>``): trace ``lag`` (high
  watermark minus the offset committed in the table; partitions whose end is unknown
  are left out) and, hidden until picked in the legend, ``committed offset``;
* ``widget.rounds_figure``: one point per round the table committed (x = completion time,
  y = the sum of its committed offsets, from the delta commits' ``kafka.commit.offsets``
  for the topic), and ``widget.rounds``: the same as a DataFrame (instant, completed,
  offsets, records); rounds the status itself reports (when the sink keeps a history) and
  the rounds seen while the widget refreshes are listed too (``widget.observed``).

``refresh()`` re-reads; ``live=True`` (or :meth:`start_live`) refreshes every
``interval_s`` seconds.  The static picture stored beside the live widget (``static_html()``,
what the documentation site and nbconvert show) draws both figures, the lag bars above the
rounds: a sink that has caught up has no lag to draw.
"""

from __future__ import annotations

import threading
import time
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Callable

from lakesdk.streaming.kafka.status import SinkStatus
from lakesdk.widgets._common import LiveMixin, TableWidgetBase, esc, go, html_table, ipywidgets, sync_figure
from lakesdk.widgets._figure import FigureWidget

if TYPE_CHECKING:
    import pandas as pd

    from lakesdk.commit.context import TableContext, TableHandle

__all__ = ["KafkaMonitorWidget"]

LAG_COLOUR = "#c62828"
OFFSET_COLOUR = "#1565c0"
ROUND_COLUMNS = ["instant", "completed", "offsets", "offset_sum", "records"]
_ONE_ROUND_SPAN = timedelta(seconds=30)


def _as_dict(item: Any) -> dict[str, Any]:
    """A round-history entry (a dict or an object with attributes) as a dict."""
    if isinstance(item, dict):
        d = dict(item)
    elif hasattr(item, "__dataclass_fields__"):
        d = {k: getattr(item, k) for k in item.__dataclass_fields__}
    elif hasattr(item, "_asdict"):
        d = dict(item._asdict())
    elif hasattr(item, "__dict__"):
        d = {k: v for k, v in vars(item).items() if not k.startswith("_")}
    else:
        d = {"value": item}
    return {k: _offsets_text(v) if k == "offsets" and isinstance(v, dict) else v for k, v in d.items()}


def _offsets_text(offsets: dict[Any, Any]) -> str:
    return ", ".join(f"p{k}={v}" for k, v in sorted(offsets.items()))


class KafkaMonitorWidget(LiveMixin, TableWidgetBase):
    """Monitor of one Kafka sink (see the module docstring)."""

    title = "Kafka sink"

    def __init__(self, source: Any, *, table: Any = None, live: bool = False, interval_s: float = 2.0) -> None:
        if isinstance(source, SinkStatus):
            snapshot = source
            self._read: Callable[[], Any] = lambda: snapshot
        elif hasattr(source, "status") and callable(source.status):
            self._read = source.status
        elif callable(source):
            self._read = source
        else:
            raise TypeError(f"KafkaMonitorWidget needs a KafkaSink, a SinkStatus or a callable returning one, "
                            f"not {type(source).__name__}")
        self.source = source
        self._table = table
        self._table_error: str | None = None
        self.sink_status: Any = None
        self.rounds: Any = None
        self.observed: list[dict[str, Any]] = []
        self._lock = threading.RLock()
        self._round_cache: dict[str, dict[str, Any] | None] = {}
        super().__init__(table)
        self.figure = FigureWidget(layout=go.Layout(
            barmode="group", height=300, margin=dict(l=60, r=20, t=50, b=40),
            xaxis=dict(type="category", title="partition"), yaxis=dict(title="messages", rangemode="tozero"),
            legend=dict(orientation="h", y=1.02, yanchor="bottom", x=1, xanchor="right"), hovermode="closest"))
        self.figure.add_bar(name="lag", x=[], y=[], hovertext=[], marker=dict(color=LAG_COLOUR),
                            hovertemplate="%{hovertext}<extra></extra>")
        self.figure.add_bar(name="committed offset", x=[], y=[], hovertext=[], marker=dict(color=OFFSET_COLOUR),
                            visible="legendonly", hovertemplate="%{hovertext}<extra></extra>")
        self.rounds_figure = FigureWidget(layout=go.Layout(
            height=260, margin=dict(l=60, r=20, t=30, b=40), xaxis=dict(type="date", title="committed (UTC)"),
            yaxis=dict(title="committed offsets (sum)", rangemode="tozero"), showlegend=False, hovermode="closest"))
        self.rounds_figure.add_scatter(name="rounds", mode="lines+markers", x=[], y=[], hovertext=[],
                                       line=dict(color=OFFSET_COLOUR, shape="hv"),
                                       hovertemplate="%{hovertext}<extra></extra>")
        self.info = ipywidgets.HTML("")
        self.partitions_html = ipywidgets.HTML("")
        self.rounds_html = ipywidgets.HTML("")
        left = ipywidgets.VBox([self.figure, self.rounds_figure], layout=ipywidgets.Layout(width="60%"))
        right = ipywidgets.VBox([self.info, self.partitions_html, self.rounds_html],
                                layout=ipywidgets.Layout(width="40%"))
        self._set_body(ipywidgets.HBox([left, right]))
        self.add_class("lakesdk-kafka-monitor")
        self._init_live(interval_s)
        self.refresh()
        if live:
            self.start_live()

    # -- naming -----------------------------------------------------------------------------------
    @property
    def topic(self) -> str:
        st = self.sink_status
        if st is not None:
            return str(st.topic)
        cfg = getattr(self.source, "config", None)
        return str(getattr(cfg, "topic", "") or getattr(self.source, "topic", "") or "?")

    def _title_html(self) -> str:
        return f"<b>{esc(self.title)}</b> <code>{esc(self.topic)}</code>"

    def __repr__(self) -> str:
        return f"<KafkaMonitorWidget topic={self.topic!r}>"

    def static_figures(self) -> list[FigureWidget]:
        """The static picture draws the lag bars and, below them, the committed rounds (a sink
        that has caught up has no lag to draw: its rounds say what it did)."""
        return [self.figure, self.rounds_figure]

    # -- reading -----------------------------------------------------------------------------------
    def sink_table(self) -> TableHandle | TableContext | None:
        """The sink's table: the handle given, else the table of the sink's config opened for
        reading (its :class:`~lakesdk.commit.context.TableContext`; None if unknown)."""
        if self._table is None:
            cfg = getattr(self.source, "config", None)
            url = getattr(cfg, "table_url", None)
            if url:
                from lakesdk.commit.context import Resources, TableContext
                from lakesdk.config.options import TableOptions
                from lakesdk.read.properties import load_config
                from lakesdk.storage import Storage
                try:
                    storage = Storage(str(url), dict(getattr(cfg, "storage_options", ()) or ()))
                    self._table = TableContext(storage, load_config(storage), TableOptions(), Resources())
                except Exception as exc:  # noqa: BLE001 - the monitor still shows the status
                    self._table_error = f"{type(exc).__name__}: {exc}"
        return self._table

    def read_rounds(self) -> pd.DataFrame:
        """The rounds the table committed for this topic (delta commits with ``kafka.commit.offsets``)."""
        import pandas as pd

        from lakesdk.commit.context import context_of
        from lakesdk.streaming.kafka.events import KAFKA_OFFSET_KEY, KAFKA_TOPIC_KEY, parse_offsets
        t = self.sink_table()
        rows: list[dict[str, Any]] = []
        if t is not None:
            store = context_of(t).store
            topic = self.topic
            for inst in store.load().commits.by_completion():
                if inst.action not in ("deltacommit", "commit"):
                    continue
                if inst.requested not in self._round_cache:    # completed commits do not change
                    md = store.commit_metadata(inst)
                    extra = md.extra_metadata or {}
                    raw = extra.get(KAFKA_OFFSET_KEY)
                    row = None
                    if raw and extra.get(KAFKA_TOPIC_KEY) in (None, topic):
                        offs = parse_offsets(raw)
                        tot = md.totals()
                        row = {"instant": inst.requested, "completed": inst.completed, "offsets": offs,
                               "offset_sum": sum(offs.values()),
                               "records": tot["inserted"] + tot["updated"] + tot["deleted"]}
                    self._round_cache[inst.requested] = row
                row = self._round_cache[inst.requested]
                if row is not None:
                    rows.append(row)
        return pd.DataFrame(rows, columns=ROUND_COLUMNS)

    def refresh(self) -> "KafkaMonitorWidget":
        """Take a new status snapshot (and re-read the committed rounds); redraw."""
        with self._lock:
            st = self._read()
            self.sink_status = st
            self._observe(st)
            try:
                self.rounds = self.read_rounds()
            except Exception as exc:  # noqa: BLE001 - a table being rewritten must not break the monitor
                self._table_error = f"{type(exc).__name__}: {exc}"
                if self.rounds is None:
                    self.rounds = self._empty_rounds()
            self._draw()
            self._title.value = self._title_html()
            self.info.value = self._info_html()
            self.partitions_html.value = self._partitions_html()
            self.rounds_html.value = self._rounds_html()
            self.refreshes += 1
            live = " · live" if self.live else ""
            self.status.value = (f"<span style='color:#555'>{'running' if st.running else 'stopped'}, "
                                 f"lag {st.lag if st.lag is not None else '?'}"
                                 f" · read {time.strftime('%H:%M:%S')}{live}</span>")
        return self

    @staticmethod
    def _empty_rounds() -> Any:
        import pandas as pd
        return pd.DataFrame([], columns=ROUND_COLUMNS)

    def _observe(self, st: Any) -> None:
        """Remember every (round, instant, state) seen, and the status's own round history."""
        entry = {"round": st.round, "instant": st.instant, "state": st.coordinator_state,
                 "last_committed_instant": st.last_committed_instant, "committed_rounds": st.committed_rounds,
                 "aborted_rounds": st.aborted_rounds, "seen_at": time.strftime("%H:%M:%S")}
        last = self.observed[-1] if self.observed else None
        if last is None or any(last[k] != entry[k] for k in ("round", "instant", "state", "last_committed_instant")):
            self.observed.append(entry)
            del self.observed[:-200]

    def status_rounds(self) -> list[dict[str, Any]]:
        """The round history the status reports (``SinkStatus.history`` when the sink keeps one:
        instant, offsets, records per committed round), as dicts; [] otherwise."""
        st = self.sink_status
        for name in ("history", "rounds", "round_history"):
            items = getattr(st, name, None)
            if items:
                return [_as_dict(i) for i in items]
        return []

    # -- drawing ---------------------------------------------------------------------------------------
    def _draw(self) -> None:
        from lakesdk.format.instant import parse_instant_time
        from lakesdk.widgets._common import fmt_time
        parts = list(self.sink_status.partitions)
        known = [p for p in parts if p.lag is not None]
        with self.figure.batch_update():
            lag, off = self.figure.data
            lag.x = [f"p{p.partition}" for p in known]
            lag.y = [p.lag for p in known]
            lag.hovertext = [self._part_hover(p) for p in known]
            off.x = [f"p{p.partition}" for p in parts]
            off.y = [p.committed for p in parts]
            off.hovertext = [self._part_hover(p) for p in parts]
            total = self.sink_status.lag
            self.figure.layout.title = dict(text=f"lag per partition (total {'?' if total is None else total})",
                                            x=0, y=0.97, font=dict(size=14))
        sync_figure(self.figure)
        r = self.rounds
        with self.rounds_figure.batch_update():
            sc = self.rounds_figure.data[0]
            sc.x = [fmt_time(parse_instant_time(c)) for c in r.completed]
            sc.y = [int(v) for v in r.offset_sum]
            # one round: a minute around it, not the milliseconds plotly's autorange gives one date
            ax = self.rounds_figure.layout.xaxis
            one = parse_instant_time(r.completed.iloc[0]) if len(r) == 1 else None
            ax.range = None if one is None else [fmt_time(one - _ONE_ROUND_SPAN), fmt_time(one + _ONE_ROUND_SPAN)]
            ax.autorange = one is None
            sc.hovertext = [f"<b>{esc(i)}</b> committed {esc(c)}<br>records {n}<br>offsets "
                            f"{esc(', '.join(f'p{k}={v}' for k, v in sorted(o.items())))}"
                            for i, c, o, n in zip(r.instant, r.completed, r.offsets, r.records)]
        sync_figure(self.rounds_figure)

    @staticmethod
    def _part_hover(p: Any) -> str:
        def n(x: Any) -> str:
            return "-" if x is None else str(x)
        return (f"<b>partition {p.partition}</b><br>committed {p.committed} · position {n(p.position)} · "
                f"end {n(p.end)}<br>lag {n(p.lag)} · written {p.records_written} · errors {p.error_records}"
                f"<br>worker {esc(p.worker)}")

    def _info_html(self) -> str:
        st = self.sink_status
        rows = [("state", "running" if st.running else "stopped"), ("workers", st.workers),
                ("coordinator", f"{st.coordinator_state or '-'} on {st.coordinator_worker or '-'}"),
                ("round", st.round), ("round's instant", st.instant or "-"),
                ("last committed instant", st.last_committed_instant or "-"),
                ("rounds committed / aborted", f"{st.committed_rounds} / {st.aborted_rounds}"),
                ("lag", "?" if st.lag is None else st.lag)]
        body = "".join(f"<tr><th style='text-align:left;padding-right:8px'>{esc(k)}</th><td>{esc(v)}</td></tr>"
                       for k, v in rows)
        errs = [e for e in (st.last_error, *st.errors) if e]
        if self._table_error:
            errs.append(f"table: {self._table_error}")
        err = "".join(f"<div style='color:#b71c1c'>{esc(e)}</div>" for e in errs)
        return (f"<div class='lakesdk-panel' data-round='{st.round}'><b>coordinator</b>"
                f"<table style='font-size:12px'>{body}</table>{err}</div>")

    def _partitions_html(self) -> str:
        def n(x: Any) -> Any:
            return "-" if x is None else x
        rows = [(p.partition, p.committed, n(p.position), n(p.end), n(p.lag), p.records_written, p.error_records,
                 p.worker) for p in self.sink_status.partitions]
        if not rows:
            return "<div><i>No partitions assigned (no worker running).</i></div>"
        return html_table(["partition", "committed", "position", "end", "lag", "written", "errors", "worker"], rows,
                          cls="lakesdk-partitions")

    def _rounds_html(self) -> str:
        r = self.rounds
        out = ""
        if len(r):
            rows = [(i, c, n, ", ".join(f"p{k}={v}" for k, v in sorted(o.items())))
                    for i, c, n, o in zip(r.instant, r.completed, r.records, r.offsets)][::-1]
            out += ("<div style='margin-top:6px'><b>rounds committed in the table</b> (newest first)</div>" +
                    html_table(["instant", "completed", "records", "offsets"], rows, cls="lakesdk-rounds",
                               max_rows=50, wrap=(3,)))
        hist = self.status_rounds()
        if hist:
            cols = list(dict.fromkeys(k for h in hist for k in h))
            out += ("<div style='margin-top:6px'><b>rounds reported by the sink</b></div>" +
                    html_table(cols, [[h.get(c) for c in cols] for h in hist][::-1], max_rows=50))
        if self.observed:
            out += ("<div style='margin-top:6px'><b>rounds seen by this monitor</b></div>" +
                    html_table(["seen", "round", "state", "instant", "last committed"],
                               [(o["seen_at"], o["round"], o["state"] or "-", o["instant"] or "-",
                                 o["last_committed_instant"] or "-") for o in self.observed][::-1], max_rows=20))
        return out
