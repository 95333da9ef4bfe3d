"""The read API of pyiceberg, deltalake and polars: ``Query.limit``, ``to_batches`` and the
Arrow PyCapsule stream, ``to_polars``, ``count()`` from metadata where it answers exactly,
``delete(where=)``, and ``lakesdk read`` (streaming, JSON lines, closed pipes, typed errors)."""

from __future__ import annotations

import datetime as dt
import decimal
import json
import os
import subprocess
import sys

import pandas as pd
import pyarrow as pa
import pytest

import lakesdk as lk
from lakesdk.cli.main import main
from lakesdk.read.plan import decided_by_partitions

from ..helpers import ROOT, hudi_rows

PARTS = [f"p{i}" for i in range(6)]
WHERES = [None, "v < 0", "p = 'p1'", "p IN ('p1', 'p2') AND v >= 10", "v > 100000"]


def _lake(path) -> lk.Lake:
    return lk.Lake(str(path), options=lk.TableOptions(engine="local", markers="direct"))


def _data(ids, v=None) -> pd.DataFrame:
    ids = list(ids)
    return pd.DataFrame({"id": ids, "p": [PARTS[i % len(PARTS)] for i in ids],
                         "v": [i if v is None else v for i in ids]})


@pytest.fixture(scope="module")
def tables(tmp_path_factory):
    """A copy-on-write and a merge-on-read table (updates in log files) partitioned by ``p``,
    each with the result of its first commit (for time travel)."""
    lake = _lake(tmp_path_factory.mktemp("readapi") / "lake")
    out = {}
    for kind in ("cow", "mor"):
        t = lake.create_table(kind, key="id", partition_by="p", table_type=kind)
        first = t.upsert(_data(range(120)))
        t.upsert(_data(range(0, 120, 5), v=-1))
        out[kind] = (t, first)
    assert out["mor"][0].read().plan().merges and not out["cow"][0].read().plan().merges
    return out


def _rows(table: pa.Table) -> list[tuple]:
    return sorted(zip(*(table.column(c).to_pylist() for c in table.column_names)))


# -- limit --------------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["cow", "mor"])
@pytest.mark.parametrize("where", WHERES)
def test_limit_returns_matching_rows_only(tables, kind, where):
    t, _ = tables[kind]
    full = _rows(t.read(where=where).to_arrow())
    for n in (0, 1, 7, 1000):
        for q in (t.read(where=where).limit(n), t.read(where=where, limit=n)):
            got = _rows(q.to_arrow())
            assert len(got) == min(n, len(full)) and set(got) <= set(full), (n, where)
            assert q.count() == len(got)
            assert pa.table(q).num_rows == len(got)


def test_limit_is_a_builder(tables):
    t, _ = tables["cow"]
    q = t.read()
    assert q.limit(3) is not q and q.row_limit is None and q.limit(3).row_limit == 3
    assert q.limit(3).limit(None).to_arrow().num_rows == 120
    assert "limit=3" in repr(q.limit(3))
    for bad in (-1, 1.5, "3", True):
        with pytest.raises(ValueError, match="limit must be a whole number"):
            q.limit(bad)


def test_limit_stops_reading_merge_on_read_slices(tables, monkeypatch):
    import lakesdk.engine.slice_reader as sr
    from lakesdk.engine import read as engine_read
    t, _ = tables["mor"]
    slices = len(t.read().plan().slices)
    assert slices >= 6
    calls = []
    real = sr.read_slice
    monkeypatch.setattr(sr, "read_slice", lambda *a, **k: calls.append(1) or real(*a, **k))
    assert t.read().limit(1).to_arrow().num_rows == 1
    assert len(calls) <= engine_read.READ_AHEAD + 1 < slices + 1


