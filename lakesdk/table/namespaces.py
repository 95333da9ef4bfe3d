"""The namespaces of a table handle: ``table.inspect`` (:class:`Inspect`: files, partitions,
commit metadata, integrity check, transactions) and ``table.maintenance``
(:class:`Maintenance`: the table services).  Both are re-exported by :mod:`lakesdk.table.table`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from lakesdk.commit.results import moment_time

if TYPE_CHECKING:
    import pyarrow as pa

    from lakesdk.commit.results import WriteResult
    from lakesdk.concurrency.journal import Transactions
    from lakesdk.format.commit_metadata import CommitMetadata
    from lakesdk.format.instant import Instant
    from lakesdk.format.table_config import TableConfig
    from lakesdk.read.check import CheckReport
    from lakesdk.read.metadata_table import MetadataTableReader
    from lakesdk.services.archival import ArchivePlan, ArchiveResult
    from lakesdk.services.clean import CleanPlan, CleanPolicyName, CleanResult
    from lakesdk.services.clustering_plan import ClusteringPlan, ClusteringResult
    from lakesdk.services.compaction import CompactionPlan, CompactionTrigger
    from lakesdk.services.rollback import RollbackPlan, RollbackResult
    from lakesdk.services.savepoint import RestorePlan, RestoreResult, Savepoint
    from lakesdk.table.handle import Handle

__all__ = ["Inspect", "Maintenance"]


class Inspect:
    """``table.inspect``: the table's files and partitions."""

    def __init__(self, table: Handle) -> None:
        self._t = table

    def _view(self, as_of: Any = None) -> Any:
        from lakesdk.read.view import FileSystemView
        store = self._t.context.store
        return FileSystemView(self._t.storage, self._t.config, store, store.load(), as_of=moment_time(as_of), fresh=True)

    def file_groups(self, as_of: Any = None) -> pa.Table:
        """The file groups (at ``as_of``, default now), one row each with its latest file
        slice, as a ``pyarrow.Table`` of :data:`~lakesdk.table.listings.FILE_GROUPS_SCHEMA`
        (``.to_pandas()`` for a pandas DataFrame)."""
        from lakesdk.table.listings import file_groups_table
        return file_groups_table(self._view(as_of))

    def partitions(self, as_of: Any = None) -> list[str]:
        return self._view(as_of).partitions()

    def commit_metadata(self, instant: Any) -> CommitMetadata:
        """The CommitMetadata of a completed write instant (requested time or Instant)."""
        store = self._t.context.store
        req = instant.requested if hasattr(instant, "requested") else instant.instant if hasattr(instant, "instant") else instant
        timeline = store.load()
        writes = [i for i in timeline.commits if i.requested == req]   # another action may share the time
        return store.commit_metadata(writes[0] if writes else timeline.get(req))

    def check(self) -> CheckReport:
        """Check the table's integrity: ``hoodie.properties`` (keys, checksum), the timeline
        (every instant parses), the data files (every file of every file slice a reader can reach
        exists with the size its write stat records) and orphans (data files outside every commit
        and pending write).  Returns a :class:`~lakesdk.read.check.CheckReport` (``.ok``,
        ``.problems``), as ``lakesdk check PATH`` prints it."""
        from lakesdk.read.check import check_table
        return check_table(self._t.storage, name=self._t.name)

    def transactions(self) -> Transactions:
        """The transaction journal: one record per write under optimistic concurrency
        (committed, conflict, schema_conflict, early_conflict or failed), oldest first."""
        from lakesdk.concurrency.journal import Transactions, read_transactions
        return Transactions(read_transactions(self._t.storage), table=self._t.name)

    def __repr__(self) -> str:
        return f"<Inspect {self._t.name!r}: file_groups(), partitions(), commit_metadata(instant), transactions(), check()>"


