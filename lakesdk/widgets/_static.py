"""How the static figures beside the widgets load plotly.js (no plotly import here)."""

from __future__ import annotations

from typing import Any, Literal

__all__ = ["offline_figures", "plotlyjs_source"]

#: "cdn", or "embed" (``offline_figures()``) with "embedded" set once a figure of this
#: process carries plotly.js
_PLOTLYJS: dict[str, Any] = {"mode": "cdn", "embedded": False}


def offline_figures(enabled: bool = True) -> None:
    """Make the static figures stored beside the widgets draw without a network: the next one
    carries plotly.js (about 4.6 MB, once), the later ones use it; ``enabled=False`` goes
    back to loading it from plotly's CDN.  For notebooks exported with nbconvert or opened
    where no network is.  Call it again after re-running the cell whose figure carried it."""
    _PLOTLYJS.update(mode="embed" if enabled else "cdn", embedded=False)


def plotlyjs_source() -> Literal["cdn"] | bool:
    """What the next static figure passes as plotly's ``include_plotlyjs``."""
    if _PLOTLYJS["mode"] != "embed":
        return "cdn"
    if _PLOTLYJS["embedded"]:
        return False
    _PLOTLYJS["embedded"] = True
    return True