def test_limit_stops_reading_copy_on_write_files(tmp_path):
    """A limit reads the first base files only: the last one, damaged (same size, so the plan
    keeps it), is never opened; a full read finds the damage."""
    t = _lake(tmp_path).create_table("t", key="id", partition_by="p")
    t.upsert(_data(range(60)))
    last = t.read().plan().files[-1]
    path = t.storage.url(last)
    size = os.path.getsize(path)
    with open(path, "wb") as f:
        f.write(b"\0" * size)
    assert t.read(limit=3).to_arrow().num_rows == 3
    assert t.read(where="v >= 0").limit(3).to_batches().read_all().num_rows == 3
    with pytest.raises(lk.CorruptFileError):
        t.read().to_arrow()
    with pytest.raises(lk.CorruptFileError):   # the stream raises the typed error too
        t.read().to_batches().read_all()
    # through the C stream interface an error is text: the consumer's error carries lakesdk's message
    with pytest.raises(pa.ArrowInvalid, match="the Parquet file cannot be read, its bytes are damaged"):
        pa.table(t.read())


def test_limit_to_spark_and_hudi(tables, spark):
    t, _ = tables["mor"]
    assert t.read(where="v < 0").limit(4).to_spark().count() == 4


# -- streams ------------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["cow", "mor"])
@pytest.mark.parametrize("where", [None, "v < 0", "v > 100000"])
def test_batches_and_arrow_stream_equal_to_arrow(tables, kind, where):
    t, _ = tables[kind]
    q = t.read(["id", "v"], where=where)
    want = q.to_arrow()
    reader = q.to_batches()
    assert isinstance(reader, pa.RecordBatchReader) and reader.schema == want.schema
    streamed = reader.read_all()
    assert _rows(streamed) == _rows(want) and streamed.schema == want.schema
    assert _rows(pa.table(q)) == _rows(want)
    assert _rows(pa.RecordBatchReader.from_stream(q).read_all()) == _rows(want)


def test_mor_stream_reads_slice_by_slice(tables):
    t, _ = tables["mor"]
    reader = t.read().to_batches()
    sizes = [b.num_rows for b in reader]
    assert len(sizes) >= len(PARTS) and sum(sizes) == 120


def test_to_polars(tables):
    pl = pytest.importorskip("polars")
    t, _ = tables["mor"]
    q = t.read(["id", "v"], where="v < 0")
    assert q.to_polars().sort("id").equals(pl.from_arrow(q.to_arrow()).sort("id"))
    assert pl.from_arrow(pa.table(q)).height == q.count() == pl.DataFrame(q).height


def test_to_polars_without_polars_names_the_extra(tables, monkeypatch):
    monkeypatch.setitem(sys.modules, "polars", None)
    with pytest.raises(lk.MissingDependencyError, match=r"pip install 'lakesdk\[polars\]'") as e:
        tables["cow"][0].read().to_polars()
    assert isinstance(e.value, ImportError)


# -- count --------------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["cow", "mor"])
@pytest.mark.parametrize("where", WHERES)
def test_count_equals_rows_read(tables, kind, where):
    t, first = tables[kind]
    for q in (t.read(where=where), t.read(where=where).as_of(first), t.read(where=where, read_optimized=True),
              t.incremental(start=first, where=where)):
        assert q.count() == q.to_arrow().num_rows, (q, where)


def _no_data_reads(monkeypatch):
    import pyarrow.dataset as ds

    from lakesdk.engine import read as engine_read

    def fail(*a, **k):
        raise AssertionError("count() read data files")
    monkeypatch.setattr(engine_read, "read_arrow", fail)
    monkeypatch.setattr(engine_read, "iter_arrow", fail)
    monkeypatch.setattr(ds, "dataset", fail)


def test_count_of_copy_on_write_reads_footers_only(tables, monkeypatch):
    t, first = tables["cow"]
    want = {q: q.to_arrow().num_rows for q in (t.read(), t.as_of(first), t.read(where="p = 'p1'"),
                                              t.read(where="p IN ('p1', 'p2') OR p = 'p4'"))}
    _no_data_reads(monkeypatch)
    for q, n in want.items():
        assert decided_by_partitions(t.context, q._request(), q.plan()) == (q.predicate is not None)
        assert q.count() == n
    # a row filter, or a filter pruning cannot decide, still reads
    for where in ("v < 0", "p = 'p1' AND v < 0"):
        with pytest.raises(AssertionError, match="count\\(\\) read data files"):
            t.read(where=where).count()


