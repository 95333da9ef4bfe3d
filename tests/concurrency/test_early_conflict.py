"""Early conflict detection (concurrency.md section 5, cases C25-C31, markers.md M31):
a later writer that would write a file group an earlier, still running writer writes
stops before its data exists, for DIRECT and TIMELINE_SERVER_BASED markers, in threads
and in separate processes."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
import time

import pandas as pd
import pyarrow as pa
import pytest

import lakesdk as lk
from lakesdk.concurrency.early import EarlyConflictDetector, marker_file_group
from lakesdk.concurrency.heartbeat import Heartbeat
from lakesdk.engine import tasks
from lakesdk.format.file_naming import BaseFile, LogFile, is_base_file
from lakesdk.format.instant import Instant
from lakesdk.format.rollback_metadata import RollbackPlanData
from lakesdk.markers import DirectWriteMarkers, MarkerServer, write_markers
from lakesdk.table.write import WriteOperation

from .. import helpers
from ..helpers import city_batch as rows
from ..helpers import values

MARKERS = ["direct", "timeline_server"]


def options(markers: str, **kw) -> lk.TableOptions:
    return lk.TableOptions(engine="local", markers=markers, early_conflict_detection=True,
                           concurrency="optimistic", lock="storage", **kw)


def new_table(tmp_path, markers: str, **kw):
    t = lk.Lake(str(tmp_path), options=options(markers, **kw)).create_table("t", key="id", partition_by="city")
    t.upsert(rows(range(10), "base"))
    return t


# -- checks on the outcome ------------------------------------------------------------------
def loser_file_attempts(t, instant: str) -> int:
    """Data files the loser created or was about to create: its rollback plan lists every file
    its markers named (a marker precedes its data file) plus any file named with its instant."""
    store = t.context.store
    plans = []
    for rb in store.load().filter(actions=["rollback"]):
        plan = RollbackPlanData.parse(t.storage.read(store.path(Instant("rollback", "requested", rb.requested))))
        if plan.instant == instant:
            plans.append(sum(len(r.files_to_delete) for r in plan.requests))
    assert len(plans) == 1, f"expected one rollback of {instant}, found {len(plans)}"
    return plans[0]


def files_of(t, instant: str) -> list[str]:
    out = []
    for f in t.storage.find(""):
        name = f.path.rsplit("/", 1)[-1]
        if f.path.startswith(".hoodie") or name == ".hoodie_partition_metadata":
            continue
        inst = BaseFile.parse(name).instant if is_base_file(name) else LogFile.parse(name).instant
        if inst == instant:
            out.append(f.path)
    return out


def assert_no_orphans(t) -> None:
    completed = {i.requested for i in t.timeline.commits}
    for f in t.storage.find(""):
        name = f.path.rsplit("/", 1)[-1]
        if f.path.startswith(".hoodie") or name == ".hoodie_partition_metadata":
            continue
        inst = BaseFile.parse(name).instant if is_base_file(name) else LogFile.parse(name).instant
        assert inst in completed, f"orphan file {f.path}"
    assert not t.timeline.pending
    assert not [e for e in t.storage.list(".hoodie/.temp") if e.is_dir], "marker dirs left behind"
    assert not t.storage.list(".hoodie/.heartbeat"), "heartbeats left behind"


def assert_hudi_agrees(t) -> None:
    hudi = pytest.importorskip("hudi")
    ht = hudi.HudiTableBuilder.from_base_uri(t.path).build()
    batches = ht.read(hudi.HudiReadOptions())
    theirs = sorted(tuple(r.values()) for r in pa.Table.from_batches(batches).select(["id", "v"]).to_pylist())
    ours = sorted(tuple(r.values()) for r in t.read().to_arrow().select(["id", "v"]).to_pylist())
    assert ours == theirs


# -- C25 / C26: a real race in threads -------------------------------------------------------------
@pytest.mark.parametrize("markers", MARKERS)
def test_later_writer_stops_before_writing_threads(tmp_path, monkeypatch, markers):
    t = new_table(tmp_path, markers)
    first = t.timeline.commits[0]
    a = lk.open_table(t.path, options=t.options)
    b = lk.open_table(t.path, options=t.options)
    ready, go = threading.Event(), threading.Event()
    original = WriteOperation._finalize

    def held_finalize(self, ctx, stats, partitions):   # the winner waits, inflight, data written
        if self.table is a:
            ready.set()
            assert go.wait(60)
        return original(self, ctx, stats, partitions)
    monkeypatch.setattr(WriteOperation, "_finalize", held_finalize)
    attempts: list[str] = []
    write_parquet = tasks._write_parquet

    def counting(ctx, path, table, *more, **kw):
        attempts.append(path)
        return write_parquet(ctx, path, table, *more, **kw)
    monkeypatch.setattr(tasks, "_write_parquet", counting)

    result: dict = {}
    th = threading.Thread(target=lambda: result.setdefault("a", a.upsert(rows(range(5), "A"))))
    th.start()
    try:
        assert ready.wait(60)
        winner = t.timeline.pending[0].requested
        with pytest.raises(lk.EarlyConflictError) as e:
            b.upsert(rows(range(3, 8), "B"))
    finally:
        go.set()
        th.join(60)
    err = e.value
    assert isinstance(err, lk.WriteConflictError)
    assert err.other_instant == winner and err.other_action == "commit" and err.file_groups
    assert winner in str(err) and "city=sf/" in str(err) and "retry" in str(err).lower()
    assert result["a"].instant == winner
    loser = next(r.instant for r in t.inspect.transactions() if r.outcome == "early_conflict")
    assert loser > winner
    # the loser wrote at most one data file (here: none), and left nothing
    assert len([p for p in attempts if loser in p]) <= 1
    assert loser_file_attempts(t, loser) <= 1
    assert files_of(t, loser) == []
    assert values(t) == {**{k: "base" for k in range(10)}, **{k: "A" for k in range(5)}}
    assert_no_orphans(t)
    assert_hudi_agrees(t)
    if markers == "timeline_server":
        assert b.context.resources.server_of(b.storage).stats.early_conflicts == 1
        assert b.context.resources.server_of(b.storage).dir_state(loser) is None    # the server forgot the stopped instant
        assert b.context.resources.server_of(b.storage).early_conflict(loser) is None
    # the retry, once the winner committed, lands on top of it
    retry = b.upsert(rows(range(3, 8), "B"))
    assert {i.requested for i in t.timeline.commits} == {first.requested, winner, retry.instant}
    assert values(t) == {**{k: "base" for k in range(10)}, **{k: "A" for k in range(3)},
                         **{k: "B" for k in range(3, 8)}}
    assert_no_orphans(t)


# -- C25 / C26 in separate processes ---------------------------------------------------------------
WINNER = textwrap.dedent("""
    import json, os, sys, time
    import pandas as pd
    import lakesdk as lk
    from lakesdk.table.write import WriteOperation
    path, markers, sync = sys.argv[1], sys.argv[2], sys.argv[3]
    opts = lk.TableOptions(engine="local", markers=markers, early_conflict_detection=True,
                           concurrency="optimistic", lock="storage")
    t = lk.open_table(path, options=opts)
    original = WriteOperation._finalize
    def held(self, ctx, stats, parts):
        open(os.path.join(sync, "ready"), "w").write(ctx.instant)
        deadline = time.time() + 120
        while not os.path.exists(os.path.join(sync, "go")) and time.time() < deadline:
            time.sleep(0.02)
        return original(self, ctx, stats, parts)
    WriteOperation._finalize = held
    r = t.upsert(pd.DataFrame({"id": list(range(5)), "city": ["sf"] * 5, "v": ["A"] * 5}))
    print("RESULT" + json.dumps({"instant": r.instant}))
