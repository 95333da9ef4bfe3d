"""A filter as a scan of base files applies it (:class:`lakesdk.format.read_plan.ScanFilter`).

Parquet writers leave NaN out of a floating-point column chunk's bounds (a row group of 1.5
and NaN says [1.5, 1.5], which Arrow takes for its one value), so a filter comparing such a
column as Spark SQL does (NaN above every number) cannot be pushed into Arrow's row-group
pruning whole.  The scan then reads the columns the read returns and those the filter names,
pushes the filter relaxed (each condition on floating-point values TRUE, FALSE below an odd
number of NOTs) and filters exactly after reading: generated predicates over files of such
row groups, written by pyarrow with its statistics, keep the rows the filter keeps in memory
(the differential test against Spark SQL is tests/read/test_predicates.py)."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lakesdk as lk
from lakesdk.engine.base_file import PARQUET, ParquetReader
from lakesdk.read.predicate import parse_where
from lakesdk.storage import Storage

from .test_predicates import ROWS, SCHEMA, _arrow_rows, _tree

NAN = float("nan")


def _bind(where: str, schema: pa.Schema = SCHEMA):
    return parse_where(where).bind(schema, "UTC")


def test_the_filter_knows_which_conditions_arrow_may_prune_by():
    """Conditions on floating-point values are relaxed; the others, and whether a
    floating-point column is NULL (null counts count NaN as a value), are pushed."""
    sf = _bind("f > 5 AND i = 3").scan_filter()
    assert not sf.exact and sf.columns == {"f", "i"} and sf.prune.equals(pc.field("i") == pa.scalar(3, pa.int64()))
    assert _bind("f > 5").scan_filter().prune is None
    assert _bind("NOT (f > 5 OR i = 3)").scan_filter().prune.equals(pc.invert(pc.field("i") == pa.scalar(3, pa.int64())))
    assert _bind("f > 5 OR i = 3").scan_filter().prune is None
    assert _bind("st.x = 1 AND f IS NULL").scan_filter().exact
    assert _bind("st.x = 1 AND f IS NULL").scan_filter().columns == {"st", "f"}
    assert not _bind("f + 1 IS NULL").scan_filter().exact           # arithmetic on the values: relaxed
    assert not _bind("(f > 1) = TRUE").scan_filter().exact


def _write(tmp_path, rows: list[tuple], group: int) -> str:
    path = str(tmp_path / "rows.parquet")
    pq.write_table(_arrow_rows(rows), path, row_group_size=group)
    return path


def test_bounds_that_leave_nan_out_prune_the_exact_filter_wrongly(tmp_path):
    """Why the filter is relaxed: Arrow prunes the row group of 1.5 and NaN for ``f > 5``."""
    path = _write(tmp_path, [ROWS[0], ROWS[6]], 2)
    expr = _bind("f > 5").to_arrow()
    assert ds.dataset(path).to_table(filter=expr).num_rows == 0
    assert _arrow_rows([ROWS[0], ROWS[6]]).filter(expr).column("k").to_pylist() == ["6"]


def _keys(t: pa.Table) -> list[str]:
    return sorted(t.column("k").to_pylist())


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(order=st.permutations(range(len(ROWS))), group=st.integers(1, 3), where=_tree(["f", "i", "l", "dec", "s", "st.x"]),
       columns=st.sampled_from([["k"], ["k", "s"], None]))
def test_scans_keep_the_rows_the_filter_keeps(tmp_path, order, group, where, columns):
    rows = [ROWS[i] for i in order]
    _write(tmp_path, rows, group)        # rows.parquet, overwritten by each example
    bound = _bind(where)
    want = _arrow_rows(rows).filter(bound.to_arrow())
    want = want.select(columns) if columns is not None else want
    storage, flt = Storage(str(tmp_path)), bound.scan_filter()
    table = PARQUET.scan_table(storage, ["rows.parquet"], SCHEMA, columns, flt)
    streamed = pa.Table.from_batches(list(PARQUET.batches(storage, ["rows.parquet"], SCHEMA, columns, flt)), want.schema)
    tagged = pa.Table.from_batches([b for _, b in PARQUET.scan(storage, ["rows.parquet"], SCHEMA, columns, flt)],
                                   want.schema)
    for got in (table, streamed, tagged):
        assert got.schema == want.schema and _keys(got) == _keys(want), (where, _keys(got), _keys(want))


class _Spy:
    """An Arrow dataset that records the columns and the filter each scan asks for."""

    def __init__(self, dataset, calls: list) -> None:
        self._dataset, self._calls = dataset, calls

    def __getattr__(self, name):
        attr = getattr(self._dataset, name)
        if name not in ("scanner", "to_table", "to_batches"):
            return attr

        def call(*args, **kw):
            self._calls.append((kw.get("columns"), kw.get("filter")))
            return attr(*args, **kw)
        return call


@pytest.fixture
def scans(monkeypatch) -> list:
    calls: list = []
    dataset = ParquetReader._dataset

    def spied(self, storage, paths, schema):
        d, urls = dataset(self, storage, paths, schema)
        return _Spy(d, calls), urls
    monkeypatch.setattr(ParquetReader, "_dataset", spied)
    return calls


@pytest.mark.parametrize("table_type", ["cow", "mor"])
def test_a_float_filtered_read_of_a_wide_table_reads_the_columns_it_needs(tmp_path, scans, table_type):
    """``f > 0.5`` (NaN rows included, as Spark SQL orders NaN) on a 20-column table reads
    ``id`` and ``f``, not every column; a filter on an integer column is pushed whole."""
    n = 40
    data = {"id": list(range(n)), "f": [NAN if i % 7 == 0 else i / n for i in range(n)]}
    data |= {f"d{j}": [float(i * j) for i in range(n)] for j in range(9)}
    data |= {f"i{j}": [i * j for i in range(n)] for j in range(9)}
    lake = lk.Lake(str(tmp_path), options=lk.TableOptions(engine="local", progress=False))
    t = lake.create_table("t", key="id", table_type=table_type)
    t.bulk_insert(pa.table(data))
    want = sorted(i for i, f in enumerate(data["f"]) if f != f or f > 0.5)
    if table_type == "mor":     # rows in log files: id 1 NaN now, id 14 (NaN) 0.25
        t.upsert(pa.table({**{k: [v[1], v[14]] for k, v in data.items()}, "f": [NAN, 0.25]}))
        want = sorted({*want, 1} - {14})
    q = t.read(where="f > 0.5", columns=["id"])
    assert sorted(q.to_arrow().column("id").to_pylist()) == want
    assert sorted(q.to_batches().read_all().column("id").to_pylist()) == want
    assert q.count() == len(want)
    assert scans
    needed = {"id", "f", "_hoodie_record_key"}     # merge-on-read: the record key matches log versions
    assert all(cols is not None and set(cols) <= needed for cols, _ in scans), scans
    assert all(flt is None for _, flt in scans), scans
    scans.clear()
    assert sorted(t.read(where="i3 > 60", columns=["id"]).to_arrow().column("id").to_pylist()) == list(range(21, n))
    if table_type == "cow":
        assert scans and all(cols == ["id"] and flt is not None for cols, flt in scans), scans
