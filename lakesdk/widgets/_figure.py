"""The widgets' plotly figure: a ``FigureWidget`` whose 5 MB browser bundle a kernel sends once.

plotly's ``FigureWidget`` is an anywidget whose front-end module (``_esm``) is plotly's whole
widget bundle, about 5 MB of JavaScript, sent with every figure's state. Two costs follow. Each
figure carries the bundle: a notebook of five figures saved with its widget state holds 25 MB
of it, and a page reload pulls as much from the kernel. And anywidget gives each model two
seconds from its creation to load its module and run its ``initialize``: past that the model
drops every message the kernel sends it (``[anywidget] Failed to initialize model``), so the
figure keeps the state it was created with, empty axes. Loading and evaluating the bundle takes
a second on a quiet machine, so on a loaded one a figure that waits for it misses the deadline.

The design here, in three parts:

* **The bundle is a model of its own, one per kernel.** :class:`PlotlyBundle` is a plain
  ipywidgets model (``@jupyter-widgets/base``'s ``WidgetModel``: no view, no module to load)
  holding plotly's bundle gzip-compressed and base64-encoded (2 MB of text: the widget manager
  saves a plain model's binary buffers as empty objects), created with the kernel's
  first figure. Each :class:`FigureWidget` refers to it (``_plotly_bundle``, a widget reference)
  and names its version (``_plotly_bundle_key``: plotly's version and the bundle's hash). A page
  gets the bundle once per kernel, a notebook saves it once, and it needs no network: it comes
  from the kernel, or from the saved widget state.
* **A figure's module is small and initializes at once.** Its ``_esm`` (:data:`FIGURE_ESM`, a
  few kilobytes) starts loading the bundle and returns from ``initialize`` without waiting for
  it: a figure's deadline no longer covers the bundle. The bundle is imported once per page for
  every figure of its version: a module-level promise in ``globalThis``, keyed by
  ``_plotly_bundle_key``, which resolves the reference with the widget manager, decompresses
  the source (``DecompressionStream``) and imports it. A view (``render``, which has no
  deadline) waits for it, then hands the model and its element to plotly's own ``initialize``
  and ``render``. The bundle's evaluation is still one long task (about a second, more on a
  loaded machine) that holds the page: a figure created in the moment before it starts, its
  small module still loading, waits for it too. It starts at the first figure's
  ``initialize``, so the figures of a page reload or of one cell, created together, have
  initialized by then, and the figures created after it find the bundle loaded.
* **The model holds the current figure, however late plotly's code arrives.** The kernel sends
  a figure's changes as transient messages (``_py2js_restyle``, ``_py2js_relayout``,
  ``_py2js_update``, ``_py2js_addTraces``, ...: set, then reset to ``None``), and plotly draws a
  new view from the model's ``_widget_data`` and ``_widget_layout``. plotly's model code, which
  comes with the bundle, applies each message to those in place once it runs; the messages
  before it are gone. So the small module applies them itself (in place, as plotly's code does:
  no event, nothing sent back) from ``initialize`` until the bundle is loaded, then stops and
  runs plotly's ``initialize`` in the same step, so that no message is applied twice or missed.
  A view drawn once the bundle is loaded draws the figure as it is now, and so does the widget
  state a notebook saves. On the kernel's side :meth:`FigureWidget.get_state` puts the figure as
  it is now into every whole state it sends (a page reload asks the kernel for each model's),
  not the ``_widget_data`` last assigned, which plotly assigns only when a figure is displayed.

The small module also makes plotly's view follow its box's width (anywidget sends none of the
layout messages plotly sizes a figure on, so a figure kept plotly's default 700 px, cut off in
a narrower box).

Where widgets do not run (nbconvert, the documentation site, a notebook saved without widget
state), each widget shows a static picture instead (``text/html``, ``lakesdk.widgets._static``):
plotly.js from its CDN, or carried by the first figure after ``offline_figures()``; the bundle
model plays no part there.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import threading
from copy import deepcopy
from typing import Any

import plotly
import traitlets

from lakesdk.widgets._common import go, ipywidgets

__all__ = ["FigureWidget", "FIGURE_ESM", "PlotlyBundle", "plotly_bundle", "shared_bundle"]


def plotly_bundle() -> str:
    """plotly's widget bundle (the ``_esm`` of ``plotly.graph_objects.FigureWidget``)."""
    return str(go.FigureWidget._esm)      # anywidget's FileContents of the bundle: str() is its text


