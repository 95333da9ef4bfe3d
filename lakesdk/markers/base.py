"""Marker names, the marker directory layout, and the abstract :class:`WriteMarkers`.

A *marker* records that a writer is about to create or modify one data file for an
instant.  Markers are what finalize (remove files of failed task attempts) and rollback
(remove the files of a failed write) rely on, so a marker is always made durable
*before* its data file is created.

On-disk grammar (all paths relative to the table base path)::

    marker dir     .hoodie/.temp/<instant>/
    marker name    [<partitionPath>/]<dataFileName>.marker.<IOType>
    IOType         CREATE | MERGE | APPEND
    data path      [<partitionPath>/]<dataFileName>          (marker name minus ".marker.<IOType>")

    DIRECT                    one empty file per marker:
                              .hoodie/.temp/<instant>/<partitionPath>/<dataFileName>.marker.<IOType>
    TIMELINE_SERVER_BASED     .hoodie/.temp/<instant>/MARKERS.type   text "TIMELINE_SERVER_BASED"
                              .hoodie/.temp/<instant>/MARKERS<n>     one marker name per line ("\\n"
                                                                     terminated), n = batch thread slot

``IOType``: ``CREATE`` is a new base file (or, from table version 8, a new log file),
``MERGE`` a new base-file version merged from an old one, ``APPEND`` an append to a log
file (table version 6 only).  Direct markers never write ``MARKERS.type``.

>>> m = parse_marker_name("2020/06/01/file1.parquet.marker.MERGE")
>>> (m.partition, m.file_name, m.io_type)
('2020/06/01', 'file1.parquet', 'MERGE')
>>> format_marker_name("2020/06/01", "file1.parquet", "MERGE")
'2020/06/01/file1.parquet.marker.MERGE'
>>> format_marker_name("", "file1.parquet", "CREATE")
'file1.parquet.marker.CREATE'
>>> m.data_path
'2020/06/01/file1.parquet'
>>> strip_marker_suffix("file:///t/.hoodie/.temp/000/file.marker.APPEND")
'file:///t/.hoodie/.temp/000/file'
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, Iterable, Literal, Protocol, get_args

from lakesdk.exceptions import (
    InvalidMarkerNameError,
    MarkerAuthError,
    MarkerError,
    MarkerServerError,
    MarkerServerUnavailableError,
    UnsupportedMarkerTypeError,
)
from lakesdk.storage import Storage

__all__ = [
    "IOType",
    "MarkerType",
    "IO_TYPES",
    "MARKER_TYPES",
    "MARKER_EXTN",
    "MARKER_TYPE_FILE",
    "TEMP_DIR",
    "MarkerName",
    "MarkerError",
    "InvalidMarkerNameError",
    "UnsupportedMarkerTypeError",
    "MarkerServerError",
    "MarkerAuthError",
    "MarkerServerUnavailableError",
    "WriteMarkers",
    "MarkerConflict",
    "ConflictDetector",
    "marker_dir",
    "format_marker_name",
    "parse_marker_name",
    "strip_marker_suffix",
    "markers_file_name",
    "parse_markers_file_index",
    "read_marker_files",
    "read_marker_type",
    "validate_instant",
]

IOType = Literal["CREATE", "MERGE", "APPEND"]
MarkerType = Literal["DIRECT", "TIMELINE_SERVER_BASED"]
IO_TYPES: tuple[str, ...] = get_args(IOType)
MARKER_TYPES: tuple[str, ...] = get_args(MarkerType)

MARKER_EXTN = ".marker"
TEMP_DIR = ".hoodie/.temp"
MARKER_TYPE_FILE = "MARKERS.type"
MARKERS_PREFIX = "MARKERS"

_INSTANT_RE = re.compile(r"^[0-9A-Za-z_][0-9A-Za-z_.-]*$")
_MARKERS_FILE_RE = re.compile(r"^MARKERS(\d+)$")


# ---------------------------------------------------------------------------------- names
def validate_instant(instant: str) -> str:
    """Return ``instant`` if it can name a marker directory, else raise :class:`InvalidMarkerNameError`."""
    if not isinstance(instant, str) or not _INSTANT_RE.match(instant):
        raise InvalidMarkerNameError(
            f"invalid instant {instant!r} for a marker directory: expected an instant time such as "
            "'20240418172802262' (letters, digits, '_', '.', '-'; no '/')"
        )
    return instant


def marker_dir(instant: str) -> str:
    """The marker directory of ``instant``, relative to the table base: ``.hoodie/.temp/<instant>``."""
    return f"{TEMP_DIR}/{validate_instant(instant)}"


def _normalize_partition(partition: str) -> str:
    if not isinstance(partition, str):
        raise InvalidMarkerNameError(f"partition path must be a str, found {type(partition).__name__}")
    p = partition.strip("/")
    if not p:
        return ""
    if "\n" in p or "\r" in p:
        raise InvalidMarkerNameError(f"partition path {partition!r} contains a line break")
    if any(seg in ("", ".", "..") for seg in p.split("/")):
        raise InvalidMarkerNameError(
            f"partition path {partition!r} has an empty, '.' or '..' segment; expected e.g. '2020/06/01'"
        )
    return p


def _check_file_name(file_name: str) -> None:
    if not isinstance(file_name, str) or not file_name:
        raise InvalidMarkerNameError(f"data file name must be a non-empty str, found {file_name!r}")
    if "/" in file_name or "\n" in file_name or "\r" in file_name:
        raise InvalidMarkerNameError(
            f"data file name {file_name!r} contains '/' or a line break; pass the partition separately"
        )
    if MARKER_EXTN in file_name:
        raise InvalidMarkerNameError(f"data file name {file_name!r} contains {MARKER_EXTN!r}")
    if file_name in (".", ".."):
        raise InvalidMarkerNameError(f"data file name {file_name!r} is not a file name")


def _check_io_type(io_type: str) -> None:
    if io_type not in IO_TYPES:
        raise InvalidMarkerNameError(f"IOType must be one of {', '.join(IO_TYPES)}; found {io_type!r}")


@dataclass(frozen=True)
class MarkerName:
    """One parsed marker name: ``[<partition>/]<file_name>.marker.<io_type>``."""

    partition: str
    file_name: str
    io_type: IOType

    def __post_init__(self) -> None:
        object.__setattr__(self, "partition", _normalize_partition(self.partition))
        _check_file_name(self.file_name)
        _check_io_type(self.io_type)

    @property
    def name(self) -> str:
        """The marker name relative to the marker directory."""
        leaf = f"{self.file_name}{MARKER_EXTN}.{self.io_type}"
        return f"{self.partition}/{leaf}" if self.partition else leaf

    @property
    def data_path(self) -> str:
        """The data file path relative to the table base (the marker suffix stripped)."""
        return f"{self.partition}/{self.file_name}" if self.partition else self.file_name

    def __str__(self) -> str:
        return self.name


def format_marker_name(partition: str, file_name: str, io_type: str) -> str:
    """``[<partition>/]<file_name>.marker.<io_type>``; raises :class:`InvalidMarkerNameError`."""
    return MarkerName(partition, file_name, io_type).name  # type: ignore[arg-type]


def parse_marker_name(name: str) -> MarkerName:
    """Parse a marker name relative to the marker directory (inverse of :func:`format_marker_name`)."""
    if not isinstance(name, str):
        raise InvalidMarkerNameError(f"marker name must be a str, found {type(name).__name__}")
    partition, _, leaf = name.rpartition("/")
    file_name, sep, io_type = leaf.rpartition(f"{MARKER_EXTN}.")
    if not sep or not file_name:
        raise InvalidMarkerNameError(
            f"{name!r} is not a marker name: expected '[<partition>/]<dataFileName>.marker.<IOType>' "
            f"with IOType in {', '.join(IO_TYPES)}"
        )
    if partition.strip("/") != partition:
        raise InvalidMarkerNameError(f"{name!r} is not a marker name: partition path has a leading/trailing '/'")
    return MarkerName(partition, file_name, io_type)  # type: ignore[arg-type]


def strip_marker_suffix(path: str) -> str:
    """``path`` up to (excluding) the first ``.marker`` (Hudi's ``stripMarkerSuffix``)."""
    i = path.find(MARKER_EXTN)
    if i < 0:
        raise InvalidMarkerNameError(f"{path!r} has no {MARKER_EXTN!r} extension")
    return path[:i]


def markers_file_name(index: int) -> str:
    """``MARKERS<index>``: the timeline-server marker file written by batch thread slot ``index``."""
    if index < 0:
        raise ValueError(f"MARKERS file index must be >= 0, found {index}")
    return f"{MARKERS_PREFIX}{index}"


def parse_markers_file_index(file_name: str) -> int:
    """The index of a ``MARKERS<n>`` file name (``MARKERS3`` -> 3)."""
    m = _MARKERS_FILE_RE.match(file_name)
    if not m:
        raise MarkerError(
            f"{file_name!r} is not a timeline-server marker file: expected 'MARKERS<n>' with n a number"
        )
    return int(m.group(1))


# ---------------------------------------------------------------------- on-disk helpers
def read_marker_type(storage: Storage, instant: str) -> str | None:
    """The content of ``MARKERS.type`` (stripped), or None when the file does not exist."""
    try:
        return storage.read(f"{marker_dir(instant)}/{MARKER_TYPE_FILE}").decode("utf-8").strip()
    except FileNotFoundError:
        return None


def read_marker_files(storage: Storage, instant: str) -> dict[int, list[str]]:
    """Every ``MARKERS<n>`` file of the instant: ``{n: [marker, ...]}`` (empty if none).

    ``MARKERS.type`` is skipped; any other top-level file starting with ``MARKERS`` whose
    suffix is not a number raises :class:`MarkerError` (as Hudi's ``parseMarkerFileIndex``).
    Each non-blank line is one marker name.
    """
    out: dict[int, list[str]] = {}
    for e in storage.list(marker_dir(instant)):
        if e.is_dir or not e.name.startswith(MARKERS_PREFIX) or e.name == MARKER_TYPE_FILE:
            continue
        idx = parse_markers_file_index(e.name)
        try:
            text = storage.read(e.path).decode("utf-8")
        except FileNotFoundError:  # deleted while listing
            continue
        out[idx] = [line for line in text.splitlines() if line.strip()]
    return out


def _data_paths(markers: Iterable[str], *, append: bool) -> set[str]:
    out = set()
    for m in markers:
        if MARKER_EXTN not in m:
            continue
        if m.endswith(".APPEND") == append:
            out.add(strip_marker_suffix(m))
    return out


# ------------------------------------------------------------------------------ interface
class MarkerConflict(Protocol):
    """What an early-conflict check found (:class:`lakesdk.concurrency.early.EarlyConflict`):
    the other writer's instant and action, the ``(partition, fileId)`` both write, and
    whether that write completed since this one started."""

    @property
    def instant(self) -> str: ...
    @property
    def action(self) -> str: ...
    @property
    def file_groups(self) -> tuple[tuple[str, str], ...]: ...
    @property
    def completed(self) -> bool: ...


class ConflictDetector(Protocol):
    """What the markers ask of an early-conflict detector
    (:class:`lakesdk.concurrency.early.EarlyConflictDetector`, a layer above the markers):
    direct markers call :meth:`check` before they create one; the marker server calls
    :meth:`find` when a create request comes, and :meth:`refresh` then :meth:`match` in the
    background."""

    def check(self, names: Iterable[str]) -> None: ...
    def find(self, names: Iterable[str]) -> MarkerConflict | None: ...
    def match(self, names: Iterable[str]) -> MarkerConflict | None: ...
    def refresh(self) -> None: ...
    def error(self, conflict: Any, names: Iterable[str] = ()) -> Exception: ...


class WriteMarkers(ABC):
    """The markers of one instant of one table.

    Implementations hold only a :class:`~lakesdk.storage.Storage`, the instant (and, for
    the timeline-server flavour, the server URL and token), so they pickle to Spark
    executors.  ``repr`` does no I/O.
    """

    marker_type: MarkerType

    def __init__(self, storage: Storage, instant: str) -> None:
        self.storage = storage
        self.instant = validate_instant(instant)

    @property
    def marker_dir(self) -> str:
        """``.hoodie/.temp/<instant>``, relative to the table base."""
        return marker_dir(self.instant)

    # -- creation ------------------------------------------------------------------------
    @abstractmethod
    def create_if_absent(self, partition: str, file_name: str, io_type: str) -> bool:
        """Create the marker; True if this call created it, False if it already existed."""

    def create(self, partition: str, file_name: str, io_type: str) -> str:
        """Create the marker if it is absent (idempotent) and return its name."""
        name = format_marker_name(partition, file_name, io_type)
        self.create_if_absent(partition, file_name, io_type)
        return name

    def create_many(self, markers: Iterable[tuple[str, str, str]]) -> list[bool]:
        """Create several ``(partition, file_name, io_type)`` markers, in order.

        Returns one flag per marker (True if created by this call).  Every marker is
        durable when this returns.  The base implementation creates them one by one;
        the timeline-server client sends them in one request.
        """
        return [self.create_if_absent(p, f, t) for p, f, t in markers]

    def create_log_marker(self, partition: str, log_file_name: str, *, table_version: int = 8) -> str:
        """Marker for a log file: ``CREATE`` for table version >= 8, ``APPEND`` for version 6."""
        return self.create(partition, log_file_name, "CREATE" if table_version >= 8 else "APPEND")

    # -- reading -------------------------------------------------------------------------
    @abstractmethod
    def all_markers(self) -> set[str]:
        """Every marker name (relative to the marker dir, with suffix); empty if the dir is missing."""

    def data_files(self) -> set[str]:
        """Data file paths (relative to the table base) of every CREATE and MERGE marker.

        APPEND markers are excluded (Hudi's ``createdAndMergedDataPaths``: appends to log
        files are fail-safe).  These are the candidates finalize compares with the write
        stats.
        """
        return _data_paths(self.all_markers(), append=False)

    def appended_log_files(self) -> set[str]:
        """Log file paths of every APPEND marker (table version 6)."""
        return _data_paths(self.all_markers(), append=True)

    @abstractmethod
    def exists(self) -> bool:
        """Whether the marker directory exists."""

    @abstractmethod
    def delete_all(self) -> bool:
        """Remove the instant's marker directory; True if something was deleted, False if it was absent."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}(type={self.marker_type!r}, instant={self.instant!r}, base={self.storage.base_url!r})"
