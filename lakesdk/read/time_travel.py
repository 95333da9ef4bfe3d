"""The time-travel guard: a read as of a moment must not miss files a clean deleted
(Hudi's ``TimelineUtils.validateTimestampAsOf``), also once archival moved cleans and commits
into the timeline history."""

from __future__ import annotations

from typing import TYPE_CHECKING

from lakesdk.commit.context import context_of
from lakesdk.exceptions import TimeTravelError
from lakesdk.format.clean_metadata import CleanMetadataData
from lakesdk.format.instant import WRITE_ACTIONS
from lakesdk.format.timeline import Timeline
from lakesdk.timeline.history import LSMTimeline
from lakesdk.timeline.store import TimelineStore

if TYPE_CHECKING:
    from lakesdk.commit.context import TableContext

__all__ = ["check_time_travel"]


def check_time_travel(table: "TableContext", moment: str, *, store: TimelineStore | None = None,
                      timeline: Timeline | None = None) -> None:
    """Raise when a time-travel read as of ``moment`` may miss files a clean deleted
    (Hudi's ``TimelineUtils.validateTimestampAsOf``): ``moment`` must not be before the
    earliest commit to retain of any clean (Hudi looks at the last clean only; a later
    KEEP_LATEST_FILE_VERSIONS clean, which records none, does not make older moments readable
    again); a savepointed instant is always readable.  A clean without an earliest commit to
    retain refuses the moments before it whose read reaches archived commits (before the first
    active commit, or after an active commit archived ones follow): the file-system view checks
    the files of active commits against their write stats
    (:meth:`lakesdk.read.view.FileSystemView.verify`), not those of archived ones.

    Cleans archived into the timeline history count too (a moment before the active
    timeline reads them from there): Hudi's archiver keeps the latest cleans active, lakesdk's
    archives a clean with the commits before it, and the guard must not leave with it."""
    table = context_of(table)
    store = store or table.store
    timeline = timeline if timeline is not None else store.load()
    sps = {i.requested for i in timeline.instants if i.action == "savepoint" and i.is_completed}
    if moment in sps:
        return
    cleans = [(c.requested, store.metadata(c, CleanMetadataData))
              for c in timeline.instants if c.action == "clean" and c.is_completed]
    # the start of the active timeline, savepointed commits aside (archival beyond a savepoint
    # keeps them active while it archives the commits after them)
    first = next((c.requested for c in timeline.commits if c.requested not in sps), None)
    lsm = LSMTimeline(table.storage, table.config) if table.config.layout_version >= 2 else None
    archived = lsm.instants() if lsm is not None and lsm.manifest() else []
    # the read reaches archived commits: the moment is before the active timeline, or after an
    # active commit that archival beyond a savepoint kept active while it archived later ones
    # (a hole once that savepoint is gone); the view checks the files of active commits only
    reaches_history = first is None or moment < first or any(
        i.completed_action in WRITE_ACTIONS and first < i.requested <= moment for i in archived)
    if reaches_history and lsm is not None and any(i.action == "clean" for i in archived):
        cleans += [(a.instant.requested, CleanMetadataData.parse(a.metadata or b"")) for a in lsm.load()
                   if a.action == "clean"]
    if not cleans:
        return
    # every clean counts, not the last one alone: a later clean without an earliest commit to
    # retain (KEEP_LATEST_FILE_VERSIONS) does not bring back what an earlier one deleted
    with_ectr = [(md.earliest_commit_to_retain, c) for c, md in cleans if md.earliest_commit_to_retain]
    if with_ectr:
        ectr, by = max(with_ectr)
        if moment < ectr:
            raise TimeTravelError(
                f"Cleaner cleaned up the timestamp of interest: time travel to {moment} is before the earliest "
                f"commit clean {by} retained ({ectr}). Please ensure sufficient commits "
                "are retained with cleaner for Timestamp as of query to work (or savepoint the instant)")
    unbounded = [c for c, md in cleans if not md.earliest_commit_to_retain and moment < c]
    if unbounded and reaches_history:
        if first is None:
            where = f"{moment} is before the active timeline (it holds no commit)"
        elif moment < first:
            where = f"{moment} is before the first active commit {first}"
        else:
            where = f"a read as of {moment} reaches commits archived after the active commit {first}"
        raise TimeTravelError(
            f"Please ensure sufficient commits are retained (uncleaned and un-archived) for timestamp as of query "
            f"to work: {where}, and clean {unbounded[-1]} kept no window of commits "
            "(KEEP_LATEST_FILE_VERSIONS): it may have deleted files that moment needs")
