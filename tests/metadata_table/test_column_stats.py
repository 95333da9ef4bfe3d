"""The column statistics of Hudi's metadata table (``column_stats``), as lakesdk writes them and
skips files by them.

- What lakesdk computes for a Hudi-written file is what Apache Hudi 1.1 wrote for it: the same
  keys (hashes), file groups, bounds, counts and sizes, for every base file of every version 9
  corpus table, and the same bounds and counts for its log files.
- A read with a filter returns exactly the rows a full read filtered returns, for generated
  tables (types with nulls, NaN, -0.0, dates, timestamps, decimals; copy-on-write and
  merge-on-read with updates in log files) and generated filters; skipping does happen.
"""

from __future__ import annotations

import datetime as dt
import decimal
import math

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lakesdk as lk
from lakesdk.format.column_stats import (
    file_group_index,
    indexed_columns,
    range_of_record,
    ranges_from_parquet,
    stats_record,
    xxh64,
)
from lakesdk.read.metadata_table import MetadataTableReader
from lakesdk.read.predicate import from_filters, parse_where
from lakesdk.services.metadata_stats import file_ranges

from .. import helpers
from ..corpus_model import MDT_TABLES, storage_files

STATS_TABLES = sorted(rel for rel, cfg in MDT_TABLES.items()
                      if "column_stats" in cfg.props.get("hoodie.table.metadata.partitions", "") and cfg.version >= 9
                      and cfg.base_file_format != "LANCE")


def test_xxhash64_reference_values():
    assert xxh64(b"") == 0xEF46DB3751D8E999
    assert xxh64(b"a") == 0xD24EC4F1A98C6E5B
    assert xxh64(b"abc") == 0x44BC2CF5AD770999
    assert xxh64(b"Nobody inspects the spammish repetition") == 0xFBCEA83C8A378BF1


def test_the_corpus_has_tables_with_column_stats():
    assert len(STATS_TABLES) >= 6, STATS_TABLES


@pytest.mark.parametrize("rel", STATS_TABLES)
def test_lakesdk_computes_the_records_hudi_wrote(corpus, rel):
    t = lk.open_table(helpers.zipped_table(corpus, rel))
    mdt = MetadataTableReader(t.storage, t.context.store.load())
    theirs = mdt.records("column_stats")
    groups = {sl.file_id: sl for sl in mdt.slices("column_stats")}
    for sl in groups.values():     # each key is in the file group its hash names
        for key in mdt._slice_records(sl):
            assert f"col-stats-{file_group_index(key, len(groups)):04d}-0" == sl.file_id
    compared = 0
    for part, name in storage_files(t):
        path = f"{part}/{name}" if part else name
        rel_cols = None
        if name.endswith(".parquet"):
            pf = pq.ParquetFile(t.storage.url(path))
            rel_cols = indexed_columns(pf.schema_arrow)
            mine = ranges_from_parquet(pf.metadata, pf.schema_arrow, rel_cols)
        else:
            mine = file_ranges(t.storage, path, [c for c in _index_columns(t)])
        for r in mine:
            key = stats_record(part, name, r)["key"]
            rec = theirs.get(key)
            if rec is None:
                assert r.value_count == 0, f"Hudi wrote no statistics of {r.column} in {path}"
                continue
            got = range_of_record(rec.raw["ColumnStatsMetadata"])
            if name.endswith(".parquet"):
                assert got == r, path
            else:          # Hudi records no sizes for log files
                assert (got.min_value, got.max_value, got.null_count, got.value_count) == \
                    (r.min_value, r.max_value, r.null_count, r.value_count), (path, got, r)
            compared += 1
    assert compared > 0


def _index_columns(t: lk.Table) -> list[str]:
    from lakesdk.format.column_stats import INDEX_DEFS_PATH, read_index_columns
    return read_index_columns(t.storage.read(INDEX_DEFS_PATH)) or []


# -- skipping agrees with a full read ----------------------------------------------------------------
def _values(kind: str):
    return st.one_of(st.none(), _present(kind))


