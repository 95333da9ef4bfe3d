"""Apache Hudi's data skipping keeps every file (and lists every partition) of a lakesdk table
that holds a row a filter matches.

Hudi's Spark reader (emulated in :mod:`tests.hudi_skipping`) evaluates its translated filter on
the records as they are: a record with null bounds (or a null null count) makes every comparison
(``IS NULL``) NULL, and the file (the partition) is left out.  So lakesdk writes no record
without bounds of a column a file holds: where a Parquet footer does not say them (a chunk of
only NaN, values too long for the footer's statistics, a row group without statistics) they are
computed from the column's values; a float column holding NaN has the maximum NaN (Spark SQL
orders NaN above every number); a file without a column gets a record of only nulls; a
partition's statistics of a column lakesdk cannot bound are the bounds of every value of its
type.
"""

from __future__ import annotations

import datetime as dt
import decimal
import io
import json
import math
from pathlib import Path

import fastavro
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lakesdk as lk
from lakesdk.format.column_stats import V2, ColumnRange, ValueType, partition_stats_key, stats_record
from lakesdk.format.metadata_records import decode_record, record_schema_json
from lakesdk.format.partition_stats import aggregate, partition_record
from lakesdk.read.metadata_table import MetadataTableReader
from lakesdk.services.metadata_stats import file_ranges, with_absent_columns, write_index_definition
from lakesdk.storage import Storage

from ..hudi_skipping import keeps_file, kept_partitions, spark_eval

LONG = "x" * 5000            # over the 4096 bytes a Parquet writer keeps statistics of
TYPES = {"i": pa.int64(), "f": pa.float64(), "s": pa.string(), "d": pa.date32(), "m": pa.decimal128(10, 2),
         "b": pa.bool_()}


def _values(kind: str):
    return {"i": st.integers(-5, 5),
            "f": st.sampled_from([-1.5, -0.0, 0.0, 2.0, 7.0, math.inf, -math.inf, math.nan]),
            "s": st.sampled_from(["", "a", "b", "é", LONG, LONG + "y", "y" * 4097]),
            "d": st.dates(dt.date(1969, 12, 30), dt.date(1970, 1, 3)),
            "m": st.decimals(-5, 5, places=2, allow_nan=False),
            "b": st.booleans()}[kind]


def _decoded(rec: dict) -> dict:
    """A record as a reader decodes it (the Avro bytes of the MDT)."""
    buf = io.BytesIO()
    schema = record_schema_json(9)
    fastavro.schemaless_writer(buf, fastavro.parse_schema(json.loads(schema)), rec)
    return dict(decode_record(buf.getvalue(), schema).raw["ColumnStatsMetadata"])


@st.composite
def parquet_files(draw):
    """A table (columns of ``TYPES``, some left out, NaN, long strings, nulls) and how a
    writer stores it (row groups, which columns get statistics)."""
    n = draw(st.integers(1, 6))
    present = draw(st.lists(st.sampled_from(sorted(TYPES)), min_size=1, unique=True))
    data = {c: pa.array(draw(st.lists(st.one_of(st.none(), _values(c)), min_size=n, max_size=n)), TYPES[c])
            for c in present}
    stats = draw(st.one_of(st.booleans(), st.lists(st.sampled_from(present), unique=True)))
    return pa.table(data), draw(st.integers(1, n)), stats


@st.composite
def filters(draw, rows: list[dict], depth: int = 0):
    c = draw(st.sampled_from(sorted(TYPES)))
    stored = [r[c] for r in rows if r.get(c) is not None]
    value = st.sampled_from(stored) | _values(c) if stored else _values(c)
    form = draw(st.sampled_from(["cmp", "cmp", "in", "isnull", "notnull"] + (["and", "or"] if depth < 1 else [])))
    if form in ("and", "or"):
        return (form, draw(filters(rows, depth + 1)), draw(filters(rows, depth + 1)))
    if form in ("isnull", "notnull"):
        return (form, c)
    if form == "in":
        return ("in", c, draw(st.lists(value, min_size=1, max_size=3)))
    return ("cmp", c, draw(st.sampled_from(["=", "!=", "<", "<=", ">", ">="])), draw(value))


def _records_of(storage: Storage, name: str, schema: pa.Schema) -> dict[str, dict]:
    ranges = with_absent_columns(file_ranges(storage, name, schema.names, schema), schema.names, schema)
    return {r.column: _decoded(stats_record("", name, r)) for r in ranges}


