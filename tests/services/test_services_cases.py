"""Table-services case table (spec table-services.md section 11): the rows not covered by
test_clean / test_savepoint / test_archival, and the plan-before-execute contract of every
service.  The map of every case to its test is docs/services-cases.md.

Rules are checked on synthetic timelines where the case is about timing (no test waits);
everything else runs real writes through the Table API, and reads are cross-checked with the
``hudi`` reader where it has the feature.
"""

from __future__ import annotations

import os
import shutil
from datetime import datetime, timedelta

import pandas as pd
import pytest

import lakesdk as lk
from lakesdk.exceptions import CorruptTimelineError, LakeError, TimeTravelError
from lakesdk.format.compaction_plan import CompactionOperation
from lakesdk.format.instant import format_instant_time, parse_instant_time
from lakesdk.format.timeline import Timeline
from lakesdk.services.compaction import compaction_due, order_operations
from lakesdk.services.rollback import RollbackNotAllowedError
from lakesdk.timeline.store import TimelineStore

from ..conftest import conformance_table
from ..helpers import batch, data_files, hudi_rows, rows

pytestmark = pytest.mark.spark


def ts(n: float) -> str:
    """Synthetic instant time ``n`` seconds after a fixed origin."""
    return format_instant_time(datetime(2025, 3, 1) + timedelta(seconds=n))


def tl(*entries: tuple[float, str, str]) -> Timeline:
    """Timeline from (seconds, action, state); a completed compaction is written as Hudi
    does (requested + inflight compaction files, completed ``commit``)."""
    names = []
    for n, action, state in entries:
        t = ts(n)
        if action == "compaction":
            names.append(f"{t}.compaction.requested")
            if state == "completed":
                names += [f"{t}.compaction.inflight", f"{t}_{ts(n + 0.5)}.commit"]
        elif state == "completed":
            names.append(f"{t}_{ts(n + 0.5)}.{action}")
        else:
            names.append(f"{t}.{action}.requested")
    return Timeline.from_file_names(names, layout=2)


def dcs(*seconds: float) -> list[tuple[float, str, str]]:
    return [(s, "deltacommit", "completed") for s in seconds]


def timeline_dir(t) -> str:
    return f"{t.path}/.hoodie/timeline"


def fake_pending(t, instant: str, action: str = "commit") -> None:
    """A write that started and died: requested and inflight files, nothing else."""
    open(f"{timeline_dir(t)}/{instant}.{action}.requested", "wb").close()
    open(f"{timeline_dir(t)}/{instant}.{action}.inflight" if action != "commit"
         else f"{timeline_dir(t)}/{instant}.inflight", "wb").close()


def uncommit(t, result) -> None:
    """Turn a completed write back into an inflight one (its completed file lost, its data
    files still on storage): a writer that died before its commit point."""
    os.remove(f"{timeline_dir(t)}/{result.instant}_{result.completed}.{result.action}")


def plus_ms(instant: str, ms: int = 1) -> str:
    return format_instant_time(parse_instant_time(instant) + timedelta(milliseconds=ms))


# == compaction scheduling (T34-T49) ===================================================================
def test_t34_t35_inline_compaction_after_max_delta_commits(lake):
    t = lake.create_table("t34", key="id", ordering="ts", table_type="mor")
    t = t.with_options(lk.TableOptions(engine=t.options.engine, compact_every=3))
    t.upsert(batch(0))
    r2 = t.upsert(batch(1, ids=(1,)))
    assert r2.compaction is None and [i.action for i in t.timeline.commits] == ["deltacommit"] * 2   # T34
    r3 = t.upsert(batch(2, ids=(2,)))
    assert r3.compaction is not None                                                                # T35
    writes = list(t.timeline.commits)
    assert [i.action for i in writes] == ["deltacommit"] * 3 + ["compaction"]
    assert writes[-1].completed_action == "commit" and writes[-1].requested == r3.compaction.instant
    assert not os.path.exists(f"{t.path}/.hoodie/.temp/{r3.compaction.instant}")    # its markers are gone
    assert rows(t.read(read_optimized=True)) == [(1, "v1"), (2, "v2"), (3, "v0")] == hudi_rows(t.path)


