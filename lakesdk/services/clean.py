"""Clean: delete file versions that no retained reader can need any more.

Plan -> requested instant -> inflight -> delete -> completed::

    T.clean.requested   HoodieCleanerPlan     (policy, earliest instant to retain, full paths)
    T.clean.inflight    (empty)
    T_C.clean           HoodieCleanMetadata   (file names deleted per partition)

Policies (``hoodie.cleaner.policy``):

* ``KEEP_LATEST_COMMITS`` (default, ``retain_commits`` = ``hoodie.cleaner.commits.retained``,
  10): the earliest commit to retain (ECTR) is the ``retain_commits``-th newest completed
  commit (never later than the last completed commit before the earliest pending write).
  Per file group the latest slice is kept, and so is the latest slice whose base instant is
  before the ECTR (it serves time travel to the ECTR and later); older slices (base file
  and their log files) are deleted.  With fewer completed commits than ``retain_commits``
  nothing at all is cleaned.
* ``KEEP_LATEST_BY_HOURS`` (``retain_hours``, 24): as above, with the ECTR being the first
  completed commit requested in the last ``retain_hours`` hours.
* ``KEEP_LATEST_FILE_VERSIONS`` (``retain_versions``, 3): keep the newest N slices of each
  file group (N-1 when a compaction of the group is pending, the pending one counting).

Always: files named in a savepoint are never deleted (the whole slice stays); slices that
a pending compaction reads are kept; file groups replaced by a replacecommit
(insert_overwrite, clustering) are deleted once the replacecommit is before the ECTR (with
``KEEP_LATEST_FILE_VERSIONS``: always).  With a previous clean, only partitions written by
commits between its ECTR and the new one are looked at (incremental cleaning), unless a
savepoint that the previous clean saw has since been deleted.

The rules follow ``CleanPlanner``/``CleanerUtils`` of Apache Hudi (see
``shared/spec/semantics/table-services.md`` section 1).
"""

from __future__ import annotations

import logging
import posixpath
import time
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Callable, Iterable, Literal, overload

from lakesdk._display import human_bytes as _human
from lakesdk._progress import progress as show_progress
from lakesdk.commit.context import context_of
from lakesdk.exceptions import CleanConflictError, InstantNotFoundError
from lakesdk.format.clean_metadata import CleanerPlanData, CleanMetadataData
from lakesdk.format.file_group import FileGroup, FileSlice
from lakesdk.format.instant import WRITE_ACTIONS, Instant, format_instant_time
from lakesdk.format.savepoint_metadata import SavepointMetadataData
from lakesdk.format.timeline import Timeline
from lakesdk.timeline.store import TimelineStore

if TYPE_CHECKING:
    import pandas as pd

    from lakesdk.commit.context import TableContext

__all__ = ["CleanPolicy", "CleanFile", "CleanPlan", "CleanResult", "earliest_commit_to_retain",
           "slices_to_clean", "replaced_group_cleanable", "partitions_to_clean", "needs_cleaning",
           "plan_clean", "schedule_clean", "execute_clean", "clean", "clean_after_write",
           "savepointed_files", "last_clean"]

log = logging.getLogger(__name__)

CleanPolicy = Literal["KEEP_LATEST_COMMITS", "KEEP_LATEST_FILE_VERSIONS", "KEEP_LATEST_BY_HOURS"]
#: the policy names of the API (lower case, as every option value; Hudi's names are taken too)
CleanPolicyName = Literal["keep_latest_commits", "keep_latest_file_versions", "keep_latest_by_hours"]
COMMITS: CleanPolicy = "KEEP_LATEST_COMMITS"
FILE_VERSIONS: CleanPolicy = "KEEP_LATEST_FILE_VERSIONS"
BY_HOURS: CleanPolicy = "KEEP_LATEST_BY_HOURS"
_POLICIES = {"keep_latest_commits": COMMITS, "commits": COMMITS,
             "keep_latest_file_versions": FILE_VERSIONS, "file_versions": FILE_VERSIONS,
             "keep_latest_by_hours": BY_HOURS, "hours": BY_HOURS}
