"""The key index of a write, at a cost that follows the touched keys (Hudi's BLOOM index).

An upsert, a delete or a merge tags each incoming record with the file group that holds its
key.  For the file slices of the touched partitions, :func:`pruned_key_index` finds the
stored records of the *incoming* keys only:

1. the footer of every base file (:mod:`lakesdk.format.bloom`: ``hoodie_min_record_key`` /
   ``hoodie_max_record_key`` and the bloom filter ``org.apache.hudi.bloomfilter``) prunes the
   incoming keys of its partition by key range, then by the bloom filter;
2. only base files left with candidate keys have their record-key column read, and only
   the rows whose key is a candidate are kept: a bloom filter's false positives end there,
   so tags and counts are exact.

Base files without the footers (written by Hudi without a bloom filter, by an older
lakesdk, or with an empty key) have their keys read, as do file slices with log files
(merge-on-read: a key only in a log is in that file group); their rows are cut down to the
incoming keys too.  Footers are immutable with their file: a process-wide cache (bounded in
bytes) keeps the decoded ones, and a write puts the footers of the files it wrote there.

The index is one function of (file slices, incoming keys): with a record-level index (Hudi's
metadata table ``record_index`` partition) a lookup of the incoming keys first cuts the slices
down to the file groups it names (``job.record_index``, :mod:`lakesdk.read.record_lookup`),
leaving the tagging of both engines as it is.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Iterable, Mapping, TypeVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakesdk.engine.footers import footer_of
from lakesdk.engine.slice_reader import read_slice
from lakesdk.engine.tasks import STORED_ORDERING, read_parquet
from lakesdk.format.bloom import FooterIndex, KeyRange, KeySet
from lakesdk.merge.ordering import KEY, OP, OP_UPSERT, PART, ROW, Ordering, fields_of
from lakesdk.storage import Storage

__all__ = ["pruned_key_index", "incoming_keys", "untagged_upserts", "FID", "read_key_index", "slice_keys",
           "stored_ordering_values"]

FID = "_lk_fid"
#: a partition's incoming keys up to which the bloom filters are asked (each key's bit
#: positions are held, 30 x 4 bytes by Hudi's defaults); beyond, most files would be
#: candidates anyway and the key ranges alone prune
BLOOM_PROBE_KEYS = 100_000
#: a file's bloom filter is asked only when its candidate keys (after the key range) are at
#: most its rows / this: asking a key costs about what reading a stored key does, and a file
#: with that many candidates most likely holds some (its keys are read anyway)
BLOOM_PROBE_SHARE = 4
#: (partition, base file name) -> least and greatest record key (code point order) and row count
#: (None: unknown), from the metadata table's ``column_stats`` of ``_hoodie_record_key``
KeyRanges = Mapping[tuple[str, str], tuple[str, str, "int | None"]]
T = TypeVar("T")
R = TypeVar("R")

# ---------------------------------------------------------------------------------- incoming keys
def _array(a: pa.Array | pa.ChunkedArray) -> pa.Array:
    a = a.combine_chunks() if isinstance(a, pa.ChunkedArray) else a
    return a.cast(pa.string()) if a.type != pa.string() else a


def incoming_keys(keys: pa.ChunkedArray | pa.Array, parts: pa.ChunkedArray | pa.Array | None) -> dict[str | None, pa.Array]:
    """The distinct incoming keys by partition path (``parts`` None: one group, ``None``)."""
    if parts is None:
        return {None: _array(pc.unique(keys))}
    t = pa.table({PART: parts, KEY: keys})
    if pa.types.is_dictionary(t.schema.field(PART).type):
        t = t.set_column(0, PART, t.column(PART).cast(pa.string()))
    out: dict[str | None, pa.Array] = {}
    uniq = pc.unique(t.column(PART)).to_pylist()
    if len(uniq) == 1:
        out[uniq[0]] = _array(pc.unique(t.column(KEY)))
        return out
    t = t.sort_by([(PART, "ascending")])
    p = t.column(PART).combine_chunks()
    k = t.column(KEY).combine_chunks()
    cuts = np.flatnonzero(np.asarray(pc.not_equal(p[1:], p[:-1]).to_numpy(zero_copy_only=False), dtype=bool)) + 1 \
        if len(p) > 1 else np.zeros(0, np.int64)
    starts = [0, *cuts.tolist()]
    ends = [*cuts.tolist(), len(p)]
    for a, b in zip(starts, ends):
        out[p[a].as_py()] = _array(pc.unique(k.slice(a, b - a)))
    return out


# ---------------------------------------------------------------------------------- the index
#: threads that read footers and keys from an object store: each read mostly waits on a round
#: trip there, so more of them than cores overlap their waits
OBJECT_STORE_READ_THREADS = 16


def cpu_threads() -> int:
    """Threads for work that keeps a core busy: ``LAKESDK_THREADS``, else the cores; at most 8."""
    return max(1, min(8, int(os.environ.get("LAKESDK_THREADS", 0) or 0) or (os.cpu_count() or 2)))


def io_threads(storage: Storage) -> int:
    """Threads for the key index's reads on ``storage``: :func:`cpu_threads` on a local file
    system, where a read is CPU work; ``OBJECT_STORE_READ_THREADS`` on an object store, or
    ``LAKESDK_THREADS`` when set."""
    if storage.is_local:
        return cpu_threads()
    return max(1, int(os.environ.get("LAKESDK_THREADS", 0) or 0) or max(OBJECT_STORE_READ_THREADS, os.cpu_count() or 2))


def _map(fn: Callable[[T], R], items: Iterable[T], threads: int) -> list[R]:
    items = list(items)
    if len(items) <= 1:
        return [fn(i) for i in items]
    with ThreadPoolExecutor(max_workers=max(1, min(threads, len(items)))) as pool:
        return list(pool.map(fn, items))


def _candidates(fi: FooterIndex, keys: KeySet) -> np.ndarray | None:
    """Which incoming ``keys`` the file may hold (None: the footer cannot tell)."""
    if fi.range is None and not fi.has_bloom:
        return None
    mask = keys.in_range(fi.range) if fi.range is not None else np.ones(len(keys.keys), bool)
    worth = fi.rows is None or int(mask.sum()) * BLOOM_PROBE_SHARE <= fi.rows
    if fi.has_bloom and mask.any() and len(keys.keys) <= BLOOM_PROBE_KEYS and worth:
        bloom = fi.bloom
        if bloom is None:   # unreadable: the key range alone, if any
            return mask if fi.range is not None else None
        if keys.empty is not None:   # a file with a bloom filter holds no empty key
            mask = mask & ~keys.empty
            if not mask.any():
                return mask
        probe = keys.probe(bloom.vector_size, bloom.nb_hash)
        mask = bloom.might_contain(probe=probe, among=None if mask.all() else np.flatnonzero(mask))
    return mask


#: incoming keys x files up to which each file's key range is compared with every key of its
#: partition (Arrow, a comparison per key and file); beyond, the keys are sorted once and each
#: range is sought in them
RANGE_CHECK_BUDGET = 4_000_000


def _in_range_counts(mine: list[tuple[Any, pa.Array]], ranges: KeyRanges, sets: dict[str | None, KeySet],
                     everywhere: bool) -> dict[int, int]:
    """For the entries of ``mine`` (slice, its incoming keys) whose slice is a base file alone with
    a key range in ``ranges`` ((partition, file name) -> least and greatest record key, in code
    point order: the metadata table's ``column_stats`` of ``_hoodie_record_key``): how many of
    its incoming keys the range holds (0: none, exactly; else at least one, and never fewer than
    it holds: keys whose order the comparison cannot decide count as in).  ``sets``: the
    incoming keys by partition as :class:`KeySet` (under None with ``everywhere``)."""
    import bisect
    files: dict[str | None, list[tuple[int, str, str]]] = {}
    for i, (sl, _) in enumerate(mine):
        if sl.log_files or sl.base_file is None:
            continue
        r = ranges.get((sl.partition, sl.base_file.name))
        if r is not None:
            files.setdefault(None if everywhere else sl.partition, []).append((i, r[0], r[1]))
    out: dict[int, int] = {}
    for part, entries in files.items():
        ks = sets[part]
        if len(entries) * len(ks.keys) <= RANGE_CHECK_BUDGET:
            for i, lo, hi in entries:
                out[i] = int(ks.in_range(KeyRange(lo, hi)).sum())
            continue
        keys = sorted(x for x in ks.keys.to_pylist() if x is not None)
        for i, lo, hi in entries:
            out[i] = bisect.bisect_right(keys, hi) - bisect.bisect_left(keys, lo)
    return out


def _footers_from_ranges(mine: list[tuple[Any, pa.Array]], counts: dict[int, int], ranges: KeyRanges,
                         sets: dict[str | None, KeySet], everywhere: bool) -> dict[int, FooterIndex]:
    """Of the base files with a key range (``counts``: how many incoming keys each range holds,
    :func:`_in_range_counts`), those whose footer would tell the key index nothing the metadata
    table has not: a row count there too, and so many incoming keys in the range (or so many
    keys in all) that the bloom filter would not be asked (:func:`_candidates`).  Their footers
    are not read (on an object store a round trip each); they stand for them, with the range
    alone (their keys are read)."""
    out: dict[int, FooterIndex] = {}
    for i, n in counts.items():
        sl, _ = mine[i]
        r = ranges[(sl.partition, sl.base_file.name)]
        if r[2] is None:
            continue
        if len(sets[None if everywhere else sl.partition].keys) > BLOOM_PROBE_KEYS or n * BLOOM_PROBE_SHARE > r[2]:
            out[i] = FooterIndex(KeyRange(r[0], r[1]), rows=r[2])
    return out


def pruned_key_index(storage: Storage, slices: list[Any], keys: dict[str | None, pa.Array], *,
                     slice_ctx: Any = None, ordering: tuple[Ordering, pa.DataType] | None = None,
                     map_fn: Callable[[Callable[[Any], Any], list[Any]], list[Any]] | None = None,
                     ranges: KeyRanges | None = None,
                     footers: bool = True) -> pa.Table:
    """The stored records of the incoming ``keys`` (by partition, :func:`incoming_keys`; one
    group under ``None``: any partition, a delete by keys alone) in ``slices``: columns
    ``_hoodie_record_key``, ``_hoodie_partition_path``, ``_lk_fid``, ``_lk_row`` (the row in
    the base file; null for slices with logs) and, with ``ordering`` (field, type), the
    stored ordering value ``_lk_stored_ord``.  ``ranges``: record key ranges of base files from
    the metadata table (:func:`_in_range_counts`); a file outside them is not read at all, and a
    file whose footer would add nothing to them is not asked (:func:`_footers_from_ranges`).
    ``footers=False``: the slices are those the record index named for the keys, so their
    footers (key range, bloom filter) are not asked."""
    run = map_fn or (lambda fn, items: _map(fn, items, io_threads(storage)))
    global_keys = None in keys
    mine: list[tuple[Any, pa.Array]] = []
    for sl in slices:
        k = keys[None] if global_keys else keys.get(sl.partition)
        if k is not None and len(k):
            mine.append((sl, k))
    sets = {p: KeySet(k) for p, k in keys.items() if len(k)}
    known: dict[int, FooterIndex] = {}
    if ranges:   # base files whose key range (from the metadata table) holds none of the keys: no footer read
        counts = _in_range_counts(mine, ranges, sets, global_keys)
        keep = [i for i in range(len(mine)) if counts.get(i) != 0]
        if footers:
            at = {old: new for new, old in enumerate(keep)}
            known = {at[i]: fi for i, fi in _footers_from_ranges(mine, counts, ranges, sets, global_keys).items()
                     if i in at}
        mine = [mine[i] for i in keep]
    # footers first (in parallel): the files to read follow from them
    base_only = [i for i, (sl, _) in enumerate(mine) if not sl.log_files and sl.base_path]
    asked = [i for i in base_only if i not in known]
    read = dict(zip(asked, run(lambda i: footer_of(storage, mine[i][0].base_path), asked) if footers
                    else [None] * len(asked)))
    read.update(known)

    def one(i: int) -> pa.Table | None:
        sl, k = mine[i]
        if i in read:
            fi = read[i]
            mask = _candidates(fi, sets[None if global_keys else sl.partition]) if fi is not None else None
            if mask is not None and not mask.any():
                return None
            wanted = k if mask is None or mask.all() else k.filter(pa.array(mask))
            t = _base_keys(storage, sl.base_path, ordering)
            hit = np.asarray(pc.is_in(t.column(KEY), value_set=wanted).to_numpy(zero_copy_only=False), dtype=bool)
            rows = np.flatnonzero(hit)
            if not rows.size:
                return None
            t = t.take(pa.array(rows))
            file_keys, ordv = t.column(KEY), None
            if ordering is not None:
                ordv = stored_ordering_values(t, ordering)
            row = pa.array(rows.astype(np.int32))
        else:   # log files: the merged keys of the slice
            file_keys, ordv = slice_keys(storage, sl, slice_ctx, ordering)
            hit = np.asarray(pc.is_in(file_keys, value_set=k).to_numpy(zero_copy_only=False), dtype=bool)
            if not hit.any():
                return None
            sel = pa.array(hit)
            file_keys = file_keys.filter(sel)
            ordv = ordv.filter(sel) if ordv is not None else None
            row = pa.nulls(len(file_keys), pa.int32())
        n = len(file_keys)
        cols_out = {KEY: file_keys, PART: pa.repeat(pa.scalar(sl.partition, pa.string()), n),
                    FID: pa.repeat(pa.scalar(sl.file_id, pa.string()), n), ROW: row}
        if ordering is not None:
            cols_out[STORED_ORDERING] = ordv
        return pa.table(cols_out)

    parts = [t for t in run(one, list(range(len(mine)))) if t is not None]
    if not parts:
        empty = {KEY: pa.array([], pa.string()), PART: pa.array([], pa.string()), FID: pa.array([], pa.string()),
                 ROW: pa.array([], pa.int32())}
        if ordering is not None:
            empty[STORED_ORDERING] = pa.array([], ordering[1])
        return pa.table(empty)
    return pa.concat_tables([p.cast(parts[0].schema) if p.schema != parts[0].schema else p for p in parts])


def untagged_upserts(incoming: pa.Table, found: pa.Table) -> dict[str, int]:
    """By partition, the incoming upserts (``_hoodie_partition_path``, ``_hoodie_record_key``,
    ``_lk_op``; one row per key and partition) whose (partition, key) the key index did not
    find: what the tagging leaves untagged and the write inserts."""
    pair = pa.schema([(PART, pa.string()), (KEY, pa.string())])
    ups = incoming.filter(pc.equal(incoming.column(OP), OP_UPSERT)).select(pair.names).cast(pair)
    if not ups.num_rows:
        return {}
    stored = found.select(pair.names).cast(pair)
    new = ups.join(stored.group_by([PART, KEY]).aggregate([]), keys=[PART, KEY], join_type="left anti")
    counts = new.group_by(PART).aggregate([([], "count_all")])
    return {p: int(n) for p, n in zip(counts.column(PART).to_pylist(), counts.column("count_all").to_pylist())}


# -- the keys of file slices, read whole (file slices with log files, base files without footers) --
def slice_keys(storage: Storage, sl: Any, slice_ctx: Any = None,
               ordering: tuple[Ordering, pa.DataType] | None = None) -> tuple[pa.ChunkedArray, pa.ChunkedArray | None]:
    """The record keys of one file slice (merged with its log blocks when it has any) and,
    with ``ordering`` (field or fields, type: a struct for several), each key's current
    ordering value (else None)."""
    if sl.log_files:
        t = read_slice(slice_ctx, sl, columns=[KEY] if ordering is None else [KEY, *fields_of(ordering[0])])
    else:
        t = _base_keys(storage, sl.base_path, ordering)
    if ordering is None:
        return t.column(KEY), None
    return t.column(KEY), stored_ordering_values(t, ordering)


def stored_ordering_values(t: pa.Table, ordering: tuple[Ordering, pa.DataType]) -> pa.ChunkedArray:
    """The ordering value of each row of ``t`` as the key index carries it: the field's
    values in ``ordering``'s type; several fields: a struct of them (a field written later,
    or missing from ``t``: nulls)."""
    name, typ = ordering
    if not isinstance(name, str):     # several fields: a struct (a field written later: nulls)
        children = [(t.column(f.name).cast(f.type).combine_chunks() if f.name in t.column_names
                     else pa.nulls(t.num_rows, f.type)) for f in typ]
        return pa.chunked_array([pa.StructArray.from_arrays(children, fields=list(typ))])
    if name not in t.column_names:
        return pa.chunked_array([pa.nulls(t.num_rows, typ)])
    ordv = t.column(name)
    return ordv.cast(typ) if ordv.type != typ else ordv


def read_key_index(storage: Storage, slices: list[Any], slice_ctx: Any = None,
                   ordering: tuple[Ordering, pa.DataType] | None = None) -> pa.Table:
    """Record keys of file slices (base file keys, merged with log blocks when the slice has
    any).  Returns columns ``_hoodie_record_key``, ``_hoodie_partition_path``, ``_lk_fid``,
    and with ``ordering`` (field, type) the stored ordering value (``_lk_stored_ord``)."""
    parts = []
    for sl in slices:
        keys, ordv = slice_keys(storage, sl, slice_ctx, ordering)
        n = len(keys)
        cols = {KEY: keys, PART: pa.repeat(pa.scalar(sl.partition, pa.string()), n),
                "_lk_fid": pa.repeat(pa.scalar(sl.file_id, pa.string()), n)}
        if ordv is not None:
            cols[STORED_ORDERING] = ordv
        parts.append(pa.table(cols))
    if not parts:
        empty = {KEY: pa.array([], pa.string()), PART: pa.array([], pa.string()), "_lk_fid": pa.array([], pa.string())}
        if ordering is not None:
            empty[STORED_ORDERING] = pa.array([], ordering[1])
        return pa.table(empty)
    return pa.concat_tables(parts)


def _base_keys(storage: Storage, path: str, ordering: tuple[Ordering, pa.DataType] | None) -> pa.Table:
    """The record keys of a base file, with the ordering field(s) when asked (a file written
    before the ordering field existed: the keys alone)."""
    cols = [KEY] if ordering is None else [KEY, *fields_of(ordering[0])]
    try:
        return read_parquet(storage, path, cols)
    except pa.ArrowInvalid:
        if ordering is None:
            raise
        return read_parquet(storage, path, [KEY])
