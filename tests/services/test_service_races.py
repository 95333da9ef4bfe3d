"""Table services racing writers: each service (compaction, clustering, clean, archival) runs
in a loop in one process while two writer processes (optimistic concurrency, storage lock)
upsert overlapping keys of a partitioned table with an ordering field.  Afterwards the table,
read by lakesdk and by the ``hudi`` reader, is the fold of exactly the commits that landed:
in completion order, a version of a key replaces the current one when its ordering value is
not smaller (event-time ordering).  A write that did not land failed with a conflict error.
A writer whose batch a pending clustering refused (Hudi's reject-update strategy) waits for
that clustering to finish and tries the batch again (at most three times): otherwise every
batch of a round could fail while one clustering runs, and the round would prove nothing.

On merge-on-read tables the clean and archival loops compact first in each round: without a
compaction a file group never gets a second slice, and there is nothing to clean or keep.
The ``clean_versions`` loop keeps one file version: it deletes slices that a running write
planned against, which then fails with a conflict error."""

from __future__ import annotations

import os

import pandas as pd
import pytest

import lakesdk as lk

from ..helpers import check_no_leftovers, hudi_read, hudi_rows, values
from ..service_rounds import Round, play, race

CASES = [pytest.param(tt, s, id=f"{tt}-{s}") for s in ("compaction", "clustering", "clean", "clean_versions", "archival")
         for tt in ("cow", "mor") if not (s == "compaction" and tt == "cow")]


@pytest.mark.parametrize("table_type,service", CASES)
def test_table_service_racing_two_writers_keeps_the_fold_of_landed_commits(tmp_path, table_type, service):
    race(str(tmp_path), table_type, service, batches=8, rows=200, keys=20)


def test_compaction_loop_and_writers_compacting_inline_keep_the_fold_of_landed_commits(tmp_path):
    """Three processes compact the same table: the service loop, and each writer after every
    second delta commit (``compact_every=2``)."""
    race(str(tmp_path), "mor", "compaction", batches=8, rows=200, keys=20, inline=2)


@pytest.mark.parametrize("table_type,service", CASES)
def test_table_service_racing_two_writers_at_scale(tmp_path, table_type, service):
    """2 writers x 40 batches x 150 keys of a 2,000-row, 4-partition table (the race as the
    issue that found the compaction loss described it)."""
    race(str(tmp_path), table_type, service, batches=40, rows=2000, keys=150)


# -- deterministic cases of the compaction race -------------------------------------------------------
def mor_table(tmp_path):
    lake = lk.Lake(str(tmp_path), concurrency="optimistic", lock="in_process")
    t = lake.create_table("t", key="id", table_type="mor", ordering="ts")
    t.upsert(pd.DataFrame({"id": [1, 2], "ts": [1, 1], "v": ["base", "base"]}))
    t.upsert(pd.DataFrame({"id": [1], "ts": [2], "v": ["first update"]}))   # a log file to compact
    return t, lk.open_table(t.path, concurrency="optimistic", lock="in_process")


def test_delta_commit_completing_while_a_compaction_is_planned_is_not_lost(tmp_path, monkeypatch):
    """The write completes after the planner listed the file slices and before the compaction
    instant exists: its log file belongs to the slice the compaction replaces (it completed
    before the instant), so the plan must include it, or the new base file hides it."""
    from lakesdk.services import compaction
    t, other = mor_table(tmp_path)
    original = compaction.plan_compaction
    landed = []

    def plan_then_a_write_lands(table, **kw):
        plan = original(table, **kw)
        if not landed:
            landed.append(other.upsert(pd.DataFrame({"id": [2], "ts": [3], "v": ["landed while planning"]})))
        return plan
    monkeypatch.setattr(compaction, "plan_compaction", plan_then_a_write_lands)
    res = t.maintenance.compact()
    assert landed and res is not None and landed[0].completed < res.instant
    want = {1: "first update", 2: "landed while planning"}
    assert values(t) == want
    assert hudi_rows(t.path) == sorted(want.items())
    ro = t.read(read_optimized=True).to_pandas()          # the compacted base file alone
    assert dict(zip(ro.id, ro.v)) == want