""")

LOSER = textwrap.dedent("""
    import json, sys
    import pandas as pd
    import lakesdk as lk
    path, markers = sys.argv[1], sys.argv[2]
    opts = lk.TableOptions(engine="local", markers=markers, early_conflict_detection=True,
                           concurrency="optimistic", lock="storage")
    t = lk.open_table(path, options=opts)
    try:
        r = t.upsert(pd.DataFrame({"id": list(range(3, 8)), "city": ["sf"] * 5, "v": ["B"] * 5}))
        out = {"ok": True, "instant": r.instant}
    except lk.EarlyConflictError as e:
        out = {"ok": False, "type": type(e).__name__, "other": e.other_instant, "groups": e.file_groups}
    print("RESULT" + json.dumps(out))
""")


def run_script(code: str, *args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", code, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=os.environ.copy())


def result_of(p: subprocess.Popen) -> dict:
    return helpers.result_of(p, timeout=300)


@pytest.mark.parametrize("markers", MARKERS)
def test_later_writer_stops_before_writing_processes(tmp_path, markers):
    t = new_table(tmp_path / "lake", markers)
    sync = tmp_path / "sync"
    sync.mkdir()
    winner = run_script(WINNER, t.path, markers, str(sync))
    try:
        deadline = time.time() + 120
        while not (sync / "ready").exists() and time.time() < deadline and winner.poll() is None:
            time.sleep(0.05)
        assert (sync / "ready").exists(), winner.stderr.read() if winner.poll() is not None else "winner never got ready"
        winner_instant = (sync / "ready").read_text()
        lost = result_of(run_script(LOSER, t.path, markers))
    finally:
        (sync / "go").write_text("")
    won = result_of(winner)
    assert won["instant"] == winner_instant
    assert lost["ok"] is False and lost["type"] == "EarlyConflictError" and lost["other"] == winner_instant
    assert lost["groups"] and lost["groups"][0][0] == "city=sf"
    rec = {r.instant: r for r in t.inspect.transactions()}
    loser = next(i for i, r in rec.items() if r.outcome == "early_conflict")
    assert rec[winner_instant].outcome == "committed"
    assert rec[loser].conflicts_with["instant"] == winner_instant
    assert loser_file_attempts(t, loser) <= 1 and files_of(t, loser) == []
    assert values(t) == {**{k: "base" for k in range(10)}, **{k: "A" for k in range(5)}}
    assert_no_orphans(t)
    assert_hudi_agrees(t)


# -- C28: only earlier writers count ----------------------------------------------------------------
def test_earlier_writer_is_not_stopped_by_a_later_one(tmp_path, monkeypatch):
    """A (earlier instant) plans, B (later) writes its markers and waits inflight; A's check
    ignores B's markers, so A writes and commits; B then loses at commit time."""
    t = new_table(tmp_path, "direct")
    a = lk.open_table(t.path, options=t.options)
    b = lk.open_table(t.path, options=t.options)
    a_started, a_go, b_ready, b_go = (threading.Event() for _ in range(4))
    run, finalize = WriteOperation._run, WriteOperation._finalize

    def held_run(self, ctx, *args):
        if self.table is a:          # A holds its instant, before any marker
            a_started.set()
            assert a_go.wait(60)
        return run(self, ctx, *args)

    def held_finalize(self, ctx, stats, partitions):
        if self.table is b:          # B's markers and data exist
            b_ready.set()
            assert b_go.wait(60)
        return finalize(self, ctx, stats, partitions)
    monkeypatch.setattr(WriteOperation, "_run", held_run)
    monkeypatch.setattr(WriteOperation, "_finalize", held_finalize)
    out: dict = {}

    def writer(name, table, df):
        try:
            out[name] = table.upsert(df)
        except Exception as exc:  # noqa: BLE001 - the test inspects it
            out[name] = exc
    ta = threading.Thread(target=writer, args=("a", a, rows(range(5), "A")))
    tb = threading.Thread(target=writer, args=("b", b, rows(range(3, 8), "B")))
    ta.start()
    try:
        assert a_started.wait(60)
        tb.start()
        assert b_ready.wait(60)
        a_go.set()
        ta.join(60)
    finally:
        a_go.set()
        b_go.set()
        ta.join(60)
        tb.join(60)
    assert isinstance(out["a"], lk.WriteResult), out["a"]
    assert isinstance(out["b"], lk.WriteConflictError) and not isinstance(out["b"], lk.EarlyConflictError)
    assert out["b"].other_instant == out["a"].instant
    assert values(t) == {**{k: "base" for k in range(10)}, **{k: "A" for k in range(5)}}
    assert_no_orphans(t)