#: pending actions that write data (they bound the ECTR and are protected)
PENDING_WRITE_ACTIONS = frozenset({"commit", "deltacommit", "replacecommit", "compaction", "clustering",
                                   "logcompaction"})


def _policy(value: str) -> CleanPolicy:
    p = _POLICIES.get(str(value).lower())
    if p is None:
        from lakesdk.exceptions import OptionsError
        raise OptionsError(f"unknown clean policy {value!r} (hoodie.cleaner.policy): expected one of "
                           "'keep_latest_commits', 'keep_latest_file_versions', 'keep_latest_by_hours' (or Hudi's "
                           "KEEP_LATEST_COMMITS, KEEP_LATEST_FILE_VERSIONS, KEEP_LATEST_BY_HOURS)",
                           key="hoodie.cleaner.policy")
    return p




# -- pure planning rules --------------------------------------------------------------------------
def earliest_commit_to_retain(timeline: Timeline, *, policy: str = COMMITS, retain_commits: int = 10,
                              retain_hours: float = 24, now: datetime | None = None) -> Instant | None:
    """The earliest completed commit a clean must keep readable (``CleanerUtils``); None
    when the policy keeps no commit window or there are not enough commits."""
    policy = _policy(policy)
    if policy == FILE_VERSIONS:
        return None
    completed = [i for i in timeline.instants if i.is_completed and i.completed_action in WRITE_ACTIONS]
    if policy == BY_HOURS:
        now = now or datetime.now(UTC).replace(tzinfo=None)
        floor = format_instant_time(now - timedelta(hours=retain_hours))
        return next((i for i in completed if i.requested >= floor), None)
    if len(completed) <= retain_commits:
        return None
    candidate = completed[len(completed) - retain_commits]
    pending = [i for i in timeline.instants if not i.is_completed and i.action in PENDING_WRITE_ACTIONS]
    if pending:
        first = min(pending, key=lambda i: i.requested)
        if candidate.requested > first.requested:
            before = [i for i in completed if i.requested < first.requested]
            return before[-1] if before else None
    return candidate


def _slice_files(s: FileSlice) -> list[str]:
    return ([s.base_file.name] if s.base_file else []) + [lf.name for lf in s.log_files]


def slices_to_clean(slices: list[FileSlice], *, policy: str = COMMITS, earliest: str | None = None,
                    retain_versions: int = 3, savepointed: Iterable[str] = (),
                    pending_compaction: Iterable[tuple[str, str]] = ()) -> list[FileSlice]:
    """The slices of one (not replaced) file group to delete; ``slices`` in base-instant
    order, ``earliest`` the ECTR's requested time, ``savepointed`` file names,
    ``pending_compaction`` the (file id, base instant) pairs pending compactions read."""
    policy = _policy(policy)
    sp = set(savepointed)
    pend = set(pending_compaction)
    if not slices:
        return []

    def saved(s: FileSlice) -> bool:
        return any(n in sp for n in _slice_files(s))

    def needed(s: FileSlice) -> bool:
        return (s.file_id, s.base_instant) in pend

    newest_first = list(reversed(slices))
    if policy == FILE_VERSIONS:
        keep = retain_versions - (1 if any(needed(s) for s in slices) else 0)
        out = []
        for s in newest_first:
            if needed(s) or saved(s):
                continue
            if keep > 0:
                keep -= 1
                continue
            out.append(s)
        return sorted(out, key=lambda s: s.base_instant)
    if earliest is None:
        return []
    latest = slices[-1].base_instant
    before = next((s.base_instant for s in newest_first if s.base_instant < earliest), None)
    return [s for s in slices
            if s.base_instant < earliest and s.base_instant not in (latest, before) and not saved(s) and not needed(s)]


def replaced_group_cleanable(replaced_at: str, *, policy: str = COMMITS, earliest: str | None = None) -> bool:
    """Whether a file group replaced by the replacecommit ``replaced_at`` may be deleted."""
    if _policy(policy) == FILE_VERSIONS:
        return True
    return earliest is not None and replaced_at < earliest


