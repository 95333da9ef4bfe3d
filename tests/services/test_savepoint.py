"""Savepoint and restore (spec table-services.md sections 6-7; case table rows T64-T75).

Real writes through the Table API; the restored tables are read back by lakesdk and by the
``hudi`` reader.
"""

from __future__ import annotations

import os
from typing import Any

import pytest

import lakesdk as lk
from lakesdk.format.clean_metadata import CleanMetadataData
from lakesdk.format.instant import Instant
from lakesdk.format.restore_metadata import RestoreMetadataData, RestorePlanData
from lakesdk.format.savepoint_metadata import SavepointMetadataData
from lakesdk.services.savepoint import RestoreError, SavepointError, restore_order

from ..helpers import batch, data_files, hudi_rows, rows

pytestmark = pytest.mark.spark


def timeline_names(t) -> list[str]:
    return sorted(n for n in os.listdir(f"{t.path}/.hoodie/timeline") if n[0].isdigit())


def test_savepoint_create_list_delete(lake):
    t = lake.create_table("s1", key="id", partition_by="p", ordering="ts", table_type="mor")
    r1 = t.upsert(batch(0))
    r2 = t.upsert(batch(1, ids=(1,)))                     # a log file in p=a
    sp = t.maintenance.savepoint(r1, user="ana", comment="first load")
    assert sp.instant == r1.instant and sp.completed > r2.completed
    assert repr(sp) == f"Savepoint('s1' @ {r1.instant} by 'ana': 2 files in 2 partitions, 'first load')"
    names = timeline_names(t)
    assert f"{r1.instant}.savepoint.inflight" in names and f"{r1.instant}_{sp.completed}.savepoint" in names
    md = SavepointMetadataData.parse(open(f"{t.path}/.hoodie/timeline/{r1.instant}_{sp.completed}.savepoint", "rb").read())
    assert md.user == "ana" and md.comment == "first load" and md.savepointed_at > 1_600_000_000_000   # millis
    assert all(n.endswith(".parquet") for fs in md.files.values() for n in fs)       # as of r1: base files only
    latest = t.maintenance.savepoint()                                               # the latest commit
    assert latest.instant == r2.instant
    assert any(n.startswith(".") for n in latest.files["p=a"])                       # its slice's log file
    assert [s.instant for s in t.maintenance.savepoints()] == [r1.instant, r2.instant]
    assert rows(t.read()) == hudi_rows(t.path)                                      # savepoint files are fine for hudi
    assert t.maintenance.delete_savepoint(r2)
    assert [s.instant for s in t.maintenance.savepoints()] == [r1.instant]
    assert not any(n.endswith((".savepoint", ".savepoint.inflight")) and n.startswith(r2.instant)
                   for n in timeline_names(t))
    assert t.maintenance.delete_savepoint(r2.instant) is False                      # none left: a warning
    with pytest.raises(SavepointError, match="already savepointed"):
        t.maintenance.savepoint(r1)


def test_savepoint_rules_T64_T65_T66(lake):
    t = lake.create_table("s2", key="id", ordering="ts")
    results = [t.upsert(batch(i)) for i in range(5)]
    with pytest.raises(SavepointError, match="Could not savepoint non-existing commit"):     # T64
        t.maintenance.savepoint("20000101000000000")
    assert t.maintenance.savepoint(results[0]).instant == results[0].instant                # T66: no clean yet
    t.maintenance.delete_savepoint(results[0])
    t.maintenance.clean(retain_commits=2)                                                   # ECTR = results[3]
    with pytest.raises(SavepointError, match=f"beyond the lookup window {results[3].instant}"):   # T65
        t.maintenance.savepoint(results[2])
    assert t.maintenance.savepoint(results[3]).instant == results[3].instant


