"""Spark data plane benchmark: lakesdk's Spark path against plain Spark doing the same work.

    python bench/spark.py [--quick] [--big] [--wide N] [--rows N] [--repeat R] [--tmp DIR]

One Spark session (``local[*]``, as lakesdk starts it), one process.  The input is a Spark
DataFrame generated in Spark (``id`` unique bigint, ``ts``, ``part`` with 10 values, ``fare``,
``name``; Spark infers which columns are ``NOT NULL``), cached and counted before any timing; the update batch
is 10% of the ids (every tenth by a hash, so spread over every file group) with a higher
``ts`` and a changed ``fare`` and ``name``, no new ids.  Each round, on fresh folders:

1. plain Spark: ``df.write.parquet(p)`` (the bulk insert's peer), then the full rewrite an
   upsert costs without a table format: read ``p``, anti-join the updates by ``id``, union
   them, write the result to a new folder;
1b. the floor: the same two writes with Hudi's five ``_hoodie_*`` columns computed as Spark
   expressions (commit time, sequence number from the task and row, record key, partition
   path, file name), which every Hudi file holds and plain Parquet does not: what a writer of
   real Hudi files in Spark cannot go below without Hudi's JVM code (no index, no bloom filter,
   no metadata table, no commit);
2. lakesdk: ``create_table(..., key="id", ordering="ts", engine="spark")``, ``bulk_insert(df)``,
   ``upsert(updates)``;
3. reads of the result of both, best of 3: ``spark.read.parquet(p2)`` and
   ``t.read().to_spark()``, each run to the end by Spark's ``noop`` sink (every column of
   every row is read, nothing is collected).

Every write runs ``--repeat`` times (default 2) and the best time counts.  Results are
checked: both results hold exactly N rows and every id once, and they are equal on every
column but ``part`` (a Spark ``exceptAll`` both ways is empty); otherwise the script
prints the errors and exits 1 without a summary line.

``--profile``: after the timed rounds, the Spark jobs and stages of lakesdk's steps (wall
time, task time, shuffle bytes, from Spark's REST API) and a cProfile of the driver during
one more bulk insert and upsert.

``--quick``: 100,000 rows; ``--big``: 5,000,000 rows; default 1,000,000.  ``--wide N``: N more
double columns (the five columns are narrow: Hudi's five ``_hoodie_*`` columns and the bloom
filter weigh on them most; at 50 columns they are a small part of the work).  The last line is::

    spark: rows=N bulk_vs_spark=X upsert_vs_rewrite=X read_vs_spark=X bulk_vs_floor=X upsert_vs_floor=X floor_vs_spark=X

(ratios are lakesdk time / plain Spark time, lakesdk time / the floor's time, and the floor's
bulk write / plain Spark's).
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import (  # noqa: E402 - measuring shared with the other benchmarks
    ID_BASE,
    N_PARTS,
    TS_BASE,
    OtherLoad,
    Results,
    base_parser,
    best_of,
    finish,
    print_load_and_rounds,
    profile_serial,
    ratio,
    spark_stage_report,
    step,
    timed,
)

READS = 3


def make_frames(spark: Any, n: int, wide: int = 0) -> tuple[Any, Any]:
    """(base rows, update batch) as cached Spark DataFrames; ``wide``: that many more double
    columns ``m0``, ``m1``... (measures of the row, changed by the updates too)."""
    from pyspark.sql import functions as F
    extra = [(F.abs(F.xxhash64(F.col("id"), F.lit(100 + i)) % 1_000_000).cast("double") / 1000).alias(f"m{i}")
             for i in range(wide)]
    base = (spark.range(n, numPartitions=max(2, spark.sparkContext.defaultParallelism))
            .select((F.col("id") + ID_BASE).alias("id"),
                    (F.lit(TS_BASE) + F.abs(F.xxhash64("id") % 1_000_000_000)).alias("ts"),
                    F.format_string("p%02d", (F.col("id") % N_PARTS).cast("int")).alias("part"),
                    F.round(F.abs(F.xxhash64(F.col("id"), F.lit(7)) % 10_000).cast("double") / 100, 2).alias("fare"),
                    F.concat(F.lit("name_"), F.col("id").cast("string")).alias("name"), *extra))
    base = base.cache()
    upd = (base.filter(F.abs(F.xxhash64("id")) % 10 == 0)
           .select("id", (F.col("ts") + 1).alias("ts"), "part", (F.col("fare") * 1.1 + 1).alias("fare"),
                   F.concat(F.lit("upd_"), F.col("id").cast("string")).alias("name"),
                   *[(F.col(f"m{i}") + 1).alias(f"m{i}") for i in range(wide)]))
    upd = upd.cache()
    base.count()
    upd.count()
    return base, upd


def plain_write(df: Any, path: str) -> None:
    df.write.mode("overwrite").parquet(path)


def plain_rewrite(spark: Any, src: str, upd: Any, dst: str) -> None:
    """The upsert without a table format: the whole table read, the updated ids replaced."""
    old = spark.read.parquet(src)
    old.join(upd.select("id"), "id", "left_anti").unionByName(upd).write.mode("overwrite").parquet(dst)


def with_meta_columns(df: Any, commit_time: str) -> Any:
    """``df`` with Hudi's five meta columns first, computed by Spark (the floor's input)."""
    from pyspark.sql import functions as F
    task = F.spark_partition_id().cast("string")
    return df.select(
        F.lit(commit_time).alias("_hoodie_commit_time"),
        F.concat_ws("_", F.lit(commit_time), task, F.monotonically_increasing_id().cast("string"))
        .alias("_hoodie_commit_seqno"),
        F.col("id").cast("string").alias("_hoodie_record_key"),
        F.lit("").alias("_hoodie_partition_path"),
        F.concat(F.lit("f"), task, F.lit(f"-0_0-0-0_{commit_time}.parquet")).alias("_hoodie_file_name"),
        *df.columns)


def floor_write(df: Any, path: str) -> None:
    with_meta_columns(df, "20260101000000000").write.mode("overwrite").parquet(path)


def floor_rewrite(spark: Any, src: str, upd: Any, dst: str) -> None:
    old = spark.read.parquet(src)
    new = with_meta_columns(upd, "20260101000000001")
    old.join(upd.select("id"), "id", "left_anti").unionByName(new).write.mode("overwrite").parquet(dst)


def drain(df: Any) -> None:
    """Read every column of every row of ``df`` (Spark's noop sink: nothing collected)."""
    df.write.format("noop").mode("overwrite").save()


def check(res: Results, spark: Any, plain: str, t: Any, n: int) -> None:
    from pyspark.sql import functions as F
    cols = [c for c in spark.read.parquet(plain).columns if c != "part"]
    a = spark.read.parquet(plain).select(*cols)
    b = t.read().to_spark().select(*cols)
    for label, df in (("plain Spark", a), ("lakesdk", b)):
        got = df.agg(F.count(F.lit(1)).alias("rows"), F.countDistinct("id").alias("ids")).collect()[0]
        if got["rows"] != n or got["ids"] != n:
            res.errors.append(f"{label}: {got['rows']} rows, {got['ids']} distinct ids, expected {n}")
    if a.exceptAll(b).limit(1).count() or b.exceptAll(a).limit(1).count():
        res.errors.append(f"lakesdk's table and plain Spark's rewrite differ on ({', '.join(cols)})")


def one_round(res: Results, spark: Any, base: Any, upd: Any, root: str, rep: int, n: int) -> None:
    import lakesdk as lk
    p1, p2 = os.path.join(root, f"plain{rep}"), os.path.join(root, f"plain{rep}_upserted")
    s, _ = timed(lambda: plain_write(base, p1))
    res.time("spark_write", s)
    s, _ = timed(lambda: plain_rewrite(spark, p1, upd, p2))
    res.time("spark_rewrite", s)
    f1, f2 = os.path.join(root, f"floor{rep}"), os.path.join(root, f"floor{rep}_upserted")
    s, _ = timed(lambda: floor_write(base, f1))
    res.time("floor_write", s)
    s, _ = timed(lambda: floor_rewrite(spark, f1, upd, f2))
    res.time("floor_rewrite", s)

    lake = lk.Lake(os.path.join(root, f"lake{rep}"), spark=spark, options=lk.TableOptions(engine="spark"))
    t = lake.create_table("s", key="id", ordering="ts")
    sc = spark.sparkContext
    sc.setJobGroup("bench-bulk_insert", "lakesdk bulk_insert")
    s, r = timed(lambda: t.bulk_insert(base))
    res.time("lakesdk_bulk", s)
    if r.inserted != n:
        res.errors.append(f"lakesdk bulk_insert: inserted={r.inserted}, expected {n}")
    sc.setJobGroup("bench-upsert", "lakesdk upsert")
    s, r = timed(lambda: t.upsert(upd))
    res.time("lakesdk_upsert", s)
    sc.setJobGroup("bench-other", "other")
    res.info["updates"] = r.updated
    if r.inserted != 0 or r.updated != upd.count():
        res.errors.append(f"lakesdk upsert: inserted={r.inserted} updated={r.updated}, expected 0 and {upd.count()}")

    s, _ = best_of(READS, lambda: drain(spark.read.parquet(p2)))
    res.time("spark_read", s)
    sc.setJobGroup("bench-read", "lakesdk read")
    s, _ = best_of(READS, lambda: drain(t.read().to_spark()))
    res.time("lakesdk_read", s)
    sc.setJobGroup("bench-other", "other")
    if rep == 0:
        check(res, spark, p2, t, n)
    lake.close()


def profile(spark: Any, base: Any, upd: Any, root: str) -> None:
    """The Spark jobs and stages of the last timed round's lakesdk steps (from Spark's REST
    API), then one more bulk insert and upsert on a fresh table under cProfile (the driver's
    Python only).  Not part of the figures."""
    import lakesdk as lk
    for group in ("bench-bulk_insert", "bench-upsert", "bench-read"):
        try:
            lines = spark_stage_report(spark, group)
        except Exception as e:  # noqa: BLE001 - the profile is best effort
            lines = [f"  (no stage timings: {e})"]
        print(f"\n--- Spark jobs of the timed {group[6:]} (every round) ---")
        print("\n".join(lines))
    lake = lk.Lake(os.path.join(root, "lake_profile"), spark=spark, options=lk.TableOptions(engine="spark"))
    t = lake.create_table("s", key="id", ordering="ts")
    profile_serial("lakesdk bulk_insert", lambda: t.bulk_insert(base))
    profile_serial("lakesdk upsert", lambda: t.upsert(upd))
    lake.close()


def main() -> int:
    ap = base_parser(__doc__)
    ap.add_argument("--big", action="store_true", help="5,000,000 rows")
    ap.add_argument("--wide", type=int, default=0, metavar="N",
                    help="N more double columns in the input (default 0: the five narrow columns)")
    args = ap.parse_args()
    n = args.rows or (5_000_000 if args.big else 100_000 if args.quick else 1_000_000)
    if args.repeat < 1 or n < 10:
        ap.error("--repeat must be >= 1 and --rows >= 10")
    from lakesdk.engine.session import get_spark
    root = tempfile.mkdtemp(prefix="lakesdk-bench-spark-", dir=args.tmp)
    res = Results(n)
    spark = get_spark()
    try:
        step(f"generating {n:,} rows in Spark")
        base, upd = make_frames(spark, n, args.wide)
        step("warm-up (every step once on 2% of the rows)")
        small_b = base.limit(max(10, n // 50)).cache()
        small_u = upd.limit(max(1, n // 500)).cache()
        warm = Results(small_b.count())
        one_round(warm, spark, small_b, small_u.join(small_b.select("id"), "id", "left_semi"),
                  os.path.join(root, "warm"), 0, warm.rows)
        with OtherLoad() as load:
            for rep in range(args.repeat):
                step(f"round {rep + 1} of {args.repeat}")
                one_round(res, spark, base, upd, root, rep, n)
        res.info["other_cores"] = load.cores
        if args.profile:
            step("profiling lakesdk (not part of the figures)")
            profile(spark, base, upd, root)
    finally:
        spark.catalog.clearCache()
        shutil.rmtree(root, ignore_errors=True)
    t = res.t
    print(f"rows {n:,}, updates {res.info.get('updates', 0):,}; times in s (best of {args.repeat} rounds; reads best of {READS})")
    print(f"  bulk insert: lakesdk {t['lakesdk_bulk']:.2f}  plain df.write.parquet {t['spark_write']:.2f}")
    print(f"  upsert 10%:  lakesdk {t['lakesdk_upsert']:.2f}  plain full rewrite {t['spark_rewrite']:.2f}")
    print(f"  read:        lakesdk {t['lakesdk_read']:.2f}  spark.read.parquet {t['spark_read']:.2f}")
    print(f"  the floor (plain Spark writing the five _hoodie_* columns): bulk {t['floor_write']:.2f}  "
          f"upsert {t['floor_rewrite']:.2f}")
    print_load_and_rounds(res)
    width = f" columns={5 + args.wide}" if args.wide else ""
    return finish(res, f"spark: rows={n}{width} bulk_vs_spark={ratio(t['lakesdk_bulk'], t['spark_write'])} "
                       f"upsert_vs_rewrite={ratio(t['lakesdk_upsert'], t['spark_rewrite'])} "
                       f"read_vs_spark={ratio(t['lakesdk_read'], t['spark_read'])} "
                       f"bulk_vs_floor={ratio(t['lakesdk_bulk'], t['floor_write'])} "
                       f"upsert_vs_floor={ratio(t['lakesdk_upsert'], t['floor_rewrite'])} "
                       f"floor_vs_spark={ratio(t['floor_write'], t['spark_write'])}")


if __name__ == "__main__":
    sys.exit(main())
