"""Clean (spec table-services.md section 1; case table rows T1-T33, T75, T105-T108).

Pure planning rules are checked on synthetic timelines and file groups (the instants of
the case table are months apart); the service itself runs on real writes through the
Table API and is read back by the ``hudi`` reader.
"""

from __future__ import annotations

import os
from datetime import datetime, timedelta

import pytest

import lakesdk as lk
from lakesdk.exceptions import TimeTravelError
from lakesdk.format.clean_metadata import CleanerPlanData, CleanMetadataData
from lakesdk.format.file_group import FileSlice
from lakesdk.format.file_naming import BaseFile, LogFile
from lakesdk.format.instant import format_instant_time, parse_instant_time
from lakesdk.format.timeline import Timeline
from lakesdk.read.time_travel import check_time_travel
from lakesdk.services.clean import (
    earliest_commit_to_retain,
    needs_cleaning,
    partitions_to_clean,
    replaced_group_cleanable,
    slices_to_clean,
)

from ..helpers import batch, data_files, hudi_rows, rows

pytestmark = pytest.mark.spark


# -- helpers -----------------------------------------------------------------------------------------
def ts(n: int) -> str:
    """The n-th synthetic instant time (one second apart)."""
    return format_instant_time(datetime(2025, 1, 1) + timedelta(seconds=n))


def timeline(completed=(), pending=(), actions=None) -> Timeline:
    names = []
    for t in completed:
        a = (actions or {}).get(t, "commit")
        names.append(f"{t}_{t[:-3]}999.{a}")
    for t in pending:
        names += [f"{t}.commit.requested", f"{t}.inflight"]
    return Timeline.from_file_names(names, layout=2)


def fslice(inst: str, fid: str = "fg1", logs: tuple[str, ...] = ()) -> FileSlice:
    return FileSlice("p1", fid, inst, BaseFile(fid, "0-1-1", inst), 100,
                     tuple(LogFile(fid, lg, 1, "0-1-1") for lg in logs), tuple(10 for _ in logs))


# -- T1..T8: earliest commit to retain ------------------------------------------------------------------
def test_T1_T2_keep_latest_commits_ectr():
    c = [ts(i) for i in range(15)]
    assert earliest_commit_to_retain(timeline(c), retain_commits=10).requested == c[5]          # T1
    assert earliest_commit_to_retain(timeline(c[:10]), retain_commits=10) is None               # T2


def test_T3_T4_T5_pending_instants_bound_the_ectr():
    c = [ts(i * 10) for i in range(1, 6)]                                                       # c1..c5
    t3 = timeline(c, pending=[ts(35)])                                                          # between c3 and c4
    assert earliest_commit_to_retain(t3, retain_commits=2).requested == c[2]                    # T3 -> c3
    t4 = timeline(c, pending=[ts(60)])
    assert earliest_commit_to_retain(t4, retain_commits=2).requested == c[3]                    # T4 -> c4
    t5 = timeline(c[1:4], pending=[c[0]])                                                       # c2,c3,c4; I(c1)
    assert earliest_commit_to_retain(t5, retain_commits=2) is None                              # T5


def test_T6_T7_T8_by_hours_and_file_versions():
    now = datetime(2025, 6, 1, 12)
    times = [format_instant_time(now - timedelta(hours=h)) for h in (48, 30, 10, 1)]
    e = earliest_commit_to_retain(timeline(times), policy="KEEP_LATEST_BY_HOURS", retain_hours=24, now=now)
    assert e.requested == times[2]                                                              # T6
    old = [format_instant_time(now - timedelta(hours=h)) for h in (72, 50, 30)]
    assert earliest_commit_to_retain(timeline(old), policy="KEEP_LATEST_BY_HOURS", now=now) is None   # T7
    assert earliest_commit_to_retain(timeline(times), policy="KEEP_LATEST_FILE_VERSIONS") is None     # T8


# -- T9..T22: per file group ------------------------------------------------------------------------------
E = "20231204194919610"


def rel(**kw) -> str:
    return format_instant_time(parse_instant_time(E) + timedelta(**kw))


