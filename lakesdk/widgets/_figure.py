"""The widgets' plotly figure: a ``FigureWidget`` whose browser code is evaluated once per page.

plotly's ``FigureWidget`` is an anywidget whose front-end module (``_esm``) is plotly's whole
widget bundle, about 5 MB of JavaScript. anywidget imports each model's ``_esm`` from a new blob
URL, so the browser parses and evaluates the bundle again for every figure on the page, and it
gives each model two seconds from its creation to load and initialize its module: past that the
model fails (``[anywidget] Failed to initialize model``) and drops every message the kernel
sends it, so the figure keeps the state it was created with, empty axes. A page with a few
figures created together (a notebook run top to bottom, a page reload that restores every
model at once) evaluates the bundle once per figure, one after another, and the later figures
miss the deadline.

:class:`FigureWidget` keeps plotly's bundle as a model trait (``_plotly_esm``) and sends a small
module as ``_esm``: it imports the bundle once per page (shared by every figure of the same
bundle, keyed by its hash) and hands plotly's own ``initialize`` and ``render`` the model and
view, so only the first figure of a page waits for the bundle.  It also makes plotly's view
follow its box's width (anywidget sends none of the layout messages plotly sizes a figure on,
so a figure kept plotly's default 700 px, cut off in a narrower box).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import plotly
import traitlets

from lakesdk.widgets._common import go

__all__ = ["FigureWidget", "SHARED_ESM", "plotly_bundle"]


def plotly_bundle() -> str:
    """plotly's widget bundle (the ``_esm`` of ``plotly.graph_objects.FigureWidget``)."""
    return str(go.FigureWidget._esm)      # anywidget's FileContents of the bundle: str() is its text


_BUNDLE = plotly_bundle()
_KEY = f"lakesdk.plotly-widget.{plotly.__version__}.{hashlib.sha256(_BUNDLE.encode()).hexdigest()[:16]}"

#: The ``_esm`` of :class:`FigureWidget`: loads ``_plotly_esm`` once per page and delegates to it.
SHARED_ESM = """\
const KEY = Symbol.for(__KEY__);

function bundle(model) {
  let loading = globalThis[KEY];
  if (!loading) {
    const url = URL.createObjectURL(new Blob([model.get("_plotly_esm")], {type: "text/javascript"}));
    loading = import(/* webpackIgnore: true */ url).finally(() => URL.revokeObjectURL(url));
    globalThis[KEY] = loading;
    loading.catch(() => { if (globalThis[KEY] === loading) delete globalThis[KEY]; });
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

export default () => {
  let widget = null;
  return {
    async initialize(ctx) {
      const mod = await bundle(ctx.model);
      followBoxWidth(mod);
      widget = typeof mod.default === "function" ? await mod.default() : mod.default;
      return widget.initialize ? widget.initialize(ctx) : undefined;
    },
    render(ctx) {
      return widget.render(ctx);
    },
  };
};
""".replace("__KEY__", json.dumps(_KEY))


class FigureWidget(go.FigureWidget):
    """plotly's ``FigureWidget``, its 5 MB front-end bundle evaluated once per page (see the module)."""

    _esm = SHARED_ESM
    _plotly_esm = traitlets.Unicode(_BUNDLE).tag(sync=True)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