def _present(kind: str):
    """The non-null values of a ``kind`` column (drawn directly: a filter that drops nulls makes
    Hypothesis's health check count the rejected draws, and fail a run on it)."""
    if kind == "i":
        return st.integers(-50, 50)
    if kind == "f":
        return st.one_of(st.floats(-50, 50, width=64), st.just(math.nan), st.just(-0.0), st.just(0.0), st.just(math.inf))
    if kind == "s":
        return st.text("abcé☃", max_size=3)
    if kind == "d":
        return st.dates(dt.date(1969, 12, 20), dt.date(1970, 1, 20))
    if kind == "t":
        return st.datetimes(dt.datetime(1999, 12, 31, 22), dt.datetime(2000, 1, 1, 2), timezones=st.just(dt.UTC))
    if kind == "m":
        return st.decimals(-100, 100, places=2, allow_nan=False)
    if kind == "w":     # more digits than a double holds, and than Python's default decimal context
        return st.one_of(st.decimals(-10 ** 27, 10 ** 27, places=10, allow_nan=False),
                         st.decimals(-1, 1, places=10, allow_nan=False))
    return st.booleans()


_TYPES = {"i": pa.int64(), "f": pa.float64(), "s": pa.string(), "d": pa.date32(), "t": pa.timestamp("us", "UTC"),
          "m": pa.decimal128(10, 2), "w": pa.decimal128(38, 10), "b": pa.bool_()}
_COLS = "ifsdtmwb"


def _literal(kind: str, v) -> str:
    if v is None:
        return "NULL"
    if kind == "f":
        return "'NaN'" if math.isnan(v) else ("'Infinity'" if v == math.inf else repr(float(v)))
    if kind == "s":
        return "'" + v.replace("'", "''") + "'"
    if kind == "d":
        return f"DATE '{v.isoformat()}'"
    if kind == "t":
        return f"TIMESTAMP '{v.strftime('%Y-%m-%d %H:%M:%S.%f')}'"
    if kind == "b":
        return "true" if v else "false"
    return format(v, "f") if isinstance(v, decimal.Decimal) else str(v)


def _double(v) -> str:
    """``v`` as a double literal (Spark SQL: a number with an exponent)."""
    text = repr(float(v)).replace("e+", "e")
    return text if "e" in text else text + "e0"


@st.composite
def conditions(draw, depth: int = 0) -> str:
    kind = draw(st.sampled_from(_COLS))
    col = f"c_{kind}"
    if kind in "imw" and draw(st.booleans()):
        # a double literal: the column's values are compared converted to double
        op = draw(st.sampled_from(["=", "!=", "<", "<=", ">", ">="]))
        return f"{col} {op} {_double(draw(_present(kind)))}"
    form = draw(st.sampled_from(["cmp", "cmp", "cmp", "in", "null", "notnull"] + (["and", "or"] if depth < 2 else [])))
    if form in ("and", "or"):
        return f"({draw(conditions(depth + 1))}) {form.upper()} ({draw(conditions(depth + 1))})"
    if form == "null":
        return f"{col} IS NULL"
    if form == "notnull":
        return f"{col} IS NOT NULL"
    if form == "in":
        items = draw(st.lists(_present(kind), min_size=1, max_size=3))
        return f"{col} IN ({', '.join(_literal(kind, v) for v in items)})"
    op = draw(st.sampled_from(["=", "!=", "<", "<=", ">", ">="] if kind != "b" else ["=", "!="]))
    return f"{col} {op} {_literal(kind, draw(_values(kind)))}"


@st.composite
def batches(draw):
    n = draw(st.integers(1, 4))
    out = []
    key = 0
    for _ in range(n):
        rows = draw(st.integers(1, 6))
        cols = {f"c_{k}": draw(st.lists(_values(k), min_size=rows, max_size=rows)) for k in _COLS}
        out.append((list(range(key, key + rows)), cols))
        key += rows
    return out


def _table(ids, cols, ts) -> pa.Table:
    data = {"id": pa.array(ids, pa.int64()), "ts": pa.array([ts] * len(ids), pa.int64())}
    for k in _COLS:
        data[f"c_{k}"] = pa.array(cols[f"c_{k}"], _TYPES[k])
    return pa.table(data)


def _rows(q) -> list:
    return sorted(q.to_arrow().drop_columns([c for c in q.to_arrow().column_names if c.startswith("_hoodie")])
                  .to_pylist(), key=lambda r: r["id"])


SKIPPED: dict[str, int] = {"skipped": 0, "plans": 0}