@pytest.mark.parametrize("policy", ["KEEP_LATEST_COMMITS", "KEEP_LATEST_BY_HOURS"])
def test_T9_to_T13_keep_latest_and_latest_before_ectr(policy):
    m1, w1, d3, p2 = rel(days=-30), rel(days=-7), rel(days=-3), rel(days=2)

    def dele(insts, savepointed=()):
        slices = [fslice(i) for i in insts]
        return [s.base_instant for s in slices_to_clean(slices, policy=policy, earliest=E, savepointed=savepointed)]

    assert dele([m1]) == []                                             # T9: latest slice always kept
    assert dele([m1, w1]) == [m1]                                       # T10
    assert dele([m1, p2]) == []                                         # T11: latest + latest before E
    assert dele([m1, d3, p2]) == [m1]                                   # T12
    assert dele([m1, d3, p2], savepointed={fslice(m1).base_file.name}) == []   # T13 (and T75)


def test_T14_T15_T16_replaced_groups():
    m1 = rel(days=-30)
    assert replaced_group_cleanable(rel(days=-1), policy="KEEP_LATEST_COMMITS", earliest=E)        # T14
    assert not replaced_group_cleanable(rel(days=1), policy="KEEP_LATEST_COMMITS", earliest=E)
    assert not replaced_group_cleanable(m1, policy="KEEP_LATEST_COMMITS", earliest=None)          # T16
    # T15 (savepointed replaced file) is the service's job: see test_clean_replaced_groups_and_savepoints


def test_T17_to_T22_keep_latest_file_versions():
    i1, i2, i3, i4 = ts(40), ts(30), ts(20), ts(10)                     # i1 newest

    def dele(insts, savepointed=(), pending=()):
        slices = sorted((fslice(i) for i in insts), key=lambda s: s.base_instant)
        return sorted(s.base_instant for s in slices_to_clean(
            slices, policy="KEEP_LATEST_FILE_VERSIONS", retain_versions=2, savepointed=savepointed,
            pending_compaction=pending))

    assert dele([i2, i1]) == []                                         # T17
    assert dele([i4, i3, i2, i1]) == sorted([i3, i4])                   # T18
    assert dele([i4, i3, i2, i1], savepointed={fslice(i4).base_file.name}) == [i3]   # T19
    assert replaced_group_cleanable(i4, policy="KEEP_LATEST_FILE_VERSIONS")          # T20 (T21: see service test)
    # T22: a pending compaction reads the newest slice: it is kept and counts, so one more is kept
    assert dele([i3, i2, i1], pending={("fg1", i1)}) == [i3]


# -- T23..T29: incremental partitions ------------------------------------------------------------------------
def test_T23_to_T29_incremental_partitions():
    c = [ts(i) for i in range(1, 8)]          # c[0] = previous ECTR, c[6] = new ECTR
    tl = timeline(c)
    written = {c[1]: {"p1"}, c[2]: {"p2"}, c[3]: {"p3"}, c[4]: {"p2"}, c[5]: {"p3"}}
    everything = ["p1", "p2", "p3", "p4"]

    def parts(savepoints=(), tracked=(), all_partitions=everything, t=tl, written=written):
        prev = CleanMetadataData(ts(0), 1, "KEEP_LATEST_COMMITS", c[0], c[0], {}, savepointed=tuple(tracked))
        return partitions_to_clean(t, policy="KEEP_LATEST_COMMITS", earliest=c[6], previous=prev,
                                   savepoints=savepoints, all_partitions=lambda: list(all_partitions),
                                   partitions_of=lambda i: written.get(i.requested, set()))

    assert parts() == ["p1", "p2", "p3"]                                             # T23
    assert parts(savepoints=["sp2"]) == ["p1", "p2", "p3"]                           # T24: new savepoint
    w2 = {k: v for k, v in written.items() if v != {"p1"}}
    assert parts(savepoints=["sp2"], tracked=["sp2"], written=w2) == ["p2", "p3"]    # T25
    assert parts(savepoints=[], tracked=["sp2"], written=w2) == everything           # T26: sp2 deleted
    assert parts(savepoints=["sp1"], tracked=["sp1", "sp2"], written=w2) == everything   # T27
    assert parts(tracked=["sp2"], all_partitions=[""]) == [""]                       # T28: unpartitioned
    assert parts(tracked=[ts(-5)], t=timeline(c[2:])) == everything                  # T29: commit archived
    assert partitions_to_clean(tl, policy="KEEP_LATEST_FILE_VERSIONS", earliest=None, previous=None, savepoints=(),
                               all_partitions=lambda: everything, partitions_of=lambda i: set()) == everything