def test_delta_commit_completing_after_a_compaction_requested_by_a_clock_ahead_is_kept(tmp_path, monkeypatch):
    """A compaction scheduled by a process whose clock runs ahead gets an instant time later
    than the current time; a write that completes after it must still get a later completion
    time, or its log file is taken for part of the compacted slice, which the plan (made
    before the write completed) does not hold."""
    from datetime import timedelta

    from lakesdk.format.instant import format_instant_time, parse_instant_time
    from lakesdk.format.timeline import InstantClock
    from lakesdk.table.write import WriteOperation
    t, other = mor_table(tmp_path)
    real_next = InstantClock.next.__func__
    original = WriteOperation._finalize
    plans = []

    def ahead(cls, after=None):   # another machine's clock, 300 ms ahead of this one
        return format_instant_time(parse_instant_time(real_next(cls, after)) + timedelta(milliseconds=300))

    def compaction_scheduled_meanwhile(self, ctx, stats, partitions):
        if not plans and self.table is other:
            with monkeypatch.context() as m:
                m.setattr(InstantClock, "next", classmethod(ahead))
                plans.append(t.maintenance.schedule_compaction())
        return original(self, ctx, stats, partitions)
    monkeypatch.setattr(WriteOperation, "_finalize", compaction_scheduled_meanwhile)
    r = other.upsert(pd.DataFrame({"id": [2], "ts": [3], "v": ["slow writer"]}))
    assert plans[0].instant is not None and r.completed > plans[0].instant
    t.maintenance.compact(plans[0].instant)
    want = {1: "first update", 2: "slow writer"}
    assert values(t) == want
    assert hudi_rows(t.path) == sorted(want.items())


def test_upsert_racing_a_compaction_and_a_clean_does_not_duplicate_keys(tmp_path, monkeypatch):
    """Between the write reading the timeline and listing the files, a compaction completes
    and a clean deletes the slice the write's timeline still takes for the latest one.  The
    listing must not be taken for that timeline's state (the file group would look empty
    and the updated key would be inserted a second time)."""
    from lakesdk.services.transaction import InstantTransaction
    t, other = mor_table(tmp_path)
    original = InstantTransaction.begin.__func__      # the write opens its instant after listing the files
    served = []

    def services_run_meanwhile(cls, ctx, action, **kw):
        if not served and ctx is t.context:
            other.maintenance.compact()
            other.upsert(pd.DataFrame({"id": [1], "ts": [4], "v": ["after the compaction"]}))
            served.append(other.maintenance.clean(retain_commits=1))   # the pre-compaction slice goes
        return original(cls, ctx, action, **kw)
    monkeypatch.setattr(InstantTransaction, "begin", classmethod(services_run_meanwhile))
    t.upsert(pd.DataFrame({"id": [2], "ts": [5], "v": ["racing write"]}))
    assert served[0] is not None and served[0].deleted
    want = {1: "after the compaction", 2: "racing write"}
    df = t.read().to_pandas()
    assert df.id.is_unique and dict(zip(df.id, df.v)) == want
    assert hudi_rows(t.path) == sorted(want.items())


def test_write_whose_file_slice_a_clean_deletes_meanwhile_fails_as_a_conflict(tmp_path, monkeypatch):
    """A clean keeping one file version deletes the slice a running write reads (a compaction
    superseded it after the write listed the files): the write fails with a conflict error,
    is rolled back and leaves the table as the other commits made it."""
    from lakesdk.engine.local import LocalWriteJob
    t, other = mor_table(tmp_path)
    original = LocalWriteJob.key_index
    served = []

    def services_run_meanwhile(self, slices, *args, **kwargs):
        if not served:
            other.maintenance.compact()
            served.append(other.maintenance.clean(policy="keep_latest_file_versions", retain_versions=1))
        return original(self, slices, *args, **kwargs)
    monkeypatch.setattr(LocalWriteJob, "key_index", services_run_meanwhile)
    with pytest.raises(lk.WriteConflictError) as e:
        t.upsert(pd.DataFrame({"id": [2], "ts": [5], "v": ["racing write"]}))
    assert served[0].instant in str(e.value) and e.value.other_instant == served[0].instant
    want = {1: "first update", 2: "base"}
    assert values(t) == want and hudi_rows(t.path) == sorted(want.items())
    assert not t.timeline.pending
    check_no_leftovers(t, {i.requested for i in t.timeline.commits})


