"""Apache Hudi's record-key bloom filters and key ranges, as its base files carry them.

Every Parquet base file Hudi writes holds, in its footer's key-value metadata:

* ``hoodie_min_record_key`` / ``hoodie_max_record_key``: the least and greatest record key
  (Java ``String`` order: UTF-16 code units);
* ``org.apache.hudi.bloomfilter`` (``com.uber.hoodie.bloomfilter`` in old files): a bloom
  filter of the record keys, serialized with Java's ``DataOutput`` (big-endian) and
  Base64-encoded;
* ``hoodie_bloom_filter_type_code``: ``DYNAMIC_V0`` (absent: ``SIMPLE``).

A ``SIMPLE`` filter is one bit vector: ``int -1`` (the version), ``int nbHash``, ``byte
hashType`` (1: MurmurHash), ``int vectorSize``, then ``ceil(vectorSize / 8)`` bytes, bit
``i`` at byte ``i // 8``, bit ``i % 8`` (least significant first).  A ``DYNAMIC_V0`` filter
(``hoodie.bloom.index.filter.type``, the default) is the same header, then ``int nr`` (keys
per row: ``hoodie.index.bloom.num_entries``), ``int currentNbRecord`` (keys in the last row
since it was added), ``int rows``, then every row as a ``SIMPLE`` filter.  Keys fill rows of
``nr`` keys until ``rows * nr`` reaches ``hoodie.bloom.index.filter.dynamic.max.entries``;
after that they go to the rows in turn.  A key may be in the filter when every one of its
``nbHash`` bits is set in some row.

A key's bits: its UTF-8 bytes hashed ``nbHash`` times with Hadoop's MurmurHash (the 32-bit
MurmurHash2 of Hadoop and Hudi, whose tail bytes are sign-extended), each time seeded with
the previous hash (0 first); bit ``|h % vectorSize|`` (Java's remainder of the signed hash).
The vector size is ``ceil(n * -ln(fpp) / ln(2)^2)`` and ``nbHash = ceil(ln(2) * size / n)``
for ``n = hoodie.index.bloom.num_entries`` (60000) and ``fpp = hoodie.index.bloom.fpp``
(1e-9): 2,587,966 bits, 30 hashes.

The hashing is vectorised with numpy (:mod:`lakesdk.format.bloom_hash`).  A filter read
from a footer is tested in its Base64 text (a bit lies in one 6-bit character), so reading
one decodes only its headers.  No I/O here: the engines read and write the footers
(:mod:`lakesdk.engine.tasks`, :mod:`lakesdk.engine.key_index`).
"""

from __future__ import annotations

import base64
import binascii
import math
import struct
import threading
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakesdk.format import bloom_hash
from lakesdk.format.bloom_hash import key_positions, murmur_hash, utf8_buffers
from lakesdk.format.table_config import INDEX_TYPE_KEY

__all__ = [
    "BLOOM_FILTER_KEY", "OLD_BLOOM_FILTER_KEY", "TYPE_CODE_KEY", "MIN_KEY", "MAX_KEY", "SIMPLE", "DYNAMIC_V0",
    "MURMUR_HASH", "JENKINS_HASH", "BloomConfig", "BloomFilter", "KeyProbe", "KeySet", "KeyRange", "FooterIndex", "FOOTER_KEYS",
    "bit_size", "num_hashes", "murmur_hash", "key_positions", "dynamic_rows",
    "read_footer", "key_range", "in_range",
]

BLOOM_FILTER_KEY = "org.apache.hudi.bloomfilter"
OLD_BLOOM_FILTER_KEY = "com.uber.hoodie.bloomfilter"
TYPE_CODE_KEY = "hoodie_bloom_filter_type_code"
MIN_KEY = "hoodie_min_record_key"
MAX_KEY = "hoodie_max_record_key"
SIMPLE = "SIMPLE"
DYNAMIC_V0 = "DYNAMIC_V0"
JENKINS_HASH = 0
MURMUR_HASH = 1
_VERSION = -1


