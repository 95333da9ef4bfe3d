"""The options registry: every write option of a table handle, with its Hudi wire key.

Each :class:`Option` has a name (the :class:`TableOptions` field), the ``hoodie.*`` key Hudi
users know it by (None where Hudi has none), a type, a default, the allowed values and a
doc line.  :class:`TableOptions` checks every value against it when it is built: a bad
value is an :class:`~lakesdk.exceptions.OptionsError` naming the option, its Hudi key, what
was found and what is allowed.  :meth:`TableOptions.from_hoodie` takes the ``hoodie.*``
keys (strings, as they sit in a Spark writer's options or a properties file) and
:meth:`TableOptions.to_hoodie` gives them back.

>>> TableOptions.from_hoodie({"hoodie.parquet.max.file.size": "1048576",
...                           "hoodie.write.markers.type": "DIRECT"}).target_file_size
1048576
>>> try:
...     TableOptions(markers="foo")
... except OptionsError as e:
...     print(e)
markers (hoodie.write.markers.type) must be one of 'timeline_server', 'direct', found 'foo'
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, fields
from typing import Any, Literal, Mapping, Union, cast

from lakesdk.exceptions import OptionsError

__all__ = ["Option", "OptionValue", "OPTIONS", "TableOptions", "option"]

#: a value an option holds: a string, a switch, a number, a tuple (``cluster_sort_by``'s column
#: names, ``lock_options``' (key, value) pairs) or None (off)
OptionValue = Union[str, bool, int, float, tuple[object, ...], None]

_TRUE = ("true", "1", "yes")
_FALSE = ("false", "0", "no")


@dataclass(frozen=True)
class Option:
    """One option: its field name, Hudi wire key, type, default, allowed values and doc."""

    name: str
    key: str | None
    type: type
    default: Any
    doc: str
    #: allowed values -> their wire value (None: any value of ``type``)
    choices: Mapping[Any, str] | None = None
    #: smallest allowed value of a number (None: no bound)
    minimum: float | None = None
    #: None is allowed (the option is off)
    optional: bool = False
    #: wire value = value * scale (seconds <-> Hudi's milliseconds)
    scale: float = 1.0
    #: other wire values that read as a value (older Hudi class names, ...)
    aliases: Mapping[str, Any] | None = None

    def _label(self) -> str:
        return f"{self.name} ({self.key})" if self.key else self.name

    def check(self, value: Any) -> OptionValue:
        """The value as :class:`TableOptions` stores it; raises OptionsError."""
        if value is None and self.optional:
            return None
        if self.choices is not None:
            if isinstance(value, str) or isinstance(value, bool):
                for allowed in self.choices:
                    if value == allowed and type(value) is type(allowed):
                        return allowed
            shown = ", ".join(repr(c) for c in self.choices)
            raise OptionsError(f"{self._label()} must be one of {shown}, found {value!r}", key=self.key or self.name)
        if self.type is bool:
            if not isinstance(value, bool):
                raise OptionsError(f"{self._label()} must be True or False, found {value!r}", key=self.key or self.name)
            return value
        if self.type in (int, float):
            ok = isinstance(value, (int, float)) and not isinstance(value, bool) and (
                self.type is float or float(value).is_integer())
            if not ok:
                raise OptionsError(f"{self._label()} must be {'an integer' if self.type is int else 'a number'}, "
                                   f"found {value!r}", key=self.key or self.name)
            value = self.type(value)
            if self.minimum is not None and value < self.minimum:
                raise OptionsError(f"{self._label()} must be >= {self.minimum:g}, found {value!r}",
                                   key=self.key or self.name)
            return value
        if self.type is tuple:
            if isinstance(value, str):
                value = [v.strip() for v in value.split(",") if v.strip()]
            if isinstance(value, Mapping):
                value = sorted(value.items())
            if not isinstance(value, (tuple, list)):
                raise OptionsError(f"{self._label()} must be a sequence, found {value!r}", key=self.key or self.name)
            return tuple(tuple(v) if isinstance(v, list) else v for v in value)
        return value

    def parse(self, text: Any) -> OptionValue:
        """A wire value (a string, as Hudi configs hold them) -> the option's value."""
        if not isinstance(text, str):
            return self.check(text / self.scale if self.scale != 1 and isinstance(text, (int, float)) else text)
        s = text.strip()
        if self.choices is not None:
            for value, wire in self.choices.items():
                if s.lower() in (wire.lower(), str(value).lower()):
                    return value
            for alias, value in (self.aliases or {}).items():
                if s.lower() == alias.lower():
                    return value
            shown = ", ".join(repr(w) for w in self.choices.values())
            raise OptionsError(f"{self.key or self.name} must be one of {shown}, found {text!r}",
                               key=self.key or self.name)
        if self.type is bool:
            if s.lower() in _TRUE:
                return True
            if s.lower() in _FALSE:
                return False
            raise OptionsError(f"{self.key or self.name} must be true or false, found {text!r}",
                               key=self.key or self.name)
        if self.type in (int, float):
            try:
                number = float(s) / self.scale
            except ValueError:
                raise OptionsError(f"{self.key or self.name} must be a number, found {text!r}",
                                   key=self.key or self.name) from None
            return self.check(int(number) if self.type is int and number.is_integer() else number)
        return self.check(s)

    def wire(self, value: Any) -> str | None:
        """The value as Hudi writes it (None: off, or no wire form)."""
        if value is None:
            return None
        if self.choices is not None:
            return self.choices[value]
        if self.type is bool:
            return "true" if value else "false"
        if self.type in (int, float):
            v = value * self.scale
            return str(int(v)) if float(v).is_integer() else str(v)
        if self.type is tuple:
            return ",".join(map(str, value)) or None
        return str(value)


