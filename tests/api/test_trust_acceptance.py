"""Acceptance checks of the trust issue, written as a new user would try them: pandas input
with default options, then the neighbouring variants (copy-on-write and merge-on-read, hive
style on and off, Spark input).  Each test names what it protects."""

from __future__ import annotations

import glob
import http.client
import os
import subprocess
import sys

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

import lakesdk as lk


def _lake(tmp_path):
    return lk.Lake(str(tmp_path / "lake"))


def _instants(t) -> list:
    return [(i.action, i.state, i.requested) for i in t.timeline]


def _rows(q, cols=("k", "v")) -> list[tuple]:
    return sorted(tuple(r.values()) for r in q.to_arrow().select(list(cols)).to_pylist())


def _hudi_rows(path, cols=("k", "v"), as_of=None) -> list[tuple]:
    hudi = pytest.importorskip("hudi")
    opts = hudi.HudiReadOptions()
    if as_of is not None:
        opts = opts.with_as_of_timestamp(as_of)
    batches = hudi.HudiTableBuilder.from_base_uri(path).build().read(opts)
    if not batches or sum(b.num_rows for b in batches) == 0:
        return []
    return sorted(tuple(r.values()) for r in pa.Table.from_batches(batches).select(list(cols)).to_pylist())


# 1, 3: partition values that cannot be a folder name as they are

@pytest.mark.parametrize("table_type", ["cow", "mor"])
@pytest.mark.parametrize("hive_style", [True, False])
@pytest.mark.parametrize("value", ["docs/", "x/y/", "/abs", "abc/", "../x"])
def test_partition_value_with_slash_is_refused_before_anything_is_written(tmp_path, table_type, hive_style, value):
    t = _lake(tmp_path).create_table("t", key="k", partition_by="p", table_type=table_type, hive_style=hive_style)
    with pytest.raises(lk.InvalidPartitionValueError):
        t.upsert(pd.DataFrame({"k": ["1", "2"], "p": [value, value], "v": [1, 2]}))
    assert _instants(t) == []
    assert t.read().to_arrow().num_rows == 0


@pytest.mark.parametrize("value", [".tmp", "_x", "..", "a=b"])
def test_hidden_or_ambiguous_partition_value_without_hive_style_is_refused(tmp_path, value):
    t = _lake(tmp_path).create_table("t", key="k", partition_by="p", hive_style=False)
    with pytest.raises(lk.InvalidPartitionValueError):
        t.upsert(pd.DataFrame({"k": ["1"], "p": [value], "v": [1]}))
    assert _instants(t) == []


@pytest.mark.parametrize("table_type", ["cow", "mor"])
@pytest.mark.parametrize("hive_style", [True, False])
def test_hostile_partition_values_round_trip_when_urlencoded(tmp_path, table_type, hive_style):
    vals = ["docs/", "x/y/", "/abs", ".tmp", "..", "=", "%", "%2F", "", None, "__HIVE_DEFAULT_PARTITION__", "ü/é"]
    t = _lake(tmp_path).create_table("t", key="k", partition_by="p", table_type=table_type,
                                     hive_style=hive_style, partition_urlencode=True)
    res = t.upsert(pd.DataFrame({"k": [str(i) for i in range(len(vals))], "p": vals, "v": list(range(len(vals)))}))
    assert res.inserted == len(vals)
    expected = sorted((str(i), v) for i, v in enumerate(vals))
    got = t.read().to_pandas()[["k", "p"]]
    got = got.astype(object).where(got.notna(), None)   # pandas 3's string dtype holds a missing value as NaN
    assert sorted(map(tuple, got.values.tolist()),
                  key=str) == sorted(expected, key=str)
    assert len(_hudi_rows(t.path)) == len(vals)


# 2, 8: archival keeps what file slices and time travel need

def _truth(j: int) -> list[tuple]:
    d = {str(i): 0 for i in range(5)}
    for x in range(1, j + 1):
        d[str(x % 5)] = x
    return sorted(d.items())


