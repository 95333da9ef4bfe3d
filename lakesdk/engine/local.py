"""The local engine: the same write tasks as the Spark jobs, run on the driver over Arrow
data with a thread pool (pyarrow releases the GIL for Parquet I/O and compute kernels).

Used for data that already lives in the driver (pandas, Arrow) when Spark runs locally:
the round trip through the JVM would cost more than the work itself.
"""

from __future__ import annotations

import os
import random
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, nullcontext
from dataclasses import replace
from itertools import count
from typing import Any, Callable, Iterable, Iterator, TypeVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakesdk import _faults as faults
from lakesdk._progress import progress as show_progress
from lakesdk.engine.global_index import STORED_PART, route_moves
from lakesdk.engine.group_write import cdc_marker, planned_group_file, write_group
from lakesdk.engine.key_index import (
    cpu_threads,
    incoming_keys,
    io_threads,
    pruned_key_index,
    read_key_index,
    slice_keys,
)
from lakesdk.engine.tasks import (
    STORED_ORDERING,
    FileGroupTarget,
    TaskInfo,
    WriteContext,
    base_file_footer,
    compact_file_slice,
    compacted_file,
    index_ordering_type,
    new_file_path,
    read_parquet,
    record_size,
    stored_ordering_type,
    write_new_file,
)
from lakesdk.format.commit_metadata import WriteStat
from lakesdk.format.file_naming import new_file_id
from lakesdk.merge.ordering import KEY, PART, ROW, SEQ, MergeCounts, combine_batch, positions_and_repeats

__all__ = ["LocalWriteJob", "compact_slices_local", "run_parallel", "run_ahead", "markers_meanwhile"]

FID = "_lk_fid"
T = TypeVar("T")
R = TypeVar("R")
_ATTEMPTS = count()
# the write token's "stage" of this process: several processes may write files of one
# instant (transactions, the Kafka sink), and their file names must not collide
_STAGE = (os.getpid() * 7919 + random.randrange(1 << 16)) % 1_000_000


def compact_slices_local(ctx: WriteContext, slice_ctx: Any, slices: list[Any], *, desc: str = "",
                         progress: Any = "auto") -> list[WriteStat]:
    """Compaction on the driver: every compacted file's marker in one request, then one
    task per file slice on the thread pool."""
    jobs = [(sl, TaskInfo(i, 0, i)) for i, sl in enumerate(slices)]
    if ctx.markers is not None and jobs:
        ctx.markers.create_many([compacted_file(ctx, sl, task) for sl, task in jobs])
        faults.crash_point("after_markers")
    unmarked = replace(ctx, markers=None)
    return run_parallel(lambda j: compact_file_slice(unmarked, slice_ctx, j[0], j[1]), jobs, desc=desc,
                        progress=progress)


def run_parallel(fn: Callable[[T], R], items: Iterable[T], *, desc: str = "", progress: Any = "auto",
                 threads: int | None = None) -> list[R]:
    """``[fn(i) for i in items]`` on a thread pool (``threads``, default: the cores, at most 8);
    a progress bar (``desc``) when it runs long."""
    items = list(items)
    if len(items) <= 1:
        return [fn(i) for i in items]
    with ThreadPoolExecutor(max_workers=max(1, min(threads or cpu_threads(), len(items)))) as pool:
        return list(show_progress(pool.map(fn, items), total=len(items), desc=desc, setting=progress))


#: files per write thread whose footers (key range, bloom filter) a bulk insert computes
#: first, while its markers are being created (at the default file size about 1.5 MB each)
_FOOTERS_AHEAD = 4


@contextmanager
def markers_meanwhile(ctx: WriteContext, planned: list[tuple[str, str, str]]) -> Iterator[WriteContext]:
    """The context of write tasks whose markers, ``planned``, are created in one request on
    a side thread meanwhile: a task reads and merges while the marker server waits for its
    batch interval, and waits for the markers only before it creates a file (``_mark``)."""
    def mark() -> None:
        ctx.markers.create_many(planned)
        faults.crash_point("after_markers")

    with ThreadPoolExecutor(max_workers=1) as side:
        created = side.submit(mark)
        yield replace(ctx, markers=None, markers_ready=created.result)
        created.result()   # (raised by a task first when it created a file)


