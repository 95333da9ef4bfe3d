"""The lakesdk error hierarchy.

Every error lakesdk raises on purpose is defined here and derives from :class:`LakeError`,
and, where one fits, from the built-in exception a Python user would catch anyway
(``ValueError`` for bad input, ``FileNotFoundError`` for a missing table, ``TimeoutError``
for a lock wait, ...).  The modules that raise an error re-export it under its name
(``lakesdk.concurrency.locks.LockTimeoutError`` is ``lakesdk.exceptions.LockTimeoutError``),
and the package exports every one (``lk.LockTimeoutError``).  This module imports nothing
from lakesdk, so every other module can import it.

Messages follow one shape: what happened, what was expected versus what was found, and
what to do next.  Data an error carries (an instant, a path, an option key, file groups,
the lock holder, ...) are keyword-only constructor arguments, kept as attributes of the
same names; every error pickles with its message and attributes.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "LakeError",
    "TableNotFoundError",
    "TableExistsError",
    "TableConfigError",
    "UnsupportedTableVersionError",
    "CorruptTimelineError",
    "DataFileMissingError",
    "CorruptFileError",
    "UnsupportedFileFeatureError", "KeyOrderError",
    "InstantNotFoundError",
    "SchemaError",
    "IncompatibleSchemaError",
    "MissingColumnError",
    "NullKeyError",
    "NullOrderingValueError",
    "DeleteMarkerTypeError",
    "InvalidKeyValueError",
    "KeyEncodingError",
    "InvalidPartitionValueError",
    "InvalidFilterError",
    "TimeTravelError",
    "WriteError",
    "WriteConflictError",
    "ClusteringConflictError",
    "CompactionConflictError",
    "CleanConflictError",
    "EarlyConflictError",
    "OptionsError",
    "StorageError",
    "MissingDependencyError",
    "SchemaEvolutionConflictError",
    "MergeConflictError",
    "KeyChangeError",
    "DuplicateColumnError",
    "MergerNotRegisteredError",
    "LogBlockError",
    "LockError",
    "LockConfigError",
    "LockTimeoutError",
    "LockLostError",
    "HeartbeatError",
    "MarkerError",
    "InvalidMarkerNameError",
    "UnsupportedMarkerTypeError",
    "MarkerServerError",
    "MarkerAuthError",
    "MarkerServerUnavailableError",
    "RollbackNotAllowedError",
    "SavepointError",
    "RestoreError",
    "OffsetsFormatError",
    "DecodeError",
    "BrokerNotFoundError",
    "BrokerStartError",
    "MetadataTableDroppedWarning",
]


class LakeError(Exception):
    """Root of every error raised by lakesdk.

    Errors that carry data (an instant, a path, a key, file groups, ...) take it as
    keyword-only constructor arguments and keep it as attributes of the same names.  Every
    error pickles with its message and attributes (Spark tasks and subprocesses send them
    back to the driver).
    """

    def __reduce__(self) -> tuple:
        # Rebuild without calling ``__init__``: the attributes are restored as they were, also
        # for errors whose constructor builds the message from its arguments.
        return (_rebuild, (type(self), self.args, dict(self.__dict__)))


def _rebuild(cls: type, args: tuple, state: dict) -> BaseException:
    err = cls.__new__(cls, *args)
    builtin: Any = next(c for c in cls.__mro__ if c.__module__ == "builtins")
    builtin.__init__(err, *args)  # the built-in base's own fields (ImportError.msg, ...)
    err.__dict__.update(state)
    return err


class TableNotFoundError(LakeError, FileNotFoundError):
    """The path holds no Hudi table (no ``.hoodie/hoodie.properties``).  ``path`` names the
    table's base URL when known."""

    def __init__(self, message: str, *, path: str | None = None) -> None:
        super().__init__(message)
        self.path = path


class TableExistsError(LakeError, FileExistsError):
    """A table was to be created where one already exists.  ``path`` names the table's base
    URL when known."""

    def __init__(self, message: str, *, path: str | None = None) -> None:
        super().__init__(message)
        self.path = path


class TableConfigError(LakeError, ValueError):
    """``hoodie.properties`` is missing a required key or holds a value that cannot be parsed."""

    def __init__(self, message: str, *, key: str | None = None) -> None:
        super().__init__(message)
        self.key = key


class UnsupportedTableVersionError(TableConfigError):
    """The table's version (or timeline layout) is one lakesdk cannot read or write."""


