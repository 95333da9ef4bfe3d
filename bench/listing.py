"""Listing benchmark: planning from Hudi's metadata table vs listing storage, on slow storage.

    python bench/listing.py [--quick] [--partitions P] [--files-per-partition F] [--latency-ms MS]

Two copies of one table are built on local disk (``--partitions`` partitions, default 1,000
(``--quick``: 100), each with ``--files-per-partition`` base files, default 10, written by as
many bulk inserts): one keeps Hudi's metadata table (``TableOptions(metadata=True)``), the
other has none.  Each is then opened on ``LatencyStorage`` (bench/markers.py): every storage
operation sleeps ``--latency-ms`` (default 20 ms, an object-store round trip) and is counted,
and a recursive listing costs one round trip per 1,000 entries it returns, as an object
store's paginated LIST does; the calls the metadata table's reader makes below
``.hoodie/metadata`` are delayed and counted as well.  Calls a plan makes together (threads)
overlap, as their round trips do.  Timed: a first plan as a new handle makes it (caches
emptied: ``_cold``), then the best of three more as the same handle makes them:

* ``plan``: what a snapshot read and a write plan first: the timeline, then the file groups
  and latest slices of every partition (``FileSystemView(..., fresh=True).latest_slices()``,
  as a read plans), from the metadata table's ``files`` partition or from a listing of storage;
* the same on a table ten times smaller (``--partitions`` / 10), with the metadata table, to
  see how planning grows with the number of files;
* ``plan_upsert``: what an upsert of 1,000 existing keys (random ids, so in about 630 of the
  partitions) plans before it writes: the view, then the key index of its keys in their
  partitions' files, footers and keys read on the local engine's threads (as many as it takes
  for an object store, ``lakesdk.engine.key_index.io_threads``), with the record key ranges of
  the metadata table's ``column_stats`` when there is one (one run, the footer cache emptied).

The last line printed is the summary::

    listing: files=N plan_mdt_s=X plan_list_s=X speedup=X storage_calls_mdt=N storage_calls_list=N growth_mdt=X
             ... speedup_cold=X ... plan_upsert_mdt_s=X plan_upsert_list_s=X speedup_upsert=X

``speedup`` = plan_list_s / plan_mdt_s; ``growth_mdt`` = plan time with the metadata table at
N files / at N/10 files.  A warm plan of a table whose timeline has not changed takes the files
the process listed from its metadata table against that timeline (``lakesdk.read.view_cache``;
a listing of storage is not kept; a write's plan reads the timeline once more);
``speedup_cold`` compares the first plans, caches emptied.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from typing import Any, Callable

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import pyarrow as pa  # noqa: E402
from markers import LatencyStorage  # noqa: E402

import lakesdk as lk  # noqa: E402
from lakesdk.format.table_config import TableConfig  # noqa: E402
from lakesdk.read.view import FileSystemView  # noqa: E402
from lakesdk.timeline.store import TimelineStore  # noqa: E402


class PagedLatencyStorage(LatencyStorage):
    """LatencyStorage whose recursive listing costs one round trip per 1,000 entries, taken for
    the object store it stands for (not a local file system: calls that can overlap do)."""

    @property
    def is_local(self) -> bool:
        return False

    def find(self, rel: str = "", *args: Any, **kwargs: Any) -> Any:
        out = super().find(rel, *args, **kwargs)
        pages = max(1, -(-len(out) // 1000)) - 1
        if pages:
            with self._ops_lock:
                self.ops["find"] += pages
            time.sleep(self.latency_s * pages)
        return out


class ObjectStoreLatencyStorage(PagedLatencyStorage):
    """PagedLatencyStorage read as an object store is: Parquet footers and columns read through
    :meth:`open_input`, each file opened for reading one round trip (counted as a ``read``)."""

    def open_input(self, rel: str) -> Any:
        with self._ops_lock:
            self.ops["read"] += 1
        time.sleep(self.latency_s)
        return super().open_input(rel)


def build(root: str, partitions: int, files: int, metadata: bool) -> str:
    lake = lk.Lake(root, options=lk.TableOptions(engine="local", metadata=metadata))
    t = lake.create_table("t", key="id", partition_by="part", ordering="ts")
    for k in range(files):
        ids = list(range(k * partitions, (k + 1) * partitions))
        t.bulk_insert(pa.table({"id": ids, "part": [f"p{i:05d}" for i in range(partitions)], "ts": [k] * partitions,
                                "v": ["x"] * partitions}))
    return t.path


def forget() -> None:
    """Empty the process's caches of parsed timeline and metadata-table files (a cold plan)."""
    from lakesdk.read import metadata_table, view_cache
    from lakesdk.timeline import store
    view_cache.clear()
    with store._PARSED_LOCK:
        store._PARSED.clear()
        store._PARSED_WEIGHTS.clear()
        store._parsed_stats = 0
    metadata_table._DECODED.clear()
    metadata_table._BASES.clear()
    metadata_table._PREFIXED.clear()
    metadata_table._RAW.clear()