def write_and_update(t: lk.Table, data: list, update: st.DataObject) -> None:
    """Bulk insert each generated batch, then upsert new values of some keys of the first."""
    for ids, cols in data:
        t.bulk_insert(_table(ids, cols, 0))
    ids, cols = data[0]
    chosen = update.draw(st.lists(st.sampled_from(ids), min_size=1, max_size=len(ids), unique=True))
    new = {f"c_{k}": update.draw(st.lists(_values(k), min_size=len(chosen), max_size=len(chosen))) for k in _COLS}
    t.upsert(_table(chosen, new, 1))


@pytest.mark.parametrize("table_type", ["cow", "mor"])
@settings(max_examples=25, deadline=None, database=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=batches(), update=st.data(), where=st.lists(conditions(), min_size=4, max_size=8))
def test_a_filtered_read_returns_the_rows_a_full_read_keeps(tmp_path_factory, table_type, data, update, where):
    root = tmp_path_factory.mktemp("skip")
    lake = lk.Lake(str(root), options=lk.TableOptions(engine="local", metadata=True))
    t = lake.create_table("t", key="id", ordering="ts", table_type=table_type)
    write_and_update(t, data, update)
    for plan in check_filtered_reads(lk.open_table(t.path), update, where):
        SKIPPED["skipped"] += plan.skipped_slices
        SKIPPED["plans"] += 1


def check_filtered_reads(t: lk.Table, update: st.DataObject, where: list[str]) -> list:
    """Each filter of ``where``, and comparisons drawn with the numbers ``t`` stores, reads the
    rows a full read of ``t`` keeps; returns the read plans."""
    full = t.read().to_arrow()
    # stored numbers, as themselves and as doubles: a file's bounds compared as the read compares them
    near = [(k, v) for k in "imw" for v in full.column(f"c_{k}").to_pylist() if v is not None]
    if near:
        for k, v in update.draw(st.lists(st.sampled_from(near), max_size=4)):
            op = update.draw(st.sampled_from(["=", "<=", ">=", "<", ">"]))
            where = where + [f"c_{k} {op} {update.draw(st.sampled_from([_double(v), _literal(k, v)]))}"]
    plans = []
    for w in where:
        q = t.read(where=w)
        plan = q.plan()
        expected = full.filter(parse_where(w).bind(full.schema, "UTC").to_arrow())
        want = sorted(expected.drop_columns([c for c in expected.column_names if c.startswith("_hoodie")])
                      .to_pylist(), key=lambda r: r["id"])
        assert _same(_rows(q), want), (w, plan)
        plans.append(plan)
    return plans


def _same(a: list, b: list) -> bool:
    def norm(r):
        return {k: ("nan" if isinstance(v, float) and math.isnan(v) else v) for k, v in r.items()}
    return [norm(r) for r in a] == [norm(r) for r in b]


def test_skipping_happened():
    """The generated reads above skipped file slices (run after them)."""
    if SKIPPED["plans"] == 0:
        pytest.skip("run with the generated reads")
    assert SKIPPED["skipped"] > 0


def test_a_read_skips_the_files_a_filter_rules_out(tmp_path):
    lake = lk.Lake(str(tmp_path), options=lk.TableOptions(engine="local", metadata=True))
    t = lake.create_table("t", key="id", partition_by="p", ordering="ts", table_type="mor")
    for i in range(4):
        t.bulk_insert(pa.table({"id": list(range(i * 10, i * 10 + 10)), "p": ["a"] * 10, "ts": [0] * 10,
                                "d": [decimal.Decimal(i * 10 + j) for j in range(10)]}))
    t.upsert(pa.table({"id": [3], "p": ["a"], "ts": [1], "d": [decimal.Decimal(500)]}))   # a log file
    t = lk.open_table(t.path)
    plan = t.read(where="id = 15").plan()
    assert (len(plan.slices), plan.skipped_slices) == (1, 3)
    assert t.read(where="d = 500").to_arrow().column("id").to_pylist() == [3]
    assert t.read(where="d = 500").plan().skipped_slices == 3       # the log file's range holds 500
    assert t.read(where="d > 1000").plan().slices == ()