def test_T30_T31_T32_trigger():
    c = [ts(i) for i in range(1, 6)]
    prev = CleanMetadataData(ts(0), 1, "KEEP_LATEST_COMMITS", c[0], c[3], {})
    assert needs_cleaning(timeline(c), prev, max_commits=1)              # T30: one commit after c4
    assert not needs_cleaning(timeline(c), prev, max_commits=3)          # T31
    assert needs_cleaning(timeline(c[:2]), None, max_commits=2)          # T32: no clean yet, all commits count


# -- the service on real writes ----------------------------------------------------------------------------------
def test_plan_clean_writes_nothing_then_clean_commits(lake):
    t = lake.create_table("c1", key="id", partition_by="p", ordering="ts")
    results = [t.upsert(batch(i)) for i in range(6)]
    before_files = sorted(data_files(t))
    before_timeline = sorted(os.listdir(f"{t.path}/.hoodie/timeline"))
    plan = t.maintenance.plan_clean(retain_commits=3)
    assert sorted(data_files(t)) == before_files and sorted(os.listdir(f"{t.path}/.hoodie/timeline")) == before_timeline
    assert plan.earliest.requested == results[3].instant and plan.instant is None
    # 2 file groups (p=a, p=b), 6 slices each; keep the latest 3 commits' slices and the one before the ECTR
    assert len(plan) == 4 and plan.partitions == ["p=a", "p=b"] and plan.bytes > 0
    r = repr(plan)
    assert "CleanPlan('c1' (not scheduled): KEEP_LATEST_COMMITS retain 3 commits" in r
    assert f"earliest retained instant {results[3].instant}" in r and "deletes 4 files (4 base, 0 log" in r
    html = plan._repr_html_()
    assert "<table>" in html and "KEEP_LATEST_COMMITS" in html and plan.files[0].path.rsplit("/", 1)[-1] in html
    assert set(plan.to_pandas().columns) >= {"partition", "path", "size", "kind", "reason"}

    res = t.maintenance.clean(retain_commits=3)
    assert len(res.deleted) == 4 and res.bytes == plan.bytes and res.earliest == results[3].instant
    assert "CleanResult('c1' @" in repr(res) and "deleted 4 files" in repr(res)
    names = os.listdir(f"{t.path}/.hoodie/timeline")
    assert {f"{res.instant}.clean.requested", f"{res.instant}.clean.inflight",
            f"{res.instant}_{res.completed}.clean"} <= set(names)
    md = CleanMetadataData.parse(open(f"{t.path}/.hoodie/timeline/{res.instant}_{res.completed}.clean", "rb").read())
    assert md.total_deleted == 4 and md.earliest_commit_to_retain == results[3].instant and md.policy == "KEEP_LATEST_COMMITS"
    cp = CleanerPlanData.parse(open(f"{t.path}/.hoodie/timeline/{res.instant}.clean.requested", "rb").read())
    assert cp.total_files == 4 and cp.last_completed_commit == results[-1].instant
    assert all(f.startswith(t.path) for fs in cp.files.values() for f in fs)      # version 2 plans: full paths
    # snapshot and time travel to every retained commit are intact (T105), and the hudi reader agrees
    assert rows(t.read()) == [(1, "v5"), (2, "v5"), (3, "v5")] == hudi_rows(t.path)
    for i in (3, 4, 5):
        assert rows(t.as_of(results[i].instant)) == [(k, f"v{i}") for k in (1, 2, 3)] == hudi_rows(t.path, results[i].instant)
    # the latest slice before the ECTR stays (Hudi keeps it), yet a read before the ECTR is refused, as Hudi does
    assert hudi_rows(t.path, results[2].instant) == [(k, "v2") for k in (1, 2, 3)]
    check_time_travel(t, results[3].instant)
    for i in (1, 2):                                                                           # T106, T108
        with pytest.raises(TimeTravelError, match="Cleaner cleaned up the timestamp of interest"):
            t.as_of(results[i].instant).to_pandas()
    assert t.maintenance.clean(retain_commits=3) is None        # nothing left to delete: no clean instant
    assert sum(1 for i in t.timeline if i.action == "clean") == 1


def test_not_enough_commits_cleans_nothing_T2_T16(lake):
    t = lake.create_table("c2", key="id", partition_by="p", ordering="ts")
    for i in range(3):
        t.upsert(batch(i))
    t.insert_overwrite(batch(9, ids=(1, 3)))      # replaces p=a's file group
    plan = t.maintenance.plan_clean(retain_commits=10)
    assert len(plan) == 0 and plan.earliest is None and "not enough commits" in repr(plan)
    assert t.maintenance.clean(retain_commits=10) is None