def test_t36_t37_t38_time_based_triggers():
    # T36 TIME_ELAPSED 10 s: measured from the first delta commit when nothing was compacted yet
    one = tl(*dcs(0))
    assert not compaction_due(one, trigger="TIME_ELAPSED", max_delta_seconds=10, now=ts(9))
    assert compaction_due(tl(*dcs(0, 10)), trigger="TIME_ELAPSED", max_delta_seconds=10, now=ts(10))
    # T37 NUM_OR_TIME (3, 60 s): three delta commits, then time alone after the first compaction
    assert compaction_due(tl(*dcs(0, 1, 2)), trigger="NUM_OR_TIME", max_delta_commits=3, max_delta_seconds=60,
                          now=ts(3))
    after = tl(*dcs(0, 1, 2), (3, "compaction", "completed"), *dcs(4))
    assert not compaction_due(after, trigger="NUM_OR_TIME", max_delta_commits=3, max_delta_seconds=60, now=ts(10))
    assert compaction_due(after, trigger="NUM_OR_TIME", max_delta_commits=3, max_delta_seconds=60, now=ts(63))
    # T38 NUM_AND_TIME (3, 20 s): two commits are not enough however long ago; three need the time too
    kw = dict(trigger="NUM_AND_TIME", max_delta_commits=3, max_delta_seconds=20)
    assert not compaction_due(tl(*dcs(0, 1)), now=ts(25), **kw)
    assert not compaction_due(tl(*dcs(0, 1, 2)), now=ts(3), **kw)
    assert compaction_due(tl(*dcs(0, 1, 25)), now=ts(25), **kw)


def test_t39_t40_t43_count_triggers():
    four = dcs(0, 1, 2, 3)
    requested = tl(*four, (4, "compaction", "requested"))
    # T39: right after request R1 nothing counts since the request; NUM_COMMITS still counts from the last completed
    assert not compaction_due(requested, trigger="NUM_COMMITS_AFTER_LAST_REQUEST", max_delta_commits=4)
    assert compaction_due(requested, trigger="NUM_COMMITS", max_delta_commits=4)
    more = tl(*four, (4, "compaction", "requested"), *dcs(5, 6, 7, 8))
    assert compaction_due(more, trigger="NUM_COMMITS_AFTER_LAST_REQUEST", max_delta_commits=4)      # T40: R2 due
    for trig in ("NUM_COMMITS", "TIME_ELAPSED", "NUM_OR_TIME", "NUM_AND_TIME", "NUM_COMMITS_AFTER_LAST_REQUEST"):
        assert not compaction_due(tl((0, "commit", "completed")), trigger=trig, max_delta_seconds=0)   # T43
    with pytest.raises(ValueError, match="unknown compaction trigger"):
        compaction_due(more, trigger="EVERY_FULL_MOON")


def test_t40_t47_second_compaction_skips_file_groups_of_the_pending_one(lake):
    t = lake.create_table("t40", key="id", partition_by="p", ordering="ts", table_type="mor")
    t.upsert(batch(0, ids=(1, 2)))                      # p=a holds id 1, p=b id 2
    t.upsert(batch(1, ids=(1,)))                        # a log file in p=a
    assert t.maintenance.schedule_compaction(trigger="NUM_COMMITS_AFTER_LAST_REQUEST", max_delta_commits=3) is None
    r1 = t.maintenance.schedule_compaction(trigger="NUM_COMMITS", max_delta_commits=2)
    assert r1.partitions == ["p=a"]
    assert t.maintenance.schedule_compaction(trigger="NUM_COMMITS_AFTER_LAST_REQUEST", max_delta_commits=1) is None
    t.upsert(batch(2, ids=(2,)))                        # a log file in p=b
    t.upsert(batch(3, ids=(1,)))                        # p=a again, while R1 is pending
    r2 = t.maintenance.schedule_compaction(trigger="NUM_COMMITS_AFTER_LAST_REQUEST", max_delta_commits=2)
    assert r2 is not None and r2.partitions == ["p=b"]                                  # T47: p=a is R1's
    assert [i.requested for i in t.maintenance.pending_compactions()] == [r1.instant, r2.instant]
    t.maintenance.compact(r1.instant)
    t.maintenance.compact(r2.instant)
    last = t.upsert(batch(4, ids=(2,)))
    done = [i for i in t.timeline if i.action == "compaction"]
    assert len(done) == 2 and all(i.is_completed for i in done) and not t.maintenance.pending_compactions()
    assert t.timeline.last_completed_write.requested == last.instant and t.timeline.last.action == "deltacommit"
    assert rows(t.read()) == [(1, "v3"), (2, "v4")] == hudi_rows(t.path)