@pytest.mark.spark
def test_spark_write_whose_file_slice_a_clean_deletes_meanwhile_fails_as_a_conflict(tmp_path, monkeypatch, spark):
    """The same race on the Spark engine, between the key lookup and the tasks that rewrite
    the file groups of a copy-on-write table: the task reading the deleted base file failed,
    and the write stopped with a WriteError naming a FileNotFoundError instead of the
    conflict (found by writers on a Spark standalone cluster racing a service process)."""
    from lakesdk.engine.spark import SparkWriteJob
    lake = lk.Lake(str(tmp_path), concurrency="optimistic", lock="in_process")
    t = lake.create_table("t", key="id", ordering="ts")
    t.upsert(pd.DataFrame({"id": [1, 2], "ts": [1, 1], "v": ["base", "base"]}))
    # the other writer on the local engine, which "auto" is beside Spark in this process only
    # (with a Connect server elsewhere it runs Spark jobs: its own write_groups would serve the race again)
    other = lk.open_table(t.path, concurrency="optimistic", lock="in_process", options=lk.TableOptions(engine="local"))
    writer = lk.open_table(t.path, spark=spark, concurrency="optimistic", lock="in_process",
                           options=lk.TableOptions(engine="spark"))
    original = SparkWriteJob.write_groups
    served = []

    def others_meanwhile(self, *args, **kwargs):
        if not served:
            other.upsert(pd.DataFrame({"id": [1], "ts": [2], "v": ["other write"]}))   # a new slice
            served.append(other.maintenance.clean(policy="keep_latest_file_versions", retain_versions=1))
        return original(self, *args, **kwargs)
    monkeypatch.setattr(SparkWriteJob, "write_groups", others_meanwhile)
    with pytest.raises(lk.WriteConflictError) as e:
        writer.upsert(pd.DataFrame({"id": [2], "ts": [5], "v": ["racing write"]}))
    assert served[0].deleted and served[0].instant in str(e.value) and e.value.other_instant == served[0].instant
    want = {1: "other write", 2: "base"}
    assert values(t) == want and hudi_rows(t.path) == sorted(want.items())
    assert not t.timeline.pending
    check_no_leftovers(t, {i.requested for i in t.timeline.commits})


def test_transaction_batch_whose_file_slice_a_clean_deletes_meanwhile_fails_as_a_conflict(tmp_path, monkeypatch):
    """The same race for a batch written into an instant opened elsewhere (the Kafka sink's
    participants, ``lakesdk.table.transaction.write_batch``): it failed with a raw
    FileNotFoundError (found by the service soak with the Kafka sink); it is a conflict
    naming the clean, and aborting the instant leaves the table as the other commits made it."""
    from lakesdk.engine.local import LocalWriteJob
    from lakesdk.table import transaction
    t, other = mor_table(tmp_path)
    sink = lk.open_table(t.path, concurrency="optimistic", lock="in_process",
                         options=lk.TableOptions(engine="local", markers="direct"))
    original = LocalWriteJob.key_index
    served = []

    def services_run_meanwhile(self, slices, *args, **kwargs):
        if not served:
            other.maintenance.compact()
            served.append(other.maintenance.clean(policy="keep_latest_file_versions", retain_versions=1))
        return original(self, slices, *args, **kwargs)
    monkeypatch.setattr(LocalWriteJob, "key_index", services_run_meanwhile)
    txn = transaction.begin(sink)
    with pytest.raises(lk.WriteConflictError) as e:
        transaction.write_batch(sink, txn, pd.DataFrame({"id": [2], "ts": [5], "v": ["racing batch"]}))
    assert served[0].instant in str(e.value) and e.value.other_instant == served[0].instant
    assert "Abort the instant" in str(e.value)
    transaction.abort(sink, txn)
    want = {1: "first update", 2: "base"}
    assert values(t) == want and hudi_rows(t.path) == sorted(want.items())
    assert not t.timeline.pending
    check_no_leftovers(t, {i.requested for i in t.timeline.commits})


