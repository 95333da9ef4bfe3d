"""Floating-point ordering values compare as Java's ``Double.compareTo`` / ``Float.compareTo``
(Hudi's comparison of ordering values): ``-inf < ... < -0.0 < 0.0 < ... < +inf < NaN`` and NaN
equals NaN.  An incoming version replaces the stored one when it is at least as great in that
order, on copy-on-write and merge-on-read (read, and compacted), with the local and the Spark
engine; within one batch the greatest wins (ties: the later row).
"""

from __future__ import annotations

import itertools
import math

import pyarrow as pa
import pytest

import lakesdk as lk

from ..helpers import hudi_read

VALUES = [float("-inf"), -1.5, -0.0, 0.0, 2.0, float("inf"), float("nan")]


def java_key(x: float) -> tuple:
    """Java's Double.compareTo order as a sort key."""
    if math.isnan(x):
        return (1, 0.0, 0.0)
    return (0, x, math.copysign(1.0, x))


def same(a: float, b: float) -> bool:
    return java_key(a) == java_key(b)


PAIRS = list(itertools.product(VALUES, VALUES))     # (stored, incoming)


def test_java_order_keys_sort_as_java_compares():
    from lakesdk.merge.float_order import java_order
    arr = pa.array(VALUES + [None, float("-nan")], pa.float64())
    keys = java_order(arr).to_pylist()
    assert keys[len(VALUES)] is None
    ranked = sorted(range(len(VALUES)), key=lambda i: keys[i])
    assert [VALUES[i] for i in ranked] == sorted(VALUES, key=java_key)
    assert keys[-1] == keys[len(VALUES) - 1]              # every NaN is one value
    assert java_order(pa.array([-0.0, 0.0], pa.float32())).to_pylist() == java_order(
        pa.array([-0.0, 0.0], pa.float64())).to_pylist()


def _expected_after_two_upserts() -> list[tuple]:
    out = []
    for i, (stored, incoming) in enumerate(PAIRS):
        wins = java_key(incoming) >= java_key(stored)
        out.append((f"k{i}", incoming if wins else stored, "new" if wins else "old"))
    return out


def _canon(rows) -> list[tuple]:
    """Rows as (id, ordering value as its repr, v): NaN and the sign of zero compared exactly."""
    return sorted((r["id"], repr(r["ts"]), r["v"]) for r in rows)


def _want(rows: list[tuple]) -> list[tuple]:
    return sorted((k, repr(float(ts)), v) for k, ts, v in rows)


@pytest.mark.parametrize("ftype", ["double", "float"])
@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_float_ordering_values_follow_javas_compare(tmp_path, engine, engine_spark, table_type, ftype):
    name, spark = engine, engine_spark
    typ = pa.float64() if ftype == "double" else pa.float32()
    lake = lk.Lake(str(tmp_path), options=lk.TableOptions(engine=name), spark=spark)
    t = lake.create_table("t", key="id", ordering="ts", table_type=table_type)
    ids = [f"k{i}" for i in range(len(PAIRS))]
    t.upsert(pa.table({"id": ids, "ts": pa.array([s for s, _ in PAIRS], typ), "v": ["old"] * len(ids)}))
    res = t.upsert(pa.table({"id": ids, "ts": pa.array([i for _, i in PAIRS], typ), "v": ["new"] * len(ids)}))
    want = _want(_expected_after_two_upserts())
    assert res.updated == sum(v == "new" for _, _, v in _expected_after_two_upserts())
    assert _canon(t.read().to_arrow().to_pylist()) == want
    if table_type == "MERGE_ON_READ":
        t.maintenance.compact()
        assert _canon(t.read().to_arrow().to_pylist()) == want


@pytest.mark.parametrize("source", ["arrow", "spark"])
def test_one_batch_keeps_the_greatest_float_ordering_value(tmp_path, engine, engine_spark, source):
    """Combined on the driver (Arrow data) or in Spark (a Spark DataFrame: a window sort)."""
    name, spark = engine, engine_spark
    if source == "spark" and spark is None:
        pytest.skip("a Spark DataFrame goes to the Spark engine")
    lake = lk.Lake(str(tmp_path), options=lk.TableOptions(engine=name), spark=spark)
    t = lake.create_table("t", key="id", ordering="ts", table_type="COPY_ON_WRITE")
    ids, ts, vs, want = [], [], [], []
    for i, (first, second) in enumerate(PAIRS):
        ids += [f"k{i}", f"k{i}"]
        ts += [first, second]
        vs += ["first", "second"]
        later = java_key(second) >= java_key(first)
        want.append((f"k{i}", second if later else first, "second" if later else "first"))
    batch = pa.table({"id": ids, "ts": pa.array(ts, pa.float64()), "v": vs})
    # from Python rows: Spark reads a pandas NaN as null
    sdf = spark.createDataFrame(list(zip(ids, ts, vs)), "id string, ts double, v string").coalesce(1) \
        if source == "spark" else None
    t.upsert(sdf if sdf is not None else batch)
    assert _canon(t.read().to_arrow().to_pylist()) == _want(want)


def test_delete_with_a_float_ordering_value(tmp_path):
    """A delete carrying an ordering value applies when it is at least the stored one, in Java's order."""
    lake = lk.Lake(str(tmp_path), options=lk.TableOptions(engine="local"))
    t = lake.create_table("t", key="id", ordering="ts", table_type="MERGE_ON_READ")
    ids = [f"k{i}" for i in range(len(PAIRS))]
    t.upsert(pa.table({"id": ids, "ts": pa.array([s for s, _ in PAIRS], pa.float64()), "v": ["old"] * len(ids)}))
    t.delete(pa.table({"id": ids, "ts": pa.array([i for _, i in PAIRS], pa.float64())}))
    want = [(f"k{i}", s, "old") for i, (s, d) in enumerate(PAIRS) if java_key(d) < java_key(s)]
    assert _canon(t.read().to_arrow().to_pylist()) == _want(want)
    t.maintenance.compact()
    assert _canon(t.read().to_arrow().to_pylist()) == _want(want)


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_hudi_reader_reads_float_ordering_values_alike(tmp_path, table_type):
    lake = lk.Lake(str(tmp_path), options=lk.TableOptions(engine="local"))
    t = lake.create_table("t", key="id", ordering="ts", table_type=table_type)
    ids = [f"k{i}" for i in range(len(PAIRS))]
    t.upsert(pa.table({"id": ids, "ts": pa.array([s for s, _ in PAIRS], pa.float64()), "v": ["old"] * len(ids)}))
    t.upsert(pa.table({"id": ids, "ts": pa.array([i for _, i in PAIRS], pa.float64()), "v": ["new"] * len(ids)}))
    assert _canon(hudi_read(t.path)) == _want(_expected_after_two_upserts())
