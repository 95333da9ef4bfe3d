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

    def after_listing() -> bool:
        f = sys._getframe(2)
        while f is not None and f.f_code.co_name != "_listed":
            f = f.f_back
        return f is not None

    def counting(self, *args, **kwargs):
        # FileSystemView's check after listing (made by the listing), and the metadata table's
        # own timeline, aside
        if not after_listing() and not self.storage.base_url.rstrip("/").endswith("metadata"):
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
    from lakesdk.format.read_plan import ReadPlan
    from lakesdk.table import ReadPlan as Public
    from lakesdk.table.query import Query
    assert Public is ReadPlan
    assert lk.Query is Query


def test_inserts_counted_on_the_driver_are_what_the_join_leaves():
    """With the key index on the driver, the Spark write counts its inserts there: the
    incoming upserts whose (partition, key) the index did not find, by partition (deletes
    and found keys are not inserts), as the tagging join would leave them (generated)."""
    import pyarrow as pa
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from lakesdk.engine.key_index import untagged_upserts
    from lakesdk.merge.ordering import KEY, OP, PART

    pair = st.tuples(st.sampled_from(["", "a", "b/c"]), st.sampled_from([str(i) for i in range(12)]))

    @settings(max_examples=200, deadline=None)
    @given(incoming=st.dictionaries(pair, st.sampled_from([0, 1])), stored=st.lists(pair))
    def check(incoming, stored):
        inc = pa.table({PART: [p for p, _ in incoming], KEY: [k for _, k in incoming],
                        OP: pa.array(list(incoming.values()), pa.int8())})
        found = pa.table({KEY: [k for _, k in stored], PART: [p for p, _ in stored],
                          "_lk_fid": ["f"] * len(stored)})
        want: dict[str, int] = {}
        for (p, k), op in incoming.items():
            if op == 0 and (p, k) not in set(stored):
                want[p] = want.get(p, 0) + 1
        assert untagged_upserts(inc, found) == want
    check()


def test_file_group_runs_cut_sorted_batches_into_one_table_per_file_group():
    """The Spark write cuts each task's records, sorted by file id and arriving in batches
    of any size, into one table per file group (generated; a null id is a group too)."""
    import pyarrow as pa
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from lakesdk.engine.spark import FID, file_group_runs

    @settings(max_examples=200, deadline=None)
    @given(ids=st.lists(st.one_of(st.none(), st.sampled_from(["f1", "f2", "f3", "f4"]))),
           cuts=st.lists(st.integers(0, 60)))
    def check(ids, cuts):
        ordered = sorted(ids, key=lambda x: (x is not None, x or ""))
        t = pa.table({FID: pa.array(ordered, pa.string()), "row": list(range(len(ordered)))})
        bounds = sorted({0, len(ordered), *[c for c in cuts if c < len(ordered)]})
        batches = [b for a, e in zip(bounds, bounds[1:]) for b in t.slice(a, e - a).to_batches()]
        # Spark may mark a column NOT NULL in some batches of a task and not in others
        strict = pa.schema([pa.field(FID, pa.string()), pa.field("row", pa.int64(), nullable=False)])
        batches = [pa.RecordBatch.from_arrays(b.columns, schema=strict) if i % 2 else b for i, b in enumerate(batches)]
        runs = list(file_group_runs(iter(batches)))
        want = []
        for fid in dict.fromkeys(ordered):
            want.append([i for i, x in enumerate(ordered) if x == fid])
        assert [r.column("row").to_pylist() for r in runs] == want
        assert all(len(set(r.column(FID).to_pylist())) == 1 for r in runs)
    check()