def test_count_of_merge_on_read_slices_with_logs_reads(tables, monkeypatch):
    t, _ = tables["mor"]
    _no_data_reads(monkeypatch)
    with pytest.raises(AssertionError, match="count\\(\\) read data files"):
        t.read().count()
    assert t.read(read_optimized=True).count() == 120   # base files only: the footers answer


def test_count_after_updates_counts_the_latest_files(tmp_path):
    """Copy-on-write updates rewrite files: the footers of the latest file slices count each key once."""
    t = _lake(tmp_path).create_table("t", key="id")
    t.upsert(_data(range(10)))
    t.upsert(_data(range(5, 15)))
    assert t.read().count() == 15 == t.to_arrow().num_rows


# -- delete by predicate -------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["cow", "mor"])
def test_delete_where(tmp_path, kind):
    t = _lake(tmp_path).create_table(kind, key="id", partition_by="p", table_type=kind)
    t.upsert(_data(range(30)))
    t.upsert(_data(range(0, 30, 4), v=-1))
    want = sorted((i, v) for i, v in zip(*(t.read().to_pandas()[c] for c in ("id", "v")))
                  if not (v < 0 or (v > 20 and i % 6 == 1)))
    r = t.delete(where="v < 0 OR (v > 20 AND p = 'p1')")
    assert r.operation == "delete" and r.deleted == 30 - len(want)
    got = sorted(zip(*(t.read().to_pandas()[c] for c in ("id", "v"))))
    assert got == want
    assert hudi_rows(t.path) == want
    # a predicate matching nothing commits a delete of nothing, as a delete of absent keys does
    n = len(t.timeline.instants)
    empty = t.delete(where="v > 1000")
    assert empty.deleted == 0 and empty.files == 0 and empty.instant
    assert len(t.refresh().timeline.instants) == n + 1 and t.read().count() == len(want)
    # filters as tuples too
    assert t.delete(where=[("id", "=", 2)]).deleted == 1
    assert 2 not in t.read().to_pandas()["id"].tolist()


def test_delete_takes_keys_or_where(tmp_path):
    t = _lake(tmp_path).create_table("t", key="id")
    t.upsert(_data(range(5)))
    with pytest.raises(lk.OptionsError, match="keys or where=, not both") as e:
        t.delete([1], where="id = 1")
    assert e.value.key == "where"
    with pytest.raises(lk.OptionsError, match="needs the keys to delete or where=") as e:
        t.delete()
    assert e.value.key == "keys"
    import inspect

    from lakesdk.table.namespaces import Maintenance
    public = [n for n, _ in inspect.getmembers(Maintenance, inspect.isfunction) if not n.startswith("_")]
    assert all(f" {n}()" in repr(t.maintenance) for n in public)     # the repr names every method
    with pytest.raises(lk.LakeError, match="nope"):
        t.delete(where="nope = 1")
    assert t.delete([1, 2]).deleted == 2 and t.read().count() == 3


