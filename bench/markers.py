"""Marker benchmark: DIRECT vs TIMELINE_SERVER_BASED marker creation on slow storage.

    python bench/markers.py [--quick] [--files N] [--latency-ms MS] [--creators C]
                            [--files-per-task K] [--batch-interval-ms MS] [--server-threads T]
                            [--summary-mode task|file] [--skip-per-file]

Storage is a local folder wrapped in ``LatencyStorage``: every storage operation (read,
write, create_exclusive, list, find, exists, info, delete, ...) sleeps ``--latency-ms``
(default 20 ms, an object-store round trip) and is counted.  Markers are created for
``--files`` data files (default 10,000; ``--quick``: 1,000) spread over 10 partitions,
named like real base files (``<fileId>_<writeToken>_<instant>.parquet``).

The files are grouped into executor *tasks* of ``--files-per-task`` files (default 50);
``--creators`` threads (default 8, the task slots of one executor) run the tasks, each
task working on its own unpickled copy of the markers object, as a Spark task would:

1. ``direct``: DIRECT markers; a task creates its markers one by one (one exclusive
   create on storage each, which is all DIRECT markers can do);
2. ``server per-file``: TIMELINE_SERVER_BASED through the client, one synchronous HTTP
   request per marker (Hudi's client);
3. ``server per-task``: TIMELINE_SERVER_BASED through the client, one ``create_many``
   request per task (every marker of the task is durable when it returns).

The server is a real ``MarkerServer`` on 127.0.0.1 (batch interval 50 ms, 20 threads).
Only marker creation is timed; afterwards every run is checked with ``read_markers``
(each marker present exactly once), else the script exits 1.

The last line printed is the summary (``--summary-mode`` picks the server run it uses,
``task`` by default)::

    markers: files=N latency_ms=L direct_s=X server_s=X speedup=X ops_ratio=X

``speedup`` = direct time / server time; ``ops_ratio`` = direct storage operations /
server storage operations, both for the creation phase.
"""

from __future__ import annotations

import argparse
import os
import pickle
import shutil
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Callable

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from lakesdk.format.file_naming import BaseFile, make_write_token, new_file_id  # noqa: E402
from lakesdk.markers import (  # noqa: E402
    MarkerServer,
    WriteMarkers,
    format_marker_name,
    read_marker_files,
    read_markers,
    write_markers,
)
from lakesdk.storage import Storage  # noqa: E402

N_PARTITIONS = 10
_OPS = ("exists", "read", "size", "info", "list", "find", "makedirs", "write", "create_exclusive",
        "delete", "delete_dir", "touch")


_COUNTERS: dict[str, tuple[Counter[str], threading.Lock]] = {}   # shared by pickled copies (same process)


class LatencyStorage(Storage):
    """A Storage whose every operation sleeps ``latency_s`` first and is counted.

    Nested calls (``touch`` calling ``write``) count once.  ``ops`` is a Counter by
    operation name, shared with every pickled copy in this process (the copies the
    benchmark's "executor tasks" unpickle); ``reset()`` clears it.
    """

    def __init__(self, base_url: str, latency_s: float) -> None:
        super().__init__(base_url)
        self.latency_s = latency_s
        self._key = uuid.uuid4().hex
        _COUNTERS[self._key] = (Counter(), threading.Lock())
        self._attach()

    def _attach(self) -> None:
        self.ops, self._ops_lock = _COUNTERS[self._key]
        self._depth = threading.local()

    def __getstate__(self) -> dict[str, Any]:
        return {**super().__getstate__(), "latency_s": self.latency_s, "_key": self._key}

    def __setstate__(self, state: dict[str, Any]) -> None:
        super().__setstate__(state)
        self._attach()

    @property
    def total_ops(self) -> int:
        with self._ops_lock:
            return sum(self.ops.values())

    def reset(self) -> None:
        with self._ops_lock:
            self.ops.clear()


def _latency_op(name: str) -> Callable[..., Any]:
    base = getattr(Storage, name)

    def op(self: LatencyStorage, *args: Any, **kwargs: Any) -> Any:
        depth = getattr(self._depth, "n", 0)
        if depth == 0:
            with self._ops_lock:
                self.ops[name] += 1
            time.sleep(self.latency_s)
        self._depth.n = depth + 1
        try:
            return base(self, *args, **kwargs)
        finally:
            self._depth.n = depth

    op.__name__ = name
    op.__doc__ = base.__doc__
    return op


for _name in _OPS:
    setattr(LatencyStorage, _name, _latency_op(_name))


@dataclass
class Run:
    label: str
    seconds: float
    ops: Counter[str]
    requests: int = 0
    flushes: int = 0
    markers_files: int = 0

    @property
    def total_ops(self) -> int:
        return sum(self.ops.values())

    def line(self, files: int, creators: int) -> str:
        ops = " ".join(f"{k}={v}" for k, v in sorted(self.ops.items()))
        extra = (f" requests={self.requests} flushes={self.flushes} markers_files={self.markers_files}"
                 if self.requests else "")
        return (f"markers: {self.label:<16} files={files} creators={creators} wall_s={self.seconds:.2f} "
                f"storage_ops={self.total_ops} ({ops}){extra} rate={files / self.seconds:,.0f}/s")


