"""Base files' footers as the key index reads them: key range and bloom filter
(:mod:`lakesdk.format.bloom`), decoded once per file and kept in a process-wide cache
bounded in bytes (``LAKESDK_FOOTER_CACHE_MB``, default 256).  A file never changes under its
name, so a cached footer stays right; a write caches the footers of the files it wrote.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict

from lakesdk.format.bloom import FooterIndex, read_footer
from lakesdk.storage import Storage

__all__ = ["footer_of", "remember_footer", "clear_footer_cache"]

_CACHE_BYTES = int(float(os.environ.get("LAKESDK_FOOTER_CACHE_MB", "256")) * 1024 * 1024)


class _FooterCache:
    """Decoded footers by file URL, least recently used first out past ``limit`` bytes."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.size = 0
        self._items: OrderedDict[str, tuple[FooterIndex, int]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, url: str) -> FooterIndex | None:
        with self._lock:
            hit = self._items.get(url)
            if hit is None:
                return None
            self._items.move_to_end(url)
            return hit[0]

    def put(self, url: str, index: FooterIndex) -> None:
        nbytes = 256 + index.nbytes
        if nbytes > self.limit:
            return
        with self._lock:
            old = self._items.pop(url, None)
            if old is not None:
                self.size -= old[1]
            self._items[url] = (index, nbytes)
            self.size += nbytes
            while self.size > self.limit and self._items:
                _, (_, n) = self._items.popitem(last=False)
                self.size -= n

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self.size = 0


_FOOTERS = _FooterCache(_CACHE_BYTES)


def clear_footer_cache() -> None:
    """Forget every cached footer (benchmarks measure a cold index with it)."""
    _FOOTERS.clear()


def remember_footer(storage: Storage, path: str, index: FooterIndex) -> None:
    """Cache the footer of a base file just written (a file name is never reused)."""
    _FOOTERS.put(storage.url(path), index)


def footer_of(storage: Storage, path: str) -> FooterIndex:
    """The key range and bloom filter of a base file's footer (cached)."""
    url = storage.url(path)
    hit = _FOOTERS.get(url)
    if hit is not None:
        return hit
    import pyarrow.parquet as pq

    from lakesdk.format.damaged import damaged_file
    if storage.is_local:
        with damaged_file(path):
            md = pq.read_metadata(url)
    else:
        with storage.open_input(path) as f, damaged_file(path):
            md = pq.read_metadata(f)
    index = read_footer(md.metadata)
    index.rows = md.num_rows
    _FOOTERS.put(url, index)
    return index


