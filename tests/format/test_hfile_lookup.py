"""Point lookups that read what they touch (lakesdk.format.hfile_lookup, byte_ranges, log_ranges):
many keys found at once answer as one-by-one lookups do, an HFile read by byte ranges answers
as one read whole, the numpy parse of a large data index gives the entry-by-entry parse's index,
a lookup reads the blocks of its keys and not the file, damage is an error or a right answer,
and a log file's blocks found by their framing are the blocks of a whole read.  No Spark.
"""

from __future__ import annotations

import random

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lakesdk.format.hfile_index as hfile_index
from lakesdk.exceptions import CorruptFileError
from lakesdk.format.byte_ranges import ByteRanges
from lakesdk.format.hfile import TRAILER_SIZE, HFileReader
from lakesdk.format.hfile_index import root_index_arrays
from lakesdk.format.hfile_lookup import clear_index_cache, get_many, open_indexed
from lakesdk.format.hfile_writer import write_hfile
from lakesdk.format.log_block import (
    BlockType,
    HeaderKey,
    encode_block,
    encode_delete_block,
    encode_rollback_block,
    read_log_file,
)
from lakesdk.format.log_ranges import scan_log_ranges

from .test_hfile import absent_keys

# record keys: UTF-8 text of one length (uuids, fixed-width ids) or of several
UNIFORM = st.lists(st.text("0123456789abcdef-", min_size=12, max_size=12), unique=True, min_size=1, max_size=1500)
VARIED = st.lists(st.text(st.characters(min_codepoint=1, max_codepoint=0x2FF), min_size=1, max_size=30), unique=True,
                  min_size=1, max_size=1500)


def _file(keys: list[bytes], *, block_size: int = 64, compression: str = "GZ", value: bytes = b"v") -> bytes:
    return write_hfile([(k, value + k) for k in keys], file_info={"schema": b"{}"}, block_size=block_size,
                       compression=compression, create_time_ms=1)


def _python_index(data: bytes, monkeypatch) -> list:
    with monkeypatch.context() as m:
        m.setattr(hfile_index, "FAST_INDEX_MIN", 1 << 40)
        return HFileReader(data).data_index


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                                                   HealthCheck.function_scoped_fixture])
@given(texts=st.one_of(UNIFORM, VARIED), compression=st.sampled_from(["GZ", "NONE"]),
       block_size=st.sampled_from([1, 64, 700]), seed=st.integers(0, 2**16))
def test_many_keys_found_at_once_answer_as_lookups_one_by_one(texts, compression, block_size, seed, monkeypatch):
    keys = sorted(t.encode("utf-8") for t in texts)
    data = _file(keys, block_size=block_size, compression=compression)
    whole = HFileReader(data)
    ranged = HFileReader(source=ByteRanges.of_bytes(data))
    assert ranged.data_index == whole.data_index == _python_index(data, monkeypatch)
    probes = sorted(set(random.Random(seed).sample(keys, min(len(keys), 200)) + absent_keys(keys)[:100]))
    want = {k: whole.get(k) for k in probes}
    assert get_many(ranged, probes) == get_many(whole, probes) == {k: v for k, v in want.items() if v is not None}
    assert list(ranged) == list(whole)


@pytest.mark.parametrize("keys", [
    [b"%036d" % i for i in range(3000)],                                  # one length: a table of entries
    [b"%d" % i for i in range(3000)],                                     # several lengths: found by suffix
    [b"k\x00%05d" % i for i in range(3000)],                              # a NUL byte: entry by entry
    [b"x" * 120 + b"%05d" % i for i in range(3000)],                      # keys of two-byte lengths
])
def test_the_numpy_index_is_the_entry_by_entry_index(keys, monkeypatch):
    data = _file(sorted(keys))
    r = HFileReader(data)
    assert r.data_index == _python_index(data, monkeypatch)
    assert len(r.data_index) >= hfile_index.FAST_INDEX_MIN
    fast = b"\x00" not in keys[0] and len(keys[0]) < 100
    assert ("_fast" in r.__dict__) == fast
    probes = keys[::97] + [b"nope", b"\xff"]
    assert get_many(r, sorted(probes)) == {k: b"v" + k for k in probes if k in set(keys)}


