"""Instants that left the active timeline between two reads of it, and what a writer can tell
from that.

A write reads the timeline (its snapshot), plans, creates its instant under the table lock
(reading the timeline again) and checks, at its commit, the writes it did not plan against.
Archival's pending-write bound keeps active every commit that completes after the write's
instant was created, not the ones that completed between the snapshot and the instant: those
may be archived before the write commits, or even before it creates its instant.  Archival
moves the oldest completed instants first, so when one that completed after the snapshot was
archived, so were the snapshot's own completed instants (savepointed ones aside), or it was
pending in the snapshot.  Either leaves a trace in the later read, which
:func:`unseen_may_be_archived` looks for; a rollback that names the instant explains it
instead (:func:`rolled_back`).
"""

from __future__ import annotations

from lakesdk.format.instant import Instant
from lakesdk.format.timeline import Timeline
from lakesdk.timeline.store import TimelineStore

__all__ = ["ensure_read_checkable", "rollbacks_of_read", "rolled_back", "unseen_may_be_archived"]


def rolled_back(store: TimelineStore, timeline: Timeline, names: set[str], *,
                known: frozenset[tuple[str, str]] = frozenset(), pending: bool = False) -> dict[str, Instant]:
    """The instants of ``names`` that a completed rollback of ``timeline`` undid (with
    ``pending``, or that a rollback in progress there undoes: its plan names them), each with
    that rollback; rollbacks that ``known`` holds as (requested, action) are left out."""
    from lakesdk.exceptions import CorruptTimelineError
    from lakesdk.format.rollback_metadata import RollbackMetadataData, RollbackPlanData
    out: dict[str, Instant] = {}
    if not names:
        return out
    first = min(names)
    for rb in timeline.filter(actions=["rollback"]):
        if rb.requested <= first or (rb.requested, rb.action) in known or not (pending or rb.is_completed):
            continue
        try:
            undone = (store.metadata(rb, RollbackMetadataData).undone if rb.is_completed
                      else {store.plan(rb, RollbackPlanData).instant}) & names
        except (FileNotFoundError, CorruptTimelineError):
            continue
        out.update((u, rb) for u in undone)
    return out


def rollbacks_of_read(store: TimelineStore, now: Timeline, read: frozenset[tuple[str, str]]) -> dict[str, Instant]:
    """The completed instants a write read (``read``, as (requested, action)) that a rollback of
    ``now`` the write did not see undid or is undoing (its plan written), each with that
    rollback: the write's files may hold their rows."""
    return rolled_back(store, now, {r for r, a in read if a != "rollback"}, known=read, pending=True)


def unseen_may_be_archived(store: TimelineStore, before: Timeline, now: Timeline) -> bool:
    """Whether an instant that completed after ``before`` was read may be missing from the
    later read ``now`` because archival moved it (see the module doc).  Such an instant was
    pending in ``before``, and is gone from ``now`` with no rollback there undoing it; or it
    was created after ``before`` was read, later than all of ``before``'s instants, so that
    archival, oldest first, took every completed instant of ``before`` it would take (all but
    savepointed commits: none is active in ``now`` any more), or ``before`` held none and
    ``now`` holds completed instants ``before`` did not, other than the rollbacks of instants
    pending in ``before`` (a dead writer's instant rolled back: no row ``before`` saw changes,
    and archival keeps the newest commits, which would be unknown to ``before``)."""
    active = {i.requested for i in now.instants}
    pending = {i.requested for i in before.pending}
    undone = rolled_back(store, now, pending)
    gone = {p for p in pending if p not in active}
    if gone - set(undone):
        return True
    saved = {i.requested for i in before.instants if i.action == "savepoint"}
    takeable = [i.requested for i in before.completed if i.action != "savepoint" and i.requested not in saved]
    if takeable:
        return not any(r in active for r in takeable)
    known = {i.requested for i in before.instants} | {rb.requested for rb in undone.values()}
    return any(i.requested not in known for i in now.completed)


def ensure_read_checkable(name: str, store: TimelineStore, read_at: Timeline, at_begin: Timeline,
                          operation: str) -> None:
    """A write computed from rows read after ``read_at`` (a merge, a delete by predicate) is
    checked at commit against the writes that completed since; when one of them may have been
    archived before the write's instant existed (:func:`unseen_may_be_archived`), nothing could
    check it, and the write stops with a conflict before writing anything."""
    from lakesdk.exceptions import WriteConflictError
    if unseen_may_be_archived(store, read_at, at_begin):
        raise WriteConflictError(
            f"{operation} into {name!r}: the table's timeline was archived while the rows it was computed from were "
            "read, so the writes that changed them since cannot be checked; nothing was written. Run it again.")