_BUNDLE = plotly_bundle()
#: plotly's version and the bundle's hash: a page imports the bundle once per key
BUNDLE_KEY = f"{plotly.__version__}.{hashlib.sha256(_BUNDLE.encode()).hexdigest()[:16]}"


class PlotlyBundle(ipywidgets.Widget):
    """plotly's widget bundle, gzip-compressed and base64-encoded, in a model of its own: one per kernel
    (:func:`shared_bundle`), which every :class:`FigureWidget` refers to. A plain ipywidgets
    model: no view, and no module for the browser to load."""

    key = traitlets.Unicode(BUNDLE_KEY).tag(sync=True)
    source = traitlets.Unicode().tag(sync=True)

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(source=_packed_bundle(), **kwargs)


_PACKED: list[str] = []


def _packed_bundle() -> str:
    """The bundle gzip-compressed and base64-encoded (a tenth of a second: made once)."""
    if not _PACKED:
        _PACKED.append(base64.b64encode(gzip.compress(_BUNDLE.encode(), 6, mtime=0)).decode("ascii"))
    return _PACKED[0]


_SHARED: dict[str, PlotlyBundle] = {}
_SHARED_LOCK = threading.Lock()


def shared_bundle() -> PlotlyBundle:
    """The kernel's :class:`PlotlyBundle`, made with its first figure (again if it was closed,
    by ``Widget.close_all()`` say)."""
    with _SHARED_LOCK:
        bundle = _SHARED.get("bundle")
        if bundle is None or bundle.comm is None:
            bundle = _SHARED["bundle"] = PlotlyBundle()
        return bundle