# -- detector-level cases (C27, C28, C29) ------------------------------------------------------------
FID_SHARED = "b21adfa2-7013-4452-a565-4cc39fea5b73-0"
FID_OTHER = "4a266542-c7d5-405f-bb07-bcb8aca88a91-0"
FID_MINE = "1228caeb-4188-4e19-a18d-848e6f9b0448-0"


class FakeWriter:
    """A pending write of another process: timeline files, markers and (optionally) a heartbeat."""

    def __init__(self, t, instant: str, names: list[str], *, heartbeat: bool = True, server_markers: bool = True,
                 action: str = "commit"):
        store = t.context.store
        req = Instant(action, "requested", instant)
        store.create(req)
        store.transition(req, "inflight")
        self.instant = instant
        if server_markers:   # what a timeline server leaves: MARKERS.type + MARKERS0
            t.storage.write(f".hoodie/.temp/{instant}/MARKERS.type", b"TIMELINE_SERVER_BASED")
            t.storage.write(f".hoodie/.temp/{instant}/MARKERS0", "".join(n + "\n" for n in names).encode())
        else:
            m = DirectWriteMarkers(t.storage, instant)
            for n in names:
                part, _, leaf = n.rpartition("/")
                m.create_if_absent(part, leaf.split(".marker.")[0], n.rsplit(".", 1)[-1])
        self.hb = Heartbeat(t.storage, instant, 60.0, 2).start() if heartbeat else None

    def stop(self):
        if self.hb is not None:
            self.hb.stop()


