"""Log blocks: Hudi-written log files parse exactly, ours parse back, and Hudi's reader reads ours.

No Spark.  The interop tests use the ``hudi`` package (hudi-rs) on copies of the conformance
MOR tables whose log files are replaced by blocks this module wrote.
"""

from __future__ import annotations

import datetime as dt
import decimal
import io
import json
import os
import shutil
import struct
from pathlib import Path

import fastavro
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lakesdk.format.log_block import (
    MAGIC,
    BlockType,
    HeaderKey,
    LogBlock,
    LogBlockError,
    _decode_delete_content,
    _delete_schema,
    encode_avro_data_block,
    encode_block,
    encode_data_block,
    encode_delete_block,
    encode_parquet_data_block,
    encode_rollback_block,
    read_log_file,
    scan_log_file,
)
from lakesdk.format.schema import arrow_to_avro, avro_to_arrow, with_meta_fields

from ..conftest import CONFORMANCE, conformance_table

LOG_FILES = CONFORMANCE / "files" / "log_files"
INSTANT = "20250101000000000"


def conformance_log(kind: str) -> bytes:
    [path] = [p for p in (LOG_FILES / kind).iterdir() if p.name.startswith(".") and ".log." in p.name]
    return path.read_bytes()


def only_block(data: bytes) -> LogBlock:
    blocks, corrupt = scan_log_file(data)
    assert corrupt == 0
    assert len(blocks) == 1
    return blocks[0]


@pytest.fixture(scope="module", autouse=True)
def _needs_corpus():
    if not LOG_FILES.is_dir():
        pytest.skip(f"conformance log files not found at {LOG_FILES}")


# -- the four conformance log files ------------------------------------------------------------
def test_conformance_avro_data_block():
    data = conformance_log("valid_log_avro_data")
    b = only_block(data)
    assert b.block_type is BlockType.AVRO_DATA
    assert (b.offset, b.size, b.format_version) == (0, len(data), 1)
    assert list(b.header) == [HeaderKey.INSTANT_TIME, HeaderKey.SCHEMA]
    assert b.instant == "20250316025828811" and b.target_instant is None and not b.is_rollback
    assert b.footer == {}
    schema = b.avro_schema
    assert schema["name"] == "trips_quickstart_mor_avro_record"
    assert [f["name"] for f in schema["fields"]][:5] == ["_hoodie_commit_time", "_hoodie_commit_seqno",
                                                        "_hoodie_record_key", "_hoodie_partition_path",
                                                        "_hoodie_file_name"]
    t = b.records()
    assert t.schema == avro_to_arrow(schema)
    assert t.to_pylist() == [{
        "_hoodie_commit_time": "20250316025828811", "_hoodie_commit_seqno": "20250316025828811_0_2",
        "_hoodie_record_key": "334e26e9-8355-45cc-97c6-c31daf0df330",
        "_hoodie_partition_path": "city=san_francisco",
        "_hoodie_file_name": "ff32ab89-5ad0-4968-83b4-89a34c95d32f-0",  # the fileId, not a file name
        "ts": 1695159649088, "uuid": "334e26e9-8355-45cc-97c6-c31daf0df330", "rider": "rider-A",
        "driver": "driver-K", "fare": 29.1, "city": "san_francisco"}]
    with pytest.raises(LogBlockError):
        b.delete_records()


def test_conformance_parquet_data_block():
    data = conformance_log("valid_log_parquet_data")
    b = only_block(data)
    assert b.block_type is BlockType.PARQUET_DATA
    assert b.instant == "20250113230424191"
    assert set(b.header) == {HeaderKey.INSTANT_TIME, HeaderKey.SCHEMA}
    assert b.content[:4] == b"PAR1" and b.content[-4:] == b"PAR1"  # a whole Parquet file, no prefix
    t = b.records()
    assert t.num_rows == 1
    row = t.to_pylist()[0]
    assert (row["rider"], row["driver"], row["fare"], row["ts"]) == ("rider-A", "driver-K", 29.1, 1695159649088)
    assert row["_hoodie_commit_seqno"] == "20250113230424191_0_8"
    assert t.column_names == [f["name"] for f in b.avro_schema["fields"]]


DELETED_KEYS = ["e96c4396-3fad-413a-a942-4cb36106d721", "9909a8b1-2d15-4d3d-8ec9-efc48c536a00",
                "334e26e9-8355-45cc-97c6-c31daf0df330"]


