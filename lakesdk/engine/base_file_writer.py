"""Base files written as their rows come: each piece of rows written (as row groups) before the
next is computed, the footer (key range and bloom filter of every key written) last.

A file group's rewrite hands its rows over one row group of the stored file at a time
(:mod:`lakesdk.engine.group_merge`), so that a write holds one row group of the old file and
the encoded pages of the new one, not both files' rows (Hudi's merge handle streams the
stored records the same way).  Written through Arrow's own file I/O on a local file system,
through the storage's output stream elsewhere.
"""

from __future__ import annotations

import base64
import os
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Iterable

import pyarrow as pa
import pyarrow.parquet as pq

from lakesdk import _faults as faults
from lakesdk.format.bloom import FOOTER_KEYS, BloomConfig, FooterIndex
from lakesdk.format.bloom_builder import FooterBuilder
from lakesdk.format.schema import META_FIELDS
from lakesdk.storage import Storage

__all__ = ["ROW_GROUP", "parquet_options", "write_base_file", "Footer", "measured_record_size"]

#: rows per row group of a base file (and per piece of a rewrite)
ROW_GROUP = 1 << 17
# A column's dictionary is given up once it outgrows this many bytes (Parquet then writes the
# rest of the column chunk plain).  Arrow's default (1 MiB) lets a column of unique values
# (an id, a name) build a large dictionary before it falls back, which costs about a third of
# the write; columns of few distinct values (the commit time, the file name, a category) stay
# dictionary-encoded within 64 KiB.
_DICT_PAGE_LIMIT = 64 * 1024
# unique per record: dictionary encoding only costs time there
_NO_DICT = ("_hoodie_commit_seqno", "_hoodie_record_key")
_KEY = "_hoodie_record_key"

#: the footer entries of a base file and what they tell the key index (None: no key)
Footer = tuple[dict[bytes, bytes], "FooterIndex | None"]


def parquet_options(compression: str, sample: pa.Table, statistics: bool | list[str]) -> dict[str, Any]:
    """Writer options of a base file: dictionaries chosen from ``sample`` (its first rows;
    :mod:`lakesdk.format.parquet_encoding`), ``statistics`` as
    :func:`~lakesdk.format.parquet_encoding.statistics_columns` says for all its rows."""
    from lakesdk.format.parquet_encoding import dictionary_columns
    return {"compression": compression, "write_statistics": statistics,
            "use_dictionary": dictionary_columns(sample, limit=_DICT_PAGE_LIMIT, never=_NO_DICT),
            "dictionary_pagesize_limit": _DICT_PAGE_LIMIT}


