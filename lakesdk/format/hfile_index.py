"""The data index of an HFile read with numpy: a single-level root index of many entries parsed
at once (:func:`root_index_arrays`), for :class:`lakesdk.format.hfile.HFileReader`."""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["KV_SUFFIX", "FAST_INDEX_MIN", "root_index_arrays"]

#: what follows the row in an HFile KeyValue key Hudi writes: an empty column family and
#: qualifier, the latest timestamp and the type Put
KV_SUFFIX = b"\x00" + b"\x7f" + b"\xff" * 7 + b"\x04"

#: data indexes of at least this many entries are parsed with numpy (smaller: entry by entry)
FAST_INDEX_MIN = 256
_SUFFIX = np.frombuffer(KV_SUFFIX, np.uint8)


def root_index_arrays(body: bytes, t: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """(offsets, on-disk sizes, rows as a fixed-width ``S`` array) of the single-level data
    index ``body`` of ``t.data_index_count`` entries, checked as :class:`HFileReader` checks its
    index; None when the fast form does not apply or a check fails (the caller parses it entry
    by entry, and names what is wrong)."""
    count = t.data_index_count
    a = np.frombuffer(body, np.uint8)
    if count < FAST_INDEX_MIN or a.size < 25:
        return None
    stride = 13 + int(a[12])
    if a[12] < 128 and a.size == count * stride:      # keys of one length: a table of entries
        e = a.reshape(count, stride)
        rowlen = stride - 25
        if (e[:, 12] != stride - 13).any() or (e[:, 13] != rowlen >> 8).any() or (e[:, 14] != rowlen & 0xFF).any() \
                or (e[:, stride - 10:] != _SUFFIX).any():
            return None
        offsets = np.ascontiguousarray(e[:, :8]).view(">i8").ravel().astype(np.int64)
        sizes = np.ascontiguousarray(e[:, 8:12]).view(">i4").ravel().astype(np.int64)
        mat = np.ascontiguousarray(e[:, 15:15 + rowlen])
        if rowlen < 1 or not mat.all():                  # an empty row, or a NUL byte: not this form
            return None
    else:
        found = _chained(a, count)
        if found is None:
            return None
        offsets, sizes, mat = found
    rows = mat.view(f"S{mat.shape[1]}").ravel()
    block_ends = offsets + sizes
    if (sizes <= 0).any() or (rows[1:] < rows[:-1]).any() or (block_ends[:-1] > offsets[1:]).any() \
            or block_ends[-1] > t.load_on_open_offset \
            or (int(offsets[0]), int(offsets[-1])) != (t.first_data_block_offset, t.last_data_block_offset):
        return None
    return offsets, sizes, rows


def _chained(a: np.ndarray, count: int) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """(offsets, sizes, rows padded with NUL bytes) of index entries of keys of several lengths,
    found by their KeyValue suffix and checked to chain; None if they do not."""
    last = np.flatnonzero(a[9:] == _SUFFIX[-1]) + 9           # candidate last bytes of a suffix
    ok = np.ones(last.size, bool)
    for k in range(9):
        ok &= a[last - 9 + k] == _SUFFIX[k]
    ends = last[ok] + 1
    if ends.size != count or ends[-1] != a.size:
        return None
    starts = np.concatenate(([0], ends[:-1]))
    if (ends - starts < 26).any():
        return None
    klen = a[starts + 12].astype(np.int64)
    rowlen = (a[starts + 13].astype(np.int64) << 8) | a[starts + 14]
    if (klen > 127).any() or ((ends - starts - 13) != klen).any() or (klen != rowlen + 12).any():
        return None
    cols = np.arange(int(rowlen.max()))
    take = cols[None, :] < rowlen[:, None]
    mat = np.where(take, a[np.minimum(starts[:, None] + 15 + cols[None, :], a.size - 1)], 0).astype(np.uint8)
    if (take & (mat == 0)).any():                             # a NUL byte in a row: not this form
        return None
    return _big_endian(a, starts, 8, ">i8"), _big_endian(a, starts + 8, 4, ">i4"), np.ascontiguousarray(mat)


def _big_endian(a: np.ndarray, at: np.ndarray, n: int, dtype: str) -> np.ndarray:
    raw = np.ascontiguousarray(a[at[:, None] + np.arange(n)[None, :]])
    return raw.view(dtype).ravel().astype(np.int64)