def test_clean_replaced_groups_and_savepoints_T14_T15_T21(lake):
    t = lake.create_table("c3", key="id", partition_by="p", ordering="ts")
    t.upsert(batch(0, ids=(1, 2, 3, 4)))
    sp = t.maintenance.savepoint(comment="before the overwrite")
    over = t.insert_overwrite(batch(1, ids=(1, 3)))           # p=a: new file group, old one replaced
    for i in range(2, 5):
        t.upsert(batch(i, ids=(2, 4)))
    plan = t.maintenance.plan_clean(retain_commits=2)
    assert plan.earliest is not None and over.instant < plan.earliest.requested
    # the replaced group's only file is savepointed (T15); p=b's old slices before the savepoint too
    assert not any(f.reason.startswith("replaced") for f in plan.files)
    assert sp.files["p=a"][0] not in {f.path.rsplit("/", 1)[-1] for f in plan.files}
    t.maintenance.clean(retain_commits=2)
    assert rows(t.as_of(sp.instant)) == [(k, "v0") for k in (1, 2, 3, 4)]     # savepoint readable after clean
    assert t.maintenance.delete_savepoint(sp.instant)
    plan = t.maintenance.plan_clean(retain_commits=2)
    replaced = [f for f in plan.files if f.reason.startswith("replaced")]
    assert len(replaced) == 1 and replaced[0].partition == "p=a"              # T14: now deleted
    fv = t.maintenance.plan_clean(policy="KEEP_LATEST_FILE_VERSIONS", retain_versions=5)
    assert [f.path for f in fv.files if f.reason.startswith("replaced")] == [replaced[0].path]   # T20 (T21: T15)
    t.maintenance.clean(retain_commits=2)
    expected = [(1, "v1"), (2, "v4"), (3, "v1"), (4, "v4")]
    assert rows(t.read()) == expected == hudi_rows(t.path)


def test_clean_mor_slices_with_their_logs_and_pending_compaction(lake):
    t = lake.create_table("c4", key="id", ordering="ts", table_type="mor")
    results = [t.upsert(batch(0))]
    results.append(t.upsert(batch(1, ids=(1,))))                 # log on slice 0
    results.append(t.maintenance.compact())                       # slice 1
    results.append(t.upsert(batch(2, ids=(2,))))                  # log on slice 1
    results.append(t.maintenance.compact())                       # slice 2
    results.append(t.upsert(batch(3, ids=(3,))))
    pending = t.maintenance.schedule_compaction()                  # would merge slice 2 + its log
    plan = t.maintenance.plan_clean(retain_commits=2)
    # ECTR: the last completed commit before the pending compaction (results[4]); slice 0 (base + log) goes
    assert plan.earliest.requested == results[4].instant
    kinds = sorted(f.kind for f in plan.files)
    assert kinds == ["base", "log"] and {f.base_instant for f in plan.files} == {results[0].instant}
    fv = t.maintenance.plan_clean(policy="KEEP_LATEST_FILE_VERSIONS", retain_versions=1)
    assert {f.base_instant for f in fv.files} == {results[0].instant, results[2].instant}   # T22 (N-1 rule)
    t.maintenance.clean(retain_commits=2)
    assert rows(t.read()) == [(1, "v1"), (2, "v2"), (3, "v3")] == hudi_rows(t.path)
    t.maintenance.compact(pending.instant)
    assert rows(t.read()) == [(1, "v1"), (2, "v2"), (3, "v3")]
    assert rows(t.as_of(results[4].instant)) == [(1, "v1"), (2, "v2"), (3, "v0")]


def test_file_versions_and_by_hours_policies(lake):
    t = lake.create_table("c5", key="id", ordering="ts")
    results = [t.upsert(batch(i)) for i in range(5)]
    plan = t.maintenance.plan_clean(policy="KEEP_LATEST_FILE_VERSIONS", retain_versions=2)
    assert plan.earliest is None and len(plan) == 3 and "retain 2 file versions" in repr(plan)
    hours = t.maintenance.plan_clean(policy="keep_latest_by_hours", retain_hours=1)
    assert hours.earliest.requested == results[0].instant and len(hours) == 0   # every commit is recent
    res = t.maintenance.clean(policy="KEEP_LATEST_FILE_VERSIONS", retain_versions=2)
    assert len(res.deleted) == 3 and res.earliest is None
    with pytest.raises(TimeTravelError, match="sufficient commits are retained"):       # T107
        check_time_travel(t, "20000101000000000")
    assert rows(t.as_of(results[3].instant)) == [(k, "v3") for k in (1, 2, 3)]
    with pytest.raises(ValueError, match="unknown clean policy"):
        t.maintenance.plan_clean(policy="KEEP_EVERYTHING")