def test_conformance_delete_block():
    data = conformance_log("valid_log_delete")
    b = only_block(data)
    assert b.block_type is BlockType.DELETE
    assert b.instant == "20250618054714114"
    assert list(b.header) == [HeaderKey.SCHEMA, HeaderKey.INSTANT_TIME]  # Hudi's header order varies
    assert b.avro_schema["name"] == "v6_trips_8i3d_record"
    keys = b.delete_records()
    assert keys.column_names == ["_hoodie_record_key", "_hoodie_partition_path", "ordering_value"]
    assert keys.column("_hoodie_record_key").to_pylist() == DELETED_KEYS
    assert keys.column("_hoodie_partition_path").to_pylist() == ["city=san_francisco"] * 3
    # Hudi wrote IntWrapper(0), its "no ordering value" marker (union branch 2, bytes 04 00)
    assert keys.column("ordering_value").type == pa.int32()
    assert keys.column("ordering_value").to_pylist() == [0, 0, 0]
    with pytest.raises(LogBlockError):
        b.records()


def test_conformance_rollback_block():
    data = conformance_log("valid_log_rollback")
    b = only_block(data)
    assert b.block_type is BlockType.COMMAND and b.is_rollback
    assert b.header == {HeaderKey.INSTANT_TIME: "20250126040936578", HeaderKey.COMMAND_BLOCK_TYPE: "0",
                        HeaderKey.TARGET_INSTANT_TIME: "20250126040826878"}
    assert b.target_instant == "20250126040826878"
    assert b.content == b"" and b.footer == {} and b.size == len(data) == 105
    assert encode_rollback_block("20250126040826878", "20250126040936578") == data


@pytest.mark.parametrize("kind", ["valid_log_avro_data", "valid_log_parquet_data", "valid_log_delete",
                                  "valid_log_rollback"])
def test_conformance_framing_re_encodes_byte_identical(kind):
    data = conformance_log(kind)
    b = only_block(data)
    assert encode_block(b.block_type, b.header, b.content, b.footer) == data


def test_our_avro_encoding_is_byte_identical_to_hudis():
    data = conformance_log("valid_log_avro_data")
    b = only_block(data)
    ours = encode_avro_data_block(b.records(), b.avro_schema, b.header)
    assert only_block(ours).content == b.content
    assert ours == data  # same header (order and schema text kept), so the whole file matches


def test_our_delete_encoding_is_byte_identical_to_hudis():
    b = only_block(conformance_log("valid_log_delete"))
    keys = b.delete_records()
    header = {HeaderKey.INSTANT_TIME: b.instant}
    assert only_block(encode_delete_block(keys, header)).content == b.content
    # without an ordering value we write Hudi's natural-order marker, IntWrapper(0), as Hudi does
    no_ordering = keys.drop_columns(["ordering_value"])
    assert only_block(encode_delete_block(no_ordering, header)).content == b.content
    all_null = no_ordering.append_column("ordering_value", pa.nulls(3, pa.int64()))
    assert only_block(encode_delete_block(all_null, header)).content == b.content


# -- every data-table log file of the conformance MOR tables ----------------------------------
MOR_ZIPS = ["quickstart_trips_table/mor/avro/v6_trips_8i1u", "quickstart_trips_table/mor/avro/v6_trips_8i3d",
            "sample_table/mor/parquet/v6_complexkeygen_hivestyle", "sample_table/mor/parquet/v6_nonpartitioned",
            "sample_table/mor/parquet/v6_simplekeygen_nonhivestyle",
            "sample_table/mor/parquet/v6_simplekeygen_nonhivestyle_overwritetable",
            "sample_table/mor/parquet/v6_simplekeygen_hivestyle_no_metafields", "sample_table/mor/parquet/v6_empty"]


def data_table_logs(table: Path) -> list[Path]:
    return sorted(p for p in table.rglob(".*.log.*")
                  if ".hoodie" not in p.relative_to(table).parts and "__MACOSX" not in p.parts)


def test_every_conformance_mor_log_file_parses(conformance_dir):
    seen = {}
    for rel in MOR_ZIPS:
        table = Path(conformance_table(conformance_dir, rel))
        timeline = {p.name for p in (table / ".hoodie").iterdir()}
        for log in data_table_logs(table):
            data = log.read_bytes()
            blocks, corrupt = scan_log_file(data)
            assert corrupt == 0, log
            assert blocks and sum(b.size for b in blocks) == len(data), log
            for b in blocks:
                assert b.footer == {}
                assert f"{b.instant}.deltacommit" in timeline, (log, b.instant)
                if b.block_type in (BlockType.AVRO_DATA, BlockType.PARQUET_DATA):
                    rows = b.records()
                    assert rows.num_rows >= 1
                    assert set(rows.column_names) == {f["name"] for f in b.avro_schema["fields"]}
                    assert rows.column("_hoodie_commit_time").to_pylist() == [b.instant] * rows.num_rows
                elif b.block_type is BlockType.DELETE:
                    assert b.delete_records().num_rows >= 1
                seen[b.block_type] = seen.get(b.block_type, 0) + 1
    assert seen == {BlockType.AVRO_DATA: 1, BlockType.DELETE: 1, BlockType.PARQUET_DATA: 4}


