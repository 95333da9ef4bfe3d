"""Fault injection for crash and failure tests (off unless the environment asks for it).

* ``LAKESDK_CRASH_AT=<point>``: the process reaching ``<point>`` sends SIGKILL to
  ``LAKESDK_CRASH_PID`` (default: itself), so a Spark task can kill its driver.  Points of
  the write protocol: ``after_requested``, ``after_markers``, ``mid_data_file``,
  ``after_data``, ``during_commit``, ``after_commit``.
* ``LAKESDK_FAIL_FIRST_ATTEMPT=1``: a write task's first attempt writes half of its data
  file and then fails, so Spark retries it (needs task retries, e.g. ``local[2,4]``).
"""

from __future__ import annotations

import os
import signal

__all__ = ["crash_point", "armed", "fail_first_attempt", "record"]


def armed(point: str) -> bool:
    return os.environ.get("LAKESDK_CRASH_AT") == point


def crash_point(point: str) -> None:
    """SIGKILL the target process if the environment armed ``point``."""
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
