"""Record keys with null and empty values, as Apache Hudi's key generators write them.

Hudi (``KeyGenerator.constructRecordKey``, ``BuiltinKeyGenerator.combineCompositeRecordKey``)
writes a null part of a composite key as ``field:__null__`` and an empty one as
``field:__empty__``, and refuses a key that is null or empty as a whole.  lakesdk wrote an
empty part as nothing (``field:``) before; such tables keep their keys until
``maintenance.upgrade_key_encoding()`` rewrites them, so no row gets a second copy."""

from __future__ import annotations

import shutil

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lakesdk as lk
from lakesdk.format.keys import (
    HUDI_ENCODING,
    LEGACY_ENCODING,
    legacy_key_pattern,
    record_keys,
    stored_key_encoding,
)
from lakesdk.format.table_config import KEY_ENCODING_KEY, PROPERTIES_PATH, TableConfig
from lakesdk.table.write import WriteOperation

try:
    import hudi
except ImportError:   # the reader checks are skipped
    hudi = None


def stored(t) -> list[tuple]:
    """(record key, a, b, ts) of every row, sorted."""
    r = t.read(meta_fields=True).to_arrow()
    return sorted(zip(*(r.column(c).to_pylist() for c in ("_hoodie_record_key", "a", "b", "ts"))), key=repr)


def hudi_stored(path: str, cols=("_hoodie_record_key", "a", "b", "ts")) -> list[tuple]:
    table = hudi.HudiTableBuilder.from_base_uri(path).build()
    batches = table.read(hudi.HudiReadOptions())
    if not batches:
        return []
    t = pa.Table.from_batches(batches)
    return sorted(zip(*(t.column(c).to_pylist() for c in cols)), key=repr)


def timeline_files(t) -> list[str]:
    return sorted(f.path for f in t.storage.find(".hoodie/timeline"))


def without_encoding_property(lake, t):
    """The table as lakesdk created it before it recorded its key encoding (and as Apache Hudi
    creates one): hoodie.properties without ``hoodie.lakesdk.record.key.encoding``."""
    props = {k: v for k, v in t.config.props.items() if k != KEY_ENCODING_KEY}
    t.storage.write(PROPERTIES_PATH, TableConfig(props).to_text().encode("utf-8"))
    return lake.table(t.name)


# -- the encoding ----------------------------------------------------------------------------------------

def test_record_keys_of_null_and_empty_parts_match_hudis_key_generator():
    t = pa.table({"id": [1, 2, None, 4], "name": ["", None, "x", "y"], "on": [True, False, None, True]})
    # KeyGenerator.constructRecordKey: field:value joined by ',', null -> __null__, '' -> __empty__
    assert record_keys(t, ("id", "name"), "COMPLEX").to_pylist() == [
        "id:1,name:__empty__", "id:2,name:__null__", "id:__null__,name:x", "id:4,name:y"]
    assert record_keys(t, ("name", "on"), "COMPLEX").to_pylist() == [
        "name:__empty__,on:true", "name:__null__,on:false", "name:x,on:__null__", "name:y,on:true"]
    # the earlier encoding, which tables without Hudi's keep: an empty part written as nothing
    assert record_keys(t.slice(0, 1), ("id", "name"), "COMPLEX", encoding=LEGACY_ENCODING).to_pylist() == \
        ["id:1,name:"]
    # a key entirely null or empty: Hudi's HoodieKeyException
    with pytest.raises(lk.NullKeyError, match=r"\['id', 'name'\] are all null or empty \(''\) in 1 of 1 rows"):
        record_keys(pa.table({"id": pa.array([None], pa.int64()), "name": [""]}), ("id", "name"), "COMPLEX")
    with pytest.raises(lk.NullKeyError, match="'name' is null or empty"):     # complex key generator, one field
        record_keys(pa.table({"name": ["a", ""]}), ("name",), "COMPLEX")
    with pytest.raises(lk.NullKeyError, match="'name' is null or empty"):     # KeyGenUtils.getRecordKey
        record_keys(pa.table({"name": ["a", ""]}), ("name",), "SIMPLE")
    with pytest.raises(lk.NullKeyError, match="'name' is null in 1 of 2 rows"):
        record_keys(pa.table({"name": ["a", None]}), ("name",), "SIMPLE")
    assert record_keys(pa.table({"name": ["a", ""]}), ("name",), "SIMPLE", encoding=LEGACY_ENCODING).to_pylist() == \
        ["a", ""]


