"""Early conflict detection benchmark: what the check costs a writer's marker creation.

    python bench/early_conflict.py [--quick] [--files N] [--latency-ms MS] [--others K]
                                   [--other-markers M] [--files-per-task F] [--creators C]

Storage is a local folder wrapped in ``LatencyStorage`` (from ``bench/markers.py``): every
storage operation sleeps ``--latency-ms`` (default 5 ms) and is counted.  ``--others``
(default 4) earlier writers are pending on the timeline with fresh heartbeats, each with
``--other-markers`` (default 200) DIRECT markers on disjoint file groups, so no check
finds a conflict and every write goes through.  Our writer creates DIRECT markers for
``--files`` data files (default 2,000; ``--quick``: 400) in executor-style tasks of
``--files-per-task`` files (default 50), run by ``--creators`` threads (default 8); each
task unpickles its own markers object, as a Spark task does, and creates its markers one
by one (what a Spark write task does per file):

1. ``off``: no early conflict detection;
2. ``cached``: detection with the listing cached for the check interval (1 s), so one
   listing per task;
3. ``per-marker``: detection re-listing before every marker (interval 0: what Hudi's
   direct strategy does).

The last line printed is the summary::

    early_conflict: files=N others=K off_s=X cached_s=X per_marker_s=X cached_overhead=X per_marker_overhead=X
"""

from __future__ import annotations

import argparse
import os
import pickle
import shutil
import sys
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from markers import LatencyStorage  # noqa: E402

from lakesdk.concurrency.early import EarlyConflictDetector  # noqa: E402
from lakesdk.concurrency.heartbeat import Heartbeat  # noqa: E402
from lakesdk.format.file_naming import BaseFile, make_write_token, new_file_id  # noqa: E402
from lakesdk.format.instant import Instant  # noqa: E402
from lakesdk.markers import DirectWriteMarkers  # noqa: E402

TIMELINE = ".hoodie/timeline"
ME = "20990101000000000"


def setup(root: str, others: int, per_other: int) -> list[Heartbeat]:
    s = LatencyStorage(root, 0.0)
    beats = []
    for k in range(others):
        inst = f"2098010100000{k:04d}"
        for state in ("requested", "inflight"):
            s.write(f"{TIMELINE}/{Instant('commit', state, inst).file_name(layout=2)}", b"")
        m = DirectWriteMarkers(s, inst)
        for i in range(per_other):
            m.create_if_absent(f"p{i % 10}", BaseFile(new_file_id(), make_write_token(i, 1, i), inst).name, "CREATE")
        beats.append(Heartbeat(s, inst, 3600.0, 2).start())
    s.write(f"{TIMELINE}/{Instant('commit', 'requested', ME).file_name(layout=2)}", b"")
    return beats


def run(root: str, latency_s: float, files: int, per_task: int, creators: int, mode: str) -> tuple[float, int, int]:
    s = LatencyStorage(root, latency_s)
    det = None
    if mode != "off":
        det = EarlyConflictDetector(s, ME, TIMELINE, 2, heartbeat_interval_s=3600.0,
                                    interval_s=1.0 if mode == "cached" else 0.0)
    markers = DirectWriteMarkers(s, ME, detector=det)
    blob = pickle.dumps(markers)
    tasks = [list(range(o, min(files, o + per_task))) for o in range(0, files, per_task)]
    listings = []

    def task(ids: list[int]) -> None:
        m = pickle.loads(blob)             # a Spark task's own copy
        for i in ids:
            m.create(f"p{i % 10}", BaseFile(new_file_id(), make_write_token(i, 2, i), ME).name, "CREATE")
        if m.detector is not None:
            listings.append(m.detector.listings)

    s.reset()
    t0 = time.perf_counter()
    with ThreadPoolExecutor(creators) as pool:
        list(pool.map(task, tasks))
    seconds = time.perf_counter() - t0
    ops = s.total_ops
    DirectWriteMarkers(s, ME).delete_all()
    return seconds, ops, sum(listings)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--files", type=int)
    ap.add_argument("--latency-ms", type=float, default=5.0)
    ap.add_argument("--others", type=int, default=4)
    ap.add_argument("--other-markers", type=int, default=200)
    ap.add_argument("--files-per-task", type=int, default=50)
    ap.add_argument("--creators", type=int, default=8)
    a = ap.parse_args()
    files = a.files or (400 if a.quick else 2000)
    root = os.path.join(tempfile.gettempdir(), f"lakesdk-bench-ecd-{uuid.uuid4().hex[:8]}")
    beats = setup(root, a.others, a.other_markers)
    try:
        res = {}
        for mode in ("off", "cached", "per-marker"):
            sec, ops, listings = run(root, a.latency_ms / 1000.0, files, a.files_per_task, a.creators, mode)
            res[mode] = sec
            print(f"{mode:>10}: {sec:7.2f} s  storage ops={ops:6d}  listings={listings}")
    finally:
        for b in beats:
            b.stop()
        shutil.rmtree(root, ignore_errors=True)
    print(f"early_conflict: files={files} others={a.others} off_s={res['off']:.2f} cached_s={res['cached']:.2f} "
          f"per_marker_s={res['per-marker']:.2f} cached_overhead={res['cached'] / res['off']:.2f} "
          f"per_marker_overhead={res['per-marker'] / res['off']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
