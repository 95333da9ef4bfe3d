"""Archival into the v8 LSM timeline history (spec table-services.md section 2; case table
rows T76-T83).  Archived tables are read back by lakesdk (snapshot, time travel, history)
and by the ``hudi`` reader, which ignores the history and lists storage."""

from __future__ import annotations

import json
import os

import pyarrow.parquet as pq
import pytest

import lakesdk as lk
from lakesdk.format.instant import Instant
from lakesdk.format.lsm_timeline import ArchivedInstant, parse_history_file_name
from lakesdk.timeline.history import LSMTimeline

from ..helpers import batch, hudi_read, hudi_rows, rows

pytestmark = pytest.mark.spark


def active(t) -> list[str]:
    return sorted({i.requested for i in t.timeline if i.action != "savepoint"})


def test_archive_T76_T77_history_layout_and_reads(lake):
    t = lake.create_table("a1", key="id", partition_by="p", ordering="ts")
    results = [t.upsert(batch(i, ids=(i, 10 + i))) for i in range(4)]     # every commit adds a file group
    plan = t.maintenance.plan_archive(min_commits=3, max_commits=4)
    assert len(plan) == 0 and "nothing to archive" in repr(plan)                           # T76
    assert t.maintenance.archive(min_commits=3, max_commits=4).history_file is None
    results += [t.upsert(batch(i, ids=(i, 10 + i))) for i in range(4, 6)]
    plan = t.maintenance.plan_archive(min_commits=3, max_commits=4)
    assert [i.requested for i in plan.instants] == [r.instant for r in results[:3]]        # T77: 6 - 3
    assert "move 3 instants (3 commits, 0 others)" in repr(plan) and "<table>" in plan._repr_html_()
    res = t.maintenance.archive(min_commits=3, max_commits=4)
    assert "ArchiveResult('a1': archived 3 instants into" in repr(res)
    assert active(t) == [r.instant for r in results[3:]]
    hist = f"{t.path}/.hoodie/timeline/history"
    files = sorted(os.listdir(hist))
    lo, hi, level = parse_history_file_name(res.history_file)
    assert files == sorted([res.history_file, "_version_", "manifest_1"]) and level == 0
    assert lo == results[0].instant and hi == results[2].completed
    assert open(f"{hist}/_version_").read() == "1"
    manifest = json.load(open(f"{hist}/manifest_1"))
    assert manifest == {"files": [{"fileName": res.history_file, "fileLen": os.path.getsize(f"{hist}/{res.history_file}")}]}
    tab = pq.read_table(f"{hist}/{res.history_file}")
    assert tab.column_names == ["instantTime", "completionTime", "action", "metadata", "plan", "version"]
    assert tab.column("action").to_pylist() == ["commit"] * 3
    avro = json.loads(tab.schema.metadata[b"parquet.avro.schema"])
    assert (avro["namespace"], avro["name"]) == ("org.apache.hudi.avro.model", "HoodieLSMTimelineInstant")
    assert tab.column("metadata").to_pylist()[0][:4] == b"Obj\x01"          # the completed file's Avro bytes
    # reads: base files of archived commits count as committed (FileSystemView, layout 2); hudi lists storage
    expected = sorted([(k, f"v{k}") for k in range(6)] + [(10 + k, f"v{k}") for k in range(6)])
    assert rows(t.read()) == expected == hudi_rows(t.path)
    assert rows(t.as_of(results[4].instant)) == [r for r in expected if r[1] != "v5"] == hudi_rows(t.path, results[4].instant)
    h = t.history().to_pydict()
    assert h["instant"] == [r.instant for r in results] and h["archived"] == [True] * 3 + [False] * 3
    assert h["inserted"] == [2] * 6 and set(h["operation"]) == {"UPSERT"}