def partitions_to_clean(timeline: Timeline, *, policy: str, earliest: str | None,
                        previous: CleanMetadataData | None, savepoints: Iterable[str],
                        all_partitions: Callable[[], list[str]],
                        partitions_of: Callable[[Instant], set[str]]) -> list[str]:
    """Partitions a clean looks at (``CleanPlanner.getPartitionPathsToClean``): with a previous
    clean that had an ECTR, the partitions written by commits requested in
    ``[previous ECTR, new ECTR)``; all partitions when there is no previous clean, the policy
    is ``KEEP_LATEST_FILE_VERSIONS``, a savepoint the previous clean saw was deleted since, or
    the commits since the previous ECTR are no longer all on the active timeline."""
    policy = _policy(policy)
    if policy == FILE_VERSIONS or previous is None or not previous.earliest_commit_to_retain or earliest is None:
        return all_partitions()
    if set(previous.savepointed) - set(savepoints):
        return all_partitions()
    prev = previous.earliest_commit_to_retain
    writes = [i for i in timeline.instants if i.is_completed and i.completed_action in WRITE_ACTIONS]
    if not writes or prev < writes[0].requested:
        return all_partitions()   # commits in the window were archived: their partitions are unknown
    out: set[str] = set()
    for i in writes:
        if prev <= i.requested < earliest:
            out |= partitions_of(i)
    return sorted(out)


def needs_cleaning(timeline: Timeline, previous: CleanMetadataData | None, *, max_commits: int = 1) -> bool:
    """Clean trigger ``NUM_COMMITS`` (``hoodie.clean.max.commits``): completed commits since the
    last clean's ``lastCompletedCommitTimestamp`` (all completed commits without a clean)."""
    writes = [i for i in timeline.instants if i.is_completed and i.completed_action in WRITE_ACTIONS]
    if previous is not None and previous.last_completed_commit:
        writes = [i for i in writes if i.requested > previous.last_completed_commit]
    return len(writes) >= max_commits


# -- reading the timeline ---------------------------------------------------------------------------
def savepointed_files(store: TimelineStore, timeline: Timeline) -> tuple[dict[str, SavepointMetadataData], set[str]]:
    """Completed savepoints (requested time -> metadata) and the union of their file names."""
    out: dict[str, SavepointMetadataData] = {}
    for i in timeline.instants:
        if i.action == "savepoint" and i.is_completed:
            try:
                out[i.requested] = store.metadata(i, SavepointMetadataData)
            except FileNotFoundError:   # deleted since the timeline was read: it protects nothing now
                continue
    return out, {n for md in out.values() for n in md.file_names}


@overload
def last_clean(store: TimelineStore, timeline: Timeline, *,
               pending: Literal[False] = False) -> tuple[Instant, CleanMetadataData] | None: ...
@overload
def last_clean(store: TimelineStore, timeline: Timeline, *,
               pending: bool) -> tuple[Instant, CleanMetadataData | CleanerPlanData] | None: ...
def last_clean(store: TimelineStore, timeline: Timeline, *,
               pending: bool = False) -> tuple[Instant, CleanMetadataData | CleanerPlanData] | None:
    """The latest completed clean and its metadata (or, with ``pending=True``, the latest
    clean in any state: a pending one with its plan)."""
    cleans = [i for i in timeline.instants if i.action == "clean" and (pending or i.is_completed)]
    if not cleans:
        return None
    inst = cleans[-1]
    if inst.is_completed:   # archived by another process since the timeline was read: from the history
        return inst, store.metadata(inst, CleanMetadataData)
    return inst, store.plan(inst, CleanerPlanData)


def _pending_compaction_ops(store: TimelineStore, timeline: Timeline) -> tuple[set[tuple[str, str]], set[str]]:
    from lakesdk.format.compaction_plan import CompactionPlanData
    ops: set[tuple[str, str]] = set()
    names: set[str] = set()
    for _, plan in store.pending_plans(timeline, CompactionPlanData):
        for op in plan.operations:
            ops.add((op.file_id, op.base_instant))
            names.update(([op.base_file] if op.base_file else []) + list(op.log_files))
    return ops, names


