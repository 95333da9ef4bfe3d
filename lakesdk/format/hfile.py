"""HFile (HBase HFile version 3), the file format of Hudi's metadata table: its base files
(``*.hfile``) and the content of its HFILE_DATA log blocks.

An HFile holds key/value entries sorted by key, in blocks; the key is the KeyValue row (for
the metadata table, a record key as UTF-8 bytes), the value an Avro-serialized
``HoodieMetadataRecord``.  All integers are big-endian::

    file          := data_block* meta_block* root_data_index meta_index file_info trailer
                     (HBase also writes leaf index blocks between the data blocks and
                     intermediate index blocks before the root: a multi-level index)
    block         := header(33) on-disk data, checksums
    header        := magic(8) on_disk_size_without_header:i32 uncompressed_size:i32
                     prev_block_offset:i64 checksum_type:u8 bytes_per_checksum:i32
                     on_disk_data_size_with_header:i32
    checksums     := one u32 per bytes_per_checksum bytes of header + on-disk data;
                     type 0 NULL (Hudi's own writer: zeros), 1 CRC32, 2 CRC32C (HBase)
    on-disk data  := the block's data, compressed with the file's codec (GZ: a gzip stream)
    data          := entry*,  entry := klen:i32 vlen:i32 key value mvcc
    key           := row_len:u16 row family_len:u8(0) timestamp:i64(MAX) type:u8(4 = Put)
    mvcc          := Hadoop VLong (one zero byte), unless file info KEY_VALUE_VERSION is 0
    root index    := entry*,  entry := offset:i64 on_disk_size:i32 VInt(len) key
                     (a data-index key is a KeyValue key, or [row_len row] as Hudi 1.1
                     writes it; HBase may write a shorter "fake" key between the blocks'
                     keys; a meta-index key is the meta block's name)
    leaf/intermediate index := n:i32 (n+1) * offset-of-entry:i32, n * (offset:i64 size:i32 key)
    file_info     := "PBUF" varint(len) InfoProto {repeated (bytes first, bytes second)}
    trailer       := "TRABLK\\"$" varint(len) TrailerProto zeros ... minor:u8 major:u24, 4096 bytes

Hudi's file info: ``hfile.LASTKEY``, ``hfile.AVG_KEY_LEN``, ``hfile.AVG_VALUE_LEN``,
``hfile.CREATE_TIME_TS``, ``KEY_VALUE_VERSION``, ``MAX_MEMSTORE_TS_KEY``, and from the writer
of the metadata table ``schema`` (the Avro schema of the values), ``minRecordKey``,
``maxRecordKey`` and ``bloomFilterTypeCode``; the bloom filter is the meta block
``bloomFilter``.

**Damage.**  Every read checks what the format lets it check: the trailer's magic, version,
zero padding and fields; every block's magic, type, sizes, checksums (CRC32 or CRC32C when
the header names one, zeros when it names none), gzip's own CRC32 and length, and that its data parses exactly; that
the index entries point at whole blocks of the right type in order, that each data block's
keys are sorted and lie between its index key and the next one; a full iteration also
compares the number of entries with the trailer's and the last key with ``hfile.LASTKEY``.
What fails raises :class:`~lakesdk.CorruptFileError` naming the file; a codec or feature
lakesdk does not read raises :class:`~lakesdk.UnsupportedFileFeatureError`.  No loop runs
longer than the data it reads, and no ``struct``/``zlib``/``IndexError`` escapes.

What "never a wrong value" can mean: a lookup or a scan reads only the blocks it needs, so
on a file damaged elsewhere it answers from intact blocks, which is a correct answer; a scan
that reaches damage raises after the entries before it (a correct prefix).  A block that
carries checksums or is GZ-compressed cannot be altered unseen.  A block with neither (an
uncompressed HFile from Hudi's own writer, whose checksum type is NULL) has nothing that
tells a flipped byte inside a key, a value, an index key or a file-info entry from the real
one, as for Hudi's reader: the structure checks catch altered lengths, offsets, counts and
order there, not altered text.  lakesdk's writer (:mod:`lakesdk.format.hfile_writer`)
writes CRC32 checksums, so its files are all protected.
"""

