"""Base files' footers as the key index reads them: key range and bloom filter
(:mod:`lakesdk.format.bloom`), decoded once per file and kept in a process-wide cache
bounded in bytes (``LAKESDK_FOOTER_CACHE_MB``, default 256).  A file never changes under its
name, so a cached footer stays right; a write caches the footers of the files it wrote.
"""

from __future__ import annotations

import os

from lakesdk._lru import WeightedLRU
from lakesdk.format.bloom import (
    BLOOM_FILTER_KEY,
    DYNAMIC_V0,
    MAX_KEY,
    MIN_KEY,
    SIMPLE,
    TYPE_CODE_KEY,
    BloomConfig,
    FooterIndex,
    read_footer,
)
from lakesdk.storage import Storage

__all__ = ["footer_of", "remember_footer", "clear_footer_cache", "kept_footer"]

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


def kept_footer(storage: Storage, base_path: str,
                config: BloomConfig | None) -> tuple[dict[bytes, bytes], FooterIndex] | None:
    """The footer of the stored base file ``base_path``, for a rewrite of it that writes the keys
    it holds or some of them (an upsert that only updates them, a compaction whose logs only
    update them: the callers know; the writer sets the index's row count to the rows it
    wrote): its key range and bloom filter hold every key written, and need not
    be hashed again (about a tenth of a second per 500,000 keys).  None (build the footer from
    the keys written) when the file has no filter or one of other settings than ``config``'s
    (Hudi would build the filter its settings say), or when reading its footer would take a
    round trip to an object store that the key index did not make.  A ``DYNAMIC_V0`` filter has
    the rows a filter built from the keys written has; a key that moved within a batch (an
    update is written after the kept rows of its batch) may sit in another row than a rebuild
    would put it in, which no membership test sees."""
    if config is None:
        return None
    index = _FOOTERS.get(storage.url(base_path))
    if index is None:
        if not storage.is_local:
            return None
        index = footer_of(storage, base_path)
    bf, rng, rows = index.bloom, index.range, index.rows
    if bf is None or rng is None or not rows:
        return None
    simple = config.filter_type.upper() == SIMPLE
    if (bf.type_code, bf.vector_size, bf.nb_hash) != (SIMPLE if simple else DYNAMIC_V0, config.vector_size,
                                                      config.nb_hash):
        return None
    if not simple:   # the rows a filter of ``rows`` keys has
        cap = max(1, -(-config.max_entries // config.num_entries))
        want = max(1, min(cap, -(-rows // config.num_entries)))
        if bf.nr != config.num_entries or bf.num_rows != want or bf.current != rows - (want - 1) * config.num_entries:
            return None
    out = {MIN_KEY.encode(): rng.min.encode(), MAX_KEY.encode(): rng.max.encode(), BLOOM_FILTER_KEY.encode(): bf.serialize()}
    if not simple:
        out[TYPE_CODE_KEY.encode()] = DYNAMIC_V0.encode()
    return out, FooterIndex(rng, bf, rows=rows)