def test_compaction_executed_by_another_process_is_left_to_it(tmp_path, monkeypatch):
    """Two processes compacting (two writers compacting inline) must not both execute one
    pending compaction: each would take the other's base files for leftovers of a failed
    attempt and delete them, or overwrite a completed base file while it is read."""
    from lakesdk.engine import local, tasks
    t, other = mor_table(tmp_path)
    original = tasks.compact_file_slice
    meanwhile: list = []
    fired = []

    def other_process_compacts_too(*a, **kw):
        if not fired:
            fired.append(True)
            meanwhile.append(other.maintenance.compact())
            with pytest.raises(lk.CompactionConflictError) as e:
                other.maintenance.compact(plan.instant)
            meanwhile.append(e.value)
        return original(*a, **kw)
    monkeypatch.setattr(tasks, "compact_file_slice", other_process_compacts_too)
    monkeypatch.setattr(local, "compact_file_slice", other_process_compacts_too)   # the local engine's name
    plan = t.maintenance.schedule_compaction()
    res = t.maintenance.compact(plan.instant)
    assert meanwhile[0] is None and plan.instant in str(meanwhile[1]) and res.instant == plan.instant
    want = {1: "first update", 2: "base"}
    ro = t.read(read_optimized=True).to_pandas()
    assert dict(zip(ro.id, ro.v)) == want and values(t) == want and hudi_rows(t.path) == sorted(want.items())
    assert not t.timeline.pending
    check_no_leftovers(t, {i.requested for i in t.timeline.commits})


def test_clean_executed_by_another_process_is_left_to_it(tmp_path, monkeypatch):
    """Two cleaners (two service loops, or writers cleaning after each write) each finish
    the pending cleans they find: one clean must not be executed by both (the second's
    requested -> inflight failed with CorruptTimelineError; found by the soak of every
    service racing writers)."""
    lake = lk.Lake(str(tmp_path), concurrency="optimistic", lock="in_process")
    t = lake.create_table("t", key="id", ordering="ts")
    for i in range(3):
        t.upsert(pd.DataFrame({"id": [1, 2], "ts": [i, i], "v": [f"v{i}", f"v{i}"]}))
    other = lk.open_table(t.path, concurrency="optimistic", lock="in_process")
    storage = t.context.storage
    original = type(storage).delete
    meanwhile: list = []
    fired: list = []

    def other_cleaner_too(self, path, *a, **kw):
        if not fired and not path.startswith(".hoodie"):
            fired.append(True)
            meanwhile.append(other.maintenance.clean(retain_commits=1))
            pending = [i.requested for i in other.timeline.pending if i.action == "clean"]
            with pytest.raises(lk.CleanConflictError) as e:
                from lakesdk.services.clean import execute_clean
                execute_clean(other.context, pending[0])
            meanwhile.append(e.value)
        return original(self, path, *a, **kw)
    monkeypatch.setattr(type(storage), "delete", other_cleaner_too)
    res = t.maintenance.clean(retain_commits=1)
    monkeypatch.undo()
    assert meanwhile[0] is None and res is not None and res.instant in str(meanwhile[1]) and res.deleted
    assert values(t) == {1: "v2", 2: "v2"} and hudi_rows(t.path) == [(1, "v2"), (2, "v2")]
    assert not t.timeline.pending
    check_no_leftovers(t, {i.requested for i in t.timeline.commits})


