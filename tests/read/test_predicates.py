"""Filters: one typed predicate for to_arrow(), to_pandas(), to_spark() and partition pruning.

Regression tests for filters that raised raw Arrow errors or disagreed between engines, and a
differential Hypothesis test: random predicates give the same rows from ``to_arrow()``,
``to_spark()`` and Spark SQL's own ``DataFrame.filter(text)`` over the same data."""

from __future__ import annotations

import datetime as dt
import decimal

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lakesdk as lk
from lakesdk.read.predicate import from_filters, parse_where

pytestmark = pytest.mark.spark

UTC = dt.UTC
D = decimal.Decimal
SCHEMA = pa.schema([
    ("k", pa.string()), ("p", pa.string()), ("i", pa.int32()), ("l", pa.int64()), ("f", pa.float64()),
    ("dec", pa.decimal128(10, 2)), ("s", pa.string()), ("b", pa.bool_()), ("d", pa.date32()),
    ("ts", pa.timestamp("us", tz="UTC")), ("st", pa.struct([("x", pa.int64())])),
])
SPARK_DDL = ("k string, p string, i int, l bigint, f double, dec decimal(10,2), s string, b boolean, d date, "
             "ts timestamp, st struct<x: bigint>")
ROWS = [
    ("0", "a", 1, 10, 1.5, D("1.50"), "a", True, dt.date(2024, 1, 1), dt.datetime(2024, 1, 1, tzinfo=UTC), {"x": 1}),
    ("1", "b", 2, -5, -0.5, D("600.00"), "ab", False, dt.date(2024, 1, 2), dt.datetime(2024, 1, 2, 10, tzinfo=UTC),
     {"x": 2}),
    ("2", None, None, None, None, None, None, None, None, None, None),
    ("3", "", 3, 0, 2.5, D("-3.25"), "", True, dt.date(2024, 1, 3), dt.datetime(2024, 1, 2, tzinfo=UTC), {"x": None}),
    ("4", "a", -1, 2 ** 40, 0.0, D("0.00"), "b%", False, dt.date(2024, 1, 2),
     dt.datetime(2024, 1, 2, 10, 0, 0, 500000, tzinfo=UTC), {"x": 3}),
    ("5", "c", 0, 1, 100.25, D("500.00"), "ba", None, None, dt.datetime(2023, 12, 31, 23, 59, 59, tzinfo=UTC),
     {"x": 0}),
    # Spark SQL orders NaN above every number and takes it equal to itself (Parquet bounds leave it out)
    ("6", "c", None, None, float("nan"), None, None, None, None, None, None),
    ("7", "b", None, None, float("inf"), None, None, None, None, None, None),
    ("8", "b", None, None, float("-inf"), None, None, None, None, None, None),
]


def _arrow_rows(rows: list[tuple]) -> pa.Table:
    return pa.Table.from_pylist([dict(zip(SCHEMA.names, r)) for r in rows], schema=SCHEMA)


@pytest.fixture(scope="module")
def tables(spark, tmp_path_factory):
    """A copy-on-write and a merge-on-read table (rows in log files) partitioned by ``p``, and
    the same rows as a plain Spark DataFrame."""
    lake = lk.Lake(str(tmp_path_factory.mktemp("predicates") / "lake"), spark=spark)
    out = {}
    for kind in ("cow", "mor"):
        t = lake.create_table(kind, key="k", partition_by="p", table_type=kind)
        first = [(r[0], r[1], 9, 9, 9.0, D("9.00"), "old", True, dt.date(2000, 1, 1),
                  dt.datetime(2000, 1, 1, tzinfo=UTC), {"x": 9}) for r in ROWS]
        t.upsert(_arrow_rows(first))
        t.upsert(_arrow_rows(ROWS))
        out[kind] = t
    assert any(s.log_files for s in out["mor"].read().plan().slices)
    out["plain"] = spark.createDataFrame(ROWS, SPARK_DDL)
    return out


