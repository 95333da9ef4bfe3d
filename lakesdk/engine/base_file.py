"""Reading base files, whatever their format: the reader is chosen by the file's extension.

A Hudi base file is ``<fileId>_<writeToken>_<instant>.<ext>``; ``hoodie.table.base.file.format``
says which format a table writes (``PARQUET``, or ``LANCE`` since Hudi 1.2).  Every read of a
base file goes through :func:`reader_for`:

* ``.parquet``: Arrow's Parquet reader; several files are read in one Arrow dataset scan (the
  filter pushed into it, or, when it reads floating-point values, whose Parquet bounds leave
  NaN out, a relaxed form of it pushed and the filter applied after reading the columns it
  needs: :class:`~lakesdk.format.read_plan.ScanFilter`; missing columns read as nulls, types
  cast to the read schema).
* ``.lance``: one Lance file per base file (Hudi writes single Lance files, not Lance datasets),
  read with ``lance.file.LanceFileReader`` from the optional ``pylance`` package
  (``pip install 'lakesdk[lance]'``); without it a read raises
  :class:`~lakesdk.MissingDependencyError`.  Files on a store other than the local disk are
  copied to a temporary local file first (pylance reads paths, not Python file objects).

Damaged bytes raise :class:`~lakesdk.CorruptFileError` naming the file, a missing file
``FileNotFoundError``, as for every file a read needs.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from lakesdk.exceptions import MissingDependencyError, TableConfigError
from lakesdk.format.damaged import damaged_file, damaged_files
from lakesdk.format.read_plan import ScanFilter

__all__ = ["BASE_FILE_EXTENSIONS", "BaseFileReader", "ParquetReader", "LanceReader", "reader_for", "by_reader", "scan_table", "scan_batches",
           "scan_tagged", "read_file", "file_schema", "file_rows", "needs_arrow_task"]


class BaseFileReader:
    """How base files of one format are read.  Methods take the table's
    :class:`~lakesdk.storage.Storage` and paths relative to the table."""

    name = ""
    extension = ""

    def schema(self, storage: Any, path: str) -> pa.Schema:
        """The file's Arrow schema (without the file's key-value metadata)."""
        raise NotImplementedError

    def num_rows(self, storage: Any, path: str) -> int:
        """The number of rows, from the file's metadata (no data read)."""
        raise NotImplementedError

    def read(self, storage: Any, path: str, columns: list[str] | None = None) -> pa.Table:
        """The file's columns among ``columns`` (None: all), as they are in the file."""
        raise NotImplementedError

    def scan(self, storage: Any, paths: list[str], schema: pa.Schema, columns: list[str] | None,
             flt: ScanFilter | None) -> Iterator[tuple[str, pa.RecordBatch]]:
        """(file, batch) of the rows of ``paths`` that ``flt`` keeps, ``columns`` of ``schema``
        (a column a file lacks is null, types are cast to ``schema``'s)."""
        out = _empty(schema, columns)
        for path in paths:
            if flt is None:
                t = _project(self.read(storage, path, out.names), schema, columns)
            else:   # the filter may name columns the read does not return
                names = [*out.names, *(c for c in schema.names if c in flt.columns and c not in out.names)]
                t = _project(self.read(storage, path, names), schema, names).filter(flt.expr).select(out.names)
            for b in t.to_batches():
                yield path, b

    def scan_table(self, storage: Any, paths: list[str], schema: pa.Schema, columns: list[str] | None,
                   flt: ScanFilter | None) -> pa.Table:
        out = _empty(schema, columns)
        return pa.Table.from_batches([b for _, b in self.scan(storage, paths, schema, columns, flt)], out)


def _empty(schema: pa.Schema, columns: list[str] | None) -> pa.Schema:
    return schema if columns is None else pa.schema([schema.field(c) for c in columns])


def _project(t: pa.Table, schema: pa.Schema, columns: list[str] | None) -> pa.Table:
    """``t`` as ``columns`` of ``schema``: missing columns null, types cast."""
    out = _empty(schema, columns)
    cols = []
    for f in out:
        if f.name in t.column_names:
            c = t.column(f.name)
            cols.append(c if c.type == f.type else c.cast(f.type))
        else:
            cols.append(pa.nulls(t.num_rows, f.type))
    return pa.Table.from_arrays(cols, schema=out)


