"""Clustering benchmark: snapshot reads of a table of many small files, before and after
``t.maintenance.cluster()``.

    python bench/clustering.py [--quick] [--rows N] [--batches B] [--tmp DIR]

A copy-on-write table (``key="id"``, ``partition_by="part"`` with 4 values, ``ordering="ts"``)
gets ``B`` bulk inserts of ``N / B`` rows each (default N=1,000,000, B=100; ``--quick``:
100,000 rows in 50 batches): 4 * B small file groups.  Then, best of 3 each: the snapshot
read ``t.read().to_arrow()`` and the hudi-rs read (``hudi`` package), before and after one
clustering (``sort_by="id"``, every small file group of a partition into one file), and the
clustering itself (timed once).  Checks: both readers return the N rows before and after,
equal as sets of (id, ts); the clustering leaves one file group per partition.

The last line printed is the summary::

    clustering: rows=N files_before=F files_after=F cluster_s=X read_before_s=X read_after_s=X
                hudi_rs_before_s=X hudi_rs_after_s=X read_after_vs_before=R read_vs_hudi_rs_after=R
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time

import numpy as np
import pyarrow as pa


def make_batch(start: int, n: int, seed: int) -> pa.Table:
    rng = np.random.default_rng(seed)
    ids = np.arange(start, start + n, dtype=np.int64)
    return pa.table({"id": ids, "ts": np.full(n, 1, dtype=np.int64),
                     "part": pa.array([f"p{i % 4}" for i in ids]),
                     "fare": rng.random(n), "name": pa.array([f"name-{i}" for i in ids])})


def best(fn, repeat: int = 3) -> tuple[float, object]:
    out, times = None, []
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return min(times), out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--rows", type=int)
    ap.add_argument("--batches", type=int)
    ap.add_argument("--tmp")
    a = ap.parse_args()
    n = a.rows or (100_000 if a.quick else 1_000_000)
    b = a.batches or (50 if a.quick else 100)
    import hudi

    import lakesdk as lk
    root = tempfile.mkdtemp(dir=a.tmp)
    try:
        t = lk.Lake(root).create_table("bench", key="id", partition_by="part", ordering="ts")
        per = n // b
        for i in range(b):
            t.bulk_insert(make_batch(i * per, per, i))
        n = per * b

        def ours() -> pa.Table:
            return t.read().to_arrow()

        def theirs() -> pa.Table:
            return pa.Table.from_batches(hudi.HudiTableBuilder.from_base_uri(t.path).build().read(hudi.HudiReadOptions()))

        def pairs(x: pa.Table) -> set:
            return set(zip(x.column("id").to_pylist(), x.column("ts").to_pylist()))

        files_before = len(t.inspect.file_groups())
        rb, x = best(ours)
        hb, y = best(theirs)
        errors = []
        if x.num_rows != n or pairs(x) != pairs(y):
            errors.append(f"before clustering: ours {x.num_rows} rows, hudi-rs {y.num_rows}, expected {n}")
        t0 = time.perf_counter()
        res = t.maintenance.cluster(small_file_limit=1 << 40, max_bytes_per_group=1 << 40, target_file_size=1 << 40,
                                    sort_by="id")
        cs = time.perf_counter() - t0
        print(res)
        files_after = len(t.inspect.file_groups())
        ra, x2 = best(ours)
        ha, y2 = best(theirs)
        if x2.num_rows != n or pairs(x2) != pairs(y2) or pairs(x2) != pairs(x):
            errors.append(f"after clustering: ours {x2.num_rows} rows, hudi-rs {y2.num_rows}, expected {n}")
        if files_after != 4:
            errors.append(f"expected 4 file groups after clustering, found {files_after}")
        print(f"read before {rb:.3f}s after {ra:.3f}s; hudi-rs before {hb:.3f}s after {ha:.3f}s; cluster {cs:.3f}s")
        if errors:
            print("\n".join(errors))
            return 1
        print(f"clustering: rows={n} files_before={files_before} files_after={files_after} cluster_s={cs:.3f} "
              f"read_before_s={rb:.3f} read_after_s={ra:.3f} hudi_rs_before_s={hb:.3f} hudi_rs_after_s={ha:.3f} "
              f"read_after_vs_before={ra / rb:.2f} read_vs_hudi_rs_after={ra / ha:.2f}")
        return 0
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