def _pending_clustering_files(store: TimelineStore, timeline: Timeline) -> set[str]:
    """Names of the files pending clusterings read (their input slices): kept like savepointed
    files, or the clustering fails on a file a clean deleted under it (found by the soak)."""
    from lakesdk.format.clustering_plan import ClusteringPlanData
    names: set[str] = set()
    for _, plan in store.pending_plans(timeline, ClusteringPlanData):
        for g in plan.groups:
            for sl in g.slices:
                names.update(([sl.base_file] if sl.base_file else []) + list(sl.log_files))
    return names


def _replaced_groups(store: TimelineStore, timeline: Timeline) -> dict[tuple[str, str], str]:
    out: dict[tuple[str, str], str] = {}
    for i in timeline.commits:
        if i.completed_action == "replacecommit":
            for part, fids in (store.commit_metadata(i).partition_to_replace_file_ids or {}).items():
                for f in fids:
                    out.setdefault((part, f), i.requested)
    return out


def _partitions_of(store: TimelineStore) -> Callable[[Instant], set[str]]:
    def f(i: Instant) -> set[str]:
        md = store.commit_metadata(i)
        return set(md.partition_to_write_stats) | set(md.partition_to_replace_file_ids or {})
    return f


# -- the plan --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class CleanFile:
    """One file a clean deletes (``path`` relative to the table base)."""

    partition: str
    file_id: str
    path: str
    size: int
    kind: Literal["base", "log"]
    base_instant: str
    reason: str


@dataclass(frozen=True)
class CleanPlan:
    """What a clean will delete; ``instant`` is set once scheduled.  Nothing is written
    until :func:`schedule_clean`."""

    table: str
    policy: CleanPolicy
    retain: str                                   # "10 commits", "3 file versions", "24 hours"
    earliest: Instant | None                      # earliest commit to retain
    last_completed_commit: str
    files: tuple[CleanFile, ...]
    savepoints: tuple[str, ...] = ()
    partitions_considered: int = 0
    groups_considered: int = 0
    note: str = ""
    instant: str | None = None

    @property
    def bytes(self) -> int:
        return sum(f.size for f in self.files)

    @property
    def partitions(self) -> list[str]:
        return sorted({f.partition for f in self.files})

    @property
    def replaced_file_groups(self) -> int:
        return len({(f.partition, f.file_id) for f in self.files if f.reason.startswith("replaced")})

    def __len__(self) -> int:
        return len(self.files)

    def effect(self) -> str:
        """The expected effect, in words."""
        if not self.files:
            return f"nothing to delete{': ' + self.note if self.note else ''}"
        bases = sum(1 for f in self.files if f.kind == "base")
        s = (f"deletes {len(self.files)} files ({bases} base, {len(self.files) - bases} log, {_human(self.bytes)}) "
             f"in {len(self.partitions)} partitions")
        if self.replaced_file_groups:
            s += f", {self.replaced_file_groups} of them replaced file groups"
        if self.earliest is not None:
            s += f"; time travel stays possible to {self.earliest.requested} and later"
        if self.savepoints:
            s += f" and to savepoints {', '.join(self.savepoints)}"
        return s

    def __repr__(self) -> str:
        at = f" @ {self.instant}" if self.instant else " (not scheduled)"
        ectr = self.earliest.requested if self.earliest else "none"
        return (f"CleanPlan({self.table!r}{at}: {self.policy} retain {self.retain}, earliest retained instant "
                f"{ectr}: {self.effect()})")

    def _repr_html_(self) -> str:
        import html
        rows = "".join(
            f"<tr><td>{html.escape(f.partition or '<root>')}</td><td><code>{html.escape(f.path.rsplit('/', 1)[-1])}</code></td>"
            f"<td>{f.kind}</td><td>{_human(f.size)}</td><td>{html.escape(f.reason)}</td></tr>" for f in self.files[:100])
        more = f"<caption>first 100 of {len(self.files)} files</caption>" if len(self.files) > 100 else ""
        ectr = self.earliest.requested if self.earliest else "none"
        head = (f"<b>CleanPlan</b> on <code>{html.escape(self.table)}</code> "
                f"{'@ ' + self.instant if self.instant else '(not scheduled)'}<br>"
                f"policy <b>{self.policy}</b> (retain {self.retain}), earliest retained instant <b>{ectr}</b><br>"
                f"{html.escape(self.effect())}")
        table = ("<table>" + more + "<tr><th>partition</th><th>file</th><th>kind</th><th>size</th><th>why</th></tr>"
                 + rows + "</table>") if self.files else ""
        return f"<div>{head}{table}</div>"

    def to_pandas(self) -> pd.DataFrame:
        import pandas as pd
        return pd.DataFrame([f.__dict__ for f in self.files],
                            columns=["partition", "file_id", "path", "size", "kind", "base_instant", "reason"])


