"""The instant transaction: how every write and every table service commits.

An :class:`InstantTransaction` owns one instant from its creation (or from the moment a
service claims a planned one) to its end::

    txn = InstantTransaction.begin(ctx, "commit", operation="upsert")   requested, heartbeat beating
    txn.start(inflight_bytes)                                           requested -> inflight
    markers = txn.markers()                                             files written under them
    txn.commit(metadata, checks=[...])                                  the commit point
    txn.finish()                                                        markers deleted, heartbeat stopped
  or
    abort(txn)                                                          rollback unless it landed
                                                                        (lakesdk.services.rollback)

The commit point (:meth:`InstantTransaction.commit`) is the same for every action.  With
several writers (optimistic concurrency) it runs under the table lock, as Hudi's
``TransactionManager`` runs every commit of a multi-writer table, table services included:

1. the timeline is read again under the lock, and the instant must still be pending (a
   writer that took this one for dead may have rolled it back);
2. the ``checks`` run on that timeline: the pluggable preconditions of the action (the file
   group and schema conflict checks of a write, a clustering's check that its input did not
   change); a check raises to refuse the commit;
3. Hudi's metadata table, if the table keeps one, gets the delta commit of this instant,
   completed before it (:mod:`lakesdk.services.metadata_writer`), or it is dropped, so that
   no reader lists files from a metadata table this instant would make stale;
4. the lock must still be held (``ensure_held``: a lost lease or ZooKeeper session refuses
   the commit instead of committing blind);
5. the completed file is written, at a completion time later than every time on that
   timeline.

A table service claimed by this process (compaction, clustering, clean) also commits only
while its claim is still its own, after the checks (the claim's fence,
:mod:`lakesdk.services.claim`): a stalled executor whose heartbeat expired may have been
taken over by another process.

A single writer has no lock; steps 1, 2 and 4 are then skipped.  :meth:`abort` rolls the instant
back only when the failure proves it did not land (no completed file), as pyiceberg's
``Transaction`` cleans up only when the commit is known to have failed; it lives beside the
rollback (:func:`lakesdk.services.rollback.abort`), which commits through this module.
"""

from __future__ import annotations

import threading
import time
import uuid
from typing import TYPE_CHECKING, Any, Callable, Sequence

from lakesdk import _faults as faults
from lakesdk.concurrency.instants import create_instant, holding
from lakesdk.exceptions import CorruptTimelineError, WriteConflictError, WriteError
from lakesdk.format.instant import Instant
from lakesdk.format.timeline import InstantClock, Timeline
from lakesdk.services.metadata_writer import sync_metadata_table

if TYPE_CHECKING:
    from lakesdk.commit.context import TableContext

__all__ = ["InstantTransaction", "Check", "committing"]

Check = Callable[[Timeline], None]      # a precondition of a commit, given the timeline read under the lock

_state = threading.local()


def committing() -> Instant | None:
    """The instant whose commit point runs in this thread (None outside one); what tests use
    to prove that every completion goes through :meth:`InstantTransaction.commit`."""
    return getattr(_state, "instant", None)


