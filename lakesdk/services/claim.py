"""Taking a pending table-service instant (compaction, clean) for this process.

Several processes may run the same table service: two writers compacting inline, two
cleaners, a service loop beside writers.  Each first finishes the pending instants it finds;
two of them must not execute one instant at once (a compaction would take the other's base
files for leftovers of a failed attempt and delete them; a clean's second commit of the
same instant fails).  So an instant is claimed under the table lock: requested -> inflight,
or an inflight one whose executor is gone (its heartbeat expired), with this process's
heartbeat beating until it completes; a claim of an instant another live process holds is
refused.

A claim is fenced.  An executor that stalls (a long pause, a suspended machine) for longer
than its heartbeat's expiry is taken for gone, and another process claims the instant and
executes it again, deleting what the first attempt wrote.  If the stalled one then woke up
and committed, its commit would name files the other deleted, or complete the instant under
the other's feet.  So each claim writes a record naming its owner (a random token), under
the table lock, to ``.hoodie/.aux/lakesdk/claims/<instant>`` (Hudi and the ``hudi`` reader
ignore ``.aux``), and the commit point (:meth:`InstantTransaction.commit
<lakesdk.services.transaction.InstantTransaction.commit>`, under the same lock) refuses to
complete the instant unless the record still names this process's claim: it raises the
service's conflict error (:class:`~lakesdk.exceptions.CompactionConflictError`,
:class:`~lakesdk.exceptions.ClusteringConflictError` with ``held_elsewhere``,
:class:`~lakesdk.exceptions.CleanConflictError`) and leaves the heartbeat file and the
instant to the new owner.  A record outlives its instant's completion until the next
cleanup of stale heartbeats removes it."""

from __future__ import annotations

import json
import os
import socket
import time
import uuid
from typing import TYPE_CHECKING, Any, Callable

from lakesdk.commit.context import context_of
from lakesdk.concurrency.heartbeat import Heartbeat, heartbeat_path, is_expired
from lakesdk.concurrency.instants import holding
from lakesdk.exceptions import (
    CleanConflictError,
    ClusteringConflictError,
    CompactionConflictError,
    CorruptTimelineError,
    WriteConflictError,
)
from lakesdk.format.instant import Instant
from lakesdk.storage import Storage

if TYPE_CHECKING:
    from lakesdk.commit.context import TableContext

__all__ = ["running_elsewhere", "claim", "CLAIMS_DIR", "claim_owner", "taken_over"]

CLAIMS_DIR = ".hoodie/.aux/lakesdk/claims"


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
            owner = uuid.uuid4().hex
            record = {"owner": owner, "action": action, "writer": f"{socket.gethostname()}:{os.getpid()}",
                      "claimed_ms": int(time.time() * 1000)}
            table.storage.write(f"{CLAIMS_DIR}/{instant}", json.dumps(record).encode())
            heartbeat = Heartbeat(table.storage, instant, o.heartbeat_interval_s, o.heartbeat_misses,
                                  owner=owner).start()
            try:
                if then is not None:
                    then(inst)   # type: ignore[arg-type]
            except BaseException:
                heartbeat.stop()
                raise
    if taken:
        raise busy(o.heartbeat_interval_s * o.heartbeat_misses)
    return inst, heartbeat   # type: ignore[return-value]


def claim_owner(storage: Storage, instant: str) -> str | None:
    """The owner token of the latest claim of ``instant`` (None when no record is left, or
    it cannot be read)."""
    try:
        return str(json.loads(storage.read(f"{CLAIMS_DIR}/{instant}"))["owner"])
    except (FileNotFoundError, ValueError, KeyError, TypeError):
        return None


def taken_over(table: "TableContext", inst: Instant, owner: str) -> WriteConflictError | None:
    """The conflict error that refuses the commit of ``inst`` by the claim ``owner`` when the
    instant's claim record names another owner (or none is left), else None: another
    process took the instant over after this one's heartbeat expired (see module doc)."""
    table = context_of(table)
    if claim_owner(table.storage, inst.requested) == owner:
        return None
    msg = (f"{inst.action} {inst.requested} of {table.name!r} was taken over by another process while this one "
           "stalled (its heartbeat expired): its commit is refused and the instant, its heartbeat and the files "
           "the other process writes are left to that process")
    if inst.action == "clustering":
        return ClusteringConflictError(msg, instant=inst.requested, held_elsewhere=True)
    if inst.action == "clean":
        return CleanConflictError(msg, instant=inst.requested)
    if inst.action == "compaction":
        return CompactionConflictError(msg, instant=inst.requested)
    return WriteConflictError(msg, other_instant=inst.requested)