@dataclass(frozen=True)
class CleanResult:
    """What an executed clean deleted."""

    table: str
    instant: str
    completed: str | None
    policy: str
    earliest: str | None
    deleted: tuple[str, ...] = field(repr=False)
    failed: tuple[str, ...] = field(default=(), repr=False)
    bytes: int = 0
    seconds: float = 0.0

    def __repr__(self) -> str:
        failed = f", failed={len(self.failed)}" if self.failed else ""
        return (f"CleanResult({self.table!r} @ {self.instant}: {self.policy}, earliest retained instant "
                f"{self.earliest or 'none'}, deleted {len(self.deleted)} files ({_human(self.bytes)}){failed}, "
                f"seconds={self.seconds:.2f})")

    def _repr_html_(self) -> str:
        import html
        return f"<div><b>CleanResult</b> {html.escape(repr(self))}</div>"


def _check_retention(pol: CleanPolicy, *, retain_commits: int, retain_versions: int, retain_hours: float) -> None:
    """Validate the one retention option ``pol`` uses; the other two are ignored by that policy
    (as Hudi ignores ``hoodie.cleaner.*.retained`` options of other policies)."""
    from lakesdk.exceptions import OptionsError
    name, value, ok, want = {
        COMMITS: ("retain_commits (hoodie.cleaner.commits.retained)", retain_commits,
                  isinstance(retain_commits, int) and retain_commits >= 1, "an integer >= 1"),
        FILE_VERSIONS: ("retain_versions (hoodie.cleaner.fileversions.retained)", retain_versions,
                        isinstance(retain_versions, int) and retain_versions >= 1, "an integer >= 1"),
        BY_HOURS: ("retain_hours (hoodie.cleaner.hours.retained)", retain_hours,
                   isinstance(retain_hours, (int, float)) and retain_hours > 0, "a number > 0"),
    }[pol]
    if not ok:
        raise OptionsError(f"clean policy {pol} needs {name} to be {want}, found {value!r}: pass a valid value "
                           "(the other retention options are not used by this policy)")