def test_archive_stops_at_savepoint_T78_and_beyond_T79(lake):
    t = lake.create_table("a2", key="id", ordering="ts")
    results = [t.upsert(batch(i, ids=(i,))) for i in range(6)]
    t.maintenance.savepoint(results[1])
    plan = t.maintenance.plan_archive(min_commits=3, max_commits=4)
    assert [i.requested for i in plan.instants] == [results[0].instant]                    # T78
    assert f"savepoint {results[1].instant}" in repr(plan)
    beyond = t.maintenance.plan_archive(min_commits=3, max_commits=4, beyond_savepoint=True)
    assert [i.requested for i in beyond.instants] == [results[i].instant for i in (0, 2, 3)]   # T79
    t.maintenance.archive(min_commits=3, max_commits=4, beyond_savepoint=True)
    assert active(t) == [results[i].instant for i in (1, 4, 5)]
    # the active timeline now has a hole: FileSystemView starts it at the first non-savepoint instant
    expected = [(k, f"v{k}") for k in range(6)]
    assert rows(t.read()) == expected == hudi_rows(t.path)
    assert rows(t.as_of(results[1].instant)) == expected[:2]


def test_archive_stops_before_pending_T80(lake):
    t = lake.create_table("a3", key="id", ordering="ts")
    results = [t.upsert(batch(i, ids=(i,))) for i in range(6)]
    pending = str(int(results[1].instant) + 1)
    assert pending < results[2].instant
    tl = f"{t.path}/.hoodie/timeline"
    open(f"{tl}/{pending}.commit.requested", "wb").close()
    open(f"{tl}/{pending}.inflight", "wb").close()
    plan = t.maintenance.plan_archive(min_commits=3, max_commits=4)
    assert [i.requested for i in plan.instants] == [results[0].instant]                    # T80
    assert f"pending commit {pending}" in repr(plan)


def test_archive_config_validation_T81(lake):
    t = lake.create_table("a4", key="id")
    with pytest.raises(ValueError, match="Increase hoodie.keep.max.commits"):
        t.maintenance.archive(min_commits=4, max_commits=4)
    with pytest.raises(ValueError, match="min_commits"):
        t.maintenance.plan_archive(min_commits=0, max_commits=4)


def test_archive_takes_cleans_and_rollbacks_along_T82(lake):
    t = lake.create_table("a5", key="id", ordering="ts")
    t.upsert(batch(0))
    failed = str(int(t.timeline.max_time()) + 1)
    tl = f"{t.path}/.hoodie/timeline"
    open(f"{tl}/{failed}.commit.requested", "wb").close()           # a writer that died: rolled back by the next
    results = [t.upsert(batch(i)) for i in range(1, 4)]
    t.maintenance.clean(retain_commits=2)
    results += [t.upsert(batch(i)) for i in range(4, 9)]
    kinds = [i.action for i in t.timeline]
    assert kinds.count("rollback") == 1 and kinds.count("clean") == 1
    res = t.maintenance.archive(min_commits=3, max_commits=5)
    actions = sorted(i.action for i in res.archived)
    assert actions == ["clean", "commit", "commit", "commit", "commit", "commit", "commit", "rollback"]
    assert [i.action for i in t.timeline] == ["commit"] * 3
    h = t.history()
    assert sorted(h.filter(h["archived"])["action"].to_pylist()) == actions
    archived = LSMTimeline(t.storage, t.config).load()
    clean = next(a for a in archived if a.action == "clean")
    assert clean.plan is not None and clean.metadata[:4] == b"Obj\x01"    # clean plan kept as the plan column
    assert rows(t.read()) == [(k, "v8") for k in (1, 2, 3)] == hudi_rows(t.path)


def test_archive_mor_keeps_delta_commits_of_live_log_files(lake):
    t = lake.create_table("a6", key="id", ordering="ts", table_type="mor")
    results = [t.upsert(batch(0, ids=range(1, 9)))]
    results += [t.upsert(batch(i, ids=(i,))) for i in range(1, 7)]      # 6 delta commits with log files
    plan = t.maintenance.plan_archive(min_commits=2, max_commits=3)
    # only the first delta commit (base files) may go: every later one wrote a log file of a live slice
    assert [i.requested for i in plan.instants] == [results[0].instant]
    assert f"log files of delta commit {results[1].instant}" in repr(plan)
    t.maintenance.compact()
    results += [t.upsert(batch(i, ids=(i,))) for i in range(7, 9)]
    t.maintenance.clean(retain_commits=3)
    plan = t.maintenance.plan_archive(min_commits=2, max_commits=3)
    assert plan.instants and all(i.requested < results[7].instant for i in plan.instants if i.action != "clean")
    t.maintenance.archive(min_commits=2, max_commits=3)
    expected = [(k, f"v{k}") for k in range(1, 9)]
    assert rows(t.read()) == expected == hudi_rows(t.path)
    for r in results[-2:]:           # time travel to the retained (active) commits
        assert rows(t.as_of(r.instant)) == hudi_rows(t.path, r.instant)
    assert any(i.action == "compaction" for i in active_or_archived(t))