def test_clustering_executed_by_another_process_is_left_to_it(tmp_path, monkeypatch):
    """Two processes finishing the same pending clustering each wrote its output file groups;
    the files of the one whose commit did not land stayed, a second copy of every row of the
    clustered file groups (found by the soak of every service racing writers: duplicate keys)."""
    from lakesdk.engine import tasks
    lake = lk.Lake(str(tmp_path), concurrency="optimistic", lock="in_process",
                   options=lk.TableOptions(engine="local"))
    t = lake.create_table("t", key="id", partition_by="p", ordering="ts")
    for i in range(3):
        t.insert(pd.DataFrame({"id": [10 * i, 10 * i + 1], "p": ["a", "a"], "ts": [i, i], "v": [f"v{i}"] * 2}))
    other = lk.open_table(t.path, concurrency="optimistic", lock="in_process",
                          options=lk.TableOptions(engine="local"))
    original = tasks.cluster_group
    meanwhile: list = []

    def other_process_clusters_too(*a, **kw):
        if not meanwhile:
            meanwhile.append(other.maintenance.cluster())
            with pytest.raises(lk.ClusteringConflictError) as e:
                other.maintenance.cluster(plan.instant)
            meanwhile.append(e.value)
        return original(*a, **kw)
    monkeypatch.setattr(tasks, "cluster_group", other_process_clusters_too)
    plan = t.maintenance.schedule_clustering(single_group=True)
    res = t.maintenance.cluster(plan.instant)
    monkeypatch.undo()
    assert meanwhile[0] is None and plan.instant in str(meanwhile[1]) and res.instant == plan.instant
    df = t.read().to_pandas()
    assert df.id.is_unique and sorted(df.id) == [0, 1, 10, 11, 20, 21]
    assert sorted(r["id"] for r in hudi_read(t.path)) == [0, 1, 10, 11, 20, 21]
    assert not t.timeline.pending
    check_no_leftovers(t, {i.requested for i in t.timeline.commits})


def test_clean_keeps_the_files_a_pending_clustering_reads(tmp_path):
    """Two clusterings planned from the same latest slices; the first replaces them; a clean
    then deleted the replaced files, which the second (scheduled, pending) still reads: it
    failed on a missing file (found by the soak).  Cleans keep the input files of pending
    clusterings, and the second clustering is refused as changed (rolled back) instead."""
    lake = lk.Lake(str(tmp_path), options=lk.TableOptions(engine="local"))
    t = lake.create_table("t", key="id", partition_by="p", ordering="ts")
    for i in range(2):
        t.insert(pd.DataFrame({"id": [10 * i, 10 * i + 1], "p": ["a", "a"], "ts": [i, i], "v": [f"v{i}"] * 2}))
    first = t.maintenance.plan_clustering(single_group=True)
    second = t.maintenance.plan_clustering(single_group=True)
    from lakesdk.services.clustering_plan import schedule_clustering
    t.maintenance.cluster(schedule_clustering(t.context, first).instant)
    pending = schedule_clustering(t.context, second)
    from lakesdk.format.clustering_plan import ClusteringPlanData
    from lakesdk.format.instant import Instant
    plan = t.context.store.plan(Instant("clustering", "requested", pending.instant), ClusteringPlanData)
    inputs = {sl.base_file for g in plan.groups for sl in g.slices}
    res = t.maintenance.clean(policy="keep_latest_file_versions", retain_versions=1)
    deleted = {f.rsplit("/", 1)[-1] for f in (res.deleted if res else ())}
    assert inputs and not inputs & deleted       # replaced, but the pending clustering's input
    with pytest.raises(lk.ClusteringConflictError, match="rolled back"):
        t.maintenance.cluster(pending.instant)
    res = t.maintenance.clean(policy="keep_latest_file_versions", retain_versions=1)
    assert res is not None and inputs <= {f.rsplit("/", 1)[-1] for f in res.deleted}
    assert values(t) == {0: "v0", 1: "v0", 10: "v1", 11: "v1"}
    assert sorted(r["id"] for r in hudi_read(t.path)) == [0, 1, 10, 11]