def run_ahead(prepare: Callable[[T], Any], fn: Callable[[T, Any], R], items: Iterable[T], *, ahead: int,
              desc: str = "", progress: Any = "auto") -> list[R]:
    """``[fn(i, prepare(i)) for i in items]`` on the thread pool, ``prepare`` of the first
    ``ahead`` items per thread as tasks of their own before any ``fn`` starts."""
    items = list(items)
    threads = min(cpu_threads(), max(1, len(items)))
    with ThreadPoolExecutor(max_workers=threads) as pool:
        early = [pool.submit(prepare, it) for it in items[: ahead * threads]]

        def one(k: int) -> R:
            return fn(items[k], early[k].result() if k < len(early) else prepare(items[k]))
        futures = [pool.submit(one, k) for k in range(len(items))]
        try:
            return list(show_progress((f.result() for f in futures), total=len(futures), desc=desc,
                                      setting=progress))
        except BaseException:
            for f in futures:
                f.cancel()
            raise


def _strings(col: pa.ChunkedArray | pa.Array) -> pa.ChunkedArray | pa.Array:
    """A dictionary-encoded column decoded to plain strings (others as they are)."""
    return col.cast(pa.string()) if pa.types.is_dictionary(col.type) else col


def _task(i: int) -> TaskInfo:
    return TaskInfo(i, _STAGE, next(_ATTEMPTS), 0)


def _match_all(t: pa.Table, index: pa.Table, probe: Any = None, build: Any = None) -> tuple[pa.Table, pa.Array]:
    """Records of ``t`` repeated once per index row holding their key (kept once, with a null
    position, when none does), in input order, and the matching index positions.  ``probe``
    and ``build``: the values matched (default: the record keys of ``t`` and ``index``)."""
    left = pa.table({"_lk_i": pa.array(range(t.num_rows), pa.int64()),
                     "_lk_k": t.column(KEY) if probe is None else probe})
    right = pa.table({"_lk_k": index.column(KEY) if build is None else build,
                      "_lk_j": pa.array(range(index.num_rows), pa.int64())})
    j = left.join(right, keys="_lk_k", join_type="left outer").sort_by([("_lk_i", "ascending"), ("_lk_j", "ascending")])
    return t.take(j.column("_lk_i")), j.column("_lk_j").combine_chunks()


