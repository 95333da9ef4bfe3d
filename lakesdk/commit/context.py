"""The table context: what a write, a read plan or a table service needs of one table, as
an immutable value; and the resources the writes start, which belong to an owner.

:class:`TableContext` holds the storage, the table config, the options, the timeline store
and the Spark session given (if any); it builds what the layers below need from them (the
merger, the engine choice, markers for an instant, the early-conflict detector).  Services,
streaming and the fluent handles take it; a :class:`~lakesdk.Table` is a handle around one.
A context never changes: a handle's ``refresh()`` makes a new one.

:class:`Resources` is what writes start and something must end: the marker server of each
table (a local HTTP server and its threads), the lock providers, the heartbeats of
transactions left open between calls (the Kafka sink's).  A :class:`~lakesdk.Lake` owns one
for every handle it hands out and ends it in ``close()``; a table opened alone owns its own.
Resources that nobody references any more are ended by the garbage collector, and at the
latest when the interpreter exits.
"""

from __future__ import annotations

import threading
import weakref
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from lakesdk.config.options import TableOptions
from lakesdk.engine.context import TableParts
from lakesdk.format.table_config import TableConfig
from lakesdk.format.timeline import Timeline
from lakesdk.storage import Storage
from lakesdk.timeline.store import TimelineStore

#: actions whose instants write base files (the table's base file format must be one lakesdk writes)
DATA_ACTIONS = frozenset({"commit", "deltacommit", "replacecommit", "compaction", "clustering"})

if TYPE_CHECKING:
    import pyarrow as pa

    from lakesdk.concurrency.early import EarlyConflictDetector
    from lakesdk.concurrency.lock_base import LockProvider
    from lakesdk.engine.spark_types import SparkSession
    from lakesdk.markers import MarkerServer, WriteMarkers
    from lakesdk.merge.registry import MergerFn

__all__ = ["Resources", "TableContext", "TableHandle", "context_of"]


def _stop_all(servers: dict[str, Any], heartbeats: dict[str, dict[str, Any]]) -> None:
    """End what a :class:`Resources` holds (its finalizer: holds the containers, never the owner)."""
    for server in list(servers.values()):
        try:
            server.stop()
        except Exception:  # noqa: BLE001 - ending is best effort, one failure must not keep the rest
            pass
    servers.clear()
    for beats in list(heartbeats.values()):
        for hb in list(beats.values()):
            try:
                hb.stop()
            except Exception:  # noqa: BLE001
                pass
        beats.clear()
    heartbeats.clear()