# -- round trips ---------------------------------------------------------------------------------
def rich_table() -> pa.Table:
    utc = dt.UTC
    return pa.table({
        "id": pa.array([1, 2, None], pa.int64()),
        "small": pa.array([1, None, -3], pa.int32()),
        "name": ["a", None, "ü€"],
        "ok": [True, False, None],
        "f32": pa.array([1.5, None, -2.0], pa.float32()),
        "f64": [0.1, 1e300, None],
        "ts": pa.array([dt.datetime(2024, 1, 2, 3, 4, 5, 123456, tzinfo=utc), None,
                        dt.datetime(1960, 5, 6, tzinfo=utc)], pa.timestamp("us", tz="UTC")),
        "ts_ms": pa.array([dt.datetime(2024, 1, 2, 3, 4, 5, 123000), None, dt.datetime(1901, 1, 1)],
                          pa.timestamp("ms")),
        "day": pa.array([dt.date(2024, 2, 29), dt.date(1969, 12, 31), None], pa.date32()),
        "price": pa.array([decimal.Decimal("12345.67"), decimal.Decimal("-0.01"), None], pa.decimal128(10, 2)),
        "big": pa.array([decimal.Decimal("-99999999999999999999.123456"), None, decimal.Decimal("0")],
                        pa.decimal128(26, 6)),
        "blob": [b"\x00\xff", None, b""],
        "tags": [["x", None], None, []],
        "attrs": pa.array([[("k", 1)], None, []], pa.map_(pa.string(), pa.int64())),
        "point": [{"x": 1.0, "label": "p"}, None, {"x": None, "label": None}],
    })


def test_avro_data_block_round_trip_rich_types():
    t = rich_table()
    schema = arrow_to_avro(t.schema, "rich")
    data = encode_avro_data_block(t, schema, {HeaderKey.INSTANT_TIME: INSTANT})
    b = only_block(data)
    assert b.block_type is BlockType.AVRO_DATA and b.instant == INSTANT
    assert b.avro_schema == schema
    back = b.records()
    assert back.schema == avro_to_arrow(schema)
    assert back.to_pylist() == t.cast(back.schema).to_pylist()


def test_empty_avro_data_block():
    t = rich_table().slice(0, 0)
    b = only_block(encode_avro_data_block(t, arrow_to_avro(t.schema, "e"), {HeaderKey.INSTANT_TIME: INSTANT}))
    assert b.content == b"\x00\x00\x00\x03\x00\x00\x00\x00"  # version 3, 0 records
    assert b.records().num_rows == 0


def test_parquet_data_block_round_trip_rich_types():
    t = rich_table()
    schema = arrow_to_avro(t.schema, "rich")
    b = only_block(encode_parquet_data_block(t, schema, {HeaderKey.INSTANT_TIME: INSTANT}))
    assert b.block_type is BlockType.PARQUET_DATA and b.instant == INSTANT
    assert b.avro_schema == schema and b.footer == {}
    assert b.content[:4] == b"PAR1" and b.content[-4:] == b"PAR1"   # a whole Parquet file, as Hudi writes
    back = b.records()
    assert back.schema == avro_to_arrow(schema)   # the types the SCHEMA header describes
    assert back.to_pylist() == t.cast(back.schema).to_pylist()
    # the same records as the Avro block of the same table
    avro = only_block(encode_avro_data_block(t, schema, {HeaderKey.INSTANT_TIME: INSTANT})).records()
    assert back.equals(avro)


def test_empty_parquet_data_block_has_empty_content():
    t = rich_table().slice(0, 0)
    schema = arrow_to_avro(t.schema, "e")
    b = only_block(encode_data_block(t, schema, {HeaderKey.INSTANT_TIME: INSTANT}, block_format="parquet"))
    assert b.block_type is BlockType.PARQUET_DATA and b.content == b""   # Hudi writes no file for no records
    assert b.records().schema == avro_to_arrow(schema) and b.records().num_rows == 0


def test_parquet_data_block_matches_columns_by_name_and_truncates_nanoseconds():
    t = pa.table({"extra": [1], "ts": pa.array([1_000_001_999], pa.timestamp("ns")), "name": ["a"]})
    schema = arrow_to_avro(pa.schema([("name", pa.string()), ("ts", pa.timestamp("us")),
                                      ("gone", pa.int64())]), "x")
    back = only_block(encode_parquet_data_block(t, schema, {HeaderKey.INSTANT_TIME: INSTANT})).records()
    assert back.column_names == ["name", "ts", "gone"]
    assert back.to_pylist() == [{"name": "a", "ts": dt.datetime(1970, 1, 1, 0, 0, 1, 1), "gone": None}]