def make_tasks(instant: str, files: int, files_per_task: int) -> list[list[tuple[str, str, str]]]:
    tasks: list[list[tuple[str, str, str]]] = []
    for t, start in enumerate(range(0, files, files_per_task)):
        token = make_write_token(t, 1, t)
        tasks.append([(f"dt=2024-01-{(i % N_PARTITIONS) + 1:02d}", BaseFile(new_file_id(), token, instant).name,
                       "CREATE") for i in range(start, min(files, start + files_per_task))])
    return tasks


def run_tasks(markers: WriteMarkers, tasks: list[list[tuple[str, str, str]]], creators: int,
              per_task: Callable[[WriteMarkers, list[tuple[str, str, str]]], None]) -> float:
    blob = pickle.dumps(markers)          # what the driver ships to executors

    def task(items: list[tuple[str, str, str]]) -> None:
        per_task(pickle.loads(blob), items)

    t0 = time.perf_counter()
    with ThreadPoolExecutor(creators) as pool:
        for f in [pool.submit(task, items) for items in tasks]:
            f.result()
    return time.perf_counter() - t0


def one_by_one(m: WriteMarkers, items: list[tuple[str, str, str]]) -> None:
    for p, f, t in items:
        m.create(p, f, t)


def batched(m: WriteMarkers, items: list[tuple[str, str, str]]) -> None:
    m.create_many(items)


def check(storage: Storage, instant: str, tasks: list[list[tuple[str, str, str]]], errors: list[str],
          label: str) -> None:
    expected = {format_marker_name(*x) for t in tasks for x in t}
    found = read_markers(storage, instant)
    if found != expected:
        errors.append(f"{label}: {len(expected - found)} markers missing, {len(found - expected)} unexpected")
    lines = Counter(ln for v in read_marker_files(storage, instant).values() for ln in v)
    if lines and max(lines.values()) > 1:
        errors.append(f"{label}: {sum(1 for v in lines.values() if v > 1)} markers written more than once")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="1,000 files")
    ap.add_argument("--files", type=int, default=None)
    ap.add_argument("--latency-ms", type=float, default=20.0)
    ap.add_argument("--creators", type=int, default=8)
    ap.add_argument("--files-per-task", type=int, default=50)
    ap.add_argument("--batch-interval-ms", type=float, default=50.0)
    ap.add_argument("--server-threads", type=int, default=20)
    ap.add_argument("--summary-mode", choices=["task", "file"], default="task")
    ap.add_argument("--skip-per-file", action="store_true", help="skip the one-request-per-marker server run")
    args = ap.parse_args(argv)
    files = args.files or (1_000 if args.quick else 10_000)
    if args.summary_mode == "file" and args.skip_per_file:
        ap.error("--summary-mode file needs the per-file run")
    latency_s = args.latency_ms / 1000.0

    root = tempfile.mkdtemp(prefix="lakesdk-bench-markers-")
    storage = LatencyStorage(os.path.join(root, "table"), latency_s)
    errors: list[str] = []
    runs: dict[str, Run] = {}
    print(f"markers: {files} data files in {N_PARTITIONS} partitions, tasks of {args.files_per_task} files, "
          f"{args.creators} creators, storage latency {args.latency_ms:g} ms/op, server batch interval "
          f"{args.batch_interval_ms:g} ms x {args.server_threads} threads", flush=True)
    try:
        # 1. DIRECT
        instant = "20240101000000001"
        tasks = make_tasks(instant, files, args.files_per_task)
        storage.reset()
        secs = run_tasks(write_markers(storage, instant, "DIRECT"), tasks, args.creators, one_by_one)
        runs["direct"] = Run("direct", secs, Counter(storage.ops))
        print(runs["direct"].line(files, args.creators), flush=True)
        check(storage, instant, tasks, errors, "direct")

        # 2./3. TIMELINE_SERVER_BASED
        modes = [("file", "server per-file", one_by_one), ("task", "server per-task", batched)]
        for n, (mode, label, per_task) in enumerate(modes):
            if mode == "file" and args.skip_per_file:
                continue
            instant = f"2024010100000000{n + 2}"
            tasks = make_tasks(instant, files, args.files_per_task)
            with MarkerServer(storage, batch_interval_ms=args.batch_interval_ms,
                              num_threads=args.server_threads) as srv:
                markers = write_markers(storage, instant, "TIMELINE_SERVER_BASED", server=srv)
                storage.reset()
                secs = run_tasks(markers, tasks, args.creators, per_task)
                ops = Counter(storage.ops)
                stats = srv.stats
            run = Run(label, secs, ops, requests=stats.create_requests, flushes=stats.flushes,
                      markers_files=len(read_marker_files(storage, instant)))
            runs[mode] = run
            print(run.line(files, args.creators), flush=True)
            check(storage, instant, tasks, errors, label)
    finally:
        shutil.rmtree(root, ignore_errors=True)

    for e in errors:
        print(f"ERROR {e}", file=sys.stderr)
    direct, server = runs["direct"], runs[args.summary_mode]
    for mode in ("file", "task"):
        if mode in runs and mode != args.summary_mode:
            r = runs[mode]
            print(f"markers: ({r.label}: speedup={direct.seconds / r.seconds:.1f} "
                  f"ops_ratio={direct.total_ops / max(1, r.total_ops):.1f})")
    print(f"markers: files={files} latency_ms={args.latency_ms:g} direct_s={direct.seconds:.2f} "
          f"server_s={server.seconds:.2f} speedup={direct.seconds / server.seconds:.1f} "
          f"ops_ratio={direct.total_ops / max(1, server.total_ops):.1f}")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