def detector(t, instant: str, **kw) -> EarlyConflictDetector:
    return EarlyConflictDetector(t.storage, instant, t.config.timeline_dir, t.config.layout_version,
                                 table_name=t.name, **kw)


T1, T2, T3 = "20240101000000001", "20240101000000002", "20240101000000003"
MINE = [f"2016/{FID_SHARED}_40-170-210_{T2}.parquet.marker.MERGE", f"2016/{FID_MINE}_55-55-425_{T2}.parquet.marker.MERGE"]


@pytest.fixture
def bare(tmp_path):
    return lk.Lake(str(tmp_path), options=options("direct")).create_table("t", key="id", partition_by="city")


@pytest.mark.parametrize("server_markers", [True, False], ids=["MARKERS-files", "direct-files"])
def test_c27_marker_file_based_detection(bare, server_markers):
    w = FakeWriter(bare, T1, [f"2016/{FID_SHARED}_4-17-21_{T1}.parquet.marker.CREATE",
                              f"2016/{FID_OTHER}_3-17-20_{T1}.parquet.marker.CREATE"], server_markers=server_markers)
    try:
        d = detector(bare, T2)
        c = d.find(MINE)
        assert c is not None and c.instant == T1 and c.action == "commit" and not c.completed
        assert c.file_groups == (("2016", FID_SHARED),)
        with pytest.raises(lk.EarlyConflictError) as e:
            d.check(MINE)
        assert e.value.other_instant == T1 and e.value.file_groups == (("2016", FID_SHARED),)
        assert ("2016", FID_MINE) in e.value.planned
        assert d.find([f"2016/{FID_MINE}_1-1-1_{T2}.parquet.marker.MERGE"]) is None   # disjoint: fine
    finally:
        w.stop()


def test_c28_later_instants_markers_do_not_conflict(bare):
    w = FakeWriter(bare, T3, [f"2016/{FID_SHARED}_4-17-21_{T3}.parquet.marker.CREATE"])
    try:
        assert detector(bare, T2).find(MINE) is None                     # 003 is later than 002
        later = [f"2016/{FID_SHARED}_9-9-9_{T3}.parquet.marker.MERGE"]
        w2 = FakeWriter(bare, T2, MINE)
        try:
            c = detector(bare, T3).find(later)                           # ...but 003 conflicts with 002
            assert c is not None and c.instant == T2
        finally:
            w2.stop()
    finally:
        w.stop()


def test_c29_expired_or_missing_heartbeat_is_ignored(bare):
    theirs = [f"2016/{FID_SHARED}_4-17-21_{T1}.parquet.marker.CREATE"]
    w = FakeWriter(bare, T1, theirs, heartbeat=False)                     # missing heartbeat
    assert detector(bare, T2).find(MINE) is None
    bare.storage.touch(f".hoodie/.heartbeat/{T1}")                         # fresh: now it counts
    assert detector(bare, T2).find(MINE) is not None
    old = time.time() - 3600                                               # expired: ignored again
    os.utime(bare.storage.url(f".hoodie/.heartbeat/{T1}"), (old, old))
    assert detector(bare, T2, heartbeat_interval_s=60.0, heartbeat_misses=2).find(MINE) is None
    w.stop()


def test_completed_and_table_service_instants_are_not_candidates(bare):
    theirs = [f"2016/{FID_SHARED}_4-17-21_{T1}.parquet.marker.CREATE"]
    w = FakeWriter(bare, T1, theirs, action="compaction")      # a pending compaction's markers
    try:
        assert detector(bare, T2).find(MINE) is None
    finally:
        w.stop()


def test_log_files_of_one_file_group_do_not_conflict(bare):
    """Merge-on-read appends are non-blocking at commit time, so they are early too."""
    their_log = f"2016/.{FID_SHARED}_{T1}.log.1_0-1-1.marker.CREATE"
    w = FakeWriter(bare, T1, [their_log])
    try:
        assert detector(bare, T2).find([f"2016/.{FID_SHARED}_{T2}.log.1_0-1-2.marker.CREATE"]) is None
        assert detector(bare, T2).find(MINE) is not None       # a new base file of that group does conflict
    finally:
        w.stop()


