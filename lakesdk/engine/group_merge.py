"""A file group's upsert merged a batch of its stored records at a time.

The incoming records are placed first: each update or delete by the stored row it meets
(``_lk_row``: the local engine's key index tags it; otherwise the stored file's keys are read
alone and matched here, a key stored twice pairing its record with each copy).  Then each
batch of the stored file (:data:`READ_ROWS`) is read, merged with the records that meet its rows
(:func:`~lakesdk.merge.ordering.merge_into_base`, the same merge as of the whole file) and
handed to the writer (:mod:`lakesdk.engine.base_file_writer`) before the next is read; the new
records come last.  A write so holds one batch of the old file at a time, whatever its
size, as Hudi's merge handle streams the stored records of a file group.

Not used where a merge needs the whole file slice at once (a partial update's or a custom
merger's merge, a CDC log of the rewrite): those merge it whole.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from lakesdk.engine.footers import kept_footer
from lakesdk.engine.slice_reader import (
    SliceReadContext,
    as_rows_of,
    conform,
    deleted_flags,
    log_versions,
    merge_touched,
    read_slice,
    split_base,
    touched_keys,
)
from lakesdk.format.bloom import BloomConfig, FooterIndex
from lakesdk.format.damaged import damaged_file
from lakesdk.format.file_group import FileSlice
from lakesdk.format.parquet_encoding import nan_columns
from lakesdk.merge.columns import KEY, OP, OP_UPSERT, ROW, SEQ
from lakesdk.merge.ordering import MergeCounts, Ordering, merge_into_base, stored_copies
from lakesdk.storage import Storage

#: the footer entries of a base file and what they tell the key index
Footer = tuple[dict[bytes, bytes], FooterIndex]

__all__ = ["StoredRows", "merged_pieces", "placed", "nan_statistics", "merge_partial_into_base", "SlicePieces"]

#: stored rows read and merged at a time: a quarter of a written row group (the writer gathers
#: the pieces into row groups); Arrow's reader holds about twice the batch it decodes
READ_ROWS = 1 << 15
#: record keys of a base file read at a time when they are read alone
_KEY_ROWS = 1 << 20


class StoredRows:
    """The stored records of a file group, read :data:`READ_ROWS` at a time: from its base file
    (``path``) or given whole (``table``: a merge-on-read file slice, merged already).  Opened
    at construction (a missing or damaged footer fails before anything is written).
    ``dictionaries``: :meth:`batches` gives the stored file's constant meta columns
    (:data:`~lakesdk.engine.meta_columns.CONSTANT_META`) as dictionaries, as its pages hold them
    (a rewrite that writes its new records' as dictionaries too: the writer takes them as they are)."""

    def __init__(self, storage: Storage, schema: pa.Schema, *, path: str | None = None,
                 table: pa.Table | None = None, dictionaries: bool = False) -> None:
        self.storage, self.schema, self.path, self.table = storage, schema, path, table
        self._file: Any = None
        self._pf: pq.ParquetFile | None = None
        self._stored: frozenset[str] = frozenset()   # the stored file's columns
        self._batch_schema = schema
        self.dictionaries = False    # whether the batches hold dictionaries
        self._reading: set[ThreadPoolExecutor] = set()    # the side threads of the reads under way
        if path is not None:
            source: Any = storage.url(path) if storage.is_local else storage.open_input(path)
            self._file = None if storage.is_local else source
            try:
                with damaged_file(path):
                    # a local file is read as each batch needs (pre-buffering a row group's columns
                    # would hold its compressed bytes beside the batch); an object store's reads
                    # are coalesced a row group at a time, each read a round trip
                    self._pf = pq.ParquetFile(source, pre_buffer=not storage.is_local)
                    self._stored = frozenset(self._pf.schema_arrow.names)   # (a schema built at each ask)
                    if dictionaries:
                        self._read_dictionaries(source)
            except BaseException:
                self.close()
                raise

    def _read_dictionaries(self, source: Any) -> None:
        """Open the file again (its footer as read) to read its constant meta columns of
        strings as dictionaries."""
        from lakesdk.engine.meta_columns import CONSTANT_META, with_dictionaries
        assert self._pf is not None
        stored = self._pf.schema_arrow
        names = [n for n in CONSTANT_META if n in self._stored and stored.field(n).type == pa.string()
                 and n in self.schema.names and self.schema.field(n).type == pa.string()]
        if not names:
            return
        metadata, local = self._pf.metadata, self.storage.is_local
        self._pf.close()    # a file it opened (local); a stream given stays open, read again below
        self._pf = None
        self._pf = pq.ParquetFile(source, metadata=metadata, read_dictionary=names, pre_buffer=not local)
        self._batch_schema = with_dictionaries(self.schema, names)
        self.dictionaries = True

    @property
    def num_rows(self) -> int:
        if self.table is not None:
            return self.table.num_rows
        return self._pf.metadata.num_rows if self._pf is not None else 0

    def columns(self, names: list[str], rows: int | None = None) -> Iterator[pa.Table]:
        """The columns ``names`` of the stored records (those the file has, as stored),
        ``rows`` (None: :data:`READ_ROWS`) at a time."""
        if self.table is not None:
            yield self.table.select([n for n in names if n in self.table.column_names])
        elif self._pf is not None:
            have = [n for n in names if n in self._stored]
            if have:
                yield from self._read(have, rows)

    def batches(self) -> Iterator[pa.Table]:
        """The stored records, :data:`READ_ROWS` at a time, on the table's file schema."""
        if self.table is not None:
            for start in range(0, self.table.num_rows, READ_ROWS):
                yield self.table.slice(start, READ_ROWS)
        elif self._pf is not None:   # the table's columns only (a column dropped from the table is not read)
            for t in self._read([n for n in self.schema.names if n in self._stored]):
                yield conform(t, self._batch_schema)

    def _read(self, columns: list[str] | None, rows: int | None = None) -> Iterator[pa.Table]:
        """The stored file's ``columns`` (None: all), :data:`READ_ROWS` at a time, the next batch
        decoded on a side thread while this one is merged and written; damaged bytes raise
        :class:`~lakesdk.CorruptFileError` naming the file."""
        assert self._pf is not None and self.path is not None
        it = self._pf.iter_batches(batch_size=rows or READ_ROWS, columns=columns, use_threads=False)
        path = self.path

        def decode() -> pa.RecordBatch | None:
            with damaged_file(path):
                return next(it, None)
        side = ThreadPoolExecutor(max_workers=1, thread_name_prefix="lakesdk-read")
        self._reading.add(side)
        try:
            ahead = side.submit(decode)
            while True:
                b = ahead.result()
                if b is None:
                    return
                ahead = side.submit(decode)
                yield pa.Table.from_batches([b])
                del b
        finally:   # a read stopped early (the generator closed) waits for the batch in flight
            side.shutdown(wait=True, cancel_futures=True)
            self._reading.discard(side)

    def close(self) -> None:
        """Stop the reads (a batch being decoded is waited for), then close the file."""
        for side in list(self._reading):
            side.shutdown(wait=True, cancel_futures=True)
        self._reading.clear()
        if self._pf is not None:
            self._pf.close()
            self._pf = None
        if self._file is not None:
            self._file.close()
            self._file = None


def nan_statistics(stored: StoredRows, incoming: pa.Table, schema: pa.Schema) -> bool | list[str]:
    """The ``write_statistics`` of a rewrite of ``stored`` with ``incoming`` (as
    :func:`~lakesdk.format.parquet_encoding.statistics_columns` of all their rows): none for a
    top-level floating-point column holding NaN in either, decided before the first row group
    is written (the stored file's floating-point columns are read alone for it; a NaN of a
    stored row about to be replaced or deleted counts too)."""
    floats = [f.name for f in schema if pa.types.is_floating(f.type)]
    if not floats:
        return True
    if OP in incoming.column_names:     # deletes write no values
        incoming = incoming.filter(pc.equal(incoming.column(OP), OP_UPSERT))
    nan = nan_columns(incoming, floats)
    for part in stored.columns([f for f in floats if f not in nan]) if stored.num_rows else ():
        nan |= nan_columns(part, floats)
        if len(nan) == len(floats):
            break
    return True if not nan else [f.name for f in schema if f.name not in nan]


def merged_pieces(stored: StoredRows, incoming: pa.Table, *, ordering: Ordering, merge_mode: str,
                  counts: MergeCounts, write_new: Callable[[pa.Table, pa.Table | None], pa.Table]) -> Iterator[pa.Table]:
    """The rows of the file group's next base file, a piece per stored batch: its stored
    rows kept, then the incoming records that replace some of them; the new records last.
    ``write_new(records, stored_rows)`` gives records their meta columns (and the stored
    values of the columns they lack, from ``stored_rows``: None for new records); ``counts``
    adds up as the pieces are taken."""
    incoming, rows = _placed(stored, incoming)
    order = np.argsort(rows, kind="stable")
    rows_sorted = rows[order]
    offset = 0
    for batch in stored.batches():
        n = batch.num_rows
        lo, hi = np.searchsorted(rows_sorted, [offset, offset + n])
        offset += n
        if lo == hi:
            yield batch
        else:
            yield _merged(batch, incoming, order[lo:hi], rows_sorted[lo:hi] - (offset - n), ordering=ordering,
                          merge_mode=merge_mode, counts=counts, write_new=write_new)
        del batch   # not held while the next batch is read
    if len(rows_sorted) and rows_sorted[-1] >= offset:   # fewer rows than the footer said
        raise RuntimeError(f"{stored.path}: the key index placed records at row {int(rows_sorted[-1])} of a file "
                           f"of {offset} rows")
    fresh = incoming.filter(pa.array(rows < 0)) if (rows < 0).any() else incoming.slice(0, 0)
    _, new, _, c = merge_into_base(None, fresh, ordering=ordering, merge_mode=merge_mode)
    counts += c
    if new.num_rows:
        yield write_new(new, stored.schema.empty_table() if stored.num_rows else None)


def _merged(batch: pa.Table, incoming: pa.Table, which: np.ndarray, rows: np.ndarray, *, ordering: Ordering,
            merge_mode: str, counts: MergeCounts,
            write_new: Callable[[pa.Table, pa.Table | None], pa.Table]) -> pa.Table:
    """One batch's piece: its stored rows kept, then the incoming records ``which`` that
    meet its ``rows``."""
    mine = incoming.take(pa.array(which))
    mine = mine.set_column(mine.column_names.index(ROW), ROW, pa.array(rows, pa.int64()))
    kept, new, _, c = merge_into_base(batch, mine, ordering=ordering, merge_mode=merge_mode)
    counts += c
    if not new.num_rows:
        return kept
    written = write_new(new, batch)
    if not written.schema.equals(kept.schema, check_metadata=False):   # a stored file read without some dictionary
        written = written.cast(kept.schema)
    return pa.concat_tables([kept, written])


def placed(stored: StoredRows, incoming: pa.Table, bloom: BloomConfig | None) -> tuple[pa.Table, Footer | None]:
    """``incoming`` once per stored row of its key, with that row in ``_lk_row`` (null: a new
    key), as :func:`merged_pieces` places it (the stored keys read alone when no key index
    placed the records); and the stored file's footer when every record updates a stored key
    (none deletes, none is new): the rewrite then writes the keys the file holds
    (:func:`~lakesdk.engine.footers.kept_footer`)."""
    incoming = _placed(stored, incoming)[0]
    if stored.path is None or stored.table is not None or incoming.column(ROW).null_count or not _upserts_only(incoming):
        return incoming, None
    return incoming, kept_footer(stored.storage, stored.path, bloom)


def _upserts_only(records: pa.Table) -> bool:
    """Whether no record of ``records`` is a delete (a table without the operation column holds none)."""
    return OP not in records.column_names or not len(records) or \
        bool(pc.all(pc.equal(records.column(OP), OP_UPSERT)).as_py())


def _placed(stored: StoredRows, incoming: pa.Table) -> tuple[pa.Table, np.ndarray]:
    """``incoming`` once per stored row of its key, with that row in ``_lk_row`` and in the
    array returned (-1: a new key)."""
    if ROW not in incoming.column_names:
        parts = list(stored.columns([KEY])) if stored.num_rows else []
        keys = pa.concat_tables(parts) if parts else pa.table({KEY: pa.array([], pa.string())})
        incoming, pos = stored_copies(keys, incoming)
        incoming = incoming.append_column(ROW, pa.array(pos, pa.int64(), mask=pos < 0))
    pos = np.asarray(pc.fill_null(incoming.column(ROW), -1).to_numpy(zero_copy_only=False), dtype=np.int64)
    if len(pos) and pos.max() >= stored.num_rows:
        raise RuntimeError(f"{stored.path}: the key index placed records at row {int(pos.max())} of a file of "
                           f"{stored.num_rows} rows")
    return incoming, pos


class SlicePieces:
    """The merged rows of a merge-on-read file slice (:func:`~lakesdk.engine.slice_reader.read_slice`'s
    rows, in its order), a batch of the base file at a time, and the ``write_statistics`` of a
    file of them (none for a floating-point column holding NaN in the base file or in an upsert of
    the logs).  The log blocks are read first, whole; then each batch of a Parquet base file is
    read and its rows that no log touches handed on, while the touched ones are kept for the
    merge of the touched keys, whose winners come last (what a compaction writes, holding the
    logs and one batch of the base file rather than the whole slice).  A custom merger's slice,
    whose winners may hold values that no version holds (a NaN the statistics must know of
    before the first row group), and a slice without a Parquet base file are read whole.  Opened
    at construction; closed by :meth:`close` (a ``with`` block), taken or not.  ``bloom``: the
    writer's filter settings, for :attr:`footer`: the base file's footer when the merged rows
    hold the keys it holds (:meth:`_kept_footer`), else None."""

    def __init__(self, ctx: SliceReadContext, sl: FileSlice, bloom: BloomConfig | None = None) -> None:
        from lakesdk.engine.base_file import PARQUET, reader_for
        self.ctx, self.slice = ctx, sl
        self._rows: StoredRows | None = None
        self._whole: pa.Table | None = None
        self.footer: Footer | None = None
        full = ctx.full_schema
        if not sl.base_path or reader_for(sl.base_path) is not PARQUET or ctx.merger is not None:
            from lakesdk.format.parquet_encoding import statistics_columns
            self._whole = read_slice(ctx, sl)
            self.statistics: bool | list[str] = statistics_columns(self._whole)
            return
        self._logs = log_versions(ctx, sl, full)
        self._live = [t for t in self._logs if t.num_rows]
        self._rows = StoredRows(ctx.storage, full, path=sl.base_path)
        try:
            upserts = pa.concat_tables([t.select([*full.names, OP]) for t in self._live]) if self._live else \
                full.empty_table()
            self.statistics = nan_statistics(self._rows, upserts, full)
            self._touched()
            self.footer = self._kept_footer(bloom)
        except BaseException:
            self.close()
            raise

    def __iter__(self) -> Iterator[pa.Table]:
        if self._whole is not None:
            whole, self._whole = self._whole, None
            yield whole
            return
        rows, sl = self._rows, self.slice
        assert rows is not None
        if not self._live:    # no visible log record: the base file as it is (as read_slice reads it)
            for batch in rows.batches():
                flagged = None if sl.log_files else deleted_flags(batch)
                yield batch if flagged is None else batch.filter(pc.invert(flagged))
            return
        keys, hits, at = self._keys, self._hits, 0
        touched: list[pa.Table] = []
        for batch in rows.batches():
            n = batch.num_rows
            kept, hit = split_base(batch, keys, None, self._live[0].schema,
                                   None if hits is None else pa.array(hits[at: at + n]))
            at += n
            if hit is not None:
                touched.append(hit)
            yield kept
            del batch, kept
        merged = merge_touched(self.ctx, [(pa.concat_tables(touched) if touched else None, self._logs, len(keys))])
        if merged is not None:
            yield as_rows_of(merged, self.ctx.full_schema)

    def _kept_footer(self, bloom: BloomConfig | None) -> Footer | None:
        """The base file's footer, when the slice's merged rows hold the keys it holds: no
        log deletes, and every key the logs write is a key of the base file (its keys read
        alone, cheaper than hashing them: :func:`~lakesdk.engine.footers.kept_footer`)."""
        rows = self._rows
        if rows is None or rows.path is None or bloom is None:
            return None
        if not all(_upserts_only(t) for t in self._live):
            return None
        if len(self._keys) and (self._hits is None or self._found != len(self._keys)):   # a log key it may lack
            return None
        return kept_footer(rows.storage, rows.path, bloom)

    def _touched(self) -> None:
        """The log keys (``_keys``), and on a local file system which rows of the base file hold
        one (``_hits``: its key column read alone, :data:`_KEY_ROWS` keys at a time, so that the
        set of log keys is built once per million rows, not once per batch of the merge) and
        how many distinct log keys they hold (``_found``).  Elsewhere each batch is matched
        as it comes (a second read of the keys would cost round trips)."""
        self._keys = keys = touched_keys(self._live)
        self._hits: np.ndarray | None = None
        self._found = 0
        if not len(keys) or self._rows is None or not self._rows.storage.is_local:
            return
        hits, found = [], []
        for part in self._rows.columns([KEY], _KEY_ROWS):
            stored = pc.cast(part.column(KEY), keys.type)
            hit = pc.is_in(stored, value_set=keys)
            hits.append(np.asarray(hit.to_numpy(zero_copy_only=False), dtype=bool))
            found += stored.filter(hit).chunks
        self._hits = np.concatenate(hits) if hits else np.zeros(0, bool)
        self._found = int(pc.count_distinct(pa.chunked_array(found, keys.type)).as_py())

    def close(self) -> None:
        if self._rows is not None:
            self._rows.close()
            self._rows = None

    def __enter__(self) -> "SlicePieces":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def merge_partial_into_base(ctx: Any, base: pa.Table | None,
                             incoming: pa.Table) -> tuple[pa.Table | None, pa.Table, MergeCounts]:
    """Partial update: stitch each key's column groups from the stored row and the
    incoming versions (see :func:`lakesdk.merge.slice_merge.merge_partial`)."""
    inc = conform(incoming, ctx.file_schema, keep=[OP, SEQ])
    seq = pc.add(pc.cast(inc.column(SEQ), pa.int64()), 1)
    inc = inc.set_column(inc.column_names.index(SEQ), SEQ, seq)
    parts = [inc]
    base_keys = pa.array([], pa.string())
    if base is not None and base.num_rows:
        n = base.num_rows
        b = base.append_column(OP, pa.repeat(pa.scalar(0, pa.int8()), n)).append_column(SEQ, pa.repeat(pa.scalar(0, pa.int64()), n))
        parts.insert(0, b.select(inc.column_names))
        base_keys = base.column(KEY)
    from lakesdk.merge.slice_merge import merge_versions
    merged = merge_versions(pa.concat_tables(parts), ordering=ctx.ordering, merge_mode=ctx.merge_mode,
                            column_groups=ctx.column_groups, merger=ctx.merger)
    touched = pc.is_in(merged.column(KEY), value_set=pc.unique(incoming.column(KEY)))
    # a stored row a custom merger chose over the incoming versions stays as it is stored (its
    # commit time too), as Hudi's merge handle copies the old record when the merger returns it
    stored_won = pc.and_(touched, pc.equal(merged.column(SEQ), 0))
    fresh = pc.and_(touched, pc.invert(stored_won))
    kept = merged.filter(pc.invert(fresh)).drop_columns([OP, SEQ])
    new = merged.filter(fresh).drop_columns([OP, SEQ])
    in_base = pc.is_in(new.column(KEY), value_set=base_keys)
    updated = pc.sum(pc.cast(in_base, pa.int64())).as_py() or 0
    ups = incoming.filter(pc.equal(incoming.column(OP), 1))
    deleted = int(pc.sum(pc.cast(pc.is_in(ups.column(KEY), value_set=base_keys), pa.int64())).as_py() or 0)
    skipped = pc.sum(pc.cast(stored_won, pa.int64())).as_py() or 0
    return kept, new, MergeCounts(inserted=new.num_rows - updated, updated=updated, deleted=deleted, skipped=skipped)
