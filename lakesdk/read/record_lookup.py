"""Point lookups in the metadata table's ``record_index`` partition at a cost that follows the
keys looked up (:meth:`lakesdk.read.metadata_table.MetadataTableReader.record_locations`).

Each key's file group is the one its hash names.  In that group's latest slice the base HFile
and the HFile of each log data block are read by byte ranges: the trailer, the data index and
the data blocks that hold wanted keys (:func:`lakesdk.format.hfile_lookup.get_many`), never
the whole file; a log file's blocks are found by their framing (:mod:`lakesdk.format.log_ranges`;
a log file with a corrupt stretch is read whole, as before).  The blocks are merged as the
slice's records are (:meth:`~lakesdk.read.metadata_table.MetadataTableReader._slice_records`):
in the order their delta commits completed, blocks of instants that do not count or were
rolled back skipped, a delete block removing keys.

A record index value is one Avro ``HoodieMetadataRecord``: the meta fields (null) and the key,
then the rest, which is the same for every key of one location.  The rest is decoded once per
lookup and shared by the keys that carry it (the key and the meta fields before it are checked
as the decoder would check them); values of another layout are decoded one by one.
"""

from __future__ import annotations

import json
from collections import defaultdict
from functools import lru_cache
from typing import Any, Iterable, Iterator

from lakesdk.exceptions import CorruptFileError, _BadAvroBytes
from lakesdk.format.avro_file import _long
from lakesdk.format.byte_ranges import ByteRanges
from lakesdk.format.file_group import FileSlice
from lakesdk.format.hfile import HFileReader
from lakesdk.format.hfile_lookup import get_many, open_indexed
from lakesdk.format.log_framing import BlockType, HeaderKey
from lakesdk.format.log_ranges import scan_log_ranges
from lakesdk.format.metadata_records import MetadataRecord, RecordLocation, RecordType, decode_record

__all__ = ["record_locations", "decode_records"]

_MISSING = object()
#: a merged value: the location a key's latest record gives (None: a record without one)
Found = dict[bytes, "RecordLocation | None"]


def record_locations(reader: Any, keys: Iterable[str]) -> dict[str, RecordLocation]:
    """Where the ``record_index`` partition of ``reader``'s MDT puts each of ``keys`` (a key it
    does not hold is left out)."""
    from lakesdk.format.record_index import PARTITION, file_group_id, file_group_indices, group_count_of
    ks = list(dict.fromkeys(keys))
    if not ks:
        return {}
    # every file group of the index, or FileNotFoundError: a key is never missed for a file group
    # this reader's MDT timeline cannot see (an index built or compacted since it was read)
    slices = {sl.file_id: sl for sl in reader.built_slices(PARTITION)}
    n = group_count_of(slices)       # as the reader listed them
    wanted: dict[str, list[str]] = defaultdict(list)
    for k, i in zip(ks, file_group_indices(ks, n).tolist()):
        wanted[file_group_id(i)].append(k)
    out: dict[str, RecordLocation] = {}
    decoded: dict[str, dict[bytes, Any]] = {}      # schema -> the rest of a value -> its location
    for fid, group_keys in wanted.items():
        sl = slices.get(fid)
        if sl is None:
            raise FileNotFoundError(f"{reader.mdt.url(PARTITION)}: the record index has no file group {fid} "
                                    f"among its {n}: read it again")
        for key, loc in _slice_lookup(reader, sl, group_keys, decoded).items():
            if loc is not None:
                out[key.decode("utf-8")] = loc
    return out


def _slice_lookup(reader: Any, sl: FileSlice, keys: list[str],
                  decoded: dict[str, dict[bytes, Any]]) -> Found:
    want = sorted({k.encode("utf-8") for k in keys})
    mdt = reader.mdt
    merged: Found = {}
    if sl.base_path is not None:
        url = mdt.url(sl.base_path)
        with ByteRanges.of_storage(mdt, sl.base_path, sl.base_size or None) as src:
            hf = open_indexed(src, (url, 0, src.size), name=url)
            schema = _file_schema(hf, url)
            for k, v in get_many(hf, want).items():
                merged[k] = _location(v, schema, k, url, decoded)
    if not sl.log_paths:
        return merged
    blocks: list[tuple[str | None, bool, str | None, Found, tuple[bytes, ...]]] = []
    for path, size in zip(sl.log_paths, sl.log_sizes):
        blocks += _log_blocks(mdt, path, size, want, decoded)
    if reader.config.layout_version >= 2:
        blocks.sort(key=lambda b: reader._completion.get(b[0] or "", b[0] or ""))
    voided = {b[2] for b in blocks if b[1]}
    for instant, _rollback, _target, records, deleted in blocks:
        if instant not in reader.valid or instant in voided:
            continue
        merged.update(records)
        for k in deleted:
            merged.pop(k, None)
    return merged