def active_or_archived(t) -> list[Instant]:
    return list(t.timeline) + LSMTimeline(t.storage, t.config).instants()


def test_archive_keeps_replacecommit_until_replaced_files_are_cleaned(lake):
    t = lake.create_table("a7", key="id", partition_by="p", ordering="ts")
    t.upsert(batch(0, ids=(1, 2, 3, 4)))
    over = t.insert_overwrite(batch(1, ids=(1, 3)))
    for i in range(2, 8):
        t.upsert(batch(i, ids=(2, 4)))
    plan = t.maintenance.plan_archive(min_commits=2, max_commits=3)
    assert [i.requested for i in plan.instants] == [t.history()["instant"][0].as_py()]
    assert f"replacecommit {over.instant}" in repr(plan)
    t.maintenance.clean(retain_commits=2)                   # deletes the replaced file group
    plan = t.maintenance.plan_archive(min_commits=2, max_commits=3)
    assert over.instant in [i.requested for i in plan.instants]
    t.maintenance.archive(min_commits=2, max_commits=3)
    assert rows(t.read()) == [(1, "v1"), (2, "v7"), (3, "v1"), (4, "v7")] == hudi_rows(t.path)


def test_lsm_history_compaction_and_manifests(tmp_path):
    from lakesdk.format.table_config import TableConfig
    from lakesdk.storage import Storage
    lake = lk.Lake(str(tmp_path))
    cfg: TableConfig = lake.create_table("a8", key="id").config
    storage = Storage(str(tmp_path / "a8"))
    lsm = LSMTimeline(storage, cfg)
    n = 0
    for _ in range(12):
        entries = []
        for _k in range(3):
            n += 1
            req = f"20250101000{n:03d}000"
            entries.append(ArchivedInstant(Instant("commit", "completed", req, req[:-3] + "500"), b"m", None))
        lsm.append(entries)
    names = [f for f, _ in lsm.manifest()]
    levels = sorted(parse_history_file_name(f)[2] for f in names)
    assert levels == [0, 0, 1] and lsm.latest_version() == 13          # 10 level-0 files merged into one
    assert lsm.versions() == [9, 10, 11, 12, 13]      # cleaned after the compaction (version 11): 3 kept
    on_disk = {f for f in os.listdir(tmp_path / "a8/.hoodie/timeline/history") if f.endswith(".parquet")}
    assert on_disk == {f for v in lsm.versions() for f, _ in lsm.manifest(v)}   # files of the kept versions
    loaded = lsm.load()
    assert len(loaded) == 36 and [a.instant.requested for a in loaded] == sorted(a.instant.requested for a in loaded)
    assert loaded[0].metadata == b"m" and loaded[0].instant.completed.endswith("500")


def test_archive_beyond_savepoint_keeps_delta_commits_of_live_log_files(lake):
    t = lake.create_table("a9", key="id", ordering="ts", table_type="mor")
    results = [t.upsert(batch(0, ids=range(1, 9)))]
    results += [t.upsert(batch(i, ids=(i,))) for i in range(1, 7)]      # log files on the first base file
    t.maintenance.savepoint(results[0])
    plan = t.maintenance.plan_archive(min_commits=2, max_commits=3, beyond_savepoint=True)
    assert not plan.instants and f"log files of delta commit {results[1].instant}" in repr(plan)
    t.maintenance.archive(min_commits=2, max_commits=3, beyond_savepoint=True)
    expected = [(k, f"v{k}") for k in range(1, 7)] + [(7, "v0"), (8, "v0")]
    assert rows(t.read()) == expected == hudi_rows(t.path)
    t.maintenance.compact()
    assert rows(t.read()) == expected == hudi_rows(t.path)


