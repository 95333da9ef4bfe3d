"""lakesdk reads the tables Apache Hudi wrote (../shared/conformance) with the expected rows."""

from __future__ import annotations

import pytest

import lakesdk as lk

from ..conftest import conformance_table

ROWS4 = [(1, "Alice", False), (2, "Bob", False), (3, "Carol", True), (4, "Diana", True)]
FIRST3 = [(1, "Alice", True), (2, "Bob", False), (3, "Carol", True)]
COLS = ["id", "name", "isActive"]


def rows(query) -> list[tuple]:
    t = query.to_arrow().select(COLS).sort_by("id")
    return [tuple(r.values()) for r in t.to_pylist()]


def open_(conformance_dir, rel):
    return lk.open_table(conformance_table(conformance_dir, rel))


COW = ["v6_nonpartitioned", "v8_nonpartitioned", "v6_complexkeygen_hivestyle", "v8_complexkeygen_hivestyle",
       "v6_simplekeygen_nonhivestyle", "v8_simplekeygen_nonhivestyle"]


@pytest.mark.parametrize("name", COW)
def test_cow_snapshot_and_first_commit(conformance_dir, name):
    t = open_(conformance_dir, f"sample_table/cow/{name}")
    assert rows(t.read()) == ROWS4
    first = t.timeline.commits[0]
    assert rows(t.as_of(first.requested)) == FIRST3
    # time travel by wall clock: a moment just before the second commit
    second = t.timeline.commits[1]
    assert rows(t.as_of(int(second.requested) - 1)) == FIRST3


@pytest.mark.parametrize("name", ["v6_nonpartitioned", "v8_nonpartitioned"])
def test_nonpartitioned_projection_and_filter(conformance_dir, name):
    t = open_(conformance_dir, f"sample_table/cow/{name}")
    proj = t.read(columns=["id", "name"]).to_arrow()
    assert proj.num_columns == 2 and proj.num_rows == 4
    got = t.read(columns=["id", "name"], where="isActive = true").to_arrow().sort_by("id").to_pylist()
    assert got == [{"id": 3, "name": "Carol"}, {"id": 4, "name": "Diana"}]


@pytest.mark.parametrize("name", ["v6_complexkeygen_hivestyle", "v8_complexkeygen_hivestyle"])
def test_complexkeygen_filters(conformance_dir, name):
    t = open_(conformance_dir, f"sample_table/cow/{name}")
    q = t.read(where="byteField >= 10 AND byteField < 20 AND shortField != 100")
    assert rows(q) == [(1, "Alice", False), (3, "Carol", True)]
    assert q.plan().pruned_partitions == 2
    keys = t.read(columns=["_hoodie_record_key"]).to_arrow().column(0).to_pylist()
    assert "id:1,name:Alice" in keys


@pytest.mark.parametrize("name", ["v6_simplekeygen_nonhivestyle", "v8_simplekeygen_nonhivestyle"])
def test_simplekeygen_partition_pruning(conformance_dir, name):
    t = open_(conformance_dir, f"sample_table/cow/{name}")
    q = t.read(where=[("byteField", "=", 10)])
    plan = q.plan()
    assert plan.total_partitions == 3 and len(plan.slices) == 1
    assert rows(q) == [(1, "Alice", False), (3, "Carol", True)]


def test_overwrite_table_incremental(conformance_dir):
    t = open_(conformance_dir, "sample_table/cow/v6_simplekeygen_nonhivestyle_overwritetable")
    c1, c2, c3 = (i.requested for i in t.timeline.commits)
    assert t.timeline.commits[2].action == "replacecommit"
    assert rows(t.incremental(None, c1)) == FIRST3
    assert rows(t.incremental(c1, c2)) == [(1, "Alice", False), (4, "Diana", True)]
    assert rows(t.incremental(c2, c3)) == [(4, "Diana", False)]
    assert rows(t.incremental(c1, None)) == [(4, "Diana", False)]
    assert rows(t.incremental(c3, None)) == []
    assert rows(t.read()) == [(4, "Diana", False)]


@pytest.mark.parametrize("name", ["v6_simplekeygen_hivestyle_no_metafields", "v8_simplekeygen_hivestyle_no_metafields",
                                  "v6_timebasedkeygen_nonhivestyle"])
def test_other_layouts(conformance_dir, name):
    t = open_(conformance_dir, f"sample_table/cow/{name}")
    assert rows(t.read()) == ROWS4


def test_timebased_partition_column(conformance_dir):
    t = open_(conformance_dir, "sample_table/cow/v6_timebasedkeygen_nonhivestyle")
    parts = sorted(set(t.read(columns=["_hoodie_partition_path"]).to_arrow().column(0).to_pylist()))
    assert parts[0] == "2023/04/01/12" and len(parts) == 4


@pytest.mark.parametrize("name", ["cow/v6_empty", "cow/v8_empty", "mor/parquet/v6_empty"])
def test_empty_tables(conformance_dir, name):
    t = open_(conformance_dir, f"sample_table/{name}")
    snap = t.read().to_arrow()
    assert snap.num_rows == 0 and snap.schema.names[:3] == COLS
    assert t.incremental().to_arrow().num_rows == 0


def test_read_through_spark(conformance_dir, spark):
    t = lk.open_table(conformance_table(conformance_dir, "sample_table/cow/v8_complexkeygen_hivestyle"), spark=spark)
    df = t.read(where="byteField >= 10 AND byteField < 20 AND shortField != 100").to_spark()
    got = sorted((r["id"], r["name"], r["isActive"]) for r in df.select(*COLS).collect())
    assert got == [(1, "Alice", False), (3, "Carol", True)]
