"""The ``record_index`` partition of Hudi's metadata table (MDT): record key -> file group.

As Apache Hudi 1.x writes it (``HoodieTableMetadataUtil``, ``HoodieMetadataPayload``,
``HoodieMetadata.avsc``):

* every live record key of the data table has one ``HoodieMetadataRecord`` of type 5, keyed by
  the record key, whose ``recordIndexMetadata`` (``HoodieRecordIndexInfo``) names the data
  partition and the file id of the file group holding it, and the instant time that put it
  there in epoch milliseconds (the instant time read in the table's timeline time zone);
* a file id ``<uuid>-<index>`` is stored as the UUID's high and low 64 bits (signed longs) and
  the index (``fileIdEncoding`` 0), any other file id as a string (``fileIdEncoding`` 1);
* the records are spread over the file groups ``record-index-0000-0`` ...
  ``record-index-<n-1>-0`` by :func:`file_group_index`, Java's ``String.hashCode`` of the key
  computed explicitly (UTF-16 code units), then ``abs(abs(h) % n)``;
* ``n`` is fixed when the partition is built: ``hoodie.metadata.record.index.min.filegroup.count``
  (10) up to ``...max.filegroup.count`` (10,000), enough groups for ``records x growth factor
  (2.0) x 48 bytes`` to fit ``...max.filegroup.size`` (1 GiB) each
  (``HoodieTableMetadataUtil.estimateFileGroupCount``); readers count the groups on storage;
* a deleted key is a key of a DELETE log block (partition path ``record_index``).

>>> file_group_index("TXN-001", 10), java_string_hash("hello")
(8, 99162322)
>>> from lakesdk.format.metadata_records import decode_file_id
>>> decode_file_id(encode_file_id("5f0c2a8e-91a4-4b6f-9f0e-2b8a1c3d4e5f-0"))
'5f0c2a8e-91a4-4b6f-9f0e-2b8a1c3d4e5f-0'
>>> encode_file_id("not-a-uuid")["fileIdEncoding"]
1
>>> file_group_count(0), file_group_count(300_000_000)
(10, 26)
"""

from __future__ import annotations

import datetime as _dt
import math
import uuid
from typing import Any, Iterable, NamedTuple, Sequence

import numpy as np

from lakesdk.format.metadata_records import RecordType

__all__ = ["PARTITION", "java_string_hash", "file_group_index", "file_group_id", "file_group_count",
           "encode_file_id", "instant_millis", "index_record", "IndexEntry", "MIN_GROUPS", "MAX_GROUPS",
           "ENABLE_KEY", "INIT_INSTANT", "group_count", "group_count_of",
           "file_group_indices"]

PARTITION = "record_index"
#: the data table's option that asks a writer to keep the record index (Hudi writes it to the write config)
ENABLE_KEY = "hoodie.metadata.record.index.enable"
MIN_GROUPS = 10
MAX_GROUPS = 10_000
GROWTH_FACTOR = 2.0
MAX_GROUP_BYTES = 1 << 30
RECORD_BYTES = 48
#: the MDT instant Hudi 1.x initializes ``record_index`` with on a new table (files 000, column_stats 001)
INIT_INSTANT = "00000000000000002"


def java_string_hash(s: str) -> int:
    """Java's ``String.hashCode`` of ``s`` (over its UTF-16 code units), as a signed 32-bit int."""
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def file_group_index(key: str, n: int) -> int:
    """``HoodieTableMetadataUtil.mapRecordKeyToFileGroupIndex``: ``abs(abs(h) % n)`` where
    Java's ``Math.abs(Integer.MIN_VALUE)`` stays negative."""
    h = java_string_hash(key)
    a = h if h == -(1 << 31) else abs(h)
    # Java's % truncates toward zero
    r = abs(a) % n
    return abs(-r if a < 0 else r)