def test_commit_conflict_option(bare):
    """``early_conflict_check_commits``: a write that completed since this one started and
    touched the same file group stops it too."""
    bare.upsert(rows(range(3), "x"))
    start = bare.timeline
    fid = bare.inspect.file_groups()["file_id"][0].as_py()
    other = lk.open_table(bare.path, options=bare.options)
    done = other.upsert(rows([1], "other"))
    mine = [f"city=sf/{fid}_1-1-1_{T3}.parquet.marker.MERGE"]
    seen = frozenset((i.requested, i.action) for i in start.completed)
    assert detector(bare, "29990101000000000", completed_at_start=seen).find(mine) is None
    c = detector(bare, "29990101000000000", completed_at_start=seen, check_commits=True).find(mine)
    assert c is not None and c.instant == done.instant and c.completed and c.file_groups == (("city=sf", fid),)
    assert "completed since this write started" in str(detector(bare, "29990101000000000").error(c, mine))


def test_listing_is_cached_per_interval_not_per_marker(bare):
    w = FakeWriter(bare, T1, [f"2016/{FID_OTHER}_4-17-21_{T1}.parquet.marker.CREATE"])
    try:
        d = detector(bare, T2, interval_s=3600)
        m = DirectWriteMarkers(bare.storage, T2, detector=d)
        m.create_many([("2016", f"{FID_MINE}_{i}-1-1_{T2}.parquet", "CREATE") for i in range(50)])
        for i in range(20):
            m.create("2016", f"{FID_MINE}_{i}-2-2_{T2}.parquet", "CREATE")
        assert d.listings == 1 and d.checks == 21
        with pytest.raises(lk.EarlyConflictError):
            m.create("2016", f"{FID_OTHER}_7-7-7_{T2}.parquet", "CREATE")
        assert not bare.storage.exists(f".hoodie/.temp/{T2}/2016/{FID_OTHER}_7-7-7_{T2}.parquet.marker.CREATE")
    finally:
        w.stop()


def test_error_survives_pickling_and_a_spark_message():
    import pickle

    from lakesdk.concurrency.early import EarlyConflict, early_conflict_error
    e = early_conflict_error("t", T2, EarlyConflict(T1, "commit", (("a/b", "f1-0"), ("", "f2-0"))), [("a/b", "f1-0")])
    back = pickle.loads(pickle.dumps(e))
    assert (back.other_instant, back.other_action, back.file_groups, back.planned) == (
        T1, "commit", (("a/b", "f1-0"), ("", "f2-0")), (("a/b", "f1-0"),))
    parsed = lk.EarlyConflictError(str(e))          # what a Spark task's error text gives back
    assert (parsed.other_instant, parsed.other_action, parsed.file_groups) == (T1, "commit", e.file_groups)
    assert "\n" not in str(e)


def test_marker_file_group_parsing():
    assert marker_file_group(f"2016/{FID_SHARED}_4-17-21_001.parquet.marker.CREATE") == ("2016", FID_SHARED, False)
    assert marker_file_group(f"a/b/.{FID_SHARED}_{T1}.log.2_1-2-3.marker.APPEND") == ("a/b", FID_SHARED, True)
    assert marker_file_group(f"{FID_SHARED}_1-1-1_{T1}.parquet") == ("", FID_SHARED, False)
    assert marker_file_group("MARKERS.type") is None


# -- the marker server: synchronous first check, asynchronous re-checks --------------------------------
def test_server_refuses_with_409_and_raises_typed(bare):
    w = FakeWriter(bare, T1, [f"2016/{FID_SHARED}_4-17-21_{T1}.parquet.marker.CREATE"])
    with MarkerServer(bare.storage, batch_interval_ms=5, early_conflict_interval_ms=50) as srv:
        srv.watch(T2, detector(bare, T2))
        m = write_markers(bare.storage, T2, "TIMELINE_SERVER_BASED", server=srv)
        assert m.create("2016", f"{FID_MINE}_1-1-1_{T2}.parquet", "MERGE")       # disjoint: created
        with pytest.raises(lk.EarlyConflictError) as e:
            m.create_many([("2016", f"{FID_SHARED}_1-1-1_{T2}.parquet", "MERGE")])
        assert e.value.other_instant == T1 and e.value.file_groups == (("2016", FID_SHARED),)
        assert e.value.planned == (("2016", FID_SHARED),)
        with pytest.raises(lk.EarlyConflictError):                             # stopped for good
            m.create("2016", f"{FID_MINE}_2-2-2_{T2}.parquet", "MERGE")
        assert srv.early_conflict(T2).instant == T1 and srv.stats.early_conflicts == 1
        assert sorted(m.all_markers()) == [f"2016/{FID_MINE}_1-1-1_{T2}.parquet.marker.MERGE"]
        m.delete_all()
        assert srv.early_conflict(T2) is None                                 # forgotten with its dir
    w.stop()


