"""Fault injection for crash and failure tests (off unless the environment asks for it).

Inert by default: every hook below returns without doing anything unless the test (or the
tutorial that demonstrates a crash) sets its environment switch for the process, and no
code in lakesdk sets one (tests/project/test_packaging.py checks both). ``LAKESDK_CRASH_AT`` must name
the exact point; ``LAKESDK_CRASH_PID`` alone does nothing. :func:`hold_at` acts only in the
process that calls it.

* ``LAKESDK_CRASH_AT=<point>``: the process reaching ``<point>`` sends SIGKILL to
  ``LAKESDK_CRASH_PID`` (default: itself), so a Spark task can kill its driver.  Points of
  the write protocol: ``after_requested``, ``after_markers``, ``mid_data_file``,
  ``after_data``, ``during_commit``, ``after_commit``.
* ``LAKESDK_FAIL_FIRST_ATTEMPT=1``: a write task's first attempt writes half of its data
  file and then fails, so Spark retries it (needs task retries, e.g. ``local[2,4]``).
* :func:`hold_at`: the writers of this process that reach a point wait there until the hold
  is released (races on cue in tests and tutorials: two writers with their data written,
  both about to commit).
"""

from __future__ import annotations

import os
import signal
import threading
from typing import Any

__all__ = ["crash_point", "armed", "fail_first_attempt", "record", "hold_at", "Hold"]


class Hold:
    """Writers (threads of this process) reaching ``point`` wait until :meth:`release`."""

    def __init__(self, point: str) -> None:
        self.point = point
        self.waiting = 0
        self._cond = threading.Condition()
        self._released = False

    def wait_for(self, writers: int, timeout: float = 120.0) -> bool:
        """Wait until ``writers`` writers wait at the point; False on timeout."""
        with self._cond:
            return self._cond.wait_for(lambda: self.waiting >= writers, timeout)

    def release(self) -> None:
        with self._cond:
            self._released = True
            self._cond.notify_all()
        if _HOLDS.get(self.point) is self:
            del _HOLDS[self.point]

    def _arrive(self) -> None:
        with self._cond:
            self.waiting += 1
            self._cond.notify_all()
            self._cond.wait_for(lambda: self._released)

    def __enter__(self) -> "Hold":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.release()

    def __repr__(self) -> str:
        return f"Hold({self.point!r}, waiting={self.waiting}, released={self._released})"


_HOLDS: dict[str, Hold] = {}


def hold_at(point: str) -> Hold:
    """Hold the writers of this process at ``point`` (a point of :func:`crash_point`, e.g.
    ``"after_data"``: the instant is open and the data written, the commit comes next) until
    the returned :class:`Hold` is released (or its ``with`` block ends)."""
    h = _HOLDS[point] = Hold(point)
    return h


def armed(point: str) -> bool:
    return os.environ.get("LAKESDK_CRASH_AT") == point


def crash_point(point: str) -> None:
    """Wait while a :func:`hold_at` holds ``point``; SIGKILL the target process if the
    environment armed ``point``."""
    held = _HOLDS.get(point)
    if held is not None:
        held._arrive()
    if armed(point):
        pid = int(os.environ.get("LAKESDK_CRASH_PID") or os.getpid())
        os.kill(pid, signal.SIGKILL)
        if pid != os.getpid():  # a task killing its driver: stop here too
            os.kill(os.getpid(), signal.SIGKILL)


def fail_first_attempt() -> bool:
    return os.environ.get("LAKESDK_FAIL_FIRST_ATTEMPT") == "1"


def record(event: str) -> None:
    """Append ``event`` to the file named by ``LAKESDK_FAULT_LOG`` (so tests can prove that
    an injected fault really happened)."""
    path = os.environ.get("LAKESDK_FAULT_LOG")
    if path:
        with open(path, "a") as f:
            f.write(event + "\n")
