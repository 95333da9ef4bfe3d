"""Event-time and commit-time ordering mergers on Arrow tables.

* ``EVENT_TIME_ORDERING`` (Hudi 1.0's default when the table has an ordering field): an
  incoming record replaces the stored one only if its ordering value is greater than or
  equal to the stored value (ties go to the later write).  A delete carrying no
  ordering value always applies; one carrying a value follows the same rule.
* ``COMMIT_TIME_ORDERING``: the later write always wins.

Null ordering values (Hudi's rule): under event-time ordering a record written as data must
carry an ordering value, so a write refuses rows whose ordering value is null before it
creates its instant (:func:`null_ordering_error`; Hudi's writers throw on such records).
Deletes may omit it: such a delete always applies (Hudi's natural-order delete).  A stored
version without an ordering value (written by another writer) ranks below any value: an
incoming version replaces it.

Several ordering fields (table version 9, ``hoodie.table.ordering.fields=a,b``) are compared
field by field, as Hudi 1.1 compares its ordering values: the first field decides unless the
values are equal, then the second, and so on.  The functions here take ``ordering`` as one
field name or a tuple of several (:data:`Ordering`); arrays of several ordering values are
struct arrays (:func:`ordering_array`), one child per field.

Incoming batches carry two internal columns: ``_lk_op`` (int8: 0 upsert, 1 delete) and
``_lk_seq`` (int64: arrival order, used to break ties inside one batch).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Union

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakesdk.merge.columns import KEY, OP, OP_DELETE, OP_UPSERT, PART, ROW, SEQ
from lakesdk.merge.float_order import has_float, java_order
from lakesdk.merge.slice_merge import merge_partial

__all__ = ["Ordering", "fields_of", "ordering_array", "MergeCounts", "merge_into_base", "combine_batch", "combine_deletes", "event_time_wins", "OP", "SEQ", "OP_UPSERT",
           "OP_DELETE", "event_time_field", "event_time_fields", "null_ordering_error", "has_ordering", "all_null",
           "combine_keeping_deletes", "distinct_records", "stored_copies"]



#: the ordering of a table: None, one field name, or a tuple of several (compared field by field)
Ordering = Union[str, tuple[str, ...], None]


def fields_of(ordering: Ordering) -> tuple[str, ...]:
    """The ordering fields of ``ordering``, as a tuple."""
    if ordering is None:
        return ()
    return (ordering,) if isinstance(ordering, str) else tuple(ordering)


def has_ordering(table: pa.Table | pa.Schema, ordering: Ordering) -> bool:
    """Whether ``table`` (or a schema) holds every ordering field (False without ordering)."""
    names = table.names if isinstance(table, pa.Schema) else table.column_names
    fields = fields_of(ordering)
    return bool(fields) and all(f in names for f in fields)


def ordering_array(table: pa.Table, ordering: Ordering) -> pa.ChunkedArray:
    """The ordering values of ``table``'s rows: the column of one field, or a struct array
    (never null itself) with one child per field for several."""
    fields = fields_of(ordering)
    if len(fields) == 1:
        return table.column(fields[0])
    cols = [table.column(f).combine_chunks() for f in fields]
    return pa.chunked_array([pa.StructArray.from_arrays(cols, names=list(fields))])


def _children(a: pa.ChunkedArray | pa.Array) -> list[pa.Array]:
    arr = a.combine_chunks() if isinstance(a, pa.ChunkedArray) else a
    return [arr.field(i) for i in range(arr.type.num_fields)]


def all_null(values: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """Rows without an ordering value: a null value, or (several fields) every field null."""
    if pa.types.is_struct(values.type):
        out = np.ones(len(values), dtype=bool)
        for c in _children(values):
            out &= np.asarray(pc.is_null(c).to_numpy(zero_copy_only=False), dtype=bool)
        return out
    return np.asarray(pc.is_null(values).to_numpy(zero_copy_only=False), dtype=bool)


@dataclass
class MergeCounts:
    inserted: int = 0
    updated: int = 0
    deleted: int = 0
    skipped: int = 0  # incoming records older than the stored ones (event-time ordering)

    def __iadd__(self, other: "MergeCounts") -> "MergeCounts":
        self.inserted += other.inserted
        self.updated += other.updated
        self.deleted += other.deleted
        self.skipped += other.skipped
        return self


def event_time_field(ordering: Ordering, merge_mode: str) -> str | None:
    """The (first) ordering field whose values must not be null in written records: the
    table's ordering field under event-time ordering, else None (commit-time ordering,
    partial updates and custom mergers decide without it).  :func:`event_time_fields` names
    every field."""
    f = event_time_fields(ordering, merge_mode)
    return f[0] if f else None


def event_time_fields(ordering: Ordering, merge_mode: str) -> tuple[str, ...]:
    """Every ordering field whose values must not be null in written records (see
    :func:`event_time_field`)."""
    return fields_of(ordering) if merge_mode == "EVENT_TIME_ORDERING" else ()


def null_ordering_error(field: str, nulls: int, rows: int, table: str, what: str) -> Exception:
    """The :class:`~lakesdk.exceptions.NullOrderingValueError` for ``nulls`` of ``rows``
    records of ``what`` (an operation, or the merge source) lacking an ordering value."""
    from lakesdk.exceptions import NullOrderingValueError
    return NullOrderingValueError(
        f"ordering field {field!r} is null in {nulls} of {rows} rows of the {what}; {table!r} decides between "
        f"versions of a record by {field!r} (event-time ordering), and a version without an ordering value "
        f"cannot be ordered (Apache Hudi refuses such records too). Fill {field!r} in those rows or drop them; "
        "deletes (table.delete) may go without it, and a table where the latest write wins is created with "
        "merge_mode='commit_time'. Nothing was written")


def positions(probe: pa.ChunkedArray | pa.Array, build: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """For each ``probe`` value, the index of an equal value in ``build`` (-1 if none).

    Hashes whichever side is smaller (hash tables of millions of strings are the cost)."""
    return positions_and_repeats(probe, build)[0]


def positions_and_repeats(probe: pa.ChunkedArray | pa.Array,
                          build: pa.ChunkedArray | pa.Array) -> tuple[np.ndarray, bool]:
    """:func:`positions`, and whether some ``probe`` value may equal two ``build`` values (a
    key being written that is stored twice), found in the same pass: with fewer probe values,
    only the build values equal to one of them are counted; otherwise any repeated build value
    answers True (the caller's general path then finds which)."""
    n_probe, n_build = len(probe), len(build)
    if n_build <= n_probe:
        pos = pc.index_in(probe, value_set=build)
        repeats = bool(pc.count_distinct(build, mode="all").as_py() < n_build)
        return np.asarray(pc.fill_null(pos, -1).to_numpy(zero_copy_only=False), dtype=np.int64), repeats
    # Hash the distinct probe values: several probe rows may share one value, and each of
    # them gets that value's build position (the first equal build row, as index_in gives).
    uniq = pc.unique(probe)
    inv = pc.index_in(build, value_set=uniq)           # for each build row: its distinct-probe index
    inv_np = np.asarray(pc.fill_null(inv, -1).to_numpy(zero_copy_only=False), dtype=np.int64)
    hit = np.flatnonzero(inv_np >= 0)[::-1]            # reversed: the first build row is written last
    repeats = bool(len(hit) > len(np.unique(inv_np[hit])))
    at = np.full(len(uniq), -1, dtype=np.int64)
    at[inv_np[hit]] = hit
    which = pc.index_in(probe, value_set=uniq)         # for each probe row: its distinct-probe index
    which_np = np.asarray(pc.fill_null(which, -1).to_numpy(zero_copy_only=False), dtype=np.int64)
    return at[which_np], repeats


def _ge(a: pa.ChunkedArray, b: pa.ChunkedArray) -> np.ndarray:
    """Elementwise a >= b with nulls: a null incoming value never beats a stored one,
    except that a null stored value loses to anything."""
    r = pc.greater_equal(a, b)
    r = pc.if_else(pc.is_null(b), True, r)
    r = pc.if_else(pc.and_(pc.is_null(a), pc.is_valid(b)), False, r)
    return np.asarray(r.to_numpy(zero_copy_only=False), dtype=bool)


def _gt_eq(a: pa.Array, b: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """(a > b, a == b) elementwise for one ordering field: a null value ranks below every value
    and equals another null."""
    if a.type != b.type:
        try:
            b = b.cast(a.type)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            a = a.cast(b.type)
    a, b = java_order(a), java_order(b)   # floating point: Java's compareTo order (NaN highest, -0.0 < 0.0)
    an = np.asarray(pc.is_null(a).to_numpy(zero_copy_only=False), dtype=bool)
    bn = np.asarray(pc.is_null(b).to_numpy(zero_copy_only=False), dtype=bool)
    gt = np.asarray(pc.fill_null(pc.greater(a, b), False).to_numpy(zero_copy_only=False), dtype=bool)
    eq = np.asarray(pc.fill_null(pc.equal(a, b), False).to_numpy(zero_copy_only=False), dtype=bool)
    return gt | (~an & bn), eq | (an & bn)


def event_time_wins(incoming: pa.ChunkedArray, stored: pa.ChunkedArray, ops: np.ndarray) -> np.ndarray:
    """Which incoming records replace (or delete) the stored ones under event-time ordering:
    ordering value >= the stored one (several fields, struct arrays: compared field by
    field; floating point in Java's ``compareTo`` order, :mod:`lakesdk.merge.float_order`); a
    delete without an ordering value always applies."""
    if pa.types.is_struct(incoming.type) and pa.types.is_struct(stored.type):
        ge = np.ones(len(incoming), dtype=bool)
        for a, b in reversed(list(zip(_children(incoming), _children(stored)))):
            gt, eq = _gt_eq(a, b)
            ge = gt | (eq & ge)
        return ge | ((ops == OP_DELETE) & all_null(incoming))
    if stored.type != incoming.type:
        try:
            stored = stored.cast(incoming.type)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            incoming = incoming.cast(stored.type)
    ge = _ge(java_order(incoming), java_order(stored))
    null_ord = np.asarray(pc.is_null(incoming).to_numpy(zero_copy_only=False), dtype=bool)
    return ge | ((ops == OP_DELETE) & null_ord)


def combine_deletes(batch: pa.Table, *, ordering: Ordering, merge_mode: str) -> pa.Table:
    """One delete per (partition path, record key): the one that applies if any of them
    does.  Under event-time ordering that is a delete without an ordering value (it always
    applies), else the greatest ordering value; otherwise the last arrival."""
    if batch.num_rows <= 1 or pc.count_distinct(batch.column(KEY), mode="all").as_py() == batch.num_rows:
        return batch
    has_ord = "_lk_has_ord"
    sort = [(PART, "ascending"), (KEY, "ascending")]
    work = batch
    if merge_mode == "EVENT_TIME_ORDERING" and has_ordering(batch, ordering):
        work = batch.append_column(has_ord, pa.array(~all_null(ordering_array(batch, ordering)), pa.bool_()).cast(pa.int8()))
        work, names = _sortable(work, ordering)
        sort += [(has_ord, "ascending"), *((f, "descending") for f in names)]
    sort.append((SEQ, "descending"))
    s = batch.take(pc.sort_indices(work, sort_keys=sort))
    k = [s.column(c).to_numpy(zero_copy_only=False) for c in (PART, KEY)]
    first = np.ones(s.num_rows, dtype=bool)
    first[1:] = (k[0][1:] != k[0][:-1]) | (k[1][1:] != k[1][:-1])
    return s.filter(pa.array(first))


def _sortable(batch: pa.Table, ordering: Ordering) -> tuple[pa.Table, list[str]]:
    """``batch`` with a sort key column in Java's order for each floating-point ordering field
    (:func:`~lakesdk.merge.float_order.java_order`: Arrow's sorts put NaN last in either
    direction and tie -0.0 with 0.0), and the names of the columns to sort the ordering by."""
    names = []
    for i, f in enumerate(fields_of(ordering)):
        if has_float(batch.schema.field(f).type):
            name = f"_lk_order_{i}"
            batch = batch.append_column(name, java_order(batch.column(f)))
            names.append(name)
        else:
            names.append(f)
    return batch, names


def combine_keeping_deletes(batch: pa.Table, combine: Any) -> pa.Table:
    """``combine`` (a partial-update stitch or a custom merger: versions in, the living record
    of each key out) over one batch, keeping its deletes: a key the batch deletes keeps its
    last delete, followed by the combine of the key's versions after that delete (if any).
    A combine alone drops a deleted key from the batch, and the delete would then never reach
    the stored record.

    The records of a key are those of one partition path and key (Hudi's ``HoodieKey``): a
    key written into several partitions of a table without a global index is one record in
    each, combined (and deleted) per partition.  ``combine`` sees one key one way only, so a
    batch with such a key is combined in layers: each layer holds every key of the batch in
    at most one partition (few layers: as many as the most partitions one key is in)."""
    if batch.num_rows > 1 and PART in batch.column_names:
        pcodes = pc.dictionary_encode(batch.column(PART), null_encoding="encode").combine_chunks()
        if len(pcodes.dictionary) > 1:
            pair = pc.dictionary_encode(pc.binary_join_element_wise(
                pc.cast(pcodes.indices, pa.string()), pc.cast(batch.column(KEY), pa.string()), "\x1f")).combine_chunks()
            kcodes = pc.dictionary_encode(batch.column(KEY)).combine_chunks()
            if len(pair.dictionary) > len(kcodes.dictionary):
                pair_of = np.asarray(pair.indices.to_numpy(zero_copy_only=False), dtype=np.int64)
                key_of = np.asarray(kcodes.indices.to_numpy(zero_copy_only=False), dtype=np.int64)
                _, first = np.unique(pair_of, return_index=True)
                pair_key = key_of[first]                  # the key of each (partition, key) pair
                order = np.argsort(pair_key, kind="stable")
                starts = np.flatnonzero(np.r_[True, pair_key[order][1:] != pair_key[order][:-1]])
                rank = np.arange(len(order)) - np.repeat(starts, np.diff(np.r_[starts, len(order)]))
                layer_of_pair = np.empty(len(order), dtype=np.int64)
                layer_of_pair[order] = rank
                layer = layer_of_pair[pair_of]
                outs = [_combine_keeping_deletes(batch.filter(pa.array(layer == i)), combine)
                        for i in range(int(layer.max()) + 1)]
                return pa.concat_tables([o.select(batch.column_names).cast(batch.schema) for o in outs])
    return _combine_keeping_deletes(batch, combine)


def _combine_keeping_deletes(batch: pa.Table, combine: Any) -> pa.Table:
    ops = np.asarray(batch.column(OP).to_numpy(zero_copy_only=False), dtype=np.int8)
    is_del = ops == OP_DELETE
    if not is_del.any():
        return combine(batch)
    seq = np.asarray(batch.column(SEQ).to_numpy(zero_copy_only=False), dtype=np.int64)
    code = np.asarray(pc.dictionary_encode(batch.column(KEY)).combine_chunks().indices
                      .to_numpy(zero_copy_only=False), dtype=np.int64)
    last_del = np.full(int(code.max()) + 1, np.iinfo(np.int64).min, dtype=np.int64)
    np.maximum.at(last_del, code[is_del], seq[is_del])
    dels = batch.filter(pa.array(is_del & (seq == last_del[code])))
    later = batch.filter(pa.array(seq > last_del[code]))
    if later.num_rows == 0:
        return dels
    merged = combine(later).select(batch.column_names).cast(batch.schema)
    return pa.concat_tables([dels, merged])


def combine_batch(batch: pa.Table, *, ordering: Ordering, merge_mode: str,
                  column_groups: dict[str, list[str]] | None = None, merger: Any = None) -> pa.Table:
    """De-duplicate one incoming batch by (partition path, record key).

    Keeps, per key, the record with the greatest ordering value (event-time ordering) or
    the last arrival (commit-time ordering); ties go to the later arrival.
    """
    if batch.num_rows <= 1:
        return batch
    if merge_mode == "PARTIAL_UPDATE" and column_groups is not None:
        if OP not in batch.column_names:
            return batch
        return combine_keeping_deletes(batch, lambda v: merge_partial(v, column_groups=column_groups))
    if merger is not None:
        return combine_keeping_deletes(batch, merger) if OP in batch.column_names else batch
    if pc.count_distinct(batch.column(KEY), mode="all").as_py() == batch.num_rows:
        return batch   # no key twice (the common case): one hash pass instead of a sort of the strings
    keys = [PART, KEY]
    sort = [(PART, "ascending"), (KEY, "ascending")]
    work = batch
    if merge_mode == "EVENT_TIME_ORDERING" and has_ordering(batch, ordering):
        work, names = _sortable(batch, ordering)
        sort += [(f, "descending") for f in names]
    sort.append((SEQ, "descending"))
    idx = pc.sort_indices(work, sort_keys=sort)
    s = batch.take(idx)
    k = [s.column(c).to_numpy(zero_copy_only=False) for c in keys]
    first = np.ones(s.num_rows, dtype=bool)
    first[1:] = (k[0][1:] != k[0][:-1]) | (k[1][1:] != k[1][:-1])
    if first.all():
        return batch
    return s.filter(pa.array(first))


def distinct_records(incoming: pa.Table) -> pa.Table:
    """``incoming`` with each record once: the key index tags a record once per stored copy of
    its key, and the copies in one file group share the record's arrival (``_lk_seq``, and
    ``_lk_op``).  Without ``_lk_seq``, or without a record twice, ``incoming`` itself."""
    if SEQ not in incoming.column_names or incoming.num_rows <= 1 or \
            pc.count_distinct(incoming.column(SEQ), mode="all").as_py() == incoming.num_rows:
        return incoming
    cols = [SEQ, OP] if OP in incoming.column_names else [SEQ]
    first = pa.table({**{c: incoming.column(c) for c in cols},
                      "_lk_i": pa.array(np.arange(incoming.num_rows, dtype=np.int64))})
    first = first.group_by(cols, use_threads=False).aggregate([("_lk_i", "min")])
    keep = np.sort(np.asarray(first.column("_lk_i_min").to_numpy(zero_copy_only=False), dtype=np.int64))
    return incoming.take(pa.array(keep))


def stored_copies(base: pa.Table, incoming: pa.Table) -> tuple[pa.Table, np.ndarray]:
    """``incoming`` once per stored row of its key in ``base``, and that row (-1: a new key).

    The local engine's key index tags each record with its row already (``_lk_row``, once
    per stored copy); otherwise the keys are hashed here, and a key ``base`` holds twice
    pairs its record with each of its rows."""
    if ROW in incoming.column_names:
        return incoming, np.asarray(pc.fill_null(incoming.column(ROW), -1).to_numpy(zero_copy_only=False),
                                    dtype=np.int64)
    incoming = distinct_records(incoming)
    pos_np = positions(incoming.column(KEY), base.column(KEY))
    matched = pos_np >= 0
    if not matched.any():
        return incoming, pos_np
    hits = np.flatnonzero(np.asarray(pc.is_in(base.column(KEY), value_set=incoming.column(KEY).filter(
        pa.array(matched))).to_numpy(zero_copy_only=False), dtype=bool))
    if len(hits) == len(np.unique(pos_np[matched])):
        return incoming, pos_np          # no key stored twice (the common case)
    which = positions(base.column(KEY).take(pa.array(hits)), incoming.column(KEY))
    rows_in = np.concatenate([which, np.flatnonzero(~matched)])
    stored = np.concatenate([hits, np.full(int((~matched).sum()), -1, dtype=np.int64)])
    return incoming.take(pa.array(rows_in)), stored


def merge_into_base(base: pa.Table | None, incoming: pa.Table, *, ordering: Ordering,
                    merge_mode: str) -> tuple[pa.Table, pa.Table, np.ndarray, MergeCounts]:
    """Merge an incoming (de-duplicated) batch into one base file's records.

    Returns ``(kept_base, new_rows, new_is_update, counts)``: the stored rows to carry over
    unchanged, the incoming upserts to write (with ``new_is_update`` flagging updates; an
    update's ``_lk_row`` is the stored row it replaces), and the counts.  Callers assign meta
    columns to ``new_rows`` and concatenate.

    A key the base holds more than once (an insert or bulk insert of a stored key) has each
    stored copy merged with the incoming record on its own, as Hudi's merge handle merges each
    stored record: every copy the record beats is replaced by it (or deleted), the others
    stay.  The counts count stored records: ``updated``, ``deleted`` and ``skipped`` (stored
    records an incoming one lost to) are the stored copies so treated, ``inserted`` the new
    records.
    """
    counts = MergeCounts()
    if base is None or base.num_rows == 0:
        incoming = distinct_records(incoming)
        ops = np.asarray(incoming.column(OP).to_numpy(zero_copy_only=False), dtype=np.int8)
        ups = ops == OP_UPSERT
        counts.inserted = int(ups.sum())
        new = incoming.filter(pa.array(ups))
        return (base.slice(0, 0) if base is not None else None), new, np.zeros(new.num_rows, dtype=bool), counts
    incoming, pos_np = stored_copies(base, incoming)
    ops = np.asarray(incoming.column(OP).to_numpy(zero_copy_only=False), dtype=np.int8)
    n_in = incoming.num_rows
    matched = pos_np >= 0
    pos = pa.array(pos_np, mask=~matched)
    wins = np.ones(n_in, dtype=bool)
    if matched.any() and merge_mode == "EVENT_TIME_ORDERING" and has_ordering(base, ordering) \
            and has_ordering(incoming, ordering):
        mpos = pc.fill_null(pos, 0)
        stored = ordering_array(base, ordering).take(mpos)
        wins = np.where(matched, event_time_wins(ordering_array(incoming, ordering), stored, ops), True)
    is_up = ops == OP_UPSERT
    is_del = ops == OP_DELETE
    # stored rows count once each
    counts.inserted = int((is_up & ~matched).sum())
    met = pos_np[matched]
    if len(met) < 2 or bool((met[1:] > met[:-1]).all()):   # each stored row met once (placed in order): no hashing
        counts.updated = int((is_up & matched & wins).sum())
        counts.deleted = int((is_del & matched & wins).sum())
        counts.skipped = int((matched & ~wins).sum())
    else:
        changed = np.unique(pos_np[matched & wins])
        counts.updated = len(np.unique(pos_np[is_up & matched & wins]))
        counts.deleted = len(np.unique(pos_np[is_del & matched & wins]))
        counts.skipped = len(np.setdiff1d(np.unique(pos_np[matched & ~wins]), changed))
    # stored rows replaced or deleted
    drop_pos = pos_np[matched & wins]
    keep = np.ones(base.num_rows, dtype=bool)
    if len(drop_pos):
        keep[drop_pos.astype(np.int64)] = False
    kept = base.filter(pa.array(keep)) if not keep.all() else base
    write_mask = is_up & (wins | ~matched)
    new = incoming.filter(pa.array(write_mask))
    row = pa.array(pos_np[write_mask], pa.int64(), mask=~matched[write_mask])
    new = new.set_column(new.column_names.index(ROW), ROW, row) if ROW in new.column_names \
        else new.append_column(ROW, row)
    new_is_update = matched[write_mask]
    return kept, new, new_is_update, counts