@pytest.mark.parametrize("kind", ["cow", "mor"])
def test_deletes_of_nothing_agree_with_an_empty_upsert_and_with_each_other(tmp_path, kind):
    """delete([]) raised while an empty upsert is a no-op; a delete of absent keys committed
    an instant while a predicate matching nothing committed none.  Now: no keys, no commit
    (the empty upsert's result); keys or a predicate that find nothing commit a delete of
    nothing, as Apache Hudi commits a delete of absent keys."""
    t = _lake(tmp_path).create_table("t", key="id", partition_by="p", ordering="v", table_type=kind)
    t.upsert(_data(range(3)))

    def instants():
        return len(t.refresh().timeline.completed)
    n = instants()
    upsert = t.upsert(pa.table({"id": pa.array([], pa.int64()), "p": pa.array([], pa.string()),
                                "v": pa.array([], pa.int64())}))
    for r in (upsert, t.delete([]), t.delete(())):
        assert (r.instant, r.deleted, r.files) == ("", 0, 0)
    assert instants() == n
    absent, none = t.delete([99]), t.delete(where="id = 99")
    assert absent.deleted == none.deleted == 0 and absent.instant and none.instant
    assert instants() == n + 2 and t.read().count() == 3


# -- lakesdk read --------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def typed_table(tmp_path_factory):
    t = _lake(tmp_path_factory.mktemp("cli") / "lake").create_table("typed", key="id")
    n = 3000
    t.upsert(pa.table({
        "id": pa.array(range(n), pa.int64()),
        "at": pa.array([dt.datetime(2024, 1, 2, 3, 4, 5, tzinfo=dt.UTC)] * n, pa.timestamp("us", tz="UTC")),
        "day": pa.array([dt.date(2024, 1, 2)] * n, pa.date32()),
        "amount": pa.array([decimal.Decimal("12.50")] * n, pa.decimal128(10, 2)),
        "name": pa.array([f"name-{i}" for i in range(n)]),
    }))
    return t


