"""Point lookups of many keys in one HFile at a cost that follows the keys, not the file.

:func:`get_many` finds each key's data block in the index (all keys at once), reads each block
that holds some (by byte range when the reader reads by ranges) and walks it only as far as its
last wanted key.  The walk checks what a whole-block read checks of the entries it passes
(lengths, the KeyValue key form, key order, the range the index gives the block); an entry that
fails a check sends the block through :meth:`HFileReader._entries`, which names the damage.

A large single-level data index (a record index file group holds millions of keys in blocks of a
few kilobytes) is parsed by :func:`root_index_arrays` with numpy, when every index key is a full
KeyValue key with a one-byte length (rows up to 115 bytes, no NUL byte): the entries are found by
the KeyValue suffix every such key ends with, then checked to chain exactly as the entry-by-entry
parse would read them (each entry's own length puts the next one where the suffix was found);
anything else falls back to that parse.  The rows are kept as a fixed-width byte array, searched
all at once (:func:`numpy.searchsorted`); without NUL bytes its order is the bytes' order.
"""

from __future__ import annotations

import struct
import threading
from bisect import bisect_right
from collections import OrderedDict
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from lakesdk.format.hfile_index import FAST_INDEX_MIN, KV_SUFFIX, root_index_arrays

_I32X2 = struct.Struct(">ii")

if TYPE_CHECKING:
    from lakesdk.format.hfile import HFileReader

__all__ = ["get_many", "root_index_arrays", "open_indexed", "clear_index_cache", "FAST_INDEX_MIN"]

#: opened HFiles (trailer, index, file info: all but the data blocks) by (file, window):
#: validated on each use against the file's trailer and file info, read again (a file written
#: again under the same name has another file info: its creation time, last key, sizes); the
#: most recent up to ``_INDEXED_MAX_BYTES`` of index
_INDEXED: OrderedDict[tuple[str, int, int], tuple[bytes, "HFileReader", int]] = OrderedDict()
_INDEXED_MAX_BYTES = 96 << 20
_INDEXED_LOCK = threading.Lock()


def clear_index_cache() -> None:
    """Forget the opened HFiles :func:`open_indexed` keeps."""
    with _INDEXED_LOCK:
        _INDEXED.clear()


def open_indexed(src: Any, key: tuple[str, int, int], *, name: str, path: str | None = None) -> "HFileReader":
    """An :class:`HFileReader` of the HFile ``src`` (read by ranges) whose index is parsed once
    per process for the file ``key`` names (its URL and the window in it), as Hudi keeps its
    HFile readers (``HFileReaderCacheManager``); each call has a reader of its own, reading its
    data blocks through ``src``."""
    from lakesdk.format.hfile import TRAILER_SIZE, HFileReader
    with _INDEXED_LOCK:
        hit = _INDEXED.get(key)
        if hit is not None:
            _INDEXED.move_to_end(key)
    if hit is not None and src.size >= TRAILER_SIZE:
        seen, cached, _ = hit
        t = cached.trailer
        if cached._size == src.size and src.read(t.file_info_offset, src.size - t.file_info_offset) == seen:
            reader = object.__new__(HFileReader)
            reader.__dict__.update(cached.__dict__)
            reader._src, reader._cache = src, None
            return reader
    reader = HFileReader(source=src, name=name, path=path)
    t = reader.trailer
    # the file info and trailer held, no more (the indexes are parsed; blocks are read by range)
    reader._data, reader._at = reader._data[t.file_info_offset - reader._at:], t.file_info_offset
    seen = reader._data
    fast = reader.__dict__.get("_fast")
    size = sum(x.nbytes for x in fast) if fast is not None else 64 * len(reader._offsets)
    if size <= _INDEXED_MAX_BYTES // 4:
        with _INDEXED_LOCK:
            _INDEXED[key] = (seen, reader, size)
            while sum(x[2] for x in _INDEXED.values()) > _INDEXED_MAX_BYTES:
                _INDEXED.popitem(last=False)
    return reader


