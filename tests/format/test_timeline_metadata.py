"""The timeline store's typed readers of timeline metadata: ``store.plan`` (the plan in an
instant's requested file), ``store.pending_plans`` and ``store.metadata`` (the metadata of a
completed clean, rollback, savepoint or restore), on timelines the services wrote."""

from __future__ import annotations

import pytest

import lakesdk as lk
from lakesdk.exceptions import CorruptTimelineError
from lakesdk.format.avro_file import read_record
from lakesdk.format.clean_metadata import CleanerPlanData, CleanMetadataData
from lakesdk.format.clustering_plan import ClusteringPlanData
from lakesdk.format.compaction_plan import CompactionPlanData
from lakesdk.format.instant import Instant
from lakesdk.format.restore_metadata import RestoreMetadataData, RestorePlanData
from lakesdk.format.rollback_metadata import RollbackMetadataData, RollbackPlanData
from lakesdk.format.savepoint_metadata import SavepointMetadataData
from lakesdk.timeline.history import LSMTimeline

from ..helpers import batch, rows


def _local_table(tmp_path, name: str, table_type: str = "cow"):
    lake = lk.Lake(str(tmp_path / "lake"), options=lk.TableOptions(engine="local"))
    return lake.create_table(name, key="id", partition_by="p", ordering="ts", table_type=table_type)


def _only(t, action: str) -> Instant:
    [inst] = [i for i in t.context.store.load() if i.action == action]
    return inst


def test_typed_readers_return_what_the_services_wrote(tmp_path):
    t = _local_table(tmp_path, "t", "mor")
    store = t.context.store

    def completed_file(inst: Instant) -> bytes:
        return t.storage.read(store.path(inst))

    def requested_file(inst: Instant) -> bytes:
        return t.storage.read(store.path(Instant(inst.action, "requested", inst.requested)))

    for i in range(3):
        t.upsert(batch(i))
    # compaction: the plan of the pending instant, then of the completed one
    scheduled = t.maintenance.schedule_compaction()
    comp = _only(t, "compaction")
    plan = CompactionPlanData.parse(requested_file(comp))
    assert comp.requested == scheduled.instant and plan.operations
    assert store.plan(comp, CompactionPlanData) == plan
    assert store.pending_plans(store.load(), CompactionPlanData) == [(comp, plan)]
    t.maintenance.compact(scheduled.instant)
    assert store.plan(_only(t, "compaction"), CompactionPlanData) == plan
    assert store.pending_plans(store.load(), CompactionPlanData) == []
    # clustering
    scheduled = t.maintenance.schedule_clustering(single_group=True)
    clu = _only(t, "clustering")
    plan_c = ClusteringPlanData.parse(requested_file(clu))
    assert clu.requested == scheduled.instant and plan_c.groups
    assert store.plan(clu, ClusteringPlanData) == plan_c
    assert store.pending_plans(store.load(), ClusteringPlanData) == [(clu, plan_c)]
    t.maintenance.cluster(scheduled.instant)
    assert store.pending_plans(store.load(), ClusteringPlanData) == []
    # savepoint, clean
    sp = t.maintenance.savepoint()
    t.upsert(batch(3))
    assert t.maintenance.clean(retain_commits=1) is not None
    clean, save = _only(t, "clean"), _only(t, "savepoint")
    assert store.plan(clean, CleanerPlanData) == CleanerPlanData.parse(requested_file(clean))
    assert store.metadata(clean, CleanMetadataData) == CleanMetadataData.parse(completed_file(clean))
    assert store.metadata(clean, CleanMetadataData).total_deleted > 0
    assert store.metadata(save, SavepointMetadataData) == SavepointMetadataData.parse(completed_file(save))
    # rollback of the latest write
    last = t.upsert(batch(4))
    t.maintenance.rollback(last.instant)
    rb = _only(t, "rollback")
    md = store.metadata(rb, RollbackMetadataData)
    assert md == RollbackMetadataData.parse(completed_file(rb)) and md.undone == {last.instant}
    assert md.record == read_record(completed_file(rb), "HoodieRollbackMetadata", "rollback metadata")
    assert store.plan(rb, RollbackPlanData) == RollbackPlanData.parse(requested_file(rb))
    assert store.plan(rb, RollbackPlanData).instant == last.instant
    # restore to the savepoint
    t.maintenance.restore(sp.instant)
    rs = _only(t, "restore")
    md_r = store.metadata(rs, RestoreMetadataData)
    assert md_r == RestoreMetadataData.parse(completed_file(rs)) and md_r.undone and md_r.rollbacks
    assert store.plan(rs, RestorePlanData) == RestorePlanData.parse(requested_file(rs))
    assert store.plan(rs, RestorePlanData).savepoint == sp.instant
    assert rows(t.read()) == [(1, "v2"), (2, "v2"), (3, "v2")]
    # a reader of another kind than the instant's action is a programming error, not a damaged file
    with pytest.raises(ValueError, match="CompactionPlanData"):
        store.plan(clean, CompactionPlanData)
    with pytest.raises(ValueError, match="completed clean"):
        store.metadata(Instant("clean", "inflight", clean.requested), CleanMetadataData)