@dataclass(frozen=True)
class BloomConfig:
    """The writer's bloom filter settings (Hudi's names and defaults)."""

    num_entries: int = 60000          # hoodie.index.bloom.num_entries
    fpp: float = 1e-9                 # hoodie.index.bloom.fpp
    filter_type: str = DYNAMIC_V0     # hoodie.bloom.index.filter.type
    max_entries: int = 100000         # hoodie.bloom.index.filter.dynamic.max.entries

    def __post_init__(self) -> None:
        if self.num_entries <= 0 or not 0.0 < self.fpp < 1.0:
            raise ValueError(f"bloom filter: num_entries must be > 0 and 0 < fpp < 1, got {self.num_entries}, {self.fpp}")
        if self.filter_type.upper() not in (SIMPLE, DYNAMIC_V0):
            raise ValueError(f"bloom filter type must be SIMPLE or DYNAMIC_V0, got {self.filter_type!r}")

    @classmethod
    def of(cls, options: Any) -> "BloomConfig":
        """The settings of a :class:`~lakesdk.TableOptions` (``bloom_*``)."""
        return cls(num_entries=options.bloom_num_entries, fpp=options.bloom_fpp,
                   filter_type=str(options.bloom_filter_type).upper(), max_entries=options.bloom_max_entries)

    @classmethod
    def of_writes(cls, options: Any, table_props: Mapping[str, str]) -> "BloomConfig | None":
        """The bloom filter of a write's base files, None for none, as Hudi decides
        (``HoodieFileWriterFactory.enableBloomFilter``): one unless ``bloom_filter_enabled``
        (``hoodie.parquet.bloom.filter.enabled``) is off and the index is no bloom index.  The
        index: the ``index_type`` option, else the table's ``hoodie.index.type`` (in
        ``table_props``), else lakesdk's default, the bloom index."""
        index = str(options.index_type or table_props.get(INDEX_TYPE_KEY) or "bloom").upper()
        if not options.bloom_filter_enabled and "BLOOM" not in index:
            return None
        return cls.of(options)

    @property
    def vector_size(self) -> int:
        return bit_size(self.num_entries, self.fpp)

    @property
    def nb_hash(self) -> int:
        return num_hashes(self.vector_size, self.num_entries)


def bit_size(num_entries: int, fpp: float) -> int:
    return int(math.ceil(num_entries * (-math.log(fpp) / (math.log(2) * math.log(2)))))


def num_hashes(vector_size: int, num_entries: int) -> int:
    return int(math.ceil(math.log(2) * vector_size / num_entries))


# ---------------------------------------------------------------------------------- filters
_B64_ALPHABET = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
# a character outside the alphabet reads as all bits set: a damaged filter may say "maybe", never "no"
_B64_VALUE = np.full(256, 0xFF, np.uint8)
_B64_VALUE[np.frombuffer(_B64_ALPHABET, np.uint8)] = np.arange(64, dtype=np.uint8)


