"""Shared pieces of the widgets: optional imports, formatting, the widget base class."""

from __future__ import annotations

import threading
from datetime import UTC
from typing import TYPE_CHECKING, Any, Iterable, Self, Sequence

from lakesdk._display import esc as esc  # re-exported for the widgets
from lakesdk._display import human_bytes as human_bytes  # re-exported for the widgets
from lakesdk.exceptions import MissingDependencyError

if TYPE_CHECKING:
    from datetime import datetime

    from plotly.graph_objects import FigureWidget


def require_widgets(feature: str) -> tuple[Any, Any]:
    """``(ipywidgets, plotly.graph_objects)``, or a MissingDependencyError naming the extra."""
    # plotly uses numpy and pandas when they are in sys.modules, without waiting for an import
    # another thread has under way (a Kafka sink's worker in its first round, when the monitor is
    # built right after sink.start()): a half-imported pandas fails every figure. Importing them
    # here waits until they are whole.
    import numpy  # noqa: F401
    import pandas  # noqa: F401
    try:
        import ipywidgets
    except ImportError as exc:
        raise MissingDependencyError("ipywidgets", "notebook", feature) from exc
    try:
        import plotly.graph_objects as go
    except ImportError as exc:
        raise MissingDependencyError("plotly", "notebook", feature) from exc
    try:
        import anywidget  # noqa: F401  (plotly's FigureWidget is an anywidget)
    except ImportError as exc:
        raise MissingDependencyError("anywidget", "notebook", feature) from exc
    return ipywidgets, go


ipywidgets: Any
go: Any
ipywidgets, go = require_widgets("lakesdk widgets")

#: Instant state colours (the same as ``Instant._repr_html_``).
STATE_COLOURS = {"requested": "#1565c0", "inflight": "#ef6c00", "completed": "#2e7d32"}
IO_COLOURS = {"CREATE": "#2e7d32", "MERGE": "#1565c0", "APPEND": "#8e24aa"}


def html_table(header: Sequence[str], rows: Iterable[Sequence[Any]], *, cls: str = "", max_rows: int = 200,
               wrap: Sequence[int] = (), clip: Sequence[int] = ()) -> str:
    """A small HTML table (values escaped); at most ``max_rows`` rows, with a note when cut.
    Cells stay on one line except in the columns listed in ``wrap`` (prose); the columns in
    ``clip`` (long file names) end with an ellipsis where the column is too narrow, the whole
    value in their tooltip (and their text)."""
    rows = list(rows)

    def td(k: int, v: Any) -> str:
        if k in clip:
            return (f"<td title='{esc(v)}' style='white-space:nowrap;overflow:hidden;text-overflow:ellipsis;"
                    f"max-width:16em;padding-right:8px'>{esc(v)}</td>")
        style = "overflow-wrap:anywhere" if k in wrap else "white-space:nowrap"
        return f"<td style='{style};padding-right:8px'>{esc(v)}</td>"

    body = "".join("<tr>" + "".join(td(k, v) for k, v in enumerate(r)) + "</tr>" for r in rows[:max_rows])
    more = f"<div><i>{len(rows) - max_rows} more not shown</i></div>" if len(rows) > max_rows else ""
    head = "".join(f"<th style='text-align:left;padding-right:8px;white-space:nowrap'>{esc(h)}</th>" for h in header)
    return (f"<table class='lakesdk-table {cls}' style='font-size:12px;border-collapse:collapse;line-height:1.3'>"
            f"<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>{more}")


def sync_figure(fig: Any) -> None:
    """Store a FigureWidget's whole state in its widget model.

    Updates reach views as restyle/relayout messages, and plotly stores the full state in
    the model only when the figure itself is displayed.  A figure nested in a box, or a
    view created after the cell ran (Voila renders once the notebook has executed), would
    start from the state the figure was built with; this makes it start from the current one.
    """
    from copy import deepcopy
    pin_axis_types(fig)
    fig._widget_layout = deepcopy(fig._layout_obj._props)
    fig._widget_data = deepcopy(fig._data)