class Maintenance:
    """``table.maintenance``: table services.  Each shows its plan before it runs."""

    def __init__(self, table: Handle) -> None:
        self._t = table

    def plan_compaction(self, *, min_log_files: int = 1) -> CompactionPlan:
        """What a compaction would merge now (nothing is written)."""
        from lakesdk.services.compaction import plan_compaction
        return plan_compaction(self._t.context, min_log_files=min_log_files)

    def schedule_compaction(self, *, min_log_files: int = 1, trigger: CompactionTrigger | None = None,
                            max_delta_commits: int = 5, max_delta_seconds: float = 3600) -> CompactionPlan | None:
        """Write a compaction plan as a requested instant; returns the plan (``None`` if no
        slice has log files).  With ``trigger`` (``hoodie.compact.inline.trigger.strategy``:
        ``num_commits``, ``num_commits_after_last_request``, ``time_elapsed``, ``num_or_time``,
        ``num_and_time``; Hudi's upper-case names are taken too) a plan is only scheduled when
        ``max_delta_commits`` / ``max_delta_seconds`` say it is due.  File groups under a
        pending compaction are left out."""
        from lakesdk.services.compaction import compaction_due, schedule_new_compaction
        if trigger is not None and not compaction_due(self._t.timeline, trigger=trigger,
                                                      max_delta_commits=max_delta_commits,
                                                      max_delta_seconds=max_delta_seconds):
            return None
        return schedule_new_compaction(self._t.context, min_log_files=min_log_files)

    def compact(self, instant: str | None = None, *, min_log_files: int = 1) -> WriteResult | None:
        """Execute the pending compaction ``instant``, or plan, schedule and execute one now.
        Returns the compaction's WriteResult, or ``None`` when there was nothing to compact.
        Without ``instant``, pending compactions that another process is executing are left
        to it (``None`` when it takes the one this call picked); with ``instant``, that raises
        CompactionConflictError."""
        from lakesdk.services.compaction import compact
        return compact(self._t.context, instant, min_log_files=min_log_files)

    def plan_rollback(self, instant: Any, *, force: bool = False) -> RollbackPlan:
        """What :meth:`rollback` of ``instant`` would delete (nothing is written): a
        RollbackPlan with the data files, their sizes and the expected effect.  Raises the
        same RollbackNotAllowedError as :meth:`rollback` when the instant cannot be rolled back."""
        from lakesdk.services.rollback import plan_rollback
        req = instant.instant if hasattr(instant, "instant") and not hasattr(instant, "requested") else instant
        return plan_rollback(self._t.context, req, force=force)

    def rollback(self, instant: Any, *, force: bool = False, trace: bool = False) -> RollbackResult:
        """Roll back a failed (pending) write, or the latest completed write: its files are
        deleted and a rollback instant records what was removed.  A pending write whose
        writer is alive (fresh heartbeat) is refused unless ``force=True``; a completed write
        that later writes followed is refused (the error names them): roll those back first,
        or :meth:`restore` a savepoint.  Returns a RollbackResult, whose ``steps`` say what
        each step did (with ``trace=True`` each also lists the two instants' timeline files
        after it)."""
        from lakesdk.services.rollback import rollback
        req = instant.instant if hasattr(instant, "instant") and not hasattr(instant, "requested") else instant
        return rollback(self._t.context, req, force=force, trace=trace)

    def rollback_failed_writes(self) -> list[RollbackResult]:
        """Roll back every pending write whose writer is gone (heartbeat expired)."""
        from lakesdk.services.rollback import rollback_failed_writes
        return rollback_failed_writes(self._t.context, policy="lazy")

    def upgrade(self) -> TableConfig | None:
        """Upgrade a table version 8 table (Hudi 1.0) to version 9 (Hudi 1.1+), as Apache Hudi's
        upgrade does: ``hoodie.properties`` is rewritten (``hoodie.table.ordering.fields``
        replaces ``hoodie.table.precombine.field``, the built-in merge modes lose their strategy
        id and payload class) and the data stays as it is.  Returns the new TableConfig, or
        None when the table is version 9 already; this handle then writes as version 9.
        There is no downgrade in lakesdk: Apache Hudi downgrades (``hoodie.write.table.version=8``)."""
        from lakesdk.services.upgrade import upgrade_table
        new = upgrade_table(self._t.context)
        if new is not None:
            self._t._ctx = self._t.context.with_config(new)
        return new

    def upgrade_key_encoding(self) -> WriteResult | None:
        """Rewrite the record keys an earlier lakesdk wrote for empty composite-key values
        (``id:1,name:``) as Apache Hudi writes them (``id:1,name:__empty__``), so that upserts
        and deletes by lakesdk and by Hudi find those rows instead of adding second copies.

        One ``insert_overwrite`` (a replacecommit) rewrites the partitions holding such keys
        with their current rows (their commit time becomes this commit's); a row stored under
        both keys keeps the one a merge keeps (greatest ordering value, then the later
        commit).  Returns its WriteResult, or None when no key needs rewriting.  Run it while
        no other writer writes to the table.  An empty single-field key has no Hudi encoding
        (Hudi refuses it): such rows raise NullKeyError; delete them first (``t.delete([""])``)."""
        from lakesdk.table.key_encoding import upgrade_key_encoding
        return upgrade_key_encoding(self._t)

    def pending_compactions(self) -> list[Instant]:
        return [i for i in self._t.timeline.pending if i.action == "compaction"]

    # -- clustering (lakesdk.services.clustering) ---------------------------------------------------
    def plan_clustering(self, *, small_file_limit: int = 300 * 1024 * 1024,
                        max_bytes_per_group: int = 2048 * 1024 * 1024, target_file_size: int = 1024 * 1024 * 1024,
                        max_groups: int = 30, sort_by: str | list[str] | None = None, single_group: bool = False,
                        partitions: list[str] | None = None) -> ClusteringPlan:
        """What a clustering would rewrite now (nothing is written): a ClusteringPlan of groups
        of small file groups (base file under ``small_file_limit``) per partition, each at most
        ``max_bytes_per_group``, rewritten into files of about ``target_file_size`` (sorted by
        ``sort_by`` when given).  File groups under a pending compaction or clustering are left
        out; a lone small file group only with ``sort_by`` or ``single_group=True``."""
        from lakesdk.services.clustering_plan import plan_clustering
        return plan_clustering(self._t.context, small_file_limit=small_file_limit, max_bytes_per_group=max_bytes_per_group,
                               target_file_size=target_file_size, max_groups=max_groups, sort_by=sort_by,
                               single_group=single_group, partitions=partitions)

    def schedule_clustering(self, **plan_options: Any) -> ClusteringPlan | None:
        """Plan a clustering and write it as a requested instant (``T.clustering.requested``),
        leaving it pending; returns the plan with ``instant`` set (``None`` when nothing needs
        clustering).  Takes the options of :meth:`plan_clustering`.  While it is pending,
        updates and deletes of its file groups fail with ClusteringConflictError."""
        from lakesdk.services.clustering_plan import schedule_clustering
        plan = self.plan_clustering(**plan_options)
        return schedule_clustering(self._t.context, plan) if len(plan) else None

    def cluster(self, instant: str | None = None, **plan_options: Any) -> ClusteringResult | None:
        """Execute the pending clustering ``instant``; without one, finish the pending
        clusterings (re-executing an interrupted one), or else plan, schedule and execute one
        now (options of :meth:`plan_clustering`).  Returns a ClusteringResult, or ``None`` when
        nothing needed clustering."""
        from lakesdk.services.clustering import cluster
        req = getattr(instant, "instant", None) or getattr(instant, "requested", None) or instant
        return cluster(self._t.context, req, **plan_options)

    def pending_clusterings(self) -> list[ClusteringPlan]:
        """Plans of scheduled, not yet completed clusterings (each with ``.instant``), oldest first."""
        from lakesdk.services.clustering_plan import pending_clusterings
        return pending_clusterings(self._t.context)

    # -- clean, savepoint/restore, archival (lakesdk.services.clean / savepoint / archival) --------
    def plan_clean(self, *, policy: CleanPolicyName = "keep_latest_commits", retain_commits: int = 10,
                   retain_versions: int = 3, retain_hours: float = 24) -> CleanPlan:
        """What a clean would delete now (nothing is written): a CleanPlan with the files,
        their bytes, the expected effect and the earliest retained instant.  ``policy``
        (``hoodie.cleaner.policy``; Hudi's names, ``KEEP_LATEST_COMMITS`` and so on, are taken
        too) is ``keep_latest_commits`` (retain ``retain_commits``),
        ``keep_latest_file_versions`` (retain ``retain_versions`` per file group) or
        ``keep_latest_by_hours`` (``retain_hours``)."""
        from lakesdk.services.clean import plan_clean
        return plan_clean(self._t.context, policy=policy, retain_commits=retain_commits, retain_versions=retain_versions,
                          retain_hours=retain_hours)

    def clean(self, *, policy: CleanPolicyName = "keep_latest_commits", retain_commits: int = 10,
              retain_versions: int = 3, retain_hours: float = 24) -> CleanResult | None:
        """Plan, schedule (``T.clean.requested``) and execute a clean; returns a CleanResult,
        or ``None`` when nothing needed deleting.  Pending cleans are finished first."""
        from lakesdk.services.clean import clean
        return clean(self._t.context, policy=policy, retain_commits=retain_commits, retain_versions=retain_versions,
                     retain_hours=retain_hours)

    def savepoint(self, instant: Any = None, *, user: str = "", comment: str = "") -> Savepoint:
        """Savepoint a completed commit (default: the latest): its files are kept by cleans,
        archival stops before it, and :meth:`restore` can go back to it."""
        from lakesdk.services.savepoint import savepoint
        return savepoint(self._t.context, instant, user=user, comment=comment)

    def savepoints(self) -> list[Savepoint]:
        """Completed savepoints, oldest first."""
        from lakesdk.services.savepoint import savepoints
        return savepoints(self._t.context)

    def delete_savepoint(self, instant: Any) -> bool:
        """Delete the savepoint of ``instant``; False when there was none."""
        from lakesdk.services.savepoint import delete_savepoint
        return delete_savepoint(self._t.context, instant)

    def plan_restore(self, savepoint_instant: Any) -> RestorePlan:
        """What :meth:`restore` would roll back (nothing is written)."""
        from lakesdk.services.savepoint import plan_restore
        return plan_restore(self._t.context, savepoint_instant)

    def restore(self, savepoint_instant: Any) -> RestoreResult:
        """Roll back every write after the savepoint (newest first) as one restore instant;
        returns a RestoreResult.  The table then holds exactly the savepointed rows."""
        from lakesdk.services.savepoint import restore
        return restore(self._t.context, savepoint_instant)

    def plan_archive(self, *, min_commits: int = 20, max_commits: int = 30, beyond_savepoint: bool = False) -> ArchivePlan:
        """The instants :meth:`archive` would move into the timeline history (nothing is written)."""
        from lakesdk.services.archival import plan_archive
        return plan_archive(self._t.context, min_commits=min_commits, max_commits=max_commits,
                            beyond_savepoint=beyond_savepoint)

    def create_metadata_table(self) -> MetadataTableReader:
        """Build Hudi's metadata table (its ``files`` partition) from a listing of the files of
        the completed instants, as Hudi does when a writer enables it; lakesdk then keeps it at
        every commit.  Returns the metadata table reader (``.partitions()``, ``.listings()``)."""
        from lakesdk.services.indexes import build_metadata_table
        return build_metadata_table(self._t.context)

    def create_index(self, kind: str = "record") -> MetadataTableReader:
        """Build an index of Hudi's metadata table from the table's files, as Hudi's indexer
        does; lakesdk then keeps it at every commit.  ``"record"``: the record index (the
        ``record_index`` partition, each record key -> its file group), read from the latest
        file slices; an upsert or delete looks its keys up there when the table's index is
        ``record`` (``create_table(index="record")``, ``TableOptions(index_type="record")``)."""
        if kind != "record":
            from lakesdk.exceptions import OptionsError
            raise OptionsError(f"create_index: lakesdk builds the 'record' index, not {kind!r}")
        from lakesdk.services.indexes import build_record_index
        return build_record_index(self._t.context)

    def archive(self, *, min_commits: int = 20, max_commits: int = 30, beyond_savepoint: bool = False) -> ArchiveResult:
        """Move old completed instants into the timeline history (``.hoodie/timeline/history``)
        once more than ``max_commits`` commits are active, keeping the newest ``min_commits``
        (never past a pending instant or the earliest savepoint); returns an ArchiveResult."""
        from lakesdk.services.archival import archive
        return archive(self._t.context, min_commits=min_commits, max_commits=max_commits, beyond_savepoint=beyond_savepoint)

    def __repr__(self) -> str:
        methods = [n for n, v in vars(type(self)).items() if callable(v) and not n.startswith("_")]
        return f"<Maintenance {self._t.name!r}: {', '.join(m + '()' for m in methods)}>"
