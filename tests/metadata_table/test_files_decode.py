"""The ``files`` partition's records decoded without fastavro (:func:`decode_record`'s path for
file and partition lists) give exactly what fastavro gives, and bytes it does not take (other
records, damaged bytes) still go to fastavro."""

from __future__ import annotations

import io

import fastavro
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lakesdk.exceptions import CorruptFileError
from lakesdk.format.metadata_records import (
    _decode_avro,
    _decode_file_list,
    _file_list_shape,
    _parsed,
    decode_record,
    record_schema_json,
)

NAMES = st.text(min_size=0, max_size=90)
ENTRIES = st.dictionaries(NAMES, st.fixed_dictionaries({"size": st.integers(-2**63, 2**63 - 1),
                                                         "isDeleted": st.booleans()}), max_size=12)
META = st.one_of(st.none(), st.text(max_size=8))


def _encode(record: dict, schema_json: str) -> bytes:
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, _parsed(schema_json), record)
    return buf.getvalue()


def _same(value: bytes, schema_json: str, key: bytes | None) -> None:
    try:
        want = _decode_avro(value, schema_json, key=key, path="f")
    except CorruptFileError:
        with pytest.raises(CorruptFileError):
            decode_record(value, schema_json, key=key, path="f")
        return
    got = decode_record(value, schema_json, key=key, path="f")
    assert got == want
    assert list((got.raw or {}).items()) == list((want.raw or {}).items())


@pytest.mark.parametrize("version", [8, 9])
def test_the_schemas_lakesdk_writes_take_the_fast_path(version):
    assert _file_list_shape(record_schema_json(version)) is not None


@settings(max_examples=150, deadline=None, database=None, derandomize=True)
@given(files=st.one_of(st.none(), ENTRIES), typ=st.sampled_from([1, 2, 3, -7, 2**31 - 1]), key=NAMES,
       meta=META, version=st.sampled_from([8, 9]), hfile_key=st.booleans())
def test_file_lists_decode_as_fastavro_decodes_them(files, typ, key, meta, version, hfile_key):
    schema_json = record_schema_json(version)
    value = _encode({"key": key, "type": typ, "filesystemMetadata": files, "_hoodie_commit_time": meta},
                    schema_json)
    assert _decode_file_list(value, _file_list_shape(schema_json)) is not None     # not by fastavro
    _same(value, schema_json, key.encode("utf-8") if hfile_key else None)


@settings(max_examples=150, deadline=None, database=None, derandomize=True)
@given(files=ENTRIES, key=NAMES, data=st.data())
def test_damaged_file_lists_read_as_fastavro_reads_them(files, key, data):
    """Bytes cut, changed or added: the same record or the same typed error as fastavro's."""
    schema_json = record_schema_json()
    value = bytearray(_encode({"key": key, "type": 2, "filesystemMetadata": files}, schema_json))
    how = data.draw(st.sampled_from(["cut", "flip", "append"]))
    if how == "cut":
        value = value[:data.draw(st.integers(0, len(value) - 1))]
    elif how == "flip":
        at = data.draw(st.integers(0, len(value) - 1))
        value[at] = data.draw(st.integers(0, 255))
    else:
        value += bytes(data.draw(st.binary(min_size=1, max_size=3)))
    _same(bytes(value), schema_json, key.encode("utf-8"))


def test_a_map_written_in_blocks_with_their_sizes_decodes_as_fastavro_decodes_it():
    """Avro lets a writer give a map's blocks as a negative count and their byte size."""
    schema_json = record_schema_json()
    head = _encode({"key": "p", "type": 2, "filesystemMetadata": None}, schema_json)
    entries = [("a.parquet", 10, False), ("b.parquet", 300, True), (".c.log.1_0-0-0", 2**40, False)]
    blocks = io.BytesIO()
    fastavro.schemaless_writer(blocks, {"type": "long"}, -2)     # two entries, then their byte size
    first = _encode_entries(entries[:2])
    fastavro.schemaless_writer(blocks, {"type": "long"}, len(first))
    blocks.write(first)
    fastavro.schemaless_writer(blocks, {"type": "long"}, 1)
    blocks.write(_encode_entries(entries[2:]))
    blocks.write(b"\x00")
    at = head.index(b"\x00", len(head) - 5)       # the null branch of filesystemMetadata, then 4 nulls
    value = head[:at] + b"\x02" + blocks.getvalue() + head[at + 1:]
    assert _decode_file_list(value, _file_list_shape(schema_json)) is not None
    got = decode_record(value, schema_json, key=b"p")
    assert got == _decode_avro(value, schema_json, key=b"p", path="f")
    assert {n: (e.size, e.deleted) for n, e in (got.files or {}).items()} == {n: (s, d) for n, s, d in entries}


