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
    "KeyEncodingError",
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
    """Root of every error raised by lakesdk."""


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
    """Incoming rows have no record key: a key field null or empty, or every field of a
    composite key null or empty (Apache Hudi refuses such rows with ``HoodieKeyException``)."""


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


class KeyEncodingError(SchemaError):
    """The table's stored record keys encode a null or empty key part in two ways (lakesdk's
    earlier ``a:`` and Hudi's ``a:__empty__``), so a row may be stored twice;
    ``table.maintenance.upgrade_key_encoding()`` rewrites them as Hudi writes them."""


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
    """A concurrent writer committed a conflicting change first."""


class ClusteringConflictError(WriteConflictError):
    """A write would change file groups that a pending clustering is rewriting (Hudi's
    reject-update strategy).  ``instant`` names the clustering, ``file_groups`` the
    (partition, file id) pairs the write touches."""

    def __init__(self, message: str, *, instant: str = "", file_groups: tuple[tuple[str, str], ...] = ()) -> None:
        super().__init__(message)
        self.instant = instant
        self.other_instant = instant
        self.file_groups = file_groups


class CompactionConflictError(WriteConflictError):
    """A compaction is being executed by another process (its heartbeat is fresh), or was
    started by one at the same moment.  ``instant`` names the compaction."""

    def __init__(self, message: str, *, instant: str = "") -> None:
        super().__init__(message)
        self.instant = instant
        self.other_instant = instant


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
        super().__init__(message)
        if other_instant is None:
            other_instant, other_action, file_groups = _parse_early(message)
        self.other_instant = other_instant
        self.other_action = other_action
        self.file_groups = tuple(file_groups)
        self.planned = tuple(planned)

    def __reduce__(self) -> tuple:
        return (_rebuild_early, (str(self), self.other_instant, self.other_action, self.file_groups, self.planned))


def _rebuild_early(message: str, other: str | None, action: str | None, groups: tuple, planned: tuple) -> "EarlyConflictError":
    return EarlyConflictError(message, other_instant=other, other_action=action, file_groups=groups, planned=planned)


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
