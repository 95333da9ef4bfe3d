"""Column and partition statistics on table version 8, in Apache Hudi 1.0's layout (the index
version V1: no ``valueType``, the wrapper says the type; see :mod:`lakesdk.format.column_stats`).

- The record schema lakesdk writes a version 8 MDT with is the one Hudi 1.0 wrote, and for every
  file of the Hudi 1.0-written corpus table lakesdk computes the records Hudi wrote, field by
  field once decoded (the partition records: tests/metadata_table/test_partition_stats.py).
- An upsert into a copy of that table keeps both partitions, with records of the new files
  equal to the rows they hold (``check_mdt``), reads skip files by them and the ``hudi`` reader
  reads the table.
- A version 8 table lakesdk creates gets them (dates, microsecond timestamps, decimals within
  ``decimal(30, 15)``: the V1 wrappers), and generated filters return the rows a full read
  keeps; a table with a column whose V1 records lakesdk does not write (binary) keeps ``files``
  only.
"""

from __future__ import annotations

import datetime as dt
import decimal
import io
import json
import warnings
from pathlib import Path

import fastavro
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lakesdk as lk
from lakesdk.format.column_stats import INDEX_DEFS_PATH, file_group_index
from lakesdk.format.log_block import read_log_file
from lakesdk.format.metadata_files import FilesChange
from lakesdk.format.metadata_records import _parsed, decode_record, record_schema_json
from lakesdk.format.metadata_table import metadata_partitions
from lakesdk.read.metadata_table import MetadataTableReader
from lakesdk.read.predicate import parse_where
from lakesdk.services.metadata_stats import stats_columns, stats_records_of, table_arrow_schema

from .. import helpers
from ..corpus_model import MDT_TABLES, Model, check_mdt, copy_table, mdt_state, storage_files
from .test_column_stats import batches, check_filtered_reads, conditions, write_and_update

V8_STATS = sorted(rel for rel, cfg in MDT_TABLES.items()
                  if "column_stats" in metadata_partitions(cfg.props) and cfg.version == 8)
TRIPS = "quickstart_trips_table/mor/avro/v8_trips_8i3u1d"


def _without_docs(s):
    if isinstance(s, dict):
        return {k: _without_docs(v) for k, v in s.items() if k != "doc"}
    if isinstance(s, list):
        return [_without_docs(x) for x in s]
    return s


def _decoded(rec: dict, schema_json: str) -> dict:
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, _parsed(schema_json), rec)
    return dict(decode_record(buf.getvalue(), schema_json).raw["ColumnStatsMetadata"])


def _latest_schema(t: lk.Table) -> str | None:
    tl = t.context.store.load()
    for inst in reversed(tl.commits.instants):
        schema = t.context.store.commit_metadata(inst).extra_metadata.get("schema")
        if schema:
            return str(schema)
    return None


def test_the_corpus_has_a_version_8_table_with_statistics():
    assert V8_STATS == [TRIPS]
    assert {"column_stats", "partition_stats"} <= set(metadata_partitions(MDT_TABLES[TRIPS].props))


def test_the_version_8_record_schema_is_hudi_1_0s(corpus):
    path = Path(helpers.zipped_table(corpus, TRIPS)) / ".hoodie/metadata/column_stats"
    schemas = {json.dumps(_without_docs(b.avro_schema), sort_keys=True)
               for f in sorted(path.glob(".col-stats-*.log.*")) for b in read_log_file(f.read_bytes()) if b.avro_schema}
    assert schemas == {json.dumps(_without_docs(json.loads(record_schema_json(8))), sort_keys=True)}