def test_archive_beyond_savepoint_keeps_commits_of_latest_base_files(lake):
    t = lake.create_table("a10", key="id", partition_by="p", ordering="ts")
    results = [t.upsert(batch(0, ids=(1, 2))), t.upsert(batch(1, ids=(1, 2))), t.upsert(batch(2, ids=(1,)))]
    results += [t.upsert(batch(i, ids=(2,))) for i in range(3, 6)]     # id 1's latest file: commit 2
    t.maintenance.savepoint(results[1])
    plan = t.maintenance.plan_archive(min_commits=2, max_commits=3, beyond_savepoint=True)
    assert [i.requested for i in plan.instants] == [results[0].instant]
    assert f"base files of commit {results[2].instant}" in repr(plan)
    t.maintenance.archive(min_commits=2, max_commits=3, beyond_savepoint=True)
    assert rows(t.read()) == [(1, "v2"), (2, "v5")] == hudi_rows(t.path)


def test_mor_time_travel_to_archived_delta_commits_reads_their_log_files(lake):
    t = lake.create_table("a11", key="id", ordering="ts", table_type="mor")
    results = [t.upsert(batch(0, ids=range(1, 5)))]
    results += [t.upsert(batch(i, ids=(i,))) for i in range(1, 4)]      # log files on the first base file
    t.maintenance.compact()
    results += [t.upsert(batch(i, ids=(i,))) for i in range(4, 8)]
    res = t.maintenance.archive(min_commits=2, max_commits=3)
    archived = {i.requested for i in res.archived}
    assert {r.instant for r in results[1:4]} <= archived
    for r in results[1:4]:           # the delta commits' completion times come from the timeline history
        assert rows(t.as_of(r.instant)) == hudi_rows(t.path, r.instant)
    assert rows(t.as_of(results[2].instant)) == [(1, "v1"), (2, "v2"), (3, "v0"), (4, "v0")]
    spark_rows = sorted((r["id"], r["v"]) for r in t.as_of(results[2].instant).to_spark().collect())
    assert spark_rows == [(1, "v1"), (2, "v2"), (3, "v0"), (4, "v0")]


def test_rollback_refused_when_it_would_leave_no_active_commit_after_archival(lake):
    t = lake.create_table("a_rb", key="id", ordering="ts")
    results = [t.upsert(batch(i, ids=(i,))) for i in range(4)]
    t.maintenance.archive(min_commits=1, max_commits=2)
    last = t.timeline.commits[-1].requested
    assert [i.requested for i in t.timeline.commits] == [last]
    with pytest.raises(lk.RollbackNotAllowedError, match="no completed commit on the active timeline"):
        t.maintenance.rollback(last)
    with pytest.raises(lk.RollbackNotAllowedError):
        t.maintenance.plan_rollback(last)
    expected = [(k, f"v{k}") for k in range(4)]
    assert rows(t.read()) == expected == hudi_rows(t.path)
    t.upsert(batch(4, ids=(4,)))                                         # a later commit keeps one active
    t.maintenance.rollback(t.timeline.commits[-1].requested)
    assert rows(t.read()) == expected == hudi_rows(t.path)
    assert results[-1].instant == last


def evolved_table(tmp_path, engine: str, name: str):
    """A table whose first commit has columns of types a data file's footer does not keep exactly
    (a list's item name, a zone, a nested naive timestamp), and whose later commits add a column:
    (table, first schema, later schema, first commit)."""
    import pyarrow as pa
    lake = lk.Lake(str(tmp_path), options=lk.TableOptions(engine=engine))
    t = lake.create_table(name, key="k", ordering="ts")
    s = pa.schema([("k", pa.string()), ("ts", pa.int64()), ("l", pa.list_(pa.int16())),
                   ("at", pa.timestamp("us", "Asia/Tokyo")), ("n", pa.struct([("q", pa.timestamp("us"))]))])
    first = t.upsert(pa.table({"k": ["a"], "ts": [1], "l": [[1]], "at": [1], "n": [{"q": 1}]}, schema=s))
    later = s.append(pa.field("extra", pa.int32()))
    for i in range(3):
        t.upsert(pa.table({"k": [f"b{i}"], "ts": [1], "l": [[2]], "at": [2], "n": [{"q": 2}], "extra": [i]},
                          schema=later))
    return t, s, later, first


