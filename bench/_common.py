"""Shared parts of the write and merge-on-read benchmarks (``bench/write.py``, ``bench/mor.py``):
the generated data and its checks, timing, process-tree memory and load measurement, the
deltalake peer, a serial cProfile helper, the common command-line options and the summary line.
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

ID_BASE = 1_000_000_000           # ids are ID_BASE + a permutation of 0..N-1
TS_BASE = 1_700_000_000_000_000   # microseconds
N_PARTS = 10
UPDATE_FRACTION = 0.10
SEED = 42
MiB = 1024 * 1024


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


def as_table(tab: Any) -> pa.Table:
    """A read's result as one table (hudi-rs returns a list of record batches)."""
    if isinstance(tab, list):
        return pa.Table.from_batches(tab) if tab else pa.table({"id": pa.array([], pa.int64()),
                                                                "ts": pa.array([], pa.int64())})
    return tab


def check_table(label: str, tab: Any, n: int, exp_ts: np.ndarray, upd: pa.Table) -> list[str]:
    """Every id exactly once, and the expected ts on every row (updated rows: the new ts)."""
    tab = as_table(tab)
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


def tree_processes() -> list[Any]:
    """This process and all its descendants (Spark JVM, Python daemon and workers)."""
    import psutil
    me = psutil.Process()
    return [me, *me.children(recursive=True)]


def tree_rss(procs: list[Any] | None = None) -> int:
    """RSS of ``procs`` (default: this process and all its descendants)."""
    import psutil
    total = 0
    for c in tree_processes() if procs is None else procs:
        try:
            total += c.memory_info().rss
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            pass
    return total


def release_free_memory() -> None:
    """Give the memory this process holds free back to the system before a measurement: the
    garbage collector, then Arrow's pool (mimalloc or jemalloc keep freed pages for reuse) and
    glibc's heap.  Otherwise a step's RSS growth depends on what the steps before it left free
    (an upsert after a bulk insert of the same size reuses its pages and seems to take nothing)."""
    gc.collect()
    pa.default_memory_pool().release_unused()
    try:
        import ctypes
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):   # not glibc
        pass


class PeakRSS:
    """Sample the process-tree RSS in a thread; ``growth`` = peak - baseline (bytes).

    Listing the descendants scans every process of the machine (milliseconds, holding the
    GIL, which slows the measured Python threads), so the list is refreshed only every
    ``refresh`` seconds; in between, each sample reads the RSS of the known processes."""

    def __init__(self, interval: float = 0.02, refresh: float = 0.5) -> None:
        self.interval = interval
        self.refresh = refresh
        self.baseline = 0
        self.peak = 0
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        procs, listed = tree_processes(), time.monotonic()
        while not self._stop.is_set():
            try:
                if time.monotonic() - listed > self.refresh:
                    procs, listed = tree_processes(), time.monotonic()
                self.peak = max(self.peak, tree_rss(procs))
                self.samples += 1
            except Exception:  # noqa: BLE001 - a vanished process mid-scan; sample again
                pass
            self._stop.wait(self.interval)

    def __enter__(self) -> "PeakRSS":
        release_free_memory()
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


def ratio(a: float | None, b: float | None) -> str:
    if a is None or b is None or b <= 0:
        return "n/a"
    return f"{a / b:.2f}"


def step(msg: str) -> None:
    """A progress line with the wall-clock time."""
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


# ---------------------------------------------------------------------------------- engines
def spark_session() -> Any:
    from lakesdk.engine.session import get_spark
    return get_spark()


def warm_up_deltalake(root: str, base: pa.Table, upd: pa.Table, partitioned: bool = False) -> None:
    """One write + merge + read of deltalake (imports, the Rust runtime's threads)."""
    from deltalake import DeltaTable, write_deltalake
    dp = os.path.join(root, "delta")
    write_deltalake(dp, base, partition_by=["part"] if partitioned else None)
    (DeltaTable(dp).merge(source=upd, predicate="t.id = s.id", source_alias="s", target_alias="t")
     .when_matched_update_all().when_not_matched_insert_all().execute())
    DeltaTable(dp).to_pyarrow_table()


def run_deltalake(res: Results, base: pa.Table, upd: pa.Table, root: str, exp_ts: np.ndarray, rep: int, *,
                  partitioned: bool = False, reads: int = 3) -> None:
    """deltalake ``write_deltalake``, ``merge`` (update matched / insert not matched; peak RSS
    growth sampled) and ``to_pyarrow_table`` (best of ``reads``), checked like lakesdk."""
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
    s, tab = best_of(reads, lambda: DeltaTable(path).to_pyarrow_table())
    res.time("delta_read", s)
    res.errors += check_table("deltalake", tab, base.num_rows, exp_ts, upd)