#: The ``_esm`` of :class:`FigureWidget` (see the module): the current figure kept in the model
#: from ``initialize`` on, plotly's bundle imported once per page and handed each view.
FIGURE_ESM = """\
const BUNDLES = Symbol.for("lakesdk.plotly-widget.bundles");
const CHANGES = ["_py2js_addTraces", "_py2js_deleteTraces", "_py2js_moveTraces", "_py2js_restyle",
                 "_py2js_relayout", "_py2js_update", "_py2js_animate", "_py2js_removeLayoutProps",
                 "_py2js_removeTraceProps"];
const UNDEFINED = "_undefined_";     // plotly's serialized undefined

// ---- plotly's bundle: once per page and version, from the kernel's bundle model
async function importBundle(model) {
  const ref = String(model.get("_plotly_bundle") || "");
  if (!ref.startsWith("IPY_MODEL_")) throw new Error("the figure names no plotly bundle model: " + ref);
  const shared = await model.widget_manager.get_model(ref.slice("IPY_MODEL_".length));
  const packed = atob(shared.get("source"));
  const gzipped = new Uint8Array(packed.length);
  for (let i = 0; i < packed.length; i++) gzipped[i] = packed.charCodeAt(i);
  const text = await new Response(new Blob([gzipped]).stream().pipeThrough(new DecompressionStream("gzip"))).text();
  const url = URL.createObjectURL(new Blob([text], {type: "text/javascript"}));
  try {
    const mod = await import(/* webpackIgnore: true */ url);
    followBoxWidth(mod);
    return mod;
  } finally {
    URL.revokeObjectURL(url);
  }
}

function bundle(model) {
  const cache = (globalThis[BUNDLES] ??= new Map());
  const key = model.get("_plotly_bundle_key");
  let loading = cache.get(key);
  if (!loading) {
    loading = importBundle(model);
    cache.set(key, loading);
    loading.catch(() => { if (cache.get(key) === loading) cache.delete(key); });
  }
  return loading;
}

// plotly's view sizes its figure to its box on the notebook's layout messages, which anywidget
// does not send: its first size is plotly's default (700 px), wider than a narrower box. A
// figure without a width of its own follows its box's width instead.
function followBoxWidth(mod) {
  const View = mod.FigureView;
  if (!View || View.prototype.__followsBoxWidth || typeof ResizeObserver !== "function") return;
  const perform = View.prototype.perform_render;
  View.prototype.perform_render = function () {
    const out = perform.apply(this, arguments);
    // as wide as its box, never wider: a flex item's minimum width is its content's (700 px)
    this.el.style.minWidth = "0";
    this.el.style.width = "100%";
    let width = 0;
    this.__boxObserver = new ResizeObserver(() => {
      const w = this.el.clientWidth;
      if (w > 0 && w !== width) { width = w; this.autosizeFigure(); }
    });
    this.__boxObserver.observe(this.el);
    return out;
  };
  const remove = View.prototype.remove;
  View.prototype.remove = function () {
    if (this.__boxObserver) this.__boxObserver.disconnect();
    return remove.apply(this, arguments);
  };
  View.prototype.__followsBoxWidth = true;
}

// ---- the current figure until plotly's model code runs: the kernel's changes applied to
// _widget_data and _widget_layout in place, as that code applies them (lodash's set and unset
// on attribute paths)
function keys(path) {
  return String(path).match(/[^.[\\]]+/g) || [];
}
function setPath(obj, path, value) {
  const ks = keys(path);
  let o = obj;
  for (let i = 0; i < ks.length - 1; i++) {
    if (o[ks[i]] === null || typeof o[ks[i]] !== "object") o[ks[i]] = /^(?:0|[1-9]\\d*)$/.test(ks[i + 1]) ? [] : {};
    o = o[ks[i]];
  }
  if (ks.length) o[ks[ks.length - 1]] = value;
}
function unsetPath(obj, path) {
  const ks = keys(path);
  let o = obj;
  for (let i = 0; i < ks.length - 1; i++) {
    o = o[ks[i]];
    if (o === null || typeof o !== "object") return;
  }
  if (ks.length) delete o[ks[ks.length - 1]];
}
function relayout(target, changes) {
  for (const [path, value] of Object.entries(changes || {})) {
    if (value === null) unsetPath(target, path); else setPath(target, path, value);
  }
}
function traceIndexes(data, traces) {
  if (traces === null || traces === undefined) return data.map((_, i) => i);
  return Array.isArray(traces) ? traces : [traces];
}
function restyle(data, changes, traces) {
  for (const [path, values] of Object.entries(changes || {})) {
    const vs = Array.isArray(values) ? values : [values];
    traces.forEach((t, i) => {
      const v = vs[i % vs.length];
      if (!data[t]) return;
      if (v === null) unsetPath(data[t], path);
      else if (v !== undefined && v !== UNDEFINED) setPath(data[t], path, v);
    });
  }
}
function moveTraces(data, current, target) {
  const moved = [];
  for (let i = current.length - 1; i >= 0; i--) {
    moved.unshift(data[current[i]]);
    data.splice(current[i], 1);
  }
  target.map((t, i) => [t, moved[i]]).sort((a, b) => a[0] - b[0]).forEach(([t, trace]) => data.splice(t, 0, trace));
}
function applyChange(model, name, msg) {
  const data = model.get("_widget_data"), layout = model.get("_widget_layout");
  if (!Array.isArray(data) || layout === null || typeof layout !== "object") return;
  switch (name) {
    case "_py2js_addTraces": data.push(...msg.trace_data); break;
    case "_py2js_deleteTraces": msg.delete_inds.slice().sort((a, b) => b - a).forEach(i => data.splice(i, 1)); break;
    case "_py2js_moveTraces": moveTraces(data, msg.current_trace_inds, msg.new_trace_inds); break;
    case "_py2js_restyle": restyle(data, msg.restyle_data, traceIndexes(data, msg.restyle_traces)); break;
    case "_py2js_relayout": relayout(layout, msg.relayout_data); break;
    case "_py2js_update":
      restyle(data, msg.style_data, traceIndexes(data, msg.style_traces));
      relayout(layout, msg.layout_data);
      break;
    case "_py2js_animate":
      traceIndexes(data, msg.style_traces).forEach((t, i) => data[t] && relayout(data[t], (msg.style_data || [])[i]));
      relayout(layout, msg.layout_data);
      break;
    case "_py2js_removeLayoutProps": msg.remove_props.forEach(p => unsetPath(layout, p)); break;
    case "_py2js_removeTraceProps":
      if (data[msg.remove_trace]) msg.remove_props.forEach(p => unsetPath(data[msg.remove_trace], p));
      break;
  }
}
function keepCurrent(model) {
  const handlers = CHANGES.map(name => [name, () => {
    const msg = model.get(name);
    if (msg === null || msg === undefined) return;
    try { applyChange(model, name, msg); } catch (e) { console.warn("[lakesdk] could not apply", name, e); }
  }]);
  for (const [name, h] of handlers) model.on("change:" + name, h);
  return () => { for (const [name, h] of handlers) model.off("change:" + name, h); };
}

export default () => {
  let model = null;     // initialize's model: plotly's model code gets it, as it would
  let plotly = null;    // plotly's widget for this model, once the bundle is loaded
  let stopKeeping = () => {};
  const widget = () => (plotly ??= bundle(model).then(async mod => {
    const w = typeof mod.default === "function" ? await mod.default() : mod.default;
    // plotly's model code keeps the figure from here on: the hand-over is one synchronous step
    // (its initialize registers its listeners before it returns), so no message falls between
    stopKeeping();
    stopKeeping = () => {};
    if (w.initialize) await w.initialize({model});
    return w;
  }));
  return {
    initialize(ctx) {
      model = ctx.model;
      stopKeeping = keepCurrent(model);
      widget().catch(() => {});     // load the bundle now; a view waits for it, initialize does not
      return () => stopKeeping();
    },
    async render({el, signal}) {
      let w;
      try {
        w = await widget();
      } catch (e) {
        plotly = null;
        console.error("[lakesdk] could not load plotly's widget bundle", e);
        el.textContent = "The figure could not load plotly's widget bundle: " + e;
        return;
      }
      if (signal && signal.aborted) return;
      return w.render({model, el, signal});
    },
  };
};
"""