@pytest.mark.parametrize("engine", ["local", "spark"])
def test_time_travel_to_an_archived_commit_reads_the_schema_of_that_commit(tmp_path, spark, engine):
    t, s, later, first = evolved_table(tmp_path, engine, "a_schema")
    before = t.as_of(first.instant).to_arrow()
    assert str(before.schema) == str(s)                 # str: == ignores a list's item name
    t.maintenance.archive(min_commits=1, max_commits=2)
    assert first.instant not in {i.requested for i in t.timeline}
    after = t.as_of(first.instant).to_arrow()
    assert str(after.schema) == str(s) and after.equals(before)
    assert str(t.read().to_arrow().schema) == str(later)


@pytest.mark.parametrize("policy", ["KEEP_LATEST_COMMITS", "KEEP_LATEST_FILE_VERSIONS"])
def test_time_travel_stays_guarded_after_the_clean_is_archived(lake, policy):
    # a clean that deleted old versions moves into the history with the commits before it; time
    # travel to those commits must still be refused (it answered with an empty table)
    t = lake.create_table(f"g{policy[12]}", key="id", ordering="ts")
    results = [t.upsert(batch(i)) for i in range(5)]
    done = t.maintenance.clean(policy=policy, retain_commits=1, retain_versions=1)
    assert done is not None and done.deleted
    results += [t.upsert(batch(i)) for i in range(5, 10)]
    res = t.maintenance.archive(min_commits=1, max_commits=2)
    assert "clean" in {i.action for i in res.archived}
    assert [i.action for i in t.timeline] == ["commit"]
    for r in results[:4]:
        with pytest.raises(lk.TimeTravelError, match="Cleaner cleaned up|sufficient commits are retained"):
            t.as_of(r.instant).to_arrow()
    for k, r in enumerate(results):
        if policy == "KEEP_LATEST_COMMITS" and k >= 4 and r.instant >= done.earliest:
            assert rows(t.as_of(r.instant)) == [(i, f"v{k}") for i in (1, 2, 3)]
    assert rows(t.as_of(results[-1].instant)) == [(i, "v9") for i in (1, 2, 3)]


def test_incremental_read_ending_at_an_archived_commit_reads_the_latest_schema(tmp_path):
    """An incremental read is typed by the latest schema, as Apache Hudi's are (the column
    added later reads null), before and after its commits are archived."""
    t, s, later, first = evolved_table(tmp_path, "local", "a_inc_schema")
    before = t.incremental(None, first.completed, meta_fields=False).to_arrow()
    assert str(before.schema) == str(later) and before.num_rows == 1
    assert before.column("extra").to_pylist() == [None]
    assert before.drop_columns(["extra"]).equals(t.as_of(first.instant).to_arrow())
    t.maintenance.archive(min_commits=1, max_commits=2)
    assert first.instant not in {i.requested for i in t.timeline}
    after = t.incremental(None, first.completed, meta_fields=False).to_arrow()
    assert str(after.schema) == str(later) and after.equals(before)


def test_archival_leaves_no_hole_before_an_instant_created_late(tmp_path, monkeypatch):
    """A writer takes its instant time, then (under load) creates its requested file a moment
    later; meanwhile another writer commits and archival moves commits later than that time
    into the history.  The late instant then starts the active timeline before archived commits,
    whose base files readers no longer take as committed: a committed update vanished (the
    at-scale archival race lost it).  Instants are now created under the table lock, later than
    every instant on the timeline, and archival runs under it."""
    import threading

    import pandas as pd

    from lakesdk.concurrency import heartbeat as hb
    opts = lk.TableOptions(concurrency="optimistic", lock="in_process", engine="local")
    lake = lk.Lake(str(tmp_path), options=opts)
    t = lake.create_table("t", key="id", partition_by="p", ordering="ts")
    t.upsert(pd.DataFrame({"id": [1], "p": ["a"], "ts": [1], "v": ["a0"]}))
    for i in range(3):
        t.upsert(pd.DataFrame({"id": [3], "p": ["c"], "ts": [1 + i], "v": [f"c{i}"]}))
    slow, other = lk.open_table(t.path, options=opts), lk.open_table(t.path, options=opts)
    main = threading.current_thread()
    state = {"armed": False}
    original = hb.Heartbeat.start

    def others_meanwhile():
        other.upsert(pd.DataFrame({"id": [1], "p": ["a"], "ts": [5], "v": ["a-new"]}))
        other.upsert(pd.DataFrame({"id": [3], "p": ["c"], "ts": [5], "v": ["c-new"]}))
        other.maintenance.archive(min_commits=1, max_commits=2)

    def start(self):
        if state["armed"] and threading.current_thread() is main:
            state["armed"] = False
            state["thread"] = th = threading.Thread(target=others_meanwhile)
            th.start()
            th.join(timeout=3)          # with the lock held here, the other writer waits for it
        return original(self)
    monkeypatch.setattr(hb.Heartbeat, "start", start)
    state["armed"] = True
    slow.upsert(pd.DataFrame({"id": [2], "p": ["b"], "ts": [1], "v": ["b0"]}))
    state["thread"].join()
    monkeypatch.undo()
    df = lk.open_table(t.path).read().to_pandas()
    assert dict(zip(df.id, df.v)) == {1: "a-new", 2: "b0", 3: "c-new"}
    assert hudi_rows(t.path) == [(1, "a-new"), (2, "b0"), (3, "c-new")]


