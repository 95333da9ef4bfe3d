"""Every widget draws its data in JupyterLab 4, ten renders in a row.

A notebook (``lab_harness.WIDGET_CELLS``) builds a small merge-on-read table (upserts, a
compaction scheduled and executed, a write stopped after its markers), a table two writers
raced on, a partial-update table three streams wrote and a table a Kafka sink's rounds
committed, and displays the timeline, file layout, transactions (of the raced table), markers,
provenance and Kafka monitor widgets and ``display(t)``, whose Timeline tab the test opens.
Each render is checked from the DOM: inside each widget's container plotly drew the points of
every trace each of the widget's figures holds (the test builds the same widgets from the
tables on disk to know them), with a non-zero size on screen, not empty axes. Renders alternate
between a fresh run (kernel restarted, every cell run through JupyterLab's command registry,
the notebook saved with its widget state) and a fresh page load of the executed notebook (the
widget manager restores every model from the kernel at once). A console error from the widgets
(``[anywidget] Failed to initialize model``) or any page error fails the test."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from lab_harness import (
    WIDGETS,
    figures_wider_than_their_box,
    lab_page,
    lab_server,
    open_table_view_tab,
    require_lab,
    wait_drawn,
    widget_figures,
    write_widget_notebook,
)

pytestmark = pytest.mark.browser

RENDERS = 10
#: console errors that are about the widgets (anything else is reported with them, not failed on)
WIDGET_ERRORS = ("anywidget", "widget", "plotly", "model")


def expected_traces(root: Path) -> dict[str, list[dict[str, tuple[int, int]]]]:
    """Per widget, per figure, per trace shown: (points, points of a non-zero size), from widgets
    built here on the tables the notebook wrote."""
    out = {}
    for name in WIDGETS:
        if name == "table_view":
            continue
        figures = []
        for fig in widget_figures(root, name):
            traces = {}
            for tr in fig.data:
                if tr.visible in (False, "legendonly"):      # plotly draws it once picked in the legend
                    continue
                if tr.type == "bar":
                    sizes = tr.x if tr.orientation == "h" else tr.y
                    traces[tr.name] = (len(sizes or ()), sum(1 for v in sizes or () if v))
                elif tr.type == "scatter" and "markers" in (tr.mode or ""):
                    traces[tr.name] = (len(tr.x or ()), len(tr.x or ()))
                elif tr.type == "heatmap":                   # a label per cell
                    cells = len(tr.x or ()) * len(tr.y or ())
                    traces[tr.name] = (cells, cells)
            figures.append(traces)
        out[name] = figures
    out["table_view"] = out["timeline"]          # its Timeline tab
    return out


def check_render(lab: Any, expected: dict[str, list[dict[str, tuple[int, int]]]]) -> list[str]:
    """What is wrong with the widgets on the page now (empty when each drew its data)."""
    problems = []
    for name, cls in WIDGETS.items():
        views = wait_drawn(lab, cls)
        if len(views) != 1 or len(views[0]) != len(expected[name]):
            problems.append(f"{name}: {len(views)} views with {[len(v) for v in views]} figures, expected one "
                            f"with {len(expected[name])}")
            continue
        for k, (drawn, traces) in enumerate(zip(views[0], expected[name])):
            for trace, (points, sized) in traces.items():
                got = drawn.get(trace, {"points": 0, "drawn": 0})
                if got["points"] != points or (sized and not got["drawn"]):
                    problems.append(f"{name}: figure {k + 1}, trace {trace!r} drew {got['points']} points "
                                    f"({got['drawn']} of non-zero size), the figure holds {points} ({sized} of "
                                    "non-zero size)")
    return problems


def test_every_widget_draws_its_data_in_jupyterlab_ten_renders_in_a_row(tmp_path):
    require_lab()
    timings: list[tuple[str, float]] = []
    failures: list[str] = []
    with lab_server(tmp_path) as server, lab_page(server) as lab:
        nb = write_widget_notebook(server)
        expected: dict[str, Any] = {}
        for k in range(RENDERS):
            start, seen = time.monotonic(), len(lab.errors)
            if k % 2 == 0:
                kind = "fresh run"
                if k == 0:
                    lab.open(nb)
                else:
                    lab.restart_kernel()
                lab.run_all()
                open_table_view_tab(lab, "Timeline")
            else:
                kind = "page load"
                lab.open(nb)
            expected = expected or expected_traces(server.root)
            problems = check_render(lab, expected)
            if k == 0:
                problems += figures_wider_than_their_box(lab)
            if kind == "fresh run":
                lab.save()
            errors = lab.errors[seen:]
            bad = [e for e in errors if e.startswith("pageerror") or any(w in e.lower() for w in WIDGET_ERRORS)]
            if problems or bad:
                failures.append(f"render {k + 1} ({kind}):\n  " + "\n  ".join(problems + errors))
            timings.append((kind, time.monotonic() - start))
    summary = ", ".join(f"{kind} {s:.1f} s" for kind, s in timings)
    print(f"renders: {summary}")
    assert not failures, (f"{len(failures)} of {RENDERS} renders failed:\n" + "\n".join(failures)
                          + f"\n(render times: {summary})")