def test_stored_keys_tell_the_earlier_encoding_from_hudis():
    f = ("a", "b", "c")
    assert legacy_key_pattern(f, "COMPLEX") == "^a:,b:|,b:,c:|,c:$"
    legacy = pa.array(["a:,b:x,c:y", "a:x,b:,c:y", "a:x,b:y,c:"])
    for k in legacy:
        assert stored_key_encoding(pa.array([k.as_py(), "a:1,b:2,c:3"]), f, "COMPLEX") == LEGACY_ENCODING
    # Hudi's keys, and values holding ':' or ',', are not the earlier encoding
    for keys in (["a:__empty__,b:x,c:__null__"], ["a:x:,b:y,c:z:"], ["a:1,b:2,c:3"], []):
        assert stored_key_encoding(pa.array(keys, pa.string()), f, "COMPLEX") == HUDI_ENCODING
    with pytest.raises(lk.KeyEncodingError, match="upgrade_key_encoding"):
        stored_key_encoding(pa.array(["a:x,b:,c:y", "a:x,b:__empty__,c:y"]), f, "COMPLEX")
    assert stored_key_encoding(pa.array(["1", ""]), ("id",), "SIMPLE") == LEGACY_ENCODING
    assert stored_key_encoding(pa.array(["id:1", "id:"]), ("id",), "COMPLEX") == LEGACY_ENCODING


# -- writes ---------------------------------------------------------------------------------------------

@pytest.mark.spark
@pytest.mark.parametrize("table_type", ["cow", "mor"])
def test_empty_and_null_composite_key_parts_are_stored_as_hudi_writes_them(engine_lake, spark, table_type):
    t = engine_lake.create_table("t", key=["a", "b"], ordering="ts", partition_by="p", table_type=table_type)
    assert t.config.props[KEY_ENCODING_KEY] == "hudi"
    t.upsert(pa.table({"a": ["x", "y", None, "z"], "b": ["", None, "q", "w"], "p": ["1", "1", "2", "2"],
                       "ts": [1, 1, 1, 1]}))
    # the same rows again, from Spark: updates, no second copies
    t.upsert(spark.createDataFrame([("x", "", "1", 2), ("y", None, "1", 2), (None, "q", "2", 2)],
                                   "a string, b string, p string, ts long"))
    want = [("a:__null__,b:q", None, "q", 2), ("a:x,b:__empty__", "x", "", 2), ("a:y,b:__null__", "y", None, 2),
            ("a:z,b:w", "z", "w", 1)]
    assert stored(t) == want
    if hudi is not None:
        assert hudi_stored(t.path) == want
    # deletes by key values find them, from Arrow and from Spark
    t.delete([("x", ""), (None, "q")])
    t.delete(spark.createDataFrame([("y", None)], "a string, b string"))
    assert stored(t) == [("a:z,b:w", "z", "w", 1)]


@pytest.mark.spark
def test_keys_null_or_empty_as_a_whole_are_refused_before_the_instant(engine_lake, spark):
    single = engine_lake.create_table("s", key="id", partition_by="p")
    single.upsert(pa.table({"id": ["a"], "p": ["1"]}))
    two_parts = engine_lake.create_table("c", key="id", partition_by=["p", "q"])   # complex key generator, one field
    composite = engine_lake.create_table("k", key=["a", "b"])
    cases = [
        (single, pa.table({"id": ["b", ""], "p": ["1", "1"]}), "'id' is null or empty"),
        (single, spark.createDataFrame([("b", "1"), ("", "1"), ("", "2")], "id string, p string"),
         r"'id' is null or empty \(''\) in 2 of 3 rows"),
        (single, spark.createDataFrame([("b", "1"), (None, "1")], "id string, p string"), "'id' is null in 1 of 2"),
        (two_parts, pa.table({"id": [""], "p": ["1"], "q": ["2"]}), "'id' is null or empty"),
        (composite, pa.table({"a": ["", "x"], "b": pa.array([None, "y"], pa.string())}), "are all null or empty"),
        (composite, spark.createDataFrame([("", None), (None, ""), ("x", "")], "a string, b string"),
         r"are all null or empty \(''\) in 2 of 3 rows"),
    ]
    composite.upsert(pa.table({"a": ["x"], "b": [""]}))
    for t, data, match in cases:
        before = timeline_files(t)
        with pytest.raises(lk.NullKeyError, match=match):
            t.upsert(data)
        assert timeline_files(t) == before
    before = timeline_files(composite)
    with pytest.raises(lk.NullKeyError):
        composite.delete([("", None)])
    with pytest.raises(lk.InvalidKeyValueError, match="__empty__"):   # would read back as an empty value
        composite.upsert(spark.createDataFrame([("x", "__empty__")], "a string, b string"))
    assert timeline_files(composite) == before