def test_reads_take_archived_commits_after_the_start_of_the_active_timeline_as_committed(lake):
    """A table whose active timeline starts before an archived commit (a pending instant older
    than it, as an instant created late left before instants were created under the table lock):
    the archived commit's base files are committed, and reads must not fall back to older ones."""
    t = lake.create_table("hole", key="id", partition_by="p", ordering="ts")
    results = [t.upsert(batch(i, ids=(1, 2))) for i in range(4)] + [t.upsert(batch(4, ids=(1,)))]
    t.maintenance.archive(min_commits=1, max_commits=2)
    assert [i.requested for i in t.timeline] == [results[-1].instant]
    late = str(int(results[1].instant) + 1)       # between two archived commits
    open(f"{t.path}/.hoodie/timeline/{late}.commit.requested", "wb").close()
    assert rows(lk.open_table(t.path).read()) == [(1, "v4"), (2, "v3")]


def test_time_travel_into_a_hole_archival_beyond_a_savepoint_left_is_guarded(tmp_path):
    """Archival beyond a savepoint keeps the savepointed commit active and archives later ones;
    once the savepoints are deleted, that commit starts the active timeline before archived
    commits.  A clean without a window (KEEP_LATEST_FILE_VERSIONS) then deletes their files:
    time travel to them must be refused; it answered with the older commit's rows (found by
    the soak)."""
    import pandas as pd
    t = lk.Lake(str(tmp_path), options=lk.TableOptions(engine="local", markers="direct")).create_table(
        "t", key="k", partition_by="p", ordering="ts")

    def df(keys, ts):
        return pd.DataFrame({"k": keys, "p": ["a"] * len(keys), "ts": [ts] * len(keys)})
    c1 = t.bulk_insert(df(["x"], 1))
    t.maintenance.savepoint(c1.instant)
    c2 = t.upsert(df(["0", "y"], 3))
    t.delete(["zz"])
    t.maintenance.savepoint(c2.instant)
    t.maintenance.archive(min_commits=1, max_commits=2, beyond_savepoint=True)
    t.delete(["x"])
    t.insert_overwrite(df(["q1", "q2"], 5), scope="table")
    t.maintenance.delete_savepoint(c2.instant)
    res = t.maintenance.archive(min_commits=1, max_commits=2, beyond_savepoint=True)
    assert c2.instant in {i.requested for i in res.archived}
    assert t.maintenance.clean(policy="keep_latest_file_versions", retain_versions=1).deleted
    t.maintenance.delete_savepoint(c1.instant)
    assert t.timeline.instants[0].requested == c1.instant      # active, before the archived c2
    with pytest.raises(lk.TimeTravelError, match="reaches commits archived after the active commit"):
        t.as_of(c2.instant).to_arrow()
    assert sorted(t.as_of(c1.instant).to_pandas().k) == ["x"]


