"""Write benchmark: lakesdk bulk insert / upsert / snapshot read against its peers.

    python bench/write.py [--quick] [--rows N] [--repeat R] [--partitioned] [--iceberg-timeout S]
                          [--skip-iceberg] [--profile] [--tmp DIR]

One process, after a warm-up of every engine, times on the same generated data:

1. raw pyarrow ``pq.write_table`` of the N rows (the floor for a bulk insert);
2. lakesdk: ``bulk_insert`` of the N rows into a new table, ``upsert`` of an update
   batch (10% of the ids, higher ``ts``, changed values, no new keys), then a snapshot read
   ``t.read().to_arrow()``;
3. deltalake: ``write_deltalake``, a ``merge`` (update matched / insert not matched), and
   ``DeltaTable(path).to_pyarrow_table()``;
4. pyiceberg (SQL catalog on SQLite): ``append`` then ``upsert(join_cols=["id"])``, run in a
   subprocess under a time limit (``--iceberg-timeout``); a timed-out upsert is reported as
   a bound (``upsert_vs_pyiceberg=<x``, ``pyiceberg_speedup=>x``);
5. hudi-rs (``hudi`` package) snapshot read of the lakesdk table, as a read peer;
6. peak RSS growth during the upsert, lakesdk vs deltalake, summed over the whole process
   tree (this Python process, the Spark JVM and the Python workers).

Every write runs ``--repeat`` times (default 2) on fresh tables, lakesdk and its peers in
turn, and the best time counts (the first round of a fresh process touches new memory and
is noisy on small VMs); each round's times are printed too.  Reads are timed best of 3.
Peak memory is the largest growth over the rounds.  Results are checked: after the upsert
lakesdk and deltalake (and the hudi-rs read of the lakesdk table) must hold exactly N rows,
every id once, and the new ``ts`` on every updated row; else the script prints the errors
and exits 1 without a summary line.

``--profile`` adds, after the timed rounds, the Spark job/stage timings of the timed lakesdk
writes and a cProfile of the driver for one more bulk insert + upsert.

The last line printed is the summary::

    write: rows=N bulk_vs_pyarrow=X upsert_vs_deltalake=X upsert_vs_pyiceberg=X read_vs_deltalake=X
           read_vs_hudi_rs=X upsert_mem_vs_deltalake=X pyiceberg_speedup=X

(one line; ratios are lakesdk time / peer time, except ``pyiceberg_speedup`` = pyiceberg
upsert time / lakesdk upsert time).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

ID_BASE = 1_000_000_000           # ids are ID_BASE + a permutation of 0..N-1
TS_BASE = 1_700_000_000_000_000   # microseconds
N_PARTS = 10
UPDATE_FRACTION = 0.10
SEED = 42


# ---------------------------------------------------------------------------------- data
def make_data(n: int, seed: int = SEED) -> tuple[pa.Table, pa.Table]:
    """(base rows, update batch).  The update batch holds 10% of the ids (random), with a
    higher ``ts``, a changed ``fare`` and ``name``, the same ``part``; no new ids."""
    rng = np.random.default_rng(seed)
    ids = rng.permutation(n).astype(np.int64) + ID_BASE
    ts = TS_BASE + rng.integers(0, 1_000_000_000, n, dtype=np.int64)
    labels = pa.array([f"p{i:02d}" for i in range(N_PARTS)])
    part = pc.take(labels, pa.array(rng.integers(0, N_PARTS, n, dtype=np.int32)))
    fare = np.round(rng.gamma(2.0, 12.5, n), 2)
    id_arr = pa.array(ids)
    name = pc.binary_join_element_wise(pa.scalar("name_"), pc.cast(id_arr, pa.string()), "")
    base = pa.table({"id": id_arr, "ts": pa.array(ts), "part": part, "fare": pa.array(fare), "name": name})

    m = max(1, int(n * UPDATE_FRACTION))
    rows = np.sort(rng.choice(n, m, replace=False))
    rows_arr = pa.array(rows)
    u_ids = pc.take(id_arr, rows_arr)
    upd = pa.table({
        "id": u_ids,
        "ts": pa.array(ts[rows] + rng.integers(1, 1_000_000, m, dtype=np.int64)),
        "part": pc.take(part, rows_arr),
        "fare": pa.array(np.round(fare[rows] * 1.1 + 1.0, 2)),
        "name": pc.binary_join_element_wise(pa.scalar("upd_"), pc.cast(u_ids, pa.string()), ""),
    })
    return base, upd


def expected_ts(base: pa.Table, upd: pa.Table) -> np.ndarray:
    """ts by (id - ID_BASE) after the upsert."""
    exp = np.empty(base.num_rows, dtype=np.int64)
    exp[base.column("id").to_numpy() - ID_BASE] = base.column("ts").to_numpy()
    exp[upd.column("id").to_numpy() - ID_BASE] = upd.column("ts").to_numpy()
    return exp


def check_table(label: str, tab: Any, n: int, exp_ts: np.ndarray, upd: pa.Table) -> list[str]:
    """Every id exactly once, and the expected ts on every row (updated rows: the new ts)."""
    if isinstance(tab, list):  # hudi-rs: a list of record batches
        tab = pa.Table.from_batches(tab) if tab else pa.table({"id": pa.array([], pa.int64()), "ts": pa.array([], pa.int64())})
    errs = []
    if tab.num_rows != n:
        errs.append(f"{label}: {tab.num_rows} rows after the upsert, expected {n}")
    ids = tab.column("id").to_numpy() - ID_BASE
    ts = tab.column("ts").to_numpy()
    if ids.size and (ids.min() < 0 or ids.max() >= n):
        errs.append(f"{label}: ids out of the generated range")
        return errs
    if np.unique(ids).size != ids.size:
        errs.append(f"{label}: {ids.size - np.unique(ids).size} duplicate ids")
    bad = np.flatnonzero(exp_ts[ids] != ts)
    if bad.size:
        errs.append(f"{label}: {bad.size} rows with a wrong ts (e.g. id {ids[bad[0]] + ID_BASE}: "
                    f"{ts[bad[0]]} != {exp_ts[ids[bad[0]]]})")
    # explicit spot check of a few updated ids (the full check above covers them too)
    spot = upd.slice(0, 5)
    pos = pc.index_in(spot.column("id"), value_set=tab.column("id")).to_pylist()
    for i, t, p in zip(spot.column("id").to_pylist(), spot.column("ts").to_pylist(), pos):
        got = None if p is None else ts[p]
        if got != t:
            errs.append(f"{label}: updated id {i} has ts {got}, expected {t}")
    return errs


# ---------------------------------------------------------------------------------- measuring
def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def best_of(k: int, fn: Callable[[], Any]) -> tuple[float, Any]:
    best, out = float("inf"), None
    for _ in range(k):
        s, out = timed(fn)
        best = min(best, s)
    return best, out


def tree_rss() -> int:
    """RSS of this process and all its descendants (Spark JVM, Python daemon and workers)."""
    import psutil
    me = psutil.Process()
    total = me.memory_info().rss
    for c in me.children(recursive=True):
        try:
            total += c.memory_info().rss
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            pass
    return total


class PeakRSS:
    """Sample the process-tree RSS in a thread; ``growth`` = peak - baseline (bytes)."""

    def __init__(self, interval: float = 0.02) -> None:
        self.interval = interval
        self.baseline = 0
        self.peak = 0
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.peak = max(self.peak, tree_rss())
                self.samples += 1
            except Exception:  # noqa: BLE001 - a vanished process mid-scan; sample again
                pass
            self._stop.wait(self.interval)

    def __enter__(self) -> "PeakRSS":
        gc.collect()
        self.baseline = tree_rss()
        self.peak = self.baseline
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, tree_rss())

    @property
    def growth(self) -> int:
        return max(0, self.peak - self.baseline)


class OtherLoad:
    """CPU used by processes outside this process tree while the benchmark runs (another
    test suite on the same cores skews every figure): sampled every ``interval`` s."""

    def __init__(self, interval: float = 0.5) -> None:
        self.interval = interval
        self.other = 0.0   # CPU-seconds used by other processes
        self.wall = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    @staticmethod
    def _tree_cpu(last: dict[int, float]) -> float:
        """CPU-seconds the tree used since the last call (processes seen for the first time
        count from their start, which is fine for the short-lived Python workers)."""
        import psutil
        me = psutil.Process()
        used = 0.0
        for p in [me, *me.children(recursive=True)]:
            try:
                c = p.cpu_times()
                now = c.user + c.system
            except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
                continue
            used += now - last.get(p.pid, 0.0)
            last[p.pid] = now
        return used

    @staticmethod
    def _busy() -> float:
        import psutil
        c = psutil.cpu_times()
        return sum(c) - c.idle - getattr(c, "iowait", 0.0) - getattr(c, "steal", 0.0) - getattr(c, "guest", 0.0) \
            - getattr(c, "guest_nice", 0.0)

    def _run(self) -> None:
        last: dict[int, float] = {}
        self._tree_cpu(last)
        busy0 = self._busy()
        t0 = time.perf_counter()
        while not self._stop.wait(self.interval):
            try:
                tree = self._tree_cpu(last)
            except Exception:  # noqa: BLE001 - best effort
                continue
            busy = self._busy()
            self.other += max(0.0, (busy - busy0) - tree)
            busy0 = busy
        self.wall = time.perf_counter() - t0

    def __enter__(self) -> "OtherLoad":
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join()

    @property
    def cores(self) -> float:
        """Average number of cores other processes kept busy."""
        return self.other / self.wall if self.wall > 0 else 0.0


def du(path: str) -> int:
    total = 0
    for root, _, files in os.walk(path):
        for f in files:
            total += os.path.getsize(os.path.join(root, f))
    return total


MiB = 1024 * 1024


@dataclass
class Results:
    """Times are kept per repetition; ``t`` holds the best (smallest) of each."""

    rows: int
    samples: dict[str, list[float]] = field(default_factory=dict)
    info: dict[str, Any] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)

    def time(self, key: str, seconds: float) -> None:
        self.samples.setdefault(key, []).append(seconds)

    def mem(self, key: str, growth: int, peak: int) -> None:
        """Keep the largest growth seen over the repetitions (the first, in practice)."""
        if growth >= self.info.get(f"{key}_mem", -1):
            self.info[f"{key}_mem"] = growth
            self.info[f"{key}_peak"] = peak

    @property
    def t(self) -> dict[str, float]:
        return {k: min(v) for k, v in self.samples.items() if v}


# ---------------------------------------------------------------------------------- engines
def spark_session() -> Any:
    from lakesdk.engine.session import get_spark
    return get_spark()


def warm_up(spark: Any, root: str, partitioned: bool, rows: int) -> None:
    """A small write + upsert + read on every engine, twice for lakesdk (JVM start, Python
    workers, JIT, imports)."""
    import hudi
    from deltalake import DeltaTable, write_deltalake

    import lakesdk as lk
    base, upd = make_data(rows, seed=7)
    part = "part" if partitioned else None
    lake = lk.Lake(os.path.join(root, "lake"), spark=spark)
    for i in range(2):
        t = lake.create_table(f"warm{i}", key="id", partition_by=part, ordering="ts", table_type="cow")
        t.bulk_insert(base)
        t.upsert(upd)
        t.read().to_arrow()
    hudi.HudiTableBuilder.from_base_uri(t.path).build().read()
    dp = os.path.join(root, "delta")
    write_deltalake(dp, base, partition_by=["part"] if partitioned else None)
    (DeltaTable(dp).merge(source=upd, predicate="t.id = s.id", source_alias="s", target_alias="t")
     .when_matched_update_all().when_not_matched_insert_all().execute())
    DeltaTable(dp).to_pyarrow_table()
    os.makedirs(os.path.join(root, "pa"), exist_ok=True)
    pq.write_table(base, os.path.join(root, "pa", "part-0.parquet"))


def run_pyarrow(res: Results, base: pa.Table, root: str, rep: int) -> None:
    out = os.path.join(root, f"pyarrow{rep}")
    os.makedirs(out)
    res.time("pyarrow_write", timed(lambda: pq.write_table(base, os.path.join(out, "part-0.parquet")))[0])
    res.info["pyarrow_bytes"] = du(out)


def run_lakesdk(res: Results, spark: Any, base: pa.Table, upd: pa.Table, root: str, partitioned: bool,
                exp_ts: np.ndarray, rep: int) -> str:
    import lakesdk as lk
    lake = lk.Lake(os.path.join(root, "lake"), spark=spark)
    t = lake.create_table(f"bench{rep}", key="id", partition_by="part" if partitioned else None, ordering="ts",
                          table_type="cow")
    spark.sparkContext.setJobGroup("bench-bulk_insert", "lakesdk bulk_insert")
    s, r = timed(lambda: t.bulk_insert(base))
    res.time("lakesdk_bulk", s)
    res.info["lakesdk_bulk_files"] = r.files
    res.info["lakesdk_bytes"] = r.bytes
    if r.inserted != base.num_rows:
        res.errors.append(f"lakesdk bulk_insert: inserted={r.inserted}, expected {base.num_rows}")
    spark.sparkContext.setJobGroup("bench-upsert", "lakesdk upsert")
    with PeakRSS() as mem:
        s, r = timed(lambda: t.upsert(upd))
    res.time("lakesdk_upsert", s)
    res.mem("lakesdk_upsert", mem.growth, mem.peak)
    res.info["lakesdk_upsert_files"] = r.files
    if r.updated != upd.num_rows or r.inserted != 0:
        res.errors.append(f"lakesdk upsert: updated={r.updated} inserted={r.inserted}, "
                          f"expected updated={upd.num_rows} inserted=0")
    spark.sparkContext.setJobGroup("bench-read", "lakesdk read")
    s, tab = best_of(3, lambda: t.read().to_arrow())
    res.time("lakesdk_read", s)
    spark.sparkContext.setJobGroup("bench-other", "other")
    res.errors += check_table("lakesdk", tab, base.num_rows, exp_ts, upd)
    return t.path


def run_deltalake(res: Results, base: pa.Table, upd: pa.Table, root: str, partitioned: bool,
                  exp_ts: np.ndarray, rep: int) -> None:
    from deltalake import DeltaTable, write_deltalake
    path = os.path.join(root, f"delta_bench{rep}")
    res.time("delta_write", timed(lambda: write_deltalake(path, base, partition_by=["part"] if partitioned else None))[0])
    res.info["delta_bytes"] = du(path)

    def merge() -> Any:
        return (DeltaTable(path).merge(source=upd, predicate="t.id = s.id", source_alias="s", target_alias="t")
                .when_matched_update_all().when_not_matched_insert_all().execute())
    with PeakRSS() as mem:
        s, m = timed(merge)
    res.time("delta_merge", s)
    res.mem("delta_upsert", mem.growth, mem.peak)
    if m.get("num_target_rows_updated") != upd.num_rows:
        res.errors.append(f"deltalake merge: {m.get('num_target_rows_updated')} rows updated, expected {upd.num_rows}")
    s, tab = best_of(3, lambda: DeltaTable(path).to_pyarrow_table())
    res.time("delta_read", s)
    res.errors += check_table("deltalake", tab, base.num_rows, exp_ts, upd)


def run_hudi_rs(res: Results, path: str, n: int, exp_ts: np.ndarray, upd: pa.Table) -> None:
    import hudi
    s, batches = best_of(3, lambda: hudi.HudiTableBuilder.from_base_uri(path).build().read())
    res.time("hudi_rs_read", s)
    res.errors += check_table("hudi-rs read of the lakesdk table", batches, n, exp_ts, upd)


# ---------------------------------------------------------------------------------- pyiceberg
def iceberg_worker(root: str, repeat: int) -> None:
    """Child process: warm up, then ``repeat`` x (append + upsert + read) on fresh tables;
    one JSON line per step."""
    from pyiceberg.catalog.sql import SqlCatalog

    def emit(**kw: Any) -> None:
        print(json.dumps(kw), flush=True)

    base = pq.read_table(os.path.join(root, "ice_base.parquet"))
    upd = pq.read_table(os.path.join(root, "ice_upd.parquet"))
    wh = os.path.join(root, "wh")
    os.makedirs(wh, exist_ok=True)
    cat = SqlCatalog("bench", uri=f"sqlite:///{root}/cat.db", warehouse=f"file://{wh}")
    cat.create_namespace("bench")
    wb, wu = make_data(2_000, seed=7)
    w = cat.create_table("bench.warm", schema=wb.schema)
    w.append(wb)
    w.upsert(wu, join_cols=["id"])
    w.scan().to_arrow()

    for rep in range(repeat):
        name = f"bench.t{rep}"
        t = cat.create_table(name, schema=base.schema)
        t0 = time.perf_counter()
        t.append(base)
        emit(step="append", seconds=time.perf_counter() - t0)
        emit(step="upsert_start", wall=time.time())
        t0 = time.perf_counter()
        r = t.upsert(upd, join_cols=["id"])
        emit(step="upsert", seconds=time.perf_counter() - t0, updated=r.rows_updated, inserted=r.rows_inserted)
        reads = []
        for _ in range(3):
            t0 = time.perf_counter()
            tab = cat.load_table(name).scan().to_arrow()
            reads.append(time.perf_counter() - t0)
        emit(step="read", seconds=min(reads), rows=tab.num_rows)


def run_pyiceberg(res: Results, base: pa.Table, upd: pa.Table, root: str, timeout: float, repeat: int) -> None:
    ice = os.path.join(root, "iceberg")
    os.makedirs(ice)
    pq.write_table(base, os.path.join(ice, "ice_base.parquet"))
    pq.write_table(upd, os.path.join(ice, "ice_upd.parquet"))
    log = os.path.join(ice, "worker.out")
    with open(log, "w") as out:
        proc = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--iceberg-worker", ice,
                                 "--repeat", str(repeat)],
                                stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            proc.wait(timeout=timeout)
            timed_out = False
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            timed_out = True
    killed_at = time.time()
    steps: dict[str, list[dict[str, Any]]] = {}
    other = []
    with open(log) as f:
        for line in f:
            try:
                d = json.loads(line)
                steps.setdefault(d["step"], []).append(d)
            except (ValueError, KeyError, TypeError):
                other.append(line.rstrip())
    for d in steps.get("append", []):
        res.time("ice_append", d["seconds"])
    for d in steps.get("upsert", []):
        res.time("ice_upsert", d["seconds"])
        if d["updated"] != upd.num_rows or d["inserted"] != 0:
            res.errors.append(f"pyiceberg upsert: updated={d['updated']} inserted={d['inserted']}, "
                              f"expected updated={upd.num_rows} inserted=0")
    if timed_out and not steps.get("upsert") and steps.get("upsert_start"):
        # not one upsert finished: it took at least this long
        res.time("ice_upsert", killed_at - steps["upsert_start"][-1]["wall"])
        res.info["ice_upsert_timed_out"] = True
    for d in steps.get("read", []):
        res.time("ice_read", d["seconds"])
        if d["rows"] != base.num_rows:
            res.errors.append(f"pyiceberg: {d['rows']} rows after the upsert, expected {base.num_rows}")
    if not timed_out and proc.returncode != 0:
        res.errors.append(f"pyiceberg worker failed (exit {proc.returncode}):\n" + "\n".join(other[-20:]))
    elif timed_out and "upsert_start" not in steps:
        res.errors.append(f"pyiceberg worker timed out after {timeout:.0f}s before its upsert started")


# ---------------------------------------------------------------------------------- profile
def spark_stage_report(spark: Any, group: str) -> list[str]:
    """Per-stage wall times of one job group, from Spark's status REST API."""
    import urllib.request
    url = spark.sparkContext.uiWebUrl
    if not url:
        return ["  (Spark UI disabled: no stage timings)"]
    app = spark.sparkContext.applicationId
    base = f"{url}/api/v1/applications/{app}"

    def get(p: str) -> Any:
        with urllib.request.urlopen(base + p, timeout=10) as r:
            return json.loads(r.read())
    from datetime import datetime

    def ts(s: str) -> float:
        return datetime.strptime(s.replace("GMT", "+0000"), "%Y-%m-%dT%H:%M:%S.%f%z").timestamp()
    lines = []
    for job in sorted(get("/jobs"), key=lambda j: j["jobId"]):
        if job.get("jobGroup") != group:
            continue
        dur = ts(job["completionTime"]) - ts(job["submissionTime"]) if job.get("completionTime") else float("nan")
        lines.append(f"  job {job['jobId']:>3} {dur:7.2f}s  {job['name'][:70]}")
        for sid in job["stageIds"]:
            for st in get(f"/stages/{sid}"):
                if st.get("status") != "COMPLETE":
                    continue
                sd = ts(st["completionTime"]) - ts(st["firstTaskLaunchedTime"])
                lines.append(f"      stage {sid:>3} {sd:7.2f}s tasks={st['numTasks']:<3} "
                             f"run={st['executorRunTime'] / 1000:6.2f}s cpu={st['executorCpuTime'] / 1e9:6.2f}s "
                             f"shuffleR={st['shuffleReadBytes'] / MiB:6.1f}MiB shuffleW={st['shuffleWriteBytes'] / MiB:6.1f}MiB "
                             f"{st['name'][:40]}")
    return lines