def test_data_block_format_is_checked():
    t = pa.table({"a": [1]})
    with pytest.raises(LogBlockError, match="orc"):
        encode_data_block(t, arrow_to_avro(t.schema, "x"), {HeaderKey.INSTANT_TIME: INSTANT}, block_format="orc")


def test_undecodable_avro_content_raises_a_clear_error():
    t = pa.table({"name": ["abc"]})
    schema = arrow_to_avro(t.schema, "x")
    b = only_block(encode_avro_data_block(t, schema, {HeaderKey.INSTANT_TIME: INSTANT}))
    wrong = {**schema, "fields": [{"name": "name", "type": ["null", "long"]}]}
    bad = LogBlock(b.block_type, {**b.header, HeaderKey.SCHEMA: json.dumps(wrong)}, {}, b.content, 0, b.size)
    with pytest.raises(LogBlockError, match="record 0"):
        bad.records()


def test_avro_data_block_with_meta_fields_and_nanosecond_input():
    t = pa.table({"_hoodie_commit_time": [INSTANT], "_hoodie_commit_seqno": [f"{INSTANT}_0_1"],
                  "_hoodie_record_key": ["k1"], "_hoodie_partition_path": [""], "_hoodie_file_name": ["fid-0"],
                  "ts": pa.array([1_700_000_000_123_456_789], pa.timestamp("ns", tz="UTC")),
                  "extra_not_in_schema": [1]})
    schema = arrow_to_avro(t.schema.remove(t.schema.get_field_index("extra_not_in_schema")), "m")
    schema["fields"] = ([{"name": n, "type": ["null", "string"], "doc": "", "default": None}
                         for n in t.column_names[:5]] + schema["fields"])
    back = only_block(encode_avro_data_block(t, schema, {HeaderKey.INSTANT_TIME: INSTANT})).records()
    assert back.column_names == t.column_names[:6]
    assert back.column("_hoodie_record_key").to_pylist() == ["k1"]
    assert back.column("ts").cast(pa.int64()).to_pylist() == [1_700_000_000_123_456]  # truncated to micros
    assert back.schema == with_meta_fields(avro_to_arrow(schema))


COLUMN_TYPES = {
    "long": (pa.int64(), st.integers(-(2 ** 63), 2 ** 63 - 1)),
    "int": (pa.int32(), st.integers(-(2 ** 31), 2 ** 31 - 1)),
    "double": (pa.float64(), st.floats(allow_nan=False)),
    "string": (pa.string(), st.text(max_size=12)),
    "bool": (pa.bool_(), st.booleans()),
    "binary": (pa.binary(), st.binary(max_size=12)),
    "ts": (pa.timestamp("us", tz="UTC"),
           st.datetimes(min_value=dt.datetime(1800, 1, 1), max_value=dt.datetime(2200, 1, 1),
                        timezones=st.just(dt.UTC))),
    "date": (pa.date32(), st.dates(min_value=dt.date(1, 1, 1))),
    "decimal": (pa.decimal128(12, 3),
                st.decimals(min_value=-(10 ** 9) + 1, max_value=10 ** 9 - 1, places=3, allow_nan=False,
                            allow_infinity=False)),
}


@st.composite
def arrow_tables(draw) -> pa.Table:
    names = draw(st.lists(st.sampled_from(sorted(COLUMN_TYPES)), min_size=1, max_size=5, unique=True))
    n = draw(st.integers(0, 20))
    cols = {}
    for name in names:
        typ, values = COLUMN_TYPES[name]
        cols[name] = pa.array(draw(st.lists(st.none() | values, min_size=n, max_size=n)), typ)
    return pa.table(cols)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(t=arrow_tables())
def test_avro_data_block_round_trip_property(t):
    schema = arrow_to_avro(t.schema, "prop")
    data = encode_avro_data_block(t, schema, {HeaderKey.INSTANT_TIME: INSTANT})
    back = only_block(data).records()
    assert back.num_rows == t.num_rows
    assert back.to_pylist() == t.cast(back.schema).to_pylist()


