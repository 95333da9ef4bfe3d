"""Optimistic concurrency: conflict resolution at commit time, under the table lock.

A write that started at requested time ``T`` conflicts with every instant that completed
after ``T`` (or is a pending table service) and touched one of the same file groups:
copy-on-write rewrites of the same file group would lose one side's records.  Merge-on-read
writes that only append log blocks do not conflict with each other (non-blocking
concurrency: readers and compaction merge the blocks by ordering value).

Compactions, pending or completed, are never candidates (as in Hudi for table version 8):
file slices are cut by completion time, so a log appended by a write that completes after
a compaction was scheduled belongs to the next slice and is neither lost nor merged twice.
"""

from __future__ import annotations

from dataclasses import dataclass

from lakesdk.exceptions import WriteConflictError
from lakesdk.format.commit_metadata import CommitMetadata, WriteStat
from lakesdk.format.instant import WRITE_ACTIONS, Instant
from lakesdk.format.timeline import Timeline, TimelineStore

__all__ = ["FileGroupConflict", "find_conflicts", "raise_on_conflict"]


@dataclass(frozen=True)
class FileGroupConflict:
    other: Instant
    file_groups: tuple[tuple[str, str], ...]     # (partition, file id)

    @property
    def partitions(self) -> list[str]:
        return sorted({p for p, _ in self.file_groups})


def _is_log_only(stats: list[WriteStat]) -> bool:
    return bool(stats) and all(s.logFiles for s in stats)


def _touched(stats: list[WriteStat], md: CommitMetadata | None = None) -> set[tuple[str, str]]:
    out = {(s.partitionPath or "", s.fileId) for s in stats if s.fileId}
    if md is not None and md.partition_to_replace_file_ids:
        out |= {(p, f) for p, fids in md.partition_to_replace_file_ids.items() for f in fids}
    return out


def find_conflicts(store: TimelineStore, timeline: Timeline, me: Instant, my_stats: list[WriteStat],
                   replaced: dict[str, list[str]] | None = None, *,
                   seen: frozenset[tuple[str, str]] | None = None) -> list[FileGroupConflict]:
    """Instants that completed after ``me`` started (more precisely: that were not completed
    in the timeline ``seen`` the write planned against), or pending table services, that
    touched the same file groups."""
    mine = _touched(my_stats)
    if replaced:
        mine |= {(p, f) for p, fids in replaced.items() for f in fids}
    if not mine:
        return []
    my_log_only = _is_log_only(my_stats) and not replaced
    out = []
    for inst in timeline:
        if inst.requested == me.requested or inst.action == "compaction":
            continue   # compaction: ordered by completion time, see the module doc
        if inst.is_completed and inst.completed_action in WRITE_ACTIONS:
            if seen is not None and (inst.requested, inst.action) in seen:
                continue   # the write planned against it
            if seen is None and (inst.completed or inst.requested) <= me.requested:
                continue   # completed before this write started
            md = store.commit_metadata(inst)
            if my_log_only and _is_log_only(md.write_stats) and not md.partition_to_replace_file_ids:
                continue   # two log appends: non-blocking
            overlap = mine & _touched(md.write_stats, md)
        else:
            continue
        if overlap:
            out.append(FileGroupConflict(inst, tuple(sorted(overlap))))
    return out


def raise_on_conflict(table_name: str, me: Instant, conflicts: list[FileGroupConflict]) -> None:
    if not conflicts:
        return
    c = conflicts[0]
    groups = ", ".join(f"{p or '<root>'}/{f}" for p, f in c.file_groups[:5])
    more = f" and {len(c.file_groups) - 5} more" if len(c.file_groups) > 5 else ""
    err = WriteConflictError(
        f"write {me.requested} to {table_name!r} conflicts with {c.other.action} {c.other.requested} "
        f"(completed {c.other.completed or 'pending'}), which changed the same file groups first: {groups}{more} "
        f"in partitions {c.partitions}. This write was rolled back and the table holds the other write; "
        "re-read and retry it (t.upsert(...) again applies it on top).")
    err.other_instant = c.other.requested  # type: ignore[attr-defined]
    err.file_groups = c.file_groups        # type: ignore[attr-defined]
    err.partitions = c.partitions          # type: ignore[attr-defined]
    raise err