@pytest.mark.parametrize("rel", V8_STATS)
def test_lakesdk_computes_the_records_hudi_1_0_wrote(corpus, rel):
    t = lk.open_table(helpers.zipped_table(corpus, rel))
    mdt = MetadataTableReader(t.storage, t.context.store.load())
    theirs = {k: r for k, r in mdt.records("column_stats").items() if not r.deleted}
    groups = {sl.file_id: sl for sl in mdt.slices("column_stats")}
    assert sorted(groups) == ["col-stats-0000-0", "col-stats-0001-0"]
    schema_json = _latest_schema(t)
    columns, named = stats_columns(t.context, schema_json)
    assert named and len(columns) == 9
    stored = storage_files(t)
    mine = stats_records_of(t.context, FilesChange.of_writes((p, n, s) for (p, n), s in stored.items()), columns,
                            table_arrow_schema(columns, schema_json))
    assert set(mine) == set(theirs)            # one record per stored file and column, deletes-only logs too
    v8 = record_schema_json(8)
    for key, rec in mine.items():
        assert "valueType" not in rec["ColumnStatsMetadata"]
        assert _decoded(rec, v8) == dict(theirs[key].raw["ColumnStatsMetadata"]), key
        assert f"col-stats-{file_group_index(key, 2):04d}-0" in groups


@pytest.mark.interop
def test_an_upsert_into_a_version_8_table_keeps_its_statistics(corpus, tmp_path):
    path = copy_table(corpus, TRIPS, tmp_path)
    named = set(mdt_state(path)[0])
    t = lk.open_table(path, options=lk.TableOptions(engine="local"))
    m = Model(t)
    changed, new = m.updated(m.first()), m.new()
    with warnings.catch_warnings(record=True) as told:
        warnings.simplefilter("always")
        t.upsert(m.table([changed, new]))
    m.put(changed, new)
    dropped = [set(w.message.partitions) for w in told if issubclass(w.category, lk.MetadataTableDroppedWarning)]
    # the record index Hudi built is kept (lakesdk maintains it), the secondary index dropped
    assert dropped == [{"secondary_index_rider_idx"}]
    assert set(mdt_state(path)[0]) == named - dropped[0]
    from ..index.test_record_index import assert_index_exact
    assert_index_exact(lk.open_table(path))
    check_mdt(path, "after an upsert")
    m.check(path, "after an upsert")
    t = lk.open_table(path)
    latest = t.timeline.commits[-1].requested
    mdt = MetadataTableReader(t.storage, t.context.store.load())
    written = mdt.written_at("column_stats", latest)
    assert written and all("valueType" not in r.raw["ColumnStatsMetadata"] for r in written)
    assert all("valueType" not in r.raw["ColumnStatsMetadata"] for r in mdt.written_at("partition_stats", latest))
    assert "version" not in json.loads(t.storage.read(INDEX_DEFS_PATH))["indexDefinitions"]["column_stats"]
    full = t.read().to_arrow()
    for where in ("fare > 90", "rider = 'rider-C'", "ts < 1695100000000", f"uuid = '{new['uuid']}'"):
        q = t.read(where=where)
        want = full.filter(parse_where(where).bind(full.schema, "UTC").to_arrow())
        assert sorted(q.to_arrow().column("uuid").to_pylist()) == sorted(want.column("uuid").to_pylist()), where
    assert t.read(where="rider = 'rider-C'").plan().skipped_slices > 0
    assert len(helpers.hudi_read(path)) == len(m.rows)


def _v8_table(root: Path, table_type: str, **kw) -> lk.Table:
    lake = lk.Lake(str(root), options=lk.TableOptions(engine="local", metadata=True))
    return lake.create_table("t", key="id", ordering="ts", table_type=table_type, table_version=8, **kw)


