"""Fault injection hooks for crash tests; see :mod:`lakesdk._faults`."""

from lakesdk._faults import armed, crash_point, fail_first_attempt

__all__ = ["armed", "crash_point", "fail_first_attempt"]
