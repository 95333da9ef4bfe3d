"""Table services that lose a race to another process, interleaved on cue.

Scheduling: another process schedules a clustering of the same file groups between this
process's plan and its schedule, or just before this one takes the table lock to create its
instant.  The loser raises ClusteringConflictError (a typed conflict, nothing written), and
``cluster()`` plans again.

Claims: an executor stalls after doing its work and before its commit, long enough for its
heartbeat to expire; another process claims the instant, redoes the work and is about to
commit when the stalled one wakes up.  The stalled one's commit is refused with the
service's conflict error (the claim's fence) and the other one's commit lands."""

from __future__ import annotations

import os
import threading
import time
from contextlib import contextmanager

import pandas as pd
import pytest

import lakesdk as lk

from ..helpers import check_no_leftovers, hudi_read, values

WAIT_S = 120          # a deadline for events that come within milliseconds (never reached when the test passes)


def clustering_table(tmp_path):
    opts = lk.TableOptions(engine="local")
    lake = lk.Lake(str(tmp_path), concurrency="optimistic", lock="in_process", options=opts)
    t = lake.create_table("t", key="id", partition_by="p", ordering="ts")
    for i in range(3):
        t.insert(pd.DataFrame({"id": [10 * i, 10 * i + 1], "p": ["a", "a"], "ts": [i, i], "v": [f"v{i}"] * 2}))
    return t, lk.open_table(t.path, concurrency="optimistic", lock="in_process", options=opts)


CLUSTERED = {0: "v0", 1: "v0", 10: "v1", 11: "v1", 20: "v2", 21: "v2"}


# -- two schedules of a clustering of the same file groups -------------------------------------------
def test_clustering_scheduled_by_another_process_before_the_lock_is_refused(tmp_path, monkeypatch):
    """The schedule checked the pending clusterings before taking the lock: another process
    scheduling the same file groups in between made two pending clusterings of one file
    group.  The check runs under the lock now and refuses with a typed conflict."""
    from lakesdk.concurrency import instants
    from lakesdk.services.clustering_plan import schedule_clustering
    t, other = clustering_table(tmp_path)
    plan = t.maintenance.plan_clustering(single_group=True)
    original = instants.holding
    theirs: list = []

    @contextmanager
    def another_schedules_first(lock):
        if not theirs:
            theirs.append(None)
            theirs[0] = other.maintenance.schedule_clustering(single_group=True)
        with original(lock):
            yield
    monkeypatch.setattr(instants, "holding", another_schedules_first)
    with pytest.raises(lk.ClusteringConflictError) as e:
        schedule_clustering(t.context, plan)
    monkeypatch.undo()
    assert e.value.instant == theirs[0].instant and set(e.value.file_groups) == set(plan.file_groups)
    assert [i.requested for i in t.timeline.pending] == [theirs[0].instant]
    other.maintenance.cluster(theirs[0].instant)
    assert values(t) == CLUSTERED and t.inspect.check().ok


def test_cluster_losing_the_schedule_to_another_process_plans_again(tmp_path, monkeypatch):
    """Two service processes clustering: the other one schedules the file groups this one
    has just planned.  This one stopped with a plain LakeError ("already under pending
    clustering ... plan again", found by the service soak); it plans again (nothing is left
    to cluster here) and leaves the other's clustering to it."""
    from lakesdk.services import clustering, clustering_plan
    t, other = clustering_table(tmp_path)
    original = clustering.plan_clustering
    plans: list = []
    theirs: list = []

    def plan_then_another_schedules(table, **kw):
        plan = original(table, **kw)
        if not theirs:
            theirs.append(None)
            theirs[0] = other.maintenance.schedule_clustering(single_group=True)
        plans.append(plan)
        return plan
    # the clustering's own plans, and the other process's through its table handle
    monkeypatch.setattr(clustering, "plan_clustering", plan_then_another_schedules)
    monkeypatch.setattr(clustering_plan, "plan_clustering", plan_then_another_schedules)
    assert t.maintenance.cluster(single_group=True) is None
    monkeypatch.undo()
    assert len(plans) == 3 and plans[1].groups and not plans[2].groups   # theirs, ours (lost), ours again
    assert [i.requested for i in t.timeline.pending] == [theirs[0].instant]
    assert other.maintenance.cluster(theirs[0].instant).instant == theirs[0].instant
    assert values(t) == CLUSTERED and t.inspect.check().ok


# -- a stalled executor taken over by another process --------------------------------------------------
def _taken_over_while_stalled(monkeypatch, t, instant, module, name, run_first, run_second):
    """``run_first()`` executes the service instant and stalls after ``module.name`` returns
    (its work done, its commit next); its heartbeat stops and is made older than the
    expiry; ``run_second()`` (another process) then claims the instant, does the work and
    stalls at the same point.  The first resumes and tries to commit, then the second.
    Returns the outcome (result or exception) of each."""
    from lakesdk.services import claim
    beats: list = []

    class Recorded(claim.Heartbeat):
        def start(self):
            beats.append(self)
            return super().start()
    monkeypatch.setattr(claim, "Heartbeat", Recorded)
    original = getattr(module, name)
    stalled = [threading.Event(), threading.Event()]
    resume = [threading.Event(), threading.Event()]
    calls: list = []
    lock = threading.Lock()

    def stall_after(*a, **kw):
        out = original(*a, **kw)
        with lock:
            n = len(calls)
            calls.append(n)
        if n < 2:
            stalled[n].set()
            assert resume[n].wait(WAIT_S)
        return out
    monkeypatch.setattr(module, name, stall_after)
    outcome: list = [None, None]

    def runner(i, fn):
        try:
            outcome[i] = fn()
        except BaseException as e:  # noqa: BLE001 - the outcome is asserted by the test
            outcome[i] = e
    first = threading.Thread(target=runner, args=(0, run_first))
    second = threading.Thread(target=runner, args=(1, run_second))

    def reached(i, thread):   # the stall, or the end of a run that never got there (it failed)
        deadline = time.monotonic() + WAIT_S
        while thread.is_alive() and time.monotonic() < deadline:
            if stalled[i].wait(0.05):
                return True
        return stalled[i].is_set()
    try:
        first.start()
        assert reached(0, first), outcome
        beats[0].abandon()                                   # the stall: no more beats, and the last one expires
        old = time.time() - 3600
        os.utime(os.path.join(t.path, ".hoodie", ".heartbeat", instant), (old, old))
        second.start()
        assert reached(1, second), outcome
        resume[0].set()
        first.join(WAIT_S)
        resume[1].set()
        second.join(WAIT_S)
    finally:
        for e in resume:
            e.set()
    assert not first.is_alive() and not second.is_alive()
    monkeypatch.undo()
    return outcome


