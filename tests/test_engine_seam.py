"""The engine seam: one chooser of a write's job, and reads planned against one timeline load."""

from __future__ import annotations

import pandas as pd
import pytest

import lakesdk as lk
from lakesdk.timeline.store import TimelineStore


def _rows(start: int, n: int, ts: int = 1) -> pd.DataFrame:
    return pd.DataFrame({"id": [str(i) for i in range(start, start + n)], "p": ["a", "b"] * (n // 2),
                         "ts": [ts] * n, "v": list(range(start, start + n))})


@pytest.mark.spark
@pytest.mark.parametrize("engine", ["local", "spark"])
def test_one_chooser_picks_the_write_job(engine, tmp_path, spark, monkeypatch):
    import lakesdk.engine.jobs as jobs
    from lakesdk.engine.local import LocalWriteJob
    from lakesdk.engine.spark import SparkWriteJob
    chosen = []
    real = jobs.write_job

    def spy(*args, **kwargs):
        job, data = real(*args, **kwargs)
        chosen.append(type(job))
        return job, data
    monkeypatch.setattr(jobs, "write_job", spy)
    lake = lk.Lake(str(tmp_path / "lake"), spark=spark, options=lk.TableOptions(engine=engine))
    t = lake.create_table("t", key="id", ordering="ts", partition_by="p")
    t.upsert(_rows(0, 4))
    t.upsert(_rows(2, 4, ts=2))
    assert chosen == [LocalWriteJob if engine == "local" else SparkWriteJob] * 2
    assert t.read().count() == 6


def test_a_read_plan_loads_the_timeline_once(tmp_path, monkeypatch):
    """One load for the whole plan (view, schema, time-travel guard, incremental range); the
    file-system view's listing loads it once more to see whether a clean ran meanwhile."""
    import sys
    lake = lk.Lake(str(tmp_path / "lake"), options=lk.TableOptions(engine="local"))
    t = lake.create_table("t", key="id", ordering="ts", partition_by="p")
    first = t.upsert(_rows(0, 4))
    t.upsert(_rows(2, 4, ts=2))
    loads = []
    real = TimelineStore.load

    def counting(self, *args, **kwargs):
        if sys._getframe(1).f_code.co_name != "_list":   # FileSystemView's check after listing
            loads.append(1)
        return real(self, *args, **kwargs)
    monkeypatch.setattr(TimelineStore, "load", counting)
    for q in (t.read(where="p = 'a'"), t.as_of(first), t.incremental(start=first.instant)):
        loads.clear()
        plan = q.plan()
        assert len(loads) == 1, q
        assert plan.slices
    assert t.read(where="p = 'a'").plan().pruned_partitions == 1


def test_query_and_read_plan_keep_their_home():
    from lakesdk.engine.read import ReadPlan
    from lakesdk.read.plan import ReadPlan as Planned
    from lakesdk.table.query import Query
    from lakesdk.table.query import ReadPlan as Public
    assert Public is ReadPlan is Planned
    assert lk.Query is Query