def _history_table(tmp_path, table_type, n, compact_at=()):
    t = _lake(tmp_path).create_table("t", key="k", ordering="ts", table_type=table_type)
    res = [t.upsert(pd.DataFrame({"k": [str(i) for i in range(5)], "ts": [0] * 5, "v": [0] * 5}))]
    for j in range(1, n + 1):
        res.append(t.upsert(pd.DataFrame({"k": [str(j % 5)], "ts": [j], "v": [j]})))
        if j in compact_at:
            t.maintenance.compact()
    return t, res


@pytest.mark.parametrize("table_type", ["cow", "mor"])
def test_archive_beyond_savepoint_keeps_committed_updates(tmp_path, table_type):
    t = _lake(tmp_path).create_table("t", key="k", ordering="ts", table_type=table_type)
    t.upsert(pd.DataFrame({"k": [str(i) for i in range(5)], "ts": [0] * 5, "v": [0] * 5}))
    for j in range(1, 8):
        t.upsert(pd.DataFrame({"k": [str(j % 5)], "ts": [j], "v": [j]}))
        if j == 3:
            t.maintenance.savepoint()
    t.maintenance.archive(min_commits=2, max_commits=3, beyond_savepoint=True)
    assert _rows(t.read()) == _truth(7)
    assert _hudi_rows(t.path) == _truth(7)
    if table_type == "mor":
        t.maintenance.compact()
        assert _rows(t.read()) == _truth(7)
    assert t.inspect.check().ok


def test_mor_time_travel_to_archived_deltacommits_reads_their_logs(tmp_path):
    t, res = _history_table(tmp_path, "mor", 11, compact_at=(4, 8))
    t.maintenance.archive(min_commits=2, max_commits=4)
    assert len(list(t.timeline)) < len(res)
    for j, r in enumerate(res):
        assert _rows(t.as_of(r.instant)) == _truth(j), f"as of #{j}"


# 7: time travel after a clean

@pytest.mark.parametrize("table_type", ["cow", "mor"])
def test_as_of_a_cleaned_commit_raises_time_travel_error(tmp_path, table_type):
    t, res = _history_table(tmp_path, table_type, 5, compact_at=(3,) if table_type == "mor" else ())
    t.maintenance.clean(policy="keep_latest_file_versions", retain_versions=1)
    for r in res[:3]:
        with pytest.raises(lk.TimeTravelError):
            t.as_of(r.instant).to_arrow()
    assert _rows(t.as_of(res[-1].instant)) == _truth(5)
    assert _rows(t.read()) == _truth(5)


# 4: missing columns

@pytest.mark.parametrize("table_type", ["cow", "mor"])
@pytest.mark.parametrize("op", ["upsert", "insert", "bulk_insert", "insert_overwrite"])
def test_batch_lacking_table_columns_is_refused_unless_opted_in(tmp_path, table_type, op):
    t = _lake(tmp_path).create_table("t", key="k", ordering="ts", table_type=table_type)
    t.upsert(pd.DataFrame({"k": ["1", "2"], "ts": [1, 1], "a": [10, 20], "b": ["x", "y"]}))
    before = _instants(t)
    with pytest.raises(lk.MissingColumnError, match="'b'"):
        getattr(t, op)(pd.DataFrame({"k": ["1"], "ts": [2], "a": [11]}))
    assert _instants(t) == before


@pytest.mark.parametrize("table_type", ["cow", "mor"])
def test_upsert_lacking_columns_keeps_or_nulls_them_on_request(tmp_path, table_type):
    t = _lake(tmp_path).create_table("t", key="k", ordering="ts", table_type=table_type)
    t.upsert(pd.DataFrame({"k": ["1", "2"], "ts": [1, 1], "a": [10, 20], "b": ["x", "y"]}))
    t.upsert(pd.DataFrame({"k": ["1"], "ts": [2], "a": [11]}), missing_columns="keep")
    t.upsert(pd.DataFrame({"k": ["2"], "ts": [2], "a": [21]}), missing_columns="null")
    assert _rows(t.read(), ("k", "a", "b")) == [("1", 11, "x"), ("2", 21, None)]