class ParquetReader(BaseFileReader):
    """Parquet base files: Arrow's reader; several files in one dataset scan."""

    name = "PARQUET"
    extension = "parquet"

    def schema(self, storage: Any, path: str) -> pa.Schema:
        import pyarrow.parquet as pq
        with damaged_file(path):
            if storage.is_local:
                return pq.read_schema(storage.url(path)).remove_metadata()
            with storage.open_input(path) as f:
                return pq.read_schema(f).remove_metadata()

    def num_rows(self, storage: Any, path: str) -> int:
        import pyarrow.parquet as pq
        with damaged_file(path):
            if storage.is_local:
                return int(pq.ParquetFile(storage.url(path)).metadata.num_rows)
            with storage.open_input(path) as f:
                return int(pq.ParquetFile(f).metadata.num_rows)

    def read(self, storage: Any, path: str, columns: list[str] | None = None) -> pa.Table:
        import pyarrow.parquet as pq
        with damaged_file(path):
            if storage.is_local:
                pf = pq.ParquetFile(storage.url(path))
                cols = None if columns is None else [c for c in columns if c in pf.schema_arrow.names]
                return pf.read(columns=cols)
            with storage.open_input(path) as f:
                pf = pq.ParquetFile(f)
                cols = None if columns is None else [c for c in columns if c in pf.schema_arrow.names]
                return pf.read(columns=cols)

    def _dataset(self, storage: Any, paths: list[str], schema: pa.Schema) -> tuple[Any, list[str]]:
        import pyarrow.dataset as ds
        fs, urls = arrow_fs(storage, paths)
        return ds.dataset(urls, schema=schema, format="parquet", filesystem=fs), urls

    def scan(self, storage: Any, paths: list[str], schema: pa.Schema, columns: list[str] | None,
             flt: ScanFilter | None, *, readahead: int | None = None) -> Iterator[tuple[str, pa.RecordBatch]]:
        _, urls = arrow_fs(storage, paths)
        file_of = dict(zip(urls, paths))
        with damaged_files(list(urls)):
            dataset, _ = self._dataset(storage, paths, schema)
            kw = {} if readahead is None else {"fragment_readahead": readahead}
            read, pushed = _scan_args(columns, flt)
            for tagged in dataset.scanner(columns=read, filter=pushed, **kw).scan_batches():
                yield file_of[tagged.fragment.path], _after(tagged.record_batch, columns, flt)

    def scan_table(self, storage: Any, paths: list[str], schema: pa.Schema, columns: list[str] | None,
                   flt: ScanFilter | None) -> pa.Table:
        _, urls = arrow_fs(storage, paths)
        with damaged_files(list(urls)):
            dataset, _ = self._dataset(storage, paths, schema)
            read, pushed = _scan_args(columns, flt)
            t = dataset.to_table(columns=read, filter=pushed)
            if flt is None or flt.exact:
                return t
            t = t.filter(flt.expr)
            return t.select(columns) if columns is not None else t

    def batches(self, storage: Any, paths: list[str], schema: pa.Schema, columns: list[str] | None,
                flt: ScanFilter | None) -> Iterator[pa.RecordBatch]:
        _, urls = arrow_fs(storage, paths)
        with damaged_files(list(urls)):
            dataset, _ = self._dataset(storage, paths, schema)
            read, pushed = _scan_args(columns, flt)
            for b in dataset.to_batches(columns=read, filter=pushed, fragment_readahead=2):
                yield _after(b, columns, flt)


def _scan_args(columns: list[str] | None, flt: ScanFilter | None) -> tuple[list[str] | None, pc.Expression | None]:
    """The columns an Arrow dataset scan returning ``columns`` reads and the filter it gets:
    ``flt`` itself when exact; else (a filter on floating-point values, whose Parquet bounds
    leave NaN out: :meth:`lakesdk.read.bind.Bound.scan_filter`) the filter's columns too and
    its relaxed form, which prunes no row group the exact filter keeps rows of (:func:`_after`
    filters exactly)."""
    if flt is None:
        return columns, None
    return flt.read_columns(columns), flt.prune


def _after(batch: pa.RecordBatch, columns: list[str] | None, flt: ScanFilter | None) -> pa.RecordBatch:
    """``columns`` of the rows of ``batch`` that ``flt`` keeps, when it was not pushed into the
    scan whole (:func:`_scan_args`); else ``batch``."""
    if flt is None or flt.exact:
        return batch
    t = pa.Table.from_batches([batch]).filter(flt.expr)
    t = t.select(columns) if columns is not None else t
    return t.combine_chunks().to_batches()[0] if t.num_rows else pa.RecordBatch.from_pylist([], schema=t.schema)