@pytest.fixture
def record_by_record(monkeypatch):
    """Turns the columnar Avro codec off: the record-at-a-time (fastavro) codec runs."""
    from lakesdk.format import avro_columnar

    def unsupported(*args, **kwargs):
        raise avro_columnar.Unsupported("turned off by the test")

    def off():
        monkeypatch.setattr(avro_columnar, "encode_records", unsupported)
        monkeypatch.setattr(avro_columnar, "decode_records", unsupported)
    return off


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(t=arrow_tables(), struct=st.booleans())
def test_columnar_avro_codec_is_byte_identical_to_record_at_a_time(t, struct):
    """The columnar codec handles every flat type (and records of them) itself, and writes
    and reads exactly the bytes and values the record-at-a-time codec does."""
    from lakesdk.format import avro_columnar
    if struct and t.num_columns:
        t = pa.table({"s": pa.StructArray.from_arrays([c.combine_chunks() for c in t.columns],
                                                         names=t.column_names)})
    schema = arrow_to_avro(t.schema, "prop")
    header = {HeaderKey.INSTANT_TIME: INSTANT}
    stripped = json.loads(json.dumps(schema))
    fast = encode_avro_data_block(t, schema, header)
    b = only_block(fast)
    back = b.records()
    # the columnar decoder took it (no fallback)
    from lakesdk.format.log_data_blocks import _physical, _record_spans, _strip_temporal
    spans = _record_spans(b.content, t.num_rows)
    physical = pa.schema([f.with_type(_physical(f.type)) for f in avro_to_arrow(schema)])
    assert spans is not None
    avro_columnar.decode_records(b.content, spans[0], spans[1], _strip_temporal(stripped), physical)
    import unittest.mock
    with unittest.mock.patch.object(avro_columnar, "encode_records", side_effect=avro_columnar.Unsupported("off")), \
            unittest.mock.patch.object(avro_columnar, "decode_records", side_effect=avro_columnar.Unsupported("off")):
        slow = encode_avro_data_block(t, schema, header)
        assert only_block(slow).records().equals(back)
    assert fast == slow


def test_columnar_avro_decoder_leaves_damage_to_the_record_at_a_time_decoder(record_by_record):
    """A record whose length prefix disagrees with its fields, or a string length running
    past the block: the same errors as before (record by record)."""
    t = pa.table({"name": ["abc", "de"], "n": pa.array([1, 2], pa.int64())})
    schema = arrow_to_avro(t.schema, "x")
    b = only_block(encode_avro_data_block(t, schema, {HeaderKey.INSTANT_TIME: INSTANT}))
    content = bytearray(b.content)
    content[13] = 0x7E      # the first string's length (after its union branch): 63 bytes
    bad = LogBlock(b.block_type, b.header, {}, bytes(content), 0, b.size)
    with pytest.raises(LogBlockError, match="record 0"):
        bad.records()
    record_by_record()
    with pytest.raises(LogBlockError, match="record 0"):
        bad.records()


@pytest.mark.parametrize("values, arrow_type, read_type", [
    ([5, None, -(2 ** 62)], pa.int64(), pa.int64()),
    ([5, 7, 0], pa.int32(), pa.int32()),
    ([1.25, None, -3.0], pa.float64(), pa.float64()),
    ([1.5, 2.0, None], pa.float32(), pa.float32()),
    (["b", "a", None], pa.string(), pa.string()),
    ([b"\x01", None, b""], pa.binary(), pa.binary()),
    ([True, None, False], pa.bool_(), pa.bool_()),
    ([dt.date(2024, 1, 1), None, dt.date(1970, 1, 1)], pa.date32(), pa.date32()),
    ([decimal.Decimal("1.5"), decimal.Decimal("-123456789012345.000000000000001"), None],
     pa.decimal128(30, 15), pa.decimal128(30, 15)),
    ([dt.datetime(2024, 1, 1, 12, 0, 0, 1, tzinfo=dt.UTC), None, None],
     pa.timestamp("us", tz="UTC"), pa.timestamp("us", tz="UTC")),
    ([dt.time(1, 2, 3, 4), None, dt.time(0)], pa.time64("us"), pa.time64("us")),
])
def test_delete_block_round_trip(values, arrow_type, read_type):
    keys = pa.table({"_hoodie_record_key": ["k1", "k2", "k3"], "_hoodie_partition_path": ["p=1", "", None],
                     "ordering_value": pa.array(values, arrow_type)})
    b = only_block(encode_delete_block(keys, {HeaderKey.INSTANT_TIME: INSTANT}))
    assert b.block_type is BlockType.DELETE and b.instant == INSTANT
    back = b.delete_records()
    assert back.column("_hoodie_record_key").to_pylist() == ["k1", "k2", "k3"]
    assert back.column("_hoodie_partition_path").to_pylist() == ["p=1", "", None]
    assert back.column("ordering_value").type == read_type
    assert back.column("ordering_value").to_pylist() == pa.array(values, arrow_type).cast(read_type).to_pylist()


