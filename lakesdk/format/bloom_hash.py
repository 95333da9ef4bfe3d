"""Hadoop's MurmurHash of record keys, as Hudi's bloom filters hash them, vectorised.

A key's bits in a filter: its UTF-8 bytes hashed ``nbHash`` times with Hadoop's MurmurHash
(the 32-bit MurmurHash2 of Hadoop and Hudi, whose tail bytes are sign-extended), each time
seeded with the previous hash (0 first); bit ``|h % vectorSize|`` (Java's remainder of the
signed hash).  Keys are grouped by length; the per-block work of MurmurHash does not depend
on the seed and is done once per key, so each of the ``nbHash`` rounds costs a few numpy
operations per 4-byte block.  Keys are hashed :data:`CHUNK` at a time, so that the arrays of a
round stay in the core's cache.

Where lakesdk's C part is built (``lakesdk.format._bloom_native``, optional: a C compiler at
install), the same work runs there, about three times faster for short keys: hashing, setting
the bits of a filter (packed, as it is stored) and testing them.  :data:`native` is that module,
or None; both give the same bits.
"""

from __future__ import annotations

from typing import Iterator, Sequence

import numpy as np
import pyarrow as pa

__all__ = ["murmur_hash", "key_positions", "key_bits", "set_key_bits", "set_packed_key_bits", "utf8_buffers",
           "native"]

_M = np.uint32(0x5BD1E995)

try:
    from lakesdk.format import _bloom_native as native  # type: ignore[attr-defined]
except ImportError:   # not built: numpy does the same work
    native = None


