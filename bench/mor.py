"""Merge-on-read benchmark: lakesdk MOR upsert / snapshot read / compaction against COW and peers.

    python bench/mor.py [--quick] [--rows N] [--repeat R] [--profile] [--tmp DIR]

One process, after a warm-up of every engine, times on the same generated data as
``bench/write.py`` (``id`` unique int64, ``ts``, ``part`` with 10 values, ``fare``, ``name``;
the update batch is 10% of the ids with a higher ``ts`` and no new keys):

1. lakesdk merge-on-read: ``bulk_insert`` of the N rows into a new table
   (``create_table(..., key="id", ordering="ts", table_type="mor")``), then ``upsert`` of the
   update batch (a deltacommit: one log file per touched file group);
2. lakesdk copy-on-write: the same bulk insert and upsert (the upsert rewrites the base files);
3. deltalake: ``write_deltalake`` and a ``merge`` (update matched / insert not matched);
4. snapshot reads after the upsert, best of 3: MOR ``t.read().to_arrow()`` (base + logs
   merged), MOR read-optimized ``t.read(read_optimized=True).to_arrow()`` (base files only),
   COW ``t.read().to_arrow()``, ``DeltaTable(path).to_pyarrow_table()``, and the hudi-rs
   reader (``hudi`` package) on the MOR table;
5. ``t.maintenance.compact()`` of the MOR table, then its snapshot read after compaction;
6. the MOR bulk insert and upsert again without Hudi's metadata table (``metadata=False``;
   the runs above keep it, the default).

Every write runs ``--repeat`` times (default 2) on fresh tables and the best time counts
(each round's times are printed too); the process-tree RSS growth of each upsert is sampled
as in ``bench/write.py`` (shared code: ``bench/_common.py``).  lakesdk runs with its defaults (``engine="auto"``: the local
engine, as Spark is local).  Results are checked: the MOR snapshot (before and after the
compaction), the COW snapshot, deltalake and the hudi-rs read must hold exactly N rows, every
id once and the new ``ts`` on every updated id; MOR, COW and hudi-rs must be equal as sets of
(id, ts) (and MOR and COW equal on every data column); the read-optimized read before the
compaction must hold the bulk-inserted ``ts`` values, after it the upserted ones; the
compaction must leave no log file.  If a check fails the script prints the errors and exits
1 without a summary line.

``--profile`` adds, after the timed rounds, a cProfile (driver) of one more MOR upsert,
MOR snapshot read and compaction on a fresh table.

The last line printed is the summary::

    mor: rows=N mor_upsert_vs_cow=X mor_upsert_vs_deltalake=X mor_read_vs_cow=X
         mor_read_vs_deltalake=X mor_read_vs_hudi_rs=X compaction_s=X compaction_vs_cow_upsert=X
         mdt_bulk=X mdt_upsert=X

(one line; ratios are lakesdk MOR time / peer time; ``mor_read`` is the MOR snapshot read
after the upsert, before the compaction; ``mdt_bulk``/``mdt_upsert``: the MOR time keeping
the metadata table (the default) / without it (``metadata=False``), same run).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from typing import Any

import numpy as np
import pyarrow as pa

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import (  # noqa: E402 - the data, checks and measuring shared with bench/write.py
    ID_BASE,
    UPDATE_FRACTION,
    MiB,
    OtherLoad,
    PeakRSS,
    Results,
    as_table,
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
    step,
    timed,
    warm_up_deltalake,
)

READS = 3   # every read is timed best of READS per round


# ---------------------------------------------------------------------------------- checks
def id_ts(tab: Any) -> tuple[np.ndarray, np.ndarray]:
    """(ids, ts) sorted by id: the set of (id, ts) pairs when ids are unique."""
    tab = as_table(tab)
    ids = tab.column("id").to_numpy()
    order = np.argsort(ids, kind="stable")
    return ids[order], tab.column("ts").to_numpy()[order]


def same_pairs(label: str, a: Any, b: Any) -> list[str]:
    ia, ta = id_ts(a)
    ib, tb = id_ts(b)
    if ia.shape != ib.shape or not np.array_equal(ia, ib):
        return [f"{label}: the id sets differ ({ia.size} vs {ib.size} rows)"]
    bad = np.flatnonzero(ta != tb)
    if bad.size:
        return [f"{label}: {bad.size} ids with a different ts (e.g. id {ia[bad[0]]}: {ta[bad[0]]} != {tb[bad[0]]})"]
    return []


def same_rows(label: str, a: pa.Table, b: pa.Table, columns: tuple[str, ...] = ("id", "ts", "part", "fare", "name")) -> list[str]:
    """Equal on every data column (rows matched by id)."""
    a = a.select(list(columns)).sort_by("id")
    b = b.select(list(columns)).sort_by("id")
    if a.num_rows != b.num_rows:
        return [f"{label}: {a.num_rows} vs {b.num_rows} rows"]
    errs = []
    for c in columns:
        if not a.column(c).equals(b.column(c)):
            errs.append(f"{label}: column {c!r} differs")
    return errs


def check_read_optimized(label: str, tab: pa.Table, n: int, ts_by_id: np.ndarray) -> list[str]:
    """Every id once, with the ts of ``ts_by_id`` (by id - ID_BASE)."""
    errs = []
    if tab.num_rows != n:
        errs.append(f"{label}: {tab.num_rows} rows, expected {n}")
    ids = tab.column("id").to_numpy() - ID_BASE
    if ids.size and (ids.min() < 0 or ids.max() >= n):
        return errs + [f"{label}: ids out of the generated range"]
    if np.unique(ids).size != ids.size:
        errs.append(f"{label}: {ids.size - np.unique(ids).size} duplicate ids")
    bad = np.flatnonzero(ts_by_id[ids] != tab.column("ts").to_numpy())
    if bad.size:
        errs.append(f"{label}: {bad.size} rows with an unexpected ts")
    return errs


# ---------------------------------------------------------------------------------- engines
def _lakesdk_engine(t: Any) -> str:
    """The engine lakesdk picks for driver-side data under its defaults (``engine="auto"``)."""
    from lakesdk.table.write import WriteOperation
    return WriteOperation(t, "upsert", None)._engine()


def warm_up(spark: Any, root: str, rows: int) -> None:
    """A small bulk insert + upsert + every read + compaction on every engine, twice for
    lakesdk (imports, JIT, thread pools, the marker server)."""
    import hudi

    import lakesdk as lk
    base, upd = make_data(rows, seed=7)
    lake = lk.Lake(os.path.join(root, "lake"), spark=spark)
    for i in range(2):
        for kind in ("mor", "cow"):
            t = lake.create_table(f"warm_{kind}{i}", key="id", ordering="ts", table_type=kind)
            t.bulk_insert(base)
            t.upsert(upd)
            t.read().to_arrow()
            if kind == "mor":
                t.read(read_optimized=True).to_arrow()
                hudi.HudiTableBuilder.from_base_uri(t.path).build().read()
                t.maintenance.compact()
                t.read().to_arrow()
    warm_up_deltalake(root, base, upd)


def _check_write(res: Results, label: str, r: Any, *, inserted: int = 0, updated: int = 0) -> None:
    if r.inserted != inserted or r.updated != updated:
        res.errors.append(f"{label}: inserted={r.inserted} updated={r.updated}, "
                          f"expected inserted={inserted} updated={updated}")


def run_mor(res: Results, spark: Any, base: pa.Table, upd: pa.Table, root: str, exp_ts: np.ndarray,
            rep: int) -> tuple[pa.Table, Any]:
    """MOR bulk insert, upsert, reads (snapshot, read-optimized, hudi-rs), compaction, read.
    Returns the snapshot read before the compaction and the hudi-rs read."""
    import hudi

    import lakesdk as lk
    n = base.num_rows
    lake = lk.Lake(os.path.join(root, "lake"), spark=spark)
    t = lake.create_table(f"m{rep}", key="id", ordering="ts", table_type="mor")
    res.info["engine"] = _lakesdk_engine(t)
    s, r = timed(lambda: t.bulk_insert(base))
    res.time("mor_bulk", s)
    _check_write(res, "lakesdk MOR bulk_insert", r, inserted=n)
    res.info["mor_file_groups"] = r.files
    res.info["mor_base_bytes"] = r.bytes
    with PeakRSS() as mem:
        s, r = timed(lambda: t.upsert(upd))
    res.time("mor_upsert", s)
    res.mem("mor_upsert", mem.growth, mem.peak)
    _check_write(res, "lakesdk MOR upsert", r, updated=upd.num_rows)
    res.info["mor_log_files"] = r.files
    res.info["mor_log_bytes"] = r.bytes
    if r.action != "deltacommit":
        res.errors.append(f"lakesdk MOR upsert: a {r.action}, expected a deltacommit")

    s, snap = best_of(READS, lambda: t.read().to_arrow())
    res.time("mor_read", s)
    res.errors += check_table("lakesdk MOR snapshot", snap, n, exp_ts, upd)
    s, ro = best_of(READS, lambda: t.read(read_optimized=True).to_arrow())
    res.time("mor_ro_read", s)
    base_ts = expected_ts(base, upd.slice(0, 0))
    res.errors += check_read_optimized("lakesdk MOR read-optimized (before compaction)", ro, n, base_ts)
    s, hb = best_of(READS, lambda: hudi.HudiTableBuilder.from_base_uri(t.path).build().read())
    res.time("hudi_rs_read", s)
    res.errors += check_table("hudi-rs read of the lakesdk MOR table", hb, n, exp_ts, upd)

    s, c = timed(lambda: t.maintenance.compact())
    res.time("compaction", s)
    if c is None:
        res.errors.append("lakesdk MOR compaction: nothing to compact")
    else:
        res.info["compaction_files"] = c.files
        res.info["compaction_bytes"] = c.bytes
    logs = sum(t.inspect.file_groups()["log_files"].to_pylist())
    if logs:
        res.errors.append(f"lakesdk MOR compaction: {logs} log files remain in the latest slices")
    s, after = best_of(READS, lambda: t.read().to_arrow())
    res.time("mor_read_compacted", s)
    res.errors += check_table("lakesdk MOR snapshot after compaction", after, n, exp_ts, upd)
    res.errors += check_read_optimized("lakesdk MOR read-optimized (after compaction)",
                                       t.read(read_optimized=True).to_arrow(), n, exp_ts)
    s, hb2 = best_of(READS, lambda: hudi.HudiTableBuilder.from_base_uri(t.path).build().read())
    res.time("hudi_rs_read_compacted", s)
    res.errors += check_table("hudi-rs read of the compacted MOR table", hb2, n, exp_ts, upd)
    res.info["mor_bytes"] = du(t.path)
    return snap, hb


def run_mor_without_mdt(res: Results, spark: Any, base: pa.Table, upd: pa.Table, root: str, rep: int) -> None:
    """The MOR bulk insert and upsert without Hudi's metadata table (``metadata=False``): what
    keeping it (the default: its files partition and the column statistics of the log files) costs."""
    import lakesdk as lk
    lake = lk.Lake(os.path.join(root, "lake_nomdt"), spark=spark, options=lk.TableOptions(metadata=False))
    t = lake.create_table(f"m{rep}", key="id", ordering="ts", table_type="mor")
    res.time("mor_bulk_nomdt", timed(lambda: t.bulk_insert(base))[0])
    res.time("mor_upsert_nomdt", timed(lambda: t.upsert(upd))[0])


def run_cow(res: Results, spark: Any, base: pa.Table, upd: pa.Table, root: str, exp_ts: np.ndarray,
            rep: int) -> pa.Table:
    import lakesdk as lk
    n = base.num_rows
    lake = lk.Lake(os.path.join(root, "lake"), spark=spark)
    t = lake.create_table(f"c{rep}", key="id", ordering="ts", table_type="cow")
    s, r = timed(lambda: t.bulk_insert(base))
    res.time("cow_bulk", s)
    _check_write(res, "lakesdk COW bulk_insert", r, inserted=n)
    with PeakRSS() as mem:
        s, r = timed(lambda: t.upsert(upd))
    res.time("cow_upsert", s)
    res.mem("cow_upsert", mem.growth, mem.peak)
    _check_write(res, "lakesdk COW upsert", r, updated=upd.num_rows)
    res.info["cow_upsert_files"] = r.files
    res.info["cow_upsert_bytes"] = r.bytes
    s, snap = best_of(READS, lambda: t.read().to_arrow())
    res.time("cow_read", s)
    res.errors += check_table("lakesdk COW snapshot", snap, n, exp_ts, upd)
    return snap


# ---------------------------------------------------------------------------------- profile
def profile_mor(spark: Any, base: pa.Table, upd: pa.Table, root: str) -> None:
    """cProfile (driver) of one more MOR upsert, snapshot read and compaction on a fresh
    table, with lakesdk's thread pools made serial (so the wall times here are those of one
    thread).  Not part of the figures."""
    import lakesdk as lk
    lake = lk.Lake(os.path.join(root, "lake_profile"), spark=spark)
    t = lake.create_table("prof", key="id", ordering="ts", table_type="mor")
    t.bulk_insert(base)
    profile_serial("lakesdk MOR upsert", lambda: t.upsert(upd))
    profile_serial("lakesdk MOR snapshot read", lambda: t.read().to_arrow())
    profile_serial("lakesdk MOR compaction", lambda: t.maintenance.compact())


# ---------------------------------------------------------------------------------- report
def report(res: Results, args: argparse.Namespace) -> str:
    t, info = res.t, res.info

    def s(k: str) -> str:
        v = t.get(k)
        return "-" if v is None else f"{v:8.2f}"

    def r(a: str, b: str) -> str:
        return ratio(t.get(a), t.get(b))

    def mib(k: str) -> str:
        v = info.get(k)
        return "-" if v is None else f"{v / MiB:8.1f}"
    rows = [
        ("bulk insert (s)", s("mor_bulk"), "lakesdk COW bulk_insert", s("cow_bulk"), r("mor_bulk", "cow_bulk")),
        ("", "", "deltalake write_deltalake", s("delta_write"), r("mor_bulk", "delta_write")),
        ("upsert 10% (s)", s("mor_upsert"), "lakesdk COW upsert", s("cow_upsert"), r("mor_upsert", "cow_upsert")),
        ("", "", "deltalake merge", s("delta_merge"), r("mor_upsert", "delta_merge")),
        ("snapshot read after upsert (s)", s("mor_read"), "lakesdk COW read", s("cow_read"), r("mor_read", "cow_read")),
        ("", "", "deltalake to_pyarrow_table", s("delta_read"), r("mor_read", "delta_read")),
        ("", "", "hudi-rs read (MOR table)", s("hudi_rs_read"), r("mor_read", "hudi_rs_read")),
        ("", "", "lakesdk MOR read_optimized", s("mor_ro_read"), r("mor_read", "mor_ro_read")),
        ("bulk insert with the MDT (s)", s("mor_bulk"), "lakesdk MOR without", s("mor_bulk_nomdt"),
         r("mor_bulk", "mor_bulk_nomdt")),
        ("upsert with the MDT (s)", s("mor_upsert"), "lakesdk MOR without", s("mor_upsert_nomdt"),
         r("mor_upsert", "mor_upsert_nomdt")),
        ("compaction (s)", s("compaction"), "lakesdk COW upsert", s("cow_upsert"), r("compaction", "cow_upsert")),
        ("snapshot read after compaction (s)", s("mor_read_compacted"), "lakesdk COW read", s("cow_read"),
         r("mor_read_compacted", "cow_read")),
        ("", "", "hudi-rs read (compacted)", s("hudi_rs_read_compacted"),
         r("mor_read_compacted", "hudi_rs_read_compacted")),
        ("upsert peak RSS growth (MiB)", mib("mor_upsert_mem"), "lakesdk COW upsert", mib("cow_upsert_mem"),
         ratio(info.get("mor_upsert_mem"), info.get("cow_upsert_mem"))),
        ("", "", "deltalake merge", mib("delta_upsert_mem"),
         ratio(info.get("mor_upsert_mem"), info.get("delta_upsert_mem"))),
    ]
    head = ("", "lakesdk MOR", "peer", "peer", "MOR/peer")
    w = [max(len(x[i]) for x in rows + [head]) for i in range(5)]
    print(f"\nmerge-on-read benchmark: {res.rows:,} rows, update batch {int(res.rows * UPDATE_FRACTION):,} rows, "
          f"best of {args.repeat} round(s), reads best of {READS * args.repeat} (not partitioned), "
          f"lakesdk engine {info.get('engine')!r}, {os.cpu_count()} cores")
    print("  ".join(h.ljust(w[i]) for i, h in enumerate(head)))
    print("  ".join("-" * x for x in w))
    for x in rows:
        print("  ".join(c.ljust(w[i]) if i in (0, 2) else c.rjust(w[i]) for i, c in enumerate(x)))
    print(f"\nfiles/bytes: MOR {info.get('mor_file_groups')} file groups, base {info.get('mor_base_bytes', 0) / MiB:.1f} MiB; "
          f"upsert wrote {info.get('mor_log_files')} log files ({info.get('mor_log_bytes', 0) / MiB:.1f} MiB); "
          f"COW upsert rewrote {info.get('cow_upsert_files')} files ({info.get('cow_upsert_bytes', 0) / MiB:.1f} MiB); "
          f"compaction wrote {info.get('compaction_files')} files ({info.get('compaction_bytes', 0) / MiB:.1f} MiB)")
    print_load_and_rounds(res)
    c = t.get("compaction")
    return (f"mor: rows={res.rows} mor_upsert_vs_cow={r('mor_upsert', 'cow_upsert')} "
            f"mor_upsert_vs_deltalake={r('mor_upsert', 'delta_merge')} "
            f"mor_read_vs_cow={r('mor_read', 'cow_read')} "
            f"mor_read_vs_deltalake={r('mor_read', 'delta_read')} "
            f"mor_read_vs_hudi_rs={r('mor_read', 'hudi_rs_read')} "
            f"compaction_s={'n/a' if c is None else f'{c:.2f}'} "
            f"compaction_vs_cow_upsert={r('compaction', 'cow_upsert')} "
            f"mdt_bulk={r('mor_bulk', 'mor_bulk_nomdt')} mdt_upsert={r('mor_upsert', 'mor_upsert_nomdt')}")


# ---------------------------------------------------------------------------------- main
def main(argv: list[str] | None = None) -> int:
    ap = base_parser(__doc__)
    args = ap.parse_args(argv)
    n = row_count(ap, args)
    res = Results(rows=n)
    root = tempfile.mkdtemp(prefix="lakesdk-bench-mor-", dir=args.tmp)
    spark = None
    try:
        step(f"generating {n:,} rows + {int(n * UPDATE_FRACTION):,} updates")
        base, upd = make_data(n)
        exp_ts = expected_ts(base, upd)
        step("starting Spark and warming up every engine")
        spark = spark_session()
        warm_up(spark, os.path.join(root, "warm"), max(2_000, n // 20))
        load = OtherLoad()
        load.__enter__()
        for rep in range(args.repeat):
            step(f"round {rep + 1}/{args.repeat}: lakesdk MOR bulk_insert / upsert / reads / compaction")
            mor_snap, hudi_read = run_mor(res, spark, base, upd, root, exp_ts, rep)
            step(f"round {rep + 1}/{args.repeat}: lakesdk MOR bulk_insert / upsert without the metadata table")
            run_mor_without_mdt(res, spark, base, upd, root, rep)
            step(f"round {rep + 1}/{args.repeat}: lakesdk COW bulk_insert / upsert / read")
            cow_snap = run_cow(res, spark, base, upd, root, exp_ts, rep)
            res.errors += same_pairs("MOR snapshot vs COW snapshot, (id, ts)", mor_snap, cow_snap)
            res.errors += same_pairs("MOR snapshot vs hudi-rs read, (id, ts)", mor_snap, hudi_read)
            res.errors += same_rows("MOR snapshot vs COW snapshot, data columns", mor_snap, cow_snap)
            del mor_snap, hudi_read, cow_snap
            step(f"round {rep + 1}/{args.repeat}: deltalake write / merge / read")
            run_deltalake(res, base, upd, root, exp_ts, rep, reads=READS)
        load.__exit__()
        res.info["other_cores"] = load.cores
        if args.profile:
            step("profiling lakesdk MOR (not part of the figures)")
            profile_mor(spark, base, upd, root)
    finally:
        if spark is not None:
            spark.stop()
        shutil.rmtree(root, ignore_errors=True)
    return finish(res, report(res, args))

if __name__ == "__main__":
    sys.exit(main())