class CorruptTimelineError(LakeError, ValueError):
    """A timeline file could not be parsed.  ``path`` names the file when known."""

    def __init__(self, message: str, *, path: str | None = None) -> None:
        super().__init__(message)
        self.path = path


class CorruptFileError(LakeError, ValueError):
    """A file the table needs holds bytes that cannot be what its name says (a damaged
    log file, Parquet file or timeline history file).  ``path`` names the file when known."""

    def __init__(self, message: str, *, path: str | None = None) -> None:
        super().__init__(message)
        self.path = path


class UnsupportedFileFeatureError(LakeError, ValueError):
    """A file uses a feature of its format lakesdk does not read: ``feature`` (``path``: the file)."""

    def __init__(self, message: str, *, path: str | None = None, feature: str | None = None) -> None:
        super().__init__(message)
        self.path = path
        self.feature = feature


class KeyOrderError(LakeError, ValueError):
    """Keys given to a writer of a sorted file (an HFile) are not strictly ascending."""


class DataFileMissingError(LakeError, FileNotFoundError):
    """A data file that a completed commit wrote, and that a read or write needs, is not in
    storage (deleted or lost outside lakesdk)."""

    def __init__(self, message: str, *, path: str | None = None, instant: str | None = None) -> None:
        super().__init__(message)
        self.path = path
        self.instant = instant


class InstantNotFoundError(LakeError, KeyError):
    """No instant with the given time (and state) is on the timeline.  ``instant`` names the
    instant time asked for when known."""

    def __init__(self, message: str, *, instant: str | None = None) -> None:
        super().__init__(message)
        self.instant = instant

    def __str__(self) -> str:  # KeyError quotes its message; keep it readable
        return str(self.args[0]) if self.args else ""


class SchemaError(LakeError, ValueError):
    """A schema problem in incoming data or in the table."""


class IncompatibleSchemaError(SchemaError, TypeError):
    """An incoming column's type cannot be written into the table's column."""