def _encode_entries(entries: list[tuple[str, int, bool]]) -> bytes:
    out = io.BytesIO()
    for name, size, deleted in entries:
        fastavro.schemaless_writer(out, "string", name)
        fastavro.schemaless_writer(out, "long", size)
        fastavro.schemaless_writer(out, "boolean", deleted)
    return out.getvalue()


def test_other_records_are_decoded_by_fastavro():
    schema_json = record_schema_json()
    stats = {"fileName": "f.parquet", "columnName": "c", "minValue": None, "maxValue": None, "valueCount": 1,
             "nullCount": 0, "totalSize": 3, "totalUncompressedSize": 3, "isDeleted": False}
    value = _encode({"key": "k", "type": 3, "filesystemMetadata": None, "ColumnStatsMetadata": stats}, schema_json)
    got = decode_record(value, schema_json, key=b"k")
    assert got == _decode_avro(value, schema_json, key=b"k", path="f")
    assert got.column_stats is not None and got.column_stats.file_name == "f.parquet"


def test_a_files_base_file_is_decoded_once_per_content(tmp_path, monkeypatch):
    """A process decodes the ``files`` partition's base file once (a plan of a large table
    otherwise spends most of its listing there); a new base file (a compaction) is decoded."""
    import pyarrow as pa

    import lakesdk as lk
    from lakesdk.read import metadata_table as mt
    lake = lk.Lake(str(tmp_path), options=lk.TableOptions(engine="local", metadata=True, metadata_compact_every=2))
    t = lake.create_table("t", key="id", partition_by="p", ordering="ts")

    def write(i: int) -> None:
        t.upsert(pa.table({"id": [i, 10 + i], "p": ["a", "b"], "ts": [i, i]}))

    def listing() -> list[mt.PartitionListing]:
        return list(mt.MetadataTableReader(t.storage, t.timeline).listings())
    for i in range(3):
        write(i)
    [sl] = mt.MetadataTableReader(t.storage, t.timeline).slices("files")
    assert sl.base_path is not None and sl.base_instant != "00000000000000000"     # compacted
    mt._BASES.clear()
    first = listing()
    decoded: list[bytes | None] = []
    real = mt.decode_record

    def spy(value, schema_json, *, key=None, path="<metadata table>"):
        decoded.append(key)
        return real(value, schema_json, key=key, path=path)
    monkeypatch.setattr(mt, "decode_record", spy)
    assert listing() == first and decoded == []
    write(3)
    write(4)                     # another compaction: a new base file
    assert listing() != first and decoded
    monkeypatch.undo()
    again = listing()
    mt._BASES.clear()
    assert listing() == again


def test_statistics_sought_by_prefix_are_decoded_once_per_content(tmp_path, monkeypatch):
    """The ``column_stats`` records a key index or a skipping read asks of a base file (by key
    prefix) are decoded once per content and prefixes: asked again, nothing is decoded and the
    ranges are the same; after a compaction (a new base file) they are decoded again, and still
    agree with a reader whose cache is empty."""
    import pyarrow as pa

    import lakesdk as lk
    from lakesdk.read import metadata_table as mt
    lake = lk.Lake(str(tmp_path), options=lk.TableOptions(engine="local", metadata=True, metadata_compact_every=2))
    t = lake.create_table("t", key="id", partition_by="p", ordering="ts")

    def write(i: int) -> None:
        t.upsert(pa.table({"id": [i, 10 + i], "p": ["a", "b"], "ts": [i, i]}))

    def ranges(parts: list[str] | None) -> dict:
        return mt.MetadataTableReader(t.storage, t.timeline).column_ranges(["id", "ts"], parts)
    for i in range(3):
        write(i)
    assert any(sl.base_path and sl.base_instant != "00000000000000000"
               for sl in mt.MetadataTableReader(t.storage, t.timeline).slices("column_stats"))   # compacted
    mt._PREFIXED.clear()
    parts = mt.MetadataTableReader(t.storage, t.timeline).partitions()
    assert len(parts) == 2
    scopes: list[list[str] | None] = [None, parts[:1], parts]
    first = [ranges(p) for p in scopes]
    assert all(first) and len(first[1]) < len(first[0])
    decoded: list[int] = []
    real = mt.decode_records

    def spy(items, schema_json, path):
        for rec in real(items, schema_json, path):
            decoded.append(1)
            yield rec
    monkeypatch.setattr(mt, "decode_records", spy)
    assert [ranges(p) for p in scopes] == first and decoded == []
    write(3)
    write(4)                     # another compaction: a new base file
    again = [ranges(p) for p in scopes]
    assert again != first and decoded
    monkeypatch.undo()
    mt._PREFIXED.clear()
    assert [ranges(p) for p in scopes] == again
