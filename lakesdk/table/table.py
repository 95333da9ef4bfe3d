"""Table handles: the fluent API over one Hudi table."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pyarrow as pa

from lakesdk.commit.context import Resources, TableContext
from lakesdk.commit.results import WriteResult, moment_time
from lakesdk.config.options import TableOptions
from lakesdk.engine.session import announce_session
from lakesdk.exceptions import OptionsError
from lakesdk.format.table_config import TableConfig
from lakesdk.format.timeline import Timeline
from lakesdk.read.properties import load_config
from lakesdk.storage import Storage
from lakesdk.table.namespaces import Inspect, Maintenance
from lakesdk.table.query import Query
from lakesdk.table.renamed import renamed_keyword
from lakesdk.table.write import WriteOperation

if TYPE_CHECKING:
    import pandas as pd

    from lakesdk.engine.spark_types import DataFrame as SparkDataFrame
    from lakesdk.engine.spark_types import SparkSession
    from lakesdk.table.changes import ChangeQuery
    from lakesdk.table.merge import MergeBuilder
    from lakesdk.widgets import TableWidgets

__all__ = ["Table", "TableOptions", "validate_options"]


def validate_options(options: TableOptions) -> TableOptions:
    """The options of a handle: a :class:`TableOptions` checks its values (and their
    combinations) when it is built, as Hudi validates its write config (see
    :mod:`lakesdk.config.options`)."""
    from lakesdk.exceptions import OptionsError
    if not isinstance(options, TableOptions):
        raise OptionsError(f"options must be a lakesdk.TableOptions, found {type(options).__name__}: build one with "
                           "TableOptions(...) or TableOptions.from_hoodie({...})")
    return options.check_combination()


class Table:
    """A handle on one table.

    The handle is a reference: every query resolves the table's latest state when it runs
    (so a cell that reads after a write sees the write), and :meth:`as_of` pins a moment.
    Writes return a :class:`~lakesdk.commit.results.WriteResult`.

    A handle is a value around a :class:`~lakesdk.commit.context.TableContext`:
    :meth:`refresh` and :meth:`with_options` return new handles.  What its writes start (the
    marker server, a local HTTP server and its threads) belongs to the owner of the handle:
    the :class:`~lakesdk.Lake` that handed it out (``lake.close()`` ends it), or the handle
    itself when opened alone.  :meth:`close` (or the end of a ``with`` block) stops this
    table's marker server; a later write starts a new one.
    """

    def __init__(self, storage: Storage, config: TableConfig | None = None, *, spark: Any = None,
                 options: TableOptions | None = None, resources: Resources | None = None) -> None:
        self._ctx = TableContext(storage, config or load_config(storage), validate_options(options or TableOptions()),
                                 resources if resources is not None else Resources(), spark)
        self._stored_key_encoding: str | None = None   # what the stored keys showed (Hudi's encoding only)
        if spark is not None:
            announce_session(spark)   # a session given to lakesdk knows the ``lakesdk`` data source

    @classmethod
    def _of(cls, ctx: TableContext) -> "Table":
        t = cls.__new__(cls)
        t._ctx = ctx
        t._stored_key_encoding = None
        return t

    # -- identity ---------------------------------------------------------------------------
    @property
    def context(self) -> TableContext:
        """The table context that services, streaming and engines take (internal API)."""
        return self._ctx

    @property
    def storage(self) -> Storage:
        return self._ctx.storage

    @property
    def config(self) -> TableConfig:
        return self._ctx.config

    @property
    def options(self) -> TableOptions:
        return self._ctx.options

    @options.setter
    def options(self, value: TableOptions) -> None:
        raise AttributeError("a table handle is a value: t = t.with_options(...) returns a handle with other options")

    def with_options(self, options: TableOptions | None = None, **changes: Any) -> "Table":
        """A new handle on the same table (and owner) with ``options``, or with the current
        options changed by keyword (``t.with_options(engine="local")``)."""
        from dataclasses import replace
        opts = validate_options(replace(options or self.options, **changes))
        c = self._ctx
        return Table._of(TableContext(c.storage, c.config, opts, c.resources, c.spark_session))

    @property
    def name(self) -> str:
        return self._ctx.name

    @property
    def path(self) -> str:
        return self._ctx.path

    @property
    def table_type(self) -> str:
        return self.config.table_type

    @property
    def key(self) -> tuple[str, ...]:
        return self.config.record_key_fields

    @property
    def partition_by(self) -> tuple[str, ...]:
        return self.config.partition_fields

    @property
    def ordering(self) -> str | None:
        """The (first) ordering field; :attr:`ordering_fields` names them all."""
        return self.config.ordering_field

    @property
    def ordering_fields(self) -> tuple[str, ...]:
        """The ordering fields (``hoodie.table.ordering.fields``), compared field by field."""
        return self.config.ordering_fields

    @property
    def spark(self) -> SparkSession:
        return self._ctx.spark

    def _key_encoding(self) -> str:
        """How this table's record keys write a null or empty key value (see
        :mod:`lakesdk.format.keys`): the table's ``hoodie.lakesdk.record.key.encoding``, else
        what its stored keys show (Hudi's encoding unless a key has an empty part written as
        nothing, as lakesdk wrote it before).  Reads the snapshot's keys; a handle remembers
        Hudi's encoding (nothing turns such a table's keys back)."""
        enc = self.config.key_encoding or self._stored_key_encoding
        if enc is not None:
            return enc
        from lakesdk.format.keys import HUDI_ENCODING, stored_key_encoding
        keys = self.read(columns=["_hoodie_record_key"]).to_arrow().column(0)
        enc = stored_key_encoding(keys, self.key, self.config.keygen_type)
        if enc == HUDI_ENCODING:
            self._stored_key_encoding = enc
        return enc

    def close(self) -> None:
        """Stop what writes started for this table in the handle's owner: the marker server,
        its threads and its listening socket (idempotent).  Reads and later writes still work:
        a write starts a new server, which the next ``close()`` stops.  Do not close a handle
        while a write of the table runs."""
        self._ctx.resources.close(self.storage)

    def __enter__(self) -> "Table":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def refresh(self) -> "Table":
        """A new handle with the table config re-read from storage (same options and owner)."""
        return Table._of(self._ctx.with_config(load_config(self.storage)))

    def _after_write(self) -> None:
        """A handle whose config names no metadata table while lakesdk keeps one (its first
        write built it) reads ``hoodie.properties`` again once: its plans then list from the
        MDT without asking storage whether there is one each time.  The write has landed: a
        failure to read it leaves the handle as it was (a later write tries again)."""
        from lakesdk.format.metadata_table import available_partitions
        from lakesdk.services.metadata_writer import keeps_metadata_table
        cfg = self._ctx.config
        if "files" not in available_partitions(cfg.props) and keeps_metadata_table(self._ctx, cfg):
            try:
                config = load_config(self.storage)
            except Exception:
                return
            self._ctx = self._ctx.with_config(config)

    # -- state ------------------------------------------------------------------------------
    @property
    def timeline(self) -> Timeline:
        """The active timeline, read now."""
        return self._ctx.timeline

    @property
    def schema(self) -> pa.Schema:
        """The table's data schema (without meta fields) at the latest commit."""
        return self._ctx.schema

    def history(self) -> pa.Table:
        """One row per completed instant, newest last, with its write statistics, as a
        ``pyarrow.Table`` of :data:`~lakesdk.table.listings.HISTORY_SCHEMA` (``.to_pandas()``
        for a pandas DataFrame).  Instants archived into the timeline history are included
        (``archived`` is True)."""
        from lakesdk.table.listings import history_table
        return history_table(self._ctx)

    # -- writes ------------------------------------------------------------------------------
    def write(self, data: Any, *, operation: str = "upsert", missing_columns: str = "error",
              truncate_nanoseconds: bool = False) -> WriteOperation:
        """Stage a write; call ``.execute()`` on the result.

        ``data``: a pandas, pyarrow, polars or Spark DataFrame, a dict of equally long columns
        (``{"id": [1, 2], "v": [2, 3]}``), one row as a dict of single values
        (``{"id": 1, "v": 2}``), or rows as a list of dicts.

        ``missing_columns``: what happens to table columns the data lacks: ``"error"`` (the
        default, as Hudi: :class:`MissingColumnError`), ``"null"`` (written as null) or
        ``"keep"`` (upserts only: updated records keep their stored values, a partial update).
        ``truncate_nanoseconds``: nanosecond timestamps are stored as microseconds (the unit
        of Hudi's schema); digits below the microsecond are an error unless this is set.

        On an event-time table every row written as data needs its ordering value: rows
        where it is null are refused before anything is written
        (:class:`~lakesdk.exceptions.NullOrderingValueError`, as Hudi refuses them); a delete
        may omit it and then always applies."""
        return WriteOperation(self, operation, data, missing_columns=missing_columns,  # type: ignore[arg-type]
                              truncate_nanoseconds=truncate_nanoseconds)

    def upsert(self, data: Any, *, missing_columns: str = "error", truncate_nanoseconds: bool = False) -> WriteResult:
        """Insert new records and update existing ones (by record key; event-time ordering
        by the ordering field when the table has one).  See :meth:`write` for the options."""
        return self.write(data, operation="upsert", missing_columns=missing_columns,
                          truncate_nanoseconds=truncate_nanoseconds).execute()

    def insert(self, data: Any, *, missing_columns: str = "error", truncate_nanoseconds: bool = False) -> WriteResult:
        """Insert records without looking up existing keys (Hudi's insert: faster than upsert;
        a key already in the table is then stored twice, and a later update or delete of it
        applies to every stored copy, as in Hudi)."""
        return self.write(data, operation="insert", missing_columns=missing_columns,
                          truncate_nanoseconds=truncate_nanoseconds).execute()

    def bulk_insert(self, data: Any, *, missing_columns: str = "error", truncate_nanoseconds: bool = False) -> WriteResult:
        """Write records straight into new files: no de-duplication, no key lookup (a key
        already in the table is then stored twice; see :meth:`insert`)."""
        return self.write(data, operation="bulk_insert", missing_columns=missing_columns,
                          truncate_nanoseconds=truncate_nanoseconds).execute()

    def delete(self, keys: Any = None, *, where: Any = None) -> WriteResult:
        """Delete records by key: a list of key values (tuples for composite keys), or rows
        (pandas, Arrow, Spark, dicts) holding the key fields (and the partition fields, which
        narrow the lookup).

        Or by predicate: ``where=`` takes the filters of :meth:`read` (text such as
        ``"city = 'sf' AND fare < 10"``, or ``[(column, op, value), ...]``); the keys (and
        partition fields) of the rows matching it in the latest snapshot are read, then
        deleted in one commit.  ``deleted`` of the result is the number of rows removed.

        A delete given keys commits a delete instant even when the table holds none of them
        (``deleted=0``), as Apache Hudi does, and so does a predicate matching no row; an empty
        list of keys is a no-op that commits nothing, as an empty upsert is."""
        if keys is not None and where is not None:
            raise OptionsError("delete() takes keys or where=, not both: pass the keys to delete, or a predicate "
                               "selecting the rows to delete (t.delete(where=\"city = 'sf'\"))", key="where")
        read_at = None
        if where is not None:
            read_at = self.context.store.load()     # before the rows are read: see WriteInput.read_at
            keys = self._keys_where(where)
        elif keys is None:
            raise OptionsError("delete() needs the keys to delete or where=: t.delete(['k1', 'k2']) or "
                               "t.delete(where=\"city = 'sf'\")", key="keys")
        return WriteOperation(self, "delete", keys, commit_empty=where is not None, read_at=read_at).execute()

    def _keys_where(self, where: Any) -> pa.Table:
        """The key and partition fields of the rows of the latest snapshot matching ``where``."""
        cols = list(dict.fromkeys([*self.key, *self.partition_by]))
        return self.read(columns=cols, where=where).to_arrow()

    def insert_overwrite(self, data: Any, *, scope: str = "partitions", missing_columns: str = "error",
                         truncate_nanoseconds: bool = False) -> WriteResult:
        """Replace the partitions the data touches (``scope="partitions"``), or the whole table
        (``scope="table"``), with the data: a replacecommit."""
        if scope not in ("partitions", "table"):
            from lakesdk.exceptions import OptionsError
            raise OptionsError(f"insert_overwrite(scope=...) must be 'partitions' (replace the partitions the data "
                               f"touches) or 'table' (replace the whole table), not {scope!r}; nothing was written",
                               key="scope")
        op = "insert_overwrite" if scope == "partitions" else "insert_overwrite_table"
        return self.write(data, operation=op, missing_columns=missing_columns,
                          truncate_nanoseconds=truncate_nanoseconds).execute()

    def merge(self, source: Any, on: str | list[str] | None = None, *, missing_columns: str = "error") -> MergeBuilder:
        """Start a merge (Delta Lake style) of ``source`` into this table, matched on ``on``
        (default: the record key; on a partitioned table within the source row's partition).
        Chain ``when_*`` clauses, then ``.execute()``.

        ``missing_columns``: table columns the source lacks, for ``when_matched_update_all``
        and ``when_not_matched_insert_all``: ``"error"`` (default, a ``MissingColumnError``
        naming them), ``"null"`` (both clauses write nulls there) or ``"keep"`` (updated
        rows keep their stored values, inserted rows get nulls).  Explicit clauses name
        their columns and are not affected."""
        from lakesdk.table.merge import MergeBuilder
        keys = (on,) if isinstance(on, str) else tuple(on) if on else self.key
        return MergeBuilder(self, source, keys, missing_columns=missing_columns)

    # -- reads -------------------------------------------------------------------------------
    def read(self, columns: list[str] | None = None, *, where: Any = None, as_of: Any = None,
             meta_fields: bool = False, read_optimized: bool = False, limit: int | None = None,
             filters: Any = None) -> Query:
        """A snapshot query (optionally projected, filtered, limited to ``limit`` rows and
        pinned to a moment).

        ``where``: a filter, text in Spark SQL's syntax (``"city = 'sf' AND fare > 20"``) or
        ``[(column, op, value), ...]`` (docs/filters.md).  ``meta_fields=True`` adds Hudi's
        ``_hoodie_*`` columns (left out by default, as in :meth:`incremental`).
        ``read_optimized=True`` reads only base files of a merge-on-read table (what the
        last compaction produced), skipping log merging.  ``filters=`` is the deprecated
        name of ``where=`` (a ``DeprecationWarning``; both given: ``OptionsError``)."""
        where = renamed_keyword("read", "where", where, "filters", filters)
        q = Query(self, meta=meta_fields, read_optimized=read_optimized).limit(limit)
        if columns is not None:
            q = q.select(*columns)
        if where is not None:
            q = q.where(where)
        if as_of is not None:
            q = q.as_of(as_of)
        return q

    def as_of(self, moment: Any) -> Query:
        """The table as of a moment: an instant time (yyyyMMddHHmmss[SSS]; need not be an
        instant's own), a datetime, an ISO string, an Instant or a WriteResult.  Before the
        first commit the result is empty.

        As Hudi does, reading raises TimeTravelError when the moment is at or after a write
        that is still pending (the answer could change when it completes), or before the
        earliest commit the last clean retained (its files may be gone); a savepointed
        instant stays readable."""
        return Query(self).as_of(moment)

    def changes(self, start: Any = None, end: Any = None, *, where: Any = None,
                start_inclusive: bool = False) -> ChangeQuery:
        """What each commit in ``(start, end]`` did to each record (Hudi's change data capture
        query): rows of ``op`` (``"i"``, ``"u"``, ``"d"``), ``ts_ms`` (the commit's instant time),
        ``before`` and ``after`` (the record's data columns as structs), in commit order.  The
        bounds are those of :meth:`incremental` (completion times on table version 8+).
        Clustering and compaction change no record.  Works with or without CDC logging
        (``create_table(cdc=True)``); a range reaching back past what a clean deleted raises
        ``TimeTravelError``.  ``where`` keeps the changes whose record matches (after the change;
        before it for a delete), a filter as :meth:`read` takes it.  docs/changes.md."""
        from lakesdk.table.changes import ChangeQuery
        if isinstance(start, str) and start.strip().lower() == "earliest":
            start = None
        q = ChangeQuery(self, start=moment_time(start), end=moment_time(end), start_inclusive=start_inclusive)
        return q.where(where) if where is not None else q

    def incremental(self, start: Any = None, end: Any = None, *, columns: list[str] | None = None,
                    where: Any = None, meta_fields: bool = False, start_inclusive: bool = False) -> Query:
        """Records changed by commits in ``(start, end]``, in their latest state as of ``end``.

        On table version 8+ the bounds are compared with completion times (as Hudi 1.x
        does); on version 6 with requested times.  Pass a WriteResult or an Instant to
        use its completion time.  ``start=None`` (or ``"earliest"``) reads from the first
        commit, commits archived into the timeline history included; ``start_inclusive=True``
        makes the range ``[start, end]`` (Hudi 1.x Spark's ``CLOSED_CLOSED``: ``start=end=``
        a commit's completion time selects exactly that commit).

        ``where`` filters as in :meth:`read`.  ``meta_fields=True`` adds Hudi's ``_hoodie_*``
        columns (``_hoodie_commit_time``: the commit that wrote each record); they are left
        out by default, as in :meth:`read`.
        """
        if isinstance(start, str) and start.strip().lower() == "earliest":
            start = None
        q = Query(self, kind="incremental", start=moment_time(start), end=moment_time(end), meta=meta_fields,
                  start_inclusive=start_inclusive)
        if columns is not None:
            q = q.select(*columns)
        if where is not None:
            q = q.where(where)
        return q

    def to_pandas(self) -> pd.DataFrame:
        return self.read().to_pandas()

    def to_arrow(self) -> pa.Table:
        return self.read().to_arrow()

    def to_spark(self) -> SparkDataFrame:
        return self.read().to_spark()

    # -- namespaces ----------------------------------------------------------------------------
    @property
    def inspect(self) -> "Inspect":
        """Files, partitions and commit metadata."""
        return Inspect(self)

    @property
    def maintenance(self) -> "Maintenance":
        """Table services: compaction, clustering, clean, rollback, savepoint/restore, archival, and
        the upgrade of record keys written in lakesdk's earlier key encoding."""
        return Maintenance(self)

    @property
    def widgets(self) -> TableWidgets:
        """Notebook widgets (``pip install 'lakesdk[notebook]'``): ``timeline()``, ``markers()``,
        ``file_layout()``, ``transactions()``, ``provenance()``.  Display one as a cell's last
        expression: ``t.widgets.timeline()``; ``display(t)`` shows them as tabs."""
        from lakesdk.widgets import TableWidgets
        return TableWidgets(self)

    # -- display -------------------------------------------------------------------------------
    def __repr__(self) -> str:
        c = self.config
        parts = [f"key={','.join(c.record_key_fields)}"]
        if c.partition_fields:
            parts.append(f"partition_by={','.join(c.partition_fields)}")
        if c.ordering_fields:
            parts.append(f"ordering={','.join(c.ordering_fields)}")
        kind = "cow" if c.table_type == "COPY_ON_WRITE" else "mor"
        return f"<Table {c.name!r} {kind} v{c.props.get('hoodie.table.version')} at {self.path!r} {' '.join(parts)}>"

    def _repr_html_(self) -> str:
        """The table in a notebook: configuration, commits, size, schema and its first rows
        (:mod:`lakesdk.table.preview`)."""
        from lakesdk.table.preview import table_html
        return table_html(self)

    def _ipython_display_(self) -> None:
        """``display(t)`` in a notebook: the summary, and tabs with the timeline, file layout
        and transactions widgets, each read when its tab is opened (the HTML summary alone
        without ipywidgets/plotly)."""
        from lakesdk.widgets import display_table
        display_table(self)