def test_t47_file_groups_of_a_pending_clustering_are_not_compacted(lake):
    from lakesdk.format.clustering_plan import ClusteringGroupData, ClusteringPlanData, ClusteringSliceInfo
    t = lake.create_table("t47", key="id", partition_by="p", ordering="ts", table_type="mor")
    t.upsert(batch(0, ids=(1, 2)))
    t.upsert(batch(1, ids=(1, 2)))                     # log files in both partitions
    groups = t.inspect.file_groups().to_pylist()
    fid_a = next(g["file_id"] for g in groups if g["partition"] == "p=a")
    clustering = ClusteringPlanData((ClusteringGroupData((ClusteringSliceInfo("p=a", fid_a, None),)),))
    pending = plus_ms(t.timeline.max_time())
    path = f"{timeline_dir(t)}/{pending}.clustering.requested"
    with open(path, "wb") as f:
        f.write(clustering.to_avro())
    plan = t.maintenance.plan_compaction()
    assert plan.partitions == ["p=b"] and fid_a not in {o.file_id for o in plan.operations}
    with open(path, "wb") as f:
        f.write(b"not avro")
    with pytest.raises(CorruptTimelineError, match=f"pending clustering {pending}") as info:
        t.maintenance.plan_compaction()
    assert info.value.path.endswith(f"{pending}.clustering.requested")
    with open(path, "wb") as f:                         # an empty plan file holds no plan (Hudi: no clustering)
        f.write(b"")
    assert t.maintenance.plan_compaction().partitions == ["p=a", "p=b"]


def test_t41_inflight_compaction_is_retried_by_the_next_inline_compaction(lake):
    t = lake.create_table("t41", key="id", ordering="ts", table_type="mor")
    t.upsert(batch(0))
    t.upsert(batch(1, ids=(1,)))
    plan = t.maintenance.schedule_compaction()
    inst = next(i for i in t.timeline if i.requested == plan.instant)
    t.context.store.transition(inst, "inflight")              # its executor died after starting
    t = t.with_options(lk.TableOptions(engine=t.options.engine, compact_every=2))
    r = t.upsert(batch(2, ids=(2,)))
    assert r.compaction is not None and r.compaction.instant == plan.instant
    writes = list(t.timeline.commits)
    assert len(writes) == 4 and [i.action for i in writes].count("compaction") == 1
    assert next(i for i in writes if i.action == "compaction").requested == plan.instant
    assert rows(t.read()) == [(1, "v1"), (2, "v2"), (3, "v0")] == hudi_rows(t.path)


def test_t42_compaction_of_a_cow_table_is_refused(lake):
    t = lake.create_table("t42", key="id")
    with pytest.raises(LakeError, match="Can only compact table of type MERGE_ON_READ"):
        t.maintenance.plan_compaction()


def _op(fid: str, log_mb: float, io_mb: float = 0.0) -> CompactionOperation:
    return CompactionOperation(fid, "", "1", None, ("x",), {"TOTAL_LOG_FILES_SIZE": log_mb * 1024 * 1024,
                                                            "TOTAL_IO_MB": io_mb})


def test_t44_t45_t46_default_strategy_orders_filters_and_bounds():
    ops = [_op("a", 10), _op("b", 30), _op("c", 20)]
    assert [o.file_id for o in order_operations(ops)] == ["b", "c", "a"]                              # T44
    assert [o.file_id for o in order_operations(ops, log_size_threshold=15 * 1024 * 1024)] == ["b", "c"]   # T45
    bounded = [_op("x", 3, 60), _op("y", 2, 60), _op("z", 1, 60)]
    assert [o.file_id for o in order_operations(bounded, target_io_mb=100)] == ["x", "y"]             # T46


def test_t48_log_of_a_pending_delta_commit_is_not_compacted(lake):
    t = lake.create_table("t48", key="id", ordering="ts", table_type="mor")
    t.upsert(batch(0))
    done = t.upsert(batch(1, ids=(1,)))
    pending = t.upsert(batch(2, ids=(2,)))
    uncommit(t, pending)                                 # still inflight when the compaction is planned
    plan = t.maintenance.plan_compaction()
    assert len(plan) == 1
    assert plan.operations[0].log_files == tuple(os.path.basename(p) for p in done.file_paths)
    assert os.path.basename(pending.file_paths[0]) not in plan.operations[0].log_files