class KeyProbe:
    """Keys to test against many filters of one shape: their bit positions and, computed
    once per filter layout, where each bit of every row sits in the filter's buffer (its
    bytes, or its Base64 text, where a bit lies in one 6-bit character)."""

    def __init__(self, positions: np.ndarray) -> None:
        self.positions = positions
        self._layouts: dict[tuple[bool, tuple[int, ...]], tuple[np.ndarray, np.ndarray]] = {}
        self._lock = threading.Lock()

    @property
    def n(self) -> int:
        return int(self.positions.shape[1])

    def locate(self, text: bool, starts: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
        """(buffer index, bit shift), shape ``(nb_hash, rows * n)``: row ``r`` of key ``k``
        at column ``r * n + k``, for rows whose bits start at byte ``starts[r]``."""
        key = (text, tuple(starts))
        with self._lock:
            hit = self._layouts.get(key)
            if hit is None:
                hit = self._layouts[key] = self._layout(text, starts)
            return hit

    def _layout(self, text: bool, starts: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`locate`'s arrays, computed a row at a time in place (a key index asking
        100,000 keys of a two-row filter holds 29 MB of layout, not three times that in
        temporaries)."""
        nb, n = self.positions.shape
        idx = np.empty((nb, len(starts) * n), np.int32)
        shift = np.empty((nb, len(starts) * n), np.uint8)
        end = (max(starts, default=0) + int(self.positions.max(initial=0)) // 8 + 1) * 8
        wide = np.uint64 if end >= 1 << 32 else np.uint32   # a bit's index in the buffer
        bit_in_byte = (self.positions & 7).astype(np.uint8)
        at = np.empty((nb, n), wide)
        for r, start in enumerate(starts):
            cols = slice(r * n, (r + 1) * n)
            np.right_shift(self.positions, 3, out=at, casting="unsafe")
            at += wide(start)
            if not text:
                idx[:, cols] = at
                shift[:, cols] = bit_in_byte
                continue
            # bit b of the decoded bytes (most significant first) is bit 5 - b % 6 of character b // 6
            at <<= 3
            at += 7
            at -= bit_in_byte
            idx[:, cols] = at // 6
            np.remainder(at, 6, out=at)
            np.subtract(5, at, out=shift[:, cols], casting="unsafe")
        return idx, shift


class BloomFilter:
    """A Hudi bloom filter: one bit vector per row (``SIMPLE``: one).  Built (rows of
    bytes) or read from a footer, where the bits are tested in the Base64 text itself (a
    bit lies in one character): reading a filter decodes only its header."""

    def __init__(self, type_code: str, vector_size: int, nb_hash: int, hash_type: int = MURMUR_HASH,
                 rows: list[np.ndarray] | None = None, nr: int = 0, current: int = 0, *,
                 text: np.ndarray | None = None, starts: Sequence[int] = ()) -> None:
        self.type_code = type_code
        self.vector_size = vector_size
        self.nb_hash = nb_hash
        self.hash_type = hash_type
        self.nr = nr                     # DYNAMIC_V0: keys per row
        self.current = current           # DYNAMIC_V0: keys in the last row since it was added
        self._rows = rows                # each: ceil(vector_size / 8) uint8
        self._text = text                # the footer's Base64 text, when read from one
        self._starts = list(starts)      # byte offset of each row's bits in the decoded text
        self._flat: np.ndarray | None = None   # built rows back to back

    @property
    def num_rows(self) -> int:
        return len(self._rows) if self._rows is not None else len(self._starts)

    @property
    def rows(self) -> list[np.ndarray]:
        """Each row's bytes (decoded from the text when the filter was read)."""
        if self._rows is None:
            assert self._text is not None
            raw = np.frombuffer(base64.b64decode(self._text.tobytes(), validate=True), np.uint8)
            nbytes = (self.vector_size + 7) // 8
            self._rows = [raw[s: s + nbytes] for s in self._starts]
        return self._rows

    @property
    def nbytes(self) -> int:
        if self._text is not None:
            return int(self._text.nbytes)
        return int(self._flat.nbytes) if self._flat is not None else sum(r.nbytes for r in self.rows)

    def might_contain(self, keys: pa.Array | pa.ChunkedArray | Sequence[str] | None = None, *,
                      positions: np.ndarray | None = None, probe: KeyProbe | None = None,
                      among: np.ndarray | None = None) -> np.ndarray:
        """Per key: may the filter hold it (False: it surely does not)?  ``positions`` (the
        keys' :func:`key_positions` under this filter's shape) or a ``probe`` of them, when
        known; ``among``: the indices of the keys to test (the others answer False)."""
        if self.hash_type != MURMUR_HASH:
            raise ValueError(f"bloom filter hash type {self.hash_type} is not supported (only MurmurHash)")
        if probe is None:
            if positions is None:
                positions = key_positions(keys if keys is not None else [], self.vector_size, self.nb_hash)
            probe = KeyProbe(positions)
        n = probe.n
        todo = np.arange(n) if among is None else np.asarray(among, np.intp)
        if self._text is not None:
            buf, values, starts = self._text, _B64_VALUE, self._starts
        else:
            if self._flat is None:
                self._flat = np.concatenate(self._rows) if self.num_rows > 1 else self._rows[0]   # type: ignore
            nbytes = (self.vector_size + 7) // 8
            buf, values, starts = self._flat, None, [r * nbytes for r in range(self.num_rows)]
        if bloom_hash.native is not None:   # every (row, key) pair in C, each leaving at its first unset bit
            found8 = np.zeros(n, np.uint8)
            bloom_hash.native.test(np.ascontiguousarray(buf), values, np.asarray(starts, np.int64),
                                   np.ascontiguousarray(probe.positions, np.uint32),
                                   np.ascontiguousarray(todo, np.int64), found8)
            return found8.view(bool)
        idx, shift = probe.locate(values is not None, starts)
        # every (row, key) pair at once: one pass per hash function; a pair leaves at its first
        # unset bit (about half of them at each bit of a well-filled filter)
        cand = np.concatenate([todo + r * n for r in range(len(starts))]) if len(starts) > 1 else todo
        for i in range(self.nb_hash):
            if not cand.size:
                break
            got = buf[idx[i, cand]]
            if values is not None:
                got = values[got]
            cand = cand[(got >> shift[i, cand]) & 1 == 1]
        found = np.zeros(n, bool)
        found[cand % n] = True
        return found

    def serialize(self) -> bytes:
        """The filter as Hudi's ``serializeToString`` writes it (Base64 text, as bytes)."""
        if self._text is not None:
            return self._text.tobytes()
        head = struct.pack(">iibi", _VERSION, self.nb_hash, self.hash_type, self.vector_size)
        parts = [head]
        if self.type_code == DYNAMIC_V0:
            parts.append(struct.pack(">iii", self.nr, self.current, len(self.rows)))
            for row in self.rows:
                parts += [head, row.tobytes()]
        else:
            parts.append(self.rows[0].tobytes())
        return base64.b64encode(b"".join(parts))

    @classmethod
    def deserialize(cls, text: bytes | str, type_code: str | None = None) -> "BloomFilter":
        """A filter from its footer value (``type_code`` absent: ``SIMPLE``).  Standard
        Base64 of exactly the expected length is kept as text (only the headers are
        decoded); anything else is decoded whole."""
        code = (type_code or SIMPLE).upper()
        if code not in (SIMPLE, DYNAMIC_V0):
            raise ValueError(f"unknown bloom filter type code {type_code!r}")
        data = text.encode("ascii") if isinstance(text, str) else bytes(text)
        lazy = _text_layout(data, code)
        if lazy is not None:
            return lazy
        return _decode_whole(base64.b64decode(data, validate=True), code)


def _header(raw: bytes, pos: int) -> tuple[int, int, int, int]:
    """(nbHash, hashType, vectorSize, next position) of a filter header at ``pos``."""
    (ver,) = struct.unpack_from(">i", raw, pos)
    if ver > 0:   # the old unversioned format: nbHash first, Jenkins hashing
        nb, ht = ver, JENKINS_HASH
        pos += 4
    elif ver == _VERSION:
        _, nb, ht = struct.unpack_from(">iib", raw, pos)
        pos += 9
    else:
        raise ValueError(f"unsupported bloom filter version {ver}")
    (vs,) = struct.unpack_from(">i", raw, pos)
    if vs <= 0 or nb <= 0:
        raise ValueError("bloom filter with no bits or no hashes")
    return nb, ht, vs, pos + 4


def _decode_whole(raw: bytes, code: str) -> BloomFilter:
    nb, ht, vs, pos = _header(raw, 0)
    nbytes = (vs + 7) // 8

    def bits(at: int) -> np.ndarray:
        if at + nbytes > len(raw):
            raise ValueError("bloom filter bits cut short")
        return np.frombuffer(raw, np.uint8, nbytes, at)

    if code == SIMPLE:
        return BloomFilter(SIMPLE, vs, nb, ht, [bits(pos)])
    nr, cur, nrows = struct.unpack_from(">iii", raw, pos)
    pos += 12
    rows = []
    for _ in range(nrows):
        rnb, rht, rvs, pos = _header(raw, pos)
        if (rnb, rht, rvs) != (nb, ht, vs):
            raise ValueError("bloom filter rows of different shapes")
        rows.append(bits(pos))
        pos += nbytes
    return BloomFilter(DYNAMIC_V0, vs, nb, ht, rows, nr, cur)


def _b64_slice(text: bytes, start: int, stop: int) -> bytes:
    """Decoded bytes ``[start, stop)`` of Base64 ``text``, decoding only the characters
    that hold them."""
    a, b = start // 3, -(-stop // 3)
    raw = base64.b64decode(text[4 * a: 4 * b], validate=True)
    return raw[start - 3 * a: stop - 3 * a]


def _text_layout(text: bytes, code: str) -> BloomFilter | None:
    """The filter over its Base64 text when the text is exactly the standard encoding of the
    layout its headers describe (every row header checked); None otherwise."""
    if len(text) < 100 or len(text) % 4:
        return None
    head = _b64_slice(text, 0, 48)
    if struct.unpack_from(">i", head, 0)[0] != _VERSION:
        return None
    nb, ht, vs, pos = _header(head, 0)
    nbytes = (vs + 7) // 8
    if code == SIMPLE:
        starts, nr, cur = [pos], 0, 0
        total = pos + nbytes
    else:
        nr, cur, nrows = struct.unpack_from(">iii", head, pos)
        pos += 12
        if nrows < 1:
            return None
        row_head = struct.pack(">iibi", _VERSION, nb, ht, vs)
        starts = [pos + r * (13 + nbytes) + 13 for r in range(nrows)]
        total = pos + nrows * (13 + nbytes)
        if 4 * -(-total // 3) != len(text):
            return None
        for s in starts:
            if _b64_slice(text, s - 13, s) != row_head:
                return None
    if 4 * -(-total // 3) != len(text):
        return None
    return BloomFilter(code, vs, nb, ht, None, nr, cur, text=np.frombuffer(text, np.uint8), starts=starts)


def dynamic_rows(start: int, n: int, nr: int, cap: int) -> np.ndarray:
    """The row Hudi's ``InternalDynamicBloomFilter.add`` puts the keys ``start`` to
    ``start + n - 1`` of a file in: ``nr`` keys a row until there are ``cap`` rows, then the
    first to row 0 and the next ones to rows 0, 1, ... in turn."""
    out = np.empty(n, np.int64)
    end, filled = start + n, cap * nr
    a = min(end, filled)           # keys before the bound: runs of ``nr`` keys a row
    if a > start:
        first, last = start // nr, (a - 1) // nr
        runs = np.full(last - first + 1, nr, np.int64)
        runs[0] -= start - first * nr
        runs[-1] -= (last + 1) * nr - a
        out[: a - start] = np.repeat(np.arange(first, last + 1, dtype=np.int64), runs)
    lo = max(start, filled)        # then key ``filled + late`` goes to row 0 (late 0) or (late - 1) % cap
    if end > lo:
        late0, k = lo - filled, lo - start
        if late0 == 0:
            out[k] = 0
            late0, k = 1, k + 1
        cycle = np.roll(np.arange(cap, dtype=np.int64), -((late0 - 1) % cap))
        out[k:] = np.tile(cycle, -(-(n - k) // cap))[: n - k]
    return out


def _dynamic_rows(n: int, nr: int, max_nr: int) -> tuple[int, int, int, np.ndarray]:
    """:func:`dynamic_rows` of ``n`` keys summed up: the number of rows, the final
    ``currentNbRecord``, ``filled`` (keys ``i < filled`` go to row ``i // nr``) and the row of
    each later key."""
    cap = max(1, -(-max_nr // nr))    # rows once the bound is reached
    filled = min(n, cap * nr)
    rows = 1 if n == 0 else int(min(cap, -(-n // nr)))
    current = n - (rows - 1) * nr
    return rows, int(current), filled, dynamic_rows(filled, n - filled, nr, cap)


# ---------------------------------------------------------------------------------- key ranges
@dataclass(frozen=True)
class KeyRange:
    """A file's least and greatest record key (Java ``String`` order)."""

    min: str
    max: str


def _java_order_safe(s: str) -> bool:
    """Java's String order (UTF-16 code units) and UTF-8 byte order agree on strings without
    characters beyond the Basic Multilingual Plane."""
    return all(ord(c) < 0x10000 for c in s) if not s.isascii() else True


def key_range(keys: pa.Array | pa.ChunkedArray) -> KeyRange | None:
    """The least and greatest key in Java's ``String`` order, as Hudi writes them."""
    if len(keys) == 0:
        return None
    if bloom_hash.native is not None and not keys.null_count and _is_text(keys.type):
        data, off = utf8_buffers(keys)
        i, j = bloom_hash.native.key_range(data, off)
        lo, hi = _key_text(data, off, i), _key_text(data, off, j)
    else:
        mm = pc.min_max(keys)
        lo, hi = mm["min"].as_py(), mm["max"].as_py()
        if lo is None or hi is None:
            return None
        data, _ = utf8_buffers(keys)
    if _has_astral(data):   # UTF-16 order differs from byte order: compute it as Java does
        vals = [k for k in keys.to_pylist() if k is not None]
        lo = min(vals, key=lambda s: s.encode("utf-16-be"))
        hi = max(vals, key=lambda s: s.encode("utf-16-be"))
    return KeyRange(lo, hi)


def _is_text(t: pa.DataType) -> bool:
    return pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t)


def _key_text(data: np.ndarray, off: np.ndarray, i: int) -> str:
    return data[int(off[i]): int(off[i + 1])].tobytes().decode("utf-8")


def _has_astral(data: np.ndarray) -> bool:
    """Do the keys' UTF-8 bytes ``data`` (:func:`utf8_buffers`) hold a character beyond U+FFFF
    (a 4-byte sequence)?"""
    return bool(data.size) and int(data.max()) >= 0xF0


def in_range(keys: pa.Array | pa.ChunkedArray, rng: KeyRange) -> np.ndarray:
    """Per key: within ``rng`` (inclusive) in Java's order.  When the order cannot be decided
    on bytes (characters beyond U+FFFF in the range or a key), the key counts as in range."""
    n = len(keys)
    if not (_java_order_safe(rng.min) and _java_order_safe(rng.max)):
        return np.ones(n, bool)
    inside = pc.and_(pc.greater_equal(keys, pa.scalar(rng.min, pa.string())),
                     pc.less_equal(keys, pa.scalar(rng.max, pa.string())))
    out = np.asarray(inside.to_numpy(zero_copy_only=False), dtype=bool) if n else np.zeros(0, bool)
    data, off = utf8_buffers(keys) if n else (np.zeros(0, np.uint8), np.zeros(1, np.int64))
    if _has_astral(data):
        astral = np.zeros(n, bool)
        hits = np.flatnonzero(data >= 0xF0)
        if hits.size:
            astral[np.searchsorted(off[1:], hits, side="right")] = True
        out |= astral
    return out


class KeySet:
    """Keys to look up in many files: their bounds (one comparison rules a file's key range
    in or out for all of them) and their bloom probes per filter shape, computed once."""

    def __init__(self, keys: pa.Array) -> None:
        self.keys = keys
        n = len(keys)
        data, off = utf8_buffers(keys)
        hits = np.flatnonzero(data >= 0xF0)
        self.astral: np.ndarray | None = None   # keys whose Java order bytes cannot decide
        if hits.size:
            self.astral = np.zeros(n, bool)
            self.astral[np.searchsorted(off[1:], hits, side="right")] = True
        plain = keys if self.astral is None else keys.filter(pa.array(~self.astral))
        mm = pc.min_max(plain) if len(plain) else None
        self.lo: str | None = mm["min"].as_py() if mm is not None else None
        self.hi: str | None = mm["max"].as_py() if mm is not None else None
        lengths = np.diff(off)
        #: empty keys (a legacy-encoded table allows one): never in a file with a bloom filter
        #: (a file holding one is written without it), and not hashable as Hudi hashes keys
        self.empty: np.ndarray | None = (lengths == 0) if n and (lengths == 0).any() else None
        self._probes: dict[tuple[int, int], KeyProbe] = {}
        self._lock = threading.Lock()

    def in_range(self, rng: KeyRange) -> np.ndarray:
        """:func:`in_range` of the keys, without comparing each key when the range holds all
        of them or none."""
        n = len(self.keys)
        if not (_java_order_safe(rng.min) and _java_order_safe(rng.max)):
            return np.ones(n, bool)
        if self.lo is None or self.hi is None:
            out = np.zeros(n, bool)
        elif rng.min <= self.lo and self.hi <= rng.max:
            out = np.ones(n, bool)
        elif rng.max < self.lo or self.hi < rng.min:
            out = np.zeros(n, bool)
        else:
            return in_range(self.keys, rng)
        if self.astral is not None:
            out |= self.astral
        return out

    def probe(self, vector_size: int, nb_hash: int) -> KeyProbe:
        """The keys' bit positions under one filter shape."""
        with self._lock:
            hit = self._probes.get((vector_size, nb_hash))
            if hit is None:
                keys = self.keys if self.empty is None else \
                    pc.if_else(pa.array(self.empty), pa.scalar("\x00", pa.string()), self.keys)  # placeholders, masked out
                hit = self._probes[(vector_size, nb_hash)] = KeyProbe(key_positions(keys, vector_size, nb_hash))
            return hit


# ---------------------------------------------------------------------------------- footers
class FooterIndex:
    """What a base file's footer tells the key index: its key range and bloom filter (either
    may be missing: such a file's keys are read).  A filter read from a footer is decoded
    when it is first asked for (a key range alone often rules the file out)."""

    def __init__(self, range: KeyRange | None = None, bloom: BloomFilter | None = None, *,
                 text: bytes | None = None, type_code: str | None = None, rows: int | None = None) -> None:
        self.range = range
        self.rows = rows          # the file's row count, when known
        self._bloom = bloom
        self._text = text
        self._code = type_code

    @property
    def has_bloom(self) -> bool:
        """Does the footer hold a bloom filter (not decoded yet, it may still be unreadable)?"""
        return self._bloom is not None or self._text is not None

    @property
    def bloom(self) -> BloomFilter | None:
        """The bloom filter (None: none, or one this module cannot read)."""
        if self._text is not None:
            text, self._text = self._text, None
            try:
                bf = BloomFilter.deserialize(text, self._code)
                self._bloom = bf if bf.hash_type == MURMUR_HASH else None
            except (ValueError, struct.error, binascii.Error):
                self._bloom = None
        return self._bloom

    @bloom.setter
    def bloom(self, value: BloomFilter | None) -> None:
        self._bloom, self._text = value, None

    @property
    def nbytes(self) -> int:
        """Memory the filter takes, about."""
        if self._text is not None:
            return len(self._text)
        return self._bloom.nbytes if self._bloom is not None else 0


FOOTER_KEYS = frozenset(k.encode() for k in (BLOOM_FILTER_KEY, OLD_BLOOM_FILTER_KEY, TYPE_CODE_KEY, MIN_KEY, MAX_KEY))


def read_footer(metadata: Mapping[bytes, bytes] | None) -> FooterIndex:
    """Key range and bloom filter from a footer's key-value metadata (missing or unreadable
    entries are left out: the file's keys are then read)."""
    md = metadata or {}
    out = FooterIndex()
    lo, hi = md.get(MIN_KEY.encode()), md.get(MAX_KEY.encode())
    if lo is not None and hi is not None:
        try:
            out.range = KeyRange(lo.decode("utf-8"), hi.decode("utf-8"))
        except UnicodeDecodeError:
            out.range = None
    text = md.get(BLOOM_FILTER_KEY.encode()) or md.get(OLD_BLOOM_FILTER_KEY.encode())
    if text:
        code = md.get(TYPE_CODE_KEY.encode())
        out = FooterIndex(out.range, text=text, type_code=code.decode("utf-8", "replace") if code else None)
    return out
