"""The change view (``t.widgets.changes()``): bars per commit are the counts of
``t.changes()``; the sections of the range slider's commits show inserted records, updated
ones with old and new values side by side, and deleted ones."""

from __future__ import annotations

import re

import pyarrow as pa
import pytest

pytest.importorskip("ipywidgets")
pytest.importorskip("plotly")
pytest.importorskip("anywidget")


@pytest.fixture(params=["cow", "mor"])
def orders(request, local_lake):
    t = local_lake.create_table(f"orders_{request.param}", key="id", ordering="ts", table_type=request.param,
                                cdc=request.param == "cow")
    results = [t.upsert(pa.table({"id": [1, 2, 3], "ts": [1, 1, 1], "amount": [10.0, 20.0, 30.0],
                                  "status": ["new", "new", "new"]})),
               t.upsert(pa.table({"id": [2, 4], "ts": [2, 2], "amount": [20.0, 40.0], "status": ["paid", "new"]})),
               t.delete([1])]
    return t, results


def test_bars_are_the_counts_of_the_change_query(orders):
    t, results = orders
    w = t.widgets.changes()
    assert w.commits == [r.instant for r in results]
    assert {tr.name: list(tr.y) for tr in w.figure.data} == \
        {"inserted": [3, 1, 0], "updated": [0, 1, 0], "deleted": [0, 0, 1]}
    assert list(w.figure.data[0].x) == w.commits
    assert w.changes.equals(t.changes().to_arrow())
    assert w.shown() == w.commits                     # the whole range at first
    assert "3 commits" in repr(w) and "6 changes in 3 commits" in w.status.value


def test_sections_show_old_and_new_values_side_by_side(orders):
    t, results = orders
    w = t.widgets.changes()
    w.select(results[1].instant)
    assert w.shown() == [results[1].instant]
    html = w.detail.value
    assert f"commit {results[1].instant}" in html and results[0].instant not in html
    assert "1 inserted, 1 updated, 0 deleted" in html
    # the update of id 2: status changed (old struck, new bold), amount the same (one value)
    changed = re.findall(r"<td class='lakesdk-changed'[^>]*><s[^>]*>([^<]*)</s> → <b>([^<]*)</b></td>", html)
    assert ("new", "paid") in changed and ("1", "2") in changed and len(changed) == 2
    w.range.value = (results[2].instant, results[2].instant)
    assert "lakesdk-changes-deleted" in w.detail.value and "lakesdk-changes-inserted" not in w.detail.value


def test_a_range_and_the_static_picture(orders):
    t, results = orders
    w = t.widgets.changes(start=results[0].completed, rows=1)
    assert w.commits == [r.instant for r in results[1:]]
    w.select(results[1].instant)
    assert "1 more not shown" not in w.detail.value          # one record per section here
    static = w.static_html()
    assert static.count("lakesdk-change-commit") == 2 and "lakesdk-widget-static" in static


def test_no_changes(local_lake):
    t = local_lake.create_table("empty", key="id")
    w = t.widgets.changes()
    assert w.commits == [] and "No changes in the range" in w.detail.value
    assert "changes()" in repr(t.widgets)
