"""Merging the versions of records in one file slice (base file + log blocks).

Every version carries a sequence number (``_lk_seq``: the base file is 0, then each log
block in commit order) and an op (``_lk_op``: 0 upsert, 1 delete).  The winner per
record key:

* ``COMMIT_TIME_ORDERING``: the version with the greatest sequence number.
* ``EVENT_TIME_ORDERING``: a delete without an ordering value resets the key (it wins over
  everything before it, as commit-time ordering); after the last reset, the version with
  the greatest (ordering value, sequence number) wins: a lower ordering value never
  replaces a higher one and ties go to the later write.  Null ordering values rank lowest;
  floating-point values rank in Java's ``compareTo`` order (NaN above +inf, -0.0 below 0.0),
  as Hudi compares them.

If the winner is a delete, the key has no row.  This fold equals applying the pairwise
merge rule commit by commit, which is how Hudi's writers, readers and compaction merge.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakesdk.merge.columns import KEY, OP, OP_DELETE, SEQ
from lakesdk.merge.float_order import java_order

__all__ = ["merge_versions", "merge_partial"]


def _rank(col: pa.ChunkedArray) -> np.ndarray:
    """Ranks of ordering values (nulls lowest) as int64, comparable across rows: integer,
    boolean and temporal values are their own ranks (no sort); other types get dense ranks.
    The smallest rank is always above the int64 minimum plus one (room for a sentinel)."""
    if col.null_count == len(col):
        return np.zeros(len(col), dtype=np.int64)
    col = java_order(col)   # floating point: int64 keys in Java's order (NaN highest, -0.0 < 0.0)
    t = col.type
    if (pa.types.is_integer(t) and t != pa.uint64()) or pa.types.is_boolean(t) or pa.types.is_temporal(t):
        try:
            ints = pc.cast(col, pa.int64()) if not (pa.types.is_date32(t) or pa.types.is_time32(t)) \
                else pc.cast(pc.cast(col, pa.int32()), pa.int64())
        except (pa.ArrowNotImplementedError, pa.ArrowInvalid):
            ints = None
        if ints is not None:
            low = pc.min(ints).as_py()
            if low is not None and low > np.iinfo(np.int64).min + 2:   # room for nulls and a sentinel below
                filled = pc.fill_null(ints, low - 1) if ints.null_count else ints
                return np.asarray(filled.to_numpy(zero_copy_only=False), dtype=np.int64)
    idx = pc.rank(col, sort_keys="ascending", tiebreaker="dense")  # 1..k
    idx = pc.if_else(pc.is_null(col), 0, idx)
    return np.asarray(idx.to_numpy(zero_copy_only=False), dtype=np.int64)


def merge_versions(versions: pa.Table, *, ordering: str | tuple[str, ...] | None, merge_mode: str,
                   column_groups: dict[str, list[str]] | None = None, merger: Any = None,
                   key: str = KEY) -> pa.Table:
    """Reduce ``versions`` (all versions of the records of one file slice) to the winning
    upsert per key.  ``versions`` must have ``_hoodie_record_key``, ``_lk_seq`` and
    ``_lk_op`` columns (and the ordering field for event-time ordering).  ``key``: the
    column that identifies a record (another than the record key only where it is one to
    one with it: the integer field a simple key is the text of; not for partial updates
    or a user's merger)."""
    if merge_mode == "PARTIAL_UPDATE" and column_groups is not None:
        return merge_partial(versions, column_groups=column_groups)
    if merger is not None:   # a user-defined merger (lakesdk.register_merger)
        return merger(versions) if versions.num_rows else versions
    n = versions.num_rows
    if n == 0:
        return versions
    keys = versions.column(key)
    seq = np.asarray(versions.column(SEQ).to_numpy(zero_copy_only=False), dtype=np.int64)
    op = np.asarray(versions.column(OP).to_numpy(zero_copy_only=False), dtype=np.int8)
    fields = (ordering,) if isinstance(ordering, str) else tuple(ordering or ())
    event = merge_mode == "EVENT_TIME_ORDERING" and bool(fields) and all(f in versions.column_names for f in fields)
    # group by key: codes via dictionary encoding
    enc = pc.dictionary_encode(keys).combine_chunks()
    code = np.asarray(enc.indices.to_numpy(zero_copy_only=False), dtype=np.int64)
    if event:
        # several ordering fields: one rank per field, compared field by field (most significant first)
        ranks = [_rank(versions.column(f)) for f in fields]
        is_null_ord = np.ones(n, dtype=bool)
        for f in fields:
            is_null_ord &= np.asarray(pc.is_null(versions.column(f)).to_numpy(zero_copy_only=False), dtype=bool)
        reset = (op == OP_DELETE) & is_null_ord
        # last reset sequence per key
        last_reset = np.full(code.max() + 1, -1, dtype=np.int64)
        if reset.any():
            np.maximum.at(last_reset, code[reset], seq[reset])
        alive = seq >= last_reset[code]  # the reset itself stays as a candidate (it is a delete)
        # a reset delete outranks everything before it; among later versions, (ranks, seq) decides
        eff = [np.where(reset, r.min() - 1, r) for r in ranks]   # below every rank, nulls included
        winners = _argmax_per_code(code, *(([alive.astype(np.int64)] if reset.any() else []) + [*eff, seq]))
    else:
        winners = _argmax_per_code(code, seq)
    win_ops = op[winners]
    keep = winners[win_ops != OP_DELETE]
    keep.sort()
    return versions.take(pa.array(keep))


def _argmax_per_code(code: np.ndarray, *keys: np.ndarray) -> np.ndarray:
    """The row of each code (0..k-1, all present) with the greatest ``keys`` (most significant
    first; ties: the last row), as the last row of each code's run after a stable
    ``np.lexsort((*reversed(keys), code))``, in O(n) instead of a sort."""
    ncodes = int(code.max()) + 1
    cand = np.ones(len(code), dtype=bool)
    for k in (*keys, np.arange(len(code), dtype=np.int64)):
        best = np.full(ncodes, np.iinfo(np.int64).min, dtype=np.int64)
        np.maximum.at(best, code[cand], k[cand])
        cand &= k == best[code]
    return np.flatnonzero(cand)


def _last_per_code(code: np.ndarray, *keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(codes, row index) of the last row of each code's run after sorting by ``keys``
    (least significant first), like the winner selection above."""
    order = np.lexsort((*keys, code))
    c = code[order]
    last = np.ones(len(order), dtype=bool)
    last[:-1] = c[1:] != c[:-1]
    return c[last], order[last]


def merge_partial(versions: pa.Table, *, column_groups: dict[str, list[str]]) -> pa.Table:
    """Partial updates with one ordering field per column group (multi-stream joins).

    Each group's columns come from the version with the greatest value of the group's
    ordering field among the versions that wrote the group (a non-null ordering value);
    ties go to the later write.  A version never blanks a group it did not write, and a late
    event never overwrites newer values of its group.  Columns outside every group take the
    latest non-null value.  A delete without ordering values removes the key and resets
    every group; versions after it start the key afresh.
    """
    n = versions.num_rows
    if n == 0:
        return versions
    seq = np.asarray(versions.column(SEQ).to_numpy(zero_copy_only=False), dtype=np.int64)
    op = np.asarray(versions.column(OP).to_numpy(zero_copy_only=False), dtype=np.int8)
    enc = pc.dictionary_encode(versions.column(KEY)).combine_chunks()
    code = np.asarray(enc.indices.to_numpy(zero_copy_only=False), dtype=np.int64)
    reset = op == OP_DELETE
    last_reset = np.full(code.max() + 1, -1, dtype=np.int64)
    if reset.any():
        np.maximum.at(last_reset, code[reset], seq[reset])
    alive = (seq > last_reset[code]) & (op != OP_DELETE)
    # the keys that still exist: some upsert after their last delete
    keys_alive, latest = _last_per_code(code, seq, alive.astype(np.int8))
    latest = latest[alive[latest]]
    keys_alive = code[latest]
    if len(latest) == 0:
        return versions.slice(0, 0)
    slot = np.full(code.max() + 1, -1, dtype=np.int64)
    slot[keys_alive] = np.arange(len(keys_alive))
    out = versions.take(pa.array(latest))            # meta columns, key, partition: the latest version
    grouped = {c for cols in column_groups.values() for c in cols} | set(column_groups)
    names = out.column_names
    for ordering, cols in column_groups.items():
        if ordering not in names:
            continue
        ordcol = versions.column(ordering)
        wrote = alive & np.asarray(pc.is_valid(ordcol).to_numpy(zero_copy_only=False), dtype=bool)
        src = np.full(len(keys_alive), -1, dtype=np.int64)
        if wrote.any():
            c, win = _last_per_code(code, seq, _rank(ordcol), wrote.astype(np.int8))
            ok = wrote[win] & (slot[c] >= 0)
            src[slot[c[ok]]] = win[ok]
        idx = pa.array(src, mask=src < 0)
        for col in [ordering, *cols]:
            if col in names:
                out = out.set_column(names.index(col), col, versions.column(col).take(idx))
    # ungrouped data columns: latest non-null value
    for col in names:
        if col in grouped or col.startswith("_hoodie_") or col in (SEQ, OP):
            continue
        valid = alive & np.asarray(pc.is_valid(versions.column(col)).to_numpy(zero_copy_only=False), dtype=bool)
        if not valid.any():
            continue
        c, win = _last_per_code(code, seq, valid.astype(np.int8))
        ok = valid[win] & (slot[c] >= 0)
        src = np.full(len(keys_alive), -1, dtype=np.int64)
        src[slot[c[ok]]] = win[ok]
        out = out.set_column(names.index(col), col, versions.column(col).take(pa.array(src, mask=src < 0)))
    return out