def test_server_detects_asynchronously_a_writer_that_comes_later(bare):
    """Our markers exist first; an earlier writer then creates an overlapping one: the periodic
    re-check (Hudi's MarkerBasedEarlyConflictDetectionRunnable) finds it, and the next create
    request of the instant is refused."""
    srv = MarkerServer(bare.storage, batch_interval_ms=5, early_conflict_interval_ms=30)
    srv.watch(T2, detector(bare, T2, interval_s=0.03))        # before start: checks start with the server
    with srv:
        m = write_markers(bare.storage, T2, "TIMELINE_SERVER_BASED", server=srv)
        m.create("2016", f"{FID_SHARED}_1-1-1_{T2}.parquet", "MERGE")
        w = FakeWriter(bare, T1, [f"2016/{FID_SHARED}_4-17-21_{T1}.parquet.marker.CREATE"])
        try:
            deadline = time.time() + 30
            while srv.early_conflict(T2) is None and time.time() < deadline:
                time.sleep(0.02)
            assert srv.early_conflict(T2) is not None and srv.early_conflict(T2).instant == T1
            with pytest.raises(lk.EarlyConflictError):
                m.create("2016", f"{FID_MINE}_3-3-3_{T2}.parquet", "CREATE")
        finally:
            w.stop()


def test_unwatched_instants_are_not_checked(bare):
    w = FakeWriter(bare, T1, [f"2016/{FID_SHARED}_4-17-21_{T1}.parquet.marker.CREATE"])
    with MarkerServer(bare.storage, batch_interval_ms=5) as srv:
        m = write_markers(bare.storage, T2, "TIMELINE_SERVER_BASED", server=srv)
        assert m.create_many([("2016", f"{FID_SHARED}_1-1-1_{T2}.parquet", "MERGE")]) == [True]
        assert srv.stats.early_checks == 0
    w.stop()


# -- M31: compaction and clustering are never checked -------------------------------------------------
def test_m31_compaction_is_not_gated(tmp_path):
    t = lk.Lake(str(tmp_path), options=options("direct")).create_table("m", key="id", table_type="mor")
    t.upsert(pd.DataFrame({"id": [1, 2], "v": ["a", "b"]}))
    t.upsert(pd.DataFrame({"id": [1], "v": ["c"]}))
    fid = t.inspect.file_groups()["file_id"][0].as_py()
    early = "20000101000000000"            # an earlier, live writer rewriting the file group
    w = FakeWriter(t, early, [f"{fid}_0-1-1_{early}.parquet.marker.MERGE"], action="deltacommit")
    try:
        with pytest.raises(lk.EarlyConflictError):                 # a write is checked...
            t.upsert(pd.DataFrame({"id": [2], "v": ["d"]}))
        r = t.maintenance.compact()                                # ...compaction is not
        assert r is not None and r.files == 1
    finally:
        w.stop()
    assert values(t) == {1: "c", 2: "b"}


# -- C30 / C31: validation ---------------------------------------------------------------------------
def test_c30_requires_optimistic_concurrency(tmp_path):
    lk.Lake(str(tmp_path)).create_table("t", key="id")
    path = str(tmp_path / "t")
    with pytest.raises(lk.OptionsError, match="concurrency='optimistic'") as e:
        lk.open_table(path, options=lk.TableOptions(early_conflict_detection=True))
    assert isinstance(e.value, ValueError)
    with pytest.raises(lk.OptionsError):
        lk.Lake(str(tmp_path), options=lk.TableOptions(early_conflict_detection=True), concurrency="single_writer")
    with pytest.raises(lk.OptionsError, match="interval"):
        lk.open_table(path, options=lk.TableOptions(early_conflict_check_interval_ms=0))
    t = lk.open_table(path, options=lk.TableOptions(early_conflict_detection=True), concurrency="optimistic")
    assert t.options.early_conflict_detection and t.options.concurrency == "optimistic"


