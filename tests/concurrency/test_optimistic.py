"""Optimistic concurrency: conflicts on the same file groups fail with WriteConflictError,
disjoint writes both land, and a stress test of concurrent writer processes keeps the
table equal to the fold of exactly the commits that landed."""

from __future__ import annotations

import textwrap
import threading

import pandas as pd
import pytest

import lakesdk as lk
from lakesdk.table.write import WriteOperation

from ..helpers import check_no_leftovers, stress
from ..helpers import city_batch as rows

pytestmark = pytest.mark.spark


def test_conflict_on_same_file_group_fails_typed(tmp_path, monkeypatch):
    path = str(tmp_path / "t")
    lake = lk.Lake(str(tmp_path), concurrency="optimistic", lock="in_process")
    t = lake.create_table("t", key="id", partition_by="city")
    t.upsert(rows(range(10), "base"))
    other = lk.open_table(path, concurrency="optimistic", lock="in_process")
    original = WriteOperation._finalize
    fired = []

    def racing_finalize(self, ctx, stats, partitions):
        if not fired and self.table is t:
            fired.append(other.upsert(rows([1], "other wins")))   # commits first, same file group
        return original(self, ctx, stats, partitions)
    monkeypatch.setattr(WriteOperation, "_finalize", racing_finalize)
    before_files = {f.path for f in t.storage.find("") if not f.path.startswith(".hoodie")}
    with pytest.raises(lk.WriteConflictError) as e:
        t.upsert(rows([2], "loser"))
    msg = str(e.value)
    assert fired[0].instant in msg and "city=sf" in msg and "retry" in msg
    assert e.value.other_instant == fired[0].instant
    got = dict(zip(*t.read().to_pandas()[["id", "v"]].values.T))
    assert got[1] == "other wins" and got[2] == "base"       # the loser left no trace
    after_files = {f.path for f in t.storage.find("") if not f.path.startswith(".hoodie")}
    assert after_files - before_files == set(fired[0].file_paths)
    assert not t.timeline.pending


def test_disjoint_file_groups_both_land(tmp_path, monkeypatch):
    lake = lk.Lake(str(tmp_path), concurrency="optimistic", lock="in_process")
    t = lake.create_table("t", key="id", partition_by="city")
    t.upsert(pd.concat([rows(range(5), "a", "sf"), rows(range(5, 10), "a", "nyc")]))
    other = lk.open_table(t.path, concurrency="optimistic", lock="in_process")
    original = WriteOperation._finalize
    fired = []

    def racing_finalize(self, ctx, stats, partitions):
        if not fired and self.table is t:
            fired.append(other.upsert(rows([7], "nyc-writer", "nyc")))
        return original(self, ctx, stats, partitions)
    monkeypatch.setattr(WriteOperation, "_finalize", racing_finalize)
    r = t.upsert(rows([1], "sf-writer", "sf"))
    got = dict(zip(*t.read().to_pandas()[["id", "v"]].values.T))
    assert got[1] == "sf-writer" and got[7] == "nyc-writer" and r.completed > fired[0].completed