def profile_lakesdk(spark: Any, base: pa.Table, upd: pa.Table, root: str, partitioned: bool) -> None:
    """Re-run bulk insert + upsert on a fresh table under cProfile (driver side) and print
    the driver's top functions and the Spark stage timings.  Not part of the figures."""
    import cProfile
    import io
    import pstats

    import lakesdk as lk
    for group in ("bench-bulk_insert", "bench-upsert"):
        print(f"\n--- Spark jobs of the timed {group[6:]} ---")
        try:
            print("\n".join(spark_stage_report(spark, group)))
        except Exception as e:  # noqa: BLE001 - the profile is best effort
            print(f"  (no stage timings: {e})")
    lake = lk.Lake(os.path.join(root, "lake_profile"), spark=spark)
    t = lake.create_table("bench", key="id", partition_by="part" if partitioned else None, ordering="ts")
    for op, data in (("bulk_insert", base), ("upsert", upd)):
        group = f"profile-{op}"
        spark.sparkContext.setJobGroup(group, f"profile {op}")
        prof = cProfile.Profile()
        t0 = time.perf_counter()
        prof.enable()
        getattr(t, op)(data)
        prof.disable()
        wall = time.perf_counter() - t0
        spark.sparkContext.setJobGroup("bench-other", "other")
        s = io.StringIO()
        pstats.Stats(prof, stream=s).sort_stats("cumulative").print_stats(25)
        print(f"\n--- profile: lakesdk {op} ({wall:.2f}s wall), driver cProfile (cumulative) ---")
        print("\n".join(ln for ln in s.getvalue().splitlines() if ln.strip())[:6000])
        print(f"--- Spark jobs of {op} ---")
        try:
            print("\n".join(spark_stage_report(spark, group)))
        except Exception as e:  # noqa: BLE001 - the profile is best effort
            print(f"  (no stage timings: {e})")