# == rollback (T57-T63) ===================================================================================
def test_t57_t58_rollback_of_an_inflight_write(lake):
    t = lake.create_table("t57", key="id", partition_by="p", ordering="ts")
    c1 = t.upsert(batch(1, ids=(1, 2, 3, 4)))
    c2 = t.upsert(batch(2, ids=(1,)))
    c3 = t.upsert(batch(3, ids=(2, 3)))
    uncommit(t, c3)
    plan = t.maintenance.plan_rollback(c3.instant)
    assert set(plan.files) == set(c3.file_paths) and plan.bytes > 0
    assert f"roll back commit {c3.instant} (inflight)" in repr(plan) and "a failed write" in repr(plan)
    assert "<table>" in plan._repr_html_() and os.path.basename(c3.file_paths[0]) in plan._repr_html_()
    res = t.maintenance.rollback(c3.instant)                                                           # T57
    assert set(res.deleted_files) == set(plan.files)
    assert not any(os.path.exists(f"{t.path}/{p}") for p in c3.file_paths)
    assert all(os.path.exists(f"{t.path}/{p}") for p in c1.file_paths + c2.file_paths)
    assert not any(n.startswith(c3.instant) for n in os.listdir(timeline_dir(t)))
    assert rows(t.read()) == [(1, "v2"), (2, "v1"), (3, "v1"), (4, "v1")] == hudi_rows(t.path)
    files = sorted(data_files(t))
    fake_pending(t, c3.instant)                         # T58: the same instant again, inflight, no files
    again = t.maintenance.rollback(c3.instant)
    assert again.deleted_files == () and sorted(data_files(t)) == files
    assert [i.action for i in t.timeline] == ["commit", "commit", "rollback", "rollback"]


def test_t59_t60_user_rollback_only_of_the_latest_completed_write(lake):
    t = lake.create_table("t60", key="id", ordering="ts")
    c1 = t.upsert(batch(1))
    c2 = t.upsert(batch(2, ids=(1,)))
    c3 = t.upsert(batch(3, ids=(2,)))
    with pytest.raises(RollbackNotAllowedError) as err:                                                # T60
        t.maintenance.plan_rollback(c1.instant)
    msg = str(err.value)
    assert "not the latest completed write" in msg and "2 later write(s)" in msg
    assert f"commit {c3.instant}, commit {c2.instant}" in msg and "restore" in msg and "savepoint" in msg
    with pytest.raises(RollbackNotAllowedError, match=f"commit {c3.instant}"):
        t.maintenance.rollback(c2)
    plan = t.maintenance.plan_rollback(c3)                                                             # T59
    assert "the latest completed write" in plan.effect() and set(plan.files) == set(c3.file_paths)
    res = t.maintenance.rollback(c3)
    assert set(res.deleted_files) == set(plan.files) and "RollbackResult('t60'" in repr(res)
    assert "<b>RollbackResult</b>" in res._repr_html_()
    assert rows(t.read()) == [(1, "v2"), (2, "v1"), (3, "v1")] == hudi_rows(t.path)
    assert t.maintenance.rollback(c2).rolled_back.requested == c2.instant                              # now the latest
    assert rows(t.read()) == [(k, "v1") for k in (1, 2, 3)]


def test_t62_interrupted_rollback_is_resumed_with_the_same_instant(lake, monkeypatch):
    t = lake.create_table("t62", key="id", ordering="ts")
    t.upsert(batch(1))
    c2 = t.upsert(batch(2))
    real = TimelineStore.transition

    def crash(self, instant, state, data=b"", **kw):
        if instant.action == "rollback" and state == "completed":
            raise RuntimeError("crash before the rollback completes")
        return real(self, instant, state, data, **kw)

    monkeypatch.setattr(TimelineStore, "transition", crash)
    with pytest.raises(RuntimeError, match="crash"):
        t.maintenance.rollback(c2)
    monkeypatch.setattr(TimelineStore, "transition", real)
    pending = [i for i in t.timeline if i.action == "rollback"]
    assert [i.state for i in pending] == ["inflight"]
    plan = t.maintenance.plan_rollback(c2)
    assert plan.instant == pending[0].requested and "will be resumed" in repr(plan)
    res = t.maintenance.rollback(c2)
    assert res.rollback_instant == pending[0].requested
    assert [(i.action, i.state) for i in t.timeline] == [("commit", "completed"), ("rollback", "completed")]
    assert rows(t.read()) == [(k, "v1") for k in (1, 2, 3)] == hudi_rows(t.path)