@pytest.mark.parametrize("table_type", ["cow", "mor"])
def test_incremental_range_ending_inside_a_write_reads_rows_before_it(tmp_path, monkeypatch, table_type):
    """A write requested before the end of an incremental range and completed after it is not
    read: the range returns the versions of the rows it rewrote as of the end (Hudi reads the
    files the commits of the range wrote), not nothing because their newest version is later."""
    lake = lk.Lake(str(tmp_path), concurrency="optimistic", lock="in_process")
    t = lake.create_table("t", key="id", partition_by="city", table_type=table_type)
    first = t.upsert(pd.concat([rows(range(5), "a", "sf"), rows(range(5, 10), "a", "nyc")]))
    other = lk.open_table(t.path, concurrency="optimistic", lock="in_process")
    original = WriteOperation._finalize
    fired = []

    def racing_finalize(self, ctx, stats, partitions):
        if not fired and self.table is t:
            fired.append(other.upsert(rows([7], "inside", "nyc")))
        return original(self, ctx, stats, partitions)
    monkeypatch.setattr(WriteOperation, "_finalize", racing_finalize)
    late = t.upsert(rows([1, 2], "late", "sf"))
    monkeypatch.setattr(WriteOperation, "_finalize", original)
    inside = fired[0]
    assert late.instant < inside.completed < late.completed
    got = t.incremental(None, inside.completed, meta_fields=True).to_pandas()
    assert dict(zip(got["id"], got["v"])) == {**{k: "a" for k in range(10)}, 7: "inside"}
    assert set(got["_hoodie_commit_time"]) == {first.instant, inside.instant}
    got = t.incremental(first.completed, inside.completed).to_pandas()
    assert dict(zip(got["id"], got["v"])) == {7: "inside"}
    got = t.incremental(inside.completed, late.completed).to_pandas()
    assert dict(zip(got["id"], got["v"])) == {1: "late", 2: "late"}
    # a time travel as of the late write's requested time sees neither (it was requested first)
    got = t.as_of(late.instant).to_pandas()
    assert dict(zip(got["id"], got["v"])) == {**{k: "a" for k in range(10)}, 1: "late", 2: "late"}

def test_merge_on_read_log_appends_do_not_conflict(tmp_path, monkeypatch):
    lake = lk.Lake(str(tmp_path), concurrency="optimistic", lock="in_process")
    t = lake.create_table("t", key="id", table_type="mor", ordering="ts")
    t.upsert(pd.DataFrame({"id": [1, 2], "ts": [1, 1], "v": ["a", "b"]}))
    other = lk.open_table(t.path, concurrency="optimistic", lock="in_process")
    original = WriteOperation._finalize
    fired = []

    def racing_finalize(self, ctx, stats, partitions):
        if not fired and self.table is t:
            fired.append(other.upsert(pd.DataFrame({"id": [1], "ts": [5], "v": ["late start, newer ts"]})))
        return original(self, ctx, stats, partitions)
    monkeypatch.setattr(WriteOperation, "_finalize", racing_finalize)
    t.upsert(pd.DataFrame({"id": [1, 2], "ts": [3, 3], "v": ["x", "y"]}))
    got = dict(zip(*t.read().to_pandas()[["id", "v"]].values.T))
    assert got == {1: "late start, newer ts", 2: "y"}            # merged by ordering value, no conflict


WRITER = textwrap.dedent("""
    import json, random, sys
    import pandas as pd
    import lakesdk as lk
    path, wid, lock, n = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
    opts = json.loads(sys.argv[5])
    t = lk.open_table(path, concurrency="optimistic", lock=lock, lock_options=opts)
    rng = random.Random(wid)
    out = []
    for i in range(n):
        shared = rng.sample(range(20), 3)                  # overlapping keys, all writers
        own = [100 + wid * 100 + rng.randrange(50) for _ in range(2)]   # disjoint keys
        keys = sorted(set(shared + own))
        val = f"w{wid}-{i}"
        city = ["a", "b"]
        df = pd.DataFrame({"id": keys, "city": [city[k % 2] for k in keys], "v": [val] * len(keys)})
        try:
            r = t.upsert(df)
            out.append({"ok": True, "instant": r.instant, "completed": r.completed, "keys": keys, "v": val})
        except lk.WriteConflictError as e:
            out.append({"ok": False, "keys": keys, "v": val, "other": e.other_instant,
                        "error": "WriteConflictError"})
    print("RESULT" + json.dumps(out))
""")