class LocalWriteJob:
    """One write of one instant over an Arrow table held by the driver."""

    def __init__(self, ctx: WriteContext, *, progress: Any = "auto") -> None:
        self.ctx = ctx
        self.progress = progress   # TableOptions.progress
        self.record_index: Any = None   # (slices, keys) -> the slices the record index names for the keys
        self.key_ranges: Any = None     # partitions -> (partition, base file name) -> record key range

    def prepare(self, arrow: pa.Table) -> pa.Table:
        return arrow

    def combine(self, t: pa.Table) -> pa.Table:
        return combine_batch(t, ordering=self.ctx.ordering, merge_mode=self.ctx.merge_mode,
                             column_groups=self.ctx.column_groups, merger=self.ctx.merger)

    def partitions(self, t: pa.Table) -> list[str]:
        return sorted(pc.unique(t.column(PART)).to_pylist())

    def key_index(self, slices: list[Any], slice_ctx: Any = None, data: pa.Table | None = None, *,
                  global_keys: bool = False) -> pa.Table:
        """The stored records of the keys of ``data`` in ``slices``, found through the base
        files' key ranges and bloom filters (:func:`~lakesdk.engine.key_index.pruned_key_index`);
        without ``data``, every record key of ``slices``.  In the full index ``_lk_fid`` and
        ``_hoodie_partition_path`` are dictionary-encoded over one dictionary of every slice
        (an int32 per key instead of a copy of the file id string: at 10M keys that is 40 MB
        instead of 400 MB)."""
        otype = index_ordering_type(self.ctx) if global_keys else stored_ordering_type(self.ctx)
        ordering = (self.ctx.ordering, otype) if otype is not None and self.ctx.ordering else None
        named = bool(data is not None and slices and self.record_index is not None)
        if data is not None and named:
            slices = self.record_index(slices, data.column(KEY))
            if not slices:
                return read_key_index(self.ctx.storage, [], None, ordering)
        if data is not None and slices:
            keys = incoming_keys(data.column(KEY), None if global_keys else data.column(PART))
            ranges = self.key_ranges({sl.partition for sl in slices}) \
                if self.key_ranges is not None and not named else None
            return pruned_key_index(self.ctx.storage, slices, keys, slice_ctx=slice_ctx, ordering=ordering,
                                    map_fn=lambda fn, items: run_parallel(fn, items, desc="reading keys",
                                                                          progress=self.progress,
                                                                          threads=io_threads(self.ctx.storage)),
                                    ranges=ranges, footers=not named)
        if not slices:
            return read_key_index(self.ctx.storage, [], None, ordering)
        fids = pa.array([sl.file_id for sl in slices], pa.string())
        part_names = sorted({sl.partition for sl in slices})
        parts = pa.array(part_names, pa.string())
        part_code = {p: i for i, p in enumerate(part_names)}

        def one(i: int) -> pa.Table:
            sl = slices[i]
            if ordering is not None:
                keys, ordv = slice_keys(self.ctx.storage, sl, slice_ctx, ordering)
            else:
                keys = read_key_index(self.ctx.storage, [sl], slice_ctx).column(KEY) if sl.log_files else \
                    read_parquet(self.ctx.storage, sl.base_path, [KEY]).column(KEY)
            n = len(keys)
            # the row of each key in the base file (not for slices with logs: merged order)
            row = pa.nulls(n, pa.int32()) if sl.log_files else pa.array(np.arange(n, dtype=np.int32))
            cols = {
                KEY: keys,
                PART: pa.DictionaryArray.from_arrays(pa.array(np.full(n, part_code[sl.partition], np.int32)), parts),
                FID: pa.DictionaryArray.from_arrays(pa.array(np.full(n, i, np.int32)), fids),
                ROW: row,
            }
            if ordering is not None:
                cols[STORED_ORDERING] = ordv
            return pa.table(cols)
        tables = run_parallel(one, range(len(slices)), desc="reading keys", progress=self.progress,
                              threads=io_threads(self.ctx.storage))
        return pa.concat_tables(tables)

    def tag(self, t: pa.Table, index: pa.Table, *, global_keys: bool = False) -> pa.Table:
        """Set ``_lk_fid`` for records whose key is in the index (null otherwise).  A key stored
        more than once (an insert or bulk insert of a stored key) tags its record once per
        stored copy, as Hudi's index does: the update or delete applies to every copy."""
        if index.num_rows == 0:
            return self.untagged(t)
        if global_keys:   # a key may live in several partitions: one record per copy, each deleted
            t, pos = _match_all(t, index)
        else:
            if not self.ctx.partition_fields:
                probe, build = t.column(KEY), index.column(KEY)
            else:
                probe = pc.binary_join_element_wise(t.column(PART), t.column(KEY), "\x1f")
                build = pc.binary_join_element_wise(_strings(index.column(PART)), index.column(KEY), "\x1f")
            pos_np, repeats = positions_and_repeats(probe, build)
            if repeats:   # a key being written is stored twice
                t, pos = _match_all(t, index, probe, build)
            else:
                pos = pa.array(pos_np, mask=pos_np < 0)
        fid = _strings(index.column(FID).take(pos))
        t = t.drop_columns([c for c in (FID, ROW, STORED_ORDERING) if c in t.column_names])
        t = t.append_column(FID, fid)
        if ROW in index.column_names:   # merge_into_base finds the stored rows without hashing again
            t = t.append_column(ROW, index.column(ROW).take(pos))
        if STORED_ORDERING in index.column_names:   # merge-on-read: what the log write compares with
            t = t.append_column(STORED_ORDERING, index.column(STORED_ORDERING).take(pos))
        if global_keys:
            part = _strings(index.column(PART).take(pos))
            t = t.set_column(t.column_names.index(PART), PART, pc.coalesce(part, t.column(PART)))
        return t

    def tag_global(self, t: pa.Table, index: pa.Table) -> pa.Table:
        """Global index: records whose key is stored in another partition move there or stay,
        by the table's ordering (:func:`~lakesdk.engine.global_index.route_moves`); ``index``
        holds the stored records of the keys in every partition."""
        if index.num_rows == 0:
            return self.untagged(t)
        t, pos = _match_all(t, index)
        t = t.drop_columns([c for c in (FID, ROW, STORED_ORDERING, STORED_PART) if c in t.column_names])
        t = t.append_column(FID, _strings(index.column(FID).take(pos)))
        t = t.append_column(STORED_PART, _strings(index.column(PART).take(pos)))
        for c in (ROW, STORED_ORDERING):
            if c in index.column_names:
                t = t.append_column(c, index.column(c).take(pos))
        out = route_moves(t, ordering=self.ctx.ordering, merge_mode=self.ctx.merge_mode,
                          update_partition_path=self.ctx.update_partition_path)
        if STORED_ORDERING in out.column_names and stored_ordering_type(self.ctx) is None:
            out = out.drop_columns([STORED_ORDERING])   # copy-on-write: the merge reads the stored values
        return out

    def untagged(self, t: pa.Table) -> pa.Table:
        if FID in t.column_names:
            t = t.drop_columns([FID])
        return t.append_column(FID, pa.nulls(t.num_rows, pa.string()))

    def drop_untagged_deletes(self, t: pa.Table) -> pa.Table:
        """Deletes of keys the table does not hold have nothing to do."""
        if t.num_rows == 0 or pc.all(pc.equal(t.column("_lk_op"), 0)).as_py():
            return t
        return t.filter(pc.or_(pc.is_valid(t.column(FID)), pc.equal(t.column("_lk_op"), 0)))

    def only_tagged(self, t: pa.Table) -> pa.Table:
        return t.filter(pc.is_valid(t.column(FID)))

    def untagged_counts(self, t: pa.Table) -> dict[str, int]:
        ins = t.filter(pc.is_null(t.column(FID)))
        if ins.num_rows == 0:
            return {}
        vc = pc.value_counts(ins.column(PART))
        return {v["values"].as_py(): v["counts"].as_py() for v in vc}

    def assign_inserts(self, t: pa.Table, buckets: dict[str, list[tuple[str, float]]]) -> pa.Table:
        """Untagged records of a partition go, in arrival order, to its buckets by weight."""
        if not buckets or t.num_rows == 0:
            return t
        null = np.asarray(pc.is_null(t.column(FID)).to_numpy(zero_copy_only=False), dtype=bool)
        if not null.any():
            return t
        code = np.full(t.num_rows, -1, dtype=np.int64)   # index into ``names`` per untagged row
        names: list[str] = []
        for part, bs in buckets.items():
            in_part = np.asarray(pc.equal(t.column(PART), pa.scalar(part, pa.string()))
                                 .to_numpy(zero_copy_only=False), dtype=bool)
            rows = np.nonzero(null & in_part)[0]
            if not len(rows):
                continue
            cum = np.cumsum([w for _, w in bs])
            frac = (np.arange(len(rows)) + 0.5) / len(rows)
            which = np.minimum(np.searchsorted(cum, frac, side="right"), len(bs) - 1)
            code[rows] = len(names) + which
            names.extend(f for f, _ in bs)
        if not names:
            return t
        assigned = pa.array(names, pa.string()).take(pa.array(code, mask=code < 0))
        return t.set_column(t.column_names.index(FID), FID, pc.coalesce(t.column(FID), assigned))

    def write_groups(self, t: pa.Table) -> tuple[list[WriteStat], MergeCounts]:
        ctx = self.ctx
        enc = pc.dictionary_encode(t.column(FID)).combine_chunks()
        codes = np.asarray(enc.indices.to_numpy(zero_copy_only=False))
        order = np.argsort(codes, kind="stable")
        bounds = np.flatnonzero(np.diff(codes[order])) + 1
        groups = np.split(order, bounds)
        names = enc.dictionary.to_pylist()
        body = t.drop_columns([FID])
        parts = t.column(PART)
        jobs = []
        for i, idx in enumerate(groups if t.num_rows else []):
            fid = names[codes[idx[0]]]
            target = ctx.targets.get(fid) or FileGroupTarget(parts[int(idx[0])].as_py(), fid)
            jobs.append((target, idx, _task(i)))
        # every marker in one request, before any data file exists (a merge-on-read file group
        # holding a key twice gets a base file: group_write, told by the records' arrival numbers);
        # the tasks read and merge while it waits for the marker server
        planned = []
        if ctx.markers is not None and jobs:
            seqs = body.select([c for c in (SEQ,) if c in body.column_names])
            planned = [planned_group_file(ctx, tg, seqs.take(pa.array(idx)), task) for tg, idx, task in jobs]
            # a rewrite of a base file may log its changes beside it (CDC on)
            planned += [cdc_marker(ctx, part, tg.file_id, task) for (part, _, io), (tg, _, task) in zip(planned, jobs)
                        if ctx.cdc_mode and io == "MERGE"]
        with markers_meanwhile(ctx, planned) if planned else nullcontext(replace(ctx, markers=None)) as unmarked:
            def one(job: tuple[FileGroupTarget, np.ndarray, TaskInfo]) -> tuple[WriteStat, MergeCounts]:
                target, idx, task = job
                return write_group(unmarked, target, body.take(pa.array(idx)), task)

            results = run_parallel(one, jobs, desc=f"writing {ctx.instant}", progress=self.progress)
        total = MergeCounts()
        for _, c in results:
            total += c
        return [s for s, _ in results], total

    def write_new(self, t: pa.Table) -> list[WriteStat]:
        """Bulk insert: rows of each partition split into files of the target size, in parallel."""
        ctx = self.ctx
        if t.num_rows == 0:   # an overwrite whose rows were all flagged deletes
            return []
        per_file = max(1, ctx.target_file_bytes // record_size(ctx, t))
        chunks: list[pa.Table] = []
        if ctx.partition_fields:
            for p in pc.unique(t.column(PART)).to_pylist():
                sub = t.filter(pc.equal(t.column(PART), p))
                chunks.extend(sub.slice(o, per_file) for o in range(0, sub.num_rows, per_file))
        else:
            # split evenly across the threads too (files of 100,000 rows at least), so every core writes
            n = max(-(-t.num_rows // per_file), min(cpu_threads(), max(1, t.num_rows // 100_000)))
            size = -(-t.num_rows // n)
            chunks = [t.slice(o, size) for o in range(0, t.num_rows, size)]
        jobs = [(c.column(PART)[0].as_py() if c.num_rows else "", new_file_id(), c, _task(i))
                for i, c in enumerate(chunks) if c.num_rows]
        planned = [(p, new_file_path(ctx, p, fid, task).rsplit("/", 1)[-1], "CREATE") for p, fid, _, task in jobs]
        # every marker in one request, before any data file exists; the files' footers (most of
        # the work besides the Parquet writes) are computed meanwhile
        with markers_meanwhile(ctx, planned) if ctx.markers is not None and jobs else \
                nullcontext(replace(ctx, markers=None)) as unmarked:
            return run_ahead(lambda j: base_file_footer(unmarked, j[2].column(KEY)),
                             lambda j, footer: write_new_file(unmarked, j[0], j[1], j[2], j[3], footer=footer),
                             jobs, ahead=_FOOTERS_AHEAD, desc=f"writing {ctx.instant}", progress=self.progress)

    def tagged_file_ids(self, t: pa.Table, fids: set[str]) -> set[str]:
        """Which of ``fids`` the tagged incoming records update or delete."""
        col = t.column(FID)
        return set(pc.unique(col.filter(pc.is_in(col, value_set=pa.array(sorted(fids), pa.string())))).to_pylist())

    def release(self, t: Any) -> None:
        pass