# ---------------------------------------------------------------------------------- report
def ratio(a: float | None, b: float | None) -> str:
    if a is None or b is None or b <= 0:
        return "n/a"
    return f"{a / b:.2f}"


def report(res: Results, args: argparse.Namespace) -> str:
    t, info = res.t, res.info
    ice_to = bool(info.get("ice_upsert_timed_out"))
    up_vs_ice = ratio(t.get("lakesdk_upsert"), t.get("ice_upsert"))
    ice_speed = ratio(t.get("ice_upsert"), t.get("lakesdk_upsert"))
    if ice_to:  # pyiceberg took longer than measured: the ratio is at most, the speedup at least, this
        up_vs_ice, ice_speed = "<" + up_vs_ice, ">" + ice_speed
    mem_l = info.get("lakesdk_upsert_mem")
    mem_d = info.get("delta_upsert_mem")

    def s(k: str) -> str:
        v = t.get(k)
        return "-" if v is None else f"{v:8.2f}"
    rows = [
        ("bulk insert / write (s)", s("lakesdk_bulk"), "pyarrow write_table", s("pyarrow_write"), ratio(t.get("lakesdk_bulk"), t.get("pyarrow_write"))),
        ("", "", "deltalake write_deltalake", s("delta_write"), ratio(t.get("lakesdk_bulk"), t.get("delta_write"))),
        ("", "", "pyiceberg append", s("ice_append"), ratio(t.get("lakesdk_bulk"), t.get("ice_append"))),
        ("upsert 10% (s)", s("lakesdk_upsert"), "deltalake merge", s("delta_merge"), ratio(t.get("lakesdk_upsert"), t.get("delta_merge"))),
        ("", "", "pyiceberg upsert" + (" (TIMED OUT)" if ice_to else ""),
         ((">" if ice_to else "") + s("ice_upsert").strip()).rjust(8), up_vs_ice),
        ("snapshot read (s)", s("lakesdk_read"), "deltalake to_pyarrow_table", s("delta_read"), ratio(t.get("lakesdk_read"), t.get("delta_read"))),
        ("", "", "hudi-rs read (lakesdk table)", s("hudi_rs_read"), ratio(t.get("lakesdk_read"), t.get("hudi_rs_read"))),
        ("", "", "pyiceberg scan().to_arrow()", s("ice_read"), ratio(t.get("lakesdk_read"), t.get("ice_read"))),
        ("upsert peak RSS growth (MiB)", f"{mem_l / MiB:8.1f}" if mem_l is not None else "-", "deltalake merge",
         f"{mem_d / MiB:8.1f}" if mem_d is not None else "-", ratio(mem_l, mem_d)),
    ]
    head = ("", "lakesdk", "peer", "peer", "lakesdk/peer")
    w = [max(len(r[i]) for r in rows + [head]) for i in range(5)]
    print(f"\nwrite benchmark: {res.rows:,} rows, update batch {int(res.rows * UPDATE_FRACTION):,} rows, "
          f"best of {args.repeat} round(s), reads best of 3 "
          f"({'partitioned by part' if args.partitioned else 'not partitioned'}), {os.cpu_count()} cores")
    print("  ".join(h.ljust(w[i]) for i, h in enumerate(head)))
    print("  ".join("-" * x for x in w))
    for r in rows:
        print("  ".join(c.ljust(w[i]) if i in (0, 2) else c.rjust(w[i]) for i, c in enumerate(r)))
    print(f"\nfiles/bytes: lakesdk {info.get('lakesdk_bulk_files')} files {info.get('lakesdk_bytes', 0) / MiB:.1f} MiB "
          f"(upsert rewrote {info.get('lakesdk_upsert_files')}), pyarrow {info.get('pyarrow_bytes', 0) / MiB:.1f} MiB, "
          f"deltalake {info.get('delta_bytes', 0) / MiB:.1f} MiB")
    if mem_l is not None and mem_d is not None:
        print(f"process-tree RSS at upsert peak: lakesdk {info['lakesdk_upsert_peak'] / MiB:.0f} MiB, "
              f"deltalake {info['delta_upsert_peak'] / MiB:.0f} MiB (includes the idle Spark JVM)")
    if "other_cores" in info:
        busy = info["other_cores"]
        print(f"other processes kept {busy:.2f} of {os.cpu_count()} cores busy during the timed rounds"
              + (" -- the machine was not quiet: figures are skewed, run again" if busy > 0.2 else ""))
    print("per round (s): " + "; ".join(f"{k} " + "/".join(f"{x:.2f}" for x in v) for k, v in res.samples.items()))
    if ice_to:
        print(f"pyiceberg upsert did not finish within --iceberg-timeout={args.iceberg_timeout:.0f}s: "
              f"its time is a lower bound, upsert_vs_pyiceberg an upper bound, pyiceberg_speedup a lower bound")
    return (f"write: rows={res.rows} bulk_vs_pyarrow={ratio(t.get('lakesdk_bulk'), t.get('pyarrow_write'))} "
            f"upsert_vs_deltalake={ratio(t.get('lakesdk_upsert'), t.get('delta_merge'))} "
            f"upsert_vs_pyiceberg={up_vs_ice} "
            f"read_vs_deltalake={ratio(t.get('lakesdk_read'), t.get('delta_read'))} "
            f"read_vs_hudi_rs={ratio(t.get('lakesdk_read'), t.get('hudi_rs_read'))} "
            f"upsert_mem_vs_deltalake={ratio(mem_l, mem_d)} pyiceberg_speedup={ice_speed}")


