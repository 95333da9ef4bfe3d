"""The global index of upserts (``hoodie.index.type=GLOBAL_SIMPLE`` / ``GLOBAL_BLOOM``): a key
lives in one partition of the table, and an upsert of a key stored in another partition
moves it (Hudi's ``hoodie.simple.index.update.partition.path=true``, the default).

Both engines join the incoming records with the stored records of their keys in *every*
partition (the key index with ``global_keys``), then call :func:`route_moves` on the joined
rows (the local engine on the whole batch, the Spark engine per key group).  Like Hudi's
``HoodieIndexUtils.mergeForPartitionUpdatesIfNeeded``, an incoming record whose key is stored
in another partition is first compared with the stored version under the table's ordering:

* it wins (commit-time ordering; event-time ordering with an ordering value >= the stored
  one): a delete goes to the old file group (a delete block on merge-on-read, the record left
  out of the next base file on copy-on-write) and the record is inserted in its new
  partition;
* it loses (a lower ordering value): it goes to the old file group, where the stored version
  stays: the key does not move and nothing changes;
* an incoming delete deletes the key wherever it is stored.

With ``update_partition_path=False`` every record goes to the partition its key is stored in
(the stored partition path is kept; the merge there decides as for any update).  A key that
an earlier non-global write left in several partitions ends in one: copies the incoming
record beats are deleted.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakesdk.merge.ordering import (
    KEY,
    OP,
    OP_DELETE,
    PART,
    ROW,
    Ordering,
    event_time_wins,
    fields_of,
    has_ordering,
    ordering_array,
)

__all__ = ["STORED_PART", "route_moves", "combine_by_key"]

FID = "_lk_fid"
#: the partition path of the stored copy an incoming record was joined with (null: none)
STORED_PART = "_lk_stored_part"
_STORED_ORDERING = "_lk_stored_ord"
_OWN_PART = "_lk_own_part"


def _np(a: Any) -> np.ndarray:
    return np.asarray(a.to_numpy(zero_copy_only=False), dtype=bool)


def _first_per_key(codes: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """The first row of each key among the rows of ``mask``."""
    out = np.zeros(len(codes), dtype=bool)
    rows = np.flatnonzero(mask)
    if rows.size:
        _, first = np.unique(codes[rows], return_index=True)
        out[rows[first]] = True
    return out


def _any_per_key(codes: np.ndarray, mask: np.ndarray, nkeys: int) -> np.ndarray:
    """Per row: whether some row of its key is in ``mask``."""
    return (np.bincount(codes, weights=mask.astype(np.float64), minlength=nkeys) > 0)[codes]


def _strings(col: Any) -> Any:
    return col.cast(pa.string()) if pa.types.is_dictionary(col.type) else col


def route_moves(t: pa.Table, *, ordering: Ordering, merge_mode: str, update_partition_path: bool = True) -> pa.Table:
    """The records to write for incoming records joined with the stored copies of their keys.

    ``t``: each incoming record (key columns, ``_lk_op``, data) once per stored copy of its key
    in any partition, with that copy's partition (``_lk_stored_part``), file group
    (``_lk_fid``) and, under event-time ordering, ordering value (``_lk_stored_ord``); once
    with nulls when the key is not stored.  Returns the same columns without
    ``_lk_stored_part``: updates and deletes tagged with their file group (partition path: the
    stored one), new records untagged in their own partition."""
    sp = _strings(t.column(STORED_PART))
    if t.num_rows == 0:
        return t.drop_columns([STORED_PART])
    part = _strings(t.column(PART))
    has = _np(pc.is_valid(sp))
    same = has & _np(pc.fill_null(pc.equal(sp, part), False))
    other = has & ~same
    ops = np.asarray(t.column(OP).to_numpy(zero_copy_only=False), dtype=np.int8)
    is_del = ops == OP_DELETE
    upsert = ~is_del
    if not update_partition_path:
        win = np.zeros(t.num_rows, dtype=bool)
    elif merge_mode == "EVENT_TIME_ORDERING" and _STORED_ORDERING in t.column_names and has_ordering(t, ordering):
        win = event_time_wins(ordering_array(t, ordering), t.column(_STORED_ORDERING), ops)
    else:
        win = np.ones(t.num_rows, dtype=bool)
    lose = other & ~win & upsert
    beaten = other & win & upsert
    enc = pc.dictionary_encode(t.column(KEY)).combine_chunks()
    codes = np.asarray(enc.indices.to_numpy(zero_copy_only=False), dtype=np.int64)
    nkeys = len(enc.dictionary)
    key_lose = _any_per_key(codes, lose, nkeys)
    key_same = _any_per_key(codes, same & upsert, nkeys)
    # the stored copy the record updates: the first it loses against (the key stays there), else
    # its copy in its own partition; an incoming delete goes to every copy
    tagged = (upsert & _first_per_key(codes, lose)) | (upsert & same & ~key_lose) | is_del
    # copies the record beats, and its own partition's copy when the key stays elsewhere: deleted
    deletes = upsert & (beaten | (same & key_lose))
    # new in its partition: a key stored nowhere, or moved here from the copies it beat
    inserts = upsert & (~has | (_first_per_key(codes, beaten) & ~key_lose & ~key_same))
    parts = []
    if tagged.any():
        up = t.filter(pa.array(tagged))
        parts.append(up.set_column(up.column_names.index(PART), PART,
                                   pc.coalesce(_strings(up.column(STORED_PART)), _strings(up.column(PART)))))
    if deletes.any():
        d = t.filter(pa.array(deletes))
        d = d.set_column(d.column_names.index(PART), PART, _strings(d.column(STORED_PART)))
        d = d.set_column(d.column_names.index(OP), OP, pa.repeat(pa.scalar(OP_DELETE, d.schema.field(OP).type),
                                                                 d.num_rows))
        for f in fields_of(ordering):   # a delete without an ordering value always applies
            if f in d.column_names:
                d = d.set_column(d.column_names.index(f), f, pa.nulls(d.num_rows, d.schema.field(f).type))
        parts.append(d)
    if inserts.any():
        ins = t.filter(pa.array(inserts))
        for c in (FID, ROW, _STORED_ORDERING):
            if c in ins.column_names:
                ins = ins.set_column(ins.column_names.index(c), c, pa.nulls(ins.num_rows, ins.schema.field(c).type))
        parts.append(ins)
    out = pa.concat_tables([p.cast(parts[0].schema) if p.schema != parts[0].schema else p for p in parts]) \
        if parts else t.slice(0, 0)
    return out.drop_columns([STORED_PART])


def combine_by_key(batch: pa.Table, combine: Any) -> pa.Table:
    """``combine`` (one record per partition and key) applied per key alone: with a global
    index a batch's records of one key are versions of one record whatever their partition
    (Hudi de-duplicates by record key then)."""
    if batch.num_rows <= 1:
        return batch
    names = batch.column_names
    i = names.index(PART)
    work = batch.rename_columns([_OWN_PART if n == PART else n for n in names])
    work = work.append_column(PART, pa.repeat(pa.scalar("", pa.string()), work.num_rows))
    out = combine(work).drop_columns([PART])
    out = out.rename_columns([PART if n == _OWN_PART else n for n in out.column_names])
    return out.select(names) if out.column_names.index(PART) != i else out
