"""Clustering (spec table-services.md section 4; case table "Clustering" T50-T56, and T47 for
the clustering side): planning rules on synthetic slices, the service on real tables (local
engine), the writers' reject-update rule, crash recovery, and the ``hudi`` reader."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import textwrap
import time
from functools import partial

import fastavro
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import lakesdk as lk
from lakesdk.exceptions import ClusteringConflictError, WriteConflictError
from lakesdk.format.clustering_plan import ClusteringPlanData
from lakesdk.format.file_group import FileSlice
from lakesdk.format.file_naming import BaseFile
from lakesdk.services.clustering_plan import commits_since_clustering, eligible_slices, pack_slices

from .. import helpers
from ..helpers import data_files

ID_P_V = ("id", "p", "v")
rows = partial(helpers.rows, cols=ID_P_V)           # this module's rows: (id, p, v)
hudi_rows = partial(helpers.hudi_rows, cols=ID_P_V)

MB = 1024 * 1024


# -- helpers -------------------------------------------------------------------------------------------
@pytest.fixture
def lake(tmp_path):
    return lk.Lake(str(tmp_path / "lake"), options=lk.TableOptions(engine="local", markers="direct"))


def batch(ids, part="a", v=0.0, ts=1):
    ids = list(ids)
    return pd.DataFrame({"id": [f"k{i:03d}" for i in ids], "p": [part] * len(ids), "ts": [ts] * len(ids),
                         "v": [float(v if not callable(v) else v(i)) for i in ids]})


def table_with_small_files(lake, name="t", table_type="cow", n_files=4, parts=("a", "b")):
    """``n_files`` bulk inserts per partition: that many small file groups in each."""
    t = lake.create_table(name, key="id", partition_by="p", ordering="ts", table_type=table_type)
    for f in range(n_files):
        for j, p in enumerate(parts):
            base = 100 * f + 50 * j
            t.bulk_insert(batch(range(base, base + 3), part=p, v=lambda i: i % 7))
    return t


def fslice(fid, size, part="p1", base=True):
    return FileSlice(part, fid, "20250101000000000", BaseFile(fid, "0-1-1", "20250101000000000") if base else None,
                     size if base else 0)


# -- case table: planning rules (pure) -----------------------------------------------------------------
def test_T51_only_slices_under_the_small_file_limit_are_eligible():
    sl = [fslice("f100", 100 * MB), fslice("f200", 200 * MB), fslice("f400", 400 * MB)]
    by_part, skipped = eligible_slices(sl, small_file_limit=300 * MB)
    assert [s.file_id for s, _ in by_part["p1"]] == ["f100", "f200"] and skipped == {"not small": 1}
    # a slice without a base file counts as 0 bytes for the filter
    by_part, _ = eligible_slices([fslice("logonly", 0, base=False)], small_file_limit=1)
    assert by_part["p1"][0][1] is None


def test_T52_groups_sorted_descending_and_packed_to_max_bytes_per_group():
    items = [("f700", 700 * MB), ("f900", 900 * MB), ("f800", 800 * MB)]
    kw = dict(max_bytes_per_group=2048 * MB, target_file_size=1024 * MB, max_groups=30)
    assert [g for g, _ in pack_slices(items, single_group=True, **kw)] == [["f900", "f800"], ["f700"]]
    # the last single-slice group is dropped unless single-group clustering (or sorting) is on
    assert [g for g, _ in pack_slices(items, single_group=False, **kw)] == [["f900", "f800"]]


def test_T53_output_file_groups_are_group_bytes_over_target_file_size_rounded_up():
    groups = pack_slices([("a", 800 * MB), ("b", 700 * MB)], max_bytes_per_group=2048 * MB,
                         target_file_size=1024 * MB, max_groups=30, single_group=False)
    assert groups == [(["a", "b"], 2)]


def test_T54_single_eligible_slice_without_single_group_or_sort_gives_no_plan(lake):
    assert pack_slices([("a", 10)], max_bytes_per_group=100, target_file_size=100, max_groups=30,
                       single_group=False) == []
    t = lake.create_table("one", key="id", partition_by="p", ordering="ts")
    t.bulk_insert(batch(range(5)))
    assert len(t.maintenance.plan_clustering()) == 0
    assert t.maintenance.cluster() is None and t.maintenance.schedule_clustering() is None
    # with sort columns the lone file group is rewritten (sorted)
    assert len(t.maintenance.plan_clustering(sort_by="v")) == 1


def test_T55_max_groups_caps_the_plan(lake):
    items = [(f"f{i}", 10) for i in range(10)]
    assert len(pack_slices(items, max_bytes_per_group=20, target_file_size=100, max_groups=1, single_group=True)) == 1
    t = table_with_small_files(lake, n_files=4)
    plan = t.maintenance.plan_clustering(small_file_limit=MB, max_groups=1)
    assert len(plan) == 1 and plan.input_file_groups == 4


def test_T50_inline_clustering_waits_for_cluster_every_commits(lake):
    t = lake.create_table("inl", key="id", partition_by="p", ordering="ts")
    t = t.with_options(lk.TableOptions(engine="local", markers="direct", cluster_every=4, cluster_small_file_limit=MB))
    for i in range(3):
        t.bulk_insert(batch(range(10 * i, 10 * i + 3)))
    assert commits_since_clustering(t.timeline) == 3
    assert not [i for i in t.timeline if i.action == "clustering"]           # 3 < 4: no plan
    t.bulk_insert(batch(range(40, 43)))                                    # the 4th commit
    clusterings = [i for i in t.timeline if i.action == "clustering"]
    assert len(clusterings) == 1 and clusterings[0].is_completed
    assert len(t.inspect.file_groups()) == 1 and commits_since_clustering(t.timeline) == 0
    assert len(t.to_pandas()) == 12


def test_T47_file_groups_in_pending_clustering_or_compaction_are_not_planned(lake):
    t = table_with_small_files(lake, "mor47", table_type="mor", n_files=3, parts=("a",))
    t.upsert(batch([0, 1], v=5.0, ts=2))                  # logs on one file group
    comp = t.maintenance.schedule_compaction()
    assert comp is not None and len(comp) == 1
    plan = t.maintenance.plan_clustering(small_file_limit=MB, single_group=True)
    assert plan.skipped == {"in pending compaction": 1}
    assert set(plan.file_groups).isdisjoint({(o.partition, o.file_id) for o in comp.operations})
    sched = t.maintenance.schedule_clustering(small_file_limit=MB)
    again = t.maintenance.plan_clustering(small_file_limit=MB, single_group=True)
    assert len(again) == 0 and again.skipped == {"in pending compaction": 1, "in pending clustering": 2}
    assert sched.instant and [p.instant for p in t.maintenance.pending_clusterings()] == [sched.instant]


# -- case table: writers vs a pending clustering -------------------------------------------------------
@pytest.mark.parametrize("table_type", ["cow", "mor"])
def test_T56_update_of_a_file_group_under_pending_clustering_is_rejected(lake, table_type):
    t = table_with_small_files(lake, f"t56{table_type}", table_type=table_type, n_files=2, parts=("a",))
    t.bulk_insert(batch(range(900, 903), part="b"))       # partition b: one group, not clustered
    plan = t.maintenance.schedule_clustering(small_file_limit=MB)
    assert plan.file_groups and {p for p, _ in plan.file_groups} == {"p=a"}
    before = rows(t)
    with pytest.raises(ClusteringConflictError) as err:
        t.upsert(batch([0], v=42.0, ts=9))
    e = err.value
    assert isinstance(e, WriteConflictError) and e.instant == plan.instant
    assert set(e.file_groups) <= set(plan.file_groups) and len(e.file_groups) == 1
    assert plan.instant in str(e) and "maintenance.cluster()" in str(e)
    with pytest.raises(ClusteringConflictError):
        t.delete(["k001"])
    assert rows(t) == before and not [i for i in t.timeline.pending if i.action != "clustering"]
    # inserts of new keys go to new file groups, never into the ones being clustered; updates elsewhere proceed
    t.upsert(batch([500, 501], v=1.0))
    t.upsert(batch([900], part="b", v=7.0, ts=2))
    fgs = t.inspect.file_groups().to_pylist()
    new = [g for g in fgs if (g["partition"], g["file_id"]) not in set(plan.file_groups)]
    assert len([g for g in new if g["partition"] == "p=a"]) == 1
    # finishing the clustering unblocks the update
    t.maintenance.cluster()
    t.upsert(batch([0], v=42.0, ts=9))
    got = dict(((i, p), v) for i, p, v in rows(t))
    assert got[("k000", "a")] == 42.0 and got[("k500", "a")] == 1.0 and got[("k900", "b")] == 7.0
    assert rows(t) == hudi_rows(t.path)


def test_insert_overwrite_of_a_partition_under_pending_clustering_is_rejected(lake):
    t = table_with_small_files(lake, "io", n_files=2, parts=("a",))
    t.maintenance.schedule_clustering(small_file_limit=MB)
    with pytest.raises(ClusteringConflictError):
        t.insert_overwrite(batch([1, 2]))


def test_pending_clustering_can_be_rolled_back(lake):
    t = table_with_small_files(lake, "rb", n_files=2, parts=("a",))
    before = rows(t)
    plan = t.maintenance.schedule_clustering(small_file_limit=MB)
    t.maintenance.rollback(plan.instant)
    assert t.maintenance.pending_clusterings() == []
    t.upsert(batch([0], v=3.0, ts=5))
    assert len(rows(t)) == len(before)


# -- the service on real tables -------------------------------------------------------------------------
@pytest.mark.parametrize("table_type", ["cow", "mor"])
def test_cluster_keeps_rows_and_reduces_files(lake, table_type):
    t = table_with_small_files(lake, f"c{table_type}", table_type=table_type, n_files=4)
    t.upsert(batch([0, 1, 150], v=9.0, ts=3))                # MOR: log files in the slices
    t.delete(["k002"])
    before, groups_before = rows(t), len(t.inspect.file_groups())
    assert before == hudi_rows(t.path)
    plan = t.maintenance.plan_clustering(small_file_limit=MB)
    assert len(plan) == 2 and plan.input_file_groups == groups_before >= 8 and plan.output_file_groups == 2
    assert f"{groups_before} file groups" in repr(plan) and "become 2 new file groups" in repr(plan)
    assert "<table>" in plan._repr_html_() and len(plan.to_pandas()) == groups_before
    res = t.maintenance.cluster(small_file_limit=MB)
    assert res.replaced_file_groups == groups_before and res.new_file_groups == 2 and res.rows == len(before)
    assert f"{groups_before} file groups" in repr(res) and "<table>" in res._repr_html_()
    assert rows(t) == before == hudi_rows(t.path)
    assert len(t.inspect.file_groups()) == 2
    md = t.inspect.commit_metadata(res.instant)
    assert md.operation_type == "CLUSTER" and sum(len(v) for v in md.partition_to_replace_file_ids.values()) == groups_before
    assert {(p, f) for p, fids in md.partition_to_replace_file_ids.items() for f in fids} == set(plan.file_groups)
    last = t.timeline.get(res.instant)
    assert last.action == "clustering" and last.completed_action == "replacecommit"
    # the hudi reader sees a completed replacecommit
    hudi = pytest.importorskip("hudi")
    ht = hudi.HudiTableBuilder.from_base_uri(t.path).build()
    assert res.instant in [i.timestamp for i in ht.get_timeline().get_completed_replacecommits()]
    # writes after clustering land on the new file groups
    t.upsert(batch([3, 151], v=11.0, ts=4))
    assert rows(t) == hudi_rows(t.path)


def test_requested_file_is_hudi_requested_replace_metadata(lake):
    t = table_with_small_files(lake, "avro", n_files=3, parts=("a",))
    plan = t.maintenance.schedule_clustering(small_file_limit=MB, sort_by=["v", "id"])
    path = os.path.join(t.path, ".hoodie", "timeline", f"{plan.instant}.clustering.requested")
    raw = open(path, "rb").read()
    rec = next(fastavro.reader(io.BytesIO(raw)))
    assert rec["operationType"] == "CLUSTER"
    cp = rec["clusteringPlan"]
    assert cp["strategy"]["strategyParams"]["hoodie.clustering.plan.strategy.sort.columns"] == "v,id"
    slices = [s for g in cp["inputGroups"] for s in g["slices"]]
    assert len(slices) == 3 and all(s["dataFilePath"].startswith(t.path.rstrip("/") + "/p=a/") for s in slices)
    assert cp["inputGroups"][0]["numOutputFileGroups"] == 1
    back = ClusteringPlanData.parse(raw)
    assert set(back.file_groups()) == set(plan.file_groups) and back.sort_columns == ("v", "id")
    # a pending clustering does not disturb the hudi reader
    assert rows(t) == hudi_rows(t.path)


def test_sort_by_orders_rows_in_the_new_files(lake):
    t = lake.create_table("srt", key="id", ordering="ts")
    for f in range(3):
        t.bulk_insert(batch(range(10 * f, 10 * f + 10), v=lambda i: (i * 7919) % 101))
    res = t.maintenance.cluster(small_file_limit=MB, sort_by="v")
    assert res.new_file_groups == 1 and res.sort_by == ("v",)
    f = [p for p in data_files(t) if res.instant in os.path.basename(p)]
    vals = pq.read_table(f[0], columns=["v"]).column("v").to_pylist()
    assert vals == sorted(vals) and len(vals) == 30
    with pytest.raises(lk.MissingColumnError):
        t.maintenance.plan_clustering(sort_by="nope")
    with pytest.raises(ValueError):
        t.maintenance.plan_clustering(small_file_limit=0)


def test_target_file_size_splits_a_group_into_several_files(lake):
    t = table_with_small_files(lake, "split", n_files=4, parts=("a",))
    sizes = t.inspect.file_groups()["base_bytes"].to_pylist()
    target = sum(sizes) // 2 + 1     # two output file groups
    res = t.maintenance.cluster(small_file_limit=MB, target_file_size=target)
    assert res.new_file_groups == 2 and len(t.inspect.file_groups()) == 2 and res.rows == 12


def test_replaced_groups_stay_for_time_travel_until_clean(lake):
    t = table_with_small_files(lake, "tt", n_files=3, parts=("a",))
    before_ts = t.timeline.last_completed_write.requested
    before = rows(t)
    res = t.maintenance.cluster(small_file_limit=MB)
    n_files = len(data_files(t))
    assert n_files == 4                                     # 3 replaced + 1 new
    assert rows(t.as_of(before_ts)) == before == hudi_rows(t.path, as_of=before_ts)
    assert rows(t.incremental(res.completed)) == []       # clustering is not a change
    for i in range(2):
        t.upsert(batch([700 + i], v=1.0))
    t.maintenance.clean(retain_commits=1)
    assert len(data_files(t)) < n_files + 2
    replaced = {os.path.basename(p).split("_")[0] for p in data_files(t)}
    assert replaced.isdisjoint({f for _, f in res_replaced(t, res.instant)})
    assert rows(t) == hudi_rows(t.path)
    assert len(rows(t)) == len(before) + 2


def res_replaced(t, instant):
    md = t.inspect.commit_metadata(instant)
    return [(p, f) for p, fids in md.partition_to_replace_file_ids.items() for f in fids]


# -- crash safety ----------------------------------------------------------------------------------------
@pytest.mark.crash
@pytest.mark.parametrize("point", ["mid_data_file", "after_data"])
def test_interrupted_clustering_is_re_executed_without_losing_rows(lake, point, tmp_path):
    t = table_with_small_files(lake, "crash", n_files=3)
    before = rows(t)
    plan = t.maintenance.schedule_clustering(small_file_limit=MB)
    script = textwrap.dedent(f"""
        import lakesdk as lk
        t = lk.Lake({os.path.dirname(t.path)!r}, options=lk.TableOptions(engine="local", markers="direct")).table("crash")
        t.maintenance.cluster()
    """)
    env = {**os.environ, "LAKESDK_CRASH_AT": point, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, timeout=120)
    assert proc.returncode == -9, proc.stderr.decode()[-2000:]
    pending = t.maintenance.pending_clusterings()
    assert [p.instant for p in pending] == [plan.instant] and t.timeline.get(plan.instant).state == "inflight"
    assert rows(t) == before                               # an inflight clustering changes nothing
    # its heartbeat is still fresh: it looks like it runs elsewhere, and is left alone
    assert t.maintenance.cluster() is None
    with pytest.raises(ClusteringConflictError, match="another process"):
        t.maintenance.cluster(plan.instant)
    t = t.with_options(lk.TableOptions(engine="local", markers="direct", heartbeat_interval_s=0.05, heartbeat_misses=1))
    time.sleep(0.2)                                        # the dead process's heartbeat expires
    res = t.maintenance.cluster()
    assert res.instant == plan.instant and res.new_file_groups == 2
    assert rows(t) == before == hudi_rows(t.path)
    written = [p for p in data_files(t) if plan.instant in os.path.basename(p)]
    assert len(written) == 2                               # nothing of the failed attempt is left


def test_clustering_rolls_itself_back_when_a_write_changed_its_inputs(lake, monkeypatch):
    """A write that planned before the clustering was scheduled (modelled by hiding the
    pending clustering from the writer) changes an input file group: the clustering must not
    drop that change."""
    import lakesdk.services.clustering_plan as clu
    t = table_with_small_files(lake, "race", n_files=2, parts=("a",))
    plan = t.maintenance.schedule_clustering(small_file_limit=MB)
    with monkeypatch.context() as m:
        m.setattr(clu, "pending_clustering_file_groups", lambda *a: {})
        t.upsert(batch([0], v=77.0, ts=9))
    expected = rows(t)
    with pytest.raises(ClusteringConflictError) as err:
        t.maintenance.cluster()
    assert err.value.instant == plan.instant and "rolled back" in str(err.value)
    assert t.maintenance.pending_clusterings() == [] and rows(t) == expected
    res = t.maintenance.cluster(small_file_limit=MB)       # planned anew, it runs
    assert res is not None and rows(t) == expected == hudi_rows(t.path)


@pytest.mark.spark
@pytest.mark.parametrize("table_type", ["cow", "mor"])
def test_cluster_on_the_spark_engine(tmp_path, spark, table_type):
    lake = lk.Lake(str(tmp_path / "lake"), spark=spark, options=lk.TableOptions(engine="local"))
    t = table_with_small_files(lake, f"sp{table_type}", table_type=table_type, n_files=3)
    t.upsert(batch([0, 101], v=8.0, ts=2))
    before = rows(t)
    t = t.with_options(lk.TableOptions(engine="spark"))          # the data was written locally; cluster on Spark
    plan = t.maintenance.schedule_clustering(small_file_limit=MB, sort_by="v")
    with pytest.raises(ClusteringConflictError):          # the Spark write path rejects the update too
        t.upsert(batch([1], v=3.0, ts=5))
    assert rows(t) == before
    res = t.maintenance.cluster()
    assert res.instant == plan.instant
    assert res.new_file_groups == 2 and len(t.inspect.file_groups()) == 2
    assert rows(t) == before == hudi_rows(t.path)
    for f in res.file_paths:
        vals = pq.read_table(os.path.join(t.path, f), columns=["v"]).column("v").to_pylist()
        assert vals == sorted(vals)
    assert sorted(p for p in data_files(t) if res.instant in os.path.basename(p)) == \
        sorted(os.path.join(t.path, f) for f in res.file_paths)        # no stray task files


def hudi_incremental(path, start, end):
    hudi = pytest.importorskip("hudi")
    ht = hudi.HudiTableBuilder.from_base_uri(path).build()
    o = hudi.HudiReadOptions().with_query_type(hudi.HudiQueryType.Incremental)
    o = o.with_start_timestamp(start or "19700101000000000")
    if end:
        o = o.with_end_timestamp(end)
    batches = ht.read(o)
    if not batches or sum(b.num_rows for b in batches) == 0:
        return []
    tb = pa.Table.from_batches(batches)
    return sorted(zip(tb.column("id").to_pylist(), tb.column("p").to_pylist(), tb.column("v").to_pylist()))


@pytest.mark.parametrize("table_type", ["cow", "mor"])
def test_incremental_reads_across_a_clustering_agree_with_hudi(lake, table_type):
    import itertools
    t = table_with_small_files(lake, f"inc{table_type}", table_type=table_type, n_files=2)
    done = [t.upsert(batch([0, 1], v=5.0, ts=2)).completed]
    done.append(t.maintenance.cluster(small_file_limit=MB).completed)
    done.append(t.upsert(batch([0, 7], v=6.0, ts=3)).completed)
    for a, b in itertools.combinations([None, *done], 2):
        assert rows(t.incremental(a, b)) == hudi_incremental(t.path, a, b), f"({a}, {b}]"
    assert rows(t.incremental(done[0], done[1])) == []          # the clustering alone changed nothing


def test_restore_rolls_back_a_pending_clustering_first_T74(lake):
    t = table_with_small_files(lake, "t74", n_files=2)
    sp = t.maintenance.savepoint()
    expected = rows(t)
    t.upsert(batch([500], v=1.0))
    plan = t.maintenance.schedule_clustering(small_file_limit=MB)
    assert t.maintenance.plan_restore(sp.instant).instants[0].requested == plan.instant
    t.maintenance.restore(sp.instant)
    assert t.maintenance.pending_clusterings() == [] and rows(t) == expected == hudi_rows(t.path)


def test_plan_of_a_merge_on_read_slice_names_base_path_and_log_files(lake):
    t = table_with_small_files(lake, "mlog", table_type="mor", n_files=2, parts=("a",))
    t.upsert(batch([0], v=4.0, ts=2))
    plan = t.maintenance.schedule_clustering(small_file_limit=MB)
    raw = open(os.path.join(t.path, ".hoodie", "timeline", f"{plan.instant}.clustering.requested"), "rb").read()
    slices = [s for g in next(fastavro.reader(io.BytesIO(raw)))["clusteringPlan"]["inputGroups"] for s in g["slices"]]
    logged = [s for s in slices if s["deltaFilePaths"]]
    assert len(logged) == 1 and all("/" not in n and n.startswith(".") for n in logged[0]["deltaFilePaths"])
    assert ClusteringPlanData.parse(raw).groups[0].slices[0].base_file.endswith(".parquet")
    res = t.maintenance.cluster()
    assert res.instant == plan.instant and rows(t) == hudi_rows(t.path)


def test_T47_compaction_plan_leaves_out_file_groups_under_pending_clustering(lake):
    t = table_with_small_files(lake, "c47", table_type="mor", n_files=2, parts=("a", "b"))
    t.upsert(pd.concat([batch([0], v=5.0, ts=2), batch([50], part="b", v=5.0, ts=2)]))   # logs in a and b
    plan = t.maintenance.schedule_clustering(small_file_limit=MB, partitions=["p=a"])
    comp = t.maintenance.plan_compaction()
    assert len(comp) == 1 and comp.operations[0].partition == "p=b"
    assert not {(o.partition, o.file_id) for o in comp.operations} & set(plan.file_groups)


def test_cluster_a_partial_update_table_keeps_every_column_group(lake):
    groups = {"order_ts": ["amount"], "pay_ts": ["paid"]}
    t = lake.create_table("pu", key="order_id", table_type="mor", merge_mode="partial_update", column_groups=groups)
    t.upsert([{"order_id": "a", "order_ts": 5, "amount": 10.0}, {"order_id": "b", "order_ts": 1, "amount": 1.0}])
    t.upsert([{"order_id": "c", "order_ts": 2, "amount": 2.0}])
    t.upsert([{"order_id": "a", "pay_ts": 7, "paid": True}, {"order_id": "c", "pay_ts": 1, "paid": False}])
    before = t.to_pandas().sort_values("order_id").reset_index(drop=True)
    res = t.maintenance.cluster(small_file_limit=MB)
    assert res.replaced_file_groups == 2 and len(t.inspect.file_groups()) == 1
    after = t.to_pandas().sort_values("order_id").reset_index(drop=True)
    pd.testing.assert_frame_equal(before, after)
    t.upsert([{"order_id": "a", "order_ts": 3, "amount": 99.0}])         # a late event after clustering
    row = t.to_pandas().set_index("order_id").loc["a"]
    assert (row.amount, row.paid) == (10.0, True)


def test_rollback_of_a_clustering_whose_replaced_files_a_clean_deleted_is_refused(tmp_path):
    """Found by the model test: the rollback brought back file groups whose files a
    KEEP_LATEST_FILE_VERSIONS clean had deleted, and every read then failed."""
    import pyarrow as pa

    import lakesdk as lk
    t = lk.Lake(str(tmp_path), options=lk.TableOptions(engine="local")).create_table("t", key=["k"], ordering="ts")
    t.bulk_insert(pa.table({"k": ["a"], "ts": [1]}))
    t.bulk_insert(pa.table({"k": ["b"], "ts": [1]}))
    c = t.maintenance.cluster()
    t.maintenance.clean(policy="keep_latest_file_versions", retain_versions=1)
    before = [(i.requested, i.action, i.state) for i in t.timeline]
    with pytest.raises(lk.RollbackNotAllowedError, match="clean deleted"):
        t.maintenance.rollback(c.instant)
    assert [(i.requested, i.action, i.state) for i in t.timeline] == before
    assert sorted(t.read().to_arrow().column("k").to_pylist()) == ["a", "b"]