def test_an_index_that_does_not_chain_is_parsed_entry_by_entry():
    """A row holding the bytes of the KeyValue suffix: the entries found by the suffix do not
    chain, so the index is parsed entry by entry, and reads the same."""
    from lakesdk.format.hfile import KV_SUFFIX
    odd = b"00999" + KV_SUFFIX
    keys = sorted([b"%05d" % i for i in range(2000)] + [odd])
    data = _file(keys)
    r = HFileReader(data)
    assert "_fast" not in r.__dict__ and odd in [k for _, _, k in r.data_index]
    assert get_many(r, [keys[5], odd]) == {keys[5]: b"v" + keys[5], odd: b"v" + odd}
    assert root_index_arrays(b"\x00" * 40, r.trailer) is None


def test_a_lookup_reads_the_blocks_of_its_keys_not_the_file():
    keys = [b"%036d" % i for i in range(20000)]
    data = _file(keys, block_size=4096)
    src = ByteRanges.of_bytes(data)
    r = HFileReader(source=src)
    opened = src.bytes_read
    load_on_open = len(data) - r.trailer.load_on_open_offset
    assert opened <= load_on_open + TRAILER_SIZE
    probes = [keys[10], keys[9000], keys[19999]]
    assert get_many(r, probes) == {k: b"v" + k for k in probes}
    blocks = {i for i, (_, _, first) in enumerate(r.data_index) for k in probes if first <= k}
    assert src.bytes_read - opened <= 3 * 4096 + 3 * 200
    assert src.bytes_read < len(data) // 4 and len(blocks) > 3


@pytest.mark.parametrize("compression", ["GZ", "NONE"])
def test_damage_is_refused_or_harmless_when_many_keys_are_found(compression):
    keys = [b"%012d" % i for i in range(1500)]
    data = _file(keys, compression=compression)
    probes = keys[::7] + absent_keys(keys)[::50]
    probes.sort()
    truth = get_many(HFileReader(data), probes)
    rng = random.Random(compression)
    end = len(data) - TRAILER_SIZE
    for pos in rng.sample(range(end), 400):
        damaged = bytearray(data)
        damaged[pos] ^= 1 << rng.randrange(8)
        for source in (None, ByteRanges.of_bytes(bytes(damaged))):
            try:
                r = HFileReader(bytes(damaged) if source is None else None, name="d.hfile", source=source)
                assert get_many(r, probes) == truth
            except CorruptFileError as exc:
                assert exc.path == "d.hfile"


def test_an_opened_index_is_kept_while_the_file_is_the_same(tmp_path):
    from lakesdk.storage import Storage
    storage = Storage(str(tmp_path))
    clear_index_cache()
    first = [b"%036d" % i for i in range(2000)]
    storage.write("f.hfile", _file(first))

    def lookup(keys):
        with ByteRanges.of_storage(storage, "f.hfile") as src:
            r = open_indexed(src, ("f", 0, src.size), name="f.hfile")
            return r, get_many(r, keys)
    r1, got = lookup(first[:3])
    assert got == {k: b"v" + k for k in first[:3]}
    r2, _ = lookup(first[:3])
    assert r2 is not r1 and r2.__dict__["_fast"] is r1.__dict__["_fast"]       # the parsed index, kept
    second = [b"%036d" % (i + 7) for i in range(2000)]      # written again under the same name: other keys
    storage.write("f.hfile", _file(second, value=b"w"))
    r3, got = lookup([second[0], first[0]])
    assert got == {second[0]: b"w" + second[0]} and r3.__dict__["_fast"] is not r1.__dict__["_fast"]
    clear_index_cache()