@settings(max_examples=150, deadline=None, database=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(file=parquet_files(), data=st.data())
def test_hudi_keeps_every_file_that_holds_a_matching_row(tmp_path, file, data):
    table, group, stats = file
    schema = pa.schema([(c, TYPES[c]) for c in sorted(TYPES)])
    pq.write_table(table, tmp_path / "f.parquet", row_group_size=group, write_statistics=stats)
    records = _records_of(Storage(str(tmp_path)), "f.parquet", schema)
    rows = table.to_pylist()
    for f in data.draw(st.lists(filters(rows), min_size=1, max_size=6)):
        if any(spark_eval(f, r) is True for r in rows):
            assert keeps_file(f, records), (f, rows, records)
    # no record without bounds but one of only nulls
    assert all(r["minValue"] is not None or r["nullCount"] == r["valueCount"] for r in records.values()), records


# -- cases a table's writes make ------------------------------------------------------------------
def _lake(root, **options) -> lk.Lake:
    return lk.Lake(str(root), options=lk.TableOptions(engine="local", metadata=True, **options))


def _file_records(t: lk.Table, partition: str = "column_stats") -> dict[str, dict[str, dict]]:
    """File name (a partition's, for ``partition_stats``) -> column -> the live record."""
    recs = MetadataTableReader(t.storage, t.context.store.load()).records(partition)
    out: dict[str, dict[str, dict]] = {}
    for rec in recs.values():
        if not rec.deleted:
            cs = rec.raw["ColumnStatsMetadata"]
            out.setdefault(cs["fileName"], {})[cs["columnName"]] = cs
    return out


def _bound(w):
    """A decoded wrapper's value."""
    return None if w is None else (w[1] if isinstance(w, tuple) else w)["value"]


def _kept(t: lk.Table, f: tuple) -> list[int]:
    """The ids of the rows matching ``f`` in the files Hudi's data skipping keeps."""
    from lakesdk.format.column_stats import INDEX_DEFS_PATH, read_index_columns
    indexed = set(read_index_columns(t.storage.read(INDEX_DEFS_PATH)) or [])
    files = _file_records(t)
    out = []
    for name, recs in files.items():
        if not keeps_file(f, recs, indexed):
            continue
        [path] = [p for p in Path(t.path).rglob(name) if ".hoodie" not in p.parts]
        out += [r["id"] for r in pq.read_table(path).to_pylist() if spark_eval(f, r) is True]
    return sorted(out)


def test_a_column_of_only_nan_and_strings_too_long_for_statistics(tmp_path):
    """A file whose float column holds only NaN and whose string column holds a value over
    4096 bytes: the Parquet footer has no bounds of them; Hudi kept no file for ``f > 5``,
    ``s = LONG`` or ``f IS NULL`` when lakesdk wrote records without bounds."""
    t = _lake(tmp_path).create_table("t", key="id", ordering="ts")
    t.bulk_insert(pa.table({"id": [1, 2, 3], "ts": [0, 0, 0], "f": [math.nan, None, math.nan],
                            "s": [LONG, "a", None]}))
    t = lk.open_table(t.path)
    assert _kept(t, ("cmp", "f", ">", 5.0)) == [1, 3]           # NaN is above every number
    assert _kept(t, ("cmp", "f", "=", math.nan)) == [1, 3]
    assert _kept(t, ("cmp", "s", "=", LONG)) == [1]
    assert _kept(t, ("cmp", "s", ">", "b")) == [1]
    assert _kept(t, ("in", "s", ["q", LONG])) == [1]
    assert _kept(t, ("isnull", "f")) == [2]
    assert _kept(t, ("and", ("isnull", "s"), ("cmp", "id", ">", 0))) == [3]
    rec = _file_records(t)
    [(name, recs)] = rec.items()
    assert math.isnan(_bound(recs["f"]["minValue"])) and recs["f"]["nullCount"] == 1
    assert (_bound(recs["s"]["minValue"]), _bound(recs["s"]["maxValue"]), recs["s"]["nullCount"]) == ("a", LONG, 1)


def test_a_float_column_of_a_log_file_holding_nan_has_the_maximum_nan(tmp_path):
    """An Avro log block's float values with NaN: the record's maximum is NaN (as Hudi writes
    a log file's), not the largest number (Hudi left the file out for ``f > 5``)."""
    t = _lake(tmp_path, log_block_format="avro").create_table("t", key="id", ordering="ts", table_type="mor")
    t.bulk_insert(pa.table({"id": [1, 2], "ts": [0, 0], "f": [1.0, 2.0]}))
    t.upsert(pa.table({"id": [1, 2], "ts": [1, 1], "f": [1.0, math.nan]}))
    logs = {n: recs for n, recs in _file_records(lk.open_table(t.path)).items() if ".log." in n}
    [(name, recs)] = logs.items()
    assert _bound(recs["f"]["minValue"]) == 1.0 and math.isnan(_bound(recs["f"]["maxValue"]))
    assert keeps_file(("cmp", "f", ">", 5.0), recs)


def test_a_file_written_before_a_column_was_added_has_a_record_of_nulls(tmp_path):
    """A metadata table built for a table one of whose files predates a column: Hudi's index
    row of that file has no null count of the column, so ``c IS NULL AND id > 0`` left the file
    out although every row of it has ``c`` null; its record says only nulls now."""
    t = lk.Lake(str(tmp_path), options=lk.TableOptions(engine="local", metadata=False)).create_table("t", key="id",
                                                                                         ordering="ts")
    t.bulk_insert(pa.table({"id": [1, 2], "ts": [0, 0]}))
    t.bulk_insert(pa.table({"id": [3], "ts": [0], "c": ["z"]}))
    write_index_definition(t.storage, ["id", "ts", "c"], V2)     # the columns a writer was told to index
    t = lk.open_table(t.path, options=lk.TableOptions(engine="local", metadata=True))
    t.maintenance.create_metadata_table()
    t = lk.open_table(t.path)
    assert _kept(t, ("and", ("isnull", "c"), ("cmp", "id", ">", 0))) == [1, 2]
    old = next(recs for recs in _file_records(t).values() if _bound(recs["id"]["maxValue"]) == 2)
    assert (old["c"]["minValue"], old["c"]["nullCount"], old["c"]["valueCount"]) == (None, 2, 2)


def _partition_records(t: lk.Table) -> dict[str, dict[str, dict]]:
    return _file_records(t, "partition_stats")


@pytest.mark.parametrize("f", [("cmp", "c", "=", "z"), ("cmp", "c", ">", "a"), ("in", "c", ["z"])])
def test_a_partition_with_a_file_without_a_column_is_listed(tmp_path, f):
    """A partition whose older file lacks a column got a record without bounds, which Hudi's
    partition pruning leaves out (its newer file holds ``c = 'z'``); now the file counts as
    nulls and the record has the bounds of the values."""
    t = _lake(tmp_path, metadata_partition_stats=True).create_table("t", key="id", ordering="ts", partition_by="p")
    t.bulk_insert(pa.table({"id": [1, 2], "ts": [0, 0], "p": ["a", "b"]}))
    write_index_definition(t.storage, ["id", "ts", "p", "c"], V2)     # the columns a writer was told to index
    t.bulk_insert(pa.table({"id": [3, 4], "ts": [0, 0], "p": ["a", "b"], "c": ["z", None]}))
    t = lk.open_table(t.path)
    recs = _partition_records(t)
    assert set(recs) == {"p=a", "p=b"} or set(recs) == {"a", "b"}
    part_a = next(p for p in recs if p.endswith("a"))
    assert part_a in kept_partitions(f, recs, list(recs))
    assert (_bound(recs[part_a]["c"]["minValue"]), recs[part_a]["c"]["nullCount"]) == ("z", 1)
    assert partition_stats_key("c", part_a) in MetadataTableReader(t.storage, t.context.store.load()).records(
        "partition_stats")


@pytest.mark.parametrize("ranges, vt, f", [
    # a column widened from long to double, and a decimal of more digits after the point
    ([(ValueType.LONG, None, 5, 5), (ValueType.DOUBLE, None, 0.5, 0.5)], (ValueType.DOUBLE, None),
     ("cmp", "v", "=", 5.0)),
    ([(ValueType.DECIMAL, "10,2", 100, 200), (ValueType.DECIMAL, "12,4", 10000, 20000)], (ValueType.DECIMAL, "12,4"),
     ("cmp", "v", ">", decimal.Decimal("1.5"))),
])
def test_a_partition_of_files_in_types_that_do_not_compare_has_the_bounds_of_its_type(ranges, vt, f):
    """Files holding a column in types whose stored values do not compare: the partition's
    record had no bounds, which Hudi's partition pruning leaves out; now the bounds of every
    value of the column's type."""
    agg = aggregate([ColumnRange("v", t, info, lo, hi, 0, 1) for t, info, lo, hi in ranges], vt)
    assert agg is not None and agg.null_count == -1
    rec = _decoded(partition_record("p=a", agg))
    assert kept_partitions(f, {"p=a": {"v": rec}}, ["p=a"]) == {"p=a"}