def measured_record_size(sample: pa.Table, compression: str) -> int:
    """Bytes a record of ``sample`` (rows with their meta columns, evenly drawn from the rows
    about to be written) takes in a base file, as its writer writes it: what sizes the files
    of a table's first write, before any commit tells the real size (Hudi's bulk insert rolls
    its files over at the bytes written; lakesdk splits the rows at once, by this size)."""
    def size(t: pa.Table) -> int:
        sink = pa.BufferOutputStream()
        pq.write_table(t, sink, row_group_size=ROW_GROUP, **parquet_options(compression, t, True))
        return int(sink.getvalue().size)
    if not sample.num_rows:
        return 1
    return max(1, -(-(size(sample) - size(sample.slice(0, 0))) // sample.num_rows))


def write_base_file(storage: Storage, path: str, pieces: Iterable[pa.Table], *, compression: str, schema: pa.Schema,
                    bloom: BloomConfig | None, footer: Footer | None = None,
                    statistics: bool | list[str] | None = None, half: bool = False) -> tuple[int, int, FooterIndex | None]:
    """Write ``pieces`` (tables of one schema, meta columns first) as the base file ``path``:
    (its size, its rows, what its footer tells the key index).

    ``schema``: the file's schema when no piece holds a row (each piece has its own).
    ``footer``: the footer of the keys about to be written, when computed already; otherwise
    the footer of the keys written (key range, and the bloom filter of ``bloom``'s settings), built
    on a side thread as each piece is written (:class:`~lakesdk.format.bloom_builder.FooterBuilder`:
    the keys of a piece are hashed while the next is encoded).  ``statistics``: the writer's
    ``write_statistics`` for all the rows (None: worked out from the one piece there must then
    be).  ``half``: an injected fault, the file left half written and the write failing.  A
    piece that fails to come (a damaged stored file found mid-way) fails the write and leaves
    no file behind."""
    it = iter([pieces] if isinstance(pieces, pa.Table) else pieces)
    first: pa.Table | None = None
    for piece in it:
        first = piece
        if piece.num_rows:
            break
    piece = None
    if first is None:
        first = schema.empty_table()
    if statistics is None:
        from lakesdk.format.parquet_encoding import statistics_columns
        statistics = statistics_columns(first)
    stale = {k: v for k, v in (first.schema.metadata or {}).items() if k not in FOOTER_KEYS}
    schema = first.schema.with_metadata(stale) if stale else first.schema.remove_metadata()
    options = parquet_options(compression, first, statistics)
    named = _named_schema(schema)
    dictionaries = any(pa.types.is_dictionary(f.type) for f in schema)
    if named is not None:       # the writer's own ARROW:schema would name the dictionaries
        options["store_schema"] = False
    head = [first]       # each piece let go once written (a rewrite's row group): not held here
    del first
    builder = FooterBuilder(bloom) if footer is None else None
    hashing: list[Future[None]] = []
    rows = 0
    pending: list[pa.Table] = []    # pieces not written yet: a row group is ROW_GROUP rows, whatever the pieces
    held = 0

    def flush(w: pq.ParquetWriter, n: int) -> None:
        """Write the first ``n`` rows held (row groups of ROW_GROUP rows)."""
        nonlocal pending, held
        whole = pa.concat_tables(pending)
        if dictionaries:   # pieces of other dictionaries: one per row group, else the writer gives up on it
            whole = _unified(whole, path)
        w.write_table(whole.slice(0, n), row_group_size=ROW_GROUP)
        pending = [whole.slice(n)] if n < held else []
        held -= n

    def write(w: pq.ParquetWriter, side: ThreadPoolExecutor, t: pa.Table) -> None:
        nonlocal rows, held
        if not t.schema.equals(schema, check_metadata=False):
            t = t.cast(schema)
        if builder is not None:
            hashing.append(side.submit(builder.add, t.column(_KEY)))
        rows += t.num_rows
        pending.append(t)
        held += t.num_rows
        if held >= ROW_GROUP:
            flush(w, held - held % ROW_GROUP)

    def write_all(w: pq.ParquetWriter) -> FooterIndex | None:
        side = ThreadPoolExecutor(max_workers=1, thread_name_prefix="lakesdk-footer")
        try:
            write(w, side, head.pop())
            for t in it:
                if t.num_rows:
                    write(w, side, t)
                del t
            if pending:     # the rest (a file of no row still gets its one empty row group)
                flush(w, held)
            for f in hashing:
                f.result()
        finally:
            side.shutdown(wait=True, cancel_futures=True)
        entries, index = footer if footer is not None else builder.finish() if builder is not None else ({}, None)
        if named is not None:
            entries = {**named, **entries}
        if entries:
            w.add_key_value_metadata(entries)
        if index is not None:   # a footer given (kept from the stored file) was of its row count
            index.rows = rows
        return index

    injected = False
    try:
        if storage.is_local and not half:   # Arrow's own file I/O: no Python file object in the way
            local = storage.url(path)
            os.makedirs(os.path.dirname(local), exist_ok=True)
            with pq.ParquetWriter(local, schema, **options) as w:
                index = write_all(w)
            return os.path.getsize(local), rows, index
        with storage.open_output(path) as f:
            with pq.ParquetWriter(f, schema, **options) as w:
                whole = pa.concat_tables([t.cast(schema) for t in (head.pop(), *it)]) if half else None
                if whole is not None and whole.num_rows > 1:
                    w.write_table(whole.slice(0, whole.num_rows // 2))
                    f.flush()
                    faults.crash_point("mid_data_file")
                    faults.record(f"failed first attempt {path}")
                    injected = True
                    raise RuntimeError(f"injected failure of the first task attempt writing {path}")
                if whole is not None:
                    head.append(whole)
                index = write_all(w)
        return storage.size(path), rows, index
    except BaseException:
        if not injected:
            _remove(storage, path)
        raise


def _named_schema(schema: pa.Schema) -> dict[bytes, bytes] | None:
    """The footer's ``ARROW:schema`` (and the schema's own entries) of a file written from
    columns of ``schema`` whose meta columns of one value (a new file's commit time, file name
    and partition path: :func:`~lakesdk.engine.meta_columns.with_meta`) are dictionaries, which
    Parquet writes as given instead of hashing every value: the entries Arrow's writer stores
    for the same columns as plain strings, so that readers find the schema every base file has
    (a dictionary column of the table's own stays one).  None when no meta column is a dictionary."""
    if not any(f.name in META_FIELDS and pa.types.is_dictionary(f.type) for f in schema):
        return None
    plain = pa.schema([f.with_type(f.type.value_type) if f.name in META_FIELDS and pa.types.is_dictionary(f.type)
                       else f for f in schema], metadata=schema.metadata)
    return {b"ARROW:schema": base64.b64encode(plain.serialize().to_pybytes()), **(schema.metadata or {})}


def _unified(rows: pa.Table, path: str) -> pa.Table:
    """``rows`` with one dictionary per dictionary column; a column whose values outgrow its
    index type (a table's ``dictionary<int8, ...>`` of more than 127 values in a row group) fails
    the write: no file could hold them under the table's type."""
    try:
        return rows.unify_dictionaries()
    except pa.ArrowInvalid as e:
        from lakesdk.exceptions import IncompatibleSchemaError
        narrow = [f"{f.name} ({f.type})" for f in rows.schema
                  if pa.types.is_dictionary(f.type) and f.type.index_type.bit_width < 32]
        raise IncompatibleSchemaError(f"{path}: the values of dictionary column(s) {', '.join(narrow) or '?'} in one "
                                      f"row group outgrow the index type; make its indices int32 ({e})") from e


def _remove(storage: Storage, path: str) -> None:
    """Remove a base file whose write failed (its rows did not all come); a failure to remove
    it leaves it to the rollback of the write, as a crashed task's file is."""
    try:
        storage.delete(path)
    except Exception:  # noqa: BLE001 - the write's own error is the one to raise
        pass