def test_c31_optimistic_concurrency_forces_lazy_failed_writes(tmp_path):
    """failed_writes='eager' would roll back every pending write; under optimistic concurrency
    the policy is lazy, so a live concurrent writer is left alone."""
    t = lk.Lake(str(tmp_path)).create_table("t", key="id")
    t.upsert(pd.DataFrame({"id": [1], "v": ["a"]}))
    live = "20000101000000000"
    w = FakeWriter(t, live, [])
    try:
        occ = lk.open_table(t.path, options=lk.TableOptions(failed_writes="eager", engine="local"),
                            concurrency="optimistic")
        occ.upsert(pd.DataFrame({"id": [2], "v": ["b"]}))
        assert [i.requested for i in t.timeline.pending] == [live]
        single = lk.open_table(t.path, options=lk.TableOptions(failed_writes="eager", engine="local"))
        single.upsert(pd.DataFrame({"id": [3], "v": ["c"]}))
        assert not t.timeline.pending                              # eager: rolled back
    finally:
        w.stop()


# -- the Spark engine: the check runs inside the write tasks ------------------------------------------
@pytest.mark.spark
@pytest.mark.parametrize("markers", MARKERS)
def test_spark_tasks_stop_early(tmp_path, monkeypatch, spark, markers):
    opts = lk.TableOptions(engine="spark", markers=markers, early_conflict_detection=True,
                           concurrency="optimistic", lock="storage")
    t = lk.Lake(str(tmp_path), spark=spark, options=opts).create_table("t", key="id", partition_by="city")
    t.upsert(rows(range(10), "base"))
    w = FakeWriter(t, "20000101000000000", [f"city=sf/{fid}_0-1-1_20000101000000000.parquet.marker.MERGE"
                                            for fid in t.inspect.file_groups()["file_id"].to_pylist()])
    try:
        with pytest.raises(lk.EarlyConflictError) as e:
            t.upsert(rows(range(3), "late"))
    finally:
        w.stop()
    assert e.value.other_instant == "20000101000000000" and e.value.file_groups[0][0] == "city=sf"
    loser = t.inspect.transactions()[-1]
    assert loser.outcome == "early_conflict" and loser.conflicts_with["instant"] == "20000101000000000"
    assert loser_file_attempts(t, loser.instant) <= 1 and files_of(t, loser.instant) == []
    assert values(t) == {k: "base" for k in range(10)}


@pytest.mark.parametrize("markers", MARKERS)
def test_merge_on_read_log_appends_are_not_stopped(tmp_path, monkeypatch, markers):
    """C25 on merge-on-read: both writers append log files to the same file group; that never
    conflicts in lakesdk (not at commit time, so not early either), and both land."""
    t = lk.Lake(str(tmp_path), options=options(markers)).create_table("m", key="id", table_type="mor", ordering="ts")
    t.upsert(pd.DataFrame({"id": [1, 2, 3], "ts": [1, 1, 1], "v": ["a", "b", "c"]}))
    a = lk.open_table(t.path, options=t.options)
    b = lk.open_table(t.path, options=t.options)
    ready, go = threading.Event(), threading.Event()
    original = WriteOperation._finalize

    def held_finalize(self, ctx, stats, partitions):
        if self.table is a:
            ready.set()
            assert go.wait(60)
        return original(self, ctx, stats, partitions)
    monkeypatch.setattr(WriteOperation, "_finalize", held_finalize)
    out: dict = {}
    th = threading.Thread(target=lambda: out.setdefault(
        "a", a.upsert(pd.DataFrame({"id": [1, 2], "ts": [5, 2], "v": ["A", "A"]}))))
    th.start()
    try:
        assert ready.wait(60)
        out["b"] = b.upsert(pd.DataFrame({"id": [1, 2], "ts": [3, 3], "v": ["B", "B"]}))   # not stopped
    finally:
        go.set()
        th.join(60)
    assert out["a"].instant < out["b"].instant
    assert values(t) == {1: "A", 2: "B", 3: "c"}          # merged by ordering value
    assert [r.outcome for r in t.inspect.transactions()] == ["committed"] * 3
    assert_no_orphans(t)


