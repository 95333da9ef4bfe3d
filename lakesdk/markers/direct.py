"""DIRECT markers: one empty file per marker.

Layout (relative to the table base)::

    .hoodie/.temp/<instant>/<partitionPath>/<dataFileName>.marker.<IOType>
    .hoodie/.temp/<instant>/<dataFileName>.marker.<IOType>          (non-partitioned)

Creating a marker is one exclusive create on storage (``Storage.create_exclusive``: it
fails if the file exists, so ``create_if_absent`` tells first from repeated calls).
Listing walks the marker directory.  No ``MARKERS.type`` file is written.  Every marker
costs one storage request to create, and listing costs grow with their number; the
timeline-server flavour (:mod:`lakesdk.markers.server`) batches them instead.

With an early-conflict ``detector`` (:class:`lakesdk.concurrency.early.EarlyConflictDetector`)
every creation is checked first against the markers of the other running writers: one
check per :meth:`DirectWriteMarkers.create_many` batch, and the detector caches its
listing, so the cost does not grow with the number of records or files.
"""

from __future__ import annotations

from typing import Iterable, Literal

from lakesdk.markers.base import (
    MARKER_EXTN,
    ConflictDetector,
    InvalidMarkerNameError,
    MarkerError,
    WriteMarkers,
    format_marker_name,
    parse_marker_name,
)
from lakesdk.storage import Storage

__all__ = ["DirectWriteMarkers"]


class DirectWriteMarkers(WriteMarkers):
    """Markers stored as empty files under ``.hoodie/.temp/<instant>/``.

    >>> from lakesdk.storage import Storage
    >>> m = DirectWriteMarkers(Storage("memory://doctest-direct-markers"), "000")
    >>> m
    DirectWriteMarkers(type='DIRECT', instant='000', base='memory://doctest-direct-markers')
    >>> m.create_if_absent("2020/06/01", "f1.parquet", "CREATE"), m.create_if_absent("2020/06/01", "f1.parquet", "CREATE")
    (True, False)
    >>> sorted(m.all_markers()), sorted(m.data_files())
    (['2020/06/01/f1.parquet.marker.CREATE'], ['2020/06/01/f1.parquet'])
    >>> m.delete_all(), m.delete_all()
    (True, False)
    """

    marker_type: Literal["DIRECT"] = "DIRECT"

    def __init__(self, storage: Storage, instant: str, *, detector: ConflictDetector | None = None) -> None:
        super().__init__(storage, instant)
        self.detector = detector

    def create_if_absent(self, partition: str, file_name: str, io_type: str) -> bool:
        name = format_marker_name(partition, file_name, io_type)
        if self.detector is not None:
            self.detector.check([name])
        return self._create(name)

    def create_many(self, markers: Iterable[tuple[str, str, str]]) -> list[bool]:
        """Create several markers; with a detector, all of them are checked first (one check)."""
        names = [format_marker_name(p, f, t) for p, f, t in markers]
        if self.detector is not None and names:
            self.detector.check(names)
        return [self._create(n) for n in names]

    def _create(self, name: str) -> bool:
        path = f"{self.marker_dir}/{name}"
        try:
            return self.storage.create_exclusive(path, b"")
        except OSError as exc:
            raise MarkerError(
                f"Failed to create marker file {self.storage.url(path)!r}: {exc}. "
                "Check that the table's .hoodie/.temp folder is writable."
            ) from exc

    def all_markers(self) -> set[str]:
        """Every marker file below the marker dir, as a name relative to it.

        Files that do not parse as marker names are skipped: stray files, and the short-lived
        temporary files of an exclusive create still in progress.
        """
        prefix = self.marker_dir + "/"
        out = set()
        for e in self.storage.find(self.marker_dir):
            rel = e.path[len(prefix):] if e.path.startswith(prefix) else e.path
            if MARKER_EXTN not in rel:
                continue
            try:
                out.add(parse_marker_name(rel).name)
            except InvalidMarkerNameError:
                continue
        return out

    def exists(self) -> bool:
        return self.storage.exists(self.marker_dir)

    def delete_all(self) -> bool:
        if not self.storage.exists(self.marker_dir):
            return False
        self.storage.delete_dir(self.marker_dir)
        return True