def _keys_arrow(t, where) -> list[str]:
    return sorted(t.read(where=where).to_arrow().column("k").to_pylist())


def _keys_spark(t, where) -> list[str]:
    return sorted(r.k for r in t.read(where=where).to_spark().select("k").collect())


def _both(t, where) -> list[str]:
    a, s = _keys_arrow(t, where), _keys_spark(t, where)
    assert a == s, (where, a, s)
    assert sorted(t.read(where=where).to_pandas()["k"]) == a
    return a


# -- regressions: each of these raised a raw Arrow error or disagreed between engines ---------------------

@pytest.mark.parametrize("kind", ["cow", "mor"])
@pytest.mark.parametrize("where,keys", [
    ("ts > '2024-01-02'", ["1", "4"]),                                  # text for a timestamp column
    ("i = '1'", ["0"]),                                                 # text for an int column
    ("dec > 500", ["1"]),                                               # an int for a decimal column
    ("d = '2024-01-02'", ["1", "4"]),                                   # text for a date column
    ("ts = TIMESTAMP '2024-01-02 10:00:00'", ["1"]),                    # TIMESTAMP on a UTC column
    ("s = 'a' OR NULL", ["0"]),                                         # NULL in a boolean context
    ('s = "a"', ["0"]),                                                 # "x" is text, as in Spark SQL
    ("s LIKE 'b%'", ["4", "5"]),
    ("s LIKE 'b\\\\%'", ["4"]),                                         # an escaped wildcard
    ("s NOT LIKE '%a%'", ["3", "4"]),
    ("st.x >= 2", ["1", "4"]),                                          # a struct field
    ("`st`.`x` = 1", ["0"]),
    ("i NOT IN (1, NULL)", []),                                         # NULL in NOT IN: never true
    ("l BETWEEN -5 AND 1", ["1", "3", "5"]),
    ("f > 5", ["5", "6", "7"]),                                         # NaN is above every number
    ("f = 'NaN'", ["6"]),                                               # and equal to itself
    ("f != 'NaN'", ["0", "1", "3", "4", "5", "7", "8"]),
    ("f >= 'Infinity'", ["6", "7"]),
    ("f IN ('NaN', 1.5)", ["0", "6"]),
    ("NOT (f <= 100.25)", ["6", "7"]),
    ("f < 'NaN' AND f > 2", ["3", "5", "7"]),
    ("p IS NULL OR p = ''", ["2", "3"]),                                # the default partition, pruned
    ("dec = '600.00' AND p = 'b'", ["1"]),
])
def test_filter_evaluates_the_same_in_arrow_pandas_and_spark(tables, kind, where, keys):
    assert _both(tables[kind], where) == keys


@pytest.mark.parametrize("kind", ["cow", "mor"])
def test_filter_tuples_build_the_same_tree_for_spark(tables, kind):
    t = tables[kind]
    filters = [("s", "in", ["a", "ab"]), ("l", ">", -10)]
    assert from_filters(filters).tree == parse_where("s IN ('a', 'ab') AND l > -10").tree
    assert sorted(t.read(where=filters).to_arrow().column("k").to_pylist()) == ["0", "1"]
    assert sorted(r.k for r in t.read(where=filters).to_spark().collect()) == ["0", "1"]
    dnf = [[("p", "=", "a")], [("d", "=", dt.date(2024, 1, 3))]]   # OR of ANDs
    assert sorted(r.k for r in t.read(where=dnf).to_spark().collect()) == ["0", "3", "4"]
    assert sorted(t.read(where=dnf).to_arrow().column("k").to_pylist()) == ["0", "3", "4"]


