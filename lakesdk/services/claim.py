"""Taking a pending table-service instant (compaction, clean) for this process.

Several processes may run the same table service: two writers compacting inline, two
cleaners, a service loop beside writers.  Each first finishes the pending instants it finds;
two of them must not execute one instant at once (a compaction would take the other's base
files for leftovers of a failed attempt and delete them; a clean's second commit of the
same instant fails).  So an instant is claimed under the table lock: requested -> inflight,
or an inflight one whose executor is gone (its heartbeat expired), with this process's
heartbeat beating until it completes; a claim of an instant another live process holds is
refused."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from lakesdk.commit.context import context_of
from lakesdk.concurrency.heartbeat import Heartbeat, heartbeat_path, is_expired
from lakesdk.concurrency.instants import holding
from lakesdk.exceptions import CorruptTimelineError
from lakesdk.format.instant import Instant

if TYPE_CHECKING:
    from lakesdk.commit.context import TableContext

__all__ = ["running_elsewhere", "claim"]


def running_elsewhere(table: "TableContext", inst: Instant) -> bool:
    """An inflight table-service instant (compaction, clustering, clean) whose heartbeat is
    fresh is being executed by a live process."""
    table = context_of(table)
    o = table.options
    return inst.state == "inflight" and table.storage.exists(heartbeat_path(inst.requested)) and \
        not is_expired(table.storage, inst.requested, o.heartbeat_interval_s, o.heartbeat_misses)


def claim(table: "TableContext", action: str, instant: str,
          busy: Callable[[float], Exception], *, then: Callable[[Instant], Any] | None = None) -> tuple[Instant, Heartbeat]:
    """Take the ``action`` instant ``instant`` for this process (see module doc).  Raises
    ``busy(seconds until a gone executor's heartbeat expires)`` when another process holds it
    (or completed it).  ``then(instant)`` runs under the lock once the claim holds."""
    table = context_of(table)
    o = table.options
    store = table.store
    heartbeat = None
    with holding(table.lock()):
        inst = next((i for i in store.load() if i.requested == instant and i.action == action), None)
        taken = inst is None or inst.is_completed or running_elsewhere(table, inst)
        if not taken and inst.state == "requested":   # type: ignore[union-attr]
            try:
                inst = store.transition(inst, "inflight")   # type: ignore[arg-type]
            except CorruptTimelineError:   # a process without the lock made it inflight first
                taken = True
        if not taken:
            heartbeat = Heartbeat(table.storage, instant, o.heartbeat_interval_s, o.heartbeat_misses).start()
            try:
                if then is not None:
                    then(inst)   # type: ignore[arg-type]
            except BaseException:
                heartbeat.stop()
                raise
    if taken:
        raise busy(o.heartbeat_interval_s * o.heartbeat_misses)
    return inst, heartbeat   # type: ignore[return-value]