@pytest.mark.parametrize("policy", ["KEEP_LATEST_COMMITS", "KEEP_LATEST_FILE_VERSIONS"])
def test_restore_T67_T68_T70(lake, policy):
    t = lake.create_table("s3", key="id", partition_by="p", ordering="ts")
    c1 = t.upsert(batch(1, ids=range(1, 7)))                       # insert
    c2 = t.upsert(batch(2, ids=range(1, 7)))                       # update every file group
    t.maintenance.savepoint(c2)
    c3 = t.upsert(batch(3, ids=(1, 2)))
    t.maintenance.clean(policy=policy, retain_commits=1, retain_versions=2)
    c4 = t.upsert(batch(4, ids=(3, 4, 10)))
    t.maintenance.clean(policy=policy, retain_commits=1, retain_versions=2)
    with pytest.raises(RestoreError, match="No savepoint for instantTime"):             # T67
        t.maintenance.restore(c1)
    plan = t.maintenance.plan_restore(c2)
    assert [i.requested for i in plan.instants] == [c4.instant, c3.instant] and plan.files == 4
    assert f"RestorePlan('s3' (not scheduled): roll back 2 instants newest first (commit {c4.instant}" in repr(plan)
    assert "<table>" in plan._repr_html_()
    res = t.maintenance.restore(c2)                                                    # T68 / T70
    assert res.rolled_back == ((c4.instant, "commit"), (c3.instant, "commit")) and res.deleted_files == 4
    assert "RestoreResult('s3' @" in repr(res) and "rolled back 2 instants" in repr(res)
    assert rows(t.read()) == [(k, "v2") for k in range(1, 7)] == hudi_rows(t.path)
    assert t.timeline.last_completed_write.requested == c2.instant
    names = {os.path.basename(f) for f in data_files(t)}
    assert len(names) == 2 and all(c2.instant in n for n in names)            # the files of C2, nothing later
    assert not any(n.startswith((c3.instant, c4.instant)) for n in timeline_names(t))
    assert not any(".rollback" in n for n in timeline_names(t))                 # removed once the restore completed
    done = [n for n in timeline_names(t) if n.endswith(".restore")]
    md = RestoreMetadataData.parse(open(f"{t.path}/.hoodie/timeline/{done[0]}", "rb").read())
    assert md.instants == res.rolled_back and set(md.rollbacks) == {c3.instant, c4.instant}
    assert sum(m["totalFilesDeleted"] for v in md.rollbacks.values() for m in v) == 4
    plan_file = f"{t.path}/.hoodie/timeline/{res.instant}.restore.requested"
    assert RestorePlanData.parse(open(plan_file, "rb").read()).savepoint == c2.instant
    t.upsert(batch(5, ids=(1,)))                                                # the table takes writes again
    assert rows(t.read())[0] == (1, "v5")


def test_restore_reuses_pending_restore_T69(lake):
    t = lake.create_table("s4", key="id", ordering="ts")
    c1 = t.upsert(batch(1))
    t.maintenance.savepoint(c1)
    t.upsert(batch(2))
    res = t.maintenance.restore(c1)
    tl = f"{t.path}/.hoodie/timeline"
    os.remove(f"{tl}/{res.instant}_{res.completed}.restore")           # as if the restore crashed at its end
    os.remove(f"{tl}/{res.instant}.restore.inflight")
    assert [i.state for i in t.timeline if i.action == "restore"] == ["requested"]
    again = t.maintenance.restore(c1)
    assert again.instant == res.instant
    assert [i.state for i in t.timeline if i.action == "restore"] == ["completed"]
    assert rows(t.read()) == [(k, "v1") for k in (1, 2, 3)]


def test_restore_refusals_T71_and_later_savepoints(lake):
    t = lake.create_table("s5", key="id", ordering="ts")
    results = [t.upsert(batch(i)) for i in range(6)]
    t.maintenance.savepoint(results[1])
    t.maintenance.savepoint(results[3])
    with pytest.raises(RestoreError, match="delete them first"):
        t.maintenance.restore(results[1])
    t.maintenance.delete_savepoint(results[3])
    t.maintenance.archive(min_commits=2, max_commits=3, beyond_savepoint=True)     # archives past the savepoint
    assert rows(t.read()) == [(k, "v5") for k in (1, 2, 3)] == hudi_rows(t.path)
    with pytest.raises(RestoreError, match="archived"):                              # T71
        t.maintenance.restore(results[1])


