"""Key index benchmark: an upsert of 10,000 existing keys into a small and a 10x larger table.

    python bench/index.py [--quick] [--small N] [--repeat R] [--no-baseline] [--tmp DIR] [--index KIND]

The cost of an upsert should follow the keys it touches, not the size of the table.  For
each key kind and size (default 1,000,000 and 10,000,000 rows; ``--quick``: 100,000 and
1,000,000), one process:

1. bulk-inserts N rows into a new non-partitioned copy-on-write table
   (``create_table(..., key=K, ordering="ts")``; the local engine) whose files are sized
   ``--file-size`` MiB (default 8: a copy-on-write upsert rewrites the file group it touches,
   and at Hudi's 120 MiB a narrow table of 1M rows is smaller than one file while one of 10M
   holds files of 5M rows, so the growth would measure the rewritten file, not the index):
   ``seq`` keys are ids
   that grow (``id`` int64, written in id order: keys clustered in time), ``uuid`` keys are
   random UUID strings (``uuid``: every file's key range spans nearly all keys);
2. upserts the 10,000 most recently written rows (existing keys, all in one file group)
   with a higher ``ts``, ``--repeat`` times (default 3) with each engine: the local engine
   (``engine="local"``) and Spark (``engine="spark"``, the same Arrow batch).  Before each
   timed upsert the process forgets the footers it cached, so every upsert reads the base
   files' footers (key range and bloom filter) from disk: a cold index.  The best time
   counts; one more upsert with the footers cached is reported as ``warm``;
3. for the local engine, the same upsert with the index of every stored key (the path before
   the footers were used, and the one base files without footers take) as the baseline;
4. checks every write's counts (updated = 10,000, inserted = 0) and, after the last upsert,
   the whole table: N rows, every id once, the upserted rows with the last ``ts``, every
   other row with its original one; then that the ``hudi`` reader (PyPI ``hudi``, Apache
   Hudi's Rust reader) reads the same: N rows, every id once, each id with the ``ts`` lakesdk
   reads.  A failed check prints the errors and exits 1 without a summary line.

The last line printed is the summary::

    index: rows=N1/N2 local_seq_s=A/B local_uuid_s=.. spark_seq_s=.. spark_uuid_s=..
           growth_seq=X growth_uuid=Y ... baseline_growth_seq=.. baseline_growth_uuid=..
           local_seq_cpu_s=.. growth_seq_local_cpu=.. ... bulk_seq_s=.. bulk_uuid_s=..

(times are the best upsert at each size; ``growth_*`` = time at N2 / time at N1, the larger
of the two engines'; the target is <= 1.5 for 10x the rows).  ``local_*_cpu_s`` and
``growth_*_local_cpu`` are the same for the CPU seconds of this process (the local engine's
whole work: less skewed than wall time when other processes share the cores).
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
from typing import Any, Callable

import numpy as np
import pyarrow as pa

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import OtherLoad, Results, finish, spark_session, step  # noqa: E402

ID_BASE = 1_000_000_000
TS_BASE = 1_700_000_000_000_000
TOUCHED = 10_000
MIB = 1024 * 1024
#: the tables' target file size: small enough that both sizes hold several full files, so the
#: upserted file group has as many rows in the larger table as in the smaller one
FILE_SIZE = 8 * MIB
KINDS = ("seq", "uuid")


def uuids(n: int, rng: np.random.Generator) -> pa.Array:
    """``n`` random version-4 UUID strings, built in numpy."""
    raw = rng.integers(0, 256, (n, 16), dtype=np.uint8)
    raw[:, 6] = (raw[:, 6] & 0x0F) | 0x40
    raw[:, 8] = (raw[:, 8] & 0x3F) | 0x80
    hexd = np.frombuffer(b"0123456789abcdef", np.uint8)
    digits = np.empty((n, 32), np.uint8)
    digits[:, 0::2] = hexd[raw >> 4]
    digits[:, 1::2] = hexd[raw & 0x0F]
    out = np.full((n, 36), ord("-"), np.uint8)
    for a, b, c in ((0, 8, 0), (9, 13, 8), (14, 18, 12), (19, 23, 16), (24, 36, 20)):
        out[:, a:b] = digits[:, c: c + (b - a)]
    offsets = pa.py_buffer((np.arange(n + 1, dtype=np.int32) * 36).tobytes())
    return pa.StringArray.from_buffers(n, offsets, pa.py_buffer(out.tobytes()))


def make_rows(n: int, kind: str, seed: int = 42) -> pa.Table:
    rng = np.random.default_rng(seed)
    ids = np.arange(n, dtype=np.int64) + ID_BASE
    cols: dict[str, Any] = {"id": pa.array(ids)}
    if kind == "uuid":
        cols["uuid"] = uuids(n, rng)
    cols["ts"] = pa.array(TS_BASE + rng.integers(0, 1_000_000, n, dtype=np.int64))
    cols["fare"] = pa.array(np.round(rng.gamma(2.0, 12.5, n), 2))
    return pa.table(cols)


def update_batch(base: pa.Table, round_no: int) -> pa.Table:
    """The last ``TOUCHED`` rows written, with a ``ts`` above every earlier one."""
    upd = base.slice(base.num_rows - TOUCHED, TOUCHED)
    ts = pa.array(TS_BASE + 10_000_000 * (round_no + 1) + np.arange(TOUCHED, dtype=np.int64))
    return upd.set_column(upd.column_names.index("ts"), "ts", ts)


def ts_by_id(label: str, reader: str, ids: np.ndarray, ts: np.ndarray, n: int) -> tuple[np.ndarray | None, list[str]]:
    """The ``ts`` of each id (by ``id - ID_BASE``) as ``reader`` read them, and what is wrong
    with the rows (a count other than ``n``, an id out of range, read twice or missing)."""
    errs = []
    if ids.size != n:
        errs.append(f"{label}: {reader} reads {ids.size} rows, expected {n}")
    pos = ids - ID_BASE
    if pos.size and (pos.min() < 0 or pos.max() >= n):
        return None, errs + [f"{label}: {reader} reads ids out of range"]
    counts = np.bincount(pos, minlength=n)
    if (counts > 1).any():
        errs.append(f"{label}: {reader} reads {int((counts > 1).sum())} ids more than once")
    if (counts == 0).any():
        errs.append(f"{label}: {reader} misses {int((counts == 0).sum())} ids")
    out = np.zeros(n, np.int64)
    out[pos] = ts
    return out, errs


def check_table(label: str, t: Any, base: pa.Table, last_ts: np.ndarray) -> tuple[list[str], np.ndarray | None]:
    """Every id once, with its original ``ts`` or (the upserted rows) the last one, as lakesdk
    reads the table; and the ``ts`` by id it read."""
    got = t.read(columns=["id", "ts"]).to_arrow()
    n = base.num_rows
    ts, errs = ts_by_id(label, "lakesdk", got.column("id").to_numpy(), got.column("ts").to_numpy(), n)
    if ts is None:
        return errs, None
    want = base.column("ts").to_numpy().copy()
    want[n - TOUCHED:] = last_ts
    bad = np.flatnonzero(want != ts)
    if bad.size:
        errs.append(f"{label}: {bad.size} rows with a wrong ts (e.g. id {bad[0] + ID_BASE})")
    return errs, ts


def check_hudi(label: str, path: str, n: int, lakesdk_ts: np.ndarray | None) -> list[str]:
    """The ``hudi`` reader (PyPI ``hudi``, Apache Hudi's Rust reader) reads the table at ``path``
    with the rows lakesdk reads: ``n`` rows, every id once, each id's ``ts`` the same (the ids
    and ts columns only, batch by batch)."""
    try:
        import hudi
    except ImportError:
        return [f"{label}: the hudi reader (PyPI hudi) is not installed"]
    opts = hudi.HudiReadOptions().with_projection(["id", "ts"])
    ids, ts = [], []
    for b in hudi.HudiTableBuilder.from_base_uri(path).build().read_stream(opts):
        ids.append(b.column("id").to_numpy())
        ts.append(b.column("ts").to_numpy())
    got, errs = ts_by_id(label, "hudi", np.concatenate(ids) if ids else np.zeros(0, np.int64),
                         np.concatenate(ts) if ts else np.zeros(0, np.int64), n)
    if got is not None and lakesdk_ts is not None:
        bad = np.flatnonzero(got != lakesdk_ts)
        if bad.size:
            errs.append(f"{label}: hudi reads {bad.size} rows with another ts than lakesdk (e.g. id {bad[0] + ID_BASE})")
    return errs


def full_index(job: Any, slices: list[Any], slice_ctx: Any = None, data: Any = None, *, global_keys: bool = False) -> Any:
    """The key index of every stored key (the baseline: what the index read before)."""
    return _ORIGINAL(job, slices, slice_ctx)


_ORIGINAL: Callable[..., Any] = lambda *a, **k: None   # noqa: E731 - set in main()


def run_size(res: Results, spark: Any, root: str, n: int, kind: str, repeat: int, baseline: bool,
             index: str | None = None, file_size: int = FILE_SIZE) -> None:
    import lakesdk as lk
    from lakesdk.engine.footers import clear_footer_cache
    from lakesdk.engine.local import LocalWriteJob

    key = "id" if kind == "seq" else "uuid"
    base = make_rows(n, kind)
    lake = lk.Lake(os.path.join(root, f"{kind}{n}"), spark=spark,
                   options=lk.TableOptions(engine="local", target_file_size=file_size))
    t = lake.create_table("t", key=key, ordering="ts", index=index)
    s0 = time.perf_counter()
    r = t.bulk_insert(base)
    res.info[f"bulk_{kind}_{n}"] = time.perf_counter() - s0
    res.info[f"files_{kind}_{n}"] = r.files
    step(f"{kind} {n:,} rows: bulk insert {res.info[f'bulk_{kind}_{n}']:.2f}s, {r.files} files")
    spark_t = lk.Lake(os.path.join(root, f"{kind}{n}"), spark=spark,
                      options=lk.TableOptions(engine="spark", target_file_size=file_size)).table("t")
    rounds = 0
    last = None
    cpu: dict[str, float] = {}

    def upsert(label: str, handle: Any, cold: bool = True) -> float:
        nonlocal rounds, last
        upd = update_batch(base, rounds)
        rounds += 1
        if cold:
            clear_footer_cache()
        s, c = time.perf_counter(), time.process_time()
        w = handle.upsert(upd)
        took = time.perf_counter() - s
        cpu[label.split(" ")[0]] = time.process_time() - c
        if w.updated != TOUCHED or w.inserted != 0:
            res.errors.append(f"{label}: updated={w.updated} inserted={w.inserted}, expected {TOUCHED} and 0")
        last = upd.column("ts").to_numpy()
        return took

    for engine, handle in (("local", t), ("spark", spark_t)):
        for _ in range(repeat):
            res.time(f"{engine}_{kind}_{n}", upsert(f"{engine} {kind} {n}", handle))
            res.time(f"cpu_{engine}_{kind}_{n}", cpu[engine])
        res.info[f"warm_{engine}_{kind}_{n}"] = upsert(f"{engine} {kind} {n} warm", handle, cold=False)
        step(f"  {engine}: best {min(res.samples[f'{engine}_{kind}_{n}']):.3f}s "
             f"(rounds {'/'.join(f'{x:.3f}' for x in res.samples[f'{engine}_{kind}_{n}'])}), "
             f"warm {res.info[f'warm_{engine}_{kind}_{n}']:.3f}s")
    if baseline:
        LocalWriteJob.key_index = full_index   # type: ignore[method-assign]
        try:
            for _ in range(repeat):
                res.time(f"baseline_{kind}_{n}", upsert(f"baseline {kind} {n}", t))
                res.time(f"cpu_baseline_{kind}_{n}", cpu["baseline"])
        finally:
            LocalWriteJob.key_index = _ORIGINAL   # type: ignore[method-assign]
        step(f"  baseline (every key read): best {min(res.samples[f'baseline_{kind}_{n}']):.3f}s")
    assert last is not None
    errs, ts = check_table(f"{kind} {n}", t, base, last)
    res.errors += errs + check_hudi(f"{kind} {n}", t.path, n, ts)
    shutil.rmtree(os.path.join(root, f"{kind}{n}"), ignore_errors=True)


def warm_up(spark: Any, root: str) -> None:
    """Imports, thread pools, the Spark session's first jobs."""
    for kind in KINDS:
        res = Results(0)
        run_size(res, spark, os.path.join(root, "warm"), 20_000, kind, 1, False)


