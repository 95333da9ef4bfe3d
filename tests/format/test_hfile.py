"""HFile (lakesdk.format.hfile, lakesdk.format.hfile_writer): every metadata-table HFile of the
corpus reads (base files and the HFILE_DATA blocks of its log files), hudi-rs's test HFiles read
with the keys and values hudi-rs's own tests assert, the writer's files read back and have the
layout of Hudi-written ones, and damaged files are typed errors or correct answers.  No Spark.
"""

from __future__ import annotations

import random
import struct
import zipfile
import zlib
from functools import lru_cache
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lakesdk.exceptions import (
    CorruptFileError,
    InvalidKeyValueError,
    KeyOrderError,
    LogBlockError,
    OptionsError,
    UnsupportedFileFeatureError,
)
from lakesdk.format.hfile import FILE_INFO_KEYS, TRAILER_SIZE, HFileReader, _crc32c_py, crc32c
from lakesdk.format.hfile_writer import HFileWriter, _field, _varint, vint, write_hfile
from lakesdk.format.log_block import BlockType, encode_block, hfile_block_items, read_log_file

from ..corpus_model import DATA, SHARED

HFILES = Path(__file__).parents[1] / "data" / "hfile"
V9 = DATA / "sample_table/mor/avro/v9_txns_simple_meta.zip"
V8 = DATA / "quickstart_trips_table/mor/avro/v8_trips_8i3u1d.zip"


# -- the corpus -------------------------------------------------------------------------------------
def _mdt_members(z: Path) -> list[str]:
    with zipfile.ZipFile(z) as zf:
        return [n for n in zf.namelist() if "/.hoodie/metadata/" in n and "/.hoodie/metadata/.hoodie/" not in n
                and "__MACOSX" not in n and (n.endswith(".hfile") or ".log." in n)]


def _corpus_zips() -> list[Path]:
    return [z for root in (DATA, SHARED) if root.is_dir() for z in sorted(root.rglob("*.zip")) if _mdt_members(z)]


MDT_ZIPS = _corpus_zips()


def _zip_id(z: Path) -> str:
    return str(z.relative_to(DATA if z.is_relative_to(DATA) else SHARED).with_suffix(""))


def corpus_hfiles(z: Path) -> list[tuple[str, HFileReader]]:
    """(member name, reader) of every base HFile and HFILE_DATA block of the zip's MDT."""
    out = []
    with zipfile.ZipFile(z) as zf:
        for name in _mdt_members(z):
            data = zf.read(name)
            if name.endswith(".hfile"):
                out.append((name, HFileReader(data, name=name)))
                continue
            for block in read_log_file(data):
                if block.block_type == BlockType.HFILE_DATA:
                    out.append((f"{name}@{block.offset}", block.hfile(name)))
    return out


def _member(z: Path, pred) -> bytes:
    with zipfile.ZipFile(z) as zf:
        return zf.read(next(n for n in _mdt_members(z) if pred(n)))


def absent_keys(keys: list[bytes]) -> list[bytes]:
    """Keys not in ``keys`` (sorted): before the first, between each two, after the last."""
    out = [keys[-1] + b"\x00"] if keys else [b"", b"x"]
    if keys and keys[0]:
        out.append(keys[0][:-1])
    out += [a + b"\x00" for a, b in zip(keys, keys[1:]) if a + b"\x00" != b]
    return out


