"""Merging the versions of records in one file slice (base file + log blocks).

Every version carries a sequence number (``_lk_seq``: the base file is 0, then each log
block in commit order) and an op (``_lk_op``: 0 upsert, 1 delete).  The winner per
record key:

* ``COMMIT_TIME_ORDERING``: the version with the greatest sequence number.
* ``EVENT_TIME_ORDERING``: a delete without an ordering value resets the key (it wins over
  everything before it, as commit-time ordering); after the last reset, the version with
  the greatest (ordering value, sequence number) wins: a lower ordering value never
  replaces a higher one and ties go to the later write.  Null ordering values rank lowest.

If the winner is a delete, the key has no row.  This fold equals applying the pairwise
merge rule commit by commit, which is how Hudi's writers, readers and compaction merge.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakesdk.merge.ordering import KEY, OP, OP_DELETE, SEQ

__all__ = ["merge_versions"]


def _rank(col: pa.ChunkedArray) -> np.ndarray:
    """Dense ranks of ordering values (nulls lowest) as int64, comparable across rows."""
    if col.null_count == len(col):
        return np.zeros(len(col), dtype=np.int64)
    idx = pc.rank(col, sort_keys="ascending", tiebreaker="dense")  # 1..k
    idx = pc.if_else(pc.is_null(col), 0, idx)
    return np.asarray(idx.to_numpy(zero_copy_only=False), dtype=np.int64)


def merge_versions(versions: pa.Table, *, ordering: str | None, merge_mode: str) -> pa.Table:
    """Reduce ``versions`` (all versions of the records of one file slice) to the winning
    upsert per key.  ``versions`` must have ``_hoodie_record_key``, ``_lk_seq`` and
    ``_lk_op`` columns (and the ordering field for event-time ordering)."""
    n = versions.num_rows
    if n == 0:
        return versions
    keys = versions.column(KEY)
    seq = np.asarray(versions.column(SEQ).to_numpy(zero_copy_only=False), dtype=np.int64)
    op = np.asarray(versions.column(OP).to_numpy(zero_copy_only=False), dtype=np.int8)
    event = merge_mode == "EVENT_TIME_ORDERING" and ordering is not None and ordering in versions.column_names
    # group by key: codes via dictionary encoding
    enc = pc.dictionary_encode(keys).combine_chunks()
    code = np.asarray(enc.indices.to_numpy(zero_copy_only=False), dtype=np.int64)
    if event:
        ordcol = versions.column(ordering)
        rank = _rank(ordcol)
        is_null_ord = np.asarray(pc.is_null(ordcol).to_numpy(zero_copy_only=False), dtype=bool)
        reset = (op == OP_DELETE) & is_null_ord
        # last reset sequence per key
        last_reset = np.full(code.max() + 1, -1, dtype=np.int64)
        if reset.any():
            np.maximum.at(last_reset, code[reset], seq[reset])
        alive = seq >= last_reset[code]  # the reset itself stays as a candidate (it is a delete)
        # a reset delete outranks everything before it; among later versions, (rank, seq) decides
        eff_rank = np.where(reset, np.int64(-1), rank)
        order = np.lexsort((seq, eff_rank, alive, code))  # the last row of each key's run wins
    else:
        order = np.lexsort((seq, code))
    c_sorted = code[order]
    last = np.ones(n, dtype=bool)
    last[:-1] = c_sorted[1:] != c_sorted[:-1]
    winners = order[last]
    win_ops = op[winners]
    keep = winners[win_ops != OP_DELETE]
    keep.sort()
    return versions.take(pa.array(keep))