def _block_of(reader: "HFileReader", keys: Sequence[bytes]) -> list[int]:
    """The data block each key would lie in (-1: before the first)."""
    fast = reader.__dict__.get("_fast")
    if fast is not None and all(b"\x00" not in k for k in keys):
        rows = fast[2]
        width = max(rows.dtype.itemsize, max(len(k) for k in keys))
        if width != rows.dtype.itemsize:          # keys longer than every row: the rows widened
            rows = rows.astype(f"S{width}")
        return (np.searchsorted(rows, np.array(keys, dtype=f"S{width}"), side="right") - 1).tolist()
    index = reader._keys
    return [bisect_right(index, k) - 1 for k in keys]


def get_many(reader: "HFileReader", keys: Sequence[bytes]) -> dict[bytes, bytes]:
    """The value of each of ``keys`` (ascending, distinct) that the HFile holds (the first
    entry of a key stored twice, as :meth:`HFileReader.get`), by key."""
    out: dict[bytes, bytes] = {}
    if keys and reader.entry_count:
        reader._guarded(lambda: _get_many(reader, keys, out))
    return out


def _get_many(reader: "HFileReader", keys: Sequence[bytes], out: dict[bytes, bytes]) -> None:
    of = _block_of(reader, keys)
    runs: list[tuple[int, int, int]] = []          # (block, first key, end): keys ascend, so do their blocks
    for j, i in enumerate(of):
        if i < 0:
            continue
        if runs and runs[-1][0] == i:
            runs[-1] = (i, runs[-1][1], j + 1)
        else:
            runs.append((i, j, j + 1))
    if not runs:
        return
    fast = reader.__dict__.get("_fast")
    ids = [r[0] for r in runs]
    if fast is not None:
        n = len(fast[2])
        offsets, sizes = fast[0][ids].tolist(), fast[1][ids].tolist()
        low = fast[2][ids].tolist()
        high = [None if i + 1 >= n else k for i, k in zip(ids, fast[2][np.minimum(np.array(ids) + 1, n - 1)].tolist())]
    else:
        n = len(reader._keys)
        offsets, sizes = [reader._offsets[i] for i in ids], [reader._sizes[i] for i in ids]
        low = [reader._keys[i] for i in ids]
        high = [reader._keys[i + 1] if i + 1 < n else None for i in ids]
    block, mvcc = reader._block, reader._mvcc
    for (i, a, b), offset, size, lo, hi in zip(runs, offsets, sizes, low, high):
        wanted = keys[a:b]
        if not _walk(block(offset, "DATA", size)[0], wanted, out, lo, hi, mvcc):
            rows, values = reader._entries(i)       # raises, naming the damage
            found = dict(zip(reversed(rows), reversed(values)))   # the first of a key stored twice
            out.update({k: found[k] for k in wanted if k in found})


def _walk(body: bytes, wanted: Sequence[bytes], out: dict[bytes, bytes], low: bytes | None, high: bytes | None,
          mvcc: bool) -> bool:
    """Put the values of ``wanted`` (ascending) found in the data block ``body`` into ``out``,
    walking its entries up to the last wanted key; False when an entry fails a check."""
    end, pos, n = len(body), 0, len(wanted)
    j, w, prev = 0, wanted[0], low or b""      # the first row is no less than the block's index key
    unpack, at = _I32X2.unpack_from, body.startswith
    seen = False
    while pos < end:
        if pos + 8 > end:
            return False
        klen, vlen = unpack(body, pos)
        k = pos + 8
        rl = klen - 12
        pos = k + klen + vlen
        if rl < 0 or vlen < 0 or pos > end or (body[k] << 8 | body[k + 1]) != rl or not at(KV_SUFFIX, k + 2 + rl):
            return False
        row = body[k + 2:k + 2 + rl]
        if row < prev or (high is not None and row > high):
            return False
        if row >= w and (row != prev or not seen):     # a key stored twice: its first entry counts
            while w < row:          # not in the file
                j += 1
                if j == n:
                    return True
                w = wanted[j]
            if w == row:
                out[w] = body[k + klen:pos]
                j += 1
                if j == n:
                    return True
                w = wanted[j]
        prev, seen = row, True
        if mvcc:                    # a Hadoop VLong: one byte for -112..127
            if pos >= end:
                return False
            b = body[pos]
            if b < 0x80 or b >= 0x90:
                pos += 1
            else:
                pos += 137 - b if b < 0x88 else 145 - b     # Hadoop's decodeVIntSize of b - 256
                if pos > end:
                    return False
    return seen