def test_delete_block_python_values_map_to_long_double_string():
    for values, expected in [([1, 2], pa.int64()), ([1.5, None], pa.float64()), (["x", "y"], pa.string())]:
        keys = pa.table({"_hoodie_record_key": ["a", "b"], "_hoodie_partition_path": ["", ""],
                         "ordering_value": values})
        back = only_block(encode_delete_block(keys, {HeaderKey.INSTANT_TIME: INSTANT})).delete_records()
        assert back.column("ordering_value").type == expected
        assert back.column("ordering_value").to_pylist() == values


def test_delete_block_empty_and_large():
    empty = pa.table({"_hoodie_record_key": pa.array([], pa.string()),
                      "_hoodie_partition_path": pa.array([], pa.string())})
    assert only_block(encode_delete_block(empty, {HeaderKey.INSTANT_TIME: INSTANT})).delete_records().num_rows == 0
    n = 20_000
    keys = pa.table({"_hoodie_record_key": [f"key-{i}" for i in range(n)], "_hoodie_partition_path": ["p"] * n,
                     "ordering_value": pa.array(range(n), pa.int64())})
    back = only_block(encode_delete_block(keys, {HeaderKey.INSTANT_TIME: INSTANT})).delete_records()
    assert back.equals(keys)


def test_rollback_block_round_trip():
    b = only_block(encode_rollback_block("20250101000000001", "20250101000000002"))
    assert b.is_rollback and b.block_type is BlockType.COMMAND
    assert (b.target_instant, b.instant) == ("20250101000000001", "20250101000000002")
    assert b.content == b""


def test_large_avro_block():
    n = 30_000
    t = pa.table({"id": pa.array(range(n), pa.int64()), "name": [f"n{i}" for i in range(n)],
                  "ts": pa.array(range(n), pa.timestamp("us", tz="UTC")),
                  "price": pa.array([decimal.Decimal(i).scaleb(-2) for i in range(n)], pa.decimal128(12, 2))})
    back = only_block(encode_avro_data_block(t, arrow_to_avro(t.schema, "big"),
                                             {HeaderKey.INSTANT_TIME: INSTANT})).records()
    assert back.equals(t.cast(back.schema))


def test_encoding_errors():
    t = pa.table({"id": [1]})
    schema = arrow_to_avro(t.schema, "e")
    with pytest.raises(LogBlockError, match="INSTANT_TIME"):
        encode_avro_data_block(t, schema, {})
    with pytest.raises(LogBlockError, match="SCHEMA"):
        encode_avro_data_block(t, schema, {HeaderKey.INSTANT_TIME: INSTANT, HeaderKey.SCHEMA: '{"type":"string"}'})
    with pytest.raises(LogBlockError, match="INSTANT_TIME"):
        encode_delete_block(pa.table({"_hoodie_record_key": ["k"], "_hoodie_partition_path": [""]}), {})
    with pytest.raises(ValueError):
        encode_delete_block(pa.table({"_hoodie_record_key": ["k"]}), {HeaderKey.INSTANT_TIME: INSTANT})


def test_mixed_ordering_types_in_a_foreign_block():
    # Hudi may mix IntWrapper(0) and LongWrapper(x) in one block (our writer never does):
    # they share an int64 column
    ns = "org.apache.hudi.avro.model."
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, _delete_schema(), {"deleteRecordList": [
        {"recordKey": "a", "partitionPath": "", "orderingVal": (ns + "IntWrapper", {"value": 0})},
        {"recordKey": "b", "partitionPath": "", "orderingVal": (ns + "LongWrapper", {"value": 7})},
        {"recordKey": "c", "partitionPath": "", "orderingVal": None}]})
    content = struct.pack(">ii", 3, len(buf.getvalue())) + buf.getvalue()
    keys = _decode_delete_content(content)
    assert keys.column("ordering_value").type == pa.int64()
    assert keys.column("ordering_value").to_pylist() == [0, 7, None]


# -- several blocks, corruption ------------------------------------------------------------------
def sample_blocks() -> list[bytes]:
    t = pa.table({"id": pa.array([1, 2], pa.int64()), "name": ["x", "y"]})
    schema = arrow_to_avro(t.schema, "s")
    keys = pa.table({"_hoodie_record_key": ["1"], "_hoodie_partition_path": [""], "ordering_value": [3]})
    return [
        encode_avro_data_block(t, schema, {HeaderKey.INSTANT_TIME: "20250101000000001"}),
        encode_delete_block(keys, {HeaderKey.INSTANT_TIME: "20250101000000002", HeaderKey.SCHEMA: json.dumps(schema)}),
        encode_rollback_block("20250101000000002", "20250101000000003"),
        encode_avro_data_block(t.slice(1), schema, {HeaderKey.INSTANT_TIME: "20250101000000004"}),
    ]