def file_group_indices(keys: Sequence[str], n: int) -> np.ndarray:
    """:func:`file_group_index` of many keys at once (Java's hash over their UTF-16 code units,
    computed position by position over all keys as wide as that position)."""
    if not len(keys):
        return np.zeros(0, np.int64)
    encoded = [k.encode("utf-16-be") for k in keys]
    lens = np.fromiter((len(e) // 2 for e in encoded), np.int64, len(encoded))
    units = np.frombuffer(b"".join(encoded), dtype=">u2").astype(np.int64)
    starts = np.concatenate(([0], np.cumsum(lens)[:-1]))
    order = np.argsort(-lens, kind="stable")     # the longest first: each position's keys are a prefix
    lens_sorted, starts_sorted = lens[order], starts[order]
    h = np.zeros(len(keys), np.int64)
    for j in range(int(lens_sorted[0]) if len(lens_sorted) else 0):
        m = int(np.searchsorted(-lens_sorted, -j, side="left"))    # keys longer than j
        h[:m] = (31 * h[:m] + units[starts_sorted[:m] + j]) & 0xFFFFFFFF
    signed = np.where(h >= 1 << 31, h - (1 << 32), h)
    r = np.abs(signed) % n          # |MIN_VALUE| stays MIN_VALUE in Java: % n of it is -(2^31 % n), abs'ed
    out = np.empty(len(keys), np.int64)
    out[order] = r
    return out


def file_group_id(index: int) -> str:
    """The id of the record index's file group ``index`` (``record-index-0003-0``)."""
    return f"record-index-{index:04d}-0"


def group_count(mdt: Any) -> int:
    """How many file groups the MDT (a :class:`~lakesdk.storage.Storage` at its folder) has in
    ``record_index`` (0: none), from the file names on storage (a reader of Hudi's counts them)."""
    try:
        names = [e.name.lstrip(".") for e in mdt.list(PARTITION) if not e.is_dir]
    except FileNotFoundError:
        return 0
    return group_count_of(names)


def group_count_of(names: Iterable[str]) -> int:
    """How many file groups the record index has whose file names (or file ids) are ``names``."""
    ids = {int(n[13:17]) for n in names if n.startswith("record-index-") and n[13:17].isdigit()}
    return max(ids) + 1 if ids else 0


def file_group_count(records: int, *, min_groups: int = MIN_GROUPS, max_groups: int = MAX_GROUPS,
                     growth: float = GROWTH_FACTOR, max_bytes: int = MAX_GROUP_BYTES) -> int:
    """``HoodieTableMetadataUtil.estimateFileGroupCount`` for the record index of ``records``
    keys: ``ceil(records x growth) // (max_bytes // 48)`` within [min, max] (min == max: that)."""
    if min_groups == max_groups and min_groups != 0:
        return min_groups
    expected = math.ceil(records * growth)
    estimated = expected // (max_bytes // RECORD_BYTES)
    if estimated >= max_groups:
        return max_groups
    if estimated <= min_groups:
        return min_groups
    return max(1, estimated)


def _signed(v: int) -> int:
    return v - (1 << 64) if v & (1 << 63) else v


def encode_file_id(file_id: str) -> dict[str, Any]:
    """The file id fields of a ``HoodieRecordIndexInfo`` as ``HoodieMetadataPayload.createRecordIndexUpdate``
    writes them: a ``<uuid>-<index>`` id as the UUID's bits and the index, a bare UUID with
    index -1 (encoding 0, ``fileId`` empty); any other id as a string (encoding 1, the bits and
    index -1).  A UUID not in its canonical lower-case text is kept as a string, so that it
    reads back as written."""
    head, sep, tail = file_id.rpartition("-")
    if len(file_id) == 36:
        head, tail = file_id, ""
    try:
        if len(head) != 36 or (tail and (not tail.isdigit() or str(int(tail)) != tail)) or (sep == "" and tail):
            raise ValueError(file_id)
        u = uuid.UUID(head)
        if str(u) != head:      # else it would not read back as written
            raise ValueError(file_id)
        bits = u.int
        return {"fileIdHighBits": _signed(bits >> 64), "fileIdLowBits": _signed(bits & (2**64 - 1)),
                "fileIndex": int(tail) if tail else -1, "fileId": "", "fileIdEncoding": 0}
    except ValueError:
        return {"fileIdHighBits": -1, "fileIdLowBits": -1, "fileIndex": -1, "fileId": file_id, "fileIdEncoding": 1}


def instant_millis(instant: str, timezone: str = "UTC") -> int:
    """An instant time (``yyyyMMddHHmmssSSS``, or without millis) in epoch milliseconds, read in
    the table's timeline time zone (``UTC`` or ``LOCAL``)."""
    digits = instant[:17]
    ms = int(digits[14:17]) if len(digits) >= 17 else 0
    when = _dt.datetime.strptime(digits[:14], "%Y%m%d%H%M%S")
    if timezone.upper() == "UTC":
        when = when.replace(tzinfo=_dt.UTC)
    return int(when.timestamp()) * 1000 + ms


class IndexEntry(NamedTuple):
    """A record index entry: its key lives in ``file_id`` of the data ``partition`` since the
    instant of ``instant_ms``.  The MDT writer encodes the entries of one location once and
    puts each key in (:func:`lakesdk.format.metadata_files.hfile_of`)."""
    partition: str
    file_id: str
    instant_ms: int

    def as_record(self, key: str) -> dict[str, Any]:
        """The ``HoodieMetadataRecord`` (as a dict) of this entry for ``key``."""
        return {"key": key, "type": int(RecordType.RECORD_INDEX),
                "recordIndexMetadata": {"partitionName": self.partition, **encode_file_id(self.file_id),
                                        "instantTime": self.instant_ms, "position": None}}


def index_record(key: str, partition: str, file_id: str, instant_ms: int) -> IndexEntry:
    """The record index entry saying that ``key`` lives in ``file_id`` of the data ``partition``
    since the instant of ``instant_ms`` (:meth:`IndexEntry.as_record` gives its record)."""
    return IndexEntry(partition, file_id, instant_ms)