def test_t63_lazy_leaves_failed_writes_eager_rolls_them_back(lake):
    t = lake.create_table("t63", key="id", partition_by="p", ordering="ts")
    t.upsert(batch(1))
    c2, c3 = plus_ms(t.timeline.max_time(), 1), plus_ms(t.timeline.max_time(), 2)
    strays = []
    for inst in (c2, c3):
        fake_pending(t, inst)
        stray = f"{t.path}/p=a/{'0' * 8}-0000-0000-0000-{inst[-12:]}-0_0-1-1_{inst}.parquet"
        open(stray, "wb").close()                        # a file the dead writer left behind
        strays.append(stray)
    t = t.with_options(lk.TableOptions(engine=t.options.engine, failed_writes="lazy"))
    t.upsert(batch(4, ids=(1,)))                         # lazy: young failed writes may be alive
    assert [i.requested for i in t.timeline.pending] == [c2, c3] and all(map(os.path.exists, strays))
    t = t.with_options(lk.TableOptions(engine=t.options.engine, failed_writes="eager"))
    t.upsert(batch(5, ids=(2,)))                         # eager: every pending write is rolled back first
    assert not t.timeline.pending and not any(map(os.path.exists, strays))
    assert [i.action for i in t.timeline].count("rollback") == 2
    assert rows(t.read()) == [(1, "v4"), (2, "v5"), (3, "v1")] == hudi_rows(t.path)


# == incremental queries (T84-T98) ===========================================================================
@pytest.fixture(params=["cow", "mor"])
def four_commits(lake, request):
    """T84/T85: C1 inserts 10 keys, C2 updates 5, C3 updates 6 (distinct), C4 updates 8."""
    t = lake.create_table(f"inc_{request.param}", key="id", ordering="ts", table_type=request.param)
    res = [t.upsert(batch(1, ids=range(10))), t.upsert(batch(2, ids=range(5))),
           t.upsert(batch(3, ids=range(4, 10))), t.upsert(batch(4, ids=range(8)))]
    return t, res


def inc_rows(q) -> list[tuple]:
    df = q.with_meta_fields().to_pandas()
    return sorted(zip(df["id"], df["_hoodie_commit_time"]))


def test_t84_to_t89_incremental_ranges(four_commits):
    t, (c1, c2, c3, c4) = four_commits
    one = t.incremental(c1.completed, c1.completed, start_inclusive=True)                      # T84
    assert inc_rows(one) == [(k, c1.instant) for k in range(10)] and "range=[" in repr(one)
    assert inc_rows(t.incremental(c3.completed, c3.completed, start_inclusive=True)) == \
        [(k, c3.instant) for k in range(4, 10)]                                                   # T85
    assert inc_rows(t.incremental(c4.completed, start_inclusive=True)) == [(k, c4.instant) for k in range(8)]   # T86
    assert inc_rows(t.incremental(c4.completed)) == []                                           # lakesdk default: (start, end]
    everything = [(k, c4.instant) for k in range(8)] + [(8, c3.instant), (9, c3.instant)]
    assert inc_rows(t.incremental("earliest")) == everything == inc_rows(t.incremental())         # T87
    # T88 (lakesdk semantics, see the case map): only an end = every commit up to it, rows as of the end
    assert inc_rows(t.incremental(end=c2.completed)) == [(k, c2.instant) for k in range(5)] + \
        [(k, c1.instant) for k in range(5, 10)]
    assert inc_rows(t.incremental("29990101000000000")) == []                                    # T89


def test_t91_incremental_needs_meta_fields(conformance_dir):
    t = lk.open_table(conformance_table(conformance_dir, "sample_table/cow/v8_simplekeygen_hivestyle_no_metafields"))
    assert not t.config.populate_meta_fields
    with pytest.raises(TimeTravelError, match="Incremental queries are not supported when meta fields are disabled"):
        t.incremental().to_arrow()