def test_mor_time_travel_into_a_hole_reads_the_log_files_of_archived_delta_commits(tmp_path):
    """Archival beyond a savepoint archives the delta commits after the savepointed one; once the
    savepoint is deleted, the savepointed commit starts the active timeline before them.  Their
    base files were taken as committed (from the timeline history) but their log files were not:
    time travel to an archived delete answered with the row it deleted (found by the soak)."""
    import pandas as pd
    t = lk.Lake(str(tmp_path), options=lk.TableOptions(engine="local", markers="direct")).create_table(
        "t", key="k", partition_by="p", ordering="ts", table_type="mor")

    def df(keys, ts):
        return pd.DataFrame({"k": keys, "p": ["a"] * len(keys), "ts": [ts] * len(keys)})
    t.upsert(df(["x", "y"], 1))
    c2 = t.delete(["x", "y"])                   # a delete block on the first file group
    c3 = t.upsert(df(["x", "z"], 2))            # a second file group
    t.maintenance.savepoint(c2.instant)
    c4 = t.delete(["x"])                        # a delete block on the second
    t.maintenance.compact()
    res = t.maintenance.archive(min_commits=1, max_commits=2, beyond_savepoint=True)
    assert {c3.instant, c4.instant} <= {i.requested for i in res.archived}
    want = {c2.instant: [], c3.instant: ["x", "z"], c4.instant: ["z"]}
    for deleted in (False, True):
        if deleted:
            t.maintenance.delete_savepoint(c2.instant)
            assert t.timeline.instants[0].requested == c2.instant      # active, before the archived c3, c4
        for instant, keys in want.items():
            assert sorted(t.as_of(instant).to_pandas().k) == keys, (deleted, instant)
        assert sorted(t.read().to_pandas().k) == ["z"]
        assert sorted(r["k"] for r in hudi_read(t.path)) == ["z"]


def test_archival_plans_before_the_lock_and_plans_again_when_another_archived_meanwhile(lake, monkeypatch):
    """The plan (the costly listing) is made before the table lock; under it the plan is
    checked against the timeline.  An archival that ran in between makes it stale: the
    instants it would move are gone, so it plans again instead of moving them twice."""
    from lakesdk.services import archival
    t = lake.create_table("replan", key="id", partition_by="p", ordering="ts")
    results = [t.upsert(batch(i, ids=(i, 10 + i))) for i in range(8)]
    original = archival.plan_archive
    calls = []

    def plan_then_another_archives(table, **kw):
        plan = original(table, **kw)
        calls.append(len(plan))
        if len(calls) == 1:
            other = lk.open_table(t.path)
            assert len(other.maintenance.archive(min_commits=5, max_commits=6).archived) == 3
        return plan
    monkeypatch.setattr(archival, "plan_archive", plan_then_another_archives)
    res = t.maintenance.archive(min_commits=3, max_commits=4)
    monkeypatch.undo()
    assert calls == [5, 3, 2]                       # the stale plan, the other's, the new one
    assert [i.requested for i in res.archived] == [r.instant for r in results[3:5]]
    hist = [a.instant.requested for a in archival.archived_instants(t)]
    assert sorted(hist) == [r.instant for r in results[:5]]             # each instant once
    assert active(t) == [r.instant for r in results[5:]]
    expected = sorted([(k, f"v{k}") for k in range(8)] + [(10 + k, f"v{k}") for k in range(8)])
    assert rows(t.read()) == expected == hudi_rows(t.path)


def test_files_a_rollback_missed_are_deleted_before_archival_moves_past_them(tmp_path):
    """A file of a rolled-back write finished after the rollback (a writer of another
    process that died before it could delete it) is invisible while its instant is newer
    than the start of the active timeline; archival would move that start past it and every
    reader (lakesdk's and the ``hudi`` reader) would take it for committed.  Archival
    deletes such files first."""
    import shutil

    import pandas as pd

    from lakesdk.table.transaction import abort, begin, write_batch
    t = lk.Lake(str(tmp_path / "lake")).create_table("z", key="id", partition_by="p", ordering="ts",
                                                      table_type="mor")
    t.upsert(pd.DataFrame({"id": [1, 2], "ts": [0, 0], "p": ["a", "b"], "v": ["init"] * 2}))
    txn = begin(t, operation="insert")
    write_batch(t, txn, pd.DataFrame({"id": [7, 8], "ts": [1, 1], "p": ["a", "b"], "v": ["late"] * 2}))
    late = [f.path for f in t.storage.find("") if txn.instant in f.path and not f.path.startswith(".hoodie")]
    assert late
    for f in late:
        shutil.copy(t.storage.url(f), t.storage.url(f) + ".keep")
    abort(t, txn)
    for f in late:     # the dead writer's files, finished after the rollback
        os.replace(t.storage.url(f) + ".keep", t.storage.url(f))
    for i in range(6):
        t.upsert(pd.DataFrame({"id": [1], "ts": [i + 1], "p": ["a"], "v": [f"u{i}"]}))
    assert sorted(t.read().to_pandas().id) == [1, 2]
    res = t.maintenance.archive(min_commits=2, max_commits=3)
    assert res.history_file is not None and all(i.requested > txn.instant for i in t.timeline.commits)
    assert not t.storage.exists(late[0]) and not any(t.storage.exists(f) for f in late)
    assert sorted(t.read().to_pandas().id) == [1, 2]
    assert sorted(r[0] for r in hudi_rows(t.path)) == [1, 2]


