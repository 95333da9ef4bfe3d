"""Notebook widgets: a leaf layer, never imported by the core.

``table.widgets`` is a :class:`TableWidgets` namespace; each method builds one widget
(an ipywidgets box holding a plotly ``FigureWidget``) that reads the table's state when it
is built and on ``refresh()``:

* ``table.widgets.timeline()``: a slot per instant in requested-time order with its stages,
  racing instants on separate lanes, the completion-time order below; click a bar for its
  files and to time-travel to it, an *as of* slider for the rows then; ``live=True``
  refreshes while writers run.
* ``table.widgets.markers()``: the markers of pending or failed writes by partition and
  IO type, which of their data files exist, and a read-only rollback preview.
* ``table.widgets.file_layout()``: file groups and slices per partition, base versus log
  bytes, small files highlighted.
* ``table.widgets.transactions()``: writers as lanes over time (the transaction journal,
  plus the timeline's writes it does not know), coloured by outcome; overlaps of writes
  on shared file groups, which commit won and why the others failed, heartbeats of
  inflight writes, schema versions of schema conflicts; ``live=True`` as the timeline.
* ``table.widgets.provenance(keys=None, limit=50)``: partial-update tables only; per key,
  the ordering value each column group (stream) was last written with.

:class:`KafkaMonitorWidget` (``sink.widget()``) shows a Kafka sink's coordinator, its
per-partition lag and the rounds it committed; ``display(t)`` shows a :class:`TableView`
(the summary and the timeline, file layout and transactions widgets as tabs, each read
when its tab is opened).

Nothing here imports ipywidgets or plotly until a widget is built (``pip install
'lakesdk[notebook]'``), and building a widget does I/O; reprs do not.  In a kernel, a line
says which widget is being built until it is (the first one imports plotly: seconds).

A widget's figures are plotly ``FigureWidget`` objects whose 5 MB browser bundle a kernel
sends once, in a model of its own that every figure refers to (``lakesdk.widgets._figure``): a
page loads it once, a notebook saves it once, and it needs no network.

Beside the live widget each one stores a static figure for where widgets do not run
(nbconvert, the documentation site): it loads plotly.js from its CDN, or, after
:func:`offline_figures`, carries it (the first figure of the process; the others use that
copy), so an exported notebook draws its figures without a network.
"""

from __future__ import annotations

import contextlib
import importlib
from typing import TYPE_CHECKING, Any, Iterator

from lakesdk.widgets._static import offline_figures  # no plotly: cheap

if TYPE_CHECKING:
    from lakesdk.commit.context import TableHandle
    from lakesdk.widgets.changes import ChangesWidget
    from lakesdk.widgets.file_layout import FileLayoutWidget
    from lakesdk.widgets.kafka_monitor import KafkaMonitorWidget
    from lakesdk.widgets.markers import MarkersWidget
    from lakesdk.widgets.provenance import ProvenanceWidget
    from lakesdk.widgets.table_view import TableView
    from lakesdk.widgets.timeline import TimelineWidget
    from lakesdk.widgets.transactions import TransactionsWidget

__all__ = ["TableWidgets", "TimelineWidget", "MarkersWidget", "FileLayoutWidget", "TransactionsWidget",
           "ProvenanceWidget", "ChangesWidget", "KafkaMonitorWidget", "TableView", "display_table", "offline_figures"]


@contextlib.contextmanager
def building(what: str) -> Iterator[None]:
    """In a kernel, a line saying ``what`` is being built while the block runs (cleared after)."""
    handle = None
    if _in_kernel():
        try:
            from IPython.display import HTML, display
            handle = display(HTML(f"<div class='lakesdk-building' style='color:#555'>⏳ building the {what}…"
                                  "</div>"), display_id=True)
        except Exception:  # noqa: BLE001 - a missing line is no reason to fail the widget
            handle = None
    try:
        yield
    finally:
        if handle is not None:
            from IPython.display import HTML
            handle.update(HTML(""))

_LAZY = {
    "TimelineWidget": "lakesdk.widgets.timeline",
    "MarkersWidget": "lakesdk.widgets.markers",
    "FileLayoutWidget": "lakesdk.widgets.file_layout",
    "TransactionsWidget": "lakesdk.widgets.transactions",
    "ProvenanceWidget": "lakesdk.widgets.provenance",
    "ChangesWidget": "lakesdk.widgets.changes",
    "KafkaMonitorWidget": "lakesdk.widgets.kafka_monitor",
    "TableView": "lakesdk.widgets.table_view",
}