# ---------------------------------------------------------------------------------- main
def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="100,000 rows (default 1,000,000)")
    ap.add_argument("--rows", type=int, default=None, help="number of rows (overrides --quick)")
    ap.add_argument("--partitioned", action="store_true", help="partition lakesdk and deltalake tables by 'part'")
    ap.add_argument("--iceberg-timeout", type=float, default=600.0,
                    help="seconds the pyiceberg subprocess may run (default 600)")
    ap.add_argument("--repeat", type=int, default=2,
                    help="run every write R times on fresh tables and report the best time (default 2; "
                         "memory: the largest growth)")
    ap.add_argument("--skip-iceberg", action="store_true", help="do not run pyiceberg")
    ap.add_argument("--profile", action="store_true",
                    help="after the timed run, re-run lakesdk bulk_insert + upsert under cProfile and print Spark stage times")
    ap.add_argument("--tmp", default=None, help="parent folder for the temporary data (default: system temp)")
    ap.add_argument("--iceberg-worker", metavar="DIR", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.iceberg_worker:
        iceberg_worker(args.iceberg_worker, args.repeat)
        return 0
    n = args.rows or (100_000 if args.quick else 1_000_000)
    if args.repeat < 1 or n < 10:
        ap.error("--repeat must be >= 1 and --rows >= 10")
    res = Results(rows=n)
    root = tempfile.mkdtemp(prefix="lakesdk-bench-write-", dir=args.tmp)
    spark = None
    try:
        def step(msg: str) -> None:
            print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)
        step(f"generating {n:,} rows + {int(n * UPDATE_FRACTION):,} updates")
        base, upd = make_data(n)
        exp_ts = expected_ts(base, upd)
        step("starting Spark and warming up every engine")
        spark = spark_session()
        warm_up(spark, os.path.join(root, "warm"), args.partitioned, max(2_000, n // 20))
        lake_path = ""
        load = OtherLoad()
        load.__enter__()
        for rep in range(args.repeat):
            step(f"round {rep + 1}/{args.repeat}: pyarrow write_table")
            run_pyarrow(res, base, root, rep)
            step(f"round {rep + 1}/{args.repeat}: lakesdk bulk_insert / upsert / read")
            lake_path = run_lakesdk(res, spark, base, upd, root, args.partitioned, exp_ts, rep)
            step(f"round {rep + 1}/{args.repeat}: deltalake write / merge / read")
            run_deltalake(res, base, upd, root, args.partitioned, exp_ts, rep)
        step("hudi-rs read of the lakesdk table")
        run_hudi_rs(res, lake_path, n, exp_ts, upd)
        load.__exit__()
        res.info["other_cores"] = load.cores
        if args.profile:
            step("profiling lakesdk (not part of the figures)")
            profile_lakesdk(spark, base, upd, root, args.partitioned)
        if not args.skip_iceberg:
            step(f"pyiceberg append / upsert / read (subprocess, limit {args.iceberg_timeout:.0f}s)")
            run_pyiceberg(res, base, upd, root, args.iceberg_timeout, args.repeat)
    finally:
        if spark is not None:
            spark.stop()
        shutil.rmtree(root, ignore_errors=True)
    summary = report(res, args)
    if res.errors:
        for e in res.errors:
            print(f"ERROR: {e}", file=sys.stderr)
        print(f"ERROR: {len(res.errors)} correctness check(s) failed", flush=True)
        return 1
    print(summary, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
