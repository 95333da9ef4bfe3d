"""``display(t)``: a tabbed view whose widgets are read when their tab is opened; plain
reprs outside a kernel or without the notebook extra; reprs never touch storage."""

from __future__ import annotations

import sys

import pandas as pd
import pytest

pytest.importorskip("ipywidgets")
pytest.importorskip("plotly")
pytest.importorskip("anywidget")

import lakesdk as lk  # noqa: E402
import lakesdk.widgets as lw  # noqa: E402
from lakesdk.widgets.table_view import TableView  # noqa: E402


@pytest.fixture
def trips(tmp_path):
    lake = lk.Lake(str(tmp_path / "lake"), options=lk.TableOptions(engine="local"))
    t = lake.create_table("trips", key="uuid", partition_by="city", ordering="ts")
    t.upsert(pd.DataFrame({"uuid": ["a", "b", "c"], "city": ["ams", "bcn", "ams"], "ts": [1, 1, 1]}))
    t.upsert(pd.DataFrame({"uuid": ["a"], "city": ["ams"], "ts": [2]}))
    return t


@pytest.fixture
def shown(monkeypatch):
    out = []
    import IPython.display
    monkeypatch.setattr(IPython.display, "display", lambda *objs, **kw: out.append((objs, kw)))
    return out


def test_tabs_are_built_when_opened(trips):
    t = trips
    v = TableView(t)
    assert v.titles == ("Table", "Timeline", "File layout", "Transactions") and v.built == {}
    assert v.summary.value == t._repr_html_() and v.selected_index == 0
    v.selected_index = 1                                   # what a click on the tab does
    tl = v.built["Timeline"]
    assert type(tl).__name__ == "TimelineWidget" and v.children[1].children == (tl,)
    assert [i.requested for i in tl.bars["completed"]] == [i.requested for i in t.timeline]
    tx = v.show("Transactions")
    assert v.selected_index == 3 and list(v.built) == ["Timeline", "Transactions"]
    assert [w.instant for w in tx.bars["committed"]] == [i.requested for i in t.timeline]
    assert v.show("Transactions") is tx                    # built once
    fl = v.show("File layout")
    assert len(fl.groups) == len(t.inspect.file_groups()) == 2
    assert "built: Timeline, Transactions, File layout" in repr(v)
    with pytest.raises(KeyError, match="no tab"):
        v.show("Nope")


def test_display_in_a_kernel_outside_and_without_widgets(trips, shown, monkeypatch):
    t = trips
    monkeypatch.setattr(lw, "_in_kernel", lambda: True)
    t._ipython_display_()
    (objs, kw), = shown
    assert isinstance(objs[0], TableView) and objs[0].built == {}
    shown.clear()
    monkeypatch.setitem(sys.modules, "lakesdk.widgets.table_view", None)   # as if ipywidgets were missing
    t._ipython_display_()
    (objs, kw), = shown
    assert kw == {"raw": True} and objs[0] == {"text/plain": repr(t), "text/html": t._repr_html_()}
    shown.clear()
    monkeypatch.delitem(sys.modules, "lakesdk.widgets.table_view")
    monkeypatch.setattr(lw, "_in_kernel", lambda: False)                  # a terminal: text, no widget
    t._ipython_display_()
    (objs, kw), = shown
    assert objs[0]["text/plain"] == repr(t)


def test_reprs_do_no_io(trips, monkeypatch):
    t = trips
    v = TableView(t)
    for name in ("read", "list", "info", "exists", "find", "size"):
        monkeypatch.setattr(t.storage, name, lambda *a, **k: (_ for _ in ()).throw(AssertionError("I/O in a repr")))
    assert "trips" in repr(t) and "<b>lakesdk Table</b>" in t._repr_html_()
    assert "transactions(), provenance()" in repr(t.widgets)
    assert "built: none" in repr(v)


def test_a_line_says_which_widget_is_being_built_until_it_is(trips, monkeypatch):
    import IPython.display

    class Handle:
        def __init__(self, obj):
            self.shown = [obj.data]

        def update(self, obj):
            self.shown.append(obj.data)
    handles = []
    monkeypatch.setattr(IPython.display, "display",
                        lambda obj, **kw: handles.append(Handle(obj)) or handles[-1])
    monkeypatch.setattr(lw, "_in_kernel", lambda: True)
    w = trips.widgets.file_layout()
    (h,) = handles
    assert "building the file layout" in h.shown[0] and h.shown[-1] == "" and w.groups is not None
    monkeypatch.setattr(lw, "_in_kernel", lambda: False)          # a script: nothing said
    trips.widgets.timeline()
    assert len(handles) == 1


def test_offline_figures_carry_plotly_js_once(trips):
    t = trips
    cdn = 'src="https://cdn.plot.ly/'
    assert cdn in t.widgets.file_layout().static_html()
    lw.offline_figures()
    try:
        first, second = t.widgets.file_layout().static_html(), t.widgets.timeline().static_html()
        assert cdn not in first and len(first) > 3_000_000         # plotly.js itself
        assert cdn not in second and len(second) < 200_000 and "Plotly.newPlot" in second
    finally:
        lw.offline_figures(False)
    assert cdn in t.widgets.file_layout().static_html()
