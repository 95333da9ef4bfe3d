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
