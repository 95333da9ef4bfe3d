"""Instants: one action at one moment on the timeline.

File-name grammar (``T`` = requested instant time, ``C`` = completion time, both
``yyyyMMddHHmmssSSS``; 14-digit ``yyyyMMddHHmmss`` times are still parsed)::

    requested   T.<action>.requested           (commit: T.commit.requested)
    inflight    T.<action>.inflight            (commit: T.inflight)
    savepoint   T.savepoint.inflight (no requested file)
    completed   layout 1 (table v6):  T.<completed action>
                layout 2 (table v8+): T_C.<completed action>

Actions whose completed file carries another name: ``compaction`` completes as
``commit``, ``logcompaction`` as ``deltacommit`` and ``clustering`` as ``replacecommit``.

>>> i = Instant.parse_file_name("20250713011315930_20250713011316231.commit")
>>> i
Instant('commit', 'completed', requested='20250713011315930', completed='20250713011316231')
>>> i.file_name(layout=2)
'20250713011315930_20250713011316231.commit'
>>> Instant.parse_file_name("20250713011316909.inflight").state
'inflight'
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timezone
from typing import Literal

from lakesdk.exceptions import CorruptTimelineError, TimeTravelError

__all__ = [
    "Instant",
    "State",
    "ACTIONS",
    "WRITE_ACTIONS",
    "format_instant_time",
    "parse_instant_time",
    "to_instant_time",
]

State = Literal["requested", "inflight", "completed"]

# action -> name its completed file carries
_COMPLETED_AS = {
    "commit": "commit",
    "deltacommit": "deltacommit",
    "replacecommit": "replacecommit",
    "clustering": "replacecommit",
    "compaction": "commit",
    "logcompaction": "deltacommit",
    "clean": "clean",
    "rollback": "rollback",
    "savepoint": "savepoint",
    "restore": "restore",
    "indexing": "indexing",
    "schemacommit": "schemacommit",
}
ACTIONS = tuple(_COMPLETED_AS)
_COMPLETED_NAMES = frozenset(_COMPLETED_AS.values())
#: Completed actions whose files hold data written by the instant.
WRITE_ACTIONS = frozenset({"commit", "deltacommit", "replacecommit"})

_TIME = r"[0-9]{14}(?:[0-9]{3})?"
_FILE_RE = re.compile(
    rf"^(?P<req>{_TIME})(?:_(?P<done>{_TIME}))?\.(?P<rest>[a-z]+(?:\.(?:requested|inflight))?)\Z"
)
_FMT = "%Y%m%d%H%M%S"


def format_instant_time(dt: datetime) -> str:
    """``datetime`` -> 17-digit instant time (millisecond precision)."""
    return dt.strftime(_FMT) + f"{dt.microsecond // 1000:03d}"


def parse_instant_time(ts: str) -> datetime:
    """Instant time (14 or 17 digits) -> naive ``datetime``.

    >>> parse_instant_time("20250713011315930")
    datetime.datetime(2025, 7, 13, 1, 13, 15, 930000)
    """
    if not re.fullmatch(_TIME, ts):
        raise TimeTravelError(f"{ts!r} is not an instant time: expected yyyyMMddHHmmss[SSS] (14 or 17 digits)")
    try:
        base = datetime.strptime(ts[:14], _FMT)
    except ValueError:
        raise TimeTravelError(f"{ts!r} is not an instant time: {ts[:14]} is not a valid date and time "
                              "(yyyyMMddHHmmss)") from None
    return base.replace(microsecond=int(ts[14:] or 0) * 1000)


def to_instant_time(value: object, *, tz: timezone = UTC) -> str:
    """Normalise a user-given moment to a 17-digit instant time string.

    Accepts an instant time (14/17 digits), an :class:`Instant` (its completion time when
    completed), a ``datetime`` (naive = the table's timeline time zone), an ISO-like string
    such as ``"2026-11-21 10:30:00"``, or a pandas ``Timestamp``.

    >>> to_instant_time("2026-11-21 10:30:00")
    '20261121103000000'
    >>> to_instant_time("20261121103000")
    '20261121103000000'
    """
    if isinstance(value, Instant):
        return value.completed or value.requested
    if hasattr(value, "to_pydatetime"):
        value = value.to_pydatetime()  # pandas.Timestamp
    if isinstance(value, datetime):
        if value.tzinfo is not None:
            value = value.astimezone(tz).replace(tzinfo=None)
        return format_instant_time(value)
    if isinstance(value, int):
        value = str(value)
    if isinstance(value, str):
        s = value.strip()
        if re.fullmatch(_TIME, s):
            return s if len(s) == 17 else s + "000"
        try:
            dt = datetime.fromisoformat(s.replace("Z", "+00:00"))
        except ValueError:
            raise TimeTravelError(
                f"cannot read {value!r} as a moment: expected an instant time (yyyyMMddHHmmssSSS), "
                "a datetime, or an ISO string like '2026-11-21 10:30:00'"
            ) from None
        return to_instant_time(dt, tz=tz)
    raise TimeTravelError(f"cannot read {value!r} ({type(value).__name__}) as a moment in time")


@dataclass(frozen=True, order=False)
class Instant:
    """One instant: ``action`` at ``requested`` time, in ``state``.

    ``completed`` is the completion time (layout 2 names it in the file; on layout 1
    tables it is unknown and ``None``).
    """

    action: str
    state: State
    requested: str
    completed: str | None = None

    # -- parsing and formatting ----------------------------------------------------------
    @classmethod
    def parse_file_name(cls, name: str) -> "Instant":
        inst = cls._parse(name)
        if inst is None:
            raise CorruptTimelineError(
                f"{name!r} is not a timeline file name (expected <time>[_<time>].<action>[.<state>] with a known "
                f"action: {', '.join(ACTIONS)})")
        return inst

    @classmethod
    def _parse(cls, name: str) -> "Instant | None":
        """The instant a timeline file name names, None for any other name (Hudi ignores files
        whose extension is not a timeline extension)."""
        m = _FILE_RE.match(name)
        if not m:
            return None
        req, done, rest = m.group("req"), m.group("done"), m.group("rest")
        if "." in rest or rest == "inflight":
            if done is not None:
                return None  # only completed files carry a completion time
            if rest == "inflight":
                return cls("commit", "inflight", req)
            action, state = rest.split(".")
            if action not in _COMPLETED_AS or (action, state) == ("commit", "inflight"):
                return None
            return cls(action, state, req)  # type: ignore[arg-type]
        if rest not in _COMPLETED_NAMES:
            return None
        return cls(rest, "completed", req, done)

    @staticmethod
    def is_timeline_file(name: str) -> bool:
        return Instant._parse(name) is not None

    def file_name(self, *, layout: int = 2) -> str:
        """The timeline file name of this instant (for the given timeline layout)."""
        if self.state == "completed":
            done = _COMPLETED_AS[self.action]
            if layout >= 2:
                if not self.completed:
                    raise ValueError(f"{self!r}: layout 2 completed instants need a completion time")
                return f"{self.requested}_{self.completed}.{done}"
            return f"{self.requested}.{done}"
        if self.action == "commit" and self.state == "inflight":
            return f"{self.requested}.inflight"
        return f"{self.requested}.{self.action}.{self.state}"

    # -- transitions ---------------------------------------------------------------------
    def to(self, state: State, completed: str | None = None) -> "Instant":
        return replace(self, state=state, completed=completed if state == "completed" else None)

    @property
    def is_completed(self) -> bool:
        return self.state == "completed"

    @property
    def completed_action(self) -> str:
        """The action the completed file is named with (compaction -> commit, ...)."""
        return _COMPLETED_AS[self.action]

    @property
    def order_key(self) -> tuple[str, int]:
        return (self.requested, {"requested": 0, "inflight": 1, "completed": 2}[self.state])

    @property
    def requested_at(self) -> datetime:
        return parse_instant_time(self.requested)

    @property
    def completed_at(self) -> datetime | None:
        return parse_instant_time(self.completed) if self.completed else None

    def __repr__(self) -> str:
        done = f", completed={self.completed!r}" if self.completed else ""
        return f"Instant({self.action!r}, {self.state!r}, requested={self.requested!r}{done})"

    def _repr_html_(self) -> str:
        colour = {"completed": "#2e7d32", "inflight": "#ef6c00", "requested": "#1565c0"}[self.state]
        done = f" &rarr; {self.completed}" if self.completed else ""
        return (f"<span style='font-family:monospace'><b>{self.action}</b> "
                f"<span style='color:{colour}'>{self.state}</span> {self.requested}{done}</span>")