def test_a_version_8_table_gets_hudi_1_0s_records(tmp_path):
    t = _v8_table(tmp_path, "mor", partition_by="p")
    day, at = dt.date(2024, 2, 29), dt.datetime(2024, 2, 29, 12, 30, 0, 123456, tzinfo=dt.UTC)
    t.bulk_insert(pa.table({"id": pa.array([1, 2], pa.int64()), "p": ["a", "b"], "ts": pa.array([0, 0], pa.int64()),
                            "d": pa.array([day, None], pa.date32()), "t": pa.array([at, None], pa.timestamp("us", "UTC")),
                            "m": pa.array([decimal.Decimal("-12.50"), None], pa.decimal128(10, 2))}))
    assert set(mdt_state(t.path)[0]) == {"files", "column_stats", "partition_stats"}
    check_mdt(t.path, "after a bulk insert")
    recs = MetadataTableReader(t.storage, t.context.store.load()).records("column_stats")
    by_col = {r.raw["ColumnStatsMetadata"]["columnName"]: r.raw["ColumnStatsMetadata"] for r in recs.values()
              if r.raw["ColumnStatsMetadata"]["nullCount"] == 0}
    wrap = "org.apache.hudi.avro.model."
    assert by_col["d"]["minValue"] == (wrap + "DateWrapper", {"value": (day - dt.date(1970, 1, 1)).days})
    micros = int((at - dt.datetime(1970, 1, 1, tzinfo=dt.UTC)) / dt.timedelta(microseconds=1))
    assert by_col["t"]["maxValue"] == (wrap + "LongWrapper", {"value": micros})
    assert by_col["m"]["minValue"] == (wrap + "DecimalWrapper", {"value": decimal.Decimal("-12.500000000000000")})
    assert all("valueType" not in cs for cs in by_col.values())
    t = lk.open_table(t.path)
    assert t.read(where="d = DATE '2024-02-29'").plan().skipped_slices == 1
    assert t.read(where="t > TIMESTAMP '2024-02-29 12:30:00'").to_arrow().column("id").to_pylist() == [1]
    assert t.read(where="m < -12.4").plan().skipped_slices == 1
    assert sorted(r["id"] for r in helpers.hudi_read(t.path)) == [1, 2]


def test_a_date_before_the_gregorian_calendar_is_written_as_its_day_and_not_skipped_by(tmp_path):
    """Hudi 1.0 formats a base file's dates through the Julian calendar before 1582-10-15 (its
    records of them are days off): lakesdk writes the day, and skips by no such bound."""
    from lakesdk.format.column_stats import range_of_record
    t = _v8_table(tmp_path, "cow")
    old, new = dt.date(1000, 1, 1), dt.date(2000, 1, 1)
    for i, d in enumerate((old, new)):
        t.bulk_insert(pa.table({"id": [i], "ts": [0], "d": pa.array([d], pa.date32())}))
    recs = MetadataTableReader(t.storage, t.context.store.load()).records("column_stats")
    days = {range_of_record(r.raw["ColumnStatsMetadata"], exact=True).min_value for r in recs.values()
            if r.raw["ColumnStatsMetadata"]["columnName"] == "d"}
    assert days == {(old - dt.date(1970, 1, 1)).days, (new - dt.date(1970, 1, 1)).days}
    check_mdt(t.path, "after two writes")
    t = lk.open_table(t.path)
    assert t.read(where="d = DATE '2000-01-01'").plan().skipped_slices == 0
    assert t.read(where="d = DATE '1000-01-01'").to_arrow().column("id").to_pylist() == [0]
    assert t.read(where="id = 0").plan().skipped_slices == 1


def test_a_version_8_table_with_a_binary_column_keeps_files_only(tmp_path):
    """Hudi 1.0 indexes binary columns, ordering a log file's bytes as signed numbers where a
    read orders them unsigned: lakesdk writes no such records, and keeps no statistics."""
    from lakesdk.format.column_stats import v1_supported
    assert not v1_supported(pa.binary()) and not v1_supported(pa.timestamp("ms", "UTC"))
    t = _v8_table(tmp_path, "cow")
    with warnings.catch_warnings():
        warnings.simplefilter("error", lk.MetadataTableDroppedWarning)
        t.upsert(pa.table({"id": [1], "ts": [0], "b": [b"\x80"]}))
    assert mdt_state(t.path) == (("files",), True)
    check_mdt(t.path, "after an upsert")


@pytest.mark.parametrize("table_type", ["cow", "mor"])
@settings(max_examples=15, deadline=None, database=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(data=batches(), update=st.data(), where=st.lists(conditions(), min_size=4, max_size=8))
def test_a_filtered_read_of_a_version_8_table_returns_the_rows_a_full_read_keeps(tmp_path_factory, table_type, data,
                                                                                 update, where):
    t = _v8_table(tmp_path_factory.mktemp("v8skip"), table_type)
    write_and_update(t, data, update)
    assert "column_stats" in mdt_state(t.path)[0]
    check_mdt(t.path, "after the writes")
    check_filtered_reads(lk.open_table(t.path), update, where)
