"""A Spark write's file groups each get a task of their own (``spark_cluster.by_task``): hashing
the file ids would put two groups in one task as often as not, and that task would rewrite
both while a core idles."""

from __future__ import annotations

import pandas as pd
import pytest

import lakesdk as lk
from lakesdk.engine.spark_cluster import by_task, parallelism


@pytest.mark.parametrize("groups", [1, 2, 3, 4, 9])
def test_every_file_group_gets_a_task_of_its_own(spark, groups):
    from pyspark.sql import functions as F
    fids = [f"{i:08x}-0000-4000-8000-000000000000-0" for i in range(groups)]
    df = spark.createDataFrame(pd.DataFrame({"fid": [f for f in fids for _ in range(5)], "v": range(5 * groups)}))
    out = by_task(spark, df, "fid", fids).select(F.spark_partition_id().alias("p"), "fid").distinct().toPandas()
    n = min(groups, 2 * parallelism(spark))
    assert sorted(out.fid) == sorted(fids)                        # every row kept, each group in one task
    per_task = out.groupby("p").fid.count()
    assert len(per_task) == n and per_task.max() - per_task.min() <= 1   # dealt evenly


def test_a_value_not_listed_still_goes_somewhere(spark):
    df = spark.createDataFrame(pd.DataFrame({"fid": ["a", "b", "c", None], "v": [1, 2, 3, 4]}))
    assert sorted(by_task(spark, df, "fid", ["a", "b"]).toPandas().v) == [1, 2, 3, 4]


def test_an_upsert_rewrites_its_file_groups_in_tasks_of_their_own(tmp_path, spark):
    lake = lk.Lake(str(tmp_path / "lake"), spark=spark, options=lk.TableOptions(engine="spark"))
    t = lake.create_table("t", key="id", ordering="ts", partition_by="p")
    t.bulk_insert(spark.createDataFrame(pd.DataFrame({"id": range(40), "ts": [1] * 40, "p": [i % 4 for i in range(40)]})))
    r = t.upsert(spark.createDataFrame(pd.DataFrame({"id": range(0, 40, 3), "ts": [2] * 14,
                                                     "p": [i % 4 for i in range(0, 40, 3)]})))
    assert (r.updated, r.inserted) == (14, 0)
    got = t.read().to_pandas().set_index("id").ts.to_dict()
    assert got == {i: 2 if i % 3 == 0 else 1 for i in range(40)}


# -- rows held on the driver as a DataFrame (spark_cluster.arrow_frame) -------------------------

def _driver_rows(n: int):
    """Rows of the types a table (and an index's stored ordering) may hold that Spark's Arrow
    exchange takes only after a cast: narrow and wide decimals, fixed-size binary."""
    import datetime as dt
    from decimal import Decimal

    import pyarrow as pa
    cents = [Decimal(i).scaleb(-2) if i % 89 else None for i in range(n)]
    return pa.table({
        "k": pa.array([f"key-{i:07d}" if i % 97 else None for i in range(n)]),
        "n": pa.array(range(n), pa.int64()),
        "ts": pa.array([dt.datetime(2026, 1, 1, tzinfo=dt.UTC) + dt.timedelta(microseconds=i) for i in range(n)],
                       pa.timestamp("us", tz="UTC")),
        "d64": pa.array(cents, pa.decimal64(12, 2)),
        "d256": pa.array(cents, pa.decimal256(20, 2)),
        "fsb": pa.array([i.to_bytes(4, "big") if i % 83 else None for i in range(n)], pa.binary(4)),
    })


def _is_local_relation(df) -> bool:
    return "LocalRelation" in df._jdf.queryExecution().optimizedPlan().toString()