def plan_clean(table: "TableContext", *, policy: str = COMMITS, retain_commits: int = 10, retain_versions: int = 3,
               retain_hours: float = 24, incremental: bool = True) -> CleanPlan:
    """The files a clean would delete now (nothing is written)."""
    table = context_of(table)
    from lakesdk.read.view import FileSystemView
    pol = _policy(policy)
    _check_retention(pol, retain_commits=retain_commits, retain_versions=retain_versions, retain_hours=retain_hours)
    retain = {COMMITS: f"{retain_commits} commits", FILE_VERSIONS: f"{retain_versions} file versions",
              BY_HOURS: f"{retain_hours:g} hours"}[pol]
    store = table.store
    timeline = store.load()
    writes = timeline.commits
    last_commit = writes[-1].requested if len(writes) else ""
    earliest = earliest_commit_to_retain(timeline, policy=pol, retain_commits=retain_commits, retain_hours=retain_hours)
    sps, sp_files = savepointed_files(store, timeline)
    base: dict[str, Any] = dict(table=table.name, policy=pol, retain=retain, earliest=earliest, last_completed_commit=last_commit,
                savepoints=tuple(sorted(sps)))
    if pol != FILE_VERSIONS and earliest is None:
        return CleanPlan(files=(), note="not enough commits to clean (the earliest commit to retain is empty)", **base)
    ectr = earliest.requested if earliest else None
    view = FileSystemView(table.storage, table.config, store, timeline)
    view.replaced = set()           # every file group, replaced ones included
    groups: list[FileGroup] = view.file_groups
    previous = last_clean(store, timeline)
    partitions = set(partitions_to_clean(
        timeline, policy=pol, earliest=ectr, previous=previous[1] if previous else None, savepoints=sps,
        all_partitions=lambda: sorted({g.partition for g in groups}), partitions_of=_partitions_of(store))
        if incremental else {g.partition for g in groups})
    replaced = _replaced_groups(store, timeline)
    pend_ops, pend_names = _pending_compaction_ops(store, timeline)
    read_by_clustering = _pending_clustering_files(store, timeline)
    pend_names |= read_by_clustering
    kept = set(sp_files) | read_by_clustering
    files: list[CleanFile] = []
    considered = 0

    def add(s: FileSlice, reason: str) -> None:
        if s.base_file is not None and s.base_path:
            files.append(CleanFile(s.partition, s.file_id, s.base_path, s.base_size, "base", s.base_instant, reason))
        for path, size in zip(s.log_paths, s.log_sizes):
            files.append(CleanFile(s.partition, s.file_id, path, size, "log", s.base_instant, reason))
        for path, (_, size) in zip(s.cdc_paths, s.cdc_files):
            files.append(CleanFile(s.partition, s.file_id, path, size, "log", s.base_instant, reason))

    for g in groups:
        if g.partition not in partitions:
            continue
        considered += 1
        key = (g.partition, g.file_id)
        if key in replaced:
            if replaced_group_cleanable(replaced[key], policy=pol, earliest=ectr):
                for s in g.slices:
                    names = _slice_files(s)
                    if not any(n in sp_files or n in pend_names for n in names):
                        add(s, f"replaced by {replaced[key]}")
            continue
        for s in slices_to_clean(g.slices, policy=pol, earliest=ectr, retain_versions=retain_versions,
                                 savepointed=kept, pending_compaction=pend_ops):
            add(s, f"older than the latest slice before {ectr}" if ectr else
                f"beyond the {retain_versions} newest versions")
    return CleanPlan(files=tuple(files), partitions_considered=len(partitions), groups_considered=considered,
                     note="" if files else "every file version is still needed", **base)


def schedule_clean(table: "TableContext", plan: CleanPlan) -> CleanPlan:
    """Write the plan as ``T.clean.requested``; returns the plan with its instant."""
    table = context_of(table)
    store = table.store
    by_part: dict[str, list[str]] = {}
    for f in plan.files:
        by_part.setdefault(f.partition, []).append(table.storage.url(f.path))
    data = CleanerPlanData(plan.policy, plan.earliest.requested if plan.earliest else None,
                           plan.earliest.action if plan.earliest else None, plan.last_completed_commit,
                           {p: tuple(v) for p, v in sorted(by_part.items())}, plan.savepoints)
    from lakesdk.concurrency.instants import create_instant
    instant = create_instant(store, table.lock(), "clean", data.to_avro())
    return replace(plan, instant=instant.requested)


def execute_clean(table: "TableContext", instant: str) -> CleanResult:
    """Execute a scheduled clean: inflight, delete the planned files, complete."""
    table = context_of(table)
    t0 = time.perf_counter()
    store = table.store
    timeline = store.load()
    try:
        inst = next(i for i in timeline if i.action == "clean" and i.requested == instant)
    except StopIteration:
        raise InstantNotFoundError(f"no clean instant {instant!r} on the timeline of {table.name!r}",
                                   instant=instant) from None
    if inst.is_completed:   # by another process since the caller listed it
        raise CleanConflictError(f"clean {instant} of {table.name!r} is already completed", instant=instant)
    plan = store.plan(inst, CleanerPlanData)
    from lakesdk.services.claim import claim
    from lakesdk.services.transaction import InstantTransaction
    sp_files: set[str] = set()

    def busy(expiry: float) -> Exception:
        return CleanConflictError(
            f"clean {instant} of {table.name!r} is being executed by another process (or was completed by it); "
            f"if that process is gone, its heartbeat expires after {expiry:.0f} s and clean() takes over",
            instant=instant)

    def read_savepoints(_: Instant) -> None:
        # a savepoint taken after planning protects its files too: read under the lock once the
        # clean is inflight (a savepoint made from now on sees it and names none of its files)
        now = store.load()
        sp_files.update(savepointed_files(store, now)[1])
        sp_files.update(_pending_clustering_files(store, now))   # and a clustering scheduled since reads its files
    inst, heartbeat = claim(table, "clean", instant, busy, then=read_savepoints)
    txn = InstantTransaction.resume(table, inst, operation="clean", heartbeat=heartbeat)
    try:
        return _delete_planned(table, txn, inst, plan, sp_files, t0)
    finally:
        txn.stop_heartbeat()