# ---------------------------------------------------------------------------------- profile
class _SerialExecutor:
    """A stand-in for ThreadPoolExecutor that runs every call in the calling thread, so that
    cProfile (which sees one thread) sees the work of lakesdk's thread pools."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def __enter__(self) -> "_SerialExecutor":
        return self

    def __exit__(self, *exc: Any) -> None:
        pass

    def map(self, fn: Any, *iterables: Any) -> Any:
        return [fn(*a) for a in zip(*iterables)]

    def submit(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        from concurrent.futures import Future
        fut: Future[Any] = Future()
        try:
            fut.set_result(fn(*args, **kwargs))
        except BaseException as exc:  # noqa: BLE001 - handed to the caller through the future
            fut.set_exception(exc)
        return fut


def profile_serial(label: str, fn: Callable[[], Any], *, top: int = 20) -> None:
    """cProfile ``fn()`` with lakesdk's thread pools made serial (the wall time printed is that
    of one thread) and print the top functions by own and by cumulative time."""
    import concurrent.futures
    import cProfile
    import io
    import pstats
    from unittest import mock

    prof = cProfile.Profile()
    with mock.patch("lakesdk.engine.local.ThreadPoolExecutor", _SerialExecutor), \
            mock.patch.object(concurrent.futures, "ThreadPoolExecutor", _SerialExecutor):
        t0 = time.perf_counter()
        prof.enable()
        fn()
        prof.disable()
        wall = time.perf_counter() - t0
    for key in ("tottime", "cumulative"):
        s = io.StringIO()
        pstats.Stats(prof, stream=s).sort_stats(key).print_stats(top)
        print(f"\n--- profile: {label} ({wall:.2f}s wall, one thread), driver cProfile ({key}) ---")
        print("\n".join(ln for ln in s.getvalue().splitlines() if ln.strip())[:6000])


def spark_stage_report(spark: Any, group: str) -> list[str]:
    """Per-job and per-stage wall times, task times and shuffle bytes of one job group, from
    Spark's status REST API (the session's UI must be enabled), and a totals line: jobs,
    stages, tasks, the summed executor run and CPU time, the shuffle bytes written."""
    import json
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
    jobs = stages = tasks = 0
    run = cpu = shuffle = 0.0
    for job in sorted(get("/jobs"), key=lambda j: j["jobId"]):
        if job.get("jobGroup") != group:
            continue
        jobs += 1
        dur = ts(job["completionTime"]) - ts(job["submissionTime"]) if job.get("completionTime") else float("nan")
        lines.append(f"  job {job['jobId']:>3} {dur:7.2f}s  {job['name'][:70]}")
        for sid in job["stageIds"]:
            for st in get(f"/stages/{sid}"):
                if st.get("status") != "COMPLETE":
                    continue
                stages += 1
                tasks += st["numTasks"]
                run += st["executorRunTime"] / 1000
                cpu += st["executorCpuTime"] / 1e9
                shuffle += st["shuffleWriteBytes"]
                sd = ts(st["completionTime"]) - ts(st["firstTaskLaunchedTime"])
                lines.append(f"      stage {sid:>3} {sd:7.2f}s tasks={st['numTasks']:<3} "
                             f"run={st['executorRunTime'] / 1000:6.2f}s cpu={st['executorCpuTime'] / 1e9:6.2f}s "
                             f"shuffleR={st['shuffleReadBytes'] / MiB:6.1f}MiB shuffleW={st['shuffleWriteBytes'] / MiB:6.1f}MiB "
                             f"{st['name'][:40]}")
    lines.append(f"  total: {jobs} jobs, {stages} stages, {tasks} tasks, task run {run:.2f}s, task cpu {cpu:.2f}s, "
                 f"shuffle written {shuffle / MiB:.1f} MiB")
    return lines


# ---------------------------------------------------------------------------------- command line, report
def base_parser(doc: str) -> argparse.ArgumentParser:
    """The options both benchmarks take: --quick, --rows, --repeat, --profile, --tmp."""
    ap = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="100,000 rows (default 1,000,000)")
    ap.add_argument("--rows", type=int, default=None, help="number of rows (overrides --quick)")
    ap.add_argument("--repeat", type=int, default=2,
                    help="run every write R times on fresh tables and report the best time (default 2; "
                         "memory: the largest growth)")
    ap.add_argument("--profile", action="store_true",
                    help="after the timed run, cProfile one more run of the lakesdk steps (thread pools serial)")
    ap.add_argument("--tmp", default=None, help="parent folder for the temporary data (default: system temp)")
    return ap


def row_count(ap: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    n = args.rows or (100_000 if args.quick else 1_000_000)
    if args.repeat < 1 or n < 10:
        ap.error("--repeat must be >= 1 and --rows >= 10")
    return n


def print_load_and_rounds(res: Results) -> None:
    """The other processes' load during the timed rounds, and every round's times."""
    if "other_cores" in res.info:
        busy = res.info["other_cores"]
        print(f"other processes kept {busy:.2f} of {os.cpu_count()} cores busy during the timed rounds"
              + (" -- the machine was not quiet: figures are skewed, run again" if busy > 0.2 else ""))
    print("per round (s): " + "; ".join(f"{k} " + "/".join(f"{x:.2f}" for x in v) for k, v in res.samples.items()))


def finish(res: Results, summary: str) -> int:
    """Print the errors (exit status 1) or the summary line (the last line, exit status 0)."""
    if res.errors:
        for e in res.errors:
            print(f"ERROR: {e}", file=sys.stderr)
        print(f"ERROR: {len(res.errors)} correctness check(s) failed", flush=True)
        return 1
    print(summary, flush=True)
    return 0