def test_t92_incremental_over_archived_commits(lake):
    t = lake.create_table("t92", key="id", ordering="ts")
    res = [t.upsert(batch(i, ids=(i,))) for i in range(6)]
    t.maintenance.archive(min_commits=2, max_commits=3)
    assert [i.requested for i in t.timeline.commits] == [r.instant for r in res[4:]]
    got = t.incremental(meta_fields=True).to_pandas()
    assert sorted(zip(got["id"], got["_hoodie_commit_time"])) == [(i, res[i].instant) for i in range(6)]
    mid = t.incremental(res[1].completed, res[3].completed).to_pandas()
    assert sorted(mid["id"]) == [2, 3]
    assert sorted(t.incremental(res[4].completed).to_pandas()["id"]) == [5]


def test_t93_incremental_ending_before_what_a_clean_retained(lake):
    t = lake.create_table("t93", key="id", ordering="ts")
    res = [t.upsert(batch(i, ids=(1, 2))) for i in range(5)]
    t.maintenance.clean(retain_commits=2)
    with pytest.raises(TimeTravelError, match="Cleaner cleaned up the timestamp of interest"):
        t.incremental(res[0].completed, res[1].completed).to_arrow()
    got = t.incremental(res[0].completed).to_pandas()          # ends at the latest: retained files serve it
    assert sorted(zip(got["id"], got["v"])) == [(1, "v4"), (2, "v4")]


def test_t96_t98_version6_hollow_commit_and_exclusive_begin(conformance_dir, tmp_path):
    src = conformance_table(conformance_dir, "sample_table/cow/v6_simplekeygen_nonhivestyle_overwritetable")
    path = shutil.copytree(src, tmp_path / "v6")
    t = lk.open_table(str(path))
    c1, c2, c3 = (i.requested for i in t.timeline.commits)
    assert [r[0] for r in rows_v6(t.incremental(c1, c3))] == [4]                                   # T98: C1 excluded
    hole = plus_ms(c1)
    assert c1 < hole < c2
    open(f"{path}/.hoodie/{hole}.commit.requested", "wb").close()
    open(f"{path}/.hoodie/{hole}.inflight", "wb").close()
    with pytest.raises(TimeTravelError, match=f"Found hollow commit: '{hole}'"):                  # T96
        t.incremental(None, c3).to_arrow()
    assert [r[0] for r in rows_v6(t.incremental(None, c1))] == [1, 2, 3]                          # before the hole


def rows_v6(q) -> list[tuple]:
    return sorted(tuple(r.values()) for r in q.to_arrow().select(["id", "name"]).to_pylist())


# == time travel (T99-T109) ================================================================================
def tt_rows(q) -> list[tuple]:
    df = q.to_pandas()
    return sorted(zip(df["id"], df["name"], df["value"], df["version"]))


def tt_batch(value: int, version: int, **extra) -> pd.DataFrame:
    return pd.DataFrame({"id": [1], "name": ["a1"], "value": [value], "version": [version],
                         **{k: [v] for k, v in extra.items()}})


@pytest.mark.parametrize("table_type", ["cow", "mor"])
def test_t99_t100_t101_time_travel_and_the_first_incomplete_commit(lake, table_type):
    t = lake.create_table(f"t99_{table_type}", key="id", ordering="version", table_type=table_type)
    c1 = t.upsert(tt_batch(10, 1000))
    c2 = t.upsert(tt_batch(12, 1001))
    c3 = t.upsert(tt_batch(13, 1002))
    for c, v in ((c1, (10, 1000)), (c2, (12, 1001)), (c3, (13, 1002))):                          # T99
        assert tt_rows(t.as_of(c.instant)) == [(1, "a1", *v)]
    hole = plus_ms(c1.instant)
    assert hole < c2.instant
    fake_pending(t, hole, "deltacommit" if table_type == "mor" else "commit")
    assert tt_rows(t.as_of(c1.instant)) == [(1, "a1", 10, 1000)]                                  # T100
    for moment in (hole, c2.instant, c3.instant):                                                 # T101
        with pytest.raises(TimeTravelError, match="must be earlier than the first incomplete commit"):
            t.as_of(moment).to_pandas()
    assert tt_rows(t.read()) == [(1, "a1", 13, 1002)]              # the snapshot is not affected