@pytest.mark.parametrize("table_type", ["cow", "mor"])
def test_a_write_never_shares_its_instant_time_with_a_table_service(tmp_path, monkeypatch, table_type):
    """Two processes can take the same millisecond: a writer's ``T.commit.requested`` and a
    clustering's ``T.clustering.requested`` are different files, so the exclusive create let
    both through, and each then cleaned up the other's files (data files, markers and heartbeat
    are keyed by the instant time): under load a clustering that rolled itself back deleted a
    base file of the write that had just committed.  An instant time now names one instant."""
    from lakesdk.format.timeline import InstantClock
    lake = lk.Lake(str(tmp_path), concurrency="optimistic", lock="in_process")
    t = lake.create_table("t", key="id", partition_by="p", table_type=table_type, ordering="ts")
    t.upsert(pd.DataFrame({"id": [1, 2], "p": ["a", "a"], "ts": [1, 1], "v": ["x", "x"]}))
    t.upsert(pd.DataFrame({"id": [3], "p": ["a"], "ts": [1], "v": ["x"]}))       # a second file group
    plan = t.maintenance.schedule_clustering(single_group=True)
    taken = plan.instant
    real_next = InstantClock.next.__func__
    calls = []

    def same_millisecond(cls, after=None):   # the writer's clock hands it the clustering's time
        calls.append(after)
        return taken if len(calls) == 1 else real_next(cls, after)
    monkeypatch.setattr(InstantClock, "next", classmethod(same_millisecond))
    r = t.upsert(pd.DataFrame({"id": [4], "p": ["b"], "ts": [1], "v": ["new"]}))
    monkeypatch.undo()
    assert r.instant != taken and len(calls) >= 2
    timeline = lk.open_table(t.path).timeline
    assert [i.action for i in timeline if i.requested == taken] == ["clustering"]
    t.maintenance.cluster(taken)
    assert values(t) == {1: "x", 2: "x", 3: "x", 4: "new"}
    assert t.inspect.check().ok


def test_write_whose_timeline_archival_moves_meanwhile_reads_the_history(tmp_path, monkeypatch):
    """A write loaded the timeline, then archival in another process moved completed instants
    into the timeline history before the write read their commit metadata (to check that
    their files are there): the write failed with InstantNotFoundError "timeline file ... is
    missing" (found by the service soak).  Their metadata is read from the history."""
    from lakesdk.read.view import FileSystemView
    lake = lk.Lake(str(tmp_path), concurrency="optimistic", lock="in_process")
    t = lake.create_table("t", key="id", ordering="ts")
    for i in range(6):
        t.upsert(pd.DataFrame({"id": [i % 3], "ts": [i], "v": [f"v{i}"]}))
    writer = lk.open_table(t.path, concurrency="optimistic", lock="in_process")
    original = FileSystemView.verify
    archived: list = []

    def archival_meanwhile(self, *a, **kw):
        if not archived:
            archived.append(t.maintenance.archive(min_commits=1, max_commits=2))
        return original(self, *a, **kw)
    monkeypatch.setattr(FileSystemView, "verify", archival_meanwhile)
    r = writer.upsert(pd.DataFrame({"id": [0], "ts": [9], "v": ["after archival"]}))
    monkeypatch.undo()
    assert archived[0].archived and r.instant
    want = {0: "after archival", 1: "v4", 2: "v5"}
    assert values(t) == want and hudi_rows(t.path) == sorted(want.items())


# -- writers of every kind: the ZooKeeper lock, the Kafka sink, a Spark standalone cluster -------------
def round_of(kind: str, request, **kw) -> Round:
    """A :class:`Round` of ``kind`` with the fixture it needs (skips where it is not available)."""
    if kind == "zookeeper":
        zk = request.getfixturevalue("zk")
        return Round(kind, lock="zookeeper", lock_options={"zk_connect": zk.connect, "timeout_s": 300,
                                                           "zk_session_timeout_s": 10}, **kw)
    if kind == "kafka":
        return Round(kind, broker=request.getfixturevalue("broker"), **kw)
    if kind == "spark":
        return Round(kind, spark=request.getfixturevalue("spark_cluster"), **kw)
    return Round(kind, **kw)


