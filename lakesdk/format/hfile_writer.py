"""Writing HFiles as Apache Hudi's ``HFileWriterImpl`` writes them (the format is described in
:mod:`lakesdk.format.hfile`).

The layout is Hudi's: data blocks of up to ``block_size`` bytes of entries (default
1 MiB, Hudi's ``hoodie.hfile.block.size``; a block holds at least one entry), then one meta
block per meta entry, the root data index (one level), the meta index and the file info,
then the 4096-byte trailer with the fields Hudi writes.  The file info holds what the caller
adds (the metadata table adds ``schema``, ``minRecordKey``, ``maxRecordKey``,
``bloomFilterTypeCode``) and the HFile entries Hudi adds: ``MAX_MEMSTORE_TS_KEY`` (0),
``KEY_VALUE_VERSION`` (1: every entry ends with an MVCC byte 0), ``hfile.LASTKEY``,
``hfile.AVG_KEY_LEN`` and ``hfile.AVG_VALUE_LEN`` (of the rows and values) and
``hfile.CREATE_TIME_TS``.

Where Hudi's writer has since been corrected, or leaves something to the reader, lakesdk
writes what every reader (Hudi's own, HBase's, hudi-rs) reads the same way:

* index keys are whole KeyValue keys with their length as a Hadoop VInt (Hudi 1.1 wrote bare
  ``[row_len][row]`` keys with a protobuf varint length, which HBase cannot read and which
  breaks for keys of 126 bytes or more; fixed in Hudi by apache/hudi#18465 and #19071), and
  so is ``hfile.LASTKEY`` (as HBase writes it); a file without entries has none;
* each data block's previous-block offset is the previous data block's (apache/hudi#19083);
* blocks carry CRC32 checksums (checksum type 1; Hudi writes type NULL and zero bytes in
  the same places, which its reader skips; HBase verifies them), so that a damaged block is
  an error, never another value (``checksum="none"`` writes Hudi's zeros);
* the trailer's version is 3.3, as HBase writes it (Hudi writes 3.0; only HBase looks at the
  minor version, which says the block headers carry checksums).

>>> from lakesdk.format.hfile import HFileReader
>>> data = write_hfile([(b"a", b"1"), (b"b", b"22")], file_info={"schema": b"{}"}, create_time_ms=0)
>>> r = HFileReader(data)
>>> list(r), r.get(b"b"), r.get(b"c"), r.file_info[b"schema"]
([(b'a', b'1'), (b'b', b'22')], b'22', None, b'{}')
"""

from __future__ import annotations

import struct
import time
import zlib
from collections.abc import Iterable, Mapping

from lakesdk.exceptions import InvalidKeyValueError, KeyOrderError, OptionsError, UnsupportedFileFeatureError
from lakesdk.format.hfile import _MAGIC_OF, GZ, HEADER_SIZE, KV_SUFFIX, NONE, PBUF, TRAILER_MAGIC, TRAILER_SIZE

__all__ = ["HFileWriter", "write_hfile", "DEFAULT_BLOCK_SIZE", "COMPARATOR", "vint"]

#: Hudi's ``hoodie.hfile.block.size``
DEFAULT_BLOCK_SIZE = 1024 * 1024
#: the comparator class name Hudi writes into the trailer
COMPARATOR = "org.apache.hudi.io.storage.HoodieHBaseKVComparator"
BYTES_PER_CHECKSUM = 16 * 1024
_CHECKSUM_TYPES = {"crc32": 1, "none": 0}
_HEADER = struct.Struct(">8siiqBii")
_ENTRY = struct.Struct(">iiH")
_MAX_ROW = 0x7FFF   # a row's length is a Java short


def vint(n: int) -> bytes:
    """Hadoop ``WritableUtils.writeVLong``: the length of a key in an index block."""
    if -112 <= n <= 127:
        return bytes([n & 0xFF])
    first = -112
    if n < 0:
        n, first = ~n, -120
    size = (n.bit_length() + 7) // 8
    return bytes([(first - size) & 0xFF]) + n.to_bytes(size, "big")


def _varint(n: int) -> bytes:
    """A protobuf varint (``n`` >= 0, or a negative int64 as its 10-byte two's complement)."""
    n &= (1 << 64) - 1
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _field(number: int, value: int | bytes) -> bytes:
    if isinstance(value, int):
        return _varint(number << 3) + _varint(value)
    return _varint(number << 3 | 2) + _varint(len(value)) + value