_MIB = 1024 * 1024

#: Every option, in :class:`TableOptions` field order.
OPTIONS: tuple[Option, ...] = (
    Option("target_file_size", "hoodie.parquet.max.file.size", int, 120 * _MIB,
           "largest base file a write produces (bytes)", minimum=1),
    Option("small_file_limit", "hoodie.parquet.small.file.limit", int, 100 * _MIB,
           "base files below this size take inserts (bytes; 0: never)", minimum=0),
    Option("record_size_estimate", "hoodie.copyonwrite.record.size.estimate", int, None,
           "bytes per record before any commit tells the real size (None: measured on the first rows written)",
           minimum=1, optional=True),
    Option("compact_every", "hoodie.compact.inline.max.delta.commits", int, None,
           "merge-on-read: compact inline after this many delta commits (None: never)", minimum=1, optional=True),
    Option("markers", "hoodie.write.markers.type", str, "timeline_server",
           "how write markers are made", choices={"timeline_server": "TIMELINE_SERVER_BASED", "direct": "DIRECT"}),
    Option("marker_batch_interval_ms", "hoodie.markers.timeline_server_based.batch.interval_ms", int, 50,
           "timeline-server markers: batch interval (ms)", minimum=1),
    Option("marker_threads", "hoodie.markers.timeline_server_based.batch.num_threads", int, 20,
           "timeline-server markers: flush threads (MARKERS<n> files)", minimum=1),
    Option("heartbeat_interval_s", "hoodie.client.heartbeat.interval_in_ms", float, 60.0,
           "seconds between heartbeats of a running write", minimum=0.001, scale=1000.0),
    Option("heartbeat_misses", "hoodie.client.heartbeat.tolerable.misses", int, 2,
           "heartbeats a writer may miss before it counts as failed", minimum=1),
    Option("failed_writes", "hoodie.cleaner.policy.failed.writes", str, "eager",
           "when failed writes are rolled back", choices={"eager": "EAGER", "lazy": "LAZY"}),
    Option("engine", None, str, "auto", "where writes of driver-side data run",
           choices={"auto": "auto", "spark": "spark", "local": "local"}),
    Option("progress", None, object, "auto", "progress bars for long work (LAKESDK_PROGRESS=0: never)",
           choices={"auto": "auto", True: "true", False: "false"}),
    Option("concurrency", "hoodie.write.concurrency.mode", str, "single_writer", "one writer, or optimistic "
           "concurrency control between several", choices={"single_writer": "SINGLE_WRITER",
                                                           "optimistic": "OPTIMISTIC_CONCURRENCY_CONTROL"}),
    Option("lock", "hoodie.write.lock.provider", str, "in_process", "the lock that guards commits (optimistic mode)",
           choices={"in_process": "org.apache.hudi.client.transaction.lock.InProcessLockProvider",
                    "storage": "org.apache.hudi.client.transaction.lock.StorageBasedLockProvider",
                    "zookeeper": "org.apache.hudi.client.transaction.lock.ZookeeperBasedLockProvider"},
           aliases={"org.apache.hudi.client.transaction.lock.FileSystemBasedLockProvider": "storage"}),
    Option("lock_options", None, tuple, (), "lock provider options, e.g. {'zk_connect': 'host:2181'} "
           "(Hudi's hoodie.write.lock.* keys are taken too)"),
    Option("schema_reconcile", None, bool, False,
           "concurrent schema evolution: unify compatible schemas"),
    Option("clean_after_write", "hoodie.clean.automatic", bool, False, "clean inline after each commit"),
    Option("clean_retain_commits", "hoodie.cleaner.commits.retained", int, 10,
           "commits an inline clean keeps (KEEP_LATEST_COMMITS)", minimum=1),
    Option("cluster_every", "hoodie.clustering.inline.max.commits", int, None,
           "cluster inline after this many commits (None: never)", minimum=1, optional=True),
    Option("cluster_small_file_limit", "hoodie.clustering.plan.strategy.small.file.limit", int, 300 * _MIB,
           "clustering: files below this size are rewritten (bytes)", minimum=0),
    Option("cluster_max_bytes_per_group", "hoodie.clustering.plan.strategy.max.bytes.per.group", int, 2048 * _MIB,
           "clustering: largest input of one group (bytes)", minimum=1),
    Option("cluster_target_file_size", "hoodie.clustering.plan.strategy.target.file.max.bytes", int, 1024 * _MIB,
           "clustering: largest output file (bytes)", minimum=1),
    Option("cluster_sort_by", "hoodie.clustering.plan.strategy.sort.columns", tuple, (),
           "clustering: columns the rewritten files are sorted by"),
    Option("metadata", "hoodie.metadata.enable", bool, True,
           "Hudi's metadata table: True keeps one (built from a listing when the table has none), None keeps "
           "the one a table has without building one, False drops it", optional=True),
    Option("metadata_column_stats", "hoodie.metadata.index.column.stats.enable", bool, True,
           "Hudi's metadata table: keep its column_stats index (table version 9), which reads skip files by"),
    Option("metadata_partition_stats", "hoodie.metadata.index.partition.stats.enable", bool, True,
           "Hudi's metadata table: keep its partition_stats index (partitioned version 9 tables, with "
           "column_stats), which reads prune partitions by"),
    Option("metadata_compact_every", "hoodie.metadata.compact.max.delta.commits", int, 10,
           "Hudi's metadata table: compact its files partition after this many delta commits", minimum=1),
    Option("early_conflict_detection", "hoodie.write.concurrency.early.conflict.detection.enable", bool, False,
           "stop a write as soon as its markers conflict with a concurrent writer's"),
    Option("early_conflict_check_interval_ms", "hoodie.write.concurrency.async.conflict.detector.period_ms", int,
           1000, "early conflict detection: how long a listing of direct markers is reused (ms)", minimum=1),
    Option("early_conflict_check_commits", "hoodie.write.concurrency.early.conflict.check.commit.conflict", bool,
           False, "early conflict detection: also check commits completed since the write started"),
    Option("log_block_format", "hoodie.logfile.data.block.format", str, "parquet",
           "merge-on-read: format of the data blocks of log files (Parquet: columnar, fast to write and "
           "read; Avro: Hudi's own default)", choices={"parquet": "parquet", "avro": "avro"}),
    Option("bloom_num_entries", "hoodie.index.bloom.num_entries", int, 60000,
           "base files' bloom filters: keys per filter (its size)", minimum=1),
    Option("bloom_fpp", "hoodie.index.bloom.fpp", float, 1e-9,
           "base files' bloom filters: false-positive rate at num_entries keys", minimum=1e-300),
    Option("bloom_filter_type", "hoodie.bloom.index.filter.type", str, "dynamic_v0",
           "base files' bloom filters: one filter, or one more filter per num_entries keys up to max entries",
           choices={"dynamic_v0": "DYNAMIC_V0", "simple": "SIMPLE"}),
    Option("bloom_max_entries", "hoodie.bloom.index.filter.dynamic.max.entries", int, 100000,
           "base files' dynamic bloom filters: keys until no filter is added", minimum=1),
    Option("bloom_filter_enabled", "hoodie.parquet.bloom.filter.enabled", bool, True,
           "base files' bloom filters: write one into every base file (False: none unless the index is a bloom "
           "index, as Hudi decides; a write then hashes no key, for a table looked up by its record index or the "
           "simple index)"),
    Option("index_type", "hoodie.index.type", str, None,
           "how a write finds the stored records of its keys: in their own partition (bloom, simple), or "
           "in any partition (global_simple, global_bloom: an upsert moves a key that changed partitions; "
           "record: the metadata table's record index, a lookup of the incoming keys, global too); "
           "None: the table's (its hoodie.index.type in hoodie.properties, else bloom)",
           choices={"bloom": "BLOOM", "simple": "SIMPLE", "global_bloom": "GLOBAL_BLOOM",
                    "global_simple": "GLOBAL_SIMPLE", "record": "RECORD_INDEX"}, optional=True),
    Option("index_update_partition_path", "hoodie.simple.index.update.partition.path", bool, True,
           "global index: an upsert of a key stored in another partition moves it to its new partition "
           "(False: it updates the stored record where it is)"),
)