def test_t102_t103_t104_t109_moment_formats_and_schema_as_of(lake):
    t = lake.create_table("t102", key="id", ordering="version")
    c1 = t.upsert(tt_batch(10, 1000))
    c2 = t.upsert(tt_batch(12, 1001, year=2025))
    c3 = t.upsert(tt_batch(13, 1002, year=2025, month=7))
    dt = parse_instant_time(c1.instant)
    text = dt.strftime("%Y-%m-%d %H:%M:%S.") + c1.instant[-3:]
    assert tt_rows(t.as_of(text)) == [(1, "a1", 10, 1000)]                                       # T102
    day = parse_instant_time(c3.instant).strftime("%Y-%m-%d")
    if not c1.instant.startswith(day.replace("-", "")):
        pytest.skip("the commits straddle midnight")
    assert t.as_of(day).to_pandas().empty                                                        # T103
    cols = [list(t.as_of(c.instant).to_pandas().columns) for c in (c1, c2, c3)]                   # T104
    assert cols == [["id", "name", "value", "version"], ["id", "name", "value", "version", "year"],
                    ["id", "name", "value", "version", "year", "month"]]
    for bad in ("2021/07/26", "202107260000"):                                                    # T109
        with pytest.raises(TimeTravelError, match="cannot read"):
            t.as_of(bad)


def test_t105_t106_t108_time_travel_after_keep_latest_commits(lake):
    t = lake.create_table("t105", key="id", ordering="version")
    cs = [t.upsert(tt_batch(10 + i, 1000 + i)) for i in range(6)]
    t.maintenance.clean(retain_commits=2)                       # ECTR = the 5th commit
    t.maintenance.archive(min_commits=3, max_commits=4)
    assert tt_rows(t.as_of(cs[4].instant)) == [(1, "a1", 14, 1004)]                               # T105
    for c in (cs[0], cs[2]):                                                                      # T106, T108
        with pytest.raises(TimeTravelError, match="Cleaner cleaned up the timestamp of interest"):
            t.as_of(c.instant).to_pandas()


def test_t107_time_travel_after_keep_latest_file_versions_and_archival(lake):
    t = lake.create_table("t107", key="id", ordering="version")
    cs = [t.upsert(tt_batch(10 + i, 1000 + i)) for i in range(6)]
    t.maintenance.clean(policy="KEEP_LATEST_FILE_VERSIONS", retain_versions=2)
    t.maintenance.archive(min_commits=3, max_commits=4)
    assert t.timeline.commits[0].requested == cs[3].instant
    with pytest.raises(TimeTravelError, match=r"sufficient commits are retained \(uncleaned and un-archived\)"):
        t.as_of(cs[0].instant).to_pandas()
    assert tt_rows(t.as_of(cs[5].instant)) == [(1, "a1", 15, 1005)]


def test_time_travel_to_a_savepoint_survives_cleaning(lake):
    t = lake.create_table("sp_tt", key="id", partition_by="p", ordering="ts")
    c1 = t.upsert(batch(1, ids=(1, 2, 3)))
    c2 = t.upsert(batch(2, ids=(1, 2, 3)))
    sp = t.maintenance.savepoint(c1, comment="month end")
    for i in range(3, 7):
        t.upsert(batch(i, ids=(1, 2, 3)))
    res = t.maintenance.clean(retain_commits=2)
    assert res is not None and len(res.deleted) > 0
    assert rows(t.as_of(sp.instant)) == [(k, "v1") for k in (1, 2, 3)] == hudi_rows(t.path, sp.instant)
    with pytest.raises(TimeTravelError, match="Cleaner cleaned up"):          # not savepointed: refused
        t.as_of(c2.instant).to_pandas()
    assert [s.instant for s in t.maintenance.savepoints()] == [sp.instant]
    assert t.maintenance.delete_savepoint(sp) and t.maintenance.savepoints() == []
    with pytest.raises(TimeTravelError, match="Cleaner cleaned up"):
        t.as_of(sp.instant).to_pandas()


