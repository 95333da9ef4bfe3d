"""The bloom filter a base file's footer carries, as built since the bits are set hash by
hash (:func:`lakesdk.format.bloom_hash.key_bits`): the same bytes as the previous build, which
computed every key's positions first and then set them row by row (kept here as it was), and
as a filter built key by key from a plain transcription of Hadoop's MurmurHash and of Hudi's
dynamic rows, for keys of one length stored back to back (the fast path of ids), of mixed
lengths, multi-byte characters, slices and chunked columns, hashed a few keys at a time or
all at once.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from hypothesis import given, settings
from hypothesis import strategies as st

from lakesdk.format import bloom as B
from lakesdk.format import bloom_builder as BB
from lakesdk.format import bloom_hash
from lakesdk.format.bloom_hash import _groups, utf8_buffers

from .test_bloom import _ref_positions, _ref_rows

_M = np.uint32(0x5BD1E995)


# ---------------------------------------------------------------------------------- the previous build
class _OldPrepared:
    """lakesdk.format.bloom_hash._Prepared before the bits were set hash by hash."""

    def __init__(self, data: np.ndarray, starts: np.ndarray, lengths: np.ndarray, nblocks: int) -> None:
        m = _M
        n = len(starts)
        width = int(lengths[0]) if n else 0
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
            self.tail = None
            if (left > 0).any():
                last = len(data) - 1
                base = starts + 4 * nblocks

                def sx(i: int) -> np.ndarray:
                    return data[np.minimum(base + i, last)].view(np.int8).astype(np.int32).view(np.uint32)
                b0, b1, b2 = sx(0), sx(1), sx(2)
                t3 = (b0 << np.uint32(16)) ^ (b1 << np.uint32(8)) ^ b2
                t2 = (b0 << np.uint32(8)) ^ b1
                self.tail = np.where(left == 3, t3, np.where(left == 2, t2, np.where(
                    left == 1, b0, np.uint32(0)))).astype(np.uint32)
                self.tail_mul = np.where(left > 0, m, np.uint32(1)).astype(np.uint32)

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


def _old_key_positions(keys, vector_size: int, nb_hash: int) -> np.ndarray:
    data, off = utf8_buffers(keys)
    lengths = off[1:] - off[:-1]
    n = len(lengths)
    out = np.empty((nb_hash, n), np.uint32)
    vs = np.uint32(vector_size)
    groups = _groups(lengths)
    for nblocks, idx in groups:
        prep = _OldPrepared(data, off[:-1][idx], lengths[idx], nblocks)
        h = np.zeros(len(idx), np.uint32)
        for i in range(nb_hash):
            h = prep.hash(h)
            a = np.abs(h.view(np.int32)).view(np.uint32)
            q = a // vs
            q *= vs
            a -= q
            if len(groups) == 1:
                out[i] = a
            else:
                out[i, idx] = a
    return out


def _old_build_filter(keys, config: B.BloomConfig) -> bytes:
    """The serialized filter as lakesdk built it before (every position first, then each row)."""
    vs, nb = config.vector_size, config.nb_hash
    pos = _old_key_positions(keys, vs, nb)
    n = pos.shape[1]
    code = B.SIMPLE if config.filter_type.upper() == B.SIMPLE else B.DYNAMIC_V0
    if code == B.SIMPLE:
        nrows, current, filled, late = 1, 0, n, np.zeros(0, np.int64)
        nr = n or 1
    else:
        nr = config.num_entries
        nrows, current, filled, late = B._dynamic_rows(n, nr, config.max_entries)
    nbytes = (vs + 7) // 8
    flat = np.empty(nrows * nbytes, np.uint8)
    for r in range(nrows):
        bitmap = np.zeros(vs, bool)
        bitmap[pos[:, r * nr: min((r + 1) * nr, filled)]] = True
        if late.size:
            bitmap[pos[:, filled:][:, late == r]] = True
        flat[r * nbytes: (r + 1) * nbytes] = np.packbits(bitmap, bitorder="little")
    bf = B.BloomFilter(code, vs, nb, B.MURMUR_HASH, [flat[r * nbytes: (r + 1) * nbytes] for r in range(nrows)],
                       config.num_entries if code == B.DYNAMIC_V0 else 0, current)
    return bf.serialize()


def _ref_filter(keys: list[str], config: B.BloomConfig) -> bytes:
    """The serialized filter built key by key: Hadoop's hashing and Hudi's rows transcribed."""
    vs, nb = config.vector_size, config.nb_hash
    simple = config.filter_type.upper() == B.SIMPLE
    if simple:
        row_of, nrows, current = [0] * len(keys), 1, 0
    else:
        row_of, nrows, current = _ref_rows(len(keys), config.num_entries, config.max_entries)
    bits = np.zeros((nrows, vs), bool)
    for k, r in zip(keys, row_of):
        bits[r, _ref_positions(k, vs, nb)] = True
    rows = [np.packbits(b, bitorder="little") for b in bits]
    return B.BloomFilter(B.SIMPLE if simple else B.DYNAMIC_V0, vs, nb, B.MURMUR_HASH, rows,
                         0 if simple else config.num_entries, current).serialize()


@contextmanager
def _hashed_by(chunk: int) -> Iterator[None]:
    """lakesdk hashing ``chunk`` keys at a time (:data:`lakesdk.format.bloom_hash.CHUNK`)."""
    was = bloom_hash.CHUNK
    bloom_hash.CHUNK = chunk
    try:
        yield
    finally:
        bloom_hash.CHUNK = was


# ---------------------------------------------------------------------------------- keys
def _as_column(keys: list[str], how: str) -> pa.Array | pa.ChunkedArray:
    """The keys as a plain array, a slice of a longer one, a chunked column or a dictionary."""
    arr = pa.array(keys, pa.string())
    if how == "slice":
        return pa.array(["pad-before", *keys, "pad-after"], pa.string()).slice(1, len(keys))
    if how == "chunked":
        cut = len(keys) // 2
        return pa.chunked_array([arr.slice(0, cut), arr.slice(cut)], pa.string())
    if how == "dictionary":
        return pc.dictionary_encode(arr)
    return arr


ids_st = st.lists(st.integers(0, 10**12), min_size=1, max_size=400, unique=True)
texts_st = st.lists(st.text(min_size=1, max_size=24), min_size=1, max_size=300, unique=True)
configs_st = st.builds(
    B.BloomConfig, num_entries=st.integers(1, 120), fpp=st.sampled_from([0.3, 0.05, 0.001]),
    filter_type=st.sampled_from([B.SIMPLE, B.DYNAMIC_V0]), max_entries=st.integers(1, 500))


chunks_st = st.sampled_from([1, 2, 7, 64, bloom_hash.CHUNK])


@settings(max_examples=150, deadline=None)
@given(ids=ids_st, width=st.sampled_from([0, 7, 10, 13, 16]), config=configs_st,
       how=st.sampled_from(["plain", "slice", "chunked", "dictionary"]), chunk=chunks_st)
def test_id_keys_build_the_same_filter(ids, width, config, how, chunk):
    """Keys like the ids of a table (one length back to back, or of mixed lengths), hashed
    ``chunk`` keys at a time."""
    keys = [str(i).zfill(width) for i in ids]
    col = _as_column(keys, how)
    with _hashed_by(chunk):
        built = BB.build_filter(col, config).serialize()
        assert (B.key_positions(col, 97, 5) == _old_key_positions(col, 97, 5)).all()
    assert built == _old_build_filter(col, config)
    if len(keys) <= 120:
        assert built == _ref_filter(keys, config)


@settings(max_examples=150, deadline=None)
@given(keys=texts_st, config=configs_st, how=st.sampled_from(["plain", "slice", "chunked", "dictionary"]),
       chunk=chunks_st)
def test_text_keys_build_the_same_filter(keys, config, how, chunk):
    col = _as_column(keys, how)
    with _hashed_by(chunk):
        built = BB.build_filter(col, config).serialize()
        assert (B.key_positions(col, 97, 5) == _old_key_positions(col, 97, 5)).all()
    assert built == _old_build_filter(col, config)
    if len(keys) <= 120:
        assert built == _ref_filter(keys, config)


@settings(max_examples=20, deadline=None)
@given(start=st.integers(0, 10**9), n=st.integers(60_001, 130_000))
def test_default_filter_of_a_base_file_of_ids(start, n):
    """Hudi's defaults (2,587,966 bits, 30 hashes, rows of 60,000 keys) over a file's worth of
    ids, as a slice of a longer key column: the bytes of the previous build."""
    col = pc.cast(pa.array(np.arange(start, start + n + 10, dtype=np.int64)), pa.string()).slice(5, n)
    assert BB.build_filter(col).serialize() == _old_build_filter(col, B.BloomConfig())


def test_keys_of_a_slice_are_hashed_alone():
    """A slice's bytes only: a key range's check of characters beyond U+FFFF does not see the
    keys around the slice."""
    col = pa.array(["\U0001F600", "b", "c", "\U0001F600"]).slice(1, 2)
    data, off = utf8_buffers(col)
    assert data.tobytes() == b"bc" and off.tolist() == [0, 1, 2]
    assert not B._has_astral(data)
    assert (B.key_range(col).min, B.key_range(col).max) == ("b", "c")


def test_keys_dealt_to_the_rows_in_turn():
    """Past ``max_entries`` Hudi deals the keys to the rows in turn: many runs of one key each
    (set at row * vector_size + position), as the previous build and the transcription set them."""
    keys = [f"key-{i}" for i in range(300)]
    config = B.BloomConfig(num_entries=3, fpp=0.05, filter_type=B.DYNAMIC_V0, max_entries=9)
    built = BB.build_filter(pa.array(keys), config).serialize()
    assert built == _old_build_filter(pa.array(keys), config) == _ref_filter(keys, config)