from __future__ import annotations

import struct
import zlib
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from typing import Any, NoReturn, TypeVar

from lakesdk.exceptions import CorruptFileError, UnsupportedFileFeatureError
from lakesdk.format.hfile_index import KV_SUFFIX

__all__ = ["HFileReader", "HFileTrailer", "TRAILER_SIZE", "HEADER_SIZE", "BLOCK_MAGIC", "CODECS", "crc32c",
           "KV_SUFFIX", "FILE_INFO_KEYS"]

TRAILER_SIZE = 4096
HEADER_SIZE = 33
TRAILER_MAGIC = b'TRABLK"$'
PBUF = b"PBUF"
#: block magic -> HBase's block type name
BLOCK_MAGIC = {b"DATABLK*": "DATA", b"DATABLKE": "ENCODED_DATA", b"IDXLEAF2": "LEAF_INDEX",
               b"BLMFBLK2": "BLOOM_CHUNK", b"METABLKc": "META", b"IDXINTE2": "INTERMEDIATE_INDEX",
               b"IDXROOT2": "ROOT_INDEX", b"FILEINF2": "FILE_INFO", b"BLMFMET2": "GENERAL_BLOOM_META",
               b"DFBLMET2": "DELETE_FAMILY_BLOOM_META", b"IDXBLK)+": "INDEX_V1"}
_MAGIC_OF = {v: k for k, v in BLOCK_MAGIC.items()}
#: the trailer's compression_codec -> name (HBase's Compression.Algorithm); lakesdk reads GZ and NONE
CODECS = {0: "LZO", 1: "GZ", 2: "NONE", 3: "SNAPPY", 4: "LZ4", 5: "BZIP2", 6: "ZSTD"}
GZ, NONE = 1, 2
#: what follows the row in every KeyValue key Hudi writes: family length 0, timestamp
#: Long.MAX_VALUE ("latest"), type Put
#: the file-info keys of the HFile layer
FILE_INFO_KEYS = (b"hfile.LASTKEY", b"hfile.AVG_KEY_LEN", b"hfile.AVG_VALUE_LEN", b"hfile.CREATE_TIME_TS",
                  b"KEY_VALUE_VERSION", b"MAX_MEMSTORE_TS_KEY")
_MAX_LEVELS = 16
_I32 = struct.Struct(">i")
_I32X2 = struct.Struct(">ii")
_U32 = struct.Struct(">I")
_I64 = struct.Struct(">q")
_HEADER = struct.Struct(">8siiqBii")
_HINT = "restore the file from a backup or from a copy of the table"
_T = TypeVar("_T")


def _crc32c_table() -> list[int]:
    table = []
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


_CRC32C_TABLE = _crc32c_table()