class Resources:
    """The marker servers, lock providers and open heartbeats that the writes of one owner's
    handles start (see the module doc).  :meth:`close` ends them (idempotent); a write after
    it starts what it needs again, which the next ``close()`` ends."""

    def __init__(self) -> None:
        self._mutex = threading.Lock()
        self._servers: dict[str, Any] = {}               # table URL -> MarkerServer
        self._locks: dict[tuple[Any, ...], Any] = {}     # (table URL, kind, options) -> LockProvider
        self._heartbeats: dict[str, dict[str, Any]] = {}  # table URL -> instant -> Heartbeat
        # the finalizer holds the containers, never this object: dropping the owner (or the
        # interpreter exiting) stops the servers
        self._finalizer = weakref.finalize(self, _stop_all, self._servers, self._heartbeats)

    def lock(self, storage: Storage, kind: str, options: dict[str, Any]) -> LockProvider:
        """The lock provider of ``kind`` for the table at ``storage`` (one per table, kind
        and options, shared by the owner's handles)."""
        key = (storage.base_url, kind, tuple(sorted((k, repr(v)) for k, v in options.items())))
        with self._mutex:
            provider = self._locks.get(key)
            if provider is None:
                from lakesdk.concurrency.locks import lock_provider
                provider = self._locks[key] = lock_provider(kind, storage, dict(options))
            return provider

    def marker_server(self, storage: Storage, *, host: str, options: TableOptions) -> MarkerServer:
        """The running marker server of the table at ``storage``, started on first use (and
        again after it stopped)."""
        with self._mutex:
            server = self._servers.get(storage.base_url)
            if server is not None and server.running:
                return server
            if server is not None:
                server.stop()                       # a server that stopped by itself: release what is left
            from lakesdk.markers import MarkerServer
            server = self._servers[storage.base_url] = MarkerServer(
                storage, host=host, batch_interval_ms=options.marker_batch_interval_ms,
                num_threads=options.marker_threads,
                early_conflict_interval_ms=options.early_conflict_check_interval_ms).start()
            return server

    def server_of(self, storage: Storage) -> MarkerServer | None:
        """The marker server this owner runs for the table at ``storage`` (None if none runs)."""
        with self._mutex:
            server = self._servers.get(storage.base_url)
        return server if server is not None and server.running else None

    def unwatch(self, storage: Storage, instant: str) -> None:
        """Stop the early-conflict detection of ``instant`` on the table's marker server (its
        markers stay)."""
        with self._mutex:
            server = self._servers.get(storage.base_url)
        if server is not None:
            server.unwatch(instant)

    def heartbeats(self, storage: Storage) -> dict[str, Any]:
        """The heartbeats of the table's transactions left open between calls, by instant."""
        with self._mutex:
            return self._heartbeats.setdefault(storage.base_url, {})

    def close(self, storage: Storage | None = None) -> None:
        """Stop the marker server(s) and the open heartbeats: of the table at ``storage``, or
        all.  Lock providers hold nothing between acquisitions and stay."""
        with self._mutex:
            if storage is None:
                servers, beats = dict(self._servers), dict(self._heartbeats)
            else:
                url = storage.base_url
                servers = {url: self._servers[url]} if url in self._servers else {}
                beats = {url: self._heartbeats[url]} if url in self._heartbeats else {}
            for url in servers:
                self._servers.pop(url, None)
            for url in beats:
                self._heartbeats.pop(url, None)
        _stop_all(servers, beats)

    @property
    def running(self) -> int:
        """How many marker servers run."""
        with self._mutex:
            return sum(1 for s in self._servers.values() if s.running)

    def __repr__(self) -> str:
        return f"<Resources: {self.running} marker servers running, {len(self._locks)} lock providers>"


