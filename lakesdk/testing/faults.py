"""Fault injection hooks for crash tests; see :mod:`lakesdk._faults`."""

from lakesdk._faults import Hold, armed, crash_point, fail_first_attempt, hold_at

__all__ = ["armed", "crash_point", "fail_first_attempt", "hold_at", "Hold"]