def check_fold(t, results, *, init: str):
    """Every commit landed or failed with WriteConflictError; the table is the fold of
    exactly the landed commits in completion order; nothing is left behind."""
    assert all(r["ok"] or r["error"] == "WriteConflictError" for r in results), \
        {r["error"] for r in results if not r["ok"]}
    landed = sorted((r for r in results if r["ok"]), key=lambda r: r["completed"])
    assert len({r["completed"] for r in landed}) == len(landed)       # a strict completion order
    expect: dict[int, str] = {0: "init"}   # the first commit, before the writers
    for r in landed:
        for k in r["keys"]:
            expect[k] = r["v"]
    df = t.read().to_pandas()
    assert df.id.is_unique, f"duplicate keys {sorted(df.id[df.id.duplicated()])}"
    got = dict(zip(df.id, df.v))
    lost = {k: (v, got.get(k)) for k, v in expect.items() if got.get(k) != v}
    assert not lost, f"the table is not the fold of the landed commits (key: (expected, found)): {lost}"
    # the timeline holds exactly the first commit and the landed ones, all completed
    commits = t.timeline.commits
    assert sorted(i.requested for i in commits) == sorted([init] + [r["instant"] for r in landed])
    assert {i.completed for i in commits if i.requested != init} == {r["completed"] for r in landed}
    assert not t.timeline.pending
    check_no_leftovers(t, {i.requested for i in commits})
    return landed


def stress_table(tmp_path, table_type="cow"):
    t = lk.Lake(str(tmp_path)).create_table("s", key="id", partition_by="city", table_type=table_type)
    first = t.upsert(pd.DataFrame({"id": [0], "city": ["a"], "v": ["init"]}))
    return t, first.instant


def check_outcomes(results, *, collide=True):
    landed = [r for r in results if r["ok"]]
    assert len(results) == 100 and landed
    if collide:
        assert len(landed) < 100, "4 writers on 2 partitions must collide at least once: the test proves nothing otherwise"


@pytest.mark.parametrize("table_type", ["cow", "mor"])
def test_stress_four_writer_processes(tmp_path, table_type):
    """Storage lock.  Merge-on-read: updates are non-blocking log appends, so only writers
    inserting the same new key collide there."""
    t, init = stress_table(tmp_path, table_type)
    results = stress(t.path, "storage", script=WRITER, lock_options={"timeout_s": 120})
    check_fold(lk.open_table(t.path), results, init=init)
    check_outcomes(results)


@pytest.mark.parametrize("table_type", ["cow", "mor"])
def test_stress_threads_in_process_lock(tmp_path, table_type):
    """The in-process lock cannot span processes: 4 writer threads x 25 commits."""
    import random
    t, init = stress_table(tmp_path, table_type)
    results: list[dict] = []
    lock = threading.Lock()

    def writer(wid: int) -> None:
        h = lk.open_table(t.path, concurrency="optimistic", lock="in_process")
        rng = random.Random(wid)
        for i in range(25):
            keys = sorted(set(rng.sample(range(20), 3) + [100 + wid * 100 + rng.randrange(50) for _ in range(2)]))
            val = f"w{wid}-{i}"
            df = pd.DataFrame({"id": keys, "city": [["a", "b"][k % 2] for k in keys], "v": [val] * len(keys)})
            try:
                r = h.upsert(df)
                rec = {"ok": True, "instant": r.instant, "completed": r.completed, "keys": keys, "v": val}
            except Exception as e:  # noqa: BLE001 - check_fold asserts that every failure is a conflict
                rec = {"ok": False, "keys": keys, "v": val, "error": type(e).__name__}
            with lock:
                results.append(rec)
    threads = [threading.Thread(target=writer, args=(w,)) for w in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    check_fold(lk.open_table(t.path), results, init=init)
    check_outcomes(results)


@pytest.mark.zookeeper
def test_stress_four_writer_processes_zookeeper_lock(tmp_path, zk):
    t, init = stress_table(tmp_path)
    results = stress(t.path, "zookeeper", script=WRITER, lock_options={"zk_connect": zk.connect, "timeout_s": 120})
    check_fold(lk.open_table(t.path), results, init=init)
    check_outcomes(results)
