"""The widgets' figure (``lakesdk.widgets._figure``): plotly's 5 MB widget bundle is a model of
its own, one per kernel, which every figure refers to; a figure's own state is small; a whole
state holds the figure as it is now; and the figure's browser module keeps the model's
``_widget_data`` and ``_widget_layout`` current from the kernel's transient change messages
until plotly's bundle is loaded, then hands over to plotly's model code (checked in Chromium,
with plotly's real bundle, against the figure the kernel holds, for generated edits), so a view
drawn late, or a saved widget state, has every change once."""

from __future__ import annotations

import base64
import gzip
import json
import shutil
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("plotly")
pytest.importorskip("anywidget")

from lakesdk.widgets import _figure  # noqa: E402
from lakesdk.widgets._figure import BUNDLE_KEY, FIGURE_ESM, FigureWidget, plotly_bundle, shared_bundle  # noqa: E402

CHANGES = ("_py2js_addTraces", "_py2js_deleteTraces", "_py2js_moveTraces", "_py2js_restyle", "_py2js_relayout",
           "_py2js_update", "_py2js_animate", "_py2js_removeLayoutProps", "_py2js_removeTraceProps")


def _json(fig: FigureWidget, name: str, value: Any) -> Any:
    return fig.trait_metadata(name, "to_json")(value, fig)


def test_figures_refer_to_the_kernels_one_bundle_model_and_carry_no_bundle():
    a, b = FigureWidget(data=[{"type": "bar", "x": [1, 2], "y": [3, 4]}]), FigureWidget()
    bundle = shared_bundle()
    for fig in (a, b):
        state = fig.get_state()
        assert state["_plotly_bundle"] == f"IPY_MODEL_{bundle.model_id}"
        assert state["_plotly_bundle_key"] == bundle.key == BUNDLE_KEY
        assert len(json.dumps(state)) < 64_000            # its module and its figure, not plotly's bundle
        assert state["_esm"] == FIGURE_ESM
    assert gzip.decompress(base64.b64decode(bundle.source)).decode() == plotly_bundle()
    assert len(bundle.source) < 0.5 * len(plotly_bundle())
    # a bundle model closed (Widget.close_all() closes every model) is made again for new figures
    closed = bundle.model_id
    bundle.close()
    assert FigureWidget().get_state()["_plotly_bundle"] == f"IPY_MODEL_{shared_bundle().model_id}" != \
        f"IPY_MODEL_{closed}"


def test_a_whole_state_holds_the_figure_as_it_is_now():
    """A page reload asks the kernel for each model's whole state: it holds every change sent as a
    transient message since ``_widget_data`` was assigned, not the figure as it was then."""
    fig = FigureWidget(data=[{"type": "bar", "x": ["a"], "y": [1]}])
    fig.add_scatter(x=[1, 2], y=[3, 4], name="line")
    fig.data[0].y = [5]
    fig.layout.title.text = "now"
    assert len(fig._widget_data) == 1                          # what plotly last assigned
    state = fig.get_state()
    assert state["_widget_data"] == _json(fig, "_widget_data", fig._data)
    assert [t["type"] for t in state["_widget_data"]] == ["bar", "scatter"] and state["_widget_data"][0]["y"] == [5]
    assert state["_widget_layout"]["title"]["text"] == "now"
    assert fig.get_state("_widget_data")["_widget_data"] == _json(fig, "_widget_data", fig._widget_data)


# ------------------------------------------------------------------ the browser module, in Chromium
#: imports the figure's module and gives it a model (a Backbone-like stand-in whose widget
#: manager has the kernel's bundle model, with plotly's real bundle), replays the kernel's
#: messages as the widget manager sets them (the message, then None): those of ``before`` at
#: once, those of ``after`` once plotly's bundle is loaded and its model code took over; returns
#: the model's figure afterwards
REPLAY_JS = """async ([esm, state, before, after]) => {
  const url = URL.createObjectURL(new Blob([esm], {type: 'text/javascript'}));
  const mod = await import(url);
  const listeners = {};
  const bundle = {get: name => ({source: window.__lakesdkBundle})[name]};
  const model = {
    attributes: structuredClone(state),
    get(name) { return this.attributes[name]; },
    on(event, cb) { (listeners[event] ??= []).push(cb); },
    off(event, cb) { listeners[event] = (listeners[event] || []).filter(c => c !== cb); },
    set(name, value) { this.attributes[name] = value; (listeners['change:' + name] || []).forEach(cb => cb()); },
    widget_manager: {get_model: async id => bundle},
  };
  const replay = messages => { for (const [name, msg] of messages) { model.set(name, msg); model.set(name, null); } };
  const widget = mod.default();
  const stop = widget.initialize({model});
  replay(before);
  await globalThis[Symbol.for('lakesdk.plotly-widget.bundles')].get(state._plotly_bundle_key);
  await new Promise(resolve => setTimeout(resolve, 0));      // the hand-over to plotly's model code
  replay(after);
  stop();
  return {data: model.get('_widget_data'), layout: model.get('_widget_layout')};
}"""

NAMES = st.sampled_from(["a", "b", "c", "d"])
NUMBERS = st.lists(st.integers(-50, 50), min_size=1, max_size=4)