@pytest.mark.zookeeper
def test_writers_and_services_with_the_zookeeper_lock_keep_the_fold(tmp_path, request):
    """Two writers and two service processes whose commits the ZooKeeper lock (a real
    server) guards instead of the storage lock."""
    r = round_of("zookeeper", request, batches=6)
    out = play(str(tmp_path), 7, r)
    assert out["writer_commits"] >= 1
    from kazoo.client import KazooClient
    zk = KazooClient(hosts=r.lock_options["zk_connect"])
    zk.start(timeout=10)
    try:                       # the table's lock node: the commits took the ZooKeeper lock
        assert zk.get_children("/lakesdk/locks")
    finally:
        zk.stop()
        zk.close()


@pytest.mark.kafka
def test_kafka_sink_and_a_writer_racing_every_service_keep_the_fold(tmp_path, request):
    """The exactly-once Kafka sink (optimistic concurrency, the storage lock) writes batches a
    producer sends while a writer upserts the same keys and two service processes run random
    table services: the sink's commits cover every offset once, and the table is the fold of
    the sink's and the writer's landed commits."""
    out = play(str(tmp_path), 11, round_of("kafka", request, batches=6))
    assert out["sink_commits"] >= 1 and out["writer_commits"] >= 1


@pytest.mark.cluster
@pytest.mark.timeout(300)
def test_writers_on_a_spark_standalone_cluster_racing_a_service_keep_the_fold(tmp_path, request):
    """Two writers whose writes run as jobs on a Spark standalone cluster (master and one
    worker started by the test, an executor per writer) race a service process running a
    random service after each write that landed.  Three batches a writer: a write on the
    cluster takes seconds here, so the soak's longer rounds stay in the soak."""
    out = play(str(tmp_path), 3, round_of("spark", request, batches=3, services=1))
    assert out["writer_commits"] >= 1


SOAK_KINDS = ("storage", "zookeeper", "kafka", "spark")


@pytest.mark.soak
@pytest.mark.skipif(not os.environ.get("LAKESDK_SOAK_MINUTES"), reason="set LAKESDK_SOAK_MINUTES to run the soak")
def test_every_service_racing_writers_soak(tmp_path, request):
    """For LAKESDK_SOAK_MINUTES minutes: rounds of writer processes racing two service
    processes that each run a random service a round (compaction, clustering, both clean
    policies, archival beyond savepoints or not, savepoints made and deleted), on a random
    table type; after each round the table is the fold of the landed commits for lakesdk and
    the ``hudi`` reader, with nothing left behind.  The kinds of rounds (see
    tests/service_rounds.py) take turns: two writers with the storage lock, the same with the
    ZooKeeper lock, a writer and the Kafka sink, two writers on a Spark standalone cluster.
    A round's seed names its kind (seed % number of kinds available)."""
    import random
    import shutil
    import time
    stop_at = time.monotonic() + float(os.environ["LAKESDK_SOAK_MINUTES"]) * 60
    seed = int(os.environ.get("LAKESDK_SOAK_SEED") or random.randrange(1 << 30))
    keep = os.environ.get("LAKESDK_SOAK_KEEP")       # a folder: failing rounds' tables are copied there
    kinds: dict[str, Round] = {}
    for kind in SOAK_KINDS:
        try:
            kinds[kind] = round_of(kind, request, batches=5 if kind == "spark" else 15)
        except pytest.skip.Exception as e:
            print(f"soak: no {kind} rounds: {e}")
    names = list(kinds)
    rng = random.Random(seed)
    done: dict[str, int] = {}
    rounds = 0
    while time.monotonic() < stop_at:
        round_seed = rng.randrange(1 << 30) * len(names) + rounds % len(names)    # the kinds take turns
        kind = names[round_seed % len(names)]
        d = tmp_path / f"r{rounds}"
        d.mkdir()
        try:
            play(str(d), round_seed, kinds[kind])
        except BaseException as e:
            if keep:
                shutil.copytree(d, os.path.join(keep, f"round-{round_seed}"), dirs_exist_ok=True)
            raise AssertionError(f"{kind} round, round seed {round_seed} (soak seed {seed}): {e}") from e
        rounds += 1
        done[kind] = done.get(kind, 0) + 1
    print(f"soak seed {seed}: {rounds} rounds {done}")
    assert rounds