# 5: composite keys

@pytest.mark.parametrize("table_type", ["cow", "mor"])
def test_composite_key_values_that_would_collide_are_refused(tmp_path, table_type):
    t = _lake(tmp_path).create_table("t", key=["a", "b"], table_type=table_type)
    with pytest.raises(lk.InvalidKeyValueError):
        t.upsert(pd.DataFrame({"a": ["x,b:y", "x"], "b": ["z", "y,b:z"], "v": [1, 2]}))
    assert _instants(t) == []


def test_composite_key_values_with_colons_round_trip(tmp_path):
    t = _lake(tmp_path).create_table("t", key=["a", "b"])
    t.upsert(pd.DataFrame({"a": ["x:y", "x"], "b": ["z", "y:z"], "v": [1, 2]}))
    t.upsert(pd.DataFrame({"a": ["x:y", "x"], "b": ["z", "y:z"], "v": [3, 4]}))
    assert _rows(t.read(), ("a", "b", "v")) == [("x", "y:z", 4), ("x:y", "z", 3)]
    assert t.delete(pd.DataFrame({"a": ["x:y"], "b": ["z"]})).deleted == 1
    assert _rows(t.read(), ("a", "b", "v")) == [("x", "y:z", 4)]


# 6: pruning

@pytest.mark.parametrize("table_type", ["cow", "mor"])
def test_pruning_matches_empty_default_name_and_null_partition_values(tmp_path, table_type):
    t = _lake(tmp_path).create_table("t", key="k", partition_by="p", table_type=table_type)
    t.upsert(pd.DataFrame({"k": ["0", "1", "2", "3"], "p": ["", None, "__HIVE_DEFAULT_PARTITION__", "x"],
                           "v": [0, 1, 2, 3]}))
    keys = lambda w: sorted(t.read(where=w).to_pandas()["k"])  # noqa: E731
    assert keys("p = ''") == ["0"]
    assert keys("p IS NULL") == ["1"]
    assert keys("p = '__HIVE_DEFAULT_PARTITION__'") == ["2"]
    assert keys("p <> 'x'") == ["0", "2"]


@pytest.mark.parametrize("hive_style", [True, False])
def test_not_on_boolean_partition_column_returns_false_rows(tmp_path, hive_style):
    t = _lake(tmp_path).create_table("t", key="k", partition_by="b", hive_style=hive_style)
    t.upsert(pd.DataFrame({"k": ["1", "2", "3"], "b": [True, False, None], "v": [1, 2, 3]}))
    assert sorted(t.read(where="NOT b").to_pandas()["k"]) == ["2"]
    assert sorted(t.read(where="b").to_pandas()["k"]) == ["1"]


# 9: timestamps and unsigned integers

@pytest.mark.parametrize("table_type", ["cow", "mor"])
def test_pandas_nanosecond_timestamps_are_stored_as_micros(tmp_path, table_type):
    import pyarrow.parquet as pq
    t = _lake(tmp_path).create_table("t", key="k", table_type=table_type)
    t.upsert(pd.DataFrame({"k": ["1", "2"], "t": pd.to_datetime(["2024-01-01 00:00:00.123456",
                                                                  "2024-01-01 00:00:01.000000"])}))
    t.upsert(pd.DataFrame({"k": ["1"], "t": pd.to_datetime(["2025-01-01 00:00:00.500000"])}))
    for f in glob.glob(t.path + "/**/*.parquet", recursive=True):
        assert pq.read_schema(f).field("t").type == pa.timestamp("us")
    assert t.read().to_arrow().schema.field("t").type == pa.timestamp("us")
    before = _instants(t)
    with pytest.raises(lk.IncompatibleSchemaError, match="truncate_nanoseconds"):
        t.upsert(pd.DataFrame({"k": ["3"], "t": pd.to_datetime(["2024-01-01 00:00:00.123456789"])}))
    assert _instants(t) == before