def _kv_key(row: bytes) -> bytes:
    return len(row).to_bytes(2, "big") + row + KV_SUFFIX


class HFileWriter:
    """Builds an HFile in memory: :meth:`append` entries in strictly ascending key order,
    add file info and meta blocks, then :meth:`finish` returns the file's bytes.

    ``compression``: ``"GZ"`` (Hudi's ``hoodie.hfile.compression.algorithm`` default) or
    ``"NONE"``; ``checksum``: ``"crc32"`` or ``"none"``; ``create_time_ms``: the
    ``hfile.CREATE_TIME_TS`` (default now)."""

    def __init__(self, *, block_size: int = DEFAULT_BLOCK_SIZE, compression: str = "GZ", checksum: str = "crc32",
                 create_time_ms: int | None = None, compression_level: int = 6) -> None:
        codec = {"GZ": GZ, "GZIP": GZ, "NONE": NONE}.get(str(compression).upper())
        if codec is None:
            raise UnsupportedFileFeatureError(f"lakesdk writes HFiles compressed with GZ or NONE, not {compression!r}",
                                              feature=f"compression {compression}")
        if checksum not in _CHECKSUM_TYPES:
            raise OptionsError(f"HFile checksum {checksum!r} is not one of {sorted(_CHECKSUM_TYPES)}")
        if not isinstance(block_size, int) or block_size <= 0:
            raise OptionsError(f"HFile block size must be a positive number of bytes, not {block_size!r}")
        self._codec, self._checksum = codec, _CHECKSUM_TYPES[checksum]
        self._block_size, self._level = block_size, compression_level
        self._create_time = int(time.time() * 1000) if create_time_ms is None else int(create_time_ms)
        self._parts: list[bytes] = []
        self._offset = 0
        self._block: list[bytes] = []         # encoded entries of the data block being filled
        self._block_bytes = 0
        self._block_first = b""
        self._index: list[tuple[int, int, bytes]] = []   # (offset, on-disk size, first row)
        self._prev_data = -1
        self._last: bytes | None = None
        self._count = self._key_bytes = self._value_bytes = self._data_bytes = 0
        self._info: dict[bytes, bytes] = {}
        self._meta: dict[bytes, bytes] = {}
        self._done = False

    def append(self, key: bytes, value: bytes) -> None:
        """Add an entry; ``key`` (the row: a record key as UTF-8 bytes) must sort after every
        key added before it."""
        self._open()
        if not isinstance(key, (bytes, bytearray, memoryview)) or not isinstance(value, (bytes, bytearray, memoryview)):
            raise TypeError(f"HFile keys and values are bytes, not {type(key).__name__} and {type(value).__name__}")
        key, value = bytes(key), bytes(value)
        if len(key) > _MAX_ROW:
            raise InvalidKeyValueError(f"an HFile key holds at most {_MAX_ROW} bytes; this one holds {len(key)}")
        if self._last is not None and key <= self._last:
            word = "repeats" if key == self._last else "sorts before"
            raise KeyOrderError(f"HFile keys must be strictly ascending: {key[:80]!r} {word} the key before it "
                                f"{self._last[:80]!r}")
        size = len(key) + len(value) + 21   # the entry's bytes in its data block
        if self._block and self._block_bytes + size > self._block_size:
            self._flush_data_block()
        if not self._block:
            self._block_first = key
        self._block.append(_ENTRY.pack(len(key) + 12, len(value), len(key)) + key + KV_SUFFIX + value + b"\x00")
        self._block_bytes += size
        self._last = key
        self._count += 1
        self._key_bytes += len(key)
        self._value_bytes += len(value)
        self._data_bytes += size

    def add_file_info(self, name: bytes | str, value: bytes) -> None:
        """Add (or replace) a file-info entry (Hudi: ``schema``, ``minRecordKey``, ...)."""
        self._open()
        self._info[name.encode("utf-8") if isinstance(name, str) else bytes(name)] = bytes(value)

    def add_meta_block(self, name: bytes | str, value: bytes) -> None:
        """Add (or replace) a meta block (Hudi: the bloom filter under ``bloomFilter``)."""
        self._open()
        self._meta[name.encode("utf-8") if isinstance(name, str) else bytes(name)] = bytes(value)

    def finish(self) -> bytes:
        """The whole file.  The writer takes nothing more afterwards."""
        self._open()
        self._done = True
        if self._block:
            self._flush_data_block()
        meta_index = []
        for name in sorted(self._meta):
            offset = self._offset
            self._write_block("META", self._meta[name], -1)
            meta_index.append((offset, self._offset - offset, name))
        load_on_open = self._offset
        self._write_block("ROOT_INDEX", b"".join(
            struct.pack(">qi", off, size) + vint(len(_kv_key(row))) + _kv_key(row) for off, size, row in self._index), -1)
        self._write_block("ROOT_INDEX", b"".join(
            struct.pack(">qi", off, size) + vint(len(name)) + name for off, size, name in meta_index), -1)
        file_info_offset = self._offset
        self._write_block("FILE_INFO", self._file_info(), -1)
        first = self._index[0][0] if self._index else -1
        last = self._index[-1][0] if self._index else -1
        trailer = b"".join([
            _field(1, file_info_offset), _field(2, load_on_open), _field(3, self._data_bytes),
            _field(5, len(self._index)), _field(6, len(meta_index)), _field(7, self._count), _field(8, 1),
            _field(9, first), _field(10, last), _field(11, COMPARATOR.encode()), _field(12, self._codec)])
        head = TRAILER_MAGIC + _varint(len(trailer)) + trailer
        self._parts.append(head + bytes(TRAILER_SIZE - 4 - len(head)) + b"\x03\x00\x00\x03")
        out = b"".join(self._parts)
        self._parts = []
        return out

    # -- internals ---------------------------------------------------------------------------
    def _open(self) -> None:
        if self._done:
            raise OptionsError("the HFile writer has finished; start a new one")

    def _file_info(self) -> bytes:
        info = dict(self._info)
        n = self._count
        info.update({
            b"MAX_MEMSTORE_TS_KEY": bytes(8),
            b"hfile.AVG_KEY_LEN": (self._key_bytes // n if n else 0).to_bytes(4, "big"),
            b"hfile.AVG_VALUE_LEN": (self._value_bytes // n if n else 0).to_bytes(4, "big"),
            b"hfile.CREATE_TIME_TS": self._create_time.to_bytes(8, "big", signed=True),
        })
        if self._last is not None:
            info[b"hfile.LASTKEY"] = _kv_key(self._last)
        info.setdefault(b"KEY_VALUE_VERSION", b"\x00\x00\x00\x01")
        message = b"".join(_field(1, _field(1, k) + _field(2, v)) for k, v in sorted(info.items()))
        return PBUF + _varint(len(message)) + message

    def _flush_data_block(self) -> None:
        offset = self._offset
        self._write_block("DATA", b"".join(self._block), self._prev_data)
        self._index.append((offset, self._offset - offset, self._block_first))
        self._prev_data = offset
        self._block, self._block_bytes = [], 0

    def _write_block(self, kind: str, data: bytes, prev_offset: int) -> None:
        on_disk = data
        if self._codec == GZ:
            deflater = zlib.compressobj(self._level, zlib.DEFLATED, 31)
            on_disk = deflater.compress(data) + deflater.flush()
        with_header = HEADER_SIZE + len(on_disk)
        chunks = -(-with_header // BYTES_PER_CHECKSUM)
        header = _HEADER.pack(_MAGIC_OF[kind], len(on_disk) + 4 * chunks, len(data), prev_offset, self._checksum,
                              BYTES_PER_CHECKSUM, with_header)
        block = header + on_disk
        if self._checksum:
            sums = b"".join(struct.pack(">I", zlib.crc32(block[i:i + BYTES_PER_CHECKSUM]))
                            for i in range(0, with_header, BYTES_PER_CHECKSUM))
        else:
            sums = bytes(4 * chunks)
        self._parts.append(block + sums)
        self._offset += len(block) + len(sums)


def write_hfile(items: Iterable[tuple[bytes, bytes]], *, file_info: Mapping[bytes | str, bytes] | None = None,
                meta_blocks: Mapping[bytes | str, bytes] | None = None, **options: object) -> bytes:
    """An HFile of ``items`` (``(key, value)`` pairs in strictly ascending key order) with the
    given file-info entries and meta blocks; ``options`` as :class:`HFileWriter` takes them."""
    writer = HFileWriter(**options)  # type: ignore[arg-type]
    for key, value in items:
        writer.append(key, value)
    for name, value in (file_info or {}).items():
        writer.add_file_info(name, value)
    for name, value in (meta_blocks or {}).items():
        writer.add_meta_block(name, value)
    return writer.finish()