def test_60_upserts_with_inline_clean_stay_bounded(lake):
    """Bound: with KEEP_LATEST_COMMITS retaining R commits, every file group keeps at most
    R + 1 slices (R newer than the ECTR, one before it) after each write's inline clean."""
    R = 3
    t = lake.create_table("c6", key="id", partition_by="p", ordering="ts")
    t = t.with_options(lk.TableOptions(engine=t.options.engine, clean_after_write=True, clean_retain_commits=R))
    model: dict[int, str] = {}
    counts = []
    for i in range(60):
        ids = (i % 7, 7 + i % 5, 100 + i)        # updates in both partitions plus one insert
        t.upsert(batch(i, ids=ids))
        model.update({k: f"v{i}" for k in ids})
        groups = t.inspect.file_groups()
        counts.append((len(data_files(t)), len(groups)))
        assert len(data_files(t)) <= len(groups) * (R + 1)
    files, groups = counts[-1]
    assert groups <= 2 and max(c for c, _ in counts) <= 2 * (R + 1)
    expected = sorted(model.items())
    assert rows(t.read()) == expected == hudi_rows(t.path)
    cleans = [i for i in t.timeline if i.action == "clean"]
    assert len(cleans) >= 50 and all(i.is_completed for i in cleans)
    # the timeline itself is bounded by archival
    res = t.maintenance.archive(min_commits=5, max_commits=10)
    assert len(t.timeline) <= 12 and len(res.archived) > 100
    assert rows(t.read()) == expected == hudi_rows(t.path)


def test_time_travel_to_a_version_a_file_versions_clean_deleted_raises(lake):
    t = lake.create_table("tt_fv", key="id", ordering="ts")
    results = [t.upsert(batch(i, ids=(1, 2))) for i in range(4)]
    assert rows(t.as_of(results[1].instant)) == [(1, "v1"), (2, "v1")]
    t.maintenance.clean(policy="KEEP_LATEST_FILE_VERSIONS", retain_versions=1)
    for r in results[:3]:                              # their file versions are gone: an error, not an empty table
        with pytest.raises(lk.TimeTravelError, match="Cleaner cleaned up the timestamp of interest"):
            t.as_of(r.instant).to_arrow()
    with pytest.raises(lk.TimeTravelError):
        t.as_of("20000101000000").to_arrow()
    assert rows(t.as_of(results[3].instant)) == [(1, "v3"), (2, "v3")] == hudi_rows(t.path, results[3].instant)


def test_time_travel_refused_by_an_earlier_clean_stays_refused_after_a_file_versions_clean(lake):
    t = lake.create_table("tt_fv2", key="id", partition_by="p", ordering="ts")
    results = [t.upsert(batch(0, ids=(1, 2)))]                  # p=a and p=b
    results += [t.upsert(batch(i, ids=(1,))) for i in range(1, 5)]
    t.maintenance.clean(retain_commits=2)
    with pytest.raises(lk.TimeTravelError):
        t.as_of(results[1].instant).to_arrow()
    results += [t.upsert(batch(5, ids=(2,)))]                    # p=b's first version is no longer the latest
    t.maintenance.clean(policy="KEEP_LATEST_FILE_VERSIONS", retain_versions=1)
    for r in results[:4]:
        with pytest.raises(lk.TimeTravelError):
            t.as_of(r.instant).to_arrow()


def test_clean_validates_only_the_retention_option_its_policy_uses(lake):
    t = lake.create_table("opts", key="id", ordering="ts")
    t.upsert(batch(0, ids=(1,)))
    t.maintenance.clean(policy="KEEP_LATEST_COMMITS", retain_hours=0)            # not used by this policy
    t.maintenance.clean(policy="KEEP_LATEST_BY_HOURS", retain_commits=0, retain_versions=0)
    with pytest.raises(lk.OptionsError, match="hoodie.cleaner.commits.retained"):
        t.maintenance.clean(policy="KEEP_LATEST_COMMITS", retain_commits=0)
    with pytest.raises(lk.OptionsError, match="hoodie.cleaner.hours.retained"):
        t.maintenance.clean(policy="KEEP_LATEST_BY_HOURS", retain_hours=0)
    with pytest.raises(lk.OptionsError, match="hoodie.cleaner.fileversions.retained"):
        t.maintenance.clean(policy="KEEP_LATEST_FILE_VERSIONS", retain_versions=0)
    with pytest.raises(lk.OptionsError, match="unknown clean policy"):
        t.maintenance.clean(policy="KEEP_SOME")