def test_cli_read_json_lines(typed_table, capsys):
    assert main(["read", typed_table.path, "--output", "json", "--columns", "id,at,day,amount",
                 "--where", "id < 5"]) == 0
    lines = capsys.readouterr().out.splitlines()
    rows = [json.loads(x) for x in lines]
    assert sorted(r["id"] for r in rows) == [0, 1, 2, 3, 4]
    assert rows[0]["at"] == "2024-01-02T03:04:05+00:00" and rows[0]["day"] == "2024-01-02"
    assert rows[0]["amount"] == "12.50" and set(rows[0]) == {"id", "at", "day", "amount"}
    assert main(["read", typed_table.path, "--output", "json", "--limit", "7"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 7
    assert main(["read", typed_table.path, "--output", "json"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 3000


def test_cli_read_json_lines_are_valid_json_for_nan_and_infinity(tmp_path, capsys):
    """json.dumps printed NaN / Infinity, which JSON parsers reject: strings now."""
    t = _lake(tmp_path).create_table("f", key="id")
    t.upsert(pa.table({"id": [1, 2, 3, 4], "x": [float("nan"), float("inf"), float("-inf"), 1.5],
                       "st": [{"y": float("nan")}, {"y": 2.0}, None, {"y": float("inf")}],
                       "xs": [[float("-inf")], [], None, [0.5]]}))
    assert main(["read", t.path, "--output", "json"]) == 0
    rows = sorted((json.loads(x, parse_constant=lambda c: pytest.fail(f"not JSON: {c}"))
                   for x in capsys.readouterr().out.splitlines()), key=lambda r: r["id"])
    assert [r["x"] for r in rows] == ["NaN", "Infinity", "-Infinity", 1.5]
    assert [r["st"] for r in rows] == [{"y": "NaN"}, {"y": 2.0}, None, {"y": "Infinity"}]
    assert [r["xs"] for r in rows] == [["-Infinity"], [], None, [0.5]]


def test_cli_read_table_output(typed_table, capsys):
    assert main(["read", typed_table.path, "--columns", "id,name", "--where", "id = 42"]) == 0
    out = capsys.readouterr().out
    assert "name-42" in out and "amount" not in out
    assert main(["read", typed_table.path, "--limit", "3"]) == 0
    assert len([x for x in capsys.readouterr().out.splitlines() if "name-" in x]) == 3


def test_cli_read_typed_errors_are_one_line(typed_table, tmp_path, capsys):
    for args in (["read", typed_table.path, "--where", "nope = 1"],
                 ["read", typed_table.path, "--columns", "id,nope"],
                 ["read", str(tmp_path / "nothing")]):
        assert main(args) == 2, args
        err = capsys.readouterr().err
        assert err.startswith("error: ") and err.count("\n") == 1 and "Traceback" not in err, err


def test_cli_read_into_a_closed_pipe_is_quiet(typed_table):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(f"{sys.executable} -m lakesdk read {typed_table.path} --output json | head -1",
                          shell=True, capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0
    assert len(proc.stdout.splitlines()) == 1 and json.loads(proc.stdout)["id"] >= 0
    assert "Traceback" not in proc.stderr and "BrokenPipe" not in proc.stderr, proc.stderr


def test_a_spark_read_of_many_base_files_is_planned_on_the_driver(tmp_path, spark):
    """More than 32 local base files: Spark would look them up in a job of its own; the read
    raises the threshold while it is planned (then puts it back) and returns every row."""
    import lakesdk as lk
    key = "spark.sql.sources.parallelPartitionDiscovery.threshold"
    before = spark.conf.get(key)
    opts = lk.TableOptions(engine="local", target_file_size=8 * 1024, record_size_estimate=100)
    t = lk.Lake(str(tmp_path / "lake"), spark=spark, options=opts).create_table("many", key="id")
    t.bulk_insert(pd.DataFrame({"id": range(4000), "v": [f"v{i}" for i in range(4000)]}))
    assert len(t.inspect.file_groups()) > 32
    seen = []
    real = spark.read.__class__.parquet

    def spy(self, *paths, **kw):
        seen.append((len(paths), spark.conf.get(key)))
        return real(self, *paths, **kw)
    with pytest.MonkeyPatch.context() as m:
        m.setattr(spark.read.__class__, "parquet", spy)
        df = t.read().to_spark()
    assert seen and int(seen[0][1]) >= seen[0][0] > 32
    assert spark.conf.get(key) == before
    got = df.toPandas().sort_values("id")
    assert got.id.tolist() == list(range(4000)) and got.v.tolist() == [f"v{i}" for i in range(4000)]


@pytest.mark.spark
@pytest.mark.parametrize("kind", ["cow", "mor"])
def test_to_spark_of_a_memory_table_reads_on_the_driver(spark, kind):
    """A Spark worker has a memory file system of its own: reading a memory:// table there
    failed with FileNotFoundError; its files are read on the driver."""
    import uuid
    lake = lk.Lake(f"memory://to-spark-{uuid.uuid4().hex}", spark=spark, options=lk.TableOptions(engine="local"))
    t = lake.create_table("m", key="id", partition_by="p", ordering="v", table_type=kind)
    t.upsert(_data(range(6)))
    t.upsert(_data([1, 4], v=100))   # log files on merge-on-read
    got = sorted((r.id, r.v) for r in t.read(where="v >= 4").to_spark().collect())
    assert got == [(1, 100), (4, 100), (5, 5)]


@pytest.mark.spark
@pytest.mark.parametrize("where", ["d > DATE '0001-01-01'", "d = DATE '0001-01-01'", "d < DATE '0002-06-01'",
                                   [("d", ">", dt.date(1, 6, 1))], "d IN (DATE '0001-01-01', DATE '2000-01-02')"])
def test_date_literals_before_year_2_answer_on_arrow_and_spark_alike(tmp_path, spark, where):
    """Spark failed with an empty IllegalArgumentException (Py4J's conversion of such a date)
    where the Arrow reader answered."""
    t = lk.Lake(str(tmp_path), spark=spark, options=lk.TableOptions(engine="local")).create_table("d", key="id")
    t.upsert(pa.table({"id": [1, 2, 3], "d": pa.array([dt.date(1, 1, 1), dt.date(2000, 1, 2), None], pa.date32())}))
    q = t.read(where=where)
    assert sorted(q.to_arrow().column("id").to_pylist()) == sorted(r.id for r in q.to_spark().collect())
