"""Merge benchmark: a warm 10-row merge into a 1,000-row table, lakesdk's local merge against deltalake's.

    python bench/merge.py [--quick] [--rows N] [--repeat R] [--tmp DIR]

One process, no Spark: a copy-on-write table of N rows (default 1,000; ``id``, ``ts``,
``fare``, ``name``) is written by lakesdk (``engine="local"``) and by deltalake, then both
run the same merges, each of 10 source rows (5 keys of the table with a higher ``ts``,
5 new keys)::

    t.merge(src, on="id").when_matched_update_all(where="s.ts > t.ts").when_not_matched_insert_all()
    DeltaTable(p).merge(src, "t.id = s.id", ...).when_matched_update_all("s.ts > t.ts").when_not_matched_insert_all()

after one warm-up merge each; the best of ``--repeat`` merges (default 10, 5 with
``--quick``) counts.  Checked: both tables hold the same rows afterwards, every merge
updated 5 and inserted 5 rows, and no Spark session or JVM was started (``spark_jobs=0``).

The last line printed is the summary::

    merge: rows=N lakesdk_s=X deltalake_s=X ratio=X spark_jobs=0
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time

import pyarrow as pa


def make_source(n: int, round_: int) -> pa.Table:
    """5 stored keys (spread over the table) with a higher ts, 5 new keys."""
    old = [(i * 97 + round_) % n for i in range(5)]
    new = [n + round_ * 5 + i for i in range(5)]
    ids = old + new
    return pa.table({"id": pa.array(ids, pa.int64()), "ts": pa.array([10 + round_] * 10, pa.int64()),
                     "fare": pa.array([float(i) * 1.5 + round_ for i in ids]),
                     "name": pa.array([f"r{round_}_{i}" for i in ids])})


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="5 timed merges (default 10)")
    ap.add_argument("--rows", type=int, default=1_000, help="rows in the table (default 1,000)")
    ap.add_argument("--repeat", type=int, default=None, help="timed merges (best counts)")
    ap.add_argument("--tmp", default=None, help="parent folder for the temporary data (default: system temp)")
    args = ap.parse_args(argv)
    n, reps = args.rows, args.repeat or (5 if args.quick else 10)
    from deltalake import DeltaTable, write_deltalake

    import lakesdk as lk
    root = tempfile.mkdtemp(prefix="lakesdk-bench-merge-", dir=args.tmp)
    errors: list[str] = []
    try:
        base = pa.table({"id": pa.array(range(n), pa.int64()), "ts": pa.array([1] * n, pa.int64()),
                         "fare": pa.array([float(i) for i in range(n)]), "name": pa.array([f"n{i}" for i in range(n)])})
        lake = lk.Lake(os.path.join(root, "lake"), options=lk.TableOptions(engine="local", progress=False))
        t = lake.create_table("m", key="id", ordering="ts")
        t.upsert(base)
        dp = os.path.join(root, "delta")
        write_deltalake(dp, base)
        lk_s, dl_s = [], []
        for r in range(reps + 1):   # round 0 warms up
            src = make_source(n, r)
            t0 = time.perf_counter()
            res = (t.merge(src, on="id").when_matched_update_all(where="s.ts > t.ts")
                   .when_not_matched_insert_all().execute())
            t1 = time.perf_counter()
            m = (DeltaTable(dp).merge(source=src, predicate="t.id = s.id", source_alias="s", target_alias="t")
                 .when_matched_update_all(predicate="s.ts > t.ts").when_not_matched_insert_all().execute())
            t2 = time.perf_counter()
            if (res.updated, res.inserted, res.engine) != (5, 5, "local"):
                errors.append(f"lakesdk merge {r}: {res!r} (engine {res.engine}), expected 5 updated, 5 inserted, local")
            if (m.get("num_target_rows_updated"), m.get("num_target_rows_inserted")) != (5, 5):
                errors.append(f"deltalake merge {r}: {m}")
            if r:
                lk_s.append(t1 - t0)
                dl_s.append(t2 - t1)
        mine = t.read().to_arrow().sort_by("id")
        theirs = DeltaTable(dp).to_pyarrow_table().select(mine.column_names).sort_by("id")
        if not mine.cast(theirs.schema).equals(theirs):
            errors.append("the lakesdk and deltalake tables differ after the merges")
        session = None
        if "pyspark.sql" in sys.modules:
            session = sys.modules["pyspark.sql"].SparkSession.getActiveSession()
        jvm = False
        try:
            import psutil
            jvm = any("java" in (p.name() or "").lower() for p in psutil.Process().children(recursive=True))
        except ImportError:
            pass
        spark_jobs = int(session is not None or jvm)
        if spark_jobs:
            errors.append("a Spark session or a JVM was started by the local merge")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    if errors:
        for e in errors:
            print(f"ERROR: {e}", file=sys.stderr)
        print(f"ERROR: {len(errors)} correctness check(s) failed", flush=True)
        return 1
    a, b = min(lk_s), min(dl_s)
    print("per merge (s): lakesdk " + "/".join(f"{x:.3f}" for x in lk_s) + "; deltalake "
          + "/".join(f"{x:.3f}" for x in dl_s))
    print(f"merge: rows={n} lakesdk_s={a:.4f} deltalake_s={b:.4f} ratio={a / b:.2f} spark_jobs={spark_jobs}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
