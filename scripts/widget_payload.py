"""What the widgets' figures cost a notebook in JupyterLab: the widget state a notebook of N
figures saves, and the time until its figures draw.

    python scripts/widget_payload.py [--figures 5] [--reloads 3] [--one-cell] [--front-end lab|notebook]

Serves a notebook of N cells (or one, ``--one-cell``), each showing one of the widgets' plotly figures
(``lakesdk.widgets._figure.FigureWidget``, a bar chart of a few bars), with JupyterLab (or
Notebook 7) on 127.0.0.1 in a temporary folder, driven in Debian's Chromium, headless
(``tests/lab_harness.py``), and prints:

* run: seconds from running the figure cells (a first cell imported the widgets: not timed) until
  the first figure drew its bars, and until every one did;
* the notebook saved with its widget state: the size of its widget state (``metadata.widgets``)
  and of the file;
* reload: seconds from a page load of the saved notebook until the first figure drew, and until
  every one did (the widget manager restores every model from the kernel at once), per reload.

A figure counts as drawn when plotly drew each of its bars with a non-zero size. Needs the lab and
test dependency groups (``make setup``) and ``chromium``.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from lab_harness import lab_page, lab_server  # noqa: E402
from voila_harness import write_notebook  # noqa: E402

BARS = 4
SETUP = "from lakesdk.widgets._figure import FigureWidget"
FIGURE = "FigureWidget(data=[{{'type': 'bar', 'x': ['a', 'b', 'c', 'd'], 'y': [{k}, 2, 3, 4]}}])"
#: all the figures in one cell: created together, before the page has plotly's code
ONE_CELL = "from IPython.display import display\nfor k in range(N):\n    display(" + FIGURE.format(k="k + 1") + ")"

#: how many figures on the page drew every one of their bars
DRAWN_JS = f"""() => [...document.querySelectorAll('.js-plotly-plot')].filter(plot => {{
  const bars = [...plot.querySelectorAll('g.trace.bars g.point path')].filter(p => {{
    const r = p.getBoundingClientRect(); return r.width > 0 && r.height > 0; }});
  return bars.length === {BARS};
}}).length"""


#: select a cell and run a notebook command on it
_RUN_JS = """([cell, command]) => {
  window.jupyterapp.shell.currentWidget.content.activeCellIndex = cell;
  return window.jupyterapp.commands.execute(command);
}"""
#: the first cell ran and the kernel is idle
_IMPORTED_JS = """() => {
  const panel = window.jupyterapp.shell.currentWidget;
  return panel.content.model.cells.get(0).executionCount !== null && panel.sessionContext.session.kernel.status === 'idle';
}"""


#: per figure on the page: its bars, those of a non-zero size, and the plot's size
FIGURES_JS = """() => [...document.querySelectorAll('.js-plotly-plot')].map(plot => {
  const bars = [...plot.querySelectorAll('g.trace.bars g.point path')];
  const r = plot.getBoundingClientRect();
  return `${bars.length} bars, ${bars.filter(p => { const b = p.getBoundingClientRect();
    return b.width > 0 && b.height > 0; }).length} of a size, plot ${Math.round(r.width)}x${Math.round(r.height)}`;
})"""


def _until_drawn(lab, start: float, figures: int, timeout_s: float = 120, what: str = "") -> tuple[float, float]:
    """Seconds from ``start`` until the first figure drew, and until all ``figures`` did."""
    first = None
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        drawn = lab.page.evaluate(DRAWN_JS)
        now = time.monotonic() - start
        if drawn and first is None:
            first = now
        if drawn >= figures:
            return first or now, now
        lab.page.wait_for_timeout(25)
    raise SystemExit(f"{what}: only {lab.page.evaluate(DRAWN_JS)} of {figures} figures drew within {timeout_s} s "
                     f"({'; '.join(lab.page.evaluate(FIGURES_JS))}); page errors: {lab.errors}")


def main(figures: int, reloads: int, front_end: str, keep: Path | None = None, one_cell: bool = False) -> dict:
    out: dict = {"figures": figures, "front_end": front_end, "one_cell": one_cell}
    with tempfile.TemporaryDirectory(prefix="lakesdk-widget-payload-") as tmp:
        with lab_server(Path(tmp), front_end=front_end) as server, lab_page(server) as lab:
            nb = "figures.ipynb"
            cells = [ONE_CELL.replace("range(N)", f"range({figures})")] if one_cell else [FIGURE.format(k=k + 1) for k in range(figures)]
            write_notebook(server.root / nb, [SETUP, *cells])
            lab.open(nb)
            lab.page.evaluate(_RUN_JS, [0, "notebook:run-cell"])       # the imports, not timed
            lab.page.wait_for_function(_IMPORTED_JS, timeout=120_000, polling=100)
            start = time.monotonic()
            lab.page.evaluate(_RUN_JS, [1, "notebook:run-all-below"])
            out["run_first_s"], out["run_all_s"] = _until_drawn(lab, start, figures, what="run")
            lab.save()
            saved = json.loads((server.root / nb).read_text())
            if keep is not None:
                keep.write_text((server.root / nb).read_text())
            out["widget_state_bytes"] = len(json.dumps(saved["metadata"].get("widgets", {})))
            out["notebook_bytes"] = (server.root / nb).stat().st_size
            out["reloads"] = []
            for _ in range(reloads):
                start = time.monotonic()
                lab.page.goto(server.notebook_url(nb), timeout=120_000)
                out["reloads"].append(_until_drawn(lab, start, figures, what=f"reload {len(out['reloads']) + 1}"))
            bad = [e for e in lab.errors if "anywidget" in e.lower() or e.startswith("pageerror")]
            if bad:
                out["errors"] = bad
    return out


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--figures", type=int, default=5)
    parser.add_argument("--reloads", type=int, default=3)
    parser.add_argument("--front-end", choices=("lab", "notebook"), default="lab")
    parser.add_argument("--keep", type=Path, help="write the saved notebook here")
    parser.add_argument("--one-cell", action="store_true", help="display every figure from one cell")
    args = parser.parse_args()
    r = main(args.figures, args.reloads, args.front_end, args.keep, args.one_cell)
    where = "one cell" if r["one_cell"] else "a cell each"
    print(f"{r['figures']} figures ({where}) in {r['front_end']}: run: first drawn {r['run_first_s']:.2f} s, "
          f"all {r['run_all_s']:.2f} s")
    print(f"saved: widget state {r['widget_state_bytes'] / 1e6:.2f} MB, notebook {r['notebook_bytes'] / 1e6:.2f} MB")
    for k, (first, every) in enumerate(r["reloads"], 1):
        print(f"reload {k}: first drawn {first:.2f} s, all {every:.2f} s")
    if r.get("errors"):
        print("page errors:\n  " + "\n  ".join(r["errors"]))