def __getattr__(name: str) -> Any:
    mod = _LAZY.get(name)
    if mod is None:
        raise AttributeError(f"module 'lakesdk.widgets' has no attribute {name!r}")
    value = getattr(importlib.import_module(mod), name)
    globals()[name] = value
    return value


class TableWidgets:
    """``table.widgets``: interactive views of one table (ipywidgets + plotly).

    Each call reads the table now and returns a new widget; display it as the last
    expression of a cell (or with ``display(w)``).  ``w.figure`` is its plotly
    ``FigureWidget``, ``w.refresh()`` re-reads the table and ``w.to_html(path)`` writes a
    static copy of the figure.
    """

    def __init__(self, table: TableHandle) -> None:
        self._t = table

    def timeline(self, *, live: bool = False, interval_s: float = 2.0) -> "TimelineWidget":
        """A slot per instant in requested-time order with its stages, racing instants on
        separate lanes, the completion-time order below, an *as of* slider."""
        with building("timeline"):
            from lakesdk.widgets.timeline import TimelineWidget
            return TimelineWidget(self._t, live=live, interval_s=interval_s)

    def markers(self, instant: str | None = None) -> "MarkersWidget":
        """Markers of pending and failed writes (``instant``: the one to show first)."""
        with building("markers view"):
            from lakesdk.widgets.markers import MarkersWidget
            return MarkersWidget(self._t, instant=instant)

    def file_layout(self, *, as_of: Any = None, small_file_bytes: int | None = None,
                    measure: str = "bytes") -> "FileLayoutWidget":
        """File groups and slices per partition, base vs log files in ``"bytes"`` or in
        ``"records"`` written (a toggle switches), small files highlighted."""
        with building("file layout"):
            from lakesdk.widgets.file_layout import FileLayoutWidget
            return FileLayoutWidget(self._t, as_of=as_of, small_file_bytes=small_file_bytes, measure=measure)

    def transactions(self, *, live: bool = False, interval_s: float = 2.0, limit: int = 500) -> "TransactionsWidget":
        """Writers as lanes over time, coloured by outcome: overlaps on shared file groups,
        which commit won and why the others failed, heartbeats of inflight writes (the
        newest ``limit`` writes)."""
        with building("transactions view"):
            from lakesdk.widgets.transactions import TransactionsWidget
            return TransactionsWidget(self._t, live=live, interval_s=interval_s, limit=limit)

    def provenance(self, keys: Any = None, *, limit: int = 50) -> "ProvenanceWidget":
        """Partial-update tables: per key, the ordering value each column group (stream) was
        last written with (``keys``: the record keys to show, else the first ``limit``)."""
        with building("provenance view"):
            from lakesdk.widgets.provenance import ProvenanceWidget
            return ProvenanceWidget(self._t, keys=keys, limit=limit)

    def changes(self, start: Any = None, end: Any = None, *, rows: int = 20) -> "ChangesWidget":
        """What each commit in ``(start, end]`` did (:meth:`Table.changes`): inserts, updates with
        old and new values side by side, deletes; bars per commit, a range slider (``rows``:
        at most that many records per section)."""
        with building("change view"):
            from lakesdk.widgets.changes import ChangesWidget
            return ChangesWidget(self._t, start=start, end=end, rows=rows)

    def __repr__(self) -> str:
        return (f"<TableWidgets {self._t.name!r}: timeline(), markers(), file_layout(), transactions(), "
                f"provenance(), changes()>")


def _in_kernel() -> bool:
    from lakesdk._progress import _in_notebook
    return _in_notebook()


def display_table(table: TableHandle) -> None:
    """``display(t)``: in a Jupyter kernel a :class:`TableView` (the summary, and tabs with
    the timeline, file layout and transactions widgets built when opened); the HTML and
    text reprs when ipywidgets or plotly are missing, or outside a kernel."""
    from IPython.display import display

    if _in_kernel():
        try:
            from lakesdk.widgets.table_view import TableView
        except ImportError:    # MissingDependencyError: ipywidgets or plotly is not installed
            pass
        else:
            display(TableView(table))
            return
    display({"text/plain": repr(table), "text/html": table._repr_html_()}, raw=True)