@pytest.mark.spark
def test_merge_on_the_record_key_matches_null_key_parts(tmp_path, spark):
    t = lk.Lake(str(tmp_path / "lake"), spark=spark).create_table("t", key=["a", "b"], ordering="ts")
    t.upsert(pa.table({"a": ["x", "y"], "b": pa.array([None, "q"], pa.string()), "ts": [1, 1], "v": [1, 1]}))
    src = pa.table({"a": ["x", "z"], "b": pa.array([None, None], pa.string()), "ts": [2, 2], "v": [2, 2]})
    res = t.merge(src).when_matched_update_all().when_not_matched_insert_all().execute()
    assert (res.updated, res.inserted) == (1, 1)
    r = t.read(meta_fields=True).to_arrow()
    assert sorted(zip(r.column("_hoodie_record_key").to_pylist(), r.column("v").to_pylist())) == [
        ("a:x,b:__null__", 2), ("a:y,b:q", 1), ("a:z,b:__null__", 2)]


# -- tables without Hudi's encoding, and tables Hudi wrote ---------------------------------------------------

def _earlier_table(lake, name="t", **kw):
    """A table as an earlier lakesdk created and wrote it: no encoding property, an empty key
    part written as nothing."""
    t = without_encoding_property(lake, lake.create_table(name, key=["a", "b"], ordering="ts", partition_by="p", **kw))
    WriteOperation(t, "upsert", pa.table({"a": ["x", "y", "z", "v"], "b": ["", "q", "w", ""], "p": ["1", "1", "2", "2"],
                                          "ts": [1, 1, 1, 1]}), key_encoding=LEGACY_ENCODING).execute()
    assert t.config.key_encoding is None
    return lake.table(name)


@pytest.mark.spark
def test_table_with_keys_of_an_earlier_lakesdk_is_upserted_without_duplicates_until_upgraded(engine_lake, spark):
    t = _earlier_table(engine_lake)
    t.upsert(pa.table({"a": ["x"], "b": [""], "p": ["1"], "ts": [2]}))
    t.upsert(spark.createDataFrame([("x", "", "1", 3)], "a string, b string, p string, ts long"))
    assert stored(t) == [("a:v,b:", "v", "", 1), ("a:x,b:", "x", "", 3), ("a:y,b:q", "y", "q", 1),
                         ("a:z,b:w", "z", "w", 1)]
    with pytest.raises(lk.NullKeyError, match="upgrade_key_encoding"):   # the earlier keys have no null part
        t.upsert(pa.table({"a": ["n"], "b": pa.array([None], pa.string()), "p": ["1"], "ts": [1]}))
    t.delete([("v", "")])
    assert [r[0] for r in stored(t)] == ["a:x,b:", "a:y,b:q", "a:z,b:w"]

    res = t.maintenance.upgrade_key_encoding()
    assert res.operation == "insert_overwrite" and res.inserted == 2   # partition p=1 only
    want = [("a:x,b:__empty__", "x", "", 3), ("a:y,b:q", "y", "q", 1), ("a:z,b:w", "z", "w", 1)]
    assert stored(t) == want
    assert t.maintenance.upgrade_key_encoding() is None
    fresh = engine_lake.table("t")          # a new handle reads the keys again: Hudi's encoding now
    fresh.upsert(spark.createDataFrame([("x", "", "1", 4), ("n", None, "1", 1)],
                                       "a string, b string, p string, ts long"))
    want = sorted([("a:n,b:__null__", "n", None, 1), ("a:x,b:__empty__", "x", "", 4)] + want[1:], key=repr)
    assert stored(fresh) == want
    if hudi is not None:
        assert hudi_stored(t.path) == want