def test_multiple_blocks_in_one_file():
    parts = sample_blocks()
    blocks, corrupt = scan_log_file(b"".join(parts))
    assert corrupt == 0
    assert [b.block_type for b in blocks] == [BlockType.AVRO_DATA, BlockType.DELETE, BlockType.COMMAND,
                                              BlockType.AVRO_DATA]
    assert [b.instant for b in blocks] == [f"2025010100000000{i}" for i in range(1, 5)]
    assert [b.size for b in blocks] == [len(p) for p in parts]
    assert [b.offset for b in blocks] == [sum(len(p) for p in parts[:i]) for i in range(4)]
    assert blocks[0].records().column("name").to_pylist() == ["x", "y"]
    assert blocks[1].delete_records().column("ordering_value").to_pylist() == [3]
    assert blocks[2].is_rollback and blocks[2].target_instant == "20250101000000002"
    assert blocks[3].records().column("id").to_pylist() == [2]
    # appending Hudi's own blocks after ours is just concatenation too
    hudi_block = conformance_log("valid_log_rollback")
    assert [b.block_type for b in read_log_file(b"".join(parts) + hudi_block)][-1] is BlockType.COMMAND


def test_truncated_tail_yields_the_good_blocks():
    parts = sample_blocks()
    whole = b"".join(parts)
    half = whole[: len(whole) - len(parts[-1]) // 2]
    blocks, corrupt = scan_log_file(half)
    assert corrupt == 1
    assert [b.instant for b in blocks] == [f"2025010100000000{i}" for i in range(1, 4)]
    assert read_log_file(half) == blocks


def test_every_cut_inside_the_last_block_is_one_corrupt_block():
    parts = sample_blocks()[:3]
    head = b"".join(parts[:2])
    for cut in range(1, len(parts[2])):
        blocks, corrupt = scan_log_file(head + parts[2][:cut])
        assert (len(blocks), corrupt) == (2, 1), cut


@pytest.mark.parametrize("garbage", [b"x", b"\x00" * 100, b"garbage with " + MAGIC + b" inside", MAGIC,
                                     MAGIC + b"\x00" * 8 + b"\xff" * 30])
def test_garbage_between_blocks_is_skipped(garbage):
    parts = sample_blocks()
    blocks, corrupt = scan_log_file(parts[0] + garbage + parts[1])
    assert corrupt == 1
    assert [b.block_type for b in blocks] == [BlockType.AVRO_DATA, BlockType.DELETE]
    assert blocks[1].offset == len(parts[0]) + len(garbage)
    # at the start of the file too
    assert scan_log_file(garbage + parts[0])[1] == 1


def test_trailing_length_mismatch_is_corrupt():
    parts = sample_blocks()
    bad = bytearray(parts[1])
    bad[-1] ^= 1  # trailing total length disagrees with the block length
    blocks, corrupt = scan_log_file(parts[0] + bytes(bad) + parts[2])
    assert corrupt == 1
    assert [b.block_type for b in blocks] == [BlockType.AVRO_DATA, BlockType.COMMAND]


def test_block_length_running_past_the_end_is_corrupt():
    data = bytearray(conformance_log("valid_log_rollback"))
    data[6:14] = (10 ** 9).to_bytes(8, "big")
    assert scan_log_file(bytes(data)) == ([], 1)
    assert read_log_file(b"") == [] and scan_log_file(b"") == ([], 0)


@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_damaged_files_never_raise(data):
    whole = bytearray(b"".join(sample_blocks()))
    for _ in range(data.draw(st.integers(1, 4))):
        i = data.draw(st.integers(0, len(whole) - 1))
        whole[i] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(whole)))
    blocks, corrupt = scan_log_file(bytes(whole[:cut]))
    assert len(blocks) <= 4 and corrupt >= 0
    for b in blocks:
        assert bytes(whole[b.offset:b.offset + 6]) == MAGIC


# -- interop: the Rust reader (PyPI `hudi`) reads what we write --------------------------------
def copy_table(conformance_dir, rel: str, tmp_path: Path) -> Path:
    dst = tmp_path / Path(rel).name
    shutil.copytree(conformance_table(conformance_dir, rel), dst)
    return dst


def hudi_slice(table: Path, base: Path, logs: list[Path]) -> pa.Table:
    hudi = pytest.importorskip("hudi")
    reader = hudi.HudiFileGroupReader(str(table), {})
    return reader.read_file_slice_from_paths(os.path.relpath(base, table), [os.path.relpath(p, table) for p in logs])


def hudi_snapshot(table: Path) -> list[dict]:
    hudi = pytest.importorskip("hudi")
    batches = hudi.HudiTableBuilder.from_base_uri(str(table)).build().read(hudi.HudiReadOptions())
    rows = pa.Table.from_batches(batches).to_pylist()
    return sorted(rows, key=lambda r: r["_hoodie_record_key"])