def plan(path: str, latency_s: float, scope: Callable[[str], bool] | None = None) -> tuple[float, float, int, int]:
    """(cold seconds, warm seconds, storage calls, file slices) of planning on slow storage: the
    first plan with the process's caches emptied, as a new handle makes it (``hoodie.properties``
    read, the timeline loaded, the files listed); then the best of three more as that handle
    makes them (its config and timeline store kept: the commit metadata it parsed, the metadata
    table's files it read)."""
    forget()
    runs = []
    storage = PagedLatencyStorage(path, latency_s)
    t0 = time.perf_counter()
    cfg = TableConfig.from_bytes(storage.read(".hoodie/hoodie.properties"))
    store = TimelineStore(storage, cfg)
    for _ in range(4):
        slices = FileSystemView(storage, cfg, store, store.load(), partitions=scope, fresh=True).latest_slices()
        runs.append((time.perf_counter() - t0, storage.total_ops, len(slices)))
        storage.reset()
        t0 = time.perf_counter()
    return runs[0][0], min(r[0] for r in runs[1:]), runs[-1][1], runs[-1][2]


def plan_upsert(path: str, latency_s: float, ids: list[int], partitions: int) -> tuple[float, int, int, int]:
    """(seconds, storage calls, stored records found, base files read) of planning an
    upsert of ``ids`` (existing keys) as the local engine plans it: the view, then the key index
    of the incoming keys in the slices of their partitions (footers and keys read on the engine's
    threads), with the record key ranges of the metadata table's ``column_stats`` when the view
    listed from it.  The process's footer cache is emptied first."""
    import pyarrow as pa

    from lakesdk.engine.footers import clear_footer_cache
    from lakesdk.engine.key_index import incoming_keys, io_threads, pruned_key_index
    from lakesdk.engine.local import run_parallel
    from lakesdk.table.write import _record_key_ranges
    keys = pa.array([str(i) for i in ids], pa.string())
    parts = pa.array([f"part=p{i % partitions:05d}" for i in ids], pa.string())
    wanted = set(parts.to_pylist())
    from lakesdk.read import view_cache
    clear_footer_cache()
    view_cache.clear()      # as before the view cache: the view listed again (the other caches kept)
    storage = ObjectStoreLatencyStorage(path, latency_s)
    reads: list[str] = []
    t0 = time.perf_counter()
    cfg = TableConfig.from_bytes(storage.read(".hoodie/hoodie.properties"))
    store = TimelineStore(storage, cfg)
    view = FileSystemView(storage, cfg, store, store.load())
    slices = [sl for sl in view.latest_slices() if sl.partition in wanted]
    ranges = _record_key_ranges(view)

    def counted(fn: Callable[[Any], Any], items: list[Any]) -> list[Any]:
        reads.extend(items)
        return run_parallel(fn, items, progress=False, threads=io_threads(storage))
    found = pruned_key_index(storage, slices, incoming_keys(keys, parts), map_fn=counted,
                             ranges=ranges(wanted) if ranges is not None else None)
    return time.perf_counter() - t0, storage.total_ops, found.num_rows, len(reads)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--partitions", type=int)
    ap.add_argument("--files-per-partition", type=int, default=10)
    ap.add_argument("--latency-ms", type=float, default=20.0)
    args = ap.parse_args(argv)
    parts = args.partitions or (100 if args.quick else 1000)
    per = args.files_per_partition
    latency_s = args.latency_ms / 1000.0
    root = tempfile.mkdtemp(prefix="lakesdk-listing-")
    try:
        t0 = time.perf_counter()
        with_mdt = build(os.path.join(root, "mdt"), parts, per, True)
        without = build(os.path.join(root, "list"), parts, per, False)
        small = build(os.path.join(root, "small"), max(1, parts // 10), per, True)
        print(f"listing: built {parts} partitions x {per} files (twice) and {max(1, parts // 10)} x {per} in "
              f"{time.perf_counter() - t0:.1f} s; storage latency {args.latency_ms:g} ms per call")
        one = next(iter(sorted({p for p in os.listdir(with_mdt) if p.startswith("part=")})))

        def scope(p: str) -> bool:
            return p == one
        mdt_cold, mdt_s, mdt_calls, n_mdt = plan(with_mdt, latency_s)
        list_cold, list_s, list_calls, n_list = plan(without, latency_s)
        small_cold, small_s, _, _ = plan(small, latency_s)
        one_cold, one_s, one_calls, n_one = plan(with_mdt, latency_s, scope)
        small_one_cold, small_one_s, _, _ = plan(small, latency_s, scope)
        import random
        ids = random.Random(7).sample(range(parts * per), 1000)
        up_mdt_s, up_mdt_calls, up_mdt_found, _ = plan_upsert(with_mdt, latency_s, ids, parts)
        up_list_s, up_list_calls, up_list_found, _ = plan_upsert(without, latency_s, ids, parts)
        if n_mdt != n_list or n_mdt != parts * per or n_one != per or up_mdt_found != up_list_found != len(ids):
            print(f"listing: the plans disagree: {n_mdt} slices from the metadata table, {n_list} from the listing, "
                  f"{parts * per} written, {n_one} in one partition ({per} written); the upsert's key index found "
                  f"{up_mdt_found} and {up_list_found} of {len(ids)} keys")
            return 1
        print(f"listing: whole table, cold (caches emptied) / warm: metadata table {mdt_cold:.3f} / {mdt_s:.3f} s "
              f"({mdt_calls} calls), listing {list_cold:.3f} / {list_s:.3f} s ({list_calls} calls), metadata table at "
              f"{max(1, parts // 10) * per} files {small_cold:.3f} / {small_s:.3f} s")
        print(f"listing: one partition ({one}), cold / warm: metadata table {one_cold:.3f} / {one_s:.3f} s "
              f"({one_calls} calls), at {max(1, parts // 10) * per} files {small_one_cold:.3f} / {small_one_s:.3f} s")
        print(f"listing: a 1,000-row upsert's plan (view and key index): metadata table {up_mdt_s:.3f} s "
              f"({up_mdt_calls} calls), listing {up_list_s:.3f} s ({up_list_calls} calls)")
        files = parts * per
        print(f"listing: files={files} plan_mdt_s={mdt_s:.3f} plan_list_s={list_s:.3f} speedup={list_s / mdt_s:.2f} "
              f"storage_calls_mdt={mdt_calls} storage_calls_list={list_calls} growth_mdt={mdt_s / small_s:.2f} "
              f"plan_mdt_cold_s={mdt_cold:.3f} plan_list_cold_s={list_cold:.3f} speedup_cold={list_cold / mdt_cold:.2f} "
              f"growth_mdt_cold={mdt_cold / small_cold:.2f} "
              f"plan_one_partition_s={one_s:.3f} growth_one_partition={one_s / small_one_s:.2f} "
              f"growth_one_partition_cold={one_cold / small_one_cold:.2f} plan_upsert_mdt_s={up_mdt_s:.3f} "
              f"plan_upsert_list_s={up_list_s:.3f} speedup_upsert={up_list_s / up_mdt_s:.2f} "
              f"storage_calls_upsert_mdt={up_mdt_calls} storage_calls_upsert_list={up_list_calls}")
        return 0
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