def test_restore_order_T73_T74():
    dc10 = Instant("deltacommit", "completed", "20250101000010000", "20250101000010500")
    c1 = Instant("compaction", "completed", "20250101000011000", "20250101000014000")
    dc11 = Instant("deltacommit", "completed", "20250101000012000", "20250101000013000")
    dc12 = Instant("deltacommit", "completed", "20250101000015000", "20250101000016000")
    clu = Instant("clustering", "inflight", "20250101000013500")
    # T73: restoring DC11 rolls back only instants requested after it: the compaction stays
    later = [i for i in (dc10, c1, dc11, dc12) if i.requested > dc11.requested]
    assert later == [dc12]
    # on MOR a compaction is ordered by requested time: DC11 (later request) is rolled back first
    assert restore_order([c1, dc11], merge_on_read=True) == [dc11, c1]
    assert restore_order([c1, dc11], merge_on_read=False) == [c1, dc11]      # COW: completion order
    # T74: pending clustering first, then the rest newest first
    assert restore_order([dc11, clu, dc12], merge_on_read=True) == [clu, dc12, dc11]


def test_restore_after_10_commits_with_cleaning_gives_savepointed_rows(lake):
    t = lake.create_table("s6", key="id", partition_by="p", ordering="ts", table_type="mor")
    t = t.with_options(lk.TableOptions(engine=t.options.engine, clean_after_write=True, clean_retain_commits=2,
                                compact_every=3))
    t.upsert(batch(0, ids=range(12)))
    t.upsert(batch(1, ids=(1, 2, 3)))
    sp = t.maintenance.savepoint()
    expected = rows(t.read())
    for i in range(2, 12):                         # 10 later commits: updates, inserts, a delete; compaction + clean
        if i == 7:
            t.delete([4, 5])
        else:
            t.upsert(batch(i, ids=(i % 4, 20 + i)))
    assert any(i.action == "compaction" for i in t.timeline)
    store = t.context.store
    cleaned = [CleanMetadataData.parse(store.read_bytes(i)) for i in t.timeline if i.action == "clean"]
    assert sum(md.total_deleted for md in cleaned) > 0                 # cleans deleted file versions in between
    assert rows(t.as_of(sp.instant)) == expected                       # time travel to the savepoint after cleans
    res = t.maintenance.restore(sp)
    assert len(res.rolled_back) >= 10
    assert rows(t.read()) == expected == hudi_rows(t.path)
    assert rows(t.read(read_optimized=True)) != [] and t.maintenance.savepoints()[0].instant == sp.instant


def test_t61_savepointed_commit_cannot_be_rolled_back(lake):
    import pandas as pd

    from lakesdk.services.rollback import RollbackNotAllowedError
    t = lake.create_table("t61", key="id")
    r = t.upsert(pd.DataFrame({"id": [1], "v": ["a"]}))
    t.maintenance.savepoint(r.instant)
    with pytest.raises(RollbackNotAllowedError, match="savepointed"):
        t.maintenance.rollback(r.instant)


def test_t72_pending_restore_blocks_writes(lake):
    import pandas as pd

    from lakesdk.exceptions import WriteError
    from lakesdk.format.instant import Instant
    t = lake.create_table("t72", key="id")
    t.upsert(pd.DataFrame({"id": [1], "v": ["a"]}))
    t.context.store.create(Instant("restore", "requested", "20990101000000000"))
    with pytest.raises(WriteError, match="restore is in progress"):
        t.upsert(pd.DataFrame({"id": [2], "v": ["b"]}))


def _two_versions(tmp_path):
    """A table (optimistic concurrency, a lock) whose first commit's file versions a clean
    retaining one commit deletes."""
    t = lk.Lake(str(tmp_path), concurrency="optimistic", lock="in_process",
                options=lk.TableOptions(engine="local")).create_table("sp", key="id", partition_by="p", ordering="ts")
    first = t.upsert(batch(0, ids=(1, 2)))
    t.upsert(batch(1, ids=(1, 2)))
    t.upsert(batch(2, ids=(1, 2)))
    return t, first