@pytest.mark.parametrize("where,column,fix", [
    ("nope = 1", "nope", "it has"),
    ("s = 1", "s", "quotes"),
    ("i = 'x'", "i", "whole number"),
    ("ts > 'soon'", "ts", "session time zone"),
    ("st = 1", "st", "fields"),
    ("st.y = 1", "st.y", "no field"),
    ("f", "f", "boolean"),
    ("d LIKE 'x'", "d", "LIKE"),
])
def test_bad_filter_is_a_typed_error_naming_column_types_and_fix_before_reading(tables, where, column, fix):
    t = tables["cow"]
    with pytest.raises(lk.InvalidFilterError) as err:
        t.read(where=where).plan()   # planning reads no data file
    assert err.value.column == column
    assert fix in str(err.value) and "see docs/filters.md" in str(err.value).lower()
    for run in (lambda q: q.to_arrow(), lambda q: q.to_spark()):
        with pytest.raises(lk.InvalidFilterError):
            run(t.read(where=where))


def test_syntax_error_is_a_typed_error():
    with pytest.raises(lk.InvalidFilterError, match="position"):
        parse_where("a = 1 AND ) b")


def test_timestamp_text_is_read_in_the_session_time_zone():
    sch = pa.schema([("ts", pa.timestamp("us", tz="UTC"))])
    t = pa.table({"ts": pa.array([dt.datetime(2024, 1, 1, 23, tzinfo=UTC)], sch.field("ts").type)})
    p = parse_where("ts = '2024-01-02 00:00:00'")
    assert t.filter(p.bind(sch, "UTC").to_arrow()).num_rows == 0
    assert t.filter(p.bind(sch, "+01:00").to_arrow()).num_rows == 1
    assert t.filter(parse_where("ts = '2024-01-02T00:00:00+01:00'").bind(sch, "UTC").to_arrow()).num_rows == 1


# -- differential: to_arrow() == to_spark() == Spark SQL over a plain DataFrame ----------------------------

def _lit_int() -> st.SearchStrategy[str]:
    return st.one_of(st.integers(-2, 4).map(str), st.integers(-2, 4).map(lambda n: f"'{n}'"),
                     st.sampled_from(["1.5", "-0.5", "2.0", "1.5e0", "3L"]))


_LITS = {
    "i": _lit_int(), "l": _lit_int(), "st.x": _lit_int(),
    "f": st.sampled_from(["1.5", "0", "-0.5", "2.5e0", "'1.5'", "100.25", "3", "'NaN'", "'Infinity'", "'-Infinity'"]),
    "dec": st.sampled_from(["500", "1.5", "'1.50'", "600.00", "-3.25", "0", "1.5e0", "'500'"]),
    "s": st.sampled_from(["'a'", '"ab"', "''", "'b%'", "'ba'", "'z'"]),
    "p": st.sampled_from(["'a'", "'b'", "''", '"c"', "'zz'"]),
    "b": st.sampled_from(["TRUE", "FALSE", "'true'", "'false'"]),
    "d": st.sampled_from(["'2024-01-02'", "DATE '2024-01-01'", "'2024-01-03'", "TIMESTAMP '2024-01-02 12:00:00'"]),
    "ts": st.sampled_from(["'2024-01-02'", "'2024-01-02 10:00:00'", "TIMESTAMP '2024-01-01 00:00:00'",
                           "DATE '2024-01-02'", "'2024-01-02T10:00:00.5Z'", "'2023-12-31 23:59:59'"]),
}
_COLS = sorted(_LITS)
_OPS = ["=", "!=", "<>", "<", "<=", ">", ">="]