def test_archival_keeps_commits_completed_after_a_pending_write_started(tmp_path):
    """Archival stopped at the last commit *requested* before the oldest pending write; a
    commit requested earlier that completed after the write started was archived, and the
    write's conflict check at its commit (which reads the active timeline) missed it: the
    write committed over the file group that commit had changed, and lost its update (found
    by the service soak: duplicate keys once a clustering it missed replaced the file
    group).  Commits that completed after the oldest pending instant was requested stay."""
    import pandas as pd

    from lakesdk.services.archival import archived_instants
    from lakesdk.table.transaction import begin, commit, write_batch
    lake = lk.Lake(str(tmp_path), concurrency="optimistic", lock="in_process")
    t = lake.create_table("t", key="id", partition_by="p", ordering="ts")
    for i in range(3):
        t.upsert(pd.DataFrame({"id": [1, 2], "p": ["a", "a"], "ts": [i, i], "v": [f"v{i}"] * 2}))
    c = begin(t)                                            # requested first, completes last
    c_stats, c_schema = write_batch(t, c, pd.DataFrame({"id": [1, 2], "p": ["a", "a"], "ts": [10, 10],
                                                        "v": ["c", "c"]}))
    t.upsert(pd.DataFrame({"id": [50], "p": ["b"], "ts": [1], "v": ["d"]}))   # requested between them
    w = begin(t)
    w_stats, w_schema = write_batch(t, w, pd.DataFrame({"id": [1], "p": ["a"], "ts": [20], "v": ["w"]}))
    commit(t, c, c_stats, schema=c_schema)                  # completes after w started
    res = t.maintenance.archive(min_commits=1, max_commits=2)
    assert c.instant not in {a.instant.requested for a in archived_instants(t)}, res
    with pytest.raises(lk.WriteConflictError):
        commit(t, w, w_stats, schema=w_schema)
    assert dict(zip(*[t.read().to_pandas()[col] for col in ("id", "v")])) == {1: "c", 2: "c", 50: "d"}


@pytest.mark.parametrize("table_type", ["cow", "mor"])
def test_a_pending_savepoint_at_an_archived_commit_hides_none_of_its_files(lake, table_type):
    """A savepoint has the time of the commit it saves; while it is pending, that commit's files
    stay visible (a pending write hides its files, a pending savepoint writes none), and the
    metadata table's listing agrees."""
    from ..corpus_model import check_mdt
    lake = lk.Lake(lake.root, spark=lake._spark, options=lk.TableOptions(metadata=True, engine=lake.options.engine))
    t = lake.create_table(f"sp_{table_type}", key="id", ordering="ts", table_type=table_type, partition_by="p")
    first = t.upsert(batch(1, ids=(1, 2)))
    t.upsert(batch(2, ids=(3,)))
    t.upsert(batch(3, ids=(2,)))
    t.maintenance.archive(min_commits=1, max_commits=2)
    assert first.instant not in {i.requested for i in t.timeline}
    store = t.context.store
    requested = Instant("savepoint", "requested", first.instant)
    store.create(requested)
    inflight = store.transition(requested, "inflight")
    try:
        assert rows(t.read()) == [(1, "v1"), (2, "v3"), (3, "v2")]
        check_mdt(t.path, "with a pending savepoint")
    finally:
        store.delete(inflight)
        store.delete(requested)
