"""A write's steps through the commit protocol, as the transactions widget teaches them.

The transaction journal records when each write reached each step
(:data:`lakesdk.concurrency.journal.STEPS`): its instant requested, its files written, the
table lock requested and acquired, the conflict check passed, the metadata table updated,
the instant completed.  A write that lost stops at the step it reached, and its end is when
it gave up.  This module turns those times into what the widget draws on each writer's lane
(the time spent waiting for the lock and holding it, a mark per step) and the sequence the
side panel lists.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, NamedTuple, Protocol

from lakesdk.widgets._common import esc, html_table, utc_from_ms

if TYPE_CHECKING:
    from lakesdk.concurrency.journal import TransactionRecord

__all__ = ["Step", "STEP_TEXT", "STEP_SYMBOLS", "JournaledWrite", "steps_of", "lock_phases", "steps_html",
           "step_hover"]

#: what each step means, in the words the side panel and the hover use
STEP_TEXT = {
    "requested": "instant requested: a time later than every instant on the timeline, taken under the lock",
    "files_written": "data files written (invisible to readers until the instant completes)",
    "lock_requested": "table lock requested, to commit",
    "lock_acquired": "table lock acquired: the timeline is read again",
    "checked": "conflict check passed: no write that committed since this one started touched its file groups",
    "metadata_table": "metadata table updated: its delta commit completes first",
    "completed": "instant completed: readers see the write",
    "aborted": "aborted: nothing it wrote stays visible (rolled back)",
}
#: plotly marker symbols per step
STEP_SYMBOLS = {"requested": "circle-open", "files_written": "square-open", "lock_requested": "triangle-right-open",
                "lock_acquired": "triangle-right", "checked": "diamond", "metadata_table": "hexagon-open",
                "completed": "star", "aborted": "circle-x"}


class Step(NamedTuple):
    name: str
    at: datetime
    text: str


class JournaledWrite(Protocol):
    """What the steps are drawn from: a write of the transactions widget
    (:class:`lakesdk.widgets.transactions.WriteSpan`), with its journal record if any."""

    @property
    def instant(self) -> str: ...
    @property
    def outcome(self) -> str: ...
    @property
    def end(self) -> datetime: ...
    @property
    def record(self) -> TransactionRecord | None: ...


def steps_of(w: JournaledWrite) -> list[Step]:
    """The steps the journal recorded for ``w``, in order, with an ``aborted`` step at its
    end when it lost or failed after the steps it reached (none for writes the journal
    does not know, or records written before steps were journaled)."""
    rec = w.record
    if rec is None or not rec.steps:
        return []
    out = [Step(name, utc_from_ms(ms), STEP_TEXT.get(name, name)) for name, ms in rec.steps]
    if w.outcome not in ("committed", "inflight"):
        reached = out[-1].name
        why = {"lock_acquired": "the conflict check under the lock failed",
               "requested": "stopped while writing its files",
               "files_written": "stopped before the lock"}.get(reached, f"stopped after {reached.replace('_', ' ')}")
        out.append(Step("aborted", max(w.end, out[-1].at), f"{why}: {STEP_TEXT['aborted']}"))
    return out


def lock_phases(w: JournaledWrite) -> list[tuple[str, datetime, datetime]]:
    """``("waiting for the lock", start, end)`` and ``("holding the lock", start, end)`` of a
    journaled write that reached the lock."""
    at = {s.name: s.at for s in steps_of(w)}
    if "lock_requested" not in at:
        return []
    acquired = at.get("lock_acquired")
    out = [("waiting for the lock", at["lock_requested"], acquired or at.get("aborted", w.end))]
    if acquired is not None:
        out.append(("holding the lock", acquired, at.get("completed") or at.get("aborted") or w.end))
    return out


def steps_html(w: JournaledWrite) -> str:
    """The side panel's sequence: each step with its time after the instant was requested."""
    steps = steps_of(w)
    if not steps:
        return ""
    t0 = steps[0].at
    rows = [(f"+{(s.at - t0).total_seconds() * 1000:.0f} ms", s.name.replace("_", " "), s.text) for s in steps]
    return (f"<div style='margin-top:6px'><b>steps</b> ({len(steps)})</div>"
            + html_table(["after", "step", "what happened"], rows, wrap=(2,)))


def step_hover(w: JournaledWrite, s: Step) -> str:
    t0 = steps_of(w)[0].at
    return (f"<b>{esc(s.name.replace('_', ' '))}</b> {esc(w.instant)} "
            f"(+{(s.at - t0).total_seconds() * 1000:.0f} ms)<br>{esc(s.text)}")