def test_rollback_of_a_commit_whose_previous_file_version_a_clean_deleted_is_refused(tmp_path):
    """Found by the model test: bulk_insert, an update (a new file version), a clean keeping one
    file version (the first version goes), then a rollback of the update left the file group
    pointing at the deleted version and every read failed."""
    import pyarrow as pa

    import lakesdk as lk
    t = lk.Lake(str(tmp_path), options=lk.TableOptions(engine="local")).create_table("t", key="k", ordering="ts")
    t.bulk_insert(pa.table({"k": ["0"], "ts": [0]}))
    upd = t.upsert(pa.table({"k": ["0", "1"], "ts": [1, 1]}))
    t.maintenance.clean(policy="KEEP_LATEST_FILE_VERSIONS", retain_versions=1)
    before = [(i.requested, i.action, i.state) for i in t.timeline]
    with pytest.raises(lk.RollbackNotAllowedError, match="clean deleted"):
        t.maintenance.rollback(upd.instant)
    assert [(i.requested, i.action, i.state) for i in t.timeline] == before
    assert sorted(t.read().to_arrow().column("k").to_pylist()) == ["0", "1"]


@pytest.mark.parametrize("metadata", [True, False])
@pytest.mark.parametrize("archived", [False, True])
def test_a_write_whose_timeline_a_clean_overtook_plans_again(lake, monkeypatch, archived, metadata):
    """A writer read the timeline; meanwhile more commits landed and a clean deleted the slice
    that timeline names, and archival may have moved the clean and the commits away: the
    files are not damaged, the writer's timeline is old. The file-system view lists against
    the timeline as it is now instead of the write stopping with DataFileMissingError (found
    by the service soak, archived case).  With the metadata table, whose listing as of the old
    timeline still names the deleted slice, and without it, whose listing shows it gone."""
    from lakesdk.table.write_input import WriteInput
    if not metadata:
        lake = lk.Lake(lake.root + "-nomdt", spark=lake._spark, options=lk.TableOptions(metadata=False))
    t = lake.create_table("c_stale", key="id", partition_by="p", ordering="ts")
    t.upsert(batch(0))
    assert t.storage.exists(".hoodie/metadata") == metadata
    stale = t.context.store.load()
    for i in range(1, 5):
        t.upsert(batch(i))
    assert len(t.maintenance.clean(retain_commits=1).deleted) > 0
    for i in range(5, 9):
        t.upsert(batch(i))
    if archived:
        assert t.maintenance.archive(min_commits=2, max_commits=3).history_file is not None
        assert not any(i.action == "clean" for i in t.timeline)
    from lakesdk.read.view import FileSystemView
    view = FileSystemView(t.storage, t.config, t.context.store, stale)
    assert view.missing_files() == [] and view.timeline.instants != stale.instants    # built on the timeline of now
    prepare = WriteInput._prepare

    def prepare_on_the_old_timeline(self):
        prep = prepare(self)
        prep.timeline = stale
        return prep
    monkeypatch.setattr(WriteInput, "_prepare", prepare_on_the_old_timeline)
    t.upsert(batch(9, ids=(1,)))
    monkeypatch.undo()
    assert rows(t.read()) == [(1, "v9"), (2, "v8"), (3, "v8")] == hudi_rows(t.path)


def test_the_last_clean_archived_since_the_timeline_was_read_is_read_from_the_history(lake):
    """A clean planned on a timeline whose latest clean another process archived meanwhile read
    its completed file and stopped with a raw FileNotFoundError (found by the service soak)."""
    from lakesdk.services.clean import last_clean
    t = lake.create_table("c_arch", key="id", partition_by="p", ordering="ts")
    for i in range(4):
        t.upsert(batch(i))
    done = t.maintenance.clean(retain_commits=1)
    for i in range(4, 9):
        t.upsert(batch(i))
    store = t.context.store
    before = store.load()
    assert t.maintenance.archive(min_commits=2, max_commits=3).history_file is not None
    assert not any(i.action == "clean" for i in store.load())
    inst, md = last_clean(store, before)
    assert inst.requested == done.instant and md.total_deleted == len(done.deleted)