# == every service shows its plan, and executes exactly it =====================================================
def test_plans_list_exactly_what_execution_removes(lake):
    t = lake.create_table("plans", key="id", partition_by="p", ordering="ts", table_type="mor")
    t.upsert(batch(0, ids=range(6)))
    for i in range(1, 4):
        t.upsert(batch(i, ids=(i,)))
    # compaction: the plan names the log files it merges; execution writes one base file per operation
    cplan = t.maintenance.plan_compaction()
    html = cplan._repr_html_()
    assert "merges 3 log files" in cplan.effect() and all(n in html for o in cplan.operations for n in o.log_files)
    cres = t.maintenance.compact()
    assert cres.files == len(cplan) and {os.path.basename(p).split("_")[0] for p in cres.file_paths} == \
        {o.file_id for o in cplan.operations}
    sp = t.maintenance.savepoint(t.upsert(batch(3, ids=(4,))))
    expected = rows(t.read())
    for i in range(4, 8):
        t.upsert(batch(i, ids=(i % 6,)))
    # clean: plan files == deleted files
    clean_plan = t.maintenance.plan_clean(retain_commits=2)
    assert len(clean_plan) > 0 and "<table>" in clean_plan._repr_html_()
    cleaned = t.maintenance.clean(retain_commits=2)
    assert set(cleaned.deleted) == {f.path for f in clean_plan.files} and cleaned.bytes == clean_plan.bytes
    # rollback of the latest write: plan files == deleted files
    last = t.upsert(batch(9, ids=(0,)))
    rplan = t.maintenance.plan_rollback(last)
    assert set(t.maintenance.rollback(last).deleted_files) == set(rplan.files) == set(last.file_paths)
    # restore: the plan's files per instant == what the restore deleted
    restore_plan = t.maintenance.plan_restore(sp)
    rres = t.maintenance.restore(sp)
    assert set(rres.deleted) == {f for s in restore_plan.steps for f in s.files} and len(rres.deleted) > 0
    assert [i.requested for i in restore_plan.instants] == [r for r, _ in rres.rolled_back]
    assert rows(t.read()) == expected == hudi_rows(t.path)
    # archive: the plan's instants == the archived instants
    for i in range(10, 16):
        t.upsert(batch(i, ids=(i % 6,)))
    t.maintenance.delete_savepoint(sp)
    t.maintenance.clean(retain_commits=2)
    aplan = t.maintenance.plan_archive(min_commits=3, max_commits=4)
    ares = t.maintenance.archive(min_commits=3, max_commits=4)
    assert len(aplan) > 0 and ares.archived == aplan.instants and "<table>" in aplan._repr_html_()
    assert rows(t.read()) == hudi_rows(t.path)
    # every plan: a readable repr, and HTML with its expected effect and the files (or instants) it names
    for plan, name, item in ((cplan, "CompactionPlan", cplan.operations[0].log_files[0]),
                             (clean_plan, "CleanPlan", os.path.basename(clean_plan.files[0].path)),
                             (rplan, "RollbackPlan", os.path.basename(rplan.files[0])),
                             (restore_plan, "RestorePlan", restore_plan.steps[0].files[0]),
                             (aplan, "ArchivePlan", aplan.instants[0].requested)):
        assert repr(plan).startswith(f"{name}('plans'") and "\n" not in repr(plan)
        html = plan._repr_html_()
        assert f"<b>{name}</b>" in html and plan.effect() in html.replace("&#x27;", "'") and item in html
    for res in (cres, cleaned, rres, ares):
        assert "'plans'" in repr(res) and "<" in res._repr_html_()


# == the case map (docs/services-cases.md) names every case, and only tests that exist =========================
def test_case_map_covers_t1_to_t109_with_existing_tests():
    import re
    from pathlib import Path
    root = Path(__file__).resolve().parents[2]
    text = (root / "docs" / "services-cases.md").read_text(encoding="utf-8")
    seen: set[int] = set()
    for line in text.splitlines():
        m = re.match(r"\| (T[\dT, -]+) \|", line)
        if not m:
            continue
        for part in m.group(1).split(","):
            lo, _, hi = part.strip().partition("-")
            seen.update(range(int(lo[1:]), int((hi or lo)[1:]) + 1))
    assert seen == set(range(1, 110)), f"missing cases: {sorted(set(range(1, 110)) - seen)}"
    for path, name in set(re.findall(r"(tests/\w+\.py)::(\w+)", text)):
        assert f"def {name}(" in (root / path).read_text(encoding="utf-8"), f"{path}::{name} does not exist"