class LanceReader(BaseFileReader):
    """Lance base files (one Lance file each): ``lance.file.LanceFileReader`` of ``pylance``."""

    name = "LANCE"
    extension = "lance"

    @staticmethod
    def _module() -> Any:
        try:
            import lance.file
        except ImportError as exc:
            raise MissingDependencyError("pylance", "lance", "Reading Lance base files") from exc
        return lance.file

    @contextmanager
    def _local(self, storage: Any, path: str) -> Iterator[str]:
        """A local path of the file: the file itself, or a temporary copy for a remote store."""
        if storage.is_local:
            local = storage.url(path)
            if not os.path.isfile(local):
                raise FileNotFoundError(path)
            yield local
            return
        with tempfile.TemporaryDirectory(prefix="lakesdk-lance-") as tmp:
            local = os.path.join(tmp, os.path.basename(path))
            with storage.open_input(path) as src, open(local, "wb") as dst:
                while chunk := src.read(8 << 20):
                    dst.write(chunk)
            yield local

    def schema(self, storage: Any, path: str) -> pa.Schema:
        mod = self._module()
        with self._local(storage, path) as local, damaged_file(path, "Lance file"):
            return mod.LanceFileReader(local).metadata().schema.remove_metadata()

    def num_rows(self, storage: Any, path: str) -> int:
        mod = self._module()
        with self._local(storage, path) as local, damaged_file(path, "Lance file"):
            return int(mod.LanceFileReader(local).num_rows())

    def read(self, storage: Any, path: str, columns: list[str] | None = None) -> pa.Table:
        mod = self._module()
        with self._local(storage, path) as local, damaged_file(path, "Lance file"):
            reader = mod.LanceFileReader(local)
            if columns is not None:
                names = reader.metadata().schema.names
                columns = [c for c in columns if c in names]
                if not columns:   # no column asked for is in the file: its rows without columns
                    return pa.table({"_": pa.nulls(reader.num_rows())}).drop_columns(["_"])
                reader = mod.LanceFileReader(local, columns=columns)
            return reader.read_all().to_table().replace_schema_metadata(None)


PARQUET = ParquetReader()
LANCE = LanceReader()
_BY_EXTENSION: dict[str, BaseFileReader] = {PARQUET.extension: PARQUET, LANCE.extension: LANCE}
#: the file name endings of the base files lakesdk reads
BASE_FILE_EXTENSIONS = tuple(f".{ext}" for ext in _BY_EXTENSION)


def reader_for(path: str) -> BaseFileReader:
    """The reader of a base file, by its extension."""
    ext = path.rsplit(".", 1)[-1].lower() if "." in os.path.basename(path) else ""
    found = _BY_EXTENSION.get(ext)
    if found is None:
        raise TableConfigError(
            f"{path}: base files of format {ext.upper() or '(no extension)'!r} cannot be read: lakesdk reads PARQUET "
            "(.parquet) and LANCE (.lance) base files", key="hoodie.table.base.file.format")
    return found


def by_reader(paths: Iterable[str]) -> list[tuple[BaseFileReader, list[str]]]:
    """``paths`` grouped by their reader, in the order each format first appears."""
    groups: dict[str, tuple[BaseFileReader, list[str]]] = {}
    for p in paths:
        r = reader_for(p)
        groups.setdefault(r.name, (r, []))[1].append(p)
    return list(groups.values())


def scan_table(storage: Any, paths: list[str], schema: pa.Schema, columns: list[str] | None,
               flt: ScanFilter | None) -> pa.Table:
    """``columns`` of the rows of base files ``paths`` that ``flt`` keeps, in ``schema``."""
    parts = [r.scan_table(storage, ps, schema, columns, flt) for r, ps in by_reader(paths)]
    if len(parts) == 1:
        return parts[0]
    if not parts:
        return _empty(schema, columns).empty_table()
    return pa.concat_tables(parts)


def scan_batches(storage: Any, paths: list[str], schema: pa.Schema, columns: list[str] | None,
                 flt: ScanFilter | None) -> Iterator[pa.RecordBatch]:
    """:func:`scan_table` as a stream of record batches (a few files read ahead)."""
    for r, ps in by_reader(paths):
        if isinstance(r, ParquetReader):
            yield from r.batches(storage, ps, schema, columns, flt)
        else:
            for _, b in r.scan(storage, ps, schema, columns, flt):
                yield b


def scan_tagged(storage: Any, paths: list[str], schema: pa.Schema,
                columns: list[str] | None) -> Iterator[tuple[str, pa.RecordBatch]]:
    """(file, batch) of ``columns`` of every row of base files ``paths``, in ``schema``."""
    for r, ps in by_reader(paths):
        yield from r.scan(storage, ps, schema, columns, None)


def read_file(storage: Any, path: str, columns: list[str] | None = None) -> pa.Table:
    """A base file's columns among ``columns`` (None: all), as they are in the file."""
    return reader_for(path).read(storage, path, columns)


def file_schema(storage: Any, path: str) -> pa.Schema:
    """A base file's Arrow schema (no key-value metadata)."""
    return reader_for(path).schema(storage, path)


def file_rows(storage: Any, path: str) -> int:
    """A base file's number of rows, from its metadata."""
    return reader_for(path).num_rows(storage, path)


def needs_arrow_task(paths: Iterable[str]) -> bool:
    """True when a base file is in a format Spark has no reader for here (read in Arrow tasks)."""
    return any(not isinstance(reader_for(p), ParquetReader) for p in paths)


def arrow_fs(storage: Any, files: list[str]) -> tuple[Any, list[str]]:
    """An Arrow file system for ``storage`` and the files' paths on it."""
    import pyarrow.fs as pafs
    if storage.is_local:
        return pafs.LocalFileSystem(), [storage.url(f) for f in files]
    handler = pafs.PyFileSystem(pafs.FSSpecHandler(storage.fs))
    return handler, [f"{storage.root}/{f}" for f in files]
