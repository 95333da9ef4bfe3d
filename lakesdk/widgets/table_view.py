"""TableView: what ``display(t)`` shows in a notebook.

Tabs: ``Table`` (the HTML summary, ``Table._repr_html_``: the commits, size, schema and first
rows, read with a small limit), then ``Timeline``,
``File layout`` and ``Transactions``, each built (reading the table) the first time its
tab is opened, so displaying a table stays cheap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from lakesdk.widgets._common import ipywidgets

if TYPE_CHECKING:
    from lakesdk.widgets.file_layout import FileLayoutWidget
    from lakesdk.widgets.timeline import TimelineWidget
    from lakesdk.widgets.transactions import TransactionsWidget

__all__ = ["TableView", "TABS"]

#: tab title -> the ``table.widgets`` method that builds it
TABS: dict[str, str] = {"Timeline": "timeline", "File layout": "file_layout", "Transactions": "transactions"}


class TableView(ipywidgets.Tab):
    """A table's summary and its widgets as tabs, each widget built on first open."""

    selected_index: int | None   # a trait of ipywidgets.Tab

    def __init__(self, table: Any) -> None:
        self.table = table
        self.built: dict[str, Any] = {}
        self._builders: dict[str, Callable[..., Any]] = {
            title: (lambda m=method: getattr(table.widgets, m)()) for title, method in TABS.items()}
        self.summary = ipywidgets.HTML(table._repr_html_())
        self._slots = {title: ipywidgets.VBox([ipywidgets.HTML(f"<i>Open the tab to read the {title.lower()}.</i>")])
                       for title in TABS}
        super().__init__(children=[self.summary, *self._slots.values()])
        self.titles = ("Table", *TABS)
        self.add_class("lakesdk-table-view")
        self.observe(self._on_select, names="selected_index")

    def _on_select(self, change: dict[str, Any]) -> None:
        i = change["new"]
        if i is not None and 0 < i <= len(TABS):
            self.show(self.titles[i])

    def show(self, title: str) -> TimelineWidget | FileLayoutWidget | TransactionsWidget:
        """Build (once) and return the widget of the tab ``title``; selects the tab."""
        if title not in self._builders:
            raise KeyError(f"no tab {title!r}; tabs: {', '.join(TABS)}")
        if title not in self.built:
            slot = self._slots[title]
            try:
                w = self._builders[title]()
            except Exception as exc:  # noqa: BLE001 - the error goes in the tab, not the notebook's output
                from lakesdk.widgets._common import esc
                slot.children = (ipywidgets.HTML(f"<div style='color:#b71c1c'>{esc(type(exc).__name__)}: "
                                                 f"{esc(exc)}</div>"),)
                raise
            self.built[title] = w
            slot.children = (w,)
        index = self.titles.index(title)
        if self.selected_index != index:
            self.selected_index = index
        return self.built[title]

    def __repr__(self) -> str:
        return f"<TableView {self.table.name!r}: {', '.join(self.titles)}; built: {', '.join(self.built) or 'none'}>"