def _delete_planned(table: "TableContext", txn: Any, inst: Instant, plan: CleanerPlanData, sp_files: set[str],
                    t0: float) -> CleanResult:
    deleted: dict[str, list[str]] = {}
    failed: dict[str, list[str]] = {}
    paths: list[str] = []
    nbytes = 0
    for part, full_paths in show_progress(list(plan.files.items()), desc=f"clean {inst.requested}", unit="partition",
                                          setting=table.options.progress):
        deleted.setdefault(part, [])
        for full in full_paths:
            name = posixpath.basename(full)
            rel = f"{part}/{name}" if part else name
            if name in sp_files:
                continue
            try:
                size = table.storage.size(rel)
            except (FileNotFoundError, OSError):
                size = 0
            try:
                table.storage.delete(rel)
                deleted[part].append(name)
                paths.append(rel)
                nbytes += size
            except OSError:
                failed.setdefault(part, []).append(name)
    md = CleanMetadataData(inst.requested, int((time.perf_counter() - t0) * 1000), plan.policy,
                           plan.earliest_instant or "", plan.last_completed_commit,
                           {p: tuple(v) for p, v in deleted.items()}, {p: tuple(v) for p, v in failed.items()},
                           savepointed=plan.savepointed)
    done = txn.commit(md.to_avro())
    txn.finish()
    return CleanResult(table.name, inst.requested, done.completed, plan.policy, plan.earliest_instant,
                       tuple(paths), tuple(f"{p}/{n}" if p else n for p, v in failed.items() for n in v),
                       nbytes, time.perf_counter() - t0)


def clean(table: "TableContext", *, policy: str = COMMITS, retain_commits: int = 10, retain_versions: int = 3,
          retain_hours: float = 24, max_commits: int | None = None) -> CleanResult | None:
    """Finish pending cleans, then plan, schedule and execute a clean.  Returns the result
    of the clean this call ran (``None`` when there was nothing to delete, or another
    process is executing a clean: cleans of one table run one at a time).  With
    ``max_commits`` set, a clean is only planned when that many commits completed since the
    last clean (``hoodie.clean.max.commits``)."""
    table = context_of(table)
    result = None
    for p in store_pending_cleans(table):
        try:
            result = execute_clean(table, p)
        except CleanConflictError:   # another process is executing it: no second clean of the same files
            return result
    store = table.store
    if max_commits is not None:
        timeline = store.load()
        prev = last_clean(store, timeline)
        if not needs_cleaning(timeline, prev[1] if prev else None, max_commits=max_commits):
            return result
    plan = plan_clean(table, policy=policy, retain_commits=retain_commits, retain_versions=retain_versions,
                      retain_hours=retain_hours)
    if not plan.files:
        return result
    try:
        return execute_clean(table, schedule_clean(table, plan).instant)  # type: ignore[arg-type]
    except CleanConflictError:   # another process's clean() took the new clean first and runs it
        return result


def store_pending_cleans(table: "TableContext") -> list[str]:
    table = context_of(table)
    return [i.requested for i in table.store.load().pending if i.action == "clean"]


def clean_after_write(table: "TableContext") -> CleanResult | None:
    """Inline clean after a commit (``TableOptions.clean_after_write``): KEEP_LATEST_COMMITS
    retaining ``TableOptions.clean_retain_commits``.  A failure is logged, never raised: the
    write it follows has already committed."""
    table = context_of(table)
    try:
        return clean(table, retain_commits=table.options.clean_retain_commits, max_commits=1)
    except Exception:  # noqa: BLE001
        log.warning("inline clean of %r failed; the write itself committed", table.name, exc_info=True)
        return None