@pytest.mark.spark
@pytest.mark.parametrize("table_type", ["cow", "mor"])
def test_files_the_spark_engine_writes_get_their_statistics(tmp_path, spark, table_type):
    """Parquet written by Spark (parquet-mr footers: decimals as INT32/INT64 or fixed bytes,
    timestamps, NaN-only chunks without bounds) gets records equal to the rows it holds, and
    reads skip by them."""
    import datetime as dt

    from ..corpus_model import check_mdt

    def rows(i, ids):
        return pa.table({
            "id": ids, "p": ["a" if k % 2 else "b" for k in ids], "ts": [i] * len(ids),
            "d": pa.array([(decimal.Decimal(k) / 7).quantize(decimal.Decimal("0.001")) for k in ids],
                          pa.decimal128(12, 3)),
            "big": pa.array([decimal.Decimal(k) * 10 ** 20 for k in ids], pa.decimal128(38, 2)),
            "t": pa.array([dt.datetime(2024, 1, 1, tzinfo=dt.UTC) + dt.timedelta(hours=k) for k in ids],
                          pa.timestamp("us", "UTC")),
            "day": pa.array([dt.date(2020, 1, 1) + dt.timedelta(days=k) for k in ids], pa.date32()),
            "s": [f"é{k}" for k in ids], "f": [float(k) if k % 3 else math.nan for k in ids]})
    lake = lk.Lake(str(tmp_path), spark=spark, options=lk.TableOptions(engine="spark", metadata=True))
    t = lake.create_table("t", key="id", partition_by="p", ordering="ts", table_type=table_type)
    t.bulk_insert(rows(0, list(range(20))))
    t.upsert(rows(1, [1, 2, 30]))
    check_mdt(t.path, "after Spark writes")
    t = lk.open_table(t.path)
    for where, n in [("d = 1", 1), ("big > 1000", 20), ("day < DATE '2020-01-05'", 4), ("s = 'é3'", 1)]:
        q = t.read(where=where)
        assert q.count() == n, where
    q = t.read(where="big > 1950000000000000000000")       # only id 30 (in p=b): p=a's file is ruled out
    assert q.count() == 1 and q.plan().skipped_slices >= 1


# -- cases found by review -----------------------------------------------------------------------------
def _lake(root, **options) -> lk.Lake:
    return lk.Lake(str(root), options=lk.TableOptions(engine="local", metadata=True, **options))


def test_decimal_bounds_of_more_than_28_digits_are_exact(tmp_path):
    """A decimal(38, 0) bound is not rounded to Python's default 28 digits (the largest value
    of a file rounded down made the file skipped for it)."""
    big = 10 ** 30
    t = _lake(tmp_path).create_table("t", key="id", ordering="ts")
    t.bulk_insert(pa.table({"id": [1, 2], "ts": [0, 0],
                            "d": pa.array([decimal.Decimal(big), decimal.Decimal(big + 5)], pa.decimal128(38, 0))}))
    t = lk.open_table(t.path)
    assert t.read(where=f"d = {big + 5}").to_arrow().column("id").to_pylist() == [2]
    assert t.read(where=f"d >= {big + 5}").to_arrow().column("id").to_pylist() == [2]
    assert t.read(where=f"d > {big + 5}").plan().skipped_slices == 1


def test_avro_log_blocks_of_decimals_of_more_than_28_digits(tmp_path):
    """The statistics of an Avro log block holding a decimal(38, 0) beyond 28 digits are
    computed (the write failed with decimal.InvalidOperation)."""
    big = 10 ** 30
    t = _lake(tmp_path, log_block_format="avro").create_table("t", key="id", ordering="ts", table_type="mor")
    t.bulk_insert(pa.table({"id": [1], "ts": [0], "d": pa.array([decimal.Decimal(big)], pa.decimal128(38, 0))}))
    t.upsert(pa.table({"id": [1], "ts": [1], "d": pa.array([decimal.Decimal(big + 7)], pa.decimal128(38, 0))}))
    t = lk.open_table(t.path)
    assert t.read(where=f"d = {big + 7}").to_arrow().column("id").to_pylist() == [1]
    from ..corpus_model import check_mdt
    check_mdt(t.path, "after an Avro log block of a decimal(38, 0)")


