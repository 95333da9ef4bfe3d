"""Lake: a folder (or any fsspec URL) holding tables."""

from __future__ import annotations

import re
from typing import Any, Literal, Sequence

import pyarrow as pa

from lakesdk.commit.context import Resources
from lakesdk.exceptions import SchemaError, TableExistsError
from lakesdk.format.schema import arrow_to_avro
from lakesdk.format.table_config import PROPERTIES_PATH, TableConfig
from lakesdk.storage import Storage
from lakesdk.table.table import Table, TableOptions, validate_options

__all__ = ["Lake", "open_table"]

_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _fields(value: str | Sequence[str] | None) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return tuple(v.strip() for v in value.split(",") if v.strip())
    return tuple(value)


class Lake:
    """A root folder or URL whose sub-folders are tables.

    >>> import lakesdk as lk
    >>> lake = lk.Lake("memory://doctest-lake")
    >>> t = lake.create_table("trips", key="uuid", partition_by="city", ordering="ts")
    >>> t
    <Table 'trips' cow v9 at 'memory://doctest-lake/trips' key=uuid partition_by=city ordering=ts>

    The lake owns what the writes of its table handles start (marker servers and their
    threads, lock providers, open heartbeats): ``with Lake(...) as lake:`` (or :meth:`close`)
    ends them all.  A handle stays usable after it: a later write starts what it needs again.
    """

    def __init__(self, root: str, *, spark: Any = None, storage_options: dict[str, Any] | None = None,
                 options: TableOptions | None = None, concurrency: str | None = None, lock: str | None = None,
                 lock_options: dict[str, Any] | None = None) -> None:
        self.storage = Storage(str(root), storage_options)
        self._spark = spark
        self.options = validate_options(_with_concurrency(options or TableOptions(), concurrency, lock, lock_options))
        self.resources = Resources()     # what the writes of the lake's handles start

    def close(self) -> None:
        """End what the writes of the lake's table handles started: marker servers, their
        threads and sockets, open heartbeats (idempotent)."""
        self.resources.close()

    def __enter__(self) -> "Lake":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def root(self) -> str:
        return self.storage.base_url

    def create_table(
        self,
        name: str,
        *,
        key: str | Sequence[str],
        partition_by: str | Sequence[str] | None = None,
        ordering: str | Sequence[str] | None = None,
        table_type: Literal["cow", "mor"] = "cow",
        schema: pa.Schema | None = None,
        hive_style: bool = True,
        partition_urlencode: bool = False,
        merge_mode: Literal["event_time", "commit_time", "partial_update", "custom"] | None = None,
        column_groups: dict[str, list[str]] | None = None,
        merger: str | None = None,
        partial_update: Literal["ignore_defaults"] | None = None,
        table_version: int = 9,
        index: Literal["global", "global_simple", "global_bloom", "bloom", "simple"] | None = None,
        cdc: bool | Literal["op_key_only", "data_before", "data_before_after"] = False,
        exist_ok: bool = False,
    ) -> Table:
        """Create a table in ``<root>/<name>``: table version 9 (Hudi 1.1+) by default,
        ``table_version=8`` for Hudi 1.0 readers and writers.

        ``ordering`` names the ordering field, or several (``["event_ts", "seq"]``, version 9):
        versions of a record are compared field by field, the first field deciding unless the
        values are equal (Hudi 1.1's rule).

        ``partial_update="ignore_defaults"`` (version 9, commit-time ordering: no ``ordering``):
        a null in an upserted record keeps the stored value of that column, as Hudi's
        ``hoodie.table.partial.update.mode=IGNORE_DEFAULTS`` merges; a batch may leave columns out.

        ``merge_mode="partial_update"`` with ``column_groups={ordering_field: [columns...]}``
        makes a multi-stream table: each stream upserts the key, its ordering field and its
        columns; each ordering field guards its own columns.

        ``partition_urlencode=True`` (``hoodie.datasource.write.partitionpath.urlencode``)
        stores partition values percent-encoded as Hudi does (``a/b`` -> ``a%2Fb``), so every
        value round-trips; with the default (False, Hudi's default) a value that cannot be a
        folder name as it is (holding ``/``; not hive style: starting with ``.`` or ``_``, or
        holding ``=``) is refused with :class:`lakesdk.InvalidPartitionValueError` before
        anything is written.

        ``index="global"`` (Hudi's ``hoodie.index.type=GLOBAL_SIMPLE``, kept in
        ``hoodie.properties``): a key lives in one partition of the table; an upsert of a key
        stored in another partition moves it (a delete in the old partition, the record in the
        new one) unless its ordering value is lower than the stored one, and a delete finds the
        key in any partition.  The default (``None``, ``"bloom"`` or ``"simple"``) identifies a
        record by its partition and key.  ``index="record"`` (``hoodie.index.type=RECORD_INDEX``)
        is global too, and keeps Hudi's record index in the metadata table (its ``record_index``
        partition, key -> file group): an upsert or delete looks up its incoming keys there
        instead of reading the base files' bloom filters.  A handle's ``TableOptions(index_type=...)``
        (``hoodie.index.type``) overrides the table's index.

        ``cdc=True`` (``hoodie.table.cdc.enabled``) logs the changes of every copy-on-write
        rewrite of a base file in a CDC log file beside it, as Hudi does, so that Hudi's CDC
        reader reads them; a string names the logging mode
        (``hoodie.table.cdc.supplemental.logging.mode``: ``"data_before_after"``, the default,
        ``"data_before"`` or ``"op_key_only"``).  ``t.changes()`` answers with or without it."""
        if not _NAME_RE.match(name):
            raise SchemaError(f"table name {name!r} is not valid: use letters, digits and underscores, "
                              "starting with a letter or underscore")
        tt = {"cow": "COPY_ON_WRITE", "mor": "MERGE_ON_READ", "copy_on_write": "COPY_ON_WRITE",
              "merge_on_read": "MERGE_ON_READ"}.get(str(table_type).lower())
        if tt is None:
            raise SchemaError(f"table_type must be 'cow' or 'mor', not {table_type!r}")
        keys = _fields(key)
        if not keys:
            raise SchemaError("a table needs a record key: pass key='id' (or a list of fields)")
        parts = _fields(partition_by)
        ordering_fields = _fields(ordering)
        if len(set(ordering_fields)) != len(ordering_fields):
            raise SchemaError(f"ordering names a field twice: {list(ordering_fields)}")
        if table_version not in (8, 9):
            raise SchemaError(f"table_version must be 9 (Hudi 1.1+, the default) or 8 (Hudi 1.0), not {table_version!r}")
        if len(ordering_fields) > 1 and table_version < 9:
            raise SchemaError(f"several ordering fields {list(ordering_fields)} need table_version=9: Hudi 1.0 "
                              "(version 8) orders by one field")
        pmode = None
        if partial_update is not None:
            if str(partial_update).lower() != "ignore_defaults":
                raise SchemaError(f"partial_update must be 'ignore_defaults', not {partial_update!r}")
            if table_version < 9:
                raise SchemaError("partial_update='ignore_defaults' is version 9's "
                                  "hoodie.table.partial.update.mode: create the table with table_version=9")
            if ordering_fields or merge_mode not in (None, "commit_time"):
                raise SchemaError("partial_update='ignore_defaults' merges under commit-time ordering (the later "
                                  "write's non-null values win): pass no ordering= and no merge_mode; for several "
                                  "streams ordered by their own fields use merge_mode='partial_update' with "
                                  "column_groups")
            pmode = "IGNORE_DEFAULTS"
        if schema is not None:
            missing = [f for f in (*keys, *parts, *ordering_fields) if f not in schema.names]
            if missing:
                raise SchemaError(f"fields {missing} are not in the given schema ({', '.join(schema.names)})")
        mm = {None: None, "event_time": "EVENT_TIME_ORDERING", "commit_time": "COMMIT_TIME_ORDERING",
              "partial_update": "PARTIAL_UPDATE", "custom": "CUSTOM"}.get(merge_mode)
        if merge_mode is not None and mm is None:
            raise SchemaError(f"merge_mode must be 'event_time', 'commit_time' or 'partial_update', not {merge_mode!r}")
        extra = None
        if mm == "PARTIAL_UPDATE":
            if not column_groups:
                raise SchemaError("merge_mode='partial_update' needs column_groups={ordering_field: [columns, ...]}")
            if ordering_fields:
                raise SchemaError("a partial-update table orders each column group by its own field; "
                                  "pass column_groups and no ordering=")
            seen: set[str] = set()
            for o, cols in column_groups.items():
                clash = seen & {o, *cols}
                if clash:
                    raise SchemaError(f"columns {sorted(clash)} are in more than one column group")
                seen |= {o, *cols}
            import json

            from lakesdk.format.table_config import COLUMN_GROUPS_KEY
            extra = {COLUMN_GROUPS_KEY: json.dumps({k: list(v) for k, v in column_groups.items()})}
        elif column_groups:
            raise SchemaError("column_groups needs merge_mode='partial_update'")
        if mm == "CUSTOM":
            from lakesdk.format.table_config import MERGER_NAME_KEY
            from lakesdk.merge.registry import get_merger
            if not merger:
                raise SchemaError("merge_mode='custom' needs merger='<name>' of a function registered with "
                                  "lakesdk.register_merger(name, fn)")
            get_merger(merger)   # registered now, or a clear error
            extra = {MERGER_NAME_KEY: merger}
        elif merger:
            raise SchemaError("merger= needs merge_mode='custom'")
        index_wire = None
        if index is not None:
            from lakesdk.config.options import option
            index_wire = {"global": "GLOBAL_SIMPLE", **(option("index_type").choices or {})}.get(str(index).lower())
            if index_wire is None:
                raise SchemaError(f"index must be 'global', 'global_simple', 'global_bloom', 'record', 'bloom' or "
                                  f"'simple', not {index!r}")
            if index_wire.startswith(("GLOBAL", "RECORD")) and (mm in ("PARTIAL_UPDATE", "CUSTOM") or pmode is not None):
                raise SchemaError(
                    "a global index moves a key between partitions by comparing whole records (event-time or "
                    "commit-time ordering); partial updates and custom mergers would need the moved record merged "
                    "column by column, which lakesdk does not do yet: create the table without index='global'")
            from lakesdk.format.table_config import INDEX_TYPE_KEY
            extra = {**(extra or {}), INDEX_TYPE_KEY: index_wire}
            if index_wire == "RECORD_INDEX":   # as Hudi's writer records the record index it keeps
                from lakesdk.format.record_index import ENABLE_KEY
                extra[ENABLE_KEY] = "true"
        if cdc:
            from lakesdk.format.cdc import CDC_ENABLED_KEY, CDC_MODE_KEY, DEFAULT_MODE, parse_mode
            try:
                mode = DEFAULT_MODE if cdc is True else parse_mode(str(cdc))
            except ValueError:
                raise SchemaError(f"cdc must be True, False, 'data_before_after', 'data_before' or 'op_key_only', "
                                  f"not {cdc!r}") from None
            extra = {**(extra or {}), CDC_ENABLED_KEY: "true", CDC_MODE_KEY: mode}
        cfg = TableConfig.new(
            name=name, table_type=tt, record_key_fields=keys, partition_fields=parts, ordering_fields=ordering_fields,  # type: ignore[arg-type]
            partial_update_mode=pmode, version=table_version, hive_style=hive_style, urlencode=partition_urlencode, create_schema=arrow_to_avro(schema, name) if schema is not None else None,
            merge_mode=mm, extra=extra,
        )
        ts = self.storage.child(name)
        if not ts.create_exclusive(PROPERTIES_PATH, cfg.to_text().encode("utf-8")):
            if exist_ok:
                return self.table(name)
            raise TableExistsError(f"a table already exists at {ts.base_url!r}; open it with lake.table({name!r}) "
                                   "or pass exist_ok=True", path=ts.base_url)
        ts.makedirs(".hoodie/timeline/history")
        return Table(ts, cfg, spark=self._spark, options=self.options, resources=self.resources)

    def table(self, name: str) -> Table:
        """Open the table ``<root>/<name>``."""
        return Table(self.storage.child(name), spark=self._spark, options=self.options, resources=self.resources)

    __getitem__ = table

    def tables(self) -> list[str]:
        """Names of the tables under the root."""
        out = []
        for e in self.storage.list(""):
            if e.is_dir and self.storage.exists(f"{e.path}/{PROPERTIES_PATH}"):
                out.append(e.name)
        return sorted(out)

    def __repr__(self) -> str:
        return f"<Lake {self.root!r}>"

    def _repr_html_(self) -> str:
        """The lake in a notebook: its tables with their type, version and commits
        (:mod:`lakesdk.table.preview`)."""
        from lakesdk.table.preview import lake_html
        return lake_html(self)