def test_a_damaged_plan_or_metadata_file_is_a_corrupt_timeline_error_naming_it(tmp_path):
    t = _local_table(tmp_path, "d")
    store = t.context.store
    for i in range(3):
        t.upsert(batch(i))
    t.maintenance.clean(retain_commits=1)
    clean = _only(t, "clean")
    requested = store.path(Instant("clean", "requested", clean.requested))
    completed = store.path(clean)
    for path in (requested, completed):
        t.storage.write(path, t.storage.read(path)[:-30])
    with pytest.raises(CorruptTimelineError, match=f"{clean.requested}.clean.requested: clean plan") as info:
        store.plan(clean, CleanerPlanData)
    assert info.value.path == t.storage.url(requested)
    with pytest.raises(CorruptTimelineError, match=f"{clean.requested}_{clean.completed}.clean: clean metadata") as info:
        store.metadata(clean, CleanMetadataData)
    assert info.value.path == t.storage.url(completed)


def test_pending_plans_leave_out_a_plan_gone_since_the_timeline_was_read_but_not_a_damaged_one(tmp_path):
    t = _local_table(tmp_path, "p", "mor")
    store = t.context.store
    for i in range(3):
        t.upsert(batch(i))
    t.maintenance.schedule_clustering(single_group=True)
    timeline = store.load()
    clu = _only(t, "clustering")
    path = store.path(Instant("clustering", "requested", clu.requested))
    data = t.storage.read(path)
    t.storage.write(path, b"not avro")
    with pytest.raises(CorruptTimelineError, match="clustering.requested: clustering plan"):
        store.pending_plans(timeline, ClusteringPlanData)
    t.storage.delete(path)                              # rolled back since the timeline was read
    assert store.pending_plans(timeline, ClusteringPlanData) == []
    with pytest.raises(FileNotFoundError):
        store.plan(clu, ClusteringPlanData)
    t.storage.write(path, data)
    assert store.pending_plans(timeline, ClusteringPlanData) == [(clu, ClusteringPlanData.parse(data))]


def test_metadata_of_a_clean_archived_since_the_timeline_was_read_comes_from_the_history(tmp_path):
    t = _local_table(tmp_path, "a")
    store = t.context.store
    for i in range(4):
        t.upsert(batch(i))
    t.maintenance.clean(retain_commits=2)
    for i in range(4, 9):
        t.upsert(batch(i))
    timeline = store.load()
    clean = next(i for i in timeline if i.action == "clean")
    before = store.metadata(clean, CleanMetadataData)
    t.maintenance.archive(min_commits=3, max_commits=5)
    assert not any(i.action == "clean" for i in store.load())
    [archived] = [a for a in LSMTimeline(t.storage, t.config).load() if a.action == "clean"]
    assert store.metadata(clean, CleanMetadataData) == before == CleanMetadataData.parse(archived.metadata)
