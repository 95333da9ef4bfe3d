"""Progress bars for long work (local write tasks, compaction, clean, merge-on-read reads).

One helper, :func:`progress`, wraps an iterable in a ``tqdm.auto`` bar (a widget in a
notebook, text on a terminal) when bars are enabled, and returns the iterable unchanged
otherwise.  A bar appears only once the work has run for :data:`DELAY_S` seconds, so short
work never prints anything.

Whether bars are enabled (first match wins):

* ``LAKESDK_PROGRESS=0`` (or ``false``/``off``/``no``) in the environment: never;
* the setting passed by the caller, ``TableOptions(progress=...)``: ``False`` never,
  ``True`` always;
* ``LAKESDK_PROGRESS=1`` (or ``true``/``on``/``yes``): always;
* ``"auto"`` (the default): in a Jupyter kernel, or when stderr is a terminal.  Captured
  output (pytest, a log file, a scheduler) gets no bars.

>>> list(progress(range(3), total=3, desc="demo", setting=False))
[0, 1, 2]
"""

from __future__ import annotations

import os
import sys
from typing import Any, Iterable, Iterator, Literal, TypeVar, Union

__all__ = ["DELAY_S", "ProgressSetting", "progress", "progress_enabled"]

T = TypeVar("T")
ProgressSetting = Union[Literal["auto"], bool, None]

#: seconds of work before a bar is drawn (shorter work shows none)
DELAY_S = 1.0

_OFF = frozenset({"0", "false", "off", "no"})
_ON = frozenset({"1", "true", "on", "yes"})


def _in_notebook() -> bool:
    ipython = sys.modules.get("IPython")
    if ipython is None:
        return False
    try:
        shell = ipython.get_ipython()
    except Exception:  # noqa: BLE001 - any failure means: not a kernel
        return False
    return shell is not None and "IPKernelApp" in getattr(shell, "config", {})


def progress_enabled(setting: ProgressSetting = "auto") -> bool:
    """Whether a bar would be shown for ``setting`` (``TableOptions.progress``) now."""
    env = os.environ.get("LAKESDK_PROGRESS", "").strip().lower()
    if env in _OFF:
        return False
    if setting is True or setting is False:
        return setting
    if setting not in (None, "auto"):
        raise ValueError(f"progress must be 'auto', True or False, not {setting!r}")
    if env in _ON:
        return True
    if _in_notebook():
        return True
    try:
        return sys.stderr is not None and sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False


def progress(items: Iterable[T], *, total: int | None = None, desc: str = "", unit: str = "task",
             setting: ProgressSetting = "auto", **tqdm_kwargs: Any) -> Iterable[T]:
    """``items`` with a progress bar when bars are enabled (see the module docstring).

    ``total`` defaults to ``len(items)`` when it has one; ``tqdm_kwargs`` go to
    ``tqdm.auto.tqdm`` (``file=``, ``delay=``, ...).  The bar closes when the iteration ends.
    """
    if not progress_enabled(setting):
        return items
    try:
        from tqdm.auto import tqdm
    except ImportError:  # tqdm is optional: no bar
        return items
    if total is None and hasattr(items, "__len__"):
        total = len(items)  # type: ignore[arg-type]
    tqdm_kwargs.setdefault("delay", DELAY_S)
    tqdm_kwargs.setdefault("leave", False)
    return _closing(tqdm(items, total=total, desc=desc or None, unit=unit, **tqdm_kwargs))


def _closing(bar: Any) -> Iterator[Any]:
    try:
        yield from bar
    finally:
        bar.close()