@pytest.mark.parametrize("deleted_before", [0, 1])
def test_savepoint_refuses_files_a_running_clean_is_deleting(tmp_path, monkeypatch, deleted_before):
    """A clean reads the savepoints when it turns inflight (under the table lock) and then
    deletes its plan's files: a savepoint made meanwhile may not name one (it would protect
    files already gone), before or after the clean deleted some of them; a time travel to
    them meanwhile is refused as one the cleaner cleaned up, not as a damaged table.  Found by
    the soak of every service racing writers."""
    t, first = _two_versions(tmp_path)
    storage = t.context.storage
    original = type(storage).delete
    seen: list[Exception] = []
    calls: list[str] = []

    def delete_after_a_savepoint_attempt(self, path, *a, **kw):
        calls.append(path)
        if not seen and len(calls) > deleted_before:
            try:
                t.maintenance.savepoint(first.instant)
                seen.append(AssertionError("the savepoint was made"))
            except SavepointError as e:
                seen.append(e)
            if deleted_before:
                with pytest.raises(lk.TimeTravelError, match="Cleaner cleaned up"):
                    t.as_of(first.instant).to_arrow()
        return original(self, path, *a, **kw)
    monkeypatch.setattr(type(storage), "delete", delete_after_a_savepoint_attempt)
    res = t.maintenance.clean(policy="KEEP_LATEST_FILE_VERSIONS", retain_versions=1)   # no lookup window
    monkeypatch.undo()
    assert res is not None and res.deleted
    assert isinstance(seen[0], SavepointError)
    # with some deleted: a plan from a listing sees them gone; one from the metadata table (which
    # lists them until the clean commits) names the running clean
    assert "is deleting file versions" in str(seen[0]) or (deleted_before and "a clean deleted file versions" in str(seen[0]))
    assert t.maintenance.savepoints() == []
    assert rows(t.read()) == [(1, "v2"), (2, "v2")] == hudi_rows(t.path)


def test_savepoint_planned_before_a_clean_starts_keeps_its_files(tmp_path):
    """A clean planned before a savepoint and executed after it keeps the savepointed files."""
    from lakesdk.services import clean as C
    t, first = _two_versions(tmp_path)
    ctx = t.context
    plan = C.schedule_clean(ctx, C.plan_clean(ctx, policy="KEEP_LATEST_FILE_VERSIONS", retain_versions=1))
    assert plan.files
    sp = t.maintenance.savepoint(first.instant)
    res = C.execute_clean(ctx, plan.instant)
    assert res.deleted and not [f for f in res.deleted if first.instant in f]     # the second commit's only
    assert rows(t.as_of(sp.instant)) == [(1, "v0"), (2, "v0")] == hudi_rows(t.path, sp.instant)


def test_savepoint_of_a_commit_a_clean_deleted_meanwhile_is_refused_with_a_savepoint_error(tmp_path, monkeypatch):
    """The clean completes after the savepoint read the timeline (a writer without a lock):
    the savepoint is refused as a savepoint (SavepointError), not as a time travel."""
    from lakesdk.read import view as V
    t, first = _two_versions(tmp_path)
    original = V.FileSystemView._list
    ran: list[Any] = []

    def clean_first(self, store, *more):
        if not ran:
            ran.append(None)
            ran[0] = t.maintenance.clean(policy="KEEP_LATEST_FILE_VERSIONS", retain_versions=1)
        return original(self, store, *more)
    monkeypatch.setattr(V.FileSystemView, "_list", clean_first)
    with pytest.raises(SavepointError, match="a clean deleted file versions it needs"):
        t.maintenance.savepoint(first.instant)
    assert ran[0] is not None and ran[0].deleted and t.maintenance.savepoints() == []


def test_a_savepoint_deleted_while_a_clean_plans_protects_nothing_and_fails_nothing(tmp_path):
    """A clean (or a listing of savepoints) that read the timeline before a savepoint was
    deleted failed on the missing savepoint file (found by the soak)."""
    from lakesdk.services.clean import savepointed_files
    t, first = _two_versions(tmp_path)
    t.maintenance.savepoint(first.instant)
    store = t.context.store
    before = store.load()
    assert savepointed_files(store, before)[1]
    t.maintenance.delete_savepoint(first.instant)
    assert savepointed_files(store, before) == ({}, set())