def _log_file() -> bytes:
    head = {HeaderKey.INSTANT_TIME: "001", HeaderKey.SCHEMA: "{" + "x" * 100_000 + "}"}   # a header past the first read
    hfile = _file([b"%05d" % i for i in range(500)])
    deletes = encode_delete_block(pa.table({"_hoodie_record_key": ["a", "b"], "_hoodie_partition_path": ["", ""]}),
                                  {HeaderKey.INSTANT_TIME: "002"})
    return encode_block(BlockType.HFILE_DATA, head, hfile) + deletes + encode_rollback_block("002", "003") + \
        encode_block(BlockType.HFILE_DATA, {HeaderKey.INSTANT_TIME: "004"}, _file([b"z"]))


def test_a_log_files_blocks_found_by_their_framing_are_those_of_a_whole_read():
    data = _log_file()
    whole = read_log_file(data)
    ranged = scan_log_ranges(ByteRanges.of_bytes(data))
    assert ranged is not None and len(ranged) == len(whole) == 4
    for (b, window), w in zip(ranged, whole):
        assert (b.block_type, b.header, b.footer, b.offset, b.size) == (w.block_type, w.header, w.footer, w.offset,
                                                                        w.size)
        if w.block_type == BlockType.HFILE_DATA:
            assert window is not None and b.content == b"" and window.read(0, window.size) == w.content
            assert list(HFileReader(source=window)) == list(w.hfile())
        else:
            assert window is None and b.content == w.content


@pytest.mark.parametrize("cut", [1, 20, 60_000, 100_010, -30, -9, -1])
def test_a_log_file_with_a_corrupt_block_is_read_whole(cut):
    data = _log_file()
    damaged = data[:cut] + data[cut + 1:] if cut > 0 else data[:cut]
    assert scan_log_ranges(ByteRanges.of_bytes(damaged)) is None


@settings(max_examples=30, deadline=None)
@given(entries=st.dictionaries(st.text(min_size=0, max_size=20),
                               st.tuples(st.sampled_from(["", "p=a"]), st.sampled_from(["f-0", "5f0c2a8e-91a4-4b6f-9f0e-2b8a1c3d4e5f-1"]),
                                         st.integers(0, 2**41)), max_size=30),
       blank=st.booleans(), meta=st.booleans(), version=st.sampled_from([8, 9]))
def test_record_index_values_decoded_once_per_location_are_decoded_as_each(entries, blank, meta, version):
    """A value of the record index decoded once for the keys of its location, in lookups and in
    whole reads, is what decoding each value gives: lakesdk's values (the key in the value),
    Hudi's (the key blank), and values whose meta fields are set (decoded one by one)."""
    import io

    import fastavro

    from lakesdk.format.metadata_records import _parsed, decode_record, record_schema_json
    from lakesdk.format.record_index import IndexEntry
    from lakesdk.read.record_lookup import _location, decode_records
    schema = record_schema_json(version)
    items = []
    for k, loc in sorted(entries.items()):
        rec = IndexEntry(*loc).as_record("" if blank else k)
        if meta:
            rec = {**rec, "_hoodie_record_key": k}
        buf = io.BytesIO()
        fastavro.schemaless_writer(buf, _parsed(schema), rec)
        items.append((k.encode("utf-8"), buf.getvalue()))
    files = {"key": "~p", "type": 2, "filesystemMetadata": {"a.parquet": {"size": 3, "isDeleted": False}}}
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, _parsed(schema), files)
    items.append((b"~p", buf.getvalue()))            # a files record among them: decoded as it is
    each = [decode_record(v, schema, key=k, path="u") for k, v in items]
    assert list(decode_records(items, schema, "u")) == each
    cache: dict = {}
    assert [_location(v, schema, k, "u", cache) for k, v in items] == [r.location for r in each]