class FigureWidget(go.FigureWidget):
    """plotly's ``FigureWidget``; its 5 MB browser bundle sent once per kernel (see the module)."""

    _esm = FIGURE_ESM
    _plotly_bundle = traitlets.Instance(PlotlyBundle, allow_none=True).tag(
        sync=True, **ipywidgets.widget_serialization)
    _plotly_bundle_key = traitlets.Unicode(BUNDLE_KEY).tag(sync=True)

    @traitlets.default("_plotly_bundle")
    def _default_plotly_bundle(self) -> PlotlyBundle:
        return shared_bundle()

    def get_state(self, key: Any = None, drop_defaults: bool = False) -> dict[str, Any]:
        """The widget's state; a whole state (``key=None``: a new model, a page reload asking the
        kernel for it) holds the figure as it is now, with every change made since
        ``_widget_data`` and ``_widget_layout`` were last assigned."""
        state: dict[str, Any] = super().get_state(key, drop_defaults=drop_defaults)
        if key is None and hasattr(self, "_layout_obj"):    # not while plotly's constructor runs
            for name, now in (("_widget_data", self._data), ("_widget_layout", self._layout_obj._props)):
                if name in state:
                    to_json = self.trait_metadata(name, "to_json", self._trait_to_json)
                    state[name] = to_json(deepcopy(now), self)
        return state