@pytest.mark.parametrize("values", [[5, 7], [5, 2**63 + 5]])
def test_uint64_columns_are_refused_before_the_instant(tmp_path, values):
    t = _lake(tmp_path).create_table("t", key="k")
    with pytest.raises(lk.IncompatibleSchemaError, match="uint64"):
        t.upsert(pd.DataFrame({"k": ["1", "2"], "u": np.array(values, dtype="uint64")}))
    assert _instants(t) == []


def test_uint32_columns_widen_to_int64_and_round_trip(tmp_path):
    t = _lake(tmp_path).create_table("t", key="k")
    t.upsert(pd.DataFrame({"k": ["1", "2"], "u": np.array([1, 2**32 - 1], dtype="uint32")}))
    a = t.read().to_arrow()
    assert a.schema.field("u").type == pa.int64()
    assert sorted(a.column("u").to_pylist()) == [1, 2**32 - 1]
    assert _hudi_rows(t.path, ("k", "u")) == [("1", 1), ("2", 2**32 - 1)]


# 10: schema changes

@pytest.mark.parametrize("table_type", ["cow", "mor"])
def test_int_column_keeps_its_type_and_refuses_fractions_before_the_instant(tmp_path, table_type):
    t = _lake(tmp_path).create_table("t", key="k", table_type=table_type)
    t.upsert(pd.DataFrame({"k": ["1", "2"], "n": [1, 2]}))
    t.upsert(pd.DataFrame({"k": ["3", "4"], "n": [3, None]}))    # pandas makes this float64
    assert t.read().to_arrow().schema.field("n").type == pa.int64()
    before = _instants(t)
    with pytest.raises(lk.IncompatibleSchemaError):
        t.upsert(pd.DataFrame({"k": ["5"], "n": [1.5]}))
    assert _instants(t) == before
    assert t.read().to_arrow().schema.field("n").type == pa.int64()


def test_int64_into_float32_column_that_does_not_fit_is_refused(tmp_path):
    t = _lake(tmp_path).create_table("t", key="k")
    t.upsert(pd.DataFrame({"k": ["1"], "f": np.array([1.5], dtype="float32")}))
    before = _instants(t)
    with pytest.raises(lk.IncompatibleSchemaError):
        t.upsert(pd.DataFrame({"k": ["2"], "f": [2**40 + 1]}))
    assert _instants(t) == before


# 11: write counts

@pytest.mark.parametrize("table_type", ["cow", "mor"])
def test_write_counts_report_rows_that_lose_on_ordering_as_skipped(tmp_path, table_type):
    t = _lake(tmp_path).create_table("t", key="k", ordering="ts", table_type=table_type)
    t.upsert(pd.DataFrame({"k": [str(i) for i in range(100)], "ts": [10] * 100, "v": [0] * 100}))
    r = t.upsert(pd.DataFrame({"k": [str(i) for i in range(100)], "ts": [5] * 20 + [20] * 80, "v": [1] * 100}))
    assert (r.updated, r.skipped) == (80, 20)
    d = t.delete(pd.DataFrame({"k": ["0", "0"], "ts": [1, 2]}))
    assert (d.deleted, d.skipped) == (0, 1)
    assert t.delete(["30", "30"]).deleted == 1
    assert t.read().to_arrow().num_rows == 99


# 12: damaged tables