@st.composite
def edits(draw: Any) -> list[tuple[str, Any]]:
    """Edits of a figure, as a notebook's code makes them: each sends one change message."""
    out: list[tuple[str, Any]] = []
    traces = 1
    for _ in range(draw(st.integers(1, 12))):
        kind = draw(st.sampled_from(["add", "y", "name", "unname", "colour", "title", "range", "axis", "batch",
                                     "delete", "reverse", "animate"]))
        if kind == "add":
            out.append((kind, (draw(st.sampled_from(["bar", "scatter"])), draw(NUMBERS), draw(NAMES))))
            traces += 1
        elif kind in ("delete", "reverse") and traces > 1:
            out.append((kind, None))
            traces -= kind == "delete"
        elif kind in ("y", "colour", "batch", "animate"):
            out.append((kind, (draw(st.integers(0, traces - 1)), draw(NUMBERS))))
        elif kind in ("name", "unname"):
            out.append((kind, (draw(st.integers(0, traces - 1)), draw(NAMES))))
        elif kind in ("title", "axis"):
            out.append((kind, draw(NAMES)))
        elif kind == "range":
            out.append((kind, sorted(draw(st.lists(st.integers(-100, 100), min_size=2, max_size=2, unique=True)))))
    return out


def _edit(fig: FigureWidget, kind: str, arg: Any) -> None:
    if kind == "add":
        fig.add_trace({"type": arg[0], "y": arg[1], "name": arg[2]})
    elif kind == "y":
        fig.data[arg[0]].y = arg[1]
    elif kind == "name":
        fig.data[arg[0]].name = arg[1]
    elif kind == "unname":
        fig.data[arg[0]].name = None
    elif kind == "colour":
        fig.data[arg[0]].marker.color = ["red", "blue"][arg[1][0] % 2]
    elif kind == "title":
        fig.layout.title.text = arg
    elif kind == "range":
        fig.layout.xaxis.range = arg
    elif kind == "axis":
        fig.layout.xaxis.type = "category" if arg in "ab" else "-"
    elif kind == "batch":
        with fig.batch_update():
            fig.data[arg[0]].y = arg[1]
            fig.layout.yaxis.title.text = f"{len(arg[1])} values"
    elif kind == "animate":
        with fig.batch_animate():
            fig.data[arg[0]].y = arg[1]
    elif kind == "delete":
        fig.data = fig.data[:-1]
    elif kind == "reverse":
        fig.data = fig.data[::-1]


def _pruned(v: Any) -> Any:
    """Without empty objects (plotly.js draws ``marker: {}`` as no marker)."""
    if isinstance(v, dict):
        out = {k: _pruned(x) for k, x in v.items()}
        return {k: x for k, x in out.items() if x != {}}
    if isinstance(v, list):
        return [_pruned(x) for x in v]
    return v


@pytest.fixture(scope="module")
def chromium_page():
    chromium = shutil.which("chromium")
    if chromium is None:
        pytest.skip("Debian's chromium is not installed (apt-get install chromium; scripts/system-deps.sh does it)")
    from playwright import sync_api
    from voila_harness import CHROMIUM_ARGS
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page()
            page.set_content("<html><body></body></html>")
            page.evaluate("packed => { window.__lakesdkBundle = packed; }", shared_bundle().source)
            yield page
        finally:
            browser.close()


@pytest.mark.browser
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(edits(), st.integers(0, 12))
def test_the_figure_module_keeps_the_model_current_from_the_kernels_change_messages(chromium_page, plan, loaded):
    """Each edit sends a transient message (set, then None). Before plotly's bundle is loaded the
    module applies each to the model's ``_widget_data`` and ``_widget_layout``, after it plotly's
    model code does (the first example loads the bundle: its messages after the ``loaded``-th
    come once it is loaded; later examples find it loaded, and the module hands over after the
    first messages): the model then holds the figure the kernel holds, no change missed or
    applied twice."""
    fig = FigureWidget(data=[{"type": "bar", "x": ["a", "b"], "y": [1, 2], "name": "first"}])
    start = {k: v for k, v in fig.get_state().items()
             if k in ("_widget_data", "_widget_layout", "_plotly_bundle", "_plotly_bundle_key")}
    messages: list[tuple[str, Any]] = []
    fig.observe(lambda c: messages.append((c["name"], _json(fig, c["name"], c["new"]))) if c["new"] is not None
                else None, names=list(CHANGES))
    for kind, arg in plan:
        _edit(fig, kind, arg)
    got = chromium_page.evaluate(REPLAY_JS, [FIGURE_ESM, start, messages[:loaded], messages[loaded:]])
    assert _pruned(got["data"]) == _pruned(_json(fig, "_widget_data", fig._data)), messages
    assert _pruned(got["layout"]) == _pruned(_json(fig, "_widget_layout", fig._layout_obj._props)), messages


def test_the_module_names_every_change_message_plotly_sends():
    """The module follows each ``_py2js_*`` trait of plotly's FigureWidget (a new one would be a
    change the module does not keep)."""
    sent = {n for n in FigureWidget.class_trait_names() if n.startswith("_py2js_")}
    assert sent == set(CHANGES)
    for name in CHANGES:
        assert f'"{name}"' in _figure.FIGURE_ESM
