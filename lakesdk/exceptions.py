"""The lakesdk error hierarchy.

Every error lakesdk raises on purpose derives from :class:`LakeError`, and, where one
fits, from the built-in exception a Python user would catch anyway (``ValueError`` for
bad input, ``FileNotFoundError`` for a missing table, ...).  Messages follow one shape:
what happened, what was expected versus what was found, and what to do next.
"""

from __future__ import annotations

__all__ = [
    "LakeError",
    "TableNotFoundError",
    "TableExistsError",
    "TableConfigError",
    "UnsupportedTableVersionError",
    "CorruptTimelineError",
    "DataFileMissingError",
    "CorruptFileError",
    "InstantNotFoundError",
    "SchemaError",
    "IncompatibleSchemaError",
    "MissingColumnError",
    "NullKeyError",
    "NullOrderingValueError",
    "InvalidKeyValueError",
    "InvalidPartitionValueError",
    "InvalidFilterError",
    "TimeTravelError",
    "WriteError",
    "WriteConflictError",
    "ClusteringConflictError",
    "CompactionConflictError",
    "EarlyConflictError",
    "OptionsError",
    "StorageError",
    "MissingDependencyError",
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
    builtin = next(c for c in cls.__mro__ if c.__module__ == "builtins")
    builtin.__init__(err, *args)  # the built-in base's own fields (ImportError.msg, ...)
    err.__dict__.update(state)
    return err


class TableNotFoundError(LakeError, FileNotFoundError):
    """The path holds no Hudi table (no ``.hoodie/hoodie.properties``)."""


class TableExistsError(LakeError, FileExistsError):
    """A table was to be created where one already exists."""


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


class DataFileMissingError(LakeError, FileNotFoundError):
    """A data file that a completed commit wrote, and that a read or write needs, is not in
    storage (deleted or lost outside lakesdk)."""

    def __init__(self, message: str, *, path: str | None = None, instant: str | None = None) -> None:
        super().__init__(message)
        self.path = path
        self.instant = instant


class InstantNotFoundError(LakeError, KeyError):
    """No instant with the given time (and state) is on the timeline."""

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
    """Incoming rows carry null values in record-key or partition fields."""


class NullOrderingValueError(SchemaError):
    """Incoming rows of an event-time-ordered table carry a null ordering value (the table's
    ordering field, ``hoodie.table.ordering.fields``): such a version cannot be ordered
    against the stored one.  Apache Hudi refuses them too (its writers require a non-null
    ordering value under ``EVENT_TIME_ORDERING``).  Raised before anything is written.
    Deletes may omit the ordering value: such a delete always applies."""


class InvalidKeyValueError(SchemaError):
    """A record-key value cannot be encoded into ``_hoodie_record_key`` without ambiguity
    (a ``,`` inside a field of a composite key: ``a:x,b:y`` would be read back as other fields;
    ``__null__``/``__empty__``, Hudi's placeholders for a null and an empty field)."""


class InvalidPartitionValueError(SchemaError):
    """A partition value cannot be stored as a partition path that reads back as the same
    value (a ``/``, a hidden ``.``/``_`` prefix, a path segment too long for the file
    system, ...).  Raised before anything is written."""


class InvalidFilterError(LakeError, ValueError):
    """A ``where`` expression or filter cannot be parsed or names an unknown column."""


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
    reject-update strategy).  ``instant`` names the clustering, ``file_groups`` the
    (partition, file id) pairs the write touches."""

    def __init__(self, message: str, *, instant: str = "", file_groups: tuple[tuple[str, str], ...] = ()) -> None:
        super().__init__(message, other_instant=instant, file_groups=file_groups)
        self.instant = instant


class CompactionConflictError(WriteConflictError):
    """A compaction is being executed by another process (its heartbeat is fresh), or was
    started by one at the same moment.  ``instant`` names the compaction."""

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
    """Table handle options that are invalid or contradict each other; ``key`` names the
    option (its ``hoodie.*`` key where it has one)."""

    def __init__(self, message: str, *, key: str | None = None) -> None:
        super().__init__(message)
        self.key = key


class StorageError(LakeError, OSError):
    """The storage layer could not complete an operation."""


class MissingDependencyError(LakeError, ImportError):
    """An optional dependency is needed for this feature."""

    def __init__(self, package: str, extra: str, feature: str) -> None:
        super().__init__(
            f"{feature} needs the package {package!r}, which is not installed. "
            f"Install it with: pip install 'lakesdk[{extra}]'"
        )
        self.package = package
        self.extra = extra