def _with_concurrency(options: TableOptions, concurrency: str | None, lock: str | None,
                      lock_options: dict[str, Any] | None) -> TableOptions:
    from dataclasses import replace
    changes: dict[str, Any] = {}
    if concurrency is not None:
        changes["concurrency"] = concurrency
    if lock is not None:
        changes["lock"] = lock
    if lock_options is not None:
        changes["lock_options"] = lock_options
    return replace(options, **changes) if changes else options      # the options check every value


def open_table(url: str, *, spark: Any = None, storage_options: dict[str, Any] | None = None,
               options: TableOptions | None = None, concurrency: str | None = None, lock: str | None = None,
               lock_options: dict[str, Any] | None = None) -> Table:
    """Open an existing Hudi table (written by lakesdk or by Apache Hudi).

    ``concurrency="optimistic"`` lets several writers (threads, processes, machines) write
    at once; ``lock`` ("in_process", "storage" or "zookeeper") and ``lock_options`` choose
    the lock that guards commits.  A write that loses a race raises
    :class:`lakesdk.WriteConflictError` and leaves no trace.  The handle owns what its writes
    start (see :meth:`Table.close`)."""
    return Table(Storage(str(url), storage_options), spark=spark,
                 options=_with_concurrency(options or TableOptions(), concurrency, lock, lock_options))