def test_without_earlier_keys_a_table_without_the_property_takes_hudis_encoding(tmp_path):
    lake = lk.Lake(str(tmp_path / "lake"), options=lk.TableOptions(engine="local"))
    t = _earlier_table(lake)
    t.delete([("x", ""), ("v", "")])     # the earlier keys, found by their values
    t.upsert(pa.table({"a": ["x"], "b": [""], "p": ["1"], "ts": [2]}))
    assert stored(t) == [("a:x,b:__empty__", "x", "", 2), ("a:y,b:q", "y", "q", 1), ("a:z,b:w", "z", "w", 1)]


def test_keys_of_both_encodings_are_refused_and_the_upgrade_keeps_one_row_per_key(tmp_path):
    lake = lk.Lake(str(tmp_path / "lake"), options=lk.TableOptions(engine="local"))
    t = _earlier_table(lake)
    # Apache Hudi upserted the same row (its key: a:x,b:__empty__), with a later ordering value
    WriteOperation(t, "upsert", pa.table({"a": ["x"], "b": [""], "p": ["1"], "ts": [5]}),
                   key_encoding=HUDI_ENCODING).execute()
    assert [r[0] for r in stored(t)] == ["a:v,b:", "a:x,b:", "a:x,b:__empty__", "a:y,b:q", "a:z,b:w"]
    before = timeline_files(t)
    with pytest.raises(lk.KeyEncodingError, match="upgrade_key_encoding"):
        t.upsert(pa.table({"a": ["x"], "b": [""], "p": ["1"], "ts": [6]}))
    assert timeline_files(t) == before
    t.upsert(pa.table({"a": ["y"], "b": ["q"], "p": ["1"], "ts": [2]}))   # keys without empty parts: written
    assert t.maintenance.upgrade_key_encoding().inserted == 4    # both partitions, one row of the two of x
    want = [("a:v,b:__empty__", "v", "", 1), ("a:x,b:__empty__", "x", "", 5), ("a:y,b:q", "y", "q", 2),
            ("a:z,b:w", "z", "w", 1)]
    assert stored(t) == want
    t.upsert(pa.table({"a": ["x"], "b": [""], "p": ["1"], "ts": [6]}))
    assert stored(t) == [want[0], ("a:x,b:__empty__", "x", "", 6), *want[2:]]


def test_upgrade_refuses_empty_single_field_keys_until_deleted(tmp_path):
    lake = lk.Lake(str(tmp_path / "lake"), options=lk.TableOptions(engine="local"))
    t = without_encoding_property(lake, lake.create_table("t", key="id"))
    WriteOperation(t, "upsert", pa.table({"id": ["a", ""], "v": [1, 2]}), key_encoding=LEGACY_ENCODING).execute()
    t = lake.table("t")
    t.upsert(pa.table({"id": [""], "v": [3]}))       # the earlier encoding accepted an empty key: it still does
    assert sorted(t.read().to_arrow().column("v").to_pylist()) == [1, 3]
    with pytest.raises(lk.NullKeyError, match="Delete those rows first"):
        t.maintenance.upgrade_key_encoding()
    t.delete([""])
    assert t.maintenance.upgrade_key_encoding() is None
    with pytest.raises(lk.NullKeyError, match="'id' is null or empty"):   # Hudi's rule from now on
        t.upsert(pa.table({"id": [""], "v": [4]}))


@pytest.mark.spark
def test_table_written_by_hudi_gets_empty_key_parts_as_hudi_writes_them(conformance_dir, tmp_path, spark):
    from conftest import conformance_table
    path = tmp_path / "v8_complexkeygen_hivestyle"
    shutil.copytree(conformance_table(conformance_dir, "sample_table/cow/v8_complexkeygen_hivestyle"), path)
    t = lk.open_table(str(path), spark=spark, options=lk.TableOptions(engine="local"))
    assert t.config.key_encoding is None and t.key == ("id", "name")
    row = t.read(where="id = 1").to_arrow()

    def with_value(tbl, name, value):
        i = tbl.schema.get_field_index(name)
        return tbl.set_column(i, name, pa.array([value], tbl.schema.field(name).type))

    row = with_value(with_value(row, "id", 5), "name", "")
    t.upsert(row)
    again = lk.open_table(str(path), spark=spark, options=lk.TableOptions(engine="local"))   # reads the keys again
    again.upsert(with_value(row, "longField", 10**12))
    r = again.read(meta_fields=True).to_arrow()
    keys = sorted(r.column("_hoodie_record_key").to_pylist())
    assert keys == ["id:1,name:Alice", "id:2,name:Bob", "id:3,name:Carol", "id:4,name:Diana", "id:5,name:__empty__"]
    if hudi is not None:
        assert [k for k, *_ in hudi_stored(str(path), cols=("_hoodie_record_key", "id"))] == keys


