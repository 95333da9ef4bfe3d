"""Write markers: which data files a write of an instant is creating or modifying.

Two flavours share the :class:`WriteMarkers` interface:

* :class:`DirectWriteMarkers`: one empty file per marker under
  ``.hoodie/.temp/<instant>/<partitionPath>/<dataFileName>.marker.<IOType>``;
* :class:`TimelineServerWriteMarkers`: requests to the writer's :class:`MarkerServer`,
  which batches them into ``.hoodie/.temp/<instant>/MARKERS<n>`` files plus
  ``MARKERS.type`` (text ``TIMELINE_SERVER_BASED``).

The grammar of marker names is in :mod:`lakesdk.markers.base`; the server's protocol in
:mod:`lakesdk.markers.http_api` and its batching in :mod:`lakesdk.markers.server`.

>>> from lakesdk.storage import Storage
>>> s = Storage("memory://doctest-markers-pkg")
>>> with MarkerServer(s, batch_interval_ms=5) as srv:
...     m = write_markers(s, "001", "TIMELINE_SERVER_BASED", server=srv)
...     m.create("2020/06/01", "f1.parquet", "CREATE")
'2020/06/01/f1.parquet.marker.CREATE'
>>> sorted(read_markers(s, "001"))
['2020/06/01/f1.parquet.marker.CREATE']
"""

from __future__ import annotations

import warnings

from lakesdk.markers.base import (
    IO_TYPES,
    MARKER_EXTN,
    MARKER_TYPE_FILE,
    MARKER_TYPES,
    TEMP_DIR,
    InvalidMarkerNameError,
    IOType,
    MarkerAuthError,
    MarkerError,
    MarkerName,
    MarkerServerError,
    MarkerServerUnavailableError,
    MarkerType,
    UnsupportedMarkerTypeError,
    WriteMarkers,
    format_marker_name,
    marker_dir,
    parse_marker_name,
    read_marker_files,
    read_marker_type,
    strip_marker_suffix,
)
from lakesdk.markers.client import TimelineServerWriteMarkers
from lakesdk.markers.direct import DirectWriteMarkers
from lakesdk.markers.server import MarkerDirSnapshot, MarkerServer, MarkerServerStats
from lakesdk.storage import Storage

__all__ = [
    "IOType", "MarkerType", "IO_TYPES", "MARKER_TYPES", "MARKER_EXTN", "MARKER_TYPE_FILE", "TEMP_DIR",
    "MarkerName", "format_marker_name", "parse_marker_name", "strip_marker_suffix", "marker_dir",
    "WriteMarkers", "DirectWriteMarkers", "TimelineServerWriteMarkers",
    "MarkerServer", "MarkerServerStats", "MarkerDirSnapshot",
    "write_markers", "read_markers", "marked_data_files", "detect_marker_type", "read_marker_files", "read_marker_type",
    "MarkerError", "InvalidMarkerNameError", "UnsupportedMarkerTypeError", "MarkerServerError",
    "MarkerAuthError", "MarkerServerUnavailableError",
]

_NO_SERVER_SCHEMES = ("hdfs", "viewfs")


def write_markers(storage: Storage, instant: str, marker_type: str = "DIRECT", *,
                  server: MarkerServer | None = None) -> WriteMarkers:
    """The markers of ``instant`` for the configured ``marker_type`` (``hoodie.write.markers.type``).

    ``TIMELINE_SERVER_BASED`` needs a started ``server`` for the same table.  As in Hudi's
    ``WriteMarkersFactory``, it falls back to DIRECT markers, with a warning, when no server
    is given or when the table is on HDFS.
    """
    kind = str(marker_type).upper()
    if kind == "DIRECT":
        return DirectWriteMarkers(storage, instant)
    if kind != "TIMELINE_SERVER_BASED":
        raise UnsupportedMarkerTypeError(
            f"marker type {marker_type!r} is not supported; expected one of {', '.join(MARKER_TYPES)}"
        )
    if storage.protocol in _NO_SERVER_SCHEMES:
        warnings.warn(f"timeline-server-based markers are not supported on {storage.protocol}://; "
                      "falling back to DIRECT markers", stacklevel=2)
        return DirectWriteMarkers(storage, instant)
    if server is None:
        warnings.warn("TIMELINE_SERVER_BASED markers were asked for but no marker server is running; "
                      "falling back to DIRECT markers", stacklevel=2)
        return DirectWriteMarkers(storage, instant)
    if server.storage != storage:
        raise MarkerError(f"the marker server serves {server.storage.base_url!r}, not this table "
                          f"({storage.base_url!r}); start one MarkerServer per table")
    return TimelineServerWriteMarkers(storage, instant, server.url, server.token,
                                      max_request_bytes=server.max_body_bytes)


def _check_stored_type(storage: Storage, instant: str, stored: str) -> MarkerType:
    if stored != "TIMELINE_SERVER_BASED":
        raise UnsupportedMarkerTypeError(
            f'The marker type "{stored}" is not supported (read from '
            f"{storage.url(marker_dir(instant) + '/' + MARKER_TYPE_FILE)!r}); "
            "only timeline-server-based markers write MARKERS.type"
        )
    return "TIMELINE_SERVER_BASED"


def detect_marker_type(storage: Storage, instant: str) -> MarkerType | None:
    """``TIMELINE_SERVER_BASED`` if ``MARKERS.type`` says so, ``DIRECT`` if per-file markers
    exist without it, None if the instant has no marker dir.  Any other ``MARKERS.type``
    content raises :class:`UnsupportedMarkerTypeError`."""
    stored = read_marker_type(storage, instant)
    if stored is not None:
        return _check_stored_type(storage, instant, stored)
    if not storage.exists(marker_dir(instant)):
        return None
    if read_marker_files(storage, instant):
        return "TIMELINE_SERVER_BASED"
    return "DIRECT"


def marked_data_files(storage: Storage, instant: str) -> set[str] | None:
    """The data files (relative paths) the markers of ``instant`` name now (None: the markers
    cannot be read)."""
    from lakesdk.exceptions import LakeError
    try:
        return {parse_marker_name(m).data_path for m in read_markers(storage, instant)}
    except LakeError:
        return None


def read_markers(storage: Storage, instant: str) -> set[str]:
    """Every marker of ``instant`` read from storage, whatever wrote them (Hudi's
    ``MarkerBasedRollbackUtils.getAllMarkerPaths``; no server needed).

    * ``MARKERS.type`` holds ``TIMELINE_SERVER_BASED``: the union of the ``MARKERS<n>`` files;
    * ``MARKERS.type`` holds anything else: :class:`UnsupportedMarkerTypeError`;
    * no ``MARKERS.type``: the per-file (DIRECT) markers, plus the lines of any ``MARKERS<n>``
      file (a timeline server that failed before writing ``MARKERS.type``).  Hudi falls back
      to the ``MARKERS<n>`` files only when the direct listing fails; taking the union is
      never smaller, so a rollback never misses a file.
    """
    stored = read_marker_type(storage, instant)
    if stored is not None:
        _check_stored_type(storage, instant, stored)
    union: set[str] = set()
    for lines in read_marker_files(storage, instant).values():
        union.update(lines)
    if stored is not None:
        return union
    return union | DirectWriteMarkers(storage, instant).all_markers()