_BY_NAME = {o.name: o for o in OPTIONS}


def _default(name: str) -> Any:
    """The default of the option ``name``, for :class:`TableOptions`' field of that name."""
    return _BY_NAME[name].default

_BY_KEY = {o.key: o for o in OPTIONS if o.key}
#: Hudi switches whose meaning is carried by another option here
_SWITCHES = {"hoodie.compact.inline": "compact_every", "hoodie.clustering.inline": "cluster_every"}
#: Hudi's defaults for the thresholds those switches turn on
_SWITCH_DEFAULTS = {"compact_every": 5, "cluster_every": 4}
#: other Hudi keys of one option (the global bloom index has its own update-partition key)
_KEY_ALIASES = {"hoodie.bloom.index.update.partition.path": "hoodie.simple.index.update.partition.path"}
#: keys that define a table (given to create_table, stored in hoodie.properties), not a handle
_TABLE_KEYS = ("hoodie.datasource.write.recordkey.field", "hoodie.datasource.write.partitionpath.field",
               "hoodie.datasource.write.precombine.field", "hoodie.table.name", "hoodie.datasource.write.table.type",
               "hoodie.table.ordering.fields", "hoodie.table.precombine.field", "hoodie.datasource.write.operation")


def option(name_or_key: str) -> Option:
    """The :class:`Option` of a :class:`TableOptions` field name or a ``hoodie.*`` key."""
    found = _BY_NAME.get(name_or_key) or _BY_KEY.get(name_or_key)
    if found is None:
        raise OptionsError(_unknown(name_or_key), key=name_or_key)
    return found