def test_a_double_compared_with_a_decimal_column_is_compared_as_doubles(tmp_path):
    """``d = 0.30000000000000004e0`` compares ``d`` converted to double: Arrow's conversion
    of 0.29999999999999999 gives that double (Spark's gives 0.3), so the file may match."""
    t = _lake(tmp_path).create_table("t", key="id", ordering="ts")
    t.bulk_insert(pa.table({"id": [1], "ts": [0], "d": pa.array([decimal.Decimal("0.29999999999999999")],
                                                                pa.decimal128(20, 17))}))
    t = lk.open_table(t.path)
    full = t.read().to_arrow()
    for w in ("d = 0.30000000000000004e0", "d >= 0.30000000000000004e0", "d != 0.29999999999999999e0"):
        want = full.filter(parse_where(w).bind(full.schema, "UTC").to_arrow()).num_rows
        assert want == 1 and t.read(where=w).to_arrow().num_rows == want, w


def _may_match(where, schema: pa.Schema, rows: pa.Table) -> bool:
    from lakesdk.format.column_stats import ranges_from_arrow
    from lakesdk.read.skipping import may_match
    bound = (parse_where(where) if isinstance(where, str) else where).bind(schema, "UTC")
    return may_match(bound.tree, {r.column: r for r in ranges_from_arrow(rows, schema.names)})


def test_spark_comparisons_in_double_are_not_ruled_out():
    """Spark compares a bigint with a double as doubles (2**53 + 1 equals 2.0**53) and orders
    NaN above every number (every bigint is below NaN)."""
    schema = pa.schema([("v", pa.int64())])
    rows = pa.table({"v": pa.array([2 ** 53 + 1], pa.int64())})
    assert _may_match("v = 9007199254740992e0", schema, rows)
    assert _may_match("v <= 9007199254740992e0", schema, rows)
    assert _may_match(from_filters([("v", "<", math.nan)]), schema, rows)


def test_a_nan_bound_rules_nothing_out():
    """Apache Hudi orders a log file's float values as Java's Double.compare does (NaN above
    every number): its record of a log file holding NaN says max NaN, which bounds nothing."""
    rec = {"fileName": "f.log", "columnName": "x", "minValue": {"value": 1.0}, "maxValue": {"value": math.nan},
           "valueCount": 3, "nullCount": 0, "valueType": {"typeOrdinal": 6, "additionalInfo": None}}
    from lakesdk.read.skipping import may_match
    r = range_of_record(rec)
    schema = pa.schema([("x", pa.float64())])
    for w in ("x = 2.0", "x <= 2.0", "x < 5.0", "x IN (3.0, 4.0)"):     # the file may hold 2.0, 3.0 ...
        assert may_match(parse_where(w).bind(schema, "UTC").tree, {"x": r}), w
    low = range_of_record({**rec, "minValue": {"value": math.nan}, "maxValue": {"value": math.nan}})
    assert may_match(parse_where("x < 5.0").bind(schema, "UTC").tree, {"x": low})


def test_zoned_timestamps_at_the_ends_of_the_range_have_bounds():
    """Values computed from a column (an Avro log block's, a footer without statistics) of a
    zoned timestamp at the ends of the range: 0001-01-01 UTC is year 0 in New York, which has
    no Python datetime; the bounds are the counts of the unit, as stored (found by the model)."""
    import datetime as dt

    from lakesdk.format.column_stats import ranges_from_arrow
    from lakesdk.read.predicate import from_filters
    ty = pa.timestamp("us", "America/New_York")
    lo, hi = -62_135_596_800_000_000, 253_402_300_799_999_999
    rows = pa.table({"t": pa.array([lo, None, 5, hi], ty), "d": pa.array([-719_162, 0, None, 2_932_896], pa.date32())})
    got = {r.column: r for r in ranges_from_arrow(rows, ["t", "d"])}
    assert (got["t"].min_value, got["t"].max_value, got["t"].null_count) == (lo, hi, 1)
    assert (got["d"].min_value, got["d"].max_value, got["d"].null_count) == (-719_162, 2_932_896, 1)
    utc = dt.UTC
    assert _may_match(from_filters([("t", "<", dt.datetime(1, 1, 2, tzinfo=utc))]), rows.schema, rows)
    assert _may_match(from_filters([("t", ">", dt.datetime(9999, 12, 31, tzinfo=utc))]), rows.schema, rows)
