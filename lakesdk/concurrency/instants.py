"""New instants: a fresh instant time, later than every instant on the timeline, taken
under the table lock.

Readers take a base file older than the start of the active timeline as committed by an
archived commit (Hudi's rule, which the ``hudi`` reader follows too).  An instant whose time
is earlier than an archived commit would start the active timeline before that commit and hide
its files.  So a new instant's time is taken and its requested file created under the table
lock (with several writers), after every instant of the timeline as read under that lock; and
archival plans and runs under the same lock, where it sees every such instant as pending.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Callable, Iterator

from lakesdk.format.instant import Instant
from lakesdk.format.timeline import Timeline
from lakesdk.timeline.store import TimelineStore

__all__ = ["holding", "create_instant", "create_planned_instant"]


@contextmanager
def holding(lock: Any) -> Iterator[None]:
    """Hold ``lock`` (a :class:`~lakesdk.concurrency.locks.LockProvider`) for the block; a
    single writer has none (None).  A caller that holds it already (a clustering that rolls
    itself back at its commit) keeps holding it: nothing is acquired or released."""
    if lock is None or lock.held_by_this_thread():
        yield
        return
    lock.acquire()
    try:
        yield
    finally:
        lock.release()


def create_instant(store: TimelineStore, lock: Any, action: str, data: bytes = b"", *,
                   claim: Callable[[str], Callable[[], None] | None] | None = None,
                   seen: list[Timeline] | None = None, timeline: Timeline | None = None) -> Instant:
    """Create a requested ``action`` instant holding ``data`` at a time no other instant
    holds, later than every time on the timeline; under ``lock`` when given.  ``claim``: see
    :meth:`~lakesdk.timeline.store.TimelineStore.create_new`; ``seen`` gets the timeline read
    under the lock (without the new instant).  A single writer (no ``lock``) that read the
    timeline just before passes it as ``timeline``: its time is taken after that one's
    instants without reading the timeline again (no other writer creates instants then)."""
    with holding(lock):
        if lock is not None or timeline is None:
            timeline = store.load()
        if seen is not None:
            seen.append(timeline)
        return store.create_new(action, data, after=timeline.max_time(), claim=claim)


def create_planned_instant(store: TimelineStore, lock: Any, action: str,
                           plan: Callable[[str], bytes | None]) -> Instant | None:
    """As :func:`create_instant`, with the requested file's bytes made by ``plan(time)`` for
    the time taken, under the lock (None when ``plan`` finds nothing to do)."""
    with holding(lock):
        return store.create_new(action, after=store.load().max_time(), plan=plan)
