"""Staged writes: ``WriteOperation(...).execute()``; ``Table.upsert`` and friends wrap it."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any, Callable, Sequence

import pyarrow as pa

from lakesdk import _faults as faults
from lakesdk.commit.results import SchemaChange, WriteResult, schema_change
from lakesdk.commit.schema_store import resolve_schema, schema_extra_metadata
from lakesdk.concurrency.schema_conflicts import ensure_schema_unchanged
from lakesdk.engine.tasks import DEFAULT_RECORD_SIZE, FileGroupTarget, WriteContext
from lakesdk.exceptions import WriteError
from lakesdk.format.commit_metadata import CommitMetadata, WriteStat
from lakesdk.format.instant import Instant
from lakesdk.merge.ordering import MergeCounts
from lakesdk.read.view import FileSystemView
from lakesdk.table.write_input import (
    _OPERATION_TYPE,
    MISSING_COLUMNS,
    PARTITION_METAFILE,
    Operation,
    WriteInput,
    WriteSnapshot,
)
from lakesdk.timeline import moved

__all__ = ["WriteOperation", "Operation", "MISSING_COLUMNS", "PARTITION_METAFILE"]


class WriteOperation(WriteInput):
    """One staged write; nothing happens until :meth:`execute`."""

    def __repr__(self) -> str:
        return f"<WriteOperation {self.operation} into {self.table.name!r} (call .execute())>"

    def write_files(self, instant: str, *, markers: Any = None) -> tuple[list[WriteStat], MergeCounts, pa.Schema]:
        """Write this batch's files for an instant opened elsewhere (a transaction, the
        Kafka sink's coordinator); commits nothing.  Returns the write stats, the counts and
        the schema the files were written with."""
        prep = self._prepare()
        if prep is None:
            return [], MergeCounts(), self.table.schema
        prep.ctx.instant = instant
        prep.ctx.markers = markers
        try:
            stats, counts, _ = self._run(prep)
        except Exception as err:
            typed = _typed(err)     # an error raised inside a Spark task comes out typed
            if isinstance(typed, FileNotFoundError):
                _raise_if_cleaned(self.table, prep.store, prep.timeline, instant, typed, rolled_back=False)
            _raise_if_damaged(self.table, typed)
            if typed is not err:
                raise typed from err
            raise
        return stats, counts, prep.target_schema

    def execute(self) -> WriteResult:
        from lakesdk.concurrency.journal import now_ms
        t0 = time.perf_counter()
        started_ms = now_ms()
        t = self.table
        cfg = t.config
        prep = self._prepare()
        if prep is None:
            return self._empty_result(t0)
        ctx, store, timeline, target_schema = prep.ctx, prep.store, prep.timeline, prep.target_schema

        pending_restore = [i for i in timeline.pending if i.action == "restore"]
        if pending_restore:
            raise WriteError(
                f"a restore is in progress on {cfg.name!r} ({pending_restore[0].requested}); writes wait until it "
                "finishes: run table.maintenance.restore(<savepoint>) again to complete it")

        # a file of the table that the timeline records and storage lacks stops the write before it
        # starts: checked before anything is written, a rollback of a failed write included
        scope = self._scope(prep)
        prep.view = _checked_view(t, store, timeline, scope)
        # -- failed writes of earlier writers are rolled back first ------------------------------
        from lakesdk.services.rollback import rollback_failed_writes
        policy = "lazy" if t.options.concurrency == "optimistic" else t.options.failed_writes
        if rollback_failed_writes(t.context, policy=policy, timeline=timeline):
            timeline = prep.timeline = store.load()
            prep.view = _checked_view(t, store, timeline, scope)

        # -- the instant: requested -> inflight ------------------------------------------------
        if self.operation.startswith("insert_overwrite"):
            action = "replacecommit"
        else:
            action = "deltacommit" if cfg.is_mor else "commit"
        from lakesdk.services.rollback import abort
        from lakesdk.services.transaction import InstantTransaction
        # (a single writer takes its time after the newest timeline it read, without reading it again)
        txn = InstantTransaction.begin(t.context, action, operation=self.operation, timeline=prep.view.timeline)
        instant = txn.instant
        planned_on = timeline      # the writes this one planned against are not conflicts
        if txn.at_begin is not None:
            # a clean (or restore, or archival) ran since the view listed the files: it may have
            # deleted a slice the view holds for the latest (a compaction superseded it); or a
            # write that completed since may have been archived (lakesdk.timeline.moved), out of
            # reach of the commit checks. Then the files are listed again as of the timeline read
            # to create the instant, and the write plans against that one (its schema checks
            # still start from the write's snapshot)
            again = prep.view.current_as_of(txn.at_begin, pending=True)
            if again is not prep.view:
                prep.view, prep.timeline, planned_on = again, txn.at_begin, txn.at_begin
        ctx.instant = instant.requested
        faults.crash_point("after_requested")
        txn.start(CommitMetadata(operation_type=_OPERATION_TYPE[self.operation]).encode(layout=cfg.layout_version))
        stats: list[WriteStat] = []
        replaced: dict[str, list[str]] = {}
        self._schemas: tuple[Any, Any] = (prep.table_schema, None)
        # what the commit changes in the table's schema (the commit's schema check, run with
        # concurrent writers, compares the schema it records with the table's at commit)
        self._schema_change: SchemaChange | None = schema_change(prep.table_schema, target_schema, cfg.name)
        try:
            if self.read_at is not None and txn.at_begin is not None:
                moved.ensure_read_checkable(t.name, store, self.read_at, txn.at_begin, self.operation)
            if planned_on is not timeline:   # listed again at its instant: the schema it planned with must hold
                ensure_schema_unchanged(target_schema, resolve_schema(store, planned_on, create_schema=cfg.create_schema),
                                        table=t.name, instant=instant.requested)
            ctx.markers = txn.markers(detector=t.context.early_detector(instant.requested, timeline))
            try:
                stats, counts, replaced = self._run(prep)
            except Exception as err:
                typed = _typed(err)     # a lakesdk error raised inside a Spark task keeps its type
                if isinstance(typed, FileNotFoundError):
                    _raise_if_cleaned(t, store, timeline, instant.requested, typed)
                _raise_if_damaged(t, typed)
                if typed is not err:
                    raise typed from err
                raise
            faults.crash_point("after_data")
            self._finalize(ctx, stats, prep.partitions)
            txn.step("files_written")
            md = CommitMetadata(partition_to_write_stats=_group_stats(stats),
                                extra_metadata=schema_extra_metadata(target_schema, cfg.name),
                                operation_type=_OPERATION_TYPE[self.operation],
                                partition_to_replace_file_ids=replaced if action == "replacecommit" else None)
            checks = self._commit_checks(store, timeline, instant, stats, md, replaced if action == "replacecommit" else None,
                                         target_schema, planned_on=planned_on if self.read_at is None else self.read_at,
                                         at_begin=txn.at_begin)
            txn.commit(lambda now: md.encode(layout=cfg.layout_version), checks=checks)
            faults.crash_point("after_commit")
        except BaseException as err:
            txn.stop_heartbeat()
            landed = txn.landed()
            journaled = t.options.concurrency == "optimistic"
            names = _marker_names(ctx.markers) if journaled else set()   # before the rollback removes them
            cleaned = landed
            try:
                if not landed:
                    abort(txn)
                    cleaned = True
            finally:
                if cleaned:
                    _release_markers(ctx.markers)   # the marker server forgets the instant, detection stops
                else:
                    t.context.unwatch_markers(instant.requested)   # markers stay for the next rollback
                self._journal(store, instant, action, started_ms, target_schema, stats=stats, replaced=replaced,
                              names=names, err=None if landed else err, steps=txn.steps)
            raise
        txn.finish()
        completed = txn.completed
        assert completed is not None
        self._journal(store, instant, action, started_ms, target_schema, stats=stats, replaced=replaced,
                      steps=txn.steps)
        compaction = None
        if cfg.is_mor and t.options.compact_every and action == "deltacommit":
            from lakesdk.services.compaction import compact, deltacommits_since_compaction
            if deltacommits_since_compaction(t.context) >= t.options.compact_every:
                compaction = compact(t.context)
        # -- inline clustering (TableOptions.cluster_every; lakesdk.services.clustering) -----------
        if getattr(t.options, "cluster_every", None):
            from lakesdk.services.clustering import cluster_after_write
            cluster_after_write(t.context)
        # -- inline clean (TableOptions.clean_after_write; lakesdk.services.clean) ------------------
        if getattr(t.options, "clean_after_write", False):
            from lakesdk.services.clean import clean_after_write
            clean_after_write(t.context)
        t._after_write()
        return WriteResult(
            table=cfg.name, operation=self.operation, instant=instant.requested, completed=completed.completed,
            action=action, inserted=counts.inserted, updated=counts.updated, deleted=counts.deleted,
            skipped=counts.skipped, files=len(stats), bytes=sum(s.totalWriteBytes for s in stats),
            partitions=len({s.partitionPath for s in stats}), seconds=time.perf_counter() - t0,
            replaced_file_groups=sum(len(v) for v in replaced.values()) if replaced else 0,
            file_paths=tuple(s.path for s in stats), compaction=compaction, schema_change=self._schema_change,
        )

    def _resolve_schema(self, store: Any, start: Any, now: Any, writer: pa.Schema, instant: Instant) -> pa.Schema:
        """Concurrent schema evolution (RFC-82): the schema to record, or a conflict."""
        from lakesdk.concurrency.schema_conflicts import resolve_concurrent_schema
        t = self.table

        def evolution(tl: Any) -> Any:   # compaction and clustering do not evolve the schema
            from lakesdk.format.timeline import Timeline
            return Timeline(tuple(i for i in tl if i.action not in ("compaction", "clustering")), tl.layout)
        create = t.config.create_schema
        s0 = resolve_schema(store, evolution(start), create_schema=create)
        s1 = resolve_schema(store, evolution(now), create_schema=create)
        self._schemas = (s0, s1)
        return resolve_concurrent_schema(s0, s1, writer, table=t.name, instant=instant.requested,
                                         reconcile=t.options.schema_reconcile)

    def _commit_checks(self, store: Any, start: Any, instant: Instant, stats: list[WriteStat], md: CommitMetadata,
                       overwrite: dict[str, list[str]] | None, writer: pa.Schema, *,
                       planned_on: Any, at_begin: Any = None) -> list[Any]:
        """The preconditions of this write's commit, run on the timeline read under the lock:
        the schema to record (concurrent schema evolution since ``start``, or a schema
        conflict), then the file-group conflicts with the commits not completed in
        ``planned_on`` (those of ``at_begin``, the timeline read when its instant was created,
        included: archival may have moved them away since)."""
        from lakesdk.concurrency.conflicts import find_conflicts, raise_on_conflict
        name = self.table.config.name
        seen = frozenset((i.requested, i.action) for i in planned_on.completed)

        def schema(now: Any) -> None:
            record = self._resolve_schema(store, start, now, writer, instant)
            if not record.equals(writer):
                md.extra_metadata.update(schema_extra_metadata(record, name))
            self._schema_change = schema_change(self._schemas[1], record, name)

        def file_groups(now: Any) -> None:
            raise_on_conflict(name, instant, find_conflicts(store, now, instant, stats, overwrite, seen=seen,
                                                             also=at_begin, computed=self.read_at is not None))
        return [schema, file_groups]

    def _journal(self, store: Any, instant: Instant, action: str, started_ms: int, writer_schema: pa.Schema, *,
                 stats: list[WriteStat], replaced: dict[str, list[str]] | None, names: Any = (),
                 err: BaseException | None = None, steps: Sequence[tuple[str, int]] = ()) -> None:
        """Record the outcome in the transaction journal (optimistic concurrency only; never raises)."""
        if self.table.options.concurrency != "optimistic":
            return
        try:
            from lakesdk.concurrency.early import planned_groups
            from lakesdk.concurrency.journal import TransactionRecord, now_ms, outcome_of, record_transaction
            groups = {(s.partitionPath or "", s.fileId) for s in stats if s.fileId}
            groups |= {(p, f) for p, fids in (replaced or {}).items() for f in fids}
            groups |= set(planned_groups(names))
            conflicts_with = None
            other = getattr(err, "other_instant", None) if err is not None else None
            if other:
                theirs = tuple(tuple(g) for g in getattr(err, "file_groups", ()) or ())
                groups |= set(theirs) | set(getattr(err, "planned", ()) or ())
                other_action = getattr(err, "other_action", None) or next(
                    (i.action for i in store.load() if i.requested == other), "")
                conflicts_with = {"instant": other, "action": other_action, "file_groups": [list(g) for g in theirs]}
            s0, s1 = getattr(self, "_schemas", (None, None))
            record_transaction(self.table.storage, TransactionRecord(
                instant=instant.requested, action=action, outcome=outcome_of(err), operation=self.operation,
                writer=_writer(), started_ms=started_ms, ended_ms=now_ms(), file_groups=tuple(sorted(groups)),
                conflicts_with=conflicts_with, reason="" if err is None else (str(err) or type(err).__name__),
                schema=_fields(writer_schema), schema_at_start=_fields(s0), schema_at_commit=_fields(s1),
                steps=tuple(steps)))
        except Exception:  # noqa: BLE001 - the journal is advisory: it never changes a write's outcome
            pass

    def _empty_result(self, t0: float) -> WriteResult:
        return WriteResult(self.table.name, self.operation, "", None, "commit", seconds=time.perf_counter() - t0)

    def _engine(self) -> str:
        """``local`` for driver-side data when Spark is (or would be) local; else ``spark``."""
        return self.table.context.engine()

    def _run(self, snap: WriteSnapshot) -> tuple[list[WriteStat], MergeCounts, dict[str, list[str]]]:
        """Write the files of the write prepared as ``snap`` (its instant is ``snap.ctx.instant``)."""
        ctx, arrow, sdf, store, timeline = snap.ctx, snap.arrow, snap.sdf, snap.store, snap.timeline
        partitions, global_delete = snap.partitions, snap.global_delete
        from lakesdk.engine.planning import plan_insert_buckets
        t = self.table
        op = self.operation
        if arrow is not None and op not in ("bulk_insert", "delete"):
            from lakesdk.merge.ordering import combine_batch

            def combine(b: pa.Table) -> pa.Table:
                return combine_batch(b, ordering=ctx.ordering, merge_mode=ctx.merge_mode,
                                     column_groups=ctx.column_groups, merger=ctx.merger)  # cheap on the driver
            if ctx.global_index:   # one record per key, whatever its partition
                from lakesdk.engine.global_index import combine_by_key
                arrow = combine_by_key(arrow, combine)
            else:
                arrow = combine(arrow)
        elif arrow is not None and op == "delete":   # a key named twice is deleted (and counted) once
            from lakesdk.merge.ordering import combine_deletes
            arrow = combine_deletes(arrow, ordering=ctx.ordering, merge_mode=ctx.merge_mode)
        from lakesdk.engine.jobs import write_job
        job, data = write_job(t.context, ctx, arrow, sdf, deletes=op == "delete", global_keys=global_delete,
                              combine=op not in ("bulk_insert", "delete"))
        # the operation's view: checked before its instant was created, and listed again when a
        # clean, restore or archival ran before that (execute); one that runs later fails the
        # write with a typed error, as it would in its tasks
        if snap.view is None:
            snap.view = FileSystemView(t.storage, t.config, store, timeline)
        view = snap.view
        from lakesdk.services.clustering_plan import pending_clustering_file_groups
        busy = pending_clustering_file_groups(store, timeline)   # Hudi's reject-update strategy
        if op in ("bulk_insert", "insert_overwrite", "insert_overwrite_table"):
            if op == "insert_overwrite" and ctx.global_index:
                try:
                    self._check_overwrite_keys(job, data, view, partitions or job.partitions(data))
                finally:
                    job.release(data)
            stats = job.write_new(data)
            counts = MergeCounts(inserted=sum(s.numInserts for s in stats))
            replaced: dict[str, list[str]] = {}
            if op.startswith("insert_overwrite"):
                touched = None if op == "insert_overwrite_table" else (
                    {s.partitionPath for s in stats} | set(partitions or []))
                for g in view.file_groups:
                    if touched is None or g.partition in touched:
                        replaced.setdefault(g.partition, []).append(g.file_id)
                _reject_clustered(t.name, op, busy, {(p, f) for p, fids in replaced.items() for f in fids})
            return stats, counts, replaced
        # upsert / insert / delete: tag against the key index, assign inserts, one task per file group
        if partitions is None and not global_delete:
            partitions = job.partitions(data)
        wanted = set(partitions or [])
        everywhere = global_delete or ctx.global_index   # the key index looks in every partition
        slices = view.latest_slices() if everywhere else [s for s in view.latest_slices() if s.partition in wanted]
        # merge-on-read: log records carry the stored values of the columns the data lacks, and a
        # file group holding a key twice is rewritten from its slice (lakesdk.engine.group_write)
        keep_mor = ctx.merge_on_read
        ctx.targets = {s.file_id: FileGroupTarget(s.partition, s.file_id, s.base_path, s.base_instant,
                                                  has_logs=bool(s.log_files), slice=s if keep_mor else None)
                       for s in slices}
        if keep_mor:
            ctx.slice_ctx = ctx.slice_context(frozenset(i.requested for i in view.visible))
        if slices and op != "insert":  # insert skips the index lookup, as in Hudi
            # the record index names each key's one file group: with a global index, and on a
            # table without partitions whose writes use it (where any index is global); the key
            # ranges of the metadata table's column statistics serve the other indexes
            by_record = everywhere or (not t.config.partition_fields and t.context.index_type() == "RECORD_INDEX")
            job.record_index = _record_index_lookup(t, view, view.timeline) if by_record else None
            job.key_ranges = _record_key_ranges(view) if job.record_index is None else None
            index = job.key_index(slices, _index_slice_ctx(ctx, view, slices), data, global_keys=everywhere)
            if ctx.global_index:   # keys stored in another partition move (or stay) by the ordering
                data = job.tag_global(data, index)
            else:
                data = job.tag(data, index, global_keys=global_delete)
            clustered = {s.file_id: s.partition for s in slices if (s.partition, s.file_id) in busy}
            if clustered:
                hit = job.tagged_file_ids(data, set(clustered))
                _reject_clustered(t.name, op, busy, {(clustered[f], f) for f in hit})
        else:
            data = job.untagged(data)
        if op == "delete":
            data = job.only_tagged(data)
        else:
            data = job.drop_untagged_deletes(data)
            small: dict[str, list[tuple[str, int]]] = {}
            for s in slices:
                if (s.partition, s.file_id) in busy:   # never pack inserts into a file group being clustered
                    continue
                if s.base_path and not t.config.is_mor:  # merge-on-read inserts go to new file groups
                    small.setdefault(s.partition, []).append((s.file_id, s.base_size))
            buckets = plan_insert_buckets(job.untagged_counts(data), small, target_bytes=ctx.target_file_bytes,
                                          small_limit=t.options.small_file_limit,
                                          record_size=ctx.record_size_estimate or DEFAULT_RECORD_SIZE)
            data = job.assign_inserts(data, buckets)
        try:
            return (*job.write_groups(data), {})
        finally:
            job.release(data)

    def _scope(self, prep: Any) -> Callable[[str], bool] | None:
        """The partitions the write's view holds (None: all): those of its rows, unless its key
        index looks in every partition (a global index, a delete of rows without their
        partition fields) or it replaces the whole table.  With the metadata table only their
        ``files`` records are read, and only their write stats checked."""
        if (prep.partitions is None or prep.global_delete or prep.ctx.global_index
                or self.operation == "insert_overwrite_table"):
            return None
        return frozenset(prep.partitions).__contains__

    def _check_overwrite_keys(self, job: Any, data: Any, view: Any, partitions: list[str]) -> None:
        """A global index keeps a key in one partition: an overwrite of some partitions may
        not write keys the table holds in others (refused before any file is written)."""
        t = self.table
        wanted = set(partitions)
        outside = [s for s in view.latest_slices() if s.partition not in wanted]
        if not outside:
            return
        index = job.key_index(outside, _index_slice_ctx(job.ctx, view, outside), data, global_keys=True)
        from lakesdk.merge.ordering import KEY, PART
        found = (index.select([KEY, PART]).slice(0, 5).to_pylist() if isinstance(index, pa.Table)
                 else [r.asDict() for r in index.select(KEY, PART).limit(5).collect()])
        if found:
            shown = ", ".join(f"{r[KEY]!r} (in {r[PART] or '<root>'})" for r in found)
            raise WriteError(
                f"insert_overwrite into {t.name!r} would write keys the table holds in partitions it does not "
                f"overwrite: {shown}; the table's global index (hoodie.index.type) keeps a key in one partition, "
                "so nothing was written. Upsert those records (an upsert moves a key), overwrite their partitions "
                "too, or use insert_overwrite_table")

    def _finalize(self, ctx: WriteContext, stats: list[WriteStat], partitions: list[str] | None) -> None:
        """Remove the files that markers show but no write stat names (failed or retried
        task attempts, speculative duplicates), and write partition metadata for new
        partitions.  Runs before the commit completes."""
        t = self.table
        written = {p for s in stats for p in s.written_paths}
        strays = (ctx.markers.data_files() | ctx.markers.appended_log_files()) - written
        for path in sorted(strays):
            t.storage.delete(path)
        for p in {s.partitionPath for s in stats}:
            if p and not t.storage.exists(f"{p}/{PARTITION_METAFILE}"):
                depth = len(p.split("/"))
                now = datetime.now(UTC)
                text = (f"#partition metadata\n#{now.strftime('%a %b %d %H:%M:%S UTC %Y')}\n"
                        f"commitTime={ctx.instant}\npartitionDepth={depth}\n")
                t.storage.create_exclusive(f"{p}/{PARTITION_METAFILE}", text.encode())


def _marker_names(markers: Any) -> set[str]:
    try:
        return set(markers.all_markers()) if markers is not None else set()
    except Exception:  # noqa: BLE001 - the server may be gone; the names only feed the journal
        return set()


def _release_markers(markers: Any) -> None:
    try:
        if markers is not None:
            markers.delete_all()
    except Exception:  # noqa: BLE001 - the rollback removed the directory already
        pass


def _writer() -> str:
    from lakesdk.concurrency.journal import writer_id
    return writer_id()


def _fields(schema: Any) -> Any:
    from lakesdk.concurrency.journal import schema_fields
    f = schema_fields(schema)
    return None if f is None else tuple(tuple(x) for x in f)


def _group_stats(stats: list[WriteStat]) -> dict[str, list[WriteStat]]:
    out: dict[str, list[WriteStat]] = {}
    for s in sorted(stats, key=lambda s: (s.partitionPath, s.fileId)):
        out.setdefault(s.partitionPath, []).append(s)
    return out


def _checked_view(table: Any, store: Any, timeline: Any, scope: Callable[[str], bool] | None = None) -> FileSystemView:
    """The write's view of the table's files, checked (:meth:`FileSystemView.verify`) against
    its snapshot ``timeline``.  Listed without reading the timeline again after the listing, as
    a read does: the write reads it to create its instant and lists again when a clean,
    restore or archival ran since (``outdated_by``).  Only when the check finds a file missing or
    of another size is the timeline read here: a clean or restore that started after the
    snapshot explains it, and the files are listed and checked again against the newer timeline;
    otherwise the error stands."""
    from lakesdk.exceptions import CorruptFileError, DataFileMissingError, TimeTravelError
    view = FileSystemView(table.storage, table.config, store, timeline, recheck=False, partitions=scope)
    try:
        view.verify()
    except (DataFileMissingError, TimeTravelError, CorruptFileError):
        again = view.current_as_of(store.load())
        if again is view:
            raise
        again.verify()
        return again
    return view


def _typed(err: Exception) -> BaseException:
    """``err`` as lakesdk raises it: an error of a Spark task re-typed on the driver
    (:func:`lakesdk.engine.spark.reraise_task_error`), any other error as it is."""
    from lakesdk.engine.spark import reraise_task_error
    try:
        reraise_task_error(err)
    except Exception as typed:  # noqa: BLE001 - handed back
        return typed
    return err


def _raise_if_cleaned(table: Any, store: Any, timeline: Any, instant: str, err: FileNotFoundError, *,
                      rolled_back: bool = True) -> None:
    """A file this write read is gone: when a clean, restore or rollback (of a commit it read) started
    after the write read the timeline, it deleted the file slice under the write (a conflict: the
    write is rolled back, or its instant is to be aborted by whoever opened it; it can be retried)."""
    seen = {i.requested for i in timeline.instants}
    now = store.load()
    later = [i for i in now.instants if i.action in ("clean", "restore") and i.requested not in seen]
    undone = moved.rollbacks_of_read(store, now, frozenset((i.requested, i.action) for i in timeline.completed))
    later += sorted(set(undone.values()), key=lambda i: i.requested)   # and a rollback of a commit it read
    if not later:
        return
    from lakesdk.exceptions import WriteConflictError
    other = later[0]
    lost = WriteConflictError(
        f"write {instant} to {table.name!r} read a file that {other.action} {other.requested} deleted "
        f"meanwhile ({getattr(err, 'filename', None) or err}): the file slice it planned against is gone. "
        + ("This write was rolled back; retry it" if rolled_back else
           "Abort the instant (lakesdk.table.transaction.abort) and write the batch again in a new one")
        + " (it then reads the newer slices), or retain more versions in cleans",
        other_instant=other.requested)
    raise lost from err


def _raise_if_damaged(table: Any, err: BaseException) -> None:
    """A file this write read is missing or damaged: on a table that keeps the metadata table
    the plan listed no data partition (nothing checked storage before the write started), so
    storage is listed now and the typed error a listing tells is raised (the write's instant
    is rolled back by the caller)."""
    from lakesdk.exceptions import CorruptFileError
    if isinstance(err, (FileNotFoundError, CorruptFileError)):
        from lakesdk.read.plan import diagnose_damage
        diagnose_damage(table.context)


def _reject_clustered(table: str, op: str, busy: dict[tuple[str, str], str], touched: set[tuple[str, str]]) -> None:
    """Hudi's reject-update strategy: a write may not change file groups a pending
    clustering is rewriting (the clustering would drop the change when it completes)."""
    hit = sorted(fg for fg in touched if fg in busy)
    if not hit:
        return
    from lakesdk.exceptions import ClusteringConflictError
    instants = sorted({busy[fg] for fg in hit})
    shown = ", ".join(f"{p or '<root>'}/{f}" for p, f in hit[:5]) + (f" and {len(hit) - 5} more" if len(hit) > 5 else "")
    raise ClusteringConflictError(
        f"{op} into {table!r} would change {len(hit)} file group(s) under pending clustering {', '.join(instants)} "
        f"({shown}); the write was rolled back. Wait for the clustering to finish, or finish it now with "
        f"table.maintenance.cluster() (or roll it back with table.maintenance.rollback({instants[0]!r})), "
        "then retry; inserts of new keys are not affected",
        instant=instants[0], file_groups=tuple(hit))


def _index_slice_ctx(ctx: WriteContext, view: Any, slices: list[Any]) -> Any:
    """How the key index reads the keys of ``slices`` with log files (None: none has any)."""
    if not any(s.log_files for s in slices):
        return None
    return ctx.slice_context(view.log_instants)


def _record_key_ranges(view: Any) -> Callable[[set[str]], dict[tuple[str, str], tuple[str, str, int | None]]] | None:
    """When the view listed its files from a metadata table that keeps ``column_stats``: the
    function from data partitions to the record key range of each base file there ((partition,
    file name) -> least and greatest ``_hoodie_record_key``, as the statistics of its Parquet
    footer say) and its row count (the column's value count): the key index reads neither footer
    nor keys of a file whose range holds no incoming key, nor a footer whose bloom filter it would
    not ask (files without a record, or an MDT dropped since: as before)."""
    from lakesdk.format.column_stats import ValueType, partition_id
    from lakesdk.merge.ordering import KEY as KEY_FIELD
    if not view.from_metadata:
        return None
    def ranges(partitions: set[str]) -> dict[tuple[str, str], tuple[str, str, int | None]]:
        by_id, reader = {partition_id(p): p for p in partitions}, view.metadata     # read when asked
        if reader is None or "column_stats" not in view.metadata_partitions:
            return {}
        try:
            # a few partitions: their records, each sought by its key prefix; more: every file's record of
            # the column in one pass (each prefix sought on its own would read the same blocks again)
            stats = reader.column_ranges([KEY_FIELD], sorted(partitions) if len(partitions) <= 32 else None)
        except FileNotFoundError:
            return {}      # the MDT was dropped or rebuilt meanwhile: every footer is read
        out = {}
        for (pid, name), cols in stats.items():
            r = cols.get(KEY_FIELD)
            part = by_id.get(pid)
            if (part is not None and r is not None and r.value_type is ValueType.STRING
                    and isinstance(r.min_value, str) and isinstance(r.max_value, str)):
                rows = r.value_count if isinstance(r.value_count, int) and r.value_count >= 0 else None
                out[(part, name)] = (r.min_value, r.max_value, rows)
        return out
    return ranges


def _record_index_lookup(t: Any, view: Any, timeline: Any) -> Callable[[list[Any], Any], list[Any]] | None:
    """When the table has a record index, built before the plan's snapshot (the handle's config and the
    view's MDT read name it): the function keeping, of the file slices a global key index would read,
    those of the file groups the index names for the incoming keys (all of them when the MDT changed
    past the view's timeline, or names a file group the view lacks); else None."""
    import pyarrow.compute as pc

    from lakesdk.commit.table_properties import read_properties
    from lakesdk.format.metadata_table import available_partitions
    from lakesdk.format.record_index import PARTITION
    from lakesdk.read.metadata_table import MetadataTableReader
    if PARTITION not in available_partitions(t.config.props) or PARTITION not in (
            view.metadata_partitions if view.metadata is not None else available_partitions(
                read_properties(t.storage)[1].props)):
        return None

    def lookup(slices: list[Any], keys: Any) -> list[Any]:
        reader = view.metadata if view.metadata is not None else MetadataTableReader(t.storage, timeline)
        stale = reader.newer_than_timeline     # the MDT changed past the plan's snapshot: keys may be elsewhere
        try:
            found = {} if stale else reader.record_locations(str(k) for k in pc.unique(keys).to_pylist())
        except FileNotFoundError:
            return slices
        groups = {(loc.partition or "", loc.file_id) for loc in found.values()}
        kept = [s for s in slices if (s.partition, s.file_id) in groups]
        return kept if not stale and len({(s.partition, s.file_id) for s in kept}) == len(groups) else slices
    return lookup