def main() -> int:
    global _ORIGINAL
    import argparse
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="100,000 and 1,000,000 rows (default 1M and 10M)")
    ap.add_argument("--small", type=int, default=None, help="the smaller table's rows (the larger: 10x)")
    ap.add_argument("--repeat", type=int, default=3, help="timed upserts per engine and size (best counts)")
    ap.add_argument("--no-baseline", action="store_true", help="skip the upserts with the full key index")
    ap.add_argument("--tmp", default=None, help="parent folder for the temporary tables")
    ap.add_argument("--index", default=None, help="the tables' index (create_table(index=...)): record, global, ...")
    ap.add_argument("--file-size", type=float, default=FILE_SIZE / MIB,
                    help=f"the tables' target file size in MiB (default {FILE_SIZE // MIB}; Hudi's default: 120)")
    args = ap.parse_args()
    small = args.small or (100_000 if args.quick else 1_000_000)
    if small < 2 * TOUCHED or args.repeat < 1:
        ap.error(f"--small must be >= {2 * TOUCHED} and --repeat >= 1")
    sizes = (small, small * 10)
    from lakesdk.engine.local import LocalWriteJob
    _ORIGINAL = LocalWriteJob.key_index
    root = tempfile.mkdtemp(prefix="lakesdk_index_", dir=args.tmp)
    res = Results(sizes[1])
    try:
        step("starting Spark")
        spark = spark_session()
        warm_up(spark, root)
        with OtherLoad() as load:
            for kind in KINDS:
                for n in sizes:
                    run_size(res, spark, root, n, kind, args.repeat, not args.no_baseline, args.index,
                             int(args.file_size * MIB))
        res.info["other_cores"] = load.cores
    finally:
        shutil.rmtree(root, ignore_errors=True)
    best = res.t

    def growth(prefix: str, kind: str) -> float | None:
        a, b = best.get(f"{prefix}_{kind}_{sizes[0]}"), best.get(f"{prefix}_{kind}_{sizes[1]}")
        return None if a is None or b is None else b / a

    busy = res.info["other_cores"]
    print(f"other processes kept {busy:.2f} of {os.cpu_count()} cores busy during the runs"
          + (" -- the machine was not quiet: figures are skewed" if busy > 0.2 else ""))
    fields = [f"rows={sizes[0]}/{sizes[1]}"]
    for engine in ("local", "spark"):
        for kind in KINDS:
            fields.append(f"{engine}_{kind}_s=" + "/".join(f"{best[f'{engine}_{kind}_{n}']:.3f}" for n in sizes))
    for kind in KINDS:
        g = [growth(e, kind) for e in ("local", "spark")]
        fields.append(f"growth_{kind}={max(x for x in g if x is not None):.2f}")
    for kind in KINDS:
        for e in ("local", "spark"):
            fields.append(f"growth_{kind}_{e}={growth(e, kind):.2f}")
    if not args.no_baseline:
        for kind in KINDS:
            fields.append(f"baseline_{kind}_s=" + "/".join(f"{best[f'baseline_{kind}_{n}']:.3f}" for n in sizes))
            fields.append(f"baseline_growth_{kind}={growth('baseline', kind):.2f}")
    for kind in KINDS:   # CPU seconds of this process: the local engine's work, less skewed by other load
        fields.append(f"local_{kind}_cpu_s=" + "/".join(f"{best[f'cpu_local_{kind}_{n}']:.3f}" for n in sizes))
        fields.append(f"growth_{kind}_local_cpu={growth('cpu_local', kind):.2f}")
        if not args.no_baseline:
            fields.append(f"baseline_growth_{kind}_cpu={growth('cpu_baseline', kind):.2f}")
    for kind in KINDS:
        fields.append(f"bulk_{kind}_s=" + "/".join(f"{res.info[f'bulk_{kind}_{n}']:.2f}" for n in sizes))
    return finish(res, "index: " + " ".join(fields))


if __name__ == "__main__":
    sys.exit(main())