def _crc32c_py(data: bytes | memoryview) -> int:
    crc = 0xFFFFFFFF
    table = _CRC32C_TABLE
    for b in bytes(data):
        crc = table[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def _fast_crc32c() -> Callable[[bytes], int] | None:
    try:
        import google_crc32c  # type: ignore[import-not-found, unused-ignore]
    except ImportError:
        return None
    return google_crc32c.value if getattr(google_crc32c, "implementation", "") == "c" else None


#: CRC32C (Castagnoli) of bytes: google-crc32c's C code when it is installed, else pure Python
crc32c: Callable[[bytes], int] = _fast_crc32c() or _crc32c_py
_CHECKSUMS: dict[int, Callable[[bytes], int]] = {1: zlib.crc32, 2: lambda b: crc32c(b)}


@dataclass(frozen=True)
class HFileTrailer:
    """The trailer's fields (``TrailerProto``) and version.  ``fields`` lists the field numbers
    present, in file order; offsets Hudi or HBase write as -1 (no data block) read as -1."""

    file_info_offset: int
    load_on_open_offset: int
    uncompressed_data_index_size: int
    total_uncompressed_bytes: int | None
    data_index_count: int
    meta_index_count: int
    entry_count: int
    num_data_index_levels: int
    first_data_block_offset: int
    last_data_block_offset: int
    comparator: str
    compression_codec: int
    major_version: int
    minor_version: int
    fields: tuple[int, ...]


# -- parsing primitives ------------------------------------------------------------------------
def _varint(data: bytes, pos: int, end: int, fail: Callable[[str], NoReturn]) -> tuple[int, int]:
    """A protobuf varint at ``pos`` (at most 10 bytes, before ``end``): (value, next position)."""
    value = shift = 0
    for i in range(10):
        if pos + i >= end:
            fail("a varint runs past its field")
        b = data[pos + i]
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, pos + i + 1
        shift += 7
    fail("a varint is longer than 10 bytes")


def _vlong(data: bytes, pos: int, end: int, fail: Callable[[str], NoReturn]) -> tuple[int, int]:
    """A Hadoop ``WritableUtils`` VLong at ``pos``: (value, next position)."""
    if pos >= end:
        fail("a variable-length integer runs past its block")
    first = data[pos] - 256 if data[pos] > 127 else data[pos]
    if first >= -112:
        return first, pos + 1
    size = -119 - first if first < -120 else -111 - first
    if pos + size > end:
        fail("a variable-length integer runs past its block")
    value = int.from_bytes(data[pos + 1:pos + size], "big")
    return (~value if first < -120 else value), pos + size


def _proto_fields(data: bytes, pos: int, end: int, fail: Callable[[str], NoReturn]) -> Iterator[tuple[int, int | bytes]]:
    """The (field number, value) pairs of a protobuf message: varints as ints, length-delimited
    fields as bytes; 32/64-bit fields are skipped, groups refused."""
    while pos < end:
        tag, pos = _varint(data, pos, end, fail)
        number, wire = tag >> 3, tag & 7
        if number == 0:
            fail("a protobuf field has number 0")
        if wire == 0:
            value, pos = _varint(data, pos, end, fail)
            yield number, value
        elif wire == 2:
            n, pos = _varint(data, pos, end, fail)
            if pos + n > end:
                fail("a protobuf field runs past its message")
            yield number, data[pos:pos + n]
            pos += n
        elif wire in (1, 5):
            pos += 8 if wire == 1 else 4
            if pos > end:
                fail("a protobuf field runs past its message")
        else:
            fail(f"a protobuf field has wire type {wire}")


def _row(key: bytes, fail: Callable[[str], NoReturn], *, index: bool = False) -> bytes:
    """The row of a KeyValue key.  A data key is ``[row_len][row]`` + :data:`KV_SUFFIX`; an
    index key may also be a bare ``[row_len][row]`` (Hudi 1.1) or HBase's shortened key."""
    if len(key) < 2:
        fail("a key is shorter than its row length")
    n = (key[0] << 8) | key[1]
    if index:
        if len(key) != n + 2 and len(key) < n + 12:
            fail(f"an index key of {len(key)} bytes holds a row of {n} bytes")
    elif len(key) != n + 12 or key[n + 2:] != KV_SUFFIX:
        fail(f"a key of {len(key)} bytes is not a row of {n} bytes followed by Hudi's KeyValue fields")
    return key[2:2 + n]


class HFileReader:
    """An HFile in memory: its trailer, file info and meta blocks, and its entries in key
    order (a lookup reads the one data block the index points at).

    ``name`` names the file in errors (its path, or a log block); ``path`` is the path the
    errors carry (default ``name``).  Opening reads the trailer and the load-on-open section
    (the data and meta indexes, multi-level ones too, and the file info).

    ``source`` instead of ``data``: the file is read by ranges (an object with ``size`` and
    ``read(offset, n)``, :class:`lakesdk.format.byte_ranges.ByteRanges`): opening reads the
    load-on-open section, a lookup the data blocks it needs, no other byte."""

    def __init__(self, data: bytes | None = None, *, name: str = "<hfile>", path: str | None = None,
                 source: Any = None) -> None:
        self.name = name
        self.path = name if path is None else path
        self._src = source      # the bytes held: the whole file, or a source's tail, from offset _at
        self._size = len(data or b"") if source is None else source.size
        self._at = 0 if source is None else max(0, self._size - TRAILER_SIZE)
        self._data = bytes(data or b"") if source is None else source.read(self._at, self._size - self._at)
        self._cache: tuple[int, list[bytes], list[bytes]] | None = None
        self._guarded(self._open)

    # -- errors ------------------------------------------------------------------------------
    def _fail(self, detail: str) -> NoReturn:
        raise CorruptFileError(f"{self.name}: the HFile is damaged: {detail}; {_HINT}", path=self.path) from None

    def _unsupported(self, feature: str, detail: str) -> NoReturn:
        raise UnsupportedFileFeatureError(f"{self.name}: {detail}, which lakesdk does not read", path=self.path,
                                          feature=feature)

    # -- opening -----------------------------------------------------------------------------
    def _open(self) -> None:
        data, fail = self._data, self._fail
        if self._size < TRAILER_SIZE or len(data) < TRAILER_SIZE:
            fail(f"it is {self._size} bytes long, shorter than the {TRAILER_SIZE}-byte trailer")
        self._end = end = self._size - TRAILER_SIZE      # where the blocks end
        rel = end - self._at                             # the trailer in the bytes held
        if data[rel:rel + 8] != TRAILER_MAGIC:
            fail(f"no trailer magic {TRAILER_MAGIC!r} {TRAILER_SIZE} bytes before the end of the file")
        minor, major = data[-4], int.from_bytes(data[-3:], "big")
        if major != 3:
            if major == 2:
                self._unsupported("HFile version 2", "it is an HFile of version 2")
            fail(f"its trailer names HFile version {major}.{minor}")
        n, pos = _varint(data, rel + 8, len(data) - 4, fail)
        if pos + n > len(data) - 4:
            fail("the trailer's fields run past the trailer")
        if any(data[pos + n:len(data) - 4]):
            fail("the trailer's padding is not zero")
        self.trailer = t = self._trailer(pos, pos + n, minor, major)
        if t.compression_codec not in (GZ, NONE):
            codec = CODECS.get(t.compression_codec, f"codec #{t.compression_codec}")
            self._unsupported(f"compression {codec}", f"its blocks are compressed with {codec}")
        if not 0 <= t.load_on_open_offset < t.file_info_offset < end:
            fail(f"the trailer's offsets (load-on-open {t.load_on_open_offset}, file info {t.file_info_offset}) "
                 f"do not lie in order before the trailer at {end}")
        if self._src is not None:       # the load-on-open section, through the end
            self._data, self._at = self._src.read(t.load_on_open_offset, self._size - t.load_on_open_offset), \
                t.load_on_open_offset
        if not 1 <= t.num_data_index_levels <= _MAX_LEVELS:
            fail(f"the trailer says the data index has {t.num_data_index_levels} levels")
        root, pos = self._block(t.load_on_open_offset, "ROOT_INDEX")
        from lakesdk.format.hfile_index import root_index_arrays
        fast = root_index_arrays(root, t) if t.num_data_index_levels == 1 else None
        root_entries = [] if fast else self._root_entries(root, t.data_index_count, multi=t.num_data_index_levels > 1)
        meta_body, pos = self._block(pos, "ROOT_INDEX")
        if pos != t.file_info_offset:
            fail(f"the file info block should start at {t.file_info_offset} but the meta index ends at {pos}")
        info_body, pos = self._block(pos, "FILE_INFO")
        if pos != end:
            fail(f"the file info block ends at {pos}, not where the trailer starts ({end})")
        self.file_info = self._file_info(info_body)
        self._meta = {name: (off, size) for off, size, name in self._root_entries(meta_body, t.meta_index_count)}
        version = self.file_info.get(b"KEY_VALUE_VERSION", b"\x00\x00\x00\x01")
        if len(version) != 4:
            fail(f"file info KEY_VALUE_VERSION is {len(version)} bytes, not an int")
        self._mvcc = version != b"\x00\x00\x00\x00"
        if b"hfile.MAX_TAGS_LEN" in self.file_info:
            self._unsupported("HBase cell tags", "its entries carry HBase cell tags")
        if self.file_info.get(b"DATA_BLOCK_ENCODING", b"NONE") != b"NONE":
            self._unsupported("HBase data block encoding", "its data blocks use an HBase data block encoding")
        if fast:      # checked as below; the lists are made when something asks for them (__getattr__)
            self._fast, count = fast, t.data_index_count
        else:
            entries = self._data_entries(root_entries)
            self._offsets, self._sizes = [e[0] for e in entries], [e[1] for e in entries]
            self._keys = [_row(e[2], fail, index=True) for e in entries]
            if any(a > b for a, b in zip(self._keys, self._keys[1:])):
                fail("the data index keys are not sorted")
            ends = [o + n for o, n in zip(self._offsets, self._sizes)]
            if any(e > o for e, o in zip(ends, self._offsets[1:])) or (entries and ends[-1] > t.load_on_open_offset):
                fail("the data index points at blocks out of order or past the data section")
            if entries and (t.first_data_block_offset, t.last_data_block_offset) != (self._offsets[0], self._offsets[-1]):
                fail(f"the trailer's first and last data block offsets ({t.first_data_block_offset}, "
                     f"{t.last_data_block_offset}) are not those of the data index")
            count = len(entries)
        if not count and t.entry_count:
            fail(f"the trailer counts {t.entry_count} entries but the data index holds no block")
        if count and not t.entry_count:
            fail(f"the data index holds {count} blocks but the trailer counts no entry")
        last = self.file_info.get(b"hfile.LASTKEY")   # Hudi 1.1 writes b"" for no entry, or for the key b""
        self._last_key = None if last is None or not count else _row(last, fail, index=True) if last else b""

    def __getattr__(self, name: str) -> Any:
        fast = self.__dict__.get("_fast")     # an index parsed by hfile_lookup.root_index_arrays
        if fast is None or name not in ("_offsets", "_sizes", "_keys"):
            raise AttributeError(name)
        self._offsets, self._sizes, self._keys = fast[0].tolist(), fast[1].tolist(), fast[2].tolist()
        return self.__dict__[name]

    def _trailer(self, pos: int, end: int, minor: int, major: int) -> HFileTrailer:
        ints: dict[int, int] = {}
        texts: dict[int, bytes] = {}
        order: list[int] = []
        for number, value in _proto_fields(self._data, pos, end, self._fail):
            if number in (11, 13) and isinstance(value, bytes):
                texts[number] = value
            elif 1 <= number <= 12 and number != 11 and isinstance(value, int):
                ints[number] = value
            elif number <= 13:
                self._fail(f"trailer field {number} has the wrong wire type")
            order.append(number)
        missing = [f for f in (1, 2, 7, 12) if f not in ints]
        if missing:
            self._fail(f"the trailer lacks the fields {missing}")
        signed = {k: v - (1 << 64) if v >= 1 << 63 else v for k, v in ints.items()}
        if any(v < 0 for k, v in signed.items() if k not in (9, 10)):
            self._fail("a trailer size, count or offset is negative")
        try:
            comparator = texts.get(11, b"").decode("utf-8")
        except UnicodeDecodeError:
            self._fail("the trailer's comparator name is not UTF-8")
        return HFileTrailer(signed[1], signed[2], signed.get(3, 0), signed.get(4), signed.get(5, 0), signed.get(6, 0),
                            signed[7], signed.get(8, 1), signed.get(9, -1), signed.get(10, -1), comparator, signed[12],
                            major, minor, tuple(order))

    def _block(self, offset: int, kind: str, size: int | None = None) -> tuple[bytes, int]:
        """The data of the block at ``offset`` (checked, checksums verified, decompressed) and
        the offset after it; ``size``: its on-disk size with header, as an index says."""
        data, fail = self._data, self._fail
        end = self._end
        if not 0 <= offset <= end - HEADER_SIZE:
            fail(f"a {kind} block at offset {offset} would not fit before the trailer")
        at = offset - self._at          # the block in the bytes held
        if at < 0:                      # read by range: the block alone (its size from its header)
            if size is None:
                size = HEADER_SIZE + _I32.unpack_from(self._src.read(offset, HEADER_SIZE), 8)[0]
            data, at = self._src.read(offset, max(HEADER_SIZE, min(size, end - offset))), 0
        magic, on_disk, plain, _prev, ck_type, per_ck, with_header = _HEADER.unpack_from(data, at)
        found = BLOCK_MAGIC.get(magic)
        if found != kind:
            if found == "ENCODED_DATA" and kind == "DATA":
                self._unsupported("HBase data block encoding", "its data blocks use an HBase data block encoding")
            fail(f"expected a {kind} block at offset {offset}, found {found or repr(magic)}")
        stop = offset + HEADER_SIZE + on_disk
        if on_disk < 0 or plain < 0 or stop > end or (size is not None and size != HEADER_SIZE + on_disk):
            fail(f"the {kind} block at offset {offset} has sizes that do not fit the file or its index entry")
        if not HEADER_SIZE <= with_header <= HEADER_SIZE + on_disk:
            fail(f"the {kind} block at offset {offset} says its data ends outside the block")
        ck_bytes = stop - offset - with_header
        chunks = -(-with_header // per_ck) if per_ck > 0 else 0
        if per_ck < 0 or ck_bytes != 4 * chunks or ck_type not in (0, 1, 2):
            fail(f"the {kind} block at offset {offset} has a checksum layout that does not fit it")
        rel_stop = at + (stop - offset)
        if len(data) < rel_stop:
            fail(f"the {kind} block at offset {offset} runs past the end of the file")
        if not ck_type and any(data[at + with_header:rel_stop]):   # NULL: zeros, as Hudi and HBase write
            fail(f"the {kind} block at offset {offset} has checksums but its header says it has none")
        if ck_type:
            check = _CHECKSUMS[ck_type]
            for i in range(chunks):
                lo = at + i * per_ck
                want = _U32.unpack_from(data, at + with_header + 4 * i)[0]
                if check(data[lo:min(lo + per_ck, at + with_header)]) != want:
                    fail(f"the {kind} block at offset {offset} does not match its checksum")
        body = data[at + HEADER_SIZE:at + with_header]
        if self.trailer.compression_codec == GZ:
            body = self._gunzip(body, plain, kind, offset)
        elif len(body) != plain:
            fail(f"the {kind} block at offset {offset} holds {len(body)} bytes, not {plain}")
        return body, stop

    def _gunzip(self, body: bytes, plain: int, kind: str, offset: int) -> bytes:
        inflater = zlib.decompressobj(47)
        try:
            out = inflater.decompress(body, plain + 1)
        except zlib.error as exc:
            self._fail(f"the {kind} block at offset {offset} does not decompress: {exc}")
        if len(out) != plain or not inflater.eof or inflater.unused_data or inflater.unconsumed_tail:
            self._fail(f"the {kind} block at offset {offset} does not decompress to its {plain} bytes")
        return out

    def _root_entries(self, body: bytes, count: int, *, multi: bool = False) -> list[tuple[int, int, bytes]]:
        """(offset, on-disk size, key) of a root index block's ``count`` entries."""
        out, pos, fail = [], 0, self._fail
        for _ in range(count):
            if pos + 12 > len(body):
                fail(f"the index block ends before its {count} entries")
            offset, size = _I64.unpack_from(body, pos)[0], _I32.unpack_from(body, pos + 8)[0]
            n, pos = _vlong(body, pos + 12, len(body), fail)
            if n < 0 or pos + n > len(body):
                fail("an index entry's key runs past its block")
            out.append((offset, size, body[pos:pos + n]))
            pos += n
        if len(body) - pos != (16 if multi else 0):   # a multi-level root ends with the mid-key entry
            fail(f"the index block holds {len(body) - pos} bytes after its {count} entries")
        return out

    def _data_entries(self, entries: list[tuple[int, int, bytes]]) -> list[tuple[int, int, bytes]]:
        """The data blocks' index entries, walking down a multi-level index (every index block
        of a level read once, in order)."""
        levels = self.trailer.num_data_index_levels
        for level in range(levels - 1, 0, -1):
            kind = "INTERMEDIATE_INDEX" if level > 1 else "LEAF_INDEX"
            if any(a[0] >= b[0] for a, b in zip(entries, entries[1:])):
                self._fail(f"the {kind} blocks of the data index are out of order")
            entries = [e for off, size, _ in entries for e in self._non_root_entries(*self._block(off, kind, size))]
        return entries

    def _non_root_entries(self, body: bytes, _stop: int) -> list[tuple[int, int, bytes]]:
        fail = self._fail
        if len(body) < 4:
            fail("a leaf or intermediate index block is too short")
        n = _I32.unpack_from(body, 0)[0]
        base = 4 + 4 * (n + 1)
        if n < 0 or base > len(body):
            fail(f"a leaf or intermediate index block says it holds {n} entries")
        starts = [_I32.unpack_from(body, 4 + 4 * i)[0] for i in range(n + 1)]
        if starts[0] != 0 or base + starts[-1] != len(body) or any(b - a < 12 for a, b in zip(starts, starts[1:])):
            fail("the entries of a leaf or intermediate index block do not fit it")
        return [(_I64.unpack_from(body, base + a)[0], _I32.unpack_from(body, base + a + 8)[0], body[base + a + 12:base + b])
                for a, b in zip(starts, starts[1:])]

    def _file_info(self, body: bytes) -> dict[bytes, bytes]:
        fail = self._fail
        if body[:4] != PBUF:
            fail("the file info block does not start with PBUF")
        n, pos = _varint(body, 4, len(body), fail)
        if pos + n != len(body):
            fail("the file info block's length does not match its content")
        info: dict[bytes, bytes] = {}
        for number, pair in _proto_fields(body, pos, len(body), fail):
            if number != 1 or not isinstance(pair, bytes):
                fail(f"the file info holds an unknown field {number}")
            kv = {k: v for k, v in _proto_fields(pair, 0, len(pair), fail)}
            first, second = kv.get(1), kv.get(2)
            if not isinstance(first, bytes) or not isinstance(second, bytes) or set(kv) - {1, 2}:
                fail("a file info entry is not a pair of byte strings")
            info[first] = second
        return info

    # -- data blocks -------------------------------------------------------------------------
    def _entries(self, i: int) -> tuple[list[bytes], list[bytes]]:
        """The (rows, values) of data block ``i``, checked against the index keys around it."""
        if self._cache is not None and self._cache[0] == i:
            return self._cache[1], self._cache[2]
        body, _ = self._block(self._offsets[i], "DATA", self._sizes[i])
        fail, end, mvcc = self._fail, len(body), self._mvcc
        rows: list[bytes] = []
        values: list[bytes] = []
        pos = 0
        while pos < end:
            if pos + 8 > end:
                fail(f"data block {i} ends inside an entry")
            klen, vlen = _I32X2.unpack_from(body, pos)
            k = pos + 8
            if klen < 12 or vlen < 0 or k + klen + vlen > end:
                fail(f"an entry of data block {i} runs past the block")
            rows.append(_row(body[k:k + klen], fail))
            values.append(body[k + klen:k + klen + vlen])
            pos = k + klen + vlen
            if mvcc:
                _, pos = _vlong(body, pos, end, fail)
        if not rows:
            fail(f"data block {i} holds no entry")
        if any(a > b for a, b in zip(rows, rows[1:])):
            fail(f"the keys of data block {i} are not sorted")
        if rows[0] < self._keys[i] or (i + 1 < len(self._keys) and rows[-1] > self._keys[i + 1]):
            fail(f"the keys of data block {i} lie outside the range its index entries give it")
        self._cache = (i, rows, values)
        return rows, values

    # -- the API -----------------------------------------------------------------------------
    def __len__(self) -> int:
        """The number of entries, as the trailer counts them."""
        return self.trailer.entry_count

    @property
    def entry_count(self) -> int:
        return self.trailer.entry_count

    @property
    def num_data_blocks(self) -> int:
        return len(self._offsets)

    @property
    def data_index(self) -> list[tuple[int, int, bytes]]:
        """(offset, on-disk size, row of the index key) of every data block, in key order."""
        return list(zip(self._offsets, self._sizes, self._keys))

    @property
    def meta_block_names(self) -> list[bytes]:
        return list(self._meta)

    def meta_block(self, name: bytes | str) -> bytes | None:
        """The content of the meta block ``name`` (Hudi: ``bloomFilter``), None if there is none."""
        key = name.encode("utf-8") if isinstance(name, str) else bytes(name)
        if key not in self._meta:
            return None
        offset, size = self._meta[key]
        return self._guarded(lambda: self._block(offset, "META", size)[0])

    def get(self, key: bytes) -> bytes | None:
        """The value stored under ``key`` (the row: a record key as UTF-8 bytes), None if the
        file holds no such key.  Reads the one data block whose index range holds the key; a
        key stored more than once gives the first in that block, as Hudi's reader does."""
        key = bytes(key)
        i = bisect_right(self._keys, key) - 1
        if i < 0:
            return None

        def lookup() -> bytes | None:
            rows, values = self._entries(i)
            j = bisect_left(rows, key)
            return values[j] if j < len(rows) and rows[j] == key else None
        return self._guarded(lookup)

    def __contains__(self, key: object) -> bool:
        return isinstance(key, (bytes, bytearray, memoryview)) and self.get(bytes(key)) is not None

    def __iter__(self) -> Iterator[tuple[bytes, bytes]]:
        return self.items()

    def keys(self) -> Iterator[bytes]:
        return (k for k, _ in self.items())

    def items(self, start: bytes | None = None, prefix: bytes | None = None) -> Iterator[tuple[bytes, bytes]]:
        """``(key, value)`` in key order: from the first key at or after ``start``, only keys
        starting with ``prefix`` (both optional).  A scan of the whole file also checks the
        entry count and the last key against the trailer and the file info."""
        lo = max(start or b"", prefix or b"")
        first = max(bisect_left(self._keys, lo) - 1, 0)   # a key equal to a block's index key may end the block before
        whole = not lo
        count = 0
        for i in range(first, len(self._offsets)):
            rows, values = self._guarded(partial(self._entries, i))
            j = bisect_left(rows, lo) if lo else 0
            for k in range(j, len(rows)):
                row = rows[k]
                if prefix is not None and not row.startswith(prefix):
                    return
                yield row, values[k]
            count += len(rows)
        if whole:
            self._check_totals(count)

    def verify(self) -> None:
        """Read every data and meta block; raise on the first damage found."""
        for _ in self.items():
            pass
        for name in self._meta:
            self.meta_block(name)

    def _check_totals(self, count: int) -> None:
        if count != self.trailer.entry_count:
            self._fail(f"its data blocks hold {count} entries, the trailer counts {self.trailer.entry_count}")
        if self._offsets and self._last_key is not None and self._last_key != self._entries(len(self._offsets) - 1)[0][-1]:
            self._fail("its last key is not the hfile.LASTKEY of its file info")

    def _guarded(self, read: Callable[[], _T]) -> _T:
        try:
            return read()
        except (struct.error, IndexError, OverflowError) as exc:
            self._fail(f"{type(exc).__name__}: {exc}")

