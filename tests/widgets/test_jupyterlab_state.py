"""A figure changed after it was displayed draws as changed in JupyterLab 4: when plotly's
widget bundle reached the page after the changes, after a page reload (from the kernel) and
from the widget state saved in the notebook.

The kernel sends a figure's changes as transient messages (``f.data[0].y = ...`` is a restyle
message, set and reset), which only the model code running at the time applies: plotly's comes
with its bundle, a second or more after a new page's first figure, and until then the figure's
own small module applies them (``lakesdk.widgets._figure``); the test holds the bundle back 4 s
so that the changes of the figure's cell always come first. A page reload asks the kernel for
each model's whole state, and with the kernel restarted JupyterLab restores the models from the
widget state saved in the notebook: either must hold every change, not the figure as it was
displayed. Each is checked from what plotly drew: each trace's values, the title and the bars."""

from __future__ import annotations

import pytest
from lab_harness import lab_page, lab_server, require_lab
from voila_harness import write_notebook

pytestmark = pytest.mark.browser

CELLS = [
    "from IPython.display import display\nfrom lakesdk.widgets._figure import FigureWidget",
    "f = FigureWidget(data=[{'type': 'bar', 'x': ['a', 'b', 'c', 'd'], 'y': [1, 2, 3, 4]}])\ndisplay(f)\n"
    "f.data[0].y = [4, 3, 2, 1]\nf.layout.title.text = 'changed'",
]
#: a change once the figure is drawn (plotly's model code applies it)
LATER = "_ = f.add_scatter(x=['a', 'd'], y=[2, 2], name='line')"
#: the page takes 4 s more to unpack plotly's bundle (as a loaded machine might): the changes the
#: second cell makes at once reach the page before plotly's code, every time
SLOW_BUNDLE_JS = """(() => {
  const Native = window.DecompressionStream;
  window.DecompressionStream = function (format) {
    const inner = new Native(format);
    const late = new TransformStream({start: () => new Promise(resolve => setTimeout(resolve, 4000))});
    return {writable: inner.writable, readable: inner.readable.pipeThrough(late)};
  };
})();"""
#: what plotly drew: each trace's y values, the title, and how many bars
DRAWN_JS = """() => {
  const plot = document.querySelector('.js-plotly-plot');
  if (!plot || !plot._fullData) return null;
  const title = plot.querySelector('.gtitle');
  return {ys: plot._fullData.map(t => Array.from(t.y)), title: title ? title.textContent : null,
          bars: plot.querySelectorAll('g.trace.bars g.point path').length};
}"""
CHANGED = {"ys": [[4, 3, 2, 1]], "title": "changed", "bars": 4}
LATER_CHANGED = {"ys": [[4, 3, 2, 1], [2, 2]], "title": "changed", "bars": 4}


def _drawn(lab, expected: dict, timeout_s: float = 60) -> dict:
    try:
        lab.page.wait_for_function(f"e => {{ const d = ({DRAWN_JS})(); return !!d && JSON.stringify(d) === "
                                   "JSON.stringify(e); }", arg=expected, timeout=timeout_s * 1000, polling=250)
    except lab.sync_api.TimeoutError:
        pass                    # the assertion shows what was drawn
    return lab.page.evaluate(DRAWN_JS)


def test_a_changed_figure_draws_as_changed_late_after_a_reload_and_from_saved_state(tmp_path):
    require_lab("lab")
    with lab_server(tmp_path) as server, lab_page(server) as lab:
        lab.page.add_init_script(SLOW_BUNDLE_JS)
        write_notebook(server.root / "changed.ipynb", CELLS)
        lab.open("changed.ipynb")
        lab.run_all()
        assert _drawn(lab, CHANGED) == CHANGED                # changed before plotly's code came
        lab.page.evaluate("code => window.jupyterapp.shell.currentWidget.sessionContext.session.kernel"
                          ".requestExecute({code}).done", LATER)
        assert _drawn(lab, LATER_CHANGED) == LATER_CHANGED    # changed once drawn
        lab.save()
        lab.open("changed.ipynb")                             # a page reload: the kernel's state
        assert _drawn(lab, LATER_CHANGED) == LATER_CHANGED
        lab.restart_kernel()                                  # the kernel no longer has the figure:
        lab.open("changed.ipynb")                             # the widget state saved in the notebook
        assert _drawn(lab, LATER_CHANGED) == LATER_CHANGED
        errors = [e for e in lab.errors if "anywidget" in e.lower() or e.startswith("pageerror")]
        assert not errors, errors