@st.composite
def _atom(draw: st.DrawFn, cols: list[str] | None = None) -> str:
    c = draw(st.sampled_from(cols or _COLS))
    lit = _LITS[c]
    form = draw(st.integers(0, 9))
    if form == 0:
        return f"{c} IS {draw(st.sampled_from(['', 'NOT ']))}NULL"
    if form == 1:
        vals = draw(st.lists(st.one_of(lit, st.just("NULL")), min_size=1, max_size=3))
        return f"{c} {draw(st.sampled_from(['', 'NOT ']))}IN ({', '.join(vals)})"
    if form == 2 and c not in ("b", "s", "p"):
        return f"{c} {draw(st.sampled_from(['', 'NOT ']))}BETWEEN {draw(lit)} AND {draw(lit)}"
    if form == 3 and c in ("s", "p"):
        pat = draw(st.sampled_from(["'a%'", "'%a'", "'_'", "'%'", "'b\\\\%'", "'%b%'"]))
        return f"{c} {draw(st.sampled_from(['', 'NOT ']))}LIKE {pat}"
    if form == 4:
        return f"{c} {draw(st.sampled_from(_OPS))} NULL"
    if form == 5 and c == "b":
        return draw(st.sampled_from(["b", "NOT b", "NULL", "TRUE"]))
    left, right = c, draw(lit)
    if draw(st.booleans()) and form == 6:
        left, right = right, left
    if c == "st.x" and draw(st.booleans()):
        left = left.replace("st.x", "`st`.`x`")
    return f"{left} {draw(st.sampled_from(_OPS))} {right}"


def _tree(cols: list[str] | None = None) -> st.SearchStrategy[str]:
    return st.recursive(_atom(cols), lambda sub: st.one_of(
        st.tuples(sub, st.sampled_from(["AND", "OR"]), sub).map(lambda x: f"({x[0]} {x[1]} {x[2]})"),
        sub.map(lambda x: f"NOT ({x})")), max_leaves=4)


_PRED = st.one_of(_tree(), st.tuples(_tree(), _atom(["p"])).map(lambda x: f"({x[0]}) AND {x[1]}"))


@pytest.mark.parametrize("kind", ["cow", "mor"])
@settings(max_examples=45, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                  HealthCheck.too_slow])
@given(where=_PRED)
def test_random_predicates_agree_with_spark_sql(tables, kind, where):
    want = sorted(r.k for r in tables["plain"].filter(where).select("k").collect())
    t = tables[kind]
    got_arrow = _keys_arrow(t, where)
    got_spark = _keys_spark(t, where)
    assert got_arrow == want, (where, got_arrow, want)
    assert got_spark == want, (where, got_spark, want)


@pytest.mark.parametrize("table_type", ["cow", "mor"])
def test_a_file_holding_nan_keeps_no_bounds_of_that_column(spark, tmp_path, table_type):
    """Parquet writers leave NaN out of a chunk's bounds: a file of 1.0 and NaN would say
    [1, 1], and Spark's Parquet reader (Hudi's too) would prune it for ``c > 5`` although
    Spark SQL orders NaN above every number. lakesdk writes no statistics of such a column,
    so every reader finds the NaN row; the other columns keep theirs."""
    import glob

    import pyarrow.parquet as pq
    lake = lk.Lake(str(tmp_path), spark=spark, options=lk.TableOptions(engine="local"))
    t = lake.create_table("t", key="id", table_type=table_type)
    t.upsert(pa.table({"id": [1, 2], "c": [1.0, float("nan")], "d": [1.0, 2.0]}))
    if table_type == "mor":
        t.upsert(pa.table({"id": [1], "c": [float("nan")], "d": [3.0]}))      # an update: a log block
    want = ["1", "2"] if table_type == "mor" else ["2"]
    assert sorted(str(r["id"]) for r in t.read(where="c > 5").to_arrow().to_pylist()) == want
    assert sorted(str(r.id) for r in t.read(where="c > 5").to_spark().collect()) == want
    base = next(f for f in glob.glob(f"{t.path}/*.parquet") if 2 in pq.read_table(f, columns=["id"]).column(0).to_pylist())
    meta = pq.ParquetFile(base).metadata.row_group(0)
    stats = {meta.column(i).path_in_schema: meta.column(i).statistics for i in range(meta.num_columns)}
    assert stats["c"] is None and stats["d"] is not None and stats["d"].has_min_max
    assert [r.id for r in spark.read.parquet(base).where("c > 5").collect()] == [2]
