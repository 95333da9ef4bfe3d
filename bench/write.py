"""Write benchmark: lakesdk bulk insert / upsert / snapshot read against its peers.

    python bench/write.py [--quick] [--rows N] [--repeat R] [--partitioned] [--iceberg-timeout S]
                          [--skip-iceberg] [--profile] [--tmp DIR]

One process, after a warm-up of every engine, times on the same generated data:

1. raw pyarrow ``pq.write_table`` of the N rows; and the floor of a writer of Hudi files with
   pyarrow, on one thread: the same rows with Hudi's five ``_hoodie_*`` columns computed by
   pyarrow, written to one file, then the upsert as a full rewrite of that file (read it,
   replace the updated ids by the update batch with its meta columns, write it again): no key
   index, bloom filter, metadata table or commit;
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
   tree (this Python process, the Spark JVM and the Python workers);
7. lakesdk's bulk insert and upsert again without Hudi's metadata table (``metadata=False``;
   the runs above keep it, the default: its files partition and column statistics): what
   keeping it costs.

Every write runs ``--repeat`` times (default 2) on fresh tables, lakesdk and its peers in
turn, and the best time counts (the first round of a fresh process touches new memory and
is noisy on small VMs); each round's times are printed too.  Reads are timed best of 3.
Peak memory is the largest growth over the rounds.  Results are checked: after the upsert
lakesdk and deltalake (and the hudi-rs read of the lakesdk table) must hold exactly N rows,
every id once, and the new ``ts`` on every updated row; else the script prints the errors
and exits 1 without a summary line.

``--profile`` adds, after the timed rounds, the Spark job/stage timings of the timed lakesdk
writes (when they ran on Spark) and a cProfile of one more bulk insert + upsert with lakesdk's
thread pools made serial (so the profile sees the work of every write task).

The data, the checks, the measuring helpers and the deltalake peer live in ``bench/_common.py``
(shared with ``bench/mor.py``).

The last line printed is the summary::

    write: rows=N bulk_vs_pyarrow=X upsert_vs_deltalake=X upsert_vs_pyiceberg=X read_vs_deltalake=X
           read_vs_hudi_rs=X upsert_mem_vs_deltalake=X pyiceberg_speedup=X mdt_bulk=X mdt_upsert=X
           bulk_vs_floor=X upsert_vs_floor=X floor_vs_pyarrow=X bloom=c|numpy

(one line; ratios are lakesdk time / peer time, except ``pyiceberg_speedup`` = pyiceberg
upsert time / lakesdk upsert time, and ``mdt_bulk``/``mdt_upsert`` = lakesdk time keeping the
metadata table (the default) / lakesdk time without it (``metadata=False``), same run;
``bulk_vs_floor``/``upsert_vs_floor`` = lakesdk time / the floor's, and ``floor_vs_pyarrow`` = the
floor's bulk write / plain pyarrow's); ``bloom``: whether lakesdk's C part hashed the bloom filters
(``c``) or numpy did (the C part is not built where no C compiler was at install).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import (  # noqa: E402 - the data, checks and measuring shared with bench/mor.py
    UPDATE_FRACTION,
    MiB,
    OtherLoad,
    PeakRSS,
    Results,
    base_parser,
    best_of,
    check_table,
    du,
    expected_ts,
    finish,
    make_data,
    print_load_and_rounds,
    profile_serial,
    ratio,
    row_count,
    run_deltalake,
    spark_session,
    spark_stage_report,
    step,
    timed,
    warm_up_deltalake,
)


# ---------------------------------------------------------------------------------- engines
def warm_up(spark: Any, root: str, partitioned: bool, rows: int) -> None:
    """A small write + upsert + read on every engine, twice for lakesdk (JVM start, Python
    workers, JIT, imports)."""
    import hudi

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
    warm_up_deltalake(root, base, upd, partitioned)
    os.makedirs(os.path.join(root, "pa"), exist_ok=True)
    pq.write_table(base, os.path.join(root, "pa", "part-0.parquet"))


def run_pyarrow(res: Results, base: pa.Table, root: str, rep: int) -> None:
    out = os.path.join(root, f"pyarrow{rep}")
    os.makedirs(out)
    res.time("pyarrow_write", timed(lambda: pq.write_table(base, os.path.join(out, "part-0.parquet")))[0])
    res.info["pyarrow_bytes"] = du(out)


_META_DICT = ["_hoodie_commit_time", "_hoodie_partition_path", "_hoodie_file_name"]


def with_meta_columns(t: pa.Table, instant: str) -> pa.Table:
    """``t`` with Hudi's five ``_hoodie_*`` columns first, computed by pyarrow (commit time,
    sequence number, record key, partition path, file name): what every Hudi base file holds."""
    import pyarrow.compute as pc
    n = t.num_rows
    seq = pc.binary_join_element_wise(f"{instant}_0_", pc.cast(pa.array(np.arange(n, dtype=np.int64)), pa.string()), "")
    meta = [pa.repeat(pa.scalar(instant), n), seq, pc.cast(t.column("id"), pa.string()), pa.repeat(pa.scalar(""), n),
            pa.repeat(pa.scalar(f"f0-0_0-0-0_{instant}.parquet"), n)]
    names = ["_hoodie_commit_time", "_hoodie_commit_seqno", "_hoodie_record_key", "_hoodie_partition_path",
             "_hoodie_file_name"]
    return pa.Table.from_arrays(meta + t.columns, names + t.column_names)


def run_floor(res: Results, base: pa.Table, upd: pa.Table, root: str, rep: int) -> None:
    """The floor of a writer of Hudi files with pyarrow, on one thread: the bulk insert's rows
    with the five meta columns written to one file (dictionaries for the constant columns and
    ``part`` only), then the upsert as a full rewrite (the file read, the updated ids replaced by
    the update batch with its meta columns, written again).  No key index, bloom filter,
    metadata table or commit."""
    import pyarrow.compute as pc
    out = os.path.join(root, f"floor{rep}")
    os.makedirs(out)
    src, dst = os.path.join(out, "part-0.parquet"), os.path.join(out, "part-1.parquet")
    dicts = _META_DICT + ["part"]
    res.time("floor_write", timed(lambda: pq.write_table(with_meta_columns(base, "20260101000000000"), src,
                                                         use_dictionary=dicts))[0])

    def rewrite() -> None:
        old = pq.read_table(src)
        kept = old.filter(pc.invert(pc.is_in(old.column("id"), value_set=upd.column("id"))))
        new = with_meta_columns(upd, "20260101000000001").cast(kept.schema)
        pq.write_table(pa.concat_tables([kept, new]), dst, use_dictionary=dicts)
    res.time("floor_rewrite", timed(rewrite)[0])


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


def run_lakesdk_without_mdt(res: Results, spark: Any, base: pa.Table, upd: pa.Table, root: str, partitioned: bool,
                            rep: int) -> None:
    """lakesdk's bulk insert and upsert without Hudi's metadata table (``metadata=False``):
    what keeping it (the default) costs."""
    import lakesdk as lk
    lake = lk.Lake(os.path.join(root, "lake_nomdt"), spark=spark, options=lk.TableOptions(metadata=False))
    t = lake.create_table(f"bench{rep}", key="id", partition_by="part" if partitioned else None, ordering="ts",
                          table_type="cow")
    res.time("lakesdk_bulk_nomdt", timed(lambda: t.bulk_insert(base))[0])
    res.time("lakesdk_upsert_nomdt", timed(lambda: t.upsert(upd))[0])


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
def profile_lakesdk(spark: Any, base: pa.Table, upd: pa.Table, root: str, partitioned: bool) -> None:
    """Print the Spark stage timings of the timed writes (when they ran on Spark), then re-run
    bulk insert + upsert on a fresh table under cProfile with lakesdk's thread pools made
    serial.  Not part of the figures."""
    import lakesdk as lk
    for group in ("bench-bulk_insert", "bench-upsert"):
        try:
            lines = spark_stage_report(spark, group)
        except Exception as e:  # noqa: BLE001 - the profile is best effort
            lines = [f"  (no stage timings: {e})"]
        if lines:
            print(f"\n--- Spark jobs of the timed {group[6:]} ---")
            print("\n".join(lines))
    lake = lk.Lake(os.path.join(root, "lake_profile"), spark=spark)
    t = lake.create_table("bench", key="id", partition_by="part" if partitioned else None, ordering="ts")
    for op, data in (("bulk_insert", base), ("upsert", upd)):
        profile_serial(f"lakesdk {op}", lambda op=op, data=data: getattr(t, op)(data))


# ---------------------------------------------------------------------------------- report
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
        ("", "", "the floor (one thread)", s("floor_write"), ratio(t.get("lakesdk_bulk"), t.get("floor_write"))),
        ("upsert 10% (s)", s("lakesdk_upsert"), "deltalake merge", s("delta_merge"), ratio(t.get("lakesdk_upsert"), t.get("delta_merge"))),
        ("", "", "the floor's full rewrite", s("floor_rewrite"), ratio(t.get("lakesdk_upsert"), t.get("floor_rewrite"))),
        ("", "", "pyiceberg upsert" + (" (TIMED OUT)" if ice_to else ""),
         ((">" if ice_to else "") + s("ice_upsert").strip()).rjust(8), up_vs_ice),
        ("bulk insert with the MDT (s)", s("lakesdk_bulk"), "lakesdk without", s("lakesdk_bulk_nomdt"),
         ratio(t.get("lakesdk_bulk"), t.get("lakesdk_bulk_nomdt"))),
        ("upsert with the MDT (s)", s("lakesdk_upsert"), "lakesdk without", s("lakesdk_upsert_nomdt"),
         ratio(t.get("lakesdk_upsert"), t.get("lakesdk_upsert_nomdt"))),
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
              f"deltalake {info['delta_upsert_peak'] / MiB:.0f} MiB (includes the idle Spark JVM); Arrow's memory "
              f"pool: {pa.default_memory_pool().backend_name} (ARROW_DEFAULT_MEMORY_POOL; deltalake allocates "
              "outside it)")
    from lakesdk.format import bloom_hash
    bloom = "c" if bloom_hash.native is not None else "numpy"
    print(f"bloom filters hashed by {'lakesdk C part' if bloom == 'c' else 'numpy (lakesdk C part not built)'}")
    print_load_and_rounds(res)
    if ice_to:
        print(f"pyiceberg upsert did not finish within --iceberg-timeout={args.iceberg_timeout:.0f}s: "
              f"its time is a lower bound, upsert_vs_pyiceberg an upper bound, pyiceberg_speedup a lower bound")
    return (f"write: rows={res.rows} bulk_vs_pyarrow={ratio(t.get('lakesdk_bulk'), t.get('pyarrow_write'))} "
            f"upsert_vs_deltalake={ratio(t.get('lakesdk_upsert'), t.get('delta_merge'))} "
            f"upsert_vs_pyiceberg={up_vs_ice} "
            f"read_vs_deltalake={ratio(t.get('lakesdk_read'), t.get('delta_read'))} "
            f"read_vs_hudi_rs={ratio(t.get('lakesdk_read'), t.get('hudi_rs_read'))} "
            f"upsert_mem_vs_deltalake={ratio(mem_l, mem_d)} pyiceberg_speedup={ice_speed} "
            f"mdt_bulk={ratio(t.get('lakesdk_bulk'), t.get('lakesdk_bulk_nomdt'))} "
            f"mdt_upsert={ratio(t.get('lakesdk_upsert'), t.get('lakesdk_upsert_nomdt'))} "
            f"bulk_vs_floor={ratio(t.get('lakesdk_bulk'), t.get('floor_write'))} "
            f"upsert_vs_floor={ratio(t.get('lakesdk_upsert'), t.get('floor_rewrite'))} "
            f"floor_vs_pyarrow={ratio(t.get('floor_write'), t.get('pyarrow_write'))} bloom={bloom}")


# ---------------------------------------------------------------------------------- main
def main(argv: list[str] | None = None) -> int:
    ap = base_parser(__doc__)
    ap.add_argument("--partitioned", action="store_true", help="partition lakesdk and deltalake tables by 'part'")
    ap.add_argument("--iceberg-timeout", type=float, default=600.0,
                    help="seconds the pyiceberg subprocess may run (default 600)")
    ap.add_argument("--skip-iceberg", action="store_true", help="do not run pyiceberg")
    ap.add_argument("--iceberg-worker", metavar="DIR", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.iceberg_worker:
        iceberg_worker(args.iceberg_worker, args.repeat)
        return 0
    n = row_count(ap, args)
    res = Results(rows=n)
    root = tempfile.mkdtemp(prefix="lakesdk-bench-write-", dir=args.tmp)
    spark = None
    try:
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
            step(f"round {rep + 1}/{args.repeat}: the floor (pyarrow writing the meta columns)")
            run_floor(res, base, upd, root, rep)
            step(f"round {rep + 1}/{args.repeat}: lakesdk bulk_insert / upsert / read")
            lake_path = run_lakesdk(res, spark, base, upd, root, args.partitioned, exp_ts, rep)
            step(f"round {rep + 1}/{args.repeat}: lakesdk bulk_insert / upsert without the metadata table")
            run_lakesdk_without_mdt(res, spark, base, upd, root, args.partitioned, rep)
            step(f"round {rep + 1}/{args.repeat}: deltalake write / merge / read")
            run_deltalake(res, base, upd, root, exp_ts, rep, partitioned=args.partitioned)
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
    return finish(res, report(res, args))

if __name__ == "__main__":
    sys.exit(main())
