"""Byte ranges of one file, read on demand: what a point lookup in a large file reads instead
of the whole file (:class:`lakesdk.format.hfile.HFileReader` with ``source=``).

>>> r = ByteRanges.of_bytes(b"0123456789")
>>> r.size, r.read(2, 3), r.window(4, 4).read(1, 10), r.bytes_read
(10, b'234', b'567', 6)
"""

from __future__ import annotations

import io
import os
import threading
from typing import Any, BinaryIO, Callable

__all__ = ["ByteRanges"]


class _File:
    """The file the windows of one :class:`ByteRanges` share, opened on the first read."""

    def __init__(self, opener: Callable[[], BinaryIO]) -> None:
        self.opener = opener
        self.file: BinaryIO | None = None
        self.fd: int | None = None          # a local file's descriptor: positional reads, no lock
        self.lock = threading.Lock()
        self.read = 0

    def pread(self, n: int, at: int) -> bytes:
        fd = self.fd
        if fd is not None:
            out = os.pread(fd, n, at)
            self.read += len(out)
            return out
        with self.lock:
            if self.file is None:
                self.file = f = self.opener()
                try:
                    self.fd = fd = f.fileno()
                except (AttributeError, OSError, ValueError, io.UnsupportedOperation):
                    fd = None
            if fd is not None:
                got = os.pread(fd, n, at)
            else:
                self.file.seek(at)
                got = bytes(self.file.read(n))
            self.read += len(got)
        return got

    def close(self) -> None:
        with self.lock:
            if self.file is not None:
                self.file.close()
            self.file = self.fd = None


class ByteRanges:
    """The ``size`` bytes of a file from ``start`` on, read by ``read(offset, n)`` (offsets
    within the window; a read past its end is cut short).  The file is opened on the first
    read, by ``opener`` (a seekable binary file object), and shared by the windows cut from
    it (:meth:`window`); :meth:`close` (or ``with``) closes it.  ``bytes_read`` counts the
    bytes read through this window and the windows cut from it."""

    def __init__(self, opener: Callable[[], BinaryIO], size: int, start: int = 0, *, _shared: _File | None = None) -> None:
        self.size = size
        self._start = start
        self._file = _shared if _shared is not None else _File(opener)

    @classmethod
    def of_storage(cls, storage: Any, rel: str, size: int | None = None) -> "ByteRanges":
        """The file ``rel`` of a :class:`~lakesdk.storage.Storage` (``size``: as listed, else asked)."""
        return cls(lambda: storage.open_input(rel), storage.size(rel) if size is None else size)

    @classmethod
    def of_bytes(cls, data: bytes) -> "ByteRanges":
        return cls(lambda: io.BytesIO(data), len(data))

    @property
    def bytes_read(self) -> int:
        return self._file.read

    def read(self, offset: int, n: int) -> bytes:
        n = max(0, min(n, self.size - offset))
        if offset < 0 or not n:
            return b""
        return self._file.pread(n, self._start + offset)

    def window(self, offset: int, size: int) -> "ByteRanges":
        """The ``size`` bytes from ``offset`` (cut to this window), read through the same file."""
        offset = max(0, min(offset, self.size))
        return ByteRanges(self._file.opener, max(0, min(size, self.size - offset)), self._start + offset,
                          _shared=self._file)

    def close(self) -> None:
        self._file.close()

    def __enter__(self) -> "ByteRanges":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