def _log_blocks(mdt: Any, path: str, size: int, want: list[bytes], decoded: dict[str, dict[bytes, Any]]) -> list[Any]:
    """(instant, is a rollback, its target, the wanted keys' locations, the wanted keys it
    deletes) of each block of the MDT log file ``path``."""
    url = mdt.url(path)
    out: list[Any] = []
    with ByteRanges.of_storage(mdt, path, size or None) as src:
        scanned = scan_log_ranges(src)
        if scanned is None:
            return _whole_log_blocks(url, mdt.read(path), want)
        wanted = {k.decode("utf-8") for k in want}
        for b, window in scanned:
            if b.block_type == BlockType.HFILE_DATA and window is not None:
                schema = b.header.get(HeaderKey.SCHEMA)
                if not schema:
                    raise CorruptFileError(f"{url}: an HFile data block at offset {b.offset} has no SCHEMA header",
                                           path=url)
                hf = open_indexed(window, (url, b.offset, window.size),
                                  name=f"{url}: the HFILE_DATA block at offset {b.offset}", path=url)
                found = {k: _location(v, schema, k, url, decoded) for k, v in get_many(hf, want).items()}
                out.append((b.instant, False, None, found, ()))
            elif b.block_type == BlockType.DELETE:
                gone = b.delete_records().column("_hoodie_record_key").to_pylist()
                out.append((b.instant, False, None, {}, tuple(str(k).encode("utf-8") for k in gone if k in wanted)))
            elif b.block_type == BlockType.COMMAND:
                out.append((b.instant, b.is_rollback, b.target_instant, {}, ()))
            else:
                raise CorruptFileError(f"{url}: a metadata table log file holds a {b.block_type.name} block at offset "
                                       f"{b.offset}; it holds HFile data, delete and command blocks only", path=url)
    return out


def _whole_log_blocks(url: str, data: bytes, want: list[bytes]) -> list[Any]:
    """:func:`_log_blocks` of a log file read whole (one with a corrupt stretch)."""
    from lakesdk.read.mdt_blocks import _blocks_of_keys
    keys = {k.decode("utf-8") for k in want}
    return [(b.instant, b.rollback, b.target, {r.key.encode("utf-8"): r.location for r in b.records},
             tuple(k.encode("utf-8") for k in b.deleted)) for b in _blocks_of_keys(url, data, keys)]


def _file_schema(hf: HFileReader, url: str) -> str:
    raw = (getattr(hf, "file_info", {}) or {}).get(b"schema")
    if raw is None:
        raise CorruptFileError(f"{url}: the HFile's file info names no Avro schema (key 'schema')", path=url)
    return bytes(raw).decode("utf-8")


@lru_cache(maxsize=16)
def _nullable_before_key(schema_json: str) -> int | None:
    """How many ``[null, string]`` fields come before the ``key`` string of a
    ``HoodieMetadataRecord`` schema (None: another layout, decoded value by value)."""
    try:
        fields = json.loads(schema_json)["fields"]
        for i, f in enumerate(fields):
            t = f["type"]
            if f["name"] == "key":
                name = t.get("type") if isinstance(t, dict) else t
                return i if name == "string" else None
            if not (isinstance(t, list) and len(t) == 2 and t[0] == "null"
                    and (t[1].get("type") if isinstance(t[1], dict) else t[1]) == "string"):
                return None
    except (ValueError, KeyError, TypeError, AttributeError):
        return None
    return None


def decode_records(items: Iterable[tuple[bytes, bytes]], schema: str, url: str) -> Iterator[MetadataRecord]:
    """:func:`~lakesdk.format.metadata_records.decode_record` of each (key, value) of an MDT
    HFile, a record index record decoded once per distinct location: the others of that
    location are the same record with their own key (the key field of the value is the key,
    or blank as Hudi writes it, and the meta fields before it are null)."""
    before = _nullable_before_key(schema)
    seen: dict[tuple[bytes, bool], MetadataRecord] = {}
    for k, v in items:
        rest = _rest(v, before, k, nulls_only=True) if before is not None else None
        blank = rest is not None and len(rest) == len(v) - (before or 0) - 1
        hit = seen.get((rest, blank)) if rest is not None else None
        if hit is None:
            rec = decode_record(v, schema, key=k, path=url)
            if rest is not None and rec.type == RecordType.RECORD_INDEX and rec.raw is not None:
                seen[(rest, blank)] = rec
            yield rec
        else:
            key = k.decode("utf-8")
            yield MetadataRecord(key, hit.type, hit.files, hit.column_stats, hit.location, hit.deleted,
                                 {**(hit.raw or {}), "key": "" if blank else key})


def _rest(value: bytes, before: int, key: bytes, *, nulls_only: bool = False) -> bytes | None:
    """The bytes of ``value`` after its key (``before`` nullable strings, then the key), or None
    when the start of the value is not such fields as the decoder would accept them
    (``nulls_only``: or when a field before the key is not null)."""
    pos = 0
    try:
        if value[:before] == bytes(before):         # the meta fields null, as in every MDT record
            pos = before
            before = 0
        elif nulls_only:
            return None
        for i in range(before + 1):
            if i < before:
                branch, pos = _long(value, pos)
                if branch == 0:
                    continue
                if branch != 1:
                    return None
            n, pos = _long(value, pos)
            if n < 0 or pos + n > len(value):
                return None
            if i == before and (n == 0 or value[pos:pos + n] == key):    # blank (Hudi) or the key (lakesdk)
                return value[pos + n:]
            value[pos:pos + n].decode("utf-8")
            pos += n
    except (_BadAvroBytes, UnicodeDecodeError):
        return None
    return value[pos:]


def _location(value: bytes, schema: str, key: bytes, url: str, decoded: dict[str, dict[bytes, Any]]) -> RecordLocation | None:
    """The location the record ``value`` (of ``key``) gives, None for a record without one."""
    before = _nullable_before_key(schema)
    rest = _rest(value, before, key) if before is not None else None
    if rest is None:
        return decode_record(value, schema, key=key, path=url).location
    cache = decoded.setdefault(schema, {})
    hit: Any = cache.get(rest, _MISSING)
    if hit is _MISSING:
        hit = cache[rest] = decode_record(value, schema, key=key, path=url).location
    return hit