# -- stress: writer processes with early detection; the journal tells every write's story ------------
STRESS = textwrap.dedent("""
    import json, random, re, sys
    import pandas as pd
    import lakesdk as lk
    path, wid, markers, n = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
    opts = lk.TableOptions(engine="local", markers=markers, early_conflict_detection=True,
                           concurrency="optimistic", lock="storage", lock_options=(("timeout_s", 120),))
    t = lk.open_table(path, options=opts)
    rng = random.Random(wid)
    out = []
    for i in range(n):
        keys = sorted(set(rng.sample(range(20), 3) + [100 + wid * 100 + i]))
        val = f"w{wid}-{i}"
        df = pd.DataFrame({"id": keys, "city": [["a", "b"][k % 2] for k in keys], "v": [val] * len(keys)})
        try:
            r = t.upsert(df)
            out.append({"ok": True, "instant": r.instant, "completed": r.completed, "keys": keys, "v": val})
        except lk.WriteConflictError as e:
            me = re.search(r"write (\\d{17})", str(e)).group(1)
            out.append({"ok": False, "instant": me, "early": isinstance(e, lk.EarlyConflictError),
                        "other": e.other_instant, "keys": keys, "v": val})
    print("RESULT" + json.dumps(out))
""")


@pytest.mark.slow
@pytest.mark.parametrize("markers", MARKERS)
def test_stress_writer_processes_with_early_detection(tmp_path, markers):
    t = lk.Lake(str(tmp_path), options=options(markers)).create_table("s", key="id", partition_by="city")
    t.upsert(pd.DataFrame({"id": [0], "city": ["a"], "v": ["init"]}))
    procs = [run_script(STRESS, t.path, str(w), markers, "8") for w in range(3)]
    results = []
    for p in procs:
        results += helpers.result_of(p)
    landed = sorted((r for r in results if r["ok"]), key=lambda r: r["completed"])
    expect = {0: "init"}
    for r in landed:
        expect.update({k: r["v"] for k in r["keys"]})
    assert values(t) == expect and landed
    assert_no_orphans(t)
    journal = {r.instant: r for r in t.inspect.transactions()}
    for r in results:                                   # every write is journaled with its real outcome
        rec = journal[r["instant"]]
        if r["ok"]:
            assert rec.outcome == "committed"
        else:
            assert rec.outcome == ("early_conflict" if r["early"] else "conflict")
            assert rec.conflicts_with["instant"] == r["other"]
            if r["early"]:
                assert r["other"] < r["instant"]          # only earlier writers stop a write
    assert len(journal) == len(results) + 1
    assert any(not r["ok"] for r in results), "3 writers on 20 shared keys must collide: else this proves nothing"


@pytest.mark.parametrize("markers", MARKERS)
@pytest.mark.parametrize("check_commits", [False, True])
def test_commit_completed_since_start(tmp_path, monkeypatch, markers, check_commits):
    """B plans; A then commits the same file group; B goes on. With
    ``early_conflict_check_commits`` B stops before writing; without it, B writes and loses
    at commit time (its markers' writer A is no longer running)."""
    t = new_table(tmp_path, markers, early_conflict_check_commits=check_commits)
    a = lk.open_table(t.path, options=t.options)
    b = lk.open_table(t.path, options=t.options)
    run = WriteOperation._run

    def b_run(self, ctx, *args):
        if self.table is b:
            a.upsert(rows(range(2), "A"))     # commits while B is between planning and writing
        return run(self, ctx, *args)
    monkeypatch.setattr(WriteOperation, "_run", b_run)
    attempts: list[str] = []
    write_parquet = tasks._write_parquet

    def counting(ctx, path, table, *more, **kw):
        attempts.append(ctx.instant)
        return write_parquet(ctx, path, table, *more, **kw)
    monkeypatch.setattr(tasks, "_write_parquet", counting)
    with pytest.raises(lk.WriteConflictError) as e:
        b.upsert(rows(range(1, 4), "B"))
    rec = t.inspect.transactions()[-2]          # B started before A
    a_rec = t.inspect.transactions()[-1]
    assert rec.conflicts_with["instant"] == a_rec.instant and a_rec.outcome == "committed"
    if check_commits:
        assert isinstance(e.value, lk.EarlyConflictError) and "completed since this write started" in str(e.value)
        assert rec.outcome == "early_conflict" and rec.instant not in attempts
    else:
        assert not isinstance(e.value, lk.EarlyConflictError) and rec.outcome == "conflict"
        assert rec.instant in attempts           # it wrote its data first
    assert values(t) == {**{k: "base" for k in range(10)}, 0: "A", 1: "A"}
    assert_no_orphans(t)