def _check_table_after(t, want):
    df = t.read().to_pandas()
    assert df.id.is_unique and dict(zip(df.id, df.v)) == want
    assert {r["id"]: r["v"] for r in hudi_read(t.path)} == want
    assert not t.timeline.pending and t.inspect.check().ok
    check_no_leftovers(t, {i.requested for i in t.timeline.commits})


def test_stalled_clustering_taken_over_by_another_process_does_not_commit(tmp_path, monkeypatch):
    """The process that took the clustering over deleted the stalled one's output files as
    leftovers of a failed attempt; the stalled one's commit then named those deleted files
    (or completed the instant under the other's feet).  Its commit is refused now."""
    from lakesdk.engine import tasks
    t, other = clustering_table(tmp_path)
    plan = t.maintenance.schedule_clustering(single_group=True)
    first, second = _taken_over_while_stalled(
        monkeypatch, t, plan.instant, tasks, "cluster_group",
        lambda: t.maintenance.cluster(plan.instant), lambda: other.maintenance.cluster(plan.instant))
    assert isinstance(first, lk.ClusteringConflictError) and first.held_elsewhere, first
    assert "taken over" in str(first)
    assert not isinstance(second, BaseException) and second.instant == plan.instant, second
    assert [i.requested for i in t.timeline.commits if i.action == "clustering"] == [plan.instant]
    _check_table_after(t, CLUSTERED)


def test_stalled_compaction_taken_over_by_another_process_does_not_commit(tmp_path, monkeypatch):
    from lakesdk.engine import local
    lake = lk.Lake(str(tmp_path), concurrency="optimistic", lock="in_process", options=lk.TableOptions(engine="local"))
    t = lake.create_table("t", key="id", table_type="mor", ordering="ts")
    t.upsert(pd.DataFrame({"id": [1, 2], "ts": [1, 1], "v": ["base", "base"]}))
    t.upsert(pd.DataFrame({"id": [1], "ts": [2], "v": ["update"]}))
    other = lk.open_table(t.path, concurrency="optimistic", lock="in_process", options=lk.TableOptions(engine="local"))
    plan = t.maintenance.schedule_compaction()
    first, second = _taken_over_while_stalled(
        monkeypatch, t, plan.instant, local, "compact_file_slice",   # the local engine's name
        lambda: t.maintenance.compact(plan.instant), lambda: other.maintenance.compact(plan.instant))
    assert isinstance(first, lk.CompactionConflictError) and "taken over" in str(first), first
    assert not isinstance(second, BaseException) and second.instant == plan.instant, second
    _check_table_after(t, {1: "update", 2: "base"})


def test_stalled_clean_taken_over_by_another_process_does_not_commit(tmp_path, monkeypatch):
    from lakesdk.services import clean
    lake = lk.Lake(str(tmp_path), concurrency="optimistic", lock="in_process", options=lk.TableOptions(engine="local"))
    t = lake.create_table("t", key="id", ordering="ts")
    for i in range(3):
        t.upsert(pd.DataFrame({"id": [1, 2], "ts": [i, i], "v": [f"v{i}"] * 2}))
    other = lk.open_table(t.path, concurrency="optimistic", lock="in_process", options=lk.TableOptions(engine="local"))
    plan = clean.schedule_clean(t.context, clean.plan_clean(t.context, retain_commits=1))
    first, second = _taken_over_while_stalled(
        monkeypatch, t, plan.instant, clean, "CleanMetadataData",
        lambda: clean.execute_clean(t.context, plan.instant), lambda: clean.execute_clean(other.context, plan.instant))
    assert isinstance(first, lk.CleanConflictError) and "taken over" in str(first), first
    assert not isinstance(second, BaseException) and second.instant == plan.instant and second.deleted, second
    assert [i.requested for i in t.timeline.completed if i.action == "clean"] == [plan.instant]
    _check_table_after(t, {1: "v2", 2: "v2"})


def test_claim_records_are_removed_with_their_instants(tmp_path):
    """A claim's record goes when its service commits (and a left-over one with the stale
    heartbeats of completed instants)."""
    from lakesdk.services.claim import CLAIMS_DIR
    t, _ = clustering_table(tmp_path)
    res = t.maintenance.cluster(single_group=True)
    assert res is not None and not t.storage.list(CLAIMS_DIR)
    t.storage.write(f"{CLAIMS_DIR}/{res.instant}", b'{"owner": "gone"}')     # a process died after its commit
    t.upsert(pd.DataFrame({"id": [0], "p": ["a"], "ts": [9], "v": ["new"]}))
    assert not t.storage.list(CLAIMS_DIR)