@dataclass(frozen=True, eq=False)
class TableContext:
    """One table as the layers below the handles see it (see the module doc)."""

    storage: Storage
    config: TableConfig
    options: TableOptions
    resources: Resources = field(repr=False)
    spark_session: Any = field(default=None, repr=False)     # the session given; None: the active one
    store: TimelineStore = field(init=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "store", TimelineStore(self.storage, self.config))

    # -- identity ----------------------------------------------------------------------------
    @property
    def name(self) -> str:
        return self.config.name

    @property
    def path(self) -> str:
        return self.storage.base_url

    def with_config(self, config: TableConfig) -> "TableContext":
        """The same table and owner, with a config read again."""
        return TableContext(self.storage, config, self.options, self.resources, self.spark_session)

    # -- state -------------------------------------------------------------------------------
    @property
    def timeline(self) -> Timeline:
        """The active timeline, read now."""
        return self.store.load()

    @property
    def schema(self) -> "pa.Schema":
        """The table's data schema (without meta fields) at the latest commit."""
        import pyarrow as pa

        from lakesdk.commit.schema_store import resolve_schema
        return resolve_schema(self.store, self.store.load(), create_schema=self.config.create_schema) or pa.schema([])

    # -- what the layers below need ------------------------------------------------------------
    def merger(self) -> MergerFn | None:
        """The user-defined merger function of a custom-merge table (looked up by name)."""
        name = self.config.merger_name
        if not name:
            return None
        from lakesdk.merge.registry import get_merger
        return get_merger(name)

    @property
    def spark(self) -> SparkSession:
        """The Spark session given, else the active one, else a new one (see
        :func:`lakesdk.engine.session.get_spark`)."""
        from lakesdk.engine.session import get_spark
        return get_spark(self.spark_session)

    def spark_is_local(self) -> bool:
        """True when Spark runs (or would start) in this process with a local master."""
        from lakesdk.engine.session import spark_is_local
        return spark_is_local(self.spark_session)

    def check_writes(self, action: str) -> None:
        """Raise before an instant of ``action`` that writes data files (a write, a compaction, a
        clustering) on a table whose data files lakesdk does not write as Hudi would
        (:meth:`check_writable`)."""
        if action in DATA_ACTIONS:
            self.check_writable(action)

    def check_writable(self, what: str) -> None:
        """Raise a :class:`~lakesdk.TableConfigError` (an :class:`~lakesdk.UnsupportedTableVersionError`
        for the version) when lakesdk cannot write the table's data files as Apache Hudi would,
        before anything is written:

        * LANCE base files: lakesdk reads them and writes PARQUET ones only;
        * ``hoodie.populate.meta.fields=false``: lakesdk writes the meta fields into every file;
        * a merge-on-read table of version 6: its log files are named by their file slice's base
          instant and appended to by later delta commits (versions 8 and 9 name them by the
          delta commit), which lakesdk does not write."""
        from lakesdk.exceptions import TableConfigError, UnsupportedTableVersionError
        cfg = self.config
        fmt = cfg.base_file_format
        if fmt != "PARQUET":
            raise TableConfigError(
                f"{cfg.name!r} has hoodie.table.base.file.format={fmt}: lakesdk reads {fmt} base files but "
                f"writes PARQUET ones only, so it does not start a {what} here (nothing was written); write the "
                "table with Apache Hudi", key="hoodie.table.base.file.format")
        if not cfg.populate_meta_fields:
            raise TableConfigError(
                f"{cfg.name!r} has hoodie.populate.meta.fields=false: lakesdk reads such tables but writes Hudi's "
                f"meta fields into every file, so it does not start a {what} here (nothing was written); write the "
                "table with Apache Hudi", key="hoodie.populate.meta.fields")
        if cfg.version < 8 and cfg.is_mor:
            raise UnsupportedTableVersionError(
                f"{cfg.name!r} is a merge-on-read table of version {cfg.version}: lakesdk reads it, but writes the log "
                f"files of versions 8 and 9 only, so it does not start a {what} here (nothing was written). Upgrade "
                "the table with Apache Hudi (a Hudi 1.x writer upgrades it to version 8 on its first write), then "
                "write it with lakesdk", key="hoodie.table.version")

    def index_type(self) -> str:
        """The index of this handle's writes as Hudi names it (``hoodie.index.type``: ``BLOOM``,
        ``RECORD_INDEX``...; "" for the default): the ``index_type`` option when given, else the
        table's ``hoodie.index.type`` (``create_table(index=...)``)."""
        from lakesdk.format.table_config import INDEX_TYPE_KEY
        chosen = self.options.index_type
        if chosen is not None:
            return {"RECORD": "RECORD_INDEX"}.get(chosen.upper(), chosen.upper())
        return (self.config.props.get(INDEX_TYPE_KEY) or "").strip().upper()

    def global_index(self) -> tuple[bool, bool]:
        """(global, update partition path) of the index of this handle's writes: the
        ``index_type`` option (``hoodie.index.type``) when given, else the table's
        ``hoodie.index.type`` (``create_table(index=...)``), else a non-global index.  A
        global index matters on partitioned tables only."""
        wire = self.index_type()
        if wire in ("", "BLOOM", "SIMPLE"):
            return False, self.options.index_update_partition_path
        if wire in ("GLOBAL_SIMPLE", "GLOBAL_BLOOM", "RECORD_INDEX"):
            return bool(self.config.partition_fields), self.options.index_update_partition_path
        from lakesdk.exceptions import TableConfigError
        raise TableConfigError(
            f"{self.config.name!r} has hoodie.index.type={wire} in hoodie.properties: lakesdk writes with the BLOOM, "
            "SIMPLE, GLOBAL_SIMPLE, GLOBAL_BLOOM or RECORD_INDEX index; nothing was written. Open the table with "
            "options=TableOptions(index_type='global_simple') (or 'bloom') to choose one", key="hoodie.index.type")

    def engine(self) -> str:
        """The engine of driver-side data (the one chooser of writes, merges and services):
        the ``engine`` option, or with ``auto`` ``local`` when Spark is (or would be) local
        and ``spark`` otherwise."""
        choice = self.options.engine
        if choice != "auto":
            return choice
        return "local" if self.spark_is_local() else "spark"

    def lock(self) -> LockProvider | None:
        """The table lock of optimistic concurrency (None for a single writer)."""
        o = self.options
        if o.concurrency != "optimistic":
            return None
        return self.resources.lock(self.storage, o.lock, dict(o.lock_options))

    def heartbeats(self) -> dict[str, Any]:
        """Heartbeats of this table's transactions left open between calls, by instant."""
        return self.resources.heartbeats(self.storage)

    def markers(self, instant: str, *, detector: EarlyConflictDetector | None = None) -> WriteMarkers:
        """WriteMarkers for ``instant``: timeline-server based (the owner's server for this
        table, started on first use) unless direct markers are configured or Spark runs over
        Spark Connect on a server elsewhere.  With an early-conflict ``detector``, every marker
        is checked before it is created."""
        from lakesdk.engine.session import connect_server_here, is_connect
        from lakesdk.markers import DirectWriteMarkers, write_markers
        kind = self.options.markers
        spark = self.spark_session
        if kind == "timeline_server" and spark is not None and is_connect(spark) and not connect_server_here(spark):
            kind = "direct"   # executors of a remote Connect server may not reach this process
        if kind == "direct":
            return DirectWriteMarkers(self.storage, instant, detector=detector)
        host = "127.0.0.1"
        if spark is not None:   # executors reach the driver at its advertised host
            try:
                host = spark.conf.get("spark.driver.host") or host
            except Exception:  # noqa: BLE001
                pass
        server = self.resources.marker_server(self.storage, host=host, options=self.options)
        if detector is not None:
            server.watch(instant, detector)
        return write_markers(self.storage, instant, "TIMELINE_SERVER_BASED", server=server)

    def unwatch_markers(self, instant: str) -> None:
        """Stop watching ``instant``'s markers for early conflicts (they stay, for a rollback)."""
        self.resources.unwatch(self.storage, instant)

    def early_detector(self, instant: str, timeline: Timeline) -> EarlyConflictDetector | None:
        """The early-conflict detector of a write at ``instant`` (None unless enabled)."""
        o = self.options
        if not (o.early_conflict_detection and o.concurrency == "optimistic"):
            return None
        from lakesdk.concurrency.early import EarlyConflictDetector
        return EarlyConflictDetector(
            self.storage, instant, self.config.timeline_dir, self.config.layout_version,
            heartbeat_interval_s=o.heartbeat_interval_s, heartbeat_misses=o.heartbeat_misses,
            interval_s=o.early_conflict_check_interval_ms / 1000.0, check_commits=o.early_conflict_check_commits,
            completed_at_start=frozenset((i.requested, i.action) for i in timeline.completed), table_name=self.name)


class TableHandle(TableParts, Protocol):
    """A table handle as the code around it sees it: its context, its storage, config, options
    and Spark session (:class:`~lakesdk.engine.context.TableParts`), its identity and its
    state.  :class:`lakesdk.Table` is one.  The queries and the staged writes of a handle, its
    namespaces and widgets take one typed as this protocol, so that they need not import the
    ``Table`` class, which imports them."""

    @property
    def context(self) -> TableContext: ...
    @property
    def name(self) -> str: ...
    @property
    def path(self) -> str: ...
    @property
    def key(self) -> tuple[str, ...]: ...
    @property
    def partition_by(self) -> tuple[str, ...]: ...
    @property
    def timeline(self) -> Timeline: ...
    @property
    def schema(self) -> pa.Schema: ...

    def _repr_html_(self) -> str: ...


def context_of(table: Any) -> TableContext:
    """The context of a table handle (or the context itself): services take either."""
    if isinstance(table, TableContext):
        return table
    ctx = getattr(table, "context", None)
    if not isinstance(ctx, TableContext):
        raise TypeError(f"expected a lakesdk Table or TableContext, found {type(table).__name__}")
    return ctx