@pytest.mark.parametrize("vouched", [False, True], ids=["arrow", "exchange-types"])
@pytest.mark.parametrize("extra", [0, 1, 5_000])
def test_driver_rows_become_a_dataframe_with_every_row(spark, extra, vouched):
    """Every row, as it was, however the rows go (a local relation, an RDD of Arrow batches,
    or on Spark Connect Arrow IPC streams read back in tasks)."""
    from pyspark.sql.pandas.types import from_arrow_schema

    from lakesdk.engine.session import is_connect
    from lakesdk.engine.spark_cluster import LOCAL_RELATION_ROWS, arrow_frame
    from lakesdk.engine.spark_types import for_spark_exchange
    key = "spark.sql.execution.arrow.localRelationThreshold"
    before = spark.conf.get(key)
    data = _driver_rows(LOCAL_RELATION_ROWS + extra)
    # exchange types: as the key index gives its found records (lakesdk.engine.spark_types.for_spark_exchange)
    df = (arrow_frame(spark, data.cast(for_spark_exchange(data.schema)), from_arrow_schema(data.schema),
                      exchange_types=True) if vouched else arrow_frame(spark, data))
    assert spark.conf.get(key) == before                      # the session's setting is as it was
    got = df.toArrow().sort_by("n")
    assert got.num_rows == data.num_rows and got.column("k").equals(data.column("k"))
    assert got.column("ts").cast(data.schema.field("ts").type).equals(data.column("ts"))
    for name in ("d64", "d256", "fsb"):
        assert got.column(name).to_pylist() == data.column(name).to_pylist(), name
    if not is_connect(spark):   # beyond the rows of a local relation: Arrow batches, not rows in the plan
        assert _is_local_relation(df) == (extra == 0)
        assert df.rdd.getNumPartitions() <= parallelism(spark)


def test_the_session_setting_is_restored_when_the_rows_are_refused(spark):
    from pyspark.sql.types import LongType, StructField, StructType

    from lakesdk.engine.spark_cluster import LOCAL_RELATION_ROWS, arrow_frame
    key = "spark.sql.execution.arrow.localRelationThreshold"
    before = spark.conf.get(key)
    data = _driver_rows(LOCAL_RELATION_ROWS + 1)
    with pytest.raises(ValueError):   # text that is no number (pyarrow's ArrowInvalid)
        arrow_frame(spark, data, StructType([StructField(c, LongType()) for c in data.column_names]))
    assert spark.conf.get(key) == before


def test_threads_that_make_frames_at_once_leave_the_setting_as_it_was(spark):
    from concurrent.futures import ThreadPoolExecutor

    from lakesdk.engine.spark_cluster import LOCAL_RELATION_ROWS, arrow_frame
    key = "spark.sql.execution.arrow.localRelationThreshold"
    before = spark.conf.get(key)
    data = _driver_rows(LOCAL_RELATION_ROWS + 1)
    with ThreadPoolExecutor(4) as pool:
        frames = list(pool.map(lambda _: arrow_frame(spark, data), range(8)))
    assert spark.conf.get(key) == before
    assert frames[-1].count() == data.num_rows


def test_an_upsert_and_a_merge_of_many_driver_rows_on_spark(tmp_path, spark):
    """Beyond ``LOCAL_RELATION_ROWS`` the upsert's records, its index of the stored keys and a
    merge's source reach Spark as Arrow batches: the rows written are the same."""
    import pyarrow as pa

    from lakesdk.engine.spark_cluster import LOCAL_RELATION_ROWS
    n = LOCAL_RELATION_ROWS + 3_000
    lake = lk.Lake(str(tmp_path / "lake"), spark=spark, options=lk.TableOptions(engine="spark"))
    t = lake.create_table("t", key="id", ordering="ts", partition_by="p")
    t.bulk_insert(pa.table({"id": pa.array(range(n + 500), pa.int64()), "ts": pa.array([1] * (n + 500), pa.int64()),
                            "p": pa.array([f"p{i % 3}" for i in range(n + 500)])}))
    r = t.upsert(pa.table({"id": pa.array(range(n), pa.int64()), "ts": pa.array([2] * n, pa.int64()),
                           "p": pa.array([f"p{i % 3}" for i in range(n)])}))
    assert (r.updated, r.inserted) == (n, 0)
    src = pa.table({"id": pa.array(range(250, n + 750), pa.int64()), "ts": pa.array([3] * (n + 500), pa.int64()),
                    "p": pa.array([f"p{i % 3}" for i in range(250, n + 750)])})
    m = t.merge(src, on="id").when_matched_update_all().when_not_matched_insert_all().execute()
    assert (m.updated, m.inserted) == (n + 250, 250)
    got = t.read(columns=["id", "ts"]).to_arrow()
    want = {i: 1 if i < 250 else 3 for i in range(n + 750)}
    want.update({i: 2 for i in range(250)})
    assert dict(zip(got.column("id").to_pylist(), got.column("ts").to_pylist())) == want and got.num_rows == n + 750