def pin_axis_types(fig: Any) -> None:
    """Re-assert the figure's ``date`` and ``category`` axis types in the browser.

    plotly.js clears an axis's type whenever a trace's data on it is restyled and guesses
    it again from the first trace's values: a Gantt chart's durations (numbers) turn its
    date axis linear, numeric-looking keys turn a category axis linear.  Setting the type to
    ``"-"`` and back sends it again after the restyle (the Python side only sends changes).
    """
    for name in ("xaxis", "yaxis"):
        ax = fig.layout[name]
        kind = ax.type
        if kind in ("date", "category"):
            ax.type = "-"
            ax.type = kind


class TableWidgetBase(ipywidgets.VBox):
    """A box with a title bar (title, Refresh button, status line) above the widget's body.

    Subclasses set ``self.figure`` (a plotly FigureWidget) and implement ``refresh()``.
    """

    title = "lakesdk"

    def __init__(self, table: Any) -> None:
        self.table = table
        self.figure: Any = None
        self._title = ipywidgets.HTML(self._title_html())
        self._refresh_button = ipywidgets.Button(description="Refresh", icon="refresh",
                                                 layout=ipywidgets.Layout(width="110px"))
        self._refresh_button.on_click(lambda _b: self.refresh())
        self.status = ipywidgets.HTML("")
        self._header = ipywidgets.HBox([self._title, self._refresh_button, self.status],
                                       layout=ipywidgets.Layout(align_items="center", gap="12px"))
        super().__init__([self._header])
        self.add_class("lakesdk-widget")

    def _title_html(self) -> str:
        return f"<b>{esc(self.title)}</b> <code>{esc(self.table.name)}</code>"

    def _set_body(self, *children: Any) -> None:
        self.children = (self._header, *children)

    def refresh(self) -> Self:  # pragma: no cover - abstract
        raise NotImplementedError

    def to_html(self, path: str, *, include_plotlyjs: Any = True, **kwargs: Any) -> str:
        """Write the figure as a static HTML page (plotly ``write_html``); returns ``path``.

        ``include_plotlyjs=True`` embeds plotly.js (works offline); pass ``"cdn"`` for a
        small file that loads it from the web.
        """
        import os
        parent = os.path.dirname(os.path.abspath(path))
        os.makedirs(parent, exist_ok=True)
        import plotly.graph_objects as go_
        go_.Figure(self.figure).write_html(path, include_plotlyjs=include_plotlyjs, **kwargs)
        return path

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.table.name!r}>"

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        """The live widget, and beside it a static picture of its figure (``text/html``, plotly.js
        from its CDN or carried) for where widgets do not run: nbconvert, the documentation site, a notebook
        saved without widget state. Jupyter shows the live widget when it can."""
        bundle = super()._repr_mimebundle_(**kwargs)
        if isinstance(bundle, dict) and self.figure is not None:
            bundle["text/html"] = self.static_html()
        return bundle

    def static_html(self) -> str:
        """The title and the figures (:meth:`static_figures`) as an HTML fragment that draws them
        (no controls); plotly.js from its CDN, or carried (:func:`lakesdk.widgets.offline_figures`)
        by the first figure, which the others use."""
        import plotly.graph_objects as go_

        from lakesdk.widgets._static import plotlyjs_source
        figures = "".join(go_.Figure(f).to_html(full_html=False, include_plotlyjs=plotlyjs_source() if k == 0 else False,
                                                config={"displayModeBar": False})
                          for k, f in enumerate(self.static_figures()))
        return f'<div class="lakesdk-widget-static">{self._title_html()}{figures}</div>'

    def static_figures(self) -> list[FigureWidget]:
        """The figures the static picture draws, top to bottom: ``[self.figure]``."""
        return [self.figure]


