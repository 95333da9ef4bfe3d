"""Base files' footers as the key index reads them: key range and bloom filter
(:mod:`lakesdk.format.bloom`), decoded once per file and kept in a process-wide cache
bounded in bytes (``LAKESDK_FOOTER_CACHE_MB``, default 256).  A file never changes under its
name, so a cached footer stays right; a write caches the footers of the files it wrote.
"""

from __future__ import annotations

import os

from lakesdk._lru import WeightedLRU
from lakesdk.format.bloom import FooterIndex, read_footer
from lakesdk.storage import Storage

__all__ = ["footer_of", "remember_footer", "clear_footer_cache"]

_CACHE_BYTES = int(float(os.environ.get("LAKESDK_FOOTER_CACHE_MB", "256")) * 1024 * 1024)


#: decoded footers by file URL, weighed in bytes
_FOOTERS: WeightedLRU[str, FooterIndex] = WeightedLRU(_CACHE_BYTES)


def _weight(index: FooterIndex) -> int:
    return 256 + index.nbytes


def clear_footer_cache() -> None:
    """Forget every cached footer (benchmarks measure a cold index with it)."""
    _FOOTERS.clear()


def remember_footer(storage: Storage, path: str, index: FooterIndex) -> None:
    """Cache the footer of a base file just written (a file name is never reused)."""
    _FOOTERS.put(storage.url(path), index, _weight(index))


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
    _FOOTERS.put(url, index, _weight(index))
    return index