class MissingColumnError(SchemaError, KeyError):
    """A column the operation needs (record key, ordering or partition field) is absent."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class NullKeyError(SchemaError):
    """Incoming rows have no record key: a key field null or empty, or every field of a
    composite key null or empty (Apache Hudi refuses such rows with ``HoodieKeyException``)."""


class NullOrderingValueError(SchemaError):
    """Incoming rows of an event-time-ordered table carry a null ordering value (the table's
    ordering field, ``hoodie.table.ordering.fields``): such a version cannot be ordered
    against the stored one.  Apache Hudi refuses them too (its writers require a non-null
    ordering value under ``EVENT_TIME_ORDERING``).  Raised before anything is written.
    Deletes may omit the ordering value: such a delete always applies."""


class DeleteMarkerTypeError(SchemaError, TypeError):
    """The data's ``_hoodie_is_deleted`` column (Hudi's delete marker: true deletes the row's
    record key) is not a boolean column.  Raised before anything is written."""


class InvalidKeyValueError(SchemaError):
    """A record-key value cannot be encoded into ``_hoodie_record_key`` without ambiguity
    (a ``,`` inside a field of a composite key: ``a:x,b:y`` would be read back as other fields;
    ``__null__``/``__empty__``, Hudi's placeholders for a null and an empty field)."""


class KeyEncodingError(SchemaError):
    """The table's stored record keys encode a null or empty key part in two ways (lakesdk's
    earlier ``a:`` and Hudi's ``a:__empty__``), so a row may be stored twice;
    ``table.maintenance.upgrade_key_encoding()`` rewrites them as Hudi writes them."""


class InvalidPartitionValueError(SchemaError):
    """A partition value cannot be stored as a partition path that reads back as the same
    value (a ``/``, a hidden ``.``/``_`` prefix, a path segment too long for the file
    system, ...).  Raised before anything is written."""


class InvalidFilterError(LakeError, ValueError):
    """A ``where`` expression or filter cannot be parsed, names an unknown column, or compares
    types that do not compare (raised before any file is read).  ``column`` names the column
    (``a.b`` for a struct field) when the problem is one column's, ``column_type`` its type
    and ``value_type`` the type of what it was compared with, when known."""

    def __init__(self, message: str, *, column: str | None = None, column_type: str | None = None,
                 value_type: str | None = None) -> None:
        super().__init__(message)
        self.column = column
        self.column_type = column_type
        self.value_type = value_type


class TimeTravelError(LakeError, ValueError):
    """A time-travel or incremental bound cannot be resolved."""


class WriteError(LakeError, RuntimeError):
    """A write failed; the table is unchanged (the instant did not complete)."""


class WriteConflictError(WriteError):
    """A concurrent writer committed a conflicting change first.

    Attributes: ``other_instant`` (the other writer's or service's instant time, None when
    there is none, e.g. a write rolled back by another writer or one that lost the table
    lock), ``file_groups`` (the ``(partition, fileId)`` pairs both touch, empty when unknown)
    and ``partitions`` (their partition paths, sorted, unless given).
    """

    def __init__(self, message: str, *, other_instant: str | None = None,
                 file_groups: tuple[tuple[str, str], ...] = (), partitions: tuple[str, ...] | None = None) -> None:
        super().__init__(message)
        self.other_instant = other_instant
        self.file_groups = tuple(file_groups)
        self.partitions = tuple(sorted({p for p, _ in self.file_groups}) if partitions is None else partitions)


class ClusteringConflictError(WriteConflictError):
    """A write would change file groups that a pending clustering is rewriting (Hudi's
    reject-update strategy), or the clustering cannot run now.  ``instant`` names the
    clustering, ``file_groups`` the (partition, file id) pairs the write touches;
    ``held_elsewhere``: another live process is executing the clustering (or completed it)."""

    def __init__(self, message: str, *, instant: str = "", file_groups: tuple[tuple[str, str], ...] = (),
                 held_elsewhere: bool = False) -> None:
        super().__init__(message, other_instant=instant, file_groups=file_groups)
        self.instant = instant
        self.held_elsewhere = held_elsewhere


class CompactionConflictError(WriteConflictError):
    """A compaction is being executed by another process (its heartbeat is fresh), or was
    started by one at the same moment.  ``instant`` names the compaction."""

    def __init__(self, message: str, *, instant: str = "") -> None:
        super().__init__(message, other_instant=instant)
        self.instant = instant


class CleanConflictError(WriteConflictError):
    """A clean is being executed by another process (its heartbeat is fresh), or was
    completed by it.  ``instant`` names the clean."""

    def __init__(self, message: str, *, instant: str = "") -> None:
        super().__init__(message, other_instant=instant)
        self.instant = instant


class EarlyConflictError(WriteConflictError):
    """Early conflict detection stopped a write before it wrote its data: an earlier,
    still running writer (or, optionally, a commit completed since this write started)
    writes the same file groups.

    Attributes: ``other_instant`` and ``other_action`` (the other writer), ``file_groups``
    (``(partition, fileId)`` pairs both write) and ``planned`` (the file groups this write
    was about to write, when known).  Raised inside a Spark task, only the message
    survives; the attributes are then parsed back from it.
    """

    def __init__(self, message: str, *, other_instant: str | None = None, other_action: str | None = None,
                 file_groups: tuple[tuple[str, str], ...] = (), planned: tuple[tuple[str, str], ...] = ()) -> None:
        if other_instant is None:
            other_instant, other_action, file_groups = _parse_early(message)
        super().__init__(message, other_instant=other_instant, file_groups=file_groups)
        self.other_action = other_action
        self.planned = tuple(planned)


def _parse_early(message: str) -> tuple[str | None, str | None, tuple[tuple[str, str], ...]]:
    """``(other instant, action, file groups)`` from an :class:`EarlyConflictError` message."""
    import re
    m = re.search(r"conflicts early with (\w+) (\w+)", message)
    g = re.search(r"file groups: (.*?)(?: and \d+ more)?\. ", message)
    groups: list[tuple[str, str]] = []
    if g:
        for item in g.group(1).split(", "):
            part, _, fid = item.rpartition("/")
            groups.append(("" if part == "<root>" else part, fid))
    return (m.group(2) if m else None, m.group(1) if m else None, tuple(groups))


class OptionsError(LakeError, ValueError):
    """Table handle options, or arguments of a call, that are invalid or contradict each other
    (a keyword and its deprecated name both given); ``key`` names the option (its ``hoodie.*``
    key where it has one) or the argument."""

    def __init__(self, message: str, *, key: str | None = None) -> None:
        super().__init__(message)
        self.key = key


class StorageError(LakeError, OSError):
    """The storage layer could not complete an operation."""


class MissingDependencyError(LakeError, ImportError):
    """An optional dependency is needed for this feature; ``extra`` names the lakesdk extra
    that installs it (``""`` for a package that is a dependency of lakesdk itself)."""

    def __init__(self, package: str, extra: str, feature: str) -> None:
        how = f"pip install 'lakesdk[{extra}]'" if extra else f"pip install {package}"
        super().__init__(f"{feature} needs the package {package!r}, which is not installed. Install it with: {how}")
        self.package = package
        self.extra = extra
        self.feature = feature


# -- writes -----------------------------------------------------------------------------------
class SchemaEvolutionConflictError(WriteConflictError):
    """Detected incompatible concurrent schema evolution.  ``instant`` names this write."""

    def __init__(self, message: str, *, instant: str | None = None, other_instant: str | None = None) -> None:
        super().__init__(message, other_instant=other_instant)
        self.instant = instant


class MergeConflictError(LakeError, ValueError):
    """The merge source matches a target row more than once (duplicate keys)."""


class KeyChangeError(SchemaError):
    """A merge clause would change the record key or the partition path of a stored record
    (a ``set`` of a key field, or ``when_matched_update_all`` matching on another column with
    a source row carrying another key): written, it would insert a second record and keep the
    old one.  Apache Hudi does not change a record's key either.  ``columns`` names the fields
    that would change, ``clause`` the clause.  Raised before anything is written."""

    def __init__(self, message: str, *, columns: tuple[str, ...] = (), clause: str | None = None) -> None:
        super().__init__(message)
        self.columns = tuple(columns)
        self.clause = clause


class DuplicateColumnError(SchemaError):
    """The data has two columns (or struct fields) of one name, or of names that differ only
    by case (``fare`` and ``Fare``; Spark and Hudi resolve names case-insensitively, so such a
    table could not be read through Spark).  ``columns`` names them.  Raised before anything
    is written."""

    def __init__(self, message: str, *, columns: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.columns = tuple(columns)


class MergerNotRegisteredError(LakeError, LookupError):
    """The table names a custom merger that this process has not registered.  ``name`` names
    the merger."""

    def __init__(self, message: str, *, name: str | None = None) -> None:
        super().__init__(message)
        self.name = name


class LogBlockError(LakeError, ValueError):
    """A log block cannot be encoded, or its content cannot be decoded."""


# -- locks ------------------------------------------------------------------------------------
class LockError(LakeError):
    """A table lock could not be used (root of the lock errors)."""


class LockConfigError(LockError, ValueError):
    """A lock option is unknown or has an invalid value.  ``key`` names the option when the
    error is about one."""

    def __init__(self, message: str, *, key: str | None = None) -> None:
        super().__init__(message)
        self.key = key


class LockTimeoutError(LockError, TimeoutError):
    """The table lock was not acquired within the timeout.

    Attributes: ``lock_name``, ``holder`` (owner id of the current holder, None if unknown),
    ``waited_s``, ``timeout_s`` and ``attempts``.
    """

    def __init__(self, message: str, *, lock_name: str = "", holder: str | None = None, waited_s: float = 0.0,
                 timeout_s: float = 0.0, attempts: int = 1) -> None:
        super().__init__(message)
        self.lock_name = lock_name
        self.holder = holder
        self.waited_s = waited_s
        self.timeout_s = timeout_s
        self.attempts = attempts

    def __str__(self) -> str:  # OSError's __str__ would print "[Errno ...]" decorations
        return str(self.args[0]) if self.args else ""


class LockLostError(LockError, RuntimeError):
    """The lock this writer held is no longer its own (lease expired or ZooKeeper session
    lost).  ``lock_name`` names the lock when known."""

    def __init__(self, message: str, *, lock_name: str | None = None) -> None:
        super().__init__(message)
        self.lock_name = lock_name


class HeartbeatError(LakeError, RuntimeError):
    """A heartbeat could not be started or written.  ``instant`` names the instant whose
    heartbeat it is."""

    def __init__(self, message: str, *, instant: str | None = None) -> None:
        super().__init__(message)
        self.instant = instant


# -- markers ----------------------------------------------------------------------------------
class MarkerError(LakeError):
    """A marker could not be created, listed or deleted."""


class InvalidMarkerNameError(MarkerError, ValueError):
    """A marker name (or a part of one) does not follow ``[<partition>/]<file>.marker.<IOType>``."""


class UnsupportedMarkerTypeError(MarkerError, ValueError):
    """A marker type other than ``DIRECT`` / ``TIMELINE_SERVER_BASED`` was asked for or found on disk."""


class MarkerServerError(MarkerError, ConnectionError):
    """The timeline-server marker endpoint failed or could not be reached.  ``status`` is the
    HTTP status of the server's answer, None when there was none."""

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class MarkerAuthError(MarkerServerError, PermissionError):
    """The marker server rejected the request's token (HTTP 401 without one, 403 for a wrong one)."""


class MarkerServerUnavailableError(MarkerServerError):
    """The marker server could not be reached (connection refused, reset or timed out) after retries."""


# -- table services ---------------------------------------------------------------------------
class RollbackNotAllowedError(LakeError, ValueError):
    """The instant cannot be rolled back (not the latest completed write, or still alive).
    ``instant`` names it."""

    def __init__(self, message: str, *, instant: str | None = None) -> None:
        super().__init__(message)
        self.instant = instant


class SavepointError(LakeError, ValueError):
    """A savepoint cannot be taken (no such completed commit, or its files may be cleaned).
    ``instant`` names the commit when one was given or chosen."""

    def __init__(self, message: str, *, instant: str | None = None) -> None:
        super().__init__(message)
        self.instant = instant


class RestoreError(LakeError, ValueError):
    """A restore cannot run (no such savepoint, later savepoints, archived instants).
    ``savepoint`` names the savepoint to restore."""

    def __init__(self, message: str, *, savepoint: str | None = None) -> None:
        super().__init__(message)
        self.savepoint = savepoint


# -- Kafka sink -------------------------------------------------------------------------------
class OffsetsFormatError(LakeError, ValueError):
    """``kafka.commit.offsets`` could not be parsed (Hudi: "Could not deserialize the kafka commit offsets")."""


class DecodeError(LakeError, ValueError):
    """A record's value could not be turned into a row."""


# -- lakesdk.testing --------------------------------------------------------------------------
class BrokerNotFoundError(MissingDependencyError):
    """The ``noida-db`` executable was found neither next to the Python interpreter nor on PATH.
    ``searched`` lists the places looked at besides PATH; ``package`` names the executable
    (and the package that installs it)."""

    def __init__(self, *, searched: list[str] | tuple[str, ...] = (), package: str = "noida-db") -> None:
        LakeError.__init__(self, f"LocalBroker needs the {package!r} executable (a local Kafka-protocol broker), "
                                 f"which was not found (looked at {', '.join(searched)} and PATH). "
                                 f"Install it with: pip install {package}")
        self.package = package
        self.extra = ""
        self.feature = "LocalBroker"
        self.searched = tuple(searched)


class BrokerStartError(LakeError, RuntimeError):
    """The broker process exited or did not answer in time; the message holds the end of its log."""


# -- internal signals: caught inside the module that raises them, never seen by a user --------
class _BadAvroBytes(LakeError):
    """Internal (:mod:`lakesdk.format.avro_file`): the bytes break the Avro framing; the
    caller turns it into a :class:`CorruptTimelineError`."""


class MetadataTableDroppedWarning(LakeError, UserWarning):
    """lakesdk dropped Hudi's metadata table (``.hoodie/metadata``), or the partitions of it that
    it does not maintain, before an action completed (:mod:`lakesdk.services.metadata_table`): a warning, not
    an error.  ``table`` names the table, ``partitions`` the metadata-table partitions that
    ``hoodie.properties`` named."""

    def __init__(self, message: str, *, table: str | None = None, partitions: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.table = table
        self.partitions = tuple(partitions)


class _CorruptLogBlock(LakeError):
    """Internal (:mod:`lakesdk.format.log_block`): the bytes at this offset are not a
    well-formed block; the reader skips to the next block."""


class _ColumnarUnsupported(LakeError):
    """Internal (:mod:`lakesdk.format.avro_columnar`): the schema or the data is not for the
    columnar Avro codec; the caller uses the record-at-a-time one."""


class _LocalMergeUnsupported(LakeError):
    """Internal (:mod:`lakesdk.table.local_merge`): an expression lakesdk does not evaluate
    locally; the merge runs on Spark.  ``cause`` is the InvalidFilterError saying which."""

    def __init__(self, cause: BaseException) -> None:
        super().__init__(str(cause))
        self.cause = cause


class _MarkerHTTPError(LakeError):
    """Internal (:mod:`lakesdk.markers.server`): a marker request fails with HTTP ``status``;
    the server answers it with ``{"error": message, **extra}``."""

    def __init__(self, status: int, message: str, extra: dict | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.extra = extra or {}