class BarClickMixin:
    """Selection by click for widgets whose figure traces are one per category (state,
    outcome): ``self.bars[trace.name]`` lists the items of that trace in point order and
    ``self.select(item)`` shows one."""

    bars: dict[str, list[Any]]

    def _on_click(self, trace: Any, points: Any, _state: Any = None) -> None:
        """plotly's click callback: ``points.point_inds`` index the clicked trace's bars."""
        if not points.point_inds:
            return
        items = self.bars.get(trace.name, [])
        i = points.point_inds[0]
        if 0 <= i < len(items):
            self.select(items[i])  # type: ignore[attr-defined]


class LiveMixin:
    """Live mode for a widget with ``refresh()``, a ``status`` line and a header: a "Live"
    toggle, and a background thread that refreshes every ``interval_s`` seconds.

    Call :meth:`_init_live` in ``__init__`` (after the base class); ``close()`` stops it.
    """

    interval_s: float
    refreshes: int = 0

    def _init_live(self, interval_s: float) -> None:
        if interval_s <= 0:
            raise ValueError(f"interval_s must be > 0, found {interval_s}")
        self.interval_s = float(interval_s)
        self._live_stop = threading.Event()
        self._live_thread: Any = None
        self.live_toggle = ipywidgets.ToggleButton(value=False, description="Live", icon="play",
                                                   tooltip="refresh every few seconds",
                                                   layout=ipywidgets.Layout(width="90px"))
        self.live_toggle.observe(self._on_live_toggle, names="value")
        header = self._header  # type: ignore[attr-defined]
        header.children = (*header.children[:2], self.live_toggle, *header.children[2:])

    @property
    def live(self) -> bool:
        return self._live_thread is not None and self._live_thread.is_alive()

    def start_live(self, interval_s: float | None = None) -> Self:
        """Refresh every ``interval_s`` seconds from a background thread until :meth:`stop_live`."""
        if interval_s is not None:
            if interval_s <= 0:
                raise ValueError(f"interval_s must be > 0, found {interval_s}")
            self.interval_s = float(interval_s)
        if self.live:
            return self
        self._live_stop.clear()
        self._live_thread = threading.Thread(target=self._live_loop, name=f"lakesdk-{type(self).__name__}-live",
                                             daemon=True)
        self._live_thread.start()
        if not self.live_toggle.value:
            self.live_toggle.value = True
        return self

    def stop_live(self) -> Self:
        """Stop refreshing (waits for the background thread)."""
        if getattr(self, "_live_stop", None) is None:
            return self           # closed before it was fully built
        self._live_stop.set()
        th = self._live_thread
        if th is not None and th is not threading.current_thread():
            th.join(timeout=max(5.0, 2 * self.interval_s))
        self._live_thread = None
        if self.live_toggle.value:
            self.live_toggle.value = False
        return self

    def _live_loop(self) -> None:
        while not self._live_stop.wait(self.interval_s):
            try:
                self.refresh()  # type: ignore[attr-defined]
            except Exception as exc:  # noqa: BLE001 - keep refreshing: a source may be briefly unavailable
                self.status.value = f"<span style='color:#b71c1c'>refresh failed: {esc(exc)}</span>"  # type: ignore[attr-defined]

    def _on_live_toggle(self, change: dict[str, Any]) -> None:
        if change["new"] and not self.live:
            self.start_live()
        elif not change["new"] and self.live:
            self.stop_live()

    def close(self) -> None:
        self.stop_live()
        super().close()  # type: ignore[misc]


def utc_from_ms(ms: float) -> "datetime":
    """Epoch milliseconds as a naive UTC datetime (the widgets' time axis, like instant times)."""
    from datetime import datetime
    return datetime.fromtimestamp(ms / 1000.0, UTC).replace(tzinfo=None)


def fmt_time(t: "datetime") -> str:
    """plotly's date string (millisecond precision): ``2026-11-21 10:30:00.123``."""
    return t.strftime("%Y-%m-%d %H:%M:%S.") + f"{t.microsecond // 1000:03d}"