@pytest.mark.parametrize("metadata", [True, False])
@pytest.mark.parametrize("table_type", ["cow", "mor"])
def test_missing_latest_base_file_is_an_error_at_read_write_and_check(tmp_path, table_type, metadata):
    """Without the metadata table a write lists storage and refuses before it writes anything;
    with it (the default) the write finds the file missing when it reads it, and its own
    instant is rolled back: no data file changes, nothing is left pending."""
    lake = lk.Lake(str(tmp_path / "lake"), options=lk.TableOptions(metadata=metadata))
    t = lake.create_table("t", key="k", ordering="ts", partition_by="p", table_type=table_type)
    t.upsert(pd.DataFrame({"k": ["1", "2"], "p": ["a", "a"], "ts": [1, 1], "v": [1, 1]}))
    t.upsert(pd.DataFrame({"k": ["1"], "p": ["a"], "ts": [2], "v": [2]}))
    t.close()
    os.remove(sorted(glob.glob(t.path + "/p=a/*.parquet"), key=os.path.getmtime)[-1])
    t2 = lk.open_table(t.path, options=lk.TableOptions(metadata=metadata))
    with pytest.raises(lk.DataFileMissingError):
        t2.read().to_arrow()
    before, files = _instants(t2), sorted(glob.glob(t.path + "/p=a/*"))
    with pytest.raises(lk.DataFileMissingError):
        t2.upsert(pd.DataFrame({"k": ["3"], "p": ["a"], "ts": [1], "v": [3]}))
    after = _instants(t2)
    assert sorted(glob.glob(t.path + "/p=a/*")) == files
    if metadata:
        assert [i for i in after if i not in before] == [i for i in after if i[0] == "rollback"] != []
    else:
        assert after == before
    report = t2.inspect.check()
    assert not report.ok and "missing_file" in repr(report)


def test_mor_log_file_missing_is_an_error_at_read_and_compaction(tmp_path):
    t = _lake(tmp_path).create_table("t", key="k", ordering="ts", partition_by="p", table_type="mor")
    t.upsert(pd.DataFrame({"k": ["1", "2"], "p": ["a", "a"], "ts": [1, 1], "v": [1, 1]}))
    t.upsert(pd.DataFrame({"k": ["1"], "p": ["a"], "ts": [2], "v": [2]}))
    t.close()
    for f in glob.glob(t.path + "/p=a/.*log*"):
        os.remove(f)
    t2 = lk.open_table(t.path)
    with pytest.raises(lk.DataFileMissingError):
        t2.read().to_arrow()
    with pytest.raises(lk.DataFileMissingError):
        t2.maintenance.compact()