class InstantTransaction:
    """One instant's life from requested (or claimed) to completed or rolled back (see the
    module doc)."""

    def __init__(self, ctx: "TableContext", instant: Instant, *, operation: str, heartbeat: Any = None,
                 markers: Any = None) -> None:
        self.ctx = ctx
        self.instant = instant
        self.operation = operation
        self.heartbeat = heartbeat
        self._markers = markers
        self.completed: Instant | None = None
        self.at_commit: Timeline | None = None     # the timeline the commit point read under the lock
        self.at_begin: Timeline | None = None      # the timeline read under the lock to create the instant
        #: (step, epoch ms) of the instant's path through the commit protocol, in order
        #: (:data:`lakesdk.concurrency.journal.STEPS`): what the transaction journal records
        self.steps: list[tuple[str, int]] = []

    def step(self, name: str) -> None:
        """Note that the instant reached step ``name`` now."""
        self.steps.append((name, int(time.time() * 1000)))

    # -- opening ---------------------------------------------------------------------------------
    @classmethod
    def begin(cls, ctx: "TableContext", action: str, *, operation: str, plan: bytes = b"",
              heartbeat: bool = True, timeline: Timeline | None = None) -> "InstantTransaction":
        """A new instant of ``action`` holding ``plan``: a time no other instant holds, later
        than every time on the timeline, taken under the table lock
        (:mod:`lakesdk.concurrency.instants`; a single writer passes the ``timeline`` it just
        read instead).  Its heartbeat beats before the requested file
        exists, so no other writer takes it for a dead one."""
        from lakesdk.concurrency.heartbeat import Heartbeat
        ctx.check_writes(action)
        opts = ctx.options
        beats: dict[str, Any] = {}

        def claim(t: str) -> Any:
            hb = beats[t] = Heartbeat(ctx.storage, t, opts.heartbeat_interval_s, opts.heartbeat_misses).start()
            # another instant may hold this time and its heartbeat file: stop beating, leave the file
            return hb.abandon
        try:
            seen: list[Timeline] = []
            instant = create_instant(ctx.store, ctx.lock(), action, plan, claim=claim if heartbeat else None, seen=seen,
                                     timeline=timeline)
        except CorruptTimelineError:
            raise WriteError(f"could not create a requested {action} instant after 50 attempts: is the timeline "
                             "writable?") from None
        txn = cls(ctx, instant, operation=operation, heartbeat=beats.get(instant.requested))
        txn.at_begin = seen[-1] if seen else None
        txn.step("requested")
        return txn

    @classmethod
    def resume(cls, ctx: "TableContext", instant: Instant, *, operation: str, heartbeat: Any = None,
               markers: Any = None) -> "InstantTransaction":
        """A transaction for an instant already on the timeline (a planned table service
        claimed by this process, an instant opened by another process)."""
        ctx.check_writes(instant.action)
        return cls(ctx, instant, operation=operation, heartbeat=heartbeat, markers=markers)

    def start(self, data: bytes = b"") -> Instant:
        """requested -> inflight (nothing when it is inflight already)."""
        if self.instant.state == "requested":
            self.instant = self.ctx.store.transition(self.instant, "inflight", data)
        return self.instant

    def markers(self, *, detector: Any = None) -> Any:
        """The instant's write markers (made on first call; see
        :meth:`~lakesdk.commit.context.TableContext.markers`)."""
        if self._markers is None:
            self._markers = self.ctx.markers(self.instant.requested, detector=detector)
        return self._markers

    # -- the commit point ------------------------------------------------------------------------
    def commit(self, metadata: bytes | Callable[[Timeline | None], bytes], *, checks: Sequence[Check] = (),
               always: bool = False) -> Instant:
        """Complete the instant (see the module doc).  ``metadata``: the completed file's
        bytes, or a function of the timeline read under the lock (None for a single
        writer) that returns them.  The ``checks`` run with several writers; with
        ``always`` for a single writer too."""
        ctx, store = self.ctx, self.ctx.store
        table_lock = ctx.lock()
        inflight = self.instant if self.instant.state == "inflight" else self.instant.to("inflight")
        if table_lock is not None:
            self.step("lock_requested")
        with holding(table_lock):
            now: Timeline | None = None
            if table_lock is not None:
                self.step("lock_acquired")
                from lakesdk.concurrency.conflicts import ensure_still_pending
                now = store.load()
                ensure_still_pending(ctx.name, now, inflight, store)
            elif always and checks:
                now = store.load()
            if now is not None:
                for check in checks:
                    check(now)
                self.step("checked")
            self._ensure_claimed(inflight)
            data = metadata(now) if callable(metadata) else metadata
            if faults.armed("during_commit"):   # leave what a crash inside the completed file's write leaves
                done = inflight.to("completed", InstantClock.next(after=inflight.requested))
                ctx.storage.write(f"{store.path(done)}.{uuid.uuid4().hex}.tmp", data[: len(data) // 2])
                faults.crash_point("during_commit")
            # Hudi's metadata table: its delta commit of this instant completes first, or it is
            # dropped (lakesdk.services.metadata_writer)
            if sync_metadata_table(ctx, inflight, data, now):
                self.step("metadata_table")
            if table_lock is not None:
                _ensure_held(table_lock, ctx.name, inflight)
            _state.instant = inflight
            try:
                self.completed = store.transition(inflight, "completed", data,
                                                  after=now.max_time() if now is not None else None)
            finally:
                _state.instant = None
            self.at_commit = now
        self.step("completed")
        self.instant = self.completed
        return self.completed

    def _ensure_claimed(self, instant: Instant) -> None:
        """A table service this process claimed commits only while the claim is still its own
        (:mod:`lakesdk.services.claim`): when another process took the instant over, the
        commit is refused, and the heartbeat file, now the other's, is left to it."""
        owner = getattr(self.heartbeat, "owner", None)
        if owner is None:
            return
        from lakesdk.services.claim import taken_over
        err = taken_over(self.ctx, instant, owner)
        if err is not None:
            hb, self.heartbeat = self.heartbeat, None
            hb.abandon()
            raise err

    # -- the end -----------------------------------------------------------------------------------
    def finish(self) -> None:
        """After the commit: the markers are deleted and the heartbeat stops."""
        if self._markers is not None:
            self._markers.delete_all()
        if getattr(self.heartbeat, "owner", None) is not None:   # the claim of a completed service
            from lakesdk.services.claim import CLAIMS_DIR
            self.ctx.storage.delete(f"{CLAIMS_DIR}/{self.instant.requested}")
        self.stop_heartbeat()

    def stop_heartbeat(self) -> None:
        hb, self.heartbeat = self.heartbeat, None
        if hb is not None:
            hb.stop()

    def landed(self) -> bool:
        """Whether the instant's completed file exists (the commit point passed, even when
        the caller saw an error after it)."""
        if self.completed is not None:
            return True
        inst = self.instant
        return any("_" in n.split(".")[0] for n in self.ctx.store.all_states(inst.requested, inst.action))

    def __repr__(self) -> str:
        return f"<InstantTransaction {self.instant.requested} {self.instant.action} {self.instant.state} on {self.ctx.name!r}>"


def _ensure_held(lock: Any, table: str, instant: Instant) -> None:
    """A lost lease or ZooKeeper session refuses the commit: committing without the lock
    could complete an instant that conflicts with a commit made meanwhile."""
    if not hasattr(lock, "ensure_held"):
        return
    from lakesdk.concurrency.locks import LockLostError
    try:
        lock.ensure_held()
    except LockLostError as err:
        raise WriteConflictError(
            f"{instant.action} {instant.requested} of {table!r} lost the table lock before its commit ({err}); "
            "it was rolled back: retry it", other_instant=None) from err