def riders(t: pa.Table) -> list[tuple]:
    return sorted((r["rider"], r["fare"]) for r in t.select(["rider", "fare"]).to_pylist())


@pytest.mark.interop
def test_hudi_rs_reads_our_avro_delete_and_rollback_blocks(conformance_dir, tmp_path):
    table = copy_table(conformance_dir, "quickstart_trips_table/mor/avro/v6_trips_8i1u", tmp_path)
    part = table / "city=san_francisco"
    [log] = data_table_logs(table)
    [base] = part.glob("*.parquet")
    [hudi_block] = read_log_file(log.read_bytes())
    base_only = riders(hudi_slice(table, base, []))
    assert ("rider-D", 33.9) in base_only and len(base_only) == 4

    update = hudi_block.records()
    update = update.set_column(update.column_names.index("fare"), "fare", pa.array([99.0]))
    ours = encode_avro_data_block(update, hudi_block.avro_schema, {HeaderKey.INSTANT_TIME: hudi_block.instant})
    log.write_bytes(ours)
    assert riders(hudi_slice(table, base, [log])) == sorted(
        [r for r in base_only if r[0] != "rider-D"] + [("rider-D", 99.0)])

    base_rows = {r["rider"]: r for r in hudi_slice(table, base, []).to_pylist()}
    delete = pa.table({"_hoodie_record_key": [base_rows["rider-A"]["_hoodie_record_key"],
                                              base_rows["rider-D"]["_hoodie_record_key"]],
                       "_hoodie_partition_path": ["city=san_francisco"] * 2,
                       "ordering_value": pa.array([base_rows["rider-A"]["ts"] + 1, None], pa.int64())})
    log.write_bytes(ours + encode_delete_block(delete, {HeaderKey.INSTANT_TIME: hudi_block.instant}))
    assert riders(hudi_slice(table, base, [log])) == [("rider-C", 27.7), ("rider-E", 93.5)]

    log.write_bytes(ours + encode_rollback_block(hudi_block.instant, "20250331030650000"))
    assert riders(hudi_slice(table, base, [log])) == base_only  # the data block is void

    # the whole table through the timeline, too
    log.write_bytes(ours)
    snap = hudi_snapshot(table)
    assert len(snap) == 8 and [r["fare"] for r in snap if r["rider"] == "rider-D"] == [99.0]


@pytest.mark.interop
def test_hudi_rs_reads_our_delete_block(conformance_dir, tmp_path):
    table = copy_table(conformance_dir, "quickstart_trips_table/mor/avro/v6_trips_8i3d", tmp_path)
    [log] = data_table_logs(table)
    [base] = (table / "city=san_francisco").glob("*.parquet")
    hudis = riders(hudi_slice(table, base, [log]))
    assert hudis == [("rider-E", 93.5)]
    [b] = read_log_file(log.read_bytes())
    for keys in (b.delete_records().drop_columns(["ordering_value"]),
                 b.delete_records().set_column(2, "ordering_value", pa.array([2 ** 62] * 3, pa.int64()))):
        log.write_bytes(encode_delete_block(keys, b.header))
        assert riders(hudi_slice(table, base, [log])) == hudis


@pytest.mark.interop
def test_hudi_rs_reads_our_avro_block_with_every_type(conformance_dir, tmp_path):
    """A Hudi-written Parquet block (decimal, date, timestamp, binary, array, map, struct) rewritten
    by us as an Avro block reads identically in hudi-rs."""
    table = copy_table(conformance_dir, "sample_table/mor/parquet/v6_nonpartitioned", tmp_path)
    [log] = data_table_logs(table)
    [base] = table.glob(log.name[1:].split("_")[0] + "_*.parquet")  # the log's file group
    expected = hudi_slice(table, base, [log])
    expected_snapshot = hudi_snapshot(table)
    assert [r["name"] for r in expected_snapshot] == ["Alice", "Bob", "Carol", "Diana"]
    [b] = read_log_file(log.read_bytes())
    assert b.block_type is BlockType.PARQUET_DATA
    ours = encode_avro_data_block(b.records(), b.avro_schema, {HeaderKey.INSTANT_TIME: b.instant})
    assert only_block(ours).records().to_pylist() == b.records().cast(avro_to_arrow(b.avro_schema)).to_pylist()
    log.write_bytes(ours)
    got = hudi_slice(table, base, [log])
    assert got.schema == expected.schema
    assert got.sort_by("id").to_pylist() == expected.sort_by("id").to_pylist()
    assert hudi_snapshot(table) == expected_snapshot