def _damage_properties(t, how):
    t.close()
    pp = t.path + "/.hoodie/hoodie.properties"
    s = open(pp).read()
    if how == "drop_type":
        s = "\n".join(line for line in s.splitlines() if not line.startswith("hoodie.table.type"))
    else:
        s = s[: len(s) // 2]
    with open(pp, "w") as f:
        f.write(s)


@pytest.mark.parametrize("how", ["drop_type", "truncate"])
def test_damaged_properties_are_a_table_config_error_at_open(tmp_path, how):
    t = _lake(tmp_path).create_table("t", key="k", table_type="mor")
    t.upsert(pd.DataFrame({"k": ["1"], "v": [1]}))
    t.upsert(pd.DataFrame({"k": ["1"], "v": [2]}))
    _damage_properties(t, how)
    with pytest.raises(lk.TableConfigError):
        lk.open_table(t.path)
    r = subprocess.run([sys.executable, "-m", "lakesdk", "check", t.path], capture_output=True, text=True)
    assert r.returncode == 1 and "missing_property" in r.stdout


def test_mor_without_table_type_is_refused_after_its_deltacommits_are_archived(tmp_path):
    t = _lake(tmp_path).create_table("t", key="k", table_type="mor")
    t.upsert(pd.DataFrame({"k": ["1", "2"], "v": [1, 1]}))
    for i in range(3):
        t.upsert(pd.DataFrame({"k": ["1"], "v": [i + 2]}))
        t.maintenance.compact()
    t.upsert(pd.DataFrame({"k": ["2"], "v": [9]}))
    t.maintenance.compact()
    t.maintenance.archive(min_commits=1, max_commits=2)
    assert "deltacommit" not in {i.action for i in t.timeline if i.is_completed}
    _damage_properties(t, "drop_type")
    with pytest.raises(lk.TableConfigError):
        lk.open_table(t.path)


# 15: the marker server

def test_marker_server_refuses_unauthenticated_bodies_unread_and_stops_on_close(tmp_path):
    t = _lake(tmp_path).create_table("t", key="k")
    t.upsert(pd.DataFrame({"k": ["1"], "v": [1]}))
    srv = t.context.resources.server_of(t.storage)
    for headers, status in [({}, 401), ({"X-Lakesdk-Marker-Token": "wrong"}, 403),
                            ({"X-Lakesdk-Marker-Token": srv.token}, 413)]:
        c = http.client.HTTPConnection(srv.host, srv.port, timeout=30)
        c.putrequest("POST", "/v1/hoodie/marker/create")
        c.putheader("Content-Length", str(10**12))
        for k, v in headers.items():
            c.putheader(k, v)
        c.endheaders()
        assert c.getresponse().status == status
        c.close()
    # the server still serves (other tests' threads may end meanwhile: no thread count here)
    assert srv.running
    t.close()
    assert not srv.running
    with t:
        t.upsert(pd.DataFrame({"k": ["2"], "v": [1]}))
    assert t.read().to_arrow().num_rows == 2
    assert t.context.resources.server_of(t.storage) is None


# 16: the demo

@pytest.mark.parametrize("kind", ["folder", "foreign_table", "symlink", "file"])
def test_demo_refuses_to_remove_what_it_did_not_create(tmp_path, kind):
    root = tmp_path / "d"
    root.mkdir()
    target = root / "trips"
    keep = tmp_path / "keep"
    if kind == "folder":
        target.mkdir()
        keep = target / "precious.txt"
        keep.write_text("x")
    elif kind == "foreign_table":
        t = lk.Lake(str(root)).create_table("trips", key="k")
        t.upsert(pd.DataFrame({"k": ["1"]}))
        t.close()
        keep = target / ".hoodie" / "hoodie.properties"
    elif kind == "symlink":
        victim = tmp_path / "victim"
        victim.mkdir()
        keep = victim / "f"
        keep.write_text("x")
        target.symlink_to(victim)
    else:
        target.write_text("file")
        keep = target
    r = subprocess.run([sys.executable, "-m", "lakesdk", "demo", "--path", str(root)], capture_output=True,
                       text=True)
    assert r.returncode == 2 and "not a table created by `lakesdk demo`" in r.stderr
    assert keep.exists()


# 17: typed errors

@pytest.mark.parametrize("where", ["s = 1", "d = 'x'", "o = 1", "l = 1", "n = 'x'", "ts > 5", "ts > 'garbage'",
                                   "k IN (1, 2)", "nope = 1", "n = "])
def test_filters_that_cannot_evaluate_raise_invalid_filter_error(tmp_path, where):
    import decimal
    t = _lake(tmp_path).create_table("t", key="k")
    t.upsert(pd.DataFrame({"k": ["1"], "s": ["x"], "d": [decimal.Decimal("1.50")], "n": [1], "o": [{"a": 1}],
                           "l": [[1]], "ts": pd.to_datetime(["2024-01-01"])}))
    with pytest.raises(lk.InvalidFilterError):
        t.read(where=where).to_arrow()


def test_decimal_column_compares_with_int_literal(tmp_path):
    import decimal
    t = _lake(tmp_path).create_table("t", key="k")
    t.upsert(pd.DataFrame({"k": ["1", "2"], "d": [decimal.Decimal("1.50"), decimal.Decimal("2.00")]}))
    assert sorted(t.read(where="d = 2").to_pandas()["k"]) == ["2"]
    assert sorted(t.read(where="d > 1").to_pandas()["k"]) == ["1", "2"]


def test_long_partition_value_is_refused_before_anything_is_written(tmp_path):
    t = _lake(tmp_path).create_table("t", key="k", partition_by="p")
    with pytest.raises(lk.InvalidPartitionValueError):
        t.upsert(pd.DataFrame({"k": ["1"], "p": ["x" * 300]}))
    assert _instants(t) == []


@pytest.mark.parametrize("path", ["/etc/passwd", "/etc"])
def test_opening_what_is_not_a_table_is_table_not_found(path):
    with pytest.raises(lk.TableNotFoundError):
        lk.open_table(path)


def test_garbage_completed_commit_is_a_corrupt_timeline_error_and_check_names_it(tmp_path):
    t = _lake(tmp_path).create_table("t", key="k")
    t.upsert(pd.DataFrame({"k": ["1"], "v": [1]}))
    t.close()
    with open(os.path.join(t.path, ".hoodie", "timeline", "20991231000000000_20991231000000001.commit"), "wb") as f:
        f.write(b"\x00garbage{{{")
    t2 = lk.open_table(t.path)
    with pytest.raises(lk.CorruptTimelineError):
        t2.read().to_arrow()
    with pytest.raises(lk.CorruptTimelineError):
        t2.upsert(pd.DataFrame({"k": ["2"], "v": [1]}))
    assert "unparsable_instant" in repr(t2.inspect.check())


# 13, 14: Spark input

@pytest.mark.spark
@pytest.mark.parametrize("table_type", ["cow", "mor"])
def test_spark_not_null_columns_write_and_spark_keys_delete(spark, tmp_path, table_type):
    t = lk.Lake(str(tmp_path / "lake"), spark=spark).create_table("t", key="k", ordering="ts", partition_by="p",
                                                                   table_type=table_type)
    t.upsert(pd.DataFrame({"k": ["0"], "ts": [0], "p": ["a"], "v": [0]}))
    sdf = spark.range(3).selectExpr("cast(id as string) as k", "id as ts", "'a' as p", "id * 2 as v")
    assert not any(f.nullable for f in sdf.schema.fields)
    r = t.upsert(sdf)
    assert (r.inserted, r.updated) == (2, 1)
    t.bulk_insert(spark.range(3, 5).selectExpr("cast(id as string) as k", "id as ts", "'b' as p", "id as v"))
    assert t.delete(spark.createDataFrame([("1",), ("4",)], ["k"])).deleted == 2
    assert sorted(t.read().to_pandas()["k"]) == ["0", "2", "3"]
    assert sorted(r.k for r in t.read().to_spark().collect()) == ["0", "2", "3"]


@pytest.mark.spark
def test_spark_input_with_hostile_partition_values_round_trips_through_to_spark(spark, tmp_path):
    vals = ["docs/", "", None, "__HIVE_DEFAULT_PARTITION__", ".tmp", "a=b", "%"]
    t = lk.Lake(str(tmp_path / "lake"), spark=spark).create_table("t", key="k", partition_by="p",
                                                                   partition_urlencode=True)
    t.upsert(spark.createDataFrame([(str(i), v, i) for i, v in enumerate(vals)], "k string, p string, v long"))
    assert sorted((r.k, r.p) for r in t.read().to_spark().collect()) == [(str(i), v) for i, v in enumerate(vals)]
    assert [r.k for r in t.read(where="p = ''").to_spark().collect()] == ["1"]
    assert [r.k for r in t.read(where="p IS NULL").to_spark().collect()] == ["2"]


def test_check_of_an_undamaged_table_exits_zero(tmp_path):
    t = _lake(tmp_path).create_table("t", key="k", partition_by="p", table_type="mor")
    t.upsert(pd.DataFrame({"k": ["1", "2"], "p": ["a", "b"], "v": [1, 1]}))
    t.upsert(pd.DataFrame({"k": ["1"], "p": ["a"], "v": [2]}))
    t.close()
    r = subprocess.run([sys.executable, "-m", "lakesdk", "check", t.path], capture_output=True, text=True)
    assert r.returncode == 0 and ": ok;" in r.stdout
