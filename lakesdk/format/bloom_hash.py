"""Hadoop's MurmurHash of record keys, as Hudi's bloom filters hash them, vectorised.

A key's bits in a filter: its UTF-8 bytes hashed ``nbHash`` times with Hadoop's MurmurHash
(the 32-bit MurmurHash2 of Hadoop and Hudi, whose tail bytes are sign-extended), each time
seeded with the previous hash (0 first); bit ``|h % vectorSize|`` (Java's remainder of the
signed hash).  Keys are grouped by length; the per-block work of MurmurHash does not depend
on the seed and is done once per key, so each of the ``nbHash`` rounds costs a few numpy
operations per 4-byte block.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import pyarrow as pa

__all__ = ["murmur_hash", "key_positions", "utf8_buffers"]

_M = np.uint32(0x5BD1E995)


def utf8_buffers(keys: pa.Array | pa.ChunkedArray | Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """(bytes as uint8, offsets as int64 of n + 1) of string keys."""
    if not isinstance(keys, (pa.Array, pa.ChunkedArray)):
        keys = pa.array(list(keys), pa.string())
    if isinstance(keys, pa.ChunkedArray):
        keys = keys.combine_chunks() if keys.num_chunks != 1 else keys.chunk(0)
    if pa.types.is_dictionary(keys.type):
        keys = keys.cast(pa.string())
    if pa.types.is_string_view(keys.type) or pa.types.is_binary_view(keys.type):
        keys = keys.cast(pa.large_string())
    if keys.null_count:
        raise ValueError("a bloom filter holds no null key")
    bufs = keys.buffers()
    large = pa.types.is_large_string(keys.type) or pa.types.is_large_binary(keys.type)
    off = np.frombuffer(bufs[1], dtype=np.int64 if large else np.int32)[keys.offset: keys.offset + len(keys) + 1]
    data = np.frombuffer(bufs[2], dtype=np.uint8) if bufs[2] is not None else np.zeros(0, np.uint8)
    return data, off.astype(np.int64)


def _groups(lengths: np.ndarray) -> list[tuple[int, np.ndarray]]:
    """Key indices grouped by number of 4-byte blocks: [(blocks, indices)]."""
    blocks = lengths >> 2
    if blocks.size and blocks.min() == blocks.max():
        return [(int(blocks[0]), np.arange(blocks.size))]
    order = np.argsort(blocks, kind="stable")
    cuts = np.flatnonzero(np.diff(blocks[order])) + 1
    return [(int(blocks[g[0]]), g) for g in np.split(order, cuts) if g.size]


class _Prepared:
    """The seed-independent part of MurmurHash for one group of keys of equal block count:
    the mixed 4-byte blocks (shape ``(blocks, n)``), the lengths and the tail bytes."""

    __slots__ = ("blocks", "length", "tail", "tail_mul")

    def __init__(self, data: np.ndarray, starts: np.ndarray, lengths: np.ndarray, nblocks: int) -> None:
        m = _M
        n = len(starts)
        width = int(lengths[0]) if n else 0
        # keys of one length stored back to back (a fixed-width id, a uuid): one matrix view
        dense = n > 0 and bool((lengths == width).all()) and int(starts[-1]) - int(starts[0]) == (n - 1) * width \
            and bool((np.diff(starts) == width).all())
        with np.errstate(over="ignore"):
            if dense:
                mat = data[int(starts[0]): int(starts[0]) + n * width].reshape(n, width)
                k = np.ascontiguousarray(mat[:, : 4 * nblocks]).view("<u4").T.copy() if nblocks else \
                    np.zeros((0, n), np.uint32)
            else:
                k = np.empty((nblocks, n), np.uint32)
                for j in range(nblocks):
                    p = starts + 4 * j
                    k[j] = (data[p].astype(np.uint32) | (data[p + 1].astype(np.uint32) << 8)
                            | (data[p + 2].astype(np.uint32) << 16) | (data[p + 3].astype(np.uint32) << 24))
            k *= m
            k ^= k >> np.uint32(24)
            k *= m
            self.blocks = k
            self.length = lengths.astype(np.uint32)
            left = lengths - 4 * nblocks
            if (left > 0).any():
                last = len(data) - 1
                base = starts + 4 * nblocks

                def sx(i: int) -> np.ndarray:   # the tail byte i, sign-extended as a Java byte
                    return data[np.minimum(base + i, last)].view(np.int8).astype(np.int32).view(np.uint32)
                b0, b1, b2 = sx(0), sx(1), sx(2)
                t3 = (b0 << np.uint32(16)) ^ (b1 << np.uint32(8)) ^ b2
                t2 = (b0 << np.uint32(8)) ^ b1
                self.tail: np.ndarray | None = np.where(left == 3, t3, np.where(left == 2, t2, np.where(
                    left == 1, b0, np.uint32(0)))).astype(np.uint32)
                self.tail_mul = np.where(left > 0, m, np.uint32(1)).astype(np.uint32)
            else:
                self.tail = None

    def hash(self, seed: np.ndarray) -> np.ndarray:
        m = _M
        with np.errstate(over="ignore"):
            h = seed ^ self.length
            for k in self.blocks:
                h *= m
                h ^= k
            if self.tail is not None:
                h ^= self.tail
                h *= self.tail_mul
            h ^= h >> np.uint32(13)
            h *= m
            h ^= h >> np.uint32(15)
        return h


def murmur_hash(keys: pa.Array | pa.ChunkedArray | Sequence[str], seed: int = 0) -> np.ndarray:
    """Hadoop's MurmurHash of each key's UTF-8 bytes, as int32 (for tests and tools)."""
    data, off = utf8_buffers(keys)
    lengths = off[1:] - off[:-1]
    out = np.zeros(len(lengths), np.uint32)
    for nblocks, idx in _groups(lengths):
        prep = _Prepared(data, off[:-1][idx], lengths[idx], nblocks)
        out[idx] = prep.hash(np.full(len(idx), seed & 0xFFFFFFFF, np.uint32))
    return out.view(np.int32)


def key_positions(keys: pa.Array | pa.ChunkedArray | Sequence[str], vector_size: int, nb_hash: int) -> np.ndarray:
    """The ``nb_hash`` bit positions of each key, shape ``(nb_hash, n)``, uint32.  Keys must
    be non-empty (Hudi refuses to hash an empty key)."""
    data, off = utf8_buffers(keys)
    lengths = off[1:] - off[:-1]
    n = len(lengths)
    out = np.empty((nb_hash, n), np.uint32)
    if n == 0:
        return out
    if lengths.min() <= 0:
        raise ValueError("a bloom filter holds no empty key")
    vs = np.uint32(vector_size)
    groups = _groups(lengths)
    for nblocks, idx in groups:
        prep = _Prepared(data, off[:-1][idx], lengths[idx], nblocks)
        h = np.zeros(len(idx), np.uint32)
        for i in range(nb_hash):
            h = prep.hash(h)
            # Java's |h % size| of the signed hash: |h| as unsigned, then the remainder
            # (a division by a scalar: numpy's floor_divide is much faster than remainder)
            a = np.abs(h.view(np.int32)).view(np.uint32)
            q = a // vs
            q *= vs
            a -= q
            if len(groups) == 1:
                out[i] = a
            else:
                out[i, idx] = a
    return out