def utf8_buffers(keys: pa.Array | pa.ChunkedArray | Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """(bytes as uint8, offsets as int64 of n + 1 into them) of string keys: the bytes of
    these keys only, the first at offset 0."""
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
    if len(keys) == 0:
        return np.zeros(0, np.uint8), np.zeros(1, np.int64)
    bufs = keys.buffers()
    large = pa.types.is_large_string(keys.type) or pa.types.is_large_binary(keys.type)
    off = np.frombuffer(bufs[1], dtype=np.int64 if large else np.int32)[keys.offset: keys.offset + len(keys) + 1]
    if bufs[2] is None or not len(off):
        return np.zeros(0, np.uint8), np.zeros(len(off), np.int64)
    # only the bytes of these keys (a slice of a column shares the whole column's buffer)
    lo, hi = int(off[0]), int(off[-1])
    return np.frombuffer(bufs[2], dtype=np.uint8)[lo:hi], off.astype(np.int64) - lo


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
    the mixed 4-byte blocks (shape ``(blocks, n)``), the lengths and the tail bytes.  A
    length or tail multiplier shared by every key of the group is kept as a scalar."""

    __slots__ = ("blocks", "length", "tail", "tail_mul", "n")

    def __init__(self, data: np.ndarray, starts: np.ndarray, lengths: np.ndarray, nblocks: int) -> None:
        m = _M
        n = self.n = len(starts)
        width = int(lengths[0]) if n else 0
        # keys of one length stored back to back (a fixed-width id, a uuid): one matrix view
        dense = n > 0 and bool((lengths == width).all()) and int(starts[-1]) - int(starts[0]) == (n - 1) * width \
            and bool((np.diff(starts) == width).all())
        mat = data[int(starts[0]): int(starts[0]) + n * width].reshape(n, width) if dense else None
        with np.errstate(over="ignore"):
            if mat is not None:
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
            same = mat is not None or (n > 0 and bool((lengths == width).all()))
            self.length: np.ndarray | np.uint32 = np.uint32(width) if same else lengths.astype(np.uint32)
            left = lengths - 4 * nblocks
            self.tail: np.ndarray | None = None
            self.tail_mul: np.ndarray | np.uint32 = m
            if same and width - 4 * nblocks == 0:
                return
            if same or (left > 0).any():
                if mat is not None:
                    def sx(i: int) -> np.ndarray:   # the tail byte i, sign-extended as a Java byte
                        col = mat[:, min(4 * nblocks + i, width - 1)]
                        return col.view(np.int8).astype(np.int32).view(np.uint32)
                else:
                    last = len(data) - 1
                    base = starts + 4 * nblocks

                    def sx(i: int) -> np.ndarray:
                        return data[np.minimum(base + i, last)].view(np.int8).astype(np.int32).view(np.uint32)
                b0, b1, b2 = sx(0), sx(1), sx(2)
                t3 = (b0 << np.uint32(16)) ^ (b1 << np.uint32(8)) ^ b2
                t2 = (b0 << np.uint32(8)) ^ b1
                if same:   # one tail length
                    self.tail = {3: t3, 2: t2, 1: b0}[width - 4 * nblocks].astype(np.uint32)
                else:
                    self.tail = np.where(left == 3, t3, np.where(left == 2, t2, np.where(
                        left == 1, b0, np.uint32(0)))).astype(np.uint32)
                    self.tail_mul = np.where(left > 0, m, np.uint32(1)).astype(np.uint32)

    def hash(self, seed: np.ndarray, tmp: np.ndarray | None = None) -> np.ndarray:
        """The hash of every key of the group under its ``seed``, computed in ``seed``'s
        place (``tmp``: scratch space of the same shape)."""
        m = _M
        h = seed
        if tmp is None:
            tmp = np.empty_like(h)
        with np.errstate(over="ignore"):
            h ^= self.length
            for k in self.blocks:
                h *= m
                h ^= k
            if self.tail is not None:
                h ^= self.tail
                h *= self.tail_mul
            np.right_shift(h, np.uint32(13), out=tmp)
            h ^= tmp
            h *= m
            np.right_shift(h, np.uint32(15), out=tmp)
            h ^= tmp
        return h

    def positions(self, vector_size: int, nb_hash: int) -> Iterator[np.ndarray]:
        """The bit position of every key under each of the ``nb_hash`` hashes in turn (one
        array of indices, overwritten at the next step)."""
        vs = np.uint32(vector_size)
        h = np.zeros(self.n, np.uint32)
        a = np.empty(self.n, np.uint32)
        tmp = np.empty(self.n, np.uint32)
        pos = np.empty(self.n, np.intp)   # numpy indexes with these without a cast (twice as fast)
        for _ in range(nb_hash):
            self.hash(h, tmp)
            # Java's |h % size| of the signed hash: |h| as unsigned, then the remainder
            # (a division by a scalar: numpy's floor_divide is much faster than remainder)
            np.abs(h.view(np.int32), out=a.view(np.int32))
            np.floor_divide(a, vs, out=tmp)
            tmp *= vs
            np.subtract(a, tmp, out=pos)
            yield pos


def murmur_hash(keys: pa.Array | pa.ChunkedArray | Sequence[str], seed: int = 0) -> np.ndarray:
    """Hadoop's MurmurHash of each key's UTF-8 bytes, as int32 (for tests and tools)."""
    data, off = utf8_buffers(keys)
    lengths = off[1:] - off[:-1]
    out = np.zeros(len(lengths), np.uint32)
    for nblocks, idx in _groups(lengths):
        prep = _Prepared(data, off[:-1][idx], lengths[idx], nblocks)
        out[idx] = prep.hash(np.full(len(idx), seed & 0xFFFFFFFF, np.uint32))
    return out.view(np.int32)


def _checked(keys: pa.Array | pa.ChunkedArray | Sequence[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(bytes, offsets, lengths) of keys to hash; every key must be non-empty (Hudi refuses
    to hash an empty key)."""
    data, off = utf8_buffers(keys)
    lengths = off[1:] - off[:-1]
    if len(lengths) and lengths.min() <= 0:
        raise ValueError("a bloom filter holds no empty key")
    return data, off, lengths


def key_positions(keys: pa.Array | pa.ChunkedArray | Sequence[str], vector_size: int, nb_hash: int) -> np.ndarray:
    """The ``nb_hash`` bit positions of each key, shape ``(nb_hash, n)``, uint32.  Keys must
    be non-empty."""
    data, off, lengths = _checked(keys)
    n = len(lengths)
    out = np.empty((nb_hash, n), np.uint32)
    if native is not None:
        native.positions(data, off, nb_hash, vector_size, out)
        return out
    for idx, prep in _chunks(data, off, lengths):
        whole = len(idx) == n
        for i, a in enumerate(prep.positions(vector_size, nb_hash)):
            if whole:
                out[i] = a
            else:
                out[i, idx] = a
    return out


#: keys hashed together: the arrays of one hash round stay in the core's cache (a round over
#: all the keys of a file at once is bound by memory, about twice as slow)
CHUNK = 1 << 16


def _chunks(data: np.ndarray, off: np.ndarray, lengths: np.ndarray) -> Iterator[tuple[np.ndarray, _Prepared]]:
    """(key indices, their prepared hashing) of at most :data:`CHUNK` keys of one block
    count at a time."""
    for nblocks, idx in _groups(lengths):
        for lo in range(0, len(idx), CHUNK):
            sub = idx[lo: lo + CHUNK]
            yield sub, _Prepared(data, off[:-1][sub], lengths[sub], nblocks)


def key_bits(keys: pa.Array | pa.ChunkedArray | Sequence[str], vector_size: int, nb_hash: int,
             rows: np.ndarray | None = None, nrows: int = 1) -> np.ndarray:
    """The bit vectors of a filter holding ``keys``, shape ``(nrows, vector_size)``, bool:
    key ``i`` sets its ``nb_hash`` bits in row ``rows[i]`` (without ``rows``: row 0).  The
    same bits as setting :func:`key_positions` in each key's row, without holding every
    position at once: each hash's positions are set as they are computed."""
    bits = np.zeros((nrows, vector_size), bool)
    set_key_bits(bits, keys, nb_hash, rows)
    return bits


def set_key_bits(bits: np.ndarray, keys: pa.Array | pa.ChunkedArray | Sequence[str], nb_hash: int,
                 rows: np.ndarray | None = None) -> None:
    """Set the bits of ``keys`` in ``bits`` (shape ``(rows, vector_size)``, bool, C order): key
    ``i`` in row ``rows[i]`` (without ``rows``: row 0)."""
    data, off, lengths = _checked(keys)
    vector_size = bits.shape[1]
    flat = bits.reshape(-1)
    for idx, prep in _chunks(data, off, lengths):
        row = np.zeros(1, np.int64) if rows is None else np.asarray(rows, np.int64)[idx]
        if (row == row[0]).all():   # the chunk's keys go to one row: set in that row's vector
            vec = bits[int(row[0])]
            for a in prep.positions(vector_size, nb_hash):
                vec[a] = True
        else:       # keys dealt to the rows in turn: at row * vector_size + position
            at = row * vector_size
            for a in prep.positions(vector_size, nb_hash):
                flat[at + a] = True


def set_packed_key_bits(packed: np.ndarray, keys: pa.Array | pa.ChunkedArray | Sequence[str], nb_hash: int,
                        vector_size: int, rows: np.ndarray | None = None) -> None:
    """Set the bits of ``keys`` in ``packed`` (shape ``(rows, row bytes)``, uint8, C order: each
    row's bits as a filter stores them, bit ``p`` at bit ``p % 8`` of byte ``p // 8``): key ``i`` in
    row ``rows[i]`` (without ``rows``: row 0).  The bits :func:`set_key_bits` sets, packed;
    with :data:`native` only."""
    assert native is not None and packed.dtype == np.uint8 and packed.flags.c_contiguous
    data, off, _ = _checked(keys)
    at = None if rows is None else np.ascontiguousarray(rows, np.int64)
    native.set_bits(data, off, at, nb_hash, vector_size, packed.shape[1], packed.reshape(-1))