# -- the Spark write path computes keys and partition paths with Spark expressions ------------------
_TEXT = st.text(alphabet=st.sampled_from("ab9Zé_.-:=, "), max_size=4)


def _spark_keys(spark, rows, schema, key_fields, partition_fields, *, keygen, hive_style, encoding):
    """(row id, key, partition path) by the Spark-expression path and by the Arrow pass."""
    from lakesdk.engine.spark import SparkWriteJob, spark_key_columns
    from lakesdk.engine.tasks import WriteContext
    df = spark.createDataFrame(rows, schema)
    ctx = WriteContext(storage=None, instant="", schema=pa.schema([]), key_fields=key_fields,
                       partition_fields=partition_fields, keygen=keygen, hive_style=hive_style, ordering=None,
                       merge_mode="COMMIT_TIME_ORDERING", key_encoding=encoding)
    assert spark_key_columns(df, ctx) is not None
    job = SparkWriteJob(spark, ctx)
    cols = ["rid", "_hoodie_record_key", "_hoodie_partition_path"]
    by_expr = sorted(tuple(r) for r in job.with_keys(df, 0).select(*cols).collect())
    by_arrow = sorted(tuple(r) for r in job.with_keys_arrow(df, 0, ctx).select(*cols).collect())
    return by_expr, by_arrow


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.lists(st.tuples(st.none() | _TEXT, st.none() | st.integers(-2**63, 2**63 - 1), st.none() | _TEXT,
                               st.none() | st.integers(-5, 5)), min_size=1, max_size=12),
       composite=st.booleans(), hive_style=st.booleans(), legacy=st.booleans(), int_key=st.booleans())
def test_spark_expression_keys_equal_the_arrow_keys(spark, data, composite, hive_style, legacy, int_key):
    """The keys and partition paths Spark expressions compute are the ones Arrow computes, for
    every value the checks before a write let through (text and integer fields, both key
    encodings, single and composite keys, hive-style or not)."""
    from lakesdk.format.keys import partition_value_problem
    encoding = LEGACY_ENCODING if legacy else HUDI_ENCODING
    keys = ("s", "i") if composite else (("i",) if int_key else ("s",))
    rows = []
    for rid, (s, i, p, q) in enumerate(data):
        if p and partition_value_problem(p, "p", hive_style=hive_style, urlencode=False):
            p = "ok"
        if composite:
            s = s.replace(",", "") if s else s
            if s in ("__null__", "__empty__") or (s is None and legacy) or (i is None and legacy):
                continue
            if encoding == HUDI_ENCODING and not s and i is None:
                continue
        elif int_key and i is None or not int_key and (s is None or (s == "" and not legacy)):
            continue
        rows.append((rid, s, i, p, q))
    if not rows:
        return
    schema = "rid int, s string, i long, p string, q int"
    by_expr, by_arrow = _spark_keys(spark, rows, schema, keys, ("p", "q"), keygen="COMPLEX" if composite else "SIMPLE",
                                    hive_style=hive_style, encoding=encoding)
    assert by_expr == by_arrow


def test_spark_expression_keys_refuse_in_the_task_what_the_checks_refuse(spark):
    """A record without a key that reaches the key columns (the checks before the write refuse
    it first) fails its task with the typed error, so no such record is written."""
    from lakesdk.engine.spark import SparkWriteJob, reraise_task_error
    from lakesdk.engine.tasks import WriteContext
    from lakesdk.exceptions import InvalidPartitionValueError, NullKeyError
    for rows, err in (([(1, None, "a")], NullKeyError), ([(1, "x", "a/b")], InvalidPartitionValueError)):
        ctx = WriteContext(storage=None, instant="", schema=pa.schema([]), key_fields=("k",), partition_fields=("p",),
                           keygen="SIMPLE", hive_style=False, ordering=None, merge_mode="COMMIT_TIME_ORDERING")
        df = spark.createDataFrame(rows, "rid int, k string, p string")
        with pytest.raises(err):
            try:
                SparkWriteJob(spark, ctx).with_keys(df, 0).collect()
            except Exception as e:  # noqa: BLE001 - the Spark error, typed again
                reraise_task_error(e)
                raise