def _unknown(key: str) -> str:
    close = difflib.get_close_matches(key, [*_BY_NAME, *_BY_KEY, *_SWITCHES], n=1)
    hint = f" Did you mean {close[0]!r}?" if close else ""
    return f"unknown option {key!r}.{hint} Known: {', '.join(_BY_NAME)} (or their hoodie.* keys)"


@dataclass(frozen=True)
class TableOptions:
    """Write options of a handle (keyword-only at the API).  Each field is an :class:`Option`
    of :data:`OPTIONS`, checked when the object is built; its default and its ``hoodie.*`` key
    are the option's (written once, there)."""

    target_file_size: int = _default("target_file_size")
    small_file_limit: int = _default("small_file_limit")
    record_size_estimate: int | None = _default("record_size_estimate")
    compact_every: int | None = _default("compact_every")
    markers: Literal["timeline_server", "direct"] = _default("markers")
    marker_batch_interval_ms: int = _default("marker_batch_interval_ms")
    marker_threads: int = _default("marker_threads")
    heartbeat_interval_s: float = _default("heartbeat_interval_s")
    heartbeat_misses: int = _default("heartbeat_misses")
    failed_writes: Literal["eager", "lazy"] = _default("failed_writes")
    engine: Literal["auto", "spark", "local"] = _default("engine")
    progress: Literal["auto"] | bool = _default("progress")
    concurrency: Literal["single_writer", "optimistic"] = _default("concurrency")
    lock: Literal["in_process", "storage", "zookeeper"] = _default("lock")
    lock_options: tuple[tuple[str, Any], ...] = _default("lock_options")
    schema_reconcile: bool = _default("schema_reconcile")
    clean_after_write: bool = _default("clean_after_write")
    clean_retain_commits: int = _default("clean_retain_commits")
    cluster_every: int | None = _default("cluster_every")
    cluster_small_file_limit: int = _default("cluster_small_file_limit")
    cluster_max_bytes_per_group: int = _default("cluster_max_bytes_per_group")
    cluster_target_file_size: int = _default("cluster_target_file_size")
    cluster_sort_by: tuple[str, ...] = _default("cluster_sort_by")
    metadata: bool | None = _default("metadata")
    metadata_column_stats: bool = _default("metadata_column_stats")
    metadata_partition_stats: bool = _default("metadata_partition_stats")
    metadata_compact_every: int = _default("metadata_compact_every")
    early_conflict_detection: bool = _default("early_conflict_detection")
    early_conflict_check_interval_ms: int = _default("early_conflict_check_interval_ms")
    early_conflict_check_commits: bool = _default("early_conflict_check_commits")
    log_block_format: Literal["parquet", "avro"] = _default("log_block_format")
    bloom_num_entries: int = _default("bloom_num_entries")
    bloom_fpp: float = _default("bloom_fpp")
    bloom_filter_type: Literal["dynamic_v0", "simple"] = _default("bloom_filter_type")
    bloom_max_entries: int = _default("bloom_max_entries")
    bloom_filter_enabled: bool = _default("bloom_filter_enabled")
    index_type: Literal["bloom", "simple", "global_bloom", "global_simple", "record"] | None = _default("index_type")
    index_update_partition_path: bool = _default("index_update_partition_path")

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            checked = _BY_NAME[f.name].check(value)
            if checked is not value:
                object.__setattr__(self, f.name, checked)
        if not self.bloom_fpp < 1.0:
            raise OptionsError(f"bloom_fpp (hoodie.index.bloom.fpp) must be < 1, found {self.bloom_fpp!r}",
                               key="hoodie.index.bloom.fpp")

    @classmethod
    def from_hoodie(cls, props: Mapping[str, Any], **overrides: Any) -> "TableOptions":
        """Options from Hudi's ``hoodie.*`` keys (values as strings or as Python values),
        e.g. a Spark writer's options; ``overrides`` are field names.  ``hoodie.write.lock.*``
        keys go to ``lock_options``.  Keys that define the table (record key, partition and
        ordering fields) belong to ``create_table``; other keys are an OptionsError."""
        values: dict[str, Any] = {}
        lock: dict[str, Any] = {}
        switches: dict[str, bool] = {}
        for key, raw in props.items():
            key = _KEY_ALIASES.get(key, key)
            if key in _BY_KEY:
                o = _BY_KEY[key]
                values[o.name] = o.parse(raw)
            elif key in _SWITCHES:
                switches[_SWITCHES[key]] = cast(bool, Option(key, key, bool, False, "").parse(raw))   # a bool option parses to a bool
            elif key.startswith("hoodie.write.lock."):
                lock[key] = raw
            elif key in _TABLE_KEYS:
                raise OptionsError(f"{key} defines the table, not a handle's options: pass it to create_table "
                                   "(key=, partition_by=, ordering=, table_type=) or to the write", key=key)
            else:
                raise OptionsError(_unknown(key), key=key)
        for name, on in switches.items():
            if not on:
                values[name] = None
            elif values.get(name) is None:
                values[name] = _SWITCH_DEFAULTS[name]
        if lock:
            values["lock_options"] = tuple(sorted({**dict(values.get("lock_options", ())), **lock}.items()))
        for name in overrides:
            if name not in _BY_NAME:
                raise OptionsError(_unknown(name), key=name)
        return cls(**{**values, **overrides})

    def to_hoodie(self) -> dict[str, str]:
        """The options that have a Hudi key, as Hudi's wire strings (lock options given with
        ``hoodie.write.lock.*`` keys included)."""
        out: dict[str, str] = {}
        for o in OPTIONS:
            if o.key is None:
                continue
            wire = o.wire(getattr(self, o.name))
            if wire is not None:
                out[o.key] = wire
        out["hoodie.compact.inline"] = "true" if self.compact_every is not None else "false"
        out["hoodie.clustering.inline"] = "true" if self.cluster_every is not None else "false"
        out.update({k: str(v) for k, v in self.lock_options if k.startswith("hoodie.")})
        return out

    def check_combination(self) -> "TableOptions":
        """Raise OptionsError for options that contradict each other (a handle checks this
        once its concurrency settings are final: ``open_table(..., concurrency=...)`` may set
        them after the options were built)."""
        if self.early_conflict_detection and self.concurrency != "optimistic":
            raise OptionsError(
                f"early_conflict_detection=True needs concurrency='optimistic' (found {self.concurrency!r}): "
                "early conflict detection compares the markers of concurrent writers, which only optimistic "
                "concurrency has; open the table with concurrency='optimistic' or drop early_conflict_detection",
                key="hoodie.write.concurrency.early.conflict.detection.enable")
        return self

    def describe(self) -> list[tuple[str, str | None, OptionValue, OptionValue, str]]:
        """(name, Hudi key, value, default, doc) of every option."""
        return [(o.name, o.key, getattr(self, o.name), o.default, o.doc) for o in OPTIONS]

