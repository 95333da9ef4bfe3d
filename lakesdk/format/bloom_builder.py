"""A base file's footer built from its record keys, in file order.

:func:`file_footer` takes every key of a file at once; a writer that writes a file as its rows
come (:mod:`lakesdk.engine.base_file_writer`) hands each piece's keys to a
:class:`FooterBuilder`, which can hash them while the next piece is encoded (:func:`file_footer`
is a builder given all the keys in one piece).  The result is the same: the key range in Java's ``String`` order, the row count, and the bloom
filter of Hudi's ``DYNAMIC_V0`` (or ``SIMPLE``) layout, each key in the row Hudi's
``InternalDynamicBloomFilter.add`` puts it in given its position in the file.  No I/O.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakesdk.format import bloom_hash
from lakesdk.format.bloom import (
    BLOOM_FILTER_KEY,
    DYNAMIC_V0,
    MAX_KEY,
    MIN_KEY,
    MURMUR_HASH,
    SIMPLE,
    TYPE_CODE_KEY,
    BloomConfig,
    BloomFilter,
    FooterIndex,
    KeyRange,
    dynamic_rows,
    key_range,
)
from lakesdk.format.bloom_hash import set_key_bits, set_packed_key_bits

__all__ = ["FooterBuilder", "build_filter", "file_footer", "footer_metadata"]


def _java_order(s: str) -> bytes:
    """A key's sort key in Java's ``String`` order (UTF-16 code units)."""
    return s.encode("utf-16-be", "surrogatepass")


class FooterBuilder:
    """The footer entries of a base file and what they tell the key index, built from its
    record keys added piece by piece in file order (:meth:`add`), then :meth:`finish`.  ``config``
    None: no bloom filter (the key range only).  As :func:`~lakesdk.format.bloom.file_footer`,
    no bloom filter when a key is empty (Hudi cannot hash it)."""

    def __init__(self, config: BloomConfig | None = BloomConfig()) -> None:
        self.config = config
        self.count = 0
        self._range: KeyRange | None = None
        self._hashing = config is not None
        if config is not None:
            self._vs, self._nb = config.vector_size, config.nb_hash
            self._simple = config.filter_type.upper() == SIMPLE
            self._nr = config.num_entries
            self._cap = 1 if self._simple else max(1, -(-config.max_entries // self._nr))
            # the rows' bits: packed as stored where the C part hashes, else one bool a bit
            self._packed = bloom_hash.native is not None
            self._bits = np.zeros((1, (self._vs + 7) // 8), np.uint8) if self._packed else np.zeros((1, self._vs), bool)

    def add(self, keys: pa.Array | pa.ChunkedArray) -> None:
        """The next keys of the file, in file order (no null key)."""
        n = len(keys)
        if not n:
            return
        if isinstance(keys, pa.ChunkedArray) and keys.num_chunks > 1:
            keys = keys.combine_chunks()    # once, for the range, the check and the hashes
        rng = key_range(keys)
        if rng is not None:
            if self._range is None:
                self._range = rng
            else:
                lo = min(self._range.min, rng.min, key=_java_order)
                hi = max(self._range.max, rng.max, key=_java_order)
                self._range = KeyRange(lo, hi)
        if self._hashing and pc.min(pc.binary_length(keys)).as_py() == 0:   # an empty key: Hudi writes no filter
            self._hashing = False
            self._bits = np.zeros((0, 0), bool)
        if self._hashing:
            self.hash_keys(keys)
        else:
            self.count += n

    def hash_keys(self, keys: pa.Array | pa.ChunkedArray | Sequence[str]) -> None:
        """Set the bloom filter's bits of the next keys (any key, an empty one too; the key
        range is :meth:`add`'s)."""
        n = len(keys)
        start, self.count = self.count, self.count + n
        rows = None if self._simple or start + n <= self._nr else self._rows(start, n)
        if self._packed:
            set_packed_key_bits(self._bits, keys, self._nb, self._vs, rows)
        else:
            set_key_bits(self._bits, keys, self._nb, rows)

    def _rows(self, start: int, n: int) -> np.ndarray:
        """The row of keys ``start`` to ``start + n - 1`` (:func:`~lakesdk.format.bloom.dynamic_rows`),
        the bit rows grown to hold them."""
        need = min(self._cap, -(-(start + n) // self._nr))
        have = self._bits.shape[0]
        if need > have:
            grown = np.zeros((min(self._cap, max(need, 2 * have)), self._bits.shape[1]), self._bits.dtype)
            grown[:have] = self._bits
            self._bits = grown
        return dynamic_rows(start, n, self._nr, self._cap)

    def bloom(self) -> BloomFilter:
        """The bloom filter of the keys hashed so far."""
        assert self.config is not None and self._hashing
        nrows = 1 if self._simple else max(1, int(min(self._cap, math.ceil(self.count / self._nr))))
        flat = self._bits[:nrows].reshape(-1).copy() if self._packed else \
            np.packbits(self._bits[:nrows], axis=1, bitorder="little").reshape(-1)
        nbytes = (self._vs + 7) // 8
        code = SIMPLE if self._simple else DYNAMIC_V0
        current = 0 if self._simple else self.count - (nrows - 1) * self._nr
        bf = BloomFilter(code, self._vs, self._nb, MURMUR_HASH, [flat[r * nbytes: (r + 1) * nbytes] for r in range(nrows)],
                         self._nr if code == DYNAMIC_V0 else 0, current)
        bf._flat = flat            # the rows back to back, as the index tests them
        return bf

    def finish(self) -> tuple[dict[bytes, bytes], FooterIndex | None]:
        """(footer entries, what they tell the key index).  A file of no key has no key range
        and, with a bloom filter, an empty one (as Hudi's ``HoodieBloomFilterWriteSupport`` writes
        it, and its bloom index reads it); without one, ``({}, None)``."""
        if not self.count and not (self._hashing and self.config is not None):
            return {}, None
        out: dict[bytes, bytes] = {}
        index = FooterIndex(self._range, rows=self.count)
        if self._range is not None:
            out[MIN_KEY.encode()] = self._range.min.encode()
            out[MAX_KEY.encode()] = self._range.max.encode()
        if not self._hashing or self.config is None:
            return out, index
        bf = self.bloom()
        out[BLOOM_FILTER_KEY.encode()] = bf.serialize()
        if bf.type_code == DYNAMIC_V0:
            out[TYPE_CODE_KEY.encode()] = DYNAMIC_V0.encode()
        index.bloom = bf
        self._bits = np.zeros((0, 0), bool)
        return out, index


def build_filter(keys: pa.Array | pa.ChunkedArray | Sequence[str], config: BloomConfig = BloomConfig()) -> BloomFilter:
    """The filter Hudi writes for ``keys`` added in this order (any key hashed, an empty one
    too; :func:`file_footer` writes no filter then)."""
    builder = FooterBuilder(config)
    builder.hash_keys(keys)
    return builder.bloom()


def file_footer(keys: pa.Array | pa.ChunkedArray,
                config: BloomConfig | None = BloomConfig()) -> tuple[dict[bytes, bytes], FooterIndex]:
    """The footer entries of a base file holding ``keys`` (in file order), and what they tell
    the key index: key range and, with ``config``, the bloom filter and its type code (only
    ``DYNAMIC_V0`` names it, as Hudi writes).  Without a bloom filter when a key is empty
    (Hudi cannot hash it)."""
    builder = FooterBuilder(config)
    builder.add(keys)
    out, index = builder.finish()
    return out, index if index is not None else FooterIndex(None, rows=0)


def footer_metadata(keys: pa.Array | pa.ChunkedArray, config: BloomConfig | None = BloomConfig()) -> dict[bytes, bytes]:
    """The footer entries of :func:`file_footer`."""
    return file_footer(keys, config)[0]