def check_reads(r: HFileReader, *, unique: bool = True) -> list[tuple[bytes, bytes]]:
    """Everything the reader answers agrees: iteration, the trailer's count, lookups."""
    items = list(r)
    keys = [k for k, _ in items]
    assert len(items) == len(r) == r.entry_count
    assert all(a < b for a, b in zip(keys, keys[1:])) if unique else keys == sorted(keys)
    for k, v in items if unique else ():
        assert r.get(k) == v
    for k in absent_keys(keys):
        assert r.get(k) is None and k not in r
    for k in keys[:: max(1, len(keys) // 7)]:
        assert list(r.items(prefix=k))[0][0] == k and list(r.items(start=k)) == items[keys.index(k):]
    r.verify()
    return items


def test_the_corpus_has_metadata_tables():
    assert len(MDT_ZIPS) >= 20 and V9 in MDT_ZIPS and V8 in MDT_ZIPS


@pytest.mark.parametrize("z", MDT_ZIPS, ids=_zip_id)
def test_every_metadata_table_hfile_of_the_corpus_reads(z: Path):
    hfiles = corpus_hfiles(z)
    assert any(n.endswith(".hfile") for n, _ in hfiles) and any("@" in n for n, _ in hfiles)
    files_keys = set()
    for name, r in hfiles:
        items = check_reads(r)
        assert set(FILE_INFO_KEYS) - {b"hfile.LASTKEY"} <= set(r.file_info), name
        assert (b"hfile.LASTKEY" in r.file_info) or not items
        assert b"schema" in r.file_info
        if name.endswith(".hfile"):    # base files carry the bloom filter of their keys
            assert r.meta_block_names == [b"bloomFilter"] and r.meta_block("bloomFilter")
            assert {b"minRecordKey", b"maxRecordKey", b"bloomFilterTypeCode"} <= set(r.file_info)
            if items:
                assert (r.file_info[b"minRecordKey"], r.file_info[b"maxRecordKey"]) == (items[0][0], items[-1][0])
        if "/files/" in name:
            files_keys |= {k for k, _ in items}
    assert b"__all_partitions__" in files_keys


def test_the_files_partition_of_the_v8_trips_table_as_hudi_rs_reads_it():
    """hudi-rs's test of the same file: four records, the partition list and three partitions."""
    name = max((n for n in _mdt_members(V8) if "/files/files-" in n and n.endswith(".hfile")),
               key=lambda n: n.rsplit("_", 1)[-1])
    r = HFileReader(_member(V8, lambda n: n == name), name=name)
    assert list(r.keys()) == [b"__all_partitions__", b"city=chennai", b"city=san_francisco", b"city=sao_paulo"]
    assert r.trailer.compression_codec == 1 and r.trailer.num_data_index_levels == 1
    assert r.meta_block(b"bloomFilter") == r.meta_block("bloomFilter") and r.meta_block("nope") is None


def test_hfile_blocks_of_log_files_keep_their_header():
    data = _member(V9, lambda n: "/files/." in n and ".log." in n and not n.endswith("_0-0-0"))
    blocks = [b for b in read_log_file(data) if b.block_type == BlockType.HFILE_DATA]
    assert blocks
    for b in blocks:
        assert b.instant and b.avro_schema["name"] == "HoodieMetadataRecord"
        assert list(hfile_block_items(b)) == list(b.hfile())
    deletes = [b for b in read_log_file(_member(V9, lambda n: ".log." in n)) if b.block_type != BlockType.HFILE_DATA]
    for b in deletes:
        with pytest.raises(LogBlockError):
            b.hfile()


def test_a_damaged_hfile_block_names_the_log_file_and_the_block():
    data = _member(V9, lambda n: "/files/." in n and ".log." in n and not n.endswith("_0-0-0"))
    b = next(b for b in read_log_file(data) if b.block_type == BlockType.HFILE_DATA)
    content = bytearray(b.content)
    content[60] ^= 0xFF                 # inside the first block's compressed entries
    [bad] = read_log_file(encode_block(BlockType.HFILE_DATA, b.header, bytes(content)))
    with pytest.raises(CorruptFileError) as err:
        list(bad.hfile("t/.hoodie/metadata/files/.files-0000-0_1.log.1_0-1-0"))
    assert err.value.path == "t/.hoodie/metadata/files/.files-0000-0_1.log.1_0-1-0"
    assert "HFILE_DATA block at offset 0" in str(err.value)


# -- hudi-rs's test files -------------------------------------------------------------------------
def _rs(name: str) -> HFileReader:
    return HFileReader((HFILES / f"hudi_1_0_hbase_{name}.hfile").read_bytes(), name=name)


@pytest.mark.parametrize("name,count,block_kb", [("2_4_9_16KB_NONE_5000", 5000, 16), ("2_4_9_16KB_GZ_20000", 20000, 16)])
def test_hudi_rs_files_read_with_their_keys_and_values(name, count, block_kb):
    r = _rs(name)
    items = check_reads(r)
    assert items == [(b"hudi-key-%09d" % i, b"hudi-value-%09d" % i) for i in range(count)]
    assert r.num_data_blocks > 1 and r.file_info[b"hudi_hfile_testing.custom_key"] == b"hudi_custom_value"
    assert r.get(b"hudi-key-000000100") == b"hudi-value-000000100"
    for absent in (b"aaa", b"hudi-key-nonexistent", b"hudi-key-999999999", b"hudi-key-000000100a"):
        assert r.get(absent) is None
    assert [k for k, _ in r.items(prefix=b"hudi-key-00000010")] == [b"hudi-key-%09d" % i for i in range(100, 110)]
    assert [k for k, _ in r.items(prefix=b"nonexistent-prefix-")] == []
    assert r.trailer.compression_codec == (2 if "NONE" in name else 1)


def test_hudi_rs_file_without_entries():
    r = _rs("2_4_9_no_entry")
    assert len(r) == 0 and list(r) == [] and r.get(b"hudi-key-000000000") is None and r.data_index == []
    assert b"hfile.LASTKEY" not in r.file_info and r.file_info[b"schema"].startswith(b'{"type":"record"')
    assert r.trailer.first_data_block_offset == r.trailer.last_data_block_offset == -1


def test_hudi_rs_file_with_keys_stored_many_times():
    r = _rs("2_4_9_16KB_GZ_200_20_non_unique")
    items = check_reads(r, unique=False)
    assert len(items) == 4200
    expected = [(b"hudi-key-%09d" % i, v) for i in range(200)
                for v in [b"hudi-value-%09d" % i] + [b"hudi-value-%09d_%d" % (i, j) for j in range(20)]]
    assert items == expected
    assert r.get(b"hudi-key-000000005") == b"hudi-value-000000005"    # the first of them, as hudi-rs finds
    assert len(list(r.items(prefix=b"hudi-key-000000005"))) == 21


def test_hudi_rs_file_with_fake_first_keys():
    r = _rs("2_4_13_16KB_GZ_20000_fake_first_key")
    items = check_reads(r)
    assert items == [(b"hudi-key-%09d-abcdefghij" % i, b"hudi-value-%09d" % i) for i in range(20000)]
    keys = [k for _, _, k in r.data_index]
    assert b"hudi-key-00000047" in keys            # the index holds a key shorter than the block's first
    assert r.get(b"hudi-key-000000099-abcdefghij") == b"hudi-value-000000099"
    assert r.get(b"hudi-key-000000470") is None     # between that key and the block's first key
    assert list(r.items(start=b"hudi-key-000000470"))[0][0] == b"hudi-key-000000470-abcdefghij"


def test_hudi_rs_file_with_a_three_level_index():
    r = _rs("2_4_13_1KB_GZ_10000_large_keys_deep_index")
    assert r.trailer.num_data_index_levels == 3 and r.num_data_blocks > r.trailer.data_index_count
    prefix = b"hudi-key-" + b"a" * 100 + b"-"
    items = check_reads(r)
    assert items == [(prefix + b"%09d" % i, b"hudi-value-%09d" % i) for i in range(10000)]
    assert r.get(prefix + b"000005340") == b"hudi-value-000005340"
    assert r.get(prefix + b"000009999") == b"hudi-value-000009999" and r.get(prefix + b"000009999a") is None


def test_crc32c():
    assert _crc32c_py(b"123456789") == crc32c(b"123456789") == 0xE3069283
    data = (HFILES / "hudi_1_0_hbase_2_4_9_no_entry.hfile").read_bytes()
    assert _crc32c_py(data) == crc32c(data)


def test_hbase_checksums_are_verified_even_without_the_fast_crc32c(monkeypatch):
    import lakesdk.format.hfile as hfile_module
    monkeypatch.setattr(hfile_module, "crc32c", hfile_module._crc32c_py)
    data = bytearray((HFILES / "hudi_1_0_hbase_2_4_9_16KB_NONE_5000.hfile").read_bytes())
    assert len(list(HFileReader(bytes(data)))) == 5000
    data[40] ^= 1                                   # a key of the first block: only the checksum tells
    with pytest.raises(CorruptFileError, match="checksum"):
        list(HFileReader(bytes(data), name="f.hfile"))


# -- the writer ------------------------------------------------------------------------------------
def test_vint_is_hadoops():
    assert [vint(n) for n in (0, 127, -112, 128, 131, 256, -113)] == [
        b"\x00", b"\x7f", b"\x90", b"\x8f\x80", b"\x8f\x83", b"\x8e\x01\x00", b"\x87\x70"]


KEYS = st.one_of(st.binary(max_size=12), st.binary(min_size=120, max_size=300))
VALUES = st.one_of(st.just(b""), st.binary(max_size=60), st.binary(min_size=600, max_size=3000))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(keys=st.lists(KEYS, unique=True, max_size=80), data=st.data(),
       block_size=st.sampled_from([64, 300, 4096, 1024 * 1024]), compression=st.sampled_from(["GZ", "NONE"]),
       checksum=st.sampled_from(["crc32", "none"]),
       info=st.dictionaries(st.text(min_size=1, max_size=10), st.binary(max_size=30), max_size=3),
       meta=st.dictionaries(st.binary(min_size=1, max_size=10), st.binary(max_size=3000), max_size=3))
def test_the_writer_round_trips(keys, data, block_size, compression, checksum, info, meta):
    keys.sort()
    items = [(k, data.draw(VALUES)) for k in keys]
    blob = write_hfile(items, file_info=info, meta_blocks=meta, block_size=block_size, compression=compression,
                       checksum=checksum, create_time_ms=7)
    r = HFileReader(blob)
    assert check_reads(r) == items
    assert {k.encode(): v for k, v in info.items()}.items() <= r.file_info.items()
    assert set(FILE_INFO_KEYS) - ({b"hfile.LASTKEY"} if not items else set()) <= set(r.file_info)
    assert r.file_info[b"hfile.CREATE_TIME_TS"] == (7).to_bytes(8, "big")
    assert sorted(r.meta_block_names) == sorted(meta) and all(r.meta_block(n) == v for n, v in meta.items())
    if items:
        big = sum(len(k) + len(v) + 21 for k, v in items) > block_size
        assert (r.num_data_blocks > 1) == (big and len(items) > 1)
        assert r.trailer.uncompressed_data_index_size == sum(len(k) + len(v) + 21 for k, v in items)
    assert (r.trailer.compression_codec, r.trailer.minor_version) == ({"GZ": 1, "NONE": 2}[compression], 3)
    assert {h[4] for h in block_headers(blob)} == {1 if checksum == "crc32" else 0}


def test_the_writer_refuses_keys_out_of_order():
    w = HFileWriter()
    w.append(b"b", b"1")
    for key in (b"a", b"b", b""):
        with pytest.raises(KeyOrderError):
            w.append(key, b"2")
    with pytest.raises(InvalidKeyValueError):
        w.append(b"c" * 40000, b"")
    with pytest.raises(TypeError):
        w.append("c", b"")   # type: ignore[arg-type]
    assert [k for k, _ in HFileReader(w.finish())] == [b"b"]
    with pytest.raises(OptionsError):
        w.append(b"d", b"")
    with pytest.raises(UnsupportedFileFeatureError) as err:
        HFileWriter(compression="LZ4")
    assert err.value.feature == "compression LZ4"
    for bad in ({"checksum": "crc64"}, {"block_size": 0}):
        with pytest.raises(OptionsError):
            HFileWriter(**bad)


def block_headers(data: bytes) -> list[tuple]:
    """(magic, on-disk size, uncompressed size, previous offset, checksum type, bytes per
    checksum, on-disk data size with header, offset) of every block, walking the file."""
    out, pos = [], 0
    while pos < len(data) - TRAILER_SIZE:
        h = struct.unpack_from(">8siiqBii", data, pos)
        out.append((*h, pos))
        pos += 33 + h[1]
    return out


def block_data(data: bytes, h: tuple) -> bytes:
    raw = data[h[7] + 33:h[7] + h[6]]
    return zlib.decompress(raw, 47) if HFileReader(data).trailer.compression_codec == 1 else raw


def _hudi_written(partition: str) -> HFileReader:
    """The base file of the partition of the v9 table's MDT holding the most entries."""
    with zipfile.ZipFile(V9) as zf:
        files = [HFileReader(zf.read(n), name=n) for n in _mdt_members(V9) if f"/{partition}/" in n
                 and n.endswith(".hfile")]
    return max(files, key=len)


@pytest.mark.parametrize("partition", ["files", "record_index", "partition_stats", "column_stats",
                                       "secondary_index_txn_date_idx"])
def test_the_writer_writes_the_layout_hudi_writes(partition):
    """A Hudi 1.1 MDT base file, rewritten from its entries, file info and bloom filter."""
    hudi = _hudi_written(partition)
    mine = HFileReader(write_hfile(
        list(hudi), file_info={k: v for k, v in hudi.file_info.items() if k not in FILE_INFO_KEYS},
        meta_blocks={n: hudi.meta_block(n) for n in hudi.meta_block_names}, compression="GZ"))
    a, b = hudi.trailer, mine.trailer
    assert a.fields == b.fields
    same = ("uncompressed_data_index_size", "total_uncompressed_bytes", "data_index_count", "meta_index_count",
            "entry_count", "num_data_index_levels", "first_data_block_offset", "last_data_block_offset",
            "comparator", "compression_codec", "major_version")
    assert {f: getattr(a, f) for f in same} == {f: getattr(b, f) for f in same}
    assert set(hudi.file_info) == set(mine.file_info)
    for k, v in hudi.file_info.items():
        if k == b"hfile.LASTKEY":     # Hudi 1.1: [row_len][row]; HBase and lakesdk: the whole KeyValue key
            assert mine.file_info[k] == v + b"\x00\x7f" + b"\xff" * 7 + b"\x04"
        elif k != b"hfile.CREATE_TIME_TS":
            assert mine.file_info[k] == v, k
    ours, theirs = block_headers(mine._data), block_headers(hudi._data)
    assert [h[0] for h in ours] == [h[0] for h in theirs] == [b"DATABLK*", b"METABLKc", b"IDXROOT2", b"IDXROOT2",
                                                             b"FILEINF2"]
    for o, t in zip(ours, theirs):
        assert (o[3], o[5]) == (t[3], t[5]) == (-1, 16384)         # previous offset, bytes per checksum
        assert o[1] - (o[6] - 33) == t[1] - (t[6] - 33)             # as many checksum bytes
        if o[0] in (b"DATABLK*", b"METABLKc"):
            assert block_data(mine._data, o) == block_data(hudi._data, t)
    assert [k for _, _, k in mine.data_index] == [k for _, _, k in hudi.data_index]


def test_the_writer_writes_the_block_kinds_and_file_info_hbase_writes():
    name = next(n for n in _mdt_members(V8) if "/files/" in n and n.endswith(".hfile"))
    hbase = HFileReader(_member(V8, lambda n: n == name))
    mine = HFileReader(write_hfile(
        list(hbase), file_info={k: v for k, v in hbase.file_info.items() if k not in FILE_INFO_KEYS},
        meta_blocks={n: hbase.meta_block(n) for n in hbase.meta_block_names}))
    assert [h[0] for h in block_headers(mine._data)] == [h[0] for h in block_headers(hbase._data)]
    assert list(mine.file_info) == list(hbase.file_info)      # both sorted
    assert mine.file_info[b"hfile.LASTKEY"] == hbase.file_info[b"hfile.LASTKEY"]
    assert set(hbase.trailer.fields) - set(mine.trailer.fields) == {4}   # HBase's total_uncompressed_bytes
    assert hbase.trailer.minor_version == mine.trailer.minor_version == 3


def test_a_multi_block_file_links_its_data_blocks():
    blob = write_hfile([(b"k%04d" % i, b"v" * 50) for i in range(200)], block_size=1000, compression="NONE")
    data = [h for h in block_headers(blob) if h[0] == b"DATABLK*"]
    assert len(data) > 5 and [h[3] for h in data] == [-1] + [h[7] for h in data[:-1]]
    r = HFileReader(blob)
    assert [(o, s) for o, s, _ in r.data_index] == [(h[7], 33 + h[1]) for h in data]
    assert r.trailer.last_data_block_offset == data[-1][7]


# -- damaged files ---------------------------------------------------------------------------------
def _writer_file(**options) -> bytes:
    return write_hfile([(b"key-%05d" % i, b"value-%d" % i * (i % 5)) for i in range(300)], file_info={"schema": b"{}"},
                       meta_blocks={"bloomFilter": b"bits" * 40}, block_size=1500, create_time_ms=1, **options)


@lru_cache(maxsize=None)
def seeds() -> dict[str, bytes]:
    return {
        "lakesdk GZ": _writer_file(),
        "lakesdk NONE": _writer_file(compression="NONE"),
        "hudi 1.1": _hudi_written("column_stats")._data,
        "hbase (hudi 1.0)": _member(V8, lambda n: "/files/" in n and n.endswith(".hfile")),
        "hbase non-unique": (HFILES / "hudi_1_0_hbase_2_4_9_16KB_GZ_200_20_non_unique.hfile").read_bytes(),
        "hbase no entry": (HFILES / "hudi_1_0_hbase_2_4_9_no_entry.hfile").read_bytes(),
    }


def answers(data: bytes) -> tuple:
    """What a file answers: its entries, file info, meta blocks and lookups of some keys."""
    r = HFileReader(data)
    items = list(r)
    probes = [k for k, _ in items[::37]] + absent_keys([k for k, _ in items])[:20]
    return items, r.file_info, {n: r.meta_block(n) for n in r.meta_block_names}, {k: r.get(k) for k in probes}


def assert_right_or_refused(damaged: bytes, truth: tuple) -> bool:
    """Opening and reading ``damaged`` raises a typed error naming it, or answers as the intact
    file does: iteration yields a prefix of the entries (all of them if it ends), lookups the
    same values, file info and meta blocks the same.  True when it was refused."""
    items, info, meta, lookups = truth
    refused = False
    try:
        r = HFileReader(damaged, name="damaged.hfile")
        assert r.file_info == info and set(r.meta_block_names) == set(meta)
        for k, v in lookups.items():
            try:
                assert r.get(k) == v
            except CorruptFileError as exc:
                assert exc.path == "damaged.hfile"
                refused = True
        for n, v in meta.items():
            try:
                assert r.meta_block(n) == v
            except CorruptFileError:
                refused = True
        got = []
        try:
            for kv in r:
                got.append(kv)
        except CorruptFileError:
            assert got == items[:len(got)]
            return True
        assert got == items
        return refused
    except (CorruptFileError, UnsupportedFileFeatureError) as exc:
        assert exc.path == "damaged.hfile" and "damaged.hfile" in str(exc)
        return True


@pytest.mark.parametrize("seed", list(seeds()))
def test_truncated_or_extended_files_are_refused(seed):
    data = seeds()[seed]
    cuts = {0, 1, len(data) - 1, len(data) - TRAILER_SIZE, len(data) - TRAILER_SIZE + 9}
    for h in block_headers(data):
        cuts |= {h[7] - 1, h[7], h[7] + 1, h[7] + 33}
    rng = random.Random(seed)
    cuts |= {rng.randrange(len(data)) for _ in range(40)}
    for cut in sorted(c for c in cuts if 0 <= c < len(data)):
        with pytest.raises(CorruptFileError) as err:
            answers_named(data[:cut])
        assert err.value.path == "f.hfile"
    for extra in (b"\x00", b"x" * 100, data[-TRAILER_SIZE:]):
        with pytest.raises(CorruptFileError):
            answers_named(data + extra)


def answers_named(data: bytes) -> None:
    r = HFileReader(data, name="f.hfile")
    list(r)


@pytest.mark.parametrize("seed", ["lakesdk GZ", "lakesdk NONE", "hudi 1.1", "hbase (hudi 1.0)"])
def test_every_single_byte_flip_is_refused_or_harmless(seed):
    """Files with checksums or compression: any byte changed is an error or changes no answer
    (a previous-block offset, a NULL checksum's bytes, the comparator name, ...)."""
    data = seeds()[seed]
    truth = answers(data)
    end = len(data) - TRAILER_SIZE
    trailer_len = data[end + 8] + 10
    harmless = []
    for pos in list(range(0, end, 1 if end < 4000 else 3)) + list(range(end, end + trailer_len)) + [len(data) - 1]:
        damaged = bytearray(data)
        damaged[pos] ^= 0x10 if pos % 2 else 0x01
        if not assert_right_or_refused(bytes(damaged), truth):
            harmless.append(pos)
    if seed.startswith("lakesdk"):      # CRC32 covers every byte of every block
        assert all(pos >= end for pos in harmless)
    assert len(harmless) < len(data) // 20


def retrailered(data: bytes, **changes: int | bytes | None) -> bytes:
    """``data`` with trailer fields replaced (``f7=5``), removed (``f7=None``) or added."""
    r = HFileReader(data)
    t = r.trailer
    values = {1: t.file_info_offset, 2: t.load_on_open_offset, 3: t.uncompressed_data_index_size,
              4: t.total_uncompressed_bytes, 5: t.data_index_count, 6: t.meta_index_count, 7: t.entry_count,
              8: t.num_data_index_levels, 9: t.first_data_block_offset, 10: t.last_data_block_offset,
              11: t.comparator.encode(), 12: t.compression_codec}
    fields = {f: values[f] for f in t.fields}
    for k, v in changes.items():
        fields[int(k[1:])] = v
    proto = b"".join(_field(f, v) for f, v in fields.items() if v is not None)
    head = data[-TRAILER_SIZE:][:8] + _varint(len(proto)) + proto
    return data[:-TRAILER_SIZE] + head + bytes(TRAILER_SIZE - 4 - len(head)) + data[-4:]


@pytest.mark.parametrize("seed", ["lakesdk NONE", "hudi 1.1", "hbase (hudi 1.0)", "hbase non-unique"])
def test_altered_trailer_fields_are_refused_or_harmless(seed):
    data = seeds()[seed]
    truth = answers(data)
    assert retrailered(data) == data
    t = HFileReader(data).trailer
    for field in t.fields:
        for value in (None, 0, 1, 2, 7, 33, 2**31 - 1, 2**63 - 1, 2**64 - 1, -1, b"x"):
            assert_right_or_refused(retrailered(data, **{f"f{field}": value}), truth)
        real = getattr(t, HFileTrailer_fields[field])
        if isinstance(real, int):
            for delta in (-33, -1, 1, 33):
                assert_right_or_refused(retrailered(data, **{f"f{field}": real + delta}), truth)
    for must_fail in ({"f7": t.entry_count + 1}, {"f5": max(t.data_index_count - 1, 0)}, {"f8": 2}, {"f1": None}):
        with pytest.raises(CorruptFileError):
            answers(retrailered(data, **must_fail))


HFileTrailer_fields = {1: "file_info_offset", 2: "load_on_open_offset", 3: "uncompressed_data_index_size",
                       4: "total_uncompressed_bytes", 5: "data_index_count", 6: "meta_index_count", 7: "entry_count",
                       8: "num_data_index_levels", 9: "first_data_block_offset", 10: "last_data_block_offset",
                       11: "comparator", 12: "compression_codec"}


def test_codecs_and_versions_lakesdk_does_not_read_are_named():
    data = seeds()["lakesdk NONE"]
    for codec, name in ((0, "LZO"), (3, "SNAPPY"), (4, "LZ4"), (6, "ZSTD"), (9, "codec #9")):
        with pytest.raises(UnsupportedFileFeatureError) as err:
            HFileReader(retrailered(data, f12=codec), name="x.hfile")
        assert err.value.feature == f"compression {name}" and err.value.path == "x.hfile" and name in str(err.value)
    with pytest.raises(UnsupportedFileFeatureError):
        HFileReader(data[:-3] + b"\x00\x00\x02")
    with pytest.raises(CorruptFileError, match="version 4"):
        HFileReader(data[:-3] + b"\x00\x00\x04")


def test_altered_index_entries_of_a_file_without_checksums_are_refused():
    """Where nothing protects the index's bytes, offsets and sizes that do not point at the
    blocks in order are still refused."""
    data = _writer_file(compression="NONE", checksum="none")
    r = HFileReader(data)
    root = r.trailer.load_on_open_offset + 33
    entries = [(o, s) for o, s, _ in r.data_index]
    assert len(entries) > 3
    pos = root
    for offset, size in entries:
        for new_offset, new_size in [(offset + 1, size), (offset - 1, size), (offset, size + 1), (offset, size - 1),
                                     (offset + 33, size)] + [e for e in entries if e != (offset, size)]:
            damaged = bytearray(data)
            struct.pack_into(">qi", damaged, pos, new_offset, new_size)
            with pytest.raises(CorruptFileError):
                answers(bytes(damaged))
        pos += 12 + 1 + data[pos + 12]


# -- another reader reads what the writer writes ---------------------------------------------------
def _rewritten(data: bytes, block_size: int) -> bytes:
    r = HFileReader(data)
    return write_hfile(list(r), file_info={k: v for k, v in r.file_info.items() if k not in FILE_INFO_KEYS},
                       meta_blocks={n: r.meta_block(n) for n in r.meta_block_names}, block_size=block_size)


@pytest.mark.interop
@pytest.mark.parametrize("block_size", [64, 1024 * 1024])
def test_hudi_rs_lists_a_table_from_hfiles_lakesdk_wrote(tmp_path, block_size):
    """The ``hudi`` reader lists a version 9 table's files from its metadata table: with every
    HFile of the ``files`` partition (base files and log blocks) rewritten by lakesdk, in one
    block or one per entry, it reads the same rows; with the base files damaged it fails."""
    from .. import helpers
    with zipfile.ZipFile(V9) as zf:
        zf.extractall(tmp_path)
    table = helpers.zipped_table(tmp_path, "")
    before = helpers.canon(helpers.hudi_read(table), ["txn_id", "region", "amount"])
    files = Path(table) / ".hoodie/metadata/files"
    originals = {p: p.read_bytes() for p in sorted(files.iterdir()) if p.name.endswith(".hfile") or ".log." in p.name}
    rewritten = 0
    for p, data in originals.items():
        if p.name.endswith(".hfile"):
            p.write_bytes(_rewritten(data, block_size))
            rewritten += 1
            continue
        parts = []
        for b in read_log_file(data):
            if b.block_type == BlockType.HFILE_DATA:
                parts.append(encode_block(b.block_type, b.header, _rewritten(b.content, block_size), b.footer))
                rewritten += 1
            else:
                parts.append(data[b.offset:b.offset + b.size])
        p.write_bytes(b"".join(parts))
    assert rewritten > 5
    assert helpers.canon(helpers.hudi_read(table), ["txn_id", "region", "amount"]) == before
    for p in originals:
        if p.name.endswith(".hfile"):
            p.write_bytes(b"not an hfile" * 500)
    with pytest.raises(Exception, match="HFile"):
        helpers.hudi_read(table)


class _Hudi11LastKey(HFileWriter):
    """Writes ``hfile.LASTKEY`` as Hudi 1.1 does: ``[row_len][row]``, and no bytes for the key b""."""

    def _file_info(self) -> bytes:
        last = self._last
        self._info[b"hfile.LASTKEY"] = len(last).to_bytes(2, "big") + last if last else b""
        self._last = None
        return super()._file_info()


@pytest.mark.parametrize("items", [[(b"", b"v")], [], [(b"a", b"1"), (b"b", b"")]])
def test_hudi_1_1s_last_key_reads(items):
    """Hudi 1.1 writes ``hfile.LASTKEY`` without the KeyValue fields, and as no bytes at all for
    the key b"" (and for a file without entries)."""
    w = _Hudi11LastKey()
    for k, v in items:
        w.append(k, v)
    r = HFileReader(w.finish())
    assert check_reads(r) == items and r.file_info[b"hfile.LASTKEY"] == (b"\x00\x01b" if len(items) == 2 else b"")
