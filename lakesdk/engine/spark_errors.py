"""Errors of lakesdk's Spark tasks: raised in a task with what it was doing, and re-typed on the
driver (a lakesdk error keeps its class; any other becomes one
:class:`~lakesdk.exceptions.WriteError` naming it)."""

from __future__ import annotations

import re
from typing import Any, Callable

from lakesdk import exceptions as exc_mod
from lakesdk.exceptions import LakeError

__all__ = ["reraise_task_error"]

_ERR_RE = re.compile(r"lakesdk\.exceptions\.(\w+): (.*?)(?:\n|$)")


def reraise_task_error(err: BaseException) -> None:
    """Turn a Spark-wrapped lakesdk error raised inside a task back into its typed error; any
    other error of a Python task (an ``ArrowInvalid``, an ``OSError``, ...) becomes one
    :class:`~lakesdk.exceptions.WriteError` naming the original error (the Spark error, with
    its traces, stays the ``__cause__``)."""
    text = str(err)
    m = _ERR_RE.search(text) or re.search(r"\b(\w+Error): (.*?)(?:\n|$)", text)
    if m and hasattr(exc_mod, m.group(1)):
        cls = getattr(exc_mod, m.group(1))
        if isinstance(cls, type) and issubclass(cls, LakeError):
            try:
                raise cls(m.group(2)) from err
            except TypeError:
                pass
    if type(err).__name__ == "PythonException":   # an error of a Python task, not of Spark itself
        last = [ln for ln in text.splitlines() if re.match(r"^[A-Za-z_][\w.]*: ", ln)]
        what = last[-1].strip() if last else text.strip().splitlines()[-1] if text.strip() else type(err).__name__
        raise exc_mod.WriteError(
            f"a Spark write task failed with {what}; the instant did not complete and the table is unchanged. "
            f"{_worker_python_hint(what)}The error's cause holds the task's full trace") from err


def _worker_python_hint(what: str) -> str:
    """What to do when the workers' Python lacks a module lakesdk's tasks import."""
    if not what.startswith("ModuleNotFoundError"):
        return ""
    import sys
    return ("Spark's Python workers run PYSPARK_PYTHON (python3 when it is not set; a Spark Connect server "
            "reads it from its own environment), which needs lakesdk and its dependencies: set PYSPARK_PYTHON "
            f"(this process runs {sys.executable}) before the session starts, or let lakesdk start it "
            "(lk.get_spark(), or lk.get_spark(remote=\"local[*]\") for Spark Connect), which does. ")


def _guard_task(what: str, fn: Callable[..., Any]) -> Any:
    """Run task code; a non-lakesdk error becomes one WriteError naming ``what`` and the
    original error's type and message (on one line, so the driver can re-type it)."""
    try:
        return fn()
    except LakeError:
        raise
    except Exception as e:  # noqa: BLE001 - re-typed with its context
        raise _task_failure(what, e) from e


def _task_failure(what: str, e: BaseException) -> LakeError:
    msg = " ".join(str(e).split())
    if isinstance(e, FileNotFoundError):   # re-typed on the driver, which tells whether a clean deleted it
        return exc_mod.DataFileMissingError(
            f"the Spark task for {what} found a file missing ({type(e).__module__}.{type(e).__qualname__}: "
            f"{msg}); the instant did not complete and the table is unchanged", path=e.filename)
    return exc_mod.WriteError(
        f"the Spark task for {what} failed with {type(e).__module__}.{type(e).__qualname__}: {msg}; "
        "the instant did not complete and the table is unchanged")
