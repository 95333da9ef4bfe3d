"""Table services that lose a race to another process, interleaved on cue.

Scheduling: another process schedules a clustering of the same file groups between this
process's plan and its schedule, or just before this one takes the table lock to create its
instant.  The loser raises ClusteringConflictError (a typed conflict, nothing written), and
``cluster()`` plans again."""

from __future__ import annotations

from contextlib import contextmanager

import pandas as pd
import pytest

import lakesdk as lk

from .helpers import values


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
    from lakesdk.services.clustering import schedule_clustering
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
    from lakesdk.services import clustering
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
    monkeypatch.setattr(clustering, "plan_clustering", plan_then_another_schedules)
    assert t.maintenance.cluster(single_group=True) is None
    monkeypatch.undo()
    assert len(plans) == 3 and plans[1].groups and not plans[2].groups   # theirs, ours (lost), ours again
    assert [i.requested for i in t.timeline.pending] == [theirs[0].instant]
    assert other.maintenance.cluster(theirs[0].instant).instant == theirs[0].instant
    assert values(t) == CLUSTERED and t.inspect.check().ok
